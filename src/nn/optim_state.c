/* src/nn/optim_state.c - saving an optimizer's state into a tg_st_file and
 * restoring it exactly: the step count, the param groups' sizes and
 * hyperparameters (torch's param_groups) and each parameter's buffers.
 * Load reads and checks every entry and builds the new state aside before
 * swapping it in, so a bad file leaves the optimizer unchanged.
 *
 * A group's value of a hyperparameter sits in one tensor per key, one value
 * per group: 0-d (pairs such as betas: shape (2)) for an optimizer of one
 * group, the format of files from before groups; shape (G) (pairs: (G, 2))
 * for G > 1 groups, whose sizes "prefix.param_groups" (i64, (G)) gives. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "nn/state_check.h"
#include "optim_internal.h"

#define KEY_MAX 256

static int key(char *buf, const char *prefix, int i, const char *name)
{
    int len = i < 0 ? snprintf(buf, KEY_MAX, "%s.%s", prefix, name)
                    : snprintf(buf, KEY_MAX, "%s.%d.%s", prefix, i, name);
    TG_CHECK(len > 0 && len < KEY_MAX, TG_EINVAL,
             "optimizer_state: prefix '%.32s...' too long (keys are at most %d chars)", prefix,
             KEY_MAX - 1);
    return TG_OK;
}

/* Stores a 0-d tensor of dtype dt holding v under k (f keeps its reference). */
int tg__st_put_scalar(tg_st_file *f, const char *k, tg_dtype dt, double v)
{
    tg_tensor *t;
    TG_TRY(tg_tensor_scalar(&t, dt, v));
    int rc = tg_st_set(f, k, t);
    tg_tensor_release(t);
    return rc;
}

/* Stores a copy of t (later steps must not change what was saved). */
static int put_copy(tg_st_file *f, const char *k, const tg_tensor *t)
{
    tg_tensor *c;
    TG_TRY(tg_tensor_clone(&c, t));
    int rc = tg_st_set(f, k, c);
    tg_tensor_release(c);
    return rc;
}

/* The hyperparameters saved besides lr are tg__opt_hps' (optim_options.c),
 * under torch's param_group keys: "betas", "etas" and "step_sizes" hold
 * two f64 values per group, the flags i64 0 or 1, the rest f64.  A file
 * without one (written before they were saved) leaves the optimizer's
 * values as they are. */

int tg__st_put_values(tg_st_file *f, const char *k, tg_dtype dt, int g, int width,
                      const double *v)
{
    int64_t shape[2] = {g, width};
    const int ndim = (g > 1) + (width > 1);
    if (g == 1) shape[0] = width;
    tg_tensor *t;
    TG_TRY(tg_tensor_zeros(&t, dt, ndim, shape));
    for (int i = 0; i < g * width; i++) (void)tg_tensor_set_flat(t, i, v[i]);
    int rc = tg_st_set(f, k, t);
    tg_tensor_release(t);
    return rc;
}

/* Each group's value of hyperparameter e (e NULL: lr; initial: the
 * initial lr) into v (2 per group for betas). */
static void group_values(const tg_optimizer *opt, const tg__hp_entry *e, bool initial, double *v)
{
    for (int g = 0; g < opt->n_groups; g++) {
        tg__opt_hparams h = opt->groups[g].h;
        if (initial) v[g] = opt->groups[g].initial_lr;
        else if (!e) v[g] = h.lr;
        else if (e->form == TG__HP_FLAG) v[g] = *tg__opt_hp_flag(&h, e->off);
        else if (e->form == TG__HP_REAL) v[g] = *tg__opt_hp_real(&h, e->off);
        else v[2 * g] = *tg__opt_hp_real(&h, e->off), v[2 * g + 1] = *tg__opt_hp_real(&h,
                                                                                 e->off2);
    }
}

