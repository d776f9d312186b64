/* src/nn/optim_groups.c - an optimizer's param groups (torch's
 * optimizer.param_groups): the checks of parameters and hyperparameters the
 * constructors and tg_*_add_param_group share, adding a group, and the
 * learning rate of one group or of all. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "optim_internal.h"

tg__opt_hparams tg__opt_sgd_hparams(const tg_sgd_opts *o)
{
    return (tg__opt_hparams){.lr = o->lr, .momentum = o->momentum, .dampening = o->dampening,
                             .weight_decay = o->weight_decay, .nesterov = o->nesterov,
                             .maximize = o->maximize};
}

tg__opt_hparams tg__opt_sparse_adam_hparams(const tg_sparse_adam_opts *o)
{
    return (tg__opt_hparams){.lr = o->lr, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps,
                             .maximize = o->maximize};
}

tg__opt_hparams tg__opt_adam_hparams(const tg_adam_opts *o)
{
    return (tg__opt_hparams){.lr = o->lr, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps,
                             .weight_decay = o->weight_decay, .amsgrad = o->amsgrad,
                             .maximize = o->maximize};
}

tg__opt_hparams tg__opt_rmsprop_hparams(const tg_rmsprop_opts *o)
{
    return (tg__opt_hparams){.lr = o->lr, .alpha = o->alpha, .eps = o->eps,
                             .weight_decay = o->weight_decay, .momentum = o->momentum,
                             .centered = o->centered, .maximize = o->maximize};
}

tg__opt_hparams tg__opt_adagrad_hparams(const tg_adagrad_opts *o)
{
    return (tg__opt_hparams){.lr = o->lr, .lr_decay = o->lr_decay,
                             .weight_decay = o->weight_decay,
                             .initial_accumulator_value = o->initial_accumulator_value,
                             .eps = o->eps, .maximize = o->maximize};
}

tg__opt_hparams tg__opt_adamax_hparams(const tg_adamax_opts *o)
{
    return (tg__opt_hparams){.lr = o->lr, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps,
                             .weight_decay = o->weight_decay, .maximize = o->maximize};
}

tg__opt_hparams tg__opt_nadam_hparams(const tg_nadam_opts *o)
{
    return (tg__opt_hparams){.lr = o->lr, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps,
                             .weight_decay = o->weight_decay,
                             .momentum_decay = o->momentum_decay};
}

tg__opt_hparams tg__opt_radam_hparams(const tg_radam_opts *o)
{
    return (tg__opt_hparams){.lr = o->lr, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps,
                             .weight_decay = o->weight_decay};
}

tg__opt_hparams tg__opt_adadelta_hparams(const tg_adadelta_opts *o)
{
    return (tg__opt_hparams){.lr = o->lr, .rho = o->rho, .eps = o->eps,
                             .weight_decay = o->weight_decay, .maximize = o->maximize};
}

tg__opt_hparams tg__opt_rprop_hparams(const tg_rprop_opts *o)
{
    return (tg__opt_hparams){.lr = o->lr, .eta_minus = o->eta_minus, .eta_plus = o->eta_plus,
                             .step_size_min = o->step_size_min,
                             .step_size_max = o->step_size_max, .maximize = o->maximize};
}

tg__opt_hparams tg__opt_lbfgs_hparams(const tg_lbfgs_opts *o)
{
    /* torch's max_eval=None: max_iter * 5 // 4 */
    const double max_eval = o->max_eval == 0 ? (double)((int64_t)o->max_iter * 5 / 4)
                                             : (double)o->max_eval;
    return (tg__opt_hparams){.lr = o->lr, .max_iter = o->max_iter, .max_eval = max_eval,
                             .tolerance_grad = o->tolerance_grad,
                             .tolerance_change = o->tolerance_change,
                             .history_size = o->history_size, .strong_wolfe = o->strong_wolfe};
}

