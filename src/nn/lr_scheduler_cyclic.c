/* src/nn/lr_scheduler_cyclic.c - torch's OneCycleLR, CyclicLR and
 * swa_utils.SWALR: construction and the values at a step, also for
 * ReduceLROnPlateau (lr_scheduler_plateau.c), which refuses a step without
 * a metric; and what a SequentialLR cannot run.
 *
 * OneCycleLR and CyclicLR are closed forms of the step e and each group's
 * constants; SWALR is chained on the group's lr; ReduceLROnPlateau changes
 * an lr only when the metric stops improving.  Each formula is written with
 * torch's operations in torch's order (Python's float arithmetic is IEEE
 * double, math.cos is libm's cos, float ** int is pow), so that the doubles
 * agree bit for bit:
 *   OneCycleLR, phase [start, end] of the step: pct = (e - start) / (end - start),
 *     cos:    end_v + (start_v - end_v) / 2.0 * (cos(pi pct) + 1)
 *     linear: (end_v - start_v) * pct + start_v
 *   CyclicLR: cycle = floor(1 + e / total), x = 1 + e / total - cycle,
 *     f = x / r if x <= r else (x - 1) / (r - 1), r the up part of total,
 *     lr = base + (max - base) * f * scale, momentum = max_m - (max_m - base_m) * f * scale,
 *     scale = scale_fn(cycle) or scale_fn(e) (triangular: 1 of the cycle, triangular2:
 *     1 / 2^(cycle - 1), exp_range: gamma^e)
 *   SWALR at its step n (anneal A): alpha(t) = t or (1 - cos(pi t)) / 2,
 *     prev = (lr - a' swa) / (1 - a') with a' = alpha(clamp((n - 1) / max(1, A))),
 *     lr' = swa * a + prev * (1 - a) with a = alpha(clamp(n / max(1, A))).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lr_scheduler_cyclic.h"

/* Python's math.pi (the double nearest pi). */
static const double pi = 3.141592653589793;


bool tg__sched_is_cyclic(tg__sched_kind k)
{
    return k == TG__SCHED_ONE_CYCLE || k == TG__SCHED_CYCLIC || k == TG__SCHED_PLATEAU ||
           k == TG__SCHED_SWA;
}

/* ---- the values at a step ----------------------------------------------------- */

/* OneCycleLR's phases: the lr goes from lr_key[i][0] to lr_key[i][1] of
 * (initial, max, min), the momentum from mom_key[i][0] to [1] of
 * (max_momentum, base_momentum). */
enum { INIT, MAX, MIN };
enum { MAXM, BASEM };
static const int lr_keys[2][3][2] = {{{INIT, MAX}, {MAX, MIN}},
                                     {{INIT, MAX}, {MAX, INIT}, {INIT, MIN}}};
static const int mom_keys[2][3][2] = {{{MAXM, BASEM}, {BASEM, MAXM}},
                                      {{MAXM, BASEM}, {BASEM, MAXM}, {MAXM, MAXM}}};

