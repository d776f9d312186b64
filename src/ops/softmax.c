/* src/ops/softmax.c - softmax and log_softmax along one dim
 * (torch.nn.functional.softmax / log_softmax with an explicit dim).
 *
 * With m the maximum of a row (any constant gives the same result; the
 * maximum keeps every exp(x - m) <= 1, so nothing overflows at |x| = 1000):
 *   softmax(x)_c     = exp(x_c - m) / s,   s = sum_k exp(x_k - m)
 *   log_softmax(x)_c = (x_c - m) - log(s)
 * computed in double and rounded once to x's dtype (f16/bf16 too; f32 rows
 * with the vectorized exp of src/ops/exp_simd.h, within 2.3e-16 relative
 * of the exact exp before the rounding: along the last dim by
 * src/ops/softmax_rows.c, along another by src/ops/softmax_strided.c,
 * several rows at once; f64, f16 and bf16 with libm's).  A row
 * of -inf, or one holding +inf or NaN, has x - m = NaN somewhere and is NaN
 * throughout, as in PyTorch, which subtracts the maximum too.
 *
 * The backwards are vector-Jacobian products, with sums along the dim kept
 * as an extent of 1:
 *   softmax:      dx = y * (g - sum(g * y))        (J = diag(y) - y y^T)
 *   log_softmax:  dx = g - softmax(x) * sum(g)     (J = I - 1 softmax(x)^T)
 * softmax saves its output y, which carries this op as its grad_fn in a
 * create_graph backward (tg_op_ctx_saved_output).  log_softmax saves its
 * input x, where PyTorch saves the output: exp(y) would carry y's rounding
 * error, |y| epsilons, into the small probabilities, while exp(x - m) / s is
 * as accurate as the forward.  Written with differentiable ops (softmax
 * among them) so higher derivatives come from autograd; a backward that
 * builds no graph computes the same formula in one pass, in double, rounded
 * once.
 *
 * A tensor of shape (..., C, ...) with C at the dim is walked as
 * (outer, C, inner): element (o, c, i) of the row-major buffer is at
 * o C inner + c inner + i, and row (o, i) is its C elements of stride inner.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/shape_internal.h"
#include "ops/softmax_rows_internal.h"
#include "ops/softmax_strided_internal.h"
#include "tapegrad/ops.h"

typedef struct softmax_params {
    int dim;
} softmax_params;

/* ---- the row kernels, in double ------------------------------------------- */

/* One row of C contiguous values in place: v holds x and gets y. */
static void forward_row(double *v, int64_t C, bool log_)
{
    double m = -INFINITY, s = 0.0;   /* m stays -inf for a row of -inf: x - m is NaN */
    for (int64_t c = 0; c < C; c++)
        if (v[c] > m) m = v[c];
    for (int64_t c = 0; c < C; c++) {
        const double z = v[c] - m, e = exp(z);
        v[c] = log_ ? z : e;
        s += e;
    }
    if (log_) {
        const double ls = log(s);
        for (int64_t c = 0; c < C; c++) v[c] -= ls;
    } else {
        for (int64_t c = 0; c < C; c++) v[c] /= s;
    }
}

/* One slab (C, inner) of rows of stride inner in place, as forward_row
 * for each row at once.  m and s are inner doubles of scratch. */
static void forward_slab(double *v, double *m, double *s, int64_t C, int64_t inner, bool log_)
{
    if (inner == 1) {
        forward_row(v, C, log_);
        return;
    }
    for (int64_t i = 0; i < inner; i++) {
        m[i] = -INFINITY;
        s[i] = 0.0;
    }
    for (int64_t c = 0; c < C; c++)
        for (int64_t i = 0; i < inner; i++)
            if (v[c * inner + i] > m[i]) m[i] = v[c * inner + i];
    for (int64_t c = 0; c < C; c++)
        for (int64_t i = 0; i < inner; i++) {
            const double z = v[c * inner + i] - m[i], e = exp(z);
            v[c * inner + i] = log_ ? z : e;
            s[i] += e;
        }
    for (int64_t i = 0; i < inner; i++)
        if (log_) s[i] = log(s[i]);
    for (int64_t c = 0; c < C; c++)
        for (int64_t i = 0; i < inner; i++)
            v[c * inner + i] = log_ ? v[c * inner + i] - s[i] : v[c * inner + i] / s[i];
}

