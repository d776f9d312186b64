/* Tests of the autograd engine: gradients by hand, accumulation, graph
 * lifetime, higher derivatives, grad modes, hooks, in-place detection,
 * memory, tape views, autocast scopes and AMP dispatch. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "internal.h"
#include "tapegrad/ops.h"

/* Criterion's new cr_assert cannot start with "!". */
static bool falsy(bool b) { return !b; }

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* A 1-d tensor of dtype dt from values; named, optionally requiring grad. */
static tg_tensor *vec(tg_dtype dt, int64_t n, const double *v, const char *name, bool rg)
{
    tg_tensor *t = NULL;
    int64_t shape[1] = {n};
    OK(tg_tensor_zeros(&t, dt, 1, shape));
    for (int64_t i = 0; i < n; i++) OK(tg_tensor_set_flat(t, i, v[i]));
    tg_tensor_set_name(t, name);
    OK(tg_tensor_set_requires_grad(t, rg));
    return t;
}

static double at(const tg_tensor *t, int64_t i)
{
    double v = 0;
    OK(tg_tensor_get_flat(t, i, &v));
    return v;
}

static const double X[3] = {1.0, 2.0, 3.0}, W[3] = {4.0, -5.0, 0.5};

/* y = sum(x * w + x) */
static tg_tensor *expr1(tg_tensor *x, tg_tensor *w)
{
    tg_tensor *xw = NULL, *s = NULL, *y = NULL;
    OK(tg_mul(&xw, x, w));
    OK(tg_add(&s, xw, x));
    OK(tg_sum(&y, s));
    tg_tensor_release(xw);
    tg_tensor_release(s);
    return y;
}

Test(autograd, gradient_by_hand)
{
    tg_tensor *x = vec(TG_F64, 3, X, "x", true), *w = vec(TG_F64, 3, W, "w", true);
    tg_tensor *y = expr1(x, w);
    cr_assert(tg_tensor_requires_grad(y));
    cr_assert(falsy(tg_tensor_is_leaf(y)));
    OK(tg_backward(y, NULL, NULL));
    /* dy/dx = w + 1, dy/dw = x */
    for (int i = 0; i < 3; i++) {
        cr_assert(epsilon_eq(dbl, at(tg_tensor_grad(x), i), W[i] + 1.0, 1e-12));
        cr_assert(epsilon_eq(dbl, at(tg_tensor_grad(w), i), X[i], 1e-12));
    }
    /* Without create_graph the gradient is a plain tensor. */
    cr_assert(falsy(tg_tensor_requires_grad(tg_tensor_grad(x))));
    cr_assert(tg_tensor_is_leaf(tg_tensor_grad(x)));
    tg_tensor_release(y);
    tg_tensor_release(x);
    tg_tensor_release(w);
}

Test(autograd, gradients_accumulate_over_two_backwards)
{
    tg_tensor *x = vec(TG_F64, 3, X, "x", true), *w = vec(TG_F64, 3, W, "w", true);
    for (int rep = 0; rep < 2; rep++) {
        tg_tensor *y = expr1(x, w);
        OK(tg_backward(y, NULL, NULL));
        tg_tensor_release(y);
    }
    for (int i = 0; i < 3; i++) cr_assert(epsilon_eq(dbl, at(tg_tensor_grad(x), i), 2 * (W[i] + 1), 1e-12));
    tg_tensor_zero_grad(x);
    cr_assert(tg_tensor_grad(x) == NULL);
    tg_tensor_release(x);
    tg_tensor_release(w);
}

Test(autograd, retain_graph)
{
    tg_tensor *x = vec(TG_F64, 3, X, "x", true), *w = vec(TG_F64, 3, W, "w", true);
    tg_tensor *y = expr1(x, w);
    OK(tg_backward(y, NULL, NULL));
    int rc = tg_backward(y, NULL, NULL);
    cr_assert(eq(int, rc, TG_EGRAD));
    cr_assert(strstr(tg_error_message(), "retain_graph") != NULL, "%s", tg_error_message());
    /* The failed call changed nothing. */
    for (int i = 0; i < 3; i++) cr_assert(epsilon_eq(dbl, at(tg_tensor_grad(x), i), W[i] + 1, 1e-12));
    tg_tensor_release(y);

    tg_backward_opts keep = {.retain_graph = true};
    y = expr1(x, w);
    tg_tensor_zero_grad(x);
    OK(tg_backward(y, NULL, &keep));
    OK(tg_backward(y, NULL, NULL));
    for (int i = 0; i < 3; i++) cr_assert(epsilon_eq(dbl, at(tg_tensor_grad(x), i), 2 * (W[i] + 1), 1e-12));
    tg_tensor_release(y);
    tg_tensor_release(x);
    tg_tensor_release(w);
}

/* sum(x^3) written as x * x * x */
static tg_tensor *sum_cube(tg_tensor *x)
{
    tg_tensor *x2 = NULL, *x3 = NULL, *y = NULL;
    OK(tg_mul(&x2, x, x));
    OK(tg_mul(&x3, x2, x));
    OK(tg_sum(&y, x3));
    tg_tensor_release(x2);
    tg_tensor_release(x3);
    return y;
}

Test(autograd, second_derivative_through_create_graph)
{
    tg_tensor *x = vec(TG_F64, 3, X, "x", true);
    tg_tensor *y = sum_cube(x), *g = NULL, *sg = NULL, *h = NULL;
    tg_backward_opts cg = {.create_graph = true};
    OK(tg_grad(&g, 1, &y, NULL, 1, &x, &cg));
    cr_assert(tg_tensor_requires_grad(g));   /* recorded: differentiable again */
    OK(tg_sum(&sg, g));
    OK(tg_grad(&h, 1, &sg, NULL, 1, &x, NULL));
    for (int i = 0; i < 3; i++) {
        cr_assert(epsilon_eq(dbl, at(g, i), 3 * X[i] * X[i], 1e-12));   /* d/dx x^3 */
        cr_assert(epsilon_eq(dbl, at(h, i), 6 * X[i], 1e-12));          /* d2/dx2 x^3 */
    }
    cr_assert(falsy(tg_tensor_requires_grad(h)));
    cr_assert(tg_tensor_grad(x) == NULL);   /* tg_grad accumulates nothing */
    tg_tensor_release(h);
    tg_tensor_release(sg);
    tg_tensor_release(g);
    tg_tensor_release(y);
    tg_tensor_release(x);
}

