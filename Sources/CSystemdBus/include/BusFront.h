#ifndef LC_BUS_FRONT_H
#define LC_BUS_FRONT_H
// The daemon's D-Bus interface, io.lifecycled.Lifecycle1 (docs/dbus.md), in
// C because sd-bus's vtables are macros and its message builders variadic.
// This file knows the bus, nothing of the lifecycle: each method call is
// parsed, its caller's credentials fetched (asynchronously, as everything
// here), and handed to the daemon's `call` callback, which answers at once.
// The daemon pushes each app's properties after a turn of its loop; the
// front keeps them, serves reads from them and, at lc_front_flush, emits
// one PropertiesChanged per changed object naming only what changed.
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

typedef struct lc_front lc_front;

/// The kinds of object the daemon pushes, each with its slots of values:
///   app      strings: state, awaiting, band, display, delivery, background
///            tasks ("id\tname" lines), scenes (lines), last termination's
///            code and description; numbers: pid, launching, frozen, last
///            termination's time (µs since the epoch) and pid, footprint
///   display  strings: front (scene refs, lines); numbers: slots, locked, interruptions
///   scene    (key "app/scene") strings: display, state, the app's object
///            path, the app's name, the scene's name; numbers: in front,
///            discarding, shed
enum { LC_FRONT_APP, LC_FRONT_DISPLAY, LC_FRONT_SCENE };

/// A method call, parsed, with who made it.
typedef struct {
    const char *verb;        ///< the member: Launch, Activate, Stop, Home, OpenURL, ...
    const char *app;         ///< the app's name, NULL for the manager's calls
    const char *scene;       ///< options: NULL when not given
    const char *display;
    int background;          ///< -1 not given, 0, 1
    const char *argument;    ///< Push's payload, Signal's signal, OpenURL's URL
    const char *sender;      ///< the caller's unique bus name
    uint32_t uid;
    uint32_t pid;            ///< 0 when the bus did not say
    const uint32_t *gids;
    size_t n_gids;
    int authorized;          ///< polkit said yes to this very call
} lc_front_request;

/// The daemon's answer to a call: an error, an operation, or nothing.
typedef struct {
    const char *error_name;     ///< non-NULL: the call fails with it
    const char *error_message;
    uint64_t operation;         ///< non-zero: the reply is this operation's path
    int descriptor;             ///< >= 0: the reply is this descriptor (the front closes it once sent)
} lc_front_answer;

typedef struct {
    void *context;
    void (*call)(void *context, const lc_front_request *request, lc_front_answer *answer);
    /// Before `call`: the polkit action that decides whether this caller
    /// may make this call, or NULL when polkit is not asked (root, the
    /// control group, or authorization by group only). The front then asks
    /// polkit (asynchronously, with the details app, verb, display and
    /// scene, and the caller's interactive flag) and calls `call` with
    /// `authorized` set when it said yes.
    const char *(*polkit_action)(void *context, const lc_front_request *request);
    /// polkitd not there: 1 refuses the call, 0 lets `call` decide by the group rule.
    int polkit_required;
    /// The bus connection came up (again): push every app.
    void (*connected)(void *context);
    /// Something to say once (the bus is gone, the name was lost, ...).
    void (*log)(void *context, int priority, const char *message);
} lc_front_callbacks;

/// Connects to the system bus ($DBUS_SYSTEM_BUS_ADDRESS or the default),
/// serves the interface on `event` and asks for the name. A connection
/// that cannot be made now is retried (1 s, doubling to 30 s); so is one
/// the bus daemon drops. 0, or a negative errno when nothing could be set up.
int lc_front_open(sd_event *event, int64_t priority, const char *version, const lc_front_callbacks *callbacks,
                  lc_front **front);
void lc_front_close(lc_front *front);

/// An object's values now (copied): a new object appears (InterfacesAdded)
/// at the next flush; changed values are signalled then. `strings` holds
/// `n_strings` strings back to back, each ended by its NUL.
void lc_front_set(lc_front *front, int kind, const char *key, const char *strings, size_t n_strings,
                  const uint64_t *numbers, size_t n_numbers);
/// An object's path (the caller frees it); NULL for a bad key.
char *lc_front_path(int kind, const char *key);
/// The object goes (InterfacesRemoved) at the next flush.
void lc_front_remove(lc_front *front, int kind, const char *key);

/// A new operation for `verb` on `app` (NULL: none), asked by `requester`
/// (a unique bus name): its id, for the answer and for finishing it.
uint64_t lc_front_operation_new(lc_front *front, const char *verb, const char *app, const char *requester);
/// The operation's outcome: `result` one of done, failed, refused,
/// superseded, canceled, lost; `reason` a stable code or "". Replies to
/// every waiter and tells the requester (OperationFinished).
void lc_front_operation_finish(lc_front *front, uint64_t id, const char *result, const char *reason);

/// Emits what changed since the last flush: objects added, properties
/// changed (one signal per object, only the changed ones), objects removed.
void lc_front_flush(lc_front *front);

/// An event record (the JSON object `events --follow --json` prints) about
/// `app`, to every monitor that follows the app: as its Record signal,
/// numbered per monitor; when the bus daemon is not taking messages (its
/// queue deep), dropped, and told with a Lost signal once it is again.
void lc_front_record(lc_front *front, const char *app, const char *record);
/// Monitors open now.
size_t lc_front_monitors(const lc_front *front);

/// What the daemon asks of a compositor that reports over the bus
/// (ReportShown): a CompositorRequest signal with `request` (the JSON the
/// socket's follower gets on its connection), to `destination` alone.
int lc_front_to_reporter(lc_front *front, const char *destination, const char *request);

/// The bus daemon takes no messages now (signals wait, gathered).
int lc_front_stalled(lc_front *front);
/// The interface is served now (connected, the name ours): nonzero.
int lc_front_serving(const lc_front *front);
/// Before the process goes (an execve): held replies sent and what is
/// queued written, for at most a second.
void lc_front_flush_out(lc_front *front);


#endif
