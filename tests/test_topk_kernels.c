/* tests/test_topk_kernels.c - topk and kthvalue of f32 (bf16, f16) rows along the
 * contiguous last dim with k within a quarter of the row
 * (src/ops/sort_topk.c), under each first-position kernel forced with
 * TG_FIRST_KERNEL: the indices are argsort's first k (the stable merge
 * sort of every position) and the values x's elements there, bit for bit,
 * over every row length from 1 to 300, ties, NaNs of both signs,
 * infinities and both zeros, largest and smallest; rows shared among two
 * threads give one thread's indices.  A kernel this CPU lacks is left out
 * with the reason. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "first_kernels.h"
#include "helpers.h"
#include "ops/sort_internal.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* A (rows, n) f32 tensor: row r's mode r % 4 gives distinct random values,
 * a pool of ties (+-0, +-1, +-inf), the pool with a NaN at every fifth
 * element (a negative NaN at every tenth), all NaN. */
static tg_tensor *tied_rows(uint64_t *s, int64_t rows, int64_t n)
{
    static const float pool[] = {-INFINITY, -1.0f, -0.0f, 0.0f, 1.0f, INFINITY, 0.5f};
    tg_tensor *x = NULL;
    OK(tg_tensor_zeros(&x, TG_F32, 2, (int64_t[]){rows, n}));
    float *d = tg_tensor_data(x);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j++) {
            const int64_t v = th_rand_int(s, 0, 1000000);
            float f = r % 4 == 0 ? (float)v / 1000.0f - 500.0f : pool[v % 7];
            if (r % 4 == 2 && v % 5 == 0) f = v % 2 ? -NAN : NAN;
            if (r % 4 == 3) f = NAN;
            d[r * n + j] = f;
        }
    return x;
}

/* topk (both directions) and kthvalue of x's rows of n for k from 2 to
 * n / 4 (every k up to 9, then a few): indices argsort's, values x's bits
 * there.  Returns the cases run. */
static int check_rows(tg_tensor *x, int64_t rows, int64_t n)
{
    int cases = 0;
    const char *xd = tg_tensor_cdata(x);
    const size_t es = tg_dtype_size(tg_tensor_dtype(x));
    for (int desc = 0; desc < 2; desc++) {
        tg_tensor *order = NULL;
        OK(tg_argsort(&order, x, 1, desc));
        for (int64_t k = 2; 4 * k <= n; k = k < 9 ? k + 1 : k * 2 + 3) {
            cr_assert(tg__topk_applies(x, n, 1, k));
            tg_tensor *v = NULL, *i = NULL, *kv = NULL, *ki = NULL;
            OK(tg_topk(&v, &i, x, k, 1, desc, true));
            if (!desc) OK(tg_kthvalue(&kv, &ki, x, k, 1, false));
            const char *vd = tg_tensor_cdata(v);
            for (int64_t r = 0; r < rows; r++) {
                for (int64_t j = 0; j < k; j++) {
                    const int64_t got = (int64_t)th_at(i, r * k + j);
                    const int64_t want = (int64_t)th_at(order, r * n + j);
                    cr_assert(eq(i64, got, want), "n %lld k %lld desc %d row %lld at %lld",
                              (long long)n, (long long)k, desc, (long long)r, (long long)j);
                    const char *at = xd + (size_t)(r * n + want) * es;
                    cr_assert(memcmp(vd + (size_t)(r * k + j) * es, at, es) == 0,
                              "value n %lld k %lld row %lld at %lld", (long long)n,
                              (long long)k, (long long)r, (long long)j);
                }
                if (desc) continue;
                cr_assert(eq(i64, (int64_t)th_at(ki, r), (int64_t)th_at(order, r * n + k - 1)),
                          "kthvalue n %lld k %lld row %lld", (long long)n, (long long)k,
                          (long long)r);
            }
            th_release_all(4, (tg_tensor *[]){v, i, kv, ki});
            cases++;
        }
        tg_tensor_release(order);
    }
    return cases;
}

Test(topk_kernels, every_kernel_gives_the_sorted_indices)
{
    int kernels = 0, cases = 0;
    for (int k = TG__FIRST_KERNEL_PORTABLE; k <= TG__FIRST_KERNEL_AVX512; k++) {
        if (!th_force_first_kernel(k)) continue;
        uint64_t s = 41;
        for (int64_t n = 1; n <= 300; n++) {
            tg_tensor *x = tied_rows(&s, 4, n);
            cases += check_rows(x, 4, n);
            tg_tensor_release(x);
        }
        kernels++;
    }
    cr_assert(eq(int, unsetenv("TG_FIRST_KERNEL"), 0));
    cr_assert(kernels >= 1 && cases > kernels * 1000, "%d kernels, %d cases", kernels, cases);
}

/* bf16 and f16 rows (the f32 rows rounded: more ties), each row widened
 * to f32 for the selection, under each kernel: argsort's indices and x's
 * values, bit for bit. */
Test(topk_kernels, half_rows_give_the_sorted_indices)
{
    const tg_dtype dts[2] = {TG_BF16, TG_F16};
    int cases = 0;
    for (int k = TG__FIRST_KERNEL_PORTABLE; k <= TG__FIRST_KERNEL_AVX512; k++) {
        if (!th_force_first_kernel(k)) continue;
        for (int d = 0; d < 2; d++) {
            uint64_t s = 43;
            for (int64_t n = 8; n <= 300; n += n < 40 ? 1 : 13) {
                tg_tensor *x = tied_rows(&s, 4, n), *h = NULL;
                OK(tg_to_dtype(&h, x, dts[d]));
                cases += check_rows(h, 4, n);
                th_release_all(2, (tg_tensor *[]){x, h});
            }
        }
    }
    cr_assert(eq(int, unsetenv("TG_FIRST_KERNEL"), 0));
    cr_assert(cases > 500, "%d cases", cases);
}

/* Rows of 4096 (the buffer cut back many times) with k from 2 to 1024,
 * on one thread and on two (rows shared among them): argsort's indices. */
Test(topk_kernels, long_rows_on_one_and_two_threads)
{
    uint64_t s = 7;
    const int64_t rows = 12, n = 4096;
    tg_tensor *x = tied_rows(&s, rows, n);
    const int old = tg_get_num_threads();
    for (int threads = 1; threads <= 2; threads++) {
        OK(tg_set_num_threads(threads));
        cr_assert(check_rows(x, rows, n) > 10);
    }
    OK(tg_set_num_threads(old));
    tg_tensor_release(x);
}
