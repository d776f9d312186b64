/* tests/test_grid_sample.c - tg_grid_sample and tg_affine_grid against
 * PyTorch 1.13's F.grid_sample and F.affine_grid, values and gradients
 * (every mode, padding and align_corners; 4-D and 5-D; grids reaching
 * outside the input and points on the clip ends; f64 and f32), gradcheck
 * in f64 away from the kinks, gradgradcheck of affine_grid, the identity
 * grid reproducing the input, the same bits at 1 and 2 threads, strided
 * inputs, autocast, NaN coordinates, empty batches and grids, the refused
 * second derivative and the refusals.
 * Goldens: scripts/make_grid_sample_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* ---- PyTorch's numbers ---- */

/* Relative to the largest value: f64 within 2e-14 (seen: 1e-14), f32
 * within 2e-6 (seen: 1e-6; torch's 2-D kernel computes the weights as
 * 1 - (r - floor(r)) and its bicubic rows in vector order), the grid
 * gradient, a sum over the channels of values times weight derivatives,
 * within 4e-6. */
static double tol_of(tg_dtype dt, bool grid) { return dt == TG_F64 ? 2e-14 : grid ? 4e-6 : 2e-6; }

Test(grid_sample, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("grid_sample.safetensors");
    const int n = atoi(tg_st_meta_get(f, "gs_cases"));
    int seen[3][3] = {{0}}, five = 0, aligned = 0, f32 = 0;
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "gs%d", i);
        const int mode = atoi(th_golden_meta(f, c, "mode"));
        const int pad = atoi(th_golden_meta(f, c, "pad"));
        const bool align = atoi(th_golden_meta(f, c, "align")) != 0;
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x"));
        tg_tensor *grid = th_leaf_clone(th_golden_get(f, c, "grid")), *y = NULL;
        const tg_dtype dt = tg_tensor_dtype(x);
        OK(tg_grid_sample(&y, x, grid, mode, pad, align));
        char what[64];
        snprintf(what, sizeof what, "%s (mode %d, pad %d, align %d) y", c, mode, pad, align);
        th_expect_close_scaled(what, y, th_golden_get(f, c, "y"), tol_of(dt, false));
        th_backward_with(y, th_golden_get(f, c, "grad_y"));
        snprintf(what, sizeof what, "%s (mode %d, pad %d, align %d) dx", c, mode, pad, align);
        th_expect_close_scaled(what, tg_tensor_grad(x), th_golden_get(f, c, "grad_x"),
                               tol_of(dt, false));
        snprintf(what, sizeof what, "%s (mode %d, pad %d, align %d) dgrid", c, mode, pad, align);
        th_expect_close_scaled(what, tg_tensor_grad(grid), th_golden_get(f, c, "grad_grid"),
                               tol_of(dt, true));
        seen[mode][pad]++;
        five += tg_tensor_ndim(x) == 5;
        aligned += align;
        f32 += dt == TG_F32;
        th_release_all(3, (tg_tensor *[]){x, grid, y});
    }
    for (int m = 0; m < 3; m++)
        for (int p = 0; p < 3; p++)
            cr_assert(seen[m][p] >= 4, "mode %d padding %d: %d cases", m, p, seen[m][p]);
    cr_assert(five >= 20 && aligned >= n / 2 && f32 >= n / 2, "%d 5-D, %d aligned, %d f32",
              five, aligned, f32);
    tg_st_free(f);
}

Test(grid_sample, affine_grid_matches_torch)
{
    tg_st_file *f = th_golden_load("grid_sample.safetensors");
    const int n = atoi(tg_st_meta_get(f, "ag_cases"));
    int five = 0;
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "ag%d", i);
        int64_t size[5];
        th_ints_of(th_golden_meta(f, c, "size"), size);
        const int nd = tg_tensor_ndim(th_golden_get(f, c, "y")) == 4 ? 4 : 5;
        const bool align = atoi(th_golden_meta(f, c, "align")) != 0;
        tg_tensor *theta = th_leaf_clone(th_golden_get(f, c, "theta")), *y = NULL;
        const double tol = tg_tensor_dtype(theta) == TG_F64 ? 1e-14 : 1e-6;
        OK(tg_affine_grid(&y, theta, nd, size, align));
        th_expect_close_scaled(c, y, th_golden_get(f, c, "y"), tol);
        th_backward_with(y, th_golden_get(f, c, "grad_y"));
        th_expect_close_scaled(c, tg_tensor_grad(theta), th_golden_get(f, c, "grad_theta"), tol);
        five += nd == 5;
        th_release_all(2, (tg_tensor *[]){theta, y});
    }
    cr_assert(n >= 16 && five >= 8, "%d cases, %d 5-D", n, five);
    tg_st_free(f);
}

