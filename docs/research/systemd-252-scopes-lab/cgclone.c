// cgclone DIR cmd args... : clone3(CLONE_INTO_CGROUP) the command into the cgroup DIR,
// print the child's pid, and exit without waiting (the child is reparented).
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: cgclone DIR cmd...\n"); return 64; }
    int cg = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cg < 0) { perror(argv[1]); return 1; }
    struct clone_args a; memset(&a, 0, sizeof a);
    a.flags = CLONE_INTO_CGROUP; a.exit_signal = SIGCHLD; a.cgroup = cg;
    long pid = syscall(SYS_clone3, &a, sizeof a);
    if (pid < 0) { fprintf(stderr, "clone3: %s\n", strerror(errno)); return 1; }
    if (pid == 0) { int n = open("/dev/null", O_RDWR); dup2(n, 0); dup2(n, 1); dup2(n, 2); setsid(); execvp(argv[2], argv + 2); perror("exec"); _exit(127); }
    printf("%ld\n", pid);
    return 0;
}
