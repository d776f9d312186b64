/* src/onnx/onnx_channel.c - the ONNX nodes of the modules that mix
 * channels: ChannelShuffle and LocalResponseNorm (tapegrad/nn.h), read
 * through their public introspection.
 *
 * Mapping (docs/onnx.md), for x (N, C, S...) and R = prod S:
 *   ChannelShuffle(g)       -> Reshape (N, g, C/g, S...), Transpose of
 *                              axes 1 and 2, Reshape (N, C, S...)
 *   LocalResponseNorm(size, alpha, beta, k), size odd
 *                           -> LRN(size', alpha', beta, bias = k), on x read
 *                              as (N, C, R, 1) when it is not 4-d (ONNX
 *                              Runtime's LRN takes 4-d inputs only)
 *   LocalResponseNorm, size even
 *                           -> x / (k + alpha' AveragePool(x^2))^beta, the
 *                              squares read as (N, 1, C, R) and pooled over
 *                              (size', 1) with pads (lo, hi) along C,
 *                              count_include_pad
 *
 * torch sums the squares of channels c - size/2 .. c + (size-1)/2 (zeros
 * outside 0 .. C-1) and divides by size; ONNX's LRN sums channels
 * c - (size-1)/2 .. c + size/2 with alpha / size.  The two windows are
 * the same for an odd size and one channel apart for an even one, hence
 * the pooled form there.  A side of the window longer than C - 1 channels
 * reaches past every channel, so each side is cut to at most C - 1, the
 * window to size' = lo + hi + 1, and alpha' = alpha size' / size keeps
 * alpha / size (ONNX Runtime's LRN allocates a buffer that grows with
 * size, and AveragePool's kernel is size' taps). */
#include <string.h>

#include "core/core.h"
#include "onnx/onnx_graph.h"

/* A 1-d i64 initializer "<scope>/<what>" of n values: its name in *name. */
static int tg__onnx_ints_init(const tg__onnx_site *s, const char *what, int n,
                              const int64_t *v, const char **name)
{
    *name = tg__onnx_str(s->g, "%s/%s", s->scope, what);
    if (!*name) return TG_ENOMEM;
    const int64_t len = n;
    return tg__onnx_init_raw(s->g, *name, TG__ONNX_INT64, 1, &len, v, sizeof *v);
}

/* Reshape(x, shape) with shape an initializer "<scope>/<what>". */
static int tg__onnx_reshape_to(const tg__onnx_site *s, const char *x, const char *what, int n,
                               const int64_t *shape, const char **y)
{
    const char *sh = NULL;
    TG_TRY(tg__onnx_ints_init(s, what, n, shape, &sh));
    return tg__onnx_add(s->g, NULL, y, s->scope, "Reshape", 2, (const char *const[]){x, sh});
}

int tg__onnx_emit_channel_shuffle(const tg__onnx_site *s, const char **y)
{
    int64_t groups;
    TG_TRY(tg_nn_channel_shuffle_params(s->m, &groups));
    const int nd = tg_tensor_ndim(s->xt);
    TG_ASSERT(nd >= 3 && nd <= TG_MAX_DIMS);   /* the forward's rule */
    const int64_t c = tg_tensor_dim(s->xt, 1);
    /* 0: the input's batch, so that it stays free */
    int64_t split[TG_MAX_DIMS + 1] = {0, groups, c / groups}, back[TG_MAX_DIMS] = {0, c};
    int64_t perm[TG_MAX_DIMS + 1] = {0, 2, 1};
    for (int d = 2; d < nd; d++) {
        split[d + 1] = back[d] = tg_tensor_dim(s->xt, d);
        perm[d + 1] = d + 1;
    }
    const char *a = NULL, *b = NULL;
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_reshape_to(s, s->x, "split_shape", nd + 1, split, &a));
    TG_TRY(tg__onnx_add(s->g, &n, &b, s->scope, "Transpose", 1, (const char *const[]){a}));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "perm", nd + 1, perm));
    return tg__onnx_reshape_to(s, b, "shape", nd, back, y);
}

/* x's shape with batch 0 (the input's), for the Reshape back. */
static void tg__onnx_lrn_back(const tg__onnx_site *s, int64_t *back)
{
    back[0] = 0;
    for (int d = 1; d < tg_tensor_ndim(s->xt); d++) back[d] = tg_tensor_dim(s->xt, d);
}

