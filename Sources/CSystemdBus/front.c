// See BusFront.h; the interface is docs/dbus.md and
// docs/io.lifecycled.Lifecycle1.xml. Nothing here blocks: credentials are
// asked for asynchronously, the name is requested asynchronously, a lost
// connection is retried from a timer.
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
#include <systemd/sd-bus.h>

#define NAME "io.lifecycled.Lifecycle1"
#define ROOT "/io/lifecycled/Lifecycle1"
#define APPS ROOT "/app"
#define OPERATIONS ROOT "/operation"
#define MANAGER_IFACE NAME ".Manager"
#define APP_IFACE NAME ".App"
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
/// How long a finished operation stays, for a late Wait.
#define OPERATION_KEPT_USEC (60ULL * 1000000ULL)

enum { PROP_STATE, PROP_PID, PROP_LAUNCHING, PROP_FROZEN, PROP_AWAITING, PROP_BAND, PROP_DISPLAY, PROP_DELIVERY, PROP_TASKS, PROP_SCENES, PROP_END, PROP_COUNT };
static const char *const property_names[PROP_COUNT] = {
    "State", "Pid", "Launching", "Frozen", "Awaiting", "Band", "Display", "Delivery", "BackgroundTasks", "Scenes",
    "LastTermination"};

struct app {
    lc_front *front;
    char *name, *path;
    char *state, *awaiting, *band, *display, *delivery, *tasks, *scenes, *end_reason, *end_description;
    uint32_t pid, end_pid;
    int launching, frozen;
    uint64_t end_time, footprint;
    uint32_t changed;  // P_* bits since the last flush
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
    sd_bus_track *track;
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
    struct app **apps;  // sorted by name
    size_t n_apps, cap_apps;
    struct app **dirty;  // in the order they changed
    size_t n_dirty, cap_dirty;
    struct operation *operations;
    uint64_t next_operation;
    struct pending *pending;
    uint64_t signals;
    struct credentials kept[CREDENTIALS_KEPT];
    size_t next_kept;
    struct monitor *monitors;
    uint64_t next_monitor;
    uint64_t records_lost;
};

static const struct credentials *kept_credentials(lc_front *f, const char *sender) {
    for (size_t i = 0; i < CREDENTIALS_KEPT; i++)
        if (f->kept[i].sender && strcmp(f->kept[i].sender, sender) == 0) return &f->kept[i];
    return NULL;
}

static void keep_credentials(lc_front *f, const struct credentials *c) {
    struct credentials *slot = &f->kept[f->next_kept++ % CREDENTIALS_KEPT];  // the oldest goes
    free(slot->sender);
    *slot = *c;
    slot->sender = strdup(c->sender);
}

static void forget_credentials(lc_front *f) {
    for (size_t i = 0; i < CREDENTIALS_KEPT; i++) free(f->kept[i].sender), f->kept[i].sender = NULL;
}

static void say(lc_front *f, int priority, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(lc_front *f, int priority, const char *fmt, ...) {
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (f->cb.log) f->cb.log(f->cb.context, priority, text);
}

static char *dup0(const char *s) { return strdup(s ? s : ""); }

/// Replaces *slot with a copy of `value`; 1 when it differed.
static int set_string(char **slot, const char *value) {
    if (!value) value = "";
    if (*slot && strcmp(*slot, value) == 0) return 0;
    free(*slot);
    *slot = strdup(value);
    return 1;
}

// ---- Apps ------------------------------------------------------------------

static int compare_name(const void *key, const void *element) {
    return strcmp((const char *)key, (*(struct app *const *)element)->name);
}

static struct app *find_app(lc_front *f, const char *name) {
    struct app **found = bsearch(name, f->apps, f->n_apps, sizeof *f->apps, compare_name);
    return found ? *found : NULL;
}

static void free_app(struct app *a) {
    free(a->name), free(a->path), free(a->state), free(a->awaiting), free(a->band), free(a->display);
    free(a->delivery), free(a->tasks), free(a->scenes), free(a->end_reason), free(a->end_description);
    free(a);
}

static void queue(lc_front *f, struct app *a) {
    if (a->queued) return;
    if (f->n_dirty == f->cap_dirty) {
        size_t cap = f->cap_dirty ? f->cap_dirty * 2 : 64;
        struct app **d = realloc(f->dirty, cap * sizeof *d);
        if (!d) return;  // no memory: its change is signalled with the next one
        f->dirty = d, f->cap_dirty = cap;
    }
    f->dirty[f->n_dirty++] = a;
    a->queued = 1;
}

void lc_front_set_app(lc_front *f, const char *name, const lc_front_app *v) {
    struct app *a = find_app(f, name);
    if (!a) {
        if (f->n_apps == f->cap_apps) {
            size_t cap = f->cap_apps ? f->cap_apps * 2 : 64;
            struct app **apps = realloc(f->apps, cap * sizeof *apps);
            if (!apps) return;
            f->apps = apps, f->cap_apps = cap;
        }
        a = calloc(1, sizeof *a);
        if (!a || sd_bus_path_encode(APPS, name, &a->path) < 0) {
            free(a);
            return;
        }
        a->front = f;
        a->name = strdup(name);
        size_t at = 0;
        while (at < f->n_apps && strcmp(f->apps[at]->name, name) < 0) at++;
        memmove(f->apps + at + 1, f->apps + at, (f->n_apps - at) * sizeof *f->apps);
        f->apps[at] = a;
        f->n_apps++;
    }
    a->removing = 0;
    uint32_t c = 0;
    if (set_string(&a->state, v->state)) c |= 1u << PROP_STATE;
    if (a->pid != v->pid) a->pid = v->pid, c |= 1u << PROP_PID;
    if (a->launching != !!v->launching) a->launching = !!v->launching, c |= 1u << PROP_LAUNCHING;
    if (a->frozen != !!v->frozen) a->frozen = !!v->frozen, c |= 1u << PROP_FROZEN;
    if (set_string(&a->awaiting, v->awaiting)) c |= 1u << PROP_AWAITING;
    if (set_string(&a->band, v->band)) c |= 1u << PROP_BAND;
    if (set_string(&a->display, v->display)) c |= 1u << PROP_DISPLAY;
    if (set_string(&a->delivery, v->delivery)) c |= 1u << PROP_DELIVERY;
    if (set_string(&a->tasks, v->tasks)) c |= 1u << PROP_TASKS;
    if (set_string(&a->scenes, v->scenes)) c |= 1u << PROP_SCENES;
    int end = set_string(&a->end_reason, v->end_reason);
    end |= set_string(&a->end_description, v->end_description);
    if (a->end_time != v->end_time || a->end_pid != v->end_pid) a->end_time = v->end_time, a->end_pid = v->end_pid, end = 1;
    if (end) c |= 1u << PROP_END;
    a->footprint = v->footprint;  // sampled: read on demand, never signalled
    a->changed |= c;
    if (c || !a->announced) queue(f, a);
}

void lc_front_remove_app(lc_front *f, const char *name) {
    struct app *a = find_app(f, name);
    if (!a) return;
    a->removing = 1;
    queue(f, a);
}

static void drop_app(lc_front *f, struct app *a) {
    for (size_t i = 0; i < f->n_apps; i++) {
        if (f->apps[i] != a) continue;
        memmove(f->apps + i, f->apps + i + 1, (f->n_apps - i - 1) * sizeof *f->apps);
        f->n_apps--;
        break;
    }
    free_app(a);
}

static void collect_monitors(lc_front *f);

void lc_front_flush(lc_front *f) {
    collect_monitors(f);
    for (size_t i = 0; i < f->n_dirty; i++) {
        struct app *a = f->dirty[i];
        a->queued = 0;
        if (a->removing) {
            if (f->serving && a->announced && sd_bus_emit_object_removed(f->bus, a->path) >= 0) f->signals++;
            drop_app(f, a);
            continue;
        }
        if (!f->serving) {
            a->changed = 0;
            continue;
        }
        if (!a->announced) {
            if (sd_bus_emit_object_added(f->bus, a->path) >= 0) f->signals++;
            a->announced = 1;
        } else if (a->changed) {
            const char *names[PROP_COUNT + 1];
            size_t n = 0;
            for (int p = 0; p < PROP_COUNT; p++)
                if (a->changed & (1u << p)) names[n++] = property_names[p];
            names[n] = NULL;
            if (sd_bus_emit_properties_changed_strv(f->bus, a->path, APP_IFACE, (char **)names) >= 0) f->signals++;
        }
        a->changed = 0;
    }
    f->n_dirty = 0;
}

uint64_t lc_front_signals_sent(const lc_front *f) { return f->signals; }
int lc_front_serving(const lc_front *f) { return f->serving; }

static int app_find(sd_bus *bus, const char *path, const char *iface, void *userdata, void **found, sd_bus_error *e) {
    (void)bus, (void)iface, (void)e;
    lc_front *f = userdata;
    char *name = NULL;
    if (sd_bus_path_decode(path, APPS, &name) <= 0 || !name) return 0;
    struct app *a = find_app(f, name);
    free(name);
    if (!a) return 0;
    *found = a;
    return 1;
}

static int app_nodes(sd_bus *bus, const char *prefix, void *userdata, char ***nodes, sd_bus_error *e) {
    (void)bus, (void)prefix, (void)e;
    lc_front *f = userdata;
    char **list = calloc(f->n_apps + 1, sizeof *list);
    if (!list) return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < f->n_apps; i++)
        if (!f->apps[i]->removing) list[n++] = strdup(f->apps[i]->path);
    *nodes = list;
    return 0;
}

