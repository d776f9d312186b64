/* tests/test_optim.c - SGD/Adam/AdamW (amsgrad, maximize)/RMSprop (momentum,
 * centered, maximize) against PyTorch
 * 1.13's parameters after each of 5 steps and its optimizer state after the
 * last (tests/golden/optim/, scripts/make_optim_goldens.py), state save/load
 * resuming bit-identically, errors leaving everything unchanged, and a small
 * regression that Adam fits. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/autograd.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"
#include "tapegrad/optim.h"
#include "tapegrad/safetensors.h"

#define NP 2

static double meta(const tg_st_file *f, const char *k)
{
    const char *v = tg_st_meta_get(f, k);
    cr_assert(v != NULL, "metadata %s", k);
    return strtod(v, NULL);
}

static bool meta_flag(const tg_st_file *f, const char *k) { return meta(f, k) != 0; }

/* The metadata k as a number, or dflt when absent. */
static double meta_or(const tg_st_file *f, const char *k, double dflt)
{
    const char *v = tg_st_meta_get(f, k);
    return v ? strtod(v, NULL) : dflt;
}

/* A golden file of two param groups: parameter 1's group has the options
 * "g1.<name>" over the constructor's. */
static bool two_groups(const tg_st_file *f) { return tg_st_meta_get(f, "groups") != NULL; }

static tg_sgd_opts g1_sgd(const tg_st_file *f, tg_sgd_opts s)
{
    s.lr = meta_or(f, "g1.lr", s.lr);
    s.momentum = meta_or(f, "g1.momentum", s.momentum);
    s.dampening = meta_or(f, "g1.dampening", s.dampening);
    s.weight_decay = meta_or(f, "g1.weight_decay", s.weight_decay);
    s.nesterov = meta_or(f, "g1.nesterov", s.nesterov) != 0;
    s.maximize = meta_or(f, "g1.maximize", s.maximize) != 0;
    return s;
}

static tg_adam_opts g1_adam(const tg_st_file *f, tg_adam_opts a)
{
    a.lr = meta_or(f, "g1.lr", a.lr);
    a.beta1 = meta_or(f, "g1.beta1", a.beta1);
    a.beta2 = meta_or(f, "g1.beta2", a.beta2);
    a.eps = meta_or(f, "g1.eps", a.eps);
    a.weight_decay = meta_or(f, "g1.weight_decay", a.weight_decay);
    a.amsgrad = meta_or(f, "g1.amsgrad", a.amsgrad) != 0;
    a.maximize = meta_or(f, "g1.maximize", a.maximize) != 0;
    return a;
}

static tg_rmsprop_opts g1_rmsprop(const tg_st_file *f, tg_rmsprop_opts r)
{
    r.lr = meta_or(f, "g1.lr", r.lr);
    r.alpha = meta_or(f, "g1.alpha", r.alpha);
    r.eps = meta_or(f, "g1.eps", r.eps);
    r.weight_decay = meta_or(f, "g1.weight_decay", r.weight_decay);
    r.momentum = meta_or(f, "g1.momentum", r.momentum);
    r.centered = meta_or(f, "g1.centered", r.centered) != 0;
    r.maximize = meta_or(f, "g1.maximize", r.maximize) != 0;
    return r;
}

/* An optimizer configured from the golden file's metadata: over both
 * parameters, or over parameter 0 with parameter 1 in a second param group. */
static tg_optimizer *make_opt(const tg_st_file *f, tg_tensor **params)
{
    tg_optimizer *o = NULL;
    const char *kind = tg_st_meta_get(f, "kind");
    const int n = two_groups(f) ? 1 : NP;
    int rc;
    if (strcmp(kind, "sgd") == 0) {
        tg_sgd_opts s = {.lr = meta(f, "lr"), .momentum = meta(f, "momentum"),
                         .dampening = meta(f, "dampening"), .weight_decay = meta(f, "weight_decay"),
                         .nesterov = meta_flag(f, "nesterov"),
                         .maximize = meta_flag(f, "maximize")};
        rc = tg_sgd_new(&o, n, params, &s);
        s = g1_sgd(f, s);
        if (rc == TG_OK && n == 1) rc = tg_sgd_add_param_group(o, 1, &params[1], &s);
    } else if (strcmp(kind, "rmsprop") == 0) {
        tg_rmsprop_opts r = {.lr = meta(f, "lr"), .alpha = meta(f, "alpha"),
                             .eps = meta(f, "eps"), .weight_decay = meta(f, "weight_decay"),
                             .momentum = meta(f, "momentum"),
                             .centered = meta_flag(f, "centered"),
                             .maximize = meta_flag(f, "maximize")};
        rc = tg_rmsprop_new(&o, n, params, &r);
        r = g1_rmsprop(f, r);
        if (rc == TG_OK && n == 1) rc = tg_rmsprop_add_param_group(o, 1, &params[1], &r);
    } else {
        tg_adam_opts a = {.lr = meta(f, "lr"), .beta1 = meta(f, "beta1"), .beta2 = meta(f, "beta2"),
                          .eps = meta(f, "eps"), .weight_decay = meta(f, "weight_decay"),
                          .amsgrad = meta_flag(f, "amsgrad"), .maximize = meta_flag(f, "maximize")};
        rc = strcmp(kind, "adam") == 0 ? tg_adam_new(&o, n, params, &a)
                                       : tg_adamw_new(&o, n, params, &a);
        a = g1_adam(f, a);
        if (rc == TG_OK && n == 1) rc = tg_adam_add_param_group(o, 1, &params[1], &a);
    }
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_optimizer_param_group_count(o), 1 + (n == 1)));
    return o;
}

/* An optimizer of the golden file's kind with every hyperparameter
 * different from the file's (SGD without momentum, amsgrad and maximize
 * flipped, ...), but amsgrad (RMSprop: centered and whether momentum > 0)
 * as the file's unless flip_amsgrad. */
static tg_optimizer *make_other_opt(const tg_st_file *f, tg_tensor **params, bool flip_amsgrad)
{
    tg_optimizer *o = NULL;
    const char *kind = tg_st_meta_get(f, "kind");
    const int n = two_groups(f) ? 1 : NP;
    int rc;
    if (strcmp(kind, "sgd") == 0) {
        tg_sgd_opts s = {.lr = 3 * meta(f, "lr") + 0.01, .momentum = 0.0, .dampening = 0.0,
                         .weight_decay = meta(f, "weight_decay") + 0.5, .nesterov = false,
                         .maximize = !meta_flag(f, "maximize")};
        rc = tg_sgd_new(&o, n, params, &s);
        if (rc == TG_OK && n == 1) rc = tg_sgd_add_param_group(o, 1, &params[1], &s);
    } else if (strcmp(kind, "rmsprop") == 0) {
        for (int g = 0; g < 3 - n; g++) {   /* group 0, then group 1 when there are two */
            const double mom = g ? meta_or(f, "g1.momentum", meta(f, "momentum"))
                                 : meta(f, "momentum");
            const bool centered = g ? meta_or(f, "g1.centered", meta_flag(f, "centered")) != 0
                                    : meta_flag(f, "centered");
            tg_rmsprop_opts r = {.lr = 2 * meta(f, "lr"), .alpha = 0.5, .eps = 1e-3,
                                 .weight_decay = meta(f, "weight_decay") + 0.3,
                                 .momentum = (mom > 0) != flip_amsgrad ? mom + 0.05 : 0.0,
                                 .centered = centered != flip_amsgrad,
                                 .maximize = !meta_flag(f, "maximize")};
            rc = g ? tg_rmsprop_add_param_group(o, 1, &params[1], &r)
                   : tg_rmsprop_new(&o, n, params, &r);
            if (rc != TG_OK) break;
        }
    } else {
        tg_adam_opts a = {.lr = 2 * meta(f, "lr"), .beta1 = 0.5, .beta2 = 0.9, .eps = 1e-3,
                          .weight_decay = meta(f, "weight_decay") + 0.3,
                          .amsgrad = meta_flag(f, "amsgrad") != flip_amsgrad,
                          .maximize = !meta_flag(f, "maximize")};
        rc = strcmp(kind, "adam") == 0 ? tg_adam_new(&o, n, params, &a)
                                       : tg_adamw_new(&o, n, params, &a);
        a.amsgrad = meta_or(f, "g1.amsgrad", meta_flag(f, "amsgrad")) != flip_amsgrad;
        if (rc == TG_OK && n == 1) rc = tg_adam_add_param_group(o, 1, &params[1], &a);
    }
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    return o;
}

