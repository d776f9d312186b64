/* src/ops/scatter_reduce.c - torch.scatter_reduce(x, dim, index, src,
 * reduce, include_self), out of place, for reduce sum, prod, mean, amax
 * and amin.
 *
 * Each element of the result that the index names is the reduction of
 * its terms of src in the index's row-major order, started from x's
 * element (include_self) or from the reduction's identity (0, 1, -inf,
 * +inf: torch writes the identity first, so a lone -0.0 summed is +0.0);
 * the others keep x's.  As torch 1.13's CPU kernel, each step rounds to
 * x's dtype (f16 and bf16: computed in f32, then rounded), amax / amin
 * keep the earlier of equal values and a NaN term makes the element NaN
 * for good, and mean divides the sum by a count kept in x's dtype too
 * (1 for x's own term with include_self; an element no term reaches is
 * divided by 1).
 *
 * The gradients are torch 1.13's formulas (FunctionsManual's
 * scatter_reduce_backward), written with differentiable ops:
 *   sum   dx = g, dsrc = gather(g)
 *   mean  N = scatter_add(include_self, index, 1) with 0 -> 1,
 *         dx = g / N, dsrc = gather(g) / gather(N)
 *   amax, amin  the g of an element shared evenly by x's element and its
 *         terms equal to the result: M = (x == y) + scatter_add(src ==
 *         gather(y)), dx = (x == y) g / M, dsrc = (src == gather(y))
 *         gather(g / M)
 *   prod  dx = g * scatter_reduce(x with 0 -> 1, src) / (x with 0 -> 1);
 *         dsrc = gather(g * y) / src, but where src is the only zero
 *         reaching its element, gather(g * scatter_reduce(x, src with
 *         that zero -> 1)).  With two zeros reaching one element the
 *         gradient is 0 and torch refuses its derivative; here a
 *         create_graph backward that needs dsrc is TG_EUNSUPPORTED then.
 * and without include_self dx is then 0 at the elements the index names.
 * gather(t) is gather(t, dim, index); y the result. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/tape.h"
#include "core/core.h"
#include "ops/families.h"
#include "ops/gather_internal.h"
#include "ops/scatter_internal.h"
#include "tapegrad/ops.h"

static const tg_op_schema scatter_reduce_op;

static const char *const reduce_names[] = {"sum", "prod", "mean", "amax", "amin"};

/* v rounded to dt as an operation in dt rounds it (f16 / bf16 through f32). */
static double rnd(tg_dtype dt, double v)
{
    if (dt == TG_F64) return v;
    return tg__round_to(dt, (double)(float)v);
}

static double identity(int r)
{
    switch (r) {
    case TG_SCATTER_PROD: return 1;
    case TG_SCATTER_AMAX: return -INFINITY;
    case TG_SCATTER_AMIN: return INFINITY;
    default: return 0;
    }
}

/* One step of the reduction, as torch 1.13's CPU kernel's. */
static double step(int r, tg_dtype dt, double o, double s)
{
    switch (r) {
    case TG_SCATTER_PROD: return rnd(dt, o * s);
    case TG_SCATTER_AMAX: return isnan(s) ? s : (o < s ? s : o);
    case TG_SCATTER_AMIN: return isnan(s) ? s : (s < o ? s : o);
    default: return rnd(dt, o + s);
    }
}

typedef struct reduce_job {
    const tg__scatter_walk *w;
    double *out, *cnt;   /* x's numel each; cnt for mean only */
    const double *src;   /* index's shape, contiguous */
    tg_dtype dt;
    int reduce;
    bool include_self;
} reduce_job;

static void reduce_lines(void *ctx, int64_t lo, int64_t hi)
{
    const reduce_job *j = ctx;
    for (int64_t l = lo; l < hi; l++) {
        int64_t base, stp, len, obase;
        tg__scatter_line(j->w, l, &base, &stp, &len, &obase);
        if (!j->include_self)
            for (int64_t k = 0, p = base; k < len; k++, p += stp)
                j->out[tg__scatter_target(j->w, obase, p)] = identity(j->reduce);
        for (int64_t k = 0, p = base; k < len; k++, p += stp) {
            const int64_t t = tg__scatter_target(j->w, obase, p);
            j->out[t] = step(j->reduce, j->dt, j->out[t], j->src[p]);
            if (j->cnt) j->cnt[t] = rnd(j->dt, j->cnt[t] + 1);
        }
    }
}

