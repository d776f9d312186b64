/* tests/test_amp_scaler.c - the gradient scaler (PyTorch's GradScaler
 * rules): scaling, unscaling, skipped and retried steps, the scale's growth
 * and backoff, options and its state in a file.  Training under autocast
 * with it is in test_amp_train.c. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/amp.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"
#include "tapegrad/optim.h"
#include "tapegrad/registry.h"
#include "tapegrad/safetensors.h"
#include "tapegrad/tensor.h"

/* w.grad = scale * 2 * w through loss = sum(w * w) scaled by gs. */
static void scaled_backward(tg_grad_scaler *gs, tg_tensor *w)
{
    tg_tensor *sq = NULL, *l = NULL, *sl = NULL;
    tg_tensor_zero_grad(w);
    cr_assert(eq(int, tg_mul(&sq, w, w), TG_OK));
    cr_assert(eq(int, tg_sum(&l, sq), TG_OK));
    cr_assert(eq(int, tg_grad_scaler_scale(gs, &sl, l), TG_OK));
    cr_assert(eq(dbl, th_at(sl, 0), th_at(l, 0) * tg_grad_scaler_get_scale(gs)));
    cr_assert(eq(int, tg_backward(sl, NULL, NULL), TG_OK));
    tg_tensor_release(sq);
    tg_tensor_release(l);
    tg_tensor_release(sl);
}

/* The optimizer step of these tests: w -= 0.125 * grad, counting calls. */
typedef struct sgd {
    tg_tensor *w;
    int calls;
} sgd;

static int sgd_step(void *user)
{
    sgd *o = user;
    tg_tensor *g = tg_tensor_grad(o->w);
    for (int64_t i = 0; i < tg_tensor_numel(o->w); i++)
        tg_tensor_set_flat(o->w, i, th_at(o->w, i) - 0.125 * th_at(g, i));
    o->calls++;
    return TG_OK;
}

Test(amp_scaler, scaler_scales_loss_and_unscales_grads_exactly)
{
    tg_grad_scaler *gs = NULL;
    cr_assert(eq(int, tg_grad_scaler_new(&gs, NULL), TG_OK));
    cr_assert(eq(dbl, tg_grad_scaler_get_scale(gs), 65536.0));
    tg_tensor *w = th_tensor_from(TG_F32, 1, (int64_t[]){3}, (double[]){0.5, -1.25, 3.0});
    tg_tensor_set_requires_grad(w, true);
    scaled_backward(gs, w);
    for (int i = 0; i < 3; i++)
        cr_assert(eq(dbl, th_at(tg_tensor_grad(w), i), 65536.0 * 2 * th_at(w, i)));
    cr_assert(eq(int, tg_grad_scaler_unscale(gs, 1, &w), TG_OK));
    for (int i = 0; i < 3; i++) cr_assert(eq(dbl, th_at(tg_tensor_grad(w), i), 2 * th_at(w, i)));
    cr_assert(tg_grad_scaler_should_step(gs));
    /* A second unscale in the same step is refused and divides nothing. */
    cr_assert(eq(int, tg_grad_scaler_unscale(gs, 1, &w), TG_EINVAL));
    cr_assert(eq(dbl, th_at(tg_tensor_grad(w), 0), 1.0));
    cr_assert(eq(int, tg_grad_scaler_update(gs), TG_OK));
    cr_assert(eq(int, tg_grad_scaler_growth_tracker(gs), 1));
    /* update without an unscale in between is refused. */
    cr_assert(eq(int, tg_grad_scaler_update(gs), TG_EINVAL));
    cr_assert(eq(int, tg_grad_scaler_growth_tracker(gs), 1));
    tg_tensor_release(w);
    tg_grad_scaler_free(gs);
}

static int quiet_failing_step(void *user)
{
    (void)user;
    return TG_EIO;
}

/* A step callback that fails without a message: the scaler's message names
 * it; the stage stays, so the step can be retried. */
