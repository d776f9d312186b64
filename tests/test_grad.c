/* Tests of tg_grad (torch.autograd.grad): hooks, repeated and many inputs,
 * and backward, tg_grad and the op registry running out of memory. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "ops/dispatch.h"
#include "autograd/tape.h"
#include "tapegrad/ops.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* As PyTorch: tg_grad refuses an input that does not require grad (even one
 * the output does not use), and tg_backward casts a gradient of another float
 * dtype to the output's (an integer gradient is TG_EDTYPE). */
Test(grad, grad_inputs_must_require_grad_and_backward_casts_float_grads)
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
Test(grad, tg_grad_runs_hooks_as_torch_autograd_grad)
{
    const double ones[3] = {1, 1, 1};
    tg_tensor *x = th_vec(TG_F64, 3, ones, "x", true), *m = NULL, *mm = NULL, *s = NULL;
    OK(tg_mul_scalar(&m, x, 3.0));
    OK(tg_tensor_register_hook(m, times_two, NULL));
    OK(tg_tensor_register_hook(x, times_two, NULL));
    OK(tg_mul(&mm, m, m));
    OK(tg_sum(&s, mm));
    tg_tensor *g[2] = {NULL, NULL}, *in[2] = {m, x};
    tg_backward_opts keep = {.retain_graph = true};
    OK(tg_grad(g, 1, &s, NULL, 2, in, &keep));
    for (int i = 0; i < 3; i++) {
        cr_assert(eq(dbl, th_at(g[0], i), 6.0), "ds/dm[%d] = %g", i, th_at(g[0], i));
        cr_assert(eq(dbl, th_at(g[1], i), 36.0), "ds/dx[%d] = %g", i, th_at(g[1], i));
    }
    cr_assert(tg_tensor_grad(x) == NULL, "tg_grad wrote x.grad");
    tg_tensor *s2 = NULL;
    OK(tg_sum(&s2, m));
    OK(tg_backward(s2, NULL, NULL));
    for (int i = 0; i < 3; i++)
        cr_assert(eq(dbl, th_at(tg_tensor_grad(x), i), 12.0), "x.grad[%d]", i);
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
 * on a non-leaf, never a crash. */
Test(grad, hook_leaving_a_null_gradient_is_an_error)
{
    const double ones[3] = {1, 1, 1};
    for (int leaf = 0; leaf < 2; leaf++) {
        tg_tensor *x = th_vec(TG_F64, 3, ones, "x", true), *m = NULL, *s = NULL;
        OK(tg_mul_scalar(&m, x, 3.0));
        OK(tg_tensor_register_hook(leaf ? x : m, null_hook, NULL));
        OK(tg_sum(&s, m));
        cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_EGRAD));
        cr_assert(strstr(tg_error_message(), "hook left the gradient NULL") != NULL, "%s",
                  tg_error_message());
        tg_tensor_release(s), tg_tensor_release(m), tg_tensor_release(x);
    }
}

/* A hook that fails: its own message (tg_error_set) is kept; a failure
 * without one gets a message naming the hook, not an older error's message
 * (found by the tape fuzz target).  The status is the hook's. */
static int failing_hook(tg_tensor **grad, void *user)
{
    (void)grad;
    return user ? tg_error_set(TG_EIO, "the hook's own words") : TG_ENOTFOUND;
}

Test(grad, a_failing_hook_fails_the_backward_with_a_message)
{
    const double ones[3] = {1, 1, 1};
    for (int own = 0; own < 2; own++) {
        tg_tensor *x = th_vec(TG_F64, 3, ones, "x", true), *m = NULL, *s = NULL, *bad = NULL;
        OK(tg_mul_scalar(&m, x, 3.0));
        OK(tg_tensor_register_hook(m, failing_hook, own ? &own : NULL));
        OK(tg_sum(&s, m));
        cr_assert(eq(int, tg_reshape(&bad, x, 1, (int64_t[]){4}), TG_ESHAPE));   /* an old error */
        cr_assert(eq(int, tg_backward(s, NULL, NULL), own ? TG_EIO : TG_ENOTFOUND));
        th_expect_in(tg_error_message(), own ? "the hook's own words"
                                             : "backward: a gradient hook failed with "
                                               "TG_ENOTFOUND and no message");
        cr_assert(tg_tensor_grad(x) == NULL);
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
Test(grad, tg_grad_fills_every_slot_of_a_repeated_input)
{
    const double ones[3] = {1, 1, 1};
    tg_tensor *x = th_vec(TG_F64, 3, ones, "x", true), *u = th_vec(TG_F64, 3, ones, "u", true);
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
            cr_assert(eq(dbl, th_at(g[j], i), want[j]), "slot %d [%d] = %g", j, i, th_at(g[j], i));
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

Test(grad, tg_grad_of_many_leaf_inputs)
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
    th_release_all(MANY, g);
    tg_tensor_release(y);
    th_release_all(MANY, m);
    th_release_all(MANY, x);
    free(g), free(m), free(x);
}

/* Non-leaf and leaf inputs interleaved: in[2i] = m[i], in[2i + 1] = x[i]. */
Test(grad, tg_grad_of_many_non_leaf_inputs)
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
    th_release_all(2 * MANY, g);
    tg_tensor_release(y);
    th_release_all(MANY, m);
    th_release_all(MANY, x);
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
Test(grad, backward_over_many_leaves)
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
    th_release_all(MANY, m);
    th_release_all(MANY, x);
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
Test(grad, tg_grad_out_of_memory_is_enomem)
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
    th_release_all(2 * n, g);
    tg_tensor_release(y);
    th_release_all(n, m);
    th_release_all(n, x);
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
Test(grad, backward_out_of_memory_is_enomem)
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
    th_release_all(n, m);
    th_release_all(n, x);
    free(g), free(m), free(x);
}

/* The registry is built by its first use.  When that build runs out of memory
 * inside uthash (the table, its first buckets), the call that needed it is
 * TG_ENOMEM and the registry stays empty; the next call builds it again, in
 * full.  Criterion runs each test in a process of its own, where nothing has
 * built the registry yet. */
Test(grad, registry_build_out_of_memory_is_enomem_then_retried)
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
