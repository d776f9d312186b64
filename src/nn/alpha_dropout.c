/* src/nn/alpha_dropout.c - nn.AlphaDropout(p) and nn.FeatureAlphaDropout(p):
 * tg_alpha_dropout and tg_feature_alpha_dropout (tapegrad/ops.h) in
 * training, the identity in eval.  Their masks are counted as Dropout's
 * (module_simple.c): the k-th training forward draws from counter block
 * k << 40 of the module's seed, and checkpoints and recomputation keep k
 * (tg__nn_alpha_dropout_calls). */
#include <stdlib.h>

#include "nn/module_internal.h"
#include "tapegrad/ops.h"

typedef struct alpha_state {
    double p;
    uint64_t seed;
    uint64_t calls;   /* training forwards that drew a mask */
} alpha_state;

static int alpha_forward(tg_module *m, tg_tensor **y, tg_tensor *x);

/* [0]: AlphaDropout, [1]: FeatureAlphaDropout. */
static const tg_module_vtable alpha_vts[2] = {
    {.type_name = "AlphaDropout", .forward = alpha_forward, .release = free,
     .state_size = sizeof(alpha_state)},
    {.type_name = "FeatureAlphaDropout", .forward = alpha_forward, .release = free,
     .state_size = sizeof(alpha_state)},
};

static int alpha_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    alpha_state *s = m->state;
    const bool draws = m->training && s->p > 0.0 && s->p < 1.0;
    tg_rng rng = {.seed = s->seed, .counter = s->calls << 40};
    const bool feature = m->vt == &alpha_vts[1];
    TG_TRY(feature ? tg_feature_alpha_dropout(y, x, s->p, m->training, &rng)
                   : tg_alpha_dropout(y, x, s->p, m->training, &rng));
    if (draws) s->calls++;
    return TG_OK;
}

uint64_t *tg__nn_alpha_dropout_calls(tg_module *m)
{
    if (m->vt != &alpha_vts[0] && m->vt != &alpha_vts[1]) return NULL;
    return &((alpha_state *)m->state)->calls;
}

static int alpha_new(tg_module **out, int feature, double p, uint64_t seed, const char *op)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(p >= 0.0 && p <= 1.0, TG_EINVAL, "%s: p=%g must be in [0, 1]", op, p);
    const alpha_state s = {.p = p, .seed = seed, .calls = 0};
    return tg__module_new_state(out, &alpha_vts[feature], &s);
}

int tg_nn_alpha_dropout_new(tg_module **out, double p, uint64_t seed)
{
    return alpha_new(out, 0, p, seed, "nn_alpha_dropout_new");
}

int tg_nn_feature_alpha_dropout_new(tg_module **out, double p, uint64_t seed)
{
    return alpha_new(out, 1, p, seed, "nn_feature_alpha_dropout_new");
}

int tg_nn_alpha_dropout_params(const tg_module *m, bool *feature, double *p)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_alpha_dropout_params: m must not be NULL");
    const bool f = m->vt == &alpha_vts[1];
    TG_CHECK(f || m->vt == &alpha_vts[0], TG_EINVAL,
             "nn_alpha_dropout_params: m is a %s module, not AlphaDropout or "
             "FeatureAlphaDropout", tg_module_type_name(m));
    if (feature) *feature = f;
    if (p) *p = ((const alpha_state *)m->state)->p;
    return TG_OK;
}
