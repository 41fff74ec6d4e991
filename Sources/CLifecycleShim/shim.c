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
#include <sys/epoll.h>
#include <sys/mman.h>
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
#ifndef CLONE_PARENT
#define CLONE_PARENT 0x00008000
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

/// Every signal unblocked and back to its default disposition (async-signal-safe).
/// The raw system call: glibc's sigaction refuses its reserved signals
/// (32, 33), which a parent such as make may have ignored.
static int reset_signals(void) {
    sigset_t none;
    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, NULL) != 0) return -1;
    struct { void (*handler)(int); unsigned long flags; void (*restorer)(void); unsigned long mask; } dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.handler = SIG_DFL;
    for (int s = 1; s <= 64; s++) {
        if (s == SIGKILL || s == SIGSTOP) continue;
        syscall(SYS_rt_sigaction, s, &dfl, NULL, sizeof dfl.mask);
    }
    return 0;
}

/// /proc/self/oom_score_adj = value, before exec (async-signal-safe: no
/// stdio). Best effort, as nice: raising it needs no privilege, and a
/// write refused here, with the daemon's rights and its /proc, would have
/// been refused to the daemon's own writes too, which were always best
/// effort (docs/architecture.md, the kernel's OOM killer).
static void set_oom_score_adj(int value) {
    char text[16];
    char *end = text + sizeof text, *at = end;
    unsigned magnitude = value < 0 ? 0u - (unsigned)value : (unsigned)value;
    do {
        *--at = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude > 0 && at > text + 1);
    if (value < 0) *--at = '-';
    int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t ignored = write(fd, at, (size_t)(end - at));
    (void)ignored;
    close(fd);
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
    if (reset_signals() != 0) child_fail(pipe_fd, LC_STEP_SIGNALS);

    // Its own session and process group: the fallback signals the group.
    if (setsid() < 0) child_fail(pipe_fd, LC_STEP_SESSION);
    const struct lc_spawn_credentials *c = req->credentials;
    if (c) {
        if (c->nice != INT_MIN) setpriority(PRIO_PROCESS, 0, c->nice);  // best effort: raising it always works
        if (c->oom_score_adj != INT_MIN) set_oom_score_adj(c->oom_score_adj);  // the same
        if (c->umask >= 0) umask((mode_t)c->umask);
        // The bounding set first: dropping needs CAP_SETPCAP, which setuid takes away.
        for (int cap = 0; cap < 64; cap++) {
            if (c->keep_caps & (1ULL << cap)) continue;
            if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) child_fail(pipe_fd, LC_STEP_CAPABILITIES);
        }
        // The system calls themselves: glibc's wrappers may signal every
        // thread it knows of to change theirs too (setxid), and in the
        // helper's child, which shares the helper's memory, those would be
        // the helper's. The child is one thread: the call changes it all.
        if (c->set_ids) {
            if (syscall(SYS_setgroups, (size_t)c->group_count, c->groups) != 0 ||
                syscall(SYS_setresgid, c->gid, c->gid, c->gid) != 0 || syscall(SYS_setresuid, c->uid, c->uid, c->uid) != 0)
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

#ifndef CLONE_VM
#define CLONE_VM 0x00000100
#endif
#ifndef CLONE_VFORK
#define CLONE_VFORK 0x00004000
#endif

/// The spawn helper's way, as glibc's and musl's posix_spawn: a child that
/// shares the helper's memory (CLONE_VM) on a stack of its own, while the
/// helper waits (CLONE_VFORK) until it has exec'd or _exited. No page
/// table is copied at the clone nor torn down at the exec, and no page is
/// faulted in copy-on-write by either side: with a forked copy that was
/// most of a launch's time in the helper (docs/performance.md, "The spawn
/// helper's child shares its memory"). Only the helper does it: it is one
/// thread with default signal handlers, so nothing else runs in the shared
/// memory meanwhile and no handler of the daemon's can run on the child's
/// stack. x86-64 only, for the few instructions below (a child must not
/// return through the C frame it shares with its parent); elsewhere the
/// helper's clone copies its small address space, as before (and with
/// -DLC_COPIED_CLONE, to compare).
#if defined(__x86_64__) && !defined(LC_COPIED_CLONE)
#define LC_SHARED_CLONE 1
#define LC_CHILD_STACK (128u * 1024u)
static char *shared_clone_stack;

struct lc_child_start {
    const struct lc_spawn_request *req;
    int pipe_fd;
};

__attribute__((noreturn)) static void child(const struct lc_spawn_request *req, int pipe_fd);

static int child_entry(void *arg) {
    const struct lc_child_start *start = arg;
    child(start->req, start->pipe_fd);
}

/// clone3 whose child calls fn(arg) on args->stack and exits with its
/// value: the raw system call, since the child must not return through a
/// libc wrapper's frame on the parent's stack. -errno on failure.
static long clone3_on_own_stack(struct lc_clone_args *args, int (*fn)(void *), void *arg) {
    long ret;
    __asm__ volatile(
        "mov %[fn], %%r12\n\t"
        "mov %[arg], %%r13\n\t"
        "syscall\n\t"
        "test %%rax, %%rax\n\t"
        "jnz 1f\n\t"
        // The child: a fresh frame on its own stack, fn(arg), exit(value).
        "xor %%ebp, %%ebp\n\t"
        "mov %%r13, %%rdi\n\t"
        "call *%%r12\n\t"
        "mov %%eax, %%edi\n\t"
        "mov %[exit], %%eax\n\t"
        "syscall\n\t"
        "ud2\n"
        "1:"
        : "=a"(ret)
        : "0"((long)SYS_clone3), "D"(args), "S"(sizeof *args), [fn] "r"(fn), [arg] "r"(arg),
          [exit] "i"(SYS_exit)
        : "rcx", "r11", "r12", "r13", "memory", "cc");
    return ret;
}
#else
#define LC_SHARED_CLONE 0
#endif

/// clone3 (with `extra` flags: CLONE_PARENT from the helper), the child's
/// set-up, and the wait for its exec or its failure. `reap`: the failed
/// child is ours to reap (not so under CLONE_PARENT: the daemon reaps it).
static pid_t spawn_with(const struct lc_spawn_request *req, uint64_t extra, int reap, int *pidfd_out,
                        int *failed_step, int *placed_atomically, pid_t *failed_pid) {
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
    args.flags = CLONE_PIDFD | extra;
    args.pidfd = (uint64_t)(uintptr_t)&pidfd;
    // Under CLONE_PARENT the kernel takes the caller's own exit signal
    // (SIGCHLD: the helper was forked) and refuses any other.
    args.exit_signal = (extra & CLONE_PARENT) ? 0 : SIGCHLD;
    if (req->cgroup_fd >= 0) {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = (uint64_t)req->cgroup_fd;
    }
    pid_t pid;
#if LC_SHARED_CLONE
    if ((extra & CLONE_PARENT) && shared_clone_stack) {
        // The helper's child (above); the pipe still reports a failure
        // before exec, already written when the clone returns.
        struct lc_child_start start = {req, p[1]};
        args.flags |= CLONE_VM | CLONE_VFORK;
        args.stack = (uint64_t)(uintptr_t)shared_clone_stack;
        args.stack_size = LC_CHILD_STACK;
        long r = clone3_on_own_stack(&args, child_entry, &start);
        if (r < 0) errno = (int)-r;
        pid = r < 0 ? -1 : (pid_t)r;
    } else
#endif
        pid = (pid_t)syscall(SYS_clone3, &args, sizeof args);
    if (pid < 0 && errno == ENOSYS && extra == 0) {
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
        if (reap) {
            while (waitid(P_PID, (id_t)pid, &info, WEXITED) != 0 && errno == EINTR) {}
        }
        if (failed_pid) *failed_pid = pid;
        if (pidfd >= 0) close(pidfd);
        *failed_step = f.step;
        errno = f.err;
        return -1;
    }
    *failed_step = 0;
    *pidfd_out = pidfd;
    return pid;
}

pid_t lc_spawn(const struct lc_spawn_request *req, int *pidfd_out, int *failed_step, int *placed_atomically) {
    return spawn_with(req, 0, 1, pidfd_out, failed_step, placed_atomically, NULL);
}

int lc_pidfd_send_signal(int pidfd, int sig) {
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

int lc_pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

int lc_reap_pidfd(int pidfd) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    while (waitid((idtype_t)P_PIDFD, (id_t)pidfd, &info, WEXITED | WNOHANG) != 0) {
        if (errno != EINTR) return -1;
    }
    return info.si_pid != 0 ? 1 : 0;
}

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

/// One message with `n` descriptors as SCM_RIGHTS (none when n is 0).
static ssize_t send_with_fds(int sock, const void *buf, size_t len, const int *fds, int n) {
    union {
        struct cmsghdr align;
        char space[CMSG_SPACE(sizeof(int) * 28)];
    } control;
    struct iovec iov = {(void *)buf, len};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (n > 28) {
        errno = EINVAL;
        return -1;
    }
    if (n > 0) {
        memset(&control, 0, sizeof control);
        msg.msg_control = control.space;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
    }
    ssize_t r;
    do r = sendmsg(sock, &msg, MSG_NOSIGNAL); while (r < 0 && errno == EINTR);
    return r;
}

long lc_send_with_fd(int sock, const void *buf, unsigned long len, int passfd) {
    return (long)send_with_fds(sock, buf, len, &passfd, passfd >= 0 ? 1 : 0);
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

void lc_name_thread(const char *name) { prctl(PR_SET_NAME, name, 0, 0, 0); }

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

/// Reads /proc/PID/stat into buf; returns where field `field` (>= 3)
/// starts, or NULL. The command (field 2) may hold spaces and
/// parentheses: fields are counted from the last ')'.
static const char *proc_stat_field(int pid, int field, char *buf, size_t len) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    ssize_t n = read_full(fd, buf, len - 1);
    close(fd);
    if (n <= 0) return NULL;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    // p is at the ')'; each space passed starts the next field.
    for (int f = 2; f < field && p; f++) p = strchr(p + 1, ' ');
    return p ? p + 1 : NULL;
}

unsigned long long lc_process_start_time(int pid) {
    char buf[1024];
    const char *p = proc_stat_field(pid, 22, buf, sizeof buf);
    return p ? strtoull(p, NULL, 10) : 0;
}

/// Field 52 of /proc/PID/stat (exit_code, in waitpid's form) while the
/// process is a zombie (state Z, field 3): how it ended, before its parent
/// reaps it. 0 with *exited and *value as lc_pidfd_exit_status; -1 when
/// the process is not a zombie or cannot be read.
int lc_zombie_exit_status(int pid, int *exited, int *value) {
    char buf[1024];
    const char *p = proc_stat_field(pid, 3, buf, sizeof buf);
    if (!p || *p != 'Z') return -1;
    for (int field = 3; field < 52 && p; field++) {
        p = strchr(p, ' ');
        if (p) p++;
    }
    char *end;
    long status = p ? strtol(p, &end, 10) : 0;
    if (!p || end == p) return -1;
    if (WIFEXITED((int)status)) {
        *exited = 1;
        *value = WEXITSTATUS((int)status);
    } else {
        *exited = 0;
        *value = WIFSIGNALED((int)status) ? WTERMSIG((int)status) : 0;
    }
    return 0;
}

// MARK: - The spawn helper

/// The request as it crosses the helper's socket: this header, then the
/// fd map's targets (int32 each), the supplementary groups (gid_t each),
/// then the strings, each NUL-terminated: path, cwd (when has_cwd), argv,
/// envp. The descriptors ride along as SCM_RIGHTS, in this order: the
/// cgroup directory (when has_cgroup), the v1 cgroup.procs (when has_v1),
/// the fd map's sources.
struct lc_helper_request {
    uint32_t magic;
    int32_t has_cgroup, has_v1, fd_map_count, has_cwd, has_credentials;
    int32_t set_ids, group_count, no_new_privs, umask, nice, oom_score_adj, argc, envc;
    uint32_t uid, gid;
    uint64_t keep_caps;
    uint32_t strings_length;
};

/// The answer: the pid (> 0) with its pidfd as SCM_RIGHTS, or the failed
/// step and errno, with the pid of a child that failed before exec (the
/// daemon's child under CLONE_PARENT, so the daemon reaps it) or 0.
struct lc_helper_reply {
    int32_t pid, step, err, atomic, failed_pid;
};

#define LC_HELPER_MAGIC 0x6c637331u   /* "lcs1" */
#define LC_HELPER_MAX_MESSAGE (1u << 20)
#define LC_HELPER_MAX_FDS (LC_MAX_FDS + 2)

static void helper_reply(int sock, const struct lc_helper_reply *r, int pidfd) {
    (void)send_with_fds(sock, r, sizeof *r, &pidfd, pidfd >= 0 ? 1 : 0);
}

/// Takes `n` NUL-terminated strings from [*at, end) into out[0..n), NULL after.
static int take_strings(char **at, char *end, char **out, int n) {
    for (int i = 0; i < n; i++) {
        char *nul = memchr(*at, 0, (size_t)(end - *at));
        if (!nul) return -1;
        out[i] = *at;
        *at = nul + 1;
    }
    out[n] = NULL;
    return 0;
}

/// One request: parse, spawn with CLONE_PARENT, answer, close what came.
static void helper_serve(int sock, char *buf, ssize_t len, int *fds, int nfds, char **pointers, size_t capacity) {
    struct lc_helper_reply reply = {0, LC_STEP_HELPER, EPROTO, 0, 0};
    struct lc_helper_request h;
    if ((size_t)len < sizeof h) goto answer;
    memcpy(&h, buf, sizeof h);
    size_t fixed = sizeof h + (size_t)h.fd_map_count * sizeof(int32_t) + (size_t)h.group_count * sizeof(gid_t);
    if (h.magic != LC_HELPER_MAGIC || h.fd_map_count < 0 || h.fd_map_count > LC_MAX_FDS || h.group_count < 0 ||
        h.group_count > 65536 || h.argc < 1 || h.envc < 0 || (size_t)h.argc + (size_t)h.envc + 2 > capacity ||
        fixed + h.strings_length != (size_t)len ||
        nfds != !!h.has_cgroup + !!h.has_v1 + h.fd_map_count)
        goto answer;
    int32_t targets[LC_MAX_FDS];
    memcpy(targets, buf + sizeof h, (size_t)h.fd_map_count * sizeof(int32_t));
    gid_t *groups = (gid_t *)(void *)(buf + sizeof h + (size_t)h.fd_map_count * sizeof(int32_t));
    char *at = buf + fixed, *end = buf + len;
    char *path = NULL, *cwd = NULL;
    char *one[2];
    if (take_strings(&at, end, one, 1) != 0) goto answer;
    path = one[0];
    if (h.has_cwd) {
        if (take_strings(&at, end, one, 1) != 0) goto answer;
        cwd = one[0];
    }
    char **argv = pointers, **envp = pointers + h.argc + 1;
    if (take_strings(&at, end, argv, h.argc) != 0 || take_strings(&at, end, envp, h.envc) != 0) goto answer;
    int k = 0;
    int cgroup_fd = h.has_cgroup ? fds[k++] : -1;
    int v1_fd = h.has_v1 ? fds[k++] : -1;
    int map[2 * LC_MAX_FDS];
    for (int i = 0; i < h.fd_map_count; i++) {
        map[2 * i] = fds[k++];
        map[2 * i + 1] = targets[i];
    }
    struct lc_spawn_credentials creds = {h.set_ids, h.uid, h.gid, groups, h.group_count, h.no_new_privs,
                                         h.keep_caps, h.umask, h.nice, h.oom_score_adj};
    struct lc_spawn_request req = {path, argv, envp, cwd, cgroup_fd, v1_fd, map, h.fd_map_count,
                                   h.has_credentials ? &creds : NULL};
    int pidfd = -1, step = 0, atomic = 0;
    pid_t failed = 0;
    pid_t pid = spawn_with(&req, CLONE_PARENT, 0, &pidfd, &step, &atomic, &failed);
    if (pid > 0) {
        reply = (struct lc_helper_reply){pid, 0, 0, atomic, 0};
        helper_reply(sock, &reply, pidfd);
        close(pidfd);
        for (int i = 0; i < nfds; i++) close(fds[i]);
        return;
    }
    // No clone3 (Linux < 5.3, or valgrind): CLONE_PARENT has no fallback
    // here; the caller spawns by itself, with fork.
    if (step == LC_STEP_CLONE && errno == ENOSYS) step = LC_STEP_HELPER;
    reply = (struct lc_helper_reply){0, step, errno, 0, failed};
answer:
    helper_reply(sock, &reply, -1);
    for (int i = 0; i < nfds; i++) close(fds[i]);
}

/// The helper's life: until the daemon's end of the socket closes (its
/// exit, its crash or its execve), one request at a time.
__attribute__((noreturn)) static void helper_main(int sock) {
    // Nothing of the daemon's: its descriptors (a re-executed daemon holds
    // every app's), its blocked signals and handlers.
    sock = fcntl(sock, F_DUPFD_CLOEXEC, 3);
    if (sock < 0) _exit(1);
    if (sock != 3) {
        if (dup3(sock, 3, O_CLOEXEC) < 0) _exit(1);
        sock = 3;
    }
    close_from(4, ~0U);
    (void)reset_signals();
    prctl(PR_SET_NAME, "lifecycled-fork", 0, 0, 0);
    // Buffers from mmap, not malloc (this is a fork of a threaded process).
    char *buf = mmap(NULL, LC_HELPER_MAX_MESSAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    size_t capacity = LC_HELPER_MAX_MESSAGE + 2;
    char **pointers = mmap(NULL, capacity * sizeof(char *), PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (buf == MAP_FAILED || pointers == MAP_FAILED) _exit(1);
#if LC_SHARED_CLONE
    // The children's stack, below a guard page; one child at a time uses it
    // (the helper waits for each). Without it the clone copies, as before.
    char *stack = mmap(NULL, LC_CHILD_STACK + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
                       -1, 0);
    if (stack != MAP_FAILED && mprotect(stack, 4096, PROT_NONE) == 0) shared_clone_stack = stack + 4096;
#endif
    for (;;) {
        union { struct cmsghdr align; char space[CMSG_SPACE(sizeof(int) * LC_HELPER_MAX_FDS)]; } control;
        struct iovec iov;
        struct msghdr msg;
        ssize_t n = recv_with_control(sock, buf, LC_HELPER_MAX_MESSAGE, control.space, sizeof control.space,
                                      MSG_CMSG_CLOEXEC, &msg, &iov);
        if (n <= 0) _exit(0);
        int fds[LC_HELPER_MAX_FDS], nfds = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) take_rights(c, fds, LC_HELPER_MAX_FDS, &nfds);
        }
        if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) n = 0;  // refused below as malformed
        helper_serve(sock, buf, n, fds, nfds, pointers, capacity);
    }
}

int lc_spawn_helper_start(pid_t *pid_out) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(sv[0]);
        close(sv[1]);
        errno = e;
        return -1;
    }
    if (pid == 0) helper_main(sv[1]);
    close(sv[1]);
    *pid_out = pid;
    return sv[0];
}

