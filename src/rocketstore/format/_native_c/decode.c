/*
 * rocketstore.format._native, reads: decode_messages, the lazy MessageExt descriptors,
 * select_units, pull_messages, key_lookup, time_search.
 * (native.h describes the module; one extension, one translation unit per concern.)
 */
#include "native.h"

/* ---- reads: which queue units a pull takes ----------------------------------------- */

/*
 * select_units(units, max_count, commit_max, memory_bytes, mem_bytes, mem_count,
 *              disk_bytes, disk_count) -> (offsets, sizes, index) or None
 *
 * MessageReader's batch rules over raw 20-byte queue units (big-endian CommitLog offset,
 * size, tags code) for a pull that takes every tag: the units taken, as lists of offsets
 * and sizes, and the index of the first unit not taken (len when all were). A unit is
 * "in disk" when it lies more than ``memory_bytes`` behind ``commit_max``; a batch is full
 * at ``max_count`` records, or past the in-memory or in-disk byte and count limits.
 * None when a unit it would take has a size <= 0 (Python's loop decides then).
 */
typedef struct {
    long long max_count, commit_max, mem_bytes, mem_count, disk_bytes, disk_count;
    double memory_bytes;
} BatchRules;

/* The batch rules over ``n`` units at ``p``: the offsets and sizes taken (``offsets`` and
 * ``sizes`` hold n each) into *taken, the index of the first unit not taken into *index.
 * -1 when a unit it would take has a size <= 0, else 0. */
static int select_rows(const uint8_t *p, Py_ssize_t n, const BatchRules *rules,
                       int64_t *offsets, int32_t *sizes, Py_ssize_t *taken,
                       Py_ssize_t *index);

/* select_rows over the units in ``units``, into arrays it allocates (*offsets and *sizes,
 * PyMem_Free them, also on failure): 0, -1 for a unit of size <= 0, -2 with MemoryError. */
static int select_units_of(const Py_buffer *units, const BatchRules *rules, int64_t **offsets,
                           int32_t **sizes, Py_ssize_t *taken, Py_ssize_t *index) {
    Py_ssize_t n = units->len / 20;
    *offsets = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    *sizes = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    if (*offsets == NULL || *sizes == NULL) {
        PyErr_NoMemory();
        return -2;
    }
    return select_rows((const uint8_t *)units->buf, n, rules, *offsets, *sizes, taken, index);
}

static int select_rows(const uint8_t *p, Py_ssize_t n, const BatchRules *rules,
                       int64_t *offsets, int32_t *sizes, Py_ssize_t *taken,
                       Py_ssize_t *index) {
    long long total = 0;
    Py_ssize_t count = 0, at = 0;
    for (; at < n; at++) {
        const uint8_t *unit = p + at * 20;
        int64_t offset = get_i64(unit);
        int32_t size = get_i32(unit + 8);
        if (total != 0 && count != 0) {
            if (rules->max_count <= count) break;
            int in_disk = (double)(rules->commit_max - offset) > rules->memory_bytes;
            long long limit_bytes = in_disk ? rules->disk_bytes : rules->mem_bytes;
            long long limit_count = in_disk ? rules->disk_count : rules->mem_count;
            if (total + size > limit_bytes || count > limit_count - 1) break;
        }
        if (size <= 0) return -1;
        offsets[count] = offset;
        sizes[count] = size;
        total += size;
        count++;
    }
    *taken = count;
    *index = at;
    return 0;
}

/* The batch rules from seven arguments in select_units' order (max_count, commit_max,
 * memory_bytes, mem_bytes, mem_count, disk_bytes, disk_count); the caller checks
 * PyErr_Occurred. */
static void rules_from_args(BatchRules *rules, PyObject *const *args) {
    rules->max_count = PyLong_AsLongLong(args[0]);
    rules->commit_max = PyLong_AsLongLong(args[1]);
    rules->memory_bytes = PyFloat_AsDouble(args[2]);
    rules->mem_bytes = PyLong_AsLongLong(args[3]);
    rules->mem_count = PyLong_AsLongLong(args[4]);
    rules->disk_bytes = PyLong_AsLongLong(args[5]);
    rules->disk_count = PyLong_AsLongLong(args[6]);
}

PyObject *py_select_units(PyObject *self, PyObject *args) {
    Py_buffer units;
    BatchRules rules;
    if (!PyArg_ParseTuple(args, "y*LLdLLLL", &units, &rules.max_count, &rules.commit_max,
                          &rules.memory_bytes, &rules.mem_bytes, &rules.mem_count,
                          &rules.disk_bytes, &rules.disk_count))
        return NULL;
    PyObject *offsets = NULL, *sizes = NULL, *result = NULL;
    Py_ssize_t taken = 0, index = 0;
    int64_t *offs = NULL;
    int32_t *lens = NULL;
    int selected = select_units_of(&units, &rules, &offs, &lens, &taken, &index);
    if (selected == -2) goto done;
    if (selected == -1) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    offsets = PyList_New(taken);
    sizes = PyList_New(taken);
    if (offsets == NULL || sizes == NULL) goto done;
    for (Py_ssize_t k = 0; k < taken; k++) {
        PyObject *o = PyLong_FromLongLong(offs[k]), *z = PyLong_FromLong(lens[k]);
        if (o == NULL || z == NULL) {
            Py_XDECREF(o);
            Py_XDECREF(z);
            goto done;
        }
        PyList_SET_ITEM(offsets, k, o);
        PyList_SET_ITEM(sizes, k, z);
    }
    result = Py_BuildValue("OOn", offsets, sizes, index);
done:
    PyMem_Free(offs);
    PyMem_Free(lens);
    Py_XDECREF(offsets);
    Py_XDECREF(sizes);
    PyBuffer_Release(&units);
    return result;
}

/* ---- reads: one record into a MessageExt ------------------------------------------- */

PyObject *s_ext_names[18];
PyObject *s_magic_v1;
const char *ext_names[18] = {
    "topic", "queue_id", "queue_offset", "commit_log_offset", "size", "body", "properties",
    "msg_id", "sys_flag", "flag", "body_crc", "born_timestamp", "born_host",
    "store_timestamp", "store_host", "reconsume_times", "prepared_transaction_offset",
    "magic_code",
};

/* A cached str for some bytes (topics, hosts): a new reference, or NULL without an error
 * when ``cache`` does not know them (the Python path decodes and fills it). */
static PyObject *cached_text(PyObject *cache, const uint8_t *p, Py_ssize_t n) {
    PyObject *raw = PyBytes_FromStringAndSize((const char *)p, n);
    if (raw == NULL) return NULL;
    PyObject *text = PyDict_GetItemWithError(cache, raw);
    Py_DECREF(raw);
    return Py_XNewRef(text);
}

/* Property names as interned str, made once: a store holds a handful of names (KEYS,
 * UNIQ_KEY, TAGS, ...) in every record, and a fresh str per record also had to be hashed
 * for its dict. Filled as names are met, up to KEY_CACHE_SIZE short ones; never freed
 * (like interned strings). Values stay fresh objects: they differ per record. */
#define KEY_CACHE_SIZE 32
#define KEY_CACHE_BYTES 32
static struct {
    Py_ssize_t len;
    uint8_t bytes[KEY_CACHE_BYTES];
    PyObject *text;
} key_cache[KEY_CACHE_SIZE];
static int key_cache_count = 0;

static PyObject *property_name(const uint8_t *p, Py_ssize_t n) {
    for (int i = 0; i < key_cache_count; i++)
        if (key_cache[i].len == n && memcmp(key_cache[i].bytes, p, (size_t)n) == 0)
            return Py_NewRef(key_cache[i].text);
    PyObject *text = PyUnicode_DecodeASCII((const char *)p, n, NULL);
    if (text == NULL || n > KEY_CACHE_BYTES || key_cache_count >= KEY_CACHE_SIZE) return text;
    PyUnicode_InternInPlace(&text);
    key_cache[key_cache_count].len = n;
    memcpy(key_cache[key_cache_count].bytes, p, (size_t)n);
    key_cache[key_cache_count].text = Py_NewRef(text);
    key_cache_count++;
    return text;
}

