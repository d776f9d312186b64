/* src/ops/linalg_la.c - the argument rules, batch broadcasting, buffers,
 * batch runner and solve backward that the square-matrix functions share
 * (src/ops/linalg_la.h). */
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "ops/linalg_la.h"
#include "tapegrad/ops.h"
#include "tapegrad/registry.h"
#include "tapegrad/scope.h"

/* tg__la_check, and tg__la_check_half when halves. */
static int check(const char *fn, const char *what, const tg_tensor *A, bool square, bool halves)
{
    TG_CHECK(A != NULL, TG_EINVAL, "%s: %s is NULL", fn, what);
    const tg_dtype dt = A->dtype;
    TG_CHECK(tg_dtype_is_float(dt), TG_EDTYPE,
             "%s: Expected a floating point tensor as %s. Got %s", fn, what, tg_dtype_name(dt));
    TG_CHECK(dt == TG_F32 || dt == TG_F64 || (halves && tg__dtype_is_half(dt)), TG_EDTYPE,
             "%s: Low precision dtypes not supported. Got %s (%s; f32 and f64 only)", fn,
             tg_dtype_name(dt), what);
    TG_CHECK(A->ndim >= 2, TG_ESHAPE,
             "%s: %s must have at least 2 dimensions (batches of matrices), got %d", fn, what,
             A->ndim);
    const int64_t r = A->shape[A->ndim - 2], c = A->shape[A->ndim - 1];
    TG_CHECK(!square || r == c, TG_ESHAPE,
             "%s: %s must be batches of square matrices, but they are %lld by %lld matrices",
             fn, what, (long long)r, (long long)c);
    TG_CHECK(r <= INT_MAX / 2 && c <= INT_MAX / 2 && (r == 0 || c <= INT_MAX / r), TG_EINVAL,
             "%s: %s's matrices of %lld x %lld exceed LAPACK's int sizes", fn, what,
             (long long)r, (long long)c);
    return TG_OK;
}

int tg__la_check(const char *fn, const char *what, const tg_tensor *A, bool square)
{
    return check(fn, what, A, square, false);
}

int tg__la_check_half(const char *fn, const char *what, const tg_tensor *A, bool square)
{
    return check(fn, what, A, square, true);
}

int tg__la_same_dtype(const char *fn, const tg_tensor *A, const tg_tensor *B, bool fp32_policy)
{
    if (!A || !B) return TG_OK;   /* the forward names the NULL operand */
    tg_dtype a = A->dtype, b = B->dtype, ac;
    if (fp32_policy && tg_autocast_active(&ac)) {
        if (a == TG_F16 || a == TG_BF16) a = TG_F32;
        if (b == TG_F16 || b == TG_BF16) b = TG_F32;
    }
    TG_CHECK(a == b || !tg_dtype_is_float(a) || !tg_dtype_is_float(b), TG_EDTYPE,
             "%s: Expected A and B to have the same dtype, but found A of type %s and B of "
             "type %s instead", fn, tg_dtype_name(A->dtype), tg_dtype_name(B->dtype));
    return TG_OK;
}

int tg__la_distinct(const char *fn, int n, tg_tensor **const *outs, const char *const *names)
{
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            TG_CHECK(!outs[i] || outs[i] != outs[j], TG_EINVAL,
                     "%s: %s and %s must be two different places", fn, names[i], names[j]);
    return TG_OK;
}

int tg__la_broadcast(const char *fn, int an, const int64_t *a, int bn, const int64_t *b,
                     int *on, int64_t *out)
{
    const int n = an > bn ? an : bn;
    for (int i = 0; i < n; i++) {
        const int ia = i - (n - an), ib = i - (n - bn);
        const int64_t ea = ia >= 0 ? a[ia] : 1, eb = ib >= 0 ? b[ib] : 1;
        TG_CHECK(ea == eb || ea == 1 || eb == 1, TG_ESHAPE,
                 "%s: the batch dims of A and B do not broadcast: extent %lld against %lld "
                 "at batch dim %d", fn, (long long)ea, (long long)eb, i);
        out[i] = ea == 1 ? eb : ea;
    }
    *on = n;
    return TG_OK;
}

int64_t tg__la_count(int bn, const int64_t *bshape)
{
    return tg__numel(bn, bshape);
}

