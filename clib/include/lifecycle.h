/**
 * @file lifecycle.h
 * @brief liblifecycle: the C client library of lifecycled.
 *
 * lifecycled gives ordinary Linux processes the iOS app lifecycle. An app it
 * starts inherits one end of a connected SOCK_SEQPACKET socket (fd 3, named
 * by $LIFECYCLE_FD); over it the daemon sends lifecycle events, one at a
 * time, and the app acknowledges each one before its deadline
 * (docs/protocol.md). This library speaks that protocol with a C ABI: an app
 * needs neither Swift nor any runtime but libc.
 *
 * @par Two ways to run
 *  - **Blocking**: lifecycle_run() is the app's main loop (like
 *    UIApplicationMain); it returns once willTerminate has been acknowledged.
 *  - **Poll-based**: the app adds lifecycle_fd() to its own poll/epoll/select
 *    loop and calls lifecycle_dispatch() when it is readable;
 *    lifecycle_dispatch() handles every pending message without blocking.
 *
 * @code
 *   static void entered_background(lifecycle_app *app, void *user) { save(user); }
 *
 *   int main(void) {
 *       lifecycle_callbacks cb = {0};
 *       cb.did_enter_background = entered_background;
 *       lifecycle_app *app = lifecycle_connect(&cb, sizeof cb, &my_state);
 *       if (!app && errno == ENOENT) app = lifecycle_standalone(&cb, sizeof cb, &my_state);
 *       if (!app) { fprintf(stderr, "%s\n", lifecycle_strerror(errno)); return 1; }
 *       int r = lifecycle_run(app);          // LIFECYCLE_TERMINATED or -1
 *       lifecycle_close(app);
 *       return r == LIFECYCLE_TERMINATED ? 0 : 1;
 *   }
 * @endcode
 *
 * In a poll-based loop:
 * @code
 *   for (;;) {
 *       int r = lifecycle_dispatch(app);     // never blocks (callbacks may)
 *       if (r != LIFECYCLE_OK) break;        // TERMINATED: exit; -1: error
 *       struct pollfd p[] = {{lifecycle_fd(app), POLLIN, 0}, ...the app's own fds...};
 *       poll(p, n, lifecycle_pending(app) ? 0 : timeout);
 *       ...
 *   }
 * @endcode
 *
 * @par Callbacks and acknowledgements
 * Each lifecycle event calls its callback (lifecycle_callbacks), from inside
 * lifecycle_dispatch() or lifecycle_run(), one at a time. When the callback
 * returns the library acknowledges the event, and only then does the next
 * one's callback run (the daemon sends the next one after the
 * acknowledgement, but for a held prewarm's launch events, which go
 * together). The callback must return before the event's deadline
 * (lifecycle_event_deadline(); 5 s by default, 250 ms for
 * willBeKilledForMemory) or the app is killed. A callback that needs longer
 * -- it waits for another thread, say -- calls lifecycle_defer() and
 * acknowledges later with lifecycle_acknowledge(); the deadline still
 * applies, and no other event's callback runs before that acknowledgement
 * (one the daemon sent meanwhile waits in the library: lifecycle_pending()).
 *
 * @par Wake events, URLs and restoration
 * performFetch and didReceiveRemoteNotification wake the app for a moment of
 * work in the background (manifest background modes `fetch` and
 * `remote-notification`); their answer says what the work found. The
 * callback (or, after lifecycle_defer(), the code that acknowledges) calls
 * lifecycle_set_fetch_result() before the event is acknowledged, and the
 * acknowledgement goes out as a `complete` message with that result; an
 * event acknowledged without one counts as LIFECYCLE_FETCH_NO_DATA. Their
 * deadline is longer (30 s by default), and an app woken for one is
 * suspended again after its answer. didReceiveRemoteNotification carries the
 * push's JSON payload (lifecycle_event_payload()); openURL, sent to an app
 * brought to the front (after its didBecomeActive) for a URL of a scheme its
 * manifest lists, the URL (lifecycle_event_url()); a not-running app is
 * launched for the URL instead. An app launched for one of these says why in
 * its launch options (lifecycle_launch_reason(), `launch.url`,
 * `push.payload`). Restoration data (at most LIFECYCLE_MAX_RESTORATION
 * bytes) that the app saved with lifecycle_save_restoration() in an earlier
 * run is handed back at launch, before willFinishLaunching:
 * lifecycle_restoration_data().
 *
 * @par Scenes
 * An app whose manifest sets `scenes = true` has scenes, like an iOS 13 app
 * with several windows: each scene session is told of its own transitions
 * (sceneWillConnect, sceneWillEnterForeground, sceneDidBecomeActive,
 * sceneWillResignActive, sceneDidEnterBackground, sceneDidDisconnect), one
 * event at a time among the app-level events, which keep coming as before
 * (the app is as active as its most active scene). Each scene event runs
 * its own callback (lifecycle_scene_fn) with the scene, a lifecycle_scene
 * handle: lifecycle_scene_name(), lifecycle_scene_display(),
 * lifecycle_scene_get_state() (already updated, as lifecycle_state() is),
 * lifecycle_scene_restored(). The library keeps the connected scenes
 * (lifecycle_scene_count(), lifecycle_scene_at(), lifecycle_find_scene()),
 * at most LIFECYCLE_MAX_SCENES; it forgets a scene once its
 * sceneDidDisconnect is acknowledged. A handle stays valid, the same
 * pointer, until then (or lifecycle_close()). didDiscardSceneSessions
 * names the sessions the user discarded (lifecycle_discard_fn). openURL to
 * a scene app names the scene the URL opens in (lifecycle_event_scene()).
 *
 * @par Thread safety
 *  - The library starts **no threads**, installs **no signal handlers** and
 *    keeps **no global state**: everything lives in the lifecycle_app
 *    object, so separate objects are independent. The process-wide things it
 *    touches are named where they are touched: lifecycle_connect() reads and
 *    unsets $LIFECYCLE_FD and $LIFECYCLE_RESUME_SOCKET (so call it early in
 *    main(), before starting threads that use the environment) and marks the
 *    socket close-on-exec; resuming the channel replaces the socket behind
 *    the channel's descriptor number (see Resuming);
 *    lifecycle_run() of a standalone app blocks SIGINT and SIGTERM in the
 *    calling thread while it runs (and restores the mask when it returns).
 *  - A lifecycle_app is **not synchronized**. Call the functions taking it
 *    from one thread at a time -- normally the thread that runs
 *    lifecycle_run() or lifecycle_dispatch(), the app's main thread. Every
 *    callback runs on that thread, inside those calls, and may call any
 *    function of this header on the same app except lifecycle_dispatch(),
 *    lifecycle_run() and lifecycle_close() (which fail with EBUSY there).
 *    A worker thread that finishes deferred work must hand the
 *    acknowledgement to the main thread (an eventfd or pipe in the app's
 *    own poll loop), not call lifecycle_acknowledge() itself.
 *  - lifecycle_event_name(), lifecycle_strerror() and lifecycle_now() take no
 *    app and may be called from any thread.
 *
 * @par Errors
 * Functions return -1 (or NULL, or 0 for a task id) and set errno;
 * lifecycle_strerror() explains an errno value as this library uses it, and
 * lifecycle_last_error() gives the detail of an app's last error (for a
 * malformed message, exactly what was wrong with it). The errno values used:
 *  - ENOENT      lifecycle_connect(): not started by lifecycled ($LIFECYCLE_FD
 *                is unset): run standalone.
 *  - EBADF, ENOTSOCK, EPROTOTYPE  $LIFECYCLE_FD (or the fd given) is not a
 *                usable SOCK_SEQPACKET socket.
 *  - EINVAL      a NULL or invalid argument (a token that is not pending, a
 *                callbacks struct from a newer header with unknown callbacks
 *                set, a task name that is not UTF-8, a fetch result outside
 *                a wake event).
 *  - EMSGSIZE    lifecycle_save_restoration(): more than
 *                LIFECYCLE_MAX_RESTORATION bytes (nothing is sent).
 *  - ENOMEM      out of memory.
 *  - EBUSY       lifecycle_dispatch(), lifecycle_run() or lifecycle_close()
 *                called from inside a callback.
 *  - ENOTCONN    lifecycle_dispatch() on a standalone app.
 *  - EPROTO      the daemon sent a message that does not decode (wrong
 *                version, unknown type, flags or event, truncated, trailing
 *                bytes, bad UTF-8, over LIFECYCLE_MAX_MESSAGE bytes), or
 *                broke the protocol's rules (an event while another awaits
 *                its acknowledgement; a scene event without a valid
 *                `scene`, a didDiscardSceneSessions without valid `scenes`,
 *                more than LIFECYCLE_MAX_SCENES scenes connected).
 *  - ENOBUFS     more than LIFECYCLE_MAX_QUEUED messages arrived while
 *                waiting for a background task reply, or kept while an
 *                event was deferred.
 *  - ECONNRESET  lifecycled closed the channel (and it could not be
 *                resumed within LIFECYCLE_RESUME_WAIT_MS, see Resuming).
 *  - EAGAIN      lifecycle_begin_background_task(): the daemon refused the
 *                task (no background time left, too many tasks, stopping).
 *  - ETIMEDOUT   lifecycle_begin_background_task(): no reply in 5 seconds, or
 *                the channel was resumed before the reply (see Resuming).
 *  - other       as returned by send(2), recv(2) or poll(2).
 *
 * A **channel error** (EPROTO, ENOBUFS, ECONNRESET, a failed send or recv)
 * is final: the library closes the socket, and from then on every call that
 * needs the channel fails with the same errno (lifecycle_fd() returns -1).
 * The daemon kills a channel-less app at its next deadline anyway: the usual
 * response is to exit (the Swift client exits by itself; this library leaves
 * that to the app). A channel that lifecycled closed is first resumed when
 * it can be (see Resuming): ECONNRESET then means that it could not.
 *
 * @par Resuming the channel after lifecycled restarts
 * The channel's socket dies with the daemon that made it. A daemon that can
 * take it back (docs/protocol.md, "Resuming the channel after the daemon
 * restarts") names a listening socket in $LIFECYCLE_RESUME_SOCKET, which
 * lifecycle_connect() reads and unsets with $LIFECYCLE_FD. Then, when the
 * channel breaks (end of file, ECONNRESET or EPIPE), the library does not
 * fail:
 *  - it blocks **inside the call that found the break** --
 *    lifecycle_dispatch(), lifecycle_run(), lifecycle_acknowledge(),
 *    lifecycle_begin_background_task(), lifecycle_end_background_task(),
 *    lifecycle_save_restoration(), also from inside a callback -- and runs
 *    no callback meanwhile. It connects to the resume socket, retrying
 *    every 100 ms (doubling up to 1 s), sends `resume` (the last
 *    acknowledgement sent, the tasks held open) and waits up to 5 s for
 *    `resumed`, all within
 *    LIFECYCLE_RESUME_WAIT_MS (60 s). Then the call goes on as if nothing had
 *    happened; after that time it fails with ECONNRESET, "lifecycled closed
 *    the channel", as without a resume socket;
 *  - the new socket takes the **same descriptor number** (dup3(),
 *    close-on-exec; blocking or not as the app left the old one), so an app
 *    that polls lifecycle_fd() with poll() or select() goes on polling the
 *    channel. An epoll set drops the old socket when it is closed: add
 *    lifecycle_fd() again before each epoll_wait() (EPOLL_CTL_ADD fails
 *    with EEXIST while it is still the same socket);
 *  - a lifecycle_begin_background_task() waiting for its reply when the
 *    channel breaks returns the **invalid id 0** once the channel is back
 *    (errno ETIMEDOUT; the daemon ends the task if it made one); ask again;
 *  - what the restarted daemon sends again is handled once: an event the
 *    app has handled is acknowledged again only if its acknowledgement was
 *    lost (never twice, and not while its callback runs or is deferred), and
 *    runs no callback (a wake event acknowledged again is answered with the
 *    result it had); a task already warned of its expiration runs no
 *    handler again; restoration data whose save found the break is sent
 *    again on the resumed channel.
 * Event deadlines are absolute, and a message keeps the one it was sent
 * with; the daemon itself gives an event owed across its crash its whole
 * time from its restart plus a second (the longest pause between resume
 * tries), and again from its sending on the resumed channel. An app
 * not started by a daemon that names a resume socket (or with
 * lifecycle_connect_fd()) finds a broken channel final at once, as before.
 *
 * @par Linking
 * `pkg-config --cflags --libs lifecycle`, or `-llifecycle`. The shared
 * library's soname is liblifecycle.so.1 and it exports only the functions
 * below (all named lifecycle_*).
 */
