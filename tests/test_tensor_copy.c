/* Tests of src/core's copies and conversions: copy_ (broadcasting,
 * converting, refused shapes and expanded views, overlapping sources),
 * contiguous, clone, to_dtype, gathering and scattering strided views, and
 * the version counter bumped by every write. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "tensor_fixtures.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"

Test(tensor_copy, copy_broadcasts_and_converts)
{
    tg_tensor *dst = NULL, *row = NULL, *col = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&dst, TG_F16, 2, (int64_t[]){2, 3}), TG_OK));
    double r[3] = {1.0, 2.5, -3.0};
    cr_assert(eq(int, tg_tensor_from_data(&row, TG_F64, 1, (int64_t[]){3}, r), TG_OK));
    cr_assert(eq(int, tg_tensor_copy_(dst, row), TG_OK));
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) cr_assert(eq(dbl, th_at(dst, i * 3 + j), r[j]));
    int32_t c[2] = {10, -20};
    cr_assert(eq(int, tg_tensor_from_data(&col, TG_I32, 2, (int64_t[]){2, 1}, c), TG_OK));
    uint64_t ver = tg_tensor_version(dst);
    cr_assert(eq(int, tg_tensor_copy_(dst, col), TG_OK));
    cr_assert(eq(u64, tg_tensor_version(dst), ver + 1));
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) cr_assert(eq(dbl, th_at(dst, i * 3 + j), (double)c[i]));
    tg_tensor_release(row);
    tg_tensor_release(col);
    tg_tensor_release(dst);
}

Test(tensor_copy, copy_shape_errors_change_nothing)
{
    tg_tensor *dst = th_arange(TG_F32, 2, (int64_t[]){2, 3}), *bad = NULL, *big = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&bad, TG_F32, 1, (int64_t[]){4}), TG_OK));
    cr_assert(eq(int, tg_tensor_zeros(&big, TG_F32, 3, (int64_t[]){1, 2, 3}), TG_OK));
    uint64_t ver = tg_tensor_version(dst);
    cr_assert(eq(int, tg_tensor_copy_(dst, bad), TG_ESHAPE));
    cr_assert(strstr(tg_error_message(), "(4)") != NULL);
    cr_assert(eq(int, tg_tensor_copy_(dst, big), TG_ESHAPE));
    cr_assert(eq(int, tg_tensor_copy_(dst, NULL), TG_EINVAL));
    cr_assert(eq(u64, tg_tensor_version(dst), ver));
    for (int i = 0; i < 6; i++) cr_assert(eq(dbl, th_at(dst, i), (double)i));
    tg_tensor_release(bad);
    tg_tensor_release(big);
    tg_tensor_release(dst);
}

/* An expanded dst (stride 0 on a dim of size > 1) would keep only the last
 * of the values copied to one location: refused, as torch, nothing written. */
Test(tensor_copy, copy_into_an_expanded_view_is_refused)
{
    tg_tensor *base = th_arange(TG_F32, 2, (int64_t[]){1, 3});
    tg_tensor *src = th_arange(TG_F32, 2, (int64_t[]){4, 3});
    tg_tensor *wide = tg__tensor_view_of(base->storage, TG_F32, 2, (int64_t[]){4, 3},
                                         (int64_t[]){0, 1}, 0);
    cr_assert(eq(int, tg_tensor_copy_(wide, src), TG_EINVAL));
    th_expect_in(tg_error_message(), "has stride 0 on dim 0");
    for (int i = 0; i < 3; i++) cr_assert(eq(dbl, th_at(base, i), (double)i));
    /* a stride 0 on a dim of one element is no overlap */
    tg_tensor *one = tg__tensor_view_of(base->storage, TG_F32, 2, (int64_t[]){1, 3},
                                        (int64_t[]){0, 1}, 0);
    tg_tensor *row = th_arange(TG_F32, 1, (int64_t[]){3});
    cr_assert(eq(int, tg_tensor_copy_(one, row), TG_OK));
    tg_tensor_release(row);
    tg_tensor_release(one);
    tg_tensor_release(wide);
    tg_tensor_release(src);
    tg_tensor_release(base);
}

