/* Tests of the autograd engine: gradients by hand, accumulation, graph
 * lifetime, higher derivatives, grad modes, hooks, in-place detection,
 * memory, and graphs recorded or shared by two threads (the tape's views and
 * the dispatcher: test_tape.c; tg_grad and running out of memory: test_grad.c). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <pthread.h>
#include <string.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "autograd/tape.h"
#include "tapegrad/ops.h"

/* Criterion's new cr_assert cannot start with "!". */
static bool falsy(bool b) { return !b; }

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

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
    tg_tensor *x = th_vec(TG_F64, 3, X, "x", true), *w = th_vec(TG_F64, 3, W, "w", true);
    int calls = 0;
    OK(tg_tensor_register_hook(x, double_hook, &calls));
    OK(tg_tensor_register_hook(x, double_hook, &calls));   /* runs after the first */
    tg_tensor *y = expr1(x, w);
    OK(tg_backward(y, NULL, NULL));
    cr_assert(eq(int, calls, 2));
    /* x receives two contributions (x*w and x); each goes through both hooks. */
    for (int i = 0; i < 3; i++) {
        cr_assert(epsilon_eq(dbl, th_at(tg_tensor_grad(x), i), 4 * (W[i] + 1), 1e-12));
        cr_assert(epsilon_eq(dbl, th_at(tg_tensor_grad(w), i), X[i], 1e-12));
    }
    tg_tensor *c = th_vec(TG_F64, 3, X, "c", false);
    cr_assert(eq(int, tg_tensor_register_hook(c, double_hook, &calls), TG_EGRAD));
    cr_assert(eq(int, tg_tensor_register_hook(x, NULL, NULL), TG_EINVAL));
    tg_tensor_release(c);
    tg_tensor_release(y);
    tg_tensor_release(x);
    tg_tensor_release(w);
}

