/* tests/test_optim_more.c - Adagrad, Adamax, NAdam, RAdam, Adadelta, Rprop
 * and ASGD besides their PyTorch goldens (test_optim.c, test_optim_state.c):
 * torch's defaults, the options each refuses, param groups, modules and the
 * momentum that OneCycleLR cycles (beta1; Adagrad, Adadelta, Rprop and ASGD
 * have none), state files refused with the optimizer unchanged, and bf16
 * parameters updated through f32. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "optim_goldens.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/lr_scheduler.h"
#include "tapegrad/nn.h"
#include "tapegrad/optim.h"
#include "tapegrad/safetensors.h"

/* call fails with status and a message holding words */
#define REFUSED(call, status, words) th_expect_status(call, status, words)
#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The four kinds, made over n params with their INIT options changed by
 * the caller's hook; group adds a group (opt given) instead. */
typedef enum { ADAGRAD, ADAMAX, NADAM, RADAM, ADADELTA, RPROP, ASGD, N_KINDS } kind;

typedef struct any_opts {
    tg_adagrad_opts ag;
    tg_adamax_opts ax;
    tg_nadam_opts na;
    tg_radam_opts ra;
    tg_adadelta_opts ad;
    tg_rprop_opts rp;
    tg_asgd_opts sg;
} any_opts;

static any_opts defaults(void)
{
    return (any_opts){.ag = TG_ADAGRAD_OPTS_INIT, .ax = TG_ADAMAX_OPTS_INIT,
                      .na = TG_NADAM_OPTS_INIT, .ra = TG_RADAM_OPTS_INIT,
                      .ad = TG_ADADELTA_OPTS_INIT, .rp = TG_RPROP_OPTS_INIT,
                      .sg = TG_ASGD_OPTS_INIT};
}

/* Every kind's lr set to v. */
static void set_lr(any_opts *a, double v)
{
    a->ag.lr = a->ax.lr = a->na.lr = a->ra.lr = a->ad.lr = a->rp.lr = a->sg.lr = v;
}

static int make(kind k, tg_optimizer **o, int n, tg_tensor **p, const any_opts *a)
{
    switch (k) {
    case ADAGRAD: return tg_adagrad_new(o, n, p, a ? &a->ag : NULL);
    case ADAMAX: return tg_adamax_new(o, n, p, a ? &a->ax : NULL);
    case NADAM: return tg_nadam_new(o, n, p, a ? &a->na : NULL);
    case RADAM: return tg_radam_new(o, n, p, a ? &a->ra : NULL);
    case ADADELTA: return tg_adadelta_new(o, n, p, a ? &a->ad : NULL);
    case ASGD: return tg_asgd_new(o, n, p, a ? &a->sg : NULL);
    default: return tg_rprop_new(o, n, p, a ? &a->rp : NULL);
    }
}

static int add_group(kind k, tg_optimizer *o, int n, tg_tensor **p, const any_opts *a)
{
    switch (k) {
    case ADAGRAD: return tg_adagrad_add_param_group(o, n, p, a ? &a->ag : NULL);
    case ADAMAX: return tg_adamax_add_param_group(o, n, p, a ? &a->ax : NULL);
    case NADAM: return tg_nadam_add_param_group(o, n, p, a ? &a->na : NULL);
    case RADAM: return tg_radam_add_param_group(o, n, p, a ? &a->ra : NULL);
    case ADADELTA: return tg_adadelta_add_param_group(o, n, p, a ? &a->ad : NULL);
    case ASGD: return tg_asgd_add_param_group(o, n, p, a ? &a->sg : NULL);
    default: return tg_rprop_add_param_group(o, n, p, a ? &a->rp : NULL);
    }
}

static int from_module(kind k, tg_optimizer **o, const tg_module *m, const any_opts *a)
{
    switch (k) {
    case ADAGRAD: return tg_adagrad_from_module(o, m, &a->ag);
    case ADAMAX: return tg_adamax_from_module(o, m, &a->ax);
    case NADAM: return tg_nadam_from_module(o, m, &a->na);
    case RADAM: return tg_radam_from_module(o, m, &a->ra);
    case ADADELTA: return tg_adadelta_from_module(o, m, &a->ad);
    case ASGD: return tg_asgd_from_module(o, m, &a->sg);
    default: return tg_rprop_from_module(o, m, &a->rp);
    }
}

static const char *const names[N_KINDS] = {"adagrad",  "adamax", "nadam", "radam",
                                           "adadelta", "rprop",  "asgd"};
static bool has_beta1(int k) { return k == ADAMAX || k == NADAM || k == RADAM; }

/* The INIT options are torch's defaults: the golden files made with lr
 * alone record the optimizer's defaults for the rest. */
