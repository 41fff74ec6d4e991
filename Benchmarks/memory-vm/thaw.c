/*
 * thaw: what a thaw costs an app whose memory was pushed to swap.
 *
 *   thaw --mb N --log FILE
 *
 * Holds N MiB of half-compressible data (each 4 KiB page: 2 KiB of a
 * pseudo-random stream, 2 KiB of zeros, so that zswap neither flatters nor
 * fails it), says READY=1 on $NOTIFY_SOCKET (sd_notify), then on every
 * SIGUSR2 (lifecycled's didBecomeActive for it) touches every page (a read
 * and a write) and appends "touch_ms=T majflt=M" to FILE: the time until
 * all of its memory is back and the major page faults that took. SIGTERM
 * ends it. Built by Benchmarks/memory-vm/thaw.sh (gcc -O2).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void notify_ready(void) {
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path) return;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strncpy(a.sun_path, path, sizeof a.sun_path - 1);
    if (a.sun_path[0] == '@') a.sun_path[0] = 0;
    sendto(fd, "READY=1", 7, 0, (struct sockaddr *)&a, sizeof a);
    close(fd);
}

int main(int argc, char **argv) {
    size_t mb = 0;
    const char *log = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mb")) mb = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--log")) log = argv[i + 1];
    }
    if (!mb || !log) {
        fprintf(stderr, "usage: thaw --mb N --log FILE\n");
        return 2;
    }
    size_t bytes = mb << 20;
    uint8_t *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return 1;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t page = 0; page < bytes; page += 4096)
        for (size_t i = 0; i < 2048; i += 8) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            memcpy(m + page + i, &x, 8);
        }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
    notify_ready();
    for (;;) {
        int sig;
        sigwait(&set, &sig);
        if (sig == SIGTERM) return 0;
        if (sig != SIGUSR2) continue;
        struct rusage before, after;
        getrusage(RUSAGE_SELF, &before);
        double t0 = now_ms();
        volatile uint8_t sum = 0;
        for (size_t page = 0; page < bytes; page += 4096) {
            sum += m[page];
            m[page + 4095] = sum;
        }
        double t1 = now_ms();
        getrusage(RUSAGE_SELF, &after);
        FILE *f = fopen(log, "a");
        if (f) {
            fprintf(f, "touch_ms=%.1f majflt=%ld\n", t1 - t0, after.ru_majflt - before.ru_majflt);
            fclose(f);
        }
    }
}
