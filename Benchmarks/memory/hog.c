/*
 * hog: hold N MiB of resident anonymous memory until killed.
 *
 *   hog --mb N [--step-mb S] [--step-us U] [--ready-file PATH]
 *
 * Allocates N MiB in steps of S MiB (default 64), writing one byte to every
 * 4 KiB page so each page is really backed by RAM (writes, not reads: a read
 * would map the shared zero page), pausing U microseconds between steps
 * (default 0). When all N MiB are resident it writes its pid to PATH
 * atomically (PATH.tmp.PID, then rename) and pause()s until a signal kills it.
 *
 * SIGUSR1 and SIGUSR2 are ignored: lifecycled may deliver lifecycle events to
 * a "signals" app with them, and a hog that died of one would look like a
 * kill. SIGTERM, SIGINT and SIGKILL end it as usual.
 *
 * Part of Benchmarks/memory (reaction.py compiles it with
 * gcc -O2 -Wall -Wextra -Werror). Exit codes: 0 never (it runs until killed),
 * 1 allocation or ready-file failure, 2 usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define MIB (1024UL * 1024UL)

static void usage(FILE *f)
{
    fprintf(f, "usage: hog --mb N [--step-mb S] [--step-us U] [--ready-file PATH]\n"
               "  --mb N           MiB to allocate and keep resident (required, > 0)\n"
               "  --step-mb S      allocate in steps of S MiB (default 64)\n"
               "  --step-us U      sleep U microseconds between steps (default 0)\n"
               "  --ready-file P   write the pid to P (atomically) once all N MiB are resident\n");
}

static int parse_ulong(const char *opt, const char *s, unsigned long max, unsigned long *out)
{
    char *end = NULL;
    errno = 0;
    if (s[0] == '-') {
        fprintf(stderr, "hog: %s: not a non-negative integer: '%s'\n", opt, s);
        return -1;
    }
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v > max) {
        fprintf(stderr, "hog: %s: invalid value '%s'\n", opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int write_ready_file(const char *path)
{
    char tmp[PATH_MAX];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp) {
        fprintf(stderr, "hog: ready file path too long\n");
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        fprintf(stderr, "hog: %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "%ld\n", (long)getpid());
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        fprintf(stderr, "hog: %s: %s\n", tmp, strerror(errno));
        fclose(f);
        unlink(tmp);
        return -1;
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "hog: %s: %s\n", tmp, strerror(errno));
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, path) != 0) {
        fprintf(stderr, "hog: rename %s -> %s: %s\n", tmp, path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    unsigned long mb = 0, step_mb = 64, step_us = 0;
    const char *ready = NULL;
    int have_mb = 0;

    static const struct option opts[] = {
        {"mb", required_argument, NULL, 'm'},
        {"step-mb", required_argument, NULL, 's'},
        {"step-us", required_argument, NULL, 'u'},
        {"ready-file", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'm':
            if (parse_ulong("--mb", optarg, 1UL << 30, &mb) != 0) return 2;
            have_mb = 1;
            break;
        case 's':
            if (parse_ulong("--step-mb", optarg, 1UL << 30, &step_mb) != 0) return 2;
            break;
        case 'u':
            if (parse_ulong("--step-us", optarg, 3600UL * 1000000UL, &step_us) != 0) return 2;
            break;
        case 'r':
            ready = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "hog: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (!have_mb || mb == 0 || step_mb == 0) {
        fprintf(stderr, "hog: --mb (and --step-mb) must be greater than 0\n");
        usage(stderr);
        return 2;
    }

    signal(SIGUSR1, SIG_IGN);
    signal(SIGUSR2, SIG_IGN);

    unsigned long done = 0;
    while (done < mb) {
        unsigned long this_mb = mb - done < step_mb ? mb - done : step_mb;
        size_t len = this_mb * MIB;
        /* One mapping per step: a failed step leaves the earlier ones resident
         * and reports exactly how far it got. */
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            fprintf(stderr, "hog: mmap of %lu MiB failed after %lu MiB: %s\n", this_mb, done, strerror(errno));
            return 1;
        }
        for (size_t off = 0; off < len; off += PAGE)
            p[off] = 1;
        done += this_mb;
        if (step_us > 0 && done < mb) {
            struct timespec ts = {(time_t)(step_us / 1000000UL), (long)(step_us % 1000000UL) * 1000L};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
            }
        }
    }

    if (ready != NULL && write_ready_file(ready) != 0)
        return 1;

    for (;;)
        pause();
}