/* One slab of softmax's backward in place: y holds the output, g the
 * gradient, which becomes dx.  s is inner doubles of scratch. */
static void softmax_backward_slab(const double *y, double *g, double *s, int64_t C,
                                  int64_t inner)
{
    if (inner == 1) {   /* one row: the sum in a register */
        double sum = 0.0;
        for (int64_t c = 0; c < C; c++) sum += g[c] * y[c];
        for (int64_t c = 0; c < C; c++) g[c] = y[c] * (g[c] - sum);
        return;
    }
    for (int64_t i = 0; i < inner; i++) s[i] = 0.0;
    for (int64_t c = 0; c < C; c++)
        for (int64_t i = 0; i < inner; i++) s[i] += g[c * inner + i] * y[c * inner + i];
    for (int64_t c = 0; c < C; c++)
        for (int64_t i = 0; i < inner; i++) {
            const int64_t k = c * inner + i;
            g[k] = y[k] * (g[k] - s[i]);
        }
}

/* One slab of log_softmax's backward in place: x holds the input (and gets
 * exp(x - m)), g the gradient, which becomes g - exp(x - m) (sum(g) / s).
 * m is 3 inner doubles of scratch. */
static void log_softmax_backward_slab(double *x, double *g, double *m, int64_t C, int64_t inner)
{
    if (inner == 1) {   /* one row: the maximum and sums in registers */
        double mx = -INFINITY, s = 0.0, sg = 0.0;
        for (int64_t c = 0; c < C; c++)
            if (x[c] > mx) mx = x[c];
        for (int64_t c = 0; c < C; c++) {
            x[c] = exp(x[c] - mx);
            s += x[c];
            sg += g[c];
        }
        for (int64_t c = 0; c < C; c++) g[c] -= x[c] * (sg / s);
        return;
    }
    double *s = m + inner, *sg = s + inner;
    for (int64_t i = 0; i < inner; i++) {
        m[i] = -INFINITY;
        s[i] = sg[i] = 0.0;
    }
    for (int64_t c = 0; c < C; c++)
        for (int64_t i = 0; i < inner; i++)
            if (x[c * inner + i] > m[i]) m[i] = x[c * inner + i];
    for (int64_t c = 0; c < C; c++)
        for (int64_t i = 0; i < inner; i++) {
            const int64_t k = c * inner + i;
            x[k] = exp(x[k] - m[i]);
            s[i] += x[k];
            sg[i] += g[k];
        }
    for (int64_t c = 0; c < C; c++)
        for (int64_t i = 0; i < inner; i++) {
            const int64_t k = c * inner + i;
            g[k] -= x[k] * (sg[i] / s[i]);
        }
}

/* n values of dtype dt to double and back (rounded once): f32 in plain
 * loops, f16 and bf16 through the bulk conversions. */
static void load_f64(tg_dtype dt, const void *src, double *dst, int64_t n)
{
    if (dt == TG_F32)
        for (int64_t i = 0; i < n; i++) dst[i] = ((const float *)src)[i];
    else if (tg__dtype_is_half(dt)) tg__half_to_f64_n(dt, src, dst, n);
    else tg__convert_n(dt, src, TG_F64, dst, n);
}

static void store_f64(tg_dtype dt, const double *src, void *dst, int64_t n)
{
    if (dt == TG_F32)
        for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)src[i];
    else if (tg__dtype_is_half(dt)) tg__f64_to_half_n(dt, src, dst, n);
    else tg__convert_n(TG_F64, src, dt, dst, n);
}

/* The whole tensor as tasks of `per` slabs each: a (x; in the backward y or
 * x, what the op saved) and b (g, for the backward) contiguous of dtype dt,
 * out contiguous. */
typedef struct softmax_job {
    bool log_, backward;
    tg_dtype dt;
    const char *a, *b;
    char *out;
    int64_t outer, C, inner, per;
    /* rows of stride inner > 1 in large slabs: tasks of `pos` rows
     * (positions) of a slab, `chunks` tasks a slab (tg__slab_tasks) */
    int64_t pos, chunks;
    tg__exp_width w;   /* the f32 kernels': the calling thread's (tg__exp_width_get) */
} softmax_job;

/* Rows [i0, i1) of slabs [o0, end) of f32 rows of stride inner > 1:
 * src/ops/softmax_strided.c, read and written in f32. */
