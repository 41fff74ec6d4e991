// GetManagedObjects from C (sd-bus), every value read: what a shell written
// in C pays for the whole state, without a scripting language's objects
// (Benchmarks/dbus/bench.py, docs/performance.md). Also the JSON socket's
// `status`, read whole, for the same client.
//   gmo ADDRESS N            N calls of GetManagedObjects; prints µs per call
//   gmo --status SOCKET N    N `status` requests over the control socket
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-bus.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/// Reads every value of the message from where it stands; counts them.
static int walk(sd_bus_message *m, long *values) {
    for (;;) {
        char type;
        const char *contents;
        int r = sd_bus_message_peek_type(m, &type, &contents);
        if (r <= 0) return r;
        if (type == SD_BUS_TYPE_ARRAY || type == SD_BUS_TYPE_VARIANT || type == SD_BUS_TYPE_STRUCT ||
            type == SD_BUS_TYPE_DICT_ENTRY) {
            if ((r = sd_bus_message_enter_container(m, type, contents)) < 0) return r;
            if ((r = walk(m, values)) < 0) return r;
            if ((r = sd_bus_message_exit_container(m)) < 0) return r;
        } else {
            union { uint64_t u; double d; const char *s; int b; } v;
            if ((r = sd_bus_message_read_basic(m, type, &v)) < 0) return r;
            (*values)++;
        }
    }
}

static int status(const char *path, int n) {
    for (int i = 0; i < n; i++) {
        double t = now_us();
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        strncpy(a.sun_path, path, sizeof a.sun_path - 1);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) return perror("connect"), 1;
        const char req[] = "{\"command\":\"status\"}\n";
        if (write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1)) return perror("write"), 1;
        static char buf[1 << 16];
        size_t total = 0;
        for (;;) {
            ssize_t k = read(fd, buf, sizeof buf);
            if (k <= 0) return fprintf(stderr, "status: no whole line\n"), 1;
            total += (size_t)k;
            if (buf[k - 1] == '\n') break;
        }
        close(fd);
        printf("%.1f %zu\n", now_us() - t, total);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--status") == 0) return status(argv[2], atoi(argv[3]));
    if (argc != 3) return fprintf(stderr, "usage: gmo ADDRESS N | gmo --status SOCKET N\n"), 2;
    sd_bus *bus = NULL;
    int r = sd_bus_new(&bus);
    if (r >= 0) r = sd_bus_set_address(bus, argv[1]);
    if (r >= 0) r = sd_bus_set_bus_client(bus, 1);
    if (r >= 0) r = sd_bus_start(bus);
    if (r < 0) return fprintf(stderr, "bus: %s\n", strerror(-r)), 1;
    for (int i = 0, n = atoi(argv[2]); i < n; i++) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        long values = 0;
        double t = now_us();
        r = sd_bus_call_method(bus, "io.lifecycled.Lifecycle1", "/io/lifecycled/Lifecycle1",
                               "org.freedesktop.DBus.ObjectManager", "GetManagedObjects", &e, &reply, "");
        if (r >= 0) r = walk(reply, &values);
        if (r < 0) return fprintf(stderr, "GetManagedObjects: %s\n", e.message ? e.message : strerror(-r)), 1;
        printf("%.1f %ld\n", now_us() - t, values);
        sd_bus_message_unref(reply);
        sd_bus_error_free(&e);
    }
    sd_bus_flush_close_unref(bus);
    return 0;
}
