/* src/ops/activation.c - relu, leaky_relu, tanh, sigmoid, silu, gelu, elu.
 *
 * Backwards save the input and recompute from it with differentiable ops.
 * Piecewise-constant factors (relu's mask, leaky_relu's slope) enter as
 * constant tensors made by raw kernels, so they are not differentiated.
 *
 * relu and leaky_relu with a slope >= 0 save their output instead: its sign
 * is the input's (out > 0 exactly when a > 0), so the mask is the same, and
 * the output is usually saved anyway by the layer that consumes it, while
 * the input (a conv or batch-norm output) can then be freed after the forward:
 * one activation-sized tensor less per layer on the tape.  tanh and sigmoid
 * save their output too, as PyTorch does: their derivatives are functions of
 * it (1 - y^2 and y (1 - y)), so backward needs no tanh or exp either; for
 * higher derivatives the output comes back with this op as its grad_fn
 * (tg__ctx_saved_output).
 *
 * tanh and sigmoid of an integer tensor are f32, as torch's; relu of an
 * integer tensor keeps its dtype, as torch's (clamp(a, 0), not recorded);
 * leaky_relu, silu, gelu and elu refuse integers, as torch's.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "ops/activation_internal.h"
#include "ops/unary_simd_internal.h"
#include "ops/elementwise.h"
#include "ops/dispatch.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "tapegrad/ops.h"

typedef struct slope_params {
    double slope;
} slope_params;

typedef struct elu_params {
    double alpha;
} elu_params;

/* sigmoid(x) = 1/(1+e^-x) = e^x/(1+e^x): with e = exp(-|x|) <= 1 neither form
 * overflows, and the small tail keeps its relative precision. */
