/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine/ internal: fault-injection points for the blob store's syscalls, in
 * the style of raft test/lib/fault.h and SQLite src/test_malloc.c (STYLE.md 7).
 * A point fails its Nth tick (countdown `delay`: 0 fails the very next call)
 * and then `repeat` more times (-1: forever), with the errno given. The points
 * exist only when ENG_FAULT_INJECTION is defined (the mg_engine_fault library
 * the unit tests link); in production builds eng__fault_tick() is the constant
 * 0 and the compiler drops it. Thread-safe.
 */
#ifndef MG_ENGINE_FAULT_H
#define MG_ENGINE_FAULT_H

enum eng__fault_point {
    ENG_FAULT_WRITE,  /* pwrite, pwritev, copy_file_range into a blob file */
    ENG_FAULT_SYNC,   /* fdatasync / fsync of a blob file or the blob directory */
    ENG_FAULT_CREATE, /* creating a segment or own file */
    ENG_FAULT__COUNT
};

#ifdef ENG_FAULT_INJECTION
/* Arm point p: pass `delay` ticks, then fail `repeat` times (-1: forever) with errno e. */
void eng__fault_config(enum eng__fault_point p, int delay, int repeat, int e);
/* Disarm every point. */
void eng__fault_reset(void);
/* 0: proceed; otherwise the errno the caller must fail with. */
int eng__fault_tick(enum eng__fault_point p);
/* How many times p has failed since the last config. */
int eng__fault_fired(enum eng__fault_point p);
#else
#define eng__fault_tick(p) 0
#endif

#endif