static tg_tensor *get(const tg_st_file *f, const char *fmt, int a, int b)
{
    char k[64];
    snprintf(k, sizeof k, fmt, a, b);
    return tg_st_get(f, k);
}

static void init_params(const tg_st_file *f, tg_tensor **params)
{
    for (int j = 0; j < NP; j++) {
        params[j] = NULL;
        cr_assert(eq(int, tg_tensor_clone(&params[j], get(f, "p%d.init", j, 0)), TG_OK));
        tg_tensor_set_requires_grad(params[j], true);
    }
}

/* Sets the golden gradients of step k (none where the file has none). */
static void set_grads(const tg_st_file *f, tg_tensor **params, int k)
{
    for (int j = 0; j < NP; j++) {
        tg_tensor *g = get(f, "g%d.p%d", k, j), *c = NULL;
        if (g) cr_assert(eq(int, tg_tensor_clone(&c, g), TG_OK));
        tg_tensor_set_grad(params[j], c);
    }
}

/* The optimizer of f's configuration over params p, made from f's initial
 * values and stepped with f's gradients of steps 0 and 1. */
static tg_optimizer *stepped_twice(const tg_st_file *f, tg_tensor **p)
{
    init_params(f, p);
    tg_optimizer *o = make_opt(f, p);
    for (int k = 0; k < 2; k++) {
        set_grads(f, p, k);
        cr_assert(eq(int, tg_optimizer_step(o), TG_OK));
    }
    return o;
}

static void assert_params(const tg_st_file *f, tg_tensor **params, int k, double tol,
                          const char *what)
{
    for (int j = 0; j < NP; j++) {
        const tg_tensor *want = get(f, "p%d.step%d", j, k);
        int64_t n = tg_tensor_numel(want);
        for (int64_t i = 0; i < n; i++) {
            double g, w;
            tg_tensor_get_flat(params[j], i, &g);
            tg_tensor_get_flat(want, i, &w);
            cr_assert(epsilon_eq(dbl, g, w, tol), "%s: p%d[%lld] after step %d: %.17g vs %.17g",
                      what, j, (long long)i, k, g, w);
        }
    }
}

static void free_params(tg_tensor **params)
{
    for (int j = 0; j < NP; j++) tg_tensor_release(params[j]);
}

