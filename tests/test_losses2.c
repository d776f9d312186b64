/* tests/test_losses2.c - the distances and the margin, embedding and
 * likelihood losses (tg_cosine_similarity, tg_pairwise_distance,
 * tg_margin_ranking_loss, tg_hinge_embedding_loss, tg_soft_margin_loss,
 * tg_cosine_embedding_loss, tg_triplet_margin_loss, tg_gaussian_nll_loss,
 * tg_poisson_nll_loss) against PyTorch 1.13's F.<name> and its gradients in
 * every input torch differentiates (f32 and f64; every reduction; zero
 * vectors, vectors shorter than eps, broadcast shapes, 0-d arguments,
 * margins hit exactly, var below eps, Poisson targets of 0 and 1),
 * gradcheck and gradgradcheck in f64 away from the kinks, invariants, and
 * the refusals.  Goldens: scripts/make_losses2_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* One call: the function's name and its non-tensor arguments. */
typedef struct lcase {
    const char *fn;
    tg_reduction red;
    int dim;
    double eps, p, margin;
    bool keepdim, swap, full, log_input;
} lcase;

/* n: the number of tensors in a (a weight when there is one more than the
 * function's inputs). */
static int call(const lcase *k, tg_tensor **y, int n, tg_tensor *const *a)
{
    const char *fn = k->fn;
    if (!strcmp(fn, "cosine_similarity"))
        return tg_cosine_similarity(y, a[0], a[1], k->dim, k->eps);
    if (!strcmp(fn, "pairwise_distance"))
        return tg_pairwise_distance(y, a[0], a[1], k->p, k->eps, k->keepdim);
    if (!strcmp(fn, "margin_ranking_loss"))
        return tg_margin_ranking_loss(y, a[0], a[1], a[2], k->margin, k->red);
    if (!strcmp(fn, "hinge_embedding_loss"))
        return tg_hinge_embedding_loss(y, a[0], a[1], k->margin, k->red);
    if (!strcmp(fn, "soft_margin_loss")) return tg_soft_margin_loss(y, a[0], a[1], k->red);
    if (!strcmp(fn, "cosine_embedding_loss"))
        return tg_cosine_embedding_loss(y, a[0], a[1], a[2], k->margin, k->red);
    if (!strcmp(fn, "triplet_margin_loss"))
        return tg_triplet_margin_loss(y, a[0], a[1], a[2], k->margin, k->p, k->eps, k->swap,
                                      k->red);
    if (!strcmp(fn, "gaussian_nll_loss"))
        return tg_gaussian_nll_loss(y, a[0], a[1], a[2], k->full, k->eps, k->red);
    if (!strcmp(fn, "poisson_nll_loss"))
        return tg_poisson_nll_loss(y, a[0], a[1], k->log_input, k->full, k->eps, k->red);
    if (!strcmp(fn, "multi_margin_loss"))
        return tg_multi_margin_loss(y, a[0], a[1], (int)k->p, k->margin, n > 2 ? a[2] : NULL,
                                    k->red);
    if (!strcmp(fn, "multilabel_margin_loss"))
        return tg_multilabel_margin_loss(y, a[0], a[1], k->red);
    if (!strcmp(fn, "multilabel_soft_margin_loss"))
        return tg_multilabel_soft_margin_loss(y, a[0], a[1], n > 2 ? a[2] : NULL, k->red);
    cr_assert(false, "unknown function '%s'", fn);
    return TG_EINVAL;
}

static double meta_num(const tg_st_file *f, const char *c, const char *what, double dflt)
{
    char key[64];
    snprintf(key, sizeof key, "%s.%s", c, what);
    const char *v = tg_st_meta_get(f, key);
    return v ? strtod(v, NULL) : dflt;
}

static lcase case_of(const tg_st_file *f, const char *c)
{
    return (lcase){.fn = th_golden_meta(f, c, "fn"),
                   .red = th_reduction_of(th_golden_meta(f, c, "red")),
                   .dim = (int)meta_num(f, c, "dim", 0),
                   .eps = meta_num(f, c, "eps", 0),
                   .p = meta_num(f, c, "p", 2),
                   .margin = meta_num(f, c, "margin", 0),
                   .keepdim = meta_num(f, c, "keepdim", 0) != 0,
                   .swap = meta_num(f, c, "swap", 0) != 0,
                   .full = meta_num(f, c, "full", 0) != 0,
                   .log_input = meta_num(f, c, "log_input", 0) != 0};
}