Test(autograd, hessian_vector_product)
{
    /* f(x, y) = sum(x^2 y): grad = (2xy, x^2); H (vx, vy) = (2y vx + 2x vy, 2x vx). */
    const double Y[3] = {0.5, -1.0, 2.0}, VX[3] = {1.0, -2.0, 0.25}, VY[3] = {3.0, 0.5, -1.0};
    tg_tensor *x = vec(TG_F64, 3, X, "x", true), *yv = vec(TG_F64, 3, Y, "y", true);
    tg_tensor *vx = vec(TG_F64, 3, VX, "vx", false), *vy = vec(TG_F64, 3, VY, "vy", false);
    tg_tensor *xx = NULL, *xxy = NULL, *f = NULL, *g[2] = {NULL, NULL}, *p0 = NULL, *p1 = NULL,
              *s = NULL, *s0 = NULL, *s1 = NULL, *hv[2] = {NULL, NULL};
    tg_tensor *in[2] = {x, yv};
    OK(tg_mul(&xx, x, x));
    OK(tg_mul(&xxy, xx, yv));
    OK(tg_sum(&f, xxy));
    tg_backward_opts cg = {.create_graph = true};
    OK(tg_grad(g, 1, &f, NULL, 2, in, &cg));
    OK(tg_mul(&p0, g[0], vx));
    OK(tg_mul(&p1, g[1], vy));
    OK(tg_sum(&s0, p0));
    OK(tg_sum(&s1, p1));
    OK(tg_add(&s, s0, s1));
    OK(tg_grad(hv, 1, &s, NULL, 2, in, NULL));
    for (int i = 0; i < 3; i++) {
        cr_assert(epsilon_eq(dbl, at(hv[0], i), 2 * Y[i] * VX[i] + 2 * X[i] * VY[i], 1e-12));
        cr_assert(epsilon_eq(dbl, at(hv[1], i), 2 * X[i] * VX[i], 1e-12));
    }
    tg_tensor *all[] = {x, yv, vx, vy, xx, xxy, f, g[0], g[1], p0, p1, s, s0, s1, hv[0], hv[1]};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
}

Test(autograd, no_grad_scope_records_nothing)
{
    tg_tensor *x = vec(TG_F64, 3, X, "x", true), *w = vec(TG_F64, 3, W, "w", true), *y = NULL;
    long live = tg__node_live_count();
    cr_assert(tg_grad_enabled());
    tg_no_grad_begin();
    tg_no_grad_begin();   /* nests */
    tg_no_grad_end();
    cr_assert(falsy(tg_grad_enabled()));
    OK(tg_mul(&y, x, w));
    tg_no_grad_end();
    cr_assert(tg_grad_enabled());
    cr_assert(falsy(tg_tensor_requires_grad(y)));
    cr_assert(tg_tensor_is_leaf(y));
    cr_assert(eq(long, tg__node_live_count(), live));
    cr_assert(epsilon_eq(dbl, at(y, 1), X[1] * W[1], 1e-12));
    cr_assert(eq(int, tg_backward(y, NULL, NULL), TG_EGRAD));
    bool prev = tg_set_grad_enabled(false);
    cr_assert(prev);
    cr_assert(falsy(tg_set_grad_enabled(prev)));
    tg_tensor_release(y);
    tg_tensor_release(x);
    tg_tensor_release(w);
}

Test(autograd, detach_cuts_the_graph)
{
    tg_tensor *x = vec(TG_F64, 3, X, "x", true), *w = vec(TG_F64, 3, W, "w", true);
    tg_tensor *xw = NULL, *d = NULL, *z = NULL, *y = NULL;
    OK(tg_mul(&xw, x, w));
    OK(tg_tensor_detach(&d, xw));
    cr_assert(tg_tensor_is_leaf(d));
    cr_assert(falsy(tg_tensor_requires_grad(d)));
    cr_assert(tg_tensor_shares_storage(d, xw));
    OK(tg_mul(&z, d, w));   /* z = (x w) w with x w constant: dz/dw = x w */
    OK(tg_sum(&y, z));
    OK(tg_backward(y, NULL, NULL));
    cr_assert(tg_tensor_grad(x) == NULL);
    for (int i = 0; i < 3; i++) cr_assert(epsilon_eq(dbl, at(tg_tensor_grad(w), i), X[i] * W[i], 1e-12));
    tg_tensor *all[] = {x, w, xw, d, z, y};
    for (size_t i = 0; i < 6; i++) tg_tensor_release(all[i]);
}

static int double_hook(tg_tensor **grad, void *user)
{
    int *calls = user;
    tg_tensor *g2 = NULL;
    TG_TRY(tg_mul_scalar(&g2, *grad, 2.0));
    tg_tensor_release(*grad);
    *grad = g2;
    (*calls)++;
    return TG_OK;
}

static int failing_hook(tg_tensor **grad, void *user)
{
    (void)grad;
    (void)user;
    return tg__error(TG_EINVAL, "test hook refuses");
}

Test(autograd, hook_on_leaf_doubles_its_grad)
{
    tg_tensor *x = vec(TG_F64, 3, X, "x", true), *w = vec(TG_F64, 3, W, "w", true);
    int calls = 0;
    OK(tg_tensor_register_hook(x, double_hook, &calls));
    OK(tg_tensor_register_hook(x, double_hook, &calls));   /* runs after the first */
    tg_tensor *y = expr1(x, w);
    OK(tg_backward(y, NULL, NULL));
    cr_assert(eq(int, calls, 2));
    /* x receives two contributions (x*w and x); each goes through both hooks. */
    for (int i = 0; i < 3; i++) {
        cr_assert(epsilon_eq(dbl, at(tg_tensor_grad(x), i), 4 * (W[i] + 1), 1e-12));
        cr_assert(epsilon_eq(dbl, at(tg_tensor_grad(w), i), X[i], 1e-12));
    }
    tg_tensor *c = vec(TG_F64, 3, X, "c", false);
    cr_assert(eq(int, tg_tensor_register_hook(c, double_hook, &calls), TG_EGRAD));
    cr_assert(eq(int, tg_tensor_register_hook(x, NULL, NULL), TG_EINVAL));
    tg_tensor_release(c);
    tg_tensor_release(y);
    tg_tensor_release(x);
    tg_tensor_release(w);
}

Test(autograd, hook_on_non_leaf)
{
    tg_tensor *x = vec(TG_F64, 3, X, "x", true), *w = vec(TG_F64, 3, W, "w", true);
    tg_tensor *h = NULL, *y = NULL;
    int calls = 0;
    OK(tg_mul(&h, x, w));
    OK(tg_tensor_register_hook(h, double_hook, &calls));
    OK(tg_sum(&y, h));
    OK(tg_backward(y, NULL, NULL));
    cr_assert(eq(int, calls, 1));
    for (int i = 0; i < 3; i++) {
        cr_assert(epsilon_eq(dbl, at(tg_tensor_grad(x), i), 2 * W[i], 1e-12));
        cr_assert(epsilon_eq(dbl, at(tg_tensor_grad(w), i), 2 * X[i], 1e-12));
    }
    tg_tensor_release(y);
    /* A hook's error aborts the backward with its status. */
    OK(tg_tensor_register_hook(h, failing_hook, NULL));
    OK(tg_sum(&y, h));
    cr_assert(eq(int, tg_backward(y, NULL, NULL), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "refuses") != NULL);
    tg_tensor_release(y);
    tg_tensor_release(h);
    tg_tensor_release(x);
    tg_tensor_release(w);
}

