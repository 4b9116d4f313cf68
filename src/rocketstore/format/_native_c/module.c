/*
 * rocketstore.format._native, the module: shared buffer helpers, the method table,
 * interned names, init.
 * (native.h describes the module; one extension, one translation unit per concern.)
 */
#include "native.h"

/* ---- buffers ------------------------------------------------------------------------ */

/* Release ``count`` views, given as Py_buffer pointers. */
void release_buffers(int count, ...) {
    va_list args;
    va_start(args, count);
    for (int k = 0; k < count; k++) PyBuffer_Release(va_arg(args, Py_buffer *));
    va_end(args);
}

/* The buffers of several objects, all or none: ``count`` triples (object, Py_buffer *,
 * flags). On failure the views already taken are released and -1 returned. */
int get_buffers(int count, ...) {
    enum { MOST = 8 };
    Py_buffer *taken[MOST];
    va_list args;
    va_start(args, count);
    int k = 0;
    for (; k < count && k < MOST; k++) {
        PyObject *obj = va_arg(args, PyObject *);
        Py_buffer *view = va_arg(args, Py_buffer *);
        int flags = va_arg(args, int);
        if (PyObject_GetBuffer(obj, view, flags) < 0) break;
        taken[k] = view;
    }
    va_end(args);
    if (k == count) return 0;
    if (k == MOST) PyErr_SetString(PyExc_SystemError, "get_buffers: too many buffers");
    while (k-- > 0) PyBuffer_Release(taken[k]);
    return -1;
}

