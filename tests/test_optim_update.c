/* tests/test_optim_update.c - how a step updates parameters: zero_grad
 * (in place or not, shared and half gradients), set_lr / get_lr, f16 and
 * bf16 parameters updated through f32 and rounded once, in-place and copied
 * updates giving the same bits, a state that follows parameters converted
 * after a step, and a small regression that Adam fits. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/autograd.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"
#include "tapegrad/optim.h"
#include "tapegrad/safetensors.h"
#include "nn/optim_internal.h"

/* ---- zero_grad ------------------------------------------------------------- */

static void expect_all(const tg_tensor *t, double v, const char *what)
{
    for (int64_t i = 0; i < tg_tensor_numel(t); i++)
        cr_assert(eq(dbl, th_at(t, i), v), "%s[%lld] = %g, want %g", what, (long long)i,
                  th_at(t, i), v);
}

/* The gradients of sum(2 p0 + 3 p1 + p2): 2, 3 and 1. */
static void linear_backward(tg_tensor **p)
{
    tg_tensor *a = NULL, *b = NULL, *s1 = NULL, *s2 = NULL, *l = NULL;
    cr_assert(eq(int, tg_mul_scalar(&a, p[0], 2.0), TG_OK));
    cr_assert(eq(int, tg_mul_scalar(&b, p[1], 3.0), TG_OK));
    cr_assert(eq(int, tg_add(&s1, a, b), TG_OK));
    cr_assert(eq(int, tg_add(&s2, s1, p[2]), TG_OK));
    cr_assert(eq(int, tg_sum(&l, s2), TG_OK));
    cr_assert(eq(int, tg_backward(l, NULL, NULL), TG_OK), "%s", tg_error_message());
    tg_tensor *all[] = {a, b, s1, s2, l};
    th_release_all(5, all);
}

/* The gradient of sum(5 q * q), 10 q: with create_graph a recorded result. */
static void square_backward(tg_tensor *q, bool create_graph)
{
    tg_tensor *c = NULL, *d = NULL, *l = NULL;
    cr_assert(eq(int, tg_mul(&c, q, q), TG_OK));
    cr_assert(eq(int, tg_mul_scalar(&d, c, 5.0), TG_OK));
    cr_assert(eq(int, tg_sum(&l, d), TG_OK));
    tg_backward_opts bo = TG_BACKWARD_OPTS_INIT;
    bo.create_graph = create_graph;
    cr_assert(eq(int, tg_backward(l, NULL, &bo), TG_OK), "%s", tg_error_message());
    tg_tensor *all[] = {c, d, l};
    th_release_all(3, all);
}

/* zero_grad(set_to_none=False): the .grad each parameter owns is zeroed in
 * place (the same tensor, a higher version), and the next backward adds
 * into it again; a .grad the caller retained and one that a view shares
 * are left as they were, and their parameters get new zero tensors, as
 * does one recorded by a create_graph backward (which only its parameter
 * holds); a parameter without a gradient keeps none. */
