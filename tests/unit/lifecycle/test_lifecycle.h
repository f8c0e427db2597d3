/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared helpers for the lifecycle/ unit tests: parse a literal configuration
 * into a per-test arena and check the error code an invalid one gets.
 */
#ifndef MG_TEST_LIFECYCLE_H
#define MG_TEST_LIFECYCLE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "lifecycle/internal.h"

#define S(lit) ((struct mg_str){(lit), sizeof(lit) - 1})
/* A one-rule configuration around the rule body r. */
#define LC1(r) "<LifecycleConfiguration><Rule>" r "</Rule></LifecycleConfiguration>"

/* cmocka fixture: *state is a fresh struct mg_arena *, closed and freed by tl_teardown. */
int tl_setup(void **state);
int tl_teardown(void **state);
/* Parse xml into *cfg from a; fails the test with the message when the parse fails. */
void tl_parse_ok(struct mg_arena *a, const char *xml, struct lc_config *cfg);
/* Parse xml; assert it fails with rv (and, when msg is not NULL, that errmsg contains msg). */
void tl_parse_fails(const char *xml, int rv, const char *msg);
/* 1 when the object (key, size, tags) is expired by cfg under day_seconds 86400. */
int tl_expires(const struct lc_config *cfg, const char *key, uint64_t size,
               const struct lc_tag *tags, size_t ntags);

int test_xml_run(void);
int test_rule_run(void);
int test_codec_run(void);
int test_rate_run(void);
int test_scheduler_run(void);
/* The store + scheduler killed mid-expiry (test_scheduler.c): "test_lifecycle --kill9-child
 * DIR". */
int test_scheduler_kill9_child(const char *dir);

#endif
