/* tests/test_shape.c - shape ops (views, copies, cat, cat of mixed dtypes),
 * scalars and empty tensors, and the ops' registration.  The gradients of
 * the shape ops and reductions are in test_shape_grad.c, the errors in
 * test_shape_errors.c.  Expected values come from index arithmetic and naive
 * loops written here. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"
#include "tapegrad/tensor.h"

/* ---- views ---------------------------------------------------------------------- */

Test(shape, reshape_of_contiguous_is_a_view)
{
    int64_t s[3] = {2, 3, 4}, r[2] = {4, -1}, want[2] = {4, 6};
    tg_tensor *a = th_arange(TG_F32, 3, s), *v = NULL;
    cr_assert(eq(int, tg_reshape(&v, a, 2, r), TG_OK));
    th_expect_shape(v, 2, want);
    cr_assert(tg_tensor_shares_storage(a, v));
    cr_assert(eq(ptr, tg_tensor_data(v), tg_tensor_data(a)));
    for (int64_t k = 0; k < 24; k++) cr_assert(eq(dbl, th_at(v, k), (double)k));
    tg_tensor_release(v);
    tg_tensor_release(a);
}

Test(shape, write_through_view_is_seen_by_base_and_bumps_shared_version)
{
    int64_t s[2] = {3, 4};
    tg_tensor *a = th_arange(TG_F64, 2, s), *t = NULL;
    cr_assert(eq(int, tg_transpose(&t, a, 0, 1), TG_OK));
    cr_assert(tg_tensor_shares_storage(a, t));
    uint64_t v0 = tg_tensor_version(a);
    int64_t it[2] = {3, 1}, ia[2] = {1, 3};
    cr_assert(eq(int, tg_tensor_set(t, it, 99.0), TG_OK));
    cr_assert(eq(dbl, th_get(a, ia), 99.0));
    cr_assert(tg_tensor_version(a) > v0, "a write through a view did not bump the version");
    cr_assert(eq(u64, tg_tensor_version(a), tg_tensor_version(t)));
    tg_tensor_release(t);
    tg_tensor_release(a);
}

Test(shape, reshape_of_transposed_views_when_possible_else_copies)
{
    int64_t s[2] = {3, 4}, r3[3] = {2, 2, 3}, r1[1] = {12};
    tg_tensor *a = th_arange(TG_F64, 2, s), *t = NULL, *v = NULL, *c = NULL;
    cr_assert(eq(int, tg_transpose(&t, a, 0, 1), TG_OK));   /* t[i][j] = a[j][i] = 4j + i */
    /* (4, 3) -> (2, 2, 3) only splits the strided dim 0: still a view. */
    cr_assert(eq(int, tg_reshape(&v, t, 3, r3), TG_OK));
    cr_assert(tg_tensor_shares_storage(v, a));
    /* Flattening must interleave: a copy. */
    cr_assert(eq(int, tg_reshape(&c, t, 1, r1), TG_OK));
    cr_assert(not(tg_tensor_shares_storage(c, a)));
    for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 3; j++) {
            int64_t iv[3] = {i / 2, i % 2, j};
            cr_assert(eq(dbl, th_at(c, i * 3 + j), (double)(4 * j + i)));
            cr_assert(eq(dbl, th_get(v, iv), (double)(4 * j + i)));
        }
    tg_tensor_release(c);
    tg_tensor_release(v);
    tg_tensor_release(t);
    tg_tensor_release(a);
}

Test(shape, permute_matches_index_math)
{
    int64_t s[3] = {2, 3, 4}, want[3] = {4, 2, 3};
    int perm[3] = {2, 0, -2};
    tg_tensor *a = th_arange(TG_I32, 3, s), *p = NULL;
    cr_assert(eq(int, tg_permute(&p, a, perm), TG_OK));
    th_expect_shape(p, 3, want);
    cr_assert(tg_tensor_shares_storage(a, p));
    for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 2; j++)
            for (int64_t k = 0; k < 3; k++) {
                int64_t idx[3] = {i, j, k};
                cr_assert(eq(dbl, th_get(p, idx), (double)(j * 12 + k * 4 + i)));
            }
    tg_tensor_release(p);
    tg_tensor_release(a);
}

