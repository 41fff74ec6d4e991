// See include/CMemoryWatch.h.
#define _GNU_SOURCE
#include "CMemoryWatch.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <systemd/sd-event.h>
#include <time.h>
#include <unistd.h>

struct lc_memwatch {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;           // on CLOCK_MONOTONIC
    int meminfo;                 // /proc/meminfo, opened once, read with pread
    lc_percpu *percpu;           // /proc/zoneinfo; NULL where unreadable
    int wake;                    // eventfd: the sentinel hands a firing to the loop
    sd_event_source *source;     // the loop's watch on `wake`
    void (*sample)(void *ctx);
    void *ctx;
    // Under mu. Set by the loop's thread; `generation` counts the changes,
    // so that the sentinel drops a reading taken while one happened.
    int64_t due;                 // CLOCK_MONOTONIC ns; -1: disarmed
    int quiet, stop;
    uint64_t generation;
    uint64_t hand_back_at, total, critical, fill_rate;
    int64_t min_ns, max_ns;
    lc_memwatch_state state;
};

static int64_t monotonic_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int64_t lc_fill_interval(uint64_t headroom, uint64_t fill_rate, int64_t min_ns, int64_t max_ns)
{
    double ns = (double)headroom / (double)(fill_rate ? fill_rate : 1) * 1e9;
    if (ns >= (double)max_ns) return max_ns;
    if (ns <= (double)min_ns) return min_ns;
    return (int64_t)ns;
}

struct lc_percpu {
    int fd;
    char *buf;
    size_t cap;
    int64_t page;
};

// The unsigned integer at *p after any spaces, into *out (0 without
// digits); advances *p. The number of digits, or -1 on overflow.
static int number(const char **p, const char *end, int64_t *out)
{
    const char *q = *p;
    while (q < end && *q == ' ') q++;
    int64_t v = 0;
    int digits = 0;
    for (; q < end && *q >= '0' && *q <= '9'; q++, digits++) {
        if (v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (*q - '0');
    }
    *p = q;
    *out = v;
    return digits;
}

int64_t lc_zoneinfo_percpu_pages(const char *buf, long length)
{
    static const char key[] = "count:";
    if (length < 0) return -1;
    const char *p = buf, *end = buf + length;
    int64_t sum = 0, v;
    while ((p = memmem(p, (size_t)(end - p), key, sizeof key - 1)) != NULL) {
        p += sizeof key - 1;
        if (number(&p, end, &v) < 0 || sum > INT64_MAX - v) return -1;
        sum += v;
    }
    return sum;
}

lc_percpu *lc_percpu_open(void)
{
    lc_percpu *z = calloc(1, sizeof *z);
    if (!z) return NULL;
    z->page = sysconf(_SC_PAGESIZE);
    z->cap = 16384;
    z->buf = malloc(z->cap);
    z->fd = open("/proc/zoneinfo", O_RDONLY | O_CLOEXEC);
    if (!z->buf || z->fd < 0 || z->page <= 0) {
        int e = z->page <= 0 ? EINVAL : errno;
        lc_percpu_close(z);
        errno = e;
        return NULL;
    }
    return z;
}

void lc_percpu_close(lc_percpu *z)
{
    if (!z) return;
    if (z->fd >= 0) close(z->fd);
    free(z->buf);
    free(z);
}

int64_t lc_percpu_free(lc_percpu *z)
{
    // The whole file, however many CPUs and zones: pread from 0 to EOF,
    // growing the buffer (kept for the next read) as needed, up to 16 MiB.
    size_t length = 0;
    for (;;) {
        if (length == z->cap) {
            if (z->cap >= (16u << 20)) return -1;
            char *bigger = realloc(z->buf, z->cap * 2);
            if (!bigger) return -1;
            z->buf = bigger;
            z->cap *= 2;
        }
        ssize_t n = pread(z->fd, z->buf + length, z->cap - length, (off_t)length);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (n == 0) break;
        length += (size_t)n;
    }
    int64_t pages = lc_zoneinfo_percpu_pages(z->buf, (long)length);
    return pages < 0 || pages > INT64_MAX / z->page ? -1 : pages * z->page;
}

int64_t lc_integer_after(const char *buf, long length, const char *key, long key_length)
{
    if (length <= 0 || key_length <= 0) return -1;
    const char *p = memmem(buf, (size_t)length, key, (size_t)key_length);
    if (!p) return -1;
    p += key_length;
    int64_t v;
    return number(&p, buf + length, &v) > 0 ? v : -1;
}

// A quiet firing, with mu held on entry and exit (released for the read).
// True when it re-armed and the loop need not hear of it.
static int quiet_firing(lc_memwatch *w)
{
    uint64_t generation = w->generation;
    pthread_mutex_unlock(&w->mu);
    char buf[8192];
    ssize_t n = pread(w->meminfo, buf, sizeof buf, 0);
    int64_t total = lc_integer_after(buf, n, "MemTotal:", 9);
    int64_t available = lc_integer_after(buf, n, "MemAvailable:", 13);
    int64_t now = monotonic_ns();
    pthread_mutex_lock(&w->mu);
    if (w->generation != generation) return 1;   // re-armed meanwhile: look again
    if (total < 0 || available < 0) return 0;
    uint64_t a = (uint64_t)available * 1024;
    w->state.available = a;
    w->state.percpu = -1;
    w->state.at_ns = now;
    if ((uint64_t)total * 1024 != w->total) return 0;
    if (a <= w->hand_back_at) {
        // MemAvailable leaves out the free pages in per-CPU lists: after a
        // big free they can be hundreds of MiB. Count them before waking
        // the loop (the only time they matter here, and the file is
        // bigger). The loop does the same.
        uint64_t hand_back_at = w->hand_back_at;
        pthread_mutex_unlock(&w->mu);
        int64_t percpu = w->percpu ? lc_percpu_free(w->percpu) : -1;
        pthread_mutex_lock(&w->mu);
        if (w->generation != generation) return 1;
        w->state.percpu = percpu;
        if (percpu < 0 || a + (uint64_t)percpu <= hand_back_at) return 0;
        a += (uint64_t)percpu;
    }
    w->state.quiet_samples++;
    uint64_t headroom = a > w->critical ? a - w->critical : 0;
    w->due = now + lc_fill_interval(headroom, w->fill_rate, w->min_ns, w->max_ns);
    return 1;
}

// The sentinel: sleeps until due; takes quiet firings itself, hands every
// other one to the loop through the eventfd, then waits to be re-armed.
static void *sentinel(void *arg)
{
    lc_memwatch *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        if (w->due < 0) {
            pthread_cond_wait(&w->cv, &w->mu);
            continue;
        }
        if (monotonic_ns() < w->due) {
            struct timespec t = {.tv_sec = w->due / 1000000000, .tv_nsec = w->due % 1000000000};
            pthread_cond_timedwait(&w->cv, &w->mu, &t);
            continue;   // due, re-armed or stopped: look again
        }
        if (w->quiet && quiet_firing(w)) continue;
        w->due = -1;
        uint64_t one = 1;
        // The eventfd's counter cannot overflow here: one write per arming.
        if (write(w->wake, &one, sizeof one) < 0) { /* the loop still polls it */ }
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static int handed_back(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
    (void)s;
    (void)revents;
    lc_memwatch *w = userdata;
    uint64_t count;
    if (read(fd, &count, sizeof count) < 0) return 0;   // EAGAIN: nothing to do
    w->sample(w->ctx);
    return 0;
}

lc_memwatch *lc_memwatch_new(void *event, void (*sample)(void *ctx), void *ctx)
{
    lc_memwatch *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->sample = sample;
    w->ctx = ctx;
    w->due = -1;
    w->meminfo = w->wake = -1;
    int e = 0;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&w->mu, NULL);
    w->meminfo = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
    w->percpu = lc_percpu_open();   // NULL: MemAvailable alone, as before Linux 6.7 mattered
    w->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->meminfo < 0 || w->wake < 0) {
        e = errno;
        goto fail;
    }
    int r = sd_event_add_io(event, &w->source, w->wake, EPOLLIN, handed_back, w);
    if (r < 0) {
        e = -r;
        goto fail;
    }
    // Every signal blocked in the sentinel: the loop takes them by signalfd.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    e = pthread_create(&w->thread, NULL, sentinel, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e == 0) {
        pthread_setname_np(w->thread, "memory-sentinel");
        return w;
    }
    sd_event_source_disable_unref(w->source);
