/* src/io/atomic.c - replacing a file atomically: write a temporary file next
 * to it, fsync, rename over the destination, fsync the folder.  A crash or an
 * error at any point leaves the previous file intact and no temporary behind.
 * Used by every writer of the library (safetensors, PNG grids, plots). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "io/atomic.h"

/* Best effort: makes the rename itself durable. */
static void sync_parent_dir(const char *path)
{
    char *copy = strdup(path);
    if (!copy) return;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(copy);
}

int tg__atomic_open(FILE **f, char **tmp, const char *what, const char *path)
{
    size_t n = strlen(path) + sizeof ".tmp.XXXXXX";
    char *name = tg__malloc(n);
    if (!name) return TG_ENOMEM;
    snprintf(name, n, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(name);
    if (fd < 0) {
        int rc = tg__error(TG_EIO, "%s: cannot create a file next to '%s': %s", what, path,
                           strerror(errno));
        free(name);
        return rc;
    }
    /* mkstemp creates the file 0600; the result should read like any other
     * file the caller writes. */
    (void)fchmod(fd, 0644);
    FILE *fp = fdopen(fd, "wb");
    if (!fp) {
        int rc = tg__error(TG_EIO, "%s: fdopen '%s': %s", what, name, strerror(errno));
        close(fd);
        unlink(name);
        free(name);
        return rc;
    }
    *f = fp;
    *tmp = name;
    return 0;
}

int tg__atomic_finish(FILE *f, char **tmp, bool ok, const char *what, const char *path)
{
    int rc = 0;
    if (ok && (fflush(f) != 0 || fsync(fileno(f)) != 0))
        rc = tg__error(TG_EIO, "%s: writing '%s': %s", what, *tmp, strerror(errno));
    if (fclose(f) != 0 && ok && rc == 0)
        rc = tg__error(TG_EIO, "%s: closing '%s': %s", what, *tmp, strerror(errno));
    if (ok && rc == 0 && rename(*tmp, path) != 0)
        rc = tg__error(TG_EIO, "%s: cannot rename '%s' to '%s': %s", what, *tmp, path,
                       strerror(errno));
    if (!ok || rc < 0) unlink(*tmp);
    else sync_parent_dir(path);
    free(*tmp);
    *tmp = NULL;
    return rc;
}
