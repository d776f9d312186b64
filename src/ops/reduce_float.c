/* src/ops/reduce_float.c - the kernels of the float reductions (sum, mean,
 * sum_dims, mean_dims, sum_to_shape in reduce.c).
 *
 * Every input element, visited in row-major order, is added into the output
 * element whose flat index is sum_d idx[d] * ostride[d], where ostride[d] is
 * 0 for a reduced dim and the output's contiguous stride of that dim
 * otherwise.  Sums accumulate in double whatever the dtype and are rounded
 * once into the output dtype; the order is fixed, so results do not depend
 * on the thread count.  f32/f64 inputs take reduce_fast, which reads a in
 * place and adds the same terms in the same order per output (bit-identical
 * results), except that a contiguous f32 run of 64 or more terms along the
 * innermost reduced dim is summed in lanes (below); outputs may be split
 * over threads but each is summed by one thread.  f16/bf16 inputs go
 * through reduce_fast in small f32 pieces. */
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

#include "core/core.h"
#include "ops/activation_internal.h"
#include "ops/reduce_internal.h"
#include "ops/softmax_rows_internal.h"

/* Sums a into out (contiguous, float) following ostride (see above), then
 * multiplies by scale.  TG_ENOMEM leaves out unchanged. */
static int reduce_kernel(const tg_tensor *a, const int64_t *ostride, tg_tensor *out, double scale)
{
    int64_t n = tg__numel(a->ndim, a->shape), on = tg__numel(out->ndim, out->shape);
    double *x = tg__malloc((size_t)(n > 0 ? n : 1) * sizeof *x);
    double *acc = tg__calloc((size_t)(on > 0 ? on : 1), sizeof *acc);
    if (!x || !acc) {
        free(x);
        free(acc);
        return TG_ENOMEM;
    }
    if (n > 0) tg__gather(a, TG_F64, x);
    int64_t idx[TG_MAX_DIMS] = {0}, o = 0;
    for (int64_t i = 0; i < n; i++) {
        acc[o] += x[i];
        o = tg__reduce_next(a, ostride, idx, o);
    }
    for (int64_t j = 0; j < on; j++) acc[j] *= scale;
    if (on > 0) tg__scatter(out, TG_F64, acc);
    free(x);
    free(acc);
    return TG_OK;
}

/* ---- fast path: f32/f64 input read in place ------------------------------------
 *
 * Same sums in the same order as reduce_kernel, without the f64 copy of a or
 * per-element dtype dispatch.  The dims of a are first simplified: extent-1
 * dims dropped, neighbours with the same role (reduced or kept) merged when
 * they are one strided run (stride[d] == stride[d+1] * shape[d+1]); both keep
 * the row-major visiting order.  Output flat index = row-major index over the
 * kept dims, which is what ostride encodes. */

typedef struct rdim {
    int64_t n, st; /* extent, stride of a in elements */
    bool red;
} rdim;

static int simplify_dims(const tg_tensor *a, const int64_t *ostride, rdim *dd)
{
    int nd = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] == 1) continue;
        bool red = ostride[d] == 0;
        if (nd > 0 && dd[nd - 1].red == red && dd[nd - 1].st == a->strides[d] * a->shape[d]) {
            dd[nd - 1].n *= a->shape[d];
            dd[nd - 1].st = a->strides[d];
            continue;
        }
        dd[nd++] = (rdim){a->shape[d], a->strides[d], red};
    }
    return nd;
}

/* Steps the row-major counter idx over dims[0..nd) and pos with it. */
static inline int64_t step_pos(int nd, const rdim *dims, int64_t *idx, int64_t pos)
{
    for (int d = nd - 1; d >= 0; d--) {
        pos += dims[d].st;
        if (++idx[d] < dims[d].n) break;
        pos -= dims[d].st * dims[d].n;
        idx[d] = 0;
    }
    return pos;
}

/* f16/bf16 runs are converted to f32 (exactly) in pieces of this many
 * elements, on the stack: no full-size f32 copy of a half tensor. */
#define TG__HALF_RUN 256

