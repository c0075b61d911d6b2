/*
 * Example Toolhost plugin in C: one tool, `c_echo`, that repeats a message.
 *
 * Built against bindings that `wit-bindgen c` generates from the
 * repository's wit/v0.1 at build time (see build.sh); there is no SDK. The
 * world's `plugin` export is implemented by the two functions at the end.
 *
 * Ownership, as wit-bindgen's C bindings define it: arguments of an exported
 * function belong to the callee (free them), and whatever it returns belongs
 * to the bindings, which free() it after the host has copied it, so returned
 * strings and lists must be heap-allocated. Arguments passed to an imported
 * function stay the caller's.
 */

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool_plugin.h"

#define SCHEMA "https://json-schema.org/draft/2020-12/schema"

static const char INPUT_SCHEMA[] =
    "{\"$schema\":\"" SCHEMA "\",\"type\":\"object\","
    "\"properties\":{\"message\":{\"type\":\"string\",\"description\":\"The message to repeat.\"}},"
    "\"required\":[\"message\"]}";

static const char OUTPUT_SCHEMA[] =
    "{\"$schema\":\"" SCHEMA "\",\"type\":\"object\","
    "\"properties\":{\"message\":{\"type\":\"string\"}},"
    "\"required\":[\"message\"]}";

/*
 * Dropping the registration would unregister the tool, so it is kept here
 * for as long as the activation instance lives.
 */
static toolhost_plugin_registry_own_registration_t registration;

/* A heap copy of a NUL-terminated string, for values the bindings free. */
static tool_plugin_string_t owned(const char *s) {
    tool_plugin_string_t out;
    tool_plugin_string_dup(&out, s);
    return out;
}

/* A heap copy of `len` bytes. */
static tool_plugin_string_t owned_n(const char *s, size_t len) {
    tool_plugin_string_t out;
    tool_plugin_string_dup_n(&out, s, len);
    return out;
}

/* --- a minimal JSON reader: just enough to find one string member ------- */

typedef struct {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int hex4(const char *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char h = p[i];
        v <<= 4;
        if (h >= '0' && h <= '9') v |= h - '0';
        else if (h >= 'a' && h <= 'f') v |= h - 'a' + 10;
        else if (h >= 'A' && h <= 'F') v |= h - 'A' + 10;
        else return -1;
    }
    return v;
}

static size_t put_utf8(char *out, unsigned cp) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xC0 | cp >> 6); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12); out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F)); return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18); out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F)); return 4;
}

/*
 * Reads a JSON string at the cursor. When `out` is not NULL, stores its
 * decoded UTF-8 there (malloc'd; *out_len bytes, NUL-terminated). Returns
 * false on malformed input. The host has already checked the input against
 * the schema, so this never sees arbitrary garbage, but it stays total.
 */
static bool read_string(cursor *c, char **out, size_t *out_len) {
    if (c->p >= c->end || *c->p != '"') return false;
    c->p++;
    /* Decoding never grows the text: an escape is at least as long as its UTF-8. */
    char *buf = out ? malloc((size_t)(c->end - c->p) + 1) : NULL;
    if (out && !buf) return false;
    size_t n = 0;
    while (c->p < c->end && *c->p != '"') {
        char ch = *c->p++;
        if (ch != '\\') {
            if (buf) buf[n++] = ch;
            continue;
        }
        if (c->p >= c->end) break;
        char e = *c->p++;
        unsigned cp;
        switch (e) {
        case '"': case '\\': case '/': cp = (unsigned char)e; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u': {
            int hi = c->end - c->p >= 4 ? hex4(c->p) : -1;
            if (hi < 0) goto bad;
            c->p += 4;
            cp = (unsigned)hi;
            /* A high surrogate followed by a low one is one code point. */
            if (hi >= 0xD800 && hi <= 0xDBFF && c->end - c->p >= 6 && c->p[0] == '\\' && c->p[1] == 'u') {
                int lo = hex4(c->p + 2);
                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + (((unsigned)hi - 0xD800) << 10) + ((unsigned)lo - 0xDC00);
                    c->p += 6;
                }
            }
            /* A lone surrogate has no UTF-8 form: U+FFFD, as serde_json's lossy readers do. */
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
            break;
        }
        default:
            goto bad;
        }
        if (buf) n += put_utf8(buf + n, cp);
    }
    if (c->p >= c->end) goto bad;
    c->p++; /* the closing quote */
    if (buf) {
        buf[n] = '\0';
        *out = buf;
        *out_len = n;
    }
    return true;
bad:
    free(buf);
    return false;
}

/* Skips any JSON value: strings, nested objects and arrays, and scalars. */
static bool skip_value(cursor *c) {
    skip_ws(c);
    if (c->p >= c->end) return false;
    if (*c->p == '"') return read_string(c, NULL, NULL);
    if (*c->p == '{' || *c->p == '[') {
        int depth = 0;
        while (c->p < c->end) {
            if (*c->p == '"') {
                if (!read_string(c, NULL, NULL)) return false;
                continue;
            }
            if (*c->p == '{' || *c->p == '[') depth++;
            else if (*c->p == '}' || *c->p == ']') depth--;
            c->p++;
            if (depth == 0) return true;
        }
        return false;
    }
    while (c->p < c->end && *c->p != ',' && *c->p != '}' && *c->p != ']') c->p++;
    return true;
}