static int save_groups(const tg_optimizer *opt, tg_st_file *f, const char *prefix, double *v)
{
    char k[KEY_MAX];
    const int G = opt->n_groups;
    if (G > 1) {
        for (int g = 0; g < G; g++) v[g] = opt->groups[g].end - opt->groups[g].begin;
        TG_TRY(key(k, prefix, -1, "param_groups"));
        TG_TRY(tg__st_put_values(f, k, TG_I64, G, 1, v));
    }
    group_values(opt, NULL, false, v);
    TG_TRY(key(k, prefix, -1, "lr"));
    TG_TRY(tg__st_put_values(f, k, TG_F64, G, 1, v));
    for (int e = 0; e < tg__opt_n_hps; e++) {
        if (!tg__opt_hp_of(&tg__opt_hps[e], opt->kind)) continue;
        group_values(opt, &tg__opt_hps[e], false, v);
        TG_TRY(key(k, prefix, -1, tg__opt_hps[e].key));
        const tg__hp_entry *he = &tg__opt_hps[e];
        TG_TRY(tg__st_put_values(f, k, he->form == TG__HP_FLAG ? TG_I64 : TG_F64, G,
                                 he->form == TG__HP_PAIR ? 2 : 1, v));
    }
    group_values(opt, NULL, true, v);
    bool all = true;   /* a scheduler attached since the last group was added */
    for (int g = 0; g < G; g++) all = all && !isnan(v[g]);
    if (!all) return TG_OK;
    TG_TRY(key(k, prefix, -1, "initial_lr"));
    return tg__st_put_values(f, k, TG_F64, G, 1, v);
}

int tg_optimizer_state_save(const tg_optimizer *opt, tg_st_file *f, const char *prefix)
{
    TG_CHECK(opt != NULL && f != NULL && prefix != NULL, TG_EINVAL,
             "optimizer_state_save: opt, f and prefix must not be NULL");
    char k[KEY_MAX];
    TG_TRY(key(k, prefix, -1, "kind"));
    TG_TRY(tg_st_meta_set(f, k, tg__opt_kind_name(opt->kind)));
    TG_TRY(key(k, prefix, -1, "step"));
    TG_TRY(tg__st_put_scalar(f, k, TG_I64, (double)opt->steps));
    double *v = tg__malloc((size_t)opt->n_groups * 2 * sizeof *v);
    if (!v) return TG_ENOMEM;
    int rc = save_groups(opt, f, prefix, v);
    free(v);
    TG_TRY(rc);
    for (int gi = 0; gi < opt->n_groups; gi++) {
        const tg__opt_group *g = &opt->groups[gi];
        for (int i = g->begin; i < g->end; i++) {
            const tg__opt_state *st = &opt->state[i];
            if (!tg__opt_has_buf(opt->kind, &g->h, 0) || !st->buf[0]) continue;
            if (opt->kind != TG__OPT_SGD) {
                TG_TRY(key(k, prefix, i, "step"));
                TG_TRY(tg__st_put_scalar(f, k, TG_I64, (double)st->step));
            }
            if (opt->kind == TG__OPT_NADAM) {
                TG_TRY(key(k, prefix, i, "mu_product"));
                TG_TRY(tg__st_put_scalar(f, k, TG_F32, st->mu_product));
            }
            if (opt->kind == TG__OPT_ASGD) {
                TG_TRY(key(k, prefix, i, "eta"));
                TG_TRY(tg__st_put_scalar(f, k, TG_F32, st->eta));
                TG_TRY(key(k, prefix, i, "mu"));
                TG_TRY(tg__st_put_scalar(f, k, TG_F32, st->mu));
            }
            for (int j = 0; j < TG__OPT_MAX_BUFS; j++) {
                if (!tg__opt_has_buf(opt->kind, &g->h, j)) continue;
                TG_TRY(key(k, prefix, i, tg__opt_buf_name(opt->kind, j)));
                TG_TRY(put_copy(f, k, st->buf[j]));
            }
        }
    }
    return opt->kind == TG__OPT_LBFGS ? tg__lbfgs_state_save(opt, f, prefix) : TG_OK;
}

/* ---- load ------------------------------------------------------------------ */

/* The value of the one-element tensor under k as a non-negative integer
 * (steps) or a non-negative double (lr). */
