/* Helpers shared by the Criterion test files: what a test does not run,
 * random numbers, tensors, golden files, refusals and table rows (the
 * temporary directory, programs and files: helpers_files.c); see
 * helpers.h. */
#include "helpers.h"

#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <criterion/new/assert.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"
#include "tapegrad/registry.h"

#ifndef TG_SOURCE_ROOT
#define TG_SOURCE_ROOT "."
#endif

const char *th_isa_bound_note(void)
{
    static _Thread_local char note[160];
    const char *b = tg_cpu_isa_bound();
    if (!b) return "";
    snprintf(note, sizeof note,
             " [TG_MAX_ISA=%s is set: kernels past %s count as missing, whatever the CPU has]", b,
             b);
    return note;
}

void th_not_run(const char *fmt, ...)
{
    char reason[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    const struct criterion_test *t = criterion_current_test;
    fprintf(stderr, "[NOT RUN] %s::%s: %s%s\n", t ? t->category : "?", t ? t->name : "?", reason,
            th_isa_bound_note());
    fflush(stderr);
}

/* Criterion prints a skipped test's reason only when verbose: print it
 * always, in the form th_not_run uses. */
ReportHook(POST_TEST)(struct criterion_test_stats *st)
{
    if (st->test_status != CR_STATUS_SKIPPED) return;
    fprintf(stderr, "[SKIP] %s::%s: %s%s\n", st->test->category, st->test->name,
            st->message ? st->message : "(no reason given)", th_isa_bound_note());
    fflush(stderr);
}

uint64_t th_xorshift64(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

double th_uniform_pm1(uint64_t *s)
{
    return (double)(th_xorshift64(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

tg_tensor *th_tensor_from(tg_dtype dt, int ndim, const int64_t *shape, const double *v)
{
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&t, dt, ndim, shape), TG_OK));
    for (int64_t i = 0; i < tg_tensor_numel(t); i++)
        cr_assert(eq(int, tg_tensor_set_flat(t, i, v[i]), TG_OK));
    return t;
}

tg_tensor *th_vec(tg_dtype dt, int64_t n, const double *v, const char *name, bool rg)
{
    tg_tensor *t = th_tensor_from(dt, 1, (int64_t[]){n}, v);
    tg_tensor_set_name(t, name);
    cr_assert(eq(int, tg_tensor_set_requires_grad(t, rg), TG_OK));
    return t;
}

const tg_dtype th_floats[4] = {TG_F32, TG_F64, TG_F16, TG_BF16};

double th_round_to(tg_dtype dt, double v)
{
    switch (dt) {
    case TG_F64: return v;
    case TG_F16: return tg_f16_to_f32(tg_f32_to_f16((float)v));
    case TG_BF16: return tg_bf16_to_f32(tg_f32_to_bf16((float)v));
    default: return (float)v;
    }
}

void th_release_all(int n, tg_tensor **ts)
{
    for (int i = 0; i < n; i++) tg_tensor_release(ts[i]);
}

tg_tensor *th_arange(tg_dtype dt, int ndim, const int64_t *shape)
{
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&t, dt, ndim, shape), TG_OK));
    for (int64_t k = 0; k < tg_tensor_numel(t); k++)
        cr_assert(eq(int, tg_tensor_set_flat(t, k, (double)k), TG_OK));
    return t;
}

tg_tensor *th_rand_uniform(tg_dtype dt, int ndim, const int64_t *shape, uint64_t seed)
{
    tg_tensor *t = NULL;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    cr_assert(eq(int, tg_tensor_zeros(&t, dt, ndim, shape), TG_OK));
    cr_assert(eq(int, tg_tensor_rand_uniform(t, &rng, -1.0, 1.0), TG_OK));
    return t;
}

double th_at(const tg_tensor *t, int64_t i)
{
    double v = NAN;
    cr_assert(eq(int, tg_tensor_get_flat(t, i, &v), TG_OK));
    return v;
}

double th_max_diff(tg_tensor *x, tg_tensor *y)
{
    tg_tensor *d = NULL;
    cr_assert(eq(int, tg_sub(&d, x, y), TG_OK));
    double m = 0;
    for (int64_t i = 0; i < tg_tensor_numel(d); i++) m = fmax(m, fabs(th_at(d, i)));
    tg_tensor_release(d);
    return m;
}