// ---- Property getters (userdata: the object plus the property's offset) ---

static int get_string(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *reply, void *userdata,
                      sd_bus_error *e) {
    (void)b, (void)p, (void)i, (void)prop, (void)e;
    const char *s = *(char **)userdata;
    return sd_bus_message_append(reply, "s", s ? s : "");
}

static int get_u32(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *reply, void *userdata,
                   sd_bus_error *e) {
    (void)b, (void)p, (void)i, (void)prop, (void)e;
    return sd_bus_message_append(reply, "u", *(uint32_t *)userdata);
}

static int get_u64(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *reply, void *userdata,
                   sd_bus_error *e) {
    (void)b, (void)p, (void)i, (void)prop, (void)e;
    return sd_bus_message_append(reply, "t", *(uint64_t *)userdata);
}

static int get_bool(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *reply, void *userdata,
                    sd_bus_error *e) {
    (void)b, (void)p, (void)i, (void)prop, (void)e;
    return sd_bus_message_append(reply, "b", *(int *)userdata);
}

/// Lines of `text` as an array: "as", or "a(us)" of "id\tname" lines.
static int append_lines(sd_bus_message *reply, const char *text, int tasks) {
    int r = sd_bus_message_open_container(reply, 'a', tasks ? "(us)" : "s");
    for (const char *s = text ? text : ""; r >= 0 && *s;) {
        const char *end = strchr(s, '\n');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        char line[512];
        if (len >= sizeof line) len = sizeof line - 1;
        memcpy(line, s, len);
        line[len] = 0;
        if (tasks) {
            char *tab = strchr(line, '\t');
            r = sd_bus_message_append(reply, "(us)", (uint32_t)strtoul(line, NULL, 10), tab ? tab + 1 : "");
        } else {
            r = sd_bus_message_append(reply, "s", line);
        }
        s = end ? end + 1 : s + len;
    }
    return r < 0 ? r : sd_bus_message_close_container(reply);
}

static int get_lines(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *reply, void *userdata,
                     sd_bus_error *e) {
    (void)b, (void)p, (void)i, (void)e;
    return append_lines(reply, *(char **)userdata, strcmp(prop, "BackgroundTasks") == 0);
}

static int get_end(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *reply, void *userdata,
                   sd_bus_error *e) {
    (void)b, (void)p, (void)i, (void)prop, (void)e;
    const struct app *a = userdata;
    return sd_bus_message_append(reply, "(sstu)", a->end_reason ? a->end_reason : "",
                                 a->end_description ? a->end_description : "", a->end_time, a->end_pid);
}

// ---- Calls -------------------------------------------------------------------

static void free_pending(struct pending *p) {
    lc_front *f = p->front;
    for (struct pending **at = &f->pending; *at; at = &(*at)->next)
        if (*at == p) {
            *at = p->next;
            break;
        }
    sd_bus_slot_unref(p->slot);
    sd_bus_message_unref(p->call);
    free(p->credentials);
    free(p->verb), free(p->app), free(p->scene), free(p->display), free(p->argument), free(p->sender);
    free(p);
}

