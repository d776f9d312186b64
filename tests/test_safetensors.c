/* Tests of the safetensors reader/writer and the JSON parser under it. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include <dirent.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "internal.h"
#include "io/json.h"
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

/* Bytes of a safetensors file made from a header text and n data bytes
 * (data[i] = i), the way the golden script writes them: u64 LE size, JSON
 * padded with spaces to a multiple of 8, data. */
static unsigned char *make_bytes(const char *header, size_t ndata, size_t *len)
{
    size_t h = strlen(header), hp = (h + 7) / 8 * 8;
    *len = 8 + hp + ndata;
    unsigned char *b = malloc(*len);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hp >> (8 * i));
    memcpy(b + 8, header, h);
    memset(b + 8 + h, ' ', hp - h);
    for (size_t i = 0; i < ndata; i++) b[8 + hp + i] = (unsigned char)i;
    return b;
}

static tg_st_file *const UNTOUCHED = (tg_st_file *)&th_tmp_dir;

/* Parses exactly len bytes from a private copy (so ASan sees any overread)
 * and asserts TG_EFORMAT with *out untouched. */
static void expect_format_error(const unsigned char *bytes, size_t len, const char *why)
{
    unsigned char *copy = malloc(len ? len : 1);
    memcpy(copy, bytes, len);
    tg_st_file *f = UNTOUCHED;
    int rc = tg_safetensors_parse(&f, copy, len);
    cr_assert(eq(int, rc, TG_EFORMAT), "%s: rc=%d (%s)", why, rc, tg_error_message());
    cr_assert(f == UNTOUCHED, "%s: *out was changed", why);
    cr_assert(strlen(tg_error_message()) > 0, "%s: no message", why);
    free(copy);
}

static void expect_header_error(const char *header, size_t ndata, const char *why)
{
    size_t len;
    unsigned char *b = make_bytes(header, ndata, &len);
    expect_format_error(b, len, why);
    free(b);
}

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

Test(safetensors, golden_script_format_parses)
{
    /* As scripts/make_goldens.py writes: tensors in order, __metadata__ last,
     * compact separators.  Data bytes: 1.0f, -2.5f, then i64 7. */
    const char *hdr = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"n\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[8,16]},"
                      "\"__metadata__\":{\"op\":\"conv2d\",\"padding\":\"1\"}}";
    size_t len;
    unsigned char *b = make_bytes(hdr, 16, &len);
    size_t data = len - 16;
    float w[2] = {1.0f, -2.5f};
    int64_t n = 7;
    memcpy(b + data, w, 8);
    memcpy(b + data + 8, &n, 8);
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_safetensors_parse(&f, b, len), 0), "%s", tg_error_message());
    cr_assert(eq(int, tg_st_count(f), 2));
    const char *name;
    tg_tensor *t;
    tg_st_at(f, 0, &name, &t);
    cr_assert(eq(str, (char *)name, "w"));
    double v;
    tg_tensor_get_flat(t, 1, &v);
    cr_assert(eq(dbl, v, -2.5));
    tg_tensor_get_flat(tg_st_get(f, "n"), 0, &v);
    cr_assert(eq(dbl, v, 7.0));
    cr_assert(eq(int, tg_tensor_ndim(tg_st_get(f, "n")), 0));
    cr_assert(eq(str, (char *)tg_st_meta_get(f, "padding"), "1"));
    cr_assert(tg_st_meta_get(f, "nope") == NULL);
    tg_st_free(f);
    free(b);
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

/* ---- malformed input ---------------------------------------------------------- */

Test(safetensors, every_truncation_of_a_valid_file_is_rejected)
{
    tg_st_file *f = NULL;
    tg_st_new(&f);
    const int64_t sh[2] = {2, 3};
    tg_tensor *a = make_tensor(TG_BF16, 2, sh), *b = make_tensor(TG_I32, 2, sh);
    tg_st_set(f, "a", a);
    tg_st_set(f, "b", b);
    tg_st_meta_set(f, "k", "v");
    char path[256];
    th_tmp_path(path, sizeof path, "trunc.safetensors");
    cr_assert(eq(int, tg_safetensors_save(f, path), 0));
    size_t len;
    unsigned char *bytes = read_file(path, &len);
    for (size_t l = 0; l < len; l++) {
        char why[32];
        snprintf(why, sizeof why, "prefix %zu", l);
        expect_format_error(bytes, l, why);
    }
    tg_st_file *g = NULL;
    cr_assert(eq(int, tg_safetensors_parse(&g, bytes, len), 0), "the full file parses");
    tg_st_free(g);
    free(bytes);
    tg_tensor_release(a);
    tg_tensor_release(b);
    tg_st_free(f);
}

