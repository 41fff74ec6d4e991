// CLifecycleShim: the few kernel interfaces Swift's Glibc module does not
// expose or cannot call safely. Every symbol is prefixed lc_.
//
// Why it exists:
//   - spawning must happen in C: between clone3() and execve() the child of a
//     multi-threaded process may only make async-signal-safe calls, and the
//     child must be placed in its cgroup(s) before it runs one instruction of
//     its own (clone3 with CLONE_INTO_CGROUP);
//   - Glibc in Swift lacks pidfd_send_signal, waitid(P_PIDFD), SO_PEERCRED's
//     struct ucred, PR_SET_CHILD_SUBREAPER wrappers.
// When Swift's Glibc (or swift-system) grows these, the wrappers can go;
// lc_spawn stays (it must be C).
#ifndef C_LIFECYCLE_SHIM_H
#define C_LIFECYCLE_SHIM_H

#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Who the child runs as, and with what power (NULL in the request: as
/// the daemon). Applied after the descriptors and signals, before chdir
/// and exec, in this order: nice; oom_score_adj; umask; drop every capability not in
/// `keep_caps` from the bounding set; setgroups, setgid, setuid (when
/// `set_ids`); PR_SET_NO_NEW_PRIVS (when `no_new_privs`).
struct lc_spawn_credentials {
    int set_ids;                 ///< change uid, gid and groups
    uid_t uid;
    gid_t gid;
    const gid_t *groups;         ///< supplementary groups
    int group_count;
    int no_new_privs;
    unsigned long long keep_caps; ///< bit N set: keep capability N in the bounding set
    int umask;                   ///< or -1 to inherit
    int nice;                    ///< the app's nice value (the daemon runs above its apps), or INT_MIN to inherit
    int oom_score_adj;           ///< written to /proc/self/oom_score_adj (the daemon's own is lower: raising
                                 ///< needs no privilege), or INT_MIN to inherit
};

/// What to start and where.
struct lc_spawn_request {
    const char *path;            ///< executable; must contain a '/', no PATH search
    char *const *argv;           ///< NULL-terminated
    char *const *envp;           ///< NULL-terminated
    const char *cwd;             ///< working directory, or NULL to inherit
    int cgroup_fd;               ///< O_DIRECTORY fd of a cgroup v2 directory, or -1
    int v1_procs_fd;             ///< fd of a v1 "cgroup.procs" file the child writes "0" to first, or -1
    const int *fd_map;           ///< pairs (source fd in parent, target fd in child)
    int fd_map_count;            ///< number of pairs
    const struct lc_spawn_credentials *credentials;  ///< or NULL
};

/// Steps of the child's set-up, for error reports.
enum lc_spawn_step {
    LC_STEP_CLONE = 1,   ///< clone3/fork itself failed (in the parent)
    LC_STEP_CGROUP_V1 = 2,
    LC_STEP_FDS = 3,
    LC_STEP_SIGNALS = 4,
    LC_STEP_SESSION = 5,
    LC_STEP_CWD = 6,
    LC_STEP_EXEC = 7,
    LC_STEP_CAPABILITIES = 8,
    LC_STEP_IDS = 9,
    LC_STEP_NO_NEW_PRIVS = 10,
    LC_STEP_HELPER = 11, ///< the spawn helper could not be asked (gone, or the request too large)
};

/// Starts a child: clone3(CLONE_PIDFD | CLONE_INTO_CGROUP when cgroup_fd >= 0),
/// falling back to fork()+pidfd_open() where clone3 is missing (then the child
/// is NOT placed atomically: *placed_atomically is set to 0).
///
/// In the child, in this order, using only async-signal-safe calls: write "0"
/// to v1_procs_fd; dup the fd_map sources to their targets (safe against
/// overlaps), clear close-on-exec on targets, close every other fd >= 3;
/// unblock all signals and reset every handler to SIG_DFL; setsid(); chdir;
/// execve. A failure in any step is sent to the parent over a close-on-exec
/// pipe and the child _exits(127); the parent then reaps it.
///
/// Returns the pid (> 0) with *pidfd_out set, or -1 with errno set to the
/// failing errno and *failed_step to the enum lc_spawn_step value.
pid_t lc_spawn(const struct lc_spawn_request *req, int *pidfd_out,
               int *failed_step, int *placed_atomically);

