/* tests/test_linalg.c - matmul and linear against naive triple loops. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"
#include "tapegrad/tensor.h"

static double get(const tg_tensor *t, int ndim, int64_t i, int64_t j, int64_t k)
{
    int64_t idx[3];
    if (ndim == 1) idx[0] = k;
    if (ndim == 2) idx[0] = j, idx[1] = k;
    if (ndim == 3) idx[0] = i, idx[1] = j, idx[2] = k;
    double v = NAN;
    cr_assert(eq(int, tg_tensor_get(t, idx, &v), TG_OK));
    return v;
}

/* c (B, M, N) vs sum_k a[b, i, k] * bm[b, k, j], with operands read by index. */
static void check_matmul(const tg_tensor *a, const tg_tensor *b, const tg_tensor *c, double tol)
{
    int nd = tg_tensor_ndim(a), r = nd - 2;
    int64_t B = nd == 3 ? tg_tensor_dim(a, 0) : 1;
    int64_t M = tg_tensor_dim(a, r), K = tg_tensor_dim(a, r + 1), N = tg_tensor_dim(b, r + 1);
    cr_assert(eq(int, tg_tensor_ndim(c), nd));
    cr_assert(eq(i64, tg_tensor_dim(c, r), M));
    cr_assert(eq(i64, tg_tensor_dim(c, r + 1), N));
    for (int64_t bb = 0; bb < B; bb++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double ref = 0.0;
                for (int64_t k = 0; k < K; k++) ref += get(a, nd, bb, i, k) * get(b, nd, bb, k, j);
                cr_assert(epsilon_eq(dbl, get(c, nd, bb, i, j), ref, tol), "(%lld,%lld,%lld)",
                          (long long)bb, (long long)i, (long long)j);
            }
}

Test(linalg, matmul_matches_naive_loop_f32_f64)
{
    tg_dtype dts[2] = {TG_F32, TG_F64};
    double tols[2] = {1e-5, 1e-12};
    for (int d = 0; d < 2; d++) {
        tg_tensor *a = th_rand_uniform(dts[d], 2, (int64_t[]){3, 4}, 1);
        tg_tensor *b = th_rand_uniform(dts[d], 2, (int64_t[]){4, 5}, 2), *c = NULL;
        cr_assert(eq(int, tg_matmul(&c, a, b), TG_OK));
        cr_assert(eq(int, tg_tensor_dtype(c), dts[d]));
        check_matmul(a, b, c, tols[d]);
        tg_tensor_release(c);
        tg_tensor_release(a);
        tg_tensor_release(b);
    }
}

Test(linalg, matmul_of_transposed_and_strided_inputs)
{
    tg_tensor *at = th_rand_uniform(TG_F64, 2, (int64_t[]){4, 3}, 3), *a = NULL;
    tg_tensor *wide = th_rand_uniform(TG_F64, 2, (int64_t[]){4, 10}, 4), *b = NULL, *c = NULL;
    cr_assert(eq(int, tg_transpose(&a, at, 0, 1), TG_OK));     /* (3, 4), column-major */
    cr_assert(eq(int, tg_slice(&b, wide, 1, 0, 10, 2), TG_OK)); /* (4, 5), column stride 2 */
    cr_assert(eq(int, tg_matmul(&c, a, b), TG_OK));
    check_matmul(a, b, c, 1e-12);
    tg_tensor_release(c);
    tg_tensor_release(b);
    tg_tensor_release(a);
    tg_tensor_release(wide);
    tg_tensor_release(at);
}

Test(linalg, batched_matmul_with_permuted_operand)
{
    tg_tensor *a = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 3, 4}, 5);
    tg_tensor *bp = th_rand_uniform(TG_F32, 3, (int64_t[]){5, 2, 4}, 6), *b = NULL, *c = NULL;
    cr_assert(eq(int, tg_permute(&b, bp, (int[]){1, 2, 0}), TG_OK));   /* (2, 4, 5) */
    cr_assert(eq(int, tg_matmul(&c, a, b), TG_OK));
    check_matmul(a, b, c, 1e-5);
    tg_tensor_release(c);
    tg_tensor_release(b);
    tg_tensor_release(bp);
    tg_tensor_release(a);
}

