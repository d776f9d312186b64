/* tests/test_random.c - the Philox random fills: known answers,
 * reproducibility per seed, the counter, moments of the uniform and normal
 * fills, narrow dtypes, views and errors. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/ops.h"

/* Known-answer vectors published with Random123 (kat_vectors, philox4x32_10). */
Test(random, philox_known_answers)
{
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
         0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
         0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1},
    };
    for (int k = 0; k < 3; k++) {
        uint32_t out[4];
        tg__philox4x32_10(&kat[k][0], &kat[k][4], out);
        for (int j = 0; j < 4; j++) cr_assert(eq(u32, out[j], kat[k][6 + j]), "vector %d word %d", k, j);
    }
}

static tg_tensor *rand_vec(tg_dtype dt, int64_t n, uint64_t seed, bool normal)
{
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&t, dt, 1, &n), TG_OK));
    tg_rng rng;
    tg_rng_init(&rng, seed);
    int rc = normal ? tg_tensor_rand_normal(t, &rng, 0.0, 1.0) : tg_tensor_rand_uniform(t, &rng, 0.0, 1.0);
    cr_assert(eq(int, rc, TG_OK));
    return t;
}

Test(random, random_fills_refuse_integer_dtypes)
{
    static const tg_dtype ints[] = {TG_I8, TG_U8, TG_I32, TG_I64};
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
        tg_tensor *t = NULL;
        cr_assert(eq(int, tg_tensor_full(&t, ints[k], 1, (int64_t[]){3}, 5.0), TG_OK));
        tg_rng rng;
        tg_rng_init(&rng, 1);
        cr_assert(eq(int, tg_tensor_rand_uniform(t, &rng, 0.0, 10.0), TG_EINVAL));
        th_expect_in(tg_error_message(), "only float dtypes");
        cr_assert(eq(int, tg_tensor_rand_normal(t, &rng, 0.0, 1.0), TG_EINVAL));
        th_expect_in(tg_error_message(), tg_dtype_name(ints[k]));
        for (int i = 0; i < 3; i++) cr_assert(eq(dbl, th_at(t, i), 5.0));   /* unchanged */
        cr_assert(eq(u64, tg_tensor_version(t), 0));
        cr_assert(eq(u64, rng.counter, 0));
        tg_tensor_release(t);
    }
}

Test(random, random_is_reproducible_per_seed)
{
    tg_tensor *a = rand_vec(TG_F64, 101, 7, false), *b = rand_vec(TG_F64, 101, 7, false);
    tg_tensor *c = rand_vec(TG_F64, 101, 8, false);
    int differ = 0;
    for (int i = 0; i < 101; i++) {
        cr_assert(eq(dbl, th_at(a, i), th_at(b, i)));
        differ += th_at(a, i) != th_at(c, i);
    }
    cr_assert(differ > 95, "only %d of 101 draws differ", differ);
    tg_tensor_release(a);
    tg_tensor_release(b);
    tg_tensor_release(c);
}

Test(random, random_counter_advances)
{
    tg_tensor *t = NULL, *u = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&t, TG_F64, 1, (int64_t[]){5}), TG_OK));
    cr_assert(eq(int, tg_tensor_zeros(&u, TG_F64, 1, (int64_t[]){5}), TG_OK));
    tg_rng rng;
    tg_rng_init(&rng, 3);
    cr_assert(eq(int, tg_tensor_rand_uniform(t, &rng, 0, 1), TG_OK));
    cr_assert(eq(u64, rng.counter, 3));   /* 5 values, two per block */
    cr_assert(eq(int, tg_tensor_rand_uniform(u, &rng, 0, 1), TG_OK));
    cr_assert(ne(dbl, th_at(t, 0), th_at(u, 0)));
    /* A second stream started at counter 3 reproduces u. */
    tg_rng again = {.seed = 3, .counter = 3};
    cr_assert(eq(int, tg_tensor_rand_uniform(t, &again, 0, 1), TG_OK));
    for (int i = 0; i < 5; i++) cr_assert(eq(dbl, th_at(t, i), th_at(u, i)));
    /* tg_rng_uniform is the first value of a block and uses one block. */
    tg_rng one = {.seed = 3, .counter = 0}, two = {.seed = 3, .counter = 0};
    double x = tg_rng_uniform(&one);
    cr_assert(eq(u64, one.counter, 1));
    cr_assert(eq(int, tg_tensor_rand_uniform(t, &two, 0, 1), TG_OK));
    cr_assert(eq(dbl, x, th_at(t, 0)));
    cr_assert(ge(dbl, x, 0.0));
    cr_assert(lt(dbl, x, 1.0));
    tg_tensor_release(t);
    tg_tensor_release(u);
}

Test(random, uniform_moments)
{
    enum { N = 100000 };
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&t, TG_F64, 1, (int64_t[]){N}), TG_OK));
    tg_rng rng;
    tg_rng_init(&rng, 2024);
    cr_assert(eq(int, tg_tensor_rand_uniform(t, &rng, -2.0, 4.0), TG_OK));
    const double *x = tg_tensor_cdata(t);
    double sum = 0, sq = 0;
    for (int i = 0; i < N; i++) {
        cr_assert(x[i] >= -2.0 && x[i] < 4.0);
        sum += x[i];
    }
    double mean = sum / N;
    for (int i = 0; i < N; i++) sq += (x[i] - mean) * (x[i] - mean);
    /* U[-2, 4): mean 1, variance 6^2 / 12 = 3; the standard error of the
     * mean is sqrt(3 / N) ~ 0.0055, of the variance ~ 0.012. */
    cr_assert(epsilon_eq(dbl, mean, 1.0, 0.03));
    cr_assert(epsilon_eq(dbl, sq / (N - 1), 3.0, 0.06));
    tg_tensor_release(t);
}