/* Values and gradients within rounding of torch's.  Each function is a
 * chain of at most about 15 ops, each rounded once (sums accumulate in
 * double), against torch's chain of the same ops in its own order: a few
 * ulps of the largest term.  Terms are of order 1, the gradients of the
 * cosines of vectors shorter than eps = 1e-3 of order 1e3, so the bounds
 * are relative, plus an absolute one for results that cancel to near 0
 * (1 - cos, a margin minus a distance): f64 1e-13 and 1e-14, f32 (2^-24
 * per op, and torch's f32 sums round at each step) 1e-5 and 1e-6.  Every
 * case also passes at a tenth of the f64 and a fifth of the f32 bounds. */
Test(losses2, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("losses2.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    enum { NF = 12 };
    int fns[NF] = {0}, grads = 0;
    static const char *const names[NF] = {
        "cosine_similarity",     "pairwise_distance",      "margin_ranking_loss",
        "hinge_embedding_loss",  "soft_margin_loss",       "cosine_embedding_loss",
        "triplet_margin_loss",   "gaussian_nll_loss",      "poisson_nll_loss",
        "multi_margin_loss",     "multilabel_margin_loss", "multilabel_soft_margin_loss"};
    for (int i = 0; i < n; i++) {
        char c[16], what[128];
        snprintf(c, sizeof c, "case%d", i);
        const lcase k = case_of(f, c);
        const char *ds = th_golden_meta(f, c, "dtype");
        const bool f64 = !strcmp(ds, "f64");
        snprintf(what, sizeof what, "%s (%s %s, %s)", c, k.fn, ds, th_golden_meta(f, c, "red"));
        const int na = atoi(th_golden_meta(f, c, "n"));
        int want[4], nw = 0;
        const char *gl = th_golden_meta(f, c, "grads");
        for (int j = 0; j < na; j++) {
            char d[16];
            snprintf(d, sizeof d, "%d", j);
            if (strstr(gl, d)) want[nw++] = j;
        }
        tg_tensor *a[4] = {NULL}, *y = NULL, *d[4] = {NULL}, *wa[4] = {NULL};
        for (int j = 0; j < na; j++) {
            char an[16];
            snprintf(an, sizeof an, "a%d", j);
            const tg_tensor *t = th_golden_get(f, c, an);
            bool rg = false;
            for (int w = 0; w < nw; w++) rg |= want[w] == j;
            a[j] = rg ? th_leaf_clone(t) : tg_tensor_retain((tg_tensor *)t);
        }
        OK(call(&k, &y, na, a));
        const double rtol = f64 ? 1e-13 : 1e-5, atol = f64 ? 1e-14 : 1e-6;
        th_expect_near(what, y, th_golden_get(f, c, "y"), rtol, atol);
        if (nw > 0) {
            tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g");
            for (int w = 0; w < nw; w++) wa[w] = a[want[w]];
            OK(tg_grad(d, 1, &y, &g, nw, wa, NULL));
            for (int w = 0; w < nw; w++) {
                char dn[16], wd[160];
                snprintf(dn, sizeof dn, "d%d", want[w]);
                snprintf(wd, sizeof wd, "%s d%d", what, want[w]);
                cr_assert(d[w] != NULL, "%s: no gradient", wd);
                th_expect_near(wd, d[w], th_golden_get(f, c, dn), rtol, atol);
            }
            grads += nw;
        }
        for (int j = 0; j < NF; j++) fns[j] += !strcmp(k.fn, names[j]);
        th_release_all(4, a);
        th_release_all(4, d);
        tg_tensor_release(y);
    }
    for (int j = 0; j < NF; j++) cr_assert(fns[j] >= 6, "%s: %d cases", names[j], fns[j]);
    cr_assert(n >= 300 && grads >= 500, "%d cases, %d gradients", n, grads);
    tg_st_free(f);
}

static int lfn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return call(user, out, n, in);
}

/* f64 inputs in [lo, hi]; rg: require grad. */
static tg_tensor *rnd(uint64_t *s, int nd, const int64_t *shape, double lo, double hi, bool rg)
{
    tg_tensor *t = th_rand_tensor(s, TG_F64, nd, shape, lo, hi);
    OK(tg_tensor_set_requires_grad(t, rg));
    return t;
}

/* Labels of 1 and -1 alternating, as f64, not requiring grad. */
static tg_tensor *labels(int nd, const int64_t *shape)
{
    tg_tensor *t = NULL;
    OK(tg_tensor_zeros(&t, TG_F64, nd, shape));
    for (int64_t i = 0; i < tg_tensor_numel(t); i++) OK(tg_tensor_set_flat(t, i, i % 2 ? -1 : 1));
    return t;
}

