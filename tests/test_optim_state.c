/* tests/test_optim_state.c - an optimizer's state saved and loaded:
 * a run resumed from a saved state (through a real file) continues bit for
 * bit as an uninterrupted one and gets the saved hyperparameters back; bad
 * state files, bad hyperparameters in one and states of other param groups
 * are refused with everything unchanged; a state without hyperparameters
 * keeps the optimizer's own, and the state carries a scheduler's initial lr.
 * The optimizers come from the PyTorch goldens (optim_goldens.h). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "core/core.h"
#include "optim_goldens.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/autograd.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"
#include "tapegrad/optim.h"
#include "tapegrad/safetensors.h"

/* ---- state save / load ----------------------------------------------------- */

static void assert_bits_equal(const tg_tensor *a, const tg_tensor *b, const char *what)
{
    cr_assert(eq(int, tg_tensor_dtype(a), tg_tensor_dtype(b)), "%s dtype", what);
    cr_assert(tg_tensor_same_shape(a, b), "%s shape", what);
    size_t nb = (size_t)tg_tensor_numel(a) * tg_dtype_size(tg_tensor_dtype(a));
    cr_assert(memcmp(tg_tensor_cdata(a), tg_tensor_cdata(b), nb) == 0, "%s bits", what);
}

/* Steps 0..2 with one optimizer, save (through a real file), a new optimizer
 * loads the state and runs steps 3..4: the parameters equal, bit for bit,
 * those of an uninterrupted run.  With other_opts the new optimizer is made
 * with different hyperparameters (amsgrad flipped too), which the load
 * restores, as torch's load_state_dict restores param_groups. */
static void check_resume(const char *config, bool other_opts)
{
    tg_st_file *f = th_golden_load("optim/%s_%s.safetensors", config, "f32");
    tg_tensor *a[NP], *b[NP];
    init_params(f, a);
    init_params(f, b);
    tg_optimizer *oa = make_opt(f, a), *ob = make_opt(f, b);
    const int steps = golden_steps(f);
    for (int k = 0; k < steps; k++) {
        set_grads(f, a, k);
        cr_assert(eq(int, tg_optimizer_step(oa), TG_OK));
    }
    for (int k = 0; k < 3; k++) {
        set_grads(f, b, k);
        cr_assert(eq(int, tg_optimizer_step(ob), TG_OK));
    }
    tg_st_file *s = NULL, *s2 = NULL;
    char path[] = "/tmp/tg_optim_stateXXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    tg_st_new(&s);
    cr_assert(eq(int, tg_optimizer_state_save(ob, s, "opt"), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_safetensors_save(s, path), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_safetensors_load(&s2, path), TG_OK), "%s", tg_error_message());
    remove(path);
    tg_optimizer_free(ob);
    ob = other_opts ? make_other_opt(f, b, true) : make_opt(f, b);
    cr_assert(eq(int, tg_optimizer_state_load(ob, s2, "opt"), TG_OK), "%s", tg_error_message());
    cr_assert(eq(i64, tg_optimizer_steps(ob), 3));
    cr_assert(eq(dbl, tg_optimizer_get_lr(ob), meta(f, "lr")));
    for (int k = 3; k < steps; k++) {
        set_grads(f, b, k);
        cr_assert(eq(int, tg_optimizer_step(ob), TG_OK));
    }
    for (int j = 0; j < NP; j++) assert_bits_equal(a[j], b[j], config);
    tg_st_free(s);
    tg_st_free(s2);
    tg_optimizer_free(oa);
    tg_optimizer_free(ob);
    free_params(a);
    free_params(b);
    tg_st_free(f);
}

Test(optim_state, state_save_load_resumes_bit_identically)
{
    check_resume("sgd_momentum", false);
    check_resume("sgd_plain", false);
    check_resume("adam", false);
    check_resume("adamw", false);
    check_resume("adam_amsgrad", false);
    check_resume("adamw_amsgrad_maximize", false);
    check_resume("sgd_nesterov_maximize", false);
    check_resume("adamw_groups", false);
    check_resume("sgd_groups", false);
    check_resume("rmsprop", false);
    check_resume("rmsprop_centered_momentum_maximize", false);
    check_resume("rmsprop_groups", false);
    check_resume("adagrad_all", false);
    check_resume("adamax_all", false);
    check_resume("nadam_all", false);
    check_resume("radam_all", false);
    check_resume("nadam_groups", false);
    check_resume("adadelta_all", false);
    check_resume("rprop_all", false);
    check_resume("asgd_all", false);
}

