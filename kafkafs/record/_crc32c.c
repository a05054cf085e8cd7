/*
 * kafkafs/record/_crc32c.c: CRC-32C (Castagnoli), as Kafka's Crc32C computes it over a v2
 * batch from its attributes to its end: the one CRC-32C routine of the
 * kafkafs.record._speedups extension (kk_crc32c, _speedups.h; rb_crc there applies it to a
 * batch), used by _plain.c, _compaction.c, _columnar.c and _jsonl.c. Its Python side is the
 * crc32c package (kafkafs/record/batch.py, plain.py, compaction.py, columnar.py), which
 * has no C API: the extension does not link it.
 *
 * One implementation per build: Intel's ISA-L crc32_iscsi when setup.py finds ISA-L
 * (KAFKAFS_HAVE_ISAL, linked with -lisal), else the SSE4.2 crc32 instruction on an x86-64
 * CPU that has it (checked once, kk_crc32c_init), else slicing-by-8 tables.
 */
#include "_speedups.h"

#ifdef KAFKAFS_HAVE_ISAL
#include <isa-l/crc.h>

void
kk_crc32c_init(void)
{
    /* crc32_iscsi picks its code for the CPU itself */
}

uint32_t
kk_crc32c(const uint8_t *p, Py_ssize_t n)
{
    /* n < 2 GiB: a batch's size comes from its int32 length */
    return ~crc32_iscsi((unsigned char *)p, (int)n, 0xFFFFFFFFu);
}

#else  /* !KAFKAFS_HAVE_ISAL */

static uint32_t crc_table[8][256];  /* slicing-by-8, reflected polynomial 0x82F63B78 */
static int have_sse42 = 0;

void
kk_crc32c_init(void)
{
    uint32_t i, j, c;
    for (i = 0; i < 256; i++) {
        c = i;
        for (j = 0; j < 8; j++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (i = 0; i < 256; i++)
        for (j = 1; j < 8; j++)
            crc_table[j][i] = (crc_table[j - 1][i] >> 8) ^
                crc_table[0][crc_table[j - 1][i] & 0xff];
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    have_sse42 = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t
crc_sw(uint32_t crc, const uint8_t *p, size_t n)
{
    while (n >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                             ((uint32_t)p[3] << 24));
        uint32_t hi = (uint32_t)p[4] | ((uint32_t)p[5] << 8) | ((uint32_t)p[6] << 16) |
            ((uint32_t)p[7] << 24);
        crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
            crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
            crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
            crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2")))
static uint32_t
crc_hw(uint32_t crc, const uint8_t *p, size_t n)
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

uint32_t
kk_crc32c(const uint8_t *p, Py_ssize_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (have_sse42)
        return ~crc_hw(0xFFFFFFFFu, p, (size_t)n);
#endif
    return ~crc_sw(0xFFFFFFFFu, p, (size_t)n);
}

#endif  /* KAFKAFS_HAVE_ISAL */
