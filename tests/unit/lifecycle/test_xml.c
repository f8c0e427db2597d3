/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lifecycle/xml.c: PutBucketLifecycleConfiguration parsing (every filter form,
 * IDs, limits), every error code with S3's message, and the Get writer
 * (what it writes parses back to the same configuration).
 */
#include <stdio.h>
#include <string.h>

#include "tests/unit/lifecycle/test_lifecycle.h"

#define EXP1 "<Expiration><Days>1</Days></Expiration>"
#define ON "<Status>Enabled</Status>"

static void test_prefix_forms(void **state)
{
    struct lc_config c;
    tl_parse_ok(*state, LC1("<ID>a</ID><Prefix>logs/</Prefix>" ON EXP1), &c);
    assert_int_equal(c.nrules, 1);
    assert_int_equal(c.rules[0].filter.form, LC_FORM_PREFIX);
    assert_true(lc__str_eq(c.rules[0].filter.prefix, S("logs/")));
    assert_true(lc__str_eq(c.rules[0].id, S("a")));
    assert_int_equal(c.rules[0].enabled, 1);
    assert_int_equal(c.rules[0].exp_kind, LC_EXP_DAYS);
    assert_int_equal(c.rules[0].exp_days, 1);

    tl_parse_ok(*state, LC1("<Filter><Prefix> sp ace</Prefix></Filter>"
                            "<Status>Disabled</Status>" EXP1), &c);
    assert_int_equal(c.rules[0].filter.form, LC_FORM_FILTER_PREFIX);
    assert_true(lc__str_eq(c.rules[0].filter.prefix, S(" sp ace"))); /* kept as sent */
    assert_int_equal(c.rules[0].enabled, 0);

    tl_parse_ok(*state, LC1("<Filter></Filter>" ON EXP1), &c);
    assert_int_equal(c.rules[0].filter.form, LC_FORM_EMPTY);
    /* A namespace and prefixed names, as SDKs send them. */
    tl_parse_ok(*state, "<?xml version=\"1.0\"?><s3:LifecycleConfiguration "
                        "xmlns:s3=\"http://s3.amazonaws.com/doc/2006-03-01/\"><s3:Rule>"
                        "<s3:Filter/><s3:Status>Enabled</s3:Status><s3:Expiration><s3:Days>3"
                        "</s3:Days></s3:Expiration></s3:Rule></s3:LifecycleConfiguration>", &c);
    assert_int_equal(c.rules[0].exp_days, 3);
}

static void test_filter_kinds(void **state)
{
    struct lc_config c;
    tl_parse_ok(*state, LC1("<Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter>" ON EXP1),
                &c);
    assert_int_equal(c.rules[0].filter.form, LC_FORM_TAG);
    assert_int_equal(c.rules[0].filter.ntags, 1);
    assert_true(lc__str_eq(c.rules[0].filter.tags[0].key, S("k")));
    assert_true(lc__str_eq(c.rules[0].filter.tags[0].value, S("v")));

    tl_parse_ok(*state, LC1("<Filter><ObjectSizeGreaterThan>100</ObjectSizeGreaterThan></Filter>"
                            ON EXP1), &c);
    assert_int_equal(c.rules[0].filter.form, LC_FORM_SIZE_GT);
    assert_true(c.rules[0].filter.has_size_gt && !c.rules[0].filter.has_size_lt);
    assert_int_equal(c.rules[0].filter.size_gt, 100);

    tl_parse_ok(*state, LC1("<Filter><ObjectSizeLessThan>7</ObjectSizeLessThan></Filter>"
                            ON EXP1), &c);
    assert_int_equal(c.rules[0].filter.form, LC_FORM_SIZE_LT);
    assert_int_equal(c.rules[0].filter.size_lt, 7);

    tl_parse_ok(*state, LC1("<Filter><And><Prefix>p/</Prefix><Tag><Key>a</Key><Value>1</Value>"
                            "</Tag><Tag><Key>b</Key><Value></Value></Tag>"
                            "<ObjectSizeGreaterThan>0</ObjectSizeGreaterThan>"
                            "<ObjectSizeLessThan>10</ObjectSizeLessThan></And></Filter>" ON EXP1),
                &c);
    assert_int_equal(c.rules[0].filter.form, LC_FORM_AND);
    assert_true(lc__str_eq(c.rules[0].filter.prefix, S("p/")));
    assert_int_equal(c.rules[0].filter.ntags, 2);
    assert_true(lc__str_eq(c.rules[0].filter.tags[1].value, S("")));
    assert_int_equal(c.rules[0].filter.size_gt, 0);
    assert_int_equal(c.rules[0].filter.size_lt, 10);
}

