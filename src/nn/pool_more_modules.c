/* src/nn/pool_more_modules.c - MaxUnpool{1,2,3}d, LPPool{1,2}d and
 * FractionalMaxPool{2,3}d: each keeps its parameters, checked when it is
 * made, and runs tg_max_unpool, tg_lp_pool or tg_fractional_max_pool
 * (tapegrad/pool.h).  A FractionalMaxPool draws its samples, U[0, 1) of x's
 * dtype and shape (B, C, N) ((1, C, N) unbatched), as Dropout draws its
 * masks: the k-th forward from counter block k << 40 of the module's seed. */
#include <math.h>
#include <stdlib.h>

#include "nn/module_internal.h"
#include "tapegrad/pool.h"

typedef struct more_pool_state {
    int ns;
    tg_pool_params p;                       /* MaxUnpool, LPPool */
    double norm_type;                       /* LPPool */
    int64_t size[TG_POOL_MAX_SPATIAL];      /* FractionalMaxPool: output_size, or */
    double ratio[TG_POOL_MAX_SPATIAL];      /* output_ratio (has_ratio) */
    bool has_ratio;
    uint64_t seed, calls;                   /* FractionalMaxPool: forwards that drew */
} more_pool_state;

/* (x, indices) */
static int unpool_forward(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs)
{
    (void)n;   /* the vtable's n_inputs */
    const more_pool_state *s = m->state;
    return tg_max_unpool(y, xs[0], xs[1], s->ns, &s->p, NULL);
}

static int lp_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const more_pool_state *s = m->state;
    return tg_lp_pool(y, x, s->ns, s->norm_type, &s->p);
}

static int frac_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    more_pool_state *s = m->state;
    const char *op = s->ns == 2 ? "FractionalMaxPool2d" : "FractionalMaxPool3d";
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    const int nd = tg_tensor_ndim(x);
    TG_CHECK(nd == s->ns + 1 || nd == s->ns + 2, TG_ESHAPE,
             "%s: x has %d dims; expected %d (unbatched) or %d", op, nd, s->ns + 1, s->ns + 2);
    const int64_t shape[3] = {nd == s->ns + 2 ? tg_tensor_dim(x, 0) : 1,
                              tg_tensor_dim(x, nd - s->ns - 1), s->ns};
    tg_rng rng = {.seed = s->seed, .counter = s->calls << 40};
    tg_tensor *u = NULL;
    TG_TRY(tg_tensor_rand(&u, tg_tensor_dtype(x), 3, shape, &rng));
    const int rc = tg_fractional_max_pool(y, NULL, x, s->ns, s->p.kernel,
                                          s->has_ratio ? NULL : s->size,
                                          s->has_ratio ? s->ratio : NULL, u);
    tg_tensor_release(u);
    if (rc >= 0) s->calls++;
    return rc;
}

static const tg_module_vtable unpool_vt[TG_POOL_MAX_SPATIAL] = {
    {.type_name = "MaxUnpool1d", .forward_n = unpool_forward, .n_inputs = 2, .release = free,
     .state_size = sizeof(more_pool_state)},
    {.type_name = "MaxUnpool2d", .forward_n = unpool_forward, .n_inputs = 2, .release = free,
     .state_size = sizeof(more_pool_state)},
    {.type_name = "MaxUnpool3d", .forward_n = unpool_forward, .n_inputs = 2, .release = free,
     .state_size = sizeof(more_pool_state)}};
static const tg_module_vtable lp_vt[2] = {
    {.type_name = "LPPool1d", .forward = lp_forward, .release = free,
     .state_size = sizeof(more_pool_state)},
    {.type_name = "LPPool2d", .forward = lp_forward, .release = free,
     .state_size = sizeof(more_pool_state)}};
static const tg_module_vtable frac_vt[2] = {
    {.type_name = "FractionalMaxPool2d", .forward = frac_forward, .release = free,
     .state_size = sizeof(more_pool_state)},
    {.type_name = "FractionalMaxPool3d", .forward = frac_forward, .release = free,
     .state_size = sizeof(more_pool_state)}};

/* Checks kernel, stride and padding of p's first n axes (messages name
 * fn). */
static int check_kernel(const char *fn, int n, const tg_pool_params *p)
{
    TG_CHECK(p != NULL, TG_EINVAL, "%s: p must not be NULL", fn);
    for (int a = 0; a < n; a++) {
        TG_CHECK(p->kernel[a] >= 1 && p->kernel[a] <= TG_POOL_MAX_PARAM, TG_EINVAL,
                 "%s: kernel[%d]=%lld must be in [1, %lld]", fn, a, (long long)p->kernel[a],
                 (long long)TG_POOL_MAX_PARAM);
        TG_CHECK(p->stride[a] >= 0 && p->stride[a] <= TG_POOL_MAX_PARAM, TG_EINVAL,
                 "%s: stride[%d]=%lld must be in [1, %lld] (0: the kernel)", fn, a,
                 (long long)p->stride[a], (long long)TG_POOL_MAX_PARAM);
        TG_CHECK(p->padding[a] >= 0 && p->padding[a] <= TG_POOL_MAX_PARAM, TG_EINVAL,
                 "%s: padding[%d]=%lld must be in [0, %lld]", fn, a, (long long)p->padding[a],
                 (long long)TG_POOL_MAX_PARAM);
    }
    return TG_OK;
}