void *tg__la_gather(const tg_tensor *t, int bn, const int64_t *bshape, int tail, tg_dtype dt)
{
    int64_t shape[TG_MAX_DIMS], strides[TG_MAX_DIMS];
    const int tb = t->ndim - tail;   /* t's batch dims */
    for (int i = 0; i < bn; i++) {
        const int j = i - (bn - tb);
        shape[i] = bshape[i];
        strides[i] = j >= 0 && t->shape[j] == bshape[i] ? t->strides[j] : 0;
    }
    for (int i = 0; i < tail; i++) {
        shape[bn + i] = t->shape[tb + i];
        strides[bn + i] = t->strides[tb + i];
    }
    const int64_t n = tg__numel(bn + tail, shape);
    void *buf = tg__work_alloc((size_t)(n ? n : 1) * tg_dtype_size(dt));
    if (!buf) return NULL;
    tg_tensor *v = tg__tensor_view_of(t->storage, t->dtype, bn + tail, shape, strides, t->offset);
    if (!v) {
        tg__work_free(buf);
        return NULL;
    }
    tg__gather(v, dt, buf);
    tg_tensor_release(v);
    return buf;
}

void tg__la_transpose(tg_dtype dt, int64_t rows, int64_t cols, const void *s, void *d)
{
    if (dt == TG_F64) {
        const double *a = s;
        double *b = d;
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) b[j * rows + i] = a[i * cols + j];
    } else {
        const float *a = s;
        float *b = d;
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) b[j * rows + i] = a[i * cols + j];
    }
}

int tg__la_perm_sign(int n, const int *ipiv)
{
    int s = 1;
    for (int i = 0; i < n; i++)
        if (ipiv[i] != i + 1) s = -s;
    return s;
}

/* A batch of tg__la_batch: its range bodies share the lowest failure. */
typedef struct la_batch {
    int (*one)(void *job, int64_t b, void *ws);
    void *job;
    size_t ws_bytes;
    atomic_flag lock;      /* guards first, rc, msg */
    atomic_llong first;    /* the lowest failing b so far (count: none) */
    int rc;
    char msg[512];         /* its message: tg_error_message is per thread */
} la_batch;

/* Records the failure of b (status rc, message set on this thread) unless
 * a lower b failed already. */
static void la_fail(la_batch *t, int64_t b, int rc)
{
    while (atomic_flag_test_and_set_explicit(&t->lock, memory_order_acquire)) {
    }
    if (b < atomic_load_explicit(&t->first, memory_order_relaxed)) {
        snprintf(t->msg, sizeof t->msg, "%s", tg_error_message());
        t->rc = rc;
        atomic_store_explicit(&t->first, b, memory_order_relaxed);
    }
    atomic_flag_clear_explicit(&t->lock, memory_order_release);
}

static void la_range(void *ctx, int64_t lo, int64_t hi)
{
    la_batch *t = ctx;
    void *ws = tg__work_alloc(t->ws_bytes ? t->ws_bytes : 1);
    if (!ws) {
        la_fail(t, lo, TG_ENOMEM);
        return;
    }
    for (int64_t b = lo; b < hi; b++) {
        /* a lower matrix failed: nothing here can be the first */
        if (b > atomic_load_explicit(&t->first, memory_order_relaxed)) break;
        const int rc = t->one(t->job, b, ws);
        if (rc < 0) {
            la_fail(t, b, rc);
            break;
        }
    }
    tg__work_free(ws);
}

int tg__la_batch(int64_t count, double cost, size_t ws_bytes,
                 int (*one)(void *job, int64_t b, void *ws), void *job)
{
    if (count <= 0) return TG_OK;
    la_batch t = {.one = one, .job = job, .ws_bytes = ws_bytes, .rc = TG_OK};
    atomic_flag_clear(&t.lock);
    atomic_init(&t.first, count);
    /* Split when the batch is more than a few microseconds of work. */
    const bool par = count >= 2 && (double)count * (cost > 1 ? cost : 1) >= 32768.0;
    const int saved = tg__blas_single_begin();
    tg__parallel_range(count, par, la_range, &t);
    tg__blas_restore(saved);
    if (atomic_load(&t.first) < count) return tg_error_set(t.rc, "%s", t.msg);
    return TG_OK;
}

int tg__la_part(tg_tensor *y, int64_t start, int64_t rows, int64_t cols, tg_tensor **out)
{
    const int nd = tg_tensor_ndim(y);
    if (rows < 0) return tg_narrow(out, y, -1, start, cols);
    int64_t shape[TG_MAX_DIMS];
    memcpy(shape, tg_tensor_shape(y), (size_t)nd * sizeof *shape);
    shape[nd - 1] = rows;
    shape[nd] = cols;
    tg_tensor *r = NULL;
    int rc = tg_narrow(&r, y, -1, start, rows * cols);
    if (rc >= 0) rc = tg_reshape(out, r, nd + 1, shape);
    tg_tensor_release(r);
    return rc;
}

int tg__la_attach(tg_tensor **out, tg_tensor *x, tg_tensor *y)
{
    tg_tensor *d = NULL, *z = NULL;
    int rc = tg_tensor_detach(&d, y);
    if (rc >= 0) rc = tg_sub(&z, y, d);
    if (rc >= 0) rc = tg_add(out, x, z);
    tg_tensor_release(d);
    tg_tensor_release(z);
    return rc;
}

