/* src/nn/lr_scheduler_more.c - ConstantLR, MultiplicativeLR, PolynomialLR,
 * CosineAnnealingWarmRestarts and ChainedScheduler: their formulas (which
 * lr_scheduler.c's kinds[] lists), constructors, warm restarts' step to an
 * epoch and state beyond the lrs, and the chained step.
 *
 * Each formula is torch 1.13's, with its operations in its order, so that
 * the doubles agree: ConstantLR's chain divides back with lr * (1 / factor),
 * PolynomialLR's multiplies by ((1 - e/T) / (1 - (e-1)/T))^power.
 * CosineAnnealingWarmRestarts is not chainable: each lr is
 *   eta_min + (base - eta_min) (1 + cos(pi T_cur / T_i)) / 2
 * with T_cur the epochs since the last restart and T_i the current cycle's
 * length, which a step moves on (T_cur + 1; at T_i, T_cur - T_i and
 * T_i * T_mult) and a step to an epoch computes from the epoch.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lr_scheduler_cyclic.h"
#include "nn/state_check.h"

/* Python's math.pi (the double nearest pi). */
static const double pi = 3.141592653589793;

/* Warm restarts' T_i stays within 2^53, where a double holds every integer
 * (torch's T_i is a Python int; past 2^53 the two would part). */
static const int64_t t_i_limit = INT64_C(1) << 53;

/* ---- ConstantLR ------------------------------------------------------------ */

double tg__sched_constant_chain(const tg_lr_scheduler *s, int g, int64_t e, double lr,
                                double base)
{
    (void)g;
    (void)base;
    const double factor = s->u.constant.factor;
    if (e == 0) return lr * factor;
    if (e != s->u.constant.total_iters) return lr;
    return lr * (1.0 / factor);
}

/* torch's base * (factor + (e >= total) * (1 - factor)) */
double tg__sched_constant_closed(const tg_lr_scheduler *s, int64_t e, double base)
{
    const double factor = s->u.constant.factor;
    return base * (factor + (e >= s->u.constant.total_iters ? 1 - factor : 0.0));
}

int tg_constant_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, double factor,
                       int64_t total_iters)
{
    const char *op = "constant_lr";
    TG_TRY(tg__sched_check_common(op, out, opt));
    TG_CHECK(factor > 0 && factor <= 1, TG_EINVAL, "%s: factor=%g must be in (0, 1]", op, factor);
    TG_CHECK(total_iters >= 0, TG_EINVAL, "%s: total_iters=%lld must be >= 0", op,
             (long long)total_iters);
    return tg__sched_attach(out, opt, (tg_lr_scheduler){
        .kind = TG__SCHED_CONSTANT, .u.constant = {factor, total_iters}});
}

/* ---- MultiplicativeLR ------------------------------------------------------ */

/* A group added after s was made has no fn (torch zips lr_lambdas with the
 * param groups) and keeps its lr. */
double tg__sched_multiplicative_chain(const tg_lr_scheduler *s, int g, int64_t e, double lr,
                                      double base)
{
    if (isnan(base) || e <= 0) return lr;
    return lr * s->u.lambda.fns[g](e, s->u.lambda.users[g]);
}

int tg_multiplicative_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, tg_lr_lambda_fn fn,
                             void *user)
{
    return tg__sched_lambda_new("multiplicative_lr", out, opt, TG__SCHED_MULTIPLICATIVE, 1, &fn,
                                &user, true);
}

int tg_multiplicative_lr_new_per_group(tg_lr_scheduler **out, tg_optimizer *opt, int n_fns,
                                       const tg_lr_lambda_fn *fns, void *const *users)
{
    return tg__sched_lambda_new("multiplicative_lr_per_group", out, opt,
                                TG__SCHED_MULTIPLICATIVE, n_fns, fns, users, false);
}

/* ---- PolynomialLR ---------------------------------------------------------- */

