// The objects the daemon pushes: apps, displays and scenes. Each keeps its
// values in slots; a push compares them with the kept ones and marks the
// properties that changed, and lc_front_flush signals each changed object
// once, naming only those. Reads are served from the kept values. See front.h.
#include "front.h"

/// A kind of object: its interface, its properties in bit order, and which
/// property each slot belongs to (-1: none; a value never signalled).
struct kind {
    const char *iface;
    const char *const *names;
    signed char string_property[STRING_SLOTS];
    signed char number_property[NUMBER_SLOTS];
};

// Apps. Strings: state, awaiting, band, display, delivery, tasks ("id\tname"
// lines), scenes (lines), end reason, end description. Numbers: pid,
// launching, frozen, end time, end pid, footprint (never signalled).
static const char *const app_names[] = {"State",    "Awaiting",        "Band",   "Display",         "Delivery",
                                        "BackgroundTasks", "Scenes", "LastTermination", "Pid", "Launching",
                                        "Frozen",   NULL};
// Displays. Strings: front (scene refs, lines). Numbers: slots, locked, interruptions.
static const char *const display_names[] = {"Front", "Slots", "Locked", "Interruptions", NULL};
// Scenes. Strings: display, state, the app's object (const), the app's name
// (const), the scene's name (const). Numbers: in front, discarding, shed.
static const char *const scene_names[] = {"Display", "State", "InFront", "Discarding", "Shed", NULL};

static const struct kind kinds[] = {
    [LC_FRONT_APP] = {APP_IFACE, app_names, {0, 1, 2, 3, 4, 5, 6, 7, 7, -1}, {8, 9, 10, 7, 7, -1}},
    [LC_FRONT_DISPLAY] = {DISPLAY_IFACE, display_names, {0, -1, -1, -1, -1, -1, -1, -1, -1, -1},
                          {1, 2, 3, -1, -1, -1}},
    [LC_FRONT_SCENE] = {SCENE_IFACE, scene_names, {0, 1, -1, -1, -1, -1, -1, -1, -1, -1}, {2, 3, 4, -1, -1, -1}},
};

static int compare_path(const void *key, const void *element) {
    return strcmp((const char *)key, (*(struct object *const *)element)->path);
}

static struct object *at_path(lc_front *f, const char *path) {
    struct object **found = bsearch(path, f->objects, f->n_objects, sizeof *f->objects, compare_path);
    return found ? *found : NULL;
}

