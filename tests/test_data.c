/* Tests of the IDX reader and the Fashion-MNIST files (datasets and batch
 * loaders: test_data_loader.c). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/data.h"

/* ---- helpers ------------------------------------------------------------- */

static void make_dir(void) { th_tmp_dir_make("tg_data_"); }

TestSuite(data, .init = make_dir, .fini = th_tmp_dir_remove);

static const char *in_dir(char *buf, const char *name)
{
    return th_tmp_path(buf, 256, name);
}

/* Writes bytes to path, through zlib's gzip writer when gz. */
static void write_file(const char *path, const void *bytes, size_t n, bool gz)
{
    if (gz) {
        gzFile f = gzopen(path, "wb");
        cr_assert(f != NULL);
        cr_assert(eq(int, gzwrite(f, bytes, (unsigned)n), (int)n));
        cr_assert(eq(int, gzclose(f), Z_OK));
    } else {
        FILE *f = fopen(path, "wb");
        cr_assert(f != NULL);
        cr_assert(eq(sz, fwrite(bytes, 1, n, f), n));
        fclose(f);
    }
}

/* An IDX image: header (type, ndim, big-endian dims) then `data` verbatim. */
static size_t make_idx(uint8_t *buf, uint8_t type, int ndim, const uint32_t *dims,
                       const void *data, size_t data_len)
{
    size_t k = 0;
    buf[k++] = 0;
    buf[k++] = 0;
    buf[k++] = type;
    buf[k++] = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++) {
        buf[k++] = (uint8_t)(dims[i] >> 24);
        buf[k++] = (uint8_t)(dims[i] >> 16);
        buf[k++] = (uint8_t)(dims[i] >> 8);
        buf[k++] = (uint8_t)dims[i];
    }
    memcpy(buf + k, data, data_len);
    return k + data_len;
}

/* ---- IDX ------------------------------------------------------------------- */

static void check_u8_roundtrip(bool gz)
{
    uint8_t data[24], file[64];
    for (int i = 0; i < 24; i++) data[i] = (uint8_t)(i * 37 % 256);
    uint32_t dims[3] = {3, 2, 4};
    size_t n = make_idx(file, 0x08, 3, dims, data, 24);
    char p[256];
    write_file(in_dir(p, gz ? "u8.idx.gz" : "u8.idx"), file, n, gz);
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_idx_load(&t, p), 0), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_dtype(t), TG_U8));
    cr_assert(eq(int, tg_tensor_ndim(t), 3));
    for (int d = 0; d < 3; d++) cr_assert(eq(i64, tg_tensor_dim(t, d), dims[d]));
    cr_assert(eq(int, memcmp(tg_tensor_cdata(t), data, 24), 0));
    tg_tensor_release(t);
}

Test(data, idx_u8_plain_and_gzip)
{
    check_u8_roundtrip(false);
    check_u8_roundtrip(true);
}