double tg__sched_polynomial_chain(const tg_lr_scheduler *s, int g, int64_t e, double lr,
                                  double base)
{
    (void)g;
    (void)base;
    const int64_t total = s->u.polynomial.total_iters;
    if (e == 0 || e > total) return lr;
    const double T = (double)total;
    const double decay =
        pow((1.0 - (double)e / T) / (1.0 - (double)(e - 1) / T), s->u.polynomial.power);
    return lr * decay;
}

double tg__sched_polynomial_closed(const tg_lr_scheduler *s, int64_t e, double base)
{
    const int64_t total = s->u.polynomial.total_iters;
    const double T = (double)total;
    return base * pow(1.0 - (double)(e < total ? e : total) / T, s->u.polynomial.power);
}

int tg_polynomial_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, int64_t total_iters,
                         double power)
{
    const char *op = "polynomial_lr";
    TG_TRY(tg__sched_check_common(op, out, opt));
    TG_CHECK(total_iters >= 1, TG_EINVAL, "%s: total_iters=%lld must be >= 1", op,
             (long long)total_iters);
    TG_CHECK(power >= 0 && isfinite(power), TG_EINVAL,
             "%s: power=%g must be finite and >= 0", op, power);
    return tg__sched_attach(out, opt, (tg_lr_scheduler){
        .kind = TG__SCHED_POLYNOMIAL, .u.polynomial = {total_iters, power}});
}

/* ---- CosineAnnealingWarmRestarts ------------------------------------------- */

/* T_cur and T_i on entering epoch e by a step: torch's step(), whose
 * last_epoch < 0 (e <= 0) means step(0).  false when T_i would pass
 * t_i_limit. */
static bool warm_next(const tg_lr_scheduler *s, int64_t e, double *t_cur, int64_t *t_i)
{
    if (e <= 0) {
        *t_cur = 0;
        *t_i = s->u.warm.t_0;
        return true;
    }
    double tc = s->u.warm.t_cur + 1;
    int64_t ti = s->u.warm.t_i;
    if (tc >= (double)ti) {
        tc = tc - (double)ti;
        if (ti > t_i_limit / s->u.warm.t_mult) return false;
        ti = ti * s->u.warm.t_mult;
    }
    *t_cur = tc;
    *t_i = ti;
    return true;
}

static double warm_lr(const tg_lr_scheduler *s, double t_cur, int64_t t_i, double base)
{
    const double eta = s->u.warm.eta_min;
    return eta + (base - eta) * (1 + cos(pi * t_cur / (double)t_i)) / 2;
}

/* torch's get_lr() zips over base_lrs: a group added later keeps its lr.
 * NaN (which fails the step) when T_i would pass t_i_limit. */
double tg__sched_warm_chain(const tg_lr_scheduler *s, int g, int64_t e, double lr, double base)
{
    (void)g;
    double t_cur = 0;
    int64_t t_i = 1;
    if (!warm_next(s, e, &t_cur, &t_i)) return NAN;
    return isnan(base) ? lr : warm_lr(s, t_cur, t_i, base);
}

void tg__sched_warm_enter(tg_lr_scheduler *s, int64_t e)
{
    bool ok = warm_next(s, e, &s->u.warm.t_cur, &s->u.warm.t_i);
    TG_ASSERT(ok);   /* the step's lrs, computed first, were checked */
    if (e < 0) s->last_epoch = 0;   /* torch's step(0) */
}

int tg_cosine_annealing_warm_restarts_new(tg_lr_scheduler **out, tg_optimizer *opt,
                                          int64_t t_0, int64_t t_mult, double eta_min)
{
    const char *op = "cosine_annealing_warm_restarts";
    TG_TRY(tg__sched_check_common(op, out, opt));
    TG_CHECK(t_0 >= 1 && t_0 <= t_i_limit, TG_EINVAL, "%s: t_0=%lld must be >= 1 (and <= 2^53)",
             op, (long long)t_0);
    TG_CHECK(t_mult >= 1, TG_EINVAL, "%s: t_mult=%lld must be >= 1", op, (long long)t_mult);
    TG_CHECK(eta_min >= 0 && isfinite(eta_min), TG_EINVAL,
             "%s: eta_min=%g must be finite and >= 0", op, eta_min);
    return tg__sched_attach(out, opt, (tg_lr_scheduler){
        .kind = TG__SCHED_WARM_RESTARTS,
        .u.warm = {.t_0 = t_0, .t_mult = t_mult, .t_i = t_0, .eta_min = eta_min, .t_cur = -1}});
}

