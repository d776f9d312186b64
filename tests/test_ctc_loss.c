/* tests/test_ctc_loss.c - tg_ctc_loss and nn.CTCLoss against PyTorch 1.13's
 * F.ctc_loss, values and gradients (f32 and f64; padded and concatenated
 * targets, repeated labels, empty targets, input lengths below T,
 * infeasible targets with and without zero_infinity, each reduction,
 * blanks other than 0, unbatched input, i32 indices), against a sum over
 * every alignment on tiny cases, gradcheck through a log_softmax in f64,
 * the batch run in parallel against one sequence at a time, the refusals
 * (create_graph included) and the module.  Goldens:
 * scripts/make_ctc_goldens.py. */
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

static tg_tensor *ints(tg_dtype dt, int nd, const int64_t *shape, const int64_t *v)
{
    tg_tensor *t = NULL;
    const int64_t n = nd ? shape[0] * (nd > 1 ? shape[1] : 1) : 1;
    double buf[64];
    cr_assert(n <= 64, "ints: %lld values", (long long)n);
    for (int64_t i = 0; i < n; i++) buf[i] = (double)v[i];
    t = th_tensor_from(dt, nd, shape, buf);
    return t;
}

static tg_tensor *vec(int64_t n, const int64_t *v)
{
    return ints(TG_I64, 1, (int64_t[]){n}, v);
}

/* log_softmax of uniform values in [-2, 2) over C: (T, N, C) of dtype dt. */
static tg_tensor *logp(uint64_t *s, tg_dtype dt, int64_t T, int64_t N, int64_t C)
{
    tg_tensor *x = th_rand_tensor(s, dt, 3, (int64_t[]){T, N, C}, -2, 2), *y = NULL;
    OK(tg_log_softmax(&y, x, 2));
    tg_tensor_release(x);
    return y;
}

static tg_ctc_loss_opts opts_of(int64_t blank, tg_reduction red, bool zi)
{
    return (tg_ctc_loss_opts){.blank = blank, .reduction = red, .zero_infinity = zi};
}

/* ---- PyTorch's numbers ---------------------------------------------------------- */

/* Values and gradients against torch's.  Both compute in the input's
 * dtype with the same operations in the same order (the kernels follow
 * torch's CPU kernel step by step, with the same libm), so the per-sequence
 * losses and every gradient agree bit for bit in f64 and f32 here; the f32
 * sums and means of SUM and MEAN differ by at most an ulp (tg_sum and
 * tg_mean add in another order than torch's reductions).  The bounds leave
 * room for another libm's exp and log (an ulp each, through about 4 (2S + 1)
 * T operations that mostly cancel): f64 1e-14 relative, plus 1e-15
 * absolute for gradients that cancel to near 0 (exp(lp) minus a posterior
 * of the same size); f32 3e-7 relative (2.5 ulps) and 3e-7 absolute on
 * gradients of order 1. */
