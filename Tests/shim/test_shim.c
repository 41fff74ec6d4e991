// Tests of the C shim against the real kernel (run as root by `make test`):
//   make test-shim   (gcc -Wall -Wextra -Werror, see the Makefile)
// Every wait is on a pidfd becoming readable (the child exited) or on a pipe
// reaching EOF; nothing sleeps.
#define _GNU_SOURCE
#include "CLifecycleShim.h"

#include <errno.h>
#include <limits.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int passed, failed;
extern char **environ;
/// The spawn helper's end, or -1: the spawn tests run both ways.
static int helper = -1;
static const char *mode = "";

#define CHECK(name, cond)                                                        \
    do {                                                                         \
        if (cond) { passed++; printf("ok      %s%s\n", mode, name); }            \
        else { failed++; printf("FAILED  %s%s (%s:%d, errno %s)\n", mode, name, __FILE__, __LINE__, strerror(errno)); } \
    } while (0)

/// Waits for the child behind `pidfd` to exit, then reaps it.
static struct lc_child_status wait_exit(pid_t pid, int pidfd) {
    struct pollfd p = {pidfd, POLLIN, 0};
    poll(&p, 1, 10000);
    struct lc_child_status st;
    lc_reap(pid, &st);
    close(pidfd);
    return st;
}

static pid_t spawn(char *const argv[], const char *cwd, int cgroup_fd, int v1_fd, const int *map, int n,
                   int *pidfd, int *step) {
    struct lc_spawn_request r = {argv[0], argv, environ, cwd, cgroup_fd, v1_fd, map, n, NULL};
    int atomic = 0;
    return helper >= 0 ? lc_spawn_via(helper, &r, pidfd, step, &atomic) : lc_spawn(&r, pidfd, step, &atomic);
}

/// Reads everything from fd until EOF (the writers are gone).
static void slurp(int fd, char *buf, size_t len) {
    size_t got = 0;
    ssize_t n;
    while (got + 1 < len && (n = read(fd, buf + got, len - 1 - got)) > 0) got += (size_t)n;
    buf[got] = 0;
}