Test(safetensors, bad_header_sizes_are_rejected)
{
    size_t len;
    unsigned char *b = make_bytes("{}", 0, &len);   /* header "{}      " */
    b[0] = (unsigned char)(len - 8 + 1);              /* one byte beyond the file */
    expect_format_error(b, len, "size > file");
    b[0] = 1;
    expect_format_error(b, len, "size < 2");
    b[0] = 0;
    expect_format_error(b, len, "size 0");
    b[0] = 8;
    b[7] = 0x80;                                      /* 2^63 + 8 */
    expect_format_error(b, len, "huge size");
    b[7] = 0;
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_safetensors_parse(&f, b, len), 0), "\"{}\" is a valid empty file");
    cr_assert(eq(int, tg_st_count(f), 0));
    tg_st_free(f);
    free(b);
}

Test(safetensors, header_size_over_100mb_is_rejected_without_reading)
{
    unsigned char b[16] = {0};
    uint64_t n = 100u * 1000u * 1000u + 1;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(n >> (8 * i));
    expect_format_error(b, sizeof b, "> 100 MB");
}

#define T_F32_2 "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"

Test(safetensors, bad_json_is_rejected_with_offset)
{
    static const char *const bad[] = {
        "{\"a\":",                                  /* truncated */
        "{\"a\":" T_F32_2 ",}",                      /* trailing comma */
        "{\"a\" " T_F32_2 "}",                       /* missing colon */
        "{'a':" T_F32_2 "}",                         /* single quotes */
        "{\"a\":" T_F32_2 "} x",                     /* trailing garbage */
        "{\"a\":" T_F32_2 "}{}",                     /* two values */
        "[1, 2]",                                   /* not an object */
        "{\"__metadata__\":{\"k\":\"\\ud800\"}}",   /* lone surrogate */
        "{\"__metadata__\":{\"k\":\"a\\qb\"}}",     /* bad escape */
        "{\"__metadata__\":{\"k\":\"\xc0\xaf\"}}",  /* overlong UTF-8 */
        "{\"__metadata__\":{\"k\":\"a\tb\"}}",      /* raw control character */
        "{\"__metadata__\":{\"k\":\"\\u0000\"}}",   /* NUL */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", /* leading zero */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]} /* c */}",
        "{\"a\":tru}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char why[32];
        snprintf(why, sizeof why, "bad json #%zu", i);
        expect_header_error(bad[i], 8, why);
        cr_assert(strstr(tg_error_message(), "byte") != NULL, "%s", tg_error_message());
    }
}

Test(safetensors, deep_nesting_is_rejected)
{
    char hdr[600] = "{\"__metadata__\":";
    size_t n = strlen(hdr);
    for (int i = 0; i < 200; i++) hdr[n++] = '[';
    for (int i = 0; i < 200; i++) hdr[n++] = ']';
    hdr[n++] = '}';
    hdr[n] = '\0';
    expect_header_error(hdr, 0, "deep nesting");
    cr_assert(strstr(tg_error_message(), "nesting") != NULL, "%s", tg_error_message());
}

Test(safetensors, invalid_tensor_entries_are_rejected)
{
    static const struct { const char *hdr; size_t ndata; const char *needle; } bad[] = {
        {"{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2, "F8_E4M3"},
        {"{\"a\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "f32"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 12, "need"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}", 8, "data size"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "begin"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", 8, "begin"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "data_offsets"},
        {"{\"a\":" T_F32_2 ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
         12, "overlap"},
        {"{\"a\":" T_F32_2 ",\"a\":" T_F32_2 "}", 8, "duplicate"},
        {"{\"a\":" T_F32_2 ",\"__metadata__\":{\"k\":1}}", 8, "string"},
        {"{\"__metadata__\":[\"k\"]}", 0, "object"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1,
         "rank"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0, "shape[0]"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1.0],\"data_offsets\":[0,1]}}", 1, "shape[0]"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":2,\"data_offsets\":[0,2]}}", 2, "shape"},
        {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,2]}}", 2, "dtype"},
        {"{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,2]}}", 2, "shape"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[2]}}", 2, "data_offsets"},
        {"{\"a\":[1]}", 0, "object"},
        /* 2^32 * 2^32 * 8 bytes overflows 64 bits */
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}",
         0, "too large"},
        /* empty, but its first stride would be 2^80 */
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1099511627776,0,1099511627776],"
         "\"data_offsets\":[0,0]}}", 0, "shape (1099511627776, 0, 1099511627776) is too large"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char why[32];
        snprintf(why, sizeof why, "entry #%zu", i);
        expect_header_error(bad[i].hdr, bad[i].ndata, why);
        cr_assert(strstr(tg_error_message(), bad[i].needle) != NULL, "#%zu: %s", i,
                  tg_error_message());
    }
}