static void test_actions(void **state)
{
    struct lc_config c;
    tl_parse_ok(*state, LC1("<Filter/>" ON "<Expiration><Date>2012-12-23T00:00:00.000Z</Date>"
                            "</Expiration>"), &c);
    assert_int_equal(c.rules[0].exp_kind, LC_EXP_DATE);
    assert_int_equal(c.rules[0].exp_date_ms, 1356220800000LL);
    /* Other ISO 8601 spellings of the same midnight. */
    tl_parse_ok(*state, LC1("<Filter/>" ON "<Expiration><Date>2012-12-23</Date></Expiration>"), &c);
    assert_int_equal(c.rules[0].exp_date_ms, 1356220800000LL);
    tl_parse_ok(*state, LC1("<Filter/>" ON "<Expiration><Date>2012-12-23T02:00:00+02:00</Date>"
                            "</Expiration>"), &c);
    assert_int_equal(c.rules[0].exp_date_ms, 1356220800000LL);

    tl_parse_ok(*state, LC1("<Filter><Prefix>u/</Prefix></Filter>" ON
                            "<AbortIncompleteMultipartUpload><DaysAfterInitiation>7"
                            "</DaysAfterInitiation></AbortIncompleteMultipartUpload>"), &c);
    assert_int_equal(c.rules[0].exp_kind, LC_EXP_NONE);
    assert_int_equal(c.rules[0].abort_days, 7);

    /* ExpiredObjectDeleteMarker false is accepted and kept; it does nothing here. */
    tl_parse_ok(*state, LC1("<Filter/>" ON "<Expiration><ExpiredObjectDeleteMarker>false"
                            "</ExpiredObjectDeleteMarker></Expiration>"), &c);
    assert_int_equal(c.rules[0].exp_kind, LC_EXP_MARKER_FALSE);
    assert_int_equal(tl_expires(&c, "x", 1, NULL, 0), 0);
}

static void test_id_generation(void **state)
{
    struct lc_config c;
    char id255[256];
    char xml[1024];
    tl_parse_ok(*state, "<LifecycleConfiguration>"
                        "<Rule><Filter/>" ON EXP1 "</Rule>"
                        "<Rule><ID>rule-1</ID><Filter/>" ON EXP1 "</Rule>"
                        "<Rule><ID></ID><Filter/>" ON EXP1 "</Rule>"
                        "<Rule><ID>rule-3</ID><Filter/>" ON EXP1 "</Rule>"
                        "</LifecycleConfiguration>", &c);
    assert_int_equal(c.nrules, 4);
    assert_true(lc__str_eq(c.rules[0].id, S("rule-2"))); /* rule-1 is taken */
    assert_true(lc__str_eq(c.rules[1].id, S("rule-1")));
    assert_true(lc__str_eq(c.rules[2].id, S("rule-4"))); /* an empty ID is no ID */
    assert_true(lc__str_eq(c.rules[3].id, S("rule-3")));

    memset(id255, 'i', 255);
    id255[255] = 0;
    snprintf(xml, sizeof(xml), LC1("<ID>%s</ID><Filter/>" ON EXP1), id255);
    tl_parse_ok(*state, xml, &c);
    assert_int_equal(c.rules[0].id.len, 255);
    /* 255 characters, not bytes: 255 two-byte characters pass, 256 do not. */
    {
        char wide[600] = "";
        for (int i = 0; i < 255; i++)
            strcat(wide, "\xc3\xa9");
        snprintf(xml, sizeof(xml), LC1("<ID>%s</ID><Filter/>" ON EXP1), wide);
        tl_parse_ok(*state, xml, &c);
        strcat(wide, "\xc3\xa9");
        snprintf(xml, sizeof(xml), LC1("<ID>%s</ID><Filter/>" ON EXP1), wide);
        tl_parse_fails(xml, MG_EINVALIDARGUMENT, "ID length should not exceed");
    }
    snprintf(xml, sizeof(xml), LC1("<ID>%sj</ID><Filter/>" ON EXP1), id255);
    tl_parse_fails(xml, MG_EINVALIDARGUMENT, "ID length should not exceed allowed limit of 255");
    tl_parse_fails("<LifecycleConfiguration><Rule><ID>x</ID><Filter/>" ON EXP1 "</Rule>"
                   "<Rule><ID>x</ID><Filter/>" ON EXP1 "</Rule></LifecycleConfiguration>",
                   MG_EINVALIDARGUMENT, "Rule ID must be unique");
}

