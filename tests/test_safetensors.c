/* Tests of the safetensors reader and writer: round trips of every dtype,
 * the committed golden files, argument errors and the atomic save.  The
 * parser on hand-made and broken bytes is tested in
 * test_safetensors_parse.c, the JSON parser and out-of-memory in test_json.c. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"
#include "core/core.h"
#include "io/atomic.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/safetensors.h"

/* ---- helpers ------------------------------------------------------------- */

static void make_dir(void) { th_tmp_dir_make("tg_st_"); }

/* A value pattern exactly representable in every dtype (small integers and
 * halves in [-20, 29.5] for floats; 0..199 for u8). */
static double pattern(tg_dtype dt, int64_t i)
{
    if (dt == TG_U8) return (double)(i % 200);
    if (tg_dtype_is_float(dt)) return (double)(i % 100) * 0.5 - 20.0;
    return (double)(i % 50) - 20.0;
}

static tg_tensor *make_tensor(tg_dtype dt, int ndim, const int64_t *shape)
{
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&t, dt, ndim, shape), 0));
    for (int64_t i = 0; i < tg_tensor_numel(t); i++)
        cr_assert(eq(int, tg_tensor_set_flat(t, i, pattern(dt, i)), 0));
    return t;
}

/* th_read_file, asserting that the file can be read. */
static unsigned char *read_file(const char *path, size_t *len)
{
    char *b = th_read_file(path, len);
    cr_assert(b != NULL, "cannot read %s", path);
    return (unsigned char *)b;
}

static tg_st_file *const UNTOUCHED = (tg_st_file *)&th_tmp_dir;

static void assert_same_tensor(const tg_tensor *a, const tg_tensor *b)
{
    cr_assert(eq(int, (int)tg_tensor_dtype(a), (int)tg_tensor_dtype(b)));
    cr_assert(eq(int, tg_tensor_ndim(a), tg_tensor_ndim(b)));
    for (int d = 0; d < tg_tensor_ndim(a); d++)
        cr_assert(eq(i64, tg_tensor_dim(a, d), tg_tensor_dim(b, d)));
    for (int64_t i = 0; i < tg_tensor_numel(a); i++) {
        double x, y;
        tg_tensor_get_flat(a, i, &x);
        tg_tensor_get_flat(b, i, &y);
        cr_assert(eq(dbl, x, y), "element %lld", (long long)i);
    }
}

TestSuite(safetensors, .init = make_dir, .fini = th_tmp_dir_remove);

/* ---- round trips ------------------------------------------------------------ */

Test(safetensors, round_trip_every_dtype_scalar_empty_and_metadata)
{
    tg_st_file *f = NULL, *g = NULL;
    cr_assert(eq(int, tg_st_new(&f), 0));
    const int64_t shape[3] = {2, 3, 4}, empty[2] = {0, 4};
    for (int d = 0; d < TG_DTYPE_COUNT; d++) {
        char name[32];
        tg_tensor *t = make_tensor((tg_dtype)d, 3, shape);
        snprintf(name, sizeof name, "t_%s", tg_dtype_name((tg_dtype)d));
        cr_assert(eq(int, tg_st_set(f, name, t), 0));
        tg_tensor_release(t);
    }
    tg_tensor *s = NULL, *e = make_tensor(TG_F16, 2, empty);
    tg_tensor_scalar(&s, TG_F64, -1.25);
    cr_assert(eq(int, tg_st_set(f, "scalar", s), 0));
    cr_assert(eq(int, tg_st_set(f, "empty", e), 0));
    cr_assert(eq(int, tg_st_meta_set(f, "format", "pt"), 0));
    cr_assert(eq(int, tg_st_meta_set(f, "tricky \"key\"\n", "tab\there \\ \xc3\xa9 \x01"), 0));

    char path[256];
    th_tmp_path(path, sizeof path, "all.safetensors");
    cr_assert(eq(int, tg_safetensors_save(f, path), 0), "%s", tg_error_message());
    cr_assert(eq(int, tg_safetensors_load(&g, path), 0), "%s", tg_error_message());

    cr_assert(eq(int, tg_st_count(g), tg_st_count(f)));
    for (int i = 0; i < tg_st_count(f); i++) {
        const char *n1, *n2;
        tg_tensor *t1, *t2;
        tg_st_at(f, i, &n1, &t1);
        tg_st_at(g, i, &n2, &t2);
        cr_assert(eq(str, (char *)n1, (char *)n2), "order kept");
        assert_same_tensor(t1, t2);
        cr_assert(tg_tensor_is_contiguous(t2));
    }
    cr_assert(eq(int, tg_tensor_ndim(tg_st_get(g, "scalar")), 0));
    cr_assert(eq(i64, tg_tensor_numel(tg_st_get(g, "empty")), 0));
    cr_assert(eq(int, tg_st_meta_count(g), 2));
    cr_assert(eq(str, (char *)tg_st_meta_get(g, "format"), "pt"));
    cr_assert(eq(str, (char *)tg_st_meta_get(g, "tricky \"key\"\n"), "tab\there \\ \xc3\xa9 \x01"));
    tg_tensor_release(s);
    tg_tensor_release(e);
    tg_st_free(f);
    tg_st_free(g);
}

