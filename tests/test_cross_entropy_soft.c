/* tests/test_cross_entropy_soft.c - cross_entropy of f32 and f64 logits
 * with label smoothing and class indices, and with probability targets,
 * as one op (src/ops/cross_entropy_soft.c): PyTorch's values and
 * gradients (tests/golden/cross_entropy_soft.safetensors); the value and
 * gradient of the composition (tg__cross_entropy_composed) within a bound
 * derived below, for rows and spatial shapes, both layouts, each
 * reduction, with and without weights and an ignore_index, smoothing 0,
 * 0.1 and 1, 1 and 2 threads; the same bits at every exp width;
 * gradcheck and gradgradcheck in f64 and the composition's second
 * derivative. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cross_entropy_fixtures.h"
#include "helpers.h"
#include "ops/loss.h"
#include "ops/softmax_rows_internal.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* One call's arguments. */
typedef struct ce_call {
    tg_tensor *t, *w;
    int64_t ignore;
    double eps;
    int r;
} ce_call;

/* Probabilities of x's shape (softmax over dim 1 of U[-3, 3), seed). */
static tg_tensor *probs(tg_dtype dt, int ndim, const int64_t *shape, uint64_t seed)
{
    uint64_t st = seed;
    tg_tensor *u = th_rand_tensor(&st, dt, ndim, shape, -3, 3), *p = NULL;
    OK(tg_softmax(&p, u, 1));
    tg_tensor_release(u);
    return p;
}

/* The one op's value (and, with gy, x's gradient into *gx). */
static tg_tensor *run(tg_tensor *x, const ce_call *c, bool composed, tg_tensor *gy,
                      tg_tensor **gx)
{
    tg_tensor *y = NULL;
    if (composed)
        OK(tg__cross_entropy_composed(&y, x, c->t, c->w, c->ignore, REDS[c->r], c->eps));
    else
        OK(tg_cross_entropy_ex(&y, x, c->t, c->w, c->ignore, REDS[c->r], c->eps));
    cr_assert(tape_has(y, "cross_entropy_soft") == !composed, "the op taken");
    if (gy) {
        OK(tg_backward(y, gy, NULL));
        OK(tg_tensor_detach(gx, tg_tensor_grad(x)));
        tg_tensor_zero_grad(x);
    }
    return y;
}

/* The bound on |one op - composition|.  The one op computes each loss and
 * gradient in double and rounds once; the composition rounds in x's dtype
 * (unit roundoff u) at each of its steps.  A row's loss is sum_c a_c
 * (-logp_c), terms of one sign, each logp_c within u (|x_c - m| + log s)
 * <= u (9 + log C) of its value (|x| < 4 here) and each product and sum
 * adds u of its size, so the rows' losses differ by at most (C + 8) u
 * (loss + A (9 + log C)), A = sum_c a_c <= max w; the reductions add K u
 * of the sum, and MEAN divides by at least min w times the count not
 * ignored (over two thirds of K here).  A gradient g_k (A softmax_c - a_c)
 * is a sum of the pieces of nll_loss's and the smoothing term's backward,
 * each within (C + 8) u g_k max w. */
typedef struct ce_bound {
    double rtol, vscale, gtol;
} ce_bound;

static ce_bound bound_of(tg_tensor *x, const ce_call *c, tg_tensor *gy, int64_t K)
{
    const tg_dtype dt = tg_tensor_dtype(x);
    const double u = dt == TG_F64 ? DBL_EPSILON / 2 : FLT_EPSILON / 2;
    const int64_t C = tg_tensor_shape(x)[1];
    double wmax = 1, wmin = 1;
    if (c->w) {
        wmax = 0, wmin = INFINITY;
        for (int64_t i = 0; i < C; i++) {
            wmax = fmax(wmax, th_at(c->w, i));
            wmin = fmin(wmin, th_at(c->w, i));
        }
    }
    const tg_reduction red = REDS[c->r];
    double gmax = 0;   /* the largest |g_k| */
    for (int64_t i = 0; i < tg_tensor_numel(gy); i++) gmax = fmax(gmax, fabs(th_at(gy, i)));
    if (red == TG_REDUCTION_MEAN) gmax /= K * wmin / 2;
    const double n = (double)(C + 8);
    return (ce_bound){.rtol = (n + (double)K) * u,
                      .vscale = (9 + log((double)C)) * wmax *
                                (red == TG_REDUCTION_SUM ? (double)K : 2 * wmax / wmin),
                      .gtol = n * u * gmax * wmax * 4};
}

