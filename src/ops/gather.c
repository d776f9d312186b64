/* src/ops/gather.c - indexing along one dim: gather, scatter_add,
 * index_select, index_add (torch.gather, torch.scatter_add,
 * torch.index_select, torch.index_add with alpha 1, all out of place).
 *
 * With the index value v at a position p of the index (dim = 1 shown):
 *   gather        out[i][j][k] = x[i][v][k],      v = index[i][j][k]
 *   scatter_add   out = x;  out[i][v][k] += src[i][j][k]
 *   index_select  out[i][j][k] = x[i][v][k],      v = index[j]
 *   index_add     out = x;  out[i][v][k] += src[i][j][k]
 * index_select and index_add are gather and scatter_add with index[j]
 * repeated over the other dims, which is how they run.  A pick copies x's
 * element's bits, as torch's.  An added element is x's element plus its
 * terms of src in the index's row-major order, rounded to x's dtype at
 * each term, as torch's CPU kernels add (f16 and bf16: each term added in
 * f32 and the sum rounded, c10's half += half; so a thousand terms of
 * 1e-3 into one bf16 element stop at 0.5, as torch's).  x may be of any
 * dtype: an integer one's adds wrap modulo 2^bits, as torch's, and its
 * result is not recorded (tg_op_call drops an integer result's node).
 *
 * x is read through its strides, with no copy of it in another dtype.
 * The threads share disjoint elements of the result, so the bits do not
 * depend on their number: the picks runs of the result's positions; the
 * adds blocks of the index's lines along dim (the terms of a line all
 * land in one line of x, and those of different lines in different
 * lines), each block adding its line's terms in order.
 *
 * The adjoint pairs: <gather(x, v), h> = <x, scatter_add(0, v, h)>, and
 * scatter_add is linear in (x, src), so
 *   gather:       dx = scatter_add(zeros_like(x), dim, index, g)
 *   scatter_add:  dx = g,  dsrc = gather(g, dim, index)
 * and likewise index_select / index_add.  Each backward is the other op,
 * so gradients of any order follow.  The index gets no gradient. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/tape.h"
#include "core/core.h"
#include "ops/families.h"
#include "ops/gather_internal.h"
#include "tapegrad/ops.h"

typedef struct gather_params {
    int dim;   /* in [0, span), span = max(ndim, 1) */
} gather_params;

static const tg_op_schema gather_op, scatter_add_op, index_select_op, index_add_op;

static int check_index_dtype(const char *op, const tg_tensor *idx)
{
    TG_CHECK(idx != NULL, TG_EINVAL, "%s: index must not be NULL", op);
    TG_CHECK(idx->dtype == TG_I64, TG_EDTYPE, "%s: index has dtype %s; it must be i64", op,
             tg_dtype_name(idx->dtype));
    return TG_OK;
}

/* src in x's dtype, as torch's (which refuses another dtype too). */
static int check_src(const char *op, const tg_tensor *x, const tg_tensor *src)
{
    TG_CHECK(src->dtype == x->dtype, TG_EDTYPE,
             "%s: src has dtype %s but x has %s; they must match", op,
             tg_dtype_name(src->dtype), tg_dtype_name(x->dtype));
    return TG_OK;
}

/* gather / scatter_add: index has x's ndim and index.size(d) <= x.size(d)
 * for d != dim; src (scatter_add) has index's shape and x's dtype. */