static int reply_operation(lc_front *f, sd_bus_message *call, uint64_t id) {
    for (struct operation *o = f->operations; o; o = o->next)
        if (o->id == id) return sd_bus_reply_method_return(call, "o", o->path);
    return sd_bus_reply_method_errorf(call, SD_BUS_ERROR_FAILED, "operation %" PRIu64 " is gone", id);
}

static lc_front_request request_of(const struct pending *p, const struct credentials *c, int authorized) {
    return (lc_front_request){.verb = p->verb, .app = p->app, .scene = p->scene, .display = p->display,
                              .background = p->background, .argument = p->argument, .sender = p->sender,
                              .uid = c->uid, .pid = c->pid, .gids = c->gids, .n_gids = c->n_gids,
                              .authorized = authorized};
}

static void dispatch(struct pending *p, const struct credentials *c);

/// Hands the call to the daemon, with who made it, and replies.
static void hand_on(struct pending *p, const struct credentials *c, int authorized) {
    lc_front *f = p->front;
    lc_front_request rq = request_of(p, c, authorized);
    lc_front_answer answer = {0};
    f->cb.call(f->cb.context, &rq, &answer);
    if (answer.error_name)
        sd_bus_reply_method_errorf(p->call, answer.error_name, "%s", answer.error_message ? answer.error_message : "");
    else if (answer.operation)
        reply_operation(f, p->call, answer.operation);
    else
        sd_bus_reply_method_return(p->call, "");
    free_pending(p);
}

/// Reads GetConnectionCredentials' a{sv}, keeps it, and hands the call on.
static int on_credentials(sd_bus_message *m, void *userdata, sd_bus_error *e) {
    (void)e;
    struct pending *p = userdata;
    const sd_bus_error *error = sd_bus_message_get_error(m);
    if (error) {
        sd_bus_reply_method_errorf(p->call, SD_BUS_ERROR_ACCESS_DENIED, "cannot learn who is calling: %s",
                                   error->message ? error->message : error->name);
        free_pending(p);
        return 0;
    }
    struct credentials c = {.sender = p->sender};
    int have_uid = 0, r = sd_bus_message_enter_container(m, 'a', "{sv}");
    while (r > 0 && (r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
        const char *key = NULL;
        r = sd_bus_message_read(m, "s", &key);
        if (r >= 0 && strcmp(key, "UnixUserID") == 0) {
            r = sd_bus_message_read(m, "v", "u", &c.uid);
            have_uid = r >= 0;
        } else if (r >= 0 && strcmp(key, "ProcessID") == 0) {
            r = sd_bus_message_read(m, "v", "u", &c.pid);
        } else if (r >= 0 && strcmp(key, "UnixGroupIDs") == 0) {
            r = sd_bus_message_enter_container(m, 'v', "au");
            if (r >= 0) r = sd_bus_message_enter_container(m, 'a', "u");
            uint32_t g;
            while (r >= 0 && (r = sd_bus_message_read(m, "u", &g)) > 0)
                if (c.n_gids < GROUPS_KEPT) c.gids[c.n_gids++] = g;
            if (r >= 0) r = sd_bus_message_exit_container(m);
            if (r >= 0) r = sd_bus_message_exit_container(m);
        } else if (r >= 0) {
            r = sd_bus_message_skip(m, "v");
        }
        if (r >= 0) r = sd_bus_message_exit_container(m);
    }
    if (r < 0 || !have_uid) {
        sd_bus_reply_method_errorf(p->call, SD_BUS_ERROR_ACCESS_DENIED, "the bus did not say who is calling");
        free_pending(p);
        return 0;
    }
    keep_credentials(p->front, &c);
    dispatch(p, &c);
    return 0;
}

/// polkit's answer, (bba{ss}): authorized, challenge, details.
static int on_polkit(sd_bus_message *m, void *userdata, sd_bus_error *e) {
    (void)e;
    struct pending *p = userdata;
    lc_front *f = p->front;
    struct credentials c = *p->credentials;
    const sd_bus_error *error = sd_bus_message_get_error(m);
    if (error) {
        int absent = sd_bus_error_has_names(error, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER);
        if (absent && !f->cb.polkit_required) {
            hand_on(p, &c, 0);  // no polkitd: the group rule decides
        } else {
            sd_bus_reply_method_errorf(p->call, SD_BUS_ERROR_ACCESS_DENIED, "permission denied: polkit %s: %s",
                                       absent ? "is not running" : "could not decide",
                                       error->message ? error->message : error->name);
            free_pending(p);
        }
        return 0;
    }
    int authorized = 0, challenge = 0;
    if (sd_bus_message_enter_container(m, 'r', "bba{ss}") < 0 || sd_bus_message_read(m, "bb", &authorized, &challenge) < 0)
        authorized = 0, challenge = 0;
    if (authorized) {
        hand_on(p, &c, 1);
    } else if (challenge && !p->interactive) {
        sd_bus_reply_method_errorf(p->call, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED,
                                   "permission denied: polkit would ask for authentication to %s%s%s; call with "
                                   "interactive authorization allowed, or add a polkit rule",
                                   p->verb, p->app ? " " : "", p->app ? p->app : "");
        free_pending(p);
    } else {
        sd_bus_reply_method_errorf(p->call, SD_BUS_ERROR_ACCESS_DENIED, "permission denied: polkit says no to %s%s%s",
                                   p->verb, p->app ? " " : "", p->app ? p->app : "");
        free_pending(p);
    }
    return 0;
}

static int append_detail(sd_bus_message *m, const char *key, const char *value) {
    return value ? sd_bus_message_append(m, "{ss}", key, value) : 0;
}

/// CheckAuthorization(subject, action, details, flags, cancellation id),
/// the subject the caller's bus name: polkit learns the rest from the bus.
static int ask_polkit(struct pending *p, const char *action) {
    lc_front *f = p->front;
    char verb[64];
    size_t i = 0;
    for (; p->verb[i] && i < sizeof verb - 1; i++) verb[i] = (char)(p->verb[i] >= 'A' && p->verb[i] <= 'Z' ? p->verb[i] + 32 : p->verb[i]);
    verb[i] = 0;
    sd_bus_message *m = NULL;
    int r = sd_bus_message_new_method_call(f->bus, &m, POLKIT, "/org/freedesktop/PolicyKit1/Authority",
                                           POLKIT ".Authority", "CheckAuthorization");
    if (r >= 0) r = sd_bus_message_append(m, "(sa{sv})s", "system-bus-name", 1, "name", "s", p->sender, action);
    if (r >= 0) r = sd_bus_message_open_container(m, 'a', "{ss}");
    if (r >= 0) r = append_detail(m, "verb", verb);
    if (r >= 0) r = append_detail(m, "app", p->app);
    if (r >= 0) r = append_detail(m, "display", p->display);
    if (r >= 0) r = append_detail(m, "scene", p->scene);
    if (r >= 0) r = sd_bus_message_close_container(m);
    if (r >= 0) r = sd_bus_message_append(m, "us", (uint32_t)(p->interactive ? 1 : 0), "");
    if (r >= 0)
        r = sd_bus_call_async(f->bus, &p->slot, m, on_polkit, p, p->interactive ? POLKIT_INTERACTIVE_USEC : POLKIT_USEC);
    sd_bus_message_unref(m);
    return r;
}

/// Asks polkit first when the daemon says polkit decides; else hands on.
static void dispatch(struct pending *p, const struct credentials *c) {
    lc_front *f = p->front;
    lc_front_request rq = request_of(p, c, 0);
    const char *action = f->cb.polkit_action ? f->cb.polkit_action(f->cb.context, &rq) : NULL;
    if (!action) {
        hand_on(p, c, 0);
        return;
    }
    sd_bus_slot_unref(p->slot);
    p->slot = NULL;
    p->credentials = malloc(sizeof *p->credentials);
    int r = p->credentials ? 0 : -ENOMEM;
    if (r >= 0) {
        *p->credentials = *c;
        p->credentials->sender = p->sender;  // not owned: the pending call's own copy
        r = ask_polkit(p, action);
    }
    if (r < 0) {
        sd_bus_reply_method_errorf(p->call, SD_BUS_ERROR_ACCESS_DENIED, "permission denied: cannot ask polkit: %s",
                                   strerror(-r));
        free_pending(p);
    }
}

/// The options every command takes: scene, display, background; any
/// other key, or a value of the wrong type, is InvalidArgs, named.
static int read_options(sd_bus_message *m, struct pending *p, sd_bus_error *e) {
    int r = sd_bus_message_enter_container(m, 'a', "{sv}");
    if (r < 0) return r;
    while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
        const char *key = NULL, *s = NULL;
        if ((r = sd_bus_message_read(m, "s", &key)) < 0) return r;
        char **slot = strcmp(key, "scene") == 0 ? &p->scene : strcmp(key, "display") == 0 ? &p->display : NULL;
        if (slot) {
            if (sd_bus_message_read(m, "v", "s", &s) < 0)
                return sd_bus_error_setf(e, SD_BUS_ERROR_INVALID_ARGS, "option '%s' must be a string", key);
            free(*slot);
            *slot = strdup(s);
        } else if (strcmp(key, "background") == 0) {
            int b = 0;
            if (sd_bus_message_read(m, "v", "b", &b) < 0)
                return sd_bus_error_setf(e, SD_BUS_ERROR_INVALID_ARGS, "option 'background' must be a boolean");
            p->background = !!b;
        } else {
            return sd_bus_error_setf(e, SD_BUS_ERROR_INVALID_ARGS,
                                     "unknown option '%s' (known: scene, display, background)", key);
        }
        if ((r = sd_bus_message_exit_container(m)) < 0) return r;
    }
    if (r < 0) return r;
    return sd_bus_message_exit_container(m);
}

