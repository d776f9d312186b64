/* Tests of the autograd engine: gradients by hand, accumulation into a
 * leaf's own grad in place (as a post-accumulate hook sees it), retained
 * and freed graphs, higher derivatives, grad modes and detach, in-place
 * detection and backward's argument errors (the other hooks:
 * test_autograd_hooks.c; the memory of graphs and graphs shared by
 * threads: test_autograd_lifetime.c; the tape's views and the dispatcher:
 * test_tape.c; tg_grad and running out of memory: test_grad.c). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "autograd_fixtures.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "autograd/tape.h"
#include "tapegrad/ops.h"

/* Criterion's new cr_assert cannot start with "!". */
static bool falsy(bool b) { return !b; }

Test(autograd, gradient_by_hand)
{
    tg_tensor *x = th_vec(TG_F64, 3, X, "x", true), *w = th_vec(TG_F64, 3, W, "w", true);
    tg_tensor *y = expr1(x, w);
    cr_assert(tg_tensor_requires_grad(y));
    cr_assert(falsy(tg_tensor_is_leaf(y)));
    OK(tg_backward(y, NULL, NULL));
    /* dy/dx = w + 1, dy/dw = x */
    for (int i = 0; i < 3; i++) {
        cr_assert(epsilon_eq(dbl, th_at(tg_tensor_grad(x), i), W[i] + 1.0, 1e-12));
        cr_assert(epsilon_eq(dbl, th_at(tg_tensor_grad(w), i), X[i], 1e-12));
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
    tg_tensor *x = th_vec(TG_F64, 3, X, "x", true), *w = th_vec(TG_F64, 3, W, "w", true);
    for (int rep = 0; rep < 2; rep++) {
        tg_tensor *y = expr1(x, w);
        OK(tg_backward(y, NULL, NULL));
        tg_tensor_release(y);
    }
    for (int i = 0; i < 3; i++) cr_assert(epsilon_eq(dbl, th_at(tg_tensor_grad(x), i), 2 * (W[i] + 1), 1e-12));
    tg_tensor_zero_grad(x);
    cr_assert(tg_tensor_grad(x) == NULL);
    tg_tensor_release(x);
    tg_tensor_release(w);
}

/* sum(w * w) and its backward, with opts (NULL for the defaults). */
static void backward_of_square(tg_tensor *w, const tg_backward_opts *opts)
{
    tg_tensor *y = NULL, *l = NULL;
    OK(tg_mul(&y, w, w));
    OK(tg_sum(&l, y));
    OK(tg_backward(l, NULL, opts));
    tg_tensor_release(y);
    tg_tensor_release(l);
}

/* A borrowed .grad held across micro-batches stays the leaf's .grad: the
 * second backward adds into it in place (PyTorch's AccumulateGrad does
 * `grad += new` without create_graph) and bumps its version. */
Test(autograd, backward_adds_into_the_leafs_own_grad_in_place)
{
    tg_tensor *w = th_vec(TG_F32, 3, X, "w", true);
    backward_of_square(w, NULL);
    tg_tensor *g = tg_tensor_grad(w);   /* borrowed */
    const uint64_t v0 = tg_tensor_version(g);
    backward_of_square(w, NULL);
    cr_assert(tg_tensor_grad(w) == g, "the second backward replaced the .grad tensor");
    for (int i = 0; i < 3; i++) cr_assert(eq(dbl, th_at(g, i), 4 * X[i]), "grad[%d]", i);
    cr_assert(tg_tensor_version(g) > v0, "an in-place addition must bump the version");
    cr_assert(falsy(tg_tensor_requires_grad(g)));
    tg_tensor_release(w);
}

typedef struct grad_seen {
    const tg_tensor *grad;
    double grad0;
} grad_seen;

static int note_grad(tg_tensor *leaf, void *user)
{
    grad_seen *s = user;
    s->grad = tg_tensor_grad(leaf);
    s->grad0 = th_at(s->grad, 0);
    return 0;
}

/* A leaf with a post-accumulate hook is delivered while the backward runs
 * (the engine still holds the incoming sum then): the hook sees the sum in
 * the same .grad tensor on every backward. */
Test(autograd, post_accumulate_hook_sees_the_grad_added_in_place)
{
    tg_tensor *w = th_vec(TG_F32, 3, X, "w", true);
    grad_seen seen = {0};
    OK(tg_tensor_register_post_accumulate_hook(w, note_grad, &seen));
    backward_of_square(w, NULL);
    const tg_tensor *first = seen.grad;
    cr_assert(first == tg_tensor_grad(w));
    backward_of_square(w, NULL);
    cr_assert(seen.grad == first && tg_tensor_grad(w) == first);
    cr_assert(eq(dbl, seen.grad0, 4 * X[0]));
    tg_tensor_release(w);
}

/* A .grad that someone else holds a reference to (the caller's
 * tg_tensor_retain) is shared: a backward stores the sum in a new tensor and
 * leaves the held one as it was.  So does a .grad with a view on it. */
Test(autograd, backward_does_not_write_into_a_shared_grad)
{
    tg_tensor *w = th_vec(TG_F32, 3, X, "w", true), *view = NULL;
    backward_of_square(w, NULL);
    tg_tensor *kept = tg_tensor_retain(tg_tensor_grad(w));
    const uint64_t v0 = tg_tensor_version(kept);
    backward_of_square(w, NULL);
    cr_assert(tg_tensor_grad(w) != kept);
    cr_assert(eq(u64, tg_tensor_version(kept), v0));
    for (int i = 0; i < 3; i++) {
        cr_assert(eq(dbl, th_at(kept, i), 2 * X[i]), "kept[%d]", i);
        cr_assert(eq(dbl, th_at(tg_tensor_grad(w), i), 4 * X[i]), "grad[%d]", i);
    }
    tg_tensor_release(kept);
    /* The new .grad is the leaf's own; a view of it shares its storage. */
    OK(tg_tensor_detach(&view, tg_tensor_grad(w)));
    backward_of_square(w, NULL);
    cr_assert(tg_tensor_grad(w) != view);
    for (int i = 0; i < 3; i++) {
        cr_assert(eq(dbl, th_at(view, i), 4 * X[i]), "view[%d]", i);
        cr_assert(eq(dbl, th_at(tg_tensor_grad(w), i), 6 * X[i]), "grad[%d]", i);
    }
    th_release_all(2, (tg_tensor *[]){view, w});
}

/* The caller's grad argument is never stored or written as .grad: with the
 * leaf's own .grad passed as the seed of a backward from the leaf itself,
 * the sum goes to a new tensor and the argument keeps its values. */
Test(autograd, backward_seeded_with_the_leafs_grad_leaves_the_argument_alone)
{
    tg_tensor *w = th_vec(TG_F64, 3, X, "w", true);
    backward_of_square(w, NULL);
    tg_tensor *seed = tg_tensor_retain(tg_tensor_grad(w));
    OK(tg_backward(w, seed, NULL));
    cr_assert(tg_tensor_grad(w) != seed);
    for (int i = 0; i < 3; i++) {
        cr_assert(eq(dbl, th_at(seed, i), 2 * X[i]), "seed[%d]", i);
        cr_assert(eq(dbl, th_at(tg_tensor_grad(w), i), 4 * X[i]), "grad[%d]", i);
    }
    tg_tensor_release(seed);
    tg_tensor_release(w);
}

/* With create_graph the sum is a recorded op: each backward makes a new
 * .grad on a tape, and the one before is not touched (it may be on that
 * tape). */
Test(autograd, backward_with_create_graph_makes_a_new_grad)
{
    tg_tensor *w = th_vec(TG_F64, 3, X, "w", true);
    const tg_backward_opts cg = {.create_graph = true};
    backward_of_square(w, &cg);
    tg_tensor *first = tg_tensor_retain(tg_tensor_grad(w));
    const uint64_t v0 = tg_tensor_version(first);
    backward_of_square(w, &cg);
    tg_tensor *g = tg_tensor_grad(w);
    cr_assert(g != first);
    cr_assert(tg_tensor_requires_grad(g) && falsy(tg_tensor_is_leaf(g)));
    cr_assert(eq(u64, tg_tensor_version(first), v0));
    for (int i = 0; i < 3; i++) {
        cr_assert(eq(dbl, th_at(first, i), 2 * X[i]), "first[%d]", i);
        cr_assert(eq(dbl, th_at(g, i), 4 * X[i]), "grad[%d]", i);
    }
    /* A backward without create_graph then stores a plain tensor. */
    tg_tensor_release(first);
    backward_of_square(w, NULL);
    cr_assert(falsy(tg_tensor_requires_grad(tg_tensor_grad(w))));
    for (int i = 0; i < 3; i++) cr_assert(eq(dbl, th_at(tg_tensor_grad(w), i), 6 * X[i]));
    tg_tensor_zero_grad(w);   /* the create_graph .grad referred back to w */
    tg_tensor_release(w);
}

Test(autograd, retain_graph)
{
    tg_tensor *x = th_vec(TG_F64, 3, X, "x", true), *w = th_vec(TG_F64, 3, W, "w", true);
    tg_tensor *y = expr1(x, w);
    OK(tg_backward(y, NULL, NULL));
    int rc = tg_backward(y, NULL, NULL);
    cr_assert(eq(int, rc, TG_EGRAD));
    cr_assert(strstr(tg_error_message(), "retain_graph") != NULL, "%s", tg_error_message());
    /* The failed call changed nothing. */
    for (int i = 0; i < 3; i++) cr_assert(epsilon_eq(dbl, th_at(tg_tensor_grad(x), i), W[i] + 1, 1e-12));
    tg_tensor_release(y);

    tg_backward_opts keep = {.retain_graph = true};
    y = expr1(x, w);
    tg_tensor_zero_grad(x);
    OK(tg_backward(y, NULL, &keep));
    OK(tg_backward(y, NULL, NULL));
    for (int i = 0; i < 3; i++) cr_assert(epsilon_eq(dbl, th_at(tg_tensor_grad(x), i), 2 * (W[i] + 1), 1e-12));
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
    tg_tensor *x = th_vec(TG_F64, 3, X, "x", true);
    tg_tensor *y = sum_cube(x), *g = NULL, *sg = NULL, *h = NULL;
    tg_backward_opts cg = {.create_graph = true};
    OK(tg_grad(&g, 1, &y, NULL, 1, &x, &cg));
    cr_assert(tg_tensor_requires_grad(g));   /* recorded: differentiable again */
    OK(tg_sum(&sg, g));
    OK(tg_grad(&h, 1, &sg, NULL, 1, &x, NULL));
    for (int i = 0; i < 3; i++) {
        cr_assert(epsilon_eq(dbl, th_at(g, i), 3 * X[i] * X[i], 1e-12));   /* d/dx x^3 */
        cr_assert(epsilon_eq(dbl, th_at(h, i), 6 * X[i], 1e-12));          /* d2/dx2 x^3 */
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
    tg_tensor *x = th_vec(TG_F64, 3, X, "x", true), *yv = th_vec(TG_F64, 3, Y, "y", true);
    tg_tensor *vx = th_vec(TG_F64, 3, VX, "vx", false), *vy = th_vec(TG_F64, 3, VY, "vy", false);
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
        cr_assert(epsilon_eq(dbl, th_at(hv[0], i), 2 * Y[i] * VX[i] + 2 * X[i] * VY[i], 1e-12));
        cr_assert(epsilon_eq(dbl, th_at(hv[1], i), 2 * X[i] * VX[i], 1e-12));
    }
    tg_tensor *all[] = {x, yv, vx, vy, xx, xxy, f, g[0], g[1], p0, p1, s, s0, s1, hv[0], hv[1]};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
}

Test(autograd, no_grad_scope_records_nothing)
{
    tg_tensor *x = th_vec(TG_F64, 3, X, "x", true), *w = th_vec(TG_F64, 3, W, "w", true), *y = NULL;
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
    cr_assert(epsilon_eq(dbl, th_at(y, 1), X[1] * W[1], 1e-12));
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
    tg_tensor *x = th_vec(TG_F64, 3, X, "x", true), *w = th_vec(TG_F64, 3, W, "w", true);
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
    for (int i = 0; i < 3; i++) cr_assert(epsilon_eq(dbl, th_at(tg_tensor_grad(w), i), X[i] * W[i], 1e-12));
    tg_tensor *all[] = {x, w, xw, d, z, y};
    for (size_t i = 0; i < 6; i++) tg_tensor_release(all[i]);
}

/* As in PyTorch, an operand is needed for backward only by the gradient of
 * its partner: writing into w of c * w with only w requiring grad, or into
 * W of X @ W and linear(X, W) with X constant, is no error (the gradients
 * use the constant, unchanged); writing into the operand a gradient does
 * read still is. */
Test(autograd, inplace_change_of_an_operand_no_gradient_reads_is_allowed)
{
    tg_tensor *c = th_vec(TG_F64, 3, X, "c", false), *w = th_vec(TG_F64, 3, W, "w", true);
    tg_tensor *h = NULL, *y = NULL;
    OK(tg_mul(&h, c, w));
    OK(tg_sum(&y, h));
    OK(tg_tensor_fill(w, 7.0));
    OK(tg_backward(y, NULL, NULL));
    for (int i = 0; i < 3; i++) cr_assert(eq(dbl, th_at(tg_tensor_grad(w), i), X[i]));
    th_release_all(2, (tg_tensor *[]){h, y});
    /* X (2, 3) constant, W (3, 2) and Wl (2, 3) require grad */
    static const double xv[6] = {1, 2, 3, 4, 5, 6}, wv[6] = {0.5, -1, 2, 0.25, -3, 1};
    tg_tensor *xs = th_vec(TG_F64, 6, xv, "X", false), *ws = th_vec(TG_F64, 6, wv, "W", true);
    tg_tensor *X2 = NULL, *W2 = NULL, *Wl = NULL, *m = NULL, *l = NULL, *s1 = NULL, *s2 = NULL;
    OK(tg_reshape(&X2, xs, 2, (int64_t[]){2, 3}));
    OK(tg_tensor_from_data(&W2, TG_F64, 2, (int64_t[]){3, 2}, wv));
    OK(tg_tensor_set_requires_grad(W2, true));
    OK(tg_tensor_from_data(&Wl, TG_F64, 2, (int64_t[]){2, 3}, wv));
    OK(tg_tensor_set_requires_grad(Wl, true));
    OK(tg_matmul(&m, X2, W2));
    OK(tg_linear(&l, X2, Wl, NULL));
    OK(tg_sum(&s1, m));
    OK(tg_sum(&s2, l));
    OK(tg_tensor_fill(W2, 9.0));
    OK(tg_tensor_fill(Wl, 9.0));
    OK(tg_backward(s1, NULL, NULL));
    OK(tg_backward(s2, NULL, NULL));
    /* d sum(X W)/dW[k][j] = sum_i X[i][k]; d sum(X Wl^T)/dWl[j][k] = the same */
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 2; j++) {
            cr_assert(eq(dbl, th_at(tg_tensor_grad(W2), k * 2 + j), xv[k] + xv[3 + k]));
            cr_assert(eq(dbl, th_at(tg_tensor_grad(Wl), j * 3 + k), xv[k] + xv[3 + k]));
        }
    /* the operand a gradient reads: still refused */
    tg_tensor *m2 = NULL, *s3 = NULL;
    OK(tg_matmul(&m2, X2, W2));
    OK(tg_sum(&s3, m2));
    OK(tg_tensor_fill(xs, 0.0));   /* X2 is a view of xs */
    cr_assert(eq(int, tg_backward(s3, NULL, NULL), TG_EINPLACE));
    th_release_all(13, (tg_tensor *[]){c, w, xs, ws, X2, W2, Wl, m, l, s1, s2, m2, s3});
}