Test(linalg, matmul_with_empty_inner_dim_is_zeros)
{
    tg_tensor *a = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 0}, 1),
              *b = th_rand_uniform(TG_F32, 2, (int64_t[]){0, 3}, 2);
    tg_tensor *c = NULL;
    cr_assert(eq(int, tg_matmul(&c, a, b), TG_OK));
    cr_assert(eq(i64, tg_tensor_numel(c), 6));
    for (int64_t k = 0; k < 6; k++) {
        double v = NAN;
        cr_assert(eq(int, tg_tensor_get_flat(c, k, &v), TG_OK));
        cr_assert(eq(dbl, v, 0.0));
    }
    tg_tensor_release(c);
    tg_tensor_release(a);
    tg_tensor_release(b);
}

/* y[r, o] vs b[o] + sum_i x[r, i] * w[o, i], rows r over x's leading dims. */
static void check_linear(const tg_tensor *x, const tg_tensor *w, const tg_tensor *b,
                         const tg_tensor *y, double tol)
{
    int64_t out = tg_tensor_dim(w, 0), in = tg_tensor_dim(w, 1);
    int64_t rows = tg_tensor_numel(x) / in;
    cr_assert(eq(i64, tg_tensor_numel(y), rows * out));
    cr_assert(eq(i64, tg_tensor_dim(y, -1), out));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < out; o++) {
            double ref = 0.0, v, xv, wv, bv = 0.0;
            if (b) cr_assert(eq(int, tg_tensor_get_flat(b, o, &bv), TG_OK));
            for (int64_t i = 0; i < in; i++) {
                cr_assert(eq(int, tg_tensor_get_flat(x, r * in + i, &xv), TG_OK));
                cr_assert(eq(int, tg_tensor_get_flat(w, o * in + i, &wv), TG_OK));
                ref += xv * wv;
            }
            cr_assert(eq(int, tg_tensor_get_flat(y, r * out + o, &v), TG_OK));
            cr_assert(epsilon_eq(dbl, v, ref + bv, tol));
        }
}

Test(linalg, linear_matches_naive_loop)
{
    tg_dtype dts[2] = {TG_F32, TG_F64};
    double tols[2] = {1e-5, 1e-12};
    for (int d = 0; d < 2; d++) {
        tg_tensor *x = th_rand_uniform(dts[d], 3, (int64_t[]){2, 3, 4}, 7);
        tg_tensor *w = th_rand_uniform(dts[d], 2, (int64_t[]){5, 4}, 8);
        tg_tensor *b = th_rand_uniform(dts[d], 1, (int64_t[]){5}, 9), *y = NULL, *y0 = NULL;
        cr_assert(eq(int, tg_linear(&y, x, w, b), TG_OK));
        cr_assert(eq(int, tg_tensor_ndim(y), 3));
        check_linear(x, w, b, y, tols[d]);
        cr_assert(eq(int, tg_linear(&y0, x, w, NULL), TG_OK));
        check_linear(x, w, NULL, y0, tols[d]);
        tg_tensor_release(y0);
        tg_tensor_release(y);
        tg_tensor_release(b);
        tg_tensor_release(w);
        tg_tensor_release(x);
    }
}

Test(linalg, half_dtypes_are_close_to_f32)
{
    tg_dtype halves[2] = {TG_F16, TG_BF16};
    double tols[2] = {1e-2, 5e-2};
    tg_tensor *a = th_rand_uniform(TG_F32, 2, (int64_t[]){6, 8}, 10),
              *b = th_rand_uniform(TG_F32, 2, (int64_t[]){8, 7}, 11);
    tg_tensor *ref = NULL;
    cr_assert(eq(int, tg_matmul(&ref, a, b), TG_OK));
    for (int h = 0; h < 2; h++) {
        tg_tensor *ah = NULL, *bh = NULL, *c = NULL;
        cr_assert(eq(int, tg_tensor_to_dtype(&ah, a, halves[h]), TG_OK));
        cr_assert(eq(int, tg_tensor_to_dtype(&bh, b, halves[h]), TG_OK));
        cr_assert(eq(int, tg_matmul(&c, ah, bh), TG_OK));
        cr_assert(eq(int, tg_tensor_dtype(c), halves[h]));
        for (int64_t k = 0; k < 42; k++) {
            double v, r;
            cr_assert(eq(int, tg_tensor_get_flat(c, k, &v), TG_OK));
            cr_assert(eq(int, tg_tensor_get_flat(ref, k, &r), TG_OK));
            cr_assert(epsilon_eq(dbl, v, r, tols[h] * (1.0 + fabs(r))));
        }
        tg_tensor_release(c);
        tg_tensor_release(bh);
        tg_tensor_release(ah);
    }
    tg_tensor_release(ref);
    tg_tensor_release(b);
    tg_tensor_release(a);
}

