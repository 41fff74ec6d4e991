/* The app channel's wire format in C: a line-by-line port of
 * Sources/LifecycleWire/Wire.swift (docs/protocol.md lists each byte).
 *
 * Private to liblifecycle: these symbols are hidden in liblifecycle.so and
 * carry the `lifecycle__` prefix (two underscores) so that they cannot clash
 * with an app's symbols when linking liblifecycle.a. The tests link them
 * directly.
 *
 * Decoding never allocates: a decoded message points into the bytes it was
 * decoded from. Error texts are exactly Wire.swift's, so that both
 * implementations can be checked against the same vectors.
 */
#ifndef LIFECYCLE_WIRE_H
#define LIFECYCLE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "lifecycle.h"

#if defined(__GNUC__)
#define LIFECYCLE_INTERNAL __attribute__((visibility("hidden")))
#else
#define LIFECYCLE_INTERNAL
#endif

enum {
    LC_WIRE_VERSION = LIFECYCLE_PROTOCOL_VERSION,
    LC_WIRE_MAX_MESSAGE = LIFECYCLE_MAX_MESSAGE,
    LC_WIRE_MAX_TASK_NAME = LIFECYCLE_MAX_TASK_NAME,
    LC_WIRE_MAX_RESTORATION = LIFECYCLE_MAX_RESTORATION, /* restoration data, either way */
    LC_WIRE_LAST_EVENT = LIFECYCLE_EVENT_DID_DISCARD_SCENE_SESSIONS, /* event codes are 1...this */
    LC_WIRE_MAX_APP_NAME = 256,    /* the app's name in resume: as a task name */
    LC_WIRE_MAX_RESUME_TASKS = 64, /* task ids in resume: the daemon's limit of open tasks */
    LC_WIRE_HEADER = 8,
    LC_WIRE_ERROR_MAX = 160, /* longest error text, terminator included */
};

enum lifecycle__type {
    LC_T_EVENT = 0x01,
    LC_T_TASK_REPLY = 0x02,
    LC_T_TASKS_EXPIRING = 0x03,
    LC_T_RESUMED = 0x04,
    LC_T_RESTORATION = 0x05,
    LC_T_ACKNOWLEDGE = 0x81,
    LC_T_BEGIN_TASK = 0x82,
    LC_T_END_TASK = 0x83,
    LC_T_RESUME = 0x84,
    LC_T_COMPLETE = 0x85,
    LC_T_SAVE_RESTORATION = 0x86,
    LC_T_PREWARMED = 0x87,
};

/* A string inside a message: not terminated. */
struct lifecycle__str {
    const uint8_t *bytes;
    uint16_t length;
};

/* A decoded daemon-to-app or app-to-daemon message. Which fields are set
 * depends on `type`. Times are -1 for "none". */
struct lifecycle__message {
    uint8_t type;
    uint32_t id; /* sequence (LC_T_EVENT, LC_T_ACKNOWLEDGE, LC_T_COMPLETE), request id, task id, last
                    acknowledged sequence (LC_T_RESUME), or 0 */
    /* LC_T_EVENT */
    uint8_t event;         /* 1...LC_WIRE_LAST_EVENT */
    uint8_t background;    /* launch mode: 0 or 1 */
    uint16_t option_count;
    int64_t deadline;
    int64_t budget_end;    /* also LC_T_TASK_REPLY */
    const uint8_t *options; /* option_count validated (key, value) pairs */
    /* LC_T_TASK_REPLY */
    uint32_t task;         /* 0 = invalid */
    /* LC_T_TASKS_EXPIRING, LC_T_RESUME */
    uint16_t task_count;
    const uint8_t *tasks;  /* task_count u32 LE */
    /* LC_T_BEGIN_TASK: the task's name; LC_T_RESUME: the app's name */
    struct lifecycle__str name;
    /* LC_T_COMPLETE: the fetch result, 0...2 (lifecycle_fetch_result) */
    uint8_t result;
    /* LC_T_RESTORATION, LC_T_SAVE_RESTORATION: the data (not terminated) */
    const uint8_t *data;
    uint32_t data_size;    /* at most LC_WIRE_MAX_RESTORATION */
};