double *th_doubles(const tg_tensor *t)
{
    int64_t n = tg_tensor_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    cr_assert(v != NULL);
    cr_assert(eq(int, tg_tensor_to_doubles(t, v, n), TG_OK));
    return v;
}

int64_t th_rand_int(uint64_t *s, int64_t lo, int64_t hi)
{
    const int64_t v = lo + (int64_t)((th_uniform_pm1(s) + 1.0) / 2.0 * (double)(hi - lo + 1));
    return v > hi ? hi : v;
}

tg_tensor *th_rand_tensor(uint64_t *s, tg_dtype dt, int ndim, const int64_t *shape, double lo,
                          double hi)
{
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&t, dt, ndim, shape), TG_OK));
    for (int64_t i = 0; i < tg_tensor_numel(t); i++)
        tg_tensor_set_flat(t, i, lo + (th_uniform_pm1(s) + 1.0) / 2.0 * (hi - lo));
    return t;
}

double th_get(const tg_tensor *t, const int64_t *idx)
{
    double v = NAN;
    cr_assert(eq(int, tg_tensor_get(t, idx, &v), TG_OK));
    return v;
}

void th_expect_shape(const tg_tensor *t, int ndim, const int64_t *shape)
{
    cr_assert(eq(int, tg_tensor_ndim(t), ndim));
    for (int d = 0; d < ndim; d++) cr_assert(eq(i64, tg_tensor_shape(t)[d], shape[d]), "dim %d", d);
}

tg_tensor *th_seq(tg_dtype dt, int ndim, const int64_t *shape, double lo, double hi)
{
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&t, dt, ndim, shape), TG_OK));
    const int64_t n = tg_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        const double f = fmod((double)(i + 1) * 0.6180339887498949, 1.0);
        cr_assert(eq(int, tg_tensor_set_flat(t, i, lo + (hi - lo) * f), TG_OK));
    }
    return t;
}

bool th_close(double got, double want, double rtol, double atol)
{
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabs(got - want) <= atol + rtol * fabs(want);
}

bool th_same_bits(const tg_tensor *a, const tg_tensor *b)
{
    return tg_tensor_dtype(a) == tg_tensor_dtype(b) && tg_tensor_same_shape(a, b) &&
           memcmp(tg_tensor_cdata(a), tg_tensor_cdata(b),
                  (size_t)tg_tensor_numel(a) * tg_dtype_size(tg_tensor_dtype(a))) == 0;
}

void th_expect_same_bits(const char *what, const tg_tensor *x, const tg_tensor *got,
                         const tg_tensor *want)
{
    const int64_t n = tg_tensor_numel(want);
    cr_assert(eq(i64, tg_tensor_numel(got), n), "%s", what);
    cr_assert(eq(int, tg_tensor_dtype(got), tg_tensor_dtype(want)), "%s", what);
    for (int64_t i = 0; i < n; i++) {
        const double g = th_at(got, i), w = th_at(want, i);
        const bool same = isnan(w) ? isnan(g) : g == w && signbit(g) == signbit(w);
        cr_assert(same, "%s[%lld]: x = %.17g: got %.17g, torch %.17g", what, (long long)i,
                  th_at(x, i), g, w);
    }
}

void th_backward_with(tg_tensor *y, const tg_tensor *gy)
{
    tg_tensor *p = NULL, *s = NULL;
    cr_assert(eq(int, tg_mul(&p, y, (tg_tensor *)gy), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_sum(&s, p), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_OK), "%s", tg_error_message());
    th_release_all(2, (tg_tensor *[]){p, s});
}

void th_views_of_3x4x5(tg_tensor *v[3])
{
    uint64_t s = 5;
    tg_tensor *base = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){3, 4, 5}, -2, 2);
    tg_tensor *one = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){3, 1, 5}, -2, 2);
    cr_assert(eq(int, tg_transpose(&v[0], base, 0, 2), TG_OK));
    cr_assert(eq(int, tg_slice(&v[1], base, 1, 1, 4, 2), TG_OK));
    cr_assert(eq(int, tg_expand(&v[2], one, 3, (int64_t[]){3, 4, 5}), TG_OK));
    th_release_all(2, (tg_tensor *[]){base, one});
}