/// Everything a spawn must do, asked directly or through the helper.
static void spawn_tests(void) {
    int pidfd, step;
    char buf[4096];

    {   // exit codes
        char *t[] = {"/bin/true", NULL};
        pid_t pid = spawn(t, NULL, -1, -1, NULL, 0, &pidfd, &step);
        CHECK("spawn /bin/true gives a pid and a pidfd", pid > 0 && pidfd >= 0);
        struct lc_child_status st = wait_exit(pid, pidfd);
        CHECK("exit code 0 is reported", st.pid == pid && st.exited && st.value == 0);
        char *three[] = {"/bin/sh", "-c", "exit 3", NULL};
        pid = spawn(three, NULL, -1, -1, NULL, 0, &pidfd, &step);
        st = wait_exit(pid, pidfd);
        CHECK("exit code 3 is reported", st.exited && st.value == 3);
    }
    {   // exec failures come back synchronously and leave no zombie
        char *nope[] = {"/nonexistent/program", NULL};
        pid_t pid = spawn(nope, NULL, -1, -1, NULL, 0, &pidfd, &step);
        CHECK("a missing program fails with ENOENT at execve", pid == -1 && errno == ENOENT && step == LC_STEP_EXEC);
        struct lc_child_status st;
        int r = lc_peek_ended_child(&st);
        CHECK("the failed child was reaped", (r == 0 && st.pid == 0) || (r == -1 && errno == ECHILD));
        char *t[] = {"/bin/true", NULL};
        pid = spawn(t, "/nonexistent/dir", -1, -1, NULL, 0, &pidfd, &step);
        CHECK("a bad working directory fails at chdir", pid == -1 && errno == ENOENT && step == LC_STEP_CWD);
    }
    {   // CLONE_INTO_CGROUP: the child starts in its cgroup
        char dir[256];
        snprintf(dir, sizeof dir, "/sys/fs/cgroup/unified/lc-shim-test-%d", getpid());
        mkdir(dir, 0755);
        int cg = open(dir, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
        int p[2];
        pipe2(p, O_CLOEXEC);
        int map[] = {p[1], 1};
        char *cat[] = {"/bin/cat", "/proc/self/cgroup", NULL};
        pid_t pid = spawn(cat, NULL, cg, -1, map, 1, &pidfd, &step);
        close(p[1]);
        slurp(p[0], buf, sizeof buf);
        close(p[0]);
        wait_exit(pid, pidfd);
        char want[300];
        snprintf(want, sizeof want, "0::/lc-shim-test-%d\n", getpid());
        CHECK("the child runs in the cgroup it was cloned into", cg >= 0 && strstr(buf, want) != NULL);
        close(cg);
        CHECK("the cgroup is empty and removable after the child", rmdir(dir) == 0);
    }
    {   // fd mapping, including a source that is another target, and nothing else inherited
        int a[2], b[2];
        pipe2(a, O_CLOEXEC);
        pipe2(b, O_CLOEXEC);
        int leak = open("/dev/null", O_RDONLY);   // NOT close-on-exec: must still not reach the child
        int map[] = {a[1], 9, b[1], a[1]};        // b's write end goes where a's was
        char script[256];
        snprintf(script, sizeof script, "echo x >&%d; echo y >&9; ls /proc/self/fd | tr '\\n' ' ' >&9", a[1]);
        char *sh[] = {"/bin/sh", "-c", script, NULL};
        pid_t pid = spawn(sh, NULL, -1, -1, map, 2, &pidfd, &step);
        close(a[1]);
        close(b[1]);
        char got_b[256], got_a[256];
        slurp(b[0], got_b, sizeof got_b);
        slurp(a[0], got_a, sizeof got_a);
        wait_exit(pid, pidfd);
        CHECK("a source mapped onto another source's number arrives", strcmp(got_b, "x\n") == 0);
        char leaked[32];
        snprintf(leaked, sizeof leaked, " %d ", leak);
        CHECK("mapped fds arrive and unmapped ones do not", strncmp(got_a, "y\n", 2) == 0 && strstr(got_a, leaked) == NULL);
        close(leak);
        close(a[0]);
        close(b[0]);
    }
    {   // signals: blocked and ignored in the parent, default in the child; own session
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigprocmask(SIG_BLOCK, &set, NULL);
        signal(SIGPIPE, SIG_IGN);
        char *sl[] = {"/bin/sleep", "100", NULL};
        pid_t pid = spawn(sl, NULL, -1, -1, NULL, 0, &pidfd, &step);
        snprintf(buf, sizeof buf, "/proc/%d/status", pid);
        FILE *f = fopen(buf, "r");
        unsigned long long ign = ~0ULL, blk = ~0ULL;
        char line[256];
        while (f && fgets(line, sizeof line, f)) {
            sscanf(line, "SigIgn: %llx", &ign);
            sscanf(line, "SigBlk: %llx", &blk);
        }
        if (f) fclose(f);
        CHECK("the child ignores no signal the parent ignored", ign == 0);
        CHECK("the child blocks no signal the parent blocked", blk == 0);
        CHECK("the child leads its own session", getsid(pid) == pid);
        CHECK("pidfd_send_signal delivers SIGTERM", lc_pidfd_send_signal(pidfd, SIGTERM) == 0);
        struct lc_child_status st = wait_exit(pid, pidfd);
        CHECK("death by signal 15 is reported", !st.exited && st.value == SIGTERM);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
    }
    {   // another user: its uid, gid and groups, all set in the child (as root)
        int p[2];
        pipe2(p, O_CLOEXEC);
        int map[] = {p[1], 1};
        gid_t groups[] = {65534, 4};
        struct lc_spawn_credentials c = {1, 65534, 65534, groups, 2, 1, ~0ULL, -1, INT_MIN, INT_MIN};
        char *sh[] = {"/bin/sh", "-c", "echo $(id -u) $(id -g) $(id -G)", NULL};
        struct lc_spawn_request r = {sh[0], sh, environ, "/", -1, -1, map, 1, &c};
        int atomic = 0;
        pid_t pid = helper >= 0 ? lc_spawn_via(helper, &r, &pidfd, &step, &atomic)
                                : lc_spawn(&r, &pidfd, &step, &atomic);
        close(p[1]);
        slurp(p[0], buf, sizeof buf);
        close(p[0]);
        if (pid > 0) wait_exit(pid, pidfd);
        CHECK("the child runs as the user, group and groups asked for",
              pid > 0 && strcmp(buf, "65534 65534 65534 4\n") == 0);
    }
    {   // v1 memory cgroup joined before exec
        char dir[256], procs[300];
        snprintf(dir, sizeof dir, "/sys/fs/cgroup/memory/lc-shim-test-%d", getpid());
        if (mkdir(dir, 0755) == 0) {
            snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
            int v1 = open(procs, O_WRONLY | O_CLOEXEC);
            char *sl[] = {"/bin/sleep", "100", NULL};
            pid_t pid = spawn(sl, NULL, -1, v1, NULL, 0, &pidfd, &step);
            close(v1);
            FILE *f = fopen(procs, "r");
            int found = 0, v;
            while (f && fscanf(f, "%d", &v) == 1) found |= v == pid;
            if (f) fclose(f);
            CHECK("the child joined its v1 memory cgroup", found);
            lc_pidfd_send_signal(pidfd, SIGKILL);
            wait_exit(pid, pidfd);
            rmdir(dir);
        } else {
            printf("skip    v1 memory cgroup (%s)\n", strerror(errno));
        }
    }
}

/// Field 10 of /proc/PID/stat: the minor page faults the process has taken.
__attribute__((unused)) static unsigned long minor_faults(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0) close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    for (int field = 2; field < 10 && p; field++) p = strchr(p + 1, ' ');
    return p ? strtoul(p + 1, NULL, 10) : 0;
}

