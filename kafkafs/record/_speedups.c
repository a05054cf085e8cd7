/*
 * kafkafs.record._speedups: C versions of the record hot paths of kafkafs.record.fast.
 *
 * The records section of a v2 batch (KAFKA_FORMAT.md, "RecordBatch v2"): every record is
 *   length varint · attributes i8 · timestampDelta varlong · offsetDelta varint ·
 *   keyLen varint (-1 null) + key · valueLen varint (-1 null) + value ·
 *   headerCount varint · per header keyLen varint (>= 0) + UTF-8 key, valueLen varint + value
 * and every varint is zigzag. Readers validate like Kafka's DefaultRecord.readFrom.
 *
 * Only the Python C API. Every read of the payload is bounds-checked against the end of
 * the buffer, so a payload that changes while it is parsed (a shared mmap, a bytearray
 * written by another thread while the GIL is released) gives garbage or an error, never
 * an out-of-bounds read. kafkafs/record/fast.py holds the pure-Python twin: results and
 * error messages must stay identical.
 *
 * The extension's other source files (_jsonl.c: the records.jsonl lines) share the record
 * readers, the batch layout, CRC-32C and the framing of plain runs through _speedups.h.
 */
#include "_speedups.h"
#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#ifdef KAFKAFS_HAVE_ISAL
#include <isa-l/crc.h>
#endif

static PyObject *CorruptRecordError = NULL;

/* Raise the error `code` (details in *e): CorruptRecordError with Kafka's message. */
void
raise_perr(int code, const perr *e)
{
    char msg[400];

    switch (code) {
    case E_PYERR:
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_SystemError, "kafkafs._speedups: error without exception");
        return;
    case E_OVERFLOW:
        PyErr_SetString(PyExc_OverflowError, "rendered size does not fit in a Py_ssize_t");
        return;
    case E_TRUNC:
        snprintf(msg, sizeof msg, "batch ends inside record %zd of %zd", e->index, e->count);
        break;
    case E_VARINT_LONG:
        snprintf(msg, sizeof msg, "varint is too long, the most significant bit in the 5th "
                 "byte is set, converted value: %llx", e->hex);
        break;
    case E_VARLONG_LONG:
        snprintf(msg, sizeof msg, "varlong is too long, the most significant bit in the 10th "
                 "byte is set, converted value: %llx", e->hex);
        break;
    case E_LEN_NEG:
        snprintf(msg, sizeof msg, "invalid record size: negative record length %lld", e->a);
        break;
    case E_LEN_BIG:
        snprintf(msg, sizeof msg, "invalid record size: expected %lld bytes in record payload, "
                 "but instead the buffer has only %lld remaining bytes", e->a, e->b);
        break;
    case E_KEY_NEG:
        snprintf(msg, sizeof msg, "invalid negative key size %lld", e->a);
        break;
    case E_VAL_NEG:
        snprintf(msg, sizeof msg, "invalid negative value size %lld", e->a);
        break;
    case E_HCOUNT_NEG:
        snprintf(msg, sizeof msg, "found invalid number of record headers %lld", e->a);
        break;
    case E_HCOUNT_BIG:
        snprintf(msg, sizeof msg, "found invalid number of record headers. The number of "
                 "record headers is larger than the remaining size of the buffer, "
                 "numHeaders: %lld", e->a);
        break;
    case E_HKEY_NEG:
        snprintf(msg, sizeof msg, "invalid negative header key size %lld", e->a);
        break;
    case E_HVAL_NEG:
        snprintf(msg, sizeof msg, "invalid negative header value size %lld", e->a);
        break;
    case E_HKEY_UTF8:
        snprintf(msg, sizeof msg, "header key is not valid UTF-8");
        break;
    case E_BODY:
        snprintf(msg, sizeof msg, "invalid record size: expected to read %lld bytes in record "
                 "payload, but instead read %lld", e->a, e->b);
        break;
    case E_LEFTOVER:
        snprintf(msg, sizeof msg, "incorrect declared batch size, records still remaining "
                 "(%lld bytes left after %zd records)", e->a, e->count);
        break;
    case E_COUNT_NEG:
        snprintf(msg, sizeof msg, "found invalid record count %lld in magic v2 batch", e->a);
        break;
    default:
        PyErr_SetString(PyExc_SystemError, "kafkafs._speedups: internal error");
        return;
    }
    PyErr_SetString(CorruptRecordError, msg);
}

/* Note the expected record count in *e; -1 with CorruptRecordError when it is negative. */
int
check_count(Py_ssize_t count, perr *e)
{
    e->count = count;
    if (count < 0) {
        e->a = count;
        raise_perr(E_COUNT_NEG, e);
        return -1;
    }
    return 0;
}

typedef struct {
    Py_ssize_t pos, len;  /* len -1: null value */
} span_t;

/* Scan `count` records: validate, optionally note each value's span, optionally total the
 * rendered size (value or null_len, plus sep_len, per record). No Python objects: callable
 * without the GIL. `cap` is the room in `spans` (never exceeded). */
static inline int
scan_values(const uint8_t *buf, Py_ssize_t len, Py_ssize_t count, int exact,
            span_t *spans, Py_ssize_t cap, Py_ssize_t null_len, Py_ssize_t sep_len,
            Py_ssize_t *total_out, perr *e)
{
    Py_ssize_t pos = 0, i, total = 0;
    rec_t r;
    int rc;

    for (i = 0; i < count; i++) {
        rc = parse_one(buf, len, &pos, &r, NULL, e);
        if (rc) {
            e->index = i;
            return rc;
        }
        if (spans != NULL) {
            if (i >= cap)
                return E_INTERNAL;  /* impossible: a record takes >= MIN_RECORD_SIZE bytes */
            spans[i].pos = r.val_pos;
            spans[i].len = r.val_len;
        }
        if (total_out != NULL) {
            Py_ssize_t add = r.val_len >= 0 ? (Py_ssize_t)r.val_len : null_len;
            if (add > PY_SSIZE_T_MAX - sep_len || total > PY_SSIZE_T_MAX - (add + sep_len))
                return E_OVERFLOW;
            total += add + sep_len;
        }
    }
    if (exact && pos != len) {
        e->a = len - pos;
        return E_LEFTOVER;
    }
    if (total_out != NULL)
        *total_out = total;
    return E_OK;
}

/* ------------------------------------------------------------------------------------ */
/* argument helpers                                                                     */

static int
get_buffer(PyObject *obj, Py_buffer *view)
{
    return PyObject_GetBuffer(obj, view, PyBUF_SIMPLE);
}

/* The room for the records of a payload of `len` bytes: at most `count`, and no more than
 * one per MIN_RECORD_SIZE bytes. */
static Py_ssize_t
span_capacity(Py_ssize_t count, Py_ssize_t len)
{
    Py_ssize_t cap = len / MIN_RECORD_SIZE;
    return count < cap ? count : cap;
}

/* A bytes-like object (or str when allow_str) as a pointer and length; release with
 * bv_release. A bytes object is read directly. */
typedef struct {
    const char *p;
    Py_ssize_t len;
    int has_view;
    Py_buffer view;
} bview;

static int
bv_get(PyObject *obj, bview *b, int allow_str)
{
    b->has_view = 0;
    if (PyBytes_Check(obj)) {
        b->p = PyBytes_AS_STRING(obj);
        b->len = PyBytes_GET_SIZE(obj);
        return 0;
    }
    if (allow_str && PyUnicode_Check(obj)) {
        b->p = PyUnicode_AsUTF8AndSize(obj, &b->len);
        return b->p == NULL ? -1 : 0;
    }
    if (PyObject_GetBuffer(obj, &b->view, PyBUF_SIMPLE) < 0)
        return -1;
    b->has_view = 1;
    b->p = b->view.buf;
    b->len = b->view.len;
    return 0;
}

/* bv_get (no str) of an optional argument; `dflt` of `dlen` bytes when obj is NULL. */
static int
bv_get_or(PyObject *obj, bview *b, const char *dflt, Py_ssize_t dlen)
{
    if (obj != NULL)
        return bv_get(obj, b, 0);
    b->p = dflt;
    b->len = dlen;
    b->has_view = 0;
    return 0;
}

static void
bv_release(bview *b)
{
    if (b->has_view) {
        PyBuffer_Release(&b->view);
        b->has_view = 0;
    }
}

/* ------------------------------------------------------------------------------------ */
/* values / render_values / rendered_size                                               */

/* Write one rendered record at `o`: the value (`len` bytes at `src`; len -1: the null
 * literal) and the separator. `src` may overlap `o` (rendering in place moves values
 * down). Returns the end of what was written. */
static inline char *
put_value(char *o, const uint8_t *src, Py_ssize_t len, const char *nl, Py_ssize_t nlen,
          const char *sep, Py_ssize_t slen)
{
    if (len >= 0) {
        memmove(o, src, (size_t)len);
        o += len;
    }
    else {
        memcpy(o, nl, (size_t)nlen);
        o += nlen;
    }
    if (slen == 1)
        *o++ = sep[0];
    else {
        memcpy(o, sep, (size_t)slen);
        o += slen;
    }
    return o;
}

/* scan_values over the `count` records of `view` for a wrapper: checks the count, scans
 * with the GIL released when the payload is large and raises what it finds. With `spans`,
 * *spans gets each value's span (PyMem_RawFree it). 0, or -1 with an exception set. */
static inline int
scan_payload(const Py_buffer *view, Py_ssize_t count, int exact, span_t **spans,
             Py_ssize_t null_len, Py_ssize_t sep_len, Py_ssize_t *total_out)
{
    perr e = {0};
    span_t *sp = NULL;
    Py_ssize_t cap = 0;
    int rc;

    if (check_count(count, &e) < 0)
        return -1;
    if (spans != NULL) {
        cap = span_capacity(count, view->len);
        sp = PyMem_RawMalloc((size_t)(cap > 0 ? cap : 1) * sizeof(span_t));
        if (sp == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    NOGIL_IF(view->len >= NOGIL_THRESHOLD,
             rc = scan_values(view->buf, view->len, count, exact, sp, cap, null_len, sep_len,
                              total_out, &e));
    if (rc) {
        PyMem_RawFree(sp);
        raise_perr(rc, &e);
        return -1;
    }
    if (spans != NULL)
        *spans = sp;
    return 0;
}

PyDoc_STRVAR(values_doc,
"values(payload, count, *, exact=True) -> list[bytes | None]\n\n"
"The value of each of the `count` records in `payload` (the uncompressed records section\n"
"of a v2 batch). Raises CorruptRecordError.");

static PyObject *
sp_values(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"payload", "count", "exact", NULL};
    PyObject *payload, *list = NULL;
    Py_ssize_t count, i;
    int exact = 1;
    Py_buffer view;
    span_t *spans = NULL;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "On|$p:values", kwlist,
                                     &payload, &count, &exact))
        return NULL;
    if (get_buffer(payload, &view) < 0)
        return NULL;
    if (scan_payload(&view, count, exact, &spans, 0, 0, NULL) < 0)
        goto done;
    list = PyList_New(count);
    if (list == NULL)
        goto done;
    for (i = 0; i < count; i++) {
        PyObject *v = bytes_or_none((const uint8_t *)view.buf + spans[i].pos, spans[i].len);
        if (v == NULL) {
            Py_CLEAR(list);
            goto done;
        }
        PyList_SET_ITEM(list, i, v);
    }
done:
    PyMem_RawFree(spans);
    PyBuffer_Release(&view);
    return list;
}

PyDoc_STRVAR(render_values_doc,
"render_values(payload, count, null_literal=b'null', separator=b'\\n', *, exact=True)"
" -> bytes\n\n"
"Every value (a null value as `null_literal`) followed by `separator`, concatenated.");

static PyObject *
sp_render_values(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"payload", "count", "null_literal", "separator", "exact", NULL};
    PyObject *payload, *null_obj = NULL, *sep_obj = NULL, *out = NULL;
    Py_ssize_t count, total = 0, i;
    int exact = 1;
    Py_buffer view;
    bview nb, sb;
    span_t *spans = NULL;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "On|OO$p:render_values", kwlist,
                                     &payload, &count, &null_obj, &sep_obj, &exact))
        return NULL;
    if (get_buffer(payload, &view) < 0)
        return NULL;
    sb.has_view = 0;  /* released at done even when nb fails */
    if (bv_get_or(null_obj, &nb, "null", 4) < 0 || bv_get_or(sep_obj, &sb, "\n", 1) < 0)
        goto done;
    if (scan_payload(&view, count, exact, &spans, nb.len, sb.len, &total) < 0)
        goto done;
    out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        goto done;
    {
        char *o = PyBytes_AS_STRING(out);
        /* locals stay in registers; the bview fields would be reloaded after every copy */
        const char *src = view.buf, *nl = nb.p, *sep = sb.p;
        Py_ssize_t nlen = nb.len, slen = sb.len;
        Py_BEGIN_ALLOW_THREADS
        for (i = 0; i < count; i++)
            o = put_value(o, (const uint8_t *)src + spans[i].pos, spans[i].len, nl, nlen, sep,
                          slen);
        Py_END_ALLOW_THREADS
    }
done:
    PyMem_RawFree(spans);
    bv_release(&sb);
    bv_release(&nb);
    PyBuffer_Release(&view);
    return out;
}

PyDoc_STRVAR(rendered_size_doc,
"rendered_size(payload, count, null_len=4, separator_len=1, *, exact=True) -> int\n\n"
"len(render_values(...)) with a null literal of null_len bytes and a separator of\n"
"separator_len bytes, without building it. Validates the same way.");

static PyObject *
sp_rendered_size(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"payload", "count", "null_len", "separator_len", "exact", NULL};
    PyObject *payload;
    Py_ssize_t count, nlen = 4, slen = 1, total = 0;
    int exact = 1, rc;
    Py_buffer view;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "On|nn$p:rendered_size", kwlist,
                                     &payload, &count, &nlen, &slen, &exact))
        return NULL;
    if (nlen < 0 || slen < 0) {
        PyErr_SetString(PyExc_ValueError, "null_len and separator_len must be >= 0");
        return NULL;
    }
    if (get_buffer(payload, &view) < 0)
        return NULL;
    rc = scan_payload(&view, count, exact, NULL, nlen, slen, &total);
    PyBuffer_Release(&view);
    if (rc < 0)
        return NULL;
    return PyLong_FromSsize_t(total);
}

/* ------------------------------------------------------------------------------------ */
/* decode                                                                               */

PyDoc_STRVAR(decode_doc,
"decode(payload, count, base_offset, base_timestamp, fixed_timestamp, *, exact=True,"
" only=None, cls=None) -> list[tuple]\n\n"
"(offset, timestamp, key, value, headers) for each record. offset = base_offset +\n"
"offsetDelta; timestamp = fixed_timestamp when not None (LogAppendTime), else\n"
"base_timestamp + timestampDelta (64-bit arithmetic, wrapping as in Java). With only=N\n"
"every record is still validated but only the one at offset N is built (a list of at\n"
"most one tuple). cls: a tuple subclass of 5 fields (a namedtuple such as Record) to build\n"
"instead of plain tuples.");

