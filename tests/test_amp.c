/* tests/test_amp.c - mixed precision: the AMP policies of the dispatch
 * (autocast scopes), every float op in f16 and bf16, and gradient dtypes
 * (the promote table: test_amp_promote.c; half values at the edges and half
 * kernels: test_half.c; the gradient scaler: test_amp_scaler.c; training
 * under autocast: test_amp_train.c). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/amp.h"
#include "tapegrad/autograd.h"
#include "tapegrad/conv.h"
#include "tapegrad/ops.h"
#include "tapegrad/registry.h"
#include "tapegrad/tensor.h"

/* n values in [0.5, 2) that are multiples of 1/32: exact in every float dtype. */
static tg_tensor *mk_exact(tg_dtype dt, int ndim, const int64_t *shape, int seed)
{
    double v[64];
    int64_t n = tg__numel(ndim, shape);
    cr_assert(n <= 64);
    for (int64_t i = 0; i < n; i++) v[i] = 0.5 + (double)((i * 7 + seed * 13) % 48) / 32.0;
    return th_tensor_from(dt, ndim, shape, v);
}

/* ---- every float op in f16 and bf16: f32 compute, one rounding ------------------- */

typedef int (*op_fn)(tg_tensor **out, tg_tensor *const *in);
typedef struct op_case {
    const char *name;
    op_fn fn;
    int n;
    int ndim[3];
    int64_t shape[3][3];
} op_case;

static const tg_conv_params CONV_P = TG_CONV_PARAMS_INIT;
#define BIN(nm) static int run_##nm(tg_tensor **o, tg_tensor *const *in) { return tg_##nm(o, in[0], in[1]); }
#define UN(nm) static int run_##nm(tg_tensor **o, tg_tensor *const *in) { return tg_##nm(o, in[0]); }
#define SC(nm, s) static int run_##nm(tg_tensor **o, tg_tensor *const *in) { return tg_##nm(o, in[0], s); }
BIN(add) BIN(sub) BIN(mul) BIN(div) BIN(pow) BIN(matmul)
UN(neg) UN(exp) UN(log) UN(sqrt) UN(abs) UN(erf) UN(relu) UN(tanh) UN(sigmoid) UN(silu)
UN(gelu) UN(sum) UN(mean)
SC(add_scalar, 0.375) SC(mul_scalar, -1.5) SC(div_scalar, 3.0) SC(rsub_scalar, 2.0)
SC(pow_scalar, 1.5) SC(leaky_relu, 0.1)
static int run_sum_dims(tg_tensor **o, tg_tensor *const *in)
{
    return tg_sum_dims(o, in[0], 1, (int[]){1}, false);
}
static int run_mean_dims(tg_tensor **o, tg_tensor *const *in)
{
    return tg_mean_dims(o, in[0], 1, (int[]){0}, true);
}
static int run_linear(tg_tensor **o, tg_tensor *const *in) { return tg_linear(o, in[0], in[1], in[2]); }
static int run_conv(tg_tensor **o, tg_tensor *const *in) { return tg_conv(o, in[0], in[1], in[2], &CONV_P); }
static int run_conv_transpose(tg_tensor **o, tg_tensor *const *in)
{
    return tg_conv_transpose(o, in[0], in[1], in[2], &CONV_P);
}
static int run_conv_weight_grad(tg_tensor **o, tg_tensor *const *in)
{
    return tg_conv_weight_grad(o, in[0], in[1], 3, (int64_t[]){3, 2, 3}, &CONV_P);
}

#define E1(nm) {#nm, run_##nm, 1, {2}, {{2, 3}}}
#define E2(nm) {#nm, run_##nm, 2, {2, 2}, {{2, 3}, {2, 3}}}
static const op_case OPS[] = {
    E2(add), E2(sub), E2(mul), E2(div), E2(pow),
    E1(neg), E1(exp), E1(log), E1(sqrt), E1(abs), E1(erf), E1(relu), E1(tanh), E1(sigmoid),
    E1(silu), E1(gelu), E1(sum), E1(mean), E1(sum_dims), E1(mean_dims), E1(add_scalar),
    E1(mul_scalar), E1(div_scalar), E1(rsub_scalar), E1(pow_scalar), E1(leaky_relu),
    {"matmul", run_matmul, 2, {2, 2}, {{2, 3}, {3, 4}}},
    {"linear", run_linear, 3, {2, 2, 1}, {{2, 3}, {4, 3}, {4}}},
    {"conv", run_conv, 3, {3, 3, 1}, {{1, 2, 5}, {3, 2, 3}, {3}}},
    {"conv_transpose", run_conv_transpose, 3, {3, 3, 1}, {{1, 2, 4}, {2, 3, 3}, {3}}},
    {"conv_weight_grad", run_conv_weight_grad, 2, {3, 3}, {{1, 2, 5}, {1, 3, 3}}},
};
#define N_OPS (int)(sizeof OPS / sizeof OPS[0])

