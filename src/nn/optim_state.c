/* src/nn/optim_state.c - saving an optimizer's state into a tg_st_file and
 * restoring it exactly.  Load validates every entry and builds the new state
 * aside before swapping it in, so a bad file leaves the optimizer unchanged. */
#include <math.h>
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

int tg_optimizer_state_save(const tg_optimizer *opt, tg_st_file *f, const char *prefix)
{
    TG_CHECK(opt != NULL && f != NULL && prefix != NULL, TG_EINVAL,
             "optimizer_state_save: opt, f and prefix must not be NULL");
    char k[KEY_MAX];
    TG_TRY(key(k, prefix, -1, "kind"));
    TG_TRY(tg_st_meta_set(f, k, tg__opt_kind_name(opt->kind)));
    TG_TRY(key(k, prefix, -1, "step"));
    TG_TRY(tg__st_put_scalar(f, k, TG_I64, (double)opt->steps));
    TG_TRY(key(k, prefix, -1, "lr"));
    TG_TRY(tg__st_put_scalar(f, k, TG_F64, opt->lr));
    int nb = tg__opt_n_bufs(opt);
    for (int i = 0; i < opt->n; i++) {
        const tg__opt_state *st = &opt->state[i];
        if (nb == 0 || !st->buf[0]) continue;
        if (opt->kind != TG__OPT_SGD) {
            TG_TRY(key(k, prefix, i, "step"));
            TG_TRY(tg__st_put_scalar(f, k, TG_I64, (double)st->step));
        }
        for (int j = 0; j < nb; j++) {
            TG_TRY(key(k, prefix, i, tg__opt_buf_name(opt, j)));
            TG_TRY(put_copy(f, k, st->buf[j]));
        }
    }
    return TG_OK;
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

/* Parameter i's state from f into *st (zeroed by the caller).  Absent keys
 * mean "no state yet"; a partial set is an error naming the missing key
 * (max_exp_avg_sq is part of the set with amsgrad, ignored without). */
static int load_param(const tg_optimizer *opt, const tg_st_file *f, const char *prefix, int i,
                      tg__opt_state *st)
{
    char k[KEY_MAX];
    int nb = tg__opt_n_bufs(opt);
    bool sgd = opt->kind == TG__OPT_SGD;
    bool any = false;
    for (int j = -1; j < (sgd ? 1 : TG__OPT_MAX_BUFS); j++) {   /* every name of the kind */
        TG_TRY(key(k, prefix, i, j < 0 ? "step" : tg__opt_buf_name(opt, j)));
        if (tg_st_get(f, k)) any = true;
    }
    if (!any) return TG_OK;
    TG_CHECK(nb > 0, TG_EINVAL,
             "optimizer_state_load: state for parameter %d given but this SGD has momentum 0 "
             "(no buffers)", i);
    if (!sgd) {
        double v;
        TG_TRY(key(k, prefix, i, "step"));
        TG_TRY(get_count(f, k, true, &v));
        st->step = (int64_t)v;
    }
    for (int j = 0; j < nb; j++) {
        TG_TRY(key(k, prefix, i, tg__opt_buf_name(opt, j)));
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

static int check_header(const tg_optimizer *opt, const tg_st_file *f, const char *prefix,
                        double *steps, double *lr)
{
    char k[KEY_MAX];
    TG_TRY(key(k, prefix, -1, "kind"));
    const char *kind = tg_st_meta_get(f, k);
    TG_CHECK(kind != NULL, TG_ENOTFOUND, "optimizer_state_load: missing metadata '%s'", k);
    TG_CHECK(strcmp(kind, tg__opt_kind_name(opt->kind)) == 0, TG_EINVAL,
             "optimizer_state_load: '%s' is '%s'; this optimizer is '%s'", k, kind,
             tg__opt_kind_name(opt->kind));
    TG_TRY(key(k, prefix, -1, "step"));
    TG_TRY(get_count(f, k, true, steps));
    TG_TRY(key(k, prefix, -1, "lr"));
    TG_TRY(get_count(f, k, false, lr));
    return tg__st_check_indices(f, prefix, opt->n, "optimizer_state_load", "parameter",
                                "the optimizer has");
}

int tg__optimizer_state_check(const tg_optimizer *opt, const tg_st_file *f, const char *prefix)
{
    double steps, lr;
    TG_TRY(check_header(opt, f, prefix, &steps, &lr));
    for (int i = 0; i < opt->n; i++) {   /* each parameter's state read, then dropped */
        tg__opt_state one = {0};
        int rc = load_param(opt, f, prefix, i, &one);
        for (int j = 0; j < TG__OPT_MAX_BUFS; j++) tg_tensor_release(one.buf[j]);
        TG_TRY(rc);
    }
    return TG_OK;
}

int tg_optimizer_state_load(tg_optimizer *opt, const tg_st_file *f, const char *prefix)
{
    TG_CHECK(opt != NULL && f != NULL && prefix != NULL, TG_EINVAL,
             "optimizer_state_load: opt, f and prefix must not be NULL");
    double steps, lr;
    TG_TRY(check_header(opt, f, prefix, &steps, &lr));
    tg__opt_state *fresh = tg__calloc((size_t)opt->n, sizeof *fresh);
    if (!fresh) return TG_ENOMEM;
    for (int i = 0; i < opt->n; i++) {
        int rc = load_param(opt, f, prefix, i, &fresh[i]);
        if (rc < 0) {
            free_states(fresh, opt->n);
            return rc;
        }
    }
    free_states(opt->state, opt->n);
    opt->state = fresh;
    opt->steps = (int64_t)steps;
    opt->lr = lr;
    return TG_OK;
}