Test(optim_more, init_options_are_torchs_defaults)
{
    const any_opts a = defaults();
    const double lrs[N_KINDS] = {a.ag.lr, a.ax.lr, a.na.lr, a.ra.lr, a.ad.lr, a.rp.lr, a.sg.lr};
    const double want_lrs[N_KINDS] = {1e-2, 2e-3, 2e-3, 1e-3, 1.0, 1e-2, 1e-2};   /* torch's */
    for (int k = 0; k < N_KINDS; k++) {
        cr_assert(eq(dbl, lrs[k], want_lrs[k]), "%s lr", names[k]);
        tg_st_file *f = th_golden_load("optim/%s_f32.safetensors", names[k]);
        if (k == ADAGRAD) {
            cr_assert(eq(dbl, a.ag.eps, meta(f, "eps")));
            cr_assert(eq(dbl, a.ag.lr_decay, meta(f, "lr_decay")));
            cr_assert(eq(dbl, a.ag.weight_decay, meta(f, "weight_decay")));
            cr_assert(eq(dbl, a.ag.initial_accumulator_value,
                         meta(f, "initial_accumulator_value")));
        } else if (k == ADADELTA) {
            cr_assert(eq(dbl, a.ad.rho, meta(f, "rho")));
            cr_assert(eq(dbl, a.ad.eps, meta(f, "eps")));
            cr_assert(eq(dbl, a.ad.weight_decay, meta(f, "weight_decay")));
        } else if (k == ASGD) {
            cr_assert(eq(dbl, a.sg.lambd, meta(f, "lambd")));
            cr_assert(eq(dbl, a.sg.alpha, meta(f, "alpha")));
            cr_assert(eq(dbl, a.sg.t0, meta(f, "t0")));
            cr_assert(eq(dbl, a.sg.weight_decay, meta(f, "weight_decay")));
        } else if (k == RPROP) {
            cr_assert(eq(dbl, a.rp.eta_minus, meta(f, "eta_minus")));
            cr_assert(eq(dbl, a.rp.eta_plus, meta(f, "eta_plus")));
            cr_assert(eq(dbl, a.rp.step_size_min, meta(f, "step_size_min")));
            cr_assert(eq(dbl, a.rp.step_size_max, meta(f, "step_size_max")));
        } else {
            const double b1[] = {0, a.ax.beta1, a.na.beta1, a.ra.beta1};
            const double b2[] = {0, a.ax.beta2, a.na.beta2, a.ra.beta2};
            const double eps[] = {0, a.ax.eps, a.na.eps, a.ra.eps};
            const double wd[] = {0, a.ax.weight_decay, a.na.weight_decay, a.ra.weight_decay};
            cr_assert(eq(dbl, b1[k], meta(f, "beta1")), "%s", names[k]);
            cr_assert(eq(dbl, b2[k], meta(f, "beta2")), "%s", names[k]);
            cr_assert(eq(dbl, eps[k], meta(f, "eps")), "%s", names[k]);
            cr_assert(eq(dbl, wd[k], meta(f, "weight_decay")), "%s", names[k]);
        }
        if (k == NADAM) cr_assert(eq(dbl, a.na.momentum_decay, meta(f, "momentum_decay")));
        tg_st_free(f);
    }
}

/* What torch's constructors refuse (a negative lr, eps, weight_decay,
 * lr_decay, initial_accumulator_value or momentum_decay; betas outside
 * [0, 1)), NaN too, and as tapegrad's others an infinite lr and NULL
 * options: each names the option, and nothing is made. */
