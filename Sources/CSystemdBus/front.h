// The bus half's own declarations, shared by its files (not seen by Swift):
//   front.c       the connection, the name, the manager's vtable, open/close
//   objects.c     the objects the daemon pushes (apps, displays, scenes): kept
//                 values, the diff that decides what is signalled, vtables
//   calls.c       commands: options, credentials, polkit, handing on, replying
//   operations.c  operations and monitors
#ifndef LC_FRONT_INTERNAL_H
#define LC_FRONT_INTERNAL_H
#define _GNU_SOURCE
#include "BusFront.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>
#include <systemd/sd-bus.h>

#define NAME "io.lifecycled.Lifecycle1"
#define ROOT "/io/lifecycled/Lifecycle1"
#define APPS ROOT "/app"
#define OPERATIONS ROOT "/operation"
#define MANAGER_IFACE NAME ".Manager"
#define APP_IFACE NAME ".App"
#define DISPLAY_IFACE NAME ".Display"
#define SCENE_IFACE NAME ".Scene"
#define DISPLAYS ROOT "/display"
#define OPERATION_IFACE NAME ".Operation"
#define MONITORS ROOT "/monitor"
#define MONITOR_IFACE NAME ".Monitor"
/// Monitors one connection may hold, and all of them.
#define MONITORS_PER_SENDER 8
#define MONITORS_MAX 256
/// Messages waiting to be written to the bus daemon beyond which a
/// monitor's records are dropped (and counted, for its Lost signal): a
/// stalled bus daemon must not grow the daemon's memory without bound.
#define QUEUE_HIGH 4096
#define NO_SUCH_APP NAME ".Error.NoSuchApp"
#define POLKIT "org.freedesktop.PolicyKit1"
/// How long polkit may take: longer when it may ask someone for a password.
#define POLKIT_USEC (25ULL * 1000000ULL)
#define POLKIT_INTERACTIVE_USEC (120ULL * 1000000ULL)
/// Calls of one sender waiting for their credentials at once.
#define PENDING_PER_SENDER 16
/// Callers whose credentials are kept: a unique name is never given to
/// another connection while the bus daemon lives, and a connection's
/// credentials are the ones it had when it connected, so they are asked
/// for once (the cache is emptied with a new connection to a bus).
#define CREDENTIALS_KEPT 64
#define GROUPS_KEPT 64
/// Calls waiting for one operation at once.
#define WAITERS_MAX 64
/// How long a finished operation stays, for a late Wait.
#define OPERATION_KEPT_USEC (60ULL * 1000000ULL)

#define OPTIONS "a{sv}"
#define EMITS SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE
/// Anyone may call: the daemon decides (sd-bus would otherwise ask the bus,
/// synchronously, whether the caller is root, and refuse everyone else).
#define OPEN SD_BUS_VTABLE_UNPRIVILEGED

/// Values a kept object holds: strings and numbers (u, b and t
/// properties all kept as 64 bits), in slots its kind names.
#define STRING_SLOTS 10
#define NUMBER_SLOTS 6

struct object {
    lc_front *front;
    int kind;  // LC_FRONT_APP, _DISPLAY, _SCENE
    char *key, *path;
    char *s[STRING_SLOTS];
    uint64_t n[NUMBER_SLOTS];
    uint32_t changed;  // property bits since the last flush
    int announced;     // InterfacesAdded sent on this connection
    int removing;
    int queued;
};

struct operation {
    lc_front *front;
    uint64_t id;
    char *verb, *app, *requester, *path;
    int done;
    char *result, *reason;
    sd_bus_message **waiters;
    size_t n_waiters;
    sd_event_source *collect;
    struct operation *next;
};

struct monitor {
    lc_front *front;
    uint64_t id;
    char *path, *owner;
    char **apps;  // NULL: every app
    size_t n_apps;
    uint64_t sequence;
    uint64_t lost_first, lost_last;  // records dropped, not yet told (0: none)
    sd_bus_slot *gone;   // NameOwnerChanged of the owner (asked asynchronously)
    sd_bus_slot *check;  // GetNameOwner of the owner, once the match is in
    int closed;
    struct monitor *next;
};