static int get_count(const tg_st_file *f, const char *k, bool integral, double *v)
{
    const tg_tensor *t = tg_st_get(f, k);
    TG_CHECK(t != NULL, TG_ENOTFOUND, "optimizer_state_load: missing key '%s'", k);
    TG_CHECK(tg_tensor_numel(t) == 1, TG_ESHAPE,
             "optimizer_state_load: '%s' must hold one value, has %lld", k,
             (long long)tg_tensor_numel(t));
    TG_TRY(tg_tensor_get_flat(t, 0, v));
    /* finite, and a count below 2^53 (where doubles still hold every integer) */
    TG_CHECK(*v >= 0 && isfinite(*v) && (!integral || (*v <= 0x1p53 && *v == floor(*v))),
             TG_EINVAL, "optimizer_state_load: '%s'=%g must be a finite non-negative %s", k,
             *v, integral ? "integer" : "number");
    return TG_OK;
}

/* A state buffer for parameter p from the tensor under k: same shape, any
 * float dtype, converted to p's compute dtype (exact when saved by us). */
static int get_buf(const tg_st_file *f, const char *k, const tg_tensor *p, tg_tensor **out)
{
    const tg_tensor *t = tg_st_get(f, k);
    TG_CHECK(t != NULL, TG_ENOTFOUND, "optimizer_state_load: missing key '%s'", k);
    TG_CHECK(tg_dtype_is_float(t->dtype), TG_EDTYPE,
             "optimizer_state_load: '%s' has dtype %s; float dtypes only", k,
             tg_dtype_name(t->dtype));
    if (!tg_tensor_same_shape(p, t)) {
        char a[96], b[96];
        tg_shape_str(a, sizeof a, p->ndim, p->shape);
        tg_shape_str(b, sizeof b, t->ndim, t->shape);
        return tg__error(TG_ESHAPE, "optimizer_state_load: '%s' has shape %s; its parameter "
                         "has shape %s", k, b, a);
    }
    return tg_tensor_to_dtype(out, t, tg__compute_dtype(p->dtype));
}

int tg__st_check_indices(const tg_st_file *f, const char *prefix, int n, const char *what,
                         const char *noun, const char *owner)
{
    size_t plen = strlen(prefix);
    for (int e = 0; e < tg_st_count(f); e++) {
        const char *name;
        tg_tensor *t;
        TG_TRY(tg_st_at(f, e, &name, &t));
        if (strncmp(name, prefix, plen) != 0 || name[plen] != '.') continue;
        char *end;
        long i = strtol(name + plen + 1, &end, 10);
        if (end == name + plen + 1 || *end != '.') continue;
        TG_CHECK(i >= 0 && i < n, TG_EINVAL, "%s: '%s' is for %s %ld; %s %d", what, name, noun,
                 i, owner, n);
    }
    return TG_OK;
}

/* What a file holds besides the parameters' buffers, read and checked:
 * each group's hyperparameters (the optimizer's, with the file's values
 * over them) and initial lr.  Owned arrays of n_groups entries. */
typedef struct opt_header {
    double steps;
    tg__opt_hparams *h;
    double *initial_lr;
} opt_header;

static void header_free(opt_header *v)
{
    free(v->h);
    free(v->initial_lr);
}

/* "'<k>'" or, with G > 1 groups, "'<k>'[g]", for messages. */
static const char *at(char *buf, size_t n, const char *k, int G, int g)
{
    if (G > 1) snprintf(buf, n, "'%s'[%d]", k, g);
    else snprintf(buf, n, "'%s'", k);
    return buf;
}

/* The tensor under k with G * width values into v; NULL *t when absent. */
static int read_values(const tg_st_file *f, const char *k, int G, int width, double *v,
                       const tg_tensor **t)
{
    *t = tg_st_get(f, k);
    if (!*t) return TG_OK;
    const int64_t want = (int64_t)G * width;
    TG_CHECK(tg_tensor_numel(*t) == want, TG_ESHAPE,
             "optimizer_state_load: '%s' must hold %lld value%s%s, has %lld", k,
             (long long)want, want > 1 ? "s" : "", G > 1 ? " (for each param group)" : "",
             (long long)tg_tensor_numel(*t));
    for (int64_t i = 0; i < want; i++) TG_TRY(tg_tensor_get_flat(*t, i, &v[i]));
    return TG_OK;
}

