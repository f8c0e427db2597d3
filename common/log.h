/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One logging macro (STYLE.md 5). mg_log checks the level before evaluating
 * its arguments and stamps the module (MG_MODULE, defined per file before
 * including this header; "-" otherwise). One key=value line per notable event
 * on stderr. Hot-path tracing (MG_LOG_TRACE) is compiled in but only emitted
 * when the environment variable MG_TRACE is set. Thread-safe.
 */
#ifndef MG_COMMON_LOG_H
#define MG_COMMON_LOG_H

enum mg_log_level {
    MG_LOG_TRACE,
    MG_LOG_DEBUG,
    MG_LOG_INFO,
    MG_LOG_WARN,
    MG_LOG_ERROR,
    MG_LOG_FATAL,
};

#ifndef MG_MODULE
#define MG_MODULE "-"
#endif

extern int mg_log_level_min; /* events below this level are dropped (default INFO) */

/* Set the minimum level from a name ("debug", "info", ...); returns 0 or -1 if unknown. */
int mg_log_set_level(const char *name);

void mg__log_emit(enum mg_log_level level, const char *module, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define mg_log(level, ...)                                                                         \
    do {                                                                                           \
        if ((level) >= mg_log_level_min)                                                           \
            mg__log_emit((level), MG_MODULE, __VA_ARGS__);                                         \
    } while (0)

#endif
