/* tests/test_predicates.c - isnan, isinf, isposinf, isneginf, isfinite, all,
 * any, nan_to_num, fmod, remainder, floor_divide, square, addcmul and
 * addcdiv: values and gradients against PyTorch 1.13 bit for bit
 * (tests/golden/predicates.safetensors, scripts/make_predicates_goldens.py)
 * over every dtype, special values, views, 0-d, empty and broadcast
 * operands; gradcheck and gradgradcheck in f64; the integer extremes torch
 * cannot compute; and the refusals, which name the argument and leave no
 * result behind. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

typedef int (*unary_fn)(tg_tensor **, tg_tensor *);
typedef int (*binary_fn)(tg_tensor **, tg_tensor *, tg_tensor *);
typedef int (*scalar_fn)(tg_tensor **, tg_tensor *, double);
typedef int (*dim_fn)(tg_tensor **, tg_tensor *, int, bool);
typedef int (*ternary_fn)(tg_tensor **, tg_tensor *, tg_tensor *, tg_tensor *, double);

static const struct {
    const char *name;
    unary_fn fn;
} UNARY[] = {{"isnan", tg_isnan},       {"isinf", tg_isinf}, {"isposinf", tg_isposinf},
             {"isneginf", tg_isneginf}, {"isfinite", tg_isfinite}, {"all", tg_all},
             {"any", tg_any},           {"square", tg_square}};
static const struct {
    const char *name;
    binary_fn fn;
} BINARY[] = {{"fmod", tg_fmod}, {"remainder", tg_remainder}, {"floor_divide", tg_floor_divide}};

/* The meta value "<c>.<what>" as a number. */
static double meta_num(const tg_st_file *f, const char *c, const char *what)
{
    return strtod(th_golden_meta(f, c, what), NULL);
}

/* nan_to_num's replacement "<c>.<what>" into *v; NULL for "default". */
static const double *replacement(const tg_st_file *f, const char *c, const char *what, double *v)
{
    const char *s = th_golden_meta(f, c, what);
    if (strcmp(s, "default") == 0) return NULL;
    *v = strtod(s, NULL);
    return v;
}

/* Runs golden case c's op on in[] into *y: its status. */
static int run_case(const tg_st_file *f, const char *c, tg_tensor **in, tg_tensor **y)
{
    const char *op = th_golden_meta(f, c, "op");
    for (size_t i = 0; i < sizeof UNARY / sizeof UNARY[0]; i++)
        if (strcmp(op, UNARY[i].name) == 0) return UNARY[i].fn(y, in[0]);
    for (size_t i = 0; i < sizeof BINARY / sizeof BINARY[0]; i++)
        if (strcmp(op, BINARY[i].name) == 0) return BINARY[i].fn(y, in[0], in[1]);
    if (strcmp(op, "fmod_scalar") == 0 || strcmp(op, "remainder_scalar") == 0)
        return (op[0] == 'f' ? tg_fmod_scalar : tg_remainder_scalar)(y, in[0],
                                                                     meta_num(f, c, "s"));
    if (strcmp(op, "all_dim") == 0 || strcmp(op, "any_dim") == 0)
        return (op[1] == 'l' ? tg_all_dim : tg_any_dim)(y, in[0], (int)meta_num(f, c, "dim"),
                                                        meta_num(f, c, "keepdim") != 0);
    if (strcmp(op, "addcmul") == 0 || strcmp(op, "addcdiv") == 0)
        return (op[4] == 'm' ? tg_addcmul : tg_addcdiv)(y, in[0], in[1], in[2],
                                                        meta_num(f, c, "s"));
    cr_assert(strncmp(op, "nan_to_num", 11) == 0, "%s: unknown op %s", c, op);
    double v[3];
    return tg_nan_to_num(y, in[0], replacement(f, c, "nan", &v[0]),
                         replacement(f, c, "posinf", &v[1]), replacement(f, c, "neginf", &v[2]));
}

/* got equals want: the bytes of an integer, the values of a float (NaN
 * matching NaN, a zero's sign counting). */
static void expect_equal(const char *what, const tg_tensor *got, const tg_tensor *want)
{
    cr_assert(got != NULL, "%s: no result", what);
    cr_assert(eq(int, tg_tensor_dtype(got), tg_tensor_dtype(want)), "%s: dtype %s, torch %s",
              what, tg_dtype_name(tg_tensor_dtype(got)), tg_dtype_name(tg_tensor_dtype(want)));
    if (tg_dtype_is_float(tg_tensor_dtype(want))) th_expect_close(what, got, want, 0);
    else th_expect_same_tensor_bytes(what, got, want);
}

