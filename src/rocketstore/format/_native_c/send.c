/*
 * rocketstore.format._native, the broker's sends: send_frame and send_answer (single
 * sends), batch_frame and batch_answer (SEND_BATCH_MESSAGE).
 * (native.h describes the module; the Python twins are
 * rocketstore.broker.processors.send_fast.send_frame_python, send_answer_python,
 * batch_frame_python and batch_answer_python.)
 *
 * The common send frame of a Java producer, from its bytes to what the store puts, and
 * the answer's frame from the put's result; anything else is None, and the broker's
 * Python path (the definition) takes the frame. The header is read by header.c (ASCII
 * JSON of integers and strings) with V2's one-letter extFields.
 */
#include "native.h"

enum { MAX_PROPS = 32 };

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

/* A properties string's names and values by decode_properties_str's rules (a later
 * repeated name wins in the first one's place) into props; their count, or -1 past
 * MAX_PROPS (the Python path's then) or when a name sends the message elsewhere. */
static int parse_props(const char *text, Py_ssize_t length, Prop *props) {
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
                    if (n >= MAX_PROPS) return -1;
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
            if (is_key(&props[k], SPECIAL[s])) return -1;
    return n;
}

/* CLUSTER put into props (in its place when there, else last): the count, or -1 with an
 * error set or not (a name not ASCII: the Python path's). */
static int put_cluster(Prop *props, int n, PyObject *cluster) {
    Py_ssize_t cluster_len;
    const char *cluster_text = PyUnicode_AsUTF8AndSize(cluster, &cluster_len);
    if (cluster_text == NULL) return -1; /* (an error set: the caller returns it) */
    if (!all_ascii((const uint8_t *)cluster_text, cluster_len)) return -1;
    int at = prop_find(props, n, "CLUSTER", 7);
    if (at < 0) {
        at = n++;
        props[at].key = "CLUSTER";
        props[at].key_len = 7;
    }
    props[at].value = cluster_text;
    props[at].value_len = cluster_len;
    return n;
}

/* The name ``name`` taken out of props (the others keep their order): the new count. */
static int drop_prop(Prop *props, int n, const char *name) {
    int at = prop_find(props, n, name, (Py_ssize_t)strlen(name));
    if (at < 0) return n;
    memmove(props + at, props + at + 1, sizeof(Prop) * (size_t)(n - at - 1));
    return n - 1;
}

/* props in the iteration order of a java.util.HashMap that held ``peak`` names at most
 * (javahash.java_hashmap_ordered). */
static void hashmap_order(Prop *props, int n, int peak) {
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
}

/*
 * The stored properties of a plain send (send.stored_properties): the request's,
 * CLUSTER put last, WAIT removed, in the iteration order of a HashMap sized by the peak.
 * A new dict, or NULL with no error set when the send is not the common case.
 */