/* ---- an integer x ----
 * The same walk in int64, each step's result wrapped to x's width (modulo
 * 2^bits, as arithmetic in x's dtype gives it, torch's too); amax and amin
 * start from the dtype's lowest and highest; mean's count is kept in x's
 * dtype (wrapped too; 0 -> 1) and the sum divided by it rounding toward
 * -inf, as torch 1.13's integer kernel (div with rounding_mode "floor"):
 * a sum of -15 over 2 terms gives -8. */

/* u's low bits as an element of the integer dtype dt (sign-extended for
 * the signed ones). */
static int64_t wrap(tg_dtype dt, uint64_t u)
{
    int64_t v;
    switch (dt) {
    case TG_I8: v = (int64_t)(u & 0xff); return v >= 0x80 ? v - 0x100 : v;
    case TG_U8: return (int64_t)(u & 0xff);
    case TG_I32: v = (int64_t)(u & 0xffffffffu); return v >= 0x80000000 ? v - 0x100000000 : v;
    default: memcpy(&v, &u, sizeof v); return v;   /* i64: the same bits */
    }
}

static int64_t identity_int(int r, tg_dtype dt)
{
    static const int64_t lowest[] = {[TG_I8] = INT8_MIN, [TG_U8] = 0, [TG_I32] = INT32_MIN,
                                     [TG_I64] = INT64_MIN};
    static const int64_t highest[] = {[TG_I8] = INT8_MAX, [TG_U8] = UINT8_MAX,
                                      [TG_I32] = INT32_MAX, [TG_I64] = INT64_MAX};
    switch (r) {
    case TG_SCATTER_PROD: return 1;
    case TG_SCATTER_AMAX: return lowest[dt];
    case TG_SCATTER_AMIN: return highest[dt];
    default: return 0;
    }
}

static int64_t step_int(int r, tg_dtype dt, int64_t o, int64_t s)
{
    switch (r) {
    case TG_SCATTER_PROD: return wrap(dt, (uint64_t)o * (uint64_t)s);
    case TG_SCATTER_AMAX: return o < s ? s : o;
    case TG_SCATTER_AMIN: return s < o ? s : o;
    default: return wrap(dt, (uint64_t)o + (uint64_t)s);
    }
}

/* a / b rounded toward -inf (b != 0), wrapped to dt: INT64_MIN / -1 too. */
static int64_t floor_div(tg_dtype dt, int64_t a, int64_t b)
{
    if (b == -1) return wrap(dt, 0 - (uint64_t)a);
    const int64_t q = a / b;
    return wrap(dt, (uint64_t)(q - (a % b != 0 && (a < 0) != (b < 0))));
}

typedef struct reduce_int_job {
    const tg__scatter_walk *w;
    int64_t *out, *cnt;   /* x's numel each; cnt for mean only */
    const int64_t *src;   /* index's shape, contiguous */
    tg_dtype dt;
    int reduce;
    bool include_self;
} reduce_int_job;

static void reduce_lines_int(void *ctx, int64_t lo, int64_t hi)
{
    const reduce_int_job *j = ctx;
    const int64_t first = identity_int(j->reduce, j->dt);
    for (int64_t l = lo; l < hi; l++) {
        int64_t base, stp, len, obase;
        tg__scatter_line(j->w, l, &base, &stp, &len, &obase);
        if (!j->include_self)
            for (int64_t k = 0, p = base; k < len; k++, p += stp)
                j->out[tg__scatter_target(j->w, obase, p)] = first;
        for (int64_t k = 0, p = base; k < len; k++, p += stp) {
            const int64_t t = tg__scatter_target(j->w, obase, p);
            j->out[t] = step_int(j->reduce, j->dt, j->out[t], j->src[p]);
            if (j->cnt) j->cnt[t] = wrap(j->dt, (uint64_t)j->cnt[t] + 1);
        }
    }
}

