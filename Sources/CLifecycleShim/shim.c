// CLifecycleShim: see include/CLifecycleShim.h for why this file exists.
#define _GNU_SOURCE
#include "CLifecycleShim.h"

#include <errno.h>
#include <sys/resource.h>
#include <limits.h>
#include <grp.h>
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define LC_MAX_FDS 16

/// clone_args as of Linux 5.7 (with the cgroup field); defined here so the
/// shim builds against older kernel headers too.
struct lc_clone_args {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
        set_tid_size, cgroup;
};

struct lc_failure {
    int step;
    int err;
};

/// Only async-signal-safe calls from here on (we are a fork of a
/// multi-threaded process): report the failure and leave.
__attribute__((noreturn)) static void child_fail(int pipe_fd, int step) {
    struct lc_failure f = {step, errno};
    ssize_t ignored = write(pipe_fd, &f, sizeof f);
    (void)ignored;
    _exit(127);
}

static void close_from(unsigned lo, unsigned hi) {
    if (lo > hi) return;
    if (syscall(SYS_close_range, lo, hi, 0) == 0) return;
    for (unsigned fd = lo; fd <= hi && fd < 65536; fd++) close((int)fd);
}

/// The child's side: put the fds in place (closing the daemon's), join the
/// v1 memory cgroup, reset signals, lead a new session, change directory,
/// exec. The daemon's descriptors go first, before anything that can block
/// (the v1 join waits for an RCU grace period, 10-25 ms): a child must never
/// hold the daemon's sockets or files past the daemon's death.
__attribute__((noreturn)) static void child(const struct lc_spawn_request *req, int pipe_fd) {
    // File descriptors. First lift every source above all targets and the
    // pipe (so no dup2 can clobber a source not yet moved), then dup2 each
    // into place (dup2 clears FD_CLOEXEC), then close the rest.
    int n = req->fd_map_count;
    int targets[LC_MAX_FDS], lifted[LC_MAX_FDS];
    int top = pipe_fd;
    for (int i = 0; i < n; i++) {
        targets[i] = req->fd_map[2 * i + 1];
        if (targets[i] > top) top = targets[i];
        if (req->fd_map[2 * i] > top) top = req->fd_map[2 * i];
    }
    // The pipe's number may be one of the targets: lift it first, too.
    pipe_fd = fcntl(pipe_fd, F_DUPFD_CLOEXEC, top + 1);
    if (pipe_fd < 0) _exit(127);
    top = pipe_fd;
    for (int i = 0; i < n; i++) {
        lifted[i] = fcntl(req->fd_map[2 * i], F_DUPFD_CLOEXEC, top + 1);
        if (lifted[i] < 0) child_fail(pipe_fd, LC_STEP_FDS);
    }
    // The v1 group's cgroup.procs is kept through the closing below, lifted
    // above every target so that no dup2 lands on it.
    int v1_procs = -1;
    if (req->v1_procs_fd >= 0) {
        v1_procs = fcntl(req->v1_procs_fd, F_DUPFD_CLOEXEC, top + 1 + n);
        if (v1_procs < 0) child_fail(pipe_fd, LC_STEP_FDS);
    }
    for (int i = 0; i < n; i++) {
        if (dup2(lifted[i], targets[i]) < 0) child_fail(pipe_fd, LC_STEP_FDS);
    }
    // Close every fd >= 3 that is not a target and not the pipe (which is
    // close-on-exec and reports exec failures). Sort targets plus the pipe.
    int keep[LC_MAX_FDS + 2], k = 0;
    for (int i = 0; i < n; i++) keep[k++] = targets[i];
    keep[k++] = pipe_fd;
    if (v1_procs >= 0) keep[k++] = v1_procs;
    for (int i = 1; i < k; i++) {
        int v = keep[i], j = i - 1;
        while (j >= 0 && keep[j] > v) { keep[j + 1] = keep[j]; j--; }
        keep[j + 1] = v;
    }
    unsigned next = 3;
    for (int i = 0; i < k; i++) {
        if (keep[i] < 3) continue;
        if ((unsigned)keep[i] > next) close_from(next, (unsigned)keep[i] - 1);
        if ((unsigned)keep[i] + 1 > next) next = (unsigned)keep[i] + 1;
    }
    close_from(next, ~0U);
    if (v1_procs >= 0) {
        // v1 memory charges do not move with a process: join before allocating.
        if (write(v1_procs, "0", 1) != 1) child_fail(pipe_fd, LC_STEP_CGROUP_V1);
        close(v1_procs);
    }

    // Signals: the daemon blocks SIGCHLD, SIGTERM, ... for its signalfd and
    // ignores SIGPIPE; both would be inherited across exec. Reset them.
    sigset_t none;
    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, NULL) != 0) child_fail(pipe_fd, LC_STEP_SIGNALS);
    // The raw system call: glibc's sigaction refuses its reserved signals
    // (32, 33), which a parent such as make may have ignored.
    struct { void (*handler)(int); unsigned long flags; void (*restorer)(void); unsigned long mask; } dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.handler = SIG_DFL;
    for (int s = 1; s <= 64; s++) {
        if (s == SIGKILL || s == SIGSTOP) continue;
        syscall(SYS_rt_sigaction, s, &dfl, NULL, sizeof dfl.mask);
    }

    // Its own session and process group: the fallback signals the group.
    if (setsid() < 0) child_fail(pipe_fd, LC_STEP_SESSION);
    const struct lc_spawn_credentials *c = req->credentials;
    if (c) {
        if (c->nice != INT_MIN) setpriority(PRIO_PROCESS, 0, c->nice);  // best effort: raising it always works
        if (c->umask >= 0) umask((mode_t)c->umask);
        // The bounding set first: dropping needs CAP_SETPCAP, which setuid takes away.
        for (int cap = 0; cap < 64; cap++) {
            if (c->keep_caps & (1ULL << cap)) continue;
            if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) child_fail(pipe_fd, LC_STEP_CAPABILITIES);
        }
        if (c->set_ids) {
            if (setgroups((size_t)c->group_count, c->groups) != 0 || setresgid(c->gid, c->gid, c->gid) != 0 ||
                setresuid(c->uid, c->uid, c->uid) != 0)
                child_fail(pipe_fd, LC_STEP_IDS);
        }
        if (c->no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) child_fail(pipe_fd, LC_STEP_NO_NEW_PRIVS);
    }
    if (req->cwd && chdir(req->cwd) != 0) child_fail(pipe_fd, LC_STEP_CWD);
    execve(req->path, req->argv, req->envp);
    child_fail(pipe_fd, LC_STEP_EXEC);
}