Test(safetensors, header_is_padded_and_data_offsets_contiguous)
{
    tg_st_file *f = NULL;
    tg_st_new(&f);
    const int64_t sh[1] = {3};
    tg_tensor *a = make_tensor(TG_I8, 1, sh), *b = make_tensor(TG_F64, 1, sh);
    tg_st_set(f, "a", a);
    tg_st_set(f, "b", b);
    char path[256];
    th_tmp_path(path, sizeof path, "pad.safetensors");
    cr_assert(eq(int, tg_safetensors_save(f, path), 0));
    size_t len;
    unsigned char *bytes = read_file(path, &len);
    uint64_t hn = 0;
    for (int i = 7; i >= 0; i--) hn = hn << 8 | bytes[i];
    cr_assert(eq(u64, hn % 8, 0));
    cr_assert(eq(u64, len, 8 + hn + 3 + 24), "data: 3 i8 bytes then 3 f64");
    char *hdr = strndup((char *)bytes + 8, hn);
    cr_assert(strstr(hdr, "\"a\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[0,3]}") != NULL,
              "%s", hdr);
    cr_assert(strstr(hdr, "\"data_offsets\":[3,27]") != NULL, "%s", hdr);
    double v;
    memcpy(&v, bytes + 8 + hn + 3 + 16, 8);   /* b[2] */
    cr_assert(eq(dbl, v, pattern(TG_F64, 2)));
    free(hdr);
    free(bytes);
    tg_tensor_release(a);
    tg_tensor_release(b);
    tg_st_free(f);
}

Test(safetensors, non_contiguous_tensor_is_saved_in_row_major_order)
{
    const int64_t shape[2] = {3, 4};
    tg_tensor *base = make_tensor(TG_F32, 2, shape);
    /* The transpose of base: shape (4, 3), strides (1, 4); element (i, j) is
     * base[j][i] = pattern(j*4 + i). */
    const int64_t tshape[2] = {4, 3}, tstrides[2] = {1, 4};
    tg_tensor *tr = tg__tensor_view_of(base->storage, TG_F32, 2, tshape, tstrides, 0);
    cr_assert(tg_tensor_is_contiguous(tr) == false);
    tg_st_file *f = NULL, *g = NULL;
    tg_st_new(&f);
    tg_st_set(f, "tr", tr);
    char path[256];
    th_tmp_path(path, sizeof path, "tr.safetensors");
    cr_assert(eq(int, tg_safetensors_save(f, path), 0), "%s", tg_error_message());
    cr_assert(eq(int, tg_safetensors_load(&g, path), 0));
    tg_tensor *t = tg_st_get(g, "tr");
    cr_assert(eq(i64, tg_tensor_dim(t, 0), 4));
    cr_assert(eq(i64, tg_tensor_dim(t, 1), 3));
    const float *p = tg_tensor_cdata(t);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            cr_assert(eq(flt, p[i * 3 + j], (float)pattern(TG_F32, j * 4 + i)));
    tg_tensor_release(tr);
    tg_tensor_release(base);
    tg_st_free(f);
    tg_st_free(g);
}

/* Loads every .safetensors file under dirpath and its subfolders; returns
 * how many. */
