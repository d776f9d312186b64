/* src/ops/pad.c - pad(x, pads, mode, value) (torch.nn.functional.pad) and
 * its adjoint pad_backward.
 *
 * pads holds (low, high) pairs for the last n/2 dims, the last dim first, as
 * PyTorch's; a negative padding removes elements from that end.  Along each
 * padded axis of extent I every output index o reads one input index
 * src(o), or none (the constant), with i = o - low:
 *   constant   i inside [0, I), else the value
 *   reflect    i mirrored at the ends of x without repeating them: -1 -> 1
 *   replicate  the nearest end of x
 *   circular   i inside [c, I - c'), else wrapped around that range:
 *              c + (i - c) mod (I - c - c'), where c = max(-low, 0) and
 *              c' = max(-high, 0) are the cropped elements (torch wraps
 *              around x after cropping it)
 * so pad is a gather (an affine map of x: linear plus the constant).  Its
 * gradient is pad_backward(g): every g element added into the x element it
 * was read from.  pad_backward is linear, and its gradient is pad of the
 * same mode with value 0: the two are each other's adjoint, so derivatives
 * of any order are these two ops. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "tapegrad/ops.h"

typedef struct pad_params {
    tg_pad_mode mode;
    double value;
    int n;                       /* entries of pads */
    int64_t pads[2 * TG_MAX_DIMS];
} pad_params;

static const char *mode_name(tg_pad_mode m)
{
    switch (m) {
    case TG_PAD_CONSTANT: return "constant";
    case TG_PAD_REFLECT: return "reflect";
    case TG_PAD_REPLICATE: return "replicate";
    case TG_PAD_CIRCULAR: return "circular";
    case TG_PAD_SYMMETRIC: return "symmetric";   /* refused by tg_pad */
    }
    return "?";
}

/* The input index output index o of an axis of extent `in`, padded by lo in
 * front and hi at the end, reads: -1 for the constant.  check_pads holds:
 * in >= 1 in the other modes, reflect's |i| within one fold, circular's
 * paddings within one wrap of the cropped range. */
static int64_t source(tg_pad_mode m, int64_t o, int64_t lo, int64_t hi, int64_t in)
{
    int64_t i = o - lo;
    if (i >= 0 && i < in) return i;
    switch (m) {
    case TG_PAD_CONSTANT: return -1;
    case TG_PAD_REFLECT: {   /* period 2(in - 1); pads < in keep one fold */
        if (in == 1) return 0;
        const int64_t p = 2 * (in - 1);
        i %= p;
        if (i < 0) i += p;
        return i < in ? i : p - i;
    }
    case TG_PAD_REPLICATE: return i < 0 ? 0 : in - 1;
    case TG_PAD_CIRCULAR: {   /* around [c, in - c'), x without its cropped ends */
        const int64_t c = lo < 0 ? -lo : 0, len = in - c - (hi < 0 ? -hi : 0);
        return c + (((i - c) % len) + len) % len;
    }
    case TG_PAD_SYMMETRIC: break;   /* refused by tg_pad */
    }
    return -1;
}

/* The padding of axis d of an ndim tensor (0 when not padded). */
static void axis_pads(const pad_params *p, int ndim, int d, int64_t *lo, int64_t *hi)
{
    const int k = ndim - 1 - d;   /* pairs count from the last dim */
    *lo = 2 * k < p->n ? p->pads[2 * k] : 0;
    *hi = 2 * k + 1 < p->n ? p->pads[2 * k + 1] : 0;
}

/* The source row-major offset in x of every output element (-1: the
 * constant), in a malloc'd table of numel(out) entries; NULL on ENOMEM. */
static int64_t *source_table(const pad_params *p, int ndim, const int64_t *xs,
                             const int64_t *os)
{
    const int64_t n = tg__numel(ndim, os);
    int64_t *src = malloc((size_t)(n > 0 ? n : 1) * sizeof *src);
    if (!src) return NULL;
    int64_t xstride[TG_MAX_DIMS], idx[TG_MAX_DIMS] = {0}, lo[TG_MAX_DIMS], hi[TG_MAX_DIMS];
    tg__contiguous_strides(ndim, xs, xstride);
    for (int d = 0; d < ndim; d++) axis_pads(p, ndim, d, &lo[d], &hi[d]);
    for (int64_t e = 0; e < n; e++) {
        int64_t off = 0;
        for (int d = 0; d < ndim && off >= 0; d++) {
            const int64_t i = source(p->mode, idx[d], lo[d], hi[d], xs[d]);
            off = i < 0 ? -1 : off + i * xstride[d];
        }
        src[e] = off;
        for (int d = ndim - 1; d >= 0; d--) {   /* next index, row-major */
            if (++idx[d] < os[d]) break;
            idx[d] = 0;
        }
    }
    return src;
}

/* The rules of one axis of extent `in` padded by (lo, hi), torch's: a
 * negative padding removes elements, at most the whole axis in constant and
 * circular mode (the cropped length len = in - c - c' >= 0), and in reflect
 * and replicate mode as many as leave a result of size >= 1; circular wraps
 * at most once around what is left. */
