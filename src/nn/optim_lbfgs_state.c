/* src/nn/optim_lbfgs_state.c - saving L-BFGS's state (torch's state of the
 * first parameter: func_evals, n_iter, d, t, the history, H_diag,
 * prev_flat_grad, prev_loss) and reading it back checked. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim_internal.h"

#define KEY_MAX 256

static int lkey(char *buf, const char *prefix, const char *name)
{
    int len = snprintf(buf, KEY_MAX, "%s.0.%s", prefix, name);
    TG_CHECK(len > 0 && len < KEY_MAX, TG_EINVAL,
             "optimizer_state: prefix '%.32s...' too long (keys are at most %d chars)", prefix,
             KEY_MAX - 1);
    return TG_OK;
}

/* A new f64 tensor of shape (rows, cols) (rows < 0: (cols); cols < 0: 0-d)
 * holding v, stored under prefix.0.name. */
static int put(tg_st_file *f, const char *prefix, const char *name, tg_dtype dt, int64_t rows,
               int64_t cols, const double *v)
{
    char k[KEY_MAX];
    TG_TRY(lkey(k, prefix, name));
    const int64_t shape[2] = {rows < 0 ? cols : rows, cols};
    const int ndim = cols < 0 ? 0 : rows < 0 ? 1 : 2;
    tg_tensor *t;
    TG_TRY(tg_tensor_zeros(&t, dt, ndim, shape));
    const int64_t m = tg_tensor_numel(t);
    if (dt == TG_F64 && m > 0) memcpy(tg_tensor_data(t), v, (size_t)m * sizeof *v);
    else if (m > 0) (void)tg_tensor_set_flat(t, 0, v[0]);
    int rc = tg_st_set(f, k, t);
    tg_tensor_release(t);
    return rc;
}

int tg__lbfgs_state_save(const tg_optimizer *o, tg_st_file *f, const char *prefix)
{
    const struct tg__lbfgs *st = o->lbfgs;
    if (!st) return TG_OK;
    const double fe = (double)st->func_evals, it = (double)st->n_iter;
    TG_TRY(put(f, prefix, "func_evals", TG_I64, -1, -1, &fe));
    TG_TRY(put(f, prefix, "n_iter", TG_I64, -1, -1, &it));
    if (st->n_iter < 1) return TG_OK;
    const int64_t n = st->n;
    TG_TRY(put(f, prefix, "d", TG_F64, -1, n, st->d));
    TG_TRY(put(f, prefix, "prev_flat_grad", TG_F64, -1, n, st->prev));
    TG_TRY(put(f, prefix, "t", TG_F64, -1, -1, &st->t));
    TG_TRY(put(f, prefix, "H_diag", TG_F64, -1, -1, &st->h_diag));
    TG_TRY(put(f, prefix, "prev_loss", TG_F64, -1, -1, &st->prev_loss));
    TG_TRY(put(f, prefix, "ro", TG_F64, -1, st->k, st->ro));
    double *rows = tg__malloc((size_t)(st->k * n + 1) * sizeof *rows);
    if (!rows) return TG_ENOMEM;
    for (int i = 0; i < st->k; i++) memcpy(rows + i * n, st->dirs[i], (size_t)n * sizeof *rows);
    int rc = put(f, prefix, "old_dirs", TG_F64, st->k, n, rows);
    for (int i = 0; i < st->k; i++) memcpy(rows + i * n, st->stps[i], (size_t)n * sizeof *rows);
    if (rc >= 0) rc = put(f, prefix, "old_stps", TG_F64, st->k, n, rows);
    free(rows);
    return rc;
}

/* The tensor under prefix.0.name, which must have numel values (rows >= 0:
 * shape (rows, numel / rows)); into v as doubles. */