/* T_cur and T_i at epoch (>= 0, finite), as torch's step(epoch) computes
 * them: past T_0 the restart n before it is int(log_{T_mult}(epoch / T_0
 * (T_mult - 1) + 1)), which started at T_0 (T_mult^n - 1) / (T_mult - 1). */
static int warm_at(const tg_lr_scheduler *s, double epoch, double *t_cur, int64_t *t_i)
{
    const char *op = "cosine_annealing_warm_restarts_step_to";
    const int64_t t_0 = s->u.warm.t_0, m = s->u.warm.t_mult;
    if (epoch < (double)t_0) {
        *t_i = t_0;
        *t_cur = epoch;
        return TG_OK;
    }
    if (m == 1) {
        *t_i = s->u.warm.t_i;
        *t_cur = fmod(epoch, (double)t_0);
        return TG_OK;
    }
    const double x = epoch / (double)t_0 * (double)(m - 1) + 1;
    const int64_t n = (int64_t)(log(x) / log((double)m));
    int64_t pw = 1, start;
    bool over = false;
    for (int64_t i = 0; i < n && !over; i++) over = __builtin_mul_overflow(pw, m, &pw);
    over = over || __builtin_mul_overflow(t_0, (pw - 1) / (m - 1), &start) ||
           __builtin_mul_overflow(t_0, pw, t_i) || *t_i > t_i_limit;
    TG_CHECK(!over, TG_EINVAL,
             "%s: epoch=%g puts T_i = t_0 * t_mult^%lld beyond 2^53", op, epoch, (long long)n);
    *t_cur = epoch - (double)start;
    return TG_OK;
}

int tg_cosine_annealing_warm_restarts_step_to(tg_lr_scheduler *s, double epoch)
{
    const char *op = "cosine_annealing_warm_restarts_step_to";
    TG_CHECK(s != NULL, TG_EINVAL, "%s: s must not be NULL", op);
    TG_CHECK(s->kind == TG__SCHED_WARM_RESTARTS, TG_EINVAL,
             "%s: s is a %s; it must be a cosine_annealing_warm_restarts", op,
             tg__sched_kind_name(s->kind));
    TG_CHECK(epoch >= 0 && epoch <= 0x1p53, TG_EINVAL,
             "%s: epoch=%g must be >= 0 and <= 2^53", op, epoch);
    double t_cur = 0;
    int64_t t_i = 1;
    TG_TRY(warm_at(s, epoch, &t_cur, &t_i));
    TG_TRY(tg__sched_reserve(s));
    const int G = s->opt->n_groups;
    for (int g = 0; g < G; g++) {
        double lr = g < s->n_groups ? warm_lr(s, t_cur, t_i, s->base_lrs[g])
                                    : s->opt->groups[g].h.lr;
        s->next[g] = lr < 0 ? 0.0 : lr;   /* rounding only, as in a step */
    }
    for (int g = 0; g < G; g++) {
        s->opt->groups[g].h.lr = s->next[g];
        s->last_lrs[g] = s->next[g];
    }
    s->n_last = G;
    s->last_epoch = (int64_t)floor(epoch);
    s->u.warm.t_cur = t_cur;
    s->u.warm.t_i = t_i;
    return TG_OK;
}

/* ---- ChainedScheduler ------------------------------------------------------ */

/* A chain's schedulers are fixed when it is made, from schedulers that
 * exist then, so a chain never reaches itself: the nesting has no cycle. */
