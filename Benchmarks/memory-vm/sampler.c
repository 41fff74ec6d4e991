/*
 * sampler: the 10 ms instrument of Benchmarks/memory-vm.
 *
 *   sampler --out FILE --apps-dir DIR --app NAME [--app NAME ...] [--fg NAME]
 *           [--interval-ms 10] [--stat-every 10] [--max-seconds 600] [--fifo 40]
 *
 * mlockall()s itself (MCL_ONFAULT: its record buffer is locked as it fills),
 * asks for SCHED_FIFO 40 (below the pinger's 50), and on an absolute
 * schedule every INTERVAL ms reads, with pread on descriptors kept open:
 *   /proc/meminfo            MemAvailable MemFree SwapFree SwapTotal (kB)
 *   /proc/pressure/memory    some and full total= (µs)
 *   per app cgroup           memory.current, memory.swap.current,
 *                            memory.events (oom oom_kill oom_group_kill),
 *                            cgroup.events (populated frozen)
 *   the fg app's cgroup      memory.pressure full total= (µs)
 * and every STAT-EVERY samples (100 ms by default: memory.stat flushes the
 * kernel's per-CPU counters, the most expensive read here, ~10x dearer
 * under emulation) each app's memory.stat (zswap zswapped pgmajfault) and
 * /proc/vmstat oom_kill; between those reads the last values are repeated
 * and "st" is 0.
 *
 * App cgroups: DIR/NAME, DIR/NAME.scope (systemd's scopes in the O arms),
 * or DIR/NAME.GEN (lifecycled's apps/NAME.GEN; the highest GEN), looked for every 100 ms while absent, so apps that start
 * later or are relaunched are found; a cgroup that vanishes (rmdir after a
 * kill) is absent ("pop" missing) from then on.
 *
 * Everything stays in memory until SIGTERM/SIGINT (or MAX seconds): then
 * FILE gets one JSON line of facts (interval, overruns, the sampler's own
 * CPU time per sample) and one JSON line per sample:
 *   {"t": MONOTONIC_S, "avail": kB, "free": kB, "swapfree": kB, "swaptotal": kB,
 *    "some": µs, "full": µs, "oomk": N, "st": 0|1,
 *    "apps": {"NAME": {"cur": B, "swap": B, "zs": B, "zsd": B, "maj": N,
 *                      "oom": N, "ok": N, "ogk": N, "pop": 0|1, "frz": 0|1
 *                      [, "full": µs for the fg app]}}}
 * Nothing is written while it samples: no file system traffic to perturb
 * the measurement, at the price of losing the run if the guest dies.
 */
#include "common.h"
#include <dirent.h>
#include <sys/resource.h>

#define MAXAPPS 16

enum { F_CUR, F_SWAP, F_EVENTS, F_CGEV, F_STAT, F_PRESS, F_N };
static const char *const FILES[F_N] = {"memory.current", "memory.swap.current", "memory.events",
                                       "cgroup.events", "memory.stat", "memory.pressure"};

struct app {
    const char *name;
    int fd[F_N];
    int present;
    /* carried between memory.stat reads */
    int64_t zs, zsd, maj;
};

struct arec {
    int64_t cur, swap, zs, zsd, full;
    int32_t maj, oom, ok, ogk;
    int8_t present, pop, frz;
};

/* A sample is this header and then one arec per app (the stride is set at
 * start): ~0.5 KB with 7 apps, ~5 MB locked for 100 s at 10 ms. */
struct sample {
    int64_t t, avail, free, swapfree, swaptotal, some, full, oomk;
    int8_t st;
    struct arec a[];
};

static volatile sig_atomic_t stop;
static void on_stop(int s) { (void)s; stop = 1; }

static struct app apps[MAXAPPS];
static int napps, fg_index = -1;
static const char *apps_dir;

static ssize_t readfd(int fd, char *buf, size_t cap)
{
    ssize_t n = pread(fd, buf, cap - 1, 0);
    if (n < 0)
        n = -1;
    else
        buf[n] = '\0';
    return n;
}

/* The number after "KEY" at the start of a line (KEY includes its ':' or ' '). */
static int64_t key(const char *buf, const char *k)
{
    size_t kl = strlen(k);
    const char *p = buf;
    while ((p = strstr(p, k)) != NULL) {
        if (p == buf || p[-1] == '\n')
            return strtoll(p + kl, NULL, 10);
        p += kl;
    }
    return -1;
}

/* total= of the "some" or "full" line of a pressure file. */
static int64_t psi_total(const char *buf, const char *which)
{
    const char *p = strstr(buf, which);
    if (p == NULL)
        return -1;
    p = strstr(p, "total=");
    return p ? strtoll(p + 6, NULL, 10) : -1;
}

static void close_app(struct app *a)
{
    for (int f = 0; f < F_N; f++) {
        if (a->fd[f] >= 0)
            close(a->fd[f]);
        a->fd[f] = -1;
    }
    a->present = 0;
}

