/* tests/test_nll_loss.c - nll_loss: values and gradients against PyTorch
 * 1.13 (tests/golden/softmax.safetensors, scripts/make_softmax_goldens.py)
 * in f64, f32 and bf16, the empty batch, gradcheck and gradgradcheck in f64
 * (after log_softmax and on its own), cross_entropy as log_softmax followed
 * by nll_loss, autocast, and the errors that name the argument. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "softmax_fixtures.h"
#include "tapegrad/tapegrad.h"

/* ---- nll_loss ------------------------------------------------------------------ */

static const char *const RED_NAMES[3] = {"mean", "sum", "none"};
static const tg_reduction REDS[3] = {TG_REDUCTION_MEAN, TG_REDUCTION_SUM, TG_REDUCTION_NONE};

Test(nll_loss, values_and_gradients_match_pytorch)
{
    tg_st_file *f = th_golden_load("softmax.safetensors");
    char cases[512];
    snprintf(cases, sizeof cases, "%s", tg_st_meta_get(f, "nll_cases"));
    int checked = 0;
    for (char *save, *name = strtok_r(cases, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        char key[96];
        snprintf(key, sizeof key, "%s.ignore_index", name);
        const int64_t ii = atoll(tg_st_meta_get(f, key));
        snprintf(key, sizeof key, "%s.weight", name);
        const bool weighted = strcmp(tg_st_meta_get(f, key), "1") == 0;
        tg_tensor *lp0 = golden(f, "nll.%s.logp", name, "", ""),
                  *t = golden(f, "nll.%s.target", name, "", ""),
                  *w = weighted ? golden(f, "nll.%s.weight", name, "", "") : NULL;
        const double tol = tol_of(tg_tensor_dtype(lp0));
        for (int r = 0; r < 3; r++) {
            tg_tensor *lp = leaf_clone(lp0), *v = NULL;
            OK(tg_nll_loss(&v, lp, t, w, REDS[r], ii));
            char what[96];
            snprintf(what, sizeof what, "%s %s value", name, RED_NAMES[r]);
            th_expect_close(what, v, golden(f, "nll.%s.%s.value", name, RED_NAMES[r], ""), tol);
            OK(tg_backward(v, golden(f, "nll.%s.%s.gout", name, RED_NAMES[r], ""), NULL));
            snprintf(what, sizeof what, "%s %s grad", name, RED_NAMES[r]);
            th_expect_close(what, tg_tensor_grad(lp),
                            golden(f, "nll.%s.%s.grad", name, RED_NAMES[r], ""), tol);
            th_release_all(2, (tg_tensor *[]){v, lp});
            checked++;
        }
    }
    cr_assert(checked >= 39, "only %d cases", checked);
    tg_st_free(f);
}

/* As torch 1.13: an empty batch is NaN for mean, 0 for sum, empty for
 * none; so is a batch without classes whose targets are all ignored. */
Test(nll_loss, empty_batch_as_torch)
{
    const int64_t lshapes[2][2] = {{0, 4}, {2, 0}}, tshapes[2] = {0, 2};
    for (int k = 0; k < 2; k++) {
        tg_tensor *lp = NULL, *t = NULL;
        OK(tg_tensor_zeros(&lp, TG_F32, 2, lshapes[k]));
        OK(tg_tensor_full(&t, TG_I64, 1, &tshapes[k], -100));
        OK(tg_tensor_set_requires_grad(lp, true));
        for (int r = 0; r < 3; r++) {
            tg_tensor *v = NULL, *s = NULL;
            OK(tg_nll_loss(&v, lp, t, NULL, REDS[r], TG_IGNORE_INDEX_DEFAULT));
            if (r == 0) cr_assert(isnan(th_at(v, 0)), "mean %g", th_at(v, 0));
            if (r == 1) cr_assert(eq(dbl, th_at(v, 0), 0.0));
            if (r == 2) th_expect_shape(v, 1, &tshapes[k]);
            OK(tg_sum(&s, v));
            OK(tg_backward(s, NULL, NULL));
            th_expect_shape(tg_tensor_grad(lp), 2, lshapes[k]);
            th_release_all(2, (tg_tensor *[]){v, s});
        }
        th_release_all(2, (tg_tensor *[]){lp, t});
    }
}

typedef struct {
    tg_tensor *target, *weight;
    tg_reduction red;
    int64_t ignore_index;
} nll_user;

/* nll_loss(log_softmax(x)): nonlinear in x, so that gradgradcheck sees the
 * backward of nll_loss_backward (its output's gradient through the
 * log_softmax) as well as its own. */
static int g_nll(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const nll_user *u = user;
    tg_tensor *lp;
    TG_TRY(tg_log_softmax(&lp, in[0], 1));
    int rc = tg_nll_loss(out, lp, u->target, u->weight, u->red, u->ignore_index);
    tg_tensor_release(lp);
    return rc;
}

static int g_nll_direct(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const nll_user *u = user;
    return tg_nll_loss(out, in[0], u->target, u->weight, u->red, u->ignore_index);
}

Test(nll_loss, gradcheck_and_gradgradcheck_in_f64)
{
    tg_tensor *x2 = th_rand_uniform(TG_F64, 2, (int64_t[]){4, 3}, 21);
    tg_tensor *x4 = th_rand_uniform(TG_F64, 4, (int64_t[]){2, 3, 2, 2}, 22);
    tg_tensor *t2 = th_tensor_from(TG_I64, 1, (int64_t[]){4}, (double[]){2, -100, 0, 2});
    tg_tensor *t4 = th_tensor_from(TG_I64, 3, (int64_t[]){2, 2, 2},
                                   (double[]){0, 1, 2, 1, 1, 1, 0, 2});
    tg_tensor *w = th_tensor_from(TG_F64, 1, (int64_t[]){3}, (double[]){0.5, 2, 1.5});
    OK(tg_tensor_set_requires_grad(x2, true));
    OK(tg_tensor_set_requires_grad(x4, true));
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 4; k++) {
            /* 2-d with -100 ignored; 4-d with class 1 ignored; each with and without weights */
            nll_user u = {k < 2 ? t2 : t4, k % 2 ? w : NULL, REDS[r], k < 2 ? -100 : 1};
            tg_tensor **x = k < 2 ? &x2 : &x4;
            OK(tg_gradcheck(g_nll, &u, 1, x, NULL));
            OK(tg_gradgradcheck(g_nll, &u, 1, x, NULL));
            OK(tg_gradcheck(g_nll_direct, &u, 1, x, NULL));
            OK(tg_gradgradcheck(g_nll_direct, &u, 1, x, NULL));
        }
    th_release_all(5, (tg_tensor *[]){x2, x4, t2, t4, w});
}

