/* tests/test_softmax_strided.c - softmax and log_softmax of f32 along a dim
 * that is not the last one (src/ops/softmax_strided.c: several rows at
 * once with the vectorized exp, sums in class order): values and
 * gradients against a double reference with libm's exp (within one f32
 * rounding and a bound on double's error; softmax's backward, which takes
 * no exp, bit for bit), the same bits in each exp width this CPU runs and
 * with 1 and 2 threads, rows holding NaN, +inf or only -inf NaN
 * throughout, every dim of 3-D and 4-D inputs, and PyTorch's values for
 * spatial softmax, log_softmax and cross_entropy
 * (tests/golden/softmax_spatial.safetensors); and f64 rows of large slabs
 * shared among tasks, bit for bit softmax.c's double steps. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "ops/softmax_rows_internal.h"
#include "ops/softmax_strided_internal.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static const char *const WIDTH_NAMES[] = {"", "plain", "AVX2", "AVX-512"};

/* (outer, C, inner) of shape at dim d. */
static void split_at(int ndim, const int64_t *shape, int d, int64_t s[3])
{
    s[0] = s[2] = 1;
    s[1] = shape[d];
    for (int k = 0; k < d; k++) s[0] *= shape[k];
    for (int k = d + 1; k < ndim; k++) s[2] *= shape[k];
}

/* An f32 x of the shape, U[-12, 12), whose rows (o, i) at dim d (row r =
 * o inner + i) are, by r: 0 a NaN at class C / 2, 1 a +inf at (C - 1) / 3,
 * 2 only -inf, 3 -inf at the classes c % 3 == 1, 4 the maximum last and
 * 900 above the rest, and the last row shifted by +1000 (exp(x) would
 * overflow). */
static tg_tensor *input_of(int ndim, const int64_t *shape, int d, uint64_t seed)
{
    int64_t s[3];
    split_at(ndim, shape, d, s);
    const int64_t C = s[1], inner = s[2], rows = s[0] * inner;
    uint64_t st = seed;
    tg_tensor *x = th_rand_tensor(&st, TG_F32, ndim, shape, -12, 12);
    float *v = tg_tensor_data(x);
    for (int64_t r = 0; r < rows && r < 5; r++) {
        float *row = v + (r / inner) * C * inner + r % inner;   /* class c at c inner */
        for (int64_t c = 0; c < C; c++) {
            float *e = row + c * inner;
            if (r == 0 && c == C / 2) *e = NAN;
            if (r == 1 && c == (C - 1) / 3) *e = INFINITY;
            if (r == 2 || (r == 3 && c % 3 == 1)) *e = -INFINITY;
            if (r == 4) *e = c == C - 1 ? 900.0f : *e;
        }
    }
    if (rows > 5) {
        float *row = v + ((rows - 1) / inner) * C * inner + (rows - 1) % inner;
        for (int64_t c = 0; c < C; c++) row[c * inner] += 1000.0f;
    }
    return x;
}

/* The double reference of the rows at dim d of x (f32) with libm's exp,
 * each row in class order: y = softmax or log_softmax, dx its gradient for
 * the upstream g; softmax's from the op's own output y32 (what the op
 * saves), with the op's steps, so that its rounding is the op's. */
static void reference(const tg_tensor *x, const tg_tensor *g, const tg_tensor *y32, int d,
                      bool log_, double *y, double *dx)
{
    int64_t s[3];
    split_at(tg_tensor_ndim(x), tg_tensor_shape(x), d, s);
    const int64_t C = s[1], inner = s[2];
    const float *xv = tg_tensor_cdata(x), *gv = tg_tensor_cdata(g), *yv = tg_tensor_cdata(y32);
    for (int64_t o = 0; o < s[0]; o++)
        for (int64_t i = 0; i < inner; i++) {
            const int64_t at = o * C * inner + i;
            double m = -INFINITY, sum = 0.0, sg = 0.0, sgy = 0.0;
            for (int64_t c = 0; c < C; c++)
                if (xv[at + c * inner] > m) m = xv[at + c * inner];
            for (int64_t c = 0; c < C; c++) {
                const int64_t k = at + c * inner;
                sum += exp(xv[k] - m);
                sg += gv[k];
                sgy += (double)gv[k] * (double)yv[k];
            }
            for (int64_t c = 0; c < C; c++) {
                const int64_t k = at + c * inner;
                const double e = exp(xv[k] - m);
                y[k] = log_ ? (xv[k] - m) - log(sum) : e / sum;
                dx[k] = log_ ? gv[k] - e * (sg / sum) : yv[k] * (gv[k] - sgy);
            }
        }
}