tg__opt_hparams tg__opt_asgd_hparams(const tg_asgd_opts *o)
{
    return (tg__opt_hparams){.lr = o->lr, .lambd = o->lambd, .alpha = o->alpha, .t0 = o->t0,
                             .weight_decay = o->weight_decay, .maximize = o->maximize};
}

/* ---- checks ------------------------------------------------------------------ */

/* A hyperparameter's name in messages: the option's (beta1), or with a
 * prefix the state key's, after the group's index when group >= 0
 * ('opt.betas'[0], 'opt.betas'[1][0]); into buf (NAME_MAX_LEN bytes). */
#define NAME_MAX_LEN 300
static const char *hp_name(char *buf, const char *prefix, int group, const char *opt,
                           const char *key, int index)
{
    if (!prefix) return opt;
    int len = snprintf(buf, NAME_MAX_LEN, "'%s.%s'", prefix, key);
    if (group >= 0 && len > 0 && len < NAME_MAX_LEN)
        len += snprintf(buf + len, (size_t)(NAME_MAX_LEN - len), "[%d]", group);
    if (index >= 0 && len > 0 && len < NAME_MAX_LEN)
        snprintf(buf + len, (size_t)(NAME_MAX_LEN - len), "[%d]", index);
    return buf;
}

/* !(x >= 0) also rejects NaN. */
int tg__opt_check_hparams(tg__opt_kind k, const tg__opt_hparams *h, const char *what,
                          const char *prefix, int group)
{
    char n[NAME_MAX_LEN];
    const int g = group;
    TG_CHECK(h->lr >= 0 && isfinite(h->lr), TG_EINVAL, "%s: %s=%g must be finite and >= 0",
             what, hp_name(n, prefix, g, "lr", "lr", -1), h->lr);
    TG_CHECK(h->weight_decay >= 0, TG_EINVAL, "%s: %s=%g must be >= 0", what,
             hp_name(n, prefix, g, "weight_decay", "weight_decay", -1), h->weight_decay);
    if (k == TG__OPT_SGD) {
        TG_CHECK(h->momentum >= 0, TG_EINVAL, "%s: %s=%g must be >= 0", what,
                 hp_name(n, prefix, g, "momentum", "momentum", -1), h->momentum);
        TG_CHECK(isfinite(h->dampening), TG_EINVAL, "%s: %s=%g must be finite", what,
                 hp_name(n, prefix, g, "dampening", "dampening", -1), h->dampening);
        TG_CHECK(!h->nesterov || (h->momentum > 0 && h->dampening == 0), TG_EINVAL,
                 "%s: %s requires momentum > 0 and dampening == 0 (got momentum=%g, "
                 "dampening=%g)", what, hp_name(n, prefix, g, "nesterov", "nesterov", -1),
                 h->momentum, h->dampening);
        return TG_OK;
    }
    if (k == TG__OPT_LBFGS) {   /* torch checks none of these */
        const struct {
            const char *name;
            double v, lo;
        } counts[3] = {{"max_iter", h->max_iter, 1}, {"max_eval", h->max_eval, 0},
                       {"history_size", h->history_size, 1}};
        for (int i = 0; i < 3; i++)
            TG_CHECK(counts[i].v >= counts[i].lo && counts[i].v <= INT_MAX &&
                         counts[i].v == floor(counts[i].v),
                     TG_EINVAL, "%s: %s=%g must be an integer in [%g, %d]", what,
                     hp_name(n, prefix, g, counts[i].name, counts[i].name, -1), counts[i].v,
                     counts[i].lo, INT_MAX);
        TG_CHECK(h->tolerance_grad >= 0, TG_EINVAL, "%s: %s=%g must be >= 0", what,
                 hp_name(n, prefix, g, "tolerance_grad", "tolerance_grad", -1),
                 h->tolerance_grad);
        TG_CHECK(h->tolerance_change >= 0, TG_EINVAL, "%s: %s=%g must be >= 0", what,
                 hp_name(n, prefix, g, "tolerance_change", "tolerance_change", -1),
                 h->tolerance_change);
        return TG_OK;
    }
    if (k == TG__OPT_ASGD) {   /* torch checks lr and weight_decay only */
        const double v[3] = {h->lambd, h->alpha, h->t0};
        const char *names[3] = {"lambd", "alpha", "t0"};
        for (int i = 0; i < 3; i++)
            TG_CHECK(!isnan(v[i]), TG_EINVAL, "%s: %s=nan must be a number", what,
                     hp_name(n, prefix, g, names[i], names[i], -1));
        return TG_OK;
    }
    if (k == TG__OPT_RPROP) {   /* torch's check; the step sizes are not checked there */
        TG_CHECK(h->eta_minus > 0 && h->eta_minus < 1 && h->eta_plus > 1, TG_EINVAL,
                 "%s: %s=(%g, %g) must be 0 < eta_minus < 1 < eta_plus", what,
                 hp_name(n, prefix, g, "etas", "etas", -1), h->eta_minus, h->eta_plus);
        return TG_OK;
    }
    TG_CHECK(h->eps >= 0, TG_EINVAL, "%s: %s=%g must be >= 0", what,
             hp_name(n, prefix, g, "eps", "eps", -1), h->eps);
    if (k == TG__OPT_RMSPROP) {   /* torch's checks: no upper bound on alpha */
        TG_CHECK(h->momentum >= 0, TG_EINVAL, "%s: %s=%g must be >= 0", what,
                 hp_name(n, prefix, g, "momentum", "momentum", -1), h->momentum);
        TG_CHECK(h->alpha >= 0, TG_EINVAL, "%s: %s=%g must be >= 0", what,
                 hp_name(n, prefix, g, "alpha", "alpha", -1), h->alpha);
        return TG_OK;
    }
    if (k == TG__OPT_ADAGRAD) {   /* torch's checks */
        TG_CHECK(h->lr_decay >= 0, TG_EINVAL, "%s: %s=%g must be >= 0", what,
                 hp_name(n, prefix, g, "lr_decay", "lr_decay", -1), h->lr_decay);
        TG_CHECK(h->initial_accumulator_value >= 0, TG_EINVAL, "%s: %s=%g must be >= 0", what,
                 hp_name(n, prefix, g, "initial_accumulator_value", "initial_accumulator_value",
                         -1), h->initial_accumulator_value);
        return TG_OK;
    }
    if (k == TG__OPT_ADADELTA) {   /* torch's check */
        TG_CHECK(h->rho >= 0 && h->rho <= 1, TG_EINVAL, "%s: %s=%g must be in [0, 1]", what,
                 hp_name(n, prefix, g, "rho", "rho", -1), h->rho);
        return TG_OK;
    }
    if (k == TG__OPT_SPARSE_ADAM) {   /* torch's checks: 0 < lr, 0 < eps */
        TG_CHECK(h->lr > 0, TG_EINVAL, "%s: %s=%g must be > 0", what,
                 hp_name(n, prefix, g, "lr", "lr", -1), h->lr);
        TG_CHECK(h->eps > 0, TG_EINVAL, "%s: %s=%g must be > 0", what,
                 hp_name(n, prefix, g, "eps", "eps", -1), h->eps);
    }
    if (k == TG__OPT_NADAM)
        TG_CHECK(h->momentum_decay >= 0, TG_EINVAL, "%s: %s=%g must be >= 0", what,
                 hp_name(n, prefix, g, "momentum_decay", "momentum_decay", -1),
                 h->momentum_decay);
    TG_CHECK(h->beta1 >= 0 && h->beta1 < 1, TG_EINVAL, "%s: %s=%g must be in [0, 1)", what,
             hp_name(n, prefix, g, "beta1", "betas", 0), h->beta1);
    TG_CHECK(h->beta2 >= 0 && h->beta2 < 1, TG_EINVAL, "%s: %s=%g must be in [0, 1)", what,
             hp_name(n, prefix, g, "beta2", "betas", 1), h->beta2);
    return TG_OK;
}