/* cross_entropy is log_softmax followed by nll_loss. */
Test(nll_loss, after_log_softmax_is_cross_entropy)
{
    tg_tensor *x = th_rand_uniform(TG_F64, 2, (int64_t[]){5, 4}, 31);
    tg_tensor *t = th_tensor_from(TG_I64, 1, (int64_t[]){5}, (double[]){3, 0, 1, 1, 2});
    OK(tg_tensor_set_requires_grad(x, true));
    for (int r = 0; r < 3; r++) {
        tg_tensor *lp, *a, *b, *ga, *gb;
        OK(tg_log_softmax(&lp, x, -1));
        OK(tg_nll_loss(&a, lp, t, NULL, REDS[r], TG_IGNORE_INDEX_DEFAULT));
        OK(tg_cross_entropy(&b, x, t, REDS[r]));
        th_expect_close(RED_NAMES[r], a, b, 1e-15);
        tg_tensor *ones = NULL;
        OK(tg_tensor_full(&ones, TG_F64, tg_tensor_ndim(a), tg_tensor_shape(a), 1.0));
        OK(tg_grad(&ga, 1, &a, &ones, 1, &x, NULL));
        OK(tg_grad(&gb, 1, &b, &ones, 1, &x, NULL));
        th_expect_close(RED_NAMES[r], ga, gb, 1e-15);
        th_release_all(6, (tg_tensor *[]){lp, a, b, ga, gb, ones});
    }
    th_release_all(2, (tg_tensor *[]){x, t});
}

/* FP32, as torch's autocast: a bf16 logp gives an f32 loss, its gradient
 * comes back in bf16. */
Test(nll_loss, autocast_computes_in_f32)
{
    tg_tensor *lp = th_rand_uniform(TG_BF16, 2, (int64_t[]){3, 4}, 41), *v;
    tg_tensor *t = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){0, 3, 1});
    tg_tensor *w = th_tensor_from(TG_BF16, 1, (int64_t[]){4}, (double[]){1, 2, 3, 4});
    OK(tg_tensor_set_requires_grad(lp, true));
    OK(tg_autocast_begin(TG_BF16));
    OK(tg_nll_loss(&v, lp, t, w, TG_REDUCTION_MEAN, TG_IGNORE_INDEX_DEFAULT));
    OK(tg_autocast_end());
    cr_assert(eq(int, tg_tensor_dtype(v), TG_F32));
    OK(tg_backward(v, NULL, NULL));
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(lp)), TG_BF16));
    th_release_all(4, (tg_tensor *[]){lp, t, w, v});
}

