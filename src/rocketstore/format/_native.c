/*
 * rocketstore.format._native: the per-record loops of the hot paths, in C.
 *
 * Layer: format (pure codecs over buffers; no files, no clock, no threads). Every
 * function here has a Python twin in rocketstore.format or rocketstore.commitlog that
 * defines its meaning; this module only runs the common case faster. Where a record or a
 * message is anything but common (an IPv6 host, a v2 magic, a DELAY property, a value
 * out of range, a corrupt byte) the function hands the case back to Python (returns None
 * or stops where it is), so the exact checks and error messages stay in one place.
 *
 * Byte layout (big-endian, IPv4 hosts), as in rocketstore/format/record.py:
 *   0 TOTALSIZE  4 MAGIC  8 BODYCRC  12 QUEUEID  16 FLAG  20 QUEUEOFFSET  28 PHYSICALOFFSET
 *   36 SYSFLAG  40 BORNTIMESTAMP  48 BORNHOST  56 STORETIMESTAMP  64 STOREHOST
 *   72 RECONSUMETIMES  76 PREPAREDOFFSET  84 BODYLEN  88 BODY, TOPICLEN, TOPIC, PROPLEN, PROPS
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE /* sync_file_range */
#include <Python.h>
#include <structmember.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_CLMUL_CRC 1
static int cpu_has_clmul = 0; /* set once at import, from the CPU's feature flags */
#endif

#define MAGIC_V1 ((int32_t)0xDAA320A7)
#define MAGIC_V2 ((int32_t)0xDAA320AB)
#define BLANK_MAGIC ((int32_t)0xCBD43194)
#define FIXED_OVERHEAD_V4 91
#define HEADER_V4 88
#define END_FILE_MIN_BLANK 8
#define MAX_PROPERTIES 32767
#define V6_FLAGS 0x30
#define BORN_V6 0x10
#define STORE_V6 0x20
#define TRANSACTION_MASK 0xC
#define CRC_MASK 0x7FFFFFFFu

/* ---- big-endian fields ------------------------------------------------------------ */

static inline int32_t get_i32(const uint8_t *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
                     (uint32_t)p[3]);
}

static inline int64_t get_i64(const uint8_t *p) {
    return (int64_t)(((uint64_t)(uint32_t)get_i32(p) << 32) | (uint32_t)get_i32(p + 4));
}

static inline void put_i32(uint8_t *p, int32_t v) {
    uint32_t u = (uint32_t)v;
    p[0] = (uint8_t)(u >> 24);
    p[1] = (uint8_t)(u >> 16);
    p[2] = (uint8_t)(u >> 8);
    p[3] = (uint8_t)u;
}

static inline void put_i64(uint8_t *p, int64_t v) {
    put_i32(p, (int32_t)((uint64_t)v >> 32));
    put_i32(p + 4, (int32_t)(uint64_t)v);
}

/* ---- buffers ------------------------------------------------------------------------ */

/* Release ``count`` views, given as Py_buffer pointers. */
static void release_buffers(int count, ...) {
    va_list args;
    va_start(args, count);
    for (int k = 0; k < count; k++) PyBuffer_Release(va_arg(args, Py_buffer *));
    va_end(args);
}

/* The buffers of several objects, all or none: ``count`` triples (object, Py_buffer *,
 * flags). On failure the views already taken are released and -1 returned. */
static int get_buffers(int count, ...) {
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

/* ---- CRC32 -------------------------------------------------------------------------- */
/* zlib's crc32 (the one zlib.crc32 runs) is looked up in the already loaded libz, so
 * building needs no zlib headers; a table-driven CRC is the fallback. */

typedef unsigned long (*zlib_crc32_fn)(unsigned long, const unsigned char *, unsigned int);
static zlib_crc32_fn zlib_crc32 = NULL;
static uint32_t crc_table[8][256];

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = crc_table[0][n];
        for (int t = 1; t < 8; t++) {
            c = crc_table[0][c & 0xFF] ^ (c >> 8);
            crc_table[t][n] = c;
        }
    }
#ifdef HAVE_CLMUL_CRC
    __builtin_cpu_init();
    cpu_has_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    if (getenv("ROCKETSTORE_NO_CLMUL") != NULL || getenv("ROCKETSTORE_CRC_TABLE") != NULL)
        cpu_has_clmul = 0; /* tests: the other CRC paths */