static tg_st_file *snapshot(const tg_optimizer *o);

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
        for (int k = 0; k < 5; k++) {
            set_grads(f, params, k);
            cr_assert(eq(int, tg_optimizer_step(o), TG_OK), "%s", tg_error_message());
            assert_params(f, params, k, tols[d], config);
        }
        assert_state(f, o, tols[d], config);
        cr_assert(eq(i64, tg_optimizer_steps(o), 5));
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
    for (int k = 0; k < 5; k++) {
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
    for (int k = 3; k < 5; k++) {
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

Test(optim, state_save_load_resumes_bit_identically)
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
}

Test(optim, state_load_restores_the_hyperparameters)
{
    const char *configs[] = {"sgd_momentum", "sgd_nesterov_maximize", "sgd_wd", "sgd_maximize",
                             "adam_wd", "adam_amsgrad", "adam_maximize", "adamw",
                             "adamw_amsgrad_maximize", "adamw_groups", "sgd_groups",
                             "adam_groups", "rmsprop_wd", "rmsprop_momentum", "rmsprop_centered",
                             "rmsprop_centered_momentum_maximize", "rmsprop_groups"};
    for (size_t i = 0; i < sizeof configs / sizeof *configs; i++) check_resume(configs[i], true);
}

/* Two snapshots of an optimizer's state hold the same entries, bit for bit. */
static void assert_same_state(const tg_st_file *x, const tg_st_file *y)
{
    cr_assert(eq(int, tg_st_count(x), tg_st_count(y)));
    for (int e = 0; e < tg_st_count(x); e++) {
        const char *name;
        tg_tensor *t;
        tg_st_at(x, e, &name, &t);
        tg_tensor *u = tg_st_get(y, name);
        cr_assert(u != NULL, "%s", name);
        assert_bits_equal(t, u, name);
    }
}

static tg_st_file *snapshot(const tg_optimizer *o)
{
    tg_st_file *s = NULL;
    tg_st_new(&s);
    cr_assert(eq(int, tg_optimizer_state_save(o, s, "o"), TG_OK));
    return s;
}

/* A copy of src (entries and the kind) without the entry named skip. */
static tg_st_file *copy_without(const tg_st_file *src, const char *skip)
{
    tg_st_file *d = NULL;
    tg_st_new(&d);
    for (int e = 0; e < tg_st_count(src); e++) {
        const char *name;
        tg_tensor *t;
        tg_st_at(src, e, &name, &t);
        if (strcmp(name, skip) != 0) tg_st_set(d, name, t);
    }
    tg_st_meta_set(d, "o.kind", tg_st_meta_get(src, "o.kind"));
    return d;
}

Test(optim, bad_state_files_leave_the_optimizer_unchanged)
{
    tg_st_file *f = th_golden_load("optim/adam_f32.safetensors");
    tg_tensor *p[NP];
    tg_optimizer *o = stepped_twice(f, p);
    tg_st_file *before = snapshot(o);

    /* A state whose exp_avg of parameter 1 has shape (6) instead of (5). */
    tg_st_file *bad = copy_without(before, "o.1.exp_avg");
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
    bad = copy_without(before, "o.0.exp_avg_sq");
    cr_assert(eq(int, tg_optimizer_state_load(o, bad, "o"), TG_ENOTFOUND));
    cr_assert(strstr(tg_error_message(), "o.0.exp_avg_sq") != NULL, "%s", tg_error_message());
    tg_st_meta_set(bad, "o.kind", "sgd");
    cr_assert(eq(int, tg_optimizer_state_load(o, bad, "o"), TG_EINVAL));
    tg_st_free(bad);
    bad = copy_without(before, "");
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
        bad = copy_without(before, nonsense[i].key);
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
    assert_same_state(before, after);
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
    tg_st_file *d = copy_without(src, key);
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
    assert_same_state(before, after);
    tg_st_free(after);
}

/* Hyperparameters out of their ranges, of the wrong size or not flags are
 * refused with TG_EINVAL (TG_ESHAPE) naming the key; a file whose amsgrad
 * lacks a parameter's maximum is TG_ENOTFOUND naming it.  Nothing changes. */
Test(optim, bad_hyperparameters_in_a_state_file_change_nothing)
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
            bad = copy_without(before, "o.1.square_avg");
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
Test(optim, a_state_without_hyperparameters_keeps_the_optimizers_own)
{
    tg_st_file *f = th_golden_load("optim/adam_wd_f32.safetensors");
    tg_tensor *p[NP], *q[NP];
    tg_optimizer *o = stepped_twice(f, p);
    init_params(f, q);
    tg_st_file *full = snapshot(o), *old = copy_without(full, "o.betas");
    const char *hp[] = {"o.eps", "o.weight_decay", "o.amsgrad", "o.maximize"};
    for (int i = 0; i < 4; i++) {
        tg_st_file *t = copy_without(old, hp[i]);
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
Test(optim, state_carries_a_schedulers_initial_lr)
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

/* ---- param groups ---------------------------------------------------------------- */

/* call fails with status and a message holding words. */
#define REFUSED(call, status, words)                                                      \
    do {                                                                                  \
        cr_assert(eq(int, (call), (status)), "%s", #call);                                \
        cr_assert(strstr(tg_error_message(), (words)) != NULL, "%s: %s", #call,           \
                  tg_error_message());                                                    \
    } while (0)

/* Adding a group is refused, with nothing changed, for a NULL optimizer,
 * the other family's call, a parameter already in a group or given twice,
 * no parameters, a non-float or non-leaf one, and bad options; NULL opts
 * take the constructor's. */
Test(optim, add_param_group_refuses_bad_groups_and_changes_nothing)
{
    tg_tensor *p[4] = {NULL}, *iq = NULL, *nl = NULL;
    for (int j = 0; j < 4; j++) {
        tg_tensor_zeros(&p[j], TG_F32, 1, (int64_t[]){3});
        tg_tensor_set_requires_grad(p[j], true);
    }
    tg_tensor_zeros(&iq, TG_I32, 1, (int64_t[]){3});
    tg_mul_scalar(&nl, p[3], 2.0);
    tg_optimizer *o = NULL, *s = NULL;
    tg_adam_opts a = TG_ADAMW_OPTS_INIT;
    a.lr = 0.25;
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    cr_assert(eq(int, tg_adamw_new(&o, 2, p, &a), TG_OK));
    cr_assert(eq(int, tg_sgd_new(&s, 1, &p[3], &so), TG_OK));
    tg_adam_opts bad = a;
    bad.beta1 = 2;
    tg_sgd_opts bad_sgd = so;
    bad_sgd.nesterov = true;
    REFUSED(tg_adam_add_param_group(NULL, 1, &p[2], &a), TG_EINVAL,
            "adam_add_param_group: opt must not be NULL");
    REFUSED(tg_sgd_add_param_group(o, 1, &p[2], &so), TG_EINVAL,
            "sgd_add_param_group: opt is 'adamw'");
    REFUSED(tg_adam_add_param_group(s, 1, &p[2], &a), TG_EINVAL,
            "adam_add_param_group: opt is 'sgd'");
    REFUSED(tg_adam_add_param_group(o, 1, &p[0], &a), TG_EINVAL,
            "params[0] is already in param group 0 (each parameter in one group)");
    REFUSED(tg_adam_add_param_group(o, 2, (tg_tensor *[]){p[2], p[2]}, &a), TG_EINVAL,
            "params[1] is params[0] again");
    REFUSED(tg_adam_add_param_group(o, 0, &p[2], &a), TG_EINVAL, "n_params=0 must be >= 1");
    REFUSED(tg_adam_add_param_group(o, 1, NULL, &a), TG_EINVAL, "params must not be NULL");
    REFUSED(tg_adam_add_param_group(o, 1, &iq, &a), TG_EDTYPE,
            "params[0] has dtype i32; float dtypes only");
    REFUSED(tg_adam_add_param_group(o, 1, &nl, &a), TG_EINVAL, "params[0] is not a leaf");
    REFUSED(tg_adam_add_param_group(o, 1, &p[2], &bad), TG_EINVAL,
            "adam_add_param_group: beta1=2 must be in [0, 1)");
    REFUSED(tg_sgd_add_param_group(s, 1, &p[2], &bad_sgd), TG_EINVAL,
            "sgd_add_param_group: nesterov requires momentum > 0");
    cr_assert(eq(int, tg_optimizer_param_group_count(o), 1));
    cr_assert(eq(int, tg_optimizer_param_group_count(s), 1));
    cr_assert(eq(int, tg_tensor_refcount(p[2]), 1), "nothing retained");
    /* NULL options: the constructor's, lr 0.25 */
    cr_assert(eq(int, tg_adam_add_param_group(o, 1, &p[2], NULL), TG_OK), "%s",
              tg_error_message());
    cr_assert(eq(int, tg_optimizer_param_group_count(o), 2));
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(o, 1), 0.25));
    cr_assert(eq(int, tg_tensor_refcount(p[2]), 2));
    tg_optimizer_free(o);
    tg_optimizer_free(s);
    cr_assert(eq(int, tg_tensor_refcount(p[2]), 1));
    tg_tensor_release(iq);
    tg_tensor_release(nl);
    th_release_all(4, p);
}

/* Each group's lr is its own; tg_optimizer_set_lr sets every group's and
 * tg_optimizer_get_lr reads group 0's.  A group out of range is refused. */
Test(optim, group_learning_rates)
{
    tg_tensor *p[3] = {NULL};
    for (int j = 0; j < 3; j++) tg_tensor_zeros(&p[j], TG_F64, 1, (int64_t[]){2});
    tg_optimizer *o = NULL;
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.lr = 0.1;
    cr_assert(eq(int, tg_sgd_new(&o, 1, &p[0], &so), TG_OK));
    so.lr = 0.2;
    cr_assert(eq(int, tg_sgd_add_param_group(o, 1, &p[1], &so), TG_OK));
    so.lr = 0.3;
    cr_assert(eq(int, tg_sgd_add_param_group(o, 1, &p[2], &so), TG_OK));
    cr_assert(eq(int, tg_optimizer_param_group_count(o), 3));
    const double lrs[3] = {0.1, 0.2, 0.3};
    for (int g = 0; g < 3; g++) cr_assert(eq(dbl, tg_optimizer_get_group_lr(o, g), lrs[g]));
    cr_assert(eq(int, tg_optimizer_set_group_lr(o, 2, 0.05), TG_OK));
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(o, 2), 0.05));
    cr_assert(eq(dbl, tg_optimizer_get_lr(o), 0.1));
    cr_assert(eq(int, tg_optimizer_set_group_lr(o, 3, 0.05), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "group=3 must be in [0, 3)") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(int, tg_optimizer_set_group_lr(o, -1, 0.05), TG_EINVAL));
    cr_assert(eq(int, tg_optimizer_set_group_lr(o, 1, NAN), TG_EINVAL));
    cr_assert(eq(int, tg_optimizer_set_group_lr(NULL, 0, 0.1), TG_EINVAL));
    cr_assert(isnan(tg_optimizer_get_group_lr(o, 3)));
    cr_assert(isnan(tg_optimizer_get_group_lr(NULL, 0)));
    cr_assert(eq(int, tg_optimizer_param_group_count(NULL), 0));
    cr_assert(eq(int, tg_optimizer_set_lr(o, 0.5), TG_OK));
    for (int g = 0; g < 3; g++) cr_assert(eq(dbl, tg_optimizer_get_group_lr(o, g), 0.5));
    tg_optimizer_free(o);
    th_release_all(3, p);
}

/* A state of other param groups (another count, other sizes) or with
 * hyperparameters that are not one per group is refused naming the key;
 * a bad value names its group.  Nothing changes. */