/* scatter_reduce's values for an integer x into y (x's shape and dtype). */
static int reduce_ints(tg_tensor *y, const tg_tensor *x, const tg__scatter_walk *w,
                       const tg_tensor *src, int reduce, bool include_self)
{
    const int64_t n = tg_tensor_numel(x);
    const bool mean = reduce == TG_SCATTER_MEAN;
    int64_t *o = tg__malloc((size_t)(n > 0 ? n : 1) * sizeof *o);
    int64_t *s = tg__malloc((size_t)(w->m > 0 ? w->m : 1) * sizeof *s);
    int64_t *c = mean ? tg__malloc((size_t)(n > 0 ? n : 1) * sizeof *c) : NULL;
    int rc = TG_OK;
    if (!o || !s || (mean && !c)) {
        rc = TG_ENOMEM;
        goto done;
    }
    tg__gather(x, TG_I64, o);
    tg__gather(src, TG_I64, s);
    for (int64_t i = 0; mean && i < n; i++) c[i] = include_self ? 1 : 0;
    reduce_int_job j = {.w = w, .out = o, .cnt = c, .src = s, .dt = x->dtype, .reduce = reduce,
                        .include_self = include_self};
    if (w->m > 0) tg__scatter_run(w, reduce_lines_int, &j);
    for (int64_t i = 0; mean && i < n; i++) o[i] = floor_div(x->dtype, o[i], c[i] ? c[i] : 1);
    tg__convert_n(TG_I64, o, x->dtype, tg_tensor_data(y), n);
done:
    free(o);
    free(s);
    free(c);
    return rc;
}

/* *out = scatter_reduce(x, dim, index, src, reduce, include_self). */
static int reduce_values(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *idx, tg_tensor *src,
                         int reduce, bool include_self)
{
    TG_TRY(tg__scatter_check("scatter_reduce", x, dim, idx, src));
    tg__scatter_walk w;
    int64_t *owned = NULL;
    TG_TRY(tg__scatter_walk_init("scatter_reduce", &w, x, dim, idx, &owned));
    const int64_t n = tg_tensor_numel(x);
    const bool mean = reduce == TG_SCATTER_MEAN;
    tg_tensor *y = tg__tensor_uninit(x->dtype, x->ndim, x->shape);
    if (y && !tg_dtype_is_float(x->dtype)) {
        const int rc = reduce_ints(y, x, &w, src, reduce, include_self);
        free(owned);
        if (rc < 0) tg_tensor_release(y);
        else *out = y;
        return rc;
    }
    double *o = tg__malloc((size_t)(n > 0 ? n : 1) * sizeof *o);
    double *s = tg__malloc((size_t)(w.m > 0 ? w.m : 1) * sizeof *s);
    double *c = mean ? tg__malloc((size_t)(n > 0 ? n : 1) * sizeof *c) : NULL;
    int rc = TG_OK;
    if (!y || !o || !s || (mean && !c)) {
        rc = TG_ENOMEM;
        goto done;
    }
    tg__gather(x, TG_F64, o);
    tg__gather(src, TG_F64, s);
    for (int64_t i = 0; mean && i < n; i++) c[i] = include_self ? 1 : 0;
    reduce_job j = {.w = &w, .out = o, .cnt = c, .src = s, .dt = x->dtype, .reduce = reduce,
                    .include_self = include_self};
    if (w.m > 0) tg__scatter_run(&w, reduce_lines, &j);
    for (int64_t i = 0; mean && i < n; i++) o[i] = rnd(x->dtype, o[i] / (c[i] == 0 ? 1 : c[i]));
    tg__convert_n(TG_F64, o, x->dtype, tg_tensor_data(y), n);
    *out = y;
    y = NULL;
done:
    tg_tensor_release(y);
    free(o);
    free(s);
    free(c);
    free(owned);
    return rc;
}

/* in: x, index, src.  Saves index, x, src and the result. */
static int reduce_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                          const void *params)
{
    (void)n;
    const tg__scatter_params *p = params;
    TG_TRY(reduce_values(out, in[0], p->dim, in[1], in[2], p->reduce, p->include_self));
    if (ctx) {
        tg__ctx_save(ctx, in[1]);
        tg__ctx_save(ctx, in[0]);
        tg__ctx_save(ctx, in[2]);
        tg_op_ctx_save_output(ctx, *out);
    }
    return TG_OK;
}

static int reduce_call(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *idx, tg_tensor *src,
                       int reduce, bool include_self)
{
    tg__scatter_params p = {.dim = dim, .reduce = reduce, .include_self = include_self};
    return tg_op_call(&scatter_reduce_op, out, 3, (tg_tensor *[]){x, idx, src}, &p, sizeof p);
}

/* What a backward reads: the saved tensors (borrowed), g (borrowed), dim,
 * and k[], the tensors it makes on the way (released by release_work). */
typedef struct bw {
    tg_tensor *idx, *x, *src, *y, *g;
    int dim, reduce;
    bool include_self;
    tg_tensor *k[20];
} bw;

static void release_work(bw *b)
{
    for (size_t i = 0; i < sizeof b->k / sizeof b->k[0]; i++) tg_tensor_release(b->k[i]);
}

