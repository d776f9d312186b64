/* src/ops/attention_fast.c - scaled dot-product attention for inference,
 * fused (src/ops/attention_internal.h).  With B the leading dims flattened,
 * for each block of query rows [r0, r0 + R) of matrix b:
 *   s = (q[b, r0:r0+R] / sqrt(E)) @ k[b]^T          (R, S)   one GEMM
 *   s = s + mask[b, r0:r0+R]  (-inf where a u8 mask is set)
 *   p = softmax(s) along S;  out[b, r0:r0+R] = p @ v[b]   (R, Ev)   one GEMM
 * so the (B, L, S) weights never exist whole and nothing is recorded; the
 * blocks (b, r0) are the tasks of the thread pool.
 *
 * The arithmetic is the taped path's (src/ops/attention.c): q divided by
 * sqrt(E) (itself rounded to the dtype first, as tg_div_scalar rounds its
 * scalar) in double and rounded to the dtype (tg_div_scalar), the mask
 * added in the dtype, softmax as src/ops/softmax.c computes a row (in
 * double, the row's maximum subtracted, rounded once; f32 rows with the
 * vectorized exp of src/ops/softmax_rows.c), the same GEMM calls on the
 * same layouts.  OpenBLAS may run a block of R rows on another kernel than
 * the taped path's L rows, adding each element's products in another
 * order, so the results agree to a few ulps of the dtype
 * (tests/test_attention_fast.c: 1e-6 relative in f32, 1e-12 in f64).  A
 * row whose scores are all -inf, or that holds +inf or NaN, has x - max =
 * NaN somewhere and gives a NaN row, as the taped softmax does.
 *
 * bf16 and f16 blocks (run_block_half) hold the dtype's values in f32
 * buffers and round where the taped path's half ops round: q / sqrt(E)
 * (sqrt(E) rounded to the dtype) in double, to f32, to the dtype; the
 * scores' f32 sums to the dtype; the mask added in f32 and rounded (an f32
 * mask inside autocast: added in f32 and kept, tg_add's f32 result);
 * softmax in double rounded once to the dtype; the output's f32 sums
 * rounded into its rows.  The products are bf16 (f16) values multiplied
 * exactly and summed in f32: on the bf16 kernel where the taped product
 * takes it (tg_bf16_kernel_get() of the calling thread,
 * tg__bf16_gemm_pays), with k and v read as bits in place, else sgemm on
 * widened copies, made once per matrix and task.  Only the order of those
 * f32 sums, and the softmax's double arithmetic (src/ops/softmax_rows.c's
 * vectorized exp and partial sums, where the taped half softmax calls
 * libm's exp and keeps one sum), can differ from the taped path's; the bound
 * that follows is in docs/autograd.md and tests/test_attention_fast_half.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "ops/attention_internal.h"
#include "ops/elementwise.h"
#include "ops/exp_simd.h"
#include "ops/softmax_rows_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/registry.h"

/* Query rows per block, and the most scores (R * S) a block holds. */
enum { BLOCK_ROWS = 64, BLOCK_SCORES = 32768 };

static _Thread_local uint64_t fast_calls;

uint64_t tg__attention_fast_calls(void) { return fast_calls; }

bool tg__attention_fast_applies(const tg_tensor *q, const tg_tensor *k, const tg_tensor *v,
                                const tg_attention_opts *o)
{
    return tg__attention_fast_applies_as(q, k, v, o, q->dtype);
}

bool tg__attention_fast_mask_fits(const tg_tensor *m, tg_dtype dt)
{
    /* a float mask of the dtype; inside autocast also f32 (the scores'
     * sum with it is f32 there, as tg_add's of a half and an f32) */
    return !m || m->dtype == TG_U8 || m->dtype == dt ||
           (m->dtype == TG_F32 && tg_autocast_active(NULL));
}

