/*
 * kafkafs/record/_speedups.h: what the source files of the kafkafs.record._speedups
 * extension share (_speedups.c, _jsonl.c): the record errors, the readers of the records
 * section of a v2 batch (varints, fields, UTF-8, a whole record as Kafka's
 * DefaultRecord.readFrom validates it), the batch header's layout, CRC-32C and the framing
 * of a run of plain batches read from a segment file.
 *
 * The readers are static here (each source file gets its own copy, inlined in its hot
 * loops); the rest is defined once in _speedups.c with hidden visibility (shared inside
 * the extension, never exported from it).
 */
#ifndef KAFKAFS_SPEEDUPS_H
#define KAFKAFS_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* a function shared between the extension's source files, not exported from it */
#define KK_INTERNAL __attribute__((visibility("hidden")))

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

/* Raise the error `code` (details in *e): CorruptRecordError with Kafka's message (the
 * GIL held). */
KK_INTERNAL void raise_perr(int code, const perr *e);

/* Note the expected record count in *e; -1 with CorruptRecordError when it is negative. */
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
static int
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
static int
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
/* attribute bits that take a batch off the plain path: codec, transactional, control */
#define RB_NOT_PLAIN 0x37

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

/* -- reading a segment file: a run of plain batches ----------------------------------------- */

/* CRC-32C (Castagnoli) as Kafka's Crc32C computes it: ISA-L, SSE4.2 or a table. */
KK_INTERNAL uint32_t kk_crc32c(const uint8_t *p, Py_ssize_t n);

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

KK_INTERNAL int jsonl_add_functions(PyObject *m);  /* _jsonl.c */

#endif  /* KAFKAFS_SPEEDUPS_H */
