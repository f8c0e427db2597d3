/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lifecycle/'s internal header: the one validity check shared by the XML parser
 * (xml.c) and the binary decoder (codec.c), so a configuration that loads is one
 * the parser could have produced (STYLE.md 7a: valid before written, valid again
 * after read), and small string helpers.
 */
#ifndef MG_LIFECYCLE_INTERNAL_H
#define MG_LIFECYCLE_INTERNAL_H

#include "lifecycle/lifecycle.h"

/* Characters (UTF-8 code points) in s, or -1 when s is not valid UTF-8 or holds a code point
 * XML 1.0 cannot carry (controls other than tab, LF, CR; surrogates; U+FFFE, U+FFFF), so a
 * decoded configuration is one an XML body could have given. */
long lc__utf8_len(struct mg_str s);

/* memcmp order of two strings, a shorter one first on a common prefix: <0, 0, >0. */
int lc__str_cmp(struct mg_str a, struct mg_str b);

/* 1 when a and b hold the same bytes. */
int lc__str_eq(struct mg_str a, struct mg_str b);

/* Write a formatted message into errmsg (LC_ERRMSG_LEN, may be NULL); returns rv. */
int lc__fail(int rv, char *errmsg, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* One rule's invariants, as documented in lifecycle.h (filter form, bounds, actions). The ID
 * is checked only for length and encoding. Returns 0, MG_EINVALIDARGUMENT,
 * MG_EINVALIDREQUEST, MG_EINVALIDTAG or MG_EMALFORMEDXML with S3's message. */
int lc__rule_check(const struct lc_rule *r, char *errmsg);

/* The rule count (1..LC_RULES_MAX: MG_EINVALIDREQUEST), ID lengths and uniqueness among the
 * non-empty IDs (MG_EINVALIDARGUMENT), no mix of legacy Prefix and Filter (MG_EINVALIDREQUEST). */
int lc__config_check_head(const struct lc_config *cfg, char *errmsg);

/* Before Lifecycle V2 (rules with their own Prefix), no two rules taking the same kind of
 * action (Expiration, AbortIncompleteMultipartUpload) may have overlapping prefixes:
 * MG_EINVALIDREQUEST. Needs the rules' actions set. */
int lc__config_check_overlap(const struct lc_config *cfg, char *errmsg);

/* The configuration's invariants: the rule count, ID lengths and uniqueness, no mix of legacy
 * Prefix and Filter, then lc__rule_check for each rule in order, then
 * lc__config_check_overlap. Same returns. */
int lc__config_check(const struct lc_config *cfg, char *errmsg);

#endif