static void check_both(const lcase *k, int n, tg_tensor **in)
{
    th_expect_gradchecks(lfn, (void *)k, n, in, "%s", k->fn);
    th_release_all(n, in);
}

/* The smooth functions, and the margin losses with every argument of max(0, .)
 * well away from 0 (the random inputs keep the kinks out of the finite
 * differences' reach). */
Test(losses2, gradcheck_and_gradgradcheck)
{
    uint64_t s = 7301;
    const int64_t s45[2] = {4, 5}, s5[1] = {5}, s4[1] = {4}, s15[2] = {1, 5};
    lcase k = {.fn = "cosine_similarity", .dim = 1, .eps = 1e-8};
    check_both(&k, 2, (tg_tensor *[]){rnd(&s, 2, s45, -1, 1, true), rnd(&s, 1, s5, -1, 1, true)});
    k.dim = 0;   /* along the stretched dim */
    check_both(&k, 2, (tg_tensor *[]){rnd(&s, 2, s15, -1, 1, true), rnd(&s, 2, s45, -1, 1, true)});
    const double ps[] = {2, 1, 3, 0.5};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
        k = (lcase){.fn = "pairwise_distance", .p = ps[i], .eps = 1e-6, .keepdim = i % 2};
        check_both(&k, 2, (tg_tensor *[]){rnd(&s, 2, s45, 1, 2, true),
                                          rnd(&s, 1, s5, -2, -1, true)});
    }
    /* -y (x1 - x2) + margin >= 1 everywhere: x1 - x2 = +-(1..2) against y */
    k = (lcase){.fn = "margin_ranking_loss", .margin = 4, .red = TG_REDUCTION_MEAN};
    check_both(&k, 3, (tg_tensor *[]){rnd(&s, 1, s4, 1, 2, true), rnd(&s, 1, s4, -1, 0, true),
                                      rnd(&s, 1, s4, 0.5, 1, true)});
    k = (lcase){.fn = "hinge_embedding_loss", .margin = 5, .red = TG_REDUCTION_SUM};
    check_both(&k, 2, (tg_tensor *[]){rnd(&s, 1, s4, -1, 1, true), labels(1, s4)});
    /* torch differentiates soft_margin_loss in input only */
    k = (lcase){.fn = "soft_margin_loss", .red = TG_REDUCTION_NONE};
    check_both(&k, 2, (tg_tensor *[]){rnd(&s, 2, s45, -2, 2, true), rnd(&s, 1, s5, -1, 1, false)});
    k = (lcase){.fn = "cosine_embedding_loss", .margin = -2, .red = TG_REDUCTION_MEAN};
    check_both(&k, 3, (tg_tensor *[]){rnd(&s, 2, s45, -1, 1, true),
                                      rnd(&s, 2, s45, -1, 1, true), labels(1, s4)});
    for (int swap = 0; swap < 2; swap++) {
        /* d(a, p) <= 2.3 and d(a, n), d(p, n) in [4 sqrt(5), 11 sqrt(5)] < 25:
         * margin + d(a, p) - d(a, n) > 5 with margin 30 */
        k = (lcase){.fn = "triplet_margin_loss", .margin = 30, .p = 2, .eps = 1e-6,
                    .swap = swap, .red = TG_REDUCTION_SUM};
        check_both(&k, 3, (tg_tensor *[]){rnd(&s, 2, s45, 0, 1, true),
                                          rnd(&s, 2, s45, 0, 1, true),
                                          rnd(&s, 2, s45, 5 + 5 * swap, 6 + 5 * swap, true)});
    }
    for (int full = 0; full < 2; full++) {
        k = (lcase){.fn = "gaussian_nll_loss", .full = full, .eps = 1e-6,
                    .red = TG_REDUCTION_MEAN};
        check_both(&k, 3, (tg_tensor *[]){rnd(&s, 2, s45, -1, 1, true),
                                          rnd(&s, 2, s45, -1, 1, true),
                                          rnd(&s, 1, s4, 0.5, 2, true)});
        k = (lcase){.fn = "poisson_nll_loss", .full = full, .log_input = full, .eps = 1e-8,
                    .red = TG_REDUCTION_SUM};
        /* targets in (1.5, 4): the Stirling term is on everywhere with full */
        check_both(&k, 2, (tg_tensor *[]){rnd(&s, 2, s45, 0.5, 2, true),
                                          rnd(&s, 2, s45, 1.5, 4, true)});
    }
    /* margin 10 against x in [-1, 1]: every z = margin - x[y] + x[i] >= 8;
     * the weight, as torch's, is a constant */
    for (int p = 1; p <= 2; p++) {
        tg_tensor *t = NULL;
        OK(tg_tensor_from_data(&t, TG_I64, 1, s4, (int64_t[]){3, 0, 4, 1}));
        k = (lcase){.fn = "multi_margin_loss", .p = p, .margin = 10, .red = TG_REDUCTION_MEAN};
        check_both(&k, 3, (tg_tensor *[]){rnd(&s, 2, s45, -1, 1, true), t,
                                          rnd(&s, 1, s5, 0.5, 1, false)});
    }
    /* x in [-0.2, 0.2]: every 1 - x[j] + x[i] >= 0.6 */
    tg_tensor *t = NULL;
    OK(tg_tensor_from_data(&t, TG_I64, 2, s45,
                           (int64_t[]){3, 0, -1, 0, 0, 1, 2, 3, 0, 4, -1, 0, 0, 0, 0, 4, 4, 2,
                                       -1, 1}));
    k = (lcase){.fn = "multilabel_margin_loss", .red = TG_REDUCTION_SUM};
    check_both(&k, 2, (tg_tensor *[]){rnd(&s, 2, s45, -0.2, 0.2, true), t});
    k = (lcase){.fn = "multilabel_soft_margin_loss", .red = TG_REDUCTION_MEAN};
    check_both(&k, 3, (tg_tensor *[]){rnd(&s, 2, s45, -2, 2, true), rnd(&s, 2, s45, 0, 1, true),
                                      rnd(&s, 1, s5, 0.5, 1, true)});
}

