/* src/ops/pool_params.c - the rules of pooling and upsampling parameters
 * and inputs, and the output shape, shared by avg_pool.c, max_pool.c,
 * adaptive_pool.c, adaptive_max_pool.c, upsample.c, interpolate.c and the
 * pooling modules.
 *
 * Pooling output extent, as PyTorch's pooling_output_shape:
 *   O = floor((I + 2p - d(k-1) - 1 + (ceil_mode ? s-1 : 0)) / s) + 1,
 * and with ceil_mode one less when window O-1 would start at or past the
 * right padding ((O-1)s >= I + p), so that every window starts inside x or
 * its left padding.  padding <= kernel/2 keeps every window's first element
 * before I, so none lies wholly in the padding. */
#include <string.h>

#include "ops/pool_internal.h"

const char *tg__pool_opname(tg__pool_kind kind, int n_spatial)
{
    static const char *names[7][4] = {
        {"avg_pool", "avg_pool1d", "avg_pool2d", "avg_pool3d"},
        {"max_pool", "max_pool1d", "max_pool2d", "max_pool3d"},
        {"upsample_nearest", "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d"},
        {"upsample_linear", "upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d"},
        {"upsample_bicubic", "upsample_bicubic", "upsample_bicubic2d", "upsample_bicubic"},
        {"adaptive_avg_pool", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
         "adaptive_avg_pool3d"},
        {"adaptive_max_pool", "adaptive_max_pool1d", "adaptive_max_pool2d",
         "adaptive_max_pool3d"}};
    return names[kind][n_spatial >= 1 && n_spatial <= 3 ? n_spatial : 0];
}

void tg_pool_params_set(tg_pool_params *p, int64_t kernel, int64_t stride, int64_t padding)
{
    if (!p) return;
    for (int a = 0; a < TG_POOL_MAX_SPATIAL; a++) {
        p->kernel[a] = kernel;
        p->stride[a] = stride;
        p->padding[a] = padding;
    }
}

static int check_n_spatial(const char *op, int n_spatial)
{
    TG_CHECK(n_spatial >= 1 && n_spatial <= TG_POOL_MAX_SPATIAL, TG_EINVAL,
             "%s: n_spatial=%d must be 1, 2 or 3", op, n_spatial);
    return TG_OK;
}

/* The rules of axis a: each value within [lo, TG_POOL_MAX_PARAM], padding
 * at most half the kernel (PyTorch's rule, which reads the kernel, not its
 * dilated extent), and no dilation for avg_pool. */
static int check_axis(const char *op, tg__pool_kind kind, const tg_pool_params *p, int a)
{
    const long long k = p->kernel[a], s = p->stride[a], pad = p->padding[a], d = p->dilation[a];
    TG_CHECK(k >= 1, TG_EINVAL, "%s: kernel[%d]=%lld must be >= 1", op, a, k);
    TG_CHECK(s >= 0, TG_EINVAL, "%s: stride[%d]=%lld must be >= 1 (or 0: the kernel)", op, a, s);
    TG_CHECK(pad >= 0, TG_EINVAL, "%s: padding[%d]=%lld must be >= 0", op, a, pad);
    TG_CHECK(d >= 1, TG_EINVAL, "%s: dilation[%d]=%lld must be >= 1", op, a, d);
    TG_CHECK(k <= TG_POOL_MAX_PARAM && s <= TG_POOL_MAX_PARAM && pad <= TG_POOL_MAX_PARAM &&
                 d <= TG_POOL_MAX_PARAM,
             TG_EINVAL, "%s: axis %d: kernel=%lld, stride=%lld, padding=%lld, dilation=%lld "
             "must each be <= %lld", op, a, k, s, pad, d, (long long)TG_POOL_MAX_PARAM);
    TG_CHECK(pad <= k / 2, TG_EINVAL, "%s: padding[%d]=%lld must be <= kernel[%d]/2 = %lld",
             op, a, pad, a, k / 2);
    TG_CHECK(kind != TG__AVG_POOL || d == 1, TG_EINVAL,
             "%s: dilation[%d]=%lld: average pooling has no dilation, it must be 1", op, a, d);
    return TG_OK;
}

int tg__pool_check_params(const char *op, tg__pool_kind kind, int n_spatial,
                          const tg_pool_params *p, tg_pool_params *r)
{
    TG_TRY(check_n_spatial(op, n_spatial));
    TG_CHECK(p != NULL, TG_EINVAL, "%s: p must not be NULL", op);
    for (int a = 0; a < n_spatial; a++) TG_TRY(check_axis(op, kind, p, a));
    if (!r) return TG_OK;
    *r = *p;
    for (int a = 0; a < n_spatial; a++)
        if (r->stride[a] == 0) r->stride[a] = r->kernel[a];
    return TG_OK;
}

