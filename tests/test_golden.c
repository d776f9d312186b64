/* tests/test_golden.c - conv ops against numbers PyTorch wrote.
 *
 * tests/golden/<name>.case.safetensors holds x, weight, [bias], [grad_y] and
 * the op's parameters; <name>.result.safetensors holds torch's y and
 * gradients (scripts/make_goldens.py).  Every case runs through tools/case.c
 * (the code behind `tapegrad run-op`) with both conv algorithms, and every
 * tensor of the result file must match in dtype, shape and values.  Cases
 * of mixed dtypes are refused, as torch refuses them; the conv_transpose
 * ones of half dtypes match under autocast (run_mixed).
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "../tools/case.h"
#include "tapegrad/registry.h"
#include "tapegrad/status.h"

#ifndef TG_SOURCE_ROOT
#define TG_SOURCE_ROOT "."
#endif

#define SUFFIX ".case.safetensors"
#define MAX_CASES 256

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Case base names ("conv2d_f32_silu"), sorted; the caller frees each. */
static int list_cases(char **names, int max)
{
    char dir[4096];
    DIR *d = opendir(th_golden_path(dir, sizeof dir, "."));
    cr_assert(d != NULL, "cannot open %s", dir);
    int n = 0;
    struct dirent *e;
    size_t slen = strlen(SUFFIX);
    while ((e = readdir(d)) != NULL && n < max) {
        size_t len = strlen(e->d_name);
        if (len > slen && strcmp(e->d_name + len - slen, SUFFIX) == 0)
            names[n++] = strndup(e->d_name, len - slen);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    return n;
}

/* Pass when |got - want| <= atol + rtol * (|want| + floor * max|want|): relative
 * per element, plus a floor tied to the tensor's scale for values that cancel
 * to near zero.  In f16/bf16 every op of a backward chain rounds (silu's
 * backward alone is several ops), and a gradient that sums such terms with
 * cancellation is only accurate to a few ulps of its largest element, hence
 * a floor there: 1 in bf16 (8 significant bits; conv2d_bf16_tanh's grad_x
 * needs it), 0.1 in f16 (11 bits). */
typedef struct golden_tol {
    double rtol, atol, floor;
} golden_tol;

static golden_tol tolerance_for(tg_dtype dt)
{
    switch (dt) {
    case TG_F64: return (golden_tol){1e-10, 1e-12, 0.1};
    case TG_F32: return (golden_tol){1e-4, 1e-6, 0.1};
    case TG_F16: return (golden_tol){1e-2, 1e-3, 0.1};
    default:     return (golden_tol){3e-2, 1e-3, 1.0}; /* bf16 */
    }
}

static void compare_tensor(const char *ctx, const char *name, const tg_tensor *got,
                           const tg_tensor *want)
{
    cr_assert(got != NULL, "%s: result has no %s", ctx, name);
    cr_assert(eq(str, (char *)tg_dtype_name(tg_tensor_dtype(got)),
                 (char *)tg_dtype_name(tg_tensor_dtype(want))), "%s: %s dtype", ctx, name);
    char gs[128], ws[128];
    tg_shape_str(gs, sizeof gs, tg_tensor_ndim(got), tg_tensor_shape(got));
    tg_shape_str(ws, sizeof ws, tg_tensor_ndim(want), tg_tensor_shape(want));
    cr_assert(eq(str, gs, ws), "%s: %s shape", ctx, name);
    double *g = th_doubles(got), *w = th_doubles(want), scale = 0;
    int64_t n = tg_tensor_numel(want);
    golden_tol t = tolerance_for(tg_tensor_dtype(want));
    for (int64_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(w[i]));
    for (int64_t i = 0; i < n; i++) {
        double tol = t.atol + t.rtol * (fabs(w[i]) + t.floor * scale);
        cr_assert(fabs(g[i] - w[i]) <= tol, "%s: %s[%lld] = %.12g, torch says %.12g (tol %g)",
                  ctx, name, (long long)i, g[i], w[i], tol);
    }
    free(g);
    free(w);
}

/* Whether x, weight and bias (if any) of case c differ in dtype. */
static bool is_mixed(const tg_case *c)
{
    const tg_dtype xd = tg_tensor_dtype(c->x);
    return tg_tensor_dtype(c->weight) != xd || (c->bias && tg_tensor_dtype(c->bias) != xd);
}

/* A case of mixed dtypes: the file holds torch's numbers on the promoted
 * inputs, but torch's conv ops refuse the mix outside autocast, and so does
 * tapegrad (TG_EDTYPE naming weight and x).  A conv_transpose of two half
 * dtypes or of a half dtype with f32 runs under bf16 autocast, where its
 * PROMOTE policy gives those numbers (*res set, true); else false. */
static bool run_mixed(const tg_case *c, const char *ctx, tg_conv_algo algo, tg_st_file **res)
{
    char err[1024] = "";
    cr_assert(eq(int, tg_case_run(res, c, algo, err, sizeof err), TG_EDTYPE), "%s: %s", ctx,
              err);
    th_expect_in(err, "outside autocast they must have one dtype");
    cr_assert(res[0] == NULL, "%s: result set on error", ctx);
    const bool f64 = tg_tensor_dtype(c->x) == TG_F64 || tg_tensor_dtype(c->weight) == TG_F64;
    if (!c->transpose || f64) return false;
    cr_assert(eq(int, tg_autocast_begin(TG_BF16), TG_OK));
    const int rc = tg_case_run(res, c, algo, err, sizeof err);
    cr_assert(eq(int, tg_autocast_end(), TG_OK));
    cr_assert(eq(int, rc, TG_OK), "%s under autocast: %s", ctx, err);
    return true;
}

static void check_case(const char *name, tg_conv_algo algo)
{
    char ctx[256], err[1024] = "";
    snprintf(ctx, sizeof ctx, "%s [%s]", name,
             algo == TG_CONV_ALGO_FAST ? "fast" : "reference");
    tg_st_file *cf = th_golden_load("%s.case.safetensors", name);
    tg_st_file *rf = th_golden_load("%s.result.safetensors", name), *res = NULL;
    tg_case c;
    cr_assert(eq(int, tg_case_parse(&c, cf, err, sizeof err), TG_OK), "%s: %s", ctx, err);
    if (is_mixed(&c) && !run_mixed(&c, ctx, algo, &res)) {
        tg_st_free(rf);
        tg_st_free(cf);
        return;
    }
    if (!res)
        cr_assert(eq(int, tg_case_run(&res, &c, algo, err, sizeof err), TG_OK), "%s: %s", ctx,
                  err);
    /* Every tensor torch wrote must be there and agree, and nothing else. */
    cr_assert(eq(int, tg_st_count(res), tg_st_count(rf)), "%s: number of results", ctx);
    for (int i = 0; i < tg_st_count(rf); i++) {
        const char *tname;
        tg_tensor *want;
        cr_assert(eq(int, tg_st_at(rf, i, &tname, &want), TG_OK));
        compare_tensor(ctx, tname, tg_st_get(res, tname), want);
    }
    tg_st_free(res);
    tg_st_free(rf);
    tg_st_free(cf);
}

static void run_all(tg_conv_algo algo)
{
    char *names[MAX_CASES];
    int n = list_cases(names, MAX_CASES);
    cr_assert(n > 20, "only %d golden cases found", n);
    for (int i = 0; i < n; i++) {
        check_case(names[i], algo);
        free(names[i]);
    }
}

Test(golden, reference_algo_matches_torch)
{
    run_all(TG_CONV_ALGO_REFERENCE);
}

Test(golden, fast_algo_matches_torch)
{
    run_all(TG_CONV_ALGO_FAST);
}

/* ---- the case parser ---- */

/* A conv2d case file with x (1, 2, 5, 5), weight (2, 2, 3, 3) and the given
 * metadata pairs (key, value, key, value, ..., NULL). */
static tg_st_file *make_case_file(const char *first_key, ...)
{
    tg_st_file *f = NULL;
    tg_tensor *x = NULL, *w = NULL;
    static const int64_t xs[] = {1, 2, 5, 5}, ws[] = {2, 2, 3, 3};
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_tensor_full(&x, TG_F64, 4, xs, 1.0), TG_OK));
    cr_assert(eq(int, tg_tensor_full(&w, TG_F64, 4, ws, 0.5), TG_OK));
    cr_assert(eq(int, tg_st_set(f, "x", x), TG_OK));
    cr_assert(eq(int, tg_st_set(f, "weight", w), TG_OK));
    tg_tensor_release(x);
    tg_tensor_release(w);
    va_list ap;
    va_start(ap, first_key);
    for (const char *k = first_key; k; k = va_arg(ap, const char *)) {
        const char *v = va_arg(ap, const char *);
        cr_assert(eq(int, tg_st_meta_set(f, k, v), TG_OK));
    }
    va_end(ap);
    return f;
}