/* ---- gradients ------------------------------------------------------------------ */

static tg_tensor *leaf(int ndim, const int64_t *shape, uint64_t seed)
{
    tg_tensor *x = th_rand_uniform(TG_F64, ndim, shape, seed);
    cr_assert(eq(int, tg_tensor_set_requires_grad(x, true), TG_OK));
    return x;
}

/* matmul(in0, in1), squared elementwise when user is set so that the second
 * derivative is not identically zero. */
static int run_matmul(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_tensor *c = NULL;
    TG_TRY(tg_matmul(&c, in[0], in[1]));
    int rc = user ? tg_mul(out, c, c) : (*out = tg_tensor_retain(c), TG_OK);
    tg_tensor_release(c);
    return rc;
}

static int run_linear(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_tensor *y = NULL;
    TG_TRY(tg_linear(&y, in[0], in[1], n > 2 ? in[2] : NULL));
    int rc = user ? tg_mul(out, y, y) : (*out = tg_tensor_retain(y), TG_OK);
    tg_tensor_release(y);
    return rc;
}

Test(linalg, gradcheck_matmul_2d_and_batched)
{
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    tg_tensor *m2[2] = {leaf(2, (int64_t[]){3, 4}, 1), leaf(2, (int64_t[]){4, 2}, 2)};
    tg_tensor *m3[2] = {leaf(3, (int64_t[]){2, 2, 3}, 3), leaf(3, (int64_t[]){2, 3, 2}, 4)};
    cr_assert(eq(int, tg_gradcheck(run_matmul, NULL, 2, m2, &o), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_gradgradcheck(run_matmul, (void *)1, 2, m2, &o), TG_OK), "%s",
              tg_error_message());
    cr_assert(eq(int, tg_gradcheck(run_matmul, NULL, 2, m3, &o), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_gradgradcheck(run_matmul, (void *)1, 2, m3, &o), TG_OK), "%s",
              tg_error_message());
    for (int i = 0; i < 2; i++) {
        tg_tensor_release(m2[i]);
        tg_tensor_release(m3[i]);
    }
}

Test(linalg, gradcheck_linear_with_and_without_bias)
{
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    tg_tensor *in[3] = {leaf(3, (int64_t[]){2, 2, 3}, 5), leaf(2, (int64_t[]){4, 3}, 6),
                        leaf(1, (int64_t[]){4}, 7)};
    cr_assert(eq(int, tg_gradcheck(run_linear, NULL, 3, in, &o), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_gradgradcheck(run_linear, (void *)1, 3, in, &o), TG_OK), "%s",
              tg_error_message());
    cr_assert(eq(int, tg_gradcheck(run_linear, NULL, 2, in, &o), TG_OK), "%s", tg_error_message());
    for (int i = 0; i < 3; i++) tg_tensor_release(in[i]);
}

Test(linalg, linear_of_a_vector)
{
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    tg_tensor *in[3] = {leaf(1, (int64_t[]){3}, 8), leaf(2, (int64_t[]){2, 3}, 9),
                        leaf(1, (int64_t[]){2}, 10)};
    tg_tensor *y = NULL;
    cr_assert(eq(int, tg_linear(&y, in[0], in[1], in[2]), TG_OK));
    cr_assert(eq(int, tg_tensor_ndim(y), 1));
    check_linear(in[0], in[1], in[2], y, 1e-12);
    cr_assert(eq(int, tg_gradcheck(run_linear, NULL, 3, in, &o), TG_OK), "%s", tg_error_message());
    tg_tensor_release(y);
    for (int i = 0; i < 3; i++) tg_tensor_release(in[i]);
}

