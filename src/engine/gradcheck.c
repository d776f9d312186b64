/* Gradient checking: analytic gradients (from the engine) against central
 * differences, and second derivatives through create_graph. */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "tapegrad/ops.h"

typedef struct gc {
    tg_gradcheck_fn fn;
    void *user;
    int n;
    tg_tensor *const *inputs;
    tg_gradcheck_opts o;
    int n_req;
    int *req;              /* indices of the inputs that require grad */
    tg_tensor **req_t;     /* the same inputs */
    int64_t *off;          /* offset of input req[r] in a flattened row; off[n_req] = total */
    tg_dtype out_dtype;    /* fn's output at the unperturbed inputs */
    int out_ndim;
    int64_t out_shape[TG_MAX_DIMS];
} gc;

static void gc_free(gc *g)
{
    free(g->req);
    free(g->req_t);
    free(g->off);
}

static int gc_init(gc *g, const char *what, tg_gradcheck_fn fn, void *user, int n,
                   tg_tensor *const *inputs, const tg_gradcheck_opts *opts)
{
    TG_CHECK(fn != NULL, TG_EINVAL, "%s: fn must not be NULL", what);
    TG_CHECK(n >= 1 && inputs != NULL, TG_EINVAL, "%s: n=%d must be >= 1 with inputs", what, n);
    *g = (gc){.fn = fn, .user = user, .n = n, .inputs = inputs};
    g->o = opts ? *opts : (tg_gradcheck_opts)TG_GRADCHECK_OPTS_INIT;
    TG_CHECK(g->o.eps > 0 && g->o.atol >= 0 && g->o.rtol >= 0, TG_EINVAL,
             "%s: eps=%g must be > 0 and atol=%g, rtol=%g >= 0", what, g->o.eps, g->o.atol,
             g->o.rtol);
    for (int i = 0; i < n; i++) {
        const tg_tensor *t = inputs[i];
        if (!t || !t->requires_grad) continue;
        char nb[48];
        TG_CHECK(t->dtype == TG_F64, TG_EDTYPE,
                 "%s: input %d%s has dtype %s; inputs that require grad must be f64", what,
                 i, tg__name_note(t, true, nb), tg_dtype_name(t->dtype));
        const int wide = tg__expanded_dim(t);
        TG_CHECK(wide < 0, TG_EINVAL,
                 "%s: input %d%s has a dimension with stride 0 (dim %d); a "
                 "perturbation would move several elements: pass a contiguous copy",
                 what, i, tg__name_note(t, true, nb), wide);
        g->n_req++;
    }
    TG_CHECK(g->n_req > 0, TG_EINVAL, "%s: no input requires grad", what);
    g->req = tg__calloc((size_t)g->n_req, sizeof *g->req);
    g->req_t = tg__calloc((size_t)g->n_req, sizeof *g->req_t);
    g->off = tg__calloc((size_t)g->n_req + 1, sizeof *g->off);
    if (!g->req || !g->req_t || !g->off) {
        gc_free(g);
        return TG_ENOMEM;
    }
    for (int i = 0, r = 0; i < n; i++) {
        if (!inputs[i] || !inputs[i]->requires_grad) continue;
        g->req[r] = i;
        g->req_t[r] = inputs[i];
        g->off[r + 1] = g->off[r] + tg_tensor_numel(inputs[i]);
        r++;
    }
    return TG_OK;
}

/* Runs fn with grad mode on, for the finite differences too (as torch, whose
 * gradcheck calls fn in grad mode): fn may take gradients itself, as a
 * function checked for a higher derivative does.  Checks that it produced a
 * float tensor. */
static int call_fn_on(const gc *g, tg_tensor *const *inputs, tg_tensor **out)
{
    bool prev = tg_set_grad_enabled(true);
    tg_tensor *o = NULL;
    tg__callback_begin();
    int rc = tg__callback_end("gradcheck: fn", g->fn(&o, g->n, inputs, g->user));
    tg_set_grad_enabled(prev);
    TG_TRY(rc);
    if (!o || !tg_dtype_is_float(o->dtype)) {
        tg_tensor_release(o);
        return tg__error(TG_EINVAL, "gradcheck: fn must produce a float tensor");
    }
    *out = o;
    return TG_OK;
}

static int call_fn(const gc *g, tg_tensor **out) { return call_fn_on(g, g->inputs, out); }

