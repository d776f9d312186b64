/* Tests of src/core: tensor creation, refcounts, element access, copies,
 * autograd attributes, printing and the Philox random fills. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "internal.h"
#include "tapegrad/conv.h"
#include "tapegrad/ops.h"

#define SENTINEL ((tg_tensor *)0x1)

/* A transposed (last two dims swapped) view of a contiguous 2-d tensor. */
static tg_tensor *transposed(tg_tensor *t)
{
    int64_t shape[2] = {t->shape[1], t->shape[0]};
    int64_t strides[2] = {t->strides[1], t->strides[0]};
    return tg__tensor_view_of(t->storage, t->dtype, 2, shape, strides, t->offset);
}

/* ---- creation ------------------------------------------------------------- */

Test(tensor, zeros_has_contiguous_geometry)
{
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&t, TG_F32, 3, (int64_t[]){2, 3, 4}), TG_OK));
    cr_assert(eq(int, tg_tensor_ndim(t), 3));
    cr_assert(eq(i64, tg_tensor_numel(t), 24));
    cr_assert(eq(i64, tg_tensor_strides(t)[0], 12));
    cr_assert(eq(i64, tg_tensor_strides(t)[1], 4));
    cr_assert(eq(i64, tg_tensor_strides(t)[2], 1));
    cr_assert(eq(i64, tg_tensor_dim(t, -1), 4));
    cr_assert(eq(i64, tg_tensor_dim(t, 1), 3));
    cr_assert(eq(i64, tg_tensor_dim(t, 3), -1));
    cr_assert(eq(i64, tg_tensor_dim(t, -4), -1));
    cr_assert(tg_tensor_is_contiguous(t));
    cr_assert(eq(int, tg_tensor_refcount(t), 1));
    cr_assert(eq(u64, tg_tensor_version(t), 0));
    cr_assert(eq(uptr, (uintptr_t)tg_tensor_data(t) % 64, 0));
    cr_assert(eq(int, (int)tg_tensor_dtype(t), (int)TG_F32));
    for (int64_t i = 0; i < 24; i++) cr_assert(eq(dbl, th_at(t, i), 0.0));
    cr_assert(tg_tensor_is_leaf(t) && !tg_tensor_requires_grad(t));
    tg_tensor_release(t);
}

Test(tensor, scalar_full_and_from_data)
{
    tg_tensor *s = NULL, *f = NULL, *i8 = NULL, *d = NULL;
    cr_assert(eq(int, tg_tensor_scalar(&s, TG_F64, -2.25), TG_OK));
    cr_assert(eq(int, tg_tensor_ndim(s), 0));
    cr_assert(eq(i64, tg_tensor_numel(s), 1));
    double v;
    cr_assert(eq(int, tg_tensor_get(s, NULL, &v), TG_OK));
    cr_assert(eq(dbl, v, -2.25));
    cr_assert(eq(int, tg_tensor_full(&f, TG_F16, 2, (int64_t[]){2, 2}, 1.5), TG_OK));
    for (int i = 0; i < 4; i++) cr_assert(eq(dbl, th_at(f, i), 1.5));
    cr_assert(eq(u64, tg_tensor_version(f), 0));
    cr_assert(eq(int, tg_tensor_full(&i8, TG_I8, 1, (int64_t[]){3}, 127.0), TG_OK));
    cr_assert(eq(dbl, th_at(i8, 2), 127.0));
    float data[6] = {1, 2, 3, 4, 5, 6};
    cr_assert(eq(int, tg_tensor_from_data(&d, TG_F32, 2, (int64_t[]){2, 3}, data), TG_OK));
    data[0] = 100;   /* the tensor holds a copy */
    cr_assert(eq(dbl, th_at(d, 0), 1.0));
    cr_assert(eq(dbl, th_at(d, 5), 6.0));
    tg_tensor_release(s);
    tg_tensor_release(f);
    tg_tensor_release(i8);
    tg_tensor_release(d);
}