Test(ctc_loss, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("ctc_loss.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int nan_grads = 0, infs = 0, batched = 0;
    for (int i = 0; i < n; i++) {
        char c[16], what[160];
        snprintf(c, sizeof c, "case%d", i);
        const bool f64 = !strcmp(th_golden_meta(f, c, "dtype"), "f64");
        const tg_reduction red = th_reduction_of(th_golden_meta(f, c, "red"));
        const tg_ctc_loss_opts o = opts_of(atoi(th_golden_meta(f, c, "blank")), red,
                                           atoi(th_golden_meta(f, c, "zero_infinity")) != 0);
        snprintf(what, sizeof what, "%s (%s %s, %s, zero_infinity %d)", c,
                 th_golden_meta(f, c, "name"), th_golden_meta(f, c, "dtype"),
                 th_golden_meta(f, c, "red"), o.zero_infinity);
        tg_tensor *lp = th_leaf_clone(th_golden_get(f, c, "lp")), *y = NULL, *d = NULL;
        OK(tg_ctc_loss(&y, lp, (tg_tensor *)th_golden_get(f, c, "targets"),
                       (tg_tensor *)th_golden_get(f, c, "il"),
                       (tg_tensor *)th_golden_get(f, c, "tl"), &o));
        const double rtol = f64 ? 1e-14 : 3e-7, atol = f64 ? 1e-15 : 3e-7;
        const tg_tensor *want = th_golden_get(f, c, "y");
        th_expect_near(what, y, want, rtol, atol);
        tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g");
        OK(tg_grad(&d, 1, &y, &g, 1, &lp, NULL));
        th_expect_near(what, d, th_golden_get(f, c, "d"), rtol, atol);
        for (int64_t k = 0; k < tg_tensor_numel(want); k++) infs += isinf(th_at(want, k));
        nan_grads += isnan(th_at(d, 0)) || isnan(th_at(d, tg_tensor_numel(d) - 1));
        batched += tg_tensor_ndim(lp) == 3;
        tg_tensor_release(lp);
        tg_tensor_release(y);
        tg_tensor_release(d);
    }
    cr_assert(n >= 150, "%d cases", n);
    cr_assert(infs >= 10 && nan_grads >= 4 && batched < n,
              "the goldens lack edge cases: %d infinite losses, %d NaN gradients, %d of %d "
              "batched", infs, nan_grads, batched, n);
    tg_st_free(f);
}

/* ---- every alignment ------------------------------------------------------------------ */

/* -log of the sum, over the C^steps label sequences a of length steps that
 * collapse to target l (S labels; merge repeats, then drop blanks), of
 * prod_t exp(lp[t, b, a_t]): the definition, by enumeration. */
static double brute_nll(const tg_tensor *lp, int64_t b, int64_t steps, const int64_t *l, int64_t S,
                        int64_t blank)
{
    const int64_t N = tg_tensor_shape(lp)[1], C = tg_tensor_shape(lp)[2];
    int64_t a[8] = {0}, total = 1;
    for (int64_t t = 0; t < steps; t++) total *= C;
    double p = 0;
    for (int64_t k = 0; k < total; k++) {
        for (int64_t t = 0, r = k; t < steps; t++, r /= C) a[t] = r % C;
        int64_t m = 0;
        bool ok = true;
        for (int64_t t = 0; t < steps && ok; t++) {
            if (a[t] == blank || (t > 0 && a[t] == a[t - 1])) continue;
            ok = m < S && a[t] == l[m];
            m++;
        }
        if (!ok || m != S) continue;
        double lsum = 0;
        for (int64_t t = 0; t < steps; t++) lsum += th_at(lp, (t * N + b) * C + a[t]);
        p += exp(lsum);
    }
    return -log(p);
}

/* Sequences of T <= 5 steps over 3 or 4 classes: repeated labels, the
 * blank in the middle and at the end, an input shorter than T (and of 0
 * steps), targets that no alignment reaches (inf), empty targets. */
Test(ctc_loss, brute_force_sum_over_alignments)
{
    uint64_t s = 4411;
    static const struct {
        int64_t T, C, blank, il[4], tl[4], S, lab[4][3];
    } cases[] = {
        {4, 3, 0, {4, 4, 3, 2}, {2, 2, 0, 1}, 2, {{1, 1}, {2, 1}, {0}, {2}}},
        {5, 4, 2, {5, 4, 5, 1}, {3, 2, 3, 0}, 3, {{1, 1, 1}, {3, 0}, {0, 3, 3}, {0}}},
        {3, 3, 2, {3, 3, 2, 0}, {3, 1, 2, 0}, 3, {{0, 1, 0}, {1}, {1, 1}, {0}}},
        {4, 3, 1, {4, 0, 1, 4}, {1, 1, 1, 3}, 3, {{2}, {0}, {0}, {0, 2, 0}}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const int64_t T = cases[k].T, C = cases[k].C, N = 4, S = cases[k].S;
        tg_tensor *lp = logp(&s, TG_F64, T, N, C), *y = NULL;
        int64_t flat[12] = {0};
        for (int64_t b = 0; b < N; b++)
            for (int64_t i = 0; i < S; i++) flat[b * S + i] = cases[k].lab[b][i];
        tg_tensor *tg = ints(TG_I64, 2, (int64_t[]){N, S}, flat);
        tg_tensor *il = vec(N, cases[k].il), *tl = vec(N, cases[k].tl);
        const tg_ctc_loss_opts o = opts_of(cases[k].blank, TG_REDUCTION_NONE, false);
        OK(tg_ctc_loss(&y, lp, tg, il, tl, &o));
        for (int64_t b = 0; b < N; b++) {
            const double want = brute_nll(lp, b, cases[k].il[b], cases[k].lab[b],
                                          cases[k].tl[b], cases[k].blank);
            const double got = th_at(y, b);
            cr_assert(th_close(got, want, 1e-12, 1e-14),
                      "case %zu, sequence %lld: %.17g, the alignments give %.17g", k,
                      (long long)b, got, want);
        }
        th_release_all(5, (tg_tensor *[]){lp, tg, il, tl, y});
    }
}

/* ---- gradients ---------------------------------------------------------------------- */

typedef struct ctc_fix {
    tg_tensor *targets, *il, *tl;
    tg_ctc_loss_opts o;
} ctc_fix;

/* ctc_loss(log_softmax(x, -1)): torch's gradient is the derivative through
 * the log_softmax (see tapegrad/loss.h). */
static int ctc_of_logits(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const ctc_fix *u = user;
    tg_tensor *lp = NULL;
    int rc = tg_log_softmax(&lp, in[0], tg_tensor_ndim(in[0]) - 1);
    if (rc == TG_OK) rc = tg_ctc_loss(out, lp, u->targets, u->il, u->tl, &u->o);
    tg_tensor_release(lp);
    return rc;
}

Test(ctc_loss, gradcheck_through_log_softmax_in_f64)
{
    uint64_t s = 907;
    const int64_t lab[] = {1, 2, 2, 3, 1, 3, 3, 1, 2};   /* concatenated: 4, 2, 0, 3 */
    for (int r = 0; r < 3; r++) {
        const tg_reduction red = r == 0 ? TG_REDUCTION_MEAN : r == 1 ? TG_REDUCTION_SUM
                                                                     : TG_REDUCTION_NONE;
        ctc_fix u = {.targets = vec(9, lab), .il = vec(4, (int64_t[]){6, 4, 2, 6}),
                     .tl = vec(4, (int64_t[]){4, 2, 0, 3}),
                     .o = opts_of(r == 2 ? 4 : 0, red, false)};
        if (r == 2) {   /* blank 4: the labels stay clear of it */
            tg_tensor_release(u.targets);
            u.targets = vec(9, (int64_t[]){1, 2, 2, 3, 1, 3, 0, 1, 0});
        }
        tg_tensor *x = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){6, 4, 5}, -1.5, 1.5);
        OK(tg_tensor_set_requires_grad(x, true));
        OK(tg_gradcheck(ctc_of_logits, &u, 1, &x, NULL));
        th_release_all(4, (tg_tensor *[]){x, u.targets, u.il, u.tl});
    }
    /* unbatched, with an infeasible target (2 2 2 needs 5 steps, given 4)
     * and zero_infinity: loss and gradient 0 */
    ctc_fix u = {.targets = vec(3, (int64_t[]){2, 2, 2}), .il = vec(1, (int64_t[]){4}),
                 .tl = vec(1, (int64_t[]){3}), .o = opts_of(0, TG_REDUCTION_SUM, true)};
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){5, 3}, -1, 1);
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_gradcheck(ctc_of_logits, &u, 1, &x, NULL));
    th_release_all(4, (tg_tensor *[]){x, u.targets, u.il, u.tl});
}

