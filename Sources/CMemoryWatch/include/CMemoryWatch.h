// The quiet half of memory monitoring, in C.
//
// Far from every threshold, a memory sample is one question: is MemAvailable
// still above the point where the level could change? Asked on the loop, the
// answer cost ~90 µs of CPU a wake-up on the development machine: about a
// third the first touch of cold Swift code after a long sleep (runtime,
// retains, exclusivity checks), a fifth the sd-event timer (a timerfd read
// and re-arm, the epoll round), the rest the wake-up and /proc/meminfo that
// any sampler pays. Asked here it costs what a plain C sleep loop costs
// (~50 µs; docs/performance.md).
//
// A sentinel thread owns the sampling clock. Each time a sample is due:
//   - while the daemon has said "quiet" (lc_memwatch_quiet), it reads
//     MemAvailable and MemTotal with one pread of /proc/meminfo; if
//     MemAvailable is above the hand-back point and MemTotal is unchanged,
//     it sleeps again for lc_fill_interval(MemAvailable - critical): the
//     daemon's loop never wakes. At or below the point it also counts the
//     free pages in per-CPU lists (lc_percpu_free), which MemAvailable
//     leaves out, and stays quiet if the sum is still above the point;
//   - otherwise it hands the sample to the loop (an eventfd watched by
//     sd-event) and waits: `sample(ctx)` runs on the loop's thread, takes the
//     full sample in Swift, re-arms with lc_memwatch_arm and says whether the
//     next samples may be quiet.
// A thread rather than an sd-event timer because of the timer's own cost.
// The sentinel runs no Swift, blocks every signal, and shares only the
// fields under its mutex.
#ifndef CMEMORYWATCH_H
#define CMEMORYWATCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lc_memwatch lc_memwatch;

/// Starts the sentinel, disarmed, and watches its eventfd on `event` (an
/// sd_event *). NULL with errno set when /proc/meminfo cannot be opened, or
/// sd-event or pthread_create refuses.
lc_memwatch *lc_memwatch_new(void *event, void (*sample)(void *ctx), void *ctx);
void lc_memwatch_free(lc_memwatch *w);

/// Samples once at `at_ns` (CLOCK_MONOTONIC nanoseconds); never if at_ns < 0.
void lc_memwatch_arm(lc_memwatch *w, int64_t at_ns);

/// Quiet firings from now on: hand back to `sample` as soon as the available
/// memory (MemAvailable plus lc_percpu_free) is at or below `hand_back_at`
/// bytes or MemTotal is no longer `total` bytes; until then sample again
/// after lc_fill_interval(available - `critical`, fill_rate, min_ns, max_ns).
void lc_memwatch_quiet(lc_memwatch *w, uint64_t hand_back_at, uint64_t total, uint64_t critical,
                       uint64_t fill_rate, int64_t min_ns, int64_t max_ns);
/// Every firing goes to `sample` from now on.
void lc_memwatch_loud(lc_memwatch *w);

typedef struct {
    uint64_t available;     // MemAvailable, bytes, at the last quiet firing
    int64_t percpu;         // lc_percpu_free then, bytes; -1: not read (far above the point)
    int64_t at_ns;          // when (CLOCK_MONOTONIC); 0: none yet
    uint64_t quiet_samples; // quiet firings since lc_memwatch_new
    int quiet;              // quiet now
} lc_memwatch_state;
lc_memwatch_state lc_memwatch_get(const lc_memwatch *w);

/// Nanoseconds until `headroom` bytes could be gone at `fill_rate` bytes per
/// second, between min_ns and max_ns. The one formula for both halves.
int64_t lc_fill_interval(uint64_t headroom, uint64_t fill_rate, int64_t min_ns, int64_t max_ns);

/// Free pages the kernel keeps in per-CPU lists ("pcp"), which MemFree and
/// MemAvailable leave out: /proc/zoneinfo's pageset "count:" lines, summed.
/// Since Linux 6.7 tunes the lists' size to the freeing rate, they can hold
/// hundreds of MiB right after a process's memory is freed, draining back
/// at ~8 MiB/s a CPU: a killed app's memory may not show in MemAvailable
/// for tens of seconds. lc_percpu_open opens /proc/zoneinfo once (NULL with
/// errno set where it cannot); lc_percpu_free reads it whole with pread and
/// returns the bytes, -1 on error. One lc_percpu per thread.
typedef struct lc_percpu lc_percpu;
lc_percpu *lc_percpu_open(void);
void lc_percpu_close(lc_percpu *z);
int64_t lc_percpu_free(lc_percpu *z);
/// The sum of every "count:" value in /proc/zoneinfo text; -1 on overflow.
/// Exposed for the tests.
int64_t lc_zoneinfo_percpu_pages(const char *buf, long length);

/// The first unsigned integer after the first `key` (`key_length` bytes, no
/// NUL needed) in `buf`, spaces skipped, as /proc/meminfo and the pressure
/// files lay it out; -1 when absent, without digits, or too big. The one
/// parser of those files: Swift's KernelFile calls it too.
int64_t lc_integer_after(const char *buf, long length, const char *key, long key_length);

// The reclaimer: a worker thread that pushes a suspended app's memory to
// swap (cgroup v2 memory.reclaim, Linux 5.19+), so that the loop never
// waits on the kernel's reclaim, which runs in the writer's context and
// can take seconds. It writes in chunks of 16 MiB, looking before each
// whether the group is still frozen (a thawed app's memory is wanted
// back, not pushed out) and stopping at the first refusal (EAGAIN: the
// kernel found less to reclaim than asked). Each job's result is queued
// and the eventfd becomes readable; the loop takes them with
// lc_reclaimer_take. The thread blocks every signal.
typedef struct lc_reclaimer lc_reclaimer;

typedef struct {
    uint64_t job;
    uint64_t requested;     // bytes asked for
    uint64_t pushed;        // bytes the kernel took (the chunks it accepted)
    int64_t before;         // memory.current before and after; -1: not read
    int64_t after;
    int64_t nanoseconds;    // how long it took
    int error;              // 0; EAGAIN: less to reclaim than asked; ESTALE: thawed meanwhile; else the errno
} lc_reclaim_result;

/// Starts the worker. NULL with errno set when eventfd or pthread_create refuses.
lc_reclaimer *lc_reclaimer_new(void);
/// Stops the worker (after the chunk in progress) and frees it.
void lc_reclaimer_free(lc_reclaimer *r);
/// Readable (an eventfd) when results wait.
int lc_reclaimer_fd(const lc_reclaimer *r);
/// Queues a job for the cgroup `dirfd` (an O_DIRECTORY descriptor, dup'ed
/// here). 0, or -1 with errno: EBUSY when 8 jobs wait already.
int lc_reclaimer_submit(lc_reclaimer *r, uint64_t job, int dirfd, uint64_t bytes);
/// Takes the oldest result: 1, or 0 when none waits.
int lc_reclaimer_take(lc_reclaimer *r, lc_reclaim_result *out);

#ifdef __cplusplus
}
#endif
#endif