/* Each multi-byte type, written big-endian by hand, comes back as its value. */
Test(data, idx_types_big_endian)
{
    char p[256];
    uint8_t file[64];
    uint32_t dims[1] = {2};
    tg_tensor *t = NULL;
    double v[2];
    struct {
        uint8_t type;
        uint8_t bytes[16];
        size_t len;
        tg_dtype dt;
        double want[2];
    } cases[] = {
        {0x09, {0xFF, 0x80}, 2, TG_I8, {-1, -128}},
        {0x0B, {0xFE, 0xD4, 0x7F, 0xFF}, 4, TG_I32, {-300, 32767}},
        {0x0C, {0x80, 0, 0, 0, 0, 1, 0, 1}, 8, TG_I32, {-2147483648.0, 65537}},
        /* 1.5f = 0x3FC00000, -2.25f = 0xC0100000 */
        {0x0D, {0x3F, 0xC0, 0, 0, 0xC0, 0x10, 0, 0}, 8, TG_F32, {1.5, -2.25}},
        /* 0.1 = 0x3FB999999999999A, -3.0 = 0xC008000000000000 */
        {0x0E, {0x3F, 0xB9, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9A, 0xC0, 0x08}, 16, TG_F64,
         {0.1, -3.0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t n = make_idx(file, cases[c].type, 1, dims, cases[c].bytes, cases[c].len);
        write_file(in_dir(p, "typed.idx"), file, n, c % 2 == 1);
        cr_assert(eq(int, tg_idx_load(&t, p), 0), "case %zu: %s", c, tg_error_message());
        cr_assert(eq(int, tg_tensor_dtype(t), cases[c].dt), "case %zu", c);
        cr_assert(eq(int, tg_tensor_to_doubles(t, v, 2), 0));
        cr_assert(eq(dbl, v[0], cases[c].want[0]), "case %zu", c);
        cr_assert(eq(dbl, v[1], cases[c].want[1]), "case %zu", c);
        tg_tensor_release(t);
        t = NULL;
    }
}

/* Loads p expecting status and a message containing `msg`; *out must stay
 * untouched. */
static void expect_fail_msg(const char *p, int status, const char *what, const char *msg)
{
    tg_tensor *sentinel = (tg_tensor *)&th_tmp_dir, *t = sentinel;
    cr_assert(eq(int, tg_idx_load(&t, p), status), "%s: got '%s'", what, tg_error_message());
    cr_assert(t == sentinel, "%s: *out changed", what);
    cr_assert(strstr(tg_error_message(), msg) != NULL, "%s: message '%s' lacks '%s'", what,
              tg_error_message(), msg);
}

Test(data, idx_corrupt_headers_rejected)
{
    char p[256];
    uint8_t file[128], data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint32_t dims[9] = {2, 4, 1, 1, 1, 1, 1, 1, 1};
    for (int gz = 0; gz < 2; gz++) {
        size_t n = make_idx(file, 0x08, 2, dims, data, 8);
        file[1] = 1;
        write_file(in_dir(p, "bad"), file, n, gz);
        expect_fail_msg(p, TG_EFORMAT, "bad magic", "bad magic");
        n = make_idx(file, 0x0A, 2, dims, data, 8);
        write_file(p, file, n, gz);
        expect_fail_msg(p, TG_EFORMAT, "unknown type", "unknown type");
        n = make_idx(file, 0x08, 0, dims, data, 8);
        write_file(p, file, n, gz);
        expect_fail_msg(p, TG_EFORMAT, "ndim 0", "ndim=0");
        n = make_idx(file, 0x08, 9, dims, data, 8);
        write_file(p, file, n, gz);
        expect_fail_msg(p, TG_EFORMAT, "ndim 9", "ndim=9");
        n = make_idx(file, 0x08, 2, dims, data, 8);
        write_file(p, file, 6, gz);
        expect_fail_msg(p, TG_EFORMAT, "truncated dims", "truncated dimensions");
        write_file(p, file, 2, gz);
        expect_fail_msg(p, TG_EFORMAT, "truncated magic", "truncated header");
        write_file(p, file, 0, gz);
        expect_fail_msg(p, TG_EFORMAT, "empty file", "truncated header");
    }
}

Test(data, idx_truncated_trailing_overflow_rejected)
{
    char p[256];
    uint8_t file[128], data[12] = {0};
    uint32_t dims[8] = {3, 4};
    for (int gz = 0; gz < 2; gz++) {
        size_t n = make_idx(file, 0x08, 2, dims, data, 12);
        write_file(in_dir(p, "bad"), file, n - 1, gz);
        expect_fail_msg(p, TG_EFORMAT, "one byte short", "fewer bytes");
        dims[1] = 3;
        n = make_idx(file, 0x08, 2, dims, data, 12);   /* 9 bytes claimed, 12 present */
        write_file(p, file, n, gz);
        expect_fail_msg(p, TG_EFORMAT, "trailing garbage", "trailing bytes");
        dims[1] = 4;
        /* 8 dims of 2^32-1: the product overflows 64 bits. */
        uint32_t big[8];
        for (int i = 0; i < 8; i++) big[i] = 0xFFFFFFFFu;
        n = make_idx(file, 0x08, 8, big, data, 12);
        write_file(p, file, n, gz);
        expect_fail_msg(p, TG_EFORMAT, "dims overflow", "overflow");
        /* 2^32-1 f64 elements: no overflow but far more than the file holds. */
        n = make_idx(file, 0x0E, 1, big, data, 12);
        write_file(p, file, n, gz);
        expect_fail_msg(p, TG_EFORMAT, "huge claim", "fewer bytes");
    }
}

Test(data, idx_missing_file_and_corrupt_gzip)
{
    char p[256];
    expect_fail_msg(in_dir(p, "does-not-exist.gz"), TG_EIO, "missing file", "cannot open");
    expect_fail_msg(th_tmp_dir, TG_EIO, "a directory", "");
    /* A long incompressible payload, so the deflate stream has a middle to break. */
    enum { N = 4096 };
    uint8_t *file = malloc(N + 16), *gzbytes = malloc(2 * N + 64);
    uint32_t dims[1] = {N};
    uint32_t x = 12345;
    for (int i = 0; i < N; i++) file[8 + i] = (uint8_t)((x = x * 1103515245u + 12345u) >> 24);
    size_t n = make_idx(file, 0x08, 1, dims, file + 8, N);
    write_file(in_dir(p, "good.gz"), file, n, true);
    FILE *f = fopen(p, "rb");
    size_t gn = fread(gzbytes, 1, 2 * N + 64, f);
    fclose(f);
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_idx_load(&t, p), 0));   /* the intact file loads */
    tg_tensor_release(t);
    for (size_t k = 0; k < 8; k++) gzbytes[gn / 2 + k] ^= 0x5A;
    write_file(p, gzbytes, gn, false);
    expect_fail_msg(p, TG_EFORMAT, "flipped deflate bytes", "gzip");
    for (size_t k = 0; k < 8; k++) gzbytes[gn / 2 + k] ^= 0x5A;
    write_file(p, gzbytes, gn - 4, false);
    expect_fail_msg(p, TG_EFORMAT, "gzip cut in its trailer", "gzip");
    write_file(p, gzbytes, gn / 2, false);
    expect_fail_msg(p, TG_EFORMAT, "gzip cut in the middle", "gzip");
    free(file);
    free(gzbytes);
}