#endif
    const char *names[] = {"libz.so.1", "libz.so", NULL};
    if (getenv("ROCKETSTORE_CRC_TABLE") != NULL) return; /* tests: the fallback alone */
    for (int i = 0; names[i] != NULL && zlib_crc32 == NULL; i++) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib != NULL) zlib_crc32 = (zlib_crc32_fn)dlsym(lib, "crc32");
    }
}

static uint32_t crc32_table(uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    while (n >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                             ((uint32_t)p[3] << 24));
        crc = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^
              crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
              crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) crc = crc_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

#ifdef HAVE_CLMUL_CRC

/*
 * CRC-32 (zlib's, bit-reflected polynomial 0xEDB88320) of ``n`` bytes, ``n`` >= 64 and a
 * multiple of 16, by folding with carry-less multiplication (Intel, "Fast CRC Computation
 * for Generic Polynomials Using PCLMULQDQ Instruction", 2009): four 128-bit lanes folded
 * 64 bytes at a time, then into one lane, then reduced to 64 and to 32 bits (Barrett).
 * ``state`` and the result are the CRC register (the inverse of zlib's crc value). The
 * fold constants are x^(k) mod P for the distances the paper gives, bit-reflected: k1 =
 * x^(4*128+32), k2 = x^(4*128-32), k3 = x^(128+32), k4 = x^(128-32), k5 = x^64 mod P; and
 * for the reduction P' (the polynomial) and mu = floor(x^64 / P).
 */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc32_clmul(uint32_t state,
                                                                      const uint8_t *p,
                                                                      size_t n) {
    const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL);
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
    const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124LL);
    const __m128i poly_mu = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
    const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 0x00));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 0x10));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 0x20));
    __m128i x4 = _mm_loadu_si128((const __m128i *)(p + 0x30));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)state));
    p += 64;
    n -= 64;
    while (n >= 64) {
        __m128i t1 = _mm_clmulepi64_si128(x1, k1k2, 0x00);
        __m128i t2 = _mm_clmulepi64_si128(x2, k1k2, 0x00);
        __m128i t3 = _mm_clmulepi64_si128(x3, k1k2, 0x00);
        __m128i t4 = _mm_clmulepi64_si128(x4, k1k2, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k1k2, 0x11);
        x2 = _mm_clmulepi64_si128(x2, k1k2, 0x11);
        x3 = _mm_clmulepi64_si128(x3, k1k2, 0x11);
        x4 = _mm_clmulepi64_si128(x4, k1k2, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, t1), _mm_loadu_si128((const __m128i *)(p + 0x00)));
        x2 = _mm_xor_si128(_mm_xor_si128(x2, t2), _mm_loadu_si128((const __m128i *)(p + 0x10)));
        x3 = _mm_xor_si128(_mm_xor_si128(x3, t3), _mm_loadu_si128((const __m128i *)(p + 0x20)));
        x4 = _mm_xor_si128(_mm_xor_si128(x4, t4), _mm_loadu_si128((const __m128i *)(p + 0x30)));
        p += 64;
        n -= 64;
    }
    /* Four lanes into one, then the remaining 16-byte blocks. */
    __m128i lanes[3] = {x2, x3, x4};
    for (int i = 0; i < 3; i++) {
        __m128i t = _mm_clmulepi64_si128(x1, k3k4, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, t), lanes[i]);
    }
    while (n >= 16) {
        __m128i t = _mm_clmulepi64_si128(x1, k3k4, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, t), _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    /* 128 bits to 64, then to 32 (Barrett). */
    __m128i t = _mm_clmulepi64_si128(x1, k3k4, 0x10);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t);
    t = _mm_srli_si128(x1, 4);
    x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), k5, 0x00);
    x1 = _mm_xor_si128(x1, t);
    t = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), poly_mu, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), poly_mu, 0x00);
    x1 = _mm_xor_si128(x1, t);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}
#endif

/* zlib's crc32 of p[0:n] continuing from ``crc`` (a zlib crc value, 0 to start). */
static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n) {
    if (zlib_crc32 != NULL) {
        while (n > 0) {
            unsigned int step = n > 0x40000000u ? 0x40000000u : (unsigned int)n;
            crc = (uint32_t)zlib_crc32(crc, p, step);
            p += step;
            n -= step;
        }
        return crc;
    }
    return crc32_table(crc, p, n);
}