Test(optim_state, state_load_restores_the_hyperparameters)
{
    const char *configs[] = {"sgd_momentum", "sgd_nesterov_maximize", "sgd_wd", "sgd_maximize",
                             "adam_wd", "adam_amsgrad", "adam_maximize", "adamw",
                             "adamw_amsgrad_maximize", "adamw_groups", "sgd_groups",
                             "adam_groups", "rmsprop_wd", "rmsprop_momentum", "rmsprop_centered",
                             "rmsprop_centered_momentum_maximize", "rmsprop_groups",
                             "adagrad_all", "adagrad_groups", "adamax_all", "adamax_groups",
                             "nadam_all", "nadam_groups", "radam_all", "radam_groups",
                             "adadelta_all", "adadelta_groups", "rprop_all", "rprop_groups",
                             "asgd_all", "asgd_groups"};
    for (size_t i = 0; i < sizeof configs / sizeof *configs; i++) check_resume(configs[i], true);
}

Test(optim_state, bad_state_files_leave_the_optimizer_unchanged)
{
    tg_st_file *f = th_golden_load("optim/adam_f32.safetensors");
    tg_tensor *p[NP];
    tg_optimizer *o = stepped_twice(f, p);
    tg_st_file *before = snapshot(o);

    /* A state whose exp_avg of parameter 1 has shape (6) instead of (5). */
    tg_st_file *bad = th_st_copy_without(before, "o.1.exp_avg");
    tg_tensor *wrong = NULL;
    tg_tensor_zeros(&wrong, TG_F32, 1, (int64_t[]){6});
    tg_st_set(bad, "o.1.exp_avg", wrong);
    tg_tensor_release(wrong);
    tg_optimizer_set_lr(o, 0.5);   /* would be overwritten by a successful load */
    cr_assert(eq(int, tg_optimizer_state_load(o, bad, "o"), TG_ESHAPE));
    cr_assert(strstr(tg_error_message(), "o.1.exp_avg") != NULL, "%s", tg_error_message());
    cr_assert(eq(dbl, tg_optimizer_get_lr(o), 0.5));
    tg_st_free(bad);

    /* A missing key, another optimizer kind, a parameter it does not have. */
    bad = th_st_copy_without(before, "o.0.exp_avg_sq");
    cr_assert(eq(int, tg_optimizer_state_load(o, bad, "o"), TG_ENOTFOUND));
    cr_assert(strstr(tg_error_message(), "o.0.exp_avg_sq") != NULL, "%s", tg_error_message());
    tg_st_meta_set(bad, "o.kind", "sgd");
    cr_assert(eq(int, tg_optimizer_state_load(o, bad, "o"), TG_EINVAL));
    tg_st_free(bad);
    bad = th_st_copy_without(before, "");
    tg_st_set(bad, "o.7.exp_avg", tg_st_get(before, "o.0.exp_avg"));
    cr_assert(eq(int, tg_optimizer_state_load(o, bad, "o"), TG_EINVAL));
    cr_assert(eq(int, tg_optimizer_state_load(o, bad, "other"), TG_ENOTFOUND));
    tg_st_free(bad);

    /* Counters and lr that are not finite, or a step past 2^53. */
    const struct { const char *key; double v; } nonsense[] = {
        {"o.lr", INFINITY}, {"o.lr", NAN}, {"o.0.step", INFINITY}, {"o.0.step", 1e300},
        {"o.0.step", 0x1p60}, {"o.0.step", 2.5}, {"o.lr", -1},
    };
    for (size_t i = 0; i < sizeof nonsense / sizeof *nonsense; i++) {
        bad = th_st_copy_without(before, nonsense[i].key);
        tg_tensor *v = NULL;
        tg_tensor_full(&v, TG_F64, 0, NULL, nonsense[i].v);
        tg_st_set(bad, nonsense[i].key, v);
        tg_tensor_release(v);
        cr_assert(eq(int, tg_optimizer_state_load(o, bad, "o"), TG_EINVAL), "%s=%g",
                  nonsense[i].key, nonsense[i].v);
        cr_assert(strstr(tg_error_message(), nonsense[i].key) != NULL, "%s", tg_error_message());
        tg_st_free(bad);
    }

    cr_assert(eq(dbl, tg_optimizer_get_lr(o), 0.5));
    tg_optimizer_set_lr(o, meta(f, "lr"));
    tg_st_file *after = snapshot(o);
    th_expect_same_st(before, after);
    /* and the optimizer still continues exactly as PyTorch's */
    for (int k = 2; k < 5; k++) {
        set_grads(f, p, k);
        cr_assert(eq(int, tg_optimizer_step(o), TG_OK));
        assert_params(f, p, k, 1e-6, "after failed loads");
    }
    tg_st_free(after);
    tg_st_free(before);
    tg_optimizer_free(o);
    free_params(p);
    tg_st_free(f);
}