bool tg__attention_fast_applies_as(const tg_tensor *q, const tg_tensor *k, const tg_tensor *v,
                                   const tg_attention_opts *o, tg_dtype dt)
{
    const char *env = getenv("TG_ATTENTION_FAST");
    if (env && strcmp(env, "0") == 0) return false;
    if (o->training && o->dropout_p > 0.0) return false;
    const tg_tensor *m = o->attn_mask;
    const tg_dtype in = q->dtype;
    if (!tg_dtype_is_float(in) || k->dtype != in || v->dtype != in) return false;
    tg_dtype amp;   /* inside autocast: computed in its half dtype only */
    const bool in_amp = tg_autocast_active(&amp);
    if (in_amp && (amp != dt || !tg__dtype_is_half(dt))) return false;
    if (in != dt && !(in_amp && in == TG_F32)) return false;
    if (!tg__attention_fast_mask_fits(m, dt)) return false;
    if (tg_grad_enabled() &&
        (tg_tensor_requires_grad(q) || tg_tensor_requires_grad(k) ||
         tg_tensor_requires_grad(v) || (m && tg_tensor_requires_grad(m))))
        return false;
    const tg_tensor *all[3] = {q, k, v};
    for (int i = 0; i < 3; i++)
        for (int d = 0; d < all[i]->ndim; d++)
            if (all[i]->shape[d] < 1 || all[i]->shape[d] > INT32_MAX) return false;
    return true;
}

/* ---- the job ---- */

/* q, k or v: matrix b's row i starts at element base + i0 ls[0] + i1 ls[1]
 * + i rs, (i0, i1) b's leading indices; its columns are unit-stride and
 * rs >= their count (a GEMM's leading dim). */
typedef struct operand {
    const char *base;
    int64_t ls[2], rs;
} operand;

typedef struct fast_job {
    tg_dtype dt;                 /* TG_F32, TG_F64, TG_BF16 or TG_F16 */
    bool q_f32;                  /* a half dt with f32 q (inside autocast) */
    tg__exp_width exp;           /* the f32 rows' exp's width */
    /* half dtypes: the bf16 kernel of q k^T and of p v (AUTO: sgemm), and
     * whether k (v) goes to it as bf16 bits, read in place */
    tg_bf16_kernel kern_qk, kern_pv;
    bool bits_k, bits_v;
    /* inside autocast: softmax is an f32 op there, so the weights are
     * rounded to f32 and then to the dtype (the cast of p @ v's operand) */
    bool amp;
    int64_t lead1;               /* the second leading extent (1 without one) */
    int64_t L, S, E, Ev;
    int64_t rows, nqb, units, per;   /* block rows, blocks per matrix, blocks, per task */
    double scale;                /* sqrt(E), rounded to the dtype as tg_div_scalar's s */
    operand q, k, v;
    /* the mask (mbase NULL: none), broadcast by zero strides */
    const char *mbase;
    bool mu8, mf32;   /* mf32: an f32 mask on half scores (inside autocast) */
    int64_t mls[2], mrs, mcs;
    /* the output (B, L, Ev): matrix b's row i at out + ols[.] + i ors,
     * unit-stride columns */
    char *out;
    int64_t ols[2], ors;
} fast_job;

/* The operand of t, a view of it when its matrices can go to a GEMM as they
 * are, else of its contiguous copy (kept in *keep). */
static int operand_of(tg_tensor **keep, tg_tensor *t, operand *o)
{
    const int nd = t->ndim;
    const int64_t r = t->shape[nd - 2], c = t->shape[nd - 1], rs = t->strides[nd - 2];
    const bool fits = (c == 1 || t->strides[nd - 1] == 1) &&
                      (r == 1 || (rs >= c && rs <= INT32_MAX));
    if (!fits) {
        TG_TRY(tg_contiguous(keep, t));
        t = *keep;
    }
    const int64_t es = (int64_t)tg_dtype_size(t->dtype);
    o->base = (const char *)t->storage->data + t->offset * es;
    o->ls[0] = nd > 2 ? t->strides[0] : 0;
    o->ls[1] = nd > 3 ? t->strides[1] : 0;
    o->rs = r == 1 ? c : t->strides[nd - 2];
    return TG_OK;
}

/* The mask m broadcast to nd dims (..., L, S): stride 0 along its extents
 * of 1 and the dims it lacks. */
