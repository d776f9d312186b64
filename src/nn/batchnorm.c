/* src/nn/batchnorm.c - BatchNorm1d/2d/3d over dim 1: the module around the
 * batch_norm op (src/ops/norm.c, as torch.nn.functional.batch_norm), which
 * computes the statistics, the output and its gradients (to any order).
 *
 * The module holds weight and bias (affine), the running buffers
 * (track_running_stats) and num_batches_tracked, and chooses the statistics
 * as torch.nn.BatchNorm*d: the batch's when training or when there are no
 * running buffers, the running ones in eval; momentum < 0 (PyTorch's None)
 * is a cumulative average, m = 1 / num_batches_tracked.  Under autocast a
 * half input gives a half output (the op keeps x's dtype there), so the
 * activations after it stay half. */
#include <math.h>
#include <stdint.h>

#include "nn/module_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"

typedef struct tg__bn_state {
    int nspatial;
    int64_t c;
    double eps, momentum;
    bool affine, track;
} tg__bn_state;

static int tg__bn_check_input(const tg__bn_state *s, const tg_tensor *x)
{
    int nd = tg_tensor_ndim(x);
    bool ok = s->nspatial <= 1 ? (nd == 2 || nd == 3) : nd == s->nspatial + 2;
    TG_CHECK(ok, TG_ESHAPE, "batchnorm%dd: input has %d dims; expected %s", s->nspatial ? s->nspatial : 1,
             nd, s->nspatial <= 1 ? "(N, C) or (N, C, L)" : s->nspatial == 2 ? "(N, C, H, W)"
                                                                             : "(N, C, D, H, W)");
    TG_CHECK(tg_tensor_dim(x, 1) == s->c, TG_ESHAPE,
             "batchnorm: input dim 1 is %lld; num_features is %lld",
             (long long)tg_tensor_dim(x, 1), (long long)s->c);
    TG_CHECK(tg_dtype_is_float(tg_tensor_dtype(x)), TG_EDTYPE,
             "batchnorm: input has dtype %s; float dtypes only", tg_dtype_name(tg_tensor_dtype(x)));
    return TG_OK;
}

static int tg__bn_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const tg__bn_state *s = m->state;
    TG_TRY(tg__bn_check_input(s, x));
    tg_tensor *rm = NULL, *rv = NULL, *nbt = NULL;
    if (s->track) {
        rm = tg__module_local(m, "running_mean");
        rv = tg__module_local(m, "running_var");
        nbt = tg__module_local(m, "num_batches_tracked");
    }
    /* batch statistics when training, and in eval without running buffers */
    const bool batch = m->training || !s->track, update = m->training && s->track;
    /* num_batches_tracked counts in int64 as torch's add_(1), exactly (a
     * file may hold any value; loading keeps it i64).  Checked before
     * anything changes: count + 1 is stored after the running statistics
     * are updated. */
    int64_t count = 0;
    double mom = 0;
    if (update) {
        TG_ASSERT(tg_tensor_dtype(nbt) == TG_I64 && tg_tensor_numel(nbt) == 1);
        count = *(const int64_t *)tg_tensor_cdata(nbt);
        TG_CHECK(count < INT64_MAX, TG_EINVAL,
                 "batch_norm: num_batches_tracked = %lld cannot be incremented (the largest "
                 "int64)", (long long)count);
        /* momentum None: the cumulative average's 1 / (count + 1) (torch
         * divides by zero at count = -1) */
        TG_CHECK(s->momentum >= 0 || count != -1, TG_EINVAL,
                 "batch_norm: num_batches_tracked = -1 makes the cumulative average's factor "
                 "1 / 0 (momentum None)");
        mom = s->momentum < 0 ? 1.0 / ((double)count + 1) : s->momentum;
    }
    tg_tensor *w = s->affine ? tg__module_local(m, "weight") : NULL;
    tg_tensor *b = s->affine ? tg__module_local(m, "bias") : NULL;
    TG_TRY(tg_batch_norm(y, x, rm, rv, w, b, batch, mom, s->eps));
    if (update) {
        *(int64_t *)tg_tensor_data(nbt) = count + 1;
        tg_tensor_bump_version(nbt);
    }
    return TG_OK;
}