static char *rules_doc(size_t n)
{
    struct mg_buf b;
    mg_buf_init(&b);
    mg_buf_appendf(&b, "<LifecycleConfiguration>");
    for (size_t i = 0; i < n; i++)
        mg_buf_appendf(&b, "<Rule><Filter><Prefix>p%zu/</Prefix></Filter>" ON EXP1 "</Rule>", i);
    mg_buf_appendf(&b, "</LifecycleConfiguration>");
    mg_buf_append(&b, "", 1);
    return b.base;
}

static void test_rule_limit(void **state)
{
    struct lc_config c;
    char *doc = rules_doc(LC_RULES_MAX);
    tl_parse_ok(*state, doc, &c);
    assert_int_equal(c.nrules, LC_RULES_MAX);
    assert_true(lc__str_eq(c.rules[999].id, S("rule-1000")));
    mg_free(doc);
    doc = rules_doc(LC_RULES_MAX + 1);
    tl_parse_fails(doc, MG_EINVALIDREQUEST, "must not exceed the allowed limit of 1000 rules");
    mg_free(doc);
    tl_parse_fails("<LifecycleConfiguration></LifecycleConfiguration>", MG_EINVALIDREQUEST,
                   "At least one lifecycle rule");
}

static void test_malformed(void **state)
{
    static const char *const bad[] = {
        "",
        "<LifecycleConfiguration>",
        "<Other><Rule/></Other>",
        "<LifecycleConfiguration><Bogus/></LifecycleConfiguration>",
        LC1("<Filter/>" EXP1),                                        /* no Status */
        LC1("<Filter/><Status>enabled</Status>" EXP1),                /* case matters */
        LC1("<Filter/><Status>On</Status>" EXP1),
        LC1("<Filter/>" ON ON EXP1),                                  /* repeated */
        LC1(ON EXP1),                                                 /* neither */
        LC1("<Prefix>a</Prefix><Filter/>" ON EXP1),                   /* both */
        LC1("<Filter><Prefix>a</Prefix><ObjectSizeLessThan>5</ObjectSizeLessThan></Filter>" ON
            EXP1),                                                    /* two predicates */
        LC1("<Filter><Tag><Key>a</Key><Value>1</Value></Tag><Tag><Key>b</Key><Value>2</Value>"
            "</Tag></Filter>" ON EXP1),
        LC1("<Filter><Prefix>a</Prefix><And><Prefix>b</Prefix></And></Filter>" ON EXP1),
        LC1("<Filter><And></And></Filter>" ON EXP1),
        LC1("<Filter><And><And><Prefix>b</Prefix></And></And></Filter>" ON EXP1),
        LC1("<Filter><Tag><Key>a</Key></Tag></Filter>" ON EXP1),      /* Tag without Value */
        LC1("<Filter><Tag><Value>a</Value></Tag></Filter>" ON EXP1),
        LC1("<Filter><Tag><Key></Key><Value>a</Value></Tag></Filter>" ON EXP1),
        LC1("<Filter><Bogus/></Filter>" ON EXP1),
        LC1("<Filter><ObjectSizeLessThan>ten</ObjectSizeLessThan></Filter>" ON EXP1),
        LC1("<Filter><ObjectSizeLessThan>99999999999999999999</ObjectSizeLessThan></Filter>" ON
            EXP1),
        LC1("<Filter/>" ON "<Expiration></Expiration>"),
        LC1("<Filter/>" ON "<Expiration><Days>1</Days><Date>2012-12-23</Date></Expiration>"),
        LC1("<Filter/>" ON "<Expiration><Days>x</Days></Expiration>"),
        LC1("<Filter/>" ON "<Expiration><Days>1.5</Days></Expiration>"),
        LC1("<Filter/>" ON "<Expiration><Days>4294967297</Days></Expiration>"),
        LC1("<Filter/>" ON "<Expiration><Date>23/12/2012</Date></Expiration>"),
        LC1("<Filter/>" ON "<Expiration><Date>2012-02-30T00:00:00Z</Date></Expiration>"),
        LC1("<Filter/>" ON "<Expiration><Date>2012-12-23T00:00:00Q</Date></Expiration>"),
        LC1("<Filter/>" ON "<Expiration><ExpiredObjectDeleteMarker>yes"
            "</ExpiredObjectDeleteMarker></Expiration>"),
        LC1("<Filter/>" ON "<Expiration><Days>1</Days><Days>2</Days></Expiration>"),
        LC1("<Filter/>" ON EXP1 EXP1),
        LC1("<Filter/>" ON "<AbortIncompleteMultipartUpload></AbortIncompleteMultipartUpload>"),
        LC1("<Filter/>" ON "<AbortIncompleteMultipartUpload><DaysAfterInitiation>z"
            "</DaysAfterInitiation></AbortIncompleteMultipartUpload>"),
        "<!DOCTYPE x [<!ENTITY e \"boom\">]>" LC1("<ID>&e;</ID><Filter/>" ON EXP1),
        "<?xml version=\"1.0\"?><!DOCTYPE LifecycleConfiguration SYSTEM \"file:///etc/passwd\">"
        LC1("<Filter/>" ON EXP1),
        LC1("<Filter/>" ON EXP1) "<LifecycleConfiguration/>",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        print_message("malformed #%zu\n", i);
        tl_parse_fails(bad[i], MG_EMALFORMEDXML, NULL);
    }
    tl_parse_fails(LC1("<Filter/>" ON "<Expiration><Days>1</Days><Date>2012-12-23</Date>"
                       "</Expiration>"), MG_EMALFORMEDXML, "exactly one of Days and Date");
    tl_parse_fails("<!DOCTYPE x []>" LC1("<Filter/>" ON EXP1), MG_EMALFORMEDXML,
                   "DOCTYPE is not allowed");
}