static void mask_of(fast_job *j, const tg_tensor *m, int nd)
{
    int64_t st[TG_MAX_DIMS] = {0};
    for (int i = 1; i <= m->ndim; i++)
        st[nd - i] = m->shape[m->ndim - i] == 1 ? 0 : m->strides[m->ndim - i];
    j->mbase = (const char *)m->storage->data + m->offset * (int64_t)tg_dtype_size(m->dtype);
    j->mu8 = m->dtype == TG_U8;
    j->mf32 = m->dtype == TG_F32 && tg__dtype_is_half(j->dt);
    j->mls[0] = nd > 2 ? st[0] : 0;
    j->mls[1] = nd > 3 ? st[1] : 0;
    j->mrs = st[nd - 2];
    j->mcs = st[nd - 1];
}

/* The offset of matrix b in an operand of leading strides ls. */
static int64_t lead_off(const fast_job *j, const int64_t *ls, int64_t b)
{
    return b / j->lead1 * ls[0] + b % j->lead1 * ls[1];
}

/* Row `row` (of S scores, query l of matrix b) with the mask applied, as
 * masked_fill(-inf) or an add in the dtype. */
static void mask_row(const fast_job *j, void *row, int64_t b, int64_t l)
{
    const int64_t esz = j->mu8 ? 1 : (int64_t)tg_dtype_size(j->dt), mcs = j->mcs;
    const char *m = j->mbase + (lead_off(j, j->mls, b) + l * j->mrs) * esz;
    if (j->mu8) {
        const uint8_t *mu = (const uint8_t *)m;
        double *rd = row;
        float *rf = row;
        if (j->dt == TG_F64)
            for (int64_t c = 0; c < j->S; c++) rd[c] = mu[c * mcs] ? -INFINITY : rd[c];
        else
            for (int64_t c = 0; c < j->S; c++) rf[c] = mu[c * mcs] ? -INFINITY : rf[c];
    } else if (j->dt == TG_F64) {
        for (int64_t c = 0; c < j->S; c++) ((double *)row)[c] += ((const double *)m)[c * mcs];
    } else {
        for (int64_t c = 0; c < j->S; c++) ((float *)row)[c] += ((const float *)m)[c * mcs];
    }
}

/* softmax of one row of S scores in place, in double (e: S doubles of
 * scratch), rounded once to the dtype, as src/ops/softmax.c: f64 rows with
 * libm's exp and one running sum, f32 rows by src/ops/softmax_rows.c. */
static void softmax_row(const fast_job *j, void *row, double *e)
{
    const int64_t S = j->S;
    if (j->dt == TG_F64) {
        double *x = row, m = -INFINITY;   /* stays -inf for a row of -inf: x - m is NaN */
        for (int64_t c = 0; c < S; c++)
            if (x[c] > m) m = x[c];
        double s = 0.0;   /* libm's exp, summed in order: the taped path's bits */
        for (int64_t c = 0; c < S; c++) {
            e[c] = exp(x[c] - m);
            s += e[c];
        }
        for (int64_t c = 0; c < S; c++) x[c] = e[c] / s;
    } else {
        tg__softmax_row_f32(row, row, S, false, e, j->exp);
    }
}

/* qs (n, E) = rows [r0, r0 + n) of matrix b of q divided by sqrt(E), as
 * tg_div_scalar rounds it. */
static void scaled_q(const fast_job *j, void *qs, int64_t b, int64_t r0, int64_t n)
{
    const int64_t es = (int64_t)tg_dtype_size(j->dt), E = j->E;
    const char *base = j->q.base + (lead_off(j, j->q.ls, b) + r0 * j->q.rs) * es;
    for (int64_t i = 0; i < n; i++) {
        const char *src = base + i * j->q.rs * es;
        if (j->dt == TG_F64)
            for (int64_t c = 0; c < E; c++)
                ((double *)qs)[i * E + c] = ((const double *)src)[c] / j->scale;
        else
            for (int64_t c = 0; c < E; c++)
                ((float *)qs)[i * E + c] = (float)((double)((const float *)src)[c] / j->scale);
    }
}