static int check_gather_args(const char *op, const tg_tensor *x, int dim, const tg_tensor *idx,
                             const tg_tensor *src)
{
    TG_TRY(check_index_dtype(op, idx));
    TG_CHECK(dim >= 0 && dim < (x->ndim > 0 ? x->ndim : 1), TG_EINVAL,
             "%s: dim=%d is out of range for x with %d dims", op, dim, x->ndim);
    TG_CHECK(idx->ndim == x->ndim, TG_ESHAPE, "%s: index has %d dims but x has %d; they must match",
             op, idx->ndim, x->ndim);
    for (int d = 0; d < x->ndim; d++)
        TG_CHECK(d == dim || idx->shape[d] <= x->shape[d], TG_ESHAPE,
                 "%s: index.size(%d)=%lld must be <= x.size(%d)=%lld", op, d,
                 (long long)idx->shape[d], d, (long long)x->shape[d]);
    if (src) {
        TG_TRY(check_src(op, x, src));
        TG_CHECK(tg_tensor_same_shape(src, idx), TG_ESHAPE, "%s: src must have index's shape", op);
    }
    return TG_OK;
}

/* index_select / index_add: index is 1-d (or 0-d, one value); src
 * (index_add) is x's shape with index's length at dim, in x's dtype. */
static int check_select_args(const char *op, const tg_tensor *x, int dim, const tg_tensor *idx,
                             const tg_tensor *src)
{
    TG_TRY(check_index_dtype(op, idx));
    TG_CHECK(dim >= 0 && dim < (x->ndim > 0 ? x->ndim : 1), TG_EINVAL,
             "%s: dim=%d is out of range for x with %d dims", op, dim, x->ndim);
    TG_CHECK(idx->ndim <= 1, TG_ESHAPE, "%s: index has %d dims; it must be 1-d", op, idx->ndim);
    /* the result keeps x's ndim: a 0-d x takes one index value */
    TG_CHECK(x->ndim > 0 || tg_tensor_numel(idx) == 1, TG_ESHAPE,
             "%s: x is 0-d, so index must hold one value, not %lld", op,
             (long long)tg_tensor_numel(idx));
    if (src) {
        TG_TRY(check_src(op, x, src));
        int64_t want[TG_MAX_DIMS];
        tg__gather_shape(x, want);
        want[dim] = tg_tensor_numel(idx);
        bool ok = src->ndim == x->ndim;
        for (int d = 0; ok && d < src->ndim; d++) ok = src->shape[d] == want[d];
        TG_CHECK(ok, TG_ESHAPE, "%s: src must have x's shape with size %lld at dim %d", op,
                 (long long)want[dim], dim);
    }
    return TG_OK;
}

/* TG_OK when each of the m index values v is in [0, extent), else
 * TG_EINVAL naming the first bad one's position in the index (ishape). */
static int check_index(const char *op, const int64_t *v, int64_t m, int nd,
                       const int64_t *ishape, int dim, int64_t extent)
{
    /* one unsigned comparison per value finds any outside [0, extent) */
    bool bad = false;
    for (int64_t p = 0; p < m; p++) bad |= (uint64_t)v[p] >= (uint64_t)extent;
    for (int64_t p = 0; bad && p < m; p++) {
        if (v[p] >= 0 && v[p] < extent) continue;
        char at[TG_MAX_DIMS * 22 + 2] = "";
        size_t len = 0;
        int64_t rest = p;
        int64_t c[TG_MAX_DIMS];
        for (int d = nd - 1; d >= 0; d--) {
            c[d] = ishape[d] > 0 ? rest % ishape[d] : 0;
            rest = ishape[d] > 0 ? rest / ishape[d] : 0;
        }
        for (int d = 0; d < nd; d++)
            len += (size_t)snprintf(at + len, sizeof at - len, "%s%lld", d ? ", " : "",
                                    (long long)c[d]);
        return tg__error(TG_EINVAL, "%s: index[%s]=%lld is out of range for dim %d of extent %lld",
                         op, at, (long long)v[p], dim, (long long)extent);
    }
    return TG_OK;
}

/* The index values as int64, checked by check_index when `check`: *out is
 * index's own memory when it is contiguous, else a copy in *owned
 * (malloc'd; NULL otherwise) that the caller frees. */
