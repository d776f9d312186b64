/* Tests of src/core: tensor creation, refcounts, element access, autograd
 * attributes, printing and errors (copies and conversions:
 * test_tensor_copy.c; the random fills: test_random.c; memory accounting
 * and the storage cache: test_storage.c). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "tensor_fixtures.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "ops/dispatch.h"
#include "tapegrad/conv.h"
#include "tapegrad/ops.h"

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
 * fill_, t[i] = v), rather than becoming inf (f16 70000) or saturating (i8
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

/* full_like and randn_like: t's shape and dtype; randn_like draws what
 * tg_tensor_rand_normal draws from the same generator; refusals. */
Test(tensor, full_like_and_randn_like)
{
    tg_tensor *t = NULL, *f = NULL, *r = NULL, *want = NULL, *i = NULL, *z = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&t, TG_BF16, 2, (int64_t[]){3, 5}), TG_OK));
    cr_assert(eq(int, tg_tensor_full_like(&f, t, 1.0), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(f), TG_BF16));
    cr_assert(tg_tensor_same_shape(f, t));
    for (int64_t k = 0; k < 15; k++) cr_assert(eq(dbl, th_at(f, k), 1.0));
    tg_rng r1, r2;
    tg_rng_init(&r1, 9);
    tg_rng_init(&r2, 9);
    cr_assert(eq(int, tg_tensor_randn_like(&r, t, &r1), TG_OK));
    cr_assert(eq(int, tg_tensor_zeros_like(&want, t), TG_OK));
    cr_assert(eq(int, tg_tensor_rand_normal(want, &r2, 0.0, 1.0), TG_OK));
    th_expect_same_bits("randn_like", t, r, want);
    cr_assert(eq(int, tg_tensor_zeros(&i, TG_I64, 1, (int64_t[]){4}), TG_OK));
    th_expect_refused(tg_tensor_randn_like(&z, i, &r1), TG_EINVAL, "randn_like", z);
    th_expect_refused(tg_tensor_randn_like(&z, t, NULL), TG_EINVAL, "rng", z);
    th_expect_refused(tg_tensor_full_like(&z, NULL, 1.0), TG_EINVAL, "full_like", z);
    th_expect_refused(tg_tensor_full_like(&z, i, 1e30), TG_EINVAL, "", z);
    th_release_all(5, (tg_tensor *[]){t, f, r, want, i});
}

/* randn and rand: what rand_normal / rand_uniform draw into zeros of that
 * shape from the same generator, in every float dtype; refusals. */
Test(tensor, randn_and_rand)
{
    const int64_t shape[3] = {2, 3, 7};
    for (int d = 0; d < 4; d++) {
        for (int normal = 0; normal < 2; normal++) {
            tg_rng r1, r2;
            tg_rng_init(&r1, 11);
            tg_rng_init(&r2, 11);
            tg_tensor *r = NULL, *want = NULL;
            cr_assert(eq(int, (normal ? tg_tensor_randn : tg_tensor_rand)(&r, th_floats[d], 3,
                                                                       shape, &r1), TG_OK));
            cr_assert(eq(int, tg_tensor_zeros(&want, th_floats[d], 3, shape), TG_OK));
            cr_assert(eq(int, normal ? tg_tensor_rand_normal(want, &r2, 0.0, 1.0)
                                     : tg_tensor_rand_uniform(want, &r2, 0.0, 1.0), TG_OK));
            th_expect_same_bits(normal ? "randn" : "rand", NULL, r, want);
            cr_assert(eq(u64, r1.counter, r2.counter));
            for (int64_t k = 0; !normal && k < 42; k++)
                cr_assert(th_at(r, k) >= 0 && th_at(r, k) < 1);
            th_release_all(2, (tg_tensor *[]){r, want});
        }
    }
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_tensor *z = NULL;
    th_expect_refused(tg_tensor_randn(&z, TG_I32, 3, shape, &rng), TG_EINVAL,
                      "tensor_randn: dtype i32; only float dtypes are drawn (as torch's randn)",
                      z);
    th_expect_refused(tg_tensor_rand(&z, TG_U8, 3, shape, &rng), TG_EINVAL,
                      "(as torch's rand)", z);
    th_expect_refused(tg_tensor_randn(&z, TG_F32, 3, shape, NULL), TG_EINVAL, "rng", z);
    th_expect_refused(tg_tensor_rand(&z, TG_F32, -1, shape, &rng), TG_EINVAL, "", z);
    th_expect_refused(tg_tensor_randn(&z, TG_F32, 3, (int64_t[]){2, -1, 3}, &rng), TG_EINVAL,
                      "shape[1]=-1", z);
    cr_assert(eq(int, tg_tensor_randn(NULL, TG_F32, 3, shape, &rng), TG_EINVAL));
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
