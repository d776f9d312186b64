/* src/ops/conv_params.c - parameter validation and output extents shared by
 * conv and conv_transpose, the output_padding helper and activation names. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "ops/conv_internal.h"

const char *tg__conv_opname(bool transpose, int nsp)
{
    static const char *names[2][4] = {
        {"conv", "conv1d", "conv2d", "conv3d"},
        {"conv_transpose", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}};
    return names[transpose][(nsp >= 1 && nsp <= 3) ? nsp : 0];
}

void tg__conv_params_default(tg_conv_params *p)
{
    tg_conv_params d = TG_CONV_PARAMS_INIT;
    *p = d;
}

void tg_conv_params_set_padding(tg_conv_params *p, int64_t pad)
{
    if (!p) return;
    for (int a = 0; a < TG_CONV_MAX_SPATIAL; a++) p->padding[a][0] = p->padding[a][1] = pad;
}

int tg__conv_pad_pairs(const char *op, const tg_conv_params *p, int nsp, int64_t *pads,
                       tg_conv_params *conv, bool *any)
{
    *conv = *p;
    conv->padding_mode = TG_PAD_CONSTANT;
    *any = false;
    for (int k = 0; k < nsp; k++) {
        TG_CHECK(p->padding[k][0] >= 0 && p->padding[k][1] >= 0, TG_EINVAL,
                 "%s: padding[%d]=(%lld, %lld) must be >= 0", op, k,
                 (long long)p->padding[k][0], (long long)p->padding[k][1]);
        pads[2 * k] = p->padding[nsp - 1 - k][0];
        pads[2 * k + 1] = p->padding[nsp - 1 - k][1];
        *any |= pads[2 * k] != 0 || pads[2 * k + 1] != 0;
        conv->padding[k][0] = conv->padding[k][1] = 0;
    }
    return TG_OK;
}

int tg__conv_check_params(const char *op, int n, const tg_conv_params *p, bool transpose)
{
    /* the kernels pad with zeros; tg_conv pads x first in the other modes */
    TG_CHECK(p->padding_mode == TG_PAD_CONSTANT, TG_EINVAL,
             "%s: padding_mode=%d: only zero padding here (tg_conv pads x with tg_pad in "
             "the other modes)", op, (int)p->padding_mode);
    for (int a = 0; a < n; a++) {
        TG_CHECK(p->stride[a] >= 1, TG_EINVAL, "%s: stride[%d]=%lld must be >= 1", op, a,
                 (long long)p->stride[a]);
        TG_CHECK(p->dilation[a] >= 1, TG_EINVAL, "%s: dilation[%d]=%lld must be >= 1", op, a,
                 (long long)p->dilation[a]);
        TG_CHECK(p->padding[a][0] >= 0 && p->padding[a][1] >= 0, TG_EINVAL,
                 "%s: padding[%d]=(%lld, %lld) must be >= 0", op, a,
                 (long long)p->padding[a][0], (long long)p->padding[a][1]);
        TG_CHECK(p->stride[a] <= TG_CONV_MAX_PARAM && p->dilation[a] <= TG_CONV_MAX_PARAM &&
                     p->padding[a][0] <= TG_CONV_MAX_PARAM && p->padding[a][1] <= TG_CONV_MAX_PARAM &&
                     (!transpose || p->output_padding[a] <= TG_CONV_MAX_PARAM),
                 TG_EINVAL,
                 "%s: axis %d: stride=%lld, dilation=%lld, padding=(%lld, %lld)%s must each be "
                 "<= %lld", op, a, (long long)p->stride[a], (long long)p->dilation[a],
                 (long long)p->padding[a][0], (long long)p->padding[a][1],
                 transpose ? " and output_padding" : "", (long long)TG_CONV_MAX_PARAM);
        if (!transpose) continue;
        int64_t lim = p->stride[a] > p->dilation[a] ? p->stride[a] : p->dilation[a];
        TG_CHECK(p->output_padding[a] >= 0, TG_EINVAL,
                 "%s: output_padding[%d]=%lld must be >= 0", op, a,
                 (long long)p->output_padding[a]);
        TG_CHECK(p->output_padding[a] < lim, TG_EINVAL,
                 "%s: output_padding[%d]=%lld must be < max(stride, dilation)=%lld", op, a,
                 (long long)p->output_padding[a], (long long)lim);
    }
    TG_CHECK(p->act >= TG_ACT_NONE && p->act < TG_ACT_COUNT, TG_EINVAL,
             "%s: act=%d is not a tg_activation (0..%d)", op, (int)p->act, TG_ACT_COUNT - 1);
    TG_CHECK(p->algo >= TG_CONV_ALGO_DEFAULT && p->algo <= TG_CONV_ALGO_REFERENCE, TG_EINVAL,
             "%s: algo=%d is not a tg_conv_algo (0..2)", op, (int)p->algo);
    return TG_OK;
}