/* For log_probs from a log_softmax, torch's gradient at each step t < I
 * sums over the classes to g (sum_c p_c - sum_c posterior_c) = 0: the
 * posteriors of the labels at a step add up to 1. */
Test(ctc_loss, gradient_rows_sum_to_zero)
{
    uint64_t s = 31;
    tg_tensor *lp = logp(&s, TG_F64, 7, 2, 4), *y = NULL, *d = NULL;
    OK(tg_tensor_set_requires_grad(lp, true));
    tg_tensor *tg = vec(4, (int64_t[]){1, 3, 3, 2}), *il = vec(2, (int64_t[]){7, 5});
    tg_tensor *tl = vec(2, (int64_t[]){3, 1});
    const tg_ctc_loss_opts o = opts_of(0, TG_REDUCTION_SUM, false);
    OK(tg_ctc_loss(&y, lp, tg, il, tl, &o));
    OK(tg_grad(&d, 1, &y, NULL, 1, &lp, NULL));
    for (int64_t t = 0; t < 7; t++)
        for (int64_t b = 0; b < 2; b++) {
            double sum = 0, mag = 0;
            for (int64_t c = 0; c < 4; c++) {
                sum += th_at(d, (t * 2 + b) * 4 + c);
                mag += fabs(th_at(d, (t * 2 + b) * 4 + c));
            }
            cr_assert(fabs(sum) <= 1e-14, "t=%lld b=%lld: the row sums to %g", (long long)t,
                      (long long)b, sum);
            cr_assert(t < (b ? 5 : 7) ? mag > 1e-3 : mag == 0,
                      "t=%lld b=%lld: |row| = %g", (long long)t, (long long)b, mag);
        }
    th_release_all(6, (tg_tensor *[]){lp, y, d, tg, il, tl});
}

/* The batch, its sequences run on four threads that all join (the caller
 * waits for every worker), gives each sequence's loss and gradient bit for
 * bit as a call on that sequence alone. */