/// What only the helper does: its child is ours, it holds nothing of
/// ours, it tells us when it cannot be asked, and it leaves with us.
static void helper_tests(void) {
    int pidfd, step;
    char buf[4096];
    pid_t helper_pid = 0;
    int held = open("/dev/null", O_RDONLY);  // ours, open before the helper: never the helper's
    helper = lc_spawn_helper_start(&helper_pid);
    CHECK("the helper starts", helper >= 0 && helper_pid > 0);
    {
        int p[2];
        pipe2(p, O_CLOEXEC);
        int map[] = {p[1], 1};
        char *sh[] = {"/bin/sh", "-c", "echo $PPID", NULL};
        pid_t pid = spawn(sh, NULL, -1, -1, map, 1, &pidfd, &step);
        close(p[1]);
        slurp(p[0], buf, sizeof buf);
        close(p[0]);
        struct lc_child_status st = wait_exit(pid, pidfd);
        CHECK("the helper's child is ours (CLONE_PARENT), reaped by us", pid > 0 && atoi(buf) == getpid() &&
                                                                          st.pid == pid && st.exited);
    }
#if defined(__x86_64__) && !defined(LC_COPIED_CLONE)
    {   // Its child shares its memory until the exec (CLONE_VM | CLONE_VFORK):
        // with a copy, each spawn's copy-on-write cost the helper page
        // faults of its own (three or more a spawn, counted), now none.
        unsigned long before = minor_faults(helper_pid);
        char *t[] = {"/bin/true", NULL};
        int spawned = 0;
        for (int i = 0; i < 20; i++) {
            pid_t pid = spawn(t, NULL, -1, -1, NULL, 0, &pidfd, &step);
            if (pid > 0) {
                wait_exit(pid, pidfd);
                spawned++;
            }
        }
        unsigned long faults = minor_faults(helper_pid) - before;
        printf("        the helper's page faults in 20 spawns: %lu\n", faults);
        CHECK("the helper's child shares its memory: spawns cost the helper no page fault",
              spawned == 20 && faults < 5);
    }
#endif
    {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/fd", helper_pid);
        int n = 0;
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d))) n += e->d_name[0] != '.';
        if (d) closedir(d);
        CHECK("the helper holds its socket and stdio alone", d != NULL && n <= 4);
        close(held);
        snprintf(path, sizeof path, "/proc/%d/comm", helper_pid);
        FILE *f = fopen(path, "r");
        CHECK("the helper is named", f && fgets(buf, sizeof buf, f) && strcmp(buf, "lifecycled-fork\n") == 0);
        if (f) fclose(f);
    }
    {
        size_t big = 2u << 20;
        char *huge = malloc(big);
        memset(huge, 'x', big - 1);
        memcpy(huge, "X=", 2);
        huge[big - 1] = 0;
        char *env[] = {huge, NULL};
        char *t[] = {"/bin/true", NULL};
        struct lc_spawn_request r = {t[0], t, env, NULL, -1, -1, NULL, 0, NULL};
        int atomic;
        pid_t pid = lc_spawn_via(helper, &r, &pidfd, &step, &atomic);
        CHECK("a request over 1 MiB is refused before it is sent", pid == -1 && step == LC_STEP_HELPER && errno == EMSGSIZE);
        free(huge);
    }
    {
        kill(helper_pid, SIGKILL);
        siginfo_t info;
        waitid(P_PID, (id_t)helper_pid, &info, WEXITED);
        char *t[] = {"/bin/true", NULL};
        pid_t pid = spawn(t, NULL, -1, -1, NULL, 0, &pidfd, &step);
        CHECK("a helper that is gone is reported as such", pid == -1 && step == LC_STEP_HELPER &&
                                                           (errno == EPIPE || errno == ECONNRESET));
        close(helper);
    }
    {
        helper = lc_spawn_helper_start(&helper_pid);
        close(helper);
        helper = -1;
        siginfo_t info;
        memset(&info, 0, sizeof info);
        int r = waitid(P_PID, (id_t)helper_pid, &info, WEXITED);
        CHECK("the helper leaves when our end closes", r == 0 && info.si_code == CLD_EXITED && info.si_status == 0);
    }
}