Test(autograd, inplace_change_of_saved_tensor_is_reported)
{
    tg_tensor *x = vec(TG_F64, 3, X, "x", true), *w = vec(TG_F64, 3, W, "w", true);
    tg_tensor *h = NULL, *y = NULL;
    OK(tg_mul(&h, x, w));   /* mul saves x and w */
    OK(tg_sum(&y, h));
    uint64_t v0 = tg_tensor_version(w);
    OK(tg_tensor_fill(w, 7.0));
    cr_assert(tg_tensor_version(w) > v0);
    int rc = tg_backward(y, NULL, NULL);
    cr_assert(eq(int, rc, TG_EINPLACE));
    const char *msg = tg_error_message();
    cr_assert(strstr(msg, "mul") && strstr(msg, "modified in place") && strstr(msg, "'w'"), "%s", msg);
    cr_assert(tg_tensor_grad(x) == NULL);
    cr_assert(tg_tensor_grad(w) == NULL);
    tg_tensor_release(y);
    tg_tensor_release(h);
    tg_tensor_release(x);
    tg_tensor_release(w);
}

Test(autograd, backward_argument_errors)
{
    tg_tensor *x = vec(TG_F64, 3, X, "x", true), *w = vec(TG_F64, 3, W, "w", true);
    tg_tensor *h = NULL, *bad = NULL, *c = vec(TG_F64, 3, X, "c", false);
    OK(tg_mul(&h, x, w));
    cr_assert(eq(int, tg_backward(h, NULL, NULL), TG_EINVAL));   /* non-scalar, no grad */
    int64_t s2[1] = {2};
    OK(tg_tensor_zeros(&bad, TG_F64, 1, s2));
    cr_assert(eq(int, tg_backward(h, bad, NULL), TG_ESHAPE));
    cr_assert(strstr(tg_error_message(), "(2)") != NULL, "%s", tg_error_message());
    cr_assert(eq(int, tg_backward(c, NULL, NULL), TG_EGRAD));
    cr_assert(strstr(tg_error_message(), "does not require grad") != NULL);
    cr_assert(eq(int, tg_backward(NULL, NULL, NULL), TG_EINVAL));
    cr_assert(tg_tensor_grad(x) == NULL && tg_tensor_grad(w) == NULL);
    tg_tensor *gout[1] = {(tg_tensor *)0x1};
    cr_assert(eq(int, tg_grad(gout, 1, &h, NULL, 1, &x, NULL), TG_EINVAL));
    cr_assert(gout[0] == NULL);
    /* A given grad works for a non-scalar output: d<g, x*w>/dx = g*w. */
    tg_tensor *g = vec(TG_F64, 3, X, "g", false);
    OK(tg_backward(h, g, NULL));
    for (int i = 0; i < 3; i++) cr_assert(epsilon_eq(dbl, at(tg_tensor_grad(x), i), X[i] * W[i], 1e-12));
    tg_tensor *all[] = {x, w, h, bad, c, g};
    for (size_t i = 0; i < 6; i++) tg_tensor_release(all[i]);
}

Test(autograd, grad_of_non_leaf_and_unreachable_inputs)
{
    tg_tensor *x = vec(TG_F64, 3, X, "x", true), *w = vec(TG_F64, 3, W, "w", true);
    tg_tensor *u = vec(TG_F64, 3, X, "u", true), *h = NULL, *t = NULL, *y = NULL;
    OK(tg_mul(&h, x, w));
    OK(tg_tanh(&t, h));
    OK(tg_sum(&y, t));
    tg_tensor *in[3] = {h, u, x}, *g[3] = {NULL, NULL, NULL};
    OK(tg_grad(g, 1, &y, NULL, 3, in, NULL));
    cr_assert(g[1] == NULL);   /* u is not reachable from y */
    for (int i = 0; i < 3; i++) {
        double th = tanh(X[i] * W[i]);
        cr_assert(epsilon_eq(dbl, at(g[0], i), 1 - th * th, 1e-12));
        cr_assert(epsilon_eq(dbl, at(g[2], i), (1 - th * th) * W[i], 1e-12));
    }
    tg_tensor *all[] = {x, w, u, h, t, y, g[0], g[2]};
    for (size_t i = 0; i < 8; i++) tg_tensor_release(all[i]);
}

Test(autograd, memory_stays_flat_over_training_steps)
{
    tg_tensor *x = vec(TG_F64, 3, X, "x", false), *w = vec(TG_F64, 3, W, "w", true);
    long base = tg__node_live_count(), peak = 0;
    for (int step = 0; step < 100; step++) {
        tg_tensor *h = NULL, *t = NULL, *y = NULL;
        OK(tg_mul(&h, x, w));
        OK(tg_tanh(&t, h));
        OK(tg_sum(&y, t));
        tg_tensor_release(h);
        tg_tensor_release(t);
        cr_assert(eq(long, tg__node_live_count(), base + 3));
        OK(tg_backward(y, NULL, NULL));
        /* Saved tensors are gone right after backward. */
        cr_assert(eq(int, y->grad_fn->n_saved, 0));
        tg_tensor_release(y);
        long now = tg__node_live_count();
        if (now > peak) peak = now;
        tg_tensor_zero_grad(w);
    }
    cr_assert(eq(long, peak, base));
    tg_tensor_release(x);
    tg_tensor_release(w);
}

Test(autograd, long_chain_is_freed_without_recursion)
{
    tg_tensor *x = vec(TG_F64, 3, X, "x", true), *cur = tg_tensor_retain(x);
    long base = tg__node_live_count();
    for (int i = 0; i < 100000; i++) {
        tg_tensor *next = NULL;
        OK(tg_add_scalar(&next, cur, 1e-3));
        tg_tensor_release(cur);
        cur = next;
    }
    cr_assert(eq(long, tg__node_live_count(), base + 100000));
    tg_tensor *y = NULL;
    OK(tg_sum(&y, cur));
    OK(tg_backward(y, NULL, NULL));
    for (int i = 0; i < 3; i++) cr_assert(epsilon_eq(dbl, at(tg_tensor_grad(x), i), 1.0, 1e-12));
    tg_tensor_release(y);
    tg_tensor_release(cur);
    cr_assert(eq(long, tg__node_live_count(), base));
    tg_tensor_release(x);
}

/* y = sum(tanh(x * w + b)) into a string, through f. */
static char *render(int (*f)(FILE *, const tg_tensor *), tg_tensor **keep)
{
    tg_tensor *x = vec(TG_F64, 3, X, "x", false), *w = vec(TG_F64, 3, W, "w", true);
    tg_tensor *b = vec(TG_F64, 3, X, "b", true), *xw = NULL, *s = NULL, *t = NULL, *y = NULL;
    OK(tg_mul(&xw, x, w));
    OK(tg_add(&s, xw, b));
    OK(tg_tanh(&t, s));
    OK(tg_sum(&y, t));
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    OK(f(mf, y));
    fclose(mf);
    tg_tensor *all[] = {x, w, b, xw, s, t};
    for (size_t i = 0; i < 6; i++) tg_tensor_release(all[i]);
    *keep = y;
    return buf;
}

