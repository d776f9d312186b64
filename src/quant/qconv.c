/* src/quant/qconv.c - the public quantized ops: argument checks (the float
 * ops' shape and parameter rules through tg__conv_validate), requantization
 * set-up and the integer cores of qconv_kernels.c.  The unpacked entry points
 * pack the weight (tg_qweight) for the call; the _packed ones take it packed. */
#include <math.h>
#include <string.h>

#include "ops/conv_internal.h"
#include "quant/quant_internal.h"

static const char *qop_name(bool transpose, int nsp)
{
    static const char *names[2][4] = {
        {"quantized_conv", "quantized_conv1d", "quantized_conv2d", "quantized_conv3d"},
        {"quantized_conv_transpose", "quantized_conv_transpose1d",
         "quantized_conv_transpose2d", "quantized_conv_transpose3d"}};
    return names[transpose][(nsp >= 1 && nsp <= 3) ? nsp : 0];
}

/* dtypes, scales and zero points of a quantized op's inputs (w may be NULL:
 * a packed weight is i8 by construction). */
static int check_quant_args(const char *op, const tg_tensor *x, const tg_tensor *w,
                            const tg_tensor *b, const tg_qscales *q)
{
    TG_CHECK(x && q, TG_EINVAL, "%s: x, weight and q must not be NULL", op);
    TG_CHECK(x->dtype == TG_U8 || x->dtype == TG_I8, TG_EDTYPE, "%s: x must be u8 or i8, got %s",
             op, tg_dtype_name(x->dtype));
    TG_CHECK(!w || w->dtype == TG_I8, TG_EDTYPE, "%s: weight must be i8, got %s", op,
             tg_dtype_name(w ? w->dtype : TG_I8));
    TG_CHECK(!b || b->dtype == TG_F32, TG_EDTYPE, "%s: bias must be f32, got %s", op,
             tg_dtype_name(b ? b->dtype : TG_F32));
    TG_TRY(tg__q_check_affine(op, x->dtype, q->x_scale, q->x_zero_point));
    TG_TRY(tg__q_check_affine(op, x->dtype, q->y_scale, q->y_zero_point));
    TG_CHECK(q->weight_scales && q->n_weight_scales >= 1, TG_EINVAL,
             "%s: q->weight_scales must hold n_weight_scales >= 1 values", op);
    for (int64_t c = 0; c < q->n_weight_scales; c++)
        TG_CHECK(isfinite(q->weight_scales[c]) && q->weight_scales[c] > 0, TG_EINVAL,
                 "%s: weight_scales[%lld]=%g must be finite and > 0", op, (long long)c,
                 q->weight_scales[c]);
    return TG_OK;
}

static int check_scale_count(const char *op, const tg_qscales *q, int64_t c_out)
{
    TG_CHECK(q->n_weight_scales == 1 || q->n_weight_scales == c_out, TG_ESHAPE,
             "%s: n_weight_scales=%lld must be 1 or C_out=%lld (one per output channel)", op,
             (long long)q->n_weight_scales, (long long)c_out);
    return TG_OK;
}

/* A shape-only stand-in for a packed weight (validation reads shape, dtype). */
static struct tg_tensor weight_shape_of(const tg_qweight *w)
{
    struct tg_tensor t = {.dtype = TG_I8, .ndim = w->ndim};
    memcpy(t.shape, w->shape, sizeof t.shape);
    return t;
}

/* What one call needs besides x and the weight: requantization entries and
 * x's bytes (in place when x is contiguous, else a gathered copy). */
typedef struct q_call {
    tg__q_requant *r;
    const void *x;
    void *x_copy;
} q_call;

static bool is_contiguous(const tg_tensor *t)
{
    int64_t st[TG_MAX_DIMS];
    tg__contiguous_strides(t->ndim, t->shape, st);
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] > 1 && t->strides[d] != st[d]) return false;
    return true;
}

static int q_call_setup(q_call *qc, const char *op, const tg_tensor *x, const tg_tensor *b,
                        int64_t c_out, const tg_qscales *q, bool relu)
{
    *qc = (q_call){0};
    float *bias = b ? tg__malloc((size_t)c_out * sizeof *bias) : NULL;
    qc->r = tg__malloc((size_t)c_out * sizeof *qc->r + 1);
    if (!qc->r || (b && !bias)) {
        free(bias), free(qc->r);
        return TG_ENOMEM;
    }
    if (b) tg__gather(b, TG_F32, bias);
    int rc = tg__q_requant_setup(op, qc->r, c_out, q, x->dtype, bias, relu);
    free(bias);
    if (rc == TG_OK && is_contiguous(x)) {
        qc->x = (const uint8_t *)x->storage->data + x->offset;
    } else if (rc == TG_OK) {
        qc->x = qc->x_copy = tg__malloc((size_t)tg_tensor_numel(x) + 1);
        if (!qc->x_copy) rc = TG_ENOMEM;
        else tg__gather(x, x->dtype, qc->x_copy);
    }
    if (rc < 0) free(qc->r);
    return rc;
}

