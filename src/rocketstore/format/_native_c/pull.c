/*
 * rocketstore.format._native, the broker's pulls: pull_frame and pull_answer.
 * (native.h describes the module; the Python twins are
 * rocketstore.broker.processors.pull_fast.pull_frame_python and pull_answer_python.)
 *
 * A PULL_MESSAGE (or LITE_PULL_MESSAGE) frame's header fields from its bytes, and the
 * answer's whole frame from the pull's result; anything else is None and the broker's
 * Python path (the definition) takes the frame. Only an ASCII header of the shape
 * RocketMQ's RemotingSerializable writes is read (header.c's reader): integers for the
 * numbers, strings for the extFields.
 */
#include "native.h"

/* PullMessageRequestHeader's fields, in the order pull_frame answers them. */
enum {
    F_GROUP, F_TOPIC, F_QUEUE_ID, F_QUEUE_OFFSET, F_MAX_MSG_NUMS, F_SYS_FLAG,
    F_COMMIT_OFFSET, F_SUSPEND, F_SUBSCRIPTION, F_EXPRESSION_TYPE, F_SUB_VERSION, F_COUNT
};
static const char *const FIELD_NAMES[F_COUNT] = {
    "consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag",
    "commitOffset", "suspendTimeoutMillis", "subscription", "expressionType", "subVersion",
};

static int field_of(const char *key, Py_ssize_t len) {
    for (int k = 0; k < F_COUNT; k++)
        if ((size_t)len == strlen(FIELD_NAMES[k]) && memcmp(key, FIELD_NAMES[k], len) == 0)
            return k;
    return -1;
}

/* An integer field as broker.remoting.ext_int reads the plain ones: blank or missing is
 * the default (``has_default`` 0: required, declined), else "-?[0-9]+" within a long;
 * 0 on success, -1 to decline. */
static int field_int(const char *text, Py_ssize_t len, int has_default, int64_t fallback,
                     int64_t *out) {
    if (text == NULL || len == 0) {
        *out = fallback;
        return has_default ? 0 : -1;
    }
    return text_int(text, len, INT64_MIN, INT64_MAX, out);
}

/*
 * pull_frame(frame) -> (opaque, version, group, topic, queue_id, queue_offset,
 *     max_msg_nums, sys_flag, commit_offset, suspend_timeout_ms, subscription,
 *     expression_type, sub_version) or None
 *
 * ``frame``: one whole frame without its length prefix. The fields of a PULL_MESSAGE or
 * LITE_PULL_MESSAGE request (code 11 or 361, flag 0) whose header is ASCII JSON of
 * integers and strings, its extFields all strings with none of the header's names
 * repeated, as processors.pull.PullHeader reads them (``subscription`` None when absent,
 * ``expression_type`` "TAG" when absent). Everything else: None, for the Python path.
 */
typedef struct {
    const char *ext[F_COUNT];
    Py_ssize_t ext_len[F_COUNT];
} PullFieldValues;

/* An extFields entry: a header's name once at most; another name (a newer client's) is
 * unread. */
static int pull_field(void *arg, const char *name, Py_ssize_t name_len, const char *value,
                      Py_ssize_t value_len) {
    PullFieldValues *f = arg;
    int field = field_of(name, name_len);
    if (field < 0) return 0;
    if (f->ext[field] != NULL) return -1;
    f->ext[field] = value;
    f->ext_len[field] = value_len;
    return 0;
}

