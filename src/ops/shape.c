/* src/ops/shape.c - shape ops: reshape, permute, transpose, slice, expand,
 * unsqueeze, squeeze, contiguous (cat and slice_backward: shape_cat.c).
 *
 * Views are new tensors over the input's storage (retained), so they share its
 * version counter: a write through a view bumps the version the base sees.
 * Every backward is again a shape op (or sum_to_shape for expand), so
 * gradients of gradients come for free.  Shape ops accept any dtype. */
#include <assert.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "shape_internal.h"
#include "tapegrad/ops.h"

int tg__shape_wrap_dim(const char *op, const char *arg, int dim, int ndim, int *out)
{
    /* A 0-d tensor takes dims -1 and 0, as in PyTorch (both name "the"
     * dim of a scalar); callers check ndim where that makes no sense. */
    const int span = ndim > 0 ? ndim : 1;
    const int w = tg__dim_index(dim, span);
    TG_CHECK(w >= 0, TG_EINVAL,
             "%s: %s=%d must be in [%d, %d) for a %d-d tensor", op, arg, dim, -span, span, ndim);
    *out = w;
    return TG_OK;
}

int tg__shape_view(tg_tensor **out, const tg_tensor *a, int ndim, const int64_t *shape,
                   const int64_t *strides, int64_t offset)
{
    tg_tensor *v = tg__tensor_view_of(a->storage, a->dtype, ndim, shape, strides, offset);
    if (!v) return tg__error(TG_ENOMEM, "view: out of memory");
    *out = v;
    return TG_OK;
}

bool tg__shape_is_contiguous(const tg_tensor *t)
{
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] == 0) return true;
        if (t->shape[d] != 1 && t->strides[d] != expect) return false;
        expect *= t->shape[d];
    }
    return true;
}

/* ---- reshape -------------------------------------------------------------- */

typedef struct shape_params {
    int ndim;
    int64_t shape[TG_MAX_DIMS];
} shape_params;

/* Resolves a requested shape (one extent may be -1) against numel into res. */
static int resolve_shape(int64_t numel, int ndim, const int64_t *shape, int64_t *res)
{
    int infer = -1;
    int64_t known = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == -1) {
            TG_CHECK(infer < 0, TG_EINVAL, "reshape: shape[%d]=-1 but shape[%d] is -1 already "
                     "(at most one extent may be inferred)", d, infer);
            infer = d;
            continue;
        }
        TG_CHECK(shape[d] >= 0, TG_EINVAL, "reshape: shape[%d]=%lld must be >= 0 or -1", d,
                 (long long)shape[d]);
        TG_CHECK(!__builtin_mul_overflow(known, shape[d], &known), TG_ESHAPE,
                 "reshape: shape overflows int64");
        res[d] = shape[d];
    }
    if (infer >= 0) {
        TG_CHECK(known != 0, TG_ESHAPE, "reshape: cannot infer shape[%d]=-1 when the other "
                 "extents multiply to 0", infer);
        TG_CHECK(numel % known == 0, TG_ESHAPE, "reshape: a has %lld elements, not a multiple "
                 "of %lld (the product of the given extents)", (long long)numel, (long long)known);
        res[infer] = numel / known;
        known = numel;
    }
    TG_CHECK(known == numel, TG_ESHAPE, "reshape: shape has %lld elements but a has %lld",
             (long long)known, (long long)numel);
    return TG_OK;
}

/* Strides that view a's elements, in row-major order, with the new shape, if
 * a's layout allows it.  a's non-unit dims are grouped into chunks: runs of
 * dims where stride[d] == stride[d+1] * shape[d+1], i.e. that walk memory as one
 * dim with the innermost stride.  A new shape is viewable iff its non-unit
 * dims, read from the right, tile every chunk exactly; within a chunk a new
 * dim's stride is the chunk's inner stride times the extents to its right. */
