/* src/nn/weight_norm.c - torch.nn.utils.weight_norm: a module's weight
 * becomes weight_v * (weight_g / ||weight_v||), computed before each
 * forward by tg_weight_norm (ops.h), the norm over every dim but `dim`
 * (or the whole tensor for dim -1, torch's None).
 *
 * As torch 1.13's WeightNorm.apply: the parameter is deleted, then
 * <name>_g = norm_except_dim(weight) (a new tensor) and <name>_v (the
 * weight's tensor itself) are registered in that order, after the others;
 * remove_weight_norm registers the computed weight, detached, as a new
 * parameter `name`, last, and drops g and v. */
#include <string.h>

#include "nn/module_internal.h"
#include "ops/weight_norm_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"
#include "tapegrad/registry.h"

#define WN_FN "nn_weight_norm"

typedef struct wn_state {
    char g[TG__NN_LOCAL_NAME_MAX], v[TG__NN_LOCAL_NAME_MAX];
    int dim;                           /* [0, ndim) or -1 */
} wn_state;

/* As spectral norm's, in the parameters' dtype, also under autocast
 * (torch's CPU autocast does not lower _weight_norm). */
static int wn_weight(const wn_state *s, tg_tensor *g, tg_tensor *v, tg_tensor **out)
{
    TG_TRY(tg_autocast_disable_begin());
    int rc = tg_weight_norm(out, v, g, s->dim);
    tg_autocast_end();
    return rc;
}

static int wn_compute(tg_module *m, void *state, tg_tensor **out)
{
    const wn_state *s = state;
    tg_tensor *g = tg__module_local(m, s->g), *v = tg__module_local(m, s->v);
    TG_ASSERT(g && v);
    return wn_weight(s, g, v, out);
}

static int wn_check(tg_module *m, const char *name, int dim, tg_tensor **weight,
                    int *resolved_dim)
{
    TG_CHECK(m != NULL && name != NULL, TG_EINVAL, WN_FN ": m and name must not be NULL");
    tg_tensor *w = NULL;
    TG_TRY(tg__module_reparam_target(WN_FN, m, name, "weight norm", wn_compute, 2, &w));
    TG_TRY(tg__weight_norm_dim(WN_FN, name, tg_tensor_ndim(w), dim, resolved_dim));
    *weight = w;
    return TG_OK;
}

int tg_nn_weight_norm(tg_module *m, const char *name, int dim)
{
    tg_tensor *w = NULL;
    TG_TRY(wn_check(m, name, dim, &w, &dim));
    wn_state *s = tg__calloc(1, sizeof *s);
    if (!s) return TG_ENOMEM;
    snprintf(s->g, sizeof s->g, "%s_g", name);
    snprintf(s->v, sizeof s->v, "%s_v", name);
    s->dim = dim;
    /* g and the weight's value belong to the module, never to a caller's
     * scope: the ops run on the library's behalf */
    tg_tensor *g = NULL, *value = NULL;
    tg__lib_enter();
    tg_no_grad_begin();
    int rc = tg_norm_except_dim(&g, w, dim);
    if (rc == TG_OK) rc = wn_weight(s, g, w, &value);
    tg_no_grad_end();
    tg__lib_leave();
    if (rc < 0) {
        tg_tensor_release(g);
        free(s);
        return rc;
    }
    tg__nn_computed c = {.compute = wn_compute, .release = free, .state_size = sizeof *s,
                         .state = s, .value = value};
    const char *pn[1] = {s->g};
    return tg__module_reparametrize(WN_FN, m, name, s->v, 1, pn, (tg_tensor *[]){g}, 0, NULL,
                                    NULL, &c);
}

int tg_nn_remove_weight_norm(tg_module *m, const char *name)
{
    TG_CHECK(m != NULL && name != NULL, TG_EINVAL,
             "nn_remove_weight_norm: m and name must not be NULL");
    const tg__nn_computed *c = tg__module_computed(m, name);
    TG_CHECK(c != NULL && c->compute == wn_compute, TG_EINVAL,
             "nn_remove_weight_norm: weight norm of '%s' not found in %s", name,
             tg_module_type_name(m));
    const wn_state *s = c->state;
    tg_tensor *g = tg__module_local(m, s->g), *v = tg__module_local(m, s->v), *value = NULL;
    TG_ASSERT(g && v);
    tg__lib_enter();
    tg_no_grad_begin();
    int rc = wn_weight(s, g, v, &value);
    tg_no_grad_end();
    tg__lib_leave();
    if (rc < 0) return rc;
    return tg__module_unreparametrize("nn_remove_weight_norm", m, name, value, 2,
                                      (const char *const[]){s->g, s->v});
}
