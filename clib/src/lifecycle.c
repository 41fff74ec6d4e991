/* liblifecycle: the C client of lifecycled (see include/lifecycle.h for the
 * API, docs/protocol.md for the protocol, Sources/LifecycleClient for the
 * Swift client this one behaves like).
 *
 * No threads, no global state: everything is in struct lifecycle_app. The
 * hot path (one event: recvmsg into the app's buffer, decode in place,
 * callback, send the 8-byte acknowledgement) allocates nothing; memory is
 * allocated only for launch options (once per launch), the options of the
 * events that carry them (one block, grown when a larger one comes, then
 * reused), restoration data (once per launch), the background task table,
 * messages queued while a task reply is awaited, the reply buffer of a
 * resume, and for scenes: one small object per connected scene, its
 * display's name, and the names of discarded sessions (a reused block). The two receive buffers (LIFECYCLE_MAX_MESSAGE, 65 KiB, each) are
 * part of the app object, on the heap, never on the stack.
 *
 * When lifecycled restarts, the channel breaks and, if the daemon named a
 * resume socket, is resumed in place (docs/protocol.md, "Resuming the
 * channel after the daemon restarts"): see resume() below. */
#define _GNU_SOURCE
#include "lifecycle.h"
#include "internal.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* A background task the app holds open: begun, not yet ended. */
struct task {
    uint32_t id;
    lifecycle_expiration_fn expiration;
    void *userdata;
    int warned; /* its expiration was handled: a repeated notice runs no handler */
};

/* Between tries to reach the resume socket: 100 ms, doubling up to 1 s. */
#define RESUME_FIRST_PAUSE_MS 100
#define RESUME_LONGEST_PAUSE_MS 1000
/* How long one try waits for `resumed`. */
#define RESUME_REPLY_TIMEOUT_MS 5000

/* handle(): an event that must wait for the deferred one's acknowledgement. */
#define HELD 1

struct queued {
    uint8_t *bytes;
    size_t size;
};

/* A connected scene (lifecycle_scene): allocated when it is first heard
 * of, freed when its sceneDidDisconnect is acknowledged, so that a handle
 * keeps its address while the scene is connected. */
struct lifecycle_scene {
    char name[LIFECYCLE_MAX_SCENE_NAME + 1];
    char *display; /* NULL until an event names one */
    lifecycle_scene_state state;
    int restored;  /* the latest sceneWillConnect's session was `restored` */
};

struct lifecycle_app {
    int fd;          /* the channel; -1 standalone or after a channel error */
    int supervised;  /* connected to lifecycled (even if closed since) */
    int error;       /* the channel error (errno), 0 while the channel works */
    char message[256];
    lifecycle_callbacks callbacks;
    void *userdata;
    char *name;

    lifecycle_app_state state;
    int dispatching; /* inside lifecycle_dispatch/run: no re-entry, no close */
    int terminated;  /* willTerminate acknowledged */

    /* The current event: in its callback, or deferred. */
    lifecycle_event current;
    uint32_t sequence;
    int64_t deadline;
    int in_callback;
    int acknowledged;
    lifecycle_token token;
    uint32_t generation;

    int64_t budget_end; /* -1: none */

    /* The current event's options, copied (a deferred event outlives the
     * receive buffer) into one block reused from event to event: 2 *
     * event_option_count pointers, then the strings. */
    char **event_options;
    size_t event_option_count, event_options_capacity;
    /* The fetch result set for the current (or last) event, -1 for none:
     * its acknowledgement is then a `complete`. Kept after it, so that an
     * acknowledgement lost with a broken channel is sent again the same. */
    int result;

    /* Restoration data handed over at launch (with a NUL byte after it). */
    uint8_t *restoration;
    size_t restoration_size;

    /* Launch options: one allocation, 2 * option_count pointers then strings. */
    int launched_in_background; /* -1 before the launch events */
    size_t option_count;
    char **options;

    uint32_t next_request;
    struct task *tasks;
    size_t task_count, task_capacity;

    /* Scenes: the connected ones in the order first heard of; the current
     * event's; the sessions the current didDiscardSceneSessions names (one
     * block, reused: discarded_count pointers, then the names). */
    struct lifecycle_scene *scenes[LIFECYCLE_MAX_SCENES];
    size_t scene_count;
    struct lifecycle_scene *event_scene;
    char **discarded;
    size_t discarded_count, discarded_capacity;

    struct queued queue[LIFECYCLE_MAX_QUEUED];
    size_t queue_head, queue_count;
    /* The queue's first message is an event that came while the current one
     * was deferred (launch events go together to a held prewarm): it waits
     * for that acknowledgement, with the queue behind it (later events join
     * it there; replies and notices from the socket are handled meanwhile). */
    int holding;

    /* Resuming after lifecycled restarts. */
    char *resume_path;          /* $LIFECYCLE_RESUME_SOCKET; NULL: a broken channel is final */
    int resume_wait_ms;         /* LIFECYCLE_RESUME_WAIT_MS (shorter in the tests) */
    uint32_t resumes;           /* channels resumed so far: a task request that saw one gives up */
    int received;               /* an event was handled: `sequence` is the highest number handled */
    int acknowledged_any;       /* an acknowledgement was sent, so `last_acknowledged` is one */
    uint32_t last_acknowledged; /* the sequence number of the last acknowledgement sent */

    uint8_t buffer[LC_WIRE_MAX_MESSAGE];      /* what lifecycle_dispatch reads */
    uint8_t wait_buffer[LC_WIRE_MAX_MESSAGE]; /* what a task request reads meanwhile */
};

#define API LIFECYCLE_API
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
#define PROTOCOL STRINGIFY(LIFECYCLE_PROTOCOL_VERSION)

/* MARK: - Errors */

static void vnote(lifecycle_app *app, const char *format, va_list ap) __attribute__((format(printf, 2, 0)));
static void vnote(lifecycle_app *app, const char *format, va_list ap) {
    vsnprintf(app->message, sizeof app->message, format, ap);
}

static void note(lifecycle_app *app, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void note(lifecycle_app *app, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    vnote(app, format, ap);
    va_end(ap);
}

/* A channel error: final. Closes the socket; returns -1 with errno set. */
static int channel_error(lifecycle_app *app, int err, const char *format, ...) __attribute__((format(printf, 3, 4)));
static int channel_error(lifecycle_app *app, int err, const char *format, ...) {
    if (!app->error) {
        va_list ap;
        va_start(ap, format);
        vnote(app, format, ap);
        va_end(ap);
        app->error = err;
        if (app->fd >= 0) close(app->fd);
        app->fd = -1;
    }
    errno = app->error;
    return -1;
}

/* Fails with the channel error if there was one. */
static int broken(const lifecycle_app *app) {
    if (!app->error) return 0;
    errno = app->error;
    return 1;
}

/* MARK: - Creating */

static int copy_callbacks(lifecycle_app *app, const lifecycle_callbacks *callbacks, size_t size) {
    memset(&app->callbacks, 0, sizeof app->callbacks);
    if (!callbacks) return 0;
    if (size > sizeof *callbacks) {
        /* From a newer header: fine as long as the members we do not know are unset. */
        const unsigned char *extra = (const unsigned char *)callbacks + sizeof *callbacks;
        for (size_t i = 0; i < size - sizeof *callbacks; i++)
            if (extra[i]) { errno = EINVAL; return -1; }
        size = sizeof *callbacks;
    }
    memcpy(&app->callbacks, callbacks, size);
    return 0;
}

static lifecycle_app *create(int fd, const lifecycle_callbacks *callbacks, size_t size, void *userdata) {
    lifecycle_app *app = calloc(1, sizeof *app);
    if (!app) { errno = ENOMEM; return NULL; }
    if (copy_callbacks(app, callbacks, size)) { free(app); return NULL; }
    const char *name = getenv(LIFECYCLE_APP_ENV);
    if (name && !(app->name = strdup(name))) { free(app); errno = ENOMEM; return NULL; }
    app->fd = fd;
    app->supervised = fd >= 0;
    app->userdata = userdata;
    app->state = LIFECYCLE_STATE_INACTIVE;
    app->deadline = -1;
    app->budget_end = -1;
    app->result = -1;
    app->launched_in_background = -1;
    app->next_request = 1;
    app->resume_wait_ms = LIFECYCLE_RESUME_WAIT_MS;
    return app;
}

/* 0 when fd is a SOCK_SEQPACKET socket; -1 with EBADF, ENOTSOCK or EPROTOTYPE. */
static int check_socket(int fd) {
    int type = 0;
    socklen_t len = sizeof type;
    if (fd < 0) { errno = EBADF; return -1; }
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0) return -1;
    if (type != SOCK_SEQPACKET) { errno = EPROTOTYPE; return -1; }
    return 0;
}

