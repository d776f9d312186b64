/* tests/test_higher_order.c - ConvTranspose (and Conv) differentiable to any
 * order, checked to the fourth derivative.
 *
 * Level 0 is the op itself, y = act(convT(x, w) + b).  Level d > 0 is the
 * scalar
 *     s_d(x, w, b) = sum_i <d s_{d-1} / d in_i, U_{d,i}>
 * over the inputs in = (x, w, b), with fixed random tensors U_{d,i} and the
 * gradients taken by tg_grad with create_graph (for d = 1 the gradient is
 * that of <y, V> with a fixed random V).  The gradient of s_d is then a
 * combination of derivatives of order d + 1 of the op, and
 * tg_gradgradcheck(s_d) compares derivatives of order d + 2 with central
 * differences of order d + 1 ones.  So gradgradcheck at levels 1 and 2 checks
 * the third and fourth derivatives: the backward of the backward of the
 * backward, which runs through conv, conv_transpose and conv_weight_grad each
 * differentiated in turn.  The activation is one whose derivatives of every
 * order are nonzero (tanh, sigmoid, silu, gelu, gelu_tanh), so none of them vanishes. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/autograd.h"
#include "tapegrad/conv.h"
#include "tapegrad/ops.h"

enum { N_IN = 3, MAX_LEVEL = 2 };

typedef struct {
    bool transpose;
    tg_conv_params p;
    int level;
    tg_tensor *v;                       /* level 1's grad_output, y's shape */
    tg_tensor *u[MAX_LEVEL + 1][N_IN];  /* U_{d,i}, in_i's shape */
} ho_user;

static int level_fn(tg_tensor **out, int depth, tg_tensor *const *in, const ho_user *h);

/* s_d = sum_i <g_i, U_{d,i}>, g the gradients of level d - 1. */
static int next_level(tg_tensor **out, int depth, tg_tensor *const *in, const ho_user *h)
{
    tg_tensor *prev = NULL, *g[N_IN] = {NULL}, *s = NULL;
    int rc = level_fn(&prev, depth - 1, in, h);
    if (rc < 0) return rc;
    tg_backward_opts o = {.create_graph = true};
    tg_tensor *const *go = depth == 1 ? &h->v : NULL;
    rc = tg_grad(g, 1, &prev, go, N_IN, in, &o);
    if (rc == 0) rc = tg_tensor_scalar(&s, TG_F64, 0.0);
    for (int i = 0; i < N_IN && rc == 0; i++) {
        if (!g[i]) continue;   /* not reachable: contributes nothing */
        tg_tensor *gu = NULL, *term = NULL, *acc = NULL;
        rc = tg_mul(&gu, g[i], h->u[depth][i]);
        if (rc == 0) rc = tg_sum(&term, gu);
        if (rc == 0) rc = tg_add(&acc, s, term);
        if (rc == 0) {   /* s += term, recorded */
            tg_tensor_release(s);
            s = acc;
        }
        tg_tensor_release(gu);
        tg_tensor_release(term);
    }
    for (int i = 0; i < N_IN; i++) tg_tensor_release(g[i]);
    tg_tensor_release(prev);
    if (rc < 0) {
        tg_tensor_release(s);
        return rc;
    }
    *out = s;
    return 0;
}

static int level_fn(tg_tensor **out, int depth, tg_tensor *const *in, const ho_user *h)
{
    if (depth > 0) return next_level(out, depth, in, h);
    return h->transpose ? tg_conv_transpose(out, in[0], in[1], in[2], &h->p)
                        : tg_conv(out, in[0], in[1], in[2], &h->p);
}

static int gc_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const ho_user *h = user;
    return level_fn(out, h->level, in, h);
}

typedef struct {
    int nsp, cin, cout;
    int64_t batch, S[3], K[3];
    tg_conv_params p;
} ho_case;

/* Small cases that still reach stride, dilation, groups, asymmetric padding
 * and output_padding, in 1-D, 2-D and 3-D. */
