/*
 * kafkafs/record/_plain.c: the C twin of kafkafs/record/plain.py, runs of *plain* batches
 * (magic 2, no codec, neither transactional nor control) read straight from a segment file:
 * the framing of such a run (pread_full, read_plain_window, plain_batch_at: _speedups.h,
 * also used by _jsonl.c's jsonl_render_file; plain.walk_plain_run is their twin) and,
 * when setup.py finds Intel's ISA-L, render_file_values: the values of a run read, checked
 * (CRC-32C, records) and rendered in place without the GIL, the `messages` view's hot path
 * (plain._py_render_file_values is its twin). Part of the kafkafs.record._speedups extension
 * (added by plain_add_functions). Both sides give identical results (tests/test_plain.py).
 */
#include "_speedups.h"
#include <errno.h>
#include <unistd.h>

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
    if (rb_crc(b, size) != be32(b + RB_CRC_OFFSET))
        return 0;
    return size;
}

/* ------------------------------------------------------------------------------------ */
/* render_file_values: plain batches read, checked and rendered without the GIL          */

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

static PyMethodDef plain_methods[] = {
#ifdef KAFKAFS_HAVE_ISAL
    {"render_file_values", (PyCFunction)(void (*)(void))sp_render_file_values,
     METH_VARARGS | METH_KEYWORDS, render_file_values_doc},
#endif
    {NULL, NULL, 0, NULL}
};

int
plain_add_functions(PyObject *m)
{
    return PyModule_AddFunctions(m, plain_methods);
}