/// A name that sd_bus_path_encode leaves as it is: a letter, then letters
/// and digits (it escapes everything else, and a leading digit).
static int plain_label(const char *s, size_t n) {
    if (n == 0 || !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return 0;
    for (size_t i = 1; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9'))) return 0;
    return 1;
}

/// The object's path: apps and displays by name, a scene ("app/scene") under its app.
static int path_of(int kind, const char *key, char **path) {
    const char *prefix = kind == LC_FRONT_DISPLAY ? DISPLAYS : APPS;
    const char *slash = kind == LC_FRONT_SCENE ? strchr(key, '/') : NULL;
    if (kind == LC_FRONT_SCENE && !slash) return -EINVAL;
    size_t n = slash ? (size_t)(slash - key) : strlen(key), n_scene = slash ? strlen(slash + 1) : 0;
    if (plain_label(key, n) && (!slash || plain_label(slash + 1, n_scene))) {
        // What the encoding below makes of such names, in one allocation:
        // this runs for every object pushed after every save.
        size_t n_prefix = strlen(prefix);
        char *p = malloc(n_prefix + 1 + n + (slash ? strlen("/scene/") + n_scene : 0) + 1), *t = p;
        if (!p) return -ENOMEM;
        t = mempcpy(t, prefix, n_prefix);
        *t++ = '/';
        t = mempcpy(t, key, n);
        if (slash) t = mempcpy(mempcpy(t, "/scene/", strlen("/scene/")), slash + 1, n_scene);
        *t = 0;
        *path = p;
        return 0;
    }
    if (!slash) return sd_bus_path_encode(prefix, key, path);
    char *app = strndup(key, n), *app_path = NULL, *scenes = NULL;
    int r = app ? sd_bus_path_encode(APPS, app, &app_path) : -ENOMEM;
    if (r >= 0) r = asprintf(&scenes, "%s/scene", app_path) < 0 ? -ENOMEM : 0;
    if (r >= 0) r = sd_bus_path_encode(scenes, slash + 1, path);
    free(app), free(app_path), free(scenes);
    return r;
}

char *lc_front_path(int kind, const char *key) {
    char *path = NULL;
    return path_of(kind, key, &path) < 0 ? NULL : path;
}

static void free_object(struct object *o) {
    for (int i = 0; i < STRING_SLOTS; i++) free(o->s[i]);
    free(o->key), free(o->path), free(o);
}

static void queue(lc_front *f, struct object *o) {
    if (o->queued) return;
    if (f->n_dirty == f->cap_dirty) {
        size_t cap = f->cap_dirty ? f->cap_dirty * 2 : 64;
        struct object **d = realloc(f->dirty, cap * sizeof *d);
        if (!d) return;  // no memory: its change is signalled with the next one
        f->dirty = d, f->cap_dirty = cap;
    }
    f->dirty[f->n_dirty++] = o;
    o->queued = 1;
}

void lc_front_set(lc_front *f, int kind, const char *key, const char *strings, size_t n_strings,
                  const uint64_t *numbers, size_t n_numbers) {
    if (kind < 0 || kind > LC_FRONT_SCENE) return;
    char *path = NULL;
    if (path_of(kind, key, &path) < 0) return;
    struct object *o = at_path(f, path);
    if (!o) {
        if (f->n_objects == f->cap_objects) {
            size_t cap = f->cap_objects ? f->cap_objects * 2 : 64;
            struct object **objects = realloc(f->objects, cap * sizeof *objects);
            if (!objects) return free(path);
            f->objects = objects, f->cap_objects = cap;
        }
        if (!(o = calloc(1, sizeof *o))) return free(path);
        o->front = f, o->kind = kind, o->key = strdup(key), o->path = path;
        size_t at = 0;
        while (at < f->n_objects && strcmp(f->objects[at]->path, path) < 0) at++;
        memmove(f->objects + at + 1, f->objects + at, (f->n_objects - at) * sizeof *f->objects);
        f->objects[at] = o;
        f->n_objects++;
    } else {
        free(path);
    }
    o->removing = 0;
    const struct kind *k = &kinds[kind];
    uint32_t changed = 0;
    const char *string = strings;
    for (size_t i = 0; i < STRING_SLOTS && i < n_strings; i++, string += strlen(string) + 1)
        if (lc_set_string(&o->s[i], string) && k->string_property[i] >= 0) changed |= 1u << k->string_property[i];
    for (size_t i = 0; i < NUMBER_SLOTS && i < n_numbers; i++) {
        if (o->n[i] == numbers[i]) continue;
        o->n[i] = numbers[i];
        if (k->number_property[i] >= 0) changed |= 1u << k->number_property[i];
    }
    o->changed |= changed;
    if (changed || !o->announced) queue(f, o);
}

void lc_front_remove(lc_front *f, int kind, const char *key) {
    char *path = NULL;
    if (path_of(kind, key, &path) < 0) return;
    struct object *o = at_path(f, path);
    free(path);
    if (!o) return;
    o->removing = 1;
    queue(f, o);
}

static void drop_object(lc_front *f, struct object *o) {
    for (size_t i = 0; i < f->n_objects; i++) {
        if (f->objects[i] != o) continue;
        memmove(f->objects + i, f->objects + i + 1, (f->n_objects - i - 1) * sizeof *f->objects);
        f->n_objects--;
        break;
    }
    free_object(o);
}

static int on_flush_later(sd_event_source *s, uint64_t usec, void *userdata) {
    (void)usec;
    lc_front *f = userdata;
    sd_event_source_disable_unref(s);
    f->flush_later = NULL;
    lc_front_flush(f);
    return 0;
}

/// While the bus daemon takes no messages (more than QUEUE_HIGH waiting to
/// be written), signals wait, each object's changes gathered into one, and
/// go once it does: the daemon's memory does not grow with a stalled bus.
static int bus_stalled(lc_front *f) {
    uint64_t queued = 0;
    if (!f->serving || sd_bus_get_n_queued_write(f->bus, &queued) < 0 || queued <= QUEUE_HIGH) return 0;
    if (!f->flush_later) {
        sd_event_add_time_relative(f->event, &f->flush_later, CLOCK_MONOTONIC, 100000, 0, on_flush_later, f);
    }
    return 1;
}

int lc_front_stalled(lc_front *f) { return bus_stalled(f); }

int lc_front_serving(const lc_front *f) { return f->serving; }

static const sd_bus_vtable app_vtable[], display_vtable[], scene_vtable[];
static const sd_bus_vtable *const vtables[] = {
    [LC_FRONT_APP] = app_vtable, [LC_FRONT_DISPLAY] = display_vtable, [LC_FRONT_SCENE] = scene_vtable};

/// PropertiesChanged naming `names` (their values, none invalidated): the
/// message sd_bus_emit_properties_changed_strv sends, built from the object
/// in hand with its vtable's getters. sd-bus's own finds the object again
/// (every fallback vtable registered above the path, each one's find) and
/// walks the vtable twice: nearly a third of each signal's instructions
/// (docs/performance.md, "The bus's signals").
static void emit_changed(lc_front *f, struct object *o, const char *const *names) {
    const char *iface = kinds[o->kind].iface;
    sd_bus_message *m = NULL;
    sd_bus_error e = SD_BUS_ERROR_NULL;
    int r = sd_bus_message_new_signal(f->bus, &m, o->path, "org.freedesktop.DBus.Properties", "PropertiesChanged");
    if (r >= 0) r = sd_bus_message_append_basic(m, 's', iface);
    if (r >= 0) r = sd_bus_message_open_container(m, 'a', "{sv}");
    for (const char *const *name = names; r >= 0 && *name; name++) {
        const sd_bus_vtable *v = vtables[o->kind];
        while (v->type != _SD_BUS_VTABLE_END && !(v->type == _SD_BUS_VTABLE_PROPERTY && !strcmp(v->x.property.member, *name)))
            v++;
        if (v->type == _SD_BUS_VTABLE_END) continue;  // not a property (kinds[] and the vtable disagree)
        r = sd_bus_message_open_container(m, 'e', "sv");
        if (r >= 0) r = sd_bus_message_append_basic(m, 's', *name);
        if (r >= 0) r = sd_bus_message_open_container(m, 'v', v->x.property.signature);
        if (r >= 0) r = v->x.property.get(f->bus, o->path, iface, *name, m, (uint8_t *)o + v->x.property.offset, &e);
        if (r >= 0) r = sd_bus_message_close_container(m);
        if (r >= 0) r = sd_bus_message_close_container(m);
    }
    sd_bus_error_free(&e);
    if (r >= 0) r = sd_bus_message_close_container(m);
    if (r >= 0) r = sd_bus_message_append_strv(m, NULL);  // invalidated: none
    // Unsent, as sd-bus's own: only when the connection is going, and the
    // next connection's clients read every object afresh.
    if (r >= 0) sd_bus_send(f->bus, m, NULL);
    sd_bus_message_unref(m);
}

void lc_front_flush(lc_front *f) {
    lc_collect_monitors(f);
    lc_send_held(f);  // answers go even to a slow bus: one per call, and calls are bounded
    if (bus_stalled(f)) return;
    for (size_t i = 0; i < f->n_dirty; i++) {
        struct object *o = f->dirty[i];
        o->queued = 0;
        if (o->removing) {
            if (f->serving && o->announced) sd_bus_emit_interfaces_removed(f->bus, o->path, kinds[o->kind].iface, NULL);
            drop_object(f, o);
            continue;
        }
        if (f->serving && !o->announced) {
            sd_bus_emit_interfaces_added(f->bus, o->path, kinds[o->kind].iface, NULL);
            o->announced = 1;
        } else if (f->serving && o->changed) {
            const char *names[32];
            size_t n = 0;
            for (int p = 0; kinds[o->kind].names[p]; p++)
                if (o->changed & (1u << p)) names[n++] = kinds[o->kind].names[p];
            names[n] = NULL;
            emit_changed(f, o, names);
        }
        o->changed = 0;
    }
    f->n_dirty = 0;
}

void lc_objects_announced(lc_front *f, int announced) {
    for (size_t i = 0; i < f->n_objects; i++) f->objects[i]->announced = announced;
}

void lc_objects_free(lc_front *f) {
    for (size_t i = 0; i < f->n_objects; i++) free_object(f->objects[i]);
    free(f->objects), free(f->dirty);
}

// ---- Reads ---------------------------------------------------------------------

static int get_u32(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *reply, void *userdata,
                   sd_bus_error *e) {
    (void)b, (void)p, (void)i, (void)prop, (void)e;
    uint32_t u = (uint32_t) * (uint64_t *)userdata;
    return sd_bus_message_append_basic(reply, 'u', &u);
}

static int get_bool(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *reply, void *userdata,
                    sd_bus_error *e) {
    (void)b, (void)p, (void)i, (void)prop, (void)e;
    int yes = *(uint64_t *)userdata != 0;
    return sd_bus_message_append_basic(reply, 'b', &yes);
}

static int get_path(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *reply, void *userdata,
                    sd_bus_error *e) {
    (void)b, (void)p, (void)i, (void)prop, (void)e;
    const char *s = *(char **)userdata;
    return sd_bus_message_append_basic(reply, 'o', s && *s ? s : "/");
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
            r = sd_bus_message_append_basic(reply, 's', line);
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
    const struct object *o = userdata;
    return sd_bus_message_append(reply, "(sstu)", o->s[7] ? o->s[7] : "", o->s[8] ? o->s[8] : "", o->n[3],
                                 (uint32_t)o->n[4]);
}

static int find(int kind, const char *path, void *userdata, void **found) {
    struct object *o = at_path(userdata, path);
    if (!o || o->kind != kind) return 0;
    *found = o;
    return 1;
}

static int app_find(sd_bus *b, const char *path, const char *iface, void *userdata, void **found, sd_bus_error *e) {
    (void)b, (void)iface, (void)e;
    return find(LC_FRONT_APP, path, userdata, found);
}

static int display_find(sd_bus *b, const char *path, const char *iface, void *userdata, void **found, sd_bus_error *e) {
    (void)b, (void)iface, (void)e;
    return find(LC_FRONT_DISPLAY, path, userdata, found);
}

static int scene_find(sd_bus *b, const char *path, const char *iface, void *userdata, void **found, sd_bus_error *e) {
    (void)b, (void)iface, (void)e;
    return find(LC_FRONT_SCENE, path, userdata, found);
}

/// Every object under `prefix` (apps and their scenes; displays).
static int nodes(sd_bus *b, const char *prefix, void *userdata, char ***out, sd_bus_error *e) {
    (void)b, (void)e;
    lc_front *f = userdata;
    size_t len = strlen(prefix);
    char **list = calloc(f->n_objects + 1, sizeof *list);
    if (!list) return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < f->n_objects; i++) {
        const struct object *o = f->objects[i];
        if (!o->removing && strncmp(o->path, prefix, len) == 0 && o->path[len] == '/') list[n++] = strdup(o->path);
    }
    *out = list;
    return 0;
}

int lc_get_app(sd_bus_message *m, void *userdata, sd_bus_error *e) {
    lc_front *f = userdata;
    const char *name = NULL;
    char *path = NULL;
    int r = sd_bus_message_read(m, "s", &name);
    if (r < 0) return r;
    if ((r = path_of(LC_FRONT_APP, name, &path)) < 0) return r;
    struct object *o = at_path(f, path);
    free(path);
    if (!o || o->kind != LC_FRONT_APP || o->removing)
        return sd_bus_error_setf(e, NO_SUCH_APP, "unknown app '%s'", name);
    return sd_bus_reply_method_return(m, "o", o->path);
}

int lc_list_apps(sd_bus_message *m, void *userdata, sd_bus_error *e) {
    (void)e;
    lc_front *f = userdata;
    sd_bus_message *reply = NULL;
    int r = sd_bus_message_new_method_return(m, &reply);
    if (r >= 0) r = sd_bus_message_open_container(reply, 'a', "(sosu)");
    for (size_t i = 0; r >= 0 && i < f->n_objects; i++) {
        const struct object *o = f->objects[i];
        if (o->kind == LC_FRONT_APP && !o->removing)
            r = sd_bus_message_append(reply, "(sosu)", o->key, o->path, o->s[0] ? o->s[0] : "", (uint32_t)o->n[0]);
    }
    if (r >= 0) r = sd_bus_message_close_container(reply);
    if (r >= 0) r = sd_bus_send(NULL, reply, NULL);
    sd_bus_message_unref(reply);
    return r < 0 ? r : 1;
}

// ---- Commands on objects ---------------------------------------------------------

static int app_command(sd_bus_message *m, void *userdata, sd_bus_error *e) {
    struct object *o = userdata;
    const char *member = sd_bus_message_get_member(m);
    int argument = strcmp(member, "Push") == 0 || strcmp(member, "Signal") == 0;
    return lc_command(m, o->front, o->key, NULL, NULL, argument, strcmp(member, "Signal") != 0, e);
}

static int display_command(sd_bus_message *m, void *userdata, sd_bus_error *e) {
    struct object *o = userdata;
    return lc_command(m, o->front, NULL, o->key, NULL, 0, 1, e);
}

static int scene_command(sd_bus_message *m, void *userdata, sd_bus_error *e) {
    struct object *o = userdata;
    return lc_command(m, o->front, o->s[3], NULL, o->s[4], 0, 1, e);
}

#define S(i) offsetof(struct object, s[i])
#define N(i) offsetof(struct object, n[i])
#define CONST SD_BUS_VTABLE_PROPERTY_CONST
#define RETURNS_OPERATION(name, handler)                                                                              \
    SD_BUS_METHOD_WITH_NAMES(name, OPTIONS, SD_BUS_PARAM(options), "o", SD_BUS_PARAM(operation), handler, OPEN)

static const sd_bus_vtable app_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("Id", "s", lc_get_string, offsetof(struct object, key), CONST),
    SD_BUS_PROPERTY("State", "s", lc_get_string, S(0), EMITS),
    SD_BUS_PROPERTY("Pid", "u", get_u32, N(0), EMITS),
    SD_BUS_PROPERTY("Launching", "b", get_bool, N(1), EMITS),
    SD_BUS_PROPERTY("Frozen", "b", get_bool, N(2), EMITS),
    SD_BUS_PROPERTY("Awaiting", "s", lc_get_string, S(1), EMITS),
    SD_BUS_PROPERTY("Band", "s", lc_get_string, S(2), EMITS),
    SD_BUS_PROPERTY("Display", "s", lc_get_string, S(3), EMITS),
    SD_BUS_PROPERTY("Delivery", "s", lc_get_string, S(4), EMITS),
    SD_BUS_PROPERTY("BackgroundTasks", "a(us)", get_lines, S(5), EMITS),
    SD_BUS_PROPERTY("Scenes", "as", get_lines, S(6), EMITS),
    SD_BUS_PROPERTY("LastTermination", "(sstu)", get_end, 0, EMITS),
    SD_BUS_PROPERTY("Footprint", "t", lc_get_u64, N(5), 0),
    RETURNS_OPERATION("Launch", app_command),
    RETURNS_OPERATION("Activate", app_command),
    RETURNS_OPERATION("Stop", app_command),
    RETURNS_OPERATION("Kill", app_command),
    RETURNS_OPERATION("Restart", app_command),
    RETURNS_OPERATION("Fetch", app_command),
    SD_BUS_METHOD_WITH_NAMES("Push", "s" OPTIONS, SD_BUS_PARAM(payload) SD_BUS_PARAM(options), "o",
                             SD_BUS_PARAM(operation), app_command, OPEN),
    SD_BUS_METHOD_WITH_NAMES("Signal", "s", SD_BUS_PARAM(signal), "", "", app_command, OPEN),
    SD_BUS_VTABLE_END};