static void test_too_deep(void **state)
{
    struct mg_buf b;
    (void)state;
    mg_buf_init(&b);
    mg_buf_appendf(&b, "<LifecycleConfiguration><Rule>");
    for (int i = 0; i < 40; i++)
        mg_buf_appendf(&b, "<Filter>");
    mg_buf_append(&b, "", 1);
    tl_parse_fails(b.base, MG_EMALFORMEDXML, "too large or too deep");
    mg_buf_close(&b);
}

static void test_invalid_argument(void **state)
{
    (void)state;
    tl_parse_fails(LC1("<Filter/>" ON "<Expiration><Days>0</Days></Expiration>"),
                   MG_EINVALIDARGUMENT, "'Days' for Expiration action must be a positive integer");
    tl_parse_fails(LC1("<Filter/>" ON "<Expiration><Days>-3</Days></Expiration>"),
                   MG_EINVALIDARGUMENT, "positive integer");
    tl_parse_fails(LC1("<Filter/>" ON "<Expiration><Date>2012-12-23T00:00:01Z</Date>"
                       "</Expiration>"), MG_EINVALIDARGUMENT, "'Date' must be at midnight GMT");
    tl_parse_fails(LC1("<Filter/>" ON "<Expiration><Date>2012-12-23T00:00:00.5Z</Date>"
                       "</Expiration>"), MG_EINVALIDARGUMENT, "midnight GMT");
    tl_parse_fails(LC1("<Filter/>" ON "<Expiration><Date>2012-12-23T00:00:00+01:00</Date>"
                       "</Expiration>"), MG_EINVALIDARGUMENT, "midnight GMT");
    tl_parse_fails(LC1("<Filter/>" ON "<Expiration><Days>1</Days><ExpiredObjectDeleteMarker>"
                       "false</ExpiredObjectDeleteMarker></Expiration>"),
                   MG_EINVALIDARGUMENT, "cannot be specified with Days or Date");
    tl_parse_fails(LC1("<Filter/>" ON "<AbortIncompleteMultipartUpload><DaysAfterInitiation>0"
                       "</DaysAfterInitiation></AbortIncompleteMultipartUpload>"),
                   MG_EINVALIDARGUMENT, "'DaysAfterInitiation' for AbortIncompleteMultipartUpload");
    {
        char xml[2048], prefix[1026];
        memset(prefix, 'p', 1025);
        prefix[1025] = 0;
        snprintf(xml, sizeof(xml), LC1("<Filter><Prefix>%s</Prefix></Filter>" ON EXP1), prefix);
        tl_parse_fails(xml, MG_EINVALIDARGUMENT, "longer than the longest key");
    }
    {
        struct mg_buf b;
        mg_buf_init(&b);
        mg_buf_appendf(&b, "<LifecycleConfiguration><Rule><Filter><And>");
        for (int i = 0; i <= LC_FILTER_TAGS_MAX; i++)
            mg_buf_appendf(&b, "<Tag><Key>k%d</Key><Value>v</Value></Tag>", i);
        mg_buf_appendf(&b, "</And></Filter>" ON EXP1 "</Rule></LifecycleConfiguration>");
        mg_buf_append(&b, "", 1);
        tl_parse_fails(b.base, MG_EINVALIDARGUMENT, "at most 10 tags");
        mg_buf_close(&b);
    }
}

