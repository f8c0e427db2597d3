/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for common/config.c (tested here, beside the binary that uses
 * it): every key parses, unknown keys and bad values are rejected with a
 * message naming the key, --listen overrides, and generated credentials are
 * stored 0600 and reused on restart.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/common.h"
#include "common/config.h"

static int parse(const char *json, struct mg_config *cfg, char *errmsg)
{
    mg_config_init(cfg);
    errmsg[0] = '\0';
    return mg_config_parse(cfg, json, strlen(json), errmsg);
}

static void test_full(void **state)
{
    (void)state;
    struct mg_config c;
    char e[MG_CONFIG_ERRMSG_LEN];
    const char *json = "{\"listen\": \"0.0.0.0:9100\", \"data_dir\": \"/tmp/x\", \"region\": "
                       "\"eu-west-1\", \"users\": [{\"name\": \"main\", \"access_key\": "
                       "\"AKIAIOSFODNN7EXAMPLE\", \"secret_key\": "
                       "\"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\"}, {\"name\": \"other\", "
                       "\"access_key\": \"AK2\", \"secret_key\": \"secret-2-x\"}], \"tls\": "
                       "{\"cert_file\": \"c.pem\", \"key_file\": \"k.pem\"}, \"domain\": "
                       "\"s3.local\", \"threads\": 3, \"inline_max_bytes\": 8192, \"log_level\": "
                       "\"warn\"}";
    assert_int_equal(parse(json, &c, e), 0);
    assert_string_equal(c.listen_host, "0.0.0.0");
    assert_int_equal(c.listen_port, 9100);
    assert_string_equal(c.data_dir, "/tmp/x");
    assert_string_equal(c.region, "eu-west-1");
    assert_int_equal(c.nusers, 2);
    assert_string_equal(c.users[1].name, "other");
    assert_string_equal(c.users[0].secret_key, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
    assert_string_equal(c.tls_cert_file, "c.pem");
    assert_string_equal(c.domain, "s3.local");
    assert_int_equal(c.threads, 3);
    assert_int_equal(c.inline_max_bytes, 8192);
    assert_string_equal(c.log_level, "warn");
    mg_config_close(&c);
    /* Defaults */
    assert_int_equal(parse("{}", &c, e), 0);
    assert_string_equal(c.listen_host, "127.0.0.1");
    assert_int_equal(c.listen_port, 9000);
    assert_string_equal(c.region, "us-east-1");
    assert_null(c.domain);
    assert_false(c.scrub_set);
    assert_true(c.scrub_enabled);
    assert_false(c.meta_orphan_set);
    assert_int_equal(c.meta_orphan_period_s, 300);
    assert_int_equal(c.meta_orphan_grace_s, 600);
    mg_config_close(&c);
    /* The scrubber and the orphan collector */
    assert_int_equal(parse("{\"scrub\": {\"enabled\": false, \"bytes_per_second\": 1048576, "
                           "\"delay_seconds\": 0, \"period_seconds\": 3600}, \"meta\": "
                           "{\"orphan_period_seconds\": 0, \"orphan_grace_seconds\": 60}}",
                           &c, e),
                     0);
    assert_true(c.scrub_set);
    assert_false(c.scrub_enabled);
    assert_int_equal(c.scrub_bytes_per_second, 1048576);
    assert_int_equal(c.scrub_delay_s, 0);
    assert_int_equal(c.scrub_period_s, 3600);
    assert_true(c.meta_orphan_set);
    assert_int_equal(c.meta_orphan_period_s, 0);
    assert_int_equal(c.meta_orphan_grace_s, 60);
    mg_config_close(&c);
    /* Lifecycle pacing */
    assert_int_equal(parse("{\"lifecycle\": {\"max_per_second\": 0, "
                           "\"reindex_per_second\": 40}}", &c, e),
                     0);
    assert_int_equal(c.lc_max_per_second, 0);
    assert_int_equal(c.lc_reindex_per_second, 40);
    mg_config_close(&c);
}

/* Each bad config is rejected and the message names the key. */
static void test_errors_name_the_key(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        const char *key;
    } cases[] = {
        {"{\"listn\": \"a:1\"}", "\"listn\""},
        {"{\"listen\": 9000}", "\"listen\""},
        {"{\"listen\": \"127.0.0.1\"}", "\"listen\""},
        {"{\"listen\": \"127.0.0.1:99999\"}", "\"listen\""},
        {"{\"listen\": \"::1:9000\"}", "\"listen\""},
        {"{\"data_dir\": \"\"}", "\"data_dir\""},
        {"{\"data_dir\": 1}", "\"data_dir\""},
        {"{\"region\": \"us east\"}", "\"region\""},
        {"{\"users\": {}}", "\"users\""},
        {"{\"users\": [1]}", "\"users[0]\""},
        {"{\"users\": [{\"name\": \"a\", \"access_key\": \"AKX\"}]}", "\"users[0].secret_key\""},
        {"{\"users\": [{\"name\": \"a\", \"access_key\": \"AK\", \"secret_key\": \"12345678\"}]}",
         "\"users[0].access_key\""},
        {"{\"users\": [{\"name\": \"a\", \"access_key\": \"AKX\", \"secret_key\": \"short\"}]}",
         "\"users[0].secret_key\""},
        {"{\"users\": [{\"name\": \"a\", \"access_key\": \"AKX\", \"secret_key\": \"12345678\", "
         "\"role\": \"x\"}]}",
         "\"users[0].role\""},
        {"{\"users\": [{\"name\": \"a\", \"access_key\": \"AKX\", \"secret_key\": \"12345678\"},"
         "{\"name\": \"b\", \"access_key\": \"AKX\", \"secret_key\": \"12345678\"}]}",
         "\"users[1]\""},
        {"{\"tls\": {\"cert_file\": \"c\"}}", "\"tls.key_file\""},
        {"{\"tls\": {\"cert_file\": \"c\", \"key_file\": \"k\", \"ca\": \"x\"}}", "\"tls.ca\""},
        {"{\"tls\": true}", "\"tls\""},
        {"{\"domain\": \"S3.Local\"}", "\"domain\""},
        {"{\"domain\": \".s3\"}", "\"domain\""},
        {"{\"threads\": -1}", "\"threads\""},
        {"{\"threads\": 1.5}", "\"threads\""},
        {"{\"threads\": \"4\"}", "\"threads\""},
        {"{\"inline_max_bytes\": 99999999}", "\"inline_max_bytes\""},
        {"{\"log_level\": \"verbose\"}", "\"log_level\""},
        {"{\"scrub\": {\"enabled\": 1}}", "\"scrub.enabled\""},
        {"{\"scrub\": {\"bytes_per_second\": 0}}", "\"scrub.bytes_per_second\""},
        {"{\"scrub\": {\"period_seconds\": 0}}", "\"scrub.period_seconds\""},
        {"{\"scrub\": {\"rate\": 1}}", "\"scrub.rate\""},
        {"{\"scrub\": true}", "\"scrub\""},
        {"{\"lifecycle\": {\"reindex_per_second\": 1000001}}", "\"lifecycle.reindex_per_second\""},
        {"{\"lifecycle\": {\"reindex_per_second\": -1}}", "\"lifecycle.reindex_per_second\""},
        {"{\"meta\": {\"orphan_grace_seconds\": -1}}", "\"meta.orphan_grace_seconds\""},
        {"{\"meta\": {\"orphan_period_seconds\": 9999999}}", "\"meta.orphan_period_seconds\""},        {"{\"data\": {\"backend\": \"s3\"}}", "\"data.backend\""},
        {"{\"data\": {\"rados\": {\"pool\": \"a b\"}}}", "\"data.rados.pool\""},
        {"{\"data\": {\"rados\": {\"keyring\": \"k\"}}}", "\"data.rados.keyring\""},
        {"{\"data\": {\"copies\": 3}}", "\"data.copies\""},
        {"{\"cluster\": {\"node_id\": 0}}", "\"cluster.node_id\""},
        {"{\"cluster\": {\"nodes\": []}}", "\"cluster.nodes\""},
        {"{\"cluster\": {\"nodes\": [{\"id\": 1, \"s3\": \"h:1\", \"raft\": \"h:2\"}]}}",
         "\"cluster.nodes[0].rpc\""},
        {"{\"cluster\": {\"nodes\": [{\"id\": 1, \"s3\": \"h\", \"raft\": \"h:2\", "
         "\"rpc\": \"h:3\"}]}}",
         "\"cluster.nodes[0].s3\""},
        {"{\"cluster\": {\"nodes\": [{\"id\": 1, \"s3\": \"h:1\", \"raft\": \"h:2\", "
         "\"rpc\": \"h:3\"}, {\"id\": 1, \"s3\": \"h:4\", \"raft\": \"h:5\", \"rpc\": "
         "\"h:6\"}]}}",
         "\"cluster.nodes[1].id\""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct mg_config c;
        char e[MG_CONFIG_ERRMSG_LEN];
        int rv = parse(cases[i].json, &c, e);
        if (rv != MG_ECONFIG || strstr(e, cases[i].key) == NULL)
            fail_msg("%s: rv=%d msg=%s (want key %s)", cases[i].json, rv, e, cases[i].key);
        mg_config_close(&c);
    }
    struct mg_config c;
    char e[MG_CONFIG_ERRMSG_LEN];
    assert_int_equal(parse("{\"listen\": ", &c, e), MG_ECONFIG);
    assert_non_null(strstr(e, "JSON"));
    mg_config_close(&c);
    assert_int_equal(parse("[1]", &c, e), MG_ECONFIG);
    mg_config_close(&c);
}

static void test_listen_override(void **state)
{
    (void)state;
    struct mg_config c;
    char e[MG_CONFIG_ERRMSG_LEN];
    mg_config_init(&c);
    assert_int_equal(mg_config_set_listen(&c, "[::1]:9443", e), 0);
    assert_string_equal(c.listen_host, "::1");
    assert_int_equal(c.listen_port, 9443);
    assert_int_equal(mg_config_set_listen(&c, "localhost:0", e), 0);
    assert_int_equal(c.listen_port, 0);
    assert_int_equal(mg_config_set_listen(&c, ":9000", e), MG_ECONFIG);
    assert_int_equal(mg_config_set_listen(&c, "h:x", e), MG_ECONFIG);
    mg_config_close(&c);
}

static void test_generated_credentials(void **state)
{
    (void)state;
    char dir[] = "/tmp/mg_test_config_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char data[256];
    snprintf(data, sizeof(data), "%s/data/sub", dir);
    struct mg_config c;
    char e[MG_CONFIG_ERRMSG_LEN];
    mg_config_init(&c);
    mg_config_set_data_dir(&c, data);
    assert_int_equal(mg_config_finish(&c, e), 0);
    assert_int_equal(c.nusers, 1);
    assert_true(c.users_generated);
    assert_int_equal(strlen(c.users[0].access_key), 20);
    assert_int_equal(strlen(c.users[0].secret_key), 40);
    char ak[64], sk[64];
    strcpy(ak, c.users[0].access_key);
    strcpy(sk, c.users[0].secret_key);
    mg_config_close(&c);

    char path[300];
    snprintf(path, sizeof(path), "%s/credentials.json", data);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    snprintf(path, sizeof(path), "%s/tmp", data);
    assert_int_equal(stat(path, &st), 0);

    /* Restart: the same pair comes back. */
    mg_config_init(&c);
    mg_config_set_data_dir(&c, data);
    assert_int_equal(mg_config_finish(&c, e), 0);
    assert_string_equal(c.users[0].access_key, ak);
    assert_string_equal(c.users[0].secret_key, sk);
    mg_config_close(&c);

    /* Configured users: no file is read or written. TLS files must be readable. */
    mg_config_init(&c);
    mg_config_set_data_dir(&c, data);
    assert_int_equal(mg_config_parse(&c,
                                     "{\"tls\": {\"cert_file\": \"/nonexistent.pem\", "
                                     "\"key_file\": \"/nonexistent.key\"}}",
                                     strlen("{\"tls\": {\"cert_file\": \"/nonexistent.pem\", "
                                            "\"key_file\": \"/nonexistent.key\"}}"),
                                     e),
                     0);
    assert_int_equal(mg_config_finish(&c, e), MG_ECONFIG);
    assert_non_null(strstr(e, "\"tls.cert_file\""));
    mg_config_close(&c);

    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* data.backend and cluster (issue 10) are checked together at finish: rados needs its conf
 * and pool, a cluster needs rados and its own id among its nodes, whose raft address becomes
 * meta.raft_listen. */
static int finish_json(const char *json, const char *data, struct mg_config *c, char *e)
{
    mg_config_init(c);
    mg_config_set_data_dir(c, data);
    int rv = mg_config_parse(c, json, strlen(json), e);
    return rv != 0 ? rv : mg_config_finish(c, e);
}

static void test_data_and_cluster(void **state)
{
    (void)state;
    char dir[] = "/tmp/mg_test_config_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char data[256], conf[300], json[2048];
    snprintf(data, sizeof(data), "%s/data", dir);
    snprintf(conf, sizeof(conf), "%s/ceph.conf", dir);
    FILE *f = fopen(conf, "w");
    assert_non_null(f);
    fclose(f);
    struct mg_config c;
    char e[MG_CONFIG_ERRMSG_LEN];
    const char *nodes = "\"nodes\": [{\"id\": 1, \"s3\": \"127.0.0.1:9000\", \"raft\": "
                        "\"127.0.0.1:9001\", \"rpc\": \"127.0.0.1:9002\"}, {\"id\": 2, \"s3\": "
                        "\"127.0.0.1:9010\", \"raft\": \"127.0.0.1:9011\", \"rpc\": "
                        "\"127.0.0.1:9012\"}]";

    /* The default is local and one node. */
    assert_int_equal(finish_json("{}", data, &c, e), 0);
    assert_false(c.data_rados);
    assert_int_equal(c.cluster_node_id, 0);
    mg_config_close(&c);

    /* rados: conf and pool required, user defaults to admin; the conf must be readable. */
    snprintf(json, sizeof(json), "{\"data\": {\"backend\": \"rados\", \"rados\": {\"conf\": "
             "\"%s\", \"pool\": \"mg\"}}}", conf);
    assert_int_equal(finish_json(json, data, &c, e), 0);
    assert_true(c.data_rados);
    assert_string_equal(c.rados_pool, "mg");
    assert_string_equal(c.rados_user, "admin");
    mg_config_close(&c);
    assert_int_equal(finish_json("{\"data\": {\"backend\": \"rados\", \"rados\": {\"conf\": "
                                 "\"/nonexistent/ceph.conf\", \"pool\": \"mg\"}}}",
                                 data, &c, e),
                     MG_ECONFIG);
    assert_non_null(strstr(e, "\"data.rados.conf\""));
    mg_config_close(&c);
    assert_int_equal(finish_json("{\"data\": {\"backend\": \"rados\"}}", data, &c, e),
                     MG_ECONFIG);
    assert_non_null(strstr(e, "\"data.rados.conf\""));
    mg_config_close(&c);
    assert_int_equal(finish_json("{\"data\": {\"rados\": {\"pool\": \"mg\"}}}", data, &c, e),
                     MG_ECONFIG);
    assert_non_null(strstr(e, "\"data.rados\""));
    mg_config_close(&c);

    /* A cluster refuses the local backend. */
    snprintf(json, sizeof(json), "{\"cluster\": {\"node_id\": 2, %s}}", nodes);
    assert_int_equal(finish_json(json, data, &c, e), MG_ECONFIG);
    assert_non_null(strstr(e, "\"data.backend\""));
    mg_config_close(&c);
    /* ... and a node id that is not among its nodes. */
    snprintf(json, sizeof(json),
             "{\"data\": {\"backend\": \"rados\", \"rados\": {\"conf\": \"%s\", \"pool\": "
             "\"mg\"}}, \"cluster\": {\"node_id\": 3, %s}}",
             conf, nodes);
    assert_int_equal(finish_json(json, data, &c, e), MG_ECONFIG);
    assert_non_null(strstr(e, "\"cluster.node_id\""));
    mg_config_close(&c);
    /* With rados it starts; its raft address is the node's. */
    snprintf(json, sizeof(json),
             "{\"data\": {\"backend\": \"rados\", \"rados\": {\"conf\": \"%s\", \"pool\": "
             "\"mg\", \"user\": \"mg\", \"namespace\": \"c1\"}}, \"cluster\": {\"node_id\": 2, "
             "%s}}",
             conf, nodes);
    assert_int_equal(finish_json(json, data, &c, e), 0);
    assert_string_equal(c.rados_namespace, "c1");
    assert_int_equal(c.cluster_node_id, 2);
    assert_int_equal(c.ncluster_nodes, 2);
    assert_string_equal(c.cluster_nodes[1].rpc, "127.0.0.1:9012");
    assert_string_equal(c.meta_raft_listen, "127.0.0.1:9011");
    mg_config_close(&c);
    /* An explicit meta.raft_listen must agree with it. */
    snprintf(json, sizeof(json),
             "{\"meta\": {\"raft_listen\": \"127.0.0.1:7000\"}, \"data\": {\"backend\": "
             "\"rados\", \"rados\": {\"conf\": \"%s\", \"pool\": \"mg\"}}, \"cluster\": "
             "{\"node_id\": 1, %s}}",
             conf, nodes);
    assert_int_equal(finish_json(json, data, &c, e), MG_ECONFIG);
    assert_non_null(strstr(e, "\"meta.raft_listen\""));
    mg_config_close(&c);

    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_errors_name_the_key),
        cmocka_unit_test(test_listen_override),
        cmocka_unit_test(test_generated_credentials),
        cmocka_unit_test(test_data_and_cluster),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