/* size odd: one LRN node, on x read as (N, C, R, 1) unless it is 4-d. */
static int tg__onnx_lrn_node(const tg__onnx_site *s, int64_t size, double alpha, double beta,
                             double k, const char **y)
{
    const int nd = tg_tensor_ndim(s->xt);
    const char *x = s->x, *t = NULL;
    if (nd != 4) {
        const int64_t four[4] = {0, tg_tensor_dim(s->xt, 1), -1, 1};
        TG_TRY(tg__onnx_reshape_to(s, s->x, "lrn_shape", 4, four, &x));
    }
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_add(s->g, &n, nd != 4 ? &t : y, s->scope, "LRN", 1,
                        (const char *const[]){x}));
    TG_TRY(tg__onnx_attr_int(s->g, n, "size", size));
    TG_TRY(tg__onnx_attr_float(s->g, n, "alpha", (float)alpha));
    TG_TRY(tg__onnx_attr_float(s->g, n, "beta", (float)beta));
    TG_TRY(tg__onnx_attr_float(s->g, n, "bias", (float)k));
    if (nd == 4) return TG_OK;
    int64_t back[TG_MAX_DIMS];
    tg__onnx_lrn_back(s, back);
    return tg__onnx_reshape_to(s, t, "shape", nd, back, y);
}

/* size even: torch's window, lo channels before and hi after, pooled. */
static int tg__onnx_lrn_pooled(const tg__onnx_site *s, int64_t lo, int64_t hi, double alpha,
                               double beta, double k, const char **y)
{
    const int nd = tg_tensor_ndim(s->xt);
    const int64_t four[4] = {0, 1, tg_tensor_dim(s->xt, 1), -1};
    const char *sq = NULL, *r = NULL, *avg = NULL, *u = NULL, *v = NULL, *w = NULL, *den = NULL;
    TG_TRY(tg__onnx_add(s->g, NULL, &sq, s->scope, "Mul", 2, (const char *const[]){s->x, s->x}));
    TG_TRY(tg__onnx_reshape_to(s, sq, "pool_shape", 4, four, &r));
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_add(s->g, &n, &avg, s->scope, "AveragePool", 1, (const char *const[]){r}));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "kernel_shape", 2, (const int64_t[]){lo + hi + 1, 1}));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "pads", 4, (const int64_t[]){lo, 0, hi, 0}));
    TG_TRY(tg__onnx_attr_int(s->g, n, "count_include_pad", 1));
    int64_t back[TG_MAX_DIMS];
    tg__onnx_lrn_back(s, back);
    TG_TRY(tg__onnx_reshape_to(s, avg, "shape", nd, back, &u));
    const char *ca = tg__onnx_const(s->g, s->scope, "alpha", (float)alpha);
    const char *ck = tg__onnx_const(s->g, s->scope, "k", (float)k);
    const char *cb = tg__onnx_const(s->g, s->scope, "beta", (float)beta);
    if (!ca || !ck || !cb) return TG_ENOMEM;
    TG_TRY(tg__onnx_add(s->g, NULL, &v, s->scope, "Mul", 2, (const char *const[]){u, ca}));
    TG_TRY(tg__onnx_add(s->g, NULL, &w, s->scope, "Add", 2, (const char *const[]){v, ck}));
    TG_TRY(tg__onnx_add(s->g, NULL, &den, s->scope, "Pow", 2, (const char *const[]){w, cb}));
    return tg__onnx_add(s->g, NULL, y, s->scope, "Div", 2, (const char *const[]){s->x, den});
}

int tg__onnx_emit_local_response_norm(const tg__onnx_site *s, const char **y)
{
    int64_t size;
    double alpha, beta, k;
    TG_TRY(tg_nn_local_response_norm_params(s->m, &size, &alpha, &beta, &k));
    TG_ASSERT(tg_tensor_ndim(s->xt) >= 3);   /* the forward's rule */
    const int64_t c = tg_tensor_dim(s->xt, 1);
    TG_CHECK(c > 0 && tg_tensor_numel(s->xt) > 0, TG_EUNSUPPORTED,
             "onnx_export: module '%s' (LocalResponseNorm) runs on an empty input, which "
             "ONNX Runtime's LRN and AveragePool do not take", s->path[0] ? s->path : "<top>");
    /* torch's window sides, each cut to at most C - 1 channels */
    const int64_t lo = size / 2 < c - 1 ? size / 2 : c - 1;
    const int64_t hi = (size - 1) / 2 < c - 1 ? (size - 1) / 2 : c - 1;
    const int64_t cut = lo + hi + 1;
    const double a = alpha * (double)cut / (double)size;
    if (size % 2 == 1) return tg__onnx_lrn_node(s, cut, a, beta, k, y);
    return tg__onnx_lrn_pooled(s, lo, hi, a, beta, k, y);
}
