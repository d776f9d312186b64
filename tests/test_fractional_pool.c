/* tests/test_fractional_pool.c - tg_fractional_max_pool against PyTorch's
 * F.fractional_max_pool2d/3d with the same _random_samples: values,
 * indices and gradients bit for bit in f64 and f32 (output_size and
 * output_ratio, batched and unbatched, x with ties and NaNs); the windows
 * by hand; gradcheck and gradgradcheck in f64; the FractionalMaxPoolNd
 * modules (samples from the seed, each forward new ones); the refusals.
 * Goldens: scripts/make_pool_more_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The doubles of "0.5,0.7" into v. */
static void doubles_of(const char *s, double *v)
{
    for (int i = 0; *s; i++) {
        char *end;
        v[i] = strtod(s, &end);
        s = *end == ',' ? end + 1 : end;
    }
}

Test(fractional_pool, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("pool/fractional_max_pool.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per_ns[4] = {0}, ratio = 0, nan = 0;
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", i);
        const int ns = atoi(th_golden_meta(f, c, "ns"));
        int64_t k[3] = {0}, osz[3] = {0};
        double r[3] = {0};
        th_ints_of(th_golden_meta(f, c, "kernel"), k);
        const char *os = th_golden_meta(f, c, "output_size");
        th_ints_of(os, osz);
        doubles_of(th_golden_meta(f, c, "output_ratio"), r);
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x")), *y = NULL, *idx = NULL;
        OK(tg_fractional_max_pool(&y, &idx, x, ns, k, os[0] ? osz : NULL, os[0] ? NULL : r,
                                  (tg_tensor *)th_golden_get(f, c, "samples")));
        th_expect_same_bits(c, x, y, th_golden_get(f, c, "y"));
        th_expect_same_bits(c, x, idx, th_golden_get(f, c, "indices"));
        cr_assert(tg_tensor_requires_grad(idx) == false, "%s", c);
        th_backward_with(y, th_golden_get(f, c, "grad_y"));
        th_expect_close(c, tg_tensor_grad(x), th_golden_get(f, c, "grad_x"), 0);
        per_ns[ns]++;
        ratio += !os[0];
        nan += strcmp(th_golden_meta(f, c, "fill"), "nan") == 0;
        th_release_all(3, (tg_tensor *[]){x, y, idx});
    }
    cr_assert(per_ns[2] >= 24 && per_ns[3] >= 18 && ratio >= 12 && nan >= 16,
              "golden has %d 2-d, %d 3-d, %d ratio, %d NaN cases", per_ns[2], per_ns[3],
              ratio, nan);
    tg_st_free(f);
}

/* 7 -> 3 with kernel 2 and u = 0.5: alpha = 5/2, starts int(1.25) -
 * int(1.25) = 0, int(3.75) - 1 = 2, and 7 - 2 = 5, so windows [0, 2),
 * [2, 4), [5, 7) of x = (1, 5, 2, 0, 3, 9, 4) give (5, 2, 9) at (1, 2, 5);
 * the H axis (extent 1, kernel 1) stays. */
Test(fractional_pool, windows_by_hand)
{
    tg_tensor *x = th_tensor_from(TG_F64, 3, (int64_t[]){1, 1, 7},
                                  (double[]){1, 5, 2, 0, 3, 9, 4});
    tg_tensor *u = th_tensor_from(TG_F64, 3, (int64_t[]){1, 1, 2}, (double[]){0.5, 0.25});
    tg_tensor *y = NULL, *idx = NULL;
    OK(tg_fractional_max_pool(&y, &idx, x, 2, (int64_t[]){1, 2}, (int64_t[]){1, 3}, NULL, u));
    th_expect_shape(y, 3, (int64_t[]){1, 1, 3});
    const double wy[] = {5, 2, 9}, wi[] = {1, 2, 5};
    for (int i = 0; i < 3; i++) {
        cr_assert(eq(dbl, th_at(y, i), wy[i]), "y[%d]", i);
        cr_assert(eq(dbl, th_at(idx, i), wi[i]), "idx[%d]", i);
    }
    th_release_all(4, (tg_tensor *[]){x, u, y, idx});
}

