/* tests/test_conv_grad.c - the gradients of ConvNd / ConvTransposeNd and of
 * conv's weight gradient, N = 1, 2, 3: tg_gradcheck and tg_gradgradcheck in
 * f64 on tiny cases covering stride, dilation, groups, asymmetric padding
 * and output_padding, with every fused activation, on the batched and the
 * per-sample kernels; and a recorded activation against the fused kernel. */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "conv_fixtures.h"
#include "tapegrad/tapegrad.h"
#include "ops/conv_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/conv.h"
#include "tapegrad/ops.h"

/* ---- gradients ---- */

typedef struct gc_user {
    int op;   /* 0 conv, 1 conv_transpose, 2 conv_weight_grad */
    tg_conv_params p;
    int wndim;
    int64_t wshape[5];
} gc_user;

static int gc_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    gc_user *u = user;
    switch (u->op) {
    case 0: return tg_conv(out, in[0], in[1], n > 2 ? in[2] : NULL, &u->p);
    case 1: return tg_conv_transpose(out, in[0], in[1], n > 2 ? in[2] : NULL, &u->p);
    default: return tg_conv_weight_grad(out, in[0], in[1], u->wndim, u->wshape, &u->p);
    }
}

/* Tiny configurations covering stride/dilation/groups/asymmetric padding and
 * output_padding, including stride 2 + dilation 2 and output_padding >= stride. */
static ccase grad_case(int i)
{
    ccase c = {.B = 1, .bias = true};
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    switch (i) {
    case 0:   /* 1-D, stride 2, dilation 2, groups 2 */
        c.nsp = 1; c.B = 2; c.cin = 2; c.cout = 4; c.groups = 2; c.S[0] = 6; c.K[0] = 3;
        p.stride[0] = 2; p.dilation[0] = 2; p.padding[0][0] = 1; p.output_padding[0] = 1;
        break;
    case 1:   /* 2-D, output_padding 1 with stride 1, dilation 2 */
        c.nsp = 2; c.B = 3; c.cin = 2; c.cout = 2; c.groups = 1;
        c.S[0] = 3; c.S[1] = 4; c.K[0] = 2; c.K[1] = 3;
        p.stride[1] = 2; p.dilation[0] = 2; p.padding[0][1] = 1; p.padding[1][0] = 1;
        p.output_padding[0] = 1; p.output_padding[1] = 1;
        break;
    case 2:   /* 3-D */
        c.nsp = 3; c.cin = 1; c.cout = 2; c.groups = 1;
        for (int a = 0; a < 3; a++) { c.S[a] = a ? 3 : 2; c.K[a] = 2; }
        p.stride[0] = 2; p.stride[2] = 2; p.padding[1][0] = 1; p.padding[2][1] = 1;
        p.output_padding[0] = 1; p.output_padding[2] = 1;
        break;
    default:  /* depthwise 1-D, stride 3, output_padding 2 */
        c.nsp = 1; c.cin = 3; c.cout = 3; c.groups = 3; c.S[0] = 4; c.K[0] = 2;
        p.stride[0] = 3; p.padding[0][1] = 2; p.output_padding[0] = 2;
        break;
    }
    p.groups = c.groups;
    c.p = p;
    return c;
}

static void run_gradchecks(const ccase *c, int op, bool second)
{
    bool transpose = op != 0;
    built r = build(c, transpose, TG_F64);
    cr_assert(r.ok, "%s", tg_error_message());
    gc_user u = {.op = op, .p = c->p};
    tg_tensor *in[3] = {r.x, r.w, r.b};
    int n = r.b ? 3 : 2;
    if (op == 2) {
        /* weight grad of conv_transpose: z = dy (convT output), u = x */
        int64_t zs[5] = {c->B, c->cout, r.out_sp[0], r.out_sp[1], r.out_sp[2]};
        in[0] = mk_rand(TG_F64, c->nsp + 2, zs);
        in[1] = tg_tensor_retain(r.x);
        n = 2;
        u.wndim = c->nsp + 2;
        memcpy(u.wshape, tg_tensor_shape(r.w), sizeof(int64_t) * (size_t)u.wndim);
    }
    for (int i = 0; i < n; i++) tg_tensor_set_requires_grad(in[i], true);
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    int rc = second ? tg_gradgradcheck(gc_fn, &u, n, in, &o) : tg_gradcheck(gc_fn, &u, n, in, &o);
    cr_assert(eq(int, rc, TG_OK), "op %d nsp %d act %s: %s", op, c->nsp,
              tg_activation_name(c->p.act), tg_error_message());
    if (op == 2) {
        tg_tensor_release(in[0]);
        tg_tensor_release(in[1]);
    }
    unbuild(&r);
}