tg_tensor *th_layout_of(tg_dtype dt, int nd, const int64_t *shape, int layout, uint64_t seed)
{
    int64_t s[TG_MAX_DIMS];
    memcpy(s, shape, sizeof(int64_t) * (size_t)nd);
    if (layout == 1) {
        s[0] = shape[nd - 1];
        s[nd - 1] = shape[0];
    } else if (layout == 2) {
        s[0] = 2 * shape[0];
    }
    tg_tensor *base = NULL, *v = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&base, dt, nd, s), TG_OK));
    void *d = tg_tensor_data(base);
    for (int64_t i = 0; i < tg_tensor_numel(base); i++) {
        if (tg_dtype_is_float(dt)) {
            tg_dtype_store(dt, d, i, 100 * th_uniform_pm1(&seed));
            continue;
        }
        const uint64_t r = th_xorshift64(&seed);
        if (dt == TG_I64) ((uint64_t *)d)[i] = r;
        else if (dt == TG_I32) ((uint32_t *)d)[i] = (uint32_t)r;
        else ((uint8_t *)d)[i] = (uint8_t)r;
    }
    if (layout == 0) return base;
    if (layout == 1) cr_assert(eq(int, tg_transpose(&v, base, 0, nd - 1), TG_OK));
    else cr_assert(eq(int, tg_slice(&v, base, 0, 1, s[0], 2), TG_OK));
    tg_tensor_release(base);
    return v;
}

int64_t th_first_difference(const tg_tensor *got, const tg_tensor *want)
{
    const size_t sz = tg_dtype_size(tg_tensor_dtype(want));
    const char *g = tg_tensor_cdata(got), *w = tg_tensor_cdata(want);
    for (int64_t i = 0; i < tg_tensor_numel(want); i++)
        if (memcmp(g + (size_t)i * sz, w + (size_t)i * sz, sz)) return i;
    return -1;
}

void th_expect_same_tensor_bytes(const char *what, const tg_tensor *got,
                                 const tg_tensor *want)
{
    cr_assert(got != NULL, "%s: no result", what);
    cr_assert(eq(int, tg_tensor_dtype(got), tg_tensor_dtype(want)), "%s: dtype %s, want %s",
              what, tg_dtype_name(tg_tensor_dtype(got)), tg_dtype_name(tg_tensor_dtype(want)));
    cr_assert(tg_tensor_same_shape(got, want), "%s: shape", what);
    const int64_t k = th_first_difference(got, want);
    cr_assert(k < 0, "%s: element %lld is %.17g, want %.17g", what, (long long)k,
              th_at(got, k < 0 ? 0 : k), th_at(want, k < 0 ? 0 : k));
}

void th_expect_fp32_autocast(int (*op)(tg_tensor **y, tg_tensor *x), uint64_t seed)
{
    uint64_t s = seed;
    tg_tensor *x = th_rand_tensor(&s, TG_BF16, 2, (int64_t[]){4, 7}, -2, 2), *x32 = NULL;
    tg_tensor *y = NULL, *want = NULL, *l = NULL, *yb = NULL;
    cr_assert(eq(int, tg_tensor_set_requires_grad(x, true), TG_OK));
    cr_assert(eq(int, tg_tensor_to_dtype(&x32, x, TG_F32), TG_OK));
    cr_assert(eq(int, tg_autocast_begin(TG_BF16), TG_OK));
    const int rc = op(&y, x);
    cr_assert(eq(int, tg_autocast_end(), TG_OK));
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    cr_assert(eq(int, op(&want, x32), TG_OK), "%s", tg_error_message());
    th_expect_same_bits("autocast", x, y, want);
    cr_assert(eq(int, tg_sum(&l, y), TG_OK));
    cr_assert(eq(int, tg_backward(l, NULL, NULL), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(x)), TG_BF16));
    cr_assert(eq(int, op(&yb, x), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_dtype(yb), TG_BF16));
    th_release_all(6, (tg_tensor *[]){x, x32, y, want, l, yb});
}

tg_reduction th_reduction_of(const char *name)
{
    if (!strcmp(name, "mean")) return TG_REDUCTION_MEAN;
    if (!strcmp(name, "sum")) return TG_REDUCTION_SUM;
    if (!strcmp(name, "none")) return TG_REDUCTION_NONE;
    cr_assert(strcmp(name, "batchmean") == 0, "unknown reduction '%s'", name);
    return TG_REDUCTION_BATCHMEAN;
}

