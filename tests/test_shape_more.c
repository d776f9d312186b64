/* tests/test_shape_more.c - tg_repeat_interleave(_tensor), tg_tile,
 * tg_rot90, tg_diff, tg_meshgrid, tg_cartesian_prod, tg_block_diag,
 * tg_triu_indices and tg_tril_indices against PyTorch's (values bit for
 * bit), with their gradients (f64, to rounding), gradcheck and
 * gradgradcheck, views where torch gives views, and the refusals.  Goldens: scripts/make_shape_more_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())
#define MAX_IO 8

static const char *meta(const tg_st_file *f, const char *c, const char *k)
{
    return th_golden_meta(f, c, k);
}

static const tg_tensor *get_opt(const tg_st_file *f, const char *c, const char *k)
{
    char name[64];
    snprintf(name, sizeof name, "%s.%s", c, k);
    return tg_st_get(f, name);
}

/* Runs case c on in[0..count): its results into ys (n_out of them). */
static int run_case(const tg_st_file *f, const char *c, tg_tensor **in, int count, tg_tensor **ys)
{
    const char *op = meta(f, c, "op");
    if (!strcmp(op, "repeat_interleave"))
        return tg_repeat_interleave(&ys[0], in[0], atoll(meta(f, c, "repeats")),
                                    atoi(meta(f, c, "dim")));
    if (!strcmp(op, "repeat_interleave_tensor"))
        return tg_repeat_interleave_tensor(&ys[0], in[0],
                                           (tg_tensor *)th_golden_get(f, c, "repeats"),
                                           atoi(meta(f, c, "dim")));
    if (!strcmp(op, "tile")) {
        int64_t r[TG_MAX_DIMS];
        const char *s = meta(f, c, "reps");
        int n = 0;
        for (char *e; *s; s = *e ? e + 1 : e) r[n++] = strtoll(s, &e, 10);
        return tg_tile(&ys[0], in[0], n, r);
    }
    if (!strcmp(op, "rot90")) {
        int dims[2];
        cr_assert(eq(int, th_dims_of(meta(f, c, "dims"), dims), 2));
        return tg_rot90(&ys[0], in[0], atoll(meta(f, c, "k")), dims);
    }
    if (!strcmp(op, "diff"))
        return tg_diff(&ys[0], in[0], atoll(meta(f, c, "n")), atoi(meta(f, c, "dim")),
                       (tg_tensor *)get_opt(f, c, "prepend"),
                       (tg_tensor *)get_opt(f, c, "append"));
    if (!strcmp(op, "meshgrid"))
        return tg_meshgrid(ys, count, in,
                           !strcmp(meta(f, c, "indexing"), "xy") ? TG_MESHGRID_XY
                                                                 : TG_MESHGRID_IJ);
    if (!strcmp(op, "cartesian_prod")) return tg_cartesian_prod(&ys[0], count, in);
    if (!strcmp(op, "block_diag")) return tg_block_diag(&ys[0], count, in);
    const int64_t row = atoll(meta(f, c, "row")), col = atoll(meta(f, c, "col"));
    const int64_t off = atoll(meta(f, c, "offset"));
    if (!strcmp(op, "triu_indices")) return tg_triu_indices(&ys[0], row, col, off);
    return tg_tril_indices(&ys[0], row, col, off);
}

