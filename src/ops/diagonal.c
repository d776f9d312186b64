/* src/ops/diagonal.c - diagonal (a view) and its adjoint diagonal_embed,
 * and what is made of them: trace, diag, diag_embed.
 *
 * diagonal(x, offset, dim1, dim2) is torch.diagonal: the elements
 * x[..., i, ..., i + offset, ...] (dim1 at i, dim2 at i + offset; for a
 * negative offset dim1 at i - offset, dim2 at i), as a view whose last dim
 * runs along the diagonal and whose other dims are x's without dim1 and
 * dim2: the view's stride there is x's stride at dim1 plus that at dim2.
 * diagonal_embed(g, shape, offset, dim1, dim2) writes g on that diagonal of
 * zeros of the shape.  The two are each other's adjoint, so each is the
 * other's backward and derivatives of any order are these ops (as slice and
 * slice_backward); diag_embed is diagonal_embed of a shape made from x's.
 * diagonal's backward_into adds g into the diagonal of the engine's pending
 * sum, in place, instead of making the zeros. */
#include <assert.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/shape_internal.h"
#include "tapegrad/ops.h"

typedef struct diag_params {
    int64_t offset;
    int dim1, dim2;               /* wrapped, distinct */
    int ndim;                     /* diagonal_embed: the full shape */
    int64_t shape[TG_MAX_DIMS];
} diag_params;

/* The length of the diagonal of (n1, n2) at offset. */
static int64_t diag_len(int64_t n1, int64_t n2, int64_t offset)
{
    const int64_t len = offset >= 0 ? (n2 - offset < n1 ? n2 - offset : n1)
                                    : (n1 + offset < n2 ? n1 + offset : n2);
    return len > 0 ? len : 0;
}

/* The diagonal's view geometry in a tensor of (ndim, shape, strides): its
 * shape and strides (ndim - 1 dims) and the element offset of its start. */
static void diag_geometry(int ndim, const int64_t *shape, const int64_t *strides,
                          const diag_params *p, int64_t *vshape, int64_t *vstrides,
                          int64_t *start)
{
    int k = 0;
    for (int d = 0; d < ndim; d++)
        if (d != p->dim1 && d != p->dim2) {
            vshape[k] = shape[d];
            vstrides[k++] = strides[d];
        }
    const int64_t len = diag_len(shape[p->dim1], shape[p->dim2], p->offset);
    vshape[k] = len;
    vstrides[k] = strides[p->dim1] + strides[p->dim2];
    *start = 0;
    if (len > 0)   /* an empty diagonal may start past the end */
        *start = p->offset >= 0 ? p->offset * strides[p->dim2] : -p->offset * strides[p->dim1];
}

static int diagonal_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                            const void *params)
{
    (void)ctx;
    (void)n;
    const diag_params *p = params;
    tg_tensor *x = in[0];
    int64_t vshape[TG_MAX_DIMS], vstrides[TG_MAX_DIMS], start;
    diag_geometry(x->ndim, x->shape, x->strides, p, vshape, vstrides, &start);
    return tg__shape_view(out, x, x->ndim - 1, vshape, vstrides, x->offset + start);
}

/* zeros of p's shape with g (the diagonal's shape) on the diagonal. */
static int embed_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                         const void *params)
{
    (void)ctx;
    (void)n;
    const diag_params *p = params;
    tg_tensor *g = in[0];
    int64_t vshape[TG_MAX_DIMS], vstrides[TG_MAX_DIMS], strides[TG_MAX_DIMS], start;
    tg__contiguous_strides(p->ndim, p->shape, strides);
    diag_geometry(p->ndim, p->shape, strides, p, vshape, vstrides, &start);
    bool same = g->ndim == p->ndim - 1;
    for (int d = 0; same && d < g->ndim; d++) same = g->shape[d] == vshape[d];
    char sg[96], sv[96];
    TG_CHECK(same, TG_ESHAPE, "diagonal_embed: g is %s, must be %s (the diagonal's shape)",
             tg_shape_str(sg, sizeof sg, g->ndim, g->shape),
             tg_shape_str(sv, sizeof sv, p->ndim - 1, vshape));
    tg_tensor *z = tg__tensor_empty(g->dtype, p->ndim, p->shape), *region = NULL;
    if (!z) return TG_ENOMEM;
    int rc = tg__shape_view(&region, z, p->ndim - 1, vshape, vstrides, start);
    if (rc >= 0) rc = tg__shape_copy_into(region, g);
    tg_tensor_release(region);
    if (rc < 0) {
        tg_tensor_release(z);
        return rc;
    }
    *out = z;
    return TG_OK;
}

static const tg_op_schema diagonal_op, embed_op;

/* dx = diagonal_embed(g) into x's shape. */
static int diagonal_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    diag_params q = *(const diag_params *)tg__ctx_params(ctx);
    const tg_meta *m = tg__ctx_input_meta(ctx, 0);
    q.ndim = m->ndim;
    memcpy(q.shape, m->shape, sizeof q.shape);
    return tg_op_call(&embed_op, &gi[0], 1, &g, &q, sizeof q);
}

/* acc's diagonal += g: the diagonal's elements only, not a whole tensor
 * of zeros (tg_op_backward_into_fn), as the engine's sum would add them. */
static int diagonal_backward_into(tg_ctx *ctx, tg_tensor *g, tg_tensor *acc)
{
    const diag_params *p = tg__ctx_params(ctx);
    int64_t vshape[TG_MAX_DIMS], vstrides[TG_MAX_DIMS], start;
    diag_geometry(acc->ndim, acc->shape, acc->strides, p, vshape, vstrides, &start);
    return tg__shape_add_into(acc, acc->ndim - 1, vshape, vstrides, acc->offset + start, g);
}