Test(ctc_loss, batch_matches_each_sequence_alone)
{
    uint64_t s = 77;
    const int64_t patience = tg__pool_set_patience(-1);
    const int threads = tg_get_num_threads();
    OK(tg_set_num_threads(4));
    enum { T = 300, N = 6, C = 9, S = 60 };
    tg_tensor *lp = logp(&s, TG_F32, T, N, C), *y = NULL, *ys = NULL, *d = NULL;
    OK(tg_tensor_set_requires_grad(lp, true));
    int64_t lab[N * S], il[N], tl[N];
    for (int64_t b = 0; b < N; b++) {
        il[b] = T - 7 * b;
        tl[b] = S - 3 * b;
        for (int64_t i = 0; i < S; i++) lab[b * S + i] = 1 + (b * 7 + i * (i % 3)) % (C - 1);
    }
    tg_tensor *tg = NULL, *ilt = vec(N, il), *tlt = vec(N, tl);
    OK(tg_tensor_from_data(&tg, TG_I64, 2, (int64_t[]){N, S}, lab));
    const tg_ctc_loss_opts o = opts_of(0, TG_REDUCTION_NONE, false);
    for (int rep = 0; rep < 4; rep++) {   /* a race shows in some runs */
        OK(tg_ctc_loss(&y, lp, tg, ilt, tlt, &o));
        OK(tg_sum(&ys, y));
        OK(tg_grad(&d, 1, &ys, NULL, 1, &lp, NULL));
        for (int64_t b = 0; b < N; b++) {
            tg_tensor *lb = NULL, *lbc = NULL, *yb = NULL, *yt = NULL, *db = NULL;
            OK(tg_narrow(&lb, lp, 1, b, 1));
            OK(tg_tensor_clone(&lbc, lb));
            OK(tg_tensor_set_requires_grad(lbc, true));
            tg_tensor *tb = vec(tl[b], lab + b * S), *ib = vec(1, &il[b]), *lenb = vec(1, &tl[b]);
            OK(tg_ctc_loss(&yb, lbc, tb, ib, lenb, &o));
            OK(tg_sum(&yt, yb));
            OK(tg_grad(&db, 1, &yt, NULL, 1, &lbc, NULL));
            cr_assert(th_at(yb, 0) == th_at(y, b) && isfinite(th_at(yb, 0)),
                      "sequence %lld: %.9g alone, %.9g in the batch", (long long)b, th_at(yb, 0),
                      th_at(y, b));
            for (int64_t t = 0; t < T; t++)
                for (int64_t c = 0; c < C; c++)
                    cr_assert(th_at(db, t * C + c) == th_at(d, (t * N + b) * C + c),
                              "sequence %lld: gradient [%lld, %lld] differs", (long long)b,
                              (long long)t, (long long)c);
            th_release_all(8, (tg_tensor *[]){lb, lbc, yb, yt, db, tb, ib, lenb});
        }
        th_release_all(3, (tg_tensor *[]){y, ys, d});
        y = ys = d = NULL;
    }
    th_release_all(4, (tg_tensor *[]){lp, tg, ilt, tlt});
    OK(tg_set_num_threads(threads));
    tg__pool_set_patience(patience);
}

/* log_probs as the transpose of a batch-first (N, T, C) tensor, as
 * lp.transpose(0, 1) in torch: the bits of its contiguous copy, and the
 * gradient of the batch-first leaf through the transpose. */
Test(ctc_loss, transposed_log_probs)
{
    uint64_t s = 64;
    tg_tensor *x = logp(&s, TG_F64, 4, 7, 5), *v = NULL, *c = NULL, *y = NULL, *yc = NULL;
    OK(tg_tensor_set_requires_grad(x, true));   /* (N, T, C) = (4, 7, 5) */
    OK(tg_transpose(&v, x, 0, 1));
    OK(tg_contiguous(&c, v));
    tg_tensor *tg = vec(7, (int64_t[]){1, 2, 3, 3, 4, 1, 2});
    tg_tensor *il = vec(4, (int64_t[]){7, 6, 5, 7});
    tg_tensor *tl = vec(4, (int64_t[]){2, 3, 0, 2}), *dx = NULL, *dc = NULL;
    const tg_ctc_loss_opts o = opts_of(0, TG_REDUCTION_SUM, false);
    OK(tg_ctc_loss(&y, v, tg, il, tl, &o));
    OK(tg_ctc_loss(&yc, c, tg, il, tl, &o));
    cr_assert(th_at(y, 0) == th_at(yc, 0) && isfinite(th_at(y, 0)), "%.17g against %.17g",
              th_at(y, 0), th_at(yc, 0));
    const tg_backward_opts keep = {.retain_graph = true};   /* the transpose is shared */
    OK(tg_grad(&dx, 1, &y, NULL, 1, &x, &keep));
    OK(tg_grad(&dc, 1, &yc, NULL, 1, &x, NULL));
    th_expect_same_bits("the gradient through the transpose", x, dx, dc);
    th_release_all(10, (tg_tensor *[]){x, v, c, y, yc, tg, il, tl, dx, dc});
}

/* torch 1.13 has no derivative of _ctc_loss_backward: a create_graph
 * backward is TG_EGRAD naming the op, and a plain one still works. */