/* An operand that only its partner's gradient reads is not kept alive when
 * the partner needs none (PyTorch's saving rule for mul, div and mm): an
 * activation h that requires grad, times a frozen weight, keeps the weight
 * for h's gradient but not h, whose references stay the caller's. */
Test(autograd, operand_no_gradient_reads_is_not_kept)
{
    static const double xv[6] = {1, -2, 3, 4, -5, 6}, wv[6] = {2, 3, 4, 5, 6, 7};
    tg_tensor *x = th_vec(TG_F64, 6, xv, "x", true), *w = th_vec(TG_F64, 6, wv, "w", false);
    tg_tensor *h = NULL, *h2 = NULL, *w2 = NULL, *wl = NULL, *y[4] = {NULL}, *s[4] = {NULL};
    tg_tensor *t = NULL, *u = NULL, *loss = NULL;
    OK(tg_relu(&h, x));
    OK(tg_reshape(&h2, h, 2, (int64_t[]){2, 3}));
    OK(tg_reshape(&w2, w, 2, (int64_t[]){3, 2}));
    OK(tg_reshape(&wl, w, 2, (int64_t[]){2, 3}));
    const int refs_h = tg_tensor_refcount(h), refs_h2 = tg_tensor_refcount(h2);
    const int refs_w = tg_tensor_refcount(w), refs_w2 = tg_tensor_refcount(w2);
    const int refs_wl = tg_tensor_refcount(wl);
    OK(tg_mul(&y[0], h, w));        /* keeps w (for h's gradient), not h */
    OK(tg_div(&y[1], h, w));        /* keeps w; h, a of a/b, only for b's gradient */
    OK(tg_matmul(&y[2], h2, w2));   /* keeps w2, not h2 */
    OK(tg_linear(&y[3], h2, wl, NULL));   /* keeps wl, not h2 */
    cr_assert(eq(int, tg_tensor_refcount(h), refs_h));
    cr_assert(eq(int, tg_tensor_refcount(h2), refs_h2));
    cr_assert(eq(int, tg_tensor_refcount(w), refs_w + 2));
    cr_assert(eq(int, tg_tensor_refcount(w2), refs_w2 + 1));
    cr_assert(eq(int, tg_tensor_refcount(wl), refs_wl + 1));
    for (int i = 0; i < 4; i++) OK(tg_sum(&s[i], y[i]));
    OK(tg_add(&t, s[0], s[1]));
    OK(tg_add(&u, t, s[2]));
    OK(tg_add(&loss, u, s[3]));
    OK(tg_backward(loss, NULL, NULL));
    /* dloss/dh[r][k] = w + 1/w (flat) + sum_j w2[k][j] + sum_j wl[j][k] */
    for (int i = 0; i < 6; i++) {
        const int k = i % 3;
        const double dh = wv[i] + 1.0 / wv[i] + wv[2 * k] + wv[2 * k + 1] + wv[k] + wv[3 + k];
        cr_assert(ieee_ulp_eq(dbl, th_at(tg_tensor_grad(x), i), xv[i] > 0 ? dh : 0.0, 4));
    }
    th_release_all(7, (tg_tensor *[]){x, w, h, h2, w2, wl, t});
    th_release_all(2, (tg_tensor *[]){u, loss});
    th_release_all(4, y);
    th_release_all(4, s);
}

