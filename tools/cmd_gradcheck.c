/* tools/cmd_gradcheck.c - `tapegrad gradcheck [OP ...]`.
 *
 * Runs tg_gradcheck and tg_gradgradcheck in f64 on tiny shapes over a
 * built-in sweep (gc_cases below), restricted to the named ops
 * (an op name, a group name such as "conv_transpose" or "activation", or
 * "all"), and prints one table row per case.  Exit 1 if any check fails or
 * no case ran (the named ops have none), 2 for an unknown op name.  Conv
 * cases run with both algorithms (fast, reference).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tapegrad/autograd.h"
#include "tapegrad/conv.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"
#include "tapegrad/pool.h"
#include "tapegrad/registry.h"
#include "tools.h"

#define GC_MAX_IN 3

typedef enum gc_domain {
    GC_ANY = 0,   /* U[-1, 1] kept away from 0 (kinks of relu, abs) */
    GC_POSITIVE,  /* U[0.5, 2] (log, sqrt, pow, div) */
} gc_domain;

typedef int (*gc_unary_fn)(tg_tensor **, tg_tensor *);
typedef int (*gc_binary_fn)(tg_tensor **, tg_tensor *, tg_tensor *);
typedef int (*gc_scalar_fn)(tg_tensor **, tg_tensor *, double);

typedef struct gc_case {
    const char *op;      /* the registered op's name (`tapegrad ops`) */
    const char *alias;   /* the same cases by rank (conv2d, conv_transpose1d ...), or NULL */
    /* conv, conv_transpose, elementwise, activation, reduce, shape, linalg */
    const char *group;
    const char *label;   /* NULL: generated from the conv parameters */
    tg_gradcheck_fn fn;
    int n;
    int ndim[GC_MAX_IN];
    int64_t shape[GC_MAX_IN][5];
    gc_domain domain;
    gc_unary_fn unary;
    gc_binary_fn binary;
    gc_scalar_fn scalar_op;
    double scalar;
    tg_conv_params conv;
} gc_case;

/* ---- the functions under test; user is the gc_case ---- */

static int f_unary(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return ((const gc_case *)user)->unary(out, in[0]);
}

static int f_binary(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return ((const gc_case *)user)->binary(out, in[0], in[1]);
}

static int f_scalar(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const gc_case *c = user;
    return c->scalar_op(out, in[0], c->scalar);
}

static int f_sum_dim1(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int dims[] = {1};
    return tg_sum_dims(out, in[0], 1, dims, false);
}

static int f_var_dim1_keep(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int dims[] = {1};
    return tg_var_dims(out, in[0], 1, dims, 1, true);
}

static int f_std_dims02(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int dims[] = {0, 2};
    return tg_std_dims(out, in[0], 2, dims, 0, false);
}

static int f_amax_dim1(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int dims[] = {1};
    return tg_amax_dims(out, in[0], 1, dims, false);
}

/* The values of torch.max(x, dim=-1); the indices are not differentiable. */
static int f_max_dim_last(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_tensor *idx = NULL;
    int rc = tg_max_dim(out, &idx, in[0], -1, false);
    tg_tensor_release(idx);
    return rc;
}

static int f_stack_dim1(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_stack(out, n, in, 1);
}

static int f_mean_dims_keep(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int dims[] = {0, -1};
    return tg_mean_dims(out, in[0], 2, dims, true);
}

static int f_linear(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_linear(out, in[0], in[1], n > 2 ? in[2] : NULL);
}

static int f_conv_weight_grad(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    /* z (1, 2, 5) and u (1, 2, 3): the gradient of <u, conv1d(z, W)> for W (2, 2, 3). */
    static const int64_t wshape[] = {2, 2, 3};
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    return tg_conv_weight_grad(out, in[0], in[1], 3, wshape, &p);
}

static int f_reshape(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int64_t shape[] = {3, -1};
    return tg_reshape(out, in[0], 2, shape);
}

static int f_permute(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int perm[] = {2, 0, 1};
    return tg_permute(out, in[0], perm);
}

static int f_transpose(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_transpose(out, in[0], 0, 1);
}

static int f_slice(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_slice(out, in[0], 0, 1, 5, 2);
}

static int f_expand(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int64_t shape[] = {2, 3, 4};
    return tg_expand(out, in[0], 3, shape);
}

static int f_unsqueeze(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_unsqueeze(out, in[0], 1);
}

static int f_squeeze(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_squeeze(out, in[0], 1);
}

/* contiguous of a transposed view, so that it really copies. */
static int f_contiguous(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_tensor *t = NULL;
    int rc = tg_transpose(&t, in[0], 0, 1);
    if (rc >= 0)
        rc = tg_contiguous(out, t);
    tg_tensor_release(t);
    return rc;
}

static int f_cat(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_cat(out, n, in, 0);
}

