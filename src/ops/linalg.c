/* src/ops/linalg.c - the batched gemm under matmul (src/ops/matmul.c) and
 * linear, through OpenBLAS.
 *
 * Each operand is described as a batch of strided matrices.  A matrix whose
 * rows or columns are unit-stride goes to gemm as is (CblasNoTrans or
 * CblasTrans with the other stride as leading dimension); anything else, and
 * every f16/bf16 operand, is packed into a contiguous buffer of the compute
 * dtype (f32 for f16/bf16, rounded once into the output).  A product on the
 * bf16 kernels skips those copies: a Linear's bf16 weight (in the forward,
 * and in dx when no graph is recorded) is multiplied from its panels, packed
 * once per version (tg__bf16_panels_get), and a bf16 operand that gemm could
 * read in place is read as bf16 bits.
 *
 * Backward uses the differentiable ops themselves:
 *   y = x W^T + b  =>  dx = dy W,  dW = dy2d^T x2d,  db = dy summed over rows. */
#include <assert.h>
#include <limits.h>
#include <stdatomic.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/linalg_internal.h"
#include "tapegrad/ops.h"

typedef tg__mat mat;

static void *elem_ptr(const tg_tensor *t, int64_t off)
{
    return (char *)t->storage->data + off * (int64_t)tg_dtype_size(t->dtype);
}

/* Whether m can go to gemm without a copy, and how (see the file comment). */
static bool blas_layout(const mat *m, bool *trans, int64_t *ld)
{
    int64_t r = m->rows, c = m->cols;
    if ((c <= 1 || m->cs == 1) && (r <= 1 || m->rs >= (c > 1 ? c : 1))) {
        *trans = false;
        *ld = r <= 1 ? (c > 1 ? c : 1) : m->rs;
        return *ld <= INT_MAX;
    }
    if ((r <= 1 || m->rs == 1) && (c <= 1 || m->cs >= (r > 1 ? r : 1))) {
        *trans = true;
        *ld = c <= 1 ? (r > 1 ? r : 1) : m->cs;
        return *ld <= INT_MAX;
    }
    return false;
}

/* Copies matrix k of m into dst, row-major, converted to dtype `to`. */
static void pack(const mat *m, int64_t k, tg_dtype to, void *dst)
{
    const void *base = m->t->storage->data;
    const size_t sf = tg_dtype_size(m->t->dtype), st = tg_dtype_size(to);
    for (int64_t i = 0; i < m->rows; i++) {
        const int64_t src = m->off + k * m->bs + i * m->rs, dst_i = i * m->cols;
        if (m->cs == 1 || m->cols == 1) {   /* a unit-stride row: one bulk conversion */
            tg__convert_n(m->t->dtype, (const char *)base + src * (int64_t)sf, to,
                          (char *)dst + dst_i * (int64_t)st, m->cols);
            continue;
        }
        for (int64_t j = 0; j < m->cols; j++)
            tg_dtype_store(to, dst, dst_i + j, tg_dtype_load(m->t->dtype, base, src + j * m->cs));
    }
}

/* An operand ready for gemm: a pointer, its transposition and leading dim. */
typedef struct operand {
    const void *p;
    bool trans;
    int ld;
} operand;

/* Whether prepare needs a scratch buffer for m. */
static bool needs_scratch(const mat *m, tg_dtype ct)
{
    int64_t ld;
    bool trans;
    return m->t->dtype != ct || !blas_layout(m, &trans, &ld);
}

static void prepare(const mat *m, int64_t k, tg_dtype ct, void *scratch, operand *o)
{
    int64_t ld;
    bool trans;
    if (blas_layout(m, &trans, &ld)) {
        o->trans = trans;
        o->ld = (int)ld;
        if (m->t->dtype == ct) {
            o->p = elem_ptr(m->t, m->off + k * m->bs);
            return;
        }
        if (ld == (trans ? m->rows : m->cols)) {
            /* a dense block in another dtype (a half operand, transposed or
             * not, a row or a column): one bulk conversion, keeping its
             * layout, instead of packing it row by row (a column of n rows
             * would be n one-element conversions) */
            tg__convert_n(m->t->dtype, elem_ptr(m->t, m->off + k * m->bs), ct, scratch,
                          m->rows * m->cols);
            o->p = scratch;
            return;
        }
    }
    pack(m, k, ct, scratch);
    o->p = scratch;
    o->trans = false;
    o->ld = (int)(m->cols > 1 ? m->cols : 1);
}