fail:
    lc_percpu_close(w->percpu);
    if (w->meminfo >= 0) close(w->meminfo);
    if (w->wake >= 0) close(w->wake);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
    errno = e;
    return NULL;
}

void lc_memwatch_free(lc_memwatch *w)
{
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    sd_event_source_disable_unref(w->source);
    close(w->wake);
    close(w->meminfo);
    lc_percpu_close(w->percpu);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

void lc_memwatch_arm(lc_memwatch *w, int64_t at_ns)
{
    pthread_mutex_lock(&w->mu);
    w->due = at_ns < 0 ? -1 : at_ns;
    w->generation++;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void lc_memwatch_quiet(lc_memwatch *w, uint64_t hand_back_at, uint64_t total, uint64_t critical,
                       uint64_t fill_rate, int64_t min_ns, int64_t max_ns)
{
    pthread_mutex_lock(&w->mu);
    w->quiet = 1;
    w->hand_back_at = hand_back_at;
    w->total = total;
    w->critical = critical;
    w->fill_rate = fill_rate;
    w->min_ns = min_ns;
    w->max_ns = max_ns;
    w->generation++;
    pthread_mutex_unlock(&w->mu);
}

void lc_memwatch_loud(lc_memwatch *w)
{
    pthread_mutex_lock(&w->mu);
    w->quiet = 0;
    w->generation++;
    pthread_mutex_unlock(&w->mu);
}

lc_memwatch_state lc_memwatch_get(const lc_memwatch *w)
{
    lc_memwatch *m = (lc_memwatch *)w;
    pthread_mutex_lock(&m->mu);
    lc_memwatch_state s = m->state;
    s.quiet = m->quiet;
    pthread_mutex_unlock(&m->mu);
    return s;
}
