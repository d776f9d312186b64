/* tests/test_ops.c - elementwise binary, scalar, unary, activation and cast ops.
 * (What the activations keep on the tape, their one-pass backward and their
 * torch goldens are in test_activation.c.)
 *
 * Forward values are compared with naive double loops written here; gradients
 * with tg_gradcheck / tg_gradgradcheck in f64; f16/bf16 forwards with the f32
 * result rounded once. */
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <criterion/parameterized.h>

#include "helpers.h"
#include "internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"

/* ---- helpers ---- */

static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double ref_gelu(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

/* ---- op tables ---- */

typedef int (*unary_fn)(tg_tensor **, tg_tensor *);
typedef int (*binary_fn)(tg_tensor **, tg_tensor *, tg_tensor *);

static int add_s(tg_tensor **o, tg_tensor *a) { return tg_add_scalar(o, a, 1.5); }
static int sub_s(tg_tensor **o, tg_tensor *a) { return tg_sub_scalar(o, a, 1.5); }
static int rsub_s(tg_tensor **o, tg_tensor *a) { return tg_rsub_scalar(o, a, 1.5); }
static int mul_s(tg_tensor **o, tg_tensor *a) { return tg_mul_scalar(o, a, -2.5); }
static int div_s(tg_tensor **o, tg_tensor *a) { return tg_div_scalar(o, a, 4.0); }
static int pow_s(tg_tensor **o, tg_tensor *a) { return tg_pow_scalar(o, a, 2.5); }
static int pow_s0(tg_tensor **o, tg_tensor *a) { return tg_pow_scalar(o, a, 0.0); }
static int leaky(tg_tensor **o, tg_tensor *a) { return tg_leaky_relu(o, a, 0.1); }

static double r_add_s(double x) { return x + 1.5; }
static double r_sub_s(double x) { return x - 1.5; }
static double r_rsub_s(double x) { return 1.5 - x; }
static double r_mul_s(double x) { return x * -2.5; }
static double r_div_s(double x) { return x / 4.0; }
static double r_pow_s(double x) { return pow(x, 2.5); }
static double r_pow_s0(double x) { return 1.0; }
static double r_neg(double x) { return -x; }
static double r_relu(double x) { return x > 0 ? x : 0.0; }
static double r_leaky(double x) { return x > 0 ? x : 0.1 * x; }
static double r_silu(double x) { return x * ref_sigmoid(x); }

typedef struct unary_case {
    const char *name;
    unary_fn op;
    double (*ref)(double);
    double lo, hi;   /* input range: avoids kinks and invalid domains */
    bool gradgrad;
} unary_case;

static const unary_case unary_cases[] = {
    {"add_scalar", add_s, r_add_s, -2, 2, false},
    {"sub_scalar", sub_s, r_sub_s, -2, 2, false},
    {"rsub_scalar", rsub_s, r_rsub_s, -2, 2, false},
    {"mul_scalar", mul_s, r_mul_s, -2, 2, false},
    {"div_scalar", div_s, r_div_s, -2, 2, false},
    {"pow_scalar", pow_s, r_pow_s, 0.5, 2, true},
    {"pow_scalar0", pow_s0, r_pow_s0, 0.5, 2, false},
    {"neg", tg_neg, r_neg, -2, 2, false},
    {"exp", tg_exp, exp, -2, 2, true},
    {"log", tg_log, log, 0.5, 3, true},
    {"sqrt", tg_sqrt, sqrt, 0.5, 3, false},
    {"abs", tg_abs, fabs, -2, 2, false},
    {"erf", tg_erf, erf, -2, 2, false},
    {"relu", tg_relu, r_relu, -2, 2, false},
    {"leaky_relu", leaky, r_leaky, -2, 2, false},
    {"tanh", tg_tanh, tanh, -2, 2, true},
    {"sigmoid", tg_sigmoid, ref_sigmoid, -3, 3, true},
    {"silu", tg_silu, r_silu, -3, 3, true},
    {"gelu", tg_gelu, ref_gelu, -3, 3, true},
};
#define N_UNARY ((int)(sizeof unary_cases / sizeof unary_cases[0]))

static double r_add(double a, double b) { return a + b; }
static double r_sub(double a, double b) { return a - b; }
static double r_mul(double a, double b) { return a * b; }
static double r_div(double a, double b) { return a / b; }

typedef struct binary_case {
    const char *name;
    binary_fn op;
    double (*ref)(double, double);
    double alo, ahi, blo, bhi;
    bool gradgrad;
} binary_case;

static const binary_case binary_cases[] = {
    {"add", tg_add, r_add, -2, 2, -2, 2, false},
    {"sub", tg_sub, r_sub, -2, 2, -2, 2, false},
    {"mul", tg_mul, r_mul, -2, 2, -2, 2, true},
    {"div", tg_div, r_div, -2, 2, 0.5, 2, true},
    {"pow", tg_pow, pow, 0.5, 2, -1.5, 1.5, true},
};
#define N_BINARY ((int)(sizeof binary_cases / sizeof binary_cases[0]))

/* ---- forward values ---- */

/* (2,1,3) op (4,1) broadcasts to (2,4,3): out[i,j,k] = a[i,0,k] op b[j,0]. */
static void check_binary_broadcast(const binary_case *c, tg_dtype dt, double rtol)
{
    int64_t sa[3] = {2, 1, 3}, sb[2] = {4, 1};
    tg_tensor *a = th_seq(dt, 3, sa, c->alo, c->ahi), *b = th_seq(dt, 2, sb, c->blo, c->bhi), *y = NULL;
    cr_assert(eq(int, c->op(&y, a, b), TG_OK), "%s: %s", c->name, tg_error_message());
    cr_assert(eq(int, tg_tensor_ndim(y), 3));
    cr_assert(eq(i64, tg_tensor_dim(y, 0), 2));
    cr_assert(eq(i64, tg_tensor_dim(y, 1), 4));
    cr_assert(eq(i64, tg_tensor_dim(y, 2), 3));
    cr_assert(eq(int, tg_tensor_dtype(y), dt));
    double *va = th_doubles(a), *vb = th_doubles(b), *vy = th_doubles(y);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++) {
                double want = c->ref(va[i * 3 + k], vb[j]), got = vy[(i * 4 + j) * 3 + k];
                cr_assert(th_close(got, want, rtol, 1e-300), "%s [%d,%d,%d]: %g vs %g", c->name, i,
                          j, k, got, want);
            }
    free(va), free(vb), free(vy);
    tg_tensor_release(a), tg_tensor_release(b), tg_tensor_release(y);
}

