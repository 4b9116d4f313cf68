/*
 * rocketstore.format._native, CRC32 (zlib's when it is loaded, else a table or a
 * carry-less multiply loop): masked_crc32.
 * (native.h describes the module; one extension, one translation unit per concern.)
 */
#include "native.h"

#ifdef HAVE_CLMUL_CRC
static int cpu_has_clmul = 0; /* set once at import, from the CPU's feature flags */
#endif

/* ---- CRC32 -------------------------------------------------------------------------- */
/* zlib's crc32 (the one zlib.crc32 runs) is looked up in the already loaded libz, so
 * building needs no zlib headers; a table-driven CRC is the fallback. */

typedef unsigned long (*zlib_crc32_fn)(unsigned long, const unsigned char *, unsigned int);
static zlib_crc32_fn zlib_crc32 = NULL;
static uint32_t crc_table[8][256];

void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = crc_table[0][n];
        for (int t = 1; t < 8; t++) {
            c = crc_table[0][c & 0xFF] ^ (c >> 8);
            crc_table[t][n] = c;
        }
    }
#ifdef HAVE_CLMUL_CRC
    __builtin_cpu_init();
    cpu_has_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    if (getenv("ROCKETSTORE_NO_CLMUL") != NULL || getenv("ROCKETSTORE_CRC_TABLE") != NULL)
        cpu_has_clmul = 0; /* tests: the other CRC paths */
#endif
    const char *names[] = {"libz.so.1", "libz.so", NULL};
    if (getenv("ROCKETSTORE_CRC_TABLE") != NULL) return; /* tests: the fallback alone */
    for (int i = 0; names[i] != NULL && zlib_crc32 == NULL; i++) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib != NULL) zlib_crc32 = (zlib_crc32_fn)dlsym(lib, "crc32");
    }
}

static uint32_t crc32_table(uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    while (n >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                             ((uint32_t)p[3] << 24));
        crc = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^
              crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
              crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) crc = crc_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

#ifdef HAVE_CLMUL_CRC

/*
 * CRC-32 (zlib's, bit-reflected polynomial 0xEDB88320) of ``n`` bytes, ``n`` >= 64 and a
 * multiple of 16, by folding with carry-less multiplication (Intel, "Fast CRC Computation
 * for Generic Polynomials Using PCLMULQDQ Instruction", 2009): four 128-bit lanes folded
 * 64 bytes at a time, then into one lane, then reduced to 64 and to 32 bits (Barrett).
 * ``state`` and the result are the CRC register (the inverse of zlib's crc value). The
 * fold constants are x^(k) mod P for the distances the paper gives, bit-reflected: k1 =
 * x^(4*128+32), k2 = x^(4*128-32), k3 = x^(128+32), k4 = x^(128-32), k5 = x^64 mod P; and
 * for the reduction P' (the polynomial) and mu = floor(x^64 / P).
 */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc32_clmul(uint32_t state,
                                                                      const uint8_t *p,
                                                                      size_t n) {
    const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL);
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
    const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124LL);
    const __m128i poly_mu = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
    const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 0x00));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 0x10));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 0x20));
    __m128i x4 = _mm_loadu_si128((const __m128i *)(p + 0x30));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)state));
    p += 64;
    n -= 64;
    while (n >= 64) {
        __m128i t1 = _mm_clmulepi64_si128(x1, k1k2, 0x00);
        __m128i t2 = _mm_clmulepi64_si128(x2, k1k2, 0x00);
        __m128i t3 = _mm_clmulepi64_si128(x3, k1k2, 0x00);
        __m128i t4 = _mm_clmulepi64_si128(x4, k1k2, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k1k2, 0x11);
        x2 = _mm_clmulepi64_si128(x2, k1k2, 0x11);
        x3 = _mm_clmulepi64_si128(x3, k1k2, 0x11);
        x4 = _mm_clmulepi64_si128(x4, k1k2, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, t1), _mm_loadu_si128((const __m128i *)(p + 0x00)));
        x2 = _mm_xor_si128(_mm_xor_si128(x2, t2), _mm_loadu_si128((const __m128i *)(p + 0x10)));
        x3 = _mm_xor_si128(_mm_xor_si128(x3, t3), _mm_loadu_si128((const __m128i *)(p + 0x20)));
        x4 = _mm_xor_si128(_mm_xor_si128(x4, t4), _mm_loadu_si128((const __m128i *)(p + 0x30)));
        p += 64;
        n -= 64;
    }
    /* Four lanes into one, then the remaining 16-byte blocks. */
    __m128i lanes[3] = {x2, x3, x4};
    for (int i = 0; i < 3; i++) {
        __m128i t = _mm_clmulepi64_si128(x1, k3k4, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, t), lanes[i]);
    }
    while (n >= 16) {
        __m128i t = _mm_clmulepi64_si128(x1, k3k4, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, t), _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    /* 128 bits to 64, then to 32 (Barrett). */
    __m128i t = _mm_clmulepi64_si128(x1, k3k4, 0x10);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t);
    t = _mm_srli_si128(x1, 4);
    x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), k5, 0x00);
    x1 = _mm_xor_si128(x1, t);
    t = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), poly_mu, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), poly_mu, 0x00);
    x1 = _mm_xor_si128(x1, t);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}
#endif

/* zlib's crc32 of p[0:n] continuing from ``crc`` (a zlib crc value, 0 to start). */
static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n) {
    if (zlib_crc32 != NULL) {
        while (n > 0) {
            unsigned int step = n > 0x40000000u ? 0x40000000u : (unsigned int)n;
            crc = (uint32_t)zlib_crc32(crc, p, step);
            p += step;
            n -= step;
        }
        return crc;
    }
    return crc32_table(crc, p, n);
}

/* RocketMQ's body CRC: zlib CRC32 & 0x7FFFFFFF, 0 for an empty body. */
uint32_t masked_crc(const uint8_t *p, size_t n) {
    if (n == 0) return 0;
    uint32_t crc = 0;
#ifdef HAVE_CLMUL_CRC
    if (cpu_has_clmul && n >= 64) {
        size_t whole = n & ~(size_t)15;
        crc = ~crc32_clmul(~crc, p, whole);
        return crc32_update(crc, p + whole, n - whole) & CRC_MASK;
    }
#endif
    if (zlib_crc32 != NULL) {
        while (n > 0) {
            unsigned int step = n > 0x40000000u ? 0x40000000u : (unsigned int)n;
            crc = (uint32_t)zlib_crc32(crc, p, step);
            p += step;
            n -= step;
        }
    } else {
        crc = crc32_table(0, p, n);
    }
    return crc & CRC_MASK;
}

PyObject *py_masked_crc32(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    uint32_t crc;
    Py_BEGIN_ALLOW_THREADS
    crc = masked_crc((const uint8_t *)view.buf, (size_t)view.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

PyObject *py_crc_backend(PyObject *self, PyObject *unused) {
#ifdef HAVE_CLMUL_CRC
    if (cpu_has_clmul)
        return PyUnicode_FromString(zlib_crc32 != NULL ? "clmul+zlib" : "clmul+table");
#endif
    return PyUnicode_FromString(zlib_crc32 != NULL ? "zlib" : "table");
}
