// Tests of liblifecycle (the C client) against real SOCK_SEQPACKET socket
// pairs: the test drives the daemon's end itself, in-process, or from a
// forked fake daemon where the order of messages on the wire matters.
//   make test-clib   (builds with -Wall -Wextra -Werror -pedantic, runs
//                     .build/clib/test_lifecycle Tests/golden/vectors.txt)
// Prints one line per check and ends with "N passed, M failed".
#define _GNU_SOURCE
#include "internal.h"
#include "lifecycle.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static int passed, failed;

#define CHECK(name, cond)                                                                         \
    do {                                                                                          \
        if (cond) { passed++; printf("ok      %s\n", name); }                                     \
        else { failed++; printf("FAILED  %s (%s:%d, errno %s)\n", name, __FILE__, __LINE__, strerror(errno)); } \
    } while (0)

/* MARK: - The vectors file */

struct vector {
    char name[64];
    uint8_t bytes[512];
    size_t size;
    char error[LC_WIRE_ERROR_MAX];
};

static struct vector vectors[128];
static size_t vector_count;

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static int load(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!line[0] || line[0] == '#') continue;
        if (vector_count == sizeof vectors / sizeof vectors[0]) break;
        struct vector *v = &vectors[vector_count];
        char *hex = strchr(line, ' ');
        if (!hex) { fclose(f); return -1; }
        *hex++ = 0;
        char *error = strchr(hex, ' ');
        if (error) {
            *error++ = 0;
            snprintf(v->error, sizeof v->error, "%.159s", error);
        }
        snprintf(v->name, sizeof v->name, "%.63s", line);
        if (strcmp(hex, "-") != 0) {
            size_t n = strlen(hex);
            if (n % 2 || n / 2 > sizeof v->bytes) { fclose(f); return -1; }
            for (size_t i = 0; i < n / 2; i++) {
                int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
                if (hi < 0 || lo < 0) { fclose(f); return -1; }
                v->bytes[i] = (uint8_t)(hi << 4 | lo);
            }
            v->size = n / 2;
        }
        vector_count++;
    }
    fclose(f);
    return 0;
}

static const struct vector *vec(const char *name) {
    for (size_t i = 0; i < vector_count; i++)
        if (strcmp(vectors[i].name, name) == 0) return &vectors[i];
    printf("FAILED  vector %s is missing from the vectors file\n", name);
    failed++;
    static struct vector empty;
    return &empty;
}

static int same(const uint8_t *a, size_t an, const uint8_t *b, size_t bn) { return an == bn && memcmp(a, b, an) == 0; }

static int str_is(struct lifecycle__str s, const char *text) {
    return s.length == strlen(text) && memcmp(s.bytes, text, s.length) == 0;
}

/* MARK: - Wire tests */

static void test_golden(void) {
    uint8_t out[LC_WIRE_MAX_MESSAGE];
    char why[LC_WIRE_ERROR_MAX];
    struct lifecycle__message m;
    const struct vector *v;

    v = vec("daemon.event");
    const char *kv[] = {"k", "v1"};
    CHECK("golden event encodes byte for byte",
          same(out, lifecycle__encode_event(out, 7, 5, 0, 1000000000, 3000000000, kv, 1), v->bytes, v->size));
    int ok = lifecycle__decode_daemon(v->bytes, v->size, &m, why) == 0;
    struct lifecycle__str k = {0}, val = {0};
    const uint8_t *cursor = m.options;
    if (ok && m.option_count == 1) lifecycle__next_option(&cursor, &k, &val);
    CHECK("golden event decodes: seq 7, didEnterBackground, fg, deadline 1 s, budget end 3 s, k=v1",
          ok && m.type == LC_T_EVENT && m.id == 7 && m.event == 5 && m.background == 0 && m.deadline == 1000000000 &&
              m.budget_end == 3000000000 && m.option_count == 1 && str_is(k, "k") && str_is(val, "v1"));

    v = vec("daemon.event-without-deadline");
    CHECK("golden event without deadline encodes byte for byte",
          same(out, lifecycle__encode_event(out, 1, 3, 1, -1, -1, NULL, 0), v->bytes, v->size));
    ok = lifecycle__decode_daemon(v->bytes, v->size, &m, why) == 0;
    CHECK("golden event without deadline decodes: seq 1, didBecomeActive, bg, no deadline, no budget end",
          ok && m.id == 1 && m.event == 3 && m.background == 1 && m.deadline == -1 && m.budget_end == -1 &&
              m.option_count == 0);

    v = vec("daemon.memory-warning");
    CHECK("golden didReceiveMemoryWarning encodes byte for byte",
          same(out, lifecycle__encode_event(out, 12, 8, 0, 1000000000, -1, NULL, 0), v->bytes, v->size));
    ok = lifecycle__decode_daemon(v->bytes, v->size, &m, why) == 0;
    CHECK("golden didReceiveMemoryWarning decodes",
          ok && m.id == 12 && m.event == 8 && m.deadline == 1000000000 && m.budget_end == -1);

    v = vec("daemon.memory-notice");
    CHECK("golden willBeKilledForMemory encodes byte for byte",
          same(out, lifecycle__encode_event(out, 13, 9, 0, 250000000, -1, NULL, 0), v->bytes, v->size));
    ok = lifecycle__decode_daemon(v->bytes, v->size, &m, why) == 0;
    CHECK("golden willBeKilledForMemory decodes",
          ok && m.id == 13 && m.event == 9 && m.deadline == 250000000 && m.budget_end == -1);

    v = vec("daemon.task-reply");
    CHECK("golden task reply encodes byte for byte",
          same(out, lifecycle__encode_task_reply(out, 42, 3, -1), v->bytes, v->size));
    ok = lifecycle__decode_daemon(v->bytes, v->size, &m, why) == 0;
    CHECK("golden task reply decodes: request 42, task 3, no budget end",
          ok && m.type == LC_T_TASK_REPLY && m.id == 42 && m.task == 3 && m.budget_end == -1);

    v = vec("daemon.task-reply-invalid");
    CHECK("golden invalid task reply encodes byte for byte",
          same(out, lifecycle__encode_task_reply(out, 42, 0, -1), v->bytes, v->size));
    ok = lifecycle__decode_daemon(v->bytes, v->size, &m, why) == 0;
    CHECK("golden invalid task reply decodes: task 0", ok && m.type == LC_T_TASK_REPLY && m.id == 42 && m.task == 0);

    v = vec("daemon.expiring");
    uint32_t tasks[] = {1, 2};
    CHECK("golden expiring encodes byte for byte", same(out, lifecycle__encode_expiring(out, tasks, 2), v->bytes, v->size));
    ok = lifecycle__decode_daemon(v->bytes, v->size, &m, why) == 0;
    CHECK("golden expiring decodes: tasks [1, 2]",
          ok && m.type == LC_T_TASKS_EXPIRING && m.id == 0 && m.task_count == 2 && lifecycle__expiring_task(&m, 0) == 1 &&
              lifecycle__expiring_task(&m, 1) == 2);

    v = vec("daemon.resumed");
    CHECK("golden resumed encodes byte for byte", same(out, lifecycle__encode_resumed(out), v->bytes, v->size));
    ok = lifecycle__decode_daemon(v->bytes, v->size, &m, why) == 0;
    CHECK("golden resumed decodes: id 0, no payload", ok && m.type == LC_T_RESUMED && m.id == 0);

    v = vec("app.acknowledge");
    CHECK("golden acknowledge encodes byte for byte", same(out, lifecycle__encode_acknowledge(out, 7), v->bytes, v->size));
    ok = lifecycle__decode_app(v->bytes, v->size, &m, why) == 0;
    CHECK("golden acknowledge decodes: sequence 7", ok && m.type == LC_T_ACKNOWLEDGE && m.id == 7);

    v = vec("app.begin-task");
    CHECK("golden beginBackgroundTask encodes byte for byte",
          same(out, lifecycle__encode_begin_task(out, 9, "save", 4), v->bytes, v->size));
    ok = lifecycle__decode_app(v->bytes, v->size, &m, why) == 0;
    CHECK("golden beginBackgroundTask decodes: request 9, \"save\"",
          ok && m.type == LC_T_BEGIN_TASK && m.id == 9 && str_is(m.name, "save"));

    v = vec("app.end-task");
    CHECK("golden endBackgroundTask encodes byte for byte", same(out, lifecycle__encode_end_task(out, 3), v->bytes, v->size));
    ok = lifecycle__decode_app(v->bytes, v->size, &m, why) == 0;
    CHECK("golden endBackgroundTask decodes: task 3", ok && m.type == LC_T_END_TASK && m.id == 3);

    v = vec("app.resume");
    uint32_t open_tasks[] = {1, 3};
    CHECK("golden resume encodes byte for byte",
          same(out, lifecycle__encode_resume(out, 7, "recorder", 8, open_tasks, 2), v->bytes, v->size));
    ok = lifecycle__decode_app(v->bytes, v->size, &m, why) == 0;
    CHECK("golden resume decodes: last acknowledged 7, \"recorder\", tasks [1, 3]",
          ok && m.type == LC_T_RESUME && m.id == 7 && str_is(m.name, "recorder") && m.task_count == 2 &&
              lifecycle__expiring_task(&m, 0) == 1 && lifecycle__expiring_task(&m, 1) == 3);

    v = vec("app.resume-no-tasks");
    CHECK("golden resume without tasks encodes byte for byte",
          same(out, lifecycle__encode_resume(out, 0, "recorder", 8, NULL, 0), v->bytes, v->size));
    ok = lifecycle__decode_app(v->bytes, v->size, &m, why) == 0;
    CHECK("golden resume without tasks decodes: last acknowledged 0, \"recorder\", no tasks",
          ok && m.type == LC_T_RESUME && m.id == 0 && str_is(m.name, "recorder") && m.task_count == 0);

    v = vec("daemon.restoration");
    const uint8_t four[] = {0x00, 0x01, 0xfe, 0xff};
    CHECK("golden restoration encodes byte for byte",
          same(out, lifecycle__encode_restoration(out, four, 4), v->bytes, v->size));
    ok = lifecycle__decode_daemon(v->bytes, v->size, &m, why) == 0;
    CHECK("golden restoration decodes: id 0, data 00 01 fe ff",
          ok && m.type == LC_T_RESTORATION && m.id == 0 && same(m.data, m.data_size, four, 4));

    v = vec("daemon.perform-fetch");
    CHECK("golden performFetch encodes byte for byte",
          same(out, lifecycle__encode_event(out, 20, 10, 1, 30000000000, -1, NULL, 0), v->bytes, v->size));
    ok = lifecycle__decode_daemon(v->bytes, v->size, &m, why) == 0;
    CHECK("golden performFetch decodes: seq 20, event 10, bg, deadline 30 s, no budget end, no options",
          ok && m.type == LC_T_EVENT && m.id == 20 && m.event == LIFECYCLE_EVENT_PERFORM_FETCH && m.background == 1 &&
              m.deadline == 30000000000 && m.budget_end == -1 && m.option_count == 0);

    v = vec("daemon.remote-notification");
    const char *push[] = {"push.payload", "{\"aps\":{\"alert\":\"hi\"}}"};
    CHECK("golden didReceiveRemoteNotification encodes byte for byte",
          same(out, lifecycle__encode_event(out, 21, 11, 1, 30000000000, -1, push, 1), v->bytes, v->size));
    ok = lifecycle__decode_daemon(v->bytes, v->size, &m, why) == 0;
    cursor = m.options;
    if (ok && m.option_count == 1) lifecycle__next_option(&cursor, &k, &val);
    CHECK("golden didReceiveRemoteNotification decodes: seq 21, event 11, bg, push.payload",
          ok && m.id == 21 && m.event == LIFECYCLE_EVENT_DID_RECEIVE_REMOTE_NOTIFICATION && m.background == 1 &&
              m.deadline == 30000000000 && m.option_count == 1 && str_is(k, "push.payload") &&
              str_is(val, "{\"aps\":{\"alert\":\"hi\"}}"));

    v = vec("daemon.open-url");
    const char *url[] = {"url", "myapp://item/42"};
    CHECK("golden openURL encodes byte for byte",
          same(out, lifecycle__encode_event(out, 22, 12, 0, 5000000000, -1, url, 1), v->bytes, v->size));
    ok = lifecycle__decode_daemon(v->bytes, v->size, &m, why) == 0;
    cursor = m.options;
    if (ok && m.option_count == 1) lifecycle__next_option(&cursor, &k, &val);
    CHECK("golden openURL decodes: seq 22, event 12, fg, deadline 5 s, url",
          ok && m.id == 22 && m.event == LIFECYCLE_EVENT_OPEN_URL && m.background == 0 && m.deadline == 5000000000 &&
              m.option_count == 1 && str_is(k, "url") && str_is(val, "myapp://item/42"));

    v = vec("daemon.launch-for-url");
    const char *launch[] = {"launch.mode", "foreground", "launch.reason", "url", "launch.url", "myapp://item/42",
                            "restoration.size", "4"};
    CHECK("golden launch for a URL encodes byte for byte",
          same(out, lifecycle__encode_event(out, 1, 1, 0, 5000000000, -1, launch, 4), v->bytes, v->size));
    ok = lifecycle__decode_daemon(v->bytes, v->size, &m, why) == 0;
    int options_ok = ok && m.option_count == 4;
    cursor = m.options;
    for (unsigned i = 0; options_ok && i < 4; i++) {
        lifecycle__next_option(&cursor, &k, &val);
        options_ok = str_is(k, launch[2 * i]) && str_is(val, launch[2 * i + 1]);
    }
    CHECK("golden launch for a URL decodes: willFinishLaunching, its four launch options in order",
          options_ok && m.id == 1 && m.event == LIFECYCLE_EVENT_WILL_FINISH_LAUNCHING);

    v = vec("daemon.scene-will-connect");
    const char *connect[] = {"scene", "nav", "display", "centre", "session", "new"};
    CHECK("golden sceneWillConnect encodes byte for byte",
          same(out, lifecycle__encode_event(out, 30, LIFECYCLE_EVENT_SCENE_WILL_CONNECT, 0, 5000000000, -1, connect, 3),
               v->bytes, v->size));
    ok = lifecycle__decode_daemon(v->bytes, v->size, &m, why) == 0;
    options_ok = ok && m.option_count == 3;
    cursor = m.options;
    for (unsigned i = 0; options_ok && i < 3; i++) {
        lifecycle__next_option(&cursor, &k, &val);
        options_ok = str_is(k, connect[2 * i]) && str_is(val, connect[2 * i + 1]);
    }
    CHECK("golden sceneWillConnect decodes: seq 30, event 13, fg, deadline 5 s, no budget end, scene/display/session",
          options_ok && m.type == LC_T_EVENT && m.id == 30 && m.event == LIFECYCLE_EVENT_SCENE_WILL_CONNECT &&
              m.background == 0 && m.deadline == 5000000000 && m.budget_end == -1);

    v = vec("daemon.discard-scenes");
    const char *discard[] = {"scenes", "nav,media"};
    CHECK("golden didDiscardSceneSessions encodes byte for byte",
          same(out, lifecycle__encode_event(out, 31, LIFECYCLE_EVENT_DID_DISCARD_SCENE_SESSIONS, 0, 5000000000, -1,
                                            discard, 1),
               v->bytes, v->size));
    ok = lifecycle__decode_daemon(v->bytes, v->size, &m, why) == 0;
    cursor = m.options;
    if (ok && m.option_count == 1) lifecycle__next_option(&cursor, &k, &val);
    CHECK("golden didDiscardSceneSessions decodes: seq 31, event 19, fg, deadline 5 s, scenes nav,media",
          ok && m.id == 31 && m.event == LIFECYCLE_EVENT_DID_DISCARD_SCENE_SESSIONS && m.background == 0 &&
              m.deadline == 5000000000 && m.budget_end == -1 && m.option_count == 1 && str_is(k, "scenes") &&
              str_is(val, "nav,media"));

    struct { const char *name; uint32_t sequence; uint8_t result; } completes[] = {
        {"app.complete-new-data", 20, LIFECYCLE_FETCH_NEW_DATA},
        {"app.complete-no-data", 21, LIFECYCLE_FETCH_NO_DATA},
        {"app.complete-failed", 21, LIFECYCLE_FETCH_FAILED},
    };
    for (size_t i = 0; i < sizeof completes / sizeof completes[0]; i++) {
        char name[160];
        v = vec(completes[i].name);
        snprintf(name, sizeof name, "golden %s encodes byte for byte", completes[i].name);
        CHECK(name, same(out, lifecycle__encode_complete(out, completes[i].sequence, completes[i].result), v->bytes, v->size));
        ok = lifecycle__decode_app(v->bytes, v->size, &m, why) == 0;
        snprintf(name, sizeof name, "golden %s decodes: sequence %u, result %u", completes[i].name,
                 (unsigned)completes[i].sequence, (unsigned)completes[i].result);
        CHECK(name, ok && m.type == LC_T_COMPLETE && m.id == completes[i].sequence && m.result == completes[i].result);
    }

    v = vec("app.save-restoration");
    CHECK("golden saveRestoration encodes byte for byte",
          same(out, lifecycle__encode_save_restoration(out, four, 4), v->bytes, v->size));
    ok = lifecycle__decode_app(v->bytes, v->size, &m, why) == 0;
    CHECK("golden saveRestoration decodes: id 0, data 00 01 fe ff",
          ok && m.type == LC_T_SAVE_RESTORATION && m.id == 0 && same(m.data, m.data_size, four, 4));
    uint8_t head[LC_WIRE_HEADER + 4];
    CHECK("the saveRestoration encoder without data writes the header and length, and counts the data",
          lifecycle__encode_save_restoration(head, NULL, 4) == v->size && memcmp(head, v->bytes, sizeof head) == 0);

    v = vec("app.save-restoration-empty");
    CHECK("golden empty saveRestoration encodes byte for byte",
          same(out, lifecycle__encode_save_restoration(out, NULL, 0), v->bytes, v->size));
    ok = lifecycle__decode_app(v->bytes, v->size, &m, why) == 0;
    CHECK("golden empty saveRestoration decodes: no data",
          ok && m.type == LC_T_SAVE_RESTORATION && m.id == 0 && m.data_size == 0);

    v = vec("app.prewarmed");
    CHECK("golden prewarmed encodes byte for byte", same(out, lifecycle__encode_prewarmed(out), v->bytes, v->size));
    ok = lifecycle__decode_app(v->bytes, v->size, &m, why) == 0;
    CHECK("golden prewarmed decodes: id 0", ok && m.type == LC_T_PREWARMED && m.id == 0);

    /* Cross-checks: daemon messages are not app messages and vice versa. */
    int crossed = 1;
    for (size_t i = 0; i < vector_count; i++) {
        const struct vector *x = &vectors[i];
        if (strncmp(x->name, "daemon.", 7) == 0 && lifecycle__decode_app(x->bytes, x->size, &m, why) == 0) crossed = 0;
        if (strncmp(x->name, "app.", 4) == 0 && lifecycle__decode_daemon(x->bytes, x->size, &m, why) == 0) crossed = 0;
    }
    CHECK("no golden vector decodes as a message of the other direction", crossed);
}

