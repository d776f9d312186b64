/* src/nn/module_simple.c - parameter-free modules: Dropout and
 * Dropout1d/2d/3d, activations, ELU,
 * Hardtanh and ReLU6, Hardsigmoid, Hardswish, Mish, Flatten and Unflatten,
 * PixelShuffle and PixelUnshuffle. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "nn/module_internal.h"
#include "nn/rnn_internal.h"
#include "tapegrad/ops.h"

/* ---- Dropout ---- */

typedef struct tg__dropout_state {
    double p;
    uint64_t seed;
    uint64_t calls;    /* training forwards so far: call k uses counter block k << 40 */
} tg__dropout_state;

static const tg_module_vtable tg__nn_dropout_vts[4];

/* 0: Dropout; 1..3: Dropout1d/2d/3d (the module's vtable says which). */
static int tg__dropout_n_spatial(const tg_module *m)
{
    return (int)(m->vt - tg__nn_dropout_vts);
}

/* tg_dropout (or tg_dropout_channels) with the module's generator: each
 * training forward owns a disjoint range of 2^40 Philox blocks, so mask k
 * depends only on (seed, k), whatever the sizes of earlier calls. */
static int tg__dropout_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    tg__dropout_state *s = m->state;
    const bool draws = m->training && s->p > 0.0;
    tg_rng rng = {.seed = s->seed, .counter = s->calls << 40};
    const int ns = tg__dropout_n_spatial(m);
    TG_TRY(ns ? tg_dropout_channels(y, x, ns, s->p, m->training, &rng)
              : tg_dropout(y, x, s->p, m->training, &rng));
    if (draws) s->calls++;
    return TG_OK;
}

#define DROPOUT_VT(name)                                                      \
    {.type_name = name, .forward = tg__dropout_forward, .release = free,      \
     .state_size = sizeof(tg__dropout_state)}
/* Indexed by n_spatial: Dropout, Dropout1d, Dropout2d, Dropout3d. */
static const tg_module_vtable tg__nn_dropout_vts[4] = {
    DROPOUT_VT("Dropout"), DROPOUT_VT("Dropout1d"), DROPOUT_VT("Dropout2d"),
    DROPOUT_VT("Dropout3d")};
#undef DROPOUT_VT

static bool tg__nn_is_dropout(const tg_module *m)
{
    for (int n = 0; n < 4; n++)
        if (m->vt == &tg__nn_dropout_vts[n]) return true;
    return false;
}

/* An RNN, LSTM or GRU with dropout between layers counts its masks as a
 * Dropout does (rnn.c), so checkpoints and recomputation keep its count. */
static uint64_t *tg__rnn_dropout_calls(const tg_module *m)
{
    tg__rnn_state *s = tg__rnn_state_of(m);
    return s && s->o.dropout > 0 && s->o.num_layers > 1 ? &s->calls : NULL;
}

/* The mask count of a module that draws masks as a Dropout does without
 * being one: an RNN, LSTM or GRU (above), a MultiheadAttention
 * (multihead_attention.c), an AlphaDropout or FeatureAlphaDropout
 * (alpha_dropout.c); NULL for any other module. */
static uint64_t *counted_like_dropout(const tg_module *m)
{
    uint64_t *c = tg__rnn_dropout_calls(m);
    if (!c) c = tg__nn_mha_dropout_calls((tg_module *)m);
    return c ? c : tg__nn_alpha_dropout_calls((tg_module *)m);
}

bool tg__nn_dropout_calls(const tg_module *m, uint64_t *calls)
{
    const uint64_t *other = counted_like_dropout(m);
    if (other) {
        *calls = *other;
        return true;
    }
    if (!tg__nn_is_dropout(m)) return false;
    *calls = ((const tg__dropout_state *)m->state)->calls;
    return true;
}

void tg__nn_dropout_set_calls(tg_module *m, uint64_t calls)
{
    uint64_t *other = counted_like_dropout(m);
    if (other) {
        *other = calls;
        return;
    }
    TG_ASSERT(tg__nn_is_dropout(m));
    ((tg__dropout_state *)m->state)->calls = calls;
}

