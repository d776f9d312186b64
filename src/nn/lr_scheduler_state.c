/* src/nn/lr_scheduler_state.c - saving a learning-rate scheduler's state into
 * a tg_st_file and restoring it.  Load reads and checks every value (a
 * SequentialLR's schedulers included) before it writes any, so a bad file
 * leaves every scheduler unchanged. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lr_scheduler_internal.h"
#include "nn/state_check.h"

#define KEY_MAX 256

/* "<prefix>.<name>" into buf; name NULL with i >= 0 gives "<prefix>.<i>",
 * a SequentialLR's prefix for its scheduler i. */
static int key(char *buf, const char *what, const char *prefix, const char *name, int i)
{
    int len = name ? snprintf(buf, KEY_MAX, "%s.%s", prefix, name)
                   : snprintf(buf, KEY_MAX, "%s.%d", prefix, i);
    TG_CHECK(len > 0 && len < KEY_MAX, TG_EINVAL,
             "%s: prefix '%.32s...' too long (keys are at most %d chars)", what, prefix,
             KEY_MAX - 1);
    return TG_OK;
}

static int save(const tg_lr_scheduler *s, tg_st_file *f, const char *prefix)
{
    const char *what = "lr_scheduler_state_save";
    char k[KEY_MAX];
    TG_TRY(key(k, what, prefix, "kind", -1));
    TG_TRY(tg_st_meta_set(f, k, tg__sched_kind_name(s->kind)));
    TG_TRY(key(k, what, prefix, "last_epoch", -1));
    TG_TRY(tg__st_put_scalar(f, k, TG_I64, (double)s->last_epoch));
    TG_TRY(key(k, what, prefix, "base_lr", -1));
    TG_TRY(tg__st_put_values(f, k, TG_F64, s->n_groups, 1, s->base_lrs));
    TG_TRY(key(k, what, prefix, "last_lr", -1));
    TG_TRY(tg__st_put_values(f, k, TG_F64, s->n_last, 1, s->last_lrs));
    if (tg__sched_is_cyclic(s->kind)) TG_TRY(tg__sched_cyclic_save(s, f, prefix));
    TG_TRY(tg__sched_extra_save(s, f, prefix));
    for (int i = 0; tg__sched_borrows(s) && i < s->u.sequential.n; i++) {
        TG_TRY(key(k, what, prefix, NULL, i));
        TG_TRY(save(s->u.sequential.schedulers[i], f, k));
    }
    return TG_OK;
}

int tg_lr_scheduler_state_save(const tg_lr_scheduler *s, tg_st_file *f, const char *prefix)
{
    TG_CHECK(s != NULL && f != NULL && prefix != NULL, TG_EINVAL,
             "lr_scheduler_state_save: s, f and prefix must not be NULL");
    return save(s, f, prefix);
}

/* ---- load ------------------------------------------------------------------ */

#define WHAT "lr_scheduler_state_load"

/* The one-element tensor under "prefix.name" into *v. */
static int get_value(const tg_st_file *f, const char *prefix, const char *name, char *k,
                     double *v)
{
    TG_TRY(key(k, WHAT, prefix, name, -1));
    const tg_tensor *t = tg_st_get(f, k);
    TG_CHECK(t != NULL, TG_ENOTFOUND, WHAT ": missing key '%s'", k);
    TG_CHECK(tg_tensor_numel(t) == 1, TG_ESHAPE, WHAT ": '%s' must hold one value, has %lld",
             k, (long long)tg_tensor_numel(t));
    return tg_tensor_get_flat(t, 0, v);
}

/* The lrs under "prefix.name" (0-d for one), each finite and >= 0, into v
 * and their count into *n: base_lr holds one per param group s has a base
 * lr for; last_lr (last true) one per group the optimizer had at the last
 * step, from those up to the optimizer's count. */
static int get_lrs(const tg_lr_scheduler *s, const tg_st_file *f, const char *prefix,
                   const char *name, bool last, double *v, int *n)
{
    char k[KEY_MAX];
    TG_TRY(key(k, WHAT, prefix, name, -1));
    const tg_tensor *t = tg_st_get(f, k);
    const int lo = s->n_groups, hi = last ? s->opt->n_groups : lo;
    TG_CHECK(t != NULL, TG_ENOTFOUND, WHAT ": missing key '%s'", k);
    const int64_t G = tg_tensor_numel(t);
    TG_CHECK(lo == hi || (G >= lo && G <= hi), TG_ESHAPE,
             WHAT ": '%s' must hold %d to %d values (one per param group at the last step), "
             "has %lld", k, lo, hi, (long long)G);
    TG_CHECK(lo != hi || G == lo, TG_ESHAPE,
             WHAT ": '%s' must hold %d value%s (one per param group), has %lld", k, lo,
             lo > 1 ? "s" : "", (long long)G);
    *n = (int)G;
    for (int g = 0; g < G; g++) {
        TG_TRY(tg_tensor_get_flat(t, g, &v[g]));
        char at[16] = "";
        if (G > 1) snprintf(at, sizeof at, "[%d]", g);
        TG_CHECK(v[g] >= 0 && isfinite(v[g]), TG_EINVAL,
                 WHAT ": '%s'%s=%g must be finite and >= 0", k, at, v[g]);
    }
    return TG_OK;
}

