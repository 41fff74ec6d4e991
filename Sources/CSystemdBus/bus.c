// See CSystemdBus.h. Research and the busctl commands these calls follow:
// docs/research/systemd-252-scopes.md.
#include "CSystemdBus.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-login.h>
#include <time.h>

#define DEST "org.freedesktop.systemd1"
#define MANAGER_PATH "/org/freedesktop/systemd1"
#define MANAGER "org.freedesktop.systemd1.Manager"

static int fail(int r, const sd_bus_error *e, char **error) {
    if (error) {
        const char *text = (e && sd_bus_error_is_set(e) && e->message) ? e->message : strerror(r < 0 ? -r : r);
        *error = strdup(text);
    }
    return r < 0 ? r : -r;
}

static int open_bus(sd_bus **bus, char **error) {
    int r = sd_bus_open_system(bus);
    if (r < 0) return fail(r, NULL, error);
    return 0;
}

int lc_own_unit(char **unit, char **slice) {
    *unit = NULL;
    *slice = NULL;
    int r = sd_pid_get_unit(0, unit);
    if (r >= 0 && sd_pid_get_slice(0, slice) < 0) *slice = NULL;
    return r;
}

/// GetUnit: the unit's object path, -ENOENT when not loaded.
static int unit_path(sd_bus *bus, const char *unit, char **path, char **error) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    sd_bus_message *reply = NULL;
    int r = sd_bus_call_method(bus, DEST, MANAGER_PATH, MANAGER, "GetUnit", &e, &reply, "s", unit);
    if (r < 0) {
        if (sd_bus_error_has_name(&e, "org.freedesktop.systemd1.NoSuchUnit")) r = -ENOENT;
        r = fail(r, &e, error);
        sd_bus_error_free(&e);
        return r;
    }
    const char *p = NULL;
    r = sd_bus_message_read(reply, "o", &p);
    if (r >= 0) *path = strdup(p);
    sd_bus_message_unref(reply);
    return r < 0 ? fail(r, NULL, error) : 0;
}

int lc_unit_state(const char *unit, char **active_state, char **control_group, char **error) {
    *active_state = NULL;
    *control_group = NULL;
    sd_bus *bus = NULL;
    int r = open_bus(&bus, error);
    if (r < 0) return r;
    char *path = NULL;
    r = unit_path(bus, unit, &path, error);
    if (r == 0) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        r = sd_bus_get_property_string(bus, DEST, path, "org.freedesktop.systemd1.Unit", "ActiveState", &e,
                                       active_state);
        if (r >= 0 && strlen(unit) > 6 && strcmp(unit + strlen(unit) - 6, ".scope") == 0) {
            r = sd_bus_get_property_string(bus, DEST, path, "org.freedesktop.systemd1.Scope", "ControlGroup", &e,
                                           control_group);
        }
        if (r < 0) r = fail(r, &e, error);
        else r = 0;
        sd_bus_error_free(&e);
    }
    free(path);
    sd_bus_flush_close_unref(bus);
    return r;
}

struct job_wait {
    const char *job;
    char *result;
};

static int on_job_removed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
    (void)ret_error;
    struct job_wait *w = userdata;
    uint32_t id;
    const char *path = NULL, *unit = NULL, *result = NULL;
    if (sd_bus_message_read(m, "uoss", &id, &path, &unit, &result) < 0) return 0;
    if (w->job && path && strcmp(path, w->job) == 0 && !w->result) w->result = strdup(result ? result : "");
    return 0;
}

static uint64_t now_usec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int append_strv(sd_bus_message *m, const char *key, const char *value) {
    int r = sd_bus_message_open_container(m, 'r', "sv");
    if (r >= 0) r = sd_bus_message_append(m, "s", key);
    if (r >= 0) r = sd_bus_message_open_container(m, 'v', "as");
    if (r >= 0) r = sd_bus_message_append(m, "as", 1, value);
    if (r >= 0) r = sd_bus_message_close_container(m);
    if (r >= 0) r = sd_bus_message_close_container(m);
    return r;
}

