/* src/nn/optim_options.c - the optimizers' hyperparameters under torch's
 * param_group keys (the table state files and the option accessors go
 * through), and reading or changing one option of a param group
 * (opt.param_groups[g][name]). */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "optim_internal.h"

enum {   /* the kinds that have an entry */
    K_SGD = 1, K_ADAM = 2, K_RMS = 4, K_ADAGRAD = 8, K_ADAMAX = 16, K_NADAM = 32, K_RADAM = 64,
    K_ADADELTA = 128, K_RPROP = 256, K_LBFGS = 512, K_ASGD = 1024, K_SPARSE_ADAM = 2048,
    K_BETAS = K_ADAM | K_ADAMAX | K_NADAM | K_RADAM | K_SPARSE_ADAM,
};
#define HP(field) offsetof(tg__opt_hparams, field)
const tg__hp_entry tg__opt_hps[] = {
    {"momentum", NULL, NULL, K_SGD | K_RMS, TG__HP_REAL, HP(momentum), 0},
    {"dampening", NULL, NULL, K_SGD, TG__HP_REAL, HP(dampening), 0},
    {"nesterov", NULL, NULL, K_SGD, TG__HP_FLAG, HP(nesterov), 0},
    {"betas", "beta1", "beta2", K_BETAS, TG__HP_PAIR, HP(beta1), HP(beta2)},
    {"alpha", NULL, NULL, K_RMS | K_ASGD, TG__HP_REAL, HP(alpha), 0},
    {"lambd", NULL, NULL, K_ASGD, TG__HP_REAL, HP(lambd), 0},
    {"t0", NULL, NULL, K_ASGD, TG__HP_REAL, HP(t0), 0},
    {"rho", NULL, NULL, K_ADADELTA, TG__HP_REAL, HP(rho), 0},
    {"etas", "eta_minus", "eta_plus", K_RPROP, TG__HP_PAIR, HP(eta_minus), HP(eta_plus)},
    {"step_sizes", "step_size_min", "step_size_max", K_RPROP, TG__HP_PAIR, HP(step_size_min),
     HP(step_size_max)},
    {"lr_decay", NULL, NULL, K_ADAGRAD, TG__HP_REAL, HP(lr_decay), 0},
    {"eps", NULL, NULL, K_BETAS | K_RMS | K_ADAGRAD | K_ADADELTA, TG__HP_REAL, HP(eps), 0},
    {"amsgrad", NULL, NULL, K_ADAM, TG__HP_FLAG, HP(amsgrad), 0},
    {"centered", NULL, NULL, K_RMS, TG__HP_FLAG, HP(centered), 0},
    {"initial_accumulator_value", NULL, NULL, K_ADAGRAD, TG__HP_REAL,
     HP(initial_accumulator_value), 0},
    {"momentum_decay", NULL, NULL, K_NADAM, TG__HP_REAL, HP(momentum_decay), 0},
    {"max_iter", NULL, NULL, K_LBFGS, TG__HP_REAL, HP(max_iter), 0},
    {"max_eval", NULL, NULL, K_LBFGS, TG__HP_REAL, HP(max_eval), 0},
    {"tolerance_grad", NULL, NULL, K_LBFGS, TG__HP_REAL, HP(tolerance_grad), 0},
    {"tolerance_change", NULL, NULL, K_LBFGS, TG__HP_REAL, HP(tolerance_change), 0},
    {"history_size", NULL, NULL, K_LBFGS, TG__HP_REAL, HP(history_size), 0},
    {"line_search_fn", NULL, NULL, K_LBFGS, TG__HP_FLAG, HP(strong_wolfe), 0},   /* 1: wolfe */
    {"weight_decay", NULL, NULL,
     K_SGD | (K_BETAS & ~K_SPARSE_ADAM) | K_RMS | K_ADAGRAD | K_ADADELTA | K_ASGD,
     TG__HP_REAL, HP(weight_decay), 0},
    {"maximize", NULL, NULL,
     K_SGD | K_ADAM | K_RMS | K_ADAGRAD | K_ADAMAX | K_ADADELTA | K_RPROP | K_ASGD |
         K_SPARSE_ADAM, TG__HP_FLAG,
     HP(maximize), 0},
};
#undef HP
const int tg__opt_n_hps = (int)(sizeof tg__opt_hps / sizeof *tg__opt_hps);

bool tg__opt_hp_of(const tg__hp_entry *e, tg__opt_kind k)
{
    static const unsigned bit[] = {K_SGD,   K_ADAM,  K_ADAM,     K_RMS,   K_ADAGRAD, K_ADAMAX,
                                   K_NADAM, K_RADAM, K_ADADELTA, K_RPROP, K_LBFGS,   K_ASGD,
                                   K_SPARSE_ADAM};
    _Static_assert(sizeof bit / sizeof *bit == TG__OPT_N_KINDS, "a bit per kind");
    return (e->kinds & bit[k]) != 0;
}

double *tg__opt_hp_real(tg__opt_hparams *h, size_t off) { return (double *)((char *)h + off); }
bool *tg__opt_hp_flag(tg__opt_hparams *h, size_t off) { return (bool *)((char *)h + off); }

/* The entry of kind k named name (a pair's element: *second says which),
 * NULL for lr or a name the kind does not have. */
static const tg__hp_entry *find(tg__opt_kind k, const char *name, bool *second)
{
    for (int e = 0; e < tg__opt_n_hps; e++) {
        const tg__hp_entry *h = &tg__opt_hps[e];
        if (!tg__opt_hp_of(h, k)) continue;
        if (h->form != TG__HP_PAIR && strcmp(h->key, name) == 0) return *second = false, h;
        if (h->form == TG__HP_PAIR && strcmp(h->first, name) == 0) return *second = false, h;
        if (h->form == TG__HP_PAIR && strcmp(h->second, name) == 0) return *second = true, h;
    }
    return NULL;
}

