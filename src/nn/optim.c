/* src/nn/optim.c - optimizer objects: construction, the step driver
 * (validate every gradient, create missing state, then update each
 * parameter through a contiguous buffer in its compute dtype, with its param
 * group's hyperparameters) and zero_grad.  Param groups, their options and
 * learning rates are in optim_groups.c, the update rules in optim_update.c,
 * state save/load in optim_state.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "optim_internal.h"
#include "tapegrad/nn.h"
#include "tapegrad/profile.h"

bool tg__opt_has_buf(tg__opt_kind k, const tg__opt_hparams *h, int j)
{
    switch (k) {
    case TG__OPT_SGD: return j == 0 && h->momentum != 0;
    case TG__OPT_RMSPROP: return j == 0 || (j == 1 && h->momentum > 0) || (j == 2 && h->centered);
    case TG__OPT_ADAGRAD: return j == 0;
    case TG__OPT_ADAMAX:
    case TG__OPT_NADAM:
    case TG__OPT_RADAM:
    case TG__OPT_ADADELTA:
    case TG__OPT_RPROP: return j < 2;
    case TG__OPT_LBFGS: return false;   /* its state is optim_lbfgs.c's */
    case TG__OPT_ASGD: return j == 0;
    case TG__OPT_SPARSE_ADAM: return j < 2;
    default: return j < 2 || (j == 2 && h->amsgrad);
    }
}

bool tg__opt_momentum_is_beta1(tg__opt_kind k)
{
    return k == TG__OPT_ADAM || k == TG__OPT_ADAMW || k == TG__OPT_ADAMAX ||
           k == TG__OPT_NADAM || k == TG__OPT_RADAM || k == TG__OPT_SPARSE_ADAM;
}

const char *tg__opt_buf_name(tg__opt_kind k, int j)
{
    static const char *const adam[TG__OPT_MAX_BUFS] = {"exp_avg", "exp_avg_sq",
                                                       "max_exp_avg_sq"};
    static const char *const rms[TG__OPT_MAX_BUFS] = {"square_avg", "momentum_buffer",
                                                      "grad_avg"};
    static const char *const adamax[TG__OPT_MAX_BUFS] = {"exp_avg", "exp_inf", NULL};
    static const char *const adadelta[TG__OPT_MAX_BUFS] = {"square_avg", "acc_delta", NULL};
    static const char *const rprop[TG__OPT_MAX_BUFS] = {"prev", "step_size", NULL};
    if (k == TG__OPT_SGD) return "momentum_buffer";
    if (k == TG__OPT_ADAGRAD) return "sum";
    if (k == TG__OPT_ASGD) return "ax";
    if (k == TG__OPT_ADAMAX) return adamax[j];
    if (k == TG__OPT_ADADELTA) return adadelta[j];
    if (k == TG__OPT_RPROP) return rprop[j];
    return k == TG__OPT_RMSPROP ? rms[j] : adam[j];
}

int tg__opt_n_buf_names(tg__opt_kind k)
{
    if (k == TG__OPT_LBFGS) return 0;
    if (k == TG__OPT_SGD || k == TG__OPT_ADAGRAD || k == TG__OPT_ASGD) return 1;
    if (k == TG__OPT_ADAM || k == TG__OPT_ADAMW || k == TG__OPT_RMSPROP) return TG__OPT_MAX_BUFS;
    /* SparseAdam: exp_avg and exp_avg_sq, Adam's first two names */
    return 2;
}

const char *tg__opt_kind_name(tg__opt_kind k)
{
    static const char *const names[] = {"sgd",    "adam",  "adamw", "rmsprop",  "adagrad",
                                        "adamax", "nadam", "radam", "adadelta", "rprop",
                                        "lbfgs",  "asgd",  "sparse_adam"};
    _Static_assert(sizeof names / sizeof *names == TG__OPT_N_KINDS, "a name per kind");
    return names[k];
}

/* ---- construction -------------------------------------------------------- */

/* A new optimizer of kind k over params (retained), one param group with h,
 * checked first. */