static int get(const tg_st_file *f, const char *prefix, const char *name, int64_t numel,
               double *v, const tg_tensor **out)
{
    char k[KEY_MAX];
    TG_TRY(lkey(k, prefix, name));
    const tg_tensor *t = tg_st_get(f, k);
    TG_CHECK(t != NULL, TG_ENOTFOUND, "optimizer_state_load: missing key '%s'", k);
    TG_CHECK(tg_tensor_numel(t) == numel, TG_ESHAPE,
             "optimizer_state_load: '%s' must hold %lld values (the parameters' total size or "
             "one), has %lld", k, (long long)numel, (long long)tg_tensor_numel(t));
    if (out) *out = t;
    return numel > 0 ? tg_tensor_to_doubles(t, v, numel) : TG_OK;
}

static int get_count(const tg_st_file *f, const char *prefix, const char *name, int64_t *v)
{
    double x;
    TG_TRY(get(f, prefix, name, 1, &x, NULL));
    TG_CHECK(x >= 0 && x <= 0x1p53 && x == floor(x), TG_EINVAL,
             "optimizer_state_load: '%s.0.%s'=%g must be a non-negative integer", prefix, name,
             x);
    *v = (int64_t)x;
    return TG_OK;
}

/* The history (old_dirs, old_stps: (k, n); ro: (k)), k <= cap. */
static int read_history(const tg_st_file *f, const char *prefix, int cap, struct tg__lbfgs *st)
{
    char k[KEY_MAX];
    TG_TRY(lkey(k, prefix, "ro"));
    const tg_tensor *ro = tg_st_get(f, k);
    TG_CHECK(ro != NULL, TG_ENOTFOUND, "optimizer_state_load: missing key '%s'", k);
    const int64_t kk = tg_tensor_numel(ro);
    TG_CHECK(kk <= cap, TG_EINVAL,
             "optimizer_state_load: '%s' holds %lld pairs; history_size is %d", k,
             (long long)kk, cap);
    TG_TRY(tg_tensor_to_doubles(ro, st->ro, kk));
    const int64_t n = st->n;
    double *rows = tg__malloc((size_t)(2 * kk * n + 1) * sizeof *rows);
    if (!rows) return TG_ENOMEM;
    int rc = get(f, prefix, "old_dirs", kk * n, rows, NULL);
    if (rc >= 0) rc = get(f, prefix, "old_stps", kk * n, rows + kk * n, NULL);
    for (int64_t i = 0; rc >= 0 && i < kk; i++) {
        st->dirs[i] = tg__malloc((size_t)n * sizeof **st->dirs);
        st->stps[i] = tg__malloc((size_t)n * sizeof **st->stps);
        st->k = (int)i + 1;
        if (!st->dirs[i] || !st->stps[i]) rc = TG_ENOMEM;
        else memcpy(st->dirs[i], rows + i * n, (size_t)n * sizeof *rows),
             memcpy(st->stps[i], rows + (kk + i) * n, (size_t)n * sizeof *rows);
    }
    free(rows);
    return rc;
}

int tg__lbfgs_state_read(const tg_optimizer *o, const tg_st_file *f, const char *prefix,
                         int history_size, struct tg__lbfgs **out)
{
    char k[KEY_MAX];
    *out = NULL;
    TG_TRY(lkey(k, prefix, "func_evals"));
    if (!tg_st_get(f, k)) return TG_OK;
    struct tg__lbfgs *st = tg__lbfgs_state_new(tg__lbfgs_size(o), history_size);
    if (!st) return TG_ENOMEM;
    int rc = get_count(f, prefix, "func_evals", &st->func_evals);
    if (rc >= 0) rc = get_count(f, prefix, "n_iter", &st->n_iter);
    if (rc >= 0 && st->n_iter >= 1) {
        rc = get(f, prefix, "d", st->n, st->d, NULL);
        if (rc >= 0) rc = get(f, prefix, "prev_flat_grad", st->n, st->prev, NULL);
        if (rc >= 0) rc = get(f, prefix, "t", 1, &st->t, NULL);
        if (rc >= 0) rc = get(f, prefix, "H_diag", 1, &st->h_diag, NULL);
        if (rc >= 0) rc = get(f, prefix, "prev_loss", 1, &st->prev_loss, NULL);
        if (rc >= 0) rc = read_history(f, prefix, history_size, st);
    }
    if (rc < 0) tg__lbfgs_free(st);
    else *out = st;
    return rc;
}