/* a*b for a, b >= 0, or -1 when it exceeds INT64_MAX/4: four such terms then
 * add up without overflow. */
static int64_t small_product(int64_t a, int64_t b)
{
    return b != 0 && a > (INT64_MAX / 4) / b ? -1 : a * b;
}

/* The extent formula of axis a (see tapegrad/conv.h) without the >= 1 rule;
 * an error when in or k is < 1, or when a term would overflow.  Parameters
 * are already checked, so each is <= TG_CONV_MAX_PARAM. */
static int raw_extent(const char *op, bool transpose, int a, int64_t in, int64_t k,
                      const tg_conv_params *p, int64_t *out)
{
    const int64_t s = p->stride[a], d = p->dilation[a], lo = p->padding[a][0],
                  hi = p->padding[a][1];
    TG_CHECK(in >= 1 && k >= 1, TG_EINVAL, "%s: in[%d]=%lld and k[%d]=%lld must be >= 1", op,
             a, (long long)in, a, (long long)k);
    const int64_t span = small_product(d, k - 1), grow = transpose ? small_product(in - 1, s) : 0;
    TG_CHECK(span >= 0 && grow >= 0 && in <= INT64_MAX / 4, TG_EINVAL,
             "%s: the output extent on axis %d overflows (input %lld, kernel %lld, stride "
             "%lld, dilation %lld)", op, a, (long long)in, (long long)k, (long long)s,
             (long long)d);
    if (transpose) {
        *out = grow - lo - hi + span + p->output_padding[a] + 1;
    } else {
        /* floor((S + lo + hi - d*(K-1) - 1) / s) + 1, with a true floor. */
        int64_t num = in + lo + hi - span - 1;
        *out = num < 0 ? 0 : num / s + 1;
    }
    return TG_OK;
}

/* The output extent of axis a; an error when it would be < 1. */
static int axis_extent(const char *op, bool transpose, int a, int64_t in, int64_t k,
                       const tg_conv_params *p, int64_t *out)
{
    int64_t e = 0;
    TG_TRY(raw_extent(op, transpose, a, in, k, p, &e));
    TG_CHECK(e >= 1, TG_EINVAL,
             "%s: output extent on axis %d would be %lld (input %lld, kernel %lld, "
             "stride %lld, dilation %lld, padding (%lld, %lld)); it must be >= 1",
             op, a, (long long)e, (long long)in, (long long)k, (long long)p->stride[a],
             (long long)p->dilation[a], (long long)p->padding[a][0], (long long)p->padding[a][1]);
    *out = e;
    return TG_OK;
}

static int output_sizes(bool transpose, int64_t *out, int n, const int64_t *in,
                        const int64_t *k, const tg_conv_params *p)
{
    const char *op = tg__conv_opname(transpose, n);
    TG_CHECK(out && in && k && p, TG_EINVAL, "%s: out, in, k and p must not be NULL", op);
    TG_CHECK(n >= 1 && n <= TG_CONV_MAX_SPATIAL, TG_EINVAL,
             "%s: n=%d spatial axes must be 1, 2 or 3", op, n);
    TG_TRY(tg__conv_check_params(op, n, p, transpose));
    int64_t tmp[TG_CONV_MAX_SPATIAL];
    for (int a = 0; a < n; a++) TG_TRY(axis_extent(op, transpose, a, in[a], k[a], p, &tmp[a]));
    memcpy(out, tmp, (size_t)n * sizeof *out);
    return TG_OK;
}

