/* tests/test_amp_train.c - a small network trained under half autocast
 * (with the gradient scaler for f16) against its f32 run, and a half loss
 * scaled in f32 as torch does.  The scaler's own rules are in
 * test_amp_scaler.c. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/amp.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"
#include "tapegrad/tensor.h"

/* ---- a 2-layer MLP trained in f32 and under half autocast ------------------------ */

enum { N_SAMPLES = 64, D_IN = 4, D_HID = 16, N_STEPS = 300 };

typedef struct mlp {
    tg_tensor *p[4];   /* w1 (16, 4), b1 (16), w2 (1, 16), b2 (1), f32 masters */
} mlp;

static void mlp_init(mlp *m)
{
    const int64_t shapes[4][2] = {{D_HID, D_IN}, {D_HID, 0}, {1, D_HID}, {1, 0}};
    tg_rng rng;
    tg_rng_init(&rng, 7);
    for (int i = 0; i < 4; i++) {
        int nd = shapes[i][1] ? 2 : 1;
        cr_assert(eq(int, tg_tensor_zeros(&m->p[i], TG_F32, nd, shapes[i]), TG_OK));
        cr_assert(eq(int, tg_tensor_rand_uniform(m->p[i], &rng, -0.5, 0.5), TG_OK));
        tg_tensor_set_requires_grad(m->p[i], true);
    }
}

/* Synthetic regression: t = x0 x1 + tanh(x2) - 0.5 x3 on x uniform in [-1, 1]. */
static void make_data(tg_tensor **x, tg_tensor **t)
{
    cr_assert(eq(int, tg_tensor_zeros(x, TG_F32, 2, (int64_t[]){N_SAMPLES, D_IN}), TG_OK));
    cr_assert(eq(int, tg_tensor_zeros(t, TG_F32, 2, (int64_t[]){N_SAMPLES, 1}), TG_OK));
    tg_rng rng;
    tg_rng_init(&rng, 11);
    cr_assert(eq(int, tg_tensor_rand_uniform(*x, &rng, -1.0, 1.0), TG_OK));
    for (int64_t n = 0; n < N_SAMPLES; n++) {
        double v[D_IN];
        for (int d = 0; d < D_IN; d++) v[d] = th_at(*x, n * D_IN + d);
        tg_tensor_set_flat(*t, n, v[0] * v[1] + tanh(v[2]) - 0.5 * v[3]);
    }
}

/* mean((linear(tanh(linear(x, w1, b1)), w2, b2) - t)^2), under autocast dt
 * unless dt is f32. */
static tg_tensor *mlp_loss(const mlp *m, tg_tensor *x, tg_tensor *t, tg_dtype dt)
{
    tg_tensor *h = NULL, *a = NULL, *y = NULL, *d = NULL, *sq = NULL, *l = NULL;
    if (dt != TG_F32) cr_assert(eq(int, tg_autocast_begin(dt), TG_OK));
    cr_assert(eq(int, tg_linear(&h, x, m->p[0], m->p[1]), TG_OK));
    cr_assert(eq(int, tg_tanh(&a, h), TG_OK));
    cr_assert(eq(int, tg_linear(&y, a, m->p[2], m->p[3]), TG_OK));
    cr_assert(eq(int, tg_sub(&d, y, t), TG_OK));
    cr_assert(eq(int, tg_mul(&sq, d, d), TG_OK));
    cr_assert(eq(int, tg_mean(&l, sq), TG_OK));
    if (dt != TG_F32) {
        cr_assert(eq(int, tg_autocast_end(), TG_OK));
        cr_assert(eq(int, tg_tensor_dtype(h), dt));
    }
    cr_assert(eq(int, tg_tensor_dtype(l), TG_F32));
    tg_tensor *ts[5] = {h, a, y, d, sq};
    for (int i = 0; i < 5; i++) tg_tensor_release(ts[i]);
    return l;
}

static int mlp_sgd(void *user)
{
    mlp *m = user;
    for (int i = 0; i < 4; i++) {
        float *p = tg_tensor_data(m->p[i]);
        const float *g = tg_tensor_cdata(tg_tensor_grad(m->p[i]));
        for (int64_t e = 0; e < tg_tensor_numel(m->p[i]); e++) p[e] -= 0.1f * g[e];
        tg_tensor_bump_version(m->p[i]);   /* a write through tg_tensor_data */
    }
    return TG_OK;
}

/* Trains 300 steps under dt (f16 with a grad scaler); returns the final
 * loss evaluated in f32. */