/* Block u: rows [r0, r0 + n) of matrix b. */
static void run_block(const fast_job *j, int64_t u, void *qs, void *sc, double *e)
{
    const int64_t b = u / j->nqb, r0 = u % j->nqb * j->rows;
    const int64_t n = r0 + j->rows <= j->L ? j->rows : j->L - r0;
    const int64_t es = (int64_t)tg_dtype_size(j->dt), S = j->S;
    const tg_bf16_kernel plain = TG_BF16_KERNEL_AUTO;
    scaled_q(j, qs, b, r0, n);
    const char *kb = j->k.base + lead_off(j, j->k.ls, b) * es;
    tg__gemm_par(j->dt, plain, false, true, n, S, j->E, qs, j->E, kb, j->k.rs, 0.0, sc, S);
    for (int64_t i = 0; i < n; i++) {
        char *row = (char *)sc + i * S * es;
        if (j->mbase) mask_row(j, row, b, r0 + i);
        softmax_row(j, row, e);
    }
    const char *vb = j->v.base + lead_off(j, j->v.ls, b) * es;
    char *ob = j->out + (lead_off(j, j->ols, b) + r0 * j->ors) * es;
    tg__gemm_par(j->dt, plain, false, false, n, j->Ev, S, sc, S, vb, j->v.rs, 0.0, ob, j->ors);
}

/* ---- f16 and bf16: f32 buffers holding the dtype's values ---- */

/* A task's scratch for half dtypes: k and v of matrix kb (vb) widened to
 * f32 when their GEMM does not read the bits (-1: none yet), the block's
 * output in f32, and a row of halves. */
typedef struct half_scratch {
    float *kf, *vf, *of;
    uint16_t *h;
    int64_t kb, vb;
} half_scratch;

/* row (n f32 values) rounded to the dtype, as a half op's f32 result is
 * (h: n halves of scratch). */
static void round_row(tg_dtype dt, float *row, uint16_t *h, int64_t n)
{
    tg__f32_to_half_rows(dt, row, n, h, n, 1, n);
    tg__half_to_f32_rows(dt, h, n, row, n, 1, n);
}

/* Matrix b of operand o (r rows of c halves) widened into f (r, c). */
static void widen(const fast_job *j, const operand *o, int64_t b, int64_t r, int64_t c,
                  float *f)
{
    const uint16_t *src = (const uint16_t *)o->base + lead_off(j, o->ls, b);
    tg__half_to_f32_rows(j->dt, src, o->rs, f, c, r, c);
}

/* The n weights e narrowed to f32 with round-to-odd into row (truncated,
 * the last bit set when inexact): tg__f64_to_half_n's first step, which a
 * rounding to the dtype then completes with its bits (the double rounded
 * once).  Branch-free, where that one steps back from a rounding away from
 * zero by a branch the data decides, so the loop vectorizes; a clone for
 * AVX-512 (TG__SIMD_AVX512 of src/ops/exp_simd.h).  The weights are NaN or
 * in [0, 1], so no f32 overflows. */
static inline __attribute__((always_inline)) void narrow_odd(const double *e, float *row,
                                                             int64_t n)
{
    for (int64_t c = 0; c < n; c++) {
        const double v = e[c];
        const float f = (float)v;
        uint32_t x;
        memcpy(&x, &f, sizeof x);
        x -= (uint32_t)(fabs((double)f) > fabs(v));
        x |= (uint32_t)((double)f != v && v == v);
        memcpy(&row[c], &x, sizeof x);
    }
}
static void narrow_odd_plain(const double *e, float *row, int64_t n) { narrow_odd(e, row, n); }
TG__SIMD_AVX512 static void narrow_odd_avx512(const double *e, float *row, int64_t n)
{
    narrow_odd(e, row, n);
}

/* The n weights e rounded once to the dtype, into row as f32 values; inside
 * autocast rounded to f32 and that to the dtype, as the taped path there. */
static void weights_to_half(const fast_job *j, const double *e, float *row, uint16_t *h,
                            int64_t n)
{
    if (j->amp)
        for (int64_t c = 0; c < n; c++) row[c] = (float)e[c];
    else if (j->exp == TG__EXP_AVX512)
        narrow_odd_avx512(e, row, n);
    else
        narrow_odd_plain(e, row, n);
    round_row(j->dt, row, h, n);
}