/* cos(x, c x) = 1 for c > 0 and -1 for c < 0; the distance of a pair is
 * symmetric with eps 0; a zero vector is 0 apart from itself. */
Test(losses2, invariants)
{
    uint64_t s = 7401;
    const int64_t sh[2] = {3, 6};
    tg_tensor *x = rnd(&s, 2, sh, -1, 1, false), *x2 = NULL, *y = NULL, *d1 = NULL, *d2 = NULL;
    OK(tg_mul_scalar(&x2, x, -2.5));
    OK(tg_cosine_similarity(&y, x, x2, 1, 1e-8));
    for (int i = 0; i < 3; i++)
        cr_assert(ieee_ulp_eq(dbl, th_at(y, i), -1.0, 4), "cos[%d] = %.17g", i, th_at(y, i));
    OK(tg_pairwise_distance(&d1, x, x2, 2, 0, false));
    OK(tg_pairwise_distance(&d2, x2, x, 2, 0, false));
    th_expect_near("symmetric", d1, d2, 0, 0);
    th_release_all(3, (tg_tensor *[]){y, d1, d2});
    y = d1 = NULL;
    tg_tensor *z = NULL;
    OK(tg_tensor_zeros(&z, TG_F64, 2, sh));
    OK(tg_cosine_similarity(&y, z, x, 1, 1e-8));
    OK(tg_pairwise_distance(&d1, z, z, 2, 0, true));
    for (int i = 0; i < 3; i++) {
        cr_assert(eq(dbl, th_at(y, i), 0.0));
        cr_assert(eq(dbl, th_at(d1, i), 0.0));
    }
    th_expect_shape(d1, 2, (int64_t[]){3, 1});
    th_release_all(5, (tg_tensor *[]){x, x2, y, d1, z});
    /* f32 with f64: the f32 values in f64 throughout, norms included, as torch */
    tg_tensor *a = rnd(&s, 2, sh, -1, 1, false), *b = rnd(&s, 2, sh, -1, 1, false);
    tg_tensor *a32 = NULL, *a64 = NULL, *want = NULL;
    OK(tg_to_dtype(&a32, a, TG_F32));
    OK(tg_to_dtype(&a64, a32, TG_F64));
    y = NULL;
    OK(tg_cosine_similarity(&y, a32, b, 1, 1e-8));
    OK(tg_cosine_similarity(&want, a64, b, 1, 1e-8));
    th_expect_near("mixed dtypes", y, want, 0, 0);
    th_release_all(6, (tg_tensor *[]){a, b, a32, a64, y, want});
    /* no samples: a sum of 0 and a mean of NaN, as tg_mean's */
    tg_tensor *x0 = NULL, *t0 = NULL, *l = NULL, *m = NULL;
    OK(tg_tensor_zeros(&x0, TG_F64, 2, (int64_t[]){0, 3}));
    OK(tg_tensor_zeros(&t0, TG_I64, 1, (int64_t[]){0}));
    OK(tg_multi_margin_loss(&l, x0, t0, 1, 1.0, NULL, TG_REDUCTION_SUM));
    OK(tg_multi_margin_loss(&m, x0, t0, 1, 1.0, NULL, TG_REDUCTION_MEAN));
    cr_assert(eq(dbl, tg_tensor_item(l), 0.0));
    cr_assert(isnan(tg_tensor_item(m)));
    th_release_all(4, (tg_tensor *[]){x0, t0, l, m});
}

