// See BusFront.h; the interface is docs/dbus.md and
// docs/io.lifecycled.Lifecycle1.xml. Nothing here blocks: credentials are
// asked for asynchronously, the name is requested asynchronously, a lost
// connection is retried from a timer. This file: the connection, the name,
// the manager's vtable; the rest in the files front.h lists.
#include "front.h"

#include <time.h>

void lc_say(lc_front *f, int priority, const char *fmt, ...) {
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (f->cb.log) f->cb.log(f->cb.context, priority, text);
}

char *lc_dup0(const char *s) { return strdup(s ? s : ""); }

/// Replaces *slot with a copy of `value`; 1 when it differed.
int lc_set_string(char **slot, const char *value) {
    if (!value) value = "";
    if (*slot && strcmp(*slot, value) == 0) return 0;
    free(*slot);
    *slot = strdup(value);
    return 1;
}

int lc_get_string(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *reply, void *userdata,
                  sd_bus_error *e) {
    (void)b, (void)p, (void)i, (void)prop, (void)e;
    const char *s = *(char **)userdata;
    return sd_bus_message_append_basic(reply, 's', s ? s : "");
}

int lc_get_u64(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *reply, void *userdata,
               sd_bus_error *e) {
    (void)b, (void)p, (void)i, (void)prop, (void)e;
    return sd_bus_message_append_basic(reply, 't', userdata);
}


static int get_version(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *reply, void *userdata,
                       sd_bus_error *e) {
    (void)b, (void)p, (void)i, (void)prop, (void)e;
    return sd_bus_message_append(reply, "s", ((lc_front *)userdata)->version);
}

static const sd_bus_vtable manager_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("Version", "s", get_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_METHOD_WITH_NAMES("GetApp", "s", SD_BUS_PARAM(name), "o", SD_BUS_PARAM(app), lc_get_app, OPEN),
    SD_BUS_METHOD_WITH_NAMES("ListApps", "", "", "a(sosu)", SD_BUS_PARAM(apps), lc_list_apps, OPEN),
    SD_BUS_METHOD_WITH_NAMES("Home", OPTIONS, SD_BUS_PARAM(options), "o", SD_BUS_PARAM(operation), lc_manager_command,
                             OPEN),
    SD_BUS_METHOD_WITH_NAMES("Lock", OPTIONS, SD_BUS_PARAM(options), "o", SD_BUS_PARAM(operation), lc_manager_command,
                             OPEN),
    SD_BUS_METHOD_WITH_NAMES("Unlock", OPTIONS, SD_BUS_PARAM(options), "o", SD_BUS_PARAM(operation), lc_manager_command,
                             OPEN),
    SD_BUS_METHOD_WITH_NAMES("CreateMonitor", OPTIONS, SD_BUS_PARAM(options), "o", SD_BUS_PARAM(monitor),
                             lc_create_monitor, OPEN),
    SD_BUS_METHOD_WITH_NAMES("OpenURL", "s" OPTIONS, SD_BUS_PARAM(url) SD_BUS_PARAM(options), "o",
                             SD_BUS_PARAM(operation), lc_manager_command, OPEN),
    SD_BUS_METHOD_WITH_NAMES("ReportShown", "s", SD_BUS_PARAM(report), "", "", lc_report_shown, OPEN),
    SD_BUS_SIGNAL_WITH_NAMES("CompositorRequest", "s", SD_BUS_PARAM(request), 0),
    SD_BUS_SIGNAL_WITH_NAMES("OperationFinished", "ossss",
                             SD_BUS_PARAM(operation) SD_BUS_PARAM(verb) SD_BUS_PARAM(app) SD_BUS_PARAM(result)
                                 SD_BUS_PARAM(reason),
                             0),
    SD_BUS_VTABLE_END};

// ---- The connection ----------------------------------------------------------

static int connect_bus(lc_front *f);
static int on_retry(sd_event_source *s, uint64_t usec, void *userdata);

static void arm_retry(lc_front *f) {
    if (f->retry) return;
    sd_event_add_time_relative(f->event, &f->retry, CLOCK_MONOTONIC, f->retry_usec, 0, on_retry, f);
}

/// What is queued, written, for at most `usec` (sd_bus_flush would wait
/// for ever on a stalled bus daemon).
static void flush_for(sd_bus *bus, uint64_t usec) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    uint64_t now = (uint64_t)t.tv_sec * 1000000 + (uint64_t)t.tv_nsec / 1000, end = now + usec;
    uint64_t queued = 0;
    while (now < end && sd_bus_get_n_queued_write(bus, &queued) >= 0 && queued > 0) {
        if (sd_bus_process(bus, NULL) < 0 || sd_bus_wait(bus, end - now) < 0) break;
        clock_gettime(CLOCK_MONOTONIC, &t);
        now = (uint64_t)t.tv_sec * 1000000 + (uint64_t)t.tv_nsec / 1000;
    }
}

void lc_front_flush_out(lc_front *f) {
    lc_send_held(f);
    if (f->bus) flush_for(f->bus, 1000000);
}

