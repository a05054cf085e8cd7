/*
 * kafkafs/record/_speedups.h: what the source files of the kafkafs.record._speedups
 * extension share. The extension is one module built from one source file per
 * pure-Python twin (setup.py lists them):
 *
 *   _speedups.c    the module: PyInit__speedups, CorruptRecordError, the record errors
 *   _crc32c.c      CRC-32C (Kafka's Crc32C): the one routine every batch check uses
 *   _fast.c        kafkafs/record/fast.py: values, render_values, rendered_size, decode,
 *                  encode, encode_lines, encode_text, encode_text_batches
 *   _plain.c       kafkafs/record/plain.py: the framing of a run of plain batches read from
 *                  a segment file (_jsonl.c's too) and render_file_values (with ISA-L)
 *   _compaction.c  kafkafs/record/compaction.py: the log cleaner's cl_* functions
 *   _columnar.c    kafkafs/record/columnar.py: ColumnBuilder
 *   _jsonl.c       kafkafs/record/jsonl.py: jsonl_render, jsonl_size, jsonl_render_file
 *
 * Shared here: the record errors, the readers of the records section of a v2 batch
 * (varints, fields, UTF-8, a whole record as Kafka's DefaultRecord.readFrom validates it),
 * the varint writer, the batch header's layout, CRC-32C, the framing of a run of plain
 * batches read from a segment file, and small buffer helpers.
 *
 * The records section of a v2 batch (docs/design.md §2.2): every record is
 *   length varint · attributes i8 · timestampDelta varlong · offsetDelta varint ·
 *   keyLen varint (-1 null) + key · valueLen varint (-1 null) + value ·
 *   headerCount varint · per header keyLen varint (>= 0) + UTF-8 key, valueLen varint + value
 * and every varint is zigzag. Readers validate like Kafka's DefaultRecord.readFrom.
 *
 * Only the Python C API. Every read of the payload is bounds-checked against the end of
 * the buffer, so a payload that changes while it is parsed (a shared mmap, a bytearray
 * written by another thread while the GIL is released) gives garbage or an error, never
 * an out-of-bounds read.
 *
 * The helpers are static here (each source file gets its own copy, inlined in its hot
 * loops; KK_UNUSED spares a file that does not call one the warning); the rest is defined
 * once, in the file named beside its declaration, with hidden visibility (shared inside
 * the extension, never exported from it).
 */
#ifndef KAFKAFS_SPEEDUPS_H
#define KAFKAFS_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* a function or variable shared between the extension's source files, not exported from it */
#define KK_INTERNAL __attribute__((visibility("hidden")))
/* a static helper of this header that some source files do not call */
#define KK_UNUSED __attribute__((unused))

/* payloads at least this long are scanned with the GIL released */
#define NOGIL_THRESHOLD (64 * 1024)
/* the smallest valid record: length varint + attributes, timestampDelta, offsetDelta,
 * keyLen, valueLen, headerCount of one byte each */
#define MIN_RECORD_SIZE 7

/* Run `stmt` (which touches no Python object) with the GIL released when `big`: how the
 * wrappers work on large inputs. */
#define NOGIL_IF(big, stmt)          \
    do {                             \
        if (big) {                   \
            Py_BEGIN_ALLOW_THREADS   \
            stmt;                    \
            Py_END_ALLOW_THREADS     \
        }                            \
        else {                       \
            stmt;                    \
        }                            \
    } while (0)

/* ------------------------------------------------------------------------------------ */
/* errors (recorded without the GIL, raised once it is held again)                      */

enum {
    E_OK = 0,
    E_TRUNC,         /* the buffer ends inside the record */
    E_VARINT_LONG,   /* 5th byte of a varint has its high bit set */
    E_VARLONG_LONG,  /* 10th byte of a varlong has its high bit set */
    E_LEN_NEG,       /* negative record length */
    E_LEN_BIG,       /* record length past the end of the buffer */
    E_KEY_NEG,       /* key length < -1 */
    E_VAL_NEG,       /* value length < -1 */
    E_HCOUNT_NEG,    /* negative header count */
    E_HCOUNT_BIG,    /* header count larger than the bytes left */
    E_HKEY_NEG,      /* null (negative) header key */
    E_HVAL_NEG,      /* header value length < -1 */
    E_HKEY_UTF8,     /* header key is not UTF-8 */
    E_BODY,          /* consumed body != declared length */
    E_LEFTOVER,      /* bytes after the last record */
    E_COUNT_NEG,     /* negative record count */
    E_OVERFLOW,      /* rendered size does not fit in Py_ssize_t */
    E_PYERR,         /* a Python exception is already set */
    E_INTERNAL
};