static ssize_t read_full(int fd, void *buf, size_t len) {
    size_t got = 0;
    while (got < len) {
        ssize_t r = read(fd, (char *)buf + got, len - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return r < 0 ? -1 : (ssize_t)got;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

pid_t lc_spawn(const struct lc_spawn_request *req, int *pidfd_out, int *failed_step, int *placed_atomically) {
    *failed_step = LC_STEP_CLONE;
    *pidfd_out = -1;
    *placed_atomically = 1;
    if (req->fd_map_count < 0 || req->fd_map_count > LC_MAX_FDS) {
        errno = EINVAL;
        return -1;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return -1;

    int pidfd = -1;
    struct lc_clone_args args;
    memset(&args, 0, sizeof args);
    args.flags = CLONE_PIDFD;
    args.pidfd = (uint64_t)(uintptr_t)&pidfd;
    args.exit_signal = SIGCHLD;
    if (req->cgroup_fd >= 0) {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = (uint64_t)req->cgroup_fd;
    }
    pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof args);
    if (pid < 0 && errno == ENOSYS) {
        // No clone3 (Linux < 5.3): fork, and the caller learns the child was
        // not placed atomically (it is moved below, before exec can run).
        pid = fork();
        if (pid > 0) {
            pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
            if (req->cgroup_fd >= 0) {
                *placed_atomically = 0;
                int procs = openat(req->cgroup_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
                if (procs >= 0) {
                    char buf[16];
                    int len = 0;
                    for (pid_t v = pid; v > 0; v /= 10) buf[len++] = (char)('0' + v % 10);
                    for (int i = 0; i < len / 2; i++) { char t = buf[i]; buf[i] = buf[len - 1 - i]; buf[len - 1 - i] = t; }
                    ssize_t ignored = write(procs, buf, (size_t)len);
                    (void)ignored;
                    close(procs);
                }
            }
        }
    }
    if (pid < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        errno = e;
        return -1;
    }
    if (pid == 0) {
        close(p[0]);
        child(req, p[1]);
    }

    close(p[1]);
    struct lc_failure f;
    ssize_t got = read_full(p[0], &f, sizeof f);
    close(p[0]);
    if (got == (ssize_t)sizeof f) {
        // The child failed before exec and has _exited: reap it.
        siginfo_t info;
        while (waitid(P_PID, (id_t)pid, &info, WEXITED) != 0 && errno == EINTR) {}
        if (pidfd >= 0) close(pidfd);
        *failed_step = f.step;
        errno = f.err;
        return -1;
    }
    *failed_step = 0;
    *pidfd_out = pidfd;
    return pid;
}

int lc_pidfd_send_signal(int pidfd, int sig) {
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

int lc_pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

static void fill(struct lc_child_status *st, const siginfo_t *info) {
    st->pid = info->si_pid;
    st->exited = info->si_code == CLD_EXITED;
    st->value = info->si_status;
}

int lc_peek_ended_child(struct lc_child_status *st) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    memset(st, 0, sizeof *st);
    while (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
        if (errno != EINTR) return -1;
    }
    if (info.si_pid != 0) fill(st, &info);
    return 0;
}

int lc_reap(pid_t pid, struct lc_child_status *st) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    memset(st, 0, sizeof *st);
    while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG) != 0) {
        if (errno != EINTR) return -1;
    }
    if (info.si_pid != 0) fill(st, &info);
    return 0;
}

int lc_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
    *pid = cred.pid;
    *uid = cred.uid;
    *gid = cred.gid;
    return 0;
}