/* Parsing f fails with status want, a message naming key, and *c unchanged. */
static void expect_parse_error(tg_st_file *f, int want, const char *key)
{
    tg_case c, before;
    memset(&c, 0x5a, sizeof c);
    memcpy(&before, &c, sizeof c);
    char err[512] = "";
    cr_assert(eq(int, tg_case_parse(&c, f, err, sizeof err), want), "%s", err);
    cr_assert(strstr(err, key) != NULL, "message '%s' should name '%s'", err, key);
    cr_assert(memcmp(&c, &before, sizeof c) == 0, "case changed on error");
    tg_st_free(f);
}

Test(golden, case_parse_defaults_and_asymmetric_padding)
{
    tg_case c;
    char err[512] = "";
    tg_st_file *f = make_case_file("op", "conv2d", NULL);
    cr_assert(eq(int, tg_case_parse(&c, f, err, sizeof err), TG_OK), "%s", err);
    cr_assert(eq(int, c.nspatial, 2));
    cr_assert(not(c.transpose));
    cr_assert(eq(i64, c.params.stride[1], 1));
    cr_assert(eq(i64, c.params.padding[1][1], 0));
    cr_assert(eq(i64, c.params.groups, 1));
    cr_assert(eq(int, (int)c.params.act, (int)TG_ACT_NONE));
    cr_assert(c.bias == NULL && c.grad_y == NULL);
    tg_st_free(f);

    f = make_case_file("op", "conv_transpose2d", "padding", "1, 2,3,4", "stride", "3",
                       "dilation", "2,1", "output_padding", "1,0", "groups", "2",
                       "activation", "leaky_relu:0.25", NULL);
    cr_assert(eq(int, tg_case_parse(&c, f, err, sizeof err), TG_OK), "%s", err);
    cr_assert(c.transpose);
    int64_t want_pad[2][2] = {{1, 2}, {3, 4}};
    for (int a = 0; a < 2; a++) {
        cr_assert(eq(i64, c.params.padding[a][0], want_pad[a][0]));
        cr_assert(eq(i64, c.params.padding[a][1], want_pad[a][1]));
        cr_assert(eq(i64, c.params.stride[a], 3));
        cr_assert(eq(i64, c.params.dilation[a], 2 - a));
        cr_assert(eq(i64, c.params.output_padding[a], 1 - a));
    }
    cr_assert(eq(i64, c.params.groups, 2));
    cr_assert(eq(int, (int)c.params.act, (int)TG_ACT_LEAKY_RELU));
    cr_assert(epsilon_eq(dbl, c.params.act_slope, 0.25, 1e-15));
    tg_st_free(f);
}