static int strided_task(const softmax_job *j, int64_t o0, int64_t end, int64_t i0, int64_t i1)
{
    const int64_t C = j->C, S = j->inner, slab = C * S;
    double *e = tg__work_alloc((size_t)(TG__STRIDED_SCRATCH * C) * sizeof *e);
    if (!e)
        return tg__error(TG_ENOMEM, "%s: out of memory for a slab of %lld elements",
                         j->log_ ? "log_softmax" : "softmax", (long long)slab);
    for (int64_t o = o0; o < end; o++) {
        const float *a = (const float *)j->a + o * slab;
        const float *g = j->backward ? (const float *)j->b + o * slab : NULL;
        float *y = (float *)j->out + o * slab;
        if (!j->backward) tg__softmax_strided_f32(a, y, C, S, i0, i1, j->log_, e, j->w);
        else if (j->log_) tg__log_softmax_backward_strided_f32(a, g, y, C, S, i0, i1, e, j->w);
        else tg__softmax_backward_strided_f32(a, g, y, C, S, i0, i1, j->w);
    }
    tg__work_free(e);
    return TG_OK;
}

/* Rows [i0, i1) of slab o in double, for the dtypes but f32 (whose rows
 * take softmax_rows.c's and softmax_strided.c's kernels): the block (C, w =
 * i1 - i0) of a (and of b) copied to va (and vb), computed as a slab of its
 * own (a row's bits depend on no other row), stored back.  m: 3 w doubles
 * of scratch. */
static void slab_rows_f64(const softmax_job *j, int64_t o, int64_t i0, int64_t i1, double *va,
                          double *vb, double *m)
{
    const int64_t C = j->C, inner = j->inner, w = i1 - i0;
    const size_t esz = tg_dtype_size(j->dt);
    const int64_t n = w == inner ? 1 : C, len = w == inner ? C * w : w;   /* pieces */
    for (int64_t c = 0; c < n; c++) {
        const size_t at = (size_t)((o * C + c) * inner + i0) * esz;
        load_f64(j->dt, j->a + at, va + c * w, len);
        if (j->backward) load_f64(j->dt, j->b + at, vb + c * w, len);
    }
    if (j->backward && j->log_) log_softmax_backward_slab(va, vb, m, C, w);
    else if (j->backward) softmax_backward_slab(va, vb, m, C, w);
    else forward_slab(va, m, m + w, C, w, j->log_);
    const double *r = j->backward ? vb : va;
    for (int64_t c = 0; c < n; c++)
        store_f64(j->dt, r + c * w, j->out + (size_t)((o * C + c) * inner + i0) * esz, len);
}

static int softmax_task(void *p, int64_t t)
{
    const softmax_job *j = p;
    int64_t o0 = t * j->per, end = (t + 1) * j->per < j->outer ? (t + 1) * j->per : j->outer;
    int64_t i0 = 0, i1 = j->inner;
    if (j->pos > 0) {   /* rows [i0, i1) of slab t / chunks */
        o0 = t / j->chunks, end = o0 + 1;
        i0 = t % j->chunks * j->pos;
        i1 = i0 + j->pos < j->inner ? i0 + j->pos : j->inner;
    }
    if (j->dt == TG_F32 && j->inner > 1) return strided_task(j, o0, end, i0, i1);
    const int64_t blk = j->C * (i1 - i0);
    const int64_t nva = blk > TG__ROWS_BLOCK ? blk : TG__ROWS_BLOCK;
    double *va = tg__work_alloc((size_t)(nva + TG__EXP_PAD) * sizeof *va);
    double *vb = j->backward ? tg__work_alloc((size_t)blk * sizeof *vb) : NULL;
    double *m = tg__work_alloc((size_t)(3 * (i1 - i0)) * sizeof *m);
    int rc = TG_OK;
    if (!va || !m || (j->backward && !vb)) {
        rc = tg__error(TG_ENOMEM, "%s: out of memory for a slab of %lld elements",
                       j->log_ ? "log_softmax" : "softmax", (long long)blk);
        goto done;
    }
    /* f32 rows along the last dim: src/ops/softmax_rows.c, read and written in f32 */
    const bool rows = j->dt == TG_F32 && j->inner == 1;
    const tg__exp_width w = j->w;
    const int64_t slab = j->C * j->inner;
    if (rows && !j->backward) {   /* the task's rows at once: short ones share the exp */
        tg__softmax_rows_f32((const float *)j->a + o0 * slab, (float *)j->out + o0 * slab,
                             end - o0, j->C, j->log_, va, w);
        goto done;
    }
    for (int64_t o = o0; o < end; o++) {
        if (!rows) {
            slab_rows_f64(j, o, i0, i1, va, vb, m);
            continue;
        }
        const float *a = (const float *)j->a + o * slab;
        float *y = (float *)j->out + o * slab;
        const float *g = (const float *)j->b + o * slab;
        if (j->backward && j->log_) tg__log_softmax_backward_row_f32(a, g, y, j->C, va, w);
        else if (j->backward) tg__softmax_backward_row_f32(a, g, y, j->C);
        else tg__softmax_row_f32(a, y, j->C, j->log_, va, w);
    }
done:
    tg__work_free(va);
    tg__work_free(vb);
    tg__work_free(m);
    return rc;
}

