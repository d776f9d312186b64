/* tests/test_lr_scheduler_state.c - lr_scheduler.h's state: save/load
 * restoring every value, bad states refused with everything unchanged,
 * the states of param groups added after a scheduler was made, NULL
 * arguments, and checkpoint resume equal to an uninterrupted run of every
 * case (sched_cases.h) with a checkpoint of another kind changing nothing. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "sched_cases.h"
#include "tapegrad/checkpoint.h"
#include "tapegrad/lr_scheduler.h"
#include "tapegrad/nn.h"
#include "tapegrad/optim.h"

/* a and b are the same lr, or both NaN (a group that does not exist). */
static bool same_lr(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

/* ---- state files ---------------------------------------------------------------- */

/* Saved at epoch 7 and loaded after 5 more steps, a SequentialLR and its
 * schedulers are back at epoch 7 (the optimizer's lr is its own state). */
Test(lr_scheduler_state, state_round_trip_restores_every_value)
{
    const gcase *c = find_case("seq_warmup_cosine");
    run r;
    run_make(&r, c);
    for (int k = 1; k <= 7; k++) run_step(&r, c, k);
    tg_st_file *saved = snapshot(r.top);
    cr_assert(eq(str, (char *)tg_st_meta_get(saved, "o.kind"), "sequential_lr"));
    cr_assert(eq(str, (char *)tg_st_meta_get(saved, "o.1.kind"), "cosine_annealing_lr"));
    cr_assert(eq(int, tg_tensor_dtype(tg_st_get(saved, "o.last_epoch")), TG_I64));
    double lr7 = tg_optimizer_get_lr(r.opt);
    for (int k = 8; k <= 12; k++) run_step(&r, c, k);
    cr_assert(eq(int, tg_lr_scheduler_state_load(r.top, saved, "o"), TG_OK), "%s",
              tg_error_message());
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), 7));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.parts[0]), 4));   /* stepped to 5 - 1 */
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.parts[1]), 2));   /* restarted at 5 */
    cr_assert(eq(dbl, tg_lr_scheduler_get_last_lr(r.top), lr7));
    cr_assert(eq(dbl, tg_lr_scheduler_base_lr(r.top), 0.1));
    /* torch's load_state_dict leaves the optimizer's lr alone */
    cr_assert(tg_optimizer_get_lr(r.opt) != lr7);
    tg_st_file *again = snapshot(r.top);
    th_expect_same_st(saved, again);
    tg_st_free(again);
    tg_st_free(saved);
    run_free(&r);
}

/* Each bad file is refused with its status and words, and leaves the
 * SequentialLR and both its schedulers as they were. */
