// Operations (a command's outcome, Wait() and OperationFinished) and
// monitors (the event history, per client). See front.h.
#include "front.h"

const char *lc_operation_path(lc_front *f, uint64_t id) {
    for (struct operation *o = f->operations; o; o = o->next)
        if (o->id == id) return o->path;
    return NULL;
}

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
    o->verb = lc_dup0(verb), o->app = lc_dup0(app), o->requester = lc_dup0(requester);
    o->result = lc_dup0(""), o->reason = lc_dup0("");
    o->next = f->operations;
    f->operations = o;
    if (f->serving) sd_bus_emit_interfaces_added(f->bus, o->path, OPERATION_IFACE, NULL);
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
    if (f->serving) sd_bus_emit_interfaces_removed(f->bus, o->path, OPERATION_IFACE, NULL);
    free_operation(f, o);
    return 0;
}

void lc_front_operation_finish(lc_front *f, uint64_t id, const char *result, const char *reason) {
    struct operation *o = find_operation(f, id);
    if (!o || o->done) return;
    o->done = 1;
    lc_set_string(&o->result, result);
    int reason_changed = lc_set_string(&o->reason, reason);
    for (size_t i = 0; i < o->n_waiters; i++) {
        sd_bus_reply_method_return(o->waiters[i], "ss", o->result, o->reason);
        sd_bus_message_unref(o->waiters[i]);
    }
    o->n_waiters = 0;
    if (f->serving) {
        // Only what changed, as every object's signals (a done operation's Reason stays "").
        sd_bus_emit_properties_changed(f->bus, o->path, OPERATION_IFACE, "State", "Result",
                                       reason_changed ? "Reason" : NULL, NULL);
        sd_bus_message *signal = NULL;
        // To the requester only: nobody else asked.
        if (sd_bus_message_new_signal(f->bus, &signal, ROOT, MANAGER_IFACE, "OperationFinished") >= 0 &&
            sd_bus_message_append(signal, "ossss", o->path, o->verb, o->app, o->result, o->reason) >= 0)
            sd_bus_send_to(f->bus, signal, o->requester, NULL);
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
    struct operation *o = userdata;
    if (o->done) return sd_bus_reply_method_return(m, "ss", o->result, o->reason);
    if (!sd_bus_message_get_expect_reply(m)) return 1;  // nobody to answer: nothing to keep
    if (o->n_waiters >= WAITERS_MAX)
        return sd_bus_error_setf(e, SD_BUS_ERROR_LIMITS_EXCEEDED, "%d calls already wait for this operation",
                                 WAITERS_MAX);
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

static size_t live_monitors(const lc_front *f, const char *owner) {
    size_t n = 0;
    for (const struct monitor *m = f->monitors; m; m = m->next)
        n += !m->closed && (!owner || strcmp(m->owner, owner) == 0);
    return n;
}

size_t lc_front_monitors(const lc_front *f) { return live_monitors(f, NULL); }

static void free_monitor(lc_front *f, struct monitor *m) {
    for (struct monitor **at = &f->monitors; *at; at = &(*at)->next)
        if (*at == m) {
            *at = m->next;
            break;
        }
    sd_bus_slot_unref(m->gone);
    sd_bus_slot_unref(m->check);
    for (size_t i = 0; i < m->n_apps; i++) free(m->apps[i]);
    free(m->apps), free(m->path), free(m->owner);
    free(m);
}

/// The monitors closed, or whose owner went, freed.
void lc_collect_monitors(lc_front *f) {
    for (struct monitor *m = f->monitors, *next; m; m = next) {
        next = m->next;
        if (m->closed) free_monitor(f, m);
    }
}

static int on_collect(sd_event_source *s, void *userdata) {
    lc_front *f = userdata;
    sd_event_source_disable_unref(s);
    f->collect_later = NULL;
    lc_collect_monitors(f);
    return 0;
}

/// Closed from inside one of its own callbacks: freed right after, from the loop.
static void close_monitor(struct monitor *m) {
    lc_front *f = m->front;
    m->closed = 1;
    if (!f->collect_later) sd_event_add_defer(f->event, &f->collect_later, on_collect, f);
}

/// NameOwnerChanged(name, old, new) of the owner: gone when new is "".
static int on_owner_changed(sd_bus_message *msg, void *userdata, sd_bus_error *e) {
    (void)e;
    const char *name = NULL, *old = NULL, *new = NULL;
    if (sd_bus_message_read(msg, "sss", &name, &old, &new) >= 0 && new && !*new) close_monitor(userdata);
    return 0;
}

/// GetNameOwner(owner): an error means it left before the match was in.
static int on_owner_checked(sd_bus_message *msg, void *userdata, sd_bus_error *e) {
    (void)e;
    if (sd_bus_message_is_method_error(msg, NULL)) close_monitor(userdata);
    return 0;
}

/// The match is in: from now on the owner's end is seen; ask whether it
/// already came.
static int on_match_installed(sd_bus_message *msg, void *userdata, sd_bus_error *e) {
    (void)e;
    struct monitor *m = userdata;
    if (sd_bus_message_is_method_error(msg, NULL) ||
        sd_bus_call_method_async(sd_bus_message_get_bus(msg), &m->check, "org.freedesktop.DBus",
                                 "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner", on_owner_checked, m,
                                 "s", m->owner) < 0)
        close_monitor(m);
    return 0;
}

int lc_create_monitor(sd_bus_message *msg, void *userdata, sd_bus_error *e) {
    lc_front *f = userdata;
    lc_collect_monitors(f);
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
    if (r >= 0 && !m->owner) r = -ENOMEM;
    if (r >= 0 && asprintf(&m->path, MONITORS "/%" PRIu64, m->id) < 0) r = -ENOMEM;
    // Its owner's end, learnt without waiting (sd_bus_track would ask the bus, and wait).
    char *match = NULL;
    if (r >= 0 && asprintf(&match,
                           "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                           "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='%s'",
                           sender) < 0)
        r = -ENOMEM;
    if (r >= 0)
        r = sd_bus_add_match_async(sd_bus_message_get_bus(msg), &m->gone, match, on_owner_changed, on_match_installed,
                                   m);
    free(match);
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
    close_monitor(m);
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
        }
    }
}

