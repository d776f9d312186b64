/* src/ops/scatter.c - writes by index along one dim: scatter and
 * scatter_value (torch.scatter with a src tensor or a value, reduce None,
 * out of place), and the walk over an index that scatter_reduce shares.
 *
 * With the index value v at a position p of the index (dim = 1 shown):
 *   scatter        out = x;  out[i][v][k] = src[i][j][k]
 *   scatter_value  out = x;  out[i][v][k] = value
 * Positions write in the index's row-major order, so where two positions
 * name one element the later one's src stays, as torch 1.13's CPU kernel
 * leaves it (torch calls that order undefined).  The positions of a line
 * along dim all write to one line of the result, and different lines to
 * different lines, so the threads take whole lines and the bits do not
 * depend on their number.  A write copies src's bits (NaN payloads too),
 * in any dtype (an integer result is not recorded).
 *
 * The gradients are torch's formulas:
 *   scatter:        dx = scatter_value(g, dim, index, 0),
 *                   dsrc = gather(g, dim, index)
 *   scatter_value:  dx = scatter_value(g, dim, index, 0)
 * each made of these ops and gather, so gradients of any order follow.
 * Where positions repeat, every one of them gets g at its element in
 * dsrc, the one that was overwritten too, as torch's formula gives. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/tape.h"
#include "core/core.h"
#include "ops/families.h"
#include "ops/gather_internal.h"
#include "ops/scatter_internal.h"
#include "tapegrad/ops.h"

static const tg_op_schema scatter_op, scatter_value_op;

int tg__scatter_check(const char *op, const tg_tensor *x, int dim, const tg_tensor *idx,
                      const tg_tensor *src)
{
    TG_CHECK(idx->dtype == TG_I64, TG_EDTYPE, "%s: index has dtype %s; it must be i64", op,
             tg_dtype_name(idx->dtype));
    if (src) {
        TG_CHECK(src->dtype == x->dtype, TG_EDTYPE,
                 "%s: src has dtype %s but x has %s; they must match", op,
                 tg_dtype_name(src->dtype), tg_dtype_name(x->dtype));
        TG_CHECK(tg_tensor_same_shape(src, idx), TG_ESHAPE, "%s: src must have index's shape",
                 op);
    }
    if (tg_tensor_numel(idx) == 0) return TG_OK;   /* torch: nothing to check */
    TG_CHECK(idx->ndim == x->ndim, TG_ESHAPE,
             "%s: index has %d dims but x has %d; they must match", op, idx->ndim, x->ndim);
    for (int d = 0; d < x->ndim; d++)
        TG_CHECK(d == dim || idx->shape[d] <= x->shape[d], TG_ESHAPE,
                 "%s: index.size(%d)=%lld must be <= x.size(%d)=%lld", op, d,
                 (long long)idx->shape[d], d, (long long)x->shape[d]);
    return TG_OK;
}

/* TG_EINVAL naming the first of the m values outside [0, extent), its
 * position in the index (shape ishape, nd dims); TG_OK when none is. */
static int check_values(const char *op, const int64_t *v, int64_t m, int nd,
                        const int64_t *ishape, int dim, int64_t extent)
{
    int64_t p = 0;
    while (p < m && (uint64_t)v[p] < (uint64_t)extent) p++;
    if (p == m) return TG_OK;
    char at[TG_MAX_DIMS * 22 + 2] = "";
    int64_t c[TG_MAX_DIMS], rest = p;
    size_t len = 0;
    for (int d = nd - 1; d >= 0; d--) {
        c[d] = rest % ishape[d];
        rest /= ishape[d];
    }
    for (int d = 0; d < nd; d++)
        len += (size_t)snprintf(at + len, sizeof at - len, "%s%lld", d ? ", " : "",
                                (long long)c[d]);
    return tg__error(TG_EINVAL, "%s: index[%s]=%lld is out of range for dim %d of extent %lld",
                     op, at, (long long)v[p], dim, (long long)extent);
}

