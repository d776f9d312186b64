/* src/ops/shape_cat.c - slice (a view), its adjoint slice_backward, and cat.
 *
 * slice and slice_backward are each other's backward: slice picks elements
 * start, start+step, ... of one dim; slice_backward embeds a tensor of those
 * elements into zeros of the full shape.  cat's backward slices the gradient. */
#include <assert.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "shape_internal.h"
#include "tapegrad/ops.h"

int tg__shape_copy_into(tg_tensor *dst, const tg_tensor *src)
{
    int64_t n = tg__numel(src->ndim, src->shape);
    if (n == 0) return TG_OK;
    void *buf = tg__malloc((size_t)n * tg_dtype_size(src->dtype));
    if (!buf) return TG_ENOMEM;
    tg__gather(src, src->dtype, buf);
    tg__scatter(dst, src->dtype, buf);
    free(buf);
    return TG_OK;
}

/* ---- slice ------------------------------------------------------------------- */

typedef struct slice_params {
    int dim;
    int64_t start, end, step;
} slice_params;

/* Python slice rules for step >= 1: a negative start/end counts from the
 * end, then both clamp to [0, size]; the elements are start + i*step < end. */
static void slice_range(int64_t size, int64_t start, int64_t end, int64_t step, int64_t *first,
                        int64_t *len)
{
    if (start < 0) start += size;
    if (end < 0) end += size;
    start = start < 0 ? 0 : start > size ? size : start;
    end = end < 0 ? 0 : end > size ? size : end;
    *first = start;
    *len = end > start ? (end - start - 1) / step + 1 : 0;
}

static int slice_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                         const void *params)
{
    const slice_params *p = params;
    tg_tensor *a = in[0];
    int d;
    TG_CHECK(a->ndim > 0, TG_EINVAL, "slice: a 0-d tensor cannot be sliced");
    TG_TRY(tg__shape_wrap_dim("slice", "dim", p->dim, a->ndim, &d));
    TG_CHECK(p->step >= 1, TG_EINVAL, "slice: step=%lld must be >= 1", (long long)p->step);
    int64_t first, len, shape[TG_MAX_DIMS], strides[TG_MAX_DIMS];
    slice_range(a->shape[d], p->start, p->end, p->step, &first, &len);
    memcpy(shape, a->shape, sizeof shape);
    memcpy(strides, a->strides, sizeof strides);
    shape[d] = len;
    /* With two elements or more, step < size and the product fits; with one
     * or none the stride is never used (and a huge step would overflow). */
    if (len > 1) strides[d] = a->strides[d] * p->step;
    return tg__shape_view(out, a, a->ndim, shape, strides, a->offset + first * a->strides[d]);
}

typedef struct slice_bw_params {
    int dim;
    int64_t first, step;
    int ndim;                       /* the full (sliced) tensor's geometry */
    int64_t shape[TG_MAX_DIMS];
} slice_bw_params;

/* out is zeros of p->shape with g written at out[..., first + i*step, ...]. */
static int slice_bw_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                            const void *params)
{
    const slice_bw_params *p = params;
    tg_tensor *g = in[0];
    TG_CHECK(g->ndim == p->ndim, TG_ESHAPE, "slice_backward: g has %d dims, expected %d",
             g->ndim, p->ndim);
    tg_tensor *z = tg__tensor_empty(g->dtype, p->ndim, p->shape);
    if (!z) return TG_ENOMEM;
    int64_t strides[TG_MAX_DIMS];
    tg__contiguous_strides(p->ndim, p->shape, strides);
    int64_t offset = p->first * strides[p->dim];
    if (g->shape[p->dim] > 1) strides[p->dim] *= p->step;   /* as in slice_forward */
    tg_tensor *region = NULL;
    int rc = tg__shape_view(&region, z, g->ndim, g->shape, strides, offset);
    if (rc == TG_OK) rc = tg__shape_copy_into(region, g);
    tg_tensor_release(region);
    if (rc < 0) {
        tg_tensor_release(z);
        return rc;
    }
    *out = z;
    return TG_OK;
}