static int check_axis(tg_pad_mode mode, int d, int64_t in, int64_t lo, int64_t hi)
{
    const char *mn = mode_name(mode);
    TG_CHECK(lo >= -INT32_MAX && lo <= INT32_MAX && hi >= -INT32_MAX && hi <= INT32_MAX,
             TG_EINVAL, "pad: the padding (%lld, %lld) of dim %d must be in [%d, %d]",
             (long long)lo, (long long)hi, d, -INT32_MAX, INT32_MAX);
    if ((lo != 0 || hi != 0) && mode != TG_PAD_CONSTANT)
        TG_CHECK(in >= 1, TG_ESHAPE, "pad: %s padding of dim %d needs a non-empty dim", mn, d);
    const int64_t cut = (lo < 0 ? -lo : 0) + (hi < 0 ? -hi : 0), len = in - cut;
    const int64_t out = in + lo + hi;
    TG_CHECK(mode != TG_PAD_REFLECT || (lo < in && hi < in), TG_EINVAL,
             "pad: reflect padding (%lld, %lld) of dim %d must be < its size %lld",
             (long long)lo, (long long)hi, d, (long long)in);
    if (mode == TG_PAD_REFLECT || mode == TG_PAD_REPLICATE)
        TG_CHECK(out >= 1 || (lo >= 0 && hi >= 0), TG_EINVAL,
                 "pad: %s padding (%lld, %lld) of dim %d leaves it %lld elements of %lld: "
                 "it must keep at least 1", mn, (long long)lo, (long long)hi, d,
                 (long long)out, (long long)in);
    if (mode == TG_PAD_CONSTANT || mode == TG_PAD_CIRCULAR)
        TG_CHECK(len >= 0, TG_EINVAL,
                 "pad: %s padding (%lld, %lld) of dim %d removes %lld elements, more than its "
                 "size %lld", mn, (long long)lo, (long long)hi, d, (long long)cut,
                 (long long)in);
    if (mode == TG_PAD_CIRCULAR && cut == 0)
        TG_CHECK(lo <= in && hi <= in, TG_EINVAL,
                 "pad: circular padding (%lld, %lld) of dim %d must be <= its size %lld",
                 (long long)lo, (long long)hi, d, (long long)in);
    if (mode == TG_PAD_CIRCULAR && cut > 0)
        TG_CHECK(lo <= len && hi <= len, TG_EINVAL,
                 "pad: circular padding (%lld, %lld) of dim %d must be <= %lld, its size %lld "
                 "less the %lld elements the negative padding removes", (long long)lo,
                 (long long)hi, d, (long long)len, (long long)in, (long long)cut);
    return TG_OK;
}

/* Checks p against x (shape xs) and gives the padded shape os. */
static int check_pads(const pad_params *p, int ndim, const int64_t *xs, int64_t *os)
{
    TG_CHECK(p->n % 2 == 0 && p->n / 2 <= ndim, TG_EINVAL,
             "pad: pads has %d entries: it must hold a (low, high) pair for each of at most "
             "x's %d dims", p->n, ndim);
    for (int d = 0; d < ndim; d++) {
        int64_t lo, hi;
        axis_pads(p, ndim, d, &lo, &hi);
        TG_TRY(check_axis(p->mode, d, xs[d], lo, hi));
        os[d] = xs[d] + lo + hi;
    }
    return TG_OK;
}

static int pad_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    (void)ctx, (void)n;
    const pad_params *p = params;
    tg_tensor *x = in[0];
    int64_t os[TG_MAX_DIMS];
    TG_TRY(check_pads(p, x->ndim, x->shape, os));
    const size_t es = tg_dtype_size(x->dtype);
    TG_CHECK(tg__shape_bytes_fit(x->ndim, os, (int64_t)es), TG_EINVAL,
             "pad: the padded shape is too large");
    TG_TRY(tg__check_value("pad: value", x->dtype, p->value));
    const int64_t nx = tg_tensor_numel(x), ny = tg__numel(x->ndim, os);
    unsigned char *xb = malloc((size_t)(nx > 0 ? nx : 1) * es), cst[16] = {0};
    tg_dtype_store(x->dtype, cst, 0, p->value);   /* the constant, in x's dtype */
    int64_t *src = source_table(p, x->ndim, x->shape, os);
    tg_tensor *y = tg__tensor_uninit(x->dtype, x->ndim, os);
    int rc = xb && src && y ? TG_OK : TG_ENOMEM;
    if (rc == TG_OK) {
        tg__gather(x, x->dtype, xb);
        unsigned char *yb = (unsigned char *)y->storage->data;
        for (int64_t e = 0; e < ny; e++)
            memcpy(yb + (size_t)e * es, src[e] < 0 ? cst : xb + (size_t)src[e] * es, es);
        *out = y;
        y = NULL;
    } else {
        rc = tg__error(TG_ENOMEM, "pad: out of memory for %lld elements", (long long)ny);
    }
    tg_tensor_release(y);
    free(src);
    free(xb);
    return rc;
}

