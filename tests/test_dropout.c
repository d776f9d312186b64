/* tests/test_dropout.c - tg_dropout (F.dropout): the mask's values and
 * rate, its dependence on (seed, counter) alone and the counter it
 * advances, the Dropout module's k-th mask being tg_dropout's with counter
 * k << 40, the gradient (the mask) to second order, the identity when not
 * training or p = 0, p = 1, halves, and the refusals. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

Test(dropout, mask_values_rate_and_counter)
{
    tg_tensor *x = NULL, *y = NULL, *y2 = NULL, *y3 = NULL;
    OK(tg_tensor_full(&x, TG_F64, 2, (int64_t[]){100, 200}, 2.0));
    tg_rng r = {.seed = 5, .counter = 0}, r2 = r;
    OK(tg_dropout(&y, x, 0.25, true, &r));
    cr_assert(r.counter > 0, "the draw advances the counter");
    const uint64_t used = r.counter;
    OK(tg_dropout(&y2, x, 0.25, true, &r2));   /* the same (seed, counter) */
    OK(tg_dropout(&y3, x, 0.25, true, &r2));   /* the next counter */
    cr_assert(eq(u64, r2.counter, 2 * used));
    double *v = th_doubles(y), *v2 = th_doubles(y2), *v3 = th_doubles(y3);
    int64_t zeros = 0, same = 0;
    for (int64_t i = 0; i < 20000; i++) {
        cr_assert(v[i] == 0.0 || v[i] == 2.0 / 0.75, "y[%lld] = %g", (long long)i, v[i]);
        cr_assert(v[i] == v2[i], "same (seed, counter), same mask at %lld", (long long)i);
        zeros += v[i] == 0.0;
        same += v3[i] == v[i];
    }
    /* Binomial(20000, 0.25): sd 61, so +-400 is > 6 sd */
    cr_assert(llabs(zeros - 5000) < 400, "zeros %lld", (long long)zeros);
    cr_assert(same < 19000, "the next counter draws another mask");
    free(v);
    free(v2);
    free(v3);
    th_release_all(4, (tg_tensor *[]){x, y, y2, y3});
}

/* The module's k-th training forward is tg_dropout with counter k << 40. */
Test(dropout, module_masks_are_the_functions)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){8, 33}, 3);
    tg_module *d = NULL;
    OK(tg_nn_dropout_new(&d, 0.4, 77));
    for (uint64_t k = 0; k < 3; k++) {
        tg_tensor *ym = NULL, *yf = NULL;
        tg_rng r = {.seed = 77, .counter = k << 40};
        OK(tg_module_forward(d, &ym, x));
        OK(tg_dropout(&yf, x, 0.4, true, &r));
        th_expect_same_bits("module mask", x, ym, yf);
        th_release_all(2, (tg_tensor *[]){ym, yf});
    }
    tg_module_release(d);
    tg_tensor_release(x);
}

/* A fresh generator each call: the same mask, so the function is smooth. */
static int dropout_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    tg_rng r = {.seed = 11, .counter = 0};
    tg_tensor *d = NULL;
    int rc = tg_dropout(&d, in[0], 0.5, true, &r);
    if (rc >= 0) rc = tg_mul(out, d, in[0]);   /* x * dropout(x): a second derivative */
    tg_tensor_release(d);
    return rc;
}

Test(dropout, gradient_is_the_mask_to_second_order)
{
    uint64_t s = 9;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){4, 5}, -1, 1), *y = NULL, *g = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    OK(tg_gradcheck(dropout_fn, NULL, 1, &x, &o));
    OK(tg_gradgradcheck(dropout_fn, NULL, 1, &x, &o));
    tg_rng r = {.seed = 11, .counter = 0};
    OK(tg_dropout(&y, x, 0.5, true, &r));
    OK(tg_tensor_full(&g, TG_F64, 2, (int64_t[]){4, 5}, 1.0));
    OK(tg_backward(y, g, NULL));   /* sum(y): dx is the mask, y / x */
    for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 5; j++) {
            const int64_t at[2] = {i, j};
            const double m = th_get(y, at) / th_get(x, at);
            cr_assert(m == 0.0 || fabs(m - 2.0) < 1e-12, "mask %g", m);
            cr_assert(eq(dbl, th_get(tg_tensor_grad(x), at), m == 0.0 ? 0.0 : 2.0));
        }
    th_release_all(3, (tg_tensor *[]){x, y, g});
}

Test(dropout, identity_all_zero_and_halves)
{
    tg_tensor *x = th_rand_uniform(TG_BF16, 1, (int64_t[]){4096}, 5), *y = NULL;
    tg_rng r = {.seed = 1, .counter = 0};
    OK(tg_dropout(&y, x, 0.5, false, NULL));
    cr_assert(y == x, "not training: x itself");
    tg_tensor_release(y);
    OK(tg_dropout(&y, x, 0.0, true, &r));
    cr_assert(y == x && r.counter == 0, "p = 0: x itself, nothing drawn");
    tg_tensor_release(y);
    OK(tg_dropout(&y, x, 1.0, true, &r));
    double *v = th_doubles(y);
    for (int i = 0; i < 4096; i++) cr_assert(v[i] == 0.0, "p = 1 zeroes everything");
    free(v);
    tg_tensor_release(y);
    OK(tg_dropout(&y, x, 0.5, true, &r));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_BF16));
    v = th_doubles(y);
    double *xv = th_doubles(x);
    int zeros = 0;
    for (int i = 0; i < 4096; i++) {
        cr_assert(v[i] == 0.0 || v[i] == (double)(float)(2 * xv[i]) || v[i] == 2 * xv[i]);
        zeros += v[i] == 0.0 && xv[i] != 0.0;
    }
    cr_assert(zeros > 1700 && zeros < 2400, "zeros %d of 4096 at p = 0.5", zeros);
    free(v);
    free(xv);
    th_release_all(2, (tg_tensor *[]){x, y});
}

Test(dropout, refusals_name_the_argument)
{
    tg_tensor *x = th_arange(TG_F32, 1, (int64_t[]){4});
    tg_tensor *xi = th_arange(TG_I64, 1, (int64_t[]){4});
    tg_tensor *y = NULL;
    tg_rng r = {.seed = 1, .counter = 0};
    th_expect_refused(tg_dropout(NULL, x, 0.5, true, &r), TG_EINVAL, "out", NULL);
    th_expect_refused(tg_dropout(&y, NULL, 0.5, true, &r), TG_EINVAL, "x", y);
    th_expect_refused(tg_dropout(&y, x, 1.5, true, &r), TG_EINVAL, "p=1.5", y);
    th_expect_refused(tg_dropout(&y, x, NAN, true, &r), TG_EINVAL, "p=nan", y);
    th_expect_refused(tg_dropout(&y, x, 0.5, true, NULL), TG_EINVAL, "rng", y);
    th_expect_refused(tg_dropout(&y, xi, 0.5, false, &r), TG_EDTYPE, "i64", y);
    cr_assert(eq(u64, r.counter, 0), "a refused call draws nothing");
    th_release_all(2, (tg_tensor *[]){x, xi});
}
