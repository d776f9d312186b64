/* tests/test_embedding_bag.c - tg_embedding_bag against PyTorch's
 * F.embedding_bag: modes sum, mean and max; 1-d input with offsets (empty
 * bags, include_last_offset) and 2-d input; per_sample_weights; padding_idx
 * (positive and negative); i64 and i32 indices; values and the gradients
 * of weight and per_sample_weights in f64 and f32.  Then gradcheck and
 * gradgradcheck in f64, the sparse gradient against the dense one,
 * max_norm, the EmbeddingBag module (its inputs, from_pretrained, options)
 * and the refusals.  Goldens: scripts/make_pool_more_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static tg_embedding_bag_mode mode_of(const char *s)
{
    if (strcmp(s, "sum") == 0) return TG_EMBEDDING_BAG_SUM;
    if (strcmp(s, "mean") == 0) return TG_EMBEDDING_BAG_MEAN;
    cr_assert(eq(str, (char *)s, "max"));
    return TG_EMBEDDING_BAG_MAX;
}

/* Values and gradients: f64 within 1e-14 of torch's, f32 within 1e-6 (the
 * sums in torch's order; its f32 kernel may fuse the weight's multiply). */
Test(embedding_bag, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("embedding_bag.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per_mode[3] = {0}, psw_cases = 0, pad = 0, two_d = 0, last = 0;
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", i);
        tg_embedding_bag_opts o = TG_EMBEDDING_BAG_OPTS_INIT;
        o.mode = mode_of(th_golden_meta(f, c, "mode"));
        const char *p = th_golden_meta(f, c, "padding_idx");
        if (strcmp(p, "none") != 0) o.padding_idx = atoll(p);
        o.include_last_offset = atoi(th_golden_meta(f, c, "include_last_offset")) != 0;
        const bool has_psw = atoi(th_golden_meta(f, c, "psw")) != 0;
        const bool has_off = atoi(th_golden_meta(f, c, "offsets")) != 0;
        const tg_tensor *w0 = th_golden_get(f, c, "weight");
        const double tol = tg_tensor_dtype(w0) == TG_F32 ? 1e-6 : 1e-14;
        tg_tensor *w = th_leaf_clone(w0), *y = NULL;
        tg_tensor *ps = has_psw ? th_leaf_clone(th_golden_get(f, c, "psw")) : NULL;
        OK(tg_embedding_bag(&y, w, (tg_tensor *)th_golden_get(f, c, "input"),
                            has_off ? (tg_tensor *)th_golden_get(f, c, "offsets") : NULL, ps,
                            &o));
        th_expect_close_scaled(c, y, th_golden_get(f, c, "y"), tol);
        th_backward_with(y, th_golden_get(f, c, "grad_y"));
        th_expect_close_scaled(c, tg_tensor_grad(w), th_golden_get(f, c, "grad_weight"), tol);
        if (ps)
            th_expect_close_scaled(c, tg_tensor_grad(ps), th_golden_get(f, c, "grad_psw"), tol);
        per_mode[o.mode]++;
        psw_cases += has_psw;
        pad += o.padding_idx != TG_EMBEDDING_NO_PADDING;
        two_d += !has_off;
        last += o.include_last_offset;
        th_release_all(3, (tg_tensor *[]){w, ps, y});
    }
    cr_assert(per_mode[0] >= 10 && per_mode[1] >= 8 && per_mode[2] >= 8 && psw_cases >= 6 &&
                  pad >= 12 && two_d >= 6 && last >= 6,
              "golden has %d/%d/%d cases by mode, %d psw, %d padding, %d 2-d, %d last",
              per_mode[0], per_mode[1], per_mode[2], psw_cases, pad, two_d, last);
    tg_st_free(f);
}

/* Bags by hand: weight rows r_i = (i, 10 i); input (1, 2, 4, 4, 3) with
 * offsets (0, 2, 2) gives bags {1, 2}, {}, {4, 4, 3}: sum (3, 30), 0,
 * (11, 110); mean (1.5, 15), 0, (11/3, 110/3); max (2, 20), 0, (4, 40).
 * padding_idx 4 leaves {3} in the last bag. */
