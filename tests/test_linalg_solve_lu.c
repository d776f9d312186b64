/* tests/test_linalg_solve_lu.c - linalg.solve's backward from its forward's
 * LU factors (src/ops/linalg_lu.c): a backward that records no graph solves
 * A^T dB = g with the saved factors and pivots, a create_graph one calls
 * solve again.  Both give the same first-order gradients (f64, to rounding)
 * for square, batched, broadcast and vector right-hand sides; the profiler
 * shows which of the two ran (the saved factors call no linalg_solve); and
 * gradcheck and gradgradcheck pass for the broadcast and vector cases.
 * det's and slogdet's backwards take inv(A)^T from their forward's factors
 * in the same way (no linalg_inv nor linalg_solve call), and agree with
 * create_graph's, which solves A^T X = (g det) I once (no linalg_inv). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

typedef struct solve_case {
    const char *what;
    int an, bn;
    int64_t a[4], b[4];
} solve_case;

/* A (an dims) and B (bn dims) of torch.linalg.solve: B is a batch of
 * vectors when it is 1-d or has A's shape without the last dim. */
static const solve_case CASES[] = {
    {"square", 2, 2, {4, 4}, {4, 3}},
    {"square vector", 2, 1, {4, 4}, {4}},
    {"batched", 3, 3, {3, 4, 4}, {3, 4, 2}},
    {"A broadcast over batch dims", 4, 3, {2, 1, 4, 4}, {3, 4, 2}},
    {"2-d A against batched B", 2, 3, {4, 4}, {5, 4, 2}},
    {"B broadcast", 3, 2, {3, 4, 4}, {4, 2}},
    {"batched vectors", 3, 2, {3, 4, 4}, {3, 4}},
    {"1-d B against batched A", 3, 1, {2, 4, 4}, {4}},
};

static int64_t forward_calls(const char *op);

/* A leaf of uniform values in [-1, 1), plus 4 on each matrix's diagonal
 * when diag (a well-conditioned A). */
static tg_tensor *leaf(uint64_t *s, tg_dtype dt, int nd, const int64_t *shape, bool diag)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    const int64_t m = shape[nd - 1];
    double *v = malloc((size_t)n * sizeof *v);
    cr_assert(v != NULL);
    for (int64_t i = 0; i < n; i++) {
        v[i] = th_uniform_pm1(s);
        if (diag && (i % (m * m)) / m == i % m) v[i] += 4;
    }
    tg_tensor *t = th_tensor_from(dt, nd, shape, v);
    free(v);
    OK(tg_tensor_set_requires_grad(t, true));
    return t;
}

/* d[0], d[1] = the gradients of <g, solve(a, b)> (g from seed), taken with
 * or without create_graph; *solves: the linalg_solve calls the backward
 * made (the profiler's count). */
static void solve_grads(tg_tensor *a, tg_tensor *b, uint64_t seed, bool create, tg_tensor **d,
                        int64_t *solves)
{
    tg_tensor *x = NULL;
    OK(tg_linalg_solve(&x, a, b));
    tg_tensor *g = th_rand_tensor(&seed, tg_tensor_dtype(x), tg_tensor_ndim(x),
                                  tg_tensor_shape(x), -1, 1);
    const tg_backward_opts o = {.create_graph = create};
    OK(tg_profile_start());
    const int rc = tg_grad(d, 1, &x, &g, 2, (tg_tensor *[]){a, b}, &o);
    OK(tg_profile_stop());
    cr_assert(eq(int, rc, TG_OK), "tg_grad: %s", tg_error_message());
    *solves = forward_calls("linalg_solve");
    tg_tensor_release(x);
    tg_tensor_release(g);
}

/* |p - q| <= tol (1 + |q|) element by element, p and q of one shape. */
static void expect_close(const tg_tensor *p, const tg_tensor *q, double tol, const char *what)
{
    cr_assert(eq(int, tg_tensor_ndim(p), tg_tensor_ndim(q)), "%s: ranks", what);
    const int64_t n = tg_tensor_numel(p);
    cr_assert(eq(i64, n, tg_tensor_numel(q)), "%s: sizes", what);
    double *u = th_doubles(p), *v = th_doubles(q);
    for (int64_t i = 0; i < n; i++)
        cr_assert(fabs(u[i] - v[i]) <= tol * (1 + fabs(v[i])), "%s: element %lld: %.17g vs %.17g",
                  what, (long long)i, u[i], v[i]);
    free(u);
    free(v);
}

static void check_case(const solve_case *c, tg_dtype dt, double tol, uint64_t seed)
{
    uint64_t s = seed;
    tg_tensor *a = leaf(&s, dt, c->an, c->a, true), *b = leaf(&s, dt, c->bn, c->b, false);
    tg_tensor *saved[2] = {NULL, NULL}, *graph[2] = {NULL, NULL};
    int64_t n_saved = -1, n_graph = -1;
    solve_grads(a, b, seed + 1, false, saved, &n_saved);
    solve_grads(a, b, seed + 1, true, graph, &n_graph);
    cr_assert(eq(i64, n_saved, 0), "%s: the backward without a graph solved again", c->what);
    cr_assert(eq(i64, n_graph, 1), "%s: the create_graph backward made %lld solves", c->what,
              (long long)n_graph);
    char what[96];
    for (int i = 0; i < 2; i++) {
        cr_assert(saved[i] != NULL && graph[i] != NULL, "%s: a gradient is missing", c->what);
        snprintf(what, sizeof what, "%s (%s): d%c", c->what, tg_dtype_name(dt), i ? 'B' : 'A');
        expect_close(saved[i], graph[i], tol, what);
        const int64_t *want = i ? c->b : c->a;
        for (int k = 0; k < (i ? c->bn : c->an); k++)
            cr_assert(eq(i64, tg_tensor_shape(saved[i])[k], want[k]), "%s: dim %d", what, k);
    }
    th_release_all(2, saved);
    th_release_all(2, graph);
    tg_tensor_release(a);
    tg_tensor_release(b);
}