/* decode_properties_str for ASCII text (characters are bytes, so RocketMQ's rules apply
 * to bytes): segments split by \x02, kept when >= 3 long with the first \x01 after the
 * first character and before the last. NULL with *ascii cleared for other text. */
static PyObject *ascii_properties(const uint8_t *p, Py_ssize_t n, int *ascii) {
    if (!all_ascii(p, n)) {
        *ascii = 0;
        return NULL;
    }
    PyObject *result = PyDict_New();
    if (result == NULL) return NULL;
    Py_ssize_t index = 0;
    while (index < n) {
        const uint8_t *found = memchr(p + index, '\x02', (size_t)(n - index));
        Py_ssize_t end = found != NULL ? found - p : n;
        if (end - index >= 3) {
            const uint8_t *sep = memchr(p + index, '\x01', (size_t)(end - index));
            Py_ssize_t at = sep != NULL ? sep - p : -1;
            if (index < at && at < end - 1) {
                PyObject *key = property_name(p + index, at - index);
                PyObject *value =
                    PyUnicode_DecodeASCII((const char *)p + at + 1, end - at - 1, NULL);
                if (key == NULL || value == NULL || PyDict_SetItem(result, key, value) < 0) {
                    Py_XDECREF(key);
                    Py_XDECREF(value);
                    Py_DECREF(result);
                    return NULL;
                }
                Py_DECREF(key);
                Py_DECREF(value);
            }
        }
        index = end + 1;
    }
    return result;
}

/* The last object made from some bytes of a record (a topic or host str, the raw store
 * host): the records of one call mostly share them, and a hit then costs a memcmp
 * instead of a new object (and, for text, a lookup). */
#define MEMO_BYTES 128
typedef struct {
    PyObject *obj; /* strong reference, or NULL */
    Py_ssize_t len;
    uint8_t bytes[MEMO_BYTES];
} BytesMemo;

/* The memo's object (new reference) when it was made from these bytes, else NULL. */
static inline PyObject *memo_hit(const BytesMemo *memo, const uint8_t *p, Py_ssize_t n) {
    if (memo->obj != NULL && memo->len == n && memcmp(memo->bytes, p, (size_t)n) == 0)
        return Py_NewRef(memo->obj);
    return NULL;
}

/* ``made`` (passed through, NULL on failure), kept as the memo of these bytes. */
static PyObject *memo_keep(BytesMemo *memo, PyObject *made, const uint8_t *p, Py_ssize_t n) {
    if (made != NULL && n <= MEMO_BYTES) {
        Py_XSETREF(memo->obj, Py_NewRef(made));
        memo->len = n;
        memcpy(memo->bytes, p, (size_t)n);
    }
    return made;
}

/* An int made once for a run of records that repeat its value, with that value kept in C
 * (reading it back from the int cost a conversion per record: timestamps take two
 * digits). */
typedef struct {
    PyObject *obj; /* strong reference, or NULL */
    long long value;
} LongMemo;

/* The bytes -> str answer of ``cache`` for these bytes, through the memo. */
static PyObject *memo_text(BytesMemo *memo, PyObject *cache, const uint8_t *p, Py_ssize_t n) {
    PyObject *hit = memo_hit(memo, p, n);
    return hit != NULL ? hit : memo_keep(memo, cached_text(cache, p, n), p, n);
}

/* ---- MessageExt.properties and msg_id, made on first read ------------------------- */

/* The slot ``lp`` describes in ``obj`` (NULL with a TypeError for an object of another
 * class). */
static PyObject **lazy_slot(LazySlotObject *lp, PyObject *obj) {
    if (!PyObject_TypeCheck(obj, lp->owner)) {
        PyErr_Format(PyExc_TypeError, "descriptor '%U' for '%.100s' objects doesn't apply to a "
                     "'%.100s' object", lp->name, lp->owner->tp_name, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return (PyObject **)((char *)obj + lp->offset);
}

/* The slot's object (borrowed), or NULL with an AttributeError when it is unset. */
static PyObject *lazy_value(LazySlotObject *lp, PyObject *obj, PyObject ***slot_out) {
    PyObject **slot = lazy_slot(lp, obj);
    if (slot == NULL) return NULL;
    if (*slot == NULL) {
        PyErr_Format(PyExc_AttributeError, "'%.100s' object has no attribute '%U'",
                     Py_TYPE(obj)->tp_name, lp->name);
        return NULL;
    }
    *slot_out = slot;
    return *slot;
}

/*
 * LazyProperties(slot, decode): a data descriptor over the member descriptor ``slot`` of a
 * slots class. The slot holds the properties dict, or, as decode_messages leaves it, the
 * record's raw properties bytes, parsed into the dict (and kept) on the first read.
 * Readers that never look at properties (a consumer that wants the body) skip a dict and
 * its strings per record, half of a decode. ``decode`` (bytes -> dict) parses text that
 * is not ASCII; ASCII goes through ascii_properties. Writes store what they are given.
 */
static PyObject *lazy_properties_get(PyObject *self, PyObject *obj, PyObject *type) {
    LazySlotObject *lp = (LazySlotObject *)self;
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    PyObject **slot;
    PyObject *value = lazy_value(lp, obj, &slot);
    if (value == NULL) return NULL;
    if (!PyBytes_CheckExact(value)) return Py_NewRef(value);
    Py_INCREF(value); /* the Python fallback may run other code meanwhile */
    int ascii = 1;
    PyObject *parsed = ascii_properties((const uint8_t *)PyBytes_AS_STRING(value),
                                        PyBytes_GET_SIZE(value), &ascii);
    if (parsed == NULL && !ascii) parsed = PyObject_CallOneArg(lp->decode, value);
    Py_DECREF(value);
    if (parsed == NULL) return NULL;
    Py_XSETREF(*slot, Py_NewRef(parsed));
    return parsed;
}

/*
 * LazyMsgId(slot, offset_slot): the same over MessageExt.msg_id. The slot holds the
 * offsetMsgId, or, as decode_messages leaves it, the record's raw store host bytes (the
 * same bytes object for every record of a host); the first read makes the id from them
 * and the int in ``offset_slot`` (commit_log_offset), and keeps it. A consumer that never
 * asks for ids skips a 32-character str per record, a tenth of a pull.
 */
static PyObject *lazy_msg_id_get(PyObject *self, PyObject *obj, PyObject *type) {
    LazySlotObject *lp = (LazySlotObject *)self;
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    PyObject **slot;
    PyObject *value = lazy_value(lp, obj, &slot);
    if (value == NULL) return NULL;
    if (!PyBytes_CheckExact(value)) return Py_NewRef(value);
    PyObject *offset_obj = *(PyObject **)((char *)obj + lp->source_offset);
    if (offset_obj == NULL || !PyLong_Check(offset_obj)) {
        PyErr_Format(PyExc_TypeError, "'%U' is made from an int commit_log_offset", lp->name);
        return NULL;
    }
    long long offset = PyLong_AsLongLong(offset_obj);
    if (offset == -1 && PyErr_Occurred()) return NULL;
    Py_INCREF(value); /* the str's allocation may run a collection, and so other code */
    PyObject *text = msg_id((const uint8_t *)PyBytes_AS_STRING(value),
                            PyBytes_GET_SIZE(value), offset);
    Py_DECREF(value);
    if (text == NULL) return NULL;
    Py_XSETREF(*slot, Py_NewRef(text));
    return text;
}

static int lazy_set(PyObject *self, PyObject *obj, PyObject *value) {
    LazySlotObject *lp = (LazySlotObject *)self;
    PyObject **slot = lazy_slot(lp, obj);
    if (slot == NULL) return -1;
    if (value == NULL && *slot == NULL) {
        PyErr_Format(PyExc_AttributeError, "'%.100s' object has no attribute '%U'",
                     Py_TYPE(obj)->tp_name, lp->name);
        return -1;
    }
    Py_XSETREF(*slot, Py_XNewRef(value));
    return 0;
}

/* ``member`` when it is the member descriptor of a writable object slot, else NULL with a
 * TypeError naming ``what``. */
static PyMemberDescrObject *object_slot(PyObject *member, const char *what) {
    if (!Py_IS_TYPE(member, &PyMemberDescr_Type) ||
        ((PyMemberDescrObject *)member)->d_member->type != T_OBJECT_EX ||
        (((PyMemberDescrObject *)member)->d_member->flags & READONLY)) {
        PyErr_Format(PyExc_TypeError, "%s wraps a writable __slots__ member", what);
        return NULL;
    }
    return (PyMemberDescrObject *)member;
}

static LazySlotObject *lazy_alloc(PyTypeObject *type, PyMemberDescrObject *m) {
    LazySlotObject *lp = (LazySlotObject *)type->tp_alloc(type, 0);
    if (lp == NULL) return NULL;
    lp->owner = (PyTypeObject *)Py_NewRef((PyObject *)PyDescr_TYPE(m));
    lp->offset = m->d_member->offset;
    lp->name = Py_NewRef(PyDescr_NAME(m));
    return lp;
}

static PyObject *lazy_properties_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *member, *decode;
    if (!PyArg_ParseTuple(args, "OO:LazyProperties", &member, &decode)) return NULL;
    PyMemberDescrObject *m = object_slot(member, "LazyProperties");
    if (m == NULL) return NULL;
    if (!PyCallable_Check(decode)) {
        PyErr_SetString(PyExc_TypeError, "LazyProperties needs a callable decode");
        return NULL;
    }
    LazySlotObject *lp = lazy_alloc(type, m);
    if (lp != NULL) lp->decode = Py_NewRef(decode);
    return (PyObject *)lp;
}

static PyObject *lazy_msg_id_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *member, *source;
    if (!PyArg_ParseTuple(args, "OO:LazyMsgId", &member, &source)) return NULL;
    PyMemberDescrObject *m = object_slot(member, "LazyMsgId");
    PyMemberDescrObject *from = m == NULL ? NULL : object_slot(source, "LazyMsgId");
    if (from == NULL) return NULL;
    if (PyDescr_TYPE(from) != PyDescr_TYPE(m)) {
        PyErr_SetString(PyExc_TypeError, "LazyMsgId's two slots must be of one class");
        return NULL;
    }
    LazySlotObject *lp = lazy_alloc(type, m);
    if (lp != NULL) lp->source_offset = from->d_member->offset;
    return (PyObject *)lp;
}