void tg__nn_dropout_set_seed(tg_module *m, uint64_t seed)
{
    uint64_t *mha = tg__nn_mha_dropout_seed(m);
    if (mha) {
        *mha = seed;
        return;
    }
    TG_ASSERT(tg__nn_is_dropout(m));
    ((tg__dropout_state *)m->state)->seed = seed;
}

int tg_nn_dropout_new(tg_module **out, double p, uint64_t seed)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_dropout_new: out must not be NULL");
    TG_CHECK(p >= 0.0 && p <= 1.0, TG_EINVAL, "nn_dropout_new: p=%g must be in [0, 1]", p);
    const tg__dropout_state s = {.p = p, .seed = seed, .calls = 0};
    return tg__module_new_state(out, &tg__nn_dropout_vts[0], &s);
}

int tg_nn_dropout_channels_new(tg_module **out, int n_spatial, double p, uint64_t seed)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_dropout_channels_new: out must not be NULL");
    TG_CHECK(n_spatial >= 1 && n_spatial <= 3, TG_EINVAL,
             "nn_dropout_channels_new: n_spatial=%d must be 1, 2 or 3", n_spatial);
    TG_CHECK(p >= 0.0 && p <= 1.0, TG_EINVAL, "nn_dropout_channels_new: p=%g must be in [0, 1]",
             p);
    const tg__dropout_state s = {.p = p, .seed = seed, .calls = 0};
    return tg__module_new_state(out, &tg__nn_dropout_vts[n_spatial], &s);
}

int tg_nn_dropout_params(const tg_module *m, int *n_spatial, double *p)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_dropout_params: m must not be NULL");
    TG_CHECK(tg__nn_is_dropout(m), TG_EINVAL,
             "nn_dropout_params: m is a %s module, not Dropout or Dropout1d/2d/3d",
             tg_module_type_name(m));
    const tg__dropout_state *s = m->state;
    if (n_spatial) *n_spatial = tg__dropout_n_spatial(m);
    if (p) *p = s->p;
    return TG_OK;
}

/* ---- activations ---- */

typedef struct tg__act_state {
    tg_activation act;
    double slope;
} tg__act_state;

static int tg__act_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const tg__act_state *s = m->state;
    switch (s->act) {
    case TG_ACT_RELU: return tg_relu(y, x);
    case TG_ACT_LEAKY_RELU: return tg_leaky_relu(y, x, s->slope);
    case TG_ACT_TANH: return tg_tanh(y, x);
    case TG_ACT_SIGMOID: return tg_sigmoid(y, x);
    case TG_ACT_SILU: return tg_silu(y, x);
    case TG_ACT_GELU: return tg_gelu(y, x);
    case TG_ACT_GELU_TANH: return tg_gelu_tanh(y, x);
    default: *y = tg_tensor_retain(x); return TG_OK;
    }
}

/* One vtable per tg_activation, each with torch's class name as its type
 * name (TG_ACT_NONE is nn.Identity's; both GELUs nn.GELU's): code that asks
 * whether a module is one of these uses tg__nn_is_basic_activation, not the
 * name, which other modules share. */
#define ACT_VT(name)                                                          \
    {.type_name = name, .forward = tg__act_forward, .release = free,          \
     .state_size = sizeof(tg__act_state)}
static const tg_module_vtable tg__nn_act_vts[TG_ACT_COUNT] = {
    [TG_ACT_NONE] = ACT_VT("Identity"),      [TG_ACT_RELU] = ACT_VT("ReLU"),
    [TG_ACT_LEAKY_RELU] = ACT_VT("LeakyReLU"), [TG_ACT_TANH] = ACT_VT("Tanh"),
    [TG_ACT_SIGMOID] = ACT_VT("Sigmoid"),    [TG_ACT_SILU] = ACT_VT("SiLU"),
    [TG_ACT_GELU] = ACT_VT("GELU"),          [TG_ACT_GELU_TANH] = ACT_VT("GELU"),
};
#undef ACT_VT
static_assert(sizeof tg__nn_act_vts / sizeof tg__nn_act_vts[0] == TG_ACT_COUNT,
              "an activation module's vtable for each tg_activation");

bool tg__nn_is_basic_activation(const tg_module *m)
{
    for (int a = 0; m && a < TG_ACT_COUNT; a++)
        if (m->vt == &tg__nn_act_vts[a]) return true;
    return false;
}

