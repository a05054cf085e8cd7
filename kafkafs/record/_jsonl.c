/*
 * kafkafs/record/_jsonl.c: the C twin of kafkafs/record/jsonl.py, the lines of the
 * records.jsonl view rendered in C, part of the kafkafs.record._speedups extension (module
 * functions jsonl_render, jsonl_size and jsonl_render_file, added by jsonl_add_functions).
 *
 * Each record of a v2 batch becomes the line json.dumps(obj, ensure_ascii=False,
 * separators=(",", ":")) + "\n" of
 *   {"offset":N,"timestamp":N,"timestamp_type":"CreateTime"|"LogAppendTime","key":K,
 *    "value":V,"headers":[{"key":"...","value":V},...]}
 * where K and V are null, a JSON string when the bytes are UTF-8 by Python's strict
 * decoder, else {"base64":"..."} (standard alphabet, padded). Strings are escaped as
 * CPython's json escapes them without ensure_ascii: `"` and `\` with a backslash, \b \f \n
 * \r \t, other bytes below 0x20 as \u00XX (lower-case hex); nothing else (DEL, U+2028 and
 * U+2029 stay as they are). kafkafs/record/jsonl.py holds the pure-Python twins; results
 * and errors must stay identical (tests/test_jsonl.py).
 *
 * Records are read and validated by parse_one (_speedups.h), as RecordBatch.records()
 * reads them, so a damaged batch raises the error the Python path raises. A segment file's
 * run of plain batches is read and framed by _plain.c (read_plain_window, plain_batch_at).
 */
#include "_speedups.h"
#include <errno.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* -- output -------------------------------------------------------------------------------- */

/* A bytes object filled from the front and grown as needed, also while the GIL is released
 * (it is taken back for the resize). */
typedef struct {
    PyObject *out;      /* the bytes object (its refcount is 1) */
    char *base;         /* PyBytes_AS_STRING(out) */
    Py_ssize_t used, cap;
    PyThreadState *ts;  /* the saved thread state while the GIL is released, else NULL */
} jw_t;

/* 0, or -1 with MemoryError (the GIL held). */
static int
jw_init(jw_t *w, Py_ssize_t cap)
{
    w->out = PyBytes_FromStringAndSize(NULL, cap);
    if (w->out == NULL)
        return -1;
    w->base = PyBytes_AS_STRING(w->out);
    w->used = 0;
    w->cap = cap;
    w->ts = NULL;
    return 0;
}

/* Grow the room to at least `need` bytes past `used`: E_OK, or E_PYERR with MemoryError
 * set (w->out is then NULL). */
static int
jw_grow(jw_t *w, Py_ssize_t need)
{
    Py_ssize_t cap = w->cap;
    int rc;

    while (cap - w->used < need)
        cap = cap > PY_SSIZE_T_MAX / 2 ? PY_SSIZE_T_MAX : 2 * cap + 4096;
    if (w->ts != NULL)
        PyEval_RestoreThread(w->ts);
    rc = _PyBytes_Resize(&w->out, cap);
    if (w->ts != NULL)
        w->ts = PyEval_SaveThread();
    if (rc < 0)
        return E_PYERR;
    w->base = PyBytes_AS_STRING(w->out);
    w->cap = cap;
    return E_OK;
}

static inline int
jw_reserve(jw_t *w, Py_ssize_t need)
{
    return w->cap - w->used >= need ? E_OK : jw_grow(w, need);
}

/* -- JSON pieces ----------------------------------------------------------------------------- */

/* Each helper returns the size of what it renders and, when `write` (a constant: every
 * helper is instantiated for writing and for measuring), writes it at `o` (NULL when
 * measuring). */

enum { J_PLAIN = 0, J_ESC2, J_ESCU, J_HIGH };