/* Row `row` (query l of matrix b) as the taped half path has it: the
 * product's f32 sum rounded to the dtype; -inf where a u8 mask is set, or
 * the mask added in f32 and rounded (an f32 mask: not rounded, the sum
 * tg_add gives of a half and an f32); softmax in double rounded once to the
 * dtype.  The softmax is the f32 rows' (src/ops/softmax_rows.c: the
 * vectorized exp, within a few 1e-16 of the libm exp of the taped half
 * softmax, eight partial sums where that one keeps one, times 1 / sum):
 * within a few 1e-16 relative of the taped weights before their rounding,
 * which it moves only when a weight lies that close to a rounding
 * boundary. */
static void half_row(const fast_job *j, float *row, int64_t b, int64_t l, double *e,
                     uint16_t *h)
{
    const int64_t S = j->S, mcs = j->mcs;
    round_row(j->dt, row, h, S);
    if (j->mbase && j->mu8) {
        const uint8_t *mu = (const uint8_t *)j->mbase + lead_off(j, j->mls, b) + l * j->mrs;
        for (int64_t c = 0; c < S; c++)
            if (mu[c * mcs]) row[c] = -INFINITY;
    } else if (j->mbase && j->mf32) {   /* the half scores plus f32: an f32 sum */
        const float *mf = (const float *)j->mbase + lead_off(j, j->mls, b) + l * j->mrs;
        for (int64_t c = 0; c < S; c++) row[c] += mf[c * mcs];
    } else if (j->mbase) {
        const uint16_t *mh = (const uint16_t *)j->mbase + lead_off(j, j->mls, b) + l * j->mrs;
        for (int64_t c = 0; c < S; c++)
            row[c] += j->dt == TG_F16 ? tg_f16_to_f32(mh[c * mcs]) : tg_bf16_to_f32(mh[c * mcs]);
        round_row(j->dt, row, h, S);
    }
    tg__softmax_row_f32_to_f64(row, S, e, j->exp);
    weights_to_half(j, e, row, h, S);
}

/* Block u of a half dtype: q's rows divided by sqrt(E) (in double, to f32,
 * to the dtype: tg_div_scalar's roundings), the two GEMMs on f32 buffers
 * of the dtype's values (bf16 on the kernel where it pays, else sgemm),
 * the output's f32 sums rounded into its rows. */
static void run_block_half(const fast_job *j, int64_t u, float *qs, float *sc, double *e,
                           half_scratch *hs)
{
    const int64_t b = u / j->nqb, r0 = u % j->nqb * j->rows;
    const int64_t n = r0 + j->rows <= j->L ? j->rows : j->L - r0;
    const int64_t S = j->S, E = j->E, Ev = j->Ev;
    const int64_t qoff = lead_off(j, j->q.ls, b) + r0 * j->q.rs;
    if (j->q_f32)   /* f32 q: divided in f32 (tg_div_scalar's), then cast */
        for (int64_t i = 0; i < n; i++)
            memcpy(qs + i * E, (const float *)j->q.base + qoff + i * j->q.rs,
                   (size_t)E * sizeof *qs);
    else
        tg__half_to_f32_rows(j->dt, (const uint16_t *)j->q.base + qoff, j->q.rs, qs, E, n, E);
    for (int64_t i = 0; i < n * E; i++) qs[i] = (float)((double)qs[i] / j->scale);
    for (int64_t i = 0; i < n; i++) round_row(j->dt, qs + i * E, hs->h, E);
    const void *kp = (const uint16_t *)j->k.base + lead_off(j, j->k.ls, b);
    if (!j->bits_k) {
        if (hs->kb != b) widen(j, &j->k, b, S, E, hs->kf);
        hs->kb = b;
        kp = hs->kf;
    }
    tg__gemm_par_bits(j->kern_qk, false, true, n, S, E, qs, false, E, kp, j->bits_k,
                      j->bits_k ? j->k.rs : E, 0.0f, sc, S, NULL, NULL);
    for (int64_t i = 0; i < n; i++) half_row(j, sc + i * S, b, r0 + i, e, hs->h);
    const void *vp = (const uint16_t *)j->v.base + lead_off(j, j->v.ls, b);
    if (!j->bits_v) {
        if (hs->vb != b) widen(j, &j->v, b, S, Ev, hs->vf);
        hs->vb = b;
        vp = hs->vf;
    }
    tg__gemm_par_bits(j->kern_pv, false, false, n, Ev, S, sc, false, S, vp, j->bits_v,
                      j->bits_v ? j->v.rs : Ev, 0.0f, hs->of, Ev, NULL, NULL);
    uint16_t *ob = (uint16_t *)j->out + lead_off(j, j->ols, b) + r0 * j->ors;
    tg__f32_to_half_rows(j->dt, hs->of, Ev, ob, j->ors, n, Ev);
}

