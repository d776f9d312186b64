/* tests/optim_goldens.c - optimizers configured from the PyTorch goldens
 * of tests/golden/optim/ (scripts/make_optim_goldens.py), their parameters
 * and gradients, for test_optim.c and test_optim_state.c (optim_goldens.h). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "optim_goldens.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/optim.h"
#include "tapegrad/safetensors.h"

double meta(const tg_st_file *f, const char *k)
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

int golden_steps(const tg_st_file *f) { return (int)meta_or(f, "steps", 5); }

/* The options of Adagrad, Adamax, NAdam, RAdam, Adadelta, Rprop and ASGD: the
 * file's (with its "g1.<name>" over them for group 1), or, with other,
 * each one changed. */
typedef struct more_opts {
    double lr, lr_decay, weight_decay, initial_accumulator_value, eps, beta1, beta2;
    double momentum_decay, rho, eta_minus, eta_plus, step_size_min, step_size_max;
    double lambd, alpha, t0;
    bool maximize;
} more_opts;

static more_opts more_of(const tg_st_file *f, const char *pre, bool other)
{
    char k[64];
#define GET(name, dflt) (snprintf(k, sizeof k, "%s%s", pre, name), meta_or(f, k, dflt))
    more_opts a = {.lr = meta(f, "lr"), .lr_decay = meta_or(f, "lr_decay", 0),
                   .weight_decay = meta(f, "weight_decay"),
                   .initial_accumulator_value = meta_or(f, "initial_accumulator_value", 0),
                   .eps = meta(f, "eps"), .beta1 = meta(f, "beta1"), .beta2 = meta(f, "beta2"),
                   .momentum_decay = meta_or(f, "momentum_decay", 0),
                   .rho = meta_or(f, "rho", 0), .eta_minus = meta_or(f, "eta_minus", 0),
                   .eta_plus = meta_or(f, "eta_plus", 0),
                   .step_size_min = meta_or(f, "step_size_min", 0),
                   .step_size_max = meta_or(f, "step_size_max", 0),
                   .lambd = meta_or(f, "lambd", 0), .alpha = meta_or(f, "alpha", 0),
                   .t0 = meta_or(f, "t0", 0), .maximize = meta_flag(f, "maximize")};
    a = (more_opts){.lr = GET("lr", a.lr), .lr_decay = GET("lr_decay", a.lr_decay),
                    .weight_decay = GET("weight_decay", a.weight_decay),
                    .initial_accumulator_value =
                        GET("initial_accumulator_value", a.initial_accumulator_value),
                    .eps = GET("eps", a.eps), .beta1 = GET("beta1", a.beta1),
                    .beta2 = GET("beta2", a.beta2),
                    .momentum_decay = GET("momentum_decay", a.momentum_decay),
                    .rho = GET("rho", a.rho), .eta_minus = GET("eta_minus", a.eta_minus),
                    .eta_plus = GET("eta_plus", a.eta_plus),
                    .step_size_min = GET("step_size_min", a.step_size_min),
                    .step_size_max = GET("step_size_max", a.step_size_max),
                    .lambd = GET("lambd", a.lambd), .alpha = GET("alpha", a.alpha),
                    .t0 = GET("t0", a.t0), .maximize = GET("maximize", a.maximize) != 0};
#undef GET
    if (other)
        a = (more_opts){.lr = 2 * a.lr, .lr_decay = a.lr_decay + 0.3,
                        .weight_decay = a.weight_decay + 0.3,
                        .initial_accumulator_value = a.initial_accumulator_value + 0.7,
                        .eps = 1e-3 + a.eps, .beta1 = 0.5, .beta2 = 0.6,
                        .momentum_decay = a.momentum_decay + 0.05, .rho = 0.5,
                        .eta_minus = 0.2, .eta_plus = 1.7, .step_size_min = 1e-4,
                        .step_size_max = 1.0, .lambd = a.lambd + 0.2, .alpha = 0.3,
                        .t0 = a.t0 + 1, .maximize = !a.maximize};
    return a;
}

/* Adagrad, Adamax, NAdam, RAdam, Adadelta, Rprop or ASGD (kind) over params[0..n) with
 * the
 * options of group g (0, or 1 added to *o). */
