/*
 * rocketstore.format._native, index files and key hashes: java_hash, index_put,
 * index_chain, chain_private.
 * (native.h describes the module; one extension, one translation unit per concern.)
 */
#include "native.h"

/* ---- Java's String.hashCode -------------------------------------------------------- */

/* java_hash(text) -> int: over the UTF-16 code units Java sees (astral characters as
 * surrogate pairs, lone surrogates as themselves), as a signed 32-bit int. */
/* String.hashCode's h = 31 * h + unit over ``text``'s UTF-16 units, from ``h``. */
uint32_t java_hash_update(uint32_t h, PyObject *text) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c > 0xFFFF) {
            c -= 0x10000;
            h = 31 * h + (0xD800 + (c >> 10));
            h = 31 * h + (0xDC00 + (c & 0x3FF));
        } else {
            h = 31 * h + c;
        }
    }
    return h;
}

PyObject *py_java_hash(PyObject *self, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "java_hash takes a str");
        return NULL;
    }
    return PyLong_FromLong((int32_t)java_hash_update(0, text));
}

/* ---- index file: putKey in a loop ---------------------------------------------------- */

/*
 * index_put(file, hash_slot_num, first_number, key_hashes, phy_offsets, time_diffs)
 *   -> slots newly taken
 *
 * IndexFile.putKey for each entry in order, on the bytes of a mapped index file: entry
 * ``first_number + k`` goes to its place after the slot table (key hash, offset, time
 * diff, then the previous head of its slot when that is an entry number below its own,
 * else 0), and becomes its slot's head. Counts the slots that had no valid head (the
 * header's hashSlotCount grows by that). Runs without the GIL.
 */
PyObject *py_index_put(PyObject *self, PyObject *args) {
    PyObject *file_obj, *hash_obj, *offset_obj, *diff_obj;
    Py_ssize_t slots, first_number;
    if (!PyArg_ParseTuple(args, "OnnOOO", &file_obj, &slots, &first_number, &hash_obj,
                          &offset_obj, &diff_obj))
        return NULL;
    Py_buffer file, hashes, offsets, diffs;
    PyObject *result = NULL;
    if (get_buffers(4, file_obj, &file, PyBUF_WRITABLE, hash_obj, &hashes, PyBUF_SIMPLE,
                    offset_obj, &offsets, PyBUF_SIMPLE, diff_obj, &diffs, PyBUF_SIMPLE) < 0)
        return NULL;
    Py_ssize_t n = hashes.len / 8;
    Py_ssize_t table_at = 40, entries_at = 40 + slots * 4;
    if (offsets.len != n * 8 || diffs.len != n * 8 || slots <= 0 || first_number < 0 ||
        entries_at + (first_number + n) * 20 > file.len) {
        PyErr_SetString(PyExc_ValueError, "entries do not fit the index file");
        goto done;
    }
    uint8_t *data = (uint8_t *)file.buf;
    const int64_t *key = (const int64_t *)hashes.buf;
    const int64_t *offset = (const int64_t *)offsets.buf;
    const int64_t *diff = (const int64_t *)diffs.buf;
    Py_ssize_t taken = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < n; k++) {
        int64_t number = first_number + k;
        int64_t slot = key[k] % slots;
        if (slot < 0) slot += slots;
        uint8_t *head = data + table_at + slot * 4;
        int64_t prev = get_i32(head);
        if (prev <= 0 || prev >= number) {
            prev = 0;
            taken++;
        }
        uint8_t *entry = data + entries_at + number * 20;
        put_i32(entry, (int32_t)key[k]);
        put_i64(entry + 4, offset[k]);
        put_i32(entry + 12, (int32_t)diff[k]);
        put_i32(entry + 16, (int32_t)prev);
        put_i32(head, (int32_t)number);
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(taken);
done:
    release_buffers(4, &file, &hashes, &offsets, &diffs);
    return result;
}

/*
 * index_chain(file, hash_slot_num, index_count, key_hash) -> [(phy_offset, time_diff)]
 *
 * IndexFile.candidates' walk (RocketMQ's selectPhyOffset without its time filter): from
 * the key's slot head along the entries' previous links, newest first, the entries whose
 * hash is ``key_hash``. Stops at a link outside [1, index_count], a negative time diff,
 * an entry linking to itself, or after index_count + 1 entries (a looping chain).
 */