Test(optim_more, bad_options_are_refused_naming_the_option)
{
    tg_tensor *p = NULL;
    tg_tensor_zeros(&p, TG_F32, 1, (int64_t[]){3});
    tg_optimizer *o = NULL;
    for (int k = 0; k < N_KINDS; k++) {
        char msg[96];
        any_opts a = defaults();
        set_lr(&a, -0.5);
        snprintf(msg, sizeof msg, "%s: lr=-0.5 must be finite and >= 0", names[k]);
        REFUSED(make(k, &o, 1, &p, &a), TG_EINVAL, msg);
        a = defaults();
        set_lr(&a, INFINITY);
        REFUSED(make(k, &o, 1, &p, &a), TG_EINVAL, "lr=inf must be finite");
        REFUSED(make(k, &o, 1, &p, NULL), TG_EINVAL, "opts must not be NULL");
        if (k == ASGD) {   /* torch checks lr and weight_decay; NaN refused here too */
            a = defaults();
            a.sg.weight_decay = -1;
            REFUSED(make(k, &o, 1, &p, &a), TG_EINVAL, "asgd: weight_decay=-1 must be >= 0");
            a = defaults();
            a.sg.t0 = NAN;
            REFUSED(make(k, &o, 1, &p, &a), TG_EINVAL, "asgd: t0=nan must be a number");
            a = defaults();
            a.sg.alpha = -3;   /* accepted, as torch accepts it */
            cr_assert(eq(int, make(k, &o, 1, &p, &a), TG_OK), "%s", tg_error_message());
            tg_optimizer_free(o);
            o = NULL;
            continue;
        }
        if (k == RPROP) {   /* no eps, no weight_decay */
            const double bad[4][2] = {{0.0, 1.2}, {1.0, 1.2}, {0.5, 1.0}, {NAN, 1.2}};
            const char *words[4] = {"rprop: etas=(0, 1.2) must be 0 < eta_minus < 1 < eta_plus",
                                    "etas=(1, 1.2) must be", "etas=(0.5, 1) must be",
                                    "etas=(nan, 1.2) must be"};
            for (int b = 0; b < 4; b++) {
                a = defaults();
                a.rp.eta_minus = bad[b][0];
                a.rp.eta_plus = bad[b][1];
                REFUSED(make(k, &o, 1, &p, &a), TG_EINVAL, words[b]);
            }
            continue;
        }
        a = defaults();
        a.ag.eps = a.ax.eps = a.na.eps = a.ra.eps = a.ad.eps = -1e-3;
        snprintf(msg, sizeof msg, "%s: eps=-0.001 must be >= 0", names[k]);
        REFUSED(make(k, &o, 1, &p, &a), TG_EINVAL, msg);
        a = defaults();
        a.ag.weight_decay = a.ax.weight_decay = a.na.weight_decay = NAN;
        a.ra.weight_decay = a.ad.weight_decay = NAN;
        REFUSED(make(k, &o, 1, &p, &a), TG_EINVAL, "weight_decay=nan must be >= 0");
        if (k == ADADELTA) {   /* torch's 0 <= rho <= 1: 1 accepted */
            const double bad[3] = {-0.1, 1.5, NAN};
            const char *words[3] = {"adadelta: rho=-0.1 must be in [0, 1]", "rho=1.5 must be",
                                    "rho=nan must be"};
            for (int b = 0; b < 3; b++) {
                a = defaults();
                a.ad.rho = bad[b];
                REFUSED(make(k, &o, 1, &p, &a), TG_EINVAL, words[b]);
            }
            a = defaults();
            a.ad.rho = 1.0;
            cr_assert(eq(int, make(k, &o, 1, &p, &a), TG_OK), "%s", tg_error_message());
            tg_optimizer_free(o);
            o = NULL;
            continue;
        }
        if (k == ADAGRAD) {
            a = defaults();
            a.ag.lr_decay = -0.1;
            REFUSED(make(k, &o, 1, &p, &a), TG_EINVAL, "adagrad: lr_decay=-0.1 must be >= 0");
            a = defaults();
            a.ag.initial_accumulator_value = -1;
            REFUSED(make(k, &o, 1, &p, &a), TG_EINVAL,
                    "adagrad: initial_accumulator_value=-1 must be >= 0");
            continue;
        }
        const double bad[4][2] = {{1.0, 0.999}, {-0.1, 0.999}, {0.9, 1.0}, {0.9, NAN}};
        const char *words[4] = {"beta1=1 must be in [0, 1)", "beta1=-0.1 must be in [0, 1)",
                                "beta2=1 must be in [0, 1)", "beta2=nan must be in [0, 1)"};
        for (int b = 0; b < 4; b++) {
            a = defaults();
            a.ax.beta1 = a.na.beta1 = a.ra.beta1 = bad[b][0];
            a.ax.beta2 = a.na.beta2 = a.ra.beta2 = bad[b][1];
            REFUSED(make(k, &o, 1, &p, &a), TG_EINVAL, words[b]);
        }
        if (k == NADAM) {
            a = defaults();
            a.na.momentum_decay = -4e-3;
            REFUSED(make(k, &o, 1, &p, &a), TG_EINVAL, "nadam: momentum_decay=-0.004 must be");
        }
    }
    cr_assert(o == NULL);
    cr_assert(eq(int, tg_tensor_refcount(p), 1));   /* nothing retained */
    tg_tensor_release(p);
}

/* A group is added only by the kind's own call (another's names both),
 * NULL options are the constructor's; from a module: its parameters; the
 * momentum OneCycleLR cycles is beta1, and Adagrad, Adadelta and Rprop,
 * without one, refuse it and OneCycleLR's cycle_momentum. */
