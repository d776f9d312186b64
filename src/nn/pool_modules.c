/* src/nn/pool_modules.c - the parameter-free resampling modules:
 * AvgPool{1,2,3}d, MaxPool{1,2,3}d, AdaptiveAvgPool{1,2,3}d,
 * AdaptiveMaxPool{1,2,3}d and Upsample
 * (nearest, linear or bicubic, antialiased or not, integer scale factors).
 * Each keeps its n_spatial and parameters, checked when it is made, and runs
 * the op of tapegrad/pool.h. */
#include <string.h>

#include "nn/module_internal.h"
#include "ops/pool_internal.h"
#include "tapegrad/pool.h"

typedef struct tg__pool_state {
    int ns;
    tg_pool_params p;                       /* pools: strides resolved */
    int64_t scale[TG_POOL_MAX_SPATIAL];     /* Upsample */
    int64_t size[TG_POOL_MAX_SPATIAL];      /* Adaptive*Pool: output size, 0 for x's */
    tg_upsample_mode mode;                  /* Upsample */
    bool align_corners;                     /* Upsample, linear or bicubic */
    bool antialias;                         /* Upsample, bilinear or bicubic */
} tg__pool_state;

static int tg__avg_pool_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const tg__pool_state *s = m->state;
    return tg_avg_pool(y, x, s->ns, &s->p);
}

static int tg__max_pool_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const tg__pool_state *s = m->state;
    return tg_max_pool(y, x, s->ns, &s->p);
}

/* return_indices: (y, indices) */
static int tg__max_pool_outputs(tg_module *m, tg_tensor **ys, int n, tg_tensor *const *xs)
{
    (void)n;   /* 1: tg_module_forward_outputs checks it against forward's */
    const tg__pool_state *s = m->state;
    return tg_max_pool_with_indices(&ys[0], &ys[1], xs[0], s->ns, &s->p);
}

static int tg__adaptive_avg_pool_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const tg__pool_state *s = m->state;
    return tg_adaptive_avg_pool(y, x, s->ns, s->size);
}

static int tg__adaptive_max_pool_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const tg__pool_state *s = m->state;
    return tg_adaptive_max_pool(y, NULL, x, s->ns, s->size);
}

static int tg__upsample_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const tg__pool_state *s = m->state;
    if (s->mode == TG_UPSAMPLE_NEAREST) return tg_upsample_nearest(y, x, s->ns, s->scale);
    /* linear, cubic: the output extents S*s, as nn.Upsample's scale_factor
     * gives */
    const bool cubic = s->mode == TG_UPSAMPLE_BICUBIC;
    const char *op = s->antialias ? tg__upsample_aa_opname(cubic)
                                  : tg__pool_opname(cubic ? TG__UPSAMPLE_CUBIC
                                                          : TG__UPSAMPLE_LINEAR, s->ns);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    const int nd = tg_tensor_ndim(x);
    TG_TRY(tg__pool_check_rank(op, s->ns, nd));
    int64_t size[TG_POOL_MAX_SPATIAL];
    for (int a = 0; a < s->ns; a++) {
        const int64_t in = tg_tensor_shape(x)[nd - s->ns + a];
        TG_CHECK(in <= TG_POOL_MAX_PARAM / s->scale[a], TG_EINVAL,
                 "%s: spatial dim %d of extent %lld times scale %lld is above %lld", op, a,
                 (long long)in, (long long)s->scale[a], (long long)TG_POOL_MAX_PARAM);
        size[a] = in * s->scale[a];
    }
    if (s->antialias) return tg_upsample_antialias(y, x, s->mode, size, s->align_corners);
    if (cubic) return tg_upsample_bicubic(y, x, size, s->align_corners);
    return tg_upsample_linear(y, x, s->ns, size, s->align_corners);
}

/* Indexed by n_spatial - 1: the type name says the rank, as torch's class. */
static const tg_module_vtable tg__nn_avg_pool_vt[TG_POOL_MAX_SPATIAL] = {
    {.type_name = "AvgPool1d", .forward = tg__avg_pool_forward, .release = free,
     .state_size = sizeof(tg__pool_state)},
    {.type_name = "AvgPool2d", .forward = tg__avg_pool_forward, .release = free,
     .state_size = sizeof(tg__pool_state)},
    {.type_name = "AvgPool3d", .forward = tg__avg_pool_forward, .release = free,
     .state_size = sizeof(tg__pool_state)}};