Test(autograd, dot_names_ops_and_leaves)
{
    tg_tensor *y = NULL;
    char *dot = render(tg_graph_to_dot, &y);
    cr_assert(strncmp(dot, "digraph", 7) == 0, "%s", dot);
    const char *want[] = {" mul\\n", " add\\n", " tanh\\n", " sum\\n", "label=\"w\\n", "label=\"b\\n", "->", "root"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        cr_assert(strstr(dot, want[i]) != NULL, "missing %s in\n%s", want[i], dot);
    cr_assert(strstr(dot, "label=\"x\\n") == NULL);   /* x does not require grad */
    free(dot);
    tg_tensor_release(y);
}

Test(autograd, tape_print_in_recording_order)
{
    tg_tensor *y = NULL;
    char *txt = render(tg_tape_print, &y);
    const char *mul = strstr(txt, " mul  inputs: const, leaf 'w'"), *add = strstr(txt, " add  inputs: #");
    const char *th = strstr(txt, " tanh  inputs: #"), *sum = strstr(txt, " sum  inputs: #");
    cr_assert(mul && add && th && sum, "%s", txt);
    cr_assert(mul < add && add < th && th < sum, "%s", txt);
    cr_assert(strstr(add, ", leaf 'b'") != NULL, "%s", txt);
    cr_assert(strstr(txt, "out: f64 (3)") != NULL && strstr(txt, "out: f64 ()") != NULL, "%s", txt);
    free(txt);
    tg_tensor_release(y);
}

Test(autograd, autocast_scope_nesting)
{
    tg_dtype dt = TG_I8;
    cr_assert(falsy(tg_autocast_active(&dt)));
    cr_assert(eq(int, tg_autocast_end(), TG_EINVAL));
    cr_assert(eq(int, tg_autocast_begin(TG_I32), TG_EINVAL));
    cr_assert(eq(int, tg_autocast_begin(TG_F64), TG_EINVAL));
    cr_assert(falsy(tg_autocast_active(&dt)));
    OK(tg_autocast_begin(TG_F16));
    cr_assert(tg_autocast_active(&dt) && dt == TG_F16);
    OK(tg_autocast_disable_begin());
    cr_assert(falsy(tg_autocast_active(&dt)));
    OK(tg_autocast_begin(TG_BF16));
    cr_assert(tg_autocast_active(&dt) && dt == TG_BF16);
    OK(tg_autocast_end());
    OK(tg_autocast_end());
    cr_assert(tg_autocast_active(&dt) && dt == TG_F16);
    OK(tg_autocast_end());
    cr_assert(falsy(tg_autocast_active(&dt)));
    int depth = 0;
    while (tg_autocast_begin(TG_F32) == TG_OK) depth++;
    cr_assert(eq(int, depth, 16));
    while (depth-- > 0) OK(tg_autocast_end());
    cr_assert(eq(int, tg_autocast_end(), TG_EINVAL));
}

Test(autograd, promote_dtypes_table)
{
    cr_assert(eq(int, tg_promote_dtypes(TG_F32, TG_F64), TG_F64));
    cr_assert(eq(int, tg_promote_dtypes(TG_F16, TG_F64), TG_F64));
    cr_assert(eq(int, tg_promote_dtypes(TG_F16, TG_F32), TG_F32));
    cr_assert(eq(int, tg_promote_dtypes(TG_F16, TG_BF16), TG_F32));
    cr_assert(eq(int, tg_promote_dtypes(TG_BF16, TG_BF16), TG_BF16));
}

Test(autograd, promote_through_dispatch)
{
    const double A[3] = {0.5, 1.5, -2.0};
    tg_tensor *a = vec(TG_F32, 3, A, "a", true), *b = vec(TG_F64, 3, X, "b", true);
    tg_tensor *c = NULL, *m = NULL, *y = NULL;
    OK(tg_add(&c, a, b));
    cr_assert(eq(int, tg_tensor_dtype(c), TG_F64));
    OK(tg_mul(&m, c, b));   /* y = sum((a + b) b): dy/da = b, dy/db = a + 2b */
    OK(tg_sum(&y, m));
    OK(tg_backward(y, NULL, NULL));
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(a)), TG_F32));
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(b)), TG_F64));
    for (int i = 0; i < 3; i++) {
        cr_assert(epsilon_eq(dbl, at(tg_tensor_grad(a), i), X[i], 1e-6));
        cr_assert(epsilon_eq(dbl, at(tg_tensor_grad(b), i), A[i] + 2 * X[i], 1e-6));
    }
    tg_tensor *all[] = {a, b, c, m, y};
    for (size_t i = 0; i < 5; i++) tg_tensor_release(all[i]);
}

Test(autograd, autocast_lowers_matmul_but_not_f64)
{
    tg_op_info info;
    OK(tg_op_info_find("matmul", &info));
    cr_assert(eq(int, info.amp, TG_AMP_LOWER_PRECISION));
    int64_t s[2] = {2, 2};
    tg_tensor *a = NULL, *b = NULL, *c = NULL, *d = NULL, *y = NULL;
    OK(tg_tensor_full(&a, TG_F32, 2, s, 1.5));
    OK(tg_tensor_full(&b, TG_F32, 2, s, 2.0));
    OK(tg_tensor_set_requires_grad(a, true));
    OK(tg_autocast_begin(TG_BF16));
    OK(tg_matmul(&c, a, b));
    cr_assert(eq(int, tg_tensor_dtype(c), TG_BF16));
    OK(tg_sum(&y, c));   /* FP32 policy: the sum is f32 inside autocast */
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    OK(tg_autocast_end());
    cr_assert(epsilon_eq(dbl, at(c, 0), 6.0, 1e-9));   /* 2 * 1.5 * 2, exact in bf16 */
    OK(tg_backward(y, NULL, NULL));
    /* d sum(a b) / da = ones b^T: every element 4; it comes back as f32. */
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(a)), TG_F32));
    for (int i = 0; i < 4; i++) cr_assert(epsilon_eq(dbl, at(tg_tensor_grad(a), i), 4.0, 1e-9));
    tg_tensor *a64 = NULL;
    OK(tg_tensor_full(&a64, TG_F64, 2, s, 1.5));
    OK(tg_autocast_begin(TG_F16));
    OK(tg_matmul(&d, a64, b));   /* an f64 input is never lowered: the op runs in f64 */
    OK(tg_autocast_end());
    cr_assert(eq(int, tg_tensor_dtype(d), TG_F64));
    tg_tensor *all[] = {a, b, c, d, y, a64};
    for (size_t i = 0; i < 6; i++) tg_tensor_release(all[i]);
}

Test(autograd, registry_lists_ops_in_name_order)
{
    int n = tg_op_count();
    cr_assert(n >= 20, "only %d ops", n);
    tg_op_info prev, cur;
    OK(tg_op_info_at(0, &prev));
    for (int i = 1; i < n; i++) {
        OK(tg_op_info_at(i, &cur));
        cr_assert(strcmp(prev.name, cur.name) < 0, "%s before %s", prev.name, cur.name);
        prev = cur;
    }
    cr_assert(eq(int, tg_op_info_at(n, &cur), TG_EINVAL));
    cr_assert(eq(int, tg_op_info_at(-1, &cur), TG_EINVAL));
    OK(tg_op_info_find("mul", &cur));
    cr_assert(eq(int, cur.arity, 2));
    cr_assert(cur.has_backward);
    cr_assert(tg__op_find("mul") != NULL);
    cr_assert(eq(int, tg_op_info_find("no_such_op", &cur), TG_ENOTFOUND));
    cr_assert(eq(str, (char *)tg_amp_policy_name(TG_AMP_LOWER_PRECISION), "lower_precision"));
}

