/* src/ops/fold.c - unfold and fold (F.unfold, F.fold): the sliding blocks
 * of an (N, C, H, W) image as the columns of (N, C*kh*kw, L), and back.
 *
 * They are the conv kernels' im2col and col2im of one sample: a 2-D conv
 * geometry (conv_internal.h, leading axis of extent 1) with image = x's
 * planes and columns = the blocks, whose column buffer (C*kh*kw, L) is
 * exactly one sample of unfold's result.  Both are linear, and col2im sums
 * into each image position the column entries im2col copied from it, so
 *   <unfold(x), y> = <x, fold(y)>:
 * the backward of unfold is fold of g into x's (H, W), that of fold is
 * unfold of g, both with the same parameters; as they are these public ops,
 * derivatives of every order follow. */
#include <assert.h>
#include <stddef.h>
#include <string.h>

#include "ops/conv_internal.h"
#include "ops/families.h"
#include "ops/fold_internal.h"
#include "tapegrad/conv.h"
#include "tapegrad/ops.h"

/* The op's parameter block: p, and the image extents (fold's output_size;
 * for unfold they are read from x). */
typedef struct fold_op_params {
    tg_fold_params p;
    int64_t img[2];
} fold_op_params;

static const char *const axis_dim[2] = {"H", "W"};

int tg__fold_check_params(const char *fn, const tg_fold_params *p, const int64_t *output_size)
{
    const char *const names[4] = {"kernel_size", "dilation", "padding", "stride"};
    const int64_t *const vals[4] = {p->kernel_size, p->dilation, p->padding, p->stride};
    for (int f = 0; f < 4; f++)
        for (int a = 0; a < 2; a++) {
            const int64_t v = vals[f][a], lo = f == 2 ? 0 : 1;
            TG_CHECK(v >= lo && v <= TG_CONV_MAX_PARAM, TG_EINVAL,
                     "%s: p->%s[%d]=%lld must be in [%lld, %lld]", fn, names[f], a,
                     (long long)v, (long long)lo, (long long)TG_CONV_MAX_PARAM);
        }
    for (int a = 0; output_size && a < 2; a++)
        TG_CHECK(output_size[a] >= 1 && output_size[a] <= TG_CONV_MAX_PARAM, TG_EINVAL,
                 "%s: output_size[%d]=%lld must be in [1, %lld]", fn, a,
                 (long long)output_size[a], (long long)TG_CONV_MAX_PARAM);
    return TG_OK;
}

/* The sliding blocks along axis a of an image extent s; TG_ESHAPE (naming
 * what the extent is) when there are none. */
static int blocks(const char *op, const char *what, int a, int64_t s, const tg_fold_params *p,
                  int64_t *n)
{
    const int64_t num = s + 2 * p->padding[a] - p->dilation[a] * (p->kernel_size[a] - 1) - 1;
    TG_CHECK(num >= 0, TG_ESHAPE,
             "%s: %s=%lld with kernel_size[%d]=%lld, dilation[%d]=%lld, padding[%d]=%lld has "
             "no sliding block; it must be >= dilation*(kernel_size-1)+1-2*padding", op, what,
             (long long)s, a, (long long)p->kernel_size[a], a, (long long)p->dilation[a], a,
             (long long)p->padding[a]);
    *n = num / p->stride[a] + 1;
    return TG_OK;
}

static int check_dtype(const char *op, const tg_tensor *x)
{
    const tg_dtype dt = tg_tensor_dtype(x);
    TG_CHECK(dt == TG_F32 || dt == TG_F64 || dt == TG_BF16 || dt == TG_F16, TG_EDTYPE,
             "%s: x has dtype %s; it must be f32, f64, bf16 or f16", op, tg_dtype_name(dt));
    return TG_OK;
}

/* Every dim of x but the batch (the first of a batched x) is >= 1, as
 * PyTorch requires. */
