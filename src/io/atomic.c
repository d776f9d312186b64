/* src/io/atomic.c - replacing a file atomically: write a temporary file next
 * to it, fsync, rename over the destination, fsync the folder.  An error at
 * any point leaves the previous file intact and no temporary behind.  Where
 * the file system has O_TMPFILE (Linux: ext4, xfs, btrfs, tmpfs), the
 * temporary file has no name while it is written and is linked as
 * "<path>.tmp.XXXXXX" only just before the rename, so a process killed while
 * writing leaves nothing behind either; elsewhere it is named from the start
 * (mkstemp), and a kill while writing leaves it.  Used by every writer of the
 * library (safetensors, PNG grids, plots, ONNX). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
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

/* An unnamed file in path's folder (O_TMPFILE), or -1 where the file system
 * or kernel has none, or /proc (which linking it needs) is not mounted. */
static int open_unnamed(const char *path)
{
#ifdef O_TMPFILE
    if (access("/proc/self/fd", X_OK) != 0) return -1;
    char *copy = strdup(path);
    if (!copy) return -1;
    int fd = open(dirname(copy), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    free(copy);
    return fd;
#else
    (void)path;
    return -1;
#endif
}

int tg__atomic_open(FILE **f, char **tmp, const char *what, const char *path)
{
    size_t n = strlen(path) + sizeof ".tmp.XXXXXX";
    char *name = tg__malloc(n);
    if (!name) return TG_ENOMEM;
    snprintf(name, n, "%s.tmp.XXXXXX", path);
    /* unnamed: *tmp keeps the template, which finish fills when it links */
    int fd = open_unnamed(path);
    if (fd < 0 && (fd = mkstemp(name)) < 0) {
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
        struct stat st;
        const bool named = fstat(fd, &st) == 0 && st.st_nlink > 0;
        close(fd);
        if (named) unlink(name);
        free(name);
        return rc;
    }
    *f = fp;
    *tmp = name;
    return 0;
}

/* Gives the unnamed file fd a name: tmp's trailing XXXXXX replaced by random
 * letters and digits until the link succeeds. */
static int link_unnamed(int fd, char *tmp)
{
    static const char digits[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    char *x = tmp + strlen(tmp) - 6;
    for (int attempt = 0; attempt < 100; attempt++) {
        unsigned char r[6];
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) return -1;
        for (int i = 0; i < 6; i++) x[i] = digits[r[i] % (sizeof digits - 1)];
        if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0) return 0;
        if (errno != EEXIST) return -1;
    }
    return -1;
}

int tg__atomic_finish(FILE *f, char **tmp, bool ok, const char *what, const char *path)
{
    int rc = 0;
    struct stat st;
    const bool unnamed = fstat(fileno(f), &st) == 0 && st.st_nlink == 0;
    if (ok && (fflush(f) != 0 || fsync(fileno(f)) != 0))
        rc = tg__error(TG_EIO, "%s: writing '%s': %s", what, *tmp, strerror(errno));
    bool linked = !unnamed;
    if (ok && rc == 0 && unnamed) {
        if (link_unnamed(fileno(f), *tmp) == 0) linked = true;
        else rc = tg__error(TG_EIO, "%s: cannot name the file written next to '%s': %s", what,
                            path, strerror(errno));
    }
    if (fclose(f) != 0 && ok && rc == 0)
        rc = tg__error(TG_EIO, "%s: closing '%s': %s", what, *tmp, strerror(errno));
    if (ok && rc == 0 && rename(*tmp, path) != 0)
        rc = tg__error(TG_EIO, "%s: cannot rename '%s' to '%s': %s", what, *tmp, path,
                       strerror(errno));
    if ((!ok || rc < 0) && linked) unlink(*tmp);
    else if (ok && rc == 0) sync_parent_dir(path);
    free(*tmp);
    *tmp = NULL;
    return rc;
}