static int more_opt(const tg_st_file *f, const char *kind, tg_optimizer **o, int n,
                    tg_tensor **params, int g, bool other)
{
    const more_opts a = more_of(f, g ? "g1." : "", other);
    tg_tensor **p = params + g;
    if (strcmp(kind, "adagrad") == 0) {
        const tg_adagrad_opts x = {a.lr, a.lr_decay, a.weight_decay, a.initial_accumulator_value,
                                   a.eps, a.maximize};
        return g ? tg_adagrad_add_param_group(*o, 1, p, &x) : tg_adagrad_new(o, n, p, &x);
    }
    if (strcmp(kind, "adamax") == 0) {
        const tg_adamax_opts x = {a.lr, a.beta1, a.beta2, a.eps, a.weight_decay, a.maximize};
        return g ? tg_adamax_add_param_group(*o, 1, p, &x) : tg_adamax_new(o, n, p, &x);
    }
    if (strcmp(kind, "nadam") == 0) {
        const tg_nadam_opts x = {a.lr, a.beta1, a.beta2, a.eps, a.weight_decay,
                                 a.momentum_decay};
        return g ? tg_nadam_add_param_group(*o, 1, p, &x) : tg_nadam_new(o, n, p, &x);
    }
    if (strcmp(kind, "adadelta") == 0) {
        const tg_adadelta_opts x = {a.lr, a.rho, a.eps, a.weight_decay, a.maximize};
        return g ? tg_adadelta_add_param_group(*o, 1, p, &x) : tg_adadelta_new(o, n, p, &x);
    }
    if (strcmp(kind, "asgd") == 0) {
        const tg_asgd_opts x = {a.lr, a.lambd, a.alpha, a.t0, a.weight_decay, a.maximize};
        return g ? tg_asgd_add_param_group(*o, 1, p, &x) : tg_asgd_new(o, n, p, &x);
    }
    if (strcmp(kind, "rprop") == 0) {
        const tg_rprop_opts x = {a.lr, a.eta_minus, a.eta_plus, a.step_size_min,
                                 a.step_size_max, a.maximize};
        return g ? tg_rprop_add_param_group(*o, 1, p, &x) : tg_rprop_new(o, n, p, &x);
    }
    const tg_radam_opts x = {a.lr, a.beta1, a.beta2, a.eps, a.weight_decay};
    return g ? tg_radam_add_param_group(*o, 1, p, &x) : tg_radam_new(o, n, p, &x);
}

static bool is_more(const char *kind)
{
    return strcmp(kind, "adagrad") == 0 || strcmp(kind, "adamax") == 0 ||
           strcmp(kind, "nadam") == 0 || strcmp(kind, "radam") == 0 ||
           strcmp(kind, "adadelta") == 0 || strcmp(kind, "rprop") == 0 ||
           strcmp(kind, "asgd") == 0;
}

/* An optimizer configured from the golden file's metadata: over both
 * parameters, or over parameter 0 with parameter 1 in a second param group. */
tg_optimizer *make_opt(const tg_st_file *f, tg_tensor **params)
{
    tg_optimizer *o = NULL;
    const char *kind = tg_st_meta_get(f, "kind");
    const int n = two_groups(f) ? 1 : NP;
    int rc;
    if (is_more(kind)) {
        rc = more_opt(f, kind, &o, n, params, 0, false);
        if (rc == TG_OK && n == 1) rc = more_opt(f, kind, &o, n, params, 1, false);
    } else if (strcmp(kind, "sgd") == 0) {
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
tg_optimizer *make_other_opt(const tg_st_file *f, tg_tensor **params, bool flip_amsgrad)
{
    tg_optimizer *o = NULL;
    const char *kind = tg_st_meta_get(f, "kind");
    const int n = two_groups(f) ? 1 : NP;
    int rc;
    if (is_more(kind)) {
        rc = more_opt(f, kind, &o, n, params, 0, true);
        if (rc == TG_OK && n == 1) rc = more_opt(f, kind, &o, n, params, 1, true);
    } else if (strcmp(kind, "sgd") == 0) {
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

void init_params(const tg_st_file *f, tg_tensor **params)
{
    for (int j = 0; j < NP; j++) {
        params[j] = NULL;
        cr_assert(eq(int, tg_tensor_clone(&params[j], get(f, "p%d.init", j, 0)), TG_OK));
        tg_tensor_set_requires_grad(params[j], true);
    }
}

/* Sets the golden gradients of step k (none where the file has none). */
void set_grads(const tg_st_file *f, tg_tensor **params, int k)
{
    for (int j = 0; j < NP; j++) {
        tg_tensor *g = get(f, "g%d.p%d", k, j), *c = NULL;
        if (g) cr_assert(eq(int, tg_tensor_clone(&c, g), TG_OK));
        tg_tensor_set_grad(params[j], c);
    }
}

/* The optimizer of f's configuration over params p, made from f's initial
 * values and stepped with f's gradients of steps 0 and 1. */
tg_optimizer *stepped_twice(const tg_st_file *f, tg_tensor **p)
{
    init_params(f, p);
    tg_optimizer *o = make_opt(f, p);
    for (int k = 0; k < 2; k++) {
        set_grads(f, p, k);
        cr_assert(eq(int, tg_optimizer_step(o), TG_OK));
    }
    return o;
}

void assert_params(const tg_st_file *f, tg_tensor **params, int k, double tol,
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

void free_params(tg_tensor **params)
{
    for (int j = 0; j < NP; j++) tg_tensor_release(params[j]);
}

tg_st_file *snapshot(const tg_optimizer *o)
{
    tg_st_file *s = NULL;
    tg_st_new(&s);
    cr_assert(eq(int, tg_optimizer_state_save(o, s, "o"), TG_OK));
    return s;
}
