/* src/nn/instance_norm.c - InstanceNorm{1,2,3}d, the module around the
 * group_norm and batch_norm ops (src/ops/layer_norm.c, src/ops/norm.c),
 * which compute the output and its gradients (to any order), as
 * torch.nn.InstanceNorm*d chooses its statistics:
 *   - training, or track_running_stats=False: each sample's channel
 *     normalised by its own mean and biased variance, which is group_norm
 *     with one group per channel;
 *   - eval with track_running_stats=True: every sample normalised by the
 *     running statistics, which is batch_norm in inference form.
 * A training forward with running statistics also moves them towards the
 * batch's (tg__in_update); num_batches_tracked is registered, as torch's,
 * and never counts (torch's InstanceNorm does not increment it).
 *
 * The module holds its rank, channels, eps, momentum and, when affine,
 * weight (ones) and bias (zeros), with track_running_stats running_mean
 * (zeros), running_var (ones) in f32 and num_batches_tracked (a 0-d i64),
 * under torch's state-dict names.  Under autocast a half input gives a half
 * output (the ops keep x's dtype there) from the f32 parameters. */
#include <math.h>
#include <stdlib.h>

#include "nn/module_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"

typedef struct tg__in_state {
    int ns;        /* spatial dims: 1, 2 or 3 */
    int64_t c;     /* num_features */
    double eps, momentum;
    bool affine, track;
} tg__in_state;

/* The running statistics after a training forward on x (N, C, S...), of S
 * > 1 elements per row, as torch's instance_norm: each (sample, channel)
 * row's mean and unbiased variance, averaged over the N samples, enter
 * r = (1 - momentum) r + momentum * stat.  (torch updates one copy of r
 * per sample and then averages the copies: the same in exact arithmetic.)
 * N = 0 averages no rows, which is NaN, as torch.  The rows' statistics are
 * computed without recording, in x's dtype; the rest in double, each
 * buffer element written once, rounded to the buffer's dtype.  On error
 * neither buffer changes. */
static int tg__in_update(tg_module *m, const tg__in_state *s, tg_tensor *x, int64_t spatial)
{
    tg_tensor *run[2] = {tg__module_local(m, "running_mean"), tg__module_local(m, "running_var")};
    TG_ASSERT(run[0] && run[1] && tg_tensor_is_contiguous(run[0]) &&
              tg_tensor_is_contiguous(run[1]));
    const int64_t n = tg_tensor_dim(x, 0), c = s->c, nc = n * c;
    tg_tensor *rows = NULL, *stat[2] = {NULL, NULL};
    tg_no_grad_begin();
    int rc = tg_reshape(&rows, x, 3, (const int64_t[]){n, c, spatial});
    if (rc >= 0) rc = tg_mean_dims(&stat[0], rows, 1, (const int[]){2}, false);
    if (rc >= 0) rc = tg_var_dims(&stat[1], rows, 1, (const int[]){2}, 1, false);
    tg_no_grad_end();
    /* v: the (N, C) means, the (N, C) variances, then the 2 C new values */
    double *v = rc >= 0 ? tg__malloc((size_t)(2 * nc + 2 * c) * sizeof *v) : NULL;
    if (rc >= 0 && !v) rc = TG_ENOMEM;
    for (int k = 0; rc >= 0 && k < 2; k++) rc = tg_tensor_to_doubles(stat[k], v + k * nc, nc);
    if (rc >= 0) {
        const double mom = s->momentum;
        double *next = v + 2 * nc;
        for (int k = 0; k < 2; k++)
            for (int64_t j = 0; j < c; j++) {
                double sum = 0;
                for (int64_t i = 0; i < n; i++) sum += v[k * nc + i * c + j];
                const double r = tg_dtype_load(tg_tensor_dtype(run[k]), tg_tensor_cdata(run[k]), j);
                next[k * c + j] = (1 - mom) * r + mom * (sum / (double)n);
            }
        for (int k = 0; k < 2; k++) {
            for (int64_t j = 0; j < c; j++)
                tg_dtype_store(tg_tensor_dtype(run[k]), tg_tensor_data(run[k]), j, next[k * c + j]);
            tg_tensor_bump_version(run[k]);
        }
    }
    free(v);
    tg_tensor_release(rows);
    tg_tensor_release(stat[0]);
    tg_tensor_release(stat[1]);
    return rc;
}

/* The output for a batched x (N, C, S...): group_norm in one group per
 * channel, or batch_norm with the running statistics in eval. */