/* The one op against the composition: value and x's gradient within the
 * bound above (all_ignored: every target is ignore_index, and the gradient
 * of mean is torch's 0). */
static void expect_near_composition(const char *what, tg_tensor *x, const ce_call *c,
                                    bool all_ignored)
{
    tg_tensor *ya = run(x, c, false, NULL, NULL), *gx[2] = {NULL, NULL};
    uint64_t st = 5;
    tg_tensor *gy = th_rand_tensor(&st, tg_tensor_dtype(x), tg_tensor_ndim(ya),
                                   tg_tensor_shape(ya), 0.5, 2);
    tg_tensor_release(ya);
    ya = run(x, c, false, gy, &gx[0]);
    tg_tensor *yb = run(x, c, true, gy, &gx[1]);
    const int64_t K = tg_tensor_numel(x) / tg_tensor_shape(x)[1];
    const ce_bound b = bound_of(x, c, gy, K);
    th_expect_near(what, ya, yb, b.rtol, b.rtol * b.vscale);
    if (all_ignored) {   /* torch's gradient 0, where the composition's masked_fill passes
                          * on mean's 0 / 0 */
        tg_tensor *z = NULL;
        OK(tg_tensor_zeros_like(&z, x));
        th_expect_same_bits(what, x, gx[0], z);
        tg_tensor_release(z);
    } else {
        th_expect_near(what, gx[0], gx[1], 0, b.gtol);
    }
    th_release_all(5, (tg_tensor *[]){ya, yb, gy, gx[0], gx[1]});
}

/* Every case of one dtype and shape: both layouts, class targets (smoothing
 * 0.1 and 1, without and with an ignore_index) and probabilities
 * (smoothing 0, 0.1 and 1), each reduction, without and with weights, 1 and
 * 2 threads.  Returns the count checked (2 * 7 * 3 * 2 * 2 = 168). */
static int cases_near_composition(tg_dtype dt, int ndim, const int64_t *shape, uint64_t seed)
{
    const int64_t C = shape[1];
    uint64_t wst = 17;
    tg_tensor *w = th_rand_tensor(&wst, dt, 1, &C, 0.5, 2), *q = probs(dt, ndim, shape, seed);
    static const double eps[7] = {0.1, 1.0, 0.1, 1.0, 0.0, 0.1, 1.0};
    int checked = 0;
    for (int layout = 0; layout < 2; layout++) {
        tg_tensor *x = logits(dt, ndim, shape, layout == 1, false, seed);
        for (int k = 0; k < 7; k++) {
            const bool ig = k == 2 || k == 3, prob = k >= 4;
            const int64_t ignore = ig ? C / 2 : TG_IGNORE_INDEX_DEFAULT;
            tg_tensor *t = prob ? tg_tensor_retain(q) : targets(ndim, shape, ig ? ignore : -1);
            for (int r = 0; r < 3; r++)
                for (int weighted = 0; weighted < 2; weighted++)
                    for (int th = 1; th <= 2; th++) {
                        OK(tg_set_num_threads(th));
                        char what[200];
                        snprintf(what, sizeof what,
                                 "%s ndim %d (%lld, %lld, ...) layout %d %s eps %g ignore %d "
                                 "%s weight %d threads %d",
                                 tg_dtype_name(dt), ndim, (long long)shape[0], (long long)C,
                                 layout, prob ? "probs" : "classes", eps[k], ig, RED_NAMES[r],
                                 weighted, th);
                        const ce_call c = {.t = t, .w = weighted ? w : NULL, .ignore = ignore,
                                           .eps = eps[k], .r = r};
                        expect_near_composition(what, x, &c, ig && C == 1 && r == 0);
                        checked++;
                    }
            tg_tensor_release(t);
        }
        tg_tensor_release(x);
    }
    th_release_all(2, (tg_tensor *[]){w, q});
    return checked;
}