Test(autograd, hook_on_non_leaf)
{
    tg_tensor *x = th_vec(TG_F64, 3, X, "x", true), *w = th_vec(TG_F64, 3, W, "w", true);
    tg_tensor *h = NULL, *y = NULL;
    int calls = 0;
    OK(tg_mul(&h, x, w));
    OK(tg_tensor_register_hook(h, double_hook, &calls));
    OK(tg_sum(&y, h));
    OK(tg_backward(y, NULL, NULL));
    cr_assert(eq(int, calls, 1));
    for (int i = 0; i < 3; i++) {
        cr_assert(epsilon_eq(dbl, th_at(tg_tensor_grad(x), i), 2 * W[i], 1e-12));
        cr_assert(epsilon_eq(dbl, th_at(tg_tensor_grad(w), i), 2 * X[i], 1e-12));
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

Test(autograd, memory_stays_flat_over_training_steps)
{
    tg_tensor *x = th_vec(TG_F64, 3, X, "x", false), *w = th_vec(TG_F64, 3, W, "w", true);
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
    tg_tensor *x = th_vec(TG_F64, 3, X, "x", true), *cur = tg_tensor_retain(x);
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
    for (int i = 0; i < 3; i++) cr_assert(epsilon_eq(dbl, th_at(tg_tensor_grad(x), i), 1.0, 1e-12));
    tg_tensor_release(y);
    tg_tensor_release(cur);
    cr_assert(eq(long, tg__node_live_count(), base));
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
    tg_tensor *c = th_vec(TG_F64, 4, ones, "c", false), *p = th_vec(TG_F64, 4, ones, "p", true);
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

/* ---- post-accumulate hooks ---- */

typedef struct post_log {
    int calls;
    tg_tensor *other;       /* a leaf whose .grad must still be NULL at the call */
    bool other_was_null;
    double grad0;           /* the leaf's .grad[0] the hook saw */
} post_log;

static int post_hook(tg_tensor *leaf, void *user)
{
    post_log *log = user;
    log->calls++;
    log->other_was_null = tg_tensor_grad(log->other) == NULL;
    log->grad0 = th_at(tg_tensor_grad(leaf), 0);
    return TG_OK;
}

/* loss = sum(a * x * b * a): b is last fed by the second mul, a by the first
 * (and again by the third).  Nodes run from the sum down, so b's gradient
 * a^2 x is final (and delivered) before a's first mul has run. */
Test(autograd, post_accumulate_hook_runs_once_the_leaf_gradient_is_final)
{
    tg_tensor *x = th_vec(TG_F64, 3, X, "x", false), *a = th_vec(TG_F64, 3, W, "a", true);
    tg_tensor *b = th_vec(TG_F64, 3, X, "b", true), *c = NULL, *d = NULL, *e = NULL, *y = NULL;
    post_log lb = {.other = a}, la = {.other = b};
    OK(tg_tensor_register_post_accumulate_hook(b, post_hook, &lb));
    OK(tg_tensor_register_post_accumulate_hook(a, post_hook, &la));
    int doubled = 0;
    OK(tg_tensor_register_hook(b, double_hook, &doubled));   /* seen by the post hook */
    OK(tg_mul(&c, a, x));
    OK(tg_mul(&d, c, b));
    OK(tg_mul(&e, d, a));
    OK(tg_sum(&y, e));
    const tg_backward_opts keep = {.retain_graph = true};
    OK(tg_backward(y, NULL, &keep));
    cr_assert(eq(int, lb.calls, 1));
    cr_assert(eq(int, la.calls, 1));
    cr_assert(lb.other_was_null, "b's post hook ran after a's gradient was delivered");
    cr_assert(la.other_was_null == false);
    cr_assert(epsilon_eq(dbl, lb.grad0, 2 * W[0] * W[0] * X[0], 1e-12));
    cr_assert(epsilon_eq(dbl, la.grad0, 2 * W[0] * X[0] * X[0], 1e-12));
    /* A second backward adds: the hook sees the accumulated .grad. */
    tg_tensor_release(y);
    OK(tg_sum(&y, d));
    OK(tg_backward(y, NULL, &keep));
    cr_assert(eq(int, lb.calls, 2));
    cr_assert(epsilon_eq(dbl, lb.grad0, 2 * W[0] * W[0] * X[0] + W[0] * X[0] * 2, 1e-12));
    /* Removed hooks run no more; a non-leaf takes none. */
    OK(tg_tensor_remove_post_accumulate_hook(b, post_hook, &lb));
    cr_assert(eq(int, tg_tensor_remove_post_accumulate_hook(b, post_hook, &lb), TG_ENOTFOUND));
    cr_assert(eq(int, tg_tensor_register_post_accumulate_hook(d, post_hook, &lb), TG_EINVAL));
    cr_assert(eq(int, tg_tensor_register_post_accumulate_hook(x, post_hook, &lb), TG_EGRAD));
    cr_assert(eq(int, tg_tensor_register_post_accumulate_hook(a, NULL, &lb), TG_EINVAL));
    tg_tensor_release(y);
    OK(tg_sum(&y, d));
    OK(tg_backward(y, NULL, NULL));
    cr_assert(eq(int, lb.calls, 2));
    th_release_all(7, (tg_tensor *[]){x, a, b, c, d, e, y});
}

/* Hooks that remove hooks as they run: a one-shot one removes itself,
 * another removes the hook after it, which then does not run. */
typedef struct oneshot_log {
    int once, remover, last;
    int rc_self, rc_other, rc_again;
} oneshot_log;

static int last_hook(tg_tensor *leaf, void *user)
{
    (void)leaf;
    ((oneshot_log *)user)->last++;
    return 0;
}

static int once_hook(tg_tensor *leaf, void *user)
{
    oneshot_log *l = user;
    l->once++;
    l->rc_self = tg_tensor_remove_post_accumulate_hook(leaf, once_hook, user);
    l->rc_again = tg_tensor_remove_post_accumulate_hook(leaf, once_hook, user);
    return 0;
}

static int remover_hook(tg_tensor *leaf, void *user)
{
    oneshot_log *l = user;
    if (l->remover++ == 0) l->rc_other = tg_tensor_remove_post_accumulate_hook(leaf, last_hook, user);
    return 0;
}

Test(autograd, post_accumulate_hooks_may_remove_themselves_and_others)
{
    tg_tensor *w = th_vec(TG_F64, 3, W, "w", true), *y = NULL;
    oneshot_log l = {0};
    OK(tg_tensor_register_post_accumulate_hook(w, once_hook, &l));
    OK(tg_tensor_register_post_accumulate_hook(w, remover_hook, &l));
    OK(tg_tensor_register_post_accumulate_hook(w, last_hook, &l));
    for (int round = 0; round < 2; round++) {
        OK(tg_sum(&y, w));
        OK(tg_backward(y, NULL, NULL));
        tg_tensor_release(y);
    }
    cr_assert(eq(int, l.once, 1));
    cr_assert(eq(int, l.remover, 2));
    cr_assert(eq(int, l.last, 0), "a hook removed by an earlier one ran");
    cr_assert(eq(int, l.rc_self, TG_OK));
    cr_assert(eq(int, l.rc_again, TG_ENOTFOUND));
    cr_assert(eq(int, l.rc_other, TG_OK));
    /* only remover_hook is left */
    OK(tg_tensor_remove_post_accumulate_hook(w, remover_hook, &l));
    cr_assert(eq(int, tg_tensor_remove_post_accumulate_hook(w, last_hook, &l), TG_ENOTFOUND));
    tg_tensor_release(w);
}

/* The same for gradient hooks, on a leaf and on a non-leaf (whose hooks
 * live on its node). */
typedef struct ghook_log {
    tg_tensor *t;
    int once, remover, last;
    int rc_self, rc_other;
} ghook_log;

static int g_last(tg_tensor **grad, void *user)
{
    (void)grad;
    ((ghook_log *)user)->last++;
    return 0;
}

static int g_once(tg_tensor **grad, void *user)
{
    (void)grad;
    ghook_log *l = user;
    l->once++;
    l->rc_self = tg_tensor_remove_hook(l->t, g_once, user);
    return 0;
}

static int g_remover(tg_tensor **grad, void *user)
{
    (void)grad;
    ghook_log *l = user;
    if (l->remover++ == 0) l->rc_other = tg_tensor_remove_hook(l->t, g_last, user);
    return 0;
}

Test(autograd, gradient_hooks_may_remove_themselves_and_others)
{
    tg_tensor *w = th_vec(TG_F64, 3, W, "w", true), *h = NULL, *y = NULL;
    OK(tg_mul_scalar(&h, w, 2.0));
    ghook_log lw = {.t = w}, lh = {.t = h};
    for (int k = 0; k < 2; k++) {
        ghook_log *l = k ? &lh : &lw;
        OK(tg_tensor_register_hook(l->t, g_once, l));
        OK(tg_tensor_register_hook(l->t, g_remover, l));
        OK(tg_tensor_register_hook(l->t, g_last, l));
    }
    const tg_backward_opts keep = {.retain_graph = true};
    for (int round = 0; round < 2; round++) {
        OK(tg_sum(&y, h));
        OK(tg_backward(y, NULL, &keep));
        tg_tensor_release(y);
    }
    for (int k = 0; k < 2; k++) {
        const ghook_log *l = k ? &lh : &lw;
        cr_assert(eq(int, l->once, 1), "%s", k ? "non-leaf" : "leaf");
        cr_assert(eq(int, l->remover, 2));
        cr_assert(eq(int, l->last, 0), "a hook removed by an earlier one ran");
        cr_assert(eq(int, l->rc_self, TG_OK));
        cr_assert(eq(int, l->rc_other, TG_OK));
        cr_assert(eq(int, tg_tensor_remove_hook(l->t, g_once, (void *)l), TG_ENOTFOUND));
        OK(tg_tensor_remove_hook(l->t, g_remover, (void *)l));
    }
    double g0 = 0;   /* two backwards of sum(2 w): 2 + 2 */
    OK(tg_tensor_get_flat(tg_tensor_grad(w), 0, &g0));
    cr_assert(eq(dbl, g0, 4.0));
    cr_assert(eq(int, tg_tensor_remove_hook(NULL, g_last, NULL), TG_EINVAL));
    th_release_all(2, (tg_tensor *[]){w, h});
}

static int failing_post_hook(tg_tensor *leaf, void *user)
{
    (void)leaf;
    (void)user;
    return tg_error_set(TG_EINVAL, "post hook refuses");
}

Test(autograd, failing_post_accumulate_hook_aborts_the_backward)
{
    tg_tensor *x = th_vec(TG_F64, 3, X, "x", true), *w = th_vec(TG_F64, 3, W, "w", true);
    tg_tensor *h = NULL, *y = NULL;
    OK(tg_tensor_register_post_accumulate_hook(w, failing_post_hook, NULL));
    OK(tg_mul(&h, x, w));
    OK(tg_sum(&y, h));
    cr_assert(eq(int, tg_backward(y, NULL, NULL), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "refuses") != NULL, "%s", tg_error_message());
    th_release_all(4, (tg_tensor *[]){x, w, h, y});
}