static PyObject *
sp_decode(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"payload", "count", "base_offset", "base_timestamp",
                             "fixed_timestamp", "exact", "only", "cls", NULL};
    PyObject *payload, *fixed_obj, *only_obj = Py_None, *list = NULL, *empty = NULL,
             *ts_obj = NULL, *cls_obj = Py_None;
    PyTypeObject *cls = NULL;
    long long base_offset, base_ts, fixed_ts = 0, last_ts = 0, only = 0;
    Py_ssize_t count, cap, i, pos = 0;
    int exact = 1, rc, fixed, one;
    Py_buffer view;
    const uint8_t *buf;
    perr e = {0};

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OnLLO|$pOO:decode", kwlist, &payload, &count,
                                     &base_offset, &base_ts, &fixed_obj, &exact, &only_obj,
                                     &cls_obj))
        return NULL;
    if (cls_obj != Py_None) {
        if (!PyType_Check(cls_obj) || !PyType_IsSubtype((PyTypeObject *)cls_obj, &PyTuple_Type)) {
            PyErr_SetString(PyExc_TypeError, "cls must be a subclass of tuple");
            return NULL;
        }
        cls = (PyTypeObject *)cls_obj;
    }
    if ((one = optional_ll(only_obj, &only)) < 0 ||
            (fixed = optional_ll(fixed_obj, &fixed_ts)) < 0)
        return NULL;
    if (get_buffer(payload, &view) < 0)
        return NULL;
    buf = view.buf;
    if (check_count(count, &e) < 0)
        goto done;
    empty = PyTuple_New(0);
    if (empty == NULL)
        goto done;
    if (fixed) {
        ts_obj = PyLong_FromLongLong(fixed_ts);
        if (ts_obj == NULL)
            goto done;
        last_ts = fixed_ts;
    }
    cap = span_capacity(count, view.len);
    list = PyList_New(one ? 0 : cap);
    if (list == NULL)
        goto done;
    for (i = 0; i < count; i++) {
        rec_t r;
        PyObject *headers = NULL, *tup, *off, *key, *val;
        if (one) {  /* validate; build only the record asked for */
            Py_ssize_t start = pos;
            rc = parse_one(buf, view.len, &pos, &r, NULL, &e);
            if (rc)
                goto bad_record;
            if (wrap_add(base_offset, r.off_delta) != only)
                continue;
            pos = start;
        }
        rc = parse_one(buf, view.len, &pos, &r, &headers, &e);
        if (rc)
            goto bad_record;
        if (i >= cap) {  /* impossible: a record takes >= MIN_RECORD_SIZE bytes */
            Py_XDECREF(headers);
            rc = E_INTERNAL;
            goto bad_record;
        }
        if (headers == NULL) {
            headers = empty;
            Py_INCREF(headers);
        }
        if (!fixed) {
            int64_t ts = wrap_add(base_ts, r.ts_delta);
            if (ts_obj == NULL || ts != last_ts) {
                Py_XDECREF(ts_obj);
                ts_obj = PyLong_FromLongLong(ts);
                if (ts_obj == NULL) {
                    Py_DECREF(headers);
                    Py_CLEAR(list);
                    goto done;
                }
                last_ts = ts;
            }
        }
        off = PyLong_FromLongLong(wrap_add(base_offset, r.off_delta));
        if (r.key_len >= 0)
            key = PyBytes_FromStringAndSize((const char *)buf + r.key_pos, r.key_len);
        else {
            key = Py_None;
            Py_INCREF(key);
        }
        if (r.val_len >= 0)
            val = PyBytes_FromStringAndSize((const char *)buf + r.val_pos, r.val_len);
        else {
            val = Py_None;
            Py_INCREF(val);
        }
        /* a tuple subclass (namedtuple) is allocated as a 5-item tuple of that type */
        tup = cls != NULL ? cls->tp_alloc(cls, 5) : PyTuple_New(5);
        if (off == NULL || key == NULL || val == NULL || tup == NULL) {
            Py_XDECREF(off);
            Py_XDECREF(key);
            Py_XDECREF(val);
            Py_XDECREF(tup);
            Py_DECREF(headers);
            Py_CLEAR(list);
            goto done;
        }
        Py_INCREF(ts_obj);
        PyTuple_SET_ITEM(tup, 0, off);
        PyTuple_SET_ITEM(tup, 1, ts_obj);
        PyTuple_SET_ITEM(tup, 2, key);
        PyTuple_SET_ITEM(tup, 3, val);
        PyTuple_SET_ITEM(tup, 4, headers);
        if (one) {
            rc = PyList_Append(list, tup);
            Py_DECREF(tup);
            if (rc < 0) {
                Py_CLEAR(list);
                goto done;
            }
        }
        else
            PyList_SET_ITEM(list, i, tup);
    }
    if (exact && pos != view.len) {
        e.a = view.len - pos;
        rc = E_LEFTOVER;
        goto bad_record;
    }
    goto done;
bad_record:  /* raise rc, the error of record i (E_LEFTOVER: after the last) */
    e.index = i;
    raise_perr(rc, &e);
    Py_CLEAR(list);
done:
    Py_XDECREF(ts_obj);
    Py_XDECREF(empty);
    PyBuffer_Release(&view);
    return list;
}

/* ------------------------------------------------------------------------------------ */
/* encoding                                                                             */

static inline uint64_t
zigzag64(int64_t v)
{
    return ((uint64_t)v << 1) ^ ((uint64_t)0 - ((uint64_t)v >> 63));
}

static inline int
varint_size(int64_t v)
{
    uint64_t z = zigzag64(v);
    int n = 1;
    while (z >= 0x80) {
        z >>= 7;
        n++;
    }
    return n;
}

static inline char *
put_varint(char *p, int64_t v)
{
    uint64_t z = zigzag64(v);
    while (z >= 0x80) {
        *p++ = (char)((z & 0x7f) | 0x80);
        z >>= 7;
    }
    *p++ = (char)z;
    return p;
}

/* Write a bytes field: varint length (-1: null) and the bytes. Returns the end. */
static inline char *
put_bytes(char *p, const char *src, Py_ssize_t len)
{
    p = put_varint(p, len);
    if (len > 0) {
        memcpy(p, src, (size_t)len);
        p += len;
    }
    return p;
}

/* A record's size without its length varint (DefaultRecord.sizeOfBodyInBytes): key and
 * value length -1 for null, `hlen` bytes of `hcount` encoded headers. */
static inline Py_ssize_t
record_body_size(int64_t ts_delta, int64_t od, Py_ssize_t klen, Py_ssize_t vlen,
                 Py_ssize_t hcount, Py_ssize_t hlen)
{
    return 1 + varint_size(ts_delta) + varint_size(od)
           + (klen >= 0 ? varint_size(klen) + klen : 1)
           + (vlen >= 0 ? varint_size(vlen) + vlen : 1)
           + varint_size(hcount) + hlen;
}

/* Write the start of a record of `body` bytes (record_body_size) as DefaultRecord.writeTo
 * does: its length, attributes 0, the timestamp and offset deltas; the key, value and
 * headers follow. Returns the end. */
static inline char *
put_record_start(char *p, Py_ssize_t body, int64_t ts_delta, int64_t od)
{
    p = put_varint(p, body);
    *p++ = 0;  /* attributes */
    p = put_varint(p, ts_delta);
    return put_varint(p, od);
}

/* The output: a bytes object grown in place, shrunk to size at the end. */
typedef struct {
    PyObject *obj;
    Py_ssize_t used, cap;
} wbuf;

static int
wb_init(wbuf *w, Py_ssize_t cap)
{
    if (cap < 64)
        cap = 64;
    w->obj = PyBytes_FromStringAndSize(NULL, cap);
    w->used = 0;
    w->cap = cap;
    return w->obj == NULL ? -1 : 0;
}

/* Make room for `need` more bytes; returns the write pointer or NULL (exception set). */
static char *
wb_reserve(wbuf *w, Py_ssize_t need)
{
    if (w->cap - w->used < need) {
        Py_ssize_t nc = w->cap;
        while (nc - w->used < need) {
            if (nc > PY_SSIZE_T_MAX / 2) {
                if (PY_SSIZE_T_MAX - w->used < need) {
                    PyErr_NoMemory();
                    return NULL;
                }
                nc = w->used + need;
                break;
            }
            nc *= 2;
        }
        if (_PyBytes_Resize(&w->obj, nc) < 0)
            return NULL;  /* w->obj is NULL now */
        w->cap = nc;
    }
    return PyBytes_AS_STRING(w->obj) + w->used;
}

/* Room for a record of `body` bytes: the write pointer, or NULL with ValueError when the
 * body is over INT32_MAX (or with wb_reserve's exception). */
static char *
wb_reserve_record(wbuf *w, Py_ssize_t body)
{
    if (body > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "record of %zd bytes is too large", body);
        return NULL;
    }
    return wb_reserve(w, 5 + body);
}

/* The output shrunk to size and handed over (w->obj is NULL after); NULL on error. */
static PyObject *
wb_finish(wbuf *w)
{
    PyObject *obj;

    if (w->used != w->cap && _PyBytes_Resize(&w->obj, w->used) < 0)
        return NULL;  /* w->obj is NULL now */
    obj = w->obj;
    w->obj = NULL;
    return obj;
}

/* Scratch memory for one record's encoded headers. */
typedef struct {
    char *p;
    Py_ssize_t used, cap;
} scratch;

/* Grow the PyMem_Raw buffer *pp of *cap bytes, `used` of them taken, so that `need` more
 * fit (doubling, from `first` bytes); 0, or -1 when memory runs out (no exception set:
 * callable without the GIL). The one growth rule of scratch and clout buffers. */
static int
raw_grow(void **pp, Py_ssize_t used, Py_ssize_t *cap, Py_ssize_t need, Py_ssize_t first)
{
    Py_ssize_t nc;
    void *np;

    if (*cap - used >= need)
        return 0;
    nc = *cap ? *cap : first;
    while (nc - used < need) {
        if (nc > PY_SSIZE_T_MAX / 2)
            return -1;
        nc *= 2;
    }
    np = PyMem_RawRealloc(*pp, (size_t)nc);
    if (np == NULL)
        return -1;
    *pp = np;
    *cap = nc;
    return 0;
}

static char *
sc_reserve(scratch *s, Py_ssize_t need)
{
    void *p = s->p;
    int rc = raw_grow(&p, s->used, &s->cap, need, 256);

    s->p = p;
    if (rc < 0) {
        PyErr_NoMemory();
        return NULL;
    }
    return s->p + s->used;
}

static int
check_len(Py_ssize_t n, const char *what)
{
    if (n > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s of %zd bytes is too long for a record", what, n);
        return -1;
    }
    return 0;
}

/* Encode the headers sequence `hdrs` into `s` (header count not included); *n gets the
 * number of headers written. Returns 0 or -1 (exception set). */
static int
encode_headers(PyObject *hdrs, scratch *s, Py_ssize_t *n)
{
    PyObject *seq = PySequence_Fast(hdrs, "headers must be a sequence of (key, value) pairs");
    Py_ssize_t j;
    int ok = -1;

    *n = 0;
    if (seq == NULL)
        return -1;
    for (j = 0; j < PySequence_Fast_GET_SIZE(seq); j++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, j), *pair, *hk, *hv;
        bview kb, vb;
        char *p;
        Py_ssize_t need;

        Py_INCREF(item);
        pair = PySequence_Fast(item, "a header must be a (key, value) pair");
        Py_DECREF(item);
        if (pair == NULL)
            goto done;
        if (PySequence_Fast_GET_SIZE(pair) != 2) {
            PyErr_Format(PyExc_ValueError, "a header must be a (key, value) pair, not %zd items",
                         PySequence_Fast_GET_SIZE(pair));
            Py_DECREF(pair);
            goto done;
        }
        hk = PySequence_Fast_GET_ITEM(pair, 0);
        hv = PySequence_Fast_GET_ITEM(pair, 1);
        Py_INCREF(hk);
        Py_INCREF(hv);
        Py_DECREF(pair);
        if (hk == Py_None) {
            PyErr_SetString(PyExc_TypeError, "header key must be str or bytes-like, not None");
            Py_DECREF(hk);
            Py_DECREF(hv);
            goto done;
        }
        if (bv_get(hk, &kb, 1) < 0) {
            Py_DECREF(hk);
            Py_DECREF(hv);
            goto done;
        }
        vb.len = -1;
        vb.has_view = 0;
        if (hv != Py_None && bv_get(hv, &vb, 0) < 0) {
            bv_release(&kb);
            Py_DECREF(hk);
            Py_DECREF(hv);
            goto done;
        }
        if (check_len(kb.len, "header key") < 0 || check_len(vb.len, "header value") < 0)
            p = NULL;
        else {
            need = 10 + kb.len + 10 + (vb.len > 0 ? vb.len : 0);
            p = sc_reserve(s, need);
        }
        if (p != NULL) {
            char *start = p;
            p = put_varint(p, kb.len);
            memcpy(p, kb.p, (size_t)kb.len);
            p += kb.len;
            p = put_varint(p, vb.len);
            if (vb.len > 0) {
                memcpy(p, vb.p, (size_t)vb.len);
                p += vb.len;
            }
            s->used += p - start;
            (*n)++;
        }
        bv_release(&vb);
        bv_release(&kb);
        Py_DECREF(hk);
        Py_DECREF(hv);
        if (p == NULL)
            goto done;
    }
    ok = 0;
done:
    Py_DECREF(seq);
    return ok;
}

/* A rough size of the output, from the bytes keys and values (no Python code runs). */
static Py_ssize_t
estimate_size(PyObject *seq)
{
    Py_ssize_t i, n = PySequence_Fast_GET_SIZE(seq), est = 0;
    for (i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        Py_ssize_t add = 24;
        if (PyTuple_Check(item) && PyTuple_GET_SIZE(item) >= 3) {
            PyObject *k = PyTuple_GET_ITEM(item, 1), *v = PyTuple_GET_ITEM(item, 2);
            if (PyBytes_Check(k))
                add += PyBytes_GET_SIZE(k);
            if (PyBytes_Check(v))
                add += PyBytes_GET_SIZE(v);
        }
        else if (PyBytes_Check(item))
            add += PyBytes_GET_SIZE(item);
        if (est > PY_SSIZE_T_MAX / 2 - add)
            break;
        est += add;
    }
    return est;
}

PyDoc_STRVAR(encode_doc,
"encode(records, base_timestamp, offset_deltas=None, log_append_time=False) -> bytes\n\n"
"The record bodies of `records` ((timestamp, key, value[, headers]) tuples) back to back,\n"
"as DefaultRecord.writeTo writes them: timestampDelta = timestamp - base_timestamp (0 for\n"
"all under log_append_time), offsetDelta = index or offset_deltas[i].");