/* ---- derivatives ---- */

typedef struct gs_call {
    tg_grid_sample_mode mode;
    tg_grid_sample_padding pad;
    bool align;
} gs_call;

static int gs_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const gs_call *c = user;
    return tg_grid_sample(out, in[0], in[1], c->mode, c->pad, c->align);
}

/* A grid (N, O..., ns) whose pixel positions r all lie 0.15 to 0.35 past
 * an integer or a half (never within 0.15 of a kink of the weights, the
 * clip or the reflection, nor of nearest's ties), -1.5 to S + 0.5 along
 * an axis of extent S, as grid coordinates for align. */
static tg_tensor *grid_off_kinks(uint64_t *s, int nd, const int64_t *gshape, const int64_t *in,
                                 bool align)
{
    const int ns = nd - 2;
    int64_t total = 1;
    for (int d = 0; d < nd; d++) total *= gshape[d];
    double *v = malloc((size_t)total * sizeof *v);
    cr_assert(v != NULL);
    for (int64_t i = 0; i < total; i++) {
        const int64_t S = in[ns - 1 - i % ns];   /* coordinate 0 is the last axis */
        const double base = (double)th_rand_int(s, -3, 2 * S + 1) / 2;   /* -1.5 .. S + 0.5 */
        const double r = base + 0.15 + 0.2 * (double)th_rand_int(s, 0, 1000) / 1000;
        v[i] = align ? 2 * r / (double)(S - 1) - 1 : (2 * r + 1) / (double)S - 1;
    }
    tg_tensor *g = th_tensor_from(TG_F64, nd, gshape, v);
    free(v);
    OK(tg_tensor_set_requires_grad(g, true));
    return g;
}

/* d input and d grid by central differences, every mode, padding and
 * align_corners, 4-D and 5-D; nearest's grid gradient is 0 there. */
Test(grid_sample, gradcheck_in_f64)
{
    uint64_t s = 91;
    const int64_t xs4[4] = {2, 2, 3, 4}, gs4[4] = {2, 2, 3, 2};
    const int64_t xs5[5] = {1, 2, 2, 3, 3}, gs5[5] = {1, 2, 1, 2, 3};
    int checked = 0;
    for (int nd = 4; nd <= 5; nd++)
        for (int mode = 0; mode < 3; mode++)
            for (int pad = 0; pad < 3; pad++)
                for (int align = 0; align < 2; align++) {
                    if (nd == 5 && mode == TG_GRID_SAMPLE_BICUBIC) continue;
                    const int64_t *xs = nd == 4 ? xs4 : xs5, *gs = nd == 4 ? gs4 : gs5;
                    tg_tensor *x = th_rand_tensor(&s, TG_F64, nd, xs, -1, 1);
                    OK(tg_tensor_set_requires_grad(x, true));
                    tg_tensor *g = grid_off_kinks(&s, nd, gs, xs + 2, align);
                    gs_call c = {mode, pad, align != 0};
                    const tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
                    cr_assert(eq(int, tg_gradcheck(gs_fn, &c, 2, (tg_tensor *[]){x, g}, &o),
                                 TG_OK),
                              "%d-D mode %d padding %d align %d: %s", nd, mode, pad, align,
                              tg_error_message());
                    checked++;
                    th_release_all(2, (tg_tensor *[]){x, g});
                }
    cr_assert(eq(int, checked, 30));
}

/* A create_graph backward gives gradients that carry a graph (as torch's);
 * differentiating them again is refused, as torch 1.13's
 * grid_sampler_2d_backward has no derivative; a plain backward after that
 * still works. */
