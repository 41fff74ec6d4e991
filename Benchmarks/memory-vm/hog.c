/*
 * hog: the background app that runs memory out (Benchmarks/memory-vm).
 *
 *   hog --mode leak|burst [--target-mb N | --target-file PATH]
 *       [--slow-mbps 50] [--slow-seconds 4] [--fast-mbps 400]
 *       [--deadline-s 60] [--rewrite-ms 100] [--rewrite-fraction 16]
 *       [--status PATH]
 *
 * Grows its anonymous memory at SLOW MiB/s for SLOW-SECONDS, then as fast
 * as it can, capped at FAST MiB/s, writing every page whole (~50 %
 * compressible, a counter stamp in its first word: no zero page, none
 * same-filled; fill_page in common.h), in 16 MiB mappings.
 *   leak:  until it holds MemTotal + SwapTotal (exhaustion guaranteed:
 *          something must die), then it holds what it has;
 *   burst: until it holds the target (--target-mb, or the number of MiB in
 *          the first line of --target-file, read at start: the harness
 *          writes it just before the launch, sized per run), then it holds
 *          its pages and rewrites 1/REWRITE-FRACTION of them (one page in
 *          16, a different stripe each time) every REWRITE ms: a working
 *          set that keeps its memory in use, pulling it back from swap.
 * After DEADLINE seconds from its start it exits 0 by itself.
 *
 * Status file (rewritten in place every 100 ms, one line, fixed width):
 *   STATE ALLOCATED_MB TARGET_MB START_TIME NOW
 * STATE growing, held or deadline; times in seconds of CLOCK_MONOTONIC.
 * It handles no signal: SIGTERM (earlyoom) and SIGKILL kill it.
 */
#include "common.h"

static int status_fd = -1;

static void status(const char *state, unsigned long mb, unsigned long target, int64_t start)
{
    if (status_fd < 0)
        return;
    char line[128];
    int n = snprintf(line, sizeof line, "%-8s %10lu %10lu %18.6f %18.6f\n", state, mb, target, (double)start / 1e9,
                     now_s());
    if (n > 0)
        (void)!pwrite(status_fd, line, (size_t)n, 0);
}

/* MemTotal + SwapTotal, MiB. */
static unsigned long total_mb(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long kb, total = 0;
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemTotal: %lu", &kb) == 1 || sscanf(line, "SwapTotal: %lu", &kb) == 1)
            total += kb;
    fclose(f);
    return total / 1024;
}

#define CHUNK_MB 16UL

