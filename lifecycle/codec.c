/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The binary form of a lifecycle configuration, stored in the bucket record
 * and decoded on the write path (due times) and by the scheduler, so it is
 * cheap to read: fixed-width little-endian fields, no parsing of text.
 *
 *   "MGLC" u8 version (1) u8 reserved (0) u16 nrules
 *   per rule: u8 flags (1 enabled, 2 has_size_gt, 4 has_size_lt) u8 form u8 exp_kind
 *             u8 ntags u32 exp_days i64 exp_date_ms u32 abort_days u64 size_gt u64 size_lt
 *             u16 id_len id u16 prefix_len prefix ntags * (u16 klen key u16 vlen value)
 *   u32 CRC32C of every byte before it
 *
 * The decoder treats the bytes as disk data (STYLE.md 3): it checks the
 * checksum, every length against what is left, every enum and flag, and then
 * the same invariants the parser enforces (lc__config_check), so a
 * configuration that loads is one the parser could have built, and it
 * compiles back to the same bytes (the mapping is one-to-one).
 */
#include <assert.h>
#include <string.h>

#define MG_MODULE "lifecycle"
#include "lifecycle/internal.h"

#define LC_MAGIC "MGLC"
#define LC_VERSION 1
#define LC_HEAD_LEN 8
#define LC_RULE_MIN_LEN 40 /* the fixed fields (36 bytes) and two length words */
#define F_ENABLED 1u
#define F_SIZE_GT 2u
#define F_SIZE_LT 4u

/* ------------------------------------------------------------------ write */