Test(ops, binary_broadcast_matches_naive_loop)
{
    for (int i = 0; i < N_BINARY; i++) {
        check_binary_broadcast(&binary_cases[i], TG_F64, 1e-15);
        check_binary_broadcast(&binary_cases[i], TG_F32, 2e-7);
    }
}

Test(ops, binary_with_0d_scalar_tensor)
{
    int64_t sa[2] = {2, 3};
    for (int c = 0; c < N_BINARY; c++) {
        const binary_case *bc = &binary_cases[c];
        tg_tensor *a = th_seq(TG_F64, 2, sa, bc->alo, bc->ahi), *s = NULL, *y = NULL, *z = NULL;
        cr_assert(eq(int, tg_tensor_scalar(&s, TG_F64, 0.75), TG_OK));
        cr_assert(eq(int, bc->op(&y, a, s), TG_OK));
        cr_assert(eq(int, bc->op(&z, s, a), TG_OK));
        cr_assert(eq(int, tg_tensor_ndim(y), 2));
        cr_assert(eq(int, tg_tensor_ndim(z), 2));
        double *va = th_doubles(a), *vy = th_doubles(y), *vz = th_doubles(z);
        for (int i = 0; i < 6; i++) {
            cr_assert(th_close(vy[i], bc->ref(va[i], 0.75), 1e-15, 0), "%s", bc->name);
            cr_assert(th_close(vz[i], bc->ref(0.75, va[i]), 1e-15, 0), "%s", bc->name);
        }
        free(va), free(vy), free(vz);
        tg_tensor_release(a), tg_tensor_release(s), tg_tensor_release(y), tg_tensor_release(z);
    }
}

/* A (2,3) view with strides (1,2) of a (3,2) buffer: element [i][j] is
 * base[j*2 + i]. */
Test(ops, transposed_input_is_read_through_strides)
{
    int64_t sb[2] = {3, 2}, sv[2] = {2, 3}, st[2] = {1, 2}, sc[1] = {3};
    for (int d = 0; d < 2; d++) {
        tg_dtype dt = d == 0 ? TG_F64 : TG_F32;
        tg_tensor *base = th_seq(dt, 2, sb, -2, 2), *c = th_seq(dt, 1, sc, -1, 1), *y = NULL, *e = NULL;
        tg_tensor *v = tg__tensor_view_of(base->storage, dt, 2, sv, st, 0);
        cr_assert(eq(int, tg_tensor_is_contiguous(v), 0));
        cr_assert(eq(int, tg_add(&y, v, c), TG_OK));
        cr_assert(eq(int, tg_exp(&e, v), TG_OK));
        double *vb = th_doubles(base), *vc = th_doubles(c), *vy = th_doubles(y),
               *ve = th_doubles(e);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) {
                double x = vb[j * 2 + i];
                cr_assert(th_close(vy[i * 3 + j], x + vc[j], 2e-7, 0));
                cr_assert(th_close(ve[i * 3 + j], exp(x), 2e-7, 0));
            }
        free(vb), free(vc), free(vy), free(ve);
        tg_tensor_release(base), tg_tensor_release(c), tg_tensor_release(v);
        tg_tensor_release(y), tg_tensor_release(e);
    }
}

Test(ops, unary_matches_reference)
{
    int64_t sh[2] = {3, 7};
    for (int c = 0; c < N_UNARY; c++) {
        const unary_case *uc = &unary_cases[c];
        for (int d = 0; d < 2; d++) {
            tg_dtype dt = d == 0 ? TG_F64 : TG_F32;
            tg_tensor *a = th_seq(dt, 2, sh, uc->lo, uc->hi), *y = NULL;
            cr_assert(eq(int, uc->op(&y, a), TG_OK), "%s: %s", uc->name, tg_error_message());
            cr_assert(eq(int, tg_tensor_dtype(y), dt));
            cr_assert(tg_tensor_same_shape(a, y));
            double *va = th_doubles(a), *vy = th_doubles(y);
            for (int i = 0; i < 21; i++)
                cr_assert(th_close(vy[i], uc->ref(va[i]), d == 0 ? 1e-14 : 3e-7, 1e-30),
                          "%s(%g) = %g, want %g", uc->name, va[i], vy[i], uc->ref(va[i]));
            free(va), free(vy);
            tg_tensor_release(a), tg_tensor_release(y);
        }
    }
}

Test(ops, sigmoid_family_is_stable_for_large_inputs)
{
    int64_t sh[1] = {4};
    tg_tensor *a = NULL, *s = NULL, *si = NULL, *g = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&a, TG_F64, 1, sh), TG_OK));
    double xs[4] = {-800, -700, 700, 800};
    for (int i = 0; i < 4; i++) tg_tensor_set_flat(a, i, xs[i]);
    cr_assert(eq(int, tg_sigmoid(&s, a), TG_OK));
    cr_assert(eq(int, tg_silu(&si, a), TG_OK));
    cr_assert(eq(int, tg_gelu(&g, a), TG_OK));
    double *vs = th_doubles(s), *vsi = th_doubles(si), *vg = th_doubles(g);
    /* sigmoid(x) = e^x / (1 + e^x) = e^x (1 - e^x + ...) for x << 0. */
    cr_assert(eq(dbl, vs[0], 0.0));
    cr_assert(th_close(vs[1], exp(-700.0), 1e-14, 0));
    cr_assert(eq(dbl, vs[2], 1.0));
    cr_assert(eq(dbl, vs[3], 1.0));
    for (int i = 0; i < 4; i++) cr_assert(eq(int, isnan(vsi[i]) || isnan(vg[i]), 0));
    cr_assert(eq(dbl, vsi[3], 800.0));
    cr_assert(eq(dbl, vg[3], 800.0));
    cr_assert(fabs(vg[0]) < 1e-300 && fabs(vsi[0]) < 1e-300);
    free(vs), free(vsi), free(vg);
    tg_tensor_release(a), tg_tensor_release(s), tg_tensor_release(si), tg_tensor_release(g);
}

