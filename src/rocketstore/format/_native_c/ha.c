/* A slave's receive of HA transfers, read in one call (format/ha.py's transfer_run is
 * the twin; broker/ha_slave.py uses it). */
#include "native.h"

/*
 * transfer_run(buf, end, max_body) -> (bodies, first_offset, run_end, position, stop, at)
 *
 * Walk the transfers (8-byte offset, 4-byte size, body; big-endian) of ``buf`` from 0,
 * the CommitLog ending at ``end``: each must start where the one before ended (or ``end``;
 * 0 takes any offset), heartbeats (empty bodies) too. ``bodies``: views of the data
 * transfers' bodies that follow one another, ``first_offset`` the first one's offset (-1
 * when none), ``run_end`` the CommitLog's end after them (``end`` when none), ``position``
 * where the walk stopped in ``buf``. ``stop``: 0 the next transfer has not all arrived, 1
 * a heartbeat at ``at`` below the end (a master behind this slave), 2 a transfer at
 * ``at`` that does not follow, 3 a header at ``position`` that no transfer can have
 * (negative offset, or a size outside 0..max_body). About 2 us of Python per transfer
 * before, for 32 KiB ones (32 a MiB).
 */
PyObject *py_transfer_run(PyObject *self, PyObject *args) {
    PyObject *obj;
    long long end, max_body;
    if (!PyArg_ParseTuple(args, "OLL", &obj, &end, &max_body)) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *p = (const unsigned char *)view.buf;
    Py_ssize_t len = view.len, position = 0;
    long long first = -1, at = 0;
    int stop = 0;
    PyObject *whole = NULL, *bodies = PyList_New(0);
    if (bodies == NULL) goto fail;
    whole = PyMemoryView_FromObject(obj);
    if (whole == NULL) goto fail;
    while (len - position >= 12) {
        const unsigned char *h = p + position;
        unsigned long long u = 0;
        for (int i = 0; i < 8; i++) u = (u << 8) | h[i];
        long long offset = (long long)u;
        int size = (int)(((unsigned)h[8] << 24) | ((unsigned)h[9] << 16) |
                         ((unsigned)h[10] << 8) | (unsigned)h[11]);
        if (offset < 0 || size < 0 || (long long)size > max_body) {
            stop = 3;
            break;
        }
        if ((long long)(len - position - 12) < (long long)size) break;
        if (size == 0 && offset < end) {
            stop = 1;
            at = offset;
            break;
        }
        if (end != 0 && end != offset) {
            stop = 2;
            at = offset;
            break;
        }
        Py_ssize_t body = position + 12;
        position = body + size;
        if (size == 0) continue;
        PyObject *slice, *lo = PyLong_FromSsize_t(body), *hi = PyLong_FromSsize_t(position);
        if (lo == NULL || hi == NULL) {
            Py_XDECREF(lo);
            Py_XDECREF(hi);
            goto fail;
        }
        slice = PySlice_New(lo, hi, NULL);
        Py_DECREF(lo);
        Py_DECREF(hi);
        if (slice == NULL) goto fail;
        PyObject *part = PyObject_GetItem(whole, slice);
        Py_DECREF(slice);
        if (part == NULL) goto fail;
        int failed = PyList_Append(bodies, part);
        Py_DECREF(part);
        if (failed < 0) goto fail;
        if (first < 0) first = offset;
        end = offset + size;
    }
    Py_DECREF(whole);
    PyBuffer_Release(&view);
    return Py_BuildValue("NLLniL", bodies, first, end, position, stop, at);
fail:
    Py_XDECREF(whole);
    Py_XDECREF(bodies);
    PyBuffer_Release(&view);
    return NULL;
}