/// A command: parsed now, handed on once the bus says who asks.
static int command(sd_bus_message *m, lc_front *f, const char *app, int argument, int options, sd_bus_error *e) {
    const char *sender = sd_bus_message_get_sender(m);
    size_t mine = 0;
    for (struct pending *q = f->pending; q; q = q->next) mine += sender && strcmp(q->sender, sender) == 0;
    if (!sender) return sd_bus_error_setf(e, SD_BUS_ERROR_ACCESS_DENIED, "a call without a sender");
    if (mine >= PENDING_PER_SENDER)
        return sd_bus_error_setf(e, SD_BUS_ERROR_LIMITS_EXCEEDED, "%d calls of yours are already being checked",
                                 PENDING_PER_SENDER);
    struct pending *p = calloc(1, sizeof *p);
    if (!p) return -ENOMEM;
    p->front = f;
    p->background = -1;
    p->verb = strdup(sd_bus_message_get_member(m));
    p->app = app ? strdup(app) : NULL;
    p->sender = strdup(sender);
    p->next = f->pending;
    f->pending = p;
    int r = 0;
    if (argument) {
        const char *s = NULL;
        r = sd_bus_message_read(m, "s", &s);
        if (r >= 0) p->argument = strdup(s);
    }
    if (r >= 0 && options) r = read_options(m, p, e);
    if (r < 0 || sd_bus_error_is_set(e)) {
        free_pending(p);
        return r < 0 ? r : -EINVAL;
    }
    p->call = sd_bus_message_ref(m);
    p->interactive = sd_bus_message_get_allow_interactive_authorization(m) > 0;
    const struct credentials *known = kept_credentials(f, sender);
    if (known) {
        struct credentials c = *known;  // the cache may change during the call
        dispatch(p, &c);
        return 1;
    }
    r = sd_bus_call_method_async(sd_bus_message_get_bus(m), &p->slot, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                 "org.freedesktop.DBus", "GetConnectionCredentials", on_credentials, p, "s", sender);
    if (r < 0) {
        free_pending(p);
        return r;
    }
    return 1;  // answered from on_credentials
}

static int app_command(sd_bus_message *m, void *userdata, sd_bus_error *e) {
    struct app *a = userdata;
    const char *member = sd_bus_message_get_member(m);
    int argument = strcmp(member, "Push") == 0 || strcmp(member, "Signal") == 0;
    int options = strcmp(member, "Signal") != 0;
    return command(m, a->front, a->name, argument, options, e);
}

static int manager_command(sd_bus_message *m, void *userdata, sd_bus_error *e) {
    return command(m, userdata, NULL, strcmp(sd_bus_message_get_member(m), "OpenURL") == 0, 1, e);
}

static int get_app(sd_bus_message *m, void *userdata, sd_bus_error *e) {
    lc_front *f = userdata;
    const char *name = NULL;
    int r = sd_bus_message_read(m, "s", &name);
    if (r < 0) return r;
    struct app *a = find_app(f, name);
    if (!a || a->removing) return sd_bus_error_setf(e, NO_SUCH_APP, "unknown app '%s'", name);
    return sd_bus_reply_method_return(m, "o", a->path);
}