Test(optim_more, groups_modules_and_momentum)
{
    tg_tensor *p = NULL, *q = NULL;
    tg_tensor_zeros(&p, TG_F32, 1, (int64_t[]){3});
    tg_tensor_zeros(&q, TG_F32, 1, (int64_t[]){3});
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_linear_new(&m, 3, 2, true, &rng), TG_OK));
    for (int k = 0; k < N_KINDS; k++) {
        any_opts a = defaults();
        set_lr(&a, 0.25);
        tg_optimizer *o = NULL;
        cr_assert(eq(int, make(k, &o, 1, &p, &a), TG_OK), "%s", tg_error_message());
        const int other = (k + 1) % N_KINDS;
        char msg[128];
        snprintf(msg, sizeof msg, "opt is '%s'; tg_%s_add_param_group adds to", names[k],
                 names[other]);
        REFUSED(add_group(other, o, 1, &q, &a), TG_EINVAL, msg);
        tg_adam_opts ao = TG_ADAM_OPTS_INIT;
        REFUSED(tg_adam_add_param_group(o, 1, &q, &ao), TG_EINVAL, "adds to Adam and AdamW");
        REFUSED(add_group(k, o, 1, &p, NULL), TG_EINVAL, "already in param group 0");
        cr_assert(eq(int, add_group(k, o, 1, &q, NULL), TG_OK), "%s", tg_error_message());
        cr_assert(eq(dbl, tg_optimizer_get_group_lr(o, 1), 0.25));
        if (!has_beta1(k)) {
            cr_assert(isnan(tg_optimizer_get_group_momentum(o, 0)));
            snprintf(msg, sizeof msg, "optimizer_set_group_momentum: %s has no momentum (nor "
                     "beta1)", names[k]);
            REFUSED(tg_optimizer_set_group_momentum(o, 0, 0.5), TG_EINVAL, msg);
            tg_lr_scheduler *s = NULL;
            tg_one_cycle_opts oc = TG_ONE_CYCLE_OPTS_INIT;
            oc.total_steps = 10;
            REFUSED(tg_one_cycle_lr_new(&s, o, 1, (double[]){0.1}, &oc), TG_EINVAL,
                    "has no momentum");
            cr_assert(s == NULL);
        } else {
            cr_assert(eq(dbl, tg_optimizer_get_group_momentum(o, 1), 0.9));
            cr_assert(eq(int, tg_optimizer_set_group_momentum(o, 1, 0.5), TG_OK));
            cr_assert(eq(dbl, tg_optimizer_get_group_momentum(o, 1), 0.5));
            REFUSED(tg_optimizer_set_group_momentum(o, 0, 1.0), TG_EINVAL,
                    "beta1=1 must be in [0, 1)");
            tg_one_cycle_opts oc = TG_ONE_CYCLE_OPTS_INIT;
            oc.total_steps = 10;
            tg_lr_scheduler *s = NULL;
            cr_assert(eq(int, tg_one_cycle_lr_new(&s, o, 1, (double[]){0.1}, &oc), TG_OK),
                      "%s", tg_error_message());
            cr_assert(eq(dbl, tg_optimizer_get_group_momentum(o, 0), 0.95));   /* max first */
            cr_assert(eq(int, tg_lr_scheduler_step(s), TG_OK));
            const double b1 = tg_optimizer_get_group_momentum(o, 1);
            cr_assert(b1 < 0.95 && b1 > 0.85, "%s beta1 %g after a step", names[k], b1);
            tg_lr_scheduler_free(s);
        }
        tg_optimizer_free(o);
        o = NULL;
        cr_assert(eq(int, from_module(k, &o, m, &a), TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, tg_tensor_refcount(tg_module_find(m, "weight")), 2));
        tg_optimizer_free(o);
        cr_assert(eq(int, from_module(k, &o, NULL, &a), TG_EINVAL));
    }
    tg_module_release(m);
    cr_assert(eq(int, tg_tensor_refcount(p), 1));
    tg_tensor_release(p);
    tg_tensor_release(q);
}

/* f with key set to the 0-d f64 value v. */
static tg_st_file *with_value(const tg_st_file *f, const char *key, double v)
{
    tg_st_file *d = th_st_copy_without(f, key);
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_scalar(&t, TG_F64, v), TG_OK));
    cr_assert(eq(int, tg_st_set(d, key, t), TG_OK));
    tg_tensor_release(t);
    return d;
}

/* Refused state files name the key and leave the optimizer as it was:
 * NAdam without a parameter's mu_product or with one outside [0, 1],
 * Adagrad with a negative lr_decay or initial_accumulator_value, Adamax
 * without exp_inf, Adadelta with rho = 2 or without acc_delta, Rprop
 * without a step_size, ASGD with mu = 3 or without eta, and another kind's
 * state. */
