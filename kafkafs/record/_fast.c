/*
 * kafkafs/record/_fast.c: the C twins of kafkafs/record/fast.py, the record hot paths:
 * values, render_values, rendered_size and decode read the records section of a v2
 * batch (with the readers of _speedups.h), encode, encode_lines and encode_text write one,
 * encode_text_batches writes the many batches of one write to `append`.
 * Part of the kafkafs.record._speedups extension (added by fast_add_functions).
 *
 * Only the Python C API. kafkafs/record/fast.py holds the pure-Python twin: results and
 * error messages must stay identical (tests/test_speedups.py).
 */
#include "_speedups.h"

/* ------------------------------------------------------------------------------------ */
/* argument helpers                                                                     */

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
/* encode_text_batches: the batches of one write to `append`, in one call                */

/* Fill the 61-byte v2 header at b of a batch whose `used` bytes of `count` records follow
 * it (DefaultRecordBatch.writeHeader): base offset 0, no partition leader epoch, no
 * producer, one timestamp `ts`, attributes `attrs`; then its CRC-32C. */
static void
put_text_batch_header(uint8_t *b, Py_ssize_t used, int32_t count, int64_t ts, int attrs)
{
    put_be64(b, 0);                                          /* base offset */
    put_be32(b + RB_LENGTH_OFFSET, (uint32_t)(RB_OVERHEAD - RB_LOG_OVERHEAD + used));
    put_be32(b + 12, 0xFFFFFFFFu);                           /* partition leader epoch -1 */
    b[RB_MAGIC_OFFSET] = 2;
    put_be16(b + RB_ATTRIBUTES_OFFSET, (uint16_t)attrs);
    put_be32(b + RB_LAST_OFFSET_DELTA_OFFSET, (uint32_t)(count - 1));
    put_be64(b + RB_BASE_TIMESTAMP_OFFSET, (uint64_t)ts);
    put_be64(b + RB_MAX_TIMESTAMP_OFFSET, (uint64_t)ts);
    put_be64(b + RB_PRODUCER_ID_OFFSET, UINT64_MAX);         /* producer id -1 */
    put_be16(b + RB_PRODUCER_ID_OFFSET + 8, 0xFFFF);         /* producer epoch -1 */
    put_be32(b + RB_PRODUCER_ID_OFFSET + 10, 0xFFFFFFFFu);   /* base sequence -1 */
    put_be32(b + RB_COUNT_OFFSET, (uint32_t)count);
    put_be32(b + RB_CRC_OFFSET, rb_crc(b, RB_OVERHEAD + used));
}

/* The output of encode_text_batches: a bytearray grown as records are written. */
typedef struct {
    PyObject *ba;
    Py_ssize_t cap;
} tbuf;

/* Make room for `need` bytes at `used`; the bytes, or NULL with an exception set. */
static char *
tb_room(tbuf *t, Py_ssize_t used, Py_ssize_t need)
{
    if (t->cap - used < need) {
        Py_ssize_t nc = t->cap;
        while (nc - used < need) {
            if (nc > PY_SSIZE_T_MAX / 2) {
                PyErr_NoMemory();
                return NULL;
            }
            nc *= 2;
        }
        if (PyByteArray_Resize(t->ba, nc) < 0)
            return NULL;
        t->cap = nc;
    }
    return PyByteArray_AS_STRING(t->ba) + used;
}

PyDoc_STRVAR(encode_text_batches_doc,
"encode_text_batches(text, timestamp, budget, timestamp_type=0, head=b'')\n"
"    -> (batches, ends)\n\n"
"The '\\n'-terminated lines of head + text (bytes-like; `head`, the start of the first\n"
"line, holds no newline) as consecutive v2 batches in one bytearray: each batch what\n"
"encode_text(rest, timestamp, budget) takes of the lines left -- at least one line,\n"
"then lines while its records fit in `budget` bytes -- with base offset 0, null keys,\n"
"every timestamp `timestamp` (ms), no producer, uncompressed, `timestamp_type` 0\n"
"(CreateTime) or 1 (LogAppendTime), and its CRC-32C. `ends` lists, per batch, the end\n"
"in `text` of its lines (newline included). Bytes after the last newline are never\n"
"taken; without a newline in `text` the result is (bytearray(), []). Raises ValueError\n"
"for a newline in `head`, a timestamp_type other than 0 or 1, or a line or offset delta\n"
"too large for a record.");