Test(safetensors, empty_tensors_and_holes_are_accepted)
{
    /* An empty tensor may sit anywhere (it occupies no bytes), and a zero
     * extent makes any other extent irrelevant. */
    const char *hdr = "{\"a\":" T_F32_2 ","
                      "\"e\":{\"dtype\":\"F64\",\"shape\":[0,1000000],\"data_offsets\":[4,4]}}";
    size_t len;
    unsigned char *b = make_bytes(hdr, 12, &len);
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_safetensors_parse(&f, b, len), 0), "%s", tg_error_message());
    cr_assert(eq(i64, tg_tensor_numel(tg_st_get(f, "e")), 0));
    tg_st_free(f);
    free(b);
}

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

Test(safetensors, save_into_missinth_tmp_directory_fails_and_leaves_nothing)
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

/* ---- fuzz --------------------------------------------------------------------- */

Test(safetensors, random_header_corruption_never_crashes)
{
    tg_st_file *f = NULL;
    tg_st_new(&f);
    const int64_t sh[2] = {3, 2}, sh1[1] = {5};
    tg_tensor *a = make_tensor(TG_F16, 2, sh), *b = make_tensor(TG_I64, 1, sh1);
    tg_st_set(f, "alpha", a);
    tg_st_set(f, "beta", b);
    tg_st_meta_set(f, "note", "caf\xc3\xa9 \"q\"");
    char path[256];
    th_tmp_path(path, sizeof path, "fuzz.safetensors");
    cr_assert(eq(int, tg_safetensors_save(f, path), 0));
    size_t len;
    unsigned char *orig = read_file(path, &len);
    uint64_t hn = 0, seed = 0x9E3779B97F4A7C15u;
    for (int i = 7; i >= 0; i--) hn = hn << 8 | orig[i];
    unsigned char *buf = malloc(len);
    int ok = 0;
    for (int it = 0; it < 2000; it++) {
        memcpy(buf, orig, len);
        int flips = 1 + (int)(th_xorshift64(&seed) % 3);
        for (int k = 0; k < flips; k++) {
            size_t at = 8 + th_xorshift64(&seed) % hn;
            buf[at] ^= (unsigned char)(1u << (th_xorshift64(&seed) % 8));
        }
        tg_st_file *g = NULL;
        int rc = tg_safetensors_parse(&g, buf, len);
        cr_assert(rc == 0 || rc == TG_EFORMAT, "iteration %d: rc=%d", it, rc);
        cr_assert(rc == 0 || g == NULL);
        ok += rc == 0;
        tg_st_free(g);
    }
    cr_log_info("%d of 2000 corrupted headers still parsed", ok);
    free(buf);
    free(orig);
    tg_tensor_release(a);
    tg_tensor_release(b);
    tg_st_free(f);
}

/* ---- the JSON parser directly ---------------------------------------------------- */

Test(safetensors, json_numbers_strings_and_offsets)
{
    const char *doc = " {\"i\": -9223372036854775808, \"big\": 9223372036854775808, "
                      "\"d\": -1.5e2, \"s\": \"\\u00e9\\ud83d\\ude00\\n\", \"a\": [true, false, null]} ";
    tg__json *v = NULL;
    cr_assert(eq(int, tg__json_parse(&v, doc, strlen(doc), "t"), 0), "%s", tg_error_message());
    const tg__json *i = tg__json_get(v, "i"), *big = tg__json_get(v, "big");
    cr_assert(eq(int, (int)i->type, TG__JSON_INT));
    cr_assert(eq(i64, i->u.i, INT64_MIN));
    cr_assert(eq(int, (int)big->type, TG__JSON_DOUBLE), "beyond int64 becomes a double");
    cr_assert(eq(dbl, big->u.d, 9223372036854775808.0));
    cr_assert(eq(dbl, tg__json_get(v, "d")->u.d, -150.0));
    /* U+00E9 is C3 A9; U+1F600 (pair D83D DE00) is F0 9F 98 80. */
    cr_assert(eq(str, tg__json_get(v, "s")->u.str.s, "\xc3\xa9\xf0\x9f\x98\x80\n"));
    const tg__json *a = tg__json_get(v, "a");
    cr_assert(eq(sz, a->u.arr.n, 3));
    cr_assert(a->u.arr.items[0]->u.b && !a->u.arr.items[1]->u.b);
    cr_assert(eq(int, (int)a->u.arr.items[2]->type, TG__JSON_NULL));
    cr_assert(eq(sz, tg__json_get(v, "d")->offset, (size_t)(strstr(doc, "-1.5e2") - doc)));
    tg__json_free(v);

    tg__json *w = (tg__json *)doc;
    const char *bad = "{\"x\": [1, 2,, 3]}";
    cr_assert(eq(int, tg__json_parse(&w, bad, strlen(bad), "t"), TG_EFORMAT));
    cr_assert(w == (tg__json *)doc);
    cr_assert(strstr(tg_error_message(), "at byte 12") != NULL, "%s", tg_error_message());
}