Test(optim_update, zero_grad_in_place_zeroes_own_grads_and_replaces_shared_ones)
{
    tg_tensor *p[5];
    for (int j = 0; j < 5; j++) {
        cr_assert(eq(int, tg_tensor_full(&p[j], TG_F32, 1, (int64_t[]){4}, 1.0), TG_OK));
        tg_tensor_set_requires_grad(p[j], true);
    }
    tg_optimizer *o = NULL;
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    cr_assert(eq(int, tg_sgd_new(&o, 5, p, &so), TG_OK));
    linear_backward(p);
    square_backward(p[3], true);
    tg_tensor *own = tg_tensor_grad(p[0]), *recorded = tg_tensor_grad(p[3]);
    tg_tensor *held = tg_tensor_retain(tg_tensor_grad(p[1])), *view = NULL;
    cr_assert(eq(int, tg_slice(&view, tg_tensor_grad(p[2]), 0, 1, 3, 1), TG_OK));
    cr_assert(tg_tensor_is_leaf(recorded) == false && tg_tensor_requires_grad(recorded));
    uint64_t v_own = tg_tensor_version(own);

    cr_assert(eq(int, tg_optimizer_zero_grad_ex(o, false), TG_OK), "%s", tg_error_message());
    cr_assert(tg_tensor_grad(p[0]) == own, "p0's own .grad is zeroed in place");
    cr_assert(tg_tensor_version(own) > v_own);
    expect_all(own, 0.0, "p0.grad");
    cr_assert(tg_tensor_grad(p[1]) != held);
    expect_all(tg_tensor_grad(p[1]), 0.0, "p1.grad");
    expect_all(held, 3.0, "the caller's p1.grad");
    expect_all(tg_tensor_grad(p[2]), 0.0, "p2.grad");
    expect_all(view, 1.0, "the view of p2's old .grad");
    tg_tensor *g3 = tg_tensor_grad(p[3]);
    cr_assert(g3 != recorded);   /* made before the recorded one was released */
    cr_assert(tg_tensor_is_leaf(g3) && tg_tensor_requires_grad(g3) == false);
    expect_all(g3, 0.0, "p3.grad");
    cr_assert(tg_tensor_grad(p[4]) == NULL, "a parameter without a gradient keeps none");

    /* the next backward adds into the zeroed tensors, which held pointers see */
    linear_backward(p);
    square_backward(p[3], false);
    cr_assert(tg_tensor_grad(p[0]) == own);
    expect_all(own, 2.0, "p0.grad after the next backward");
    cr_assert(tg_tensor_grad(p[3]) == g3);
    expect_all(g3, 10.0, "p3.grad after the next backward");

    cr_assert(eq(int, tg_optimizer_zero_grad_ex(o, true), TG_OK));
    for (int j = 0; j < 5; j++) cr_assert(tg_tensor_grad(p[j]) == NULL);
    cr_assert(eq(int, tg_optimizer_zero_grad_ex(NULL, false), TG_EINVAL));
    tg_optimizer_free(o);
    tg_tensor_release(held);
    tg_tensor_release(view);
    th_release_all(5, p);
}

/* A zeroed gradient is a gradient: SGD with momentum 0.9 keeps moving a
 * parameter by its momentum (p -= lr * 0.9 g), where set_to_none makes the
 * step skip it.  Half gradients become +0 bits. */
Test(optim_update, zero_grad_in_place_steps_by_momentum_and_zeroes_half_grads)
{
    for (int none = 0; none < 2; none++) {
        tg_tensor *p = NULL, *g = NULL;
        tg_tensor_full(&p, TG_F64, 1, (int64_t[]){3}, 1.0);
        tg_tensor_set_requires_grad(p, true);
        tg_tensor_full(&g, TG_F64, 1, (int64_t[]){3}, 0.5);
        tg_tensor_set_grad(p, g);
        tg_optimizer *o = NULL;
        tg_sgd_opts so = TG_SGD_OPTS_INIT;
        so.lr = 0.1, so.momentum = 0.9;
        cr_assert(eq(int, tg_sgd_new(&o, 1, &p, &so), TG_OK));
        cr_assert(eq(int, tg_optimizer_step(o), TG_OK));
        cr_assert(eq(int, tg_optimizer_zero_grad_ex(o, none), TG_OK));
        cr_assert(eq(int, tg_optimizer_step(o), TG_OK));
        const double want = none ? 1.0 - 0.1 * 0.5 : 1.0 - 0.1 * 0.5 - 0.1 * (0.9 * 0.5);
        expect_all(p, want, none ? "p (set_to_none)" : "p (zeroed)");
        tg_optimizer_free(o);
        tg_tensor_release(p);
    }
    const tg_dtype halves[2] = {TG_F16, TG_BF16};
    for (int h = 0; h < 2; h++) {
        tg_tensor *p = NULL, *g = NULL;
        tg_tensor_full(&p, halves[h], 1, (int64_t[]){5}, 1.0);
        tg_tensor_set_requires_grad(p, true);
        tg_tensor_full(&g, halves[h], 1, (int64_t[]){5}, -0.75);
        tg_tensor_set_grad(p, g);
        tg_optimizer *o = NULL;
        tg_sgd_opts so = TG_SGD_OPTS_INIT;
        cr_assert(eq(int, tg_sgd_new(&o, 1, &p, &so), TG_OK));
        cr_assert(eq(int, tg_optimizer_zero_grad_ex(o, false), TG_OK));
        cr_assert(tg_tensor_grad(p) == g);
        const uint16_t *bits = tg_tensor_cdata(g);
        for (int i = 0; i < 5; i++) cr_assert(eq(u16, bits[i], 0), "%s", tg_dtype_name(halves[h]));
        tg_optimizer_free(o);
        tg_tensor_release(p);
    }
}