static int opt_new(const char *op, tg__opt_kind k, tg_optimizer **out, int n,
                   tg_tensor *const *params, const tg__opt_hparams *h)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_TRY(tg__opt_check_params(op, NULL, n, params));
    TG_CHECK(n >= 1 || k != TG__OPT_LBFGS, TG_EINVAL,
             "%s: n_params=%d must be >= 1 (L-BFGS has one group, of parameters)", op, n);
    TG_TRY(tg__opt_check_hparams(k, h, op, NULL, -1));
    tg_optimizer *o = tg__calloc(1, sizeof *o);
    tg_tensor **ps = tg__calloc((size_t)n, sizeof *ps);
    tg__opt_state *st = tg__calloc((size_t)n, sizeof *st);
    tg__opt_group *g = tg__calloc(1, sizeof *g);
    if (!o || !ps || !st || !g) {
        free(o);
        free(ps);
        free(st);
        free(g);
        return TG_ENOMEM;
    }
    for (int i = 0; i < n; i++) ps[i] = tg_tensor_retain(params[i]);
    *g = (tg__opt_group){.begin = 0, .end = n, .h = *h, .initial_lr = NAN};
    *o = (tg_optimizer){.kind = k, .n = n, .params = ps, .state = st, .n_groups = 1,
                        .groups = g, .defaults = *h};
    /* torch's Adagrad makes its state in its constructor: step 0 and sum =
     * initial_accumulator_value for each parameter (of this first group
     * only; add_param_group's get theirs at their first step) */
    for (int i = 0; k == TG__OPT_ADAGRAD && i < n; i++) {
        const tg_tensor *p = ps[i];
        st[i].buf[0] = tg__tensor_empty(tg__compute_dtype(p->dtype), p->ndim, p->shape);
        const int rc = st[i].buf[0] ? tg_tensor_fill(st[i].buf[0], h->initial_accumulator_value)
                                    : TG_ENOMEM;
        if (rc < 0) {
            tg_optimizer_free(o);
            return rc;
        }
    }
    *out = o;
    return TG_OK;
}

/* A new optimizer over a module's parameters (tg_module_parameters). */
typedef int (*make_fn)(tg_optimizer **out, int n, tg_tensor *const *params, const void *opts);

static int from_module(const char *what, tg_optimizer **out, const tg_module *m,
                       const void *opts, make_fn make)
{
    TG_CHECK(out != NULL && m != NULL, TG_EINVAL, "%s: out and m must not be NULL", what);
    tg_tensor **params = NULL;
    int n = 0;
    TG_TRY(tg_module_parameters(m, &params, &n));
    int rc = n > 0 ? make(out, n, params, opts)
                   : tg__error(TG_EINVAL, "%s: module %s has no parameters", what,
                               tg_module_type_name(m));
    free(params);
    return rc;
}

/* tg_<name>_new (its options NULL refused, converted by hp) and
 * tg_<name>_from_module, for each kind. */
