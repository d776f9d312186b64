/* The safetensors parser on hand-made bytes: the golden script's format,
 * then malformed headers, sizes and entries, every truncation of a valid
 * file and random corruption of its header, each rejected with TG_EFORMAT
 * and *out untouched. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/nn.h"
#include "tapegrad/safetensors.h"

/* ---- helpers ------------------------------------------------------------- */

static void make_dir(void) { th_tmp_dir_make("tg_stp_"); }

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

/* The bytes of f saved as th_tmp_dir/name (*len of them). */
static unsigned char *saved_bytes(const tg_st_file *f, const char *name, size_t *len)
{
    char path[256];
    th_tmp_path(path, sizeof path, name);
    cr_assert(eq(int, tg_safetensors_save(f, path), 0), "%s", tg_error_message());
    unsigned char *b = (unsigned char *)th_read_file(path, len);
    cr_assert(b != NULL, "cannot read %s", path);
    return b;
}

TestSuite(safetensors_parse, .init = make_dir, .fini = th_tmp_dir_remove);

/* ---- what the golden script writes --------------------------------------------- */

Test(safetensors_parse, golden_script_format_parses)
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

static int holder_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    (void)m;
    *y = tg_tensor_retain(x);
    return 0;
}
static const tg_module_vtable holder_vt = {.type_name = "Holder", .forward = holder_forward};

/* A PyTorch checkpoint may hold dtypes tapegrad has no tensors of (a bool
 * mask, a u64 counter): the file loads, those entries are listed as
 * skipped, and a strict state-dict load that wants one says why. */
Test(safetensors_parse, entries_of_other_dtypes_are_skipped)
{
    const char *hdr = "{\"mask\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[0,3]},"
                      "\"weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]},"
                      "\"count\":{\"dtype\":\"U64\",\"shape\":[],\"data_offsets\":[16,24]},"
                      "\"f8\":{\"dtype\":\"F8_E4M3\",\"shape\":[2,2],\"data_offsets\":[12,16]}}";
    size_t len;
    unsigned char *b = make_bytes(hdr, 24, &len);
    float w[2] = {0.5f, -1.5f};
    memcpy(b + len - 24 + 4, w, 8);
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_safetensors_parse(&f, b, len), 0), "%s", tg_error_message());
    cr_assert(eq(int, tg_st_count(f), 1));
    double v;
    cr_assert(eq(int, tg_tensor_get_flat(tg_st_get(f, "weight"), 1, &v), 0));
    cr_assert(eq(dbl, v, -1.5));
    cr_assert(eq(int, tg_st_skipped_count(f), 3));
    static const char *const names[3] = {"mask", "count", "f8"};
    static const char *const dts[3] = {"BOOL", "U64", "F8_E4M3"};
    for (int i = 0; i < 3; i++) {
        const char *name, *dt;
        cr_assert(eq(int, tg_st_skipped_at(f, i, &name, &dt), 0));
        cr_assert(eq(str, (char *)name, (char *)names[i]));
        cr_assert(eq(str, (char *)dt, (char *)dts[i]));
        cr_assert(eq(str, (char *)tg_st_skipped_dtype(f, names[i]), (char *)dts[i]));
    }
    cr_assert(tg_st_get(f, "mask") == NULL);
    cr_assert(tg_st_skipped_dtype(f, "weight") == NULL);
    cr_assert(eq(int, tg_st_skipped_at(f, 3, NULL, NULL), TG_EINVAL));
    /* a module whose state dict has a key the file holds as BOOL */
    tg_module *m = NULL;
    cr_assert(eq(int, tg_module_new(&m, &holder_vt, NULL), 0), "%s", tg_error_message());
    tg_tensor *p = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&p, TG_F32, 1, (int64_t[]){3}), 0));
    cr_assert(eq(int, tg_module_add_buffer(m, "mask", p), 0));
    cr_assert(eq(int, tg_module_load_state_dict(m, f, NULL, true), TG_EDTYPE));
    th_expect_in(tg_error_message(), "key 'mask' is stored as BOOL, a dtype tapegrad does not load");
    cr_assert(eq(int, tg_module_load_state_dict(m, f, NULL, false), 0), "%s", tg_error_message());
    tg_module_release(m);
    tg_st_free(f);
    free(b);
}

/* ---- malformed input ---------------------------------------------------------- */

Test(safetensors_parse, every_truncation_of_a_valid_file_is_rejected)
{
    tg_st_file *f = NULL;
    tg_st_new(&f);
    const int64_t sh[2] = {2, 3};
    tg_tensor *a = th_arange(TG_BF16, 2, sh), *b = th_arange(TG_I32, 2, sh);
    tg_st_set(f, "a", a);
    tg_st_set(f, "b", b);
    tg_st_meta_set(f, "k", "v");
    size_t len;
    unsigned char *bytes = saved_bytes(f, "trunc.safetensors", &len);
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

Test(safetensors_parse, bad_header_sizes_are_rejected)
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

Test(safetensors_parse, header_size_over_100mb_is_rejected_without_reading)
{
    unsigned char b[16] = {0};
    uint64_t n = 100u * 1000u * 1000u + 1;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(n >> (8 * i));
    expect_format_error(b, sizeof b, "> 100 MB");
}

#define T_F32_2 "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"

Test(safetensors_parse, bad_json_is_rejected_with_offset)
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

Test(safetensors_parse, deep_nesting_is_rejected)
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

Test(safetensors_parse, invalid_tensor_entries_are_rejected)
{
    static const struct { const char *hdr; size_t ndata; const char *needle; } bad[] = {
        {"{\"a\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2,
         "dtype \"F4\" is not a safetensors dtype"},
        /* a skipped dtype is checked as the others: I16 x 2 needs 4 bytes */
        {"{\"a\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2, "need 4"},
        {"{\"a\":" T_F32_2 ",\"m\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[6,8]}}",
         8, "overlap"},
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

Test(safetensors_parse, empty_tensors_and_holes_are_accepted)
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

/* ---- fuzz --------------------------------------------------------------------- */

Test(safetensors_parse, random_header_corruption_never_crashes)
{
    tg_st_file *f = NULL;
    tg_st_new(&f);
    const int64_t sh[2] = {3, 2}, sh1[1] = {5};
    tg_tensor *a = th_arange(TG_F16, 2, sh), *b = th_arange(TG_I64, 1, sh1);
    tg_st_set(f, "alpha", a);
    tg_st_set(f, "beta", b);
    tg_st_meta_set(f, "note", "caf\xc3\xa9 \"q\"");
    size_t len;
    unsigned char *orig = saved_bytes(f, "fuzz.safetensors", &len);
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