Test(ops, log_of_nonpositive_is_inf_or_nan_not_an_error)
{
    int64_t sh[1] = {3};
    tg_tensor *a = NULL, *y = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&a, TG_F32, 1, sh), TG_OK));
    tg_tensor_set_flat(a, 1, -1.0);
    tg_tensor_set_flat(a, 2, 1.0);
    cr_assert(eq(int, tg_log(&y, a), TG_OK));
    double *v = th_doubles(y);
    cr_assert(isinf(v[0]) && v[0] < 0);
    cr_assert(isnan(v[1]));
    cr_assert(eq(dbl, v[2], 0.0));
    free(v);
    tg_tensor_release(a), tg_tensor_release(y);
}

/* PyTorch's conventions at the edges (values from PyTorch 1.13): d(a^b)/da
 * is 0 where b = 0, also at a = 0; d|a|/da is 0 at 0, -0 and NaN. */
Test(ops, pow_and_abs_gradients_at_the_edges_as_pytorch)
{
    double av[4] = {0, 0, -2, 0}, bv[4] = {0, 2, 2, -1}, want_pow[4] = {0, 0, -4, -INFINITY};
    double xv[4] = {0, -0.0, -2, NAN}, want_abs[4] = {0, 0, -1, 0};
    tg_tensor *a = th_tensor_from(TG_F64, 1, (int64_t[]){4}, av);
    tg_tensor *b = th_tensor_from(TG_F64, 1, (int64_t[]){4}, bv);
    tg_tensor *x = th_tensor_from(TG_F64, 1, (int64_t[]){4}, xv), *p = NULL, *s = NULL;
    tg_tensor_set_requires_grad(a, true);
    tg_tensor_set_requires_grad(x, true);
    cr_assert(eq(int, tg_pow(&p, a, b), TG_OK));
    cr_assert(eq(int, tg_sum(&s, p), TG_OK));
    cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_OK));
    for (int i = 0; i < 4; i++)
        cr_assert(th_at(tg_tensor_grad(a), i) == want_pow[i], "pow: a.grad[%d] = %g", i,
                  th_at(tg_tensor_grad(a), i));
    tg_tensor_release(s), tg_tensor_release(p);
    cr_assert(eq(int, tg_abs(&p, x), TG_OK));
    cr_assert(eq(int, tg_sum(&s, p), TG_OK));
    cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_OK));
    for (int i = 0; i < 4; i++)
        cr_assert(th_at(tg_tensor_grad(x), i) == want_abs[i] && !signbit(th_at(tg_tensor_grad(x), i)) == (i != 2),
                  "abs: x.grad[%d] = %g", i, th_at(tg_tensor_grad(x), i));
    tg_tensor_release(s), tg_tensor_release(p);
    tg_tensor_release(a), tg_tensor_release(b), tg_tensor_release(x);
}

Test(ops, empty_tensors_broadcast_to_empty)
{
    int64_t sa[2] = {0, 3}, sb[1] = {3};
    tg_tensor *a = th_seq(TG_F32, 2, sa, 0, 1), *b = th_seq(TG_F32, 1, sb, 0, 1), *y = NULL;
    cr_assert(eq(int, tg_mul(&y, a, b), TG_OK));
    cr_assert(eq(i64, tg_tensor_numel(y), 0));
    cr_assert(eq(i64, tg_tensor_dim(y, 1), 3));
    tg_tensor_release(a), tg_tensor_release(b), tg_tensor_release(y);
}

/* ---- f16 / bf16: computed in f32, rounded once ---- */

static uint16_t round_half(tg_dtype dt, double v)
{
    return dt == TG_F16 ? tg_f32_to_f16((float)v) : tg_f32_to_bf16((float)v);
}

static void check_half_unary(const unary_case *uc, tg_dtype dt)
{
    int64_t sh[1] = {16};
    tg_tensor *a32 = th_seq(TG_F32, 1, sh, uc->lo, uc->hi), *ah = NULL, *ah32 = NULL;
    tg_tensor *yh = NULL, *y32 = NULL;
    cr_assert(eq(int, tg_tensor_to_dtype(&ah, a32, dt), TG_OK));
    /* The f32 reference starts from the half values, so only the op differs. */
    cr_assert(eq(int, tg_tensor_to_dtype(&ah32, ah, TG_F32), TG_OK));
    cr_assert(eq(int, uc->op(&yh, ah), TG_OK), "%s", uc->name);
    cr_assert(eq(int, uc->op(&y32, ah32), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(yh), dt));
    const uint16_t *bits = tg_tensor_cdata(yh);
    double *v = th_doubles(y32);
    for (int i = 0; i < 16; i++)
        cr_assert(eq(u16, bits[i], round_half(dt, v[i])), "%s %s [%d]", uc->name,
                  tg_dtype_name(dt), i);
    free(v);
    tg_tensor_release(a32), tg_tensor_release(ah), tg_tensor_release(ah32);
    tg_tensor_release(yh), tg_tensor_release(y32);
}