Test(grid_sample, second_derivative_is_refused)
{
    uint64_t s = 12;
    const int64_t xs[4] = {1, 2, 3, 3}, gs[4] = {1, 2, 2, 2};
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 4, xs, -1, 1), *y = NULL, *ys = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    tg_tensor *g = grid_off_kinks(&s, 4, gs, xs + 2, false), *d[2] = {NULL, NULL}, *ds = NULL;
    OK(tg_grid_sample(&y, x, g, TG_GRID_SAMPLE_BILINEAR, TG_GRID_SAMPLE_ZEROS, false));
    OK(tg_sum(&ys, y));
    tg_backward_opts bo = TG_BACKWARD_OPTS_INIT;
    bo.create_graph = true;
    OK(tg_grad(d, 1, &ys, NULL, 2, (tg_tensor *[]){x, g}, &bo));
    cr_assert(tg_tensor_requires_grad(d[1]), "the grid's gradient carries a graph");
    OK(tg_sum(&ds, d[1]));
    tg_tensor *dd = NULL;
    cr_assert(eq(int, tg_grad(&dd, 1, &ds, NULL, 1, &x, NULL), TG_EUNSUPPORTED));
    th_expect_in(tg_error_message(), "grid_sample_backward");
    th_expect_in(tg_error_message(), "not implemented");
    cr_assert(dd == NULL, "no gradient after the refusal");
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    gs_call c = {TG_GRID_SAMPLE_BILINEAR, TG_GRID_SAMPLE_ZEROS, false};
    cr_assert(tg_gradgradcheck(gs_fn, &c, 2, (tg_tensor *[]){x, g}, &o) < 0,
              "gradgradcheck cannot pass");
    th_release_all(8, (tg_tensor *[]){x, g, y, ys, d[0], d[1], ds, dd});
}

typedef struct ag_call {
    int n;
    int64_t size[5];
    bool align;
} ag_call;

static int ag_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const ag_call *c = user;
    return tg_affine_grid(out, in[0], c->n, c->size, c->align);
}

Test(grid_sample, affine_grid_gradchecks)
{
    uint64_t s = 3;
    const ag_call calls[4] = {{4, {2, 1, 3, 4}, false},
                              {4, {2, 1, 3, 4}, true},
                              {5, {2, 1, 2, 3, 2}, false},
                              {5, {1, 1, 1, 2, 3}, true}};
    for (int i = 0; i < 4; i++) {
        const int r = calls[i].n - 2;
        tg_tensor *t =
            th_rand_tensor(&s, TG_F64, 3, (int64_t[]){calls[i].size[0], r, r + 1}, -1, 1);
        OK(tg_tensor_set_requires_grad(t, true));
        th_expect_gradchecks(ag_fn, (void *)&calls[i], 1, &t, "affine_grid call %d", i);
        tg_tensor_release(t);
    }
}

/* ---- invariants ---- */

/* The identity theta with align_corners samples every pixel at its centre:
 * bilinear gives the input back (to a rounding), 4-D and 5-D, each
 * padding. */
Test(grid_sample, identity_affine_grid_reproduces_the_input)
{
    uint64_t s = 21;
    const int64_t xs4[4] = {2, 3, 5, 7}, xs5[5] = {2, 2, 3, 4, 5};
    for (int nd = 4; nd <= 5; nd++) {
        const int64_t *xs = nd == 4 ? xs4 : xs5;
        const int r = nd - 2;
        double th[2 * 3 * 4] = {0};
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < r; i++) th[b * r * (r + 1) + i * (r + 1) + i] = 1;
        tg_tensor *theta = th_tensor_from(TG_F64, 3, (int64_t[]){2, r, r + 1}, th);
        tg_tensor *x = th_rand_tensor(&s, TG_F64, nd, xs, -2, 2), *g = NULL;
        OK(tg_affine_grid(&g, theta, nd, xs, true));
        for (int pad = 0; pad < 3; pad++) {
            tg_tensor *y = NULL;
            OK(tg_grid_sample(&y, x, g, TG_GRID_SAMPLE_BILINEAR, pad, true));
            th_expect_near("identity", y, x, 0, 1e-14);
            tg_tensor_release(y);
        }
        th_release_all(3, (tg_tensor *[]){theta, x, g});
    }
}

