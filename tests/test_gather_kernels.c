/* tests/test_gather_kernels.c - the index kernels of gather's checked
 * picks and scatter_add's checked adds along x's last dim
 * (src/ops/gather_simd.c), each forced with TG_INDEX_KERNEL: the bits of
 * the portable kernel for every float dtype (the adds: f32 and f64),
 * lines of every length modulo the vectors' eight lanes and of every
 * length up to 300 (and index_select's bits), NaN payloads and -0.0; a value
 * out of range (-1, the extent, the largest and smallest i64) in each lane
 * of a vector and in a line's tail refused with x, src and the index
 * untouched, in every dtype; the variable's choice and its fallback.  A
 * kernel this CPU lacks is left out with the reason. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "ops/gather_internal.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static const tg__index_kernel vector_kernels[2] = {TG__INDEX_KERNEL_AVX2,
                                                   TG__INDEX_KERNEL_AVX512};

/* TG_INDEX_KERNEL set to kernel k's name (the ops read it at each call). */
static void use_kernel(tg__index_kernel k)
{
    cr_assert(eq(int, setenv("TG_INDEX_KERNEL", tg__index_kernel_name(k), 1), 0));
    cr_assert(eq(int, tg__index_kernel_get(), k), "TG_INDEX_KERNEL=%s",
              tg__index_kernel_name(k));
}

/* Whether kernel k runs here; when not, says so (th_not_run). */
static bool runs_here(tg__index_kernel k)
{
    if (tg__index_kernel_available(k)) return true;
    th_not_run("the %s index kernel is not run: this CPU lacks %s", tg__index_kernel_name(k),
               k == TG__INDEX_KERNEL_AVX2 ? "AVX2" : "AVX-512 F and VL");
    return false;
}

/* A (rows, cols) tensor of dtype dt holding random bits, with a signalling
 * NaN with a payload, -0.0 and a negative quiet NaN at every seventh
 * element. */
static tg_tensor *random_bits(tg_dtype dt, int64_t rows, int64_t cols, uint64_t seed)
{
    static const uint64_t special[4][3] = {
        {0x7f800001u, 0x80000000u, 0xffc12345u},
        {0x7ff0000000000001u, 0x8000000000000000u, 0xfff8000000abcdefu},
        {0x7c01u, 0x8000u, 0xfe55u},
        {0x7f81u, 0x8000u, 0xffc5u},
    };
    const int which = dt == TG_F32 ? 0 : dt == TG_F64 ? 1 : dt == TG_F16 ? 2 : 3;
    const size_t es = tg_dtype_size(dt);
    tg_tensor *t = NULL;
    OK(tg_tensor_zeros(&t, dt, 2, (int64_t[]){rows, cols}));
    unsigned char *d = tg_tensor_data(t);
    for (int64_t i = 0; i < rows * cols; i++) {
        const uint64_t b = i % 7 ? th_xorshift64(&seed) : special[which][i / 7 % 3];
        memcpy(d + (size_t)i * es, &b, es);
    }
    return t;
}

/* A (rows, cols) i64 tensor of values in [0, extent). */
static tg_tensor *random_index(int64_t rows, int64_t cols, int64_t extent, uint64_t seed)
{
    tg_tensor *t = NULL;
    OK(tg_tensor_zeros(&t, TG_I64, 2, (int64_t[]){rows, cols}));
    int64_t *v = tg_tensor_data(t);
    for (int64_t i = 0; i < rows * cols; i++)
        v[i] = (int64_t)(th_xorshift64(&seed) % (uint64_t)extent);
    return t;
}

/* gather along the last dim of x (rows, extent) with an index of lines of
 * 1 to 40 values (every length modulo 8 and 4, a vector's tail alone)
 * and of 300 (runs of the result split lines), on one thread and two:
 * each vector kernel gives the portable kernel's bits, which are x's. */