static void check_half_binary(const binary_case *bc, tg_dtype dt)
{
    int64_t sa[2] = {4, 3}, sb[1] = {3};
    tg_tensor *a = th_seq(TG_F32, 2, sa, bc->alo, bc->ahi), *b = th_seq(TG_F32, 1, sb, bc->blo, bc->bhi);
    tg_tensor *ah = NULL, *bh = NULL, *a2 = NULL, *b2 = NULL, *yh = NULL, *y32 = NULL;
    cr_assert(eq(int, tg_tensor_to_dtype(&ah, a, dt), TG_OK));
    cr_assert(eq(int, tg_tensor_to_dtype(&bh, b, dt), TG_OK));
    cr_assert(eq(int, tg_tensor_to_dtype(&a2, ah, TG_F32), TG_OK));
    cr_assert(eq(int, tg_tensor_to_dtype(&b2, bh, TG_F32), TG_OK));
    cr_assert(eq(int, bc->op(&yh, ah, bh), TG_OK), "%s", bc->name);
    cr_assert(eq(int, bc->op(&y32, a2, b2), TG_OK));
    const uint16_t *bits = tg_tensor_cdata(yh);
    double *v = th_doubles(y32);
    for (int i = 0; i < 12; i++)
        cr_assert(eq(u16, bits[i], round_half(dt, v[i])), "%s %s [%d]", bc->name,
                  tg_dtype_name(dt), i);
    free(v);
    tg_tensor_release(a), tg_tensor_release(b), tg_tensor_release(ah), tg_tensor_release(bh);
    tg_tensor_release(a2), tg_tensor_release(b2), tg_tensor_release(yh), tg_tensor_release(y32);
}

Test(ops, half_precision_equals_f32_rounded_once)
{
    tg_dtype dts[2] = {TG_F16, TG_BF16};
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < N_UNARY; i++) check_half_unary(&unary_cases[i], dts[d]);
        for (int i = 0; i < N_BINARY; i++) check_half_binary(&binary_cases[i], dts[d]);
    }
}

/* ---- gradients (f64) ---- */

static int unary_fn_call(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return ((const unary_case *)user)->op(out, in[0]);
}

static int binary_fn_call(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return ((const binary_case *)user)->op(out, in[0], in[1]);
}

ParameterizedTestParameters(ops, unary_gradcheck)
{
    static int idx[N_UNARY];
    for (int i = 0; i < N_UNARY; i++) idx[i] = i;
    return cr_make_param_array(int, idx, N_UNARY);
}

ParameterizedTest(int *ci, ops, unary_gradcheck)
{
    const unary_case *uc = &unary_cases[*ci];
    int64_t sh[2] = {2, 3};
    tg_tensor *a = th_seq(TG_F64, 2, sh, uc->lo, uc->hi);
    tg_tensor_set_requires_grad(a, true);
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    cr_assert(eq(int, tg_gradcheck(unary_fn_call, (void *)uc, 1, &a, &o), TG_OK), "%s: %s",
              uc->name, tg_error_message());
    if (uc->gradgrad)
        cr_assert(eq(int, tg_gradgradcheck(unary_fn_call, (void *)uc, 1, &a, &o), TG_OK),
                  "%s: %s", uc->name, tg_error_message());
    tg_tensor_release(a);
}

ParameterizedTestParameters(ops, binary_gradcheck)
{
    static int idx[N_BINARY];
    for (int i = 0; i < N_BINARY; i++) idx[i] = i;
    return cr_make_param_array(int, idx, N_BINARY);
}

/* Same shapes, then broadcasting (2,1,3) with (4,1) so the gradients are
 * summed back over the stretched dims. */
ParameterizedTest(int *ci, ops, binary_gradcheck)
{
    const binary_case *bc = &binary_cases[*ci];
    int64_t s23[2] = {2, 3}, sa[3] = {2, 1, 3}, sb[2] = {4, 1};
    for (int pass = 0; pass < 2; pass++) {
        tg_tensor *in[2] = {th_seq(TG_F64, pass ? 3 : 2, pass ? sa : s23, bc->alo, bc->ahi),
                            th_seq(TG_F64, 2, pass ? sb : s23, bc->blo, bc->bhi)};
        tg_tensor_set_requires_grad(in[0], true);
        tg_tensor_set_requires_grad(in[1], true);
        tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
        cr_assert(eq(int, tg_gradcheck(binary_fn_call, (void *)bc, 2, in, &o), TG_OK), "%s: %s",
                  bc->name, tg_error_message());
        if (bc->gradgrad)
            cr_assert(eq(int, tg_gradgradcheck(binary_fn_call, (void *)bc, 2, in, &o), TG_OK),
                      "%s: %s", bc->name, tg_error_message());
        tg_tensor_release(in[0]), tg_tensor_release(in[1]);
    }
}

/* ---- to_dtype ---- */