Test(tensor, creation_errors_leave_out_untouched)
{
    tg_tensor *t = SENTINEL;
    cr_assert(eq(int, tg_tensor_zeros(&t, TG_F32, 2, (int64_t[]){2, -3}), TG_EINVAL));
    cr_assert(eq(str, (char *)tg_error_message(), "tensor_zeros: shape[1]=-3 must be >= 0"));
    cr_assert(eq(ptr, t, SENTINEL));
    cr_assert(eq(int, tg_tensor_zeros(&t, TG_F32, 9, (int64_t[9]){1}), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "ndim=9") != NULL);
    cr_assert(eq(int, tg_tensor_zeros(&t, TG_F32, -1, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_tensor_zeros(&t, TG_F32, 2, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_tensor_zeros(&t, TG_DTYPE_COUNT, 1, (int64_t[]){2}), TG_EINVAL));
    cr_assert(eq(int, tg_tensor_full(&t, (tg_dtype)-5, 1, (int64_t[]){2}, 1.0), TG_EINVAL));
    cr_assert(eq(int, tg_tensor_zeros(&t, TG_F32, 3, (int64_t[]){INT64_C(1) << 31, INT64_C(1) << 31, 4}),
                 TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "overflow") != NULL);
    cr_assert(eq(int, tg_tensor_from_data(&t, TG_F32, 1, (int64_t[]){2}, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_tensor_scalar(&t, (tg_dtype)42, 1.0), TG_EINVAL));
    cr_assert(eq(int, tg_tensor_zeros_like(&t, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_tensor_clone(&t, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_tensor_to_dtype(&t, NULL, TG_F32), TG_EINVAL));
    cr_assert(eq(ptr, t, SENTINEL));
    cr_assert(eq(int, tg_tensor_zeros(NULL, TG_F32, 1, (int64_t[]){2}), TG_EINVAL));
}

Test(tensor, empty_extent_is_valid)
{
    tg_tensor *t = NULL, *c = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&t, TG_F32, 2, (int64_t[]){0, 5}), TG_OK));
    cr_assert(eq(i64, tg_tensor_numel(t), 0));
    cr_assert(eq(int, tg_tensor_fill(t, 3.0), TG_OK));
    cr_assert(eq(int, tg_tensor_clone(&c, t), TG_OK));
    cr_assert(eq(i64, tg_tensor_numel(c), 0));
    double x;
    cr_assert(eq(int, tg_tensor_get_flat(t, 0, &x), TG_EINVAL));
    tg_tensor_release(c);
    tg_tensor_release(t);
}

/* ---- refcounts ---------------------------------------------------------------- */

Test(tensor, refcount_and_views_keep_storage_alive)
{
    tg_tensor *base = th_arange(TG_F32, 2, (int64_t[]){2, 3});
    cr_assert(eq(ptr, tg_tensor_retain(base), base));
    cr_assert(eq(int, tg_tensor_refcount(base), 2));
    tg_tensor_release(base);
    cr_assert(eq(int, tg_tensor_refcount(base), 1));
    tg_tensor_release(NULL);   /* no-op */
    tg_tensor *view = transposed(base);
    tg_tensor *det = NULL;
    cr_assert(eq(int, tg_tensor_detach(&det, base), TG_OK));
    cr_assert(eq(int, base->storage->refcount, 3));
    tg_tensor_release(base);
    /* The views still read the data: view (3, 2) element (2, 1) is base (1, 2) = 5. */
    double v;
    cr_assert(eq(int, tg_tensor_get(view, (int64_t[]){2, 1}, &v), TG_OK));
    cr_assert(eq(dbl, v, 5.0));
    cr_assert(eq(dbl, th_at(det, 4), 4.0));
    tg_tensor_release(view);
    tg_tensor_release(det);
}

Test(tensor, release_frees_grad_and_hooks)
{
    int64_t before, during, after;
    tg_memory_stats(&before, NULL);
    tg_tensor *t = th_arange(TG_F32, 1, (int64_t[]){3});
    tg_tensor *g = NULL;
    cr_assert(eq(int, tg_tensor_zeros_like(&g, t), TG_OK));
    tg_tensor_set_grad(t, g);   /* steals g */
    cr_assert(eq(ptr, tg_tensor_grad(t), g));
    cr_assert(eq(int, tg_tensor_refcount(g), 1));
    for (int i = 0; i < 2; i++) {   /* LeakSanitizer checks these are freed */
        tg_hook *h = malloc(sizeof *h);
        *h = (tg_hook){.fn = NULL, .user = NULL, .next = t->hooks};
        t->hooks = h;
    }
    tg_memory_stats(&during, NULL);
    cr_assert(during > before, "the tensor and its gradient are counted");
    tg_tensor_release(t);
    tg_memory_stats(&after, NULL);   /* the storage of both is gone */
    cr_assert(eq(i64, after, before));
}

Test(tensor, grad_set_replace_and_zero)
{
    tg_tensor *t = th_arange(TG_F32, 1, (int64_t[]){3}), *g1 = NULL, *g2 = NULL;
    cr_assert(eq(ptr, tg_tensor_grad(t), NULL));
    cr_assert(eq(int, tg_tensor_full(&g1, TG_F32, 1, (int64_t[]){3}, 1.0), TG_OK));
    cr_assert(eq(int, tg_tensor_full(&g2, TG_F32, 1, (int64_t[]){3}, 2.0), TG_OK));
    tg_tensor_set_grad(t, g1);
    tg_tensor_set_grad(t, g2);   /* g1 released (ASan would report a leak) */
    cr_assert(eq(dbl, th_at(tg_tensor_grad(t), 0), 2.0));
    tg_tensor_zero_grad(t);
    cr_assert(eq(ptr, tg_tensor_grad(t), NULL));
    tg_tensor_release(t);
}

/* ---- element access -------------------------------------------------------------- */

Test(tensor, get_set_and_bounds)
{
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&t, TG_F64, 2, (int64_t[]){2, 3}), TG_OK));
    cr_assert(eq(int, tg_tensor_set(t, (int64_t[]){1, 2}, 7.5), TG_OK));
    cr_assert(eq(dbl, th_at(t, 5), 7.5));   /* (1, 2) is flat 1 * 3 + 2 */
    cr_assert(eq(int, tg_tensor_set_flat(t, 1, -1.0), TG_OK));
    double v = 123;
    cr_assert(eq(int, tg_tensor_get(t, (int64_t[]){0, 1}, &v), TG_OK));
    cr_assert(eq(dbl, v, -1.0));
    uint64_t ver = tg_tensor_version(t);
    v = 123;
    cr_assert(eq(int, tg_tensor_get(t, (int64_t[]){0, 3}, &v), TG_EINVAL));
    cr_assert(eq(str, (char *)tg_error_message(),
                 "tensor_get: idx[1]=3 out of range for dim 1 of extent 3"));
    cr_assert(eq(dbl, v, 123.0));
    cr_assert(eq(int, tg_tensor_set(t, (int64_t[]){-1, 0}, 9.0), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "idx[0]=-1") != NULL);
    cr_assert(eq(int, tg_tensor_set_flat(t, 6, 9.0), TG_EINVAL));
    cr_assert(eq(int, tg_tensor_get_flat(t, -1, &v), TG_EINVAL));
    cr_assert(eq(int, tg_tensor_get(t, NULL, &v), TG_EINVAL));
    cr_assert(eq(int, tg_tensor_get(t, (int64_t[]){0, 0}, NULL), TG_EINVAL));
    cr_assert(eq(u64, tg_tensor_version(t), ver));
    double all[6];
    cr_assert(eq(int, tg_tensor_to_doubles(t, all, 6), TG_OK));
    double want[6] = {0, -1, 0, 0, 0, 7.5};
    for (int i = 0; i < 6; i++) cr_assert(eq(dbl, all[i], want[i]));
    cr_assert(eq(int, tg_tensor_to_doubles(t, all, 5), TG_EINVAL));
    tg_tensor_release(t);
}

