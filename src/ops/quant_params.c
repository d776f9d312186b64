/* src/ops/quant_params.c - checks of quantization parameters (quant_params.h). */
#include <math.h>

#include "ops/quant_params.h"

int tg__q_check_channels(const char *op, const tg_tensor *t, int *axis, int64_t n,
                         const double *scales)
{
    int a = *axis < 0 ? *axis + t->ndim : *axis;
    TG_CHECK(a >= 0 && a < t->ndim, TG_EINVAL, "%s: axis=%d is out of range for a %d-D tensor",
             op, *axis, t->ndim);
    TG_CHECK(n == t->shape[a], TG_ESHAPE, "%s: n=%lld scales must equal shape[%d]=%lld", op,
             (long long)n, a, (long long)t->shape[a]);
    TG_CHECK(scales || n == 0, TG_EINVAL, "%s: scales must not be NULL", op);
    for (int64_t c = 0; c < n; c++)
        TG_CHECK(isfinite(scales[c]) && scales[c] > 0, TG_EINVAL,
                 "%s: scales[%lld]=%g must be finite and > 0", op, (long long)c, scales[c]);
    *axis = a;
    return TG_OK;
}

int tg__q_check_float(const char *op, const tg_tensor *x)
{
    TG_CHECK(x, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(tg_dtype_is_float(x->dtype), TG_EDTYPE, "%s: x must be a float tensor, got %s", op,
             tg_dtype_name(x->dtype));
    return TG_OK;
}