Test(optim_more, bad_state_files_leave_the_optimizer_unchanged)
{
    const struct {
        const char *config, *key;
        double v;   /* NAN: the key removed */
        int rc;
        const char *msg;
    } cases[] = {
        {"nadam_all", "o.1.mu_product", NAN, TG_ENOTFOUND, "missing key 'o.1.mu_product'"},
        {"nadam_all", "o.0.mu_product", 1.5, TG_EINVAL, "'o.0.mu_product'=1.5 must be in"},
        {"nadam_all", "o.momentum_decay", -1, TG_EINVAL, "'o.momentum_decay'=-1 must be >= 0"},
        {"adagrad_all", "o.lr_decay", -1, TG_EINVAL, "'o.lr_decay'=-1 must be >= 0"},
        {"adagrad_all", "o.initial_accumulator_value", -2, TG_EINVAL,
         "'o.initial_accumulator_value'=-2 must be >= 0"},
        {"adagrad_all", "o.0.sum", NAN, TG_ENOTFOUND, "missing key 'o.0.sum'"},
        {"adamax_all", "o.1.exp_inf", NAN, TG_ENOTFOUND, "missing key 'o.1.exp_inf'"},
        {"radam_all", "o.betas", NAN, TG_OK, ""},   /* absent: the optimizer's kept */
        {"adadelta_all", "o.rho", 2, TG_EINVAL, "'o.rho'=2 must be in [0, 1]"},
        {"adadelta_all", "o.0.acc_delta", NAN, TG_ENOTFOUND, "missing key 'o.0.acc_delta'"},
        {"rprop_all", "o.1.step_size", NAN, TG_ENOTFOUND, "missing key 'o.1.step_size'"},
        {"asgd_all", "o.0.mu", 3, TG_EINVAL, "'o.0.mu'=3 must be in [0, 1]"},
        {"asgd_all", "o.1.eta", NAN, TG_ENOTFOUND, "missing key 'o.1.eta'"},
        {"asgd_all", "o.t0", NAN, TG_OK, ""},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        tg_st_file *f = th_golden_load("optim/%s_f32.safetensors", cases[c].config);
        tg_tensor *p[NP];
        tg_optimizer *o = stepped_twice(f, p);
        tg_st_file *before = snapshot(o);
        tg_st_file *bad = isnan(cases[c].v) ? th_st_copy_without(before, cases[c].key)
                                            : with_value(before, cases[c].key, cases[c].v);
        cr_assert(eq(int, tg_optimizer_state_load(o, bad, "o"), cases[c].rc), "%s %s",
                  cases[c].config, cases[c].key);
        cr_assert(strstr(tg_error_message(), cases[c].msg) != NULL, "%s", tg_error_message());
        tg_st_file *after = snapshot(o);
        th_expect_same_st(before, after);
        tg_st_free(after);
        tg_st_free(bad);
        tg_st_free(before);
        tg_optimizer_free(o);
        free_params(p);
        tg_st_free(f);
    }
    /* NAdam's state into Adamax */
    tg_st_file *f = th_golden_load("optim/nadam_all_f32.safetensors");
    tg_st_file *g = th_golden_load("optim/adamax_all_f32.safetensors");
    tg_tensor *p[NP], *q[NP];
    tg_optimizer *o = stepped_twice(f, p), *x = stepped_twice(g, q);
    tg_st_file *s = snapshot(o);
    REFUSED(tg_optimizer_state_load(x, s, "o"), TG_EINVAL, "'o.kind' is 'nadam'; this "
                                                           "optimizer is 'adamax'");
    tg_st_free(s);
    tg_optimizer_free(o);
    tg_optimizer_free(x);
    free_params(p);
    free_params(q);
    tg_st_free(f);
    tg_st_free(g);
}

/* A bf16 parameter steps in f32 and is rounded once: after one step it is
 * the f32 parameter of the same values after one step, rounded to bf16;
 * the state is f32. */
Test(optim_more, bf16_params_update_through_f32)
{
    const float init[4] = {0.5f, -1.25f, 2.0f, 0.03125f}, grad[4] = {0.75f, -0.5f, 0.125f, 2.0f};
    for (int k = 0; k < N_KINDS; k++) {
        tg_tensor *ph = NULL, *pf = NULL, *gh = NULL, *gf = NULL, *st = NULL;
        cr_assert(eq(int, tg_tensor_from_data(&pf, TG_F32, 1, (int64_t[]){4}, init), TG_OK));
        cr_assert(eq(int, tg_tensor_from_data(&gf, TG_F32, 1, (int64_t[]){4}, grad), TG_OK));
        cr_assert(eq(int, tg_tensor_to_dtype(&ph, pf, TG_BF16), TG_OK));
        cr_assert(eq(int, tg_tensor_to_dtype(&gh, gf, TG_BF16), TG_OK));
        tg_tensor_set_requires_grad(ph, true);
        tg_tensor_set_requires_grad(pf, true);
        tg_tensor_set_grad(ph, gh);
        tg_tensor_set_grad(pf, gf);
        any_opts a = defaults();
        set_lr(&a, 0.1);
        a.ag.weight_decay = a.ax.weight_decay = a.na.weight_decay = 0.1;
        a.ra.weight_decay = a.ad.weight_decay = a.sg.weight_decay = 0.1;
        a.ad.eps = 0.5;   /* else Adadelta's first step is too small to move a bf16 */
        tg_optimizer *oh = NULL, *of = NULL;
        cr_assert(eq(int, make(k, &oh, 1, &ph, &a), TG_OK));
        cr_assert(eq(int, make(k, &of, 1, &pf, &a), TG_OK));
        cr_assert(eq(int, tg_optimizer_step(oh), TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, tg_optimizer_step(of), TG_OK));
        cr_assert(eq(int, tg_tensor_to_dtype(&st, pf, TG_BF16), TG_OK));
        for (int i = 0; i < 4; i++) {
            double x, y;
            tg_tensor_get_flat(ph, i, &x);
            tg_tensor_get_flat(st, i, &y);
            cr_assert(eq(dbl, x, y), "%s [%d]: %g vs %g", names[k], i, x, y);
            cr_assert(x != init[i], "%s [%d] moved", names[k], i);
        }
        tg_st_file *s = snapshot(oh);
        const char *const bufs[N_KINDS] = {"o.0.sum",       "o.0.exp_avg",   "o.0.exp_avg",
                                           "o.0.exp_avg",   "o.0.acc_delta", "o.0.step_size",
                                           "o.0.ax"};
        const tg_tensor *buf = tg_st_get(s, bufs[k]);
        cr_assert(buf != NULL);
        cr_assert(eq(int, tg_tensor_dtype(buf), TG_F32));
        tg_st_free(s);
        tg_optimizer_free(oh);
        tg_optimizer_free(of);
        tg_tensor_release(st);
        tg_tensor_release(ph);
        tg_tensor_release(pf);
    }
}