Test(amp_scaler, failing_step_callback_gets_a_message_and_can_be_retried)
{
    tg_grad_scaler_opts o = TG_GRAD_SCALER_OPTS_INIT;
    tg_grad_scaler *gs = NULL;
    cr_assert(eq(int, tg_grad_scaler_new(&gs, &o), TG_OK));
    tg_tensor *w = th_tensor_from(TG_F32, 1, (int64_t[]){2}, (double[]){1.0, -0.5}), *bad = NULL;
    tg_tensor_set_requires_grad(w, true);
    scaled_backward(gs, w);
    cr_assert(eq(int, tg_reshape(&bad, w, 1, (int64_t[]){3}), TG_ESHAPE));   /* an old error */
    cr_assert(eq(int, tg_grad_scaler_step(gs, 1, &w, quiet_failing_step, NULL, NULL), TG_EIO));
    th_expect_in(tg_error_message(),
                 "grad_scaler_step: the step callback failed with TG_EIO and no message");
    sgd opt = {.w = w};
    bool stepped = false;
    cr_assert(eq(int, tg_grad_scaler_step(gs, 1, &w, sgd_step, &opt, &stepped), TG_OK));
    cr_assert(stepped && opt.calls == 1);
    tg_tensor_release(w);
    tg_grad_scaler_free(gs);
}

Test(amp_scaler, scaler_skips_step_on_inf_backs_off_then_recovers_and_grows)
{
    tg_grad_scaler_opts o = TG_GRAD_SCALER_OPTS_INIT;
    o.init_scale = 1024.0;
    o.growth_interval = 3;
    tg_grad_scaler *gs = NULL;
    cr_assert(eq(int, tg_grad_scaler_new(&gs, &o), TG_OK));
    tg_tensor *w = th_tensor_from(TG_F32, 1, (int64_t[]){2}, (double[]){1.0, -0.5});
    tg_tensor *other = th_tensor_from(TG_F32, 1, (int64_t[]){2}, (double[]){0.0, 0.0});
    tg_tensor_set_requires_grad(w, true);
    tg_tensor_set_requires_grad(other, true);   /* no gradient: skipped */
    sgd opt = {.w = w};
    tg_tensor *params[2] = {w, other};
    const double injected[2] = {INFINITY, NAN};
    /* Two bad steps (inf, then NaN): skipped, scale halves each time. */
    for (int k = 0; k < 2; k++) {
        scaled_backward(gs, w);
        tg_tensor_set_flat(tg_tensor_grad(w), 1, injected[k]);
        bool stepped = true;
        cr_assert(eq(int, tg_grad_scaler_step(gs, 2, params, sgd_step, &opt, &stepped), TG_OK));
        cr_assert(not(stepped));
        cr_assert(tg_grad_scaler_found_inf(gs));
        cr_assert(eq(int, opt.calls, 0));
        cr_assert(eq(dbl, th_at(w, 0), 1.0));
        cr_assert(eq(int, tg_grad_scaler_step(gs, 2, params, sgd_step, &opt, NULL), TG_EINVAL));
        cr_assert(eq(int, tg_grad_scaler_update(gs), TG_OK));
        cr_assert(eq(dbl, tg_grad_scaler_get_scale(gs), 1024.0 / (2 << k)));
        cr_assert(eq(int, tg_grad_scaler_growth_tracker(gs), 0));
    }
    /* Three clean steps: each is taken with the true gradient 2w; after the
     * third (growth_interval) the scale doubles and the count restarts. */
    for (int k = 0; k < 3; k++) {
        double w0 = th_at(w, 0);
        scaled_backward(gs, w);
        bool stepped = false;
        cr_assert(eq(int, tg_grad_scaler_step(gs, 2, params, sgd_step, &opt, &stepped), TG_OK));
        cr_assert(stepped);
        cr_assert(eq(dbl, th_at(w, 0), w0 - 0.125 * 2 * w0));
        cr_assert(eq(int, tg_grad_scaler_update(gs), TG_OK));
        cr_assert(eq(int, tg_grad_scaler_growth_tracker(gs), (k + 1) % 3));
    }
    cr_assert(eq(int, opt.calls, 3));
    cr_assert(eq(dbl, tg_grad_scaler_get_scale(gs), 512.0));
    cr_assert(tg_tensor_grad(other) == NULL);
    tg_tensor_release(w);
    tg_tensor_release(other);
    tg_grad_scaler_free(gs);
}