/// The spawn helper: a small process, forked once, that starts the apps
/// instead of the daemon, so that no launch copies the daemon's address
/// space and descriptor table (docs/architecture.md, "The spawn helper").
/// It keeps only its end of a SOCK_SEQPACKET pair (every other descriptor
/// closed, signals back to their defaults), and starts each child with
/// clone3(CLONE_PARENT): the child is the caller's, which reaps it and
/// gets its pidfd back. It exits when the caller's end closes (its exit,
/// its crash, its execve: the end is close-on-exec). Call it early, while
/// the process is small. Returns the caller's end with *pid_out, or -1.
int lc_spawn_helper_start(pid_t *pid_out);

/// lc_spawn through the helper on `helper`: the request and its
/// descriptors cross the socket, the answer and the pidfd come back.
/// The same results as lc_spawn, with one more failed step:
/// LC_STEP_HELPER when the helper could not be asked (gone: ECONNRESET or
/// EPIPE; the request over 1 MiB: EMSGSIZE; no clone3 in this kernel:
/// ENOSYS), for the caller to spawn another way. A child that failed before exec is reaped here.
pid_t lc_spawn_via(int helper, const struct lc_spawn_request *req, int *pidfd_out, int *failed_step,
                   int *placed_atomically);

/// pidfd_send_signal(2). Returns 0 or -1 with errno.
int lc_pidfd_send_signal(int pidfd, int sig);

/// pidfd_open(2). Returns the fd or -1 with errno.
int lc_pidfd_open(pid_t pid);

/// waitid(P_PIDFD, pidfd, WEXITED | WNOHANG): reaps exactly that process
/// if it is our child and has ended (1), not yet (0), or -1 with errno
/// (ECHILD: someone reaped it already).
int lc_reap_pidfd(int pidfd);

/// Outcome of a child, as waitid() reports it.
struct lc_child_status {
    pid_t pid;      ///< 0 when no child has changed state
    int exited;     ///< 1 = exited (value is the exit code), 0 = killed by a signal (value is the signal)
    int value;
};

/// waitid(P_ALL, WEXITED | WNOHANG | WNOWAIT): which child has ended, without
/// reaping it. Returns 0 (st->pid == 0 when none), or -1 with errno (ECHILD
/// when there are no children at all).
int lc_peek_ended_child(struct lc_child_status *st);

/// waitid(P_PID, pid, WEXITED | WNOHANG): reaps one ended child.
/// Returns 0 (st->pid == 0 when it has not ended), or -1 with errno.
int lc_reap(pid_t pid, struct lc_child_status *st);

/// SO_PEERCRED of a connected Unix socket. Returns 0 or -1 with errno.
int lc_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);

/// prctl(PR_SET_CHILD_SUBREAPER, 1). Returns 0 or -1 with errno.
int lc_become_subreaper(void);

/// prctl(PR_SET_NAME): names the calling thread (the kernel keeps 15 bytes).
void lc_name_thread(const char *name);

/// prctl(PR_GET_CHILD_SUBREAPER): 1 when this process is a child
/// subreaper, 0 when not.
int lc_is_subreaper(void);

/// process_mrelease(2) (Linux 5.15+): frees the memory of a process that
/// has been SIGKILLed, in the caller's context, without waiting for it to be
/// scheduled and exit. Returns 0, or -1 with errno (ENOSYS on older kernels,
/// EINVAL when the process is not dying, ESRCH when it is gone).
int lc_process_mrelease(int pidfd);

/// Sets the extended attribute `name` of `path` to "1" (`on`), or removes
/// it: systemd-oomd's user.oomd_avoid / user.oomd_omit on a cgroup (Swift's
/// Glibc module lacks sys/xattr.h). Returns 0, or -1 with errno (ENODATA:
/// there was nothing to remove).
int lc_xattr_flag(const char *path, const char *name, int on);