static void test_rejects(void) {
    char why[LC_WIRE_ERROR_MAX], name[256];
    struct lifecycle__message m;
    size_t rejects = 0;
    for (size_t i = 0; i < vector_count; i++) {
        const struct vector *v = &vectors[i];
        int app = strncmp(v->name, "reject.app.", 11) == 0, daemon = strncmp(v->name, "reject.daemon.", 14) == 0;
        if (!app && !daemon) continue;
        rejects++;
        int r = app ? lifecycle__decode_app(v->bytes, v->size, &m, why) : lifecycle__decode_daemon(v->bytes, v->size, &m, why);
        snprintf(name, sizeof name, "%.63s is rejected with \"%.159s\"", v->name, v->error);
        CHECK(name, r == -1 && strcmp(why, v->error) == 0);
        if (r != -1 || strcmp(why, v->error) != 0) printf("        got: %s\n", r == 0 ? "(accepted)" : why);
    }
    CHECK("the vectors file has reject vectors", rejects >= 9);

    /* Every truncation, a trailing byte, bad version, type and flags, for
     * every golden daemon-to-app message. */
    for (size_t i = 0; i < vector_count; i++) {
        const struct vector *v = &vectors[i];
        if (strncmp(v->name, "daemon.", 7) != 0) continue;
        uint8_t b[600];
        int all = 1;
        for (size_t n = 0; n < v->size; n++)
            if (lifecycle__decode_daemon(v->bytes, n, &m, why) == 0 || strncmp(why, "truncated: ", 11) != 0) all = 0;
        snprintf(name, sizeof name, "every truncation of %.63s is rejected as truncated (%zu)", v->name, v->size);
        CHECK(name, all);
        memcpy(b, v->bytes, v->size);
        b[v->size] = 0;
        snprintf(name, sizeof name, "%.63s with a trailing byte is rejected", v->name);
        CHECK(name, lifecycle__decode_daemon(b, v->size + 1, &m, why) == -1 && strcmp(why, "1 unexpected trailing bytes") == 0);
        int versions = 1;
        for (int ver = 0; ver < 256; ver++) {
            if (ver == 1) continue;
            b[0] = (uint8_t)ver;
            if (lifecycle__decode_daemon(b, v->size, &m, why) == 0 || !strstr(why, "unsupported protocol version")) versions = 0;
        }
        b[0] = 1;
        snprintf(name, sizeof name, "%.63s with any other version is rejected", v->name);
        CHECK(name, versions);
        int types = 1;
        for (int t = 0; t < 256; t++) {
            if (t >= LC_T_EVENT && t <= LC_T_RESTORATION) continue;
            b[1] = (uint8_t)t;
            if (lifecycle__decode_daemon(b, v->size, &m, why) == 0) types = 0;
        }
        b[1] = v->bytes[1];
        snprintf(name, sizeof name, "%.63s with any other type is rejected", v->name);
        CHECK(name, types);
        int flags = 1;
        for (int bit = 0; bit < 16; bit++) {
            b[2] = (uint8_t)(1u << bit);
            b[3] = (uint8_t)((1u << bit) >> 8);
            if (lifecycle__decode_daemon(b, v->size, &m, why) == 0 || strncmp(why, "unknown flags 0x", 16) != 0) flags = 0;
        }
        snprintf(name, sizeof name, "%.63s with any flag set is rejected", v->name);
        CHECK(name, flags);
    }

    CHECK("LIFECYCLE_MAX_MESSAGE is 66560 (65536 bytes of restoration data and 1024 more)",
          LIFECYCLE_MAX_MESSAGE == 66560 && LIFECYCLE_MAX_RESTORATION == 65536);
    static uint8_t big[LC_WIRE_MAX_MESSAGE + 1];
    memset(big, 1, sizeof big);
    CHECK("a 66561-byte message is rejected: \"message of 66561 bytes exceeds 66560\"",
          lifecycle__decode_app(big, sizeof big, &m, why) == -1 && strcmp(why, "message of 66561 bytes exceeds 66560") == 0);
    CHECK("the daemon-side decoder rejects it too",
          lifecycle__decode_daemon(big, sizeof big, &m, why) == -1 && strcmp(why, "message of 66561 bytes exceeds 66560") == 0);

    /* A message of exactly 66560 bytes is fine: an event with two options
     * (one string holds at most 65535 bytes). */
    static char value[LC_WIRE_MAX_MESSAGE], second[LC_WIRE_MAX_MESSAGE];
    size_t vlen = 0xFFFF, slen = LC_WIRE_MAX_MESSAGE - 28 - (2 + 1 + 2 + vlen) - (2 + 1 + 2);
    memset(value, 'x', vlen);
    value[vlen] = 0;
    memset(second, 'y', slen);
    second[slen] = 0;
    const char *kv[] = {"k", value, "l", second};
    static uint8_t out[LC_WIRE_MAX_MESSAGE];
    size_t n = lifecycle__encode_event(out, 1, 1, 0, -1, -1, kv, 2);
    CHECK("an event of exactly 66560 bytes decodes", n == 66560 && lifecycle__decode_daemon(out, n, &m, why) == 0);
    const char *too_long[] = {"k", value, "lm", second};
    CHECK("the event encoder writes no event over 66560 bytes", lifecycle__encode_event(out, 1, 1, 0, -1, -1, too_long, 2) == 0);

    /* Restoration data: 65536 bytes fit, either way; the encoders refuse more. */
    static uint8_t data[LC_WIRE_MAX_RESTORATION + 1];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 7);
    n = lifecycle__encode_restoration(out, data, LC_WIRE_MAX_RESTORATION);
    int ok = lifecycle__decode_daemon(out, n, &m, why) == 0;
    CHECK("a restoration of 65536 bytes decodes, byte for byte",
          ok && n == 12 + 65536 && m.data_size == 65536 && memcmp(m.data, data, 65536) == 0);
    n = lifecycle__encode_save_restoration(out, data, LC_WIRE_MAX_RESTORATION);
    ok = lifecycle__decode_app(out, n, &m, why) == 0;
    CHECK("a saveRestoration of 65536 bytes decodes, byte for byte",
          ok && n == 12 + 65536 && m.data_size == 65536 && memcmp(m.data, data, 65536) == 0);
    CHECK("the encoders write no restoration data over 65536 bytes",
          lifecycle__encode_restoration(out, data, sizeof data) == 0 &&
              lifecycle__encode_save_restoration(out, data, sizeof data) == 0);
    n = lifecycle__encode_save_restoration(out, data, 3);
    out[8] = 0xFF; out[9] = 0xFF; out[10] = 0xFF; out[11] = 0xFF; /* a length of 4 GiB */
    CHECK("a restoration length of 4294967295 is rejected before anything is read",
          lifecycle__decode_app(out, n, &m, why) == -1 &&
              strcmp(why, "restoration data: 4294967295 bytes, more than 65536") == 0);

    struct { const char *what; const char *bytes; int valid; } utf8[] = {
        {"ASCII", "abc", 1},
        {"2-byte é", "\xc3\xa9", 1},
        {"3-byte €", "\xe2\x82\xac", 1},
        {"4-byte emoji", "\xf0\x9f\x98\x80", 1},
        {"U+10FFFF", "\xf4\x8f\xbf\xbf", 1},
        {"overlong NUL", "\xc0\x80", 0},
        {"overlong 3-byte", "\xe0\x80\xaf", 0},
        {"overlong 4-byte", "\xf0\x80\x80\xaf", 0},
        {"surrogate U+D800", "\xed\xa0\x80", 0},
        {"above U+10FFFF", "\xf4\x90\x80\x80", 0},
        {"lone continuation byte", "\x80", 0},
        {"truncated sequence", "\xe2\x82", 0},
        {"0xFF", "\xff", 0},
    };
    for (size_t i = 0; i < sizeof utf8 / sizeof utf8[0]; i++) {
        snprintf(name, sizeof name, "UTF-8: %s is %s", utf8[i].what, utf8[i].valid ? "valid" : "rejected");
        CHECK(name, lifecycle__valid_utf8((const uint8_t *)utf8[i].bytes, strlen(utf8[i].bytes)) == utf8[i].valid);
    }

    /* resume: 64 open tasks fit; the encoder refuses more; the app name is cut as a task name is. */
    uint32_t many[LC_WIRE_MAX_RESUME_TASKS + 1];
    for (uint32_t i = 0; i <= LC_WIRE_MAX_RESUME_TASKS; i++) many[i] = i + 1;
    n = lifecycle__encode_resume(out, 9, "recorder", 8, many, LC_WIRE_MAX_RESUME_TASKS);
    ok = lifecycle__decode_app(out, n, &m, why) == 0;
    CHECK("a resume with 64 open tasks decodes",
          ok && m.task_count == 64 && lifecycle__expiring_task(&m, 63) == 64 && n == LC_WIRE_HEADER + 2 + 8 + 2 + 4 * 64);
    CHECK("the encoder writes no resume with 65 tasks",
          lifecycle__encode_resume(out, 9, "recorder", 8, many, LC_WIRE_MAX_RESUME_TASKS + 1) == 0);
    char app_name[300];
    memset(app_name, 'a', 255);
    memcpy(app_name + 255, "\xc3\xa9", 3); /* 257 bytes, é across the limit */
    n = lifecycle__encode_resume(out, 9, app_name, 257, NULL, 0);
    ok = lifecycle__decode_app(out, n, &m, why) == 0;
    CHECK("a 257-byte app name is cut to 255 bytes (not mid-character) and still decodes", ok && m.name.length == 255);

    /* Long task names are cut on a character boundary. */
    char long_name[1024] = "";
    for (int i = 0; i < 200; i++) strcat(long_name, "\xc3\xa9"); /* 400 bytes of é */
    n = lifecycle__encode_begin_task(out, 1, long_name, strlen(long_name));
    ok = lifecycle__decode_app(out, n, &m, why) == 0;
    CHECK("a 400-byte name of é is cut to 256 bytes and still decodes", ok && m.name.length == 256);
    long_name[0] = 0;
    for (int i = 0; i < 86; i++) strcat(long_name, "\xe2\x82\xac"); /* 258 bytes of € */
    n = lifecycle__encode_begin_task(out, 1, long_name, strlen(long_name));
    ok = lifecycle__decode_app(out, n, &m, why) == 0;
    CHECK("a 258-byte name of € is cut to 255 bytes (not mid-character)", ok && m.name.length == 255);
    memset(long_name, 'a', 256);
    long_name[256] = 0;
    n = lifecycle__encode_begin_task(out, 1, long_name, 256);
    ok = lifecycle__decode_app(out, n, &m, why) == 0;
    CHECK("a 256-byte name is kept whole", ok && m.name.length == 256);
}

/* MARK: - A recording app */

struct rec {
    char log[2048];
    lifecycle_event defer_on;  /* defer this event */
    int ack_in_callback;       /* ...and acknowledge it at once */
    lifecycle_token token;
    int reenter;               /* try lifecycle_dispatch/run/close from a callback */
    int reenter_dispatch, reenter_run, reenter_close;
    int64_t deadline_seen;
    lifecycle_app_state state_seen;
    lifecycle_event current_seen;
    int64_t remaining_seen;
    int expired;
    uint32_t expired_task;
    void *expired_userdata;
    int end_in_expiration;
    const char *begin_on;      /* event name: begin a task inside its callback */
    uint32_t task;
    int begin_errno;
    int fd_out;                /* standalone test: write names to this pipe */
    int peer;                  /* the daemon's end: nothing may be acknowledged during a callback */
    int early_acks;
    int close_in_callback;     /* a socket to close when a callback runs: lifecycled dies meanwhile */
    int answer;                /* 1 + the fetch result to set in every callback (0: none) */
    int answer_rc, answer_errno;
    char payload_seen[LIFECYCLE_MAX_PUSH_PAYLOAD + 1];
    char url_seen[256];
    char reason_seen[64];      /* the event option launch.reason */
    int payload_null, url_null;
    const void *restoration_seen;
    size_t restoration_size_seen;
    const char *save_on;       /* event name: save restoration data "saved" in its callback */
    int save_rc;
};

static void record(lifecycle_app *app, lifecycle_event e, void *user) {
    struct rec *r = user;
    const char *name = lifecycle_event_name(e);
    strcat(r->log, name);
    strcat(r->log, " ");
    if (r->fd_out > 0) {
        char line[64];
        int n = snprintf(line, sizeof line, "%s\n", name);
        if (write(r->fd_out, line, (size_t)n) < 0) abort();
    }
    if (r->close_in_callback > 0) {
        close(r->close_in_callback);
        r->close_in_callback = 0;
    }
    if (r->peer > 0) {
        uint8_t b[16];
        if (recv(r->peer, b, sizeof b, MSG_PEEK | MSG_DONTWAIT) >= 0) r->early_acks++;
    }
    r->deadline_seen = lifecycle_event_deadline(app);
    r->state_seen = lifecycle_state(app);
    r->current_seen = lifecycle_current_event(app);
    r->remaining_seen = lifecycle_background_time_remaining(app);
    if (r->reenter) {
        r->reenter_dispatch = lifecycle_dispatch(app) == -1 && errno == EBUSY;
        r->reenter_run = lifecycle_run(app) == -1 && errno == EBUSY;
        r->reenter_close = lifecycle_close(app) == -1 && errno == EBUSY;
    }
    if (r->begin_on && strcmp(r->begin_on, name) == 0) {
        errno = 0;
        r->task = lifecycle_begin_background_task(app, "upload", NULL, NULL);
        r->begin_errno = errno;
    }
    const char *payload = lifecycle_event_payload(app), *url = lifecycle_event_url(app);
    const char *reason = lifecycle_event_option(app, "launch.reason");
    r->payload_null = payload == NULL;
    r->url_null = url == NULL;
    snprintf(r->payload_seen, sizeof r->payload_seen, "%s", payload ? payload : "");
    snprintf(r->url_seen, sizeof r->url_seen, "%s", url ? url : "");
    snprintf(r->reason_seen, sizeof r->reason_seen, "%s", reason ? reason : "");
    r->restoration_seen = lifecycle_restoration_data(app, &r->restoration_size_seen);
    if (r->answer) {
        errno = 0;
        r->answer_rc = lifecycle_set_fetch_result(app, (lifecycle_fetch_result)(r->answer - 1));
        r->answer_errno = errno;
    }
    if (r->save_on && strcmp(r->save_on, name) == 0) r->save_rc = lifecycle_save_restoration(app, "saved", 5);
    if (e == r->defer_on) {
        r->token = lifecycle_defer(app);
        if (r->ack_in_callback) lifecycle_acknowledge(app, r->token);
    }
}

static void on_expiration(lifecycle_app *app, uint32_t task, void *user) {
    struct rec *r = user;
    r->expired++;
    r->expired_task = task;
    r->expired_userdata = user;
    if (r->end_in_expiration) lifecycle_end_background_task(app, task);
}

#define EVENT_CALLBACK(fn, E) \
    static void fn(lifecycle_app *app, void *user) { record(app, E, user); }
EVENT_CALLBACK(cb_wfl, LIFECYCLE_EVENT_WILL_FINISH_LAUNCHING)
EVENT_CALLBACK(cb_dfl, LIFECYCLE_EVENT_DID_FINISH_LAUNCHING)
EVENT_CALLBACK(cb_dba, LIFECYCLE_EVENT_DID_BECOME_ACTIVE)
EVENT_CALLBACK(cb_wra, LIFECYCLE_EVENT_WILL_RESIGN_ACTIVE)
EVENT_CALLBACK(cb_deb, LIFECYCLE_EVENT_DID_ENTER_BACKGROUND)
EVENT_CALLBACK(cb_wef, LIFECYCLE_EVENT_WILL_ENTER_FOREGROUND)
EVENT_CALLBACK(cb_wt, LIFECYCLE_EVENT_WILL_TERMINATE)
EVENT_CALLBACK(cb_mw, LIFECYCLE_EVENT_DID_RECEIVE_MEMORY_WARNING)
EVENT_CALLBACK(cb_kfm, LIFECYCLE_EVENT_WILL_BE_KILLED_FOR_MEMORY)
EVENT_CALLBACK(cb_pf, LIFECYCLE_EVENT_PERFORM_FETCH)
EVENT_CALLBACK(cb_rn, LIFECYCLE_EVENT_DID_RECEIVE_REMOTE_NOTIFICATION)
EVENT_CALLBACK(cb_ou, LIFECYCLE_EVENT_OPEN_URL)

static const lifecycle_callbacks callbacks = {cb_wfl, cb_dfl, cb_dba, cb_wra, cb_deb, cb_wef, cb_wt,
                                              cb_mw,  cb_kfm, NULL,   cb_pf,  cb_rn,  cb_ou,
                                              NULL,   NULL,   NULL,   NULL,   NULL,   NULL,   NULL};

/* MARK: - The daemon's end */

static void socket_pair(int sv[2]) {
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) { perror("socketpair"); exit(2); }
}

static void send_raw(int fd, const uint8_t *b, size_t n) {
    if (send(fd, b, n, MSG_NOSIGNAL) != (ssize_t)n) { perror("send"); exit(2); }
}

static void send_event(int fd, uint32_t seq, lifecycle_event e, int bg, int64_t deadline, int64_t budget_end,
                       const char *const *options, uint16_t count) {
    static uint8_t b[LC_WIRE_MAX_MESSAGE];
    send_raw(fd, b, lifecycle__encode_event(b, seq, (uint8_t)e, bg, deadline, budget_end, options, count));
}

static void send_reply(int fd, uint32_t request, uint32_t task, int64_t budget_end) {
    uint8_t b[64];
    send_raw(fd, b, lifecycle__encode_task_reply(b, request, task, budget_end));
}

static void send_expiring(int fd, const uint32_t *tasks, uint16_t count) {
    uint8_t b[LC_WIRE_MAX_MESSAGE];
    send_raw(fd, b, lifecycle__encode_expiring(b, tasks, count));
}

/* Reads one app message without waiting (timeout_ms < 0) or waiting up to
 * timeout_ms. Returns 1 and fills *m; 0 when none; -1 on EOF or garbage. */
static int take(int fd, struct lifecycle__message *m, uint8_t *b, int timeout_ms) {
    if (timeout_ms >= 0) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) <= 0) return 0;
    }
    ssize_t n = recv(fd, b, LC_WIRE_MAX_MESSAGE, MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n > LC_WIRE_MAX_MESSAGE) return -1;
    if (n <= 0) return -1;
    char why[LC_WIRE_ERROR_MAX];
    return lifecycle__decode_app(b, (size_t)n, m, why) == 0 ? 1 : -1;
}