/* buf[0..len) = the f16/bf16 elements data[pos + k*st] as f32. */
static void half_run(tg_dtype dt, const void *data, int64_t pos, int64_t st, int64_t len,
                     float *buf, tg__cast cast)
{
    const uint16_t *h = (const uint16_t *)data + pos;
    if (st == 1) {
        tg__half_to_f32_k(dt, h, buf, len, cast);
        return;
    }
    for (int64_t k = 0; k < len; k++) buf[k] = (float)tg_dtype_load(dt, h, k * st);
}

/* ---- f32 runs in lanes ------------------------------------------------------------
 *
 * A contiguous run of f32 terms of at least LANES_MIN is summed in LANES
 * interleaved double accumulators (term k into lane k % LANES), which meet
 * pairwise at the end: a sum's order then depends on the run's length
 * alone, so every vector width below gives the same bits, on any CPU and
 * thread count; f64 runs keep one accumulator (row-major order, exact to
 * the order of the terms). */
enum { LANES = 32, LANES_MIN = 64 };

typedef double lanes_v8d __attribute__((vector_size(64)));
typedef double lanes_v4d __attribute__((vector_size(32)));
typedef double lanes_v2d __attribute__((vector_size(16)));

/* The pairwise meeting of s's lanes (l and l + w for w = 16, 8, ..., 1)
 * as vector adds of the same pairs, lane l of v[l / 8] being s[l], so that
 * it does not go through memory one double at a time. */
static inline __attribute__((always_inline)) double lanes_meet(const double *s)
{
    lanes_v8d v[LANES / 8];
    memcpy(v, s, sizeof v);
    v[0] += v[2];   /* w = 16 */
    v[1] += v[3];
    v[0] += v[1];   /* w = 8 */
    lanes_v4d h = __builtin_shufflevector(v[0], v[0], 0, 1, 2, 3) +
                  __builtin_shufflevector(v[0], v[0], 4, 5, 6, 7);   /* w = 4 */
    lanes_v2d p = __builtin_shufflevector(h, h, 0, 1) + __builtin_shufflevector(h, h, 2, 3);
    return p[0] + p[1];   /* w = 2, 1 */
}
_Static_assert(LANES == 32, "lanes_meet is written for 32 lanes");

static inline __attribute__((always_inline)) double lanes_body(const float *x, int64_t n)
{
    double s[LANES] = {0.0};
    int64_t k = 0;
    for (; k + LANES <= n; k += LANES)
        for (int l = 0; l < LANES; l++) s[l] += (double)x[k + l];
    for (int l = 0; k < n; k++, l++) s[l] += (double)x[k];
    return lanes_meet(s);
}

static double lanes_plain(const float *x, int64_t n) { return lanes_body(x, n); }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx2"))) static double lanes_avx2(const float *x, int64_t n)
{
    return lanes_body(x, n);
}

/* The last n % 32 terms of x (from k) into the lanes v (32 doubles), then
 * their meeting. */
__attribute__((target("avx512f"))) static inline double lanes_end_avx512(const __m512d *v,
                                                                       const float *x,
                                                                       int64_t k, int64_t n)
{
    double s[LANES];
    for (int j = 0; j < LANES / 8; j++) _mm512_storeu_pd(s + 8 * j, v[j]);
    for (int l = 0; k < n; k++, l++) s[l] += (double)x[k];
    return lanes_meet(s);
}

/* lanes_body's sums of R runs x[0..R) of n terms each at once (R = 1, 2:
 * the lanes of two runs are independent chains of adds, which one run's
 * four vectors leave the adder waiting on), each 8-float load widened in
 * one instruction; lane l of v[l / 8] is s[l], the same adds in the same
 * order. */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
lanes_runs_avx512(const float *const *x, int R, int64_t n, double *out)
{
    __m512d v[2][LANES / 8];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < LANES / 8; j++) v[r][j] = _mm512_setzero_pd();
    int64_t k = 0;
    for (; k + LANES <= n; k += LANES)
        for (int r = 0; r < R; r++)
            for (int j = 0; j < LANES / 8; j++) {
                const __m512d t = _mm512_cvtps_pd(_mm256_loadu_ps(x[r] + k + 8 * j));
                v[r][j] = _mm512_add_pd(v[r][j], t);
            }
    for (int r = 0; r < R; r++) out[r] = lanes_end_avx512(v[r], x[r], k, n);
}

__attribute__((target("avx512f"))) static double lanes_avx512(const float *x, int64_t n)
{
    double r;
    lanes_runs_avx512(&x, 1, n, &r);
    return r;
}

