/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Directory fsyncs (common/fs.h): the one place these syscalls' errno is
 * translated.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MG_MODULE "common"
#include "common/common.h"
#include "common/fs.h"

int mg_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return mg_err_from_errno(errno);
    int rv = fsync(fd) == 0 ? 0 : mg_err_from_errno(errno);
    close(fd);
    if (rv != 0)
        mg_log(MG_LOG_ERROR, "event=fsync_dir_failed dir=%s err=%s", dir, mg_err_name(rv));
    return rv;
}

int mg_fsync_parent(const char *path)
{
    char parent[PATH_MAX];
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    const char *slash = memrchr(path, '/', n);
    if (slash == NULL)
        return mg_fsync_dir(".");
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    if (len >= sizeof(parent))
        return MG_EINVALIDARGUMENT;
    memcpy(parent, path, len);
    parent[len] = '\0';
    return mg_fsync_dir(parent);
}
