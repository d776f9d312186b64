/* tests/test_optim.c - SGD/Adam/AdamW (amsgrad, maximize)/RMSprop (momentum,
 * centered, maximize)/Adagrad/Adamax/NAdam/RAdam/Adadelta/Rprop/ASGD, in one
 * param group or two, against PyTorch 1.13's parameters after each of 5
 * steps (RAdam's 8) and its optimizer state after the last
 * (tests/golden/optim/, scripts/make_optim_goldens.py; optim_goldens.h).
 * The other optimizer tests: test_optim_state.c (state save / load),
 * test_optim_groups.c (param groups, refused options), test_optim_update.c
 * (zero_grad, learning rates, half parameters, a small regression). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "optim_goldens.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/optim.h"
#include "tapegrad/safetensors.h"

/* The optimizer's saved per-parameter state ("o.<j>.<name>") holds exactly
 * the entries of torch's optimizer.state ("p<j>.state.<name>"), with its
 * values. */
static void assert_state(const tg_st_file *f, const tg_optimizer *o, double tol,
                         const char *what)
{
    tg_st_file *s = snapshot(o);
    int want = 0, have = 0;
    for (int e = 0; e < tg_st_count(f); e++) {
        const char *name;
        tg_tensor *t;
        tg_st_at(f, e, &name, &t);
        int j;
        char field[32];
        if (sscanf(name, "p%d.state.%31s", &j, field) != 2) continue;
        want++;
        char k[64];
        snprintf(k, sizeof k, "o.%d.%s", j, field);
        const tg_tensor *u = tg_st_get(s, k);
        cr_assert(u != NULL, "%s: %s missing from the saved state", what, k);
        cr_assert(eq(i64, tg_tensor_numel(u), tg_tensor_numel(t)), "%s: %s", what, k);
        for (int64_t i = 0; i < tg_tensor_numel(t); i++) {
            double x, y;
            tg_tensor_get_flat(u, i, &x);
            tg_tensor_get_flat(t, i, &y);
            cr_assert(epsilon_eq(dbl, x, y, tol * fmax(1, fabs(y))), "%s: %s[%lld] %.17g vs %.17g",
                      what, k, (long long)i, x, y);
        }
    }
    for (int e = 0; e < tg_st_count(s); e++) {   /* and nothing torch's state lacks */
        const char *name;
        tg_tensor *t;
        tg_st_at(s, e, &name, &t);
        int j, len = 0;
        if (sscanf(name, "o.%d.%n", &j, &len) == 1 && len > 0) have++;
    }
    cr_assert(eq(int, have, want), "%s: %d state entries saved, torch has %d", what, have, want);
    tg_st_free(s);
}

/* Runs the 5 golden steps of config in f32 and f64. */
static void check_config(const char *config)
{
    const char *dts[2] = {"f32", "f64"};
    const double tols[2] = {1e-6, 1e-12};
    for (int d = 0; d < 2; d++) {
        tg_st_file *f = th_golden_load("optim/%s_%s.safetensors", config, dts[d]);
        tg_tensor *params[NP];
        init_params(f, params);
        tg_optimizer *o = make_opt(f, params);
        const int steps = golden_steps(f);
        for (int k = 0; k < steps; k++) {
            set_grads(f, params, k);
            cr_assert(eq(int, tg_optimizer_step(o), TG_OK), "%s", tg_error_message());
            assert_params(f, params, k, tols[d], config);
        }
        assert_state(f, o, tols[d], config);
        cr_assert(eq(i64, tg_optimizer_steps(o), steps));
        tg_optimizer_free(o);
        free_params(params);
        tg_st_free(f);
    }
}

Test(optim, sgd_matches_pytorch)
{
    check_config("sgd_plain");
    check_config("sgd_momentum");
    check_config("sgd_nesterov");
    check_config("sgd_wd");
}

Test(optim, adam_and_adamw_match_pytorch)
{
    check_config("adam");
    check_config("adam_wd");
    check_config("adamw");
}

/* AdamW without weight decay (and with amsgrad) in the second group, SGD
 * with momentum in the first group only, Adam with another eps and weight
 * decay: each group steps with its own options, as torch's param_groups. */
Test(optim, param_groups_match_pytorch)
{
    check_config("adamw_groups");
    check_config("sgd_groups");
    check_config("adam_groups");
}

/* Every option that changes RMSprop's arithmetic: weight decay, momentum,
 * centered, maximize, all of them together, and two groups (momentum in
 * the first, centered with weight decay in the second). */
Test(optim, rmsprop_matches_pytorch)
{
    check_config("rmsprop");
    check_config("rmsprop_wd");
    check_config("rmsprop_momentum");
    check_config("rmsprop_centered");
    check_config("rmsprop_maximize");
    check_config("rmsprop_centered_momentum_maximize");
    check_config("rmsprop_groups");
}

Test(optim, amsgrad_and_maximize_match_pytorch)
{
    check_config("adam_amsgrad");
    check_config("adamw_amsgrad");
    check_config("adam_maximize");
    check_config("adamw_amsgrad_maximize");
    check_config("sgd_maximize");
    check_config("sgd_nesterov_maximize");
}

/* Each with torch's defaults, with every option changed (Adagrad's
 * lr_decay, initial_accumulator_value and maximize; NAdam's momentum_decay),
 * and in two groups.  RAdam's 8 steps reach its rectified update (from step
 * 6 with these betas) after the plain ones. */
Test(optim, adagrad_adamax_nadam_radam_match_pytorch)
{
    const char *configs[] = {"adagrad", "adagrad_all", "adagrad_groups", "adamax", "adamax_all",
                             "adamax_groups", "nadam", "nadam_all", "nadam_groups", "radam",
                             "radam_all", "radam_groups"};
    for (size_t i = 0; i < sizeof configs / sizeof *configs; i++) check_config(configs[i]);
}

/* Adadelta with its defaults, every option and two groups; Rprop's step
 * sizes growing and shrinking as the gradients' signs change, and
 * (rprop_all, rprop_groups) held at both ends of step_sizes; ASGD's
 * average from the step after t0 on. */
Test(optim, adadelta_rprop_and_asgd_match_pytorch)
{
    const char *configs[] = {"adadelta", "adadelta_all", "adadelta_groups", "rprop",
                             "rprop_all", "rprop_groups", "asgd", "asgd_all", "asgd_groups"};
    for (size_t i = 0; i < sizeof configs / sizeof *configs; i++) check_config(configs[i]);
}
