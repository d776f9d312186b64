/* src/nn/lr_scheduler_plateau.c - torch's ReduceLROnPlateau: construction,
 * its step with a metric and its counters; and the state keys that the
 * kinds of lr_scheduler_cyclic.c add to the common ones (ReduceLROnPlateau's
 * counters, SWALR's step count). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lr_scheduler_cyclic.h"
#include "nn/state_check.h"

int tg_reduce_lr_on_plateau_new(tg_lr_scheduler **out, tg_optimizer *opt,
                                const tg_plateau_opts *opts, int n_min_lr, const double *min_lr)
{
    const char *op = "reduce_lr_on_plateau";
    TG_TRY(tg__sched_check_common(op, out, opt));
    const tg_plateau_opts o = opts ? *opts : (tg_plateau_opts)TG_PLATEAU_OPTS_INIT;
    TG_CHECK(o.factor < 1.0, TG_EINVAL, "%s: factor=%g should be < 1.0", op, o.factor);
    TG_CHECK(o.factor >= 0, TG_EINVAL, "%s: factor=%g must be >= 0", op, o.factor);
    TG_CHECK(o.patience >= 0, TG_EINVAL, "%s: patience=%lld must be >= 0", op,
             (long long)o.patience);
    TG_CHECK(o.cooldown >= 0, TG_EINVAL, "%s: cooldown=%lld must be >= 0", op,
             (long long)o.cooldown);
    TG_CHECK(o.threshold >= 0 && isfinite(o.threshold), TG_EINVAL,
             "%s: threshold=%g must be finite and >= 0", op, o.threshold);
    TG_CHECK(o.eps >= 0 && isfinite(o.eps), TG_EINVAL, "%s: eps=%g must be finite and >= 0", op,
             o.eps);
    const int G = opt->n_groups;
    TG_CHECK(min_lr != NULL || n_min_lr == 0, TG_EINVAL,
             "%s: min_lr must not be NULL when n_min_lr=%d", op, n_min_lr);
    cyc *c = tg__cyc_new(G);
    if (!c) return TG_ENOMEM;
    int rc = min_lr ? tg__cyc_per_group(op, "min_lr", n_min_lr, min_lr, G, c->g0) : TG_OK;
    if (rc < 0) {
        tg__cyc_free(c);
        return rc;
    }
    c->p = o;
    c->best = o.mode_max ? -INFINITY : INFINITY;   /* torch's mode_worse */
    tg__sched_current_lrs(opt, c->g1);
    return tg__cyc_attach(out, opt, TG__SCHED_PLATEAU, c, c->g1, false, false);
}

/* ---- ReduceLROnPlateau's step ----------------------------------------------------- */

/* torch's is_better(a, best); false for a NaN a. */
static bool is_better(const tg_plateau_opts *p, double a, double best)
{
    if (!p->mode_max && !p->threshold_abs) return a < best * (1. - p->threshold);
    if (!p->mode_max) return a < best - p->threshold;
    if (!p->threshold_abs) return a > best * (p->threshold + 1.);
    return a > best + p->threshold;
}

static int plateau_of(const char *what, const tg_lr_scheduler *s)
{
    TG_CHECK(s != NULL, TG_EINVAL, "%s: s must not be NULL", what);
    TG_CHECK(s->kind == TG__SCHED_PLATEAU, TG_EINVAL, "%s: s is a %s, not a reduce_lr_on_plateau",
             what, tg__sched_kind_name(s->kind));
    return TG_OK;
}

int tg_reduce_lr_on_plateau_step(tg_lr_scheduler *s, double metric)
{
    const char *what = "reduce_lr_on_plateau_step";
    TG_TRY(plateau_of(what, s));
    TG_TRY(tg__sched_reserve(s));
    cyc *c = s->u.cyclic;
    const tg_plateau_opts *p = &c->p;
    const bool better = is_better(p, metric, c->best);
    c->next_best = better ? metric : c->best;
    c->next_bad = better ? 0 : c->bad + 1;
    c->next_cool = c->cool;
    if (c->next_cool > 0) {   /* in cooldown: bad steps are not counted */
        c->next_cool -= 1;
        c->next_bad = 0;
    }
    double *lrs = s->next;
    tg__sched_current_lrs(s->opt, lrs);
    if (c->next_bad > p->patience) {
        TG_CHECK(s->opt->n_groups == s->n_groups, TG_EINVAL,
                 "%s: param group %d was added after the reduce_lr_on_plateau was made; it has "
                 "no min_lr for it", what, s->n_groups);
        for (int g = 0; g < s->n_groups; g++) {
            const double old = lrs[g], reduced = old * p->factor;
            const double new_lr = c->g0[g] > reduced ? c->g0[g] : reduced;   /* Python's max */
            if (old - new_lr > p->eps) lrs[g] = new_lr;
        }
        c->next_cool = p->cooldown;
        c->next_bad = 0;
    }
    tg__sched_commit(s, s->last_epoch + 1, lrs);
    return TG_OK;
}

