/* The app channel's wire format: see wire.h. Every check and every error
 * text follows Sources/LifecycleWire/Wire.swift, in the same order, so that
 * a message is accepted or rejected (and why) the same way on both sides. */
#include "wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* MARK: - Reading */

struct reader {
    const uint8_t *bytes;
    size_t size;
    size_t offset;
    char *error;
};

static int fail(struct reader *r, const char *format, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct reader *r, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    vsnprintf(r->error, LC_WIRE_ERROR_MAX, format, ap);
    va_end(ap);
    return -1;
}

/* Takes n bytes; `what` names them in the error ("%s%s": prefix + suffix,
 * so that "option key" + " length" needs no buffer). */
static int take(struct reader *r, size_t n, const char *what, const char *suffix, const uint8_t **out) {
    if (r->size - r->offset < n)
        return fail(r, "truncated: %s%s needs %zu bytes at offset %zu, %zu left", what, suffix, n, r->offset,
                    r->size - r->offset);
    *out = r->bytes + r->offset;
    r->offset += n;
    return 0;
}

static int u8(struct reader *r, const char *what, uint8_t *v) {
    const uint8_t *p = NULL;
    if (take(r, 1, what, "", &p)) return -1;
    *v = p[0];
    return 0;
}

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

static int u16s(struct reader *r, const char *what, const char *suffix, uint16_t *v) {
    const uint8_t *p = NULL;
    if (take(r, 2, what, suffix, &p)) return -1;
    *v = le16(p);
    return 0;
}
static int u16(struct reader *r, const char *what, uint16_t *v) { return u16s(r, what, "", v); }

static int u32(struct reader *r, const char *what, uint32_t *v) {
    const uint8_t *p = NULL;
    if (take(r, 4, what, "", &p)) return -1;
    *v = le32(p);
    return 0;
}

/* A time: -1 is "none" (kept as -1); any other negative value is an error. */
static int i64(struct reader *r, const char *what, int64_t *v) {
    const uint8_t *p = NULL;
    if (take(r, 8, what, "", &p)) return -1;
    uint64_t raw = le64(p);
    int64_t s;
    memcpy(&s, &raw, sizeof s); /* two's complement, as Int64(bitPattern:) */
    if (s == -1) { *v = -1; return 0; }
    if (s < 0) return fail(r, "%s: negative time %lld", what, (long long)s);
    *v = s;
    return 0;
}

static int string(struct reader *r, const char *what, size_t max, struct lifecycle__str *out) {
    uint16_t n;
    if (u16s(r, what, " length", &n)) return -1;
    if (n > max) return fail(r, "%s: %u bytes, more than %zu", what, (unsigned)n, max);
    const uint8_t *p = NULL;
    if (take(r, n, what, "", &p)) return -1;
    if (!lifecycle__valid_utf8(p, n)) return fail(r, "%s: not UTF-8", what);
    out->bytes = p;
    out->length = n;
    return 0;
}

/* A u32 length and that many bytes, at most `max` (restoration data). */
static int blob(struct reader *r, const char *what, size_t max, const uint8_t **out, uint32_t *size) {
    const uint8_t *p = NULL;
    if (take(r, 4, what, " length", &p)) return -1;
    uint32_t n = le32(p);
    if (n > max) return fail(r, "%s: %u bytes, more than %zu", what, (unsigned)n, max);
    if (take(r, n, what, "", out)) return -1;
    *size = n;
    return 0;
}

static int end(struct reader *r) {
    if (r->offset != r->size) return fail(r, "%zu unexpected trailing bytes", r->size - r->offset);
    return 0;
}

static int known_type(uint8_t t) {
    return t == LC_T_EVENT || t == LC_T_TASK_REPLY || t == LC_T_TASKS_EXPIRING || t == LC_T_RESUMED ||
           t == LC_T_RESTORATION || t == LC_T_ACKNOWLEDGE || t == LC_T_BEGIN_TASK || t == LC_T_END_TASK ||
           t == LC_T_RESUME || t == LC_T_COMPLETE || t == LC_T_SAVE_RESTORATION || t == LC_T_PREWARMED;
}