static inline double sigmoid_d(double x)
{
    double e = exp(-fabs(x));
    return x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

/* a < 0 ? 0 : a, as torch's clamp_min(a, 0): NaN and -0.0 stay. */
TG_EW_UNARY_KERNEL(k_relu, a < 0 ? 0 : a)
/* (a times 1 is a: branch-free, see k_masked_grad) */
TG_EW_UNARY_KERNEL(k_leaky, (double)a * (a > 0 ? 1.0 : s))
/* elu: e^x - 1 as expm1 in double, rounded once, so small negative x keep
 * their value (torch's f32 kernel takes exp(x) - 1 in f32, which cancels
 * to 0 near 0); elu(-0.0) is +0.0 as torch's. */
TG_EW_UNARY_KERNEL(k_elu, a > 0 ? (double)a : s * (a == 0 ? 0.0 : expm1((double)a)))
/* tanh of f32 in double, rounded once (src/ops/unary_simd.c's TANH:
 * expm1(2|a|) by exp_simd.h's expm1, tanh|a| = u / (u + 2)), at this
 * thread's exp width when simd is set, else the plain one (the same bits).
 * Relative error a few 1e-16, so the f32 result is (float)tanh((double)a),
 * correctly rounded, but where that double rounding falls within it of a
 * halfway point (tests). */
void tg__tanh_f32_n(float *out, const float *a, int64_t n, bool simd)
{
    tg__unary_simd_f32(TG__USIMD_TANH, out, a, NULL, n,
                       simd ? tg__exp_width_get() : TG__EXP_PLAIN);
}

static void k_tanh(tg_dtype cdt, void *out, const void *a, const void *b, int64_t n, double s)
{
    (void)b, (void)s;
    if (cdt == TG_F64)
        for (int64_t i = 0; i < n; i++) ((double *)out)[i] = tanh(((const double *)a)[i]);
    else tg__tanh_f32_n(out, a, n, true);
}

/* sigmoid and silu of f32 in double, rounded once (src/ops/unary_simd.c's
 * SIGMOID and SILU: sigmoid_d's two forms with its exp), at this thread's
 * exp width when simd is set, else the plain one (the same bits). */
void tg__sigmoid_f32_n(float *out, const float *a, int64_t n, bool silu, bool simd)
{
    tg__unary_simd_f32(silu ? TG__USIMD_SILU : TG__USIMD_SIGMOID, out, a, NULL, n,
                       simd ? tg__exp_width_get() : TG__EXP_PLAIN);
}

/* sigmoid and silu of f64 through libm's exp, of f32 (and the half dtypes,
 * computed in f32) through tg__sigmoid_f32_n. */
static void sigmoid_kernel(tg_dtype cdt, void *out, const void *a, int64_t n, bool silu)
{
    if (cdt == TG_F64) {
        double *o = out;
        const double *x = a;
        for (int64_t i = 0; i < n; i++) o[i] = silu ? x[i] * sigmoid_d(x[i]) : sigmoid_d(x[i]);
    } else {
        tg__sigmoid_f32_n(out, a, n, silu, true);
    }
}

static void k_sigmoid(tg_dtype cdt, void *out, const void *a, const void *b, int64_t n, double s)
{
    (void)b, (void)s;
    sigmoid_kernel(cdt, out, a, n, false);
}

static void k_silu(tg_dtype cdt, void *out, const void *a, const void *b, int64_t n, double s)
{
    (void)b, (void)s;
    sigmoid_kernel(cdt, out, a, n, true);
}
/* gelu of f64 by tg__gelu_d (libm's erfc); of f32 (and the half dtypes)
 * in vector registers (src/ops/unary_simd.c: within one rounding of
 * (float)tg__gelu_d(a), tests). */
static void k_gelu(tg_dtype cdt, void *out, const void *a, const void *b, int64_t n, double s)
{
    (void)b, (void)s;
    if (cdt == TG_F64) {
        double *o = out;
        const double *x = a;
        for (int64_t i = 0; i < n; i++) o[i] = tg__gelu_d(x[i]);
    } else {
        tg__unary_simd_f32(TG__USIMD_GELU, out, a, NULL, n, tg__exp_width_get());
    }
}

/* One-pass gradients (a the saved input, b the gradient g), in double and
 * rounded once: gelu's g (Phi(a) + a phi(a)) and silu's g s (1 + a (1 - s)),
 * the formulas of gelu_backward's and silu_backward's recorded ops; f32 in
 * vector registers (src/ops/unary_simd.c). */
static void k_gelu_grad(tg_dtype cdt, void *out, const void *a, const void *b, int64_t n,
                        double s)
{
    (void)s;
    if (cdt == TG_F64) {
        double *o = out;   /* o may be pg (in place) */
        const double *pa = a, *pg = b;
        for (int64_t i = 0; i < n; i++) {
            const double x = pa[i], phi = 0.5 * erfc(-x * M_SQRT1_2);
            o[i] = pg[i] * (phi + x * (exp(-0.5 * (x * x)) * (0.5 * M_2_SQRTPI * M_SQRT1_2)));
        }
    } else {
        tg__unary_simd_f32(TG__USIMD_GELU_GRAD, out, a, b, n, tg__exp_width_get());
    }
}

static void k_silu_grad(tg_dtype cdt, void *out, const void *a, const void *b, int64_t n,
                        double s)
{
    (void)s;
    if (cdt == TG_F64) {
        double *o = out;
        const double *pa = a, *pg = b;
        for (int64_t i = 0; i < n; i++) {
            const double x = pa[i], sg = sigmoid_d(x);
            o[i] = pg[i] * (sg * (1.0 + x * (1.0 - sg)));
        }
    } else {
        tg__unary_simd_f32(TG__USIMD_SILU_GRAD, out, a, b, n, tg__exp_width_get());
    }
}
/* d leaky_relu = 1 where a > 0, slope elsewhere (NaN: the slope), as
 * PyTorch's leaky_relu_backward (a > 0 ? g : g * slope). */
TG_EW_UNARY_KERNEL(k_leaky_mask, a > 0 ? 1.0 : s)
/* d relu = 0 where a <= 0, 1 elsewhere: at a NaN input the gradient goes
 * through, as PyTorch's threshold_backward (a <= 0 ? 0 : g). */
TG_EW_UNARY_KERNEL(k_relu_mask, a <= 0 ? 0.0 : 1.0)

/* g * mask in one pass (a the saved tensor, b the gradient g): the same
 * bits as tg_mul(g, k_leaky_mask(a)), whose mask holds 1 or the slope
 * rounded to the element type. */
static void k_masked_grad(tg_dtype cdt, void *out, const void *a, const void *b, int64_t n,
                          double s)
{
    /* A multiply by the selected factor (g * 1 is g, bit for bit) rather than
     * a branch between g and g * s: branch-free, so it vectorizes, and the
     * signs of the saved tensor are as unpredictable as its values. */
    if (cdt == TG_F64) {
        double *o = out;   /* o may be pg (in place) */
        const double *pa = a, *pg = b;
        TG__EW_FOR(i, n, o[i] = pg[i] * (pa[i] > 0 ? 1.0 : s);)
    } else {
        float *o = out;
        const float *pa = a, *pg = b, sf = (float)s;
        TG__EW_FOR(i, n, o[i] = pg[i] * (pa[i] > 0 ? 1.0f : sf);)
    }
}

/* relu's g * mask in one pass: the bits of tg_mul(g, k_relu_mask(a)), a
 * product as k_masked_grad's (so an inf or NaN g where a <= 0 gives NaN,
 * where PyTorch's select gives 0). */
static void k_relu_grad(tg_dtype cdt, void *out, const void *a, const void *b, int64_t n,
                        double s)
{
    (void)s;
    if (cdt == TG_F64) {
        double *o = out;   /* o may be pg (in place) */
        const double *pa = a, *pg = b;
        TG__EW_FOR(i, n, o[i] = pg[i] * (pa[i] <= 0 ? 0.0 : 1.0);)
    } else {
        float *o = out;
        const float *pa = a, *pg = b;
        TG__EW_FOR(i, n, o[i] = pg[i] * (pa[i] <= 0 ? 0.0f : 1.0f);)
    }
}

/* For *out just computed from a: saves a (save_out false) or out.  The
 * saved output is an alias of *out's storage without its grad_fn: saving
 * *out itself would make a cycle (out -> node -> ctx -> out): a detached view
 * of it instead. */
static int act_save(tg_ctx *ctx, tg_tensor **out, tg_tensor *a, bool save_out)
{
    if (!ctx) return TG_OK;
    if (!save_out) {
        tg__ctx_save(ctx, a);
        return TG_OK;
    }
    return tg__ew_save_output(ctx, out);
}

/* out = k(a), then act_save. */
static int act_forward(tg_ctx *ctx, const char *name, tg_tensor **out, tg_tensor *a,
                       tg_ew_kernel_fn k, double s, bool save_out)
{
    TG_TRY(tg__ew_unary(name, out, a, k, s));
    return act_save(ctx, out, a, save_out);
}

#define ACT_FORWARD(op, k, save_out)                                          \
    static int op##_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in, \
                            const void *params)                               \
    {                                                                         \
        return act_forward(ctx, #op, out, in[0], k, 0.0, save_out);           \
    }
ACT_FORWARD(silu, k_silu, false)
ACT_FORWARD(gelu, k_gelu, false)

/* tanh and sigmoid of an integer a are f32, as torch's: a's values
 * converted to f32, then as for an f32 a (tg__ew_unary_float).  Recorded
 * only for a float a, so act_save saves an f32 output. */
#define FLOAT_ACT_FORWARD(op)                                                 \
    static int op##_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in, \
                            const void *params)                               \
    {                                                                         \
        TG_TRY(tg__ew_unary_float(#op, out, in[0], k_##op, 0.0));             \
        return act_save(ctx, out, in[0], true);                               \
    }
FLOAT_ACT_FORWARD(tanh)
FLOAT_ACT_FORWARD(sigmoid)

static int elu_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    return act_forward(ctx, "elu", out, in[0], k_elu, ((const elu_params *)params)->alpha,
                       false);
}

/* The one-pass f16/bf16 kernels (activation_half.c) for a contiguous half
 * a (and g), unless a test turned them off on this thread. */
static _Thread_local bool half_fused_off;

void tg__act_set_half_fused(bool on) { half_fused_off = !on; }

static bool half_fused(const tg_tensor *a, const tg_tensor *g)
{
    return !half_fused_off && tg__dtype_is_half(a->dtype) &&
           tg_tensor_is_contiguous(a) &&
           (!g || (g->dtype == a->dtype && tg_tensor_is_contiguous(g) &&
                   tg_tensor_numel(g) == tg_tensor_numel(a)));
}

/* relu (s = 0) and leaky_relu: out = k(a), saving out when s >= 0 (see the
 * top of the file) and a otherwise.  A contiguous half a goes through the
 * one-pass kernels. */
static int masked_forward(tg_ctx *ctx, const char *name, tg_tensor **out, tg_tensor *a,
                          tg_ew_kernel_fn k, double s, tg__half_act op)
{
    TG_TRY(tg__ew_check_float(name, 0, a));   /* before half_fused reads a */
    if (half_fused(a, NULL)) {
        tg_tensor *y = tg__tensor_uninit(a->dtype, a->ndim, a->shape);
        if (!y) return TG_ENOMEM;
        if (tg__half_act_n(op, a->dtype, tg_tensor_cdata(a), NULL, tg_tensor_data(y),
                           tg_tensor_numel(a), s)) {
            *out = y;
            return act_save(ctx, out, a, s >= 0);
        }
        tg_tensor_release(y);
    }
    return act_forward(ctx, name, out, a, k, s, s >= 0);
}

/* relu of an integer a is clamp(a, 0) in a's dtype, as torch's. */
static int relu_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    if (in[0] && !tg_dtype_is_float(in[0]->dtype))
        return tg__int_clamp(out, in[0], true, 0, false, 0);
    return masked_forward(ctx, "relu", out, in[0], k_relu, 0.0, TG__HALF_RELU);
}