/* The forward and both gradients have the same bits at 1 and 2 threads
 * (a batch large enough to be split), every mode, f32. */
Test(grid_sample, same_bits_at_one_and_two_threads)
{
    const int threads = tg_get_num_threads();
    const int64_t patience = tg__pool_set_patience(-1);
    for (int mode = 0; mode < 3; mode++) {
        tg_tensor *r[2][3] = {{NULL}};
        for (int t = 0; t < 2; t++) {
            uint64_t s = 5;
            OK(tg_set_num_threads(t + 1));
            tg_tensor *x = th_rand_tensor(&s, TG_F32, 4, (int64_t[]){4, 8, 9, 11}, -1, 1);
            tg_tensor *g = th_rand_tensor(&s, TG_F32, 4, (int64_t[]){4, 16, 16, 2}, -1.2, 1.2);
            tg_tensor *gy = th_rand_tensor(&s, TG_F32, 4, (int64_t[]){4, 8, 16, 16}, -1, 1);
            OK(tg_tensor_set_requires_grad(x, true));
            OK(tg_tensor_set_requires_grad(g, true));
            OK(tg_grid_sample(&r[t][0], x, g, mode, TG_GRID_SAMPLE_REFLECTION, false));
            th_backward_with(r[t][0], gy);
            r[t][1] = tg_tensor_retain(tg_tensor_grad(x));
            r[t][2] = tg_tensor_retain(tg_tensor_grad(g));
            th_release_all(3, (tg_tensor *[]){x, g, gy});
        }
        for (int k = 0; k < 3; k++) {
            th_expect_same_tensor_bytes("2 threads against 1", r[1][k], r[0][k]);
            th_release_all(2, (tg_tensor *[]){r[0][k], r[1][k]});
        }
    }
    OK(tg_set_num_threads(threads));
    tg__pool_set_patience(patience);
}

/* A transposed input and a strided grid give the bits of their contiguous
 * copies. */
Test(grid_sample, strided_inputs)
{
    uint64_t s = 8;
    tg_tensor *xt = th_rand_tensor(&s, TG_F64, 4, (int64_t[]){2, 3, 6, 5}, -1, 1);
    tg_tensor *gw = th_rand_tensor(&s, TG_F64, 4, (int64_t[]){2, 4, 6, 2}, -1.2, 1.2);
    tg_tensor *x = NULL, *g = NULL, *xc = NULL, *gc = NULL, *y = NULL, *yc = NULL;
    OK(tg_transpose(&x, xt, 2, 3));   /* (2, 3, 5, 6) */
    OK(tg_slice(&g, gw, 2, 0, 6, 2)); /* (2, 4, 3, 2), every other column */
    OK(tg_contiguous(&xc, x));
    OK(tg_contiguous(&gc, g));
    OK(tg_grid_sample(&y, x, g, TG_GRID_SAMPLE_BICUBIC, TG_GRID_SAMPLE_BORDER, false));
    OK(tg_grid_sample(&yc, xc, gc, TG_GRID_SAMPLE_BICUBIC, TG_GRID_SAMPLE_BORDER, false));
    th_expect_same_tensor_bytes("strided", y, yc);
    th_release_all(8, (tg_tensor *[]){xt, gw, x, g, xc, gc, y, yc});
}

/* Inside a bf16 autocast scope bf16 operands are computed in f32 (torch's
 * CPU autocast lists grid_sampler as fp32) with the bits of the f32 call,
 * and their gradients come back in bf16; outside it bf16 is refused, as
 * torch's CPU kernel has none. */