static bool view_strides(const tg_tensor *a, int ndim, const int64_t *shape, int64_t *strides)
{
    if (tg__numel(a->ndim, a->shape) == 0) {
        tg__contiguous_strides(ndim, shape, strides);
        return true;
    }
    int64_t cnum[TG_MAX_DIMS], cstride[TG_MAX_DIMS];
    int nc = 0;
    for (int d = a->ndim - 1; d >= 0; d--) {
        if (a->shape[d] == 1) continue;
        if (nc > 0 && a->strides[d] == cstride[nc - 1] * cnum[nc - 1]) {
            cnum[nc - 1] *= a->shape[d];
        } else {
            cnum[nc] = a->shape[d];
            cstride[nc] = a->strides[d];
            nc++;
        }
    }
    int k = 0;
    int64_t acc = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        if (shape[d] == 1) {
            strides[d] = k < nc ? cstride[k] * acc : 1;
            continue;
        }
        if (k >= nc) return false;
        strides[d] = cstride[k] * acc;
        acc *= shape[d];
        if (acc == cnum[k]) {
            k++;
            acc = 1;
        } else if (acc > cnum[k] || cnum[k] % acc != 0) {
            return false;
        }
    }
    return k == nc;
}

static int reshape_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                           const void *params)
{
    const shape_params *p = params;
    tg_tensor *a = in[0];
    int64_t shape[TG_MAX_DIMS], strides[TG_MAX_DIMS];
    TG_TRY(resolve_shape(tg__numel(a->ndim, a->shape), p->ndim, p->shape, shape));
    if (view_strides(a, p->ndim, shape, strides))
        return tg__shape_view(out, a, p->ndim, shape, strides, a->offset);
    tg_tensor *c = tg__tensor_empty(a->dtype, p->ndim, shape);
    if (!c) return TG_ENOMEM;
    tg__gather(a, a->dtype, (char *)c->storage->data + c->offset * tg_dtype_size(c->dtype));
    *out = c;
    return TG_OK;
}

static int reshape_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in)
{
    const tg_meta *m = tg__ctx_input_meta(ctx, 0);
    return tg_reshape(&grad_in[0], g, m->ndim, m->shape);
}

static const tg_op_schema reshape_schema = {
    .name = "reshape", .arity = 1, .amp = TG_AMP_KEEP, .forward = reshape_forward,
    .backward = reshape_backward, .double_backward = true,
    .vjp = "da = reshape(g, shape of a)",
};

/* Copies a caller's (ndim, shape) into params after checking the pointers. */
static int shape_args(const char *op, tg_tensor **out, const tg_tensor *a, int ndim,
                      const int64_t *shape, shape_params *p)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(a != NULL, TG_EINVAL, "%s: a must not be NULL", op);
    TG_CHECK(ndim >= 0 && ndim <= TG_MAX_DIMS, TG_EINVAL, "%s: ndim=%d must be in [0, %d]", op,
             ndim, TG_MAX_DIMS);
    TG_CHECK(ndim == 0 || shape != NULL, TG_EINVAL, "%s: shape must not be NULL", op);
    memset(p, 0, sizeof *p);
    p->ndim = ndim;
    if (ndim > 0) memcpy(p->shape, shape, (size_t)ndim * sizeof *shape);
    return TG_OK;
}

int tg_reshape(tg_tensor **out, tg_tensor *a, int ndim, const int64_t *shape)
{
    shape_params p;
    TG_TRY(shape_args("reshape", out, a, ndim, shape, &p));
    tg_tensor *in[1] = {a};
    return tg_op_call(&reshape_schema, out, 1, in, &p, sizeof p);
}

/* ---- permute / transpose --------------------------------------------------- */

typedef struct perm_params {
    int perm[TG_MAX_DIMS];
} perm_params;

static int permute_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                           const void *params)
{
    const perm_params *p = params;
    tg_tensor *a = in[0];
    int64_t shape[TG_MAX_DIMS], strides[TG_MAX_DIMS];
    bool seen[TG_MAX_DIMS] = {false};
    for (int i = 0; i < a->ndim; i++) {
        int d = 0;
        char arg[24];   /* "perm[" + any int + "]" */
        snprintf(arg, sizeof arg, "perm[%d]", i);
        TG_TRY(tg__shape_wrap_dim("permute", arg, p->perm[i], a->ndim, &d));
        TG_CHECK(!seen[d], TG_EINVAL, "permute: perm[%d]=%d repeats a dim (perm must be a "
                 "permutation of 0..%d)", i, p->perm[i], a->ndim - 1);
        seen[d] = true;
        shape[i] = a->shape[d];
        strides[i] = a->strides[d];
    }
    return tg__shape_view(out, a, a->ndim, shape, strides, a->offset);
}