Test(ctc_loss, create_graph_is_refused)
{
    uint64_t s = 5;
    tg_tensor *lp = logp(&s, TG_F64, 4, 1, 3), *y = NULL, *d = NULL;
    OK(tg_tensor_set_requires_grad(lp, true));
    tg_tensor *tg = vec(1, (int64_t[]){1}), *il = vec(1, (int64_t[]){4});
    tg_tensor *tl = vec(1, (int64_t[]){1});
    OK(tg_ctc_loss(&y, lp, tg, il, tl, NULL));
    tg_backward_opts bo = TG_BACKWARD_OPTS_INIT;
    bo.create_graph = true;
    cr_assert(eq(int, tg_grad(&d, 1, &y, NULL, 1, &lp, &bo), TG_EGRAD));
    th_expect_in(tg_error_message(), "ctc_loss");
    cr_assert(d == NULL, "no gradient after the refusal");
    OK(tg_grad(&d, 1, &y, NULL, 1, &lp, NULL));
    th_release_all(6, (tg_tensor *[]){lp, y, d, tg, il, tl});
}

/* ---- shapes and edges ---------------------------------------------------------------- */

/* An unbatched (T, C) input is the sequence of a (T, 1, C) batch: the same
 * bits, a 0-d loss for NONE, and a (T, C) gradient; 0-d lengths. */
Test(ctc_loss, unbatched_is_a_batch_of_one)
{
    uint64_t s = 12;
    tg_tensor *lp3 = logp(&s, TG_F64, 6, 1, 5), *lp2 = NULL, *c2 = NULL;
    OK(tg_reshape(&lp2, lp3, 2, (int64_t[]){6, 5}));
    OK(tg_tensor_clone(&c2, lp2));
    OK(tg_tensor_set_requires_grad(c2, true));
    OK(tg_tensor_set_requires_grad(lp3, true));
    tg_tensor *tg = vec(3, (int64_t[]){4, 4, 1}), *il = ints(TG_I64, 0, NULL, (int64_t[]){6});
    tg_tensor *tl = ints(TG_I32, 0, NULL, (int64_t[]){3});
    for (int r = 0; r < 3; r++) {
        const tg_ctc_loss_opts o = opts_of(0, (tg_reduction)r, false);
        tg_tensor *y3 = NULL, *y2 = NULL, *d3 = NULL, *d2 = NULL, *s3 = NULL;
        OK(tg_ctc_loss(&y3, lp3, tg, il, tl, &o));
        OK(tg_ctc_loss(&y2, c2, tg, il, tl, &o));
        cr_assert(eq(int, tg_tensor_ndim(y2), 0));
        cr_assert(eq(int, tg_tensor_ndim(y3), r == TG_REDUCTION_NONE ? 1 : 0));
        cr_assert(th_at(y2, 0) == th_at(y3, 0) && isfinite(th_at(y2, 0)),
                  "reduction %d: %.17g unbatched, %.17g batched", r, th_at(y2, 0),
                  th_at(y3, 0));
        OK(tg_sum(&s3, y3));
        OK(tg_grad(&d3, 1, &s3, NULL, 1, &lp3, NULL));
        OK(tg_grad(&d2, 1, &y2, NULL, 1, &c2, NULL));
        th_expect_shape(d2, 2, (int64_t[]){6, 5});
        for (int64_t k = 0; k < 30; k++)
            cr_assert(th_at(d2, k) == th_at(d3, k), "reduction %d: gradient %lld", r,
                      (long long)k);
        th_release_all(5, (tg_tensor *[]){y3, y2, d3, d2, s3});
    }
    th_release_all(6, (tg_tensor *[]){lp3, lp2, c2, tg, il, tl});
}

/* Input length 0 (torch reads outside its alphas there): the empty
 * alignment, loss 0 for the empty target and inf for any other, gradient
 * 0; zero_infinity makes the inf 0.  T = 0 likewise. */
Test(ctc_loss, zero_input_length)
{
    uint64_t s = 3;
    tg_tensor *lp = logp(&s, TG_F64, 3, 2, 4), *t0 = NULL;
    OK(tg_tensor_set_requires_grad(lp, true));
    tg_tensor *tg = vec(1, (int64_t[]){2}), *il = vec(2, (int64_t[]){0, 0});
    tg_tensor *tl = vec(2, (int64_t[]){0, 1});
    for (int zi = 0; zi < 2; zi++) {
        tg_tensor *y = NULL, *ys = NULL, *d = NULL;
        const tg_ctc_loss_opts o = opts_of(0, TG_REDUCTION_NONE, zi);
        OK(tg_ctc_loss(&y, lp, tg, il, tl, &o));
        cr_assert(th_at(y, 0) == 0 && (zi ? th_at(y, 1) == 0 : isinf(th_at(y, 1))),
                  "zero_infinity %d: losses %g, %g", zi, th_at(y, 0), th_at(y, 1));
        OK(tg_sum(&ys, y));
        OK(tg_grad(&d, 1, &ys, NULL, 1, &lp, NULL));
        for (int64_t k = 0; k < 24; k++) cr_assert(th_at(d, k) == 0, "gradient %lld", k);
        th_release_all(3, (tg_tensor *[]){y, ys, d});
    }
    OK(tg_tensor_zeros(&t0, TG_F32, 3, (int64_t[]){0, 2, 4}));
    tg_tensor *y = NULL;
    OK(tg_ctc_loss(&y, t0, tg, il, tl, &(tg_ctc_loss_opts){.reduction = TG_REDUCTION_SUM}));
    cr_assert(isinf(th_at(y, 0)), "T = 0: %g", th_at(y, 0));
    th_release_all(6, (tg_tensor *[]){lp, t0, tg, il, tl, y});
}