Test(tensor, strided_view_reads_in_logical_order)
{
    tg_tensor *base = th_arange(TG_F32, 2, (int64_t[]){2, 3});
    tg_tensor *v = transposed(base);   /* (3, 2): v[i][j] = base[j][i] = 3j + i */
    cr_assert(not(tg_tensor_is_contiguous(v)));
    double got[6];
    cr_assert(eq(int, tg_tensor_to_doubles(v, got, 6), TG_OK));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) cr_assert(eq(dbl, got[i * 2 + j], 3.0 * j + i));
    /* get_flat agrees with the multi-index */
    for (int k = 0; k < 6; k++) cr_assert(eq(dbl, th_at(v, k), got[k]));
    tg_tensor_release(v);
    tg_tensor_release(base);
}

Test(tensor, contiguity_ignores_unit_dims)
{
    tg_tensor *base = th_arange(TG_F32, 1, (int64_t[]){6});
    tg_tensor *v = tg__tensor_view_of(base->storage, TG_F32, 3, (int64_t[]){2, 1, 3},
                                      (int64_t[]){3, 99, 1}, 0);
    cr_assert(tg_tensor_is_contiguous(v));
    tg_tensor *w = tg__tensor_view_of(base->storage, TG_F32, 2, (int64_t[]){2, 3},
                                      (int64_t[]){0, 1}, 0);   /* broadcast rows */
    cr_assert(not(tg_tensor_is_contiguous(w)));
    cr_assert(eq(dbl, th_at(w, 4), 1.0));   /* row 1 repeats row 0 */
    tg_tensor_release(v);
    tg_tensor_release(w);
    tg_tensor_release(base);
}

