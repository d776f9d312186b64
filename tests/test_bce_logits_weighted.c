/* tests/test_bce_logits_weighted.c - tg_bce_with_logits_weighted against
 * PyTorch's F.binary_cross_entropy_with_logits with weight and pos_weight
 * and its gradients in logits, target, weight and pos_weight (f32, f64;
 * every reduction; logits of +-1000), gradcheck in f64, agreement with
 * tg_bce_with_logits without weights, and the refusals.
 * Goldens: scripts/make_bce_logits_weighted_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

Test(bce_logits_weighted, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("bce_logits_weighted.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    for (int i = 0; i < n; i++) {
        char c[16], what[96];
        snprintf(c, sizeof c, "case%d", i);
        const bool f64 = !strcmp(th_golden_meta(f, c, "dtype"), "f64");
        const char *rs = th_golden_meta(f, c, "red"), *has = th_golden_meta(f, c, "has");
        const bool hw = strchr(has, 'w') != NULL, hp = strchr(has, 'p') != NULL;
        snprintf(what, sizeof what, "%s (%s, %s)", c, rs, has);
        tg_tensor *in[4];
        const char *names[4] = {"x", "t", "w", "p"};
        for (int k = 0; k < 4; k++) in[k] = th_leaf_clone(th_golden_get(f, c, names[k]));
        tg_tensor *y = NULL, *d[4] = {NULL};
        OK(tg_bce_with_logits_weighted(&y, in[0], in[1], hw ? in[2] : NULL, hp ? in[3] : NULL,
                                       th_reduction_of(rs)));
        const double rtol = f64 ? 1e-13 : 1e-5, atol = f64 ? 1e-14 : 1e-6;
        th_expect_near(what, y, th_golden_get(f, c, "y"), rtol, atol);
        tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g");
        tg_tensor *wrt[4] = {in[0], in[1], in[2], in[3]};
        int nw = 2;
        if (hw) wrt[nw++] = in[2];
        if (hp) wrt[nw++] = in[3];
        OK(tg_grad(d, 1, &y, &g, nw, wrt, NULL));
        const char *dn[4] = {"dx", "dt", hw ? "dw" : "dp", "dp"};
        for (int k = 0; k < nw; k++) {
            char w2[112];
            snprintf(w2, sizeof w2, "%s %s", what, dn[k]);
            th_expect_near(w2, d[k], th_golden_get(f, c, dn[k]), rtol, atol);
        }
        for (int k = 0; k < nw; k++) tg_tensor_release(d[k]);
        th_release_all(4, in);
        tg_tensor_release(y);
    }
    cr_assert(n >= 24, "%d cases", n);
    tg_st_free(f);
}

static int bce_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    return tg_bce_with_logits_weighted(out, in[0], in[1], in[2], in[3], TG_REDUCTION_MEAN);
}

Test(bce_logits_weighted, gradcheck_and_gradgradcheck)
{
    uint64_t s = 901;
    tg_tensor *in[4] = {th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, -3, 3),
                        th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, 0, 1),
                        th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 1}, 0.5, 1.5),
                        th_rand_tensor(&s, TG_F64, 1, (int64_t[]){4}, 0.2, 3)};
    for (int k = 0; k < 4; k++) OK(tg_tensor_set_requires_grad(in[k], true));
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    cr_assert(eq(int, tg_gradcheck(bce_fn, NULL, 4, in, &o), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_gradgradcheck(bce_fn, NULL, 4, in, &o), TG_OK), "%s",
              tg_error_message());
    th_release_all(4, in);
}

/* Without weights, the values of tg_bce_with_logits, within rounding. */
Test(bce_logits_weighted, without_weights_is_bce_with_logits)
{
    uint64_t s = 907;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){5, 3}, -8, 8);
    tg_tensor *t = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){5, 3}, 0, 1), *a = NULL, *b = NULL;
    OK(tg_bce_with_logits_weighted(&a, x, t, NULL, NULL, TG_REDUCTION_NONE));
    OK(tg_bce_with_logits(&b, x, t, TG_REDUCTION_NONE));
    th_expect_near("no weights", a, b, 1e-14, 1e-15);
    th_release_all(4, (tg_tensor *[]){x, t, a, b});
}

Test(bce_logits_weighted, refusals_name_the_argument)
{
    tg_tensor *x = th_vec(TG_F32, 3, (double[]){1, 2, 3}, "x", false), *z = NULL;
    tg_tensor *t = th_vec(TG_F32, 3, (double[]){0, 1, 0}, "t", false), *xi = NULL;
    tg_tensor *w2 = th_vec(TG_F32, 2, (double[]){1, 2}, "w2", false);
    const tg_reduction m = TG_REDUCTION_MEAN;
    th_expect_refused(tg_bce_with_logits_weighted(&z, NULL, t, NULL, NULL, m), TG_EINVAL,
                      "input", z);
    th_expect_refused(tg_bce_with_logits_weighted(&z, x, t, w2, NULL, m), TG_ESHAPE, "weight",
                      z);
    th_expect_refused(tg_bce_with_logits_weighted(&z, x, t, NULL, w2, m), TG_ESHAPE,
                      "pos_weight", z);
    th_expect_refused(tg_bce_with_logits_weighted(&z, x, w2, NULL, NULL, m), TG_ESHAPE,
                      "shape", z);
    th_expect_refused(tg_bce_with_logits_weighted(&z, x, t, NULL, NULL,
                                                  TG_REDUCTION_BATCHMEAN), TG_EINVAL,
                      "reduction", z);
    OK(tg_tensor_to_dtype(&xi, x, TG_I64));
    th_expect_refused(tg_bce_with_logits_weighted(&z, x, t, xi, NULL, m), TG_EDTYPE, "weight",
                      z);
    th_release_all(4, (tg_tensor *[]){x, t, w2, xi});
}