static int f_sum_to_shape(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int64_t shape[] = {3, 1};
    return tg_sum_to_shape(out, in[0], 2, shape);
}

static int f_conv(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const gc_case *c = user;
    return tg_conv(out, in[0], in[1], n > 2 ? in[2] : NULL, &c->conv);
}

static int f_conv_transpose(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const gc_case *c = user;
    return tg_conv_transpose(out, in[0], in[1], n > 2 ? in[2] : NULL, &c->conv);
}

/* Training-mode batch norm of x (4, 3, 2) with weight and bias (3), no
 * running statistics. */
static int f_batch_norm(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_batch_norm(out, in[0], NULL, NULL, in[1], in[2], true, 0.1, 1e-5);
}

/* Layer norm of x (2, 3, 4) over its last two dims, weight and bias (3, 4). */
static int f_layer_norm(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int64_t shape[2] = {3, 4};
    return tg_layer_norm(out, in[0], 2, shape, in[1], in[2], 1e-5);
}

/* Group norm of x (2, 4, 3) in 2 groups, weight and bias (4). */
static int f_group_norm(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_group_norm(out, in[0], 2, in[1], in[2], 1e-5);
}

/* Mean BCE with logits: both the logits and the target are differentiable. */
static int f_bce_logits(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_bce_with_logits(out, in[0], in[1], TG_REDUCTION_MEAN);
}

/* Mean BCE of probabilities 0.5 + 0.4 x against targets 0.5 + 0.5 t (x, t
 * in [-1, 1]), weight (4) broadcast over the rows: the three differentiable. */
static int f_bce_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_tensor *a = NULL, *p = NULL, *b = NULL, *t = NULL;
    int rc = tg_mul_scalar(&a, in[0], 0.4);
    if (rc >= 0) rc = tg_add_scalar(&p, a, 0.5);
    if (rc >= 0) rc = tg_mul_scalar(&b, in[1], 0.5);
    if (rc >= 0) rc = tg_add_scalar(&t, b, 0.5);
    if (rc >= 0) rc = tg_bce_loss(out, p, t, in[2], TG_REDUCTION_MEAN);
    tg_tensor_release(a);
    tg_tensor_release(p);
    tg_tensor_release(b);
    tg_tensor_release(t);
    return rc;
}

/* x - t spans both sides of beta = delta = 0.5 (x, t in [-1, 1]). */
static int f_smooth_l1_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_smooth_l1_loss(out, in[0], in[1], TG_REDUCTION_SUM, 0.5);
}

static int f_huber_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_huber_loss(out, in[0], in[1], TG_REDUCTION_MEAN, 0.5);
}

/* Cross entropy of logits (3, 4) against the classes {2, 0, 3}: nll_loss of
 * log_softmax. */
static int f_cross_entropy(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int64_t classes[] = {2, 0, 3}, shape[] = {3};
    tg_tensor *target = NULL;
    int rc = tg_tensor_from_data(&target, TG_I64, 1, shape, classes);
    if (rc >= 0)
        rc = tg_cross_entropy(out, in[0], target, TG_REDUCTION_MEAN);
    tg_tensor_release(target);
    return rc;
}

/* Pooling and upsampling of x (2, 2, 5, 4) over its last two dims. */
static int f_avg_pool(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 3, 2, 1);
    p.ceil_mode = true;
    return tg_avg_pool(out, in[0], 2, &p);
}

static int f_max_pool(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 2, 1, 1);
    p.dilation[1] = 2;
    return tg_max_pool(out, in[0], 2, &p);
}

static int f_upsample_nearest(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_upsample_nearest(out, in[0], 2, (const int64_t[]){2, 3});
}

static int f_bilinear(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_upsample_linear(out, in[0], 2, (const int64_t[]){7, 3}, false);
}

/* x (1, 2, 2, 3, 2) to (3, 5, 4), corners aligned. */
static int f_trilinear(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_upsample_linear(out, in[0], 3, (const int64_t[]){3, 5, 4}, true);
}

static int f_bicubic(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_upsample_bicubic(out, in[0], (const int64_t[]){9, 3}, false);
}

/* antialiased: x (2, 2, 9, 5) shrunk to (4, 3) by the triangle, or
 * shrunk and enlarged to (3, 8) by the cubic with aligned corners */
static int f_bilinear_aa(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_upsample_antialias(out, in[0], TG_UPSAMPLE_LINEAR, (const int64_t[]){4, 3}, false);
}

static int f_bicubic_aa(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_upsample_antialias(out, in[0], TG_UPSAMPLE_BICUBIC, (const int64_t[]){3, 8}, true);
}

static int f_softmax(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_softmax(out, in[0], 1);
}

/* Along dim 0, not the last: rows of stride 4. */
static int f_log_softmax(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_log_softmax(out, in[0], 0);
}

/* Weighted mean NLL of x (3, 4) against the classes {2, -100, 3}, the
 * second ignored. */