Test(tensor_copy, copy_from_overlapping_view_reads_old_values)
{
    tg_tensor *t = th_arange(TG_F64, 1, (int64_t[]){5});
    /* rev views the same storage backwards: offset 4, stride -1 */
    tg_tensor *rev = tg__tensor_view_of(t->storage, TG_F64, 1, (int64_t[]){5}, (int64_t[]){-1}, 4);
    cr_assert(eq(int, tg_tensor_copy_(t, rev), TG_OK));
    for (int i = 0; i < 5; i++) cr_assert(eq(dbl, th_at(t, i), 4.0 - i));
    tg_tensor_release(rev);
    tg_tensor_release(t);
}

Test(tensor_copy, contiguous_returns_same_tensor_or_copy)
{
    tg_tensor *base = th_arange(TG_F32, 2, (int64_t[]){2, 3}), *same = NULL, *c = NULL;
    cr_assert(eq(int, tg_tensor_contiguous(&same, base), TG_OK));
    cr_assert(eq(ptr, same, base));
    cr_assert(eq(int, tg_tensor_refcount(base), 2));
    tg_tensor_release(same);
    tg_tensor *v = transposed(base);
    cr_assert(eq(int, tg_tensor_contiguous(&c, v), TG_OK));
    cr_assert(c != v && tg_tensor_is_contiguous(c));
    cr_assert(not(tg_tensor_shares_storage(c, base)));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) cr_assert(eq(dbl, th_at(c, i * 2 + j), 3.0 * j + i));
    tg_tensor_release(c);
    tg_tensor_release(v);
    tg_tensor_release(base);
}

Test(tensor_copy, clone_is_independent)
{
    tg_tensor *t = th_arange(TG_BF16, 1, (int64_t[]){4}), *c = NULL;
    cr_assert(eq(int, tg_tensor_clone(&c, t), TG_OK));
    cr_assert(not(tg_tensor_shares_storage(c, t)));
    cr_assert(eq(int, (int)tg_tensor_dtype(c), (int)TG_BF16));
    cr_assert(eq(int, tg_tensor_set_flat(c, 0, 42.0), TG_OK));
    cr_assert(eq(dbl, th_at(t, 0), 0.0));
    cr_assert(eq(dbl, th_at(c, 0), 42.0));
    cr_assert(eq(dbl, th_at(c, 3), 3.0));
    tg_tensor_release(c);
    tg_tensor_release(t);
}

Test(tensor_copy, to_dtype_converts_with_saturation)
{
    float data[4] = {1.0f / 3.0f, 300.0f, -1000.0f, NAN};
    tg_tensor *t = NULL, *h = NULL, *i = NULL;
    cr_assert(eq(int, tg_tensor_from_data(&t, TG_F32, 1, (int64_t[]){4}, data), TG_OK));
    cr_assert(eq(int, tg_tensor_to_dtype(&h, t, TG_F16), TG_OK));
    cr_assert(eq(u16, ((uint16_t *)tg_tensor_data(h))[0], tg_f32_to_f16(data[0])));
    cr_assert(eq(int, tg_tensor_to_dtype(&i, t, TG_I8), TG_OK));
    double want[4] = {0, 127, -128, 0};
    for (int k = 0; k < 4; k++) cr_assert(eq(dbl, th_at(i, k), want[k]));
    tg_tensor *bad = SENTINEL;
    cr_assert(eq(int, tg_tensor_to_dtype(&bad, t, TG_DTYPE_COUNT), TG_EINVAL));
    cr_assert(eq(ptr, bad, SENTINEL));
    tg_tensor_release(t);
    tg_tensor_release(h);
    tg_tensor_release(i);
}