/* Big enough that the compressed data spans many reads: zlib's gzread took
 * such a file cut inside its 8-byte trailer for whole and never checked its
 * CRC.  Every cut and every changed trailer byte is an error now; a file of
 * two gzip members (as `cat a.gz b.gz` makes) is one stream of bytes. */
Test(data, idx_gzip_trailer_and_members_on_a_large_file)
{
    char p[256];
    enum { N = 1 << 20 };
    uint8_t *file = malloc(N + 16), *gzbytes = malloc(N + N / 2), *two = malloc(2 * N);
    cr_assert(file && gzbytes && two);
    uint32_t dims[1] = {N}, x = 777;
    for (int i = 0; i < N; i++) file[8 + i] = (uint8_t)((x = x * 1103515245u + 12345u) >> 24);
    const size_t n = make_idx(file, 0x08, 1, dims, file + 8, N);
    write_file(in_dir(p, "big.gz"), file, n, true);
    FILE *f = fopen(p, "rb");
    const size_t gn = fread(gzbytes, 1, N + N / 2, f);
    fclose(f);
    cr_assert(gn > 4 * 65536, "the compressed file (%zu bytes) is not large", gn);
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_idx_load(&t, p), 0), "%s", tg_error_message());
    cr_assert(memcmp(tg_tensor_cdata(t), file + 8, N) == 0);
    tg_tensor_release(t);
    char what[64];
    for (size_t cut = 1; cut <= 8; cut++) {
        write_file(p, gzbytes, gn - cut, false);
        snprintf(what, sizeof what, "cut %zu bytes from the end", cut);
        expect_fail_msg(p, TG_EFORMAT, what, "truncated gzip");
    }
    for (size_t k = 1; k <= 8; k++) {   /* CRC-32 (last 8..5), length (last 4..1) */
        gzbytes[gn - k] ^= 0x10;
        write_file(p, gzbytes, gn, false);
        gzbytes[gn - k] ^= 0x10;
        snprintf(what, sizeof what, "trailer byte %zu from the end changed", k);
        expect_fail_msg(p, TG_EFORMAT, what, "corrupt gzip");
    }
    memcpy(two, gzbytes, gn);   /* trailing bytes that are not a gzip member */
    memcpy(two + gn, "junk", 4);
    write_file(p, two, gn + 4, false);
    expect_fail_msg(p, TG_EFORMAT, "junk after the stream", "trailing bytes");
    /* the same IDX file as two members: header + first half, second half */
    char q[256];
    write_file(in_dir(q, "half1.gz"), file, n / 2, true);
    f = fopen(q, "rb");
    size_t n1 = fread(two, 1, 2 * N, f);
    fclose(f);
    write_file(q, file + n / 2, n - n / 2, true);
    f = fopen(q, "rb");
    size_t n2 = fread(two + n1, 1, 2 * N - n1, f);
    fclose(f);
    write_file(p, two, n1 + n2, false);
    cr_assert(eq(int, tg_idx_load(&t, p), 0), "two members: %s", tg_error_message());
    cr_assert(memcmp(tg_tensor_cdata(t), file + 8, N) == 0);
    tg_tensor_release(t);
    free(file), free(gzbytes), free(two);
}