static int fast_task(void *p, int64_t t)
{
    const fast_job *j = p;
    const bool half = tg__dtype_is_half(j->dt);
    const size_t es = half ? sizeof(float) : tg_dtype_size(j->dt);
    const int64_t hn = j->S > j->E ? j->S : j->E;
    void *qs = tg__work_alloc((size_t)(j->rows * j->E) * es);
    void *sc = tg__work_alloc((size_t)(j->rows * j->S) * es);
    double *e = tg__work_alloc((size_t)(j->S + TG__EXP_PAD) * sizeof *e);
    half_scratch hs = {.kb = -1, .vb = -1};
    if (half) {
        hs.h = tg__work_alloc((size_t)hn * sizeof *hs.h);
        hs.of = tg__work_alloc((size_t)(j->rows * j->Ev) * sizeof *hs.of);
        if (!j->bits_k) hs.kf = tg__work_alloc((size_t)(j->S * j->E) * sizeof *hs.kf);
        if (!j->bits_v) hs.vf = tg__work_alloc((size_t)(j->S * j->Ev) * sizeof *hs.vf);
    }
    int rc = TG_OK;
    if (!qs || !sc || !e ||
        (half && (!hs.h || !hs.of || (!j->bits_k && !hs.kf) || (!j->bits_v && !hs.vf)))) {
        rc = tg__error(TG_ENOMEM, "scaled_dot_product_attention: out of memory for a block of "
                       "%lld x %lld scores", (long long)j->rows, (long long)j->S);
    } else {
        const int64_t end = (t + 1) * j->per < j->units ? (t + 1) * j->per : j->units;
        for (int64_t u = t * j->per; u < end; u++)
            if (half)
                run_block_half(j, u, qs, sc, e, &hs);
            else
                run_block(j, u, qs, sc, e);
    }
    tg__work_free(qs);
    tg__work_free(sc);
    tg__work_free(e);
    tg__work_free(hs.h);
    tg__work_free(hs.of);
    tg__work_free(hs.kf);
    tg__work_free(hs.vf);
    return rc;
}

/* The block rows: up to BLOCK_ROWS, at most BLOCK_SCORES scores, and small
 * enough for two blocks per thread when the matrices are few. */
static int64_t block_rows(int64_t nb, int64_t L, int64_t S)
{
    int64_t rows = BLOCK_ROWS;
    if (rows * S > BLOCK_SCORES) rows = S >= BLOCK_SCORES ? 1 : BLOCK_SCORES / S;
    const int64_t want = (2 * (int64_t)tg_get_num_threads() + nb - 1) / nb;   /* per matrix */
    if (want > 1 && (L + want - 1) / want < rows) rows = (L + want - 1) / want;
    if (rows > L) rows = L;
    return rows;
}

/* Whether the matrices of o (..., L, Ev) can take a GEMM's rows as they
 * are: unit-stride columns, row stride >= Ev within int. */
static bool out_fits(const tg_tensor *o)
{
    const int nd = o->ndim;
    const int64_t r = o->shape[nd - 2], c = o->shape[nd - 1], rs = o->strides[nd - 2];
    return (c == 1 || o->strides[nd - 1] == 1) && (r == 1 || (rs >= c && rs <= INT32_MAX));
}

