/*
 * cpu: the programs of the cpu workload of Benchmarks/memory-vm.
 *
 *   cpu --calibrate [--ms 2]
 *   cpu --fg --sock PATH --iters N [--ready-file PATH]
 *   cpu --spin [--ready-file PATH]
 *
 * --calibrate: times a fixed loop (xorshift steps, work() below) on this
 *   CPU by CLOCK_THREAD_CPUTIME_ID, 7 trials of about 100 ms each, and
 *   prints one line, {"iters_per_ms": R, "iters": N, "trials": [...]}: N
 *   the iterations that take MS ms of CPU at the fastest trial's rate (the
 *   one least disturbed). The harness runs it once per guest, with nothing
 *   else running, and gives N to every fg it starts.
 * --fg: the foreground app: binds a Unix datagram socket at PATH, and for
 *   every datagram runs N iterations of the loop (about MS ms of CPU work),
 *   then echoes the datagram back to its sender: one reply per ping, each
 *   after its own work. Sleeps in poll() between pings.
 * --spin: a background app that only burns CPU (the same loop, forever).
 * Both create the ready file (if asked) and say READY=1 on $NOTIFY_SOCKET
 * (if set) once they are set up; SIGTERM and SIGKILL end them.
 */
#include "common.h"
#include <poll.h>

static volatile uint64_t sink;

static uint64_t work(uint64_t n, uint64_t s)
{
    s |= 1;
    for (uint64_t i = 0; i < n; i++)
        xorshift64(&s);
    return s;
}

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int ready(const char *file)
{
    sd_notify_msg("READY=1");
    if (file != NULL && write_file_atomic(file, "ready\n") != 0) {
        fprintf(stderr, "cpu: ready file %s: %s\n", file, strerror(errno));
        return -1;
    }
    return 0;
}

static int calibrate(unsigned long ms)
{
    /* Grow the loop until one run takes >= 20 ms, then time 7 trials of ~100 ms. */
    uint64_t n = 1000;
    for (;;) {
        int64_t t0 = thread_cpu_ns();
        sink = work(n, (uint64_t)t0);
        int64_t d = thread_cpu_ns() - t0;
        if (d >= 20000000LL) {
            n = (uint64_t)((double)n * 100e6 / (double)d);
            break;
        }
        n *= 4;
    }
    double best = 0, trials[7];
    for (int i = 0; i < 7; i++) {
        int64_t t0 = thread_cpu_ns();
        sink = work(n, (uint64_t)t0);
        int64_t d = thread_cpu_ns() - t0;
        trials[i] = (double)n / ((double)d / 1e6);
        if (trials[i] > best)
            best = trials[i];
    }
    printf("{\"iters_per_ms\": %.1f, \"ms\": %lu, \"iters\": %llu, \"trials\": [", best, ms,
           (unsigned long long)(best * (double)ms));
    for (int i = 0; i < 7; i++)
        printf("%s%.1f", i ? ", " : "", trials[i]);
    printf("]}\n");
    return 0;
}

static int fg(const char *path, uint64_t iters, const char *ready_file)
{
    int sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (sock < 0 || strlen(path) >= sizeof sa.sun_path) {
        fprintf(stderr, "cpu: socket: %s\n", sock < 0 ? strerror(errno) : "path too long");
        return 1;
    }
    strcpy(sa.sun_path, path);
    unlink(path);
    if (bind(sock, (struct sockaddr *)&sa, sizeof sa) != 0) {
        fprintf(stderr, "cpu: bind %s: %s\n", path, strerror(errno));
        return 1;
    }
    if (ready(ready_file) != 0)
        return 1;
    uint64_t s = (uint64_t)now_ns();
    for (;;) {
        struct pollfd p = {.fd = sock, .events = POLLIN};
        if (poll(&p, 1, -1) <= 0)
            continue;
        for (;;) {
            char buf[256];
            struct sockaddr_un from;
            socklen_t fl = sizeof from;
            ssize_t n = recvfrom(sock, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
            if (n < 0)
                break;
            s = work(iters, s);
            sink = s;
            if (fl > offsetof(struct sockaddr_un, sun_path))
                sendto(sock, buf, (size_t)n, MSG_DONTWAIT, (struct sockaddr *)&from, fl);
        }
    }
}

static int spin(const char *ready_file)
{
    if (ready(ready_file) != 0)
        return 1;
    uint64_t s = (uint64_t)now_ns();
    for (;;) {
        s = work(1000000, s);
        sink = s;
    }
}

int main(int argc, char **argv)
{
    const char *mode = NULL, *sock = NULL, *ready_file = NULL;
    unsigned long ms = 2, iters = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--calibrate") || !strcmp(a, "--fg") || !strcmp(a, "--spin")) {
            mode = a + 2;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "cpu: %s needs a value\n", a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--sock")) sock = v;
        else if (!strcmp(a, "--iters")) iters = arg_ulong("cpu", a, v);
        else if (!strcmp(a, "--ms")) ms = arg_ulong("cpu", a, v);
        else if (!strcmp(a, "--ready-file")) ready_file = v;
        else {
            fprintf(stderr, "cpu: unknown option %s\n", a);
            return 2;
        }
    }
    signal(SIGUSR1, SIG_IGN);
    signal(SIGUSR2, SIG_IGN);
    if (mode && !strcmp(mode, "calibrate") && ms > 0)
        return calibrate(ms);
    if (mode && !strcmp(mode, "fg") && sock && iters > 0)
        return fg(sock, iters, ready_file);
    if (mode && !strcmp(mode, "spin"))
        return spin(ready_file);
    fprintf(stderr, "usage: cpu --calibrate [--ms 2] | --fg --sock PATH --iters N [--ready-file F] | "
                    "--spin [--ready-file F]\n");
    return 2;
}