static int got_ack(int fd, uint32_t seq) {
    struct lifecycle__message m;
    uint8_t b[LC_WIRE_MAX_MESSAGE];
    return take(fd, &m, b, -1) == 1 && m.type == LC_T_ACKNOWLEDGE && m.id == seq;
}

/* The next app message is `complete` for `seq` with `result`. */
static int got_complete(int fd, uint32_t seq, uint8_t result) {
    struct lifecycle__message m;
    static uint8_t b[LC_WIRE_MAX_MESSAGE];
    return take(fd, &m, b, -1) == 1 && m.type == LC_T_COMPLETE && m.id == seq && m.result == result;
}

/* The next app message is saveRestoration with exactly these bytes. */
static int got_save(int fd, const void *data, size_t size) {
    struct lifecycle__message m;
    static uint8_t b[LC_WIRE_MAX_MESSAGE];
    return take(fd, &m, b, -1) == 1 && m.type == LC_T_SAVE_RESTORATION && m.data_size == size &&
           (size == 0 || memcmp(m.data, data, size) == 0);
}

static void send_restoration(int fd, const void *data, size_t size) {
    static uint8_t b[LC_WIRE_MAX_MESSAGE];
    send_raw(fd, b, lifecycle__encode_restoration(b, data, size));
}

static int got_nothing(int fd) {
    struct lifecycle__message m;
    uint8_t b[LC_WIRE_MAX_MESSAGE];
    return take(fd, &m, b, -1) == 0;
}

static int got_eof(int fd) {
    uint8_t b[16];
    return recv(fd, b, sizeof b, MSG_DONTWAIT) == 0;
}

static lifecycle_app *connected(int sv[2], struct rec *r, const lifecycle_callbacks *cb) {
    socket_pair(sv);
    memset(r, 0, sizeof *r);
    return lifecycle_connect_fd(sv[0], cb, sizeof *cb, r);
}

/* MARK: - Connecting */

static void test_connect(void) {
    int sv[2];
    struct rec r;
    memset(&r, 0, sizeof r);
    unsetenv("LIFECYCLE_FD");
    errno = 0;
    CHECK("LIFECYCLE_FD unset: NULL with ENOENT (not supervised)",
          lifecycle_connect(&callbacks, sizeof callbacks, &r) == NULL && errno == ENOENT);
    CHECK("lifecycle_strerror(ENOENT) says so", strstr(lifecycle_strerror(ENOENT), "not started by lifecycled") != NULL);
    setenv("LIFECYCLE_FD", "three", 1);
    CHECK("LIFECYCLE_FD not a number: EBADF", lifecycle_connect(&callbacks, sizeof callbacks, &r) == NULL && errno == EBADF);
    setenv("LIFECYCLE_FD", "987", 1);
    CHECK("LIFECYCLE_FD names no open fd: EBADF", lifecycle_connect(&callbacks, sizeof callbacks, &r) == NULL && errno == EBADF);
    int p[2];
    if (pipe(p) != 0) exit(2);
    char num[16];
    snprintf(num, sizeof num, "%d", p[0]);
    setenv("LIFECYCLE_FD", num, 1);
    CHECK("LIFECYCLE_FD names a pipe: ENOTSOCK", lifecycle_connect(&callbacks, sizeof callbacks, &r) == NULL && errno == ENOTSOCK);
    close(p[0]);
    close(p[1]);
    int st[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, st);
    snprintf(num, sizeof num, "%d", st[0]);
    setenv("LIFECYCLE_FD", num, 1);
    CHECK("LIFECYCLE_FD names a stream socket: EPROTOTYPE",
          lifecycle_connect(&callbacks, sizeof callbacks, &r) == NULL && errno == EPROTOTYPE);
    CHECK("a failed connect leaves LIFECYCLE_FD set", getenv("LIFECYCLE_FD") != NULL);
    close(st[0]);
    close(st[1]);

    socket_pair(sv);
    snprintf(num, sizeof num, "%d", sv[0]);
    setenv("LIFECYCLE_FD", num, 1);
    setenv("LIFECYCLE_APP", "tester", 1);
    lifecycle_app *app = lifecycle_connect(&callbacks, sizeof callbacks, &r);
    CHECK("LIFECYCLE_FD names a seqpacket socket: connected", app != NULL);
    CHECK("LIFECYCLE_FD is unset afterwards", getenv("LIFECYCLE_FD") == NULL);
    CHECK("the socket is close-on-exec", (fcntl(sv[0], F_GETFD) & FD_CLOEXEC) != 0);
    CHECK("lifecycle_fd is that socket", lifecycle_fd(app) == sv[0]);
    CHECK("the app's name comes from LIFECYCLE_APP", app && strcmp(lifecycle_app_name(app), "tester") == 0);
    CHECK("it is supervised", lifecycle_is_supervised(app) == 1);
    CHECK("state is inactive before any event", lifecycle_state(app) == LIFECYCLE_STATE_INACTIVE);
    CHECK("no launch options before the launch events",
          lifecycle_launched_in_background(app) == -1 && lifecycle_launch_option_count(app) == 0 &&
              lifecycle_previous_termination_reason(app) == NULL && lifecycle_previous_termination_time(app) == -1);
    CHECK("no current event, no deadline", lifecycle_current_event(app) == LIFECYCLE_EVENT_NONE && lifecycle_event_deadline(app) == -1);
    int64_t t0 = lifecycle_now();
    CHECK("dispatch with nothing pending returns LIFECYCLE_OK at once",
          lifecycle_dispatch(app) == LIFECYCLE_OK && lifecycle_now() - t0 < 100000000);
    CHECK("lifecycle_close closes the socket", lifecycle_close(app) == 0 && fcntl(sv[0], F_GETFD) == -1 && errno == EBADF);
    close(sv[1]);

    /* Prewarmed: connecting says the app is at its first event. */
    socket_pair(sv);
    snprintf(num, sizeof num, "%d", sv[0]);
    setenv("LIFECYCLE_FD", num, 1);
    setenv("LIFECYCLE_PREWARM", "1", 1);
    app = lifecycle_connect(&callbacks, sizeof callbacks, &r);
    uint8_t said[64];
    ssize_t got = recv(sv[1], said, sizeof said, MSG_DONTWAIT);
    CHECK("prewarmed: connecting sends prewarmed (0x87, id 0, no body)",
          app && got == 8 && said[0] == 1 && said[1] == 0x87 && said[4] == 0 && said[5] == 0 && said[6] == 0 &&
              said[7] == 0);
    CHECK("LIFECYCLE_PREWARM is unset afterwards", getenv("LIFECYCLE_PREWARM") == NULL);
    lifecycle_close(app);
    close(sv[1]);
    socket_pair(sv);
    snprintf(num, sizeof num, "%d", sv[0]);
    setenv("LIFECYCLE_FD", num, 1);
    app = lifecycle_connect(&callbacks, sizeof callbacks, &r);
    CHECK("not prewarmed: connecting sends nothing", app && recv(sv[1], said, sizeof said, MSG_DONTWAIT) == -1 && errno == EAGAIN);
    lifecycle_close(app);
    close(sv[1]);
    unsetenv("LIFECYCLE_APP");

    /* The callbacks struct can grow: bigger sizes are fine when zeroed. */
    struct { lifecycle_callbacks cb; void *newer[2]; } bigger;
    memset(&bigger, 0, sizeof bigger);
    socket_pair(sv);
    app = lifecycle_connect_fd(sv[0], &bigger.cb, sizeof bigger, NULL);
    CHECK("a bigger callbacks struct with unknown members unset is accepted", app != NULL);
    lifecycle_close(app);
    close(sv[1]);
    bigger.newer[1] = (void *)&bigger;
    socket_pair(sv);
    CHECK("a bigger callbacks struct with an unknown member set: EINVAL",
          lifecycle_connect_fd(sv[0], &bigger.cb, sizeof bigger, NULL) == NULL && errno == EINVAL);
    close(sv[0]);
    close(sv[1]);
}

/* MARK: - Events */

static void test_events(void) {
    int sv[2];
    struct rec r;
    lifecycle_app *app = connected(sv, &r, &callbacks);
    int64_t deadline = lifecycle_now() + 5000000000;
    const char *opts[] = {"launch.mode", "background", "previous.reason", "stopped-by-user", "previous.description",
                          "stopped by supervisorctl", "previous.time", "1732300000.5", "x.future", "ignored"};
    send_event(sv[1], 1, LIFECYCLE_EVENT_WILL_FINISH_LAUNCHING, 1, deadline, -1, opts, 5);
    r.peer = sv[1];
    CHECK("dispatch handles the pending event", lifecycle_dispatch(app) == LIFECYCLE_OK);
    CHECK("no acknowledgement was sent while its callback ran", r.early_acks == 0 && r.log[0]);
    r.peer = 0;
    send_event(sv[1], 2, LIFECYCLE_EVENT_DID_FINISH_LAUNCHING, 1, deadline, -1, opts, 5);
    CHECK("dispatch handles the next event", lifecycle_dispatch(app) == LIFECYCLE_OK);
    CHECK("both callbacks ran, in order", strcmp(r.log, "willFinishLaunching didFinishLaunching ") == 0);
    CHECK("each was acknowledged after its callback, in order", got_ack(sv[1], 1) && got_ack(sv[1], 2) && got_nothing(sv[1]));
    CHECK("the callback saw its event and its deadline",
          r.current_seen == LIFECYCLE_EVENT_DID_FINISH_LAUNCHING && r.deadline_seen == deadline);
    CHECK("outside callbacks there is no current event", lifecycle_current_event(app) == LIFECYCLE_EVENT_NONE);
    CHECK("launched in the background: state background", lifecycle_state(app) == LIFECYCLE_STATE_BACKGROUND &&
                                                              r.state_seen == LIFECYCLE_STATE_BACKGROUND);
    CHECK("launch options: launched in background", lifecycle_launched_in_background(app) == 1);
    CHECK("launch options: previous reason",
          lifecycle_previous_termination_reason(app) && strcmp(lifecycle_previous_termination_reason(app), "stopped-by-user") == 0);
    CHECK("launch options: previous description",
          lifecycle_previous_termination_description(app) &&
              strcmp(lifecycle_previous_termination_description(app), "stopped by supervisorctl") == 0);
    CHECK("launch options: previous time", lifecycle_previous_termination_time(app) == 1732300000.5);
    const char *k = NULL, *v = NULL;
    CHECK("launch options: by key, unknown keys kept",
          lifecycle_launch_option(app, "x.future") && strcmp(lifecycle_launch_option(app, "x.future"), "ignored") == 0 &&
              lifecycle_launch_option(app, "nope") == NULL);
    CHECK("launch options: by index, in order",
          lifecycle_launch_option_count(app) == 5 && lifecycle_launch_option_at(app, 0, &k, &v) == 0 &&
              strcmp(k, "launch.mode") == 0 && strcmp(v, "background") == 0 &&
              lifecycle_launch_option_at(app, 5, &k, &v) == -1 && errno == EINVAL);

    send_event(sv[1], 3, LIFECYCLE_EVENT_WILL_ENTER_FOREGROUND, 0, deadline, -1, NULL, 0);
    send_event(sv[1], 4, LIFECYCLE_EVENT_DID_BECOME_ACTIVE, 0, deadline, -1, NULL, 0);
    lifecycle_dispatch(app);
    CHECK("didBecomeActive: state active (also inside the callback)",
          lifecycle_state(app) == LIFECYCLE_STATE_ACTIVE && r.state_seen == LIFECYCLE_STATE_ACTIVE);
    CHECK("...acknowledged", got_ack(sv[1], 3) && got_ack(sv[1], 4));
    send_event(sv[1], 5, LIFECYCLE_EVENT_WILL_RESIGN_ACTIVE, 0, deadline, -1, NULL, 0);
    lifecycle_dispatch(app);
    CHECK("willResignActive: inactive", lifecycle_state(app) == LIFECYCLE_STATE_INACTIVE && got_ack(sv[1], 5));
    send_event(sv[1], 6, LIFECYCLE_EVENT_DID_RECEIVE_MEMORY_WARNING, 0, deadline, -1, NULL, 0);
    send_event(sv[1], 7, LIFECYCLE_EVENT_WILL_BE_KILLED_FOR_MEMORY, 0, -1, -1, NULL, 0);
    lifecycle_dispatch(app);
    CHECK("memory events reach their callbacks and are acknowledged",
          strstr(r.log, "didReceiveMemoryWarning willBeKilledForMemory ") && got_ack(sv[1], 6) && got_ack(sv[1], 7));
    CHECK("an event without deadline shows -1", r.deadline_seen == -1);
    CHECK("memory events leave the state alone", lifecycle_state(app) == LIFECYCLE_STATE_INACTIVE);
    lifecycle_close(app);
    close(sv[1]);

    /* any_event gets every event without a callback of its own. */
    lifecycle_callbacks only_any = {0};
    only_any.any_event = record;
    app = connected(sv, &r, &only_any);
    send_event(sv[1], 1, LIFECYCLE_EVENT_DID_BECOME_ACTIVE, 0, -1, -1, NULL, 0);
    send_event(sv[1], 2, LIFECYCLE_EVENT_WILL_RESIGN_ACTIVE, 0, -1, -1, NULL, 0);
    lifecycle_dispatch(app);
    CHECK("any_event receives events that have no callback of their own",
          strcmp(r.log, "didBecomeActive willResignActive ") == 0 && got_ack(sv[1], 1) && got_ack(sv[1], 2));
    lifecycle_close(app);
    close(sv[1]);

    /* No callbacks at all: every event is just acknowledged. */
    socket_pair(sv);
    app = lifecycle_connect_fd(sv[0], NULL, 0, NULL);
    send_event(sv[1], 9, LIFECYCLE_EVENT_DID_BECOME_ACTIVE, 0, -1, -1, NULL, 0);
    CHECK("without callbacks events are acknowledged", app && lifecycle_dispatch(app) == 0 && got_ack(sv[1], 9));
    lifecycle_close(app);
    close(sv[1]);

    /* Callbacks may not re-enter the loop or close the app. */
    app = connected(sv, &r, &callbacks);
    r.reenter = 1;
    send_event(sv[1], 1, LIFECYCLE_EVENT_DID_BECOME_ACTIVE, 0, -1, -1, NULL, 0);
    lifecycle_dispatch(app);
    CHECK("from a callback, dispatch, run and close fail with EBUSY",
          r.reenter_dispatch && r.reenter_run && r.reenter_close && got_ack(sv[1], 1));
    lifecycle_close(app);
    close(sv[1]);
}

/* MARK: - Deferred acknowledgements */

static void test_defer(void) {
    int sv[2];
    struct rec r;
    lifecycle_app *app = connected(sv, &r, &callbacks);
    CHECK("lifecycle_defer outside a callback: 0 with EINVAL", lifecycle_defer(app) == 0 && errno == EINVAL);
    int64_t deadline = lifecycle_now() + 5000000000;
    r.defer_on = LIFECYCLE_EVENT_DID_ENTER_BACKGROUND;
    send_event(sv[1], 10, LIFECYCLE_EVENT_DID_ENTER_BACKGROUND, 0, deadline, lifecycle_now() + 30000000000, NULL, 0);
    CHECK("a deferring callback: dispatch returns OK", lifecycle_dispatch(app) == LIFECYCLE_OK && r.token != 0);
    CHECK("...and nothing is acknowledged yet", got_nothing(sv[1]));
    CHECK("the deferred event is still current, with its deadline",
          lifecycle_current_event(app) == LIFECYCLE_EVENT_DID_ENTER_BACKGROUND && lifecycle_event_deadline(app) == deadline);
    CHECK("a wrong token: EINVAL", lifecycle_acknowledge(app, r.token + 1) == -1 && errno == EINVAL);
    CHECK("token 0: EINVAL", lifecycle_acknowledge(app, 0) == -1 && errno == EINVAL);
    /* Replies and expirations go on being handled meanwhile. */
    send_reply(sv[1], 77, 0, -1);
    CHECK("messages other than events are handled while deferred", lifecycle_dispatch(app) == LIFECYCLE_OK && got_nothing(sv[1]));
    CHECK("acknowledge with the token: OK", lifecycle_acknowledge(app, r.token) == LIFECYCLE_OK);
    CHECK("...sends the acknowledgement", got_ack(sv[1], 10) && got_nothing(sv[1]));
    CHECK("...and the event is no longer current", lifecycle_current_event(app) == LIFECYCLE_EVENT_NONE);
    CHECK("acknowledging twice: EINVAL", lifecycle_acknowledge(app, r.token) == -1 && errno == EINVAL);

    /* Defer and acknowledge inside the same callback: exactly one ack. */
    r.ack_in_callback = 1;
    r.defer_on = LIFECYCLE_EVENT_WILL_ENTER_FOREGROUND;
    send_event(sv[1], 11, LIFECYCLE_EVENT_WILL_ENTER_FOREGROUND, 0, -1, -1, NULL, 0);
    lifecycle_dispatch(app);
    CHECK("deferred and acknowledged in its callback: one acknowledgement", got_ack(sv[1], 11) && got_nothing(sv[1]));
    r.ack_in_callback = 0;

    /* An event sent together with a deferred one (launch events to a held
     * prewarm) waits for its acknowledgement, and so does what follows it;
     * replies and notices that come meanwhile are handled. */
    r.defer_on = LIFECYCLE_EVENT_WILL_RESIGN_ACTIVE;
    send_event(sv[1], 12, LIFECYCLE_EVENT_WILL_RESIGN_ACTIVE, 0, -1, -1, NULL, 0);
    lifecycle_dispatch(app);
    size_t seen = strlen(r.log);
    send_event(sv[1], 13, LIFECYCLE_EVENT_DID_ENTER_BACKGROUND, 0, -1, -1, NULL, 0);
    send_event(sv[1], 14, LIFECYCLE_EVENT_WILL_ENTER_FOREGROUND, 0, -1, -1, NULL, 0);
    send_reply(sv[1], 78, 0, -1);
    CHECK("events behind a deferred one: dispatch returns OK, no callback, nothing acknowledged",
          lifecycle_dispatch(app) == LIFECYCLE_OK && strlen(r.log) == seen && got_nothing(sv[1]));
    CHECK("...the deferred event stays current",
          lifecycle_current_event(app) == LIFECYCLE_EVENT_WILL_RESIGN_ACTIVE);
    CHECK("...and lifecycle_pending() is 0 while they wait (poll need not spin)", lifecycle_pending(app) == 0);
    CHECK("...a second dispatch changes nothing", lifecycle_dispatch(app) == LIFECYCLE_OK && strlen(r.log) == seen);
    CHECK("acknowledging the deferred one sends its acknowledgement alone",
          lifecycle_acknowledge(app, r.token) == LIFECYCLE_OK && got_ack(sv[1], 12) && got_nothing(sv[1]));
    CHECK("...and lifecycle_pending() then counts the two waiting", lifecycle_pending(app) == 2);
    CHECK("the next dispatch runs both, in order, each acknowledged",
          lifecycle_dispatch(app) == LIFECYCLE_OK &&
              strcmp(r.log + seen, "didEnterBackground willEnterForeground ") == 0 && got_ack(sv[1], 13) &&
              got_ack(sv[1], 14) && got_nothing(sv[1]) && lifecycle_pending(app) == 0);
    lifecycle_close(app);
    close(sv[1]);

    /* A deferred willTerminate: terminated once acknowledged. */
    app = connected(sv, &r, &callbacks);
    r.defer_on = LIFECYCLE_EVENT_WILL_TERMINATE;
    send_event(sv[1], 20, LIFECYCLE_EVENT_WILL_TERMINATE, 0, -1, -1, NULL, 0);
    CHECK("deferred willTerminate: dispatch returns OK (not yet terminated)", lifecycle_dispatch(app) == LIFECYCLE_OK);
    CHECK("acknowledging it returns LIFECYCLE_TERMINATED", lifecycle_acknowledge(app, r.token) == LIFECYCLE_TERMINATED &&
                                                               got_ack(sv[1], 20));
    CHECK("and dispatch returns LIFECYCLE_TERMINATED from then on", lifecycle_dispatch(app) == LIFECYCLE_TERMINATED &&
                                                                       lifecycle_run(app) == LIFECYCLE_TERMINATED);
    lifecycle_close(app);
    close(sv[1]);
}

