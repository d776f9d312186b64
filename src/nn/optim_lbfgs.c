/* src/nn/optim_lbfgs.c - L-BFGS, PyTorch 1.13's torch.optim.LBFGS: the
 * parameters as one flat vector, the two-loop recursion over the last
 * history_size pairs (y, s) for the direction, a fixed step or the strong
 * Wolfe line search (bracketing by cubic interpolation, then zooming), and
 * the same stopping tests in the same order.  Vectors are doubles; a
 * parameter is read from and written back to its own dtype.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim_internal.h"
#include "tapegrad/autograd.h"

void tg__lbfgs_free(struct tg__lbfgs *s)
{
    if (!s) return;
    for (int i = 0; i < s->k; i++) {
        free(s->dirs[i]);
        free(s->stps[i]);
    }
    free(s->dirs);
    free(s->stps);
    free(s->ro);
    free(s->d);
    free(s->prev);
    free(s);
}

struct tg__lbfgs *tg__lbfgs_state_new(int64_t n, int cap)
{
    struct tg__lbfgs *s = tg__calloc(1, sizeof *s);
    if (!s) return NULL;
    s->n = n;
    s->cap = cap;
    s->dirs = tg__calloc((size_t)cap, sizeof *s->dirs);
    s->stps = tg__calloc((size_t)cap, sizeof *s->stps);
    s->ro = tg__calloc((size_t)cap, sizeof *s->ro);
    s->d = tg__calloc((size_t)n, sizeof *s->d);
    s->prev = tg__calloc((size_t)n, sizeof *s->prev);
    if (!s->dirs || !s->stps || !s->ro || !s->d || !s->prev) {
        tg__lbfgs_free(s);
        return NULL;
    }
    return s;
}

int64_t tg__lbfgs_size(const tg_optimizer *o)
{
    int64_t n = 0;
    for (int i = 0; i < o->n; i++) n += tg_tensor_numel(o->params[i]);
    return n;
}

/* ---- the flat vector ------------------------------------------------------ */

/* The gradients as one vector (zeros for a parameter without one; a sparse
 * one as its dense sum, torch's to_dense()).  TG_ENOMEM only. */
static int gather_grad(const tg_optimizer *o, double *g)
{
    for (int i = 0; i < o->n; i++) {
        const tg_tensor *p = o->params[i];
        const int64_t m = tg_tensor_numel(p);
        if (p->grad && p->grad->sparse) {
            int64_t *rows, nr;
            double *vals;
            TG_TRY(tg__sparse_coalesced_rows(p->grad, &rows, &vals, &nr));
            const int64_t rn = tg__sparse_row_numel(p->grad);
            memset(g, 0, (size_t)m * sizeof *g);
            for (int64_t q = 0; q < nr; q++)
                memcpy(g + rows[q] * rn, vals + q * rn, (size_t)rn * sizeof *g);
            free(rows);
            free(vals);
        } else if (p->grad) {
            tg__gather(p->grad, TG_F64, g);
        } else {
            memset(g, 0, (size_t)m * sizeof *g);
        }
        g += m;
    }
    return TG_OK;
}

static void params_get(const tg_optimizer *o, double *x)
{
    for (int i = 0; i < o->n; i++) {
        tg__gather(o->params[i], TG_F64, x);
        x += tg_tensor_numel(o->params[i]);
    }
}

static void params_set(tg_optimizer *o, const double *x)
{
    for (int i = 0; i < o->n; i++) {
        tg__scatter(o->params[i], TG_F64, x);
        tg__bump_version(o->params[i]);
        x += tg_tensor_numel(o->params[i]);
    }
}

/* p += t * d (torch's p.add_(d, alpha=t), a fused multiply-add), in buf. */
static void add_grad(tg_optimizer *o, double t, const double *d, double *buf)
{
    params_get(o, buf);
    const int64_t n = tg__lbfgs_size(o);
    for (int64_t i = 0; i < n; i++) buf[i] = fma(d[i], t, buf[i]);
    params_set(o, buf);
}