static void lazy_dealloc(PyObject *self) {
    LazySlotObject *lp = (LazySlotObject *)self;
    Py_XDECREF(lp->owner);
    Py_XDECREF(lp->name);
    Py_XDECREF(lp->decode);
    Py_TYPE(self)->tp_free(self);
}

PyTypeObject LazyPropertiesType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rocketstore.format._native.LazyProperties",
    .tp_basicsize = sizeof(LazySlotObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A slot holding properties as a dict, or raw bytes parsed on first read.",
    .tp_new = lazy_properties_new,
    .tp_dealloc = lazy_dealloc,
    .tp_descr_get = lazy_properties_get,
    .tp_descr_set = lazy_set,
};

PyTypeObject LazyMsgIdType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rocketstore.format._native.LazyMsgId",
    .tp_basicsize = sizeof(LazySlotObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A slot holding an offsetMsgId, or the store host bytes it is made from.",
    .tp_new = lazy_msg_id_new,
    .tp_dealloc = lazy_dealloc,
    .tp_descr_get = lazy_msg_id_get,
    .tp_descr_set = lazy_set,
};

/* A bytes object of these bytes, through the memo. */
static PyObject *memo_bytes(BytesMemo *memo, const uint8_t *p, Py_ssize_t n) {
    PyObject *hit = memo_hit(memo, p, n);
    return hit != NULL ? hit
                       : memo_keep(memo, PyBytes_FromStringAndSize((const char *)p, n), p, n);
}

typedef struct {
    PyTypeObject *ext_type;
    PyObject *topics, *hosts, *decode_props;
    int read_body;
    int lazy_properties; /* the type's properties slot takes raw bytes (LazyProperties) */
    int lazy_msg_id;     /* its msg_id slot takes the raw store host (LazyMsgId) */
    BytesMemo topic, born_host, store_host;
    BytesMemo store_host_raw;
    /* The last ones made, shared by the records of a call that repeat them: a batch's
     * records mostly have one store time, often one born time and one size. */
    LongMemo store_timestamp, born_timestamp, size;
} DecodeContext;

static void release_context(DecodeContext *ctx) {
    Py_CLEAR(ctx->topic.obj);
    Py_CLEAR(ctx->born_host.obj);
    Py_CLEAR(ctx->store_host.obj);
    Py_CLEAR(ctx->store_host_raw.obj);
    Py_CLEAR(ctx->store_timestamp.obj);
    Py_CLEAR(ctx->born_timestamp.obj);
    Py_CLEAR(ctx->size.obj);
}

/* A new reference to an int equal to ``value``: the memo's when it is, else a new one that
 * becomes the memo. NULL with an error set on failure. */
static PyObject *memo_long(LongMemo *memo, long long value) {
    if (memo->obj == NULL || memo->value != value) {
        PyObject *made = PyLong_FromLongLong(value);
        if (made == NULL) return NULL;
        Py_XSETREF(memo->obj, made);
        memo->value = value;
    }
    return Py_NewRef(memo->obj);
}

/*
 * record.read_record + record.to_message_ext for the record at ``position`` of ``data``
 * (readable up to ``limit``): a v1 record whose PHYSICALOFFSET is ``expect_offset`` and,
 * when ``expect_size`` >= 0, whose size is that. Returns a MessageExt (new reference),
 * None (new reference) to hand the record to Python (a blank, a v2 magic, anything
 * malformed, a topic or host the ``topics``/``hosts`` caches (bytes -> str) do not hold
 * yet), or NULL with an error set. Non-ASCII properties go through ``decode_props``.
 */
static PyObject *decode_one(DecodeContext *ctx, const uint8_t *data, Py_ssize_t limit,
                            Py_ssize_t position, int64_t expect_offset,
                            Py_ssize_t expect_size) {
    PyTypeObject *ext_type = ctx->ext_type;
    PyObject *topics = ctx->topics, *hosts = ctx->hosts, *decode_props = ctx->decode_props;
    int read_body = ctx->read_body;
    PyObject *result = NULL;
    PyObject *values[18] = {NULL};
    /* Compared as limit - x: a position from a damaged queue unit can be near 2^63, where
     * position + HEADER_V4 would overflow and pass the check. */
    if (position < 0 || position > limit - HEADER_V4) goto fallback;
    const uint8_t *r = data + position;
    int32_t total = get_i32(r);
    if (get_i32(r + 4) != MAGIC_V1 || total < FIXED_OVERHEAD_V4 || total > limit - position)
        goto fallback;
    if (expect_size >= 0 && total != expect_size) goto fallback;
    if (get_i64(r + 28) != expect_offset) goto fallback;
    int32_t flag = get_i32(r + 36);
    Py_ssize_t born_len = (flag & BORN_V6) ? 20 : 8;
    Py_ssize_t store_len = (flag & STORE_V6) ? 20 : 8;
    Py_ssize_t p = 48;
    const uint8_t *born_host = r + p;
    p += born_len;
    int64_t store_timestamp = get_i64(r + p);
    p += 8;
    const uint8_t *store_host = r + p;
    p += store_len;
    int32_t reconsume = get_i32(r + p);
    int64_t prepared = get_i64(r + p + 4);
    int32_t body_len = get_i32(r + p + 12);
    p += 16;
    if (body_len < 0 || p + body_len + 1 > total) goto fallback;
    Py_ssize_t body_at = p;
    p += body_len;
    int topic_len = (int8_t)r[p];
    p += 1;
    if (topic_len < 0 || p + topic_len + 2 > total) goto fallback;
    Py_ssize_t topic_at = p;
    p += topic_len;
    int props_len = (int16_t)(((uint16_t)r[p] << 8) | r[p + 1]);
    p += 2;
    if (props_len < 0 || p + props_len != total) goto fallback;
    values[0] = memo_text(&ctx->topic, topics, r + topic_at, topic_len);
    values[12] = memo_text(&ctx->born_host, hosts, born_host, born_len);
    values[14] = memo_text(&ctx->store_host, hosts, store_host, store_len);
    if (PyErr_Occurred()) goto done;
    if (values[0] == NULL || values[12] == NULL || values[14] == NULL) goto fallback;
    int ascii = 1;
    if (ctx->lazy_properties)
        values[6] = PyBytes_FromStringAndSize((const char *)r + p, props_len);
    else
        values[6] = ascii_properties(r + p, props_len, &ascii);
    if (values[6] == NULL) {
        if (ctx->lazy_properties) goto done;
        if (ascii) goto done;
        PyObject *raw = PyBytes_FromStringAndSize((const char *)r + p, props_len);
        if (raw == NULL) goto done;
        values[6] = PyObject_CallOneArg(decode_props, raw);
        Py_DECREF(raw);
        if (values[6] == NULL) goto done;
    }
    values[1] = PyLong_FromLong(get_i32(r + 12));
    values[2] = PyLong_FromLongLong(get_i64(r + 20));
    values[3] = PyLong_FromLongLong(expect_offset);
    values[4] = memo_long(&ctx->size, total);
    values[5] = read_body ? PyBytes_FromStringAndSize((const char *)r + body_at, body_len)
                          : Py_NewRef(Py_None);
    values[7] = ctx->lazy_msg_id ? memo_bytes(&ctx->store_host_raw, store_host, store_len)
                                 : msg_id(store_host, store_len, expect_offset);
    values[8] = PyLong_FromLong(flag);
    values[9] = PyLong_FromLong(get_i32(r + 16));
    values[10] = PyLong_FromLong(get_i32(r + 8));
    values[11] = memo_long(&ctx->born_timestamp, get_i64(r + 40));
    values[13] = memo_long(&ctx->store_timestamp, store_timestamp);
    values[15] = PyLong_FromLong(reconsume);
    values[16] = PyLong_FromLongLong(prepared);
    values[17] = Py_NewRef(s_magic_v1);
    for (int k = 0; k < 18; k++)
        if (values[k] == NULL) goto done;
    PyObject *obj = ext_type->tp_alloc(ext_type, 0);
    if (obj == NULL) goto done;
    if (set_fields(&ext_layout, obj, s_ext_names, values, 18) < 0) {
        Py_DECREF(obj);
        goto done;
    }
    result = obj;
    goto done;
fallback:
    result = Py_NewRef(Py_None);
done:
    for (int k = 0; k < 18; k++) Py_XDECREF(values[k]);
    return result;
}