Test(golden, case_parse_rejects_bad_metadata)
{
    expect_parse_error(make_case_file("stride", "1", NULL), TG_EINVAL, "op");
    expect_parse_error(make_case_file("op", "conv4d", NULL), TG_EINVAL, "conv4d");
    expect_parse_error(make_case_file("op", "conv1d", NULL), TG_ESHAPE, "dims");
    expect_parse_error(make_case_file("op", "conv2d", "stride", "2,x", NULL), TG_EINVAL,
                       "stride");
    expect_parse_error(make_case_file("op", "conv2d", "stride", "1,2,3", NULL), TG_EINVAL,
                       "stride");
    expect_parse_error(make_case_file("op", "conv2d", "stride", "0", NULL), TG_EINVAL,
                       "stride");
    expect_parse_error(make_case_file("op", "conv2d", "stride", "", NULL), TG_EINVAL,
                       "stride");
    expect_parse_error(make_case_file("op", "conv2d", "dilation", "1,", NULL), TG_EINVAL,
                       "dilation");
    expect_parse_error(make_case_file("op", "conv2d", "padding", "-1", NULL), TG_EINVAL,
                       "padding");
    expect_parse_error(make_case_file("op", "conv2d", "padding", "1,1,1", NULL), TG_EINVAL,
                       "padding");
    expect_parse_error(make_case_file("op", "conv2d", "padding", "99999999999", NULL),
                       TG_EINVAL, "padding");
    expect_parse_error(make_case_file("op", "conv2d", "groups", "2,2", NULL), TG_EINVAL,
                       "groups");
    expect_parse_error(make_case_file("op", "conv2d", "groups", "0x2", NULL), TG_EINVAL,
                       "groups");
    expect_parse_error(make_case_file("op", "conv2d", "output_padding", "1", NULL),
                       TG_EINVAL, "output_padding");
    expect_parse_error(make_case_file("op", "conv_transpose2d", "output_padding", "-1",
                                      NULL), TG_EINVAL, "output_padding");
    expect_parse_error(make_case_file("op", "conv2d", "activation", "swish", NULL),
                       TG_EINVAL, "activation");
    expect_parse_error(make_case_file("op", "conv2d", "strides", "2", NULL), TG_EINVAL,
                       "strides");
    expect_parse_error(make_case_file("op", "conv2d", "padding_mode", "mirror", NULL),
                       TG_EINVAL, "padding_mode");
}