static int read_index(const char *op, const tg_tensor *idx, int nd, const int64_t *ishape,
                      int dim, int64_t extent, bool check, const int64_t **out,
                      int64_t **owned)
{
    const int64_t m = tg_tensor_numel(idx);
    const int64_t *v = (const int64_t *)idx->storage->data + idx->offset;
    int64_t *copy = NULL;
    if (m > 1 && !tg_tensor_is_contiguous(idx)) {
        copy = tg__malloc((size_t)m * sizeof *copy);
        if (!copy) return TG_ENOMEM;
        tg__gather(idx, TG_I64, copy);
        v = copy;
    }
    const int rc = check ? check_index(op, v, m, nd, ishape, dim, extent) : TG_OK;
    if (rc < 0) {
        free(copy);
        return rc;
    }
    *out = v;
    *owned = copy;
    return TG_OK;
}

/* The pick of gather / scatter_add: index's own values and shape, which
 * the kernels check as they read them (k->checks); their refusal is
 * named by check_index. */
static int gather_pick(const char *op, const tg_tensor *x, int dim, const tg_tensor *idx,
                       tg__pick *k, int64_t **owned)
{
    int64_t ishape[TG_MAX_DIMS];
    tg__gather_shape(idx, ishape);
    tg__pick_init(k, x, dim, true, ishape);
    k->checks = true;
    return read_index(op, idx, k->nd, k->ishape, dim, k->xshape[dim], false, &k->v, owned);
}

/* The pick of index_select / index_add: index[j] at every position whose
 * coordinate at dim is j, positions of x's shape with index's length at
 * dim (the result's shape for index_select). */
static int select_pick(const char *op, const tg_tensor *x, int dim, const tg_tensor *idx,
                       tg__pick *k, int64_t **owned)
{
    int64_t ishape[TG_MAX_DIMS];
    const int64_t L = tg_tensor_numel(idx);
    tg__gather_shape(x, ishape);
    const int64_t extent = ishape[dim];
    ishape[dim] = L;
    tg__pick_init(k, x, dim, false, ishape);
    return read_index(op, idx, 1, (int64_t[]){L}, dim, extent, true, &k->v, owned);
}

static int call(const tg_op_schema *op, tg_tensor **out, int n, tg_tensor *x, int dim,
                tg_tensor *idx, tg_tensor *src)
{
    gather_params p = {.dim = dim};
    tg_tensor *in[3] = {x, idx, src};
    return tg_op_call(op, out, n, in, &p, sizeof p);
}

/* in: x, index (gather, index_select) and src (scatter_add, index_add). */
static int gather_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                          const void *params)
{
    (void)n;
    const int dim = ((const gather_params *)params)->dim;
    tg__pick k = {0};
    int64_t *owned = NULL;   /* the index's values when not contiguous */
    TG_TRY(check_gather_args("gather", in[0], dim, in[1], NULL));
    TG_TRY(gather_pick("gather", in[0], dim, in[1], &k, &owned));
    int rc = tg__pick_gather(&k, in[1]->ndim, in[1]->shape, out);
    if (rc == TG_EINVAL) {   /* a value out of range, found in the pick: name it */
        rc = check_index("gather", k.v, k.m, k.nd, k.ishape, dim, k.xshape[dim]);
        TG_ASSERT(rc == TG_EINVAL);
    }
    free(owned);
    if (rc >= 0 && ctx) tg__ctx_save(ctx, in[1]);
    return rc;
}

static int scatter_add_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                               const void *params)
{
    (void)n;
    const int dim = ((const gather_params *)params)->dim;
    tg__pick k = {0};
    int64_t *owned = NULL;   /* the index's values when not contiguous */
    TG_TRY(check_gather_args("scatter_add", in[0], dim, in[1], in[2]));
    TG_TRY(gather_pick("scatter_add", in[0], dim, in[1], &k, &owned));
    int rc = tg__pick_scatter_add(&k, in[2], out);
    if (rc == TG_EINVAL) {   /* a value out of range, found by the adds: name it */
        rc = check_index("scatter_add", k.v, k.m, k.nd, k.ishape, dim, k.xshape[dim]);
        TG_ASSERT(rc == TG_EINVAL);
    }
    free(owned);
    if (rc >= 0 && ctx) tg__ctx_save(ctx, in[1]);
    return rc;
}