static int f_nll_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int64_t classes[] = {2, -100, 3}, shape[] = {3}, wshape[] = {4};
    static const double weights[] = {0.5, 1.0, 2.0, 1.5};
    tg_tensor *target = NULL, *weight = NULL;
    int rc = tg_tensor_from_data(&target, TG_I64, 1, shape, classes);
    if (rc >= 0)
        rc = tg_tensor_from_data(&weight, TG_F64, 1, wshape, weights);
    if (rc >= 0)
        rc = tg_nll_loss(out, in[0], target, weight, TG_REDUCTION_MEAN, TG_IGNORE_INDEX_DEFAULT);
    tg_tensor_release(target);
    tg_tensor_release(weight);
    return rc;
}

/* ---- the sweep ---- */

/* Conv parameters with the same stride s, dilation d, padding (lo, hi),
 * output_padding op on every axis. */
#define GC_CP(s, d, lo, hi, op, g, a)                                         \
    {.stride = {s, s, s}, .dilation = {d, d, d},                              \
     .padding = {{lo, hi}, {lo, hi}, {lo, hi}}, .output_padding = {op, op, op}, \
     .groups = g, .act = a, .act_slope = 0.1, .algo = TG_CONV_ALGO_DEFAULT}

/* Conv: x (1, 2, S...), weight (2, 2/g, K...), bias (2).  Transposed conv
 * has weight (C_in, C_out/g, K...), which is the same shape here. */
#define GC_CONV1(name, grp, f, S, K, g, bias, ...)                            \
    {.op = grp, .alias = name, .group = grp, .fn = f, .n = (bias) ? 3 : 2,                  \
     .ndim = {3, 3, 1}, .shape = {{1, 2, S}, {2, 2 / (g), K}, {2}},           \
     .conv = GC_CP(__VA_ARGS__)}
#define GC_CONV2(name, grp, f, S, K, g, bias, ...)                            \
    {.op = grp, .alias = name, .group = grp, .fn = f, .n = (bias) ? 3 : 2,                  \
     .ndim = {4, 4, 1}, .shape = {{1, 2, S, S - 1}, {2, 2 / (g), K, K}, {2}},  \
     .conv = GC_CP(__VA_ARGS__)}
#define GC_CONV3(name, grp, f, S, K, g, bias, ...)                            \
    {.op = grp, .alias = name, .group = grp, .fn = f, .n = (bias) ? 3 : 2,                  \
     .ndim = {5, 5, 1}, .shape = {{1, 2, S, S, S}, {2, 2 / (g), K, K, K}, {2}}, \
     .conv = GC_CP(__VA_ARGS__)}

#define GC_UN(name, grp, f, nd, dom, ...)                                     \
    {.op = name, .group = grp, .label = "(" #__VA_ARGS__ ")", .fn = f_unary, .n = 1,  \
     .ndim = {nd}, .shape = {{__VA_ARGS__}}, .domain = dom, .unary = f}
#define GC_SC(name, grp, f, s, dom)                                           \
    {.op = name, .group = grp, .label = "(3, 4) scalar " #s, .fn = f_scalar,  \
     .n = 1, .ndim = {2}, .shape = {{3, 4}}, .domain = dom, .scalar_op = f,   \
     .scalar = s}
#define GC_BIN(name, grp, f, dom, label_, na, nb, sa, sb)                     \
    {.op = name, .group = grp, .label = label_, .fn = f_binary,     \
     .n = 2, .ndim = {na, nb}, .shape = {sa, sb}, .domain = dom, .binary = f}
#define GC_SHAPE(...) {__VA_ARGS__}
#define GC_FN(name, grp, f, label_, n_, ...)                                  \
    {.op = name, .group = grp, .label = label_, .fn = f, .n = n_, __VA_ARGS__}

static const char *const C = "conv", *const T = "conv_transpose";