/* Runs c on inputs of dtype dt (values exact in every dtype); with grad, every
 * input requires grad and sum(y) is backpropagated. */
static tg_tensor *run_case(const op_case *c, tg_dtype dt, bool grad, tg_tensor **in)
{
    for (int i = 0; i < c->n; i++) {
        in[i] = mk_exact(dt, c->ndim[i], c->shape[i], i + 1);
        if (grad) tg_tensor_set_requires_grad(in[i], true);
    }
    tg_tensor *y = NULL, *s = NULL;
    cr_assert(eq(int, c->fn(&y, in), TG_OK), "%s %s: %s", c->name, tg_dtype_name(dt),
              tg_error_message());
    if (grad) {
        cr_assert(eq(int, tg_sum(&s, y), TG_OK));
        cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_OK), "%s %s backward: %s", c->name,
                  tg_dtype_name(dt), tg_error_message());
        tg_tensor_release(s);
    }
    return y;
}


Test(amp, every_float_op_computes_half_in_f32_and_rounds_once)
{
    for (int k = 0; k < N_OPS; k++) {
        tg_tensor *in32[3], *in[3];
        tg_tensor *ref = run_case(&OPS[k], TG_F32, false, in32);
        for (int h = 2; h < 4; h++) {
            tg_dtype dt = th_floats[h];
            tg_tensor *y = run_case(&OPS[k], dt, false, in);
            cr_assert(eq(int, tg_tensor_dtype(y), dt), "%s %s", OPS[k].name, tg_dtype_name(dt));
            cr_assert(eq(i64, tg_tensor_numel(y), tg_tensor_numel(ref)));
            for (int64_t i = 0; i < tg_tensor_numel(y); i++)
                cr_assert(eq(dbl, th_at(y, i), th_round_to(dt, th_at(ref, i))), "%s %s [%lld]",
                          OPS[k].name, tg_dtype_name(dt), (long long)i);
            tg_tensor_release(y);
            th_release_all(OPS[k].n, in);
        }
        tg_tensor_release(ref);
        th_release_all(OPS[k].n, in32);
    }
}

Test(amp, every_float_op_gives_half_gradients_close_to_f32)
{
    for (int k = 0; k < N_OPS; k++) {
        tg_tensor *in32[3], *in[3];
        tg_tensor_release(run_case(&OPS[k], TG_F32, true, in32));
        for (int h = 2; h < 4; h++) {
            tg_dtype dt = th_floats[h];
            double rtol = dt == TG_F16 ? 1e-2 : 5e-2;
            tg_tensor_release(run_case(&OPS[k], dt, true, in));
            for (int i = 0; i < OPS[k].n; i++) {
                tg_tensor *g = tg_tensor_grad(in[i]), *g32 = tg_tensor_grad(in32[i]);
                cr_assert(g != NULL && g32 != NULL, "%s %s input %d", OPS[k].name,
                          tg_dtype_name(dt), i);
                cr_assert(eq(int, tg_tensor_dtype(g), dt), "%s grad %d", OPS[k].name, i);
                for (int64_t e = 0; e < tg_tensor_numel(g); e++) {
                    double want = th_at(g32, e);
                    cr_assert(epsilon_eq(dbl, th_at(g, e), want, rtol * fmax(1.0, fabs(want))),
                              "%s %s grad %d [%lld]", OPS[k].name, tg_dtype_name(dt), i,
                              (long long)e);
                }
            }
            th_release_all(OPS[k].n, in);
        }
        th_release_all(OPS[k].n, in32);
    }
}

/* ---- the policies inside and outside autocast --------------------------------- */