static int optimizer_step(void *user) { return tg_optimizer_step(user); }

Test(amp_scaler, scaler_drives_an_optim_h_optimizer)
{
    tg_tensor *w = th_tensor_from(TG_F32, 1, (int64_t[]){2}, (double[]){1.0, -0.5});
    tg_tensor_set_requires_grad(w, true);
    tg_optimizer *opt = NULL;
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.lr = 0.25;
    cr_assert(eq(int, tg_sgd_new(&opt, 1, &w, &so), TG_OK));
    tg_grad_scaler *gs = NULL;
    cr_assert(eq(int, tg_grad_scaler_new(&gs, NULL), TG_OK));
    /* inf step: skipped, the optimizer never runs. */
    scaled_backward(gs, w);
    tg_tensor_set_flat(tg_tensor_grad(w), 0, INFINITY);
    bool stepped = true;
    cr_assert(eq(int, tg_grad_scaler_step(gs, 1, &w, optimizer_step, opt, &stepped), TG_OK));
    cr_assert(not(stepped));
    cr_assert(eq(int, tg_optimizer_steps(opt), 0));
    cr_assert(eq(int, tg_grad_scaler_update(gs), TG_OK));
    /* clean step: w -= 0.25 * 2w with the unscaled gradient. */
    scaled_backward(gs, w);
    cr_assert(eq(int, tg_grad_scaler_step(gs, 1, &w, optimizer_step, opt, &stepped), TG_OK));
    cr_assert(stepped);
    cr_assert(eq(int, tg_optimizer_steps(opt), 1));
    cr_assert(eq(dbl, th_at(w, 0), 0.5));
    cr_assert(eq(dbl, th_at(w, 1), -0.25));
    cr_assert(eq(int, tg_grad_scaler_update(gs), TG_OK));
    cr_assert(eq(dbl, tg_grad_scaler_get_scale(gs), 32768.0));
    tg_grad_scaler_free(gs);
    tg_optimizer_free(opt);
    tg_tensor_release(w);
}

/* Unscales one parameter with a finite gradient: a clean step (PyTorch
 * records no inf check, and refuses the update, when no gradient is seen). */
static void clean_unscale(tg_grad_scaler *gs)
{
    tg_tensor *w = NULL, *g = NULL;
    tg_tensor_zeros(&w, TG_F32, 1, (int64_t[]){1});
    tg_tensor_set_requires_grad(w, true);
    tg_tensor_zeros(&g, TG_F32, 1, (int64_t[]){1});
    cr_assert(eq(int, tg_tensor_set_grad(w, g), TG_OK));
    cr_assert(eq(int, tg_grad_scaler_unscale(gs, 1, &w), TG_OK));
    tg_tensor_release(w);
}

Test(amp_scaler, scaler_growth_stops_below_f32_overflow)
{
    tg_grad_scaler_opts o = TG_GRAD_SCALER_OPTS_INIT;
    o.init_scale = 0x1p127;
    o.growth_interval = 1;
    tg_grad_scaler *gs = NULL;
    cr_assert(eq(int, tg_grad_scaler_new(&gs, &o), TG_OK));
    clean_unscale(gs);
    cr_assert(eq(int, tg_grad_scaler_update(gs), TG_OK));
    cr_assert(eq(dbl, tg_grad_scaler_get_scale(gs), 0x1p127));
    cr_assert(eq(int, tg_grad_scaler_growth_tracker(gs), 0));
    tg_grad_scaler_free(gs);
}

