/* SPDX-License-Identifier: Apache-2.0 */
/*
 * File-system durability helpers. A new directory entry (a file or a
 * directory created in it) is durable only once its parent directory is
 * fsynced: ext4's journal usually makes it so anyway, a strict POSIX file
 * system does not (tests/fault/powercut --strict-mkdir showed a power cut
 * losing the whole data directory).
 */
#ifndef MG_COMMON_FS_H
#define MG_COMMON_FS_H

/* fsync the directory dir. Returns 0 or an enum mg_err (errno translated here). */
int mg_fsync_dir(const char *dir);
/* fsync the parent directory of path ("." for a relative name without '/'). */
int mg_fsync_parent(const char *path);

#endif