/* The group of opt holding parameter i. */
static int group_of(const tg_optimizer *opt, int i)
{
    int g = 0;
    while (i >= opt->groups[g].end) g++;
    return g;
}

int tg__opt_check_params(const char *what, const tg_optimizer *opt, int n,
                         tg_tensor *const *params)
{
    /* n 0: an empty group, as torch's {"params": []} */
    TG_CHECK(n >= 0, TG_EINVAL, "%s: n_params=%d must be >= 0", what, n);
    TG_CHECK(params != NULL || n == 0, TG_EINVAL, "%s: params must not be NULL", what);
    for (int i = 0; i < n; i++) {
        const tg_tensor *p = params[i];
        TG_CHECK(p != NULL, TG_EINVAL, "%s: params[%d] must not be NULL", what, i);
        TG_CHECK(tg_dtype_is_float(p->dtype), TG_EDTYPE,
                 "%s: params[%d] has dtype %s; float dtypes only", what, i,
                 tg_dtype_name(p->dtype));
        TG_CHECK(p->grad_fn == NULL, TG_EINVAL,
                 "%s: params[%d] is not a leaf (an optimizer updates leaves only)", what, i);
        for (int j = 0; j < i; j++)
            TG_CHECK(params[j] != p, TG_EINVAL,
                     "%s: params[%d] is params[%d] again (each parameter at most once)", what, i,
                     j);
        for (int j = 0; opt && j < opt->n; j++)
            TG_CHECK(opt->params[j] != p, TG_EINVAL,
                     "%s: params[%d] is already in param group %d (each parameter in one group)",
                     what, i, group_of(opt, j));
    }
    return TG_OK;
}