/* opt and group valid, name one of opt's options (lr or an entry). */
static int lookup(const char *what, const tg_optimizer *opt, int group, const char *name,
                  const tg__hp_entry **e, bool *second)
{
    TG_CHECK(opt != NULL && name != NULL, TG_EINVAL, "%s: opt and name must not be NULL",
             what);
    TG_CHECK(group >= 0 && group < opt->n_groups, TG_EINVAL,
             "%s: group=%d must be in [0, %d) (the optimizer's param groups)", what, group,
             opt->n_groups);
    *e = strcmp(name, "lr") == 0 ? NULL : find(opt->kind, name, second);
    TG_CHECK(*e != NULL || strcmp(name, "lr") == 0, TG_EINVAL,
             "%s: '%s' is not an option of %s (tapegrad/optim.h lists each optimizer's)", what,
             name, tg__opt_kind_name(opt->kind));
    return TG_OK;
}

int tg_optimizer_get_group_option(const tg_optimizer *opt, int group, const char *name,
                                  double *value)
{
    const tg__hp_entry *e;
    bool second = false;
    TG_CHECK(value != NULL, TG_EINVAL, "optimizer_get_group_option: value must not be NULL");
    TG_TRY(lookup("optimizer_get_group_option", opt, group, name, &e, &second));
    tg__opt_hparams h = opt->groups[group].h;
    if (!e) *value = h.lr;
    else if (e->form == TG__HP_FLAG) *value = *tg__opt_hp_flag(&h, e->off);
    else *value = *tg__opt_hp_real(&h, second ? e->off2 : e->off);
    return TG_OK;
}

/* Whether a parameter of group g has state (its buffers made). */
static bool group_has_state(const tg_optimizer *opt, int g)
{
    for (int i = opt->groups[g].begin; i < opt->groups[g].end; i++)
        if (opt->state[i].buf[0]) return true;
    return opt->kind == TG__OPT_LBFGS && opt->lbfgs != NULL;
}

int tg_optimizer_set_group_option(tg_optimizer *opt, int group, const char *name, double value)
{
    const char *what = "optimizer_set_group_option";
    const tg__hp_entry *e;
    bool second = false;
    TG_TRY(lookup(what, opt, group, name, &e, &second));
    if (!e) return tg_optimizer_set_group_lr(opt, group, value);
    if ((strcmp(name, "momentum") == 0 || strcmp(name, "beta1") == 0) &&
        tg__opt_momentum_is_beta1(opt->kind) == (strcmp(name, "beta1") == 0))
        return tg_optimizer_set_group_momentum(opt, group, value);
    tg__opt_hparams h = opt->groups[group].h;
    if (e->form == TG__HP_FLAG) {
        TG_CHECK(value == 0 || value == 1, TG_EINVAL, "%s: %s=%g must be 0 or 1", what, name,
                 value);
        *tg__opt_hp_flag(&h, e->off) = value == 1;
    } else {
        *tg__opt_hp_real(&h, second ? e->off2 : e->off) = value;
    }
    TG_TRY(tg__opt_check_hparams(opt->kind, &h, what, NULL, -1));
    /* what shapes the state: its buffers (amsgrad's maximum, RMSprop's
     * centered average) or L-BFGS's history */
    const bool shapes = strcmp(name, "amsgrad") == 0 || strcmp(name, "centered") == 0 ||
                        strcmp(name, "history_size") == 0;
    const tg__opt_hparams *now = &opt->groups[group].h;
    TG_CHECK(!shapes || memcmp(&h, now, sizeof h) == 0 || !group_has_state(opt, group),
             TG_EINVAL, "%s: %s of a param group whose parameters have state (it decides "
             "what the state holds); set it before the first step or make a new optimizer",
             what, name);
    opt->groups[group].h = h;
    return TG_OK;
}

int tg_optimizer_copy_group_options(tg_optimizer *dst, int dst_group, const tg_optimizer *src,
                                    int src_group)
{
    const char *what = "optimizer_copy_group_options";
    TG_CHECK(dst != NULL && src != NULL, TG_EINVAL, "%s: dst and src must not be NULL", what);
    TG_CHECK(dst_group >= 0 && dst_group < dst->n_groups, TG_EINVAL,
             "%s: dst_group=%d must be in [0, %d) (dst's param groups)", what, dst_group,
             dst->n_groups);
    TG_CHECK(src_group >= 0 && src_group < src->n_groups, TG_EINVAL,
             "%s: src_group=%d must be in [0, %d) (src's param groups)", what, src_group,
             src->n_groups);
    TG_CHECK(dst->kind == src->kind, TG_EINVAL, "%s: dst is %s, src %s; one kind only", what,
             tg__opt_kind_name(dst->kind), tg__opt_kind_name(src->kind));
    const tg__opt_hparams *h = &src->groups[src_group].h, *now = &dst->groups[dst_group].h;
    /* src's values passed its own checks; what shapes the state may change
     * only before it exists */
    const bool shapes = h->amsgrad != now->amsgrad || h->centered != now->centered ||
                        h->history_size != now->history_size;
    TG_CHECK(!shapes || !group_has_state(dst, dst_group), TG_EINVAL,
             "%s: amsgrad, centered or history_size of dst's group %d, whose parameters have "
             "state, would change", what, dst_group);
    dst->groups[dst_group].h = *h;
    return TG_OK;
}
