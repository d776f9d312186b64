/* src/core/grad_pass.c - what the in-place gradient utilities above the ops
 * (gradient clipping in nn, loss unscaling in amp) share: the checks of the
 * parameter list they take and one in-place pass over a tensor's elements in
 * its compute dtype. */
#include "core/core.h"

int tg__check_param_list(const char *fn, int n, tg_tensor *const *params, bool float_grads)
{
    TG_CHECK(n >= 0, TG_EINVAL, "%s: n=%d must be >= 0", fn, n);
    TG_CHECK(n == 0 || params != NULL, TG_EINVAL, "%s: params must not be NULL", fn);
    for (int i = 0; i < n; i++) {
        TG_CHECK(params[i] != NULL, TG_EINVAL, "%s: params[%d] must not be NULL", fn, i);
        for (int j = 0; j < i; j++)   /* its gradient would be changed twice */
            TG_CHECK(params[i] != params[j], TG_EINVAL,
                     "%s: params[%d] is params[%d] again (each parameter at most once)", fn, i,
                     j);
        const tg_tensor *g = params[i]->grad;
        TG_CHECK(!float_grads || !g || tg_dtype_is_float(g->dtype), TG_EDTYPE,
                 "%s: params[%d]'s gradient has dtype %s; float dtypes only", fn, i,
                 tg_dtype_name(g ? g->dtype : TG_F32));
        TG_CHECK(!g || !g->sparse, TG_EUNSUPPORTED,
                 "%s: params[%d]'s gradient is sparse (an Embedding with sparse=true); %s "
                 "takes dense gradients only", fn, i, fn);
    }
    return TG_OK;
}

/* A contiguous tensor already in its compute dtype is passed its own
 * storage; any other goes through a gathered copy that is scattered back,
 * rounding each element once to t's dtype. */
int tg__update_in_compute_dtype(tg_tensor *t, tg__elems_fn fn, void *user)
{
    const int64_t n = tg__numel(t->ndim, t->shape);
    if (n == 0) return TG_OK;
    const tg_dtype cdt = tg__compute_dtype(t->dtype);
    const bool in_place = t->dtype == cdt && tg_tensor_is_contiguous(t);
    void *buf = in_place ? tg_tensor_data(t) : tg__work_alloc((size_t)n * tg_dtype_size(cdt));
    if (!buf) return TG_ENOMEM;
    if (!in_place) tg__gather(t, cdt, buf);
    fn(cdt, buf, n, user);
    if (!in_place) {
        tg__scatter(t, cdt, buf);
        tg__work_free(buf);
    }
    tg__bump_version(t);
    return TG_OK;
}