static int permute_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in)
{
    const perm_params *p = tg__ctx_params(ctx);
    int nd = tg__ctx_input_meta(ctx, 0)->ndim;
    int inv[TG_MAX_DIMS] = {0};
    /* out dim i is input dim perm[i], so input dim perm[i] is out dim i. */
    for (int i = 0; i < nd; i++) inv[p->perm[i] < 0 ? p->perm[i] + nd : p->perm[i]] = i;
    return tg_permute(&grad_in[0], g, inv);
}

static const tg_op_schema permute_schema = {
    .name = "permute", .arity = 1, .amp = TG_AMP_KEEP, .forward = permute_forward,
    .backward = permute_backward, .double_backward = true,
    .vjp = "da = permute(g, inverse permutation)",
};

int tg_permute(tg_tensor **out, tg_tensor *a, const int *perm)
{
    TG_CHECK(out != NULL, TG_EINVAL, "permute: out must not be NULL");
    TG_CHECK(a != NULL, TG_EINVAL, "permute: a must not be NULL");
    TG_CHECK(a->ndim == 0 || perm != NULL, TG_EINVAL, "permute: perm must not be NULL");
    perm_params p = {{0}};
    if (a->ndim > 0) memcpy(p.perm, perm, (size_t)a->ndim * sizeof *perm);
    tg_tensor *in[1] = {a};
    return tg_op_call(&permute_schema, out, 1, in, &p, sizeof p);
}

typedef struct transpose_params {
    int dim0, dim1;
} transpose_params;

static int transpose_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                             const void *params)
{
    const transpose_params *p = params;
    tg_tensor *a = in[0];
    int d0 = 0, d1 = 0;
    TG_TRY(tg__shape_wrap_dim("transpose", "dim0", p->dim0, a->ndim, &d0));
    TG_TRY(tg__shape_wrap_dim("transpose", "dim1", p->dim1, a->ndim, &d1));
    int64_t shape[TG_MAX_DIMS], strides[TG_MAX_DIMS];
    memcpy(shape, a->shape, sizeof shape);
    memcpy(strides, a->strides, sizeof strides);
    shape[d0] = a->shape[d1];
    shape[d1] = a->shape[d0];
    strides[d0] = a->strides[d1];
    strides[d1] = a->strides[d0];
    return tg__shape_view(out, a, a->ndim, shape, strides, a->offset);
}

static int transpose_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in)
{
    const transpose_params *p = tg__ctx_params(ctx);
    return tg_transpose(&grad_in[0], g, p->dim0, p->dim1);
}

static const tg_op_schema transpose_schema = {
    .name = "transpose", .arity = 1, .amp = TG_AMP_KEEP, .forward = transpose_forward,
    .backward = transpose_backward, .double_backward = true,
    .vjp = "da = transpose(g) over the same two dims",
};

int tg_transpose(tg_tensor **out, tg_tensor *a, int dim0, int dim1)
{
    TG_CHECK(out != NULL, TG_EINVAL, "transpose: out must not be NULL");
    TG_CHECK(a != NULL, TG_EINVAL, "transpose: a must not be NULL");
    transpose_params p = {dim0, dim1};
    tg_tensor *in[1] = {a};
    return tg_op_call(&transpose_schema, out, 1, in, &p, sizeof p);
}

/* ---- expand ------------------------------------------------------------------ */

