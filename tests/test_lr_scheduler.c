/* tests/test_lr_scheduler.c - lr_scheduler.h: every kind's lr sequence
 * against PyTorch 1.13's (tests/golden/optim/lr_scheduler.safetensors,
 * scripts/make_sched_goldens.py, whose CASES sched_cases.c's cases mirror;
 * param groups added after a scheduler was made among them), argument
 * errors and failed steps changing nothing, later schedulers taking the
 * first one's initial lr, the optimizer stepping with the lr a scheduler
 * set, and LambdaLR's functions per group.  State save/load and checkpoint
 * resume are in test_lr_scheduler_state.c. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "sched_cases.h"
#include "tapegrad/lr_scheduler.h"
#include "tapegrad/optim.h"

/* Every case's lr (each param group's) after its construction and after
 * each of 40 steps is torch's; get_last_lr and last_epoch agree. */
Test(lr_scheduler, sequences_match_pytorch)
{
    tg_st_file *f = th_golden_load("optim/lr_scheduler.safetensors");
    cr_assert(eq(int, tg_st_count(f), N_CASES), "the golden file and cases[] differ");
    for (int ci = 0; ci < N_CASES; ci++) {
        const gcase *c = &cases[ci];
        char key[96];
        snprintf(key, sizeof key, "%s.lr", c->name);
        const tg_tensor *want = tg_st_get(f, key);
        const int G = n_groups(c);
        cr_assert(want != NULL && tg_tensor_numel(want) == (STEPS + 1) * G, "%s", key);
        run r;
        run_make(&r, c);
        for (int k = 0; k <= STEPS; k++) {
            if (k > 0) run_step(&r, c, k);
            for (int g = 0; g < G; g++) {
                double w, lr = tg_optimizer_get_group_lr(r.opt, g);
                tg_tensor_get_flat(want, k * G + g, &w);
                char what[96];
                snprintf(what, sizeof what, "%s group %d", c->name, g);
                /* torch's get_last_lr() has the groups of the last step */
                const double last = tg_lr_scheduler_get_group_last_lr(r.top, g);
                if (isnan(w)) {
                    cr_assert(isnan(lr) && isnan(last), "%s epoch %d: no group yet", what, k);
                    continue;
                }
                expect_lr(what, k, lr, w);
                cr_assert(eq(dbl, last, lr), "%s epoch %d: last lr %g", what, k, last);
            }
            cr_assert(eq(dbl, tg_lr_scheduler_get_last_lr(r.top), tg_optimizer_get_lr(r.opt)));
            cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), k));
        }
        run_free(&r);
    }
    tg_st_free(f);
}

/* ---- arguments ---------------------------------------------------------------- */

static double nan_at_3(int64_t e, void *user)
{
    (void)user;
    return e == 3 ? NAN : 1.0;
}

static double negative(int64_t e, void *user)
{
    (void)user;
    (void)e;
    return -0.5;
}

/* Each bad constructor call: its status, words of its message, and nothing
 * made (the optimizer's lr unchanged). */