/* An input's gradient: equal to torch's when the input has the result's
 * size (one product per element), else a sum over the broadcast dims,
 * which torch adds in the result's dtype and tapegrad in double: within n
 * ulps (of that dtype) of the largest element. */
static void expect_grad(const char *what, const tg_tensor *got, const tg_tensor *want,
                        const tg_tensor *w)
{
    cr_assert(got != NULL, "%s: no gradient", what);
    const int64_t n = tg_tensor_numel(w);
    if (tg_tensor_numel(want) == n) {
        expect_equal(what, got, want);
        return;
    }
    const tg_dtype dt = tg_tensor_dtype(w);   /* torch sums in the result's dtype */
    const double ulp = dt == TG_F64 ? 0x1p-52 : dt == TG_F32 ? 0x1p-23 : dt == TG_F16 ? 0x1p-10
                                                                                      : 0x1p-7;
    th_expect_close_scaled(what, got, want, (double)n * ulp);
}

/* One golden case: the refusal torch gives, or the values, and the
 * gradients of the inputs it lists. */
static void check_case(const tg_st_file *f, const char *c)
{
    const int n = (int)meta_num(f, c, "n");
    char grads[16], key[32];
    snprintf(grads, sizeof grads, "%s", th_golden_meta(f, c, "grads"));
    tg_tensor *in[3] = {NULL, NULL, NULL}, *y = NULL;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "in%d", i);
        in[i] = tg_tensor_retain((tg_tensor *)th_golden_get(f, c, key));
        if (strchr(grads, '0' + i)) {
            tg_tensor *leaf = th_leaf_clone(in[i]);
            tg_tensor_release(in[i]);
            in[i] = leaf;
        }
    }
    char what[128];
    snprintf(what, sizeof what, "%s (%s)", c, th_golden_meta(f, c, "op"));
    snprintf(key, sizeof key, "%s.err", c);
    const bool refused = tg_st_meta_get(f, key) != NULL;
    const int rc = run_case(f, c, in, &y);
    if (refused) {
        cr_assert(rc < 0 && y == NULL, "%s: torch refuses it, tapegrad gave %d", what, rc);
    } else {
        cr_assert(eq(int, rc, TG_OK), "%s: %s", what, tg_error_message());
        expect_equal(what, y, th_golden_get(f, c, "y"));
    }
    if (!refused && grads[0]) {
        const tg_tensor *w = th_golden_get(f, c, "w");
        OK(tg_backward(y, (tg_tensor *)w, NULL));
        for (int i = 0; i < n; i++) {
            if (!strchr(grads, '0' + i)) continue;
            char gw[200];
            snprintf(key, sizeof key, "g%d", i);
            snprintf(gw, sizeof gw, "%s d%s", what, key);
            expect_grad(gw, tg_tensor_grad(in[i]), th_golden_get(f, c, key), w);
        }
    }
    tg_tensor_release(y);
    th_release_all(3, in);
}

Test(predicates, goldens_match_pytorch)
{
    tg_st_file *f = th_golden_load("predicates.safetensors");
    const char *all = tg_st_meta_get(f, "cases");
    char *cases = strdup(all);
    int checked = 0;
    for (char *save, *c = strtok_r(cases, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        check_case(f, c);
        checked++;
    }
    cr_assert(checked >= 280, "only %d cases", checked);
    free(cases);
    tg_st_free(f);
}

/* ---- gradients in f64 ---- */

typedef enum { G_FMOD, G_REM, G_NAN_TO_NUM, G_SQUARE, G_ADDCMUL, G_ADDCDIV } gkind;

/* op(in) * in[0]: nonlinear beyond the op, so that gradgradcheck sees the
 * second derivative against a varying factor. */
static int g_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_tensor *y = NULL;
    const double big = 1e300;
    switch (*(const gkind *)user) {
    case G_FMOD: TG_TRY(tg_fmod(&y, in[0], in[1])); break;
    case G_REM: TG_TRY(tg_remainder(&y, in[0], in[1])); break;
    case G_NAN_TO_NUM: TG_TRY(tg_nan_to_num(&y, in[0], NULL, &big, NULL)); break;
    case G_SQUARE: TG_TRY(tg_square(&y, in[0])); break;
    case G_ADDCMUL: TG_TRY(tg_addcmul(&y, in[0], in[1], in[2], 0.75)); break;
    default: TG_TRY(tg_addcdiv(&y, in[0], in[1], in[2], -1.25)); break;
    }
    int rc = tg_mul(out, y, in[0]);
    tg_tensor_release(y);
    return rc;
}