Test(lr_scheduler_state, bad_states_change_nothing)
{
    const gcase *c = find_case("seq_warmup_cosine");
    run r;
    run_make(&r, c);
    for (int k = 1; k <= 8; k++) run_step(&r, c, k);
    tg_st_file *before = snapshot(r.top);
    const struct {
        const char *skip, *set_key;   /* entry left out; tensor or metadata set */
        double v;
        const char *kind;             /* metadata value, when set_key is a kind */
        int status;
        const char *words;
    } bad[] = {
        {"o.last_epoch", NULL, 0, NULL, TG_ENOTFOUND, "missing key 'o.last_epoch'"},
        {"o.1.last_lr", NULL, 0, NULL, TG_ENOTFOUND, "missing key 'o.1.last_lr'"},
        {"o.1.kind", NULL, 0, NULL, TG_ENOTFOUND, "missing metadata 'o.1.kind'"},
        {"", "o.kind", 0, "step_lr", TG_EINVAL, "'o.kind' is 'step_lr'; this scheduler is "
                                                "'sequential_lr'"},
        {"", "o.1.kind", 0, "linear_lr", TG_EINVAL, "'o.1.kind' is 'linear_lr'; this "
                                                    "scheduler is 'cosine_annealing_lr'"},
        {"", "o.last_epoch", 2.5, NULL, TG_EINVAL, "'o.last_epoch'=2.5 must be an integer"},
        {"", "o.1.last_epoch", 0x1p60, NULL, TG_EINVAL, "must be an integer within +-2^53"},
        {"", "o.0.last_lr", -1, NULL, TG_EINVAL, "'o.0.last_lr'=-1 must be finite and >= 0"},
        {"", "o.1.base_lr", NAN, NULL, TG_EINVAL, "'o.1.base_lr'=nan must be finite"},
        {"", "o.2.last_lr", 0.5, NULL, TG_EINVAL, "'o.2.last_lr' is for scheduler 2; this "
                                                  "sequential_lr has 2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tg_st_file *f = th_st_copy_without(before, bad[i].skip);
        if (bad[i].kind) tg_st_meta_set(f, bad[i].set_key, bad[i].kind);
        else if (bad[i].set_key) {
            tg_tensor *v = NULL;
            tg_tensor_scalar(&v, TG_F64, bad[i].v);
            tg_st_set(f, bad[i].set_key, v);
            tg_tensor_release(v);
        }
        cr_assert(eq(int, tg_lr_scheduler_state_load(r.top, f, "o"), bad[i].status), "case %zu",
                  i);
        cr_assert(strstr(tg_error_message(), bad[i].words) != NULL, "case %zu: %s", i,
                  tg_error_message());
        tg_st_free(f);
        tg_st_file *after = snapshot(r.top);
        th_expect_same_st(before, after);
        tg_st_free(after);
    }
    cr_assert(eq(int, tg_lr_scheduler_state_load(r.top, before, "other"), TG_ENOTFOUND));
    /* the run goes on as PyTorch's */
    tg_st_file *g = th_golden_load("optim/lr_scheduler.safetensors");
    for (int k = 9; k <= STEPS; k++) {
        run_step(&r, c, k);
        double w;
        tg_tensor_get_flat(tg_st_get(g, "seq_warmup_cosine.lr"), k, &w);
        expect_lr("after refused loads", k, tg_optimizer_get_lr(r.opt), w);
    }
    tg_st_free(g);
    tg_st_free(before);
    run_free(&r);
}

/* A param group added after a scheduler was made, as in torch: a StepLR
 * steps it with gamma from its own lr, it has no base lr, and get_last_lr
 * covers it from the next step on; a LambdaLR leaves it alone.  The state
 * holds one base_lr and two last_lrs and loads back bit for bit; it does
 * not load into a scheduler of an optimizer of one group (two last lrs) nor
 * into one made after the group was added (one base lr).  A SequentialLR of
 * the first scheduler is refused (torch's lacks the new group's
 * initial_lr).  One made afterwards takes the new group's lr as its base
 * lr and the first group's initial lr. */
Test(lr_scheduler_state, a_group_added_later_is_stepped_as_torch_steps_it)
{
    run r;
    run_make(&r, find_case("step_1"));   /* lr 1.0, gamma 0.9 every step */
    tg_lr_scheduler *lam = NULL;
    cr_assert(eq(int, tg_lambda_lr_new(&lam, r.opt, pow095, NULL), TG_OK));
    cr_assert(eq(int, tg_lr_scheduler_step(r.top), TG_OK));
    tg_tensor *q = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&q, TG_F64, 1, (int64_t[]){1}), TG_OK));
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.lr = 0.5;
    cr_assert(eq(int, tg_sgd_add_param_group(r.opt, 1, &q, &so), TG_OK));
    cr_assert(isnan(tg_lr_scheduler_get_group_last_lr(r.top, 1)));
    cr_assert(eq(int, tg_lr_scheduler_step(r.top), TG_OK), "%s", tg_error_message());
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), 2));
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(r.opt, 0), 1.0 * 0.9 * 0.9));
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(r.opt, 1), 0.5 * 0.9));
    cr_assert(eq(dbl, tg_lr_scheduler_get_group_last_lr(r.top, 1), 0.5 * 0.9));
    cr_assert(isnan(tg_lr_scheduler_group_base_lr(r.top, 1)));
    /* LambdaLR: base_lr * fn(epoch) for group 0 only */
    cr_assert(eq(int, tg_optimizer_set_group_lr(r.opt, 1, 0.7), TG_OK));
    cr_assert(eq(int, tg_lr_scheduler_step(lam), TG_OK), "%s", tg_error_message());
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(r.opt, 0), 1.0 * pow(0.95, 1)));
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(r.opt, 1), 0.7));
    cr_assert(eq(dbl, tg_lr_scheduler_get_group_last_lr(lam, 1), 0.7));

    tg_st_file *one = snapshot(r.top);
    cr_assert(eq(i64, tg_tensor_numel(tg_st_get(one, "o.base_lr")), 1));
    cr_assert(eq(i64, tg_tensor_numel(tg_st_get(one, "o.last_lr")), 2));
    cr_assert(eq(int, tg_lr_scheduler_step(r.top), TG_OK));
    cr_assert(eq(int, tg_lr_scheduler_state_load(r.top, one, "o"), TG_OK), "%s",
              tg_error_message());
    tg_st_file *again = snapshot(r.top);
    th_expect_same_st(one, again);
    tg_st_free(again);

    run fresh;
    run_make(&fresh, find_case("step_1"));
    tg_st_file *before = snapshot(fresh.top);
    REFUSED_WITH(tg_lr_scheduler_state_load(fresh.top, one, "o"), TG_ESHAPE,
                 "'o.last_lr' must hold 1 value (one per param group), has 2");
    again = snapshot(fresh.top);
    th_expect_same_st(before, again);
    tg_st_free(again);
    tg_st_free(before);
    run_free(&fresh);

    tg_lr_scheduler *seq = NULL, *e = NULL, *s2 = NULL;
    REFUSED(tg_sequential_lr_new(&seq, r.opt, 1, &r.top, NULL),
            "sequential_lr: schedulers[0] was made for 1 param groups; the optimizer has 2");
    cr_assert(eq(int, tg_exponential_lr_new(&e, r.opt, 0.5), TG_OK));
    cr_assert(eq(dbl, tg_lr_scheduler_group_base_lr(e, 0), 1.0));
    /* group 1's lr after the step that followed the snapshot */
    cr_assert(eq(dbl, tg_lr_scheduler_group_base_lr(e, 1), 0.7 * 0.9));
    cr_assert(isnan(tg_lr_scheduler_group_base_lr(e, 2)));
    cr_assert(isnan(tg_lr_scheduler_get_group_last_lr(e, -1)));
    cr_assert(isnan(tg_lr_scheduler_get_group_last_lr(NULL, 0)));
    cr_assert(eq(int, tg_step_lr_new(&s2, r.opt, 1, 0.9), TG_OK));
    tg_st_file *two = snapshot(s2);
    REFUSED_WITH(tg_lr_scheduler_state_load(s2, one, "o"), TG_ESHAPE,
             "'o.base_lr' must hold 2 values (one per param group), has 1");
    again = snapshot(s2);
    th_expect_same_st(two, again);
    tg_st_free(again);
    tg_st_free(two);
    tg_st_free(one);
    tg_lr_scheduler_free(s2);
    tg_lr_scheduler_free(e);
    tg_lr_scheduler_free(lam);
    tg_tensor_release(q);
    run_free(&r);
}