static int slice_bw_call(tg_tensor **out, tg_tensor *g, const slice_bw_params *p);

/* slice_backward's params for the recorded slice ctx. */
static slice_bw_params slice_bw_of(const tg_ctx *ctx)
{
    const slice_params *p = tg__ctx_params(ctx);
    const tg_meta *m = tg__ctx_input_meta(ctx, 0);
    slice_bw_params q = {0};
    int64_t len;
    q.dim = p->dim < 0 ? p->dim + m->ndim : p->dim;
    q.step = p->step;
    q.ndim = m->ndim;
    memcpy(q.shape, m->shape, sizeof q.shape);
    slice_range(m->shape[q.dim], p->start, p->end, p->step, &q.first, &len);
    return q;
}

static int slice_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in)
{
    const slice_bw_params q = slice_bw_of(ctx);
    return slice_bw_call(&grad_in[0], g, &q);
}

/* acc[slice] += g: the elements of the slice only (tg_op_backward_into_fn). */
int tg__shape_add_into(tg_tensor *acc, int ndim, const int64_t *shape, const int64_t *strides,
                       int64_t offset, tg_tensor *g)
{
    tg_tensor *region = NULL, *sum = NULL;
    int rc = tg__shape_view(&region, acc, ndim, shape, strides, offset);
    if (rc == TG_OK) rc = tg_add(&sum, region, g);
    if (rc == TG_OK) rc = tg__shape_copy_into(region, sum);
    tg_tensor_release(sum);
    tg_tensor_release(region);
    return rc;
}

static int slice_backward_into(tg_ctx *ctx, tg_tensor *g, tg_tensor *acc)
{
    const slice_bw_params q = slice_bw_of(ctx);
    int64_t strides[TG_MAX_DIMS];
    tg__contiguous_strides(q.ndim, q.shape, strides);
    const int64_t offset = q.first * strides[q.dim];
    if (g->shape[q.dim] > 1) strides[q.dim] *= q.step;   /* as in slice_bw_forward */
    return tg__shape_add_into(acc, g->ndim, g->shape, strides, offset, g);
}

/* The adjoint of embedding is picking the same elements back: a slice. */
static int slice_bw_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in)
{
    const slice_bw_params *p = tg__ctx_params(ctx);
    int64_t len = tg__ctx_input_meta(ctx, 0)->shape[p->dim];
    int64_t end = len > 0 ? p->first + (len - 1) * p->step + 1 : p->first;
    return tg_slice(&grad_in[0], g, p->dim, p->first, end, p->step);
}

static const tg_op_schema slice_schema = {
    .name = "slice", .arity = 1, .amp = TG_AMP_KEEP, .forward = slice_forward,
    .backward = slice_backward, .double_backward = true,
    .vjp = "da = zeros of a's shape with g in the slice", .backward_into = slice_backward_into,
};
static const tg_op_schema slice_bw_schema = {
    .name = "slice_backward", .arity = 1, .amp = TG_AMP_KEEP, .forward = slice_bw_forward,
    .backward = slice_bw_backward, .double_backward = true,
    .vjp = "da = the slice of g",
};

static int slice_bw_call(tg_tensor **out, tg_tensor *g, const slice_bw_params *p)
{
    tg_tensor *in[1] = {g};
    return tg_op_call(&slice_bw_schema, out, 1, in, p, sizeof *p);
}

int tg_slice(tg_tensor **out, tg_tensor *a, int dim, int64_t start, int64_t end, int64_t step)
{
    TG_CHECK(out != NULL, TG_EINVAL, "slice: out must not be NULL");
    TG_CHECK(a != NULL, TG_EINVAL, "slice: a must not be NULL");
    slice_params p = {dim, start, end, step};
    tg_tensor *in[1] = {a};
    return tg_op_call(&slice_schema, out, 1, in, &p, sizeof p);
}

/* ---- cat ------------------------------------------------------------------------- */

typedef struct cat_params {
    int dim;
    tg_dtype dt;   /* the dtype of the whole cat (see tg_cat) */
} cat_params;