/* MARK: - Background tasks */

/* A fake daemon: reads the app's beginBackgroundTask, then sends an
 * unrelated event (and an expiration and a stale reply) before the reply. */
static int fake_daemon_for_begin(int fd, lifecycle_event unrelated, uint32_t task, int64_t budget_end) {
    struct lifecycle__message m;
    uint8_t b[LC_WIRE_MAX_MESSAGE];
    if (take(fd, &m, b, 5000) != 1 || m.type != LC_T_BEGIN_TASK || !str_is(m.name, "upload")) return 10;
    uint32_t request = m.id;
    if (unrelated) send_event(fd, 30, unrelated, 0, -1, -1, NULL, 0);
    uint32_t unknown = 4242;
    send_expiring(fd, &unknown, 1);
    send_reply(fd, request + 1000, 0, -1);  /* an answer nobody waits for (task 0: nothing to end) */
    send_reply(fd, request, task, budget_end);
    return 0;
}

static void test_tasks(void) {
    int sv[2];
    struct rec r;
    lifecycle_app *app = connected(sv, &r, &callbacks);
    int64_t budget = lifecycle_now() + 20000000000;

    /* Outside a callback (the app's own loop), in the background. */
    send_event(sv[1], 1, LIFECYCLE_EVENT_DID_ENTER_BACKGROUND, 0, -1, lifecycle_now() + 10000000000, NULL, 0);
    lifecycle_dispatch(app);
    got_ack(sv[1], 1);
    int64_t left = lifecycle_background_time_remaining(app);
    CHECK("remaining time in the background follows the budget end (9-10 s)", left > 9000000000 && left <= 10000000000);
    CHECK("...also inside the callback", r.remaining_seen > 9000000000 && r.remaining_seen <= 10000000000);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) { lifecycle_close(app); _exit(fake_daemon_for_begin(sv[1], LIFECYCLE_EVENT_DID_RECEIVE_MEMORY_WARNING, 7, budget)); }
    uint32_t task = lifecycle_begin_background_task(app, "upload", on_expiration, &r);
    int status = 0;
    waitpid(child, &status, 0);
    CHECK("the fake daemon saw beginBackgroundTask \"upload\"", WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK("begin returns the task id of the reply that came after an unrelated event", task == 7);
    CHECK("the reply's budget end updates the remaining time (19-20 s)",
          lifecycle_background_time_remaining(app) > 19000000000 && lifecycle_background_time_remaining(app) <= 20000000000);
    CHECK("the unrelated event was kept, not delivered during begin", strcmp(r.log, "didEnterBackground ") == 0 &&
                                                                      got_nothing(sv[1]));
    CHECK("lifecycle_pending counts the queued messages (event, expiration)", lifecycle_pending(app) == 2);
    CHECK("dispatch delivers the queued event and acknowledges it",
          lifecycle_dispatch(app) == LIFECYCLE_OK && strcmp(r.log, "didEnterBackground didReceiveMemoryWarning ") == 0 &&
              got_ack(sv[1], 30) && lifecycle_pending(app) == 0);
    CHECK("an expiration of an unknown task runs no handler", r.expired == 0);

    /* Expiration: handler runs once, from dispatch, with its task and userdata. */
    uint32_t expiring[] = {99, 7};
    send_expiring(sv[1], expiring, 2);
    lifecycle_dispatch(app);
    CHECK("the expiration handler ran from dispatch with its task and userdata",
          r.expired == 1 && r.expired_task == 7 && r.expired_userdata == &r);
    send_expiring(sv[1], expiring + 1, 1);
    lifecycle_dispatch(app);
    CHECK("...only once", r.expired == 1);
    CHECK("ending the task sends endBackgroundTask even after its handler ran", lifecycle_end_background_task(app, 7) == 0);
    struct lifecycle__message m;
    uint8_t b[LC_WIRE_MAX_MESSAGE];
    CHECK("...endBackgroundTask 7 on the wire", take(sv[1], &m, b, -1) == 1 && m.type == LC_T_END_TASK && m.id == 7);
    CHECK("ending task 0 does nothing", lifecycle_end_background_task(app, 0) == 0 && got_nothing(sv[1]));

    /* Begin inside a callback; the handler ends the task itself. (Sequence
     * numbers go on rising, from the fake daemon's 30: a lower one would be
     * a repeat, acknowledged without its callback.) */
    r.begin_on = "didEnterBackground";
    r.end_in_expiration = 1;
    send_event(sv[1], 31, LIFECYCLE_EVENT_WILL_ENTER_FOREGROUND, 0, -1, -1, NULL, 0);
    lifecycle_dispatch(app);
    got_ack(sv[1], 31);
    CHECK("willEnterForeground: no budget applies", lifecycle_background_time_remaining(app) == -1 &&
                                                       lifecycle_state(app) == LIFECYCLE_STATE_INACTIVE);
    fflush(stdout);
    child = fork();
    if (child == 0) {
        lifecycle_close(app);
        send_event(sv[1], 32, LIFECYCLE_EVENT_DID_ENTER_BACKGROUND, 0, -1, -1, NULL, 0);
        _exit(fake_daemon_for_begin(sv[1], LIFECYCLE_EVENT_NONE, 8, -1));
    }
    int64_t t0 = lifecycle_now();
    while (strstr(r.log, "didEnterBackground didEnterBackground") == NULL && lifecycle_now() - t0 < 5000000000) {
        struct pollfd p = {lifecycle_fd(app), POLLIN, 0};
        poll(&p, 1, 100);
        lifecycle_dispatch(app);
    }
    waitpid(child, &status, 0);
    CHECK("begin inside didEnterBackground gets its task", r.task == 8 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK("the event is acknowledged after the callback, and the expiration queued meanwhile is handled",
          got_ack(sv[1], 32) && lifecycle_pending(app) == 0);
    CHECK("a continuous background mode (no budget end): remaining time -1",
          lifecycle_state(app) == LIFECYCLE_STATE_BACKGROUND && lifecycle_background_time_remaining(app) == -1 &&
              r.remaining_seen == -1);
    /* Register a handler that ends its own task, then expire it. */
    send_reply(sv[1], 100, 9, -1); /* pre-sent: the app's next request id is predictable, but use a fresh one */
    lifecycle_dispatch(app);       /* stale: task 9 is ended at once */
    CHECK("a reply nobody waits for has its task ended at once",
          take(sv[1], &m, b, -1) == 1 && m.type == LC_T_END_TASK && m.id == 9);
    r.begin_on = NULL;
    lifecycle_close(app);
    close(sv[1]);

    /* Refusal, errors, and the queue's cap, driven in-process: the reply is
     * already waiting when begin is called (request ids count from 1). */
    app = connected(sv, &r, &callbacks);
    send_reply(sv[1], 1, 0, -1);
    errno = 0;
    CHECK("a refused task: 0 with EAGAIN", lifecycle_begin_background_task(app, NULL, NULL, NULL) == 0 && errno == EAGAIN);
    CHECK("...the request had the default name task-1",
          take(sv[1], &m, b, -1) == 1 && m.type == LC_T_BEGIN_TASK && m.id == 1 && str_is(m.name, "task-1"));
    CHECK("a name that is not UTF-8: EINVAL, nothing sent",
          lifecycle_begin_background_task(app, "\xff", NULL, NULL) == 0 && errno == EINVAL && got_nothing(sv[1]));
    for (uint32_t i = 0; i < LIFECYCLE_MAX_QUEUED; i++) send_expiring(sv[1], &i, 1);
    send_reply(sv[1], 2, 5, -1);
    uint32_t t = lifecycle_begin_background_task(app, "x", on_expiration, &r);
    CHECK("64 messages before the reply are kept", t == 5 && lifecycle_pending(app) == LIFECYCLE_MAX_QUEUED);
    CHECK("...and handled by dispatch", lifecycle_dispatch(app) == LIFECYCLE_OK && lifecycle_pending(app) == 0);
    while (take(sv[1], &m, b, -1) == 1) {}
    for (uint32_t i = 0; i <= LIFECYCLE_MAX_QUEUED; i++) send_expiring(sv[1], &i, 1);
    send_reply(sv[1], 3, 6, -1);
    CHECK("65 messages before the reply: 0 with ENOBUFS",
          lifecycle_begin_background_task(app, "x", NULL, NULL) == 0 && errno == ENOBUFS);
    CHECK("...and the channel is closed", lifecycle_fd(app) == -1 && lifecycle_dispatch(app) == -1 && errno == ENOBUFS);
    lifecycle_close(app);
    close(sv[1]);

    /* The reply to a request that gave up, arriving while another request
     * waits (the Swift client's LateTaskReplyTests do the same). */
    app = connected(sv, &r, &callbacks);
    send_reply(sv[1], 77, 11, -1);
    send_reply(sv[1], 1, 12, -1);
    t = lifecycle_begin_background_task(app, "y", NULL, NULL);
    CHECK("a stale reply while begin waits: begin returns its own reply's task, nothing is queued",
          t == 12 && lifecycle_pending(app) == 0);
    CHECK("...and the stale reply's task 11 is ended at once",
          take(sv[1], &m, b, -1) == 1 && m.type == LC_T_BEGIN_TASK && m.id == 1 && take(sv[1], &m, b, -1) == 1 &&
              m.type == LC_T_END_TASK && m.id == 11 && got_nothing(sv[1]));
    lifecycle_close(app);
    close(sv[1]);

    app = connected(sv, &r, &callbacks);
    close(sv[1]);
    CHECK("begin on a channel the daemon closed: 0 with ECONNRESET",
          lifecycle_begin_background_task(app, "x", NULL, NULL) == 0 && errno == ECONNRESET);
    lifecycle_close(app);
}

/* MARK: - Wake events, URLs, launch reasons */

static void test_wake(void) {
    int sv[2];
    struct rec r;
    lifecycle_app *app = connected(sv, &r, &callbacks);
    int64_t deadline = lifecycle_now() + 30000000000;

    CHECK("lifecycle_set_fetch_result outside a wake event: EINVAL",
          lifecycle_set_fetch_result(app, LIFECYCLE_FETCH_NEW_DATA) == -1 && errno == EINVAL);
    CHECK("no event option, payload or URL outside events",
          lifecycle_event_option(app, "url") == NULL && lifecycle_event_payload(app) == NULL &&
              lifecycle_event_url(app) == NULL);

    /* A launch for a fetch: the launch reason, as a launch option and an event option. */
    const char *launch[] = {"launch.mode", "background", "launch.reason", "fetch"};
    send_event(sv[1], 1, LIFECYCLE_EVENT_WILL_FINISH_LAUNCHING, 1, deadline, -1, launch, 2);
    send_event(sv[1], 2, LIFECYCLE_EVENT_DID_FINISH_LAUNCHING, 1, deadline, -1, launch, 2);
    lifecycle_dispatch(app);
    CHECK("launched for a fetch: lifecycle_launch_reason is \"fetch\", also as the event's option",
          lifecycle_launch_reason(app) && strcmp(lifecycle_launch_reason(app), "fetch") == 0 &&
              strcmp(r.reason_seen, "fetch") == 0 && got_ack(sv[1], 1) && got_ack(sv[1], 2));
    CHECK("...and no event options once the event is acknowledged", lifecycle_event_option(app, "launch.reason") == NULL);

    /* performFetch answered with new data: complete, not acknowledge. */
    r.answer = 1 + LIFECYCLE_FETCH_NEW_DATA;
    send_event(sv[1], 3, LIFECYCLE_EVENT_PERFORM_FETCH, 1, deadline, -1, NULL, 0);
    CHECK("performFetch reaches perform_fetch", lifecycle_dispatch(app) == LIFECYCLE_OK && strstr(r.log, "performFetch ") &&
                                                     r.current_seen == LIFECYCLE_EVENT_PERFORM_FETCH &&
                                                     r.deadline_seen == deadline);
    CHECK("...the result set in its callback is accepted", r.answer_rc == 0);
    CHECK("...and the answer is complete(3, new-data), alone", got_complete(sv[1], 3, LIFECYCLE_FETCH_NEW_DATA) &&
                                                                    got_nothing(sv[1]));
    CHECK("performFetch leaves the state alone", lifecycle_state(app) == LIFECYCLE_STATE_BACKGROUND);

    /* No result set: a plain acknowledgement (the daemon counts it as no data). */
    r.answer = 0;
    send_event(sv[1], 4, LIFECYCLE_EVENT_PERFORM_FETCH, 1, deadline, -1, NULL, 0);
    lifecycle_dispatch(app);
    CHECK("performFetch without a result: a plain acknowledgement", got_ack(sv[1], 4) && got_nothing(sv[1]));

    /* A remote notification: the payload, a failed answer. */
    static char payload[LIFECYCLE_MAX_PUSH_PAYLOAD + 1];
    memset(payload, 'p', LIFECYCLE_MAX_PUSH_PAYLOAD);
    memcpy(payload, "{\"aps\":\"", 8);
    memcpy(payload + LIFECYCLE_MAX_PUSH_PAYLOAD - 2, "\"}", 2);
    const char *push[] = {"push.payload", payload};
    r.answer = 1 + LIFECYCLE_FETCH_FAILED;
    send_event(sv[1], 5, LIFECYCLE_EVENT_DID_RECEIVE_REMOTE_NOTIFICATION, 1, deadline, -1, push, 1);
    lifecycle_dispatch(app);
    CHECK("didReceiveRemoteNotification: its callback reads the 4096-byte payload; no URL",
          strstr(r.log, "didReceiveRemoteNotification ") && !r.payload_null && strcmp(r.payload_seen, payload) == 0 &&
              r.url_null);
    CHECK("...and answers complete(5, failed)", got_complete(sv[1], 5, LIFECYCLE_FETCH_FAILED) && got_nothing(sv[1]));
    CHECK("...its payload is gone once it is acknowledged", lifecycle_event_payload(app) == NULL);

    /* openURL: the URL; no result may be set; acknowledged plainly. */
    const char *url[] = {"url", "myapp://item/42"};
    r.answer = 1 + LIFECYCLE_FETCH_NEW_DATA;
    send_event(sv[1], 6, LIFECYCLE_EVENT_OPEN_URL, 0, deadline, -1, url, 1);
    lifecycle_dispatch(app);
    CHECK("openURL: its callback reads the URL; no payload",
          strstr(r.log, "openURL ") && !r.url_null && strcmp(r.url_seen, "myapp://item/42") == 0 && r.payload_null);
    CHECK("...a fetch result there: EINVAL", r.answer_rc == -1 && r.answer_errno == EINVAL);
    CHECK("...and it is acknowledged plainly", got_ack(sv[1], 6) && got_nothing(sv[1]));
    r.answer = 0;

    /* A deferred wake event: the payload stays until the acknowledgement;
     * the result may be set after the callback; the acknowledgement is complete. */
    const char *small[] = {"push.payload", "{}"};
    r.defer_on = LIFECYCLE_EVENT_DID_RECEIVE_REMOTE_NOTIFICATION;
    send_event(sv[1], 7, LIFECYCLE_EVENT_DID_RECEIVE_REMOTE_NOTIFICATION, 1, deadline, -1, small, 1);
    lifecycle_dispatch(app);
    uint32_t unknown = 4242;
    send_expiring(sv[1], &unknown, 1); /* the receive buffer is reused meanwhile */
    lifecycle_dispatch(app);
    CHECK("deferred: nothing is sent, the payload is still there (a copy)",
          got_nothing(sv[1]) && lifecycle_event_payload(app) && strcmp(lifecycle_event_payload(app), "{}") == 0 &&
              lifecycle_event_option(app, "push.payload") == lifecycle_event_payload(app));
    CHECK("invalid results are refused: EINVAL",
          lifecycle_set_fetch_result(app, (lifecycle_fetch_result)3) == -1 && errno == EINVAL &&
              lifecycle_set_fetch_result(app, (lifecycle_fetch_result)-1) == -1 && errno == EINVAL);
    CHECK("the result set outside the callback, the last one wins",
          lifecycle_set_fetch_result(app, LIFECYCLE_FETCH_FAILED) == 0 &&
              lifecycle_set_fetch_result(app, LIFECYCLE_FETCH_NO_DATA) == 0);
    CHECK("lifecycle_acknowledge sends complete(7, no-data)",
          lifecycle_acknowledge(app, r.token) == LIFECYCLE_OK && got_complete(sv[1], 7, LIFECYCLE_FETCH_NO_DATA) &&
              got_nothing(sv[1]));
    CHECK("after the acknowledgement: no payload, and no result can be set",
          lifecycle_event_payload(app) == NULL && lifecycle_set_fetch_result(app, LIFECYCLE_FETCH_NEW_DATA) == -1 &&
              errno == EINVAL);
    r.defer_on = LIFECYCLE_EVENT_NONE;

    /* Acknowledged early with its token inside the callback: a result set after that is refused. */
    r.defer_on = LIFECYCLE_EVENT_PERFORM_FETCH;
    r.ack_in_callback = 1;
    r.answer = 1 + LIFECYCLE_FETCH_NEW_DATA; /* set before the early acknowledgement: sent with it */
    send_event(sv[1], 8, LIFECYCLE_EVENT_PERFORM_FETCH, 1, deadline, -1, NULL, 0);
    lifecycle_dispatch(app);
    CHECK("a wake event deferred and acknowledged in its callback: one complete",
          got_complete(sv[1], 8, LIFECYCLE_FETCH_NEW_DATA) && got_nothing(sv[1]));
    r.defer_on = LIFECYCLE_EVENT_NONE;
    r.ack_in_callback = 0;
    r.answer = 0;

    /* The options block is reused and grows: a big option after a small one, then a small one again. */
    send_event(sv[1], 9, LIFECYCLE_EVENT_OPEN_URL, 0, deadline, -1, url, 1);
    send_event(sv[1], 10, LIFECYCLE_EVENT_DID_RECEIVE_REMOTE_NOTIFICATION, 1, deadline, -1, push, 1);
    lifecycle_dispatch(app);
    int big_ok = strcmp(r.payload_seen, payload) == 0;
    send_event(sv[1], 11, LIFECYCLE_EVENT_OPEN_URL, 0, deadline, -1, url, 1);
    lifecycle_dispatch(app);
    CHECK("event options of any size, one after another",
          big_ok && strcmp(r.url_seen, "myapp://item/42") == 0 && got_ack(sv[1], 9) && got_ack(sv[1], 10) &&
              got_ack(sv[1], 11));
    lifecycle_close(app);
    close(sv[1]);

    /* any_event gets the new events without callbacks of their own, also
     * for an app built against the 1.0 header (a smaller struct). */
    lifecycle_callbacks old = {0};
    old.any_event = record;
    old.perform_fetch = cb_wt; /* beyond the size given: not read */
    memset(&r, 0, sizeof r);
    socket_pair(sv);
    app = lifecycle_connect_fd(sv[0], &old, offsetof(lifecycle_callbacks, perform_fetch), &r);
    send_event(sv[1], 1, LIFECYCLE_EVENT_PERFORM_FETCH, 1, -1, -1, NULL, 0);
    send_event(sv[1], 2, LIFECYCLE_EVENT_DID_RECEIVE_REMOTE_NOTIFICATION, 1, -1, -1, small, 1);
    send_event(sv[1], 3, LIFECYCLE_EVENT_OPEN_URL, 0, -1, -1, url, 1);
    lifecycle_dispatch(app);
    CHECK("a 1.0-sized callbacks struct: any_event gets performFetch, didReceiveRemoteNotification, openURL",
          app && strcmp(r.log, "performFetch didReceiveRemoteNotification openURL ") == 0 && got_ack(sv[1], 1) &&
              got_ack(sv[1], 2) && got_ack(sv[1], 3) && got_nothing(sv[1]));
    lifecycle_close(app);
    close(sv[1]);
}

/* MARK: - Restoration */

static void test_restoration(void) {
    int sv[2];
    struct rec r;
    size_t size = 99;
    lifecycle_app *app = connected(sv, &r, &callbacks);
    CHECK("no restoration data before the launch: NULL, size 0",
          lifecycle_restoration_data(app, &size) == NULL && size == 0 && lifecycle_restoration_data(app, NULL) == NULL);

    /* Handed over before willFinishLaunching, kept for the whole run. */
    const uint8_t data[] = {'d', 'r', 'a', 'f', 't', 0x00, 0xff};
    const char *launch[] = {"launch.mode", "foreground", "launch.reason", "user", "restoration.size", "7"};
    send_restoration(sv[1], data, sizeof data);
    send_event(sv[1], 1, LIFECYCLE_EVENT_WILL_FINISH_LAUNCHING, 0, -1, -1, launch, 3);
    lifecycle_dispatch(app);
    const uint8_t *seen = r.restoration_seen;
    CHECK("willFinishLaunching sees the restoration data handed over before it, byte for byte",
          seen && r.restoration_size_seen == sizeof data && memcmp(seen, data, sizeof data) == 0 && got_ack(sv[1], 1));
    CHECK("...followed by a NUL byte not counted", seen && seen[sizeof data] == 0);
    CHECK("...and restoration.size among the launch options",
          lifecycle_launch_option(app, "restoration.size") &&
              strcmp(lifecycle_launch_option(app, "restoration.size"), "7") == 0);
    send_event(sv[1], 2, LIFECYCLE_EVENT_DID_BECOME_ACTIVE, 0, -1, -1, NULL, 0);
    lifecycle_dispatch(app);
    CHECK("the data stays for the run (the same pointer)",
          lifecycle_restoration_data(app, &size) == seen && size == sizeof data && got_ack(sv[1], 2));
    send_restoration(sv[1], data, sizeof data);
    lifecycle_dispatch(app);
    CHECK("the same data sent again keeps the pointer", lifecycle_restoration_data(app, &size) == seen);
    send_restoration(sv[1], "other", 5);
    lifecycle_dispatch(app);
    const char *other = lifecycle_restoration_data(app, &size);
    CHECK("other data replaces it", other && size == 5 && strcmp(other, "other") == 0 && got_nothing(sv[1]));

    /* Saving: from a callback and outside one, empty to forget, the limit. */
    r.save_on = "didEnterBackground";
    send_event(sv[1], 3, LIFECYCLE_EVENT_DID_ENTER_BACKGROUND, 0, -1, -1, NULL, 0);
    lifecycle_dispatch(app);
    CHECK("saved from didEnterBackground: saveRestoration \"saved\", before the acknowledgement",
          r.save_rc == 0 && got_save(sv[1], "saved", 5) && got_ack(sv[1], 3) && got_nothing(sv[1]));
    CHECK("saved outside a callback: binary data as it is",
          lifecycle_save_restoration(app, data, sizeof data) == 0 && got_save(sv[1], data, sizeof data));
    CHECK("size 0 (data NULL): forget what was kept",
          lifecycle_save_restoration(app, NULL, 0) == 0 && got_save(sv[1], NULL, 0) && got_nothing(sv[1]));
    static uint8_t most[LIFECYCLE_MAX_RESTORATION + 1];
    for (size_t i = 0; i < sizeof most; i++) most[i] = (uint8_t)(i * 13);
    CHECK("65536 bytes are saved whole (one 65548-byte datagram)",
          lifecycle_save_restoration(app, most, LIFECYCLE_MAX_RESTORATION) == 0 &&
              got_save(sv[1], most, LIFECYCLE_MAX_RESTORATION));
    errno = 0;
    CHECK("65537 bytes: -1 with EMSGSIZE, nothing sent",
          lifecycle_save_restoration(app, most, sizeof most) == -1 && errno == EMSGSIZE && got_nothing(sv[1]));
    CHECK("...lifecycle_last_error and lifecycle_strerror say why",
          strstr(lifecycle_last_error(app), "65537 bytes") && strstr(lifecycle_strerror(EMSGSIZE), "65536"));
    CHECK("...and the channel still works", lifecycle_fd(app) == sv[0] && lifecycle_dispatch(app) == LIFECYCLE_OK);
    CHECK("NULL data with a size: EINVAL", lifecycle_save_restoration(app, NULL, 3) == -1 && errno == EINVAL &&
                                               lifecycle_save_restoration(NULL, "x", 1) == -1 && errno == EINVAL);
    lifecycle_close(app);
    close(sv[1]);

    /* The largest restoration over the socket; queued while a task reply is awaited. */
    app = connected(sv, &r, &callbacks);
    send_restoration(sv[1], most, LIFECYCLE_MAX_RESTORATION);
    send_reply(sv[1], 1, 5, -1);
    uint32_t task = lifecycle_begin_background_task(app, "x", NULL, NULL);
    CHECK("a restoration that arrives while a task reply is awaited is kept for dispatch",
          task == 5 && lifecycle_pending(app) == 1 && lifecycle_restoration_data(app, NULL) == NULL);
    CHECK("...and dispatch takes all 65536 bytes",
          lifecycle_dispatch(app) == LIFECYCLE_OK && lifecycle_restoration_data(app, &size) && size == 65536 &&
              memcmp(lifecycle_restoration_data(app, NULL), most, 65536) == 0);
    lifecycle_close(app);
    close(sv[1]);

    /* A restoration with a bad length on the socket: a channel error. */
    app = connected(sv, &r, &callbacks);
    const struct vector *v = vec("reject.daemon.restoration-truncated");
    send_raw(sv[1], v->bytes, v->size);
    CHECK("a truncated restoration: EPROTO, the decoder's words",
          lifecycle_dispatch(app) == -1 && errno == EPROTO &&
              strcmp(lifecycle_last_error(app),
                     "protocol violation by the daemon: truncated: restoration data needs 4 bytes at offset 12, 3 left") == 0);
    CHECK("...and saving then fails with it", lifecycle_save_restoration(app, "x", 1) == -1 && errno == EPROTO);
    lifecycle_close(app);
    close(sv[1]);

    /* Standalone: nowhere to save, nothing handed over. */
    app = lifecycle_standalone(&callbacks, sizeof callbacks, &r);
    CHECK("standalone: saving does nothing and succeeds; no restoration data",
          lifecycle_save_restoration(app, "x", 1) == 0 && lifecycle_restoration_data(app, NULL) == NULL &&
              lifecycle_save_restoration(app, most, sizeof most) == -1 && errno == EMSGSIZE);
    lifecycle_close(app);
}

/* MARK: - Scenes */

/* What the scene callbacks saw. */
struct scene_rec {
    char log[4096];     /* "EVENT NAME DISPLAY STATE new|restored; ", one per scene callback */
    const lifecycle_scene *scene;   /* the last scene handed to a callback */
    int event_scene_same;           /* lifecycle_event_scene() was that scene */
    lifecycle_event current_seen;
    lifecycle_app_state app_state_seen;
    size_t count_seen;              /* lifecycle_scene_count() inside the callback */
    int found_seen;                 /* lifecycle_find_scene() of the scene's name found it */
    size_t discard_count;
    char discarded[512];            /* the discarded names, joined with '|' */
    lifecycle_event defer_on;
    lifecycle_token token;
    char any_log[1024];             /* any_event: "EVENT SCENE-OR-(none) scenes=OPTION; " */
};

static const char *scene_state_word(lifecycle_scene_state s) {
    switch (s) {
    case LIFECYCLE_SCENE_UNATTACHED: return "unattached";
    case LIFECYCLE_SCENE_BACKGROUND: return "background";
    case LIFECYCLE_SCENE_INACTIVE: return "inactive";
    case LIFECYCLE_SCENE_ACTIVE: return "active";
    }
    return "?";
}

static void on_scene(lifecycle_app *app, const lifecycle_scene *scene, void *user) {
    struct scene_rec *r = user;
    lifecycle_event e = lifecycle_current_event(app);
    char line[256];
    snprintf(line, sizeof line, "%s %s %s %s %s; ", lifecycle_event_name(e), lifecycle_scene_name(scene),
             lifecycle_scene_display(scene), scene_state_word(lifecycle_scene_get_state(scene)),
             lifecycle_scene_restored(scene) ? "restored" : "new");
    strcat(r->log, line);
    r->scene = scene;
    r->event_scene_same = lifecycle_event_scene(app) == scene;
    r->current_seen = e;
    r->app_state_seen = lifecycle_state(app);
    r->count_seen = lifecycle_scene_count(app);
    r->found_seen = lifecycle_find_scene(app, lifecycle_scene_name(scene)) == scene;
    if (e == r->defer_on) r->token = lifecycle_defer(app);
}

static void on_discard(lifecycle_app *app, const char *const *scenes, size_t count, void *user) {
    struct scene_rec *r = user;
    r->discard_count = count;
    r->discarded[0] = 0;
    for (size_t i = 0; i < count; i++) {
        if (i) strcat(r->discarded, "|");
        strcat(r->discarded, scenes[i]);
    }
    r->current_seen = lifecycle_current_event(app);
    r->event_scene_same = lifecycle_event_scene(app) == NULL;
}

static void on_any_scene_event(lifecycle_app *app, lifecycle_event e, void *user) {
    struct scene_rec *r = user;
    const lifecycle_scene *scene = lifecycle_event_scene(app);
    const char *scenes = lifecycle_event_option(app, "scenes");
    char line[256];
    snprintf(line, sizeof line, "%s %s%s%s; ", lifecycle_event_name(e), scene ? lifecycle_scene_name(scene) : "(none)",
             scenes ? " scenes=" : "", scenes ? scenes : "");
    strcat(r->any_log, line);
}

static lifecycle_callbacks scene_callbacks(void) {
    lifecycle_callbacks cb = {0};
    cb.scene_will_connect = on_scene;
    cb.scene_will_enter_foreground = on_scene;
    cb.scene_did_become_active = on_scene;
    cb.scene_will_resign_active = on_scene;
    cb.scene_did_enter_background = on_scene;
    cb.scene_did_disconnect = on_scene;
    cb.did_discard_scene_sessions = on_discard;
    return cb;
}

/* Sends a scene event: scene NAME on DISPLAY (NULL: no display option), and
 * for sceneWillConnect the session ("new", "restored", or NULL: none). */
static void send_scene(int fd, uint32_t seq, lifecycle_event e, const char *name, const char *display,
                       const char *session) {
    const char *opts[6];
    uint16_t n = 0;
    opts[2 * n] = "scene", opts[2 * n + 1] = name, n++;
    if (display) opts[2 * n] = "display", opts[2 * n + 1] = display, n++;
    if (session) opts[2 * n] = "session", opts[2 * n + 1] = session, n++;
    send_event(fd, seq, e, 0, lifecycle_now() + 5000000000, -1, opts, n);
}

/* The app's connected scenes, by name in table order: "nav media ". */
static const char *scene_table(lifecycle_app *app) {
    static char names[4096];
    names[0] = 0;
    for (size_t i = 0; i < lifecycle_scene_count(app); i++) {
        strcat(names, lifecycle_scene_name(lifecycle_scene_at(app, i)));
        strcat(names, " ");
    }
    return names;
}

/* A scene event the app must refuse: EPROTO with `error`, no callback,
 * nothing acknowledged, the channel closed. */
static int refused_scene_event(const char *const *options, uint16_t count, lifecycle_event e, const char *error) {
    int sv[2];
    struct scene_rec r;
    memset(&r, 0, sizeof r);
    lifecycle_callbacks cb = scene_callbacks();
    socket_pair(sv);
    lifecycle_app *app = lifecycle_connect_fd(sv[0], &cb, sizeof cb, &r);
    send_event(sv[1], 1, e, 0, -1, -1, options, count);
    int ok = lifecycle_dispatch(app) == -1 && errno == EPROTO && strcmp(lifecycle_last_error(app), error) == 0 &&
             r.log[0] == 0 && r.discard_count == 0 && got_eof(sv[1]) && lifecycle_scene_count(app) == 0;
    if (!ok) printf("        got: %s\n", lifecycle_last_error(app));
    lifecycle_close(app);
    close(sv[1]);
    return ok;
}

static void test_scenes(void) {
    int sv[2];
    struct scene_rec r;
    memset(&r, 0, sizeof r);
    lifecycle_callbacks cb = scene_callbacks();
    socket_pair(sv);
    lifecycle_app *app = lifecycle_connect_fd(sv[0], &cb, sizeof cb, &r);
    CHECK("no scenes before any scene event",
          lifecycle_scene_count(app) == 0 && lifecycle_scene_at(app, 0) == NULL && errno == EINVAL &&
              lifecycle_event_scene(app) == NULL && lifecycle_find_scene(app, "nav") == NULL);

    /* The golden sceneWillConnect, as it comes on the socket. */
    const struct vector *v = vec("daemon.scene-will-connect");
    send_raw(sv[1], v->bytes, v->size);
    CHECK("sceneWillConnect (the golden vector) reaches scene_will_connect: nav on centre, background, new",
          lifecycle_dispatch(app) == LIFECYCLE_OK && strcmp(r.log, "sceneWillConnect nav centre background new; ") == 0);
    CHECK("...with the scene as lifecycle_event_scene(), current event sceneWillConnect, in the table",
          r.event_scene_same && r.current_seen == LIFECYCLE_EVENT_SCENE_WILL_CONNECT && r.count_seen == 1 &&
              r.found_seen);
    CHECK("...acknowledged once its callback returned", got_ack(sv[1], 30) && got_nothing(sv[1]));
    const lifecycle_scene *nav = r.scene;
    CHECK("the scene stays in the table, the same handle, after the acknowledgement",
          lifecycle_scene_count(app) == 1 && lifecycle_scene_at(app, 0) == nav &&
              lifecycle_find_scene(app, "nav") == nav && lifecycle_event_scene(app) == NULL);
    CHECK("scene events leave the app's own state alone", lifecycle_state(app) == LIFECYCLE_STATE_INACTIVE);

    /* A full sequence, app-level events in between as the daemon orders them. */
    r.log[0] = 0;
    send_event(sv[1], 32, LIFECYCLE_EVENT_WILL_ENTER_FOREGROUND, 0, -1, -1, NULL, 0);
    send_scene(sv[1], 33, LIFECYCLE_EVENT_SCENE_WILL_ENTER_FOREGROUND, "nav", "centre", NULL);
    send_event(sv[1], 34, LIFECYCLE_EVENT_DID_BECOME_ACTIVE, 0, -1, -1, NULL, 0);
    send_scene(sv[1], 35, LIFECYCLE_EVENT_SCENE_DID_BECOME_ACTIVE, "nav", "centre", NULL);
    lifecycle_dispatch(app);
    CHECK("sceneWillEnterForeground: inactive; sceneDidBecomeActive: active",
          strcmp(r.log, "sceneWillEnterForeground nav centre inactive new; sceneDidBecomeActive nav centre active new; ") == 0);
    CHECK("...the app-level events went on as ever (the app is active), each acknowledged in order",
          r.app_state_seen == LIFECYCLE_STATE_ACTIVE && got_ack(sv[1], 32) && got_ack(sv[1], 33) &&
              got_ack(sv[1], 34) && got_ack(sv[1], 35) && got_nothing(sv[1]));
    CHECK("...and the handle shows the state between events", lifecycle_scene_get_state(nav) == LIFECYCLE_SCENE_ACTIVE);

    r.log[0] = 0;
    send_scene(sv[1], 36, LIFECYCLE_EVENT_SCENE_WILL_CONNECT, "media", "side", "restored");
    lifecycle_dispatch(app);
    const lifecycle_scene *media = r.scene;
    CHECK("a second scene, its session restored: background, restored",
          strcmp(r.log, "sceneWillConnect media side background restored; ") == 0 && r.count_seen == 2 &&
              lifecycle_scene_restored(media) == 1 && lifecycle_scene_restored(nav) == 0 && got_ack(sv[1], 36));
    CHECK("the table lists both, in the order first heard of",
          strcmp(scene_table(app), "nav media ") == 0 && lifecycle_find_scene(app, "media") == media);

    r.log[0] = 0;
    send_scene(sv[1], 37, LIFECYCLE_EVENT_SCENE_WILL_RESIGN_ACTIVE, "nav", "centre", NULL);
    send_scene(sv[1], 38, LIFECYCLE_EVENT_SCENE_DID_ENTER_BACKGROUND, "nav", "centre", NULL);
    send_event(sv[1], 39, LIFECYCLE_EVENT_WILL_RESIGN_ACTIVE, 0, -1, -1, NULL, 0);
    send_event(sv[1], 40, LIFECYCLE_EVENT_DID_ENTER_BACKGROUND, 0, -1, -1, NULL, 0);
    lifecycle_dispatch(app);
    CHECK("sceneWillResignActive: inactive; sceneDidEnterBackground: background",
          strcmp(r.log, "sceneWillResignActive nav centre inactive new; sceneDidEnterBackground nav centre background new; ") == 0 &&
              got_ack(sv[1], 37) && got_ack(sv[1], 38) && got_ack(sv[1], 39) && got_ack(sv[1], 40));

    r.log[0] = 0;
    send_scene(sv[1], 41, LIFECYCLE_EVENT_SCENE_DID_DISCONNECT, "nav", "centre", NULL);
    lifecycle_dispatch(app);
    CHECK("sceneDidDisconnect: unattached, still in the table during its callback",
          strcmp(r.log, "sceneDidDisconnect nav centre unattached new; ") == 0 && r.scene == nav && r.count_seen == 2 &&
              r.found_seen && got_ack(sv[1], 41));
    CHECK("...then forgotten: the later scenes move down, their handles unchanged",
          lifecycle_scene_count(app) == 1 && lifecycle_scene_at(app, 0) == media &&
              lifecycle_find_scene(app, "nav") == NULL && lifecycle_scene_get_state(media) == LIFECYCLE_SCENE_BACKGROUND &&
              strcmp(lifecycle_scene_display(media), "side") == 0);

    /* The same scene connected again: a new handle, a restored session. */
    r.log[0] = 0;
    send_scene(sv[1], 42, LIFECYCLE_EVENT_SCENE_WILL_CONNECT, "nav", "centre", "restored");
    lifecycle_dispatch(app);
    CHECK("a scene connected again comes after the others, restored",
          strcmp(r.log, "sceneWillConnect nav centre background restored; ") == 0 &&
              strcmp(scene_table(app), "media nav ") == 0 && got_ack(sv[1], 42));

    /* sceneWillConnect without `session`, or an unknown one: new. Another
     * display moves the scene; an event without `display` keeps it. */
    r.log[0] = 0;
    send_scene(sv[1], 43, LIFECYCLE_EVENT_SCENE_WILL_CONNECT, "media", "left", NULL);
    send_scene(sv[1], 44, LIFECYCLE_EVENT_SCENE_WILL_ENTER_FOREGROUND, "media", NULL, NULL);
    send_scene(sv[1], 45, LIFECYCLE_EVENT_SCENE_WILL_CONNECT, "extra", NULL, "later");
    lifecycle_dispatch(app);
    CHECK("no session option (or an unknown one) is a new session; an event without display keeps the last one; "
          "a scene never told its display has \"\"",
          strcmp(r.log, "sceneWillConnect media left background new; sceneWillEnterForeground media left inactive new; "
                        "sceneWillConnect extra  background new; ") == 0 &&
              lifecycle_scene_at(app, 0) == media && got_ack(sv[1], 43) && got_ack(sv[1], 44) && got_ack(sv[1], 45));

    /* A scene heard of without sceneWillConnect (a resumed channel): created. */
    r.log[0] = 0;
    send_scene(sv[1], 46, LIFECYCLE_EVENT_SCENE_DID_BECOME_ACTIVE, "late", "centre", NULL);
    lifecycle_dispatch(app);
    CHECK("a scene event for a scene never connected creates it: active, new",
          strcmp(r.log, "sceneDidBecomeActive late centre active new; ") == 0 &&
              strcmp(scene_table(app), "media nav extra late ") == 0 && got_ack(sv[1], 46));

    /* didDiscardSceneSessions: one name, three names. */
    const char *one[] = {"scenes", "gone"};
    send_event(sv[1], 47, LIFECYCLE_EVENT_DID_DISCARD_SCENE_SESSIONS, 0, -1, -1, one, 1);
    lifecycle_dispatch(app);
    CHECK("didDiscardSceneSessions with one name: [gone], no scene of its own",
          r.discard_count == 1 && strcmp(r.discarded, "gone") == 0 && r.event_scene_same &&
              r.current_seen == LIFECYCLE_EVENT_DID_DISCARD_SCENE_SESSIONS && got_ack(sv[1], 47));
    const char *three[] = {"scenes", "a,b.c,D_e-9"};
    send_event(sv[1], 48, LIFECYCLE_EVENT_DID_DISCARD_SCENE_SESSIONS, 0, -1, -1, three, 1);
    lifecycle_dispatch(app);
    CHECK("didDiscardSceneSessions with three names: [a, b.c, D_e-9]",
          r.discard_count == 3 && strcmp(r.discarded, "a|b.c|D_e-9") == 0 && got_ack(sv[1], 48));
    CHECK("...it leaves the table alone", strcmp(scene_table(app), "media nav extra late ") == 0);

    /* openURL to a scene app names its scene. */
    const char *url_in_media[] = {"url", "myapp://x", "scene", "media"};
    const char *url_elsewhere[] = {"url", "myapp://y", "scene", "nowhere"};
    lifecycle_close(app);
    close(sv[1]);

    /* any_event: scene events without callbacks of their own, the scene through lifecycle_event_scene(). */
    lifecycle_callbacks any = {0};
    any.any_event = on_any_scene_event;
    memset(&r, 0, sizeof r);
    socket_pair(sv);
    app = lifecycle_connect_fd(sv[0], &any, sizeof any, &r);
    send_scene(sv[1], 1, LIFECYCLE_EVENT_SCENE_WILL_CONNECT, "nav", "centre", "new");
    send_event(sv[1], 2, LIFECYCLE_EVENT_OPEN_URL, 0, -1, -1, url_in_media, 2);
    send_scene(sv[1], 3, LIFECYCLE_EVENT_SCENE_WILL_CONNECT, "media", "centre", "new");
    send_event(sv[1], 4, LIFECYCLE_EVENT_OPEN_URL, 0, -1, -1, url_in_media, 2);
    send_event(sv[1], 5, LIFECYCLE_EVENT_OPEN_URL, 0, -1, -1, url_elsewhere, 2);
    send_event(sv[1], 6, LIFECYCLE_EVENT_DID_DISCARD_SCENE_SESSIONS, 0, -1, -1, three, 1);
    send_scene(sv[1], 7, LIFECYCLE_EVENT_SCENE_DID_DISCONNECT, "nav", "centre", NULL);
    lifecycle_dispatch(app);
    CHECK("any_event gets the scene events, each with its scene; openURL with the connected scene it names",
          strcmp(r.any_log, "sceneWillConnect nav; openURL (none); sceneWillConnect media; openURL media; "
                            "openURL (none); didDiscardSceneSessions (none) scenes=a,b.c,D_e-9; "
                            "sceneDidDisconnect nav; ") == 0);
    CHECK("...each acknowledged, and the table kept as with callbacks",
          got_ack(sv[1], 1) && got_ack(sv[1], 2) && got_ack(sv[1], 3) && got_ack(sv[1], 4) && got_ack(sv[1], 5) &&
              got_ack(sv[1], 6) && got_ack(sv[1], 7) && got_nothing(sv[1]) && strcmp(scene_table(app), "media ") == 0);
    lifecycle_close(app);
    close(sv[1]);

    /* The golden didDiscardSceneSessions, as it comes on the socket. */
    memset(&r, 0, sizeof r);
    socket_pair(sv);
    app = lifecycle_connect_fd(sv[0], &cb, sizeof cb, &r);
    v = vec("daemon.discard-scenes");
    send_raw(sv[1], v->bytes, v->size);
    lifecycle_dispatch(app);
    CHECK("the golden didDiscardSceneSessions reaches did_discard_scene_sessions: [nav, media]",
          r.discard_count == 2 && strcmp(r.discarded, "nav|media") == 0 && got_ack(sv[1], 31) && got_nothing(sv[1]));
    lifecycle_close(app);
    close(sv[1]);

    /* A deferred sceneDidDisconnect: the scene stays until the acknowledgement. */
    memset(&r, 0, sizeof r);
    socket_pair(sv);
    app = lifecycle_connect_fd(sv[0], &cb, sizeof cb, &r);
    send_scene(sv[1], 1, LIFECYCLE_EVENT_SCENE_WILL_CONNECT, "nav", "centre", "new");
    lifecycle_dispatch(app);
    r.defer_on = LIFECYCLE_EVENT_SCENE_DID_DISCONNECT;
    send_scene(sv[1], 2, LIFECYCLE_EVENT_SCENE_DID_DISCONNECT, "nav", "centre", NULL);
    lifecycle_dispatch(app);
    nav = r.scene;
    CHECK("a deferred sceneDidDisconnect: its scene is still there, unattached, and still the event's",
          r.token && got_ack(sv[1], 1) && got_nothing(sv[1]) && lifecycle_scene_count(app) == 1 &&
              lifecycle_event_scene(app) == nav && strcmp(lifecycle_scene_name(nav), "nav") == 0 &&
              lifecycle_scene_get_state(nav) == LIFECYCLE_SCENE_UNATTACHED);
    CHECK("...forgotten when it is acknowledged",
          lifecycle_acknowledge(app, r.token) == LIFECYCLE_OK && got_ack(sv[1], 2) && lifecycle_scene_count(app) == 0 &&
              lifecycle_event_scene(app) == NULL && lifecycle_find_scene(app, "nav") == NULL);
    lifecycle_close(app);
    close(sv[1]);

    /* No callbacks at all: scene events are just acknowledged (and tracked). */
    socket_pair(sv);
    app = lifecycle_connect_fd(sv[0], NULL, 0, NULL);
    send_scene(sv[1], 1, LIFECYCLE_EVENT_SCENE_WILL_CONNECT, "nav", "centre", "new");
    send_event(sv[1], 2, LIFECYCLE_EVENT_DID_DISCARD_SCENE_SESSIONS, 0, -1, -1, one, 1);
    CHECK("without callbacks scene events are acknowledged",
          lifecycle_dispatch(app) == LIFECYCLE_OK && got_ack(sv[1], 1) && got_ack(sv[1], 2) &&
              lifecycle_scene_count(app) == 1);
    lifecycle_close(app);
    close(sv[1]);

    /* Apps built against 1.1 and 1.0 pass a smaller struct: the scene
     * members are not read; any_event gets the scene events. */
    size_t sizes[] = {offsetof(lifecycle_callbacks, scene_will_connect), offsetof(lifecycle_callbacks, perform_fetch)};
    for (size_t i = 0; i < 2; i++) {
        lifecycle_callbacks old = scene_callbacks(); /* set, but beyond the size given */
        old.any_event = on_any_scene_event;
        memset(&r, 0, sizeof r);
        socket_pair(sv);
        app = lifecycle_connect_fd(sv[0], &old, sizes[i], &r);
        send_scene(sv[1], 1, LIFECYCLE_EVENT_SCENE_WILL_CONNECT, "nav", "centre", "new");
        send_scene(sv[1], 2, LIFECYCLE_EVENT_SCENE_DID_BECOME_ACTIVE, "nav", "centre", NULL);
        send_event(sv[1], 3, LIFECYCLE_EVENT_DID_DISCARD_SCENE_SESSIONS, 0, -1, -1, one, 1);
        lifecycle_dispatch(app);
        char name[160];
        snprintf(name, sizeof name, "a %s-sized callbacks struct: accepted, any_event gets the scene events",
                 i == 0 ? "1.1" : "1.0");
        CHECK(name, app && r.log[0] == 0 && r.discard_count == 0 &&
                        strcmp(r.any_log, "sceneWillConnect nav; sceneDidBecomeActive nav; "
                                          "didDiscardSceneSessions (none) scenes=gone; ") == 0 &&
                        got_ack(sv[1], 1) && got_ack(sv[1], 2) && got_ack(sv[1], 3) && got_nothing(sv[1]));
        lifecycle_close(app);
        close(sv[1]);
    }

    /* Scene events the app cannot use: channel errors, in words like the decoder's. */
    const char *no_scene[] = {"display", "centre"};
    CHECK("a scene event without the option scene: EPROTO, no callback, channel closed",
          refused_scene_event(no_scene, 1, LIFECYCLE_EVENT_SCENE_DID_BECOME_ACTIVE,
                              "protocol violation by the daemon: sceneDidBecomeActive: option scene missing"));
    CHECK("a sceneWillConnect without any options: EPROTO",
          refused_scene_event(NULL, 0, LIFECYCLE_EVENT_SCENE_WILL_CONNECT,
                              "protocol violation by the daemon: sceneWillConnect: option scene missing"));
    char long_name[80];
    memset(long_name, 'a', 65);
    long_name[65] = 0;
    const char *bad_names[] = {"", "two words", "nav,media", "caf\xc3\xa9", "a/b", long_name};
    int all = 1;
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
        const char *opts[] = {"scene", bad_names[i], "display", "centre"};
        all &= refused_scene_event(opts, 2, LIFECYCLE_EVENT_SCENE_WILL_ENTER_FOREGROUND,
                                   "protocol violation by the daemon: sceneWillEnterForeground: option scene: not a "
                                   "scene name (1 to 64 of A-Z a-z 0-9 . _ -)");
    }
    CHECK("invalid scene names (empty, a space, a comma, not ASCII, a slash, 65 bytes): EPROTO", all);
    /* A name with a NUL byte in it is not "nav" cut short. */
    memset(&r, 0, sizeof r);
    socket_pair(sv);
    app = lifecycle_connect_fd(sv[0], &cb, sizeof cb, &r);
    const char *nul_opts[] = {"scene", "navXx"};
    static uint8_t nul_event[LC_WIRE_MAX_MESSAGE];
    size_t nul_size = lifecycle__encode_event(nul_event, 1, LIFECYCLE_EVENT_SCENE_WILL_CONNECT, 0, -1, -1, nul_opts, 1);
    nul_event[nul_size - 2] = 0; /* "nav\0x" */
    send_raw(sv[1], nul_event, nul_size);
    CHECK("a scene name with a NUL byte in it: EPROTO, not a scene \"nav\"",
          lifecycle_dispatch(app) == -1 && errno == EPROTO && strstr(lifecycle_last_error(app), "not a scene name") &&
              r.log[0] == 0 && lifecycle_scene_count(app) == 0);
    lifecycle_close(app);
    close(sv[1]);
    memset(long_name, 'a', 64);
    long_name[64] = 0;
    memset(&r, 0, sizeof r);
    socket_pair(sv);
    app = lifecycle_connect_fd(sv[0], &cb, sizeof cb, &r);
    send_scene(sv[1], 1, LIFECYCLE_EVENT_SCENE_WILL_CONNECT, long_name, "centre", "new");
    send_scene(sv[1], 2, LIFECYCLE_EVENT_SCENE_WILL_CONNECT, "A-Z_a.z-0_9", "centre", "new");
    CHECK("a 64-byte name and every allowed character are fine",
          lifecycle_dispatch(app) == LIFECYCLE_OK && got_ack(sv[1], 1) && got_ack(sv[1], 2) &&
              lifecycle_find_scene(app, long_name) && lifecycle_find_scene(app, "A-Z_a.z-0_9"));
    lifecycle_close(app);
    close(sv[1]);
    const char *no_list[] = {"scene", "nav"};
    CHECK("didDiscardSceneSessions without the option scenes: EPROTO",
          refused_scene_event(no_list, 1, LIFECYCLE_EVENT_DID_DISCARD_SCENE_SESSIONS,
                              "protocol violation by the daemon: didDiscardSceneSessions: option scenes missing"));
    const char *bad_lists[] = {"", "nav,", ",nav", "nav,,media", "nav media"};
    all = 1;
    for (size_t i = 0; i < sizeof bad_lists / sizeof bad_lists[0]; i++) {
        const char *opts[] = {"scenes", bad_lists[i]};
        all &= refused_scene_event(opts, 1, LIFECYCLE_EVENT_DID_DISCARD_SCENE_SESSIONS,
                                   "protocol violation by the daemon: didDiscardSceneSessions: option scenes: not "
                                   "scene names separated by commas (1 to 64 of A-Z a-z 0-9 . _ -)");
    }
    CHECK("didDiscardSceneSessions with an empty list or an empty name: EPROTO", all);

    /* The table's limit: 64 scenes; a 65th is a channel error. */
    memset(&r, 0, sizeof r);
    socket_pair(sv);
    app = lifecycle_connect_fd(sv[0], &cb, sizeof cb, &r);
    int acks = 1;
    for (uint32_t i = 0; i < LIFECYCLE_MAX_SCENES; i++) {
        char name[16];
        snprintf(name, sizeof name, "s%u", (unsigned)i);
        send_scene(sv[1], i + 1, LIFECYCLE_EVENT_SCENE_WILL_CONNECT, name, "centre", "new");
        if (lifecycle_dispatch(app) != LIFECYCLE_OK || !got_ack(sv[1], i + 1)) acks = 0;
    }
    CHECK("64 scenes connect", acks && lifecycle_scene_count(app) == 64 && LIFECYCLE_MAX_SCENES == 64);
    send_scene(sv[1], 65, LIFECYCLE_EVENT_SCENE_DID_BECOME_ACTIVE, "s63", "centre", NULL);
    send_scene(sv[1], 66, LIFECYCLE_EVENT_SCENE_DID_DISCONNECT, "s0", "centre", NULL);
    send_scene(sv[1], 67, LIFECYCLE_EVENT_SCENE_WILL_CONNECT, "s64", "centre", "new");
    CHECK("with 64 connected: events of known scenes are fine, and one disconnected makes room",
          lifecycle_dispatch(app) == LIFECYCLE_OK && got_ack(sv[1], 65) && got_ack(sv[1], 66) && got_ack(sv[1], 67) &&
              lifecycle_scene_count(app) == 64 && lifecycle_find_scene(app, "s0") == NULL &&
              lifecycle_scene_at(app, 63) == lifecycle_find_scene(app, "s64"));
    r.log[0] = 0;
    send_scene(sv[1], 68, LIFECYCLE_EVENT_SCENE_WILL_CONNECT, "s65", "centre", "new");
    CHECK("a 65th scene: EPROTO \"sceneWillConnect: 65 scenes connected, more than 64\", no callback, channel closed",
          lifecycle_dispatch(app) == -1 && errno == EPROTO &&
              strcmp(lifecycle_last_error(app),
                     "protocol violation by the daemon: sceneWillConnect: 65 scenes connected, more than 64") == 0 &&
              r.log[0] == 0 && got_eof(sv[1]));
    CHECK("...the scenes it had stay readable until lifecycle_close()",
          lifecycle_scene_count(app) == 64 && strcmp(lifecycle_scene_name(lifecycle_scene_at(app, 0)), "s1") == 0);
    lifecycle_close(app);
    close(sv[1]);

    /* NULL handles and apps are refused, not crashed on; standalone apps have no scenes. */
    CHECK("NULL scenes and apps are refused, not crashed on",
          lifecycle_scene_name(NULL) == NULL && lifecycle_scene_display(NULL) == NULL &&
              lifecycle_scene_get_state(NULL) == LIFECYCLE_SCENE_UNATTACHED && lifecycle_scene_restored(NULL) == 0 &&
              lifecycle_scene_count(NULL) == 0 && lifecycle_scene_at(NULL, 0) == NULL &&
              lifecycle_event_scene(NULL) == NULL && lifecycle_find_scene(NULL, "nav") == NULL);
    CHECK("the scene states compare from least to most active",
          LIFECYCLE_SCENE_UNATTACHED < LIFECYCLE_SCENE_BACKGROUND && LIFECYCLE_SCENE_BACKGROUND < LIFECYCLE_SCENE_INACTIVE &&
              LIFECYCLE_SCENE_INACTIVE < LIFECYCLE_SCENE_ACTIVE);
}

