// c-recorder: the C twin of example-recorder (Examples/recorder/main.swift),
// on liblifecycle's blocking loop (lifecycle_run). It records every
// lifecycle event it receives, one line per event name as docs/protocol.md
// spells it, to the file given with --log, before acknowledging it; after
// willFinishLaunching also "# previous: REASON" when the previous run's
// termination reason is known, then "# KEY: VALUE" for the launch options
// launch.reason (unless it is "user", the usual case), launch.url,
// push.payload and restoration.size when present, in that order, and
// "# restoration: TEXT" with the restoration data handed over, if any. After
// didReceiveRemoteNotification it writes "# push.payload: JSON", after
// openURL "# url: URL" and, when the URL opens in a scene, "# scene: NAME".
// Line breaks in a value are written as spaces, so that every record is one
// line. Scene events (manifest `scenes = true`) are one line each, through
// their own callbacks: "EVENT SCENE DISPLAY" for a scene transition
// ("sceneWillEnterForeground nav centre"), with "new" or "restored" after
// sceneWillConnect ("sceneWillConnect nav centre new"), and
// "didDiscardSceneSessions NAME,NAME" with the discarded sessions. It
// answers performFetch and
// didReceiveRemoteNotification with new data (complete). With
// $RECORDER_SAVE_STATE set it saves its value as restoration data
// (saveRestoration) in didEnterBackground, after writing the line; an empty
// value forgets what was saved. With --hang EVENT it never returns from that
// callback (to test the watchdogs; EVENT is an event's name, or a whole
// line). With --allocate-mb N it holds N MiB of
// touched memory from its start and logs "# allocated N MiB" first.
// --exit-when-active exits at didBecomeActive when run standalone (the
// launch benchmark's bare-exec baseline). --async is accepted and ignored
// (the C library has no async API), so manifests can switch recorders.
// With --after-ack the lines of each event but willTerminate (its any_event
// callback; the scene callbacks write at once) are written after its
// acknowledgement (lifecycle_defer, then lifecycle_acknowledge at the end of
// the callback): the event benchmark waits on those lines, and written first
// they would wake it inside the round trip it measures.
//
//   make clib   ->  .build/clib/c-recorder (liblifecycle.a linked in)
//   [RECORDER_SAVE_STATE=TEXT] c-recorder --log FILE [--hang EVENT] [--allocate-mb N] [--after-ack]
#define _POSIX_C_SOURCE 200809L
#include "lifecycle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

struct recorder {
    int fd;
    const char *hang;
    int exit_when_active;
    int after_ack;
    /* --after-ack: the callback's lines, held until its event is acknowledged. */
    char *held;
    size_t held_length;
};

/* Writes the line (its parts), or holds it while an acknowledgement is
 * pending (--after-ack). */
static void emit(struct recorder *r, const struct iovec *iov, int count) {
    if (r->held) {
        for (int i = 0; i < count; i++) {
            char *grown = realloc(r->held, r->held_length + iov[i].iov_len + 1);
            if (!grown) return;
            r->held = grown;
            memcpy(r->held + r->held_length, iov[i].iov_base, iov[i].iov_len);
            r->held_length += iov[i].iov_len;
        }
        return;
    }
    if (writev(r->fd, iov, count) < 0) { /* nothing better to do */ }
}

static const char *option(int argc, char **argv, const char *name) {
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0) return argv[i + 1];
    return NULL;
}

static int flag(int argc, char **argv, const char *name) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0) return 1;
    return 0;
}

/* Appends one line (one write, so that lines never interleave); hangs
 * forever when it, or its first word (the event's name), is the --hang
 * event. */
static void note(struct recorder *r, const char *line) {
    struct iovec iov[2] = {{(void *)line, strlen(line)}, {"\n", 1}};
    emit(r, iov, 2);
    if (r->hang && (strcmp(line, r->hang) == 0 ||
                    (strncmp(line, r->hang, strlen(r->hang)) == 0 && line[strlen(r->hang)] == ' ')))
        for (;;) pause();
}

/* Appends the `count` words as one line, separated by spaces (a scene
 * event's line: "sceneWillConnect nav centre new"). */