int lc_notify_socket(const char *name) {
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    int on = 1;
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    size_t n = strlen(name);
    // A path ("/...") is a socket file, its access checked by the kernel
    // (mode 0600: strangers cannot send at all); an earlier daemon's
    // abstract name (no permissions at all) is still bound again as such.
    int path = name[0] == '/';
    if (n + (path ? 0 : 1) + 1 > sizeof addr.sun_path) { close(fd); errno = ENAMETOOLONG; return -1; }
    memcpy(addr.sun_path + (path ? 0 : 1), name, n);   // abstract: sun_path[0] == 0
    if (path) unlink(name);   // our own file, left by the run's earlier daemon
    if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0 ||
        bind(fd, (struct sockaddr *)&addr, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (path ? 0 : 1) + n)) != 0 ||
        (path && chmod(name, 0600) != 0)) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/// recvmsg of one buffer with room for control messages in `space`.
static ssize_t recv_with_control(int fd, void *buf, unsigned long len, void *space, size_t size, int flags,
                                 struct msghdr *msg, struct iovec *iov) {
    iov->iov_base = buf;
    iov->iov_len = len;
    memset(msg, 0, sizeof *msg);
    msg->msg_iov = iov;
    msg->msg_iovlen = 1;
    msg->msg_control = space;
    msg->msg_controllen = size;
    ssize_t r;
    do r = recvmsg(fd, msg, flags); while (r < 0 && errno == EINTR);
    return r;
}

/// The descriptors an SCM_RIGHTS message carried: kept in `fds` while
/// there is room (`max`), closed past it.
static void take_rights(struct cmsghdr *c, int *fds, int max, int *nfds) {
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; i++) {
        int passed;
        memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof passed);
        if (*nfds < max) fds[(*nfds)++] = passed;
        else close(passed);
    }
}

long lc_recv_notify(int fd, void *buf, unsigned long len, pid_t *pid) {
    union {
        struct cmsghdr align;
        char space[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int) * 16)];
    } control;
    struct iovec iov;
    struct msghdr msg;
    *pid = 0;
    ssize_t r = recv_with_control(fd, buf, len, control.space, sizeof control.space, MSG_CMSG_CLOEXEC | MSG_TRUNC,
                                  &msg, &iov);
    if (r < 0) return -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET) continue;
        if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
            struct ucred cred;
            memcpy(&cred, CMSG_DATA(c), sizeof cred);
            *pid = cred.pid;
        } else if (c->cmsg_type == SCM_RIGHTS) {
            int none = 0;
            take_rights(c, NULL, 0, &none);  // a notify message passes none we keep
        }
    }
    return (long)r;
}

long lc_send_with_fd(int sock, const void *buf, unsigned long len, int passfd) {
    union {
        struct cmsghdr align;
        char space[CMSG_SPACE(sizeof(int))];
    } control;
    struct iovec iov = {(void *)buf, len};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (passfd >= 0) {
        memset(&control, 0, sizeof control);
        msg.msg_control = control.space;
        msg.msg_controllen = sizeof control.space;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &passfd, sizeof passfd);
    }
    ssize_t r;
    do r = sendmsg(sock, &msg, MSG_NOSIGNAL); while (r < 0 && errno == EINTR);
    return (long)r;
}

long lc_recv_with_fds(int sock, void *buf, unsigned long len, int *fds, int max, int *nfds) {
    union {
        struct cmsghdr align;
        char space[CMSG_SPACE(sizeof(int) * 28)];
    } control;
    struct iovec iov;
    struct msghdr msg;
    *nfds = 0;
    ssize_t r = recv_with_control(sock, buf, len, control.space, sizeof control.space, MSG_DONTWAIT | MSG_CMSG_CLOEXEC,
                                  &msg, &iov);
    if (r < 0) return -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) take_rights(c, fds, max, nfds);
    }
    return (long)r;
}