static int index_select_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                                const void *params)
{
    (void)n;
    const int dim = ((const gather_params *)params)->dim;
    tg__pick k = {0};
    int64_t *owned = NULL;   /* the index's values when not contiguous */
    TG_TRY(check_select_args("index_select", in[0], dim, in[1], NULL));
    TG_TRY(select_pick("index_select", in[0], dim, in[1], &k, &owned));
    /* a 0-d x gives a 0-d result, as torch's */
    int rc = tg__pick_gather(&k, in[0]->ndim, k.ishape, out);
    free(owned);
    if (rc >= 0 && ctx) tg__ctx_save(ctx, in[1]);
    return rc;
}

static int index_add_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                             const void *params)
{
    (void)n;
    const int dim = ((const gather_params *)params)->dim;
    tg__pick k = {0};
    int64_t *owned = NULL;   /* the index's values when not contiguous */
    TG_TRY(check_select_args("index_add", in[0], dim, in[1], in[2]));
    TG_TRY(select_pick("index_add", in[0], dim, in[1], &k, &owned));
    int rc = tg__pick_scatter_add(&k, in[2], out);
    free(owned);
    if (rc >= 0 && ctx) tg__ctx_save(ctx, in[1]);
    return rc;
}

/* dx = adder(zeros_like(x), dim, index, g): gather's and index_select's. */
static int picked_backward(const tg_op_schema *adder, tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const int dim = ((const gather_params *)tg__ctx_params(ctx))->dim;
    const tg_meta *xm = tg__ctx_input_meta(ctx, 0);
    tg_tensor *idx, *z = NULL;
    TG_TRY(tg__ctx_saved(ctx, 0, &idx));
    TG_TRY(tg_tensor_zeros(&z, g->dtype, xm->ndim, xm->shape));
    int rc = call(adder, &gi[0], 3, z, dim, idx, g);
    tg_tensor_release(z);
    return rc;
}

/* dx = g, dsrc = picker(g, dim, index): scatter_add's and index_add's. */
static int added_backward(const tg_op_schema *picker, tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const int dim = ((const gather_params *)tg__ctx_params(ctx))->dim;
    tg_tensor *idx;
    TG_TRY(tg__ctx_saved(ctx, 0, &idx));
    TG_TRY(call(picker, &gi[2], 2, g, dim, idx, NULL));
    gi[0] = tg_tensor_retain(g);
    return TG_OK;
}

static int gather_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return picked_backward(&scatter_add_op, ctx, g, gi);
}

static int index_select_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return picked_backward(&index_add_op, ctx, g, gi);
}

/* acc += index_add(zeros_like(acc), dim, index, g), in place and at g's
 * cost, not acc's (tg_op_backward_into_fn; tg__index_select_into). */
static int index_select_backward_into(tg_ctx *ctx, tg_tensor *g, tg_tensor *acc)
{
    const int dim = ((const gather_params *)tg__ctx_params(ctx))->dim;
    tg_tensor *idx, *ic = NULL;
    TG_TRY(tg__ctx_saved(ctx, 0, &idx));
    TG_TRY(tg_contiguous(&ic, idx));
    const int rc = tg__index_select_into(acc, g, dim, (const int64_t *)tg_tensor_cdata(ic),
                                         tg_tensor_numel(ic));
    tg_tensor_release(ic);
    return rc;
}

/* acc += scatter_add(zeros_like(acc), dim, index, g), likewise
 * (tg__gather_into). */
static int gather_backward_into(tg_ctx *ctx, tg_tensor *g, tg_tensor *acc)
{
    const int dim = ((const gather_params *)tg__ctx_params(ctx))->dim;
    tg_tensor *idx;
    TG_TRY(tg__ctx_saved(ctx, 0, &idx));
    return tg__gather_into(acc, g, dim, idx);
}

