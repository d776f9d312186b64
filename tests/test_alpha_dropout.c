/* tests/test_alpha_dropout.c - tg_alpha_dropout, tg_feature_alpha_dropout
 * (F.alpha_dropout, F.feature_alpha_dropout) and nn.AlphaDropout /
 * nn.FeatureAlphaDropout.  The masks come from tapegrad's generator, not
 * torch's, so the tests check torch's constants (the kept and dropped
 * values and the scale, read off torch's outputs at x = 0 and x = 1), the
 * formula on the mask the gradient reveals, the statistics (mean 0 and
 * variance 1 kept for a normal input, within bounds from the sample size),
 * the feature form's one draw per channel, p = 1 as torch (x * 0), the
 * identity cases, derivatives to second order with a fixed mask, the
 * modules' mask count (recomputation draws the same mask) and the
 * refusals.  Goldens: scripts/make_nnsmall_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static tg_tensor *filled(tg_dtype dt, int nd, const int64_t *shape, double v)
{
    tg_tensor *t = NULL;
    OK(tg_tensor_full(&t, dt, nd, shape, v));
    return t;
}

/* The gradients of sum(y). */
static void backward_of_sum(tg_tensor *y)
{
    tg_tensor *ones = filled(tg_tensor_dtype(y), tg_tensor_ndim(y), tg_tensor_shape(y), 1.0);
    OK(tg_backward(y, ones, NULL));
    tg_tensor_release(ones);
}

/* Ours at x = 0 and x = 1 with one mask: the kept value (alpha' a p), the
 * dropped one (alpha' a (p - 1)) and the scale a are torch's. */
Test(alpha_dropout, constants_match_torch)
{
    tg_st_file *f = th_golden_load("nnsmall.safetensors");
    const int n = atoi(tg_st_meta_get(f, "alpha.cases"));
    cr_assert(n >= 3);
    const int64_t len = 2000;
    for (int i = 0; i < n; i++) {
        char c[32];
        snprintf(c, sizeof c, "alpha%d", i);
        const double p = atof(th_golden_meta(f, c, "p"));
        tg_tensor *zero = filled(TG_F64, 1, &len, 0.0), *one = filled(TG_F64, 1, &len, 1.0);
        tg_tensor *y0 = NULL, *y1 = NULL;
        tg_rng rng;
        tg_rng_init(&rng, 5);
        OK(tg_alpha_dropout(&y0, zero, p, true, &rng));
        tg_rng_init(&rng, 5);
        OK(tg_alpha_dropout(&y1, one, p, true, &rng));
        const double kept = th_at(th_golden_get(f, c, "kept"), 0);
        const double dropped = th_at(th_golden_get(f, c, "dropped"), 0);
        const double scale = th_at(th_golden_get(f, c, "scale"), 0);
        int64_t n_kept = 0;
        for (int64_t e = 0; e < len; e++) {
            const double v0 = th_at(y0, e), s = th_at(y1, e) - v0;
            const bool k = s != 0;
            n_kept += k;
            cr_assert(th_close(v0, k ? kept : dropped, 1e-15, 0), "%s: %.17g", c, v0);
            if (k) cr_assert(th_close(s, scale, 1e-15, 0), "%s scale %.17g", c, s);
        }
        cr_assert(n_kept > 0 && n_kept < len, "%s: %lld kept", c, (long long)n_kept);
        th_release_all(4, (tg_tensor *[]){zero, one, y0, y1});
    }
    tg_st_free(f);
}

/* The gradient of sum(y) is a where kept and 0 where dropped; with that
 * mask y is a x + alpha' a p or alpha' a (p - 1) (f32), and about p of the
 * elements are dropped. */