static const tg_op_schema pad_op, pad_backward_op;

typedef struct pad_bw_params {
    pad_params p;
    int ndim;
    int64_t shape[TG_MAX_DIMS];   /* x's, the result's */
} pad_bw_params;

/* The gradient of pad: pad_backward(g) (x's shape is in the node's record). */
static int pad_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const tg_meta *xm = tg__ctx_input_meta(ctx, 0);
    pad_bw_params b = {.p = *(const pad_params *)tg__ctx_params(ctx), .ndim = xm->ndim};
    memcpy(b.shape, xm->shape, sizeof(int64_t) * (size_t)xm->ndim);
    tg_tensor *in[1] = {g};
    return tg_op_call(&pad_backward_op, &gi[0], 1, in, &b, sizeof b);
}

/* dx[src(o)] += g[o], summed in double and rounded once into g's dtype. */
static int pad_bw_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                          const void *params)
{
    (void)ctx, (void)n;
    const pad_bw_params *b = params;
    tg_tensor *g = in[0];
    int64_t os[TG_MAX_DIMS];
    TG_TRY(check_pads(&b->p, b->ndim, b->shape, os));
    TG_CHECK(g->ndim == b->ndim && tg__numel(g->ndim, g->shape) == tg__numel(b->ndim, os),
             TG_ESHAPE, "pad_backward: g must have the padded shape");
    const int64_t ng = tg_tensor_numel(g), nx = tg__numel(b->ndim, b->shape);
    double *gv = malloc((size_t)(ng > 0 ? ng : 1) * sizeof *gv);
    double *acc = calloc((size_t)(nx > 0 ? nx : 1), sizeof *acc);
    int64_t *src = source_table(&b->p, b->ndim, b->shape, os);
    tg_tensor *x = tg__tensor_uninit(g->dtype, b->ndim, b->shape);
    int rc = gv && acc && src && x ? TG_OK : tg__error(TG_ENOMEM, "pad_backward: out of memory");
    if (rc == TG_OK) {
        tg__gather(g, TG_F64, gv);
        for (int64_t e = 0; e < ng; e++)
            if (src[e] >= 0) acc[src[e]] += gv[e];
        tg__scatter(x, TG_F64, acc);
        *out = x;
        x = NULL;
    }
    tg_tensor_release(x);
    free(src);
    free(acc);
    free(gv);
    return rc;
}

/* The gradient of pad_backward: pad of the same mode with value 0. */
static int pad_bw_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    pad_params p = ((const pad_bw_params *)tg__ctx_params(ctx))->p;
    p.value = 0;
    tg_tensor *in[1] = {g};
    return tg_op_call(&pad_op, &gi[0], 1, in, &p, sizeof p);
}

static const tg_op_schema pad_op = {.name = "pad", .arity = 1, .amp = TG_AMP_KEEP,
                                    .forward = pad_forward, .backward = pad_backward,
                                    .double_backward = true,
                                    .vjp = "da = pad_backward(g): each g element added into the "
                                           "element it was read from"};
static const tg_op_schema pad_backward_op = {
    .name = "pad_backward", .arity = 1, .amp = TG_AMP_KEEP, .forward = pad_bw_forward,
    .backward = pad_bw_backward, .double_backward = true,
    .vjp = "dg = pad(g', same mode, value 0)"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__pad_ops[] = {&pad_op, &pad_backward_op};
static_assert(sizeof tg__pad_ops / sizeof tg__pad_ops[0] == TG__pad_N,
              "src/ops/families.h must count the pad ops");

int tg_pad(tg_tensor **out, tg_tensor *x, int n, const int64_t *pads, tg_pad_mode mode,
           double value)
{
    TG_CHECK(out != NULL, TG_EINVAL, "pad: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "pad: x must not be NULL");
    TG_CHECK(mode != TG_PAD_SYMMETRIC, TG_EINVAL,
             "pad: mode TG_PAD_SYMMETRIC is torchvision's, for tg_loader_set_augment; torch's "
             "F.pad has no symmetric mode");
    TG_CHECK(mode >= TG_PAD_CONSTANT && mode <= TG_PAD_CIRCULAR, TG_EINVAL,
             "pad: mode=%d is not a tg_pad_mode", (int)mode);
    TG_CHECK(n >= 0 && n <= 2 * TG_MAX_DIMS && (n == 0 || pads), TG_EINVAL,
             "pad: n=%d must be in [0, %d], with pads set when n > 0", n, 2 * TG_MAX_DIMS);
    pad_params p = {.mode = mode, .value = mode == TG_PAD_CONSTANT ? value : 0, .n = n};
    if (n) memcpy(p.pads, pads, (size_t)n * sizeof *pads);
    tg_tensor *in[1] = {x};
    return tg_op_call(&pad_op, out, 1, in, &p, sizeof p);
}
