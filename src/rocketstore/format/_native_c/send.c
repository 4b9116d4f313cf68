/*
 * rocketstore.format._native, the broker's single sends: send_frame and send_answer.
 * (native.h describes the module; the Python twins are
 * rocketstore.broker.processors.send_fast.send_frame_python and send_answer_python.)
 *
 * The common SEND_MESSAGE(_V2) frame of a Java producer, from its bytes to what the store
 * puts, and the answer's frame from the put's result; anything else is None, and the
 * broker's Python path (the definition) takes the frame. Only an ASCII header of the
 * shape RocketMQ's RemotingSerializable writes is read here: integers for the numbers,
 * strings for the rest, V2's one-letter extFields.
 */
#include "native.h"

enum { MAX_PROPS = 32, MAX_TEXT = 65536 };

/* (The JSON reader below, Json in native.h, is pull.c's too.) */
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

typedef struct {
    const char *key, *value;
    Py_ssize_t key_len, value_len;
    int32_t bucket;
} Prop;

static int prop_find(Prop *props, int n, const char *key, Py_ssize_t len) {
    for (int k = 0; k < n; k++)
        if (props[k].key_len == len && memcmp(props[k].key, key, (size_t)len) == 0) return k;
    return -1;
}

static int is_key(const Prop *p, const char *name) {
    size_t len = strlen(name);
    return (size_t)p->key_len == len && memcmp(p->key, name, len) == 0;
}

/* The names whose messages the Python path handles otherwise (a transaction, a delay or
 * timer, a multi-dispatch wrap): such a send is left to it. */
static const char *const SPECIAL[] = {
    "TRAN_MSG",       "DELAY",        "TIMER_DELIVER_MS",     "TIMER_DELAY_MS",
    "TIMER_DELAY_SEC", "TIMER_OUT_MS", "INNER_MULTI_DISPATCH",
};

/*
 * The stored properties of a plain send (send.stored_properties): the request's
 * (decode_properties_str's rules: a later repeated name wins in the first one's place),
 * CLUSTER put last, WAIT removed, in the iteration order of a HashMap sized by the peak.
 * A new dict, or NULL with no error set when the send is not the common case.
 */
static PyObject *stored_properties(const char *text, Py_ssize_t length, PyObject *cluster,
                                   PyObject **uniq_key) {
    Prop props[MAX_PROPS + 1];
    int n = 0;
    Py_ssize_t index = 0;
    while (index < length) {
        const char *found = memchr(text + index, 0x02, (size_t)(length - index));
        Py_ssize_t end = found ? found - text : length;
        if (end - index >= 3) {
            const char *sep_at = memchr(text + index, 0x01, (size_t)(length - index));
            Py_ssize_t sep = sep_at ? sep_at - text : -1;
            if (index < sep && sep < end - 1) {
                int at = prop_find(props, n, text + index, sep - index);
                if (at < 0) {
                    if (n >= MAX_PROPS) return NULL;
                    at = n++;
                    props[at].key = text + index;
                    props[at].key_len = sep - index;
                }
                props[at].value = text + sep + 1;
                props[at].value_len = end - sep - 1;
            }
        }
        index = end + 1;
    }
    for (int k = 0; k < n; k++)
        for (size_t s = 0; s < sizeof SPECIAL / sizeof SPECIAL[0]; s++)
            if (is_key(&props[k], SPECIAL[s])) return NULL;
    Py_ssize_t cluster_len;
    const char *cluster_text = PyUnicode_AsUTF8AndSize(cluster, &cluster_len);
    if (cluster_text == NULL) return NULL; /* (an error set: the caller returns it) */
    if (!all_ascii((const uint8_t *)cluster_text, cluster_len)) return NULL;
    int at = prop_find(props, n, "CLUSTER", 7);
    if (at < 0) {
        at = n++;
        props[at].key = "CLUSTER";
        props[at].key_len = 7;
    }
    props[at].value = cluster_text;
    props[at].value_len = cluster_len;
    int peak = n;
    int wait = prop_find(props, n, "WAIT", 4);
    if (wait >= 0) {
        memmove(props + wait, props + wait + 1, sizeof(Prop) * (size_t)(n - wait - 1));
        n--;
    }
    uint32_t capacity = 16; /* javahash.hashmap_capacity(peak) */
    while ((uint32_t)peak > capacity * 3 / 4) capacity <<= 1;
    for (int k = 0; k < n; k++) {
        uint32_t h = 0;
        for (Py_ssize_t c = 0; c < props[k].key_len; c++)
            h = 31 * h + (unsigned char)props[k].key[c];
        props[k].bucket = (int32_t)((h ^ (h >> 16)) & (capacity - 1));
    }
    /* A stable insertion sort by bucket: ties keep the order of their puts. */
    for (int k = 1; k < n; k++) {
        Prop moving = props[k];
        int m = k - 1;
        while (m >= 0 && props[m].bucket > moving.bucket) {
            props[m + 1] = props[m];
            m--;
        }
        props[m + 1] = moving;
    }
    PyObject *dict = PyDict_New();
    if (dict == NULL) return NULL;
    for (int k = 0; k < n; k++) {
        PyObject *key = PyUnicode_DecodeASCII(props[k].key, props[k].key_len, NULL);
        PyObject *value =
            key ? PyUnicode_DecodeASCII(props[k].value, props[k].value_len, NULL) : NULL;
        int failed = value == NULL || PyDict_SetItem(dict, key, value) < 0;
        if (!failed && is_key(&props[k], "UNIQ_KEY")) {
            Py_INCREF(value);
            *uniq_key = value;
        }
        Py_XDECREF(key);
        Py_XDECREF(value);
        if (failed) {
            Py_CLEAR(*uniq_key);
            Py_DECREF(dict);
            return NULL;
        }
    }
    return dict;
}

