/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the canned-ACL decisions of gateway/s3_common.c (issue 2:
 * buckets belong to their creator; anonymous requests are denied unless an
 * ACL allows them): which requester a canned ACL lets read (list a bucket,
 * GET an object) or write (PUT/DELETE objects), and who counts as owner.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/s3.h"

#define S(lit) ((struct mg_str){(lit), sizeof(lit) - 1})

static const struct gw_user alice = {{"alice", 5}, {"AK", 2}, {"SK", 2}};

static void test_acl_matrix(void **state)
{
    struct gw_request anon, user;
    (void)state;
    memset(&anon, 0, sizeof(anon));
    memset(&user, 0, sizeof(user));
    user.user = &alice;

    assert_false(gw__s3_acl_allows(&anon, META_ACL_PRIVATE, GW_PERM_READ));
    assert_false(gw__s3_acl_allows(&user, META_ACL_PRIVATE, GW_PERM_READ));
    assert_false(gw__s3_acl_allows(&user, META_ACL_PRIVATE, GW_PERM_WRITE));

    assert_true(gw__s3_acl_allows(&anon, META_ACL_PUBLIC_READ, GW_PERM_READ));
    assert_false(gw__s3_acl_allows(&anon, META_ACL_PUBLIC_READ, GW_PERM_WRITE));

    assert_true(gw__s3_acl_allows(&anon, META_ACL_PUBLIC_READ_WRITE, GW_PERM_READ));
    assert_true(gw__s3_acl_allows(&anon, META_ACL_PUBLIC_READ_WRITE, GW_PERM_WRITE));

    assert_false(gw__s3_acl_allows(&anon, META_ACL_AUTHENTICATED_READ, GW_PERM_READ));
    assert_true(gw__s3_acl_allows(&user, META_ACL_AUTHENTICATED_READ, GW_PERM_READ));
    assert_false(gw__s3_acl_allows(&user, META_ACL_AUTHENTICATED_READ, GW_PERM_WRITE));

    /* Bucket configuration is never opened by an ACL. */
    assert_false(gw__s3_acl_allows(&user, META_ACL_PUBLIC_READ_WRITE, GW_PERM_OWNER));
    assert_false(gw__s3_acl_allows(&anon, META_ACL_PUBLIC_READ_WRITE, GW_PERM_OWNER));
}

static void test_owner(void **state)
{
    struct gw_request anon, user;
    (void)state;
    memset(&anon, 0, sizeof(anon));
    memset(&user, 0, sizeof(user));
    user.user = &alice;
    assert_true(gw__s3_is_owner(&user, S("alice")));
    assert_false(gw__s3_is_owner(&user, S("alic")));
    assert_false(gw__s3_is_owner(&user, S("bob")));
    /* Anonymous never owns, not even an object an anonymous writer created (owner ""). */
    assert_false(gw__s3_is_owner(&anon, S("")));
    assert_int_equal(gw__s3_requester(&anon).len, 0);
    assert_int_equal(gw__s3_requester(&user).len, 5);
}

static void test_helpers(void **state)
{
    (void)state;
    assert_int_equal(gw__s3_trim(S(" \tab \t")).len, 2);
    assert_true(gw__s3_str_eq(S("ab"), S("ab")));
    assert_false(gw__s3_str_eq(S("ab"), S("abc")));
    assert_true(gw__s3_str_eq(S(""), (struct mg_str){NULL, 0}));
    assert_int_equal(gw__s3_parse_dec(S("0")), 0);
    assert_int_equal(gw__s3_parse_dec(S("9223372036854775807")), INT64_MAX);
    assert_int_equal(gw__s3_parse_dec(S("9223372036854775808")), -1);
    assert_int_equal(gw__s3_parse_dec(S("-1")), -1);
    assert_int_equal(gw__s3_parse_dec(S("")), -1);
    assert_int_equal(gw__s3_parse_dec(S("12a")), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acl_matrix),
        cmocka_unit_test(test_owner),
        cmocka_unit_test(test_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