/* (outer, C, inner) of a tensor of shape (ndim, shape) at dim d. */
static void split_at(int ndim, const int64_t *shape, int d, int64_t *outer, int64_t *C,
                     int64_t *inner)
{
    *outer = *inner = 1;
    *C = ndim > 0 ? shape[d] : 1;   /* a 0-d tensor is one row of one */
    for (int k = 0; k < d; k++) *outer *= shape[k];
    for (int k = d + 1; k < ndim; k++) *inner *= shape[k];
}

/* *out (new, contiguous, of a's dtype and shape) = the forward of a, or the
 * backward from a (the saved tensor) and gradient b, along dim d. */
static int softmax_run(bool log_, bool backward, tg_tensor **out, tg_tensor *a, tg_tensor *b,
                       int d)
{
    softmax_job j = {.log_ = log_, .backward = backward, .dt = a->dtype,
                     .w = tg__exp_width_get()};
    split_at(a->ndim, a->shape, d, &j.outer, &j.C, &j.inner);
    tg_tensor *ac = NULL, *bc = NULL, *r = tg__tensor_uninit(a->dtype, a->ndim, a->shape);
    int rc;
    if (!r) return TG_ENOMEM;
    TG_TRY_GOTO(tg_contiguous(&ac, a));   /* grad mode is off: not recorded */
    if (b) TG_TRY_GOTO(tg_contiguous(&bc, b));
    j.a = tg_tensor_cdata(ac);
    j.b = bc ? tg_tensor_cdata(bc) : NULL;
    j.out = tg_tensor_data(r);
    const int64_t slab = j.C * j.inner, numel = j.outer * slab;
    if (numel > 0) {
        /* whole slabs a task, or large slabs of stride inner > 1 by rows
         * (a row's bits do not depend on its task) */
        const int64_t tasks = tg__slab_tasks(j.outer, j.C, j.inner, j.inner > 1, &j.per,
                                             &j.pos, &j.chunks);
        TG_TRY_GOTO(tg__run_tasks(tasks, numel > TG__SLAB_TASK, softmax_task, &j));
    }
    *out = r;
    r = NULL;
done:
    tg_tensor_release(ac);
    tg_tensor_release(bc);
    tg_tensor_release(r);
    return rc;
}

/* ---- the ops ------------------------------------------------------------------ */

static int check_input(const char *op, const tg_tensor *x, const softmax_params *p, int *d)
{
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(tg_dtype_is_float(x->dtype), TG_EDTYPE,
             "%s: x has dtype %s; float dtypes only (tg_to_dtype first)", op,
             tg_dtype_name(x->dtype));
    return tg__shape_wrap_dim(op, "dim", p->dim, x->ndim, d);
}

/* The output has x's dtype and shape. */
static int shape_rule(const char *op, tg_tensor *const *in, const void *params,
                      tg_dtype *dtype, int *ndim, int64_t *shape)
{
    int d;
    TG_TRY(check_input(op, in[0], params, &d));
    *dtype = in[0]->dtype;
    *ndim = in[0]->ndim;
    memcpy(shape, in[0]->shape, sizeof *shape * (size_t)in[0]->ndim);
    return TG_OK;
}

/* softmax saves its output, log_softmax its input (see the top). */
static int forward(const char *op, bool log_, tg_ctx *ctx, tg_tensor **out, tg_tensor *x,
                   const void *params)
{
    int d;
    TG_TRY(check_input(op, x, params, &d));
    TG_TRY(softmax_run(log_, false, out, x, NULL, d));
    if (!ctx) return TG_OK;
    int slot = log_ ? tg_op_ctx_save(ctx, x) : tg_op_ctx_save_output(ctx, *out);
    if (slot < 0) {
        tg_tensor_release(*out);
        *out = NULL;
        return slot;
    }
    return TG_OK;
}