#ifndef LIFECYCLE_H
#define LIFECYCLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Marks the exported API (the library is built with -fvisibility=hidden). */
#if defined(__GNUC__)
#define LIFECYCLE_API __attribute__((visibility("default")))
#else
#define LIFECYCLE_API
#endif

/** Major version of this library; the soname is liblifecycle.so.MAJOR. */
#define LIFECYCLE_VERSION_MAJOR 1
/** Minor version: additions that keep the ABI. */
#define LIFECYCLE_VERSION_MINOR 2
/** Patch version: fixes. */
#define LIFECYCLE_VERSION_PATCH 0

/** The protocol version this library speaks (the header's version byte). */
#define LIFECYCLE_PROTOCOL_VERSION 1
/** No message on the channel is larger, in bytes: room for the largest
 *  restoration data (LIFECYCLE_MAX_RESTORATION) and 1024 bytes more. */
#define LIFECYCLE_MAX_MESSAGE 66560
/** Most restoration data an app may save (and is handed back), in bytes. */
#define LIFECYCLE_MAX_RESTORATION 65536
/** Longest remote-notification payload (push.payload), in UTF-8 bytes. */
#define LIFECYCLE_MAX_PUSH_PAYLOAD 4096
/** Longest background task name sent, in UTF-8 bytes (longer names are cut
 *  on a character boundary). */