Test(shape_more, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("shape_more.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int with_grads = 0;
    for (int i = 0; i < n; i++) {
        char c[16], what[160];
        snprintf(c, sizeof c, "case%d", i);
        const int count = atoi(meta(f, c, "count")), outs = atoi(meta(f, c, "outs"));
        tg_tensor *in[MAX_IO] = {NULL}, *ys[MAX_IO] = {NULL}, *wrt[MAX_IO], *d[MAX_IO] = {NULL};
        tg_tensor *gs[MAX_IO];
        int nw = 0;
        for (int j = 0; j < count; j++) {
            char k[16];
            snprintf(k, sizeof k, "in%d", j);
            const tg_tensor *t = th_golden_get(f, c, k);
            if (tg_dtype_is_float(tg_tensor_dtype(t))) in[j] = th_leaf_clone(t);
            else OK(tg_tensor_clone(&in[j], t));
            if (tg_tensor_dtype(in[j]) == TG_F64) wrt[nw++] = in[j];
        }
        snprintf(what, sizeof what, "%s (%s)", c, meta(f, c, "op"));
        OK(run_case(f, c, in, count, ys));
        for (int j = 0; j < outs; j++) {
            char k[16];
            snprintf(k, sizeof k, "y%d", j);
            th_expect_close(what, ys[j], th_golden_get(f, c, k), 0);
            snprintf(k, sizeof k, "g%d", j);
            gs[j] = (tg_tensor *)th_golden_get(f, c, k);
        }
        if (nw > 0 && tg_tensor_dtype(ys[0]) == TG_F64) {
            OK(tg_grad(d, outs, ys, gs, nw, wrt, NULL));
            for (int j = 0; j < nw; j++) {
                char k[16], w2[192];
                snprintf(k, sizeof k, "d%d", j);
                snprintf(w2, sizeof w2, "%s of %s", k, what);
                /* sums of copies' gradients (tile, repeat_interleave) may
                 * add in another order than torch's: f64 rounding */
                if (d[j]) th_expect_near(w2, d[j], th_golden_get(f, c, k), 1e-15, 1e-14);
                else cr_assert(eq(dbl, th_at(th_golden_get(f, c, k), 0), 0.0), "%s", w2);
            }
            with_grads++;
        }
        th_release_all(MAX_IO, in);
        th_release_all(MAX_IO, ys);
        th_release_all(MAX_IO, d);
    }
    cr_assert(n >= 150 && with_grads >= 100, "%d cases, %d with gradients", n, with_grads);
    tg_st_free(f);
}

static int gc_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const int k = *(const int *)user;
    tg_tensor *r = th_vec(TG_I64, 3, (double[]){2, 0, 1}, "r", false), *m[2] = {NULL};
    int rc;
    switch (k) {
    case 0: rc = tg_repeat_interleave_tensor(out, in[0], r, 0); break;
    case 1: rc = tg_tile(out, in[0], 1, (int64_t[]){2}); break;
    case 2: rc = tg_rot90(out, in[0], 1, (int[]){0, 1}); break;
    case 3: rc = tg_diff(out, in[0], 2, 1, n > 1 ? in[1] : NULL, NULL); break;
    case 4: rc = tg_block_diag(out, n, in); break;
    default:
        rc = tg_meshgrid(m, 2, in, TG_MESHGRID_XY);
        if (rc >= 0) rc = tg_mul(out, m[0], m[1]);
        th_release_all(2, m);
        break;
    }
    tg_tensor_release(r);
    return rc;
}

Test(shape_more, gradcheck_and_gradgradcheck)
{
    /* x (3, 4) and a second input for diff's prepend, block_diag and meshgrid */
    const int64_t s2[6][2] = {{0, 0}, {0, 0}, {0, 0}, {3, 2}, {2, 2}, {3, 0}};
    for (int k = 0; k < 6; k++) {
        uint64_t s = 1200 + (uint64_t)k;
        const int n = s2[k][0] ? 2 : 1;
        tg_tensor *in[2] = {NULL, NULL};
        in[0] = k == 5 ? th_rand_tensor(&s, TG_F64, 1, (int64_t[]){4}, -2, 2)
                       : th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, -2, 2);
        if (n > 1)
            in[1] = th_rand_tensor(&s, TG_F64, s2[k][1] ? 2 : 1, s2[k], -2, 2);
        for (int j = 0; j < n; j++) OK(tg_tensor_set_requires_grad(in[j], true));
        th_expect_gradchecks(gc_fn, &k, n, in, "case %d", k);
        th_release_all(2, in);
    }
}

/* meshgrid gives views of its inputs, rot90 by 1 a transposed view. */
Test(shape_more, views_as_torch)
{
    tg_tensor *a = th_seq(TG_F32, 1, (int64_t[]){2}, 1, 2);
    tg_tensor *b = th_seq(TG_F32, 1, (int64_t[]){3}, 3, 5), *m[2] = {NULL}, *r = NULL;
    OK(tg_meshgrid(m, 2, (tg_tensor *[]){a, b}, TG_MESHGRID_IJ));
    cr_assert(tg_tensor_shares_storage(m[0], a));
    cr_assert(tg_tensor_shares_storage(m[1], b));
    th_expect_shape(m[1], 2, (int64_t[]){2, 3});
    tg_tensor *x = th_seq(TG_F32, 2, (int64_t[]){2, 3}, 0, 5);
    OK(tg_rot90(&r, x, 1, (int[]){0, 1}));
    cr_assert(not(tg_tensor_is_contiguous(r)));
    th_expect_shape(r, 2, (int64_t[]){3, 2});
    th_release_all(6, (tg_tensor *[]){a, b, m[0], m[1], x, r});
}