static PyObject *
sp_encode(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"records", "base_timestamp", "offset_deltas", "log_append_time",
                             NULL};
    PyObject *records, *deltas_obj = Py_None, *seq = NULL, *dseq = NULL, *result = NULL;
    long long base_ts;
    int log_append = 0;
    Py_ssize_t i, n;
    wbuf w = {NULL, 0, 0};
    scratch s = {NULL, 0, 0};

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OL|Op:encode", kwlist, &records, &base_ts,
                                     &deltas_obj, &log_append))
        return NULL;
    seq = PySequence_Fast(records, "records must be a sequence");
    if (seq == NULL)
        return NULL;
    n = PySequence_Fast_GET_SIZE(seq);
    if (deltas_obj != Py_None) {
        dseq = PySequence_Fast(deltas_obj, "offset_deltas must be a sequence of ints");
        if (dseq == NULL)
            goto done;
        if (PySequence_Fast_GET_SIZE(dseq) != n) {
            PyErr_Format(PyExc_ValueError, "%zd offset deltas for %zd records",
                         PySequence_Fast_GET_SIZE(dseq), n);
            goto done;
        }
    }
    if (wb_init(&w, estimate_size(seq)) < 0)
        goto done;
    for (i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *item, *fields, *ts_obj, *k, *v, *h = NULL;
        int64_t ts_delta = 0;
        long long od;
        Py_ssize_t nf, body, hcount = 0;
        bview kb, vb;
        int ok = 0;
        char *p;

        item = PySequence_Fast_GET_ITEM(seq, i);
        Py_INCREF(item);
        fields = PySequence_Fast(item, "a record must be a (timestamp, key, value, headers) "
                                       "tuple");
        Py_DECREF(item);
        if (fields == NULL)
            goto done;
        nf = PySequence_Fast_GET_SIZE(fields);
        if (nf != 3 && nf != 4) {
            PyErr_Format(PyExc_ValueError, "a record must be (timestamp, key, value, headers), "
                         "not %zd items", nf);
            Py_DECREF(fields);
            goto done;
        }
        ts_obj = PySequence_Fast_GET_ITEM(fields, 0);
        k = PySequence_Fast_GET_ITEM(fields, 1);
        v = PySequence_Fast_GET_ITEM(fields, 2);
        if (nf == 4)
            h = PySequence_Fast_GET_ITEM(fields, 3);
        Py_INCREF(ts_obj);
        Py_INCREF(k);
        Py_INCREF(v);
        Py_XINCREF(h);
        Py_DECREF(fields);
        kb.has_view = vb.has_view = 0;
        kb.len = vb.len = -1;

        /* timestamp delta */
        if (!log_append) {
            long long ts = PyLong_AsLongLong(ts_obj);
            if (ts == -1 && PyErr_Occurred())
                goto rec_done;
            if (__builtin_sub_overflow(ts, base_ts, &ts_delta)) {
                PyErr_Format(PyExc_ValueError, "timestamp delta %lld - %lld does not fit in "
                             "64 bits", ts, base_ts);
                goto rec_done;
            }
        }
        /* offset delta */
        if (dseq != NULL) {
            int overflow = 0;
            PyObject *d;
            if (i >= PySequence_Fast_GET_SIZE(dseq)) {
                PyErr_SetString(PyExc_RuntimeError, "offset_deltas changed size");
                goto rec_done;
            }
            d = PySequence_Fast_GET_ITEM(dseq, i);
            Py_INCREF(d);
            od = PyLong_AsLongLongAndOverflow(d, &overflow);
            Py_DECREF(d);
            if (od == -1 && PyErr_Occurred())
                goto rec_done;
            if (overflow || od < INT32_MIN || od > INT32_MAX) {
                PyErr_SetString(PyExc_ValueError, "offset delta does not fit in 32 bits");
                goto rec_done;
            }
        }
        else {
            od = i;
            if (od > INT32_MAX) {
                PyErr_SetString(PyExc_ValueError, "offset delta does not fit in 32 bits");
                goto rec_done;
            }
        }
        /* key, value */
        if (k != Py_None && (bv_get(k, &kb, 0) < 0 || check_len(kb.len, "key") < 0))
            goto rec_done;
        if (v != Py_None && (bv_get(v, &vb, 0) < 0 || check_len(vb.len, "value") < 0))
            goto rec_done;
        /* headers (falsy: none) */
        s.used = 0;
        if (h != NULL && h != Py_None) {
            int truth = PyObject_IsTrue(h);
            if (truth < 0)
                goto rec_done;
            if (truth && encode_headers(h, &s, &hcount) < 0)
                goto rec_done;
        }
        body = record_body_size(ts_delta, od, kb.len, vb.len, hcount, s.used);
        p = wb_reserve_record(&w, body);
        if (p == NULL)
            goto rec_done;
        {  /* put_record_start written out: through it GCC's code for this loop is ~4% slower */
            char *start = p;
            p = put_varint(p, body);
            *p++ = 0;  /* attributes */
            p = put_varint(p, ts_delta);
            p = put_varint(p, od);
            p = put_bytes(p, kb.p, kb.len);
            p = put_bytes(p, vb.p, vb.len);
            p = put_varint(p, hcount);
            if (s.used > 0) {
                memcpy(p, s.p, (size_t)s.used);
                p += s.used;
            }
            w.used += p - start;
        }
        ok = 1;
    rec_done:
        bv_release(&vb);
        bv_release(&kb);
        Py_DECREF(ts_obj);
        Py_DECREF(k);
        Py_DECREF(v);
        Py_XDECREF(h);
        if (!ok)
            goto done;
    }
    result = wb_finish(&w);
done:
    Py_XDECREF(w.obj);
    PyMem_RawFree(s.p);
    Py_XDECREF(dseq);
    Py_DECREF(seq);
    return result;
}

PyDoc_STRVAR(encode_lines_doc,
"encode_lines(lines, timestamp) -> bytes\n\n"
"encode([(timestamp, None, line, ()) for line in lines], timestamp), faster.");

static PyObject *
sp_encode_lines(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"lines", "timestamp", NULL};
    PyObject *lines, *seq, *result = NULL;
    long long ts;
    Py_ssize_t i;
    wbuf w = {NULL, 0, 0};

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OL:encode_lines", kwlist, &lines, &ts))
        return NULL;
    seq = PySequence_Fast(lines, "lines must be a sequence of bytes");
    if (seq == NULL)
        return NULL;
    if (wb_init(&w, estimate_size(seq)) < 0)
        goto done;
    for (i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        bview vb;
        Py_ssize_t body;
        char *p;

        if (i > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "offset delta does not fit in 32 bits");
            goto done;
        }
        Py_INCREF(item);
        if (bv_get(item, &vb, 0) < 0) {
            Py_DECREF(item);
            goto done;
        }
        if (check_len(vb.len, "value") < 0) {
            bv_release(&vb);
            Py_DECREF(item);
            goto done;
        }
        /* timestampDelta 0, offsetDelta i, null key, the value, no headers */
        body = 4 + varint_size(i) + varint_size(vb.len) + vb.len;
        p = wb_reserve_record(&w, body);
        if (p != NULL) {
            char *start = p;
            p = put_record_start(p, body, 0, i);
            *p++ = 1;  /* null key */
            p = put_varint(p, vb.len);
            memcpy(p, vb.p, (size_t)vb.len);
            p += vb.len;
            *p++ = 0;  /* no headers */
            w.used += p - start;
        }
        bv_release(&vb);
        Py_DECREF(item);
        if (p == NULL)
            goto done;
    }
    result = wb_finish(&w);
done:
    Py_XDECREF(w.obj);
    Py_DECREF(seq);
    return result;
}

PyDoc_STRVAR(encode_text_doc,
"encode_text(text, timestamp, budget, ratio=1.0, separator=None)\n"
"    -> (payload, count, consumed)\n\n"
"Encode the '\\n'-terminated lines at the start of `text` (bytes-like) as\n"
"encode_lines would (newline stripped) -- or, with a non-empty `separator`, each line as\n"
"a record keyed by what precedes the separator's first occurrence, the rest its value\n"
"(encode([(timestamp, key, value, ())], timestamp); ValueError for a line without it)\n"
"-- stopping before the line whose record would take\n"
"int(payload bytes so far * ratio) + its size past `budget` bytes -- but always taking\n"
"the first line (the producer's batch.size rule, MemoryRecordsBuilder.hasRoomFor:\n"
"`ratio` is 1.0 for an uncompressed batch, else the estimated compression ratio times\n"
"1.05). Returns the payload, the number of records and the bytes of `text` consumed\n"
"(newlines included). Bytes after the last newline are never consumed.");

static PyObject *
sp_encode_text(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"text", "timestamp", "budget", "ratio", "separator", NULL};
    PyObject *text, *sep_obj = Py_None, *payload = NULL, *result = NULL;
    long long ts;
    Py_ssize_t budget, pos = 0, count = 0;
    double ratio = 1.0;
    bview tv, sv = {NULL, 0, 0};
    wbuf w = {NULL, 0, 0};

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OLn|dO:encode_text", kwlist, &text, &ts,
                                     &budget, &ratio, &sep_obj))
        return NULL;
    if (!(ratio > 0.0 && ratio <= 1e6)) {  /* also refuses NaN */
        PyErr_SetString(PyExc_ValueError, "ratio must be above 0 and at most 1e6");
        return NULL;
    }
    if (sep_obj != Py_None && bv_get(sep_obj, &sv, 0) < 0)
        return NULL;
    if (bv_get(text, &tv, 0) < 0) {
        bv_release(&sv);
        return NULL;
    }
    if (wb_init(&w, tv.len < budget ? tv.len + tv.len / 8 + 64 : budget + 64) < 0)
        goto done;
    while (pos < tv.len) {
        const char *line = tv.p + pos;
        const char *nl = memchr(line, '\n', (size_t)(tv.len - pos));
        Py_ssize_t len, klen, vlen, body, need;
        char *p;

        if (nl == NULL)
            break;
        len = nl - line;
        if (count > INT32_MAX || len > INT32_MAX - 16) {
            PyErr_SetString(PyExc_ValueError, "line or offset delta too large for a record");
            goto done;
        }
        /* the key: what precedes the separator's first occurrence (-1: no key) */
        klen = -1;
        if (sv.len > 0) {
            const char *at = line, *end = line + len;
            while ((at = memchr(at, sv.p[0], (size_t)(end - at))) != NULL) {
                if (end - at >= sv.len && memcmp(at, sv.p, (size_t)sv.len) == 0)
                    break;
                at++;
            }
            if (at == NULL) {
                PyErr_Format(PyExc_ValueError, "line %zd has no key separator", count);
                goto done;
            }
            klen = at - line;
        }
        vlen = klen < 0 ? len : len - klen - sv.len;
        /* timestampDelta 0, offsetDelta count, the key, the value, no headers */
        body = record_body_size(0, count, klen, vlen, 0, 0);
        need = varint_size(body) + body;
        if (count > 0 && (ratio == 1.0 ? w.used : (Py_ssize_t)((double)w.used * ratio))
                         + need > budget)
            break;
        p = wb_reserve(&w, need);
        if (p == NULL)
            goto done;
        {
            char *start = p;
            p = put_record_start(p, body, 0, count);
            p = put_bytes(p, line, klen);
            p = put_bytes(p, line + len - vlen, vlen);
            *p++ = 0;  /* no headers */
            w.used += p - start;
        }
        count++;
        pos += len + 1;
    }
    (void)ts;
    payload = wb_finish(&w);
    if (payload != NULL)
        result = Py_BuildValue("(Nnn)", payload, count, pos);
done:
    Py_XDECREF(w.obj);
    bv_release(&tv);
    bv_release(&sv);
    return result;
}


/* ------------------------------------------------------------------------------------ */
/* render_file_values: plain batches read, checked and rendered without the GIL          */

/* -- reading a run of plain batches (_speedups.h) -------------------------------------- */

Py_ssize_t
pread_full(int fd, uint8_t *buf, Py_ssize_t len, long long position)
{
    Py_ssize_t got = 0;

    while (got < len) {
        ssize_t n = pread(fd, buf + got, (size_t)(len - got), (off_t)(position + got));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            break;
        got += n;
    }
    return got;
}

/* Whether the batch header at `b` (RB_OVERHEAD bytes) is worth reading on: a plain
 * batch below stop_offset (plain_batch_at checks the rest). */
static int
first_is_plain(const uint8_t *b, int64_t stop_offset)
{
    return be64(b) < stop_offset && b[RB_MAGIC_OFFSET] == 2 &&
        (int32_t)be32(b + RB_LENGTH_OFFSET) >= RB_OVERHEAD - RB_LOG_OVERHEAD &&
        !(rb_attributes(b) & RB_NOT_PLAIN);
}

Py_ssize_t
read_plain_window(int fd, long long position, Py_ssize_t length, int64_t stop_offset,
                  uint8_t *buf, int *err)
{
    Py_ssize_t got = pread_full(fd, buf, length < RB_OVERHEAD ? length : RB_OVERHEAD,
                                position);

    if (got == RB_OVERHEAD && first_is_plain(buf, stop_offset) && length > RB_OVERHEAD) {
        Py_ssize_t more = pread_full(fd, buf + RB_OVERHEAD, length - RB_OVERHEAD,
                                     position + RB_OVERHEAD);
        got = more < 0 ? more : got + more;
    }
    if (got < 0)
        *err = errno;
    return got;
}

Py_ssize_t
plain_batch_at(const uint8_t *b, Py_ssize_t left, int64_t stop_offset, int32_t *count,
               int *stopped)
{
    int32_t length;
    Py_ssize_t size;

    if (left < RB_OVERHEAD)
        return 0;
    length = (int32_t)be32(b + RB_LENGTH_OFFSET);
    if (be64(b) >= stop_offset) {
        *stopped = 1;
        return 0;
    }
    if (b[RB_MAGIC_OFFSET] != 2 || length < RB_OVERHEAD - RB_LOG_OVERHEAD)
        return 0;  /* legacy entry, zero tail or a bad size: the general path decides */
    size = (Py_ssize_t)length + RB_LOG_OVERHEAD;
    if (size > left)
        return 0;  /* runs past what was read */
    if (rb_attributes(b) & RB_NOT_PLAIN)
        return 0;
    *count = (int32_t)be32(b + RB_COUNT_OFFSET);
    if (*count < 0)
        return 0;
    if (kk_crc32c(b + RB_ATTRIBUTES_OFFSET, size - RB_ATTRIBUTES_OFFSET) !=
            be32(b + RB_CRC_OFFSET))
        return 0;
    return size;
}

#ifdef KAFKAFS_HAVE_ISAL

/* The render loop's record parser: the record at *ppos, validated as parse_one does (it
 * accepts exactly the records parse_one accepts) but bounded by the record's own length,
 * which spares the general case's work. Returns 0 (*ppos moved past the record, value
 * at *vpos and *vlen, -1 for null), 1 when the record has headers (parse_one must judge
 * them), -1 when it is malformed. */