/* Integer inputs: torch runs the distances (but cosine_similarity) and
 * margin_ranking, cosine_embedding, triplet_margin, gaussian_nll and
 * poisson_nll on them, in f32 or in the float dtype of a float partner; the
 * values are those of the same numbers given as floats. */
static tg_tensor *as(tg_tensor *t, tg_dtype dt)
{
    tg_tensor *r = NULL;
    OK(tg_tensor_to_dtype(&r, t, dt));
    return r;
}

typedef int (*int_loss)(tg_tensor **out, tg_tensor *a, tg_tensor *b, tg_tensor *c);
static int il_pairwise(tg_tensor **o, tg_tensor *a, tg_tensor *b, tg_tensor *c)
{
    (void)c;
    return tg_pairwise_distance(o, a, b, 1.5, 1e-6, false);
}
static int il_ranking(tg_tensor **o, tg_tensor *a, tg_tensor *b, tg_tensor *c)
{
    return tg_margin_ranking_loss(o, a, b, c, 0.5, TG_REDUCTION_NONE);
}
static int il_cos_emb(tg_tensor **o, tg_tensor *a, tg_tensor *b, tg_tensor *c)
{
    (void)c;
    tg_tensor *y = NULL;
    OK(tg_tensor_from_data(&y, TG_I64, 1, (int64_t[]){2}, (int64_t[]){1, -1}));
    int rc = tg_cosine_embedding_loss(o, a, b, y, 0.1, TG_REDUCTION_NONE);
    tg_tensor_release(y);
    return rc;
}
static int il_triplet(tg_tensor **o, tg_tensor *a, tg_tensor *b, tg_tensor *c)
{
    return tg_triplet_margin_loss(o, a, b, c, 1.0, 2.0, 1e-6, true, TG_REDUCTION_NONE);
}
static int il_gaussian(tg_tensor **o, tg_tensor *a, tg_tensor *b, tg_tensor *c)
{
    return tg_gaussian_nll_loss(o, a, b, c, true, 1e-6, TG_REDUCTION_NONE);
}
static int il_poisson(tg_tensor **o, tg_tensor *a, tg_tensor *b, tg_tensor *c)
{
    (void)c;
    return tg_poisson_nll_loss(o, a, b, false, true, 1e-8, TG_REDUCTION_NONE);
}

Test(losses2, integer_inputs_as_torch)
{
    const int64_t s23[2] = {2, 3};
    tg_tensor *ai = NULL, *bi = NULL, *ci = NULL;
    OK(tg_tensor_from_data(&ai, TG_I64, 2, s23, (int64_t[]){1, 2, 3, 4, 5, 7}));
    OK(tg_tensor_from_data(&bi, TG_I32, 2, s23, (int32_t[]){0, 1, 1, 2, 2, 2}));
    OK(tg_tensor_from_data(&ci, TG_I64, 2, s23, (int64_t[]){2, 1, 3, 1, 4, 1}));
    const int_loss fns[] = {il_pairwise, il_ranking, il_cos_emb, il_triplet, il_gaussian,
                            il_poisson};
    for (size_t i = 0; i < sizeof fns / sizeof *fns; i++) {
        /* all integers: f32, the values of f32 inputs */
        tg_tensor *af = as(ai, TG_F32), *bf = as(bi, TG_F32), *cf = as(ci, TG_F32);
        tg_tensor *yi = NULL, *yf = NULL, *yd = NULL, *ydd = NULL;
        OK(fns[i](&yi, ai, bi, ci));
        OK(fns[i](&yf, af, bf, cf));
        cr_assert(eq(int, tg_tensor_dtype(yi), TG_F32), "case %zu", i);
        th_expect_same_bits("all integers", yf, yi, yf);
        /* one f64 partner: f64, the values of f64 inputs */
        tg_tensor *ad = as(ai, TG_F64), *bd = as(bi, TG_F64), *cd = as(ci, TG_F64);
        OK(fns[i](&yd, ai, bd, ci));
        OK(fns[i](&ydd, ad, bd, cd));
        cr_assert(eq(int, tg_tensor_dtype(yd), TG_F64), "case %zu", i);
        th_expect_same_bits("an f64 partner", ydd, yd, ydd);
        th_release_all(10, (tg_tensor *[]){af, bf, cf, ad, bd, cd, yi, yf, yd, ydd});
    }
    th_release_all(3, (tg_tensor *[]){ai, bi, ci});
}