static int open_app(struct app *a, const char *dir)
{
    char path[PATH_MAX];
    for (int f = 0; f < F_N; f++) {
        if (f == F_PRESS && a != &apps[fg_index])
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, FILES[f]);
        a->fd[f] = open(path, O_RDONLY | O_CLOEXEC);
        if (a->fd[f] < 0 && f != F_SWAP && f != F_PRESS) {
            close_app(a);
            return -1;
        }
    }
    a->present = 1;
    return 0;
}

/* DIR/NAME, else DIR/NAME.scope (a systemd scope: the O arms), else the
 * DIR/NAME.GEN with the highest GEN. */
static void find_app(struct app *a)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", apps_dir, a->name);
    if (access(path, F_OK) == 0) {
        open_app(a, path);
        return;
    }
    snprintf(path, sizeof path, "%s/%s.scope", apps_dir, a->name);
    if (access(path, F_OK) == 0) {
        open_app(a, path);
        return;
    }
    DIR *d = opendir(apps_dir);
    if (d == NULL)
        return;
    size_t nl = strlen(a->name);
    long best = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, a->name, nl) != 0 || e->d_name[nl] != '.')
            continue;
        char *end;
        long g = strtol(e->d_name + nl + 1, &end, 10);
        if (*end == '\0' && end != e->d_name + nl + 1 && g > best)
            best = g;
    }
    closedir(d);
    if (best >= 0) {
        snprintf(path, sizeof path, "%s/%s.%ld", apps_dir, a->name, best);
        open_app(a, path);
    }
}