/* mean: dx = g / N, dsrc = gather(g) / gather(N). */
static int mean_grads(bw *b, tg_tensor **dx, tg_tensor **dsrc)
{
    tg_tensor **k = b->k;
    const tg_tensor *x = b->x, *src = b->src;
    TG_TRY(tg_tensor_full(&k[0], x->dtype, x->ndim, x->shape, b->include_self ? 1 : 0));
    TG_TRY(tg_tensor_full(&k[1], src->dtype, src->ndim, src->shape, 1));
    TG_TRY(tg_scatter_add(&k[2], k[0], b->dim, b->idx, k[1]));
    TG_TRY(tg_eq_scalar(&k[3], k[2], 0));
    TG_TRY(tg_masked_fill(&k[4], k[2], k[3], 1));   /* N */
    TG_TRY(tg_div(dx, b->g, k[4]));
    TG_TRY(tg_gather(&k[5], b->g, b->dim, b->idx));
    TG_TRY(tg_gather(&k[6], k[4], b->dim, b->idx));
    return tg_div(dsrc, k[5], k[6]);
}

/* amax / amin: g shared evenly among the terms equal to the result. */
static int minmax_grads(bw *b, tg_tensor **dx, tg_tensor **dsrc)
{
    tg_tensor **k = b->k;
    const tg_dtype dt = b->x->dtype;
    TG_TRY(tg_gather(&k[0], b->y, b->dim, b->idx));   /* the result at each term */
    TG_TRY(tg_eq(&k[1], b->x, b->y));
    TG_TRY(tg_to_dtype(&k[2], k[1], dt));             /* x is the result */
    TG_TRY(tg_eq(&k[3], b->src, k[0]));
    TG_TRY(tg_to_dtype(&k[4], k[3], dt));             /* a term is the result */
    TG_TRY(tg_scatter_add(&k[5], k[2], b->dim, b->idx, k[4]));   /* M */
    TG_TRY(tg_div(&k[6], b->g, k[5]));
    TG_TRY(tg_mul(dx, k[2], k[6]));
    TG_TRY(tg_gather(&k[7], k[6], b->dim, b->idx));
    return tg_mul(dsrc, k[4], k[7]);
}

/* prod: see the file's comment. */
static int prod_grads(bw *b, bool want_src, tg_tensor **dx, tg_tensor **dsrc)
{
    tg_tensor **k = b->k;
    const tg_tensor *x = b->x;
    const tg_dtype dt = x->dtype;
    const int dim = b->dim;
    TG_TRY(tg_eq_scalar(&k[0], b->x, 0));
    TG_TRY(tg_masked_fill(&k[1], b->x, k[0], 1));   /* x with 0 -> 1 */
    TG_TRY(reduce_call(&k[2], k[1], dim, b->idx, b->src, TG_SCATTER_PROD, b->include_self));
    TG_TRY(tg_mul(&k[3], b->g, k[2]));
    TG_TRY(tg_div(dx, k[3], k[1]));
    if (!want_src) return TG_OK;
    TG_TRY(tg_eq_scalar(&k[4], b->src, 0));
    TG_TRY(tg_to_dtype(&k[5], k[4], dt));
    TG_TRY(tg_tensor_zeros(&k[6], dt, x->ndim, x->shape));
    TG_TRY(tg_scatter_add(&k[7], k[6], dim, b->idx, k[5]));
    TG_TRY(tg_gather(&k[8], k[7], dim, b->idx));   /* the zeros reaching each term's element */
    const int64_t m = tg_tensor_numel(k[8]);
    bool several = false;
    for (int64_t i = 0; i < m; i++) several |= tg_dtype_load(dt, tg_tensor_cdata(k[8]), i) > 1;
    TG_CHECK(!several || !tg_grad_enabled(), TG_EUNSUPPORTED,
             "scatter_reduce: the derivative of prod's gradient with respect to src is "
             "unsupported when more than one zero of src reaches one element, as torch's");
    TG_TRY(tg_mul(&k[9], k[5], k[8]));
    TG_TRY(tg_eq_scalar(&k[10], k[9], 1));   /* the term is the lone zero of its element */
    TG_TRY(tg_masked_fill(&k[11], b->src, k[10], 1));
    TG_TRY(reduce_call(&k[12], b->x, dim, b->idx, k[11], TG_SCATTER_PROD, b->include_self));
    TG_TRY(tg_mul(&k[13], b->g, k[12]));
    TG_TRY(tg_gather(&k[14], k[13], dim, b->idx));
    TG_TRY(tg_mul(&k[15], b->g, b->y));
    TG_TRY(tg_gather(&k[16], k[15], dim, b->idx));
    TG_TRY(tg_masked_fill(&k[17], b->src, k[4], 1));
    TG_TRY(tg_div(&k[18], k[16], k[17]));
    return tg_where(dsrc, k[10], k[14], k[18]);
}

