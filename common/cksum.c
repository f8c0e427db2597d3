/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checksums and the byte-level helpers of request signing: the S3 checksum
 * algorithms (x-amz-checksum-{crc32,crc32c,crc64nvme,sha1,sha256} and
 * Content-MD5), SHA-256 and HMAC-SHA256, base64, hex, constant-time compare,
 * and the RFC 3986 percent-encoding S3 signs with. CRCs come from ISA-L
 * (crc32_gzip_refl, crc32_iscsi); CRC64/NVME from ISA-L's crc64_rocksoft_refl
 * when the installed ISA-L has it (2.31+), else from the slicing-by-8 table
 * below (Debian 12 ships ISA-L 2.30, which has no NVMe polynomial). SHA1,
 * SHA256 and MD5 checksums over object data go through OpenSSL EVP; the
 * signature path uses the allocation-free SHA256_CTX (see sig_int.h).
 */
#include "common/sig_int.h"

#include <assert.h>
#include <pthread.h>
#include <string.h>

#include <isa-l.h>
#include <openssl/evp.h>

#include "common/mem.h"

/* ------------------------------------------------------------- SHA / HMAC */

void mg_sha256(const void *data, size_t len, uint8_t out[32])
{
    SHA256_CTX c;
    SHA256_Init(&c);
    SHA256_Update(&c, data, len);
    SHA256_Final(out, &c);
}

void mg__hmac_init(struct mg__hmac *h, const void *key, size_t klen)
{
    uint8_t block[64], kh[32];
    if (klen > sizeof(block)) {
        mg_sha256(key, klen, kh);
        key = kh;
        klen = sizeof(kh);
    }
    memset(block, 0, sizeof(block));
    memcpy(block, key, klen);
    for (size_t i = 0; i < sizeof(block); i++)
        block[i] ^= 0x36;
    SHA256_Init(&h->inner);
    SHA256_Update(&h->inner, block, sizeof(block));
    for (size_t i = 0; i < sizeof(block); i++)
        block[i] ^= 0x36 ^ 0x5c;
    SHA256_Init(&h->outer);
    SHA256_Update(&h->outer, block, sizeof(block));
}

void mg__hmac_update(struct mg__hmac *h, const void *data, size_t len)
{
    SHA256_Update(&h->inner, data, len);
}

void mg__hmac_final(struct mg__hmac *h, uint8_t out[32])
{
    uint8_t ih[32];
    SHA256_Final(ih, &h->inner);
    SHA256_Update(&h->outer, ih, sizeof(ih));
    SHA256_Final(out, &h->outer);
}

void mg_hmac_sha256(const void *key, size_t klen, const void *data, size_t len, uint8_t out[32])
{
    struct mg__hmac h;
    mg__hmac_init(&h, key, klen);
    mg__hmac_update(&h, data, len);
    mg__hmac_final(&h, out);
}

/* ------------------------------------------------------------ encodings */

static const char hexdig[] = "0123456789abcdef";

void mg_hex_encode(const uint8_t *in, size_t len, char *out)
{
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = hexdig[in[i] >> 4];
        out[2 * i + 1] = hexdig[in[i] & 15];
    }
    out[2 * len] = '\0';
}

#define HEX_ROW_NONE -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1
const signed char mg__hex_tab[256] = {
    HEX_ROW_NONE,
    HEX_ROW_NONE,
    HEX_ROW_NONE,
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    -1,
    -1,
    -1,
    -1,
    -1,
    -1, /* 0x30 */
    -1,
    10,
    11,
    12,
    13,
    14,
    15,
    -1,
    -1,
    -1,
    -1,
    -1,
    -1,
    -1,
    -1,
    -1, /* 0x40 */
    HEX_ROW_NONE,
    -1,
    10,
    11,
    12,
    13,
    14,
    15,
    -1,
    -1,
    -1,
    -1,
    -1,
    -1,
    -1,
    -1,
    -1, /* 0x60 */
    HEX_ROW_NONE,
    HEX_ROW_NONE,
    HEX_ROW_NONE,
    HEX_ROW_NONE,
    HEX_ROW_NONE,
    HEX_ROW_NONE,
    HEX_ROW_NONE,
    HEX_ROW_NONE,
    HEX_ROW_NONE,
};