static uint8_t jclass[256];  /* J_*: how a byte of a string is written (jsonl_init_tables) */
static char jesc2[32 + 128];  /* the letter after the backslash of a J_ESC2 byte */
static const char hexdigits[] = "0123456789abcdef";
static const char b64chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char digit_pairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static void
jsonl_init_tables(void)
{
    int c;
    for (c = 0; c < 256; c++)
        jclass[c] = c < 0x20 ? J_ESCU : c >= 0x80 ? J_HIGH : J_PLAIN;
    jclass['"'] = jclass['\\'] = jclass['\b'] = jclass['\f'] = jclass['\n'] = jclass['\r'] =
        jclass['\t'] = J_ESC2;
    jesc2['"'] = '"';
    jesc2['\\'] = '\\';
    jesc2['\b'] = 'b';
    jesc2['\f'] = 'f';
    jesc2['\n'] = 'n';
    jesc2['\r'] = 'r';
    jesc2['\t'] = 't';
}

/* Room a field of `n` bytes may take while it is written: 6 bytes per byte (\u00XX), the
 * quotes, and the 16 bytes a vector store may write past the end of what it keeps. */
#define FIELD_ROOM(n) (6 * (Py_ssize_t)(n) + 16)

/* The JSON string of the `n` bytes at `s` (quotes included) when they are UTF-8; -1 when
 * they are not (what was written then is garbage). */
static inline Py_ssize_t
json_text(char *o, const uint8_t *s, Py_ssize_t n, const int write)
{
    Py_ssize_t i = 0, size = n + 2;
    char *p = o;

    if (write)
        *p++ = '"';
    while (i < n) {
        uint8_t c;
#ifdef __SSE2__
        if (n - i >= 16) {
            /* 16 bytes at once: none below 0x20 or above 0x7f (signed < 0x20), no quote,
             * no backslash: copied as they are */
            const __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
            const __m128i special = _mm_or_si128(
                _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)),
                _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                             _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))));
            unsigned mask = (unsigned)_mm_movemask_epi8(special);
            if (write)
                _mm_storeu_si128((__m128i *)p, v);
            if (mask == 0) {
                i += 16;
                if (write)
                    p += 16;
                continue;
            }
            {
                int k = __builtin_ctz(mask);  /* the bytes before the first special one */
                i += k;
                if (write)
                    p += k;
            }
        }
#endif
        c = s[i];
        switch (jclass[c]) {
        case J_PLAIN:
            if (write)
                *p++ = (char)c;
            i++;
            break;
        case J_ESC2:
            if (write) {
                p[0] = '\\';
                p[1] = jesc2[c];
                p += 2;
            }
            size += 1;
            i++;
            break;
        case J_ESCU:
            if (write) {
                memcpy(p, "\\u00", 4);
                p[4] = hexdigits[c >> 4];
                p[5] = hexdigits[c & 15];
                p += 6;
            }
            size += 5;
            i++;
            break;
        default: {  /* J_HIGH: a whole UTF-8 sequence, or the field is not text */
            int k = utf8_char(s + i, n - i);
            if (k == 0)
                return -1;
            if (write) {
                memcpy(p, s + i, (size_t)k);
                p += k;
            }
            i += k;
        }
        }
    }
    if (write)
        *p = '"';
    return size;
}

/* {"base64":"..."} of the `n` bytes at `s`. */
static inline Py_ssize_t
json_base64(char *o, const uint8_t *s, Py_ssize_t n, const int write)
{
    Py_ssize_t size = 13 + (n + 2) / 3 * 4, i;

    if (write) {
        char *p = o + 11;
        memcpy(o, "{\"base64\":\"", 11);
        for (i = 0; n - i >= 3; i += 3) {
            uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8) | s[i + 2];
            p[0] = b64chars[v >> 18];
            p[1] = b64chars[(v >> 12) & 63];
            p[2] = b64chars[(v >> 6) & 63];
            p[3] = b64chars[v & 63];
            p += 4;
        }
        if (n - i == 1) {
            uint32_t v = (uint32_t)s[i] << 16;
            p[0] = b64chars[v >> 18];
            p[1] = b64chars[(v >> 12) & 63];
            p[2] = p[3] = '=';
            p += 4;
        }
        else if (n - i == 2) {
            uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8);
            p[0] = b64chars[v >> 18];
            p[1] = b64chars[(v >> 12) & 63];
            p[2] = b64chars[(v >> 6) & 63];
            p[3] = '=';
            p += 4;
        }
        p[0] = '"';
        p[1] = '}';
    }
    return size;
}