static bool is_chain(const tg_lr_scheduler *s) { return s->kind == TG__SCHED_CHAINED; }

/* The entries below s: its schedulers and, through the ChainedSchedulers
 * and SequentialLRs among them, theirs, a repeat each time.  At most
 * TG__CHAIN_MAX by construction, which bounds the recursions over them. */
#define TG__CHAIN_MAX 4096
static int entries_of(const tg_lr_scheduler *s)
{
    int n = s->u.sequential.n;
    for (int i = 0; i < s->u.sequential.n; i++) {
        const tg_lr_scheduler *c = s->u.sequential.schedulers[i];
        if (tg__sched_borrows(c)) n += entries_of(c);
    }
    return n;
}

/* The schedulers below s that are not ChainedSchedulers or SequentialLRs,
 * in the order s may step them (a repeat each time), into leaves from
 * leaves[n] (room for entries_of(s) more); n plus their count. */
static int leaves_of(const tg_lr_scheduler *s, const tg_lr_scheduler **leaves, int n)
{
    for (int i = 0; i < s->u.sequential.n; i++) {
        const tg_lr_scheduler *c = s->u.sequential.schedulers[i];
        if (tg__sched_borrows(c)) {
            n = leaves_of(c, leaves, n);
        } else {
            leaves[n++] = c;
        }
    }
    return n;
}

static int check_chained(tg_lr_scheduler **out, int n, tg_lr_scheduler *const *scheds)
{
    const char *op = "chained_scheduler";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(n >= 1, TG_EINVAL, "%s: n_schedulers=%d must be >= 1", op, n);
    TG_CHECK(scheds != NULL, TG_EINVAL, "%s: schedulers must not be NULL", op);
    int64_t n_entries = n;
    bool nested = false;
    for (int i = 0; i < n; i++) {
        const tg_lr_scheduler *c = scheds[i];
        TG_CHECK(c != NULL, TG_EINVAL, "%s: schedulers[%d] must not be NULL", op, i);
        TG_CHECK(c->opt == scheds[0]->opt, TG_EINVAL,
                 "%s: schedulers[%d] is attached to another optimizer than schedulers[0]; all "
                 "must be on one", op, i);
        nested = nested || tg__sched_borrows(c);
        n_entries += tg__sched_borrows(c) ? entries_of(c) : 0;
    }
    TG_CHECK(n_entries <= TG__CHAIN_MAX, TG_EINVAL,
             "%s: the schedulers and those of the chained_schedulers among them are %lld "
             "entries; at most %d", op, (long long)n_entries, TG__CHAIN_MAX);
    TG_TRY(tg__sched_cyclic_check_sequential(op, scheds, n));
    if (!nested) return TG_OK;
    /* two OneCycleLRs in different chains or SequentialLRs: numbered in
     * stepping order; the leaves are fewer than the entries */
    const tg_lr_scheduler **all = tg__malloc((size_t)n_entries * sizeof *all);
    if (!all) return TG_ENOMEM;
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (tg__sched_borrows(scheds[i])) m = leaves_of(scheds[i], all, m);
        else all[m++] = scheds[i];
    }
    int rc = tg__sched_cyclic_check_sequential("chained_scheduler (nested, in stepping order)",
                                               (tg_lr_scheduler *const *)all, m);
    free(all);
    return rc;
}

/* torch's ChainedScheduler.__init__ takes no step: _last_lr is each
 * group's lr as it is. */