/* padding_mode as PyTorch's Conv takes it: a case in reflect mode runs as
 * tg_conv of the reflect-padded x without padding, with both algorithms; a
 * transposed conv refuses it. */
Test(golden, case_padding_mode_runs_as_tg_pad_then_conv)
{
    tg_st_file *f = make_case_file("op", "conv2d", "padding", "1,2", "padding_mode", "reflect",
                                   NULL);
    tg_case c;
    char err[512] = "";
    cr_assert(eq(int, tg_case_parse(&c, f, err, sizeof err), TG_OK), "%s", err);
    cr_assert(eq(int, (int)c.params.padding_mode, (int)TG_PAD_REFLECT));
    /* x of distinct values, so that the mode shows at the borders */
    for (int64_t i = 0; i < tg_tensor_numel(c.x); i++)
        cr_assert(eq(int, tg_tensor_set_flat(c.x, i, (double)(i % 7) - 3.0), TG_OK));
    tg_tensor *xp = NULL, *want = NULL;
    cr_assert(eq(int, tg_pad(&xp, c.x, 4, (int64_t[]){2, 2, 1, 1}, TG_PAD_REFLECT, 0), TG_OK));
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    cr_assert(eq(int, tg_conv(&want, xp, c.weight, NULL, &p), TG_OK));
    for (int a = 0; a < 2; a++) {
        tg_st_file *res = NULL;
        const tg_conv_algo algo = a ? TG_CONV_ALGO_REFERENCE : TG_CONV_ALGO_FAST;
        cr_assert(eq(int, tg_case_run(&res, &c, algo, err, sizeof err), TG_OK), "%s", err);
        const tg_tensor *y = tg_st_get(res, "y");
        cr_assert(y != NULL && tg_tensor_numel(y) == tg_tensor_numel(want));
        for (int64_t i = 0; i < tg_tensor_numel(y); i++)
            cr_assert(epsilon_eq(dbl, th_at(y, i), th_at(want, i), 1e-12), "y[%lld]",
                      (long long)i);
        tg_st_free(res);
    }
    tg_tensor_release(xp);
    tg_tensor_release(want);
    tg_st_free(f);
    f = make_case_file("op", "conv_transpose2d", "padding", "1", "padding_mode", "circular",
                       NULL);
    tg_st_file *res = NULL;
    cr_assert(eq(int, tg_case_parse(&c, f, err, sizeof err), TG_OK), "%s", err);
    cr_assert(eq(int, tg_case_run(&res, &c, TG_CONV_ALGO_FAST, err, sizeof err), TG_EINVAL));
    cr_assert(strstr(err, "padding_mode") != NULL, "%s", err);
    tg_st_free(f);
}