static void test_invalid_request(void **state)
{
    (void)state;
    tl_parse_fails(LC1("<Filter/>" ON), MG_EINVALIDREQUEST,
                   "At least one action must be specified in a lifecycle rule.");
    tl_parse_fails(LC1("<Filter><And><Tag><Key>a</Key><Value>1</Value></Tag><Tag><Key>a</Key>"
                       "<Value>2</Value></Tag></And></Filter>" ON EXP1),
                   MG_EINVALIDREQUEST, "Duplicate Tag Keys are not allowed.");
    tl_parse_fails(LC1("<Filter><And><ObjectSizeGreaterThan>10</ObjectSizeGreaterThan>"
                       "<ObjectSizeLessThan>10</ObjectSizeLessThan></And></Filter>" ON EXP1),
                   MG_EINVALIDREQUEST, "has to be a value greater than 'ObjectSizeGreaterThan'");
    tl_parse_fails(LC1("<Filter><ObjectSizeLessThan>0</ObjectSizeLessThan></Filter>" ON EXP1),
                   MG_EINVALIDREQUEST, "'ObjectSizeLessThan' should be between 1");
    tl_parse_fails(LC1("<Filter><ObjectSizeGreaterThan>-1</ObjectSizeGreaterThan></Filter>" ON
                       EXP1), MG_EINVALIDREQUEST, "'ObjectSizeGreaterThan' should be between 0");
    tl_parse_fails(LC1("<Filter><Tag><Key>a</Key><Value>1</Value></Tag></Filter>" ON
                       "<AbortIncompleteMultipartUpload><DaysAfterInitiation>1"
                       "</DaysAfterInitiation></AbortIncompleteMultipartUpload>"),
                   MG_EINVALIDREQUEST, "AbortIncompleteMultipartUpload cannot be specified with Tags.");
    tl_parse_fails(LC1("<Filter><ObjectSizeLessThan>9</ObjectSizeLessThan></Filter>" ON
                       "<AbortIncompleteMultipartUpload><DaysAfterInitiation>1"
                       "</DaysAfterInitiation></AbortIncompleteMultipartUpload>"),
                   MG_EINVALIDREQUEST, "with Object Size.");
    tl_parse_fails(LC1("<Filter><Tag><Key>a</Key><Value>1</Value></Tag></Filter>" ON
                       "<Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker>"
                       "</Expiration>"), MG_EINVALIDREQUEST,
                   "ExpiredObjectDeleteMarker cannot be specified with Tags.");
    tl_parse_fails("<LifecycleConfiguration><Rule><Prefix>a</Prefix>" ON EXP1 "</Rule>"
                   "<Rule><Filter/>" ON EXP1 "</Rule></LifecycleConfiguration>",
                   MG_EINVALIDREQUEST, "Filter element can only be used in Lifecycle V2.");
    tl_parse_fails("<LifecycleConfiguration><Rule><Filter/>" ON EXP1 "</Rule>"
                   "<Rule><Prefix>a</Prefix>" ON EXP1 "</Rule></LifecycleConfiguration>",
                   MG_EINVALIDREQUEST, "Base level prefix cannot be used in Lifecycle V2");
    /* Before V2, overlapping prefixes for one kind of action are refused (an equal one too). */
    tl_parse_fails("<LifecycleConfiguration><Rule><ID>a</ID><Prefix>logs/</Prefix>" ON EXP1
                   "</Rule><Rule><ID>b</ID><Prefix>x</Prefix>" ON EXP1 "</Rule><Rule><ID>c</ID>"
                   "<Prefix>logs/old/</Prefix>" ON EXP1 "</Rule></LifecycleConfiguration>",
                   MG_EINVALIDREQUEST, "Found overlapping prefixes 'logs/' and 'logs/old/' for "
                                       "same action type 'Expiration'");
    tl_parse_fails("<LifecycleConfiguration><Rule><ID>a</ID><Prefix></Prefix>" ON
                   "<AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation>"
                   "</AbortIncompleteMultipartUpload></Rule><Rule><ID>b</ID><Prefix>u</Prefix>" ON
                   "<AbortIncompleteMultipartUpload><DaysAfterInitiation>2</DaysAfterInitiation>"
                   "</AbortIncompleteMultipartUpload></Rule></LifecycleConfiguration>",
                   MG_EINVALIDREQUEST, "'AbortIncompleteMultipartUpload'");
}