/* ---- module ------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"masked_crc32", py_masked_crc32, METH_O, "zlib CRC32 & 0x7FFFFFFF (0 when empty)."},
    {"crc_backend", py_crc_backend, METH_NOARGS, "'zlib' or 'table': which CRC runs."},
    {"encode_batch", py_encode_batch, METH_VARARGS, "Encode messages into one blob."},
    {"encode_columns", py_encode_columns, METH_VARARGS, "Encode put_columns rows into one blob."},
    {"append_encoded", py_append_encoded, METH_VARARGS, "Stamp and copy an encoded batch."},
    {"queue_units", py_queue_units, METH_VARARGS, "Consume-queue units grouped by queue."},
    {"msync_range", py_msync_range, METH_VARARGS, "msync(MS_SYNC) of a range, without the GIL."},
    {"write_batch", py_write_batch, METH_VARARGS, "pwrite a batch, its first size last."},
    {"transfer_run", py_transfer_run, METH_VARARGS, "A slave's receive of HA transfers."},
    {"receive_round", py_receive_round, METH_VARARGS,
     "A slave's receive and write of HA transfers, without the GIL."},
    {"write_parts", py_write_parts, METH_VARARGS, "pwritev a list of bytes-likes, GIL kept."},
    {"time_search", py_time_search, METH_VARARGS, "offset_by_time's binary search."},
    {"put_one", (PyCFunction)(void (*)(void))py_put_one, METH_FASTCALL,
     "A single put: encode, append and result."},
    {"put_results", py_put_results, METH_VARARGS, "PutResult objects of an appended batch."},
    {"walk_starts", py_walk_starts, METH_VARARGS, "Record starts by TOTALSIZE."},
    {"decode_chunk", py_decode_chunk, METH_VARARGS, "Fields of records at given starts."},
    {"crc_mismatch", py_crc_mismatch, METH_VARARGS, "First body whose CRC differs."},
    {"select_units", py_select_units, METH_VARARGS, "A pull's batch rules over queue units."},
    {"decode_messages", (PyCFunction)(void (*)(void))py_decode_messages, METH_FASTCALL,
     "Records of one file as MessageExt."},
    {"java_hash", py_java_hash, METH_O, "Java's String.hashCode of a str."},
    {"dispatch_facts", py_dispatch_facts, METH_VARARGS, "tagsCodes and index entries."},
    {"populate_write", py_populate_write, METH_VARARGS, "Write-fault pages in, unchanged."},
    {"index_put", py_index_put, METH_VARARGS, "IndexFile.putKey for a run of entries."},
    {"index_chain", py_index_chain, METH_VARARGS, "IndexFile.candidates: one slot's chain."},
    {"pull_messages", (PyCFunction)(void (*)(void))py_pull_messages, METH_FASTCALL,
     "A pull of every tag: batch rules and decodes."},
    {"pull_records", (PyCFunction)(void (*)(void))py_pull_records, METH_FASTCALL,
     "A pull of every tag: batch rules and the records' bytes."},
    {"pull_tagged_records", (PyCFunction)(void (*)(void))py_pull_tagged_records, METH_FASTCALL,
     "A pull of some tags: unit and TAGS filters, batch rules, the records' bytes."},
    {"key_lookup", (PyCFunction)(void (*)(void))py_key_lookup, METH_FASTCALL,
     "A key query: index chains, reads, checks."},
    {"chain_private", py_chain_private, METH_VARARGS, "RunChainer's chaining of a chunk."},
    {"batch_columns", py_batch_columns, METH_VARARGS,
     "A SEND_BATCH_MESSAGE body as columns (bodies, flags, stored properties)."},
    {"offset_msg_ids", py_offset_msg_ids, METH_VARARGS, "offsetMsgIds joined by ','."},
    {"send_frame", py_send_frame, METH_VARARGS, "A common SEND_MESSAGE(_V2) frame's put."},
    {"send_answer", py_send_answer, METH_VARARGS, "A stored send's answer frame."},
    {"batch_frame", py_batch_frame, METH_VARARGS, "A common SEND_BATCH_MESSAGE frame's put."},
    {"batch_answer", py_batch_answer, METH_VARARGS, "A stored batch's answer frame."},
    {"pull_frame", py_pull_frame, METH_VARARGS, "A PULL_MESSAGE frame's header fields."},
    {"pull_answer", py_pull_answer, METH_VARARGS, "A pull's answer frame."},
    {"set_verbatim_type", py_set_verbatim_type, METH_O,
     "The properties type whose text put encoding writes as it is."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native", "Hot loops of rocketstore's codecs, in C.", -1, methods,
};

#define INTERN(var, text)                                                                  \
    do {                                                                                   \
        var = PyUnicode_InternFromString(text);                                            \
        if (var == NULL) return NULL;                                                      \
    } while (0)

PyMODINIT_FUNC PyInit__native(void) {
    crc_init();
    INTERN(s_topic, "topic");
    INTERN(s_file_from_offset, "file_from_offset");
    INTERN(s_buffer_mapping, "buffer_mapping");
    INTERN(s_wrote_position, "wrote_position");
    INTERN(s_mapped_file, "mapped_file");
    INTERN(s_hash_slot_num, "hash_slot_num");
    INTERN(s_index_count, "index_count");
    INTERN(s_KEYS, "KEYS");
    INTERN(s_UNIQ_KEY, "UNIQ_KEY");
    INTERN(s_space, " ");
    INTERN(s_body, "body");
    INTERN(s_queue_id, "queue_id");
    INTERN(s_flag, "flag");
    INTERN(s_sys_flag, "sys_flag");
    INTERN(s_properties, "properties");
    INTERN(s_born_timestamp, "born_timestamp");
    INTERN(s_born_host, "born_host");
    INTERN(s_reconsume_times, "reconsume_times");
    INTERN(s_prepared_offset, "prepared_transaction_offset");
    INTERN(s_delay, "DELAY");
    INTERN(s_text, "text");
    INTERN(s_status, "status");
    INTERN(s_commit_log_offset, "commit_log_offset");
    INTERN(s_queue_offset, "queue_offset");
    INTERN(s_msg_id, "msg_id");
    INTERN(s_store_timestamp, "store_timestamp");
    INTERN(s_size, "size");
    INTERN(s_reason, "reason");
    INTERN(s_ok, "ok");
    INTERN(s_empty, "");
    for (int k = 0; k < 18; k++) INTERN(s_ext_names[k], ext_names[k]);
    s_magic_v1 = PyLong_FromLong(MAGIC_V1);
    if (s_magic_v1 == NULL) return NULL;
    if (PyType_Ready(&LazyPropertiesType) < 0 || PyType_Ready(&LazyMsgIdType) < 0) return NULL;
    PyObject *mod = PyModule_Create(&module);
    if (mod == NULL) return NULL;
    if (PyModule_AddObjectRef(mod, "LazyProperties", (PyObject *)&LazyPropertiesType) < 0 ||
        PyModule_AddObjectRef(mod, "LazyMsgId", (PyObject *)&LazyMsgIdType) < 0) {
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