static void note_words(struct recorder *r, const char *const *words, size_t count) {
    size_t length = 0;
    for (size_t i = 0; i < count; i++) length += strlen(words[i]) + 1;
    char *line = malloc(length + 1);
    if (!line) return;
    line[0] = 0;
    for (size_t i = 0; i < count; i++) {
        if (i) strcat(line, " ");
        strcat(line, words[i]);
    }
    note(r, line);
    free(line);
}

/* Appends "# KEY: VALUE", the value's line breaks as spaces. */
static void note_value(struct recorder *r, const char *key, const char *value, size_t length) {
    size_t prefix = strlen(key) + 4;
    char *line = malloc(prefix + length + 1);
    if (!line) return;
    snprintf(line, prefix + 1, "# %s: ", key);
    for (size_t i = 0; i < length; i++) line[prefix + i] = value[i] == '\n' || value[i] == '\r' ? ' ' : value[i];
    line[prefix + length] = 0;
    struct iovec iov[2] = {{line, prefix + length}, {"\n", 1}}; /* the length, for data with NUL bytes */
    emit(r, iov, 2);
    free(line);
}

/* "# KEY: VALUE" for an option of the current event, when it has one. */
static void note_option(struct recorder *r, lifecycle_app *app, const char *key) {
    const char *value = lifecycle_event_option(app, key);
    if (value) note_value(r, key, value, strlen(value));
}

static void on_event(lifecycle_app *app, lifecycle_event event, void *userdata) {
    struct recorder *r = userdata;
    /* willTerminate's lines cannot wait: the app exits after its acknowledgement. */
    lifecycle_token token =
        r->after_ack && event != LIFECYCLE_EVENT_WILL_TERMINATE ? lifecycle_defer(app) : 0;
    if (token) r->held = calloc(1, 1);
    note(r, lifecycle_event_name(event));
    if (event == LIFECYCLE_EVENT_WILL_FINISH_LAUNCHING) {
        const char *reason = lifecycle_previous_termination_reason(app);
        if (reason) {
            char line[300];
            snprintf(line, sizeof line, "# previous: %s", reason);
            note(r, line);
        }
        const char *why = lifecycle_launch_reason(app);
        if (why && strcmp(why, "user") != 0) note_option(r, app, "launch.reason");
        note_option(r, app, "launch.url");
        note_option(r, app, "push.payload");
        note_option(r, app, "restoration.size");
        size_t size = 0;
        const char *data = lifecycle_restoration_data(app, &size);
        if (data) note_value(r, "restoration", data, size);
    }
    if (event == LIFECYCLE_EVENT_DID_RECEIVE_REMOTE_NOTIFICATION) note_option(r, app, "push.payload");
    if (event == LIFECYCLE_EVENT_OPEN_URL) {
        note_option(r, app, "url");
        note_option(r, app, "scene");
    }
    if (event == LIFECYCLE_EVENT_PERFORM_FETCH || event == LIFECYCLE_EVENT_DID_RECEIVE_REMOTE_NOTIFICATION)
        lifecycle_set_fetch_result(app, LIFECYCLE_FETCH_NEW_DATA); /* sent as complete when this returns */
    const char *state = getenv("RECORDER_SAVE_STATE");
    if (event == LIFECYCLE_EVENT_DID_ENTER_BACKGROUND && state &&
        lifecycle_save_restoration(app, state, strlen(state)) != 0)
        fprintf(stderr, "c-recorder: cannot save the restoration data: %s\n",
                lifecycle_last_error(app)[0] ? lifecycle_last_error(app) : lifecycle_strerror(errno));
    if (event == LIFECYCLE_EVENT_DID_BECOME_ACTIVE && !lifecycle_is_supervised(app) && r->exit_when_active) exit(0);
    if (token) {
        if (lifecycle_acknowledge(app, token) != 0)
            fprintf(stderr, "c-recorder: cannot acknowledge: %s\n", lifecycle_strerror(errno));
        char *held = r->held;
        r->held = NULL;
        if (held && r->held_length && write(r->fd, held, r->held_length) < 0) { /* nothing better to do */ }
        free(held);
        r->held_length = 0;
    }
}