Test(linalg_solve_lu, saved_factors_match_the_create_graph_gradient_f64)
{
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++)
        check_case(&CASES[i], TG_F64, 1e-12, 40 + 10 * i);
}

Test(linalg_solve_lu, saved_factors_match_the_create_graph_gradient_f32)
{
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++)
        check_case(&CASES[i], TG_F32, 1e-5, 140 + 10 * i);
}

/* The forward calls of op in the profiler's rows. */
static int64_t forward_calls(const char *op)
{
    int64_t n = 0;
    for (int i = 0; i < tg_profile_row_count(); i++) {
        tg_profile_row r;
        OK(tg_profile_row_at(i, &r));
        if (strcmp(r.name, op) == 0 && r.phase == TG_PROFILE_FORWARD) n += r.calls;
    }
    return n;
}

/* *d = the gradient of <g, det(a)> (slog: of slogdet's logabsdet), g from
 * seed, with or without create_graph; calls[0], calls[1]: the linalg_inv
 * and linalg_solve calls the backward made. */
static void det_grad(tg_tensor *a, bool slog, uint64_t seed, bool create, tg_tensor **d,
                     int64_t *calls)
{
    tg_tensor *y = NULL;
    OK(slog ? tg_linalg_slogdet(NULL, &y, a) : tg_linalg_det(&y, a));
    tg_tensor *g = th_rand_tensor(&seed, tg_tensor_dtype(y), tg_tensor_ndim(y),
                                  tg_tensor_shape(y), -1, 1);
    const tg_backward_opts o = {.create_graph = create};
    OK(tg_profile_start());
    const int rc = tg_grad(d, 1, &y, &g, 1, &a, &o);
    OK(tg_profile_stop());
    cr_assert(eq(int, rc, TG_OK), "tg_grad: %s", tg_error_message());
    calls[0] = forward_calls("linalg_inv");
    calls[1] = forward_calls("linalg_solve");
    tg_tensor_release(y);
    tg_tensor_release(g);
}

Test(linalg_solve_lu, det_and_slogdet_gradients_from_the_saved_factors)
{
    static const int64_t shapes[3][4] = {{4, 4}, {3, 4, 4}, {2, 3, 5, 5}};
    static const int nds[3] = {2, 3, 4};
    for (int k = 0; k < 3; k++)
        for (int slog = 0; slog < 2; slog++) {
            uint64_t s = 500 + 10 * k + slog;
            tg_tensor *a = leaf(&s, TG_F64, nds[k], shapes[k], true);
            tg_tensor *saved = NULL, *graph = NULL;
            int64_t n_saved[2] = {-1, -1}, n_graph[2] = {-1, -1};
            det_grad(a, slog, s, false, &saved, n_saved);
            det_grad(a, slog, s, true, &graph, n_graph);
            char what[64];
            snprintf(what, sizeof what, "%s, %d-d", slog ? "slogdet" : "det", nds[k]);
            cr_assert(n_saved[0] == 0 && n_saved[1] == 0,
                      "%s: the backward without a graph inverted or solved", what);
            cr_assert(n_graph[0] == 0 && n_graph[1] == 1,
                      "%s: the create_graph backward made %lld invs and %lld solves", what,
                      (long long)n_graph[0], (long long)n_graph[1]);
            expect_close(saved, graph, 1e-12, what);
            th_release_all(3, (tg_tensor *[]){a, saved, graph});
        }
}

static int solve_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    return tg_linalg_solve(out, in[0], in[1]);
}

Test(linalg_solve_lu, gradcheck_and_gradgradcheck_broadcast_and_vectors)
{
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        const solve_case *c = &CASES[i];
        uint64_t s = 300 + i;
        tg_tensor *in[2] = {leaf(&s, TG_F64, c->an, c->a, true),
                            leaf(&s, TG_F64, c->bn, c->b, false)};
        th_expect_gradchecks(solve_fn, NULL, 2, in, "solve, %s", c->what);
        th_release_all(2, in);
    }
}

Test(linalg_solve_lu, singular_A_named_by_its_own_batch_element)
{
    /* A (2, 1, 2, 2) with its second matrix singular, against B (3, 2, 1):
     * the error names A's element 1, as torch's (not the broadcast's 3) */
    const double v[8] = {2, 0, 0, 2, 1, 2, 2, 4};
    tg_tensor *a = th_tensor_from(TG_F64, 4, (int64_t[]){2, 1, 2, 2}, v);
    tg_tensor *b = th_tensor_from(TG_F64, 3, (int64_t[]){3, 2, 1}, (double[]){1, 2, 3, 4, 5, 6});
    tg_tensor *x = NULL;
    cr_assert(eq(int, tg_linalg_solve(&x, a, b), TG_EINVAL));
    cr_assert(x == NULL, "no output on an error");
    cr_assert(strstr(tg_error_message(), "(Batch element 1): The solver failed") != NULL, "%s",
              tg_error_message());
    tg_tensor_release(a);
    /* a 2-d A against a batch: no element named, as torch's */
    a = th_tensor_from(TG_F64, 2, (int64_t[]){2, 2}, v + 4);
    cr_assert(eq(int, tg_linalg_solve(&x, a, b), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "solve: The solver failed") != NULL, "%s",
              tg_error_message());
    tg_tensor_release(a);
    tg_tensor_release(b);
}