static const tg_module_vtable tg__nn_max_pool_vt[TG_POOL_MAX_SPATIAL] = {
    {.type_name = "MaxPool1d", .forward = tg__max_pool_forward, .release = free,
     .state_size = sizeof(tg__pool_state)},
    {.type_name = "MaxPool2d", .forward = tg__max_pool_forward, .release = free,
     .state_size = sizeof(tg__pool_state)},
    {.type_name = "MaxPool3d", .forward = tg__max_pool_forward, .release = free,
     .state_size = sizeof(tg__pool_state)}};
/* The same with return_indices (tg_nn_max_pool_set_return_indices swaps
 * the two): two outputs. */
static const tg_module_vtable tg__nn_max_pool_ri_vt[TG_POOL_MAX_SPATIAL] = {
    {.type_name = "MaxPool1d", .forward = tg__max_pool_forward, .release = free,
     .state_size = sizeof(tg__pool_state), .forward_outputs = tg__max_pool_outputs,
     .n_outputs = 2},
    {.type_name = "MaxPool2d", .forward = tg__max_pool_forward, .release = free,
     .state_size = sizeof(tg__pool_state), .forward_outputs = tg__max_pool_outputs,
     .n_outputs = 2},
    {.type_name = "MaxPool3d", .forward = tg__max_pool_forward, .release = free,
     .state_size = sizeof(tg__pool_state), .forward_outputs = tg__max_pool_outputs,
     .n_outputs = 2}};
static const tg_module_vtable tg__nn_adaptive_avg_pool_vt[TG_POOL_MAX_SPATIAL] = {
    {.type_name = "AdaptiveAvgPool1d", .forward = tg__adaptive_avg_pool_forward,
     .release = free, .state_size = sizeof(tg__pool_state)},
    {.type_name = "AdaptiveAvgPool2d", .forward = tg__adaptive_avg_pool_forward,
     .release = free, .state_size = sizeof(tg__pool_state)},
    {.type_name = "AdaptiveAvgPool3d", .forward = tg__adaptive_avg_pool_forward,
     .release = free, .state_size = sizeof(tg__pool_state)}};
static const tg_module_vtable tg__nn_adaptive_max_pool_vt[TG_POOL_MAX_SPATIAL] = {
    {.type_name = "AdaptiveMaxPool1d", .forward = tg__adaptive_max_pool_forward,
     .release = free, .state_size = sizeof(tg__pool_state)},
    {.type_name = "AdaptiveMaxPool2d", .forward = tg__adaptive_max_pool_forward,
     .release = free, .state_size = sizeof(tg__pool_state)},
    {.type_name = "AdaptiveMaxPool3d", .forward = tg__adaptive_max_pool_forward,
     .release = free, .state_size = sizeof(tg__pool_state)}};
static const tg_module_vtable tg__nn_upsample_vt = {
    .type_name = "Upsample", .forward = tg__upsample_forward, .release = free,
    .state_size = sizeof(tg__pool_state)};

static int tg__pool_new(tg_module **out, tg__pool_kind kind, int n_spatial,
                        const tg_pool_params *p)
{
    const char *fn = kind == TG__AVG_POOL ? "nn_avg_pool_new" : "nn_max_pool_new";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", fn);
    tg__pool_state s = {.ns = n_spatial};
    TG_TRY(tg__pool_check_params(fn, kind, n_spatial, p, &s.p));
    const tg_module_vtable *vt = kind == TG__AVG_POOL ? tg__nn_avg_pool_vt : tg__nn_max_pool_vt;
    return tg__module_new_state(out, &vt[n_spatial - 1], &s);
}

int tg_nn_avg_pool_new(tg_module **out, int n_spatial, const tg_pool_params *p)
{
    return tg__pool_new(out, TG__AVG_POOL, n_spatial, p);
}

int tg_nn_max_pool_new(tg_module **out, int n_spatial, const tg_pool_params *p)
{
    return tg__pool_new(out, TG__MAX_POOL, n_spatial, p);
}