/* ---- errors ----------------------------------------------------------------------- */

Test(linalg, errors_leave_out_untouched)
{
    tg_tensor *a = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 3}, 1),
              *b = th_rand_uniform(TG_F32, 2, (int64_t[]){4, 5}, 2);
    tg_tensor *v = th_rand_uniform(TG_F32, 1, (int64_t[]){3}, 3),
              *a3 = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 2, 3}, 4);
    tg_tensor *b3 = th_rand_uniform(TG_F32, 3, (int64_t[]){3, 3, 2}, 5), *i32 = NULL, *out = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&i32, TG_I32, 2, (int64_t[]){3, 2}), TG_OK));

    cr_assert(eq(int, tg_matmul(&out, a, b), TG_ESHAPE));
    cr_assert(strstr(tg_error_message(), "inner dims 3 and 4 differ") != NULL, "%s",
              tg_error_message());
    cr_assert(strstr(tg_error_message(), "(2, 3)") != NULL, "%s", tg_error_message());
    tg_tensor *s0 = th_rand_uniform(TG_F32, 0, NULL, 8);
    cr_assert(eq(int, tg_matmul(&out, a, s0), TG_EINVAL));   /* 0-d */
    cr_assert(eq(int, tg_matmul(&out, a3, b3), TG_ESHAPE));   /* batch 2 vs 3 */
    cr_assert(eq(int, tg_matmul(&out, a, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_linear(&out, a, b, NULL), TG_ESHAPE));
    cr_assert(eq(int, tg_linear(&out, a, v, NULL), TG_EINVAL));
    tg_tensor *w = th_rand_uniform(TG_F32, 2, (int64_t[]){4, 3}, 6),
              *bad_b = th_rand_uniform(TG_F32, 1, (int64_t[]){3}, 7);
    cr_assert(eq(int, tg_linear(&out, a, w, bad_b), TG_ESHAPE));
    tg_tensor *i32b = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&i32b, TG_I32, 2, (int64_t[]){2, 3}), TG_OK));
    cr_assert(eq(int, tg_matmul(&out, i32b, i32), TG_EDTYPE));
    cr_assert(eq(ptr, out, NULL));
    tg_tensor *all[] = {a, b, v, a3, b3, i32, i32b, w, bad_b, s0};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
}

Test(linalg, autocast_lowers_matmul_and_grads_keep_input_dtype)
{
    tg_tensor *a = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 4}, 12),
              *b = th_rand_uniform(TG_F32, 2, (int64_t[]){4, 2}, 13);
    tg_tensor *ref = NULL, *c = NULL, *s = NULL;
    cr_assert(eq(int, tg_tensor_set_requires_grad(a, true), TG_OK));
    cr_assert(eq(int, tg_matmul(&ref, a, b), TG_OK));
    cr_assert(eq(int, tg_autocast_begin(TG_BF16), TG_OK));
    cr_assert(eq(int, tg_matmul(&c, a, b), TG_OK));
    cr_assert(eq(int, tg_autocast_end(), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(c), TG_BF16));
    for (int64_t k = 0; k < 6; k++) {
        double v, r;
        cr_assert(eq(int, tg_tensor_get_flat(c, k, &v), TG_OK));
        cr_assert(eq(int, tg_tensor_get_flat(ref, k, &r), TG_OK));
        cr_assert(epsilon_eq(dbl, v, r, 5e-2 * (1.0 + fabs(r))));
    }
    cr_assert(eq(int, tg_sum(&s, c), TG_OK));
    cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_OK));
    tg_tensor *g = tg_tensor_grad(a);
    cr_assert(not(eq(ptr, g, NULL)));
    cr_assert(eq(int, tg_tensor_dtype(g), TG_F32));
    /* d(sum(a b))/da[i, k] = sum_j b[k, j]. */
    for (int64_t i = 0; i < 3; i++)
        for (int64_t k = 0; k < 4; k++) {
            double gv, b0, b1;
            cr_assert(eq(int, tg_tensor_get_flat(g, i * 4 + k, &gv), TG_OK));
            cr_assert(eq(int, tg_tensor_get_flat(b, k * 2, &b0), TG_OK));
            cr_assert(eq(int, tg_tensor_get_flat(b, k * 2 + 1, &b1), TG_OK));
            cr_assert(epsilon_eq(dbl, gv, b0 + b1, 5e-2));
        }
    tg_tensor *all[] = {a, b, ref, c, s};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
}

