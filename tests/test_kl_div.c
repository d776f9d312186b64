/* tests/test_kl_div.c - tg_kl_div against PyTorch 1.13's F.kl_div and its
 * gradients in input and target (f32, f64, bf16; every reduction,
 * batchmean of a 0-d input; log_target false and true; zeros and a negative
 * value in the target; shapes that broadcast), gradcheck and gradgradcheck
 * in f64 where the loss is smooth (target > 0), and the refusals.  Goldens:
 * scripts/make_kl_div_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* Values and both gradients within rounding of torch's, NaN where torch's
 * is NaN (a negative target; the gradient in a target of 0). */
Test(kl_div, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("kl_div.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int batchmean = 0, broadcast = 0, halves = 0;
    for (int i = 0; i < n; i++) {
        char c[16], what[96];
        snprintf(c, sizeof c, "case%d", i);
        const char *ds = th_golden_meta(f, c, "dtype");
        const bool f64 = !strcmp(ds, "f64"), bf16 = !strcmp(ds, "bf16");
        const char *rs = th_golden_meta(f, c, "red");
        const tg_reduction red = th_reduction_of(rs);
        const bool lt = atoi(th_golden_meta(f, c, "log_target")) != 0;
        snprintf(what, sizeof what, "%s (%s, %s, log_target %d)", c, ds, rs, lt);
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x"));
        tg_tensor *t = th_leaf_clone(th_golden_get(f, c, "t")), *y = NULL, *d[2] = {NULL};
        OK(tg_kl_div(&y, x, t, red, lt));
        /* bf16: each op of the composite rounds to 8 bits (torch's xlogy rounds
         * once, ours after log and after mul), and the loss is a difference
         * of terms up to about 1: its error is theirs, 2^-6 absolute */
        const double rtol = f64 ? 1e-13 : bf16 ? 2e-2 : 1e-5;
        const double atol = f64 ? 1e-15 : bf16 ? 0x1p-6 : 1e-7;
        th_expect_near(what, y, th_golden_get(f, c, "y"), rtol, atol);
        tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g");
        OK(tg_grad(d, 1, &y, &g, 2, (tg_tensor *[]){x, t}, NULL));
        th_expect_near(what, d[0], th_golden_get(f, c, "dx"), rtol, atol);
        th_expect_near(what, d[1], th_golden_get(f, c, "dt"), rtol, atol);
        batchmean += red == TG_REDUCTION_BATCHMEAN;
        broadcast += !tg_tensor_same_shape(x, t);
        halves += bf16;
        th_release_all(5, (tg_tensor *[]){x, t, y, d[0], d[1]});
    }
    cr_assert(n >= 99 && batchmean >= 27 && broadcast >= 72 && halves >= 33,
              "%d cases, %d batchmean, %d broadcast, %d bf16", n, batchmean, broadcast, halves);
    tg_st_free(f);
}

typedef struct kl_case {
    tg_reduction red;
    bool log_target;
} kl_case;

static int kl_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const kl_case *k = user;
    return tg_kl_div(out, in[0], in[1], k->red, k->log_target);
}

Test(kl_div, gradcheck_and_gradgradcheck)
{
    const kl_case cases[] = {{TG_REDUCTION_BATCHMEAN, false}, {TG_REDUCTION_MEAN, true},
                             {TG_REDUCTION_NONE, false},      {TG_REDUCTION_SUM, true}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint64_t s = 501 + i;
        tg_tensor *in[2] = {th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, -2, 0),
                            th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, 0.1, 1)};
        for (int k = 0; k < 2; k++) OK(tg_tensor_set_requires_grad(in[k], true));
        th_expect_gradchecks(kl_fn, (void *)&cases[i], 2, in, "case %zu", i);
        th_release_all(2, in);
    }
    /* x (3, 1) against t (4,): the gradient in x sums over the broadcast */
    uint64_t s = 509;
    tg_tensor *in[2] = {th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 1}, -2, 0),
                        th_rand_tensor(&s, TG_F64, 1, (int64_t[]){4}, 0.1, 1)};
    for (int k = 0; k < 2; k++) OK(tg_tensor_set_requires_grad(in[k], true));
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    OK(tg_gradcheck(kl_fn, (void *)&cases[0], 2, in, &o));
    OK(tg_gradgradcheck(kl_fn, (void *)&cases[1], 2, in, &o));
    th_release_all(2, in);
}

/* The other losses refuse batchmean, naming the reduction. */
Test(kl_div, refusals_name_the_argument)
{
    tg_tensor *x = th_vec(TG_F32, 3, (double[]){-1, -2, -3}, "x", false), *z = NULL;
    tg_tensor *t = th_vec(TG_F32, 2, (double[]){0.5, 0.5}, "t", false), *xi = NULL;
    tg_tensor *t3 = th_vec(TG_F32, 3, (double[]){0.2, 0.3, 0.5}, "t3", false);
    th_expect_refused(tg_kl_div(&z, NULL, t, TG_REDUCTION_SUM, false), TG_EINVAL, "input", z);
    th_expect_refused(tg_kl_div(&z, x, NULL, TG_REDUCTION_SUM, false), TG_EINVAL, "target", z);
    th_expect_refused(tg_kl_div(NULL, x, t, TG_REDUCTION_SUM, false), TG_EINVAL, "out", NULL);
    th_expect_refused(tg_kl_div(&z, x, t, TG_REDUCTION_SUM, false), TG_ESHAPE, "shape", z);
    th_expect_refused(tg_kl_div(&z, x, t3, (tg_reduction)7, false), TG_EINVAL, "reduction", z);
    OK(tg_tensor_to_dtype(&xi, x, TG_I64));
    th_expect_refused(tg_kl_div(&z, xi, t3, TG_REDUCTION_SUM, false), TG_EDTYPE, "float", z);
    th_expect_refused(tg_mse_loss(&z, x, t3, TG_REDUCTION_BATCHMEAN), TG_EINVAL, "reduction",
                      z);
    th_expect_refused(tg_l1_loss(&z, x, t3, TG_REDUCTION_BATCHMEAN), TG_EINVAL, "reduction", z);
    th_expect_refused(tg_bce_with_logits(&z, x, t3, TG_REDUCTION_BATCHMEAN), TG_EINVAL,
                      "reduction", z);
    th_expect_refused(tg_smooth_l1_loss(&z, x, t3, TG_REDUCTION_BATCHMEAN, 1.0), TG_EINVAL,
                      "reduction", z);
    th_expect_refused(tg_huber_loss(&z, x, t3, TG_REDUCTION_BATCHMEAN, 1.0), TG_EINVAL,
                      "reduction", z);
    th_release_all(4, (tg_tensor *[]){x, t, xi, t3});
}