/* TG_TRACE=1 prints each recorded op and each backward step on stderr.  The
 * variable is read once per process; every Criterion test runs in a process of
 * its own, so setting it here, before the first op, takes effect. */
Test(autograd, trace_prints_record_and_backward)
{
    cr_assert(eq(int, setenv("TG_TRACE", "1", 1), 0));
    char path[] = "/tmp/tg_trace_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    cr_assert(dup2(fd, 2) == 2);

    tg_tensor *x = vec(TG_F64, 3, X, "x", true), *w = vec(TG_F64, 3, W, "w", true);
    tg_tensor *y = expr1(x, w);
    OK(tg_backward(y, NULL, NULL));

    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char buf[4096] = {0};
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    unlink(path);
    cr_assert(n > 0);
    cr_assert(strstr(buf, "[tape] record #") != NULL, "trace was: %s", buf);
    cr_assert(strstr(buf, " mul(") != NULL && strstr(buf, "leaf 'w'") != NULL, "trace: %s", buf);
    cr_assert(strstr(buf, " sum(") != NULL, "trace: %s", buf);
    /* Backward runs the nodes in reverse recording order: sum before mul. */
    const char *bsum = strstr(buf, "[tape] backward #3 sum");
    const char *bmul = strstr(buf, "[tape] backward #1 mul");
    cr_assert(bsum != NULL && bmul != NULL && bsum < bmul, "trace: %s", buf);
    tg_tensor_release(y);
    tg_tensor_release(w);
    tg_tensor_release(x);
}

/* A graph recorded on two threads: B = x*x after 20 other ops on the main
 * thread, C = B*x on a worker.  Backward must order C before B whatever
 * each thread had recorded before (node numbers were per thread: this
 * aborted, or gave x no gradient). */
typedef struct mul_job { tg_tensor *a, *b, *out; int rc; } mul_job;

static void *mul_on_thread(void *p)
{
    mul_job *j = p;
    for (int i = 0; i < 3; i++) {   /* a few nodes of the worker's own first */
        tg_tensor *t = NULL;
        tg_mul(&t, j->b, j->b);
        tg_tensor_release(t);
    }
    j->rc = tg_mul(&j->out, j->a, j->b);
    return NULL;
}

Test(autograd, graph_recorded_on_two_threads)
{
    double xs[2] = {1.5, 2.0};
    tg_tensor *x = NULL, *b = NULL, *z = NULL;
    tg_tensor_from_data(&x, TG_F64, 1, (int64_t[]){2}, xs);
    tg_tensor_set_requires_grad(x, true);
    for (int i = 0; i < 20; i++) {
        tg_tensor *t = NULL;
        tg_add(&t, x, x);
        tg_tensor_release(t);
    }
    cr_assert(eq(int, tg_mul(&b, x, x), TG_OK));
    mul_job j = {.a = b, .b = x};
    pthread_t th;
    cr_assert(eq(int, pthread_create(&th, NULL, mul_on_thread, &j), 0));
    pthread_join(th, NULL);
    cr_assert(eq(int, j.rc, TG_OK));
    cr_assert(eq(int, tg_sum(&z, j.out), TG_OK));
    cr_assert(eq(int, tg_backward(z, NULL, NULL), TG_OK), "%s", tg_error_message());
    const tg_tensor *g = tg_tensor_grad(x);
    cr_assert(g != NULL);
    for (int i = 0; i < 2; i++)
        cr_assert(eq(dbl, th_at(g, i), 3 * xs[i] * xs[i]), "x.grad[%d] = %g", i, th_at(g, i));
    tg_tensor_release(z);
    tg_tensor_release(j.out);
    tg_tensor_release(b);
    tg_tensor_release(x);
}

/* As PyTorch: tg_grad refuses an input that does not require grad (even one
 * the output does not use), and tg_backward casts a gradient of another float
 * dtype to the output's (an integer gradient is TG_EDTYPE). */
Test(autograd, grad_inputs_must_require_grad_and_backward_casts_float_grads)
{
    float xs[2] = {1.5f, 2.0f};
    tg_tensor *x = NULL, *c = NULL, *y = NULL, *z = NULL, *g64 = NULL, *gi = NULL;
    tg_tensor_from_data(&x, TG_F32, 1, (int64_t[]){2}, xs);
    tg_tensor_set_requires_grad(x, true);
    tg_tensor_full(&c, TG_F32, 1, (int64_t[]){2}, 1.0);
    cr_assert(eq(int, tg_mul(&y, x, x), TG_OK));
    cr_assert(eq(int, tg_sum(&z, y), TG_OK));
    tg_tensor *grads[2] = {(tg_tensor *)&grads, (tg_tensor *)&grads};
    tg_tensor *inputs[2] = {x, c};
    cr_assert(eq(int, tg_grad(grads, 1, &z, NULL, 2, inputs, NULL), TG_EGRAD));
    cr_assert(strstr(tg_error_message(), "inputs[1] does not require grad") != NULL, "%s",
              tg_error_message());
    cr_assert(grads[0] == NULL && grads[1] == NULL);
    /* backward of y with an f64 gradient (1.5, 2): x.grad = 2x * g */
    tg_tensor_from_data(&g64, TG_F64, 1, (int64_t[]){2}, (double[]){1.5, 2.0});
    cr_assert(eq(int, tg_backward(y, g64, NULL), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(x)), TG_F32));
    cr_assert(eq(dbl, th_at(tg_tensor_grad(x), 0), 4.5));
    cr_assert(eq(dbl, th_at(tg_tensor_grad(x), 1), 8.0));
    tg_tensor *y2 = NULL;
    cr_assert(eq(int, tg_mul(&y2, x, x), TG_OK));
    tg_tensor_full(&gi, TG_I32, 1, (int64_t[]){2}, 1.0);
    cr_assert(eq(int, tg_backward(y2, gi, NULL), TG_EDTYPE));
    tg_tensor *all[] = {x, c, y, z, g64, gi, y2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
}

/* ---- tensors shared by threads ---------------------------------------------- */

enum { SHARED_ITERS = 20000 };

typedef struct shared_job {
    tg_tensor *c, *p;   /* borrowed: a constant and a leaf, shared by both threads */
    int failures;
} shared_job;

/* Each thread: s = sum(x * c * p) on its own leaf x, backward (mul saves c
 * and p, retaining them; p's .grad receives x * c), and a no-grad reshape
 * of p (a view: another retain of p's storage). */
static void *use_shared(void *arg)
{
    shared_job *j = arg;
    const double xs[4] = {1, 2, 3, 4};
    for (int it = 0; it < SHARED_ITERS; it++) {
        tg_tensor *x = NULL, *xc = NULL, *y = NULL, *s = NULL, *r = NULL;
        int rc = tg_tensor_from_data(&x, TG_F64, 1, (int64_t[]){4}, xs);
        if (rc >= 0) rc = tg_tensor_set_requires_grad(x, true);
        if (rc >= 0) rc = tg_mul(&xc, x, j->c);
        if (rc >= 0) rc = tg_mul(&y, xc, j->p);
        if (rc >= 0) rc = tg_sum(&s, y);
        if (rc >= 0) rc = tg_backward(s, NULL, NULL);
        tg_no_grad_begin();
        if (rc >= 0) rc = tg_reshape(&r, j->p, 2, (int64_t[]){2, 2});
        tg_no_grad_end();
        j->failures += rc < 0;
        tg_tensor *all[] = {r, s, y, xc, x};
        for (size_t k = 0; k < sizeof all / sizeof *all; k++) tg_tensor_release(all[k]);
    }
    return NULL;
}

