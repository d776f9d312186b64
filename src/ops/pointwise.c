/* src/ops/pointwise.c - tg__map_f64, the elementwise map in double shared by
 * softplus, clamp, where, the hard activations and the shrinks,
 * tg__map_forward, the forward of an op that is such a map, and
 * tg__grad_in_f32, a half input's gradient taken in f32
 * (src/ops/pointwise_internal.h). */
#include <stdlib.h>

#include "ops/pointwise_internal.h"
#include "tapegrad/ops.h"

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

int tg__grad_in_f32(int (*grad)(tg_tensor *x, tg_tensor *g, const void *p, tg_tensor **gi),
                    const void *p, tg_tensor *x, tg_tensor *g, tg_tensor **gi)
{
    if (!tg__dtype_is_half(x->dtype)) return grad(x, g, p, gi);
    tg_tensor *xf = NULL, *gf = NULL, *r = NULL;
    int rc;
    TG_TRY_GOTO(tg_to_dtype(&xf, x, TG_F32));
    TG_TRY_GOTO(tg_to_dtype(&gf, g, TG_F32));
    TG_TRY_GOTO(grad(xf, gf, p, &r));
    TG_TRY_GOTO(tg_to_dtype(gi, r, x->dtype));
done:
    tg_tensor_release(xf);
    tg_tensor_release(gf);
    tg_tensor_release(r);
    return rc;
}

int tg__map_forward(tg_ctx *ctx, const char *name, tg_tensor **out, tg_tensor *x,
                    double (*f)(double v, const void *user), const void *params)
{
    TG_TRY(tg__ew_check_float(name, 0, x));
    TG_TRY(tg__map_f64(out, x, x->dtype, f, params));
    if (ctx) tg__ctx_save(ctx, x);
    return TG_OK;
}