int tg_nn_activation_new(tg_module **out, tg_activation act, double slope)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_activation_new: out must not be NULL");
    TG_CHECK((int)act >= 0 && act < TG_ACT_COUNT, TG_EINVAL,
             "nn_activation_new: act=%d is not a tg_activation", (int)act);
    TG_CHECK(isfinite(slope), TG_EINVAL, "nn_activation_new: slope=%g must be finite", slope);
    const tg__act_state s = {act, slope};
    return tg__module_new_state(out, &tg__nn_act_vts[act], &s);
}

int tg_nn_gelu_new(tg_module **out, const char *approximate)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_gelu_new: out must not be NULL");
    const bool none = !approximate || strcmp(approximate, "none") == 0;
    TG_CHECK(none || strcmp(approximate, "tanh") == 0, TG_EINVAL,
             "nn_gelu_new: approximate=\"%s\" must be \"none\" or \"tanh\", as torch's",
             approximate);
    return tg_nn_activation_new(out, none ? TG_ACT_GELU : TG_ACT_GELU_TANH, 0.0);
}

/* ---- ELU ---- */

typedef struct tg__elu_state {
    double alpha;
} tg__elu_state;

static int tg__elu_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    return tg_elu(y, x, ((const tg__elu_state *)m->state)->alpha);
}

static const tg_module_vtable tg__nn_elu_vt = {.type_name = "ELU", .forward = tg__elu_forward,
                                               .release = free,
                                               .state_size = sizeof(tg__elu_state)};

int tg_nn_elu_new(tg_module **out, double alpha)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_elu_new: out must not be NULL");
    TG_CHECK(isfinite(alpha), TG_EINVAL, "nn_elu_new: alpha=%g must be finite", alpha);
    const tg__elu_state s = {.alpha = alpha};
    return tg__module_new_state(out, &tg__nn_elu_vt, &s);
}

int tg_nn_elu_alpha(const tg_module *m, double *alpha)
{
    TG_CHECK(m != NULL && alpha != NULL, TG_EINVAL, "nn_elu_alpha: m and alpha must not be NULL");
    TG_CHECK(m->vt == &tg__nn_elu_vt, TG_EINVAL, "nn_elu_alpha: m is a %s module, not ELU",
             tg_module_type_name(m));
    *alpha = ((const tg__elu_state *)m->state)->alpha;
    return TG_OK;
}

/* ---- Hardtanh, ReLU6 ---- */

typedef struct tg__hardtanh_state {
    double min_val, max_val;
} tg__hardtanh_state;

static int tg__hardtanh_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const tg__hardtanh_state *s = m->state;
    return tg_hardtanh(y, x, s->min_val, s->max_val);
}

static const tg_module_vtable tg__nn_hardtanh_vt = {
    .type_name = "Hardtanh", .forward = tg__hardtanh_forward, .release = free,
    .state_size = sizeof(tg__hardtanh_state)};
/* torch's ReLU6 is a Hardtanh(0, 6) under its own name */
static const tg_module_vtable tg__nn_relu6_vt = {
    .type_name = "ReLU6", .forward = tg__hardtanh_forward, .release = free,
    .state_size = sizeof(tg__hardtanh_state)};

int tg_nn_hardtanh_new(tg_module **out, double min_val, double max_val)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_hardtanh_new: out must not be NULL");
    TG_CHECK(min_val < max_val, TG_EINVAL,
             "nn_hardtanh_new: max_val=%g must be > min_val=%g (NaN is neither)", max_val,
             min_val);
    return tg__module_new_state(out, &tg__nn_hardtanh_vt,
                                &(tg__hardtanh_state){min_val, max_val});
}

int tg_nn_relu6_new(tg_module **out)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_relu6_new: out must not be NULL");
    return tg__module_new_state(out, &tg__nn_relu6_vt, &(tg__hardtanh_state){0.0, 6.0});
}

int tg_nn_hardtanh_bounds(const tg_module *m, double *min_val, double *max_val)
{
    TG_CHECK(m != NULL && min_val != NULL && max_val != NULL, TG_EINVAL,
             "nn_hardtanh_bounds: m, min_val and max_val must not be NULL");
    TG_CHECK(m->vt == &tg__nn_hardtanh_vt || m->vt == &tg__nn_relu6_vt, TG_EINVAL,
             "nn_hardtanh_bounds: m is a %s module, not Hardtanh or ReLU6",
             tg_module_type_name(m));
    const tg__hardtanh_state *s = m->state;
    *min_val = s->min_val;
    *max_val = s->max_val;
    return TG_OK;
}