Test(autograd, inplace_change_of_saved_tensor_is_reported)
{
    tg_tensor *x = th_vec(TG_F64, 3, X, "x", true), *w = th_vec(TG_F64, 3, W, "w", true);
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
    tg_tensor *x = th_vec(TG_F64, 3, X, "x", true), *w = th_vec(TG_F64, 3, W, "w", true);
    tg_tensor *h = NULL, *bad = NULL, *c = th_vec(TG_F64, 3, X, "c", false);
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
    tg_tensor *g = th_vec(TG_F64, 3, X, "g", false);
    OK(tg_backward(h, g, NULL));
    for (int i = 0; i < 3; i++) cr_assert(epsilon_eq(dbl, th_at(tg_tensor_grad(x), i), X[i] * W[i], 1e-12));
    tg_tensor *all[] = {x, w, h, bad, c, g};
    for (size_t i = 0; i < 6; i++) tg_tensor_release(all[i]);
}

Test(autograd, grad_of_non_leaf_and_unreachable_inputs)
{
    tg_tensor *x = th_vec(TG_F64, 3, X, "x", true), *w = th_vec(TG_F64, 3, W, "w", true);
    tg_tensor *u = th_vec(TG_F64, 3, X, "u", true), *h = NULL, *t = NULL, *y = NULL;
    OK(tg_mul(&h, x, w));
    OK(tg_tanh(&t, h));
    OK(tg_sum(&y, t));
    tg_tensor *in[3] = {h, u, x}, *g[3] = {NULL, NULL, NULL};
    OK(tg_grad(g, 1, &y, NULL, 3, in, NULL));
    cr_assert(g[1] == NULL);   /* u is not reachable from y */
    for (int i = 0; i < 3; i++) {
        double th = tanh(X[i] * W[i]);
        cr_assert(epsilon_eq(dbl, th_at(g[0], i), 1 - th * th, 1e-12));
        cr_assert(epsilon_eq(dbl, th_at(g[2], i), (1 - th * th) * W[i], 1e-12));
    }
    tg_tensor *all[] = {x, w, u, h, t, y, g[0], g[2]};
    for (size_t i = 0; i < 8; i++) tg_tensor_release(all[i]);
}