/* A key, value or header value: null (n < 0), the string, or the base64 object. Room:
 * FIELD_ROOM(n). */
static inline Py_ssize_t
json_field(char *o, const uint8_t *s, Py_ssize_t n, const int write)
{
    Py_ssize_t k;

    if (n < 0) {
        if (write)
            memcpy(o, "null", 4);
        return 4;
    }
    k = json_text(o, s, n, write);
    return k >= 0 ? k : json_base64(o, s, n, write);
}

/* A 64-bit integer in decimal (at most 20 bytes). */
static inline Py_ssize_t
json_int(char *o, int64_t v, const int write)
{
    char tmp[24];
    char *p = tmp + sizeof tmp;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    Py_ssize_t n;

    while (u >= 100) {
        unsigned d = (unsigned)(u % 100) * 2;
        u /= 100;
        p -= 2;
        p[0] = digit_pairs[d];
        p[1] = digit_pairs[d + 1];
    }
    if (u >= 10) {
        p -= 2;
        p[0] = digit_pairs[u * 2];
        p[1] = digit_pairs[u * 2 + 1];
    }
    else
        *--p = (char)('0' + u);
    if (v < 0)
        *--p = '-';
    n = tmp + sizeof tmp - p;
    if (write)
        memcpy(o, p, (size_t)n);
    return n;
}

/* What follows the timestamp up to the key, per timestamp type. */
static const char MID_CREATE[] = ",\"timestamp_type\":\"CreateTime\",\"key\":";
static const char MID_APPEND[] = ",\"timestamp_type\":\"LogAppendTime\",\"key\":";

/* Room a record of `len` bytes with `hcount` headers may take while it is written: the
 * fixed text (159 bytes with two 20-digit numbers), 50 per header, and FIELD_ROOM of its
 * fields (whose bytes are at most `len`). */
#define RECORD_ROOM(len, hcount) (192 + 6 * (Py_ssize_t)(len) + 56 * (Py_ssize_t)(hcount))

/* One line: the record `r` at `offset` and `ts`, parsed by parse_one from buf, where it ends
 * at `end`. Its headers are read again here, never past `end`, so that what is written
 * fits in RECORD_ROOM even when the buffer changed since (a writable buffer shared while
 * the GIL is released): garbage then, never a write out of bounds. */
static inline Py_ssize_t
json_record(char *o, const uint8_t *buf, Py_ssize_t end, const rec_t *r, int64_t offset,
            int64_t ts, int log_append_time, const int write)
{
    Py_ssize_t size = 0, pos = r->hdr_pos;
    int32_t h;

#define AT (write ? o + size : NULL)
#define LIT(text)                                                  \
    do {                                                           \
        if (write)                                                 \
            memcpy(o + size, (text), sizeof(text) - 1);            \
        size += (Py_ssize_t)sizeof(text) - 1;                      \
    } while (0)
    LIT("{\"offset\":");
    size += json_int(AT, offset, write);
    LIT(",\"timestamp\":");
    size += json_int(AT, ts, write);
    if (log_append_time)
        LIT(MID_APPEND);
    else
        LIT(MID_CREATE);
    size += json_field(AT, buf + r->key_pos, r->key_len, write);
    LIT(",\"value\":");
    size += json_field(AT, buf + r->val_pos, r->val_len, write);
    LIT(",\"headers\":[");
    for (h = 0; h < r->hcount; h++) {
        int32_t kl, vl;
        Py_ssize_t kp, vp;
        perr e;
        /* parse_one has validated them: these reads cannot fail on an unchanged buffer */
        if (rd_varint(buf, end, &pos, &kl, &e) || kl < 0 || end - pos < kl)
            break;
        kp = pos;
        pos += kl;
        if (rd_field(buf, end, &pos, &vl, &vp, E_HVAL_NEG, &e))
            break;
        if (h)
            LIT(",");
        LIT("{\"key\":");
        size += json_field(AT, buf + kp, kl, write);  /* UTF-8 (parse_one): a string */
        LIT(",\"value\":");
        size += json_field(AT, buf + vp, vl, write);
        LIT("}");
    }
    LIT("]}\n");
#undef LIT
#undef AT
    return size;
}