static double anneal(bool linear, double start, double end, double pct)
{
    if (linear) return (end - start) * pct + start;
    double cos_out = cos(pi * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
}

/* torch's OneCycleLR.get_lr() for group g at step e <= total_steps: the
 * first phase whose end_step is >= e, or the last. */
static void one_cycle_at(const cyc *c, int g, int64_t e, double *lr, double *mom)
{
    const int three = c->n_phases == 3;
    const double lrv[3] = {c->g0[g], c->g1[g], c->g2[g]};
    const double momv[2] = {c->mmom[g], c->bmom[g]};
    double start = 0;
    for (int i = 0; i < c->n_phases; i++) {
        const double end = c->end_step[i];
        if ((double)e <= end || i == c->n_phases - 1) {
            double pct = ((double)e - start) / (end - start);
            *lr = anneal(c->linear, lrv[lr_keys[three][i][0]], lrv[lr_keys[three][i][1]], pct);
            *mom = anneal(c->linear, momv[mom_keys[three][i][0]], momv[mom_keys[three][i][1]],
                          pct);
            return;
        }
        start = end;
    }
}

/* torch's CyclicLR.get_lr() for group g, of base lr `base`, at step e. */
static void cyclic_at(const cyc *c, int g, double base, int64_t e, double *lr, double *mom)
{
    const double cycle = floor(1 + (double)e / c->total_size);
    const double x = 1. + (double)e / c->total_size - cycle;
    double f = x <= c->step_ratio ? x / c->step_ratio : (x - 1) / (c->step_ratio - 1);
    double scale = 1.;
    if (c->scale_fn) scale = c->scale_fn(c->scale_iterations ? (double)e : cycle, c->scale_user);
    else if (c->mode == TG_CYCLIC_TRIANGULAR2) scale = 1 / pow(2., cycle - 1);
    else if (c->mode == TG_CYCLIC_EXP_RANGE) scale = pow(c->gamma, (double)e);
    *lr = base + (c->g0[g] - base) * f * scale;
    *mom = c->mmom[g] - (c->mmom[g] - c->bmom[g]) * f * scale;
}

static double swa_alpha(bool linear, double t) { return linear ? t : (1 - cos(pi * t)) / 2; }

/* torch's SWALR.get_lr() for a group of lr `lr` at its step n. */
static double swa_at(const cyc *c, double lr, double swa, int64_t n)
{
    const double A = (double)(c->anneal_epochs > 1 ? c->anneal_epochs : 1);
    const double prev_t = fmax(0, fmin(1, (double)(n - 1) / A));
    const double prev_alpha = swa_alpha(c->linear, prev_t);
    const double prev = prev_alpha == 1 ? swa : (lr - prev_alpha * swa) / (1 - prev_alpha);
    const double alpha = swa_alpha(c->linear, fmax(0, fmin(1, (double)n / A)));
    return swa * alpha + prev * (1 - alpha);
}

/* The momentum m computed for group g, checked as
 * tg_optimizer_set_group_momentum does; at the last OneCycleLR step
 * (extrapolated) first brought into range: >= 0, beta1 < 1. */
static int check_momentum(const tg_optimizer *opt, int g, double *m, bool last,
                          const char *what)
{
    if (last && *m < 0) *m = 0;
    if (last && *m >= 1 && tg__opt_momentum_is_beta1(opt->kind))
        *m = nextafter(1.0, 0.0);
    return tg__opt_check_group_momentum(opt, g, *m, what);
}

int tg__sched_cyclic_next_lrs(const tg_lr_scheduler *s, int64_t e, double *io, const char *ctor)
{
    const char *what = ctor ? ctor : "lr_scheduler_step";
    const char *name = tg__sched_kind_name(s->kind);
    cyc *c = s->u.cyclic;
    const int G = s->opt->n_groups, n = s->n_groups;
    TG_CHECK(s->kind != TG__SCHED_PLATEAU, TG_EINVAL,
             "%s: a reduce_lr_on_plateau steps with a metric "
             "(tg_reduce_lr_on_plateau_step)", what);
    TG_CHECK(G == n || s->kind == TG__SCHED_CYCLIC, TG_EINVAL,
             "%s: param group %d was added after the %s was made; it has no %s for it", what,
             n, name, s->kind == TG__SCHED_SWA ? "swa_lr" : "max_lr");
    TG_CHECK(s->kind != TG__SCHED_ONE_CYCLE || e <= c->total_steps, TG_EINVAL,
             "%s: one_cycle_lr tried to step %lld times; the specified number of total "
             "steps is %lld", what, (long long)e + 1, (long long)c->total_steps);
    int64_t count = ctor ? 0 : c->step_count;   /* SWALR's: its initial step resets it */
    if (s->kind == TG__SCHED_SWA && c->anneal_epochs == 0 && count < 1) count = 1;
    for (int g = 0; g < n; g++) {
        double lr = NAN, mom = NAN;
        if (s->kind == TG__SCHED_ONE_CYCLE) one_cycle_at(c, g, e, &lr, &mom);
        else if (s->kind == TG__SCHED_CYCLIC) cyclic_at(c, g, s->base_lrs[g], e, &lr, &mom);
        else lr = swa_at(c, io[g], c->g0[g], count);
        /* the last OneCycleLR step's extrapolation (linear), or rounding; a
         * custom scale_fn's factor is the caller's and is checked as given */
        if (lr < 0 && !c->scale_fn) lr = 0;
        char grp[40] = "";
        if (G > 1) snprintf(grp, sizeof grp, " for param group %d", g);
        TG_CHECK(lr >= 0 && isfinite(lr), TG_EINVAL,
                 "%s: %s gives lr=%g at epoch %lld%s%s; an lr must be finite and >= 0", what,
                 name, lr, (long long)e, grp, c->scale_fn ? " (with its scale_fn)" : "");
        const bool last = s->kind == TG__SCHED_ONE_CYCLE && e == c->total_steps;
        if (c->cycle_momentum) TG_TRY(check_momentum(s->opt, g, &mom, last, what));
        io[g] = lr;
        c->mom[g] = mom;
    }
    c->next_count = (ctor ? 0 : c->step_count) + 1;
    return TG_OK;
}

void tg__sched_cyclic_commit(tg_lr_scheduler *s)
{
    cyc *c = s->u.cyclic;
    for (int g = 0; c->cycle_momentum && g < s->n_groups; g++)
        tg__opt_set_group_momentum(s->opt, g, c->mom[g]);
    c->step_count = c->next_count;
    c->best = c->next_best;
    c->bad = c->next_bad;
    c->cool = c->next_cool;
}

void tg__sched_cyclic_free(tg_lr_scheduler *s)
{
    if (!s->u.cyclic) return;
    free(s->u.cyclic->g0);
    free(s->u.cyclic);
}

int tg__sched_cyclic_check_sequential(const char *op, tg_lr_scheduler *const *scheds, int n)
{
    int first_one_cycle = -1;
    for (int i = 0; i < n; i++) {
        TG_CHECK(scheds[i]->kind != TG__SCHED_PLATEAU, TG_EINVAL,
                 "%s: schedulers[%d] is a reduce_lr_on_plateau, which steps with a metric; "
                 "a %s steps it without one", op, i, op);
        if (scheds[i]->kind != TG__SCHED_ONE_CYCLE) continue;
        TG_CHECK(first_one_cycle < 0 || scheds[first_one_cycle] == scheds[i], TG_EINVAL,
                 "%s: schedulers[%d] and schedulers[%d] are both one_cycle_lr; torch's share "
                 "each param group's max_lr, initial and min lr, so one would run on the "
                 "other's", op, first_one_cycle, i);
        first_one_cycle = i;
    }
    return TG_OK;
}

/* ---- construction ------------------------------------------------------------- */

int tg__cyc_per_group(const char *op, const char *name, int n, const double *v, int G,
                      double *out)
{
    TG_CHECK(n == 1 || n == G, TG_EINVAL,
             "%s: n_%s=%d must be 1 or the optimizer's param group count %d", op, name, n, G);
    TG_CHECK(v != NULL, TG_EINVAL, "%s: %s must not be NULL", op, name);
    for (int g = 0; g < G; g++) {
        out[g] = v[n == 1 ? 0 : g];
        TG_CHECK(out[g] >= 0 && isfinite(out[g]), TG_EINVAL,
                 "%s: %s[%d]=%g must be finite and >= 0", op, name, n == 1 ? 0 : g, out[g]);
    }
    return TG_OK;
}

/* Each group's base and max momentum into c->bmom and c->mmom: the lists
 * when given (n 1 or G), else the one value; each finite and >= 0. */
static int momenta(const char *op, cyc *c, int G, double base, int n_base, const double *bases,
                   double max, int n_max, const double *maxes)
{
    if (bases) {
        TG_TRY(tg__cyc_per_group(op, "base_momentums", n_base, bases, G, c->bmom));
    } else {
        TG_CHECK(base >= 0 && isfinite(base), TG_EINVAL,
                 "%s: base_momentum=%g must be finite and >= 0", op, base);
        for (int g = 0; g < G; g++) c->bmom[g] = base;
    }
    if (maxes) return tg__cyc_per_group(op, "max_momentums", n_max, maxes, G, c->mmom);
    TG_CHECK(max >= 0 && isfinite(max), TG_EINVAL,
             "%s: max_momentum=%g must be finite and >= 0", op, max);
    for (int g = 0; g < G; g++) c->mmom[g] = max;
    return TG_OK;
}

cyc *tg__cyc_new(int G)
{
    cyc *c = tg__calloc(1, sizeof *c);
    double *v = tg__calloc((size_t)G * 6, sizeof *v);
    if (!c || !v) {
        free(c);
        free(v);
        return NULL;
    }
    c->g0 = v;
    c->g1 = v + G;
    c->g2 = v + 2 * G;
    c->bmom = v + 3 * G;
    c->mmom = v + 4 * G;
    c->mom = v + 5 * G;
    return c;
}

void tg__cyc_free(cyc *c)
{
    if (c) free(c->g0);
    free(c);
}

int tg__cyc_attach(tg_lr_scheduler **out, tg_optimizer *opt, tg__sched_kind k, cyc *c,
                   const double *base, bool step, bool set_initial)
{
    const int G = opt->n_groups;
    tg_lr_scheduler *s = tg__calloc(1, sizeof *s);
    double *b = tg__calloc((size_t)G, sizeof *b), *l = tg__calloc((size_t)G * 2, sizeof *l);
    if (!s || !b || !l) {
        free(s);
        free(b);
        free(l);
        tg__cyc_free(c);
        return TG_ENOMEM;
    }
    *s = (tg_lr_scheduler){.kind = k, .opt = opt, .last_epoch = -1, .n_groups = G,
                           .base_lrs = b, .n_last = G, .cap = G, .last_lrs = l,
                           .next = l + G, .u.cyclic = c};
    memcpy(b, base, (size_t)G * sizeof *b);
    tg__sched_current_lrs(opt, s->next);
    int rc = step ? tg__sched_cyclic_next_lrs(s, 0, s->next, tg__sched_kind_name(k)) : TG_OK;
    if (rc < 0) {
        tg_lr_scheduler_free(s);
        return rc;
    }
    for (int g = 0; set_initial && g < G; g++) opt->groups[g].initial_lr = base[g];
    if (step) {
        tg__sched_commit(s, 0, s->next);
    } else {
        memcpy(s->last_lrs, s->next, (size_t)G * sizeof *l);
        s->last_epoch = 0;
    }
    *out = s;
    return TG_OK;
}

/* The lr of each group when its initial lr is not set: torch's
 * group.setdefault('initial_lr', group['lr']). */
static void initial_lrs(const tg_optimizer *opt, const double *lr, double *out)
{
    for (int g = 0; g < opt->n_groups; g++)
        out[g] = isnan(opt->groups[g].initial_lr) ? lr[g] : opt->groups[g].initial_lr;
}

/* OneCycleLR's phase ends, and the check that no step reaches a phase of
 * zero length (torch's pct would divide by zero): step e takes the first
 * phase whose end is >= e, or the last. */
static int one_cycle_phases(const char *op, cyc *c, double pct, bool three)
{
    const int64_t T = c->total_steps;
    c->n_phases = three ? 3 : 2;
    c->end_step[0] = pct * (double)T - 1;
    c->end_step[1] = three ? 2 * pct * (double)T - 2 : (double)(T - 1);
    c->end_step[2] = (double)(T - 1);
    double start = 0, before = -INFINITY;
    for (int i = 0; i < c->n_phases; i++) {
        const double end = c->end_step[i];
        const bool last = i == c->n_phases - 1;
        const double lo = fmax(0, floor(before) + 1);   /* the first step past the others */
        TG_CHECK(!(lo <= (double)T && (last || lo <= end) && end - start == 0), TG_EINVAL,
                 "%s: pct_start=%g with total_steps=%lld makes phase %d empty (end_step %g) "
                 "while step %g falls in it; torch divides by zero there", op, pct,
                 (long long)T, i, end, lo);
        before = fmax(before, end);
        start = end;
    }
    return TG_OK;
}

static int check_one_cycle(const char *op, const tg_one_cycle_opts *o, int64_t *T)
{
    if (o->total_steps == 0) {
        TG_CHECK(o->epochs != 0 || o->steps_per_epoch != 0, TG_EINVAL,
                 "%s: you must define either total_steps OR (epochs AND steps_per_epoch)", op);
        TG_CHECK(o->epochs >= 1, TG_EINVAL, "%s: epochs=%lld must be a positive integer", op,
                 (long long)o->epochs);
        TG_CHECK(o->steps_per_epoch >= 1, TG_EINVAL,
                 "%s: steps_per_epoch=%lld must be a positive integer", op,
                 (long long)o->steps_per_epoch);
        TG_CHECK((double)o->epochs * (double)o->steps_per_epoch <= TG__SCHED_MAX_STEPS, TG_EINVAL,
                 "%s: epochs * steps_per_epoch (%lld * %lld) must be at most 2^53", op,
                 (long long)o->epochs, (long long)o->steps_per_epoch);
        *T = o->epochs * o->steps_per_epoch;
    } else {
        TG_CHECK(o->total_steps >= 1 && (double)o->total_steps <= TG__SCHED_MAX_STEPS, TG_EINVAL,
                 "%s: total_steps=%lld must be a positive integer (at most 2^53)", op,
                 (long long)o->total_steps);
        *T = o->total_steps;
    }
    TG_CHECK(o->pct_start >= 0 && o->pct_start <= 1, TG_EINVAL,
             "%s: pct_start=%g must be a float between 0 and 1", op, o->pct_start);
    TG_CHECK(o->anneal_strategy == TG_ANNEAL_COS || o->anneal_strategy == TG_ANNEAL_LINEAR,
             TG_EINVAL, "%s: anneal_strategy=%d must be TG_ANNEAL_COS or TG_ANNEAL_LINEAR", op,
             (int)o->anneal_strategy);
    TG_CHECK(o->div_factor > 0 && isfinite(o->div_factor), TG_EINVAL,
             "%s: div_factor=%g must be finite and > 0", op, o->div_factor);
    TG_CHECK(o->final_div_factor > 0 && isfinite(o->final_div_factor), TG_EINVAL,
             "%s: final_div_factor=%g must be finite and > 0", op, o->final_div_factor);
    return TG_OK;
}

int tg_one_cycle_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, int n_max_lr,
                        const double *max_lr, const tg_one_cycle_opts *opts)
{
    const char *op = "one_cycle_lr";
    TG_TRY(tg__sched_check_common(op, out, opt));
    const tg_one_cycle_opts o = opts ? *opts : (tg_one_cycle_opts)TG_ONE_CYCLE_OPTS_INIT;
    int64_t T = 0;
    TG_TRY(check_one_cycle(op, &o, &T));
    const int G = opt->n_groups;
    cyc *c = tg__cyc_new(G);
    if (!c) return TG_ENOMEM;
    int rc = tg__cyc_per_group(op, "max_lr", n_max_lr, max_lr, G, c->g1);
    c->total_steps = T;
    c->linear = o.anneal_strategy == TG_ANNEAL_LINEAR;
    c->cycle_momentum = o.cycle_momentum;
    if (rc == TG_OK && o.cycle_momentum)
        rc = momenta(op, c, G, o.base_momentum, o.n_base_momentums, o.base_momentums,
                     o.max_momentum, o.n_max_momentums, o.max_momentums);
    if (rc == TG_OK) rc = one_cycle_phases(op, c, o.pct_start, o.three_phase);
    for (int g = 0; rc == TG_OK && g < G; g++) {
        c->g0[g] = c->g1[g] / o.div_factor;
        c->g2[g] = c->g0[g] / o.final_div_factor;
    }
    if (rc < 0) {
        tg__cyc_free(c);
        return rc;
    }
    return tg__cyc_attach(out, opt, TG__SCHED_ONE_CYCLE, c, c->g0, true, true);
}