/* fn's output with each input that requires grad passed through an
 * identity op (x * 1) first: fn's ops then take inputs made by an op, not
 * leaves, and an op's backward_into (tapegrad/op.h) runs in a backward in
 * place of its backward. */
static int call_fn_staged(const gc *g, tg_tensor **out)
{
    tg_tensor **st = tg__calloc((size_t)g->n, sizeof *st);
    if (!st) return TG_ENOMEM;
    bool prev = tg_set_grad_enabled(true);
    int rc = TG_OK;
    for (int i = 0; i < g->n && rc >= 0; i++)
        if (g->inputs[i] && g->inputs[i]->requires_grad)
            rc = tg_mul_scalar(&st[i], g->inputs[i], 1.0);
    tg_set_grad_enabled(prev);
    tg_tensor **in = tg__calloc((size_t)g->n, sizeof *in);
    if (rc >= 0 && !in) rc = TG_ENOMEM;
    for (int i = 0; rc >= 0 && i < g->n; i++) in[i] = st[i] ? st[i] : g->inputs[i];
    if (rc >= 0) rc = call_fn_on(g, in, out);
    for (int i = 0; i < g->n; i++) tg_tensor_release(st[i]);
    free(in);
    free(st);
    return rc;
}

/* Notes the dtype and shape of fn's output o at the unperturbed inputs. */
static void note_output(gc *g, const tg_tensor *o)
{
    g->out_dtype = o->dtype;
    g->out_ndim = o->ndim;
    memcpy(g->out_shape, o->shape, (size_t)o->ndim * sizeof *o->shape);
}

/* fn(inputs) as m doubles (malloc'd into *vals); as torch,
 * an output whose dtype or shape is not the noted one is refused. */
static int eval(const gc *g, int64_t m, double **vals)
{
    tg_tensor *o = NULL;
    TG_TRY(call_fn(g, &o));
    int rc = TG_OK;
    if (o->dtype != g->out_dtype || o->ndim != g->out_ndim ||
        memcmp(o->shape, g->out_shape, (size_t)o->ndim * sizeof *o->shape) != 0) {
        char was[96], now[96];
        tg_shape_str(was, sizeof was, g->out_ndim, g->out_shape);
        tg_shape_str(now, sizeof now, o->ndim, o->shape);
        rc = tg__error(TG_EINVAL,
                       "gradcheck: fn's output shape changed when an input was perturbed "
                       "by eps=%g: %s %s, then %s %s",
                       g->o.eps, tg_dtype_name(g->out_dtype), was, tg_dtype_name(o->dtype), now);
    }
    double *v = rc >= 0 ? tg__malloc((size_t)(m ? m : 1) * sizeof *v) : NULL;
    if (rc >= 0 && !v) rc = TG_ENOMEM;
    if (rc >= 0) rc = tg_tensor_to_doubles(o, v, m);
    tg_tensor_release(o);
    if (rc < 0) free(v);
    else *vals = v;
    return rc;
}

/* Copies the gradients (NULL counts as zeros) into row[0..total). */
static int grads_to_row(const gc *g, tg_tensor **grads, double *row)
{
    int rc = TG_OK;
    for (int r = 0; r < g->n_req; r++) {
        int64_t len = g->off[r + 1] - g->off[r];
        if (grads[r] && rc >= 0) rc = tg_tensor_to_doubles(grads[r], row + g->off[r], len);
        else if (!grads[r]) memset(row + g->off[r], 0, (size_t)len * sizeof *row);
        tg_tensor_release(grads[r]);
        grads[r] = NULL;
    }
    return rc;
}

/* Zeros of (dt, shape) as a view of every other element of a buffer: the
 * output gradients fed to backward are not contiguous, as in real graphs
 * (a sum's backward hands on an expanded one, a transpose a permuted one),
 * so that a backward that reads g as a flat array fails the check. */
static int strided_zeros(tg_tensor **out, tg_dtype dt, int ndim, const int64_t *shape)
{
    const int64_t numel = tg__numel(ndim, shape);
    if (ndim == 0 || numel < 2) return tg_tensor_zeros(out, dt, ndim, shape);
    tg_tensor *buf = NULL;
    TG_TRY(tg_tensor_zeros(&buf, dt, 1, (int64_t[]){2 * numel}));
    int64_t strides[TG_MAX_DIMS];
    tg__contiguous_strides(ndim, shape, strides);
    for (int d = 0; d < ndim; d++) strides[d] *= 2;
    *out = tg__tensor_view_of(buf->storage, dt, ndim, shape, strides, 1);
    tg_tensor_release(buf);
    return *out ? TG_OK : TG_ENOMEM;
}