/* -- a records section ------------------------------------------------------------------------ */

/* The lines of the `count` records of buf[0:len) whose offset is >= `start`, written into
 * `w` (write) or measured into *total. Offsets are base_offset + offsetDelta, timestamps
 * fixed_ts (log_append_time) or base_ts + timestampDelta, both wrapping as in Java. Every
 * record is validated (parse_one), bytes after the last one are an error when `exact`.
 * Returns E_OK or the error (details in *e; E_PYERR: no memory, exception set). */
static inline int
jsonl_records(const uint8_t *buf, Py_ssize_t len, Py_ssize_t count, int exact,
              int64_t base_offset, int64_t base_ts, int log_append_time, int64_t fixed_ts,
              int64_t start, jw_t *w, Py_ssize_t *total, perr *e, const int write)
{
    Py_ssize_t pos = 0, i, size = 0;

    e->count = count;
    for (i = 0; i < count; i++) {
        Py_ssize_t from = pos;
        int64_t offset, ts;
        rec_t r;
        int rc = parse_one(buf, len, &pos, &r, NULL, e);
        if (rc) {
            e->index = i;
            return rc;
        }
        offset = wrap_add(base_offset, r.off_delta);
        if (offset < start)
            continue;
        ts = log_append_time ? fixed_ts : wrap_add(base_ts, r.ts_delta);
        if (write) {
            if ((rc = jw_reserve(w, RECORD_ROOM(pos - from, r.hcount))))
                return rc;
            w->used += json_record(w->base + w->used, buf, pos, &r, offset, ts,
                                   log_append_time, 1);
        }
        else
            size += json_record(NULL, buf, pos, &r, offset, ts, log_append_time, 0);
    }
    if (exact && pos != len) {
        e->a = len - pos;
        return E_LEFTOVER;
    }
    if (!write)
        *total = size;
    return E_OK;
}

static int
render_records(const uint8_t *buf, Py_ssize_t len, Py_ssize_t count, int exact,
               int64_t base_offset, int64_t base_ts, int log_append_time, int64_t fixed_ts,
               int64_t start, jw_t *w, perr *e)
{
    return jsonl_records(buf, len, count, exact, base_offset, base_ts, log_append_time,
                         fixed_ts, start, w, NULL, e, 1);
}

static int
measure_records(const uint8_t *buf, Py_ssize_t len, Py_ssize_t count, int exact,
                int64_t base_offset, int64_t base_ts, int log_append_time, int64_t fixed_ts,
                int64_t start, Py_ssize_t *total, perr *e)
{
    return jsonl_records(buf, len, count, exact, base_offset, base_ts, log_append_time,
                         fixed_ts, start, NULL, total, e, 0);
}

/* The room to start with for the lines of `len` bytes of records: twice that (records of
 * 150-byte values take 1.6x), grown when that is not enough. */
static Py_ssize_t
first_room(Py_ssize_t len)
{
    return len > (PY_SSIZE_T_MAX - 4096) / 2 ? len : 2 * len + 4096;
}

/* -- Python entry points ----------------------------------------------------------------------- */

typedef struct {
    PyObject *payload, *fixed_obj, *start_obj;
    Py_ssize_t count;
    long long base_offset, base_ts, fixed_ts, start;
    int exact, fixed;
    int past;  /* start is past every 64-bit offset: no line, every record still checked */
    Py_buffer view;
} section_args;