static const sd_bus_vtable display_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("Name", "s", lc_get_string, offsetof(struct object, key), CONST),
    SD_BUS_PROPERTY("Slots", "u", get_u32, N(0), EMITS),
    SD_BUS_PROPERTY("Front", "as", get_lines, S(0), EMITS),
    SD_BUS_PROPERTY("Locked", "b", get_bool, N(1), EMITS),
    SD_BUS_PROPERTY("Interruptions", "u", get_u32, N(2), EMITS),
    RETURNS_OPERATION("Home", display_command),
    RETURNS_OPERATION("Lock", display_command),
    RETURNS_OPERATION("Unlock", display_command),
    SD_BUS_METHOD_WITH_NAMES("BeginInterruption", OPTIONS, SD_BUS_PARAM(options), "h", SD_BUS_PARAM(lease),
                             display_command, OPEN),
    SD_BUS_VTABLE_END};

static const sd_bus_vtable scene_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("Name", "s", lc_get_string, S(4), CONST),
    SD_BUS_PROPERTY("App", "o", get_path, S(2), CONST),
    SD_BUS_PROPERTY("Display", "s", lc_get_string, S(0), EMITS),
    SD_BUS_PROPERTY("State", "s", lc_get_string, S(1), EMITS),
    SD_BUS_PROPERTY("InFront", "b", get_bool, N(0), EMITS),
    SD_BUS_PROPERTY("Discarding", "b", get_bool, N(1), EMITS),
    SD_BUS_PROPERTY("Shed", "b", get_bool, N(2), EMITS),
    RETURNS_OPERATION("Activate", scene_command),
    RETURNS_OPERATION("Discard", scene_command),
    SD_BUS_VTABLE_END};