__attribute__((target("avx512f"))) static void lanes2_avx512(const float *const *x, int64_t n,
                                                             double *out)
{
    lanes_runs_avx512(x, 2, n, out);
}
#else
static double lanes_avx2(const float *x, int64_t n) { return lanes_body(x, n); }
static double lanes_avx512(const float *x, int64_t n) { return lanes_body(x, n); }
#define lanes2_avx512 NULL
#endif

/* The lanes' sum at the width of the other double-lane kernels
 * (tg__exp_width_get): looked up once per reduction, not per run. */
typedef struct lanes_fn {
    double (*one)(const float *x, int64_t n);
    void (*two)(const float *const *x, int64_t n, double *out);   /* NULL: one twice */
} lanes_fn;

static lanes_fn lanes_pick(void)
{
    const tg__exp_width w = tg__exp_width_get();
    return w == TG__EXP_AVX512 ? (lanes_fn){lanes_avx512, lanes2_avx512}
           : w == TG__EXP_AVX2 ? (lanes_fn){lanes_avx2, NULL}
                               : (lanes_fn){lanes_plain, NULL};
}

double tg__reduce_lanes_f32(const float *x, int64_t n) { return lanes_pick().one(x, n); }

/* out[i] = the lanes' sum of the n terms from x + pos[i], i < cnt. */
static inline void lanes_many(const lanes_fn *lanes, const float *x, const int64_t *pos,
                              int cnt, int64_t n, double *out)
{
    int i = 0;
    if (lanes->two)
        for (; i + 2 <= cnt; i += 2)
            lanes->two((const float *const[]){x + pos[i], x + pos[i + 1]}, n, out + i);
    for (; i < cnt; i++) out[i] = lanes->one(x + pos[i], n);
}

/* Sum over the reduced dims r[0..nr) (row-major, nr >= 1) of a's elements
 * from pos[i] into out[i], for cnt outputs side by side: for a fixed kept
 * index that is exactly the subsequence reduce_kernel adds into that
 * output, in the same order, so the double result is identical; f16/bf16
 * elements are added as their exact f32 values.  Called with a constant cnt
 * (1, or GROUP: GROUP independent chains of adds where one output is one
 * chain, which a bias gradient's 12544 terms waited on in turn), so that
 * each call site gets its own copy with the accumulators in registers. */
#define GROUP 8

static inline __attribute__((always_inline)) void sum_blocks(const void *data, tg_dtype dt,
                                                             const int64_t *pos, int cnt, int nr,
                                                             const rdim *r, const lanes_fn *lanes,
                                                             double *out, tg__cast cast)
{
    double s[GROUP] = {0};
    int64_t inner = r[nr - 1].n, ist = r[nr - 1].st, rows = 1, off = 0;
    int64_t idx[TG_MAX_DIMS] = {0};
    for (int d = 0; d < nr - 1; d++) rows *= r[d].n;
    for (int64_t row = 0; row < rows; row++) {
        if (dt == TG_F64) {
            const double *x = (const double *)data + off;
            for (int64_t k = 0; k < inner; k++)
                for (int i = 0; i < cnt; i++) s[i] += x[pos[i] + k * ist];
        } else if (dt == TG_F32 && ist == 1 && inner >= LANES_MIN) {
            const float *x = (const float *)data + off;
            double t[GROUP];
            lanes_many(lanes, x, pos, cnt, inner, t);
            for (int i = 0; i < cnt; i++) s[i] += t[i];
        } else if (dt == TG_F32) {
            const float *x = (const float *)data + off;
            for (int64_t k = 0; k < inner; k++)
                for (int i = 0; i < cnt; i++) s[i] += (double)x[pos[i] + k * ist];
        } else {
            float buf[GROUP][TG__HALF_RUN];
            for (int64_t k0 = 0; k0 < inner; k0 += TG__HALF_RUN) {
                const int64_t len = inner - k0 < TG__HALF_RUN ? inner - k0 : TG__HALF_RUN;
                for (int i = 0; i < cnt; i++)
                    half_run(dt, data, pos[i] + off + k0 * ist, ist, len, buf[i], cast);
                for (int64_t k = 0; k < len; k++)
                    for (int i = 0; i < cnt; i++) s[i] += (double)buf[i][k];
            }
        }
        off = step_pos(nr - 1, r, idx, off);
    }
    for (int i = 0; i < cnt; i++) out[i] = s[i];
}

