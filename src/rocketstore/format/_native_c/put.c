/*
 * rocketstore.format._native, the put path: encode_batch, encode_columns,
 * append_encoded, put_results, put_one.
 * (native.h describes the module; one extension, one translation unit per concern.)
 */
#include "native.h"

static inline int is_lazy_slot(PyObject *descr) {
    return descr != NULL &&
           (Py_IS_TYPE(descr, &LazyPropertiesType) || Py_IS_TYPE(descr, &LazyMsgIdType));
}

void resolve_layout(SlotLayout *layout, PyTypeObject *type, PyObject *const *names,
                           int n) {
    if (layout->type == type) return;
    int direct = n <= MAX_LAYOUT;
    for (int k = 0; direct && k < n; k++) {
        PyObject *descr = _PyType_Lookup(type, names[k]);
        if (is_lazy_slot(descr) && PyType_IsSubtype(type, ((LazySlotObject *)descr)->owner)) {
            layout->offsets[k] = ((LazySlotObject *)descr)->offset;
            continue;
        }
        if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
            direct = 0;
            break;
        }
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type != T_OBJECT_EX || (member->flags & READONLY)) direct = 0;
        layout->offsets[k] = member->offset;
    }
    Py_XSETREF(layout->type, (PyTypeObject *)Py_NewRef((PyObject *)type));
    layout->direct = direct;
}

/* Sets the fields of a new object; 0, or -1 with an error. */
int set_fields(const SlotLayout *layout, PyObject *obj, PyObject *const *names,
                      PyObject *const *values, int n) {
    for (int k = 0; k < n; k++) {
        if (layout->direct) {
            PyObject **slot = (PyObject **)((char *)obj + layout->offsets[k]);
            Py_XSETREF(*slot, Py_NewRef(values[k]));
        } else if (PyObject_GenericSetAttr(obj, names[k], values[k]) < 0) {
            return -1;
        }
    }
    return 0;
}

PyObject *s_topic, *s_body, *s_queue_id, *s_flag, *s_sys_flag, *s_properties,
    *s_born_timestamp, *s_born_host, *s_reconsume_times, *s_prepared_offset, *s_delay, *s_text;

/* An int field within [lo, hi]; 0 with *ok cleared (no Python error) when it is not. */
static int64_t bounded(PyObject *value, int64_t lo, int64_t hi, int *ok) {
    if (value == NULL || !PyLong_CheckExact(value)) {
        *ok = 0;
        return 0;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow != 0 || v < lo || v > hi) {
        if (v == -1 && PyErr_Occurred()) PyErr_Clear();
        *ok = 0;
        return 0;
    }
    return (int64_t)v;
}

/* ---- put: encode a batch of messages ------------------------------------------------ */

SlotLayout message_layout, result_layout, ext_layout;

typedef struct {
    int32_t length;
    int32_t sys_flag;
} RecordMeta;

/* Whether a property's name or value is one a record could not give back as put: empty,
 * or holding a separator (properties.property_problem words the refusal). */
static int odd_property_text(const char *text, Py_ssize_t length) {
    return length == 0 || memchr(text, '\x01', (size_t)length) != NULL ||
           memchr(text, '\x02', (size_t)length) != NULL;
}

/* Append the properties string (name \x01 value \x02 ..., no trailing \x02) of a dict of
 * str to str at *out. Returns its length, -1 for "not the common case" (a non-str, a
 * DELAY entry, too long, text that is not UTF-8 encodable, empty or holding a separator)
 * and -2 for an error. */
static Py_ssize_t encode_properties(PyObject *props, PyObject *out, Py_ssize_t at) {
    Py_ssize_t pos = 0, length = 0;
    PyObject *name, *value;
    while (PyDict_Next(props, &pos, &name, &value)) {
        if (!PyUnicode_CheckExact(name) || !PyUnicode_CheckExact(value)) return -1;
        if (PyUnicode_GET_LENGTH(name) == 5 && PyUnicode_Compare(name, s_delay) == 0) return -1;
        Py_ssize_t name_len, value_len;
        const char *name_utf8 = PyUnicode_AsUTF8AndSize(name, &name_len);
        if (name_utf8 == NULL) {
            PyErr_Clear();
            return -1;
        }
        const char *value_utf8 = PyUnicode_AsUTF8AndSize(value, &value_len);
        if (value_utf8 == NULL) {
            PyErr_Clear();
            return -1;
        }
        if (odd_property_text(name_utf8, name_len) || odd_property_text(value_utf8, value_len))
            return -1;
        Py_ssize_t need = name_len + value_len + 2;
        if (length + need - 1 > MAX_PROPERTIES) return -1;
        if (PyByteArray_GET_SIZE(out) < at + length + need &&
            PyByteArray_Resize(out, (at + length + need) * 2) < 0)
            return -2;
        char *p = PyByteArray_AS_STRING(out) + at + length;
        memcpy(p, name_utf8, (size_t)name_len);
        p[name_len] = '\x01';
        memcpy(p + name_len + 1, value_utf8, (size_t)value_len);
        p[name_len + 1 + value_len] = '\x02';
        length += need;
    }
    return length > 0 ? length - 1 : 0; /* drop the trailing separator */
}

/* format.properties.VerbatimProperties, registered by format.native at import (NULL until
 * then: such properties take the Python path). */
static PyObject *verbatim_type = NULL;

PyObject *py_set_verbatim_type(PyObject *self, PyObject *type) {
    if (!PyType_Check(type) || !PyType_IsSubtype((PyTypeObject *)type, &PyDict_Type)) {
        PyErr_SetString(PyExc_TypeError, "expected a dict subclass");
        return NULL;
    }
    Py_INCREF(type);
    Py_XSETREF(verbatim_type, type);
    Py_RETURN_NONE;
}

/* Append the ``text`` of a VerbatimProperties (a dict subclass: the decoded mapping, and
 * the string the record holds byte for byte, as a broker keeps a batch message's property
 * bytes). Same returns as encode_properties; a DELAY entry, a text that is not a str or
 * is too long goes to the Python path. */
static Py_ssize_t encode_verbatim(PyObject *props, PyObject *out, Py_ssize_t at) {
    if (PyDict_GetItemWithError(props, s_delay) != NULL) return -1;
    if (PyErr_Occurred()) return -2;
    PyObject *text = PyObject_GetAttr(props, s_text);
    if (text == NULL) {
        PyErr_Clear();
        return -1;
    }
    Py_ssize_t length = -1;
    if (PyUnicode_CheckExact(text)) {
        const char *utf8 = PyUnicode_AsUTF8AndSize(text, &length);
        if (utf8 == NULL) {
            PyErr_Clear();
            length = -1;
        } else if (length > MAX_PROPERTIES) {
            length = -1;
        } else if (PyByteArray_GET_SIZE(out) < at + length &&
                   PyByteArray_Resize(out, (at + length) * 2) < 0) {
            length = -2;
        } else {
            memcpy(PyByteArray_AS_STRING(out) + at, utf8, (size_t)length);
        }
    }
    Py_DECREF(text);
    return length;
}

/* A record's fields but the properties (already in place after the fixed part), with
 * QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP zero: append_encoded stamps those. */
typedef struct {
    int32_t total, queue_id, flag, sys_flag, reconsume;
    int64_t born, prepared;
    const uint8_t *body, *born_host, *store_host, *topic;
    Py_ssize_t body_len, born_len, store_len, topic_len, props_len;
} RecordFields;

/* Writes the fields of ``f`` before its properties, from ``p`` (spec 1.2's layout, as
 * record.encode_record writes it). */