/* Checks of a conv call with weight shape wt; fills g and the output shape. */
static int conv_validate(bool transpose, const char *op, const tg_tensor *x,
                         const tg_tensor *wt, const tg_tensor *b, const tg_conv_params *p,
                         const tg_qscales *q, tg__conv_geom *g, int64_t *shape)
{
    TG_CHECK(p, TG_EINVAL, "%s: p must not be NULL", op);
    TG_CHECK(p->act == TG_ACT_NONE || p->act == TG_ACT_RELU, TG_EUNSUPPORTED,
             "%s: activation %s is not supported; only none or relu can be fused", op,
             tg_activation_name(p->act));
    TG_CHECK(p->padding_mode == TG_PAD_CONSTANT, TG_EUNSUPPORTED,
             "%s: padding_mode=%d: only zero padding (TG_PAD_CONSTANT); pad x with tg_pad "
             "first", op, (int)p->padding_mode);
    /* The float ops' shape and parameter rules, read through float-typed
     * shallow copies (tg__conv_validate only looks at dtype and shape). */
    struct tg_tensor xf = *x, wf = *wt;
    xf.dtype = wf.dtype = TG_F32;
    TG_TRY(tg__conv_validate(transpose, &xf, &wf, b, p, g, shape));
    return check_scale_count(op, q, shape[1]);
}

static int conv_run(bool transpose, const char *op, tg_tensor **out, tg_tensor *x,
                    const tg_qweight *w, tg_tensor *b, const tg_conv_params *p,
                    const tg_qscales *q, const tg__conv_geom *g, const int64_t *shape)
{
    q_call qc;
    TG_TRY(q_call_setup(&qc, op, x, b, shape[1], q, p->act == TG_ACT_RELU));
    tg_tensor *y = tg__tensor_empty(x->dtype, x->ndim, shape);
    int rc = y ? TG_OK : TG_ENOMEM;
    if (rc == TG_OK)
        rc = transpose ? tg__q_conv_transpose_raw(g, x->dtype, qc.x, q->x_zero_point, w, qc.r,
                                                  y->storage->data)
                       : tg__q_conv_raw(g, x->dtype, qc.x, q->x_zero_point, w, qc.r,
                                        y->storage->data);
    free(qc.r), free(qc.x_copy);
    if (rc < 0) {
        tg_tensor_release(y);
        return rc;
    }
    *out = y;
    return TG_OK;
}

static const char *op_of(bool transpose, const tg_tensor *x)
{
    return qop_name(transpose, x && x->ndim >= 3 ? x->ndim - 2 : 0);
}

static int quantized_conv_any(bool transpose, tg_tensor **out, tg_tensor *x, tg_tensor *w,
                              tg_tensor *b, const tg_conv_params *p, const tg_qscales *q)
{
    const char *op = op_of(transpose, x);
    TG_CHECK(out && p && w, TG_EINVAL, "%s: out, weight and p must not be NULL", op);
    TG_TRY(check_quant_args(op, x, w, b, q));
    tg__conv_geom g;
    int64_t shape[TG_MAX_DIMS];
    TG_TRY(conv_validate(transpose, op, x, w, b, p, q, &g, shape));
    tg_qweight *pw = NULL;
    TG_TRY(tg_qweight_new(&pw, w, transpose, p->groups));
    int rc = conv_run(transpose, op, out, x, pw, b, p, q, &g, shape);
    tg_qweight_free(pw);
    return rc;
}

static int quantized_conv_packed_any(bool transpose, tg_tensor **out, tg_tensor *x,
                                     const tg_qweight *w, tg_tensor *b,
                                     const tg_conv_params *p, const tg_qscales *q)
{
    const char *op = op_of(transpose, x);
    TG_CHECK(out && p && w, TG_EINVAL, "%s: out, weight and p must not be NULL", op);
    TG_CHECK(w->transpose == transpose && w->ndim >= 3, TG_EINVAL,
             "%s: the packed weight was packed for %s", op,
             w->ndim < 3 ? "linear" : w->transpose ? "conv_transpose" : "conv");
    TG_CHECK(w->groups == p->groups, TG_EINVAL,
             "%s: p->groups=%lld must equal the packed weight's groups=%lld", op,
             (long long)p->groups, (long long)w->groups);
    TG_TRY(check_quant_args(op, x, NULL, b, q));
    const struct tg_tensor wt = weight_shape_of(w);
    tg__conv_geom g;
    int64_t shape[TG_MAX_DIMS];
    TG_TRY(conv_validate(transpose, op, x, &wt, b, p, q, &g, shape));
    return conv_run(transpose, op, out, x, w, b, p, q, &g, shape);
}

