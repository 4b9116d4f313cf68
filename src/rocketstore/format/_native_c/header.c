/*
 * rocketstore.format._native, the broker's request headers: the JSON reader that
 * send.c (single and batch sends) and pull.c read a request frame's header with, and the
 * JSON quoting of their answers' strings. (native.h describes the module; the Python
 * twin of every reader here is rocketstore.remoting.codec.decode_command.)
 *
 * Only an ASCII header of the shape RocketMQ's RemotingSerializable writes is read:
 * integers for the numbers, strings for the rest and for every extFields value. Anything
 * else is declined, and the broker's Python path (the definition) takes the frame.
 */
#include "native.h"

enum { MAX_TEXT = 65536 };

void skip_ws(Json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A JSON string at p (its opening quote) into j->text; 0 on success, -1 for anything this
 * reader leaves to Python (a non-ASCII character, an escape past U+007F, a raw control
 * character, which json.loads refuses too). */
int read_string(Json *j) {
    if (j->p >= j->end || *j->p != '"') return -1;
    j->p++;
    Py_ssize_t n = 0;
    while (j->p < j->end) {
        unsigned char c = (unsigned char)*j->p++;
        if (c == '"') {
            j->text_len = n;
            return 0;
        }
        if (c < 0x20 || c >= 0x80) return -1;
        if (c == '\\') {
            if (j->p >= j->end) return -1;
            char e = *j->p++;
            switch (e) {
                case '"': c = '"'; break;
                case '\\': c = '\\'; break;
                case '/': c = '/'; break;
                case 'b': c = '\b'; break;
                case 'f': c = '\f'; break;
                case 'n': c = '\n'; break;
                case 'r': c = '\r'; break;
                case 't': c = '\t'; break;
                case 'u': {
                    if (j->end - j->p < 4) return -1;
                    int v = 0;
                    for (int k = 0; k < 4; k++) {
                        int d = hex_digit(j->p[k]);
                        if (d < 0) return -1;
                        v = v * 16 + d;
                    }
                    if (v >= 0x80) return -1;
                    c = (unsigned char)v;
                    j->p += 4;
                    break;
                }
                default: return -1;
            }
        }
        if (n >= MAX_TEXT) return -1;
        j->text[n++] = (char)c;
    }
    return -1;
}

/* A JSON integer (no fraction, no exponent) within a Java long; 0 on success. */
int read_int(Json *j, int64_t *out) {
    const char *p = j->p;
    int negative = p < j->end && *p == '-';
    if (negative) p++;
    const char *digits = p;
    uint64_t v = 0;
    while (p < j->end && *p >= '0' && *p <= '9') {
        if (p - digits >= 19) return -1;
        v = v * 10 + (uint64_t)(*p - '0');
        p++;
    }
    if (p == digits || (*digits == '0' && p - digits > 1)) return -1;
    if (p < j->end && (*p == '.' || *p == 'e' || *p == 'E')) return -1;
    if (v > (uint64_t)INT64_MAX + (uint64_t)negative) return -1;
    *out = negative ? (int64_t)(0 - v) : (int64_t)v;
    j->p = p;
    return 0;
}

/* A scalar value skipped (a string, an integer, true, false, null); 0 on success. */
int skip_scalar(Json *j) {
    if (j->p >= j->end) return -1;
    char c = *j->p;
    if (c == '"') return read_string(j); /* (into the buffer's free end, kept nowhere) */
    if (c == '-' || (c >= '0' && c <= '9')) {
        int64_t ignored;
        return read_int(j, &ignored);
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        size_t len = strlen(words[k]);
        if ((size_t)(j->end - j->p) >= len && memcmp(j->p, words[k], len) == 0) {
            j->p += len;
            return 0;
        }
    }
    return -1;
}

/* An extFields value as a plain integer: what int() reads of "-?[0-9]+" (anything else is
 * the Python path's to read or refuse). */
int text_int(const char *s, Py_ssize_t n, int64_t lo, int64_t hi, int64_t *out) {
    Json j = {s, s + n, NULL, 0};
    if (n == 0 || read_int(&j, out) < 0 || j.p != j.end) return -1;
    return *out < lo || *out > hi ? -1 : 0;
}

/*
 * The header of ``frame`` (one whole frame without its length prefix): code, opaque, flag
 * and version into ``h``, each extFields entry handed to ``field`` (name, value; both
 * decoded into h->strings, which stay valid until the caller frees them). 1 when read:
 * an extFields object there, flag 0, opaque and version Java ints; 0 to decline (also when
 * ``field`` answers < 0); -1 with an error set. The caller frees h->strings in every case.
 */
int read_request_header(const char *data, Py_ssize_t len, RequestHeader *h, HeaderField field,
                        void *arg) {
    h->strings = NULL;
    h->code = -1, h->opaque = 0, h->flag = 0, h->version = 0;
    if (len < 4) return 0;
    uint32_t word = (uint32_t)get_i32((const uint8_t *)data);
    h->header_len = (Py_ssize_t)(word & 0xFFFFFF);
    if ((word >> 24) != 0 || 4 + h->header_len > len) return 0;
    /* Decoded strings are never longer than their JSON: one buffer holds them all. */
    h->strings = PyMem_Malloc((size_t)h->header_len + 1);
    if (h->strings == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Json j = {data + 4, data + 4 + h->header_len, h->strings, 0};
    char *next_text = h->strings;
    int seen = 0; /* top-level keys seen: code 1, extFields 2, flag 4, opaque 8, version 16 */
    int in_fields = 0;
    skip_ws(&j);
    if (j.p >= j.end || *j.p++ != '{') return 0;
    skip_ws(&j);
    if (j.p < j.end && *j.p == '}') return 0; /* (no code) */
    for (;;) {
        /* One key and its value, in the top-level object or (in_fields) in extFields. */
        skip_ws(&j);
        j.text = next_text;
        if (read_string(&j) < 0) return 0;
        const char *key = j.text;
        Py_ssize_t key_len = j.text_len;
        next_text = j.text + j.text_len;
        skip_ws(&j);
        if (j.p >= j.end || *j.p++ != ':') return 0;
        skip_ws(&j);
        j.text = next_text;
        if (in_fields) {
            if (read_string(&j) < 0) return 0;
            next_text = j.text + j.text_len;
            if (field(arg, key, key_len, j.text, j.text_len) < 0) return 0;
        } else {
            int64_t *number = NULL;
            int bit = 0;
#define KEY_IS(name) (key_len == (Py_ssize_t)strlen(name) && memcmp(key, name, key_len) == 0)
            if (KEY_IS("code")) number = &h->code, bit = 1;
            else if (KEY_IS("flag")) number = &h->flag, bit = 4;
            else if (KEY_IS("opaque")) number = &h->opaque, bit = 8;
            else if (KEY_IS("version")) number = &h->version, bit = 16;
            else if (KEY_IS("extFields")) bit = 2;
            else if (skip_scalar(&j) < 0) return 0; /* language, remark...: unused */
#undef KEY_IS
            if (bit & seen) return 0; /* a repeated key: json.loads keeps the last */
            seen |= bit;
            if (number != NULL) {
                if (read_int(&j, number) < 0) return 0;
            } else if (bit == 2) {
                if (j.p >= j.end || *j.p++ != '{') return 0;
                skip_ws(&j);
                if (j.p < j.end && *j.p == '}') {
                    j.p++;
                } else {
                    in_fields = 1;
                    continue;
                }
            }
        }
        /* Then a comma (another key) or the end of the object (extFields' or the top's). */
        skip_ws(&j);
        if (j.p < j.end && *j.p == ',') {
            j.p++;
            continue;
        }
        if (j.p < j.end && *j.p == '}') {
            j.p++;
            if (!in_fields) break;
            in_fields = 0;
            skip_ws(&j);
            if (j.p < j.end && *j.p == ',') {
                j.p++;
                continue;
            }
            if (j.p < j.end && *j.p == '}') {
                j.p++;
                break;
            }
        }
        return 0;
    }
    skip_ws(&j);
    if (j.p != j.end || !(seen & 2) || h->flag != 0) return 0;
    if (h->opaque < INT32_MIN || h->opaque > INT32_MAX || h->version < INT32_MIN ||
        h->version > INT32_MAX)
        return 0;
    return 1;
}

/* JSON text of an ASCII str as encode_basestring writes it (quotes included) appended at
 * out; -1 when it is not ASCII (the twin then words it). */
Py_ssize_t quote_ascii(PyObject *text, char *out, Py_ssize_t room) {
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(text, &len);
    if (s == NULL) {
        PyErr_Clear();
        return -1;
    }
    Py_ssize_t n = 0;
    if (n >= room) return -1;
    out[n++] = '"';
    for (Py_ssize_t k = 0; k < len; k++) {
        unsigned char c = (unsigned char)s[k];
        if (c >= 0x80 || room - n < 8) return -1;
        const char *escape = NULL;
        switch (c) {
            case '"': escape = "\\\""; break;
            case '\\': escape = "\\\\"; break;
            case '\n': escape = "\\n"; break;
            case '\r': escape = "\\r"; break;
            case '\t': escape = "\\t"; break;
            case '\b': escape = "\\b"; break;
            case '\f': escape = "\\f"; break;
        }
        if (escape != NULL) {
            out[n++] = escape[0];
            out[n++] = escape[1];
        } else if (c < 0x20) {
            n += sprintf(out + n, "\\u%04x", c);
        } else {
            out[n++] = (char)c;
        }
    }
    if (n >= room) return -1;
    out[n++] = '"';
    return n;
}