Test(shape, slice_follows_python_rules)
{
    int64_t s[2] = {3, 10};
    tg_tensor *a = th_arange(TG_F32, 2, s), *v = NULL, *e = NULL, *w = NULL;
    /* a[:, -8:100:3] picks columns 2, 5, 8. */
    cr_assert(eq(int, tg_slice(&v, a, -1, -8, 100, 3), TG_OK));
    int64_t want[2] = {3, 3};
    th_expect_shape(v, 2, want);
    cr_assert(tg_tensor_shares_storage(a, v));
    for (int64_t i = 0; i < 3; i++)
        for (int64_t j = 0; j < 3; j++) {
            int64_t idx[2] = {i, j};
            cr_assert(eq(dbl, th_get(v, idx), (double)(i * 10 + 2 + 3 * j)));
        }
    /* a[5:2] is empty, a[-100:1] is row 0. */
    cr_assert(eq(int, tg_slice(&e, a, 1, 5, 2, 1), TG_OK));
    cr_assert(eq(i64, tg_tensor_numel(e), 0));
    cr_assert(eq(int, tg_slice(&w, a, 0, -100, 1, 1), TG_OK));
    cr_assert(eq(i64, tg_tensor_dim(w, 0), 1));
    cr_assert(eq(dbl, th_at(w, 9), 9.0));
    tg_tensor_release(w);
    /* a step beyond the extent picks the first element (its stride times
     * the step would overflow: UBSan checks that it is never formed) */
    tg_tensor_set_requires_grad(a, true);
    cr_assert(eq(int, tg_slice(&w, a, 0, 1, 3, INT64_MAX), TG_OK));
    cr_assert(eq(i64, tg_tensor_dim(w, 0), 1));
    cr_assert(eq(dbl, th_at(w, 3), 13.0));
    tg_tensor *sum = NULL;
    cr_assert(eq(int, tg_sum(&sum, w), TG_OK));
    cr_assert(eq(int, tg_backward(sum, NULL, NULL), TG_OK));
    for (int64_t i = 0; i < 30; i++)
        cr_assert(eq(dbl, th_at(tg_tensor_grad(a), i), i >= 10 && i < 20 ? 1.0 : 0.0));
    tg_tensor_release(sum);
    tg_tensor_release(w);
    tg_tensor_release(e);
    tg_tensor_release(v);
    tg_tensor_release(a);
}

Test(shape, expand_stretches_with_stride_zero)
{
    int64_t s[2] = {3, 1}, to[3] = {2, -1, 4}, want[3] = {2, 3, 4};
    tg_tensor *a = th_arange(TG_F64, 2, s), *e = NULL;
    cr_assert(eq(int, tg_expand(&e, a, 3, to), TG_OK));
    th_expect_shape(e, 3, want);
    cr_assert(tg_tensor_shares_storage(a, e));
    cr_assert(eq(i64, tg_tensor_strides(e)[0], 0));
    cr_assert(eq(i64, tg_tensor_strides(e)[2], 0));
    for (int64_t k = 0; k < 24; k++) cr_assert(eq(dbl, th_at(e, k), (double)((k / 4) % 3)));
    tg_tensor_release(e);
    tg_tensor_release(a);
}

Test(shape, unsqueeze_squeeze_and_contiguous)
{
    int64_t s[2] = {3, 4}, w1[3] = {3, 1, 4}, w2[3] = {3, 4, 1};
    tg_tensor *a = th_arange(TG_F32, 2, s), *u = NULL, *u2 = NULL, *q = NULL, *q2 = NULL;
    cr_assert(eq(int, tg_unsqueeze(&u, a, 1), TG_OK));
    th_expect_shape(u, 3, w1);
    cr_assert(eq(int, tg_unsqueeze(&u2, a, -1), TG_OK));
    th_expect_shape(u2, 3, w2);
    cr_assert(eq(int, tg_squeeze(&q, u, 1), TG_OK));
    th_expect_shape(q, 2, s);
    cr_assert(eq(int, tg_squeeze(&q2, u, 0), TG_OK));   /* extent 3: unchanged */
    th_expect_shape(q2, 3, w1);
    cr_assert(eq(dbl, th_at(u2, 7), 7.0));

    tg_tensor *c = NULL, *t = NULL, *tc = NULL;
    cr_assert(eq(int, tg_contiguous(&c, a), TG_OK));
    cr_assert(eq(ptr, c, a));   /* not recorded: the same tensor, retained */
    cr_assert(eq(int, tg_transpose(&t, a, 0, 1), TG_OK));
    cr_assert(eq(int, tg_contiguous(&tc, t), TG_OK));
    cr_assert(tg_tensor_is_contiguous(tc));
    cr_assert(not(tg_tensor_shares_storage(tc, a)));
    for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 3; j++)
            cr_assert(eq(dbl, th_at(tc, i * 3 + j), (double)(j * 4 + i)));
    tg_tensor *all[] = {u, u2, q, q2, c, t, tc, a};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
}