Test(embedding_bag, bags_by_hand)
{
    double wv[12];
    for (int i = 0; i < 6; i++) wv[2 * i] = i, wv[2 * i + 1] = 10 * i;
    tg_tensor *w = th_tensor_from(TG_F64, 2, (int64_t[]){6, 2}, wv);
    tg_tensor *in = th_tensor_from(TG_I64, 1, (int64_t[]){5}, (double[]){1, 2, 4, 4, 3});
    tg_tensor *off = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){0, 2, 2});
    const double want[4][6] = {{3, 30, 0, 0, 11, 110},
                               {1.5, 15, 0, 0, 11.0 / 3, 110.0 / 3},
                               {2, 20, 0, 0, 4, 40},
                               {1.5, 15, 0, 0, 3, 30}};
    for (int m = 0; m < 4; m++) {
        tg_embedding_bag_opts o = TG_EMBEDDING_BAG_OPTS_INIT;
        o.mode = m == 3 ? TG_EMBEDDING_BAG_MEAN : (tg_embedding_bag_mode)m;
        if (m == 3) o.padding_idx = 4;
        tg_tensor *y = NULL;
        OK(tg_embedding_bag(&y, w, in, off, NULL, &o));
        th_expect_shape(y, 2, (int64_t[]){3, 2});
        for (int e = 0; e < 6; e++)
            cr_assert(epsilon_eq(dbl, th_at(y, e), want[m][e], 1e-15), "mode %d [%d]", m, e);
        tg_tensor_release(y);
    }
    th_release_all(3, (tg_tensor *[]){w, in, off});
}

typedef struct bcall {
    tg_embedding_bag_mode mode;
    bool psw;
    int64_t pad;
} bcall;

static int bfn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const bcall *c = user;
    tg_tensor *x = th_tensor_from(TG_I64, 1, (int64_t[]){7}, (double[]){0, 3, 3, 1, 4, 2, 0});
    tg_tensor *off = th_tensor_from(TG_I64, 1, (int64_t[]){4}, (double[]){0, 3, 3, 5});
    tg_embedding_bag_opts o = TG_EMBEDDING_BAG_OPTS_INIT;
    o.mode = c->mode;
    o.padding_idx = c->pad;
    const int rc = tg_embedding_bag(out, in[0], x, off, n > 1 ? in[1] : NULL, &o);
    th_release_all(2, (tg_tensor *[]){x, off});
    return rc;
}

/* weight (and per_sample_weights) to second order (f64; distinct weights,
 * so that max's choice does not move). */
Test(embedding_bag, gradcheck_and_gradgradcheck)
{
    const bcall calls[] = {
        {TG_EMBEDDING_BAG_SUM, false, TG_EMBEDDING_NO_PADDING},
        {TG_EMBEDDING_BAG_SUM, true, TG_EMBEDDING_NO_PADDING},
        {TG_EMBEDDING_BAG_SUM, true, 3},
        {TG_EMBEDDING_BAG_MEAN, false, 0},
        {TG_EMBEDDING_BAG_MAX, false, TG_EMBEDDING_NO_PADDING},
        {TG_EMBEDDING_BAG_MAX, false, 2},
    };
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        double v[15];
        for (int e = 0; e < 15; e++) v[e] = (double)((e * 7) % 15) * 0.1 - 0.5;
        tg_tensor *in[2] = {th_tensor_from(TG_F64, 2, (int64_t[]){5, 3}, v),
                            th_seq(TG_F64, 1, (int64_t[]){7}, -1.0, 1.5)};
        OK(tg_tensor_set_requires_grad(in[0], true));
        OK(tg_tensor_set_requires_grad(in[1], true));
        th_expect_gradchecks(bfn, (void *)&calls[i], calls[i].psw ? 2 : 1, in, "call %zu", i);
        th_release_all(2, in);
    }
}