/* y = 2x cut into its rows (tg_unbind: one slice each, whose gradient is
 * y's shape), row k weighted by k + 1: the rows' gradients sum into y's
 * pending gradient, in place without create_graph, recorded with it; x's
 * gradient is the same either way, and its second derivative through the
 * recorded sum is there. */
Test(autograd, gradients_of_many_slices_of_one_tensor_sum)
{
    const int64_t shape[2] = {6, 3};
    for (int cg = 0; cg < 2; cg++) {
        tg_tensor *x = th_arange(TG_F64, 2, shape), *y, *rows[6], *l = NULL;
        OK(tg_tensor_set_requires_grad(x, true));
        OK(tg_mul_scalar(&y, x, 2.0));
        int n = 0;
        OK(tg_unbind(rows, 6, &n, y, 0));
        cr_assert(eq(int, n, 6));
        for (int k = 0; k < 6; k++) {
            tg_tensor *sq, *w, *s, *t;
            OK(tg_mul(&sq, rows[k], rows[k]));   /* d/dy (y^2 (k+1)) = 2 (k+1) y */
            OK(tg_mul_scalar(&w, sq, (double)(k + 1)));
            OK(tg_sum(&s, w));
            if (l) {
                OK(tg_add(&t, l, s));
                tg_tensor_release(l);
                tg_tensor_release(s);
                l = t;
            } else {
                l = s;
            }
            tg_tensor_release(sq);
            tg_tensor_release(w);
            tg_tensor_release(rows[k]);
        }
        tg_backward_opts o = TG_BACKWARD_OPTS_INIT;
        o.create_graph = cg;
        OK(tg_backward(l, NULL, &o));
        const tg_tensor *g = tg_tensor_grad(x);
        for (int64_t i = 0; i < 18; i++)   /* dl/dx = 2 * 2 (k+1) * 2x */
            cr_assert(epsilon_eq(dbl, th_at(g, i), 8.0 * (double)(i / 3 + 1) * (double)i, 1e-12),
                      "create_graph=%d, x.grad[%lld] = %g", cg, (long long)i, th_at(g, i));
        cr_assert(eq(int, tg_tensor_requires_grad(g), cg));
        if (cg) {   /* d/dx sum(x.grad) = 8 (k+1) */
            tg_tensor *gs, *gg[1] = {NULL};
            OK(tg_sum(&gs, (tg_tensor *)g));
            OK(tg_grad(gg, 1, &gs, NULL, 1, &x, NULL));
            for (int64_t i = 0; i < 18; i++)
                cr_assert(epsilon_eq(dbl, th_at(gg[0], i), 8.0 * (double)(i / 3 + 1), 1e-12));
            tg_tensor_release(gg[0]);
            tg_tensor_release(gs);
        }
        tg_tensor_release(l);
        tg_tensor_release(y);
        tg_tensor_release(x);
    }
}