static PyObject *
sp_encode_text_batches(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"text", "timestamp", "budget", "timestamp_type", "head", NULL};
    PyObject *text, *head_obj = NULL, *ends = NULL, *result = NULL;
    long long ts;
    int ts_type = 0, attrs;
    Py_ssize_t budget, end, pos = 0, used = 0;
    bview tv, hv = {NULL, 0, 0};
    tbuf t = {NULL, 0};

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OLn|iO:encode_text_batches", kwlist,
                                     &text, &ts, &budget, &ts_type, &head_obj))
        return NULL;
    if (ts_type != 0 && ts_type != 1) {
        PyErr_SetString(PyExc_ValueError, "timestamp_type must be 0 (CreateTime) or 1 "
                        "(LogAppendTime)");
        return NULL;
    }
    attrs = ts_type ? RB_TIMESTAMP_TYPE_MASK : 0;
    if (bv_get_or(head_obj, &hv, "", 0) < 0)
        return NULL;
    if (bv_get(text, &tv, 0) < 0) {
        bv_release(&hv);
        return NULL;
    }
    if (hv.len > 0 && memchr(hv.p, '\n', (size_t)hv.len) != NULL) {
        PyErr_SetString(PyExc_ValueError, "head holds a newline");
        goto done;
    }
    for (end = tv.len; end > 0 && tv.p[end - 1] != '\n'; end--)
        ;  /* the lines: up to the last newline */
    ends = PyList_New(0);
    /* room for the lines, their records' few bytes each and a header per batch; grown
     * when short lines need more */
    t.cap = hv.len + end + end / 8 + (end / (budget > 4096 ? budget : 4096) + 2) * RB_OVERHEAD;
    t.ba = ends == NULL ? NULL : PyByteArray_FromStringAndSize(NULL, t.cap);
    if (t.ba == NULL)
        goto done;
    while (pos < end) {
        Py_ssize_t batch = used, rec = used + RB_OVERHEAD, payload = 0, count = 0;
        PyObject *n;

        while (pos < end) {
            const char *line = tv.p + pos;
            const char *nl = memchr(line, '\n', (size_t)(end - pos));
            Py_ssize_t len = nl - line, hlen = pos == 0 ? hv.len : 0, vlen = hlen + len;
            Py_ssize_t body, need;
            char *p;

            if (count > INT32_MAX || vlen > INT32_MAX - 16) {
                PyErr_SetString(PyExc_ValueError, "line or offset delta too large for a "
                                "record");
                goto done;
            }
            /* timestampDelta 0, offsetDelta count, null key, the value, no headers */
            body = record_body_size(0, count, -1, vlen, 0, 0);
            need = varint_size(body) + body;
            if (count > 0 && payload + need > budget)
                break;
            p = tb_room(&t, rec, need + RB_OVERHEAD);  /* and the next batch's header */
            if (p == NULL)
                goto done;
            p = put_record_start(p, body, 0, count);
            *p++ = 1;  /* null key */
            p = put_varint(p, vlen);
            if (hlen > 0) {
                memcpy(p, hv.p, (size_t)hlen);
                p += hlen;
            }
            memcpy(p, line, (size_t)len);
            p[len] = 0;  /* no headers */
            rec += need;
            payload += need;
            count++;
            pos += len + 1;
        }
        put_text_batch_header((uint8_t *)PyByteArray_AS_STRING(t.ba) + batch, payload,
                              (int32_t)count, (int64_t)ts, attrs);
        used = rec;
        n = PyLong_FromSsize_t(pos);
        if (n == NULL || PyList_Append(ends, n) < 0) {
            Py_XDECREF(n);
            goto done;
        }
        Py_DECREF(n);
    }
    if (PyByteArray_Resize(t.ba, used) < 0)
        goto done;
    result = PyTuple_Pack(2, t.ba, ends);
done:
    Py_XDECREF(t.ba);
    Py_XDECREF(ends);
    bv_release(&tv);
    bv_release(&hv);
    return result;
}

/* ------------------------------------------------------------------------------------ */

static PyMethodDef fast_methods[] = {
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
    {"encode_text_batches", (PyCFunction)(void (*)(void))sp_encode_text_batches,
     METH_VARARGS | METH_KEYWORDS, encode_text_batches_doc},
    {NULL, NULL, 0, NULL}
};

int
fast_add_functions(PyObject *m)
{
    return PyModule_AddFunctions(m, fast_methods);
}