Test(tensor, fill_writes_only_the_view)
{
    tg_tensor *base = th_arange(TG_I32, 1, (int64_t[]){6});
    /* every other element: offset 1, stride 2 -> elements 1, 3, 5 */
    tg_tensor *odd = tg__tensor_view_of(base->storage, TG_I32, 1, (int64_t[]){3},
                                        (int64_t[]){2}, 1);
    uint64_t ver = tg_tensor_version(base);
    cr_assert(eq(int, tg_tensor_fill(odd, -4.0), TG_OK));
    cr_assert(eq(u64, tg_tensor_version(base), ver + 1));
    double want[6] = {0, -4, 2, -4, 4, -4};
    for (int i = 0; i < 6; i++) cr_assert(eq(dbl, th_at(base, i), want[i]));
    cr_assert(eq(int, tg_tensor_fill(NULL, 1.0), TG_EINVAL));
    tg_tensor_release(odd);
    tg_tensor_release(base);
}

/* ---- copies ----------------------------------------------------------------------- */

Test(tensor, copy_broadcasts_and_converts)
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

Test(tensor, copy_shape_errors_change_nothing)
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

Test(tensor, copy_from_overlapping_view_reads_old_values)
{
    tg_tensor *t = th_arange(TG_F64, 1, (int64_t[]){5});
    /* rev views the same storage backwards: offset 4, stride -1 */
    tg_tensor *rev = tg__tensor_view_of(t->storage, TG_F64, 1, (int64_t[]){5}, (int64_t[]){-1}, 4);
    cr_assert(eq(int, tg_tensor_copy_(t, rev), TG_OK));
    for (int i = 0; i < 5; i++) cr_assert(eq(dbl, th_at(t, i), 4.0 - i));
    tg_tensor_release(rev);
    tg_tensor_release(t);
}

Test(tensor, contiguous_returns_same_tensor_or_copy)
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

Test(tensor, clone_is_independent)
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

Test(tensor, to_dtype_converts_with_saturation)
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

Test(tensor, gather_scatter_convert_strided)
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
Test(tensor, gather_scatter_permuted_3d)
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

Test(tensor, version_counter_bumps_on_writes)
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

/* ---- autograd attributes ------------------------------------------------------------- */

Test(tensor, detach_shares_storage)
{
    tg_tensor *base = th_arange(TG_F32, 2, (int64_t[]){2, 3});
    tg_tensor *v = transposed(base), *d = NULL;
    cr_assert(eq(int, tg_tensor_set_requires_grad(v, true), TG_OK));
    cr_assert(eq(int, tg_tensor_detach(&d, v), TG_OK));
    cr_assert(tg_tensor_shares_storage(d, base));
    cr_assert(not(tg_tensor_requires_grad(d)));
    cr_assert(tg_tensor_is_leaf(d));
    cr_assert(eq(i64, tg_tensor_strides(d)[0], 1));
    cr_assert(eq(i64, tg_tensor_strides(d)[1], 3));
    cr_assert(eq(int, tg_tensor_set(d, (int64_t[]){2, 0}, 50.0), TG_OK));
    cr_assert(eq(dbl, th_at(base, 2), 50.0));   /* d(2, 0) is base(0, 2) */
    tg_tensor *bad = SENTINEL;
    cr_assert(eq(int, tg_tensor_detach(&bad, NULL), TG_EINVAL));
    cr_assert(eq(ptr, bad, SENTINEL));
    tg_tensor_release(d);
    tg_tensor_release(v);
    tg_tensor_release(base);
}

Test(tensor, requires_grad_rules)
{
    tg_tensor *f = NULL, *i = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&f, TG_F16, 1, (int64_t[]){2}), TG_OK));
    cr_assert(eq(int, tg_tensor_zeros(&i, TG_I32, 1, (int64_t[]){2}), TG_OK));
    cr_assert(eq(int, tg_tensor_set_requires_grad(f, true), TG_OK));
    cr_assert(tg_tensor_requires_grad(f));
    cr_assert(eq(int, tg_tensor_set_requires_grad(i, true), TG_EDTYPE));
    cr_assert(not(tg_tensor_requires_grad(i)));
    cr_assert(eq(int, tg_tensor_set_requires_grad(i, false), TG_OK));
    /* A non-leaf (made by a recorded op) may not change its flag. */
    tg_node fake = {0};
    f->grad_fn = &fake;
    cr_assert(not(tg_tensor_is_leaf(f)));
    cr_assert(eq(int, tg_tensor_set_requires_grad(f, false), TG_EGRAD));
    cr_assert(tg_tensor_requires_grad(f));
    f->grad_fn = NULL;
    cr_assert(eq(int, tg_tensor_set_requires_grad(f, false), TG_OK));
    cr_assert(eq(int, tg_tensor_set_requires_grad(NULL, true), TG_EINVAL));
    tg_tensor_release(f);
    tg_tensor_release(i);
}