/* y + y sends the caller's seed gradient G itself into both of y's slots:
 * the second is summed into a new tensor, never into G, which the caller
 * still holds (an in-place sum is only for a tensor the backward owns). */
Test(autograd, a_seed_gradient_is_never_summed_into_in_place)
{
    const double xv[3] = {1, 2, 3}, gv[3] = {0.5, -1, 4};
    tg_tensor *x = th_vec(TG_F64, 3, xv, "x", true), *g = th_vec(TG_F64, 3, gv, "g", false);
    tg_tensor *y, *z;
    OK(tg_mul_scalar(&y, x, 3.0));
    OK(tg_add(&z, y, y));
    OK(tg_backward(z, g, NULL));
    for (int i = 0; i < 3; i++) {
        cr_assert(eq(dbl, th_at(g, i), gv[i]), "the seed changed: g[%d] = %g", i, th_at(g, i));
        cr_assert(epsilon_eq(dbl, th_at(tg_tensor_grad(x), i), 6.0 * gv[i], 1e-12));
    }
    tg_tensor_release(z);
    tg_tensor_release(y);
    tg_tensor_release(x);
    tg_tensor_release(g);
}

static int count_step(const tg_backward_step *step, void *user)
{
    (void)step;
    ++*(int *)user;
    return TG_OK;
}