Test(gather_kernels, vector_kernels_give_the_portable_bits)
{
    const tg_dtype dts[4] = {TG_F32, TG_F64, TG_F16, TG_BF16};
    const int64_t lens[6] = {1, 7, 13, 40, 300, 517}, extents[2] = {1, 37};
    const int old = tg_get_num_threads();
    for (int t = 0; t < 4; t++)
        for (int l = 0; l < 6; l++)
            for (int e = 0; e < 2; e++) {
                const int64_t rows = 130, extent = extents[e] + lens[l] % 5;
                tg_tensor *x = random_bits(dts[t], rows, extent, 3 + (uint64_t)l);
                tg_tensor *idx = random_index(rows, lens[l], extent, 5 + (uint64_t)t);
                tg_tensor *src = random_bits(dts[t], rows, lens[l], 13 + (uint64_t)l);
                const bool adds = dts[t] == TG_F32 || dts[t] == TG_F64;
                tg_tensor *want = NULL, *want_add = NULL;
                use_kernel(TG__INDEX_KERNEL_PORTABLE);
                OK(tg_gather(&want, x, 1, idx));
                if (adds) OK(tg_scatter_add(&want_add, x, 1, idx, src));
                /* the portable kernel's are x's bits */
                const size_t es = tg_dtype_size(dts[t]);
                const unsigned char *xd = tg_tensor_cdata(x), *wd = tg_tensor_cdata(want);
                const int64_t *iv = tg_tensor_cdata(idx);
                for (int64_t p = 0; p < rows * lens[l]; p++)
                    if (memcmp(wd + (size_t)p * es, xd + (size_t)(p / lens[l] * extent + iv[p]) *
                               es, es))
                        cr_fatal("portable %s: element %lld", tg_dtype_name(dts[t]),
                                 (long long)p);
                for (int k = 0; k < 2; k++) {
                    if (!tg__index_kernel_available(vector_kernels[k])) continue;
                    use_kernel(vector_kernels[k]);
                    for (int threads = 1; threads <= 2; threads++) {
                        tg_tensor *y = NULL;
                        OK(tg_set_num_threads(threads));
                        OK(tg_gather(&y, x, 1, idx));
                        th_expect_same_tensor_bytes(tg__index_kernel_name(vector_kernels[k]), y,
                                                    want);
                        tg_tensor_release(y);
                        y = NULL;
                        if (!adds) continue;
                        OK(tg_scatter_add(&y, x, 1, idx, src));
                        th_expect_same_tensor_bytes(tg__index_kernel_name(vector_kernels[k]), y,
                                                    want_add);
                        tg_tensor_release(y);
                    }
                }
                th_release_all(5, (tg_tensor *[]){x, idx, src, want, want_add});
            }
    runs_here(TG__INDEX_KERNEL_AVX2);
    runs_here(TG__INDEX_KERNEL_AVX512);
    OK(tg_set_num_threads(old));
    cr_assert(eq(int, unsetenv("TG_INDEX_KERNEL"), 0));
}

/* A value out of range (-1, the extent, INT64_MAX, INT64_MIN, +-2^40) at
 * each of the first 21 positions of a line of 29 (every lane of the first
 * vectors, on either side of a vector's end), of the first 70 of a line of
 * 150 (every lane of the avx512 adds' first run of 64 and past it), and
 * at a line's last (the tail):
 * every kernel refuses it in gather and scatter_add with TG_EINVAL naming
 * it, gives no result, loads nothing outside x (a load at 2^40 elements
 * away would fault), and leaves x, src and the index as they were. */
