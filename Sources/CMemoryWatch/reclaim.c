// The reclaimer (CMemoryWatch.h): memory.reclaim written off the loop.
#define _GNU_SOURCE
#include "CMemoryWatch.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define QUEUE 8
#define CHUNK (16ull << 20)

struct job {
    uint64_t id;
    int dirfd;
    uint64_t bytes;
};

struct lc_reclaimer {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int done;  // eventfd
    int stop;
    struct job jobs[QUEUE];
    int njobs;
    lc_reclaim_result results[QUEUE];
    int nresults;
};

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/// A small cgroup file under `dirfd`, read whole into `buf`; its length, or -1.
static ssize_t read_at(int dirfd, const char *name, char *buf, size_t size) {
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n;
    do n = read(fd, buf, size - 1); while (n < 0 && errno == EINTR);
    close(fd);
    if (n >= 0) buf[n] = 0;
    return n;
}

static int64_t current(int dirfd) {
    char buf[32];
    if (read_at(dirfd, "memory.current", buf, sizeof buf) <= 0) return -1;
    return strtoll(buf, NULL, 10);
}

/// Still frozen: cgroup.freeze says 1 (asked), whatever cgroup.events says.
static int frozen(int dirfd) {
    char buf[8];
    return read_at(dirfd, "cgroup.freeze", buf, sizeof buf) > 0 && buf[0] == '1';
}

static lc_reclaim_result run(const struct job *j) {
    lc_reclaim_result res = {.job = j->id, .requested = j->bytes, .before = current(j->dirfd), .after = -1};
    int64_t began = now_ns();
    int fd = openat(j->dirfd, "memory.reclaim", O_WRONLY | O_CLOEXEC);
    if (fd < 0) res.error = errno;
    while (fd >= 0 && res.pushed < j->bytes) {
        if (!frozen(j->dirfd)) {
            res.error = ESTALE;
            break;
        }
        uint64_t chunk = j->bytes - res.pushed < CHUNK ? j->bytes - res.pushed : CHUNK;
        char text[32];
        int len = snprintf(text, sizeof text, "%llu", (unsigned long long)chunk);
        ssize_t w;
        do w = write(fd, text, (size_t)len); while (w < 0 && errno == EINTR);
        if (w < 0) {
            res.error = errno;
            break;
        }
        res.pushed += chunk;
    }
    if (fd >= 0) close(fd);
    res.after = current(j->dirfd);
    res.nanoseconds = now_ns() - began;
    return res;
}

static void *worker(void *arg) {
    lc_reclaimer *r = arg;
    pthread_mutex_lock(&r->lock);
    for (;;) {
        while (!r->stop && r->njobs == 0) pthread_cond_wait(&r->wake, &r->lock);
        if (r->stop) break;
        struct job j = r->jobs[0];
        memmove(r->jobs, r->jobs + 1, sizeof(struct job) * (size_t)(--r->njobs));
        pthread_mutex_unlock(&r->lock);
        lc_reclaim_result res = run(&j);
        close(j.dirfd);
        pthread_mutex_lock(&r->lock);
        if (r->nresults < QUEUE) r->results[r->nresults++] = res;  // at most QUEUE jobs are ever queued
        uint64_t one = 1;
        ssize_t ignored = write(r->done, &one, sizeof one);
        (void)ignored;
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

lc_reclaimer *lc_reclaimer_new(void) {
    lc_reclaimer *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->wake, NULL);
    r->done = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r->done < 0) {
        int e = errno;
        free(r);
        errno = e;
        return NULL;
    }
    // Signals stay with the loop's signalfd: the worker blocks them all.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&r->thread, NULL, worker, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0) {
        close(r->done);
        free(r);
        errno = e;
        return NULL;
    }
    return r;
}

void lc_reclaimer_free(lc_reclaimer *r) {
    if (!r) return;
    pthread_mutex_lock(&r->lock);
    r->stop = 1;
    pthread_cond_signal(&r->wake);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL);
    for (int i = 0; i < r->njobs; i++) close(r->jobs[i].dirfd);
    close(r->done);
    free(r);
}

int lc_reclaimer_fd(const lc_reclaimer *r) { return r->done; }

int lc_reclaimer_submit(lc_reclaimer *r, uint64_t job, int dirfd, uint64_t bytes) {
    int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return -1;
    pthread_mutex_lock(&r->lock);
    if (r->njobs + r->nresults >= QUEUE) {
        pthread_mutex_unlock(&r->lock);
        close(fd);
        errno = EBUSY;
        return -1;
    }
    r->jobs[r->njobs++] = (struct job){.id = job, .dirfd = fd, .bytes = bytes};
    pthread_cond_signal(&r->wake);
    pthread_mutex_unlock(&r->lock);
    return 0;
}

int lc_reclaimer_take(lc_reclaimer *r, lc_reclaim_result *out) {
    uint64_t count;
    ssize_t ignored = read(r->done, &count, sizeof count);  // EAGAIN when drained: fine
    (void)ignored;
    pthread_mutex_lock(&r->lock);
    int got = r->nresults > 0;
    if (got) {
        *out = r->results[0];
        memmove(r->results, r->results + 1, sizeof(lc_reclaim_result) * (size_t)(--r->nresults));
    }
    pthread_mutex_unlock(&r->lock);
    return got;
}