PyObject *py_index_chain(PyObject *self, PyObject *args) {
    PyObject *file_obj;
    Py_ssize_t slots, count;
    long long key_hash;
    if (!PyArg_ParseTuple(args, "OnnL", &file_obj, &slots, &count, &key_hash)) return NULL;
    Py_buffer file;
    if (PyObject_GetBuffer(file_obj, &file, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *found = NULL;
    Py_ssize_t entries_at = 40 + slots * 4;
    if (slots <= 0 || key_hash < 0 || entries_at > file.len) {
        PyErr_SetString(PyExc_ValueError, "index_chain: bad geometry or key hash");
        goto done;
    }
    found = PyList_New(0);
    if (found == NULL) goto done;
    const uint8_t *data = (const uint8_t *)file.buf;
    int64_t number = get_i32(data + 40 + (key_hash % slots) * 4);
    if (number <= 0 || number > count || count <= 1) goto done;
    for (Py_ssize_t seen = 0; number > 0 && number <= count && seen <= count; seen++) {
        Py_ssize_t at = entries_at + (Py_ssize_t)number * 20;
        if (at + 20 > file.len) break;
        const uint8_t *entry = data + at;
        int32_t time_diff = get_i32(entry + 12);
        if (time_diff < 0) break;
        if (get_i32(entry) == key_hash) {
            PyObject *hit = Py_BuildValue("(Li)", (long long)get_i64(entry + 4), time_diff);
            if (hit == NULL || PyList_Append(found, hit) < 0) {
                Py_XDECREF(hit);
                Py_CLEAR(found);
                goto done;
            }
            Py_DECREF(hit);
        }
        int64_t prev = get_i32(entry + 16);
        if (prev == number) break;
        number = prev;
    }
done:
    PyBuffer_Release(&file);
    return found;
}

/*
 * chain_private(newest, oldest, first_number, key_hashes, phy_offsets, time_diffs, out)
 *
 * index.RunChainer's chaining of a chunk against its private slot table: entry
 * ``first_number + k`` links to ``newest[slot]`` (0 when the run has none there yet, and
 * then it is the slot's ``oldest``), and becomes ``newest[slot]``. ``newest`` and
 * ``oldest`` are int32 per slot; ``out`` receives the entries as the file holds them
 * (20 big-endian bytes each). Runs without the GIL.
 */
PyObject *py_chain_private(PyObject *self, PyObject *args) {
    PyObject *objects[6];
    Py_ssize_t first_number;
    if (!PyArg_ParseTuple(args, "OOnOOOO", &objects[0], &objects[1], &first_number,
                          &objects[2], &objects[3], &objects[4], &objects[5]))
        return NULL;
    Py_buffer views[6];
    int held = 0;
    PyObject *result = NULL;
    for (; held < 6; held++) {
        int writable = held < 2 || held == 5;
        if (PyObject_GetBuffer(objects[held], &views[held],
                               writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
            goto done;
    }
    Py_ssize_t slots = views[0].len / 4, n = views[2].len / 8;
    if (views[1].len != views[0].len || views[3].len != n * 8 || views[4].len != n * 8 ||
        views[5].len != n * 20 || slots <= 0) {
        PyErr_SetString(PyExc_ValueError, "chain_private: arrays disagree in size");
        goto done;
    }
    int32_t *newest = (int32_t *)views[0].buf, *oldest = (int32_t *)views[1].buf;
    const int64_t *key = (const int64_t *)views[2].buf;
    const int64_t *offset = (const int64_t *)views[3].buf;
    const int64_t *diff = (const int64_t *)views[4].buf;
    uint8_t *out = (uint8_t *)views[5].buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < n; k++) {
        int32_t number = (int32_t)(first_number + k);
        int64_t slot = key[k] % slots;
        if (slot < 0) slot += slots;
        int32_t prev = newest[slot];
        if (prev == 0) oldest[slot] = number;
        uint8_t *entry = out + k * 20;
        put_i32(entry, (int32_t)key[k]);
        put_i64(entry + 4, offset[k]);
        put_i32(entry + 12, (int32_t)diff[k]);
        put_i32(entry + 16, prev);
        newest[slot] = number;
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    for (int k = 0; k < held; k++) PyBuffer_Release(&views[k]);
    return result;
}