Test(optim_update, set_lr_and_get_lr)
{
    tg_tensor *p = NULL;
    tg_tensor_zeros(&p, TG_F32, 1, (int64_t[]){2});
    tg_optimizer *o = NULL;
    tg_adam_opts a = TG_ADAMW_OPTS_INIT;
    cr_assert(eq(int, tg_adamw_new(&o, 1, &p, &a), TG_OK));
    cr_assert(eq(dbl, tg_optimizer_get_lr(o), 1e-3));
    cr_assert(eq(int, tg_optimizer_set_lr(o, 0.25), TG_OK));
    cr_assert(eq(dbl, tg_optimizer_get_lr(o), 0.25));
    cr_assert(eq(int, tg_optimizer_set_lr(o, -1.0), TG_EINVAL));
    cr_assert(eq(int, tg_optimizer_set_lr(o, NAN), TG_EINVAL));
    cr_assert(eq(dbl, tg_optimizer_get_lr(o), 0.25));
    tg_optimizer_free(o);
    tg_optimizer_free(NULL);
    tg_tensor_release(p);
}

/* An f16 parameter is updated in f32 and rounded once: p - lr * g computed
 * in float, then converted to f16. */
Test(optim_update, f16_params_update_through_f32)
{
    float pv[3] = {1.0f, -0.5f, 0.333f}, gv[3] = {0.1f, 0.7f, -3.0f};
    tg_tensor *p32 = NULL, *p = NULL, *g32 = NULL, *g = NULL;
    tg_tensor_from_data(&p32, TG_F32, 1, (int64_t[]){3}, pv);
    tg_tensor_from_data(&g32, TG_F32, 1, (int64_t[]){3}, gv);
    tg_tensor_to_dtype(&p, p32, TG_F16);
    tg_tensor_to_dtype(&g, g32, TG_F16);
    tg_tensor_set_requires_grad(p, true);
    tg_tensor_set_grad(p, g);
    tg_optimizer *o = NULL;
    tg_sgd_opts s = TG_SGD_OPTS_INIT;
    s.lr = 0.01;
    cr_assert(eq(int, tg_sgd_new(&o, 1, &p, &s), TG_OK));
    cr_assert(eq(int, tg_optimizer_step(o), TG_OK));
    const uint16_t *h = tg_tensor_cdata(p);
    for (int i = 0; i < 3; i++) {
        float pi = tg_f16_to_f32(tg_f32_to_f16(pv[i])), gi = tg_f16_to_f32(tg_f32_to_f16(gv[i]));
        float want = pi + (float)-0.01 * gi;
        cr_assert(eq(u16, h[i], tg_f32_to_f16(want)), "element %d", i);
    }
    tg_optimizer_free(o);
    tg_tensor_release(p);
    tg_tensor_release(p32);
    tg_tensor_release(g32);
}

/* f16 and bf16 parameters with amsgrad (RMSprop: centered and momentum),
 * maximize and weight decay: each step's result is the f32 step's rounded
 * once.  An f32 twin takes the same
 * gradients (the half values) and, after each step, the half parameter's
 * rounded values, so that both see the same p in weight decay; their f32
 * state then evolves alike, and the half parameter must equal the twin's
 * result rounded to its dtype, bit for bit, at every step. */