/* Two threads build, backpropagate and free their own graphs over one shared
 * constant and one shared leaf at the same time, as PyTorch allows: the
 * refcounts end where they started and the leaf's gradient is the sum of
 * every backward (2 * SHARED_ITERS * x * c).  With plain int refcounts and
 * an unguarded .grad this crashed (use after free) or lost additions. */
Test(autograd, tensors_shared_by_two_threads_keep_refcounts_and_gradients)
{
    const double ones[4] = {1, 1, 1, 1};
    tg_tensor *c = vec(TG_F64, 4, ones, "c", false), *p = vec(TG_F64, 4, ones, "p", true);
    shared_job jobs[2] = {{.c = c, .p = p}, {.c = c, .p = p}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        cr_assert(eq(int, pthread_create(&th[i], NULL, use_shared, &jobs[i]), 0));
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    cr_assert(eq(int, jobs[0].failures + jobs[1].failures, 0), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_refcount(c), 1));
    cr_assert(eq(int, tg_tensor_refcount(p), 1));
    const tg_tensor *g = tg_tensor_grad(p);
    cr_assert(g != NULL);
    for (int i = 0; i < 4; i++)
        cr_assert(eq(dbl, th_at(g, i), 2.0 * SHARED_ITERS * (i + 1)), "p.grad[%d] = %g", i,
                  th_at(g, i));
    tg_tensor_release(p);
    tg_tensor_release(c);
}

/* ---- hooks under tg_grad ------------------------------------------------------ */

static int times_two(tg_tensor **grad, void *user)
{
    (void)user;
    tg_tensor *d = NULL;
    TG_TRY(tg_mul_scalar(&d, *grad, 2.0));
    tg_tensor_release(*grad);
    *grad = d;
    return TG_OK;
}

/* As torch.autograd.grad in PyTorch 1.13: x = ones(3), m = 3x, a x2 hook on
 * m and on x.  For s = sum(m * m): ds/dm is returned as it arrives, 2m = 6
 * (m's hook does not touch it), while what flows on through m is doubled:
 * ds/dx = 2 * 6 * 3 = 36, and x's hook (a leaf's, run when .grad is
 * accumulated) does not run.  tg_backward of sum(m) runs both: x.grad =
 * 1 * 2 * 3 * 2 = 12.  (torch: grad(s, [m, x]) = (6, 36), x.grad = 12.) */
Test(autograd, tg_grad_runs_hooks_as_torch_autograd_grad)
{
    const double ones[3] = {1, 1, 1};
    tg_tensor *x = vec(TG_F64, 3, ones, "x", true), *m = NULL, *mm = NULL, *s = NULL;
    OK(tg_mul_scalar(&m, x, 3.0));
    OK(tg_tensor_register_hook(m, times_two, NULL));
    OK(tg_tensor_register_hook(x, times_two, NULL));
    OK(tg_mul(&mm, m, m));
    OK(tg_sum(&s, mm));
    tg_tensor *g[2] = {NULL, NULL}, *in[2] = {m, x};
    tg_backward_opts keep = {.retain_graph = true};
    OK(tg_grad(g, 1, &s, NULL, 2, in, &keep));
    for (int i = 0; i < 3; i++) {
        cr_assert(eq(dbl, at(g[0], i), 6.0), "ds/dm[%d] = %g", i, at(g[0], i));
        cr_assert(eq(dbl, at(g[1], i), 36.0), "ds/dx[%d] = %g", i, at(g[1], i));
    }
    cr_assert(tg_tensor_grad(x) == NULL, "tg_grad wrote x.grad");
    tg_tensor *s2 = NULL;
    OK(tg_sum(&s2, m));
    OK(tg_backward(s2, NULL, NULL));
    for (int i = 0; i < 3; i++)
        cr_assert(eq(dbl, at(tg_tensor_grad(x), i), 12.0), "x.grad[%d]", i);
    tg_tensor *all[] = {g[0], g[1], s2, s, mm, m, x};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) tg_tensor_release(all[k]);
}

static int null_hook(tg_tensor **grad, void *user)
{
    (void)user;
    tg_tensor_release(*grad);
    *grad = NULL;
    return TG_OK;
}

/* A hook that leaves no gradient is an error with a message, on a leaf and
 * on a non-leaf (it used to crash). */
Test(autograd, hook_leaving_a_null_gradient_is_an_error)
{
    const double ones[3] = {1, 1, 1};
    for (int leaf = 0; leaf < 2; leaf++) {
        tg_tensor *x = vec(TG_F64, 3, ones, "x", true), *m = NULL, *s = NULL;
        OK(tg_mul_scalar(&m, x, 3.0));
        OK(tg_tensor_register_hook(leaf ? x : m, null_hook, NULL));
        OK(tg_sum(&s, m));
        cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_EGRAD));
        cr_assert(strstr(tg_error_message(), "hook left the gradient NULL") != NULL, "%s",
                  tg_error_message());
        tg_tensor_release(s), tg_tensor_release(m), tg_tensor_release(x);
    }
}

/* ---- an input given twice ------------------------------------------------------ */

/* tg_grad fills every slot of an input given more than once, as PyTorch 1.13's
 * torch.autograd.grad does (it returns the gradient at each input's gradient
 * edge).  x = ones(3); m = 3x, with a x2 hook; a, a second tensor on m's node
 * (as the alias tg__ctx_saved_output makes); u, unused;
 * s = sum(m * m) + sum(5a) + sum(x).  A tensor on m's node is m to the engine,
 * so torch's answer is that of s = sum(m * m) + sum(5m) + sum(x) for inputs
 * [m, x, m, u, x, m, u]: (11, 67, 11, None, 67, 11, None) with
 * allow_unused=True; m's slots get its gradient before m's hook doubles it. */
Test(autograd, tg_grad_fills_every_slot_of_a_repeated_input)
{
    const double ones[3] = {1, 1, 1};
    tg_tensor *x = vec(TG_F64, 3, ones, "x", true), *u = vec(TG_F64, 3, ones, "u", true);
    tg_tensor *m = NULL, *a = NULL, *mm = NULL, *a5 = NULL, *s1 = NULL, *s2 = NULL, *s3 = NULL,
              *s12 = NULL, *s = NULL;
    OK(tg_mul_scalar(&m, x, 3.0));
    OK(tg_tensor_register_hook(m, times_two, NULL));
    OK(tg_tensor_detach(&a, m));
    a->grad_fn = tg__node_retain(m->grad_fn);
    a->requires_grad = true;
    OK(tg_mul(&mm, m, m));
    OK(tg_mul_scalar(&a5, a, 5.0));
    OK(tg_sum(&s1, mm));
    OK(tg_sum(&s2, a5));
    OK(tg_sum(&s3, x));
    OK(tg_add(&s12, s1, s2));
    OK(tg_add(&s, s12, s3));
    tg_tensor *in[7] = {m, x, a, u, x, m, u}, *g[7] = {NULL};
    const double want[7] = {11, 67, 11, 0, 67, 11, 0};
    OK(tg_grad(g, 1, &s, NULL, 7, in, NULL));
    for (int j = 0; j < 7; j++) {
        if (in[j] == u) {
            cr_assert(g[j] == NULL, "slot %d: u is unused", j);
            continue;
        }
        cr_assert(g[j] != NULL, "slot %d has no gradient", j);
        for (int i = 0; i < 3; i++)
            cr_assert(eq(dbl, at(g[j], i), want[j]), "slot %d [%d] = %g", j, i, at(g[j], i));
    }
    cr_assert(tg_tensor_grad(x) == NULL && tg_tensor_grad(u) == NULL);
    for (int j = 0; j < 7; j++) tg_tensor_release(g[j]);
    tg_tensor *all[] = {s, s12, s3, s2, s1, a5, mm, a, m, u, x};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) tg_tensor_release(all[k]);
}