static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    const char *out = NULL, *fg = NULL;
    unsigned long interval_ms = 10, stat_every = 10, max_s = 600, prio = 40;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) {
            fprintf(stderr, "sampler: %s needs a value\n", a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--apps-dir")) apps_dir = v;
        else if (!strcmp(a, "--app")) {
            if (napps == MAXAPPS) {
                fprintf(stderr, "sampler: at most %d apps\n", MAXAPPS);
                return 2;
            }
            apps[napps++].name = v;
        } else if (!strcmp(a, "--fg")) fg = v;
        else if (!strcmp(a, "--interval-ms")) interval_ms = arg_ulong("sampler", a, v);
        else if (!strcmp(a, "--stat-every")) stat_every = arg_ulong("sampler", a, v);
        else if (!strcmp(a, "--max-seconds")) max_s = arg_ulong("sampler", a, v);
        else if (!strcmp(a, "--fifo")) prio = arg_ulong("sampler", a, v);
        else {
            fprintf(stderr, "sampler: unknown option %s\n", a);
            return 2;
        }
    }
    if (out == NULL || apps_dir == NULL || interval_ms == 0 || stat_every == 0) {
        fprintf(stderr, "usage: sampler --out FILE --apps-dir DIR --app NAME ... [--fg NAME] (see sampler.c)\n");
        return 2;
    }
    for (int i = 0; i < napps; i++) {
        for (int f = 0; f < F_N; f++)
            apps[i].fd[f] = -1;
        if (fg != NULL && !strcmp(apps[i].name, fg))
            fg_index = i;
    }
    if (fg_index < 0 && napps > 0)
        fg_index = 0;

    size_t cap = max_s * 1000 / interval_ms + 16;
    size_t stride = (sizeof(struct sample) + (size_t)napps * sizeof(struct arec) + 7) & ~(size_t)7;
    char *s = mmap(NULL, cap * stride, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED) {
        perror("sampler: mmap");
        return 1;
    }
#ifndef MCL_ONFAULT
#define MCL_ONFAULT 4
#endif
    int locked = mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) == 0;
    int fifo = prio > 0 && try_fifo((int)prio);
    struct sigaction sa_stop = {.sa_handler = on_stop};
    sigaction(SIGTERM, &sa_stop, NULL);
    sigaction(SIGINT, &sa_stop, NULL);

    int meminfo = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
    int psi = open("/proc/pressure/memory", O_RDONLY | O_CLOEXEC);
    int vmstat = open("/proc/vmstat", O_RDONLY | O_CLOEXEC);
    if (meminfo < 0 || vmstat < 0) {
        perror("sampler: /proc");
        return 1;
    }
    static char buf[32768];
    int64_t interval = (int64_t)interval_ms * 1000000LL, start = now_ns(), end = start + (int64_t)max_s * 1000000000LL;
    int64_t next = start, oomk = 0, cpu0 = cpu_ns();
    unsigned long overruns = 0;
    size_t n = 0;
    while (!stop && n < cap && now_ns() < end) {
        struct sample *x = (struct sample *)(s + n * stride);
        int stat = n % stat_every == 0;
        x->t = now_ns();
        x->st = (int8_t)stat;
        if (readfd(meminfo, buf, sizeof buf) > 0) {
            x->avail = key(buf, "MemAvailable:");
            x->free = key(buf, "MemFree:");
            x->swapfree = key(buf, "SwapFree:");
            x->swaptotal = key(buf, "SwapTotal:");
        }
        x->some = x->full = -1;
        if (psi >= 0 && readfd(psi, buf, sizeof buf) > 0) {
            x->some = psi_total(buf, "some");
            x->full = psi_total(buf, "full");
        }
        if (stat && readfd(vmstat, buf, sizeof buf) > 0)
            oomk = key(buf, "oom_kill ");
        x->oomk = oomk;
        for (int i = 0; i < napps; i++) {
            struct app *a = &apps[i];
            struct arec *r = &x->a[i];
            if (!a->present && n % 10 == 0)
                find_app(a);
            if (!a->present) {
                r->present = 0;
                continue;
            }
            if (readfd(a->fd[F_CUR], buf, sizeof buf) <= 0) { /* gone (rmdir) */
                close_app(a);
                r->present = 0;
                continue;
            }
            r->present = 1;
            r->cur = strtoll(buf, NULL, 10);
            r->swap = a->fd[F_SWAP] >= 0 && readfd(a->fd[F_SWAP], buf, sizeof buf) > 0 ? strtoll(buf, NULL, 10) : 0;
            if (readfd(a->fd[F_EVENTS], buf, sizeof buf) > 0) {
                r->oom = (int32_t)key(buf, "oom ");
                r->ok = (int32_t)key(buf, "oom_kill ");
                r->ogk = (int32_t)key(buf, "oom_group_kill ");
            }
            if (readfd(a->fd[F_CGEV], buf, sizeof buf) > 0) {
                r->pop = (int8_t)key(buf, "populated ");
                r->frz = (int8_t)key(buf, "frozen ");
            }
            if (stat && readfd(a->fd[F_STAT], buf, sizeof buf) > 0) {
                a->zs = key(buf, "zswap ");
                a->zsd = key(buf, "zswapped ");
                a->maj = key(buf, "pgmajfault ");
            }
            r->zs = a->zs;
            r->zsd = a->zsd;
            r->maj = (int32_t)a->maj;
            r->full = -1;
            if (i == fg_index && a->fd[F_PRESS] >= 0 && readfd(a->fd[F_PRESS], buf, sizeof buf) > 0)
                r->full = psi_total(buf, "full");
        }
        n++;
        next += interval;
        int64_t t = now_ns();
        if (next <= t) {
            overruns++;
            next = t + interval; /* behind: start again from now, do not burst */
        }
        sleep_until_ns(next);
    }
    int64_t cpu = cpu_ns() - cpu0;

    FILE *f = fopen(out, "w");
    if (f == NULL) {
        fprintf(stderr, "sampler: %s: %s\n", out, strerror(errno));
        return 1;
    }
    fprintf(f,
            "{\"sampler\": true, \"interval_ms\": %lu, \"stat_every\": %lu, \"samples\": %zu, \"overruns\": %lu, "
            "\"cpu_us_per_sample\": %.1f, \"fifo\": %s, \"mlocked\": %s, \"start\": %.6f}\n",
            interval_ms, stat_every, n, overruns, n ? (double)cpu / 1e3 / (double)n : 0.0, fifo ? "true" : "false",
            locked ? "true" : "false", (double)start / 1e9);
    for (size_t k = 0; k < n; k++) {
        struct sample *x = (struct sample *)(s + k * stride);
        fprintf(f,
                "{\"t\": %.6f, \"avail\": %lld, \"free\": %lld, \"swapfree\": %lld, \"swaptotal\": %lld, "
                "\"some\": %lld, \"full\": %lld, \"oomk\": %lld, \"st\": %d, \"apps\": {",
                (double)x->t / 1e9, (long long)x->avail, (long long)x->free, (long long)x->swapfree,
                (long long)x->swaptotal, (long long)x->some, (long long)x->full, (long long)x->oomk, x->st);
        int first = 1;
        for (int i = 0; i < napps; i++) {
            struct arec *r = &x->a[i];
            if (!r->present)
                continue;
            fprintf(f,
                    "%s\"%s\": {\"cur\": %lld, \"swap\": %lld, \"zs\": %lld, \"zsd\": %lld, \"maj\": %lld, "
                    "\"oom\": %lld, \"ok\": %lld, \"ogk\": %lld, \"pop\": %d, \"frz\": %d",
                    first ? "" : ", ", apps[i].name, (long long)r->cur, (long long)r->swap, (long long)r->zs,
                    (long long)r->zsd, (long long)r->maj, (long long)r->oom, (long long)r->ok, (long long)r->ogk,
                    r->pop, r->frz);
            if (i == fg_index && r->full >= 0)
                fprintf(f, ", \"full\": %lld", (long long)r->full);
            fputc('}', f);
            first = 0;
        }
        fputs("}}\n", f);
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "sampler: %s: %s\n", out, strerror(errno));
        return 1;
    }
    return 0;
}