/* Output j of data (out's, taken once: tg_tensor_data counts each call)
 * of dtype dt, f32 or f64. */
static inline void store_out(tg_dtype dt, void *data, int64_t j, double v)
{
    if (dt == TG_F64) ((double *)data)[j] = v;
    else ((float *)data)[j] = (float)v;
}

/* Innermost dim reduced: each output is one independent block sum, so the
 * outputs are split over threads; every output still has one fixed order. */
typedef struct {
    const tg_tensor *a;
    int nk, nr;
    const rdim *k, *r;
    tg_dtype odt;
    void *od;   /* the output's data */
    lanes_fn lanes;
    double scale;
    tg__cast cast;   /* half a: tg__cast_kernel(), asked once per reduction */
} blocks_job;

/* Outputs [j0, j1) of reduce_blocks. */
static void reduce_blocks_range(void *p, int64_t j0, int64_t j1)
{
    const blocks_job *q = p;
    const tg_tensor *a = q->a;
    const rdim *k = q->k;
    for (int64_t j = j0; j < j1;) {
        const int cnt = q->nr > 0 && j1 - j >= GROUP ? GROUP : 1;
        int64_t pos[GROUP];
        double sum[GROUP] = {0};
        for (int i = 0; i < cnt; i++) {
            /* Kept multi-index of output j + i (row-major over k) -> position in a. */
            int64_t rest = j + i;
            pos[i] = a->offset;
            for (int d = q->nk - 1; d > 0; d--) {
                pos[i] += (rest % k[d].n) * k[d].st;
                rest /= k[d].n;
            }
            if (q->nk > 0) pos[i] += rest * k[0].st;   /* rest < k[0].n: no division */
        }
        if (q->nr == 0) sum[0] = 0.0 + tg_dtype_load(a->dtype, a->storage->data, pos[0]);
        else if (cnt == GROUP)
            sum_blocks(a->storage->data, a->dtype, pos, GROUP, q->nr, q->r, &q->lanes, sum,
                       q->cast);
        else sum_blocks(a->storage->data, a->dtype, pos, 1, q->nr, q->r, &q->lanes, sum, q->cast);
        for (int i = 0; i < cnt; i++) store_out(q->odt, q->od, j + i, sum[i] * q->scale);
        j += cnt;
    }
}

static void reduce_blocks(const tg_tensor *a, int nk, const rdim *k, int nr, const rdim *r,
                          tg_tensor *out, int64_t on, double scale)
{
    blocks_job q = {.a = a, .nk = nk, .nr = nr, .k = k, .r = r, .odt = out->dtype,
                    .od = tg_tensor_data(out), .lanes = lanes_pick(), .scale = scale,
                    .cast = tg__dtype_is_half(a->dtype) ? tg__cast_kernel() : TG__CAST_AUTO};
    tg__parallel_range(on, tg__numel(a->ndim, a->shape) > 32768, reduce_blocks_range, &q);
}

/* Innermost dim kept: walk a in row-major order as reduce_kernel does, the
 * inner run adding into consecutive outputs (its output stride is 1). */