/* ---- many inputs, many leaves --------------------------------------------------- */

enum { MANY = 20000 };

/* x[i] = i / 2, scalar leaves; m[i] = 2 x[i]; y = sum_i ((i + 1) m[i] + x[i]),
 * summed left to right.  So dy/dm[i] = i + 1 and dy/dx[i] = 2 (i + 1) + 1:
 * another value in every slot, and each leaf is reached twice.  The caller
 * releases x[i], m[i] and y. */
static tg_tensor *many_terms(int n, tg_tensor **x, tg_tensor **m)
{
    tg_tensor *y = NULL;
    for (int i = 0; i < n; i++) {
        tg_tensor *t = NULL, *v = NULL, *s = NULL;
        OK(tg_tensor_scalar(&x[i], TG_F64, 0.5 * i));
        OK(tg_tensor_set_requires_grad(x[i], true));
        OK(tg_mul_scalar(&m[i], x[i], 2.0));
        OK(tg_mul_scalar(&t, m[i], i + 1.0));
        OK(tg_add(&v, t, x[i]));
        tg_tensor_release(t);
        if (!y) {
            y = v;
            continue;
        }
        OK(tg_add(&s, y, v));
        tg_tensor_release(y);
        tg_tensor_release(v);
        y = s;
    }
    return y;
}

static double d_dm(int i) { return i + 1.0; }
static double d_dx(int i) { return 2.0 * (i + 1) + 1; }

/* The first k < n with g[k * stride] not a one-element tensor holding exactly
 * want(k), or -1 (one assertion for all, not one per element). */
static int first_wrong(tg_tensor *const *g, int n, int stride, double (*want)(int))
{
    for (int k = 0; k < n; k++) {
        const tg_tensor *t = g[k * stride];
        if (!t || tg_tensor_numel(t) != 1 || th_at(t, 0) != want(k)) return k;
    }
    return -1;
}

static void release_all(tg_tensor **t, int n)
{
    for (int i = 0; i < n; i++) tg_tensor_release(t[i]);
}

Test(autograd, tg_grad_of_many_leaf_inputs)
{
    tg_tensor **x = calloc(MANY, sizeof *x), **m = calloc(MANY, sizeof *m);
    tg_tensor **g = calloc(MANY, sizeof *g);
    cr_assert(x && m && g);
    tg_tensor *y = many_terms(MANY, x, m);
    OK(tg_grad(g, 1, &y, NULL, MANY, x, NULL));
    int k = first_wrong(g, MANY, 1, d_dx);
    cr_assert(eq(int, k, -1), "dy/dx[%d] = %g, want %g", k, k < 0 || !g[k] ? 0 : th_at(g[k], 0),
              k < 0 ? 0 : d_dx(k));
    for (int i = 0; i < MANY; i++) cr_assert(tg_tensor_grad(x[i]) == NULL, "x[%d].grad set", i);
    release_all(g, MANY);
    tg_tensor_release(y);
    release_all(m, MANY);
    release_all(x, MANY);
    free(g), free(m), free(x);
}

/* Non-leaf and leaf inputs interleaved: in[2i] = m[i], in[2i + 1] = x[i]. */
Test(autograd, tg_grad_of_many_non_leaf_inputs)
{
    tg_tensor **x = calloc(MANY, sizeof *x), **m = calloc(MANY, sizeof *m);
    tg_tensor **in = calloc(2 * MANY, sizeof *in), **g = calloc(2 * MANY, sizeof *g);
    cr_assert(x && m && in && g);
    tg_tensor *y = many_terms(MANY, x, m);
    for (int i = 0; i < MANY; i++) in[2 * i] = m[i], in[2 * i + 1] = x[i];
    OK(tg_grad(g, 1, &y, NULL, 2 * MANY, in, NULL));
    int k = first_wrong(g, MANY, 2, d_dm);
    cr_assert(eq(int, k, -1), "dy/dm[%d] = %g, want %g", k,
              k < 0 || !g[2 * k] ? 0 : th_at(g[2 * k], 0), k < 0 ? 0 : d_dm(k));
    k = first_wrong(g + 1, MANY, 2, d_dx);
    cr_assert(eq(int, k, -1), "dy/dx[%d] = %g, want %g", k,
              k < 0 || !g[2 * k + 1] ? 0 : th_at(g[2 * k + 1], 0), k < 0 ? 0 : d_dx(k));
    release_all(g, 2 * MANY);
    tg_tensor_release(y);
    release_all(m, MANY);
    release_all(x, MANY);
    free(g), free(in), free(m), free(x);
}

/* The order in which leaves' hooks ran. */
typedef struct hook_log {
    int *index;
    int n, cap;
} hook_log;

typedef struct leaf_tag {
    hook_log *log;
    int index;
} leaf_tag;

static int log_leaf(tg_tensor **grad, void *user)
{
    (void)grad;
    leaf_tag *t = user;
    if (t->log->n < t->log->cap) t->log->index[t->log->n] = t->index;
    t->log->n++;
    return TG_OK;
}

/* Every leaf's .grad is its total, and its hooks run once, on leaves in the
 * order the backward first reached them: the last term's leaf first. */
Test(autograd, backward_over_many_leaves)
{
    tg_tensor **x = calloc(MANY, sizeof *x), **m = calloc(MANY, sizeof *m);
    tg_tensor **g = calloc(MANY, sizeof *g);
    leaf_tag *tags = calloc(MANY, sizeof *tags);
    hook_log log = {.index = calloc(MANY, sizeof(int)), .cap = MANY};
    cr_assert(x && m && g && tags && log.index);
    tg_tensor *y = many_terms(MANY, x, m);
    for (int i = 0; i < MANY; i++) {
        tags[i] = (leaf_tag){.log = &log, .index = i};
        OK(tg_tensor_register_hook(x[i], log_leaf, &tags[i]));
    }
    OK(tg_backward(y, NULL, NULL));
    for (int i = 0; i < MANY; i++) g[i] = tg_tensor_grad(x[i]);
    int k = first_wrong(g, MANY, 1, d_dx);
    cr_assert(eq(int, k, -1), "x[%d].grad = %g, want %g", k, k < 0 || !g[k] ? 0 : th_at(g[k], 0),
              k < 0 ? 0 : d_dx(k));
    cr_assert(eq(int, log.n, MANY), "%d hook calls for %d leaves", log.n, MANY);
    k = -1;
    for (int i = 0; i < MANY && k < 0; i++)
        if (log.index[i] != MANY - 1 - i) k = i;
    cr_assert(eq(int, k, -1), "hook call %d was x[%d]'s", k, k < 0 ? 0 : log.index[k]);
    tg_tensor_release(y);
    release_all(m, MANY);
    release_all(x, MANY);
    free(log.index), free(tags), free(g), free(m), free(x);
}