Test(optim, state_of_other_param_groups_is_refused)
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
    tg_st_file *b = copy_without(before, "o.betas");
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
    b = copy_without(before, "o.param_groups");
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
    assert_same_state(before, after);
    tg_st_free(after);
    tg_optimizer_free(one);
    tg_optimizer_free(o);
    tg_st_free(before);
    free_params(q);
    free_params(p);
    tg_st_free(f);
}

/* ---- construction and step errors -------------------------------------------- */

Test(optim, bad_options_are_rejected)
{
    tg_tensor *p = NULL, *q = NULL, *iq = NULL, *nl = NULL;
    tg_tensor_zeros(&p, TG_F32, 1, (int64_t[]){3});
    tg_tensor_zeros(&q, TG_F32, 1, (int64_t[]){3});
    tg_tensor_zeros(&iq, TG_I32, 1, (int64_t[]){3});
    tg_tensor_set_requires_grad(q, true);
    tg_mul_scalar(&nl, q, 2.0);   /* not a leaf */
    tg_optimizer *o = NULL;
    tg_sgd_opts s = TG_SGD_OPTS_INIT;
    s.lr = -0.1;
    cr_assert(eq(int, tg_sgd_new(&o, 1, &p, &s), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "lr=-0.1") != NULL, "%s", tg_error_message());
    s.lr = INFINITY;   /* would make every weight NaN at the first step */
    cr_assert(eq(int, tg_sgd_new(&o, 1, &p, &s), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "lr=inf must be finite") != NULL, "%s", tg_error_message());
    s.lr = 0.1;
    s.nesterov = true;
    cr_assert(eq(int, tg_sgd_new(&o, 1, &p, &s), TG_EINVAL));   /* momentum 0 */
    s.momentum = 0.9;
    s.dampening = 0.1;
    cr_assert(eq(int, tg_sgd_new(&o, 1, &p, &s), TG_EINVAL));   /* dampening != 0 */
    s = (tg_sgd_opts)TG_SGD_OPTS_INIT;
    s.momentum = -1;
    cr_assert(eq(int, tg_sgd_new(&o, 1, &p, &s), TG_EINVAL));
    s.momentum = 0;
    s.weight_decay = NAN;
    cr_assert(eq(int, tg_sgd_new(&o, 1, &p, &s), TG_EINVAL));

    tg_adam_opts a = TG_ADAM_OPTS_INIT;
    double bad_betas[4][2] = {{1.0, 0.999}, {-0.1, 0.999}, {0.9, 1.0}, {0.9, -1e-3}};
    for (int i = 0; i < 4; i++) {
        a.beta1 = bad_betas[i][0];
        a.beta2 = bad_betas[i][1];
        cr_assert(eq(int, tg_adam_new(&o, 1, &p, &a), TG_EINVAL), "betas %d", i);
        cr_assert(eq(int, tg_adamw_new(&o, 1, &p, &a), TG_EINVAL), "betas %d", i);
    }
    a = (tg_adam_opts)TG_ADAM_OPTS_INIT;
    a.lr = -1;
    cr_assert(eq(int, tg_adam_new(&o, 1, &p, &a), TG_EINVAL));
    a.lr = INFINITY;
    cr_assert(eq(int, tg_adamw_new(&o, 1, &p, &a), TG_EINVAL));
    a.lr = 1e-3;
    a.eps = -1;
    cr_assert(eq(int, tg_adamw_new(&o, 1, &p, &a), TG_EINVAL));
    a.eps = 1e-8;
    cr_assert(eq(int, tg_adam_new(&o, 1, &p, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_adam_new(&o, 0, &p, &a), TG_EINVAL));
    cr_assert(eq(int, tg_adam_new(&o, 2, (tg_tensor *[]){p, p}, &a), TG_EINVAL));
    cr_assert(eq(int, tg_adam_new(&o, 2, (tg_tensor *[]){p, NULL}, &a), TG_EINVAL));
    cr_assert(eq(int, tg_adam_new(&o, 1, &iq, &a), TG_EDTYPE));
    cr_assert(eq(int, tg_adam_new(&o, 1, &nl, &a), TG_EINVAL));
    cr_assert(eq(int, tg_adam_new(NULL, 1, &p, &a), TG_EINVAL));
    cr_assert(o == NULL);
    cr_assert(eq(int, tg_tensor_refcount(p), 1));   /* nothing retained */
    tg_tensor_release(nl);
    tg_tensor_release(iq);
    tg_tensor_release(q);
    tg_tensor_release(p);
}

/* RMSprop refuses what torch's constructor refuses (lr, eps, momentum,
 * weight_decay, alpha < 0; NaN too) and, as tapegrad's others, an infinite
 * lr and NULL options, naming the option; alpha > 1, which torch accepts,
 * is accepted.  A group is added to RMSprop only by its own call, and NULL
 * options are the constructor's.  From a module: its parameters. */
Test(optim, rmsprop_options_groups_and_modules)
{
    tg_tensor *p = NULL, *q = NULL;
    tg_tensor_zeros(&p, TG_F32, 1, (int64_t[]){3});
    tg_tensor_zeros(&q, TG_F32, 1, (int64_t[]){3});
    tg_optimizer *o = NULL, *s = NULL;
    const char *words[] = {"rmsprop: lr=-0.1 must be finite and >= 0",
                           "rmsprop: lr=inf must be finite and >= 0",
                           "rmsprop: alpha=-0.5 must be >= 0", "rmsprop: alpha=nan must be >= 0",
                           "rmsprop: eps=-1e-08 must be >= 0",
                           "rmsprop: momentum=-0.9 must be >= 0",
                           "rmsprop: weight_decay=-0.01 must be >= 0"};
    for (int c = 0; c < 7; c++) {
        tg_rmsprop_opts r = TG_RMSPROP_OPTS_INIT;
        if (c < 2) r.lr = c ? INFINITY : -0.1;
        else if (c < 4) r.alpha = c == 2 ? -0.5 : NAN;
        else if (c == 4) r.eps = -1e-8;
        else if (c == 5) r.momentum = -0.9;
        else r.weight_decay = -0.01;
        REFUSED(tg_rmsprop_new(&o, 1, &p, &r), TG_EINVAL, words[c]);
    }
    REFUSED(tg_rmsprop_new(&o, 1, &p, NULL), TG_EINVAL, "use TG_RMSPROP_OPTS_INIT");
    cr_assert(o == NULL);
    tg_rmsprop_opts r = TG_RMSPROP_OPTS_INIT;
    cr_assert(eq(dbl, r.lr, 1e-2));
    cr_assert(eq(dbl, r.alpha, 0.99));
    cr_assert(eq(dbl, r.eps, 1e-8));
    r.alpha = 1.5;
    cr_assert(eq(int, tg_rmsprop_new(&o, 1, &p, &r), TG_OK), "%s", tg_error_message());
    tg_optimizer_free(o);
    r = (tg_rmsprop_opts)TG_RMSPROP_OPTS_INIT;
    r.lr = 0.3;
    cr_assert(eq(int, tg_rmsprop_new(&o, 1, &p, &r), TG_OK));
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    tg_adam_opts ao = TG_ADAM_OPTS_INIT;
    cr_assert(eq(int, tg_sgd_new(&s, 1, &q, &so), TG_OK));
    REFUSED(tg_rmsprop_add_param_group(s, 1, &p, &r), TG_EINVAL,
            "rmsprop_add_param_group: opt is 'sgd'; tg_rmsprop_add_param_group adds to RMSprop "
            "(tg_sgd_add_param_group to an SGD)");
    REFUSED(tg_adam_add_param_group(o, 1, &q, &ao), TG_EINVAL,
            "adam_add_param_group: opt is 'rmsprop'");
    REFUSED(tg_sgd_add_param_group(o, 1, &q, &so), TG_EINVAL, "sgd_add_param_group: opt is "
                                                               "'rmsprop'");
    REFUSED(tg_rmsprop_add_param_group(NULL, 1, &q, &r), TG_EINVAL, "opt must not be NULL");
    r.alpha = -1;
    REFUSED(tg_rmsprop_add_param_group(o, 1, &q, &r), TG_EINVAL,
            "rmsprop_add_param_group: alpha=-1 must be >= 0");
    REFUSED(tg_rmsprop_add_param_group(o, 1, &p, NULL), TG_EINVAL,
            "params[0] is already in param group 0");
    cr_assert(eq(int, tg_optimizer_param_group_count(o), 1));
    cr_assert(eq(int, tg_rmsprop_add_param_group(o, 1, &q, NULL), TG_OK), "%s",
              tg_error_message());
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(o, 1), 0.3));
    tg_optimizer_free(o);
    tg_optimizer_free(s);

    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_linear_new(&m, 3, 2, true, &rng), TG_OK));
    r = (tg_rmsprop_opts)TG_RMSPROP_OPTS_INIT;
    cr_assert(eq(int, tg_rmsprop_from_module(&o, m, &r), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_refcount(tg_module_find(m, "weight")), 2));
    tg_optimizer_free(o);
    REFUSED(tg_rmsprop_from_module(&o, NULL, &r), TG_EINVAL, "rmsprop_from_module");
    tg_module_release(m);
    cr_assert(eq(int, tg_tensor_refcount(p), 1));
    tg_tensor_release(p);
    tg_tensor_release(q);
}