/* got (f32) is want rounded after an error of at most delta: within half
 * an f32 ulp of want plus delta, or the same infinity, or both NaN. */
static void expect_within(const char *what, int64_t k, double got, double want, double delta)
{
    if (isnan(want)) {
        cr_assert(isnan(got), "%s [%lld]: %.9g, want NaN", what, (long long)k, got);
        return;
    }
    const double tol = ldexp(fabs(want) + delta, -24) + delta + 0x1p-150;
    cr_assert(got == want || fabs(got - want) <= tol, "%s [%lld]: %.9g, want %.17g", what,
              (long long)k, got, want);
}

/* got (an f32) is want rounded to f32, or both are NaN. */
static bool same_f32(double got, double want)
{
    return isnan(want) ? isnan(got) : got == (double)(float)want;
}

/* y and the gradient of y . g (no graph: the one-pass backward) of op l
 * at dim d. */
static void run(tg_tensor *x, tg_tensor *g, int d, bool log_, tg_tensor **y, tg_tensor **dx)
{
    OK((log_ ? tg_log_softmax : tg_softmax)(y, x, d));
    OK(tg_grad(dx, 1, y, &g, 1, &x, NULL));
}

/* One shape and dim: in the default width with one thread against the
 * reference, then every width this CPU runs with 1 and 2 threads for the
 * same bits.  Returns the number of widths run. */
static int check_case(int ndim, const int64_t *shape, int d, uint64_t seed)
{
    int64_t s[3];
    split_at(ndim, shape, d, s);
    const int64_t n = s[0] * s[1] * s[2];
    tg_tensor *x = input_of(ndim, shape, d, seed), *g = th_rand_uniform(TG_F32, ndim, shape,
                                                                        seed + 1);
    OK(tg_tensor_set_requires_grad(x, true));
    /* the relative error of double's steps: C terms of a sum, the exps */
    const double rel = (double)(s[1] + 4) * 0x1p-52;
    double *y = malloc((size_t)n * sizeof *y), *dx = malloc((size_t)n * sizeof *dx);
    const int threads = tg_get_num_threads();
    int widths = 0;
    for (int l = 0; l < 2; l++) {
        char what[160];
        snprintf(what, sizeof what, "%s (%lld, %lld, %lld) dim %d",
                 l ? "log_softmax" : "softmax", (long long)s[0], (long long)s[1],
                 (long long)s[2], d);
        OK(tg_set_num_threads(1));
        tg_tensor *y0 = NULL, *d0 = NULL;
        run(x, g, d, l == 1, &y0, &d0);
        reference(x, g, y0, d, l == 1, y, dx);
        for (int64_t k = 0; k < n; k++) {
            const double yk = th_at(y0, k), dk = th_at(d0, k), gk = th_at(g, k);
            expect_within(what, k, yk, y[k], rel * (fabs(y[k]) + (l ? 1.0 : 0.0)));
            if (l) expect_within(what, k, dk, dx[k], 3.0 * rel * (fabs(gk) + fabs(dx[k])));
            else if (s[2] > 1)   /* the op's steps: its bits */
                cr_assert(same_f32(dk, dx[k]),
                          "%s backward [%lld]: %.9g, want %.9g", what, (long long)k, dk,
                          (float)dx[k]);
            else   /* the last dim: eight partial sums */
                expect_within(what, k, dk, dx[k], rel * fabs(th_at(y0, k)) * 4.0);
        }
        widths = 0;
        for (int w = TG__EXP_PLAIN; w <= TG__EXP_AVX512; w++) {
            tg__exp_width_force(w);
            if (tg__exp_width_get() != (tg__exp_width)w) {
                th_not_run("the %s width of strided softmax is not run: this CPU lacks it",
                           WIDTH_NAMES[w]);
                continue;
            }
            widths++;
            for (int t = 1; t <= 2; t++) {
                OK(tg_set_num_threads(t));
                tg_tensor *yw = NULL, *dw = NULL;
                run(x, g, d, l == 1, &yw, &dw);
                char wwhat[220];
                snprintf(wwhat, sizeof wwhat, "%s width %s threads %d", what, WIDTH_NAMES[w], t);
                th_expect_same_bits(wwhat, x, yw, y0);
                th_expect_same_bits(wwhat, x, dw, d0);
                th_release_all(2, (tg_tensor *[]){yw, dw});
            }
        }
        tg__exp_width_force(0);
        th_release_all(2, (tg_tensor *[]){y0, d0});
    }
    OK(tg_set_num_threads(threads));
    free(y);
    free(dx);
    th_release_all(2, (tg_tensor *[]){x, g});
    return widths;
}

