/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for gateway/xml.c: emission escaping, the expat tree parser and
 * its refusals (DOCTYPE, entity declarations, depth), and each request-body
 * parser with the limits S3 applies (Delete <= 1000 keys, tag counts and
 * lengths, canned-only ACL policies, empty CompleteMultipartUpload).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "gateway/s3.h"

#define S(lit) ((struct mg_str){(lit), sizeof(lit) - 1})

static struct mg_str buf_str(const struct mg_buf *b)
{
    return (struct mg_str){b->base ? b->base : "", b->len};
}

static int setup(void **state)
{
    struct mg_arena *a = mg_malloc(sizeof(*a));
    mg_arena_init(a);
    *state = a;
    return 0;
}

static int teardown(void **state)
{
    mg_arena_close(*state);
    mg_free(*state);
    return 0;
}

/* ------------------------------------------------------------------ emission */

static void test_escape(void **state)
{
    struct mg_buf b;
    (void)state;
    mg_buf_init(&b);
    gw_xml_elem(&b, "Key", S("a&b<c>d\"e'f\x01g"));
    mg_buf_append(&b, "", 1);
    assert_string_equal(b.base, "<Key>a&amp;b&lt;c&gt;d&quot;e&apos;f&#x1;g</Key>");
    mg_buf_close(&b);
}

static void test_escape_utf8_untouched(void **state)
{
    struct mg_buf b;
    (void)state;
    mg_buf_init(&b);
    gw_xml_escape(&b, S("dir/hello world+&=\xc3\xa9~.txt"));
    mg_buf_append(&b, "", 1);
    assert_string_equal(b.base, "dir/hello world+&amp;=\xc3\xa9~.txt");
    mg_buf_close(&b);
}

