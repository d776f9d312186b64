/* src/nn/optim_state.c - saving an optimizer's state into a tg_st_file and
 * restoring it exactly: the step count, the hyperparameters (torch's
 * param_group entries) and each parameter's buffers.  Load reads and checks
 * every entry and builds the new state aside before swapping it in, so a bad
 * file leaves the optimizer unchanged. */
#include <math.h>
#include <stddef.h>
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

/* The hyperparameters saved besides lr, under torch's param_group keys:
 * "betas" is a 1-d f64 tensor of two, the flags 0-d i64 tensors (0 or 1),
 * the rest 0-d f64 tensors.  A file without one (written before they were
 * saved) leaves the optimizer's value as it is. */
typedef enum { HP_REAL, HP_FLAG, HP_PAIR } hp_form;
typedef struct hp_entry {
    const char *key;
    bool sgd, adam;           /* the kinds that have it */
    hp_form form;
    size_t off, off2;         /* of the double or bool in tg__opt_hparams (off2: beta2) */
} hp_entry;

#define HP(field) offsetof(tg__opt_hparams, field)
static const hp_entry hps[] = {
    {"momentum", true, false, HP_REAL, HP(momentum), 0},
    {"dampening", true, false, HP_REAL, HP(dampening), 0},
    {"nesterov", true, false, HP_FLAG, HP(nesterov), 0},
    {"betas", false, true, HP_PAIR, HP(beta1), HP(beta2)},
    {"eps", false, true, HP_REAL, HP(eps), 0},
    {"amsgrad", false, true, HP_FLAG, HP(amsgrad), 0},
    {"weight_decay", true, true, HP_REAL, HP(weight_decay), 0},
    {"maximize", true, true, HP_FLAG, HP(maximize), 0},
};
#undef HP

static bool hp_of(const hp_entry *e, tg__opt_kind k) { return k == TG__OPT_SGD ? e->sgd : e->adam; }

static double *hp_real(tg__opt_hparams *h, size_t off) { return (double *)((char *)h + off); }
static bool *hp_flag(tg__opt_hparams *h, size_t off) { return (bool *)((char *)h + off); }