/* A-Z a-z 0-9 - _ . ~ */
const unsigned char mg__unreserved_tab[256] = {
    ['-'] = 1, ['_'] = 1, ['.'] = 1, ['~'] = 1, ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1,
    ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1, ['A'] = 1, ['B'] = 1,
    ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1, ['I'] = 1, ['J'] = 1,
    ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1,
    ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1,
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1,
    ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1,
    ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
    ['y'] = 1, ['z'] = 1,
};

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t mg_base64_encode(const uint8_t *in, size_t len, char *out)
{
    size_t o = 0, i = 0;
    for (; i + 3 <= len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = b64[v >> 18];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = b64[(v >> 6) & 63];
        out[o++] = b64[v & 63];
    }
    if (i < len) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0);
        out[o++] = b64[v >> 18];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = i + 1 < len ? b64[(v >> 6) & 63] : '=';
        out[o++] = '=';
    }
    out[o] = '\0';
    return o;
}

static int b64val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

long mg_base64_decode(struct mg_str in, uint8_t *out, size_t cap)
{
    /* Strict RFC 4648 with padding: S3 checksum headers and Content-MD5 are always padded. */
    if (in.len % 4 != 0)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < in.len; i += 4) {
        const unsigned char *p = (const unsigned char *)in.base + i;
        int pad = 0;
        if (i + 4 == in.len) {
            if (p[3] == '=')
                pad++;
            if (p[2] == '=')
                pad++;
            if (pad == 1 && p[2] == '=')
                return -1;
        }
        int v0 = b64val(p[0]), v1 = b64val(p[1]);
        int v2 = pad >= 2 ? 0 : b64val(p[2]), v3 = pad >= 1 ? 0 : b64val(p[3]);
        if (v0 < 0 || v1 < 0 || v2 < 0 || v3 < 0)
            return -1;
        uint32_t v = (uint32_t)v0 << 18 | (uint32_t)v1 << 12 | (uint32_t)v2 << 6 | (uint32_t)v3;
        size_t n = 3 - (size_t)pad;
        if (o + n > cap)
            return -1;
        out[o++] = (uint8_t)(v >> 16);
        if (n > 1)
            out[o++] = (uint8_t)(v >> 8);
        if (n > 2)
            out[o++] = (uint8_t)v;
    }
    return (long)o;
}

int mg_ct_equal(const void *a, const void *b, size_t len)
{
    const volatile unsigned char *x = a, *y = b;
    unsigned char d = 0;
    for (size_t i = 0; i < len; i++)
        d |= x[i] ^ y[i];
    return d == 0;
}

static const char HEXDIG[] = "0123456789ABCDEF";

void mg_uri_encode(struct mg_str in, int keep_slash, struct mg_buf *out)
{
    mg_buf_reserve(out, in.len * 3);
    char *o = out->base + out->len;
    for (size_t i = 0; i < in.len; i++) {
        unsigned char c = (unsigned char)in.base[i];
        if (mg__unreserved(c) || (c == '/' && keep_slash)) {
            *o++ = (char)c;
        } else {
            *o++ = '%';
            *o++ = HEXDIG[c >> 4];
            *o++ = HEXDIG[c & 15];
        }
    }
    out->len = (size_t)(o - out->base);
    out->base[out->len] = '\0';
}

void mg__uri_canon(struct mg_str in, int keep_slash, struct mg_buf *out)
{
    mg_buf_reserve(out, in.len * 3);
    char *o = out->base + out->len;
    for (size_t i = 0; i < in.len; i++) {
        unsigned char c = (unsigned char)in.base[i];
        if (c == '%' && i + 2 < in.len + 0 && mg__hexval(in.base[i + 1]) >= 0 &&
            mg__hexval(in.base[i + 2]) >= 0) {
            c = (unsigned char)(mg__hexval(in.base[i + 1]) << 4 | mg__hexval(in.base[i + 2]));
            i += 2;
        }
        if (mg__unreserved(c) || (c == '/' && keep_slash)) {
            *o++ = (char)c;
        } else {
            *o++ = '%';
            *o++ = HEXDIG[c >> 4];
            *o++ = HEXDIG[c & 15];
        }
    }
    out->len = (size_t)(o - out->base);
    out->base[out->len] = '\0';
}

long mg__uri_decode_raw(struct mg_str in, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < in.len; i++) {
        char c = in.base[i];
        if (c == '%') {
            if (i + 2 >= in.len + 0 || mg__hexval(in.base[i + 1]) < 0 ||
                mg__hexval(in.base[i + 2]) < 0)
                return -1;
            c = (char)(mg__hexval(in.base[i + 1]) << 4 | mg__hexval(in.base[i + 2]));
            i += 2;
        }
        out[o++] = c;
    }
    return (long)o;
}