Test(ops, to_dtype_converts_and_same_dtype_is_the_same_tensor)
{
    int64_t sh[1] = {5};
    tg_tensor *a = th_seq(TG_F64, 1, sh, -3, 3), *y = NULL, *same = NULL, *i = NULL;
    cr_assert(eq(int, tg_to_dtype(&y, a, TG_F32), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    double *va = th_doubles(a), *vy = th_doubles(y);
    for (int k = 0; k < 5; k++) cr_assert(eq(dbl, vy[k], (double)(float)va[k]));
    cr_assert(eq(int, tg_to_dtype(&same, a, TG_F64), TG_OK));
    cr_assert(eq(ptr, same, a));
    cr_assert(eq(int, tg_tensor_refcount(a), 2));
    cr_assert(eq(int, tg_to_dtype(&i, a, TG_I32), TG_OK));
    double *vi = th_doubles(i);
    for (int k = 0; k < 5; k++) cr_assert(eq(dbl, vi[k], trunc(va[k])));   /* as torch */
    free(va), free(vy), free(vi);
    tg_tensor_release(a), tg_tensor_release(y), tg_tensor_release(same), tg_tensor_release(i);
}

Test(ops, to_dtype_gradient_comes_back_in_input_dtype)
{
    int64_t sh[2] = {2, 2};
    tg_tensor *x = th_seq(TG_F32, 2, sh, -1, 1), *y = NULL, *z = NULL, *ones = NULL;
    tg_tensor_set_requires_grad(x, true);
    cr_assert(eq(int, tg_to_dtype(&y, x, TG_F64), TG_OK));
    cr_assert(eq(int, tg_mul_scalar(&z, y, 3.0), TG_OK));
    cr_assert(eq(int, tg_tensor_full(&ones, TG_F64, 2, sh, 1.0), TG_OK));
    cr_assert(eq(int, tg_backward(z, ones, NULL), TG_OK), "%s", tg_error_message());
    tg_tensor *g = tg_tensor_grad(x);
    cr_assert(not(eq(ptr, g, NULL)));
    cr_assert(eq(int, tg_tensor_dtype(g), TG_F32));
    double *vg = th_doubles(g);
    for (int k = 0; k < 4; k++) cr_assert(eq(dbl, vg[k], 3.0));
    free(vg);
    tg_tensor_release(x), tg_tensor_release(y), tg_tensor_release(z), tg_tensor_release(ones);
}

/* ---- dtype promotion and AMP policies ---- */

Test(ops, mixed_float_dtypes_promote_in_binary_ops)
{
    int64_t sh[1] = {3};
    tg_tensor *a = th_seq(TG_F32, 1, sh, -1, 1), *b = th_seq(TG_F64, 1, sh, -1, 1), *y = NULL;
    cr_assert(eq(int, tg_mul(&y, a, b), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F64));
    double *va = th_doubles(a), *vb = th_doubles(b), *vy = th_doubles(y);
    for (int i = 0; i < 3; i++) cr_assert(eq(dbl, vy[i], va[i] * vb[i]));
    free(va), free(vb), free(vy);
    tg_tensor_release(a), tg_tensor_release(b), tg_tensor_release(y);
}

Test(ops, amp_policies_are_registered)
{
    static const struct {
        const char *name;
        tg_amp_policy amp;
    } want[] = {
        {"add", TG_AMP_PROMOTE},      {"sub", TG_AMP_PROMOTE},     {"mul", TG_AMP_PROMOTE},
        {"div", TG_AMP_PROMOTE},      {"pow", TG_AMP_PROMOTE},     {"exp", TG_AMP_FP32},
        {"log", TG_AMP_FP32},         {"sqrt", TG_AMP_FP32},       {"pow_scalar", TG_AMP_FP32},
        {"neg", TG_AMP_KEEP},         {"abs", TG_AMP_KEEP},        {"erf", TG_AMP_KEEP},
        {"relu", TG_AMP_KEEP},        {"gelu", TG_AMP_KEEP},       {"mul_scalar", TG_AMP_KEEP},
        {"add_scalar", TG_AMP_KEEP},  {"to_dtype", TG_AMP_KEEP},   {"leaky_relu", TG_AMP_KEEP},
        {"tanh", TG_AMP_KEEP},        {"sigmoid", TG_AMP_KEEP},    {"silu", TG_AMP_KEEP},
        {"rsub_scalar", TG_AMP_KEEP}, {"sub_scalar", TG_AMP_KEEP}, {"div_scalar", TG_AMP_KEEP},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        tg_op_info info;
        cr_assert(eq(int, tg_op_info_find(want[i].name, &info), TG_OK), "%s", want[i].name);
        cr_assert(eq(int, info.amp, want[i].amp), "%s", want[i].name);
        cr_assert(info.has_backward && info.has_double_backward, "%s", want[i].name);
    }
}

/* ---- errors: status, message, nothing changed ---- */

Test(ops, mismatched_shapes_are_eshape)
{
    int64_t sa[2] = {2, 3}, sb[1] = {4};
    tg_tensor *a = th_seq(TG_F32, 2, sa, 0, 1), *b = th_seq(TG_F32, 1, sb, 0, 1), *y = NULL;
    uint64_t va = tg_tensor_version(a), vb = tg_tensor_version(b);
    cr_assert(eq(int, tg_add(&y, a, b), TG_ESHAPE));
    cr_assert(eq(ptr, y, NULL));
    cr_assert(not(eq(ptr, strstr(tg_error_message(), "cannot be broadcast: dim 1 has 3 vs 4"), NULL)),
              "%s", tg_error_message());
    cr_assert(eq(int, tg_mul(&y, b, a), TG_ESHAPE));
    cr_assert(eq(ptr, y, NULL));
    cr_assert(eq(u64, tg_tensor_version(a), va));
    cr_assert(eq(u64, tg_tensor_version(b), vb));
    cr_assert(eq(int, tg_tensor_refcount(a), 1));
    cr_assert(eq(int, tg_tensor_refcount(b), 1));
    tg_tensor_release(a), tg_tensor_release(b);
}

Test(ops, integer_inputs_are_edtype)
{
    int64_t sh[1] = {3};
    tg_tensor *f = th_seq(TG_F32, 1, sh, 0, 1), *i = NULL, *y = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&i, TG_I32, 1, sh), TG_OK));
    cr_assert(eq(int, tg_mul(&y, f, i), TG_EDTYPE));
    cr_assert(eq(ptr, y, NULL));
    cr_assert(not(eq(ptr, strstr(tg_error_message(), "input 1 has dtype i32"), NULL)), "%s",
              tg_error_message());
    cr_assert(eq(int, tg_relu(&y, i), TG_EDTYPE));
    cr_assert(eq(ptr, y, NULL));
    cr_assert(eq(int, tg_add_scalar(&y, i, 1.0), TG_EDTYPE));
    cr_assert(eq(ptr, y, NULL));
    cr_assert(eq(int, tg_exp(&y, i), TG_EDTYPE));
    cr_assert(eq(ptr, y, NULL));
    tg_tensor_release(f), tg_tensor_release(i);
}

Test(ops, keep_policy_rejects_mixed_dtypes_in_forward)
{
    int64_t sh[1] = {3};
    tg_tensor *a = th_seq(TG_F32, 1, sh, 0, 1), *b = th_seq(TG_F64, 1, sh, 0, 1), *y = NULL;
    /* The raw helper is what every forward runs after dispatch. */
    cr_assert(eq(int, tg__ew_binary("mul", &y, a, b, NULL, 0.0), TG_EDTYPE));
    cr_assert(eq(ptr, y, NULL));
    cr_assert(not(eq(ptr, strstr(tg_error_message(), "f32 and f64"), NULL)), "%s",
              tg_error_message());
    tg_tensor_release(a), tg_tensor_release(b);
}