/* Slices of one tensor along either dim, with steps, overlapping: a
 * backward adds each slice's gradient into the pending sum in place
 * (slice's backward_into), a watched one (tg_backward_steps) runs slice's
 * backward, which makes the whole zero-padded gradient: the same bits. */
Test(autograd, slices_add_in_place_as_their_backward_would)
{
    const int64_t shape[2] = {4, 6};
    static const int64_t cuts[][4] = {
        {1, 0, 6, 2}, {1, 1, 5, 3}, {0, 1, 3, 1}, {1, 0, 6, 1}, {0, -3, 4, 2}, {1, 2, 2, 1}};
    tg_tensor *grads[2];
    for (int watched = 0; watched < 2; watched++) {
        tg_tensor *x = th_rand_uniform(TG_F64, 2, shape, 7), *y, *l = NULL;
        OK(tg_tensor_set_requires_grad(x, true));
        OK(tg_mul_scalar(&y, x, 1.5));
        for (int k = 0; k < 6; k++) {
            tg_tensor *s, *sq, *w, *t;
            OK(tg_slice(&s, y, (int)cuts[k][0], cuts[k][1], cuts[k][2], cuts[k][3]));
            OK(tg_mul(&sq, s, s));
            OK(tg_mul_scalar(&w, sq, 0.25 + k));
            OK(tg_sum(&t, w));
            if (l) {
                tg_tensor *u;
                OK(tg_add(&u, l, t));
                tg_tensor_release(l);
                tg_tensor_release(t);
                l = u;
            } else {
                l = t;
            }
            tg_tensor_release(s);
            tg_tensor_release(sq);
            tg_tensor_release(w);
        }
        int steps = 0;
        if (watched) OK(tg_backward_steps(l, NULL, NULL, count_step, &steps));
        else OK(tg_backward(l, NULL, NULL));
        cr_assert(watched ? steps > 6 : steps == 0);
        grads[watched] = tg_tensor_retain(tg_tensor_grad(x));
        tg_tensor_release(l);
        tg_tensor_release(y);
        tg_tensor_release(x);
    }
    cr_assert(memcmp(tg_tensor_data(grads[0]), tg_tensor_data(grads[1]), 24 * sizeof(double)) == 0,
              "in-place and watched backwards differ");
    double any = 0;
    for (int64_t i = 0; i < 24; i++) any += fabs(th_at(grads[0], i));
    cr_assert(any > 0);
    tg_tensor_release(grads[0]);
    tg_tensor_release(grads[1]);
}