int mg_uri_decode(struct mg_str in, struct mg_buf *out)
{
    mg_buf_reserve(out, in.len);
    long n = mg__uri_decode_raw(in, out->base + out->len);
    if (n < 0) {
        out->base[out->len] = '\0';
        return -1;
    }
    out->len += (size_t)n;
    out->base[out->len] = '\0';
    return 0;
}

int mg__strieq(struct mg_str a, struct mg_str b)
{
    if (a.len != b.len)
        return 0;
    return a.len == 0 || strncasecmp(a.base, b.base, a.len) == 0;
}

struct mg_str mg__trim(struct mg_str s)
{
    while (s.len && (s.base[0] == ' ' || s.base[0] == '\t')) {
        s.base++;
        s.len--;
    }
    while (s.len && (s.base[s.len - 1] == ' ' || s.base[s.len - 1] == '\t'))
        s.len--;
    return s;
}

/* ------------------------------------------------------------------ time */

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    /* Howard Hinnant's algorithm (proleptic Gregorian), valid for any year. */
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static int digits(const char *p, size_t n, int *out)
{
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 0;
}

static int civil_to_unix(int y, int mo, int d, int h, int mi, int s, int64_t *out)
{
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 || mi > 59 || s > 60)
        return -1;
    *out = days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + s;
    return 0;
}

int mg__time_parse_iso8601(struct mg_str s, int64_t *out)
{
    int y, mo, d, h, mi, sec;
    if (s.len != 16 || s.base[8] != 'T' || s.base[15] != 'Z')
        return -1;
    if (digits(s.base, 4, &y) || digits(s.base + 4, 2, &mo) || digits(s.base + 6, 2, &d) ||
        digits(s.base + 9, 2, &h) || digits(s.base + 11, 2, &mi) || digits(s.base + 13, 2, &sec))
        return -1;
    return civil_to_unix(y, mo, d, h, mi, sec, out);
}

int mg__time_parse_rfc1123(struct mg_str s, int64_t *out)
{
    /* "Sun, 06 Nov 1994 08:49:37 GMT" (29 bytes); also accept "+0000" for GMT. */
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    int d, y, h, mi, sec, mo = 0;
    s = mg__trim(s);
    if (s.len < 29 || s.base[3] != ',' || s.base[4] != ' ' || s.base[7] != ' ' ||
        s.base[11] != ' ' || s.base[16] != ' ' || s.base[19] != ':' || s.base[22] != ':' ||
        s.base[25] != ' ')
        return -1;
    struct mg_str zone = {s.base + 26, s.len - 26};
    if (!(zone.len == 3 && memcmp(zone.base, "GMT", 3) == 0) &&
        !(zone.len == 3 && memcmp(zone.base, "UTC", 3) == 0) &&
        !(zone.len == 5 && memcmp(zone.base, "+0000", 5) == 0))
        return -1;
    if (digits(s.base + 5, 2, &d) || digits(s.base + 12, 4, &y) || digits(s.base + 17, 2, &h) ||
        digits(s.base + 20, 2, &mi) || digits(s.base + 23, 2, &sec))
        return -1;
    for (int i = 0; i < 12; i++)
        if (memcmp(s.base + 8, months + 3 * i, 3) == 0)
            mo = i + 1;
    if (mo == 0)
        return -1;
    return civil_to_unix(y, mo, d, h, mi, sec, out);
}

/* ------------------------------------------------------------- checksums */

static const struct {
    const char *name;   /* as in x-amz-sdk-checksum-algorithm */
    const char *header; /* x-amz-checksum-* */
} algos[] = {
    [MG_CKSUM_NONE] = {"NONE", ""},
    [MG_CKSUM_CRC32] = {"CRC32", "x-amz-checksum-crc32"},
    [MG_CKSUM_CRC32C] = {"CRC32C", "x-amz-checksum-crc32c"},
    [MG_CKSUM_CRC64NVME] = {"CRC64NVME", "x-amz-checksum-crc64nvme"},
    [MG_CKSUM_SHA1] = {"SHA1", "x-amz-checksum-sha1"},
    [MG_CKSUM_SHA256] = {"SHA256", "x-amz-checksum-sha256"},
    [MG_CKSUM_MD5] = {"MD5", "content-md5"},
};