/* dx from the saved tensor: in one pass outside grad mode, else with the
 * recorded ops of the formulas at the top of the file. */
static int backward(bool log_, tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const softmax_params *p = tg_op_ctx_params(ctx);
    tg_tensor *a, *t[3] = {NULL, NULL, NULL};   /* a: y for softmax, x for log_softmax */
    int d, rc;
    TG_TRY(log_ ? tg_op_ctx_saved(ctx, 0, &a) : tg_op_ctx_saved_output(ctx, 0, &a));
    if (log_) tg_tensor_retain(a);   /* borrowed; released below like the output */
    TG_TRY_GOTO(tg__shape_wrap_dim(log_ ? "log_softmax" : "softmax", "dim", p->dim, a->ndim, &d));
    if (!tg_grad_enabled() && g->dtype == a->dtype) {
        TG_TRY_GOTO(softmax_run(log_, true, &gi[0], a, g, d));
    } else if (log_) {
        TG_TRY_GOTO(tg_softmax(&t[0], a, d));
        TG_TRY_GOTO(tg_sum_dims(&t[1], g, 1, &d, true));     /* sum(g), extent 1 at d */
        TG_TRY_GOTO(tg_mul(&t[2], t[0], t[1]));
        TG_TRY_GOTO(tg_sub(&gi[0], g, t[2]));
    } else {
        TG_TRY_GOTO(tg_mul(&t[0], g, a));
        TG_TRY_GOTO(tg_sum_dims(&t[1], t[0], 1, &d, true));  /* sum(g y), extent 1 at d */
        TG_TRY_GOTO(tg_sub(&t[2], g, t[1]));
        TG_TRY_GOTO(tg_mul(&gi[0], a, t[2]));
    }
done:
    for (int i = 0; i < 3; i++) tg_tensor_release(t[i]);
    tg_tensor_release(a);
    return rc;
}

static int softmax_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                         int *ndim, int64_t *shape)
{
    return shape_rule("softmax", in, params, dtype, ndim, shape);
}

static int log_softmax_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                             int *ndim, int64_t *shape)
{
    return shape_rule("log_softmax", in, params, dtype, ndim, shape);
}

static int softmax_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                           const void *params)
{
    return forward("softmax", false, ctx, out, in[0], params);
}

static int log_softmax_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                               const void *params)
{
    return forward("log_softmax", true, ctx, out, in[0], params);
}

static int softmax_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return backward(false, ctx, g, gi);
}

static int log_softmax_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return backward(true, ctx, g, gi);
}

/* FP32: inside an autocast scope an f16/bf16 x is cast to f32 first, as
 * PyTorch's CUDA autocast does (its CPU autocast of 1.13 leaves them in
 * bf16); outside, the op runs in x's own dtype. */
static const tg_op_schema softmax_op = {.name = "softmax", .arity = 1, .amp = TG_AMP_FP32,
                                        .forward = softmax_forward,
                                        .backward = softmax_backward,
                                        .shape = softmax_shape, .double_backward = true,
                                        .vjp = "da = y * (g - sum(g * y)), sums along the dim"};
static const tg_op_schema log_softmax_op = {.name = "log_softmax", .arity = 1,
                                            .amp = TG_AMP_FP32,
                                            .forward = log_softmax_forward,
                                            .backward = log_softmax_backward,
                                            .shape = log_softmax_shape, .double_backward = true,
                                            .vjp = "da = g - softmax(a) * sum(g), "
                                                   "sums along the dim"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__softmax_ops[] = {&softmax_op, &log_softmax_op};
static_assert(sizeof tg__softmax_ops / sizeof tg__softmax_ops[0] == TG__softmax_N,
              "src/ops/families.h must count the softmax ops");

int tg_softmax(tg_tensor **out, tg_tensor *x, int dim)
{
    softmax_params p = {.dim = dim};
    tg_tensor *in[1] = {x};
    return tg_op_call(&softmax_op, out, 1, in, &p, sizeof p);
}

int tg_log_softmax(tg_tensor **out, tg_tensor *x, int dim)
{
    softmax_params p = {.dim = dim};
    tg_tensor *in[1] = {x};
    return tg_op_call(&log_softmax_op, out, 1, in, &p, sizeof p);
}