/* ---- adding a group ------------------------------------------------------------ */

/* Appends params[0..n) (retained) as a new group with h, all checked first;
 * on error opt is unchanged. */
static int add_group(const char *what, tg_optimizer *opt, int n, tg_tensor *const *params,
                     const tg__opt_hparams *h)
{
    TG_TRY(tg__opt_check_params(what, opt, n, params));
    TG_TRY(tg__opt_check_hparams(opt->kind, h, what, NULL, -1));
    TG_CHECK(n <= INT_MAX - opt->n && opt->n_groups < INT_MAX, TG_EINVAL,
             "%s: too many parameters (%d + %d)", what, opt->n, n);
    const int total = opt->n + n;
    tg_tensor **ps = tg__calloc((size_t)total, sizeof *ps);
    tg__opt_state *st = tg__calloc((size_t)total, sizeof *st);
    tg__opt_group *gs = tg__calloc((size_t)opt->n_groups + 1, sizeof *gs);
    if (!ps || !st || !gs) {
        free(ps);
        free(st);
        free(gs);
        return TG_ENOMEM;
    }
    memcpy(ps, opt->params, (size_t)opt->n * sizeof *ps);
    memcpy(st, opt->state, (size_t)opt->n * sizeof *st);   /* the buffers move over */
    memcpy(gs, opt->groups, (size_t)opt->n_groups * sizeof *gs);
    for (int i = 0; i < n; i++) ps[opt->n + i] = tg_tensor_retain(params[i]);
    gs[opt->n_groups] = (tg__opt_group){.begin = opt->n, .end = total, .h = *h,
                                        .initial_lr = NAN};
    free(opt->params);
    free(opt->state);
    free(opt->groups);
    opt->params = ps;
    opt->state = st;
    opt->groups = gs;
    opt->n = total;
    opt->n_groups++;
    return TG_OK;
}

/* TG_EINVAL unless opt is of family `want` (SGD; Adam and AdamW; RMSprop;
 * Adagrad; Adamax; NAdam; RAdam; Adadelta; Rprop), the one that what's
 * function adds to. */
