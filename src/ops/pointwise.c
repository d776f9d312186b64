/* src/ops/pointwise.c - tg__map_f64, the elementwise map in double shared by
 * softplus, clamp, where, the hard activations and the shrinks, and
 * tg__map_forward, the forward of an op that is such a map
 * (src/ops/pointwise_internal.h). */
#include <stdlib.h>

#include "ops/pointwise_internal.h"

int tg__map_f64(tg_tensor **out, const tg_tensor *a, tg_dtype dt,
                double (*f)(double v, const void *user), const void *user)
{
    int64_t n = tg_tensor_numel(a);
    double *v = tg__malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    tg_tensor *r = tg__tensor_uninit(dt, a->ndim, a->shape);
    if (!v || !r) {
        free(v);
        tg_tensor_release(r);
        return TG_ENOMEM;
    }
    tg__gather(a, TG_F64, v);
    for (int64_t i = 0; i < n; i++) v[i] = f(v[i], user);
    tg__scatter(r, TG_F64, v);
    free(v);
    *out = r;
    return TG_OK;
}

int tg__map_forward(tg_ctx *ctx, const char *name, tg_tensor **out, tg_tensor *x,
                    double (*f)(double v, const void *user), const void *params)
{
    TG_TRY(tg__ew_check_float(name, 0, x));
    TG_TRY(tg__map_f64(out, x, x->dtype, f, params));
    if (ctx) tg__ctx_save(ctx, x);
    return TG_OK;
}
