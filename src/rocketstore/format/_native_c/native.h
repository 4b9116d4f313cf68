#ifndef ROCKETSTORE_NATIVE_H
#define ROCKETSTORE_NATIVE_H
/*
 * rocketstore.format._native: the per-record loops of the hot paths, in C.
 *
 * Layer: format (pure codecs over buffers; no clock, no threads), but for io.c's file
 * I/O, which the files layer binds (rocketstore.files.native_io). Every entry point has
 * a Python twin that defines its meaning (the registry, rocketstore.format.native, names
 * it); this module only runs the common case faster. The C code takes buffers, ints and
 * small tuples, and reads no attribute of the store's Python objects. Where a record or a
 * message is anything but common (an IPv6 host, a v2 magic, a DELAY property, a value
 * out of range, a corrupt byte) the function hands the case back to Python (returns None
 * or stops where it is), so the exact checks and error messages stay in one place.
 *
 * Byte layout (big-endian, IPv4 hosts), as in rocketstore/format/record.py:
 *   0 TOTALSIZE  4 MAGIC  8 BODYCRC  12 QUEUEID  16 FLAG  20 QUEUEOFFSET  28 PHYSICALOFFSET
 *   36 SYSFLAG  40 BORNTIMESTAMP  48 BORNHOST  56 STORETIMESTAMP  64 STOREHOST
 *   72 RECONSUMETIMES  76 PREPAREDOFFSET  84 BODYLEN  88 BODY, TOPICLEN, TOPIC, PROPLEN, PROPS
 *
 * One extension, one translation unit per concern, each including this header: crc.c,
 * put.c (encode and append), scan.c (walk, decode, CRC check, dispatch facts, queue
 * units), decode.c (reads into MessageExt, pulls, key and time look-ups), index.c (index
 * files, key hashes), io.c (pwrite, msync, madvise), batch.c (the broker's batch bodies),
 * header.c (request headers' JSON), send.c and pull.c (the broker's fast frames),
 * module.c (method table, init). What one unit uses of another is declared at the end of
 * this header.
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
#include <sys/uio.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_CLMUL_CRC 1
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

/* The field's object in its slot (borrowed; NULL when unset). Only with ``direct``. */
static inline PyObject *slot_get(const SlotLayout *layout, PyObject *obj, int k) {
    return *(PyObject **)((char *)obj + layout->offsets[k]);
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

/* ---- what the translation units share ------------------------------------------- */
void release_buffers(int count, ...);
int get_buffers(int count, ...);
void crc_init(void);
uint32_t masked_crc(const uint8_t *p, size_t n);
PyObject *py_masked_crc32(PyObject *self, PyObject *arg);
PyObject *py_crc_backend(PyObject *self, PyObject *unused);
void resolve_layout(SlotLayout *layout, PyTypeObject *type, PyObject *const *names, int n);
int set_fields(const SlotLayout *layout, PyObject *obj, PyObject *const *names,
    PyObject *const *values, int n);
extern PyObject *s_topic, *s_body, *s_queue_id, *s_flag, *s_sys_flag, *s_properties,
    *s_born_timestamp, *s_born_host, *s_reconsume_times, *s_prepared_offset, *s_delay,
    *s_text;
extern SlotLayout message_layout, result_layout, ext_layout;
PyObject *py_set_verbatim_type(PyObject *self, PyObject *type);
PyObject *py_encode_batch(PyObject *self, PyObject *args);
int next_queue_offset(QueueCounter *c, PyObject *key, int64_t *offset);
PyObject *py_encode_columns(PyObject *self, PyObject *args);
PyObject *py_append_encoded(PyObject *self, PyObject *args);
PyObject *msg_id(const uint8_t *host, Py_ssize_t host_len, int64_t offset);
extern PyObject *s_status, *s_commit_log_offset, *s_queue_offset, *s_msg_id,
    *s_store_timestamp, *s_size, *s_reason, *s_ok, *s_empty;
PyObject *py_put_results(PyObject *self, PyObject *args);
PyObject *py_put_one(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *py_select_units(PyObject *self, PyObject *args);
PyObject *py_walk_starts(PyObject *self, PyObject *args);
PyObject *py_decode_chunk(PyObject *self, PyObject *args);
PyObject *py_crc_mismatch(PyObject *self, PyObject *args);
extern PyObject *s_ext_names[18];
extern PyObject *s_magic_v1;
extern const char *ext_names[18];
extern PyTypeObject LazyPropertiesType;
extern PyTypeObject LazyMsgIdType;
PyObject *py_decode_messages(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
uint32_t java_hash_update(uint32_t h, PyObject *text);
PyObject *py_java_hash(PyObject *self, PyObject *text);
void find_dispatch_properties(const uint8_t *p, Py_ssize_t n, Span found[PROP_COUNT]);
PyObject *py_dispatch_facts(PyObject *self, PyObject *args);
PyObject *py_index_put(PyObject *self, PyObject *args);
PyObject *py_index_chain(PyObject *self, PyObject *args);
extern PyObject *s_file_from_offset, *s_buffer_mapping, *s_wrote_position, *s_mapped_file,
    *s_hash_slot_num, *s_index_count, *s_KEYS, *s_UNIQ_KEY, *s_space;
PyObject *py_time_search(PyObject *self, PyObject *args);
PyObject *py_key_lookup(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *py_pull_messages(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *py_pull_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *py_pull_tagged_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *py_chain_private(PyObject *self, PyObject *args);
PyObject *py_populate_write(PyObject *self, PyObject *args);
PyObject *py_msync_range(PyObject *self, PyObject *args);
PyObject *py_write_batch(PyObject *self, PyObject *args);
PyObject *py_write_parts(PyObject *self, PyObject *args);
PyObject *py_transfer_run(PyObject *self, PyObject *args);
PyObject *py_receive_round(PyObject *self, PyObject *args);
PyObject *py_queue_units(PyObject *self, PyObject *args);
PyObject *py_batch_columns(PyObject *self, PyObject *args);
PyObject *py_offset_msg_ids(PyObject *self, PyObject *args);
/* header.c's reader of a request's ASCII JSON header (send.c's and pull.c's) */
typedef struct {
    const char *p, *end;
    char *text; /* a decoded string's characters (ASCII: one byte each) */
    Py_ssize_t text_len;
} Json;
void skip_ws(Json *j);
int read_string(Json *j);
int read_int(Json *j, int64_t *out);
int skip_scalar(Json *j);
int text_int(const char *s, Py_ssize_t n, int64_t lo, int64_t hi, int64_t *out);
Py_ssize_t quote_ascii(PyObject *text, char *out, Py_ssize_t room);
typedef struct {
    int64_t code, opaque, flag, version;
    Py_ssize_t header_len; /* the body starts at 4 + header_len */
    char *strings;         /* the decoded texts (PyMem_Free them) */
} RequestHeader;
/* One extFields entry (name, value); < 0 declines the frame. */
typedef int (*HeaderField)(void *arg, const char *name, Py_ssize_t name_len, const char *value,
                           Py_ssize_t value_len);
int read_request_header(const char *data, Py_ssize_t len, RequestHeader *h, HeaderField field,
                        void *arg);
PyObject *batch_columns_of(const uint8_t *p, Py_ssize_t n, const char *suffix_utf8,
                           Py_ssize_t suffix_len);
Py_ssize_t offset_msg_ids_len(Py_ssize_t host_len, Py_ssize_t count);
void write_offset_msg_ids(char *out, const void *host, Py_ssize_t host_len, const void *offsets,
                          Py_ssize_t count);
PyObject *py_send_frame(PyObject *self, PyObject *args);
PyObject *py_send_answer(PyObject *self, PyObject *args);
PyObject *py_batch_frame(PyObject *self, PyObject *args);
PyObject *py_batch_answer(PyObject *self, PyObject *args);
PyObject *py_pull_frame(PyObject *self, PyObject *args);
PyObject *py_pull_answer(PyObject *self, PyObject *args);
int pwritev_all(int fd, struct iovec *iov, Py_ssize_t count, off_t at);

#endif /* ROCKETSTORE_NATIVE_H */