static int check_cyclic(const char *op, const tg_optimizer *opt, const tg_cyclic_opts *o)
{
    TG_CHECK(o->step_size_up >= 1, TG_EINVAL, "%s: step_size_up=%lld must be >= 1", op,
             (long long)o->step_size_up);
    TG_CHECK(o->step_size_down >= 0, TG_EINVAL,
             "%s: step_size_down=%lld must be >= 0 (0: the same as step_size_up unless "
             "step_size_down_set)", op, (long long)o->step_size_down);
    TG_CHECK((double)o->step_size_up + (double)o->step_size_down <= TG__SCHED_MAX_STEPS, TG_EINVAL,
             "%s: step_size_up + step_size_down must be at most 2^53", op);
    TG_CHECK(o->scale_fn || o->mode == TG_CYCLIC_TRIANGULAR || o->mode == TG_CYCLIC_TRIANGULAR2 ||
             o->mode == TG_CYCLIC_EXP_RANGE, TG_EINVAL,
             "%s: mode=%d is invalid (TG_CYCLIC_TRIANGULAR, _TRIANGULAR2 or _EXP_RANGE) and "
             "scale_fn is NULL", op, (int)o->mode);
    TG_CHECK(o->scale_mode == TG_CYCLIC_SCALE_CYCLE || o->scale_mode == TG_CYCLIC_SCALE_ITERATIONS,
             TG_EINVAL, "%s: scale_mode=%d must be TG_CYCLIC_SCALE_CYCLE or "
             "TG_CYCLIC_SCALE_ITERATIONS", op, (int)o->scale_mode);
    TG_CHECK(o->scale_fn || o->scale_mode == TG_CYCLIC_SCALE_CYCLE, TG_EINVAL,
             "%s: scale_mode=TG_CYCLIC_SCALE_ITERATIONS needs a scale_fn (scale_fn is NULL; "
             "the built-in modes choose their own scale_mode)", op);
    TG_CHECK(o->gamma > 0 && isfinite(o->gamma), TG_EINVAL,
             "%s: gamma=%g must be finite and > 0", op, o->gamma);
    if (!o->cycle_momentum) return TG_OK;
    TG_CHECK(opt->kind == TG__OPT_SGD || opt->kind == TG__OPT_RMSPROP, TG_EINVAL,
             "%s: optimizer must support momentum with cycle_momentum (sgd or rmsprop; "
             "torch does not cycle %s's betas)", op, tg__opt_kind_name(opt->kind));
    return TG_OK;
}