static inline int
skip_record(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *ppos, Py_ssize_t *vpos,
            int32_t *vlen)
{
    Py_ssize_t pos = *ppos, rend, kpos, vp;
    int32_t length, n, vl;
    int64_t ts;
    perr e;

    if (rd_varint(buf, end, &pos, &length, &e) || length < 0 || end - pos < length)
        return -1;
    rend = pos + length;  /* a field past it fails parse_one's length check anyway */
    if (pos >= rend)
        return -1;
    pos++;  /* attributes */
    /* timestampDelta, offsetDelta, key, value, header count */
    if (rd_varlong(buf, rend, &pos, &ts, &e) || rd_varint(buf, rend, &pos, &n, &e) ||
            rd_field(buf, rend, &pos, &n, &kpos, E_KEY_NEG, &e) ||
            rd_field(buf, rend, &pos, &vl, &vp, E_VAL_NEG, &e) ||
            rd_varint(buf, rend, &pos, &n, &e))
        return -1;
    if (n != 0)
        return 1;
    if (pos != rend)
        return -1;
    *ppos = pos;
    *vpos = vp;
    *vlen = vl;
    return 0;
}

/* Render the records of one plain batch (records section `buf[0:len)`, `count` records)
 * into `out`, which may lie in `buf` before the section (rendering in place: a record
 * renders to no more bytes than it takes, see parse_literals, so what is written never
 * reaches a byte not yet parsed). Returns the bytes written, or -1 when a record is
 * malformed (nothing counts then: the caller drops what was written). */
static Py_ssize_t
render_batch_records(const uint8_t *buf, Py_ssize_t len, int32_t count, char *out,
                     const char *nl, Py_ssize_t nlen, const char *sep, Py_ssize_t slen)
{
    Py_ssize_t pos = 0;
    char *o = out;
    rec_t r;
    perr e = {0};
    int32_t i;

    for (i = 0; i < count; i++) {
        int rc = skip_record(buf, len, &pos, &r.val_pos, &r.val_len);
        if (rc > 0 && parse_one(buf, len, &pos, &r, NULL, &e))
            return -1;
        if (rc < 0)
            return -1;
        o = put_value(o, buf + r.val_pos, r.val_len, nl, nlen, sep, slen);
    }
    if (pos != len)
        return -1;  /* bytes after the last record of an uncompressed batch */
    return o - out;
}

/* The loop of render_file_values over `buf[0:len)` (read from the file), rendering in
 * place: the output starts at buf[0] (each batch's CRC is checked before its bytes are
 * overwritten). No Python objects. Returns the bytes of output; *consumed: bytes of whole
 * batches rendered; *stopped: 1 when it stopped at a batch at or past stop_offset. */
static Py_ssize_t
render_plain_run(uint8_t *buf, Py_ssize_t len, int64_t stop_offset,
                 const char *nl, Py_ssize_t nlen, const char *sep, Py_ssize_t slen,
                 Py_ssize_t *consumed, int *stopped)
{
    char *out = (char *)buf;
    Py_ssize_t pos = 0, written = 0, size, n;
    int32_t count;

    *stopped = 0;
    while ((size = plain_batch_at(buf + pos, len - pos, stop_offset, &count, stopped)) > 0) {
        n = render_batch_records(buf + pos + RB_OVERHEAD, size - RB_OVERHEAD, count,
                                 out + written, nl, nlen, sep, slen);
        if (n < 0)
            break;
        written += n;
        pos += size;
    }
    *consumed = pos;
    return written;
}

/* the null literal and separator of a render, copied (at most 7 bytes together) */
typedef struct {
    char nl[MIN_RECORD_SIZE + 1], sep[MIN_RECORD_SIZE + 1];
    Py_ssize_t nlen, slen;
} lits_t;

/* Fill `l` from the optional null_literal and separator arguments; -1 with ValueError
 * when together they could outgrow the input (a record takes >= MIN_RECORD_SIZE bytes plus
 * its value, so with these bounds the output never needs more room than the bytes read). */
/* Copy the bytes of `obj` (when given) into `dst` (room for MIN_RECORD_SIZE + 1) and set
 * *len; a longer value only sets *len (parse_literals refuses it). -1 on a buffer error. */
static int
take_literal(PyObject *obj, char *dst, Py_ssize_t *len)
{
    Py_buffer v;

    if (obj == NULL)
        return 0;
    if (get_buffer(obj, &v) < 0)
        return -1;
    *len = v.len;
    if (v.len <= MIN_RECORD_SIZE)
        memcpy(dst, v.buf, (size_t)v.len);
    PyBuffer_Release(&v);
    return 0;
}

static int
parse_literals(PyObject *null_obj, PyObject *sep_obj, lits_t *l)
{
    memcpy(l->nl, "null", 4);
    l->nlen = 4;
    l->sep[0] = '\n';
    l->slen = 1;
    if (take_literal(null_obj, l->nl, &l->nlen) < 0 ||
            take_literal(sep_obj, l->sep, &l->slen) < 0)
        return -1;
    if (l->nlen + l->slen > MIN_RECORD_SIZE || l->slen > MIN_RECORD_SIZE - 1) {
        PyErr_SetString(PyExc_ValueError,
                        "null literal + separator must be <= 7 bytes, separator <= 6");
        return -1;
    }
    return 0;
}

/* The whole render without Python objects: read `length` bytes of `fd` at `position` into
 * `buf` (room for `length`, read_plain_window) and render them there in place. Returns the
 * bytes of output at `buf`, or -1 with *err set (errno of the read). */
static Py_ssize_t
render_from_file(int fd, long long position, Py_ssize_t length, int64_t stop_offset,
                 uint8_t *buf, const lits_t *l, Py_ssize_t *consumed, int *stopped, int *err)
{
    Py_ssize_t got = read_plain_window(fd, position, length, stop_offset, buf, err);

    if (got < 0)
        return -1;
    return render_plain_run(buf, got, stop_offset, l->nl, l->nlen, l->sep, l->slen,
                            consumed, stopped);
}

PyDoc_STRVAR(render_file_values_doc,
"render_file_values(fd, position, length, stop_offset, null_literal=b'null',"
" separator=b'\\n') -> (bytes, next_position, stopped)\n\n"
"Read `length` bytes of a segment file at `position` (a batch start) and render, as\n"
"render_values does, every value of each whole plain batch there: magic 2, uncompressed,\n"
"neither transactional nor control, with a valid CRC-32C and well-formed records. Stops\n"
"before the first batch that is not, that runs past the bytes read, or whose base offset\n"
"is >= stop_offset (stopped is then True). next_position is the file position it stopped\n"
"at: the general (Python) path takes over there. The read, the CRC and the rendering run\n"
"with the GIL released. Raises OSError from pread; ValueError when a null literal plus\n"
"separator is over 7 bytes or a separator over 6 (the output would outgrow the input).");

static PyObject *
sp_render_file_values(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"fd", "position", "length", "stop_offset", "null_literal",
                             "separator", NULL};
    int fd, stopped = 0, err = 0;
    long long position, stop_offset;
    Py_ssize_t length, consumed = 0, written;
    PyObject *null_obj = NULL, *sep_obj = NULL, *out, *result;
    lits_t l;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "iLnL|OO:render_file_values", kwlist,
                                     &fd, &position, &length, &stop_offset, &null_obj,
                                     &sep_obj))
        return NULL;
    if (position < 0 || length < 0) {
        PyErr_SetString(PyExc_ValueError, "position and length must be >= 0");
        return NULL;
    }
    if (parse_literals(null_obj, sep_obj, &l) < 0)
        return NULL;
    out = PyBytes_FromStringAndSize(NULL, length);
    if (out == NULL)
        return NULL;
    {
        uint8_t *o = (uint8_t *)PyBytes_AS_STRING(out);
        Py_BEGIN_ALLOW_THREADS
        written = render_from_file(fd, position, length, stop_offset, o, &l, &consumed,
                                   &stopped, &err);
        Py_END_ALLOW_THREADS
    }
    if (written < 0) {
        Py_DECREF(out);
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (_PyBytes_Resize(&out, written) < 0)
        return NULL;
    result = Py_BuildValue("(OLO)", out, position + (long long)consumed,
                           stopped ? Py_True : Py_False);
    Py_DECREF(out);
    return result;
}

#endif  /* KAFKAFS_HAVE_ISAL */

/* ------------------------------------------------------------------------------------ */

static PyMethodDef methods[] = {
    {"values", (PyCFunction)(void (*)(void))sp_values, METH_VARARGS | METH_KEYWORDS,
     values_doc},
    {"render_values", (PyCFunction)(void (*)(void))sp_render_values,
     METH_VARARGS | METH_KEYWORDS, render_values_doc},
    {"rendered_size", (PyCFunction)(void (*)(void))sp_rendered_size,
     METH_VARARGS | METH_KEYWORDS, rendered_size_doc},
    {"decode", (PyCFunction)(void (*)(void))sp_decode, METH_VARARGS | METH_KEYWORDS,
     decode_doc},
    {"encode", (PyCFunction)(void (*)(void))sp_encode, METH_VARARGS | METH_KEYWORDS,
     encode_doc},
    {"encode_lines", (PyCFunction)(void (*)(void))sp_encode_lines,
     METH_VARARGS | METH_KEYWORDS, encode_lines_doc},
    {"encode_text", (PyCFunction)(void (*)(void))sp_encode_text,
     METH_VARARGS | METH_KEYWORDS, encode_text_doc},
#ifdef KAFKAFS_HAVE_ISAL
    {"render_file_values", (PyCFunction)(void (*)(void))sp_render_file_values,
     METH_VARARGS | METH_KEYWORDS, render_file_values_doc},
#endif
    {NULL, NULL, 0, NULL}
};