/* A gradient of the wrong shape cannot be set (tg_tensor_set_grad refuses
 * it, as PyTorch's assignment does); a step skips parameters without one. */
Test(optim, wrong_shaped_grads_are_refused_and_step_skips_null_grads)
{
    tg_tensor *p[3] = {NULL, NULL, NULL}, *g0 = NULL, *g1 = NULL;
    for (int j = 0; j < 3; j++) {
        tg_tensor_full(&p[j], TG_F64, 1, (int64_t[]){4}, 1.0);
        tg_tensor_set_requires_grad(p[j], true);
    }
    tg_tensor_full(&g0, TG_F64, 1, (int64_t[]){4}, 2.0);
    tg_tensor_full(&g1, TG_F64, 1, (int64_t[]){5}, 2.0);
    cr_assert(eq(int, tg_tensor_set_grad(p[0], g0), TG_OK));
    cr_assert(eq(int, tg_tensor_set_grad(p[1], g1), TG_ESHAPE));   /* g1 is released */
    cr_assert(strstr(tg_error_message(), "grad has shape (5) but the tensor (4)") != NULL, "%s",
              tg_error_message());
    cr_assert(tg_tensor_grad(p[1]) == NULL);
    tg_tensor *gi = NULL;
    tg_tensor_full(&gi, TG_F32, 1, (int64_t[]){4}, 2.0);
    cr_assert(eq(int, tg_tensor_set_grad(p[1], gi), TG_EDTYPE));   /* f32 grad of an f64 tensor */
    cr_assert(tg_tensor_grad(p[1]) == NULL);
    tg_optimizer *o = NULL;
    tg_sgd_opts s = TG_SGD_OPTS_INIT;
    s.lr = 0.25;
    s.momentum = 0.5;
    cr_assert(eq(int, tg_sgd_new(&o, 3, p, &s), TG_OK));
    uint64_t v0 = tg_tensor_version(p[0]), v1 = tg_tensor_version(p[1]),
             v2 = tg_tensor_version(p[2]);
    double x;

    /* p[0] moves by lr * g (first momentum step uses the gradient itself);
     * p[1] and p[2] (no gradient) are untouched. */
    cr_assert(eq(int, tg_optimizer_step(o), TG_OK));
    for (int i = 0; i < 4; i++) {
        tg_tensor_get_flat(p[0], i, &x);
        cr_assert(eq(dbl, x, 1.0 - 0.25 * 2.0));
        tg_tensor_get_flat(p[2], i, &x);
        cr_assert(eq(dbl, x, 1.0));
    }
    cr_assert(tg_tensor_version(p[0]) > v0);
    cr_assert(eq(u64, tg_tensor_version(p[1]), v1));
    cr_assert(eq(u64, tg_tensor_version(p[2]), v2));
    tg_optimizer_zero_grad(o);
    cr_assert(tg_tensor_grad(p[0]) == NULL);
    cr_assert(eq(int, tg_optimizer_step(NULL), TG_EINVAL));
    tg_optimizer_free(o);
    for (int j = 0; j < 3; j++) tg_tensor_release(p[j]);
}

/* ---- zero_grad ------------------------------------------------------------- */

static void expect_all(const tg_tensor *t, double v, const char *what)
{
    for (int64_t i = 0; i < tg_tensor_numel(t); i++)
        cr_assert(eq(dbl, th_at(t, i), v), "%s[%lld] = %g, want %g", what, (long long)i,
                  th_at(t, i), v);
}

/* The gradients of sum(2 p0 + 3 p1 + p2): 2, 3 and 1. */
static void linear_backward(tg_tensor **p)
{
    tg_tensor *a = NULL, *b = NULL, *s1 = NULL, *s2 = NULL, *l = NULL;
    cr_assert(eq(int, tg_mul_scalar(&a, p[0], 2.0), TG_OK));
    cr_assert(eq(int, tg_mul_scalar(&b, p[1], 3.0), TG_OK));
    cr_assert(eq(int, tg_add(&s1, a, b), TG_OK));
    cr_assert(eq(int, tg_add(&s2, s1, p[2]), TG_OK));
    cr_assert(eq(int, tg_sum(&l, s2), TG_OK));
    cr_assert(eq(int, tg_backward(l, NULL, NULL), TG_OK), "%s", tg_error_message());
    tg_tensor *all[] = {a, b, s1, s2, l};
    th_release_all(5, all);
}

/* The gradient of sum(5 q * q), 10 q: with create_graph a recorded result. */
static void square_backward(tg_tensor *q, bool create_graph)
{
    tg_tensor *c = NULL, *d = NULL, *l = NULL;
    cr_assert(eq(int, tg_mul(&c, q, q), TG_OK));
    cr_assert(eq(int, tg_mul_scalar(&d, c, 5.0), TG_OK));
    cr_assert(eq(int, tg_sum(&l, d), TG_OK));
    tg_backward_opts bo = TG_BACKWARD_OPTS_INIT;
    bo.create_graph = create_graph;
    cr_assert(eq(int, tg_backward(l, NULL, &bo), TG_OK), "%s", tg_error_message());
    tg_tensor *all[] = {c, d, l};
    th_release_all(3, all);
}

/* zero_grad(set_to_none=False): the .grad each parameter owns is zeroed in
 * place (the same tensor, a higher version), and the next backward adds
 * into it again; a .grad the caller retained and one that a view shares
 * are left as they were, and their parameters get new zero tensors, as
 * does one recorded by a create_graph backward (which only its parameter
 * holds); a parameter without a gradient keeps none. */
