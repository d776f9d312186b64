/* src/ops/elementwise.c - broadcasting and the driver of elementwise kernels.
 *
 * A kernel sees contiguous buffers of the compute dtype (f64 for f64, f32 for
 * f32/f16/bf16).  Each input is gathered, broadcast to the output shape, into
 * such a buffer unless it already is one (contiguous, same shape, dtype equal
 * to the compute dtype), in which case it is read in place.  The kernel writes
 * straight into the output when the output dtype is the compute dtype; f16 and
 * bf16 results are computed in f32 and rounded once (nearest even) at the end.
 * For those, the work runs in chunks of EW_CHUNK elements: half inputs of the
 * output's shape are converted chunk by chunk into small f32 buffers and each
 * f32 result chunk is rounded straight into the output, so no full-size f32
 * copy exists (kernels are pointwise, so the values are the same).
 *
 * The floating functions' drivers take integer inputs the way torch does:
 * an integer input is gathered, converted to f32, into the kernel's f32
 * buffer (tg__ew_input converts as it gathers), so exp of an i32 tensor is
 * bit for bit exp of that tensor cast to f32.
 */
#include <string.h>

#include "core/core.h"
#include "ops/elementwise.h"
#include "tapegrad/ops.h"

int tg__broadcast_shapes(const char *op, int ndim_a, const int64_t *shape_a, int ndim_b,
                         const int64_t *shape_b, int *ndim_out, int64_t *shape_out)
{
    int nd = ndim_a > ndim_b ? ndim_a : ndim_b;
    int64_t res[TG_MAX_DIMS];
    TG_ASSERT(nd <= TG_MAX_DIMS);
    /* Output dim d lines up with a's dim d - (nd - ndim_a); missing leading
     * dims of the shorter shape act as extent 1. */
    for (int d = 0; d < nd; d++) {
        int da = d - (nd - ndim_a), db = d - (nd - ndim_b);
        int64_t ea = da >= 0 ? shape_a[da] : 1, eb = db >= 0 ? shape_b[db] : 1;
        if (ea != eb && ea != 1 && eb != 1) {
            char sa[128], sb[128];
            tg_shape_str(sa, sizeof sa, ndim_a, shape_a);
            tg_shape_str(sb, sizeof sb, ndim_b, shape_b);
            return tg__error(TG_ESHAPE,
                             "%s: shapes %s and %s cannot be broadcast: dim %d has %lld vs %lld",
                             op, sa, sb, d, (long long)ea, (long long)eb);
        }
        res[d] = ea == 1 ? eb : ea;
    }
    *ndim_out = nd;
    memcpy(shape_out, res, sizeof(int64_t) * (size_t)nd);
    return TG_OK;
}

int tg__ew_check_float(const char *op, int i, const tg_tensor *t)
{
    TG_CHECK(t != NULL, TG_EINVAL, "%s: input %d is NULL", op, i);
    TG_CHECK(tg_dtype_is_float(t->dtype), TG_EDTYPE, "%s: input %d has dtype %s; float dtypes only",
             op, i, tg_dtype_name(t->dtype));
    return TG_OK;
}

static bool same_shape(const tg_tensor *t, int nd, const int64_t *shape)
{
    if (t->ndim != nd) return false;
    for (int d = 0; d < nd; d++)
        if (t->shape[d] != shape[d]) return false;
    return true;
}