/* A file that cannot seek (a pipe, as `--data <(...)` would give): the bytes
 * read to tell gzip from plain are not read twice or lost, in both forms. */
Test(data, idx_loads_from_a_pipe_plain_and_gzip)
{
    char p[256], src[256];
    uint8_t file[64], data[12];
    uint32_t dims[2] = {3, 4};
    for (int i = 0; i < 12; i++) data[i] = (uint8_t)(7 * i + 1);
    const size_t n = make_idx(file, 0x08, 2, dims, data, 12);
    for (int gz = 0; gz < 2; gz++) {
        write_file(in_dir(src, "src"), file, n, gz);
        in_dir(p, "fifo");
        unlink(p);
        cr_assert(eq(int, mkfifo(p, 0600), 0));
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {   /* the writer: the file's bytes into the pipe */
            FILE *in = fopen(src, "rb"), *out = fopen(p, "wb");
            int c;
            while (in && out && (c = fgetc(in)) != EOF) fputc(c, out);
            _exit(in && out && fclose(out) == 0 ? 0 : 1);
        }
        tg_tensor *t = NULL;
        int rc = tg_idx_load(&t, p);
        int status = 0;
        waitpid(pid, &status, 0);
        cr_assert(eq(int, rc, 0), "%s: %s", gz ? "gzip" : "plain", tg_error_message());
        const bool writer_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        cr_assert(writer_ok, "the writer process failed");
        cr_assert(eq(i64, tg_tensor_numel(t), 12));
        cr_assert(memcmp(tg_tensor_cdata(t), data, 12) == 0, "%s", gz ? "gzip" : "plain");
        tg_tensor_release(t);
        unlink(p);
    }
}

Test(data, idx_null_arguments)
{
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_idx_load(&t, NULL), TG_EINVAL));
    cr_assert(t == NULL);
    cr_assert(eq(int, tg_idx_load(NULL, "x"), TG_EINVAL));
}

/* ---- Fashion-MNIST ----------------------------------------------------------- */

/* A tiny MNIST-named pair in th_tmp_dir: n_img images (2, 2), n_lab labels, the
 * last of them max_label. */