Test(alpha_dropout, formula_on_the_mask_the_gradient_shows)
{
    const double al = 1.7580993408473766, p = 0.3;
    const double a = 1 / sqrt((al * al * p + 1) * (1 - p));
    const int64_t shape[2] = {100, 200}, n = 20000;
    tg_tensor *x = th_rand_uniform(TG_F32, 2, shape, 3), *y = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    tg_rng rng;
    tg_rng_init(&rng, 9);
    OK(tg_alpha_dropout(&y, x, p, true, &rng));
    backward_of_sum(y);
    const tg_tensor *g = tg_tensor_grad(x);
    int64_t dropped = 0;
    for (int64_t i = 0; i < n; i++) {
        const double gi = th_at(g, i), xi = th_at(x, i), yi = th_at(y, i);
        cr_assert(gi == 0 || th_close(gi, a, 1e-7, 0), "gradient %g", gi);
        const double want = gi != 0 ? a * xi + al * a * p : al * a * (p - 1);
        cr_assert(th_close(yi, want, 1e-6, 1e-6), "y %g, want %g", yi, want);
        dropped += gi == 0;
    }
    /* Binomial(20000, 0.3): sd 65, so +-400 is > 6 sd */
    cr_assert(llabs(dropped - 6000) < 400, "dropped %lld", (long long)dropped);
    th_release_all(2, (tg_tensor *[]){x, y});
}

/* For x ~ N(0, 1) the y_i are independent with mean 0 and variance 1:
 * the sample mean lies within 5 / sqrt(n) of 0 and the sample variance
 * within 6 sqrt((m4 - v^2) / n) of 1 (m4 the sample's fourth central
 * moment), for each p and for the feature form. */
Test(alpha_dropout, mean_and_variance_of_a_normal_input_are_kept)
{
    const double ps[3] = {0.1, 0.5, 0.8};
    const int64_t shape[3] = {500, 100, 4}, n = 200000;
    for (int feature = 0; feature < 2; feature++)
        for (int k = 0; k < 3; k++) {
            tg_tensor *x = NULL, *y = NULL;
            OK(tg_tensor_zeros(&x, TG_F64, 3, shape));
            tg_rng rng;
            tg_rng_init(&rng, 20 + (uint64_t)k);
            OK(tg_tensor_rand_normal(x, &rng, 0.0, 1.0));
            OK((feature ? tg_feature_alpha_dropout : tg_alpha_dropout)(&y, x, ps[k], true, &rng));
            double s = 0, s2 = 0, s4 = 0;
            for (int64_t i = 0; i < n; i++) s += th_at(y, i);
            const double mean = s / (double)n;
            for (int64_t i = 0; i < n; i++) {
                const double d = th_at(y, i) - mean;
                s2 += d * d;
                s4 += d * d * d * d;
            }
            const double v = s2 / (double)n, m4 = s4 / (double)n;
            /* the feature form draws one mask per (n, c), shared by 4
             * elements: counted as n / 4 independent draws (conservative) */
            const double eff = feature ? (double)n / 4 : (double)n;
            cr_assert(fabs(mean) < 5 / sqrt(eff), "p %g feature %d: mean %g", ps[k], feature,
                      mean);
            cr_assert(fabs(v - 1) < 6 * sqrt((m4 - v * v) / eff), "p %g feature %d: var %g",
                      ps[k], feature, v);
            th_release_all(2, (tg_tensor *[]){x, y});
        }
}

/* One draw per channel: every element of x[n, c] kept or dropped
 * together, (N, C) draws from (N, C, 1, ...). */
Test(alpha_dropout, feature_form_draws_one_mask_per_channel)
{
    const int64_t shape[4] = {6, 8, 3, 2};
    tg_tensor *x = filled(TG_F32, 4, shape, 1.0), *y = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 4);
    OK(tg_feature_alpha_dropout(&y, x, 0.5, true, &rng));
    int kinds[2] = {0, 0};
    for (int64_t ch = 0; ch < 48; ch++) {
        const double first = th_at(y, ch * 6);
        for (int64_t e = 1; e < 6; e++) cr_assert(eq(dbl, th_at(y, ch * 6 + e), first));
        kinds[first < 0]++;   /* dropped: alpha' a (p - 1) < 0 */
    }
    cr_assert(kinds[0] > 5 && kinds[1] > 5, "kept %d dropped %d", kinds[0], kinds[1]);
    th_release_all(2, (tg_tensor *[]){x, y});
}

/* Not training, p = 0 or an empty x: x itself, nothing drawn (no rng
 * needed); p = 1: x * 0 as torch's (NaN at inf and NaN, -0 for negatives)
 * with a zero gradient. */
