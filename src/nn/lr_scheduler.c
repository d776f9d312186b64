/* src/nn/lr_scheduler.c - learning-rate schedulers: each kind's formulas,
 * the step, the accessors and freeing.  Construction with its argument checks
 * is in lr_scheduler_new.c, save and load in lr_scheduler_state.c.
 *
 * Each kind has torch's two formulas, applied to each param group of the
 * optimizer with the group's own lr and base_lr.  The chainable one
 * (torch's get_lr()) maps a group's current lr to the next epoch's, e.g.
 * cosine annealing
 *   lr_e = eta + (1 + cos(pi e / T)) / (1 + cos(pi (e - 1) / T)) * (lr_{e-1} - eta),
 * which is the ratio of two consecutive closed-form values, so that a run
 * nobody interferes with follows eta + (base - eta) (1 + cos(pi e / T)) / 2.
 * The closed form (torch's _get_closed_form_lr()) maps base_lr and the epoch
 * to the lr; torch uses it only for step(epoch), which SequentialLR calls
 * with epoch 0 when it hands over to the next scheduler.  Both are written
 * with torch's operations in torch's order, so that the doubles agree.
 */
#include <math.h>
#include <string.h>

#include "lr_scheduler_internal.h"

/* Python's math.pi (the double nearest pi). */
static const double pi = 3.141592653589793;

/* ---- the formulas, per kind --------------------------------------------------- */

/* e is the epoch being entered (torch's last_epoch inside step()), g a
 * param group, lr its lr before the epoch and base its base_lr: NAN for a
 * group added to the optimizer after the scheduler was made, which torch's
 * formulas that zip over base_lrs leave out, so those return lr for it. */
typedef double (*chain_fn)(const tg_lr_scheduler *s, int g, int64_t e, double lr, double base);
typedef double (*closed_fn)(const tg_lr_scheduler *s, int64_t e, double base);

/* Python's a // b for b > 0 (rounds towards -inf). */
static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

static double step_chain(const tg_lr_scheduler *s, int g, int64_t e, double lr, double base)
{
    (void)g;
    (void)base;
    if (e == 0 || e % s->u.step.step_size != 0) return lr;
    return lr * s->u.step.gamma;
}

static double step_closed(const tg_lr_scheduler *s, int64_t e, double base)
{
    return base * pow(s->u.step.gamma, (double)floor_div(e, s->u.step.step_size));
}

/* How many milestones equal e (torch's Counter), or are <= e (its
 * bisect_right on the sorted milestones). */
static int count_milestones(const tg_lr_scheduler *s, int64_t e, bool up_to)
{
    int c = 0;
    for (int i = 0; i < s->u.multi_step.n; i++) {
        int64_t m = s->u.multi_step.milestones[i];
        c += up_to ? m <= e : m == e;
    }
    return c;
}

static double multi_step_chain(const tg_lr_scheduler *s, int g, int64_t e, double lr, double base)
{
    (void)g;
    (void)base;
    int c = count_milestones(s, e, false);
    if (c == 0) return lr;
    return lr * pow(s->u.multi_step.gamma, (double)c);
}

static double multi_step_closed(const tg_lr_scheduler *s, int64_t e, double base)
{
    return base * pow(s->u.multi_step.gamma, (double)count_milestones(s, e, true));
}

static double exponential_chain(const tg_lr_scheduler *s, int g, int64_t e, double lr, double base)
{
    (void)g;
    (void)base;
    if (e == 0) return lr;
    return lr * s->u.exponential.gamma;
}

static double exponential_closed(const tg_lr_scheduler *s, int64_t e, double base)
{
    return base * pow(s->u.exponential.gamma, (double)e);
}

/* torch's get_lr() has one more branch, `_step_count == 1 and last_epoch >
 * 0`, the closed form for a scheduler built with last_epoch >= 0 (resuming
 * without a state dict); constructors here always start at -1. */
static double cosine_chain(const tg_lr_scheduler *s, int g, int64_t e, double lr, double base)
{
    (void)g;
    const double T = (double)s->u.cosine.t_max, eta = s->u.cosine.eta_min;
    if (e == 0) return lr;
    /* torch's (e - 1 - T) % (2 T) == 0, i.e. e - 1 is an odd multiple of T
     * (written so that nothing overflows): there the ratio below would be
     * 0 / 0, so torch adds the closed form's difference instead. */
    const int64_t t_max = s->u.cosine.t_max;
    if ((e - 1) % t_max == 0 && ((e - 1) / t_max) % 2 != 0)
        return isnan(base) ? lr : lr + (base - eta) * (1 - cos(pi / T)) / 2;
    return (1 + cos(pi * (double)e / T)) / (1 + cos(pi * (double)(e - 1) / T)) * (lr - eta) + eta;
}

static double cosine_closed(const tg_lr_scheduler *s, int64_t e, double base)
{
    const double T = (double)s->u.cosine.t_max, eta = s->u.cosine.eta_min;
    return eta + (base - eta) * (1 + cos(pi * (double)e / T)) / 2;
}

