/*
 * pinger: measures how promptly fg answers (Benchmarks/memory-vm).
 *
 *   pinger --to FG_SOCK --self OWN_SOCK --out FILE [--interval-ms 10]
 *          [--timeout-ms 1000] [--max-seconds 600] [--fifo 50]
 *
 * mlockall()s itself, asks for SCHED_FIFO (priority 50), binds a Unix
 * datagram socket at OWN_SOCK and sends a 16-byte ping (sequence number,
 * send time) to FG_SOCK every INTERVAL ms on an absolute schedule (a late
 * tick is sent at once, never skipped). Every reply is matched to its ping
 * by sequence number; a ping with no reply within TIMEOUT ms is a gap (its
 * late reply, if any, is still recorded, flagged late). A send that fails
 * (fg gone: ECONNREFUSED/ENOENT; its queue full: EAGAIN) is recorded with
 * its errno.
 *
 * Everything is kept in memory allocated and locked at start; on SIGTERM or
 * SIGINT (or after MAX seconds) it writes FILE and exits 0:
 *   line 1: {"fifo": true|false, "interval_ms": 10, "timeout_ms": 1000, "start": T, "count": N}
 *   then one line per ping: SEQ SEND_TIME RTT_US ERRNO
 *   SEND_TIME in seconds of CLOCK_MONOTONIC (the sampler's and the
 *   harness's clock); RTT_US -1 when no reply ever came; ERRNO 0 or the
 *   send's errno; a reply later than TIMEOUT has its RTT and ERRNO -1.
 */
#include "common.h"
#include <poll.h>

static volatile sig_atomic_t stop;
static void on_stop(int s) { (void)s; stop = 1; }

struct ping {
    int64_t sent;
    int64_t rtt;
    int err;
};

int main(int argc, char **argv)
{
    const char *to = NULL, *self = NULL, *out = NULL;
    unsigned long interval_ms = 10, timeout_ms = 1000, max_s = 600, prio = 50;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) {
            fprintf(stderr, "pinger: %s needs a value\n", a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--to")) to = v;
        else if (!strcmp(a, "--self")) self = v;
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--interval-ms")) interval_ms = arg_ulong("pinger", a, v);
        else if (!strcmp(a, "--timeout-ms")) timeout_ms = arg_ulong("pinger", a, v);
        else if (!strcmp(a, "--max-seconds")) max_s = arg_ulong("pinger", a, v);
        else if (!strcmp(a, "--fifo")) prio = arg_ulong("pinger", a, v);
        else {
            fprintf(stderr, "pinger: unknown option %s\n", a);
            return 2;
        }
    }
    if (!to || !self || !out || interval_ms == 0) {
        fprintf(stderr, "usage: pinger --to FG_SOCK --self OWN_SOCK --out FILE [--interval-ms 10] ...\n");
        return 2;
    }
    size_t cap = max_s * 1000 / interval_ms + 16;
    struct ping *pings = mmap(NULL, cap * sizeof *pings, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pings == MAP_FAILED) {
        perror("pinger: mmap");
        return 1;
    }
    memset(pings, 0, cap * sizeof *pings);
    int locked = mlockall(MCL_CURRENT | MCL_FUTURE) == 0;
    int fifo = prio > 0 && try_fifo((int)prio);

    struct sigaction sa_stop = {.sa_handler = on_stop};
    sigaction(SIGTERM, &sa_stop, NULL);
    sigaction(SIGINT, &sa_stop, NULL);

    int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un me, fg;
    memset(&me, 0, sizeof me);
    memset(&fg, 0, sizeof fg);
    me.sun_family = fg.sun_family = AF_UNIX;
    if (s < 0 || strlen(self) >= sizeof me.sun_path || strlen(to) >= sizeof fg.sun_path) {
        fprintf(stderr, "pinger: socket or path\n");
        return 1;
    }
    strcpy(me.sun_path, self);
    strcpy(fg.sun_path, to);
    unlink(self);
    if (bind(s, (struct sockaddr *)&me, sizeof me) != 0) {
        fprintf(stderr, "pinger: bind %s: %s\n", self, strerror(errno));
        return 1;
    }

    int64_t interval = (int64_t)interval_ms * 1000000LL, timeout = (int64_t)timeout_ms * 1000000LL;
    int64_t start = now_ns(), end = start + (int64_t)max_s * 1000000000LL;
    size_t n = 0;
    while (!stop && n < cap) {
        int64_t t = now_ns();
        if (t >= end)
            break;
        int64_t due = start + (int64_t)n * interval;
        if (t >= due) {
            int64_t msg[2] = {(int64_t)n, t};
            pings[n].sent = t;
            pings[n].rtt = -1;
            if (sendto(s, msg, sizeof msg, MSG_DONTWAIT, (struct sockaddr *)&fg, sizeof fg) < 0)
                pings[n].err = errno;
            n++;
            continue;
        }
        struct pollfd p = {.fd = s, .events = POLLIN};
        int64_t left = due - t;
        struct timespec ts = {(time_t)(left / 1000000000LL), (long)(left % 1000000000LL)};
        if (ppoll(&p, 1, &ts, NULL) > 0) {
            int64_t msg[2];
            while (recv(s, msg, sizeof msg, MSG_DONTWAIT) == (ssize_t)sizeof msg) {
                int64_t r = now_ns();
                if (msg[0] >= 0 && (size_t)msg[0] < n && pings[msg[0]].rtt < 0) {
                    pings[msg[0]].rtt = r - pings[msg[0]].sent;
                    if (pings[msg[0]].rtt > timeout)
                        pings[msg[0]].err = -1;
                }
            }
        }
    }

    FILE *f = fopen(out, "w");
    if (f == NULL) {
        fprintf(stderr, "pinger: %s: %s\n", out, strerror(errno));
        return 1;
    }
    fprintf(f,
            "{\"fifo\": %s, \"mlocked\": %s, \"interval_ms\": %lu, \"timeout_ms\": %lu, \"start\": %.6f, "
            "\"count\": %zu}\n",
            fifo ? "true" : "false", locked ? "true" : "false", interval_ms, timeout_ms, (double)start / 1e9, n);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%zu %.6f %lld %d\n", i, (double)pings[i].sent / 1e9,
                pings[i].rtt < 0 ? -1LL : (long long)(pings[i].rtt / 1000), pings[i].err);
    if (fclose(f) != 0) {
        fprintf(stderr, "pinger: %s: %s\n", out, strerror(errno));
        return 1;
    }
    unlink(self);
    return 0;
}