static int reduce_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const tg__scatter_params *p = tg__ctx_params(ctx);
    bw b = {.g = g, .dim = p->dim, .reduce = p->reduce, .include_self = p->include_self};
    TG_TRY(tg__ctx_saved(ctx, 0, &b.idx));
    TG_TRY(tg__ctx_saved(ctx, 1, &b.x));
    TG_TRY(tg__ctx_saved(ctx, 2, &b.src));
    if (tg_tensor_numel(b.idx) == 0) {   /* nothing scattered: y = x */
        if (tg__ctx_needs_grad(ctx, 0)) gi[0] = tg_tensor_retain(g);
        if (tg__ctx_needs_grad(ctx, 2))
            return tg_tensor_zeros(&gi[2], g->dtype, b.src->ndim, b.src->shape);
        return TG_OK;
    }
    TG_TRY(tg_op_ctx_saved_output(ctx, 3, &b.y));
    tg_tensor *dx = NULL, *dsrc = NULL;
    int rc;
    switch (b.reduce) {
    case TG_SCATTER_SUM:
        dx = tg_tensor_retain(g);
        rc = tg_gather(&dsrc, g, b.dim, b.idx);
        break;
    case TG_SCATTER_MEAN: rc = mean_grads(&b, &dx, &dsrc); break;
    case TG_SCATTER_PROD: rc = prod_grads(&b, tg__ctx_needs_grad(ctx, 2), &dx, &dsrc); break;
    default: rc = minmax_grads(&b, &dx, &dsrc); break;
    }
    release_work(&b);
    tg_tensor_release(b.y);
    if (rc >= 0 && !b.include_self) {   /* x's elements that the index names took no part */
        tg_tensor *masked = NULL;
        rc = tg__scatter_value_call(&masked, dx, b.dim, b.idx, 0);
        tg_tensor_release(dx);
        dx = masked;
    }
    if (rc < 0) {
        tg_tensor_release(dx);
        tg_tensor_release(dsrc);
        return rc;
    }
    if (tg__ctx_needs_grad(ctx, 0)) gi[0] = dx;
    else tg_tensor_release(dx);
    if (tg__ctx_needs_grad(ctx, 2)) gi[2] = dsrc;
    else tg_tensor_release(dsrc);
    return TG_OK;
}

/* KEEP, as scatter and scatter_add: x's dtype inside autocast too. */
static const tg_op_schema scatter_reduce_op = {
    .name = "scatter_reduce", .arity = 3, .amp = TG_AMP_KEEP, .forward = reduce_forward,
    .backward = reduce_backward, .double_backward = true,
    .vjp = "torch's scatter_reduce_backward for the reduction (sum: dx = g, dsrc = "
           "gather(g, dim, index)); the index gets none"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__scatter_reduce_ops[] = {&scatter_reduce_op};
static_assert(sizeof tg__scatter_reduce_ops / sizeof tg__scatter_reduce_ops[0] ==
                  TG__scatter_reduce_N,
              "src/ops/families.h must count the scatter_reduce ops");

int tg_scatter_reduce(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *index, tg_tensor *src,
                      tg_scatter_reduce_op reduce, bool include_self)
{
    int d = 0;   /* set by tg__gather_public_args on success */
    TG_TRY(tg__gather_public_args("scatter_reduce", out, x, dim, index, true, src, &d));
    TG_CHECK((int)reduce >= 0 && (int)reduce < (int)(sizeof reduce_names / sizeof *reduce_names),
             TG_EINVAL,
             "scatter_reduce: reduce=%d must be one of TG_SCATTER_SUM, _PROD, _MEAN, _AMAX, "
             "_AMIN", (int)reduce);
    return reduce_call(out, x, d, index, src, (int)reduce, include_self);
}

/* "sum", "prod", "mean", "amax", "amin" (static); NULL for another value. */
const char *tg_scatter_reduce_name(tg_scatter_reduce_op reduce)
{
    if ((int)reduce < 0 || (int)reduce >= (int)(sizeof reduce_names / sizeof *reduce_names))
        return NULL;
    return reduce_names[reduce];
}