/* Decodes a daemon-to-app message. Returns 0, or -1 with the reason in
 * `error` (LC_WIRE_ERROR_MAX bytes). */
LIFECYCLE_INTERNAL int lifecycle__decode_daemon(const uint8_t *bytes, size_t size, struct lifecycle__message *out,
                                                char *error);
/* Decodes an app-to-daemon message (the daemon's side; for tests). */
LIFECYCLE_INTERNAL int lifecycle__decode_app(const uint8_t *bytes, size_t size, struct lifecycle__message *out,
                                             char *error);

/* Walks the options of a decoded event: `*cursor` starts at m->options. */
LIFECYCLE_INTERNAL void lifecycle__next_option(const uint8_t **cursor, struct lifecycle__str *key,
                                               struct lifecycle__str *value);
/* The i-th task id of a decoded backgroundTasksExpiring or resume. */
LIFECYCLE_INTERNAL uint32_t lifecycle__expiring_task(const struct lifecycle__message *m, uint16_t i);

/* Encoders write into `out` (at least LC_WIRE_MAX_MESSAGE bytes) and return
 * the message's length. */
LIFECYCLE_INTERNAL size_t lifecycle__encode_acknowledge(uint8_t *out, uint32_t sequence);
/* `name` is cut to LC_WIRE_MAX_TASK_NAME bytes on a character boundary; it
 * must be valid UTF-8. */
LIFECYCLE_INTERNAL size_t lifecycle__encode_begin_task(uint8_t *out, uint32_t request, const char *name, size_t length);
LIFECYCLE_INTERNAL size_t lifecycle__encode_end_task(uint8_t *out, uint32_t task);
LIFECYCLE_INTERNAL size_t lifecycle__encode_prewarmed(uint8_t *out);
/* resume: `last_acknowledged` is the sequence number of the last event the
 * app acknowledged (0 if none); `name` (valid UTF-8) is cut as a task name
 * is; `tasks` are the ids the app holds open. Returns 0 when `count` exceeds
 * LC_WIRE_MAX_RESUME_TASKS. */
LIFECYCLE_INTERNAL size_t lifecycle__encode_resume(uint8_t *out, uint32_t last_acknowledged, const char *name,
                                                   size_t length, const uint32_t *tasks, uint16_t count);
/* complete: the answer to a wake event (performFetch,
 * didReceiveRemoteNotification) with its result (0...2). */
LIFECYCLE_INTERNAL size_t lifecycle__encode_complete(uint8_t *out, uint32_t sequence, uint8_t result);
/* saveRestoration: `size` bytes of `data` (size 0: forget what was kept).
 * Returns 0 when `size` exceeds LC_WIRE_MAX_RESTORATION. With `data` NULL
 * only the first 12 bytes (header and length) are written, so that the data
 * can be sent from where it is; the length returned is still the whole
 * message's. */
LIFECYCLE_INTERNAL size_t lifecycle__encode_save_restoration(uint8_t *out, const uint8_t *data, size_t size);

/* Daemon-side encoders (for the tests' fake daemon). Returns 0 when the
 * message would not fit. `options` holds 2*option_count strings, key then
 * value. */
LIFECYCLE_INTERNAL size_t lifecycle__encode_event(uint8_t *out, uint32_t sequence, uint8_t event, int background,
                                                  int64_t deadline, int64_t budget_end, const char *const *options,
                                                  uint16_t option_count);
LIFECYCLE_INTERNAL size_t lifecycle__encode_task_reply(uint8_t *out, uint32_t request, uint32_t task,
                                                       int64_t budget_end);
LIFECYCLE_INTERNAL size_t lifecycle__encode_expiring(uint8_t *out, const uint32_t *tasks, uint16_t count);
LIFECYCLE_INTERNAL size_t lifecycle__encode_resumed(uint8_t *out);
/* restoration: as saveRestoration, from the daemon (id 0). */
LIFECYCLE_INTERNAL size_t lifecycle__encode_restoration(uint8_t *out, const uint8_t *data, size_t size);

/* 1 when bytes[0..<length] is valid UTF-8 (as Swift's String(validating:)). */
LIFECYCLE_INTERNAL int lifecycle__valid_utf8(const uint8_t *bytes, size_t length);

#endif