Test(tensor, names_and_printing)
{
    tg_tensor *t = th_arange(TG_F32, 2, (int64_t[]){2, 2});
    cr_assert(eq(str, (char *)tg_tensor_name(t), ""));
    tg_tensor_set_name(t, "weight");
    cr_assert(eq(str, (char *)tg_tensor_name(t), "weight"));
    char longname[64];
    memset(longname, 'x', 63);
    longname[63] = '\0';
    tg_tensor_set_name(t, longname);
    cr_assert(eq(sz, strlen(tg_tensor_name(t)), 31));
    tg_tensor_set_name(t, NULL);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert(eq(int, tg_tensor_print(f, t, 10), TG_OK));
    cr_assert(eq(int, tg_tensor_print(f, t, 2), TG_OK));
    fclose(f);
    cr_assert(eq(str, buf, "tensor f32 (2, 2) [0, 1, 2, 3]\ntensor f32 (2, 2) [0, 1, ...]\n"));
    free(buf);
    cr_assert(eq(int, tg_tensor_print(NULL, t, 2), TG_EINVAL));
    tg_tensor_release(t);
}

Test(tensor, shape_str)
{
    char buf[32];
    cr_assert(eq(str, tg_shape_str(buf, sizeof buf, 3, (int64_t[]){2, 3, 4}), "(2, 3, 4)"));
    cr_assert(eq(str, tg_shape_str(buf, sizeof buf, 0, NULL), "()"));
    cr_assert(eq(str, tg_shape_str(buf, sizeof buf, 1, (int64_t[]){7}), "(7)"));
    char small[6];
    tg_shape_str(small, sizeof small, 3, (int64_t[]){200, 300, 400});
    cr_assert(eq(sz, strlen(small), 5));   /* truncated, NUL-terminated */
    cr_assert(eq(int, strncmp(small, "(200,", 5), 0));
}

/* ---- random ------------------------------------------------------------------------ */

/* Known-answer vectors published with Random123 (kat_vectors, philox4x32_10). */
Test(tensor, philox_known_answers)
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

Test(tensor, random_fills_refuse_integer_dtypes)
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

Test(tensor, random_is_reproducible_per_seed)
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

Test(tensor, random_counter_advances)
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

Test(tensor, uniform_moments)
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
Test(tensor, uniform_excludes_hi_in_narrow_dtypes)
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

Test(tensor, normal_moments)
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

Test(tensor, random_fills_views_in_logical_order)
{
    tg_tensor *base = NULL, *ref = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&base, TG_F32, 2, (int64_t[]){4, 6}), TG_OK));
    cr_assert(eq(int, tg_tensor_zeros(&ref, TG_F32, 2, (int64_t[]){6, 4}), TG_OK));
    tg_tensor *v = transposed(base);
    tg_rng r1 = {.seed = 5, .counter = 0}, r2 = {.seed = 5, .counter = 0};
    cr_assert(eq(int, tg_tensor_rand_normal(v, &r1, 0, 1), TG_OK));
    cr_assert(eq(int, tg_tensor_rand_normal(ref, &r2, 0, 1), TG_OK));
    for (int i = 0; i < 24; i++) cr_assert(eq(dbl, th_at(v, i), th_at(ref, i)));
    tg_tensor_release(v);
    tg_tensor_release(ref);
    tg_tensor_release(base);
}

Test(tensor, random_errors_change_nothing)
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

/* tg_memory_stats counts tensor storage: a new tensor adds its bytes, a view
 * adds nothing, the last release gives them back; the peak keeps the maximum
 * until tg_memory_reset_peak.  (Criterion runs each test in its own process,
 * so no other test's tensors are alive here.) */
Test(tensor, memory_stats_count_storage_bytes)
{
    int64_t c0, p0, c1, p1, c2, p2;
    tg_memory_reset_peak();
    tg_memory_stats(&c0, &p0);
    cr_assert(eq(i64, p0, c0));
    tg_tensor *a = NULL, *b = NULL, *v = NULL;
    const int64_t sa[2] = {100, 30}, sb[1] = {7};
    cr_assert(eq(int, tg_tensor_zeros(&a, TG_F32, 2, sa), TG_OK));
    cr_assert(eq(int, tg_tensor_zeros(&b, TG_F64, 1, sb), TG_OK));
    tg_memory_stats(&c1, &p1);
    cr_assert(eq(i64, c1 - c0, 100 * 30 * 4 + 7 * 8));
    cr_assert(eq(i64, p1, c1));
    cr_assert(eq(int, tg_slice(&v, a, 0, 10, 20, 1), TG_OK));   /* a view: no new bytes */
    tg_memory_stats(&c2, NULL);
    cr_assert(eq(i64, c2, c1));
    tg_tensor_release(a);   /* v still holds a's storage */
    tg_memory_stats(&c2, NULL);
    cr_assert(eq(i64, c2, c1));
    tg_tensor_release(v);
    tg_tensor_release(b);
    tg_memory_stats(&c2, &p2);
    cr_assert(eq(i64, c2, c0));
    cr_assert(eq(i64, p2, p1));   /* the peak remembers */
    tg_memory_reset_peak();
    tg_memory_stats(NULL, &p2);
    cr_assert(eq(i64, p2, c0));
}