static int load_goldens_under(const char *dirpath)
{
    DIR *d = opendir(dirpath);
    cr_assert(d != NULL, "%s: cannot open", dirpath);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dirpath, e->d_name);
        struct stat st;
        cr_assert(stat(p, &st) == 0, "%s", p);
        if (S_ISDIR(st.st_mode)) {
            n += load_goldens_under(p);
            continue;
        }
        const size_t len = strlen(e->d_name), ext = strlen(".safetensors");
        if (len < ext || strcmp(e->d_name + len - ext, ".safetensors") != 0) continue;
        tg_st_file *f = NULL;
        cr_assert(eq(int, tg_safetensors_load(&f, p), 0), "%s: %s", p, tg_error_message());
        cr_assert(tg_st_count(f) > 0, "%s holds no tensor", p);
        tg_st_free(f);
        n++;
    }
    closedir(d);
    return n;
}

/* The goldens are committed (tests/golden and its nn/, optim/, quant/
 * folders, 113 files when this was written): every one loads. */
Test(safetensors, committed_golden_files_load)
{
    char dirpath[512];
    snprintf(dirpath, sizeof dirpath, "%s/tests/golden", TG_SOURCE_ROOT);
    const int n = load_goldens_under(dirpath);
    cr_assert(n >= 100, "only %d golden files under %s", n, dirpath);
    cr_log_info("%d golden files loaded", n);
}

/* ---- errors ------------------------------------------------------------------- */

Test(safetensors, missing_file_is_eio)
{
    tg_st_file *f = UNTOUCHED;
    char path[256];
    th_tmp_path(path, sizeof path, "nope.safetensors");
    cr_assert(eq(int, tg_safetensors_load(&f, path), TG_EIO));
    cr_assert(f == UNTOUCHED);
    cr_assert(strstr(tg_error_message(), "nope.safetensors") != NULL);
    cr_assert(eq(int, tg_safetensors_load(&f, th_tmp_dir), TG_EIO), "a directory");
    cr_assert(f == UNTOUCHED);
}

Test(safetensors, container_argument_errors)
{
    tg_st_file *f = NULL;
    tg_st_new(&f);
    tg_tensor *s = NULL;
    tg_tensor_scalar(&s, TG_F32, 1.0);
    cr_assert(eq(int, tg_st_set(f, "__metadata__", s), TG_EINVAL));
    cr_assert(eq(int, tg_st_set(f, NULL, s), TG_EINVAL));
    cr_assert(eq(int, tg_st_set(f, "x", NULL), TG_EINVAL));
    cr_assert(eq(int, tg_st_set(f, "\xff", s), TG_EINVAL));
    cr_assert(eq(int, tg_st_meta_set(f, "k", NULL), TG_EINVAL));
    cr_assert(eq(int, tg_st_count(f), 0));
    cr_assert(eq(int, tg_st_meta_count(f), 0));
    cr_assert(eq(int, tg_st_at(f, 0, NULL, NULL), TG_EINVAL));
    /* Replacing keeps the position and swaps the reference. */
    tg_tensor *s2 = NULL;
    tg_tensor_scalar(&s2, TG_F32, 2.0);
    tg_st_set(f, "x", s);
    tg_st_set(f, "y", s);
    tg_st_set(f, "x", s2);
    cr_assert(eq(int, tg_st_count(f), 2));
    cr_assert(tg_st_get(f, "x") == s2);
    cr_assert(eq(int, tg_tensor_refcount(s), 2));
    tg_st_free(f);
    cr_assert(eq(int, tg_tensor_refcount(s), 1));
    cr_assert(eq(int, tg_tensor_refcount(s2), 1));
    tg_tensor_release(s);
    tg_tensor_release(s2);
}

/* ---- atomic save -------------------------------------------------------------- */

static tg_st_file *file_with(double v, int64_t n)
{
    tg_st_file *f = NULL;
    tg_tensor *t = NULL;
    tg_st_new(&f);
    tg_tensor_full(&t, TG_F32, 1, &n, v);
    tg_st_set(f, "v", t);
    tg_tensor_release(t);
    return f;
}

static double first_value(const char *path)
{
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_safetensors_load(&f, path), 0), "%s", tg_error_message());
    double v;
    tg_tensor_get_flat(tg_st_get(f, "v"), 0, &v);
    tg_st_free(f);
    return v;
}