Test(cross_entropy_soft, value_and_gradient_near_the_composition)
{
    /* rows: one task and several, C above and below a block of 2048
     * values, rows of C >= 256 one at a time (300: vectors of 8 past the
     * groups of 32, and 4 classes after); spatial: S = 5, 12 (blocks
     * within a slab), 1100 */
    static const int64_t shapes[][4] = {{40, 1000}, {4000, 10}, {37, 63},    {5, 1},
                                        {3, 7, 5},  {2, 5, 3, 4}, {2, 3, 1100}, {7, 300}};
    static const int ndims[] = {2, 2, 2, 2, 3, 4, 3, 2};
    const int threads = tg_get_num_threads();
    int checked = 0;
    for (int s = 0; s < 8; s++)
        for (int d = 0; d < 2; d++)
            checked += cases_near_composition(d ? TG_F64 : TG_F32, ndims[s], shapes[s],
                                              60 + (uint64_t)s);
    OK(tg_set_num_threads(threads));
    cr_assert(eq(int, checked, 8 * 2 * 168));
}

/* PyTorch's values and gradients for each golden case. */
Test(cross_entropy_soft, pytorch_goldens)
{
    tg_st_file *f = th_golden_load("cross_entropy_soft.safetensors");
    char cases[1024];
    snprintf(cases, sizeof cases, "%s", tg_st_meta_get(f, "cases"));
    int n = 0;
    for (char *save = NULL, *name = strtok_r(cases, ",", &save); name;
         name = strtok_r(NULL, ",", &save), n++) {
        const bool f64 = !strcmp(th_golden_meta(f, name, "dtype"), "f64");
        const bool weighted = !strcmp(th_golden_meta(f, name, "weight"), "1");
        const double rtol = f64 ? 1e-12 : 2e-6;
        ce_call c = {.t = th_golden_at(f, "%s.target", name, ""),
                     .w = weighted ? th_golden_at(f, "%s.weight", name, "") : NULL,
                     .ignore = strtoll(th_golden_meta(f, name, "ignore_index"), NULL, 10),
                     .eps = strtod(th_golden_meta(f, name, "eps"), NULL)};
        for (c.r = 0; c.r < 3; c.r++) {
            char what[160];
            snprintf(what, sizeof what, "%s %s", name, RED_NAMES[c.r]);
            tg_tensor *x = th_leaf_clone(th_golden_at(f, "%s.x", name, "")), *gx = NULL;
            tg_tensor *y = run(x, &c, false, th_golden_at(f, "%s.%s.gout", name, RED_NAMES[c.r]),
                               &gx);
            th_expect_close(what, y, th_golden_at(f, "%s.%s.value", name, RED_NAMES[c.r]), rtol);
            th_expect_close(what, gx, th_golden_at(f, "%s.%s.gx", name, RED_NAMES[c.r]), rtol);
            th_release_all(3, (tg_tensor *[]){x, y, gx});
        }
    }
    cr_assert(eq(int, n, 12));
    tg_st_free(f);
}

/* Every exp width gives the same bits, for rows and a spatial shape, f32
 * and f64 (whose values show the exp's last bits). */
