/* src/ops/fractional_max_pool.c - fractional_max_pool (F.fractional_max_pool2d
 * / 3d, Graham's fractional max-pooling): windows of a fixed kernel size
 * placed at pseudo-random starts, one sample u in [0, 1) per (b, c) plane
 * and axis.  Along an axis of extent I pooled to O with kernel K, window o
 * starts at
 *   start[o] = int((o + u) * alpha) - int(u * alpha),  o < O - 1,
 *   start[O - 1] = I - K,    alpha = (I - K) / (O - 1)
 * computed in x's dtype (float for f32) as torch's CPU kernel, so the
 * windows, and with them the values and indices, are torch's to the bit
 * for the same samples.  The samples are (B, C, N) (unbatched: (1, C, N)):
 * u[..., 0] is the last spatial axis's for N = 2 (W, then H), and the first
 * axis's for N = 3 (T, H, W), as torch's.
 *
 * The op fractional_max_pool_indices finds each window's maximum's flat
 * index in its plane by torch's scan (row-major; a value replaces the best
 * when it is greater or NaN, so ties give the first and the last NaN wins;
 * a window of -infs gives its first element).  The result is then
 *   y = gather(x', -1, idx')      (x', idx': spatial dims flattened)
 * whose gradient is scatter_add of g at the indices, max_pool's, and whose
 * gradients of every order are gather and scatter_add again. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "ops/families.h"
#include "ops/pool_internal.h"
#include "tapegrad/ops.h"
#include "tapegrad/pool.h"

/* The call, copied into the node: n_spatial, kernel and output extents. */
typedef struct frac_call {
    int ns;
    int64_t k[TG_POOL_MAX_SPATIAL], o[TG_POOL_MAX_SPATIAL];
} frac_call;

static const char *frac_name(int n_spatial)
{
    return n_spatial == 2 ? "fractional_max_pool2d"
           : n_spatial == 3 ? "fractional_max_pool3d" : "fractional_max_pool";
}

/* start[0..O) for one axis in float (torch's generate_intervals<float>). */
static void starts_f32(int64_t *start, float u, int64_t in, int64_t out, int64_t k)
{
    if (out > 1) {
        const float alpha = (float)(in - k) / (float)(out - 1);
        for (int64_t i = 0; i < out - 1; i++)
            start[i] = (int64_t)(((float)i + u) * alpha) - (int64_t)(u * alpha);
    }
    start[out - 1] = in - k;
}

static void starts_f64(int64_t *start, double u, int64_t in, int64_t out, int64_t k)
{
    if (out > 1) {
        const double alpha = (double)(in - k) / (double)(out - 1);
        for (int64_t i = 0; i < out - 1; i++)
            start[i] = (int64_t)(((double)i + u) * alpha) - (int64_t)(u * alpha);
    }
    start[out - 1] = in - k;
}

/* The geometry of a call with its N spatial axes placed last of three
 * (the others of extent 1, kernel 1), as pool_internal.h's. */
typedef struct frac_geom {
    int64_t planes, in[3], out[3], k[3];
} frac_geom;

/* idx (planes x out) of x's values xv (planes x in, f64) with starts st
 * (planes x (out[0] + out[1] + out[2])). */
static void frac_scan(const frac_geom *g, const double *xv, const int64_t *st, int64_t *idx)
{
    const int64_t in_plane = g->in[0] * g->in[1] * g->in[2];
    const int64_t nst = g->out[0] + g->out[1] + g->out[2];
    for (int64_t pl = 0; pl < g->planes; pl++) {
        const double *xp = xv + pl * in_plane;
        const int64_t *s0 = st + pl * nst, *s1 = s0 + g->out[0], *s2 = s1 + g->out[1];
        for (int64_t a = 0; a < g->out[0]; a++)
            for (int64_t b = 0; b < g->out[1]; b++)
                for (int64_t c = 0; c < g->out[2]; c++) {
                    int64_t best = (s0[a] * g->in[1] + s1[b]) * g->in[2] + s2[c];
                    double bv = -INFINITY;
                    for (int64_t i = s0[a]; i < s0[a] + g->k[0]; i++)
                        for (int64_t j = s1[b]; j < s1[b] + g->k[1]; j++)
                            for (int64_t l = s2[c]; l < s2[c] + g->k[2]; l++) {
                                const int64_t e = (i * g->in[1] + j) * g->in[2] + l;
                                if (xp[e] > bv || isnan(xp[e])) {
                                    bv = xp[e];
                                    best = e;
                                }
                            }
                    *idx++ = best;
                }
    }
}

static void frac_geom_of(const frac_call *c, const tg_tensor *x, frac_geom *g)
{
    const int lead = x->ndim - c->ns, off = 3 - c->ns;
    g->planes = 1;
    for (int d = 0; d < lead; d++) g->planes *= x->shape[d];
    for (int a = 0; a < 3; a++) {
        const bool sp = a >= off;
        g->in[a] = sp ? x->shape[lead + a - off] : 1;
        g->out[a] = sp ? c->o[a - off] : 1;
        g->k[a] = sp ? c->k[a - off] : 1;
    }
}