int tg__ew_input(const tg_tensor *t, tg_dtype cdt, int nd, const int64_t *shape, int64_t n,
                    const void **p, void **owned)
{
    *owned = NULL;
    if (t->dtype == cdt && same_shape(t, nd, shape) && tg_tensor_is_contiguous(t)) {
        *p = tg_tensor_cdata(t);
        return TG_OK;
    }
    /* A view of t with nd dims: leading (missing) dims and stretched extent-1
     * dims get stride 0, so element (i0..i_nd-1) of the view is t's element
     * with the broadcast indices dropped. */
    tg_tensor v = *t;
    int lead = nd - t->ndim, vd = 0;
    for (int d = 0; d < nd; d++) {
        int dt = d - lead;
        int64_t st = (dt < 0 || t->shape[dt] == 1) ? 0 : t->strides[dt];
        /* Merge into the previous dim when the two walk one strided run
         * (outer stride == inner stride * inner extent; e.g. the stride-0 H, W
         * of a (1,C,1,1) operand): same row-major order, longer gather rows. */
        if (vd > 0 && v.strides[vd - 1] == st * shape[d]) {
            v.shape[vd - 1] *= shape[d];
            v.strides[vd - 1] = st;
            continue;
        }
        v.shape[vd] = shape[d];
        v.strides[vd++] = st;
    }
    v.ndim = vd;
    void *buf = tg__work_alloc((size_t)n * tg_dtype_size(cdt));   /* tg__work_free */
    if (!buf) return TG_ENOMEM;
    tg__gather(&v, cdt, buf);
    *p = buf;
    *owned = buf;
    return TG_OK;
}

/* ---- f16/bf16 results: chunked ------------------------------------------ */

/* The three f32 chunks of a thread (two inputs, the result) lie EW_STRIDE
 * floats apart, not a multiple of 4 KiB, so that the kernel's loads and
 * stores at the same index do not alias in the 4K-page bits of the address
 * (bf16 mul over 9 in-process rounds, median time against f32: 2.41x with
 * the padding against 2.62x without, three alternating runs each). */
enum { EW_CHUNK = 4096, EW_STRIDE = EW_CHUNK + 48 };

/* One operand of a chunked run: half data of the output's shape (converted
 * per chunk) or an f32 buffer of n elements (read in place). */
typedef struct ew_src {
    const void *p;
    bool half;
} ew_src;

/* Elements [lo, lo + m) of the result: inputs to f32 (buf holds three
 * chunks: two inputs and the result), kernel, one rounding into dst. */
static void ew_chunk(tg_dtype dt, tg_ew_kernel_fn k, double s, int nsrc, const ew_src *src,
                     uint16_t *dst, int64_t lo, int64_t m, float *buf, tg__cast cast)
{
    const void *pin[2] = {NULL, NULL};
    for (int i = 0; i < nsrc; i++) {
        if (src[i].half) {
            tg__half_to_f32_k(dt, (const uint16_t *)src[i].p + lo, buf + i * EW_STRIDE, m, cast);
            pin[i] = buf + i * EW_STRIDE;
        } else {
            pin[i] = (const float *)src[i].p + lo;
        }
    }
    float *o = buf + 2 * EW_STRIDE;
    k(TG_F32, o, pin[0], pin[1], m, s);
    tg__f32_to_half_k(dt, o, dst + lo, m, cast);
}

typedef struct {
    tg_dtype dt;
    tg_ew_kernel_fn k;
    double s;
    int nsrc;
    const ew_src *src;
    uint16_t *dst;
    int64_t n;
    tg__cast cast;   /* tg__cast_kernel(), asked once per call */
} ew_half_job;

/* Chunks [c0, c1) of an ew_half_job, through this thread's buffer. */
static void ew_half_chunks(void *p, int64_t c0, int64_t c1)
{
    const ew_half_job *q = p;
    float buf[3 * EW_STRIDE];
    for (int64_t c = c0; c < c1; c++) {
        const int64_t lo = c * EW_CHUNK, m = q->n - lo < EW_CHUNK ? q->n - lo : EW_CHUNK;
        ew_chunk(q->dt, q->k, q->s, q->nsrc, q->src, q->dst, lo, m, buf, q->cast);
    }
}