/* Points ``ctx`` at the MessageExt type (its slot layout resolved once). */
static void use_ext_type(DecodeContext *ctx, PyObject *ext_type_obj) {
    ctx->ext_type = (PyTypeObject *)ext_type_obj;
    resolve_layout(&ext_layout, ctx->ext_type, s_ext_names, 18);
    PyObject *descr = _PyType_Lookup(ctx->ext_type, s_ext_names[6]);
    ctx->lazy_properties =
        ext_layout.direct && descr != NULL && Py_IS_TYPE(descr, &LazyPropertiesType);
    descr = _PyType_Lookup(ctx->ext_type, s_ext_names[7]);
    ctx->lazy_msg_id = ext_layout.direct && descr != NULL && Py_IS_TYPE(descr, &LazyMsgIdType);
}

/* A context for reading bodies from the leading (ext_type, topics, hosts,
 * decode_properties) arguments of a FASTCALL function (checked by the caller). */
static void context_from(DecodeContext *ctx, PyObject *const *args) {
    ctx->read_body = 1;
    ctx->topics = args[1];
    ctx->hosts = args[2];
    ctx->decode_props = args[3];
    use_ext_type(ctx, args[0]);
}

/*
 * decode_messages(buf, base, limit, offsets, sizes, read_body, ext_type, topics, hosts,
 *                 decode_properties) -> list of MessageExt or None
 *
 * decode_one for each CommitLog offset (with its size, or -1 for any) in a file mapped
 * as ``buf`` whose first byte is CommitLog offset ``base``; None where Python decides.
 */
PyObject *py_decode_messages(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    /* METH_FASTCALL, checked by hand (as key_lookup): a one-record read is short. */
    if (nargs != 10) {
        PyErr_Format(PyExc_TypeError, "decode_messages takes 10 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *buf_obj = args[0], *offsets = args[3], *sizes = args[4], *ext_type_obj = args[6];
    if (!PyList_Check(offsets) || !PyList_Check(sizes) || !PyType_Check(ext_type_obj) ||
        !PyDict_Check(args[7]) || !PyDict_Check(args[8])) {
        PyErr_SetString(PyExc_TypeError,
                        "decode_messages(buf, int, int, list, list, bool, type, dict, dict, "
                        "decode)");
        return NULL;
    }
    long long base = PyLong_AsLongLong(args[1]);
    Py_ssize_t limit = PyLong_AsSsize_t(args[2]);
    DecodeContext ctx = {0};
    ctx.read_body = PyObject_IsTrue(args[5]);
    if (PyErr_Occurred() || ctx.read_body < 0) return NULL;
    ctx.topics = args[7];
    ctx.hosts = args[8];
    ctx.decode_props = args[9];
    use_ext_type(&ctx, ext_type_obj);
    Py_ssize_t n = PyList_GET_SIZE(offsets);
    if (PyList_GET_SIZE(sizes) != n) {
        PyErr_SetString(PyExc_ValueError, "offsets and sizes differ in length");
        return NULL;
    }
    Py_buffer buf;
    if (PyObject_GetBuffer(buf_obj, &buf, PyBUF_SIMPLE) < 0) return NULL;
    if (limit > buf.len) limit = buf.len;
    PyObject *list = PyList_New(n);
    if (list == NULL) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long offset = PyLong_AsLongLong(PyList_GET_ITEM(offsets, i));
        Py_ssize_t size = PyLong_AsSsize_t(PyList_GET_ITEM(sizes, i));
        if (PyErr_Occurred()) goto fail;
        PyObject *one = decode_one(&ctx, (const uint8_t *)buf.buf, limit,
                                   (Py_ssize_t)(offset - base), offset, size);
        if (one == NULL) goto fail;
        PyList_SET_ITEM(list, i, one);
    }
    PyBuffer_Release(&buf);
    release_context(&ctx);
    return list;
fail:
    Py_XDECREF(list);
    PyBuffer_Release(&buf);
    release_context(&ctx);
    return NULL;
}

/* ---- a whole key query ---------------------------------------------------------- */

PyObject *s_file_from_offset, *s_buffer_mapping, *s_wrote_position, *s_mapped_file,
    *s_hash_slot_num, *s_index_count, *s_KEYS, *s_UNIQ_KEY, *s_space;

/* An int attribute (of a MessageExt this module made); 0, or -1 with an error set. */
static int attr_ll(PyObject *obj, PyObject *name, long long *out) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) return -1;
    *out = PyLong_AsLongLong(value);
    Py_DECREF(value);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* The buffer of a file's mapping for this call (``mapping`` as
 * MappedFile.mapping_for_buffer_call gives it: held, the buffer keeps it mapped). 1 when
 * taken, 0 when the file is retired or unmapped (None) or closed meanwhile (no error), -1
 * with an error. */
static int live_buffer(PyObject *mapping, Py_buffer *view) {
    if (mapping == Py_None) return 0;
    int taken = PyObject_GetBuffer(mapping, view, PyBUF_SIMPLE) == 0 ? 1 : -1;
    if (taken < 0 && PyErr_ExceptionMatches(PyExc_ValueError)) { /* closed meanwhile */
        PyErr_Clear();
        taken = 0;
    }
    return taken;
}

/* What the C readers read of a store file, as MappedFile.buffer_view() / IndexFile's give
 * it, from its public attributes (plain ones, kept by the files layer: no Python call per
 * file; an IndexFile's mapping is its mapped_file's buffer_mapping): ``names`` (three), the ones at ``int_at`` (a bitmask) as long longs into ``ints``
 * in order, the other into *object (a new reference). 0, or -1 with an error. */
static int buffer_view(PyObject *file, PyObject *const *names, unsigned int_at,
                       long long *ints, PyObject **object) {
    *object = NULL;
    for (Py_ssize_t k = 0; k < 3; k++) {
        PyObject *item = PyObject_GetAttr(file, names[k]);
        if (item == NULL) goto fail;
        if (!(int_at & (1u << k))) {
            *object = item;
            continue;
        }
        *ints = PyLong_AsLongLong(item);
        Py_DECREF(item);
        if (*ints == -1 && PyErr_Occurred()) goto fail;
        ints++;
    }
    return 0;
fail:
    Py_CLEAR(*object);
    return -1;
}