const tg_module_vtable tg__nn_batchnorm_vt = {
    .type_name = "BatchNorm", .forward = tg__bn_forward, .release = free,
    .state_size = sizeof(tg__bn_state), .zero_if_missing = "num_batches_tracked"};

/* Registers a tensor of C elements filled with v (a 0-d i64 when c < 0). */
static int tg__bn_add(tg_module *m, const char *name, int64_t c, double v, bool param)
{
    tg_tensor *t = NULL;
    if (c < 0) TG_TRY(tg_tensor_zeros(&t, TG_I64, 0, NULL));
    else TG_TRY(tg_tensor_full(&t, TG_F32, 1, &c, v));
    return param ? tg_module_add_parameter(m, name, t) : tg_module_add_buffer(m, name, t);
}

int tg__nn_add_norm_state(tg_module *m, int64_t c, bool affine, bool track)
{
    int rc = TG_OK;
    if (affine) {
        rc = tg__bn_add(m, "weight", c, 1.0, true);
        if (rc == TG_OK) rc = tg__bn_add(m, "bias", c, 0.0, true);
    }
    if (rc == TG_OK && track) {
        rc = tg__bn_add(m, "running_mean", c, 0.0, false);
        if (rc == TG_OK) rc = tg__bn_add(m, "running_var", c, 1.0, false);
        if (rc == TG_OK) rc = tg__bn_add(m, "num_batches_tracked", -1, 0.0, false);
    }
    return rc;
}

int tg_nn_batchnorm_new(tg_module **out, int nspatial, int64_t num_features, double eps,
                        double momentum, bool affine, bool track_running_stats)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_batchnorm_new: out must not be NULL");
    TG_CHECK(nspatial >= 0 && nspatial <= 3, TG_EINVAL,
             "nn_batchnorm_new: nspatial=%d must be 0..3", nspatial);
    TG_CHECK(num_features > 0, TG_EINVAL, "nn_batchnorm_new: num_features=%lld must be > 0",
             (long long)num_features);
    TG_CHECK(isfinite(eps) && eps >= 0, TG_EINVAL, "nn_batchnorm_new: eps=%g must be >= 0", eps);
    TG_CHECK(isfinite(momentum) && momentum <= 1, TG_EINVAL,
             "nn_batchnorm_new: momentum=%g must be <= 1 (< 0 for a cumulative average)",
             momentum);
    tg__bn_state *s = tg__malloc(sizeof *s);
    if (!s) return TG_ENOMEM;
    *s = (tg__bn_state){nspatial, num_features, eps, momentum, affine, track_running_stats};
    tg_module *m = NULL;
    int rc = tg_module_new(&m, &tg__nn_batchnorm_vt, s);
    if (rc < 0) {
        free(s);
        return rc;
    }
    rc = tg__nn_add_norm_state(m, num_features, affine, track_running_stats);
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}

int tg_nn_batchnorm_params(const tg_module *m, int *nspatial, double *eps, double *momentum,
                           bool *affine, bool *track_running_stats)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_batchnorm_params: m must not be NULL");
    TG_CHECK(m->vt == &tg__nn_batchnorm_vt, TG_EINVAL,
             "nn_batchnorm_params: m is a %s module, not BatchNorm", tg_module_type_name(m));
    const tg__bn_state *s = m->state;
    if (nspatial) *nspatial = s->nspatial;
    if (eps) *eps = s->eps;
    if (momentum) *momentum = s->momentum;
    if (affine) *affine = s->affine;
    if (track_running_stats) *track_running_stats = s->track;
    return TG_OK;
}

bool tg__nn_batchnorm_tracks(const tg_module *m)
{
    return m->vt == &tg__nn_batchnorm_vt && ((const tg__bn_state *)m->state)->track;
}

double tg__nn_batchnorm_swap_momentum(tg_module *m, double momentum)
{
    tg__bn_state *s = m->state;
    double old = s->momentum;
    s->momentum = momentum;
    return old;
}