int tg_reduce_lr_on_plateau_get(const tg_lr_scheduler *s, double *best, int64_t *num_bad_epochs,
                                int64_t *cooldown_counter)
{
    TG_TRY(plateau_of("reduce_lr_on_plateau_get", s));
    if (best) *best = s->u.cyclic->best;
    if (num_bad_epochs) *num_bad_epochs = s->u.cyclic->bad;
    if (cooldown_counter) *cooldown_counter = s->u.cyclic->cool;
    return TG_OK;
}

/* ---- state ---------------------------------------------------------------------- */

#define KEY_MAX 256
#define WHAT "lr_scheduler_state_load"

static int key(char *buf, const char *what, const char *prefix, const char *name)
{
    int len = snprintf(buf, KEY_MAX, "%s.%s", prefix, name);
    TG_CHECK(len > 0 && len < KEY_MAX, TG_EINVAL,
             "%s: prefix '%.32s...' too long (keys are at most %d chars)", what, prefix,
             KEY_MAX - 1);
    return TG_OK;
}

int tg__sched_cyclic_save(const tg_lr_scheduler *s, tg_st_file *f, const char *prefix)
{
    const char *what = "lr_scheduler_state_save";
    const cyc *c = s->u.cyclic;
    char k[KEY_MAX];
    if (s->kind == TG__SCHED_SWA) {
        TG_TRY(key(k, what, prefix, "step_count"));
        return tg__st_put_scalar(f, k, TG_I64, (double)c->step_count);
    }
    if (s->kind != TG__SCHED_PLATEAU) return TG_OK;
    TG_TRY(key(k, what, prefix, "best"));
    TG_TRY(tg__st_put_scalar(f, k, TG_F64, c->best));
    TG_TRY(key(k, what, prefix, "num_bad_epochs"));
    TG_TRY(tg__st_put_scalar(f, k, TG_I64, (double)c->bad));
    TG_TRY(key(k, what, prefix, "cooldown_counter"));
    return tg__st_put_scalar(f, k, TG_I64, (double)c->cool);
}

/* The one value under "prefix.name" into *v; a count (integer) must be an
 * integer in [0, 2^53], else v must not be NaN. */
static int get_value(const tg_st_file *f, const char *prefix, const char *name, bool count,
                     double *v)
{
    char k[KEY_MAX];
    TG_TRY(key(k, WHAT, prefix, name));
    const tg_tensor *t = tg_st_get(f, k);
    TG_CHECK(t != NULL, TG_ENOTFOUND, WHAT ": missing key '%s'", k);
    TG_CHECK(tg_tensor_numel(t) == 1, TG_ESHAPE, WHAT ": '%s' must hold one value, has %lld",
             k, (long long)tg_tensor_numel(t));
    TG_TRY(tg_tensor_get_flat(t, 0, v));
    TG_CHECK(!count || (*v >= 0 && *v <= TG__SCHED_MAX_STEPS && *v == floor(*v)), TG_EINVAL,
             WHAT ": '%s'=%g must be an integer in [0, 2^53]", k, *v);
    TG_CHECK(count || !isnan(*v), TG_EINVAL, WHAT ": '%s' must not be NaN", k);
    return TG_OK;
}

int tg__sched_cyclic_load(const tg_lr_scheduler *s, const tg_st_file *f, const char *prefix,
                          bool apply)
{
    cyc *c = s->u.cyclic;
    double v[3];
    if (s->kind == TG__SCHED_SWA) {
        TG_TRY(get_value(f, prefix, "step_count", true, &v[0]));
        if (apply) c->step_count = (int64_t)v[0];
        return TG_OK;
    }
    if (s->kind != TG__SCHED_PLATEAU) return TG_OK;
    TG_TRY(get_value(f, prefix, "best", false, &v[0]));
    TG_TRY(get_value(f, prefix, "num_bad_epochs", true, &v[1]));
    TG_TRY(get_value(f, prefix, "cooldown_counter", true, &v[2]));
    if (apply) {
        c->best = v[0];
        c->bad = (int64_t)v[1];
        c->cool = (int64_t)v[2];
    }
    return TG_OK;
}