API lifecycle_app *lifecycle_connect_fd(int fd, const lifecycle_callbacks *callbacks, size_t callbacks_size,
                                        void *userdata) {
    if (check_socket(fd)) return NULL;
    return create(fd, callbacks, callbacks_size, userdata);
}

static int send_bytes(lifecycle_app *app, const uint8_t *bytes, size_t size);

API lifecycle_app *lifecycle_connect(const lifecycle_callbacks *callbacks, size_t callbacks_size, void *userdata) {
    const char *raw = getenv(LIFECYCLE_FD_ENV);
    if (!raw || !*raw) { errno = ENOENT; return NULL; }
    long fd = 0;
    for (const char *p = raw; *p; p++) {
        if (*p < '0' || *p > '9' || fd > INT_MAX / 10) { errno = EBADF; return NULL; }
        fd = fd * 10 + (*p - '0');
    }
    if (fd > INT_MAX) { errno = EBADF; return NULL; }
    const char *proto = getenv(LIFECYCLE_PROTOCOL_ENV);
    if (proto && *proto && strcmp(proto, PROTOCOL) != 0) { errno = EPROTONOSUPPORT; return NULL; }
    lifecycle_app *app = lifecycle_connect_fd((int)fd, callbacks, callbacks_size, userdata);
    if (!app) return NULL;
    /* A resume needs a path that fits a socket address and a name the
     * daemon could know; without them a broken channel stays final. */
    const char *resume = getenv(LIFECYCLE_RESUME_SOCKET_ENV);
    if (resume && *resume && strlen(resume) < sizeof ((struct sockaddr_un *)0)->sun_path && app->name &&
        strlen(app->name) <= LC_WIRE_MAX_APP_NAME &&
        lifecycle__valid_utf8((const uint8_t *)app->name, strlen(app->name)) &&
        !(app->resume_path = strdup(resume))) {
        app->fd = -1; /* left open, as on every failure */
        lifecycle_close(app);
        errno = ENOMEM;
        return NULL;
    }
    int flags = fcntl((int)fd, F_GETFD);
    if (flags >= 0) fcntl((int)fd, F_SETFD, flags | FD_CLOEXEC); /* not for the app's own children */
    unsetenv(LIFECYCLE_FD_ENV);
    unsetenv(LIFECYCLE_PROTOCOL_ENV);
    unsetenv(LIFECYCLE_RESUME_SOCKET_ENV);
    /* Prewarmed: the app is at its first event now; the daemon freezes it
     * here. A send lost with a broken channel costs only the prewarm. */
    const char *prewarm = getenv(LIFECYCLE_PREWARM_ENV);
    if (prewarm && strcmp(prewarm, "1") == 0) {
        uint8_t out[LC_WIRE_HEADER];
        (void)send_bytes(app, out, lifecycle__encode_prewarmed(out));
    }
    unsetenv(LIFECYCLE_PREWARM_ENV);
    return app;
}

API lifecycle_app *lifecycle_standalone(const lifecycle_callbacks *callbacks, size_t callbacks_size,
                                        void *userdata) {
    return create(-1, callbacks, callbacks_size, userdata);
}

API int lifecycle_close(lifecycle_app *app) {
    if (!app) { errno = EINVAL; return -1; }
    if (app->dispatching) { errno = EBUSY; return -1; }
    if (app->fd >= 0) close(app->fd);
    while (app->queue_count) {
        free(app->queue[app->queue_head].bytes);
        app->queue_head = (app->queue_head + 1) % LIFECYCLE_MAX_QUEUED;
        app->queue_count--;
    }
    for (size_t i = 0; i < app->scene_count; i++) {
        free(app->scenes[i]->display);
        free(app->scenes[i]);
    }
    free(app->discarded);
    free(app->tasks);
    free(app->options);
    free(app->event_options);
    free(app->restoration);
    free(app->name);
    free(app->resume_path);
    free(app);
    return 0;
}

API int lifecycle_is_supervised(const lifecycle_app *app) { return app && app->supervised; }

API const char *lifecycle_app_name(const lifecycle_app *app) { return app ? app->name : NULL; }

API int lifecycle_fd(const lifecycle_app *app) {
    if (!app) { errno = EINVAL; return -1; }
    if (!app->supervised) { errno = ENOTCONN; return -1; }
    if (broken(app)) return -1;
    return app->fd;
}

API size_t lifecycle_pending(const lifecycle_app *app) { return app && !app->holding ? app->queue_count : 0; }

/* MARK: - The channel */

static int resume(lifecycle_app *app);

/* Sends one message, gathered from `count` pieces. Returns 0; 1 when the
 * channel broke and was resumed instead: the message is not sent (an
 * acknowledgement needs not be, see resume()); -1 after a channel error. */
static int send_message(lifecycle_app *app, struct iovec *iov, int count) {
    if (broken(app)) return -1;
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = iov;
    mh.msg_iovlen = (size_t)count;
    for (;;) {
        ssize_t n = sendmsg(app->fd, &mh, MSG_NOSIGNAL);
        if (n >= 0) return 0;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) { /* a non-blocking fd with a full buffer: wait */
            struct pollfd p = {app->fd, POLLOUT, 0};
            if (poll(&p, 1, -1) >= 0 || errno == EINTR) continue;
        }
        int err = errno;
        if ((err == EPIPE || err == ECONNRESET) && app->resume_path) return resume(app) ? -1 : 1;
        return channel_error(app, err == EPIPE ? ECONNRESET : err, "send: %s", strerror(err));
    }
}

static int send_bytes(lifecycle_app *app, const uint8_t *bytes, size_t size) {
    struct iovec iov = {(void *)bytes, size};
    return send_message(app, &iov, 1);
}

static int oversized(lifecycle_app *app, ssize_t n) {
    return channel_error(app, EPROTO, "protocol violation by the daemon: message of %zd bytes exceeds %d", n,
                         LC_WIRE_MAX_MESSAGE);
}

/* Receives one datagram into `buffer`. Returns its size; 0 when `block` is
 * false and nothing is waiting, or when the channel broke and was resumed
 * (whatever the daemon sends again is then read by the next call); -1 after
 * a channel error (including a closed channel and an oversized message). */
static ssize_t receive(lifecycle_app *app, uint8_t *buffer, int block) {
    if (broken(app)) return -1;
    for (;;) {
        struct iovec iov = {buffer, LC_WIRE_MAX_MESSAGE};
        struct msghdr mh;
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        /* MSG_TRUNC: the real length of a longer datagram, to reject it. */
        ssize_t n = recvmsg(app->fd, &mh, MSG_TRUNC | (block ? 0 : MSG_DONTWAIT));
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (!block) return 0;
                struct pollfd p = {app->fd, POLLIN, 0}; /* the app made the fd non-blocking */
                if (poll(&p, 1, -1) >= 0 || errno == EINTR) continue;
            }
            int err = errno;
            if (err == ECONNRESET && app->resume_path) return resume(app) ? -1 : 0;
            return channel_error(app, err, "recv: %s", strerror(err));
        }
        /* SOCK_SEQPACKET: 0 is the end of the stream (or an empty datagram,
         * which would not decode either). */
        if (n == 0) {
            if (app->resume_path) return resume(app) ? -1 : 0;
            return channel_error(app, ECONNRESET, "lifecycled closed the channel");
        }
        if (n > LC_WIRE_MAX_MESSAGE || (mh.msg_flags & MSG_TRUNC)) return oversized(app, n);
        return n;
    }
}

static int decode(lifecycle_app *app, const uint8_t *bytes, size_t size, struct lifecycle__message *m) {
    char why[LC_WIRE_ERROR_MAX];
    if (lifecycle__decode_daemon(bytes, size, m, why))
        return channel_error(app, EPROTO, "protocol violation by the daemon: %s", why);
    return 0;
}

/* Acknowledges an event: with `complete` and its fetch result when one was
 * set (result >= 0, wake events), else with `acknowledge`. An
 * acknowledgement lost with a broken channel is not sent again: the resume
 * names the last one sent, so the daemon sends the event again and
 * repeated() acknowledges it. */
