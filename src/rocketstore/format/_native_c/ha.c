/* A slave's receive of HA transfers, read in one call (format/ha.py's transfer_run is
 * the twin; broker/ha_slave.py uses it). */
#include "native.h"
#include <string.h>
#include <sys/socket.h>

/*
 * The transfer whose header is at ``h`` with ``avail`` bytes from it, for a CommitLog
 * ending at ``end`` (``any_offset``: an empty store, any offset follows): -1 it has not
 * all arrived, 0 it follows (``*offset``, ``*size`` its own), else transfer_run's stop
 * (1 a heartbeat below the end, 2 an offset that does not follow, 3 a bad header).
 */
static int transfer_at(const unsigned char *h, Py_ssize_t avail, long long end, int any_offset,
                       long long max_body, long long *offset, int *size) {
    if (avail < 12) return -1;
    unsigned long long u = 0;
    for (int i = 0; i < 8; i++) u = (u << 8) | h[i];
    *offset = (long long)u;
    *size = (int)(((unsigned)h[8] << 24) | ((unsigned)h[9] << 16) | ((unsigned)h[10] << 8) |
                  (unsigned)h[11]);
    if (*offset < 0 || *size < 0 || (long long)*size > max_body) return 3;
    if ((long long)(avail - 12) < (long long)*size) return -1;
    if (*size == 0 && *offset < end) return 1;
    if (!any_offset && *offset != end) return 2;
    return 0;
}

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
    for (;;) {
        long long offset;
        int size;
        int verdict = transfer_at(p + position, len - position, end, end == 0, max_body,
                                  &offset, &size);
        if (verdict < 0) break;
        if (verdict > 0) {
            stop = verdict;
            at = verdict == 3 ? 0 : offset;
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

/*
 * receive_round(sock, buf, start, filled, end, max_body, fd, position, room, budget,
 *               read_bytes, wait) -> (start, filled, end, appended, received, stop, at, error)
 *
 * A slave's receive, check of the transfer headers and write, with the GIL let go for
 * the whole round (broker/ha_receive.py's receive_piped; ha_slave.py's Python loop is
 * the twin). The transfers in ``buf[start:filled]`` and those then received into ``buf`` (at most
 * ``read_bytes`` a recv; the part of a transfer still arriving moved to the front when
 * the tail has less room) are read as transfer_run reads them, their bodies written with
 * pwritev to ``fd`` from ``position`` (the CommitLog's end, ``end``, in its file, with
 * ``room`` bytes left). The first recv waits when ``wait`` and nothing was taken yet;
 * the rest never do (MSG_DONTWAIT). Ends when: 1-3 transfer_run's stops (``at`` its
 * offset); 4 the next transfer does not fit ``room`` (or the file is full); 5 the master
 * closed; 6 nothing more has arrived (or the socket's receive timeout passed); 7
 * ``budget`` bytes written; 8 a recv failed, 9 a write failed (``error``: errno; the
 * failed write's transfers, maybe part-written, are neither counted nor taken from the
 * buffer). ``appended``: the bytes written (not yet checked or taken by the store),
 * ``received`` the bytes received. On the GIL: the recv and the
 * copy into the page cache are most of a slave's work, and each hop back to the GIL
 * from the dispatcher's Python waited longer than the work (the Python loop spent
 * 1.7 ms a MiB, 0.5 of it its own).
 */
#define RECEIVE_MAX_IOV 64
PyObject *py_receive_round(PyObject *self, PyObject *args) {
    int sock, fd, wait;
    Py_buffer view;
    Py_ssize_t start, filled, read_bytes;
    long long end, max_body, position, room, budget;
    if (!PyArg_ParseTuple(args, "iw*nnLLiLLLnp", &sock, &view, &start, &filled, &end,
                          &max_body, &fd, &position, &room, &budget, &read_bytes, &wait))
        return NULL;
    Py_ssize_t cap = view.len;
    if (start < 0 || filled < start || filled > cap || room < 0 || position < 0 ||
        read_bytes <= 0 || end < 0 || max_body < 0 || max_body + 12 > cap - read_bytes) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "receive_round: bad arguments");
        return NULL;
    }
    unsigned char *buf = (unsigned char *)view.buf;
    long long appended = 0, received = 0, at = 0;
    int stop = 0, error = 0;
    struct iovec iov[RECEIVE_MAX_IOV];
    PyThreadState *ts = PyEval_SaveThread();
    for (;;) {
        /* The whole transfers that arrived: their bodies into iov, up to the room. */
        int n_iov = 0;
        long long pending = 0;
        Py_ssize_t p = start;
        while (n_iov < RECEIVE_MAX_IOV) {
            long long offset;
            int size;
            int verdict =
                transfer_at(buf + p, filled - p, end + pending, 0, max_body, &offset, &size);
            if (verdict < 0) break;
            if (verdict > 0) {
                stop = verdict;
                at = verdict == 3 ? 0 : offset;
                break;
            }
            if (size == 0) {
                p += 12;
                continue;
            }
            if (appended + pending + size > room) {
                stop = 4;
                break;
            }
            iov[n_iov].iov_base = buf + p + 12;
            iov[n_iov].iov_len = (size_t)size;
            n_iov++;
            pending += size;
            p += 12 + size;
        }
        /* Written before anything else moves in the buffer. */
        error = pwritev_all(fd, iov, n_iov, (off_t)(position + appended));
        if (error) { /* (this write's bytes, maybe part-written, are not counted) */
            stop = 9;
            break;
        }
        appended += pending;
        end += pending;
        start = p;
        if (stop) break;
        if (n_iov == RECEIVE_MAX_IOV) continue; /* more whole transfers wait */
        if (appended >= budget) {
            stop = 7;
            break;
        }
        if (appended == room && room > 0) {
            stop = 4;
            break;
        }
        if (start == filled) {
            start = filled = 0;
        } else if (cap - filled < read_bytes) {
            memmove(buf, buf + start, (size_t)(filled - start));
            filled -= start;
            start = 0;
        }
        Py_ssize_t want = cap - filled < read_bytes ? cap - filled : read_bytes;
        int flags = (wait && appended == 0 && received == 0) ? 0 : MSG_DONTWAIT;
        ssize_t r = recv(sock, buf + filled, (size_t)want, flags);
        if (r > 0) {
            filled += r;
            received += r;
            continue;
        }
        if (r == 0) {
            stop = 5;
            break;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            stop = 6;
            break;
        }
        error = errno;
        stop = 8;
        break;
    }
    PyEval_RestoreThread(ts);
    PyBuffer_Release(&view);
    return Py_BuildValue("nnLLLiLi", start, filled, end, appended, received, stop, at, error);
}