static void write_fixed(uint8_t *p, const RecordFields *f) {
    put_i32(p, f->total);
    put_i32(p + 4, MAGIC_V1);
    put_i32(p + 8, (int32_t)masked_crc(f->body, (size_t)f->body_len));
    put_i32(p + 12, f->queue_id);
    put_i32(p + 16, f->flag);
    put_i64(p + 20, 0);
    put_i64(p + 28, 0);
    put_i32(p + 36, f->sys_flag);
    put_i64(p + 40, f->born);
    uint8_t *q = p + 48;
    memcpy(q, f->born_host, (size_t)f->born_len);
    q += f->born_len;
    put_i64(q, 0);
    q += 8;
    memcpy(q, f->store_host, (size_t)f->store_len);
    q += f->store_len;
    put_i32(q, f->reconsume);
    put_i64(q + 4, f->prepared);
    put_i32(q + 12, (int32_t)f->body_len);
    q += 16;
    memcpy(q, f->body, (size_t)f->body_len);
    q += f->body_len;
    *q++ = (uint8_t)f->topic_len;
    memcpy(q, f->topic, (size_t)f->topic_len);
    q += f->topic_len;
    q[0] = (uint8_t)(f->props_len >> 8);
    q[1] = (uint8_t)f->props_len;
}

/*
 * encode_batch(messages, message_type, topics, hosts, queue_keys, store_host, max_body,
 *              max_record, file_size, in_batch, now_ms)
 *   -> (blob: bytearray, meta: bytes, keys: list[str], body_bytes: int) or None
 *
 * Encodes each Message as MessagePreparer.prepare + PreparedMessage.encode do, with
 * QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP left zero. ``topics`` and ``hosts`` map
 * names already checked by Python to their encoded bytes; ``queue_keys`` caches the
 * "topic-queueId" strings by (topic, queue id). meta holds (length, sysflag) int32 pairs
 * in native order. None means some message needs Python's path (its checks decide).
 */
/* encode_batch's arguments after the messages, checked (the dicts are dicts, the host
 * bytes): put_one passes them straight through, without an argument tuple to parse. */
typedef struct {
    PyObject *message_type, *topics, *hosts, *queue_keys, *store_host;
    long long max_body, max_record, file_size, now_ms;
    int in_batch;
} EncodeArgs;

/* The queue table's "topic-queueId" key, made once per (topic, queue id object) and kept
 * in ``queue_keys``: a new reference, or NULL with an exception set. */
static PyObject *queue_table_key(PyObject *queue_keys, PyObject *topic, PyObject *queue_obj,
                                 int64_t queue_id) {
    PyObject *cache_key = PyTuple_Pack(2, topic, queue_obj);
    if (cache_key == NULL) return NULL;
    PyObject *key = PyDict_GetItemWithError(queue_keys, cache_key);
    if (key != NULL) {
        Py_INCREF(key);
    } else if (!PyErr_Occurred()) {
        key = PyUnicode_FromFormat("%U-%lld", topic, (long long)queue_id);
        if (key != NULL && PyDict_SetItem(queue_keys, cache_key, key) < 0) Py_CLEAR(key);
    }
    Py_DECREF(cache_key);
    return key;
}

static PyObject *encode_messages(PyObject *messages, const EncodeArgs *a);

PyObject *py_encode_batch(PyObject *self, PyObject *args) {
    PyObject *messages;
    EncodeArgs a;
    if (!PyArg_ParseTuple(args, "OOO!O!O!SLLLpL", &messages, &a.message_type, &PyDict_Type,
                          &a.topics, &PyDict_Type, &a.hosts, &PyDict_Type, &a.queue_keys,
                          &a.store_host, &a.max_body, &a.max_record, &a.file_size,
                          &a.in_batch, &a.now_ms))
        return NULL;
    return encode_messages(messages, &a);
}