/* RocketMQ's body CRC: zlib CRC32 & 0x7FFFFFFF, 0 for an empty body. */
static uint32_t masked_crc(const uint8_t *p, size_t n) {
    if (n == 0) return 0;
    uint32_t crc = 0;
#ifdef HAVE_CLMUL_CRC
    if (cpu_has_clmul && n >= 64) {
        size_t whole = n & ~(size_t)15;
        crc = ~crc32_clmul(~crc, p, whole);
        return crc32_update(crc, p + whole, n - whole) & CRC_MASK;
    }
#endif
    if (zlib_crc32 != NULL) {
        while (n > 0) {
            unsigned int step = n > 0x40000000u ? 0x40000000u : (unsigned int)n;
            crc = (uint32_t)zlib_crc32(crc, p, step);
            p += step;
            n -= step;
        }
    } else {
        crc = crc32_table(0, p, n);
    }
    return crc & CRC_MASK;
}

static PyObject *py_masked_crc32(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    uint32_t crc;
    Py_BEGIN_ALLOW_THREADS
    crc = masked_crc((const uint8_t *)view.buf, (size_t)view.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

static PyObject *py_crc_backend(PyObject *self, PyObject *unused) {
#ifdef HAVE_CLMUL_CRC
    if (cpu_has_clmul)
        return PyUnicode_FromString(zlib_crc32 != NULL ? "clmul+zlib" : "clmul+table");
#endif
    return PyUnicode_FromString(zlib_crc32 != NULL ? "zlib" : "table");
}

/* ---- helpers ------------------------------------------------------------------------ */

/*
 * Where a slots class keeps each named attribute. Resolved once per type, it lets the hot
 * loops read and set fields at their offsets, as the slot's member descriptor would,
 * instead of a descriptor lookup per field (18 of them per MessageExt). ``direct`` is 0
 * when some name is not a plain object slot of the type (a property, a subclass's
 * override, no slots at all): callers then take the generic attribute path.
 */
#define MAX_LAYOUT 18
typedef struct {
    PyTypeObject *type; /* strong reference, so the address cannot be reused */
    int direct;
    Py_ssize_t offsets[MAX_LAYOUT];
} SlotLayout;

/* The descriptors of MessageExt.properties and MessageExt.msg_id (see LazyProperties and
 * LazyMsgId below): one struct, two types. */
typedef struct {
    PyObject_HEAD
    PyTypeObject *owner; /* the class whose slot it is */
    Py_ssize_t offset;
    PyObject *name;
    PyObject *decode;         /* LazyProperties: bytes -> dict for text that is not ASCII */
    Py_ssize_t source_offset; /* LazyMsgId: the commit_log_offset slot of the same class */
} LazySlotObject;

static PyTypeObject LazyPropertiesType, LazyMsgIdType;

static inline int is_lazy_slot(PyObject *descr) {
    return descr != NULL &&
           (Py_IS_TYPE(descr, &LazyPropertiesType) || Py_IS_TYPE(descr, &LazyMsgIdType));
}

static void resolve_layout(SlotLayout *layout, PyTypeObject *type, PyObject *const *names,
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

/* The field's object in its slot (borrowed; NULL when unset). Only with ``direct``. */
static inline PyObject *slot_get(const SlotLayout *layout, PyObject *obj, int k) {
    return *(PyObject **)((char *)obj + layout->offsets[k]);
}

/* Sets the fields of a new object; 0, or -1 with an error. */
static int set_fields(const SlotLayout *layout, PyObject *obj, PyObject *const *names,
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

static PyObject *s_topic, *s_body, *s_queue_id, *s_flag, *s_sys_flag, *s_properties,
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

static SlotLayout message_layout, result_layout, ext_layout;

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

static PyObject *py_set_verbatim_type(PyObject *self, PyObject *type) {
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

static PyObject *py_encode_batch(PyObject *self, PyObject *args) {
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

/* Next queue offsets per "topic-queueId" while records are stamped: the first few keys
 * of a batch kept in C (a batch mostly goes to a few queues), further ones in the
 * ``pending`` dict; ``table`` (CommitLog.topic_queue_table) is read for a key's first
 * offset and updated by commit_queue_offsets. Keys are borrowed: the caller keeps them
 * alive until then. */
enum { LOCAL_KEYS = 64 };
typedef struct {
    PyObject *table, *pending;
    PyObject *keys[LOCAL_KEYS];
    int64_t next[LOCAL_KEYS];
    int count;
} QueueCounter;

/* ``key``'s queue offset for the next record (and one more for the one after): 0 on
 * success, -1 with an exception. */
static int next_queue_offset(QueueCounter *c, PyObject *key, int64_t *offset) {
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
 *                chunk_body, chunk_records, start, out, position, room, stamp)
 *   -> (length, meta, keys, body_bytes, end), None or False
 *
 * The rows of a put_columns call encoded as encode_batch encodes the Messages
 * put_columns.Columns.message makes of them (flag, sys flag, reconsume times and prepared
 * offset 0), without those Messages. ``bodies`` is a list of bytes; ``queue_ids`` an int
 * (every row) or a list; ``names`` a tuple of property names Python has checked (legal,
 * not DELAY, no two alike) and ``columns`` their values, each a str (every row) or a
 * list of str or None (left out); ``rows`` None or a list of each row's own properties
 * (a dict or None), written first. One call encodes one batch, the rows from ``start`` to
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
static PyObject *py_encode_columns(PyObject *self, PyObject *args) {
    PyObject *topic, *topic_bytes, *bodies, *queue_ids, *names, *columns, *rows, *born_host,
        *store_host, *queue_keys, *blob, *stamp;
    long long born, max_body, max_record, file_size, chunk_body, chunk_records;
    Py_ssize_t start, position, room;
    if (!PyArg_ParseTuple(args, "USO!OO!O!OSSLO!LLLLLnOnnO", &topic, &topic_bytes,
                          &PyList_Type, &bodies, &queue_ids, &PyTuple_Type, &names,
                          &PyTuple_Type, &columns, &rows, &born_host, &store_host, &born,
                          &PyDict_Type, &queue_keys, &max_body, &max_record, &file_size,
                          &chunk_body, &chunk_records, &start, &blob, &position, &room, &stamp))
        return NULL;
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
        (store_len != 8 && store_len != 20) || start < 0 || start >= count) {
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
    int32_t sys_flag = (born_len == 20 ? BORN_V6 : 0) | (store_len == 20 ? STORE_V6 : 0);
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
        Py_ssize_t props_len = all > 0 ? all - 1 : 0;
        int64_t total = (int64_t)fixed + props_len;
        if (total > max_record || total + END_FILE_MIN_BLANK > file_size) goto fallback;
        if (i > start && (run_bodies + body_len > chunk_body ||
                          run_records + total + END_FILE_MIN_BLANK > chunk_records)) {
            end = i;
            break;
        }
        if (in_place && at + total + END_FILE_MIN_BLANK > room) goto no_room;
        /* (+1: the last entry's 0x02, written and then cleared) */
        if (!in_place && PyByteArray_GET_SIZE(blob) < props_at + all + 1 &&
            PyByteArray_Resize(blob, (props_at + all + 1) * 2) < 0)
            goto done;
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
            .sys_flag = sys_flag,
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

static PyObject *py_append_encoded(PyObject *self, PyObject *args) {
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
static PyObject *msg_id(const uint8_t *host, Py_ssize_t host_len, int64_t offset) {
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

static PyObject *s_status, *s_commit_log_offset, *s_queue_offset, *s_msg_id,
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

static PyObject *py_put_results(PyObject *self, PyObject *args) {
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
static PyObject *py_put_one(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
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

static PyObject *py_select_units(PyObject *self, PyObject *args) {
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

/* ---- scans: walking and decoding a CommitLog file ---------------------------------- */

enum { STOP_BOUNDARY = 0, STOP_BLANK = 1, STOP_END_OF_DATA = 2, STOP_CORRUPT = 3 };

/*
 * walk_starts(buf, position, end, file_size, out) -> (count, stop_at, stop)
 *
 * record_scan.walk_starts: follow TOTALSIZE from ``position`` while records start before
 * ``end``, writing each start into ``out`` (int64). Stops early with STOP_BOUNDARY when
 * ``out`` is full; the caller continues from ``stop_at``.
 */
static PyObject *py_walk_starts(PyObject *self, PyObject *args) {
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
static PyObject *py_decode_chunk(PyObject *self, PyObject *args) {
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
static PyObject *py_crc_mismatch(PyObject *self, PyObject *args) {
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

/* ---- reads: one record into a MessageExt ------------------------------------------- */

static PyObject *s_ext_names[18];
static PyObject *s_magic_v1;
static const char *ext_names[18] = {
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

/* Whether none of the ``n`` bytes at ``p`` has its high bit set: eight at a time, a
 * record's properties being tens of bytes. */
static inline int all_ascii(const uint8_t *p, int64_t n) {
    uint64_t high = 0;
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        uint64_t word;
        memcpy(&word, p + k, 8);
        high |= word;
    }
    for (; k < n; k++) high |= p[k];
    return (high & 0x8080808080808080ull) == 0;
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

static PyTypeObject LazyPropertiesType = {
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

static PyTypeObject LazyMsgIdType = {
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
static PyObject *py_decode_messages(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
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

/* ---- Java's String.hashCode -------------------------------------------------------- */

/* java_hash(text) -> int: over the UTF-16 code units Java sees (astral characters as
 * surrogate pairs, lone surrogates as themselves), as a signed 32-bit int. */
/* String.hashCode's h = 31 * h + unit over ``text``'s UTF-16 units, from ``h``. */
static uint32_t java_hash_update(uint32_t h, PyObject *text) {
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

static PyObject *py_java_hash(PyObject *self, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "java_hash takes a str");
        return NULL;
    }
    return PyLong_FromLong((int32_t)java_hash_update(0, text));
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

/* index_key_hash: abs of the signed hash, and Integer.MIN_VALUE (whose abs is itself in
 * Java) as 0. */
static inline int64_t key_hash(uint32_t h) {
    int32_t v = (int32_t)h;
    if (v == INT32_MIN) return 0;
    return v < 0 ? -(int64_t)v : v;
}

enum { PROP_TAGS, PROP_UNIQ_KEY, PROP_KEYS, PROP_COUNT };

typedef struct {
    Py_ssize_t start, length; /* length -1: not found */
} Span;

/* For each of TAGS, UNIQ_KEY and KEYS, the value of the last segment of ``p[0:n]``
 * (properties, segments split by \x02) that starts with its name and \x01 and has a
 * non-empty value (dispatch_facts.property_value): one walk over the segments for the
 * three names. */
static void find_dispatch_properties(const uint8_t *p, Py_ssize_t n, Span found[PROP_COUNT]) {
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
static PyObject *py_dispatch_facts(PyObject *self, PyObject *args) {
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
static PyObject *py_index_put(PyObject *self, PyObject *args) {
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
static PyObject *py_index_chain(PyObject *self, PyObject *args) {
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

/* ---- a whole key query ---------------------------------------------------------- */

static PyObject *s__closed, *s__mm, *s__file, *s_hash_slot_num, *s_index_count,
    *s_file_from_offset, *s_wrote_position, *s_KEYS, *s_UNIQ_KEY, *s_space;

/* An int attribute; 0, or -1 with an error set. */
static int attr_ll(PyObject *obj, PyObject *name, long long *out) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) return -1;
    *out = PyLong_AsLongLong(value);
    Py_DECREF(value);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* The buffer of a MappedFile's mapping for this call (MappedFile.mapping_for_buffer_call:
 * held, the buffer keeps it mapped). 1 when taken, 0 when the file is retired, unmapped
 * or closed meanwhile (no error), -1 with an error. */
static int live_buffer(PyObject *mapped, Py_buffer *view) {
    PyObject *closed = PyObject_GetAttr(mapped, s__closed);
    if (closed == NULL) return -1;
    int is_closed = PyObject_IsTrue(closed);
    Py_DECREF(closed);
    if (is_closed != 0) return is_closed < 0 ? -1 : 0;
    PyObject *mm = PyObject_GetAttr(mapped, s__mm);
    if (mm == NULL) return -1;
    int taken = 0;
    if (mm != Py_None) {
        taken = PyObject_GetBuffer(mm, view, PyBUF_SIMPLE) == 0 ? 1 : -1;
        if (taken < 0 && PyErr_ExceptionMatches(PyExc_ValueError)) { /* closed meanwhile */
            PyErr_Clear();
            taken = 0;
        }
    }
    Py_DECREF(mm);
    return taken;
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
    long long slots, count;
    if (attr_ll(index_file, s_hash_slot_num, &slots) < 0 ||
        attr_ll(index_file, s_index_count, &count) < 0)
        return -1;
    PyObject *mapped = PyObject_GetAttr(index_file, s__file);
    if (mapped == NULL) return -1;
    Py_buffer file;
    int taken = live_buffer(mapped, &file);
    Py_DECREF(mapped);
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

/* The CommitLog file of ``files`` (MappedFiles, oldest first, each ``file_size`` long)
 * holding ``offset``, as CommitLog.files.find finds it: 1 with a new reference in *mapped
 * and its start and write position, 0 when no file holds it, 2 when the list has a hole
 * there (Python's scan decides), -1 with an error. */
static int find_file(PyObject *files, long long file_size, int64_t offset, PyObject **mapped,
                     long long *from, long long *wrote) {
    Py_ssize_t count = PyList_GET_SIZE(files);
    if (count == 0 || file_size <= 0) return 0;
    long long first_from, last_from;
    if (attr_ll(PyList_GET_ITEM(files, 0), s_file_from_offset, &first_from) < 0 ||
        attr_ll(PyList_GET_ITEM(files, count - 1), s_file_from_offset, &last_from) < 0)
        return -1;
    if (offset < first_from || offset >= last_from + file_size) return 0;
    Py_ssize_t index = (Py_ssize_t)(offset / file_size - first_from / file_size);
    if (index < 0 || index >= PyList_GET_SIZE(files)) return 2;
    PyObject *found = Py_NewRef(PyList_GET_ITEM(files, index));
    if (attr_ll(found, s_file_from_offset, from) < 0 ||
        attr_ll(found, s_wrote_position, wrote) < 0) {
        Py_DECREF(found);
        return -1;
    }
    if (*from > offset || offset >= *from + file_size) {
        Py_DECREF(found);
        return 2;
    }
    *mapped = found;
    return 1;
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
    PyObject *mapped = NULL;
    long long from, wrote;
    int where = find_file(files, file_size, offset, &mapped, &from, &wrote);
    if (where != 1) return where;
    int live = live_buffer(mapped, &held->view);
    Py_DECREF(mapped);
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
static PyObject *py_time_search(PyObject *self, PyObject *args) {
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
static PyObject *py_key_lookup(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
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
static PyObject *py_pull_messages(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
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
    rules.max_count = PyLong_AsLongLong(args[5]);
    rules.commit_max = PyLong_AsLongLong(args[6]);
    rules.memory_bytes = PyFloat_AsDouble(args[7]);
    rules.mem_bytes = PyLong_AsLongLong(args[8]);
    rules.mem_count = PyLong_AsLongLong(args[9]);
    rules.disk_bytes = PyLong_AsLongLong(args[10]);
    rules.disk_count = PyLong_AsLongLong(args[11]);
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

/*
 * chain_private(newest, oldest, first_number, key_hashes, phy_offsets, time_diffs, out)
 *
 * index.RunChainer's chaining of a chunk against its private slot table: entry
 * ``first_number + k`` links to ``newest[slot]`` (0 when the run has none there yet, and
 * then it is the slot's ``oldest``), and becomes ``newest[slot]``. ``newest`` and
 * ``oldest`` are int32 per slot; ``out`` receives the entries as the file holds them
 * (20 big-endian bytes each). Runs without the GIL.
 */
static PyObject *py_chain_private(PyObject *self, PyObject *args) {
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
static PyObject *py_populate_write(PyObject *self, PyObject *args) {
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
static PyObject *py_msync_range(PyObject *self, PyObject *args) {
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
static PyObject *py_write_batch(PyObject *self, PyObject *args) {
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
static PyObject *py_queue_units(PyObject *self, PyObject *args) {
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
    {"key_lookup", (PyCFunction)(void (*)(void))py_key_lookup, METH_FASTCALL,
     "A key query: index chains, reads, checks."},
    {"chain_private", py_chain_private, METH_VARARGS, "RunChainer's chaining of a chunk."},
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
    INTERN(s__closed, "_closed");
    INTERN(s__mm, "_mm");
    INTERN(s__file, "_file");
    INTERN(s_hash_slot_num, "hash_slot_num");
    INTERN(s_index_count, "index_count");
    INTERN(s_file_from_offset, "file_from_offset");
    INTERN(s_wrote_position, "wrote_position");
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
