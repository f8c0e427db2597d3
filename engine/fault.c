/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fault-injection countdowns behind engine/fault.h. Compiled to nothing
 * unless ENG_FAULT_INJECTION is defined, so production builds carry no hooks.
 */
#include "engine/fault.h"

#ifdef ENG_FAULT_INJECTION
#include <pthread.h>

static struct {
    int armed;  /* 1 once configured */
    int delay;  /* ticks still to pass before failing */
    int repeat; /* failures still to inject (-1: forever) */
    int err;    /* errno to fail with */
    int fired;  /* failures injected since config */
} faults[ENG_FAULT__COUNT];
static pthread_mutex_t fault_mu = PTHREAD_MUTEX_INITIALIZER;

void eng__fault_config(enum eng__fault_point p, int delay, int repeat, int e)
{
    pthread_mutex_lock(&fault_mu);
    faults[p].armed = 1;
    faults[p].delay = delay;
    faults[p].repeat = repeat;
    faults[p].err = e;
    faults[p].fired = 0;
    pthread_mutex_unlock(&fault_mu);
}

void eng__fault_reset(void)
{
    pthread_mutex_lock(&fault_mu);
    for (int i = 0; i < ENG_FAULT__COUNT; i++)
        faults[i].armed = 0;
    pthread_mutex_unlock(&fault_mu);
}

int eng__fault_tick(enum eng__fault_point p)
{
    int e = 0;
    pthread_mutex_lock(&fault_mu);
    if (faults[p].armed) {
        if (faults[p].delay > 0) {
            faults[p].delay--;
        } else if (faults[p].repeat != 0) {
            if (faults[p].repeat > 0)
                faults[p].repeat--;
            faults[p].fired++;
            e = faults[p].err;
        }
    }
    pthread_mutex_unlock(&fault_mu);
    return e;
}

int eng__fault_fired(enum eng__fault_point p)
{
    pthread_mutex_lock(&fault_mu);
    int n = faults[p].fired;
    pthread_mutex_unlock(&fault_mu);
    return n;
}
#else
typedef int eng__fault_unused; /* ISO C forbids an empty translation unit */
#endif