/* What result_dtype gives for a call refused with TG_EDTYPE. */
#define REFUSED TG_DTYPE_COUNT

static const char *dtype_or_refused(tg_dtype dt)
{
    return dt == REFUSED ? "refused" : tg_dtype_name(dt);
}

/* The dtype op k (in OPS) gives for inputs of dtypes a, b, c (same for all
 * inputs when b, c are ignored); REFUSED when the call is TG_EDTYPE with a
 * message naming the first two dtypes. */
static tg_dtype result_dtype(const char *name, const tg_dtype *dts)
{
    int k = 0;
    while (k < N_OPS && strcmp(OPS[k].name, name) != 0) k++;
    cr_assert(k < N_OPS, "%s", name);
    tg_tensor *in[3], *y = NULL;
    for (int i = 0; i < OPS[k].n; i++) in[i] = mk_exact(dts[i], OPS[k].ndim[i], OPS[k].shape[i], i);
    const int rc = OPS[k].fn(&y, in);
    if (rc == TG_EDTYPE) {
        cr_assert(y == NULL, "%s: out set on error", name);
        th_expect_in(tg_error_message(), tg_dtype_name(dts[0]));
        th_expect_in(tg_error_message(), tg_dtype_name(dts[1]));
        th_release_all(OPS[k].n, in);
        return REFUSED;
    }
    cr_assert(eq(int, rc, TG_OK), "%s: %s", name, tg_error_message());
    tg_dtype dt = tg_tensor_dtype(y);
    tg_tensor_release(y);
    th_release_all(OPS[k].n, in);
    return dt;
}

typedef struct policy_case {
    const char *op;
    tg_dtype in[3];
    tg_dtype outside, in_bf16, in_f16;
} policy_case;

Test(amp, each_policy_inside_and_outside_autocast)
{
    const tg_dtype F = TG_F32, B = TG_BF16, H = TG_F16, D = TG_F64, R = REFUSED;
    const policy_case cases[] = {
        /* LOWER_PRECISION: the scope dtype, even from the other half type;
         * outside autocast mixed float dtypes are refused, as torch's
         * matmul (f32 @ bf16: "expected scalar type Float but found
         * BFloat16"), linear and conv2d. */
        {"matmul", {F, F}, F, B, H},
        {"matmul", {H, H}, H, B, H},
        {"matmul", {B, F}, R, B, H},
        {"linear", {F, F, F}, F, B, H},
        {"linear", {F, B, F}, R, B, H},
        {"conv", {F, F, F}, F, B, H},
        {"conv", {B, F, F}, R, B, H},
        /* PROMOTE: the widest input under autocast; conv_transpose, as
         * torch's, refuses mixed dtypes outside. */
        {"conv_transpose", {F, F, F}, F, F, F},
        {"conv_transpose", {B, F, F}, R, F, F},
        {"conv_transpose", {B, B, B}, B, B, B},
        {"conv_transpose", {H, B, B}, R, F, F},
        {"conv_weight_grad", {B, F}, F, F, F},
        {"add", {H, B}, F, F, F},
        {"mul", {B, B}, B, B, B},
        /* FP32: f32 inside autocast. */
        {"sum", {B}, B, F, F},
        {"sum", {H}, H, F, F},
        {"mean_dims", {B}, B, F, F},
        {"exp", {H}, H, F, F},
        {"log", {B}, B, F, F},
        /* KEEP: never cast. */
        {"relu", {B}, B, B, B},
        {"relu", {F}, F, F, F},
        {"tanh", {H}, H, H, H},
        {"mul_scalar", {B}, B, B, B},
        /* f64 is never lowered, nor cast to meet another float dtype in a
         * product or convolution (torch: "expected scalar type Double but
         * found BFloat16"). */
        {"matmul", {D, D}, D, D, D},
        {"matmul", {D, F}, R, R, R},
        {"conv", {D, D, D}, D, D, D},
        {"conv", {D, B, F}, R, R, R},
        {"conv_transpose", {D, F, F}, R, R, R},
        {"sum", {D}, D, D, D},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const policy_case *c = &cases[i];
        tg_dtype got[3];
        got[0] = result_dtype(c->op, c->in);
        cr_assert(eq(int, tg_autocast_begin(TG_BF16), TG_OK));
        got[1] = result_dtype(c->op, c->in);
        cr_assert(eq(int, tg_autocast_end(), TG_OK));
        cr_assert(eq(int, tg_autocast_begin(TG_F16), TG_OK));
        got[2] = result_dtype(c->op, c->in);
        cr_assert(eq(int, tg_autocast_end(), TG_OK));
        const tg_dtype want[3] = {c->outside, c->in_bf16, c->in_f16};
        for (int s = 0; s < 3; s++)
            cr_assert(eq(str, (char *)dtype_or_refused(got[s]), (char *)dtype_or_refused(want[s])),
                      "case %zu %s (%s, scope %d)", i, c->op, tg_dtype_name(c->in[0]), s);
    }
}