Test(golden, case_parse_rejects_missing_or_unknown_tensors)
{
    tg_st_file *f = make_case_file("op", "conv2d", NULL);
    tg_tensor *t = NULL;
    static const int64_t s[] = {2};
    cr_assert(eq(int, tg_tensor_zeros(&t, TG_F64, 1, s), TG_OK));
    cr_assert(eq(int, tg_st_set(f, "biases", t), TG_OK));
    tg_tensor_release(t);
    expect_parse_error(f, TG_EINVAL, "biases");

    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_st_meta_set(f, "op", "conv2d"), TG_OK));
    expect_parse_error(f, TG_EINVAL, "x");
}

Test(golden, case_run_reports_op_errors_and_changes_nothing)
{
    /* groups=3 does not divide C_in=2: the op's error reaches the message. */
    tg_st_file *f = make_case_file("op", "conv2d", "groups", "3", NULL), *res = NULL;
    tg_case c;
    char err[512] = "";
    cr_assert(eq(int, tg_case_parse(&c, f, err, sizeof err), TG_OK), "%s", err);
    double x0;
    cr_assert(eq(int, tg_tensor_get_flat(c.x, 0, &x0), TG_OK));
    cr_assert(lt(int, tg_case_run(&res, &c, TG_CONV_ALGO_FAST, err, sizeof err), 0));
    cr_assert(res == NULL);
    cr_assert(strstr(err, "conv2d") != NULL, "%s", err);
    cr_assert(tg_tensor_grad(c.x) == NULL);
    cr_assert(epsilon_eq(dbl, x0, 1.0, 0));
    tg_st_free(f);
}

Test(golden, case_run_checks_grad_y_shape)
{
    tg_st_file *f = make_case_file("op", "conv2d", NULL), *res = NULL;
    tg_tensor *gy = NULL;
    static const int64_t s[] = {1, 2, 2, 2}; /* y is (1, 2, 3, 3) */
    cr_assert(eq(int, tg_tensor_zeros(&gy, TG_F64, 4, s), TG_OK));
    cr_assert(eq(int, tg_st_set(f, "grad_y", gy), TG_OK));
    tg_tensor_release(gy);
    tg_case c;
    char err[512] = "";
    cr_assert(eq(int, tg_case_parse(&c, f, err, sizeof err), TG_OK), "%s", err);
    cr_assert(eq(int, tg_case_run(&res, &c, TG_CONV_ALGO_REFERENCE, err, sizeof err),
                 TG_ESHAPE));
    cr_assert(res == NULL);
    cr_assert(strstr(err, "grad_y") != NULL, "%s", err);
    tg_st_free(f);
}