static int list_apps(sd_bus_message *m, void *userdata, sd_bus_error *e) {
    (void)e;
    lc_front *f = userdata;
    sd_bus_message *reply = NULL;
    int r = sd_bus_message_new_method_return(m, &reply);
    if (r >= 0) r = sd_bus_message_open_container(reply, 'a', "(sosu)");
    for (size_t i = 0; r >= 0 && i < f->n_apps; i++) {
        const struct app *a = f->apps[i];
        if (!a->removing) r = sd_bus_message_append(reply, "(sosu)", a->name, a->path, a->state ? a->state : "", a->pid);
    }
    if (r >= 0) r = sd_bus_message_close_container(reply);
    if (r >= 0) r = sd_bus_send(NULL, reply, NULL);
    sd_bus_message_unref(reply);
    return r < 0 ? r : 1;
}

static int get_version(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *reply, void *userdata,
                       sd_bus_error *e) {
    (void)b, (void)p, (void)i, (void)prop, (void)e;
    return sd_bus_message_append(reply, "s", ((lc_front *)userdata)->version);
}

// ---- Operations --------------------------------------------------------------

static struct operation *find_operation(lc_front *f, uint64_t id) {
    for (struct operation *o = f->operations; o; o = o->next)
        if (o->id == id) return o;
    return NULL;
}

uint64_t lc_front_operation_new(lc_front *f, const char *verb, const char *app, const char *requester) {
    struct operation *o = calloc(1, sizeof *o);
    if (!o) return 0;
    o->front = f;
    o->id = ++f->next_operation;
    if (asprintf(&o->path, OPERATIONS "/%" PRIu64, o->id) < 0) {
        free(o);
        return 0;
    }
    o->verb = dup0(verb), o->app = dup0(app), o->requester = dup0(requester);
    o->result = dup0(""), o->reason = dup0("");
    o->next = f->operations;
    f->operations = o;
    if (f->serving && sd_bus_emit_object_added(f->bus, o->path) >= 0) f->signals++;
    return o->id;
}

static void free_operation(lc_front *f, struct operation *o) {
    for (struct operation **at = &f->operations; *at; at = &(*at)->next)
        if (*at == o) {
            *at = o->next;
            break;
        }
    for (size_t i = 0; i < o->n_waiters; i++) sd_bus_message_unref(o->waiters[i]);
    free(o->waiters);
    sd_event_source_disable_unref(o->collect);
    free(o->verb), free(o->app), free(o->requester), free(o->path), free(o->result), free(o->reason);
    free(o);
}

static int collect_operation(sd_event_source *s, uint64_t usec, void *userdata) {
    (void)s, (void)usec;
    struct operation *o = userdata;
    lc_front *f = o->front;
    if (f->serving && sd_bus_emit_object_removed(f->bus, o->path) >= 0) f->signals++;
    free_operation(f, o);
    return 0;
}

void lc_front_operation_finish(lc_front *f, uint64_t id, const char *result, const char *reason) {
    struct operation *o = find_operation(f, id);
    if (!o || o->done) return;
    o->done = 1;
    set_string(&o->result, result);
    set_string(&o->reason, reason);
    for (size_t i = 0; i < o->n_waiters; i++) {
        sd_bus_reply_method_return(o->waiters[i], "ss", o->result, o->reason);
        sd_bus_message_unref(o->waiters[i]);
    }
    o->n_waiters = 0;
    if (f->serving) {
        if (sd_bus_emit_properties_changed(f->bus, o->path, OPERATION_IFACE, "State", "Result", "Reason", NULL) >= 0)
            f->signals++;
        sd_bus_message *signal = NULL;
        // To the requester only: nobody else asked.
        if (sd_bus_message_new_signal(f->bus, &signal, ROOT, MANAGER_IFACE, "OperationFinished") >= 0 &&
            sd_bus_message_append(signal, "ossss", o->path, o->verb, o->app, o->result, o->reason) >= 0 &&
            sd_bus_send_to(f->bus, signal, o->requester, NULL) >= 0)
            f->signals++;
        sd_bus_message_unref(signal);
    }
    sd_event_add_time_relative(f->event, &o->collect, CLOCK_MONOTONIC, OPERATION_KEPT_USEC, 0, collect_operation, o);
}

static int operation_find(sd_bus *bus, const char *path, const char *iface, void *userdata, void **found,
                          sd_bus_error *e) {
    (void)bus, (void)iface, (void)e;
    lc_front *f = userdata;
    const char *tail = path + strlen(OPERATIONS);
    if (strncmp(path, OPERATIONS "/", strlen(OPERATIONS) + 1) != 0) return 0;
    char *end = NULL;
    uint64_t id = strtoull(tail + 1, &end, 10);
    if (!end || *end) return 0;
    struct operation *o = find_operation(f, id);
    if (!o) return 0;
    *found = o;
    return 1;
}

static int operation_nodes(sd_bus *bus, const char *prefix, void *userdata, char ***nodes, sd_bus_error *e) {
    (void)bus, (void)prefix, (void)e;
    lc_front *f = userdata;
    size_t n = 0;
    for (struct operation *o = f->operations; o; o = o->next) n++;
    char **list = calloc(n + 1, sizeof *list);
    if (!list) return -ENOMEM;
    n = 0;
    for (struct operation *o = f->operations; o; o = o->next) list[n++] = strdup(o->path);
    *nodes = list;
    return 0;
}

static int operation_wait(sd_bus_message *m, void *userdata, sd_bus_error *e) {
    (void)e;
    struct operation *o = userdata;
    if (o->done) return sd_bus_reply_method_return(m, "ss", o->result, o->reason);
    sd_bus_message **w = realloc(o->waiters, (o->n_waiters + 1) * sizeof *w);
    if (!w) return -ENOMEM;
    o->waiters = w;
    o->waiters[o->n_waiters++] = sd_bus_message_ref(m);
    return 1;
}

static int get_operation_state(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *reply,
                               void *userdata, sd_bus_error *e) {
    (void)b, (void)p, (void)i, (void)prop, (void)e;
    return sd_bus_message_append(reply, "s", ((struct operation *)userdata)->done ? "done" : "running");
}