Test(grid_sample, autocast_computes_in_f32)
{
    uint64_t s = 17;
    tg_tensor *xf = th_rand_tensor(&s, TG_F32, 4, (int64_t[]){1, 2, 4, 4}, -1, 1);
    tg_tensor *gf = th_rand_tensor(&s, TG_F32, 4, (int64_t[]){1, 3, 3, 2}, -1, 1);
    tg_tensor *xh = NULL, *gh = NULL, *xr = NULL, *gr = NULL, *y = NULL, *yr = NULL;
    OK(tg_to_dtype(&xh, xf, TG_BF16));
    OK(tg_to_dtype(&gh, gf, TG_BF16));
    OK(tg_to_dtype(&xr, xh, TG_F32));
    OK(tg_to_dtype(&gr, gh, TG_F32));
    OK(tg_tensor_set_requires_grad(xh, true));
    OK(tg_tensor_set_requires_grad(gh, true));
    OK(tg_autocast_begin(TG_BF16));
    OK(tg_grid_sample(&y, xh, gh, TG_GRID_SAMPLE_BILINEAR, TG_GRID_SAMPLE_ZEROS, false));
    OK(tg_autocast_end());
    OK(tg_grid_sample(&yr, xr, gr, TG_GRID_SAMPLE_BILINEAR, TG_GRID_SAMPLE_ZEROS, false));
    th_expect_same_tensor_bytes("autocast", y, yr);
    tg_tensor *ys = NULL, *d[2] = {NULL, NULL};
    OK(tg_sum(&ys, y));
    OK(tg_grad(d, 1, &ys, NULL, 2, (tg_tensor *[]){xh, gh}, NULL));
    cr_assert(tg_tensor_dtype(d[0]) == TG_BF16 && tg_tensor_dtype(d[1]) == TG_BF16,
              "gradients %s %s", tg_dtype_name(tg_tensor_dtype(d[0])),
              tg_dtype_name(tg_tensor_dtype(d[1])));
    th_expect_refused_clean(
        tg_grid_sample(out_, xh, gh, TG_GRID_SAMPLE_BILINEAR, TG_GRID_SAMPLE_ZEROS, false),
        TG_EDTYPE, "input has dtype bf16");
    th_release_all(10, (tg_tensor *[]){xf, gf, xh, gh, xr, gr, y, yr, ys, d[0]});
    tg_tensor_release(d[1]);
}

/* x = 1 .. 9 in a 3 x 3 image, a point (NaN, 0.5): y = 0.5 is row 1.75
 * (((0.5 + 1) * 3 - 1) / 2); border and reflection clip the NaN x to
 * column 0, as torch's 2-D kernel: bilinear 4 * 0.25 + 7 * 0.75 = 6.25,
 * nearest row 2's 7; zeros reads nothing, bicubic's weights are NaN. */
Test(grid_sample, nan_coordinates)
{
    const double xv[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, gv[2] = {NAN, 0.5};
    tg_tensor *x = th_tensor_from(TG_F32, 4, (int64_t[]){1, 1, 3, 3}, xv);
    tg_tensor *g = th_tensor_from(TG_F32, 4, (int64_t[]){1, 1, 1, 2}, gv);
    const struct {
        tg_grid_sample_mode mode;
        tg_grid_sample_padding pad;
        double want;
    } cases[] = {{TG_GRID_SAMPLE_BILINEAR, TG_GRID_SAMPLE_BORDER, 6.25},
                 {TG_GRID_SAMPLE_BILINEAR, TG_GRID_SAMPLE_REFLECTION, 6.25},
                 {TG_GRID_SAMPLE_NEAREST, TG_GRID_SAMPLE_BORDER, 7},
                 {TG_GRID_SAMPLE_NEAREST, TG_GRID_SAMPLE_REFLECTION, 7},
                 {TG_GRID_SAMPLE_BILINEAR, TG_GRID_SAMPLE_ZEROS, 0},
                 {TG_GRID_SAMPLE_NEAREST, TG_GRID_SAMPLE_ZEROS, 0},
                 {TG_GRID_SAMPLE_BICUBIC, TG_GRID_SAMPLE_BORDER, NAN}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_tensor *y = NULL;
        OK(tg_grid_sample(&y, x, g, cases[i].mode, cases[i].pad, false));
        cr_assert(th_close(th_at(y, 0), cases[i].want, 0, 0), "case %zu: %.9g, want %.9g", i,
                  th_at(y, 0), cases[i].want);
        tg_tensor_release(y);
    }
    th_release_all(2, (tg_tensor *[]){x, g});
}

/* An empty batch and a grid of no points give empty results, and zero
 * gradients for the input, as torch. */
Test(grid_sample, empty_batch_and_empty_grid)
{
    tg_tensor *x0 = NULL, *g0 = NULL, *x = NULL, *ge = NULL, *y0 = NULL, *y = NULL, *s = NULL;
    OK(tg_tensor_zeros(&x0, TG_F32, 4, (int64_t[]){0, 2, 3, 3}));
    OK(tg_tensor_zeros(&g0, TG_F32, 4, (int64_t[]){0, 2, 2, 2}));
    OK(tg_tensor_zeros(&ge, TG_F32, 4, (int64_t[]){1, 0, 2, 2}));
    uint64_t seed = 2;
    x = th_rand_tensor(&seed, TG_F32, 4, (int64_t[]){1, 2, 3, 3}, -1, 1);
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_tensor_set_requires_grad(ge, true));
    OK(tg_grid_sample(&y0, x0, g0, TG_GRID_SAMPLE_BICUBIC, TG_GRID_SAMPLE_ZEROS, false));
    th_expect_shape(y0, 4, (int64_t[]){0, 2, 2, 2});
    OK(tg_grid_sample(&y, x, ge, TG_GRID_SAMPLE_BILINEAR, TG_GRID_SAMPLE_BORDER, true));
    th_expect_shape(y, 4, (int64_t[]){1, 2, 0, 2});
    OK(tg_sum(&s, y));
    OK(tg_backward(s, NULL, NULL));
    for (int64_t i = 0; i < 18; i++)
        cr_assert(th_at(tg_tensor_grad(x), i) == 0, "dx[%lld] = %g", (long long)i,
                  th_at(tg_tensor_grad(x), i));
    th_expect_shape(tg_tensor_grad(ge), 4, (int64_t[]){1, 0, 2, 2});
    th_release_all(7, (tg_tensor *[]){x0, g0, x, ge, y0, y, s});
}