static double dot(const double *a, const double *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static double abs_max(const double *a, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fabs(a[i]) > m || isnan(a[i]) ? fabs(a[i]) : m;
    return m;
}

/* ---- evaluations ---------------------------------------------------------- */

typedef struct eval_ctx {
    tg_optimizer *o;
    tg_closure_fn closure;
    void *user;
    int64_t n;
    double *buf;   /* n scratch values */
} eval_ctx;

/* The closure with grad mode on: the loss, and the gradient into g. */
static int evaluate(eval_ctx *c, double *loss, double *g)
{
    const bool prev = tg_set_grad_enabled(true);
    int rc = c->closure(c->user, loss);
    tg_set_grad_enabled(prev);
    if (rc < 0) return rc;
    return g ? gather_grad(c->o, g) : TG_OK;
}

/* torch's _directional_evaluate: the loss and gradient at x + t d, the
 * parameters put back to x afterwards. */
static int directional(eval_ctx *c, const double *x, double t, const double *d, double *f,
                       double *g)
{
    add_grad(c->o, t, d, c->buf);
    int rc = evaluate(c, f, g);
    params_set(c->o, x);
    return rc;
}

/* The minimiser of the cubic through (x1, f1, g1), (x2, f2, g2), clamped
 * to [lo, hi] (with bounds; else the points' interval); the interval's
 * middle where the cubic has none. */
static double cubic(double x1, double f1, double g1, double x2, double f2, double g2,
                    const double *bounds)
{
    double lo, hi;
    if (bounds) lo = bounds[0], hi = bounds[1];
    else if (x1 <= x2) lo = x1, hi = x2;
    else lo = x2, hi = x1;
    const double d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
    const double d2sq = d1 * d1 - g1 * g2;
    if (!(d2sq >= 0)) return (lo + hi) / 2.;
    const double d2 = sqrt(d2sq);
    const double pos = x1 <= x2 ? x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
                                : x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2));
    const double m = lo > pos ? lo : pos;   /* Python's max(pos, lo): pos unless lo is larger */
    return hi < m ? hi : m;                 /* min(m, hi) */
}

/* A point of the bracket of the line search. */
typedef struct pt {
    double t, f, gtd;
    double *g;   /* n values */
} pt;

static void pt_copy(pt *to, const pt *from, int64_t n)
{
    to->t = from->t;
    to->f = from->f;
    to->gtd = from->gtd;
    memcpy(to->g, from->g, (size_t)n * sizeof *to->g);
}

/* torch's _strong_wolfe (c1 1e-4, c2 0.9, tolerance 1e-9, 25 evaluations)
 * from x along d, starting at step *t with loss f, gradient g and slope
 * gtd: the chosen step into *t, its loss and gradient into *f and g, the
 * evaluations into *evals.  w: 4 n scratch values. */
static int strong_wolfe(eval_ctx *c, const double *x, double *t, const double *d, double *f,
                        double *g, double gtd, double *w, int64_t *evals)
{
    const double c1 = 1e-4, c2 = 0.9, tol = 1e-9;
    const int max_ls = 25;
    const int64_t n = c->n;
    const double f0 = *f, d_norm = abs_max(d, n);
    pt cur = {.t = *t, .g = w}, prev = {.t = 0, .f = f0, .gtd = gtd, .g = w + n};
    pt br[2] = {{.g = w + 2 * n}, {.g = w + 3 * n}};
    memcpy(prev.g, g, (size_t)n * sizeof *g);
    TG_TRY(directional(c, x, cur.t, d, &cur.f, cur.g));
    *evals = 1;
    cur.gtd = dot(cur.g, d, n);
    bool done = false, two = true;   /* two: the bracket has two points */
    int ls = 0;
    while (ls < max_ls) {
        if (cur.f > f0 + c1 * cur.t * gtd || (ls > 1 && cur.f >= prev.f)) {
            pt_copy(&br[0], &prev, n);
            pt_copy(&br[1], &cur, n);
            break;
        }
        if (fabs(cur.gtd) <= -c2 * gtd) {
            pt_copy(&br[0], &cur, n);
            two = false;
            done = true;
            break;
        }
        if (cur.gtd >= 0) {
            pt_copy(&br[0], &prev, n);
            pt_copy(&br[1], &cur, n);
            break;
        }
        const double bounds[2] = {cur.t + 0.01 * (cur.t - prev.t), cur.t * 10};
        const double next = cubic(prev.t, prev.f, prev.gtd, cur.t, cur.f, cur.gtd, bounds);
        pt_copy(&prev, &cur, n);
        cur.t = next;
        TG_TRY(directional(c, x, cur.t, d, &cur.f, cur.g));
        ++*evals;
        cur.gtd = dot(cur.g, d, n);
        ls++;
    }
    if (ls == max_ls) {   /* the bracket [0, t] */
        br[0] = (pt){.t = 0, .f = f0, .gtd = 0, .g = br[0].g};
        memcpy(br[0].g, g, (size_t)n * sizeof *g);
        pt_copy(&br[1], &cur, n);
        two = true;
    }
    int lo = two && !(br[0].f <= br[1].f) ? 1 : 0, hi = 1 - lo;
    bool insuf = false;
    while (!done && ls < max_ls) {
        if (fabs(br[1].t - br[0].t) * d_norm < tol) break;
        double tt = cubic(br[0].t, br[0].f, br[0].gtd, br[1].t, br[1].f, br[1].gtd, NULL);
        const double bmax = fmax(br[0].t, br[1].t), bmin = fmin(br[0].t, br[1].t);
        const double eps = 0.1 * (bmax - bmin);
        if (fmin(bmax - tt, tt - bmin) < eps) {
            if (insuf || tt >= bmax || tt <= bmin) {
                tt = fabs(tt - bmax) < fabs(tt - bmin) ? bmax - eps : bmin + eps;
                insuf = false;
            } else {
                insuf = true;
            }
        } else {
            insuf = false;
        }
        cur.t = tt;
        TG_TRY(directional(c, x, cur.t, d, &cur.f, cur.g));
        ++*evals;
        cur.gtd = dot(cur.g, d, n);
        ls++;
        if (cur.f > f0 + c1 * cur.t * gtd || cur.f >= br[lo].f) {
            pt_copy(&br[hi], &cur, n);
            lo = br[0].f <= br[1].f ? 0 : 1;
            hi = 1 - lo;
        } else {
            if (fabs(cur.gtd) <= -c2 * gtd) done = true;
            else if (cur.gtd * (br[hi].t - br[lo].t) >= 0) pt_copy(&br[hi], &br[lo], n);
            pt_copy(&br[lo], &cur, n);
        }
    }
    *t = br[lo].t;
    *f = br[lo].f;
    memcpy(g, br[lo].g, (size_t)n * sizeof *g);
    return TG_OK;
}