static PyObject *encode_messages(PyObject *messages, const EncodeArgs *a) {
    PyObject *message_type = a->message_type, *topics = a->topics, *hosts = a->hosts;
    PyObject *queue_keys = a->queue_keys, *store_host = a->store_host;
    long long max_body = a->max_body, max_record = a->max_record, file_size = a->file_size;
    long long now_ms = a->now_ms;
    int in_batch = a->in_batch;
    Py_ssize_t store_len = PyBytes_GET_SIZE(store_host);
    if (store_len != 8 && store_len != 20) {
        PyErr_SetString(PyExc_ValueError, "store host must be 8 or 20 encoded bytes");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(messages, "messages must be a sequence");
    if (seq == NULL) return NULL;
    /* Queue keys the batch has used (before any goto: ``done`` releases the topics). */
    enum { SEEN_KEYS = 16 };
    PyObject *seen_topics[SEEN_KEYS], *seen_keys[SEEN_KEYS];
    int64_t seen_queues[SEEN_KEYS];
    int seen_count = 0;
    PyObject *memo[4] = {NULL, NULL, NULL, NULL}; /* topic, its bytes, born host, its bytes */
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *blob = PyByteArray_FromStringAndSize(NULL, 0);
    PyObject *meta = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(RecordMeta));
    PyObject *keys = PyList_New(count);
    PyObject *result = NULL;
    if (blob == NULL || meta == NULL || keys == NULL) goto done;
    if (!PyType_Check(message_type)) {
        PyErr_SetString(PyExc_TypeError, "message_type must be a type");
        goto done;
    }
    PyObject *message_names[10] = {s_topic,    s_body,         s_queue_id,       s_flag,
                                   s_sys_flag, s_properties,   s_born_timestamp, s_born_host,
                                   s_reconsume_times, s_prepared_offset};
    resolve_layout(&message_layout, (PyTypeObject *)message_type, message_names, 10);
    /* A Message without slots (or with an overridden field) takes the Python path. */
    if (!message_layout.direct) goto fallback;
    /* The blob sized once for the whole batch, from the bodies and a record's usual
     * overhead (it still grows if the properties are long). Grown by doubling from
     * empty, 100 B messages took 70 ns each instead of 65, and a single put's first
     * allocation was 4 KB instead of ~360 bytes. */
    {
        Py_ssize_t guess = 0;
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *msg = items[i];
            if ((PyObject *)Py_TYPE(msg) != message_type) break;
            PyObject *body = slot_get(&message_layout, msg, 1);
            guess += 256 + (body != NULL && PyBytes_CheckExact(body) ? PyBytes_GET_SIZE(body) : 0);
        }
        if (guess > 0 && PyByteArray_Resize(blob, guess) < 0) goto done;
    }
    RecordMeta *metas = (RecordMeta *)PyBytes_AS_STRING(meta);
    Py_ssize_t at = 0;
    long long body_total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *msg = items[i];
        if ((PyObject *)Py_TYPE(msg) != message_type) goto fallback;
        /* Borrowed references from the message's slots, which live while msg does. */
        PyObject *topic = slot_get(&message_layout, msg, 0);
        PyObject *body = slot_get(&message_layout, msg, 1);
        PyObject *queue_id_obj = slot_get(&message_layout, msg, 2);
        PyObject *flag_obj = slot_get(&message_layout, msg, 3);
        PyObject *sys_flag_obj = slot_get(&message_layout, msg, 4);
        PyObject *props = slot_get(&message_layout, msg, 5);
        PyObject *born_obj = slot_get(&message_layout, msg, 6);
        PyObject *born_host = slot_get(&message_layout, msg, 7);
        PyObject *reconsume_obj = slot_get(&message_layout, msg, 8);
        PyObject *prepared_obj = slot_get(&message_layout, msg, 9);
        if (topic == NULL || !PyUnicode_CheckExact(topic) || body == NULL ||
            !PyBytes_CheckExact(body) || props == NULL ||
            !(PyDict_CheckExact(props) || (PyObject *)Py_TYPE(props) == verbatim_type) ||
            born_host == NULL || !PyUnicode_CheckExact(born_host) || born_obj == NULL)
            goto fallback;
        int ok = 1;
        int64_t queue_id = bounded(queue_id_obj, 0, 0x7FFFFFFF, &ok);
        int64_t flag = bounded(flag_obj, INT32_MIN, INT32_MAX, &ok);
        int64_t sys_flag = bounded(sys_flag_obj, INT32_MIN, INT32_MAX, &ok);
        int64_t reconsume = bounded(reconsume_obj, INT32_MIN, INT32_MAX, &ok);
        int64_t prepared = bounded(prepared_obj, INT64_MIN, INT64_MAX, &ok);
        int64_t born = born_obj == Py_None ? now_ms : bounded(born_obj, INT64_MIN, INT64_MAX, &ok);
        if (!ok) goto fallback;
        if (in_batch && (sys_flag & TRANSACTION_MASK) != 0) goto fallback;
        /* Most messages of a batch share their topic and born host objects: looked up
         * once each (held, so that their addresses cannot be reused during the call). */
        PyObject *topic_bytes, *born_bytes;
        if (topic == memo[0] && born_host == memo[2]) {
            topic_bytes = memo[1];
            born_bytes = memo[3];
        } else {
            topic_bytes = PyDict_GetItemWithError(topics, topic);
            born_bytes = PyDict_GetItemWithError(hosts, born_host);
            if (PyErr_Occurred()) goto done;
            if (topic_bytes != NULL && born_bytes != NULL) {
                PyObject *fresh[4] = {topic, topic_bytes, born_host, born_bytes};
                for (int k = 0; k < 4; k++) Py_XSETREF(memo[k], Py_NewRef(fresh[k]));
            }
        }
        if (topic_bytes == NULL || born_bytes == NULL || !PyBytes_CheckExact(topic_bytes) ||
            !PyBytes_CheckExact(born_bytes))
            goto fallback;
        Py_ssize_t topic_len = PyBytes_GET_SIZE(topic_bytes);
        Py_ssize_t born_len = PyBytes_GET_SIZE(born_bytes);
        Py_ssize_t body_len = PyBytes_GET_SIZE(body);
        if (topic_len < 1 || topic_len > 127 || (born_len != 8 && born_len != 20) ||
            body_len > max_body)
            goto fallback;
        /* Fixed part first, then the properties written where they end up. */
        Py_ssize_t fixed = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born_len + 8 + store_len + 4 + 8 +
                           4 + body_len + 1 + topic_len + 2;
        if (PyByteArray_GET_SIZE(blob) < at + fixed &&
            PyByteArray_Resize(blob, (at + fixed) * 2 + 4096) < 0)
            goto done;
        /* A dict is serialised; a VerbatimProperties gives its text. */
        Py_ssize_t props_len = PyDict_CheckExact(props)
                                   ? encode_properties(props, blob, at + fixed)
                                   : encode_verbatim(props, blob, at + fixed);
        if (props_len == -2) goto done;
        if (props_len < 0) goto fallback;
        int64_t total = (int64_t)fixed + props_len;
        if (total > max_record || total + END_FILE_MIN_BLANK > file_size) goto fallback;
        sys_flag &= ~(int64_t)V6_FLAGS;
        if (born_len == 20) sys_flag |= BORN_V6;
        if (store_len == 20) sys_flag |= STORE_V6;
        RecordFields fields = {
            .total = (int32_t)total,
            .body = (const uint8_t *)PyBytes_AS_STRING(body),
            .body_len = body_len,
            .queue_id = (int32_t)queue_id,
            .flag = (int32_t)flag,
            .sys_flag = (int32_t)sys_flag,
            .born = born,
            .born_host = (const uint8_t *)PyBytes_AS_STRING(born_bytes),
            .born_len = born_len,
            .store_host = (const uint8_t *)PyBytes_AS_STRING(store_host),
            .store_len = store_len,
            .reconsume = (int32_t)reconsume,
            .prepared = prepared,
            .topic = (const uint8_t *)PyBytes_AS_STRING(topic_bytes),
            .topic_len = topic_len,
            .props_len = props_len,
        };
        write_fixed((uint8_t *)PyByteArray_AS_STRING(blob) + at, &fields);
        metas[i].length = (int32_t)total;
        body_total += body_len;
        metas[i].sys_flag = (int32_t)sys_flag;
        at += total;
        /* "topic-queueId": one the batch already used for this topic object and queue
         * (a batch mostly goes to a few queues, often in turn), else cached per (topic,
         * queue id object) in ``queue_keys``. */
        PyObject *seen = NULL;
        for (int k = 0; k < seen_count; k++) {
            if (seen_topics[k] == topic && seen_queues[k] == queue_id) {
                seen = seen_keys[k];
                break;
            }
        }
        if (seen != NULL) {
            PyList_SET_ITEM(keys, i, Py_NewRef(seen));
            continue;
        }
        PyObject *key = queue_table_key(queue_keys, topic, queue_id_obj, queue_id);
        if (key == NULL) goto done;
        PyList_SET_ITEM(keys, i, key);
        if (seen_count < SEEN_KEYS) { /* the key is ``keys``'s; the topic held, so that its
                                        * address cannot be reused during the call */
            seen_topics[seen_count] = Py_NewRef(topic);
            seen_queues[seen_count] = queue_id;
            seen_keys[seen_count++] = key;
        }
    }
    if (PyByteArray_Resize(blob, at) < 0) goto done;
    result = Py_BuildValue("OOOL", blob, meta, keys, body_total);
    goto done;
fallback:
    result = Py_NewRef(Py_None);
done:
    for (int k = 0; k < seen_count; k++) Py_DECREF(seen_topics[k]);
    for (int k = 0; k < 4; k++) Py_XDECREF(memo[k]);
    Py_DECREF(seq);
    Py_XDECREF(blob);
    Py_XDECREF(meta);
    Py_XDECREF(keys);
    return result;
}

/* ``key``'s queue offset for the next record (and one more for the one after): 0 on
 * success, -1 with an exception. */
int next_queue_offset(QueueCounter *c, PyObject *key, int64_t *offset) {
    for (int k = 0; k < c->count; k++) {
        if (c->keys[k] == key) {
            *offset = c->next[k]++;
            return 0;
        }
    }
    for (int k = 0; k < c->count; k++) {
        int same = PyObject_RichCompareBool(c->keys[k], key, Py_EQ);
        if (same < 0) return -1;
        if (same) {
            *offset = c->next[k]++;
            return 0;
        }
    }
    PyObject *known = c->pending == NULL ? NULL : PyDict_GetItemWithError(c->pending, key);
    if (known == NULL && !PyErr_Occurred()) known = PyDict_GetItemWithError(c->table, key);
    if (PyErr_Occurred()) return -1;
    int64_t value = 0;
    if (known != NULL) {
        value = PyLong_AsLongLong(known);
        if (value == -1 && PyErr_Occurred()) return -1;
    }
    *offset = value;
    if (c->count < LOCAL_KEYS) {
        c->keys[c->count] = key;
        c->next[c->count++] = value + 1;
        return 0;
    }
    if (c->pending == NULL && (c->pending = PyDict_New()) == NULL) return -1;
    PyObject *next = PyLong_FromLongLong(value + 1);
    if (next == NULL || PyDict_SetItem(c->pending, key, next) < 0) {
        Py_XDECREF(next);
        return -1;
    }
    Py_DECREF(next);
    return 0;
}

/* The counted offsets into ``table``: 0, or -1 with an exception. */
static int commit_queue_offsets(QueueCounter *c) {
    for (int k = 0; k < c->count; k++) {
        PyObject *next = PyLong_FromLongLong(c->next[k]);
        if (next == NULL || PyDict_SetItem(c->table, c->keys[k], next) < 0) {
            Py_XDECREF(next);
            return -1;
        }
        Py_DECREF(next);
    }
    return c->pending == NULL ? 0 : PyDict_Update(c->table, c->pending);
}