static void write_mnist(const char *prefix, uint32_t n_img, uint32_t n_lab, uint8_t max_label)
{
    char p[256], name[64];
    uint8_t file[256], data[64];
    for (int i = 0; i < 64; i++) data[i] = (uint8_t)(i * 5);
    uint32_t dims[3] = {n_img, 2, 2};
    size_t n = make_idx(file, 0x08, 3, dims, data, 4 * n_img);
    snprintf(name, sizeof name, "%s-images-idx3-ubyte.gz", prefix);
    write_file(in_dir(p, name), file, n, true);
    for (uint32_t i = 0; i < n_lab; i++) data[i] = i + 1 == n_lab ? max_label : (uint8_t)(i % 10);
    n = make_idx(file, 0x08, 1, &n_lab, data, n_lab);
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", prefix);   /* plain: no .gz */
    write_file(in_dir(p, name), file, n, false);
}

Test(data, mnist_files_in_a_dir)
{
    write_mnist("train", 5, 5, 9);
    write_mnist("t10k", 3, 4, 9);
    tg_dataset *ds = NULL;
    cr_assert(eq(int, tg_fashion_mnist_load(&ds, th_tmp_dir, true), 0), "%s", tg_error_message());
    cr_assert(eq(i64, tg_dataset_size(ds), 5));
    cr_assert(eq(str, (char *)tg_dataset_class_name(ds, 1), "Trouser"));
    tg_dataset_release(ds);
    ds = NULL;
    cr_assert(eq(int, tg_fashion_mnist_load(&ds, th_tmp_dir, false), TG_EFORMAT));
    cr_assert(ds == NULL);
    write_mnist("t10k", 4, 4, 10);
    cr_assert(eq(int, tg_fashion_mnist_load(&ds, th_tmp_dir, false), TG_EFORMAT));
    char p[256];
    cr_assert(eq(int, tg_fashion_mnist_load(&ds, in_dir(p, "nope"), true), TG_EIO));
    cr_assert(ds == NULL);
    cr_assert(eq(str, (char *)tg_fashion_mnist_class_name(9), "Ankle boot"));
    cr_assert(tg_fashion_mnist_class_name(10) == NULL);
}

Test(data, fashion_mnist_test_split)
{
    struct stat st;
    if (stat(TG_FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz", &st) != 0)
        cr_skip("Fashion-MNIST not installed (apt install dataset-fashion-mnist)");
    tg_dataset *ds = NULL;
    cr_assert(eq(int, tg_fashion_mnist_load(&ds, NULL, false), 0), "%s", tg_error_message());
    cr_assert(eq(i64, tg_dataset_size(ds), 10000));
    cr_assert(eq(int, tg_dataset_num_classes(ds), 10));
    int64_t shape[3];
    tg_dataset_image_shape(ds, shape);
    cr_assert(eq(i64, shape[0], 1));
    cr_assert(eq(i64, shape[1], 28));
    cr_assert(eq(i64, shape[2], 28));
    tg_loader_options o = TG_LOADER_OPTIONS_INIT;
    o.batch_size = 1000;
    tg_loader *ld;
    cr_assert(eq(int, tg_loader_new(&ld, ds, &o), 0));
    tg_tensor *x, *y;
    int64_t per_class[10] = {0};
    float lo = 0, hi = 0;
    while (tg_loader_next(ld, &x, &y) == 1) {
        const float *dx = tg_tensor_cdata(x);
        const int64_t *dy = tg_tensor_cdata(y);
        for (int64_t i = 0; i < tg_tensor_numel(x); i++) {
            lo = dx[i] < lo ? dx[i] : lo;
            hi = dx[i] > hi ? dx[i] : hi;
        }
        for (int64_t i = 0; i < tg_tensor_dim(y, 0); i++) {
            cr_assert(dy[i] >= 0 && dy[i] <= 9);
            per_class[dy[i]]++;
        }
        tg_tensor_release(x);
        tg_tensor_release(y);
    }
    /* The test split is balanced: 1000 of each class. */
    for (int c = 0; c < 10; c++) cr_assert(eq(i64, per_class[c], 1000));
    cr_assert(eq(flt, lo, -1.0f));
    cr_assert(eq(flt, hi, 1.0f));
    tg_loader_free(ld);
    tg_dataset_release(ds);
}