Test(optim_update, half_params_with_amsgrad_and_maximize_round_the_f32_step_once)
{
    const tg_dtype halves[2] = {TG_BF16, TG_F16};
    const int64_t n = 40;
    for (int h = 0; h < 2; h++)
        for (int kind = 0; kind < 4; kind++) {
            tg_tensor *p16 = NULL, *p32 = NULL;
            tg_tensor *r = th_rand_uniform(TG_F32, 1, &n, 5 + (uint64_t)kind);
            cr_assert(eq(int, tg_tensor_to_dtype(&p16, r, halves[h]), TG_OK));
            cr_assert(eq(int, tg_tensor_to_dtype(&p32, p16, TG_F32), TG_OK));
            tg_tensor_release(r);
            tg_tensor_set_requires_grad(p16, true);
            tg_tensor_set_requires_grad(p32, true);
            tg_optimizer *o16 = NULL, *o32 = NULL;
            tg_adam_opts a = TG_ADAMW_OPTS_INIT;
            a.lr = 0.05, a.beta2 = 0.6, a.weight_decay = 0.1, a.amsgrad = true, a.maximize = true;
            tg_sgd_opts sg = TG_SGD_OPTS_INIT;
            sg.momentum = 0.9, sg.nesterov = true, sg.weight_decay = 0.1, sg.maximize = true;
            tg_rmsprop_opts ro = TG_RMSPROP_OPTS_INIT;
            ro.alpha = 0.8, ro.momentum = 0.5, ro.centered = true, ro.weight_decay = 0.1,
            ro.maximize = true;
            if (kind == 0) {
                cr_assert(eq(int, tg_adam_new(&o16, 1, &p16, &a), TG_OK));
                cr_assert(eq(int, tg_adam_new(&o32, 1, &p32, &a), TG_OK));
            } else if (kind == 1) {
                cr_assert(eq(int, tg_adamw_new(&o16, 1, &p16, &a), TG_OK));
                cr_assert(eq(int, tg_adamw_new(&o32, 1, &p32, &a), TG_OK));
            } else if (kind == 2) {
                cr_assert(eq(int, tg_sgd_new(&o16, 1, &p16, &sg), TG_OK));
                cr_assert(eq(int, tg_sgd_new(&o32, 1, &p32, &sg), TG_OK));
            } else {
                cr_assert(eq(int, tg_rmsprop_new(&o16, 1, &p16, &ro), TG_OK));
                cr_assert(eq(int, tg_rmsprop_new(&o32, 1, &p32, &ro), TG_OK));
            }
            for (int step = 0; step < 4; step++) {
                /* gradients shrinking over the steps, so that v falls */
                tg_tensor *g = th_rand_uniform(TG_F32, 1, &n, 50 + (uint64_t)step), *gs = NULL,
                          *g16 = NULL, *g32 = NULL, *want = NULL;
                cr_assert(eq(int, tg_mul_scalar(&gs, g, pow(0.3, step)), TG_OK));
                cr_assert(eq(int, tg_tensor_to_dtype(&g16, gs, halves[h]), TG_OK));
                cr_assert(eq(int, tg_tensor_to_dtype(&g32, g16, TG_F32), TG_OK));
                tg_tensor_set_grad(p16, g16);
                tg_tensor_set_grad(p32, g32);
                cr_assert(eq(int, tg_optimizer_step(o16), TG_OK), "%s", tg_error_message());
                cr_assert(eq(int, tg_optimizer_step(o32), TG_OK), "%s", tg_error_message());
                cr_assert(eq(int, tg_tensor_to_dtype(&want, p32, halves[h]), TG_OK));
                const char *names[] = {"adam", "adamw", "sgd", "rmsprop"};
                th_expect_same_bits(names[kind], p32, p16, want);
                tg_tensor_release(want);
                /* the twin continues from the half parameter's values */
                float *d = tg_tensor_data(p32);
                for (int64_t i = 0; i < n; i++) d[i] = (float)th_at(p16, i);
                tg_tensor_release(g);
                tg_tensor_release(gs);
            }
            tg_optimizer_free(o16);
            tg_optimizer_free(o32);
            tg_tensor_release(p16);
            tg_tensor_release(p32);
        }
}