static int leaky_relu_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                              const void *params)
{
    return masked_forward(ctx, "leaky_relu", out, in[0], k_leaky,
                          ((const slope_params *)params)->slope, TG__HALF_LEAKY);
}

/* A backward that builds no graph (grad mode off), with g of the saved
 * tensor's dtype: *gi = k(saved, g) in one pass, written over g itself when
 * the engine holds its only reference (one activation-sized buffer less at
 * the peak).  Returns 1 when done that way, 0 when the caller is to use its
 * recorded (differentiable) ops, or an error. */
static int one_pass_grad(const char *name, const tg_tensor *saved, tg_tensor *g,
                         tg_ew_kernel_fn k, double s, tg_tensor **gi)
{
    if (tg_grad_enabled() || g->dtype != saved->dtype) return 0;
    if (tg__grad_is_reusable(g, saved->dtype, saved)) {
        TG_TRY(tg__ew_binary_over(name, saved, g, k, s));
        *gi = tg_tensor_retain(g);
        return 1;
    }
    TG_TRY(tg__ew_binary(name, gi, saved, g, k, s));
    return 1;
}

/* g * mask(a), mask a constant from k_leaky_mask with slope s (0 for relu),
 * a the saved input or output: one pass outside grad mode, else a recorded
 * tg_mul, so that the gradient stays differentiable in g. */
