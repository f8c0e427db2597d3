/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mgbench's output: the final table per S3 operation and the per-second
 * segment summary on stdout, the --vs ratio table, and the JSON, CSV,
 * markdown and gnuplot PNG files. Everything reads merged results only.
 */
#ifndef MGB_REPORT_H
#define MGB_REPORT_H

#include <stdio.h>

#include "tests/bench/run.h"

/* What the report needs besides the results. */
struct mgb_report {
    const struct mgb_config *cfg;
    const struct mgb_result *res[2];   /* per endpoint, merged over rounds */
    const double *round_ops_per_s[2];  /* per endpoint, per round: total ops/s */
    unsigned nep;
};

/* Per-second totals (all ops): fastest, median and slowest. Returns 0 when there are no
 * segments. */
int mgb_segments_summary(const struct mgb_result *r, double *fast_ops, double *med_ops,
                         double *slow_ops, double *fast_mib, double *med_mib, double *slow_mib);

void mgb_report_table(FILE *f, const struct mgb_report *rep, unsigned e);
void mgb_report_vs(FILE *f, const struct mgb_report *rep);
/* Files: return 0 or -1 (message on stderr). */
int mgb_report_json(const char *path, const struct mgb_report *rep);
int mgb_report_csv(const char *path, const struct mgb_report *rep);
int mgb_report_md(const char *path, const struct mgb_report *rep);
int mgb_report_plot(const char *path, const struct mgb_report *rep);

#endif
