/*
 * kafkafs/record/_columnar.c: ColumnBuilder, the records of v2 batches gathered as Arrow
 * column buffers, for the Spark reader (kafkafs.spark.columns). kafkafs/record/columnar.py
 * holds the pure-Python twin and describes the buffers; both give identical bytes
 * (tests/test_columnar.py). Plain batches are walked, checked (CRC-32C, framing, offsets)
 * and gathered without any Python object, with the GIL released; the walk stops, appending
 * nothing of it, at the first batch it does not take, for the caller's general path. Part
 * of the kafkafs.record._speedups extension (the type is added by cb_add_type, called from
 * PyInit__speedups).
 */
#include "_speedups.h"

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
        if ((attrs & (RB_COMPRESSION_MASK | RB_CONTROL_MASK)) ||
            ((attrs & RB_TRANSACTIONAL_MASK) && w->skip_transactional) ||
            lod < 0 || count < 0 ||
            !rb_offsets_in_place(base, last, w->segment_base, w->next_base, w->expected) ||
            rb_crc(h, size) != be32(h + RB_CRC_OFFSET)) {
            status = CB_OTHER;
            break;
        }
        if (last >= w->start) {
            cb_save(c, &mark);
            rc = cb_section(c, h + RB_OVERHEAD, size - RB_OVERHEAD, count, base, base_ts,
                            max_ts, attrs & RB_TIMESTAMP_TYPE_MASK,
                            (attrs & RB_TIMESTAMP_TYPE_MASK) ? 1 : 0, w->start, w->end, &e);
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

int
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
