/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the configuration file parser (common/config.c,
 * mg_config_parse: JSON from memory through the yajl tree API). Invariants
 * besides "no crash, no leak, no sanitizer report":
 *   - a rejection always says why (errmsg non-empty, NUL-terminated);
 *   - an accepted configuration satisfies what config.h promises (every user
 *     has a name, access and secret key within their limits, distinct names
 *     and access keys; threads and inline_max_bytes in range; a listen host);
 *   - parsing the same text again over the result (the "values already in
 *     cfg" path that command-line overrides rely on) gives the same verdict
 *     and the same users, and frees what it replaces.
 * Seed corpus: tests/fuzz/corpus/config/ (replayed as a plain ctest, label fuzz).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Printable ASCII without spaces, quotes or backslashes, length in [min, max]. */
static int token_in(const char *s, size_t min, size_t max)
{
    size_t n, i;
    if (s == NULL)
        return 0;
    n = strlen(s);
    if (n < min || n > max)
        return 0;
    for (i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f || s[i] == '"' ||
            s[i] == '\\')
            return 0;
    return 1;
}

static void check_accepted(const struct mg_config *cfg)
{
    size_t i, j;
    if (cfg->listen_host == NULL || cfg->listen_host[0] == '\0' || cfg->data_dir == NULL ||
        cfg->region == NULL || cfg->log_level == NULL)
        abort();
    if (cfg->threads < 0 || cfg->threads > 256 || cfg->inline_max_bytes > (1u << 20))
        abort();
    if ((cfg->tls_cert_file == NULL) != (cfg->tls_key_file == NULL))
        abort();
    if (cfg->nusers > 1024 || (cfg->nusers > 0 && cfg->users == NULL))
        abort();
    for (i = 0; i < cfg->nusers; i++) {
        const struct mg_config_user *u = &cfg->users[i];
        if (!token_in(u->name, 1, 64) || !token_in(u->access_key, 3, 128) ||
            !token_in(u->secret_key, 8, 128) || strchr(u->access_key, '/') != NULL ||
            strchr(u->access_key, ':') != NULL)
            abort();
        for (j = 0; j < i; j++)
            if (strcmp(cfg->users[j].name, u->name) == 0 ||
                strcmp(cfg->users[j].access_key, u->access_key) == 0)
                abort();
    }
}

static int same_str(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mg_config cfg, again;
    char errmsg[MG_CONFIG_ERRMSG_LEN];
    int rv, rv2;
    size_t i;

    memset(errmsg, 0, sizeof(errmsg));
    mg_config_init(&cfg);
    rv = mg_config_parse(&cfg, (const char *)data, size, errmsg);
    if (rv != 0 && (errmsg[0] == '\0' || memchr(errmsg, '\0', sizeof(errmsg)) == NULL))
        abort();
    if (rv == 0) {
        check_accepted(&cfg);
        /* Once more over the parsed values: same verdict, same users, nothing leaked. */
        mg_config_init(&again);
        if (mg_config_parse(&again, (const char *)data, size, errmsg) != 0)
            abort();
        rv2 = mg_config_parse(&again, (const char *)data, size, errmsg);
        if (rv2 != 0 || again.nusers != cfg.nusers || again.listen_port != cfg.listen_port ||
            !same_str(again.listen_host, cfg.listen_host) ||
            !same_str(again.region, cfg.region) || !same_str(again.domain, cfg.domain))
            abort();
        for (i = 0; i < cfg.nusers; i++)
            if (!same_str(again.users[i].name, cfg.users[i].name) ||
                !same_str(again.users[i].secret_key, cfg.users[i].secret_key))
                abort();
        mg_config_close(&again);
    }
    mg_config_close(&cfg);
    return 0;
}
