/* src/ops/stack.c - stack(ts, dim) (torch.stack): n tensors of one shape
 * joined along a new dim, each unsqueezed at dim and the n concatenated
 * there.  Those are recorded ops (unsqueeze, cat), so each input's gradient
 * is its slice of g with the new dim squeezed out, differentiable to any
 * order; mixed dtypes promote as in cat. */
#include <stdlib.h>

#include "core/core.h"
#include "tapegrad/ops.h"

static int stack(tg_tensor **out, int n, tg_tensor *const *ts, int dim)
{
    TG_CHECK(n >= 1, TG_EINVAL, "stack: n=%d must be >= 1", n);
    TG_CHECK(ts != NULL, TG_EINVAL, "stack: ts must not be NULL");
    for (int i = 0; i < n; i++) TG_CHECK(ts[i] != NULL, TG_EINVAL, "stack: ts[%d] must not be NULL", i);
    const tg_tensor *t0 = ts[0];
    for (int i = 1; i < n; i++) {
        char si[96], s0[96];
        TG_CHECK(tg_tensor_same_shape(ts[i], t0), TG_ESHAPE, "stack: ts[%d] is %s and ts[0] "
                 "is %s: every tensor must have the same shape", i,
                 tg_shape_str(si, sizeof si, ts[i]->ndim, ts[i]->shape),
                 tg_shape_str(s0, sizeof s0, t0->ndim, t0->shape));
    }
    TG_CHECK(dim >= -t0->ndim - 1 && dim <= t0->ndim, TG_EINVAL, "stack: dim=%d must be in "
             "[%d, %d] for %d-d tensors", dim, -t0->ndim - 1, t0->ndim, t0->ndim);
    const int d = dim < 0 ? dim + t0->ndim + 1 : dim;
    tg_tensor **u = tg__calloc((size_t)n, sizeof *u);
    if (!u) return TG_ENOMEM;
    int rc = TG_OK;
    for (int i = 0; i < n && rc >= 0; i++) rc = tg_unsqueeze(&u[i], ts[i], d);
    if (rc >= 0) rc = tg_cat(out, n, u, d);
    for (int i = 0; i < n; i++) tg_tensor_release(u[i]);
    free(u);
    return rc;
}

/* The ops run on the library's behalf; only the result goes to the
 * caller's scope. */
int tg_stack(tg_tensor **out, int n, tg_tensor *const *ts, int dim)
{
    TG_CHECK(out != NULL, TG_EINVAL, "stack: out must not be NULL");
    tg__lib_enter();
    const int rc = stack(out, n, ts, dim);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