Test(gather_kernels, every_kernel_refuses_a_bad_value_in_any_lane)
{
    const tg__index_kernel kernels[3] = {TG__INDEX_KERNEL_PORTABLE, TG__INDEX_KERNEL_AVX2,
                                         TG__INDEX_KERNEL_AVX512};
    const tg_dtype dts[4] = {TG_F32, TG_F64, TG_F16, TG_BF16};
    const int64_t rows = 3, extent = 50;
    /* +-2^40: a load there (a lane not masked off) would fault */
    const int64_t far = INT64_C(1) << 40, bads[6] = {-1, extent, INT64_MAX, INT64_MIN, far, -far};
    for (int k = 0; k < 3; k++) {
        if (!runs_here(kernels[k])) continue;
        use_kernel(kernels[k]);
        for (int t = 0; t < 8; t++) {
            const int64_t len = t < 4 ? 29 : 150, first = t < 4 ? 21 : 70;
            tg_tensor *x = random_bits(dts[t % 4], rows, extent, 7), *x0 = NULL, *i0 = NULL;
            tg_tensor *idx = random_index(rows, len, extent, 11), *s0 = NULL;
            tg_tensor *src = random_bits(dts[t % 4], rows, len, 13);
            OK(tg_tensor_clone(&x0, x));
            OK(tg_tensor_clone(&s0, src));
            int64_t *v = tg_tensor_data(idx);
            for (int64_t at = len; at < 2 * len; at++) {   /* line 1 */
                if (at - len >= first && at != 2 * len - 1) continue;
                for (int b = 0; b < 6; b++) {
                    const int64_t keep = v[at];
                    v[at] = bads[b];
                    OK(tg_tensor_clone(&i0, idx));
                    for (int op = 0; op < 2; op++) {
                        char words[160];
                        snprintf(words, sizeof words,
                                 "%s: index[1, %lld]=%lld is out of range for dim 1 of extent "
                                 "%lld", op ? "scatter_add" : "gather", (long long)(at - len),
                                 (long long)bads[b], (long long)extent);
                        tg_tensor *y = NULL;
                        th_expect_refused(op ? tg_scatter_add(&y, x, 1, idx, src)
                                             : tg_gather(&y, x, 1, idx),
                                          TG_EINVAL, words, y);
                        th_expect_same_tensor_bytes(words, x, x0);
                        th_expect_same_tensor_bytes(words, src, s0);
                        th_expect_same_tensor_bytes(words, idx, i0);
                    }
                    v[at] = keep;
                    tg_tensor_release(i0);
                    i0 = NULL;
                }
            }
            th_release_all(5, (tg_tensor *[]){x, x0, idx, src, s0});
        }
    }
    cr_assert(eq(int, unsetenv("TG_INDEX_KERNEL"), 0));
}

/* Unset, TG_INDEX_KERNEL gives the best kernel this CPU runs; a name that
 * is not a kernel gives the same (and a line on stderr). */
Test(gather_kernels, environment_variable_chooses_the_kernel)
{
    const tg__index_kernel best = tg__index_kernel_available(TG__INDEX_KERNEL_AVX512)
                                      ? TG__INDEX_KERNEL_AVX512
                                  : tg__index_kernel_available(TG__INDEX_KERNEL_AVX2)
                                      ? TG__INDEX_KERNEL_AVX2
                                      : TG__INDEX_KERNEL_PORTABLE;
    cr_assert(eq(int, unsetenv("TG_INDEX_KERNEL"), 0));
    cr_assert(eq(int, tg__index_kernel_get(), best));
    cr_assert(eq(int, setenv("TG_INDEX_KERNEL", "sideways", 1), 0));
    cr_assert(eq(int, tg__index_kernel_get(), best));
    cr_assert(eq(int, setenv("TG_INDEX_KERNEL", "portable", 1), 0));
    cr_assert(eq(int, tg__index_kernel_get(), TG__INDEX_KERNEL_PORTABLE));
    cr_assert(eq(str, (char *)tg__index_kernel_name(TG__INDEX_KERNEL_AVX512), "avx512"));
    cr_assert(eq(int, unsetenv("TG_INDEX_KERNEL"), 0));
}

/* scatter_add along the last dim of a (600, 300) x with an index of the
 * same shape (x and the terms past the size at which its rows are shared
 * among threads), many terms on each element: two threads give one
 * thread's bits, in every kernel. */
Test(gather_kernels, scatter_add_rows_on_two_threads_give_one_threads_bits)
{
    const tg__index_kernel kernels[3] = {TG__INDEX_KERNEL_PORTABLE, TG__INDEX_KERNEL_AVX2,
                                         TG__INDEX_KERNEL_AVX512};
    const tg_dtype dts[2] = {TG_F32, TG_F64};
    const int64_t rows = 600, cols = 300;
    const int old = tg_get_num_threads();
    for (int k = 0; k < 3; k++) {
        if (!runs_here(kernels[k])) continue;
        use_kernel(kernels[k]);
        for (int t = 0; t < 2; t++) {
            tg_tensor *x = random_bits(dts[t], rows, cols, 17);
            tg_tensor *idx = random_index(rows, cols, 40, 19);
            tg_tensor *src = random_bits(dts[t], rows, cols, 23);
            tg_tensor *one = NULL, *two = NULL;
            OK(tg_set_num_threads(1));
            OK(tg_scatter_add(&one, x, 1, idx, src));
            OK(tg_set_num_threads(2));
            OK(tg_scatter_add(&two, x, 1, idx, src));
            th_expect_same_tensor_bytes(tg__index_kernel_name(kernels[k]), two, one);
            th_release_all(5, (tg_tensor *[]){x, idx, src, one, two});
        }
    }
    OK(tg_set_num_threads(old));
    cr_assert(eq(int, unsetenv("TG_INDEX_KERNEL"), 0));
}