/* MARK: - Malformed messages on the socket */

static void test_malformed(void) {
    int sv[2];
    struct rec r;
    const struct vector *ev = vec("daemon.event");
    int all = 1;
    for (size_t n = 1; n < ev->size; n++) {
        lifecycle_app *app = connected(sv, &r, &callbacks);
        send_raw(sv[1], ev->bytes, n);
        if (lifecycle_dispatch(app) != -1 || errno != EPROTO || r.log[0] || !got_eof(sv[1]) ||
            !strstr(lifecycle_last_error(app), "truncated"))
            all = 0;
        lifecycle_close(app);
        close(sv[1]);
    }
    CHECK("every truncation of an event on the socket: EPROTO, no callback, channel closed", all);

    struct { const char *what; uint8_t patch_at; uint8_t value; int extra; const char *error; } cases[] = {
        {"a trailing byte", 0, 0, 1, "1 unexpected trailing bytes"},
        {"version 2", 0, 2, 0, "unsupported protocol version 2"},
        {"unknown type 0x7f", 1, 0x7f, 0, "unknown message type 0x7f"},
        {"an app-to-daemon type", 1, 0x81, 0, "is sent by apps"},
        {"flags", 2, 1, 0, "unknown flags 0x1"},
        {"unknown event 20", 8, 20, 0, "unknown event 20"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lifecycle_app *app = connected(sv, &r, &callbacks);
        uint8_t b[64];
        memcpy(b, ev->bytes, ev->size);
        if (!cases[i].extra) b[cases[i].patch_at] = cases[i].value;
        else b[ev->size] = 0;
        send_raw(sv[1], b, ev->size + (size_t)cases[i].extra);
        char name[160];
        snprintf(name, sizeof name, "an event with %s on the socket: EPROTO (\"%s\"), channel closed", cases[i].what,
                 cases[i].error);
        CHECK(name, lifecycle_dispatch(app) == -1 && errno == EPROTO && strstr(lifecycle_last_error(app), cases[i].error) &&
                        r.log[0] == 0 && got_eof(sv[1]));
        lifecycle_close(app);
        close(sv[1]);
    }

    lifecycle_app *app = connected(sv, &r, &callbacks);
    static uint8_t big[LC_WIRE_MAX_MESSAGE + 1];
    memcpy(big, ev->bytes, ev->size);
    send_raw(sv[1], big, sizeof big);
    CHECK("a 66561-byte datagram: EPROTO, \"message of 66561 bytes exceeds 66560\"",
          lifecycle_dispatch(app) == -1 && errno == EPROTO && strstr(lifecycle_last_error(app), "message of 66561 bytes exceeds 66560"));
    CHECK("after a channel error every call fails with the same errno",
          lifecycle_dispatch(app) == -1 && errno == EPROTO && lifecycle_run(app) == -1 && errno == EPROTO &&
              lifecycle_end_background_task(app, 3) == -1 && errno == EPROTO);
    CHECK("lifecycle_strerror(EPROTO) names the violation", strstr(lifecycle_strerror(EPROTO), "protocol") != NULL);
    lifecycle_close(app);
    close(sv[1]);

    app = connected(sv, &r, &callbacks);
    send_event(sv[1], 1, LIFECYCLE_EVENT_DID_BECOME_ACTIVE, 0, -1, -1, NULL, 0);
    close(sv[1]);
    CHECK("an event then a closed channel: the event is handled, then ECONNRESET",
          lifecycle_dispatch(app) == -1 && errno == ECONNRESET && strcmp(r.log, "didBecomeActive ") == 0);
    CHECK("lifecycle_run on it fails too", lifecycle_run(app) == -1 && errno == ECONNRESET);
    lifecycle_close(app);
}

/* MARK: - Resuming after lifecycled restarts */

static int listening_at(const char *path) {
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    int l = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 8) != 0) { perror("listen"); exit(2); }
    return l;
}