static int expand_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                          const void *params)
{
    const shape_params *p = params;
    tg_tensor *a = in[0];
    char sa[96], sb[96];
    TG_CHECK(p->ndim >= a->ndim, TG_ESHAPE, "expand: a is %s and cannot expand to %s with fewer "
             "dims", tg_shape_str(sa, sizeof sa, a->ndim, a->shape),
             tg_shape_str(sb, sizeof sb, p->ndim, p->shape));
    int lead = p->ndim - a->ndim;
    int64_t shape[TG_MAX_DIMS], strides[TG_MAX_DIMS];
    for (int d = 0; d < p->ndim; d++) {
        int64_t want = p->shape[d];
        TG_CHECK(want >= -1, TG_EINVAL, "expand: shape[%d]=%lld must be >= 0 or -1 (keep the "
                 "extent)", d, (long long)want);
        if (d < lead) {
            /* A new leading dim repeats all of a: stride 0. */
            TG_CHECK(want >= 0, TG_ESHAPE, "expand: shape[%d]=%lld must be >= 0 for a new "
                     "leading dim", d, (long long)want);
            shape[d] = want;
            strides[d] = 0;
            continue;
        }
        int64_t have = a->shape[d - lead];
        TG_CHECK(want == -1 || want == have || (have == 1 && want >= 0), TG_ESHAPE,
                 "expand: a is %s and cannot expand to %s: dim %d has extent %lld, not 1",
                 tg_shape_str(sa, sizeof sa, a->ndim, a->shape),
                 tg_shape_str(sb, sizeof sb, p->ndim, p->shape), d, (long long)have);
        shape[d] = want == -1 ? have : want;
        strides[d] = shape[d] == have ? a->strides[d - lead] : 0;
    }
    /* A view holds no memory, but every op on it counts its elements. */
    TG_TRY(tg__check_shape("expand", p->ndim, shape));
    return tg__shape_view(out, a, p->ndim, shape, strides, a->offset);
}

static int expand_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in)
{
    const tg_meta *m = tg__ctx_input_meta(ctx, 0);
    return tg_sum_to_shape(&grad_in[0], g, m->ndim, m->shape);
}

static const tg_op_schema expand_schema = {
    .name = "expand", .arity = 1, .amp = TG_AMP_KEEP, .forward = expand_forward,
    .backward = expand_backward, .double_backward = true,
    .vjp = "da = g summed over the expanded dims",
};

int tg_expand(tg_tensor **out, tg_tensor *a, int ndim, const int64_t *shape)
{
    shape_params p;
    TG_TRY(shape_args("expand", out, a, ndim, shape, &p));
    tg_tensor *in[1] = {a};
    return tg_op_call(&expand_schema, out, 1, in, &p, sizeof p);
}

/* ---- unsqueeze / squeeze --------------------------------------------------- */

typedef struct dim_params {
    int dim;
} dim_params;

static int unsqueeze_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                             const void *params)
{
    tg_tensor *a = in[0];
    int d = 0;
    const int dim = ((const dim_params *)params)->dim;
    TG_CHECK(a->ndim < TG_MAX_DIMS, TG_EINVAL, "unsqueeze: a already has %d dims (the maximum)",
             TG_MAX_DIMS);
    /* The new dim goes before dim d of a, or last for d = ndim: as in
     * PyTorch, dim is in [-ndim-1, ndim] and a negative one counts from the
     * end of the result. */
    TG_CHECK(dim >= -a->ndim - 1 && dim <= a->ndim, TG_EINVAL,
             "unsqueeze: dim=%d must be in [%d, %d] for a %d-d tensor", dim, -a->ndim - 1,
             a->ndim, a->ndim);
    d = dim < 0 ? dim + a->ndim + 1 : dim;
    int64_t shape[TG_MAX_DIMS], strides[TG_MAX_DIMS];
    for (int i = 0, j = 0; i <= a->ndim; i++) {
        if (i == d) {
            shape[i] = 1;
            /* Any stride works for an extent of 1; this one keeps it contiguous. */
            strides[i] = d < a->ndim ? a->shape[d] * a->strides[d] : 1;
            continue;
        }
        shape[i] = a->shape[j];
        strides[i] = a->strides[j++];
    }
    return tg__shape_view(out, a, a->ndim + 1, shape, strides, a->offset);
}