int lc_scope_start(const char *scope, pid_t pid, const char *service, const char *slice,
                   const char *description, uint64_t timeout_usec, char **error) {
    sd_bus *bus = NULL;
    int r = open_bus(&bus, error);
    if (r < 0) return r;
    sd_bus_error e = SD_BUS_ERROR_NULL;
    sd_bus_message *m = NULL, *reply = NULL;
    sd_bus_slot *slot = NULL;
    struct job_wait w = {NULL, NULL};
    const char *job = NULL;
    uint64_t end = 0;

    // Listen before asking, so that a quick job's JobRemoved is not missed.
    // systemd sends it to the client that queued the job (no Subscribe()).
    r = sd_bus_match_signal(bus, &slot, DEST, MANAGER_PATH, MANAGER, "JobRemoved", on_job_removed, &w);
    if (r < 0) goto out;
    r = sd_bus_message_new_method_call(bus, &m, DEST, MANAGER_PATH, MANAGER, "StartTransientUnit");
    if (r >= 0) r = sd_bus_message_append(m, "ss", scope, "fail");
    if (r >= 0) r = sd_bus_message_open_container(m, 'a', "(sv)");
    if (r >= 0) r = sd_bus_message_append(m, "(sv)", "Description", "s", description);
    if (r >= 0) r = sd_bus_message_append(m, "(sv)", "Delegate", "b", 1);
    // The foreground app's memory.low counts only as far as every group
    // above it allows: no cap from the scope (the slice above is the admin's).
    if (r >= 0) r = sd_bus_message_append(m, "(sv)", "MemoryLow", "t", UINT64_MAX);
    if (r >= 0 && slice) r = sd_bus_message_append(m, "(sv)", "Slice", "s", slice);
    if (r >= 0) r = sd_bus_message_append(m, "(sv)", "PIDs", "au", 1, (uint32_t)pid);
    if (r >= 0) r = append_strv(m, "PartOf", service);
    if (r >= 0) r = append_strv(m, "Before", service);
    if (r >= 0) r = sd_bus_message_close_container(m);
    if (r >= 0) r = sd_bus_message_append(m, "a(sa(sv))", 0);
    if (r < 0) goto out;
    r = sd_bus_call(bus, m, timeout_usec, &e, &reply);
    if (r < 0) {
        if (sd_bus_error_has_name(&e, "org.freedesktop.systemd1.UnitExists")) r = -EEXIST;
        goto out;
    }
    r = sd_bus_message_read(reply, "o", &job);
    if (r < 0) goto out;
    w.job = job;
    end = now_usec() + timeout_usec;
    while (!w.result) {
        r = sd_bus_process(bus, NULL);
        if (r < 0) goto out;
        if (r > 0) continue;
        uint64_t now = now_usec();
        if (now >= end) {
            r = -ETIMEDOUT;
            goto out;
        }
        r = sd_bus_wait(bus, end - now);
        if (r < 0) goto out;
    }
    if (strcmp(w.result, "done") != 0) {
        sd_bus_error_setf(&e, "org.freedesktop.systemd1.JobFailed", "the start job of %s ended '%s'", scope,
                          w.result);
        r = -EIO;
        goto out;
    }
    r = 0;
out:
    if (r < 0) r = fail(r, &e, error);
    sd_bus_error_free(&e);
    free(w.result);
    sd_bus_slot_unref(slot);
    sd_bus_message_unref(m);
    sd_bus_message_unref(reply);
    sd_bus_flush_close_unref(bus);
    return r;
}

int lc_unit_job_type(const char *unit, char **type, char **error) {
    *type = NULL;
    sd_bus *bus = NULL;
    int r = open_bus(&bus, error);
    if (r < 0) return r;
    char *path = NULL;
    sd_bus_error e = SD_BUS_ERROR_NULL;
    sd_bus_message *reply = NULL;
    r = unit_path(bus, unit, &path, error);
    if (r < 0) goto out;
    r = sd_bus_get_property(bus, DEST, path, "org.freedesktop.systemd1.Unit", "Job", &e, &reply, "(uo)");
    if (r < 0) {
        r = fail(r, &e, error);
        goto out;
    }
    uint32_t id = 0;
    const char *job = NULL;
    r = sd_bus_message_read(reply, "(uo)", &id, &job);
    if (r < 0) {
        r = fail(r, NULL, error);
        goto out;
    }
    r = 0;  // no job, unless the next call finds one
    if (id != 0) {
        r = sd_bus_get_property_string(bus, DEST, job, "org.freedesktop.systemd1.Job", "JobType", &e, type);
        // The job may have finished between the two calls: no job, then.
        if (r < 0) r = 0;
    }
out:
    sd_bus_error_free(&e);
    sd_bus_message_unref(reply);
    free(path);
    sd_bus_flush_close_unref(bus);
    return r;
}