/* The analytic Jacobian, one tg_grad per output element with a one-hot
 * grad_output: A is (m, total), row k = d out[k] / d (flattened inputs).
 * The odd rows come through fn run on staged inputs (call_fn_staged), so
 * the numeric check covers the ops' backward_into as well as their
 * backward. */
static int analytic_jacobian(gc *g, int64_t *m_out, double **A_out)
{
    tg_tensor *o = NULL, *os = NULL, *onehot = NULL;
    TG_TRY(call_fn(g, &o));
    note_output(g, o);
    int rs = call_fn_staged(g, &os);
    if (rs >= 0 && (os->dtype != o->dtype || !tg_tensor_same_shape(os, o)))
        rs = tg__error(TG_EINVAL, "gradcheck: fn's output changed between two calls");
    if (rs < 0) {
        tg_tensor_release(os);
        tg_tensor_release(o);
        return rs;
    }
    int64_t m = tg_tensor_numel(o), total = g->off[g->n_req];
    double *A = tg__calloc((size_t)(m * total + 1), sizeof *A);
    tg_tensor **grads = tg__calloc((size_t)g->n_req, sizeof *grads);
    int rc = A && grads ? TG_OK : TG_ENOMEM;
    if (rc >= 0 && o->requires_grad) rc = strided_zeros(&onehot, o->dtype, o->ndim, o->shape);
    tg_backward_opts bo = {.retain_graph = true, .create_graph = false};
    for (int64_t k = 0; rc >= 0 && onehot && k < m; k++) {
        rc = tg_tensor_set_flat(onehot, k, 1.0);
        tg_tensor *src = k % 2 && os->requires_grad ? os : o;
        if (rc >= 0) rc = tg_grad(grads, 1, &src, &onehot, g->n_req, g->req_t, &bo);
        if (rc >= 0) rc = grads_to_row(g, grads, A + k * total);
        if (rc >= 0) rc = tg_tensor_set_flat(onehot, k, 0.0);
    }
    tg_tensor_release(onehot);
    tg_tensor_release(os);
    tg_tensor_release(o);
    free(grads);
    if (rc < 0) {
        free(A);
        return rc;
    }
    *m_out = m;
    *A_out = A;
    return TG_OK;
}

/* Element j (row-major) of the f64 tensor x, as a pointer into its storage.
 * The check writes perturbations through it, not through tg_tensor_set_flat:
 * as torch.autograd.gradcheck, which writes through .data, it leaves the
 * version counter alone, since every value is restored bit for bit and a
 * graph that saved the input before the check must still run backward. */
static double *elem(tg_tensor *x, int64_t j)
{
    return (double *)x->storage->data + tg__flat_pos(x, j);
}

static bool close_enough(const gc *g, double a, double num)
{
    return fabs(a - num) <= g->o.atol + g->o.rtol * fabs(num);
}

/* Column (r, j) of the numeric Jacobian by central differences, compared
 * with the analytic one. */
static int check_column(const gc *g, int r, int64_t j, int64_t m, const double *A)
{
    tg_tensor *x = g->req_t[r];
    double *p = elem(x, j), orig = *p, *fp = NULL, *fm = NULL;
    *p = orig + g->o.eps;
    int rc = eval(g, m, &fp);
    *p = orig - g->o.eps;
    if (rc >= 0) rc = eval(g, m, &fm);
    *p = orig;   /* f64: restored exactly */
    int64_t total = g->off[g->n_req];
    for (int64_t k = 0; rc >= 0 && k < m; k++) {
        double num = (fp[k] - fm[k]) / (2.0 * g->o.eps), a = A[k * total + g->off[r] + j];
        if (close_enough(g, a, num)) continue;
        char nb[48];
        rc = tg__error(TG_EGRADCHECK,
                       "gradcheck: input %d%s element %lld, output element %lld: analytic "
                       "%.10g vs numeric %.10g (atol %g, rtol %g)",
                       g->req[r], tg__name_note(x, true, nb), (long long)j, (long long)k, a, num,
                       g->o.atol, g->o.rtol);
    }
    free(fp);
    free(fm);
    return rc;
}