Test(amp_scaler, scaler_rejects_bad_options_and_arguments)
{
    const tg_grad_scaler_opts base = TG_GRAD_SCALER_OPTS_INIT;
    tg_grad_scaler_opts bad[5] = {base, base, base, base, base};
    bad[0].init_scale = 0.0;
    bad[1].init_scale = INFINITY;
    bad[2].growth_factor = 1.0;
    bad[3].backoff_factor = 1.0;
    bad[4].growth_interval = 0;
    for (int i = 0; i < 5; i++) {
        tg_grad_scaler *gs = NULL;
        cr_assert(eq(int, tg_grad_scaler_new(&gs, &bad[i]), TG_EINVAL), "%d", i);
        cr_assert(gs == NULL);
    }
    tg_grad_scaler *gs = NULL;
    cr_assert(eq(int, tg_grad_scaler_new(&gs, NULL), TG_OK));
    tg_tensor *w = th_tensor_from(TG_F32, 1, (int64_t[]){1}, (double[]){2.0}), *out = NULL;
    tg_tensor_set_requires_grad(w, true);
    scaled_backward(gs, w);
    /* A NULL parameter is caught before any gradient is touched. */
    cr_assert(eq(int, tg_grad_scaler_unscale(gs, 2, (tg_tensor *[]){w, NULL}), TG_EINVAL));
    cr_assert(eq(dbl, th_at(tg_tensor_grad(w), 0), 4.0 * 65536));
    /* so is a parameter listed twice, whose gradient would be divided twice */
    cr_assert(eq(int, tg_grad_scaler_unscale(gs, 2, (tg_tensor *[]){w, w}), TG_EINVAL));
    th_expect_in(tg_error_message(), "params[1] is params[0] again");
    cr_assert(eq(dbl, th_at(tg_tensor_grad(w), 0), 4.0 * 65536));
    cr_assert(eq(int, tg_grad_scaler_scale(gs, &out, NULL), TG_EINVAL));
    cr_assert(out == NULL);
    cr_assert(eq(int, tg_grad_scaler_step(gs, 1, &w, NULL, NULL, NULL), TG_EINVAL));
    cr_assert(eq(dbl, th_at(tg_tensor_grad(w), 0), 4.0 * 65536));
    tg_tensor_release(w);
    tg_grad_scaler_free(gs);
}

Test(amp_scaler, scaler_disabled_does_nothing)
{
    tg_grad_scaler_opts o = TG_GRAD_SCALER_OPTS_INIT;
    o.enabled = false;
    tg_grad_scaler *gs = NULL;
    cr_assert(eq(int, tg_grad_scaler_new(&gs, &o), TG_OK));
    tg_tensor *w = th_tensor_from(TG_F32, 1, (int64_t[]){1}, (double[]){3.0}), *l = NULL;
    tg_tensor_set_requires_grad(w, true);
    cr_assert(eq(int, tg_grad_scaler_scale(gs, &l, w), TG_OK));
    cr_assert(l == w);
    tg_tensor_release(l);
    scaled_backward(gs, w);
    tg_tensor_set_flat(tg_tensor_grad(w), 0, INFINITY);
    cr_assert(eq(int, tg_grad_scaler_unscale(gs, 1, &w), TG_OK));
    cr_assert(tg_grad_scaler_should_step(gs));
    cr_assert(eq(int, tg_grad_scaler_update(gs), TG_OK));
    cr_assert(eq(dbl, tg_grad_scaler_get_scale(gs), 1.0));
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_grad_scaler_state_save(gs, f, "scaler"), TG_OK));
    cr_assert(eq(int, tg_st_count(f), 0));
    tg_st_free(f);
    tg_tensor_release(w);
    tg_grad_scaler_free(gs);
}