/* A scheduler saved before its first step after a group was added holds
 * one last lr, and loads into one whose optimizer has two groups; one
 * saved with three loads into one not stepped since its optimizer got
 * them; three last lrs do not load where the optimizer has two. */
Test(lr_scheduler_state, last_lrs_load_from_the_groups_of_the_last_step)
{
    run r;
    run_make(&r, find_case("added_exponential"));
    tg_st_file *f = snapshot(r.top);
    add_group(&r, find_case("added_exponential"));
    cr_assert(eq(int, tg_lr_scheduler_step(r.top), TG_OK));
    cr_assert(eq(int, tg_lr_scheduler_state_load(r.top, f, "o"), TG_OK), "%s",
              tg_error_message());
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), 0));
    cr_assert(isnan(tg_lr_scheduler_get_group_last_lr(r.top, 1)));
    /* saved with three groups, loaded into a scheduler never stepped since
     * two were added: its last lrs grow to three */
    run a, b;
    const gcase *c = find_case("added_exponential");
    run_make(&a, c);
    run_make(&b, c);
    for (int k = 0; k < 2; k++) {
        add_group(&a, c);
        add_group(&b, c);
        tg_tensor_release(a.q);   /* the optimizers hold them */
        tg_tensor_release(b.q);
        a.q = b.q = NULL;
    }
    cr_assert(eq(int, tg_lr_scheduler_step(a.top), TG_OK));
    tg_st_file *g3 = snapshot(a.top);
    cr_assert(eq(int, tg_lr_scheduler_state_load(b.top, g3, "o"), TG_OK), "%s",
              tg_error_message());
    cr_assert(eq(dbl, tg_lr_scheduler_get_group_last_lr(b.top, 2), 0.5 * 0.9));
    tg_st_file *again = snapshot(b.top);
    th_expect_same_st(g3, again);
    tg_st_free(again);
    tg_st_free(g3);
    run_free(&a);
    run_free(&b);
    tg_tensor *three = NULL;
    cr_assert(eq(int, tg_tensor_full(&three, TG_F64, 1, (int64_t[]){3}, 0.1), TG_OK));
    cr_assert(eq(int, tg_st_set(f, "o.last_lr", three), TG_OK));
    REFUSED_WITH(tg_lr_scheduler_state_load(r.top, f, "o"), TG_ESHAPE,
                 "'o.last_lr' must hold 1 to 2 values (one per param group at the last step), "
                 "has 3");
    tg_tensor_release(three);
    tg_st_free(f);
    run_free(&r);
}