Test(losses2, refusals_name_the_argument)
{
    tg_tensor *x = th_vec(TG_F32, 3, (double[]){1, 2, 3}, "x", false), *z = NULL;
    tg_tensor *t2 = th_vec(TG_F32, 2, (double[]){1, -1}, "t2", false), *xi = NULL;
    tg_tensor *m = NULL, *v = NULL, *vn = th_vec(TG_F32, 3, (double[]){1, -0.5, 1}, "v", false);
    const int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
    OK(tg_tensor_zeros(&m, TG_F32, 2, s23));
    OK(tg_tensor_zeros(&v, TG_F32, 2, s32));
    OK(tg_tensor_to_dtype(&xi, x, TG_I64));
    const tg_reduction S = TG_REDUCTION_SUM;
    th_expect_refused(tg_cosine_similarity(&z, NULL, x, 0, 1e-8), TG_EINVAL, "x1", z);
    th_expect_refused(tg_cosine_similarity(NULL, x, x, 0, 1e-8), TG_EINVAL, "out", NULL);
    th_expect_refused(tg_cosine_similarity(&z, x, t2, 0, 1e-8), TG_ESHAPE, "cosine", z);
    th_expect_refused(tg_cosine_similarity(&z, m, x, 2, 1e-8), TG_EINVAL, "dim=2", z);
    th_expect_refused(tg_cosine_similarity(&z, m, x, -3, 1e-8), TG_EINVAL, "dim=-3", z);
    th_expect_refused(tg_cosine_similarity(&z, xi, x, 0, 1e-8), TG_EDTYPE, "x1", z);
    th_expect_refused(tg_cosine_similarity(&z, x, x, 0, NAN), TG_EINVAL, "eps", z);
    th_expect_refused(tg_soft_margin_loss(&z, xi, x, S), TG_EDTYPE, "input", z);
    th_expect_refused(tg_pairwise_distance(&z, x, t2, 2, 1e-6, false), TG_ESHAPE, "pairwise",
                      z);
    th_expect_refused(tg_pairwise_distance(&z, x, x, NAN, 1e-6, false), TG_EINVAL, "p must", z);
    th_expect_refused(tg_margin_ranking_loss(&z, x, x, m, 0, S), TG_ESHAPE, "number of dims",
                      z);
    th_expect_refused(tg_margin_ranking_loss(&z, x, x, t2, 0, S), TG_ESHAPE, "margin_ranking",
                      z);
    th_expect_refused(tg_margin_ranking_loss(&z, x, x, NULL, 0, S), TG_EINVAL, "target", z);
    th_expect_refused(tg_margin_ranking_loss(&z, x, x, x, 0, TG_REDUCTION_BATCHMEAN), TG_EINVAL,
                      "reduction", z);
    th_expect_refused(tg_hinge_embedding_loss(&z, xi, x, 1, S), TG_EDTYPE, "input", z);
    th_expect_refused(tg_hinge_embedding_loss(&z, x, t2, 1, S), TG_ESHAPE, "hinge", z);
    th_expect_refused(tg_soft_margin_loss(&z, x, m, S), TG_ESHAPE, "target shape", z);
    th_expect_refused(tg_cosine_embedding_loss(&z, m, m, m, 0, S), TG_ESHAPE, "0-d or 1-d", z);
    th_expect_refused(tg_cosine_embedding_loss(&z, x, m, t2, 0, S), TG_ESHAPE, "1-d target",
                      z);
    th_expect_refused(tg_cosine_embedding_loss(&z, m, m, x, 0, S), TG_ESHAPE, "cosine_emb", z);
    th_expect_refused(tg_triplet_margin_loss(&z, m, m, x, 1, 2, 1e-6, false, S), TG_ESHAPE,
                      "number of dims", z);
    th_expect_refused(tg_triplet_margin_loss(&z, m, m, m, 1, NAN, 1e-6, false, S), TG_EINVAL,
                      "p must", z);
    th_expect_refused(tg_triplet_margin_loss(&z, m, NULL, m, 1, 2, 1e-6, false, S), TG_EINVAL,
                      "positive", z);
    th_expect_refused(tg_gaussian_nll_loss(&z, m, m, v, false, 1e-6, S), TG_ESHAPE, "var shape",
                      z);
    th_expect_refused(tg_gaussian_nll_loss(&z, x, x, vn, false, 1e-6, S), TG_EINVAL, "negative",
                      z);
    th_expect_refused(tg_gaussian_nll_loss(&z, x, x, NULL, false, 1e-6, S), TG_EINVAL, "var", z);
    th_expect_refused(tg_gaussian_nll_loss(&z, x, t2, x, false, 1e-6, S), TG_ESHAPE, "target",
                      z);
    th_expect_refused(tg_poisson_nll_loss(&z, x, x, true, false, 1e-8, (tg_reduction)9),
                      TG_EINVAL, "reduction", z);
    tg_tensor *ti = NULL, *t4 = NULL, *m4 = NULL;
    OK(tg_tensor_from_data(&ti, TG_I64, 1, (int64_t[]){2}, (int64_t[]){1, 3}));
    OK(tg_tensor_from_data(&t4, TG_I64, 2, s23, (int64_t[]){0, 1, -1, 2, -2, 0}));
    OK(tg_tensor_from_data(&m4, TG_I64, 2, s23, (int64_t[]){0, 1, -1, 2, 3, 0}));
    th_expect_refused(tg_multi_margin_loss(&z, m, ti, 1, 1, NULL, S), TG_EINVAL,
                      "target[1]=3", z);
    th_expect_refused(tg_multi_margin_loss(&z, m, t2, 1, 1, NULL, S), TG_EDTYPE, "i64", z);
    th_expect_refused(tg_multi_margin_loss(&z, m, xi, 1, 1, NULL, S), TG_ESHAPE,
                      "one class index per sample", z);
    th_expect_refused(tg_multi_margin_loss(&z, m, ti, 3, 1, NULL, S), TG_EINVAL, "p=3", z);
    th_expect_refused(tg_multi_margin_loss(&z, m, ti, 1, 1, t2, S), TG_ESHAPE, "weight", z);
    tg_tensor *m3 = NULL;
    OK(tg_tensor_zeros(&m3, TG_F32, 3, (int64_t[]){2, 3, 1}));
    th_expect_refused(tg_multi_margin_loss(&z, m3, ti, 1, 1, NULL, S), TG_ESHAPE, "(N, C)", z);
    th_expect_refused(tg_multilabel_margin_loss(&z, m, t4, S), TG_EINVAL, "element 4 = -2", z);
    th_expect_refused(tg_multilabel_margin_loss(&z, m, m4, S), TG_EINVAL, "element 4 = 3", z);
    th_expect_refused(tg_multilabel_margin_loss(&z, m, ti, S), TG_ESHAPE, "input's shape", z);
    th_expect_refused(tg_multilabel_soft_margin_loss(&z, m, t2, NULL, S), TG_ESHAPE, "target",
                      z);
    th_expect_refused(tg_multilabel_soft_margin_loss(&z, m, m, xi, S), TG_EDTYPE, "weight", z);
    th_release_all(4, (tg_tensor *[]){ti, t4, m4, m3});
    /* the accepted shapes of var: input's without the last dim, or with it 1 */
    tg_tensor *v2 = NULL, *v21 = NULL;
    OK(tg_tensor_full(&v2, TG_F32, 1, s23, 1.0));
    OK(tg_tensor_full(&v21, TG_F32, 2, (int64_t[]){2, 1}, 1.0));
    OK(tg_gaussian_nll_loss(&z, m, m, v2, false, 1e-6, S));
    tg_tensor_release(z);
    z = NULL;
    OK(tg_gaussian_nll_loss(&z, m, m, v21, false, 1e-6, S));
    tg_tensor_release(z);
    z = NULL;
    th_expect_refused(tg_gaussian_nll_loss(&z, m, m, x, false, 1e-6, S), TG_ESHAPE, "var", z);
    th_release_all(9, (tg_tensor *[]){x, t2, xi, m, v, vn, v2, v21, NULL});
}