static void drop_connection(lc_front *f) {
    lc_calls_drop(f);
    lc_operations_drop(f);
    lc_objects_announced(f, 0);
    if (f->bus) {
        sd_bus_detach_event(f->bus);
        flush_for(f->bus, 1000000);
        sd_bus_close_unref(f->bus);
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
    lc_say(f, LOG_WARNING, "the system bus went away: the D-Bus interface is off until it is back");
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
        lc_say(f, LOG_WARNING, "another process took the bus name " NAME "; asking for it again now and then");
        f->serving = 0;
        f->retry_usec = 1000000;
        arm_retry(f);  // a new connection asks for it again
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
            lc_say(f, LOG_ERR, "cannot own the bus name " NAME ": %s (is dbus/" NAME ".conf installed?); asking again now and then",
                error->message ? error->message : error->name);
        f->said_refused = 1;
        f->retry_usec = f->retry_usec * 2 > 30000000 ? 30000000 : f->retry_usec * 2;
        arm_retry(f);
        return 0;
    }
    uint32_t result = 0;
    if (sd_bus_message_read(m, "u", &result) < 0 || (result != 1 && result != 4)) {
        // 3: another owner that does not allow replacement holds it.
        if (!f->said_refused) lc_say(f, LOG_ERR, "the bus name " NAME " is held by another process; asking again now and then");
        f->said_refused = 1;
        f->retry_usec = f->retry_usec * 2 > 30000000 ? 30000000 : f->retry_usec * 2;
        arm_retry(f);
        return 0;
    }
    f->serving = 1;
    f->retry_usec = 1000000;
    lc_objects_announced(f, 1);  // clients ask GetManagedObjects
    lc_say(f, LOG_INFO, "serving " NAME " on the system bus");
    f->said_down = 0;
    f->said_refused = 0;
    if (f->cb.connected) f->cb.connected(f->cb.context);
    return 0;
}

/// Before sd-bus dispatches a call: the manager's GetManagedObjects is ours.
static int on_message(sd_bus_message *m, void *userdata, sd_bus_error *e) {
    (void)e;
    if (!sd_bus_message_is_method_call(m, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects")) return 0;
    const char *path = sd_bus_message_get_path(m);
    if (!path || strcmp(path, ROOT) != 0) return 0;
    int r = lc_managed_objects(m, userdata);
    if (r < 0) sd_bus_reply_method_errno(m, r, NULL);
    return 1;  // handled
}

static int connect_bus(lc_front *f) {
    sd_bus *bus = NULL;
    int r = sd_bus_open_system_with_description(&bus, "lifecycled-front");
    if (r < 0) {
        if (!f->said_down)
            lc_say(f, LOG_NOTICE, "no system bus (%s): the D-Bus interface is off; retrying now and then", strerror(-r));
        f->said_down = 1;
        return r;
    }
    f->bus = bus;
    if ((r = sd_bus_add_object_vtable(bus, NULL, ROOT, MANAGER_IFACE, manager_vtable, f)) < 0 ||
        (r = sd_bus_add_object_manager(bus, NULL, ROOT)) < 0 || (r = sd_bus_add_filter(bus, NULL, on_message, f)) < 0 ||
        (r = lc_objects_register(f, bus)) < 0 || (r = lc_operations_register(f, bus)) < 0 ||
        (r = sd_bus_match_signal(bus, NULL, "org.freedesktop.DBus.Local", NULL, "org.freedesktop.DBus.Local",
                                 "Disconnected", on_disconnected, f)) < 0 ||
        (r = sd_bus_match_signal_async(bus, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                       "org.freedesktop.DBus", "NameLost", on_name_lost, NULL, f)) < 0 ||
        (r = sd_bus_request_name_async(bus, NULL, NAME,
                                       SD_BUS_NAME_ALLOW_REPLACEMENT | SD_BUS_NAME_REPLACE_EXISTING, on_name, f)) < 0 ||
        (r = sd_bus_attach_event(bus, f->event, (int)f->priority)) < 0) {
        lc_say(f, LOG_ERR, "cannot serve the D-Bus interface: %s", strerror(-r));
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
    f->version = lc_dup0(version);
    f->cb = *callbacks;
    f->retry_usec = 1000000;
    // Numbered from the time (µs): an operation's path is never one an
    // earlier daemon gave out, so a client's old path is UnknownObject.
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    f->next_operation = (uint64_t)now.tv_sec * 1000000 + (uint64_t)now.tv_nsec / 1000;
    if (connect_bus(f) < 0) arm_retry(f);
    *out = f;
    return 0;
}

void lc_front_close(lc_front *f) {
    if (!f) return;
    drop_connection(f);
    sd_event_source_disable_unref(f->retry);
    sd_event_source_disable_unref(f->flush_later);
    sd_event_source_disable_unref(f->collect_later);
    lc_operations_free(f);
    free(f->held);
    lc_objects_free(f);
    free(f->version);
    sd_event_unref(f->event);
    free(f);
}