static int header(struct reader *r, struct lifecycle__message *m) {
    if (r->size > LC_WIRE_MAX_MESSAGE)
        return fail(r, "message of %zu bytes exceeds %d", r->size, LC_WIRE_MAX_MESSAGE);
    uint8_t version, type;
    uint16_t flags;
    if (u8(r, "version", &version)) return -1;
    if (version != LC_WIRE_VERSION)
        return fail(r, "unsupported protocol version %u (this side speaks %d)", (unsigned)version, LC_WIRE_VERSION);
    if (u8(r, "type", &type)) return -1;
    if (!known_type(type)) return fail(r, "unknown message type 0x%x", (unsigned)type);
    if (u16(r, "flags", &flags)) return -1;
    if (flags != 0) return fail(r, "unknown flags 0x%x", (unsigned)flags);
    m->type = type;
    return u32(r, "id", &m->id);
}

static void clear(struct lifecycle__message *m) {
    memset(m, 0, sizeof *m);
    m->deadline = -1;
    m->budget_end = -1;
}

int lifecycle__decode_daemon(const uint8_t *bytes, size_t size, struct lifecycle__message *m, char *error) {
    struct reader r = {bytes, size, 0, error};
    clear(m);
    error[0] = 0;
    if (header(&r, m)) return -1;
    switch (m->type) {
    case LC_T_EVENT: {
        if (u8(&r, "event", &m->event)) return -1;
        if (m->event < 1 || m->event > LC_WIRE_LAST_EVENT) return fail(&r, "unknown event %u", (unsigned)m->event);
        if (u8(&r, "launch mode", &m->background)) return -1;
        if (m->background > 1) return fail(&r, "unknown launch mode %u", (unsigned)m->background);
        if (u16(&r, "option count", &m->option_count)) return -1;
        if (i64(&r, "deadline", &m->deadline)) return -1;
        if (i64(&r, "budget end", &m->budget_end)) return -1;
        m->options = bytes + r.offset;
        for (unsigned i = 0; i < m->option_count; i++) {
            struct lifecycle__str k, v;
            if (string(&r, "option key", LC_WIRE_MAX_MESSAGE, &k)) return -1;
            if (string(&r, "option value", LC_WIRE_MAX_MESSAGE, &v)) return -1;
        }
        break;
    }
    case LC_T_TASK_REPLY:
        if (u32(&r, "task", &m->task)) return -1;
        if (i64(&r, "budget end", &m->budget_end)) return -1;
        break;
    case LC_T_TASKS_EXPIRING: {
        if (m->id != 0) return fail(&r, "backgroundTasksExpiring: id must be 0, got %u", (unsigned)m->id);
        if (u16(&r, "task count", &m->task_count)) return -1;
        m->tasks = bytes + r.offset;
        for (unsigned i = 0; i < m->task_count; i++) {
            uint32_t t;
            if (u32(&r, "task", &t)) return -1;
        }
        break;
    }
    case LC_T_RESUMED:
        /* No payload, and like backgroundTasksExpiring one way to write it: id 0. */
        if (m->id != 0) return fail(&r, "resumed: id must be 0, got %u", (unsigned)m->id);
        break;
    case LC_T_RESTORATION:
        if (m->id != 0) return fail(&r, "restoration: id must be 0, got %u", (unsigned)m->id);
        if (blob(&r, "restoration data", LC_WIRE_MAX_RESTORATION, &m->data, &m->data_size)) return -1;
        break;
    default:
        return fail(&r, "message type 0x%x is sent by apps, not the daemon", (unsigned)m->type);
    }
    return end(&r);
}