/* The starts of every plane and axis from the samples u (planes x ns). */
static void frac_starts(const frac_call *c, const frac_geom *g, tg_dtype dt, const double *u,
                        int64_t *st)
{
    const int off = 3 - c->ns;
    const int64_t nst = g->out[0] + g->out[1] + g->out[2];
    for (int64_t pl = 0; pl < g->planes; pl++) {
        int64_t *s = st + pl * nst;
        for (int a = 0; a < 3; a++) {
            /* sample column: N = 2 lists W before H; N = 3 lists T, H, W */
            const int col = a < off ? -1 : c->ns == 2 ? 2 - a : a - off;
            if (col < 0) s[0] = 0;
            else if (dt == TG_F32)
                starts_f32(s, (float)u[pl * c->ns + col], g->in[a], g->out[a], g->k[a]);
            else starts_f64(s, u[pl * c->ns + col], g->in[a], g->out[a], g->k[a]);
            s += g->out[a];
        }
    }
}

static int frac_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                      int *ndim, int64_t *shape)
{
    (void)n;
    const frac_call *c = params;
    const tg_tensor *x = in[0];
    *dtype = TG_I64;
    *ndim = x->ndim;
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    memcpy(shape + x->ndim - c->ns, c->o, sizeof(int64_t) * (size_t)c->ns);
    return TG_OK;
}

/* The indices (i64, x's shape with the output extents), from x = in[0] and
 * the samples in[1] (checked by tg_fractional_max_pool). */
static int frac_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    (void)ctx, (void)n;
    const frac_call *c = params;
    frac_geom g;
    frac_geom_of(c, in[0], &g);
    tg_dtype dt;
    int nd;
    int64_t os[TG_MAX_DIMS];
    frac_shape(2, in, params, &dt, &nd, os);
    const int64_t nx = tg_tensor_numel(in[0]), nu = tg_tensor_numel(in[1]);
    const int64_t nst = g.planes * (g.out[0] + g.out[1] + g.out[2]);
    double *xv = tg__work_alloc((size_t)(nx + nu > 0 ? nx + nu : 1) * sizeof(double));
    int64_t *st = tg__work_alloc((size_t)(nst > 0 ? nst : 1) * sizeof(int64_t));
    tg_tensor *r = tg__tensor_uninit(TG_I64, nd, os);
    int rc = xv && st && r ? TG_OK : TG_ENOMEM;
    if (rc >= 0) {
        tg__gather(in[0], TG_F64, xv);
        tg__gather(in[1], TG_F64, xv + nx);
        frac_starts(c, &g, in[0]->dtype, xv + nx, st);
        frac_scan(&g, xv, st, (int64_t *)r->storage->data);
        *out = r;
        r = NULL;
    }
    tg_tensor_release(r);
    tg__work_free(xv);
    tg__work_free(st);
    return rc;
}

static const tg_op_schema frac_indices_op = {
    .name = "fractional_max_pool_indices", .arity = 2, .amp = TG_AMP_KEEP,
    .forward = frac_forward, .shape = frac_shape, .vjp = "no gradient: the result is indices"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__fractional_max_pool_ops[] = {&frac_indices_op};
static_assert(sizeof tg__fractional_max_pool_ops / sizeof tg__fractional_max_pool_ops[0] ==
                  TG__fractional_max_pool_N,
              "src/ops/families.h must count the fractional_max_pool ops");

/* Checks the samples: x's dtype, shape (B, C, N) ((1, C, N) unbatched),
 * each in [0, 1). */
static int check_samples(const char *op, const tg_tensor *x, const tg_tensor *u, int ns)
{
    TG_CHECK(u->dtype == x->dtype, TG_EDTYPE, "%s: _random_samples has dtype %s; must be x's, "
             "%s", op, tg_dtype_name(u->dtype), tg_dtype_name(x->dtype));
    const bool batched = x->ndim == ns + 2;
    const int64_t b = batched ? x->shape[0] : 1, ch = x->shape[batched ? 1 : 0];
    TG_CHECK(u->ndim == 3 && u->shape[0] == b && u->shape[1] == ch && u->shape[2] == ns,
             TG_ESHAPE, "%s: _random_samples must be (%lld, %lld, %d): batch (1 unbatched), "
             "channels, spatial dims", op, (long long)b, (long long)ch, ns);
    const int64_t n = tg_tensor_numel(u);
    double *v = tg__work_alloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) return TG_ENOMEM;
    tg__gather(u, TG_F64, v);
    int rc = TG_OK;
    for (int64_t e = 0; e < n && rc >= 0; e++)
        if (!(v[e] >= 0 && v[e] < 1))
            rc = tg__error(TG_EINVAL, "%s: _random_samples[%lld]=%g must be in [0, 1)", op,
                           (long long)e, v[e]);
    tg__work_free(v);
    return rc;
}