Test(alpha_dropout, identity_cases_and_p_one)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 4}, 1), *y = NULL, *e = NULL;
    OK(tg_alpha_dropout(&y, x, 0.5, false, NULL));
    cr_assert(y == x);
    tg_tensor_release(y);
    OK(tg_feature_alpha_dropout(&y, x, 0.0, true, NULL));
    cr_assert(y == x);
    tg_tensor_release(y);
    OK(tg_tensor_zeros(&e, TG_F32, 2, (int64_t[]){0, 4}));
    tg_rng rng;
    tg_rng_init(&rng, 1);
    OK(tg_alpha_dropout(&y, e, 0.5, true, &rng));
    cr_assert(y == e);
    tg_tensor_release(y);
    tg_st_file *f = th_golden_load("nnsmall.safetensors");
    tg_tensor *x1 = th_leaf_clone(th_golden_get(f, "alpha", "one.x"));
    OK(tg_alpha_dropout(&y, x1, 1.0, true, &rng));
    th_expect_close("p = 1", y, th_golden_get(f, "alpha", "one.y"), 0);
    backward_of_sum(y);
    for (int64_t i = 0; i < 5; i++) cr_assert(eq(dbl, th_at(tg_tensor_grad(x1), i), 0.0));
    tg_tensor_release(y);
    /* torch's order: p = 1 passes the feature form's rank check */
    OK(tg_feature_alpha_dropout(&y, x1, 1.0, true, &rng));
    th_expect_close("feature p = 1", y, th_golden_get(f, "alpha", "one.y"), 0);
    tg_tensor_release(y);
    tg_st_free(f);
    th_release_all(3, (tg_tensor *[]){x, e, x1});
}

typedef struct fixed_mask {
    bool feature;
    double p;
} fixed_mask;

/* A fresh generator at each call: the same mask every time. */
static int alpha_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const fixed_mask *fm = user;
    tg_rng rng;
    tg_rng_init(&rng, 77);
    return (fm->feature ? tg_feature_alpha_dropout : tg_alpha_dropout)(out, in[0], fm->p, true,
                                                                        &rng);
}

Test(alpha_dropout, first_and_second_derivatives_with_a_fixed_mask)
{
    static const fixed_mask cases[2] = {{false, 0.4}, {true, 0.5}};
    for (int k = 0; k < 2; k++) {
        tg_tensor *x = th_rand_uniform(TG_F64, 3, (int64_t[]){3, 4, 2}, 8);
        OK(tg_tensor_set_requires_grad(x, true));
        th_expect_gradchecks(alpha_fn, (void *)&cases[k], 1, (tg_tensor *[]){x}, "case %d", k);
        tg_tensor_release(x);
    }
}

/* AlphaDropout: a new mask at each training forward, the same for the
 * same seed, the identity in eval; a recomputed forward draws the mask of
 * the forward it repeats (the gradient is that mask's a). */
Test(alpha_dropout, modules_count_their_masks)
{
    tg_module *m = NULL, *m2 = NULL, *fm = NULL;
    OK(tg_nn_alpha_dropout_new(&m, 0.5, 42));
    OK(tg_nn_alpha_dropout_new(&m2, 0.5, 42));
    OK(tg_nn_feature_alpha_dropout_new(&fm, 0.25, 42));
    cr_assert(eq(str, (char *)tg_module_type_name(m), "AlphaDropout"));
    cr_assert(eq(str, (char *)tg_module_type_name(fm), "FeatureAlphaDropout"));
    cr_assert(eq(int, tg_module_state_count(m), 0));
    bool feature = true;
    double p = 0;
    OK(tg_nn_alpha_dropout_params(m, &feature, &p));
    cr_assert(feature == false && p == 0.5);
    OK(tg_nn_alpha_dropout_params(fm, &feature, &p));
    cr_assert(feature == true && p == 0.25);
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){40, 50}, 2);
    tg_tensor *y1 = NULL, *y2 = NULL, *z1 = NULL, *ye = NULL, *yf = NULL;
    OK(tg_module_forward(m, &y1, x));
    OK(tg_module_forward(m, &y2, x));
    OK(tg_module_forward(m2, &z1, x));
    th_expect_same_bits("same seed, same call", x, z1, y1);
    int64_t same = 0;
    for (int64_t i = 0; i < 2000; i++) same += th_at(y1, i) == th_at(y2, i);
    cr_assert(same < 1500, "the second call draws a new mask (%lld equal)", (long long)same);
    const int64_t cs[3] = {4, 5, 10};
    tg_tensor *ones = filled(TG_F32, 3, cs, 1.0);
    OK(tg_module_forward(fm, &yf, ones));   /* one draw per (n, c) */
    for (int64_t ch = 0; ch < 20; ch++)
        for (int64_t e = 1; e < 10; e++)
            cr_assert(eq(dbl, th_at(yf, ch * 10 + e), th_at(yf, ch * 10)));
    tg_tensor_release(ones);
    tg_module_train(m, false);
    OK(tg_module_forward(m, &ye, x));
    cr_assert(ye == x);
    tg_module_train(m, true);
    tg_tensor *xg = th_rand_uniform(TG_F32, 2, (int64_t[]){40, 50}, 3), *yr = NULL;
    OK(tg_tensor_set_requires_grad(xg, true));
    OK(tg_module_forward_recompute(m, &yr, xg));
    backward_of_sum(yr);
    const double al = 1.7580993408473766;
    const double a = 1 / sqrt((al * al * 0.5 + 1) * 0.5);
    for (int64_t i = 0; i < 2000; i++) {
        const double g = th_at(tg_tensor_grad(xg), i), v = th_at(yr, i);
        const double want = g != 0 ? a * th_at(xg, i) + al * a * 0.5 : -al * a * 0.5;
        cr_assert(th_close(v, want, 1e-6, 1e-6), "recomputed mask differs at %lld",
                  (long long)i);
    }
    th_release_all(8, (tg_tensor *[]){x, y1, y2, z1, ye, yf, xg, yr});
    tg_module_release(m);
    tg_module_release(m2);
    tg_module_release(fm);
}

