/* src/nn/channel_modules.c - the parameter-free modules that work across
 * channels: LocalResponseNorm(size, alpha, beta, k) and
 * ChannelShuffle(groups), running tg_local_response_norm and
 * tg_channel_shuffle (tapegrad/ops.h) with the options kept in their
 * state. */
#include <math.h>
#include <stdlib.h>

#include "nn/module_internal.h"
#include "tapegrad/ops.h"
#include "tapegrad/pool.h"

/* ---- LocalResponseNorm ---- */

typedef struct lrn_state {
    int64_t size;
    double alpha, beta, k;
} lrn_state;

static int lrn_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const lrn_state *s = m->state;
    return tg_local_response_norm(y, x, s->size, s->alpha, s->beta, s->k);
}

static const tg_module_vtable lrn_vt = {.type_name = "LocalResponseNorm", .forward = lrn_forward,
                                        .release = free, .state_size = sizeof(lrn_state)};

int tg_nn_local_response_norm_new(tg_module **out, int64_t size, double alpha, double beta,
                                  double k)
{
    const char *op = "nn_local_response_norm_new";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(size >= 1 && size <= TG_POOL_MAX_PARAM, TG_EINVAL,
             "%s: size=%lld must be in [1, 2^31 - 1]", op, (long long)size);
    TG_CHECK(!isnan(alpha) && !isnan(beta) && !isnan(k), TG_EINVAL,
             "%s: alpha, beta and k must not be NaN", op);
    const lrn_state s = {.size = size, .alpha = alpha, .beta = beta, .k = k};
    return tg__module_new_state(out, &lrn_vt, &s);
}

int tg_nn_local_response_norm_params(const tg_module *m, int64_t *size, double *alpha,
                                     double *beta, double *k)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_local_response_norm_params: m must not be NULL");
    TG_CHECK(m->vt == &lrn_vt, TG_EINVAL,
             "nn_local_response_norm_params: m is a %s module, not LocalResponseNorm",
             tg_module_type_name(m));
    const lrn_state *s = m->state;
    if (size) *size = s->size;
    if (alpha) *alpha = s->alpha;
    if (beta) *beta = s->beta;
    if (k) *k = s->k;
    return TG_OK;
}

/* ---- ChannelShuffle ---- */

static int shuffle_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    return tg_channel_shuffle(y, x, *(const int64_t *)m->state);
}

static const tg_module_vtable shuffle_vt = {.type_name = "ChannelShuffle",
                                            .forward = shuffle_forward, .release = free,
                                            .state_size = sizeof(int64_t)};

int tg_nn_channel_shuffle_new(tg_module **out, int64_t groups)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_channel_shuffle_new: out must not be NULL");
    TG_CHECK(groups >= 1, TG_EINVAL, "nn_channel_shuffle_new: groups=%lld must be positive",
             (long long)groups);
    return tg__module_new_state(out, &shuffle_vt, &groups);
}

int tg_nn_channel_shuffle_params(const tg_module *m, int64_t *groups)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_channel_shuffle_params: m must not be NULL");
    TG_CHECK(m->vt == &shuffle_vt, TG_EINVAL,
             "nn_channel_shuffle_params: m is a %s module, not ChannelShuffle",
             tg_module_type_name(m));
    if (groups) *groups = *(const int64_t *)m->state;
    return TG_OK;
}