/* Stores n values (1: 0-d, 2: shape (2)) under key in a copy of src. */
static tg_st_file *copy_with(const tg_st_file *src, const char *key, int n, const double *v)
{
    tg_st_file *d = th_st_copy_without(src, key);
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_from_data(&t, TG_F64, n - 1, (int64_t[]){2}, v), TG_OK));
    cr_assert(eq(int, tg_st_set(d, key, t), TG_OK));
    tg_tensor_release(t);
    return d;
}

typedef struct bad_hparam {
    const char *key;
    int n;
    double v[2];
    int rc;
    const char *msg;
} bad_hparam;

/* Each file of before with one entry replaced fails to load with rc and a
 * message holding msg; the optimizer (its lrs set to 0.5 meanwhile) stays as
 * before, hyperparameters included. */
static void expect_refused(tg_optimizer *o, const tg_st_file *before, const bad_hparam *c, int n)
{
    double lrs[4];
    const int G = tg_optimizer_param_group_count(o);
    cr_assert(G <= 4);
    for (int g = 0; g < G; g++) lrs[g] = tg_optimizer_get_group_lr(o, g);
    tg_optimizer_set_lr(o, 0.5);
    for (int i = 0; i < n; i++) {
        tg_st_file *bad = copy_with(before, c[i].key, c[i].n, c[i].v);
        cr_assert(eq(int, tg_optimizer_state_load(o, bad, "o"), c[i].rc), "%s=%g", c[i].key,
                  c[i].v[0]);
        cr_assert(strstr(tg_error_message(), c[i].msg) != NULL, "%s", tg_error_message());
        cr_assert(eq(dbl, tg_optimizer_get_lr(o), 0.5));
        tg_st_free(bad);
    }
    for (int g = 0; g < G; g++) tg_optimizer_set_group_lr(o, g, lrs[g]);
    tg_st_file *after = snapshot(o);
    th_expect_same_st(before, after);
    tg_st_free(after);
}

/* Hyperparameters out of their ranges, of the wrong size or not flags are
 * refused with TG_EINVAL (TG_ESHAPE) naming the key; a file whose amsgrad
 * lacks a parameter's maximum is TG_ENOTFOUND naming it.  Nothing changes. */