Test(optim, zero_grad_in_place_zeroes_own_grads_and_replaces_shared_ones)
{
    tg_tensor *p[5];
    for (int j = 0; j < 5; j++) {
        cr_assert(eq(int, tg_tensor_full(&p[j], TG_F32, 1, (int64_t[]){4}, 1.0), TG_OK));
        tg_tensor_set_requires_grad(p[j], true);
    }
    tg_optimizer *o = NULL;
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    cr_assert(eq(int, tg_sgd_new(&o, 5, p, &so), TG_OK));
    linear_backward(p);
    square_backward(p[3], true);
    tg_tensor *own = tg_tensor_grad(p[0]), *recorded = tg_tensor_grad(p[3]);
    tg_tensor *held = tg_tensor_retain(tg_tensor_grad(p[1])), *view = NULL;
    cr_assert(eq(int, tg_slice(&view, tg_tensor_grad(p[2]), 0, 1, 3, 1), TG_OK));
    cr_assert(tg_tensor_is_leaf(recorded) == false && tg_tensor_requires_grad(recorded));
    uint64_t v_own = tg_tensor_version(own);

    cr_assert(eq(int, tg_optimizer_zero_grad_ex(o, false), TG_OK), "%s", tg_error_message());
    cr_assert(tg_tensor_grad(p[0]) == own, "p0's own .grad is zeroed in place");
    cr_assert(tg_tensor_version(own) > v_own);
    expect_all(own, 0.0, "p0.grad");
    cr_assert(tg_tensor_grad(p[1]) != held);
    expect_all(tg_tensor_grad(p[1]), 0.0, "p1.grad");
    expect_all(held, 3.0, "the caller's p1.grad");
    expect_all(tg_tensor_grad(p[2]), 0.0, "p2.grad");
    expect_all(view, 1.0, "the view of p2's old .grad");
    tg_tensor *g3 = tg_tensor_grad(p[3]);
    cr_assert(g3 != recorded);   /* made before the recorded one was released */
    cr_assert(tg_tensor_is_leaf(g3) && tg_tensor_requires_grad(g3) == false);
    expect_all(g3, 0.0, "p3.grad");
    cr_assert(tg_tensor_grad(p[4]) == NULL, "a parameter without a gradient keeps none");

    /* the next backward adds into the zeroed tensors, which held pointers see */
    linear_backward(p);
    square_backward(p[3], false);
    cr_assert(tg_tensor_grad(p[0]) == own);
    expect_all(own, 2.0, "p0.grad after the next backward");
    cr_assert(tg_tensor_grad(p[3]) == g3);
    expect_all(g3, 10.0, "p3.grad after the next backward");

    cr_assert(eq(int, tg_optimizer_zero_grad_ex(o, true), TG_OK));
    for (int j = 0; j < 5; j++) cr_assert(tg_tensor_grad(p[j]) == NULL);
    cr_assert(eq(int, tg_optimizer_zero_grad_ex(NULL, false), TG_EINVAL));
    tg_optimizer_free(o);
    tg_tensor_release(held);
    tg_tensor_release(view);
    th_release_all(5, p);
}

/* A zeroed gradient is a gradient: SGD with momentum 0.9 keeps moving a
 * parameter by its momentum (p -= lr * 0.9 g), where set_to_none makes the
 * step skip it.  Half gradients become +0 bits. */
Test(optim, zero_grad_in_place_steps_by_momentum_and_zeroes_half_grads)
{
    for (int none = 0; none < 2; none++) {
        tg_tensor *p = NULL, *g = NULL;
        tg_tensor_full(&p, TG_F64, 1, (int64_t[]){3}, 1.0);
        tg_tensor_set_requires_grad(p, true);
        tg_tensor_full(&g, TG_F64, 1, (int64_t[]){3}, 0.5);
        tg_tensor_set_grad(p, g);
        tg_optimizer *o = NULL;
        tg_sgd_opts so = TG_SGD_OPTS_INIT;
        so.lr = 0.1, so.momentum = 0.9;
        cr_assert(eq(int, tg_sgd_new(&o, 1, &p, &so), TG_OK));
        cr_assert(eq(int, tg_optimizer_step(o), TG_OK));
        cr_assert(eq(int, tg_optimizer_zero_grad_ex(o, none), TG_OK));
        cr_assert(eq(int, tg_optimizer_step(o), TG_OK));
        const double want = none ? 1.0 - 0.1 * 0.5 : 1.0 - 0.1 * 0.5 - 0.1 * (0.9 * 0.5);
        expect_all(p, want, none ? "p (set_to_none)" : "p (zeroed)");
        tg_optimizer_free(o);
        tg_tensor_release(p);
    }
    const tg_dtype halves[2] = {TG_F16, TG_BF16};
    for (int h = 0; h < 2; h++) {
        tg_tensor *p = NULL, *g = NULL;
        tg_tensor_full(&p, halves[h], 1, (int64_t[]){5}, 1.0);
        tg_tensor_set_requires_grad(p, true);
        tg_tensor_full(&g, halves[h], 1, (int64_t[]){5}, -0.75);
        tg_tensor_set_grad(p, g);
        tg_optimizer *o = NULL;
        tg_sgd_opts so = TG_SGD_OPTS_INIT;
        cr_assert(eq(int, tg_sgd_new(&o, 1, &p, &so), TG_OK));
        cr_assert(eq(int, tg_optimizer_zero_grad_ex(o, false), TG_OK));
        cr_assert(tg_tensor_grad(p) == g);
        const uint16_t *bits = tg_tensor_cdata(g);
        for (int i = 0; i < 5; i++) cr_assert(eq(u16, bits[i], 0), "%s", tg_dtype_name(halves[h]));
        tg_optimizer_free(o);
        tg_tensor_release(p);
    }
}

Test(optim, set_lr_and_get_lr)
{
    tg_tensor *p = NULL;
    tg_tensor_zeros(&p, TG_F32, 1, (int64_t[]){2});
    tg_optimizer *o = NULL;
    tg_adam_opts a = TG_ADAMW_OPTS_INIT;
    cr_assert(eq(int, tg_adamw_new(&o, 1, &p, &a), TG_OK));
    cr_assert(eq(dbl, tg_optimizer_get_lr(o), 1e-3));
    cr_assert(eq(int, tg_optimizer_set_lr(o, 0.25), TG_OK));
    cr_assert(eq(dbl, tg_optimizer_get_lr(o), 0.25));
    cr_assert(eq(int, tg_optimizer_set_lr(o, -1.0), TG_EINVAL));
    cr_assert(eq(int, tg_optimizer_set_lr(o, NAN), TG_EINVAL));
    cr_assert(eq(dbl, tg_optimizer_get_lr(o), 0.25));
    tg_optimizer_free(o);
    tg_optimizer_free(NULL);
    tg_tensor_release(p);
}

/* An f16 parameter is updated in f32 and rounded once: p - lr * g computed
 * in float, then converted to f16. */