/* Overlap is per kind of action, and V2 filters may overlap freely. */
static void test_overlap_allowed(void **state)
{
    struct lc_config c;
    tl_parse_ok(*state, "<LifecycleConfiguration><Rule><ID>a</ID><Prefix>logs/</Prefix>" ON EXP1
                        "</Rule><Rule><ID>b</ID><Prefix>logs/old/</Prefix>" ON
                        "<AbortIncompleteMultipartUpload><DaysAfterInitiation>1"
                        "</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>"
                        "<Rule><ID>c</ID><Prefix>logz</Prefix>" ON EXP1 "</Rule>"
                        "</LifecycleConfiguration>", &c);
    assert_int_equal(c.nrules, 3);
    tl_parse_ok(*state, "<LifecycleConfiguration><Rule><ID>a</ID><Filter><Prefix>logs/</Prefix>"
                        "</Filter>" ON EXP1 "</Rule><Rule><ID>b</ID><Filter><Prefix>logs/old/"
                        "</Prefix></Filter>" ON EXP1 "</Rule></LifecycleConfiguration>", &c);
    assert_int_equal(c.nrules, 2);
}

static void test_invalid_tag(void **state)
{
    char xml[1024], key[130], value[258];
    (void)state;
    memset(key, 'k', 129), key[129] = 0;
    memset(value, 'v', 257), value[257] = 0;
    snprintf(xml, sizeof(xml), LC1("<Filter><Tag><Key>%s</Key><Value>v</Value></Tag></Filter>"
                                   ON EXP1), key);
    tl_parse_fails(xml, MG_EINVALIDTAG, "TagKey");
    snprintf(xml, sizeof(xml), LC1("<Filter><Tag><Key>k</Key><Value>%s</Value></Tag></Filter>"
                                   ON EXP1), value);
    tl_parse_fails(xml, MG_EINVALIDTAG, "TagValue");
}

static void test_not_implemented(void **state)
{
    (void)state;
    tl_parse_fails(LC1("<Filter/>" ON "<Transition><Days>30</Days><StorageClass>GLACIER"
                       "</StorageClass></Transition>"), MG_ENOTIMPLEMENTED, "not implemented");
    tl_parse_fails(LC1("<Filter/>" ON EXP1 "<NoncurrentVersionExpiration><NoncurrentDays>3"
                       "</NoncurrentDays></NoncurrentVersionExpiration>"),
                   MG_ENOTIMPLEMENTED, NULL);
    tl_parse_fails(LC1("<Filter/>" ON "<NoncurrentVersionTransition><NoncurrentDays>3"
                       "</NoncurrentDays><StorageClass>GLACIER</StorageClass>"
                       "</NoncurrentVersionTransition>"), MG_ENOTIMPLEMENTED, NULL);
    tl_parse_fails(LC1("<Filter/>" ON "<Expiration><ExpiredObjectDeleteMarker>true"
                       "</ExpiredObjectDeleteMarker></Expiration>"), MG_ENOTIMPLEMENTED,
                   "ExpiredObjectDeleteMarker");
    /* The rest of the document is judged first: a bad Days wins over the Transition. */
    tl_parse_fails(LC1("<Filter/>" ON "<Expiration><Days>0</Days></Expiration><Transition>"
                       "<Days>30</Days><StorageClass>GLACIER</StorageClass></Transition>"),
                   MG_EINVALIDARGUMENT, NULL);
}