typedef struct {
    Py_ssize_t index;          /* record index (0-based) */
    Py_ssize_t count;          /* records expected */
    long long a, b;            /* numbers for the message */
    unsigned long long hex;    /* Kafka's "converted value" of an overlong varint */
} perr;

/* kafkafs.record.errors.CorruptRecordError (_speedups.c, set by PyInit__speedups) */
KK_INTERNAL extern PyObject *CorruptRecordError;

/* Raise the error `code` (details in *e): CorruptRecordError with Kafka's message (the
 * GIL held; _speedups.c). */
KK_INTERNAL void raise_perr(int code, const perr *e);

/* Note the expected record count in *e; -1 with CorruptRecordError when it is negative
 * (_speedups.c). */
KK_INTERNAL int check_count(Py_ssize_t count, perr *e);

/* An optional int argument: 0 when it is None, else 1 with its value in *out; -1 on error. */
static inline int
optional_ll(PyObject *obj, long long *out)
{
    if (obj == Py_None)
        return 0;
    *out = PyLong_AsLongLong(obj);
    return *out == -1 && PyErr_Occurred() ? -1 : 1;
}

/* ------------------------------------------------------------------------------------ */
/* reading                                                                              */

/* ByteUtils.readVarint: at most 5 bytes, a 32-bit zigzag value. */
static inline int
rd_varint(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *ppos, int32_t *out, perr *e)
{
    Py_ssize_t pos = *ppos;
    uint32_t b, r;
    int shift;

    if (pos >= end)
        return E_TRUNC;
    b = buf[pos++];
    if (b < 0x80) {
        r = b;
        goto done;
    }
    r = b & 0x7f;
    for (shift = 7; shift <= 21; shift += 7) {
        if (pos >= end)
            return E_TRUNC;
        b = buf[pos++];
        r |= (b & 0x7f) << shift;
        if (b < 0x80)
            goto done;
    }
    if (pos >= end)
        return E_TRUNC;
    b = buf[pos++];
    if (b >= 0x80) {
        e->hex = r;
        return E_VARINT_LONG;
    }
    r |= b << 28;  /* bits past the 32nd are dropped, as in Java */
done:
    *out = (int32_t)((r >> 1) ^ (0u - (r & 1u)));
    *ppos = pos;
    return E_OK;
}

/* ByteUtils.readVarlong: at most 10 bytes, a 64-bit zigzag value. */
static inline int
rd_varlong(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *ppos, int64_t *out, perr *e)
{
    Py_ssize_t pos = *ppos;
    uint64_t r = 0, b;
    int shift;

    if (pos < end && buf[pos] < 0x80) {  /* one byte: the common timestampDelta */
        b = buf[pos];
        *out = (int64_t)((b >> 1) ^ ((uint64_t)0 - (b & 1u)));
        *ppos = pos + 1;
        return E_OK;
    }
    for (shift = 0; shift < 70; shift += 7) {
        if (pos >= end)
            return E_TRUNC;
        b = buf[pos++];
        r |= (b & 0x7f) << shift;
        if (b < 0x80) {
            *out = (int64_t)((r >> 1) ^ ((uint64_t)0 - (r & 1u)));
            *ppos = pos;
            return E_OK;
        }
    }
    e->hex = r;
    return E_VARLONG_LONG;
}

/* A nullable bytes field at *ppos: varint length (-1 null; below it the error `neg_code`,
 * e->a the length) and that many bytes before `end`. *fpos: where they start (set for a
 * null too); *ppos moves past the field. */
static inline int
rd_field(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *ppos, int32_t *len,
         Py_ssize_t *fpos, int neg_code, perr *e)
{
    Py_ssize_t pos = *ppos;
    int rc;

    if ((rc = rd_varint(buf, end, &pos, len, e)))
        return rc;
    *fpos = pos;
    if (*len >= 0) {
        if (end - pos < *len)
            return E_TRUNC;
        pos += *len;
    }
    else if (*len != -1) {
        e->a = *len;
        return neg_code;
    }
    *ppos = pos;
    return E_OK;
}