/*
 * encode_columns(topic, topic_bytes, bodies, queue_ids, names, columns, rows, born_host,
 *                store_host, born_ms, queue_keys, max_body, max_record, file_size,
 *                chunk_body, chunk_records, start, out, position, room, stamp
 *                [, flags, sys_flag, reconsume_times, texts])
 *   -> (length, meta, keys, body_bytes, end), None or False
 *
 * The rows of a put_columns call encoded as encode_batch encodes the Messages
 * put_columns.Columns.message makes of them (prepared offset 0), without those Messages.
 * ``bodies`` is a list of bytes; ``queue_ids`` an int (every row) or a list; ``names`` a
 * tuple of property names Python has checked (legal, not DELAY, no two alike) and
 * ``columns`` their values, each a str (every row) or a list of str or None (left out);
 * ``rows`` None or a list of each row's own properties (a dict or None), written first.
 * ``flags`` is an int (every row, 0 when left out) or a list; ``sys_flag`` and
 * ``reconsume_times`` every row's (0); ``texts`` None or, without names and rows, a list
 * of each row's properties string, stored as it is (a batch's VerbatimProperties: the
 * broker's SEND_BATCH_MESSAGE). One call encodes one batch, the rows from ``start`` to
 * ``end`` (exclusive), by put_columns.chunk_limits's rule: a batch ends before a row that
 * would take its bodies past ``chunk_body`` bytes or its records (with an END_OF_FILE
 * blank) past ``chunk_records``. None: some row of the batch is not the common case;
 * Python's path decides.
 *
 * Where the records go, ``length`` bytes of them:
 * - ``room`` < 0: into the bytearray ``out`` from its start. It grows when they need
 *   more and never shrinks, so a caller that passes the same one for every batch writes
 *   into memory already faulted in (a fresh blob per batch, a few MB that the allocator
 *   maps anew each time, took a page fault every 4 KB: 250-550 ns a 100-byte row
 *   against 80). ``position`` is unused and ``stamp`` None: append_encoded stamps the
 *   records and copies them in.
 * - ``room`` >= 0 (``rows`` None): appended in place, append_encoded's work included:
 *   into ``out``'s buffer (the CommitLog's mapped file, under the writer lock) from
 *   ``position``, stamped as they are written, with ``stamp`` = (table, physical_start,
 *   timestamp, offsets, queue_offsets, sizes, stamps, row) as append_encoded takes them
 *   (each record's values go into the four arrays from index ``row``). The TOTALSIZEs
 *   go in last, once the whole batch is there, so a reader sees none of it until then.
 *   False: the batch does not fit in ``room`` bytes with an END_OF_FILE blank's 8 to
 *   spare (the caller rolls to the next file and encodes it again). Whenever the answer
 *   is not a batch, ``table`` is as it was and the bytes written are zeros again.
 *   Encoding and appending bulk_put's 100-byte rows took 240 ns a row in place, 360
 *   through a reused blob, its copy and a second pass to stamp it, and 620 with a fresh
 *   blob per batch.
 */