/* y (x * 1.5, so index_select's input is made by a node) picked along dim
 * by the index values v[0..n) (n = 0: a 0-d index of v[0]), squared, times
 * w, summed: one term of the loss; a slice of y adds another, so the
 * pending sum is not zeros when some picks add into it. */
static tg_tensor *picked_term(tg_tensor *y, int dim, const int64_t *v, int n, double w)
{
    tg_tensor *idx = NULL, *s = NULL, *sq = NULL, *m = NULL, *t = NULL;
    if (n == 0) OK(tg_tensor_scalar(&idx, TG_I64, (double)v[0]));
    else OK(tg_tensor_from_data(&idx, TG_I64, 1, (int64_t[]){n}, v));
    OK(tg_index_select(&s, y, dim, idx));
    OK(tg_mul(&sq, s, s));
    OK(tg_mul_scalar(&m, sq, w));
    OK(tg_sum(&t, m));
    th_release_all(4, (tg_tensor *[]){idx, s, sq, m});
    return t;
}

/* index_select along either dim, with repeated and unordered index values
 * and a 0-d index, in f64, f32 and bf16: a backward adds each pick's
 * gradient into the pending sum in place (index_select's backward_into,
 * acc.index_add_), a watched one runs its backward (index_add into zeros,
 * then the engine's sum): the same bits.  gradcheck (which stages its
 * inputs through a node) checks the values against finite differences. */
