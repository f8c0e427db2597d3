/* SPDX-License-Identifier: Apache-2.0 */
/* Log sink: timestamped key=value lines on stderr, one write(2) per line so
 * lines from different threads never interleave. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

int mg_log_level_min = MG_LOG_INFO;

static const char *names[] = {"trace", "debug", "info", "warn", "error", "fatal"};

__attribute__((constructor)) static void init_from_env(void)
{
    if (getenv("MG_TRACE") != NULL)
        mg_log_level_min = MG_LOG_TRACE;
}

int mg_log_set_level(const char *name)
{
    for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++) {
        if (strcmp(name, names[i]) == 0) {
            mg_log_level_min = i;
            return 0;
        }
    }
    return -1;
}

void mg__log_emit(enum mg_log_level level, const char *module, const char *fmt, ...)
{
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s module=%s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, names[level], module);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof(line) - 2)
        len = sizeof(line) - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
    if (level == MG_LOG_FATAL)
        abort();
}
