/* tests/test_ops.c - elementwise binary, scalar, unary, activation and cast ops.
 * (What the activations keep on the tape, their one-pass backward and their
 * torch goldens are in test_activation.c.)
 *
 * Forward values are compared with naive double loops written here; gradients
 * with tg_gradcheck / tg_gradgradcheck in f64; f16/bf16 forwards with the f32
 * result rounded once.  Dtype rules, errors and autograd details are in
 * test_ops_rules.c. */
#include <math.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <criterion/parameterized.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
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
    {"sin", tg_sin, sin, -4, 4, true},
    {"cos", tg_cos, cos, -4, 4, true},
    {"log1p", tg_log1p, log1p, -0.5, 3, true},
    {"expm1", tg_expm1, expm1, -2, 2, true},
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

/* sin and cos at the edges, as torch.sin and torch.cos (IEEE): sin keeps
 * the sign of a zero, an infinity or a NaN gives NaN, and a large argument
 * is reduced exactly (torch's f64 sin and cos of 1e22, which agree with
 * libm's to 1 ulp). */
Test(ops, sin_and_cos_at_the_edges)
{
    const double xs[5] = {-0.0, INFINITY, -INFINITY, NAN, 1e22};
    tg_tensor *a = NULL, *s = NULL, *c = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&a, TG_F64, 1, (int64_t[]){5}), TG_OK));
    for (int i = 0; i < 5; i++) tg_tensor_set_flat(a, i, xs[i]);
    cr_assert(eq(int, tg_sin(&s, a), TG_OK));
    cr_assert(eq(int, tg_cos(&c, a), TG_OK));
    double *vs = th_doubles(s), *vc = th_doubles(c);
    cr_assert(vs[0] == 0.0 && signbit(vs[0]) && vc[0] == 1.0);
    for (int i = 1; i < 4; i++) cr_assert(isnan(vs[i]) && isnan(vc[i]), "x = %g", xs[i]);
    cr_assert(th_close(vs[4], -0.85220084976718879, 3e-16, 0), "%.17g", vs[4]);
    cr_assert(th_close(vc[4], 0.52321478539513899, 3e-16, 0), "%.17g", vc[4]);
    free(vs), free(vc);
    tg_tensor_release(a), tg_tensor_release(s), tg_tensor_release(c);
    /* an integer input gives f32, as torch's (tests/test_int_promote.c) */
    tg_tensor *i = NULL, *y = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&i, TG_I64, 1, (int64_t[]){2}), TG_OK));
    cr_assert(eq(int, tg_sin(&y, i), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    cr_assert(th_at(y, 0) == 0.0 && th_at(y, 1) == 0.0);
    tg_tensor_release(i), tg_tensor_release(y);
}

/* log1p and expm1 keep small arguments' digits (log(1 + 1e-10) in f32 is
 * 0, log1p 1e-10), and their edges are torch's: log1p(-1) = -inf, NaN
 * below -1, -0.0 kept by both, expm1(-inf) = -1, expm1(1000) = inf. */
Test(ops, log1p_and_expm1_at_the_edges)
{
    const double xs[6] = {1e-10, -1.0, -2.0, -0.0, -INFINITY, 1000.0};
    tg_tensor *a = NULL, *l = NULL, *e = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&a, TG_F32, 1, (int64_t[]){6}), TG_OK));
    for (int i = 0; i < 6; i++) tg_tensor_set_flat(a, i, xs[i]);
    cr_assert(eq(int, tg_log1p(&l, a), TG_OK));
    cr_assert(eq(int, tg_expm1(&e, a), TG_OK));
    double *vl = th_doubles(l), *ve = th_doubles(e);
    cr_assert(th_close(vl[0], 1e-10, 1e-6, 0) && th_close(ve[0], 1e-10, 1e-6, 0), "%g %g",
              vl[0], ve[0]);
    cr_assert(isinf(vl[1]) && vl[1] < 0 && isnan(vl[2]), "%g %g", vl[1], vl[2]);
    cr_assert(vl[3] == 0.0 && signbit(vl[3]) && ve[3] == 0.0 && signbit(ve[3]));
    cr_assert(eq(dbl, ve[4], -1.0));
    cr_assert(isinf(ve[5]) && ve[5] > 0);
    free(vl), free(ve);
    tg_tensor_release(a), tg_tensor_release(l), tg_tensor_release(e);
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