int tg_chained_scheduler_new(tg_lr_scheduler **out, int n, tg_lr_scheduler *const *scheds)
{
    TG_TRY(check_chained(out, n, scheds));
    tg_optimizer *opt = scheds[0]->opt;
    const int G = opt->n_groups;
    tg_lr_scheduler *s = tg__calloc(1, sizeof *s);
    tg_lr_scheduler **cs = tg__malloc((size_t)n * sizeof *cs);
    double *b = tg__calloc((size_t)G, sizeof *b), *l = tg__calloc((size_t)G * 2, sizeof *l);
    if (!s || !cs || !b || !l) {
        free(s);
        free(cs);
        free(b);
        free(l);
        return TG_ENOMEM;
    }
    memcpy(cs, scheds, (size_t)n * sizeof *cs);
    s->kind = TG__SCHED_CHAINED;
    s->opt = opt;
    s->last_epoch = 0;
    s->n_groups = s->n_last = s->cap = G;
    s->base_lrs = b;
    s->last_lrs = l;
    s->next = l + G;
    s->u.sequential.n = n;
    s->u.sequential.schedulers = cs;
    s->u.sequential.milestones = NULL;
    for (int g = 0; g < G; g++) {
        const tg__opt_group *gr = &opt->groups[g];
        b[g] = isnan(gr->initial_lr) ? gr->h.lr : gr->initial_lr;
        l[g] = gr->h.lr;
    }
    *out = s;
    return TG_OK;
}

/* What a chain's step may change, kept to put back when a step fails: per
 * scheduler its fields (after tg__sched_reserve no pointer moves), its
 * cyclic object and its last lrs; the optimizer's hyperparameters. */
typedef struct saved {
    int n;                       /* distinct schedulers */
    tg_lr_scheduler **s, *was;   /* n each */
    struct tg__sched_cyclic *cyc;
    double *lrs;                 /* n * G */
    tg__opt_hparams *h;          /* G */
} saved;

static void add_unique(saved *v, tg_lr_scheduler *s)
{
    for (int i = 0; i < v->n; i++)
        if (v->s[i] == s) return;
    v->s[v->n++] = s;
    if (tg__sched_borrows(s))   /* a chain's or a SequentialLR's schedulers */
        for (int i = 0; i < s->u.sequential.n; i++) add_unique(v, s->u.sequential.schedulers[i]);
}

static void saved_free(saved *v)
{
    free(v->s);
    free(v->was);
    free(v->cyc);
    free(v->lrs);
    free(v->h);
}

static int save_all(saved *v, tg_lr_scheduler *s)
{
    const tg_optimizer *opt = s->opt;
    const size_t G = (size_t)opt->n_groups, most = (size_t)entries_of(s) + 1;
    *v = (saved){0};
    v->s = tg__malloc(most * sizeof *v->s);
    v->was = tg__malloc(most * sizeof *v->was);
    v->cyc = tg__malloc(most * sizeof *v->cyc);
    v->lrs = tg__malloc(most * G * sizeof *v->lrs);
    v->h = tg__malloc(G * sizeof *v->h);
    if (!v->s || !v->was || !v->cyc || !v->lrs || !v->h) {
        saved_free(v);
        return TG_ENOMEM;
    }
    add_unique(v, s);
    for (int i = 0; i < v->n; i++) {
        v->was[i] = *v->s[i];
        if (tg__sched_is_cyclic(v->s[i]->kind)) v->cyc[i] = *v->s[i]->u.cyclic;
        memcpy(v->lrs + (size_t)i * G, v->s[i]->last_lrs, (size_t)v->s[i]->n_last * sizeof *v->lrs);
    }
    for (size_t g = 0; g < G; g++) v->h[g] = opt->groups[g].h;
    return TG_OK;
}

static void restore_all(const saved *v, tg_optimizer *opt)
{
    const size_t G = (size_t)opt->n_groups;
    for (int i = 0; i < v->n; i++) {
        tg_lr_scheduler *s = v->s[i];
        *s = v->was[i];
        if (tg__sched_is_cyclic(s->kind)) *s->u.cyclic = v->cyc[i];
        memcpy(s->last_lrs, v->lrs + (size_t)i * G, (size_t)s->n_last * sizeof *s->last_lrs);
    }
    for (size_t g = 0; g < G; g++) opt->groups[g].h = v->h[g];
}