void th_expect_gradchecks(tg_gradcheck_fn fn, void *user, int n, tg_tensor *const *in,
                          const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    cr_assert(eq(int, tg_gradcheck(fn, user, n, in, &o), TG_OK), "gradcheck, %s: %s", what,
              tg_error_message());
    cr_assert(eq(int, tg_gradgradcheck(fn, user, n, in, &o), TG_OK), "gradgradcheck, %s: %s",
              what, tg_error_message());
}

void th_gradcheck_calls(const th_call *calls, size_t count, tg_gradcheck_fn fn, uint64_t seed0,
                        double lo, double hi)
{
    for (size_t i = 0; i < count; i++) {
        const th_call *c = &calls[i];
        tg_tensor *in[4] = {NULL, NULL, NULL, NULL};
        for (int j = 0; j < c->n; j++) {
            uint64_t s = seed0 + 7 * i + (uint64_t)j;
            in[j] = th_rand_tensor(&s, TG_F64, c->nd[j], c->shape[j], lo, hi);
            cr_assert(eq(int, tg_tensor_set_requires_grad(in[j], true), TG_OK));
        }
        th_expect_gradchecks(fn, (void *)c, c->n, in, "%s '%s'", c->op, c->arg);
        th_release_all(c->n, in);
    }
}

void th_expect_double_backward_is_forward(tg_tensor *x, tg_tensor *y, uint64_t seed)
{
    tg_tensor *g = th_rand_uniform(TG_F64, tg_tensor_ndim(y), tg_tensor_shape(y), seed);
    tg_tensor *dx = NULL, *dg = NULL, *xc = NULL;
    cr_assert(eq(int, tg_tensor_set_requires_grad(g, true), TG_OK));
    tg_backward_opts o = {.create_graph = true};
    cr_assert(eq(int, tg_grad(&dx, 1, &y, &g, 1, &x, &o), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_clone(&xc, x), TG_OK));
    cr_assert(eq(int, tg_grad(&dg, 1, &dx, &xc, 1, &g, NULL), TG_OK), "%s", tg_error_message());
    th_expect_same_bits("A x", x, dg, y);
    th_release_all(4, (tg_tensor *[]){g, dx, dg, xc});
}

static const char *vgolden_path(char *buf, size_t n, const char *rel_fmt, va_list ap)
{
    const char *root = getenv("TG_SOURCE_ROOT");
    int len = snprintf(buf, n, "%s/tests/golden/", root && root[0] ? root : TG_SOURCE_ROOT);
    cr_assert(len > 0 && (size_t)len < n);
    vsnprintf(buf + len, n - (size_t)len, rel_fmt, ap);
    return buf;
}

const char *th_golden_path(char *buf, size_t n, const char *rel_fmt, ...)
{
    va_list ap;
    va_start(ap, rel_fmt);
    vgolden_path(buf, n, rel_fmt, ap);
    va_end(ap);
    return buf;
}

tg_st_file *th_golden_load(const char *rel_fmt, ...)
{
    char path[4096];
    va_list ap;
    va_start(ap, rel_fmt);
    vgolden_path(path, sizeof path, rel_fmt, ap);
    va_end(ap);
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_safetensors_load(&f, path), TG_OK), "%s: %s", path, tg_error_message());
    return f;
}

/* "<c>.<what>": the key of a golden case's entry. */
typedef struct golden_key {
    char s[128];
} golden_key;

static golden_key key_of(const char *c, const char *what)
{
    golden_key k;
    snprintf(k.s, sizeof k.s, "%s.%s", c, what);
    return k;
}

const char *th_golden_meta(const tg_st_file *f, const char *c, const char *what)
{
    const golden_key k = key_of(c, what);
    const char *v = tg_st_meta_get(f, k.s);
    cr_assert(v != NULL, "golden has no %s", k.s);
    return v;
}

const tg_tensor *th_golden_get(const tg_st_file *f, const char *c, const char *what)
{
    const golden_key k = key_of(c, what);
    const tg_tensor *t = tg_st_get(f, k.s);
    cr_assert(t != NULL, "golden has no %s", k.s);
    return t;
}

