/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `mgbench expiry` (issue 8): the lifecycle-expiry scenario. Per configuration
 * it starts its own metagate (or uses --endpoint), loads N timestamp-prefixed
 * keys, sets a rule that expires the oldest 75 %, and while expiry runs LISTs
 * 1,000 live keys in a loop on the expiring prefix and on an untouched one,
 * polling /metrics; it reports the expiry rate, LIST latency before, during
 * and after, the time LIST takes to recover, peak tombstones and LSM bytes
 * written. The pure computations below are exposed for the unit test.
 */
#ifndef MGB_EXPIRY_H
#define MGB_EXPIRY_H

#include <stddef.h>

/* One LIST: when it was sent (s, on the scenario's clock) and how long it took (ms). */
struct mgb_exp_sample {
    double t_s;
    double ms;
};

/* Nearest-rank quantile of v[0..n), q in [0, 1] (1: the maximum); sorts v in place.
 * Returns NAN when n == 0. */
double mgb_exp_quantile(double *v, size_t n, double q);

/* Seconds from t_end until LIST is back: the start time T >= t_end of the first sample
 * such that the median of the samples sent in [T, T + window_s) is <= target_ms, counting
 * only windows that lie wholly inside the observed samples (some sample is sent at or
 * after T + window_s), minus t_end. s is sorted by t_s. Returns -1 when no window
 * qualifies (not recovered while observed). */
double mgb_exp_recover_s(const struct mgb_exp_sample *s, size_t n, double t_end,
                         double target_ms, double window_s);

/* Value of the Prometheus text line "name value" in text (name includes any labels,
 * e.g. metagate_rocksdb_tombstones{cf="meta"}). Returns 0 and sets *out, or -1 when the
 * metric is absent. */
int mgb_exp_metric(const char *text, const char *name, double *out);

struct mg_buf;

/* The DeleteObjects body (Quiet) for keys[0..n) into out (reset first); keys hold no XML
 * special characters (the scenario's names). Returns out's length. */
size_t mgb_exp_delete_body(struct mg_buf *out, const char *const *keys, size_t n);

/* The subcommand: argv[0] is "expiry". Returns the exit status. */
int mgb_expiry_main(int argc, char **argv);

#endif