Test(cross_entropy_soft, every_exp_width_gives_the_same_bits)
{
    static const int64_t shapes[2][4] = {{33, 257}, {3, 9, 21}};
    for (int s = 0; s < 4; s++) {
        const int nd = s % 2 ? 3 : 2;
        const tg_dtype dt = s < 2 ? TG_F32 : TG_F64;
        tg_tensor *x = logits(dt, nd, shapes[s % 2], false, false, 9);
        tg_tensor *t = targets(nd, shapes[s % 2], 4), *q = probs(dt, nd, shapes[s % 2], 3);
        for (int r = 0; r < 3; r++)
            for (int prob = 0; prob < 2; prob++) {
                const ce_call c = {.t = prob ? q : t, .ignore = 4, .eps = 0.1, .r = r};
                tg_tensor *y[3] = {NULL, NULL, NULL}, *g[3] = {NULL, NULL, NULL}, *gy = NULL;
                int widths = 0;
                for (int wd = 1; wd <= 3; wd++) {
                    tg__exp_width_force(wd);
                    if (tg__exp_width_get() != (tg__exp_width)wd) continue;
                    tg_tensor *y0 = run(x, &c, false, NULL, NULL);
                    if (!gy) OK(tg_tensor_full(&gy, dt, tg_tensor_ndim(y0),
                                               tg_tensor_shape(y0), 0.75));
                    tg_tensor_release(y0);
                    y[widths] = run(x, &c, false, gy, &g[widths]);
                    if (widths > 0) {
                        th_expect_same_bits(RED_NAMES[r], x, y[widths], y[0]);
                        th_expect_same_bits(RED_NAMES[r], x, g[widths], g[0]);
                    }
                    widths++;
                }
                tg__exp_width_force(0);
                cr_assert(widths >= 1);
                th_release_all(7, (tg_tensor *[]){y[0], y[1], y[2], g[0], g[1], g[2], gy});
            }
        th_release_all(3, (tg_tensor *[]){x, t, q});
    }
}

/* gradcheck and gradgradcheck in f64 of x's gradient. */
static int soft_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const ce_call *c = user;
    return tg_cross_entropy_ex(out, in[0], c->t, c->w, c->ignore, REDS[c->r], c->eps);
}

Test(cross_entropy_soft, gradcheck_and_gradgradcheck_in_f64)
{
    static const int64_t shapes[2][4] = {{4, 5}, {2, 4, 3}};
    for (int s = 0; s < 2; s++) {
        const int nd = s ? 3 : 2;
        const int64_t C = shapes[s][1];
        tg_tensor *x = logits(TG_F64, nd, shapes[s], false, false, 21);
        tg_tensor *t = targets(nd, shapes[s], 2), *q = probs(TG_F64, nd, shapes[s], 4);
        uint64_t wst = 3;
        tg_tensor *w = th_rand_tensor(&wst, TG_F64, 1, &C, 0.5, 2);
        for (int r = 0; r < 3; r++)
            for (int prob = 0; prob < 2; prob++) {
                const ce_call c = {.t = prob ? q : t, .w = w, .ignore = 2, .eps = 0.2, .r = r};
                tg_tensor *y = NULL;
                OK(soft_fn(&y, 1, &x, (void *)&c));
                cr_assert(tape_has(y, "cross_entropy_soft"));
                tg_tensor_release(y);
                th_expect_gradchecks(soft_fn, (void *)&c, 1, &x, "ndim %d %s prob %d", nd,
                                     RED_NAMES[r], prob);
            }
        th_release_all(4, (tg_tensor *[]){x, t, q, w});
    }
}

/* A create_graph backward gives the composition's gradient and the
 * gradient of sum(gradient * v), within 1e-13 in f64. */
