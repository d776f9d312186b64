/* src/nn/prelu.c - nn.PReLU(num_parameters, init): a parameter weight of
 * num_parameters elements, each init (torch's default 0.25); forward is
 * tg_prelu(x, weight), so num_parameters is 1 or x's channel count. */
#include <math.h>

#include "nn/module_internal.h"
#include "tapegrad/init.h"
#include "tapegrad/nn.h"
#include "tapegrad/ops.h"

static int prelu_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    return tg_prelu(y, x, tg_module_find(m, "weight"));
}

static const tg_module_vtable prelu_vt = {.type_name = "PReLU", .forward = prelu_forward};

int tg_nn_prelu_new(tg_module **out, int64_t num_parameters, double init)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_prelu_new: out must not be NULL");
    TG_CHECK(num_parameters >= 1, TG_EINVAL, "nn_prelu_new: num_parameters=%lld must be >= 1",
             (long long)num_parameters);
    TG_CHECK(isfinite(init), TG_EINVAL, "nn_prelu_new: init=%g must be finite", init);
    tg_module *m = NULL;
    tg_tensor *w = NULL;   /* borrowed from m */
    TG_TRY(tg_module_new(&m, &prelu_vt, NULL));
    int rc = tg__nn_add_param_zeros(m, "weight", 1, &num_parameters, &w);
    if (rc >= 0) rc = tg_init_constant_(w, init);
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}