Test(amp_scaler, scaler_state_round_trip_through_a_file)
{
    tg_grad_scaler_opts o = TG_GRAD_SCALER_OPTS_INIT;
    o.init_scale = 256.0;
    o.growth_interval = 5;
    o.growth_factor = 4.0;
    tg_grad_scaler *a = NULL, *b = NULL;
    cr_assert(eq(int, tg_grad_scaler_new(&a, &o), TG_OK));
    cr_assert(eq(int, tg_grad_scaler_new(&b, NULL), TG_OK));
    for (int k = 0; k < 3; k++) {   /* three clean steps: tracker 3 */
        clean_unscale(a);
        cr_assert(eq(int, tg_grad_scaler_update(a), TG_OK));
    }
    tg_st_file *f = NULL, *g = NULL;
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_grad_scaler_state_save(a, f, "amp.scaler"), TG_OK));
    char path[] = "/tmp/tg_amp_scaler_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert(eq(int, tg_safetensors_save(f, path), TG_OK));
    cr_assert(eq(int, tg_safetensors_load(&g, path), TG_OK));
    unlink(path);
    /* Missing keys: ENOTFOUND and b unchanged. */
    cr_assert(eq(int, tg_grad_scaler_state_load(b, g, "other"), TG_ENOTFOUND));
    cr_assert(eq(dbl, tg_grad_scaler_get_scale(b), 65536.0));
    cr_assert(eq(int, tg_grad_scaler_state_load(b, g, "amp.scaler"), TG_OK));
    cr_assert(eq(dbl, tg_grad_scaler_get_scale(b), 256.0));
    cr_assert(eq(int, tg_grad_scaler_growth_tracker(b), 3));
    /* Both continue alike: two more clean steps grow the scale by 4. */
    for (int k = 0; k < 2; k++) {
        tg_grad_scaler *s[2] = {a, b};
        for (int j = 0; j < 2; j++) {
            clean_unscale(s[j]);
            cr_assert(eq(int, tg_grad_scaler_update(s[j]), TG_OK));
        }
    }
    cr_assert(eq(dbl, tg_grad_scaler_get_scale(a), 1024.0));
    cr_assert(eq(dbl, tg_grad_scaler_get_scale(b), 1024.0));
    cr_assert(eq(int, tg_grad_scaler_growth_tracker(b), 0));
    /* An out-of-range tracker is refused and changes nothing. */
    tg_tensor *bad = NULL;
    cr_assert(eq(int, tg_tensor_scalar(&bad, TG_I64, 7.0), TG_OK));
    cr_assert(eq(int, tg_st_set(f, "amp.scaler.growth_tracker", bad), TG_OK));
    cr_assert(eq(int, tg_grad_scaler_state_load(b, f, "amp.scaler"), TG_EINVAL));
    cr_assert(eq(dbl, tg_grad_scaler_get_scale(b), 1024.0));
    tg_tensor_release(bad);
    tg_st_free(f);
    tg_st_free(g);
    tg_grad_scaler_free(a);
    tg_grad_scaler_free(b);
}

Test(amp_scaler, scaler_rescues_f16_gradients_from_underflow)
{
    /* loss = sum(w16 * 1e-4 * 1e-4) with w16 the f16 copy of an f32 master
     * weight: the gradient 1e-8 underflows f16 (smallest subnormal 6e-8)
     * unless the loss is scaled first. */
    tg_tensor *w = th_tensor_from(TG_F32, 1, (int64_t[]){2}, (double[]){1.0, 2.0});
    tg_tensor_set_requires_grad(w, true);
    double got[2];
    for (int scaled = 0; scaled < 2; scaled++) {
        tg_grad_scaler_opts o = TG_GRAD_SCALER_OPTS_INIT;
        o.init_scale = 1024.0;
        o.enabled = scaled;
        tg_grad_scaler *gs = NULL;
        cr_assert(eq(int, tg_grad_scaler_new(&gs, &o), TG_OK));
        tg_tensor *h = NULL, *a = NULL, *b = NULL, *l = NULL, *sl = NULL;
        tg_tensor_zero_grad(w);
        cr_assert(eq(int, tg_autocast_begin(TG_F16), TG_OK));
        cr_assert(eq(int, tg_to_dtype(&h, w, TG_F16), TG_OK));
        cr_assert(eq(int, tg_mul_scalar(&a, h, 1e-4), TG_OK));
        cr_assert(eq(int, tg_mul_scalar(&b, a, 1e-4), TG_OK));
        cr_assert(eq(int, tg_sum(&l, b), TG_OK));
        cr_assert(eq(int, tg_autocast_end(), TG_OK));
        cr_assert(eq(int, tg_tensor_dtype(l), TG_F32));
        cr_assert(eq(int, tg_grad_scaler_scale(gs, &sl, l), TG_OK));
        cr_assert(eq(int, tg_backward(sl, NULL, NULL), TG_OK));
        cr_assert(eq(int, tg_grad_scaler_unscale(gs, 1, &w), TG_OK));
        cr_assert(tg_grad_scaler_should_step(gs));
        got[scaled] = th_at(tg_tensor_grad(w), 0);
        tg_tensor *ts[5] = {h, a, b, l, sl};
        for (int i = 0; i < 5; i++) tg_tensor_release(ts[i]);
        tg_grad_scaler_free(gs);
    }
    cr_assert(eq(dbl, got[0], 0.0));
    cr_assert(epsilon_eq(dbl, got[1], 1e-8, 2e-10));
    tg_tensor_release(w);
}