static int send_acknowledge(lifecycle_app *app, uint32_t sequence, int result) {
    uint8_t out[LC_WIRE_HEADER + 1];
    size_t size = result < 0 ? lifecycle__encode_acknowledge(out, sequence)
                             : lifecycle__encode_complete(out, sequence, (uint8_t)result);
    int r = send_bytes(app, out, size);
    if (r == 0) {
        app->last_acknowledged = sequence;
        app->acknowledged_any = 1;
    }
    return r < 0 ? -1 : 0;
}

/* An end lost with a broken channel is not sent again: the task is no
 * longer in the table, so the resume does not list it and the daemon ends
 * it. */
static int send_end_task(lifecycle_app *app, uint32_t task) {
    uint8_t out[LC_WIRE_HEADER];
    return send_bytes(app, out, lifecycle__encode_end_task(out, task)) < 0 ? -1 : 0;
}

/* MARK: - Resuming */

/* Sleeps until lifecycle_now() reaches `until` (signals do not cut it short). */
static void pause_until(int64_t until) {
    struct timespec t = {(time_t)(until / 1000000000), (long)(until % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR) {}
}

/* One try: connect to the resume socket, send `resume`, wait for `resumed`,
 * move the new socket onto the channel's descriptor number. Returns 0 when
 * the channel is back; 1 for a failed try (nobody listening, the connection
 * closed or no answer in time: the daemon may still be starting); -1 after a
 * channel error (a message that does not decode, or another before
 * `resumed`). */
static int try_resume(lifecycle_app *app, const uint8_t *message, size_t size, int64_t give_up, uint8_t *reply) {
    struct sockaddr_un address;
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    memcpy(address.sun_path, app->resume_path, strlen(app->resume_path)); /* it fits: lifecycle_connect */
    /* Non-blocking, so that a daemon with a full backlog is a failed try,
     * not a wait without end. */
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) return 1;
    if (connect(s, (struct sockaddr *)&address, sizeof address) != 0 ||
        send(s, message, size, MSG_NOSIGNAL) != (ssize_t)size) {
        close(s);
        return 1;
    }
    int64_t until = lifecycle_now() + (int64_t)RESUME_REPLY_TIMEOUT_MS * 1000000;
    if (until > give_up) until = give_up;
    for (;;) {
        int64_t left = until - lifecycle_now();
        if (left <= 0) { close(s); return 1; }
        struct pollfd p = {s, POLLIN, 0};
        if (poll(&p, 1, (int)((left + 999999) / 1000000)) <= 0) continue; /* the loop looks at the time */
        struct iovec iov = {reply, LC_WIRE_MAX_MESSAGE};
        struct msghdr mh;
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        ssize_t n = recvmsg(s, &mh, MSG_TRUNC | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
        if (n <= 0) { close(s); return 1; } /* closed before `resumed` */
        struct lifecycle__message m;
        if (n > LC_WIRE_MAX_MESSAGE || (mh.msg_flags & MSG_TRUNC)) { close(s); return oversized(app, n); }
        if (decode(app, reply, (size_t)n, &m)) { close(s); return -1; }
        if (m.type != LC_T_RESUMED) {
            close(s);
            return channel_error(app, EPROTO, "protocol violation by the daemon: message type 0x%x before resumed",
                                 (unsigned)m.type);
        }
        break;
    }
    /* The old number now names the new socket (closing the old one), so
     * that an app polling lifecycle_fd() keeps polling the channel; blocking
     * or not as the app left the old one. */
    int old_flags = fcntl(app->fd, F_GETFL), flags = fcntl(s, F_GETFL);
    if (old_flags >= 0 && flags >= 0) fcntl(s, F_SETFL, (flags & ~O_NONBLOCK) | (old_flags & O_NONBLOCK));
    if (dup3(s, app->fd, O_CLOEXEC) < 0) {
        int err = errno;
        close(s);
        return channel_error(app, err, "dup3: %s", strerror(err));
    }
    close(s);
    app->resumes++;
    return 0;
}

/* The channel broke (end of file, ECONNRESET, EPIPE) and the daemon named a
 * resume socket: blocks, running no callback, until a restarted lifecycled
 * takes the channel back, for at most resume_wait_ms. The resume names the
 * last acknowledgement sent and the tasks held open; what was lost with the
 * old socket follows from them (docs/protocol.md): the daemon takes the
 * acknowledgements up to that one as given and sends the event in flight
 * again, and ends the tasks not listed. So a message whose send found the
 * break is not sent again, and a task request waiting for its reply gives
 * up. Returns 0 when the channel is back; -1 after the final channel error
 * ("lifecycled closed the channel" once the time is up). */
static int resume(lifecycle_app *app) {
    /* The daemon holds at most 64 tasks; more in the table would be ones it
     * no longer has. */
    uint32_t held[LC_WIRE_MAX_RESUME_TASKS];
    uint16_t count = 0;
    for (size_t i = 0; i < app->task_count && count < LC_WIRE_MAX_RESUME_TASKS; i++) held[count++] = app->tasks[i].id;
    uint8_t message[LC_WIRE_HEADER + 2 + LC_WIRE_MAX_APP_NAME + 2 + 4 * LC_WIRE_MAX_RESUME_TASKS];
    size_t size =
        lifecycle__encode_resume(message, app->last_acknowledged, app->name, strlen(app->name), held, count);
    /* Not app->buffer or app->wait_buffer: a message in them may still be
     * in use (a resume can start inside a callback). */
    uint8_t *reply = malloc(LC_WIRE_MAX_MESSAGE);
    if (!reply) return channel_error(app, ENOMEM, "out of memory for resuming the channel");
    int64_t give_up = lifecycle_now() + (int64_t)app->resume_wait_ms * 1000000;
    int64_t interval = (int64_t)RESUME_FIRST_PAUSE_MS * 1000000;
    for (;;) {
        int r = try_resume(app, message, size, give_up, reply);
        if (r <= 0) {
            free(reply);
            return r;
        }
        int64_t next = lifecycle_now() + interval;
        pause_until(next < give_up ? next : give_up);
        if (lifecycle_now() >= give_up) break;
        interval *= 2;
        if (interval > (int64_t)RESUME_LONGEST_PAUSE_MS * 1000000) interval = (int64_t)RESUME_LONGEST_PAUSE_MS * 1000000;
    }
    free(reply);
    return channel_error(app, ECONNRESET, "lifecycled closed the channel");
}

void lifecycle__set_resume_wait(lifecycle_app *app, int milliseconds) { app->resume_wait_ms = milliseconds; }

/* MARK: - Launch options */

/* The size of a block holding the options of `m`: 2 * option_count
 * pointers, then the keys and values, each NUL-terminated. */
static size_t options_size(const struct lifecycle__message *m) {
    size_t bytes = 2u * m->option_count * sizeof(char *);
    const uint8_t *cursor = m->options;
    struct lifecycle__str k, v;
    for (unsigned i = 0; i < m->option_count; i++) {
        lifecycle__next_option(&cursor, &k, &v);
        bytes += (size_t)k.length + 1 + v.length + 1;
    }
    return bytes;
}

static void fill_options(char **block, const struct lifecycle__message *m) {
    char *text = (char *)(block + 2u * m->option_count);
    const uint8_t *cursor = m->options;
    struct lifecycle__str k, v;
    for (unsigned i = 0; i < m->option_count; i++) {
        lifecycle__next_option(&cursor, &k, &v);
        block[2 * i] = text;
        memcpy(text, k.bytes, k.length);
        text[k.length] = 0;
        text += k.length + 1;
        block[2 * i + 1] = text;
        memcpy(text, v.bytes, v.length);
        text[v.length] = 0;
        text += v.length + 1;
    }
}

/* The value of the first option named `key` in a block, or NULL. */
static const char *find_option(char *const *options, size_t count, const char *key) {
    for (size_t i = 0; i < count; i++)
        if (strcmp(options[2 * i], key) == 0) return options[2 * i + 1];
    return NULL;
}

static int store_options(lifecycle_app *app, const struct lifecycle__message *m) {
    size_t bytes = options_size(m);
    char **block = malloc(bytes ? bytes : 1);
    if (!block) return channel_error(app, ENOMEM, "out of memory for the launch options");
    fill_options(block, m);
    free(app->options);
    app->options = block;
    app->option_count = m->option_count;
    app->launched_in_background = m->background;
    return 0;
}

/* The options of the event about to be delivered, in the reused block. */
static int set_event_options(lifecycle_app *app, const struct lifecycle__message *m) {
    app->event_option_count = 0;
    if (!m->option_count) return 0;
    size_t bytes = options_size(m);
    if (bytes > app->event_options_capacity) {
        char **block = realloc(app->event_options, bytes);
        if (!block) return channel_error(app, ENOMEM, "out of memory for the options of an event");
        app->event_options = block;
        app->event_options_capacity = bytes;
    }
    fill_options(app->event_options, m);
    app->event_option_count = m->option_count;
    return 0;
}

API const char *lifecycle_launch_option(const lifecycle_app *app, const char *key) {
    if (!app || !key) return NULL;
    return find_option(app->options, app->option_count, key);
}

API const char *lifecycle_event_option(const lifecycle_app *app, const char *key) {
    if (!app || !key || app->current == LIFECYCLE_EVENT_NONE) return NULL;
    return find_option(app->event_options, app->event_option_count, key);
}

API const char *lifecycle_event_payload(const lifecycle_app *app) {
    if (!app || app->current != LIFECYCLE_EVENT_DID_RECEIVE_REMOTE_NOTIFICATION) return NULL;
    return lifecycle_event_option(app, "push.payload");
}

API const char *lifecycle_event_url(const lifecycle_app *app) {
    if (!app || app->current != LIFECYCLE_EVENT_OPEN_URL) return NULL;
    return lifecycle_event_option(app, "url");
}

API const char *lifecycle_launch_reason(const lifecycle_app *app) {
    return lifecycle_launch_option(app, "launch.reason");
}

API size_t lifecycle_launch_option_count(const lifecycle_app *app) { return app ? app->option_count : 0; }

API int lifecycle_launch_option_at(const lifecycle_app *app, size_t index, const char **key, const char **value) {
    if (!app || index >= app->option_count) { errno = EINVAL; return -1; }
    if (key) *key = app->options[2 * index];
    if (value) *value = app->options[2 * index + 1];
    return 0;
}

API int lifecycle_launched_in_background(const lifecycle_app *app) {
    return app ? app->launched_in_background : -1;
}

API const char *lifecycle_previous_termination_reason(const lifecycle_app *app) {
    return lifecycle_launch_option(app, "previous.reason");
}

API const char *lifecycle_previous_termination_description(const lifecycle_app *app) {
    return lifecycle_launch_option(app, "previous.description");
}

/* A decimal number as Swift's Double(String) reads it (sign, digits,
 * fraction, exponent), independent of the C locale (strtod is not). The
 * digits are gathered as an integer and scaled once. -1 when it is not one. */
static double parse_seconds(const char *s) {
    const char *p = s;
    uint64_t mantissa = 0;
    int exponent = 0, digits = 0, negative = 0;
    if (*p == '+' || *p == '-') negative = *p++ == '-';
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (mantissa < 100000000000000000ull) mantissa = mantissa * 10 + (uint64_t)(*p - '0');
        else exponent++;
    }
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (mantissa < 100000000000000000ull) { mantissa = mantissa * 10 + (uint64_t)(*p - '0'); exponent--; }
    if (!digits) return -1;
    if (*p == 'e' || *p == 'E') {
        int negative_exponent = 0, e = 0, exponent_digits = 0;
        p++;
        if (*p == '+' || *p == '-') negative_exponent = *p++ == '-';
        for (; *p >= '0' && *p <= '9'; p++, exponent_digits++)
            if (e < 1000) e = e * 10 + (*p - '0');
        if (!exponent_digits) return -1;
        exponent += negative_exponent ? -e : e;
    }
    if (*p) return -1;
    double scale = 1, v = (double)mantissa;
    for (int i = exponent < 0 ? -exponent : exponent; i > 0 && scale < 1e300; i--) scale *= 10;
    v = exponent < 0 ? v / scale : v * scale;
    return negative ? -v : v;
}