typedef struct fcall {
    int ns, nd;
    int64_t shape[5], k[3], o[3];
} fcall;

static int ffn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const fcall *c = user;
    const int64_t b = c->nd == c->ns + 2 ? c->shape[0] : 1, ch = c->shape[c->nd - c->ns - 1];
    tg_tensor *u = th_seq(TG_F64, 3, (int64_t[]){b, ch, c->ns}, 0.1, 0.9);
    const int rc = tg_fractional_max_pool(out, NULL, in[0], c->ns, c->k, c->o, NULL, u);
    tg_tensor_release(u);
    return rc;
}

/* Distinct values (a permutation), so that no two elements tie and the
 * finite differences do not move a maximum. */
Test(fractional_pool, gradcheck_and_gradgradcheck)
{
    const fcall calls[] = {
        {2, 4, {2, 2, 5, 6}, {2, 2}, {3, 4}},
        {2, 3, {2, 7, 5}, {3, 2}, {4, 3}},
        {3, 5, {1, 2, 4, 5, 4}, {2, 2, 2}, {2, 3, 2}},
    };
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        const fcall *c = &calls[i];
        int64_t n = 1;
        for (int d = 0; d < c->nd; d++) n *= c->shape[d];
        double *v = malloc((size_t)n * sizeof *v);
        for (int64_t e = 0; e < n; e++) v[e] = (double)((e * 37) % n) * 0.01;
        tg_tensor *x = th_tensor_from(TG_F64, c->nd, c->shape, v);
        free(v);
        OK(tg_tensor_set_requires_grad(x, true));
        th_expect_gradchecks(ffn, (void *)c, 1, &x, "call %zu", i);
        tg_tensor_release(x);
    }
}

/* The module draws U[0, 1) samples from its seed: two modules of one seed
 * agree, and their second forward draws new samples (another result on a
 * large enough x); the ratio form gives int(S * ratio). */
Test(fractional_pool, modules)
{
    tg_module *a = NULL, *b = NULL;
    const int64_t k[2] = {2, 2}, o[2] = {5, 5};
    OK(tg_nn_fractional_max_pool_new(&a, 2, k, o, NULL, 42));
    OK(tg_nn_fractional_max_pool_new(&b, 2, k, o, NULL, 42));
    cr_assert(eq(str, (char *)tg_module_type_name(a), "FractionalMaxPool2d"));
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 3, 12, 12}, 7);
    tg_tensor *y1 = NULL, *y2 = NULL, *y3 = NULL;
    OK(tg_module_forward(a, &y1, x));
    OK(tg_module_forward(b, &y2, x));
    OK(tg_module_forward(a, &y3, x));
    th_expect_shape(y1, 4, (int64_t[]){2, 3, 5, 5});
    cr_assert(th_same_bits(y1, y2), "same seed, same samples");
    cr_assert(th_same_bits(y1, y3) == false, "a second forward draws new samples");
    th_release_all(3, (tg_tensor *[]){y1, y2, y3});
    tg_module_release(a);
    tg_module_release(b);

    OK(tg_nn_fractional_max_pool_new(&a, 3, (int64_t[]){2, 2, 2}, NULL,
                                     (double[]){0.5, 0.5, 0.75}, 1));
    cr_assert(eq(str, (char *)tg_module_type_name(a), "FractionalMaxPool3d"));
    tg_tensor *z = th_rand_uniform(TG_F64, 4, (int64_t[]){2, 6, 7, 8}, 8);
    OK(tg_module_forward(a, &y1, z));
    th_expect_shape(y1, 4, (int64_t[]){2, 3, 3, 6});
    tg_module_release(a);
    th_release_all(3, (tg_tensor *[]){x, z, y1});

    cr_assert(eq(int, tg_nn_fractional_max_pool_new(&a, 2, k, NULL, NULL, 1), TG_EINVAL));
    cr_assert(eq(int, tg_nn_fractional_max_pool_new(&a, 2, k, o, (double[]){.5, .5}, 1),
                 TG_EINVAL));
    cr_assert(eq(int, tg_nn_fractional_max_pool_new(&a, 2, k, NULL, (double[]){.5, 1}, 1),
                 TG_EINVAL));
    cr_assert(eq(int, tg_nn_fractional_max_pool_new(&a, 1, k, o, NULL, 1), TG_EINVAL));
}