int main(int argc, char **argv)
{
    const char *mode = NULL, *target_file = NULL, *status_path = NULL;
    unsigned long target = 0, slow = 50, slow_s = 4, fast = 400, deadline_s = 60, rewrite_ms = 100, fraction = 16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) {
            fprintf(stderr, "hog: %s needs a value\n", a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--mode")) mode = v;
        else if (!strcmp(a, "--target-mb")) target = arg_ulong("hog", a, v);
        else if (!strcmp(a, "--target-file")) target_file = v;
        else if (!strcmp(a, "--slow-mbps")) slow = arg_ulong("hog", a, v);
        else if (!strcmp(a, "--slow-seconds")) slow_s = arg_ulong("hog", a, v);
        else if (!strcmp(a, "--fast-mbps")) fast = arg_ulong("hog", a, v);
        else if (!strcmp(a, "--deadline-s")) deadline_s = arg_ulong("hog", a, v);
        else if (!strcmp(a, "--rewrite-ms")) rewrite_ms = arg_ulong("hog", a, v);
        else if (!strcmp(a, "--rewrite-fraction")) fraction = arg_ulong("hog", a, v);
        else if (!strcmp(a, "--status")) status_path = v;
        else {
            fprintf(stderr, "hog: unknown option %s\n", a);
            return 2;
        }
    }
    int burst = mode != NULL && !strcmp(mode, "burst");
    if (mode == NULL || (!burst && strcmp(mode, "leak")) || fast == 0 || fraction == 0 || rewrite_ms == 0) {
        fprintf(stderr, "usage: hog --mode leak|burst [--target-mb N | --target-file PATH] ... (see hog.c)\n");
        return 2;
    }
    int64_t start = now_ns();
    if (status_path != NULL) {
        status_fd = open(status_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (status_fd < 0) {
            fprintf(stderr, "hog: %s: %s\n", status_path, strerror(errno));
            return 1;
        }
    }
    if (burst && target == 0 && target_file != NULL) {
        FILE *f = fopen(target_file, "r");
        if (f == NULL || fscanf(f, "%lu", &target) != 1) {
            fprintf(stderr, "hog: cannot read a size in MiB from %s\n", target_file);
            return 2;
        }
        fclose(f);
    }
    if (!burst)
        target = total_mb();
    if (target == 0) {
        fprintf(stderr, "hog: no target size (burst needs --target-mb or --target-file)\n");
        return 2;
    }
    signal(SIGUSR1, SIG_IGN);
    signal(SIGUSR2, SIG_IGN);

    unsigned long nchunks = (target + CHUNK_MB - 1) / CHUNK_MB;
    char **chunks = calloc(nchunks, sizeof *chunks);
    if (chunks == NULL)
        return 1;
    uint64_t seed = (uint64_t)getpid() * 0x2545F4914F6CDD1DULL + (uint64_t)start;
    const size_t pages_per_chunk = CHUNK_MB * MIB / PAGE;
    unsigned long done_pages = 0, target_pages = target * (MIB / PAGE);
    int64_t deadline = start + (int64_t)deadline_s * 1000000000LL, last_status = 0;
    status("growing", 0, target, start);
    /* The growth: MiB allowed by time t (seconds since start). */
    while (done_pages < target_pages) {
        int64_t t = now_ns();
        if (t >= deadline) {
            status("deadline", done_pages / 256, target, start);
            printf("hog: deadline while growing, %lu MiB\n", done_pages / 256);
            return 0;
        }
        if (t - last_status >= 100000000LL) {
            status("growing", done_pages / 256, target, start);
            last_status = t;
        }
        double secs = (double)(t - start) / 1e9;
        double allowed = secs < (double)slow_s ? (double)slow * secs
                                               : (double)slow * (double)slow_s + (double)fast * (secs - (double)slow_s);
        if ((double)done_pages / 256.0 + 1.0 > allowed) {
            sleep_ns(1000000); /* 1 ms */
            continue;
        }
        /* One MiB (256 pages) at a time. */
        for (int k = 0; k < 256 && done_pages < target_pages; k++, done_pages++) {
            unsigned long c = done_pages / pages_per_chunk, off = done_pages % pages_per_chunk;
            if (chunks[c] == NULL) {
                chunks[c] = mmap(NULL, CHUNK_MB * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (chunks[c] == MAP_FAILED) {
                    fprintf(stderr, "hog: mmap failed after %lu MiB: %s\n", done_pages / 256, strerror(errno));
                    chunks[c] = NULL;
                    status("held", done_pages / 256, target, start);
                    goto hold;
                }
            }
            fill_page((uint64_t *)(chunks[c] + off * PAGE), done_pages + 1, seed);
        }
    }
    status("held", done_pages / 256, target, start);
    printf("hog: holding %lu MiB after %.2f s\n", done_pages / 256, (double)(now_ns() - start) / 1e9);
    fflush(stdout);
hold:;
    unsigned long stripe = 0;
    uint64_t counter = 1;
    for (;;) {
        int64_t t = now_ns();
        if (t >= deadline) {
            status("deadline", done_pages / 256, target, start);
            printf("hog: deadline, held %lu MiB\n", done_pages / 256);
            return 0;
        }
        if (burst) {
            for (unsigned long p = stripe; p < done_pages; p += fraction) {
                uint64_t *w = (uint64_t *)(chunks[p / pages_per_chunk] + (p % pages_per_chunk) * PAGE);
                w[0] = (w[0] + 1) | (1ULL << 63);
                w[1] ^= ++counter;
            }
            stripe = (stripe + 1) % fraction;
        }
        status("held", done_pages / 256, target, start);
        int64_t next = t + (int64_t)rewrite_ms * 1000000LL;
        sleep_until_ns(next < deadline ? next : deadline);
    }
}