/* opt.param_groups[g][name]: read any option by name; set checks it as the
 * constructor does, refuses what decides the state's layout once there is
 * state, and a changed option steps as one given to the constructor. */
Test(optim_more, group_options_read_and_change)
{
    tg_tensor *p = NULL, *q = NULL;
    const float one[3] = {1.0f, -2.0f, 0.5f};
    cr_assert(eq(int, tg_tensor_from_data(&p, TG_F32, 1, (int64_t[]){3}, one), TG_OK));
    cr_assert(eq(int, tg_tensor_from_data(&q, TG_F32, 1, (int64_t[]){3}, one), TG_OK));
    tg_tensor_set_requires_grad(p, true);
    tg_tensor_set_requires_grad(q, true);
    tg_optimizer *o = NULL, *w = NULL;
    tg_adam_opts ao = TG_ADAM_OPTS_INIT;
    cr_assert(eq(int, tg_adam_new(&o, 1, &p, &ao), TG_OK));
    const char *opt_names[6] = {"lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad"};
    const double want[6] = {ao.lr, ao.beta1, ao.beta2, ao.eps, ao.weight_decay, 0};
    for (int i = 0; i < 6; i++) {
        double v = NAN;
        cr_assert(eq(int, tg_optimizer_get_group_option(o, 0, opt_names[i], &v), TG_OK), "%s",
                  opt_names[i]);
        cr_assert(eq(dbl, v, want[i]), "%s", opt_names[i]);
    }
    REFUSED(tg_optimizer_set_group_option(o, 0, "beta2", 1.0), TG_EINVAL,
            "beta2=1 must be in [0, 1)");
    REFUSED(tg_optimizer_set_group_option(o, 0, "momentum", 0.9), TG_EINVAL,
            "'momentum' is not an option of adam");
    REFUSED(tg_optimizer_set_group_option(o, 0, "amsgrad", 0.5), TG_EINVAL,
            "amsgrad=0.5 must be 0 or 1");
    REFUSED(tg_optimizer_set_group_option(o, 1, "eps", 1e-3), TG_EINVAL, "group=1 must be in");
    REFUSED(tg_optimizer_set_group_option(NULL, 0, "eps", 1e-3), TG_EINVAL, "must not be NULL");
    REFUSED(tg_optimizer_set_group_option(o, 0, NULL, 1e-3), TG_EINVAL, "must not be NULL");
    REFUSED(tg_optimizer_get_group_option(o, 0, "eps", NULL), TG_EINVAL, "must not be NULL");
    REFUSED(tg_optimizer_set_group_option(o, 0, "beta1", 1.0), TG_EINVAL, "beta1=1 must be");
    cr_assert(eq(int, tg_optimizer_set_group_option(o, 0, "amsgrad", 1), TG_OK));
    /* weight decay, eps and beta1 changed by name step as the constructor's */
    cr_assert(eq(int, tg_optimizer_set_group_option(o, 0, "weight_decay", 0.25), TG_OK));
    cr_assert(eq(int, tg_optimizer_set_group_option(o, 0, "eps", 1e-3), TG_OK));
    cr_assert(eq(int, tg_optimizer_set_group_option(o, 0, "beta1", 0.5), TG_OK));
    ao.weight_decay = 0.25;
    ao.eps = 1e-3;
    ao.beta1 = 0.5;
    ao.amsgrad = true;
    cr_assert(eq(int, tg_adam_new(&w, 1, &q, &ao), TG_OK));
    for (int k = 0; k < 3; k++) {
        tg_tensor *gp = NULL, *gq = NULL;
        const float g[3] = {0.5f - k, 0.25f * k, -1.0f};
        cr_assert(eq(int, tg_tensor_from_data(&gp, TG_F32, 1, (int64_t[]){3}, g), TG_OK));
        cr_assert(eq(int, tg_tensor_from_data(&gq, TG_F32, 1, (int64_t[]){3}, g), TG_OK));
        tg_tensor_set_grad(p, gp);
        tg_tensor_set_grad(q, gq);
        cr_assert(eq(int, tg_optimizer_step(o), TG_OK));
        cr_assert(eq(int, tg_optimizer_step(w), TG_OK));
    }
    cr_assert(memcmp(tg_tensor_cdata(p), tg_tensor_cdata(q), 3 * sizeof(float)) == 0);
    REFUSED(tg_optimizer_set_group_option(o, 0, "amsgrad", 0), TG_EINVAL,
            "amsgrad of a param group whose parameters have state");
    cr_assert(eq(int, tg_optimizer_set_group_option(o, 0, "amsgrad", 1), TG_OK));   /* as is */
    tg_optimizer_free(o);
    tg_optimizer_free(w);

    /* Rprop's pairs by their elements' names, L-BFGS's history and line search */
    tg_rprop_opts ro = TG_RPROP_OPTS_INIT;
    cr_assert(eq(int, tg_rprop_new(&o, 1, &p, &ro), TG_OK));
    double v = 0;
    cr_assert(eq(int, tg_optimizer_get_group_option(o, 0, "step_size_max", &v), TG_OK));
    cr_assert(eq(dbl, v, 50.0));
    REFUSED(tg_optimizer_set_group_option(o, 0, "eta_plus", 0.9), TG_EINVAL,
            "etas=(0.5, 0.9) must be 0 < eta_minus < 1 < eta_plus");
    cr_assert(eq(int, tg_optimizer_set_group_option(o, 0, "eta_minus", 0.25), TG_OK));
    cr_assert(eq(int, tg_optimizer_get_group_option(o, 0, "eta_minus", &v), TG_OK));
    cr_assert(eq(dbl, v, 0.25));
    REFUSED(tg_optimizer_set_group_option(o, 0, "eps", 1e-3), TG_EINVAL,
            "'eps' is not an option of rprop");
    tg_optimizer_free(o);
    tg_lbfgs_opts lo = TG_LBFGS_OPTS_INIT;
    cr_assert(eq(int, tg_lbfgs_new(&o, 1, &p, &lo), TG_OK));
    cr_assert(eq(int, tg_optimizer_set_group_option(o, 0, "history_size", 5), TG_OK));
    cr_assert(eq(int, tg_optimizer_set_group_option(o, 0, "line_search_fn", 1), TG_OK));
    cr_assert(eq(int, tg_optimizer_get_group_option(o, 0, "line_search_fn", &v), TG_OK));
    cr_assert(eq(dbl, v, 1.0));
    REFUSED(tg_optimizer_set_group_option(o, 0, "history_size", 0), TG_EINVAL,
            "history_size=0 must be an integer");
    tg_optimizer_free(o);
    tg_tensor_release(p);
    tg_tensor_release(q);
}