static const gc_case gc_cases[] = {
    /* conv: stride, dilation, padding (incl. asymmetric), groups, bias, act */
    GC_CONV1("conv1d", C, f_conv, 5, 3, 1, 1, 1, 1, 0, 0, 0, 1, TG_ACT_NONE),
    GC_CONV1("conv1d", C, f_conv, 7, 2, 2, 0, 2, 2, 1, 1, 0, 2, TG_ACT_NONE),
    GC_CONV1("conv1d", C, f_conv, 5, 3, 1, 1, 1, 1, 2, 0, 0, 1, TG_ACT_LEAKY_RELU),
    GC_CONV1("conv1d", C, f_conv, 6, 2, 1, 1, 1, 2, 0, 1, 0, 1, TG_ACT_GELU),
    GC_CONV2("conv2d", C, f_conv, 5, 3, 1, 1, 2, 1, 1, 1, 0, 1, TG_ACT_NONE),
    GC_CONV2("conv2d", C, f_conv, 5, 3, 2, 1, 2, 1, 0, 2, 0, 2, TG_ACT_SIGMOID),
    GC_CONV2("conv2d", C, f_conv, 5, 2, 2, 1, 1, 2, 1, 0, 0, 2, TG_ACT_TANH),
    GC_CONV3("conv3d", C, f_conv, 3, 2, 1, 1, 1, 1, 0, 0, 0, 1, TG_ACT_NONE),
    GC_CONV3("conv3d", C, f_conv, 4, 2, 2, 0, 2, 1, 1, 0, 0, 2, TG_ACT_SILU),
    GC_CONV3("conv3d", C, f_conv, 4, 2, 1, 1, 1, 2, 1, 0, 0, 1, TG_ACT_RELU),
    /* conv_transpose: the same plus output_padding */
    GC_CONV1("conv_transpose1d", T, f_conv_transpose, 4, 3, 1, 1, 2, 1, 1, 1, 1, 1,
             TG_ACT_NONE),
    GC_CONV1("conv_transpose1d", T, f_conv_transpose, 4, 2, 2, 0, 2, 2, 0, 1, 1, 2,
             TG_ACT_GELU),
    GC_CONV1("conv_transpose1d", T, f_conv_transpose, 3, 2, 1, 1, 3, 1, 1, 0, 2, 1,
             TG_ACT_TANH),
    GC_CONV2("conv_transpose2d", T, f_conv_transpose, 3, 3, 1, 1, 2, 1, 1, 1, 1, 1,
             TG_ACT_NONE),
    GC_CONV2("conv_transpose2d", T, f_conv_transpose, 3, 2, 2, 1, 2, 2, 1, 0, 1, 2,
             TG_ACT_SILU),
    GC_CONV2("conv_transpose2d", T, f_conv_transpose, 3, 2, 2, 1, 1, 2, 1, 0, 0, 2,
             TG_ACT_SIGMOID),
    GC_CONV2("conv_transpose2d", T, f_conv_transpose, 3, 2, 1, 0, 2, 1, 0, 1, 0, 1,
             TG_ACT_RELU),
    GC_CONV3("conv_transpose3d", T, f_conv_transpose, 2, 2, 1, 1, 2, 1, 0, 0, 1, 1,
             TG_ACT_NONE),
    GC_CONV3("conv_transpose3d", T, f_conv_transpose, 2, 2, 2, 0, 2, 1, 1, 1, 1, 2,
             TG_ACT_TANH),
    GC_CONV3("conv_transpose3d", T, f_conv_transpose, 2, 2, 2, 1, 1, 2, 0, 1, 1, 2,
             TG_ACT_SIGMOID),
    GC_FN("conv_weight_grad", C, f_conv_weight_grad, "z (1, 2, 5), u (1, 2, 3), w (2, 2, 3)",
          2, .ndim = {3, 3}, .shape = {{1, 2, 5}, {1, 2, 3}}),
    /* elementwise binary, with broadcasting */
    GC_BIN("add", "elementwise", tg_add, GC_ANY, "(3, 4) + (4)", 2, 1, GC_SHAPE(3, 4),
           GC_SHAPE(4)),
    GC_BIN("sub", "elementwise", tg_sub, GC_ANY, "(2, 1, 3) - (4, 1)", 3, 2,
           GC_SHAPE(2, 1, 3), GC_SHAPE(4, 1)),
    GC_BIN("mul", "elementwise", tg_mul, GC_ANY, "(2, 3) * (2, 1)", 2, 2, GC_SHAPE(2, 3),
           GC_SHAPE(2, 1)),
    GC_BIN("div", "elementwise", tg_div, GC_POSITIVE, "(3, 4) / (3, 4)", 2, 2,
           GC_SHAPE(3, 4), GC_SHAPE(3, 4)),
    GC_BIN("pow", "elementwise", tg_pow, GC_POSITIVE, "(3, 4) ** (4)", 2, 1,
           GC_SHAPE(3, 4), GC_SHAPE(4)),
    GC_BIN("maximum", "elementwise", tg_maximum, GC_ANY, "max((3, 4), (4))", 2, 1,
           GC_SHAPE(3, 4), GC_SHAPE(4)),
    GC_BIN("minimum", "elementwise", tg_minimum, GC_ANY, "min((2, 1), (2, 3))", 2, 2,
           GC_SHAPE(2, 1), GC_SHAPE(2, 3)),
    GC_SC("add_scalar", "elementwise", tg_add_scalar, 1.5, GC_ANY),
    GC_SC("sub_scalar", "elementwise", tg_sub_scalar, 0.5, GC_ANY),
    GC_SC("rsub_scalar", "elementwise", tg_rsub_scalar, 2.0, GC_ANY),
    GC_SC("mul_scalar", "elementwise", tg_mul_scalar, -3.0, GC_ANY),
    GC_SC("div_scalar", "elementwise", tg_div_scalar, 4.0, GC_ANY),
    GC_SC("pow_scalar", "elementwise", tg_pow_scalar, 2.5, GC_POSITIVE),
    GC_UN("neg", "elementwise", tg_neg, 2, GC_ANY, 3, 4),
    GC_UN("exp", "elementwise", tg_exp, 2, GC_ANY, 3, 4),
    GC_UN("log", "elementwise", tg_log, 2, GC_POSITIVE, 3, 4),
    GC_UN("sqrt", "elementwise", tg_sqrt, 2, GC_POSITIVE, 3, 4),
    GC_UN("abs", "elementwise", tg_abs, 2, GC_ANY, 3, 4),
    GC_UN("erf", "elementwise", tg_erf, 2, GC_ANY, 3, 4),
    /* activations */
    GC_UN("relu", "activation", tg_relu, 2, GC_ANY, 3, 4),
    GC_SC("leaky_relu", "activation", tg_leaky_relu, 0.1, GC_ANY),
    GC_UN("tanh", "activation", tg_tanh, 2, GC_ANY, 3, 4),
    GC_UN("sigmoid", "activation", tg_sigmoid, 2, GC_ANY, 3, 4),
    GC_UN("silu", "activation", tg_silu, 2, GC_ANY, 3, 4),
    GC_UN("gelu", "activation", tg_gelu, 2, GC_ANY, 3, 4),
    GC_FN("softmax", "activation", f_softmax, "(3, 4) dim 1", 1, .ndim = {2},
          .shape = {{3, 4}}),
    GC_FN("log_softmax", "activation", f_log_softmax, "(3, 4) dim 0", 1, .ndim = {2},
          .shape = {{3, 4}}),
    /* reductions */
    GC_UN("sum", "reduce", tg_sum, 3, GC_ANY, 2, 3, 2),
    GC_UN("mean", "reduce", tg_mean, 3, GC_ANY, 2, 3, 2),
    {.op = "sum_dims", .group = "reduce", .label = "(2, 3, 2) dims 1", .fn = f_sum_dim1,
     .n = 1, .ndim = {3}, .shape = {{2, 3, 2}}},
    {.op = "mean_dims", .group = "reduce", .label = "(2, 3, 2) dims 0,-1 keepdim",
     .fn = f_mean_dims_keep, .n = 1, .ndim = {3}, .shape = {{2, 3, 2}}},
    GC_FN("sum_to_shape", "reduce", f_sum_to_shape, "(2, 3, 4) to (3, 1)", 1,
          .ndim = {3}, .shape = {{2, 3, 4}}),
    GC_FN("var", "reduce", f_var_dim1_keep, "(2, 3, 2) dims 1 correction 1 keepdim", 1,
          .ndim = {3}, .shape = {{2, 3, 2}}),
    GC_FN("std", "reduce", f_std_dims02, "(2, 3, 2) dims 0,2 correction 0", 1, .ndim = {3},
          .shape = {{2, 3, 2}}),
    GC_FN("amax", "reduce", f_amax_dim1, "(2, 4, 3) dims 1", 1, .ndim = {3},
          .shape = {{2, 4, 3}}),
    GC_UN("max", "reduce", tg_max, 2, GC_ANY, 3, 4),
    GC_FN("pick_along_dim", "reduce", f_max_dim_last, "max_dim (3, 4) dim -1 values", 1,
          .ndim = {2}, .shape = {{3, 4}}),
    /* shape ops */
    GC_FN("reshape", "shape", f_reshape, "(2, 3, 2) to (3, -1)", 1, .ndim = {3},
          .shape = {{2, 3, 2}}),
    GC_FN("permute", "shape", f_permute, "(2, 3, 4) perm 2,0,1", 1, .ndim = {3},
          .shape = {{2, 3, 4}}),
    GC_FN("transpose", "shape", f_transpose, "(3, 4) dims 0,1", 1, .ndim = {2},
          .shape = {{3, 4}}),
    GC_FN("slice", "shape", f_slice, "(5, 4) dim 0 [1:5:2]", 1, .ndim = {2},
          .shape = {{5, 4}}),
    GC_FN("expand", "shape", f_expand, "(3, 1) to (2, 3, 4)", 1, .ndim = {2},
          .shape = {{3, 1}}),
    GC_FN("unsqueeze", "shape", f_unsqueeze, "(3, 4) dim 1", 1, .ndim = {2},
          .shape = {{3, 4}}),
    GC_FN("squeeze", "shape", f_squeeze, "(3, 1, 4) dim 1", 1, .ndim = {3},
          .shape = {{3, 1, 4}}),
    GC_FN("contiguous", "shape", f_contiguous, "(3, 4) transposed", 1, .ndim = {2},
          .shape = {{3, 4}}),
    GC_FN("cat", "shape", f_cat, "(2, 3), (4, 3) dim 0", 2, .ndim = {2, 2},
          .shape = {{2, 3}, {4, 3}}),
    GC_FN("cat", "shape", f_stack_dim1, "stack (2, 3), (2, 3) dim 1", 2, .ndim = {2, 2},
          .shape = {{2, 3}, {2, 3}}),
    /* linear algebra */
    GC_BIN("matmul", "linalg", tg_matmul, GC_ANY, "(3, 4) @ (4, 2)", 2, 2, GC_SHAPE(3, 4),
           GC_SHAPE(4, 2)),
    GC_BIN("matmul", "linalg", tg_matmul, GC_ANY, "(2, 3, 4) @ (2, 4, 2)", 3, 3,
           GC_SHAPE(2, 3, 4), GC_SHAPE(2, 4, 2)),
    {.op = "linear", .group = "linalg", .label = "x (3, 4), w (2, 4), b (2)",
     .fn = f_linear, .n = 3, .ndim = {2, 2, 1}, .shape = {{3, 4}, {2, 4}, {2}}},
    /* normalisation and losses */
    GC_FN("batch_norm", "nn", f_batch_norm, "x (4, 3, 2), w (3), b (3) training", 3,
          .ndim = {3, 1, 1}, .shape = {{4, 3, 2}, {3}, {3}}),
    GC_FN("layer_norm", "nn", f_layer_norm, "x (2, 3, 4) over (3, 4), w, b (3, 4)", 3,
          .ndim = {3, 2, 2}, .shape = {{2, 3, 4}, {3, 4}, {3, 4}}),
    GC_FN("group_norm", "nn", f_group_norm, "x (2, 4, 3) 2 groups, w (4), b (4)", 3,
          .ndim = {3, 1, 1}, .shape = {{2, 4, 3}, {4}, {4}}),
    GC_FN("bce_logits", "nn", f_bce_logits, "x (3, 4), target (3, 4) mean", 2,
          .ndim = {2, 2}, .shape = {{3, 4}, {3, 4}}),
    GC_FN("bce_loss", "nn", f_bce_loss, "x (3, 4) in [0.1, 0.9], target, weight (4) mean", 3,
          .ndim = {2, 2, 1}, .shape = {{3, 4}, {3, 4}, {4}}),
    GC_FN("smooth_l1_loss", "nn", f_smooth_l1_loss, "x (3, 4), target (3, 4) beta 0.5 sum", 2,
          .ndim = {2, 2}, .shape = {{3, 4}, {3, 4}}),
    GC_FN("huber_loss", "nn", f_huber_loss, "x (3, 4), target (3, 4) delta 0.5 mean", 2,
          .ndim = {2, 2}, .shape = {{3, 4}, {3, 4}}),
    GC_FN("nll_loss", "nn", f_cross_entropy, "cross_entropy x (3, 4), classes {2, 0, 3}", 1,
          .ndim = {2}, .shape = {{3, 4}}),
    GC_FN("nll_loss", "nn", f_nll_loss, "x (3, 4), classes {2, -100, 3}, weight, mean", 1,
          .ndim = {2}, .shape = {{3, 4}}),
    /* pooling and upsampling */
    GC_FN("avg_pool", "pool", f_avg_pool, "(2, 2, 5, 4) 2-d k 3 s 2 p 1 ceil_mode", 1,
          .ndim = {4}, .shape = {{2, 2, 5, 4}}),
    GC_FN("max_pool", "pool", f_max_pool, "(2, 2, 5, 4) 2-d k 2 s 1 p 1 dilation 1,2", 1,
          .ndim = {4}, .shape = {{2, 2, 5, 4}}),
    GC_FN("upsample_nearest", "pool", f_upsample_nearest, "(2, 2, 5, 4) scale 2,3", 1,
          .ndim = {4}, .shape = {{2, 2, 5, 4}}),
    GC_FN("upsample_linear", "pool", f_bilinear, "bilinear (2, 2, 5, 4) to (7, 3)", 1,
          .ndim = {4}, .shape = {{2, 2, 5, 4}}),
    GC_FN("upsample_linear", "pool", f_trilinear, "trilinear (1, 2, 2, 3, 2) to (3, 5, 4) "
          "align_corners", 1, .ndim = {5}, .shape = {{1, 2, 2, 3, 2}}),
    GC_FN("upsample_bicubic", "pool", f_bicubic, "(2, 2, 5, 4) to (9, 3)", 1, .ndim = {4},
          .shape = {{2, 2, 5, 4}}),
    GC_FN("upsample_bilinear2d_aa", "pool", f_bilinear_aa, "(2, 2, 9, 5) to (4, 3)", 1,
          .ndim = {4}, .shape = {{2, 2, 9, 5}}),
    GC_FN("upsample_bicubic2d_aa", "pool", f_bicubic_aa, "(2, 2, 9, 5) to (3, 8) align_corners",
          1, .ndim = {4}, .shape = {{2, 2, 9, 5}}),
};
#define GC_NCASES ((int)(sizeof gc_cases / sizeof gc_cases[0]))