static int check_extents(const char *op, const tg_tensor *x, bool batched)
{
    for (int d = batched ? 1 : 0; d < tg_tensor_ndim(x); d++)
        TG_CHECK(tg_tensor_dim(x, d) >= 1, TG_ESHAPE,
                 "%s: x's dim %d is 0; every dim but the batch dim must be >= 1", op, d);
    return TG_OK;
}

/* The geometry of one sample: C planes of img, blocks col, and the output
 * shape (x's rank; n the batch, 1 when unbatched). */
static void fill_geom(tg__conv_geom *g, const fold_op_params *q, int64_t c, const int64_t *col)
{
    memset(g, 0, sizeof *g);
    g->nsp = 2;
    g->batch = 1;
    g->groups = 1;
    g->c_img = c;
    g->c_col = c * q->p.kernel_size[0] * q->p.kernel_size[1];
    g->half_in = TG_F32;   /* the kernels read buffers of the compute dtype */
    g->img[0] = g->col[0] = g->k[0] = g->stride[0] = g->dil[0] = 1;
    for (int a = 0; a < 2; a++) {
        g->img[1 + a] = q->img[a];
        g->col[1 + a] = col[a];
        g->k[1 + a] = q->p.kernel_size[a];
        g->stride[1 + a] = q->p.stride[a];
        g->dil[1 + a] = q->p.dilation[a];
        g->pad[1 + a] = q->p.padding[a];
    }
}

/* unfold's geometry and output shape for x (checked: rank, extents, blocks). */
static int unfold_geom(const tg_tensor *x, const fold_op_params *in, tg__conv_geom *g,
                       int *ndim, int64_t *shape)
{
    const char *op = "unfold";
    TG_TRY(check_dtype(op, x));
    const int nd = tg_tensor_ndim(x);
    TG_CHECK(nd == 3 || nd == 4, TG_ESHAPE,
             "%s: x has %d dims; it must have 3 (C, H, W) or 4 (N, C, H, W)", op, nd);
    TG_TRY(check_extents(op, x, nd == 4));
    fold_op_params q = *in;
    int64_t col[2];
    for (int a = 0; a < 2; a++) {
        q.img[a] = tg_tensor_dim(x, nd - 2 + a);
        TG_TRY(blocks(op, axis_dim[a], a, q.img[a], &q.p, &col[a]));
    }
    const int64_t c = tg_tensor_dim(x, nd - 3), n = nd == 4 ? tg_tensor_dim(x, 0) : 1;
    int64_t ck, l;
    const bool over = __builtin_mul_overflow(c, q.p.kernel_size[0], &ck) ||
                      __builtin_mul_overflow(ck, q.p.kernel_size[1], &ck) ||
                      __builtin_mul_overflow(col[0], col[1], &l);
    const int64_t oshape[3] = {n, over ? 0 : ck, over ? 0 : l};
    TG_CHECK(!over && tg__shape_bytes_fit(3, oshape, tg_dtype_size(tg_tensor_dtype(x))),
             TG_EINVAL, "%s: the result (N, C*kh*kw, L) would be too large", op);
    fill_geom(g, &q, c, col);
    *ndim = nd - 1;
    memcpy(shape, nd == 4 ? oshape : oshape + 1, (size_t)(nd - 1) * sizeof *shape);
    return TG_OK;
}

/* fold's geometry and output shape for x (checked: rank, extents,
 * channels, output_size, L). */