int tg_quantized_conv(tg_tensor **out, tg_tensor *x, tg_tensor *weight, tg_tensor *bias,
                      const tg_conv_params *p, const tg_qscales *q)
{
    return quantized_conv_any(false, out, x, weight, bias, p, q);
}

int tg_quantized_conv_transpose(tg_tensor **out, tg_tensor *x, tg_tensor *weight,
                                tg_tensor *bias, const tg_conv_params *p, const tg_qscales *q)
{
    return quantized_conv_any(true, out, x, weight, bias, p, q);
}

int tg_quantized_conv_packed(tg_tensor **out, tg_tensor *x, const tg_qweight *w,
                             tg_tensor *bias, const tg_conv_params *p, const tg_qscales *q)
{
    return quantized_conv_packed_any(false, out, x, w, bias, p, q);
}

int tg_quantized_conv_transpose_packed(tg_tensor **out, tg_tensor *x, const tg_qweight *w,
                                       tg_tensor *bias, const tg_conv_params *p,
                                       const tg_qscales *q)
{
    return quantized_conv_packed_any(true, out, x, w, bias, p, q);
}

/* ---- linear ---- */

static int check_linear_shapes(const tg_tensor *x, const tg_tensor *w, const tg_tensor *b)
{
    const char *op = "quantized_linear";
    TG_CHECK(x->ndim >= 1, TG_ESHAPE, "%s: x must have at least 1 dim (..., K)", op);
    TG_CHECK(w->ndim == 2, TG_ESHAPE, "%s: weight must be 2-D (N, K), got %d-D", op, w->ndim);
    TG_CHECK(w->shape[1] == x->shape[x->ndim - 1], TG_ESHAPE,
             "%s: weight.shape[1]=%lld must equal x's last extent K=%lld", op,
             (long long)w->shape[1], (long long)x->shape[x->ndim - 1]);
    TG_CHECK(!b || (b->ndim == 1 && b->shape[0] == w->shape[0]), TG_ESHAPE,
             "%s: bias must be 1-D of length N=%lld", op, (long long)w->shape[0]);
    return TG_OK;
}

/* y (..., N) = requant((x - zx) (M, K) * w (N, K)^T + bias). */
static int linear_run(tg_tensor **out, tg_tensor *x, const tg_qweight *w, tg_tensor *b,
                      const tg_qscales *q, bool relu)
{
    const char *op = "quantized_linear";
    const int64_t n = w->shape[0], k = w->shape[1];
    TG_TRY(check_scale_count(op, q, n));
    int64_t shape[TG_MAX_DIMS];
    memcpy(shape, x->shape, (size_t)x->ndim * sizeof *shape);
    shape[x->ndim - 1] = n;
    const int64_t m = k ? tg_tensor_numel(x) / k : tg__numel(x->ndim - 1, x->shape);
    q_call qc;
    TG_TRY(q_call_setup(&qc, op, x, b, n, q, relu));
    tg_tensor *y = tg__tensor_empty(x->dtype, x->ndim, shape);
    int rc = y ? TG_OK : TG_ENOMEM;
    if (rc == TG_OK && m > 0)
        rc = tg__q_linear_raw(x->dtype, qc.x, q->x_zero_point, m, w, qc.r, y->storage->data);
    free(qc.r), free(qc.x_copy);
    if (rc < 0) {
        tg_tensor_release(y);
        return rc;
    }
    *out = y;
    return TG_OK;
}

int tg_quantized_linear(tg_tensor **out, tg_tensor *x, tg_tensor *weight, tg_tensor *bias,
                        const tg_qscales *q, bool relu)
{
    const char *op = "quantized_linear";
    TG_CHECK(out && weight, TG_EINVAL, "%s: out and weight must not be NULL", op);
    TG_TRY(check_quant_args(op, x, weight, bias, q));
    TG_TRY(check_linear_shapes(x, weight, bias));
    TG_TRY(check_scale_count(op, q, weight->shape[0]));
    tg_qweight *pw = NULL;
    TG_TRY(tg_qweight_new(&pw, weight, false, 1));
    int rc = linear_run(out, x, pw, bias, q, relu);
    tg_qweight_free(pw);
    return rc;
}

int tg_quantized_linear_packed(tg_tensor **out, tg_tensor *x, const tg_qweight *w,
                               tg_tensor *bias, const tg_qscales *q, bool relu)
{
    const char *op = "quantized_linear";
    TG_CHECK(out && w, TG_EINVAL, "%s: out and weight must not be NULL", op);
    TG_CHECK(w->ndim == 2 && !w->transpose && w->groups == 1, TG_EINVAL,
             "%s: the packed weight must be a 2-D Linear weight (N, K) packed with groups 1",
             op);
    TG_TRY(check_quant_args(op, x, NULL, bias, q));
    const struct tg_tensor wt = weight_shape_of(w);
    TG_TRY(check_linear_shapes(x, &wt, bias));
    return linear_run(out, x, w, bias, q, relu);
}
