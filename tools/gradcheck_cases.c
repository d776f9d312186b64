/* tools/gradcheck_cases.c - the built-in sweep of `tapegrad gradcheck`:
 * the functions under test (user is the gc_case) but those of the nn and
 * pool groups (gradcheck_fns_nn.c), and the table of cases. */
#include <string.h>

#include "gradcheck_cases.h"
#include "tapegrad/ops.h"
#include "tapegrad/pool.h"

/* ---- the functions under test; user is the gc_case ---- */

static int f_unary(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return ((const gc_case *)user)->unary(out, in[0]);
}

/* The unary op of f(x * scalar) (asin, acos, atanh: U[-1, 1] scaled inside
 * their domain) and f(x + scalar) (acosh: U[0.5, 2] moved past 1). */
static int f_unary_scaled(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const gc_case *c = user;
    tg_tensor *t = NULL;
    int rc = tg_mul_scalar(&t, in[0], c->scalar);
    if (rc >= 0) rc = c->unary(out, t);
    tg_tensor_release(t);
    return rc;
}

static int f_unary_shifted(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const gc_case *c = user;
    tg_tensor *t = NULL;
    int rc = tg_add_scalar(&t, in[0], c->scalar);
    if (rc >= 0) rc = c->unary(out, t);
    tg_tensor_release(t);
    return rc;
}

static int f_binary(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return ((const gc_case *)user)->binary(out, in[0], in[1]);
}

/* lerp_scalar(in[0], in[1], the case's scalar). */
static int f_lerp_scalar(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_lerp_scalar(out, in[0], in[1], ((const gc_case *)user)->scalar);
}