int tg__scatter_walk_init(const char *op, tg__scatter_walk *w, const tg_tensor *x, int dim,
                          const tg_tensor *idx, int64_t **owned)
{
    int64_t xshape[TG_MAX_DIMS];
    *owned = NULL;
    memset(w, 0, sizeof *w);
    w->dim = dim;
    w->nd = x->ndim > 0 ? x->ndim : 1;
    w->m = tg_tensor_numel(idx);
    for (int d = 0; d < w->nd; d++) {
        xshape[d] = x->ndim > 0 ? x->shape[d] : 1;
        w->ishape[d] = idx->ndim > 0 ? idx->shape[d] : 1;
    }
    w->ostrides[w->nd - 1] = 1;
    for (int d = w->nd - 2; d >= 0; d--) w->ostrides[d] = w->ostrides[d + 1] * xshape[d + 1];
    if (w->m == 0) return TG_OK;
    w->v = (const int64_t *)idx->storage->data + idx->offset;
    if (w->m > 1 && !tg_tensor_is_contiguous(idx)) {
        int64_t *copy = tg__malloc((size_t)w->m * sizeof *copy);
        if (!copy) return TG_ENOMEM;
        tg__gather(idx, TG_I64, copy);
        w->v = copy;
        *owned = copy;
    }
    const int rc = check_values(op, w->v, w->m, w->nd, w->ishape, dim, xshape[dim]);
    if (rc < 0) {
        free(*owned);
        *owned = NULL;
    }
    return rc;
}

int64_t tg__scatter_lines(const tg__scatter_walk *w)
{
    return w->m == 0 ? 0 : w->m / w->ishape[w->dim];
}

void tg__scatter_line(const tg__scatter_walk *w, int64_t l, int64_t *base, int64_t *step,
                      int64_t *len, int64_t *obase)
{
    /* l's coordinates over the index's dims but dim, row-major */
    int64_t b = 0, ob = 0, istride = 1, rest = l;
    *step = 1;
    for (int d = w->nd - 1; d >= 0; d--) {
        if (d == w->dim) {
            *step = istride;
        } else {
            const int64_t c = rest % w->ishape[d];
            rest /= w->ishape[d];
            b += c * istride;
            ob += c * w->ostrides[d];
        }
        istride *= w->ishape[d];
    }
    *base = b;
    *len = w->ishape[w->dim];
    *obase = ob;
}

void tg__scatter_run(const tg__scatter_walk *w, void (*body)(void *ctx, int64_t lo, int64_t hi),
                     void *ctx)
{
    const int64_t lines = tg__scatter_lines(w);
    tg__parallel_range(lines, w->m >= (1 << 15) && lines > 1, body, ctx);
}

/* ---- the writes ---- */

typedef struct write_job {
    const tg__scatter_walk *w;
    char *out;
    const char *src;    /* contiguous, index's shape; NULL: value */
    const char *value;  /* one element of x's dtype */
    size_t es;
} write_job;

static void write_lines(void *ctx, int64_t lo, int64_t hi)
{
    const write_job *j = ctx;
    for (int64_t l = lo; l < hi; l++) {
        int64_t base, step, len, obase;
        tg__scatter_line(j->w, l, &base, &step, &len, &obase);
        for (int64_t k = 0, p = base; k < len; k++, p += step) {
            const char *from = j->src ? j->src + (size_t)p * j->es : j->value;
            memcpy(j->out + (size_t)tg__scatter_target(j->w, obase, p) * j->es, from, j->es);
        }
    }
}

/* *out = x with src's elements (or value, when src is NULL) written at
 * the index's positions. */
static int scatter_forward_impl(const char *op, tg_tensor **out, tg_tensor *x, int dim,
                                tg_tensor *idx, tg_tensor *src, double value)
{
    TG_TRY(tg__scatter_check(op, x, dim, idx, src));
    tg__scatter_walk w;
    int64_t *owned = NULL;
    TG_TRY(tg__scatter_walk_init(op, &w, x, dim, idx, &owned));
    const size_t es = tg_dtype_size(x->dtype);
    tg_tensor *y = tg__tensor_uninit(x->dtype, x->ndim, x->shape);
    char *sbuf = NULL;
    _Alignas(8) char vbuf[8];
    if (y && src && w.m > 0) sbuf = tg__malloc((size_t)w.m * es);
    if (!y || (src && w.m > 0 && !sbuf)) {
        tg_tensor_release(y);
        free(owned);
        return TG_ENOMEM;
    }
    tg__gather(x, x->dtype, tg_tensor_data(y));
    if (sbuf) tg__gather(src, src->dtype, sbuf);
    tg_dtype_store(x->dtype, vbuf, 0, value);
    write_job j = {.w = &w, .out = tg_tensor_data(y), .src = sbuf, .value = vbuf, .es = es};
    if (w.m > 0) tg__scatter_run(&w, write_lines, &j);
    free(sbuf);
    free(owned);
    *out = y;
    return TG_OK;
}