/* Dim 1 of (outer, C, inner) for inner around the vector widths (tails of
 * 4 and 8 lanes, fewer rows than lanes) and C from 1 to 1000; several
 * tasks at (8, 10, 1024) and (3, 1000, 17). */
Test(softmax_strided, f32_rows_against_double_in_every_width_and_thread_count)
{
    static const int64_t inners[] = {1, 3, 7, 8, 9, 17, 1024};
    static const int64_t cs[] = {1, 2, 10, 1000};
    int cases = 0;
    for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++)
        for (size_t ii = 0; ii < sizeof inners / sizeof *inners; ii++) {
            const int64_t C = cs[ci], inner = inners[ii];
            const int64_t outer = C * inner >= 100000 ? 1 : inner == 1024 ? 8 : 3;
            const int64_t shape[3] = {outer, C, inner};
            cr_assert(check_case(3, shape, 1, 300 + 10 * ci + ii) >= 1, "no exp width ran");
            cases++;
        }
    cr_assert(eq(int, cases, 28));
}

/* One slab larger than a task whose rows (1100) are not a whole number of
 * tasks' rows (32 at C = 1000): the last task's share is partial. */
Test(softmax_strided, a_large_slab_shared_among_tasks)
{
    const int64_t shape[3] = {1, 1000, 1100};
    cr_assert(check_case(3, shape, 1, 400) >= 1, "no exp width ran");
}

/* The rows' stats in double, before any rounding to f32, of
 * tg__log_softmax_stats_strided_f32 (cross_entropy's, and the steps of the
 * forward and backward kernels): the same bits in every width (the later
 * widths computing the slab in two ranges of rows), each m the
 * maximum, each s = sum exp(x - m) within (C + 1) 2.3e-16 relative of libm's
 * sum in class order (each exp within 2.3e-16, libm's within an ulp); the
 * log-probability at each row's class (k * 7 % C, none for every fifth)
 * that of log_softmax's output over a strided dim. */
