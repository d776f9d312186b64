/* src/core/tensor_grad.c - a tensor's autograd attributes: requires_grad,
 * whether it is a leaf, its .grad (set, zeroed, zeroed in place for a list)
 * and the name the tape shows for it. */
#include <string.h>

#include "core/core.h"

int tg_tensor_set_requires_grad(tg_tensor *t, bool requires_grad)
{
    TG_CHECK(t != NULL, TG_EINVAL, "tensor_set_requires_grad: t must not be NULL");
    if (t->requires_grad == requires_grad) return TG_OK;   /* nothing changes */
    TG_TRY(tg__refuse_sparse("tensor_set_requires_grad", "t", t));
    char nb[48];
    TG_CHECK(t->grad_fn == NULL, TG_EGRAD,
             "tensor_set_requires_grad: t%s is not a leaf (only leaves may change "
             "requires_grad; use tg_tensor_detach)", tg__name_note(t, false, nb));
    TG_CHECK(!requires_grad || tg_dtype_is_float(t->dtype), TG_EDTYPE,
             "tensor_set_requires_grad: dtype=%s must be a float dtype to require grad",
             tg_dtype_name(t->dtype));
    t->requires_grad = requires_grad;
    return TG_OK;
}

bool tg_tensor_requires_grad(const tg_tensor *t) { return t && t->requires_grad; }
bool tg_tensor_is_leaf(const tg_tensor *t) { return t && t->grad_fn == NULL; }
tg_tensor *tg_tensor_grad(const tg_tensor *t) { return t ? t->grad : NULL; }

int tg_tensor_set_grad(tg_tensor *t, tg_tensor *grad)
{
    char ts[96], gs[96];
    int rc = TG_OK;
    if (!t)
        rc = tg__error(TG_EINVAL, "tensor_set_grad: t must not be NULL");
    else if (grad && !tg_tensor_same_shape(t, grad))
        rc = tg__error(TG_ESHAPE, "tensor_set_grad: grad has shape %s but the tensor %s",
                       tg_shape_str(gs, sizeof gs, grad->ndim, grad->shape),
                       tg_shape_str(ts, sizeof ts, t->ndim, t->shape));
    else if (grad && grad->dtype != t->dtype)
        rc = tg__error(TG_EDTYPE, "tensor_set_grad: grad has dtype %s but the tensor %s",
                       tg_dtype_name(grad->dtype), tg_dtype_name(t->dtype));
    if (rc < 0) {
        tg_tensor_release(grad);   /* it was stolen */
        return rc;
    }
    tg_tensor *old = t->grad;
    t->grad = grad;
    tg_tensor_release(old);
    return TG_OK;
}

void tg_tensor_zero_grad(tg_tensor *t)
{
    if (t) tg_tensor_set_grad(t, NULL);
}

bool tg__grad_is_own(const tg_tensor *g)
{
    return !g->sparse && !g->requires_grad && !g->grad_fn && g->refcount == 1 &&
           g->storage->refcount == 1 && tg_tensor_is_contiguous(g);
}

int tg__zero_grads_in_place(int n, tg_tensor *const *ts)
{
    tg_tensor **fresh = tg__calloc((size_t)(n > 0 ? n : 1), sizeof *fresh);
    if (!fresh) return TG_ENOMEM;
    for (int i = 0; i < n; i++) {   /* a new zero tensor for each shared .grad, first */
        const tg_tensor *g = ts[i] ? ts[i]->grad : NULL;
        if (!g || tg__grad_is_own(g)) continue;
        /* a sparse .grad becomes one with no rows (torch's zero_() of it) */
        fresh[i] = g->sparse ? tg__sparse_empty_like(g) : tg__tensor_empty(g->dtype, g->ndim,
                                                                           g->shape);
        if (!fresh[i]) {
            for (int j = 0; j < i; j++) tg_tensor_release(fresh[j]);
            free(fresh);
            return TG_ENOMEM;
        }
    }
    for (int i = 0; i < n; i++) {
        tg_tensor *g = ts[i] ? ts[i]->grad : NULL;
        if (fresh[i]) {
            tg_tensor_set_grad(ts[i], fresh[i]);   /* same dtype and shape: cannot fail */
        } else if (g) {
            size_t es = tg_dtype_size(g->dtype);   /* +0 is all zero bits in every float dtype */
            memset((char *)g->storage->data + g->offset * (int64_t)es, 0,
                   (size_t)tg_tensor_numel(g) * es);
            tg__bump_version(g);
        }
    }
    free(fresh);
    return TG_OK;
}

void tg_tensor_set_name(tg_tensor *t, const char *name)
{
    if (!t) return;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
    if (t->grad_fn)   /* the tape shows the name after t is gone */
        atomic_load_explicit(&tg__grad_fn_renamed, memory_order_acquire)(t->grad_fn, t);
}

const char *tg_tensor_name(const tg_tensor *t) { return t ? t->name : ""; }
