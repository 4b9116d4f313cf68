/*
 * rocketstore.format._native, file I/O, bound by the files layer
 * (rocketstore.files.native_io): populate_write, msync_range, write_batch.
 * (native.h describes the module; one extension, one translation unit per concern.)
 */
#include "native.h"

/* ---- page tables ahead of the writer ------------------------------------------------ */

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* The pages of [start, start + length) of the mapping in ``args`` (mapping, start,
 * length), its buffer taken with ``flags``: [*first, *last), *first page-aligned. -1 with
 * an exception set when the range lies outside the mapping (the buffer then released). */
static int mapping_pages(PyObject *args, int flags, Py_buffer *buf, uintptr_t *first,
                         uintptr_t *last) {
    PyObject *buf_obj;
    Py_ssize_t start, length;
    if (!PyArg_ParseTuple(args, "Onn", &buf_obj, &start, &length)) return -1;
    if (PyObject_GetBuffer(buf_obj, buf, flags) < 0) return -1;
    if (start < 0 || length < 0 || start + length > buf->len) {
        PyBuffer_Release(buf);
        PyErr_SetString(PyExc_ValueError, "range outside the mapping");
        return -1;
    }
    long page = sysconf(_SC_PAGESIZE);
    *first = ((uintptr_t)buf->buf + (uintptr_t)start) & ~(uintptr_t)(page - 1);
    *last = (uintptr_t)buf->buf + (uintptr_t)(start + length);
    return 0;
}

/* None, or OSError for ``error`` (an errno saved before the GIL was taken back). */
static PyObject *none_or_oserror(int error) {
    if (error == 0) Py_RETURN_NONE;
    errno = error;
    return PyErr_SetFromErrno(PyExc_OSError);
}

/*
 * populate_write(buf, start, length) -> 0 or an errno
 *
 * madvise(MADV_POPULATE_WRITE) over [start, start + length) of a shared file mapping:
 * the kernel takes the write faults now (allocating the page-cache pages of the
 * preallocated file's unwritten extents) without changing a byte, so the writer later
 * copies into pages already mapped. Runs without the GIL. EINVAL on kernels before 5.14.
 */
PyObject *py_populate_write(PyObject *self, PyObject *args) {
    Py_buffer buf;
    uintptr_t first, last;
    if (mapping_pages(args, PyBUF_WRITABLE, &buf, &first, &last) < 0) return NULL;
    int error = 0;
    if (last > first) {
        Py_BEGIN_ALLOW_THREADS
        if (madvise((void *)first, (size_t)(last - first), MADV_POPULATE_WRITE) != 0)
            error = errno;
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&buf);
    return PyLong_FromLong(error);
}

/*
 * msync_range(mapping, start, length) -> None
 *
 * msync(MS_SYNC) of [start, start + length) of a shared file mapping, without the GIL
 * (mmap.flush keeps it for the whole sync: a 256 MiB flush stopped every other thread of
 * the process for 139 ms). The buffer held for the call keeps the mapping from being
 * closed under it (mmap.close refuses).
 */
PyObject *py_msync_range(PyObject *self, PyObject *args) {
    Py_buffer buf;
    uintptr_t first, last;
    if (mapping_pages(args, PyBUF_SIMPLE, &buf, &first, &last) < 0) return NULL;
    int error = 0;
    if (last > first) {
        Py_BEGIN_ALLOW_THREADS
        if (msync((void *)first, (size_t)(last - first), MS_SYNC) != 0) error = errno;
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&buf);
    return none_or_oserror(error);
}

/* pwrite all of [data, data + length) at ``position``; 0 or an errno. */
static int pwrite_all(int fd, const uint8_t *data, size_t length, off_t position) {
    while (length > 0) {
        ssize_t n = pwrite(fd, data, length, position);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        data += n;
        length -= (size_t)n;
        position += n;
    }
    return 0;
}

/*
 * write_batch(fd, position, blob) -> None
 *
 * The write-through of a batch (MappedFile.write_batch): ``blob`` at ``position`` with
 * its first 4 bytes (the first record's TOTALSIZE) left zero, then those 4 bytes, so a
 * write cut short reads as the end of the data; then writeback of the range is started
 * (sync_file_range(SYNC_FILE_RANGE_WRITE), which waits for nothing), so the disk works
 * while the caller builds its results, before it waits in the sync.
 *
 * Keeps the GIL: a copy into the page cache is shorter than the wait to get the GIL back
 * from the dispatcher thread once let go (os.pwrite lets it go; measured: 0.19-0.25 ms
 * for a 271 KB batch, 0.10 ms kept). The blob is not changed. OSError on failure, with
 * the range possibly part-written (the caller zeroes it).
 */
