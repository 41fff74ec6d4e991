/*
 * Shared by the workload programs of Benchmarks/memory-vm (fg, pinger,
 * susp, hog, sampler): clocks, argument parsing, page filling, sd_notify.
 * Header-only; each program is one translation unit (run.py compiles them
 * with gcc -O2 -Wall -Wextra -Werror).
 */
#ifndef MEMVM_COMMON_H
#define MEMVM_COMMON_H
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define MIB (1024UL * 1024UL)

static inline int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline double now_s(void) { return (double)now_ns() / 1e9; }

static inline void sleep_until_ns(int64_t t)
{
    struct timespec ts = {(time_t)(t / 1000000000LL), (long)(t % 1000000000LL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static inline void sleep_ns(int64_t d) { sleep_until_ns(now_ns() + d); }

static inline unsigned long arg_ulong(const char *prog, const char *opt, const char *s)
{
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (s[0] == '-' || errno != 0 || end == s || *end != '\0') {
        fprintf(stderr, "%s: %s: not a non-negative integer: '%s'\n", prog, opt, s);
        exit(2);
    }
    return v;
}

static inline uint64_t xorshift64(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/*
 * Fills one page with data about half of which an LZ compressor (lzo, as
 * zswap here) can squeeze: the first half pseudo-random (seeded by the
 * page's identity, so no two pages are alike and none is same-filled, which
 * zswap would store for free), the second half one non-zero word repeated.
 * Word 0 is the stamp (a counter, never zero).
 */
static inline void fill_page(uint64_t *p, uint64_t stamp, uint64_t seed)
{
    uint64_t s = (seed ^ (stamp * 0x9E3779B97F4A7C15ULL)) | 1;
    const size_t words = PAGE / 8;
    p[0] = stamp | (1ULL << 63);
    for (size_t i = 1; i < words / 2; i++)
        p[i] = xorshift64(&s);
    uint64_t filler = 0x0101010101010101ULL * ((stamp & 0x7f) | 1);
    for (size_t i = words / 2; i < words; i++)
        p[i] = filler;
}

/* READY=1 (or any message) to $NOTIFY_SOCKET, when set: the sd_notify protocol. */
/* MB MiB of private anonymous memory, every page written by fill_page (so
 * resident, distinct, about half compressible); NULL (said on stderr, as
 * PROG) when mmap fails. */
static inline char *filled_region(const char *prog, size_t mb)
{
    size_t len = mb * MIB, pages = len / PAGE;
    char *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        fprintf(stderr, "%s: mmap %zu MiB: %s\n", prog, mb, strerror(errno));
        return NULL;
    }
    uint64_t seed = (uint64_t)getpid() * 0x2545F4914F6CDD1DULL + (uint64_t)now_ns();
    for (size_t i = 0; i < pages; i++)
        fill_page((uint64_t *)(mem + i * PAGE), i + 1, seed);
    return mem;
}

static inline int sd_notify_msg(const char *msg)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (path == NULL || path[0] == '\0')
        return 0;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    size_t len = strlen(path);
    if (len >= sizeof sa.sun_path)
        return -1;
    memcpy(sa.sun_path, path, len);
    if (sa.sun_path[0] == '@')
        sa.sun_path[0] = '\0';
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    ssize_t n = sendto(fd, msg, strlen(msg), 0, (struct sockaddr *)&sa,
                       (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len));
    close(fd);
    return n < 0 ? -1 : 0;
}

/* Creates PATH (atomically: PATH.tmp, then rename) holding TEXT. */
static inline int write_file_atomic(const char *path, const char *text)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return -1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    size_t len = strlen(text);
    if (write(fd, text, len) != (ssize_t)len) {
        close(fd);
        unlink(tmp);
        return -1;
    }
    close(fd);
    return rename(tmp, path);
}

/* SCHED_FIFO at PRIO if the kernel lets us; returns 1 on success. */
static inline int try_fifo(int prio)
{
    struct sched_param sp = {.sched_priority = prio};
    return sched_setscheduler(0, SCHED_FIFO, &sp) == 0;
}

#endif
