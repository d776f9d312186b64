/* Helpers for the tests that work with files and programs: a temporary
 * directory per test, the programs run in it, files read, written and
 * compared, IDX image sets; see helpers.h. */
#include "helpers.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

char th_tmp_dir[64];

void th_tmp_dir_make(const char *prefix)
{
    int len = snprintf(th_tmp_dir, sizeof th_tmp_dir, "/tmp/%sXXXXXX", prefix);
    cr_assert(len > 0 && (size_t)len < sizeof th_tmp_dir, "prefix %s too long", prefix);
    cr_assert(mkdtemp(th_tmp_dir) != NULL);
}

/* nftw callback: removes one entry; directories come after their contents
 * (FTW_DEPTH). */
static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

void th_tmp_dir_remove(void)
{
    /* whole tree: the CLI tests leave an out/ directory with files in it */
    if (th_tmp_dir[0]) nftw(th_tmp_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *th_tmp_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", th_tmp_dir, name);
    return buf;
}

int th_tmp_dir_count(void)
{
    DIR *d = opendir(th_tmp_dir);
    cr_assert(d != NULL, "cannot open %s", th_tmp_dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void read_text(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(buf, 1, n - 1, f) : 0;
    buf[got] = '\0';
    if (f) fclose(f);
}

char th_out[1 << 16], th_err[1 << 14];

int th_run(const char *var, const char *const *args)
{
    const char *tool = getenv(var);
    cr_assert(tool != NULL, "%s is not set (run through meson test)", var);
    char *argv[48] = {(char *)tool};
    int n = 1;
    for (; args[n - 1]; n++) {
        cr_assert(n < 47);
        argv[n] = (char *)args[n - 1];
    }
    argv[n] = NULL;
    char out_path[256], err_path[256];
    th_tmp_path(out_path, sizeof out_path, ".stdout");
    th_tmp_path(err_path, sizeof err_path, ".stderr");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addchdir_np(&fa, th_tmp_dir);
    pid_t pid;
    int rc = posix_spawn(&pid, tool, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    cr_assert(eq(int, rc, 0), "posix_spawn %s: %s", tool, strerror(rc));
    int status;
    cr_assert(eq(int, waitpid(pid, &status, 0), pid));
    read_text(out_path, th_out, sizeof th_out);
    read_text(err_path, th_err, sizeof th_err);
    cr_assert(strstr(th_err, "Sanitizer") == NULL && strstr(th_err, "runtime error:") == NULL,
              "sanitizer report from %s:\n%s", tool, th_err);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void th_expect_in(const char *text, const char *want)
{
    cr_assert(strstr(text, want) != NULL, "\"%s\" not in:\n%s", want, text);
}

char *th_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (len >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)len + 1))) {
        *n = fread(buf, 1, (size_t)len, f);
        buf[*n] = '\0';
    }
    fclose(f);
    return buf;
}

bool th_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

void th_write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f != NULL, "cannot write %s", path);
    cr_assert(eq(sz, fwrite(data, 1, n, f), n));
    cr_assert(eq(int, fclose(f), 0));
}

void th_expect_same_bytes(const char *path, const char *want, size_t n)
{
    size_t len = 0;
    char *got = th_read_file(path, &len);
    cr_assert(got != NULL, "%s is gone", path);
    cr_assert(len == n && memcmp(got, want, n) == 0, "%s was changed", path);
    free(got);
}

void th_expect_plain_message(const char *err, const char *want)
{
    th_expect_in(err, want);
    cr_assert(strstr(err, " failed: ") == NULL && strstr(err, ": TG_E") == NULL,
              "the message quotes source code:\n%s", err);
}

void th_write_idx_set(const char *dir, const char *prefix, uint32_t n, uint8_t side,
                      uint64_t seed)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, prefix);
    FILE *f = fopen(path, "wb");
    cr_assert(f != NULL, "cannot write %s", path);
    const uint8_t img_head[16] = {0, 0, 8, 3, n >> 24, n >> 16 & 255, n >> 8 & 255, n & 255,
                                  0, 0, 0, side, 0, 0, 0, side};
    fwrite(img_head, 1, sizeof img_head, f);
    for (uint32_t i = 0; i < n * side * side; i++) fputc((int)(th_xorshift64(&seed) & 255), f);
    cr_assert(eq(int, fclose(f), 0));
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, prefix);
    f = fopen(path, "wb");
    cr_assert(f != NULL, "cannot write %s", path);
    const uint8_t lab_head[8] = {0, 0, 8, 1, n >> 24, n >> 16 & 255, n >> 8 & 255, n & 255};
    fwrite(lab_head, 1, sizeof lab_head, f);
    for (uint32_t i = 0; i < n; i++) fputc((int)(i % 10), f);
    cr_assert(eq(int, fclose(f), 0));
}