#define MAX_COLUMNS 16
PyObject *py_encode_columns(PyObject *self, PyObject *args) {
    PyObject *topic, *topic_bytes, *bodies, *queue_ids, *names, *columns, *rows, *born_host,
        *store_host, *queue_keys, *blob, *stamp;
    PyObject *flags = NULL, *texts = Py_None;
    int given_sys_flag = 0, reconsume = 0;
    long long born, max_body, max_record, file_size, chunk_body, chunk_records;
    Py_ssize_t start, position, room;
    if (!PyArg_ParseTuple(args, "USO!OO!O!OSSLO!LLLLLnOnnO|OiiO", &topic, &topic_bytes,
                          &PyList_Type, &bodies, &queue_ids, &PyTuple_Type, &names,
                          &PyTuple_Type, &columns, &rows, &born_host, &store_host, &born,
                          &PyDict_Type, &queue_keys, &max_body, &max_record, &file_size,
                          &chunk_body, &chunk_records, &start, &blob, &position, &room, &stamp,
                          &flags, &given_sys_flag, &reconsume, &texts))
        return NULL;
    /* A batch's own fields: the flag column (an int for every row or a list), the sys
     * flag (a transactional one is Python's to refuse) and the reconsume times. */
    int scalar_flag = flags == NULL || PyLong_CheckExact(flags);
    int32_t scalar_flag_value = 0;
    if (flags != NULL && scalar_flag) {
        int ok = 1;
        scalar_flag_value = (int32_t)bounded(flags, INT32_MIN, INT32_MAX, &ok);
        if (!ok) Py_RETURN_NONE;
    }
    if ((given_sys_flag & TRANSACTION_MASK) != 0) Py_RETURN_NONE;
    /* In place (``room`` >= 0): records go into ``blob``'s buffer (a mapped file) from
     * ``position``, within ``room`` bytes, stamped. Else ``blob`` is a bytearray. */
    int in_place = room >= 0;
    Py_buffer view = {0}, outs[4] = {{0}};
    QueueCounter counter = {0};
    long long physical_start = 0, timestamp = 0;
    Py_ssize_t out_row = 0;
    int64_t *out_offsets = NULL, *out_queue = NULL, *out_stamps = NULL;
    int32_t *out_sizes = NULL;
    if (in_place) {
        PyObject *offsets_obj, *queue_obj, *sizes_obj, *stamps_obj;
        if (rows != Py_None || !PyTuple_Check(stamp)) {
            PyErr_SetString(PyExc_ValueError, "encode_columns: in place takes no rows, a stamp");
            return NULL;
        }
        if (!PyArg_ParseTuple(stamp, "O!LLOOOOn", &PyDict_Type, &counter.table, &physical_start,
                              &timestamp, &offsets_obj, &queue_obj, &sizes_obj, &stamps_obj,
                              &out_row))
            return NULL;
        if (get_buffers(5, blob, &view, PyBUF_WRITABLE, offsets_obj, &outs[0], PyBUF_WRITABLE,
                        queue_obj, &outs[1], PyBUF_WRITABLE, sizes_obj, &outs[2],
                        PyBUF_WRITABLE, stamps_obj, &outs[3], PyBUF_WRITABLE) < 0)
            return NULL;
        out_offsets = (int64_t *)outs[0].buf + out_row;
        out_queue = (int64_t *)outs[1].buf + out_row;
        out_sizes = (int32_t *)outs[2].buf + out_row;
        out_stamps = (int64_t *)outs[3].buf + out_row;
        /* Room for every row from ``start`` (a batch takes no more). */
        Py_ssize_t most = out_row + PyList_GET_SIZE(bodies) - start;
        if (position < 0 || room > view.len - position || out_row < 0 || outs[0].len < most * 8 ||
            outs[1].len < most * 8 || outs[2].len < most * 4 || outs[3].len < most * 8) {
            release_buffers(5, &view, &outs[0], &outs[1], &outs[2], &outs[3]);
            PyErr_SetString(PyExc_ValueError, "encode_columns: room or outs too small");
            return NULL;
        }
    } else if (!PyByteArray_CheckExact(blob)) {
        PyErr_SetString(PyExc_TypeError, "encode_columns: out must be a bytearray");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(bodies);
    Py_ssize_t ncol = PyTuple_GET_SIZE(names);
    Py_ssize_t topic_len = PyBytes_GET_SIZE(topic_bytes);
    Py_ssize_t born_len = PyBytes_GET_SIZE(born_host), store_len = PyBytes_GET_SIZE(store_host);
    int scalar_queue = PyLong_CheckExact(queue_ids);
    if (ncol != PyTuple_GET_SIZE(columns) || ncol > MAX_COLUMNS ||
        !(scalar_queue || (PyList_CheckExact(queue_ids) && PyList_GET_SIZE(queue_ids) == count)) ||
        !(rows == Py_None || (PyList_CheckExact(rows) && PyList_GET_SIZE(rows) == count)) ||
        topic_len < 1 || topic_len > 127 || (born_len != 8 && born_len != 20) ||
        (store_len != 8 && store_len != 20) || start < 0 || start >= count ||
        !(scalar_flag || (PyList_CheckExact(flags) && PyList_GET_SIZE(flags) == count)) ||
        !(texts == Py_None || (PyList_CheckExact(texts) && PyList_GET_SIZE(texts) == count &&
                               ncol == 0 && rows == Py_None))) {
        PyErr_SetString(PyExc_ValueError, "encode_columns: columns do not match the bodies");
        release_buffers(5, &view, &outs[0], &outs[1], &outs[2], &outs[3]);
        return NULL;
    }
    /* Each column's name as UTF-8, and its value when it is one str for every row. */
    const char *name_utf8[MAX_COLUMNS], *fixed_utf8[MAX_COLUMNS];
    Py_ssize_t name_len[MAX_COLUMNS], fixed_len[MAX_COLUMNS];
    for (Py_ssize_t k = 0; k < ncol; k++) {
        PyObject *name = PyTuple_GET_ITEM(names, k), *column = PyTuple_GET_ITEM(columns, k);
        if (!PyUnicode_CheckExact(name) ||
            !(PyUnicode_CheckExact(column) ||
              (PyList_CheckExact(column) && PyList_GET_SIZE(column) == count))) {
            PyErr_SetString(PyExc_ValueError, "encode_columns: a column is no str or list");
            release_buffers(5, &view, &outs[0], &outs[1], &outs[2], &outs[3]);
            return NULL;
        }
        name_utf8[k] = PyUnicode_AsUTF8AndSize(name, &name_len[k]);
        fixed_utf8[k] = NULL;
        if (name_utf8[k] != NULL && PyUnicode_CheckExact(column))
            fixed_utf8[k] = PyUnicode_AsUTF8AndSize(column, &fixed_len[k]);
        if (name_utf8[k] == NULL || (PyUnicode_CheckExact(column) && fixed_utf8[k] == NULL)) {
            PyErr_Clear();
            release_buffers(5, &view, &outs[0], &outs[1], &outs[2], &outs[3]);
            Py_RETURN_NONE;
        }
        if (fixed_utf8[k] != NULL && odd_property_text(fixed_utf8[k], fixed_len[k])) {
            release_buffers(5, &view, &outs[0], &outs[1], &outs[2], &outs[3]);
            Py_RETURN_NONE;
        }
    }
    int32_t sys_flag = (given_sys_flag & ~V6_FLAGS) | (born_len == 20 ? BORN_V6 : 0) |
                       (store_len == 20 ? STORE_V6 : 0);
    Py_ssize_t base = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born_len + 8 + store_len + 4 + 8 + 4 +
                      1 + topic_len + 2;
    enum { SEEN_QUEUES = 16 };
    int64_t seen_queues[SEEN_QUEUES];
    PyObject *seen_keys[SEEN_QUEUES]; /* borrowed from ``keys`` */
    int seen_count = 0;
    PyObject *meta = NULL, *keys = NULL, *result = NULL;
    /* The batch's size guessed from its bodies (up to the body limit) and a record's
     * usual overhead; the blob still grows for long properties. The rows the guess
     * counts (up to the first past the body limit) are as many as the batch can take. */
    Py_ssize_t guess = 0, guessed_bodies = 0, stop = start;
    for (; stop < count && guessed_bodies <= chunk_body; stop++) {
        PyObject *body = PyList_GET_ITEM(bodies, stop);
        if (!PyBytes_CheckExact(body)) break; /* (the loop below hands it to Python) */
        guess += base + 64 + PyBytes_GET_SIZE(body);
        guessed_bodies += PyBytes_GET_SIZE(body);
    }
    if (stop < count) stop++; /* the row that ended the guess, or one it could not take */
    if (!in_place && PyByteArray_GET_SIZE(blob) < guess && PyByteArray_Resize(blob, guess) < 0)
        return NULL;
    /* Where records go: refreshed after the bytearray grows. */
    uint8_t *dest = in_place ? (uint8_t *)view.buf + position : NULL;
    Py_ssize_t at = 0, end = count;
#define DEST() (in_place ? dest : (uint8_t *)PyByteArray_AS_STRING(blob))
    meta = PyBytes_FromStringAndSize(NULL, (stop - start) * (Py_ssize_t)sizeof(RecordMeta));
    keys = PyList_New(stop - start);
    if (meta == NULL || keys == NULL) goto done;
    RecordMeta *metas = (RecordMeta *)PyBytes_AS_STRING(meta);
    long long run_bodies = 0, run_records = 0;
    for (Py_ssize_t i = start; i < count; i++) {
        if (i == stop) { /* (cannot be: the guess counted every row the batch can take) */
            end = i;
            break;
        }
        PyObject *body = PyList_GET_ITEM(bodies, i);
        if (!PyBytes_CheckExact(body)) goto fallback; /* bytearray, memoryview, wrong */
        Py_ssize_t body_len = PyBytes_GET_SIZE(body);
        if (body_len > max_body) goto fallback;
        PyObject *queue_obj = scalar_queue ? queue_ids : PyList_GET_ITEM(queue_ids, i);
        int ok = 1;
        int64_t queue_id = bounded(queue_obj, 0, 0x7FFFFFFF, &ok);
        if (!ok) goto fallback;
        int32_t flag = scalar_flag_value;
        if (!scalar_flag) {
            int flag_ok = 1;
            flag = (int32_t)bounded(PyList_GET_ITEM(flags, i), INT32_MIN, INT32_MAX, &flag_ok);
            if (!flag_ok) goto fallback;
        }
        /* A row's stored properties string, written as it is (VerbatimProperties); one
         * with DELAY (a batch refuses a delayed message) or too long is Python's. */
        const char *verbatim = NULL;
        Py_ssize_t verbatim_len = 0;
        if (texts != Py_None) {
            PyObject *text = PyList_GET_ITEM(texts, i);
            if (!PyUnicode_CheckExact(text)) goto fallback;
            verbatim = PyUnicode_AsUTF8AndSize(text, &verbatim_len);
            if (verbatim == NULL) {
                PyErr_Clear();
                goto fallback;
            }
            if (verbatim_len > MAX_PROPERTIES || PyUnicode_GET_LENGTH(text) > MAX_PROPERTIES ||
                memmem(verbatim, (size_t)verbatim_len, "DELAY\x01", 6) != NULL)
                goto fallback;
        }
        Py_ssize_t fixed = base + body_len;
        Py_ssize_t props_at = at + fixed;
        if (!in_place && PyByteArray_GET_SIZE(blob) < props_at &&
            PyByteArray_Resize(blob, props_at * 2 + 4096) < 0)
            goto done;
        /* Bytes of properties written, each entry with its trailing 0x02. */
        Py_ssize_t written = 0;
        PyObject *row = rows == Py_None ? Py_None : PyList_GET_ITEM(rows, i);
        if (row != Py_None) {
            if (!PyDict_CheckExact(row)) goto fallback;
            /* A name the row has and a column sets keeps the row's place: Python's path. */
            for (Py_ssize_t k = 0; k < ncol; k++) {
                PyObject *column = PyTuple_GET_ITEM(columns, k);
                if (fixed_utf8[k] == NULL && PyList_GET_ITEM(column, i) == Py_None) continue;
                if (PyDict_GetItemWithError(row, PyTuple_GET_ITEM(names, k)) != NULL)
                    goto fallback;
                if (PyErr_Occurred()) goto done;
            }
            Py_ssize_t length = encode_properties(row, blob, props_at);
            if (length == -2) goto done;
            if (length < 0) goto fallback;
            written = length > 0 ? length + 1 : 0; /* its last 0x02 is in the blob */
        }
        /* The columns' values, checked and measured before any is written: in place,
         * nothing goes past a record known to be in the batch and to fit. */
        const char *value_of[MAX_COLUMNS];
        Py_ssize_t value_len_of[MAX_COLUMNS];
        Py_ssize_t all = written;
        for (Py_ssize_t k = 0; k < ncol; k++) {
            const char *value = fixed_utf8[k];
            Py_ssize_t value_len = fixed_len[k];
            if (value == NULL) {
                PyObject *item = PyList_GET_ITEM(PyTuple_GET_ITEM(columns, k), i);
                value_of[k] = NULL;
                if (item == Py_None) continue;
                if (!PyUnicode_CheckExact(item)) goto fallback;
                value = PyUnicode_AsUTF8AndSize(item, &value_len);
                if (value == NULL) {
                    PyErr_Clear();
                    goto fallback;
                }
                if (odd_property_text(value, value_len)) goto fallback;
            }
            value_of[k] = value;
            value_len_of[k] = value_len;
            all += name_len[k] + value_len + 2;
            if (all - 1 > MAX_PROPERTIES) goto fallback;
        }
        Py_ssize_t props_len = verbatim != NULL ? verbatim_len : all > 0 ? all - 1 : 0;
        int64_t total = (int64_t)fixed + props_len;
        if (total > max_record || total + END_FILE_MIN_BLANK > file_size) goto fallback;
        if (i > start && (run_bodies + body_len > chunk_body ||
                          run_records + total + END_FILE_MIN_BLANK > chunk_records)) {
            end = i;
            break;
        }
        if (in_place && at + total + END_FILE_MIN_BLANK > room) goto no_room;
        /* (+1: the last entry's 0x02, written and then cleared) */
        if (!in_place && PyByteArray_GET_SIZE(blob) < props_at + all + verbatim_len + 1 &&
            PyByteArray_Resize(blob, (props_at + all + verbatim_len + 1) * 2) < 0)
            goto done;
        if (verbatim != NULL) memcpy(DEST() + props_at, verbatim, (size_t)verbatim_len);
        char *p = (char *)DEST() + props_at + written;
        for (Py_ssize_t k = 0; k < ncol; k++) {
            if (value_of[k] == NULL) continue;
            memcpy(p, name_utf8[k], (size_t)name_len[k]);
            p[name_len[k]] = '\x01';
            memcpy(p + name_len[k] + 1, value_of[k], (size_t)value_len_of[k]);
            p += name_len[k] + 1 + value_len_of[k];
            *p++ = '\x02';
        }
        if (all > 0) DEST()[at + total] = 0; /* the last 0x02 is no part of the record */
        run_bodies += body_len;
        run_records += total;
        RecordFields fields = {
            .total = (int32_t)total,
            .body = (const uint8_t *)PyBytes_AS_STRING(body),
            .body_len = body_len,
            .queue_id = (int32_t)queue_id,
            .flag = flag,
            .sys_flag = sys_flag,
            .reconsume = reconsume,
            .born = born,
            .born_host = (const uint8_t *)PyBytes_AS_STRING(born_host),
            .born_len = born_len,
            .store_host = (const uint8_t *)PyBytes_AS_STRING(store_host),
            .store_len = store_len,
            .topic = (const uint8_t *)PyBytes_AS_STRING(topic_bytes),
            .topic_len = topic_len,
            .props_len = props_len,
        };
        Py_ssize_t record_at = at;
        write_fixed(DEST() + at, &fields);
        if (in_place) put_i32(DEST() + at, 0); /* sizes go in last */
        metas[i - start].length = (int32_t)total;
        metas[i - start].sys_flag = sys_flag;
        at += total;
        /* "topic-queueId": from the last few queue ids of this call, else cached per
         * (topic, queue id) in ``queue_keys``, as encode_batch caches it. */
        PyObject *key = NULL;
        for (int k = 0; k < seen_count; k++) {
            if (seen_queues[k] == queue_id) {
                key = seen_keys[k];
                break;
            }
        }
        if (key != NULL) {
            PyList_SET_ITEM(keys, i - start, Py_NewRef(key));
            goto stamp;
        }
        key = queue_table_key(queue_keys, topic, queue_obj, queue_id);
        if (key == NULL) goto done;
        PyList_SET_ITEM(keys, i - start, key);
        if (seen_count < SEEN_QUEUES) {
            seen_queues[seen_count] = queue_id;
            seen_keys[seen_count++] = key;
        } else { /* more queues than the list holds: the newest replaces the oldest */
            memmove(seen_queues, seen_queues + 1, (SEEN_QUEUES - 1) * sizeof(int64_t));
            memmove(seen_keys, seen_keys + 1, (SEEN_QUEUES - 1) * sizeof(PyObject *));
            seen_queues[SEEN_QUEUES - 1] = queue_id;
            seen_keys[SEEN_QUEUES - 1] = key;
        }
    stamp:
        if (in_place) { /* append_encoded's stamps (a NOT record: it gets a queue entry) */
            int64_t queue_offset;
            if (next_queue_offset(&counter, key, &queue_offset) < 0) goto done;
            uint8_t *record = dest + record_at;
            put_i64(record + 20, queue_offset);
            put_i64(record + 28, physical_start + record_at);
            put_i64(record + ((sys_flag & BORN_V6) ? 68 : 56), timestamp);
            out_offsets[i - start] = physical_start + record_at;
            out_queue[i - start] = queue_offset;
            out_sizes[i - start] = (int32_t)total;
            out_stamps[i - start] = timestamp;
        }
    }
    if (in_place) { /* the queues move on, then the sizes: each record whole once set */
        if (commit_queue_offsets(&counter) < 0) goto done;
        Py_ssize_t record_at = 0;
        for (Py_ssize_t i = start; i < end; i++) {
            put_i32(dest + record_at, metas[i - start].length);
            record_at += metas[i - start].length;
        }
    }
    if (end < stop) { /* the batch ended early: meta and keys cut to its rows */
        PyObject *cut = PyList_GetSlice(keys, 0, end - start);
        if (cut == NULL) goto done;
        Py_SETREF(keys, cut);
        if (_PyBytes_Resize(&meta, (end - start) * (Py_ssize_t)sizeof(RecordMeta)) < 0)
            goto done;
    }
    result = Py_BuildValue("nOOLn", at, meta, keys, run_bodies, end);
    goto done;
no_room:
    result = Py_NewRef(Py_False);
    goto done;
fallback:
    result = Py_NewRef(Py_None);
done:
    /* In place, a batch not taken leaves nothing: the room is zeros again. */
    if (in_place && (result == NULL || !PyTuple_Check(result))) memset(dest, 0, (size_t)at);
#undef DEST
    Py_XDECREF(counter.pending);
    if (in_place) release_buffers(5, &view, &outs[0], &outs[1], &outs[2], &outs[3]);
    Py_XDECREF(meta);
    Py_XDECREF(keys);
    return result;
}

/*
 * append_encoded(dest, position, blob, meta, keys, table, physical_start, timestamp)
 *   -> queue offsets (bytes of int64, native order)
 *
 * CommitLog.append's work under the writer lock for an encoded batch: give each record its
 * queue offset (NOT and COMMIT records only; "topic-queueId" counters in ``table``, which
 * is updated), its PHYSICALOFFSET and the STORETIMESTAMP, then copy the batch into
 * ``dest`` at ``position`` with every TOTALSIZE written after all other bytes (see
 * CommitLog._write_sizes_last for why). With ``dest`` None the records are only stamped,
 * in ``blob``, for a writer that copies them itself (CommitLog's write-through).
 *
 * With ``outs`` (put_columns' result columns: int64 offsets, int64 queue offsets, int32
 * sizes, int64 store timestamps, each a writable buffer for every row of the call) and
 * ``row`` (the batch's first row), each record's values go in there from ``row`` on and
 * the call returns None. (Filled by numpy instead, the writer lost the GIL to the
 * dispatcher for a switch interval, 5 ms, at every array operation large enough for
 * numpy to release it: 30 ms of a 200,000-row call.)
 */
typedef struct {
    int64_t *offsets, *queue_offsets, *stamps;
    int32_t *sizes;
} RowOutputs;

static PyObject *append_batch(PyObject *dest_obj, Py_ssize_t position, PyObject *blob_obj,
                              PyObject *meta_obj, PyObject *keys, PyObject *table,
                              long long physical_start, long long timestamp,
                              const RowOutputs *outs);

PyObject *py_append_encoded(PyObject *self, PyObject *args) {
    PyObject *dest_obj, *blob_obj, *meta_obj, *keys, *table, *outs_obj = Py_None;
    Py_ssize_t position, row = 0;
    long long physical_start, timestamp;
    if (!PyArg_ParseTuple(args, "OnOSO!O!LL|On", &dest_obj, &position, &blob_obj, &meta_obj,
                          &PyList_Type, &keys, &PyDict_Type, &table, &physical_start,
                          &timestamp, &outs_obj, &row))
        return NULL;
    if (outs_obj == Py_None)
        return append_batch(dest_obj, position, blob_obj, meta_obj, keys, table, physical_start,
                            timestamp, NULL);
    if (!PyTuple_CheckExact(outs_obj) || PyTuple_GET_SIZE(outs_obj) != 4) {
        PyErr_SetString(PyExc_TypeError, "append_encoded: outs must be a tuple of 4 buffers");
        return NULL;
    }
    Py_buffer views[4];
    if (get_buffers(4, PyTuple_GET_ITEM(outs_obj, 0), &views[0], PyBUF_WRITABLE,
                    PyTuple_GET_ITEM(outs_obj, 1), &views[1], PyBUF_WRITABLE,
                    PyTuple_GET_ITEM(outs_obj, 2), &views[2], PyBUF_WRITABLE,
                    PyTuple_GET_ITEM(outs_obj, 3), &views[3], PyBUF_WRITABLE) < 0)
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t rows = row + PyList_GET_SIZE(keys);
    static const Py_ssize_t item_size[4] = {8, 8, 4, 8};
    for (int k = 0; k < 4; k++) {
        if (row < 0 || views[k].len < rows * item_size[k]) {
            PyErr_SetString(PyExc_ValueError, "append_encoded: outs hold too few rows");
            goto done;
        }
    }
    RowOutputs outs = {
        .offsets = (int64_t *)views[0].buf + row,
        .queue_offsets = (int64_t *)views[1].buf + row,
        .sizes = (int32_t *)views[2].buf + row,
        .stamps = (int64_t *)views[3].buf + row,
    };
    result = append_batch(dest_obj, position, blob_obj, meta_obj, keys, table, physical_start,
                          timestamp, &outs);
done:
    release_buffers(4, &views[0], &views[1], &views[2], &views[3]);
    return result;
}

/* append_encoded with its arguments checked: ``meta`` bytes, ``keys`` a list, ``table`` a
 * dict, ``outs`` NULL or room for every record. */
static PyObject *append_batch(PyObject *dest_obj, Py_ssize_t position, PyObject *blob_obj,
                              PyObject *meta_obj, PyObject *keys, PyObject *table,
                              long long physical_start, long long timestamp,
                              const RowOutputs *outs) {
    int stamp_only = dest_obj == Py_None;
    if (stamp_only) { /* the blob stands in for the file: the bounds check below holds */
        dest_obj = blob_obj;
        position = 0;
    }
    Py_buffer dest, blob;
    if (get_buffers(2, dest_obj, &dest, PyBUF_WRITABLE, blob_obj, &blob, PyBUF_WRITABLE) < 0)
        return NULL;
    PyObject *result = NULL;
    /* (keys borrowed from ``keys``, which outlives the call) */
    QueueCounter counter = {.table = table};
    Py_ssize_t count = PyList_GET_SIZE(keys);
    const RecordMeta *metas = (const RecordMeta *)PyBytes_AS_STRING(meta_obj);
    if (PyBytes_GET_SIZE(meta_obj) != count * (Py_ssize_t)sizeof(RecordMeta)) {
        PyErr_SetString(PyExc_ValueError, "meta and keys disagree");
        goto done;
    }
    if (position < 0 || position + blob.len > dest.len) {
        PyErr_SetString(PyExc_ValueError, "batch does not fit in the file");
        goto done;
    }
    int64_t *queue_offsets;
    if (outs != NULL) {
        result = Py_NewRef(Py_None);
        queue_offsets = outs->queue_offsets;
    } else {
        result = PyBytes_FromStringAndSize(NULL, count * 8);
        if (result == NULL) goto done;
        queue_offsets = (int64_t *)PyBytes_AS_STRING(result);
    }
    uint8_t *src = (uint8_t *)blob.buf;
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int32_t length = metas[i].length;
        int32_t flag = metas[i].sys_flag;
        if (length < FIXED_OVERHEAD_V4 || at + length > blob.len) {
            PyErr_SetString(PyExc_ValueError, "meta does not describe the blob");
            goto fail;
        }
        int32_t kind = flag & TRANSACTION_MASK;
        int64_t queue_offset = 0;
        if (kind == 0x0 || kind == 0x8) { /* NOT and COMMIT get a queue entry */
            if (next_queue_offset(&counter, PyList_GET_ITEM(keys, i), &queue_offset) < 0)
                goto fail;
        }
        queue_offsets[i] = queue_offset;
        uint8_t *record = src + at;
        put_i64(record + 20, queue_offset);
        put_i64(record + 28, physical_start + at);
        put_i64(record + ((flag & BORN_V6) ? 68 : 56), timestamp);
        if (outs != NULL) {
            outs->offsets[i] = physical_start + at;
            outs->sizes[i] = length;
            outs->stamps[i] = timestamp;
        }
        at += length;
    }
    if (at != blob.len) {
        PyErr_SetString(PyExc_ValueError, "meta does not cover the blob");
        goto fail;
    }
    if (!stamp_only) {
        uint8_t *out = (uint8_t *)dest.buf + position;
        /* The copy keeps the GIL: releasing it lets the busy dispatcher thread in, and the
         * writer then waits for a whole switch interval (5 ms) to get it back, far longer
         * than the copy (the prefaulter has taken the page faults out of it). */
        at = 0;
        for (Py_ssize_t i = 0; i < count; i++) { /* everything but the sizes */
            memset(out + at, 0, 4);
            memcpy(out + at + 4, src + at + 4, (size_t)metas[i].length - 4);
            at += metas[i].length;
        }
        at = 0;
        for (Py_ssize_t i = 0; i < count; i++) { /* then the sizes: whole once set */
            memcpy(out + at, src + at, 4);
            at += metas[i].length;
        }
    }
    if (commit_queue_offsets(&counter) < 0) goto fail;
    goto done;
fail:
    Py_CLEAR(result);
done:
    Py_XDECREF(counter.pending);
    release_buffers(2, &dest, &blob);
    return result;
}