static int cos_op(tg_tensor **y, tg_tensor *x)
{
    return tg_cosine_similarity(y, x, x, 1, 1e-8);
}

/* x against itself detached: the target must not require grad. */
static int soft_margin_op(tg_tensor **y, tg_tensor *x)
{
    tg_tensor *t = NULL;
    int rc = tg_tensor_detach(&t, x);
    if (rc == TG_OK) rc = tg_soft_margin_loss(y, x, t, TG_REDUCTION_NONE);
    tg_tensor_release(t);
    return rc;
}

static int multilabel_soft_op(tg_tensor **y, tg_tensor *x)
{
    return tg_multilabel_soft_margin_loss(y, x, x, NULL, TG_REDUCTION_NONE);
}

static int gaussian_op(tg_tensor **y, tg_tensor *x)
{
    tg_tensor *v = NULL;
    int rc = tg_abs(&v, x);
    if (rc == TG_OK) rc = tg_gaussian_nll_loss(y, x, x, v, true, 1e-6, TG_REDUCTION_NONE);
    tg_tensor_release(v);
    return rc;
}

/* The FP32 policy, as the other losses': inside an autocast scope bf16
 * inputs give the f32 result of their f32 values, and gradients in bf16. */
Test(losses2, fp32_under_autocast)
{
    th_expect_fp32_autocast(cos_op, 7501);
    th_expect_fp32_autocast(soft_margin_op, 7502);
    th_expect_fp32_autocast(multilabel_soft_op, 7503);
    th_expect_fp32_autocast(gaussian_op, 7504);
}