/* torch's ChainedScheduler.step(): each scheduler's step() in turn, a
 * nested chain's its own; _last_lr is then each group's lr. */
static int chain_steps(tg_lr_scheduler *s)
{
    for (int i = 0; i < s->u.sequential.n; i++) {
        tg_lr_scheduler *c = s->u.sequential.schedulers[i];
        TG_TRY(is_chain(c) ? chain_steps(c) : tg_lr_scheduler_step(c));
    }
    s->n_last = s->opt->n_groups;
    tg__sched_current_lrs(s->opt, s->last_lrs);
    s->last_epoch += 1;
    return TG_OK;
}

/* The steps run for real, one after the other (a scheduler listed twice
 * steps from its own first step); when one fails, every scheduler and the
 * optimizer's hyperparameters are put back as they were. */
int tg__sched_chained_step(tg_lr_scheduler *s)
{
    saved v;
    TG_TRY(save_all(&v, s));
    int rc = chain_steps(s);
    if (rc < 0) restore_all(&v, s->opt);
    saved_free(&v);
    return rc;
}

/* ---- warm restarts' state ---------------------------------------------------- */

#define LOAD "lr_scheduler_state_load"

static int warm_key(char *k, size_t size, const char *what, const char *prefix, const char *name)
{
    int len = snprintf(k, size, "%s.%s", prefix, name);
    TG_CHECK(len > 0 && (size_t)len < size, TG_EINVAL,
             "%s: prefix '%.32s...' too long (keys are at most %zu chars)", what, prefix,
             size - 1);
    return TG_OK;
}

int tg__sched_extra_save(const tg_lr_scheduler *s, tg_st_file *f, const char *prefix)
{
    if (s->kind != TG__SCHED_WARM_RESTARTS) return TG_OK;
    char k[256];
    TG_TRY(warm_key(k, sizeof k, "lr_scheduler_state_save", prefix, "T_cur"));
    TG_TRY(tg__st_put_scalar(f, k, TG_F64, s->u.warm.t_cur));
    TG_TRY(warm_key(k, sizeof k, "lr_scheduler_state_save", prefix, "T_i"));
    return tg__st_put_scalar(f, k, TG_I64, (double)s->u.warm.t_i);
}

/* The one value under "prefix.name" into *v, |v| <= 2^53 and, when
 * integer, a whole number. */
static int warm_value(const tg_st_file *f, const char *prefix, const char *name, bool integer,
                      double *v)
{
    char k[256];
    TG_TRY(warm_key(k, sizeof k, LOAD, prefix, name));
    const tg_tensor *t = tg_st_get(f, k);
    TG_CHECK(t != NULL, TG_ENOTFOUND, LOAD ": missing key '%s'", k);
    TG_CHECK(tg_tensor_numel(t) == 1, TG_ESHAPE, LOAD ": '%s' must hold one value, has %lld",
             k, (long long)tg_tensor_numel(t));
    TG_TRY(tg_tensor_get_flat(t, 0, v));
    TG_CHECK(fabs(*v) <= 0x1p53 && (!integer || *v == floor(*v)), TG_EINVAL,
             LOAD ": '%s'=%g must be %s within +-2^53", k, *v,
             integer ? "an integer" : "a finite number");
    return TG_OK;
}

int tg__sched_extra_load(const tg_lr_scheduler *s, const tg_st_file *f, const char *prefix,
                         tg_lr_scheduler *into)
{
    if (s->kind != TG__SCHED_WARM_RESTARTS) return TG_OK;
    double t_cur, t_i;
    TG_TRY(warm_value(f, prefix, "T_cur", false, &t_cur));
    TG_TRY(warm_value(f, prefix, "T_i", true, &t_i));
    TG_CHECK(t_i >= 1, TG_EINVAL, LOAD ": '%s.T_i'=%g must be >= 1", prefix, t_i);
    if (into) {
        into->u.warm.t_cur = t_cur;
        into->u.warm.t_i = (int64_t)t_i;
    }
    return TG_OK;
}