Test(shape, cat_places_each_input_along_dim)
{
    int64_t s0[3] = {2, 1, 3}, s1[3] = {2, 2, 3}, s2[3] = {2, 0, 3}, want[3] = {2, 3, 3};
    tg_tensor *ts[3] = {th_arange(TG_F64, 3, s0), th_arange(TG_F64, 3, s1),
                        th_arange(TG_F64, 3, s2)};
    tg_tensor *c = NULL;
    cr_assert(eq(int, tg_cat(&c, 3, ts, -2), TG_OK));
    th_expect_shape(c, 3, want);
    for (int64_t i = 0; i < 2; i++)
        for (int64_t j = 0; j < 3; j++)
            for (int64_t k = 0; k < 3; k++) {
                int64_t idx[3] = {i, j, k};
                double expect = j == 0 ? (double)(i * 3 + k) : (double)(i * 6 + (j - 1) * 3 + k);
                cr_assert(eq(dbl, th_get(c, idx), expect));
            }
    tg_tensor_release(c);
    for (int i = 0; i < 3; i++) tg_tensor_release(ts[i]);
}

Test(shape, cat_of_more_inputs_than_a_node_holds)
{
    enum { N = 19 };
    tg_tensor *ts[N], *c = NULL;
    for (int i = 0; i < N; i++) cr_assert(eq(int, tg_tensor_full(&ts[i], TG_F32, 1,
                                                                 (int64_t[]){2}, i), TG_OK));
    cr_assert(eq(int, tg_cat(&c, N, ts, 0), TG_OK));
    cr_assert(eq(i64, tg_tensor_numel(c), 2 * N));
    for (int64_t k = 0; k < 2 * N; k++) cr_assert(eq(dbl, th_at(c, k), (double)(k / 2)));
    tg_tensor_release(c);
    for (int i = 0; i < N; i++) tg_tensor_release(ts[i]);
}

/* ---- edge shapes and registration ------------------------------------------------- */

Test(shape, scalars_and_empty_tensors)
{
    tg_tensor *s = NULL, *e = NULL, *z = NULL, *r = NULL, *sm = NULL, *mn = NULL, *out = NULL;
    cr_assert(eq(int, tg_tensor_scalar(&s, TG_F64, 2.5), TG_OK));
    cr_assert(eq(int, tg_expand(&e, s, 2, (int64_t[]){2, 3}), TG_OK));
    for (int64_t k = 0; k < 6; k++) cr_assert(eq(dbl, th_at(e, k), 2.5));
    cr_assert(eq(int, tg_tensor_zeros(&z, TG_F32, 2, (int64_t[]){0, 3}), TG_OK));
    cr_assert(eq(int, tg_reshape(&r, z, 2, (int64_t[]){3, 0}), TG_OK));
    cr_assert(eq(int, tg_reshape(&out, z, 2, (int64_t[]){-1, 0}), TG_ESHAPE));   /* ambiguous */
    cr_assert(eq(ptr, out, NULL));
    cr_assert(eq(int, tg_sum(&sm, z), TG_OK));
    cr_assert(eq(int, tg_mean(&mn, z), TG_OK));
    cr_assert(eq(dbl, th_at(sm, 0), 0.0));
    cr_assert(isnan(th_at(mn, 0)));   /* 0/0, as in PyTorch */
    tg_tensor *all[] = {s, e, z, r, sm, mn};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
}