Test(optim, f16_params_update_through_f32)
{
    float pv[3] = {1.0f, -0.5f, 0.333f}, gv[3] = {0.1f, 0.7f, -3.0f};
    tg_tensor *p32 = NULL, *p = NULL, *g32 = NULL, *g = NULL;
    tg_tensor_from_data(&p32, TG_F32, 1, (int64_t[]){3}, pv);
    tg_tensor_from_data(&g32, TG_F32, 1, (int64_t[]){3}, gv);
    tg_tensor_to_dtype(&p, p32, TG_F16);
    tg_tensor_to_dtype(&g, g32, TG_F16);
    tg_tensor_set_requires_grad(p, true);
    tg_tensor_set_grad(p, g);
    tg_optimizer *o = NULL;
    tg_sgd_opts s = TG_SGD_OPTS_INIT;
    s.lr = 0.01;
    cr_assert(eq(int, tg_sgd_new(&o, 1, &p, &s), TG_OK));
    cr_assert(eq(int, tg_optimizer_step(o), TG_OK));
    const uint16_t *h = tg_tensor_cdata(p);
    for (int i = 0; i < 3; i++) {
        float pi = tg_f16_to_f32(tg_f32_to_f16(pv[i])), gi = tg_f16_to_f32(tg_f32_to_f16(gv[i]));
        float want = pi + (float)-0.01 * gi;
        cr_assert(eq(u16, h[i], tg_f32_to_f16(want)), "element %d", i);
    }
    tg_optimizer_free(o);
    tg_tensor_release(p);
    tg_tensor_release(p32);
    tg_tensor_release(g32);
}

/* f16 and bf16 parameters with amsgrad (RMSprop: centered and momentum),
 * maximize and weight decay: each step's result is the f32 step's rounded
 * once.  An f32 twin takes the same
 * gradients (the half values) and, after each step, the half parameter's
 * rounded values, so that both see the same p in weight decay; their f32
 * state then evolves alike, and the half parameter must equal the twin's
 * result rounded to its dtype, bit for bit, at every step. */
Test(optim, half_params_with_amsgrad_and_maximize_round_the_f32_step_once)
{
    const tg_dtype halves[2] = {TG_BF16, TG_F16};
    const int64_t n = 40;
    for (int h = 0; h < 2; h++)
        for (int kind = 0; kind < 4; kind++) {
            tg_tensor *p16 = NULL, *p32 = NULL;
            tg_tensor *r = th_rand_uniform(TG_F32, 1, &n, 5 + (uint64_t)kind);
            cr_assert(eq(int, tg_tensor_to_dtype(&p16, r, halves[h]), TG_OK));
            cr_assert(eq(int, tg_tensor_to_dtype(&p32, p16, TG_F32), TG_OK));
            tg_tensor_release(r);
            tg_tensor_set_requires_grad(p16, true);
            tg_tensor_set_requires_grad(p32, true);
            tg_optimizer *o16 = NULL, *o32 = NULL;
            tg_adam_opts a = TG_ADAMW_OPTS_INIT;
            a.lr = 0.05, a.beta2 = 0.6, a.weight_decay = 0.1, a.amsgrad = true, a.maximize = true;
            tg_sgd_opts sg = TG_SGD_OPTS_INIT;
            sg.momentum = 0.9, sg.nesterov = true, sg.weight_decay = 0.1, sg.maximize = true;
            tg_rmsprop_opts ro = TG_RMSPROP_OPTS_INIT;
            ro.alpha = 0.8, ro.momentum = 0.5, ro.centered = true, ro.weight_decay = 0.1,
            ro.maximize = true;
            if (kind == 0) {
                cr_assert(eq(int, tg_adam_new(&o16, 1, &p16, &a), TG_OK));
                cr_assert(eq(int, tg_adam_new(&o32, 1, &p32, &a), TG_OK));
            } else if (kind == 1) {
                cr_assert(eq(int, tg_adamw_new(&o16, 1, &p16, &a), TG_OK));
                cr_assert(eq(int, tg_adamw_new(&o32, 1, &p32, &a), TG_OK));
            } else if (kind == 2) {
                cr_assert(eq(int, tg_sgd_new(&o16, 1, &p16, &sg), TG_OK));
                cr_assert(eq(int, tg_sgd_new(&o32, 1, &p32, &sg), TG_OK));
            } else {
                cr_assert(eq(int, tg_rmsprop_new(&o16, 1, &p16, &ro), TG_OK));
                cr_assert(eq(int, tg_rmsprop_new(&o32, 1, &p32, &ro), TG_OK));
            }
            for (int step = 0; step < 4; step++) {
                /* gradients shrinking over the steps, so that v falls */
                tg_tensor *g = th_rand_uniform(TG_F32, 1, &n, 50 + (uint64_t)step), *gs = NULL,
                          *g16 = NULL, *g32 = NULL, *want = NULL;
                cr_assert(eq(int, tg_mul_scalar(&gs, g, pow(0.3, step)), TG_OK));
                cr_assert(eq(int, tg_tensor_to_dtype(&g16, gs, halves[h]), TG_OK));
                cr_assert(eq(int, tg_tensor_to_dtype(&g32, g16, TG_F32), TG_OK));
                tg_tensor_set_grad(p16, g16);
                tg_tensor_set_grad(p32, g32);
                cr_assert(eq(int, tg_optimizer_step(o16), TG_OK), "%s", tg_error_message());
                cr_assert(eq(int, tg_optimizer_step(o32), TG_OK), "%s", tg_error_message());
                cr_assert(eq(int, tg_tensor_to_dtype(&want, p32, halves[h]), TG_OK));
                const char *names[] = {"adam", "adamw", "sgd", "rmsprop"};
                th_expect_same_bits(names[kind], p32, p16, want);
                tg_tensor_release(want);
                /* the twin continues from the half parameter's values */
                float *d = tg_tensor_data(p32);
                for (int64_t i = 0; i < n; i++) d[i] = (float)th_at(p16, i);
                tg_tensor_release(g);
                tg_tensor_release(gs);
            }
            tg_optimizer_free(o16);
            tg_optimizer_free(o32);
            tg_tensor_release(p16);
            tg_tensor_release(p32);
        }
}

/* A contiguous f32 parameter is updated in place (in parallel above 32k
 * elements) from its contiguous gradient; a strided one, with a strided
 * gradient, through contiguous copies: the same bits, over three AdamW and
 * three SGD-with-momentum steps. */
Test(optim, in_place_and_copied_updates_give_the_same_bits)
{
    const int64_t n = 300, sh[2] = {n, n};   /* 90000 elements */
    for (int kind = 0; kind < 2; kind++) {
        tg_tensor *a = th_rand_uniform(TG_F32, 2, sh, 11), *base = NULL, *b = NULL;
        /* b: a's values as the transposed view of a (n, n) tensor, so b is strided */
        cr_assert(eq(int, tg_transpose(&base, a, 0, 1), TG_OK));
        tg_tensor *bc = NULL;
        cr_assert(eq(int, tg_tensor_contiguous(&bc, base), TG_OK));
        cr_assert(eq(int, tg_transpose(&b, bc, 0, 1), TG_OK));   /* values of a, strides (1, n) */
        tg_tensor *leaf_b = NULL;
        cr_assert(eq(int, tg_tensor_detach(&leaf_b, b), TG_OK));
        cr_assert(tg_tensor_is_contiguous(leaf_b) == false);
        tg_tensor_set_requires_grad(a, true);
        tg_tensor_set_requires_grad(leaf_b, true);
        tg_optimizer *oa = NULL, *ob = NULL;
        if (kind == 0) {
            tg_adam_opts o = TG_ADAMW_OPTS_INIT;
            cr_assert(eq(int, tg_adamw_new(&oa, 1, &a, &o), TG_OK));
            cr_assert(eq(int, tg_adamw_new(&ob, 1, &leaf_b, &o), TG_OK));
        } else {
            tg_sgd_opts o = TG_SGD_OPTS_INIT;
            o.lr = 0.1;
            o.momentum = 0.9;
            cr_assert(eq(int, tg_sgd_new(&oa, 1, &a, &o), TG_OK));
            cr_assert(eq(int, tg_sgd_new(&ob, 1, &leaf_b, &o), TG_OK));
        }
        for (int step = 0; step < 3; step++) {
            /* g2: g's values, strided as b is, so b's gradient is gathered too */
            tg_tensor *g = th_rand_uniform(TG_F32, 2, sh, 100 + (uint64_t)step), *gt = NULL,
                      *gtc = NULL, *g2 = NULL;
            cr_assert(eq(int, tg_transpose(&gt, g, 0, 1), TG_OK));
            cr_assert(eq(int, tg_tensor_contiguous(&gtc, gt), TG_OK));
            cr_assert(eq(int, tg_transpose(&g2, gtc, 0, 1), TG_OK));
            tg_tensor_release(gt), tg_tensor_release(gtc);
            tg_tensor_set_grad(a, g);
            tg_tensor_set_grad(leaf_b, g2);
            cr_assert(eq(int, tg_optimizer_step(oa), TG_OK));
            cr_assert(eq(int, tg_optimizer_step(ob), TG_OK));
        }
        for (int64_t i = 0; i < n * n; i++) {
            double x, y;
            tg_tensor_get_flat(a, i, &x);
            tg_tensor_get_flat(leaf_b, i, &y);
            cr_assert(eq(dbl, x, y), "kind %d element %lld: %.9g vs %.9g", kind, (long long)i, x, y);
        }
        tg_optimizer_free(oa), tg_optimizer_free(ob);
        tg_tensor_release(a), tg_tensor_release(base), tg_tensor_release(bc), tg_tensor_release(b);
        tg_tensor_release(leaf_b);
    }
}