int tg__upsample_check_scale(const char *op, int n_spatial, const int64_t *scale)
{
    TG_TRY(check_n_spatial(op, n_spatial));
    TG_CHECK(scale != NULL, TG_EINVAL, "%s: scale must not be NULL", op);
    for (int a = 0; a < n_spatial; a++)
        TG_CHECK(scale[a] >= 1 && scale[a] <= TG_POOL_MAX_PARAM, TG_EINVAL,
                 "%s: scale[%d]=%lld must be an integer in [1, %lld]", op, a,
                 (long long)scale[a], (long long)TG_POOL_MAX_PARAM);
    return TG_OK;
}

int tg__upsample_check_size(const char *op, int n_spatial, const int64_t *size)
{
    TG_TRY(check_n_spatial(op, n_spatial));
    TG_CHECK(size != NULL, TG_EINVAL, "%s: size must not be NULL", op);
    for (int a = 0; a < n_spatial; a++)
        TG_CHECK(size[a] >= 1 && size[a] <= TG_POOL_MAX_PARAM, TG_EINVAL,
                 "%s: size[%d]=%lld must be in [1, %lld]", op, a, (long long)size[a],
                 (long long)TG_POOL_MAX_PARAM);
    return TG_OK;
}

int tg__pool_check_rank(const char *op, int n_spatial, int ndim)
{
    TG_CHECK(ndim == n_spatial + 1 || ndim == n_spatial + 2, TG_ESHAPE,
             "%s: x has %d dims; it must have %d (C, S...) or %d (B, C, S...)", op, ndim,
             n_spatial + 1, n_spatial + 2);
    return TG_OK;
}

static int check_input(const char *op, int n_spatial, int ndim, const int64_t *shape)
{
    TG_TRY(tg__pool_check_rank(op, n_spatial, ndim));
    for (int d = ndim == n_spatial + 2 ? 1 : 0; d < ndim; d++)
        TG_CHECK(shape[d] >= 1, TG_ESHAPE,
                 "%s: x's dim %d has extent 0; every dim but the batch must be >= 1", op, d);
    return TG_OK;
}

/* floor(a / b) for b > 0. */
static int64_t floor_div(int64_t a, int64_t b)
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

int64_t tg__pool_extent(const tg_pool_params *p, int a, int64_t in)
{
    const int64_t k = p->kernel[a], s = p->stride[a], pad = p->padding[a], d = p->dilation[a];
    int64_t o = floor_div(in + 2 * pad - d * (k - 1) - 1 + (p->ceil_mode ? s - 1 : 0), s) + 1;
    if (p->ceil_mode && o >= 1 && (o - 1) * s >= in + pad) o--;
    return o;
}

/* Axis a of extent `in` gives output extent `o`, which must be >= 1. */
static int check_extent(const char *op, const tg_pool_params *p, int a, int64_t in, int64_t o)
{
    TG_CHECK(o >= 1, TG_EINVAL,
             "%s: spatial dim %d of extent %lld gives an output extent of %lld (kernel %lld, "
             "stride %lld, padding %lld, dilation %lld): it must be >= 1", op, a, (long long)in,
             (long long)o, (long long)p->kernel[a], (long long)p->stride[a],
             (long long)p->padding[a], (long long)p->dilation[a]);
    return TG_OK;
}

int tg_pool_output_size(int64_t *out, int n_spatial, const int64_t *in, const tg_pool_params *p)
{
    const char *op = "pool_output_size";
    tg_pool_params r;
    TG_TRY(tg__pool_check_params(op, TG__MAX_POOL, n_spatial, p, &r));
    TG_CHECK(out != NULL && in != NULL, TG_EINVAL, "%s: out and in must not be NULL", op);
    int64_t o[TG_POOL_MAX_SPATIAL];
    for (int a = 0; a < n_spatial; a++) {
        TG_CHECK(in[a] >= 1, TG_EINVAL, "%s: in[%d]=%lld must be >= 1", op, a, (long long)in[a]);
        o[a] = tg__pool_extent(&r, a, in[a]);
        TG_TRY(check_extent(op, &r, a, in[a], o[a]));
    }
    memcpy(out, o, (size_t)n_spatial * sizeof *out);
    return TG_OK;
}

/* The output shape of the checked call c. */
static int out_shape(const char *op, tg__pool_kind kind, const tg__pool_call *c, int64_t *out)
{
    const int lead = c->ndim - c->ns;
    memcpy(out, c->shape, (size_t)lead * sizeof *out);
    for (int a = 0; a < c->ns; a++) {
        const int64_t in = c->shape[lead + a];
        if (kind == TG__UPSAMPLE_LINEAR || kind == TG__UPSAMPLE_CUBIC ||
            kind == TG__ADAPTIVE_AVG_POOL || kind == TG__ADAPTIVE_MAX_POOL) {
            out[lead + a] = c->size[a];
        } else if (kind == TG__UPSAMPLE) {
            TG_CHECK(in <= INT64_MAX / c->scale[a], TG_EINVAL,
                     "%s: spatial dim %d of extent %lld times scale %lld is too large", op, a,
                     (long long)in, (long long)c->scale[a]);
            out[lead + a] = in * c->scale[a];
        } else {
            out[lead + a] = tg__pool_extent(&c->p, a, in);
            TG_TRY(check_extent(op, &c->p, a, in, out[lead + a]));
        }
    }
    /* the kernels may hold x and the result in f64 */
    TG_CHECK(tg__shape_bytes_fit(c->ndim, out, (int64_t)sizeof(double)), TG_EINVAL,
             "%s: the result's shape is too large", op);
    return TG_OK;
}