// ---- Monitors ----------------------------------------------------------------

static size_t live_monitors(const lc_front *f, const char *owner) {
    size_t n = 0;
    for (const struct monitor *m = f->monitors; m; m = m->next)
        n += !m->closed && (!owner || strcmp(m->owner, owner) == 0);
    return n;
}

size_t lc_front_monitors(const lc_front *f) { return live_monitors(f, NULL); }
uint64_t lc_front_records_lost(const lc_front *f) { return f->records_lost; }

static void free_monitor(lc_front *f, struct monitor *m) {
    for (struct monitor **at = &f->monitors; *at; at = &(*at)->next)
        if (*at == m) {
            *at = m->next;
            break;
        }
    sd_bus_track_unref(m->track);
    for (size_t i = 0; i < m->n_apps; i++) free(m->apps[i]);
    free(m->apps), free(m->path), free(m->owner);
    free(m);
}

/// The monitors closed, or whose owner went, freed (never from inside
/// their own tracker's callback).
static void collect_monitors(lc_front *f) {
    for (struct monitor *m = f->monitors, *next; m; m = next) {
        next = m->next;
        if (m->closed) free_monitor(f, m);
    }
}

static int on_owner_gone(sd_bus_track *t, void *userdata) {
    (void)t;
    ((struct monitor *)userdata)->closed = 1;
    return 0;
}

static int create_monitor(sd_bus_message *msg, void *userdata, sd_bus_error *e) {
    lc_front *f = userdata;
    const char *sender = sd_bus_message_get_sender(msg);
    if (!sender) return sd_bus_error_setf(e, SD_BUS_ERROR_ACCESS_DENIED, "a call without a sender");
    if (live_monitors(f, sender) >= MONITORS_PER_SENDER || live_monitors(f, NULL) >= MONITORS_MAX)
        return sd_bus_error_setf(e, SD_BUS_ERROR_LIMITS_EXCEEDED, "at most %d monitors a connection, %d in all",
                                 MONITORS_PER_SENDER, MONITORS_MAX);
    struct monitor *m = calloc(1, sizeof *m);
    if (!m) return -ENOMEM;
    m->front = f;
    int r = sd_bus_message_enter_container(msg, 'a', "{sv}");
    while (r >= 0 && (r = sd_bus_message_enter_container(msg, 'e', "sv")) > 0) {
        const char *key = NULL;
        if ((r = sd_bus_message_read(msg, "s", &key)) < 0) break;
        if (strcmp(key, "apps") != 0 || m->apps) {
            r = sd_bus_error_setf(e, SD_BUS_ERROR_INVALID_ARGS, "unknown option '%s' (known: apps)", key);
            break;
        }
        char **apps = NULL;
        if (sd_bus_message_enter_container(msg, 'v', "as") < 0 || sd_bus_message_read_strv(msg, &apps) < 0) {
            r = sd_bus_error_setf(e, SD_BUS_ERROR_INVALID_ARGS, "option 'apps' must be a list of names");
            break;
        }
        m->apps = apps;
        while (apps[m->n_apps]) m->n_apps++;
        if ((r = sd_bus_message_exit_container(msg)) < 0) break;
        r = sd_bus_message_exit_container(msg);
    }
    if (r >= 0) r = sd_bus_message_exit_container(msg);
    m->owner = strdup(sender);
    m->id = ++f->next_monitor;
    if (r >= 0 && asprintf(&m->path, MONITORS "/%" PRIu64, m->id) < 0) r = -ENOMEM;
    if (r >= 0) r = sd_bus_track_new(sd_bus_message_get_bus(msg), &m->track, on_owner_gone, m);
    if (r >= 0) r = sd_bus_track_add_name(m->track, sender);
    m->next = f->monitors;
    f->monitors = m;
    if (r < 0) {
        free_monitor(f, m);
        return r;
    }
    return sd_bus_reply_method_return(msg, "o", m->path);
}

static int monitor_find(sd_bus *bus, const char *path, const char *iface, void *userdata, void **found,
                        sd_bus_error *e) {
    (void)bus, (void)iface, (void)e;
    lc_front *f = userdata;
    for (struct monitor *m = f->monitors; m; m = m->next)
        if (!m->closed && strcmp(m->path, path) == 0) {
            *found = m;
            return 1;
        }
    return 0;
}

static int monitor_close(sd_bus_message *msg, void *userdata, sd_bus_error *e) {
    struct monitor *m = userdata;
    const char *sender = sd_bus_message_get_sender(msg);
    if (!sender || strcmp(sender, m->owner) != 0)
        return sd_bus_error_setf(e, SD_BUS_ERROR_ACCESS_DENIED, "only the connection that created a monitor closes it");
    m->closed = 1;
    return sd_bus_reply_method_return(msg, "");
}

static int get_monitor_apps(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *reply,
                            void *userdata, sd_bus_error *e) {
    (void)b, (void)p, (void)i, (void)prop, (void)e;
    struct monitor *m = userdata;
    return sd_bus_message_append_strv(reply, m->apps ? m->apps : (char *[]){NULL});
}

static int monitor_signal(lc_front *f, struct monitor *m, const char *member, const char *types, ...) {
    sd_bus_message *s = NULL;
    int r = sd_bus_message_new_signal(f->bus, &s, m->path, MONITOR_IFACE, member);
    if (r >= 0) {
        va_list ap;
        va_start(ap, types);
        r = sd_bus_message_appendv(s, types, ap);
        va_end(ap);
    }
    if (r >= 0) r = sd_bus_send_to(f->bus, s, m->owner, NULL);
    sd_bus_message_unref(s);
    if (r >= 0) f->signals++;
    return r;
}

void lc_front_record(lc_front *f, const char *app, const char *record) {
    uint64_t queued = 0;
    int deep = !f->serving || (sd_bus_get_n_queued_write(f->bus, &queued) >= 0 && queued > QUEUE_HIGH);
    for (struct monitor *m = f->monitors; m; m = m->next) {
        if (m->closed) continue;
        int wanted = !m->apps;
        for (size_t i = 0; !wanted && i < m->n_apps; i++) wanted = strcmp(m->apps[i], app) == 0;
        if (!wanted) continue;
        uint64_t sequence = ++m->sequence;
        if (!deep && m->lost_first && monitor_signal(f, m, "Lost", "tt", m->lost_first, m->lost_last) >= 0)
            m->lost_first = m->lost_last = 0;
        if (deep || m->lost_first || monitor_signal(f, m, "Record", "ts", sequence, record) < 0) {
            if (!m->lost_first) m->lost_first = sequence;
            m->lost_last = sequence;
            f->records_lost++;
        }
    }
}