/* ---- running ---- */

static const char gc_usage[] =
    "usage: tapegrad gradcheck [--plugin PATH.so ...] [OP ...]\n"
    "Checks first and second derivatives (tg_gradcheck, tg_gradgradcheck, f64)\n"
    "on a built-in sweep of tiny cases.  OP is an op name as `tapegrad ops`\n"
    "lists it (conv_transpose, add, ...), a conv op with its rank\n"
    "(conv_transpose2d), a group (conv, conv_transpose, elementwise,\n"
    "activation, reduce, shape, linalg, nn, pool) or all (the default).  Conv\n"
    "cases run with both conv algorithms.\n"
    "--plugin loads a shared object whose `int tapegrad_register(void)`\n"
    "registers ops (tapegrad/op.h); its ops are checked on (3, 4) f64 inputs,\n"
    "contiguous and then transposed (strides (1, 3)), three for a variadic op\n"
    "(n/a for an op without inputs or backward, or one whose shape rule, or\n"
    "forward without one, refuses them with TG_EDTYPE or TG_ESHAPE), and are\n"
    "the default OPs when plugins are given.\n"
    "Exit 0 when every case passes, 1 when one fails or when the named ops\n"
    "have no case or are all n/a (nothing was checked), 2 for an unknown name\n"
    "or a plugin that cannot be loaded, lacks the entry point or registers\n"
    "nothing.\n";