/* offsetMsgId: store host bytes + 8-byte offset as upper-case hex, written straight into
 * the new str's buffer (through a char buffer and an ASCII decode it cost a copy and a
 * scan per message). */
PyObject *msg_id(const uint8_t *host, Py_ssize_t host_len, int64_t offset) {
    static const char digits[] = "0123456789ABCDEF";
    PyObject *text = PyUnicode_New(2 * (host_len + 8), 127);
    if (text == NULL) return NULL;
    Py_UCS1 *out = PyUnicode_1BYTE_DATA(text);
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < host_len; i++) {
        out[n++] = (Py_UCS1)digits[host[i] >> 4];
        out[n++] = (Py_UCS1)digits[host[i] & 0xF];
    }
    for (int shift = 56; shift >= 0; shift -= 8) {
        uint8_t b = (uint8_t)((uint64_t)offset >> shift);
        out[n++] = (Py_UCS1)digits[b >> 4];
        out[n++] = (Py_UCS1)digits[b & 0xF];
    }
    return text;
}

PyObject *s_status, *s_commit_log_offset, *s_queue_offset, *s_msg_id,
    *s_store_timestamp, *s_size, *s_reason, *s_ok, *s_empty;

/*
 * put_results(result_type, status, ok, meta, queue_offsets, physical_start, timestamp,
 *             store_host) -> list of result_type
 *
 * One PutResult per record, made without running the frozen dataclass's __init__ (which
 * would cost more than the whole append): the object is allocated and its slots set as
 * object.__setattr__ would. ``ok`` is the value of the result's ``ok`` field (the status
 * is PUT_OK), which __post_init__ would have set.
 */