int tg_conv_output_size(int64_t *out, int n, const int64_t *in, const int64_t *k,
                        const tg_conv_params *p)
{
    return output_sizes(false, out, n, in, k, p);
}

int tg_conv_transpose_output_size(int64_t *out, int n, const int64_t *in, const int64_t *k,
                                  const tg_conv_params *p)
{
    return output_sizes(true, out, n, in, k, p);
}

/* With output_padding op in [0, max(s, d)), the extent is base + op where
 * base = (S-1)*s - lo - hi + d*(K-1) + 1; so want is reachable iff it lies in
 * [base, base + max(s, d) - 1] (and is >= 1). */
int tg_conv_transpose_output_padding_for(tg_conv_params *p, int n, const int64_t *in,
                                         const int64_t *k, const int64_t *want)
{
    const char *op = tg__conv_opname(true, n);
    TG_CHECK(p && in && k && want, TG_EINVAL, "%s: p, in, k and want must not be NULL", op);
    TG_CHECK(n >= 1 && n <= TG_CONV_MAX_SPATIAL, TG_EINVAL,
             "%s: n=%d spatial axes must be 1, 2 or 3", op, n);
    tg_conv_params q = *p;
    for (int a = 0; a < n; a++) q.output_padding[a] = 0;
    TG_TRY(tg__conv_check_params(op, n, &q, true));
    for (int a = 0; a < n; a++) {
        const int64_t s = p->stride[a], d = p->dilation[a];
        int64_t base = 0;
        TG_TRY(raw_extent(op, true, a, in[a], k[a], &q, &base));
        int64_t top = base + (s > d ? s : d) - 1;
        int64_t lo = base < 1 ? 1 : base;
        TG_CHECK(want[a] >= lo && want[a] <= top, TG_EINVAL,
                 "%s: output size %lld on axis %d cannot be reached: reachable %lld..%lld", op,
                 (long long)want[a], a, (long long)lo, (long long)top);
        q.output_padding[a] = want[a] - base;
    }
    memcpy(p->output_padding, q.output_padding, sizeof p->output_padding);
    return TG_OK;
}

/* ---- tensor validation ---- */