#define LIFECYCLE_MAX_TASK_NAME 256
/** Most messages kept while lifecycle_begin_background_task() waits for its
 *  reply, or while an event is deferred; one more is a channel error
 *  (ENOBUFS). */
#define LIFECYCLE_MAX_QUEUED 64
/** How long lifecycle_begin_background_task() waits for the daemon's reply,
 *  in milliseconds (the daemon answers at once). */
#define LIFECYCLE_TASK_REPLY_TIMEOUT_MS 5000
/** Most scenes an app has connected at once; a scene event that would make
 *  one more is a channel error (EPROTO). */
#define LIFECYCLE_MAX_SCENES 64
/** Longest scene name, in bytes: 1 to 64 of A-Z a-z 0-9 . _ - */
#define LIFECYCLE_MAX_SCENE_NAME 64

/** The environment variable naming the inherited socket. */
#define LIFECYCLE_FD_ENV "LIFECYCLE_FD"
/** The environment variable naming the app (for logs). */
#define LIFECYCLE_APP_ENV "LIFECYCLE_APP"
/** The protocol version lifecycled speaks on the channel ("1"). A library
 *  that does not speak it refuses to connect (EPROTONOSUPPORT). */
#define LIFECYCLE_PROTOCOL_ENV "LIFECYCLE_PROTOCOL"
/** The environment variable naming the socket through which a broken
 *  channel is resumed after lifecycled restarts (see Resuming). */
#define LIFECYCLE_RESUME_SOCKET_ENV "LIFECYCLE_RESUME_SOCKET"
/** Set to "1" when lifecycled starts the app ahead of use (prewarming):
 *  lifecycle_connect() then tells the daemon the app waits for its first
 *  event, and the daemon holds it there, frozen, until a use. Connect once
 *  the app is ready for willFinishLaunching. */
#define LIFECYCLE_PREWARM_ENV "LIFECYCLE_PREWARM"
/** How long a broken channel is resumed for, in all, in milliseconds,
 *  before the break is final (ECONNRESET). */
#define LIFECYCLE_RESUME_WAIT_MS 60000

/** lifecycle_dispatch() and lifecycle_run(): nothing more to do for now. */
#define LIFECYCLE_OK 0
/** lifecycle_dispatch(), lifecycle_run() and lifecycle_acknowledge():
 *  willTerminate has been handled and acknowledged; the app must exit now
 *  (it is killed when the terminate timeout runs out). */
#define LIFECYCLE_TERMINATED 1

/** An app's connection to lifecycled (opaque). */
typedef struct lifecycle_app lifecycle_app;