/* m as operand o of the bf16 GEMM: its rows (A side) or columns (B side) as
 * lines; false when neither the lines nor k are unit-stride. */
static bool panel_operand(const mat *m, bool b_side, tg__bf16_operand *o)
{
    const int64_t lines = b_side ? m->cols : m->rows, k = b_side ? m->rows : m->cols;
    const int64_t ls = b_side ? m->cs : m->rs, ks = b_side ? m->rs : m->cs;
    if (lines <= 0 || k <= 0 || m->off < m->t->offset) return false;
    *o = (tg__bf16_operand){.off = m->off - m->t->offset, .lines = lines, .k = k};
    if (ks == 1 || k == 1) {
        o->tcontig = true;
        o->ld = lines > 1 ? ls : k;
    } else if (ls == 1 || lines == 1) {
        o->tcontig = false;
        o->ld = k > 1 ? ks : lines;
    } else {
        return false;
    }
    return o->ld >= 1;
}

/* m (one bf16 matrix) as an operand of the bf16 kernels read in place as
 * bits, when gemm could read it in place (blas_layout). */
static bool bits_operand(const mat *m, operand *o)
{
    int64_t ld;
    bool trans;
    if (m->t->dtype != TG_BF16 || !blas_layout(m, &trans, &ld)) return false;
    *o = (operand){.p = elem_ptr(m->t, m->off), .trans = trans, .ld = (int)ld};
    return true;
}

/* The panels of m (one matrix) when it is a bf16 weight, else NULL. */
static tg__bf16_panels *weight_panels(const mat *m, bool b_side, tg_bf16_kernel kern)
{
    tg__bf16_operand o;
    if (m->t->dtype != TG_BF16 || !panel_operand(m, b_side, &o)) return NULL;
    return tg__bf16_panels_get(m->t, kern, b_side, &o);
}

/* A batch of products off the bf16 kernels: matrix k of a times matrix k
 * of b (plus bias) into matrix k of out (see tg__gemm_batched). */
typedef struct gemm_job {
    const mat *a, *b;
    const tg_tensor *bias;
    tg_tensor *out;
    tg_dtype dt, ct;
    int64_t M, N, K;
    bool need_a, need_b;
    atomic_int rc;   /* the batch on the pool: TG_ENOMEM from a range */
} gemm_job;

/* Every row of C (M x N in dtype ct) set to the bias, to which gemm then
 * adds A B (beta = 1). */
static void bias_rows(const tg_tensor *bias, tg_dtype ct, int64_t M, int64_t N, void *c)
{
    const size_t row = (size_t)N * tg_dtype_size(ct);
    tg__gather(bias, ct, c);
    for (int64_t i = 1; i < M; i++) memcpy((char *)c + (size_t)i * row, c, row);
}

/* Product k of g with the work buffers sa, sb, sc (NULL where not needed). */
static void gemm_one(const gemm_job *g, int64_t k, void *sa, void *sb, void *sc)
{
    const int64_t M = g->M, N = g->N;
    operand oa, ob;
    prepare(g->a, k, g->ct, sa, &oa);
    prepare(g->b, k, g->ct, sb, &ob);
    void *c = sc ? sc : elem_ptr(g->out, g->out->offset + k * M * N);
    if (g->bias) bias_rows(g->bias, g->ct, M, N, c);
    /* the operands' f32 copies of bf16 values go to tg__gemm as bf16, which
     * multiplies them as bf16 where that pays, else by sgemm */
    tg__gemm(g->dt == TG_BF16 ? TG_BF16 : g->ct, oa.trans, ob.trans, M, N, g->K, oa.p, oa.ld,
             ob.p, ob.ld, g->bias ? 1.0 : 0.0, c, N > 1 ? N : 1);
    if (sc) tg__convert_n(g->ct, sc, g->dt, elem_ptr(g->out, g->out->offset + k * M * N), M * N);
}