/* in: x, index, src (scatter). */
static int scatter_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                           const void *params)
{
    (void)n;
    const tg__scatter_params *p = params;
    TG_TRY(scatter_forward_impl("scatter", out, in[0], p->dim, in[1], in[2], 0));
    if (ctx) tg__ctx_save(ctx, in[1]);
    return TG_OK;
}

/* in: x, index. */
static int scatter_value_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                                 const void *params)
{
    (void)n;
    const tg__scatter_params *p = params;
    TG_TRY(scatter_forward_impl("scatter", out, in[0], p->dim, in[1], NULL, p->value));
    if (ctx) tg__ctx_save(ctx, in[1]);
    return TG_OK;
}

int tg__scatter_value_call(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *idx, double v)
{
    tg__scatter_params p = {.value = v, .dim = dim};
    return tg_op_call(&scatter_value_op, out, 2, (tg_tensor *[]){x, idx}, &p, sizeof p);
}

/* dx = scatter_value(g, dim, index, 0), dsrc = gather(g, dim, index). */
static int scatter_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const int dim = ((const tg__scatter_params *)tg__ctx_params(ctx))->dim;
    tg_tensor *idx;
    TG_TRY(tg__ctx_saved(ctx, 0, &idx));
    if (tg__ctx_needs_grad(ctx, 0)) TG_TRY(tg__scatter_value_call(&gi[0], g, dim, idx, 0));
    if (tg_op_ctx_op(ctx) != &scatter_op || !tg__ctx_needs_grad(ctx, 2)) return TG_OK;
    if (tg_tensor_numel(idx) > 0) return tg_gather(&gi[2], g, dim, idx);
    /* an empty index (of any shape, unchecked against g): src's zeros */
    return tg_tensor_zeros(&gi[2], g->dtype, idx->ndim, idx->shape);
}

/* KEEP, as gather and scatter_add: x's dtype inside autocast too. */
static const tg_op_schema scatter_op = {
    .name = "scatter", .arity = 3, .amp = TG_AMP_KEEP, .forward = scatter_forward,
    .backward = scatter_backward, .double_backward = true,
    .vjp = "dx = scatter(g, dim, index, 0), dsrc = gather(g, dim, index); the index gets none"};
static const tg_op_schema scatter_value_op = {
    .name = "scatter_value", .arity = 2, .amp = TG_AMP_KEEP, .forward = scatter_value_forward,
    .backward = scatter_backward, .double_backward = true,
    .vjp = "dx = scatter(g, dim, index, 0); the index gets none", .scalar = "value"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__scatter_ops[] = {&scatter_op, &scatter_value_op};
static_assert(sizeof tg__scatter_ops / sizeof tg__scatter_ops[0] == TG__scatter_N,
              "src/ops/families.h must count the scatter ops");

int tg_scatter(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *index, tg_tensor *src)
{
    int d = 0;   /* set by tg__gather_public_args on success */
    TG_TRY(tg__gather_public_args("scatter", out, x, dim, index, true, src, &d));
    tg__scatter_params p = {.dim = d};
    return tg_op_call(&scatter_op, out, 3, (tg_tensor *[]){x, index, src}, &p, sizeof p);
}

int tg_scatter_value(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *index, double value)
{
    int d = 0;   /* set by tg__gather_public_args on success */
    TG_TRY(tg__gather_public_args("scatter", out, x, dim, index, false, NULL, &d));
    const int rc = tg__check_value("scatter: value", x->dtype, value);
    if (rc < 0) return rc;
    return tg__scatter_value_call(out, x, d, index, value);
}