static int masked_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi, double s, bool relu)
{
    tg_tensor *a, *mask = NULL;
    int rc;
    const char *name = relu ? "relu_backward" : "leaky_relu_backward";
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    if (!tg_grad_enabled() && half_fused(a, g)) {
        /* one pass over g itself when the engine holds its only reference */
        const bool over = tg__grad_is_reusable(g, a->dtype, a);
        tg_tensor *r = over ? tg_tensor_retain(g) : tg__tensor_uninit(g->dtype, g->ndim, g->shape);
        rc = TG_ENOMEM;
        if (!r) goto done;
        if (tg__half_act_n(relu ? TG__HALF_RELU_GRAD : TG__HALF_MASKED_GRAD, a->dtype,
                           tg_tensor_cdata(a), tg_tensor_cdata(g), tg_tensor_data(r),
                           tg_tensor_numel(a), s)) {
            gi[0] = r;
            rc = TG_OK;
            goto done;
        }
        tg_tensor_release(r);
    }
    TG_TRY_GOTO(one_pass_grad(name, a, g, relu ? k_relu_grad : k_masked_grad, s, &gi[0]));
    if (rc == 0) {
        TG_TRY_GOTO(tg__ew_unary(name, &mask, a, relu ? k_relu_mask : k_leaky_mask, s));
        TG_TRY_GOTO(tg_mul(&gi[0], g, mask));
    }
    rc = TG_OK;
done:
    tg_tensor_release(mask);
    return rc;
}