static int scatter_add_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return added_backward(&gather_op, ctx, g, gi);
}

static int index_add_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return added_backward(&index_select_op, ctx, g, gi);
}

/* KEEP, as embedding and flip: the ops run in x's dtype, and a src of
 * another dtype is TG_EDTYPE inside an autocast scope too (torch's CUDA
 * autocast would promote scatter_add's inputs to the widest). */
static const tg_op_schema gather_op = {
    .name = "gather", .arity = 2, .amp = TG_AMP_KEEP, .forward = gather_forward,
    .backward = gather_backward, .double_backward = true,
    .vjp = "dx = scatter_add(zeros_like(x), dim, index, g); the index gets none",
    .backward_into = gather_backward_into};
static const tg_op_schema scatter_add_op = {
    .name = "scatter_add", .arity = 3, .amp = TG_AMP_KEEP, .forward = scatter_add_forward,
    .backward = scatter_add_backward, .double_backward = true,
    .vjp = "dx = g, dsrc = gather(g, dim, index); the index gets none"};
static const tg_op_schema index_select_op = {
    .name = "index_select", .arity = 2, .amp = TG_AMP_KEEP, .forward = index_select_forward,
    .backward = index_select_backward, .double_backward = true,
    .vjp = "dx = index_add(zeros_like(x), dim, index, g); the index gets none",
    .backward_into = index_select_backward_into};
static const tg_op_schema index_add_op = {
    .name = "index_add", .arity = 3, .amp = TG_AMP_KEEP, .forward = index_add_forward,
    .backward = index_add_backward, .double_backward = true,
    .vjp = "dx = g, dsrc = index_select(g, dim, index); the index gets none"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__gather_ops[] = {&gather_op, &scatter_add_op, &index_select_op,
                                              &index_add_op};
static_assert(sizeof tg__gather_ops / sizeof tg__gather_ops[0] == TG__gather_N,
              "src/ops/families.h must count the gather ops");

int tg__gather_public_args(const char *op, tg_tensor **out, const tg_tensor *x, int dim,
                           const tg_tensor *idx, bool has_src, const tg_tensor *src, int *d)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(idx != NULL, TG_EINVAL, "%s: index must not be NULL", op);
    TG_CHECK(!has_src || src != NULL, TG_EINVAL, "%s: src must not be NULL", op);
    const int span = x->ndim > 0 ? x->ndim : 1;
    TG_CHECK(dim >= -span && dim < span, TG_EINVAL,
             "%s: dim=%d is out of range for x with %d dims (expected [%d, %d])", op, dim,
             x->ndim, -span, span - 1);
    *d = dim < 0 ? dim + span : dim;
    return TG_OK;
}

int tg_gather(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *index)
{
    int d = 0;   /* set by tg__gather_public_args on success */
    TG_TRY(tg__gather_public_args("gather", out, x, dim, index, false, NULL, &d));
    return call(&gather_op, out, 2, x, d, index, NULL);
}

int tg_scatter_add(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *index, tg_tensor *src)
{
    int d = 0;   /* set by tg__gather_public_args on success */
    TG_TRY(tg__gather_public_args("scatter_add", out, x, dim, index, true, src, &d));
    return call(&scatter_add_op, out, 3, x, d, index, src);
}

int tg_index_select(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *index)
{
    int d = 0;   /* set by tg__gather_public_args on success */
    TG_TRY(tg__gather_public_args("index_select", out, x, dim, index, false, NULL, &d));
    return call(&index_select_op, out, 2, x, d, index, NULL);
}

int tg_index_add(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *index, tg_tensor *src)
{
    int d = 0;   /* set by tg__gather_public_args on success */
    TG_TRY(tg__gather_public_args("index_add", out, x, dim, index, true, src, &d));
    return call(&index_add_op, out, 3, x, d, index, src);
}