/* Unscale finds one non-finite value anywhere in a long gradient (in place
 * for f32 and f64, through a copy for a strided one), and FLT_MAX alone is
 * finite; every other value is divided by the scale exactly. */
Test(amp_scaler, scaler_unscale_finds_one_bad_value_in_a_long_gradient)
{
    const double bads[3] = {-INFINITY, NAN, FLT_MAX};
    const tg_dtype dts[2] = {TG_F32, TG_F64};
    for (int d = 0; d < 2; d++)
        for (int strided = 0; strided < 2; strided++)
            for (int b = 0; b < 3; b++) {
                const int64_t n = 1000, at = 517;
                tg_tensor *w = NULL, *g = NULL, *base = NULL;
                cr_assert(eq(int, tg_tensor_zeros(&w, dts[d], 1, &n), TG_OK));
                const int64_t bn = strided ? 2 * n : n;
                cr_assert(eq(int, tg_tensor_zeros(&base, dts[d], 1, &bn), TG_OK));
                cr_assert(eq(int, tg_slice(&g, base, 0, 0, bn, strided ? 2 : 1), TG_OK));
                for (int64_t i = 0; i < n; i++) tg_tensor_set_flat(g, i, 1024.0 * (double)(i % 7 - 3));
                tg_tensor_set_flat(g, at, bads[b]);
                tg_tensor_set_grad(w, g);   /* steals g */
                tg_grad_scaler_opts o = TG_GRAD_SCALER_OPTS_INIT;
                o.init_scale = 1024.0;
                tg_grad_scaler *gs = NULL;
                cr_assert(eq(int, tg_grad_scaler_new(&gs, &o), TG_OK));
                cr_assert(eq(int, tg_grad_scaler_unscale(gs, 1, &w), TG_OK));
                cr_assert(eq(int, tg_grad_scaler_found_inf(gs), b < 2), "%s strided %d bad %g",
                          tg_dtype_name(dts[d]), strided, bads[b]);
                tg_tensor *gw = tg_tensor_grad(w);
                for (int64_t i = 0; i < n; i++)
                    if (i != at) cr_assert(eq(dbl, th_at(gw, i), (double)(i % 7 - 3)));
                if (b == 2) cr_assert(eq(dbl, th_at(gw, at), (double)FLT_MAX / 1024.0));
                tg_grad_scaler_free(gs);
                tg_tensor_release(base), tg_tensor_release(w);
            }
}

static int fail_once(void *user)
{
    int *calls = user;
    return ++*calls == 1 ? tg_error_set(TG_EIO, "the optimizer failed once") : TG_OK;
}

static int count_calls(void *user)
{
    ++*(int *)user;
    return TG_OK;
}

/* As PyTorch's GradScaler: a step whose optimizer fails can be taken again
 * (the stage moves on only after it ran), and a step or an update with no
 * gradient seen is refused ("No inf checks were recorded"). */