int tg__attention_fast_into(tg_tensor *y, tg_tensor *q, tg_tensor *k, tg_tensor *v,
                            tg_tensor *mask)
{
    const int nd = q->ndim;
    TG_ASSERT(y->ndim == nd && y->dtype == k->dtype && v->dtype == k->dtype && out_fits(y));
    TG_ASSERT(q->dtype == k->dtype || (q->dtype == TG_F32 && tg__dtype_is_half(k->dtype)));
    fast_job j = {.dt = k->dtype, .q_f32 = q->dtype != k->dtype, .exp = tg__exp_width_get(),
                  .lead1 = nd > 3 ? q->shape[1] : 1, .L = q->shape[nd - 2],
                  .S = k->shape[nd - 2], .E = q->shape[nd - 1], .Ev = v->shape[nd - 1]};
    /* as tg_div_scalar takes it for q */
    j.scale = tg__scalar_in_dtype(q->dtype, sqrt((double)j.E));
    j.amp = tg_autocast_active(NULL);
    if (j.dt == TG_BF16) {   /* the kernels the taped path's two products take */
        const tg_bf16_kernel kern = tg_bf16_kernel_get();
        j.kern_qk = tg__bf16_gemm_pays(j.L, j.S, j.E) ? kern : TG_BF16_KERNEL_AUTO;
        j.kern_pv = tg__bf16_gemm_pays(j.L, j.Ev, j.S) ? kern : TG_BF16_KERNEL_AUTO;
        j.bits_k = j.kern_qk > TG_BF16_KERNEL_PORTABLE;
        j.bits_v = j.kern_pv > TG_BF16_KERNEL_PORTABLE;
    }
    const int64_t nb = tg__numel(nd - 2, q->shape);
    j.rows = block_rows(nb, j.L, j.S);
    j.nqb = (j.L + j.rows - 1) / j.rows;
    j.units = nb * j.nqb;
    /* a few tasks per thread, each taking its scratch once */
    const int64_t tasks_max = 8 * (int64_t)tg_get_num_threads();
    j.per = (j.units + tasks_max - 1) / tasks_max;
    tg_tensor *keep[3] = {NULL, NULL, NULL};
    int rc;
    TG_TRY_GOTO(operand_of(&keep[0], q, &j.q));
    TG_TRY_GOTO(operand_of(&keep[1], k, &j.k));
    TG_TRY_GOTO(operand_of(&keep[2], v, &j.v));
    if (mask) mask_of(&j, mask, nd);
    j.out = (char *)y->storage->data + y->offset * (int64_t)tg_dtype_size(j.dt);
    j.ols[0] = nd > 2 ? y->strides[0] : 0;
    j.ols[1] = nd > 3 ? y->strides[1] : 0;
    j.ors = j.L == 1 ? j.Ev : y->strides[nd - 2];
    const double work = (double)nb * (double)j.L * (double)j.S * (double)(j.E + j.Ev);
    const int saved = tg__blas_single_begin();
    rc = tg__run_tasks((j.units + j.per - 1) / j.per, work >= 65536.0, fast_task, &j);
    tg__blas_restore(saved);
    if (rc >= 0) fast_calls++;
done:
    for (int i = 0; i < 3; i++) tg_tensor_release(keep[i]);
    return rc;
}

int tg__attention_fast(tg_tensor **out, tg_tensor *q, tg_tensor *k, tg_tensor *v,
                       tg_tensor *mask)
{
    int64_t shape[TG_MAX_DIMS];
    memcpy(shape, q->shape, sizeof(int64_t) * (size_t)q->ndim);
    shape[q->ndim - 1] = v->shape[v->ndim - 1];
    tg_tensor *y = tg__tensor_uninit(k->dtype, q->ndim, shape);
    if (!y) return TG_ENOMEM;
    const int rc = tg__attention_fast_into(y, q, k, v, mask);
    if (rc < 0) {
        tg_tensor_release(y);
        return rc;
    }
    *out = y;
    return TG_OK;
}

int tg__attention_fast_cast(tg_tensor **out, tg_tensor *q, tg_tensor *k, tg_tensor *v,
                            tg_tensor *mask, tg_dtype dt)
{
    tg_tensor *kc = NULL, *vc = NULL;
    int rc = tg_to_dtype(&kc, k, dt);
    if (rc >= 0) rc = v == k ? ((vc = tg_tensor_retain(kc)), TG_OK) : tg_to_dtype(&vc, v, dt);
    if (rc >= 0) rc = tg__attention_fast(out, q, kc, vc, mask);
    tg_tensor_release(kc);
    tg_tensor_release(vc);
    return rc;
}