/* A contiguous f32 parameter is updated in place (in parallel above 32k
 * elements) from its contiguous gradient; a strided one, with a strided
 * gradient, through contiguous copies: the same bits, over three AdamW and
 * three SGD-with-momentum steps. */
Test(optim_update, in_place_and_copied_updates_give_the_same_bits)
{
    const int64_t n = 300, sh[2] = {n, n};   /* 90000 elements */
    for (int kind = 0; kind < 2; kind++) {
        tg_tensor *a = th_rand_uniform(TG_F32, 2, sh, 11), *base = NULL, *b = NULL;
        /* b: a's values as the transposed view of a (n, n) tensor, so b is strided */
        cr_assert(eq(int, tg_transpose(&base, a, 0, 1), TG_OK));
        tg_tensor *bc = NULL;
        cr_assert(eq(int, tg_tensor_contiguous(&bc, base), TG_OK));
        cr_assert(eq(int, tg_transpose(&b, bc, 0, 1), TG_OK));   /* values of a, strides (1, n) */
        tg_tensor *leaf_b = NULL;
        cr_assert(eq(int, tg_tensor_detach(&leaf_b, b), TG_OK));
        cr_assert(tg_tensor_is_contiguous(leaf_b) == false);
        tg_tensor_set_requires_grad(a, true);
        tg_tensor_set_requires_grad(leaf_b, true);
        tg_optimizer *oa = NULL, *ob = NULL;
        if (kind == 0) {
            tg_adam_opts o = TG_ADAMW_OPTS_INIT;
            cr_assert(eq(int, tg_adamw_new(&oa, 1, &a, &o), TG_OK));
            cr_assert(eq(int, tg_adamw_new(&ob, 1, &leaf_b, &o), TG_OK));
        } else {
            tg_sgd_opts o = TG_SGD_OPTS_INIT;
            o.lr = 0.1;
            o.momentum = 0.9;
            cr_assert(eq(int, tg_sgd_new(&oa, 1, &a, &o), TG_OK));
            cr_assert(eq(int, tg_sgd_new(&ob, 1, &leaf_b, &o), TG_OK));
        }
        for (int step = 0; step < 3; step++) {
            /* g2: g's values, strided as b is, so b's gradient is gathered too */
            tg_tensor *g = th_rand_uniform(TG_F32, 2, sh, 100 + (uint64_t)step), *gt = NULL,
                      *gtc = NULL, *g2 = NULL;
            cr_assert(eq(int, tg_transpose(&gt, g, 0, 1), TG_OK));
            cr_assert(eq(int, tg_tensor_contiguous(&gtc, gt), TG_OK));
            cr_assert(eq(int, tg_transpose(&g2, gtc, 0, 1), TG_OK));
            tg_tensor_release(gt), tg_tensor_release(gtc);
            tg_tensor_set_grad(a, g);
            tg_tensor_set_grad(leaf_b, g2);
            cr_assert(eq(int, tg_optimizer_step(oa), TG_OK));
            cr_assert(eq(int, tg_optimizer_step(ob), TG_OK));
        }
        for (int64_t i = 0; i < n * n; i++) {
            double x, y;
            tg_tensor_get_flat(a, i, &x);
            tg_tensor_get_flat(leaf_b, i, &y);
            cr_assert(eq(dbl, x, y), "kind %d element %lld: %.9g vs %.9g", kind, (long long)i, x, y);
        }
        tg_optimizer_free(oa), tg_optimizer_free(ob);
        tg_tensor_release(a), tg_tensor_release(base), tg_tensor_release(bc), tg_tensor_release(b);
        tg_tensor_release(leaf_b);
    }
}

/* ---- a small regression ------------------------------------------------------ */

/* y = x w* + b* with x (64, 3): a linear model trained by Adam for 200 steps
 * on the mse loss ends with a loss at least 10x smaller than it started. */