Test(autograd, index_selects_add_in_place_as_their_backward_would)
{
    const int64_t shape[2] = {4, 6};
    static const int64_t picks[][5] = {{1, 1, 4, 1, 1}, {0, 3, 0, 3, 2}, {1, 5, 0, 2, 5},
                                       {0, 2, 2, 2, 2}, {1, 3, 3, 3, 3}};
    static const int dims[] = {1, 0, 1, 0, 1}, ns[] = {5, 4, 3, 0, 4};
    const tg_dtype dts[3] = {TG_F64, TG_F32, TG_BF16};
    for (int di = 0; di < 3; di++) {
        tg_tensor *grads[2];
        for (int watched = 0; watched < 2; watched++) {
            tg_tensor *x0 = th_rand_uniform(TG_F64, 2, shape, 11), *x = NULL, *y, *l = NULL;
            OK(tg_tensor_to_dtype(&x, x0, dts[di]));
            OK(tg_tensor_set_requires_grad(x, true));
            OK(tg_mul_scalar(&y, x, 1.5));
            tg_tensor *sl = NULL, *sq = NULL;
            OK(tg_slice(&sl, y, 1, 1, 5, 2));
            OK(tg_mul(&sq, sl, sl));
            OK(tg_sum(&l, sq));
            th_release_all(2, (tg_tensor *[]){sl, sq});
            for (int k = 0; k < 5; k++) {
                tg_tensor *t = picked_term(y, dims[k], picks[k], ns[k], 0.25 + k), *u = NULL;
                OK(tg_add(&u, l, t));
                th_release_all(2, (tg_tensor *[]){l, t});
                l = u;
            }
            int steps = 0;
            if (watched) OK(tg_backward_steps(l, NULL, NULL, count_step, &steps));
            else OK(tg_backward(l, NULL, NULL));
            cr_assert(watched ? steps > 5 : steps == 0);
            grads[watched] = tg_tensor_retain(tg_tensor_grad(x));
            th_release_all(4, (tg_tensor *[]){l, y, x, x0});
        }
        const size_t bytes = 24 * tg_dtype_size(dts[di]);
        cr_assert(memcmp(tg_tensor_data(grads[0]), tg_tensor_data(grads[1]), bytes) == 0,
                  "%s: in-place and watched backwards differ", tg_dtype_name(dts[di]));
        double any = 0;
        for (int64_t i = 0; i < 24; i++) any += fabs(th_at(grads[0], i));
        cr_assert(any > 0);
        th_release_all(2, grads);
    }
}

/* TG_TRACE=1 (read once per process; each Criterion test is a process of
 * its own) names each backward step, "(into)" when backward_into ran:
 * index_select's runs when its input is made by a node (the index beside
 * it never needs a gradient), its backward when the input is a leaf. */
Test(autograd, index_select_backward_into_runs_for_an_input_made_by_a_node)
{
    cr_assert(eq(int, setenv("TG_TRACE", "1", 1), 0));
    char path[] = "/tmp/tg_into_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    cr_assert(dup2(fd, 2) == 2);
    const int64_t shape[2] = {4, 3};
    tg_tensor *x = th_rand_uniform(TG_F64, 2, shape, 3), *y = NULL, *l = NULL, *lx = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_mul_scalar(&y, x, 2.0));
    l = picked_term(y, 0, (const int64_t[]){3, 1, 3}, 3, 1.0);
    OK(tg_backward(l, NULL, NULL));
    fflush(stderr);
    char buf[8192] = {0};
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    cr_assert(n > 0);
    cr_assert(strstr(buf, "index_select (into)") != NULL, "trace: %s", buf);
    /* a leaf input: the backward, which sends the gradient to x's .grad */
    cr_assert(ftruncate(fd, 0) == 0 && lseek(fd, 0, SEEK_SET) == 0);   /* shared with fd 2 */
    lx = picked_term(x, 1, (const int64_t[]){2}, 0, 1.0);
    OK(tg_backward(lx, NULL, NULL));
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    memset(buf, 0, sizeof buf);
    n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    unlink(path);
    cr_assert(n > 0);
    cr_assert(strstr(buf, "backward #") != NULL && strstr(buf, "(into)") == NULL, "trace: %s",
              buf);
    th_release_all(4, (tg_tensor *[]){x, y, l, lx});
}

static int index_select_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const int *dim = user;
    tg_tensor *idx = NULL, *s = NULL, *t = NULL;
    OK(tg_tensor_from_data(&idx, TG_I64, 1, (int64_t[]){5}, (int64_t[]){2, 0, 2, 2, 1}));
    int rc = tg_index_select(&s, in[0], *dim, idx);
    if (rc == TG_OK) rc = tg_mul(&t, s, s);   /* a product, so g is not all ones */
    if (rc == TG_OK) rc = tg_index_select(out, t, *dim, idx);
    th_release_all(3, (tg_tensor *[]){idx, s, t});
    return rc;
}

Test(autograd, index_select_gradcheck_checks_backward_into)
{
    for (int dim = 0; dim < 2; dim++) {
        uint64_t seed = 5;
        tg_tensor *x = th_rand_tensor(&seed, TG_F64, 2, (int64_t[]){3, 3}, -1, 1);
        OK(tg_tensor_set_requires_grad(x, true));
        tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
        OK(tg_gradcheck(index_select_fn, &dim, 1, &x, &o));
        o.fast_mode = true;
        OK(tg_gradcheck(index_select_fn, &dim, 1, &x, &o));
        OK(tg_gradgradcheck(index_select_fn, &dim, 1, &x, &o));
        tg_tensor_release(x);
    }
}