/// An interface and its properties' dictionary, opened: append_basic and
/// open_container rather than sd_bus_message_append, which parses its
/// format string for every value (a third of GetManagedObjects' time).
static int open_interface(sd_bus_message *m, const char *iface) {
    int r = sd_bus_message_open_container(m, 'e', "sa{sv}");
    if (r >= 0) r = sd_bus_message_append_basic(m, 's', iface);
    if (r >= 0) r = sd_bus_message_open_container(m, 'a', "{sv}");
    return r;
}

static int close_interface(sd_bus_message *m) {
    int r = sd_bus_message_close_container(m);
    return r >= 0 ? sd_bus_message_close_container(m) : r;
}

int lc_append_object(sd_bus_message *m, const sd_bus_vtable *vtable, const char *path, const char *iface,
                     void *object) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    int r = sd_bus_message_open_container(m, 'e', "oa{sa{sv}}");
    if (r >= 0) r = sd_bus_message_append_basic(m, 'o', path);
    if (r >= 0) r = sd_bus_message_open_container(m, 'a', "{sa{sv}}");
    // Ours only: not the standard Peer, Introspectable and Properties every
    // object has (as GDBus's object manager, unlike sd-bus's; InterfacesAdded
    // and InterfacesRemoved name ours only too). A third fewer containers.
    if (r >= 0) r = open_interface(m, iface);
    for (const sd_bus_vtable *v = vtable; r >= 0 && v->type != _SD_BUS_VTABLE_END; v++) {
        if (v->type != _SD_BUS_VTABLE_PROPERTY) continue;
        const char *name = v->x.property.member, *signature = v->x.property.signature;
        r = sd_bus_message_open_container(m, 'e', "sv");
        if (r >= 0) r = sd_bus_message_append_basic(m, 's', name);
        if (r >= 0) r = sd_bus_message_open_container(m, 'v', signature);
        if (r >= 0) r = v->x.property.get(NULL, path, iface, name, m, (uint8_t *)object + v->x.property.offset, &e);
        if (r >= 0) r = sd_bus_message_close_container(m);
        if (r >= 0) r = sd_bus_message_close_container(m);
    }
    sd_bus_error_free(&e);
    if (r >= 0) r = close_interface(m);
    if (r >= 0) r = sd_bus_message_close_container(m);
    if (r >= 0) r = sd_bus_message_close_container(m);
    return r;
}