/* The checks of tg_fractional_max_pool; *c gets the call, its output
 * extents resolved. */
static int frac_check(const char *op, tg_tensor *x, int ns, const int64_t *kernel,
                      const int64_t *output_size, const double *output_ratio, tg_tensor *u,
                      frac_call *c)
{
    TG_CHECK(x != NULL && kernel != NULL && u != NULL, TG_EINVAL,
             "%s: x, kernel and _random_samples must not be NULL", op);
    TG_CHECK(ns == 2 || ns == 3, TG_EINVAL, "%s: n_spatial=%d must be 2 or 3", op, ns);
    TG_CHECK((output_size != NULL) != (output_ratio != NULL), TG_EINVAL,
             "%s: give exactly one of output_size and output_ratio", op);
    TG_CHECK(x->ndim == ns + 1 || x->ndim == ns + 2, TG_ESHAPE,
             "%s: x has %d dims; expected %d (unbatched) or %d", op, x->ndim, ns + 1, ns + 2);
    TG_CHECK(x->dtype == TG_F32 || x->dtype == TG_F64, TG_EDTYPE,
             "%s: x has dtype %s; f32 or f64 only", op, tg_dtype_name(x->dtype));
    const int lead = x->ndim - ns;
    for (int d = lead == 2 ? 1 : 0; d < x->ndim; d++)
        TG_CHECK(x->shape[d] >= 1, TG_ESHAPE, "%s: x's dim %d is empty; every dim but the "
                 "batch must be >= 1", op, d);
    *c = (frac_call){.ns = ns};
    for (int a = 0; a < ns; a++) {
        const int64_t in = x->shape[lead + a];
        TG_CHECK(kernel[a] >= 1 && kernel[a] <= in, TG_EINVAL,
                 "%s: kernel[%d]=%lld must be in [1, %lld] (x's extent)", op, a,
                 (long long)kernel[a], (long long)in);
        if (output_ratio) {
            const double r = output_ratio[a];
            TG_CHECK(r > 0 && r < 1, TG_EINVAL, "%s: output_ratio[%d]=%g must be in (0, 1)", op,
                     a, r);
            c->o[a] = (int64_t)((double)in * r);   /* Python's int(in * ratio) */
        } else {
            c->o[a] = output_size[a];
        }
        TG_CHECK(c->o[a] >= 1, TG_EINVAL, "%s: output extent %d is %lld; must be >= 1", op, a,
                 (long long)c->o[a]);
        /* torch 1.13: O + K - 1 <= I in 2-d, < I in 3-d */
        TG_CHECK(c->o[a] + kernel[a] - 1 < in + (ns == 2), TG_EINVAL,
                 "%s: kernel[%d]=%lld too large relative to input extent %lld for output "
                 "extent %lld (output + kernel - 1 must be %s input)", op, a,
                 (long long)kernel[a], (long long)in, (long long)c->o[a],
                 ns == 2 ? "<=" : "<");
        c->k[a] = kernel[a];
    }
    return check_samples(op, x, u, ns);
}

/* idx = the indices op; y = gather(x', -1, idx') viewed as idx's shape. */
static int frac_run(tg_tensor **y, tg_tensor **idx, tg_tensor *x, tg_tensor *u,
                    const frac_call *c)
{
    const int lead = x->ndim - c->ns;
    tg_tensor *xf = NULL, *If = NULL, *g = NULL;
    int rc;
    TG_TRY_GOTO(tg_op_call(&frac_indices_op, idx, 2, (tg_tensor *[]){x, u}, c, sizeof *c));
    TG_TRY_GOTO(tg_flatten(&xf, x, lead, x->ndim - 1));
    TG_TRY_GOTO(tg_flatten(&If, *idx, lead, x->ndim - 1));
    TG_TRY_GOTO(tg_gather(&g, xf, -1, If));
    TG_TRY_GOTO(tg_reshape(y, g, (*idx)->ndim, (*idx)->shape));
done:
    tg_tensor_release(xf);
    tg_tensor_release(If);
    tg_tensor_release(g);
    return rc;
}

int tg_fractional_max_pool(tg_tensor **out, tg_tensor **indices, tg_tensor *x, int n_spatial,
                           const int64_t *kernel, const int64_t *output_size,
                           const double *output_ratio, tg_tensor *random_samples)
{
    const char *op = frac_name(n_spatial);
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(out != indices, TG_EINVAL, "%s: out and indices must be two different places", op);
    frac_call c;
    TG_TRY(frac_check(op, x, n_spatial, kernel, output_size, output_ratio, random_samples, &c));
    tg_tensor *y = NULL, *idx = NULL;
    tg__lib_enter();
    int rc = frac_run(&y, &idx, x, random_samples, &c);
    tg__lib_leave();
    if (!indices) {
        tg_tensor_release(idx);
        idx = NULL;
    }
    return tg__scope_capture_pair(out, y, indices, idx, rc);
}