/* The dtype torch.cat gives ts[0..n): floats promote among themselves (as
 * the PROMOTE policy, which has already cast them when this runs in the
 * forward) and win over integers; integers promote to the widest signed one,
 * u8 with i32/i64 to that.  u8 with i8 (and nothing wider) is i16 in torch,
 * which tapegrad does not have: TG_EDTYPE. */
static int cat_dtype(int n, tg_tensor *const *ts, tg_dtype *out)
{
    tg_dtype dt = ts[0]->dtype;
    int first_u8 = -1, first_i8 = -1;
    for (int i = 0; i < n; i++) {
        tg_dtype t = ts[i]->dtype;
        if (t == TG_U8 && first_u8 < 0) first_u8 = i;
        if (t == TG_I8 && first_i8 < 0) first_i8 = i;
        if (t == dt) continue;
        if (tg_dtype_is_float(t) || tg_dtype_is_float(dt)) dt = tg_promote_dtypes(dt, t);
        else if (tg_dtype_size(t) > tg_dtype_size(dt) || dt == TG_U8) dt = t;
    }
    if (dt == TG_I8 && first_u8 >= 0) {
        const int i = first_u8 > first_i8 ? first_u8 : first_i8;
        const int j = first_u8 > first_i8 ? first_i8 : first_u8;
        return tg__error(TG_EDTYPE, "cat: ts[%d] is %s and ts[%d] is %s: torch promotes them to "
                         "i16, which tapegrad does not have (convert one first)", i,
                         tg_dtype_name(ts[i]->dtype), j, tg_dtype_name(ts[j]->dtype));
    }
    *out = dt;
    return TG_OK;
}

/* Checks n >= 1 tensors of one ndim whose extents agree but on dim; *dout
 * gets the normalised dim and *total the output's extent along it. */
static int cat_check(int n, tg_tensor *const *ts, int dim, int *dout, int64_t *total)
{
    TG_CHECK(n >= 1, TG_EINVAL, "cat: n=%d must be >= 1", n);
    TG_CHECK(ts != NULL, TG_EINVAL, "cat: ts must not be NULL");
    for (int i = 0; i < n; i++)
        TG_CHECK(ts[i] != NULL, TG_EINVAL, "cat: ts[%d] must not be NULL", i);
    const tg_tensor *t0 = ts[0];
    for (int i = 0; i < n; i++)
        TG_CHECK(ts[i]->ndim > 0, TG_EINVAL, "cat: ts[%d] is 0-d (a scalar cannot be "
                 "concatenated; unsqueeze it)", i);
    TG_TRY(tg__shape_wrap_dim("cat", "dim", dim, t0->ndim, dout));
    *total = 0;
    for (int i = 0; i < n; i++) {
        const tg_tensor *t = ts[i];
        char s0[96], si[96];
        bool ok = t->ndim == t0->ndim;
        for (int d = 0; ok && d < t->ndim; d++) ok = d == *dout || t->shape[d] == t0->shape[d];
        TG_CHECK(ok, TG_ESHAPE, "cat: ts[%d] is %s and ts[0] is %s: extents must agree but "
                 "on dim %d", i, tg_shape_str(si, sizeof si, t->ndim, t->shape),
                 tg_shape_str(s0, sizeof s0, t0->ndim, t0->shape), *dout);
        *total += t->shape[*dout];
    }
    return TG_OK;
}