/* The conv parameters as "x(1, 2, 5) k3 s2 d1 p1,0 op1 g2 bias tanh fast". */
static void conv_label(char *buf, size_t n, const gc_case *c, tg_conv_algo algo)
{
    const tg_conv_params *p = &c->conv;
    char xs[64];
    tg_shape_str(xs, sizeof xs, c->ndim[0], c->shape[0]);
    int len = snprintf(buf, n, "x%s k%lld s%lld d%lld p%lld,%lld", xs,
                       (long long)c->shape[1][2], (long long)p->stride[0],
                       (long long)p->dilation[0], (long long)p->padding[0][0],
                       (long long)p->padding[0][1]);
    if (c->fn == f_conv_transpose && len > 0 && (size_t)len < n)
        len += snprintf(buf + len, n - (size_t)len, " op%lld", (long long)p->output_padding[0]);
    if (len > 0 && (size_t)len < n)
        snprintf(buf + len, n - (size_t)len, " g%lld%s%s%s %s", (long long)p->groups,
                 c->n > 2 ? " bias" : "", p->act ? " " : "",
                 p->act ? tg_activation_name(p->act) : "",
                 algo == TG_CONV_ALGO_REFERENCE ? "ref" : "fast");
}

/* Random f64 inputs that require grad, in the case's domain. */
static int make_inputs(tg_tensor **in, const gc_case *c, uint64_t seed)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    for (int i = 0; i < c->n; i++) {
        int rc = tg_tensor_zeros(&in[i], TG_F64, c->ndim[i], c->shape[i]);
        if (rc < 0)
            return rc;
        if (c->domain == GC_POSITIVE) {
            rc = tg_tensor_rand_uniform(in[i], &rng, 0.5, 2.0);
        } else {
            rc = tg_tensor_rand_uniform(in[i], &rng, -1.0, 1.0);
            /* Keep |v| >= 0.1 so no central difference straddles a kink at 0. */
            for (int64_t k = 0; rc >= 0 && k < tg_tensor_numel(in[i]); k++) {
                double v;
                rc = tg_tensor_get_flat(in[i], k, &v);
                if (rc >= 0 && v > -0.1 && v < 0.1)
                    rc = tg_tensor_set_flat(in[i], k, v < 0 ? v - 0.1 : v + 0.1);
            }
        }
        if (rc >= 0)
            rc = tg_tensor_set_requires_grad(in[i], true);
        if (rc < 0)
            return rc;
    }
    return TG_OK;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs one case (conv cases with the given algorithm); returns true when
 * both checks pass. */