Test(safetensors, json_writer_escapes_round_trip)
{
    const char *s = "a\"b\\c\n\t\x01\x1f \xc3\xa9";
    tg__buf b = {0};
    cr_assert(eq(int, tg__json_write_string(&b, s), 0));
    cr_assert(eq(str, b.data, "\"a\\\"b\\\\c\\n\\t\\u0001\\u001f \xc3\xa9\""));
    tg__json *v = NULL;
    cr_assert(eq(int, tg__json_parse(&v, b.data, b.len, "t"), 0));
    cr_assert(eq(str, v->u.str.s, (char *)s));
    tg__json_free(v);
    tg__buf_free(&b);
}

/* ---- out of memory inside uthash (src/hash.h) ------------------------------------ */

/* Each test below fails the uthash allocations of one call one at a time
 * (tg__hash_fail_after(k): the (k+1)-th fails), for k = 0, 1, ... until the
 * call makes fewer than k + 1, and then checks the one run that succeeded.
 * Every failure must be TG_ENOMEM with the caller's objects as they were; a
 * leak shows up in the sanitizer build. */

/* True when the failure set by tg__hash_fail_after happened (and clears it). */
static bool hash_failed(void) { return tg__hash_fail_after(-1) < 0; }

enum { JSON_KEYS = 3000 };

/* {"k0": 0, "k1": 7, ...}: one object whose key index doubles its buckets
 * several times. */
Test(safetensors, json_object_out_of_memory_is_enomem)
{
    tg__buf doc = {0};
    cr_assert(eq(int, tg__buf_append(&doc, "{", 1), 0));
    for (int i = 0; i < JSON_KEYS; i++)
        cr_assert(eq(int, tg__buf_printf(&doc, "%s\"k%d\": %d", i ? ", " : "", i, 7 * i), 0));
    cr_assert(eq(int, tg__buf_append(&doc, "}", 1), 0));
    int k = 0;
    for (;; k++) {
        tg__json *v = (tg__json *)&doc;
        tg__hash_fail_after(k);
        int rc = tg__json_parse(&v, doc.data, doc.len, "t");
        if (!hash_failed()) {
            cr_assert(eq(int, rc, 0), "k=%d: %s", k, tg_error_message());
            cr_assert(eq(sz, v->u.obj.n, JSON_KEYS));
            for (int i = 0; i < JSON_KEYS; i++) {
                char key[16];
                snprintf(key, sizeof key, "k%d", i);
                const tg__json *x = tg__json_get(v, key);
                cr_assert(x != NULL && x->u.i == 7 * i, "k=%d: key %s", k, key);
            }
            tg__json_free(v);
            break;
        }
        cr_assert(eq(int, rc, TG_ENOMEM), "k=%d: rc=%d (%s)", k, rc, tg_error_message());
        cr_assert(v == (tg__json *)&doc, "k=%d: *out was changed", k);
        th_expect_in(tg_error_message(), "t: out of memory indexing an object's keys at byte");
    }
    /* the table, its first buckets, then at least three doublings */
    cr_assert(k >= 5, "%d uthash allocations for %d keys", k, JSON_KEYS);
    tg__buf_free(&doc);
}

enum { ST_TENSORS = 1000, ST_META = 20 };

static const char *nth_name(char *buf, size_t n, const char *prefix, int i)
{
    snprintf(buf, n, "%s%d", prefix, i);
    return buf;
}

/* ST_TENSORS scalars "w<i>" = i and ST_META metadata "m<i>" = "v<i>". */
static void check_many(const tg_st_file *f)
{
    char name[32], value[32];
    cr_assert(eq(int, tg_st_count(f), ST_TENSORS));
    cr_assert(eq(int, tg_st_meta_count(f), ST_META));
    for (int i = 0; i < ST_TENSORS; i++) {
        const char *at = NULL;
        const tg_tensor *t = tg_st_get(f, nth_name(name, sizeof name, "w", i));
        double x = -1;
        cr_assert(t != NULL && tg_tensor_get_flat(t, 0, &x) == 0 && x == i, "%s", name);
        cr_assert(eq(int, tg_st_at(f, i, &at, NULL), 0));
        cr_assert(eq(str, (char *)at, name));
    }
    for (int i = 0; i < ST_META; i++) {
        const char *v = tg_st_meta_get(f, nth_name(name, sizeof name, "m", i));
        cr_assert(v != NULL, "%s", name);
        cr_assert(eq(str, (char *)v, (char *)nth_name(value, sizeof value, "v", i)));
    }
}