Test(softmax_strided, stats_in_double_are_the_same_bits_in_every_width)
{
    static const int64_t inners[] = {1, 3, 7, 8, 9, 17, 1024};
    static const int64_t cs[] = {1, 2, 10, 1000};
    for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++)
        for (size_t ii = 0; ii < sizeof inners / sizeof *inners; ii++) {
            const int64_t C = cs[ci], S = inners[ii], shape[3] = {1, C, S};
            tg_tensor *x = input_of(3, shape, 1, 500 + 10 * ci + ii);
            const float *xv = tg_tensor_cdata(x);
            double *st0 = malloc((size_t)(2 * S) * sizeof *st0);
            double *st = malloc((size_t)(2 * S) * sizeof *st);
            double *lp0 = malloc((size_t)S * sizeof *lp0), *lp = malloc((size_t)S * sizeof *lp);
            int64_t *t = malloc((size_t)S * sizeof *t);
            for (int64_t i = 0; i < S; i++) t[i] = i % 5 == 4 ? -1 : i * 7 % C;
            int widths = 0;
            for (int w = TG__EXP_PLAIN; w <= TG__EXP_AVX512; w++) {
                tg__exp_width_force(w);
                if (tg__exp_width_get() != (tg__exp_width)w) continue;
                if (widths == 0) {   /* the whole slab, then the others in two ranges */
                    tg__log_softmax_stats_strided_f32(xv, C, S, 0, S, t, st0, lp0,
                                                      (tg__exp_width)w);
                } else {
                    const int64_t h = S / 2 + 1;
                    tg__log_softmax_stats_strided_f32(xv, C, S, 0, h, t, st, lp, (tg__exp_width)w);
                    tg__log_softmax_stats_strided_f32(xv, C, S, h, S, t, st, lp, (tg__exp_width)w);
                }
                if (widths++ == 0) continue;
                for (int64_t k = 0; k < 2 * S; k++)
                    cr_assert(memcmp(&st[k], &st0[k], sizeof *st) == 0,
                              "C=%lld S=%lld width %s st[%lld]: %a, want %a", (long long)C,
                              (long long)S, WIDTH_NAMES[w], (long long)k, st[k], st0[k]);
                for (int64_t i = 0; i < S; i++)
                    cr_assert(memcmp(&lp[i], &lp0[i], sizeof *lp) == 0,
                              "C=%lld S=%lld width %s lp[%lld]: %a, want %a", (long long)C,
                              (long long)S, WIDTH_NAMES[w], (long long)i, lp[i], lp0[i]);
            }
            tg__exp_width_force(0);
            tg_tensor *ls = NULL;
            OK(tg_log_softmax(&ls, x, 1));
            for (int64_t i = 0; i < S && S > 1; i++) {   /* S = 1: the rows' own sums */
                const double want = t[i] < 0 ? 0.0 : th_at(ls, t[i] * S + i);
                cr_assert(isnan(want) ? isnan(lp0[i]) : lp0[i] == want,
                          "C=%lld S=%lld lp[%lld]: %.9g, want %.9g", (long long)C, (long long)S,
                          (long long)i, lp0[i], want);
            }
            tg_tensor_release(ls);
            for (int64_t i = 0; i < S; i++) {
                double m = -INFINITY, sum = 0.0;
                for (int64_t c = 0; c < C; c++)
                    if (xv[c * S + i] > m) m = xv[c * S + i];
                for (int64_t c = 0; c < C; c++) sum += exp(xv[c * S + i] - m);
                cr_assert(st0[2 * i] == m, "C=%lld S=%lld m[%lld]",
                          (long long)C, (long long)S, (long long)i);
                const double tol = (double)(C + 1) * 2.3e-16 * sum + 1e-300;
                cr_assert(isnan(sum) ? isnan(st0[2 * i + 1]) : fabs(st0[2 * i + 1] - sum) <= tol,
                          "C=%lld S=%lld s[%lld]: %.17g, want %.17g", (long long)C,
                          (long long)S, (long long)i, st0[2 * i + 1], sum);
            }
            free(st0);
            free(st);
            free(lp0);
            free(lp);
            free(t);
            tg_tensor_release(x);
        }
}

/* Every dim of 3-D and 4-D inputs, the last one (contiguous rows) too. */
Test(softmax_strided, every_dim_of_3d_and_4d_inputs)
{
    static const int64_t s3[3] = {3, 4, 5}, s4[4] = {2, 3, 4, 9}, s4b[4] = {4, 1, 9, 3};
    for (int d = 0; d < 3; d++) check_case(3, s3, d, 40 + d);
    for (int d = 0; d < 4; d++) check_case(4, s4, d, 50 + d);
    for (int d = 0; d < 4; d++) check_case(4, s4b, d, 60 + d);
}

/* Rows holding NaN or +inf, or only -inf, are NaN throughout (as
 * PyTorch's); a -inf entry has probability 0 and log-probability -inf. */
