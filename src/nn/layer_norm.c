/* src/nn/layer_norm.c - LayerNorm, GroupNorm and InstanceNorm{1,2,3}d, the
 * modules around the layer_norm and group_norm ops (src/ops/layer_norm.c,
 * as torch.nn.functional.layer_norm / group_norm), which compute the output
 * and its gradients (to any order).  InstanceNorm (torch's default
 * track_running_stats=False) is group_norm with one group per channel.
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
    int64_t groups, channels;         /* GroupNorm; InstanceNorm: channels */
    int ns;                           /* InstanceNorm: spatial dims */
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

/* group_norm in one group per channel: each sample's channel normalised
 * over its own spatial elements; an unbatched (C, S...) x as a batch of
 * one. */
static int tg__in_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const tg__ln_state *s = m->state;
    const char *name = tg_module_type_name(m);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", name);
    const int nd = tg_tensor_ndim(x);
    TG_CHECK(nd == s->ns + 1 || nd == s->ns + 2, TG_ESHAPE,
             "%s: x has %d dims; it must have %d (C, S...) or %d (N, C, S...)", name, nd,
             s->ns + 1, s->ns + 2);
    const int cdim = nd - s->ns - 1;
    TG_CHECK(tg_tensor_dim(x, cdim) == s->channels, TG_ESHAPE,
             "%s: x has %lld channels (dim %d); the module has num_features=%lld", name,
             (long long)tg_tensor_dim(x, cdim), cdim, (long long)s->channels);
    int64_t spatial = 1;
    for (int d = cdim + 1; d < nd; d++) spatial *= tg_tensor_dim(x, d);
    TG_CHECK(!tg_module_is_training(m) || spatial > 1, TG_ESHAPE,
             "%s: x has %lld spatial element in training; instance statistics need more than 1",
             name, (long long)spatial);
    tg_tensor *w = s->affine ? tg__module_local(m, "weight") : NULL;
    tg_tensor *b = s->affine ? tg__module_local(m, "bias") : NULL;
    if (cdim == 1) return tg_group_norm(y, x, s->channels, w, b, s->eps);
    tg_tensor *x1 = NULL, *y1 = NULL;
    int rc = tg_unsqueeze(&x1, x, 0);
    if (rc >= 0) rc = tg_group_norm(&y1, x1, s->channels, w, b, s->eps);
    if (rc >= 0) rc = tg_squeeze(y, y1, 0);
    tg_tensor_release(x1);
    tg_tensor_release(y1);
    return rc;
}

static const tg_module_vtable tg__nn_layer_norm_vt = {
    .type_name = "LayerNorm", .forward = tg__ln_forward, .release = free,
    .state_size = sizeof(tg__ln_state)};
static const tg_module_vtable tg__nn_group_norm_vt = {
    .type_name = "GroupNorm", .forward = tg__gn_forward, .release = free,
    .state_size = sizeof(tg__ln_state)};
/* Indexed by n_spatial - 1: the type name says the rank, as torch's class. */
static const tg_module_vtable tg__nn_instance_norm_vt[3] = {
    {.type_name = "InstanceNorm1d", .forward = tg__in_forward, .release = free,
     .state_size = sizeof(tg__ln_state)},
    {.type_name = "InstanceNorm2d", .forward = tg__in_forward, .release = free,
     .state_size = sizeof(tg__ln_state)},
    {.type_name = "InstanceNorm3d", .forward = tg__in_forward, .release = free,
     .state_size = sizeof(tg__ln_state)}};

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
    tg__ln_state s = {.channels = num_features, .ns = n_spatial, .eps = eps, .affine = affine};
    return tg__ln_module_new(out, &tg__nn_instance_norm_vt[n_spatial - 1], &s, 1, &num_features);
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


int tg_nn_instance_norm_params(const tg_module *m, int *n_spatial, int64_t *num_features,
                               double *eps, bool *affine)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_instance_norm_params: m must not be NULL");
    int k = 0;
    for (int i = 0; i < 3; i++)
        if (m->vt == &tg__nn_instance_norm_vt[i]) k = i + 1;
    TG_CHECK(k > 0, TG_EINVAL, "nn_instance_norm_params: m is a %s module, not InstanceNormNd",
             tg_module_type_name(m));
    const tg__ln_state *s = m->state;
    if (n_spatial) *n_spatial = k;
    if (num_features) *num_features = s->channels;
    if (eps) *eps = s->eps;
    if (affine) *affine = s->affine;
    return TG_OK;
}