Test(lr_scheduler, bad_arguments_are_refused_with_their_rule)
{
    run r;
    run_make(&r, find_case("step_1"));   /* opt: lr 1.0 */
    tg_lr_scheduler *s = NULL, *other = NULL;
    tg_optimizer *o = r.opt, *o2 = NULL;
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    cr_assert(eq(int, tg_sgd_new(&o2, 1, &r.p, &so), TG_OK));
    cr_assert(eq(int, tg_exponential_lr_new(&other, o2, 0.5), TG_OK));
    tg_lr_scheduler *seq = NULL;
    cr_assert(eq(int, tg_sequential_lr_new(&seq, o, 1, &r.top, NULL), TG_OK));
    const int64_t ms[2] = {3, 1};
    REFUSED(tg_step_lr_new(&s, o, 0, 0.1),
            "step_lr: step_size=0 must be >= 1");
    REFUSED(tg_step_lr_new(&s, o, 3, -0.1),
            "step_lr: gamma=-0.1 must be finite and >= 0");
    REFUSED(tg_step_lr_new(&s, o, 3, NAN),
            "step_lr: gamma=nan must be finite");
    REFUSED(tg_step_lr_new(NULL, o, 3, 0.1),
            "step_lr: out must not be NULL");
    REFUSED(tg_step_lr_new(&s, NULL, 3, 0.1),
            "step_lr: opt must not be NULL");
    REFUSED(tg_multi_step_lr_new(&s, o, -1, ms, 0.1),
            "multi_step_lr: n_milestones=-1 must be >= 0");
    REFUSED(tg_multi_step_lr_new(&s, o, 2, NULL, 0.1),
            "milestones must not be NULL when n_milestones=2 > 0");
    REFUSED(tg_multi_step_lr_new(&s, o, 2, ms, INFINITY),
            "multi_step_lr: gamma=inf must be finite");
    REFUSED(tg_exponential_lr_new(&s, o, -2),
            "exponential_lr: gamma=-2 must be finite and >= 0");
    REFUSED(tg_cosine_annealing_lr_new(&s, o, 0, 0.0),
            "cosine_annealing_lr: t_max=0 must be >= 1");
    REFUSED(tg_cosine_annealing_lr_new(&s, o, 10, -1e-3),
            "eta_min=-0.001 must be finite and >= 0");
    REFUSED(tg_linear_lr_new(&s, o, 0.0, 1.0, 5),
            "linear_lr: start_factor=0 must be in (0, 1]");
    REFUSED(tg_linear_lr_new(&s, o, 1.5, 1.0, 5),
            "linear_lr: start_factor=1.5 must be in (0, 1]");
    REFUSED(tg_linear_lr_new(&s, o, NAN, 1.0, 5),
            "linear_lr: start_factor=nan must be in (0, 1]");
    REFUSED(tg_linear_lr_new(&s, o, 0.5, -0.1, 5),
            "linear_lr: end_factor=-0.1 must be in [0, 1]");
    REFUSED(tg_linear_lr_new(&s, o, 0.5, 1.1, 5),
            "linear_lr: end_factor=1.1 must be in [0, 1]");
    REFUSED(tg_linear_lr_new(&s, o, 0.5, 1.0, 0),
            "linear_lr: total_iters=0 must be >= 1");
    REFUSED(tg_lambda_lr_new(&s, o, NULL, NULL),
            "lambda_lr: fn must not be NULL");
    REFUSED(tg_lambda_lr_new(&s, o, negative, NULL),
            "lambda_lr: the initial step gives lr=-0.5 at epoch 0");
    REFUSED(tg_sequential_lr_new(&s, o, 0, &r.top, NULL),
            "n_schedulers=0 must be >= 1");
    REFUSED(tg_sequential_lr_new(&s, o, 1, NULL, NULL),
            "schedulers must not be NULL");
    REFUSED(tg_sequential_lr_new(&s, o, 2, (tg_lr_scheduler *[]){r.top, r.top}, NULL),
            "milestones must not be NULL (n_schedulers - 1 = 1 of them)");
    REFUSED(tg_sequential_lr_new(&s, o, 2, (tg_lr_scheduler *[]){r.top, NULL}, ms),
            "schedulers[1] must not be NULL");
    REFUSED(tg_sequential_lr_new(&s, o, 2, (tg_lr_scheduler *[]){r.top, other}, ms),
            "schedulers[1] is attached to another optimizer");
    REFUSED(tg_sequential_lr_new(&s, o, 2, (tg_lr_scheduler *[]){seq, r.top}, ms),
            "schedulers[0] is a sequential_lr; they do not nest");
    cr_assert(s == NULL);
    cr_assert(eq(dbl, tg_optimizer_get_lr(o), 1.0));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), 0));
    tg_lr_scheduler_free(seq);
    tg_lr_scheduler_free(other);
    tg_optimizer_free(o2);
    run_free(&r);
}