/* The file's groups must be the optimizer's: as many, of the same sizes. */
static int check_group_sizes(const tg_optimizer *opt, const tg_st_file *f, const char *prefix,
                             double *v)
{
    char k[KEY_MAX];
    const int G = opt->n_groups;
    TG_TRY(key(k, prefix, -1, "param_groups"));
    const tg_tensor *t = tg_st_get(f, k);
    TG_CHECK(t != NULL || G == 1, TG_EINVAL,
             "optimizer_state_load: no '%s': the state is of one param group; this optimizer "
             "has %d", k, G);
    if (!t) return TG_OK;
    TG_CHECK(tg_tensor_numel(t) == G, TG_EINVAL,
             "optimizer_state_load: '%s' holds %lld param groups; this optimizer has %d", k,
             (long long)tg_tensor_numel(t), G);
    TG_TRY(read_values(f, k, G, 1, v, &t));
    for (int g = 0; g < G; g++) {
        const int n = opt->groups[g].end - opt->groups[g].begin;
        TG_CHECK(v[g] == n, TG_EINVAL,
                 "optimizer_state_load: '%s'[%d]=%g parameters; this optimizer's group %d has %d",
                 k, g, v[g], g, n);
    }
    return TG_OK;
}

/* A learning rate of group g (lr or initial_lr): finite and >= 0. */
static int check_lr(const char *k, int G, int g, double lr)
{
    char n[KEY_MAX + 16];
    TG_CHECK(lr >= 0 && isfinite(lr), TG_EINVAL,
             "optimizer_state_load: %s=%g must be a finite non-negative number",
             at(n, sizeof n, k, G, g), lr);
    return TG_OK;
}

/* Every group's hyperparameters from f over the optimizer's into v->h,
 * with each value's form checked (a flag 0 or 1) and each group's set by
 * the constructors' rules; v->initial_lr likewise.  w holds 2 G doubles. */
static int read_groups(const tg_optimizer *opt, const tg_st_file *f, const char *prefix,
                       opt_header *v, double *w)
{
    char k[KEY_MAX], n[KEY_MAX + 16];
    const int G = opt->n_groups;
    const tg_tensor *t;
    TG_TRY(key(k, prefix, -1, "lr"));
    TG_TRY(read_values(f, k, G, 1, w, &t));
    TG_CHECK(t != NULL, TG_ENOTFOUND, "optimizer_state_load: missing key '%s'", k);
    for (int g = 0; g < G; g++) {
        TG_TRY(check_lr(k, G, g, w[g]));
        v->h[g].lr = w[g];
    }
    for (int e = 0; e < tg__opt_n_hps; e++) {
        const tg__hp_entry *he = &tg__opt_hps[e];
        if (!tg__opt_hp_of(he, opt->kind)) continue;
        TG_TRY(key(k, prefix, -1, he->key));
        TG_TRY(read_values(f, k, G, he->form == TG__HP_PAIR ? 2 : 1, w, &t));
        for (int g = 0; t && g < G; g++) {
            if (he->form == TG__HP_FLAG) {
                TG_CHECK(w[g] == 0 || w[g] == 1, TG_EINVAL,
                         "optimizer_state_load: %s=%g must be 0 or 1", at(n, sizeof n, k, G, g),
                         w[g]);
                *tg__opt_hp_flag(&v->h[g], he->off) = w[g] == 1;
            } else if (he->form == TG__HP_REAL) {
                *tg__opt_hp_real(&v->h[g], he->off) = w[g];
            } else {
                *tg__opt_hp_real(&v->h[g], he->off) = w[2 * g];
                *tg__opt_hp_real(&v->h[g], he->off2) = w[2 * g + 1];
            }
        }
    }
    for (int g = 0; g < G; g++)
        TG_TRY(tg__opt_check_hparams(opt->kind, &v->h[g], "optimizer_state_load", prefix,
                                     G > 1 ? g : -1));
    TG_TRY(key(k, prefix, -1, "initial_lr"));
    TG_TRY(read_values(f, k, G, 1, w, &t));
    for (int g = 0; t && g < G; g++) {
        TG_TRY(check_lr(k, G, g, w[g]));
        v->initial_lr[g] = w[g];
    }
    return TG_OK;
}