Test(predicates, gradcheck_and_gradgradcheck_in_f64)
{
    /* no a / b near an integer, where the quotient jumps */
    tg_tensor *a = th_tensor_from(TG_F64, 2, (int64_t[]){2, 3},
                                  (double[]){5.3, -5.3, 7.7, -0.4, 2.2, -9.1});
    tg_tensor *b = th_tensor_from(TG_F64, 1, (int64_t[]){3}, (double[]){2.1, -1.3, 3.05});
    tg_tensor *c = th_seq(TG_F64, 2, (int64_t[]){2, 1}, 0.6, 1.7);
    tg_tensor *ins[3] = {a, b, c};
    for (int i = 0; i < 3; i++) OK(tg_tensor_set_requires_grad(ins[i], true));
    for (gkind k = G_FMOD; k <= G_ADDCDIV; k++) {
        const int n = k <= G_REM ? 2 : k <= G_SQUARE ? 1 : 3;
        cr_assert(eq(int, tg_gradcheck(g_fn, &k, n, ins, NULL), TG_OK), "kind %d: %s", k,
                  tg_error_message());
        cr_assert(eq(int, tg_gradgradcheck(g_fn, &k, n, ins, NULL), TG_OK), "kind %d: %s", k,
                  tg_error_message());
    }
    th_release_all(3, ins);
}

/* Where x is not finite nan_to_num's gradient is 0; elsewhere g. */
Test(predicates, nan_to_num_gradient_is_zero_at_nan_and_inf)
{
    tg_tensor *x = th_vec(TG_F32, 4, (double[]){1, NAN, INFINITY, -INFINITY}, "x", true), *y;
    tg_tensor *g = th_tensor_from(TG_F32, 1, (int64_t[]){4}, (double[]){2, 3, 4, 5});
    OK(tg_nan_to_num(&y, x, NULL, NULL, NULL));
    OK(tg_backward(y, g, NULL));
    const double want[4] = {2, 0, 0, 0};
    for (int i = 0; i < 4; i++) cr_assert(eq(dbl, th_at(tg_tensor_grad(x), i), want[i]));
    cr_assert(eq(dbl, th_at(y, 2), 0x1.fffffep127));
    th_release_all(3, (tg_tensor *[]){x, g, y});
}

/* floor_divide's forward takes inputs that require grad; its backward is
 * refused as torch's "derivative ... is not implemented". */
Test(predicates, floor_divide_backward_is_refused)
{
    tg_tensor *a = th_vec(TG_F64, 2, (double[]){7, -7}, "a", true), *y = NULL;
    tg_tensor *b = th_vec(TG_F64, 2, (double[]){2, 2}, "b", false);
    OK(tg_floor_divide(&y, a, b));
    cr_assert(eq(dbl, th_at(y, 0), 3.0));
    cr_assert(eq(dbl, th_at(y, 1), -4.0));
    cr_assert(tg_tensor_requires_grad(y));
    cr_assert(eq(int, tg_backward(y, b, NULL), TG_EGRAD));
    cr_assert(strstr(tg_error_message(), "floor_divide") != NULL, "%s", tg_error_message());
    cr_assert(tg_tensor_grad(a) == NULL);
    th_release_all(3, (tg_tensor *[]){a, b, y});
}

/* ---- integer extremes ---- */

/* The most negative i64 and i32 by -1, which torch computes with the CPU's
 * division (a crash): fmod and remainder 0, floor_divide the value itself
 * (modulo 2^bits, as i8 -128 // -1 is -128 in torch); by 1 and by 2 as
 * division. */