/* The cache of freed storage: a released tensor of 64 KiB or more goes to the
 * cache (tg_memory_cached grows by its bytes, tg_memory_stats drops them), the
 * next tensor of that size gets the same block back, and a zeros tensor made
 * from a dirty cached block is still all zeros.  Small tensors bypass it, the
 * limit bounds it, and empty_cache empties it.  The limit is set explicitly,
 * since the default is 0 under AddressSanitizer. */
Test(tensor, freed_storage_is_cached_and_reused)
{
    const int64_t old_limit = tg_memory_set_cache_limit(1 << 20);
    tg_memory_empty_cache();
    cr_assert(eq(i64, tg_memory_cached(), 0));
    const int64_t big[1] = {32768}, small[1] = {1000};   /* 128 KiB and 4000 bytes of f32 */
    tg_tensor *a = NULL, *b = NULL, *s = NULL;
    int64_t c0, c1;
    tg_memory_stats(&c0, NULL);
    cr_assert(eq(int, tg_tensor_zeros(&a, TG_F32, 1, big), TG_OK));
    float *pa = tg_tensor_data(a);
    for (int64_t i = 0; i < big[0]; i++) pa[i] = 1.5f;
    tg_tensor_release(a);
    cr_assert(eq(i64, tg_memory_cached(), 32768 * 4));
    tg_memory_stats(&c1, NULL);
    cr_assert(eq(i64, c1, c0));   /* cached bytes are not tensor bytes */
    cr_assert(eq(int, tg_tensor_zeros(&b, TG_F32, 1, big), TG_OK));
    cr_assert(eq(ptr, tg_tensor_data(b), pa));   /* the same block back */
    cr_assert(eq(i64, tg_memory_cached(), 0));
    const float *pb = tg_tensor_data(b);
    for (int64_t i = 0; i < big[0]; i++) cr_assert(eq(flt, pb[i], 0.0f), "element %ld", (long)i);
    cr_assert(eq(int, tg_tensor_zeros(&s, TG_F32, 1, small), TG_OK));
    tg_tensor_release(s);
    cr_assert(eq(i64, tg_memory_cached(), 0));   /* below 64 KiB: back to malloc */

    /* Limit: 1 MiB holds 8 blocks of 128 KiB; the ninth released is freed. */
    tg_tensor *many[9] = {NULL};
    tg_tensor_release(b);
    for (int i = 0; i < 9; i++) cr_assert(eq(int, tg_tensor_zeros(&many[i], TG_F32, 1, big), TG_OK));
    for (int i = 0; i < 9; i++) tg_tensor_release(many[i]);
    cr_assert(eq(i64, tg_memory_cached(), 8 * 32768 * 4));
    cr_assert(eq(i64, tg_memory_set_cache_limit(3 * 32768 * 4), 1 << 20));
    cr_assert(eq(i64, tg_memory_cached(), 3 * 32768 * 4));   /* trimmed to the new limit */
    tg_memory_empty_cache();
    cr_assert(eq(i64, tg_memory_cached(), 0));
    tg_memory_set_cache_limit(0);   /* off: nothing is kept */
    cr_assert(eq(int, tg_tensor_zeros(&a, TG_F32, 1, big), TG_OK));
    tg_tensor_release(a);
    cr_assert(eq(i64, tg_memory_cached(), 0));
    tg_memory_set_cache_limit(old_limit);
}

/* Work buffers (a kernel's f32 copies of half operands) come from the same
 * cache as storages and go back to it, without counting as tensor memory: a
 * bf16 conv's copies are cached after the call, and the next call takes them
 * again instead of faulting in fresh pages. */