enum mg_cksum_algo mg_cksum_algo_parse(struct mg_str name)
{
    static const char pfx[] = "x-amz-checksum-";
    if (name.len > sizeof(pfx) - 1 && strncasecmp(name.base, pfx, sizeof(pfx) - 1) == 0) {
        name.base += sizeof(pfx) - 1;
        name.len -= sizeof(pfx) - 1;
    }
    for (int a = MG_CKSUM_CRC32; a <= MG_CKSUM_MD5; a++) {
        struct mg_str n = {algos[a].name, strlen(algos[a].name)};
        if (mg__strieq(n, name))
            return (enum mg_cksum_algo)a;
    }
    return MG_CKSUM_NONE;
}

const char *mg_cksum_algo_name(enum mg_cksum_algo a)
{
    assert(a >= MG_CKSUM_NONE && a <= MG_CKSUM_MD5);
    return algos[a].name;
}

const char *mg_cksum_header_name(enum mg_cksum_algo a)
{
    assert(a >= MG_CKSUM_NONE && a <= MG_CKSUM_MD5);
    return algos[a].header;
}

#if ISAL_VERSION >= ISAL_MAKE_VERSION(2, 31, 0)
static uint64_t crc64nvme_update(uint64_t crc, const void *data, size_t len)
{
    return crc64_rocksoft_refl(crc, data, len);
}
#else
/* CRC-64/NVME: reflected polynomial 0x9a6c9329ac4bc9b5, init and xorout all ones.
 * Slicing-by-8 tables for short inputs and tails (~0.7 GB/s), PCLMULQDQ folding for long ones
 * where the CPU has it (Intel, "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ";
 * ~10 GB/s measured here on 64 MiB): S3 computes a CRC64NVME for every object, so this is on
 * the PUT data path. */
#define CRC64NVME_POLY 0x9a6c9329ac4bc9b5ULL

static uint64_t crc64_tab[8][256];
static uint64_t crc64_fold_k[4]; /* x^(n-1) mod P reflected, n = 576, 512, 192, 128 */
static int crc64_have_clmul;
static pthread_once_t crc64_once = PTHREAD_ONCE_INIT;

/* x^n mod P in the reflected representation (bit 63 is x^0). */
static uint64_t xpow_mod(unsigned n)
{
    uint64_t r = 1ULL << 63;
    while (n--)
        r = r & 1 ? (r >> 1) ^ CRC64NVME_POLY : r >> 1;
    return r;
}