/* res (dt f16/bf16, n > 0 elements, shape (nd, shape)) = k(a, b). */
static int ew_run_half(tg_tensor *res, int nd, const int64_t *shape, int64_t n, const tg_tensor *a,
                       const tg_tensor *b, tg_ew_kernel_fn k, double s)
{
    const tg_tensor *in[2] = {a, b};
    void *owned[2] = {NULL, NULL};
    ew_src src[2];
    int nsrc = b ? 2 : 1, rc = TG_OK;
    for (int i = 0; i < nsrc && rc == TG_OK; i++) {
        const tg_tensor *t = in[i];
        src[i].half = t->dtype == res->dtype && same_shape(t, nd, shape) && tg_tensor_is_contiguous(t);
        if (src[i].half) src[i].p = tg_tensor_cdata(t);
        else rc = tg__ew_input(t, TG_F32, nd, shape, n, &src[i].p, &owned[i]);
    }
    if (rc == TG_OK) {
        ew_half_job q = {.dt = res->dtype, .k = k, .s = s, .nsrc = nsrc, .src = src,
                         .dst = tg_tensor_data(res), .n = n, .cast = tg__cast_kernel()};
        tg__parallel_range((n + EW_CHUNK - 1) / EW_CHUNK, n > 32768, ew_half_chunks, &q);
    }
    tg__work_free(owned[0]);
    tg__work_free(owned[1]);
    return rc;
}

/* k over contiguous compute-dtype buffers, a range of elements per thread. */
typedef struct {
    tg_dtype cdt;
    tg_ew_kernel_fn k;
    double s;
    char *out;
    const char *a, *b;   /* b may be NULL */
    int64_t es;          /* element size */
} ew_whole_job;

static void ew_whole_range(void *p, int64_t lo, int64_t hi)
{
    const ew_whole_job *q = p;
    const int64_t at = lo * q->es;
    q->k(q->cdt, q->out + at, q->a + at, q->b ? q->b + at : NULL, hi - lo, q->s);
}

/* res (contiguous, of res's dtype and shape (nd, shape)) = k on a (and b,
 * may be NULL) broadcast to that shape; every element of res is written.
 * Each result element is computed from the same element of each input, read
 * before it is written (whole, or chunk by chunk for half dtypes), so res may
 * be one of the inputs. */
static int ew_fill(tg_tensor *res, int nd, const int64_t *shape, const tg_tensor *a,
                   const tg_tensor *b, tg_ew_kernel_fn k, double s)
{
    const tg_dtype dt = res->dtype, cdt = tg__compute_dtype(dt);
    const int64_t n = tg__numel(nd, shape);
    if (n == 0) return TG_OK;
    if (dt != cdt) return ew_run_half(res, nd, shape, n, a, b, k, s);
    const void *pa = NULL, *pb = NULL;
    void *own_a = NULL, *own_b = NULL;
    int rc = tg__ew_input(a, cdt, nd, shape, n, &pa, &own_a);
    if (rc == TG_OK && b) rc = tg__ew_input(b, cdt, nd, shape, n, &pb, &own_b);
    if (rc == TG_OK) {
        ew_whole_job q = {.cdt = cdt, .k = k, .s = s, .out = tg_tensor_data(res), .a = pa, .b = pb,
                          .es = (int64_t)tg_dtype_size(cdt)};
        tg__parallel_range(n, n > 32768, ew_whole_range, &q);
    }
    tg__work_free(own_a);
    tg__work_free(own_b);
    return rc;
}

/* Allocates the output (dtype dt, shape (nd, shape)), runs k on a (and b, may
 * be NULL) broadcast to that shape and writes the result. */
static int ew_run(tg_tensor **out, tg_dtype dt, int nd, const int64_t *shape, const tg_tensor *a,
                  const tg_tensor *b, tg_ew_kernel_fn k, double s)
{
    tg_tensor *res = tg__tensor_uninit(dt, nd, shape);   /* ew_fill writes all n */
    if (!res) return TG_ENOMEM;
    int rc = ew_fill(res, nd, shape, a, b, k, s);
    if (rc < 0) {
        tg_tensor_release(res);
        return rc;
    }
    *out = res;
    return TG_OK;
}