/* The length (2 to 4) of the well-formed UTF-8 sequence (Unicode table 3-7) that starts
 * with the byte >= 0x80 at s, of at most `left` bytes; 0 when there is none there (a stray
 * continuation byte, an overlong form, a surrogate, a code point past U+10FFFF, a sequence
 * cut short): exactly what Python's strict decoder refuses. */
static inline int
utf8_char(const uint8_t *s, Py_ssize_t left)
{
    uint8_t c = s[0];

    if (c < 0xC2)
        return 0;
    if (c < 0xE0)
        return left >= 2 && (s[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c < 0xF0) {
        uint8_t c1, c2;
        if (left < 3)
            return 0;
        c1 = s[1];
        c2 = s[2];
        if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80)
            return 0;
        if (c == 0xE0 && c1 < 0xA0)
            return 0;  /* overlong */
        if (c == 0xED && c1 >= 0xA0)
            return 0;  /* surrogate */
        return 3;
    }
    if (c < 0xF5) {
        uint8_t c1, c2, c3;
        if (left < 4)
            return 0;
        c1 = s[1];
        c2 = s[2];
        c3 = s[3];
        if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80 || (c3 & 0xC0) != 0x80)
            return 0;
        if (c == 0xF0 && c1 < 0x90)
            return 0;  /* overlong */
        if (c == 0xF4 && c1 >= 0x90)
            return 0;  /* > U+10FFFF */
        return 4;
    }
    return 0;
}

/* Well-formed UTF-8: exactly what Python's strict decoder accepts. */
KK_UNUSED static int
utf8_valid(const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        int k;
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        k = utf8_char(s + i, n - i);
        if (k == 0)
            return 0;
        i += k;
    }
    return 1;
}

/* A new reference: the `len` bytes at `p` as bytes, or None when len < 0 (a null). */
static inline PyObject *
bytes_or_none(const uint8_t *p, Py_ssize_t len)
{
    if (len >= 0)
        return PyBytes_FromStringAndSize((const char *)p, len);
    Py_RETURN_NONE;
}

typedef struct {
    int64_t ts_delta;
    int32_t off_delta, key_len, val_len, hcount;
    Py_ssize_t key_pos, val_pos;
    Py_ssize_t hdr_pos;  /* where the first header starts (after the header count) */
} rec_t;

/* Parse and validate the record at *ppos (DefaultRecord.readFrom); advance *ppos past it.
 *
 * headers_out NULL: validate only (safe without the GIL). Otherwise (GIL held) it receives a
 * new reference to the tuple of (str, bytes | None) headers, or NULL when there are none.
 * Returns E_OK or an error code (details in *e; E_PYERR: a Python exception is set). */
KK_UNUSED static int
parse_one(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *ppos, rec_t *r,
          PyObject **headers_out, perr *e)
{
    Py_ssize_t pos = *ppos, start;
    int32_t length, h;
    int rc;
    PyObject *headers = NULL;

    if ((rc = rd_varint(buf, end, &pos, &length, e)))
        return rc;
    if (length < 0) {
        e->a = length;
        return E_LEN_NEG;
    }
    if (end - pos < length) {
        e->a = length;
        e->b = end - pos;
        return E_LEN_BIG;
    }
    start = pos;
    if (pos >= end)
        return E_TRUNC;
    pos++;  /* attributes: unused */
    if ((rc = rd_varlong(buf, end, &pos, &r->ts_delta, e)))
        return rc;
    if ((rc = rd_varint(buf, end, &pos, &r->off_delta, e)))
        return rc;
    if ((rc = rd_field(buf, end, &pos, &r->key_len, &r->key_pos, E_KEY_NEG, e)) ||
            (rc = rd_field(buf, end, &pos, &r->val_len, &r->val_pos, E_VAL_NEG, e)))
        return rc;
    if ((rc = rd_varint(buf, end, &pos, &r->hcount, e)))
        return rc;
    if (r->hcount < 0) {
        e->a = r->hcount;
        return E_HCOUNT_NEG;
    }
    if (r->hcount > end - pos) {
        e->a = r->hcount;
        return E_HCOUNT_BIG;
    }
    r->hdr_pos = pos;
    if (r->hcount > 0 && headers_out != NULL) {
        headers = PyTuple_New(r->hcount);
        if (headers == NULL)
            return E_PYERR;
    }
    for (h = 0; h < r->hcount; h++) {
        int32_t kl, vl;
        Py_ssize_t kp, vp;
        if ((rc = rd_varint(buf, end, &pos, &kl, e)))
            goto fail;
        if (kl < 0) {
            e->a = kl;
            rc = E_HKEY_NEG;
            goto fail;
        }
        if (end - pos < kl) {
            rc = E_TRUNC;
            goto fail;
        }
        kp = pos;
        pos += kl;
        if (!utf8_valid(buf + kp, kl)) {
            rc = E_HKEY_UTF8;
            goto fail;
        }
        if ((rc = rd_field(buf, end, &pos, &vl, &vp, E_HVAL_NEG, e)))
            goto fail;
        if (headers != NULL) {
            PyObject *k, *v, *pair;
            k = PyUnicode_DecodeUTF8((const char *)buf + kp, kl, "strict");
            if (k == NULL) {
                /* only if the buffer changed under us since utf8_valid */
                if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                    PyErr_Clear();
                    rc = E_HKEY_UTF8;
                }
                else
                    rc = E_PYERR;
                goto fail;
            }
            v = bytes_or_none(buf + vp, vl);
            if (v == NULL) {
                Py_DECREF(k);
                rc = E_PYERR;
                goto fail;
            }
            pair = PyTuple_New(2);
            if (pair == NULL) {
                Py_DECREF(k);
                Py_DECREF(v);
                rc = E_PYERR;
                goto fail;
            }
            PyTuple_SET_ITEM(pair, 0, k);
            PyTuple_SET_ITEM(pair, 1, v);
            PyTuple_SET_ITEM(headers, h, pair);
        }
    }
    if (pos - start != length) {
        e->a = length;
        e->b = pos - start;
        rc = E_BODY;
        goto fail;
    }
    *ppos = pos;
    if (headers_out != NULL)
        *headers_out = headers;
    return E_OK;