/** The lifecycle events, with their wire numbers. */
typedef enum lifecycle_event {
    LIFECYCLE_EVENT_NONE = 0,                        /**< no event (outside callbacks) */
    LIFECYCLE_EVENT_WILL_FINISH_LAUNCHING = 1,       /**< willFinishLaunching */
    LIFECYCLE_EVENT_DID_FINISH_LAUNCHING = 2,        /**< didFinishLaunching */
    LIFECYCLE_EVENT_DID_BECOME_ACTIVE = 3,           /**< didBecomeActive */
    LIFECYCLE_EVENT_WILL_RESIGN_ACTIVE = 4,          /**< willResignActive */
    LIFECYCLE_EVENT_DID_ENTER_BACKGROUND = 5,        /**< didEnterBackground */
    LIFECYCLE_EVENT_WILL_ENTER_FOREGROUND = 6,       /**< willEnterForeground */
    LIFECYCLE_EVENT_WILL_TERMINATE = 7,              /**< willTerminate */
    LIFECYCLE_EVENT_DID_RECEIVE_MEMORY_WARNING = 8,  /**< didReceiveMemoryWarning */
    LIFECYCLE_EVENT_WILL_BE_KILLED_FOR_MEMORY = 9,   /**< willBeKilledForMemory */
    LIFECYCLE_EVENT_PERFORM_FETCH = 10,              /**< performFetch (a wake event) */
    LIFECYCLE_EVENT_DID_RECEIVE_REMOTE_NOTIFICATION = 11, /**< didReceiveRemoteNotification (a wake event) */
    LIFECYCLE_EVENT_OPEN_URL = 12,                   /**< openURL */
    LIFECYCLE_EVENT_SCENE_WILL_CONNECT = 13,         /**< sceneWillConnect (a scene event, see Scenes) */
    LIFECYCLE_EVENT_SCENE_WILL_ENTER_FOREGROUND = 14, /**< sceneWillEnterForeground */
    LIFECYCLE_EVENT_SCENE_DID_BECOME_ACTIVE = 15,    /**< sceneDidBecomeActive */
    LIFECYCLE_EVENT_SCENE_WILL_RESIGN_ACTIVE = 16,   /**< sceneWillResignActive */
    LIFECYCLE_EVENT_SCENE_DID_ENTER_BACKGROUND = 17, /**< sceneDidEnterBackground */
    LIFECYCLE_EVENT_SCENE_DID_DISCONNECT = 18,       /**< sceneDidDisconnect */
    LIFECYCLE_EVENT_DID_DISCARD_SCENE_SESSIONS = 19, /**< didDiscardSceneSessions */
} lifecycle_event;

/** What the work a wake event asked for found (UIBackgroundFetchResult), as
 *  the answer's byte on the wire: see lifecycle_set_fetch_result(). */
typedef enum lifecycle_fetch_result {
    LIFECYCLE_FETCH_NEW_DATA = 0, /**< new content was fetched */
    LIFECYCLE_FETCH_NO_DATA = 1,  /**< nothing new (also: acknowledged without a result) */
    LIFECYCLE_FETCH_FAILED = 2,   /**< the attempt failed */
} lifecycle_fetch_result;

/** The app's state as it sees itself (like UIApplication.State). */
typedef enum lifecycle_app_state {
    LIFECYCLE_STATE_INACTIVE = 0,   /**< launching, or in the foreground without focus */
    LIFECYCLE_STATE_ACTIVE = 1,     /**< in the foreground with focus */
    LIFECYCLE_STATE_BACKGROUND = 2, /**< in the background (suspended apps run no code) */
} lifecycle_app_state;

/** One scene of an app that opted in to scenes (opaque; see Scenes). */
typedef struct lifecycle_scene lifecycle_scene;

/** Where a scene has been told it is (docs/lifecycle.md, "Scenes"), from
 *  the least to the most active: the values compare in that order. */
typedef enum lifecycle_scene_state {
    LIFECYCLE_SCENE_UNATTACHED = 0, /**< not connected: during sceneDidDisconnect */
    LIFECYCLE_SCENE_BACKGROUND = 1, /**< connected, in the background */
    LIFECYCLE_SCENE_INACTIVE = 2,   /**< in the foreground without focus */
    LIFECYCLE_SCENE_ACTIVE = 3,     /**< in the foreground with focus */
} lifecycle_scene_state;

/** A lifecycle callback. `userdata` is the pointer given to lifecycle_connect(). */
typedef void (*lifecycle_event_fn)(lifecycle_app *app, void *userdata);

/** A scene event's callback: `scene` is the scene it is about, its state
 *  already updated (lifecycle_scene_get_state()). */
typedef void (*lifecycle_scene_fn)(lifecycle_app *app, const lifecycle_scene *scene, void *userdata);

/** didDiscardSceneSessions' callback: the names of the `count` (>= 1)
 *  discarded scene sessions, in the order sent; valid until the event is
 *  acknowledged. */
typedef void (*lifecycle_discard_fn)(lifecycle_app *app, const char *const *scenes, size_t count, void *userdata);

/** A background task's expiration handler: the task's time is about to run
 *  out (docs/lifecycle.md: 5 s before by default). End the task, quickly. */
typedef void (*lifecycle_expiration_fn)(lifecycle_app *app, uint32_t task, void *userdata);

/**
 * The app's lifecycle callbacks. Every member may be NULL. Zero the struct
 * (`lifecycle_callbacks cb = {0};`) and set what the app needs; pass
 * `sizeof cb` to lifecycle_connect() so that later versions can add members.
 *
 * Each callback runs when its event arrives, after lifecycle_state() has
 * been updated; the event is acknowledged when it returns (unless it
 * called lifecycle_defer()). An event whose own member is NULL goes to `any_event`
 * if that is set, else it is just acknowledged.
 */