static void test_open_close_elemf(void **state)
{
    struct mg_buf b;
    (void)state;
    mg_buf_init(&b);
    gw_xml_open(&b, "R");
    gw_xml_elemf(&b, "N", "%d<%s", 42, "x");
    gw_xml_close(&b, "R");
    mg_buf_append(&b, "", 1);
    assert_non_null(strstr(b.base, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"));
    assert_non_null(strstr(b.base, "<R xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"));
    assert_non_null(strstr(b.base, "<N>42&lt;x</N></R>"));
    mg_buf_close(&b);
}

static void test_elemf_long(void **state)
{
    struct mg_buf b;
    char big[600];
    (void)state;
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    mg_buf_init(&b);
    gw_xml_elemf(&b, "V", "%s", big);
    assert_int_equal(b.len, strlen(big) + strlen("<V></V>"));
    mg_buf_close(&b);
}

static void test_elem_url(void **state)
{
    struct mg_buf b;
    (void)state;
    mg_buf_init(&b);
    gw_xml_elem_enc(&b, "Key", S("dir/a b+c&\xc3\xa9"), 1);
    mg_buf_append(&b, "", 1);
    assert_string_equal(b.base, "<Key>dir/a%20b%2Bc%26%C3%A9</Key>");
    mg_buf_close(&b);
}

static void test_elem_fast(void **state)
{
    struct mg_buf b;
    (void)state;
    mg_buf_init(&b);
    gw_xml_elem_u64(&b, "Size", 0);
    gw_xml_elem_u64(&b, "Size", UINT64_MAX);
    gw_xml_elem_bool(&b, "IsTruncated", 1);
    gw_xml_elem_bool(&b, "IsTruncated", 0);
    gw_xml_elem_cstr(&b, "Code", "a<b");
    gw_xml_elem_etag(&b, "ETag", S("d41d8cd98f00b204e9800998ecf8427e-2"));
    gw_xml_elem_enc(&b, "Key", S(""), 1);
    mg_buf_append(&b, "", 1);
    assert_string_equal(b.base, "<Size>0</Size><Size>18446744073709551615</Size>"
                                "<IsTruncated>true</IsTruncated><IsTruncated>false</IsTruncated>"
                                "<Code>a&lt;b</Code>"
                                "<ETag>&quot;d41d8cd98f00b204e9800998ecf8427e-2&quot;</ETag>"
                                "<Key></Key>");
    mg_buf_close(&b);
}

/* Emitted XML parses back to the same text. */
static void test_roundtrip(void **state)
{
    struct mg_buf b;
    struct gw_xml_node *root;
    const struct gw_xml_node *k;
    mg_buf_init(&b);
    gw_xml_open(&b, "Root");
    gw_xml_elem(&b, "Key", S("<&>\"' x"));
    gw_xml_close(&b, "Root");
    assert_int_equal(gw_xml_parse(buf_str(&b), *state, &root, NULL), 0);
    k = gw_xml_child(root, "Key");
    assert_non_null(k);
    assert_string_equal(k->text.base, "<&>\"' x");
    mg_buf_close(&b);
}

/* ------------------------------------------------------------------- parsing */

static void test_parse_tree(void **state)
{
    struct gw_xml_node *root;
    const struct gw_xml_node *a;
    char err[256] = "";
    int rv = gw_xml_parse(S("<?xml version=\"1.0\"?><s3:R xmlns:s3=\"u\"><A>x&amp;y</A>"
                            "<B><C>1</C></B><A>2</A></s3:R>"),
                          *state, &root, err);
    assert_int_equal(rv, 0);
    assert_int_equal(root->name.len, 1);
    assert_memory_equal(root->name.base, "R", 1);
    a = gw_xml_child(root, "A");
    assert_non_null(a);
    assert_string_equal(a->text.base, "x&y");
    assert_non_null(a->next);
    assert_string_equal(gw_xml_child(gw_xml_child(root, "B"), "C")->text.base, "1");
    assert_null(gw_xml_child(root, "Z"));
}

static void test_parse_malformed(void **state)
{
    struct gw_xml_node *root;
    char err[256] = "";
    assert_int_equal(gw_xml_parse(S("<A><B></A>"), *state, &root, err), MG_EMALFORMEDXML);
    assert_true(strlen(err) > 0);
    assert_int_equal(gw_xml_parse(S(""), *state, &root, NULL), MG_EMALFORMEDXML);
    assert_int_equal(gw_xml_parse(S("not xml"), *state, &root, NULL), MG_EMALFORMEDXML);
    assert_int_equal(gw_xml_parse(S("<A/><B/>"), *state, &root, NULL), MG_EMALFORMEDXML);
}

static void test_doctype_rejected(void **state)
{
    struct gw_xml_node *root;
    char err[256] = "";
    int rv = gw_xml_parse(S("<?xml version=\"1.0\"?><!DOCTYPE Delete><Delete/>"), *state, &root,
                          err);
    assert_int_equal(rv, MG_EMALFORMEDXML);
    assert_non_null(strstr(err, "DOCTYPE"));
}

static void test_billion_laughs_rejected(void **state)
{
    struct gw_xml_node *root;
    static const char doc[] = "<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\">"
                              "<!ENTITY lol2 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">]>"
                              "<Tagging><TagSet><Tag><Key>&lol2;</Key><Value>v</Value></Tag>"
                              "</TagSet></Tagging>";
    assert_int_equal(gw_xml_parse(S(doc), *state, &root, NULL), MG_EMALFORMEDXML);
}

static void test_xxe_rejected(void **state)
{
    struct gw_xml_node *root;
    static const char doc[] = "<?xml version=\"1.0\"?><!DOCTYPE d [<!ENTITY x SYSTEM "
                              "\"file:///etc/passwd\">]><Delete><Object><Key>&x;</Key></Object>"
                              "</Delete>";
    assert_int_equal(gw_xml_parse(S(doc), *state, &root, NULL), MG_EMALFORMEDXML);
}

static void test_undeclared_entity(void **state)
{
    struct gw_xml_node *root;
    assert_int_equal(gw_xml_parse(S("<A>&foo;</A>"), *state, &root, NULL), MG_EMALFORMEDXML);
}

static void test_depth_limit(void **state)
{
    struct mg_buf b;
    struct gw_xml_node *root;
    int i;
    mg_buf_init(&b);
    for (i = 0; i < GW_XML_DEPTH_MAX + 1; i++)
        mg_buf_appendf(&b, "<a>");
    for (i = 0; i < GW_XML_DEPTH_MAX + 1; i++)
        mg_buf_appendf(&b, "</a>");
    assert_int_equal(gw_xml_parse(buf_str(&b), *state, &root, NULL), MG_EMALFORMEDXML);
    mg_buf_close(&b);
}

/* The node budget is reachable with siblings alone, and parsing it must stay linear: appending
 * each child by walking its siblings took minutes of loop time for GW_XML_NODES_MAX - 1 of
 * them (a 0.8 MB DeleteObjects body). Also checks document order survives the O(1) append. */
static void test_many_siblings_linear(void **state)
{
    struct mg_buf b;
    struct gw_xml_node *root;
    const struct gw_xml_node *c;
    struct timespec t0, t1;
    size_t i, n = GW_XML_NODES_MAX - 1; /* n + 1 elements in all: the budget */
    mg_buf_init(&b);
    mg_buf_appendf(&b, "<Delete><x><y>1</y><z>2</z></x>");
    for (i = 1; i < n - 3; i++)
        mg_buf_append(&b, "<a/>", 4);
    mg_buf_appendf(&b, "<last>end</last></Delete>");
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(gw_xml_parse(buf_str(&b), *state, &root, NULL), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_true((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 3000);
    c = root->child;
    assert_int_equal(c->name.len, 1);
    assert_memory_equal(c->name.base, "x", 1);
    assert_memory_equal(c->child->name.base, "y", 1);
    assert_memory_equal(c->child->next->name.base, "z", 1);
    assert_null(c->child->next->next);
    for (i = 1; c->next != NULL; i++)
        c = c->next;
    assert_int_equal(i, n - 2); /* x, n - 4 a, last: with Delete, y and z, n + 1 nodes */
    assert_memory_equal(c->name.base, "last", 4);
    assert_memory_equal(c->text.base, "end", 3);
    mg_buf_close(&b);
}

static void test_check_root(void **state)
{
    assert_int_equal(gw_xml_check(S("<LifecycleConfiguration><Rule/></LifecycleConfiguration>"),
                                  "LifecycleConfiguration", *state, NULL),
                     0);
    assert_int_equal(gw_xml_check(S("<Other/>"), "LifecycleConfiguration", *state, NULL),
                     MG_EMALFORMEDXML);
}

/* ------------------------------------------------------------- Complete */

static void test_complete(void **state)
{
    struct meta_part *p;
    size_t n;
    static const char doc[] =
        "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        "<Part><ETag>\"aaa\"</ETag><PartNumber>1</PartNumber>"
        "<ChecksumCRC32>5qwIxQ==</ChecksumCRC32></Part>"
        "<Part><PartNumber> 2 </PartNumber><ETag>bbb</ETag></Part>"
        "<Part><ETag>&quot;ccc&quot;</ETag><PartNumber>10000</PartNumber></Part>"
        "</CompleteMultipartUpload>";
    assert_int_equal(gw_xml_parse_complete(S(doc), *state, &p, &n, NULL), 0);
    assert_int_equal(n, 3);
    assert_int_equal(p[0].number, 1);
    assert_int_equal(p[0].etag.len, 3);
    assert_memory_equal(p[0].etag.base, "aaa", 3);
    assert_int_equal(p[0].checksum.len, 8);
    assert_int_equal(p[1].number, 2);
    assert_memory_equal(p[1].etag.base, "bbb", 3);
    assert_int_equal(p[1].checksum.len, 0);
    assert_int_equal(p[2].number, 10000);
    assert_memory_equal(p[2].etag.base, "ccc", 3);
}

static void test_complete_invalid(void **state)
{
    struct meta_part *p;
    size_t n;
    assert_int_equal(gw_xml_parse_complete(S("<CompleteMultipartUpload/>"), *state, &p, &n, NULL),
                     MG_EMALFORMEDXML);
    assert_int_equal(gw_xml_parse_complete(S("<CompleteMultipartUpload><Part><PartNumber>x"
                                             "</PartNumber><ETag>a</ETag></Part>"
                                             "</CompleteMultipartUpload>"),
                                           *state, &p, &n, NULL),
                     MG_EMALFORMEDXML);
    assert_int_equal(gw_xml_parse_complete(S("<CompleteMultipartUpload><Part><PartNumber>1"
                                             "</PartNumber></Part></CompleteMultipartUpload>"),
                                           *state, &p, &n, NULL),
                     MG_EMALFORMEDXML);
    assert_int_equal(gw_xml_parse_complete(S("<Delete><Part/></Delete>"), *state, &p, &n, NULL),
                     MG_EMALFORMEDXML);
}

/* ---------------------------------------------------------------- Delete */

static void test_delete(void **state)
{
    struct gw_delete_req d;
    static const char doc[] = "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                              "<Object><Key>dir/a b&amp;c</Key></Object>"
                              "<Object><Key> sp </Key><VersionId>null</VersionId></Object>"
                              "<Quiet>true</Quiet></Delete>";
    assert_int_equal(gw_xml_parse_delete(S(doc), *state, &d, NULL), 0);
    assert_int_equal(d.quiet, 1);
    assert_int_equal(d.nkeys, 2);
    assert_string_equal(d.keys[0].base, "dir/a b&c");
    assert_string_equal(d.keys[1].base, " sp ");
    assert_int_equal(gw_xml_parse_delete(S("<Delete><Object><Key>k</Key></Object></Delete>"),
                                         *state, &d, NULL),
                     0);
    assert_int_equal(d.quiet, 0);
}

static void test_delete_limits(void **state)
{
    struct gw_delete_req d;
    struct mg_buf b;
    char err[256] = "";
    int i;
    assert_int_equal(gw_xml_parse_delete(S("<Delete><Quiet>true</Quiet></Delete>"), *state, &d,
                                         NULL),
                     MG_EMALFORMEDXML);
    assert_int_equal(gw_xml_parse_delete(S("<Delete><Object><Key>k</Key></Object>"
                                           "<Quiet>maybe</Quiet></Delete>"),
                                         *state, &d, NULL),
                     MG_EMALFORMEDXML);
    assert_int_equal(gw_xml_parse_delete(S("<Delete><Object/></Delete>"), *state, &d, NULL),
                     MG_EMALFORMEDXML);
    mg_buf_init(&b);
    mg_buf_appendf(&b, "<Delete>");
    for (i = 0; i < GW_DELETE_KEYS_MAX; i++)
        mg_buf_appendf(&b, "<Object><Key>k%d</Key></Object>", i);
    mg_buf_appendf(&b, "</Delete>");
    assert_int_equal(gw_xml_parse_delete(buf_str(&b), *state, &d, NULL), 0);
    assert_int_equal(d.nkeys, GW_DELETE_KEYS_MAX);
    b.len -= strlen("</Delete>");
    mg_buf_appendf(&b, "<Object><Key>one-more</Key></Object></Delete>");
    assert_int_equal(gw_xml_parse_delete(buf_str(&b), *state, &d, err), MG_EMALFORMEDXML);
    assert_non_null(strstr(err, "1000"));
    mg_buf_close(&b);
}

/* --------------------------------------------------------------- Tagging */

static struct mg_str tagging_doc(struct mg_buf *b, int ntags, size_t vlen, int dup)
{
    int i;
    size_t j;
    b->len = 0;
    mg_buf_appendf(b, "<Tagging><TagSet>");
    for (i = 0; i < ntags; i++) {
        mg_buf_appendf(b, "<Tag><Key>k%d</Key><Value>", dup ? 0 : i);
        for (j = 0; j < vlen; j++)
            mg_buf_appendf(b, "v");
        mg_buf_appendf(b, "</Value></Tag>");
    }
    mg_buf_appendf(b, "</TagSet></Tagging>");
    return buf_str(b);
}

static void test_tagging(void **state)
{
    struct meta_kv *t;
    size_t n;
    static const char doc[] = "<Tagging xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                              "<TagSet><Tag><Key>env</Key><Value>prod &amp; test</Value></Tag>"
                              "<Tag><Key>\xc3\xa9</Key><Value></Value></Tag></TagSet></Tagging>";
    assert_int_equal(gw_xml_parse_tagging(S(doc), GW_OBJECT_TAGS_MAX, *state, &t, &n, NULL), 0);
    assert_int_equal(n, 2);
    assert_string_equal(t[0].k.base, "env");
    assert_string_equal(t[0].v.base, "prod & test");
    assert_int_equal(t[1].v.len, 0);
    assert_int_equal(gw_xml_parse_tagging(S("<Tagging><TagSet/></Tagging>"), 10, *state, &t, &n,
                                          NULL),
                     0);
    assert_int_equal(n, 0);
    assert_int_equal(gw_xml_parse_tagging(S("<Tagging/>"), 10, *state, &t, &n, NULL),
                     MG_EMALFORMEDXML);
}

static void test_tagging_limits(void **state)
{
    struct meta_kv *t;
    struct mg_buf b;
    size_t n;
    char err[256];
    mg_buf_init(&b);
    assert_int_equal(gw_xml_parse_tagging(tagging_doc(&b, 10, 1, 0), GW_OBJECT_TAGS_MAX,
                                          *state, &t, &n, NULL),
                     0);
    assert_int_equal(gw_xml_parse_tagging(tagging_doc(&b, 11, 1, 0), GW_OBJECT_TAGS_MAX,
                                          *state, &t, &n, err),
                     MG_EBADREQUEST); /* AWS: BadRequest for an object's 11th tag */
    assert_int_equal(gw_xml_parse_tagging(tagging_doc(&b, 50, 1, 0), GW_BUCKET_TAGS_MAX,
                                          *state, &t, &n, NULL),
                     0);
    assert_int_equal(gw_xml_parse_tagging(tagging_doc(&b, 51, 1, 0), GW_BUCKET_TAGS_MAX,
                                          *state, &t, &n, NULL),
                     MG_EINVALIDTAG);
    assert_int_equal(gw_xml_parse_tagging(tagging_doc(&b, 2, 1, 1), GW_OBJECT_TAGS_MAX,
                                          *state, &t, &n, err),
                     MG_EINVALIDTAG);
    assert_non_null(strstr(err, "same key"));
    assert_int_equal(gw_xml_parse_tagging(tagging_doc(&b, 1, 256, 0), 10, *state, &t, &n,
                                          NULL),
                     0);
    assert_int_equal(gw_xml_parse_tagging(tagging_doc(&b, 1, 257, 0), 10, *state, &t, &n,
                                          NULL),
                     MG_EINVALIDTAG);
    mg_buf_close(&b);
}

static void test_tag_key_length(void **state)
{
    struct meta_kv kv;
    char k[130];
    (void)state;
    memset(k, 'k', sizeof(k));
    kv.v = S("v");
    kv.k = (struct mg_str){k, 128};
    assert_int_equal(gw_tags_validate(&kv, 1, 10, NULL), 0);
    kv.k = (struct mg_str){k, 129};
    assert_int_equal(gw_tags_validate(&kv, 1, 10, NULL), MG_EINVALIDTAG);
    kv.k = S("");
    assert_int_equal(gw_tags_validate(&kv, 1, 10, NULL), MG_EINVALIDTAG);
    /* Lengths are characters: 128 two-byte characters are fine. */
    {
        char u[256];
        int i;
        for (i = 0; i < 128; i++)
            u[2 * i] = (char)0xc3, u[2 * i + 1] = (char)0xa9;
        kv.k = (struct mg_str){u, 256};
        assert_int_equal(gw_tags_validate(&kv, 1, 10, NULL), 0);
    }
}

static void test_tagging_query(void **state)
{
    struct meta_kv *t;
    size_t n;
    assert_int_equal(gw_tagging_query_parse(S("k1=v1&k%202=v+2&empty=&noval"), 10, *state, &t,
                                            &n, NULL),
                     0);
    assert_int_equal(n, 4);
    assert_string_equal(t[0].k.base, "k1");
    assert_string_equal(t[0].v.base, "v1");
    assert_string_equal(t[1].k.base, "k 2");
    assert_string_equal(t[1].v.base, "v 2");
    assert_int_equal(t[2].v.len, 0);
    assert_string_equal(t[3].k.base, "noval");
    /* An encoded '+' is a plus (boto3 sends Tagging="k=a%2Bb" for the value "a+b"). */
    assert_int_equal(gw_tagging_query_parse(S("k=a%2Bb+c"), 10, *state, &t, &n, NULL), 0);
    assert_int_equal(n, 1);
    assert_string_equal(t[0].v.base, "a+b c");
    assert_int_equal(gw_tagging_query_parse(S(""), 10, *state, &t, &n, NULL), 0);
    assert_int_equal(n, 0);
    assert_int_equal(gw_tagging_query_parse(S("a=1&a=2"), 10, *state, &t, &n, NULL),
                     MG_EINVALIDTAG);
    assert_int_equal(gw_tagging_query_parse(S("a=%zz"), 10, *state, &t, &n, NULL),
                     MG_EINVALIDARGUMENT);
    assert_int_equal(gw_tagging_query_parse(S("a=1&b=1&c=1&d=1&e=1&f=1&g=1&h=1&i=1&j=1&k=1"),
                                            10, *state, &t, &n, NULL),
                     MG_EBADREQUEST);
}

/* ------------------------------------------------------------------- ACL */

#define ACL_HEAD                                                                                \
    "<AccessControlPolicy xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Owner><ID>alice"  \
    "</ID></Owner><AccessControlList>"
#define GRANT_OWNER                                                                             \
    "<Grant><Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "                  \
    "xsi:type=\"CanonicalUser\"><ID>alice</ID></Grantee><Permission>FULL_CONTROL</Permission>"  \
    "</Grant>"
#define GRANT_GROUP(g, p)                                                                       \
    "<Grant><Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "                  \
    "xsi:type=\"Group\"><URI>http://acs.amazonaws.com/groups/global/" g "</URI></Grantee>"      \
    "<Permission>" p "</Permission></Grant>"
#define ACL_TAIL "</AccessControlList></AccessControlPolicy>"

static void test_acl_canned(void **state)
{
    enum meta_acl acl = META_ACL_PUBLIC_READ;
    assert_int_equal(gw_xml_parse_acl(S(ACL_HEAD GRANT_OWNER ACL_TAIL), S("alice"), *state, &acl,
                                      NULL),
                     0);
    assert_int_equal(acl, META_ACL_PRIVATE);
    assert_int_equal(gw_xml_parse_acl(S(ACL_HEAD GRANT_OWNER GRANT_GROUP("AllUsers", "READ")
                                            ACL_TAIL),
                                      S("alice"), *state, &acl, NULL),
                     0);
    assert_int_equal(acl, META_ACL_PUBLIC_READ);
    assert_int_equal(gw_xml_parse_acl(S(ACL_HEAD GRANT_OWNER GRANT_GROUP("AllUsers", "READ")
                                            GRANT_GROUP("AllUsers", "WRITE") ACL_TAIL),
                                      S("alice"), *state, &acl, NULL),
                     0);
    assert_int_equal(acl, META_ACL_PUBLIC_READ_WRITE);
    assert_int_equal(gw_xml_parse_acl(S(ACL_HEAD GRANT_OWNER GRANT_GROUP("AuthenticatedUsers",
                                                                         "READ") ACL_TAIL),
                                      S("alice"), *state, &acl, NULL),
                     0);
    assert_int_equal(acl, META_ACL_AUTHENTICATED_READ);
}

static void test_acl_not_canned(void **state)
{
    enum meta_acl acl;
    static const char other_user[] =
        ACL_HEAD GRANT_OWNER "<Grant><Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-"
                             "instance\" xsi:type=\"CanonicalUser\"><ID>bob</ID></Grantee>"
                             "<Permission>READ</Permission></Grant>" ACL_TAIL;
    static const char email[] =
        ACL_HEAD "<Grant><Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
                 "xsi:type=\"AmazonCustomerByEmail\"><EmailAddress>a@b</EmailAddress>"
                 "</Grantee><Permission>READ</Permission></Grant>" ACL_TAIL;
    assert_int_equal(gw_xml_parse_acl(S(other_user), S("alice"), *state, &acl, NULL),
                     MG_ENOTIMPLEMENTED);
    assert_int_equal(gw_xml_parse_acl(S(email), S("alice"), *state, &acl, NULL),
                     MG_ENOTIMPLEMENTED);
    assert_int_equal(gw_xml_parse_acl(S(ACL_HEAD GRANT_GROUP("AllUsers", "WRITE_ACP") ACL_TAIL),
                                      S("alice"), *state, &acl, NULL),
                     MG_ENOTIMPLEMENTED);
    assert_int_equal(gw_xml_parse_acl(S(ACL_HEAD GRANT_GROUP("AllUsers", "WRITE") ACL_TAIL),
                                      S("alice"), *state, &acl, NULL),
                     MG_ENOTIMPLEMENTED);
    assert_int_equal(gw_xml_parse_acl(S("<AccessControlPolicy/>"), S("alice"), *state, &acl,
                                      NULL),
                     MG_EMALFORMEDXML);
}

static void test_canned_header(void **state)
{
    enum meta_acl acl;
    (void)state;
    assert_int_equal(gw_canned_acl_parse(S("public-read"), 0, &acl), 0);
    assert_int_equal(acl, META_ACL_PUBLIC_READ);
    assert_string_equal(gw_canned_acl_name(acl), "public-read");
    assert_int_equal(gw_canned_acl_parse(S("authenticated-read"), 0, &acl), 0);
    assert_int_equal(acl, META_ACL_AUTHENTICATED_READ);
    assert_int_equal(gw_canned_acl_parse(S("bucket-owner-full-control"), 1, &acl), 0);
    assert_int_equal(acl, META_ACL_PRIVATE);
    assert_int_equal(gw_canned_acl_parse(S("bucket-owner-full-control"), 0, &acl),
                     MG_EINVALIDARGUMENT);
    assert_int_equal(gw_canned_acl_parse(S("log-delivery-write"), 0, &acl), MG_ENOTIMPLEMENTED);
    assert_int_equal(gw_canned_acl_parse(S("bogus"), 1, &acl), MG_EINVALIDARGUMENT);
}

static void test_location(void **state)
{
    struct mg_str loc;
    assert_int_equal(gw_xml_parse_location(S("<CreateBucketConfiguration xmlns=\"http://s3."
                                             "amazonaws.com/doc/2006-03-01/\"><LocationConstraint"
                                             ">eu-west-1</LocationConstraint>"
                                             "</CreateBucketConfiguration>"),
                                           *state, &loc, NULL),
                     0);
    assert_int_equal(loc.len, 9);
    assert_memory_equal(loc.base, "eu-west-1", 9);
    assert_int_equal(gw_xml_parse_location(S("<CreateBucketConfiguration/>"), *state, &loc, NULL),
                     0);
    assert_int_equal(loc.len, 0);
    assert_int_equal(gw_xml_parse_location(S("<X/>"), *state, &loc, NULL), MG_EMALFORMEDXML);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_escape_utf8_untouched),
        cmocka_unit_test(test_open_close_elemf),
        cmocka_unit_test(test_elemf_long),
        cmocka_unit_test(test_elem_url),
        cmocka_unit_test(test_elem_fast),
        cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parse_tree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parse_malformed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_doctype_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_billion_laughs_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_xxe_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_undeclared_entity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_depth_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_siblings_linear, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_root, setup, teardown),
        cmocka_unit_test_setup_teardown(test_complete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_complete_invalid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tagging, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tagging_limits, setup, teardown),
        cmocka_unit_test(test_tag_key_length),
        cmocka_unit_test_setup_teardown(test_tagging_query, setup, teardown),
        cmocka_unit_test_setup_teardown(test_acl_canned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_acl_not_canned, setup, teardown),
        cmocka_unit_test(test_canned_header),
        cmocka_unit_test_setup_teardown(test_location, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