API double lifecycle_previous_termination_time(const lifecycle_app *app) {
    const char *t = lifecycle_launch_option(app, "previous.time");
    if (!t) return -1;
    double v = parse_seconds(t);
    return v >= 0 ? v : -1;
}

/* MARK: - State */

API lifecycle_app_state lifecycle_state(const lifecycle_app *app) {
    return app ? app->state : LIFECYCLE_STATE_INACTIVE;
}

API lifecycle_event lifecycle_current_event(const lifecycle_app *app) {
    return app ? app->current : LIFECYCLE_EVENT_NONE;
}

API int64_t lifecycle_event_deadline(const lifecycle_app *app) {
    return app && app->current != LIFECYCLE_EVENT_NONE ? app->deadline : -1;
}

API int64_t lifecycle_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

API int64_t lifecycle_background_time_remaining(const lifecycle_app *app) {
    if (!app || app->state != LIFECYCLE_STATE_BACKGROUND || app->budget_end < 0) return -1;
    int64_t left = app->budget_end - lifecycle_now();
    return left > 0 ? left : 0;
}

/* MARK: - Scenes */

/* The words of a scene name, for the errors: SceneNames.valid in Swift. */
#define SCENE_NAME_RULE "1 to " STRINGIFY(LIFECYCLE_MAX_SCENE_NAME) " of A-Z a-z 0-9 . _ -"

static int scene_char(uint8_t c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '.' || c == '_' ||
           c == '-';
}

static int valid_scene_name(const uint8_t *bytes, size_t length) {
    if (length < 1 || length > LIFECYCLE_MAX_SCENE_NAME) return 0;
    for (size_t i = 0; i < length; i++)
        if (!scene_char(bytes[i])) return 0;
    return 1;
}

/* The first option of the event `m` named `key`, its bytes as sent (a value
 * with a NUL byte is not cut). 1 when there is one. */
static int raw_option(const struct lifecycle__message *m, const char *key, struct lifecycle__str *value) {
    const uint8_t *cursor = m->options;
    struct lifecycle__str k, v;
    size_t key_length = strlen(key);
    for (unsigned i = 0; i < m->option_count; i++) {
        lifecycle__next_option(&cursor, &k, &v);
        if (k.length == key_length && memcmp(k.bytes, key, key_length) == 0) {
            *value = v;
            return 1;
        }
    }
    return 0;
}

static struct lifecycle_scene *scene_named(const lifecycle_app *app, const uint8_t *name, size_t length) {
    if (length > LIFECYCLE_MAX_SCENE_NAME) return NULL;
    for (size_t i = 0; i < app->scene_count; i++)
        if (strlen(app->scenes[i]->name) == length && memcmp(app->scenes[i]->name, name, length) == 0)
            return app->scenes[i];
    return NULL;
}

/* Removes a scene from the table (the later ones move down) and frees it. */
static void forget_scene(lifecycle_app *app, struct lifecycle_scene *scene) {
    for (size_t i = 0; i < app->scene_count; i++) {
        if (app->scenes[i] != scene) continue;
        memmove(&app->scenes[i], &app->scenes[i + 1], (app->scene_count - i - 1) * sizeof app->scenes[0]);
        app->scene_count--;
        break;
    }
    free(scene->display);
    free(scene);
}

/* Where a scene event leaves its scene (LifecycleEvent.sceneState); 0 when
 * the event is not a scene transition. Every event is named (the library is
 * built with -Wswitch-enum): a new one does not compile until sorted here. */
static int scene_state_after(lifecycle_event e, lifecycle_scene_state *state) {
    switch (e) {
    case LIFECYCLE_EVENT_SCENE_WILL_CONNECT:
    case LIFECYCLE_EVENT_SCENE_DID_ENTER_BACKGROUND: *state = LIFECYCLE_SCENE_BACKGROUND; return 1;
    case LIFECYCLE_EVENT_SCENE_WILL_ENTER_FOREGROUND:
    case LIFECYCLE_EVENT_SCENE_WILL_RESIGN_ACTIVE: *state = LIFECYCLE_SCENE_INACTIVE; return 1;
    case LIFECYCLE_EVENT_SCENE_DID_BECOME_ACTIVE: *state = LIFECYCLE_SCENE_ACTIVE; return 1;
    case LIFECYCLE_EVENT_SCENE_DID_DISCONNECT: *state = LIFECYCLE_SCENE_UNATTACHED; return 1;
    case LIFECYCLE_EVENT_NONE:
    case LIFECYCLE_EVENT_WILL_FINISH_LAUNCHING:
    case LIFECYCLE_EVENT_DID_FINISH_LAUNCHING:
    case LIFECYCLE_EVENT_DID_BECOME_ACTIVE:
    case LIFECYCLE_EVENT_WILL_RESIGN_ACTIVE:
    case LIFECYCLE_EVENT_DID_ENTER_BACKGROUND:
    case LIFECYCLE_EVENT_WILL_ENTER_FOREGROUND:
    case LIFECYCLE_EVENT_WILL_TERMINATE:
    case LIFECYCLE_EVENT_DID_RECEIVE_MEMORY_WARNING:
    case LIFECYCLE_EVENT_WILL_BE_KILLED_FOR_MEMORY:
    case LIFECYCLE_EVENT_PERFORM_FETCH:
    case LIFECYCLE_EVENT_DID_RECEIVE_REMOTE_NOTIFICATION:
    case LIFECYCLE_EVENT_OPEN_URL:
    case LIFECYCLE_EVENT_DID_DISCARD_SCENE_SESSIONS: return 0;
    }
    return 0; /* a code this build does not know */
}