/* Reads and checks everything but the buffers into *v (freed by the
 * caller with header_free, also on error). */
static int check_header(const tg_optimizer *opt, const tg_st_file *f, const char *prefix,
                        opt_header *v)
{
    char k[KEY_MAX];
    const int G = opt->n_groups;
    *v = (opt_header){.h = tg__malloc((size_t)G * sizeof *v->h),
                      .initial_lr = tg__malloc((size_t)G * sizeof *v->initial_lr)};
    double *w = tg__malloc((size_t)G * 2 * sizeof *w);
    if (!v->h || !v->initial_lr || !w) {
        free(w);
        return TG_ENOMEM;
    }
    for (int g = 0; g < G; g++) {
        v->h[g] = opt->groups[g].h;
        v->initial_lr[g] = opt->groups[g].initial_lr;
    }
    int rc = key(k, prefix, -1, "kind");
    const char *kind = rc < 0 ? NULL : tg_st_meta_get(f, k);
    if (rc >= 0 && !kind)
        rc = tg__error(TG_ENOTFOUND, "optimizer_state_load: missing metadata '%s'", k);
    if (rc >= 0 && strcmp(kind, tg__opt_kind_name(opt->kind)) != 0)
        rc = tg__error(TG_EINVAL, "optimizer_state_load: '%s' is '%s'; this optimizer is '%s'",
                       k, kind, tg__opt_kind_name(opt->kind));
    if (rc >= 0) rc = key(k, prefix, -1, "step");
    if (rc >= 0) rc = get_count(f, k, true, &v->steps);
    if (rc >= 0) rc = check_group_sizes(opt, f, prefix, w);
    if (rc >= 0) rc = read_groups(opt, f, prefix, v, w);
    if (rc >= 0)
        rc = tg__st_check_indices(f, prefix, opt->n, "optimizer_state_load", "parameter",
                                  "the optimizer has");
    free(w);
    return rc;
}

/* A scalar of parameter i's state kept in f32 as torch keeps it, within
 * [lo, hi], NaN refused: NAdam's mu_product (a product of factors in
 * [0, 1), or 1 before any), ASGD's mu (1 / max(1, t - t0)) and eta. */
static int get_f32(const tg_st_file *f, const char *prefix, int i, const char *name, double lo,
                   double hi, double *out)
{
    char k[KEY_MAX];
    TG_TRY(key(k, prefix, i, name));
    const tg_tensor *t = tg_st_get(f, k);
    TG_CHECK(t != NULL, TG_ENOTFOUND, "optimizer_state_load: missing key '%s'", k);
    TG_CHECK(tg_tensor_numel(t) == 1, TG_ESHAPE,
             "optimizer_state_load: '%s' must hold one value, has %lld", k,
             (long long)tg_tensor_numel(t));
    double v;
    TG_TRY(tg_tensor_get_flat(t, 0, &v));
    TG_CHECK(v >= lo && v <= hi, TG_EINVAL, "optimizer_state_load: '%s'=%g must be in [%g, %g]",
             k, v, lo, hi);
    *out = (float)v;
    return TG_OK;
}

/* Parameter i's state from f into *st (zeroed by the caller), for the
 * hyperparameters h of its group that the load restores.  Absent keys mean
 * "no state yet"; a partial set is an error naming the missing key (a
 * buffer the options ask for: max_exp_avg_sq with amsgrad, RMSprop's
 * momentum_buffer with momentum > 0 and grad_avg when centered; ignored
 * otherwise). */