Test(softmax_strided, special_rows_as_softmax_c)
{
    const int64_t shape[3] = {2, 6, 9};
    tg_tensor *x = input_of(3, shape, 1, 7), *sm = NULL, *lsm = NULL;
    OK(tg_softmax(&sm, x, 1));
    OK(tg_log_softmax(&lsm, x, 1));
    for (int64_t c = 0; c < 6; c++) {
        const int64_t k = c * 9;   /* row r at position r of the first slab */
        for (int r = 0; r < 3; r++) {
            cr_assert(isnan(th_at(sm, k + r)), "softmax row %d class %lld", r, (long long)c);
            cr_assert(isnan(th_at(lsm, k + r)), "log_softmax row %d class %lld", r,
                      (long long)c);
        }
        if (c % 3 == 1) {
            cr_assert(eq(dbl, th_at(sm, k + 3), 0.0));
            cr_assert(isinf(th_at(lsm, k + 3)) && th_at(lsm, k + 3) < 0, "log 0");
        } else {
            cr_assert(th_at(sm, k + 3) > 0.0, "row 3 class %lld", (long long)c);
        }
    }
    th_release_all(3, (tg_tensor *[]){x, sm, lsm});
}

/* PyTorch's softmax and log_softmax over dim 1 (values and gradients) of
 * f32 inputs with spatial dims, and its cross_entropy of spatial f32
 * logits: within 1e-6 of the largest value (torch computes in f32). */
Test(softmax_strided, spatial_f32_matches_pytorch)
{
    tg_st_file *f = th_golden_load("softmax_spatial.safetensors");
    char cases[256];
    snprintf(cases, sizeof cases, "%s", tg_st_meta_get(f, "cases"));
    int checked = 0;
    for (char *sv, *name = strtok_r(cases, ",", &sv); name; name = strtok_r(NULL, ",", &sv)) {
        tg_tensor *w = th_golden_at(f, "%s.w", name, "");
        for (int l = 0; l < 2; l++) {
            const char *fn = l ? "log_softmax" : "softmax";
            tg_tensor *x = th_leaf_clone(th_golden_at(f, "%s.x", name, "")), *y = NULL;
            OK((l ? tg_log_softmax : tg_softmax)(&y, x, 1));
            char what[96], key[64];
            snprintf(what, sizeof what, "%s %s", name, fn);
            snprintf(key, sizeof key, "%%s.%s.y", fn);
            th_expect_close(what, y, th_golden_at(f, key, name, ""), 1e-6);
            OK(tg_backward(y, w, NULL));
            snprintf(key, sizeof key, "%%s.%s.gx", fn);
            th_expect_close(what, tg_tensor_grad(x), th_golden_at(f, key, name, ""), 1e-6);
            th_release_all(2, (tg_tensor *[]){x, y});
            checked++;
        }
    }
    snprintf(cases, sizeof cases, "%s", tg_st_meta_get(f, "ce_cases"));
    static const char *const reds[3] = {"mean", "sum", "none"};
    for (char *sv, *name = strtok_r(cases, ",", &sv); name; name = strtok_r(NULL, ",", &sv)) {
        char key[96];
        snprintf(key, sizeof key, "ce.%s.weight", name);
        const bool weighted = !strcmp(tg_st_meta_get(f, key), "1");
        snprintf(key, sizeof key, "ce.%s.ignore_index", name);
        const int64_t ignore = atoll(tg_st_meta_get(f, key));
        tg_tensor *t = th_golden_at(f, "ce.%s.target", name, "");
        tg_tensor *cw = weighted ? th_golden_at(f, "ce.%s.weight", name, "") : NULL;
        for (int r = 0; r < 3; r++) {
            tg_tensor *x = th_leaf_clone(th_golden_at(f, "ce.%s.x", name, "")), *v = NULL;
            OK(tg_cross_entropy_ex(&v, x, t, cw, ignore, th_reduction_of(reds[r]), 0.0));
            char what[96];
            snprintf(what, sizeof what, "cross_entropy %s %s", name, reds[r]);
            th_expect_close(what, v, th_golden_at(f, "ce.%s.%s.value", name, reds[r]), 1e-6);
            OK(tg_backward(v, th_golden_at(f, "ce.%s.%s.gout", name, reds[r]), NULL));
            th_expect_close(what, tg_tensor_grad(x), th_golden_at(f, "ce.%s.%s.gx", name, reds[r]),
                            1e-6);
            th_release_all(2, (tg_tensor *[]){x, v});
            checked++;
        }
    }
    cr_assert(eq(int, checked, 6 + 9));
    tg_st_free(f);
}