/* sparse=True: weight's gradient is a sparse COO tensor, one row per kept
 * position, equal as a dense tensor to the dense gradient. */
Test(embedding_bag, sparse_gradient_is_the_dense_one)
{
    tg_tensor *x = th_tensor_from(TG_I64, 1, (int64_t[]){6}, (double[]){1, 2, 0, 2, 4, 0});
    tg_tensor *off = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){0, 2, 2});
    tg_tensor *gy = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 3}, 5);
    for (int m = 0; m < 2; m++) {
        tg_tensor *grads[2] = {NULL, NULL};
        for (int s = 0; s < 2; s++) {
            tg_tensor *w = th_rand_uniform(TG_F32, 2, (int64_t[]){5, 3}, 4), *y = NULL;
            OK(tg_tensor_set_requires_grad(w, true));
            tg_embedding_bag_opts o = TG_EMBEDDING_BAG_OPTS_INIT;
            o.mode = (tg_embedding_bag_mode)m;
            o.padding_idx = 0;
            o.sparse = s;
            OK(tg_embedding_bag(&y, w, x, off, NULL, &o));
            th_backward_with(y, gy);
            cr_assert(tg_tensor_is_sparse(tg_tensor_grad(w)) == (s == 1), "mode %d", m);
            if (s) {
                cr_assert(eq(i64, tg_sparse_nnz(tg_tensor_grad(w)), 4), "padding rows left out");
                OK(tg_sparse_to_dense(&grads[s], tg_tensor_grad(w)));
            } else {
                OK(tg_tensor_clone(&grads[s], tg_tensor_grad(w)));
            }
            th_release_all(2, (tg_tensor *[]){w, y});
        }
        th_expect_close("sparse", grads[1], grads[0], 1e-6);
        th_release_all(2, grads);
    }
    th_release_all(3, (tg_tensor *[]){x, off, gy});
}

/* max_norm renormalises the picked rows of weight in place first, as
 * F.embedding's: rows of norm 5 become norm 1 (within 1e-6), others stay. */
Test(embedding_bag, max_norm)
{
    tg_tensor *w = th_tensor_from(TG_F64, 2, (int64_t[]){3, 2}, (double[]){3, 4, 0.3, 0.4, 6, 8});
    tg_tensor *x = th_tensor_from(TG_I64, 2, (int64_t[]){1, 2}, (double[]){0, 1});
    tg_tensor *y = NULL;
    tg_embedding_bag_opts o = TG_EMBEDDING_BAG_OPTS_INIT;
    o.mode = TG_EMBEDDING_BAG_SUM;
    o.max_norm = 1.0;
    OK(tg_embedding_bag(&y, w, x, NULL, NULL, &o));
    cr_assert(epsilon_eq(dbl, th_at(w, 0), 0.6, 1e-6));
    cr_assert(eq(dbl, th_at(w, 2), 0.3));
    cr_assert(eq(dbl, th_at(w, 4), 6), "a row not picked stays");
    cr_assert(epsilon_eq(dbl, th_at(y, 0), 0.9, 1e-6));
    th_release_all(3, (tg_tensor *[]){w, x, y});
}

/* The module: type name, N(0, 1) weight with the padding row zeroed, its
 * inputs for 1-d and 2-d input, from_pretrained and its options. */