/* factor(e) = start + (end - start) e / total; the chain multiplies by
 * factor(e) / factor(e - 1) = 1 + (end - start) / (total start + (e - 1) (end - start)). */
static double linear_chain(const tg_lr_scheduler *s, int g, int64_t e, double lr, double base)
{
    (void)g;
    (void)base;
    const double a = s->u.linear.start_factor, b = s->u.linear.end_factor;
    const int64_t total = s->u.linear.total_iters;
    if (e == 0) return lr * a;
    if (e > total) return lr;
    return lr * (1. + (b - a) / ((double)total * a + (double)(e - 1) * (b - a)));
}

static double linear_closed(const tg_lr_scheduler *s, int64_t e, double base)
{
    const double a = s->u.linear.start_factor, b = s->u.linear.end_factor;
    const int64_t total = s->u.linear.total_iters;
    return base * (a + (b - a) * (double)(e < total ? e : total) / (double)total);
}

static double lambda_chain(const tg_lr_scheduler *s, int g, int64_t e, double lr, double base)
{
    if (isnan(base)) return lr;
    return base * s->u.lambda.fns[g](e, s->u.lambda.users[g]);
}

typedef struct kind_traits {
    const char *name;
    chain_fn chain;     /* NULL: SequentialLR, which steps its schedulers */
    closed_fn closed;   /* NULL where torch has none: step(0) then uses get_lr() */
} kind_traits;

static const kind_traits kinds[] = {
    [TG__SCHED_STEP] = {"step_lr", step_chain, step_closed},
    [TG__SCHED_MULTI_STEP] = {"multi_step_lr", multi_step_chain, multi_step_closed},
    [TG__SCHED_EXPONENTIAL] = {"exponential_lr", exponential_chain, exponential_closed},
    [TG__SCHED_COSINE] = {"cosine_annealing_lr", cosine_chain, cosine_closed},
    [TG__SCHED_LINEAR] = {"linear_lr", linear_chain, linear_closed},
    [TG__SCHED_LAMBDA] = {"lambda_lr", lambda_chain, NULL},
    [TG__SCHED_SEQUENTIAL] = {"sequential_lr", NULL, NULL},
    [TG__SCHED_ONE_CYCLE] = {"one_cycle_lr", NULL, NULL},
    [TG__SCHED_CYCLIC] = {"cyclic_lr", NULL, NULL},
    [TG__SCHED_PLATEAU] = {"reduce_lr_on_plateau", NULL, NULL},
    [TG__SCHED_SWA] = {"swa_lr", NULL, NULL},
    [TG__SCHED_CONSTANT] = {"constant_lr", tg__sched_constant_chain, tg__sched_constant_closed},
    [TG__SCHED_MULTIPLICATIVE] = {"multiplicative_lr", tg__sched_multiplicative_chain, NULL},
    [TG__SCHED_POLYNOMIAL] = {"polynomial_lr", tg__sched_polynomial_chain,
                              tg__sched_polynomial_closed},
    /* its step(0) is its own step from last_epoch -1, which the chain does */
    [TG__SCHED_WARM_RESTARTS] = {"cosine_annealing_warm_restarts", tg__sched_warm_chain, NULL},
    [TG__SCHED_CHAINED] = {"chained_scheduler", NULL, NULL},
};
_Static_assert(sizeof kinds / sizeof kinds[0] == TG__SCHED_N_KINDS,
               "one entry of kinds[] per tg__sched_kind");

const char *tg__sched_kind_name(tg__sched_kind k) { return kinds[k].name; }

/* ---- stepping ----------------------------------------------------------------- */

int tg__sched_next_lrs(const tg_lr_scheduler *s, int64_t e, bool closed, double *io,
                       const char *ctor)
{
    if (tg__sched_is_cyclic(s->kind)) return tg__sched_cyclic_next_lrs(s, e, io, ctor);
    const kind_traits *k = &kinds[s->kind];
    const int G = s->opt->n_groups;
    for (int g = 0; g < G; g++) {
        const double base = g < s->n_groups ? s->base_lrs[g] : NAN;
        double v;
        if (closed && k->closed) v = g < s->n_groups ? k->closed(s, e, base) : io[g];
        else v = k->chain(s, g, e, io[g], base);
        /* Rounding only (LinearLR to end_factor 0 ends near -1e-18 in torch),
         * or an lr set below CosineAnnealingLR's eta_min; LambdaLR's factor is
         * the caller's and is checked as given. */
        if (v < 0 && !tg__sched_has_fn(s->kind)) v = 0.0;
        char grp[40] = "";
        if (G > 1) snprintf(grp, sizeof grp, " for param group %d", g);
        TG_CHECK(v >= 0 && isfinite(v), TG_EINVAL,
                 "%s: %s gives lr=%g at epoch %lld%s%s; an lr must be finite and >= 0",
                 ctor ? ctor : "lr_scheduler_step", ctor ? "the initial step" : k->name, v,
                 (long long)e, grp, s->kind == TG__SCHED_LAMBDA ? " (base_lr * fn(epoch))"
                 : s->kind == TG__SCHED_MULTIPLICATIVE ? " (lr * fn(epoch))" : "");
        io[g] = v;
    }
    return TG_OK;
}