/* An app started as lifecycled starts it: the channel (sv[0]) named by
 * LIFECYCLE_FD, its name "recorder", and the resume socket `path` (NULL:
 * none, as from a daemon that cannot resume). */
static lifecycle_app *started(int sv[2], struct rec *r, const char *path) {
    char num[16];
    socket_pair(sv);
    memset(r, 0, sizeof *r);
    snprintf(num, sizeof num, "%d", sv[0]);
    setenv("LIFECYCLE_FD", num, 1);
    setenv("LIFECYCLE_APP", "recorder", 1);
    if (path) setenv("LIFECYCLE_RESUME_SOCKET", path, 1);
    else unsetenv("LIFECYCLE_RESUME_SOCKET");
    lifecycle_app *app = lifecycle_connect(&callbacks, sizeof callbacks, r);
    if (!app) { perror("lifecycle_connect"); exit(2); }
    unsetenv("LIFECYCLE_APP");
    lifecycle__set_resume_wait(app, 10000); /* a test that goes wrong fails in 10 s, not 60 */
    return app;
}

enum restart {
    ANSWER,      /* answers resumed */
    CLOSE_FIRST, /* closes the first connection without answering (still starting), answers the second */
    EVENT_FIRST, /* sends an event before resumed */
};

/* A restarted lifecycled, in a child process that keeps only `listener`,
 * `handover` and `old` (the old channel's daemon end, or -1). With `old`, it
 * first reads the app's beginBackgroundTask there and closes it without an
 * answer (the daemon dies). Then it accepts the app on `listener`, reads its
 * resume, answers as `how` says, and hands the connection, with the resume's
 * bytes, to the test (SCM_RIGHTS over `handover`), which then plays the
 * daemon in-process. Exits 0 when all went as expected. */