static int check_family(const char *what, const tg_optimizer *opt, tg__opt_kind want)
{
    static const char *const adds[] = {"an SGD", "Adam and AdamW", "Adam and AdamW",
                                       "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam",
                                       "Adadelta", "Rprop", "L-BFGS", "ASGD", "SparseAdam"};
    static const char *const fns[] = {"tg_sgd_add_param_group", "tg_adam_add_param_group",
                                      "tg_adam_add_param_group", "tg_rmsprop_add_param_group",
                                      "tg_adagrad_add_param_group", "tg_adamax_add_param_group",
                                      "tg_nadam_add_param_group", "tg_radam_add_param_group",
                                      "tg_adadelta_add_param_group", "tg_rprop_add_param_group",
                                      "none", "tg_asgd_add_param_group",
                                      "tg_sparse_adam_add_param_group"};
    _Static_assert(sizeof adds / sizeof *adds == TG__OPT_N_KINDS &&
                   sizeof fns / sizeof *fns == TG__OPT_N_KINDS, "an entry per kind");
    TG_CHECK(opt != NULL, TG_EINVAL, "%s: opt must not be NULL", what);
    const tg__opt_kind k = opt->kind == TG__OPT_ADAMW ? TG__OPT_ADAM : opt->kind;
    TG_CHECK(k != TG__OPT_LBFGS, TG_EINVAL,
             "%s: opt is 'lbfgs', which has one param group (as torch's LBFGS)", what);
    TG_CHECK(k == want, TG_EINVAL, "%s: opt is '%s'; %s adds to %s (%s to %s)", what,
             tg__opt_kind_name(opt->kind), fns[want], adds[want], fns[k], adds[k]);
    return TG_OK;
}

/* tg_<name>_add_param_group: NULL options are the constructor's, others
 * converted by hp; family is the kind whose optimizers it adds to. */
#define ADD_GROUP(name, family, opts_t, hp)                                              \
    int tg_##name##_add_param_group(tg_optimizer *opt, int n_params,                    \
                                    tg_tensor *const *params, const opts_t *opts)       \
    {                                                                                   \
        const char *what = #name "_add_param_group";                                    \
        TG_TRY(check_family(what, opt, family));                                        \
        tg__opt_hparams h = opts ? hp(opts) : opt->defaults;                            \
        return add_group(what, opt, n_params, params, &h);                              \
    }

ADD_GROUP(sgd, TG__OPT_SGD, tg_sgd_opts, tg__opt_sgd_hparams)
ADD_GROUP(adam, TG__OPT_ADAM, tg_adam_opts, tg__opt_adam_hparams)
ADD_GROUP(rmsprop, TG__OPT_RMSPROP, tg_rmsprop_opts, tg__opt_rmsprop_hparams)
ADD_GROUP(adagrad, TG__OPT_ADAGRAD, tg_adagrad_opts, tg__opt_adagrad_hparams)
ADD_GROUP(adamax, TG__OPT_ADAMAX, tg_adamax_opts, tg__opt_adamax_hparams)
ADD_GROUP(nadam, TG__OPT_NADAM, tg_nadam_opts, tg__opt_nadam_hparams)
ADD_GROUP(radam, TG__OPT_RADAM, tg_radam_opts, tg__opt_radam_hparams)
ADD_GROUP(adadelta, TG__OPT_ADADELTA, tg_adadelta_opts, tg__opt_adadelta_hparams)
ADD_GROUP(rprop, TG__OPT_RPROP, tg_rprop_opts, tg__opt_rprop_hparams)
ADD_GROUP(asgd, TG__OPT_ASGD, tg_asgd_opts, tg__opt_asgd_hparams)
ADD_GROUP(sparse_adam, TG__OPT_SPARSE_ADAM, tg_sparse_adam_opts, tg__opt_sparse_adam_hparams)
#undef ADD_GROUP

int tg_optimizer_param_group_count(const tg_optimizer *opt) { return opt ? opt->n_groups : 0; }

/* ---- learning rates ------------------------------------------------------------ */

static int check_lr(const char *what, double lr)
{
    TG_CHECK(lr >= 0 && isfinite(lr), TG_EINVAL, "%s: lr=%g must be finite and >= 0", what, lr);
    return TG_OK;
}