int tg_cyclic_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, int n_base_lr,
                     const double *base_lr, int n_max_lr, const double *max_lr,
                     const tg_cyclic_opts *opts)
{
    const char *op = "cyclic_lr";
    TG_TRY(tg__sched_check_common(op, out, opt));
    const tg_cyclic_opts o = opts ? *opts : (tg_cyclic_opts)TG_CYCLIC_OPTS_INIT;
    TG_TRY(check_cyclic(op, opt, &o));
    const int G = opt->n_groups;
    cyc *c = tg__cyc_new(G);
    if (!c) return TG_ENOMEM;
    /* g1: base_lr, g2: the base lrs of the initial step (torch's
     * _LRScheduler.__init__ takes them from the initial lrs; CyclicLR
     * replaces them by base_lr after it) */
    int rc = tg__cyc_per_group(op, "base_lr", n_base_lr, base_lr, G, c->g1);
    if (rc == TG_OK) rc = tg__cyc_per_group(op, "max_lr", n_max_lr, max_lr, G, c->g0);
    if (rc == TG_OK && o.cycle_momentum)
        rc = momenta(op, c, G, o.base_momentum, o.n_base_momentums, o.base_momentums,
                     o.max_momentum, o.n_max_momentums, o.max_momentums);
    if (rc < 0) {
        tg__cyc_free(c);
        return rc;
    }
    const double up = (double)o.step_size_up;
    const double down = o.step_size_down || o.step_size_down_set ? (double)o.step_size_down : up;
    c->total_size = up + down;
    c->step_ratio = up / c->total_size;
    c->mode = o.mode;
    c->gamma = o.gamma;
    c->scale_fn = o.scale_fn;
    c->scale_user = o.scale_user;
    c->scale_iterations = o.scale_fn ? o.scale_mode == TG_CYCLIC_SCALE_ITERATIONS : false;
    c->cycle_momentum = o.cycle_momentum;
    initial_lrs(opt, c->g1, c->g2);
    TG_TRY(tg__cyc_attach(out, opt, TG__SCHED_CYCLIC, c, c->g2, true, true));
    memcpy((*out)->base_lrs, c->g1, (size_t)G * sizeof *c->g1);
    return TG_OK;
}