typedef struct lifecycle_callbacks {
    /** Launching; launch options (lifecycle_launch_option() ...) are set. */
    lifecycle_event_fn will_finish_launching;
    /** Launched; the next event says where (foreground or background). */
    lifecycle_event_fn did_finish_launching;
    /** In the foreground with focus. */
    lifecycle_event_fn did_become_active;
    /** Losing focus (interruption, or on the way to the background). */
    lifecycle_event_fn will_resign_active;
    /** In the background: save state; suspended after return unless a
     *  background task was begun or a background mode applies. */
    lifecycle_event_fn did_enter_background;
    /** Coming back from the background. */
    lifecycle_event_fn will_enter_foreground;
    /** The app is ending: save, then return; lifecycle_run()/dispatch()
     *  return LIFECYCLE_TERMINATED after the acknowledgement. */
    lifecycle_event_fn will_terminate;
    /** Memory runs short: free what can be rebuilt. */
    lifecycle_event_fn did_receive_memory_warning;
    /** About to be killed for memory (manifest `memory.last_notice`): save
     *  what must survive, within 250 ms by default. */
    lifecycle_event_fn will_be_killed_for_memory;
    /** Every event whose own member is NULL (those above and below). */
    void (*any_event)(lifecycle_app *app, lifecycle_event event, void *userdata);
    /* Since 1.1, after any_event so that apps built with 1.0 keep working. */
    /** A background fetch (manifest mode `fetch`): get new content, then
     *  answer with lifecycle_set_fetch_result() before the acknowledgement
     *  (30 s by default). */
    lifecycle_event_fn perform_fetch;
    /** A remote notification (manifest mode `remote-notification`), its
     *  JSON payload in lifecycle_event_payload(); answered like a fetch. */
    lifecycle_event_fn did_receive_remote_notification;
    /** Open the URL of lifecycle_event_url() (a scheme the manifest lists);
     *  the app has just been brought to the front for it. */
    lifecycle_event_fn open_url;
    /* Since 1.2, after open_url so that apps built with 1.0 and 1.1 keep
     * working: the scene events (manifest `scenes = true`, see Scenes). */
    /** A scene session is connected: the scene is now BACKGROUND;
     *  lifecycle_scene_restored() says whether its session is restored. */
    lifecycle_scene_fn scene_will_connect;
    /** The scene is coming to the foreground: now INACTIVE. */
    lifecycle_scene_fn scene_will_enter_foreground;
    /** The scene has focus: now ACTIVE. */
    lifecycle_scene_fn scene_did_become_active;
    /** The scene loses focus: now INACTIVE. */
    lifecycle_scene_fn scene_will_resign_active;
    /** The scene is in the background: now BACKGROUND. */
    lifecycle_scene_fn scene_did_enter_background;
    /** The scene is gone (its session stays unless discarded): now
     *  UNATTACHED; the library forgets it once the event is acknowledged. */
    lifecycle_scene_fn scene_did_disconnect;
    /** The user discarded these scene sessions: drop what was kept for them. */
    lifecycle_discard_fn did_discard_scene_sessions;
} lifecycle_callbacks;

/** An acknowledgement token from lifecycle_defer(); 0 is no token. */
typedef uint64_t lifecycle_token;

/* ---------------------------------------------------------------------- */
/** @name Connecting */
/**@{*/

/**
 * Connects to lifecycled through the inherited socket named by
 * $LIFECYCLE_FD. On success the socket is marked close-on-exec and
 * $LIFECYCLE_FD is unset, so the app's own children do not inherit it;
 * $LIFECYCLE_RESUME_SOCKET, the socket for resuming the channel after
 * lifecycled restarts (see Resuming), is kept and unset too. It is used
 * only with a name ($LIFECYCLE_APP, UTF-8, at most 256 bytes) to give and
 * a path that fits a Unix socket address; otherwise a broken channel is
 * final.
 * `callbacks` is copied (`callbacks_size` is `sizeof(lifecycle_callbacks)`
 * as the app was compiled; members beyond it are NULL); it may be NULL, and
 * then every event is just acknowledged. `userdata` is passed to every
 * callback. Nothing is read from the socket yet.
 *
 * @return the app, or NULL with errno:
 *   ENOENT when $LIFECYCLE_FD is unset or empty -- the app was not started
 *   by lifecycled; it may run standalone (lifecycle_standalone());
 *   EBADF when it is not a decimal number or names no open fd; ENOTSOCK or
 *   EPROTOTYPE when that fd is not a SOCK_SEQPACKET socket (the variable is
 *   then left as it was); EINVAL when `callbacks_size` exceeds
 *   sizeof(lifecycle_callbacks) and a member this library does not know is
 *   set; ENOMEM.
 */
LIFECYCLE_API lifecycle_app *lifecycle_connect(const lifecycle_callbacks *callbacks, size_t callbacks_size,
                                               void *userdata);

/**
 * Like lifecycle_connect(), for a connected SOCK_SEQPACKET socket the app
 * got some other way (tests, a launcher of its own). The environment is not
 * touched; the fd is not made close-on-exec; a broken channel is final (it
 * is not resumed). On success the app owns `fd` (lifecycle_close() closes
 * it); on failure it is left open.
 */
LIFECYCLE_API lifecycle_app *lifecycle_connect_fd(int fd, const lifecycle_callbacks *callbacks,
                                                  size_t callbacks_size, void *userdata);

/**
 * An app without lifecycled, for running outside it (as the Swift client
 * does): lifecycle_run() delivers willFinishLaunching (launch.mode =
 * foreground), didFinishLaunching and didBecomeActive itself, waits for
 * SIGINT or SIGTERM (blocked in the calling thread meanwhile), then delivers
 * willResignActive, didEnterBackground and willTerminate and returns
 * LIFECYCLE_TERMINATED. Background tasks get ids but never expire.
 * lifecycle_fd() is -1 and lifecycle_dispatch() fails with ENOTCONN: a
 * standalone app runs with lifecycle_run(). The library prints nothing; say
 * on stderr that the app runs standalone if that helps.
 * @return the app, or NULL with errno EINVAL or ENOMEM.
 */