int tg__ew_binary(const char *op, tg_tensor **out, const tg_tensor *a, const tg_tensor *b,
                  tg_ew_kernel_fn k, double s)
{
    int nd;
    int64_t shape[TG_MAX_DIMS];
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out is NULL", op);
    TG_TRY(tg__ew_check_float(op, 0, a));
    TG_TRY(tg__ew_check_float(op, 1, b));
    TG_CHECK(a->dtype == b->dtype, TG_EDTYPE, "%s: inputs have dtypes %s and %s; they must match",
             op, tg_dtype_name(a->dtype), tg_dtype_name(b->dtype));
    TG_TRY(tg__broadcast_shapes(op, a->ndim, a->shape, b->ndim, b->shape, &nd, shape));
    return ew_run(out, a->dtype, nd, shape, a, b, k, s);
}

int tg__ew_binary_over(const char *op, const tg_tensor *a, tg_tensor *b, tg_ew_kernel_fn k,
                       double s)
{
    TG_TRY(tg__ew_check_float(op, 0, a));
    TG_TRY(tg__ew_check_float(op, 1, b));
    TG_CHECK(a->dtype == b->dtype, TG_EDTYPE, "%s: inputs have dtypes %s and %s; they must match",
             op, tg_dtype_name(a->dtype), tg_dtype_name(b->dtype));
    TG_CHECK(tg_tensor_is_contiguous(b) && b->offset == 0 && same_shape(a, b->ndim, b->shape),
             TG_ESHAPE, "%s: the result is written over b, which must be contiguous and of a's shape",
             op);
    return ew_fill(b, b->ndim, b->shape, a, b, k, s);
}

int tg__ew_unary(const char *op, tg_tensor **out, const tg_tensor *a, tg_ew_kernel_fn k, double s)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out is NULL", op);
    TG_TRY(tg__ew_check_float(op, 0, a));
    return ew_run(out, a->dtype, a->ndim, a->shape, a, NULL, k, s);
}

int tg__ew_unary_float(const char *op, tg_tensor **out, const tg_tensor *a, tg_ew_kernel_fn k,
                       double s)
{
    if (!a || tg_dtype_is_float(a->dtype)) return tg__ew_unary(op, out, a, k, s);
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out is NULL", op);
    return ew_run(out, TG_F32, a->ndim, a->shape, a, NULL, k, s);
}

int tg__ew_binary_float(const char *op, tg_tensor **out, const tg_tensor *a,
                        const tg_tensor *b, tg_ew_kernel_fn k, double s)
{
    if (!a || !b || (tg_dtype_is_float(a->dtype) && tg_dtype_is_float(b->dtype)))
        return tg__ew_binary(op, out, a, b, k, s);
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out is NULL", op);
    /* i: the integer input when the other one is a float */
    const bool fa = tg_dtype_is_float(a->dtype), fb = tg_dtype_is_float(b->dtype);
    const int i = fa ? 1 : 0;
    TG_CHECK(!fa && !fb, TG_EDTYPE,
             "%s: input %d has dtype %s but input %d has %s; an integer input needs an "
             "integer partner (both then computed in f32): cast input %d to %s first",
             op, i, tg_dtype_name(i ? b->dtype : a->dtype), 1 - i,
             tg_dtype_name(i ? a->dtype : b->dtype), i, tg_dtype_name(i ? a->dtype : b->dtype));
    int nd;
    int64_t shape[TG_MAX_DIMS];
    TG_TRY(tg__broadcast_shapes(op, a->ndim, a->shape, b->ndim, b->shape, &nd, shape));
    return ew_run(out, TG_F32, nd, shape, a, b, k, s);
}

int tg__ew_save_output(tg_ctx *ctx, tg_tensor **out)
{
    if (!ctx) return TG_OK;
    tg_tensor *alias = NULL;
    const int rc = tg_tensor_detach(&alias, *out);
    if (rc < 0) {
        tg_tensor_release(*out);
        *out = NULL;
        return rc;
    }
    tg__ctx_save(ctx, alias);
    tg_tensor_release(alias);
    return TG_OK;
}