struct credentials {
    char *sender;
    uint32_t uid, pid;
    uint32_t gids[GROUPS_KEPT];
    size_t n_gids;
};

struct pending {
    lc_front *front;
    sd_bus_message *call;
    sd_bus_slot *slot;
    char *verb, *app, *scene, *display, *argument, *sender;
    int background;
    int interactive;  // the caller allows interactive authorization
    struct credentials *credentials;  // while polkit is asked
    struct pending *next;
};


struct lc_front {
    sd_event *event;
    int64_t priority;
    char *version;
    lc_front_callbacks cb;
    sd_bus *bus;
    int serving;
    int said_down;
    int said_refused;
    sd_event_source *retry;
    uint64_t retry_usec;
    struct object **objects;  // sorted by path
    size_t n_objects, cap_objects;
    struct object **dirty;  // in the order they changed
    size_t n_dirty, cap_dirty;
    struct operation *operations;
    uint64_t next_operation;
    struct pending *pending;
    struct credentials kept[CREDENTIALS_KEPT];
    size_t next_kept;
    struct monitor *monitors;
    uint64_t next_monitor;
    sd_event_source *flush_later;  // while the bus daemon takes no messages
    sd_event_source *collect_later;  // monitors closed from inside a bus callback
    /// Replies held until the state the call changed is saved (lc_front_flush).
    sd_bus_message **held;
    size_t n_held, cap_held;
};

// front.c
void lc_say(lc_front *f, int priority, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
char *lc_dup0(const char *s);
int lc_set_string(char **slot, const char *value);
int lc_get_string(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *reply, void *userdata,
                  sd_bus_error *e);
int lc_get_u64(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *reply, void *userdata,
               sd_bus_error *e);

// objects.c
int lc_objects_register(lc_front *f, sd_bus *bus);
/// One object's entry of GetManagedObjects (`{oa{sa{sv}}}`): its interface
/// with every property the vtable lists, read by the vtable's own getters.
int lc_append_object(sd_bus_message *m, const sd_bus_vtable *vtable, const char *path, const char *iface,
                     void *object);
/// GetManagedObjects, written in one pass over the kept values (sd-bus's
/// own walks every registered vtable for every object).
int lc_managed_objects(sd_bus_message *call, lc_front *f);
/// The connection is up (every object announced: clients ask
/// GetManagedObjects) or gone (none is).
void lc_objects_announced(lc_front *f, int announced);
void lc_objects_free(lc_front *f);
int lc_get_app(sd_bus_message *m, void *userdata, sd_bus_error *e);
int lc_list_apps(sd_bus_message *m, void *userdata, sd_bus_error *e);

// calls.c
/// A command on `app` (or none), with the display or scene its object
/// implies (NULL: none); `argument`: it takes a string first; `options`:
/// then an a{sv}.
int lc_command(sd_bus_message *m, lc_front *f, const char *app, const char *display, const char *scene, int argument,
               int options, sd_bus_error *e);
int lc_manager_command(sd_bus_message *m, void *userdata, sd_bus_error *e);
int lc_report_shown(sd_bus_message *m, void *userdata, sd_bus_error *e);
/// The connection is gone: calls waiting for it dropped, credentials forgotten.
void lc_calls_drop(lc_front *f);
/// The replies held until the save, sent.
void lc_send_held(lc_front *f);

// operations.c
int lc_operations_register(lc_front *f, sd_bus *bus);
/// An operation's path, NULL when there is none with that id.
const char *lc_operation_path(lc_front *f, uint64_t id);
/// Every operation's entry of GetManagedObjects.
int lc_append_operations(sd_bus_message *m, lc_front *f);
int lc_create_monitor(sd_bus_message *msg, void *userdata, sd_bus_error *e);
void lc_collect_monitors(lc_front *f);
/// The connection is gone: waiters dropped, every monitor closed.
void lc_operations_drop(lc_front *f);
void lc_operations_free(lc_front *f);

#endif
