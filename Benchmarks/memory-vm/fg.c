/*
 * fg: the foreground app of Benchmarks/memory-vm.
 *
 *   fg --sock PATH [--mb 96] [--frame-ms 16] [--fraction 16] [--ready-file PATH]
 *
 * Holds a working set of MB MiB (every page written, ~50 % compressible,
 * no zero pages). Every frame (16 ms) it touches, read and write, a random
 * 1/FRACTION of its pages, like a UI thread drawing a frame; between frames
 * it sleeps in poll() on a Unix datagram socket bound at PATH and echoes
 * every datagram back to its sender at once. It also checks the socket
 * every 32 pages while it touches, so a ping waits for at most 32 page
 * touches, unless those pages have to come back from swap (or, without
 * swap, the program's own code from the page cache): which is what the
 * pinger is there to see. One thread: a stall anywhere shows in the pings.
 *
 * Once the working set is written and the socket bound it says READY=1 on
 * $NOTIFY_SOCKET (if set) and creates the ready file (if asked). SIGTERM
 * and SIGKILL end it; SIGUSR1/SIGUSR2 are ignored.
 */
#include "common.h"
#include <poll.h>

static int sock = -1;
static unsigned long answered;

static void drain(void)
{
    char buf[256];
    struct sockaddr_un from;
    for (;;) {
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(sock, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
        if (n < 0)
            return;
        if (fl > offsetof(struct sockaddr_un, sun_path))
            sendto(sock, buf, (size_t)n, MSG_DONTWAIT, (struct sockaddr *)&from, fl);
        answered++;
    }
}

int main(int argc, char **argv)
{
    const char *path = NULL, *ready = NULL;
    unsigned long mb = 96, frame_ms = 16, fraction = 16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) {
            fprintf(stderr, "fg: %s needs a value\n", a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--sock")) path = v;
        else if (!strcmp(a, "--mb")) mb = arg_ulong("fg", a, v);
        else if (!strcmp(a, "--frame-ms")) frame_ms = arg_ulong("fg", a, v);
        else if (!strcmp(a, "--fraction")) fraction = arg_ulong("fg", a, v);
        else if (!strcmp(a, "--ready-file")) ready = v;
        else {
            fprintf(stderr, "fg: unknown option %s\n", a);
            return 2;
        }
    }
    if (path == NULL || mb == 0 || fraction == 0 || frame_ms == 0) {
        fprintf(stderr, "usage: fg --sock PATH [--mb 96] [--frame-ms 16] [--fraction 16] [--ready-file PATH]\n");
        return 2;
    }
    signal(SIGUSR1, SIG_IGN);
    signal(SIGUSR2, SIG_IGN);

    size_t pages = mb * MIB / PAGE;
    char *mem = filled_region("fg", mb);
    if (mem == NULL)
        return 1;

    sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (sock < 0 || strlen(path) >= sizeof sa.sun_path) {
        fprintf(stderr, "fg: socket: %s\n", sock < 0 ? strerror(errno) : "path too long");
        return 1;
    }
    strcpy(sa.sun_path, path);
    unlink(path);
    if (bind(sock, (struct sockaddr *)&sa, sizeof sa) != 0) {
        fprintf(stderr, "fg: bind %s: %s\n", path, strerror(errno));
        return 1;
    }
    sd_notify_msg("READY=1");
    if (ready != NULL && write_file_atomic(ready, "ready\n") != 0) {
        fprintf(stderr, "fg: ready file %s: %s\n", ready, strerror(errno));
        return 1;
    }

    uint64_t rng = ((uint64_t)getpid() * 0x9E3779B97F4A7C15ULL + (uint64_t)now_ns()) | 1;
    size_t per_frame = pages / fraction;
    int64_t frame = (int64_t)frame_ms * 1000000LL, next = now_ns() + frame;
    for (;;) {
        for (size_t k = 0; k < per_frame; k++) {
            volatile uint64_t *w = (volatile uint64_t *)(mem + (xorshift64(&rng) % pages) * PAGE);
            w[1] = w[1] + w[0];
            if ((k & 31) == 31)
                drain();
        }
        drain();
        for (;;) {
            int64_t left = next - now_ns();
            if (left <= 0)
                break;
            struct pollfd p = {.fd = sock, .events = POLLIN};
            int ms = (int)((left + 999999) / 1000000);
            if (poll(&p, 1, ms) > 0)
                drain();
        }
        next += frame;
        int64_t t = now_ns();
        if (next < t)
            next = t; /* late: the next frame starts now, missed ones are not made up */
    }
}