/* Parse the arguments of jsonl_render and jsonl_size; 0 (release a->view), or -1. */
static int
parse_section_args(PyObject *args, PyObject *kwds, const char *fmt, section_args *a)
{
    static char *kwlist[] = {"payload", "count", "base_offset", "base_timestamp",
                             "fixed_timestamp", "start", "exact", NULL};
    int overflow = 0;

    a->start_obj = Py_None;
    a->exact = 1;
    a->fixed_ts = 0;
    a->start = INT64_MIN;
    a->past = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, fmt, kwlist, &a->payload, &a->count,
                                     &a->base_offset, &a->base_ts, &a->fixed_obj,
                                     &a->start_obj, &a->exact))
        return -1;
    if ((a->fixed = optional_ll(a->fixed_obj, &a->fixed_ts)) < 0)
        return -1;
    if (a->start_obj != Py_None) {  /* any int, as the twin compares it */
        long long start = PyLong_AsLongLongAndOverflow(a->start_obj, &overflow);
        if (start == -1 && PyErr_Occurred())
            return -1;
        if (overflow == 0)
            a->start = start;
        a->past = overflow > 0;
    }
    return PyObject_GetBuffer(a->payload, &a->view, PyBUF_SIMPLE);
}

PyDoc_STRVAR(jsonl_render_doc,
"jsonl_render(payload, count, base_offset, base_timestamp, fixed_timestamp, start=None, *,"
" exact=True) -> bytes\n\n"
"The records.jsonl lines (UTF-8, each ending in \\n) of the `count` records of `payload`\n"
"(the uncompressed records section of a v2 batch) whose offset is >= start (every record\n"
"when None). timestamp_type is LogAppendTime, every timestamp fixed_timestamp, when that\n"
"is not None, else CreateTime. Raises CorruptRecordError as decode does.");

static PyObject *
sp_jsonl_render(PyObject *self, PyObject *args, PyObject *kwds)
{
    section_args a;
    perr e = {0};
    jw_t w;
    int rc;

    if (parse_section_args(args, kwds, "OnLLO|O$p:jsonl_render", &a) < 0)
        return NULL;
    if (check_count(a.count, &e) < 0 || jw_init(&w, first_room(a.view.len)) < 0) {
        PyBuffer_Release(&a.view);
        return NULL;
    }
    if (a.view.len >= NOGIL_THRESHOLD)
        w.ts = PyEval_SaveThread();
    if (a.past) {
        Py_ssize_t total;
        rc = measure_records(a.view.buf, a.view.len, a.count, a.exact, a.base_offset,
                             a.base_ts, a.fixed, a.fixed_ts, INT64_MAX, &total, &e);
        w.used = 0;
    }
    else
        rc = render_records(a.view.buf, a.view.len, a.count, a.exact, a.base_offset,
                            a.base_ts, a.fixed, a.fixed_ts, a.start, &w, &e);
    if (w.ts != NULL)
        PyEval_RestoreThread(w.ts);
    PyBuffer_Release(&a.view);
    if (rc) {
        Py_XDECREF(w.out);
        raise_perr(rc, &e);
        return NULL;
    }
    if (_PyBytes_Resize(&w.out, w.used) < 0)
        return NULL;
    return w.out;
}

PyDoc_STRVAR(jsonl_size_doc,
"jsonl_size(payload, count, base_offset, base_timestamp, fixed_timestamp, start=None, *,"
" exact=True) -> int\n\n"
"len(jsonl_render(...)) without building it; validates the same way.");

static PyObject *
sp_jsonl_size(PyObject *self, PyObject *args, PyObject *kwds)
{
    section_args a;
    perr e = {0};
    Py_ssize_t total = 0;
    int rc;

    if (parse_section_args(args, kwds, "OnLLO|O$p:jsonl_size", &a) < 0)
        return NULL;
    if (check_count(a.count, &e) < 0) {
        PyBuffer_Release(&a.view);
        return NULL;
    }
    NOGIL_IF(a.view.len >= NOGIL_THRESHOLD,
             rc = measure_records(a.view.buf, a.view.len, a.count, a.exact, a.base_offset,
                                  a.base_ts, a.fixed, a.fixed_ts, a.start, &total, &e));
    PyBuffer_Release(&a.view);
    if (rc) {
        raise_perr(rc, &e);
        return NULL;
    }
    return PyLong_FromSsize_t(a.past ? 0 : total);
}