/* torch's Adagrad makes its state in its constructor: right after it, the
 * state holds step 0 and sum = initial_accumulator_value for each parameter
 * (torch's state_dict() before any step); a group added later gets its
 * state at its first step, as torch's (which has none for it). */
Test(optim_more, adagrad_state_exists_from_the_constructor)
{
    uint64_t s = 17;
    tg_tensor *p[3] = {th_rand_tensor(&s, TG_F32, 2, (int64_t[]){2, 3}, -1, 1),
                       th_rand_tensor(&s, TG_F64, 1, (int64_t[]){4}, -1, 1),
                       th_rand_tensor(&s, TG_BF16, 1, (int64_t[]){2}, -1, 1)};
    for (int i = 0; i < 3; i++) OK(tg_tensor_set_requires_grad(p[i], true));
    tg_adagrad_opts ao = TG_ADAGRAD_OPTS_INIT;
    ao.initial_accumulator_value = 0.25;
    tg_optimizer *o = NULL;
    OK(tg_adagrad_new(&o, 2, p, &ao));
    OK(tg_adagrad_add_param_group(o, 1, &p[2], &ao));
    tg_st_file *f = NULL;
    OK(tg_st_new(&f));
    OK(tg_optimizer_state_save(o, f, "o"));
    static const char *const sums[2] = {"o.0.sum", "o.1.sum"};
    for (int i = 0; i < 2; i++) {
        const tg_tensor *sum = tg_st_get(f, sums[i]);
        cr_assert(sum != NULL, "no %s", sums[i]);
        cr_assert(eq(i64, tg_tensor_numel(sum), tg_tensor_numel(p[i])));
        for (int64_t j = 0; j < tg_tensor_numel(sum); j++) {
            double v;
            OK(tg_tensor_get_flat(sum, j, &v));
            cr_assert(v == 0.25, "%s[%lld] = %g", sums[i], (long long)j, v);
        }
        char k[16];
        snprintf(k, sizeof k, "o.%d.step", i);
        double st = -1;
        cr_assert(tg_st_get(f, k) != NULL, "no %s", k);
        OK(tg_tensor_get_flat(tg_st_get(f, k), 0, &st));
        cr_assert(st == 0, "%s = %g", k, st);
    }
    cr_assert(tg_st_get(f, "o.2.sum") == NULL, "the added group has state before a step");
    tg_st_free(f);
    tg_optimizer_free(o);
    th_release_all(3, p);
}