static int relu_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return masked_backward(ctx, g, gi, 0.0, true);
}

static int leaky_relu_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return masked_backward(ctx, g, gi, ((const slope_params *)tg__ctx_params(ctx))->slope, false);
}

/* d tanh(a) = g * (1 - y^2) and d sigmoid(a) = g * (y * (1 - y)), y the
 * saved output.  Outside grad mode in one pass (over g itself when the engine
 * holds its only reference); otherwise with recorded ops on y, which then
 * carries this op as its grad_fn (tg__ctx_saved_output).  The one-pass
 * kernels round each step to the element type in the recorded ops' order,
 * so both give the same bits in f32 and f64 (a is y, b is g). */
#define OUTPUT_GRAD_KERNEL(fname, T, step)                                    \
    static void fname##_##T(void *out, const void *a, const void *b, int64_t n) \
    {                                                                         \
        T *o = out;   /* o may be pg (in place) */                            \
        const T *py = a, *pg = b;                                             \
        TG__EW_FOR(i, n, const T y = py[i]; const T f = step; o[i] = pg[i] * f;) \
    }
OUTPUT_GRAD_KERNEL(tanh_grad, float, (float)1 - y * y)
OUTPUT_GRAD_KERNEL(tanh_grad, double, 1.0 - y * y)
OUTPUT_GRAD_KERNEL(sigmoid_grad, float, y * ((float)1 - y))
OUTPUT_GRAD_KERNEL(sigmoid_grad, double, y * (1.0 - y))

static void k_tanh_grad(tg_dtype cdt, void *out, const void *a, const void *b, int64_t n,
                        double s)
{
    (void)s;
    if (cdt == TG_F64) tanh_grad_double(out, a, b, n);
    else tanh_grad_float(out, a, b, n);
}

static void k_sigmoid_grad(tg_dtype cdt, void *out, const void *a, const void *b, int64_t n,
                           double s)
{
    (void)s;
    if (cdt == TG_F64) sigmoid_grad_double(out, a, b, n);
    else sigmoid_grad_float(out, a, b, n);
}

static int output_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi, bool is_tanh)
{
    tg_tensor *y, *t[3] = {NULL, NULL, NULL};
    int rc;
    TG_TRY(tg__ctx_saved_output(ctx, 0, &y));
    TG_TRY_GOTO(one_pass_grad(is_tanh ? "tanh_backward" : "sigmoid_backward", y, g,
                           is_tanh ? k_tanh_grad : k_sigmoid_grad, 0.0, &gi[0]));
    if (rc == 1) {
        rc = TG_OK;
    } else if (is_tanh) {
        TG_TRY_GOTO(tg_mul(&t[0], y, y));
        TG_TRY_GOTO(tg_rsub_scalar(&t[1], t[0], 1.0));
        TG_TRY_GOTO(tg_mul(&gi[0], g, t[1]));
    } else {
        TG_TRY_GOTO(tg_rsub_scalar(&t[0], y, 1.0));
        TG_TRY_GOTO(tg_mul(&t[1], y, t[0]));
        TG_TRY_GOTO(tg_mul(&gi[0], g, t[1]));
    }
done:
    for (int i = 0; i < 3; i++) tg_tensor_release(t[i]);
    tg_tensor_release(y);
    return rc;
}