static int is_scene_transition(lifecycle_event e) {
    lifecycle_scene_state state;
    return scene_state_after(e, &state);
}

/* A scene transition: its scene (created when first heard of, also without
 * a sceneWillConnect, as after a resumed channel), updated before the
 * callback runs. */
static int scene_transition(lifecycle_app *app, const struct lifecycle__message *m) {
    const char *event = lifecycle_event_name((lifecycle_event)m->event);
    struct lifecycle__str name, display, session;
    if (!raw_option(m, "scene", &name))
        return channel_error(app, EPROTO, "protocol violation by the daemon: %s: option scene missing", event);
    if (!valid_scene_name(name.bytes, name.length))
        return channel_error(app, EPROTO, "protocol violation by the daemon: %s: option scene: not a scene name (%s)",
                             event, SCENE_NAME_RULE);
    struct lifecycle_scene *scene = scene_named(app, name.bytes, name.length);
    if (!scene) {
        if (app->scene_count == LIFECYCLE_MAX_SCENES)
            return channel_error(app, EPROTO, "protocol violation by the daemon: %s: %d scenes connected, more than %d",
                                 event, LIFECYCLE_MAX_SCENES + 1, LIFECYCLE_MAX_SCENES);
        if (!(scene = calloc(1, sizeof *scene))) return channel_error(app, ENOMEM, "out of memory for a scene");
        memcpy(scene->name, name.bytes, name.length);
        app->scenes[app->scene_count++] = scene;
    }
    if (raw_option(m, "display", &display) &&
        !(scene->display && strlen(scene->display) == display.length &&
          memcmp(scene->display, display.bytes, display.length) == 0)) {
        char *copy = malloc((size_t)display.length + 1);
        if (!copy) return channel_error(app, ENOMEM, "out of memory for a scene's display");
        memcpy(copy, display.bytes, display.length);
        copy[display.length] = 0;
        free(scene->display);
        scene->display = copy;
    }
    if (m->event == LIFECYCLE_EVENT_SCENE_WILL_CONNECT)
        scene->restored = raw_option(m, "session", &session) && session.length == 8 &&
                          memcmp(session.bytes, "restored", 8) == 0;
    scene_state_after((lifecycle_event)m->event, &scene->state);
    app->event_scene = scene;
    return 0;
}

/* didDiscardSceneSessions: its `scenes`, split at the commas into the
 * reused block, each a scene name. */
static int discarded_scenes(lifecycle_app *app, const struct lifecycle__message *m) {
    struct lifecycle__str list;
    if (!raw_option(m, "scenes", &list))
        return channel_error(app, EPROTO, "protocol violation by the daemon: didDiscardSceneSessions: option scenes "
                                          "missing");
    size_t count = 0, start = 0;
    for (size_t i = 0; i <= list.length; i++) {
        if (i < list.length && list.bytes[i] != ',') continue;
        if (!valid_scene_name(list.bytes + start, i - start))
            return channel_error(app, EPROTO, "protocol violation by the daemon: didDiscardSceneSessions: option "
                                              "scenes: not scene names separated by commas (%s)",
                                 SCENE_NAME_RULE);
        count++;
        start = i + 1;
    }
    size_t bytes = count * sizeof(char *) + list.length + 1;
    if (bytes > app->discarded_capacity) {
        char **block = realloc(app->discarded, bytes);
        if (!block) return channel_error(app, ENOMEM, "out of memory for the discarded scene sessions");
        app->discarded = block;
        app->discarded_capacity = bytes;
    }
    char *text = (char *)(app->discarded + count);
    memcpy(text, list.bytes, list.length);
    text[list.length] = 0;
    app->discarded[0] = text;
    for (size_t i = 0, k = 1; i < list.length; i++)
        if (text[i] == ',') {
            text[i] = 0;
            app->discarded[k++] = text + i + 1;
        }
    app->discarded_count = count;
    return 0;
}

/* Before an event is delivered: the scene it is about, or the sessions it
 * discards. An openURL names its scene, which is looked up, not created. */
static int scene_of_event(lifecycle_app *app, const struct lifecycle__message *m) {
    app->event_scene = NULL;
    app->discarded_count = 0;
    if (is_scene_transition((lifecycle_event)m->event)) return scene_transition(app, m);
    if (m->event == LIFECYCLE_EVENT_DID_DISCARD_SCENE_SESSIONS) return discarded_scenes(app, m);
    struct lifecycle__str name;
    if (m->event == LIFECYCLE_EVENT_OPEN_URL && raw_option(m, "scene", &name))
        app->event_scene = scene_named(app, name.bytes, name.length);
    return 0;
}

API const lifecycle_scene *lifecycle_event_scene(const lifecycle_app *app) {
    return app && app->current != LIFECYCLE_EVENT_NONE ? app->event_scene : NULL;
}

API size_t lifecycle_scene_count(const lifecycle_app *app) { return app ? app->scene_count : 0; }

API const lifecycle_scene *lifecycle_scene_at(const lifecycle_app *app, size_t index) {
    if (!app || index >= app->scene_count) { errno = EINVAL; return NULL; }
    return app->scenes[index];
}

API const lifecycle_scene *lifecycle_find_scene(const lifecycle_app *app, const char *name) {
    if (!app || !name) return NULL;
    return scene_named(app, (const uint8_t *)name, strlen(name));
}

API const char *lifecycle_scene_name(const lifecycle_scene *scene) { return scene ? scene->name : NULL; }

API const char *lifecycle_scene_display(const lifecycle_scene *scene) {
    if (!scene) return NULL;
    return scene->display ? scene->display : "";
}

API lifecycle_scene_state lifecycle_scene_get_state(const lifecycle_scene *scene) {
    return scene ? scene->state : LIFECYCLE_SCENE_UNATTACHED;
}

API int lifecycle_scene_restored(const lifecycle_scene *scene) { return scene ? scene->restored : 0; }

/* MARK: - Events and acknowledgements */

/* The current event is done (acknowledged). */
static void finish_current(lifecycle_app *app) {
    if (app->current == LIFECYCLE_EVENT_WILL_TERMINATE) app->terminated = 1;
    if (app->current == LIFECYCLE_EVENT_SCENE_DID_DISCONNECT && app->event_scene) forget_scene(app, app->event_scene);
    app->event_scene = NULL;
    app->discarded_count = 0;
    app->current = LIFECYCLE_EVENT_NONE;
    app->holding = 0;
    app->token = 0;
    app->deadline = -1;
    app->event_option_count = 0;
}