Test(shape, ops_are_registered_with_their_amp_policy)
{
    struct { const char *name; tg_amp_policy amp; } ops[] = {
        {"sum", TG_AMP_FP32},         {"mean", TG_AMP_FP32},      {"sum_dims", TG_AMP_FP32},
        {"mean_dims", TG_AMP_FP32},   {"sum_to_shape", TG_AMP_KEEP}, {"reshape", TG_AMP_KEEP},
        {"permute", TG_AMP_KEEP},     {"transpose", TG_AMP_KEEP}, {"slice", TG_AMP_KEEP},
        {"slice_backward", TG_AMP_KEEP}, {"expand", TG_AMP_KEEP}, {"unsqueeze", TG_AMP_KEEP},
        {"squeeze", TG_AMP_KEEP},     {"contiguous", TG_AMP_KEEP}, {"cat", TG_AMP_PROMOTE},
        {"matmul", TG_AMP_LOWER_PRECISION}, {"linear", TG_AMP_LOWER_PRECISION},
    };
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        tg_op_info info;
        cr_assert(eq(int, tg_op_info_find(ops[i].name, &info), TG_OK), "%s", ops[i].name);
        cr_assert(eq(int, (int)info.amp, (int)ops[i].amp), "%s", ops[i].name);
        cr_assert(info.has_backward && info.has_double_backward, "%s", ops[i].name);
    }
}

/* A 0-d tensor takes dims -1 and 0, as in PyTorch: reductions over it and
 * squeeze/transpose leave the scalar; slicing or concatenating one is an
 * error, as is dim 1 or naming its dim twice. */
Test(shape, scalar_dims_as_pytorch)
{
    tg_tensor *s = NULL, *y = NULL;
    tg_tensor_scalar(&s, TG_F64, 2.5);
    tg_tensor_set_requires_grad(s, true);
    const int d0[1] = {0}, dm1[1] = {-1}, both[2] = {0, -1}, d1[1] = {1};
    cr_assert(eq(int, tg_sum_dims(&y, s, 1, d0, false), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_ndim(y), 0));
    cr_assert(eq(dbl, th_at(y, 0), 2.5));
    cr_assert(eq(int, tg_backward(y, NULL, NULL), TG_OK));
    cr_assert(eq(dbl, th_at(tg_tensor_grad(s), 0), 1.0));
    tg_tensor_release(y);
    cr_assert(eq(int, tg_mean_dims(&y, s, 1, dm1, true), TG_OK));
    cr_assert(eq(int, tg_tensor_ndim(y), 0));
    cr_assert(eq(dbl, th_at(y, 0), 2.5));
    tg_tensor_release(y);
    cr_assert(eq(int, tg_squeeze(&y, s, 0), TG_OK));
    cr_assert(eq(int, tg_tensor_ndim(y), 0));
    tg_tensor_release(y);
    cr_assert(eq(int, tg_transpose(&y, s, 0, -1), TG_OK));
    cr_assert(eq(int, tg_tensor_ndim(y), 0));
    cr_assert(eq(dbl, th_at(y, 0), 2.5));
    tg_tensor_release(y);
    y = NULL;
    cr_assert(eq(int, tg_sum_dims(&y, s, 2, both, false), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "again") != NULL, "%s", tg_error_message());
    cr_assert(eq(int, tg_sum_dims(&y, s, 1, d1, false), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "must be in [-1, 1) for a 0-d tensor") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(int, tg_slice(&y, s, 0, 0, 1, 1), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "0-d tensor cannot be sliced") != NULL);
    cr_assert(eq(int, tg_cat(&y, 2, (tg_tensor *[]){s, s}, 0), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "ts[0] is 0-d") != NULL, "%s", tg_error_message());
    cr_assert(y == NULL);
    tg_tensor_release(s);
}

/* ---- cat of mixed dtypes -------------------------------------------------------- */

/* torch.cat promotes (torch 1.13: f32 + f64 -> f64, i32 + f32 -> f32,
 * i32 + i64 -> i64, u8 + i32 -> i32, f16 + bf16 -> f32); each value is
 * converted exactly here. */