int tg__pool_prepare(const char *op, tg__pool_kind kind, tg_dtype dtype, tg__pool_call *c,
                     int64_t *out)
{
    if (kind == TG__UPSAMPLE) TG_TRY(tg__upsample_check_scale(op, c->ns, c->scale));
    else if (kind == TG__UPSAMPLE_LINEAR || kind == TG__ADAPTIVE_AVG_POOL ||
             kind == TG__ADAPTIVE_MAX_POOL)
        TG_TRY(tg__upsample_check_size(op, c->ns, c->size));
    else if (kind == TG__UPSAMPLE_CUBIC) {
        TG_CHECK(c->ns == 2, TG_EINVAL, "%s: n_spatial=%d; bicubic interpolation is 2-d", op,
                 c->ns);
        TG_TRY(tg__upsample_check_size(op, c->ns, c->size));
    }
    else TG_TRY(tg__pool_check_params(op, kind, c->ns, &c->p, &c->p));
    TG_CHECK(tg_dtype_is_float(dtype), TG_EDTYPE, "%s: x has dtype %s; a float dtype is needed",
             op, tg_dtype_name(dtype));
    TG_TRY(check_input(op, c->ns, c->ndim, c->shape));
    return out_shape(op, kind, c, out);
}

int tg__pool_check_grad(const char *op, const tg_tensor *g, const tg__pool_call *c,
                        const int64_t *want)
{
    TG_CHECK(g != NULL, TG_EINVAL, "%s: g must not be NULL", op);
    TG_CHECK(tg_dtype_is_float(g->dtype), TG_EDTYPE, "%s: g has dtype %s; a float dtype is needed",
             op, tg_dtype_name(g->dtype));
    bool same = g->ndim == c->ndim;
    for (int d = 0; same && d < g->ndim; d++) same = g->shape[d] == want[d];
    char got[96], need[96];
    TG_CHECK(same, TG_ESHAPE, "%s: g has shape %s; it must be %s", op,
             tg_shape_str(got, sizeof got, g->ndim, g->shape),
             tg_shape_str(need, sizeof need, c->ndim, want));
    return TG_OK;
}

void tg__pool_geom_of(tg__pool_kind kind, const tg__pool_call *c, const int64_t *out_shape,
                      tg__pool_geom *g)
{
    const bool up = kind == TG__UPSAMPLE,
               lin = kind == TG__UPSAMPLE_LINEAR || kind == TG__UPSAMPLE_CUBIC ||
                     kind == TG__ADAPTIVE_AVG_POOL || kind == TG__ADAPTIVE_MAX_POOL;
    const int lead = c->ndim - c->ns, first = 3 - c->ns;
    *g = (tg__pool_geom){.planes = tg__numel(lead, c->shape), .in_plane = 1, .out_plane = 1};
    for (int a = 0; a < 3; a++) {
        const int src = a - first;   /* the call's axis, < 0 for an added one */
        g->in[a] = src < 0 ? 1 : c->shape[lead + src];
        g->out[a] = src < 0 ? 1 : out_shape[lead + src];
        g->k[a] = src < 0 || lin ? 1 : up ? c->scale[src] : c->p.kernel[src];
        g->s[a] = src < 0 || up || lin ? 1 : c->p.stride[src];
        g->p[a] = src < 0 || up || lin ? 0 : c->p.padding[src];
        g->dil[a] = src < 0 || up || lin ? 1 : c->p.dilation[src];
        g->in_plane *= g->in[a];
        g->out_plane *= g->out[a];
    }
}

int tg__pool_prepare_x(tg__pool_kind kind, const tg__pool_call *params, const tg_tensor *x,
                       tg__pool_call *c, int64_t *os)
{
    const char *op = tg__pool_opname(kind, params->ns);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    *c = *params;
    c->ndim = x->ndim;
    memcpy(c->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    return tg__pool_prepare(op, kind, x->dtype, c, os);
}

int tg__pool_forward_shape(tg__pool_kind kind, tg_tensor *const *in, const void *params,
                           tg_dtype *dtype, int *ndim, int64_t *shape)
{
    tg__pool_call c;
    TG_TRY(tg__pool_prepare_x(kind, params, in[0], &c, shape));
    *dtype = in[0]->dtype;
    *ndim = c.ndim;
    return TG_OK;
}