static const sd_bus_vtable monitor_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("Id", "t", lc_get_u64, offsetof(struct monitor, id), SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("Owner", "s", lc_get_string, offsetof(struct monitor, owner), SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("Apps", "as", get_monitor_apps, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_METHOD_WITH_NAMES("Close", "", "", "", "", monitor_close, OPEN),
    SD_BUS_SIGNAL_WITH_NAMES("Record", "ts", SD_BUS_PARAM(sequence) SD_BUS_PARAM(record), 0),
    SD_BUS_SIGNAL_WITH_NAMES("Lost", "tt", SD_BUS_PARAM(first) SD_BUS_PARAM(last), 0),
    SD_BUS_VTABLE_END};

static const sd_bus_vtable operation_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("Id", "t", lc_get_u64, offsetof(struct operation, id), SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("Verb", "s", lc_get_string, offsetof(struct operation, verb), SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("App", "s", lc_get_string, offsetof(struct operation, app), SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("State", "s", get_operation_state, 0, EMITS),
    SD_BUS_PROPERTY("Result", "s", lc_get_string, offsetof(struct operation, result), EMITS),
    SD_BUS_PROPERTY("Reason", "s", lc_get_string, offsetof(struct operation, reason), EMITS),
    SD_BUS_METHOD_WITH_NAMES("Wait", "", "", "ss", SD_BUS_PARAM(result) SD_BUS_PARAM(reason), operation_wait, OPEN),
    SD_BUS_VTABLE_END};

int lc_append_operations(sd_bus_message *m, lc_front *f) {
    int r = 0;
    for (struct operation *o = f->operations; r >= 0 && o; o = o->next)
        r = lc_append_object(m, operation_vtable, o->path, OPERATION_IFACE, o);
    return r;
}

int lc_operations_register(lc_front *f, sd_bus *bus) {
    int r;
    if ((r = sd_bus_add_fallback_vtable(bus, NULL, OPERATIONS, OPERATION_IFACE, operation_vtable, operation_find, f)) < 0 ||
        (r = sd_bus_add_node_enumerator(bus, NULL, OPERATIONS, operation_nodes, f)) < 0 ||
        (r = sd_bus_add_fallback_vtable(bus, NULL, MONITORS, MONITOR_IFACE, monitor_vtable, monitor_find, f)) < 0)
        return r;
    return 0;
}

void lc_operations_drop(lc_front *f) {
    for (struct operation *o = f->operations; o; o = o->next) {
        for (size_t i = 0; i < o->n_waiters; i++) sd_bus_message_unref(o->waiters[i]);
        o->n_waiters = 0;
    }
    for (struct monitor *m = f->monitors; m; m = m->next) m->closed = 1;  // their owners are gone with the bus
    lc_collect_monitors(f);
}

void lc_operations_free(lc_front *f) {
    while (f->operations) free_operation(f, f->operations);
}