LIFECYCLE_API lifecycle_app *lifecycle_standalone(const lifecycle_callbacks *callbacks, size_t callbacks_size,
                                                  void *userdata);

/**
 * Closes the socket (if still open) and frees the app. Open background
 * tasks are not ended (the daemon forgets them when the app exits).
 * @return 0; -1 with EBUSY from inside a callback (nothing is done); -1 with
 *   EINVAL for NULL.
 */
LIFECYCLE_API int lifecycle_close(lifecycle_app *app);

/** 1 when connected to lifecycled (even after a channel error), 0 when
 *  standalone. */
LIFECYCLE_API int lifecycle_is_supervised(const lifecycle_app *app);

/** The name lifecycled knows the app by ($LIFECYCLE_APP when the app was
 *  created), or NULL. Valid until lifecycle_close(). */
LIFECYCLE_API const char *lifecycle_app_name(const lifecycle_app *app);

/**@}*/
/* ---------------------------------------------------------------------- */
/** @name Running */
/**@{*/

/**
 * The socket to watch for readability (POLLIN) in the app's own event loop;
 * then call lifecycle_dispatch(). Do not read from or write to it. The
 * number stays the same when the channel is resumed (see Resuming). -1 with
 * errno for a standalone app (ENOTCONN) or after a channel error (its errno).
 */
LIFECYCLE_API int lifecycle_fd(const lifecycle_app *app);

/**
 * Handles every message that is pending -- queued ones first (see
 * lifecycle_pending()), then whatever the socket holds -- without waiting
 * for more: runs callbacks, sends acknowledgements, runs expiration
 * handlers. Returns as soon as willTerminate has been acknowledged.
 *
 * @return LIFECYCLE_OK; LIFECYCLE_TERMINATED once willTerminate has been
 *   acknowledged (also on every later call): exit; -1 with errno: EBUSY
 *   (from a callback), ENOTCONN (standalone), or a channel error (the
 *   channel is closed, see Errors).
 */
LIFECYCLE_API int lifecycle_dispatch(lifecycle_app *app);

/**
 * Runs the app: waits for messages and handles them (as lifecycle_dispatch()
 * does) until willTerminate has been acknowledged. For a standalone app, see
 * lifecycle_standalone(). Interrupted system calls are restarted.
 *
 * @return LIFECYCLE_TERMINATED: exit promptly; -1 with errno on an error
 *   (ECONNRESET when lifecycled closed the channel, ...; EBUSY from a
 *   callback).
 */
LIFECYCLE_API int lifecycle_run(lifecycle_app *app);

/**
 * How many messages wait in the library's queue rather than in the socket,
 * ready to be handled. They are queued while lifecycle_begin_background_task()
 * waits for its reply, and when an event comes while another is deferred (the
 * daemon sends a held prewarm's launch events together): those wait for the
 * deferred event's acknowledgement, and count from then on. lifecycle_dispatch()
 * handles them first. An app with its own loop must not sleep in poll() while
 * this is non-zero (the socket may not be readable): call lifecycle_dispatch().
 */
LIFECYCLE_API size_t lifecycle_pending(const lifecycle_app *app);

/**@}*/
/* ---------------------------------------------------------------------- */
/** @name The current event and acknowledgements */
/**@{*/

/**
 * The event being handled (inside its callback) or awaiting a deferred
 * acknowledgement; LIFECYCLE_EVENT_NONE otherwise.
 */
LIFECYCLE_API lifecycle_event lifecycle_current_event(const lifecycle_app *app);

/**
 * The CLOCK_MONOTONIC time (ns, see lifecycle_now()) by which the current
 * event must be acknowledged, or -1 when it has none (or there is no current
 * event). After willTerminate it is when the app must have exited.
 */
LIFECYCLE_API int64_t lifecycle_event_deadline(const lifecycle_app *app);

/**
 * Inside a callback: do not acknowledge the current event when the callback
 * returns; return a token for lifecycle_acknowledge() instead. The daemon
 * sends no other event before that acknowledgement, and the event's
 * deadline still applies (missing it gets the app killed). Meanwhile
 * lifecycle_dispatch() goes on handling background task replies and
 * expirations. Calling it again in the same callback returns the same token.
 * @return the token; 0 with EINVAL outside a callback (or when the current
 *   event was already acknowledged).
 */
LIFECYCLE_API lifecycle_token lifecycle_defer(lifecycle_app *app);

/**
 * Acknowledges the event deferred with `token`, from the app's thread (in
 * or out of a callback).
 * @return LIFECYCLE_OK; LIFECYCLE_TERMINATED when it was willTerminate
 *   (the app must exit; lifecycle_dispatch()/lifecycle_run() return it from
 *   now on); -1 with EINVAL when `token` is not the pending one (already
 *   acknowledged, or never given), or a channel error.
 */
LIFECYCLE_API int lifecycle_acknowledge(lifecycle_app *app, lifecycle_token token);

/**
 * Sets the answer to the current wake event (performFetch or
 * didReceiveRemoteNotification): its acknowledgement -- when the callback
 * returns, or lifecycle_acknowledge() after lifecycle_defer() -- is sent as
 * a `complete` message with this result. Without it the event is
 * acknowledged plainly, which the daemon counts as LIFECYCLE_FETCH_NO_DATA.
 * May be called more than once; the last result set is sent. The daemon
 * spaces an app's fetches by its answers (no data, answer after answer,
 * makes them rarer).
 * @return 0; -1 with EINVAL when the current event is not a wake event (or
 *   is already acknowledged) or `result` is not a lifecycle_fetch_result.
 */