static int cl_add_functions(PyObject *m);  /* the log cleaner's functions (end of file) */
static int cb_add_type(PyObject *m);  /* ColumnBuilder, the Spark reader's columns (end of file) */

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "kafkafs.record._speedups",
    "C versions of the record hot paths; use kafkafs.record.fast, which falls back to\n"
    "pure Python when this module is missing.",
    -1,
    methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyObject *m, *errors;

    errors = PyImport_ImportModule("kafkafs.record.errors");
    if (errors == NULL)
        return NULL;
    Py_XDECREF(CorruptRecordError);
    CorruptRecordError = PyObject_GetAttrString(errors, "CorruptRecordError");
    Py_DECREF(errors);
    if (CorruptRecordError == NULL)
        return NULL;
    m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (cl_add_functions(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (cb_add_type(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (jsonl_add_functions(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(CorruptRecordError);
    if (PyModule_AddObject(m, "CorruptRecordError", CorruptRecordError) < 0) {
        Py_DECREF(CorruptRecordError);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

/* ==================================================================================== */
/* The log cleaner's record work: the C side of kafkafs.record.compaction (its module    */
/* docstring describes every function; the pure-Python twins there give the same        */
/* results and errors). Functions are registered by cl_add_functions, called from        */
/* PyInit__speedups.                                                                     */

#define CL_HASH 16
#define CL_ENTRY 24
#define CL_TS_TYPE 0x08
#define CL_HORIZON 0x40
#define CL_STATUS_END 0
#define CL_STATUS_FULL 1
#define CL_STATUS_OTHER 2
#define CL_MODE_FILTER 0
#define CL_MODE_KEEP 1
#define CL_MODE_DROP 2

static inline void
cl_put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline void
cl_put_be64(uint8_t *p, int64_t v)
{
    cl_put_be32(p, (uint32_t)((uint64_t)v >> 32));
    cl_put_be32(p + 4, (uint32_t)(uint64_t)v);
}

static inline uint64_t
cl_le64(const uint8_t *p)
{
    uint64_t v = 0;
    int i;
    for (i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* -- CRC-32C (Kafka's Crc32C): ISA-L, SSE4.2, or slicing-by-8 ----------------------- */

static uint32_t cl_crc_table[8][256];
static int cl_have_sse42 = 0;

static void
cl_crc_init(void)
{
    uint32_t i, j, c;
    for (i = 0; i < 256; i++) {
        c = i;
        for (j = 0; j < 8; j++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        cl_crc_table[0][i] = c;
    }
    for (i = 0; i < 256; i++)
        for (j = 1; j < 8; j++)
            cl_crc_table[j][i] = (cl_crc_table[j - 1][i] >> 8) ^
                cl_crc_table[0][cl_crc_table[j - 1][i] & 0xff];
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    cl_have_sse42 = __builtin_cpu_supports("sse4.2");
#endif
}

#ifndef KAFKAFS_HAVE_ISAL
static uint32_t
cl_crc_sw(uint32_t crc, const uint8_t *p, size_t n)
{
    while (n >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                             ((uint32_t)p[3] << 24));
        uint32_t hi = (uint32_t)p[4] | ((uint32_t)p[5] << 8) | ((uint32_t)p[6] << 16) |
            ((uint32_t)p[7] << 24);
        crc = cl_crc_table[7][lo & 0xff] ^ cl_crc_table[6][(lo >> 8) & 0xff] ^
            cl_crc_table[5][(lo >> 16) & 0xff] ^ cl_crc_table[4][lo >> 24] ^
            cl_crc_table[3][hi & 0xff] ^ cl_crc_table[2][(hi >> 8) & 0xff] ^
            cl_crc_table[1][(hi >> 16) & 0xff] ^ cl_crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ cl_crc_table[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2")))
static uint32_t
cl_crc_hw(uint32_t crc, const uint8_t *p, size_t n)
{
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        n -= 8;
    }
    crc = (uint32_t)c;
    while (n--)
        crc = __builtin_ia32_crc32qi(crc, *p++);
    return crc;
}
#endif
#endif  /* !KAFKAFS_HAVE_ISAL */

uint32_t
kk_crc32c(const uint8_t *p, Py_ssize_t n)
{
#ifdef KAFKAFS_HAVE_ISAL
    return ~crc32_iscsi((unsigned char *)p, (int)n, 0xFFFFFFFFu);
#else
#if defined(__x86_64__) && defined(__GNUC__)
    if (cl_have_sse42)
        return ~cl_crc_hw(0xFFFFFFFFu, p, (size_t)n);
#endif
    return ~cl_crc_sw(0xFFFFFFFFu, p, (size_t)n);
#endif
}

/* -- MurmurHash3 x64 128 (Austin Appleby, public domain) --------------------------------- */

static inline uint64_t
cl_rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

static inline uint64_t
cl_fmix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

/* MurmurHash3's scrambling of a 64-bit key block (k1: c1, 31, c2; k2: c2, 33, c1). */
static inline uint64_t
cl_mix_k(uint64_t k, uint64_t ca, int r, uint64_t cb)
{
    k *= ca;
    k = cl_rotl(k, r);
    return k * cb;
}

static void
cl_murmur3(const uint8_t *data, Py_ssize_t len, uint32_t seed, uint8_t out[CL_HASH])
{
    const uint64_t c1 = 0x87c37b91114253d5ULL, c2 = 0x4cf5ad432745937fULL;
    uint64_t h1 = seed, h2 = seed, k1, k2;
    Py_ssize_t nblocks = len / 16, i;
    const uint8_t *tail;
    int t, b;

    for (i = 0; i < nblocks; i++) {
        h1 ^= cl_mix_k(cl_le64(data + i * 16), c1, 31, c2);
        h1 = cl_rotl(h1, 27);
        h1 += h2;
        h1 = h1 * 5 + 0x52dce729;
        h2 ^= cl_mix_k(cl_le64(data + i * 16 + 8), c2, 33, c1);
        h2 = cl_rotl(h2, 31);
        h2 += h1;
        h2 = h2 * 5 + 0x38495ab5;
    }
    tail = data + nblocks * 16;
    t = (int)(len & 15);
    k1 = 0;
    k2 = 0;
    if (t > 8) {
        for (b = t - 1; b >= 8; b--)
            k2 = (k2 << 8) | tail[b];
        h2 ^= cl_mix_k(k2, c2, 33, c1);
    }
    if (t > 0) {
        for (b = (t < 8 ? t : 8) - 1; b >= 0; b--)
            k1 = (k1 << 8) | tail[b];
        h1 ^= cl_mix_k(k1, c1, 31, c2);
    }
    h1 ^= (uint64_t)len;
    h2 ^= (uint64_t)len;
    h1 += h2;
    h2 += h1;
    h1 = cl_fmix(h1);
    h2 = cl_fmix(h2);
    h1 += h2;
    h2 += h1;
    for (b = 0; b < 8; b++) {
        out[b] = (uint8_t)(h1 >> (8 * b));
        out[8 + b] = (uint8_t)(h2 >> (8 * b));
    }
}

/* -- the offset map ---------------------------------------------------------------------- */

typedef struct {
    uint8_t *buf;
    Py_ssize_t slots;
} clmap;

/* The first slot on hash h's probe sequence: the high 64 bits of h * slots (Lemire's
 * multiply-shift range reduction; a 64-bit division would cost ~40 cycles per probe). */
static inline Py_ssize_t
cl_home_slot(const uint8_t *h, Py_ssize_t slots)
{
#ifdef __SIZEOF_INT128__
    return (Py_ssize_t)(((unsigned __int128)cl_le64(h) * (uint64_t)slots) >> 64);
#else
#error "the offset map needs a compiler with unsigned __int128 (GCC, Clang)"
#endif
}

static inline int
cl_slot_empty(const uint8_t *p)
{
    static const uint8_t zero[CL_ENTRY] = {0};
    return memcmp(p, zero, CL_ENTRY) == 0;
}

/* The byte position of the slot holding hash h (*found = 1), else of the first empty slot
 * on its probe sequence (*found = 0); -1 when every slot holds another key. */
static Py_ssize_t
cl_find(const clmap *m, const uint8_t *h, int *found)
{
    Py_ssize_t slot = cl_home_slot(h, m->slots), attempt;
    for (attempt = 0; attempt < m->slots; attempt++) {
        uint8_t *p = m->buf + slot * CL_ENTRY;
        if (cl_slot_empty(p)) {
            *found = 0;
            return slot * CL_ENTRY;
        }
        if (memcmp(p, h, CL_HASH) == 0) {
            *found = 1;
            return slot * CL_ENTRY;
        }
        if (++slot == m->slots)
            slot = 0;
    }
    *found = 0;
    return -1;
}

/* The offset stored for hash h, or -1. */
static inline int64_t
cl_lookup(const clmap *m, const uint8_t *h)
{
    int found;
    Py_ssize_t pos = cl_find(m, h, &found);
    return found ? be64(m->buf + pos + CL_HASH) : -1;
}

/* Store offset for hash h. Returns 0, or -1 when the map is full (*size >= slots). */
static int
cl_store(const clmap *m, Py_ssize_t *size, const uint8_t *h, int64_t offset)
{
    int found;
    Py_ssize_t pos;
    if (*size >= m->slots)
        return -1;
    pos = cl_find(m, h, &found);
    if (pos < 0)
        return -1;
    if (!found) {
        memcpy(m->buf + pos, h, CL_HASH);
        (*size)++;
    }
    cl_put_be64(m->buf + pos + CL_HASH, offset);
    return 0;
}

static void
cl_full_error(Py_ssize_t size, Py_ssize_t slots)
{
    PyErr_Format(PyExc_ValueError, "Attempted to add a new entry to a full offset map, "
                 "entries: %zd, slots: %zd", size, slots);
}

/* Get a writable buffer of `obj` holding `slots` slots into m (view released by caller). */
static int
cl_get_map(PyObject *obj, Py_ssize_t slots, Py_buffer *view, clmap *m)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0)
        return -1;
    if (view->readonly) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_TypeError, "the offset map's buffer must be writable");
        return -1;
    }
    if (slots <= 0 || slots > view->len / CL_ENTRY) {
        PyErr_Format(PyExc_ValueError, "%zd slots do not fit a buffer of %zd bytes", slots,
                     view->len);
        PyBuffer_Release(view);
        return -1;
    }
    m->buf = view->buf;
    m->slots = slots;
    return 0;
}

/* Validate a payload as kafkafs.record.fast.values does (no GIL needed). */
static int
cl_validate(const uint8_t *buf, Py_ssize_t len, Py_ssize_t count, perr *e)
{
    e->count = count;
    if (count < 0) {
        e->a = count;
        return E_COUNT_NEG;
    }
    return scan_values(buf, len, count, 1, NULL, 0, 0, 0, NULL, e);
}

/* The record at *ppos of a validated payload: body start (attributes), position after the
 * timestamp delta, end; timestamp delta, offset delta, key (position, length -1 null),
 * whether the value is null. */
typedef struct {
    Py_ssize_t attr, after_ts, end, key_pos;
    int64_t ts_delta;
    int32_t off_delta, key_len;
    int null_value;
} clrec;

static inline void
cl_next_record(const uint8_t *buf, Py_ssize_t len, Py_ssize_t *ppos, clrec *r)
{
    Py_ssize_t pos = *ppos;
    int32_t length = 0, vl = 0;
    perr e;
    r->ts_delta = 0;
    r->off_delta = r->key_len = 0;
    rd_varint(buf, len, &pos, &length, &e);
    r->attr = pos;
    r->end = pos + length;
    pos++;
    rd_varlong(buf, len, &pos, &r->ts_delta, &e);
    r->after_ts = pos;
    rd_varint(buf, len, &pos, &r->off_delta, &e);
    rd_varint(buf, len, &pos, &r->key_len, &e);
    r->key_pos = pos;
    if (r->key_len > 0)
        pos += r->key_len;
    rd_varint(buf, len, &pos, &vl, &e);
    r->null_value = vl < 0;
    *ppos = r->end;
}

/* Records are looked at in windows of CL_WIN: the keys of a window are hashed and their
 * slots prefetched first, so that the cache misses of the (random) map accesses overlap;
 * then the window's records are handled one by one, in order. */
#define CL_WIN 32

typedef struct {
    clrec r;
    int64_t offset;
    uint8_t h[CL_HASH];
} clwin;

static inline void
cl_prefetch(const clmap *m, const uint8_t *h)
{
    const uint8_t *p = m->buf + cl_home_slot(h, m->slots) * CL_ENTRY;
    __builtin_prefetch(p);
    __builtin_prefetch(p + CL_ENTRY - 1);
}

/* Parse up to CL_WIN records from *ppos (record *pi of count); hash and prefetch the keys
 * of those with `want(offset)`. Returns how many were parsed. */
static Py_ssize_t
cl_window(const uint8_t *buf, Py_ssize_t len, Py_ssize_t *ppos, Py_ssize_t *pi,
          Py_ssize_t count, int64_t base_offset, const clmap *m, int64_t min_offset,
          int64_t max_offset, clwin *w)
{
    Py_ssize_t n = 0;
    while (n < CL_WIN && *pi < count) {
        clwin *e = &w[n++];
        cl_next_record(buf, len, ppos, &e->r);
        (*pi)++;
        e->offset = wrap_add(base_offset, e->r.off_delta);
        if (m != NULL && e->r.key_len >= 0 && e->offset >= min_offset &&
                e->offset <= max_offset) {
            cl_murmur3(buf + e->r.key_pos, e->r.key_len, 0, e->h);
            cl_prefetch(m, e->h);
        }
    }
    return n;
}

/* map_records' loop over a validated payload. Returns 1 when the map filled up, else 0
 * (-1: the map is full of slots, which max_size < slots never lets happen). */
static int
cl_map_core(const uint8_t *buf, Py_ssize_t len, Py_ssize_t count, int64_t base_offset,
            const clmap *m, Py_ssize_t *size, Py_ssize_t max_size, int64_t start_offset,
            int64_t *last)
{
    Py_ssize_t pos = 0, i = 0, n, j;
    clwin w[CL_WIN];
    while (i < count) {
        n = cl_window(buf, len, &pos, &i, count, base_offset, m, start_offset, INT64_MAX, w);
        for (j = 0; j < n; j++) {
            if (w[j].r.key_len < 0 || w[j].offset < start_offset)
                continue;
            if (*size >= max_size)
                return 1;
            if (cl_store(m, size, w[j].h, w[j].offset) < 0)
                return -1;
            *last = w[j].offset;
        }
    }
    return 0;
}

/* The batch at pos of buf[0:end) if the loops take it on: returns its size (> 0), or
 * CL_NOT_TAKEN(status) < 0 with status CL_STATUS_END / CL_STATUS_OTHER. */
#define CL_NOT_TAKEN(status) (-1 - (status))
static Py_ssize_t
cl_plain_batch(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end)
{
    const uint8_t *b = buf + pos;
    int32_t length, count;
    Py_ssize_t size;
    perr e;
    if (end - pos < HEADER_PEEK_BYTES)
        return CL_NOT_TAKEN(CL_STATUS_END);
    if (b[RB_MAGIC_OFFSET] != 2)
        return CL_NOT_TAKEN(CL_STATUS_OTHER);
    length = (int32_t)be32(b + RB_LENGTH_OFFSET);
    if (length < RB_OVERHEAD - RB_LOG_OVERHEAD)
        return CL_NOT_TAKEN(CL_STATUS_OTHER);
    size = (Py_ssize_t)length + RB_LOG_OVERHEAD;
    if (size > end - pos)
        return CL_NOT_TAKEN(CL_STATUS_END);
    count = (int32_t)be32(b + RB_COUNT_OFFSET);
    if ((rb_attributes(b) & RB_NOT_PLAIN) || count < 0)
        return CL_NOT_TAKEN(CL_STATUS_OTHER);
    if (kk_crc32c(b + RB_ATTRIBUTES_OFFSET, size - RB_ATTRIBUTES_OFFSET) !=
            be32(b + RB_CRC_OFFSET))
        return CL_NOT_TAKEN(CL_STATUS_OTHER);
    if (cl_validate(b + RB_OVERHEAD, size - RB_OVERHEAD, count, &e))
        return CL_NOT_TAKEN(CL_STATUS_OTHER);
    return size;
}

/* -- output buffer (malloc'd, no GIL needed) ---------------------------------------------- */

typedef struct {
    uint8_t *p;
    Py_ssize_t used, cap;
} clout;

static uint8_t *
co_reserve(clout *o, Py_ssize_t need)
{
    void *p = o->p;
    int rc = raw_grow(&p, o->used, &o->cap, need, 4096);

    o->p = p;
    return rc < 0 ? NULL : o->p + o->used;
}

/* -- filtering ----------------------------------------------------------------------------- */

typedef struct {
    Py_ssize_t kept, invalid, dropped;
    int unchanged;
    int64_t new_base, horizon, max_ts;
} clres;

typedef struct {
    Py_ssize_t attr, after_ts, end;
    int64_t ts_delta;
} clkeep;

/* filter_records on a validated payload. The kept records are re-encoded into o (when the
 * batch changes); keep is scratch for `count` entries. Returns 0, or -1 (out of memory). */
static int
cl_filter_core(const uint8_t *buf, Py_ssize_t len, Py_ssize_t count, int64_t base_offset,
               int64_t base_ts, int has_fixed, int64_t fixed_ts, const clmap *m,
               int64_t latest, int retain_deletes, int mode, int64_t batch_horizon,
               int64_t new_horizon, int marker, clkeep *keep, clout *o, clres *res)
{
    Py_ssize_t pos = 0, i, n = 0;
    int tombstones = 0, need_horizon;
    int64_t horizon, new_base, max_ts;

    res->invalid = res->dropped = 0;
    res->unchanged = 0;
    i = 0;
    while (i < count) {
        clwin w[CL_WIN];
        Py_ssize_t wn = cl_window(buf, len, &pos, &i, count, base_offset,
                                  mode == CL_MODE_FILTER ? m : NULL, INT64_MIN, latest, w),
            j;
        for (j = 0; j < wn; j++) {
            int k;
            int64_t offset = w[j].offset;
            const clrec *rp = &w[j].r;
            if (mode == CL_MODE_KEEP)
                k = 1;
            else if (mode == CL_MODE_DROP)
                k = 0;
            else if (offset > latest)
                k = 1;
            else if (rp->key_len < 0) {
                res->invalid++;
                k = 0;
            }
            else {
                int found_slot;
                Py_ssize_t at = cl_find(m, w[j].h, &found_slot);
                int64_t found = found_slot ? be64(m->buf + at + CL_HASH) : -1;
                k = offset >= found && (!rp->null_value || retain_deletes);
            }
            if (k) {
                keep[n].attr = rp->attr;
                keep[n].after_ts = rp->after_ts;
                keep[n].end = rp->end;
                keep[n].ts_delta = rp->ts_delta;
                n++;
                tombstones |= rp->null_value;
            }
            else if (rp->null_value && rp->key_len >= 0)
                res->dropped++;
        }
    }
    res->kept = n;
    if (n == 0) {
        res->new_base = res->horizon = res->max_ts = -1;
        return 0;
    }
    need_horizon = batch_horizon < 0 && (tombstones || marker);
    if (n == count && !need_horizon) {
        res->unchanged = 1;
        res->new_base = base_ts;
        res->horizon = batch_horizon;
        res->max_ts = -1;
        return 0;
    }
    horizon = batch_horizon >= 0 ? batch_horizon : (need_horizon ? new_horizon : -1);
#define CL_TS(d) (has_fixed ? fixed_ts : wrap_add(base_ts, (d)))
    new_base = horizon >= 0 ? horizon : CL_TS(keep[0].ts_delta);
    max_ts = -1;
    for (i = 0; i < n; i++) {
        int64_t ts = CL_TS(keep[i].ts_delta), delta;
        Py_ssize_t rest = keep[i].end - keep[i].after_ts, body;
        uint8_t *w;
        if (ts > max_ts)
            max_ts = ts;
        delta = (int64_t)((uint64_t)ts - (uint64_t)new_base);
        body = 1 + varint_size(delta) + rest;
        w = co_reserve(o, 5 + body);
        if (w == NULL)
            return -1;
        w = (uint8_t *)put_varint((char *)w, body);
        *w++ = buf[keep[i].attr];
        w = (uint8_t *)put_varint((char *)w, delta);
        memcpy(w, buf + keep[i].after_ts, (size_t)rest);
        w += rest;
        o->used = w - o->p;
    }
#undef CL_TS
    if (has_fixed)
        max_ts = fixed_ts;
    res->new_base = new_base;
    res->horizon = horizon;
    res->max_ts = max_ts;
    return 0;
}

/* Write a v2 header at o->p + at for a batch of `size` bytes whose records follow it. */
static void
cl_write_header(uint8_t *p, Py_ssize_t size, const uint8_t *orig, int attributes,
                int64_t base_ts, int64_t max_ts, int32_t count)
{
    memcpy(p, orig, RB_OVERHEAD);  /* base offset, leader epoch, magic, last offset delta,
                                    * producer id, epoch, base sequence */
    cl_put_be32(p + RB_LENGTH_OFFSET, (uint32_t)(size - RB_LOG_OVERHEAD));
    p[RB_ATTRIBUTES_OFFSET] = (uint8_t)(attributes >> 8);
    p[RB_ATTRIBUTES_OFFSET + 1] = (uint8_t)attributes;
    cl_put_be64(p + RB_BASE_TIMESTAMP_OFFSET, base_ts);
    cl_put_be64(p + RB_MAX_TIMESTAMP_OFFSET, max_ts);
    cl_put_be32(p + RB_COUNT_OFFSET, (uint32_t)count);
    cl_put_be32(p + RB_CRC_OFFSET, kk_crc32c(p + RB_ATTRIBUTES_OFFSET,
                                             size - RB_ATTRIBUTES_OFFSET));
}

static int
cl_in_sorted(const int64_t *a, Py_ssize_t n, int64_t v)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (a[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && a[lo] == v;
}

typedef struct {
    long long read, kept, bytes_read, bytes_written, invalid, dropped;
} clstats;

/* filter_batches' loop (no GIL). Returns the status, or -1 (out of memory). */
static int
cl_filter_loop(const uint8_t *buf, Py_ssize_t *ppos, Py_ssize_t end, const clmap *m,
               int64_t latest, int64_t now, int64_t retention, const int64_t *prot,
               Py_ssize_t nprot, int64_t upper_bound, clout *o, clstats *st)
{
    Py_ssize_t pos = *ppos;
    clkeep *keep = NULL;
    Py_ssize_t keep_cap = 0;
    int status;

    for (;;) {
        Py_ssize_t size = cl_plain_batch(buf, pos, end), start;
        const uint8_t *b;
        int32_t count;
        int attributes;
        int64_t base, last, base_ts, max_ts, pid, horizon;
        clres res;

        if (size < 0) {
            status = (int)(-1 - size);
            break;
        }
        b = buf + pos;
        base = be64(b);
        last = rb_last_offset(b);
        pid = be64(b + RB_PRODUCER_ID_OFFSET);
        if ((pid >= 0 && cl_in_sorted(prot, nprot, last)) || wrap_add(last, 1) == upper_bound) {
            status = CL_STATUS_OTHER;
            break;
        }
        attributes = rb_attributes(b);
        count = (int32_t)be32(b + RB_COUNT_OFFSET);
        base_ts = be64(b + RB_BASE_TIMESTAMP_OFFSET);
        max_ts = be64(b + RB_MAX_TIMESTAMP_OFFSET);
        horizon = (attributes & CL_HORIZON) ? base_ts : -1;
        if (count > keep_cap) {
            clkeep *nk = PyMem_RawRealloc(keep, (size_t)count * sizeof(clkeep));
            if (nk == NULL) {
                PyMem_RawFree(keep);
                return -1;
            }
            keep = nk;
            keep_cap = count;
        }
        /* room for the header first: the records are written after it */
        if (co_reserve(o, RB_OVERHEAD) == NULL) {
            PyMem_RawFree(keep);
            return -1;
        }
        start = o->used;
        o->used += RB_OVERHEAD;
        if (cl_filter_core(b + RB_OVERHEAD, size - RB_OVERHEAD, count, base, base_ts,
                           attributes & CL_TS_TYPE, max_ts, m, latest,
                           horizon < 0 || now < horizon, CL_MODE_FILTER, horizon,
                           wrap_add(now, retention), 0, keep, o,
                           &res) < 0) {
            PyMem_RawFree(keep);
            return -1;
        }
        st->read += count;
        st->kept += res.kept;
        st->bytes_read += size;
        st->invalid += res.invalid;
        st->dropped += res.dropped;
        if (res.unchanged) {
            uint8_t *w;
            o->used = start;
            w = co_reserve(o, size);
            if (w == NULL) {
                PyMem_RawFree(keep);
                return -1;
            }
            memcpy(w, b, (size_t)size);
            o->used += size;
            st->bytes_written += size;
        }
        else if (res.kept == 0)
            o->used = start;
        else {
            Py_ssize_t bsize = o->used - start;
            int attrs = res.horizon >= 0 ? (attributes | CL_HORIZON) : (attributes & ~CL_HORIZON);
            cl_write_header(o->p + start, bsize, b, attrs, res.new_base, res.max_ts,
                            (int32_t)res.kept);
            st->bytes_written += bsize;
        }
        pos += size;
    }
    PyMem_RawFree(keep);
    *ppos = pos;
    return status;
}

/* map_batches' loop (no GIL). Returns the status, or -1 (internal: map full). */
static int
cl_map_loop(const uint8_t *buf, Py_ssize_t *ppos, Py_ssize_t end, const clmap *m,
            Py_ssize_t *size, Py_ssize_t max_size, int64_t start_offset, int64_t *latest)
{
    Py_ssize_t pos = *ppos;
    int status;
    for (;;) {
        Py_ssize_t bsize = cl_plain_batch(buf, pos, end);
        const uint8_t *b;
        int64_t base, last, put = -1;
        int32_t count;
        int rc;
        if (bsize < 0) {
            status = (int)(-1 - bsize);
            break;
        }
        b = buf + pos;
        base = be64(b);
        count = (int32_t)be32(b + RB_COUNT_OFFSET);
        rc = cl_map_core(b + RB_OVERHEAD, bsize - RB_OVERHEAD, count, base, m, size, max_size,
                         start_offset, &put);
        if (put >= 0)
            *latest = put;
        if (rc < 0)
            return -1;
        if (rc > 0) {
            status = CL_STATUS_FULL;
            break;
        }
        last = rb_last_offset(b);
        if (last >= start_offset)
            *latest = last;
        pos += bsize;
    }
    *ppos = pos;
    return status;
}

/* -- Python entry points ----------------------------------------------------------------- */

/* The buffer of a payload of `count` records, validated (cl_validate, GIL held); -1 with
 * the exception set (the view released). */
static inline int
cl_get_payload(PyObject *obj, Py_ssize_t count, Py_buffer *view)
{
    perr e = {0};
    int rc;

    if (get_buffer(obj, view) < 0)
        return -1;
    rc = cl_validate(view->buf, view->len, count, &e);
    if (rc) {
        raise_perr(rc, &e);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* The buffer of a run of batches, *end clamped to it; -1 with the exception set (the view
 * released) when it fails or pos is outside [0, *end]. */
static int
cl_get_range(PyObject *obj, Py_ssize_t pos, Py_ssize_t *end, Py_buffer *view)
{
    if (get_buffer(obj, view) < 0)
        return -1;
    if (*end > view->len)
        *end = view->len;
    if (pos < 0 || pos > *end) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "position out of range");
        return -1;
    }
    return 0;
}

/* The MurmurHash3 of the bytes of `key` into h; -1 with the exception set. */
static int
cl_hash_key(PyObject *key, uint32_t seed, uint8_t h[CL_HASH])
{
    Py_buffer v;

    if (get_buffer(key, &v) < 0)
        return -1;
    cl_murmur3(v.buf, v.len, seed, h);
    PyBuffer_Release(&v);
    return 0;
}

/* The offset map (cl_get_map, its view to release) and the hash of `key`; -1 with the
 * exception set (nothing held). */
static int
cl_get_map_key(PyObject *mobj, Py_ssize_t slots, PyObject *key, Py_buffer *mv, clmap *m,
               uint8_t h[CL_HASH])
{
    if (cl_get_map(mobj, slots, mv, m) < 0)
        return -1;
    if (cl_hash_key(key, 0, h) < 0) {
        PyBuffer_Release(mv);
        return -1;
    }
    return 0;
}

static PyObject *
cl_key_hash(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"key", "seed", NULL};
    PyObject *key;
    unsigned int seed = 0;
    uint8_t h[CL_HASH];

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|I:key_hash", kwlist, &key, &seed))
        return NULL;
    if (cl_hash_key(key, seed, h) < 0)
        return NULL;
    return PyBytes_FromStringAndSize((const char *)h, CL_HASH);
}

static PyObject *
cl_map_get(PyObject *self, PyObject *args)
{
    PyObject *mobj, *key;
    Py_ssize_t slots;
    Py_buffer mv;
    clmap m;
    uint8_t h[CL_HASH];
    int64_t off;

    if (!PyArg_ParseTuple(args, "OnO:map_get", &mobj, &slots, &key))
        return NULL;
    if (cl_get_map_key(mobj, slots, key, &mv, &m, h) < 0)
        return NULL;
    off = cl_lookup(&m, h);
    PyBuffer_Release(&mv);
    return PyLong_FromLongLong(off);
}

static PyObject *
cl_map_put(PyObject *self, PyObject *args)
{
    PyObject *mobj, *key;
    Py_ssize_t slots, size;
    long long offset;
    Py_buffer mv;
    clmap m;
    uint8_t h[CL_HASH];

    if (!PyArg_ParseTuple(args, "OnnOL:map_put", &mobj, &slots, &size, &key, &offset))
        return NULL;
    if (cl_get_map_key(mobj, slots, key, &mv, &m, h) < 0)
        return NULL;
    if (cl_store(&m, &size, h, offset) < 0) {
        PyBuffer_Release(&mv);
        cl_full_error(size, slots);
        return NULL;
    }
    PyBuffer_Release(&mv);
    return PyLong_FromSsize_t(size);
}

static PyObject *
cl_map_clear(PyObject *self, PyObject *arg)
{
    Py_buffer mv;
    if (PyObject_GetBuffer(arg, &mv, PyBUF_WRITABLE) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    memset(mv.buf, 0, (size_t)mv.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&mv);
    Py_RETURN_NONE;
}

static PyObject *
cl_map_records(PyObject *self, PyObject *args)
{
    PyObject *payload, *mobj, *result = NULL;
    Py_ssize_t count, slots, size, max_size;
    long long base_offset, start_offset;
    int64_t last = -1;
    Py_buffer pv, mv;
    clmap m;
    int rc;

    if (!PyArg_ParseTuple(args, "OnLOnnnL:map_records", &payload, &count, &base_offset,
                          &mobj, &slots, &size, &max_size, &start_offset))
        return NULL;
    if (cl_get_payload(payload, count, &pv) < 0)
        return NULL;
    if (cl_get_map(mobj, slots, &mv, &m) < 0) {
        PyBuffer_Release(&pv);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = cl_map_core(pv.buf, pv.len, count, base_offset, &m, &size, max_size, start_offset,
                     &last);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        cl_full_error(size, slots);
    else
        result = Py_BuildValue("(nLO)", size, (long long)last, rc ? Py_True : Py_False);
    PyBuffer_Release(&mv);
    PyBuffer_Release(&pv);
    return result;
}

static PyObject *
cl_map_batches(PyObject *self, PyObject *args)
{
    PyObject *bobj, *mobj, *result = NULL;
    Py_ssize_t pos, end, slots, size, max_size;
    long long start_offset;
    int64_t latest = -1;
    Py_buffer bv, mv;
    clmap m;
    int status;

    if (!PyArg_ParseTuple(args, "OnnOnnnL:map_batches", &bobj, &pos, &end, &mobj, &slots,
                          &size, &max_size, &start_offset))
        return NULL;
    if (cl_get_range(bobj, pos, &end, &bv) < 0)
        return NULL;
    if (cl_get_map(mobj, slots, &mv, &m) < 0) {
        PyBuffer_Release(&bv);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    status = cl_map_loop(bv.buf, &pos, end, &m, &size, max_size, start_offset, &latest);
    Py_END_ALLOW_THREADS
    if (status < 0)
        cl_full_error(size, slots);
    else
        result = Py_BuildValue("(nnLi)", pos, size, (long long)latest, status);
    PyBuffer_Release(&mv);
    PyBuffer_Release(&bv);
    return result;
}

static PyObject *
cl_filter_records(PyObject *self, PyObject *args)
{
    PyObject *payload, *fixed_obj, *mobj, *result = NULL, *out_obj;
    Py_ssize_t count, slots;
    long long base_offset, base_ts, latest, batch_horizon, new_horizon, fixed = 0;
    int retain_deletes, mode, marker, has_fixed, rc;
    Py_buffer pv, mv;
    clmap m = {NULL, 0};
    clkeep *keep = NULL;
    clout o = {NULL, 0, 0};
    clres res;

    if (!PyArg_ParseTuple(args, "OnLLOOnLpiLLp:filter_records", &payload, &count,
                          &base_offset, &base_ts, &fixed_obj, &mobj, &slots, &latest,
                          &retain_deletes, &mode, &batch_horizon, &new_horizon, &marker))
        return NULL;
    if ((has_fixed = optional_ll(fixed_obj, &fixed)) < 0)
        return NULL;
    if (mode != CL_MODE_FILTER && mode != CL_MODE_KEEP && mode != CL_MODE_DROP) {
        PyErr_Format(PyExc_ValueError, "bad filter mode %d", mode);
        return NULL;
    }
    if (cl_get_payload(payload, count, &pv) < 0)
        return NULL;
    if (mode == CL_MODE_FILTER && cl_get_map(mobj, slots, &mv, &m) < 0) {
        PyBuffer_Release(&pv);
        return NULL;
    }
    keep = PyMem_RawMalloc((size_t)(count > 0 ? count : 1) * sizeof(clkeep));
    if (keep == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = cl_filter_core(pv.buf, pv.len, count, base_offset, base_ts, has_fixed, fixed, &m,
                        latest, retain_deletes, mode, batch_horizon, new_horizon, marker, keep,
                        &o, &res);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_NoMemory();
        goto done;
    }
    if (res.unchanged)
        out_obj = Py_None, Py_INCREF(Py_None);
    else
        out_obj = PyBytes_FromStringAndSize((const char *)o.p, o.used);
    if (out_obj == NULL)
        goto done;
    result = Py_BuildValue("(nNLLLnn)", res.kept, out_obj, (long long)res.new_base,
                           (long long)res.horizon, (long long)res.max_ts, res.invalid,
                           res.dropped);
done:
    PyMem_RawFree(keep);
    PyMem_RawFree(o.p);
    if (mode == CL_MODE_FILTER)
        PyBuffer_Release(&mv);
    PyBuffer_Release(&pv);
    return result;
}

static PyObject *
cl_filter_batches(PyObject *self, PyObject *args)
{
    PyObject *bobj, *mobj, *pobj, *result = NULL, *out_obj;
    Py_ssize_t pos, end, slots;
    long long latest, now, retention, upper;
    Py_buffer bv, mv, prv;
    clmap m;
    clout o = {NULL, 0, 0};
    clstats st = {0, 0, 0, 0, 0, 0};
    int status;

    if (!PyArg_ParseTuple(args, "OnnOnLLLOL:filter_batches", &bobj, &pos, &end, &mobj,
                          &slots, &latest, &now, &retention, &pobj, &upper))
        return NULL;
    if (cl_get_range(bobj, pos, &end, &bv) < 0)
        return NULL;
    if (get_buffer(pobj, &prv) < 0) {
        PyBuffer_Release(&bv);
        return NULL;
    }
    if (cl_get_map(mobj, slots, &mv, &m) < 0) {
        PyBuffer_Release(&prv);
        PyBuffer_Release(&bv);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    status = cl_filter_loop(bv.buf, &pos, end, &m, latest, now, retention, prv.buf,
                            prv.len / (Py_ssize_t)sizeof(int64_t), upper, &o, &st);
    Py_END_ALLOW_THREADS
    if (status < 0)
        PyErr_NoMemory();
    else {
        out_obj = PyBytes_FromStringAndSize((const char *)o.p, o.used);
        if (out_obj != NULL)
            result = Py_BuildValue("(nNi(LLLLLL))", pos, out_obj, status, st.read, st.kept,
                                   st.bytes_read, st.bytes_written, st.invalid, st.dropped);
    }
    PyMem_RawFree(o.p);
    PyBuffer_Release(&mv);
    PyBuffer_Release(&prv);
    PyBuffer_Release(&bv);
    return result;
}

static PyObject *
cl_not_whole(long long position)
{
    PyObject *args = Py_BuildValue("(s)", "not a whole batch");
    PyObject *kw = Py_BuildValue("{s:L}", "position", position);
    PyObject *exc = NULL;
    if (args != NULL && kw != NULL)
        exc = PyObject_Call(CorruptRecordError, args, kw);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    if (exc != NULL) {
        PyErr_SetObject(CorruptRecordError, exc);
        Py_DECREF(exc);
    }
    return NULL;
}

static int
cl_append_pair(PyObject *list, long long a, long long b)
{
    PyObject *t = Py_BuildValue("(LL)", a, b);
    int rc;
    if (t == NULL)
        return -1;
    rc = PyList_Append(list, t);
    Py_DECREF(t);
    return rc;
}

static PyObject *
cl_index_entries(PyObject *self, PyObject *args)
{
    PyObject *bobj, *offsets = NULL, *times = NULL;
    long long position, interval, since, max_ts, offset_of_max, last_time;
    Py_buffer bv;
    const uint8_t *d;
    Py_ssize_t pos = 0, end;

    if (!PyArg_ParseTuple(args, "OLL(LLLL):index_entries", &bobj, &position, &interval,
                          &since, &max_ts, &offset_of_max, &last_time))
        return NULL;
    if (get_buffer(bobj, &bv) < 0)
        return NULL;
    d = bv.buf;
    end = bv.len;
    offsets = PyList_New(0);
    times = PyList_New(0);
    if (offsets == NULL || times == NULL)
        goto fail;
    while (pos < end) {
        int64_t base, last, bmax;
        int32_t length;
        Py_ssize_t size;
        int magic;
        if (end - pos < HEADER_PEEK_BYTES)
            goto not_whole;
        base = be64(d + pos);
        length = (int32_t)be32(d + pos + RB_LENGTH_OFFSET);
        size = (Py_ssize_t)length + RB_LOG_OVERHEAD;
        magic = d[pos + RB_MAGIC_OFFSET];
        if (length < 14 || size > end - pos)
            goto not_whole;
        if (magic == 2) {
            if (size < RB_OVERHEAD)
                goto not_whole;
            last = rb_last_offset(d + pos);
            bmax = be64(d + pos + RB_MAX_TIMESTAMP_OFFSET);
        }
        else {
            last = base;
            bmax = (magic == 1 && size >= 26) ? be64(d + pos + 18) : -1;
        }
        if (bmax > max_ts) {
            max_ts = bmax;
            offset_of_max = last;
        }
        if (since > interval) {
            if (cl_append_pair(offsets, last, position + pos) < 0)
                goto fail;
            if (max_ts > last_time) {
                if (cl_append_pair(times, max_ts, offset_of_max) < 0)
                    goto fail;
                last_time = max_ts;
            }
            since = 0;
        }
        since += size;
        pos += size;
    }
    PyBuffer_Release(&bv);
    return Py_BuildValue("(NN(LLLL))", offsets, times, since, max_ts, offset_of_max,
                         last_time);
not_whole:
    cl_not_whole(position + pos);
fail:
    Py_XDECREF(offsets);
    Py_XDECREF(times);
    PyBuffer_Release(&bv);
    return NULL;
}

static PyObject *
cl_null_key_index(PyObject *self, PyObject *args)
{
    PyObject *payload;
    Py_ssize_t count, i, pos = 0, found = -1;
    Py_buffer pv;
    clrec r;

    if (!PyArg_ParseTuple(args, "On:null_key_index", &payload, &count))
        return NULL;
    if (cl_get_payload(payload, count, &pv) < 0)
        return NULL;
    for (i = 0; i < count; i++) {
        cl_next_record(pv.buf, pv.len, &pos, &r);
        if (r.key_len < 0) {
            found = i;
            break;
        }
    }
    PyBuffer_Release(&pv);
    return PyLong_FromSsize_t(found);
}

static PyMethodDef cl_methods[] = {
    {"cl_key_hash", (PyCFunction)(void (*)(void))cl_key_hash, METH_VARARGS | METH_KEYWORDS,
     "cl_key_hash(key, seed=0) -> bytes: MurmurHash3 x64 128 (see kafkafs.record.compaction)"},
    {"cl_map_get", cl_map_get, METH_VARARGS,
     "cl_map_get(map, slots, key) -> offset or -1"},
    {"cl_map_put", cl_map_put, METH_VARARGS,
     "cl_map_put(map, slots, size, key, offset) -> new size"},
    {"cl_map_clear", cl_map_clear, METH_O, "cl_map_clear(map): zero every slot"},
    {"cl_map_records", cl_map_records, METH_VARARGS,
     "cl_map_records(payload, count, base_offset, map, slots, size, max_size, start_offset)"
     " -> (size, last put offset, full)"},
    {"cl_map_batches", cl_map_batches, METH_VARARGS,
     "cl_map_batches(buf, pos, end, map, slots, size, max_size, start_offset)"
     " -> (pos, size, latest, status)"},
    {"cl_filter_records", cl_filter_records, METH_VARARGS,
     "cl_filter_records(payload, count, base_offset, base_timestamp, fixed_timestamp, map,"
     " slots, latest_offset, retain_deletes, mode, batch_horizon, new_horizon, marker)"},
    {"cl_filter_batches", cl_filter_batches, METH_VARARGS,
     "cl_filter_batches(buf, pos, end, map, slots, latest_offset, now, delete_retention_ms,"
     " protected, upper_bound) -> (pos, output, status, stats)"},
    {"cl_index_entries", cl_index_entries, METH_VARARGS,
     "cl_index_entries(buf, position, interval, state) -> (offsets, times, state)"},
    {"cl_null_key_index", cl_null_key_index, METH_VARARGS,
     "cl_null_key_index(payload, count) -> index of the first record without a key, or -1"},
    {NULL, NULL, 0, NULL}
};

static int
cl_add_functions(PyObject *m)
{
    cl_crc_init();
    return PyModule_AddFunctions(m, cl_methods);
}

/* ==================================================================================== */
/* ColumnBuilder: the records of v2 batches gathered as Arrow column buffers, for the    */
/* Spark reader (kafkafs.spark.columns). kafkafs/record/columnar.py holds the pure-Python */
/* twin and describes the buffers; both give identical bytes (tests/test_columnar.py).   */
/* Plain batches are walked, checked (CRC-32C, framing, offsets) and gathered without    */
/* any Python object, with the GIL released; the walk stops, appending nothing of it, at */
/* the first batch it does not take, for the caller's general path.                      */

#define CB_NBUF 15
enum { B_OFF, B_TS, B_TT, B_KVALID, B_KOFF, B_KDATA, B_VVALID, B_VOFF, B_VDATA,
       B_LOFF, B_HKOFF, B_HKDATA, B_HVVALID, B_HVOFF, B_HVDATA };
static const char *cb_names[CB_NBUF] = {
    "offset", "timestamp", "timestamp_type", "key_validity", "key_offsets", "key_data",
    "value_validity", "value_offsets", "value_data", "header_offsets", "header_key_offsets",
    "header_key_data", "header_value_validity", "header_value_offsets", "header_value_data"};

/* walk statuses (kafkafs.record.columnar) */
enum { CB_END = 0, CB_OTHER = 1, CB_PAST = 2, CB_PARTIAL = 3 };
/* errors of the record gatherer besides the parser's (perr codes) */
#define CB_E_NOMEM 1001
#define CB_E_BIG 1002
#define CB_E_TS 1003

#define CB_TS_LIMIT (INT64_MAX / 1000)
#define CB_ATTR_CODEC 0x07
#define CB_ATTR_LOG_APPEND_TIME 0x08
#define CB_ATTR_TRANSACTIONAL 0x10
#define CB_ATTR_CONTROL 0x20

typedef struct {
    uint8_t *p;
    Py_ssize_t len, cap;
} cb_buf;

typedef struct {
    PyObject_HEAD
    int headers;
    Py_ssize_t n, m, key_nulls, value_nulls, hvalue_nulls;
    int64_t ts_bad;  /* the timestamp (ms) that stopped a gather, for the message */
    cb_buf b[CB_NBUF];
} CBObject;

typedef struct {
    Py_ssize_t n, m, kn, vn, hn;
    Py_ssize_t len[CB_NBUF];
} cb_mark;

static inline int
cb_put(cb_buf *b, const void *src, Py_ssize_t n)
{
    void *p = b->p;
    int rc;

    if (n == 0)
        return 0;
    rc = raw_grow(&p, b->len, &b->cap, n, 4096);
    b->p = p;
    if (rc < 0)
        return -1;
    memcpy(b->p + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

static inline int
cb_i32(cb_buf *b, int32_t v)
{
    return cb_put(b, &v, 4);
}

static inline int
cb_i64(cb_buf *b, int64_t v)
{
    return cb_put(b, &v, 8);
}

/* Set bit i (LSB first, as Arrow's validity bitmaps) of a bitmap holding bits [0, i). */
static inline int
cb_bit(cb_buf *b, Py_ssize_t i, int valid)
{
    if ((i & 7) == 0) {
        uint8_t zero = 0;
        if (cb_put(b, &zero, 1) < 0)
            return -1;
    }
    if (valid)
        b->p[i >> 3] |= (uint8_t)(1u << (i & 7));
    return 0;
}

/* An offsets buffer's next entry: the length of its data buffer, which must fit an int32. */
static inline int
cb_end_offset(cb_buf *offsets, const cb_buf *data)
{
    if (data->len > INT32_MAX)
        return CB_E_BIG;
    return cb_i32(offsets, (int32_t)data->len) < 0 ? CB_E_NOMEM : 0;
}

/* Append one nullable binary value (len < 0: null) as entry i of a column: its validity
 * bit, its bytes, its end offset; a null counts in *nulls. */
static int
cb_nullable(cb_buf *valid, cb_buf *data, cb_buf *offsets, Py_ssize_t i, const uint8_t *p,
            int32_t len, Py_ssize_t *nulls)
{
    if (cb_bit(valid, i, len >= 0) < 0)
        return CB_E_NOMEM;
    if (len >= 0) {
        if (cb_put(data, p, len) < 0)
            return CB_E_NOMEM;
    }
    else
        (*nulls)++;
    return cb_end_offset(offsets, data);
}

static void
cb_reset(CBObject *c)
{
    int i;

    for (i = 0; i < CB_NBUF; i++)
        c->b[i].len = 0;
    c->n = c->m = c->key_nulls = c->value_nulls = c->hvalue_nulls = 0;
}

/* The starting 0 of every offsets buffer; -1 without memory. */
static int
cb_start(CBObject *c)
{
    return (cb_i32(&c->b[B_KOFF], 0) < 0 || cb_i32(&c->b[B_VOFF], 0) < 0 ||
            cb_i32(&c->b[B_LOFF], 0) < 0 || cb_i32(&c->b[B_HKOFF], 0) < 0 ||
            cb_i32(&c->b[B_HVOFF], 0) < 0) ? -1 : 0;
}

static void
cb_save(const CBObject *c, cb_mark *k)
{
    int i;

    k->n = c->n;
    k->m = c->m;
    k->kn = c->key_nulls;
    k->vn = c->value_nulls;
    k->hn = c->hvalue_nulls;
    for (i = 0; i < CB_NBUF; i++)
        k->len[i] = c->b[i].len;
}

/* Drop what was gathered since the mark (the bits past it in a kept last bitmap byte are
 * cleared: a bit is only ever or-ed in). */
static void
cb_restore(CBObject *c, const cb_mark *k)
{
    int i;

    c->n = k->n;
    c->m = k->m;
    c->key_nulls = k->kn;
    c->value_nulls = k->vn;
    c->hvalue_nulls = k->hn;
    for (i = 0; i < CB_NBUF; i++)
        c->b[i].len = k->len[i];
    if (c->n & 7) {
        uint8_t keep = (uint8_t)((1u << (c->n & 7)) - 1);
        c->b[B_KVALID].p[c->n >> 3] &= keep;
        c->b[B_VVALID].p[c->n >> 3] &= keep;
    }
    if (c->m & 7)
        c->b[B_HVVALID].p[c->m >> 3] &= (uint8_t)((1u << (c->m & 7)) - 1);
}

/* Gather one parsed record (r, in the records section buf[0, end)). */
static int
cb_record(CBObject *c, int64_t offset, int64_t ts_ms, int32_t ts_type, const uint8_t *buf,
          Py_ssize_t end, const rec_t *r)
{
    int rc;

    if (ts_ms > CB_TS_LIMIT || ts_ms < -CB_TS_LIMIT) {
        c->ts_bad = ts_ms;
        return CB_E_TS;
    }
    if (cb_i64(&c->b[B_OFF], offset) < 0 || cb_i64(&c->b[B_TS], ts_ms * 1000) < 0 ||
        cb_i32(&c->b[B_TT], ts_type) < 0)
        return CB_E_NOMEM;
    if ((rc = cb_nullable(&c->b[B_KVALID], &c->b[B_KDATA], &c->b[B_KOFF], c->n,
                          buf + r->key_pos, r->key_len, &c->key_nulls)))
        return rc;
    if ((rc = cb_nullable(&c->b[B_VVALID], &c->b[B_VDATA], &c->b[B_VOFF], c->n,
                          buf + r->val_pos, r->val_len, &c->value_nulls)))
        return rc;
    if (c->headers) {
        Py_ssize_t pos = r->hdr_pos;
        int32_t h, kl, vl;
        perr e;
        for (h = 0; h < r->hcount; h++) {
            /* parse_one validated every header already */
            if (rd_varint(buf, end, &pos, &kl, &e) || kl < 0 || end - pos < kl)
                return E_INTERNAL;
            if (cb_put(&c->b[B_HKDATA], buf + pos, kl) < 0)
                return CB_E_NOMEM;
            pos += kl;
            if ((rc = cb_end_offset(&c->b[B_HKOFF], &c->b[B_HKDATA])))
                return rc;
            if (rd_varint(buf, end, &pos, &vl, &e) || vl < -1 || end - pos < vl)
                return E_INTERNAL;
            if ((rc = cb_nullable(&c->b[B_HVVALID], &c->b[B_HVDATA], &c->b[B_HVOFF], c->m,
                                  buf + pos, vl, &c->hvalue_nulls)))
                return rc;
            if (vl > 0)
                pos += vl;
            c->m++;
        }
        if (c->m > INT32_MAX)
            return CB_E_BIG;
        if (cb_i32(&c->b[B_LOFF], (int32_t)c->m) < 0)
            return CB_E_NOMEM;
    }
    c->n++;
    return 0;
}

/* Parse the `count` records of a records section (uncompressed) and gather those with
 * start <= offset < end. Returns E_OK or an error code (e->index set for parse errors);
 * the caller rolls back. No Python object is touched. */
static int
cb_section(CBObject *c, const uint8_t *buf, Py_ssize_t len, Py_ssize_t count,
           int64_t base_offset, int64_t base_ts, int64_t fixed_ts, int has_fixed,
           int32_t ts_type, int64_t start, int64_t end, perr *e)
{
    Py_ssize_t pos = 0, i;
    rec_t r;
    int rc;

    for (i = 0; i < count; i++) {
        int64_t off, ts;
        rc = parse_one(buf, len, &pos, &r, NULL, e);
        if (rc) {
            e->index = i;
            e->count = count;
            return rc;
        }
        off = wrap_add(base_offset, r.off_delta);
        if (off < start || off >= end)
            continue;
        ts = has_fixed ? fixed_ts : wrap_add(base_ts, r.ts_delta);
        if ((rc = cb_record(c, off, ts, ts_type, buf, len, &r)))
            return rc;
    }
    if (pos != len) {
        e->a = len - pos;
        e->count = count;
        return E_LEFTOVER;
    }
    return E_OK;
}

typedef struct {
    int64_t start, end;        /* offsets gathered: [start, end) */
    int64_t expected;          /* the offset after the previous batch, -1 unknown */
    int64_t segment_base;      /* the segment's base offset */
    int64_t next_base;         /* the next segment's base offset, -1 none */
    int skip_transactional;    /* leave transactional batches to the caller */
} cb_walk_args;

/* Walk and gather the plain batches of buf[pos, end). Returns the status; *out_pos is where
 * it stopped (a batch start). *fatal is set to an error code for no memory or a column over
 * 2 GiB (the batch at *out_pos is then left out too). */
static int
cb_walk(CBObject *c, const uint8_t *b, Py_ssize_t pos, Py_ssize_t end, cb_walk_args *w,
        Py_ssize_t *out_pos, int *fatal)
{
    int status = CB_END;

    *fatal = 0;
    while (end - pos >= HEADER_PEEK_BYTES) {
        const uint8_t *h = b + pos;
        int64_t base = be64(h), last, base_ts, max_ts;
        int32_t length = (int32_t)be32(h + RB_LENGTH_OFFSET), lod, count;
        Py_ssize_t size;
        int attrs, rc;
        cb_mark mark;
        perr e;

        if (h[RB_MAGIC_OFFSET] != 2 || length < RB_OVERHEAD - RB_LOG_OVERHEAD) {
            status = CB_OTHER;
            break;
        }
        size = (Py_ssize_t)length + RB_LOG_OVERHEAD;
        if (end - pos < size) {
            status = CB_PARTIAL;
            break;
        }
        if (base >= w->end) {
            status = CB_PAST;
            break;
        }
        attrs = rb_attributes(h);
        lod = (int32_t)be32(h + RB_LAST_OFFSET_DELTA_OFFSET);
        base_ts = be64(h + RB_BASE_TIMESTAMP_OFFSET);
        max_ts = be64(h + RB_MAX_TIMESTAMP_OFFSET);
        count = (int32_t)be32(h + RB_COUNT_OFFSET);
        last = wrap_add(base, lod);
        if ((attrs & (CB_ATTR_CODEC | CB_ATTR_CONTROL)) ||
            ((attrs & CB_ATTR_TRANSACTIONAL) && w->skip_transactional) ||
            lod < 0 || count < 0 || last < base || base < w->segment_base ||
            last - w->segment_base > INT32_MAX ||
            (w->next_base >= 0 && last >= w->next_base) ||
            (w->expected >= 0 && base < w->expected) ||
            kk_crc32c(h + RB_ATTRIBUTES_OFFSET, size - RB_ATTRIBUTES_OFFSET) !=
                be32(h + RB_CRC_OFFSET)) {
            status = CB_OTHER;
            break;
        }
        if (last >= w->start) {
            cb_save(c, &mark);
            rc = cb_section(c, h + RB_OVERHEAD, size - RB_OVERHEAD, count, base, base_ts,
                            max_ts, attrs & CB_ATTR_LOG_APPEND_TIME,
                            (attrs & CB_ATTR_LOG_APPEND_TIME) ? 1 : 0, w->start, w->end, &e);
            if (rc) {
                cb_restore(c, &mark);
                if (rc == CB_E_NOMEM || rc == CB_E_BIG)
                    *fatal = rc;
                status = CB_OTHER;
                break;
            }
        }
        w->expected = last + 1;
        pos += size;
    }
    *out_pos = pos;
    return status;
}

static int
cb_raise(CBObject *c, int rc, const perr *e)
{
    if (rc == CB_E_NOMEM)
        PyErr_NoMemory();
    else if (rc == CB_E_BIG)
        PyErr_SetString(PyExc_OverflowError,
                        "a column of the batch being built would pass 2 GiB (int32 offsets): "
                        "finish() the builder more often");
    else if (rc == CB_E_TS)
        PyErr_Format(PyExc_ValueError, "timestamp %lld ms is out of the range of Spark's "
                     "timestamps (microseconds in a long)", (long long)c->ts_bad);
    else
        raise_perr(rc, e);
    return -1;
}

static int
CB_init(CBObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"headers", NULL};
    int headers = 0;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p:ColumnBuilder", kwlist, &headers))
        return -1;
    self->headers = headers;
    cb_reset(self);
    if (cb_start(self) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void
CB_dealloc(CBObject *self)
{
    int i;

    for (i = 0; i < CB_NBUF; i++)
        PyMem_RawFree(self->b[i].p);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyDoc_STRVAR(cb_add_batches_doc,
"add_batches(buf, pos, end, start_offset, end_offset, expected=-1, segment_base=0,\n"
"            next_base=-1, skip_transactional=False) -> (pos, status, expected)\n\n"
"Gather the records with start_offset <= offset < end_offset of the plain v2 batches in\n"
"buf[pos:end] (see kafkafs.record.columnar).");

static PyObject *
CB_add_batches(CBObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"buf", "pos", "end", "start_offset", "end_offset", "expected",
                             "segment_base", "next_base", "skip_transactional", NULL};
    Py_buffer view;
    Py_ssize_t pos, end, out_pos = 0;
    cb_walk_args w = {0, 0, -1, 0, -1, 0};
    int status, fatal = 0;
    perr e = {0};

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*nnLL|LLLp:add_batches", kwlist, &view,
                                     &pos, &end, &w.start, &w.end, &w.expected,
                                     &w.segment_base, &w.next_base, &w.skip_transactional))
        return NULL;
    if (pos < 0 || end < pos || end > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "need 0 <= pos <= end <= len(buf)");
        return NULL;
    }
    NOGIL_IF(end - pos >= NOGIL_THRESHOLD,
             status = cb_walk(self, (const uint8_t *)view.buf, pos, end, &w, &out_pos, &fatal));
    PyBuffer_Release(&view);
    if (fatal) {
        cb_raise(self, fatal, &e);
        return NULL;
    }
    return Py_BuildValue("(niL)", out_pos, status, w.expected);
}

PyDoc_STRVAR(cb_add_section_doc,
"add_section(payload, count, base_offset, base_timestamp, fixed_timestamp, timestamp_type,\n"
"            start_offset, end_offset) -> records gathered\n\n"
"Gather the records with start_offset <= offset < end_offset of an uncompressed records\n"
"section (see kafkafs.record.columnar). Raises CorruptRecordError, ValueError.");

static PyObject *
CB_add_section(CBObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"payload", "count", "base_offset", "base_timestamp",
                             "fixed_timestamp", "timestamp_type", "start_offset",
                             "end_offset", NULL};
    Py_buffer view;
    Py_ssize_t count, before = self->n;
    long long base_offset, base_ts, start, end, fixed = 0;
    int ts_type, rc, has_fixed;
    PyObject *fixed_obj;
    cb_mark mark;
    perr e = {0};

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*nLLOiLL:add_section", kwlist, &view,
                                     &count, &base_offset, &base_ts, &fixed_obj, &ts_type,
                                     &start, &end))
        return NULL;
    if ((has_fixed = optional_ll(fixed_obj, &fixed)) < 0 || check_count(count, &e) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    cb_save(self, &mark);
    rc = cb_section(self, (const uint8_t *)view.buf, view.len, count, base_offset, base_ts,
                    fixed, has_fixed, ts_type, start, end, &e);
    PyBuffer_Release(&view);
    if (rc) {
        cb_restore(self, &mark);
        cb_raise(self, rc, &e);
        return NULL;
    }
    return PyLong_FromSsize_t(self->n - before);
}

/* The memory of one finished column, handed over without a copy: a read-only buffer
 * (pyarrow.py_buffer wraps it as it is) that frees the memory with the last reference. */
typedef struct {
    PyObject_HEAD
    uint8_t *p;
    Py_ssize_t len;
} CBBufferObject;

static int
CBBuffer_getbuffer(CBBufferObject *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)self, self->p ? self->p : (uint8_t *)"",
                             self->len, 1, flags);
}

static void
CBBuffer_dealloc(CBBufferObject *self)
{
    PyMem_RawFree(self->p);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t
CBBuffer_length(CBBufferObject *self)
{
    return self->len;
}

static PyBufferProcs CBBuffer_as_buffer = {(getbufferproc)CBBuffer_getbuffer, NULL};
static PySequenceMethods CBBuffer_as_sequence = {(lenfunc)CBBuffer_length};

static PyTypeObject CBBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kafkafs.record._speedups.ColumnBuffer",
    .tp_basicsize = sizeof(CBBufferObject),
    .tp_dealloc = (destructor)CBBuffer_dealloc,
    .tp_as_buffer = &CBBuffer_as_buffer,
    .tp_as_sequence = &CBBuffer_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The read-only memory of one column a ColumnBuilder finished (buffer protocol)",
};

/* The buffer b as a ColumnBuffer owning its memory; b is left empty. */
static PyObject *
cb_hand_over(cb_buf *b)
{
    CBBufferObject *o = PyObject_New(CBBufferObject, &CBBufferType);

    if (o == NULL)
        return NULL;
    o->p = b->p;
    o->len = b->len;
    b->p = NULL;
    b->len = b->cap = 0;
    return (PyObject *)o;
}

PyDoc_STRVAR(cb_finish_doc,
"finish() -> dict\n\n"
"The gathered columns as read-only buffers, handed over without a copy (see\n"
"kafkafs.record.columnar), and counts; the builder is empty again.");

static PyObject *
CB_finish(CBObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *d = PyDict_New(), *v;
    int i;

    if (d == NULL)
        return NULL;
    for (i = 0; i < CB_NBUF; i++) {
        v = cb_hand_over(&self->b[i]);
        if (v == NULL || PyDict_SetItemString(d, cb_names[i], v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
#define CB_COUNT(name, value) \
    v = PyLong_FromSsize_t(value); \
    if (v == NULL || PyDict_SetItemString(d, name, v) < 0) { \
        Py_XDECREF(v); \
        Py_DECREF(d); \
        return NULL; \
    } \
    Py_DECREF(v);
    CB_COUNT("rows", self->n)
    CB_COUNT("headers_count", self->m)
    CB_COUNT("key_nulls", self->key_nulls)
    CB_COUNT("value_nulls", self->value_nulls)
    CB_COUNT("header_value_nulls", self->hvalue_nulls)
#undef CB_COUNT
    cb_reset(self);
    if (cb_start(self) < 0) {
        Py_DECREF(d);
        return PyErr_NoMemory();
    }
    return d;
}

static PyObject *
CB_rows(CBObject *self, void *closure)
{
    return PyLong_FromSsize_t(self->n);
}

static PyObject *
CB_nbytes(CBObject *self, void *closure)
{
    Py_ssize_t total = 0;
    int i;

    for (i = 0; i < CB_NBUF; i++)
        total += self->b[i].len;
    return PyLong_FromSsize_t(total);
}

static PyObject *
CB_headers(CBObject *self, void *closure)
{
    return PyBool_FromLong(self->headers);
}

static PyMethodDef CB_methods[] = {
    {"add_batches", (PyCFunction)(void (*)(void))CB_add_batches, METH_VARARGS | METH_KEYWORDS,
     cb_add_batches_doc},
    {"add_section", (PyCFunction)(void (*)(void))CB_add_section, METH_VARARGS | METH_KEYWORDS,
     cb_add_section_doc},
    {"finish", (PyCFunction)CB_finish, METH_NOARGS, cb_finish_doc},
    {NULL, NULL, 0, NULL}
};

static PyGetSetDef CB_getset[] = {
    {"rows", (getter)CB_rows, NULL, "records gathered so far", NULL},
    {"nbytes", (getter)CB_nbytes, NULL, "bytes of every buffer so far", NULL},
    {"headers", (getter)CB_headers, NULL, "whether headers are gathered", NULL},
    {NULL, NULL, NULL, NULL, NULL}
};

static PyTypeObject CBType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kafkafs.record._speedups.ColumnBuilder",
    .tp_basicsize = sizeof(CBObject),
    .tp_dealloc = (destructor)CB_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ColumnBuilder(headers=False): the C twin of kafkafs.record.columnar.ColumnBuilder",
    .tp_methods = CB_methods,
    .tp_getset = CB_getset,
    .tp_init = (initproc)CB_init,
    .tp_new = PyType_GenericNew,
};

static int
cb_add_type(PyObject *m)
{
    if (PyType_Ready(&CBType) < 0 || PyType_Ready(&CBBufferType) < 0)
        return -1;
    Py_INCREF(&CBType);
    if (PyModule_AddObject(m, "ColumnBuilder", (PyObject *)&CBType) < 0) {
        Py_DECREF(&CBType);
        return -1;
    }
    return 0;
}