static bool run_case(const gc_case *proto, int index, tg_conv_algo algo)
{
    gc_case copy = *proto, *c = &copy;
    c->conv.algo = algo;
    tg_tensor *in[GC_MAX_IN] = {NULL, NULL, NULL};
    tg_gradcheck_opts opts = TG_GRADCHECK_OPTS_INIT;
    opts.seed = 1000 + (uint64_t)index;
    char label[160], msg[2][512] = {"", ""};
    if (c->label) {
        snprintf(label, sizeof label, "%s", c->label);
    } else {   /* the rank first: "2d x(1, 2, 5, 4) ..." */
        char conv[120];
        conv_label(conv, sizeof conv, c, algo);
        snprintf(label, sizeof label, "%s %s", c->alias ? c->alias + strlen(c->op) : "", conv);
    }
    double t0 = now_seconds();
    int rc[2];
    rc[0] = rc[1] = make_inputs(in, c, opts.seed);
    if (rc[0] < 0) {
        snprintf(msg[0], sizeof msg[0], "%s", tg_error_message());
    } else {
        rc[0] = tg_gradcheck(c->fn, (void *)c, c->n, in, &opts);
        if (rc[0] < 0)
            snprintf(msg[0], sizeof msg[0], "%s", tg_error_message());
        rc[1] = tg_gradgradcheck(c->fn, (void *)c, c->n, in, &opts);
        if (rc[1] < 0)
            snprintf(msg[1], sizeof msg[1], "%s", tg_error_message());
    }
    double dt = now_seconds() - t0;
    printf("%-22s %-58s %-8s %-8s %7.3fs\n", c->op, label, rc[0] < 0 ? "FAIL" : "ok",
           rc[1] < 0 ? "FAIL" : "ok", dt);
    for (int k = 0; k < 2; k++)
        if (msg[k][0])
            printf("    %s: %s (%s)\n", k ? "gradgrad" : "grad", msg[k],
                   tg_status_name(rc[k]));
    for (int i = 0; i < GC_MAX_IN; i++)
        tg_tensor_release(in[i]);
    return rc[0] >= 0 && rc[1] >= 0;
}