Test(ops, null_inputs_are_einval)
{
    int64_t sh[1] = {3};
    tg_tensor *a = th_seq(TG_F32, 1, sh, 0, 1), *y = NULL;
    cr_assert(eq(int, tg_add(&y, a, NULL), TG_EINVAL));
    cr_assert(eq(ptr, y, NULL));
    cr_assert(eq(int, tg_sub(&y, NULL, a), TG_EINVAL));
    cr_assert(eq(int, tg_neg(&y, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_gelu(&y, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_mul_scalar(&y, NULL, 2.0), TG_EINVAL));
    cr_assert(eq(int, tg_to_dtype(&y, NULL, TG_F32), TG_EINVAL));
    cr_assert(eq(int, tg_to_dtype(&y, a, (tg_dtype)99), TG_EINVAL));
    cr_assert(eq(ptr, y, NULL));
    cr_assert(eq(int, tg_tensor_refcount(a), 1));
    tg_tensor_release(a);
}

/* Every one-input elementwise op given a NULL input: TG_EINVAL naming the op
 * and the input, *out untouched (relu and leaky_relu read the input's dtype
 * for their half-precision path first, and crashed). */
Test(ops, every_unary_op_refuses_a_null_input)
{
    static const struct {
        const char *name;
        int (*f)(tg_tensor **, tg_tensor *);
    } u[] = {{"neg", tg_neg},   {"exp", tg_exp},         {"log", tg_log},   {"sqrt", tg_sqrt},
             {"abs", tg_abs},   {"erf", tg_erf},         {"relu", tg_relu}, {"tanh", tg_tanh},
             {"sigmoid", tg_sigmoid}, {"silu", tg_silu}, {"gelu", tg_gelu}};
    static const struct {
        const char *name;
        int (*f)(tg_tensor **, tg_tensor *, double);
    } s[] = {{"leaky_relu", tg_leaky_relu}, {"pow_scalar", tg_pow_scalar},
             {"add_scalar", tg_add_scalar}, {"sub_scalar", tg_sub_scalar},
             {"rsub_scalar", tg_rsub_scalar}, {"mul_scalar", tg_mul_scalar},
             {"div_scalar", tg_div_scalar}};
    tg_tensor *const sentinel = (tg_tensor *)&sentinel;
    for (size_t i = 0; i < sizeof u / sizeof u[0] + sizeof s / sizeof s[0]; i++) {
        tg_tensor *y = sentinel;
        const bool un = i < sizeof u / sizeof u[0];
        const char *name = un ? u[i].name : s[i - sizeof u / sizeof u[0]].name;
        const int rc = un ? u[i].f(&y, NULL) : s[i - sizeof u / sizeof u[0]].f(&y, NULL, 0.5);
        cr_assert(eq(int, rc, TG_EINVAL), "%s", name);
        cr_assert(eq(ptr, y, sentinel), "%s: out untouched", name);
        char want[64];
        snprintf(want, sizeof want, "%s: input 0 is NULL", name);
        th_expect_in(tg_error_message(), want);
    }
}

/* ---- autograd details ---- */

Test(ops, mul_of_a_tensor_with_itself_gets_both_gradients)
{
    int64_t sh[1] = {4};
    tg_tensor *x = th_seq(TG_F64, 1, sh, -2, 2), *y = NULL, *ones = NULL;
    tg_tensor_set_requires_grad(x, true);
    cr_assert(eq(int, tg_mul(&y, x, x), TG_OK));
    cr_assert(eq(int, tg_tensor_full(&ones, TG_F64, 1, sh, 1.0), TG_OK));
    cr_assert(eq(int, tg_backward(y, ones, NULL), TG_OK), "%s", tg_error_message());
    double *vx = th_doubles(x), *vg = th_doubles(tg_tensor_grad(x));
    /* d(x*x)/dx = 2x: both edges of the node lead to x. */
    for (int i = 0; i < 4; i++) cr_assert(eq(dbl, vg[i], 2.0 * vx[i]));
    free(vx), free(vg);
    tg_tensor_release(x), tg_tensor_release(y), tg_tensor_release(ones);
}

Test(ops, modifying_a_saved_input_is_einplace_at_backward)
{
    int64_t sh[1] = {3};
    tg_tensor *x = th_seq(TG_F64, 1, sh, -2, 2), *w = th_seq(TG_F64, 1, sh, 1, 2), *y = NULL, *ones = NULL;
    tg_tensor_set_requires_grad(x, true);
    cr_assert(eq(int, tg_mul(&y, x, w), TG_OK));
    cr_assert(eq(int, tg_tensor_fill(w, 5.0), TG_OK));
    cr_assert(eq(int, tg_tensor_full(&ones, TG_F64, 1, sh, 1.0), TG_OK));
    cr_assert(eq(int, tg_backward(y, ones, NULL), TG_EINPLACE));
    cr_assert(eq(ptr, tg_tensor_grad(x), NULL));
    tg_tensor_release(x), tg_tensor_release(w), tg_tensor_release(y), tg_tensor_release(ones);
}

/* More than 32k elements: the parallel path; broadcasting a row over (300, 200)
 * and a gelu on the result, against the naive loop. */
Test(ops, large_tensors_take_the_parallel_path)
{
    int64_t sa[2] = {300, 200}, sb[1] = {200};
    tg_tensor *a = th_seq(TG_F32, 2, sa, -3, 3), *b = th_seq(TG_F32, 1, sb, -1, 1), *y = NULL, *z = NULL;
    cr_assert(eq(int, tg_add(&y, a, b), TG_OK));
    cr_assert(eq(int, tg_gelu(&z, y), TG_OK));
    double *va = th_doubles(a), *vb = th_doubles(b), *vy = th_doubles(y), *vz = th_doubles(z);
    for (int64_t i = 0; i < 300; i++)
        for (int64_t j = 0; j < 200; j++) {
            double s = (double)(float)(va[i * 200 + j] + vb[j]);
            cr_assert(eq(dbl, vy[i * 200 + j], s));
            cr_assert(th_close(vz[i * 200 + j], ref_gelu(s), 3e-7, 1e-30));
        }
    free(va), free(vb), free(vy), free(vz);
    tg_tensor_release(a), tg_tensor_release(b), tg_tensor_release(y), tg_tensor_release(z);
}

/* ---- scalar operands as PyTorch converts them ---- */

/* Rounds v to dt's values (f32, or f16/bf16 through f32, as c10 does). */
static double in_dtype(tg_dtype dt, double v)
{
    if (dt == TG_F16) return tg_f16_to_f32(tg_f32_to_f16((float)v));
    if (dt == TG_BF16) return tg_bf16_to_f32(tg_f32_to_bf16((float)v));
    return dt == TG_F32 ? (double)(float)v : v;
}

/* x OP s in PyTorch converts the Python number s to x's dtype first, then
 * computes on two values of that dtype and rounds once (checked in torch
 * 1.13: 0 of 20000 elements differ from this rule for f32/f16/bf16, s in
 * {0.1, 1/3, 1.7, 1e-3, 3.14159}; with s kept in f64, 17% of an f32 x * 0.1
 * differed by an ulp).  The mul/div backward uses the same converted s. */
Test(ops, scalar_operand_is_converted_to_the_tensor_dtype_as_torch)
{
    const tg_dtype dts[4] = {TG_F32, TG_F16, TG_BF16, TG_F64};
    const double scalars[4] = {0.1, 1.0 / 3.0, 1.7, 1e-3};
    int (*const fns[5])(tg_tensor **, tg_tensor *, double) = {
        tg_add_scalar, tg_sub_scalar, tg_rsub_scalar, tg_mul_scalar, tg_div_scalar};
    for (int d = 0; d < 4; d++)
        for (int k = 0; k < 4; k++)
            for (int f = 0; f < 5; f++) {
                tg_tensor *x = th_rand_uniform(dts[d], 1, (int64_t[]){257}, 11 + k), *y = NULL;
                tg_tensor_set_requires_grad(x, true);
                cr_assert(eq(int, fns[f](&y, x, scalars[k]), TG_OK));
                const double s = in_dtype(dts[d], scalars[k]);
                for (int64_t i = 0; i < 257; i++) {
                    /* on two values of the dtype, the f64 result rounded to
                     * the dtype is the dtype's own correctly rounded result
                     * (53 >= 2 * 24 + 2 bits: the double rounding is
                     * innocuous) */
                    const double xi = th_at(x, i);
                    const double want = in_dtype(dts[d], f == 0 ? xi + s : f == 1 ? xi - s
                                                        : f == 2 ? s - xi : f == 3 ? xi * s
                                                        : xi / s);
                    cr_assert(eq(dbl, th_at(y, i), want), "%s op %d s=%g [%lld]",
                              tg_dtype_name(dts[d]), f, scalars[k], (long long)i);
                }
                if (f >= 3) {   /* d(x*s)/dx = s, d(x/s)/dx = 1/s in the dtype: seed 1 */
                    tg_tensor *l = NULL;
                    cr_assert(eq(int, tg_sum(&l, y), TG_OK));
                    cr_assert(eq(int, tg_backward(l, NULL, NULL), TG_OK));
                    const double g = th_at(tg_tensor_grad(x), 0);
                    cr_assert(eq(dbl, g, in_dtype(dts[d], f == 3 ? s : 1.0 / s)), "%s grad",
                              tg_dtype_name(dts[d]));
                    tg_tensor_release(l);
                }
                tg_tensor_release(x), tg_tensor_release(y);
            }
    /* figures from torch 1.13 */
    tg_tensor *h = th_tensor_from(TG_F16, 1, (int64_t[]){3}, (double[]){65504, 7, 0.001}), *y = NULL;
    cr_assert(eq(int, tg_mul_scalar(&y, h, 0.1), TG_OK));
    cr_assert(eq(dbl, th_at(y, 0), 6548.0));           /* f64 0.1 gave 6552 */
    cr_assert(eq(dbl, th_at(y, 1), 0.69970703125));    /* f64 0.1 gave 0.7001953125 */
    tg_tensor_release(y);
    cr_assert(eq(int, tg_mul_scalar(&y, h, 70000.0), TG_OK));
    cr_assert(isinf(th_at(y, 2)));                     /* 70000 is inf in f16 */
    tg_tensor_release(y), tg_tensor_release(h);
    tg_tensor *f = th_tensor_from(TG_F32, 1, (int64_t[]){1}, (double[]){0.1});
    cr_assert(eq(int, tg_mul_scalar(&y, f, 0.1), TG_OK));
    cr_assert(eq(dbl, th_at(y, 0), (double)(0.1f * 0.1f)));   /* 0.010000000707805157 */
    tg_tensor_release(y), tg_tensor_release(f);
}

/* mean's backward divides the incoming gradient by the count, as PyTorch's
 * (grad / numel, the count converted to the dtype like any scalar operand):
 * multiplying by a rounded 1/count differs in half precision (f16, n = 7,
 * g = 0.7: 0.10003662 by division, 0.09997559 by 1/7 rounded first). */
Test(ops, mean_backward_divides_by_the_count)
{
    const tg_dtype dts[3] = {TG_F16, TG_BF16, TG_F32};
    for (int d = 0; d < 3; d++)
        for (int64_t n = 1; n <= 40; n++) {
            tg_tensor *x = th_rand_uniform(dts[d], 2, (int64_t[]){3, n}, 5), *m = NULL;
            tg_tensor *w = th_rand_uniform(dts[d], 1, (int64_t[]){3}, 6), *p = NULL, *l = NULL;
            tg_tensor_set_requires_grad(x, true);
            cr_assert(eq(int, tg_mean_dims(&m, x, 1, (int[]){1}, false), TG_OK));
            cr_assert(eq(int, tg_mul(&p, m, w), TG_OK));
            cr_assert(eq(int, tg_sum(&l, p), TG_OK));
            cr_assert(eq(int, tg_backward(l, NULL, NULL), TG_OK));
            tg_tensor *want = NULL;
            cr_assert(eq(int, tg_div_scalar(&want, w, (double)n), TG_OK));
            for (int64_t r = 0; r < 3; r++)
                for (int64_t c = 0; c < n; c++)
                    cr_assert(eq(dbl, th_at(tg_tensor_grad(x), r * n + c), th_at(want, r)),
                              "%s n=%lld row %lld", tg_dtype_name(dts[d]), (long long)n,
                              (long long)r);
            tg_tensor *all = NULL, *g1 = NULL;   /* mean of everything: the same rule */
            tg_tensor_zero_grad(x);
            cr_assert(eq(int, tg_mean(&all, x), TG_OK));
            cr_assert(eq(int, tg_mul(&g1, all, w), TG_OK));   /* (3,): seed 1 each */
            tg_tensor_release(l), l = NULL;
            cr_assert(eq(int, tg_sum(&l, g1), TG_OK));
            cr_assert(eq(int, tg_backward(l, NULL, NULL), TG_OK));
            tg_tensor *s = NULL, *ws = NULL;
            cr_assert(eq(int, tg_sum(&s, w), TG_OK));
            cr_assert(eq(int, tg_div_scalar(&ws, s, (double)(3 * n)), TG_OK));
            cr_assert(eq(dbl, th_at(tg_tensor_grad(x), 0), th_at(ws, 0)), "%s n=%lld all",
                      tg_dtype_name(dts[d]), (long long)n);
            tg_tensor *rel[] = {x, m, w, p, l, want, all, g1, s, ws};
            for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) tg_tensor_release(rel[i]);
        }
}

/* ---- bit for bit against torch 1.13 (scripts/make_ew_goldens.py) ---- */

/* d(a ** b) at base 0, negative bases, exponent 0 and NaN as torch's
 * autograd: in particular d/db is 0 where a = 0 and b >= 0 (the limit of
 * a^b log a), not 0 * -inf = NaN. */
Test(ops, pow_gradients_match_torch_at_special_points)
{
    tg_st_file *f = th_golden_load("elementwise.safetensors");
    tg_tensor *a0 = tg_st_get(f, "powgrad.a"), *b0 = tg_st_get(f, "powgrad.b");
    tg_tensor *ga = tg_st_get(f, "powgrad.ga"), *gb = tg_st_get(f, "powgrad.gb");
    cr_assert(a0 && b0 && ga && gb, "powgrad.* in the golden file");
    tg_tensor *a = NULL, *b = NULL, *p = NULL, *s = NULL;
    cr_assert(eq(int, tg_tensor_clone(&a, a0), TG_OK));
    cr_assert(eq(int, tg_tensor_clone(&b, b0), TG_OK));
    tg_tensor_set_requires_grad(a, true);
    tg_tensor_set_requires_grad(b, true);
    cr_assert(eq(int, tg_pow(&p, a, b), TG_OK));
    cr_assert(eq(int, tg_sum(&s, p), TG_OK));
    cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_OK), "%s", tg_error_message());
    for (int64_t i = 0; i < tg_tensor_numel(ga); i++) {
        const double wa = th_at(ga, i), wb = th_at(gb, i);
        const double da = th_at(tg_tensor_grad(a), i), db = th_at(tg_tensor_grad(b), i);
        /* to rounding (torch's pow and log are not correctly rounded) */
        cr_assert(th_close(da, wa, 1e-15, 0), "d/da at (%g, %g): got %.17g, torch %.17g",
                  th_at(a, i), th_at(b, i), da, wa);
        cr_assert(th_close(db, wb, 1e-15, 0), "d/db at (%g, %g): got %.17g, torch %.17g",
                  th_at(a, i), th_at(b, i), db, wb);
    }
    tg_tensor_release(s), tg_tensor_release(p), tg_tensor_release(a), tg_tensor_release(b);
    tg_st_free(f);
}