/* A scene transition: "EVENT SCENE DISPLAY", and "new" or "restored" after
 * sceneWillConnect. */
static void on_scene(lifecycle_app *app, const lifecycle_scene *scene, void *userdata) {
    lifecycle_event event = lifecycle_current_event(app);
    const char *words[] = {lifecycle_event_name(event), lifecycle_scene_name(scene), lifecycle_scene_display(scene),
                           lifecycle_scene_restored(scene) ? "restored" : "new"};
    note_words(userdata, words, event == LIFECYCLE_EVENT_SCENE_WILL_CONNECT ? 4 : 3);
}

/* "didDiscardSceneSessions NAME,NAME,...". */
static void on_discard(lifecycle_app *app, const char *const *scenes, size_t count, void *userdata) {
    (void)app;
    size_t length = 0;
    for (size_t i = 0; i < count; i++) length += strlen(scenes[i]) + 1;
    char *list = malloc(length + 1);
    if (!list) return;
    list[0] = 0;
    for (size_t i = 0; i < count; i++) {
        if (i) strcat(list, ",");
        strcat(list, scenes[i]);
    }
    const char *words[] = {"didDiscardSceneSessions", list};
    note_words(userdata, words, 2);
    free(list);
}

int main(int argc, char **argv) {
    const char *log = option(argc, argv, "--log");
    if (!log) {
        fputs("usage: c-recorder --log FILE [--hang EVENT] [--allocate-mb N] [--after-ack]\n", stderr);
        return 2;
    }
    struct recorder r = {open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644), option(argc, argv, "--hang"),
                         flag(argc, argv, "--exit-when-active"), flag(argc, argv, "--after-ack"), NULL, 0};
    if (r.fd < 0) {
        fprintf(stderr, "c-recorder: cannot open %s\n", log);
        return 2;
    }
    const char *mb_text = option(argc, argv, "--allocate-mb");
    long mb = mb_text ? strtol(mb_text, NULL, 10) : 0;
    if (mb > 0) {
        /* Resident, not just reserved: every page is written. */
        size_t bytes = (size_t)mb << 20;
        char *block = malloc(bytes);
        if (!block) {
            fprintf(stderr, "c-recorder: cannot allocate %ld MiB\n", mb);
            return 2;
        }
        memset(block, 0x5A, bytes);
        char line[64];
        snprintf(line, sizeof line, "# allocated %ld MiB", mb);
        note(&r, line);
    }

    lifecycle_callbacks callbacks = {0};
    callbacks.any_event = on_event;
    callbacks.scene_will_connect = on_scene;
    callbacks.scene_will_enter_foreground = on_scene;
    callbacks.scene_did_become_active = on_scene;
    callbacks.scene_will_resign_active = on_scene;
    callbacks.scene_did_enter_background = on_scene;
    callbacks.scene_did_disconnect = on_scene;
    callbacks.did_discard_scene_sessions = on_discard;
    lifecycle_app *app = lifecycle_connect(&callbacks, sizeof callbacks, &r);
    if (!app) {
        /* Like the Swift client: outside lifecycled (ENOENT), run standalone;
         * any other failure (a wrong protocol version, a bad fd) is an error. */
        int err = errno;
        if (err != ENOENT || !(app = lifecycle_standalone(&callbacks, sizeof callbacks, &r))) {
            fprintf(stderr, "c-recorder: %s\n", lifecycle_strerror(err));
            return 1;
        }
        fprintf(stderr,
                "%s: %s: running standalone. Launch events and didBecomeActive are simulated; SIGINT or SIGTERM "
                "ends the app with willResignActive, didEnterBackground and willTerminate.\n",
                argv[0], lifecycle_strerror(err));
    }
    int result = lifecycle_run(app);
    if (result == LIFECYCLE_TERMINATED) return 0; /* exit promptly after willTerminate */
    const char *name = lifecycle_app_name(app);
    fprintf(stderr, "c-recorder: %s (%s); exiting\n", lifecycle_last_error(app)[0] ? lifecycle_last_error(app) : lifecycle_strerror(errno),
            name ? name : "this app");
    return 1;
}
