/* tests/test_dropout_channels.c - tg_dropout_channels (F.dropout1d/2d/3d)
 * and the Dropout1d/2d/3d modules: whole channels zeroed at rate p and the
 * rest scaled by 1/(1-p), torch 1.13's channels for every input rank, the
 * gradient (the mask) to second order, the identity in eval or for p = 0,
 * p = 1, bf16, the module's k-th mask being the function's with counter
 * k << 40 (its recomputation and a checkpoint's resumption drawing the
 * same), torch's class names,
 * no state, and the refusals. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* Fails unless y = x * mask with one mask value per channel, each 0 or
 * 1/(1-p), the channels being the first `lead` dims of y; returns the
 * number of zeroed channels.  x is f64 and holds no zero. */
static int64_t expect_channel_mask(const tg_tensor *x, const tg_tensor *y, int lead, double p)
{
    const int nd = tg_tensor_ndim(y);
    int64_t channels = 1, per = 1;
    for (int d = 0; d < nd; d++) *(d < lead ? &channels : &per) *= tg_tensor_shape(y)[d];
    double *xv = th_doubles(x), *yv = th_doubles(y);
    const double scale = 1.0 / (1.0 - p);
    int64_t zeros = 0;
    for (int64_t c = 0; c < channels; c++) {
        const bool zero = yv[c * per] == 0.0;
        for (int64_t e = 0; e < per; e++)
            cr_assert(yv[c * per + e] == (zero ? 0.0 : xv[c * per + e] * scale),
                      "channel %lld element %lld: %g of %g", (long long)c, (long long)e,
                      yv[c * per + e], xv[c * per + e]);
        zeros += zero;
    }
    free(xv);
    free(yv);
    return zeros;
}

/* 2000 channels of 12 elements at p = 0.3: Binomial(2000, 0.3) zeroed
 * channels (sd 20.5, so +-130 is > 6 sd), every channel all zero or all
 * scaled; the draw advances rng's counter. */
Test(dropout_channels, whole_channels_at_rate_p_and_scaled)
{
    tg_tensor *x = th_seq(TG_F64, 4, (const int64_t[]){50, 40, 3, 4}, 1.0, 2.0), *y = NULL;
    tg_rng r = {.seed = 3, .counter = 0};
    OK(tg_dropout_channels(&y, x, 2, 0.3, true, &r));
    cr_assert(r.counter > 0, "the draw advances the counter");
    const int64_t zeros = expect_channel_mask(x, y, 2, 0.3);
    cr_assert(llabs(zeros - 600) < 130, "zeroed channels %lld of 2000", (long long)zeros);
    th_release_all(2, (tg_tensor *[]){x, y});
}

/* The channels of each rank are torch 1.13's: dropout1d (N, C, L) and
 * unbatched (C, L); dropout2d (N, C, ...) for any rank >= 2, a 3-d input
 * read as (N, C, L); dropout3d (N, C, D, H, W), any other rank unbatched
 * with dim 0 the channel. */
Test(dropout_channels, channels_of_every_rank_are_torchs)
{
    static const struct {
        int ns, nd, lead;
    } cases[] = {{1, 2, 1}, {1, 3, 2}, {2, 2, 2}, {2, 3, 2}, {2, 4, 2}, {2, 5, 2},
                 {3, 1, 1}, {3, 3, 1}, {3, 4, 1}, {3, 5, 2}, {3, 6, 1}};
    const int64_t shape[] = {5, 6, 4, 3, 2, 3};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tg_tensor *x = th_seq(TG_F64, cases[i].nd, shape, 0.5, 1.5), *y = NULL;
        tg_rng r = {.seed = 10 + i, .counter = 0}, r2 = r;
        OK(tg_dropout_channels(&y, x, cases[i].ns, 0.5, true, &r));
        th_expect_shape(y, cases[i].nd, shape);
        const int64_t zeros = expect_channel_mask(x, y, cases[i].lead, 0.5);
        int64_t channels = 1;
        for (int d = 0; d < cases[i].lead; d++) channels *= shape[d];
        cr_assert(zeros > 0 && zeros < channels, "case %zu: %lld of %lld channels zeroed", i,
                  (long long)zeros, (long long)channels);
        /* the mask is tg_dropout's of one element per channel, the same draws */
        tg_tensor *ones = NULL, *mask = NULL;
        OK(tg_tensor_full(&ones, TG_F64, cases[i].lead, shape, 1.0));
        OK(tg_dropout(&mask, ones, 0.5, true, &r2));
        const int64_t per = tg_tensor_numel(y) / channels;
        for (int64_t e = 0; e < tg_tensor_numel(y); e++)
            cr_assert(th_at(y, e) == th_at(x, e) * th_at(mask, e / per),
                      "case %zu: y[%lld] is not x times its channel's mask", i, (long long)e);
        th_release_all(4, (tg_tensor *[]){x, y, ones, mask});
    }
}