fail:
    Py_XDECREF(headers);
    return rc;
}

/* ------------------------------------------------------------------------------------ */
/* scanning a records section (_fast.c's values, _compaction.c's validation)            */

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
/* writing                                                                              */

/* ByteUtils.writeVarint / writeVarlong: zigzag, then 7 bits a byte, the lowest first, the
 * high bit set on every byte but the last (a 32-bit value is written the same way). */
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

/* ------------------------------------------------------------------------------------ */
/* buffers                                                                              */

/* A bytes-like argument as a simple buffer (PyBuffer_Release it). */
KK_UNUSED static int
get_buffer(PyObject *obj, Py_buffer *view)
{
    return PyObject_GetBuffer(obj, view, PyBUF_SIMPLE);
}

/* Grow the PyMem_Raw buffer *pp of *cap bytes, `used` of them taken, so that `need` more
 * fit (doubling, from `first` bytes); 0, or -1 when memory runs out (no exception set:
 * callable without the GIL). The one growth rule of _fast.c's scratch, _compaction.c's
 * clout and _columnar.c's column buffers. */
KK_UNUSED static int
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

/* ------------------------------------------------------------------------------------ */
/* batches                                                                              */

static inline int64_t
wrap_add(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

/* RecordBatch v2 header (DefaultRecordBatch): field offsets and sizes */
#define RB_LENGTH_OFFSET 8
#define RB_MAGIC_OFFSET 16
#define RB_CRC_OFFSET 17
#define RB_ATTRIBUTES_OFFSET 21
#define RB_LAST_OFFSET_DELTA_OFFSET 23
#define RB_BASE_TIMESTAMP_OFFSET 27
#define RB_MAX_TIMESTAMP_OFFSET 35
#define RB_PRODUCER_ID_OFFSET 43
#define RB_COUNT_OFFSET 57
#define RB_OVERHEAD 61
#define HEADER_PEEK_BYTES 17  /* what every format's framing needs: offset, length, magic */
#define RB_LOG_OVERHEAD 12
/* attribute bits (int16 at RB_ATTRIBUTES_OFFSET) */
#define RB_COMPRESSION_MASK 0x07
#define RB_TIMESTAMP_TYPE_MASK 0x08  /* LogAppendTime */
#define RB_TRANSACTIONAL_MASK 0x10
#define RB_CONTROL_MASK 0x20
#define RB_DELETE_HORIZON_MASK 0x40  /* baseTimestamp is the delete horizon */
/* attribute bits that take a batch off the plain path: codec, transactional, control */
#define RB_NOT_PLAIN (RB_COMPRESSION_MASK | RB_TRANSACTIONAL_MASK | RB_CONTROL_MASK)

static inline uint32_t
be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline int64_t
be64(const uint8_t *p)
{
    return (int64_t)(((uint64_t)be32(p) << 32) | be32(p + 4));
}

/* Big-endian writes, the twins of be32/be64 (batch headers written by _fast.c and
 * _compaction.c). */
static inline void
put_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline void
put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline void
put_be64(uint8_t *p, uint64_t v)
{
    put_be32(p, (uint32_t)(v >> 32));
    put_be32(p + 4, (uint32_t)v);
}

/* The attributes (int16) of the v2 batch header at b. */
static inline int
rb_attributes(const uint8_t *b)
{
    return (b[RB_ATTRIBUTES_OFFSET] << 8) | b[RB_ATTRIBUTES_OFFSET + 1];
}

/* The last offset of the v2 batch header at b: base offset + last offset delta (wrapping). */
static inline int64_t
rb_last_offset(const uint8_t *b)
{
    return wrap_add(be64(b), (int32_t)be32(b + RB_LAST_OFFSET_DELTA_OFFSET));
}

/* Whether a batch holding offsets [base, last] may stand where it is: the order rules of
 * log/walk.py's offset_order_problem but the log end offset's. Its last offset not below
 * its base; at or above segment_base and within an int of it; below next_base (the next
 * segment's base offset); its base at or above expected (the offset after the batch
 * before). A bound of -1 is none (offsets are never negative). */
static inline int
rb_offsets_in_place(int64_t base, int64_t last, int64_t segment_base, int64_t next_base,
                    int64_t expected)
{
    return last >= base &&
           (segment_base < 0 || (base >= segment_base && last - segment_base <= INT32_MAX)) &&
           (next_base < 0 || last < next_base) && (expected < 0 || base >= expected);
}

/* -- CRC-32C (_crc32c.c) ------------------------------------------------------------------- */

/* CRC-32C (Castagnoli) as Kafka's Crc32C computes it: ISA-L, SSE4.2 or a table. */
KK_INTERNAL uint32_t kk_crc32c(const uint8_t *p, Py_ssize_t n);

/* Pick the CRC-32C code for this CPU (and fill the table it may need): called once by
 * PyInit__speedups before anything else. */
KK_INTERNAL void kk_crc32c_init(void);

/* The CRC-32C the v2 batch of `size` bytes at b should carry at RB_CRC_OFFSET: of the
 * bytes from its attributes to its end. */
static inline uint32_t
rb_crc(const uint8_t *b, Py_ssize_t size)
{
    return kk_crc32c(b + RB_ATTRIBUTES_OFFSET, size - RB_ATTRIBUTES_OFFSET);
}

/* -- reading a segment file: a run of plain batches (_plain.c) ------------------------------ */

/* pread until `len` bytes or the end of the file; -1 with errno set on an error. */
KK_INTERNAL Py_ssize_t pread_full(int fd, uint8_t *buf, Py_ssize_t len, long long position);

/* Read `length` bytes of `fd` at `position` (a batch start) into `buf` for a run of plain
 * batches: the first batch header alone first, the rest only when that batch is plain and
 * below stop_offset (a run of other batches then costs one small read). Returns the bytes
 * read, or -1 with *err set (errno of the read). No Python objects. */
KK_INTERNAL Py_ssize_t read_plain_window(int fd, long long position, Py_ssize_t length,
                                         int64_t stop_offset, uint8_t *buf, int *err);

/* The plain batch at `b` (`left` bytes there) if a run takes it: magic 2, a size within
 * the bytes, neither compressed, transactional nor control, count >= 0, a right CRC-32C.
 * Returns its size (> 0) with its record count in *count; 0 when the run stops before it,
 * with *stopped = 1 when that is because its base offset is >= stop_offset. Its records
 * are the caller's to check. */
KK_INTERNAL Py_ssize_t plain_batch_at(const uint8_t *b, Py_ssize_t left, int64_t stop_offset,
                                      int32_t *count, int *stopped);

/* -- the source files' functions, added to the module by PyInit__speedups ------------------- */

KK_INTERNAL int fast_add_functions(PyObject *m);   /* _fast.c */
KK_INTERNAL int plain_add_functions(PyObject *m);  /* _plain.c */
KK_INTERNAL int cl_add_functions(PyObject *m);     /* _compaction.c */
KK_INTERNAL int cb_add_type(PyObject *m);          /* _columnar.c */
KK_INTERNAL int jsonl_add_functions(PyObject *m);  /* _jsonl.c */

#endif  /* KAFKAFS_SPEEDUPS_H */