Test(predicates, most_negative_integer_by_minus_one_wraps)
{
    const tg_dtype dts[2] = {TG_I64, TG_I32};
    const double mins[2] = {-0x1p63, -0x1p31};
    for (int d = 0; d < 2; d++) {
        tg_tensor *a = th_tensor_from(dts[d], 1, (int64_t[]){3},
                                      (double[]){mins[d], mins[d], mins[d]});
        tg_tensor *b = th_tensor_from(dts[d], 1, (int64_t[]){3}, (double[]){-1, 1, 2});
        tg_tensor *y[3] = {NULL, NULL, NULL};
        OK(tg_fmod(&y[0], a, b));
        OK(tg_remainder(&y[1], a, b));
        OK(tg_floor_divide(&y[2], a, b));
        const double want[3][3] = {{0, 0, 0}, {0, 0, 0}, {mins[d], mins[d], mins[d] / 2}};
        for (int k = 0; k < 3; k++) {
            cr_assert(eq(int, tg_tensor_dtype(y[k]), dts[d]));
            for (int i = 0; i < 3; i++)
                cr_assert(eq(dbl, th_at(y[k], i), want[k][i]), "dtype %d op %d [%d]: %g", d, k,
                          i, th_at(y[k], i));
        }
        th_release_all(3, y);
        th_release_all(2, (tg_tensor *[]){a, b});
    }
}

/* ---- refusals ---- */

Test(predicates, refusals_name_the_argument_and_leave_nothing)
{
    tg_tensor *f = th_seq(TG_F32, 2, (int64_t[]){2, 3}, -1, 1);
    tg_tensor *g = th_seq(TG_F32, 1, (int64_t[]){4}, -1, 1);
    tg_tensor *i = th_tensor_from(TG_I32, 1, (int64_t[]){3}, (double[]){4, 5, 6});
    tg_tensor *z = th_tensor_from(TG_I32, 1, (int64_t[]){3}, (double[]){1, 0, 2});
    tg_tensor *i8 = th_tensor_from(TG_I8, 1, (int64_t[]){1}, (double[]){1});
    tg_tensor *u8 = th_tensor_from(TG_U8, 1, (int64_t[]){1}, (double[]){1});
    th_expect_refused_clean(tg_isnan(out_, NULL), TG_EINVAL, "isnan: x");
    th_expect_refused_clean(tg_all(out_, NULL), TG_EINVAL, "all: x");
    th_expect_refused_clean(tg_any_dim(out_, f, 2, false), TG_EINVAL, "any_dim");
    th_expect_refused_clean(tg_all_dim(out_, f, -3, true), TG_EINVAL, "all_dim");
    th_expect_refused_clean(tg_nan_to_num(out_, NULL, NULL, NULL, NULL), TG_EINVAL,
                            "nan_to_num: x");
    th_expect_refused_clean(tg_fmod(out_, f, NULL), TG_EINVAL, "fmod: b");
    th_expect_refused_clean(tg_remainder(out_, NULL, f), TG_EINVAL, "remainder: a");
    th_expect_refused_clean(tg_floor_divide(out_, f, g), TG_ESHAPE, "floor_divide");
    th_expect_refused_clean(tg_fmod(out_, i, z), TG_EINVAL, "ZeroDivisionError");
    th_expect_refused_clean(tg_floor_divide(out_, i, z), TG_EINVAL, "b is 0 at element 1");
    th_expect_refused_clean(tg_remainder(out_, i8, u8), TG_EDTYPE, "int16");
    th_expect_refused_clean(tg_remainder_scalar(out_, i, 0), TG_EINVAL, "ZeroDivisionError");
    th_expect_refused_clean(tg_fmod_scalar(out_, i, 2.5), TG_EDTYPE, "s=2.5");
    th_expect_refused_clean(tg_fmod_scalar(out_, NULL, 2.5), TG_EINVAL, "fmod_scalar: a");
    th_expect_refused_clean(tg_addcmul(out_, f, NULL, f, 1), TG_EINVAL, "addcmul: tensor1");
    th_expect_refused_clean(tg_addcdiv(out_, f, f, NULL, 1), TG_EINVAL, "addcdiv: tensor2");
    th_expect_refused_clean(tg_addcdiv(out_, f, i, i, 1), TG_EDTYPE, "both integers");
    th_expect_refused_clean(tg_addcmul(out_, i, i, i, 0.5), TG_EDTYPE, "value=0.5");
    th_expect_refused_clean(tg_addcmul(out_, f, f, g, 1), TG_ESHAPE, "addcmul");
    th_expect_refused_clean(tg_square(out_, NULL), TG_EINVAL, "square: x");
    cr_assert(tg_isinf(NULL, f) == TG_EINVAL);
    cr_assert(tg_addcdiv(NULL, f, f, f, 1) == TG_EINVAL);
    th_release_all(6, (tg_tensor *[]){f, g, i, z, i8, u8});
}
