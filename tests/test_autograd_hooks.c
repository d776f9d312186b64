/* Tests of the autograd engine's hooks: gradient hooks on leaves and
 * non-leaves that change the gradient or fail, post-accumulate hooks that
 * see a leaf's final gradient, hooks of either kind removing themselves
 * and others while they run, and a failing post-accumulate hook aborting
 * the backward. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "helpers.h"
#include "autograd_fixtures.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "autograd/tape.h"
#include "tapegrad/ops.h"

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

Test(autograd_hooks, hook_on_leaf_doubles_its_grad)
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

Test(autograd_hooks, hook_on_non_leaf)
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
Test(autograd_hooks, post_accumulate_hook_runs_once_the_leaf_gradient_is_final)
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

Test(autograd_hooks, post_accumulate_hooks_may_remove_themselves_and_others)
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

Test(autograd_hooks, gradient_hooks_may_remove_themselves_and_others)
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

Test(autograd_hooks, failing_post_accumulate_hook_aborts_the_backward)
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