LIFECYCLE_API int lifecycle_set_fetch_result(lifecycle_app *app, lifecycle_fetch_result result);

/**
 * An option of the current event by key, or NULL (also when there is no
 * current event). didReceiveRemoteNotification carries `push.payload`,
 * openURL `url` (and `scene` for a scene app), the scene events `scene` and
 * `display` (sceneWillConnect `session` too), didDiscardSceneSessions
 * `scenes`; the launch events carry the launch options. Valid until
 * the event is acknowledged. Values are NUL-terminated UTF-8 (a value
 * containing U+0000 appears cut there); when a key repeats, the first wins.
 */
LIFECYCLE_API const char *lifecycle_event_option(const lifecycle_app *app, const char *key);

/** In didReceiveRemoteNotification: the notification's JSON payload (at
 *  most LIFECYCLE_MAX_PUSH_PAYLOAD bytes), as lifecycle_event_option(app,
 *  "push.payload"); NULL otherwise. Valid until the event is acknowledged. */
LIFECYCLE_API const char *lifecycle_event_payload(const lifecycle_app *app);

/** In openURL: the URL to open, as lifecycle_event_option(app, "url"); NULL
 *  otherwise. Valid until the event is acknowledged. */
LIFECYCLE_API const char *lifecycle_event_url(const lifecycle_app *app);

/**@}*/
/* ---------------------------------------------------------------------- */
/** @name State and launch options */
/**@{*/

/** The app's state: inactive until the first event, then as the events say
 *  (willFinishLaunching in the background makes it BACKGROUND). It changes
 *  before the event's callback runs. */
LIFECYCLE_API lifecycle_app_state lifecycle_state(const lifecycle_app *app);

/**
 * 1 when this run was launched into the background, 0 into the foreground,
 * -1 before the launch events (no launch options yet).
 */
LIFECYCLE_API int lifecycle_launched_in_background(const lifecycle_app *app);

/**
 * Why the previous run of the app ended: a stable code (`exited`,
 * `signaled`, `launch-watchdog`, `stopped-by-user`, `memory-pressure`, ...,
 * see docs/protocol.md); NULL on a first run or before the launch events.
 * Launch options are set by willFinishLaunching and stay valid until
 * lifecycle_close().
 */
LIFECYCLE_API const char *lifecycle_previous_termination_reason(const lifecycle_app *app);

/** A human-readable description of the previous termination, or NULL. */
LIFECYCLE_API const char *lifecycle_previous_termination_description(const lifecycle_app *app);

/** When the previous run ended, in seconds since the epoch; -1 when unknown. */
LIFECYCLE_API double lifecycle_previous_termination_time(const lifecycle_app *app);

/**
 * Why this run was launched (the launch option `launch.reason`): `user`
 * (launched, activated or restarted by someone), `relaunch` (its crash
 * policy), `fetch` (a background fetch follows), `remote-notification`
 * (the payload is in the launch option `push.payload`) or `url` (the URL is
 * in `launch.url`); NULL before the launch events or from a daemon that
 * does not say. A launch option: valid until lifecycle_close().
 */
LIFECYCLE_API const char *lifecycle_launch_reason(const lifecycle_app *app);

/**
 * Any launch option by key (`launch.mode`, `previous.reason`,
 * `launch.reason`, `launch.url`, `push.payload` (a push the app was
 * launched for, or one held for it while it could not be woken),
 * `restoration.size`, ... and keys future daemons add), or NULL. Values
 * are NUL-terminated UTF-8; a value containing U+0000 appears cut there.
 * When a key repeats, the first wins.
 */
LIFECYCLE_API const char *lifecycle_launch_option(const lifecycle_app *app, const char *key);

/** The number of launch options. */
LIFECYCLE_API size_t lifecycle_launch_option_count(const lifecycle_app *app);

/**
 * The launch option at `index` (in the order sent).
 * @return 0 and sets *key and *value (either may be NULL); -1 with EINVAL
 *   when `index` is out of range.
 */
LIFECYCLE_API int lifecycle_launch_option_at(const lifecycle_app *app, size_t index, const char **key,
                                             const char **value);

/**@}*/
/* ---------------------------------------------------------------------- */
/** @name Scenes */
/**@{*/

/**
 * The scene the current event is about: the scene of a scene event (also
 * in `any_event`, and during a deferral), the connected scene an openURL
 * names in its option `scene`; NULL otherwise (app-level events,
 * didDiscardSceneSessions, an openURL to a scene not connected, no current
 * event).
 */
LIFECYCLE_API const lifecycle_scene *lifecycle_event_scene(const lifecycle_app *app);

/** The number of scenes the library knows to be connected (those in
 *  sceneDidDisconnect count until it is acknowledged); 0 for an app
 *  without scenes. */
LIFECYCLE_API size_t lifecycle_scene_count(const lifecycle_app *app);

/** The scene at `index`, in the order the scenes were first heard of
 *  (removing one moves the later ones down); NULL with EINVAL when `index`
 *  is out of range. */
LIFECYCLE_API const lifecycle_scene *lifecycle_scene_at(const lifecycle_app *app, size_t index);

/** The connected scene named `name`, or NULL. */
LIFECYCLE_API const lifecycle_scene *lifecycle_find_scene(const lifecycle_app *app, const char *name);

/** The scene's name: 1 to LIFECYCLE_MAX_SCENE_NAME of A-Z a-z 0-9 . _ -,
 *  unique within the app. Valid as long as the handle. NULL for NULL. */
LIFECYCLE_API const char *lifecycle_scene_name(const lifecycle_scene *scene);