Test(embedding_bag, module)
{
    tg_rng rng;
    tg_rng_init(&rng, 3);
    tg_embedding_bag_opts o = TG_EMBEDDING_BAG_OPTS_INIT;
    o.mode = TG_EMBEDDING_BAG_SUM;
    o.padding_idx = -1;
    tg_module *m = NULL;
    OK(tg_nn_embedding_bag_new(&m, 6, 4, &o, &rng));
    cr_assert(eq(str, (char *)tg_module_type_name(m), "EmbeddingBag"));
    tg_embedding_bag_opts got;
    OK(tg_nn_embedding_bag_options(m, &got));
    cr_assert(eq(i64, got.padding_idx, 5));
    tg_tensor *w = tg_module_find(m, "weight");
    for (int j = 0; j < 4; j++) cr_assert(eq(dbl, th_at(w, 20 + j), 0), "padding row");
    tg_tensor *x1 = th_tensor_from(TG_I64, 1, (int64_t[]){4}, (double[]){1, 5, 2, 3});
    tg_tensor *off = th_tensor_from(TG_I64, 1, (int64_t[]){2}, (double[]){0, 2});
    tg_tensor *ps = th_seq(TG_F32, 1, (int64_t[]){4}, 0.5, 2);
    tg_tensor *x2 = th_tensor_from(TG_I64, 2, (int64_t[]){2, 2}, (double[]){1, 5, 2, 3});
    tg_tensor *ps2 = th_seq(TG_F32, 2, (int64_t[]){2, 2}, 0.5, 2);
    tg_tensor *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    OK(tg_module_forward_n(m, &a, 2, (tg_tensor *[]){x1, off}));
    OK(tg_module_forward(m, &b, x2));
    cr_assert(th_same_bits(a, b), "1-d with offsets and 2-d agree");
    th_release_all(2, (tg_tensor *[]){a, b});
    OK(tg_module_forward_n(m, &a, 3, (tg_tensor *[]){x1, off, ps}));
    OK(tg_module_forward_n(m, &b, 2, (tg_tensor *[]){x2, ps2}));
    cr_assert(th_same_bits(a, b), "per_sample_weights with 1-d and 2-d");
    OK(tg_embedding_bag(&c, w, x1, off, ps, &o));
    cr_assert(th_same_bits(a, c), "module and function");
    cr_assert(eq(int, tg_module_forward_n(m, &d, 3, (tg_tensor *[]){x2, off, ps}), TG_EINVAL));
    cr_assert(eq(int, tg_module_forward(m, &d, x1), TG_EINVAL), "1-d without offsets");
    tg_module *p = NULL;
    OK(tg_nn_embedding_bag_from_pretrained(&p, w, true, NULL));
    OK(tg_nn_embedding_bag_options(p, &got));
    cr_assert(eq(int, got.mode, TG_EMBEDDING_BAG_MEAN), "torch's default mode");
    cr_assert(tg_tensor_requires_grad(tg_module_find(p, "weight")) == false, "frozen");
    cr_assert(eq(int, tg_nn_embedding_bag_options(NULL, &got), TG_EINVAL));
    tg_module_release(p);
    tg_module_release(m);
    th_release_all(8, (tg_tensor *[]){x1, off, ps, x2, ps2, a, b, c});
    o.mode = TG_EMBEDDING_BAG_MAX;
    o.sparse = true;
    cr_assert(eq(int, tg_nn_embedding_bag_new(&m, 6, 4, &o, &rng), TG_EINVAL));
    o = (tg_embedding_bag_opts)TG_EMBEDDING_BAG_OPTS_INIT;
    o.padding_idx = 6;
    cr_assert(eq(int, tg_nn_embedding_bag_new(&m, 6, 4, &o, &rng), TG_EINVAL));
}

/* torch's rules, and the stricter ones (offsets must not decrease;
 * include_last_offset with a 2-d input). */
