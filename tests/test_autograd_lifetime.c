/* Tests of the memory of the autograd engine's graphs and of graphs used
 * by two threads: the live nodes stay flat over training steps, a long
 * chain is freed without recursion, a graph recorded on two threads
 * backpropagates in order, and tensors shared by two threads keep their
 * refcounts and gradients. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <pthread.h>

#include "helpers.h"
#include "autograd_fixtures.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "autograd/tape.h"
#include "tapegrad/ops.h"

Test(autograd_lifetime, memory_stays_flat_over_training_steps)
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

Test(autograd_lifetime, long_chain_is_freed_without_recursion)
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

Test(autograd_lifetime, graph_recorded_on_two_threads)
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
Test(autograd_lifetime, tensors_shared_by_two_threads_keep_refcounts_and_gradients)
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