static int tanh_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return output_backward(ctx, g, gi, true);
}

static int sigmoid_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return output_backward(ctx, g, gi, false);
}

/* d (a * s(a)) = g * (s + a*s*(1-s)) = g * s * (1 + a*(1-s)); outside
 * grad mode in one pass (k_silu_grad). */
static int silu_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *a, *t[5] = {NULL, NULL, NULL, NULL, NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    TG_TRY_GOTO(one_pass_grad("silu_backward", a, g, k_silu_grad, 0.0, &gi[0]));
    if (rc == 1) {
        rc = TG_OK;
        goto done;
    }
    TG_TRY_GOTO(tg_sigmoid(&t[0], a));
    TG_TRY_GOTO(tg_rsub_scalar(&t[1], t[0], 1.0));
    TG_TRY_GOTO(tg_mul(&t[2], a, t[1]));
    TG_TRY_GOTO(tg_add_scalar(&t[3], t[2], 1.0));
    TG_TRY_GOTO(tg_mul(&t[4], t[0], t[3]));
    TG_TRY_GOTO(tg_mul(&gi[0], g, t[4]));
done:
    for (int i = 0; i < 5; i++) tg_tensor_release(t[i]);
    return rc;
}

/* d (a * Phi(a)) = g * (Phi(a) + a * phi(a)) with
 * Phi(a) = 0.5 * (1 + erf(a/sqrt2)) and phi(a) = exp(-a^2/2) / sqrt(2 pi);
 * outside grad mode in one pass (k_gelu_grad). */
static int gelu_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    enum { N = 9 };
    tg_tensor *a, *t[N] = {NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    TG_TRY_GOTO(one_pass_grad("gelu_backward", a, g, k_gelu_grad, 0.0, &gi[0]));
    if (rc == 1) {
        rc = TG_OK;
        goto done;
    }
    TG_TRY_GOTO(tg_mul_scalar(&t[0], a, M_SQRT1_2));
    TG_TRY_GOTO(tg_erf(&t[1], t[0]));
    TG_TRY_GOTO(tg_add_scalar(&t[2], t[1], 1.0));
    TG_TRY_GOTO(tg_mul_scalar(&t[3], t[2], 0.5));          /* Phi(a) */
    TG_TRY_GOTO(tg_mul(&t[4], a, a));
    TG_TRY_GOTO(tg_mul_scalar(&t[5], t[4], -0.5));
    TG_TRY_GOTO(tg_exp(&t[6], t[5]));
    TG_TRY_GOTO(tg_mul_scalar(&t[7], t[6], 0.5 * M_2_SQRTPI * M_SQRT1_2)); /* phi(a) */
    tg_tensor_release(t[0]);
    t[0] = NULL;
    TG_TRY_GOTO(tg_mul(&t[0], a, t[7]));
    TG_TRY_GOTO(tg_add(&t[8], t[3], t[0]));
    TG_TRY_GOTO(tg_mul(&gi[0], g, t[8]));
done:
    for (int i = 0; i < N; i++) tg_tensor_release(t[i]);
    return rc;
}

/* d elu = g * alpha * e^a where a <= 0 (alpha at 0), g elsewhere (NaN
 * too), as torch's elu_backward: the mask a <= 0 a constant, the rest exp,
 * mul_scalar, mul and where, so differentiable again. */