/** The display the scene is on (its events' option `display`; "" when the
 *  daemon never said). Valid until the scene's next event. NULL for NULL. */
LIFECYCLE_API const char *lifecycle_scene_display(const lifecycle_scene *scene);

/** Where the scene is: the state its latest event left it in, updated
 *  before the event's callback runs (UNATTACHED during sceneDidDisconnect);
 *  UNATTACHED for NULL. */
LIFECYCLE_API lifecycle_scene_state lifecycle_scene_get_state(const lifecycle_scene *scene);

/** 1 when the scene's latest sceneWillConnect restored its session
 *  (`session` = `restored`: connected again after a relaunch or a
 *  disconnection for memory), 0 for a new session (or a scene heard of
 *  without a sceneWillConnect). */
LIFECYCLE_API int lifecycle_scene_restored(const lifecycle_scene *scene);

/**@}*/
/* ---------------------------------------------------------------------- */
/** @name State restoration */
/**@{*/

/**
 * The restoration data handed back at launch: what the app saved with
 * lifecycle_save_restoration() in an earlier run, received just before
 * willFinishLaunching (whose launch option `restoration.size` gives its
 * size). Sets *size (if `size` is not NULL) to its length. The bytes are
 * followed by a NUL byte not counted in *size, so that text can be used as
 * a string. Valid until lifecycle_close().
 * @return the data; NULL (and *size 0) when none was handed over -- a first
 *   run, nothing saved, or data the daemon discarded (after a user quit or
 *   a crash during launch).
 */
LIFECYCLE_API const void *lifecycle_restoration_data(const lifecycle_app *app, size_t *size);

/**
 * Asks lifecycled to keep `size` bytes of `data` and hand them back at the
 * app's next launch (lifecycle_restoration_data()), like iOS state
 * restoration: save what the user was doing when entering the background.
 * Each save replaces the one before; `size` 0 (`data` may then be NULL)
 * forgets what was kept. The daemon discards the data when the user quits
 * the app or a launch crashes. A standalone app has nowhere to save: 0,
 * nothing kept.
 * @return 0; -1 with errno: EMSGSIZE when `size` exceeds
 *   LIFECYCLE_MAX_RESTORATION (nothing is sent); EINVAL (NULL `app`, or
 *   NULL `data` with a size); or a channel error.
 */
LIFECYCLE_API int lifecycle_save_restoration(lifecycle_app *app, const void *data, size_t size);

/**@}*/
/* ---------------------------------------------------------------------- */
/** @name Background tasks */
/**@{*/

/**
 * Asks for time to finish work in the background (like
 * UIApplication.beginBackgroundTask). Sends the request and waits for the
 * daemon's reply (at most LIFECYCLE_TASK_REPLY_TIMEOUT_MS); messages that
 * arrive meanwhile are kept, in order, for lifecycle_dispatch() (see
 * lifecycle_pending()). Call lifecycle_end_background_task() when done: when
 * the last task ends in the background the app is suspended. A reply that
 * arrives after the wait gave up has its task ended at once.
 *
 * @param name  the task's name for status and logs (UTF-8, cut to
 *              LIFECYCLE_MAX_TASK_NAME bytes), or NULL for "task-N".
 * @param expiration  called from lifecycle_dispatch()/lifecycle_run() shortly
 *              before the background time runs out (may be NULL); it should
 *              end the task. Tasks still open when the time is up are killed
 *              with the app.
 * @param userdata  passed to `expiration`.
 * @return the task id; 0 (the invalid id) with errno: EAGAIN when the
 *   daemon refused (no time left, too many tasks, the app is stopping);
 *   ETIMEDOUT (no reply in time, or the channel broke and was resumed
 *   meanwhile); EINVAL (name not UTF-8); ENOMEM; or a channel error.
 *   A standalone app gets an id that never expires.
 */
LIFECYCLE_API uint32_t lifecycle_begin_background_task(lifecycle_app *app, const char *name,
                                                       lifecycle_expiration_fn expiration, void *userdata);

/**
 * Ends a background task; its expiration handler will not run. Ending 0 or
 * an unknown (or already ended) task does nothing (as on iOS).
 * @return 0, or -1 with errno on a channel error.
 */
LIFECYCLE_API int lifecycle_end_background_task(lifecycle_app *app, uint32_t task);

/**
 * Background time left for background tasks, in nanoseconds (>= 0); -1 when
 * no budget applies: not in the background, or a continuous background mode
 * (no budget end was sent).
 */
LIFECYCLE_API int64_t lifecycle_background_time_remaining(const lifecycle_app *app);

/**@}*/
/* ---------------------------------------------------------------------- */
/** @name Utilities (any thread) */
/**@{*/

/** The event's name as docs/protocol.md spells it ("didEnterBackground",
 *  "openURL"), or NULL for an unknown value. A static string. */
LIFECYCLE_API const char *lifecycle_event_name(lifecycle_event event);

/** CLOCK_MONOTONIC now, in nanoseconds: the clock of every deadline. */
LIFECYCLE_API int64_t lifecycle_now(void);

/**
 * What an errno value means coming from this library ("not started by
 * lifecycled ($LIFECYCLE_FD is not set)", "lifecycled closed the channel",
 * ...); strerror() for values it does not use specially. Never NULL.
 */
LIFECYCLE_API const char *lifecycle_strerror(int errnum);

/**
 * The detail of the app's last error ("protocol violation by the daemon:
 * truncated: deadline needs 8 bytes at offset 12, 3 left"), or "" when
 * there was none. Valid until the next call on the app.
 */
LIFECYCLE_API const char *lifecycle_last_error(const lifecycle_app *app);

/**@}*/

#ifdef __cplusplus
}
#endif

#endif /* LIFECYCLE_H */