static PyObject *stored_properties(const char *text, Py_ssize_t length, PyObject *cluster,
                                   PyObject **uniq_key) {
    Prop props[MAX_PROPS + 1];
    int n = parse_props(text, length, props);
    if (n < 0) return NULL;
    n = put_cluster(props, n, cluster);
    if (n < 0) return NULL;
    int peak = n;
    n = drop_prop(props, n, "WAIT");
    hashmap_order(props, n, peak);
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

/* SendMessageRequestHeaderV2's extFields, by letter (a..n; NULL: absent). */
typedef struct {
    const char *ext[14];
    Py_ssize_t ext_len[14];
} V2Fields;

static int v2_field(void *arg, const char *name, Py_ssize_t name_len, const char *value,
                    Py_ssize_t value_len) {
    V2Fields *f = arg;
    int letter = name_len == 1 ? name[0] - 'a' : -1;
    if (letter < 0 || letter >= 14 || f->ext[letter] != NULL) return -1;
    f->ext[letter] = value;
    f->ext_len[letter] = value_len;
    return 0;
}

/* A send request's header (single or batch) as SendHeader.parse reads the V2 letters. */
typedef struct {
    RequestHeader h;
    V2Fields f;
    int64_t queue_id, sys_flag, born, flag, reconsume;
} SendRequest;

/* 1 when ``data`` is a send request of ``code_a`` or ``code_b`` with all of a..h there and
 * plain numbers in range, k blank, true or false; 0 to decline; -1 with an error set. The
 * caller frees r->h.strings in every case. */
static int read_send_request(const char *data, Py_ssize_t len, int64_t code_a, int64_t code_b,
                             SendRequest *r) {
    memset(&r->f, 0, sizeof r->f);
    int read = read_request_header(data, len, &r->h, v2_field, &r->f);
    if (read <= 0) return read;
    if (r->h.code != code_a && r->h.code != code_b) return 0;
    const char *const *ext = r->f.ext;
    const Py_ssize_t *ext_len = r->f.ext_len;
    for (int k = 0; k < 8; k++)
        if (ext[k] == NULL) return 0;
    int64_t queue_nums, max_times;
    r->reconsume = 0;
    if (text_int(ext[3], ext_len[3], INT32_MIN, INT32_MAX, &queue_nums) < 0 ||
        text_int(ext[4], ext_len[4], INT32_MIN, INT32_MAX, &r->queue_id) < 0 ||
        text_int(ext[5], ext_len[5], INT32_MIN, INT32_MAX, &r->sys_flag) < 0 ||
        text_int(ext[6], ext_len[6], INT64_MIN, INT64_MAX, &r->born) < 0 ||
        text_int(ext[7], ext_len[7], INT32_MIN, INT32_MAX, &r->flag) < 0)
        return 0;
    if (ext[9] != NULL && ext_len[9] > 0 &&
        text_int(ext[9], ext_len[9], INT32_MIN, INT32_MAX, &r->reconsume) < 0)
        return 0;
    if (ext[11] != NULL && ext_len[11] > 0 &&
        text_int(ext[11], ext_len[11], INT32_MIN, INT32_MAX, &max_times) < 0)
        return 0;
    if (ext[10] != NULL && ext_len[10] > 0 &&
        !(ext_len[10] == 4 && memcmp(ext[10], "true", 4) == 0) &&
        !(ext_len[10] == 5 && memcmp(ext[10], "false", 5) == 0))
        return 0;
    return 1;
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
    const char *data = (const char *)frame.buf;
    SendRequest r;
    int read = read_send_request(data, frame.len, 10, 310, &r);
    if (read < 0) goto done;
    if (read == 0) goto decline;
    const char *const *ext = r.f.ext;
    Py_ssize_t header_len = r.h.header_len;
    PyObject *uniq_key = NULL;
    const char *props_text = ext[8] != NULL ? ext[8] : "";
    PyObject *properties = stored_properties(props_text, ext[8] != NULL ? r.f.ext_len[8] : 0,
                                             cluster, &uniq_key);
    if (properties == NULL) {
        if (PyErr_Occurred()) goto done;
        goto decline;
    }
    PyObject *topic = PyUnicode_DecodeASCII(ext[1], r.f.ext_len[1], NULL);
    PyObject *body = topic ? PyBytes_FromStringAndSize(data + 4 + header_len,
                                                       frame.len - 4 - header_len)
                           : NULL;
    if (body != NULL) {
        result = Py_BuildValue("(LLNLLLLLOOO)", (long long)r.h.opaque, (long long)r.h.version,
                               topic, (long long)r.queue_id, (long long)r.sys_flag,
                               (long long)r.born, (long long)r.flag, (long long)r.reconsume,
                               properties, uniq_key ? uniq_key : Py_None, body);
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
    PyMem_Free(r.h.strings);
    PyBuffer_Release(&frame);
    return result;
}

/*
 * batch_frame(frame, cluster) -> (opaque, version, topic, queue_id, sys_flag,
 *     born_timestamp, reconsume_times, batch_text, body_length,
 *     (bodies, flags, texts, body_bytes)) or None
 *
 * ``frame``: one whole frame without its length prefix. A SEND_BATCH_MESSAGE request
 * (code 320) with send_frame's header, whose own properties hold no name that sends a
 * message elsewhere, and whose body's entries are whole (at least one). ``batch_text``
 * is the batch's properties as send.send_batch stores them after each entry's (CLUSTER
 * set, UNIQ_KEY dropped, in HashMap order); the last item is batch_columns's answer for
 * the body and that text. Everything else: None, for the Python path.
 */
PyObject *py_batch_frame(PyObject *self, PyObject *args) {
    Py_buffer frame = {0};
    PyObject *cluster;
    if (!PyArg_ParseTuple(args, "y*U", &frame, &cluster)) return NULL;
    PyObject *result = NULL, *columns = NULL;
    char *text = NULL;
    const char *data = (const char *)frame.buf;
    SendRequest r;
    int read = read_send_request(data, frame.len, 320, 320, &r);
    if (read < 0) goto done;
    if (read == 0) goto decline;
    Prop props[MAX_PROPS + 1];
    int n = parse_props(r.f.ext[8] != NULL ? r.f.ext[8] : "",
                        r.f.ext[8] != NULL ? r.f.ext_len[8] : 0, props);
    if (n < 0) goto decline;
    n = put_cluster(props, n, cluster);
    if (n < 0) {
        if (PyErr_Occurred()) goto done;
        goto decline;
    }
    /* (the batch's own UNIQ_KEY would be every entry's: RocketMQ #9416, format.md 13) */
    n = drop_prop(props, n, "UNIQ_KEY");
    hashmap_order(props, n, n);
    Py_ssize_t text_len = 0;
    for (int k = 0; k < n; k++) text_len += props[k].key_len + props[k].value_len + 2;
    text = PyMem_Malloc((size_t)text_len + 1);
    if (text == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t at = 0;
    for (int k = 0; k < n; k++) {
        if (k > 0) text[at++] = 0x02;
        memcpy(text + at, props[k].key, (size_t)props[k].key_len);
        at += props[k].key_len;
        text[at++] = 0x01;
        memcpy(text + at, props[k].value, (size_t)props[k].value_len);
        at += props[k].value_len;
    }
    Py_ssize_t body_at = 4 + r.h.header_len;
    columns = batch_columns_of((const uint8_t *)data + body_at, frame.len - body_at, text, at);
    if (columns == NULL) goto done;
    if (columns == Py_None || PyList_GET_SIZE(PyTuple_GET_ITEM(columns, 0)) == 0)
        goto decline;
    result = Py_BuildValue("(LLs#LLLLs#nO)", (long long)r.h.opaque, (long long)r.h.version,
                           r.f.ext[1], r.f.ext_len[1], (long long)r.queue_id,
                           (long long)r.sys_flag, (long long)r.born, (long long)r.reconsume,
                           text, at, frame.len - body_at, columns);
    goto done;
decline:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(columns);
    PyMem_Free(text);
    PyMem_Free(r.h.strings);
    PyBuffer_Release(&frame);
    return result;
}

/* A stored send's SUCCESS answer frame (length prefix included), as encode_command writes
 * put_response's command: ``msg_id`` and ``transaction`` are JSON text already (quotes
 * included; transaction NULL: none). */
static PyObject *answer_frame(long long opaque, long long version, const char *msg_id,
                              Py_ssize_t msg_id_len, long long queue_id, long long queue_offset,
                              const char *transaction, Py_ssize_t transaction_len) {
    char head[64], tail[512];
    int head_len = snprintf(head, sizeof head, "{\"code\":0,\"extFields\":{\"msgId\":");
    int tail_len = snprintf(tail, sizeof tail,
                            ",\"queueId\":\"%lld\",\"queueOffset\":\"%lld\",\"MSG_REGION\":"
                            "\"DefaultRegion\",\"TRACE_ON\":\"true\"%s",
                            queue_id, queue_offset, transaction ? ",\"transactionId\":" : "");
    char end[256];
    int end_len = snprintf(end, sizeof end,
                           "},\"flag\":1,\"language\":\"JAVA\",\"opaque\":%lld,"
                           "\"serializeTypeCurrentRPC\":\"JSON\",\"version\":%lld}",
                           opaque, version);
    Py_ssize_t n = head_len + msg_id_len + tail_len + (transaction ? transaction_len : 0) +
                   end_len;
    if (n > INT32_MAX - 8) Py_RETURN_NONE;
    PyObject *frame = PyBytes_FromStringAndSize(NULL, 8 + n);
    if (frame == NULL) return NULL;
    char *out = PyBytes_AS_STRING(frame);
    put_i32((uint8_t *)out, (int32_t)(4 + n));
    put_i32((uint8_t *)out + 4, (int32_t)n);
    out += 8;
    memcpy(out, head, (size_t)head_len), out += head_len;
    memcpy(out, msg_id, (size_t)msg_id_len), out += msg_id_len;
    memcpy(out, tail, (size_t)tail_len), out += tail_len;
    if (transaction) memcpy(out, transaction, (size_t)transaction_len), out += transaction_len;
    memcpy(out, end, (size_t)end_len);
    return frame;
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
    char quoted_id[1024], quoted_transaction[1024];
    Py_ssize_t id_len = quote_ascii(msg_id, quoted_id, sizeof quoted_id), transaction_len = 0;
    if (id_len < 0) Py_RETURN_NONE;
    if (with_transaction) {
        transaction_len = quote_ascii(transaction_id, quoted_transaction,
                                      sizeof quoted_transaction);
        if (transaction_len < 0) Py_RETURN_NONE;
    }
    return answer_frame(opaque, version, quoted_id, id_len, queue_id, queue_offset,
                        with_transaction ? quoted_transaction : NULL, transaction_len);
}

/*
 * batch_answer(opaque, version, store_host, offsets, queue_id, queue_offset) -> bytes
 *
 * The whole frame of a stored batch's SUCCESS answer (send._columns_response): msgId the
 * offsetMsgIds of the records ``store_host`` (8 or 20 encoded bytes) stored at
 * ``offsets`` (native int64s) joined by ",", queueOffset the first record's.
 */
PyObject *py_batch_answer(PyObject *self, PyObject *args) {
    long long opaque, version, queue_id, queue_offset;
    Py_buffer host = {0}, offsets = {0};
    if (!PyArg_ParseTuple(args, "LLy*y*LL", &opaque, &version, &host, &offsets, &queue_id,
                          &queue_offset))
        return NULL;
    PyObject *result = NULL;
    char *ids = NULL;
    if ((host.len != 8 && host.len != 20) || offsets.len % 8 != 0) {
        PyErr_SetString(PyExc_ValueError,
                        "batch_answer: a host of 8 or 20 bytes and int64 offsets");
        goto done;
    }
    Py_ssize_t count = offsets.len / 8, ids_len = offset_msg_ids_len(host.len, count);
    ids = PyMem_Malloc((size_t)ids_len + 2);
    if (ids == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    ids[0] = '"';
    write_offset_msg_ids(ids + 1, host.buf, host.len, offsets.buf, count);
    ids[ids_len + 1] = '"';
    result = answer_frame(opaque, version, ids, ids_len + 2, queue_id, queue_offset, NULL, 0);
done:
    PyMem_Free(ids);
    release_buffers(2, &host, &offsets);
    return result;
}