/* The work buffers of one thread's products; false (all NULL) without
 * memory.  They are the storage cache's blocks, so repeated calls of one
 * shape neither map nor fault in fresh pages. */
static bool gemm_buffers(const gemm_job *g, bool need_a, bool need_b, void **sa, void **sb,
                         void **sc)
{
    const size_t es = tg_dtype_size(g->ct);
    *sa = need_a ? tg__work_alloc((size_t)(g->M * g->K + 1) * es) : NULL;
    *sb = need_b ? tg__work_alloc((size_t)(g->K * g->N + 1) * es) : NULL;
    *sc = g->dt == g->ct ? NULL : tg__work_alloc((size_t)(g->M * g->N + 1) * es);
    if ((!need_a || *sa) && (!need_b || *sb) && (g->dt == g->ct || *sc)) return true;
    tg__work_free(*sa);
    tg__work_free(*sb);
    tg__work_free(*sc);
    *sa = *sb = *sc = NULL;
    return false;
}

static void gemm_range(void *p, int64_t lo, int64_t hi)
{
    gemm_job *g = p;
    void *sa, *sb, *sc;
    if (!gemm_buffers(g, g->need_a, g->need_b, &sa, &sb, &sc)) {
        atomic_store(&g->rc, TG_ENOMEM);
        return;
    }
    for (int64_t k = lo; k < hi; k++) gemm_one(g, k, sa, sb, sc);
    tg__work_free(sa);
    tg__work_free(sb);
    tg__work_free(sc);
}

/* Whether a batch of nb products of this shape runs its matrices on the
 * thread pool, each on one thread: when one product is below the size at
 * which tg__gemm cuts a product among threads, and the batch is more than a
 * few microseconds of work.  A product that goes to OpenBLAS (above
 * tg__gemm_small_pays) takes its global lock each call, and two threads
 * then wait on each other: 1024 products of 16 x 16 x 16 ran 1.6x slower on
 * two threads than on one.  Such products run on the pool only from
 * TG__GEMM_POOL_BLAS_MIN multiply-adds, where the lock is a small part of a
 * call.  Each matrix is one call either way, so its bits do not depend on
 * the thread count. */
#define TG__GEMM_POOL_BLAS_MIN 32768
static bool batch_on_pool(tg_dtype ct, int64_t nb, int64_t M, int64_t N, int64_t K)
{
    const int64_t work = M * N * (K > 0 ? K : 1);
    if (!tg__gemm_small_pays(ct, M, N, K) && work < TG__GEMM_POOL_BLAS_MIN) return false;
    return nb >= 2 && work < ((int64_t)1 << 18) && nb * work >= 32768;
}