/* A (rows, cols) bf16 matrix in place (plain), and the same values as a
 * view of every other column of a wider tensor (strided: no layout gemm can
 * read, so the matmul copies it to f32 first); transposed: the transpose of
 * a (cols, rows) one. */
static void bf16_pair(int64_t rows, int64_t cols, bool transposed, uint64_t seed, tg_tensor **plain,
                      tg_tensor **strided, tg_tensor **own)
{
    const int64_t r = transposed ? cols : rows, c = transposed ? rows : cols;
    tg_tensor *wide = th_rand_uniform(TG_BF16, 2, (int64_t[]){r, 2 * c}, seed), *v = NULL,
              *dense = NULL;
    cr_assert(eq(int, tg_slice(&v, wide, 1, 0, 2 * c, 2), TG_OK));
    cr_assert(eq(int, tg_contiguous(&dense, v), TG_OK));
    if (transposed) {
        cr_assert(eq(int, tg_transpose(plain, dense, 0, 1), TG_OK));
        cr_assert(eq(int, tg_transpose(strided, v, 0, 1), TG_OK));
    } else {
        *plain = tg_tensor_retain(dense);
        *strided = tg_tensor_retain(v);
    }
    own[0] = wide, own[1] = v, own[2] = dense;
}

/* On the bf16 kernels, a bf16 operand that gemm could read in place is read
 * as bf16 bits, without an f32 copy: the products must have the bits of the
 * same values copied to f32 first (a strided view of them), plain and
 * transposed operands, matmul and linear (whose weight comes from panels,
 * with and without bias), at shapes where the kernels pay. */
Test(linalg, bf16_operands_read_in_place_give_the_bits_of_f32_copies)
{
    tg_bf16_kernel k = tg_bf16_kernel_get();
    if (k == TG_BF16_KERNEL_PORTABLE) {
        printf("linalg: no bf16 kernel on this CPU, so no operand is read in place "
               "(the portable path converts every one)\n");
        return;
    }
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            tg_tensor *a, *as, *b, *bs, *own[6], *c0 = NULL, *c1 = NULL;
            bf16_pair(48, 72, ta, 31 + ta, &a, &as, own);
            bf16_pair(72, 40, tb, 37 + tb, &b, &bs, own + 3);
            cr_assert(eq(int, tg_matmul(&c0, a, b), TG_OK), "%s", tg_error_message());
            cr_assert(eq(int, tg_matmul(&c1, as, bs), TG_OK), "%s", tg_error_message());
            cr_assert(th_same_bits(c0, c1), "%s: a transposed %d, b transposed %d",
                      tg_bf16_kernel_name(k), ta, tb);
            th_release_all(4, (tg_tensor *[]){a, as, b, bs});
            th_release_all(6, own);
            th_release_all(2, (tg_tensor *[]){c0, c1});
        }
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        tg_tensor *x, *xs, *own[3], *y0 = NULL, *y1 = NULL;
        bf16_pair(64, 96, false, 41, &x, &xs, own);
        tg_tensor *w = th_rand_uniform(TG_BF16, 2, (int64_t[]){40, 96}, 43);
        tg_tensor *bias = with_bias ? th_rand_uniform(TG_BF16, 1, (int64_t[]){40}, 47) : NULL;
        cr_assert(eq(int, tg_linear(&y0, x, w, bias), TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, tg_linear(&y1, xs, w, bias), TG_OK), "%s", tg_error_message());
        cr_assert(th_same_bits(y0, y1), "%s: linear, bias %d", tg_bf16_kernel_name(k), with_bias);
        th_release_all(3, own);
        th_release_all(6, (tg_tensor *[]){x, xs, w, bias, y0, y1});
    }
}