/* N = 0, as torch: NONE gives (0), SUM 0 and MEAN NaN. */
Test(ctc_loss, empty_batch)
{
    tg_tensor *lp = NULL, *tg = NULL, *il = NULL, *tl = NULL;
    OK(tg_tensor_zeros(&lp, TG_F64, 3, (int64_t[]){5, 0, 4}));
    OK(tg_tensor_zeros(&tg, TG_I64, 2, (int64_t[]){0, 3}));
    OK(tg_tensor_zeros(&il, TG_I64, 1, (int64_t[]){0}));
    OK(tg_tensor_zeros(&tl, TG_I64, 1, (int64_t[]){0}));
    for (int r = 0; r < 3; r++) {
        tg_tensor *y = NULL;
        OK(tg_ctc_loss(&y, lp, tg, il, tl, &(tg_ctc_loss_opts){.reduction = (tg_reduction)r}));
        if (r == TG_REDUCTION_NONE) th_expect_shape(y, 1, (int64_t[]){0});
        else if (r == TG_REDUCTION_SUM) cr_assert(th_at(y, 0) == 0, "sum %g", th_at(y, 0));
        else cr_assert(isnan(th_at(y, 0)), "mean %g", th_at(y, 0));
        tg_tensor_release(y);
    }
    th_release_all(4, (tg_tensor *[]){lp, tg, il, tl});
}

/* Inside an autocast scope a bf16 log_probs is cast to f32 first (torch's
 * FP32 list): the f32 call's bits, and a bf16 gradient. */
Test(ctc_loss, autocast_casts_to_f32)
{
    uint64_t s = 8;
    tg_tensor *f = logp(&s, TG_F32, 5, 2, 4), *h = NULL, *hf = NULL, *y = NULL, *yf = NULL;
    OK(tg_to_dtype(&h, f, TG_BF16));
    OK(tg_to_dtype(&hf, h, TG_F32));
    OK(tg_tensor_set_requires_grad(h, true));
    tg_tensor *tg = vec(3, (int64_t[]){1, 2, 3}), *il = vec(2, (int64_t[]){5, 4});
    tg_tensor *tl = vec(2, (int64_t[]){2, 1}), *d = NULL;
    OK(tg_autocast_begin(TG_BF16));
    OK(tg_ctc_loss(&y, h, tg, il, tl, NULL));
    OK(tg_autocast_end());
    OK(tg_ctc_loss(&yf, hf, tg, il, tl, NULL));
    cr_assert(tg_tensor_dtype(y) == TG_F32 && th_at(y, 0) == th_at(yf, 0),
              "%s %.9g against %.9g", tg_dtype_name(tg_tensor_dtype(y)), th_at(y, 0),
              th_at(yf, 0));
    OK(tg_grad(&d, 1, &y, NULL, 1, &h, NULL));
    cr_assert(tg_tensor_dtype(d) == TG_BF16, "gradient %s", tg_dtype_name(tg_tensor_dtype(d)));
    /* outside the scope half precision is refused, as torch's CPU kernel */
    tg_tensor *bad = NULL;
    cr_assert(eq(int, tg_ctc_loss(&bad, h, tg, il, tl, NULL), TG_EDTYPE));
    th_release_all(9, (tg_tensor *[]){f, h, hf, y, yf, tg, il, tl, d});
}

/* ---- refusals ---------------------------------------------------------------------- */

typedef struct call_args {
    tg_tensor *lp, *tg, *il, *tl;
    tg_ctc_loss_opts o;
} call_args;

static void refused(int line, int status, const char *text, call_args a)
{
    tg_tensor *y = NULL;
    int rc = tg_ctc_loss(&y, a.lp, a.tg, a.il, a.tl, &a.o);
    cr_assert(eq(int, rc, status), "line %d: status %d, message '%s'", line, rc,
              tg_error_message());
    cr_assert(y == NULL, "line %d: *out written", line);
    th_expect_in(tg_error_message(), text);
}
#define REFUSED(status, text, ...) refused(__LINE__, status, text, (call_args){__VA_ARGS__})