static int restarted_daemon_child(int listener, int handover, enum restart how, int old) {
    for (int fd = 3; fd < 1024; fd++)
        if (fd != listener && fd != handover && fd != old) close(fd);
    uint8_t ready = 1;
    if (send(handover, &ready, 1, 0) != 1) return 9;
    struct lifecycle__message m;
    uint8_t b[LC_WIRE_MAX_MESSAGE];
    if (old >= 0) {
        if (take(old, &m, b, 10000) != 1 || m.type != LC_T_BEGIN_TASK) return 10;
        close(old);
    }
    for (int tries = how == CLOSE_FIRST ? 2 : 1; tries > 0; tries--) {
        struct pollfd p = {listener, POLLIN, 0};
        if (poll(&p, 1, 10000) != 1) return 11;
        int c = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) return 12;
        struct pollfd q = {c, POLLIN, 0};
        if (poll(&q, 1, 10000) != 1) return 13;
        ssize_t n = recv(c, b, sizeof b, 0);
        if (n <= 0) return 14;
        if (tries > 1) { close(c); continue; }
        if (how == EVENT_FIRST) send_event(c, 9, LIFECYCLE_EVENT_DID_BECOME_ACTIVE, 0, -1, -1, NULL, 0);
        uint8_t out[LC_WIRE_HEADER];
        size_t size = lifecycle__encode_resumed(out);
        /* (After an event first the app may have closed the connection.) */
        if (send(c, out, size, MSG_NOSIGNAL) != (ssize_t)size && how != EVENT_FIRST) return 15;
        struct iovec iov = {b, (size_t)n};
        union { struct cmsghdr align; char bytes[CMSG_SPACE(sizeof(int))]; } control;
        memset(&control, 0, sizeof control);
        struct msghdr mh;
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = control.bytes;
        mh.msg_controllen = sizeof control.bytes;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &c, sizeof c);
        return sendmsg(handover, &mh, 0) == n ? 0 : 16;
    }
    return 17;
}

/* Starts the restarted daemon; returns once it holds only its own fds. */
static pid_t restarted_daemon(int listener, int handover[2], enum restart how, int old) {
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) _exit(restarted_daemon_child(listener, handover[1], how, old));
    uint8_t ready = 0;
    struct pollfd p = {handover[0], POLLIN, 0};
    if (poll(&p, 1, 10000) != 1 || recv(handover[0], &ready, 1, 0) != 1) { printf("the restarted daemon is not ready\n"); exit(2); }
    return child;
}

/* An app that deferred didEnterBackground (sequence 1), then the break: a
 * daemon restarted (answering resumes) and the old channel closed. */
static lifecycle_app *deferring_then_break(int sv[2], struct rec *r, const char *path, int listener,
                                           int handover[2], pid_t *child) {
    lifecycle_app *app = started(sv, r, path);
    r->defer_on = LIFECYCLE_EVENT_DID_ENTER_BACKGROUND;
    send_event(sv[1], 1, LIFECYCLE_EVENT_DID_ENTER_BACKGROUND, 0, -1, -1, NULL, 0);
    lifecycle_dispatch(app);
    *child = restarted_daemon(listener, handover, ANSWER, -1);
    close(sv[1]);
    return app;
}

/* The restarted daemon's end of the resumed channel, and the resume it read
 * (decoded into *m, its bytes in b); -1 when none came. */
static int handed_over(int handover, struct lifecycle__message *m, uint8_t *b) {
    union { struct cmsghdr align; char bytes[CMSG_SPACE(sizeof(int))]; } control;
    struct iovec iov = {b, LC_WIRE_MAX_MESSAGE};
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control.bytes;
    mh.msg_controllen = sizeof control.bytes;
    struct pollfd p = {handover, POLLIN, 0};
    if (poll(&p, 1, 10000) != 1) return -1;
    ssize_t n = recvmsg(handover, &mh, 0);
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    if (n <= 0 || !cm || cm->cmsg_type != SCM_RIGHTS) return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(cm), sizeof fd);
    char why[LC_WIRE_ERROR_MAX];
    if (lifecycle__decode_app(b, (size_t)n, m, why) != 0) memset(m, 0, sizeof *m);
    return fd;
}