/* MappedFile: (file_from_offset, buffer_mapping, wrote_position); ints at 0x5. */
static int mapped_file_view(PyObject *file, long long *ints, PyObject **mapping) {
    PyObject *const names[3] = {s_file_from_offset, s_buffer_mapping, s_wrote_position};
    return buffer_view(file, names, 0x5, ints, mapping);
}

/* ``wanted`` (``want`` bytes, not empty) is one of the space-separated tokens of
 * ``text`` (``n`` bytes): 1 or 0. */
static int space_token(const char *text, Py_ssize_t n, const char *wanted, Py_ssize_t want) {
    Py_ssize_t at = 0;
    while (at <= n) {
        const char *space = memchr(text + at, ' ', (size_t)(n - at));
        Py_ssize_t end = space != NULL ? space - text : n;
        if (end - at == want && want > 0 && memcmp(text + at, wanted, (size_t)want) == 0)
            return 1;
        at = end + 1;
    }
    return 0;
}

/* ``key`` is one of the space-separated tokens of ``keys`` (props.split_keys). 1, 0, or
 * -1 with an error. */
static int has_token(PyObject *keys, PyObject *key) {
    if (PyUnicode_IS_ASCII(keys) && PyUnicode_IS_ASCII(key))
        return space_token((const char *)PyUnicode_DATA(keys), PyUnicode_GET_LENGTH(keys),
                           (const char *)PyUnicode_DATA(key), PyUnicode_GET_LENGTH(key));
    PyObject *tokens = PyUnicode_Split(keys, s_space, -1);
    if (tokens == NULL) return -1;
    int found = PySequence_Contains(tokens, key);
    Py_DECREF(tokens);
    return found;
}

enum { LOOKUP_MAX_CANDIDATES = 256 };

/* Appends the CommitLog offsets of ``index_file``'s chain for ``key_hash`` (newest entry
 * first) to ``offsets``, skipping ones already there. 1 done, 0 to leave the query to
 * Python (file gone, too many candidates), -1 with an error. */
static int chain_offsets(PyObject *index_file, long long key_hash, int64_t *offsets,
                         Py_ssize_t *n) {
    long long numbers[2]; /* hash_slot_num, index_count */
    PyObject *mapping = NULL;
    PyObject *const names[3] = {s_mapped_file, s_hash_slot_num, s_index_count};
    PyObject *mapped = NULL;
    if (buffer_view(index_file, names, 0x6, numbers, &mapped) < 0) return -1;
    mapping = PyObject_GetAttr(mapped, s_buffer_mapping);
    Py_DECREF(mapped);
    if (mapping == NULL) return -1;
    long long slots = numbers[0], count = numbers[1];
    Py_buffer file;
    int taken = live_buffer(mapping, &file);
    Py_DECREF(mapping);
    if (taken <= 0) return taken;
    int outcome = 1;
    const uint8_t *data = (const uint8_t *)file.buf;
    Py_ssize_t entries_at = 40 + (Py_ssize_t)slots * 4;
    if (slots <= 0 || key_hash < 0 || entries_at > file.len) {
        outcome = 0;
        goto done;
    }
    int64_t number = get_i32(data + 40 + (key_hash % slots) * 4);
    if (number <= 0 || number > count || count <= 1) goto done;
    for (long long seen = 0; number > 0 && number <= count && seen <= count; seen++) {
        Py_ssize_t at = entries_at + (Py_ssize_t)number * 20;
        if (at + 20 > file.len) break;
        const uint8_t *entry = data + at;
        if (get_i32(entry + 12) < 0) break;
        if (get_i32(entry) == key_hash) {
            int64_t offset = get_i64(entry + 4);
            int known = 0;
            for (Py_ssize_t k = 0; k < *n && !known; k++) known = offsets[k] == offset;
            if (!known) {
                if (*n == LOOKUP_MAX_CANDIDATES) {
                    outcome = 0;
                    goto done;
                }
                offsets[(*n)++] = offset;
            }
        }
        int64_t prev = get_i32(entry + 16);
        if (prev == number) break;
        number = prev;
    }
done:
    PyBuffer_Release(&file);
    return outcome;
}

/* The file of ``files`` (MappedFiles, oldest first, each ``file_size`` long) holding
 * ``offset``, as MappedFileQueue.find finds it, by their buffer views: 1 with its mapping
 * (a new reference) in *mapping and its start and write position, 0 when no file holds
 * it, 2 when the list has a hole there (Python's scan decides), -1 with an error. */
static int find_file(PyObject *files, long long file_size, int64_t offset, PyObject **mapping,
                     long long *from, long long *wrote) {
    Py_ssize_t count = PyList_GET_SIZE(files);
    if (count == 0 || file_size <= 0) return 0;
    long long first[2], last[2]; /* file_from_offset, wrote_position */
    PyObject *first_mapping = NULL, *last_mapping = NULL;
    if (mapped_file_view(PyList_GET_ITEM(files, 0), first, &first_mapping) < 0) return -1;
    if (count == 1) {
        last[0] = first[0];
        last[1] = first[1];
        last_mapping = Py_NewRef(first_mapping);
    } else if (mapped_file_view(PyList_GET_ITEM(files, count - 1), last, &last_mapping) < 0) {
        Py_DECREF(first_mapping);
        return -1;
    }
    int where = 1;
    Py_ssize_t index = (Py_ssize_t)(offset / file_size - first[0] / file_size);
    if (offset < first[0] || offset >= last[0] + file_size) {
        where = 0;
    } else if (index < 0 || index >= count) {
        where = 2;
    } else if (index == 0 || index == count - 1) { /* the usual case: a file already seen */
        *from = index == 0 ? first[0] : last[0];
        *wrote = index == 0 ? first[1] : last[1];
        *mapping = Py_NewRef(index == 0 ? first_mapping : last_mapping);
    } else {
        long long found[2];
        if (mapped_file_view(PyList_GET_ITEM(files, index), found, mapping) < 0) {
            where = -1;
        } else {
            *from = found[0];
            *wrote = found[1];
        }
    }
    if (where == 1 && (*from > offset || offset >= *from + file_size)) {
        Py_CLEAR(*mapping);
        where = 2;
    }
    Py_DECREF(first_mapping);
    Py_DECREF(last_mapping);
    return where;
}

/* One file of a list, held for a search: its start, readable end and mapping. */
typedef struct {
    int held;
    long long from, file_size;
    int64_t readable;
    Py_buffer view;
} HeldFile;

static void release_held(HeldFile *held) {
    if (held->held) PyBuffer_Release(&held->view);
    held->held = 0;
}

/* Point ``held`` at the file of ``files`` holding ``offset`` (kept from the last call when
 * it still holds it: a binary search's probes mostly stay in one file): 1, 0 when no file
 * holds it, 2 to leave the work to Python (a hole in the list, a closed file), -1 with an
 * error. The held buffer keeps the mapping from being closed until ``release_held``. */
static int hold_file(PyObject *files, long long file_size, int64_t offset, HeldFile *held) {
    if (held->held && offset >= held->from && offset < held->from + held->file_size) return 1;
    release_held(held);
    PyObject *mapping = NULL;
    long long from, wrote;
    int where = find_file(files, file_size, offset, &mapping, &from, &wrote);
    if (where != 1) return where;
    int live = live_buffer(mapping, &held->view);
    Py_DECREF(mapping);
    if (live <= 0) return live < 0 ? -1 : 2;
    held->held = 1;
    held->from = from;
    held->file_size = file_size;
    held->readable = wrote < (long long)held->view.len ? wrote : (int64_t)held->view.len;
    return 1;
}

/* ConsumeQueue.offset_by_time's time_at into *stamp: the store time of queue entry
 * ``offset``'s record, -1 when the unit or the record is missing or the unit invalid.
 * Returns 1, 2 to leave the search to Python, or -1 with an error set. */