Test(tensor, work_buffers_share_the_storage_cache)
{
    const int64_t old_limit = tg_memory_set_cache_limit(64 << 20);
    tg_memory_empty_cache();
    int64_t t0, t1;
    tg_memory_stats(&t0, NULL);
    void *p = tg__work_alloc(200000);
    cr_assert(p != NULL);
    cr_assert(eq(u64, (uintptr_t)p % 64, 0));
    memset(p, 7, 200000);
    tg_memory_stats(&t1, NULL);
    cr_assert(eq(i64, t1, t0));   /* not tensor memory */
    tg__work_free(p);
    const int64_t cached = tg_memory_cached();
    cr_assert(ge(i64, cached, 200000));
    void *q = tg__work_alloc(200000);
    cr_assert(eq(ptr, q, p));   /* the same block back */
    cr_assert(eq(i64, tg_memory_cached(), 0));
    tg__work_free(q);
    tg__work_free(NULL);

    /* a bf16 conv of a strided x: its f32 copy of x is a work buffer (a
     * contiguous x would be read in place) */
    tg_memory_empty_cache();
    const int64_t xs[4] = {16, 8, 16, 16}, ws[4] = {16, 16, 3, 3};
    tg_tensor *xt = NULL, *x = NULL, *w = NULL, *y = NULL, *y2 = NULL;
    cr_assert(eq(int, tg_tensor_full(&xt, TG_BF16, 4, xs, 0.5), TG_OK));
    cr_assert(eq(int, tg_transpose(&x, xt, 0, 1), TG_OK));
    tg_tensor_release(xt);
    cr_assert(eq(int, tg_tensor_full(&w, TG_BF16, 4, ws, 0.25), TG_OK));
    cr_assert(eq(int, tg_conv(&y, x, w, NULL, NULL), TG_OK), "%s", tg_error_message());
    const int64_t after_one = tg_memory_cached();
    cr_assert(ge(i64, after_one, 8 * 16 * 16 * 16 * 4), "the f32 copy of x was not cached");
    cr_assert(eq(int, tg_conv(&y2, x, w, NULL, NULL), TG_OK), "%s", tg_error_message());
    cr_assert(eq(i64, tg_memory_cached(), after_one), "the second call did not reuse them");
    cr_assert(eq(int, memcmp(tg_tensor_data(y), tg_tensor_data(y2),
                             (size_t)tg_tensor_numel(y) * 2), 0));
    tg_tensor_release(x), tg_tensor_release(w), tg_tensor_release(y), tg_tensor_release(y2);
    tg_memory_empty_cache();
    tg_memory_set_cache_limit(old_limit);
}

enum { CACHE_SIZES = 600 };

/* Bytes of the CACHE_SIZES distinct block sizes: 64 KiB plus i lines. */
static int64_t cache_size(int i) { return ((int64_t)64 << 10) + 64 * i; }

/* The cache finds its bins (one per block size) through a uthash index.  When
 * that index cannot grow (its table, or a doubling of its buckets: here the
 * first uthash allocation of each release fails), the released block is not
 * cached but freed, and the cache stays consistent: tg_memory_cached counts
 * exactly the blocks it holds, each is given back for its size, and
 * empty_cache frees them all (a block kept in a bin the index lost would stay
 * counted, and leak in the sanitizer build). */
Test(tensor, storage_cache_declines_a_block_when_its_index_cannot_grow)
{
    const int64_t old_limit = tg_memory_set_cache_limit((int64_t)1 << 30);
    tg_memory_empty_cache();
    tg_tensor *t[CACHE_SIZES] = {NULL};
    int64_t want = 0;
    int declined = 0;
    for (int i = 0; i < CACHE_SIZES; i++) {
        const int64_t shape[1] = {cache_size(i)};
        cr_assert(eq(int, tg_tensor_zeros(&t[i], TG_U8, 1, shape), TG_OK));
        tg__hash_fail_after(0);
        tg_tensor_release(t[i]);
        if (tg__hash_fail_after(-1) < 0) {   /* declined; with memory, it is kept */
            declined++;
            cr_assert(eq(i64, tg_memory_cached(), want), "block %d was counted", i);
            cr_assert(eq(int, tg_tensor_zeros(&t[i], TG_U8, 1, shape), TG_OK));
            tg_tensor_release(t[i]);
        }
        want += cache_size(i);
        cr_assert(eq(i64, tg_memory_cached(), want), "block %d", i);
    }
    cr_assert(declined >= 3, "%d declined: the table, then at least two doublings", declined);
    for (int i = 0; i < CACHE_SIZES; i++) {   /* each comes back for its size */
        const int64_t shape[1] = {cache_size(i)};
        cr_assert(eq(int, tg_tensor_zeros(&t[i], TG_U8, 1, shape), TG_OK));
        want -= cache_size(i);
        cr_assert(eq(i64, tg_memory_cached(), want), "block %d", i);
    }
    for (int i = 0; i < CACHE_SIZES; i++) tg_tensor_release(t[i]);
    tg_memory_empty_cache();
    cr_assert(eq(i64, tg_memory_cached(), 0));
    tg_memory_set_cache_limit(old_limit);
}