/// Whether `path` has the extended attribute `name` (systemd-oomd's
/// user.oomd_ooms on a cgroup it killed): 1, 0, or -1 with errno.
int lc_xattr_exists(const char *path, const char *name);

/// A datagram socket bound to `name`, with SO_PASSCRED on, non-blocking,
/// close-on-exec: an app's NOTIFY_SOCKET (the sd_notify protocol). A path
/// ("/...") becomes a socket file of mode 0600 (a file left there is
/// replaced); anything else is an abstract address (without the leading
/// '@' or NUL), as earlier daemons used. Returns the fd or -1.
int lc_notify_socket(const char *name);

/// Receives one notification datagram: its length (>= 0), with *pid set to
/// the sender's pid from SCM_CREDENTIALS (0 if none came). Every fd passed
/// with SCM_RIGHTS is closed at once: sd_notify's BARRIER=1 waits for that
/// close. Returns -1 with errno (EAGAIN when there is nothing to read).
long lc_recv_notify(int fd, void *buf, unsigned long len, pid_t *pid);

/// Sends `len` bytes on a stream socket with `passfd` (>= 0) attached
/// (SCM_RIGHTS), as a Wayland request that carries a descriptor; MSG_NOSIGNAL.
/// Returns the bytes sent, or -1 with errno.
long lc_send_with_fd(int sock, const void *buf, unsigned long len, int passfd);

/// Receives what is waiting on a stream socket without waiting
/// (MSG_DONTWAIT), with the descriptors passed alongside (close-on-exec):
/// at most `max` into `fds`, their count in *nfds (more are closed).
/// Returns the bytes read (0: closed), or -1 with errno (EAGAIN: nothing).
long lc_recv_with_fds(int sock, void *buf, unsigned long len, int *fds, int max, int *nfds);

/// How a process that is not our child ended, from its pidfd
/// (PIDFD_GET_INFO with PIDFD_INFO_EXIT, Linux 6.15+): 0 with *exited
/// (1: *value is the exit code; 0: *value is the signal), or -1 with errno:
/// EAGAIN when the kernel has no exit status yet (the process has not been
/// reaped by its parent), ENOTTY or EINVAL on kernels without it.
int lc_pidfd_exit_status(int pidfd, int *exited, int *value);

/// How process `pid` ended while it is a zombie (not yet reaped by its
/// parent), from field 52 of /proc/PID/stat: 0 with *exited and *value as
/// lc_pidfd_exit_status, or -1 when it is not a zombie or cannot be read.
/// A pid names the zombie only until it is reaped: check the pidfd again.
int lc_zombie_exit_status(int pid, int *exited, int *value);

/// The start time of process `pid` (field 22 of /proc/PID/stat, clock ticks
/// since boot): with the pid, it names one process for the life of the
/// system. Returns 0 when the process does not exist or cannot be read.
unsigned long long lc_process_start_time(int pid);

/// clock_gettime(CLOCK_MONOTONIC) in nanoseconds.
long long lc_monotonic_ns(void);

/// Makes SIGABRT, SIGQUIT, SIGSEGV, SIGBUS, SIGILL and SIGFPE end the
/// process, whatever threads it has: the handler writes one line naming the
/// signal and its sender, then a backtrace, to `fd`, and re-raises the
/// signal with its default action (so the process dies of it, with a core
/// dump where enabled). It replaces the Swift runtime's crash handler,
/// which returns without ending the process when it cannot suspend a C
/// thread. `name` prefixes the line (copied). Returns 0 or -1 with errno.
int lc_die_on_fatal_signals(int fd, const char *name);

/// epoll, which Swift's Glibc module leaves out: a close-on-exec set
/// (-1 with errno), `fd` added for reading or taken out (0 or -1 with
/// errno), and a wait that stores the ready descriptors in `fds` (at most
/// `max`) and returns how many, or -1 with errno (EINTR).
int lc_epoll_create(void);
int lc_epoll_add(int set, int fd);
int lc_epoll_remove(int set, int fd);
int lc_epoll_wait(int set, int *fds, int max, int timeout_ms);

#ifdef __cplusplus
}
#endif

#endif