static int cat_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    int d;
    int64_t total, shape[TG_MAX_DIMS];
    const cat_params *p = params;
    /* Float inputs arrive cast to one dtype by the PROMOTE policy.  A cat of
     * integers only (nothing to differentiate) takes the whole cat's dtype:
     * a chunk of a long cat (tg_cat) may hold a pair that alone does not
     * promote (u8 and i8), and each chunk must come out in that dtype. */
    tg_dtype dt = p->dt;
    TG_TRY(cat_check(n, in, p->dim, &d, &total));
    if (tg_dtype_is_float(dt)) TG_TRY(cat_dtype(n, in, &dt));
    memcpy(shape, in[0]->shape, sizeof shape);
    shape[d] = total;
    tg_tensor *c = tg__tensor_empty(dt, in[0]->ndim, shape);
    if (!c) return TG_ENOMEM;
    /* Input i lands in the view of c at offset (sum of earlier extents) along d. */
    int64_t at = 0;
    int rc = TG_OK;
    for (int i = 0; i < n && rc == TG_OK; i++) {
        tg_tensor *region = NULL;
        rc = tg__shape_view(&region, c, c->ndim, in[i]->shape, c->strides,
                            c->offset + at * c->strides[d]);
        if (rc == TG_OK) rc = tg__shape_copy_into(region, in[i]);
        tg_tensor_release(region);
        at += in[i]->shape[d];
    }
    if (rc < 0) {
        tg_tensor_release(c);
        return rc;
    }
    *out = c;
    return TG_OK;
}

static int cat_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in)
{
    int dim = ((const cat_params *)tg__ctx_params(ctx))->dim;
    int d = dim < 0 ? dim + g->ndim : dim;
    int64_t at = 0;
    for (int i = 0; i < ctx->n_inputs; i++) {
        int64_t len = tg__ctx_input_meta(ctx, i)->shape[d];
        if (tg__ctx_needs_grad(ctx, i)) TG_TRY(tg_slice(&grad_in[i], g, d, at, at + len, 1));
        at += len;
    }
    return TG_OK;
}

static const tg_op_schema cat_schema = {
    .name = "cat", .arity = -1, .amp = TG_AMP_PROMOTE, .forward = cat_forward,
    .backward = cat_backward, .double_backward = true,
    .vjp = "each input gets the slice of g where it was placed",
};

static int cat_call(tg_tensor **out, int n, tg_tensor *const *ts, int dim);

/* Beyond TG_NODE_MAX_INPUTS tensors the cat is several ops, run on the
 * library's behalf; only the result goes to the caller's scope. */
int tg_cat(tg_tensor **out, int n, tg_tensor *const *ts, int dim)
{
    TG_CHECK(out != NULL, TG_EINVAL, "cat: out must not be NULL");
    tg__lib_enter();
    const int rc = cat_call(out, n, ts, dim);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

static int cat_call(tg_tensor **out, int n, tg_tensor *const *ts, int dim)
{
    int d;
    int64_t total;
    tg_dtype dt;
    TG_TRY(cat_check(n, ts, dim, &d, &total));
    TG_TRY(cat_dtype(n, ts, &dt));
    cat_params p = {d, dt};
    if (n <= TG_NODE_MAX_INPUTS) return tg_op_call(&cat_schema, out, n, ts, &p, sizeof p);
    /* A node has at most TG_NODE_MAX_INPUTS inputs: cat the first ones, then
     * cat that with the rest (recursively). */
    tg_tensor *parts[TG_NODE_MAX_INPUTS];
    tg_tensor *head = NULL;
    TG_TRY(tg_op_call(&cat_schema, &head, TG_NODE_MAX_INPUTS - 1, ts, &p, sizeof p));
    parts[0] = head;
    int rest = n - (TG_NODE_MAX_INPUTS - 1);
    int rc;
    if (rest <= TG_NODE_MAX_INPUTS - 1) {
        memcpy(parts + 1, ts + TG_NODE_MAX_INPUTS - 1, (size_t)rest * sizeof *ts);
        rc = tg_op_call(&cat_schema, out, rest + 1, parts, &p, sizeof p);
    } else {
        tg_tensor *tail = NULL;
        rc = cat_call(&tail, rest, ts + TG_NODE_MAX_INPUTS - 1, d);
        parts[1] = tail;
        if (rc == TG_OK) rc = tg_op_call(&cat_schema, out, 2, parts, &p, sizeof p);
        tg_tensor_release(tail);
    }
    tg_tensor_release(head);
    return rc;
}

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__slice_cat_ops[] = {&slice_schema, &slice_bw_schema, &cat_schema};
static_assert(sizeof tg__slice_cat_ops / sizeof tg__slice_cat_ops[0] == TG__slice_cat_N,
              "src/ops/families.h must count the slice_cat ops");