/* ---- refusals ---- */

#define GS(x, g, mode, pad) tg_grid_sample(out_, x, g, mode, pad, false)

Test(grid_sample, refusals_name_the_argument)
{
    const tg_grid_sample_mode BL = TG_GRID_SAMPLE_BILINEAR;
    const tg_grid_sample_padding Z = TG_GRID_SAMPLE_ZEROS;
    tg_tensor *x = NULL, *g = NULL, *g3 = NULL, *gb = NULL, *x5 = NULL, *g5 = NULL, *x3 = NULL;
    tg_tensor *xe = NULL, *xi = NULL, *g64 = NULL, *g4in5 = NULL;
    OK(tg_tensor_zeros(&x, TG_F32, 4, (int64_t[]){1, 1, 3, 3}));
    OK(tg_tensor_zeros(&g, TG_F32, 4, (int64_t[]){1, 2, 2, 2}));
    OK(tg_tensor_zeros(&g3, TG_F32, 4, (int64_t[]){1, 2, 2, 3}));
    OK(tg_tensor_zeros(&gb, TG_F32, 4, (int64_t[]){2, 2, 2, 2}));
    OK(tg_tensor_zeros(&x5, TG_F32, 5, (int64_t[]){1, 1, 2, 2, 2}));
    OK(tg_tensor_zeros(&g5, TG_F32, 5, (int64_t[]){1, 2, 2, 2, 3}));
    OK(tg_tensor_zeros(&x3, TG_F32, 3, (int64_t[]){1, 1, 2}));
    OK(tg_tensor_zeros(&xe, TG_F32, 4, (int64_t[]){1, 1, 0, 3}));
    OK(tg_tensor_zeros(&xi, TG_I64, 4, (int64_t[]){1, 1, 3, 3}));
    OK(tg_tensor_zeros(&g64, TG_F64, 4, (int64_t[]){1, 2, 2, 2}));
    OK(tg_tensor_zeros(&g4in5, TG_F32, 5, (int64_t[]){1, 2, 2, 2, 2}));
    tg_tensor *y = NULL;
    cr_assert(eq(int, tg_grid_sample(NULL, x, g, BL, Z, false), TG_EINVAL));
    th_expect_in(tg_error_message(), "out must not be NULL");
    th_expect_refused_clean(GS(NULL, g, BL, Z), TG_EINVAL, "input must not be NULL");
    th_expect_refused_clean(GS(x, NULL, BL, Z), TG_EINVAL, "grid must not be NULL");
    th_expect_refused_clean(GS(x, g, 3, Z), TG_EINVAL, "mode=3");
    th_expect_refused_clean(GS(x, g, BL, -1), TG_EINVAL, "padding_mode=-1");
    th_expect_refused_clean(GS(x, g3, BL, Z), TG_ESHAPE,
                            "expected grid to have size 2 in last dimension, but got grid with "
                            "sizes (1, 2, 2, 3)");
    th_expect_refused_clean(GS(x, gb, BL, Z), TG_ESHAPE,
                            "expected grid and input to have same batch size");
    th_expect_refused_clean(GS(x5, g5, TG_GRID_SAMPLE_BICUBIC, Z), TG_EINVAL,
                            "bicubic interpolation only supports 4D input");
    th_expect_refused_clean(GS(x3, g, BL, Z), TG_ESHAPE,
                            "expected 5D input and grid with same number of dimensions");
    th_expect_refused_clean(GS(x, g4in5, BL, Z), TG_ESHAPE,
                            "expected 4D input and grid with same number of dimensions");
    th_expect_refused_clean(GS(xe, g, BL, Z), TG_ESHAPE,
                            "non-empty spatial dimensions, but input has sizes (1, 1, 0, 3) "
                            "with dimension 2 being empty");
    th_expect_refused_clean(GS(xi, g, BL, Z), TG_EDTYPE, "input has dtype i64");
    th_expect_refused_clean(GS(x, g64, BL, Z), TG_EDTYPE,
                            "input has dtype f32 and grid has f64; they must have the same");
    OK(tg_grid_sample(&y, x5, g5, TG_GRID_SAMPLE_NEAREST, TG_GRID_SAMPLE_REFLECTION, true));
    th_release_all(12, (tg_tensor *[]){x, g, g3, gb, x5, g5, x3, xe, xi, g64, g4in5, y});
}