static int load_param(const tg_optimizer *opt, const tg__opt_hparams *h, const tg_st_file *f,
                      const char *prefix, int i, tg__opt_state *st)
{
    char k[KEY_MAX];
    const bool sgd = opt->kind == TG__OPT_SGD;
    bool any = false;
    for (int j = -1; j < tg__opt_n_buf_names(opt->kind); j++) {   /* every name of the kind */
        TG_TRY(key(k, prefix, i, j < 0 ? "step" : tg__opt_buf_name(opt->kind, j)));
        if (tg_st_get(f, k)) any = true;
    }
    if (!any) return TG_OK;
    TG_CHECK(tg__opt_has_buf(opt->kind, h, 0), TG_EINVAL,
             "optimizer_state_load: state for parameter %d given but its SGD group has "
             "momentum 0 (no buffers)", i);
    if (!sgd) {
        double v;
        TG_TRY(key(k, prefix, i, "step"));
        TG_TRY(get_count(f, k, true, &v));
        st->step = (int64_t)v;
    }
    if (opt->kind == TG__OPT_NADAM)
        TG_TRY(get_f32(f, prefix, i, "mu_product", 0, 1, &st->mu_product));
    if (opt->kind == TG__OPT_ASGD) {
        TG_TRY(get_f32(f, prefix, i, "eta", -INFINITY, INFINITY, &st->eta));
        TG_TRY(get_f32(f, prefix, i, "mu", 0, 1, &st->mu));
    }
    for (int j = 0; j < TG__OPT_MAX_BUFS; j++) {
        if (!tg__opt_has_buf(opt->kind, h, j)) continue;
        TG_TRY(key(k, prefix, i, tg__opt_buf_name(opt->kind, j)));
        TG_TRY(get_buf(f, k, opt->params[i], &st->buf[j]));
    }
    return TG_OK;
}

static void free_states(tg__opt_state *st, int n)
{
    for (int i = 0; st && i < n; i++)
        for (int j = 0; j < TG__OPT_MAX_BUFS; j++) tg_tensor_release(st[i].buf[j]);
    free(st);
}

/* Every parameter's state from f into fresh (n entries, zeroed). */
static int load_params(const tg_optimizer *opt, const opt_header *v, const tg_st_file *f,
                       const char *prefix, tg__opt_state *fresh)
{
    for (int g = 0; g < opt->n_groups; g++)
        for (int i = opt->groups[g].begin; i < opt->groups[g].end; i++)
            TG_TRY(load_param(opt, &v->h[g], f, prefix, i, &fresh[i]));
    return TG_OK;
}

int tg__optimizer_state_check(const tg_optimizer *opt, const tg_st_file *f, const char *prefix)
{
    opt_header v;
    int rc = check_header(opt, f, prefix, &v);
    tg__opt_state *fresh = rc < 0 ? NULL : tg__calloc((size_t)opt->n, sizeof *fresh);
    if (rc >= 0) rc = fresh ? load_params(opt, &v, f, prefix, fresh) : TG_ENOMEM;
    struct tg__lbfgs *lb = NULL;
    if (rc >= 0 && opt->kind == TG__OPT_LBFGS)
        rc = tg__lbfgs_state_read(opt, f, prefix, (int)v.h[0].history_size, &lb);
    tg__lbfgs_free(lb);
    free_states(fresh, opt->n);
    header_free(&v);
    return rc;
}

int tg_optimizer_state_load(tg_optimizer *opt, const tg_st_file *f, const char *prefix)
{
    TG_CHECK(opt != NULL && f != NULL && prefix != NULL, TG_EINVAL,
             "optimizer_state_load: opt, f and prefix must not be NULL");
    opt_header v;
    int rc = check_header(opt, f, prefix, &v);
    tg__opt_state *fresh = rc < 0 ? NULL : tg__calloc((size_t)opt->n, sizeof *fresh);
    if (rc >= 0) rc = fresh ? load_params(opt, &v, f, prefix, fresh) : TG_ENOMEM;
    struct tg__lbfgs *lb = NULL;
    if (rc >= 0 && opt->kind == TG__OPT_LBFGS)
        rc = tg__lbfgs_state_read(opt, f, prefix, (int)v.h[0].history_size, &lb);
    if (rc < 0) {
        free_states(fresh, opt->n);
        header_free(&v);
        return rc;
    }
    free_states(opt->state, opt->n);
    opt->state = fresh;
    if (opt->kind == TG__OPT_LBFGS) {   /* none in the file: none after, as torch's */
        tg__lbfgs_free(opt->lbfgs);
        opt->lbfgs = lb;
    }
    opt->steps = (int64_t)v.steps;
    for (int g = 0; g < opt->n_groups; g++) {
        opt->groups[g].h = v.h[g];
        opt->groups[g].initial_lr = v.initial_lr[g];
    }
    header_free(&v);
    return TG_OK;
}