/* A step whose lr would not be finite fails and changes nothing. */
Test(lr_scheduler, failed_step_changes_nothing)
{
    run r;
    run_make(&r, find_case("step_1"));
    tg_lr_scheduler *lam = NULL, *big = NULL;
    cr_assert(eq(int, tg_lambda_lr_new(&lam, r.opt, nan_at_3, NULL), TG_OK));
    for (int k = 1; k <= 2; k++) cr_assert(eq(int, tg_lr_scheduler_step(lam), TG_OK));
    cr_assert(eq(int, tg_optimizer_set_lr(r.opt, 0.25), TG_OK));
    REFUSED(tg_lr_scheduler_step(lam),
            "lr_scheduler_step: lambda_lr gives lr=nan at epoch 3 (base_lr * fn(epoch))");
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(lam), 2));
    cr_assert(eq(dbl, tg_lr_scheduler_get_last_lr(lam), 1.0));
    cr_assert(eq(dbl, tg_optimizer_get_lr(r.opt), 0.25));
    /* 1.0 * 1e200 * 1e200 overflows */
    cr_assert(eq(int, tg_exponential_lr_new(&big, r.opt, 1e200), TG_OK));
    cr_assert(eq(int, tg_lr_scheduler_step(big), TG_OK));
    REFUSED(tg_lr_scheduler_step(big), "exponential_lr gives lr=inf at epoch 2");
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(big), 1));
    cr_assert(eq(dbl, tg_optimizer_get_lr(r.opt), 0.25 * 1e200));
    tg_lr_scheduler_free(big);
    tg_lr_scheduler_free(lam);
    run_free(&r);
}

/* NULL is refused by the step and gives NaN / INT64_MIN from the getters. */
Test(lr_scheduler, null_arguments)
{
    tg_lr_scheduler_free(NULL);
    REFUSED(tg_lr_scheduler_step(NULL), "lr_scheduler_step: s must not be NULL");
    cr_assert(isnan(tg_lr_scheduler_get_last_lr(NULL)));
    cr_assert(isnan(tg_lr_scheduler_base_lr(NULL)));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(NULL), INT64_MIN));
}

/* torch's initial_lr: the first scheduler records the optimizer's lr; a
 * later one takes it as base_lr although the lr has moved, and its own
 * initial step (ExponentialLR: none at epoch 0) keeps the current lr. */
Test(lr_scheduler, later_schedulers_take_the_first_ones_initial_lr)
{
    run r;
    run_make(&r, find_case("linear_default"));   /* lr 0.1 -> 0.1 / 3 */
    cr_assert(eq(dbl, tg_lr_scheduler_base_lr(r.top), 0.1));
    tg_lr_scheduler *e = NULL;
    double lr = tg_optimizer_get_lr(r.opt);
    cr_assert(eq(dbl, lr, 0.1 * (1.0 / 3)));
    cr_assert(eq(int, tg_exponential_lr_new(&e, r.opt, 0.5), TG_OK));
    cr_assert(eq(dbl, tg_lr_scheduler_base_lr(e), 0.1));
    cr_assert(eq(dbl, tg_optimizer_get_lr(r.opt), lr));
    tg_lr_scheduler_free(e);
    run_free(&r);
}

/* An SGD step uses the lr the scheduler set: with gradient 1, p moves by
 * exactly the lr of each step. */
Test(lr_scheduler, sgd_steps_with_the_scheduled_lr)
{
    tg_tensor *p = NULL;
    cr_assert(eq(int, tg_tensor_full(&p, TG_F64, 1, (int64_t[]){1}, 1.0), TG_OK));
    tg_tensor_set_requires_grad(p, true);
    tg_optimizer *o = NULL;
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.lr = 0.1;
    cr_assert(eq(int, tg_sgd_new(&o, 1, &p, &so), TG_OK));
    tg_lr_scheduler *s = NULL;
    cr_assert(eq(int, tg_step_lr_new(&s, o, 2, 0.5), TG_OK));
    const double lrs[6] = {0.1, 0.1, 0.05, 0.05, 0.025, 0.025};
    double want = 1.0;
    for (int k = 0; k < 6; k++) {
        tg_tensor *g = NULL;
        tg_tensor_full(&g, TG_F64, 1, (int64_t[]){1}, 1.0);
        cr_assert(eq(int, tg_tensor_set_grad(p, g), TG_OK));
        cr_assert(eq(dbl, tg_optimizer_get_lr(o), lrs[k]));
        cr_assert(eq(int, tg_optimizer_step(o), TG_OK));
        want -= lrs[k];
        cr_assert(eq(dbl, th_at(p, 0), want), "step %d: %.17g vs %.17g", k, th_at(p, 0), want);
        cr_assert(eq(int, tg_lr_scheduler_step(s), TG_OK));
    }
    tg_lr_scheduler_free(s);
    tg_optimizer_free(o);
    tg_tensor_release(p);
}

/* factor^epoch, factor the double user points to. */
static double power_of_user(int64_t e, void *user) { return pow(*(double *)user, (double)e); }