Test(embedding_bag, refusals)
{
    tg_tensor *w = th_rand_uniform(TG_F32, 2, (int64_t[]){5, 3}, 1);
    tg_tensor *x = th_tensor_from(TG_I64, 1, (int64_t[]){4}, (double[]){0, 1, 2, 3});
    tg_tensor *x2 = th_tensor_from(TG_I64, 2, (int64_t[]){2, 2}, (double[]){0, 1, 2, 3});
    tg_tensor *bad = th_tensor_from(TG_I64, 1, (int64_t[]){4}, (double[]){0, 1, 5, 3});
    tg_tensor *off = th_tensor_from(TG_I64, 1, (int64_t[]){2}, (double[]){0, 2});
    tg_tensor *off1 = th_tensor_from(TG_I64, 1, (int64_t[]){2}, (double[]){1, 2});
    tg_tensor *offd = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){0, 3, 2});
    tg_tensor *offl = th_tensor_from(TG_I64, 1, (int64_t[]){2}, (double[]){0, 5});
    tg_tensor *off32 = th_tensor_from(TG_I32, 1, (int64_t[]){2}, (double[]){0, 2});
    tg_tensor *ps = th_seq(TG_F32, 1, (int64_t[]){4}, 0, 1);
    tg_tensor *ps64 = th_seq(TG_F64, 1, (int64_t[]){4}, 0, 1);
    tg_tensor *fx = th_seq(TG_F32, 1, (int64_t[]){4}, 0, 1);
    tg_embedding_bag_opts o = TG_EMBEDDING_BAG_OPTS_INIT, mean = o, sum = o, max = o;
    sum.mode = TG_EMBEDDING_BAG_SUM;
    max.mode = TG_EMBEDDING_BAG_MAX;
    th_expect_refused_clean(tg_embedding_bag(out_, w, bad, off, NULL, &o), TG_EINVAL, "5");
    th_expect_refused_clean(tg_embedding_bag(out_, w, x, off1, NULL, &o), TG_EINVAL,
                            "offsets[0]=1");
    th_expect_refused_clean(tg_embedding_bag(out_, w, x, offd, NULL, &o), TG_EINVAL,
                            "not decrease");
    th_expect_refused_clean(tg_embedding_bag(out_, w, x, offl, NULL, &o), TG_EINVAL,
                            "offsets[-1]=5");
    th_expect_refused_clean(tg_embedding_bag(out_, w, x, off32, NULL, &o), TG_EDTYPE,
                            "offsets");
    th_expect_refused_clean(tg_embedding_bag(out_, w, x, NULL, NULL, &o), TG_EINVAL, "offsets");
    th_expect_refused_clean(tg_embedding_bag(out_, w, x2, off, NULL, &o), TG_EINVAL, "2-d");
    th_expect_refused_clean(tg_embedding_bag(out_, w, x, off, ps, &mean), TG_EINVAL,
                            "only supported for mode sum");
    th_expect_refused_clean(tg_embedding_bag(out_, w, x, off, ps64, &sum), TG_EDTYPE,
                            "per_sample_weights");
    th_expect_refused_clean(tg_embedding_bag(out_, w, x2, NULL, ps, &sum), TG_ESHAPE,
                            "per_sample_weights");
    th_expect_refused_clean(tg_embedding_bag(out_, w, fx, off, NULL, &o), TG_EDTYPE, "input");
    max.sparse = true;
    th_expect_refused_clean(tg_embedding_bag(out_, w, x, off, NULL, &max), TG_EINVAL, "sparse");
    max.sparse = false;
    max.scale_grad_by_freq = true;
    th_expect_refused_clean(tg_embedding_bag(out_, w, x, off, NULL, &max), TG_EINVAL,
                            "frequency");
    o.include_last_offset = true;
    th_expect_refused_clean(tg_embedding_bag(out_, w, x2, NULL, NULL, &o), TG_EINVAL,
                            "include_last_offset");
    o.include_last_offset = false;
    o.padding_idx = 5;
    th_expect_refused_clean(tg_embedding_bag(out_, w, x, off, NULL, &o), TG_EINVAL,
                            "padding_idx");
    o.padding_idx = TG_EMBEDDING_NO_PADDING;
    o.mode = (tg_embedding_bag_mode)7;
    th_expect_refused_clean(tg_embedding_bag(out_, w, x, off, NULL, &o), TG_EINVAL, "mode");
    th_expect_refused_clean(tg_embedding_bag(out_, NULL, x, off, NULL, NULL), TG_EINVAL, "NULL");
    th_expect_refused_clean(tg_embedding_bag(out_, x, x, off, NULL, NULL), TG_ESHAPE, "weight");
    th_release_all(12, (tg_tensor *[]){w, x, x2, bad, off, off1, offd, offl, off32, ps, ps64,
                                       fx});
}