int tg_nn_max_pool_set_return_indices(tg_module *m, bool on)
{
    const char *fn = "nn_max_pool_set_return_indices";
    TG_CHECK(m != NULL, TG_EINVAL, "%s: m must not be NULL", fn);
    for (int i = 0; i < TG_POOL_MAX_SPATIAL; i++)
        if (m->vt == &tg__nn_max_pool_vt[i] || m->vt == &tg__nn_max_pool_ri_vt[i]) {
            m->vt = on ? &tg__nn_max_pool_ri_vt[i] : &tg__nn_max_pool_vt[i];
            return TG_OK;
        }
    return tg__error(TG_EINVAL, "%s: m is a %s module, not MaxPoolNd", fn,
                     tg_module_type_name(m));
}

/* An adaptive pooling module (max: AdaptiveMaxPoolNd, else AdaptiveAvgPoolNd),
 * its output size checked (messages name fn). */
static int tg__adaptive_pool_new(tg_module **out, bool max, int n_spatial,
                                 const int64_t *output_size)
{
    const char *fn = max ? "nn_adaptive_max_pool_new" : "nn_adaptive_avg_pool_new";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", fn);
    TG_CHECK(n_spatial >= 1 && n_spatial <= TG_POOL_MAX_SPATIAL, TG_EINVAL,
             "%s: n_spatial=%d must be 1, 2 or 3", fn, n_spatial);
    TG_CHECK(output_size != NULL, TG_EINVAL, "%s: output_size must not be NULL", fn);
    tg__pool_state s = {.ns = n_spatial};
    for (int a = 0; a < n_spatial; a++) {
        TG_CHECK(output_size[a] >= 0 && output_size[a] <= TG_POOL_MAX_PARAM, TG_EINVAL,
                 "%s: output_size[%d]=%lld must be in [1, %lld], or 0 for x's extent", fn, a,
                 (long long)output_size[a], (long long)TG_POOL_MAX_PARAM);
        s.size[a] = output_size[a];
    }
    const tg_module_vtable *vt = max ? tg__nn_adaptive_max_pool_vt : tg__nn_adaptive_avg_pool_vt;
    return tg__module_new_state(out, &vt[n_spatial - 1], &s);
}

int tg_nn_adaptive_avg_pool_new(tg_module **out, int n_spatial, const int64_t *output_size)
{
    return tg__adaptive_pool_new(out, false, n_spatial, output_size);
}

int tg_nn_adaptive_max_pool_new(tg_module **out, int n_spatial, const int64_t *output_size)
{
    return tg__adaptive_pool_new(out, true, n_spatial, output_size);
}

/* An Upsample of that mode, antialiased or not (fn: the public function, for
 * the messages). */
static int tg__upsample_new(const char *fn, tg_module **out, int n_spatial, const int64_t *scale,
                            tg_upsample_mode mode, bool align_corners, bool antialias)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", fn);
    TG_TRY(tg__upsample_check_scale(fn, n_spatial, scale));
    tg__pool_state s = {.ns = n_spatial, .mode = mode, .align_corners = align_corners,
                        .antialias = antialias};
    memcpy(s.scale, scale, (size_t)n_spatial * sizeof *scale);
    return tg__module_new_state(out, &tg__nn_upsample_vt, &s);
}

int tg_nn_upsample_new(tg_module **out, int n_spatial, const int64_t *scale)
{
    return tg__upsample_new("nn_upsample_new", out, n_spatial, scale, TG_UPSAMPLE_NEAREST, false,
                            false);
}

int tg_nn_upsample_linear_new(tg_module **out, int n_spatial, const int64_t *scale,
                              bool align_corners)
{
    return tg__upsample_new("nn_upsample_linear_new", out, n_spatial, scale, TG_UPSAMPLE_LINEAR,
                            align_corners, false);
}

int tg_nn_upsample_bicubic_new(tg_module **out, const int64_t *scale, bool align_corners)
{
    return tg__upsample_new("nn_upsample_bicubic_new", out, 2, scale, TG_UPSAMPLE_BICUBIC,
                            align_corners, false);
}