/* One function per param group: over 12 epochs group g's lr is
 * base_g * fns[g](epoch, users[g]), each group with its own function and
 * user pointer, and state saved at epoch 5 loads back.  The checks name
 * n_fns, fns and fns[g]; a refused call makes nothing. */
Test(lr_scheduler, lambda_lr_takes_one_function_per_group)
{
    run r;
    run_make(&r, find_case("groups_lambda"));   /* lrs 0.1 and 0.3 */
    double f0 = 0.8, f1 = 1.5;
    tg_lr_scheduler *s = NULL;
    const tg_lr_lambda_fn fns[2] = {power_of_user, warmup5};
    cr_assert(eq(int, tg_lambda_lr_new_per_group(&s, r.opt, 2,
                                                  (tg_lr_lambda_fn[]){power_of_user,
                                                                      power_of_user},
                                                  (void *[]){&f0, &f1}), TG_OK));
    for (int k = 0; k <= 12; k++) {
        if (k > 0) cr_assert(eq(int, tg_lr_scheduler_step(s), TG_OK), "%s", tg_error_message());
        cr_assert(eq(dbl, tg_optimizer_get_group_lr(r.opt, 0), 0.1 * pow(0.8, k)), "epoch %d", k);
        cr_assert(eq(dbl, tg_optimizer_get_group_lr(r.opt, 1), 0.3 * pow(1.5, k)), "epoch %d", k);
        cr_assert(eq(dbl, tg_lr_scheduler_get_group_last_lr(s, 1), 0.3 * pow(1.5, k)));
    }
    tg_lr_scheduler_free(s);
    s = NULL;
    cr_assert(eq(int, tg_lambda_lr_new_per_group(&s, r.opt, 2, fns, (void *[]){&f0, NULL}),
                 TG_OK));
    tg_st_file *at5 = NULL;
    for (int k = 1; k <= 8; k++) {
        cr_assert(eq(int, tg_lr_scheduler_step(s), TG_OK));
        cr_assert(eq(dbl, tg_optimizer_get_group_lr(r.opt, 0), 0.1 * pow(0.8, k)));
        cr_assert(eq(dbl, tg_optimizer_get_group_lr(r.opt, 1), 0.3 * warmup5(k, NULL)));
        if (k == 5) at5 = snapshot(s);
    }
    cr_assert(eq(str, (char *)tg_st_meta_get(at5, "o.kind"), "lambda_lr"));
    cr_assert(eq(int, tg_lr_scheduler_state_load(s, at5, "o"), TG_OK));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(s), 5));
    cr_assert(eq(int, tg_lr_scheduler_step(s), TG_OK));
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(r.opt, 0), 0.1 * pow(0.8, 6)));
    tg_st_free(at5);
    tg_lr_scheduler_free(s);

    const double lr0 = tg_optimizer_get_group_lr(r.opt, 0);
    s = NULL;
    REFUSED(tg_lambda_lr_new_per_group(&s, r.opt, 1, fns, NULL),
            "lambda_lr_per_group: n_fns=1 must equal the optimizer's param group count 2");
    REFUSED(tg_lambda_lr_new_per_group(&s, r.opt, 3, fns, NULL),
            "lambda_lr_per_group: n_fns=3 must equal");
    REFUSED(tg_lambda_lr_new_per_group(&s, r.opt, 2, NULL, NULL),
            "lambda_lr_per_group: fns must not be NULL");
    REFUSED(tg_lambda_lr_new_per_group(&s, r.opt, 2, (tg_lr_lambda_fn[]){warmup5, NULL}, NULL),
            "lambda_lr_per_group: fns[1] must not be NULL");
    REFUSED(tg_lambda_lr_new_per_group(NULL, r.opt, 2, fns, NULL),
            "lambda_lr_per_group: out must not be NULL");
    REFUSED(tg_lambda_lr_new_per_group(&s, NULL, 2, fns, NULL),
            "lambda_lr_per_group: opt must not be NULL");
    REFUSED(tg_lambda_lr_new_per_group(&s, r.opt, 2, (tg_lr_lambda_fn[]){warmup5, negative},
                                       NULL),
            "lambda_lr: the initial step gives lr=-0.15 at epoch 0 for param group 1");
    cr_assert(s == NULL);
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(r.opt, 0), lr0));
    run_free(&r);
}