/* The full check of the inputs req[r0..r1): every column of their Jacobian. */
static int full_check(gc *g, int r0, int r1)
{
    int64_t m = 0;
    double *A = NULL;
    TG_TRY(analytic_jacobian(g, &m, &A));
    int rc = TG_OK;
    for (int r = r0; r < r1 && rc >= 0; r++)
        for (int64_t j = 0; j < g->off[r + 1] - g->off[r] && rc >= 0; j++)
            rc = check_column(g, r, j, m, A);
    free(A);
    return rc;
}

/* ---- fast mode: v^T J_r u_r, input by input -------------------------------
 * As torch's fast mode (_fast_gradcheck): v has one U[0, 1) draw per output
 * element, u_r one per element of input r, scaled to unit norm.  One backward
 * with grad_output v gives v^T J_r for every r; the numeric v^T J_r u_r is a
 * central difference along u_r.  Comparing sums instead of elements, atol
 * grows to atol sum(u_r) sum(v) (torch's _adjusted_atol): the bound on
 * |v^T E u_r| when every element of E is within atol.  Draws of one sign keep
 * an error of one sign from cancelling. */

static double dot(const double *a, const double *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static double sum(const double *a, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i];
    return s;
}

/* u for every input (flattened as a row), unit norm per input. */
static void make_u(const gc *g, tg_rng *rng, double *u)
{
    for (int r = 0; r < g->n_req; r++) {
        int64_t a = g->off[r], len = g->off[r + 1] - a;
        for (int64_t k = 0; k < len; k++) u[a + k] = tg_rng_uniform(rng);
        double norm = sqrt(dot(u + a, u + a, len));
        for (int64_t k = 0; k < len && norm > 0; k++) u[a + k] /= norm;
    }
}

/* Sets input r to x0 + s u_r; s == 0 writes x0 back bit for bit. */
static void perturb(const gc *g, int r, const double *x0, const double *u, double s)
{
    for (int64_t j = 0, k = g->off[r]; k < g->off[r + 1]; j++, k++)
        *elem(g->req_t[r], j) = s == 0 ? x0[k] : x0[k] + s * u[k];
}

/* The analytic row v^T J (all inputs) with one tg_grad (grad_output v),
 * through fn on the inputs themselves or, staged, on the inputs passed by
 * an identity op (call_fn_staged: the ops' backward_into). */
static int fast_analytic(const gc *g, tg_tensor *v, double *row, bool staged)
{
    tg_tensor *o = NULL;
    TG_TRY(staged ? call_fn_staged(g, &o) : call_fn(g, &o));
    tg_tensor **grads = tg__calloc((size_t)g->n_req, sizeof *grads);
    int rc = grads ? TG_OK : TG_ENOMEM;
    if (rc >= 0 && !tg_tensor_same_shape(o, v))
        rc = tg__error(TG_EINVAL, "gradcheck: fn's output shape changed");
    if (rc >= 0 && o->requires_grad) rc = tg_grad(grads, 1, &o, &v, g->n_req, g->req_t, NULL);
    if (rc >= 0) rc = grads_to_row(g, grads, row);
    tg_tensor_release(o);
    free(grads);
    return rc;
}

/* The numeric v^T J_r u_r: <v, f(x + eps u_r) - f(x - eps u_r)> / 2 eps. */
static int fast_numeric(const gc *g, int r, const double *x0, const double *u,
                        const double *vd, int64_t m, double *out)
{
    double *fp = NULL, *fm = NULL;
    perturb(g, r, x0, u, g->o.eps);
    int rc = eval(g, m, &fp);
    perturb(g, r, x0, u, -g->o.eps);
    if (rc >= 0) rc = eval(g, m, &fm);
    perturb(g, r, x0, u, 0.0);
    double s = 0;
    for (int64_t k = 0; rc >= 0 && k < m; k++) s += vd[k] * (fp[k] - fm[k]);
    *out = s / (2.0 * g->o.eps);
    free(fp);
    free(fm);
    return rc;
}

/* A fast-mode mismatch on input r: the report names it, then runs the slow
 * check of that input to name the element (as torch reruns slow mode). */