/* Loading a file of many tensors: the header's JSON objects (the root, one
 * per tensor, the metadata) and the file's indexes by name all allocate. */
Test(safetensors, load_out_of_memory_is_enomem)
{
    char path[256], name[32], value[32];
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_st_new(&f), 0));
    for (int i = 0; i < ST_TENSORS; i++) {
        tg_tensor *t = NULL;
        cr_assert(eq(int, tg_tensor_scalar(&t, TG_F32, i), 0));
        cr_assert(eq(int, tg_st_set(f, nth_name(name, sizeof name, "w", i), t), 0));
        tg_tensor_release(t);
    }
    for (int i = 0; i < ST_META; i++)
        cr_assert(eq(int, tg_st_meta_set(f, nth_name(name, sizeof name, "m", i),
                                         nth_name(value, sizeof value, "v", i)), 0));
    th_tmp_path(path, sizeof path, "many.safetensors");
    cr_assert(eq(int, tg_safetensors_save(f, path), 0), "%s", tg_error_message());
    tg_st_free(f);
    int k = 0;
    for (;; k++) {
        tg_st_file *g = UNTOUCHED;
        tg__hash_fail_after(k);
        int rc = tg_safetensors_load(&g, path);
        if (!hash_failed()) {
            cr_assert(eq(int, rc, 0), "k=%d: %s", k, tg_error_message());
            check_many(g);
            tg_st_free(g);
            break;
        }
        cr_assert(eq(int, rc, TG_ENOMEM), "k=%d: rc=%d (%s)", k, rc, tg_error_message());
        cr_assert(g == UNTOUCHED, "k=%d: *out was changed", k);
        th_expect_in(tg_error_message(), "out of memory indexing");
    }
    cr_assert(k >= 2 * ST_TENSORS + 10, "%d uthash allocations", k);
}

/* tg_st_set / tg_st_meta_set with the first uthash allocation of each call
 * failing: the table's, then each doubling of its buckets.  The set is left
 * as it was (the tensor not retained), and the same call then succeeds. */
static void fill_failing_each_growth(bool meta)
{
    tg_st_file *f = NULL;
    tg_tensor *t = NULL;
    char name[32];
    cr_assert(eq(int, tg_st_new(&f), 0));
    cr_assert(eq(int, tg_tensor_scalar(&t, TG_F32, 1.5), 0));
    int failed = 0;
    for (int i = 0; i < ST_TENSORS; i++) {
        nth_name(name, sizeof name, meta ? "m" : "w", i);
        tg__hash_fail_after(0);
        int rc = meta ? tg_st_meta_set(f, name, "v") : tg_st_set(f, name, t);
        if (hash_failed()) {
            failed++;
            cr_assert(eq(int, rc, TG_ENOMEM), "%s: rc=%d (%s)", name, rc, tg_error_message());
            th_expect_in(tg_error_message(), "safetensors: out of memory indexing the name");
            cr_assert(eq(int, meta ? tg_st_meta_count(f) : tg_st_count(f), i));
            cr_assert(tg_st_get(f, name) == NULL && tg_st_meta_get(f, name) == NULL);
            cr_assert(eq(int, t->refcount, 1 + (meta ? 0 : i)));
            rc = meta ? tg_st_meta_set(f, name, "v") : tg_st_set(f, name, t);
        }
        cr_assert(eq(int, rc, 0), "%s: %s", name, tg_error_message());
    }
    for (int i = 0; i < ST_TENSORS; i++) {
        nth_name(name, sizeof name, meta ? "m" : "w", i);
        cr_assert(meta ? tg_st_meta_get(f, name) != NULL : tg_st_get(f, name) == t, "%s", name);
    }
    cr_assert(eq(int, t->refcount, 1 + (meta ? 0 : ST_TENSORS)));
    cr_assert(failed >= 4, "%d failures: the table, then at least three doublings", failed);
    tg_st_free(f);
    tg_tensor_release(t);
}

Test(safetensors, st_set_out_of_memory_leaves_the_set_unchanged)
{
    fill_failing_each_growth(false);
    fill_failing_each_growth(true);
}