static void put_le(struct mg_buf *b, uint64_t v, size_t n)
{
    uint8_t x[8];
    for (size_t i = 0; i < n; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    mg_buf_append(b, x, n);
}

static void put_str16(struct mg_buf *b, struct mg_str s)
{
    assert(s.len <= UINT16_MAX);
    put_le(b, s.len, 2);
    if (s.len > 0)
        mg_buf_append(b, s.base, s.len);
}

static uint32_t crc32c(const void *p, size_t n)
{
    struct mg_cksum c;
    uint8_t d[32];
    mg_cksum_init(&c, MG_CKSUM_CRC32C);
    mg_cksum_update(&c, p, n);
    mg_cksum_final(&c, d);
    mg_cksum_close(&c);
    return (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3];
}

void lc_config_compile(const struct lc_config *cfg, struct mg_buf *out)
{
    size_t start = out->len;
    assert(lc__config_check(cfg, NULL) == 0);
    mg_buf_append(out, LC_MAGIC, 4);
    put_le(out, LC_VERSION, 1);
    put_le(out, 0, 1);
    put_le(out, cfg->nrules, 2);
    for (size_t i = 0; i < cfg->nrules; i++) {
        const struct lc_rule *r = &cfg->rules[i];
        const struct lc_filter *f = &r->filter;
        put_le(out, (r->enabled ? F_ENABLED : 0) | (f->has_size_gt ? F_SIZE_GT : 0) |
                        (f->has_size_lt ? F_SIZE_LT : 0), 1);
        put_le(out, (uint64_t)f->form, 1);
        put_le(out, (uint64_t)r->exp_kind, 1);
        put_le(out, f->ntags, 1);
        put_le(out, r->exp_days, 4);
        put_le(out, (uint64_t)r->exp_date_ms, 8);
        put_le(out, r->abort_days, 4);
        put_le(out, f->size_gt, 8);
        put_le(out, f->size_lt, 8);
        put_str16(out, r->id);
        put_str16(out, f->prefix);
        for (size_t t = 0; t < f->ntags; t++) {
            put_str16(out, f->tags[t].key);
            put_str16(out, f->tags[t].value);
        }
    }
    put_le(out, crc32c(out->base + start, out->len - start), 4);
}

/* ------------------------------------------------------------------- read */

struct reader {
    const uint8_t *p;
    size_t left;
    struct mg_arena *a;
    int bad; /* sticky: set by the first short read */
};

static uint64_t get_le(struct reader *rd, size_t n)
{
    uint64_t v = 0;
    if (rd->bad || rd->left < n) {
        rd->bad = 1;
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)rd->p[i] << (8 * i);
    rd->p += n, rd->left -= n;
    return v;
}

static struct mg_str get_str16(struct reader *rd)
{
    size_t n = (size_t)get_le(rd, 2);
    struct mg_str s = {"", 0};
    if (rd->bad || rd->left < n) {
        rd->bad = 1;
        return s;
    }
    s.base = mg_arena_dup(rd->a, rd->p, n);
    s.len = n;
    rd->p += n, rd->left -= n;
    return s;
}

static int get_rule(struct reader *rd, struct lc_rule *r)
{
    struct lc_filter *f = &r->filter;
    unsigned flags = (unsigned)get_le(rd, 1), form = (unsigned)get_le(rd, 1);
    unsigned kind = (unsigned)get_le(rd, 1);
    f->ntags = (size_t)get_le(rd, 1);
    r->exp_days = (uint32_t)get_le(rd, 4);
    r->exp_date_ms = (int64_t)get_le(rd, 8);
    r->abort_days = (uint32_t)get_le(rd, 4);
    f->size_gt = get_le(rd, 8);
    f->size_lt = get_le(rd, 8);
    if (rd->bad || (flags & ~(F_ENABLED | F_SIZE_GT | F_SIZE_LT)) != 0 ||
        form >= LC_FORM__COUNT || kind >= LC_EXP__COUNT || f->ntags > LC_FILTER_TAGS_MAX)
        return MG_ECORRUPT;
    r->enabled = (flags & F_ENABLED) != 0;
    f->has_size_gt = (flags & F_SIZE_GT) != 0;
    f->has_size_lt = (flags & F_SIZE_LT) != 0;
    f->form = (enum lc_filter_form)form;
    r->exp_kind = (enum lc_exp_kind)kind;
    r->id = get_str16(rd);
    f->prefix = get_str16(rd);
    f->tags = f->ntags ? mg_arena_alloc(rd->a, f->ntags * sizeof(*f->tags)) : NULL;
    for (size_t t = 0; t < f->ntags; t++) {
        f->tags[t].key = get_str16(rd);
        f->tags[t].value = get_str16(rd);
    }
    return rd->bad ? MG_ECORRUPT : 0;
}

int lc_config_load(const void *bytes, size_t len, struct mg_arena *a, struct lc_config *out)
{
    struct reader rd = {.p = bytes, .left = len, .a = a};
    size_t n;
    assert(a != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    if (len < LC_HEAD_LEN + 4 || memcmp(bytes, LC_MAGIC, 4) != 0 ||
        crc32c(bytes, len - 4) != (uint32_t)(rd.p[len - 4] | rd.p[len - 3] << 8 |
                                              rd.p[len - 2] << 16 | (uint32_t)rd.p[len - 1] << 24))
        return MG_ECORRUPT;
    rd.p += 4, rd.left -= 8; /* the magic, and the CRC at the end */
    if (get_le(&rd, 1) != LC_VERSION || get_le(&rd, 1) != 0)
        return MG_ECORRUPT;
    n = (size_t)get_le(&rd, 2);
    /* Each rule takes at least its fixed part and two lengths: bound n before allocating. */
    if (n == 0 || n > LC_RULES_MAX || n > rd.left / LC_RULE_MIN_LEN)
        return MG_ECORRUPT;
    out->rules = mg_arena_alloc(a, n * sizeof(*out->rules));
    memset(out->rules, 0, n * sizeof(*out->rules));
    out->nrules = n;
    for (size_t i = 0; i < n; i++)
        if (get_rule(&rd, &out->rules[i]) != 0)
            goto corrupt;
    if (rd.left != 0 || lc__config_check(out, NULL) != 0)
        goto corrupt;
    return 0;
corrupt:
    memset(out, 0, sizeof(*out));
    return MG_ECORRUPT;
}