/* torch 1.13 defines no derivative of soft_margin_loss in its target nor
 * of multi_margin_loss in its weight, and refuses at the call: "The
 * function 'soft_margin_loss' is not differentiable with respect to
 * argument 'target'. This input cannot have requires_grad True." (and the
 * same for 'multi_margin_loss' and 'weight'), whatever the reduction and
 * whether input requires grad.  Under no_grad, or detached, they are read
 * as constants: the values of the call without grad. */
Test(losses2, target_and_weight_torch_does_not_differentiate_are_refused)
{
    uint64_t s = 77;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, -2, 2);
    tg_tensor *t = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, -1, 1);
    tg_tensor *w = th_rand_tensor(&s, TG_F64, 1, (int64_t[]){4}, 0, 1);
    tg_tensor *cls = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){0, 2, 3});
    tg_tensor *z = NULL, *ref[2] = {NULL}, *got = NULL, *td = NULL;
    OK(tg_soft_margin_loss(&ref[0], x, t, TG_REDUCTION_SUM));
    OK(tg_multi_margin_loss(&ref[1], x, cls, 1, 1.0, w, TG_REDUCTION_SUM));
    OK(tg_tensor_set_requires_grad(t, true));
    OK(tg_tensor_set_requires_grad(w, true));
    for (int xg = 0; xg < 2; xg++) {
        OK(tg_tensor_set_requires_grad(x, xg == 1));
        for (int r = 0; r < 3; r++) {
            const tg_reduction red = r == 0   ? TG_REDUCTION_NONE
                                     : r == 1 ? TG_REDUCTION_SUM
                                              : TG_REDUCTION_MEAN;
            th_expect_refused(tg_soft_margin_loss(&z, x, t, red), TG_EGRAD,
                              "soft_margin_loss: target requires grad, but the loss is not "
                              "differentiable with respect to target",
                              z);
            th_expect_refused(tg_multi_margin_loss(&z, x, cls, 2, 1.0, w, red), TG_EGRAD,
                              "multi_margin_loss: weight requires grad", z);
        }
    }
    /* a target that requires grad, read under no-grad or detached */
    tg_no_grad_begin();
    OK(tg_soft_margin_loss(&got, x, t, TG_REDUCTION_SUM));
    th_expect_same_bits("soft_margin_loss under no-grad", NULL, got, ref[0]);
    tg_tensor_release(got);
    got = NULL;
    OK(tg_multi_margin_loss(&got, x, cls, 1, 1.0, w, TG_REDUCTION_SUM));
    th_expect_same_bits("multi_margin_loss under no-grad", NULL, got, ref[1]);
    tg_tensor_release(got);
    got = NULL;
    tg_no_grad_end();
    OK(tg_tensor_detach(&td, t));
    OK(tg_soft_margin_loss(&got, x, td, TG_REDUCTION_SUM));
    th_expect_same_bits("soft_margin_loss, target detached", NULL, got, ref[0]);
    OK(tg_backward(got, NULL, NULL));
    cr_assert(tg_tensor_grad(x) != NULL);
    cr_assert(tg_tensor_grad(t) == NULL);
    th_release_all(8, (tg_tensor *[]){x, t, w, cls, ref[0], ref[1], got, td});
}