/* x ** p as torch.pow(x, p) with p a Python number: p is converted to x's
 * dtype first, as for the other scalar operands.  f16/bf16 bit for bit
 * (torch computes them in double from the converted p); f32 to within an
 * ulp, as torch's vectorised f32 pow is not correctly rounded. */
Test(ops, pow_scalar_converts_the_exponent_to_the_dtype_as_torch)
{
    tg_st_file *f = th_golden_load("elementwise.safetensors");
    static const char *const dn[] = {"f32", "f16", "bf16"};
    static const double ps[] = {1.7, -1.3};   /* POW_EXPONENTS of the script */
    for (int d = 0; d < 3; d++) {
        char xn[32], yn[32];
        snprintf(xn, sizeof xn, "pows.x.%s", dn[d]);
        tg_tensor *x = tg_st_get(f, xn);
        cr_assert(x != NULL, "%s in the golden file", xn);
        for (int k = 0; k < 2; k++) {
            snprintf(yn, sizeof yn, "pows.y%d.%s", k, dn[d]);
            tg_tensor *want = tg_st_get(f, yn), *y = NULL;
            cr_assert(want != NULL, "%s in the golden file", yn);
            cr_assert(eq(int, tg_pow_scalar(&y, x, ps[k]), TG_OK), "%s", tg_error_message());
            if (d > 0) {
                th_expect_same_bits(yn, x, y, want);
            } else {
                for (int64_t i = 0; i < tg_tensor_numel(want); i++) {
                    const float g = (float)th_at(y, i), w = (float)th_at(want, i);
                    cr_assert(g == w || nextafterf(g, w) == w, "%s[%lld]: x = %.9g: got %.9g, torch %.9g",
                              yn, (long long)i, th_at(x, i), g, w);
                }
            }
            tg_tensor_release(y);
        }
    }
    tg_st_free(f);
}