void tg__sched_current_lrs(const tg_optimizer *opt, double *io)
{
    for (int g = 0; g < opt->n_groups; g++) io[g] = opt->groups[g].h.lr;
}

void tg__sched_commit(tg_lr_scheduler *s, int64_t e, const double *lrs)
{
    const int G = s->opt->n_groups;
    TG_ASSERT(G >= s->n_groups && G <= s->cap);
    for (int g = 0; g < G; g++) {
        s->opt->groups[g].h.lr = lrs[g];
        s->last_lrs[g] = lrs[g];
    }
    s->n_last = G;
    s->last_epoch = e;
    if (tg__sched_is_cyclic(s->kind)) tg__sched_cyclic_commit(s);
    if (s->kind == TG__SCHED_WARM_RESTARTS) tg__sched_warm_enter(s, e);
}

int tg__sched_reserve(tg_lr_scheduler *s)
{
    const int G = s->opt->n_groups;
    if (G > s->cap) {
        double *b = tg__calloc((size_t)G * 2, sizeof *b);
        if (!b) return TG_ENOMEM;
        memcpy(b, s->last_lrs, (size_t)s->n_last * sizeof *b);
        free(s->last_lrs);
        s->last_lrs = b;
        s->next = b + G;
        s->cap = G;
    }
    for (int i = 0; tg__sched_borrows(s) && i < s->u.sequential.n; i++)
        TG_TRY(tg__sched_reserve(s->u.sequential.schedulers[i]));
    return TG_OK;
}

/* Python's bisect.bisect_right(a[0..n), x), also on an unsorted a. */
static int bisect_right(const int64_t *a, int n, int64_t x)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (x < a[mid]) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* torch's SequentialLR.step(): the scheduler of the new epoch steps; at its
 * milestone it restarts with step(0). */
static int sequential_step(tg_lr_scheduler *s)
{
    const int64_t e = s->last_epoch + 1;
    const int64_t *ms = s->u.sequential.milestones;
    int i = bisect_right(ms, s->u.sequential.n - 1, e);
    tg_lr_scheduler *c = s->u.sequential.schedulers[i];
    bool restart = i > 0 && ms[i - 1] == e;
    int64_t ce = restart ? 0 : c->last_epoch + 1;
    tg__sched_current_lrs(s->opt, c->next);
    TG_TRY(tg__sched_next_lrs(c, ce, restart, c->next, NULL));
    tg__sched_commit(c, ce, c->next);
    s->last_epoch = e;
    s->n_last = c->n_last;
    memcpy(s->last_lrs, c->last_lrs, (size_t)s->n_last * sizeof *s->last_lrs);
    return TG_OK;
}

int tg_lr_scheduler_step(tg_lr_scheduler *s)
{
    TG_CHECK(s != NULL, TG_EINVAL, "lr_scheduler_step: s must not be NULL");
    TG_TRY(tg__sched_reserve(s));
    if (s->kind == TG__SCHED_SEQUENTIAL) return sequential_step(s);
    if (s->kind == TG__SCHED_CHAINED) return tg__sched_chained_step(s);
    tg__sched_current_lrs(s->opt, s->next);
    TG_TRY(tg__sched_next_lrs(s, s->last_epoch + 1, false, s->next, NULL));
    tg__sched_commit(s, s->last_epoch + 1, s->next);
    return TG_OK;
}

double tg_lr_scheduler_get_last_lr(const tg_lr_scheduler *s) { return s ? s->last_lrs[0] : NAN; }

double tg_lr_scheduler_get_group_last_lr(const tg_lr_scheduler *s, int group)
{
    return s && group >= 0 && group < s->n_last ? s->last_lrs[group] : NAN;
}

double tg_lr_scheduler_group_base_lr(const tg_lr_scheduler *s, int group)
{
    return s && group >= 0 && group < s->n_groups ? s->base_lrs[group] : NAN;
}

int64_t tg_lr_scheduler_last_epoch(const tg_lr_scheduler *s)
{
    return s ? s->last_epoch : INT64_MIN;
}

double tg_lr_scheduler_base_lr(const tg_lr_scheduler *s) { return s ? s->base_lrs[0] : NAN; }

void tg_lr_scheduler_free(tg_lr_scheduler *s)
{
    if (!s) return;
    free(s->base_lrs);
    free(s->last_lrs);
    if (s->kind == TG__SCHED_MULTI_STEP) free(s->u.multi_step.milestones);
    if (tg__sched_has_fn(s->kind)) {
        free(s->u.lambda.fns);
        free(s->u.lambda.users);
    }
    if (tg__sched_is_cyclic(s->kind)) tg__sched_cyclic_free(s);
    if (tg__sched_borrows(s)) {
        free(s->u.sequential.schedulers);
        free(s->u.sequential.milestones);
    }
    free(s);
}