static int fold_geom(const tg_tensor *x, const fold_op_params *q, tg__conv_geom *g, int *ndim,
                     int64_t *shape)
{
    const char *op = "fold";
    TG_TRY(check_dtype(op, x));
    const int nd = tg_tensor_ndim(x);
    TG_CHECK(nd == 2 || nd == 3, TG_ESHAPE,
             "%s: x has %d dims; it must have 2 (C*kh*kw, L) or 3 (N, C*kh*kw, L)", op, nd);
    TG_TRY(check_extents(op, x, nd == 3));
    const int64_t kk = q->p.kernel_size[0] * q->p.kernel_size[1];
    const int64_t ck = tg_tensor_dim(x, nd - 2), l = tg_tensor_dim(x, nd - 1);
    TG_CHECK(ck % kk == 0, TG_ESHAPE,
             "%s: x's dim %d is %lld; it must be a multiple of kernel_size[0]*kernel_size[1]"
             "=%lld", op, nd - 2, (long long)ck, (long long)kk);
    int64_t col[2];
    for (int a = 0; a < 2; a++) {
        const char *what = a == 0 ? "output_size[0]" : "output_size[1]";
        TG_TRY(blocks(op, what, a, q->img[a], &q->p, &col[a]));
    }
    int64_t blk;
    const bool over = __builtin_mul_overflow(col[0], col[1], &blk);
    TG_CHECK(!over && blk == l, TG_ESHAPE,
             "%s: x's last dim (L) is %lld; it must be the number of sliding blocks %lld*%lld "
             "for output_size=(%lld, %lld) and the parameters", op, (long long)l,
             (long long)col[0], (long long)col[1], (long long)q->img[0], (long long)q->img[1]);
    const int64_t n = nd == 3 ? tg_tensor_dim(x, 0) : 1, c = ck / kk;
    const int64_t oshape[4] = {n, c, q->img[0], q->img[1]};
    TG_CHECK(tg__shape_bytes_fit(4, oshape, tg_dtype_size(tg_tensor_dtype(x))), TG_EINVAL,
             "%s: the result (%lld, %lld, %lld, %lld) would be too large", op, (long long)n,
             (long long)c, (long long)q->img[0], (long long)q->img[1]);
    fill_geom(g, q, c, col);
    *ndim = nd + 1;
    memcpy(shape, nd == 3 ? oshape : oshape + 1, (size_t)(nd + 1) * sizeof *shape);
    return TG_OK;
}

/* The kernel of both: per sample, im2col of its (C, H, W) planes into its
 * (C*kh*kw, L) columns, or col2im back, in the compute dtype (f32 for the
 * half dtypes, whose values it holds exactly; the result is rounded once by
 * the scatter). */
static int run(bool fold, const tg__conv_geom *g, tg_tensor *x, tg_tensor *y)
{
    const tg_dtype cdt = tg__compute_dtype(tg_tensor_dtype(x));
    const int64_t isz = g->c_img * tg__conv_prod3(g->img);
    const int64_t csz = g->c_col * tg__conv_prod3(g->col);
    const int64_t n = tg_tensor_numel(x) / (fold ? csz : isz);
    if (n == 0) return TG_OK;
    void *xo = NULL, *yo = NULL;
    const void *xb = tg__conv_input(x, cdt, &xo);
    void *yb = xb ? tg__conv_output(y, cdt, &yo) : NULL;
    int rc = xb && yb ? TG_OK : TG_ENOMEM;
    const size_t es = tg_dtype_size(cdt);
    for (int64_t j = 0; j < n && rc >= 0; j++) {
        const char *xj = (const char *)xb + (size_t)(j * (fold ? csz : isz)) * es;
        char *yj = (char *)yb + (size_t)(j * (fold ? isz : csz)) * es;
        if (fold && cdt == TG_F64)
            rc = tg__conv_col2im_batch_f64((const double *)(const void *)xj,
                                           tg__conv_prod3(g->col), 1, g->c_img, g,
                                           (double *)(void *)yj, NULL);
        else if (fold)
            rc = tg__conv_col2im_batch_f32((const float *)(const void *)xj,
                                           tg__conv_prod3(g->col), 1, g->c_img, g,
                                           (float *)(void *)yj, NULL);
        else if (cdt == TG_F64)
            rc = tg__conv_im2col_batch_f64(xj, 1, g->c_img, g, (double *)(void *)yj);
        else
            rc = tg__conv_im2col_batch_f32(xj, 1, g->c_img, g, (float *)(void *)yj);
    }
    if (rc >= 0 && yo) tg__scatter(y, cdt, yo);
    tg__work_free(yo);
    tg__work_free(xo);
    return rc;
}

