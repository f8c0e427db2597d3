/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Workaround for io_destroy(2) blocking the host loop under libraft 0.15.
 * io_destroy waits for an RCU grace period, measured at 30-60 ms here, and
 * libraft calls it on the loop thread: once per group in raft_init (the uv
 * backend probes the data dir for direct and kernel-async I/O), and whenever
 * an open segment's writer closes (segment full, snapshot or truncation
 * barrier, group close). With 256 groups that was 10-15 s to open a node and,
 * after a peer died, seconds of loop stalls while ~85 groups re-elected and
 * snapshotted, which stretched failover past 5 s.
 *
 * libraft reaches io_destroy through syscall(2) (its src/syscall.c). This file
 * defines syscall() for the program: every call passes through unchanged
 * except io_destroy, which is handed to background threads, so the caller
 * sees success at once. That is safe for the contexts libraft destroys: the
 * probe's only request was reaped by io_getevents before; a writer is closed
 * after its barrier drained the appends (or as the group closes, when libraft
 * already reports in-flight requests as canceled); and io_destroy in the
 * reaper still waits for anything in flight before the kernel frees the
 * context. Nothing else in the program uses Linux AIO.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "raft/internal.h"

#define REAPERS 4       /* background threads destroying contexts */
#define BACKLOG 4096    /* bound on pending contexts; beyond it, destroy inline */

typedef long (*syscall_fn)(long, ...);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static syscall_fn real_syscall;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static long pending[BACKLOG];
static unsigned n_pending;
static bool reapers_started;

static void resolve(void)
{
    real_syscall = (syscall_fn)(uintptr_t)dlsym(RTLD_NEXT, "syscall");
    if (real_syscall == NULL)
        abort();
}

static void *reaper(void *arg)
{
    for (;;) {
        pthread_mutex_lock(&lock);
        while (n_pending == 0)
            pthread_cond_wait(&cond, &lock);
        long ctx = pending[--n_pending];
        pthread_mutex_unlock(&lock);
        real_syscall(SYS_io_destroy, ctx);
    }
    return NULL;
}

/* Queue ctx for a reaper; false when the backlog is full. */
static bool defer(long ctx)
{
    bool ok = false;
    pthread_mutex_lock(&lock);
    if (!reapers_started) {
        reapers_started = true;
        for (int i = 0; i < REAPERS; i++) {
            pthread_t t;
            if (pthread_create(&t, NULL, reaper, NULL) == 0)
                pthread_detach(t);
        }
    }
    if (n_pending < BACKLOG) {
        pending[n_pending++] = ctx;
        ok = true;
        pthread_cond_signal(&cond);
    }
    pthread_mutex_unlock(&lock);
    return ok;
}

/* The x86-64 and aarch64 syscall ABIs take at most six arguments; like glibc's
 * own syscall(), read six and let the kernel ignore the unused ones. */
long syscall(long number, ...)
{
    va_list ap;
    long a[6];
    va_start(ap, number);
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    pthread_once(&once, resolve);
    if (number == SYS_io_destroy && defer(a[0]))
        return 0;
    return real_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* Called once by the host: resolves the real syscall() early and, by being
 * referenced, makes the linker keep this object (and its syscall()) when
 * mg_raft is linked as a static archive. */
void mraft__aio_defer_init(void)
{
    pthread_once(&once, resolve);
}