/* tg_optimizer_copy_group_options (ZeroRedundancyOptimizer's
 * _sync_param_groups): every option of one group becomes another
 * optimizer's group's, which then steps as an optimizer made with those
 * options; another kind, a group out of range and an amsgrad change once
 * the group has state are refused with nothing changed. */
Test(optim_more, copy_group_options_gives_every_option_of_a_group)
{
    uint64_t s = 23;
    tg_tensor *p[3] = {th_rand_tensor(&s, TG_F32, 1, (int64_t[]){5}, -1, 1),
                       th_rand_tensor(&s, TG_F32, 1, (int64_t[]){5}, -1, 1),
                       th_rand_tensor(&s, TG_F32, 1, (int64_t[]){5}, -1, 1)};
    tg_tensor *q = NULL;
    OK(tg_tensor_clone(&q, p[2]));
    for (int i = 0; i < 3; i++) OK(tg_tensor_set_requires_grad(p[i], true));
    OK(tg_tensor_set_requires_grad(q, true));
    tg_adam_opts a = TG_ADAM_OPTS_INIT, b = TG_ADAM_OPTS_INIT;
    b.lr = 0.05, b.beta1 = 0.7, b.beta2 = 0.95, b.eps = 1e-4, b.weight_decay = 0.1;
    b.amsgrad = true, b.maximize = true;
    tg_optimizer *src = NULL, *dst = NULL, *want = NULL, *sgd = NULL;
    OK(tg_adam_new(&src, 1, &p[0], &a));
    OK(tg_adam_add_param_group(src, 1, &p[1], &b));
    OK(tg_adam_new(&dst, 1, &p[2], &a));
    OK(tg_adam_new(&want, 1, &q, &b));
    OK(tg_optimizer_copy_group_options(dst, 0, src, 1));
    static const char *const keys[] = {"lr", "beta1", "beta2", "eps", "weight_decay",
                                       "amsgrad", "maximize"};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        double u = 0, v = 0;
        OK(tg_optimizer_get_group_option(dst, 0, keys[k], &u));
        OK(tg_optimizer_get_group_option(want, 0, keys[k], &v));
        cr_assert(u == v, "%s: %g, want %g", keys[k], u, v);
    }
    for (int k = 0; k < 3; k++) {
        const float g[5] = {0.5f - k, 0.25f * k, -1.0f, 2.0f, 0.125f};
        tg_tensor *gp = NULL, *gq = NULL;
        OK(tg_tensor_from_data(&gp, TG_F32, 1, (int64_t[]){5}, g));
        OK(tg_tensor_from_data(&gq, TG_F32, 1, (int64_t[]){5}, g));
        tg_tensor_set_grad(p[2], gp);
        tg_tensor_set_grad(q, gq);
        OK(tg_optimizer_step(dst));
        OK(tg_optimizer_step(want));
    }
    cr_assert(memcmp(tg_tensor_cdata(p[2]), tg_tensor_cdata(q), 5 * sizeof(float)) == 0);
    /* amsgrad off from group 0 of src: dst's group has state */
    REFUSED(tg_optimizer_copy_group_options(dst, 0, src, 0), TG_EINVAL,
            "amsgrad, centered or history_size of dst's group 0");
    double lr = 0;
    OK(tg_optimizer_get_group_option(dst, 0, "lr", &lr));
    cr_assert(lr == b.lr, "a refused copy changed lr to %g", lr);
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    OK(tg_sgd_new(&sgd, 1, &p[0], &so));
    REFUSED(tg_optimizer_copy_group_options(sgd, 0, src, 0), TG_EINVAL,
            "dst is sgd, src adam; one kind only");
    REFUSED(tg_optimizer_copy_group_options(dst, 1, src, 0), TG_EINVAL, "dst_group=1");
    REFUSED(tg_optimizer_copy_group_options(dst, 0, src, 2), TG_EINVAL, "src_group=2");
    REFUSED(tg_optimizer_copy_group_options(NULL, 0, src, 0), TG_EINVAL, "must not be NULL");
    tg_optimizer_free(src);
    tg_optimizer_free(dst);
    tg_optimizer_free(want);
    tg_optimizer_free(sgd);
    tg_tensor_release(q);
    th_release_all(3, p);
}
