// Commands: parsed, their caller's credentials learnt (kept per unique
// name), polkit asked when the daemon says it decides, handed to the
// daemon, replied to. See front.h.
#include "front.h"

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

static lc_front_request request_of(const struct pending *p, const struct credentials *c, int authorized) {
    return (lc_front_request){.verb = p->verb, .app = p->app, .scene = p->scene, .display = p->display,
                              .background = p->background, .argument = p->argument, .sender = p->sender,
                              .uid = c->uid, .pid = c->pid, .gids = c->gids, .n_gids = c->n_gids,
                              .authorized = authorized};
}

static void dispatch(struct pending *p, const struct credentials *c);

/// Keeps a reply until lc_front_flush, which comes after the save of
/// what the call changed: like the socket's answers, nothing a caller is
/// told leaves before it is durable.
static void hold(lc_front *f, sd_bus_message *call, sd_bus_message *reply, int r) {
    if (r >= 0 && f->n_held == f->cap_held) {
        size_t cap = f->cap_held ? f->cap_held * 2 : 16;
        sd_bus_message **held = realloc(f->held, cap * sizeof *held);
        if (!held) r = -ENOMEM;
        else f->held = held, f->cap_held = cap;
    }
    if (r < 0) {
        sd_bus_message_unref(reply);
        sd_bus_reply_method_errno(call, r, NULL);  // the caller is told at once rather than never
        return;
    }
    f->held[f->n_held++] = reply;
}

void lc_send_held(lc_front *f) {
    for (size_t i = 0; i < f->n_held; i++) {
        if (f->bus) sd_bus_send(f->bus, f->held[i], NULL);
        sd_bus_message_unref(f->held[i]);
    }
    f->n_held = 0;
}

/// Hands the call to the daemon, with who made it; its reply is held.
static void hand_on(struct pending *p, const struct credentials *c, int authorized) {
    lc_front *f = p->front;
    lc_front_request rq = request_of(p, c, authorized);
    lc_front_answer answer = {.descriptor = -1};
    f->cb.call(f->cb.context, &rq, &answer);
    sd_bus_message *reply = NULL;
    int r;
    const char *path = answer.operation ? lc_operation_path(f, answer.operation) : NULL;
    if (answer.error_name)
        r = sd_bus_message_new_method_errorf(p->call, &reply, answer.error_name, "%s",
                                             answer.error_message ? answer.error_message : "");
    else if (answer.operation && !path)
        r = sd_bus_message_new_method_errorf(p->call, &reply, SD_BUS_ERROR_FAILED, "the operation could not be made");
    else if ((r = sd_bus_message_new_method_return(p->call, &reply)) >= 0) {
        if (path) r = sd_bus_message_append(reply, "o", path);
        else if (answer.descriptor >= 0) r = sd_bus_message_append(reply, "h", answer.descriptor);  // a copy
    }
    if (answer.descriptor >= 0) close(answer.descriptor);
    hold(f, p->call, reply, r);
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
int lc_command(sd_bus_message *m, lc_front *f, const char *app, const char *display, const char *scene, int argument,
               int options, sd_bus_error *e) {
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
    int r = p->verb && p->sender && (!app || p->app) ? 0 : -ENOMEM;
    if (argument) {
        const char *s = NULL;
        r = sd_bus_message_read(m, "s", &s);
        if (r >= 0) p->argument = strdup(s);
    }
    if (r >= 0 && options) r = read_options(m, p, e);
    // A Display's or a Scene's own: not an option there.
    if (r >= 0 && !sd_bus_error_is_set(e) && ((display && p->display) || (scene && p->scene)))
        r = sd_bus_error_setf(e, SD_BUS_ERROR_INVALID_ARGS, "option '%s' is the object's own here",
                              display && p->display ? "display" : "scene");
    if (display && !p->display) p->display = strdup(display);
    if (scene && !p->scene) p->scene = strdup(scene);
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

int lc_manager_command(sd_bus_message *m, void *userdata, sd_bus_error *e) {
    return lc_command(m, userdata, NULL, NULL, NULL, strcmp(sd_bus_message_get_member(m), "OpenURL") == 0, 1, e);
}

int lc_report_shown(sd_bus_message *m, void *userdata, sd_bus_error *e) {
    return lc_command(m, userdata, NULL, NULL, NULL, 1, 0, e);
}

int lc_front_to_reporter(lc_front *f, const char *destination, const char *request) {
    if (!f->bus || !f->serving) return -ENOTCONN;
    sd_bus_message *signal = NULL;
    int r = sd_bus_message_new_signal(f->bus, &signal, ROOT, MANAGER_IFACE, "CompositorRequest");
    if (r >= 0) r = sd_bus_message_append_basic(signal, 's', request);
    if (r >= 0) r = sd_bus_send_to(f->bus, signal, destination, NULL);
    sd_bus_message_unref(signal);
    return r;
}

void lc_calls_drop(lc_front *f) {
    while (f->pending) free_pending(f->pending);
    for (size_t i = 0; i < f->n_held; i++) sd_bus_message_unref(f->held[i]);  // their callers went with the bus
    f->n_held = 0;
    forget_credentials(f);  // a new bus daemon numbers its connections from :1.0 again
}