static int elu_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const double alpha = ((const elu_params *)tg__ctx_params(ctx))->alpha;
    tg_tensor *x, *m = NULL, *e = NULL, *ae = NULL, *t = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &x));
    TG_TRY_GOTO(tg_le_scalar(&m, x, 0.0));   /* a constant mask; NaN is not in it */
    TG_TRY_GOTO(tg_exp(&e, x));
    TG_TRY_GOTO(tg_mul_scalar(&ae, e, alpha));
    TG_TRY_GOTO(tg_mul(&t, g, ae));
    TG_TRY_GOTO(tg_where(&gi[0], m, t, g));
done:
    tg_tensor_release(m);
    tg_tensor_release(e);
    tg_tensor_release(ae);
    tg_tensor_release(t);
    return rc;
}

/* formula: the schema's vjp; sym: its scalar (tapegrad/op.h). */
#define SCHEMA(op, formula, sym)                                              \
    static const tg_op_schema op##_op = {.name = #op, .arity = 1, .amp = TG_AMP_KEEP, \
                                   .forward = op##_forward, .backward = op##_backward, \
                                   .double_backward = true, .vjp = formula, .scalar = sym}
SCHEMA(relu, "da = g * (a > 0)", NULL);
SCHEMA(leaky_relu, "da = g * (a > 0 ? 1 : slope)", "slope");
SCHEMA(tanh, "da = g * (1 - y^2)", NULL);
SCHEMA(sigmoid, "da = g * y * (1 - y)", NULL);
SCHEMA(silu, "da = g * (s + a s (1 - s)), s = sigmoid(a)", NULL);
SCHEMA(gelu, "da = g * (Phi(a) + a phi(a))", NULL);
SCHEMA(elu, "da = g * alpha * exp(a) where a <= 0, g elsewhere", "alpha");

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__activation_ops[] = {&relu_op, &leaky_relu_op, &tanh_op, &sigmoid_op,
                                                  &silu_op, &gelu_op,       &elu_op};
static_assert(sizeof tg__activation_ops / sizeof tg__activation_ops[0] == TG__activation_N,
              "src/ops/families.h must count the activation ops");

static int call1(const tg_op_schema *op, tg_tensor **out, tg_tensor *a)
{
    tg_tensor *in[1] = {a};
    return tg_op_call(op, out, 1, in, NULL, 0);
}

int tg_relu(tg_tensor **out, tg_tensor *a) { return call1(&relu_op, out, a); }
int tg_tanh(tg_tensor **out, tg_tensor *a) { return call1(&tanh_op, out, a); }
int tg_sigmoid(tg_tensor **out, tg_tensor *a) { return call1(&sigmoid_op, out, a); }
int tg_silu(tg_tensor **out, tg_tensor *a) { return call1(&silu_op, out, a); }
int tg_gelu(tg_tensor **out, tg_tensor *a) { return call1(&gelu_op, out, a); }

/* A scalar of an op in the dtype its kernel computes in, as torch's: f64
 * for f64, f32 for f32, f16 and bf16. */
static double kernel_scalar(const tg_tensor *a, double s)
{
    return a && a->dtype != TG_F64 ? (double)(float)s : s;
}

int tg_leaky_relu(tg_tensor **out, tg_tensor *a, double slope)
{
    /* Then x * s in double is exact and rounds to x * (float)s, the f32
     * product torch's kernel makes, and the backward's mask holds the same
     * s. */
    slope_params p = {.slope = kernel_scalar(a, slope)};
    tg_tensor *in[1] = {a};
    return tg_op_call(&leaky_relu_op, out, 1, in, &p, sizeof p);
}

int tg_elu(tg_tensor **out, tg_tensor *x, double alpha)
{
    TG_CHECK(out != NULL, TG_EINVAL, "elu: out must not be NULL");
    TG_CHECK(isfinite(alpha), TG_EINVAL, "elu: alpha=%g must be finite", alpha);
    elu_params p = {.alpha = kernel_scalar(x, alpha)};
    return tg_op_call(&elu_op, out, 1, (tg_tensor *[]){x}, &p, sizeof p);
}