/* tg_error_set: code built on tapegrad reports as the library does. */
Test(tensor, error_set_sets_the_message_and_returns_the_status)
{
    cr_assert(eq(int, tg_error_set(TG_ESHAPE, "mymodule: k=%d must be odd", 4), TG_ESHAPE));
    cr_assert(eq(str, (char *)tg_error_message(), "mymodule: k=4 must be odd"));
    cr_assert(eq(int, tg_error_set(TG_EIO, NULL), TG_EIO));
    cr_assert(eq(str, (char *)tg_error_message(), (char *)tg_status_message(TG_EIO)));
    cr_assert(eq(int, tg_error_set(TG_OK, "fine"), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "must be a negative tg_status") != NULL);
    tg_error_clear();
    cr_assert(eq(str, (char *)tg_error_message(), ""));
}

/* A value beyond the dtype's range is refused as PyTorch refuses it
 * ("value cannot be converted to type at::Half without overflow": torch.full,
 * fill_, t[i] = v), where it used to become inf (f16 70000) or saturate (i8
 * 300) silently.  NaN and +-inf are values of the float dtypes; an integer
 * dtype takes neither.  On error nothing is written. */
Test(tensor, values_beyond_the_dtype_range_are_refused_as_torch)
{
    const struct {
        tg_dtype dt;
        double v;
        bool ok;
    } cases[] = {
        {TG_F16, 65504, true},     {TG_F16, 65519, false},   {TG_F16, 70000, false},
        {TG_F16, -1e6, false},     {TG_F16, INFINITY, true}, {TG_F16, NAN, true},
        {TG_BF16, 3.3895313892515355e38, true}, {TG_BF16, 1e39, false},
        {TG_F32, 1e39, false},     {TG_F32, -INFINITY, true}, {TG_F64, 1e300, true},
        {TG_I8, 127, true},        {TG_I8, 300, false},      {TG_I8, -129, false},
        {TG_I8, NAN, false},       {TG_U8, -1, false},       {TG_U8, 255, true},
        {TG_I32, 3e9, false},      {TG_I64, INFINITY, false}, {TG_I8, 2.5, true},
        {TG_I64, 0x1p63, false},   {TG_I64, -0x1p63, true},  {TG_I64, 0x1.fffffffffffffp62, true},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const tg_dtype dt = cases[k].dt;
        const double v = cases[k].v;
        const int want = cases[k].ok ? TG_OK : TG_EINVAL;
        tg_tensor *t = SENTINEL;
        cr_assert(eq(int, tg_tensor_full(&t, dt, 1, (int64_t[]){2}, v), want), "full %s %g",
                  tg_dtype_name(dt), v);
        if (!cases[k].ok) {
            cr_assert(eq(ptr, t, SENTINEL));
            cr_assert(strstr(tg_error_message(), "without overflow") != NULL, "%s",
                      tg_error_message());
        } else {
            tg_tensor_release(t);
        }
        t = SENTINEL;
        cr_assert(eq(int, tg_tensor_scalar(&t, dt, v), want), "scalar %s %g", tg_dtype_name(dt), v);
        if (cases[k].ok) tg_tensor_release(t);
        tg_tensor *z = NULL;
        cr_assert(eq(int, tg_tensor_zeros(&z, dt, 1, (int64_t[]){2}), TG_OK));
        cr_assert(eq(int, tg_tensor_fill(z, v), want), "fill %s %g", tg_dtype_name(dt), v);
        cr_assert(eq(int, tg_tensor_set_flat(z, 1, v), want), "set_flat %s %g", tg_dtype_name(dt), v);
        cr_assert(eq(int, tg_tensor_set(z, (int64_t[]){0}, v), want), "set %s %g", tg_dtype_name(dt), v);
        if (!cases[k].ok) {
            cr_assert(eq(dbl, th_at(z, 0), 0.0), "nothing written");
            cr_assert(eq(dbl, th_at(z, 1), 0.0), "nothing written");
            cr_assert(eq(u64, tg_tensor_version(z), 0));
        }
        tg_tensor_release(z);
    }
}

/* clone and zeros_like check their own out and name themselves, not the
 * function they call. */
Test(tensor, clone_and_zeros_like_errors_name_themselves)
{
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&t, TG_F32, 1, (int64_t[]){2}), TG_OK));
    cr_assert(eq(int, tg_tensor_clone(NULL, t), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "tensor_clone: out must not be NULL") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(int, tg_tensor_zeros_like(NULL, t), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "tensor_zeros_like: out must not be NULL") != NULL,
              "%s", tg_error_message());
    tg_tensor_release(t);
}