#ifndef SYS_process_mrelease
#define SYS_process_mrelease 448   // the same number on every architecture
#endif

int lc_process_mrelease(int pidfd) { return (int)syscall(SYS_process_mrelease, pidfd, 0); }

int lc_xattr_flag(const char *path, const char *name, int on) {
    return on ? setxattr(path, name, "1", 1, 0) : removexattr(path, name);
}

int lc_xattr_exists(const char *path, const char *name) {
    if (getxattr(path, name, NULL, 0) >= 0) return 1;
    return errno == ENODATA ? 0 : -1;
}

int lc_become_subreaper(void) { return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }

int lc_is_subreaper(void) {
    int on = 0;
    return prctl(PR_GET_CHILD_SUBREAPER, &on, 0, 0, 0) == 0 && on != 0;
}

long long lc_monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// ---- Dying of a fatal signal ----------------------------------------------

static int fatal_fd = 2;
static char fatal_name[64] = "process";

static void put(const char *s) {
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(fatal_fd, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

static void put_number(long v) {
    char buf[24];
    int i = (int)sizeof buf - 1;
    buf[i] = 0;
    unsigned long u = v < 0 ? (unsigned long)-v : (unsigned long)v;
    do { buf[--i] = (char)('0' + u % 10); u /= 10; } while (u > 0 && i > 1);
    if (v < 0) buf[--i] = '-';
    put(buf + i);
}

// Async-signal-safe but for backtrace(), which is warmed up at install time
// so that it does not load libgcc here.
static void on_fatal_signal(int sig, siginfo_t *info, void *context) {
    (void)context;
    int saved = errno;
    put(fatal_name);
    put(": fatal signal SIG");
    put(sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
    if (info && info->si_code <= 0) {
        put(" sent by pid ");
        put_number(info->si_pid);
    }
    put("; backtrace follows, then the process ends\n");
    void *frames[64];
    int n = backtrace(frames, 64);
    backtrace_symbols_fd(frames, n, fatal_fd);
    errno = saved;
    // SA_RESETHAND restored the default action; SA_NODEFER lets the signal
    // in at once. A fault re-executes the faulting instruction on return.
    if (info == NULL || info->si_code <= 0 || sig == SIGABRT || sig == SIGQUIT) raise(sig);
}

int lc_die_on_fatal_signals(int fd, const char *name) {
    fatal_fd = fd;
    if (name) {
        strncpy(fatal_name, name, sizeof fatal_name - 1);
        fatal_name[sizeof fatal_name - 1] = 0;
    }
    void *warm[1];
    (void)backtrace(warm, 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    const int signals[] = {SIGABRT, SIGQUIT, SIGSEGV, SIGBUS, SIGILL, SIGFPE};
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) {
        if (sigaction(signals[i], &sa, NULL) != 0) return -1;
    }
    return 0;
}

// ---- Processes that are not our children ------------------------------------

// struct pidfd_info as of Linux 6.15 (64 bytes: the size the ioctl number
// encodes; the kernel accepts any size from 64 up).
struct lc_pidfd_info {
    uint64_t mask;
    uint64_t cgroupid;
    uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
    int32_t exit_code;
};
#define LC_PIDFD_GET_INFO _IOWR(0xFF, 11, struct lc_pidfd_info)
#define LC_PIDFD_INFO_EXIT (1ULL << 3)

int lc_pidfd_exit_status(int pidfd, int *exited, int *value) {
    struct lc_pidfd_info info;
    memset(&info, 0, sizeof info);
    info.mask = LC_PIDFD_INFO_EXIT;
    if (ioctl(pidfd, LC_PIDFD_GET_INFO, &info) != 0) return -1;
    if (!(info.mask & LC_PIDFD_INFO_EXIT)) {
        errno = EAGAIN;
        return -1;
    }
    int status = info.exit_code;
    if (WIFEXITED(status)) {
        *exited = 1;
        *value = WEXITSTATUS(status);
    } else {
        *exited = 0;
        *value = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    }
    return 0;
}

unsigned long long lc_process_start_time(int pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[1024];
    ssize_t n = read_full(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    // The command (field 2) may hold spaces and parentheses: count from the last ')'.
    char *p = strrchr(buf, ')');
    if (!p) return 0;
    p++;
    // p is at the space before field 3; step to the space before field 22.
    for (int field = 3; field < 22 && p; field++) p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}