static int fast_mismatch(gc *g, int r, double a, double num, double atol)
{
    char head[256], nb[48];
    snprintf(head, sizeof head,
             "gradcheck (fast mode, seed %llu): input %d%s: v^T J u analytic %.10g vs "
             "numeric %.10g (atol %g scaled to %g, rtol %g)",
             (unsigned long long)g->o.seed, g->req[r], tg__name_note(g->req_t[r], true, nb), a,
             num, g->o.atol, atol, g->o.rtol);
    int rc = full_check(g, r, r + 1);
    if (rc == TG_EGRADCHECK) {
        char slow[256];   /* tg__error writes the buffer tg_error_message reads */
        snprintf(slow, sizeof slow, "%s", tg_error_message());
        return tg__error(rc, "%s; slow mode: %s", head, slow);
    }
    if (rc < 0) return rc;
    return tg__error(TG_EGRADCHECK,
                     "%s; slow mode finds every element within atol, rtol: the check may pass "
                     "with fast_mode = false",
                     head);
}

static int fast_check(gc *g)
{
    int64_t total = g->off[g->n_req], m = 0;
    tg_tensor *o = NULL, *v = NULL;
    tg_rng rng;
    tg_rng_init(&rng, g->o.seed);
    TG_TRY(call_fn(g, &o));
    note_output(g, o);
    m = tg_tensor_numel(o);
    int rc = strided_zeros(&v, o->dtype, o->ndim, o->shape);
    tg_tensor_release(o);
    TG_TRY(rc);
    double *x0 = tg__malloc((size_t)total * sizeof *x0 + 8);
    double *u = tg__malloc((size_t)total * sizeof *u + 8);
    double *row = tg__calloc((size_t)total + 1, sizeof *row);
    double *rows = tg__calloc((size_t)total + 1, sizeof *rows);
    double *vd = tg__malloc((size_t)m * sizeof *vd + 8);
    rc = x0 && u && row && rows && vd ? TG_OK : TG_ENOMEM;
    if (rc >= 0) make_u(g, &rng, u);
    for (int64_t k = 0; rc >= 0 && k < m; k++) rc = tg_tensor_set_flat(v, k, tg_rng_uniform(&rng));
    if (rc >= 0) rc = tg_tensor_to_doubles(v, vd, m);   /* v as fn's dtype rounded it */
    for (int r = 0; rc >= 0 && r < g->n_req; r++)
        rc = tg_tensor_to_doubles(g->req_t[r], x0 + g->off[r], g->off[r + 1] - g->off[r]);
    if (rc >= 0) rc = fast_analytic(g, v, row, false);
    if (rc >= 0) rc = fast_analytic(g, v, rows, true);
    for (int r = 0; rc >= 0 && r < g->n_req; r++) {
        int64_t a0 = g->off[r], len = g->off[r + 1] - a0;
        double num = 0, a = dot(row + a0, u + a0, len), as = dot(rows + a0, u + a0, len);
        double atol = g->o.atol * sum(u + a0, len) * sum(vd, m);
        rc = fast_numeric(g, r, x0, u, vd, m, &num);
        if (rc >= 0 && !(fabs(a - num) <= atol + g->o.rtol * fabs(num)))
            rc = fast_mismatch(g, r, a, num, atol);
        if (rc >= 0 && !(fabs(as - num) <= atol + g->o.rtol * fabs(num)))
            rc = fast_mismatch(g, r, as, num, atol);
    }
    tg_tensor_release(v);
    free(x0);
    free(u);
    free(row);
    free(rows);
    free(vd);
    return rc;
}

static int gradcheck(tg_gradcheck_fn fn, void *user, int n, tg_tensor *const *inputs,
                     const tg_gradcheck_opts *opts)
{
    gc g;
    TG_TRY(gc_init(&g, "gradcheck", fn, user, n, inputs, opts));
    int rc = g.o.fast_mode ? fast_check(&g) : full_check(&g, 0, g.n_req);
    gc_free(&g);
    return rc;
}

/* ---- gradgradcheck ----------------------------------------------------------
 * As torch.autograd.gradgradcheck: gradcheck of the map
 * (inputs, v) -> d<fn(inputs), v>/d(inputs requiring grad), computed with
 * create_graph, where the grad_output v is random (U[-1, 1], from the seed)
 * and an input of the map itself (when fn's output is f64), so that a
 * backward that takes its grad_output off the tape is caught too. */

typedef struct gg {
    gc g;            /* fn, user and the inputs that require grad */
    tg_tensor *v;    /* the grad_output at which G is checked */
} gg;