/* Rounding to a narrow dtype must not produce hi: in f16 every u above
 * 1 - 2^-12 would round to 1.0, so 100k draws would hit it ~24 times. */
Test(random, uniform_excludes_hi_in_narrow_dtypes)
{
    static const tg_dtype dts[] = {TG_F16, TG_BF16, TG_F32};
    static const double los[] = {0.0, -1.0}, his[] = {1.0, 3.0};
    for (int d = 0; d < 3; d++)
        for (int r = 0; r < 2; r++) {
            tg_tensor *t = NULL;
            cr_assert(eq(int, tg_tensor_zeros(&t, dts[d], 1, (int64_t[]){100000}), TG_OK));
            tg_rng rng;
            tg_rng_init(&rng, 11);
            cr_assert(eq(int, tg_tensor_rand_uniform(t, &rng, los[r], his[r]), TG_OK));
            double *x = malloc(100000 * sizeof *x);
            cr_assert(eq(int, tg_tensor_to_doubles(t, x, 100000), TG_OK));
            double mx = -INFINITY, mn = INFINITY;
            for (int i = 0; i < 100000; i++) {
                mx = x[i] > mx ? x[i] : mx;
                mn = x[i] < mn ? x[i] : mn;
            }
            cr_assert(lt(dbl, mx, his[r]), "%s: max %g", tg_dtype_name(dts[d]), mx);
            cr_assert(ge(dbl, mn, los[r]), "%s: min %g", tg_dtype_name(dts[d]), mn);
            cr_assert(mx > his[r] - 0.02, "%s: max %g", tg_dtype_name(dts[d]), mx); /* bf16 steps by 2^-6 near 3 */
            free(x);
            tg_tensor_release(t);
        }
}

Test(random, normal_moments)
{
    enum { N = 100000 };
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&t, TG_F32, 1, (int64_t[]){N}), TG_OK));
    tg_rng rng;
    tg_rng_init(&rng, 99);
    cr_assert(eq(int, tg_tensor_rand_normal(t, &rng, 2.0, 3.0), TG_OK));
    const float *x = tg_tensor_cdata(t);
    double sum = 0, sq = 0, m4 = 0;
    for (int i = 0; i < N; i++) sum += x[i];
    double mean = sum / N;
    for (int i = 0; i < N; i++) {
        double c = (x[i] - mean) / 3.0;
        sq += c * c;
        m4 += c * c * c * c;
    }
    /* N(2, 9): standard error of the mean 3 / sqrt(N) ~ 0.0095; the
     * standardised kurtosis of a normal is 3. */
    cr_assert(epsilon_eq(dbl, mean, 2.0, 0.05));
    cr_assert(epsilon_eq(dbl, 3.0 * sqrt(sq / (N - 1)), 3.0, 0.05));
    cr_assert(epsilon_eq(dbl, m4 / N, 3.0, 0.15));
    tg_tensor_release(t);
}

Test(random, random_fills_views_in_logical_order)
{
    tg_tensor *base = NULL, *ref = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&base, TG_F32, 2, (int64_t[]){4, 6}), TG_OK));
    cr_assert(eq(int, tg_tensor_zeros(&ref, TG_F32, 2, (int64_t[]){6, 4}), TG_OK));
    tg_tensor *v = NULL;   /* a transposed view of base */
    cr_assert(eq(int, tg_transpose(&v, base, 0, 1), TG_OK));
    tg_rng r1 = {.seed = 5, .counter = 0}, r2 = {.seed = 5, .counter = 0};
    cr_assert(eq(int, tg_tensor_rand_normal(v, &r1, 0, 1), TG_OK));
    cr_assert(eq(int, tg_tensor_rand_normal(ref, &r2, 0, 1), TG_OK));
    for (int i = 0; i < 24; i++) cr_assert(eq(dbl, th_at(v, i), th_at(ref, i)));
    tg_tensor_release(v);
    tg_tensor_release(ref);
    tg_tensor_release(base);
}

Test(random, random_errors_change_nothing)
{
    tg_tensor *t = th_arange(TG_F32, 1, (int64_t[]){3});
    tg_rng rng;
    tg_rng_init(&rng, 1);
    cr_assert(eq(int, tg_tensor_rand_uniform(t, &rng, 2.0, 1.0), TG_EINVAL));
    cr_assert(eq(int, tg_tensor_rand_uniform(t, &rng, 0.0, INFINITY), TG_EINVAL));
    cr_assert(eq(int, tg_tensor_rand_normal(t, &rng, 0.0, -1.0), TG_EINVAL));
    cr_assert(eq(int, tg_tensor_rand_normal(t, NULL, 0.0, 1.0), TG_EINVAL));
    cr_assert(eq(int, tg_tensor_rand_normal(NULL, &rng, 0.0, 1.0), TG_EINVAL));
    cr_assert(eq(u64, rng.counter, 0));
    cr_assert(eq(u64, tg_tensor_version(t), 3));   /* the three set_flat in arange */
    for (int i = 0; i < 3; i++) cr_assert(eq(dbl, th_at(t, i), (double)i));
    tg_tensor_release(t);
}
