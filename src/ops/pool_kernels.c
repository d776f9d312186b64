/* src/ops/pool_kernels.c - the kernels of avg_pool.c, max_pool.c,
 * upsample.c, adaptive_pool.c and adaptive_max_pool.c (pool_kernels_tmpl.h
 * instantiated for float and double), the
 * window tables they read and the driver that moves a call's tensors in and
 * out of the compute dtype. */
#include <math.h>
#include <string.h>

#include "ops/pool_internal.h"

/* floor(a / b) and ceil(a / b) for b > 0. */
static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

static int64_t clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Window o of axis a of g: start = o*s - p; inside x the elements from
 * start moved up onto the dilation grid while negative, below
 * min(start + (k-1)*dil + 1, I) (PyTorch's max_pool ih0 and ih1; with
 * dil 1 avg_pool's window inside x); the divisor's factor from avg_pool's
 * window cut at the right padding, I + p. */
static void window(const tg__pool_geom *g, bool cip, int a, int64_t o, int64_t *lo, int64_t *hi,
                   int64_t *div)
{
    const int64_t start = o * g->s[a] - g->p[a], d = g->dil[a];
    int64_t end = start + (g->k[a] - 1) * d + 1;
    if (end > g->in[a]) end = g->in[a];
    *lo = start < 0 ? start + ceil_div(-start, d) * d : start;
    *hi = end;
    int64_t pad_end = start + g->k[a];
    if (pad_end > g->in[a] + g->p[a]) pad_end = g->in[a] + g->p[a];
    *div = cip ? pad_end - start : (*hi > *lo ? *hi - *lo : 0);
}

int tg__pool_axes_init(tg__pool_axes *ax, const tg__pool_geom *g, bool cip, tg_dtype cdt)
{
    /* Taps j that lie inside x for some o in [0, O): o*s - p + j*d in [0, I)
     * first for o = O-1, last for o = 0. */
    const int64_t s = g->s[2], p = g->p[2], d = g->dil[2], I = g->in[2], O = g->out[2];
    const int64_t j0 = clamp(ceil_div(p - (O - 1) * s, d), 0, g->k[2]);
    const int64_t j1 = clamp(floor_div(I - 1 + p, d) + 1, j0, g->k[2]);
    const int64_t no = g->out[0] + g->out[1] + g->out[2];
    const size_t es = tg_dtype_size(cdt);
    *ax = (tg__pool_axes){.j0 = j0, .taps = j1 - j0};
    ax->mem = tg__malloc((size_t)(3 * no + 2 * ax->taps) * sizeof(int64_t) + (size_t)no * es);
    if (!ax->mem) return TG_ENOMEM;
    int64_t *m = ax->mem;
    double largest = 1;   /* the largest divisor, at most */
    for (int a = 0; a < 3; a++) {
        ax->lo[a] = m;
        ax->hi[a] = m + g->out[a];
        ax->div[a] = m + 2 * g->out[a];
        m += 3 * g->out[a];
        int64_t dmax = 0;
        for (int64_t o = 0; o < g->out[a]; o++) {
            window(g, cip, a, o, &ax->lo[a][o], &ax->hi[a][o], &ax->div[a][o]);
            dmax = ax->div[a][o] > dmax ? ax->div[a][o] : dmax;
        }
        largest *= (double)dmax;
    }
    ax->olo = m;
    ax->ohi = m + ax->taps;
    ax->in_lo = 0;
    ax->in_hi = O;
    for (int64_t t = 0; t < ax->taps; t++) {
        /* o*s + off in [0, I)  <=>  o in [ceil(-off / s), ceil((I - off) / s)) */
        const int64_t off = (j0 + t) * d - p;
        ax->olo[t] = clamp(ceil_div(-off, s), 0, O);
        ax->ohi[t] = clamp(ceil_div(I - off, s), ax->olo[t], O);
        ax->in_lo = ax->olo[t] > ax->in_lo ? ax->olo[t] : ax->in_lo;
        ax->in_hi = ax->ohi[t] < ax->in_hi ? ax->ohi[t] : ax->in_hi;
    }
    /* Integers up to 2^24 (f32) or 2^53 (f64) and their products up to that
     * are exact. */
    if (largest > (cdt == TG_F64 ? 0x1p53 : 0x1p24)) return TG_OK;
    unsigned char *t = (unsigned char *)(m + 2 * ax->taps);
    for (int a = 0; a < 3; a++) {
        ax->divt[a] = t;
        for (int64_t o = 0; o < g->out[a]; o++) {
            if (cdt == TG_F64) ((double *)t)[o] = (double)ax->div[a][o];
            else ((float *)t)[o] = (float)ax->div[a][o];
        }
        t += (size_t)g->out[a] * es;
    }
    return TG_OK;
}

void tg__pool_axes_free(tg__pool_axes *ax) { free(ax->mem); }

int tg__adaptive_axes_init(tg__pool_axes *ax, const tg__pool_geom *g)
{
    const int64_t no = g->out[0] + g->out[1] + g->out[2];
    *ax = (tg__pool_axes){0};
    ax->mem = tg__malloc((size_t)(3 * no) * sizeof(int64_t));
    if (!ax->mem) return TG_ENOMEM;
    int64_t *m = ax->mem;
    for (int a = 0; a < 3; a++) {
        /* I, O <= TG_POOL_MAX_PARAM, so (o + 1) * I fits */
        const int64_t I = g->in[a], O = g->out[a];
        ax->lo[a] = m;
        ax->hi[a] = m + O;
        ax->div[a] = m + 2 * O;
        m += 3 * O;
        for (int64_t o = 0; o < O; o++) {
            ax->lo[a][o] = floor_div(o * I, O);
            ax->hi[a][o] = ceil_div((o + 1) * I, O);
            ax->div[a][o] = ax->hi[a][o] - ax->lo[a][o];
        }
    }
    return TG_OK;
}

#define TG__POOL_BLOCK 256

#define T float
#define IT int32_t
#define SUF f32
#include "ops/pool_kernels_tmpl.h"
#undef T
#undef IT
#undef SUF

#define T double
#define IT int64_t
#define SUF f64
#include "ops/pool_kernels_tmpl.h"
#undef T
#undef IT
#undef SUF

const tg__pool_kernels tg__avg_pool_kernels = {avg_pool_f32, avg_pool_f64};
const tg__pool_kernels tg__avg_pool_adjoint_kernels = {avg_pool_adjoint_f32,
                                                       avg_pool_adjoint_f64};
const tg__pool_kernels tg__max_pool_kernels = {max_pool_f32, max_pool_f64};
const tg__pool_kernels tg__max_pool_scatter_kernels = {max_pool_scatter_f32,
                                                       max_pool_scatter_f64};
const tg__pool_kernels tg__max_pool_gather_kernels = {max_pool_gather_f32, max_pool_gather_f64};
const tg__pool_kernels tg__upsample_sum_kernels = {upsample_sum_f32, upsample_sum_f64};
const tg__pool_kernels tg__adaptive_avg_kernels = {adaptive_avg_f32, adaptive_avg_f64};
const tg__pool_kernels tg__adaptive_avg_adjoint_kernels = {adaptive_avg_adjoint_f32,
                                                           adaptive_avg_adjoint_f64};
const tg__pool_kernels tg__adaptive_max_kernels = {adaptive_max_f32, adaptive_max_f64};

int tg__pool_run(const tg__pool_kernels *k, tg__pool_job *job, tg_dtype cdt,
                 const tg_tensor *src, int ndim, const int64_t *shape, bool zeroed,
                 tg_tensor **out)
{
    const tg_dtype dt = src->dtype;
    const size_t es = tg_dtype_size(cdt);
    const int64_t ns = tg_tensor_numel(src), nd = tg__numel(ndim, shape);
    const bool src_own = dt == cdt && tg_tensor_is_contiguous(src), dst_own = dt == cdt;
    void *sbuf = src_own ? NULL : tg__work_alloc((size_t)(ns > 0 ? ns : 1) * es);
    void *dbuf = dst_own ? NULL : tg__work_alloc((size_t)(nd > 0 ? nd : 1) * es);
    tg_tensor *r = (src_own || sbuf) && (dst_own || dbuf)
                       ? (zeroed && dst_own ? tg__tensor_empty : tg__tensor_uninit)(dt, ndim, shape)
                       : NULL;
    if (r) {
        if (sbuf) tg__gather(src, cdt, sbuf);
        if (dbuf && zeroed) memset(dbuf, 0, (size_t)nd * es);
        job->src = src_own ? (const char *)src->storage->data + (size_t)src->offset * es : sbuf;
        job->dst = dst_own ? r->storage->data : dbuf;
        tg__parallel_range(job->g->planes, ns + nd > 32768, cdt == TG_F64 ? k->f64 : k->f32,
                           job);
        if (dbuf) tg__scatter(r, cdt, dbuf);
        *out = r;
    }
    tg__work_free(dbuf);
    tg__work_free(sbuf);
    return r ? TG_OK : TG_ENOMEM;
}