static int fold_forward_common(bool fold, tg_tensor **out, tg_tensor *x, const void *params)
{
    tg__conv_geom g;
    int nd;
    int64_t shape[TG_MAX_DIMS];
    TG_TRY(fold ? fold_geom(x, params, &g, &nd, shape) : unfold_geom(x, params, &g, &nd, shape));
    tg_tensor *y = tg__tensor_uninit(tg_tensor_dtype(x), nd, shape);
    if (!y) return TG_ENOMEM;
    const int rc = run(fold, &g, x, y);
    if (rc < 0) {
        tg_tensor_release(y);
        return rc;
    }
    *out = y;
    return TG_OK;
}

static int unfold_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                          const void *params)
{
    (void)ctx;
    (void)n;
    return fold_forward_common(false, out, in[0], params);
}

static int fold_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    (void)ctx;
    (void)n;
    return fold_forward_common(true, out, in[0], params);
}

static int unfold_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                        int *ndim, int64_t *shape)
{
    (void)n;
    tg__conv_geom g;
    *dtype = tg_tensor_dtype(in[0]);
    return unfold_geom(in[0], params, &g, ndim, shape);
}

static int fold_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                      int *ndim, int64_t *shape)
{
    (void)n;
    tg__conv_geom g;
    *dtype = tg_tensor_dtype(in[0]);
    return fold_geom(in[0], params, &g, ndim, shape);
}

/* d unfold(x) = fold(g) into x's (H, W): the adjoint. */
static int unfold_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const fold_op_params *q = tg_op_ctx_params(ctx);
    int nd;
    const int64_t *xs;
    tg_op_ctx_input(ctx, 0, NULL, &nd, &xs);
    return tg_fold(&gi[0], g, xs + nd - 2, &q->p);
}

/* d fold(x) = unfold(g): the adjoint. */
static int fold_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const fold_op_params *q = tg_op_ctx_params(ctx);
    return tg_unfold(&gi[0], g, &q->p);
}

static const tg_op_schema unfold_op = {
    .name = "unfold", .arity = 1, .amp = TG_AMP_KEEP, .forward = unfold_forward,
    .backward = unfold_backward, .shape = unfold_shape, .double_backward = true,
    .vjp = "da = fold(g) into a's (H, W), same parameters"};
static const tg_op_schema fold_op = {
    .name = "fold", .arity = 1, .amp = TG_AMP_KEEP, .forward = fold_forward,
    .backward = fold_backward, .shape = fold_shape, .double_backward = true,
    .vjp = "da = unfold(g), same parameters"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__fold_ops[] = {&unfold_op, &fold_op};
static_assert(sizeof tg__fold_ops / sizeof tg__fold_ops[0] == TG__fold_N,
              "src/ops/families.h must count the fold ops");

int tg_unfold(tg_tensor **out, tg_tensor *x, const tg_fold_params *p)
{
    const char *op = "unfold";
    TG_CHECK(out != NULL && x != NULL && p != NULL, TG_EINVAL,
             "%s: out, x and p must not be NULL", op);
    TG_TRY(tg__fold_check_params(op, p, NULL));
    const fold_op_params q = {.p = *p};
    return tg_op_call(&unfold_op, out, 1, (tg_tensor *[]){x}, &q, sizeof q);
}

int tg_fold(tg_tensor **out, tg_tensor *x, const int64_t *output_size, const tg_fold_params *p)
{
    const char *op = "fold";
    TG_CHECK(out != NULL && x != NULL && output_size != NULL && p != NULL, TG_EINVAL,
             "%s: out, x, output_size and p must not be NULL", op);
    TG_TRY(tg__fold_check_params(op, p, output_size));
    const fold_op_params q = {.p = *p, .img = {output_size[0], output_size[1]}};
    return tg_op_call(&fold_op, out, 1, (tg_tensor *[]){x}, &q, sizeof q);
}