static void call_back(lifecycle_app *app, lifecycle_event e) {
    const lifecycle_callbacks *c = &app->callbacks;
    lifecycle_event_fn fn = NULL;
    lifecycle_scene_fn scene_fn = NULL;
    switch (e) {
    case LIFECYCLE_EVENT_WILL_FINISH_LAUNCHING: fn = c->will_finish_launching; break;
    case LIFECYCLE_EVENT_DID_FINISH_LAUNCHING: fn = c->did_finish_launching; break;
    case LIFECYCLE_EVENT_DID_BECOME_ACTIVE: fn = c->did_become_active; break;
    case LIFECYCLE_EVENT_WILL_RESIGN_ACTIVE: fn = c->will_resign_active; break;
    case LIFECYCLE_EVENT_DID_ENTER_BACKGROUND: fn = c->did_enter_background; break;
    case LIFECYCLE_EVENT_WILL_ENTER_FOREGROUND: fn = c->will_enter_foreground; break;
    case LIFECYCLE_EVENT_WILL_TERMINATE: fn = c->will_terminate; break;
    case LIFECYCLE_EVENT_DID_RECEIVE_MEMORY_WARNING: fn = c->did_receive_memory_warning; break;
    case LIFECYCLE_EVENT_WILL_BE_KILLED_FOR_MEMORY: fn = c->will_be_killed_for_memory; break;
    case LIFECYCLE_EVENT_PERFORM_FETCH: fn = c->perform_fetch; break;
    case LIFECYCLE_EVENT_DID_RECEIVE_REMOTE_NOTIFICATION: fn = c->did_receive_remote_notification; break;
    case LIFECYCLE_EVENT_OPEN_URL: fn = c->open_url; break;
    case LIFECYCLE_EVENT_SCENE_WILL_CONNECT: scene_fn = c->scene_will_connect; break;
    case LIFECYCLE_EVENT_SCENE_WILL_ENTER_FOREGROUND: scene_fn = c->scene_will_enter_foreground; break;
    case LIFECYCLE_EVENT_SCENE_DID_BECOME_ACTIVE: scene_fn = c->scene_did_become_active; break;
    case LIFECYCLE_EVENT_SCENE_WILL_RESIGN_ACTIVE: scene_fn = c->scene_will_resign_active; break;
    case LIFECYCLE_EVENT_SCENE_DID_ENTER_BACKGROUND: scene_fn = c->scene_did_enter_background; break;
    case LIFECYCLE_EVENT_SCENE_DID_DISCONNECT: scene_fn = c->scene_did_disconnect; break;
    case LIFECYCLE_EVENT_DID_DISCARD_SCENE_SESSIONS:
        if (c->did_discard_scene_sessions) {
            c->did_discard_scene_sessions(app, (const char *const *)app->discarded, app->discarded_count,
                                          app->userdata);
            return;
        }
        break;
    case LIFECYCLE_EVENT_NONE: break;
    }
    if (fn) fn(app, app->userdata);
    else if (scene_fn && app->event_scene) scene_fn(app, app->event_scene, app->userdata);
    else if (c->any_event) c->any_event(app, e, app->userdata);
}

/* Updates the state as the Swift client does, then runs the callback and
 * acknowledges unless it deferred. */
static int deliver(lifecycle_app *app, lifecycle_event e, uint32_t sequence, int64_t deadline) {
    switch (e) {
    case LIFECYCLE_EVENT_WILL_FINISH_LAUNCHING:
        app->state = app->launched_in_background == 1 ? LIFECYCLE_STATE_BACKGROUND : LIFECYCLE_STATE_INACTIVE;
        break;
    case LIFECYCLE_EVENT_DID_BECOME_ACTIVE: app->state = LIFECYCLE_STATE_ACTIVE; break;
    case LIFECYCLE_EVENT_WILL_RESIGN_ACTIVE: app->state = LIFECYCLE_STATE_INACTIVE; break;
    case LIFECYCLE_EVENT_DID_ENTER_BACKGROUND: app->state = LIFECYCLE_STATE_BACKGROUND; break;
    case LIFECYCLE_EVENT_WILL_ENTER_FOREGROUND:
        app->state = LIFECYCLE_STATE_INACTIVE;
        app->budget_end = -1;
        break;
    case LIFECYCLE_EVENT_NONE:
    case LIFECYCLE_EVENT_DID_FINISH_LAUNCHING:
    case LIFECYCLE_EVENT_WILL_TERMINATE:
    case LIFECYCLE_EVENT_DID_RECEIVE_MEMORY_WARNING:
    case LIFECYCLE_EVENT_WILL_BE_KILLED_FOR_MEMORY:
    case LIFECYCLE_EVENT_PERFORM_FETCH:
    case LIFECYCLE_EVENT_DID_RECEIVE_REMOTE_NOTIFICATION:
    case LIFECYCLE_EVENT_OPEN_URL:
    case LIFECYCLE_EVENT_SCENE_WILL_CONNECT:
    case LIFECYCLE_EVENT_SCENE_WILL_ENTER_FOREGROUND:
    case LIFECYCLE_EVENT_SCENE_DID_BECOME_ACTIVE:
    case LIFECYCLE_EVENT_SCENE_WILL_RESIGN_ACTIVE:
    case LIFECYCLE_EVENT_SCENE_DID_ENTER_BACKGROUND:
    case LIFECYCLE_EVENT_SCENE_DID_DISCONNECT:
    case LIFECYCLE_EVENT_DID_DISCARD_SCENE_SESSIONS: break; /* the app's own state does not move */
    }
    app->current = e;
    app->sequence = sequence;
    app->deadline = deadline;
    app->acknowledged = 0;
    app->token = 0;
    app->result = -1;
    app->in_callback = 1;
    call_back(app, e);
    app->in_callback = 0;
    if (broken(app)) return -1;
    if (app->acknowledged) { finish_current(app); return 0; } /* acknowledged early with its token */
    if (app->token) return 0;                                 /* deferred */
    if (app->supervised && send_acknowledge(app, sequence, app->result)) return -1;
    finish_current(app);
    return 0;
}

API lifecycle_token lifecycle_defer(lifecycle_app *app) {
    if (!app || !app->in_callback || app->current == LIFECYCLE_EVENT_NONE || app->acknowledged) {
        errno = EINVAL;
        return 0;
    }
    if (!app->token) {
        if (++app->generation == 0) app->generation = 1;
        app->token = (lifecycle_token)app->generation << 32 | app->sequence;
    }
    return app->token;
}

API int lifecycle_acknowledge(lifecycle_app *app, lifecycle_token token) {
    if (!app || !token || token != app->token || app->acknowledged || app->current == LIFECYCLE_EVENT_NONE) {
        errno = EINVAL;
        return -1;
    }
    int terminate = app->current == LIFECYCLE_EVENT_WILL_TERMINATE;
    if (app->supervised && send_acknowledge(app, app->sequence, app->result)) return -1;
    app->acknowledged = 1;
    if (!app->in_callback) finish_current(app); /* else when the callback returns */
    return terminate ? LIFECYCLE_TERMINATED : LIFECYCLE_OK;
}

static int is_wake(lifecycle_event e) {
    return e == LIFECYCLE_EVENT_PERFORM_FETCH || e == LIFECYCLE_EVENT_DID_RECEIVE_REMOTE_NOTIFICATION;
}

API int lifecycle_set_fetch_result(lifecycle_app *app, lifecycle_fetch_result result) {
    if (!app || !is_wake(app->current) || app->acknowledged || (int)result < (int)LIFECYCLE_FETCH_NEW_DATA ||
        (int)result > (int)LIFECYCLE_FETCH_FAILED) {
        errno = EINVAL;
        return -1;
    }
    app->result = (int)result;
    return 0;
}

/* MARK: - Restoration */

/* The restoration message, before willFinishLaunching. */
static int keep_restoration(lifecycle_app *app, const struct lifecycle__message *m) {
    /* Sent again by a restarted lifecycled: the same bytes keep the pointer
     * the app may hold. */
    if (app->restoration && app->restoration_size == m->data_size &&
        memcmp(app->restoration, m->data, m->data_size) == 0)
        return 0;
    uint8_t *copy = malloc((size_t)m->data_size + 1);
    if (!copy) return channel_error(app, ENOMEM, "out of memory for the restoration data");
    memcpy(copy, m->data, m->data_size);
    copy[m->data_size] = 0;
    free(app->restoration);
    app->restoration = copy;
    app->restoration_size = m->data_size;
    return 0;
}

API const void *lifecycle_restoration_data(const lifecycle_app *app, size_t *size) {
    if (size) *size = app && app->restoration ? app->restoration_size : 0;
    return app ? app->restoration : NULL;
}

API int lifecycle_save_restoration(lifecycle_app *app, const void *data, size_t size) {
    if (!app || (size && !data)) { errno = EINVAL; return -1; }
    if (size > LIFECYCLE_MAX_RESTORATION) {
        note(app, "restoration data of %zu bytes: more than %d", size, LIFECYCLE_MAX_RESTORATION);
        errno = EMSGSIZE;
        return -1;
    }
    if (!app->supervised) return 0;
    uint8_t head[LC_WIRE_HEADER + 4];
    lifecycle__encode_save_restoration(head, NULL, size);
    struct iovec iov[2] = {{head, sizeof head}, {(void *)data, size}};
    /* Unlike an acknowledgement, a save whose send found the break is
     * needed still: sent again on the resumed channel. */
    int r;
    while ((r = send_message(app, iov, size ? 2 : 1)) == 1) {}
    return r < 0 ? -1 : 0;
}

/* MARK: - Background tasks */

/* A copy of a message at the end of the queue, for lifecycle_dispatch():
 * 0; 1 when the queue is full (the caller says why it was filling); -1 out
 * of memory (a channel error). */