/* See ops/linalg_internal.h. */
int tg__gemm_batched(int64_t nb, const mat *a, const mat *b, const tg_tensor *bias,
                     tg_tensor *out, bool b_weight)
{
    int64_t M = a->rows, K = a->cols, N = b->cols;
    tg_dtype dt = out->dtype, ct = tg__compute_dtype(dt);
    TG_CHECK(M <= INT_MAX && N <= INT_MAX && K <= INT_MAX, TG_EUNSUPPORTED,
             "matmul: extents above INT_MAX are not supported by BLAS");
    gemm_job g = {.a = a, .b = b, .bias = bias, .out = out, .dt = dt, .ct = ct, .M = M, .N = N,
                  .K = K, .need_a = needs_scratch(a, ct), .need_b = needs_scratch(b, ct)};
    atomic_init(&g.rc, TG_OK);
    /* one bf16 product on the bf16 kernels, when they pay for its shape: the
     * weight from its panels, the other operands read as bf16 bits where
     * gemm could read them in place (no f32 copy; the kernels pack the same
     * values either way) */
    const tg_bf16_kernel kern = dt == TG_BF16 && nb == 1 && tg__bf16_gemm_pays(M, N, K)
                                    ? tg_bf16_kernel_get()
                                    : TG_BF16_KERNEL_AUTO;
    const bool on_kernel = kern > TG_BF16_KERNEL_PORTABLE && M > 0 && N > 0 && K > 0;
    if (!on_kernel) {
        if (M <= 0 || N <= 0) return TG_OK;
        if (batch_on_pool(ct, nb, M, N, K)) {
            const int saved = tg__blas_single_begin();
            tg__parallel_range(nb, true, gemm_range, &g);
            tg__blas_restore(saved);
            return atomic_load(&g.rc);
        }
        gemm_range(&g, 0, nb);
        return atomic_load(&g.rc);
    }
    tg__bf16_panels *pb = b_weight ? weight_panels(b, true, kern) : NULL;
    operand oa, ob = {.ld = 1};   /* ob.p NULL: B from its panels */
    const bool a_bits = bits_operand(a, &oa);
    const bool b_bits = !pb && bits_operand(b, &ob);
    void *sa, *sb, *sc;
    if (!gemm_buffers(&g, !a_bits && g.need_a, !pb && !b_bits && g.need_b, &sa, &sb, &sc)) {
        tg__bf16_panels_release(pb);
        return TG_ENOMEM;
    }
    if (!a_bits) prepare(a, 0, ct, sa, &oa);
    if (!pb && !b_bits) prepare(b, 0, ct, sb, &ob);
    void *c = sc ? sc : elem_ptr(out, out->offset);
    if (bias) bias_rows(bias, ct, M, N, c);
    const int saved = tg__blas_single_begin();
    tg__gemm_par_bits(kern, oa.trans, ob.trans, M, N, K, oa.p, a_bits, oa.ld, ob.p, b_bits, ob.ld,
                      bias ? 1.0f : 0.0f, c, N > 1 ? N : 1, NULL, pb);
    tg__blas_restore(saved);
    if (sc) tg__convert_n(ct, sc, dt, elem_ptr(out, out->offset), M * N);
    tg__bf16_panels_release(pb);
    tg__work_free(sa);
    tg__work_free(sb);
    tg__work_free(sc);
    return TG_OK;
}

int tg__check_float_pair(const char *op, const char *na, const tg_tensor *a, const char *nb,
                         const tg_tensor *b)
{
    TG_CHECK(tg_dtype_is_float(a->dtype), TG_EDTYPE, "%s: %s is %s but must be a float dtype",
             op, na, tg_dtype_name(a->dtype));
    TG_CHECK(b->dtype == a->dtype, TG_EDTYPE, "%s: %s is %s but %s is %s (dtypes must match)",
             op, nb, tg_dtype_name(b->dtype), na, tg_dtype_name(a->dtype));
    return TG_OK;
}

int tg__check_amp_dtypes(const char *op, const char *na, const tg_tensor *a, const char *nb,
                         const tg_tensor *b)
{
    tg_dtype scope;
    if (!b || a->dtype == b->dtype) return TG_OK;
    if (!tg__autocast_dtype(&scope))
        return tg__error(TG_EDTYPE,
                         "%s: %s is %s but %s is %s: outside autocast they must have one "
                         "dtype, as torch's (cast one with tg_to_dtype)",
                         op, nb, tg_dtype_name(b->dtype), na, tg_dtype_name(a->dtype));
    /* torch's autocast casts f32, f16 and bf16 only: f64 stays f64 and then
     * meets the other, cast, operand ("expected scalar type Double but
     * found BFloat16"). */
    const bool fa = tg_dtype_is_float(a->dtype), fb = tg_dtype_is_float(b->dtype);
    if (!fa || !fb || (a->dtype == TG_F64) == (b->dtype == TG_F64)) return TG_OK;
    return tg__error(TG_EDTYPE,
                     "%s: %s is %s but %s is %s: autocast does not cast f64, so under "
                     "autocast an f64 operand must not meet another float dtype, as torch's "
                     "(cast one with tg_to_dtype)",
                     op, nb, tg_dtype_name(b->dtype), na, tg_dtype_name(a->dtype));
}