static int check_tensors(const char *op, bool transpose, const tg_tensor *x,
                         const tg_tensor *w, const tg_tensor *b)
{
    TG_CHECK(x, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(w, TG_EINVAL, "%s: weight must not be NULL", op);
    if (w->ndim >= 3 && w->ndim <= 5) {   /* the weight's rank names the op */
        op = tg__conv_opname(transpose, w->ndim - 2);
        TG_CHECK(x->ndim == w->ndim, TG_ESHAPE,
                 "%s: x must be %d-D (B, C, %d spatial) like the %d-D weight, or %d-D "
                 "without the batch dim; got %d-D",
                 op, w->ndim, w->ndim - 2, w->ndim, w->ndim - 1, x->ndim);
    }
    TG_CHECK(x->ndim >= 3 && x->ndim <= 5, TG_ESHAPE,
             "%s: x must be 3-D, 4-D or 5-D (B, C, spatial...), got %d-D", op, x->ndim);
    op = tg__conv_opname(transpose, x->ndim - 2);
    TG_CHECK(w->ndim == x->ndim, TG_ESHAPE, "%s: weight must be %d-D like x, got %d-D", op,
             x->ndim, w->ndim);
    TG_CHECK(tg_dtype_is_float(x->dtype), TG_EDTYPE, "%s: x must be a float tensor, got %s", op,
             tg_dtype_name(x->dtype));
    TG_CHECK(w->dtype == x->dtype, TG_EDTYPE, "%s: weight dtype %s must match x dtype %s", op,
             tg_dtype_name(w->dtype), tg_dtype_name(x->dtype));
    TG_CHECK(!b || b->dtype == x->dtype, TG_EDTYPE, "%s: bias dtype %s must match x dtype %s",
             op, tg_dtype_name(b ? b->dtype : x->dtype), tg_dtype_name(x->dtype));
    /* every extent but the batch must be >= 1 (the batch may be 0); the
     * shapes are formatted only for the message */
    char buf[96];
    for (int a = 1; a < x->ndim; a++)
        if (x->shape[a] < 1)
            return tg__error(TG_ESHAPE, "%s: x %s has %s %lld: it must be >= 1", op,
                             tg_shape_str(buf, sizeof buf, x->ndim, x->shape),
                             a == 1 ? "C_in =" : "a spatial extent of", (long long)x->shape[a]);
    for (int a = 0; a < w->ndim; a++)
        if (w->shape[a] < 1)
            return tg__error(TG_ESHAPE, "%s: weight %s has extent %lld in dim %d: every "
                             "extent must be >= 1", op,
                             tg_shape_str(buf, sizeof buf, w->ndim, w->shape),
                             (long long)w->shape[a], a);
    return TG_OK;
}

/* Channel rules; *c_out receives C_out. */
static int check_channels(const char *op, bool transpose, const tg_tensor *x,
                          const tg_tensor *w, const tg_tensor *b, int64_t groups,
                          int64_t *c_out)
{
    const int64_t c_in = x->shape[1];
    TG_CHECK(groups >= 1, TG_EINVAL, "%s: groups=%lld must be >= 1", op, (long long)groups);
    TG_CHECK(c_in % groups == 0, TG_EINVAL, "%s: groups=%lld must divide C_in=%lld", op,
             (long long)groups, (long long)c_in);
    if (transpose) {
        TG_CHECK(w->shape[0] == c_in, TG_ESHAPE,
                 "%s: weight.shape[0]=%lld must equal x's channels C_in=%lld", op,
                 (long long)w->shape[0], (long long)c_in);
        *c_out = w->shape[1] * groups;
    } else {
        TG_CHECK(w->shape[1] * groups == c_in, TG_ESHAPE,
                 "%s: weight.shape[1]=%lld times groups=%lld must equal x's channels C_in=%lld",
                 op, (long long)w->shape[1], (long long)groups, (long long)c_in);
        *c_out = w->shape[0];
        TG_CHECK(*c_out % groups == 0, TG_EINVAL, "%s: groups=%lld must divide C_out=%lld", op,
                 (long long)groups, (long long)*c_out);
    }
    TG_CHECK(!b || (b->ndim == 1 && b->shape[0] == *c_out), TG_ESHAPE,
             "%s: bias must be 1-D of length C_out=%lld, got %d-D with %lld elements", op,
             (long long)*c_out, b ? b->ndim : 0, (long long)(b ? tg_tensor_numel(b) : 0));
    return TG_OK;
}

int tg__conv_validate(bool transpose, const tg_tensor *x, const tg_tensor *w,
                      const tg_tensor *b, const tg_conv_params *p, tg__conv_geom *g,
                      int64_t *out_shape)
{
    TG_TRY(check_tensors(tg__conv_opname(transpose, 0), transpose, x, w, b));
    const int nsp = x->ndim - 2;
    const char *op = tg__conv_opname(transpose, nsp);
    int64_t c_out = 0;
    TG_TRY(check_channels(op, transpose, x, w, b, p->groups, &c_out));
    TG_TRY(tg__conv_check_params(op, nsp, p, transpose));
    int64_t ext[TG_CONV_MAX_SPATIAL];
    for (int a = 0; a < nsp; a++)
        TG_TRY(axis_extent(op, transpose, a, x->shape[2 + a], w->shape[2 + a], p, &ext[a]));

    tg__conv_geom geo = {.nsp = nsp, .batch = x->shape[0], .groups = p->groups};
    geo.c_img = transpose ? c_out : x->shape[1];
    geo.c_col = transpose ? x->shape[1] : c_out;
    for (int a = 0; a < 3; a++) {
        geo.img[a] = geo.col[a] = geo.k[a] = geo.stride[a] = geo.dil[a] = 1;
        geo.pad[a] = 0;
    }
    for (int a = 0; a < nsp; a++) {
        int ga = 3 - nsp + a;   /* the caller's axes are the trailing ones */
        geo.img[ga] = transpose ? ext[a] : x->shape[2 + a];
        geo.col[ga] = transpose ? x->shape[2 + a] : ext[a];
        geo.k[ga] = w->shape[2 + a];
        geo.stride[ga] = p->stride[a];
        geo.dil[ga] = p->dilation[a];
        geo.pad[ga] = p->padding[a][0];
    }
    /* The output and the column buffer of one sample, (c_img*K, O), must have
     * byte counts that fit in an int64 (huge strides or paddings can make
     * them overflow even when each extent fits). */
    int64_t shape[TG_MAX_DIMS] = {x->shape[0], c_out};
    memcpy(shape + 2, ext, (size_t)nsp * sizeof *ext);
    const int64_t cols[7] = {geo.c_img, geo.k[0], geo.k[1], geo.k[2],
                             geo.col[0], geo.col[1], geo.col[2]};
    char buf[160];
    TG_CHECK(tg__shape_bytes_fit(nsp + 2, shape, 8), TG_EINVAL,
             "%s: the output shape %s is too large: its byte count overflows an int64", op,
             tg_shape_str(buf, sizeof buf, nsp + 2, shape));
    TG_CHECK(tg__shape_bytes_fit(7, cols, 8), TG_EINVAL,
             "%s: the column buffer of one sample (C*prod(kernel), prod(positions)) is too "
             "large: its byte count overflows an int64", op);
    *g = geo;
    memcpy(out_shape, shape, (size_t)(nsp + 2) * sizeof *shape);
    return TG_OK;
}

/* ---- activations ---- */

static const char *const act_names[TG_ACT_COUNT] = {
    [TG_ACT_NONE] = "none",       [TG_ACT_RELU] = "relu",       [TG_ACT_LEAKY_RELU] = "leaky_relu",
    [TG_ACT_TANH] = "tanh",       [TG_ACT_SIGMOID] = "sigmoid", [TG_ACT_SILU] = "silu",
    [TG_ACT_GELU] = "gelu",       [TG_ACT_GELU_TANH] = "gelu_tanh",
};

const char *tg_activation_name(tg_activation a)
{
    return (a >= TG_ACT_NONE && a < TG_ACT_COUNT) ? act_names[a] : "?";
}

int tg_activation_parse(const char *s, tg_activation *act, double *slope)
{
    TG_CHECK(s && act, TG_EINVAL, "activation_parse: s and act must not be NULL");
    const char *colon = strchr(s, ':');
    size_t len = colon ? (size_t)(colon - s) : strlen(s);
    double sl = 0.01;
    if (len == 0 && !colon) {
        *act = TG_ACT_NONE;
        return TG_OK;
    }
    for (int a = 0; a < TG_ACT_COUNT; a++) {
        if (strlen(act_names[a]) != len || strncmp(s, act_names[a], len) != 0) continue;
        if (colon) {
            char *end;
            errno = 0;
            sl = strtod(colon + 1, &end);
            TG_CHECK(a == TG_ACT_LEAKY_RELU && end != colon + 1 && *end == '\0' && errno == 0 &&
                         isfinite(sl),
                     TG_EINVAL,
                     "activation_parse: \"%s\": only leaky_relu takes a parameter, a finite "
                     "number (\"leaky_relu:0.2\")", s);
        }
        *act = (tg_activation)a;
        if (slope && a == TG_ACT_LEAKY_RELU) *slope = sl;
        return TG_OK;
    }
    return tg__error(TG_EINVAL,
                     "activation_parse: \"%s\" is not one of none, relu, leaky_relu[:slope], "
                     "tanh, sigmoid, silu, gelu, gelu_tanh", s);
}
_Static_assert(sizeof act_names / sizeof act_names[0] == TG_ACT_COUNT, "act_names in sync");