static int enqueue(lifecycle_app *app, const uint8_t *bytes, size_t size) {
    if (app->queue_count == LIFECYCLE_MAX_QUEUED) return 1;
    uint8_t *copy = malloc(size);
    if (!copy) return channel_error(app, ENOMEM, "out of memory for a queued message");
    memcpy(copy, bytes, size);
    app->queue[(app->queue_head + app->queue_count++) % LIFECYCLE_MAX_QUEUED] = (struct queued){copy, size};
    return 0;
}

static int find_task(const lifecycle_app *app, uint32_t id) {
    for (size_t i = 0; i < app->task_count; i++)
        if (app->tasks[i].id == id) return (int)i;
    return -1;
}

static void remove_task(lifecycle_app *app, int i) {
    app->tasks[i] = app->tasks[--app->task_count];
}

static int reserve_task(lifecycle_app *app) {
    if (app->task_count < app->task_capacity) return 0;
    size_t capacity = app->task_capacity ? 2 * app->task_capacity : 8;
    if (capacity > (size_t)INT_MAX) { errno = ENOMEM; return -1; }
    struct task *t = realloc(app->tasks, capacity * sizeof *t);
    if (!t) { errno = ENOMEM; return -1; }
    app->tasks = t;
    app->task_capacity = capacity;
    return 0;
}

static void add_task(lifecycle_app *app, uint32_t id, lifecycle_expiration_fn expiration, void *userdata) {
    int i = find_task(app, id);
    if (i < 0) i = (int)app->task_count++; /* reserved beforehand */
    app->tasks[i] = (struct task){id, expiration, userdata, 0};
}

/* A reply nobody waits for (its request timed out): end the task it
 * carries, so that it does not hold the app in the background. */
static int stale_reply(lifecycle_app *app, const struct lifecycle__message *m) {
    return m->task ? send_end_task(app, m->task) : 0;
}

/* The channel was resumed while a task request waited for its reply: the
 * reply is lost (and the daemon ends the task it may carry, which the
 * resume did not list). */
static uint32_t request_lost(lifecycle_app *app, uint32_t request) {
    note(app, "the channel to lifecycled was resumed before the reply to beginBackgroundTask %u", (unsigned)request);
    errno = ETIMEDOUT;
    return 0;
}

API uint32_t lifecycle_begin_background_task(lifecycle_app *app, const char *name,
                                             lifecycle_expiration_fn expiration, void *userdata) {
    if (!app) { errno = EINVAL; return 0; }
    if (name && !lifecycle__valid_utf8((const uint8_t *)name, strlen(name))) { errno = EINVAL; return 0; }
    if (reserve_task(app)) return 0;
    char fallback[32];
    uint32_t request = app->next_request++;
    if (app->next_request == 0) app->next_request = 1;
    if (!name) {
        snprintf(fallback, sizeof fallback, "task-%u", (unsigned)request);
        name = fallback;
    }
    size_t length = strlen(name);
    if (!app->supervised) { /* standalone: a task that never expires */
        add_task(app, request, expiration, userdata);
        return request;
    }
    if (broken(app)) return 0;

    uint8_t out[LC_WIRE_HEADER + 2 + LC_WIRE_MAX_TASK_NAME];
    uint32_t resumes = app->resumes;
    if (send_bytes(app, out, lifecycle__encode_begin_task(out, request, name, length)) < 0) return 0;

    /* The daemon answers at once; keep everything else, in order. */
    int64_t give_up = lifecycle_now() + (int64_t)LIFECYCLE_TASK_REPLY_TIMEOUT_MS * 1000000;
    for (;;) {
        if (app->resumes != resumes) return request_lost(app, request);
        int64_t left = give_up - lifecycle_now();
        if (left <= 0) {
            note(app, "no reply to beginBackgroundTask %u within %d ms", (unsigned)request,
                 LIFECYCLE_TASK_REPLY_TIMEOUT_MS);
            errno = ETIMEDOUT;
            return 0;
        }
        struct pollfd p = {app->fd, POLLIN, 0};
        int r = poll(&p, 1, (int)((left + 999999) / 1000000));
        if (r < 0) {
            if (errno == EINTR) continue;
            int err = errno;
            channel_error(app, err, "poll: %s", strerror(err));
            return 0;
        }
        if (r == 0) continue;
        ssize_t n = receive(app, app->wait_buffer, 0);
        if (n < 0) return 0;
        if (n == 0) continue;
        struct lifecycle__message m;
        if (decode(app, app->wait_buffer, (size_t)n, &m)) return 0;
        if (m.type == LC_T_TASK_REPLY && m.id == request) {
            if (m.budget_end >= 0) app->budget_end = m.budget_end;
            if (m.task == 0) {
                note(app, "the daemon refused background task %u", (unsigned)request);
                errno = EAGAIN;
                return 0;
            }
            add_task(app, m.task, expiration, userdata);
            return m.task;
        }
        if (m.type == LC_T_TASK_REPLY) {
            if (stale_reply(app, &m)) return 0;
            continue;
        }
        int queued = enqueue(app, app->wait_buffer, (size_t)n);
        if (queued > 0)
            channel_error(app, ENOBUFS, "more than %d messages arrived while waiting for a background task reply",
                          LIFECYCLE_MAX_QUEUED);
        if (queued) return 0;
    }
}

API int lifecycle_end_background_task(lifecycle_app *app, uint32_t task) {
    if (!app) { errno = EINVAL; return -1; }
    if (task == 0) return 0;
    int i = find_task(app, task);
    if (i >= 0) remove_task(app, i);
    if (!app->supervised) return 0;
    /* Sent even when its handler already ran: the daemon still has the task. */
    return send_end_task(app, task);
}

/* MARK: - Dispatching */

/* An event whose sequence number is not above the highest handled: after a
 * restart the daemon sends again the event it cannot know was acknowledged.
 * The callback never runs twice. The acknowledgement is sent again only
 * when the one sent was lost with the old channel: not when the daemon has
 * it, through the resume or on this channel (it may have sent the repeat
 * before reading an acknowledgement sent after the resume, and a second
 * one would be a protocol violation), and not while the callback still
 * runs or is deferred (its acknowledgement follows). */
static int repeated(lifecycle_app *app, uint32_t sequence) {
    if (app->acknowledged_any && sequence <= app->last_acknowledged) return 0;
    if (app->current != LIFECYCLE_EVENT_NONE && app->sequence == sequence) return 0;
    /* The lost acknowledgement was the last event's: with its result. */
    return send_acknowledge(app, sequence, sequence == app->sequence ? app->result : -1);
}

static int handle(lifecycle_app *app, const uint8_t *bytes, size_t size) {
    struct lifecycle__message m;
    if (decode(app, bytes, size, &m)) return -1;
    switch (m.type) {
    case LC_T_EVENT:
        if (app->received && m.id <= app->sequence) return repeated(app, m.id);
        /* Sent together with the deferred current one: its turn comes with
         * that acknowledgement. */
        if (app->current != LIFECYCLE_EVENT_NONE) return HELD;
        app->received = 1;
        if (m.budget_end >= 0) app->budget_end = m.budget_end;
        if (m.event == LIFECYCLE_EVENT_WILL_FINISH_LAUNCHING ||
            (m.event == LIFECYCLE_EVENT_DID_FINISH_LAUNCHING && app->launched_in_background < 0))
            if (store_options(app, &m)) return -1;
        if (set_event_options(app, &m)) return -1;
        if (scene_of_event(app, &m)) return -1;
        return deliver(app, (lifecycle_event)m.event, m.id, m.deadline);
    case LC_T_TASK_REPLY:
        return stale_reply(app, &m);
    case LC_T_TASKS_EXPIRING:
        /* The task stays open (it is listed in a resume) until the app ends
         * it; after a resume the daemon warns again of the tasks it warned. */
        for (uint16_t k = 0; k < m.task_count; k++) {
            uint32_t id = lifecycle__expiring_task(&m, k);
            int i = find_task(app, id);
            if (i < 0 || app->tasks[i].warned) continue; /* ended already, or warned already */
            app->tasks[i].warned = 1;
            struct task t = app->tasks[i];
            if (t.expiration) t.expiration(app, id, t.userdata);
            if (broken(app)) return -1;
        }
        return 0;
    case LC_T_RESTORATION:
        return keep_restoration(app, &m);
    default:
        return 0; /* resumed outside a resume: nothing to do (decode accepts no other type) */
    }
}