tg_tensor *th_leaf_clone(const tg_tensor *t)
{
    if (!t) return NULL;
    tg_tensor *c = NULL;
    cr_assert(eq(int, tg_tensor_clone(&c, t), TG_OK), "clone: %s", tg_error_message());
    cr_assert(eq(int, tg_tensor_set_requires_grad(c, true), TG_OK), "%s", tg_error_message());
    return c;
}

tg_tensor *th_golden_at(const tg_st_file *f, const char *fmt, const char *a, const char *b)
{
    char key[160];
    snprintf(key, sizeof key, fmt, a, b);
    tg_tensor *t = tg_st_get(f, key);
    cr_assert(t != NULL, "golden key %s missing", key);
    return t;
}

void th_ints_of(const char *s, int64_t *v)
{
    for (char *end; *s; s = *end ? end + 1 : end) *v++ = strtoll(s, &end, 10);
}

int th_dims_of(const char *s, int *dims)
{
    int64_t v[TG_MAX_DIMS];
    int n = 0;
    if (!*s) return 0;
    th_ints_of(s, v);
    for (const char *c = s; c; c = strchr(c + 1, ',')) dims[n] = (int)v[n], n++;
    return n;
}

/* The largest finite |element| of t (0 for none). */
static double finite_scale(const tg_tensor *t)
{
    double scale = 0;
    for (int64_t i = 0; i < tg_tensor_numel(t); i++)
        if (isfinite(th_at(t, i))) scale = fmax(scale, fabs(th_at(t, i)));
    return scale;
}

void th_expect_close(const char *what, const tg_tensor *got, const tg_tensor *want, double rtol)
{
    cr_assert(got != NULL && want != NULL, "%s: missing", what);
    cr_assert(tg_tensor_same_shape(got, want), "%s: shape (ndim %d, want %d)", what,
              tg_tensor_ndim(got), tg_tensor_ndim(want));
    cr_assert(eq(int, tg_tensor_dtype(got), tg_tensor_dtype(want)), "%s: dtype %s, want %s",
              what, tg_dtype_name(tg_tensor_dtype(got)), tg_dtype_name(tg_tensor_dtype(want)));
    const double scale = finite_scale(want);
    for (int64_t i = 0; i < tg_tensor_numel(want); i++) {
        const double g = th_at(got, i), w = th_at(want, i);
        cr_assert(th_close(g, w, rtol, rtol * scale) &&
                      (rtol > 0 || isnan(w) || signbit(g) == signbit(w)),
                  "%s[%lld]: %.17g, want %.17g", what, (long long)i, g, w);
    }
}

void th_expect_near(const char *what, const tg_tensor *got, const tg_tensor *want, double rtol,
                    double atol)
{
    cr_assert(got != NULL && want != NULL, "%s: missing", what);
    cr_assert(tg_tensor_same_shape(got, want), "%s: shape (ndim %d, want %d)", what,
              tg_tensor_ndim(got), tg_tensor_ndim(want));
    for (int64_t i = 0; i < tg_tensor_numel(want); i++) {
        const double g = th_at(got, i), w = th_at(want, i);
        cr_assert(th_close(g, w, rtol, atol), "%s[%lld]: %.17g, want %.17g", what, (long long)i,
                  g, w);
    }
}

void th_expect_close_scaled(const char *what, const tg_tensor *got, const tg_tensor *want,
                            double rtol)
{
    cr_assert(got != NULL, "%s: no tensor", what);
    cr_assert(eq(int, tg_tensor_dtype(got), tg_tensor_dtype(want)), "%s: dtype", what);
    th_expect_shape(got, tg_tensor_ndim(want), tg_tensor_shape(want));
    const double scale = finite_scale(want);
    for (int64_t i = 0; i < tg_tensor_numel(want); i++)
        cr_assert(th_close(th_at(got, i), th_at(want, i), 0, rtol * scale),
                  "%s[%lld]: %.17g, want %.17g", what, (long long)i, th_at(got, i),
                  th_at(want, i));
}

void th_refused_at(int line, int rc, int status, const char *words, const tg_tensor *y)
{
    cr_assert(eq(int, rc, status), "line %d: status %d, want %d (%s)", line, rc, status,
              tg_error_message());
    th_expect_in(tg_error_message(), words);
    cr_assert(y == NULL, "line %d: out set on error", line);
}