PyObject *py_pull_frame(PyObject *self, PyObject *args) {
    Py_buffer frame = {0};
    if (!PyArg_ParseTuple(args, "y*", &frame)) return NULL;
    PyObject *result = NULL;
    RequestHeader h;
    PullFieldValues f = {{0}, {0}};
    const char *const *ext = f.ext;
    const Py_ssize_t *ext_len = f.ext_len;
    int read = read_request_header((const char *)frame.buf, frame.len, &h, pull_field, &f);
    if (read < 0) goto done;
    if (read == 0 || (h.code != 11 && h.code != 361)) goto decline;
    if (ext[F_GROUP] == NULL || ext[F_TOPIC] == NULL) goto decline;
    int64_t queue_id, queue_offset, max_nums, sys_flag, commit_offset, suspend, sub_version;
    if (field_int(ext[F_QUEUE_ID], ext_len[F_QUEUE_ID], 0, 0, &queue_id) < 0 ||
        field_int(ext[F_QUEUE_OFFSET], ext_len[F_QUEUE_OFFSET], 0, 0, &queue_offset) < 0 ||
        field_int(ext[F_MAX_MSG_NUMS], ext_len[F_MAX_MSG_NUMS], 1, 32, &max_nums) < 0 ||
        field_int(ext[F_SYS_FLAG], ext_len[F_SYS_FLAG], 1, 0, &sys_flag) < 0 ||
        field_int(ext[F_COMMIT_OFFSET], ext_len[F_COMMIT_OFFSET], 1, 0, &commit_offset) < 0 ||
        field_int(ext[F_SUSPEND], ext_len[F_SUSPEND], 1, 15000, &suspend) < 0 ||
        field_int(ext[F_SUB_VERSION], ext_len[F_SUB_VERSION], 1, 0, &sub_version) < 0)
        goto decline;
    PyObject *subscription = ext[F_SUBSCRIPTION] == NULL
        ? Py_NewRef(Py_None)
        : PyUnicode_DecodeASCII(ext[F_SUBSCRIPTION], ext_len[F_SUBSCRIPTION], NULL);
    PyObject *expression_type = subscription == NULL ? NULL
        : ext[F_EXPRESSION_TYPE] == NULL
        ? PyUnicode_FromString("TAG")
        : PyUnicode_DecodeASCII(ext[F_EXPRESSION_TYPE], ext_len[F_EXPRESSION_TYPE], NULL);
    if (expression_type == NULL) {
        Py_XDECREF(subscription);
        goto done;
    }
    result = Py_BuildValue(
        "(LLs#s#LLLLLLNNL)", (long long)h.opaque, (long long)h.version, ext[F_GROUP],
        ext_len[F_GROUP], ext[F_TOPIC], ext_len[F_TOPIC], (long long)queue_id,
        (long long)queue_offset, (long long)max_nums, (long long)sys_flag,
        (long long)commit_offset, (long long)suspend, subscription, expression_type,
        (long long)sub_version);
    goto done;
decline:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(h.strings);
    PyBuffer_Release(&frame);
    return result;
}

/*
 * pull_answer(opaque, version, code, remark, next_begin_offset, min_offset, max_offset,
 *     suggest_broker_id, body) -> bytes or None
 *
 * The whole frame (length prefix included) of a pull's answer as encode_command writes
 * pull_message's response: nextBeginOffset, minOffset, maxOffset, suggestWhichBrokerId,
 * the remark (None: none), the body. None when the remark is not ASCII.
 */
PyObject *py_pull_answer(PyObject *self, PyObject *args) {
    long long opaque, version, code, next_begin, min_offset, max_offset, suggest;
    PyObject *remark;
    Py_buffer body = {0};
    if (!PyArg_ParseTuple(args, "LLLOLLLLy*", &opaque, &version, &code, &remark, &next_begin,
                          &min_offset, &max_offset, &suggest, &body))
        return NULL;
    PyObject *result = NULL;
    if (remark != Py_None && !PyUnicode_Check(remark)) {
        PyErr_SetString(PyExc_TypeError, "remark must be a str or None");
        goto done;
    }
    char header[1024];
    Py_ssize_t room = (Py_ssize_t)sizeof header, n = 0;
    n += snprintf(header + n, (size_t)(room - n),
                  "{\"code\":%lld,\"extFields\":{\"nextBeginOffset\":\"%lld\",\"minOffset\":"
                  "\"%lld\",\"maxOffset\":\"%lld\",\"suggestWhichBrokerId\":\"%lld\"},"
                  "\"flag\":1,\"language\":\"JAVA\",\"opaque\":%lld,"
                  "\"serializeTypeCurrentRPC\":\"JSON\",\"version\":%lld",
                  code, next_begin, min_offset, max_offset, suggest, opaque, version);
    if (n >= room) goto decline;
    if (remark != Py_None) {
        n += snprintf(header + n, (size_t)(room - n), ",\"remark\":");
        if (n >= room) goto decline;
        Py_ssize_t quoted = quote_ascii(remark, header + n, room - n);
        if (quoted < 0) goto decline;
        n += quoted;
    }
    if (n >= room - 1) goto decline;
    header[n++] = '}';
    if (body.len > INT32_MAX - 4 - n) goto decline;
    result = PyBytes_FromStringAndSize(NULL, 8 + n + body.len);
    if (result == NULL) goto done;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(result);
    put_i32(out, (int32_t)(4 + n + body.len));
    put_i32(out + 4, (int32_t)n);
    memcpy(out + 8, header, (size_t)n);
    if (body.len) memcpy(out + 8 + n, body.buf, (size_t)body.len);
    goto done;
decline:
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&body);
    return result;
}