Test(optim_state, bad_hyperparameters_in_a_state_file_change_nothing)
{
    const bad_hparam adam[] = {
        {"o.betas", 2, {2.0, 0.5}, TG_EINVAL, "'o.betas'[0]=2 must be in [0, 1)"},
        {"o.betas", 2, {0.9, 1.0}, TG_EINVAL, "'o.betas'[1]=1 must be in [0, 1)"},
        {"o.betas", 1, {0.9}, TG_ESHAPE, "'o.betas' must hold 2 values, has 1"},
        {"o.eps", 1, {-1.0}, TG_EINVAL, "'o.eps'=-1 must be >= 0"},
        {"o.weight_decay", 1, {NAN}, TG_EINVAL, "'o.weight_decay'=nan must be >= 0"},
        {"o.amsgrad", 1, {2.0}, TG_EINVAL, "'o.amsgrad'=2 must be 0 or 1"},
        {"o.maximize", 1, {0.5}, TG_EINVAL, "'o.maximize'=0.5 must be 0 or 1"},
        {"o.maximize", 2, {0.0, 1.0}, TG_ESHAPE, "'o.maximize' must hold 1 value, has 2"},
        {"o.initial_lr", 1, {-1.0}, TG_EINVAL, "'o.initial_lr'=-1"},
    };
    const bad_hparam sgd[] = {
        {"o.dampening", 1, {0.5}, TG_EINVAL,
         "'o.nesterov' requires momentum > 0 and dampening == 0 (got momentum=0.8, "
         "dampening=0.5)"},
        {"o.dampening", 1, {INFINITY}, TG_EINVAL, "'o.dampening'=inf must be finite"},
        {"o.momentum", 1, {-1.0}, TG_EINVAL, "'o.momentum'=-1 must be >= 0"},
        {"o.nesterov", 1, {3.0}, TG_EINVAL, "'o.nesterov'=3 must be 0 or 1"},
        {"o.lr", 1, {-2.0}, TG_EINVAL, "'o.lr'=-2"},
    };
    const bad_hparam rms[] = {
        {"o.alpha", 1, {-0.5}, TG_EINVAL, "'o.alpha'=-0.5 must be >= 0"},
        {"o.alpha", 1, {NAN}, TG_EINVAL, "'o.alpha'=nan must be >= 0"},
        {"o.momentum", 1, {-1.0}, TG_EINVAL, "'o.momentum'=-1 must be >= 0"},
        {"o.eps", 1, {-1.0}, TG_EINVAL, "'o.eps'=-1 must be >= 0"},
        {"o.weight_decay", 1, {-0.1}, TG_EINVAL, "'o.weight_decay'=-0.1 must be >= 0"},
        {"o.centered", 1, {2.0}, TG_EINVAL, "'o.centered'=2 must be 0 or 1"},
        {"o.alpha", 2, {0.9, 0.9}, TG_ESHAPE, "'o.alpha' must hold 1 value, has 2"},
    };
    const char *configs[3] = {"adam_wd", "sgd_nesterov", "rmsprop_momentum"};
    for (int c = 0; c < 3; c++) {
        tg_st_file *f = th_golden_load("optim/%s_f32.safetensors", configs[c]);
        tg_tensor *p[NP];
        tg_optimizer *o = stepped_twice(f, p);
        tg_st_file *before = snapshot(o);
        if (c == 0) {
            expect_refused(o, before, adam, sizeof adam / sizeof *adam);
            /* amsgrad on, but the file has no maximum for its parameters */
            const double on = 1.0;
            tg_st_file *bad = copy_with(before, "o.amsgrad", 1, &on);
            cr_assert(eq(int, tg_optimizer_state_load(o, bad, "o"), TG_ENOTFOUND));
            cr_assert(strstr(tg_error_message(), "'o.0.max_exp_avg_sq'") != NULL, "%s",
                      tg_error_message());
            tg_st_free(bad);
        } else if (c == 1) {
            expect_refused(o, before, sgd, sizeof sgd / sizeof *sgd);
        } else {
            expect_refused(o, before, rms, sizeof rms / sizeof *rms);
            /* centered on, but the file has no grad_avg for its parameters */
            const double on = 1.0;
            tg_st_file *bad = copy_with(before, "o.centered", 1, &on);
            cr_assert(eq(int, tg_optimizer_state_load(o, bad, "o"), TG_ENOTFOUND));
            cr_assert(strstr(tg_error_message(), "'o.0.grad_avg'") != NULL, "%s",
                      tg_error_message());
            tg_st_free(bad);
            /* and a file without a parameter's square_avg */
            bad = th_st_copy_without(before, "o.1.square_avg");
            cr_assert(eq(int, tg_optimizer_state_load(o, bad, "o"), TG_ENOTFOUND));
            cr_assert(strstr(tg_error_message(), "'o.1.square_avg'") != NULL, "%s",
                      tg_error_message());
            tg_st_free(bad);
        }
        /* and the optimizer continues exactly as PyTorch's */
        for (int k = 2; k < 5; k++) {
            set_grads(f, p, k);
            cr_assert(eq(int, tg_optimizer_step(o), TG_OK));
            assert_params(f, p, k, 1e-6, "after refused loads");
        }
        tg_st_free(before);
        tg_optimizer_free(o);
        free_params(p);
        tg_st_free(f);
    }
}