/* Not training, or p = 0: x itself, nothing drawn (rng may be NULL);
 * p = 1: all zero; bf16 keeps its dtype and scales by 1/(1-p) rounded. */
Test(dropout_channels, identity_p_one_and_bf16)
{
    tg_tensor *x = th_seq(TG_F32, 3, (const int64_t[]){4, 3, 5}, 1.0, 2.0), *y = NULL;
    OK(tg_dropout_channels(&y, x, 1, 0.5, false, NULL));
    cr_assert(y == x, "eval gives x itself");
    tg_tensor_release(y);
    tg_rng r = {.seed = 1, .counter = 0};
    OK(tg_dropout_channels(&y, x, 1, 0.0, true, &r));
    cr_assert(y == x && r.counter == 0, "p = 0 gives x itself and draws nothing");
    tg_tensor_release(y);
    OK(tg_dropout_channels(&y, x, 1, 1.0, true, &r));
    for (int64_t i = 0; i < 60; i++) cr_assert(th_at(y, i) == 0.0, "p = 1: y[%lld]", (long long)i);
    tg_tensor_release(y);
    tg_tensor *xb = NULL;
    OK(tg_to_dtype(&xb, x, TG_BF16));
    OK(tg_dropout_channels(&y, xb, 1, 0.25, true, &r));
    cr_assert(tg_tensor_dtype(y) == TG_BF16);
    for (int64_t i = 0; i < 60; i++) {
        const double want = th_round_to(TG_BF16, th_at(xb, i) * th_round_to(TG_BF16, 4.0 / 3));
        cr_assert(th_at(y, i) == 0.0 || th_at(y, i) == want, "bf16 y[%lld] = %g",
                  (long long)i, th_at(y, i));
    }
    th_release_all(3, (tg_tensor *[]){x, xb, y});
}

/* A fresh generator each call: the same mask, so the function is smooth. */
static int channels_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const int ns = *(const int *)user;
    tg_rng r = {.seed = 21, .counter = 0};
    tg_tensor *d = NULL;
    int rc = tg_dropout_channels(&d, in[0], ns, 0.4, true, &r);
    if (rc >= 0) rc = tg_mul(out, d, in[0]);   /* x * dropout(x): a second derivative */
    tg_tensor_release(d);
    return rc;
}

/* The gradient is g times the mask (the ones gradient gives the mask
 * itself), and gradcheck/gradgradcheck hold in f64. */
Test(dropout_channels, gradient_is_the_mask_to_second_order)
{
    tg_tensor *x = th_rand_uniform(TG_F64, 4, (const int64_t[]){3, 4, 2, 3}, 8), *y = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    tg_rng r = {.seed = 21, .counter = 0};
    OK(tg_dropout_channels(&y, x, 2, 0.4, true, &r));
    tg_tensor *ones = NULL;
    OK(tg_tensor_full(&ones, TG_F64, 4, (const int64_t[]){3, 4, 2, 3}, 1.0));
    th_backward_with(y, ones);
    const tg_tensor *g = tg_tensor_grad(x);
    for (int64_t i = 0; i < 72; i++) {
        const double mask = th_at(y, i) / th_at(x, i);
        cr_assert(fabs(th_at(g, i) - mask) < 1e-12, "grad[%lld] = %g, mask %g", (long long)i,
                  th_at(g, i), mask);
    }
    for (int ns = 1; ns <= 3; ns++) {
        tg_tensor *xs = th_rand_uniform(TG_F64, 3, (const int64_t[]){4, 3, 2}, 40 + ns);
        OK(tg_tensor_set_requires_grad(xs, true));
        tg_tensor *in[1] = {xs};
        OK(tg_gradcheck(channels_fn, &ns, 1, in, NULL));
        OK(tg_gradgradcheck(channels_fn, &ns, 1, in, NULL));
        tg_tensor_release(xs);
    }
    th_release_all(3, (tg_tensor *[]){x, y, ones});
}

/* The modules: torch's class names, no state, the k-th training mask is
 * tg_dropout_channels' with counter k << 40, eval is the identity, and
 * tg_nn_dropout_params reads back n_spatial and p. */