Test(ctc_loss, refusals_name_the_argument)
{
    uint64_t s = 41;
    tg_tensor *lp = logp(&s, TG_F64, 5, 2, 4), *lpi = NULL, *lp1 = NULL, *lp4 = NULL;
    OK(tg_tensor_zeros(&lpi, TG_I64, 3, (int64_t[]){5, 2, 4}));
    OK(tg_tensor_zeros(&lp1, TG_F64, 1, (int64_t[]){5}));
    OK(tg_tensor_zeros(&lp4, TG_F64, 4, (int64_t[]){5, 2, 4, 1}));
    const int64_t two3[2] = {2, 3};
    tg_tensor *tg = ints(TG_I64, 2, two3, (int64_t[]){1, 2, 3, 2, 2, -5});
    tg_tensor *il = vec(2, (int64_t[]){5, 4}), *tl = vec(2, (int64_t[]){3, 2});
    const tg_ctc_loss_opts d = TG_CTC_LOSS_OPTS_INIT;
    tg_tensor *y = NULL;
    OK(tg_ctc_loss(&y, lp, tg, il, tl, &d));   /* the padding (-5) is never read */
    cr_assert(eq(int, tg_ctc_loss(NULL, lp, tg, il, tl, &d), TG_EINVAL));
    th_expect_in(tg_error_message(), "out");
    REFUSED(TG_EINVAL, "log_probs", NULL, tg, il, tl, d);
    REFUSED(TG_EINVAL, "targets must not be NULL", lp, NULL, il, tl, d);
    REFUSED(TG_EINVAL, "input_lengths must not be NULL", lp, tg, NULL, tl, d);
    REFUSED(TG_EINVAL, "target_lengths must not be NULL", lp, tg, il, NULL, d);
    REFUSED(TG_EINVAL, "reduction=3", lp, tg, il, tl, opts_of(0, TG_REDUCTION_BATCHMEAN, 0));
    REFUSED(TG_EINVAL, "blank=4 must be a label in [0, C=4)", lp, tg, il, tl,
            opts_of(4, TG_REDUCTION_MEAN, 0));
    REFUSED(TG_EINVAL, "blank=-1", lp, tg, il, tl, opts_of(-1, TG_REDUCTION_MEAN, 0));
    REFUSED(TG_EDTYPE, "log_probs has dtype i64", lpi, tg, il, tl, d);
    REFUSED(TG_ESHAPE, "log_probs has shape (5)", lp1, tg, il, tl, d);
    REFUSED(TG_ESHAPE, "log_probs has shape (5, 2, 4, 1)", lp4, tg, il, tl, d);
    tg_tensor *tgf = NULL, *tg3 = NULL, *tgrows = NULL, *tgcat = NULL, *ilf = NULL;
    OK(tg_to_dtype(&tgf, tg, TG_F32));
    OK(tg_reshape(&tg3, tg, 3, (int64_t[]){2, 3, 1}));
    OK(tg_reshape(&tgrows, tg, 2, (int64_t[]){3, 2}));
    OK(tg_to_dtype(&ilf, il, TG_F64));
    tgcat = vec(4, (int64_t[]){1, 2, 3, 2});
    REFUSED(TG_EDTYPE, "targets has dtype f32", lp, tgf, il, tl, d);
    REFUSED(TG_ESHAPE, "targets has shape (2, 3, 1)", lp, tg3, il, tl, d);
    REFUSED(TG_ESHAPE, "N=2 rows", lp, tgrows, il, tl, d);
    REFUSED(TG_ESHAPE, "targets has 4 labels; target_lengths[0..1] already ask for 5", lp,
            tgcat, il, tl, d);
    tg_tensor *tgcat6 = vec(6, (int64_t[]){1, 2, 3, 2, 1, 1});
    REFUSED(TG_ESHAPE, "targets has 6 labels; it must have sum(target_lengths)=5", lp, tgcat6,
            il, tl, d);
    tg_tensor_release(tgcat6);
    REFUSED(TG_EDTYPE, "input_lengths has dtype f64", lp, tg, ilf, tl, d);
    tg_tensor *l3 = vec(3, (int64_t[]){3, 2, 1}), *il6 = vec(2, (int64_t[]){6, 4});
    tg_tensor *ilneg = vec(2, (int64_t[]){5, -1}), *tlneg = vec(2, (int64_t[]){-1, 2});
    tg_tensor *tl4 = vec(2, (int64_t[]){4, 2});
    REFUSED(TG_ESHAPE, "target_lengths has shape (3)", lp, tg, il, l3, d);
    REFUSED(TG_ESHAPE, "input_lengths has shape (3)", lp, tg, l3, tl, d);
    REFUSED(TG_EINVAL, "input_lengths[0]=6 must be in [0, T=5]", lp, tg, il6, tl, d);
    REFUSED(TG_EINVAL, "input_lengths[1]=-1", lp, tg, ilneg, tl, d);
    REFUSED(TG_EINVAL, "target_lengths[0]=-1", lp, tg, il, tlneg, d);
    REFUSED(TG_EINVAL, "target_lengths[0]=4 must be in [0, S=3]", lp, tg, il, tl4, d);
    REFUSED(TG_EINVAL, "target_lengths[0]=-1", lp, tgcat, il, tlneg, d);
    tg_tensor *bad = ints(TG_I64, 2, two3, (int64_t[]){1, 2, 3, 2, 4, 0});
    tg_tensor *neg = ints(TG_I32, 2, two3, (int64_t[]){1, -2, 3, 2, 1, 0});
    tg_tensor *badcat = vec(5, (int64_t[]){1, 2, 3, 2, 7});
    REFUSED(TG_EINVAL, "targets[1, 1]=4 must be a label in [0, C=4)", lp, bad, il, tl, d);
    REFUSED(TG_EINVAL, "targets[0, 1]=-2", lp, neg, il, tl, d);
    REFUSED(TG_EINVAL, "targets[4]=7 (sequence 1)", lp, badcat, il, tl, d);
    th_release_all(10, (tg_tensor *[]){lp, lpi, lp1, lp4, tg, il, tl, y, tgf, tg3});
    th_release_all(10, (tg_tensor *[]){tgrows, tgcat, ilf, l3, il6, ilneg, tlneg, tl4, bad, neg});
    tg_tensor_release(badcat);
}