/* ---- the step ------------------------------------------------------------- */

/* Appends the pair (y, s) with ro = 1 / ys, dropping the oldest when the
 * history is full; y and s (owned buffers) become the history's, and *y,
 * *s are given fresh ones, or the dropped pair's. */
static int push_pair(struct tg__lbfgs *st, int cap, double **y, double **s, double ro)
{
    if (st->k == cap) {
        double *oy = st->dirs[0], *os = st->stps[0];
        memmove(st->dirs, st->dirs + 1, (size_t)(st->k - 1) * sizeof *st->dirs);
        memmove(st->stps, st->stps + 1, (size_t)(st->k - 1) * sizeof *st->stps);
        memmove(st->ro, st->ro + 1, (size_t)(st->k - 1) * sizeof *st->ro);
        st->k--;
        st->dirs[st->k] = *y, st->stps[st->k] = *s, st->ro[st->k] = ro;
        st->k++;
        *y = oy, *s = os;
        return TG_OK;
    }
    double *ny = tg__malloc((size_t)st->n * sizeof *ny), *ns = tg__malloc((size_t)st->n * 8);
    if (!ny || !ns) {
        free(ny);
        free(ns);
        return TG_ENOMEM;
    }
    st->dirs[st->k] = *y, st->stps[st->k] = *s, st->ro[st->k] = ro;
    st->k++;
    *y = ny, *s = ns;
    return TG_OK;
}

/* The direction d from the gradient g and the history (the two-loop
 * recursion); al: history_size scratch values. */
static void direction(const struct tg__lbfgs *st, const double *g, double *d, double *al)
{
    const int64_t n = st->n;
    for (int64_t j = 0; j < n; j++) d[j] = -g[j];   /* q */
    for (int i = st->k - 1; i >= 0; i--) {
        al[i] = dot(st->stps[i], d, n) * st->ro[i];
        for (int64_t j = 0; j < n; j++) d[j] = fma(st->dirs[i][j], -al[i], d[j]);
    }
    for (int64_t j = 0; j < n; j++) d[j] = d[j] * st->h_diag;   /* r */
    for (int i = 0; i < st->k; i++) {
        const double be = dot(st->dirs[i], d, n) * st->ro[i];
        for (int64_t j = 0; j < n; j++) d[j] = fma(st->stps[i][j], al[i] - be, d[j]);
    }
}

/* The iterations of one step, the first evaluation done (loss, g); w:
 * 5 n + history_size scratch values; y, s: n each, owned (swapped with the
 * history's as pairs are added). */