/* NULL arguments and a prefix too long for a key. */
Test(lr_scheduler_state, state_functions_refuse_null)
{
    run r;
    run_make(&r, find_case("step_1"));
    tg_st_file *f = NULL;
    tg_st_new(&f);
    REFUSED(tg_lr_scheduler_state_save(NULL, f, "o"), "s, f and prefix must not be NULL");
    REFUSED(tg_lr_scheduler_state_save(r.top, NULL, "o"), "s, f and prefix must not be NULL");
    REFUSED(tg_lr_scheduler_state_save(r.top, f, NULL), "s, f and prefix must not be NULL");
    cr_assert(eq(int, tg_lr_scheduler_state_save(r.top, f, "o"), TG_OK));
    REFUSED(tg_lr_scheduler_state_load(NULL, f, "o"), "s, f and prefix must not be NULL");
    REFUSED(tg_lr_scheduler_state_load(r.top, NULL, "o"), "s, f and prefix must not be NULL");
    REFUSED(tg_lr_scheduler_state_load(r.top, f, NULL), "s, f and prefix must not be NULL");
    char longp[300];
    memset(longp, 'p', sizeof longp - 1);
    longp[sizeof longp - 1] = '\0';
    REFUSED(tg_lr_scheduler_state_save(r.top, f, longp), "too long");
    tg_st_free(f);
    run_free(&r);
}

/* ---- resuming ------------------------------------------------------------------ */

static char ck_path[128];

static void setup(void)
{
    th_tmp_dir_make("tg_sched_");
    th_tmp_path(ck_path, sizeof ck_path, "checkpoint.safetensors");
}

TestSuite(lr_scheduler_state, .init = setup, .fini = th_tmp_dir_remove);

/* A checkpoint of module m (when not NULL), r's optimizer and its top
 * scheduler. */
static tg_checkpoint *checkpoint_with(tg_module *m, const run *r)
{
    tg_checkpoint *ck = NULL;
    cr_assert(eq(int, tg_checkpoint_new(&ck), TG_OK));
    if (m) cr_assert(eq(int, tg_checkpoint_add_module(ck, "model", m), TG_OK));
    cr_assert(eq(int, tg_checkpoint_add_optimizer(ck, "opt", r->opt), TG_OK));
    cr_assert(eq(int, tg_checkpoint_add_lr_scheduler(ck, "sched", r->top), TG_OK));
    return ck;
}

/* Saved after epoch `at` and loaded into freshly made objects, every case
 * goes on with the uninterrupted run's lrs, bit for bit. */