/* dg = diagonal(g') with the same offset and dims. */
static int embed_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    diag_params q = *(const diag_params *)tg__ctx_params(ctx);
    return tg_op_call(&diagonal_op, &gi[0], 1, &g, &q, sizeof q);
}

static const tg_op_schema diagonal_op = {
    .name = "diagonal", .arity = 1, .amp = TG_AMP_KEEP, .forward = diagonal_forward,
    .backward = diagonal_backward, .double_backward = true,
    .vjp = "da = diagonal_embed(g): zeros of a's shape with g on the diagonal",
    .backward_into = diagonal_backward_into};
static const tg_op_schema embed_op = {
    .name = "diagonal_embed", .arity = 1, .amp = TG_AMP_KEEP, .forward = embed_forward,
    .backward = embed_backward, .double_backward = true, .vjp = "da = diagonal(g)"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__diagonal_ops[] = {&diagonal_op, &embed_op};
static_assert(sizeof tg__diagonal_ops / sizeof tg__diagonal_ops[0] == TG__diagonal_N,
              "src/ops/families.h must count the diagonal ops");

/* ---- the public calls ---------------------------------------------------------- */

/* Wraps dim1 and dim2 for a tensor of ndim dims (>= 2) into p, checked. */
static int wrap_dims(const char *op, int ndim, int dim1, int dim2, diag_params *p)
{
    TG_CHECK(ndim >= 2, TG_EINVAL, "%s: the tensor has %d dims; a diagonal needs 2 or more",
             op, ndim);
    TG_TRY(tg__shape_wrap_dim(op, "dim1", dim1, ndim, &p->dim1));
    TG_TRY(tg__shape_wrap_dim(op, "dim2", dim2, ndim, &p->dim2));
    TG_CHECK(p->dim1 != p->dim2, TG_EINVAL, "%s: dim1=%d and dim2=%d name one dim; they must "
             "differ", op, dim1, dim2);
    return TG_OK;
}

int tg_diagonal(tg_tensor **out, tg_tensor *x, int64_t offset, int dim1, int dim2)
{
    TG_CHECK(out != NULL, TG_EINVAL, "diagonal: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "diagonal: x must not be NULL");
    diag_params p = {.offset = offset};
    TG_TRY(wrap_dims("diagonal", x->ndim, dim1, dim2, &p));
    return tg_op_call(&diagonal_op, out, 1, &x, &p, sizeof p);
}

int tg_diag_embed(tg_tensor **out, tg_tensor *x, int64_t offset, int dim1, int dim2)
{
    TG_CHECK(out != NULL, TG_EINVAL, "diag_embed: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "diag_embed: x must not be NULL");
    TG_CHECK(x->ndim >= 1 && x->ndim < TG_MAX_DIMS, TG_EINVAL,
             "diag_embed: x has %d dims; it must have 1 to %d", x->ndim, TG_MAX_DIMS - 1);
    diag_params p = {.offset = offset, .ndim = x->ndim + 1};
    TG_TRY(wrap_dims("diag_embed", p.ndim, dim1, dim2, &p));
    TG_CHECK(offset > -(INT64_C(1) << 40) && offset < INT64_C(1) << 40, TG_EINVAL,
             "diag_embed: offset=%lld must be within (-2^40, 2^40)", (long long)offset);
    const int64_t side = x->shape[x->ndim - 1] + (offset < 0 ? -offset : offset);
    /* x's dims but the last, in order, fill the dims other than dim1 and
     * dim2; both of those get side */
    for (int d = 0, k = 0; d < p.ndim; d++)
        p.shape[d] = d == p.dim1 || d == p.dim2 ? side : x->shape[k++];
    TG_TRY(tg__check_shape("diag_embed", p.ndim, p.shape));
    return tg_op_call(&embed_op, out, 1, &x, &p, sizeof p);
}

int tg_diag(tg_tensor **out, tg_tensor *x, int64_t diagonal)
{
    TG_CHECK(out != NULL, TG_EINVAL, "diag: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "diag: x must not be NULL");
    TG_CHECK(x->ndim == 1 || x->ndim == 2, TG_EINVAL,
             "diag: x has %d dims; it must have 1 (a vector to put on a diagonal) or 2 (a "
             "matrix whose diagonal to take)", x->ndim);
    if (x->ndim == 1) return tg_diag_embed(out, x, diagonal, 0, 1);
    /* torch.diag of a matrix is a copy of the diagonal, not a view */
    tg_tensor *v = NULL, *c = NULL;
    tg__lib_enter();
    int rc = tg_diagonal(&v, x, diagonal, 0, 1);
    /* a contiguous diagonal (one element, or none) would come back as itself */
    if (rc >= 0) rc = tg_tensor_is_contiguous(v) ? tg_mul_scalar(&c, v, 1.0) : tg_contiguous(&c, v);
    tg_tensor_release(v);
    tg__lib_leave();
    return tg__scope_capture_pair(out, c, NULL, NULL, rc);
}

int tg_trace(tg_tensor **out, tg_tensor *x)
{
    TG_CHECK(out != NULL, TG_EINVAL, "trace: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "trace: x must not be NULL");
    TG_CHECK(x->ndim == 2, TG_EINVAL, "trace: x has %d dims; it must be a matrix (2)",
             x->ndim);
    tg_tensor *v = NULL, *s = NULL;
    tg__lib_enter();
    int rc = tg_diagonal(&v, x, 0, 0, 1);
    if (rc >= 0) rc = tg_sum(&s, v);
    tg_tensor_release(v);
    tg__lib_leave();
    return tg__scope_capture_pair(out, s, NULL, NULL, rc);
}