int lifecycle__decode_app(const uint8_t *bytes, size_t size, struct lifecycle__message *m, char *error) {
    struct reader r = {bytes, size, 0, error};
    clear(m);
    error[0] = 0;
    if (header(&r, m)) return -1;
    switch (m->type) {
    case LC_T_ACKNOWLEDGE:
    case LC_T_END_TASK:
        break;
    case LC_T_BEGIN_TASK:
        if (string(&r, "task name", LC_WIRE_MAX_TASK_NAME, &m->name)) return -1;
        break;
    case LC_T_RESUME:
        if (string(&r, "app name", LC_WIRE_MAX_APP_NAME, &m->name)) return -1;
        if (u16(&r, "task count", &m->task_count)) return -1;
        if (m->task_count > LC_WIRE_MAX_RESUME_TASKS)
            return fail(&r, "resume: %u tasks, more than %d", (unsigned)m->task_count, LC_WIRE_MAX_RESUME_TASKS);
        m->tasks = bytes + r.offset;
        for (unsigned i = 0; i < m->task_count; i++) {
            uint32_t t;
            if (u32(&r, "task", &t)) return -1;
        }
        break;
    case LC_T_COMPLETE:
        if (u8(&r, "result", &m->result)) return -1;
        if (m->result > 2) return fail(&r, "unknown fetch result %u", (unsigned)m->result);
        break;
    case LC_T_SAVE_RESTORATION:
        if (m->id != 0) return fail(&r, "saveRestoration: id must be 0, got %u", (unsigned)m->id);
        if (blob(&r, "restoration data", LC_WIRE_MAX_RESTORATION, &m->data, &m->data_size)) return -1;
        break;
    case LC_T_PREWARMED:
        if (m->id != 0) return fail(&r, "prewarmed: id must be 0, got %u", (unsigned)m->id);
        break;
    default:
        return fail(&r, "message type 0x%x is sent by the daemon, not apps", (unsigned)m->type);
    }
    return end(&r);
}

void lifecycle__next_option(const uint8_t **cursor, struct lifecycle__str *key, struct lifecycle__str *value) {
    const uint8_t *p = *cursor;
    key->length = le16(p);
    key->bytes = p + 2;
    p += 2 + key->length;
    value->length = le16(p);
    value->bytes = p + 2;
    *cursor = p + 2 + value->length;
}

uint32_t lifecycle__expiring_task(const struct lifecycle__message *m, uint16_t i) { return le32(m->tasks + 4u * i); }

/* MARK: - UTF-8 */

