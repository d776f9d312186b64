/* src/nn/pair_modules.c - the modules whose forward takes two inputs
 * (x1, x2): Bilinear (weight (out, in1, in2) and bias (out), torch's
 * init), CosineSimilarity and PairwiseDistance.  Each runs the function of
 * tapegrad/ops.h or tapegrad/loss.h with the options kept in its state. */
#include <math.h>
#include <stdlib.h>

#include "nn/module_internal.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"

/* ---- Bilinear ---- */

static int bilinear_forward(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs)
{
    (void)n;   /* the vtable's n_inputs */
    return tg_bilinear(y, xs[0], xs[1], tg__module_local(m, "weight"),
                       tg__module_local(m, "bias"));
}

static const tg_module_vtable bilinear_vt = {
    .type_name = "Bilinear", .forward_n = bilinear_forward, .n_inputs = 2};

int tg_nn_bilinear_new(tg_module **out, int64_t in1_f, int64_t in2_f, int64_t out_f, bool bias,
                       tg_rng *rng)
{
    const char *op = "nn_bilinear_new";
    TG_CHECK(out != NULL && rng != NULL, TG_EINVAL, "%s: out and rng must not be NULL", op);
    TG_CHECK(in1_f > 0 && in2_f > 0 && out_f > 0, TG_EINVAL,
             "%s: in1_f=%lld, in2_f=%lld and out_f=%lld must be > 0", op, (long long)in1_f,
             (long long)in2_f, (long long)out_f);
    int64_t n = 0;
    TG_CHECK(!__builtin_mul_overflow(out_f, in1_f, &n) && !__builtin_mul_overflow(n, in2_f, &n),
             TG_EINVAL, "%s: a weight of %lld x %lld x %lld elements is too large", op,
             (long long)out_f, (long long)in1_f, (long long)in2_f);
    tg_module *m = NULL;
    TG_TRY(tg_module_new(&m, &bilinear_vt, NULL));
    tg_tensor *w = NULL, *b = NULL;
    const int64_t ws[3] = {out_f, in1_f, in2_f};
    int rc = tg__nn_add_param_zeros(m, "weight", 3, ws, &w);
    if (rc == TG_OK && bias) rc = tg__nn_add_param_zeros(m, "bias", 1, &out_f, &b);
    /* torch's reset_parameters: both from U(-1/sqrt(in1), 1/sqrt(in1)),
     * weight first (bound = 1 / sqrt(weight.size(1))) */
    if (rc == TG_OK) rc = tg__nn_init_uniform_fan_in(w, b, in1_f, rng);
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}

int tg_nn_bilinear_params(const tg_module *m, int64_t *in1_f, int64_t *in2_f, int64_t *out_f,
                          bool *bias)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_bilinear_params: m must not be NULL");
    TG_CHECK(m->vt == &bilinear_vt, TG_EINVAL,
             "nn_bilinear_params: m is a %s module, not Bilinear", tg_module_type_name(m));
    const tg_tensor *w = tg__module_local(m, "weight");
    if (out_f) *out_f = tg_tensor_dim(w, 0);
    if (in1_f) *in1_f = tg_tensor_dim(w, 1);
    if (in2_f) *in2_f = tg_tensor_dim(w, 2);
    if (bias) *bias = tg__module_local(m, "bias") != NULL;
    return TG_OK;
}

/* ---- CosineSimilarity, PairwiseDistance ---- */

typedef struct distance_state {
    int dim;        /* CosineSimilarity */
    double p;       /* PairwiseDistance */
    double eps;
    bool keepdim;   /* PairwiseDistance */
} distance_state;

static int cosine_forward(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs)
{
    (void)n;
    const distance_state *s = tg_module_state(m);
    return tg_cosine_similarity(y, xs[0], xs[1], s->dim, s->eps);
}

static int pairwise_forward(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs)
{
    (void)n;
    const distance_state *s = tg_module_state(m);
    return tg_pairwise_distance(y, xs[0], xs[1], s->p, s->eps, s->keepdim);
}

static const tg_module_vtable cosine_vt = {
    .type_name = "CosineSimilarity", .forward_n = cosine_forward, .n_inputs = 2,
    .release = free, .state_size = sizeof(distance_state)};
static const tg_module_vtable pairwise_vt = {
    .type_name = "PairwiseDistance", .forward_n = pairwise_forward, .n_inputs = 2,
    .release = free, .state_size = sizeof(distance_state)};

int tg_nn_cosine_similarity_new(tg_module **out, int dim, double eps)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_cosine_similarity_new: out must not be NULL");
    TG_CHECK(abs(dim) <= TG_MAX_DIMS, TG_EINVAL,
             "nn_cosine_similarity_new: dim=%d must be within +-%d", dim, TG_MAX_DIMS);
    TG_CHECK(!isnan(eps), TG_EINVAL, "nn_cosine_similarity_new: eps must not be NaN");
    const distance_state s = {.dim = dim, .eps = eps};
    return tg__module_new_state(out, &cosine_vt, &s);
}

int tg_nn_pairwise_distance_new(tg_module **out, double p, double eps, bool keepdim)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_pairwise_distance_new: out must not be NULL");
    TG_CHECK(!isnan(p) && !isnan(eps), TG_EINVAL,
             "nn_pairwise_distance_new: p and eps must not be NaN");
    const distance_state s = {.p = p, .eps = eps, .keepdim = keepdim};
    return tg__module_new_state(out, &pairwise_vt, &s);
}

int tg_nn_cosine_similarity_params(const tg_module *m, int *dim, double *eps)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_cosine_similarity_params: m must not be NULL");
    TG_CHECK(m->vt == &cosine_vt, TG_EINVAL,
             "nn_cosine_similarity_params: m is a %s module, not CosineSimilarity",
             tg_module_type_name(m));
    const distance_state *s = tg_module_state(m);
    if (dim) *dim = s->dim;
    if (eps) *eps = s->eps;
    return TG_OK;
}

int tg_nn_pairwise_distance_params(const tg_module *m, double *p, double *eps, bool *keepdim)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_pairwise_distance_params: m must not be NULL");
    TG_CHECK(m->vt == &pairwise_vt, TG_EINVAL,
             "nn_pairwise_distance_params: m is a %s module, not PairwiseDistance",
             tg_module_type_name(m));
    const distance_state *s = tg_module_state(m);
    if (p) *p = s->p;
    if (eps) *eps = s->eps;
    if (keepdim) *keepdim = s->keepdim;
    return TG_OK;
}