int lc_managed_objects(sd_bus_message *call, lc_front *f) {
    sd_bus_message *reply = NULL;
    int r = sd_bus_message_new_method_return(call, &reply);
    if (r >= 0) r = sd_bus_message_open_container(reply, 'a', "{oa{sa{sv}}}");
    for (size_t i = 0; r >= 0 && i < f->n_objects; i++) {
        struct object *o = f->objects[i];
        if (!o->removing) r = lc_append_object(reply, vtables[o->kind], o->path, kinds[o->kind].iface, o);
    }
    if (r >= 0) r = lc_append_operations(reply, f);
    if (r >= 0) r = sd_bus_message_close_container(reply);
    if (r >= 0) r = sd_bus_send(NULL, reply, NULL);
    sd_bus_message_unref(reply);
    return r;
}

int lc_objects_register(lc_front *f, sd_bus *bus) {
    int r;
    if ((r = sd_bus_add_fallback_vtable(bus, NULL, APPS, APP_IFACE, app_vtable, app_find, f)) < 0 ||
        (r = sd_bus_add_fallback_vtable(bus, NULL, APPS, SCENE_IFACE, scene_vtable, scene_find, f)) < 0 ||
        (r = sd_bus_add_node_enumerator(bus, NULL, APPS, nodes, f)) < 0 ||
        (r = sd_bus_add_fallback_vtable(bus, NULL, DISPLAYS, DISPLAY_IFACE, display_vtable, display_find, f)) < 0 ||
        (r = sd_bus_add_node_enumerator(bus, NULL, DISPLAYS, nodes, f)) < 0)
        return r;
    return 0;
}
