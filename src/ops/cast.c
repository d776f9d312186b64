/* src/ops/cast.c - to_dtype: a differentiable dtype conversion.
 *
 * Floats round to nearest even, integers truncate toward zero and saturate
 * (the rules of tg_dtype_store).  The gradient of a cast is the output gradient
 * cast back to the input's dtype.  Casts to or from an integer dtype are not
 * differentiable and are never recorded.
 *
 * A bf16 cast of a contiguous f32 leaf (a master weight under autocast)
 * records where its values came from
 * (tg_storage's cast_of), so that the bf16 GEMMs pack the master's values
 * once per version instead of each cast's (src/core/gemm_bf16_panels.c).
 */
#include <assert.h>
#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "tapegrad/ops.h"

typedef struct cast_params {
    tg_dtype dt;
} cast_params;

static int to_dtype_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                            const void *params)
{
    tg_dtype dt = ((const cast_params *)params)->dt;
    const tg_tensor *a = in[0];
    TG_CHECK(a != NULL, TG_EINVAL, "to_dtype: input 0 is NULL");
    tg_tensor *res = tg__tensor_uninit(dt, a->ndim, a->shape);   /* the gather writes all */
    if (!res) return TG_ENOMEM;
    tg__gather(a, dt, tg_tensor_data(res));
    tg__bf16_note_cast(res, a);
    *out = res;
    return TG_OK;
}

/* d cast(a) = cast(g) back to a's dtype. */
static int to_dtype_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return tg_to_dtype(&gi[0], g, tg__ctx_input_meta(ctx, 0)->dtype);
}

static const tg_op_schema to_dtype_op = {.name = "to_dtype", .arity = 1, .amp = TG_AMP_KEEP,
                                   .forward = to_dtype_forward, .backward = to_dtype_backward,
                                   .double_backward = true,
                                   .vjp = "da = g cast back to a's dtype"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__cast_ops[] = {&to_dtype_op};
static_assert(sizeof tg__cast_ops / sizeof tg__cast_ops[0] == TG__cast_N,
              "src/ops/families.h must count the cast ops");

int tg_to_dtype(tg_tensor **out, tg_tensor *a, tg_dtype dt)
{
    TG_CHECK(out != NULL, TG_EINVAL, "to_dtype: out is NULL");
    TG_CHECK(a != NULL, TG_EINVAL, "to_dtype: input 0 is NULL");
    TG_CHECK(tg_dtype_get_traits(dt) != NULL, TG_EINVAL, "to_dtype: dt=%d is not a valid dtype",
             (int)dt);
    /* Same dtype: the tensor itself, no node (as PyTorch's .to()). */
    if (a->dtype == dt) {
        *out = tg_tensor_retain(a);
        return tg__scope_capture(out, TG_OK);
    }
    cast_params p = {.dt = dt};
    tg_tensor *in[1] = {a};
    if (tg_dtype_is_float(dt) && tg_dtype_is_float(a->dtype))
        return tg_op_call(&to_dtype_op, out, 1, in, &p, sizeof p);
    /* Integer results carry no gradient: run unrecorded. */
    bool prev = tg_set_grad_enabled(false);
    int rc = tg_op_call(&to_dtype_op, out, 1, in, &p, sizeof p);
    tg_set_grad_enabled(prev);
    return rc;
}