Test(shape, cat_promotes_mixed_dtypes_as_torch)
{
    struct { tg_dtype a, b, want; } cases[] = {
        {TG_F32, TG_F64, TG_F64}, {TG_I32, TG_F32, TG_F32}, {TG_I32, TG_I64, TG_I64},
        {TG_U8, TG_I32, TG_I32},  {TG_F16, TG_BF16, TG_F32}, {TG_I8, TG_F16, TG_F16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tg_tensor *a = th_arange(cases[i].a, 2, (int64_t[]){2, 2});
        tg_tensor *b = th_arange(cases[i].b, 2, (int64_t[]){2, 1}), *y = NULL;
        cr_assert(eq(int, tg_cat(&y, 2, (tg_tensor *[]){a, b}, 1), TG_OK), "%zu: %s", i,
                  tg_error_message());
        cr_assert(eq(int, tg_tensor_dtype(y), cases[i].want), "case %zu", i);
        th_expect_shape(y, 2, (int64_t[]){2, 3});
        const double want[6] = {0, 1, 0, 2, 3, 1};
        for (int k = 0; k < 6; k++) cr_assert(eq(dbl, th_at(y, k), want[k]), "%zu[%d]", i, k);
        tg_tensor_release(y);
        tg_tensor_release(a);
        tg_tensor_release(b);
    }
}

/* u8 with i8 promotes to i16 in torch, a dtype tapegrad does not have. */
Test(shape, cat_of_u8_and_i8_is_edtype)
{
    tg_tensor *a = th_arange(TG_U8, 1, (int64_t[]){2}), *b = th_arange(TG_I8, 1, (int64_t[]){2});
    tg_tensor *y = NULL;
    cr_assert(eq(int, tg_cat(&y, 2, (tg_tensor *[]){a, b}, 0), TG_EDTYPE));
    cr_assert(strstr(tg_error_message(), "cat: ts[1] is i8 and ts[0] is u8") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(ptr, y, NULL));
    tg_tensor_release(a);
    tg_tensor_release(b);
}

/* A cat of more inputs than a node holds runs in chunks; each chunk comes out
 * in the dtype of the whole cat, even one whose own inputs (u8 and i8) would
 * not promote: 4 u8, 4 i8 and an i32 give i32 (torch: i32). */
Test(shape, long_cat_of_integers_promotes_over_all_inputs)
{
    tg_tensor *ts[9], *y = NULL;
    for (int i = 0; i < 9; i++)
        ts[i] = th_arange(i < 4 ? TG_U8 : i < 8 ? TG_I8 : TG_I32, 1, (int64_t[]){2});
    cr_assert(eq(int, tg_cat(&y, 9, ts, 0), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_dtype(y), TG_I32));
    th_expect_shape(y, 1, (int64_t[]){18});
    for (int k = 0; k < 18; k++) cr_assert(eq(dbl, th_at(y, k), (double)(k % 2)));
    tg_tensor_release(y);
    for (int i = 0; i < 9; i++) tg_tensor_release(ts[i]);
}

/* The promotion is a recorded cast: each input's gradient comes back in its
 * own dtype, as torch's (a f32 -> a.grad f32, b f64 -> b.grad f64). */
Test(shape, cat_of_mixed_floats_sends_each_gradient_in_its_dtype)
{
    tg_tensor *a = th_rand_uniform(TG_F32, 1, (int64_t[]){2}, 1);
    tg_tensor *b = th_rand_uniform(TG_F64, 1, (int64_t[]){3}, 2), *y = NULL, *w = NULL, *l = NULL;
    tg_tensor_set_requires_grad(a, true);
    tg_tensor_set_requires_grad(b, true);
    cr_assert(eq(int, tg_cat(&y, 2, (tg_tensor *[]){a, b}, 0), TG_OK), "%s", tg_error_message());
    w = th_arange(TG_F64, 1, (int64_t[]){5});
    cr_assert(eq(int, tg_mul(&l, y, w), TG_OK));
    tg_tensor *s = NULL;
    cr_assert(eq(int, tg_sum(&s, l), TG_OK));
    cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(a)), TG_F32));
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(b)), TG_F64));
    for (int k = 0; k < 2; k++) cr_assert(eq(dbl, th_at(tg_tensor_grad(a), k), (double)k));
    for (int k = 0; k < 3; k++) cr_assert(eq(dbl, th_at(tg_tensor_grad(b), k), (double)(k + 2)));
    tg_tensor *all[] = {a, b, y, w, l, s};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
}
