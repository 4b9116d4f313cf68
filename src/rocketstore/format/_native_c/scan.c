/*
 * rocketstore.format._native, CommitLog scans and dispatch: walk_starts, decode_chunk,
 * crc_mismatch, dispatch_facts, queue_units.
 * (native.h describes the module; one extension, one translation unit per concern.)
 */
#include "native.h"

/* ---- scans: walking and decoding a CommitLog file ---------------------------------- */

enum { STOP_BOUNDARY = 0, STOP_BLANK = 1, STOP_END_OF_DATA = 2, STOP_CORRUPT = 3 };

/*
 * walk_starts(buf, position, end, file_size, out) -> (count, stop_at, stop)
 *
 * record_scan.walk_starts: follow TOTALSIZE from ``position`` while records start before
 * ``end``, writing each start into ``out`` (int64). Stops early with STOP_BOUNDARY when
 * ``out`` is full; the caller continues from ``stop_at``.
 */
PyObject *py_walk_starts(PyObject *self, PyObject *args) {
    PyObject *buf_obj, *out_obj;
    Py_ssize_t position, end, file_size;
    if (!PyArg_ParseTuple(args, "OnnnO", &buf_obj, &position, &end, &file_size, &out_obj))
        return NULL;
    Py_buffer buf, out;
    if (get_buffers(2, buf_obj, &buf, PyBUF_SIMPLE, out_obj, &out, PyBUF_WRITABLE) < 0)
        return NULL;
    if (file_size > buf.len) file_size = buf.len;
    const uint8_t *data = (const uint8_t *)buf.buf;
    int64_t *starts = (int64_t *)out.buf;
    Py_ssize_t capacity = out.len / 8, count = 0;
    int stop = STOP_BOUNDARY;
    Py_BEGIN_ALLOW_THREADS /* the dispatcher's walk runs beside the writer */
    while (position < end) {
        if (count == capacity) break;
        if (position < 0 || position + 8 > file_size) {
            stop = STOP_CORRUPT;
            break;
        }
        int32_t total = get_i32(data + position);
        int32_t magic = get_i32(data + position + 4);
        if (magic == MAGIC_V1 || magic == MAGIC_V2) {
            if (total < FIXED_OVERHEAD_V4 || position + total > file_size) {
                stop = STOP_CORRUPT;
                break;
            }
            starts[count++] = position;
            /* Records are walked one header at a time, each on its own cache line: ask for
             * the lines a few records on (guessing they are of this one's size). */
            if (position + 8 * (Py_ssize_t)total + 8 <= file_size)
                __builtin_prefetch(data + position + 8 * (Py_ssize_t)total);
            position += total;
        } else if (magic == BLANK_MAGIC) {
            stop = STOP_BLANK;
            break;
        } else if (total == 0 && magic == 0) {
            stop = STOP_END_OF_DATA;
            break;
        } else {
            stop = STOP_CORRUPT;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    release_buffers(2, &buf, &out);
    return Py_BuildValue("nni", count, position, stop);
}

/* Rows of the int64 table that decode_chunk fills (record_scan.Records' fields). */
enum {
    F_POSITION, F_SIZE, F_QUEUE_ID, F_QUEUE_OFFSET, F_SYS_FLAG, F_STORE_TIMESTAMP,
    F_TOPIC_POSITION, F_TOPIC_LENGTH, F_PROPS_POSITION, F_PROPS_LENGTH, F_TOPIC_ID,
    F_BODY_POSITION, F_BODY_LENGTH, F_BODY_CRC, F_COUNT
};

/* The id of the topic bytes in ``ids`` (bytes -> int), interning new ones (valid UTF-8
 * only) into ``ids`` and ``names``; -1 for undecodable bytes, -2 on error. */
static long long intern_topic(PyObject *ids, PyObject *names, const uint8_t *p, Py_ssize_t n) {
    PyObject *raw = PyBytes_FromStringAndSize((const char *)p, n);
    if (raw == NULL) return -2;
    PyObject *found = PyDict_GetItemWithError(ids, raw);
    long long id;
    if (found != NULL) {
        id = PyLong_AsLongLong(found);
    } else if (PyErr_Occurred()) {
        id = -2;
    } else {
        PyObject *name = PyUnicode_DecodeUTF8((const char *)p, n, NULL);
        if (name == NULL) {
            PyErr_Clear();
            id = -1;
        } else {
            id = PyList_GET_SIZE(names);
            PyObject *id_obj = PyLong_FromLongLong(id);
            if (id_obj == NULL || PyDict_SetItem(ids, raw, id_obj) < 0 ||
                PyList_Append(names, name) < 0)
                id = -2;
            Py_XDECREF(id_obj);
            Py_DECREF(name);
        }
    }
    Py_DECREF(raw);
    return id;
}

/*
 * decode_chunk(buf, base, positions, file_size, ids, names, table, ok)
 *
 * record_scan._decode_chunk's vectorised part: for each record start in ``positions``
 * (int64), fill column i of ``table`` (int64, F_COUNT rows x len(positions)) with the
 * record's fields and set ok[i] (uint8) when it is a valid, self-located v1 record with
 * IPv4 hosts whose topic is UTF-8. Rows with ok 0 are decided by Python.
 */
PyObject *py_decode_chunk(PyObject *self, PyObject *args) {
    PyObject *buf_obj, *pos_obj, *ids, *names, *table_obj, *ok_obj;
    long long base;
    Py_ssize_t file_size;
    if (!PyArg_ParseTuple(args, "OLOnO!O!OO", &buf_obj, &base, &pos_obj, &file_size,
                          &PyDict_Type, &ids, &PyList_Type, &names, &table_obj, &ok_obj))
        return NULL;
    Py_buffer buf, pos, table, okb;
    if (get_buffers(4, buf_obj, &buf, PyBUF_SIMPLE, pos_obj, &pos, PyBUF_SIMPLE, table_obj,
                    &table, PyBUF_WRITABLE, ok_obj, &okb, PyBUF_WRITABLE) < 0)
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = pos.len / 8;
    if (table.len != n * 8 * F_COUNT || okb.len != n) {
        PyErr_SetString(PyExc_ValueError, "table or ok has the wrong size");
        goto done;
    }
    const uint8_t *data = (const uint8_t *)buf.buf;
    const int64_t *positions = (const int64_t *)pos.buf;
    int64_t *col = (int64_t *)table.buf;
    uint8_t *ok = (uint8_t *)okb.buf;
    Py_ssize_t limit = file_size < buf.len ? file_size : buf.len;
    /* Consecutive records mostly share a topic: compare with the last one first. */
    Py_ssize_t last_topic_at = -1, last_topic_len = -1;
    long long last_topic_id = -1;
    int failed = 0;
    /* Without the GIL but to intern a new topic: the dispatcher runs beside the writer. */
    PyThreadState *released = PyEval_SaveThread();
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t p = positions[i];
        /* Two-stage prefetch: the header 32 records ahead, then, 16 ahead, the topic and
         * properties length past the body, found from that header's BODYLEN (a record of
         * 1 KiB keeps them a page away from its header; unprefetched, the two misses a
         * record were most of this loop's time). */
        if (i + 32 < n && positions[i + 32] >= 0 && positions[i + 32] <= limit - HEADER_V4) {
            __builtin_prefetch(data + positions[i + 32]);
            __builtin_prefetch(data + positions[i + 32] + 64);
            __builtin_prefetch(data + positions[i + 32] + HEADER_V4 - 1);
        }
        if (i + 16 < n && positions[i + 16] >= 0 && positions[i + 16] <= limit - HEADER_V4) {
            int64_t ahead = positions[i + 16];
            int64_t tail = ahead + HEADER_V4 + (int64_t)(uint32_t)get_i32(data + ahead + 84);
            if (tail + 64 <= limit) __builtin_prefetch(data + tail);
        }
        ok[i] = 0;
        for (int f = 0; f < F_COUNT; f++) col[f * n + i] = 0;
        col[F_POSITION * n + i] = p;
        if (p < 0 || p > limit - HEADER_V4) continue;
        const uint8_t *r = data + p;
        int32_t total = get_i32(r);
        int32_t flag = get_i32(r + 36);
        int32_t body_len = get_i32(r + 84);
        col[F_SIZE * n + i] = total;
        col[F_QUEUE_ID * n + i] = get_i32(r + 12);
        col[F_QUEUE_OFFSET * n + i] = get_i64(r + 20);
        col[F_SYS_FLAG * n + i] = flag;
        col[F_STORE_TIMESTAMP * n + i] = get_i64(r + 56);
        col[F_BODY_POSITION * n + i] = p + HEADER_V4;
        col[F_BODY_LENGTH * n + i] = body_len;
        col[F_BODY_CRC * n + i] = get_i32(r + 8);
        if (get_i32(r + 4) != MAGIC_V1 || (flag & V6_FLAGS) != 0) continue;
        if (total < FIXED_OVERHEAD_V4 || p + total > file_size || p + total > buf.len) continue;
        if (body_len < 0 || body_len > total - FIXED_OVERHEAD_V4) continue;
        int64_t topic_len = (int8_t)r[HEADER_V4 + body_len];
        int64_t topic_at = p + HEADER_V4 + body_len + 1;
        if (topic_len < 0 || topic_at + topic_len + 2 > p + total) continue;
        const uint8_t *pl = data + topic_at + topic_len;
        int64_t props_len = (int16_t)(((uint16_t)pl[0] << 8) | pl[1]);
        col[F_TOPIC_POSITION * n + i] = topic_at;
        col[F_TOPIC_LENGTH * n + i] = topic_len;
        col[F_PROPS_POSITION * n + i] = topic_at + topic_len + 2;
        col[F_PROPS_LENGTH * n + i] = props_len;
        if (props_len < 0) continue;
        if (FIXED_OVERHEAD_V4 + body_len + topic_len + props_len != total) continue;
        if (get_i64(r + 28) != base + p) continue;
        int64_t record_end = p + total;
        if (file_size - record_end < END_FILE_MIN_BLANK && record_end != file_size) continue;
        long long topic_id;
        if (topic_len == last_topic_len &&
            memcmp(data + topic_at, data + last_topic_at, (size_t)topic_len) == 0) {
            topic_id = last_topic_id;
        } else {
            PyEval_RestoreThread(released);
            topic_id = intern_topic(ids, names, data + topic_at, (Py_ssize_t)topic_len);
            released = PyEval_SaveThread();
            if (topic_id == -2) {
                failed = 1;
                break;
            }
            if (topic_id >= 0) {
                last_topic_at = (Py_ssize_t)topic_at;
                last_topic_len = (Py_ssize_t)topic_len;
                last_topic_id = topic_id;
            }
        }
        col[F_TOPIC_ID * n + i] = topic_id;
        if (topic_id < 0) continue;
        ok[i] = 1;
    }
    PyEval_RestoreThread(released);
    if (!failed) result = Py_NewRef(Py_None);
done:
    release_buffers(4, &buf, &pos, &table, &okb);
    return result;
}

/*
 * crc_mismatch(buf, body_position, body_length, body_crc) -> (row, computed) or None
 *
 * The first record (int64 columns) whose body's masked CRC differs from the stored one;
 * a stored CRC of 0 or an empty body is not checked (RocketMQ #9121).
 */
PyObject *py_crc_mismatch(PyObject *self, PyObject *args) {
    PyObject *buf_obj, *pos_obj, *len_obj, *crc_obj;
    if (!PyArg_ParseTuple(args, "OOOO", &buf_obj, &pos_obj, &len_obj, &crc_obj)) return NULL;
    Py_buffer buf, pos, len, crc;
    PyObject *result = NULL;
    if (get_buffers(4, buf_obj, &buf, PyBUF_SIMPLE, pos_obj, &pos, PyBUF_SIMPLE, len_obj, &len,
                    PyBUF_SIMPLE, crc_obj, &crc, PyBUF_SIMPLE) < 0)
        return NULL;
    Py_ssize_t n = pos.len / 8;
    if (len.len != n * 8 || crc.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "columns differ in length");
        goto done;
    }
    const uint8_t *data = (const uint8_t *)buf.buf;
    const int64_t *body_at = (const int64_t *)pos.buf;
    const int64_t *body_len = (const int64_t *)len.buf;
    const int64_t *stored = (const int64_t *)crc.buf;
    Py_ssize_t bad = -1;
    uint32_t computed = 0;
    int out_of_range = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        if (stored[i] == 0 || body_len[i] <= 0) continue;
        if (body_at[i] < 0 || body_at[i] + body_len[i] > buf.len) {
            out_of_range = 1;
            break;
        }
        uint32_t actual = masked_crc(data + body_at[i], (size_t)body_len[i]);
        if ((int64_t)actual != stored[i]) {
            bad = i;
            computed = actual;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    if (out_of_range) {
        PyErr_SetString(PyExc_ValueError, "a body lies outside the buffer");
    } else if (bad < 0) {
        result = Py_NewRef(Py_None);
    } else {
        result = Py_BuildValue("nk", bad, (unsigned long)computed);
    }
done:
    release_buffers(4, &buf, &pos, &len, &crc);
    return result;
}

/* ---- dispatch facts: tagsCode and index entries ------------------------------------- */

static inline uint32_t hash_bytes(uint32_t h, const uint8_t *p, Py_ssize_t n) {
    /* h = 31 h + c four characters at a time: h 31^4 plus the four characters' terms,
     * the same value mod 2^32 with a quarter of the chain of dependent steps (one
     * character at a time, a 40-character key took ~40 ns). */
    Py_ssize_t i = 0;
    for (; i + 4 <= n; i += 4)
        h = h * 923521u + p[i] * 29791u + p[i + 1] * 961u + p[i + 2] * 31u + p[i + 3];
    for (; i < n; i++) h = 31 * h + p[i];
    return h;
}

/* For each of TAGS, UNIQ_KEY and KEYS, the value of the last segment of ``p[0:n]``
 * (properties, segments split by \x02) that starts with its name and \x01 and has a
 * non-empty value (dispatch_facts.property_value): one walk over the segments for the
 * three names. */
void find_dispatch_properties(const uint8_t *p, Py_ssize_t n, Span found[PROP_COUNT]) {
    static const char *const names[PROP_COUNT] = {"TAGS", "UNIQ_KEY", "KEYS"};
    static const Py_ssize_t lengths[PROP_COUNT] = {4, 8, 4};
    for (int k = 0; k < PROP_COUNT; k++) found[k].length = -1;
    Py_ssize_t at = 0;
    while (at <= n) {
        const uint8_t *stop = at < n ? memchr(p + at, '\x02', (size_t)(n - at)) : NULL;
        Py_ssize_t end = stop != NULL ? stop - p : n;
        for (int k = 0; k < PROP_COUNT; k++) {
            Py_ssize_t name_len = lengths[k];
            if (end - at > name_len + 1 && p[at + name_len] == '\x01' &&
                memcmp(p + at, names[k], (size_t)name_len) == 0) {
                found[k].start = at + name_len + 1;
                found[k].length = end - found[k].start;
                break; /* a segment names one property */
            }
        }
        at = end + 1;
    }
}

/* The index entries of a dispatch_facts call, written straight into the caller's
 * ENTRY_DTYPE array (little-endian int64 x 5 per row) while it has room, and counted
 * past that, so the caller can retry with the size it needs. */
typedef struct {
    uint8_t *rows;
    Py_ssize_t count, capacity;
} Entries;

static inline void store_le64(uint8_t *out, int64_t value) {
#if PY_LITTLE_ENDIAN
    memcpy(out, &value, 8);
#else
    uint64_t v = (uint64_t)value;
    for (int b = 0; b < 8; b++) out[b] = (uint8_t)(v >> (8 * b));
#endif
}

static inline void add_entry(Entries *e, int64_t hash, int64_t offset, int64_t stamp,
                             int64_t record, int64_t order) {
    if (e->count < e->capacity) {
        uint8_t *row = e->rows + e->count * 40;
        store_le64(row, hash);
        store_le64(row + 8, offset);
        store_le64(row + 16, stamp);
        store_le64(row + 24, record);
        store_le64(row + 32, order);
    }
    e->count++;
}

/*
 * dispatch_facts(buf, columns, prefixes, schedule_id, index, codes, slow, out) -> rows
 *
 * dispatch_facts.dispatch_facts for records with ASCII properties outside SCHEDULE_TOPIC:
 * ``columns`` is a sequence of int64 arrays (properties position and length, topic id,
 * sys flag, position, store timestamp); ``prefixes`` (uint64 per topic id) the Java hash of
 * "topic#". Fills codes (int64 tagsCode) and slow (uint8: 1 for records Python must do)
 * and writes the index entries into ``out`` (ENTRY_DTYPE rows, little-endian int64 x 5)
 * in (record, order) order: UNIQ_KEY first (order -1), then each KEYS token. Returns the
 * number of entries; when that is more than ``out`` holds, only the rows that fit are
 * written and the caller calls again with room for all (nothing else differs).
 */
PyObject *py_dispatch_facts(PyObject *self, PyObject *args) {
    PyObject *buf_obj, *columns, *prefixes_obj, *codes_obj, *slow_obj, *out_obj;
    long long schedule_id;
    int index;
    if (!PyArg_ParseTuple(args, "OOOLpOOO", &buf_obj, &columns, &prefixes_obj, &schedule_id,
                          &index, &codes_obj, &slow_obj, &out_obj))
        return NULL;
    enum { C_PROPS_POS, C_PROPS_LEN, C_TOPIC, C_FLAG, C_POSITION, C_STAMP, C_COUNT };
    Py_buffer views[C_COUNT + 5];
    int held = 0;
    PyObject *result = NULL;
    Entries entries = {NULL, 0, 0};
    PyObject *seq = PySequence_Fast(columns, "columns must be a sequence");
    if (seq == NULL) return NULL;
    if (PySequence_Fast_GET_SIZE(seq) != C_COUNT) {
        PyErr_SetString(PyExc_ValueError, "dispatch_facts takes six columns");
        goto done;
    }
    PyObject *objects[C_COUNT + 5];
    for (int k = 0; k < C_COUNT; k++) objects[k] = PySequence_Fast_GET_ITEM(seq, k);
    objects[C_COUNT] = buf_obj;
    objects[C_COUNT + 1] = prefixes_obj;
    objects[C_COUNT + 2] = codes_obj;
    objects[C_COUNT + 3] = slow_obj;
    objects[C_COUNT + 4] = out_obj;
    for (; held < C_COUNT + 5; held++) {
        int flags = held >= C_COUNT + 2 ? PyBUF_WRITABLE : PyBUF_SIMPLE;
        if (PyObject_GetBuffer(objects[held], &views[held], flags) < 0) goto done;
    }
    Py_ssize_t n = views[C_PROPS_POS].len / 8;
    for (int k = 0; k < C_COUNT; k++) {
        if (views[k].len != n * 8) {
            PyErr_SetString(PyExc_ValueError, "columns differ in length");
            goto done;
        }
    }
    if (views[C_COUNT + 2].len != n * 8 || views[C_COUNT + 3].len != n) {
        PyErr_SetString(PyExc_ValueError, "codes or slow has the wrong length");
        goto done;
    }
    if (views[C_COUNT + 4].len % 40 != 0) {
        PyErr_SetString(PyExc_ValueError, "out is not a whole number of 40-byte rows");
        goto done;
    }
    entries.rows = (uint8_t *)views[C_COUNT + 4].buf;
    entries.capacity = views[C_COUNT + 4].len / 40;
    const uint8_t *data = (const uint8_t *)views[C_COUNT].buf;
    Py_ssize_t data_len = views[C_COUNT].len;
    const uint64_t *prefixes = (const uint64_t *)views[C_COUNT + 1].buf;
    Py_ssize_t topic_count = views[C_COUNT + 1].len / 8;
    const int64_t *col[C_COUNT];
    for (int k = 0; k < C_COUNT; k++) col[k] = (const int64_t *)views[k].buf;
    int64_t *codes = (int64_t *)views[C_COUNT + 2].buf;
    uint8_t *slow = (uint8_t *)views[C_COUNT + 3].buf;
    Py_BEGIN_ALLOW_THREADS /* plain C over exported buffers: runs beside the writer */
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t at = col[C_PROPS_POS][i], len = col[C_PROPS_LEN][i];
        int64_t topic = col[C_TOPIC][i];
        if (i + 8 < n && col[C_PROPS_POS][i + 8] >= 0 && col[C_PROPS_POS][i + 8] < data_len)
            __builtin_prefetch(data + col[C_PROPS_POS][i + 8]); /* properties a few on */
        codes[i] = 0;
        slow[i] = 1;
        if (at < 0 || len < 0 || at + len > data_len || topic < 0 || topic >= topic_count ||
            topic == schedule_id)
            continue;
        const uint8_t *p = data + at;
        if (!all_ascii(p, len)) continue;
        slow[i] = 0;
        Span found[PROP_COUNT];
        find_dispatch_properties(p, len, found);
        if (found[PROP_TAGS].length >= 0)
            codes[i] = (int32_t)hash_bytes(0, p + found[PROP_TAGS].start, found[PROP_TAGS].length);
        if (!index || (col[C_FLAG][i] & TRANSACTION_MASK) == 0xC) continue; /* ROLLBACK */
        uint32_t prefix = (uint32_t)prefixes[topic];
        int64_t offset = col[C_POSITION][i], stamp = col[C_STAMP][i];
        if (found[PROP_UNIQ_KEY].length >= 0)
            add_entry(&entries,
                      key_hash(hash_bytes(prefix, p + found[PROP_UNIQ_KEY].start,
                                          found[PROP_UNIQ_KEY].length)),
                      offset, stamp, i, -1);
        if (found[PROP_KEYS].length >= 0) {
            int64_t order = 0;
            Py_ssize_t t = found[PROP_KEYS].start, end = t + found[PROP_KEYS].length;
            while (t < end) {
                const uint8_t *space = memchr(p + t, ' ', (size_t)(end - t));
                Py_ssize_t token_end = space != NULL ? space - p : end;
                if (token_end > t)
                    add_entry(&entries, key_hash(hash_bytes(prefix, p + t, token_end - t)),
                              offset, stamp, i, order++);
                t = token_end + 1;
            }
        }
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(entries.count);
done:
    for (int k = 0; k < held; k++) PyBuffer_Release(&views[k]);
    Py_DECREF(seq);
    return result;
}

/* ---- dispatch: consume-queue units grouped by queue -------------------------------- */

typedef struct {
    int64_t key;    /* topic id << 32 | queue id */
    Py_ssize_t count;
    Py_ssize_t filled;
    int64_t first_queue_offset, next_queue_offset;
    int consecutive;
    int64_t first_end, last_end; /* CommitLog end (offset + size) of its first and last unit */
    uint8_t *units;
    int64_t *rows;
} UnitGroup;

static int compare_groups(const void *a, const void *b) {
    int64_t x = ((const UnitGroup *)a)->key, y = ((const UnitGroup *)b)->key;
    return (x > y) - (x < y);
}

static size_t group_slot(int64_t key, size_t mask) {
    return (size_t)((uint64_t)key * 0x9E3779B97F4A7C15ull >> 17) & mask;
}

/* An open-addressing table of ``slots`` (a power of two) group numbers (-1: free) for
 * the first ``count`` groups. */
static void index_groups(Py_ssize_t *table, size_t slots, const UnitGroup *groups,
                         Py_ssize_t count) {
    for (size_t s = 0; s < slots; s++) table[s] = -1;
    for (Py_ssize_t g = 0; g < count; g++) {
        size_t h = group_slot(groups[g].key, slots - 1);
        while (table[h] >= 0) h = (h + 1) & (slots - 1);
        table[h] = g;
    }
}

/* The group of ``key`` in a table of ``index_groups``, added when missing; -1 when it
 * is full (the caller grows it). */
static Py_ssize_t group_of(int64_t key, Py_ssize_t *table, size_t mask, UnitGroup *groups,
                           Py_ssize_t *count, Py_ssize_t room) {
    size_t h = group_slot(key, mask);
    for (;;) {
        Py_ssize_t g = table[h];
        if (g < 0) {
            if (*count >= room) return -1;
            g = (*count)++;
            memset(&groups[g], 0, sizeof(UnitGroup));
            groups[g].key = key;
            groups[g].consecutive = 1;
            table[h] = g;
            return g;
        }
        if (groups[g].key == key) return g;
        h = (h + 1) & mask;
    }
}

/*
 * queue_units(topic_id, queue_id, sys_flag, commit_log_offset, size, tags_code,
 *             queue_offset) -> [(topic_id, queue_id, units, rows, first_queue_offset,
 *                                consecutive, first_end, last_end), ...]
 *
 * The consume-queue units of a run of records (int64 columns, CommitLog order), grouped
 * by queue, queues in (topic id, queue id) order: the records that get a unit (NOT and
 * COMMIT, not PREPARED or ROLLBACK) with their units encoded back to back (20 bytes:
 * offset, size, tagsCode, big-endian) and their row numbers (int64, native order);
 * ``consecutive`` says the queue offsets follow one another from the first. What
 * record_scan.queue_groups and queue_unit.encode_units do, in one pass without the GIL.
 */
PyObject *py_queue_units(PyObject *self, PyObject *args) {
    enum { COLS = 7 };
    PyObject *objs[COLS];
    if (!PyArg_ParseTuple(args, "OOOOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &objs[5], &objs[6]))
        return NULL;
    Py_buffer views[COLS];
    if (get_buffers(COLS, objs[0], &views[0], PyBUF_SIMPLE, objs[1], &views[1], PyBUF_SIMPLE,
                    objs[2], &views[2], PyBUF_SIMPLE, objs[3], &views[3], PyBUF_SIMPLE,
                    objs[4], &views[4], PyBUF_SIMPLE, objs[5], &views[5], PyBUF_SIMPLE,
                    objs[6], &views[6], PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL;
    UnitGroup *groups = NULL;
    Py_ssize_t *table = NULL;
    Py_ssize_t n = views[0].len / 8, group_count = 0;
    for (int c = 0; c < COLS; c++) {
        if (views[c].len != n * 8) {
            PyErr_SetString(PyExc_ValueError, "queue_units: columns differ in length");
            goto done;
        }
    }
    const int64_t *topic = views[0].buf, *queue = views[1].buf, *flag = views[2].buf,
                  *offset = views[3].buf, *size = views[4].buf, *tags = views[5].buf,
                  *qoff = views[6].buf;
    /* Pass 1: count each queue's units. Groups never outnumber records; the table is
     * kept at most half full and doubled when it would not be. */
    Py_ssize_t room = n > 0 ? n : 1;
    size_t slots = 64;
    groups = PyMem_Malloc((size_t)room * sizeof(UnitGroup));
    table = PyMem_Malloc(slots * sizeof(Py_ssize_t));
    if (groups == NULL || table == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    index_groups(table, slots, groups, 0);
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t kind = flag[i] & TRANSACTION_MASK;
        if (kind != 0x0 && kind != 0x8) continue; /* PREPARED and ROLLBACK get no unit */
        if ((size_t)(group_count + 1) * 2 > slots) {
            Py_ssize_t *grown = PyMem_Malloc(slots * 2 * sizeof(Py_ssize_t));
            if (grown == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            PyMem_Free(table);
            table = grown;
            slots *= 2;
            index_groups(table, slots, groups, group_count);
        }
        int64_t key = (int64_t)((uint64_t)topic[i] << 32 | (uint32_t)queue[i]);
        Py_ssize_t g = group_of(key, table, slots - 1, groups, &group_count, room);
        UnitGroup *group = &groups[g];
        if (group->count == 0) {
            group->first_queue_offset = qoff[i];
            group->first_end = offset[i] + size[i];
        } else if (qoff[i] != group->next_queue_offset) {
            group->consecutive = 0;
        }
        group->next_queue_offset = qoff[i] + 1;
        group->last_end = offset[i] + size[i];
        group->count++;
    }
    qsort(groups, (size_t)group_count, sizeof(UnitGroup), compare_groups);
    /* The results, with their buffers to fill. */
    result = PyList_New(group_count);
    if (result == NULL) goto done;
    for (Py_ssize_t g = 0; g < group_count; g++) {
        UnitGroup *group = &groups[g];
        PyObject *units = PyBytes_FromStringAndSize(NULL, group->count * 20);
        PyObject *rows = PyBytes_FromStringAndSize(NULL, group->count * 8);
        PyObject *item = NULL;
        if (units != NULL && rows != NULL) {
            group->units = (uint8_t *)PyBytes_AS_STRING(units);
            group->rows = (int64_t *)PyBytes_AS_STRING(rows);
            item = Py_BuildValue("LLOOLOLL", (long long)(group->key >> 32),
                                 (long long)(int32_t)(uint32_t)group->key, units, rows,
                                 (long long)group->first_queue_offset,
                                 group->consecutive ? Py_True : Py_False,
                                 (long long)group->first_end, (long long)group->last_end);
        }
        Py_XDECREF(units);
        Py_XDECREF(rows);
        if (item == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, g, item);
    }
    /* Pass 2: fill them. The table is rebuilt over the sorted groups. */
    index_groups(table, slots, groups, group_count);
    Py_BEGIN_ALLOW_THREADS /* plain C over exported buffers: runs beside the writer */
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t kind = flag[i] & TRANSACTION_MASK;
        if (kind != 0x0 && kind != 0x8) continue;
        int64_t key = (int64_t)((uint64_t)topic[i] << 32 | (uint32_t)queue[i]);
        Py_ssize_t g = group_of(key, table, slots - 1, groups, &group_count, group_count);
        UnitGroup *group = &groups[g];
        uint8_t *unit = group->units + group->filled * 20;
        put_i64(unit, offset[i]);
        put_i32(unit + 8, (int32_t)size[i]);
        put_i64(unit + 12, tags[i]);
        group->rows[group->filled++] = i;
    }
    Py_END_ALLOW_THREADS
done:
    PyMem_Free(groups);
    PyMem_Free(table);
    release_buffers(COLS, &views[0], &views[1], &views[2], &views[3], &views[4], &views[5],
                    &views[6]);
    return result;
}