/* ---- nn.CTCLoss ------------------------------------------------------------------------ */

Test(ctc_loss, module_is_the_function)
{
    uint64_t s = 19;
    tg_tensor *lp = logp(&s, TG_F32, 6, 2, 5), *y = NULL, *ym = NULL;
    tg_tensor *tg = vec(4, (int64_t[]){1, 3, 3, 4}), *il = vec(2, (int64_t[]){6, 3});
    tg_tensor *tl = vec(2, (int64_t[]){1, 3});   /* the second is infeasible */
    tg_module *m = NULL;
    OK(tg_nn_ctc_loss_new(&m, 2, TG_REDUCTION_NONE, true));
    cr_assert(eq(str, (char *)tg_module_type_name(m), "CTCLoss"));
    tg_nn_loss_opts lo;
    OK(tg_nn_loss_options(m, &lo));
    cr_assert(lo.blank == 2 && lo.zero_infinity && lo.reduction == TG_REDUCTION_NONE,
              "options: blank %lld, zero_infinity %d", (long long)lo.blank, lo.zero_infinity);
    OK(tg_module_forward_n(m, &ym, 4, (tg_tensor *[]){lp, tg, il, tl}));
    OK(tg_ctc_loss(&y, lp, tg, il, tl, &(tg_ctc_loss_opts){2, TG_REDUCTION_NONE, true}));
    cr_assert(th_same_bits(y, ym) && th_at(ym, 1) == 0, "the module's losses");
    tg_tensor *bad = NULL;
    cr_assert(tg_module_forward_n(m, &bad, 2, (tg_tensor *[]){lp, tg}) < 0, "two inputs");
    cr_assert(tg_module_forward(m, &bad, lp) < 0 && bad == NULL, "one input");
    tg_module *m2 = NULL;
    cr_assert(eq(int, tg_nn_ctc_loss_new(&m2, -1, TG_REDUCTION_MEAN, false), TG_EINVAL));
    th_expect_in(tg_error_message(), "blank=-1");
    cr_assert(eq(int, tg_nn_ctc_loss_new(&m2, 0, TG_REDUCTION_BATCHMEAN, false), TG_EINVAL));
    cr_assert(eq(int, tg_nn_ctc_loss_new(NULL, 0, TG_REDUCTION_MEAN, false), TG_EINVAL));
    cr_assert(m2 == NULL, "nothing made");
    /* no ONNX operator computes CTC: the export refuses and writes nothing */
    if (tg_onnx_available()) {
        th_tmp_dir_make("tg_ctc_");
        char path[256];
        th_tmp_path(path, sizeof path, "ctc.onnx");
        cr_assert(tg_onnx_export_n(m, 4, (tg_tensor *[]){lp, tg, il, tl}, NULL, path, NULL) < 0,
                  "exported");
        cr_assert(tg_onnx_export(m, lp, path, NULL) < 0, "exported with one input");
        cr_assert(th_exists(path) == false, "a file was written");
        th_tmp_dir_remove();
    }
    tg_module_release(m);
    th_release_all(6, (tg_tensor *[]){lp, y, ym, tg, il, tl});
}