/* A file without the hyperparameters (as written before they were saved)
 * loads its lr, step counts and buffers and leaves the optimizer's other
 * hyperparameters as they are; an amsgrad optimizer then lacks the maximum
 * of every parameter that has state. */
Test(optim_state, a_state_without_hyperparameters_keeps_the_optimizers_own)
{
    tg_st_file *f = th_golden_load("optim/adam_wd_f32.safetensors");
    tg_tensor *p[NP], *q[NP];
    tg_optimizer *o = stepped_twice(f, p);
    init_params(f, q);
    tg_st_file *full = snapshot(o), *old = th_st_copy_without(full, "o.betas");
    const char *hp[] = {"o.eps", "o.weight_decay", "o.amsgrad", "o.maximize"};
    for (int i = 0; i < 4; i++) {
        tg_st_file *t = th_st_copy_without(old, hp[i]);
        tg_st_free(old);
        old = t;
    }
    tg_optimizer *other = make_other_opt(f, q, false);
    tg_st_file *own = snapshot(other);
    cr_assert(eq(int, tg_optimizer_state_load(other, old, "o"), TG_OK), "%s", tg_error_message());
    tg_st_file *got = snapshot(other);
    for (int i = 0; i < 5; i++) {   /* the loader's hyperparameters */
        const char *k = i < 4 ? hp[i] : "o.betas";
        assert_bits_equal(tg_st_get(got, k), tg_st_get(own, k), k);
    }
    assert_bits_equal(tg_st_get(got, "o.lr"), tg_st_get(full, "o.lr"), "o.lr");
    assert_bits_equal(tg_st_get(got, "o.1.exp_avg_sq"), tg_st_get(full, "o.1.exp_avg_sq"),
                      "o.1.exp_avg_sq");
    tg_optimizer *ams = make_other_opt(f, q, true);
    cr_assert(eq(int, tg_optimizer_state_load(ams, old, "o"), TG_ENOTFOUND));
    cr_assert(strstr(tg_error_message(), "'o.0.max_exp_avg_sq'") != NULL, "%s",
              tg_error_message());
    tg_optimizer_free(ams);
    tg_optimizer_free(other);
    tg_optimizer_free(o);
    tg_st_free(got);
    tg_st_free(own);
    tg_st_free(old);
    tg_st_free(full);
    free_params(p);
    free_params(q);
    tg_st_free(f);
}

/* torch's param_group['initial_lr'] travels with the state: a scheduler
 * made after the load takes the saved initial lr as its base lr, not the
 * lr the previous scheduler left. */
Test(optim_state, state_carries_a_schedulers_initial_lr)
{
    tg_tensor *w = NULL, *v = NULL;
    tg_tensor_zeros(&w, TG_F32, 1, (int64_t[]){2});
    tg_tensor_zeros(&v, TG_F32, 1, (int64_t[]){2});
    tg_optimizer *a = NULL, *b = NULL;
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.lr = 0.1;
    cr_assert(eq(int, tg_sgd_new(&a, 1, &w, &so), TG_OK));
    so.lr = 0.7;
    cr_assert(eq(int, tg_sgd_new(&b, 1, &v, &so), TG_OK));
    tg_lr_scheduler *sa = NULL, *sb = NULL;
    cr_assert(eq(int, tg_step_lr_new(&sa, a, 1, 0.5), TG_OK));
    cr_assert(eq(int, tg_lr_scheduler_step(sa), TG_OK));
    cr_assert(eq(int, tg_lr_scheduler_step(sa), TG_OK));
    tg_st_file *s = snapshot(a);
    cr_assert(eq(int, tg_optimizer_state_load(b, s, "o"), TG_OK), "%s", tg_error_message());
    cr_assert(eq(dbl, tg_optimizer_get_lr(b), 0.025));
    cr_assert(eq(int, tg_step_lr_new(&sb, b, 1, 0.5), TG_OK));
    cr_assert(eq(dbl, tg_lr_scheduler_base_lr(sb), 0.1));
    tg_lr_scheduler_free(sa);
    tg_lr_scheduler_free(sb);
    tg_optimizer_free(a);
    tg_optimizer_free(b);
    tg_st_free(s);
    tg_tensor_release(w);
    tg_tensor_release(v);
}