Test(alpha_dropout, refusals_name_the_rule)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 4}, 1), *xi = NULL;
    tg_tensor *v = th_rand_uniform(TG_F32, 1, (int64_t[]){4}, 1);
    OK(tg_tensor_to_dtype(&xi, x, TG_I32));
    tg_rng rng;
    tg_rng_init(&rng, 1);
    th_expect_refused_clean(tg_alpha_dropout(NULL, x, 0.5, true, &rng), TG_EINVAL,
                            "alpha_dropout: out must not be NULL");
    th_expect_refused_clean(tg_alpha_dropout(out_, NULL, 0.5, true, &rng), TG_EINVAL,
                            "alpha_dropout: x must not be NULL");
    th_expect_refused_clean(tg_alpha_dropout(out_, x, 1.5, true, &rng), TG_EINVAL,
                            "alpha_dropout: p=1.5 must be in [0, 1]");
    th_expect_refused_clean(tg_feature_alpha_dropout(out_, x, NAN, true, &rng), TG_EINVAL,
                            "feature_alpha_dropout: p=nan must be in [0, 1]");
    th_expect_refused_clean(tg_alpha_dropout(out_, xi, 0.5, true, &rng), TG_EDTYPE,
                            "alpha_dropout: x has dtype i32; float dtypes only");
    th_expect_refused_clean(tg_alpha_dropout(out_, x, 0.5, true, NULL), TG_EINVAL,
                            "alpha_dropout: rng must not be NULL when training with p > 0");
    th_expect_refused_clean(tg_feature_alpha_dropout(out_, v, 0.5, true, &rng), TG_ESHAPE,
                            "feature_alpha_dropout: x has 1 dims; feature dropout needs at "
                            "least 2 (N, C, ...)");
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_alpha_dropout_new(&m, -0.1, 1), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_alpha_dropout_new: p=-0.1 must be in [0, 1]");
    cr_assert(eq(int, tg_nn_feature_alpha_dropout_new(&m, 2, 1), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_feature_alpha_dropout_new: p=2 must be in [0, 1]");
    cr_assert(eq(int, tg_nn_alpha_dropout_new(NULL, 0.5, 1), TG_EINVAL));
    cr_assert(m == NULL);
    OK(tg_nn_dropout_new(&m, 0.5, 1));
    cr_assert(eq(int, tg_nn_alpha_dropout_params(m, NULL, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(),
                 "nn_alpha_dropout_params: m is a Dropout module, not AlphaDropout or "
                 "FeatureAlphaDropout");
    cr_assert(eq(int, tg_nn_alpha_dropout_params(NULL, NULL, NULL), TG_EINVAL));
    tg_module_release(m);
    th_release_all(3, (tg_tensor *[]){x, xi, v});
}