/* ---- Hardsigmoid, Hardswish, Mish: no state ---- */

static int tg__hardsigmoid_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    (void)m;
    return tg_hardsigmoid(y, x);
}

static int tg__hardswish_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    (void)m;
    return tg_hardswish(y, x);
}

static int tg__mish_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    (void)m;
    return tg_mish(y, x);
}

static const tg_module_vtable tg__nn_hardsigmoid_vt = {.type_name = "Hardsigmoid",
                                                       .forward = tg__hardsigmoid_forward};
static const tg_module_vtable tg__nn_hardswish_vt = {.type_name = "Hardswish",
                                                     .forward = tg__hardswish_forward};
static const tg_module_vtable tg__nn_mish_vt = {.type_name = "Mish", .forward = tg__mish_forward};

int tg_nn_hardsigmoid_new(tg_module **out)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_hardsigmoid_new: out must not be NULL");
    return tg_module_new(out, &tg__nn_hardsigmoid_vt, NULL);
}

int tg_nn_hardswish_new(tg_module **out)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_hardswish_new: out must not be NULL");
    return tg_module_new(out, &tg__nn_hardswish_vt, NULL);
}

int tg_nn_mish_new(tg_module **out)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_mish_new: out must not be NULL");
    return tg_module_new(out, &tg__nn_mish_vt, NULL);
}

/* ---- Flatten / Unflatten ---- */

typedef struct tg__reshape_state {
    int dim0, dim1;                 /* Flatten: start, end; Unflatten: dim, ndim */
    int64_t shape[TG_MAX_DIMS];     /* Unflatten's sizes */
} tg__reshape_state;

static int tg__flatten_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const tg__reshape_state *s = m->state;
    return tg_flatten(y, x, s->dim0, s->dim1);
}

static const tg_module_vtable tg__nn_flatten_vt = {
    .type_name = "Flatten", .forward = tg__flatten_forward, .release = free,
    .state_size = sizeof(tg__reshape_state)};

int tg_nn_flatten_new(tg_module **out, int start_dim, int end_dim)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_flatten_new: out must not be NULL");
    TG_CHECK(abs(start_dim) <= TG_MAX_DIMS && abs(end_dim) <= TG_MAX_DIMS, TG_EINVAL,
             "nn_flatten_new: start_dim=%d, end_dim=%d must be within +-%d", start_dim, end_dim,
             TG_MAX_DIMS);
    tg__reshape_state s = {.dim0 = start_dim, .dim1 = end_dim};
    return tg__module_new_state(out, &tg__nn_flatten_vt, &s);
}

static int tg__unflatten_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const tg__reshape_state *s = m->state;
    return tg_unflatten(y, x, s->dim0, s->dim1, s->shape);
}

static const tg_module_vtable tg__nn_unflatten_vt = {
    .type_name = "Unflatten", .forward = tg__unflatten_forward, .release = free,
    .state_size = sizeof(tg__reshape_state)};

int tg_nn_unflatten_new(tg_module **out, int dim, int ndim, const int64_t *shape)
{
    TG_CHECK(out != NULL && shape != NULL, TG_EINVAL,
             "nn_unflatten_new: out and shape must not be NULL");
    TG_CHECK(ndim >= 1 && ndim <= TG_MAX_DIMS, TG_EINVAL,
             "nn_unflatten_new: ndim=%d must be in 1..%d", ndim, TG_MAX_DIMS);
    TG_CHECK(abs(dim) <= TG_MAX_DIMS, TG_EINVAL, "nn_unflatten_new: dim=%d is out of range", dim);
    tg__reshape_state s = {.dim0 = dim, .dim1 = ndim};
    int inferred = -1;
    for (int i = 0; i < ndim; i++) {
        TG_CHECK(shape[i] >= 1 || shape[i] == -1, TG_EINVAL,
                 "nn_unflatten_new: shape[%d]=%lld must be >= 1 or -1 (inferred)", i,
                 (long long)shape[i]);
        TG_CHECK(shape[i] != -1 || inferred < 0, TG_EINVAL,
                 "nn_unflatten_new: shape[%d] and shape[%d] are both -1; only one size can be "
                 "inferred", inferred, i);
        if (shape[i] == -1) inferred = i;
        s.shape[i] = shape[i];
    }
    return tg__module_new_state(out, &tg__nn_unflatten_vt, &s);
}