/* line [p, end) with its runs of spaces read as one: equal to row? */
static bool row_is(const char *p, const char *end, const char *row)
{
    while (p < end && *p == ' ') p++;
    while (p < end) {
        if (*p == ' ') {
            while (p < end && *p == ' ') p++;
            if (p == end) break;
            if (*row++ != ' ') return false;
            continue;
        }
        if (*row++ != *p++) return false;
    }
    return *row == '\0';
}

void th_expect_row(const char *text, const char *row)
{
    for (const char *p = text; *p;) {
        const char *end = strchr(p, '\n');
        if (!end) end = p + strlen(p);
        if (row_is(p, end, row)) return;
        p = *end ? end + 1 : end;
    }
    cr_assert(false, "no row \"%s\" in:\n%s", row, text);
}

tg_st_file *th_st_copy_without(const tg_st_file *src, const char *skip)
{
    tg_st_file *d = NULL;
    cr_assert(eq(int, tg_st_new(&d), TG_OK));
    for (int e = 0; e < tg_st_count(src); e++) {
        const char *name;
        tg_tensor *t;
        tg_st_at(src, e, &name, &t);
        if (strcmp(name, skip) != 0) tg_st_set(d, name, t);
    }
    for (int e = 0; e < tg_st_meta_count(src); e++) {
        const char *k, *v;
        tg_st_meta_at(src, e, &k, &v);
        if (strcmp(k, skip) != 0) tg_st_meta_set(d, k, v);
    }
    return d;
}

typedef struct th_state_ctx {
    const tg_st_file *f;
    const char *prefix;
    double rtol;
} th_state_ctx;

static int th_state_entry(const char *name, tg_tensor *t, bool is_param, void *user)
{
    (void)is_param;
    const th_state_ctx *c = user;
    char key[512];
    snprintf(key, sizeof key, "%s.%s", c->prefix, name);
    const tg_tensor *want = tg_st_get(c->f, key);
    cr_assert(want != NULL, "the golden lacks %s", key);
    if (c->rtol == 0 || !tg_dtype_is_float(tg_tensor_dtype(t)))
        th_expect_same_bits(key, want, t, want);
    else
        th_expect_close_scaled(key, t, want, c->rtol);
    return TG_OK;
}

void th_expect_state_keys(const tg_module *m, const char *want)
{
    char buf[8192] = "", name[TG_MODULE_NAME_MAX];
    const int n = tg_module_state_count(m);
    for (int i = 0; i < n; i++) {
        cr_assert(eq(int, tg_module_state_at(m, i, name, sizeof name, NULL, NULL), TG_OK),
                  "%s", tg_error_message());
        cr_assert(strlen(buf) + strlen(name) + 2 < sizeof buf, "keys longer than %zu bytes",
                  sizeof buf);
        if (i) strcat(buf, ",");
        strcat(buf, name);
    }
    cr_assert(eq(str, buf, (char *)want));
}

void th_expect_state(const tg_module *m, const tg_st_file *f, const char *prefix, double rtol)
{
    int missing = -1, unexpected = -1;
    cr_assert(eq(int, tg_module_state_dict_compare(m, f, prefix, NULL, NULL, &missing,
                                                   &unexpected), TG_OK));
    cr_assert(missing == 0 && unexpected == 0, "%s: %d missing, %d unexpected keys", prefix,
              missing, unexpected);
    th_state_ctx c = {f, prefix, rtol};
    cr_assert(eq(int, tg_module_foreach_state(m, th_state_entry, &c), TG_OK));
}

void th_expect_same_st(const tg_st_file *x, const tg_st_file *y)
{
    cr_assert(eq(int, tg_st_count(x), tg_st_count(y)));
    cr_assert(eq(int, tg_st_meta_count(x), tg_st_meta_count(y)));
    for (int e = 0; e < tg_st_count(x); e++) {
        const char *name;
        tg_tensor *t;
        tg_st_at(x, e, &name, &t);
        const tg_tensor *u = tg_st_get(y, name);
        cr_assert(u != NULL, "%s", name);
        th_expect_same_bits(name, t, u, t);
    }
    for (int e = 0; e < tg_st_meta_count(x); e++) {
        const char *k, *v;
        tg_st_meta_at(x, e, &k, &v);
        cr_assert(tg_st_meta_get(y, k) != NULL && strcmp(tg_st_meta_get(y, k), v) == 0, "%s", k);
    }
}