static int squeeze_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                           const void *params)
{
    tg_tensor *a = in[0];
    int d = 0;
    TG_TRY(tg__shape_wrap_dim("squeeze", "dim", ((const dim_params *)params)->dim, a->ndim, &d));
    if (a->ndim == 0 || a->shape[d] != 1)
        return tg__shape_view(out, a, a->ndim, a->shape, a->strides, a->offset);
    int64_t shape[TG_MAX_DIMS], strides[TG_MAX_DIMS];
    for (int i = 0, j = 0; i < a->ndim; i++) {
        if (i == d) continue;
        shape[j] = a->shape[i];
        strides[j++] = a->strides[i];
    }
    return tg__shape_view(out, a, a->ndim - 1, shape, strides, a->offset);
}

/* unsqueeze, squeeze and contiguous keep the elements in order: reshape back. */
static int reshape_back(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in)
{
    const tg_meta *m = tg__ctx_input_meta(ctx, 0);
    return tg_reshape(&grad_in[0], g, m->ndim, m->shape);
}

static const tg_op_schema unsqueeze_schema = {
    .name = "unsqueeze", .arity = 1, .amp = TG_AMP_KEEP, .forward = unsqueeze_forward,
    .backward = reshape_back, .double_backward = true,
    .vjp = "da = squeeze(g)",
};
static const tg_op_schema squeeze_schema = {
    .name = "squeeze", .arity = 1, .amp = TG_AMP_KEEP, .forward = squeeze_forward,
    .backward = reshape_back, .double_backward = true,
    .vjp = "da = unsqueeze(g)",
};

static int dim_call(const tg_op_schema *op, tg_tensor **out, tg_tensor *a, int dim)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op->name);
    TG_CHECK(a != NULL, TG_EINVAL, "%s: a must not be NULL", op->name);
    dim_params p = {dim};
    tg_tensor *in[1] = {a};
    return tg_op_call(op, out, 1, in, &p, sizeof p);
}

int tg_unsqueeze(tg_tensor **out, tg_tensor *a, int dim)
{
    return dim_call(&unsqueeze_schema, out, a, dim);
}

int tg_squeeze(tg_tensor **out, tg_tensor *a, int dim)
{
    return dim_call(&squeeze_schema, out, a, dim);
}

/* ---- contiguous ---------------------------------------------------------------- */

/* Unrecorded, an already contiguous a is returned itself (retained).  When the
 * op is recorded the output must be a distinct tensor (it gets a grad_fn), so
 * it is a view with a's geometry: still no copy. */
static int contiguous_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                              const void *params)
{
    tg_tensor *a = in[0];
    if (tg__shape_is_contiguous(a)) {
        if (ctx) return tg__shape_view(out, a, a->ndim, a->shape, a->strides, a->offset);
        *out = tg_tensor_retain(a);
        return TG_OK;
    }
    tg_tensor *c = tg__tensor_empty(a->dtype, a->ndim, a->shape);
    if (!c) return TG_ENOMEM;
    tg__gather(a, a->dtype, (char *)c->storage->data + c->offset * tg_dtype_size(c->dtype));
    *out = c;
    return TG_OK;
}

static const tg_op_schema contiguous_schema = {
    .name = "contiguous", .arity = 1, .amp = TG_AMP_KEEP, .forward = contiguous_forward,
    .backward = reshape_back, .double_backward = true,
    .vjp = "da = g",
};

int tg_contiguous(tg_tensor **out, tg_tensor *a)
{
    TG_CHECK(out != NULL, TG_EINVAL, "contiguous: out must not be NULL");
    TG_CHECK(a != NULL, TG_EINVAL, "contiguous: a must not be NULL");
    tg_tensor *in[1] = {a};
    return tg_op_call(&contiguous_schema, out, 1, in, NULL, 0);
}

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__shape_ops[] = {&reshape_schema, &permute_schema, &transpose_schema, &expand_schema, &unsqueeze_schema, &squeeze_schema, &contiguous_schema};
static_assert(sizeof tg__shape_ops / sizeof tg__shape_ops[0] == TG__shape_N,
              "src/ops/families.h must count the shape ops");
