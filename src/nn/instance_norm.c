/* src/nn/instance_norm.c - InstanceNorm{1,2,3}d, the module around the
 * group_norm op (src/ops/layer_norm.c, as torch.nn.functional.group_norm),
 * which computes the output and its gradients (to any order): with torch's
 * default track_running_stats=False, instance norm is group_norm with one
 * group per channel, in training and eval alike.
 *
 * The module holds its rank, channels, eps and, when affine, weight (ones)
 * and bias (zeros) in f32 under torch's state-dict names.  Under autocast a
 * half input gives a half output (the op keeps x's dtype there) from the
 * f32 parameters. */
#include <math.h>

#include "nn/module_internal.h"
#include "tapegrad/ops.h"

typedef struct tg__in_state {
    int ns;        /* spatial dims: 1, 2 or 3 */
    int64_t c;     /* num_features */
    double eps;
    bool affine;
} tg__in_state;

/* group_norm in one group per channel: each sample's channel normalised
 * over its own spatial elements; an unbatched (C, S...) x as a batch of
 * one. */
static int tg__in_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const tg__in_state *s = m->state;
    const char *name = tg_module_type_name(m);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", name);
    const int nd = tg_tensor_ndim(x);
    TG_CHECK(nd == s->ns + 1 || nd == s->ns + 2, TG_ESHAPE,
             "%s: x has %d dims; it must have %d (C, S...) or %d (N, C, S...)", name, nd,
             s->ns + 1, s->ns + 2);
    const int cdim = nd - s->ns - 1;
    TG_CHECK(tg_tensor_dim(x, cdim) == s->c, TG_ESHAPE,
             "%s: x has %lld channels (dim %d); the module has num_features=%lld", name,
             (long long)tg_tensor_dim(x, cdim), cdim, (long long)s->c);
    int64_t spatial = 1;
    for (int d = cdim + 1; d < nd; d++) spatial *= tg_tensor_dim(x, d);
    TG_CHECK(!tg_module_is_training(m) || spatial > 1, TG_ESHAPE,
             "%s: x has %lld spatial element in training; instance statistics need more than 1",
             name, (long long)spatial);
    tg_tensor *w = s->affine ? tg__module_local(m, "weight") : NULL;
    tg_tensor *b = s->affine ? tg__module_local(m, "bias") : NULL;
    if (cdim == 1) return tg_group_norm(y, x, s->c, w, b, s->eps);
    tg_tensor *x1 = NULL, *y1 = NULL;
    int rc = tg_unsqueeze(&x1, x, 0);
    if (rc >= 0) rc = tg_group_norm(&y1, x1, s->c, w, b, s->eps);
    if (rc >= 0) rc = tg_squeeze(y, y1, 0);
    tg_tensor_release(x1);
    tg_tensor_release(y1);
    return rc;
}

/* Indexed by n_spatial - 1: the type name says the rank, as torch's class. */
static const tg_module_vtable tg__nn_instance_norm_vt[3] = {
    {.type_name = "InstanceNorm1d", .forward = tg__in_forward, .release = free,
     .state_size = sizeof(tg__in_state)},
    {.type_name = "InstanceNorm2d", .forward = tg__in_forward, .release = free,
     .state_size = sizeof(tg__in_state)},
    {.type_name = "InstanceNorm3d", .forward = tg__in_forward, .release = free,
     .state_size = sizeof(tg__in_state)}};

int tg_nn_instance_norm_new(tg_module **out, int n_spatial, int64_t num_features, double eps,
                            bool affine)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_instance_norm_new: out must not be NULL");
    TG_CHECK(n_spatial >= 1 && n_spatial <= 3, TG_EINVAL,
             "nn_instance_norm_new: n_spatial=%d must be 1, 2 or 3", n_spatial);
    TG_CHECK(num_features > 0, TG_EINVAL, "nn_instance_norm_new: num_features=%lld must be > 0",
             (long long)num_features);
    TG_CHECK(isfinite(eps) && eps >= 0, TG_EINVAL, "nn_instance_norm_new: eps=%g must be >= 0",
             eps);
    tg__in_state *s = tg__malloc(sizeof *s);
    if (!s) return TG_ENOMEM;
    *s = (tg__in_state){.ns = n_spatial, .c = num_features, .eps = eps, .affine = affine};
    tg_module *m = NULL;
    int rc = tg_module_new(&m, &tg__nn_instance_norm_vt[n_spatial - 1], s);
    if (rc < 0) {
        free(s);
        return rc;
    }
    for (int i = 0; rc == TG_OK && affine && i < 2; i++) {
        tg_tensor *t = NULL;
        rc = tg_tensor_full(&t, TG_F32, 1, &num_features, i == 0 ? 1.0 : 0.0);
        if (rc == TG_OK) rc = tg_module_add_parameter(m, i == 0 ? "weight" : "bias", t);
    }
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}

int tg_nn_instance_norm_params(const tg_module *m, int *n_spatial, int64_t *num_features,
                               double *eps, bool *affine)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_instance_norm_params: m must not be NULL");
    int k = 0;
    for (int i = 0; i < 3; i++)
        if (m->vt == &tg__nn_instance_norm_vt[i]) k = i + 1;
    TG_CHECK(k > 0, TG_EINVAL, "nn_instance_norm_params: m is a %s module, not InstanceNormNd",
             tg_module_type_name(m));
    const tg__in_state *s = m->state;
    if (n_spatial) *n_spatial = k;
    if (num_features) *num_features = s->c;
    if (eps) *eps = s->eps;
    if (affine) *affine = s->affine;
    return TG_OK;
}