/* f64 rows over dim 1 of (outer, C, inner), slabs larger than a task
 * shared among tasks by rows (1100 rows, 104 a task at C = 300, the last
 * share partial; two tasks a slab of (2, 10, 4099)): with 1 and 2 threads,
 * values and gradients have the bits of softmax.c's double steps with
 * libm's exp and log done row by row here (softmax's backward from the
 * op's output), and the same bits in both thread counts. */
Test(softmax_strided, f64_large_slabs_shared_among_tasks)
{
    static const int64_t shapes[2][3] = {{1, 300, 1100}, {2, 10, 4099}};
    const int threads = tg_get_num_threads();
    for (int sh = 0; sh < 2; sh++) {
        const int64_t *shape = shapes[sh], C = shape[1], inner = shape[2];
        const int64_t n = shape[0] * C * inner;
        uint64_t st = 900 + (uint64_t)sh;
        tg_tensor *x = th_rand_tensor(&st, TG_F64, 3, shape, -12, 12);
        tg_tensor *g = th_rand_uniform(TG_F64, 3, shape, 910 + (uint64_t)sh);
        OK(tg_tensor_set_requires_grad(x, true));
        const double *xv = tg_tensor_cdata(x), *gv = tg_tensor_cdata(g);
        double *y = malloc((size_t)n * sizeof *y), *dx = malloc((size_t)n * sizeof *dx);
        for (int l = 0; l < 2; l++) {
            tg_tensor *y1 = NULL, *d1 = NULL;
            for (int t = 1; t <= 2; t++) {
                OK(tg_set_num_threads(t));
                tg_tensor *yt = NULL, *dt = NULL;
                run(x, g, 1, l == 1, &yt, &dt);
                const double *yv = tg_tensor_cdata(yt), *dv = tg_tensor_cdata(dt);
                for (int64_t o = 0; o < shape[0]; o++)
                    for (int64_t i = 0; i < inner; i++) {
                        const int64_t at = o * C * inner + i;
                        double m = -INFINITY, s = 0.0, sg = 0.0, sgy = 0.0;
                        for (int64_t c = 0; c < C; c++)
                            if (xv[at + c * inner] > m) m = xv[at + c * inner];
                        for (int64_t c = 0; c < C; c++) {
                            const int64_t k = at + c * inner;
                            s += exp(xv[k] - m);
                            sg += gv[k];
                            sgy += gv[k] * yv[k];
                        }
                        for (int64_t c = 0; c < C; c++) {
                            const int64_t k = at + c * inner;
                            const double e = exp(xv[k] - m);
                            y[k] = l ? (xv[k] - m) - log(s) : e / s;
                            dx[k] = l ? gv[k] - e * (sg / s) : yv[k] * (gv[k] - sgy);
                        }
                    }
                for (int64_t k = 0; k < n; k++) {
                    cr_assert(memcmp(&yv[k], &y[k], sizeof *y) == 0,
                              "f64 %s shape %d threads %d y[%lld]: %a, want %a",
                              l ? "log_softmax" : "softmax", sh, t, (long long)k, yv[k], y[k]);
                    cr_assert(memcmp(&dv[k], &dx[k], sizeof *dx) == 0,
                              "f64 %s shape %d threads %d dx[%lld]: %a, want %a",
                              l ? "log_softmax" : "softmax", sh, t, (long long)k, dv[k], dx[k]);
                }
                if (t == 1) {
                    y1 = yt, d1 = dt;
                    continue;
                }
                th_expect_same_bits("f64 2 threads against 1", x, yt, y1);
                th_expect_same_bits("f64 2 threads against 1", x, dt, d1);
                th_release_all(2, (tg_tensor *[]){yt, dt});
            }
            th_release_all(2, (tg_tensor *[]){y1, d1});
        }
        free(y);
        free(dx);
        th_release_all(2, (tg_tensor *[]){x, g});
    }
    OK(tg_set_num_threads(threads));
}