pid_t lc_spawn_via(int helper, const struct lc_spawn_request *req, int *pidfd_out, int *failed_step,
                   int *placed_atomically) {
    *failed_step = LC_STEP_HELPER;
    *pidfd_out = -1;
    *placed_atomically = 1;
    const struct lc_spawn_credentials *c = req->credentials;
    int argc = 0, envc = 0;
    while (req->argv[argc]) argc++;
    while (req->envp[envc]) envc++;
    if (req->fd_map_count < 0 || req->fd_map_count > LC_MAX_FDS || argc < 1) {
        errno = EINVAL;
        return -1;
    }
    struct lc_helper_request h;
    memset(&h, 0, sizeof h);
    h.magic = LC_HELPER_MAGIC;
    h.has_cgroup = req->cgroup_fd >= 0;
    h.has_v1 = req->v1_procs_fd >= 0;
    h.fd_map_count = req->fd_map_count;
    h.has_cwd = req->cwd != NULL;
    h.has_credentials = c != NULL;
    if (c) {
        h.set_ids = c->set_ids;
        h.uid = c->uid;
        h.gid = c->gid;
        h.group_count = c->group_count;
        h.no_new_privs = c->no_new_privs;
        h.keep_caps = c->keep_caps;
        h.umask = c->umask;
        h.nice = c->nice;
        h.oom_score_adj = c->oom_score_adj;
    }
    h.argc = argc;
    h.envc = envc;
    size_t strings = strlen(req->path) + 1 + (req->cwd ? strlen(req->cwd) + 1 : 0);
    for (int i = 0; i < argc; i++) strings += strlen(req->argv[i]) + 1;
    for (int i = 0; i < envc; i++) strings += strlen(req->envp[i]) + 1;
    size_t fixed = sizeof h + (size_t)h.fd_map_count * sizeof(int32_t) + (size_t)h.group_count * sizeof(gid_t);
    if (fixed + strings > LC_HELPER_MAX_MESSAGE) {
        errno = EMSGSIZE;
        return -1;
    }
    h.strings_length = (uint32_t)strings;
    char *buf = malloc(fixed + strings);
    if (!buf) return -1;
    memcpy(buf, &h, sizeof h);
    char *at = buf + sizeof h;
    for (int i = 0; i < h.fd_map_count; i++) {
        int32_t t = req->fd_map[2 * i + 1];
        memcpy(at, &t, sizeof t);
        at += sizeof t;
    }
    if (h.group_count > 0) {
        memcpy(at, c->groups, (size_t)h.group_count * sizeof(gid_t));
        at += (size_t)h.group_count * sizeof(gid_t);
    }
#define PUT(str) do { size_t l = strlen(str) + 1; memcpy(at, (str), l); at += l; } while (0)
    PUT(req->path);
    if (req->cwd) PUT(req->cwd);
    for (int i = 0; i < argc; i++) PUT(req->argv[i]);
    for (int i = 0; i < envc; i++) PUT(req->envp[i]);
#undef PUT
    int fds[LC_HELPER_MAX_FDS], nfds = 0;
    if (req->cgroup_fd >= 0) fds[nfds++] = req->cgroup_fd;
    if (req->v1_procs_fd >= 0) fds[nfds++] = req->v1_procs_fd;
    for (int i = 0; i < req->fd_map_count; i++) fds[nfds++] = req->fd_map[2 * i];
    ssize_t sent = send_with_fds(helper, buf, fixed + strings, fds, nfds);
    int e = errno;
    free(buf);
    if (sent < 0) {
        errno = e;
        return -1;
    }
    // The answer; its pidfd arrives as SCM_RIGHTS.
    struct lc_helper_reply reply;
    union { struct cmsghdr align; char space[CMSG_SPACE(sizeof(int) * 2)]; } back;
    struct iovec riov;
    struct msghdr rmsg;
    ssize_t got = recv_with_control(helper, &reply, sizeof reply, back.space, sizeof back.space, MSG_CMSG_CLOEXEC,
                                    &rmsg, &riov);
    int got_errno = errno;
    int passed[2], npassed = 0;
    for (struct cmsghdr *cm = got > 0 ? CMSG_FIRSTHDR(&rmsg) : NULL; cm; cm = CMSG_NXTHDR(&rmsg, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) take_rights(cm, passed, 2, &npassed);
    }
    int pidfd = npassed > 0 ? passed[0] : -1;
    if (npassed > 1) close(passed[1]);
    if (got != (ssize_t)sizeof reply) {
        if (pidfd >= 0) close(pidfd);
        errno = got < 0 ? got_errno : ECONNRESET;  // the helper is gone
        return -1;
    }
    if (reply.failed_pid > 0) {  // our child now: reap it, as lc_spawn does
        siginfo_t info;
        while (waitid(P_PID, (id_t)reply.failed_pid, &info, WEXITED) != 0 && errno == EINTR) {}
    }
    if (reply.pid > 0 && pidfd < 0) {  // a child without its pidfd: ours, unreaped, so its pid is still its own
        kill(reply.pid, SIGKILL);
        siginfo_t info;
        while (waitid(P_PID, (id_t)reply.pid, &info, WEXITED) != 0 && errno == EINTR) {}
    }
    if (reply.pid <= 0 || pidfd < 0) {
        if (pidfd >= 0) close(pidfd);
        *failed_step = reply.pid > 0 ? LC_STEP_HELPER : reply.step;
        errno = reply.pid > 0 ? EPROTO : reply.err;
        return -1;
    }
    *failed_step = 0;
    *placed_atomically = reply.atomic;
    *pidfd_out = pidfd;
    return reply.pid;
}

int lc_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int lc_epoll_add(int set, int fd) {
    struct epoll_event e = {.events = EPOLLIN, .data.fd = fd};
    return epoll_ctl(set, EPOLL_CTL_ADD, fd, &e);
}

int lc_epoll_remove(int set, int fd) { return epoll_ctl(set, EPOLL_CTL_DEL, fd, NULL); }

int lc_epoll_wait(int set, int *fds, int max, int timeout_ms) {
    struct epoll_event ready[64];
    if (max > 64) max = 64;
    int n = epoll_wait(set, ready, max, timeout_ms);
    for (int i = 0; i < n; i++) fds[i] = ready[i].data.fd;
    return n;
}