Test(lr_scheduler_state, checkpoint_resume_equals_uninterrupted_run)
{
    const int splits[] = {0, 3, 5, 17};
    for (int ci = 0; ci < N_CASES; ci++) {
        const gcase *c = &cases[ci];
        double whole[STEPS + 1], whole2[STEPS + 1];
        run r;
        run_make(&r, c);
        whole[0] = tg_optimizer_get_lr(r.opt);
        whole2[0] = tg_optimizer_get_group_lr(r.opt, n_groups(c) - 1);
        for (int k = 1; k <= STEPS; k++) {
            run_step(&r, c, k);
            whole[k] = tg_optimizer_get_lr(r.opt);
            whole2[k] = tg_optimizer_get_group_lr(r.opt, n_groups(c) - 1);
        }
        run_free(&r);
        for (size_t si = 0; si < sizeof splits / sizeof *splits; si++) {
            int at = splits[si];
            run_make(&r, c);
            for (int k = 1; k <= at; k++) run_step(&r, c, k);
            tg_checkpoint *ck = checkpoint_with(NULL, &r);
            cr_assert(eq(int, tg_checkpoint_save(ck, ck_path, NULL), TG_OK));
            tg_checkpoint_free(ck);
            run_free(&r);

            run_make(&r, c);   /* a new process: its constructors step the lr again */
            if (c->add_at > 0 && at >= c->add_at) add_group(&r, c);
            ck = checkpoint_with(NULL, &r);
            cr_assert(eq(int, tg_checkpoint_load(ck, ck_path), TG_OK), "%s", tg_error_message());
            tg_checkpoint_free(ck);
            cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), at));
            cr_assert(eq(dbl, tg_lr_scheduler_get_last_lr(r.top), whole[at]));
            for (int k = at + 1; k <= STEPS; k++) {
                run_step(&r, c, k);
                cr_assert(eq(dbl, tg_optimizer_get_lr(r.opt), whole[k]),
                          "%s resumed after %d, epoch %d: %.17g vs %.17g", c->name, at, k,
                          tg_optimizer_get_lr(r.opt), whole[k]);
                cr_assert(same_lr(tg_optimizer_get_group_lr(r.opt, n_groups(c) - 1), whole2[k]),
                          "%s resumed after %d, epoch %d, last group", c->name, at, k);
            }
            run_free(&r);
        }
    }
}

/* A checkpoint of another scheduler kind is refused before any slot loads:
 * the model and optimizer slots before it keep their weights (not even a
 * version counter moves) and lr. */
Test(lr_scheduler_state, checkpoint_of_another_kind_changes_nothing)
{
    tg_rng rng;
    tg_rng_init(&rng, 5);
    tg_module *lin = NULL;
    cr_assert(eq(int, tg_nn_linear_new(&lin, 2, 1, true, &rng), TG_OK));
    tg_tensor **params = NULL;
    int n = 0;
    cr_assert(eq(int, tg_module_parameters(lin, &params, &n), TG_OK));
    run a, b;
    run_make(&a, find_case("step_1"));
    run_make(&b, find_case("exponential"));
    tg_checkpoint *ck = checkpoint_with(lin, &a);
    cr_assert(eq(int, tg_checkpoint_save(ck, ck_path, NULL), TG_OK));
    tg_checkpoint_free(ck);
    tg_lr_scheduler_step(b.top);
    double lr = tg_optimizer_get_lr(b.opt);
    uint64_t version = tg_tensor_version(params[0]);
    ck = checkpoint_with(lin, &b);
    cr_assert(eq(int, tg_checkpoint_load(ck, ck_path), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "'sched.kind' is 'step_lr'") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(u64, tg_tensor_version(params[0]), version));
    cr_assert(eq(dbl, tg_optimizer_get_lr(b.opt), lr));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(b.top), 1));
    cr_assert(eq(int, tg_checkpoint_add_lr_scheduler(ck, "s2", NULL), TG_EINVAL));
    cr_assert(eq(int, tg_checkpoint_add_lr_scheduler(ck, "sched", b.top), TG_EINVAL));
    tg_checkpoint_free(ck);
    free(params);
    tg_module_release(lin);
    run_free(&a);
    run_free(&b);
}
