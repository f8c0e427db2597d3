/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_lifecycle: the lifecycle/ unit test binary. Runs every group; the exit
 * code is the number of failures.
 */
#include <stdio.h>
#include <string.h>

#include "tests/unit/lifecycle/test_lifecycle.h"

int tl_setup(void **state)
{
    *state = mg_calloc(1, sizeof(struct mg_arena));
    mg_arena_init(*state);
    return 0;
}

int tl_teardown(void **state)
{
    struct mg_arena *a = *state;
    mg_arena_close(a);
    mg_free(a);
    return 0;
}

void tl_parse_ok(struct mg_arena *a, const char *xml, struct lc_config *cfg)
{
    char errmsg[LC_ERRMSG_LEN] = "";
    int rv = lc_config_parse((struct mg_str){xml, strlen(xml)}, a, cfg, errmsg);
    if (rv != 0)
        fail_msg("lc_config_parse: %s %s for %s", mg_err_name(rv), errmsg, xml);
}

void tl_parse_fails(const char *xml, int rv, const char *msg)
{
    struct mg_arena a;
    struct lc_config cfg;
    char errmsg[LC_ERRMSG_LEN] = "";
    int got;
    mg_arena_init(&a);
    got = lc_config_parse((struct mg_str){xml, strlen(xml)}, &a, &cfg, errmsg);
    mg_arena_close(&a);
    if (got != rv)
        fail_msg("expected %s, got %s (%s) for %s", mg_err_name(rv), mg_err_name(got), errmsg,
                 xml);
    if (msg != NULL && strstr(errmsg, msg) == NULL)
        fail_msg("expected message '%s', got '%s'", msg, errmsg);
    assert_int_equal(cfg.nrules, 0);
}

int tl_expires(const struct lc_config *cfg, const char *key, uint64_t size,
               const struct lc_tag *tags, size_t ntags)
{
    struct lc_object o = {.key = {key, strlen(key)}, .size = size, .tags = tags, .ntags = ntags};
    const struct lc_rule *r;
    int64_t due;
    return lc_config_expiry(cfg, &o, LC_DAY_SECONDS, &due, &r);
}

int main(int argc, char **argv)
{
    int failed = 0;
    mg_log_set_level("warn");
    if (argc == 3 && strcmp(argv[1], "--kill9-child") == 0)
        return test_scheduler_kill9_child(argv[2]);
    failed += test_xml_run();
    failed += test_rule_run();
    failed += test_codec_run();
    failed += test_rate_run();
    failed += test_scheduler_run();
    return failed;
}