static int iterate(eval_ctx *c, struct tg__lbfgs *st, const tg__opt_hparams *h, double loss,
                   double *g, double *w, double **y_, double **s_)
{
    const int64_t n = st->n;
    const int cap = (int)h->history_size;
    double *x = w, *ls_w = w + n, *al = w + 5 * n;
    int64_t evals = 1;
    int n_iter = 0;
    while (n_iter < (int)h->max_iter) {
        n_iter++;
        st->n_iter++;
        if (st->n_iter == 1) {
            for (int64_t j = 0; j < n; j++) st->d[j] = -g[j];
            for (int i = 0; i < st->k; i++) {
                free(st->dirs[i]);
                free(st->stps[i]);
            }
            st->k = 0;
            st->h_diag = 1;
        } else {
            double *y = *y_, *s = *s_;
            for (int64_t j = 0; j < n; j++) {
                y[j] = g[j] - st->prev[j];
                s[j] = st->d[j] * st->t;
            }
            const double ys = dot(y, s, n);
            if (ys > 1e-10) {
                const double yy = dot(y, y, n);
                TG_TRY(push_pair(st, cap, y_, s_, 1. / ys));
                st->h_diag = ys / yy;
            }
            direction(st, g, st->d, al);
        }
        memcpy(st->prev, g, (size_t)n * sizeof *g);
        st->prev_loss = loss;
        if (st->n_iter == 1) {
            double sum = 0;
            for (int64_t j = 0; j < n; j++) sum += fabs(g[j]);
            const double inv = 1. / sum;
            st->t = (inv < 1. ? inv : 1.) * h->lr;
        } else {
            st->t = h->lr;
        }
        const double gtd = dot(g, st->d, n);
        if (gtd > -h->tolerance_change) break;
        int64_t ls_evals = 0;
        bool opt_cond = false;
        if (h->strong_wolfe) {
            params_get(c->o, x);
            TG_TRY(strong_wolfe(c, x, &st->t, st->d, &loss, g, gtd, ls_w, &ls_evals));
            add_grad(c->o, st->t, st->d, c->buf);
            opt_cond = abs_max(g, n) <= h->tolerance_grad;
        } else {
            add_grad(c->o, st->t, st->d, c->buf);
            if (n_iter != (int)h->max_iter) {
                TG_TRY(evaluate(c, &loss, g));
                opt_cond = abs_max(g, n) <= h->tolerance_grad;
                ls_evals = 1;
            }
        }
        evals += ls_evals;
        st->func_evals += ls_evals;
        if (n_iter == (int)h->max_iter || evals >= (int64_t)h->max_eval || opt_cond) break;
        double step = 0;
        for (int64_t j = 0; j < n; j++) step = fmax(step, fabs(st->d[j] * st->t));
        if (step <= h->tolerance_change || fabs(loss - st->prev_loss) < h->tolerance_change)
            break;
    }
    return TG_OK;
}

/* Room for a history of cap pairs (a loaded history_size may be larger). */
static int reserve(struct tg__lbfgs *st, int cap)
{
    if (cap <= st->cap) return TG_OK;
    double **dirs = realloc(st->dirs, (size_t)cap * sizeof *dirs);
    if (dirs) st->dirs = dirs;
    double **stps = realloc(st->stps, (size_t)cap * sizeof *stps);
    if (stps) st->stps = stps;
    double *ro = realloc(st->ro, (size_t)cap * sizeof *ro);
    if (ro) st->ro = ro;
    if (!dirs || !stps || !ro) return TG_ENOMEM;
    st->cap = cap;
    return TG_OK;
}

int tg__lbfgs_step(tg_optimizer *o, tg_closure_fn closure, void *user, double *loss_out)
{
    const tg__opt_hparams *h = &o->groups[0].h;
    const int64_t n = tg__lbfgs_size(o);
    if (!o->lbfgs && !(o->lbfgs = tg__lbfgs_state_new(n, (int)h->history_size))) return TG_ENOMEM;
    struct tg__lbfgs *st = o->lbfgs;
    TG_TRY(reserve(st, (int)h->history_size));
    /* g, the scratch of add_grad, x, the line search's 4 n, al; y and s */
    double *g = tg__malloc((size_t)(7 * n + (int64_t)h->history_size) * sizeof *g);
    double *y = tg__malloc((size_t)n * sizeof *y), *s = tg__malloc((size_t)n * sizeof *s);
    int rc = g && y && s ? TG_OK : TG_ENOMEM;
    eval_ctx c = {.o = o, .closure = closure, .user = user, .n = n, .buf = g ? g + n : NULL};
    double loss;
    if (rc >= 0) rc = evaluate(&c, &loss, g);
    if (rc >= 0) {
        if (loss_out) *loss_out = loss;
        st->func_evals++;
        if (!(abs_max(g, n) <= h->tolerance_grad))
            rc = iterate(&c, st, h, loss, g, g + 2 * n, &y, &s);
    }
    free(g);
    free(y);
    free(s);
    if (rc >= 0) o->steps++;
    return rc;
}