/* ---- a small regression ------------------------------------------------------ */

/* y = x w* + b* with x (64, 3): a linear model trained by Adam for 200 steps
 * on the mse loss ends with a loss at least 10x smaller than it started. */
Test(optim, adam_fits_a_linear_regression)
{
    tg_rng rng;
    tg_rng_init(&rng, 7);
    tg_tensor *x = NULL, *y = NULL, *w = NULL, *b = NULL, *w_true = NULL;
    tg_tensor_zeros(&x, TG_F32, 2, (int64_t[]){64, 3});
    tg_tensor_rand_normal(x, &rng, 0, 1);
    float wt[3] = {2.0f, -3.0f, 0.5f};
    tg_tensor_from_data(&w_true, TG_F32, 2, (int64_t[]){1, 3}, wt);
    tg_linear(&y, x, w_true, NULL);
    tg_tensor *yb = NULL;
    tg_add_scalar(&yb, y, 1.5);
    tg_tensor_zeros(&w, TG_F32, 2, (int64_t[]){1, 3});
    tg_tensor_zeros(&b, TG_F32, 1, (int64_t[]){1});
    tg_tensor_set_requires_grad(w, true);
    tg_tensor_set_requires_grad(b, true);
    tg_optimizer *o = NULL;
    tg_adam_opts a = TG_ADAM_OPTS_INIT;
    a.lr = 0.05;
    cr_assert(eq(int, tg_adam_new(&o, 2, (tg_tensor *[]){w, b}, &a), TG_OK));
    double first = NAN, last = NAN;
    for (int it = 0; it < 200; it++) {
        tg_tensor *pred = NULL, *loss = NULL;
        tg_optimizer_zero_grad(o);
        cr_assert(eq(int, tg_linear(&pred, x, w, b), TG_OK));
        cr_assert(eq(int, tg_mse_loss(&loss, pred, yb, TG_REDUCTION_MEAN), TG_OK));
        cr_assert(eq(int, tg_backward(loss, NULL, NULL), TG_OK));
        cr_assert(eq(int, tg_optimizer_step(o), TG_OK));
        tg_tensor_get_flat(loss, 0, it == 0 ? &first : &last);
        tg_tensor_release(pred);
        tg_tensor_release(loss);
    }
    cr_assert(last * 10 < first, "loss %g -> %g", first, last);
    /* noiseless data: the fit is the true line */
    for (int i = 0; i < 3; i++)
        cr_assert(epsilon_eq(dbl, th_at(w, i), wt[i], 0.01), "w[%d] = %g, true %g", i,
                  th_at(w, i), (double)wt[i]);
    cr_assert(epsilon_eq(dbl, th_at(b, 0), 1.5, 0.01), "b = %g, true 1.5", th_at(b, 0));
    tg_optimizer_free(o);
    tg_tensor_release(x);
    tg_tensor_release(y);
    tg_tensor_release(yb);
    tg_tensor_release(w);
    tg_tensor_release(b);
    tg_tensor_release(w_true);
}

/* A module converted by tg_module_to_dtype after the optimizer made its
 * state (tg_module_to_dtype's comment invites it): the state follows the
 * parameters' new dtype.  With a constant gradient g, every Adam step moves
 * a parameter by lr * g / (|g| + eps) (the bias corrections cancel), and SGD
 * with momentum 0.5 by lr * g, then lr * 1.5 g. */
Test(optim, state_follows_parameters_converted_after_a_step)
{
    const tg_dtype dts[2][2] = {{TG_F32, TG_F64}, {TG_F64, TG_F32}};
    for (int d = 0; d < 2; d++)
        for (int kind = 0; kind < 2; kind++) {
            tg_rng rng;
            tg_rng_init(&rng, 3);
            tg_module *m = NULL;
            cr_assert(eq(int, tg_nn_linear_new(&m, 300, 4, true, &rng), TG_OK));
            if (dts[d][0] != TG_F32) cr_assert(eq(int, tg_module_to_dtype(m, dts[d][0]), TG_OK));
            tg_tensor *w = tg_module_find(m, "weight"), *w0 = NULL;
            cr_assert(eq(int, tg_tensor_to_dtype(&w0, w, TG_F64), TG_OK));
            tg_optimizer *o = NULL;
            tg_adam_opts ao = TG_ADAM_OPTS_INIT;
            ao.lr = 0.01;
            tg_sgd_opts so = TG_SGD_OPTS_INIT;
            so.momentum = 0.5;
            if (kind == 0) cr_assert(eq(int, tg_adam_from_module(&o, m, &ao), TG_OK));
            else cr_assert(eq(int, tg_sgd_from_module(&o, m, &so), TG_OK));
            for (int step = 0; step < 2; step++) {
                if (step == 1) cr_assert(eq(int, tg_module_to_dtype(m, dts[d][1]), TG_OK));
                tg_tensor *g = NULL;
                cr_assert(eq(int, tg_tensor_full(&g, tg_tensor_dtype(w), 2, tg_tensor_shape(w),
                                                 0.5), TG_OK));
                cr_assert(eq(int, tg_tensor_set_grad(w, g), TG_OK));
                cr_assert(eq(int, tg_optimizer_step(o), TG_OK), "%s", tg_error_message());
            }
            const double moved = kind == 0 ? 2 * 0.01 * 0.5 / (0.5 + 1e-8) : 0.01 * 2.5 * 0.5;
            for (int64_t i = 0; i < tg_tensor_numel(w); i += 97) {
                const double want = th_round_to(dts[d][1], th_at(w0, i) - moved);
                cr_assert(th_close(th_at(w, i), want, 1e-6, 1e-8), "%s -> %s, %s: w[%lld] %.9g, "
                          "want %.9g", tg_dtype_name(dts[d][0]), tg_dtype_name(dts[d][1]),
                          kind ? "sgd" : "adam", (long long)i, th_at(w, i), want);
            }
            tg_optimizer_free(o);
            tg_tensor_release(w0);
            tg_module_release(m);
        }
}