void tg__la_release(tg_tensor **ts, int n)
{
    for (int i = 0; i < n; i++) tg_tensor_release(ts[i]);
}

int tg__la_mT(tg_tensor **out, tg_tensor *a)
{
    return tg_transpose(out, a, -2, -1);
}

int tg__la_capture3(tg_tensor **o[3], tg_tensor *v[3], int rc)
{
    tg_tensor **oo[3];
    tg_tensor *vv[3];
    int n = 0;
    for (int i = 0; i < 3; i++) {
        if (o[i]) oo[n] = o[i], vv[n++] = v[i];
        else tg_tensor_release(v[i]);
    }
    if (n < 3)
        return tg__scope_capture_pair(oo[0], vv[0], n == 2 ? oo[1] : NULL,
                                      n == 2 ? vv[1] : NULL, rc);
    tg_tensor *a = NULL, *b = NULL, *c = NULL;
    rc = tg__scope_capture_pair(&a, vv[0], &b, vv[1], rc);
    if (rc < 0) {
        tg_tensor_release(vv[2]);
        return rc;
    }
    rc = tg__scope_capture_pair(&c, vv[2], NULL, NULL, rc);
    if (rc < 0) {
        if (tg_scope_keep(a)) tg_tensor_release(a);
        if (tg_scope_keep(b)) tg_tensor_release(b);
        return rc;
    }
    *oo[0] = a, *oo[1] = b, *oo[2] = c;
    return TG_OK;
}

int tg__la_finish(tg_ctx *ctx, int rc, tg_tensor *A, tg_tensor *y, tg_tensor **out)
{
    if (rc >= 0 && ctx && A) rc = tg__ctx_save(ctx, A);
    if (rc >= 0 && ctx) rc = tg_op_ctx_save_output(ctx, y);
    if (rc < 0) {
        tg_tensor_release(y);
        return rc;
    }
    *out = y;
    return TG_OK;
}

int tg__la_solve_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi, bool vec,
                          tg__la_solve_t_fn solve_t, tg__la_mask_fn mask, const void *arg)
{
    const tg_meta *ma = tg__ctx_input_meta(ctx, 0), *mb = tg__ctx_input_meta(ctx, 1);
    tg_tensor *A, *x = NULL, *at = NULL, *gb = NULL, *p = NULL, *q = NULL, *r = NULL,
              *n = NULL, *m = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &A));
    TG_TRY_GOTO(tg__ctx_saved_output(ctx, 1, &x));
    TG_TRY_GOTO(tg__la_mT(&at, A));
    TG_TRY_GOTO(solve_t(&gb, at, g, arg));
    if (tg__ctx_needs_grad(ctx, 0)) {
        if (vec) {   /* the outer product dB x^T */
            TG_TRY_GOTO(tg_unsqueeze(&p, gb, -1));
            TG_TRY_GOTO(tg_unsqueeze(&q, x, -2));
            TG_TRY_GOTO(tg_matmul(&r, p, q));
        } else {
            TG_TRY_GOTO(tg__la_mT(&q, x));
            TG_TRY_GOTO(tg_matmul(&r, gb, q));
        }
        TG_TRY_GOTO(tg_neg(&n, r));
        if (mask) TG_TRY_GOTO(mask(&m, n, arg));
        TG_TRY_GOTO(tg_sum_to_shape(&gi[0], m ? m : n, ma->ndim, ma->shape));
    }
    if (tg__ctx_needs_grad(ctx, 1)) TG_TRY_GOTO(tg_sum_to_shape(&gi[1], gb, mb->ndim, mb->shape));
done:
    tg_tensor_release(x);
    tg_tensor_release(at);
    tg_tensor_release(gb);
    tg_tensor_release(p);
    tg_tensor_release(q);
    tg_tensor_release(r);
    tg_tensor_release(n);
    tg_tensor_release(m);
    if (rc < 0)
        for (int i = 0; i < 2; i++) {
            tg_tensor_release(gi[i]);
            gi[i] = NULL;
        }
    return rc;
}

int tg__la_info_check(const char *fn, const tg_tensor *info, const char *rule)
{
    const int32_t *v = tg_tensor_data((tg_tensor *)info);
    const int64_t count = tg_tensor_numel(info);
    for (int64_t b = 0; b < count; b++) {
        if (v[b] <= 0) continue;
        char note[48] = "", what[256];
        if (info->ndim > 0) snprintf(note, sizeof note, " (Batch element %lld):", (long long)b);
        snprintf(what, sizeof what, rule, (int)v[b], (int)v[b]);
        return tg__error(TG_EINVAL, "%s:%s %s", fn, note, what);
    }
    return TG_OK;
}
