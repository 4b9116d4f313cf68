/*
 * rocketstore.format._native, the broker's batch body: batch_columns.
 * (native.h describes the module; the Python twin is
 * rocketstore.broker.processors.message_batch.batch_columns_python.)
 */
#include "native.h"

/*
 * batch_columns(data, suffix) -> (bodies: list[bytes], flags: list[int],
 *                                 texts: list[str], body_bytes: int) or None
 *
 * A SEND_BATCH_MESSAGE body (MessageDecoder.encodeMessages: per entry TOTALSIZE, MAGIC,
 * BODYCRC, FLAG, BODYLEN, body, PROPERTIESLEN, properties) as columns, without an object
 * per entry besides its body, its flag and its stored properties: each entry's own
 * properties string joined with ``suffix`` (the batch's properties) by
 * properties.join_batch_properties's rule. None: an entry is cut, its sizes disagree or
 * its properties are not UTF-8; the Python twin then raises the ProtocolError that says
 * where.
 */
PyObject *py_batch_columns(PyObject *self, PyObject *args) {
    Py_buffer data = {0};
    PyObject *suffix;
    if (!PyArg_ParseTuple(args, "y*U", &data, &suffix)) return NULL;
    Py_ssize_t suffix_len;
    const char *suffix_utf8 = PyUnicode_AsUTF8AndSize(suffix, &suffix_len);
    PyObject *result = suffix_utf8 == NULL ? NULL
        : batch_columns_of((const uint8_t *)data.buf, data.len, suffix_utf8, suffix_len);
    PyBuffer_Release(&data);
    return result;
}