/* ---- PixelShuffle / PixelUnshuffle ---- */

static int tg__pixel_shuffle_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    return tg_pixel_shuffle(y, x, *(const int64_t *)m->state);
}

static int tg__pixel_unshuffle_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    return tg_pixel_unshuffle(y, x, *(const int64_t *)m->state);
}

static const tg_module_vtable tg__nn_pixel_shuffle_vt = {
    .type_name = "PixelShuffle", .forward = tg__pixel_shuffle_forward, .release = free,
    .state_size = sizeof(int64_t)};
static const tg_module_vtable tg__nn_pixel_unshuffle_vt = {
    .type_name = "PixelUnshuffle", .forward = tg__pixel_unshuffle_forward, .release = free,
    .state_size = sizeof(int64_t)};

static int tg__pixel_module_new(tg_module **out, const tg_module_vtable *vt, int64_t r,
                                const char *fn)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", fn);
    TG_CHECK(r >= 1 && r <= ((int64_t)1 << 31), TG_EINVAL, "%s: r=%lld must be in [1, 2^31]", fn,
             (long long)r);
    return tg__module_new_state(out, vt, &r);
}

int tg_nn_pixel_shuffle_new(tg_module **out, int64_t r)
{
    return tg__pixel_module_new(out, &tg__nn_pixel_shuffle_vt, r, "nn_pixel_shuffle_new");
}

int tg_nn_pixel_unshuffle_new(tg_module **out, int64_t r)
{
    return tg__pixel_module_new(out, &tg__nn_pixel_unshuffle_vt, r, "nn_pixel_unshuffle_new");
}

/* ---- introspection ---- */

int tg_nn_activation_params(const tg_module *m, tg_activation *act, double *slope)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_activation_params: m must not be NULL");
    TG_CHECK(tg__nn_is_basic_activation(m), TG_EINVAL,
             "nn_activation_params: m is a %s module, not one of tg_nn_activation_new",
             tg_module_type_name(m));
    const tg__act_state *s = m->state;
    if (act) *act = s->act;
    if (slope) *slope = s->slope;
    return TG_OK;
}

int tg_nn_flatten_params(const tg_module *m, int *start_dim, int *end_dim)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_flatten_params: m must not be NULL");
    TG_CHECK(m->vt == &tg__nn_flatten_vt, TG_EINVAL,
             "nn_flatten_params: m is a %s module, not Flatten", tg_module_type_name(m));
    const tg__reshape_state *s = m->state;
    if (start_dim) *start_dim = s->dim0;
    if (end_dim) *end_dim = s->dim1;
    return TG_OK;
}

int tg_nn_unflatten_params(const tg_module *m, int *dim, int *ndim, int64_t *shape)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_unflatten_params: m must not be NULL");
    TG_CHECK(m->vt == &tg__nn_unflatten_vt, TG_EINVAL,
             "nn_unflatten_params: m is a %s module, not Unflatten", tg_module_type_name(m));
    const tg__reshape_state *s = m->state;
    if (dim) *dim = s->dim0;
    if (ndim) *ndim = s->dim1;
    if (shape) memcpy(shape, s->shape, (size_t)s->dim1 * sizeof *shape);
    return TG_OK;
}

int tg_nn_pixel_shuffle_params(const tg_module *m, int64_t *r, bool *unshuffle)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_pixel_shuffle_params: m must not be NULL");
    const bool un = m->vt == &tg__nn_pixel_unshuffle_vt;
    TG_CHECK(un || m->vt == &tg__nn_pixel_shuffle_vt, TG_EINVAL,
             "nn_pixel_shuffle_params: m is a %s module, not PixelShuffle or PixelUnshuffle",
             tg_module_type_name(m));
    if (r) *r = *(const int64_t *)m->state;
    if (unshuffle) *unshuffle = un;
    return TG_OK;
}