/* One flattened piece of G: grad (or zeros of n elements when NULL). */
static int flat_piece(tg_tensor **out, tg_tensor *grad, int64_t n)
{
    int64_t shape[1] = {n};
    if (!grad) return tg_tensor_zeros(out, TG_F64, 1, shape);
    return tg_reshape(out, grad, 1, shape);
}

/* G(inputs, v) = cat of the flattened d<fn(inputs), v>/d(inputs requiring
 * grad), computed with create_graph so that G is itself differentiable;
 * in[n - 1] is v, fn's inputs are in[0 .. n - 1). */
static int grad_fn_of(tg_tensor **out, int n, tg_tensor *const *inputs, void *user)
{
    gg *s = user;
    const gc *g = &s->g;
    bool prev = tg_set_grad_enabled(true);
    tg_tensor *o = NULL, *v = inputs[n - 1];
    tg_tensor *grads[TG_NODE_MAX_INPUTS] = {0}, *pieces[TG_NODE_MAX_INPUTS] = {0};
    tg_backward_opts bo = {.retain_graph = true, .create_graph = true};
    tg__callback_begin();
    int rc = tg__callback_end("gradgradcheck: fn", g->fn(&o, n - 1, inputs, g->user));
    if (rc >= 0 && !tg_tensor_same_shape(o, v))
        rc = tg__error(TG_EINVAL, "gradgradcheck: fn's output shape changed");
    if (rc >= 0 && o->requires_grad) rc = tg_grad(grads, 1, &o, &v, g->n_req, g->req_t, &bo);
    for (int r = 0; rc >= 0 && r < g->n_req; r++)
        rc = flat_piece(&pieces[r], grads[r], g->off[r + 1] - g->off[r]);
    if (rc >= 0) rc = tg_cat(out, g->n_req, pieces, 0);
    for (int r = 0; r < g->n_req; r++) {
        tg_tensor_release(grads[r]);
        tg_tensor_release(pieces[r]);
    }
    tg_tensor_release(o);
    tg_set_grad_enabled(prev);
    return rc;
}

static int gradgradcheck(tg_gradcheck_fn fn, void *user, int n, tg_tensor *const *inputs,
                         const tg_gradcheck_opts *opts)
{
    gg s = {.v = NULL};
    TG_TRY(gc_init(&s.g, "gradgradcheck", fn, user, n, inputs, opts));
    tg_tensor *o = NULL, **ext = tg__calloc((size_t)n + 1, sizeof *ext);
    tg_rng rng;
    tg_rng_init(&rng, s.g.o.seed ^ 0x9e3779b97f4a7c15ULL);
    int rc = ext ? TG_OK : TG_ENOMEM;
    if (rc >= 0 && s.g.n_req > TG_NODE_MAX_INPUTS)
        rc = tg__error(TG_EINVAL, "gradgradcheck: at most %d inputs may require grad",
                       TG_NODE_MAX_INPUTS);
    if (rc >= 0) rc = call_fn(&s.g, &o);
    if (rc >= 0) rc = tg_tensor_zeros(&s.v, o->dtype, o->ndim, o->shape);
    if (rc >= 0) rc = tg_tensor_rand_uniform(s.v, &rng, -1.0, 1.0);
    /* An f32 or half v stays a constant: gradcheck wants f64 inputs. */
    if (rc >= 0 && s.v->dtype == TG_F64) rc = tg_tensor_set_requires_grad(s.v, true);
    if (rc >= 0) {
        tg_tensor_set_name(s.v, "grad_output");
        memcpy(ext, inputs, (size_t)n * sizeof *ext);
        ext[n] = s.v;
        rc = gradcheck(grad_fn_of, &s, n + 1, ext, opts);
    }
    free(ext);
    tg_tensor_release(o);
    tg_tensor_release(s.v);
    gc_free(&s.g);
    return rc;
}

/* The function under test runs on the library's behalf (its tensors are never
 * captured by the caller's scope). */
int tg_gradcheck(tg_gradcheck_fn fn, void *user, int n, tg_tensor *const *inputs,
                 const tg_gradcheck_opts *opts)
{
    tg__lib_enter();
    int rc = gradcheck(fn, user, n, inputs, opts);
    tg__lib_leave();
    return rc;
}

int tg_gradgradcheck(tg_gradcheck_fn fn, void *user, int n, tg_tensor *const *inputs,
                     const tg_gradcheck_opts *opts)
{
    tg__lib_enter();
    int rc = gradgradcheck(fn, user, n, inputs, opts);
    tg__lib_leave();
    return rc;
}
