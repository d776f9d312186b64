/* src/quant/qconv.c - the public quantized ops: argument checks (the float
 * ops' shape and parameter rules through tg__conv_validate), requantization
 * set-up and the integer cores of qconv_kernels.c and the int8 GEMM. */
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

/* dtypes, scales and zero points of a quantized op's inputs. */
static int check_quant_args(const char *op, const tg_tensor *x, const tg_tensor *w,
                            const tg_tensor *b, const tg_qscales *q)
{
    TG_CHECK(x && w && q, TG_EINVAL, "%s: x, weight and q must not be NULL", op);
    TG_CHECK(x->dtype == TG_U8 || x->dtype == TG_I8, TG_EDTYPE, "%s: x must be u8 or i8, got %s",
             op, tg_dtype_name(x->dtype));
    TG_CHECK(w->dtype == TG_I8, TG_EDTYPE, "%s: weight must be i8, got %s", op,
             tg_dtype_name(w->dtype));
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

/* Contiguous copies of the inputs (bias as f32, may stay NULL). */
typedef struct q_bufs {
    void *x;
    int8_t *w;
    float *bias;
    tg__q_requant *r;
} q_bufs;

static void q_bufs_free(q_bufs *b)
{
    free(b->x);
    free(b->w);
    free(b->bias);
    free(b->r);
}

static int q_bufs_load(q_bufs *bufs, const tg_tensor *x, const tg_tensor *w,
                       const tg_tensor *b, int64_t c_out)
{
    *bufs = (q_bufs){0};
    bufs->x = tg__malloc((size_t)tg_tensor_numel(x) + 1);
    bufs->w = tg__malloc((size_t)tg_tensor_numel(w) + 1);
    bufs->r = tg__malloc((size_t)c_out * sizeof *bufs->r + 1);
    if (b) bufs->bias = tg__malloc((size_t)c_out * sizeof(float));
    if (!bufs->x || !bufs->w || !bufs->r || (b && !bufs->bias)) {
        q_bufs_free(bufs);
        return TG_ENOMEM;
    }
    tg__gather(x, x->dtype, bufs->x);
    tg__gather(w, TG_I8, bufs->w);
    if (b) tg__gather(b, TG_F32, bufs->bias);
    return TG_OK;
}

static int quantized_conv_any(bool transpose, tg_tensor **out, tg_tensor *x, tg_tensor *w,
                              tg_tensor *b, const tg_conv_params *p, const tg_qscales *q)
{
    const char *op = qop_name(transpose, x && x->ndim >= 3 ? x->ndim - 2 : 0);
    TG_CHECK(out && p, TG_EINVAL, "%s: out and p must not be NULL", op);
    TG_TRY(check_quant_args(op, x, w, b, q));
    TG_CHECK(p->act == TG_ACT_NONE || p->act == TG_ACT_RELU, TG_EUNSUPPORTED,
             "%s: activation %s is not supported; only none or relu can be fused", op,
             tg_activation_name(p->act));
    /* The float ops' shape and parameter rules, read through float-typed
     * shallow copies (tg__conv_validate only looks at dtype and shape). */
    struct tg_tensor xf = *x, wf = *w;
    xf.dtype = wf.dtype = TG_F32;
    tg__conv_geom g;
    int64_t shape[TG_MAX_DIMS];
    TG_TRY(tg__conv_validate(transpose, &xf, &wf, b, p, &g, shape));
    const int64_t c_out = shape[1];
    TG_TRY(check_scale_count(op, q, c_out));

    q_bufs bufs;
    TG_TRY(q_bufs_load(&bufs, x, w, b, c_out));
    int rc = tg__q_requant_setup(op, bufs.r, c_out, q, x->dtype, bufs.bias, p->act == TG_ACT_RELU);
    tg_tensor *y = rc < 0 ? NULL : tg__tensor_empty(x->dtype, x->ndim, shape);
    if (rc >= 0 && !y) rc = TG_ENOMEM;
    if (rc >= 0)
        rc = transpose ? tg__q_conv_transpose_raw(&g, x->dtype, bufs.x, q->x_zero_point, bufs.w,
                                                  bufs.r, y->storage->data)
                       : tg__q_conv_raw(&g, x->dtype, bufs.x, q->x_zero_point, bufs.w, bufs.r,
                                        y->storage->data);
    q_bufs_free(&bufs);
    if (rc < 0) {
        tg_tensor_release(y);
        return rc;
    }
    *out = y;
    return TG_OK;
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

/* y (M, N) = requant(x (M, K) * w (N, K)^T - zx * rowsum(w) + bias). */
static int linear_run(const q_bufs *bufs, tg_dtype dt, int32_t zx, int64_t m, int64_t n,
                      int64_t k, void *y)
{
    int32_t *acc = tg__malloc((size_t)(m * n) * sizeof *acc + 1);
    int32_t *wsum = tg__malloc((size_t)n * sizeof *wsum + 1);
    int rc = (acc && wsum) ? TG_OK : TG_ENOMEM;
    if (rc == TG_OK) rc = tg_int8_gemm(acc, bufs->x, dt == TG_I8, bufs->w, m, n, k);
    if (rc == TG_OK) {
        tg__q_row_sums(bufs->w, n, k, wsum);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++)
                tg__q_store(y, dt, i * n + j,
                            tg__q_requant_one(acc[i * n + j] - zx * wsum[j], &bufs->r[j]));
    }
    free(acc);
    free(wsum);
    return rc;
}

int tg_quantized_linear(tg_tensor **out, tg_tensor *x, tg_tensor *weight, tg_tensor *bias,
                        const tg_qscales *q, bool relu)
{
    const char *op = "quantized_linear";
    TG_CHECK(out, TG_EINVAL, "%s: out must not be NULL", op);
    TG_TRY(check_quant_args(op, x, weight, bias, q));
    TG_TRY(check_linear_shapes(x, weight, bias));
    const int64_t n = weight->shape[0], k = weight->shape[1];
    TG_TRY(check_scale_count(op, q, n));
    int64_t shape[TG_MAX_DIMS];
    memcpy(shape, x->shape, (size_t)x->ndim * sizeof *shape);
    shape[x->ndim - 1] = n;
    const int64_t m = k ? tg_tensor_numel(x) / k : tg__numel(x->ndim - 1, x->shape);

    q_bufs bufs;
    TG_TRY(q_bufs_load(&bufs, x, weight, bias, n));
    int rc = tg__q_requant_setup(op, bufs.r, n, q, x->dtype, bufs.bias, relu);
    tg_tensor *y = rc < 0 ? NULL : tg__tensor_empty(x->dtype, x->ndim, shape);
    if (rc >= 0 && !y) rc = TG_ENOMEM;
    if (rc >= 0) rc = linear_run(&bufs, x->dtype, q->x_zero_point, m, n, k, y->storage->data);
    q_bufs_free(&bufs);
    if (rc < 0) {
        tg_tensor_release(y);
        return rc;
    }
    *out = y;
    return TG_OK;
}