int lifecycle__valid_utf8(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t len;
        uint32_t min, cp;
        if (c >= 0xC2 && c <= 0xDF) { len = 2; min = 0x80; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { len = 3; min = 0x800; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { len = 4; min = 0x10000; cp = c & 0x07; }
        else return 0; /* continuation byte, C0/C1 (overlong) or F5..FF */
        if (n - i < len) return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += len;
    }
    return 1;
}

/* MARK: - Writing */

static size_t put_header(uint8_t *out, uint8_t type, uint32_t id) {
    out[0] = LC_WIRE_VERSION;
    out[1] = type;
    out[2] = 0;
    out[3] = 0;
    out[4] = (uint8_t)id;
    out[5] = (uint8_t)(id >> 8);
    out[6] = (uint8_t)(id >> 16);
    out[7] = (uint8_t)(id >> 24);
    return LC_WIRE_HEADER;
}

static size_t put16(uint8_t *out, uint16_t v) {
    out[0] = (uint8_t)v;
    out[1] = (uint8_t)(v >> 8);
    return 2;
}

static size_t put32(uint8_t *out, uint32_t v) {
    for (int i = 0; i < 4; i++) out[i] = (uint8_t)(v >> (8 * i));
    return 4;
}

static size_t put64(uint8_t *out, int64_t v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    for (int i = 0; i < 8; i++) out[i] = (uint8_t)(u >> (8 * i));
    return 8;
}

size_t lifecycle__encode_acknowledge(uint8_t *out, uint32_t sequence) {
    return put_header(out, LC_T_ACKNOWLEDGE, sequence);
}

/* A name cut to `max` bytes on a character (Unicode scalar) boundary: never
 * in the middle of a UTF-8 sequence. (Swift drops whole grapheme clusters,
 * which differs only for names over the limit that end in combining marks.) */
static size_t put_name(uint8_t *out, const char *name, size_t length, size_t max) {
    if (length > max) {
        length = max;
        while (length > 0 && ((uint8_t)name[length] & 0xC0) == 0x80) length--;
    }
    size_t n = put16(out, (uint16_t)length);
    memcpy(out + n, name, length);
    return n + length;
}

size_t lifecycle__encode_begin_task(uint8_t *out, uint32_t request, const char *name, size_t length) {
    size_t n = put_header(out, LC_T_BEGIN_TASK, request);
    return n + put_name(out + n, name, length, LC_WIRE_MAX_TASK_NAME);
}

size_t lifecycle__encode_end_task(uint8_t *out, uint32_t task) { return put_header(out, LC_T_END_TASK, task); }

size_t lifecycle__encode_prewarmed(uint8_t *out) { return put_header(out, LC_T_PREWARMED, 0); }

size_t lifecycle__encode_resume(uint8_t *out, uint32_t last_acknowledged, const char *name, size_t length,
                                const uint32_t *tasks, uint16_t count) {
    if (count > LC_WIRE_MAX_RESUME_TASKS) return 0;
    size_t n = put_header(out, LC_T_RESUME, last_acknowledged);
    n += put_name(out + n, name, length, LC_WIRE_MAX_APP_NAME);
    n += put16(out + n, count);
    for (unsigned i = 0; i < count; i++) n += put32(out + n, tasks[i]);
    return n;
}

size_t lifecycle__encode_complete(uint8_t *out, uint32_t sequence, uint8_t result) {
    size_t n = put_header(out, LC_T_COMPLETE, sequence);
    out[n++] = result;
    return n;
}

/* Header, u32 length, then the bytes (unless `data` is NULL). */
static size_t put_blob_message(uint8_t *out, uint8_t type, const uint8_t *data, size_t size) {
    if (size > LC_WIRE_MAX_RESTORATION) return 0;
    size_t n = put_header(out, type, 0);
    n += put32(out + n, (uint32_t)size);
    if (data && size) memcpy(out + n, data, size);
    return n + size;
}

size_t lifecycle__encode_save_restoration(uint8_t *out, const uint8_t *data, size_t size) {
    return put_blob_message(out, LC_T_SAVE_RESTORATION, data, size);
}

size_t lifecycle__encode_event(uint8_t *out, uint32_t sequence, uint8_t event, int background, int64_t deadline,
                               int64_t budget_end, const char *const *options, uint16_t option_count) {
    size_t n = put_header(out, LC_T_EVENT, sequence);
    out[n++] = event;
    out[n++] = background ? 1 : 0;
    n += put16(out + n, option_count);
    n += put64(out + n, deadline);
    n += put64(out + n, budget_end);
    for (unsigned i = 0; i < 2u * option_count; i++) {
        size_t len = strlen(options[i]);
        if (len > 0xFFFF || n + 2 + len > LC_WIRE_MAX_MESSAGE) return 0;
        n += put16(out + n, (uint16_t)len);
        memcpy(out + n, options[i], len);
        n += len;
    }
    return n;
}

size_t lifecycle__encode_task_reply(uint8_t *out, uint32_t request, uint32_t task, int64_t budget_end) {
    size_t n = put_header(out, LC_T_TASK_REPLY, request);
    n += put32(out + n, task);
    return n + put64(out + n, budget_end);
}

size_t lifecycle__encode_expiring(uint8_t *out, const uint32_t *tasks, uint16_t count) {
    size_t n = put_header(out, LC_T_TASKS_EXPIRING, 0);
    if (LC_WIRE_HEADER + 2 + 4u * count > LC_WIRE_MAX_MESSAGE) return 0;
    n += put16(out + n, count);
    for (unsigned i = 0; i < count; i++) n += put32(out + n, tasks[i]);
    return n;
}

size_t lifecycle__encode_resumed(uint8_t *out) { return put_header(out, LC_T_RESUMED, 0); }

size_t lifecycle__encode_restoration(uint8_t *out, const uint8_t *data, size_t size) {
    return put_blob_message(out, LC_T_RESTORATION, data, size);
}
