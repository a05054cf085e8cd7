/*
 * kafkafs/record/_compaction.c: the log cleaner's record work, the C side of
 * kafkafs/record/compaction.py (its module docstring describes every function; the
 * pure-Python twins there give the same results and errors): MurmurHash3 key hashes, the
 * offset map (an open-addressing table in the caller's buffer), mapping and filtering the
 * records of a payload or of a run of plain batches (a changed batch re-encoded with a new
 * header and CRC-32C), the index entries of a run of batches, the first null key of a
 * payload. Part of the kafkafs.record._speedups extension: the cl_* functions, registered
 * by cl_add_functions, called from PyInit__speedups (_speedups.c).
 */
#include "_speedups.h"

#define CL_HASH 16
#define CL_ENTRY 24
#define CL_STATUS_END 0
#define CL_STATUS_FULL 1
#define CL_STATUS_OTHER 2
#define CL_MODE_FILTER 0
#define CL_MODE_KEEP 1
#define CL_MODE_DROP 2

static inline uint64_t
cl_le64(const uint8_t *p)
{
    uint64_t v = 0;
    int i;
    for (i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
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
    put_be64(m->buf + pos + CL_HASH, (uint64_t)offset);
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

/* The order a run of batches must keep (rb_offsets_in_place; -1: no such bound):
 * the segment's base offset, the next segment's, and the offset after the batch before,
 * moved past each batch taken. */
typedef struct {
    int64_t segment_base, next_base, expected;
} clorder;

/* The batch at pos of buf[0:end) if the loops take it on: returns its size (> 0), or
 * CL_NOT_TAKEN(status) < 0 with status CL_STATUS_END / CL_STATUS_OTHER (a batch whose
 * offsets are out of the order `o` is OTHER: the caller's walker names the damage). */
#define CL_NOT_TAKEN(status) (-1 - (status))
static Py_ssize_t
cl_plain_batch(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, const clorder *o)
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
    if (!rb_offsets_in_place(be64(b), rb_last_offset(b), o->segment_base, o->next_base,
                             o->expected))
        return CL_NOT_TAKEN(CL_STATUS_OTHER);
    if (rb_crc(b, size) != be32(b + RB_CRC_OFFSET))
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
    put_be32(p + RB_LENGTH_OFFSET, (uint32_t)(size - RB_LOG_OVERHEAD));
    p[RB_ATTRIBUTES_OFFSET] = (uint8_t)(attributes >> 8);
    p[RB_ATTRIBUTES_OFFSET + 1] = (uint8_t)attributes;
    put_be64(p + RB_BASE_TIMESTAMP_OFFSET, (uint64_t)base_ts);
    put_be64(p + RB_MAX_TIMESTAMP_OFFSET, (uint64_t)max_ts);
    put_be32(p + RB_COUNT_OFFSET, (uint32_t)count);
    put_be32(p + RB_CRC_OFFSET, rb_crc(p, size));
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
               Py_ssize_t nprot, int64_t upper_bound, clorder *order, clout *o, clstats *st)
{
    Py_ssize_t pos = *ppos;
    clkeep *keep = NULL;
    Py_ssize_t keep_cap = 0;
    int status;

    for (;;) {
        Py_ssize_t size = cl_plain_batch(buf, pos, end, order), start;
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
        horizon = (attributes & RB_DELETE_HORIZON_MASK) ? base_ts : -1;
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
                           attributes & RB_TIMESTAMP_TYPE_MASK, max_ts, m, latest,
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
            int attrs = res.horizon >= 0 ? (attributes | RB_DELETE_HORIZON_MASK)
                                         : (attributes & ~RB_DELETE_HORIZON_MASK);
            cl_write_header(o->p + start, bsize, b, attrs, res.new_base, res.max_ts,
                            (int32_t)res.kept);
            st->bytes_written += bsize;
        }
        order->expected = wrap_add(last, 1);
        pos += size;
    }
    PyMem_RawFree(keep);
    *ppos = pos;
    return status;
}

/* map_batches' loop (no GIL). Returns the status, or -1 (internal: map full). */
static int
cl_map_loop(const uint8_t *buf, Py_ssize_t *ppos, Py_ssize_t end, const clmap *m,
            Py_ssize_t *size, Py_ssize_t max_size, int64_t start_offset, int64_t *latest,
            clorder *order)
{
    Py_ssize_t pos = *ppos;
    int status;
    for (;;) {
        Py_ssize_t bsize = cl_plain_batch(buf, pos, end, order);
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
        order->expected = wrap_add(last, 1);
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
    clorder order = {-1, -1, -1};
    int status;

    if (!PyArg_ParseTuple(args, "OnnOnnnL|LLL:map_batches", &bobj, &pos, &end, &mobj, &slots,
                          &size, &max_size, &start_offset, &order.segment_base,
                          &order.next_base, &order.expected))
        return NULL;
    if (cl_get_range(bobj, pos, &end, &bv) < 0)
        return NULL;
    if (cl_get_map(mobj, slots, &mv, &m) < 0) {
        PyBuffer_Release(&bv);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    status = cl_map_loop(bv.buf, &pos, end, &m, &size, max_size, start_offset, &latest,
                         &order);
    Py_END_ALLOW_THREADS
    if (status < 0)
        cl_full_error(size, slots);
    else
        result = Py_BuildValue("(nnLiL)", pos, size, (long long)latest, status,
                               (long long)order.expected);
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
    clorder order = {-1, -1, -1};
    int status;

    if (!PyArg_ParseTuple(args, "OnnOnLLLOL|LLL:filter_batches", &bobj, &pos, &end, &mobj,
                          &slots, &latest, &now, &retention, &pobj, &upper,
                          &order.segment_base, &order.next_base, &order.expected))
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
                            prv.len / (Py_ssize_t)sizeof(int64_t), upper, &order, &o, &st);
    Py_END_ALLOW_THREADS
    if (status < 0)
        PyErr_NoMemory();
    else {
        out_obj = PyBytes_FromStringAndSize((const char *)o.p, o.used);
        if (out_obj != NULL)
            result = Py_BuildValue("(nNi(LLLLLL)L)", pos, out_obj, status, st.read,
                                   st.kept, st.bytes_read, st.bytes_written, st.invalid,
                                   st.dropped, (long long)order.expected);
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
     "cl_map_batches(buf, pos, end, map, slots, size, max_size, start_offset,"
     " segment_base=-1, next_base=-1, expected=-1) -> (pos, size, latest, status, expected)"},
    {"cl_filter_records", cl_filter_records, METH_VARARGS,
     "cl_filter_records(payload, count, base_offset, base_timestamp, fixed_timestamp, map,"
     " slots, latest_offset, retain_deletes, mode, batch_horizon, new_horizon, marker)"},
    {"cl_filter_batches", cl_filter_batches, METH_VARARGS,
     "cl_filter_batches(buf, pos, end, map, slots, latest_offset, now, delete_retention_ms,"
     " protected, upper_bound, segment_base=-1, next_base=-1, expected=-1)"
     " -> (pos, output, status, stats, expected)"},
    {"cl_index_entries", cl_index_entries, METH_VARARGS,
     "cl_index_entries(buf, position, interval, state) -> (offsets, times, state)"},
    {"cl_null_key_index", cl_null_key_index, METH_VARARGS,
     "cl_null_key_index(payload, count) -> index of the first record without a key, or -1"},
    {NULL, NULL, 0, NULL}
};

int
cl_add_functions(PyObject *m)
{
    return PyModule_AddFunctions(m, cl_methods);
}