static int f_lerp(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_lerp(out, in[0], in[1], in[2]);
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

static int f_vector_norm_dim1(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int dims[] = {1};
    return tg_vector_norm(out, in[0], 3.0, 1, dims, false);
}

static int f_logsumexp_dim1(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int dims[] = {1};
    return tg_logsumexp(out, in[0], 1, dims, false);
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

static int f_flip(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int dims[] = {0, -1};
    return tg_flip(out, in[0], 2, dims);
}

static int f_cumsum(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_cumsum(out, in[0], -2);
}

/* tg_repeat is made of reshape and expand; its gradient sums the tiles. */
static int f_repeat(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int64_t repeats[] = {2, 1, 3};
    return tg_repeat(out, in[0], 3, repeats);
}

static int f_roll(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int64_t shifts[] = {1, -5};
    static const int dims[] = {0, -1};
    return tg_roll(out, in[0], 2, shifts, dims);
}

static int f_tril(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_tril(out, in[0], 1);
}

/* affine_grid: base grid times theta^T, one matmul */
static int f_affine_grid(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_affine_grid(out, in[0], 4, (const int64_t[]){2, 1, 3, 4}, false);
}

static int f_triu(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_triu(out, in[0], -1);
}

static int f_einsum(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_einsum(out, "bij,bjk->bik", n, in);
}

/* Three operands: contracted in the searched order (the chain's cheap end
 * first), not left to right. */
static int f_einsum3(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_einsum(out, "ab,bc,cd->ad", n, in);
}

static int f_baddbmm(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_baddbmm(out, in[0], in[1], in[2], 0.5, 2.0);
}

/* The three chunks of (2, 6) along dim 1, multiplied: each piece's gradient
 * depends on the others. */
static int f_chunk(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_tensor *p[3] = {0}, *q = NULL;
    int np = 0;
    int rc = tg_chunk(p, 3, &np, in[0], 3, 1);
    if (rc >= 0) rc = tg_mul(&q, p[0], p[1]);
    if (rc >= 0) rc = tg_mul(out, q, p[2]);
    tg_tensor_release(q);
    for (int i = 0; i < np; i++) tg_tensor_release(p[i]);
    return rc;
}

/* The indexing ops of x (3, 4) along dim 1 with repeated indices: a (3, 2)
 * index for gather and scatter_add (src (3, 2)), a 1-d one of 3 values for
 * index_select and index_add (src (3, 3)); which: 0 gather, 1 scatter_add,
 * 2 index_select, 3 index_add. */
static int f_indexing(tg_tensor **out, tg_tensor *const *in, int which)
{
    static const int64_t two_d[6] = {3, 0, 1, 1, 0, 0}, one_d[3] = {2, 0, 2};
    const bool select = which >= 2;
    tg_tensor *idx = NULL;
    int rc = select ? tg_tensor_from_data(&idx, TG_I64, 1, (const int64_t[]){3}, one_d)
                    : tg_tensor_from_data(&idx, TG_I64, 2, (const int64_t[]){3, 2}, two_d);
    if (rc < 0) return rc;
    switch (which) {
    case 0: rc = tg_gather(out, in[0], 1, idx); break;
    case 1: rc = tg_scatter_add(out, in[0], 1, idx, in[1]); break;
    case 2: rc = tg_index_select(out, in[0], -1, idx); break;
    default: rc = tg_index_add(out, in[0], -1, idx, in[1]); break;
    }
    tg_tensor_release(idx);
    return rc;
}

static int f_gather(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return f_indexing(out, in, 0);
}

static int f_scatter_add(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return f_indexing(out, in, 1);
}

static int f_index_select(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return f_indexing(out, in, 2);
}

static int f_index_add(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return f_indexing(out, in, 3);
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

static int f_softmax(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_softmax(out, in[0], 1);
}

/* Bounds inside the sample range U[-1, 1], so both flat sides are hit. */
static int f_hardtanh(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_hardtanh(out, in[0], -0.5, 0.5);
}

/* The threshold inside U[-1, 1], so both sides are hit. */
static int f_threshold(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_threshold(out, in[0], 0.2, -0.7);
}

/* Halving dim 1 (4 -> 2) and dim 0 (2 -> 1). */
static int f_glu1(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_glu(out, in[0], 1);
}

static int f_glu0(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_glu(out, in[0], -2);
}

/* Along dim 0, not the last: rows of stride 4. */
static int f_log_softmax(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_log_softmax(out, in[0], 0);
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

const gc_case gc_cases[] = {
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
    GC_UN("sin", "elementwise", tg_sin, 2, GC_ANY, 3, 4),
    GC_UN("cos", "elementwise", tg_cos, 2, GC_ANY, 3, 4),
    GC_UN("log1p", "elementwise", tg_log1p, 2, GC_POSITIVE, 3, 4),
    GC_UN("expm1", "elementwise", tg_expm1, 2, GC_ANY, 3, 4),
    GC_UN("sign", "elementwise", tg_sign, 2, GC_ANY, 3, 4),
    GC_UN("floor", "elementwise", tg_floor, 2, GC_ANY, 3, 4),
    GC_UN("ceil", "elementwise", tg_ceil, 2, GC_ANY, 3, 4),
    GC_UN("round", "elementwise", tg_round, 2, GC_ANY, 3, 4),
    GC_UN("trunc", "elementwise", tg_trunc, 2, GC_ANY, 3, 4),
    GC_UN("reciprocal", "elementwise", tg_reciprocal, 2, GC_POSITIVE, 3, 4),
    GC_UN("rsqrt", "elementwise", tg_rsqrt, 2, GC_POSITIVE, 3, 4),
    GC_UN("tan", "elementwise", tg_tan, 2, GC_ANY, 3, 4),
    GC_UN("atan", "elementwise", tg_atan, 2, GC_ANY, 3, 4),
    GC_FN("asin", "elementwise", f_unary_scaled, "(3, 4) times 0.8", 1, .ndim = {2},
          .shape = {{3, 4}}, .unary = tg_asin, .scalar = 0.8),
    GC_FN("acos", "elementwise", f_unary_scaled, "(3, 4) times 0.8", 1, .ndim = {2},
          .shape = {{3, 4}}, .unary = tg_acos, .scalar = 0.8),
    GC_UN("sinh", "elementwise", tg_sinh, 2, GC_ANY, 3, 4),
    GC_UN("cosh", "elementwise", tg_cosh, 2, GC_ANY, 3, 4),
    GC_UN("asinh", "elementwise", tg_asinh, 2, GC_ANY, 3, 4),
    GC_FN("acosh", "elementwise", f_unary_shifted, "(3, 4) in [0.5, 2] plus 1", 1,
          .ndim = {2}, .shape = {{3, 4}}, .domain = GC_POSITIVE, .unary = tg_acosh,
          .scalar = 1.0),
    GC_FN("atanh", "elementwise", f_unary_scaled, "(3, 4) times 0.8", 1, .ndim = {2},
          .shape = {{3, 4}}, .unary = tg_atanh, .scalar = 0.8),
    GC_UN("log2", "elementwise", tg_log2, 2, GC_POSITIVE, 3, 4),
    GC_UN("log10", "elementwise", tg_log10, 2, GC_POSITIVE, 3, 4),
    GC_UN("exp2", "elementwise", tg_exp2, 2, GC_ANY, 3, 4),
    GC_UN("logsigmoid", "activation", tg_logsigmoid, 2, GC_ANY, 3, 4),
    GC_BIN("atan2", "elementwise", tg_atan2, GC_ANY, "atan2((3, 1), (4))", 2, 1,
           GC_SHAPE(3, 1), GC_SHAPE(4)),
    GC_FN("lerp_scalar", "elementwise", f_lerp_scalar, "lerp_scalar((3, 1), (4), 0.3)", 2,
          .ndim = {2, 1}, .shape = {{3, 1}, {4}}, .scalar = 0.3),
    GC_FN("lerp_scalar", "elementwise", f_lerp_scalar, "lerp_scalar((3, 4), (3, 4), 0.9)", 2,
          .ndim = {2, 2}, .shape = {{3, 4}, {3, 4}}, .scalar = 0.9),
    GC_FN("lerp", "elementwise", f_lerp, "lerp((2, 3, 1), (3, 4), (4))", 3,
          .ndim = {3, 2, 1}, .shape = {{2, 3, 1}, {3, 4}, {4}}),
    GC_BIN("logaddexp", "elementwise", tg_logaddexp, GC_ANY, "logaddexp((3, 1), (4))", 2, 1,
           GC_SHAPE(3, 1), GC_SHAPE(4)),
    GC_BIN("logaddexp2", "elementwise", tg_logaddexp2, GC_ANY, "logaddexp2((3, 1), (4))", 2,
           1, GC_SHAPE(3, 1), GC_SHAPE(4)),
    GC_BIN("xlogy", "elementwise", tg_xlogy, GC_POSITIVE, "xlogy((3, 4), (4))", 2, 1,
           GC_SHAPE(3, 4), GC_SHAPE(4)),
    GC_BIN("xlog1py", "elementwise", tg_xlog1py, GC_POSITIVE, "xlog1py((3, 4), (4))", 2, 1,
           GC_SHAPE(3, 4), GC_SHAPE(4)),
    GC_BIN("hypot", "elementwise", tg_hypot, GC_POSITIVE, "hypot((3, 1), (4))", 2, 1,
           GC_SHAPE(3, 1), GC_SHAPE(4)),
    GC_BIN("copysign", "elementwise", tg_copysign, GC_ANY, "copysign((3, 4), (4))", 2, 1,
           GC_SHAPE(3, 4), GC_SHAPE(4)),
    GC_UN("erfc", "elementwise", tg_erfc, 2, GC_ANY, 3, 4),
    GC_FN("erfinv", "elementwise", f_unary_scaled, "(3, 4) times 0.8", 1, .ndim = {2},
          .shape = {{3, 4}}, .unary = tg_erfinv, .scalar = 0.8),
    GC_UN("sinc", "elementwise", tg_sinc, 2, GC_ANY, 3, 4),
    GC_UN("lgamma", "elementwise", tg_lgamma, 2, GC_POSITIVE, 3, 4),
    GC_UN("digamma", "elementwise", tg_digamma, 2, GC_POSITIVE, 3, 4),
    /* activations */
    GC_UN("relu", "activation", tg_relu, 2, GC_ANY, 3, 4),
    GC_SC("leaky_relu", "activation", tg_leaky_relu, 0.1, GC_ANY),
    GC_UN("tanh", "activation", tg_tanh, 2, GC_ANY, 3, 4),
    GC_UN("sigmoid", "activation", tg_sigmoid, 2, GC_ANY, 3, 4),
    GC_UN("silu", "activation", tg_silu, 2, GC_ANY, 3, 4),
    GC_UN("gelu", "activation", tg_gelu, 2, GC_ANY, 3, 4),
    GC_UN("gelu_tanh", "activation", tg_gelu_tanh, 2, GC_ANY, 3, 4),
    GC_SC("elu", "activation", tg_elu, 0.7, GC_ANY),
    GC_FN("hardtanh", "activation", f_hardtanh, "(3, 4) min -0.5 max 0.5", 1, .ndim = {2},
          .shape = {{3, 4}}),
    GC_UN("hardsigmoid", "activation", tg_hardsigmoid, 2, GC_ANY, 3, 4),
    GC_UN("hardswish", "activation", tg_hardswish, 2, GC_ANY, 3, 4),
    GC_UN("mish", "activation", tg_mish, 2, GC_ANY, 3, 4),
    GC_UN("selu", "activation", tg_selu, 2, GC_ANY, 3, 4),
    GC_SC("celu", "activation", tg_celu, 0.6, GC_ANY),
    GC_SC("hardshrink", "activation", tg_hardshrink, 0.4, GC_ANY),
    GC_SC("softshrink", "activation", tg_softshrink, 0.3, GC_ANY),
    GC_FN("threshold", "activation", f_threshold, "(3, 4) threshold 0.2 value -0.7", 1,
          .ndim = {2}, .shape = {{3, 4}}),
    GC_FN("glu", "activation", f_glu1, "(3, 4) dim 1", 1, .ndim = {2}, .shape = {{3, 4}}),
    GC_FN("glu", "activation", f_glu0, "(2, 3) dim -2", 1, .ndim = {2}, .shape = {{2, 3}}),
    GC_BIN("prelu", "activation", tg_prelu, GC_ANY, "prelu((2, 3, 2), (3))", 3, 1,
           GC_SHAPE(2, 3, 2), GC_SHAPE(3)),
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
    GC_FN("vector_norm", "reduce", f_vector_norm_dim1, "(2, 3, 2) ord 3 dims 1", 1,
          .ndim = {3}, .shape = {{2, 3, 2}}),
    GC_FN("logsumexp", "reduce", f_logsumexp_dim1, "(2, 3, 2) dims 1", 1, .ndim = {3},
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
    GC_FN("flip", "shape", f_flip, "(2, 3, 4) dims 0,-1", 1, .ndim = {3}, .shape = {{2, 3, 4}}),
    GC_FN("cumsum", "reduce", f_cumsum, "(2, 3, 4) dim -2", 1, .ndim = {3},
          .shape = {{2, 3, 4}}),
    GC_FN("roll", "shape", f_roll, "(2, 3, 4) shifts 1,-5 dims 0,-1", 1, .ndim = {3},
          .shape = {{2, 3, 4}}),
    GC_FN("expand", "shape", f_repeat, "tg_repeat (3, 4) by 2,1,3", 1, .ndim = {2},
          .shape = {{3, 4}}),
    GC_FN("slice", "shape", f_chunk, "tg_chunk (2, 6) into 3 along dim 1, multiplied", 1,
          .ndim = {2}, .shape = {{2, 6}}),
    GC_FN("gather", "shape", f_gather, "(3, 4) dim 1 index (3, 2)", 1, .ndim = {2},
          .shape = {{3, 4}}),
    GC_FN("scatter_add", "shape", f_scatter_add, "(3, 4) dim 1 index (3, 2)", 2,
          .ndim = {2, 2}, .shape = {{3, 4}, {3, 2}}),
    GC_FN("index_select", "shape", f_index_select, "(3, 4) dim -1 index 2,0,2", 1,
          .ndim = {2}, .shape = {{3, 4}}),
    GC_FN("index_add", "shape", f_index_add, "(3, 4) dim -1 index 2,0,2", 2, .ndim = {2, 2},
          .shape = {{3, 4}, {3, 3}}),
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
    GC_BIN("matmul", "linalg", tg_matmul, GC_ANY, "(4) @ (2, 4, 3)", 1, 3, GC_SHAPE(4),
           GC_SHAPE(2, 4, 3)),
    GC_BIN("matmul", "linalg", tg_matmul, GC_ANY, "(2, 1, 3, 4) @ (3, 4, 2)", 4, 3,
           GC_SHAPE(2, 1, 3, 4), GC_SHAPE(3, 4, 2)),
    GC_FN("matmul", "linalg", f_einsum, "einsum 'bij,bjk->bik' (2, 3, 4), (2, 4, 2)", 2,
          .ndim = {3, 3}, .shape = {{2, 3, 4}, {2, 4, 2}}),
    GC_FN("matmul", "linalg", f_einsum3, "einsum 'ab,bc,cd->ad' (5, 2), (2, 5), (5, 2)", 3,
          .ndim = {2, 2, 2}, .shape = {{5, 2}, {2, 5}, {5, 2}}),
    GC_FN("matmul", "linalg", f_baddbmm, "baddbmm (3, 1), (2, 3, 2) @ (2, 2, 1) beta 0.5 "
          "alpha 2", 3, .ndim = {2, 3, 3}, .shape = {{3, 1}, {2, 3, 2}, {2, 2, 1}}),
    GC_FN("tril", "linalg", f_tril, "(2, 3, 4) diagonal 1", 1, .ndim = {3},
          .shape = {{2, 3, 4}}),
    GC_FN("triu", "linalg", f_triu, "(4, 3) diagonal -1", 1, .ndim = {2}, .shape = {{4, 3}}),
    GC_FN("matmul", "linalg", f_affine_grid, "affine_grid theta (2, 2, 3) size (2, 1, 3, 4)", 1,
          .ndim = {3}, .shape = {{2, 2, 3}}),
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
    GC_FN("mul", "nn", f_kl_div_log_target, "kl_div x (3, 4), log target (3, 4) batchmean", 2,
          .ndim = {2, 2}, .shape = {{3, 4}, {3, 4}}),
    GC_FN("mul", "nn", f_bce_logits_weighted, "bce_with_logits x, t (3, 4), pos_weight (4)", 3,
          .ndim = {2, 2, 1}, .shape = {{3, 4}, {3, 4}, {4}}),
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
    /* composed of other ops: the row names the op that carries the most */
    GC_FN("sum_dims", "nn", f_cosine_similarity, "cosine_similarity x1, x2 (3, 4) dim 1", 2,
          .ndim = {2, 2}, .shape = {{3, 4}, {3, 4}}),
    GC_FN("vector_norm", "nn", f_pairwise_distance, "pairwise_distance x1, x2 (3, 4) p 3", 2,
          .ndim = {2, 2}, .shape = {{3, 4}, {3, 4}}),
    GC_FN("clamp", "nn", f_margin_ranking_loss, "margin_ranking x1, x2 (3) margin 0.25 mean", 2,
          .ndim = {1, 1}, .shape = {{3}, {3}}),
    GC_FN("clamp", "nn", f_hinge_embedding_loss, "hinge_embedding x (3, 4) margin 0.5 sum", 1,
          .ndim = {2}, .shape = {{3, 4}}),
    GC_FN("log1p", "nn", f_soft_margin_loss, "soft_margin x (3, 4), fixed target, mean", 1,
          .ndim = {2}, .shape = {{3, 4}}),
    GC_FN("clamp", "nn", f_cosine_embedding_loss, "cosine_embedding x1, x2 (3, 4) margin -0.5",
          2, .ndim = {2, 2}, .shape = {{3, 4}, {3, 4}}),
    GC_FN("vector_norm", "nn", f_triplet_margin_loss, "triplet_margin a, p, n (3, 4) swap", 3,
          .ndim = {2, 2, 2}, .shape = {{3, 4}, {3, 4}, {3, 4}}),
    GC_FN("log", "nn", f_gaussian_nll_loss, "gaussian_nll x, target, var (3, 4) full", 3,
          .ndim = {2, 2, 2}, .shape = {{3, 4}, {3, 4}, {3, 4}}, .domain = GC_POSITIVE),
    GC_FN("exp", "nn", f_poisson_nll_loss, "poisson_nll x (3, 4) log_input full sum", 1,
          .ndim = {2}, .shape = {{3, 4}}),
    GC_FN("relu", "nn", f_multi_margin_loss, "multi_margin x (3, 4), fixed weight, p 2", 1,
          .ndim = {2}, .shape = {{3, 4}}),
    GC_FN("relu", "nn", f_multilabel_margin_loss, "multilabel_margin x (3, 4) mean", 1,
          .ndim = {2}, .shape = {{3, 4}}),
    GC_FN("logsigmoid", "nn", f_multilabel_soft_margin_loss,
          "multilabel_soft_margin x (3, 4), weight (4)", 2, .ndim = {2, 1},
          .shape = {{3, 4}, {4}}),
    GC_FN("vector_norm", "nn", f_weight_norm, "weight_norm v (3, 2, 4), g (3, 1, 1) dim 0", 2,
          .ndim = {3, 3}, .shape = {{3, 2, 4}, {3, 1, 1}}),
    GC_FN("softmax", "nn", f_attention, "attention q (2, 3, 4), k (2, 5, 4), v (2, 5, 3) mask",
          3, .ndim = {3, 3, 3}, .shape = {{2, 3, 4}, {2, 5, 4}, {2, 5, 3}}),
    /* the recurrent modules (2, 3), made of linear, tanh, sigmoid, mul, ... */
    GC_FN("linear", "nn", f_rnn_tanh, "RNN tanh x (3, 2, 2), h_0 (1, 2, 3)", 2,
          .ndim = {3, 3}, .shape = {{3, 2, 2}, {1, 2, 3}}),
    GC_FN("linear", "nn", f_lstm_proj_bidir, "LSTM proj 2 bidirectional x (3, 2, 2), h_0, c_0",
          3, .ndim = {3, 3, 3}, .shape = {{3, 2, 2}, {2, 2, 2}, {2, 2, 3}}),
    GC_FN("linear", "nn", f_gru, "GRU batch_first x (2, 3, 2), h_0 (1, 2, 3)", 2,
          .ndim = {3, 3}, .shape = {{2, 3, 2}, {1, 2, 3}}),
    GC_FN("linear", "nn", f_rnn_cell, "RNNCell tanh x (2, 2), h (2, 3)", 2, .ndim = {2, 2},
          .shape = {{2, 2}, {2, 3}}),
    GC_FN("linear", "nn", f_lstm_cell, "LSTMCell x (2, 2), h, c (2, 3)", 3,
          .ndim = {2, 2, 2}, .shape = {{2, 2}, {2, 3}, {2, 3}}),
    GC_FN("linear", "nn", f_gru_cell, "GRUCell x (2, 2), h (2, 3)", 2, .ndim = {2, 2},
          .shape = {{2, 2}, {2, 3}}),
    GC_FN("where", "nn", f_lstm_packed, "LSTM bidirectional x (3, 3, 2) lengths {3, 1, 2}", 3,
          .ndim = {3, 3, 3}, .shape = {{3, 3, 2}, {2, 3, 3}, {2, 3, 3}}),
    GC_FN("layer_norm", "nn", f_transformer_decoder_layer,
          "TransformerDecoderLayer tgt (3, 2, 4), memory (2, 2, 4) causal", 2,
          .ndim = {3, 3}, .shape = {{3, 2, 4}, {2, 2, 4}}),
    /* pooling and upsampling */
    GC_FN("avg_pool", "pool", f_avg_pool, "(2, 2, 5, 4) 2-d k 3 s 2 p 1 ceil_mode", 1,
          .ndim = {4}, .shape = {{2, 2, 5, 4}}),
    GC_FN("adaptive_avg_pool", "pool", f_adaptive_avg_pool, "(2, 2, 5, 4) 2-d to (3, 6)", 1,
          .ndim = {4}, .shape = {{2, 2, 5, 4}}),
    GC_FN("adaptive_max_pool", "pool", f_adaptive_max_pool, "(2, 2, 5, 4) 2-d to (3, 6)", 1,
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
    GC_FN("unfold", "pool", f_unfold, "(2, 2, 5, 4) k (2, 3) p 1 s (2, 1)", 1, .ndim = {4},
          .shape = {{2, 2, 5, 4}}),
    GC_FN("fold", "pool", f_fold, "(2, 8, 12) to (4, 5) k 2 d (2, 1) p (0, 1)", 1, .ndim = {3},
          .shape = {{2, 8, 12}}),
};
const int gc_ncases = (int)(sizeof gc_cases / sizeof gc_cases[0]);

gc_conv_kind gc_case_conv(const gc_case *c)
{
    return c->fn == f_conv ? GC_CONV : c->fn == f_conv_transpose ? GC_CONV_TRANSPOSE : GC_NOT_CONV;
}