static int exited_well(pid_t child) {
    int status = 0;
    return waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static int lists_tasks(const struct lifecycle__message *m, uint32_t a, uint32_t b) {
    if (m->type != LC_T_RESUME || m->task_count != 2) return 0;
    uint32_t x = lifecycle__expiring_task(m, 0), y = lifecycle__expiring_task(m, 1);
    return (x == a && y == b) || (x == b && y == a);
}

static void test_resume(void) {
    char dir[] = "/tmp/lifecycle-test-XXXXXX";
    if (!mkdtemp(dir)) { perror("mkdtemp"); exit(2); }
    char path[128], nobody[128], silent_path[128];
    snprintf(path, sizeof path, "%s/apps.sock", dir);
    snprintf(nobody, sizeof nobody, "%s/nobody.sock", dir);
    snprintf(silent_path, sizeof silent_path, "%s/silent.sock", dir);
    int listener = listening_at(path);
    int handover[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, handover) != 0) exit(2);
    int sv[2];
    struct rec r;
    struct lifecycle__message m;
    uint8_t b[LC_WIRE_MAX_MESSAGE];

    /* (a) lifecycled closes the channel; the app resumes it on the same fd. */
    lifecycle_app *app = started(sv, &r, path);
    CHECK("lifecycle_connect unsets LIFECYCLE_RESUME_SOCKET with LIFECYCLE_FD",
          getenv("LIFECYCLE_RESUME_SOCKET") == NULL && getenv("LIFECYCLE_FD") == NULL);
    int fd = lifecycle_fd(app);
    send_event(sv[1], 1, LIFECYCLE_EVENT_WILL_FINISH_LAUNCHING, 0, -1, -1, NULL, 0);
    send_event(sv[1], 2, LIFECYCLE_EVENT_DID_FINISH_LAUNCHING, 0, -1, -1, NULL, 0);
    lifecycle_dispatch(app);
    send_reply(sv[1], 1, 3, -1);
    send_reply(sv[1], 2, 4, -1);
    send_reply(sv[1], 3, 5, -1);
    uint32_t t3 = lifecycle_begin_background_task(app, "a", NULL, NULL);
    uint32_t t4 = lifecycle_begin_background_task(app, "b", NULL, NULL);
    uint32_t t5 = lifecycle_begin_background_task(app, "c", NULL, NULL);
    lifecycle_end_background_task(app, t5);
    CHECK("before the restart: events 1 and 2 acknowledged, tasks 3 and 4 open, 5 ended",
          got_ack(sv[1], 1) && got_ack(sv[1], 2) && t3 == 3 && t4 == 4 && t5 == 5);
    while (take(sv[1], &m, b, -1) == 1) {}
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); /* as an app with its own loop may */
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    CHECK("epoll: adding the channel again before a resume fails with EEXIST",
          epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == -1 && errno == EEXIST);
    pid_t child = restarted_daemon(listener, handover, ANSWER, -1);
    close(sv[1]); /* lifecycled dies */
    int64_t t0 = lifecycle_now();
    int result = lifecycle_dispatch(app);
    int d = handed_over(handover[0], &m, b);
    CHECK("the daemon closes the channel: dispatch resumes it and returns LIFECYCLE_OK",
          result == LIFECYCLE_OK && d >= 0 && exited_well(child) && lifecycle_now() - t0 < 5000000000);
    CHECK("the resume names the app, the last event acknowledged (2) and the open tasks [3, 4]",
          m.type == LC_T_RESUME && m.id == 2 && str_is(m.name, "recorder") && lists_tasks(&m, 3, 4));
    CHECK("lifecycle_fd is the same number, close-on-exec, still non-blocking",
          lifecycle_fd(app) == fd && (fcntl(fd, F_GETFD) & FD_CLOEXEC) && (fcntl(fd, F_GETFL) & O_NONBLOCK));
    send_event(d, 3, LIFECYCLE_EVENT_DID_BECOME_ACTIVE, 0, -1, -1, NULL, 0);
    struct epoll_event out;
    CHECK("epoll: the resumed channel is added again (as c-library.md says), and is then readable",
          epoll_wait(ep, &out, 1, 0) == 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0 &&
              epoll_wait(ep, &out, 1, 5000) == 1 && out.data.fd == fd);
    close(ep);
    struct pollfd p = {fd, POLLIN, 0};
    CHECK("the resumed channel works: an event on it reaches its callback and is acknowledged on it",
          poll(&p, 1, 5000) == 1 && lifecycle_dispatch(app) == LIFECYCLE_OK && strstr(r.log, "didBecomeActive") &&
              got_ack(d, 3) && got_nothing(d));
    CHECK("an ended task is ended on the resumed channel", lifecycle_end_background_task(app, 4) == 0 &&
                                                            take(d, &m, b, -1) == 1 && m.type == LC_T_END_TASK && m.id == 4);
    /* lifecycled restarts again, and is still starting at the first try. */
    child = restarted_daemon(listener, handover, CLOSE_FIRST, -1);
    close(d);
    result = lifecycle_dispatch(app);
    d = handed_over(handover[0], &m, b);
    CHECK("a second restart: resumed again, after a try closed before resumed",
          result == LIFECYCLE_OK && d >= 0 && exited_well(child) && lifecycle_fd(app) == fd);
    CHECK("...the resume names event 3 and task 3 alone",
          m.type == LC_T_RESUME && m.id == 3 && m.task_count == 1 && lifecycle__expiring_task(&m, 0) == 3);
    lifecycle_close(app);
    close(d);

    /* A daemon that sends anything before resumed: a channel error. */
    app = started(sv, &r, path);
    child = restarted_daemon(listener, handover, EVENT_FIRST, -1);
    close(sv[1]);
    result = lifecycle_dispatch(app);
    int e = errno;
    d = handed_over(handover[0], &m, b);
    CHECK("an event before resumed: EPROTO, \"protocol violation by the daemon: message type 0x1 before resumed\"",
          result == -1 && e == EPROTO &&
              strcmp(lifecycle_last_error(app), "protocol violation by the daemon: message type 0x1 before resumed") == 0 &&
              lifecycle_fd(app) == -1 && r.log[0] == 0 && exited_well(child));
    lifecycle_close(app);
    close(d);

    /* (b) A repeated event: acknowledged again when the acknowledgement was
     * lost (here the daemon dies while the callback runs, so the
     * acknowledgement finds the break), never its callback twice. */
    app = started(sv, &r, path);
    fd = lifecycle_fd(app);
    send_event(sv[1], 1, LIFECYCLE_EVENT_DID_BECOME_ACTIVE, 0, -1, -1, NULL, 0);
    lifecycle_dispatch(app);
    got_ack(sv[1], 1);
    child = restarted_daemon(listener, handover, ANSWER, -1);
    send_event(sv[1], 2, LIFECYCLE_EVENT_WILL_RESIGN_ACTIVE, 0, -1, -1, NULL, 0);
    r.close_in_callback = sv[1];
    result = lifecycle_dispatch(app);
    d = handed_over(handover[0], &m, b);
    CHECK("the daemon dies during a callback: the acknowledgement resumes the channel",
          result == LIFECYCLE_OK && d >= 0 && exited_well(child) && lifecycle_fd(app) == fd);
    CHECK("...and the resume names event 1, the last acknowledgement sent", m.type == LC_T_RESUME && m.id == 1);
    send_event(d, 2, LIFECYCLE_EVENT_WILL_RESIGN_ACTIVE, 0, -1, -1, NULL, 0);
    CHECK("the event sent again is acknowledged again, without its callback",
          lifecycle_dispatch(app) == LIFECYCLE_OK && got_ack(d, 2) && got_nothing(d) &&
              strcmp(r.log, "didBecomeActive willResignActive ") == 0);
    send_event(d, 2, LIFECYCLE_EVENT_WILL_RESIGN_ACTIVE, 0, -1, -1, NULL, 0);
    send_event(d, 1, LIFECYCLE_EVENT_DID_BECOME_ACTIVE, 0, -1, -1, NULL, 0);
    CHECK("an event whose acknowledgement the daemon has is not acknowledged twice",
          lifecycle_dispatch(app) == LIFECYCLE_OK && got_nothing(d) && strcmp(r.log, "didBecomeActive willResignActive ") == 0);
    send_event(d, 3, LIFECYCLE_EVENT_DID_ENTER_BACKGROUND, 0, -1, -1, NULL, 0);
    CHECK("the next event is delivered as usual", lifecycle_dispatch(app) == LIFECYCLE_OK && got_ack(d, 3) &&
                                                    strstr(r.log, "didEnterBackground"));
    lifecycle_close(app);
    close(d);

    /* A repeat of a deferred event: ignored; its acknowledgement follows, once. */
    app = deferring_then_break(sv, &r, path, listener, handover, &child);
    result = lifecycle_dispatch(app);
    d = handed_over(handover[0], &m, b);
    CHECK("a break while an event is deferred: resumed, naming no acknowledgement (0)",
          result == LIFECYCLE_OK && d >= 0 && exited_well(child) && m.type == LC_T_RESUME && m.id == 0 &&
              lifecycle_current_event(app) == LIFECYCLE_EVENT_DID_ENTER_BACKGROUND);
    send_event(d, 1, LIFECYCLE_EVENT_DID_ENTER_BACKGROUND, 0, -1, -1, NULL, 0);
    CHECK("the deferred event sent again is ignored: no callback, no acknowledgement",
          lifecycle_dispatch(app) == LIFECYCLE_OK && got_nothing(d) && strcmp(r.log, "didEnterBackground ") == 0);
    CHECK("lifecycle_acknowledge acknowledges it on the resumed channel",
          lifecycle_acknowledge(app, r.token) == LIFECYCLE_OK && got_ack(d, 1) && got_nothing(d));
    send_event(d, 1, LIFECYCLE_EVENT_DID_ENTER_BACKGROUND, 0, -1, -1, NULL, 0);
    CHECK("a repeat sent before the daemon read that acknowledgement is not acknowledged twice",
          lifecycle_dispatch(app) == LIFECYCLE_OK && got_nothing(d) && strcmp(r.log, "didEnterBackground ") == 0);
    lifecycle_close(app);
    close(d);

    /* A deferred acknowledgement that finds the break: resumed; the daemon
     * sends the event again, and it is acknowledged then. */
    app = deferring_then_break(sv, &r, path, listener, handover, &child);
    result = lifecycle_acknowledge(app, r.token);
    d = handed_over(handover[0], &m, b);
    CHECK("lifecycle_acknowledge finds the break: resumed, returns LIFECYCLE_OK",
          result == LIFECYCLE_OK && d >= 0 && exited_well(child) && m.id == 0 &&
              lifecycle_current_event(app) == LIFECYCLE_EVENT_NONE);
    send_event(d, 1, LIFECYCLE_EVENT_DID_ENTER_BACKGROUND, 0, -1, -1, NULL, 0);
    CHECK("...the event sent again is acknowledged, without its callback",
          lifecycle_dispatch(app) == LIFECYCLE_OK && got_ack(d, 1) && got_nothing(d) &&
              strcmp(r.log, "didEnterBackground ") == 0);
    lifecycle_close(app);
    close(d);

    /* (c) A repeated expiration notice runs no handler twice. */
    app = started(sv, &r, path);
    send_event(sv[1], 1, LIFECYCLE_EVENT_DID_ENTER_BACKGROUND, 0, -1, lifecycle_now() + 30000000000, NULL, 0);
    lifecycle_dispatch(app);
    send_reply(sv[1], 1, 3, -1);
    send_reply(sv[1], 2, 4, -1);
    t3 = lifecycle_begin_background_task(app, "a", on_expiration, &r);
    t4 = lifecycle_begin_background_task(app, "b", on_expiration, &r);
    uint32_t three = 3;
    send_expiring(sv[1], &three, 1);
    lifecycle_dispatch(app);
    CHECK("before the restart: task 3's handler ran once", t3 == 3 && t4 == 4 && r.expired == 1 && r.expired_task == 3);
    child = restarted_daemon(listener, handover, ANSWER, -1);
    close(sv[1]);
    result = lifecycle_dispatch(app);
    d = handed_over(handover[0], &m, b);
    CHECK("resumed, listing task 3 (warned, still open) and task 4",
          result == LIFECYCLE_OK && d >= 0 && exited_well(child) && m.id == 1 && lists_tasks(&m, 3, 4));
    send_expiring(d, &three, 1);
    CHECK("the expiration notice sent again runs no handler", lifecycle_dispatch(app) == LIFECYCLE_OK && r.expired == 1);
    uint32_t both[] = {3, 4};
    send_expiring(d, both, 2);
    CHECK("a notice naming it and a new task runs the new task's handler alone",
          lifecycle_dispatch(app) == LIFECYCLE_OK && r.expired == 2 && r.expired_task == 4);
    lifecycle_close(app);
    close(d);

    /* (f) A task request waiting for its reply when the channel breaks. */
    app = started(sv, &r, path);
    fd = lifecycle_fd(app);
    child = restarted_daemon(listener, handover, ANSWER, sv[1]);
    close(sv[1]); /* the restarted daemon's child holds it until it has read the request */
    t0 = lifecycle_now();
    errno = 0;
    uint32_t t = lifecycle_begin_background_task(app, "upload", on_expiration, &r);
    e = errno;
    int64_t took = lifecycle_now() - t0;
    d = handed_over(handover[0], &m, b);
    CHECK("a begin waiting when the channel breaks returns 0 (ETIMEDOUT) once resumed, not after 5 s",
          t == 0 && e == ETIMEDOUT && took < 4000000000 && d >= 0 && exited_well(child) && lifecycle_fd(app) == fd);
    CHECK("...lifecycle_last_error says why",
          strcmp(lifecycle_last_error(app), "the channel to lifecycled was resumed before the reply to beginBackgroundTask 1") == 0);
    CHECK("...and the resume lists no task for it", m.type == LC_T_RESUME && m.task_count == 0);
    send_reply(d, 2, 6, -1);
    t = lifecycle_begin_background_task(app, "again", NULL, NULL);
    CHECK("asked again on the resumed channel, the task is given",
          t == 6 && take(d, &m, b, -1) == 1 && m.type == LC_T_BEGIN_TASK && m.id == 2 && str_is(m.name, "again"));
    lifecycle_close(app);
    close(d);

    /* (g) A wake event's answer lost with the break: sent again as it was,
     * complete with its result, when the daemon sends the event again. */
    app = started(sv, &r, path);
    fd = lifecycle_fd(app);
    child = restarted_daemon(listener, handover, ANSWER, -1);
    send_event(sv[1], 1, LIFECYCLE_EVENT_PERFORM_FETCH, 1, -1, -1, NULL, 0);
    r.answer = 1 + LIFECYCLE_FETCH_NEW_DATA;
    r.close_in_callback = sv[1];
    result = lifecycle_dispatch(app);
    d = handed_over(handover[0], &m, b);
    CHECK("a wake event's answer finds the break: resumed, naming no acknowledgement (0)",
          result == LIFECYCLE_OK && d >= 0 && exited_well(child) && lifecycle_fd(app) == fd && m.type == LC_T_RESUME &&
              m.id == 0);
    send_event(d, 1, LIFECYCLE_EVENT_PERFORM_FETCH, 1, -1, -1, NULL, 0);
    CHECK("...the event sent again is answered again with its result (complete, new-data), without its callback",
          lifecycle_dispatch(app) == LIFECYCLE_OK && got_complete(d, 1, LIFECYCLE_FETCH_NEW_DATA) && got_nothing(d) &&
              strcmp(r.log, "performFetch ") == 0);
    lifecycle_close(app);
    close(d);

    /* (h) A save whose send finds the break is sent on the resumed channel. */
    app = started(sv, &r, path);
    child = restarted_daemon(listener, handover, ANSWER, -1);
    close(sv[1]);
    int saved = lifecycle_save_restoration(app, "state", 5);
    d = handed_over(handover[0], &m, b);
    CHECK("a save that finds the break: resumed, then sent on the resumed channel, once",
          saved == 0 && d >= 0 && exited_well(child) && m.type == LC_T_RESUME && got_save(d, "state", 5) &&
              got_nothing(d));
    lifecycle_close(app);
    close(d);

    /* (d) Nobody listening, or a daemon that never answers: after the wait,
     * the break is final as it was without a resume socket. */
    app = started(sv, &r, nobody);
    lifecycle__set_resume_wait(app, 300);
    close(sv[1]);
    t0 = lifecycle_now();
    result = lifecycle_dispatch(app);
    e = errno;
    took = lifecycle_now() - t0;
    CHECK("nobody at the resume socket: after the wait (300 ms here), ECONNRESET, \"lifecycled closed the channel\"",
          result == -1 && e == ECONNRESET && strcmp(lifecycle_last_error(app), "lifecycled closed the channel") == 0 &&
              took >= 300000000 && took < 3000000000);
    CHECK("...and the channel is closed for good", lifecycle_fd(app) == -1 && errno == ECONNRESET &&
                                                      lifecycle_dispatch(app) == -1 && errno == ECONNRESET);
    lifecycle_close(app);
    int silent = listening_at(silent_path);
    app = started(sv, &r, silent_path);
    lifecycle__set_resume_wait(app, 300);
    send_event(sv[1], 1, LIFECYCLE_EVENT_DID_BECOME_ACTIVE, 0, -1, -1, NULL, 0);
    close(sv[1]);
    t0 = lifecycle_now();
    result = lifecycle_dispatch(app);
    e = errno;
    took = lifecycle_now() - t0;
    CHECK("a resume socket that never answers: ECONNRESET after the wait, the event before the break handled",
          result == -1 && e == ECONNRESET && strcmp(lifecycle_last_error(app), "lifecycled closed the channel") == 0 &&
              took >= 300000000 && took < 3000000000 && strcmp(r.log, "didBecomeActive ") == 0);
    lifecycle_close(app);
    close(silent);

    /* (e) No resume socket: a break is final at once, as before. */
    app = started(sv, &r, NULL);
    close(sv[1]);
    t0 = lifecycle_now();
    result = lifecycle_dispatch(app);
    e = errno;
    CHECK("no LIFECYCLE_RESUME_SOCKET: a closed channel is ECONNRESET at once",
          result == -1 && e == ECONNRESET && lifecycle_now() - t0 < 100000000 &&
              strcmp(lifecycle_last_error(app), "lifecycled closed the channel") == 0);
    lifecycle_close(app);
    app = started(sv, &r, NULL);
    close(sv[1]);
    CHECK("...a send that finds it too", lifecycle_end_background_task(app, 3) == -1 && errno == ECONNRESET &&
                                            lifecycle_fd(app) == -1);
    lifecycle_close(app);
    /* Without a name to give, the daemon could not take the channel back: final at once too. */
    socket_pair(sv);
    char num[16];
    snprintf(num, sizeof num, "%d", sv[0]);
    setenv("LIFECYCLE_FD", num, 1);
    setenv("LIFECYCLE_RESUME_SOCKET", path, 1);
    unsetenv("LIFECYCLE_APP");
    app = lifecycle_connect(&callbacks, sizeof callbacks, &r);
    close(sv[1]);
    t0 = lifecycle_now();
    CHECK("a resume socket but no LIFECYCLE_APP: final at once, and the variable is unset all the same",
          app && lifecycle_dispatch(app) == -1 && errno == ECONNRESET && lifecycle_now() - t0 < 100000000 &&
              getenv("LIFECYCLE_RESUME_SOCKET") == NULL);
    lifecycle_close(app);

    close(listener);
    close(handover[0]);
    close(handover[1]);
    unlink(path);
    unlink(silent_path);
    rmdir(dir);
}

/* MARK: - lifecycle_run */

/* A fake daemon that behaves like lifecycled: one event at a time, the next
 * only after the acknowledgement. Exits 0 when every ack came in order and
 * the app then closed its end. */
static int fake_daemon_run(int fd) {
    lifecycle_event script[] = {LIFECYCLE_EVENT_WILL_FINISH_LAUNCHING, LIFECYCLE_EVENT_DID_FINISH_LAUNCHING,
                                LIFECYCLE_EVENT_DID_BECOME_ACTIVE, LIFECYCLE_EVENT_WILL_RESIGN_ACTIVE,
                                LIFECYCLE_EVENT_DID_ENTER_BACKGROUND, LIFECYCLE_EVENT_WILL_TERMINATE};
    struct lifecycle__message m;
    uint8_t b[LC_WIRE_MAX_MESSAGE];
    for (uint32_t i = 0; i < 6; i++) {
        send_event(fd, 100 + i, script[i], 0, lifecycle_now() + 5000000000, -1, NULL, 0);
        if (take(fd, &m, b, 5000) != 1 || m.type != LC_T_ACKNOWLEDGE || m.id != 100 + i) return 20 + (int)i;
    }
    /* The app must return from lifecycle_run now, without the channel closing. */
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 5000) != 1) return 30;
    return recv(fd, b, sizeof b, 0) == 0 ? 0 : 31;
}

static void test_run(void) {
    int sv[2];
    struct rec r;
    lifecycle_app *app = connected(sv, &r, &callbacks);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) { lifecycle_close(app); _exit(fake_daemon_run(sv[1])); }
    close(sv[1]);
    int result = lifecycle_run(app);
    CHECK("lifecycle_run returns LIFECYCLE_TERMINATED after willTerminate is acknowledged", result == LIFECYCLE_TERMINATED);
    CHECK("every event reached its callback in order",
          strcmp(r.log, "willFinishLaunching didFinishLaunching didBecomeActive willResignActive didEnterBackground "
                        "willTerminate ") == 0);
    CHECK("dispatch reports LIFECYCLE_TERMINATED too", lifecycle_dispatch(app) == LIFECYCLE_TERMINATED);
    lifecycle_close(app);
    int status = 0;
    waitpid(child, &status, 0);
    CHECK("the fake daemon got each acknowledgement before sending the next event", WIFEXITED(status) &&
                                                                                        WEXITSTATUS(status) == 0);
}

/* MARK: - Standalone */

static void test_standalone(void) {
    struct rec r;
    memset(&r, 0, sizeof r);
    lifecycle_app *app = lifecycle_standalone(&callbacks, sizeof callbacks, &r);
    CHECK("standalone: an app without a channel", app && lifecycle_is_supervised(app) == 0);
    CHECK("standalone: lifecycle_fd is -1 with ENOTCONN", lifecycle_fd(app) == -1 && errno == ENOTCONN);
    CHECK("standalone: dispatch fails with ENOTCONN", lifecycle_dispatch(app) == -1 && errno == ENOTCONN);
    uint32_t t = lifecycle_begin_background_task(app, "x", on_expiration, &r);
    CHECK("standalone: a background task gets an id", t != 0 && lifecycle_end_background_task(app, t) == 0);
    lifecycle_close(app);

    int p[2];
    if (pipe(p) != 0) exit(2);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        close(p[0]);
        memset(&r, 0, sizeof r);
        r.fd_out = p[1];
        app = lifecycle_standalone(&callbacks, sizeof callbacks, &r);
        int result = lifecycle_run(app);
        int ok = result == LIFECYCLE_TERMINATED && strcmp(lifecycle_launch_option(app, "launch.mode"), "foreground") == 0;
        lifecycle_close(app);
        _exit(ok ? 0 : 1);
    }
    close(p[1]);
    char got[512] = "";
    size_t n = 0;
    int signalled = 0;
    for (;;) {
        ssize_t k = read(p[0], got + n, sizeof got - 1 - n);
        if (k <= 0) break;
        n += (size_t)k;
        got[n] = 0;
        if (!signalled && strstr(got, "didBecomeActive\n")) { kill(child, SIGTERM); signalled = 1; }
    }
    close(p[0]);
    int status = 0;
    waitpid(child, &status, 0);
    CHECK("standalone run: simulated launch, then SIGTERM ends it with willResignActive, didEnterBackground, willTerminate",
          strcmp(got, "willFinishLaunching\ndidFinishLaunching\ndidBecomeActive\nwillResignActive\ndidEnterBackground\n"
                      "willTerminate\n") == 0);
    CHECK("standalone run returns LIFECYCLE_TERMINATED (and exits normally)", WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_misc(void) {
    CHECK("event names as docs/protocol.md spells them",
          strcmp(lifecycle_event_name(LIFECYCLE_EVENT_WILL_FINISH_LAUNCHING), "willFinishLaunching") == 0 &&
              strcmp(lifecycle_event_name(LIFECYCLE_EVENT_WILL_BE_KILLED_FOR_MEMORY), "willBeKilledForMemory") == 0 &&
              strcmp(lifecycle_event_name(LIFECYCLE_EVENT_DID_RECEIVE_MEMORY_WARNING), "didReceiveMemoryWarning") == 0 &&
              strcmp(lifecycle_event_name(LIFECYCLE_EVENT_PERFORM_FETCH), "performFetch") == 0 &&
              strcmp(lifecycle_event_name(LIFECYCLE_EVENT_DID_RECEIVE_REMOTE_NOTIFICATION), "didReceiveRemoteNotification") == 0 &&
              strcmp(lifecycle_event_name(LIFECYCLE_EVENT_OPEN_URL), "openURL") == 0 &&
              strcmp(lifecycle_event_name(LIFECYCLE_EVENT_SCENE_WILL_CONNECT), "sceneWillConnect") == 0 &&
              strcmp(lifecycle_event_name(LIFECYCLE_EVENT_SCENE_WILL_ENTER_FOREGROUND), "sceneWillEnterForeground") == 0 &&
              strcmp(lifecycle_event_name(LIFECYCLE_EVENT_SCENE_DID_BECOME_ACTIVE), "sceneDidBecomeActive") == 0 &&
              strcmp(lifecycle_event_name(LIFECYCLE_EVENT_SCENE_WILL_RESIGN_ACTIVE), "sceneWillResignActive") == 0 &&
              strcmp(lifecycle_event_name(LIFECYCLE_EVENT_SCENE_DID_ENTER_BACKGROUND), "sceneDidEnterBackground") == 0 &&
              strcmp(lifecycle_event_name(LIFECYCLE_EVENT_SCENE_DID_DISCONNECT), "sceneDidDisconnect") == 0 &&
              strcmp(lifecycle_event_name(LIFECYCLE_EVENT_DID_DISCARD_SCENE_SESSIONS), "didDiscardSceneSessions") == 0 &&
              lifecycle_event_name(LIFECYCLE_EVENT_NONE) == NULL && lifecycle_event_name((lifecycle_event)20) == NULL);
    CHECK("the version is 1.2.0", LIFECYCLE_VERSION_MAJOR == 1 && LIFECYCLE_VERSION_MINOR == 2 &&
                                      LIFECYCLE_VERSION_PATCH == 0);
    CHECK("lifecycle_strerror never returns NULL", lifecycle_strerror(12345) != NULL && lifecycle_strerror(EIO) != NULL);
    CHECK("NULL apps are refused, not crashed on",
          lifecycle_dispatch(NULL) == -1 && errno == EINVAL && lifecycle_run(NULL) == -1 && lifecycle_close(NULL) == -1 &&
              lifecycle_fd(NULL) == -1 && lifecycle_begin_background_task(NULL, "x", NULL, NULL) == 0 &&
              lifecycle_state(NULL) == LIFECYCLE_STATE_INACTIVE && lifecycle_launch_option(NULL, "k") == NULL);
}

int main(int argc, char **argv) {
    if (argc < 2 || load(argv[1]) != 0) {
        fprintf(stderr, "usage: %s Tests/golden/vectors.txt (cannot read %s)\n", argv[0], argc > 1 ? argv[1] : "it");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    CHECK("the vectors file was read", vector_count > 0);
    test_golden();
    test_rejects();
    test_connect();
    test_events();
    test_defer();
    test_tasks();
    test_wake();
    test_restoration();
    test_scenes();
    test_malformed();
    test_run();
    test_resume();
    test_standalone();
    test_misc();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