Test(dropout_channels, modules_draw_the_functions_masks)
{
    static const char *const names[] = {"Dropout1d", "Dropout2d", "Dropout3d"};
    tg_tensor *x = th_rand_uniform(TG_F32, 5, (const int64_t[]){3, 8, 2, 3, 2}, 3);
    for (int ns = 1; ns <= 3; ns++) {
        tg_module *d = NULL;
        OK(tg_nn_dropout_channels_new(&d, ns, 0.4, 77));
        cr_assert(strncmp(tg_module_type_name(d), names[ns - 1], 16) == 0);
        cr_assert(eq(int, tg_module_state_count(d), 0));
        int got_ns = -1;
        double p = 0;
        OK(tg_nn_dropout_params(d, &got_ns, &p));
        cr_assert(got_ns == ns && p == 0.4);
        /* Dropout1d takes 2 or 3 dims: (3, 8, 6) */
        tg_tensor *xi = x;
        if (ns == 1) OK(tg_reshape(&xi, x, 3, (const int64_t[]){3, 8, 12}));
        for (uint64_t k = 0; k < 3; k++) {
            tg_tensor *ym = NULL, *yf = NULL;
            tg_rng r = {.seed = 77, .counter = k << 40};
            OK(tg_module_forward(d, &ym, xi));
            OK(tg_dropout_channels(&yf, xi, ns, 0.4, true, &r));
            th_expect_same_bits("module mask", xi, ym, yf);
            th_release_all(2, (tg_tensor *[]){ym, yf});
        }
        tg_module_train(d, false);
        tg_tensor *ye = NULL;
        OK(tg_module_forward(d, &ye, xi));
        cr_assert(ye == xi, "eval is the identity");
        tg_tensor_release(ye);
        if (xi != x) tg_tensor_release(xi);
        tg_module_release(d);
    }
    tg_module *d = NULL;
    OK(tg_nn_dropout_new(&d, 0.25, 1));
    int ns = -1;
    OK(tg_nn_dropout_params(d, &ns, NULL));
    cr_assert(ns == 0, "Dropout's n_spatial is 0");
    tg_module_release(d);
    tg_tensor_release(x);
}

/* tg_module_forward_recompute of a Dropout2d draws the mask of the forward
 * again in the backward: the gradient is the plain forward's. */
Test(dropout_channels, recomputation_draws_the_same_mask)
{
    tg_tensor *x = th_rand_uniform(TG_F64, 4, (const int64_t[]){4, 6, 2, 2}, 5);
    OK(tg_tensor_set_requires_grad(x, true));
    tg_tensor *ones = NULL, *y = NULL, *g1 = NULL;
    OK(tg_tensor_full(&ones, TG_F64, 4, (const int64_t[]){4, 6, 2, 2}, 1.0));
    tg_module *a = NULL, *b = NULL;
    OK(tg_nn_dropout_channels_new(&a, 2, 0.5, 9));
    OK(tg_nn_dropout_channels_new(&b, 2, 0.5, 9));
    OK(tg_module_forward(a, &y, x));
    th_backward_with(y, ones);
    OK(tg_tensor_clone(&g1, tg_tensor_grad(x)));
    tg_tensor_release(y);
    tg_tensor_zero_grad(x);
    OK(tg_module_forward_recompute(b, &y, x));
    th_backward_with(y, ones);
    th_expect_close("recomputed", tg_tensor_grad(x), g1, 0);
    th_release_all(4, (tg_tensor *[]){x, ones, y, g1});
    tg_module_release(a);
    tg_module_release(b);
}

/* Sequential(Dropout2d) whose module made k masks, in a checkpoint slot. */
static tg_module *drawn(tg_checkpoint **ck, int k, const tg_tensor *x)
{
    tg_module *seq = NULL, *d = NULL;
    OK(tg_nn_sequential_new(&seq));
    OK(tg_nn_dropout_channels_new(&d, 2, 0.5, 42));
    OK(tg_nn_sequential_append(seq, d));
    OK(tg_checkpoint_new(ck));
    OK(tg_checkpoint_add_module(*ck, "model", seq));
    for (int i = 0; i < k; i++) {
        tg_tensor *y = NULL;
        OK(tg_module_forward(seq, &y, (tg_tensor *)x));
        tg_tensor_release(y);
    }
    return seq;
}

/* A checkpoint keeps a Dropout2d's count of masks as a Dropout's: a
 * resumed module draws the mask the uninterrupted one would have. */
Test(dropout_channels, a_checkpoint_resumes_the_mask_sequence)
{
    th_tmp_dir_make("tg_dropch_");
    char path[256];
    th_tmp_path(path, sizeof path, "ck.safetensors");
    tg_tensor *x = th_seq(TG_F32, 4, (const int64_t[]){4, 8, 2, 2}, 0.5, 1.5);
    tg_tensor *want = NULL, *got = NULL;
    tg_checkpoint *ck = NULL, *ck2 = NULL;
    tg_module *a = drawn(&ck, 2, x), *b = drawn(&ck2, 0, x);
    OK(tg_checkpoint_save(ck, path, NULL));
    OK(tg_module_forward(a, &want, x));   /* mask 2 */
    OK(tg_checkpoint_load(ck2, path));
    OK(tg_module_forward(b, &got, x));
    th_expect_same_bits("resumed mask", x, got, want);
    tg_st_file *f = NULL;
    OK(tg_safetensors_load(&f, path));
    const char *calls = tg_st_meta_get(f, "model.0.dropout_calls");
    cr_assert(calls && strcmp(calls, "2") == 0, "model.0.dropout_calls is %s",
              calls ? calls : "missing");
    tg_st_free(f);
    tg_checkpoint_free(ck);
    tg_checkpoint_free(ck2);
    tg_module_release(a);
    tg_module_release(b);
    th_release_all(3, (tg_tensor *[]){x, want, got});
    th_tmp_dir_remove();
}