/* The last two dims of t (with the leading one, if any, as batch) as a mat. */
static mat as_mat(const tg_tensor *t)
{
    int r = t->ndim - 2;
    mat m = {t, t->shape[r], t->shape[r + 1], t->offset, 0, t->strides[r], t->strides[r + 1]};
    if (t->ndim == 3) m.bs = t->strides[0];
    return m;
}

/* ---- linear ---------------------------------------------------------------------- */

static int linear_check(const tg_tensor *x, const tg_tensor *w, const tg_tensor *b)
{
    char sx[96], sw[96];
    TG_CHECK(x && w, TG_EINVAL, "linear: x and w must not be NULL");
    TG_TRY(tg__check_float_pair("linear", "x", x, "w", w));
    if (b) TG_TRY(tg__check_float_pair("linear", "x", x, "b", b));
    tg_shape_str(sx, sizeof sx, x->ndim, x->shape);
    tg_shape_str(sw, sizeof sw, w->ndim, w->shape);
    TG_CHECK(x->ndim >= 1, TG_EINVAL, "linear: x is 0-d but must have at least 1 dim");
    TG_CHECK(w->ndim == 2, TG_EINVAL, "linear: w is %s but must be 2-d (out, in)", sw);
    TG_CHECK(x->shape[x->ndim - 1] == w->shape[1], TG_ESHAPE,
             "linear: x is %s and w is %s: in features %lld and %lld differ", sx, sw,
             (long long)x->shape[x->ndim - 1], (long long)w->shape[1]);
    TG_CHECK(!b || (b->ndim == 1 && b->shape[0] == w->shape[0]), TG_ESHAPE,
             "linear: b must be (%lld) to match w %s", (long long)w->shape[0], sw);
    return TG_OK;
}

static int linear_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                          const void *params)
{
    tg_tensor *x = in[0], *w = in[1], *b = n > 2 ? in[2] : NULL;
    TG_TRY(linear_check(x, w, b));
    int64_t fin = w->shape[1], fout = w->shape[0];
    int64_t rows = tg__numel(x->ndim - 1, x->shape);
    int64_t shape[TG_MAX_DIMS], x2shape[2] = {rows, fin};
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = fout;
    tg_tensor *x2 = NULL, *y = tg__tensor_empty(x->dtype, x->ndim, shape);
    if (!y) return TG_ENOMEM;
    int rc = tg_reshape(&x2, x, 2, x2shape);   /* grad mode is off here: not recorded */
    if (rc == TG_OK) {
        mat ma = as_mat(x2);
        /* W^T is (in, out): element (i, j) is w[j, i]. */
        mat mw = {w, fin, fout, w->offset, 0, w->strides[1], w->strides[0]};
        rc = tg__gemm_batched(1, &ma, &mw, b, y, true);
    }
    tg_tensor_release(x2);
    if (rc < 0) {
        tg_tensor_release(y);
        return rc;
    }
    if (ctx) {   /* x only for dW, W only for dx (linear_backward) */
        tg__ctx_save_if(ctx, x, tg__ctx_needs_grad(ctx, 1));
        tg__ctx_save_if(ctx, w, tg__ctx_needs_grad(ctx, 0));
    }
    *out = y;
    return TG_OK;
}

/* dx = dy W (as (rows, out) x (out, in), reshaped to x's shape): the
 * differentiable matmul when a graph is recorded (create_graph) or the
 * dtypes differ, else the same GEMM with W as a weight (its panels). */