static int tg__in_normalize(tg_module *m, const tg__in_state *s, tg_tensor **y, tg_tensor *x)
{
    tg_tensor *w = s->affine ? tg__module_local(m, "weight") : NULL;
    tg_tensor *b = s->affine ? tg__module_local(m, "bias") : NULL;
    if (s->track && !tg_module_is_training(m))
        return tg_batch_norm(y, x, tg__module_local(m, "running_mean"),
                             tg__module_local(m, "running_var"), w, b, false, 0.0, s->eps);
    return tg_group_norm(y, x, s->c, w, b, s->eps);
}

/* An unbatched (C, S...) x as a batch of one.  The running statistics
 * change last, once the output exists, so that on error nothing has. */
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
    const bool train = tg_module_is_training(m);
    TG_CHECK(!train || spatial > 1, TG_ESHAPE,
             "%s: x has %lld spatial element in training; instance statistics need more than 1",
             name, (long long)spatial);
    tg_tensor *x1 = NULL, *y1 = NULL, *out = NULL;
    int rc = cdim == 1 ? TG_OK : tg_unsqueeze(&x1, x, 0);
    tg_tensor *xb = cdim == 1 ? x : x1;
    if (rc >= 0) rc = tg__in_normalize(m, s, &y1, xb);
    if (rc >= 0) {
        if (cdim == 1) out = tg_tensor_retain(y1);
        else rc = tg_squeeze(&out, y1, 0);
    }
    if (rc >= 0 && train && s->track) rc = tg__in_update(m, s, xb, spatial);
    tg_tensor_release(x1);
    tg_tensor_release(y1);
    if (rc < 0) {
        tg_tensor_release(out);
        return rc;
    }
    *y = out;
    return TG_OK;
}

/* Indexed by n_spatial - 1: the type name says the rank, as torch's class. */
static const tg_module_vtable tg__nn_instance_norm_vt[3] = {
    {.type_name = "InstanceNorm1d", .forward = tg__in_forward, .release = free,
     .state_size = sizeof(tg__in_state), .zero_if_missing = "num_batches_tracked"},
    {.type_name = "InstanceNorm2d", .forward = tg__in_forward, .release = free,
     .state_size = sizeof(tg__in_state), .zero_if_missing = "num_batches_tracked"},
    {.type_name = "InstanceNorm3d", .forward = tg__in_forward, .release = free,
     .state_size = sizeof(tg__in_state), .zero_if_missing = "num_batches_tracked"}};

/* The constructors' body; messages name fn. */
static int tg__in_new(const char *fn, tg_module **out, int n_spatial, int64_t num_features,
                      double eps, double momentum, bool affine, bool track)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", fn);
    TG_CHECK(n_spatial >= 1 && n_spatial <= 3, TG_EINVAL,
             "%s: n_spatial=%d must be 1, 2 or 3", fn, n_spatial);
    TG_CHECK(num_features > 0, TG_EINVAL, "%s: num_features=%lld must be > 0", fn,
             (long long)num_features);
    TG_CHECK(isfinite(eps) && eps >= 0, TG_EINVAL, "%s: eps=%g must be >= 0", fn, eps);
    /* torch takes momentum=None but its InstanceNorm forward then fails:
     * a cumulative average would need num_batches_tracked, which it never
     * increments */
    TG_CHECK(momentum >= 0 && momentum <= 1, TG_EINVAL,
             "%s: momentum=%g must be in [0, 1] (InstanceNorm has no cumulative average: "
             "torch's momentum=None fails in its forward)", fn, momentum);
    tg__in_state *s = tg__malloc(sizeof *s);
    if (!s) return TG_ENOMEM;
    *s = (tg__in_state){.ns = n_spatial, .c = num_features, .eps = eps, .momentum = momentum,
                        .affine = affine, .track = track};
    tg_module *m = NULL;
    int rc = tg_module_new(&m, &tg__nn_instance_norm_vt[n_spatial - 1], s);
    if (rc < 0) {
        free(s);
        return rc;
    }
    rc = tg__nn_add_norm_state(m, num_features, affine, track);
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}

int tg_nn_instance_norm_new(tg_module **out, int n_spatial, int64_t num_features, double eps,
                            bool affine)
{
    return tg__in_new("nn_instance_norm_new", out, n_spatial, num_features, eps, 0.1, affine,
                      false);
}

int tg_nn_instance_norm_new_ex(tg_module **out, int n_spatial, int64_t num_features, double eps,
                               double momentum, bool affine, bool track_running_stats)
{
    return tg__in_new("nn_instance_norm_new_ex", out, n_spatial, num_features, eps, momentum,
                      affine, track_running_stats);
}

int tg_nn_instance_norm_params(const tg_module *m, int *n_spatial, int64_t *num_features,
                               double *eps, double *momentum, bool *affine,
                               bool *track_running_stats)
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
    if (momentum) *momentum = s->momentum;
    if (affine) *affine = s->affine;
    if (track_running_stats) *track_running_stats = s->track;
    return TG_OK;
}