int main(void) {
    spawn_tests();
    pid_t ignored;
    helper = lc_spawn_helper_start(&ignored);
    mode = "[helper] ";
    spawn_tests();
    close(helper);
    siginfo_t info;
    waitid(P_PID, (id_t)ignored, &info, WEXITED);
    helper = -1;
    helper_tests();
    mode = "";
    {   // reaping by pidfd: exactly that child, once
        int pidfd, step;
        char *t[] = {"/bin/true", NULL};
        pid_t pid = spawn(t, NULL, -1, -1, NULL, 0, &pidfd, &step);
        CHECK("a child to reap by its pidfd", pid > 0 && pidfd >= 0);
        struct pollfd p = {pidfd, POLLIN, 0};
        poll(&p, 1, 10000);
        CHECK("an ended child is reaped by its pidfd", lc_reap_pidfd(pidfd) == 1);
        CHECK("and only once (ECHILD after)", lc_reap_pidfd(pidfd) == -1 && errno == ECHILD);
        close(pidfd);
    }
    {   // how a zombie ended, before and after it is reaped
        int pidfd, step, exited = -1, value = -1;
        char *t[] = {"/bin/sh", "-c", "exit 7", NULL};
        pid_t pid = spawn(t, NULL, -1, -1, NULL, 0, &pidfd, &step);
        CHECK("a child that exits 7", pid > 0 && pidfd >= 0);
        struct pollfd p = {pidfd, POLLIN, 0};
        poll(&p, 1, 10000);
        CHECK("an unreaped child reads as a zombie that exited 7",
              lc_zombie_exit_status(pid, &exited, &value) == 0 && exited == 1 && value == 7);
        CHECK("a live process is not a zombie", lc_zombie_exit_status(getpid(), &exited, &value) == -1);
        char *s[] = {"/bin/sh", "-c", "kill -9 $$", NULL};
        int pidfd2;
        pid_t pid2 = spawn(s, NULL, -1, -1, NULL, 0, &pidfd2, &step);
        struct pollfd p2 = {pidfd2, POLLIN, 0};
        poll(&p2, 1, 10000);
        CHECK("a zombie killed by SIGKILL says so",
              lc_zombie_exit_status(pid2, &exited, &value) == 0 && exited == 0 && value == SIGKILL);
        lc_reap_pidfd(pidfd);
        lc_reap_pidfd(pidfd2);
        CHECK("once reaped, it is no zombie", lc_zombie_exit_status(pid, &exited, &value) == -1);
        close(pidfd);
        close(pidfd2);
    }
    {   // credentials and subreaper
        int sv[2];
        socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
        pid_t pid;
        uid_t uid;
        gid_t gid;
        CHECK("SO_PEERCRED names us", lc_peer_credentials(sv[0], &pid, &uid, &gid) == 0 && pid == getpid() &&
                                          uid == getuid() && gid == getgid());
        CHECK("we can become a child subreaper", lc_become_subreaper() == 0);
        CHECK("the monotonic clock moves", lc_monotonic_ns() > 0);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