static int put_hparam(tg_st_file *f, const char *k, const hp_entry *e, const tg__opt_hparams *h)
{
    tg__opt_hparams c = *h;
    if (e->form == HP_REAL) return tg__st_put_scalar(f, k, TG_F64, *hp_real(&c, e->off));
    if (e->form == HP_FLAG) return tg__st_put_scalar(f, k, TG_I64, *hp_flag(&c, e->off));
    tg_tensor *t;
    double v[2] = {*hp_real(&c, e->off), *hp_real(&c, e->off2)};
    TG_TRY(tg_tensor_from_data(&t, TG_F64, 1, (int64_t[]){2}, v));
    int rc = tg_st_set(f, k, t);
    tg_tensor_release(t);
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
    TG_TRY(tg__st_put_scalar(f, k, TG_F64, opt->h.lr));
    for (size_t e = 0; e < sizeof hps / sizeof *hps; e++) {
        if (!hp_of(&hps[e], opt->kind)) continue;
        TG_TRY(key(k, prefix, -1, hps[e].key));
        TG_TRY(put_hparam(f, k, &hps[e], &opt->h));
    }
    if (!isnan(opt->initial_lr)) {
        TG_TRY(key(k, prefix, -1, "initial_lr"));
        TG_TRY(tg__st_put_scalar(f, k, TG_F64, opt->initial_lr));
    }
    int nb = tg__opt_n_bufs(opt->kind, &opt->h);
    for (int i = 0; i < opt->n; i++) {
        const tg__opt_state *st = &opt->state[i];
        if (nb == 0 || !st->buf[0]) continue;
        if (opt->kind != TG__OPT_SGD) {
            TG_TRY(key(k, prefix, i, "step"));
            TG_TRY(tg__st_put_scalar(f, k, TG_I64, (double)st->step));
        }
        for (int j = 0; j < nb; j++) {
            TG_TRY(key(k, prefix, i, tg__opt_buf_name(opt->kind, j)));
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

/* What a file holds besides the parameters' buffers, read and checked. */
typedef struct opt_header {
    double steps;
    tg__opt_hparams h;   /* the optimizer's, with the file's values over them */
    double initial_lr;
} opt_header;

/* The hyperparameters in f over *h: each present one of opt's kind read and
 * its form checked (one value, two for betas; a flag 0 or 1). */
static int read_hparams(const tg_optimizer *opt, const tg_st_file *f, const char *prefix,
                        tg__opt_hparams *h)
{
    char k[KEY_MAX];
    for (size_t e = 0; e < sizeof hps / sizeof *hps; e++) {
        const hp_entry *he = &hps[e];
        if (!hp_of(he, opt->kind)) continue;
        TG_TRY(key(k, prefix, -1, he->key));
        const tg_tensor *t = tg_st_get(f, k);
        if (!t) continue;
        const int64_t want = he->form == HP_PAIR ? 2 : 1;
        TG_CHECK(tg_tensor_numel(t) == want, TG_ESHAPE,
                 "optimizer_state_load: '%s' must hold %lld value%s, has %lld", k,
                 (long long)want, want > 1 ? "s" : "", (long long)tg_tensor_numel(t));
        double v[2] = {0, 0};
        for (int64_t j = 0; j < want; j++) TG_TRY(tg_tensor_get_flat(t, j, &v[j]));
        if (he->form == HP_FLAG) {
            TG_CHECK(v[0] == 0 || v[0] == 1, TG_EINVAL,
                     "optimizer_state_load: '%s'=%g must be 0 or 1", k, v[0]);
            *hp_flag(h, he->off) = v[0] == 1;
        } else {
            *hp_real(h, he->off) = v[0];
            if (he->form == HP_PAIR) *hp_real(h, he->off2) = v[1];
        }
    }
    return TG_OK;
}

static int check_header(const tg_optimizer *opt, const tg_st_file *f, const char *prefix,
                        opt_header *v)
{
    char k[KEY_MAX];
    TG_TRY(key(k, prefix, -1, "kind"));
    const char *kind = tg_st_meta_get(f, k);
    TG_CHECK(kind != NULL, TG_ENOTFOUND, "optimizer_state_load: missing metadata '%s'", k);
    TG_CHECK(strcmp(kind, tg__opt_kind_name(opt->kind)) == 0, TG_EINVAL,
             "optimizer_state_load: '%s' is '%s'; this optimizer is '%s'", k, kind,
             tg__opt_kind_name(opt->kind));
    TG_TRY(key(k, prefix, -1, "step"));
    TG_TRY(get_count(f, k, true, &v->steps));
    v->h = opt->h;
    TG_TRY(key(k, prefix, -1, "lr"));
    TG_TRY(get_count(f, k, false, &v->h.lr));
    TG_TRY(read_hparams(opt, f, prefix, &v->h));
    TG_TRY(tg__opt_check_hparams(opt->kind, &v->h, "optimizer_state_load", prefix));
    v->initial_lr = opt->initial_lr;
    TG_TRY(key(k, prefix, -1, "initial_lr"));
    if (tg_st_get(f, k)) TG_TRY(get_count(f, k, false, &v->initial_lr));
    return tg__st_check_indices(f, prefix, opt->n, "optimizer_state_load", "parameter",
                                "the optimizer has");
}

/* Parameter i's state from f into *st (zeroed by the caller), for the
 * hyperparameters h the load restores.  Absent keys mean "no state yet"; a
 * partial set is an error naming the missing key (max_exp_avg_sq is part
 * of the set with amsgrad, ignored without). */
static int load_param(const tg_optimizer *opt, const tg__opt_hparams *h, const tg_st_file *f,
                      const char *prefix, int i, tg__opt_state *st)
{
    char k[KEY_MAX];
    const int nb = tg__opt_n_bufs(opt->kind, h);
    const bool sgd = opt->kind == TG__OPT_SGD;
    bool any = false;
    for (int j = -1; j < (sgd ? 1 : TG__OPT_MAX_BUFS); j++) {   /* every name of the kind */
        TG_TRY(key(k, prefix, i, j < 0 ? "step" : tg__opt_buf_name(opt->kind, j)));
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

int tg__optimizer_state_check(const tg_optimizer *opt, const tg_st_file *f, const char *prefix)
{
    opt_header v;
    TG_TRY(check_header(opt, f, prefix, &v));
    for (int i = 0; i < opt->n; i++) {   /* each parameter's state read, then dropped */
        tg__opt_state one = {0};
        int rc = load_param(opt, &v.h, f, prefix, i, &one);
        for (int j = 0; j < TG__OPT_MAX_BUFS; j++) tg_tensor_release(one.buf[j]);
        TG_TRY(rc);
    }
    return TG_OK;
}

int tg_optimizer_state_load(tg_optimizer *opt, const tg_st_file *f, const char *prefix)
{
    TG_CHECK(opt != NULL && f != NULL && prefix != NULL, TG_EINVAL,
             "optimizer_state_load: opt, f and prefix must not be NULL");
    opt_header v;
    TG_TRY(check_header(opt, f, prefix, &v));
    tg__opt_state *fresh = tg__calloc((size_t)opt->n, sizeof *fresh);
    if (!fresh) return TG_ENOMEM;
    for (int i = 0; i < opt->n; i++) {
        int rc = load_param(opt, &v.h, f, prefix, i, &fresh[i]);
        if (rc < 0) {
            free_states(fresh, opt->n);
            return rc;
        }
    }
    free_states(opt->state, opt->n);
    opt->state = fresh;
    opt->steps = (int64_t)v.steps;
    opt->h = v.h;
    opt->initial_lr = v.initial_lr;
    return TG_OK;
}