/* gather and index_select along the last dim of x (2, extent) for every
 * index length from 1 to 300, extents 1, 2, 3 and 37 (a line of one
 * element, and lines whose last element is picked by any lane), every
 * float dtype: each vector kernel gives the portable kernel's bits, which
 * are x's. */
Test(gather_kernels, every_length_and_dtype_gives_the_portable_bits)
{
    const tg_dtype dts[4] = {TG_F32, TG_F64, TG_F16, TG_BF16};
    const int64_t extents[4] = {1, 2, 3, 37}, rows = 2;
    int cases = 0;
    for (int t = 0; t < 4; t++)
        for (int e = 0; e < 4; e++) {
            const int64_t extent = extents[e];
            const size_t es = tg_dtype_size(dts[t]);
            tg_tensor *x = random_bits(dts[t], rows, extent, 29 + (uint64_t)e);
            const unsigned char *xd = tg_tensor_cdata(x);
            for (int64_t len = 1; len <= 300; len++) {
                tg_tensor *idx = random_index(rows, len, extent, 31 + (uint64_t)len);
                tg_tensor *sel = random_index(1, len, extent, 37 + (uint64_t)len), *sel1 = NULL;
                OK(tg_reshape(&sel1, sel, 1, (int64_t[]){len}));
                const int64_t *iv = tg_tensor_cdata(idx), *sv = tg_tensor_cdata(sel);
                tg_tensor *want = NULL, *want_sel = NULL;
                use_kernel(TG__INDEX_KERNEL_PORTABLE);
                OK(tg_gather(&want, x, 1, idx));
                OK(tg_index_select(&want_sel, x, 1, sel1));
                const unsigned char *wd = tg_tensor_cdata(want), *ws = tg_tensor_cdata(want_sel);
                for (int64_t p = 0; p < rows * len; p++) {
                    const int64_t r = p / len;
                    cr_assert(memcmp(wd + (size_t)p * es, xd + (size_t)(r * extent + iv[p]) * es,
                                     es) == 0, "gather %s len %lld at %lld",
                              tg_dtype_name(dts[t]), (long long)len, (long long)p);
                    cr_assert(memcmp(ws + (size_t)p * es,
                                     xd + (size_t)(r * extent + sv[p % len]) * es, es) == 0,
                              "index_select %s len %lld at %lld", tg_dtype_name(dts[t]),
                              (long long)len, (long long)p);
                }
                for (int k = 0; k < 2; k++) {
                    if (!tg__index_kernel_available(vector_kernels[k])) continue;
                    use_kernel(vector_kernels[k]);
                    tg_tensor *y = NULL, *ys = NULL;
                    OK(tg_gather(&y, x, 1, idx));
                    OK(tg_index_select(&ys, x, 1, sel1));
                    th_expect_same_tensor_bytes(tg__index_kernel_name(vector_kernels[k]), y,
                                                want);
                    th_expect_same_tensor_bytes(tg__index_kernel_name(vector_kernels[k]), ys,
                                                want_sel);
                    th_release_all(2, (tg_tensor *[]){y, ys});
                    cases++;
                }
                th_release_all(5, (tg_tensor *[]){idx, sel, sel1, want, want_sel});
            }
            tg_tensor_release(x);
        }
    cr_assert(cases > 0 || !tg__index_kernel_available(TG__INDEX_KERNEL_AVX2));
    cr_assert(eq(int, unsetenv("TG_INDEX_KERNEL"), 0));
}