/* Finds the string member `key` of the top-level object `json` and decodes it. */
static bool string_member(const tool_plugin_string_t *json, const char *key, char **value, size_t *len) {
    cursor c = {(const char *)json->ptr, (const char *)json->ptr + json->len};
    skip_ws(&c);
    if (c.p >= c.end || *c.p++ != '{') return false;
    for (;;) {
        skip_ws(&c);
        char *name;
        size_t name_len;
        if (!read_string(&c, &name, &name_len)) return false;
        bool match = name_len == strlen(key) && memcmp(name, key, name_len) == 0;
        free(name);
        skip_ws(&c);
        if (c.p >= c.end || *c.p++ != ':') return false;
        skip_ws(&c);
        if (match) return read_string(&c, value, len);
        if (!skip_value(&c)) return false;
        skip_ws(&c);
        if (c.p >= c.end || *c.p++ != ',') return false;
    }
}

/* Appends `s` to `out` as a JSON string literal; `out` has room for 6 bytes per input byte + 2. */
static size_t write_json_string(char *out, const char *s, size_t len) {
    size_t n = 0;
    out[n++] = '"';
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') { out[n++] = '\\'; out[n++] = (char)ch; }
        else if (ch == '\n') { out[n++] = '\\'; out[n++] = 'n'; }
        else if (ch == '\r') { out[n++] = '\\'; out[n++] = 'r'; }
        else if (ch == '\t') { out[n++] = '\\'; out[n++] = 't'; }
        else if (ch < 0x20) n += (size_t)snprintf(out + n, 7, "\\u%04x", ch);
        else out[n++] = (char)ch;
    }
    out[n++] = '"';
    return n;
}

/* --- the world's `plugin` export ---------------------------------------- */

/* Describes a registration-error variant for activate's `result<_, string>`. */
static const char *registration_error_kind(const toolhost_plugin_registry_registration_error_t *e) {
    switch (e->tag) {
    case TOOLHOST_PLUGIN_REGISTRY_REGISTRATION_ERROR_INVALID_NAME: return "invalid name";
    case TOOLHOST_PLUGIN_REGISTRY_REGISTRATION_ERROR_INVALID_SCHEMA: return "invalid schema";
    case TOOLHOST_PLUGIN_REGISTRY_REGISTRATION_ERROR_DUPLICATE_NAME: return "duplicate name";
    case TOOLHOST_PLUGIN_REGISTRY_REGISTRATION_ERROR_SCOPE_CLOSED: return "scope closed";
    default: return "not activating";
    }
}

bool exports_toolhost_plugin_plugin_activate(tool_plugin_string_t *config, tool_plugin_string_t *err) {
    tool_plugin_string_free(config);

    /* Arguments of an import stay ours: static strings need no copy. */
    toolhost_plugin_registry_tool_definition_t tool;
    tool_plugin_string_set(&tool.name, "c_echo");
    tool_plugin_string_set(&tool.description, "Repeat a message back unchanged.");
    tool_plugin_string_set(&tool.input_schema, INPUT_SCHEMA);
    tool.output_schema.is_some = true;
    tool_plugin_string_set(&tool.output_schema.val, OUTPUT_SCHEMA);
    toolhost_plugin_registry_list_tool_definition_t tools = {&tool, 1};

    toolhost_plugin_registry_registration_error_t error;
    if (toolhost_plugin_registry_register(&tools, &registration, &error)) return true;

    char message[512];
    const char *kind = registration_error_kind(&error);
    if (error.tag <= TOOLHOST_PLUGIN_REGISTRY_REGISTRATION_ERROR_DUPLICATE_NAME) {
        toolhost_plugin_registry_invalid_tool_t *t = &error.val.invalid_name;
        snprintf(message, sizeof message, "cannot register c_echo: %s: %.*s", kind, (int)t->message.len,
                 (const char *)t->message.ptr);
    } else {
        snprintf(message, sizeof message, "cannot register c_echo: %s", kind);
    }
    toolhost_plugin_registry_registration_error_free(&error);
    *err = owned(message);
    return false;
}

bool exports_toolhost_plugin_plugin_execute(tool_plugin_string_t *tool, tool_plugin_string_t *input,
                                            exports_toolhost_plugin_plugin_call_context_t *context,
                                            exports_toolhost_plugin_plugin_tool_response_t *ret,
                                            exports_toolhost_plugin_plugin_tool_failure_t *err) {
    /* Every call runs in a fresh instance: nothing from activate is here. */
    bool known = tool->len == strlen("c_echo") && memcmp(tool->ptr, "c_echo", tool->len) == 0;
    char *message = NULL;
    size_t len = 0;
    bool ok = known && string_member(input, "message", &message, &len);
    tool_plugin_string_free(tool);
    tool_plugin_string_free(input);
    exports_toolhost_plugin_plugin_call_context_free(context);

    if (!ok) {
        /* A `result` error: the tool-failure record, with no metadata. */
        *err = (exports_toolhost_plugin_plugin_tool_failure_t){
            .message = owned(known ? "the input has no string `message`"
                                   : "unknown tool; this plugin provides: c_echo"),
            .metadata = {.is_some = false},
        };
        return false;
    }

    /* output = {"message": <the same text>} */
    char *json = malloc(len * 6 + 16);
    size_t n = 0;
    memcpy(json, "{\"message\":", 11);
    n = 11;
    n += write_json_string(json + n, message, len);
    json[n++] = '}';

    /* content = [text(message)]: a one-element list of the variant. */
    toolhost_plugin_types_content_part_t *parts = malloc(sizeof *parts);
    parts->tag = TOOLHOST_PLUGIN_TYPES_CONTENT_PART_TEXT;
    parts->val.text = owned_n(message, len);

    *ret = (exports_toolhost_plugin_plugin_tool_response_t){
        .output = {.is_some = true, .val = owned_n(json, n)},
        .content = {.is_some = true, .val = {parts, 1}},
        .metadata = {.is_some = false},
    };
    free(json);
    free(message);
    return true;
}