static PyObject *make_results(PyTypeObject *type, PyObject *status, int ok, PyObject *meta_obj,
                              PyObject *offsets_obj, long long physical_start,
                              long long timestamp, PyObject *store_host);

PyObject *py_put_results(PyObject *self, PyObject *args) {
    PyTypeObject *type;
    PyObject *status, *meta_obj, *offsets_obj, *store_host;
    long long physical_start, timestamp;
    int ok;
    if (!PyArg_ParseTuple(args, "O!OpSSLLS", &PyType_Type, &type, &status, &ok, &meta_obj,
                          &offsets_obj, &physical_start, &timestamp, &store_host))
        return NULL;
    return make_results(type, status, ok, meta_obj, offsets_obj, physical_start, timestamp,
                        store_host);
}

/* put_results with its arguments checked: a type, and bytes for meta, offsets and host. */
static PyObject *make_results(PyTypeObject *type, PyObject *status, int ok, PyObject *meta_obj,
                              PyObject *offsets_obj, long long physical_start,
                              long long timestamp, PyObject *store_host) {
    Py_ssize_t count = PyBytes_GET_SIZE(meta_obj) / (Py_ssize_t)sizeof(RecordMeta);
    if (PyBytes_GET_SIZE(offsets_obj) != count * 8) {
        PyErr_SetString(PyExc_ValueError, "queue offsets and meta disagree");
        return NULL;
    }
    const RecordMeta *metas = (const RecordMeta *)PyBytes_AS_STRING(meta_obj);
    const int64_t *queue_offsets = (const int64_t *)PyBytes_AS_STRING(offsets_obj);
    const uint8_t *host = (const uint8_t *)PyBytes_AS_STRING(store_host);
    Py_ssize_t host_len = PyBytes_GET_SIZE(store_host);
    PyObject *result_names[8] = {s_status, s_commit_log_offset, s_queue_offset, s_msg_id,
                                 s_store_timestamp, s_size, s_reason, s_ok};
    resolve_layout(&result_layout, type, result_names, 8);
    PyObject *list = PyList_New(count);
    PyObject *stamp = PyLong_FromLongLong(timestamp);
    if (list == NULL || stamp == NULL) goto fail;
    int64_t offset = physical_start;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *obj = type->tp_alloc(type, 0);
        if (obj == NULL) goto fail;
        /* Untracked by the cycle collector, as CPython does with tuples and dicts of
         * atomic values: a result holds only an enum member, ints and strs, so it can
         * never be part of a cycle. Tracked, a batch of results alive across a collection
         * was promoted to the older generations and brought on full collections of the
         * application's whole heap: a third of a 1,024-message put. */
        if (PyObject_IS_GC(obj)) PyObject_GC_UnTrack(obj);
        PyList_SET_ITEM(list, i, obj);
        PyObject *values[8];
        values[0] = Py_NewRef(status);
        values[1] = PyLong_FromLongLong(offset);
        values[2] = PyLong_FromLongLong(queue_offsets[i]);
        values[3] = msg_id(host, host_len, offset);
        values[4] = Py_NewRef(stamp);
        values[5] = PyLong_FromLong(metas[i].length);
        values[6] = Py_NewRef(s_empty);
        values[7] = PyBool_FromLong(ok);
        int failed = 0;
        for (int k = 0; k < 8; k++) failed |= values[k] == NULL;
        if (!failed) failed = set_fields(&result_layout, obj, result_names, values, 8) < 0;
        for (int k = 0; k < 8; k++) Py_XDECREF(values[k]);
        if (failed) goto fail;
        offset += metas[i].length;
    }
    Py_DECREF(stamp);
    return list;