/* ---- out of memory inside uthash (src/hash.h) ------------------------------------ */

/* The engine's indexes (tg_grad's inputs by tensor and by grad_fn, the leaves
 * a gradient reached) allocate through uthash.  Each test fails those
 * allocations one at a time (tg__hash_fail_after(k): the (k+1)-th fails) for
 * k = 0, 1, ... until the call makes fewer than k + 1.  The graph is kept
 * (retain_graph), so every attempt runs over the same graph. */

enum { OOM_TERMS = 3000 };

/* True when the failure set by tg__hash_fail_after happened (and clears it). */
static bool hash_failed(void) { return tg__hash_fail_after(-1) < 0; }

/* A failed tg_grad leaves every slot NULL and no leaf's .grad set. */
Test(autograd, tg_grad_out_of_memory_is_enomem)
{
    const int n = OOM_TERMS;
    tg_tensor **x = calloc(n, sizeof *x), **m = calloc(n, sizeof *m);
    tg_tensor **in = calloc(2 * n, sizeof *in), **g = calloc(2 * n, sizeof *g);
    cr_assert(x && m && in && g);
    tg_tensor *y = many_terms(n, x, m);
    for (int i = 0; i < n; i++) in[2 * i] = m[i], in[2 * i + 1] = x[i];
    tg_backward_opts o = TG_BACKWARD_OPTS_INIT;
    o.retain_graph = true;
    int k = 0;
    for (;; k++) {
        tg__hash_fail_after(k);
        int rc = tg_grad(g, 1, &y, NULL, 2 * n, in, &o);
        if (!hash_failed()) {
            OK(rc);
            break;
        }
        cr_assert(eq(int, rc, TG_ENOMEM), "k=%d: rc=%d (%s)", k, rc, tg_error_message());
        th_expect_in(tg_error_message(), "out of memory indexing the");
        int j = 0;
        while (j < 2 * n && !g[j]) j++;
        cr_assert(eq(int, j, 2 * n), "k=%d: slot %d was filled", k, j);
        for (int i = 0; i < n; i++) cr_assert(tg_tensor_grad(x[i]) == NULL, "x[%d].grad set", i);
    }
    /* three indexes: each a table, its buckets and at least three doublings */
    cr_assert(k >= 3 * (2 + 3), "%d uthash allocations", k);
    int bad = first_wrong(g, n, 2, d_dm);
    cr_assert(eq(int, bad, -1), "dy/dm[%d] wrong", bad);
    bad = first_wrong(g + 1, n, 2, d_dx);
    cr_assert(eq(int, bad, -1), "dy/dx[%d] wrong", bad);
    release_all(g, 2 * n);
    tg_tensor_release(y);
    release_all(m, n);
    release_all(x, n);
    free(g), free(in), free(m), free(x);
}

static int count_call(tg_tensor **grad, void *user)
{
    (void)grad;
    ++*(int *)user;
    return TG_OK;
}

/* A failed tg_backward leaves every leaf's .grad as it was (NULL) and runs no
 * leaf hook: both wait for the end of the backward. */
Test(autograd, backward_out_of_memory_is_enomem)
{
    const int n = OOM_TERMS;
    tg_tensor **x = calloc(n, sizeof *x), **m = calloc(n, sizeof *m);
    tg_tensor **g = calloc(n, sizeof *g);
    cr_assert(x && m && g);
    tg_tensor *y = many_terms(n, x, m);
    int calls = 0;
    for (int i = 0; i < n; i++) OK(tg_tensor_register_hook(x[i], count_call, &calls));
    tg_backward_opts o = TG_BACKWARD_OPTS_INIT;
    o.retain_graph = true;
    int k = 0;
    for (;; k++) {
        tg__hash_fail_after(k);
        int rc = tg_backward(y, NULL, &o);
        if (!hash_failed()) {
            OK(rc);
            break;
        }
        cr_assert(eq(int, rc, TG_ENOMEM), "k=%d: rc=%d (%s)", k, rc, tg_error_message());
        th_expect_in(tg_error_message(), "backward: out of memory indexing the leaves");
        for (int i = 0; i < n; i++) cr_assert(tg_tensor_grad(x[i]) == NULL, "x[%d].grad set", i);
        cr_assert(eq(int, calls, 0), "k=%d: hooks ran", k);
    }
    cr_assert(k >= 2 + 3, "%d uthash allocations: the table, then three doublings", k);
    cr_assert(eq(int, calls, n));
    for (int i = 0; i < n; i++) g[i] = tg_tensor_grad(x[i]);
    int bad = first_wrong(g, n, 1, d_dx);
    cr_assert(eq(int, bad, -1), "x[%d].grad wrong", bad);
    tg_tensor_release(y);
    release_all(m, n);
    release_all(x, n);
    free(g), free(m), free(x);
}

/* The registry is built by its first use.  When that build runs out of memory
 * inside uthash (the table, its first buckets), the call that needed it is
 * TG_ENOMEM and the registry stays empty; the next call builds it again, in
 * full.  Criterion runs each test in a process of its own, where nothing has
 * built the registry yet. */
Test(autograd, registry_build_out_of_memory_is_enomem_then_retried)
{
    tg_op_info info, prev;
    int k = 0, n = 0;
    for (;; k++) {
        tg__hash_fail_after(k);
        n = tg_op_count();
        if (!hash_failed()) break;
        cr_assert(eq(int, n, TG_ENOMEM), "k=%d: %d (%s)", k, n, tg_error_message());
        th_expect_in(tg_error_message(), "op registry: out of memory registering op '");
        /* each entry point that needs the registry meets the same failure */
        tg__hash_fail_after(k);
        cr_assert(eq(int, tg_op_info_find("mul", &info), TG_ENOMEM));
        cr_assert(hash_failed());
        tg__hash_fail_after(k);
        cr_assert(eq(int, tg_op_info_at(0, &info), TG_ENOMEM));
        cr_assert(hash_failed());
        tg__hash_fail_after(k);
        cr_assert(tg__op_find("mul") == NULL);
        cr_assert(hash_failed());
    }
    cr_assert(k >= 2, "%d uthash allocations", k);
    cr_assert(n >= 20, "only %d ops", n);
    for (int i = 0; i < n; i++) {   /* every op, found by name too */
        OK(tg_op_info_at(i, &info));
        cr_assert(i == 0 || strcmp(prev.name, info.name) < 0, "%s before %s", prev.name,
                  info.name);
        cr_assert(tg__op_find(info.name) != NULL, "%s", info.name);
        prev = info;
    }
    OK(tg_op_info_find("mul", &info));
    cr_assert(eq(int, info.arity, 2));
}