int tg_swa_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, int n_swa_lr, const double *swa_lr,
                  int64_t anneal_epochs, tg_anneal_strategy anneal_strategy)
{
    const char *op = "swa_lr";
    TG_TRY(tg__sched_check_common(op, out, opt));
    TG_CHECK(anneal_strategy == TG_ANNEAL_COS || anneal_strategy == TG_ANNEAL_LINEAR, TG_EINVAL,
             "%s: anneal_strategy=%d must be TG_ANNEAL_COS or TG_ANNEAL_LINEAR", op,
             (int)anneal_strategy);
    TG_CHECK(anneal_epochs >= 0 && (double)anneal_epochs <= TG__SCHED_MAX_STEPS, TG_EINVAL,
             "%s: anneal_epochs=%lld must be >= 0 (and at most 2^53)", op,
             (long long)anneal_epochs);
    const int G = opt->n_groups;
    cyc *c = tg__cyc_new(G);
    if (!c) return TG_ENOMEM;
    int rc = tg__cyc_per_group(op, "swa_lr", n_swa_lr, swa_lr, G, c->g0);
    if (rc < 0) {
        tg__cyc_free(c);
        return rc;
    }
    c->anneal_epochs = anneal_epochs;
    c->linear = anneal_strategy == TG_ANNEAL_LINEAR;
    double *cur = c->g1, *base = c->g2;   /* scratch until attach */
    tg__sched_current_lrs(opt, cur);
    initial_lrs(opt, cur, base);
    rc = tg__cyc_attach(out, opt, TG__SCHED_SWA, c, base, true, true);
    return rc;
}
