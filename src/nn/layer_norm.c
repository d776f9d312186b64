/* src/nn/layer_norm.c - LayerNorm and GroupNorm, the modules around the
 * layer_norm and group_norm ops (src/ops/layer_norm.c, as
 * torch.nn.functional.layer_norm / group_norm), which compute the output
 * and its gradients (to any order).  InstanceNorm is in instance_norm.c.
 *
 * Each module holds its shape, eps and, when affine, weight (ones) and bias
 * (zeros) in f32, as torch.nn.LayerNorm / GroupNorm make them, under
 * torch's state-dict names.  Neither has buffers or a training mode of its
 * own: train and eval compute the same.  Under autocast a half input gives
 * a half output (the ops keep x's dtype there) from the f32 parameters. */
#include <math.h>
#include <string.h>

#include "nn/module_internal.h"
#include "tapegrad/ops.h"

typedef struct tg__ln_state {
    int n;                            /* LayerNorm: normalized_shape's length */
    int64_t shape[TG_MAX_DIMS];       /* LayerNorm: normalized_shape */
    int64_t groups, channels;         /* GroupNorm */
    double eps;
    bool affine;
} tg__ln_state;

static int tg__ln_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const tg__ln_state *s = m->state;
    tg_tensor *w = s->affine ? tg__module_local(m, "weight") : NULL;
    tg_tensor *b = s->affine ? tg__module_local(m, "bias") : NULL;
    return tg_layer_norm(y, x, s->n, s->shape, w, b, s->eps);
}

static int tg__gn_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const tg__ln_state *s = m->state;
    tg_tensor *w = s->affine ? tg__module_local(m, "weight") : NULL;
    tg_tensor *b = s->affine ? tg__module_local(m, "bias") : NULL;
    return tg_group_norm(y, x, s->groups, w, b, s->eps);
}

static const tg_module_vtable tg__nn_layer_norm_vt = {
    .type_name = "LayerNorm", .forward = tg__ln_forward, .release = free,
    .state_size = sizeof(tg__ln_state)};
static const tg_module_vtable tg__nn_group_norm_vt = {
    .type_name = "GroupNorm", .forward = tg__gn_forward, .release = free,
    .state_size = sizeof(tg__ln_state)};

/* A module of vtable vt with state *init (copied) and, when affine, the
 * parameters weight = 1 and bias = 0 of shape (ndim, shape). */
static int tg__ln_module_new(tg_module **out, const tg_module_vtable *vt, const tg__ln_state *init,
                             int ndim, const int64_t *shape)
{
    tg__ln_state *s = tg__malloc(sizeof *s);
    if (!s) return TG_ENOMEM;
    *s = *init;
    tg_module *m = NULL;
    int rc = tg_module_new(&m, vt, s);
    if (rc < 0) {
        free(s);
        return rc;
    }
    for (int i = 0; rc == TG_OK && init->affine && i < 2; i++) {
        tg_tensor *t = NULL;
        rc = tg_tensor_full(&t, TG_F32, ndim, shape, i == 0 ? 1.0 : 0.0);
        if (rc == TG_OK) rc = tg_module_add_parameter(m, i == 0 ? "weight" : "bias", t);
    }
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}

int tg_nn_layer_norm_new(tg_module **out, int n, const int64_t *normalized_shape, double eps,
                         bool elementwise_affine)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_layer_norm_new: out must not be NULL");
    TG_CHECK(n >= 1 && n <= TG_MAX_DIMS, TG_EINVAL,
             "nn_layer_norm_new: n=%d must be in 1..%d (normalized_shape's length)", n,
             TG_MAX_DIMS);
    TG_CHECK(normalized_shape != NULL, TG_EINVAL,
             "nn_layer_norm_new: normalized_shape must not be NULL");
    for (int d = 0; d < n; d++)
        TG_CHECK(normalized_shape[d] > 0, TG_EINVAL,
                 "nn_layer_norm_new: normalized_shape[%d]=%lld must be > 0", d,
                 (long long)normalized_shape[d]);
    TG_CHECK(isfinite(eps) && eps >= 0, TG_EINVAL, "nn_layer_norm_new: eps=%g must be >= 0", eps);
    tg__ln_state s = {.n = n, .eps = eps, .affine = elementwise_affine};
    memcpy(s.shape, normalized_shape, (size_t)n * sizeof *normalized_shape);
    return tg__ln_module_new(out, &tg__nn_layer_norm_vt, &s, n, s.shape);
}

int tg_nn_group_norm_new(tg_module **out, int64_t num_groups, int64_t num_channels, double eps,
                         bool affine)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_group_norm_new: out must not be NULL");
    TG_CHECK(num_groups > 0, TG_EINVAL, "nn_group_norm_new: num_groups=%lld must be > 0",
             (long long)num_groups);
    TG_CHECK(num_channels > 0 && num_channels % num_groups == 0, TG_EINVAL,
             "nn_group_norm_new: num_channels=%lld must be > 0 and divisible by num_groups=%lld",
             (long long)num_channels, (long long)num_groups);
    TG_CHECK(isfinite(eps) && eps >= 0, TG_EINVAL, "nn_group_norm_new: eps=%g must be >= 0", eps);
    tg__ln_state s = {.groups = num_groups, .channels = num_channels, .eps = eps, .affine = affine};
    return tg__ln_module_new(out, &tg__nn_group_norm_vt, &s, 1, &num_channels);
}

int tg_nn_layer_norm_params(const tg_module *m, int *n, int64_t *normalized_shape, double *eps,
                            bool *elementwise_affine)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_layer_norm_params: m must not be NULL");
    TG_CHECK(m->vt == &tg__nn_layer_norm_vt, TG_EINVAL,
             "nn_layer_norm_params: m is a %s module, not LayerNorm", tg_module_type_name(m));
    const tg__ln_state *s = m->state;
    if (n) *n = s->n;
    if (normalized_shape) memcpy(normalized_shape, s->shape, (size_t)s->n * sizeof *s->shape);
    if (eps) *eps = s->eps;
    if (elementwise_affine) *elementwise_affine = s->affine;
    return TG_OK;
}

int tg_nn_group_norm_params(const tg_module *m, int64_t *num_groups, int64_t *num_channels,
                            double *eps, bool *affine)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_group_norm_params: m must not be NULL");
    TG_CHECK(m->vt == &tg__nn_group_norm_vt, TG_EINVAL,
             "nn_group_norm_params: m is a %s module, not GroupNorm", tg_module_type_name(m));
    const tg__ln_state *s = m->state;
    if (num_groups) *num_groups = s->groups;
    if (num_channels) *num_channels = s->channels;
    if (eps) *eps = s->eps;
    if (affine) *affine = s->affine;
    return TG_OK;
}