static int entry_time(PyObject *queue_files, long long queue_file_size, HeldFile *queue_held,
                      PyObject *log_files, long long log_file_size, HeldFile *log_held,
                      int64_t offset, int64_t *stamp) {
    *stamp = -1;
    int where = hold_file(queue_files, queue_file_size, offset * 20, queue_held);
    if (where != 1) return where == 0 ? 1 : where;
    int64_t at = offset * 20 - queue_held->from;
    if (at + 20 > queue_held->readable) return 1;
    const uint8_t *unit = (const uint8_t *)queue_held->view.buf + at;
    int64_t commit_log_offset = get_i64(unit);
    if (commit_log_offset < 0 || get_i32(unit + 8) <= 0) return 1;
    where = hold_file(log_files, log_file_size, commit_log_offset, log_held);
    if (where != 1) return where == 0 ? 1 : where;
    at = commit_log_offset - log_held->from;
    if (at + 76 > log_held->readable) return 1; /* STORETIMESTAMP ends by 76 (IPv6 born) */
    const uint8_t *record = (const uint8_t *)log_held->view.buf + at;
    *stamp = get_i64(record + ((get_i32(record + 36) & BORN_V6) ? 68 : 56));
    return 1;
}

/*
 * time_search(queue_files, queue_file_size, lo, hi, log_files, log_file_size, timestamp,
 *             strict) -> int or None
 *
 * ConsumeQueue.offset_by_time's binary search, probe for probe: the first queue offset in
 * [lo, hi) whose entry's store time is >= ``timestamp`` (> when ``strict``), or hi. The
 * files are the queue's and the CommitLog's MappedFiles, oldest first. None leaves the
 * search to Python (a hole in a file list, a closed file).
 */
PyObject *py_time_search(PyObject *self, PyObject *args) {
    PyObject *queue_files, *log_files;
    long long queue_file_size, log_file_size, lo, hi, timestamp;
    int strict;
    if (!PyArg_ParseTuple(args, "O!LLLO!LLp", &PyList_Type, &queue_files, &queue_file_size,
                          &lo, &hi, &PyList_Type, &log_files, &log_file_size, &timestamp,
                          &strict))
        return NULL;
    if (lo < 0 || hi < lo) {
        PyErr_SetString(PyExc_ValueError, "time_search needs 0 <= lo <= hi");
        return NULL;
    }
    HeldFile queue_held = {0}, log_held = {0};
    int got = 1;
    while (lo < hi) {
        long long mid = lo + (hi - lo) / 2; /* (lo + hi) // 2 for lo, hi >= 0 */
        int64_t stamp;
        got = entry_time(queue_files, queue_file_size, &queue_held, log_files, log_file_size,
                         &log_held, mid, &stamp);
        if (got != 1) break;
        if (strict ? stamp > timestamp : stamp >= timestamp)
            hi = mid;
        else
            lo = mid + 1;
    }
    release_held(&queue_held);
    release_held(&log_held);
    if (got < 0) return NULL;
    if (got == 2) Py_RETURN_NONE;
    return PyLong_FromLongLong(lo);
}

/* The message at CommitLog ``offset`` as a MessageExt (new reference); Py_None (new
 * reference) when no file holds the offset; NULL without an error to leave the query to
 * Python (the C decoder declined it, or the file list or mapping is not as expected);
 * NULL with an error on failure. */
static PyObject *lookup_read(DecodeContext *ctx, PyObject *files, long long file_size,
                             int64_t offset) {
    HeldFile held = {0};
    int where = hold_file(files, file_size, offset, &held);
    if (where == 0) return Py_NewRef(Py_None);
    if (where != 1) return NULL;
    PyObject *result = decode_one(ctx, (const uint8_t *)held.view.buf, held.readable,
                                  (Py_ssize_t)(offset - held.from), offset, -1);
    release_held(&held);
    if (result == Py_None) Py_CLEAR(result); /* declined: Python decides */
    return result;
}

/* The KEYS or UNIQ_KEY check on a record's raw properties, before any dict is made: 1 or
 * 0, or -2 when the text is not ASCII (the dict decides then). */
static int raw_key_check(PyObject *raw, PyObject *key, int unique) {
    const uint8_t *p = (const uint8_t *)PyBytes_AS_STRING(raw);
    Py_ssize_t n = PyBytes_GET_SIZE(raw);
    if (!all_ascii(p, n)) return -2;
    if (!PyUnicode_IS_ASCII(key)) return 0; /* ASCII text holds no such key */
    const char *wanted = (const char *)PyUnicode_DATA(key);
    Py_ssize_t want = PyUnicode_GET_LENGTH(key);
    /* dispatch's walk: the value a dict of ascii_properties would hold (the last one) */
    Span found[PROP_COUNT];
    find_dispatch_properties(p, n, found);
    Span value = found[unique ? PROP_UNIQ_KEY : PROP_KEYS];
    if (value.length < 0) return 0;
    const char *text = (const char *)p + value.start;
    if (unique) return value.length == want && memcmp(text, wanted, (size_t)want) == 0;
    return space_token(text, value.length, wanted, want);
}

/* 1 when ``message`` answers the query, 0 when not, -1 with an error. */
static int lookup_matches(PyObject *message, PyObject *topic, PyObject *key, int unique,
                          long long begin_ms, long long end_ms) {
    PyObject *value = PyObject_GetAttr(message, s_ext_names[0]);
    if (value == NULL) return -1;
    int same = value == topic ||
               (PyUnicode_Check(value) && PyUnicode_Compare(value, topic) == 0);
    Py_DECREF(value);
    if (!same) return PyErr_Occurred() ? -1 : 0;
    long long stored;
    if (attr_ll(message, s_ext_names[13], &stored) < 0) return -1;
    if (stored < begin_ms || stored > end_ms) return 0;
    if (ext_layout.direct && Py_TYPE(message) == ext_layout.type) {
        PyObject *raw = slot_get(&ext_layout, message, 6); /* bytes until first read */
        if (raw != NULL && PyBytes_CheckExact(raw)) {
            int checked = raw_key_check(raw, key, unique);
            if (checked != -2) return checked;
        }
    }
    PyObject *properties = PyObject_GetAttr(message, s_ext_names[6]);
    if (properties == NULL) return -1;
    int found = 0;
    if (PyDict_Check(properties)) {
        value = PyDict_GetItemWithError(properties, unique ? s_UNIQ_KEY : s_KEYS);
        if (value != NULL && PyUnicode_Check(value)) {
            if (unique) {
                found = PyUnicode_Compare(value, key) == 0;
                if (PyErr_Occurred()) found = -1;
            } else {
                found = has_token(value, key);
            }
        } else if (PyErr_Occurred()) {
            found = -1;
        }
    }
    Py_DECREF(properties);
    return found;
}

/*
 * key_lookup(ext_type, topics, hosts, decode_properties, index_files, commitlog_files,
 *            file_size, topic, key, unique, begin_ms, end_ms, max_count)
 *   -> list of MessageExt, or None
 *
 * queries.KeyQuery._matches in one call: the chains of the index hash of "topic#key"
 * (index_key_hash) in ``index_files``
 * (IndexFile objects, newest last; walked newest first), each CommitLog offset once,
 * read from ``commitlog_files`` (the MappedFiles of the CommitLog) and kept when its
 * topic, store time and KEYS token (UNIQ_KEY with ``unique``) match, up to ``max_count``.
 * None hands the query to the Python path: a file retired or unmapped meanwhile, a record
 * the C decoder declines, more candidates than it keeps.
 */
