// libFuzzer target: the C client's wire decoders (clib/src/wire.c), which
// parse untrusted bytes inside every app that links liblifecycle. Built by
// scripts/fuzz.sh:
//   clang -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
//         -Iclib/include -Iclib/src Fuzz/wire_c.c clib/src/wire.c
// Properties, for any bytes:
//  - nothing crashes, reads outside the input or is undefined behaviour;
//  - a rejection has a non-empty, terminated error text that fits
//    LC_WIRE_ERROR_MAX; an acceptance leaves the text empty;
//  - no input decodes both as a daemon message and as an app message;
//  - the walkers over a decoded message (lifecycle__next_option,
//    lifecycle__expiring_task, over backgroundTasksExpiring and resume) end
//    exactly at the end of the input;
//  - whatever decodes re-encodes to exactly the same bytes (there is one
//    way to write each message), with the library's own encoders.
// Corpus: Fuzz/corpus/wire-c (the golden vectors, Fuzz/seed_wire_c.py).
#include "lifecycle.h"
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond, ...)                                     \
    do {                                                       \
        if (!(cond)) {                                         \
            fprintf(stderr, "wire_c: " __VA_ARGS__);           \
            fprintf(stderr, " (%s:%d: %s)\n", __FILE__, __LINE__, #cond); \
            abort();                                           \
        }                                                      \
    } while (0)

static void check_error_text(int rejected, const char *why) {
    size_t n = strnlen(why, LC_WIRE_ERROR_MAX);
    REQUIRE(n < LC_WIRE_ERROR_MAX, "error text not terminated within LC_WIRE_ERROR_MAX");
    if (rejected) REQUIRE(n > 0, "rejected without a reason");
    else REQUIRE(n == 0, "accepted, yet an error text: %s", why);
}

static void same_bytes(const char *what, const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
    REQUIRE(an == bn && memcmp(a, b, an) == 0, "%s re-encodes to other bytes (%zu, was %zu)", what, an, bn);
}

/* Options of an event, as the encoder takes them: terminated strings. */
static char *option_strings[2 * LC_WIRE_MAX_MESSAGE];
static char option_text[2 * LC_WIRE_MAX_MESSAGE];

static void daemon_round_trip(const struct lifecycle__message *m, const uint8_t *data, size_t size) {
    static uint8_t out[LC_WIRE_MAX_MESSAGE];
    switch (m->type) {
    case LC_T_EVENT: {
        const uint8_t *cursor = m->options;
        char *text = option_text;
        int has_nul = 0;
        for (unsigned i = 0; i < m->option_count; i++) {
            struct lifecycle__str k, v;
            lifecycle__next_option(&cursor, &k, &v);
            REQUIRE(k.bytes >= data && k.bytes + k.length <= data + size, "option key outside the message");
            REQUIRE(v.bytes >= data && v.bytes + v.length <= data + size, "option value outside the message");
            REQUIRE(lifecycle__valid_utf8(k.bytes, k.length) && lifecycle__valid_utf8(v.bytes, v.length),
                    "an accepted option is not UTF-8");
            has_nul |= memchr(k.bytes, 0, k.length) != NULL || memchr(v.bytes, 0, v.length) != NULL;
            option_strings[2 * i] = text;
            memcpy(text, k.bytes, k.length);
            text += k.length;
            *text++ = 0;
            option_strings[2 * i + 1] = text;
            memcpy(text, v.bytes, v.length);
            text += v.length;
            *text++ = 0;
        }
        REQUIRE(cursor == data + size, "the options end %td bytes from the end of the message",
                (data + size) - cursor);
        REQUIRE(m->event >= 1 && m->event <= LIFECYCLE_EVENT_DID_DISCARD_SCENE_SESSIONS && m->background <= 1,
                "event or launch mode out of range");
        REQUIRE(m->deadline >= -1 && m->budget_end >= -1, "a negative time other than -1 was accepted");
        /* U+0000 is valid UTF-8 and valid on the wire, but the test encoder
         * takes C strings: such an event cannot be written by it. */
        if (has_nul) return;
        size_t n = lifecycle__encode_event(out, m->id, m->event, m->background, m->deadline, m->budget_end,
                                           (const char *const *)option_strings, m->option_count);
        same_bytes("event", out, n, data, size);
        return;
    }
    case LC_T_TASK_REPLY:
        same_bytes("backgroundTaskReply", out, lifecycle__encode_task_reply(out, m->id, m->task, m->budget_end), data,
                   size);
        return;
    case LC_T_TASKS_EXPIRING: {
        static uint32_t tasks[LC_WIRE_MAX_MESSAGE / 4];
        REQUIRE(m->tasks + 4u * m->task_count == data + size, "the task ids do not end the message");
        for (uint16_t i = 0; i < m->task_count; i++) tasks[i] = lifecycle__expiring_task(m, i);
        same_bytes("backgroundTasksExpiring", out, lifecycle__encode_expiring(out, tasks, m->task_count), data, size);
        return;
    }
    case LC_T_RESUMED:
        REQUIRE(m->id == 0, "resumed accepted with id %u", (unsigned)m->id);
        same_bytes("resumed", out, lifecycle__encode_resumed(out), data, size);
        return;
    case LC_T_RESTORATION:
        REQUIRE(m->id == 0, "restoration accepted with id %u", (unsigned)m->id);
        REQUIRE(m->data_size <= LC_WIRE_MAX_RESTORATION, "restoration data of %u bytes accepted",
                (unsigned)m->data_size);
        same_bytes("restoration", out, lifecycle__encode_restoration(out, m->data, m->data_size), data, size);
        return;
    default:
        REQUIRE(0, "decode_daemon accepted type 0x%x", (unsigned)m->type);
    }
}

static void app_round_trip(const struct lifecycle__message *m, const uint8_t *data, size_t size) {
    static uint8_t out[LC_WIRE_MAX_MESSAGE];
    switch (m->type) {
    case LC_T_ACKNOWLEDGE:
        same_bytes("acknowledge", out, lifecycle__encode_acknowledge(out, m->id), data, size);
        return;
    case LC_T_END_TASK:
        same_bytes("endBackgroundTask", out, lifecycle__encode_end_task(out, m->id), data, size);
        return;
    case LC_T_BEGIN_TASK:
        REQUIRE(m->name.length <= LC_WIRE_MAX_TASK_NAME, "a task name over %d bytes was accepted", LC_WIRE_MAX_TASK_NAME);
        REQUIRE(m->name.bytes + m->name.length == data + size, "the task name does not end the message");
        same_bytes("beginBackgroundTask", out,
                   lifecycle__encode_begin_task(out, m->id, (const char *)m->name.bytes, m->name.length), data, size);
        return;
    case LC_T_RESUME: {
        static uint32_t tasks[LC_WIRE_MAX_RESUME_TASKS];
        REQUIRE(m->name.length <= LC_WIRE_MAX_APP_NAME, "an app name over %d bytes was accepted", LC_WIRE_MAX_APP_NAME);
        REQUIRE(m->task_count <= LC_WIRE_MAX_RESUME_TASKS, "a resume with %u tasks was accepted",
                (unsigned)m->task_count);
        REQUIRE(m->name.bytes >= data && m->tasks == m->name.bytes + m->name.length + 2,
                "the task count does not follow the app name");
        REQUIRE(m->tasks + 4u * m->task_count == data + size, "the task ids do not end the message");
        for (uint16_t i = 0; i < m->task_count; i++) tasks[i] = lifecycle__expiring_task(m, i);
        same_bytes("resume", out,
                   lifecycle__encode_resume(out, m->id, (const char *)m->name.bytes, m->name.length, tasks,
                                            m->task_count),
                   data, size);
        return;
    }
    case LC_T_COMPLETE:
        REQUIRE(m->result <= 2, "a fetch result %u was accepted", (unsigned)m->result);
        same_bytes("complete", out, lifecycle__encode_complete(out, m->id, m->result), data, size);
        return;
    case LC_T_SAVE_RESTORATION:
        REQUIRE(m->id == 0, "saveRestoration accepted with id %u", (unsigned)m->id);
        REQUIRE(m->data_size <= LC_WIRE_MAX_RESTORATION, "restoration data of %u bytes accepted",
                (unsigned)m->data_size);
        same_bytes("saveRestoration", out, lifecycle__encode_save_restoration(out, m->data, m->data_size), data, size);
        return;
    case LC_T_PREWARMED:
        REQUIRE(m->id == 0, "prewarmed accepted with id %u", (unsigned)m->id);
        same_bytes("prewarmed", out, lifecycle__encode_prewarmed(out), data, size);
        return;
    default:
        REQUIRE(0, "decode_app accepted type 0x%x", (unsigned)m->type);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct lifecycle__message d, a;
    char why_daemon[LC_WIRE_ERROR_MAX], why_app[LC_WIRE_ERROR_MAX];
    /* Poisoned with non-zero bytes, so that an unterminated text shows. */
    memset(why_daemon, 'x', sizeof why_daemon);
    memset(why_app, 'x', sizeof why_app);

    int daemon_rejected = lifecycle__decode_daemon(data, size, &d, why_daemon) != 0;
    check_error_text(daemon_rejected, why_daemon);
    int app_rejected = lifecycle__decode_app(data, size, &a, why_app) != 0;
    check_error_text(app_rejected, why_app);
    REQUIRE(daemon_rejected || app_rejected, "decodes both as a daemon and as an app message");

    if (!daemon_rejected) {
        REQUIRE(size >= LC_WIRE_HEADER && size <= LC_WIRE_MAX_MESSAGE, "accepted a message of %zu bytes", size);
        daemon_round_trip(&d, data, size);
    }
    if (!app_rejected) {
        REQUIRE(size >= LC_WIRE_HEADER && size <= LC_WIRE_MAX_MESSAGE, "accepted a message of %zu bytes", size);
        app_round_trip(&a, data, size);
    }
    return 0;
}