/* torch's rules: one of output_size and output_ratio; O + K - 1 <= I in
 * 2-d and < I in 3-d; the samples' shape, dtype and range. */
Test(fractional_pool, refusals)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){1, 2, 5, 5}, 1);
    tg_tensor *u = th_seq(TG_F32, 3, (int64_t[]){1, 2, 2}, 0.1, 0.9);
    tg_tensor *u64 = th_seq(TG_F64, 3, (int64_t[]){1, 2, 2}, 0.1, 0.9);
    tg_tensor *u3 = th_seq(TG_F32, 3, (int64_t[]){1, 2, 3}, 0.1, 0.9);
    tg_tensor *ubig = NULL, *x3 = th_rand_uniform(TG_F32, 5, (int64_t[]){1, 2, 5, 5, 5}, 1);
    tg_tensor *i = NULL;
    OK(tg_tensor_full(&ubig, TG_F32, 3, (int64_t[]){1, 2, 2}, 1.0));
    const int64_t k2[2] = {2, 2}, o4[2] = {4, 4};
    tg_tensor *y = NULL;
    OK(tg_fractional_max_pool(&y, NULL, x, 2, k2, o4, NULL, u));   /* 4 + 2 - 1 <= 5 */
    tg_tensor_release(y);
    th_expect_refused_clean(tg_fractional_max_pool(out_, NULL, x, 2, k2, (int64_t[]){5, 4},
                                                   NULL, u), TG_EINVAL, "too large");
    th_expect_refused_clean(tg_fractional_max_pool(out_, NULL, x3, 3, (int64_t[]){2, 2, 2},
                                                   (int64_t[]){4, 3, 3}, NULL, u3),
                            TG_EINVAL, "too large");
    th_expect_refused_clean(tg_fractional_max_pool(out_, NULL, x, 2, k2, NULL, NULL, u),
                            TG_EINVAL, "exactly one");
    th_expect_refused_clean(tg_fractional_max_pool(out_, NULL, x, 2, k2, o4, (double[]){.5, .5},
                                                   u), TG_EINVAL, "exactly one");
    th_expect_refused_clean(tg_fractional_max_pool(out_, NULL, x, 2, k2, NULL,
                                                   (double[]){.5, 1.5}, u), TG_EINVAL,
                            "output_ratio[1]");
    th_expect_refused_clean(tg_fractional_max_pool(out_, NULL, x, 2, k2, o4, NULL, u64),
                            TG_EDTYPE, "_random_samples");
    th_expect_refused_clean(tg_fractional_max_pool(out_, NULL, x, 2, k2, o4, NULL, u3),
                            TG_ESHAPE, "_random_samples");
    th_expect_refused_clean(tg_fractional_max_pool(out_, NULL, x, 2, k2, o4, NULL, ubig),
                            TG_EINVAL, "[0, 1)");
    th_expect_refused_clean(tg_fractional_max_pool(out_, NULL, x, 2, k2, o4, NULL, NULL),
                            TG_EINVAL, "NULL");
    th_expect_refused_clean(tg_fractional_max_pool(out_, NULL, x, 2, (int64_t[]){0, 2}, o4,
                                                   NULL, u), TG_EINVAL, "kernel[0]=0");
    th_expect_refused_clean(tg_fractional_max_pool(out_, NULL, x, 1, k2, o4, NULL, u),
                            TG_EINVAL, "n_spatial");
    th_expect_refused_clean(tg_fractional_max_pool(out_, NULL, x3, 2, k2, o4, NULL, u),
                            TG_ESHAPE, "dims");
    th_expect_refused_clean(tg_fractional_max_pool(out_, out_, x, 2, k2, o4, NULL, u),
                            TG_EINVAL, "two different");
    OK(tg_to_dtype(&i, x, TG_I32));
    th_expect_refused_clean(tg_fractional_max_pool(out_, NULL, i, 2, k2, o4, NULL, u),
                            TG_EDTYPE, "f32 or f64");
    th_release_all(7, (tg_tensor *[]){x, u, u64, u3, ubig, x3, i});
}