PyDoc_STRVAR(jsonl_render_file_doc,
"jsonl_render_file(fd, position, length, stop_offset) -> (bytes, next_position, stopped)\n\n"
"Read `length` bytes of a segment file at `position` (a batch start) and render, as\n"
"jsonl_render does, every record of each whole plain batch there: magic 2, uncompressed,\n"
"neither transactional nor control, with a valid CRC-32C and well-formed records. Stops\n"
"before the first batch that is not, that runs past the bytes read, or whose base offset\n"
"is >= stop_offset (stopped is then True). next_position is the file position it stopped\n"
"at: the general path takes over there. The read, the CRC and the rendering run with the\n"
"GIL released. Raises OSError from pread, ValueError for a negative position or length.");

static PyObject *
sp_jsonl_render_file(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"fd", "position", "length", "stop_offset", NULL};
    int fd, stopped = 0, err = 0, rc = E_OK;
    long long position, stop_offset;
    Py_ssize_t length, got, pos = 0, size;
    int32_t count;
    uint8_t *buf;
    jw_t w;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "iLnL:jsonl_render_file", kwlist, &fd,
                                     &position, &length, &stop_offset))
        return NULL;
    if (position < 0 || length < 0) {
        PyErr_SetString(PyExc_ValueError, "position and length must be >= 0");
        return NULL;
    }
    buf = PyMem_RawMalloc((size_t)(length > 0 ? length : 1));
    if (buf == NULL)
        return PyErr_NoMemory();
    if (jw_init(&w, first_room(length)) < 0) {
        PyMem_RawFree(buf);
        return NULL;
    }
    w.ts = PyEval_SaveThread();
    got = read_plain_window(fd, position, length, stop_offset, buf, &err);
    if (got >= 0) {
        while ((size = plain_batch_at(buf + pos, got - pos, stop_offset, &count,
                                      &stopped)) > 0) {
            const uint8_t *b = buf + pos;
            Py_ssize_t mark = w.used;
            perr e = {0};
            rc = render_records(b + RB_OVERHEAD, size - RB_OVERHEAD, count, 1, be64(b),
                                be64(b + RB_BASE_TIMESTAMP_OFFSET),
                                rb_attributes(b) & RB_TIMESTAMP_TYPE_MASK,
                                be64(b + RB_MAX_TIMESTAMP_OFFSET), INT64_MIN, &w, &e);
            if (rc) {
                w.used = mark;  /* a damaged batch: the general path raises its error */
                break;
            }
            pos += size;
        }
    }
    PyEval_RestoreThread(w.ts);
    w.ts = NULL;
    PyMem_RawFree(buf);
    if (rc == E_PYERR)
        return NULL;  /* no memory (w.out is gone) */
    if (got < 0) {
        Py_DECREF(w.out);
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (_PyBytes_Resize(&w.out, w.used) < 0)
        return NULL;
    return Py_BuildValue("(NLO)", w.out, position + (long long)pos,
                         stopped ? Py_True : Py_False);
}

static PyMethodDef jsonl_methods[] = {
    {"jsonl_render", (PyCFunction)(void (*)(void))sp_jsonl_render,
     METH_VARARGS | METH_KEYWORDS, jsonl_render_doc},
    {"jsonl_size", (PyCFunction)(void (*)(void))sp_jsonl_size, METH_VARARGS | METH_KEYWORDS,
     jsonl_size_doc},
    {"jsonl_render_file", (PyCFunction)(void (*)(void))sp_jsonl_render_file,
     METH_VARARGS | METH_KEYWORDS, jsonl_render_file_doc},
    {NULL, NULL, 0, NULL}
};

int
jsonl_add_functions(PyObject *m)
{
    jsonl_init_tables();
    return PyModule_AddFunctions(m, jsonl_methods);
}