Test(nll_loss, bad_arguments_name_the_rule)
{
    tg_tensor *lp = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 4}, 1), *v = NULL;
    tg_tensor *lp4 = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 4, 2, 2}, 2);
    tg_tensor *t = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){0, 4, 1});
    tg_tensor *tn = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){0, 1, -1});
    tg_tensor *tf = th_tensor_from(TG_F32, 1, (int64_t[]){3}, (double[]){0, 1, 1});
    tg_tensor *t2 = th_tensor_from(TG_I64, 1, (int64_t[]){2}, (double[]){0, 1});
    tg_tensor *t4 = th_tensor_from(TG_I64, 3, (int64_t[]){2, 2, 2},
                                   (double[]){0, 1, 2, 3, 3, 2, 1, 7});
    tg_tensor *w3 = th_tensor_from(TG_F32, 1, (int64_t[]){3}, (double[]){1, 1, 1});
    tg_tensor *wi = th_tensor_from(TG_I64, 1, (int64_t[]){4}, (double[]){1, 1, 1, 1});
    tg_tensor *s = NULL;
    OK(tg_tensor_scalar(&s, TG_F32, 1.0));
    const tg_reduction M = TG_REDUCTION_MEAN;
    const int64_t II = TG_IGNORE_INDEX_DEFAULT;
    OK(tg_tensor_set_requires_grad(lp, true));
    cr_assert(eq(int, tg_nll_loss(&v, lp, t, NULL, M, II), TG_EINVAL));
    th_expect_in(tg_error_message(), "nll_loss: target[1]=4 must be a class in [0, 4) or "
                                     "ignore_index=-100");
    cr_assert(eq(int, tg_nll_loss(&v, lp, tn, NULL, M, II), TG_EINVAL));
    th_expect_in(tg_error_message(), "target[2]=-1 must be a class");
    OK(tg_nll_loss(&v, lp, tn, NULL, M, -1));   /* -1 is then the ignored index */
    tg_tensor_release(v);
    v = NULL;
    cr_assert(eq(int, tg_nll_loss(&v, lp4, t4, NULL, M, II), TG_EINVAL));
    th_expect_in(tg_error_message(), "nll_loss: target[1, 1, 1]=7 must be a class in [0, 4)");
    cr_assert(eq(int, tg_nll_loss(&v, lp, tf, NULL, M, II), TG_EDTYPE));
    th_expect_in(tg_error_message(), "nll_loss: target has dtype f32; it must be i64");
    cr_assert(eq(int, tg_nll_loss(&v, lp, t2, NULL, M, II), TG_ESHAPE));
    th_expect_in(tg_error_message(), "nll_loss: target has shape (2); for logp (3, 4) it must "
                                     "be (3)");
    cr_assert(eq(int, tg_nll_loss(&v, lp4, t, NULL, M, II), TG_ESHAPE));
    th_expect_in(tg_error_message(), "for logp (2, 4, 2, 2) it must be (2, 2, 2)");
    cr_assert(eq(int, tg_nll_loss(&v, lp, t2, w3, M, II), TG_ESHAPE));
    cr_assert(eq(int, tg_nll_loss(&v, lp, t, w3, M, II), TG_ESHAPE));
    th_expect_in(tg_error_message(), "nll_loss: weight has shape (3); it must be (C) = (4)");
    cr_assert(eq(int, tg_nll_loss(&v, lp, t, wi, M, II), TG_EDTYPE));
    th_expect_in(tg_error_message(), "nll_loss: weight has dtype i64; float dtypes only");
    cr_assert(eq(int, tg_nll_loss(&v, t, t, NULL, M, II), TG_EDTYPE));
    th_expect_in(tg_error_message(), "nll_loss: logp has dtype i64; float dtypes only");
    cr_assert(eq(int, tg_nll_loss(&v, s, t, NULL, M, II), TG_ESHAPE));
    th_expect_in(tg_error_message(), "nll_loss: logp is 0-d");
    cr_assert(eq(int, tg_nll_loss(&v, lp, t, NULL, (tg_reduction)7, II), TG_EINVAL));
    th_expect_in(tg_error_message(), "nll_loss: reduction=7 must be MEAN, SUM or NONE");
    cr_assert(eq(int, tg_nll_loss(&v, NULL, t, NULL, M, II), TG_EINVAL));
    th_expect_in(tg_error_message(), "nll_loss: logp must not be NULL");
    cr_assert(eq(int, tg_nll_loss(&v, lp, NULL, NULL, M, II), TG_EINVAL));
    th_expect_in(tg_error_message(), "nll_loss: target must not be NULL");
    cr_assert(eq(int, tg_nll_loss(NULL, lp, t2, NULL, M, II), TG_EINVAL));
    /* the class weights get no gradient: a weight that requires one is refused */
    tg_tensor *wg = th_tensor_from(TG_F32, 1, (int64_t[]){4}, (double[]){1, 2, 3, 4});
    tg_tensor *t3 = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){0, 3, 1});
    OK(tg_tensor_set_requires_grad(wg, true));
    cr_assert(eq(int, tg_nll_loss(&v, lp, t3, wg, M, II), TG_EINVAL));
    th_expect_in(tg_error_message(), "nll_loss: weight requires grad");
    cr_assert(v == NULL, "an error left a result");
    cr_assert(tg_tensor_grad(lp) == NULL);
    th_release_all(13, (tg_tensor *[]){lp, lp4, t, tn, tf, t2, t4, w3, wi, s, wg, t3, NULL});
}