int tg_optimizer_set_lr(tg_optimizer *opt, double lr)
{
    TG_CHECK(opt != NULL, TG_EINVAL, "optimizer_set_lr: opt must not be NULL");
    TG_TRY(check_lr("optimizer_set_lr", lr));
    for (int g = 0; g < opt->n_groups; g++) opt->groups[g].h.lr = lr;
    return TG_OK;
}

double tg_optimizer_get_lr(const tg_optimizer *opt) { return opt ? opt->groups[0].h.lr : NAN; }

int tg_optimizer_set_group_lr(tg_optimizer *opt, int group, double lr)
{
    const char *what = "optimizer_set_group_lr";
    TG_CHECK(opt != NULL, TG_EINVAL, "%s: opt must not be NULL", what);
    TG_CHECK(group >= 0 && group < opt->n_groups, TG_EINVAL,
             "%s: group=%d must be in [0, %d) (the optimizer's param groups)", what, group,
             opt->n_groups);
    TG_TRY(check_lr(what, lr));
    opt->groups[group].h.lr = lr;
    return TG_OK;
}

double tg_optimizer_get_group_lr(const tg_optimizer *opt, int group)
{
    return opt && group >= 0 && group < opt->n_groups ? opt->groups[group].h.lr : NAN;
}

/* ---- momentum (cycled by OneCycleLR and CyclicLR) -------------------------------- */

/* The field of h that torch's schedulers cycle for kind k. */
static double *momentum_of(tg__opt_kind k, tg__opt_hparams *h)
{
    if (k == TG__OPT_SGD || k == TG__OPT_RMSPROP) return &h->momentum;
    return tg__opt_momentum_is_beta1(k) ? &h->beta1 : NULL;
}

int tg__opt_check_group_momentum(const tg_optimizer *opt, int g, double momentum,
                                 const char *what)
{
    tg__opt_hparams h = opt->groups[g].h;
    double *m = momentum_of(opt->kind, &h);
    TG_CHECK(m != NULL, TG_EINVAL, "%s: %s has no momentum (nor beta1)", what,
             tg__opt_kind_name(opt->kind));
    TG_CHECK(isfinite(momentum), TG_EINVAL, "%s: momentum=%g must be finite", what, momentum);
    const bool was = *m > 0;
    *m = momentum;
    TG_TRY(tg__opt_check_hparams(opt->kind, &h, what, NULL, -1));
    if (opt->kind != TG__OPT_RMSPROP || was == (momentum > 0)) return TG_OK;
    for (int i = opt->groups[g].begin; i < opt->groups[g].end; i++)
        TG_CHECK(opt->state[i].buf[0] == NULL, TG_EINVAL,
                 "%s: rmsprop param group %d has state made with momentum %s 0; momentum=%g "
                 "would %s its momentum buffer", what, g, was ? ">" : "==", momentum,
                 was ? "stop using" : "need");
    return TG_OK;
}

void tg__opt_set_group_momentum(tg_optimizer *opt, int g, double momentum)
{
    *momentum_of(opt->kind, &opt->groups[g].h) = momentum;
}

int tg_optimizer_set_group_momentum(tg_optimizer *opt, int group, double momentum)
{
    const char *what = "optimizer_set_group_momentum";
    TG_CHECK(opt != NULL, TG_EINVAL, "%s: opt must not be NULL", what);
    TG_CHECK(group >= 0 && group < opt->n_groups, TG_EINVAL,
             "%s: group=%d must be in [0, %d) (the optimizer's param groups)", what, group,
             opt->n_groups);
    TG_TRY(tg__opt_check_group_momentum(opt, group, momentum, what));
    tg__opt_set_group_momentum(opt, group, momentum);
    return TG_OK;
}

double tg_optimizer_get_group_momentum(const tg_optimizer *opt, int group)
{
    if (!opt || group < 0 || group >= opt->n_groups) return NAN;
    tg__opt_hparams h = opt->groups[group].h;
    const double *m = momentum_of(opt->kind, &h);
    return m ? *m : NAN;
}