static int linear_dx(tg_tensor **dx, tg_tensor *g2, tg_tensor *w, const tg_meta *mx)
{
    tg_tensor *t = NULL;
    if (!tg_grad_enabled() && g2->dtype == w->dtype) {
        const int64_t shape[2] = {g2->shape[0], w->shape[1]};
        if (!(t = tg__tensor_empty(g2->dtype, 2, shape))) return TG_ENOMEM;
        const mat ma = as_mat(g2), mw = as_mat(w);
        int rc = tg__gemm_batched(1, &ma, &mw, NULL, t, true);
        if (rc == TG_OK) rc = tg_reshape(dx, t, mx->ndim, mx->shape);
        tg_tensor_release(t);
        return rc;
    }
    TG_TRY(tg_matmul(&t, g2, w));
    int rc = tg_reshape(dx, t, mx->ndim, mx->shape);
    tg_tensor_release(t);
    return rc;
}

/* dW = dy2d^T x2d: (out, rows) x (rows, in). */
static int linear_dw(tg_tensor **dw, tg_tensor *g2, tg_tensor *x, int64_t rows, int64_t fin)
{
    tg_tensor *x2 = NULL, *gt = NULL;
    int64_t x2shape[2] = {rows, fin};
    int rc = tg_reshape(&x2, x, 2, x2shape);
    if (rc == TG_OK) rc = tg_transpose(&gt, g2, 0, 1);
    if (rc == TG_OK) rc = tg_matmul(dw, gt, x2);
    tg_tensor_release(gt);
    tg_tensor_release(x2);
    return rc;
}

/* x and w are read only for the gradient that needs them (see
 * src/ops/matmul.c); the shapes come from the inputs' metadata. */
static int linear_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in)
{
    tg_tensor *x, *w, *g2 = NULL;
    const tg_meta *xm = tg__ctx_input_meta(ctx, 0), *wm = tg__ctx_input_meta(ctx, 1);
    int64_t fout = wm->shape[0], fin = wm->shape[1];
    int64_t rows = tg__numel(xm->ndim - 1, xm->shape);
    int64_t g2shape[2] = {rows, fout};
    TG_TRY(tg_reshape(&g2, g, 2, g2shape));
    int rc = TG_OK;
    if (tg__ctx_needs_grad(ctx, 0) && (rc = tg__ctx_saved(ctx, 1, &w)) == TG_OK)
        rc = linear_dx(&grad_in[0], g2, w, xm);
    if (rc == TG_OK && tg__ctx_needs_grad(ctx, 1) && (rc = tg__ctx_saved(ctx, 0, &x)) == TG_OK)
        rc = linear_dw(&grad_in[1], g2, x, rows, fin);
    if (rc == TG_OK && ctx->n_inputs > 2 && tg__ctx_needs_grad(ctx, 2))
        rc = tg_sum_to_shape(&grad_in[2], g2, 1, &fout);
    tg_tensor_release(g2);
    return rc;
}

static const tg_op_schema linear_schema = {
    .name = "linear", .arity = 3, .amp = TG_AMP_LOWER_PRECISION, .forward = linear_forward,
    .backward = linear_backward, .double_backward = true,
    .vjp = "dx = g W, dW = g^T x, db = g summed over the batch",
};

int tg_linear(tg_tensor **out, tg_tensor *x, tg_tensor *w, tg_tensor *b)
{
    TG_CHECK(out != NULL, TG_EINVAL, "linear: out must not be NULL");
    TG_CHECK(x != NULL && w != NULL, TG_EINVAL, "linear: x and w must not be NULL");
    TG_TRY(tg__check_amp_dtypes("linear", "x", x, "w", w));
    TG_TRY(tg__check_amp_dtypes("linear", "x", x, "b", b));
    tg_tensor *in[3] = {x, w, b};
    return tg_op_call(&linear_schema, out, 3, in, NULL, 0);
}

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__linalg_ops[] = {&linear_schema};
static_assert(sizeof tg__linalg_ops / sizeof tg__linalg_ops[0] == TG__linalg_N,
              "src/ops/families.h must count the linalg ops");