#define AG(t, n, size) tg_affine_grid(out_, t, n, size, false)

Test(grid_sample, affine_grid_refusals)
{
    tg_tensor *t = NULL, *t3 = NULL, *ti = NULL, *t2 = NULL;
    OK(tg_tensor_zeros(&t, TG_F32, 3, (int64_t[]){1, 2, 3}));
    OK(tg_tensor_zeros(&t3, TG_F32, 3, (int64_t[]){1, 3, 3}));
    OK(tg_tensor_zeros(&ti, TG_I64, 3, (int64_t[]){1, 2, 3}));
    OK(tg_tensor_zeros(&t2, TG_F32, 3, (int64_t[]){2, 2, 3}));
    const int64_t s4[4] = {1, 1, 2, 2}, s5[5] = {1, 1, 2, 2, 2}, s0[4] = {1, 1, 0, 2};
    cr_assert(eq(int, tg_affine_grid(NULL, t, 4, s4, false), TG_EINVAL));
    th_expect_refused_clean(AG(NULL, 4, s4), TG_EINVAL, "theta must not be NULL");
    th_expect_refused_clean(AG(t, 4, NULL), TG_EINVAL, "size must not be NULL");
    th_expect_refused_clean(AG(t, 3, s4), TG_EINVAL, "only supports 4D and 5D sizes");
    th_expect_refused_clean(AG(ti, 4, s4), TG_EDTYPE, "floating point type, but got i64");
    th_expect_refused_clean(AG(t3, 4, s4), TG_ESHAPE,
                            "expected a batch of 2D affine matrices of shape Nx2x3 for size "
                            "(1, 1, 2, 2), got theta with sizes (1, 3, 3)");
    th_expect_refused_clean(AG(t, 5, s5), TG_ESHAPE, "3D affine matrices of shape Nx3x4");
    th_expect_refused_clean(AG(t, 4, s0), TG_ESHAPE, "non-zero, positive output size");
    th_expect_refused_clean(AG(t2, 4, s4), TG_ESHAPE, "it must hold N=1 matrices");
    th_release_all(4, (tg_tensor *[]){t, t3, ti, t2});
}