Test(optim_update, adam_fits_a_linear_regression)
{
    tg_rng rng;
    tg_rng_init(&rng, 7);
    tg_tensor *x = NULL, *y = NULL, *w = NULL, *b = NULL, *w_true = NULL;
    tg_tensor_zeros(&x, TG_F32, 2, (int64_t[]){64, 3});
    tg_tensor_rand_normal(x, &rng, 0, 1);
    float wt[3] = {2.0f, -3.0f, 0.5f};
    tg_tensor_from_data(&w_true, TG_F32, 2, (int64_t[]){1, 3}, wt);
    tg_linear(&y, x, w_true, NULL);
    tg_tensor *yb = NULL;
    tg_add_scalar(&yb, y, 1.5);
    tg_tensor_zeros(&w, TG_F32, 2, (int64_t[]){1, 3});
    tg_tensor_zeros(&b, TG_F32, 1, (int64_t[]){1});
    tg_tensor_set_requires_grad(w, true);
    tg_tensor_set_requires_grad(b, true);
    tg_optimizer *o = NULL;
    tg_adam_opts a = TG_ADAM_OPTS_INIT;
    a.lr = 0.05;
    cr_assert(eq(int, tg_adam_new(&o, 2, (tg_tensor *[]){w, b}, &a), TG_OK));
    double first = NAN, last = NAN;
    for (int it = 0; it < 200; it++) {
        tg_tensor *pred = NULL, *loss = NULL;
        tg_optimizer_zero_grad(o);
        cr_assert(eq(int, tg_linear(&pred, x, w, b), TG_OK));
        cr_assert(eq(int, tg_mse_loss(&loss, pred, yb, TG_REDUCTION_MEAN), TG_OK));
        cr_assert(eq(int, tg_backward(loss, NULL, NULL), TG_OK));
        cr_assert(eq(int, tg_optimizer_step(o), TG_OK));
        tg_tensor_get_flat(loss, 0, it == 0 ? &first : &last);
        tg_tensor_release(pred);
        tg_tensor_release(loss);
    }
    cr_assert(last * 10 < first, "loss %g -> %g", first, last);
    /* noiseless data: the fit is the true line */
    for (int i = 0; i < 3; i++)
        cr_assert(epsilon_eq(dbl, th_at(w, i), wt[i], 0.01), "w[%d] = %g, true %g", i,
                  th_at(w, i), (double)wt[i]);
    cr_assert(epsilon_eq(dbl, th_at(b, 0), 1.5, 0.01), "b = %g, true 1.5", th_at(b, 0));
    tg_optimizer_free(o);
    tg_tensor_release(x);
    tg_tensor_release(y);
    tg_tensor_release(yb);
    tg_tensor_release(w);
    tg_tensor_release(b);
    tg_tensor_release(w_true);
}

/* A module converted by tg_module_to_dtype after the optimizer made its
 * state (tg_module_to_dtype's comment invites it): the state follows the
 * parameters' new dtype.  With a constant gradient g, every Adam step moves
 * a parameter by lr * g / (|g| + eps) (the bias corrections cancel), and SGD
 * with momentum 0.5 by lr * g, then lr * 1.5 g. */