/* Keeps an event that must wait for the deferred one's acknowledgement, at
 * the end of the queue. */
static int keep(lifecycle_app *app, const uint8_t *bytes, size_t size) {
    int queued = enqueue(app, bytes, size);
    if (queued > 0)
        return channel_error(app, ENOBUFS, "more than %d messages arrived while an event was deferred",
                             LIFECYCLE_MAX_QUEUED);
    if (queued) return -1;
    app->holding = 1;
    return 0;
}

/* Handles the queue, then the socket; with `block`, waits for a first
 * message when there is nothing to handle. While the queue holds an event
 * behind a deferred one, what the socket brings is handled when it is not
 * an event (a reply, an expiration notice) and queued behind it when it is. */
static int process(lifecycle_app *app, int block) {
    int r = 0;
    app->dispatching = 1;
    while (!app->terminated) {
        if (app->queue_count && !app->holding) {
            struct queued q = app->queue[app->queue_head];
            r = handle(app, q.bytes, q.size);
            if (r == HELD) {
                app->holding = 1; /* it stays first */
                r = 0;
                continue;
            }
            app->queue_head = (app->queue_head + 1) % LIFECYCLE_MAX_QUEUED;
            app->queue_count--;
            free(q.bytes);
        } else {
            ssize_t n = receive(app, app->buffer, block);
            if (n == 0) break;
            r = n < 0 ? -1 : handle(app, app->buffer, (size_t)n);
            if (r == HELD) r = keep(app, app->buffer, (size_t)n);
        }
        if (r < 0) break;
        block = 0;
    }
    app->dispatching = 0;
    if (r < 0) {
        errno = app->error;
        return -1;
    }
    return app->terminated ? LIFECYCLE_TERMINATED : LIFECYCLE_OK;
}

static int can_dispatch(lifecycle_app *app) {
    if (!app) { errno = EINVAL; return 0; }
    if (app->dispatching) { errno = EBUSY; return 0; }
    return 1;
}

API int lifecycle_dispatch(lifecycle_app *app) {
    if (!can_dispatch(app)) return -1;
    if (!app->supervised) { errno = ENOTCONN; return -1; }
    if (app->terminated) return LIFECYCLE_TERMINATED;
    if (broken(app)) return -1;
    return process(app, 0);
}

/* As Application.runStandalone: simulated launch, SIGINT/SIGTERM, end. */
static int run_standalone(lifecycle_app *app) {
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    app->dispatching = 1;
    struct lifecycle__message m;
    uint8_t bytes[64];
    const char *options[] = {"launch.mode", "foreground"};
    size_t n = lifecycle__encode_event(bytes, 0, LIFECYCLE_EVENT_WILL_FINISH_LAUNCHING, 0, -1, -1, options, 1);
    char why[LC_WIRE_ERROR_MAX];
    if (lifecycle__decode_daemon(bytes, n, &m, why) != 0 || (!app->options && store_options(app, &m)) ||
        set_event_options(app, &m)) {
        app->dispatching = 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return -1;
    }
    static const lifecycle_event launch[] = {LIFECYCLE_EVENT_WILL_FINISH_LAUNCHING,
                                             LIFECYCLE_EVENT_DID_FINISH_LAUNCHING,
                                             LIFECYCLE_EVENT_DID_BECOME_ACTIVE};
    static const lifecycle_event end[] = {LIFECYCLE_EVENT_WILL_RESIGN_ACTIVE, LIFECYCLE_EVENT_DID_ENTER_BACKGROUND,
                                          LIFECYCLE_EVENT_WILL_TERMINATE};
    uint32_t sequence = 1;
    for (size_t i = 0; i < 3; i++) deliver(app, launch[i], sequence++, -1);
    while (sigwaitinfo(&set, NULL) < 0 && errno == EINTR) {}
    for (size_t i = 0; i < 3; i++) deliver(app, end[i], sequence++, -1);
    app->current = LIFECYCLE_EVENT_NONE; /* a deferred acknowledgement goes nowhere */
    app->token = 0;
    app->terminated = 1;
    app->dispatching = 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return LIFECYCLE_TERMINATED;
}

API int lifecycle_run(lifecycle_app *app) {
    if (!can_dispatch(app)) return -1;
    if (app->terminated) return LIFECYCLE_TERMINATED;
    if (!app->supervised) return run_standalone(app);
    if (broken(app)) return -1;
    for (;;) {
        int r = process(app, 1);
        if (r != LIFECYCLE_OK) return r;
    }
}

/* MARK: - Utilities */

API const char *lifecycle_event_name(lifecycle_event event) {
    switch (event) {
    case LIFECYCLE_EVENT_WILL_FINISH_LAUNCHING: return "willFinishLaunching";
    case LIFECYCLE_EVENT_DID_FINISH_LAUNCHING: return "didFinishLaunching";
    case LIFECYCLE_EVENT_DID_BECOME_ACTIVE: return "didBecomeActive";
    case LIFECYCLE_EVENT_WILL_RESIGN_ACTIVE: return "willResignActive";
    case LIFECYCLE_EVENT_DID_ENTER_BACKGROUND: return "didEnterBackground";
    case LIFECYCLE_EVENT_WILL_ENTER_FOREGROUND: return "willEnterForeground";
    case LIFECYCLE_EVENT_WILL_TERMINATE: return "willTerminate";
    case LIFECYCLE_EVENT_DID_RECEIVE_MEMORY_WARNING: return "didReceiveMemoryWarning";
    case LIFECYCLE_EVENT_WILL_BE_KILLED_FOR_MEMORY: return "willBeKilledForMemory";
    case LIFECYCLE_EVENT_PERFORM_FETCH: return "performFetch";
    case LIFECYCLE_EVENT_DID_RECEIVE_REMOTE_NOTIFICATION: return "didReceiveRemoteNotification";
    case LIFECYCLE_EVENT_OPEN_URL: return "openURL";
    case LIFECYCLE_EVENT_SCENE_WILL_CONNECT: return "sceneWillConnect";
    case LIFECYCLE_EVENT_SCENE_WILL_ENTER_FOREGROUND: return "sceneWillEnterForeground";
    case LIFECYCLE_EVENT_SCENE_DID_BECOME_ACTIVE: return "sceneDidBecomeActive";
    case LIFECYCLE_EVENT_SCENE_WILL_RESIGN_ACTIVE: return "sceneWillResignActive";
    case LIFECYCLE_EVENT_SCENE_DID_ENTER_BACKGROUND: return "sceneDidEnterBackground";
    case LIFECYCLE_EVENT_SCENE_DID_DISCONNECT: return "sceneDidDisconnect";
    case LIFECYCLE_EVENT_DID_DISCARD_SCENE_SESSIONS: return "didDiscardSceneSessions";
    case LIFECYCLE_EVENT_NONE: break;
    }
    return NULL;
}

API const char *lifecycle_strerror(int errnum) {
    switch (errnum) {
    case 0: return "no error";
    case ENOENT: return "not started by lifecycled ($" LIFECYCLE_FD_ENV " is not set)";
    case EBADF: return "$" LIFECYCLE_FD_ENV " does not name an open file descriptor";
    case ENOTSOCK: return "$" LIFECYCLE_FD_ENV " does not name a socket";
    case EPROTOTYPE: return "$" LIFECYCLE_FD_ENV " does not name a SOCK_SEQPACKET socket";
    case EPROTONOSUPPORT: return "lifecycled speaks a protocol version ($" LIFECYCLE_PROTOCOL_ENV ") this library does not (it speaks " PROTOCOL ")";
    case EINVAL: return "invalid argument (or no such acknowledgement token)";
    case EBUSY: return "not allowed from inside a lifecycle callback";
    case ENOTCONN: return "standalone: not connected to lifecycled";
    case EPROTO: return "protocol violation by lifecycled: the channel is closed";
    case ENOBUFS:
        return "too many messages queued while waiting for a background task reply or a deferred acknowledgement: the "
               "channel is closed";
    case ECONNRESET: return "lifecycled closed the channel";
    case EAGAIN: return "lifecycled refused the background task (no time left, too many tasks, or stopping)";
    case ETIMEDOUT: return "lifecycled did not answer the background task request";
    case ENOMEM: return "out of memory";
    case EMSGSIZE: return "message too long (restoration data is at most " STRINGIFY(LIFECYCLE_MAX_RESTORATION) " bytes)";
    default: return strerror(errnum);
    }
}

API const char *lifecycle_last_error(const lifecycle_app *app) { return app ? app->message : ""; }