// ---- Vtables -----------------------------------------------------------------

#define OPTIONS "a{sv}"
#define EMITS SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE
/// Anyone may call: the daemon decides (sd-bus would otherwise ask the bus,
/// synchronously, whether the caller is root, and refuse everyone else).
#define OPEN SD_BUS_VTABLE_UNPRIVILEGED

static const sd_bus_vtable manager_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("Version", "s", get_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_METHOD_WITH_NAMES("GetApp", "s", SD_BUS_PARAM(name), "o", SD_BUS_PARAM(app), get_app, OPEN),
    SD_BUS_METHOD_WITH_NAMES("ListApps", "", "", "a(sosu)", SD_BUS_PARAM(apps), list_apps, OPEN),
    SD_BUS_METHOD_WITH_NAMES("Home", OPTIONS, SD_BUS_PARAM(options), "o", SD_BUS_PARAM(operation), manager_command, OPEN),
    SD_BUS_METHOD_WITH_NAMES("Lock", OPTIONS, SD_BUS_PARAM(options), "o", SD_BUS_PARAM(operation), manager_command, OPEN),
    SD_BUS_METHOD_WITH_NAMES("Unlock", OPTIONS, SD_BUS_PARAM(options), "o", SD_BUS_PARAM(operation), manager_command, OPEN),
    SD_BUS_METHOD_WITH_NAMES("CreateMonitor", OPTIONS, SD_BUS_PARAM(options), "o", SD_BUS_PARAM(monitor),
                             create_monitor, OPEN),
    SD_BUS_METHOD_WITH_NAMES("OpenURL", "s" OPTIONS, SD_BUS_PARAM(url) SD_BUS_PARAM(options), "o",
                             SD_BUS_PARAM(operation), manager_command, OPEN),
    SD_BUS_SIGNAL_WITH_NAMES("OperationFinished", "ossss",
                             SD_BUS_PARAM(operation) SD_BUS_PARAM(verb) SD_BUS_PARAM(app) SD_BUS_PARAM(result)
                                 SD_BUS_PARAM(reason),
                             0),
    SD_BUS_VTABLE_END};

#define APP_METHOD(name)                                                                                              \
    SD_BUS_METHOD_WITH_NAMES(name, OPTIONS, SD_BUS_PARAM(options), "o", SD_BUS_PARAM(operation), app_command, OPEN)

static const sd_bus_vtable app_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("Id", "s", get_string, offsetof(struct app, name), SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("State", "s", get_string, offsetof(struct app, state), EMITS),
    SD_BUS_PROPERTY("Pid", "u", get_u32, offsetof(struct app, pid), EMITS),
    SD_BUS_PROPERTY("Launching", "b", get_bool, offsetof(struct app, launching), EMITS),
    SD_BUS_PROPERTY("Frozen", "b", get_bool, offsetof(struct app, frozen), EMITS),
    SD_BUS_PROPERTY("Awaiting", "s", get_string, offsetof(struct app, awaiting), EMITS),
    SD_BUS_PROPERTY("Band", "s", get_string, offsetof(struct app, band), EMITS),
    SD_BUS_PROPERTY("Display", "s", get_string, offsetof(struct app, display), EMITS),
    SD_BUS_PROPERTY("Delivery", "s", get_string, offsetof(struct app, delivery), EMITS),
    SD_BUS_PROPERTY("BackgroundTasks", "a(us)", get_lines, offsetof(struct app, tasks), EMITS),
    SD_BUS_PROPERTY("Scenes", "as", get_lines, offsetof(struct app, scenes), EMITS),
    SD_BUS_PROPERTY("LastTermination", "(sstu)", get_end, 0, EMITS),
    SD_BUS_PROPERTY("Footprint", "t", get_u64, offsetof(struct app, footprint), 0),
    APP_METHOD("Launch"),
    APP_METHOD("Activate"),
    APP_METHOD("Stop"),
    APP_METHOD("Kill"),
    APP_METHOD("Restart"),
    APP_METHOD("Fetch"),
    SD_BUS_METHOD_WITH_NAMES("Push", "s" OPTIONS, SD_BUS_PARAM(payload) SD_BUS_PARAM(options), "o",
                             SD_BUS_PARAM(operation), app_command, OPEN),
    SD_BUS_METHOD_WITH_NAMES("Signal", "s", SD_BUS_PARAM(signal), "", "", app_command, OPEN),
    SD_BUS_VTABLE_END};