/* batch_columns of the ``n`` bytes at ``p`` and the UTF-8 suffix (batch_frame's too). */
PyObject *batch_columns_of(const uint8_t *p, Py_ssize_t n, const char *suffix_utf8,
                           Py_ssize_t suffix_len) {
    PyObject *bodies = PyList_New(0), *flags = PyList_New(0), *texts = PyList_New(0);
    PyObject *result = NULL;
    char *joined = NULL;
    Py_ssize_t joined_room = 0;
    long long body_bytes = 0;
    if (bodies == NULL || flags == NULL || texts == NULL) goto done;
    Py_ssize_t position = 0;
    while (position < n) {
        if (n - position < 20) goto corrupt;
        int32_t total = get_i32(p + position);
        int32_t flag = get_i32(p + position + 12);
        int32_t body_len = get_i32(p + position + 16);
        /* (decode_batch's checks, in its order; any failing one: the twin words it) */
        if (total < 22 || total > n - position || body_len < 0) goto corrupt;
        Py_ssize_t end = position + total, body_at = position + 20;
        Py_ssize_t props_at = body_at + body_len;
        if (body_len > total || props_at + 2 > end) goto corrupt;
        int16_t props_len = (int16_t)(((uint16_t)p[props_at] << 8) | p[props_at + 1]);
        if (props_len < 0 || props_at + 2 + props_len != end) goto corrupt;
        const uint8_t *inner = p + props_at + 2;
        /* The entry's own text must be UTF-8 by itself (a separator or the suffix cannot
         * complete a sequence it cuts, but the check is the twin's: the text alone). */
        if (!all_ascii(inner, props_len)) {
            PyObject *check = PyUnicode_DecodeUTF8((const char *)inner, props_len, "strict");
            if (check == NULL) {
                PyErr_Clear();
                goto corrupt;
            }
            Py_DECREF(check);
        }
        int separate = props_len > 0 && suffix_len > 0 && inner[props_len - 1] != 0x02;
        Py_ssize_t text_len = props_len + separate + suffix_len;
        if (text_len > joined_room) {
            char *grown = PyMem_Realloc(joined, (size_t)text_len * 2);
            if (grown == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            joined = grown;
            joined_room = text_len * 2;
        }
        memcpy(joined, inner, (size_t)props_len);
        if (separate) joined[props_len] = 0x02;
        memcpy(joined + props_len + separate, suffix_utf8, (size_t)suffix_len);
        PyObject *text = PyUnicode_DecodeUTF8(joined, text_len, "strict");
        if (text == NULL) goto done;
        int failed = PyList_Append(texts, text);
        Py_DECREF(text);
        if (failed < 0) goto done;
        PyObject *body = PyBytes_FromStringAndSize((const char *)p + body_at, body_len);
        if (body == NULL) goto done;
        failed = PyList_Append(bodies, body);
        Py_DECREF(body);
        if (failed < 0) goto done;
        PyObject *flag_obj = PyLong_FromLong(flag);
        if (flag_obj == NULL) goto done;
        failed = PyList_Append(flags, flag_obj);
        Py_DECREF(flag_obj);
        if (failed < 0) goto done;
        body_bytes += body_len;
        position = end;
    }
    result = Py_BuildValue("OOOL", bodies, flags, texts, body_bytes);
    goto done;
corrupt:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(joined);
    Py_XDECREF(bodies);
    Py_XDECREF(flags);
    Py_XDECREF(texts);
    return result;
}

/* The length of ``count`` offsetMsgIds of a ``host_len``-byte host joined by ",". */
Py_ssize_t offset_msg_ids_len(Py_ssize_t host_len, Py_ssize_t count) {
    return count > 0 ? count * (2 * (host_len + 8) + 1) - 1 : 0;
}

/* Those ids at ``out`` (offset_msg_ids_len bytes): ``offsets`` are ``count`` native int64. */
void write_offset_msg_ids(char *out, const void *host, Py_ssize_t host_len, const void *offsets,
                          Py_ssize_t count) {
    static const char digits[] = "0123456789ABCDEF";
    char prefix[40];
    for (Py_ssize_t i = 0; i < host_len; i++) {
        uint8_t b = ((const uint8_t *)host)[i];
        prefix[2 * i] = digits[b >> 4];
        prefix[2 * i + 1] = digits[b & 0xF];
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        if (k > 0) *out++ = ',';
        memcpy(out, prefix, (size_t)(2 * host_len));
        out += 2 * host_len;
        int64_t offset;
        memcpy(&offset, (const char *)offsets + 8 * k, 8);
        for (int shift = 56; shift >= 0; shift -= 8) {
            uint8_t b = (uint8_t)((uint64_t)offset >> shift);
            *out++ = digits[b >> 4];
            *out++ = digits[b & 0xF];
        }
    }
}

/*
 * offset_msg_ids(store_host, offsets) -> str
 *
 * The offsetMsgIds of records stored by ``store_host`` (its 8 or 20 encoded bytes) at
 * ``offsets`` (a buffer of native int64), joined by ","; a batch send's msgId answer,
 * 64 of them a batch (Python's join took 0.8 us a message, a third of a batch send).
 */
PyObject *py_offset_msg_ids(PyObject *self, PyObject *args) {
    Py_buffer host = {0}, offsets = {0};
    PyObject *host_obj, *offsets_obj;
    if (!PyArg_ParseTuple(args, "OO", &host_obj, &offsets_obj)) return NULL;
    if (get_buffers(2, host_obj, &host, PyBUF_SIMPLE, offsets_obj, &offsets, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *text = NULL;
    if ((host.len != 8 && host.len != 20) || offsets.len % 8 != 0) {
        PyErr_SetString(PyExc_ValueError,
                        "offset_msg_ids: a host of 8 or 20 bytes and int64 offsets");
        goto done;
    }
    Py_ssize_t count = offsets.len / 8;
    text = PyUnicode_New(offset_msg_ids_len(host.len, count), 127);
    if (text == NULL) goto done;
    write_offset_msg_ids((char *)PyUnicode_1BYTE_DATA(text), host.buf, host.len, offsets.buf,
                         count);
done:
    release_buffers(2, &host, &offsets);
    return text;
}