Test(dropout_channels, refusals_name_the_argument_and_the_rule)
{
    tg_tensor *x = th_seq(TG_F32, 4, (const int64_t[]){2, 3, 4, 5}, 0, 1), *y = NULL;
    tg_rng r = {.seed = 1, .counter = 0};
    th_expect_refused(tg_dropout_channels(NULL, x, 2, 0.5, true, &r), TG_EINVAL,
                      "dropout_channels: out must not be NULL", y);
    th_expect_refused(tg_dropout_channels(&y, NULL, 2, 0.5, true, &r), TG_EINVAL,
                      "dropout_channels: x must not be NULL", y);
    th_expect_refused(tg_dropout_channels(&y, x, 0, 0.5, true, &r), TG_EINVAL,
                      "dropout_channels: n_spatial=0 must be 1, 2 or 3", y);
    th_expect_refused(tg_dropout_channels(&y, x, 4, 0.5, true, &r), TG_EINVAL,
                      "n_spatial=4 must be 1, 2 or 3", y);
    th_expect_refused(tg_dropout_channels(&y, x, 2, 1.5, true, &r), TG_EINVAL,
                      "dropout_channels: p=1.5 must be in [0, 1]", y);
    th_expect_refused(tg_dropout_channels(&y, x, 2, NAN, true, &r), TG_EINVAL,
                      "must be in [0, 1]", y);
    th_expect_refused(tg_dropout_channels(&y, x, 2, -0.1, false, &r), TG_EINVAL,
                      "must be in [0, 1]", y);
    th_expect_refused(tg_dropout_channels(&y, x, 2, 0.5, true, NULL), TG_EINVAL,
                      "rng must not be NULL when training with p > 0", y);
    th_expect_refused(tg_dropout_channels(&y, x, 1, 0.5, true, &r), TG_ESHAPE,
                      "dropout1d: x has 4 dims; it must be (N, C, L) or (C, L)", y);
    tg_tensor *v = th_seq(TG_F32, 1, (const int64_t[]){5}, 0, 1), *s = NULL, *xi = NULL;
    th_expect_refused(tg_dropout_channels(&y, v, 2, 0.5, true, &r), TG_ESHAPE,
                      "dropout2d: x has 1 dims; it must have at least 2", y);
    th_expect_refused(tg_dropout_channels(&y, v, 1, 0.5, true, &r), TG_ESHAPE,
                      "dropout1d: x has 1 dims", y);
    OK(tg_tensor_full(&s, TG_F32, 0, NULL, 1.0));
    th_expect_refused(tg_dropout_channels(&y, s, 3, 0.5, true, &r), TG_ESHAPE,
                      "dropout3d: x has 0 dims", y);
    OK(tg_tensor_full(&xi, TG_I32, 2, (const int64_t[]){2, 3}, 1.0));
    th_expect_refused(tg_dropout_channels(&y, xi, 1, 0.5, true, &r), TG_EDTYPE,
                      "dropout_channels: x has dtype i32; float dtypes only", y);
    cr_assert(r.counter == 0, "a refused call draws nothing");
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_dropout_channels_new(NULL, 2, 0.5, 1), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_dropout_channels_new: out must not be NULL");
    cr_assert(eq(int, tg_nn_dropout_channels_new(&m, 0, 0.5, 1), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_dropout_channels_new: n_spatial=0 must be 1, 2 or 3");
    cr_assert(eq(int, tg_nn_dropout_channels_new(&m, 2, 2.0, 1), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_dropout_channels_new: p=2 must be in [0, 1]");
    cr_assert(m == NULL);
    /* the module's forward refuses what the function refuses */
    OK(tg_nn_dropout_channels_new(&m, 1, 0.5, 1));
    th_expect_refused(tg_module_forward(m, &y, x), TG_ESHAPE, "dropout1d: x has 4 dims", y);
    tg_module *lin = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 1);
    OK(tg_nn_linear_new(&lin, 2, 2, true, &rng));
    cr_assert(eq(int, tg_nn_dropout_params(lin, NULL, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(),
                 "nn_dropout_params: m is a Linear module, not Dropout or Dropout1d/2d/3d");
    tg_module_release(lin);
    tg_module_release(m);
    th_release_all(4, (tg_tensor *[]){x, v, s, xi});
}