Test(cross_entropy_soft, create_graph_gives_the_composition_second_derivative)
{
    const int64_t C = 5, shape[3] = {3, C, 4};
    for (int nd = 2; nd <= 3; nd++) {
        tg_tensor *x = logits(TG_F64, nd, shape, false, false, 3), *t = targets(nd, shape, 2);
        tg_tensor *q = probs(TG_F64, nd, shape, 7);
        tg_tensor *w = th_tensor_from(TG_F64, 1, &C, (double[]){0.5, 2, 1.5, 1, 0.25});
        tg_tensor *v = th_rand_uniform(TG_F64, nd, shape, 8);
        for (int r = 0; r < 3; r++)
            for (int prob = 0; prob < 2; prob++) {
                const ce_call c = {.t = prob ? q : t, .w = w, .ignore = 2, .eps = 0.3, .r = r};
                tg_tensor *g1[2] = {NULL, NULL}, *g2[2] = {NULL, NULL};
                for (int k = 0; k < 2; k++) {
                    tg_tensor *y = run(x, &c, k == 1, NULL, NULL);
                    grads_to_second_order(y, x, v, &g1[k], &g2[k]);
                    tg_tensor_release(y);
                }
                th_expect_near(RED_NAMES[r], g1[0], g1[1], 1e-13, 1e-15);
                th_expect_near(RED_NAMES[r], g2[0], g2[1], 1e-13, 1e-15);
                th_release_all(4, (tg_tensor *[]){g1[0], g1[1], g2[0], g2[1]});
            }
        th_release_all(5, (tg_tensor *[]){x, t, q, w, v});
    }
}

/* What the one op does not take keeps the composition: half logits, a
 * target of another dtype, (C) logits, a target requiring grad. */
Test(cross_entropy_soft, other_arguments_keep_the_composition)
{
    const int64_t shape[2] = {4, 3}, C = 3;
    tg_tensor *x = logits(TG_F32, 2, shape, false, false, 1), *xh = NULL, *y = NULL;
    tg_tensor *q64 = probs(TG_F64, 2, shape, 2), *q = probs(TG_F32, 2, shape, 2);
    tg_tensor *w = th_rand_uniform(TG_F32, 1, &C, 4), *t = targets(2, shape, -1);
    OK(tg_to_dtype(&xh, x, TG_BF16));
    OK(tg_cross_entropy_ex(&y, xh, t, NULL, -100, TG_REDUCTION_MEAN, 0.1));
    cr_assert(tape_has(y, "cross_entropy_soft") == false, "bf16");
    tg_tensor_release(y);
    OK(tg_cross_entropy_ex(&y, x, q64, NULL, -100, TG_REDUCTION_MEAN, 0.1));
    cr_assert(tape_has(y, "cross_entropy_soft") == false, "an f64 target");
    tg_tensor_release(y);
    tg_tensor *x1 = th_rand_uniform(TG_F32, 1, &C, 6);   /* (C) logits, no batch dim */
    tg_tensor *q1 = th_tensor_from(TG_F32, 1, &C, (double[]){0.2, 0.3, 0.5});
    OK(tg_cross_entropy_ex(&y, x1, q1, w, -100, TG_REDUCTION_MEAN, 0.1));
    cr_assert(tape_has(y, "cross_entropy_soft") == false, "(C) logits");
    th_release_all(3, (tg_tensor *[]){y, x1, q1});
    tg_tensor *bad = th_tensor_from(TG_I64, 1, (int64_t[]){4}, (double[]){0, 1, 7, 2});
    y = NULL;
    cr_assert(eq(int, tg_cross_entropy_ex(&y, x, bad, NULL, -100, TG_REDUCTION_SUM, 0.1),
                 TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "nll_loss: target[2]=7 must be a class in [0, 3)") !=
                  NULL, "%s", tg_error_message());
    cr_assert(eq(ptr, y, NULL));
    tg_tensor_release(bad);
    OK(tg_tensor_set_requires_grad(q, true));
    OK(tg_cross_entropy_ex(&y, x, q, NULL, -100, TG_REDUCTION_MEAN, 0.1));
    cr_assert(tape_has(y, "cross_entropy_soft") == false, "a target requiring grad");
    th_release_all(7, (tg_tensor *[]){x, xh, y, q64, q, w, t});
}