fail:
    Py_XDECREF(stamp);
    Py_XDECREF(list);
    return NULL;
}

/*
 * put_one(message, message_type, topics, hosts, queue_keys, store_host, max_body,
 *         max_record, file_size, born_now_ms, dest, position, file_from_offset, table,
 *         store_timestamp, result_type, status, ok) -> result_type or None
 *
 * A single put's encode_batch, append_encoded and put_results in one call, for the last
 * CommitLog file mapped as ``dest`` and written up to ``position``: the PutResult, or
 * None when Python's path must take the message (not the common case, or it does not fit
 * in the file with an END_OF_FILE blank's 8 bytes to spare). The caller holds the put
 * lock and moves the write position by the result's size.
 */
PyObject *py_put_one(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 18) {
        PyErr_Format(PyExc_TypeError, "put_one takes 18 arguments (%zd given)", nargs);
        return NULL;
    }
    /* The checks encode_batch, append_encoded and put_results make of these arguments,
     * made once: the three steps then run without argument tuples (a third of the C time
     * of a single put went to packing and parsing them). */
    if (!PyDict_Check(args[2]) || !PyDict_Check(args[3]) || !PyDict_Check(args[4]) ||
        !PyDict_Check(args[13])) {
        PyErr_SetString(PyExc_TypeError, "put_one: topics, hosts, queue keys and the queue "
                                         "offset table must be dicts");
        return NULL;
    }
    if (!PyBytes_Check(args[5]) || !PyType_Check(args[15])) {
        PyErr_SetString(PyExc_TypeError, "put_one: store host must be bytes and "
                                         "result_type a type");
        return NULL;
    }
    EncodeArgs a = {args[1], args[2], args[3], args[4], args[5], 0, 0, 0, 0, 0};
    a.max_body = PyLong_AsLongLong(args[6]);
    a.max_record = PyLong_AsLongLong(args[7]);
    a.file_size = PyLong_AsLongLong(args[8]);
    a.now_ms = PyLong_AsLongLong(args[9]);
    Py_ssize_t position = PyLong_AsSsize_t(args[11]);
    long long file_from = PyLong_AsLongLong(args[12]);
    long long timestamp = PyLong_AsLongLong(args[14]);
    if (PyErr_Occurred()) return NULL;
    int ok = PyObject_IsTrue(args[17]);
    if (ok < 0) return NULL;
    PyObject *result = NULL, *encoded = NULL, *offsets = NULL, *results = NULL;
    PyObject *one = PyTuple_Pack(1, args[0]);
    if (one == NULL) return NULL;
    encoded = encode_messages(one, &a);
    if (encoded == NULL) goto done;
    if (encoded == Py_None) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *blob = PyTuple_GET_ITEM(encoded, 0), *meta = PyTuple_GET_ITEM(encoded, 1);
    PyObject *keys = PyTuple_GET_ITEM(encoded, 2);
    if (position + PyByteArray_GET_SIZE(blob) + 8 > a.file_size) { /* END_FILE_MIN_BLANK */
        result = Py_NewRef(Py_None);
        goto done;
    }
    long long physical = file_from + position;
    offsets = append_batch(args[10], position, blob, meta, keys, args[13], physical,
                           timestamp, NULL);
    if (offsets != NULL)
        results = make_results((PyTypeObject *)args[15], args[16], ok, meta, offsets, physical,
                               timestamp, args[5]);
    if (results != NULL) result = Py_NewRef(PyList_GET_ITEM(results, 0));
done:
    Py_DECREF(one);
    Py_XDECREF(encoded);
    Py_XDECREF(offsets);
    Py_XDECREF(results);
    return result;
}