static const sd_bus_vtable monitor_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("Id", "t", get_u64, offsetof(struct monitor, id), SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("Owner", "s", get_string, offsetof(struct monitor, owner), SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("Apps", "as", get_monitor_apps, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_METHOD_WITH_NAMES("Close", "", "", "", "", monitor_close, OPEN),
    SD_BUS_SIGNAL_WITH_NAMES("Record", "ts", SD_BUS_PARAM(sequence) SD_BUS_PARAM(record), 0),
    SD_BUS_SIGNAL_WITH_NAMES("Lost", "tt", SD_BUS_PARAM(first) SD_BUS_PARAM(last), 0),
    SD_BUS_VTABLE_END};

static const sd_bus_vtable operation_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("Id", "t", get_u64, offsetof(struct operation, id), SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("Verb", "s", get_string, offsetof(struct operation, verb), SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("App", "s", get_string, offsetof(struct operation, app), SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("State", "s", get_operation_state, 0, EMITS),
    SD_BUS_PROPERTY("Result", "s", get_string, offsetof(struct operation, result), EMITS),
    SD_BUS_PROPERTY("Reason", "s", get_string, offsetof(struct operation, reason), EMITS),
    SD_BUS_METHOD_WITH_NAMES("Wait", "", "", "ss", SD_BUS_PARAM(result) SD_BUS_PARAM(reason), operation_wait, OPEN),
    SD_BUS_VTABLE_END};

// ---- The connection ----------------------------------------------------------

static int connect_bus(lc_front *f);
static int on_retry(sd_event_source *s, uint64_t usec, void *userdata);

static void arm_retry(lc_front *f) {
    if (f->retry) return;
    sd_event_add_time_relative(f->event, &f->retry, CLOCK_MONOTONIC, f->retry_usec, 0, on_retry, f);
}

static void drop_connection(lc_front *f) {
    while (f->pending) free_pending(f->pending);
    for (struct operation *o = f->operations; o; o = o->next) {
        for (size_t i = 0; i < o->n_waiters; i++) sd_bus_message_unref(o->waiters[i]);
        o->n_waiters = 0;
    }
    for (size_t i = 0; i < f->n_apps; i++) f->apps[i]->announced = 0;
    forget_credentials(f);  // a new bus daemon numbers its connections from :1.0 again
    for (struct monitor *m = f->monitors; m; m = m->next) m->closed = 1;  // their owners are gone with the bus
    collect_monitors(f);
    if (f->bus) {
        sd_bus_detach_event(f->bus);
        sd_bus_flush_close_unref(f->bus);
    }
    f->bus = NULL;
    f->serving = 0;
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
    (void)usec;
    lc_front *f = userdata;
    sd_event_source_disable_unref(s);
    f->retry = NULL;
    drop_connection(f);
    if (connect_bus(f) < 0) {
        f->retry_usec = f->retry_usec * 2 > 30000000 ? 30000000 : f->retry_usec * 2;
        arm_retry(f);
    }
    return 0;
}

static int on_disconnected(sd_bus_message *m, void *userdata, sd_bus_error *e) {
    (void)m, (void)e;
    lc_front *f = userdata;
    say(f, LOG_WARNING, "the system bus went away: the D-Bus interface is off until it is back");
    f->serving = 0;
    f->retry_usec = 1000000;
    arm_retry(f);  // the connection is dropped from the timer, not from inside its own callback
    return 0;
}

static int on_name_lost(sd_bus_message *m, void *userdata, sd_bus_error *e) {
    (void)e;
    lc_front *f = userdata;
    const char *name = NULL;
    if (sd_bus_message_read(m, "s", &name) >= 0 && strcmp(name, NAME) == 0) {
        say(f, LOG_WARNING, "another process took the bus name " NAME);
        f->serving = 0;
    }
    return 0;
}

static int on_name(sd_bus_message *m, void *userdata, sd_bus_error *e) {
    (void)e;
    lc_front *f = userdata;
    const sd_bus_error *error = sd_bus_message_get_error(m);
    if (error) {
        // A bus policy installed after the bus daemon started is read again
        // soon (dbus-daemon watches its directories): ask again, later.
        if (!f->said_refused)
            say(f, LOG_ERR, "cannot own the bus name " NAME ": %s (is dbus/" NAME ".conf installed?); asking again now and then",
                error->message ? error->message : error->name);
        f->said_refused = 1;
        f->retry_usec = f->retry_usec * 2 > 30000000 ? 30000000 : f->retry_usec * 2;
        arm_retry(f);
        return 0;
    }
    f->serving = 1;
    f->retry_usec = 1000000;
    for (size_t i = 0; i < f->n_apps; i++) f->apps[i]->announced = 1;  // clients ask GetManagedObjects
    say(f, LOG_INFO, "serving " NAME " on the system bus");
    f->said_down = 0;
    f->said_refused = 0;
    if (f->cb.connected) f->cb.connected(f->cb.context);
    return 0;
}

static int connect_bus(lc_front *f) {
    sd_bus *bus = NULL;
    int r = sd_bus_open_system_with_description(&bus, "lifecycled-front");
    if (r < 0) {
        if (!f->said_down)
            say(f, LOG_NOTICE, "no system bus (%s): the D-Bus interface is off; retrying now and then", strerror(-r));
        f->said_down = 1;
        return r;
    }
    f->bus = bus;
    if ((r = sd_bus_add_object_vtable(bus, NULL, ROOT, MANAGER_IFACE, manager_vtable, f)) < 0 ||
        (r = sd_bus_add_object_manager(bus, NULL, ROOT)) < 0 ||
        (r = sd_bus_add_fallback_vtable(bus, NULL, APPS, APP_IFACE, app_vtable, app_find, f)) < 0 ||
        (r = sd_bus_add_node_enumerator(bus, NULL, APPS, app_nodes, f)) < 0 ||
        (r = sd_bus_add_fallback_vtable(bus, NULL, OPERATIONS, OPERATION_IFACE, operation_vtable, operation_find,
                                        f)) < 0 ||
        (r = sd_bus_add_node_enumerator(bus, NULL, OPERATIONS, operation_nodes, f)) < 0 ||
        (r = sd_bus_add_fallback_vtable(bus, NULL, MONITORS, MONITOR_IFACE, monitor_vtable, monitor_find, f)) < 0 ||
        (r = sd_bus_match_signal(bus, NULL, "org.freedesktop.DBus.Local", NULL, "org.freedesktop.DBus.Local",
                                 "Disconnected", on_disconnected, f)) < 0 ||
        (r = sd_bus_match_signal_async(bus, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                       "org.freedesktop.DBus", "NameLost", on_name_lost, NULL, f)) < 0 ||
        (r = sd_bus_request_name_async(bus, NULL, NAME,
                                       SD_BUS_NAME_ALLOW_REPLACEMENT | SD_BUS_NAME_REPLACE_EXISTING, on_name, f)) < 0 ||
        (r = sd_bus_attach_event(bus, f->event, (int)f->priority)) < 0) {
        say(f, LOG_ERR, "cannot serve the D-Bus interface: %s", strerror(-r));
        return r;
    }
    return 0;
}

int lc_front_open(sd_event *event, int64_t priority, const char *version, const lc_front_callbacks *callbacks,
                  lc_front **out) {
    lc_front *f = calloc(1, sizeof *f);
    if (!f) return -ENOMEM;
    f->event = sd_event_ref(event);
    f->priority = priority;
    f->version = dup0(version);
    f->cb = *callbacks;
    f->retry_usec = 1000000;
    if (connect_bus(f) < 0) arm_retry(f);
    *out = f;
    return 0;
}

void lc_front_close(lc_front *f) {
    if (!f) return;
    drop_connection(f);
    sd_event_source_disable_unref(f->retry);
    while (f->operations) free_operation(f, f->operations);
    for (size_t i = 0; i < f->n_apps; i++) free_app(f->apps[i]);
    free(f->apps), free(f->dirty), free(f->version);
    sd_event_unref(f->event);
    free(f);
}