Test(amp, policies_match_the_registry)
{
    const struct { const char *op; tg_amp_policy p; } want[] = {
        {"conv", TG_AMP_LOWER_PRECISION}, {"matmul", TG_AMP_LOWER_PRECISION},
        {"linear", TG_AMP_LOWER_PRECISION}, {"conv_transpose", TG_AMP_PROMOTE},
        {"add", TG_AMP_PROMOTE}, {"sum", TG_AMP_FP32}, {"exp", TG_AMP_FP32},
        {"relu", TG_AMP_KEEP}, {"to_dtype", TG_AMP_KEEP},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        tg_op_info info;
        cr_assert(eq(int, tg_op_info_find(want[i].op, &info), TG_OK));
        cr_assert(eq(str, (char *)tg_amp_policy_name(info.amp),
                     (char *)tg_amp_policy_name(want[i].p)), "%s", want[i].op);
    }
}

/* cat is on torch's autocast "promote" list: under bf16 autocast an f32 and a
 * bf16 input give f32 (torch 1.13), and neither input changes. */
Test(amp, cat_promotes_under_autocast_as_torch)
{
    tg_tensor *a = mk_exact(TG_F32, 1, (int64_t[]){3}, 1);
    tg_tensor *b = mk_exact(TG_BF16, 1, (int64_t[]){3}, 2), *y = NULL;
    double b0 = th_at(b, 0);
    cr_assert(eq(int, tg_autocast_begin(TG_BF16), TG_OK));
    cr_assert(eq(int, tg_cat(&y, 2, (tg_tensor *[]){a, b}, 0), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_autocast_end(), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    for (int k = 0; k < 3; k++) {
        cr_assert(eq(dbl, th_at(y, k), th_at(a, k)));
        cr_assert(eq(dbl, th_at(y, 3 + k), th_at(b, k)));
    }
    cr_assert(eq(int, tg_tensor_dtype(a), TG_F32));
    cr_assert(eq(int, tg_tensor_dtype(b), TG_BF16));
    cr_assert(eq(dbl, th_at(b, 0), b0));
    tg_tensor_release(y);
    tg_tensor_release(a);
    tg_tensor_release(b);
}

Test(amp, lowered_matmul_rounds_inputs_then_output_once)
{
    /* f32 inputs not representable in bf16: autocast rounds each to bf16,
     * accumulates in f32 and rounds the result once. */
    const double av[4] = {1.0 + 0x1p-12, 0.3, -2.7, 0.1}, bv[4] = {0.7, 1.0 / 3, 5.1, -1.9};
    tg_tensor *a = th_tensor_from(TG_F32, 2, (int64_t[]){2, 2}, av);
    tg_tensor *b = th_tensor_from(TG_F32, 2, (int64_t[]){2, 2}, bv), *y = NULL;
    cr_assert(eq(int, tg_autocast_begin(TG_BF16), TG_OK));
    cr_assert(eq(int, tg_matmul(&y, a, b), TG_OK));
    cr_assert(eq(int, tg_autocast_end(), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_BF16));
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            float acc = 0.0f;
            for (int k = 0; k < 2; k++)
                acc += (float)(th_round_to(TG_BF16, av[i * 2 + k]) * th_round_to(TG_BF16, bv[k * 2 + j]));
            cr_assert(eq(dbl, th_at(y, i * 2 + j), th_round_to(TG_BF16, acc)), "(%d,%d)", i, j);
        }
    tg_tensor_release(a);
    tg_tensor_release(b);
    tg_tensor_release(y);
}

Test(amp, nested_autocast_and_disable_scope)
{
    tg_dtype dt = TG_I32;
    cr_assert(not(tg_autocast_active(&dt)));
    cr_assert(eq(int, tg_autocast_begin(TG_BF16), TG_OK));
    cr_assert(eq(int, result_dtype("matmul", (tg_dtype[]){TG_F32, TG_F32}), TG_BF16));
    cr_assert(eq(int, tg_autocast_begin(TG_F16), TG_OK));
    cr_assert(eq(int, result_dtype("matmul", (tg_dtype[]){TG_F32, TG_F32}), TG_F16));
    cr_assert(eq(int, tg_autocast_disable_begin(), TG_OK));
    cr_assert(not(tg_autocast_active(NULL)));
    cr_assert(eq(int, result_dtype("matmul", (tg_dtype[]){TG_F32, TG_F32}), TG_F32));
    cr_assert(eq(int, result_dtype("sum", (tg_dtype[]){TG_BF16}), TG_BF16));
    cr_assert(eq(int, tg_autocast_begin(TG_BF16), TG_OK));   /* re-enable inside disable */
    cr_assert(eq(int, result_dtype("matmul", (tg_dtype[]){TG_F32, TG_F32}), TG_BF16));
    cr_assert(eq(int, tg_autocast_end(), TG_OK));
    cr_assert(eq(int, tg_autocast_end(), TG_OK));
    cr_assert(tg_autocast_active(&dt));
    cr_assert(eq(int, dt, TG_F16));
    cr_assert(eq(int, tg_autocast_end(), TG_OK));
    cr_assert(eq(int, result_dtype("matmul", (tg_dtype[]){TG_F32, TG_F32}), TG_BF16));
    cr_assert(eq(int, tg_autocast_end(), TG_OK));
    cr_assert(eq(int, result_dtype("matmul", (tg_dtype[]){TG_F32, TG_F32}), TG_F32));
    /* Errors change nothing. */
    cr_assert(eq(int, tg_autocast_end(), TG_EINVAL));
    cr_assert(eq(int, tg_autocast_begin(TG_F64), TG_EINVAL));
    cr_assert(eq(int, tg_autocast_begin(TG_I32), TG_EINVAL));
    cr_assert(not(tg_autocast_active(NULL)));
    cr_assert(eq(int, tg_autocast_end(), TG_EINVAL));
}

/* ---- gradient dtypes ------------------------------------------------------------ */

/* loss = mean(tanh(linear(x, w, b)) * c) with f32 leaves; under autocast dt
 * unless dt is f32.  backward_inside runs backward inside the scope too. */
static void linear_grads(tg_dtype dt, bool backward_inside, tg_tensor *w, tg_tensor *b,
                         tg_tensor **gw, tg_tensor **gb, tg_dtype *loss_dt)
{
    tg_tensor *x = mk_exact(TG_F32, 2, (int64_t[]){4, 3}, 5), *y = NULL, *t = NULL, *l = NULL;
    tg_tensor_zero_grad(w);
    tg_tensor_zero_grad(b);
    if (dt != TG_F32) cr_assert(eq(int, tg_autocast_begin(dt), TG_OK));
    cr_assert(eq(int, tg_linear(&y, x, w, b), TG_OK));
    cr_assert(eq(int, tg_tanh(&t, y), TG_OK));
    cr_assert(eq(int, tg_mean(&l, t), TG_OK));
    if (dt != TG_F32 && !backward_inside) cr_assert(eq(int, tg_autocast_end(), TG_OK));
    /* An f32 forward whose backward runs inside a bf16 scope: the backward's
     * ops must not be autocast (each gradient has its input's dtype). */
    if (dt == TG_F32 && backward_inside) cr_assert(eq(int, tg_autocast_begin(TG_BF16), TG_OK));
    cr_assert(eq(int, tg_backward(l, NULL, NULL), TG_OK), "%s", tg_error_message());
    if (backward_inside) cr_assert(eq(int, tg_autocast_end(), TG_OK));
    *loss_dt = tg_tensor_dtype(l);
    *gw = tg_tensor_retain(tg_tensor_grad(w));
    *gb = tg_tensor_retain(tg_tensor_grad(b));
    tg_tensor_release(x);
    tg_tensor_release(y);
    tg_tensor_release(t);
    tg_tensor_release(l);
}

Test(amp, f32_params_get_f32_grads_under_half_autocast)
{
    tg_tensor *w =
        th_tensor_from(TG_F32, 2, (int64_t[]){2, 3}, (double[]){0.1, -0.2, 0.3, 0.05, 0.4, -0.1});
    tg_tensor *b = th_tensor_from(TG_F32, 1, (int64_t[]){2}, (double[]){0.01, -0.02});
    tg_tensor_set_requires_grad(w, true);
    tg_tensor_set_requires_grad(b, true);
    tg_tensor *rw = NULL, *rb = NULL;
    tg_dtype ldt;
    linear_grads(TG_F32, false, w, b, &rw, &rb, &ldt);
    const tg_dtype scopes[3] = {TG_BF16, TG_F16, TG_F32};
    for (int s = 0; s < 3; s++)
        for (int inside = 0; inside < 2; inside++) {
            tg_tensor *gw = NULL, *gb = NULL;
            linear_grads(scopes[s], inside, w, b, &gw, &gb, &ldt);
            cr_assert(eq(int, ldt, TG_F32), "%d %d", s, inside);   /* mean is FP32 */
            cr_assert(eq(int, tg_tensor_dtype(gw), TG_F32));
            cr_assert(eq(int, tg_tensor_dtype(gb), TG_F32));
            double tol = scopes[s] == TG_BF16 ? 2e-2 : scopes[s] == TG_F16 ? 4e-3 : 1e-6;
            for (int i = 0; i < 6; i++)
                cr_assert(epsilon_eq(dbl, th_at(gw, i), th_at(rw, i),
                                     tol * fmax(0.1, fabs(th_at(rw, i)))));
            for (int i = 0; i < 2; i++)
                cr_assert(epsilon_eq(dbl, th_at(gb, i), th_at(rb, i),
                                     tol * fmax(0.1, fabs(th_at(rb, i)))));
            tg_tensor_release(gw);
            tg_tensor_release(gb);
        }
    tg_tensor_release(rw);
    tg_tensor_release(rb);
    tg_tensor_release(w);
    tg_tensor_release(b);
}

Test(amp, mixed_inputs_get_gradients_in_their_own_dtypes)
{
    /* add(f16, bf16) runs in f32; d/da = d/db = 1 arrive as f16 and bf16. */
    tg_tensor *a = mk_exact(TG_F16, 1, (int64_t[]){3}, 1), *b = mk_exact(TG_BF16, 1, (int64_t[]){3}, 2);
    tg_tensor *x = mk_exact(TG_BF16, 3, (int64_t[]){1, 2, 3}, 3);
    tg_tensor *w = mk_exact(TG_F32, 3, (int64_t[]){2, 1, 2}, 4), *y = NULL, *s = NULL, *z = NULL;
    tg_tensor *ts[4] = {a, b, x, w};
    for (int i = 0; i < 4; i++) tg_tensor_set_requires_grad(ts[i], true);
    cr_assert(eq(int, tg_add(&y, a, b), TG_OK));
    cr_assert(eq(int, tg_sum(&s, y), TG_OK));
    cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(a)), TG_F16));
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(b)), TG_BF16));
    cr_assert(eq(dbl, th_at(tg_tensor_grad(a), 2), 1.0));
    tg_tensor_release(y);
    tg_tensor_release(s);
    /* conv_transpose(x bf16, w f32) in bf16 autocast: y f32; grads bf16 and f32;
     * d sum(y)/dx[c, l] = sum of w[c, :, :] (every tap lands in the output). */
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    cr_assert(eq(int, tg_autocast_begin(TG_BF16), TG_OK));
    cr_assert(eq(int, tg_conv_transpose(&y, x, w, NULL, &p), TG_OK));
    cr_assert(eq(int, tg_sum(&z, y), TG_OK));
    cr_assert(eq(int, tg_autocast_end(), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    cr_assert(eq(int, tg_backward(z, NULL, NULL), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(x)), TG_BF16));
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(w)), TG_F32));
    for (int c = 0; c < 2; c++)
        cr_assert(eq(dbl, th_at(tg_tensor_grad(x), c * 3 + 1),
                     th_round_to(TG_BF16, th_at(w, c * 2) + th_at(w, c * 2 + 1))));
    tg_tensor_release(y);
    tg_tensor_release(z);
    th_release_all(4, ts);
}