PyObject *py_write_batch(PyObject *self, PyObject *args) {
    int fd;
    long long position;
    Py_buffer blob;
    if (!PyArg_ParseTuple(args, "iLy*", &fd, &position, &blob)) return NULL;
    int error = 0;
    if (position < 0) {
        PyBuffer_Release(&blob);
        PyErr_SetString(PyExc_ValueError, "negative position");
        return NULL;
    }
    const uint8_t *data = (const uint8_t *)blob.buf;
    size_t length = (size_t)blob.len;
    if (length > 4) {
        static const uint8_t zeros[4] = {0, 0, 0, 0};
        error = pwrite_all(fd, zeros, 4, (off_t)position);
        if (error == 0) error = pwrite_all(fd, data + 4, length - 4, (off_t)position + 4);
        if (error == 0) error = pwrite_all(fd, data, 4, (off_t)position);
    } else {
        error = pwrite_all(fd, data, length, (off_t)position);
    }
#ifdef SYNC_FILE_RANGE_WRITE
    /* Best effort: the sync that follows is what makes the bytes durable. */
    if (error == 0 && length > 0)
        (void)sync_file_range(fd, (off_t)position, (off_t)length, SYNC_FILE_RANGE_WRITE);
#endif
    PyBuffer_Release(&blob);
    return none_or_oserror(error);
}

/*
 * pwritev of all of iov[0..count) from ``at`` (short writes go on where they stopped,
 * at most IOV_MAX entries a call, empty ones skipped; the entries are used up), with the
 * GIL as the caller has it: 0, or the errno of a failed write (the range then possibly
 * part-written). write_parts and ha.c's receive_round write with it.
 */
int pwritev_all(int fd, struct iovec *iov, Py_ssize_t count, off_t at) {
    long iov_max = sysconf(_SC_IOV_MAX);
    if (iov_max <= 0) iov_max = 16;
    Py_ssize_t first = 0;
    while (first < count) {
        if (iov[first].iov_len == 0) {
            first++;
            continue;
        }
        int n_iov = (int)((count - first) < iov_max ? (count - first) : iov_max);
        ssize_t n = pwritev(fd, iov + first, n_iov, at);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        at += n;
        while (n > 0 && first < count) {
            if ((size_t)n >= iov[first].iov_len) {
                n -= (ssize_t)iov[first].iov_len;
                iov[first].iov_len = 0;
                first++;
            } else {
                iov[first].iov_base = (uint8_t *)iov[first].iov_base + n;
                iov[first].iov_len -= (size_t)n;
                n = 0;
            }
        }
    }
    return 0;
}

/*
 * write_parts(fd, position, parts) -> None
 *
 * pwritev of the bytes-likes in the list ``parts``, one after another from ``position``
 * (MappedFile.write_through_parts: a slave's transfers as its receive buffer holds them).
 * Lets the GIL go during the writes (the views stay exported, so the buffers cannot move;
 * a slave stops receiving into its buffer while it appends from it): a slave that is
 * behind appends several MiB at a time, and its dispatcher's Python then overlaps the
 * copy into the page cache on the other core. Side by side, alternating, 1 GiB copies
 * at load 2-8, four sets of four: replication 8-42 % faster and 8-35 % less slave CPU
 * per GiB than keeping the GIL (which was chosen when a slave appended 1 MiB reads, and
 * the wait to get the GIL back from the dispatcher, up to the 5 ms switch interval,
 * was longer than a 0.1-0.3 ms copy). OSError on failure, with the range possibly
 * part-written.
 */
PyObject *py_write_parts(PyObject *self, PyObject *args) {
    int fd;
    long long position;
    PyObject *parts;
    if (!PyArg_ParseTuple(args, "iLO!", &fd, &position, &PyList_Type, &parts)) return NULL;
    if (position < 0) {
        PyErr_SetString(PyExc_ValueError, "negative position");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(parts);
    Py_buffer *views = PyMem_Calloc((size_t)(count ? count : 1), sizeof(Py_buffer));
    struct iovec *iov = PyMem_Calloc((size_t)(count ? count : 1), sizeof(struct iovec));
    if (views == NULL || iov == NULL) {
        PyMem_Free(views);
        PyMem_Free(iov);
        return PyErr_NoMemory();
    }
    Py_ssize_t taken = 0;
    int error = 0;
    for (; taken < count; taken++) {
        if (PyObject_GetBuffer(PyList_GET_ITEM(parts, taken), &views[taken], PyBUF_SIMPLE) < 0)
            break;
        iov[taken].iov_base = views[taken].buf;
        iov[taken].iov_len = (size_t)views[taken].len;
    }
    if (taken == count) {
        PyThreadState *ts = PyEval_SaveThread();
        error = pwritev_all(fd, iov, count, (off_t)position);
        PyEval_RestoreThread(ts);
    }
    for (Py_ssize_t i = 0; i < taken; i++) PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(iov);
    if (taken < count) return NULL;
    return none_or_oserror(error);
}