Test(optim_update, state_follows_parameters_converted_after_a_step)
{
    const tg_dtype dts[2][2] = {{TG_F32, TG_F64}, {TG_F64, TG_F32}};
    for (int d = 0; d < 2; d++)
        for (int kind = 0; kind < 2; kind++) {
            tg_rng rng;
            tg_rng_init(&rng, 3);
            tg_module *m = NULL;
            cr_assert(eq(int, tg_nn_linear_new(&m, 300, 4, true, &rng), TG_OK));
            if (dts[d][0] != TG_F32) cr_assert(eq(int, tg_module_to_dtype(m, dts[d][0]), TG_OK));
            tg_tensor *w = tg_module_find(m, "weight"), *w0 = NULL;
            cr_assert(eq(int, tg_tensor_to_dtype(&w0, w, TG_F64), TG_OK));
            tg_optimizer *o = NULL;
            tg_adam_opts ao = TG_ADAM_OPTS_INIT;
            ao.lr = 0.01;
            tg_sgd_opts so = TG_SGD_OPTS_INIT;
            so.momentum = 0.5;
            if (kind == 0) cr_assert(eq(int, tg_adam_from_module(&o, m, &ao), TG_OK));
            else cr_assert(eq(int, tg_sgd_from_module(&o, m, &so), TG_OK));
            for (int step = 0; step < 2; step++) {
                if (step == 1) cr_assert(eq(int, tg_module_to_dtype(m, dts[d][1]), TG_OK));
                tg_tensor *g = NULL;
                cr_assert(eq(int, tg_tensor_full(&g, tg_tensor_dtype(w), 2, tg_tensor_shape(w),
                                                 0.5), TG_OK));
                cr_assert(eq(int, tg_tensor_set_grad(w, g), TG_OK));
                cr_assert(eq(int, tg_optimizer_step(o), TG_OK), "%s", tg_error_message());
            }
            const double moved = kind == 0 ? 2 * 0.01 * 0.5 / (0.5 + 1e-8) : 0.01 * 2.5 * 0.5;
            for (int64_t i = 0; i < tg_tensor_numel(w); i += 97) {
                const double want = th_round_to(dts[d][1], th_at(w0, i) - moved);
                cr_assert(th_close(th_at(w, i), want, 1e-6, 1e-8), "%s -> %s, %s: w[%lld] %.9g, "
                          "want %.9g", tg_dtype_name(dts[d][0]), tg_dtype_name(dts[d][1]),
                          kind ? "sgd" : "adam", (long long)i, th_at(w, i), want);
            }
            tg_optimizer_free(o);
            tg_tensor_release(w0);
            tg_module_release(m);
        }
}

/* Adam and AdamW on f32 parameters run eight elements at a time where the
 * CPU has AVX2: the bits of the portable loop (tg__optim_set_simd(false)),
 * parameters and both moments, over three steps, with no weight decay,
 * Adam's and AdamW's, and a length that leaves a tail of 5. */
Test(optim_update, adam_vector_loop_gives_the_portable_bits)
{
    if (!tg__cpu_has_half_simd())
        printf("optim_update: this CPU lacks AVX2, so both runs take the portable loop\n");
    const int64_t n = 1029;
    for (int mode = 0; mode < 3; mode++) {
        tg_tensor *p[2], *state[2][2];
        for (int r = 0; r < 2; r++) {
            tg__optim_set_simd(r == 1);
            p[r] = th_rand_uniform(TG_F32, 1, &n, 61);
            tg_tensor_set_requires_grad(p[r], true);
            tg_optimizer *o = NULL;
            tg_adam_opts ao = TG_ADAM_OPTS_INIT, aw = TG_ADAMW_OPTS_INIT;
            if (mode == 2) ao = aw;
            ao.lr = 0.01;
            if (mode == 1) ao.weight_decay = 0.05;
            cr_assert(eq(int, (mode == 2 ? tg_adamw_new : tg_adam_new)(&o, 1, &p[r], &ao), TG_OK));
            for (int step = 0; step < 3; step++) {
                tg_tensor *g = th_rand_uniform(TG_F32, 1, &n, 70 + (uint64_t)step);
                tg_tensor_set_grad(p[r], g);   /* takes g's reference */
                cr_assert(eq(int, tg_optimizer_step(o), TG_OK), "%s", tg_error_message());
            }
            for (int k = 0; k < 2; k++)   /* exp_avg, exp_avg_sq */
                state[r][k] = tg_tensor_retain(o->state[0].buf[k]);
            tg_optimizer_free(o);
        }
        tg__optim_set_simd(true);
        cr_assert(th_same_bits(p[0], p[1]), "mode %d: parameters differ", mode);
        for (int k = 0; k < 2; k++)
            cr_assert(th_same_bits(state[0][k], state[1][k]), "mode %d: moment %d differs", mode,
                      k + 1);
        th_release_all(6, (tg_tensor *[]){p[0], p[1], state[0][0], state[0][1], state[1][0],
                                          state[1][1]});
    }
}