static double train(tg_dtype dt, tg_tensor *x, tg_tensor *t)
{
    mlp m;
    mlp_init(&m);
    tg_grad_scaler_opts o = TG_GRAD_SCALER_OPTS_INIT;
    o.enabled = dt == TG_F16;
    o.growth_interval = 50;
    tg_grad_scaler *gs = NULL;
    cr_assert(eq(int, tg_grad_scaler_new(&gs, &o), TG_OK));
    for (int step = 0; step < N_STEPS; step++) {
        for (int i = 0; i < 4; i++) tg_tensor_zero_grad(m.p[i]);
        tg_tensor *l = mlp_loss(&m, x, t, dt), *sl = NULL;
        cr_assert(eq(int, tg_grad_scaler_scale(gs, &sl, l), TG_OK));
        cr_assert(eq(int, tg_backward(sl, NULL, NULL), TG_OK));
        for (int i = 0; i < 4; i++) cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(m.p[i])), TG_F32));
        cr_assert(eq(int, tg_grad_scaler_step(gs, 4, m.p, mlp_sgd, &m, NULL), TG_OK));
        cr_assert(eq(int, tg_grad_scaler_update(gs), TG_OK));
        tg_tensor_release(l);
        tg_tensor_release(sl);
    }
    tg_tensor *l = mlp_loss(&m, x, t, TG_F32);
    double v = th_at(l, 0);
    tg_tensor_release(l);
    for (int i = 0; i < 4; i++) tg_tensor_release(m.p[i]);
    tg_grad_scaler_free(gs);
    return v;
}

Test(amp_train, mlp_under_half_autocast_reaches_the_f32_loss)
{
    tg_tensor *x = NULL, *t = NULL;
    make_data(&x, &t);
    tg_tensor *l0 = NULL;
    {
        mlp m;
        mlp_init(&m);
        l0 = mlp_loss(&m, x, t, TG_F32);
        for (int i = 0; i < 4; i++) tg_tensor_release(m.p[i]);
    }
    double start = th_at(l0, 0);
    double f32 = train(TG_F32, x, t), bf16 = train(TG_BF16, x, t), f16 = train(TG_F16, x, t);
    cr_log_info("mlp loss: start %.5f, f32 %.7f, bf16 %.7f, f16+scaler %.7f", start, f32, bf16, f16);
    cr_assert(f32 < 0.5 * start, "training must make progress: %g -> %g", start, f32);
    cr_assert(fabs(bf16 - f32) <= 0.05 * f32, "bf16 %g vs f32 %g", bf16, f32);
    cr_assert(fabs(f16 - f32) <= 0.05 * f32, "f16 %g vs f32 %g", f16, f32);
    tg_tensor_release(l0);
    tg_tensor_release(x);
    tg_tensor_release(t);
}

/* PyTorch's scaled loss is loss * (f32 scale tensor): an f16/bf16 loss is
 * promoted to f32, so a loss of 2 at the default scale 65536 is 131072, not
 * inf (in f16 65536 itself is beyond the range).  The gradient of an f16
 * parameter still arrives in f16, scaled. */
Test(amp_train, half_loss_is_scaled_in_f32_as_torch)
{
    const tg_dtype halves[2] = {TG_F16, TG_BF16};
    for (int h = 0; h < 2; h++) {
        tg_grad_scaler *gs = NULL;
        cr_assert(eq(int, tg_grad_scaler_new(&gs, NULL), TG_OK));
        tg_tensor *w = NULL, *l = NULL, *sl = NULL;
        cr_assert(eq(int, tg_tensor_full(&w, halves[h], 1, (int64_t[]){2}, 1.0), TG_OK));
        tg_tensor_set_requires_grad(w, true);
        cr_assert(eq(int, tg_sum(&l, w), TG_OK));   /* 2, in the half dtype */
        cr_assert(eq(int, tg_tensor_dtype(l), halves[h]));
        cr_assert(eq(int, tg_grad_scaler_scale(gs, &sl, l), TG_OK));
        cr_assert(eq(int, tg_tensor_dtype(sl), TG_F32), "%s", tg_dtype_name(halves[h]));
        cr_assert(eq(dbl, th_at(sl, 0), 131072.0));
        cr_assert(eq(int, tg_backward(sl, NULL, NULL), TG_OK));
        tg_tensor *g = tg_tensor_grad(w);
        cr_assert(eq(int, tg_tensor_dtype(g), halves[h]));
        cr_assert(eq(dbl, th_at(g, 0), 65536.0 > 65504.0 && halves[h] == TG_F16 ? INFINITY
                                                                                 : 65536.0));
        cr_assert(eq(int, tg_grad_scaler_unscale(gs, 1, &w), TG_OK));
        cr_assert(eq(int, tg_grad_scaler_found_inf(gs), halves[h] == TG_F16));
        tg_tensor_release(w), tg_tensor_release(l), tg_tensor_release(sl);
        tg_grad_scaler_free(gs);
    }
}