static void crc64_tab_init(void)
{
    for (unsigned i = 0; i < 256; i++) {
        uint64_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ CRC64NVME_POLY : c >> 1;
        crc64_tab[0][i] = c;
    }
    for (unsigned i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc64_tab[t][i] = (crc64_tab[t - 1][i] >> 8) ^ crc64_tab[0][crc64_tab[t - 1][i] & 255];
    /* A reflected carry-less product carries one extra factor x: hence n - 1. */
    static const unsigned n[4] = {576, 512, 192, 128};
    for (int i = 0; i < 4; i++)
        crc64_fold_k[i] = xpow_mod(n[i] - 1);
    __builtin_cpu_init();
    crc64_have_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
}

/* The CRC register (no pre/post inversion) advanced over p[0..len). */
static uint64_t crc64_table(uint64_t crc, const unsigned char *p, size_t len)
{
    /* slicing-by-8 (little-endian x86-64 is the only target: DESIGN.md 12) */
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = crc64_tab[7][w & 255] ^ crc64_tab[6][(w >> 8) & 255] ^ crc64_tab[5][(w >> 16) & 255] ^
              crc64_tab[4][(w >> 24) & 255] ^ crc64_tab[3][(w >> 32) & 255] ^
              crc64_tab[2][(w >> 40) & 255] ^ crc64_tab[1][(w >> 48) & 255] ^ crc64_tab[0][w >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = crc64_tab[0][(crc ^ *p++) & 255] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__)
#include <immintrin.h>

/* x * x^n: the low qword (earlier bytes, higher degree) times k's low, high times high. */
__attribute__((target("pclmul,sse4.1"))) static inline __m128i fold(__m128i x, __m128i k)
{
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

/* Fold 16-byte blocks (four lanes while 64 bytes remain), then hand the 16-byte remainder,
 * congruent to everything folded so far, to the table. len >= 64. */
__attribute__((target("pclmul,sse4.1"))) static uint64_t
crc64_clmul(uint64_t crc, const unsigned char *p, size_t len, size_t *done)
{
    const __m128i k512 = _mm_set_epi64x((long long)crc64_fold_k[1], (long long)crc64_fold_k[0]);
    const __m128i k128 = _mm_set_epi64x((long long)crc64_fold_k[3], (long long)crc64_fold_k[2]);
    __m128i x0 = _mm_loadu_si128((const __m128i *)p);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 48));
    x0 = _mm_xor_si128(x0, _mm_cvtsi64_si128((long long)crc));
    size_t i = 64;
    for (; i + 64 <= len; i += 64) {
        x0 = _mm_xor_si128(fold(x0, k512), _mm_loadu_si128((const __m128i *)(p + i)));
        x1 = _mm_xor_si128(fold(x1, k512), _mm_loadu_si128((const __m128i *)(p + i + 16)));
        x2 = _mm_xor_si128(fold(x2, k512), _mm_loadu_si128((const __m128i *)(p + i + 32)));
        x3 = _mm_xor_si128(fold(x3, k512), _mm_loadu_si128((const __m128i *)(p + i + 48)));
    }
    x1 = _mm_xor_si128(fold(x0, k128), x1);
    x2 = _mm_xor_si128(fold(x1, k128), x2);
    x3 = _mm_xor_si128(fold(x2, k128), x3);
    for (; i + 16 <= len; i += 16)
        x3 = _mm_xor_si128(fold(x3, k128), _mm_loadu_si128((const __m128i *)(p + i)));
    unsigned char rest[16];
    _mm_storeu_si128((__m128i *)rest, x3);
    *done = i;
    return crc64_table(0, rest, 16);
}
#endif

/* Same chaining convention as ISA-L's *_refl: pass the previous result (0 to start). */
static uint64_t crc64nvme_update(uint64_t crc, const void *data, size_t len)
{
    const unsigned char *p = data;
    pthread_once(&crc64_once, crc64_tab_init);
    crc = ~crc;
#if defined(__x86_64__)
    if (len >= 256 && crc64_have_clmul) {
        size_t done;
        crc = crc64_clmul(crc, p, len, &done);
        p += done;
        len -= done;
    }
#endif
    return ~crc64_table(crc, p, len);
}
#endif

void mg_cksum_init(struct mg_cksum *c, enum mg_cksum_algo a)
{
    c->algo = a;
    c->crc = 0;
    c->md = NULL;
    const EVP_MD *md = NULL;
    switch (a) {
    case MG_CKSUM_CRC32C:
        c->crc = 0xffffffffu; /* crc32_iscsi neither pre- nor post-inverts */
        return;
    case MG_CKSUM_SHA1:
        md = EVP_sha1();
        break;
    case MG_CKSUM_SHA256:
        md = EVP_sha256();
        break;
    case MG_CKSUM_MD5:
        md = EVP_md5();
        break;
    default:
        return;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL || EVP_DigestInit_ex(ctx, md, NULL) != 1)
        abort(); /* out of memory, as mg_malloc */
    c->md = ctx;
}

void mg_cksum_update(struct mg_cksum *c, const void *data, size_t len)
{
    switch (c->algo) {
    case MG_CKSUM_CRC32:
        c->crc = crc32_gzip_refl((uint32_t)c->crc, data, len);
        break;
    case MG_CKSUM_CRC32C:
        /* crc32_iscsi takes an int length and a non-const buffer (it does not write it). */
        while (len > 0) {
            int n = len > (1u << 30) ? 1 << 30 : (int)len;
            c->crc = crc32_iscsi((unsigned char *)(uintptr_t)data, n, (unsigned)c->crc);
            data = (const char *)data + n;
            len -= (size_t)n;
        }
        break;
    case MG_CKSUM_CRC64NVME:
        c->crc = crc64nvme_update(c->crc, data, len);
        break;
    case MG_CKSUM_SHA1:
    case MG_CKSUM_SHA256:
    case MG_CKSUM_MD5:
        EVP_DigestUpdate(c->md, data, len);
        break;
    default:
        break;
    }
}

size_t mg_cksum_final(struct mg_cksum *c, uint8_t out[32])
{
    uint32_t v32;
    unsigned int n = 0;
    switch (c->algo) {
    case MG_CKSUM_CRC32:
    case MG_CKSUM_CRC32C:
        v32 = c->algo == MG_CKSUM_CRC32C ? ~(uint32_t)c->crc : (uint32_t)c->crc;
        for (int i = 0; i < 4; i++)
            out[i] = (uint8_t)(v32 >> (24 - 8 * i)); /* big-endian, as S3 base64-encodes it */
        return 4;
    case MG_CKSUM_CRC64NVME:
        for (int i = 0; i < 8; i++)
            out[i] = (uint8_t)(c->crc >> (56 - 8 * i));
        return 8;
    case MG_CKSUM_SHA1:
    case MG_CKSUM_SHA256:
    case MG_CKSUM_MD5:
        EVP_DigestFinal_ex(c->md, out, &n);
        return n;
    default:
        return 0;
    }
}

void mg_cksum_close(struct mg_cksum *c)
{
    EVP_MD_CTX_free(c->md);
    c->md = NULL;
    c->algo = MG_CKSUM_NONE;
}

/* ------------------------------------------------------------ CRC combination
 *
 * S3's full-object checksum of a multipart upload is the CRC of the whole object, made from the
 * parts' CRCs without reading a byte (the parts' sizes are known). CRC-32, CRC-32C and
 * CRC-64/NVME are reflected and their initial value equals their final XOR (all ones), so for
 * A followed by B: crc(AB) = crc(A) * x^(8 len(B)) + crc(B) over GF(2) modulo the polynomial
 * (the register preset and the final XOR cancel). Values are kept in the reflected form the
 * tables use: bit width-1 is the coefficient of x^0, bit 0 that of x^(width-1). */

struct crc_field {
    uint64_t poly; /* reflected, without x^width */
    unsigned width;
};

static int crc_field_of(enum mg_cksum_algo a, struct crc_field *f)
{
    switch (a) {
    case MG_CKSUM_CRC32:
        *f = (struct crc_field){0xedb88320u, 32};
        return 0;
    case MG_CKSUM_CRC32C:
        *f = (struct crc_field){0x82f63b78u, 32};
        return 0;
    case MG_CKSUM_CRC64NVME:
        *f = (struct crc_field){0x9a6c9329ac4bc9b5ULL, 64};
        return 0;
    default:
        return -1;
    }
}

/* a * x mod P. */
static uint64_t crc_times_x(const struct crc_field *f, uint64_t a)
{
    return a & 1 ? (a >> 1) ^ f->poly : a >> 1;
}

/* a * b mod P: b times each power of x present in a, lowest power first. */
static uint64_t crc_mul(const struct crc_field *f, uint64_t a, uint64_t b)
{
    uint64_t r = 0;
    for (unsigned i = 0; i < f->width; i++) {
        if ((a >> (f->width - 1 - i)) & 1)
            r ^= b;
        b = crc_times_x(f, b);
    }
    return r;
}

/* x^(8 n) mod P by squaring. */
static uint64_t crc_x8n(const struct crc_field *f, uint64_t n)
{
    uint64_t one = 1ULL << (f->width - 1), r = one, base = one;
    for (int i = 0; i < 8; i++)
        base = crc_times_x(f, base); /* x^8 */
    for (; n != 0; n >>= 1) {
        if (n & 1)
            r = crc_mul(f, r, base);
        base = crc_mul(f, base, base);
    }
    return r;
}

uint64_t mg_crc_combine(enum mg_cksum_algo a, uint64_t crc_a, uint64_t crc_b, uint64_t len_b)
{
    struct crc_field f;
    if (crc_field_of(a, &f) != 0)
        return 0;
    return crc_mul(&f, crc_a, crc_x8n(&f, len_b)) ^ crc_b;
}

void mg_crc_concat_init(struct mg_crc_concat *c, enum mg_cksum_algo a)
{
    struct crc_field f;
    c->algo = a;
    c->crc = 0; /* the CRC of nothing, for all three */
    c->bad = crc_field_of(a, &f) != 0;
}

void mg_crc_concat_add(struct mg_crc_concat *c, struct mg_str value, uint64_t size)
{
    uint8_t raw[16];
    size_t want = c->algo == MG_CKSUM_CRC64NVME ? 8 : 4;
    long n = c->bad ? -1 : mg_base64_decode(value, raw, sizeof(raw));
    if (n != (long)want) {
        c->bad = 1;
        return;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < want; i++)
        v = v << 8 | raw[i]; /* big-endian, as mg_cksum_final writes it */
    c->crc = mg_crc_combine(c->algo, c->crc, v, size);
}

size_t mg_crc_concat_final(const struct mg_crc_concat *c, char out[16])
{
    if (c->bad)
        return 0;
    size_t n = c->algo == MG_CKSUM_CRC64NVME ? 8 : 4;
    uint8_t raw[8];
    for (size_t i = 0; i < n; i++)
        raw[i] = (uint8_t)(c->crc >> (8 * (n - 1 - i)));
    return mg_base64_encode(raw, n, out);
}

int mg_hex_value(int c)
{
    return mg__hexval(c);
}