/* s's own values under prefix, checked against s's kind and their ranges,
 * into *epoch, base[0..n_groups) and last[0..*n_last), n_last at most the
 * optimizer's group count. */
static int read_values(const tg_lr_scheduler *s, const tg_st_file *f, const char *prefix,
                       int64_t *epoch, double *base, double *last, int *n_last)
{
    char k[KEY_MAX];
    TG_TRY(key(k, WHAT, prefix, "kind", -1));
    const char *kind = tg_st_meta_get(f, k), *mine = tg__sched_kind_name(s->kind);
    TG_CHECK(kind != NULL, TG_ENOTFOUND, WHAT ": missing metadata '%s'", k);
    TG_CHECK(strcmp(kind, mine) == 0, TG_EINVAL, WHAT ": '%s' is '%s'; this scheduler is '%s'",
             k, kind, mine);
    double e;
    TG_TRY(get_value(f, prefix, "last_epoch", k, &e));
    /* within +-2^53, where doubles still hold every integer */
    TG_CHECK(fabs(e) <= 0x1p53 && e == floor(e), TG_EINVAL,
             WHAT ": '%s'=%g must be an integer within +-2^53", k, e);
    *epoch = (int64_t)e;
    int nb;
    TG_TRY(get_lrs(s, f, prefix, "base_lr", false, base, &nb));
    return get_lrs(s, f, prefix, "last_lr", true, last, n_last);
}

/* Checks everything load_checked would restore. */
static int check(const tg_lr_scheduler *s, const tg_st_file *f, const char *prefix)
{
    int64_t e;
    int n_last;
    double *v = tg__malloc((size_t)(s->n_groups + s->opt->n_groups) * sizeof *v);
    if (!v) return TG_ENOMEM;
    int rc = read_values(s, f, prefix, &e, v, v + s->n_groups, &n_last);
    free(v);
    TG_TRY(rc);
    if (tg__sched_is_cyclic(s->kind))
        TG_TRY(tg__sched_cyclic_load(s, f, prefix, false));
    TG_TRY(tg__sched_extra_load(s, f, prefix, NULL));
    if (!tg__sched_borrows(s)) return TG_OK;
    TG_TRY(tg__st_check_indices(f, prefix, s->u.sequential.n, WHAT, "scheduler",
                                s->kind == TG__SCHED_CHAINED ? "this chained_scheduler has"
                                                             : "this sequential_lr has"));
    for (int i = 0; i < s->u.sequential.n; i++) {
        char k[KEY_MAX];
        TG_TRY(key(k, WHAT, prefix, NULL, i));
        TG_TRY(check(s->u.sequential.schedulers[i], f, k));
    }
    return TG_OK;
}

/* Restores what check() accepted, into s whose blocks tg__sched_reserve
 * grew: reading the same values cannot fail. */
static void load_checked(tg_lr_scheduler *s, const tg_st_file *f, const char *prefix)
{
    int rc = read_values(s, f, prefix, &s->last_epoch, s->base_lrs, s->last_lrs, &s->n_last);
    TG_ASSERT(rc == TG_OK);
    rc = tg__sched_is_cyclic(s->kind) ? tg__sched_cyclic_load(s, f, prefix, true) : TG_OK;
    if (rc == TG_OK) rc = tg__sched_extra_load(s, f, prefix, s);
    TG_ASSERT(rc == TG_OK);
    for (int i = 0; tg__sched_borrows(s) && i < s->u.sequential.n; i++) {
        char k[KEY_MAX];
        rc = key(k, WHAT, prefix, NULL, i);
        TG_ASSERT(rc == TG_OK);
        load_checked(s->u.sequential.schedulers[i], f, k);
    }
}

int tg__lr_scheduler_state_check(const tg_lr_scheduler *s, const tg_st_file *f,
                                 const char *prefix)
{
    return check(s, f, prefix);
}

int tg_lr_scheduler_state_load(tg_lr_scheduler *s, const tg_st_file *f, const char *prefix)
{
    TG_CHECK(s != NULL && f != NULL && prefix != NULL, TG_EINVAL,
             WHAT ": s, f and prefix must not be NULL");
    TG_TRY(check(s, f, prefix));
    TG_TRY(tg__sched_reserve(s));
    load_checked(s, f, prefix);
    return TG_OK;
}