/*
 * send_frame(frame, cluster) -> (opaque, version, topic, queue_id, sys_flag,
 *     born_timestamp, flag, reconsume_times, properties, uniq_key, body) or None
 *
 * ``frame``: one whole frame without its length prefix. The fields of a SEND_MESSAGE or
 * SEND_MESSAGE_V2 request (code 10 or 310, neither a response nor one-way) whose header
 * is ASCII JSON of integers and strings with V2's extFields a..n only, all of a..h there
 * and plain numbers in range, k blank, true or false, and whose properties hold no name
 * that sends it elsewhere (TRAN_MSG, DELAY, the timer names, INNER_MULTI_DISPATCH).
 * ``properties`` is what the store puts (see stored_properties), ``uniq_key`` the
 * request's UNIQ_KEY or None. Everything else: None, for the Python path.
 */
PyObject *py_send_frame(PyObject *self, PyObject *args) {
    Py_buffer frame = {0};
    PyObject *cluster;
    if (!PyArg_ParseTuple(args, "y*U", &frame, &cluster)) return NULL;
    PyObject *result = NULL;
    char *strings = NULL;
    const char *data = (const char *)frame.buf;
    if (frame.len < 4) goto decline;
    uint32_t word = (uint32_t)get_i32((const uint8_t *)data);
    Py_ssize_t header_len = (Py_ssize_t)(word & 0xFFFFFF);
    if ((word >> 24) != 0 || 4 + header_len > frame.len) goto decline;
    /* Decoded strings are never longer than their JSON: one buffer holds them all. */
    strings = PyMem_Malloc((size_t)header_len + 1);
    if (strings == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Json j = {data + 4, data + 4 + header_len, strings, 0};
    char *next_text = strings;
    int64_t code = -1, opaque = 0, flag = 0, version = 0;
    const char *ext[14] = {0};
    Py_ssize_t ext_len[14] = {0};
    int seen = 0; /* top-level keys seen: code 1, extFields 2, flag 4, opaque 8, version 16 */
    skip_ws(&j);
    if (j.p >= j.end || *j.p++ != '{') goto decline;
    skip_ws(&j);
    if (j.p < j.end && *j.p == '}') goto decline; /* (no code) */
    for (;;) {
        skip_ws(&j);
        j.text = next_text;
        if (read_string(&j) < 0) goto decline;
        const char *key = j.text;
        Py_ssize_t key_len = j.text_len;
        next_text = j.text + j.text_len;
        skip_ws(&j);
        if (j.p >= j.end || *j.p++ != ':') goto decline;
        skip_ws(&j);
        int64_t *number = NULL;
        int bit = 0;
        j.text = next_text;
#define KEY_IS(name) (key_len == (Py_ssize_t)strlen(name) && memcmp(key, name, key_len) == 0)
        if (KEY_IS("code")) number = &code, bit = 1;
        else if (KEY_IS("flag")) number = &flag, bit = 4;
        else if (KEY_IS("opaque")) number = &opaque, bit = 8;
        else if (KEY_IS("version")) number = &version, bit = 16;
        else if (KEY_IS("extFields")) bit = 2;
        else if (skip_scalar(&j) < 0) goto decline; /* language, remark...: unused */
#undef KEY_IS
        if (bit & seen) goto decline; /* a repeated key: json.loads keeps the last */
        seen |= bit;
        if (number != NULL) {
            if (read_int(&j, number) < 0) goto decline;
        } else if (bit == 2) {
            if (j.p >= j.end || *j.p++ != '{') goto decline;
            skip_ws(&j);
            if (j.p < j.end && *j.p == '}') {
                j.p++;
            } else {
                for (;;) {
                    skip_ws(&j);
                    j.text = next_text;
                    if (read_string(&j) < 0 || j.text_len != 1) goto decline;
                    int letter = j.text[0] - 'a';
                    next_text = j.text + 1;
                    if (letter < 0 || letter >= 14 || ext[letter] != NULL) goto decline;
                    skip_ws(&j);
                    if (j.p >= j.end || *j.p++ != ':') goto decline;
                    skip_ws(&j);
                    j.text = next_text;
                    if (read_string(&j) < 0) goto decline;
                    ext[letter] = j.text;
                    ext_len[letter] = j.text_len;
                    next_text = j.text + j.text_len;
                    skip_ws(&j);
                    if (j.p < j.end && *j.p == ',') {
                        j.p++;
                        continue;
                    }
                    if (j.p < j.end && *j.p == '}') {
                        j.p++;
                        break;
                    }
                    goto decline;
                }
            }
        }
        skip_ws(&j);
        if (j.p < j.end && *j.p == ',') {
            j.p++;
            continue;
        }
        if (j.p < j.end && *j.p == '}') {
            j.p++;
            break;
        }
        goto decline;
    }
    skip_ws(&j);
    if (j.p != j.end) goto decline;
    if (!(seen & 2) || (code != 10 && code != 310) || flag != 0) goto decline;
    if (opaque < INT32_MIN || opaque > INT32_MAX || version < INT32_MIN || version > INT32_MAX)
        goto decline;
    for (int k = 0; k < 8; k++)
        if (ext[k] == NULL) goto decline;
    int64_t queue_nums, queue_id, sys_flag, born, msg_flag, reconsume = 0, max_times;
    if (text_int(ext[3], ext_len[3], INT32_MIN, INT32_MAX, &queue_nums) < 0 ||
        text_int(ext[4], ext_len[4], INT32_MIN, INT32_MAX, &queue_id) < 0 ||
        text_int(ext[5], ext_len[5], INT32_MIN, INT32_MAX, &sys_flag) < 0 ||
        text_int(ext[6], ext_len[6], INT64_MIN, INT64_MAX, &born) < 0 ||
        text_int(ext[7], ext_len[7], INT32_MIN, INT32_MAX, &msg_flag) < 0)
        goto decline;
    if (ext[9] != NULL && ext_len[9] > 0 &&
        text_int(ext[9], ext_len[9], INT32_MIN, INT32_MAX, &reconsume) < 0)
        goto decline;
    if (ext[11] != NULL && ext_len[11] > 0 &&
        text_int(ext[11], ext_len[11], INT32_MIN, INT32_MAX, &max_times) < 0)
        goto decline;
    if (ext[10] != NULL && ext_len[10] > 0 &&
        !(ext_len[10] == 4 && memcmp(ext[10], "true", 4) == 0) &&
        !(ext_len[10] == 5 && memcmp(ext[10], "false", 5) == 0))
        goto decline;
    PyObject *uniq_key = NULL;
    const char *props_text = ext[8] != NULL ? ext[8] : "";
    PyObject *properties = stored_properties(props_text, ext[8] != NULL ? ext_len[8] : 0,
                                             cluster, &uniq_key);
    if (properties == NULL) {
        if (PyErr_Occurred()) goto done;
        goto decline;
    }
    PyObject *topic = PyUnicode_DecodeASCII(ext[1], ext_len[1], NULL);
    PyObject *body = topic ? PyBytes_FromStringAndSize(data + 4 + header_len,
                                                       frame.len - 4 - header_len)
                           : NULL;
    if (body != NULL) {
        result = Py_BuildValue("(LLNLLLLLOOO)", (long long)opaque, (long long)version, topic,
                               (long long)queue_id, (long long)sys_flag, (long long)born,
                               (long long)msg_flag, (long long)reconsume, properties,
                               uniq_key ? uniq_key : Py_None, body);
        topic = NULL; /* (stolen by N) */
    }
    Py_XDECREF(topic);
    Py_XDECREF(body);
    Py_DECREF(properties);
    Py_XDECREF(uniq_key);
    goto done;
decline:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(strings);
    PyBuffer_Release(&frame);
    return result;
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

/*
 * send_answer(opaque, version, msg_id, queue_id, queue_offset, transaction_id) -> bytes
 * or None
 *
 * The whole frame (length prefix included) of a stored send's SUCCESS answer, as
 * encode_command writes put_response's command: msgId, queueId, queueOffset, MSG_REGION,
 * TRACE_ON and, when ``transaction_id`` is not None or empty, transactionId. None when a
 * text is not ASCII.
 */
PyObject *py_send_answer(PyObject *self, PyObject *args) {
    long long opaque, version, queue_id, queue_offset;
    PyObject *msg_id, *transaction_id;
    if (!PyArg_ParseTuple(args, "LLULLO", &opaque, &version, &msg_id, &queue_id,
                          &queue_offset, &transaction_id))
        return NULL;
    int with_transaction = transaction_id != Py_None;
    if (with_transaction) {
        if (!PyUnicode_Check(transaction_id)) {
            PyErr_SetString(PyExc_TypeError, "transaction_id must be a str or None");
            return NULL;
        }
        with_transaction = PyUnicode_GET_LENGTH(transaction_id) > 0;
    }
    char buffer[2048];
    char *out = buffer + 8;
    Py_ssize_t room = (Py_ssize_t)sizeof buffer - 8, n = 0;
    n += snprintf(out + n, (size_t)(room - n), "{\"code\":0,\"extFields\":{\"msgId\":");
    Py_ssize_t quoted = quote_ascii(msg_id, out + n, room - n);
    if (quoted < 0) Py_RETURN_NONE;
    n += quoted;
    n += snprintf(out + n, (size_t)(room - n),
                  ",\"queueId\":\"%lld\",\"queueOffset\":\"%lld\",\"MSG_REGION\":"
                  "\"DefaultRegion\",\"TRACE_ON\":\"true\"",
                  queue_id, queue_offset);
    if (n >= room) Py_RETURN_NONE;
    if (with_transaction) {
        n += snprintf(out + n, (size_t)(room - n), ",\"transactionId\":");
        if (n >= room) Py_RETURN_NONE;
        quoted = quote_ascii(transaction_id, out + n, room - n);
        if (quoted < 0) Py_RETURN_NONE;
        n += quoted;
    }
    n += snprintf(out + n, (size_t)(room - n),
                  "},\"flag\":1,\"language\":\"JAVA\",\"opaque\":%lld,"
                  "\"serializeTypeCurrentRPC\":\"JSON\",\"version\":%lld}",
                  opaque, version);
    if (n >= room) Py_RETURN_NONE;
    put_i32((uint8_t *)buffer, (int32_t)(4 + n));
    put_i32((uint8_t *)buffer + 4, (int32_t)n);
    return PyBytes_FromStringAndSize(buffer, 8 + n);
}