static ho_case make_case(int i, tg_activation act)
{
    ho_case c = {.batch = 1};
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    if (i == 0) {   /* 1-D, stride 2, dilation 2, groups 2, output_padding 1 */
        c.nsp = 1, c.batch = 2, c.cin = 2, c.cout = 2, c.S[0] = 4, c.K[0] = 2;
        p.stride[0] = 2, p.dilation[0] = 2, p.padding[0][0] = 1, p.output_padding[0] = 1;
        p.groups = 2;
    } else if (i == 1) {   /* 2-D, stride (1, 2), asymmetric padding */
        c.nsp = 2, c.cin = 2, c.cout = 1, c.S[0] = 2, c.S[1] = 3, c.K[0] = 2, c.K[1] = 2;
        p.stride[1] = 2, p.padding[1][1] = 1;
    } else {   /* 3-D, stride 2 on the first axis */
        c.nsp = 3, c.cin = 1, c.cout = 1;
        for (int a = 0; a < 3; a++) c.S[a] = 2, c.K[a] = 2;
        p.stride[0] = 2;
    }
    p.act = act;
    c.p = p;
    return c;
}

/* Runs gradgradcheck on level `level` of case c (conv_transpose or conv). */
static void check_level(const ho_case *c, bool transpose, int level)
{
    uint64_t seed = 100 * (uint64_t)level + 10 * (uint64_t)c->nsp + transpose;
    int64_t xs[5] = {c->batch, c->cin}, ws[5], bs[1];
    /* conv_transpose's weight is (C_in, C_out/groups, K...), conv's (C_out, C_in/groups, K...) */
    ws[0] = transpose ? c->cin : c->cout;
    ws[1] = (transpose ? c->cout : c->cin) / c->p.groups;
    bs[0] = c->cout;
    for (int a = 0; a < c->nsp; a++) xs[2 + a] = c->S[a], ws[2 + a] = c->K[a];
    tg_tensor *in[N_IN] = {th_rand_uniform(TG_F64, c->nsp + 2, xs, seed + 1),
                           th_rand_uniform(TG_F64, c->nsp + 2, ws, seed + 2),
                           th_rand_uniform(TG_F64, 1, bs, seed + 3)};
    tg_tensor_set_name(in[0], "x");
    tg_tensor_set_name(in[1], "weight");
    tg_tensor_set_name(in[2], "bias");
    ho_user h = {.transpose = transpose, .p = c->p, .level = level};
    if (!transpose) memset(h.p.output_padding, 0, sizeof h.p.output_padding);   /* convT only */
    tg_tensor *y = NULL;
    cr_assert(eq(int, level_fn(&y, 0, in, &h), TG_OK), "%s", tg_error_message());
    h.v = th_rand_uniform(TG_F64, tg_tensor_ndim(y), tg_tensor_shape(y), seed + 4);
    tg_tensor_release(y);
    for (int d = 1; d <= level; d++)
        for (int i = 0; i < N_IN; i++)
            h.u[d][i] = th_rand_uniform(TG_F64, tg_tensor_ndim(in[i]), tg_tensor_shape(in[i]),
                                        seed + 10 * (uint64_t)d + (uint64_t)i + 5);
    for (int i = 0; i < N_IN; i++) tg_tensor_set_requires_grad(in[i], true);
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    o.seed = seed;
    int rc = tg_gradgradcheck(gc_fn, &h, N_IN, in, &o);
    cr_assert(eq(int, rc, TG_OK), "%s %d-D, %s, level %d (derivatives of order %d): %s",
              transpose ? "conv_transpose" : "conv", c->nsp, tg_activation_name(c->p.act), level,
              level + 2, tg_error_message());
    th_release_all(N_IN, in);
    tg_tensor_release(h.v);
    for (int d = 1; d <= level; d++) th_release_all(N_IN, h.u[d]);
}

static const tg_activation smooth[] = {TG_ACT_TANH, TG_ACT_SIGMOID, TG_ACT_SILU, TG_ACT_GELU,
                                       TG_ACT_GELU_TANH};

/* Levels 0, 1, 2: the first four derivatives against central differences of
 * the ones below them (level 0 is the plain second-order check). */
static void check_all_levels(bool transpose)
{
    for (int i = 0; i < 3; i++) {
        ho_case c = make_case(i, smooth[(i + (transpose ? 0 : 2)) % 5]);
        for (int level = 0; level <= MAX_LEVEL; level++) check_level(&c, transpose, level);
    }
}

Test(higher_order, conv_transpose_to_the_fourth_derivative) { check_all_levels(true); }

Test(higher_order, conv_to_the_fourth_derivative) { check_all_levels(false); }
