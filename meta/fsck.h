/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `metagate admin fsck --data DIR [--repair]` (issue 9; docs/ops.md
 * "Scrubbing and fsck"): checks a stopped data directory.
 *
 * It refuses a directory whose blob store lock (DIR/blobs/LOCK) a running
 * server holds, then opens the store as the server does (so the Raft log
 * above RocksDB's last flush is replayed first) and compares two sets:
 *  - the blobs the blob store holds (eng_blob_foreach over the segments);
 *  - the blobs the committed metadata references (meta_scrub_walk: object
 *    entries and parts of uploads in progress).
 * and verifies every referenced blob (eng_blob_verify). It reports
 *  - orphans: blobs no entry or part references (space leaked by a crash
 *    between a blob write and its metadata commit);
 *  - dangling: references to a blob the store does not hold (freed, or its
 *    segment gone), or holds with another length, crc or epoch;
 *  - checksum failures: referenced blobs whose header or chunks do not match.
 * as a table on stdout and one JSON line (starting {"fsck":) last.
 *
 * --repair frees every orphan (eng_blob_free), deletes each object entry with
 * a dangling reference (a GET of it could only ever fail; after the repair it
 * is a clean 404 and listings stop showing it) and aborts each upload with a
 * dangling part (its completion could only fail). Checksum failures are not
 * repaired: a single node has no other copy; the objects are listed for the
 * operator to restore and overwrite.
 *
 * The orphan collector (meta/orphan.h) does not run inside fsck (MG_ORPHAN_PERIOD_MS=0), so
 * without --repair nothing is freed; the open itself appends the Raft groups' election
 * entries and starts a new blob epoch, as any start does.
 *
 * Exit status: 0 nothing found (or everything found was repaired), 3 problems
 * remain, 1 the check could not run (directory in use, open failed), 2 usage.
 */
#ifndef MG_META_FSCK_H
#define MG_META_FSCK_H

/* The admin command; argv holds the options after "admin fsck". */
int meta_fsck_main(int argc, char **argv);

#endif