static bool case_selected(const gc_case *c, const char *name)
{
    return strcmp(name, "all") == 0 || strcmp(name, c->op) == 0 ||
           strcmp(name, c->group) == 0 || (c->alias && strcmp(name, c->alias) == 0);
}

/* Marks the selected cases; returns -1 to go on, or the exit code (help, or
 * an unknown name). */
static int select_cases(int argc, char **argv, bool *sel, const tg_plugin_ops *plugin,
                        bool *psel)
{
    for (int k = 0; k < GC_NCASES; k++)
        sel[k] = argc <= 1 && plugin->n == 0;
    for (int k = 0; k < plugin->n; k++)
        psel[k] = argc <= 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(gc_usage, stdout);
            return TG_EXIT_OK;
        }
        bool found = false;
        for (int k = 0; k < GC_NCASES; k++)
            if (case_selected(&gc_cases[k], argv[i]))
                sel[k] = found = true;
        for (int k = 0; k < plugin->n; k++)
            if (strcmp(argv[i], plugin->names[k]) == 0 || strcmp(argv[i], "all") == 0)
                psel[k] = found = true;
        tg_op_info info;
        if (!found && tg_op_info_find(argv[i], &info) == TG_OK) {
            printf("%s: registered, but the sweep has no cases for it (its gradient is "
                   "checked in the test suite, or it has none to check)\n", argv[i]);
            found = true;
        }
        if (!found) {
            fprintf(stderr, "tapegrad gradcheck: unknown %s '%s'\n%s",
                    argv[i][0] == '-' ? "option" : "op", argv[i], gc_usage);
            return TG_EXIT_USAGE;
        }
    }
    return -1;
}

int tg_cmd_gradcheck(int argc, char **argv)
{
    tg_plugin_ops plugin;
    int code = tg_tool_load_plugins("gradcheck", &argc, argv, &plugin);
    if (code >= 0)
        return code;
    bool sel[GC_NCASES], psel[TG_PLUGIN_MAX_OPS];
    code = select_cases(argc, argv, sel, &plugin, psel);
    if (code >= 0)
        return code;
    printf("%-22s %-58s %-8s %-8s %8s\n", "op", "case", "grad", "gradgrad", "time");
    int run = 0, failed = 0;
    double t0 = now_seconds();
    for (int k = 0; k < GC_NCASES; k++) {
        if (!sel[k])
            continue;
        /* Conv cases run with both algorithms: they share no kernel code. */
        bool conv = gc_cases[k].fn == f_conv || gc_cases[k].fn == f_conv_transpose;
        for (int a = 0; a < (conv ? 2 : 1); a++) {
            run++;
            if (!run_case(&gc_cases[k], k, a ? TG_CONV_ALGO_REFERENCE : TG_CONV_ALGO_FAST))
                failed++;
        }
    }
    int na = 0;   /* plugin ops with nothing to check: not cases checked */
    for (int k = 0; k < plugin.n; k++) {
        if (!psel[k])
            continue;
        tg_plugin_check r = tg_tool_gradcheck_plugin_op(plugin.names[k]);
        run += r != TG_PLUGIN_CHECK_NA;
        failed += r == TG_PLUGIN_CHECK_FAILED;
        na += r == TG_PLUGIN_CHECK_NA;
    }
    printf("%d case%s, %d failed", run, run == 1 ? "" : "s", failed);
    if (na)
        printf(", %d n/a", na);
    printf(", %.2fs\n", now_seconds() - t0);
    if (run == 0)
        fprintf(stderr, "tapegrad gradcheck: no case checked\n");
    return failed || run == 0 ? TG_EXIT_FAIL : TG_EXIT_OK;
}
