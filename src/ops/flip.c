/* src/ops/flip.c - flip(x, dims): x with the order of its elements along
 * each of dims reversed (torch.flip), any dtype.
 *
 * The forward copies through a private view of x whose strides along the
 * flipped dims are negated and whose offset starts at their last element,
 * so one strided gather does it.  flip is its own inverse and linear, so
 * its backward is the flip of g: differentiable to any order. */
#include <assert.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "tapegrad/ops.h"

typedef struct flip_params {
    unsigned mask;   /* bit d: dim d is flipped */
} flip_params;

static int flip_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    (void)ctx;
    (void)n;
    const tg_tensor *x = in[0];
    const unsigned mask = ((const flip_params *)params)->mask;
    tg_tensor *y = tg__tensor_uninit(x->dtype, x->ndim, x->shape);
    if (!y) return TG_ENOMEM;
    if (tg__numel(x->ndim, x->shape) > 0) {
        int64_t strides[TG_MAX_DIMS], offset = x->offset;
        for (int d = 0; d < x->ndim; d++) {
            strides[d] = x->strides[d];
            if (mask >> d & 1u) {
                offset += (x->shape[d] - 1) * x->strides[d];
                strides[d] = -x->strides[d];
            }
        }
        tg_tensor *v = tg__tensor_view_of(x->storage, x->dtype, x->ndim, x->shape, strides, offset);
        if (!v) {
            tg_tensor_release(y);
            return TG_ENOMEM;
        }
        tg__gather(v, x->dtype, y->storage->data);
        tg_tensor_release(v);
    }
    *out = y;
    return TG_OK;
}

/* d flip(x) = flip(g) along the same dims. */
static int flip_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const unsigned mask = ((const flip_params *)tg__ctx_params(ctx))->mask;
    int dims[TG_MAX_DIMS], nd = 0;
    for (int d = 0; d < TG_MAX_DIMS; d++)
        if (mask >> d & 1u) dims[nd++] = d;
    return tg_flip(&gi[0], g, nd, dims);
}

static const tg_op_schema flip_op = {.name = "flip", .arity = 1, .amp = TG_AMP_KEEP,
                                     .forward = flip_forward, .backward = flip_backward,
                                     .double_backward = true,
                                     .vjp = "da = flip(g) along the same dims"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__flip_ops[] = {&flip_op};
static_assert(sizeof tg__flip_ops / sizeof tg__flip_ops[0] == TG__flip_N,
              "src/ops/families.h must count the flip ops");

int tg_flip(tg_tensor **out, tg_tensor *x, int ndims, const int *dims)
{
    TG_CHECK(out != NULL, TG_EINVAL, "flip: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "flip: x must not be NULL");
    TG_CHECK(ndims >= 0 && ndims <= TG_MAX_DIMS, TG_EINVAL, "flip: ndims=%d must be in [0, %d]",
             ndims, TG_MAX_DIMS);
    TG_CHECK(ndims == 0 || dims != NULL, TG_EINVAL, "flip: dims is NULL with ndims=%d", ndims);
    /* as torch, a 0-d x takes dim 0 or -1 (and flipping it changes nothing) */
    const int nd = x->ndim, span = nd > 0 ? nd : 1;
    flip_params p = {0};
    for (int i = 0; i < ndims; i++) {
        TG_CHECK(dims[i] >= -span && dims[i] < span, TG_EINVAL,
                 "flip: dims[%d]=%d is out of range for x with %d dims (expected [%d, %d])", i,
                 dims[i], nd, -span, span - 1);
        const int d = dims[i] < 0 ? dims[i] + span : dims[i];
        TG_CHECK(!(p.mask >> d & 1u), TG_EINVAL, "flip: dim %d appears more than once in dims",
                 d);
        p.mask |= 1u << d;
    }
    if (nd == 0) p.mask = 0;
    return tg_op_call(&flip_op, out, 1, (tg_tensor *[]){x}, &p, sizeof p);
}