#define OPTIMIZER(name, KIND, opts_t, hp, INIT)                                          \
    int tg_##name##_new(tg_optimizer **out, int n, tg_tensor *const *params,           \
                        const opts_t *opts)                                             \
    {                                                                                   \
        TG_CHECK(opts != NULL, TG_EINVAL, #name ": opts must not be NULL (use " #INIT ")"); \
        tg__opt_hparams h = hp(opts);                                                   \
        return opt_new(#name, KIND, out, n, params, &h);                                \
    }                                                                                   \
    static int make_##name(tg_optimizer **out, int n, tg_tensor *const *p, const void *o) \
    {                                                                                   \
        return tg_##name##_new(out, n, p, o);                                           \
    }                                                                                   \
    int tg_##name##_from_module(tg_optimizer **out, const tg_module *m, const opts_t *opts) \
    {                                                                                   \
        return from_module(#name "_from_module", out, m, opts, make_##name);            \
    }

OPTIMIZER(sgd, TG__OPT_SGD, tg_sgd_opts, tg__opt_sgd_hparams, TG_SGD_OPTS_INIT)
OPTIMIZER(adam, TG__OPT_ADAM, tg_adam_opts, tg__opt_adam_hparams, TG_ADAM_OPTS_INIT)
OPTIMIZER(adamw, TG__OPT_ADAMW, tg_adam_opts, tg__opt_adam_hparams, TG_ADAMW_OPTS_INIT)
OPTIMIZER(rmsprop, TG__OPT_RMSPROP, tg_rmsprop_opts, tg__opt_rmsprop_hparams,
          TG_RMSPROP_OPTS_INIT)
OPTIMIZER(adagrad, TG__OPT_ADAGRAD, tg_adagrad_opts, tg__opt_adagrad_hparams,
          TG_ADAGRAD_OPTS_INIT)
OPTIMIZER(adamax, TG__OPT_ADAMAX, tg_adamax_opts, tg__opt_adamax_hparams, TG_ADAMAX_OPTS_INIT)
OPTIMIZER(nadam, TG__OPT_NADAM, tg_nadam_opts, tg__opt_nadam_hparams, TG_NADAM_OPTS_INIT)
OPTIMIZER(radam, TG__OPT_RADAM, tg_radam_opts, tg__opt_radam_hparams, TG_RADAM_OPTS_INIT)
OPTIMIZER(adadelta, TG__OPT_ADADELTA, tg_adadelta_opts, tg__opt_adadelta_hparams,
          TG_ADADELTA_OPTS_INIT)
OPTIMIZER(rprop, TG__OPT_RPROP, tg_rprop_opts, tg__opt_rprop_hparams, TG_RPROP_OPTS_INIT)
OPTIMIZER(asgd, TG__OPT_ASGD, tg_asgd_opts, tg__opt_asgd_hparams, TG_ASGD_OPTS_INIT)
OPTIMIZER(lbfgs, TG__OPT_LBFGS, tg_lbfgs_opts, tg__opt_lbfgs_hparams, TG_LBFGS_OPTS_INIT)
OPTIMIZER(sparse_adam, TG__OPT_SPARSE_ADAM, tg_sparse_adam_opts, tg__opt_sparse_adam_hparams,
          TG_SPARSE_ADAM_OPTS_INIT)
#undef OPTIMIZER

void tg_optimizer_free(tg_optimizer *opt)
{
    if (!opt) return;
    tg__lbfgs_free(opt->lbfgs);
    for (int i = 0; i < opt->n; i++) {
        tg_tensor_release(opt->params[i]);
        for (int j = 0; j < TG__OPT_MAX_BUFS; j++) tg_tensor_release(opt->state[i].buf[j]);
    }
    free(opt->params);
    free(opt->state);
    free(opt->groups);
    free(opt);
}

/* ---- step ----------------------------------------------------------------- */

/* Every gradient must be a float tensor of its parameter's shape, sparse
 * or dense as its kind takes it (tg__opt_check_sparse); returns the largest
 * parameter size in *max_numel. */
static int check_grads(const tg_optimizer *o, int64_t *max_numel)
{
    *max_numel = 1;
    for (int i = 0; i < o->n; i++) {
        const tg_tensor *p = o->params[i], *g = p->grad;
        if (!g) continue;
        int gi = 0;
        while (i >= o->groups[gi].end) gi++;
        TG_TRY(tg__opt_check_sparse(o->kind, &o->groups[gi].h, i, p, g));
        TG_CHECK(tg_dtype_is_float(g->dtype), TG_EDTYPE,
                 "optimizer_step: params[%d].grad has dtype %s; float dtypes only", i,
                 tg_dtype_name(g->dtype));
        if (!tg_tensor_same_shape(p, g)) {
            char a[96], b[96];
            tg_shape_str(a, sizeof a, p->ndim, p->shape);
            tg_shape_str(b, sizeof b, g->ndim, g->shape);
            return tg__error(TG_ESHAPE, "optimizer_step: params[%d].grad has shape %s; "
                             "must equal the parameter's %s", i, b, a);
        }
        int64_t n = tg_tensor_numel(p);
        if (n > *max_numel) *max_numel = n;
    }
    return TG_OK;
}

/* Into fresh[i][j], for each parameter that has a gradient: its missing
 * state buffers (zeros; Adagrad's sum initial_accumulator_value, Rprop's
 * step_size lr), or, when the parameter's dtype changed since they
 * were made (tg_module_to_dtype), its buffers converted to its compute dtype
 * (converted[i]).  Nothing is installed, so on ENOMEM opt is unchanged. */
static int make_state(const tg_optimizer *o, tg_tensor *(*fresh)[TG__OPT_MAX_BUFS],
                      bool *converted)
{
    for (int gi = 0; gi < o->n_groups; gi++) {
        const tg__opt_group *g = &o->groups[gi];
        if (!tg__opt_has_buf(o->kind, &g->h, 0)) continue;
        for (int i = g->begin; i < g->end; i++) {
            const tg_tensor *p = o->params[i];
            if (!p->grad) continue;
            const tg_dtype cdt = tg__compute_dtype(p->dtype);
            tg_tensor *const *old = o->state[i].buf;
            if (old[0] && old[0]->dtype == cdt) continue;
            for (int j = 0; j < TG__OPT_MAX_BUFS; j++) {
                if (!tg__opt_has_buf(o->kind, &g->h, j)) continue;
                if (old[0]) TG_TRY(tg_tensor_to_dtype(&fresh[i][j], old[j], cdt));
                else if (!(fresh[i][j] = tg__tensor_empty(cdt, p->ndim, p->shape)))
                    return TG_ENOMEM;
                else if (o->kind == TG__OPT_ADAGRAD)   /* torch's full_like(p, initial value) */
                    TG_TRY(tg_tensor_fill(fresh[i][j], g->h.initial_accumulator_value));
                else if (o->kind == TG__OPT_RPROP && j == 1)   /* step_size: the group's lr */
                    TG_TRY(tg_tensor_fill(fresh[i][j], g->h.lr));
            }
            converted[i] = old[0] != NULL;
        }
    }
    return TG_OK;
}

/* Updates parameter i in its compute dtype: in place when it (or its
 * gradient) is contiguous in that dtype, else through a contiguous copy in
 * pbuf (gbuf), written back (rounding once for f16/bf16). */
static void update_one(tg_optimizer *o, const tg__opt_hparams *h, int i, bool first, void *pbuf,
                       void *gbuf)
{
    tg_tensor *p = o->params[i];
    tg_dtype cdt = tg__compute_dtype(p->dtype);
    int64_t n = tg_tensor_numel(p);
    const bool p_direct = p->dtype == cdt && tg_tensor_is_contiguous(p);
    void *pd = p_direct ? tg_tensor_data(p) : pbuf;
    const void *gd = gbuf;
    if (!p_direct) tg__gather(p, cdt, pbuf);
    if (p->grad->dtype == cdt && tg_tensor_is_contiguous(p->grad)) gd = tg_tensor_cdata(p->grad);
    else tg__gather(p->grad, cdt, gbuf);
    tg__opt_state *st = &o->state[i];
    switch (o->kind) {
    case TG__OPT_SGD: tg__sgd_update(h, cdt, pd, gd, st, first, n); break;
    case TG__OPT_RMSPROP: tg__rmsprop_update(h, cdt, pd, gd, st, n); break;
    case TG__OPT_ADAGRAD:
        tg__adagrad_update(h, cdt, pd, gd, st, n);
        break;
    case TG__OPT_ADAMAX: tg__adamax_update(h, cdt, pd, gd, st, n); break;
    case TG__OPT_NADAM:
        if (first) st->mu_product = 1.0;
        tg__nadam_update(h, cdt, pd, gd, st, n);
        break;
    case TG__OPT_RADAM: tg__radam_update(h, cdt, pd, gd, st, n); break;
    case TG__OPT_ADADELTA: tg__adadelta_update(h, cdt, pd, gd, st, n); break;
    case TG__OPT_RPROP: tg__rprop_update(h, cdt, pd, gd, st, n); break;
    case TG__OPT_ASGD:
        if (first) st->eta = (float)h->lr, st->mu = 1.0;   /* torch.tensor(lr), tensor(1.) */
        tg__asgd_update(h, cdt, pd, gd, st, n);
        break;
    default: tg__adam_update(h, o->kind == TG__OPT_ADAMW, cdt, pd, gd, st, n); break;
    }
    if (!p_direct) tg__scatter(p, cdt, pbuf);
    tg__bump_version(p);
}

static int optimizer_step(tg_optimizer *opt)
{
    TG_CHECK(opt != NULL, TG_EINVAL, "optimizer_step: opt must not be NULL");
    TG_CHECK(opt->kind != TG__OPT_LBFGS, TG_EINVAL,
             "optimizer_step: lbfgs re-evaluates the loss: step it with "
             "tg_optimizer_step_closure");
    int64_t max_numel;
    TG_TRY(check_grads(opt, &max_numel));
    /* Buffers for one parameter and its gradient, 8 bytes per element (f64). */
    void *pbuf = tg__work_alloc((size_t)max_numel * 8);
    void *gbuf = tg__work_alloc((size_t)max_numel * 8);
    tg_tensor *(*fresh)[TG__OPT_MAX_BUFS] = tg__calloc((size_t)opt->n, sizeof *fresh);
    bool *converted = tg__calloc((size_t)opt->n, sizeof *converted);
    bool prev = tg_set_grad_enabled(false);
    int rc = pbuf && gbuf && fresh && converted ? make_state(opt, fresh, converted) : TG_ENOMEM;
    if (rc < 0) {
        tg_set_grad_enabled(prev);
        for (int i = 0; fresh && i < opt->n; i++)
            for (int j = 0; j < TG__OPT_MAX_BUFS; j++) tg_tensor_release(fresh[i][j]);
        goto done;
    }
    for (int gi = 0; gi < opt->n_groups; gi++) {
        const tg__opt_group *g = &opt->groups[gi];
        for (int i = g->begin; i < g->end; i++) {
            if (!opt->params[i]->grad) continue;
            bool first = fresh[i][0] != NULL && !converted[i];
            for (int j = 0; j < TG__OPT_MAX_BUFS; j++)
                if (fresh[i][j]) {
                    tg_tensor_release(opt->state[i].buf[j]);
                    opt->state[i].buf[j] = fresh[i][j];
                }
            if (rc < 0) continue;   /* out of memory: the later buffers installed, unused */
            if (opt->params[i]->grad->sparse) rc = tg__opt_sparse_update(opt, &g->h, i);
            else update_one(opt, &g->h, i, first, pbuf, gbuf);
        }
    }
    tg_set_grad_enabled(prev);
    if (rc >= 0) opt->steps++;
done:
    tg__work_free(pbuf);
    tg__work_free(gbuf);
    free(fresh);
    free(converted);
    return rc;
}

/* A range of the profiler (tapegrad/profile.h) around each step. */
int tg_optimizer_step(tg_optimizer *opt)
{
    const bool ranged = tg_profile_push("optimizer.step") == TG_OK;
    const int rc = optimizer_step(opt);
    if (ranged) tg_profile_pop();
    return rc;
}

int tg_optimizer_step_closure(tg_optimizer *opt, tg_closure_fn closure, void *user,
                              double *loss)
{
    TG_CHECK(opt != NULL && closure != NULL, TG_EINVAL,
             "optimizer_step_closure: opt and closure must not be NULL");
    const bool ranged = tg_profile_push("optimizer.step") == TG_OK;
    int rc;
    if (opt->kind == TG__OPT_LBFGS) {
        rc = tg__lbfgs_step(opt, closure, user, loss);
    } else {
        double l = NAN;
        const bool prev = tg_set_grad_enabled(true);
        rc = closure(user, &l);
        tg_set_grad_enabled(prev);
        if (rc >= 0) rc = optimizer_step(opt);
        if (rc >= 0 && loss) *loss = l;
    }
    if (ranged) tg_profile_pop();
    return rc;
}

void tg_optimizer_zero_grad(tg_optimizer *opt)
{
    if (!opt) return;
    for (int i = 0; i < opt->n; i++) tg_tensor_zero_grad(opt->params[i]);
}

int tg_optimizer_zero_grad_ex(tg_optimizer *opt, bool set_to_none)
{
    TG_CHECK(opt != NULL, TG_EINVAL, "optimizer_zero_grad: opt must not be NULL");
    if (!set_to_none) return tg__zero_grads_in_place(opt->n, opt->params);
    tg_optimizer_zero_grad(opt);
    return TG_OK;
}

int64_t tg_optimizer_steps(const tg_optimizer *opt) { return opt ? opt->steps : -1; }