Test(shape_more, refusals)
{
    tg_tensor *x = th_seq(TG_F32, 2, (int64_t[]){2, 3}, 0, 1), *s = NULL;
    tg_tensor *r2 = th_vec(TG_I64, 2, (double[]){1, 2}, "r", false);
    tg_tensor *rn = th_vec(TG_I64, 3, (double[]){1, -1, 2}, "rn", false);
    tg_tensor *rf = th_vec(TG_F32, 3, (double[]){1, 1, 2}, "rf", false);
    tg_tensor *v = th_seq(TG_F32, 1, (int64_t[]){3}, 0, 1);
    tg_tensor *vd = th_seq(TG_F64, 1, (int64_t[]){2}, 0, 1);
    tg_tensor *c3 = th_seq(TG_F32, 3, (int64_t[]){1, 1, 1}, 0, 1);
    tg_tensor *p = th_seq(TG_F32, 2, (int64_t[]){1, 2}, 0, 1);
    OK(tg_tensor_zeros(&s, TG_F32, 0, NULL));
    th_expect_refused_clean(tg_repeat_interleave(out_, x, -1, 0), TG_EINVAL, "repeats=-1");
    th_expect_refused_clean(tg_repeat_interleave(out_, s, 2, 0), TG_ESHAPE, "0-d");
    th_expect_refused_clean(tg_repeat_interleave(out_, x, 2, 2), TG_EINVAL, "dim=2");
    th_expect_refused_clean(tg_repeat_interleave_tensor(out_, x, r2, 1), TG_ESHAPE,
                            "repeats has 2 values; it must have 1 or x.size(1)=3");
    th_expect_refused_clean(tg_repeat_interleave_tensor(out_, x, rn, 1), TG_EINVAL,
                            "repeats[1]=-1 must be >= 0");
    th_expect_refused_clean(tg_repeat_interleave_tensor(out_, x, rf, 1), TG_EDTYPE, "f32");
    th_expect_refused_clean(tg_rot90(out_, v, 1, (int[]){0, 1}), TG_ESHAPE, "at least 2");
    th_expect_refused_clean(tg_rot90(out_, x, 1, (int[]){1, -1}), TG_EINVAL, "two different");
    th_expect_refused_clean(tg_diff(out_, x, -1, 0, NULL, NULL), TG_EINVAL, "n=-1");
    th_expect_refused_clean(tg_diff(out_, s, 1, 0, NULL, NULL), TG_ESHAPE, "0-d");
    th_expect_refused_clean(tg_diff(out_, x, 1, 0, v, NULL), TG_ESHAPE, "prepend has 1 dims");
    th_expect_refused_clean(tg_diff(out_, x, 1, 0, NULL, p), TG_ESHAPE,
                            "append.size(1)=2 must match x.size(1)=3");
    tg_tensor *m[2] = {NULL, NULL};
    cr_assert(eq(int, tg_meshgrid(m, 2, (tg_tensor *[]){v, vd}, TG_MESHGRID_IJ), TG_EDTYPE));
    cr_assert(eq(int, tg_meshgrid(m, 1, (tg_tensor *[]){x}, TG_MESHGRID_IJ), TG_ESHAPE));
    cr_assert(eq(int, tg_meshgrid(m, 1, (tg_tensor *[]){v}, (tg_meshgrid_indexing)7),
                 TG_EINVAL));
    cr_assert(m[0] == NULL);
    th_expect_refused_clean(tg_cartesian_prod(out_, 2, (tg_tensor *[]){v, vd}), TG_EDTYPE,
                            "tensors[1] has dtype f64");
    th_expect_refused_clean(tg_cartesian_prod(out_, 1, (tg_tensor *[]){x}), TG_ESHAPE, "1-d");
    th_expect_refused_clean(tg_block_diag(out_, 2, (tg_tensor *[]){v, c3}), TG_ESHAPE,
                            "tensors[1] has 3 dims");
    th_expect_refused_clean(tg_triu_indices(out_, -1, 3, 0), TG_EINVAL, "row=-1");
    th_expect_refused_clean(tg_tril_indices(out_, 3, -2, 0), TG_EINVAL, "col=-2");
    th_release_all(9, (tg_tensor *[]){x, s, r2, rn, rf, v, vd, c3, p});
}