static int reduce_rows(const tg_tensor *a, int nd, const rdim *dd, tg_tensor *out, int64_t on,
                       double scale)
{
    double *acc = tg__calloc((size_t)on, sizeof *acc);
    if (!acc) return TG_ENOMEM;
    int64_t ost[TG_MAX_DIMS], run = 1;
    for (int d = nd - 1; d >= 0; d--) {
        ost[d] = dd[d].red ? 0 : run;
        if (!dd[d].red) run *= dd[d].n;
    }
    const void *data = a->storage->data;
    const tg__cast cast = tg__dtype_is_half(a->dtype) ? tg__cast_kernel() : TG__CAST_AUTO;
    int64_t inner = dd[nd - 1].n, ist = dd[nd - 1].st, rows = 1;
    int64_t idx[TG_MAX_DIMS] = {0}, pos = a->offset, o = 0;
    for (int d = 0; d < nd - 1; d++) rows *= dd[d].n;
    for (int64_t row = 0; row < rows; row++) {
        double *y = acc + o;
        if (a->dtype == TG_F64) {
            const double *x = (const double *)data + pos;
            for (int64_t k = 0; k < inner; k++) y[k] += x[k * ist];
        } else if (a->dtype == TG_F32) {
            const float *x = (const float *)data + pos;
            for (int64_t k = 0; k < inner; k++) y[k] += (double)x[k * ist];
        } else {
            float buf[TG__HALF_RUN];
            for (int64_t k0 = 0; k0 < inner; k0 += TG__HALF_RUN) {
                const int64_t len = inner - k0 < TG__HALF_RUN ? inner - k0 : TG__HALF_RUN;
                half_run(a->dtype, data, pos + k0 * ist, ist, len, buf, cast);
                for (int64_t k = 0; k < len; k++) y[k0 + k] += (double)buf[k];
            }
        }
        /* Same counter as step_pos, also tracking the output index o. */
        for (int d = nd - 2; d >= 0; d--) {
            pos += dd[d].st;
            o += ost[d];
            if (++idx[d] < dd[d].n) break;
            pos -= dd[d].st * dd[d].n;
            o -= ost[d] * dd[d].n;
            idx[d] = 0;
        }
    }
    void *od = tg_tensor_data(out);
    for (int64_t j = 0; j < on; j++) store_out(out->dtype, od, j, acc[j] * scale);
    free(acc);
    return TG_OK;
}

/* Returns 1 when it handled the reduction (a float a with at least one
 * element; out f32 or f64), 0 to fall back to reduce_kernel, or TG_ENOMEM. */
static int reduce_fast(const tg_tensor *a, const int64_t *ostride, tg_tensor *out, double scale)
{
    int64_t n = tg__numel(a->ndim, a->shape), on = tg__numel(out->ndim, out->shape);
    if (!tg_dtype_is_float(a->dtype) || n == 0) return 0;
    if (out->dtype != TG_F32 && out->dtype != TG_F64) return 0;
    rdim dd[TG_MAX_DIMS], k[TG_MAX_DIMS], r[TG_MAX_DIMS];
    int nd = simplify_dims(a, ostride, dd), nk = 0, nr = 0;
    if (nd > 0 && !dd[nd - 1].red) {
        TG_TRY(reduce_rows(a, nd, dd, out, on, scale));
        return 1;
    }
    for (int d = 0; d < nd; d++) {
        if (dd[d].red) r[nr++] = dd[d];
        else k[nk++] = dd[d];
    }
    reduce_blocks(a, nk, k, nr, r, out, on, scale);
    return 1;
}

/* f16/bf16 a: reduced by reduce_fast (runs converted to f32 in small pieces,
 * exactly) into f64 sums, then rounded once into out as reduce_kernel does
 * (its f64 gather of a holds the same values, added in the same order), so
 * the result is bit-identical, with no full-size copy of a and without
 * per-element dtype dispatch.  Returns 1 when handled, 0 to fall back, or
 * TG_ENOMEM. */
static int reduce_half(const tg_tensor *a, const int64_t *ostride, tg_tensor *out, double scale)
{
    if ((a->dtype != TG_F16 && a->dtype != TG_BF16) || tg__numel(a->ndim, a->shape) == 0) return 0;
    tg_tensor *o64 = tg__tensor_empty(TG_F64, out->ndim, out->shape);
    if (!o64) return TG_ENOMEM;
    int rc = reduce_fast(a, ostride, o64, scale);
    if (rc > 0) tg__scatter(out, TG_F64, tg_tensor_cdata(o64));
    tg_tensor_release(o64);
    return rc;
}

/* Allocates out (ndim, shape) of a's dtype and reduces a into it. */
int tg__reduce_float(tg_tensor **out, const tg_tensor *a, int ndim, const int64_t *shape,
                     const int64_t *ostride, double scale)
{
    tg_tensor *r = tg__tensor_empty(a->dtype, ndim, shape);
    if (!r) return TG_ENOMEM;
    int rc = reduce_fast(a, ostride, r, scale);
    if (rc == 0) rc = reduce_half(a, ostride, r, scale);
    if (rc == 0) rc = reduce_kernel(a, ostride, r, scale);
    if (rc < 0) {
        tg_tensor_release(r);
        return rc;
    }
    *out = r;
    return TG_OK;
}