Test(conv_grad, gradcheck_all_ops)
{
    for (int chunk = 0; chunk < 2; chunk++) {   /* batched, then per-sample kernels */
        tg__conv_set_chunk(chunk);
        for (int i = 0; i < 4; i++)
            for (int op = 0; op < 3; op++) {
                ccase c = grad_case(i);
                c.p.act = (tg_activation)((i + op) % TG_ACT_COUNT);
                run_gradchecks(&c, op, false);
            }
    }
    tg__conv_set_chunk(0);
}

Test(conv_grad, gradgradcheck_all_ops)
{
    for (int i = 0; i < 4; i++)
        for (int op = 0; op < 3; op++) {
            ccase c = grad_case(i);
            c.p.act = (tg_activation)((i + 2 * op + 3) % TG_ACT_COUNT);
            run_gradchecks(&c, op, true);
        }
}

Test(conv_grad, gradcheck_each_activation_with_bias)
{
    for (int a = 0; a < TG_ACT_COUNT; a++)
        for (int op = 0; op < 2; op++) {
            ccase c = grad_case(0);
            c.p.act = (tg_activation)a;
            c.p.act_slope = 0.2;
            run_gradchecks(&c, op, false);
            run_gradchecks(&c, op, true);
        }
}

/* The weight gradient of conv itself: z = x, u = dy with conv's extents. */
Test(conv_grad, weight_grad_of_conv_gradchecks)
{
    for (int i = 0; i < 4; i++) {
        ccase c = grad_case(i);
        built r = build(&c, false, TG_F64);
        int64_t us[5] = {c.B, c.cout, r.out_sp[0], r.out_sp[1], r.out_sp[2]};
        gc_user u = {.op = 2, .p = c.p, .wndim = c.nsp + 2};
        memcpy(u.wshape, tg_tensor_shape(r.w), sizeof(int64_t) * (size_t)u.wndim);
        tg_tensor *in[2] = {r.x, mk_rand(TG_F64, c.nsp + 2, us)};
        for (int k = 0; k < 2; k++) tg_tensor_set_requires_grad(in[k], true);
        tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
        cr_assert(eq(int, tg_gradcheck(gc_fn, &u, 2, in, &o), TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, tg_gradgradcheck(gc_fn, &u, 2, in, &o), TG_OK), "%s", tg_error_message());
        tg_tensor_release(in[1]);
        unbuild(&r);
    }
}

/* Recorded with an activation: same values as the fused no-grad kernel. */
Test(conv_grad, recorded_activation_matches_fused)
{
    ccase c = grad_case(1);
    c.p.act = TG_ACT_SILU;
    built r = build(&c, true, TG_F64);
    tg_tensor *fused = NULL, *rec = NULL;
    cr_assert(eq(int, tg_conv_transpose(&fused, r.x, r.w, r.b, &c.p), TG_OK));
    tg_tensor_set_requires_grad(r.w, true);
    cr_assert(eq(int, tg_conv_transpose(&rec, r.x, r.w, r.b, &c.p), TG_OK));
    cr_assert(tg_tensor_requires_grad(rec));
    double *a = th_doubles(fused), *b = th_doubles(rec);
    for (int64_t i = 0; i < tg_tensor_numel(rec); i++) cr_assert(epsilon_eq(dbl, a[i], b[i], 1e-14));
    free(a); free(b);
    tg_tensor_release(fused); tg_tensor_release(rec);
    unbuild(&r);
}