Test(amp_scaler, scaler_step_retries_after_a_failing_step_and_needs_a_gradient)
{
    tg_grad_scaler *gs = NULL;
    cr_assert(eq(int, tg_grad_scaler_new(&gs, NULL), TG_OK));
    tg_tensor *w = NULL, *g = NULL;
    tg_tensor_zeros(&w, TG_F32, 1, (int64_t[]){2});
    tg_tensor_set_requires_grad(w, true);
    int calls = 0;
    /* no gradient: refused, nothing called */
    cr_assert(eq(int, tg_grad_scaler_step(gs, 1, &w, count_calls, &calls, NULL), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "no inf checks were recorded") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(int, calls, 0));
    cr_assert(eq(int, tg_grad_scaler_update(gs), TG_EINVAL));
    tg_grad_scaler_free(gs);
    cr_assert(eq(int, tg_grad_scaler_new(&gs, NULL), TG_OK));
    /* with a gradient: the first call fails, the retry runs, the update works */
    tg_tensor_full(&g, TG_F32, 1, (int64_t[]){2}, 65536.0);
    cr_assert(eq(int, tg_tensor_set_grad(w, g), TG_OK));
    bool stepped = true;
    calls = 0;
    cr_assert(eq(int, tg_grad_scaler_step(gs, 1, &w, fail_once, &calls, &stepped), TG_EIO));
    cr_assert(eq(int, stepped, false));
    cr_assert(eq(int, tg_grad_scaler_step(gs, 1, &w, fail_once, &calls, &stepped), TG_OK));
    cr_assert(eq(int, stepped, true));
    cr_assert(eq(int, calls, 2));
    cr_assert(eq(dbl, th_at(tg_tensor_grad(w), 0), 1.0));   /* unscaled once, not twice */
    cr_assert(eq(int, tg_grad_scaler_step(gs, 1, &w, fail_once, &calls, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_grad_scaler_update(gs), TG_OK));
    tg_grad_scaler_free(gs);
    tg_tensor_release(w);
}

/* State values that are not integers in range (NaN, 1e300, 2.5) are refused
 * with the key named, and checked before any conversion to int64 (NaN or
 * 1e300 cast to int64 is undefined behaviour). */
Test(amp_scaler, scaler_state_load_refuses_non_integer_counts)
{
    tg_grad_scaler *a = NULL, *b = NULL;
    cr_assert(eq(int, tg_grad_scaler_new(&a, NULL), TG_OK));
    cr_assert(eq(int, tg_grad_scaler_new(&b, NULL), TG_OK));
    const struct {
        const char *key;
        double v;
    } bad[] = {{"s.growth_interval", NAN}, {"s.growth_interval", 1e300},
               {"s.growth_interval", 2.5}, {"s.growth_interval", 0},
               {"s.growth_tracker", NAN},  {"s.growth_tracker", -1e300},
               {"s.growth_tracker", 1.5},  {"s.growth_tracker", 2000}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        tg_st_file *f = NULL;
        cr_assert(eq(int, tg_st_new(&f), TG_OK));
        cr_assert(eq(int, tg_grad_scaler_state_save(a, f, "s"), TG_OK));
        tg_tensor *t = NULL;
        cr_assert(eq(int, tg_tensor_scalar(&t, TG_F64, bad[k].v), TG_OK));
        cr_assert(eq(int, tg_st_set(f, bad[k].key, t), TG_OK));
        cr_assert(eq(int, tg_grad_scaler_state_load(b, f, "s"), TG_EINVAL), "%s=%g", bad[k].key,
                  bad[k].v);
        cr_assert(strstr(tg_error_message(), bad[k].key + 2) != NULL, "%s", tg_error_message());
        cr_assert(eq(dbl, tg_grad_scaler_get_scale(b), 65536.0));
        tg_tensor_release(t);
        tg_st_free(f);
    }
    tg_grad_scaler_free(a);
    tg_grad_scaler_free(b);
}