Test(safetensors, save_into_a_missing_directory_fails_and_leaves_nothing)
{
    tg_st_file *f = file_with(1.0, 4);
    char path[256];
    th_tmp_path(path, sizeof path, "no/such/dir/x.safetensors");
    cr_assert(eq(int, tg_safetensors_save(f, path), TG_EIO));
    cr_assert(eq(int, th_tmp_dir_count(), 0));
    tg_st_free(f);
}

Test(safetensors, save_replaces_an_existing_file_on_success)
{
    tg_st_file *a = file_with(1.0, 4), *b = file_with(2.0, 9);
    char path[256];
    th_tmp_path(path, sizeof path, "x.safetensors");
    cr_assert(eq(int, tg_safetensors_save(a, path), 0));
    cr_assert(eq(dbl, first_value(path), 1.0));
    cr_assert(eq(int, tg_safetensors_save(b, path), 0));
    cr_assert(eq(dbl, first_value(path), 2.0));
    cr_assert(eq(int, th_tmp_dir_count(), 1), "no temporary file left");
    tg_st_free(a);
    tg_st_free(b);
}

Test(safetensors, failed_save_keeps_the_old_file)
{
    tg_st_file *a = file_with(1.0, 4), *b = file_with(2.0, 1 << 16);
    char path[256];
    th_tmp_path(path, sizeof path, "x.safetensors");
    cr_assert(eq(int, tg_safetensors_save(a, path), 0));
    /* Make writes beyond 4 KiB fail (EFBIG) for this (forked) test process,
     * so b's 256 KiB of data cannot be written.  Works even as root. */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim = {4096, 4096};
    getrlimit(RLIMIT_FSIZE, &old);
    cr_assert(eq(int, setrlimit(RLIMIT_FSIZE, &lim), 0));
    int rc = tg_safetensors_save(b, path);
    setrlimit(RLIMIT_FSIZE, &old);
    cr_assert(eq(int, rc, TG_EIO), "%s", tg_error_message());
    cr_assert(eq(dbl, first_value(path), 1.0), "old file intact");
    cr_assert(eq(int, th_tmp_dir_count(), 1), "temporary file removed");
    tg_st_free(a);
    tg_st_free(b);
}

/* A writer killed before it finishes (here: a child that writes and exits
 * without tg__atomic_finish) leaves the old file, and, where the file system
 * has O_TMPFILE, no temporary file: it has no name until finish links it. */
Test(safetensors, a_writer_killed_midway_leaves_no_temporary)
{
    tg_st_file *a = file_with(1.0, 4);
    char path[256];
    th_tmp_path(path, sizeof path, "x.safetensors");
    cr_assert(eq(int, tg_safetensors_save(a, path), 0));
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        FILE *f = NULL;
        char *tmp = NULL;
        if (tg__atomic_open(&f, &tmp, "test", path) < 0) _exit(2);
        static const char junk[8192];
        fwrite(junk, 1, sizeof junk, f);
        fflush(f);
        _exit(0);   /* as a kill: no finish, no cleanup */
    }
    int status = 0;
    cr_assert(eq(int, (int)waitpid(pid, &status, 0), (int)pid));
    cr_assert(eq(int, WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0));
    cr_assert(eq(dbl, first_value(path), 1.0), "old file intact");
    char dir[256];
    th_tmp_path(dir, sizeof dir, "");
    const int probe = open(dir, O_TMPFILE | O_WRONLY, 0600);
    if (probe >= 0) {
        close(probe);
        cr_assert(eq(int, th_tmp_dir_count(), 1), "an unnamed temporary file left a name");
    } else {
        th_not_run("a killed writer leaving no temporary: this folder's file system has no "
                   "O_TMPFILE, so the temporary is named from the start");
        cr_assert(eq(int, th_tmp_dir_count(), 2));
    }
    tg_st_free(a);
}

Test(safetensors, save_over_a_directory_fails_and_cleans_up)
{
    tg_st_file *a = file_with(1.0, 4);
    char path[256];
    th_tmp_path(path, sizeof path, "sub");
    cr_assert(eq(int, mkdir(path, 0755), 0));
    cr_assert(eq(int, tg_safetensors_save(a, path), TG_EIO));
    cr_assert(eq(int, th_tmp_dir_count(), 1), "only the directory");
    struct stat st;
    cr_assert(eq(int, stat(path, &st), 0));
    cr_assert(eq(int, S_ISDIR(st.st_mode) ? 1 : 0, 1));
    tg_st_free(a);
}