/* A state of other param groups (another count, other sizes) or with
 * hyperparameters that are not one per group is refused naming the key;
 * a bad value names its group.  Nothing changes. */
Test(optim_state, state_of_other_param_groups_is_refused)
{
    tg_st_file *f = th_golden_load("optim/adamw_groups_f32.safetensors");
    tg_tensor *p[NP], *q[NP];
    tg_optimizer *o = stepped_twice(f, p);
    init_params(f, q);
    tg_st_file *before = snapshot(o);
    cr_assert(tg_st_get(before, "o.param_groups") != NULL);
    cr_assert(eq(i64, tg_tensor_numel(tg_st_get(before, "o.betas")), 4));
    const bad_hparam bad[] = {
        {"o.param_groups", 1, {2}, TG_EINVAL, "'o.param_groups' holds 1 param groups; this "
                                              "optimizer has 2"},
        {"o.param_groups", 2, {2, 0}, TG_EINVAL, "'o.param_groups'[0]=2 parameters; this "
                                                 "optimizer's group 0 has 1"},
        {"o.lr", 1, {0.1}, TG_ESHAPE, "'o.lr' must hold 2 values (for each param group), has 1"},
        {"o.lr", 2, {0.1, -1}, TG_EINVAL, "'o.lr'[1]=-1 must be a finite non-negative number"},
        {"o.weight_decay", 2, {0.1, NAN}, TG_EINVAL, "'o.weight_decay'[1]=nan must be >= 0"},
        {"o.amsgrad", 2, {0, 3}, TG_EINVAL, "'o.amsgrad'[1]=3 must be 0 or 1"},
    };
    expect_refused(o, before, bad, sizeof bad / sizeof *bad);
    /* betas (2, 2) with group 1's beta1 = 2 */
    tg_st_file *b = th_st_copy_without(before, "o.betas");
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_from_data(&t, TG_F64, 2, (int64_t[]){2, 2},
                                          (double[]){0.9, 0.999, 2.0, 0.5}), TG_OK));
    tg_st_set(b, "o.betas", t);
    tg_tensor_release(t);
    cr_assert(eq(int, tg_optimizer_state_load(o, b, "o"), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "'o.betas'[1][0]=2 must be in [0, 1)") != NULL, "%s",
              tg_error_message());
    tg_st_free(b);
    /* a one-group state into this two-group optimizer, and the reverse */
    b = th_st_copy_without(before, "o.param_groups");
    cr_assert(eq(int, tg_optimizer_state_load(o, b, "o"), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "no 'o.param_groups': the state is of one param group; "
                                         "this optimizer has 2") != NULL, "%s",
              tg_error_message());
    tg_st_free(b);
    tg_optimizer *one = NULL;
    tg_adam_opts a = TG_ADAMW_OPTS_INIT;
    cr_assert(eq(int, tg_adamw_new(&one, NP, q, &a), TG_OK));
    cr_assert(eq(int, tg_optimizer_state_load(one, before, "o"), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "'o.param_groups' holds 2 param groups; this optimizer "
                                         "has 1") != NULL, "%s", tg_error_message());
    tg_st_file *after = snapshot(o);
    th_expect_same_st(before, after);
    tg_st_free(after);
    tg_optimizer_free(one);
    tg_optimizer_free(o);
    tg_st_free(before);
    free_params(q);
    free_params(p);
    tg_st_free(f);
}