PyObject *py_key_lookup(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    /* METH_FASTCALL, checked by hand: PyArg_ParseTuple's 13 conversions were a tenth of
     * a lookup. */
    if (nargs != 13) {
        PyErr_Format(PyExc_TypeError, "key_lookup takes 13 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *ext_type_obj = args[0], *index_files = args[4], *files = args[5];
    PyObject *topic = args[7], *key = args[8];
    if (!PyType_Check(ext_type_obj) || !PyDict_Check(args[1]) || !PyDict_Check(args[2]) ||
        !PyList_Check(index_files) || !PyList_Check(files) || !PyUnicode_Check(topic) ||
        !PyUnicode_Check(key)) {
        PyErr_SetString(PyExc_TypeError,
                        "key_lookup(type, dict, dict, decode, list, list, int, str, str, "
                        "bool, int, int, int)");
        return NULL;
    }
    long long file_size = PyLong_AsLongLong(args[6]);
    int unique = PyObject_IsTrue(args[9]);
    long long begin_ms = PyLong_AsLongLong(args[10]);
    long long end_ms = PyLong_AsLongLong(args[11]);
    Py_ssize_t max_count = PyLong_AsSsize_t(args[12]);
    if (PyErr_Occurred() || unique < 0) return NULL;
    DecodeContext ctx = {0};
    context_from(&ctx, args);
    uint32_t h = java_hash_update(0, topic);
    h = 31 * h + '#';
    long long wanted = key_hash(java_hash_update(h, key));
    int64_t offsets[LOOKUP_MAX_CANDIDATES];
    Py_ssize_t n = 0;
    PyObject *found = NULL;
    /* A copy: reading a record may run Python (non-ASCII properties), and the dispatcher
     * or retention may change the list meanwhile. */
    PyObject *indexes = PyList_GetSlice(index_files, 0, PyList_GET_SIZE(index_files));
    if (indexes == NULL) goto done;
    for (Py_ssize_t i = PyList_GET_SIZE(indexes) - 1; i >= 0; i--) {
        int walked = chain_offsets(PyList_GET_ITEM(indexes, i), wanted, offsets, &n);
        if (walked <= 0) {
            if (walked == 0) found = Py_NewRef(Py_None);
            goto done;
        }
    }
    found = PyList_New(0);
    if (found == NULL) goto done;
    for (Py_ssize_t k = 0; k < n && PyList_GET_SIZE(found) < max_count; k++) {
        PyObject *message = lookup_read(&ctx, files, file_size, offsets[k]);
        if (message == NULL) {
            if (!PyErr_Occurred()) Py_SETREF(found, Py_NewRef(Py_None));
            else Py_CLEAR(found);
            goto done;
        }
        int keep = message == Py_None
                       ? 0
                       : lookup_matches(message, topic, key, unique, begin_ms, end_ms);
        if (keep > 0 && PyList_Append(found, message) < 0) keep = -1;
        Py_DECREF(message);
        if (keep < 0) {
            Py_CLEAR(found);
            goto done;
        }
    }
done:
    Py_XDECREF(indexes);
    release_context(&ctx);
    return found;
}

/*
 * pull_messages(ext_type, topics, hosts, decode_properties, units, max_count, commit_max,
 *               memory_bytes, mem_bytes, mem_count, disk_bytes, disk_count,
 *               commitlog_files, file_size) -> (messages, index, last_offset) or None
 *
 * MessageReader._pull_all in one call: select_units' rules over the raw units, then each
 * record taken decoded from the CommitLog file (of ``commitlog_files``) holding the first
 * one; ``index`` is the first unit not taken, ``last_offset`` the last record's offset (-1
 * for none). None leaves the pull to Python: a unit of size <= 0, records in more than
 * one file, a file going away, a record the decoder declines or not of its unit's size.
 */
PyObject *py_pull_messages(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 14) {
        PyErr_Format(PyExc_TypeError, "pull_messages takes 14 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *files = args[12];
    if (!PyType_Check(args[0]) || !PyDict_Check(args[1]) || !PyDict_Check(args[2]) ||
        !PyList_Check(files)) {
        PyErr_SetString(PyExc_TypeError, "pull_messages(type, dict, dict, decode, units, ...)");
        return NULL;
    }
    BatchRules rules;
    rules_from_args(&rules, args + 5);
    long long file_size = PyLong_AsLongLong(args[13]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer units;
    if (PyObject_GetBuffer(args[4], &units, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = NULL, *list = NULL;
    HeldFile held = {0};
    DecodeContext ctx = {0};
    context_from(&ctx, args);
    Py_ssize_t taken = 0, index = 0;
    int64_t *offs = NULL;
    int32_t *lens = NULL;
    int selected = select_units_of(&units, &rules, &offs, &lens, &taken, &index);
    if (selected == -2) goto done;
    if (selected == -1) goto decline;
    list = PyList_New(taken);
    if (list == NULL) goto done;
    if (taken > 0) {
        int where = hold_file(files, file_size, offs[0], &held);
        if (where < 0) goto done;
        if (where != 1) goto decline;
        for (Py_ssize_t k = 0; k < taken; k++)
            if (offs[k] < held.from || offs[k] >= held.from + file_size) goto decline;
        for (Py_ssize_t k = 0; k < taken; k++) {
            PyObject *one = decode_one(&ctx, (const uint8_t *)held.view.buf, held.readable,
                                       (Py_ssize_t)(offs[k] - held.from), offs[k], lens[k]);
            if (one == NULL) goto done;
            if (one == Py_None) {
                Py_DECREF(one);
                goto decline;
            }
            PyList_SET_ITEM(list, k, one);
        }
    }
    result = Py_BuildValue("OnL", list, index, (long long)(taken > 0 ? offs[taken - 1] : -1));
    goto done;
decline:
    result = Py_NewRef(Py_None);
done:
    release_held(&held);
    Py_XDECREF(list);
    PyMem_Free(offs);
    PyMem_Free(lens);
    PyBuffer_Release(&units);
    release_context(&ctx);
    return result;
}

/* Whether the ``expect_size`` bytes at ``position`` of ``data`` (readable up to ``limit``)
 * are a record decode_one would decode (a v1 record of that size whose PHYSICALOFFSET is
 * ``expect_offset`` and whose length fields add up), without making anything of it. */
static int whole_record(const uint8_t *data, Py_ssize_t limit, Py_ssize_t position,
                        int64_t expect_offset, Py_ssize_t expect_size) {
    if (position < 0 || position > limit - HEADER_V4) return 0;
    const uint8_t *r = data + position;
    int32_t total = get_i32(r);
    if (get_i32(r + 4) != MAGIC_V1 || total < FIXED_OVERHEAD_V4 || total > limit - position)
        return 0;
    if (total != expect_size || get_i64(r + 28) != expect_offset) return 0;
    int32_t flag = get_i32(r + 36);
    Py_ssize_t p = 48 + ((flag & BORN_V6) ? 20 : 8) + 8 + ((flag & STORE_V6) ? 20 : 8);
    int32_t body_len = get_i32(r + p + 12);
    p += 16;
    if (body_len < 0 || p + body_len + 1 > total) return 0;
    p += body_len;
    int topic_len = (int8_t)r[p];
    p += 1;
    if (topic_len < 0 || p + topic_len + 2 > total) return 0;
    p += topic_len;
    int props_len = (int16_t)(((uint16_t)r[p] << 8) | r[p + 1]);
    return props_len >= 0 && p + 2 + props_len == total;
}

/*
 * pull_records(units, max_count, commit_max, memory_bytes, mem_bytes, mem_count,
 *              disk_bytes, disk_count, commitlog_files, file_size)
 *   -> (body, count, index, last_offset) or None
 *
 * A pull of every tag answered as RocketMQ's broker answers it, with the records' stored
 * bytes back to back (GetMessageResult's buffers), not messages: select_units' rules over
 * the raw units, each record taken checked as decode_one checks it and copied from the
 * CommitLog file (of ``commitlog_files``) holding it. ``index`` is the first unit not
 * taken, ``last_offset`` the last record's offset (-1 for none). None leaves the pull to
 * Python (MessageReader._records_python): a unit of size <= 0, a file going away or a hole
 * in the list, a record that is not whole or not of its unit's size.
 */
PyObject *py_pull_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10) {
        PyErr_Format(PyExc_TypeError, "pull_records takes 10 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *files = args[8];
    if (!PyList_Check(files)) {
        PyErr_SetString(PyExc_TypeError, "pull_records(units, ..., list, int)");
        return NULL;
    }
    BatchRules rules;
    rules_from_args(&rules, args + 1);
    long long file_size = PyLong_AsLongLong(args[9]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer units;
    if (PyObject_GetBuffer(args[0], &units, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = NULL, *body = NULL;
    HeldFile held = {0};
    Py_ssize_t taken = 0, index = 0;
    int64_t *offs = NULL;
    int32_t *lens = NULL;
    int selected = select_units_of(&units, &rules, &offs, &lens, &taken, &index);
    if (selected == -2) goto done;
    if (selected == -1) goto decline;
    Py_ssize_t total = 0;
    for (Py_ssize_t k = 0; k < taken; k++) total += lens[k];
    body = PyBytes_FromStringAndSize(NULL, total);
    if (body == NULL) goto done;
    char *out = PyBytes_AS_STRING(body);
    for (Py_ssize_t k = 0; k < taken; k++) {
        /* (a pull's records mostly lie in one file: held across them) */
        int where = hold_file(files, file_size, offs[k], &held);
        if (where < 0) goto done;
        if (where != 1) goto decline;
        const uint8_t *data = (const uint8_t *)held.view.buf;
        Py_ssize_t position = (Py_ssize_t)(offs[k] - held.from);
        if (!whole_record(data, (Py_ssize_t)held.readable, position, offs[k], lens[k]))
            goto decline;
        memcpy(out, data + position, (size_t)lens[k]);
        out += lens[k];
    }
    result = Py_BuildValue("OnnL", body, taken, index,
                           (long long)(taken > 0 ? offs[taken - 1] : -1));
    goto done;
decline:
    result = Py_NewRef(Py_None);
done:
    release_held(&held);
    Py_XDECREF(body);
    PyMem_Free(offs);
    PyMem_Free(lens);
    PyBuffer_Release(&units);
    return result;
}

/* ExtUnit's MAX_ADDRESS (format.cq_ext): a tagsCode at or below it is a consume queue
 * extension address, which says nothing of the tag. */
#define CQ_EXT_MAX_ADDRESS (-2147483648LL - 1)

/* Whether a record's properties (``n`` ASCII bytes at ``p``) hold a TAGS value equal to
 * one of ``tags`` (a tuple of bytes): the value a dict of them would hold. */
static int tags_match(const uint8_t *p, Py_ssize_t n, PyObject *tags) {
    Span found[PROP_COUNT];
    find_dispatch_properties(p, n, found);
    Span value = found[PROP_TAGS];
    if (value.length < 0) return 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(tags); k++) {
        PyObject *tag = PyTuple_GET_ITEM(tags, k);
        if (PyBytes_GET_SIZE(tag) == value.length &&
            memcmp(PyBytes_AS_STRING(tag), p + value.start, (size_t)value.length) == 0)
            return 1;
    }
    return 0;
}

/* Where a whole record's properties lie (whole_record has passed it): *at, *n. */
static void record_properties(const uint8_t *r, Py_ssize_t *at, Py_ssize_t *n) {
    int32_t flag = get_i32(r + 36);
    Py_ssize_t p = 48 + ((flag & BORN_V6) ? 20 : 8) + 8 + ((flag & STORE_V6) ? 20 : 8);
    p += 16 + get_i32(r + p + 12);
    p += 1 + (int8_t)r[p];
    *n = (int16_t)(((uint16_t)r[p] << 8) | r[p + 1]);
    *at = p + 2;
}

/*
 * pull_tagged_records(units, max_count, commit_max, memory_bytes, mem_bytes, mem_count,
 *                     disk_bytes, disk_count, commitlog_files, file_size, codes, tags)
 *   -> (body, count, index, last_offset) or None
 *
 * pull_records for a TAG subscription, MessageReader._get_filtered's loop: a unit whose
 * tagsCode (as a Java int) is none of ``codes`` (a tuple of ints) is passed over, as
 * RocketMQ's consume queue filter does (an extension address passes), and a record whose
 * TAGS is none of ``tags`` (a tuple of UTF-8 bytes) too; the batch rules count the records
 * taken. None leaves the pull to Python: a unit of size <= 0, a file going away, a record
 * that is not whole or whose properties are not ASCII.
 */
PyObject *py_pull_tagged_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 12) {
        PyErr_Format(PyExc_TypeError, "pull_tagged_records takes 12 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    PyObject *files = args[8], *codes = args[10], *tags = args[11];
    if (!PyList_Check(files) || !PyTuple_Check(codes) || !PyTuple_Check(tags)) {
        PyErr_SetString(PyExc_TypeError, "pull_tagged_records(units, ..., list, int, tuple, tuple)");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(tags); k++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(tags, k))) {
            PyErr_SetString(PyExc_TypeError, "pull_tagged_records: tags must be bytes");
            return NULL;
        }
    }
    Py_ssize_t code_count = PyTuple_GET_SIZE(codes);
    BatchRules rules;
    rules_from_args(&rules, args + 1);
    long long file_size = PyLong_AsLongLong(args[9]);
    if (PyErr_Occurred()) return NULL;
    int32_t *wanted = PyMem_Malloc((size_t)(code_count > 0 ? code_count : 1) * sizeof(int32_t));
    if (wanted == NULL) return PyErr_NoMemory();
    for (Py_ssize_t k = 0; k < code_count; k++) {
        wanted[k] = (int32_t)PyLong_AsLongLong(PyTuple_GET_ITEM(codes, k));
        if (PyErr_Occurred()) {
            PyMem_Free(wanted);
            return NULL;
        }
    }
    Py_buffer units;
    if (PyObject_GetBuffer(args[0], &units, PyBUF_SIMPLE) < 0) {
        PyMem_Free(wanted);
        return NULL;
    }
    PyObject *result = NULL, *body = NULL;
    HeldFile held = {0};
    Py_ssize_t n = units.len / 20, taken = 0, at = 0;
    int64_t *offs = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    int32_t *lens = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    if (offs == NULL || lens == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const uint8_t *p = (const uint8_t *)units.buf;
    long long total = 0;
    for (; at < n; at++) {
        const uint8_t *unit = p + at * 20;
        int64_t offset = get_i64(unit);
        int32_t size = get_i32(unit + 8);
        int64_t code = get_i64(unit + 12);
        if (total != 0 && taken != 0) {
            if (rules.max_count <= taken) break;
            int in_disk = (double)(rules.commit_max - offset) > rules.memory_bytes;
            long long limit_bytes = in_disk ? rules.disk_bytes : rules.mem_bytes;
            long long limit_count = in_disk ? rules.disk_count : rules.mem_count;
            if (total + size > limit_bytes || taken > limit_count - 1) break;
        }
        int code_ok = code <= CQ_EXT_MAX_ADDRESS;
        for (Py_ssize_t k = 0; !code_ok && k < code_count; k++)
            code_ok = (int32_t)code == wanted[k];
        if (!code_ok) continue;
        if (size <= 0) goto decline;
        int where = hold_file(files, file_size, offset, &held);
        if (where < 0) goto done;
        if (where != 1) goto decline;
        const uint8_t *data = (const uint8_t *)held.view.buf;
        Py_ssize_t position = (Py_ssize_t)(offset - held.from);
        if (!whole_record(data, (Py_ssize_t)held.readable, position, offset, size))
            goto decline;
        Py_ssize_t props_at, props_len;
        record_properties(data + position, &props_at, &props_len);
        const uint8_t *props = data + position + props_at;
        if (!all_ascii(props, props_len)) goto decline;
        if (!tags_match(props, props_len, tags)) continue;
        offs[taken] = offset;
        lens[taken] = size;
        total += size;
        taken++;
    }
    body = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (body == NULL) goto done;
    char *out = PyBytes_AS_STRING(body);
    for (Py_ssize_t k = 0; k < taken; k++) {
        int where = hold_file(files, file_size, offs[k], &held);
        if (where < 0) goto done;
        if (where != 1) goto decline;
        Py_ssize_t position = (Py_ssize_t)(offs[k] - held.from);
        if (position < 0 || position > (Py_ssize_t)held.readable - lens[k]) goto decline;
        memcpy(out, (const uint8_t *)held.view.buf + position, (size_t)lens[k]);
        out += lens[k];
    }
    result = Py_BuildValue("OnnL", body, taken, at, (long long)(taken > 0 ? offs[taken - 1] : -1));
    goto done;
decline:
    result = Py_NewRef(Py_None);
done:
    release_held(&held);
    Py_XDECREF(body);
    PyMem_Free(offs);
    PyMem_Free(lens);
    PyMem_Free(wanted);
    PyBuffer_Release(&units);
    return result;
}