/* Get's body parses back to the same configuration: compare binary forms. */
static void test_to_xml_roundtrip(void **state)
{
    static const char *const docs[] = {
        LC1("<ID>r</ID><Prefix>logs/</Prefix>" ON EXP1),
        LC1("<Filter/><Status>Disabled</Status><Expiration><Date>2030-01-01T00:00:00Z</Date>"
            "</Expiration>"),
        LC1("<ID>a&amp;b&lt;c&#13;</ID><Filter><Prefix>x&#13;&#10;y</Prefix></Filter>" ON EXP1),
        LC1("<Filter><Tag><Key>k</Key><Value>v&gt;</Value></Tag></Filter>" ON EXP1),
        LC1("<Filter><ObjectSizeGreaterThan>9223372036854775807</ObjectSizeGreaterThan></Filter>"
            ON EXP1),
        LC1("<Filter><And><Prefix>p</Prefix><Tag><Key>a</Key><Value>1</Value></Tag>"
            "<ObjectSizeLessThan>5</ObjectSizeLessThan></And></Filter>" ON
            "<Expiration><ExpiredObjectDeleteMarker>false</ExpiredObjectDeleteMarker>"
            "</Expiration>"),
        LC1("<Filter><Prefix></Prefix></Filter>" ON "<AbortIncompleteMultipartUpload>"
            "<DaysAfterInitiation>2</DaysAfterInitiation></AbortIncompleteMultipartUpload>" EXP1),
    };
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        struct lc_config c, d;
        struct mg_buf x, b1, b2;
        mg_buf_init(&x), mg_buf_init(&b1), mg_buf_init(&b2);
        tl_parse_ok(*state, docs[i], &c);
        lc_config_to_xml(&c, &x);
        mg_buf_append(&x, "", 1);
        assert_non_null(strstr(x.base, "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\""));
        tl_parse_ok(*state, x.base, &d);
        lc_config_compile(&c, &b1);
        lc_config_compile(&d, &b2);
        assert_int_equal(b1.len, b2.len);
        assert_memory_equal(b1.base, b2.base, b1.len);
        mg_buf_close(&x), mg_buf_close(&b1), mg_buf_close(&b2);
    }
}

static void test_to_xml_shape(void **state)
{
    struct lc_config c;
    struct mg_buf x;
    tl_parse_ok(*state, LC1("<ID>d</ID><Filter/>" ON "<Expiration><Date>2012-12-23</Date>"
                            "</Expiration>"), &c);
    mg_buf_init(&x);
    lc_config_to_xml(&c, &x);
    mg_buf_append(&x, "", 1);
    assert_string_equal(x.base, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                                "<LifecycleConfiguration xmlns=\"http://s3.amazonaws.com/doc/"
                                "2006-03-01/\"><Rule><ID>d</ID><Filter></Filter><Status>Enabled"
                                "</Status><Expiration><Date>2012-12-23T00:00:00.000Z</Date>"
                                "</Expiration></Rule></LifecycleConfiguration>");
    mg_buf_close(&x);
}

int test_xml_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_prefix_forms, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_filter_kinds, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_actions, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_id_generation, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_rule_limit, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_malformed, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_too_deep, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_invalid_argument, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_invalid_request, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_overlap_allowed, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_invalid_tag, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_not_implemented, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_to_xml_roundtrip, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_to_xml_shape, tl_setup, tl_teardown),
    };
    return cmocka_run_group_tests_name("lifecycle_xml", tests, NULL, NULL);
}