Test(tensor_copy, gather_scatter_convert_strided)
{
    tg_tensor *base = th_arange(TG_F32, 2, (int64_t[]){3, 4});
    tg_tensor *v = transposed(base);   /* (4, 3), v[i][j] = 4j + i */
    uint16_t h[12];
    tg__gather(v, TG_F16, h);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            cr_assert(eq(flt, tg_f16_to_f32(h[i * 3 + j]), (float)(4 * j + i)));
    double d[12];
    for (int k = 0; k < 12; k++) d[k] = -k;
    tg__scatter(v, TG_F64, d);   /* writes base[j][i] = -(3i + j) */
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) cr_assert(eq(dbl, th_at(base, j * 4 + i), -(3.0 * i + j)));
    tg_tensor_release(v);
    tg_tensor_release(base);
}

/* A 3-d permuted view exercises the multi-index counter's wrap-around. */
Test(tensor_copy, gather_scatter_permuted_3d)
{
    tg_tensor *base = th_arange(TG_F64, 3, (int64_t[]){2, 3, 4});
    /* v = base.permute(2, 0, 1): (4, 2, 3), v[i][j][k] = base[j][k][i] = 12j + 4k + i */
    tg_tensor *v = tg__tensor_view_of(base->storage, TG_F64, 3, (int64_t[]){4, 2, 3},
                                      (int64_t[]){1, 12, 4}, 0);
    double got[24];
    cr_assert(eq(int, tg_tensor_to_doubles(v, got, 24), TG_OK));
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 3; k++)
                cr_assert(eq(dbl, got[(i * 2 + j) * 3 + k], 12.0 * j + 4.0 * k + i));
    float f[24];
    for (int n = 0; n < 24; n++) f[n] = (float)(100 + n);
    tg__scatter(v, TG_F32, f);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 3; k++)
                cr_assert(eq(dbl, th_at(base, 12 * j + 4 * k + i), 100.0 + (i * 2 + j) * 3 + k));
    /* A broadcast middle dim (stride 0) repeats: w[i][r][k] = base[i][0][k]. */
    tg_tensor *w = tg__tensor_view_of(base->storage, TG_F64, 3, (int64_t[]){2, 5, 4},
                                      (int64_t[]){12, 0, 1}, 0);
    double b[40];
    cr_assert(eq(int, tg_tensor_to_doubles(w, b, 40), TG_OK));
    for (int i = 0; i < 2; i++)
        for (int r = 0; r < 5; r++)
            for (int k = 0; k < 4; k++)
                cr_assert(eq(dbl, b[(i * 5 + r) * 4 + k], th_at(base, 12 * i + k)));
    tg_tensor_release(w);
    tg_tensor_release(v);
    tg_tensor_release(base);
}

Test(tensor_copy, version_counter_bumps_on_writes)
{
    tg_tensor *t = NULL, *src = NULL, *view = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&t, TG_F32, 1, (int64_t[]){4}), TG_OK));
    cr_assert(eq(int, tg_tensor_zeros(&src, TG_F32, 1, (int64_t[]){4}), TG_OK));
    cr_assert(eq(int, tg_tensor_detach(&view, t), TG_OK));
    tg_rng rng;
    tg_rng_init(&rng, 1);
    double v;
    cr_assert(eq(int, tg_tensor_get_flat(t, 0, &v), TG_OK));
    cr_assert(eq(u64, tg_tensor_version(t), 0));   /* reads do not bump */
    cr_assert(eq(int, tg_tensor_set_flat(t, 0, 1.0), TG_OK));
    cr_assert(eq(int, tg_tensor_set(t, (int64_t[]){1}, 1.0), TG_OK));
    cr_assert(eq(int, tg_tensor_fill(t, 2.0), TG_OK));
    cr_assert(eq(int, tg_tensor_copy_(t, src), TG_OK));
    cr_assert(eq(int, tg_tensor_rand_uniform(t, &rng, 0, 1), TG_OK));
    cr_assert(eq(int, tg_tensor_rand_normal(t, &rng, 0, 1), TG_OK));
    tg_tensor_bump_version(t);
    cr_assert(eq(u64, tg_tensor_version(t), 7));
    cr_assert(eq(u64, tg_tensor_version(view), 7));   /* shared through the storage */
    cr_assert(eq(u64, tg_tensor_version(src), 0));
    tg_tensor_release(view);
    tg_tensor_release(src);
    tg_tensor_release(t);
}