int tg_nn_max_unpool_new(tg_module **out, int n_spatial, const tg_pool_params *p)
{
    const char *fn = "nn_max_unpool_new";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", fn);
    TG_CHECK(n_spatial >= 1 && n_spatial <= 3, TG_EINVAL, "%s: n_spatial=%d must be 1, 2 or 3",
             fn, n_spatial);
    TG_TRY(check_kernel(fn, n_spatial, p));
    more_pool_state s = {.ns = n_spatial, .p = *p};
    for (int a = 0; a < n_spatial; a++)
        if (s.p.stride[a] == 0) s.p.stride[a] = s.p.kernel[a];
    return tg__module_new_state(out, &unpool_vt[n_spatial - 1], &s);
}

int tg_nn_lp_pool_new(tg_module **out, int n_spatial, double norm_type, const tg_pool_params *p)
{
    const char *fn = "nn_lp_pool_new";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", fn);
    TG_CHECK(n_spatial == 1 || n_spatial == 2, TG_EINVAL, "%s: n_spatial=%d must be 1 or 2",
             fn, n_spatial);
    TG_CHECK(isfinite(norm_type) && norm_type != 0, TG_EINVAL,
             "%s: norm_type=%g must be finite and not 0", fn, norm_type);
    TG_TRY(check_kernel(fn, n_spatial, p));
    more_pool_state s = {.ns = n_spatial, .p = *p, .norm_type = norm_type};
    for (int a = 0; a < n_spatial; a++) {
        TG_CHECK(p->padding[a] == 0 && p->dilation[a] == 1, TG_EINVAL,
                 "%s: padding[%d] and dilation[%d] must be 0 and 1 (LPPool has neither)", fn, a,
                 a);
        if (s.p.stride[a] == 0) s.p.stride[a] = s.p.kernel[a];
    }
    return tg__module_new_state(out, &lp_vt[n_spatial - 1], &s);
}

int tg_nn_fractional_max_pool_new(tg_module **out, int n_spatial, const int64_t *kernel,
                                  const int64_t *output_size, const double *output_ratio,
                                  uint64_t seed)
{
    const char *fn = "nn_fractional_max_pool_new";
    TG_CHECK(out != NULL && kernel != NULL, TG_EINVAL, "%s: out and kernel must not be NULL",
             fn);
    TG_CHECK(n_spatial == 2 || n_spatial == 3, TG_EINVAL, "%s: n_spatial=%d must be 2 or 3",
             fn, n_spatial);
    TG_CHECK(output_size != NULL || output_ratio != NULL, TG_EINVAL,
             "%s: FractionalMaxPool requires specifying either an output size, or a pooling "
             "ratio", fn);
    TG_CHECK(output_size == NULL || output_ratio == NULL, TG_EINVAL,
             "%s: only one of output_size and output_ratio may be specified", fn);
    more_pool_state s = {.ns = n_spatial, .has_ratio = output_ratio != NULL, .seed = seed};
    for (int a = 0; a < n_spatial; a++) {
        TG_CHECK(kernel[a] >= 1 && kernel[a] <= TG_POOL_MAX_PARAM, TG_EINVAL,
                 "%s: kernel[%d]=%lld must be in [1, %lld]", fn, a, (long long)kernel[a],
                 (long long)TG_POOL_MAX_PARAM);
        s.p.kernel[a] = kernel[a];
        if (output_ratio) {
            TG_CHECK(output_ratio[a] > 0 && output_ratio[a] < 1, TG_EINVAL,
                     "%s: output_ratio[%d]=%g must be between 0 and 1", fn, a, output_ratio[a]);
            s.ratio[a] = output_ratio[a];
        } else {
            TG_CHECK(output_size[a] >= 1 && output_size[a] <= TG_POOL_MAX_PARAM, TG_EINVAL,
                     "%s: output_size[%d]=%lld must be in [1, %lld]", fn, a,
                     (long long)output_size[a], (long long)TG_POOL_MAX_PARAM);
            s.size[a] = output_size[a];
        }
    }
    return tg__module_new_state(out, &frac_vt[n_spatial - 2], &s);
}

/* ---- introspection ---- */

int tg_nn_max_unpool_params(const tg_module *m, int *n_spatial, tg_pool_params *p)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_max_unpool_params: m must not be NULL");
    bool is = false;
    for (int i = 0; i < TG_POOL_MAX_SPATIAL; i++) is |= m->vt == &unpool_vt[i];
    TG_CHECK(is, TG_EINVAL, "nn_max_unpool_params: m is a %s module, not MaxUnpoolNd",
             tg_module_type_name(m));
    const more_pool_state *s = m->state;
    if (n_spatial) *n_spatial = s->ns;
    if (p) *p = s->p;
    return TG_OK;
}

int tg_nn_lp_pool_params(const tg_module *m, int *n_spatial, double *norm_type,
                         tg_pool_params *p)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_lp_pool_params: m must not be NULL");
    TG_CHECK(m->vt == &lp_vt[0] || m->vt == &lp_vt[1], TG_EINVAL,
             "nn_lp_pool_params: m is a %s module, not LPPoolNd", tg_module_type_name(m));
    const more_pool_state *s = m->state;
    if (n_spatial) *n_spatial = s->ns;
    if (norm_type) *norm_type = s->norm_type;
    if (p) *p = s->p;
    return TG_OK;
}