int tg_nn_upsampling_nearest2d_new(tg_module **out, const int64_t *scale)
{
    return tg__upsample_new("nn_upsampling_nearest2d_new", out, 2, scale, TG_UPSAMPLE_NEAREST,
                            false, false);
}

int tg_nn_upsampling_bilinear2d_new(tg_module **out, const int64_t *scale)
{
    return tg__upsample_new("nn_upsampling_bilinear2d_new", out, 2, scale, TG_UPSAMPLE_LINEAR,
                            true, false);
}

int tg_nn_upsample_antialias_new(tg_module **out, tg_upsample_mode mode, const int64_t *scale,
                                 bool align_corners)
{
    const char *fn = "nn_upsample_antialias_new";
    TG_TRY(tg__upsample_check_aa_mode(fn, mode));
    return tg__upsample_new(fn, out, 2, scale, mode, align_corners, true);
}

/* ---- introspection ---- */

static bool tg__is_pool(const tg_module *m)
{
    for (int i = 0; i < TG_POOL_MAX_SPATIAL; i++)
        if (m->vt == &tg__nn_avg_pool_vt[i] || m->vt == &tg__nn_max_pool_vt[i] ||
            m->vt == &tg__nn_max_pool_ri_vt[i])
            return true;
    return false;
}

int tg_nn_pool_params(const tg_module *m, int *n_spatial, tg_pool_params *p)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_pool_params: m must not be NULL");
    TG_CHECK(tg__is_pool(m), TG_EINVAL,
             "nn_pool_params: m is a %s module, not AvgPoolNd or MaxPoolNd",
             tg_module_type_name(m));
    const tg__pool_state *s = m->state;
    if (n_spatial) *n_spatial = s->ns;
    if (p) *p = s->p;
    return TG_OK;
}

int tg_nn_adaptive_pool_params(const tg_module *m, int *n_spatial, int64_t *output_size)
{
    const char *fn = "nn_adaptive_pool_params";
    TG_CHECK(m != NULL, TG_EINVAL, "%s: m must not be NULL", fn);
    bool adaptive = false;
    for (int i = 0; i < TG_POOL_MAX_SPATIAL; i++)
        adaptive |= m->vt == &tg__nn_adaptive_avg_pool_vt[i] ||
                    m->vt == &tg__nn_adaptive_max_pool_vt[i];
    TG_CHECK(adaptive, TG_EINVAL,
             "%s: m is a %s module, not AdaptiveAvgPoolNd or AdaptiveMaxPoolNd", fn,
             tg_module_type_name(m));
    const tg__pool_state *s = m->state;
    if (n_spatial) *n_spatial = s->ns;
    if (output_size) memcpy(output_size, s->size, (size_t)s->ns * sizeof *output_size);
    return TG_OK;
}

int tg_nn_upsample_params(const tg_module *m, int *n_spatial, int64_t *scale)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_upsample_params: m must not be NULL");
    TG_CHECK(m->vt == &tg__nn_upsample_vt, TG_EINVAL,
             "nn_upsample_params: m is a %s module, not Upsample", tg_module_type_name(m));
    const tg__pool_state *s = m->state;
    if (n_spatial) *n_spatial = s->ns;
    if (scale) memcpy(scale, s->scale, (size_t)s->ns * sizeof *scale);
    return TG_OK;
}

int tg_nn_upsample_mode(const tg_module *m, tg_upsample_mode *mode, bool *align_corners)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_upsample_mode: m must not be NULL");
    TG_CHECK(m->vt == &tg__nn_upsample_vt, TG_EINVAL,
             "nn_upsample_mode: m is a %s module, not Upsample", tg_module_type_name(m));
    const tg__pool_state *s = m->state;
    if (mode) *mode = s->mode;
    if (align_corners) *align_corners = s->align_corners;
    return TG_OK;
}

int tg_nn_upsample_antialias(const tg_module *m, bool *antialias)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_upsample_antialias: m must not be NULL");
    TG_CHECK(m->vt == &tg__nn_upsample_vt, TG_EINVAL,
             "nn_upsample_antialias: m is a %s module, not Upsample", tg_module_type_name(m));
    if (antialias) *antialias = ((const tg__pool_state *)m->state)->antialias;
    return TG_OK;
}
