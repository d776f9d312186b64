/* src/nn/optim_update.c - the per-parameter update rules of SGD, Adam,
 * AdamW and RMSprop, written as PyTorch 1.13's _single_tensor_* functions do them: the
 * same operations in the same order, in the state's dtype T, with scalar
 * factors converted to T as torch's kernels convert their Scalar arguments.
 * Each element's update is independent, so large parameters are updated in
 * parallel with the same bits.
 */
#include <math.h>
#include <stdatomic.h>

#include "core/half_simd.h"
#include "optim_internal.h"

/* process-wide, as the workers of an update must see it too */
static atomic_bool simd_off;

void tg__optim_set_simd(bool on) { atomic_store(&simd_off, !on); }

/* d = g (or -g, maximize);  d = d + wd * p;
 * buf = d (first) or mom * buf + (1 - damp) * d;
 * d = d + mom * buf (nesterov) or buf;  p = p - lr * d. */
#define SGD_LOOP(T)                                                           \
    {                                                                         \
        T *pp = q->p, *b = st->buf[0] ? tg_tensor_data(st->buf[0]) : NULL;    \
        const T *gg = q->g;                                                   \
        const T wd = (T)s->weight_decay, mom = (T)s->momentum;                \
        const T keep = (T)(1.0 - s->dampening), alpha = (T)(-s->lr);          \
        for (int64_t i = lo; i < hi; i++) {                                   \
            T d = s->maximize ? -gg[i] : gg[i];                               \
            if (s->weight_decay != 0) d = d + wd * pp[i];                     \
            if (s->momentum != 0) {                                           \
                b[i] = first ? d : b[i] * mom + keep * d;                     \
                d = s->nesterov ? d + mom * b[i] : b[i];                      \
            }                                                                 \
            pp[i] = pp[i] + alpha * d;                                        \
        }                                                                     \
    }

static void sgd_range(void *job, int64_t lo, int64_t hi)
{
    const tg__opt_job *q = job;
    const tg__opt_hparams *s = q->h;
    const tg__opt_state *st = q->st;
    const bool first = q->first;
    if (q->cdt == TG_F64) SGD_LOOP(double)
    else SGD_LOOP(float)
}

void tg__sgd_update(const tg__opt_hparams *h, tg_dtype cdt, void *p, const void *g,
                    tg__opt_state *st, bool first, int64_t n)
{
    TG_ASSERT(h->momentum == 0 || st->buf[0] != NULL);
    tg__opt_job q = {.h = h, .cdt = cdt, .p = p, .g = g, .st = st, .first = first};
    tg__parallel_range(n, n > 32768, sgd_range, &q);
}

/* g = -g when maximizing.  Adam: g = g + wd * p.  AdamW: p = p * (1 - lr * wd).
 * Then m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g * g;
 * with amsgrad vmax = maximum(vmax, v) (torch.maximum: NaN when either is
 * NaN) replaces v in denom = sqrt(v) / sqrt(bc2) + eps;
 * p = p + (-lr / bc1) * m / denom (left to right, as torch's
 * addcmul/addcdiv kernels evaluate), with the bias corrections
 * bc_k = 1 - b_k^t computed in double. */
#define ADAM_LOOP(T)                                                          \
    {                                                                         \
        T *pp = q->p, *m = tg_tensor_data(st->buf[0]), *v = tg_tensor_data(st->buf[1]); \
        T *vmax = a->amsgrad ? tg_tensor_data(st->buf[2]) : NULL;             \
        const T *gg = q->g;                                                   \
        const T wd = (T)a->weight_decay, decay = (T)(1.0 - a->lr * a->weight_decay); \
        const T b1 = (T)a->beta1, b2 = (T)a->beta2;                           \
        const T c1 = (T)(1.0 - a->beta1), c2 = (T)(1.0 - a->beta2);           \
        const T bc2s = (T)q->b, eps = (T)a->eps, neg_step = (T)(-q->a);       \
        for (int64_t i = lo; i < hi; i++) {                                   \
            T gi = a->maximize ? -gg[i] : gg[i];                              \
            if (q->decoupled) pp[i] = pp[i] * decay;                          \
            else if (a->weight_decay != 0) gi = gi + wd * pp[i];              \
            m[i] = m[i] * b1 + c1 * gi;                                       \
            T vi = v[i] = v[i] * b2 + c2 * gi * gi;                           \
            if (vmax) {                                                       \
                if (vmax[i] > vi || isnan(vmax[i])) vi = vmax[i];             \
                vmax[i] = vi;                                                 \
            }                                                                 \
            T denom = (T)sqrt(vi) / bc2s + eps;                               \
            pp[i] = pp[i] + neg_step * m[i] / denom;                          \
        }                                                                     \
    }

#ifdef TG__HAVE_X86_SIMD
/* ADAM_LOOP(float) eight elements at a time from lo, without maximize and
 * amsgrad: the same f32 operations in the same order (sqrt and division
 * are correctly rounded in both), so the same bits.  Returns where the
 * scalar loop goes on. */
TG__AVX2 static int64_t adam_f32_avx2(const tg__opt_job *q, int64_t lo, int64_t hi)
{
    const tg__opt_hparams *a = q->h;
    const tg__opt_state *st = q->st;
    float *pp = q->p, *m = tg_tensor_data(st->buf[0]), *v = tg_tensor_data(st->buf[1]);
    const float *gg = q->g;
    const __m256 wd = _mm256_set1_ps((float)a->weight_decay),
                 decay = _mm256_set1_ps((float)(1.0 - a->lr * a->weight_decay));
    const __m256 b1 = _mm256_set1_ps((float)a->beta1), b2 = _mm256_set1_ps((float)a->beta2);
    const __m256 c1 = _mm256_set1_ps((float)(1.0 - a->beta1)),
                 c2 = _mm256_set1_ps((float)(1.0 - a->beta2));
    const __m256 bc2s = _mm256_set1_ps((float)q->b), eps = _mm256_set1_ps((float)a->eps),
                 neg_step = _mm256_set1_ps((float)(-q->a));
    const bool coupled = !q->decoupled && a->weight_decay != 0;
    int64_t i = lo;
    for (; i + 8 <= hi; i += 8) {
        __m256 g = _mm256_loadu_ps(gg + i), p = _mm256_loadu_ps(pp + i);
        if (q->decoupled) p = _mm256_mul_ps(p, decay);
        else if (coupled) g = _mm256_add_ps(g, _mm256_mul_ps(wd, p));
        const __m256 mi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(m + i), b1),
                                        _mm256_mul_ps(c1, g));
        const __m256 vi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + i), b2),
                                        _mm256_mul_ps(_mm256_mul_ps(c2, g), g));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), bc2s), eps);
        p = _mm256_add_ps(p, _mm256_div_ps(_mm256_mul_ps(neg_step, mi), denom));
        _mm256_storeu_ps(pp + i, p);
    }
    return i;
}
#endif

static void adam_range(void *job, int64_t lo, int64_t hi)
{
    const tg__opt_job *q = job;
    const tg__opt_hparams *a = q->h;
    const tg__opt_state *st = q->st;
#ifdef TG__HAVE_X86_SIMD
    if (q->cdt == TG_F32 && !a->maximize && !a->amsgrad && !atomic_load(&simd_off) &&
        tg__cpu_has_half_simd())
        lo = adam_f32_avx2(q, lo, hi);
#endif
    if (q->cdt == TG_F64) ADAM_LOOP(double)
    else ADAM_LOOP(float)
}

void tg__adam_update(const tg__opt_hparams *a, bool decoupled, tg_dtype cdt, void *p,
                     const void *g, tg__opt_state *st, int64_t n)
{
    TG_ASSERT(st->buf[0] != NULL && st->buf[1] != NULL && (!a->amsgrad || st->buf[2] != NULL));
    st->step++;
    double t = (double)st->step;
    double bc1 = 1.0 - pow(a->beta1, t), bc2 = 1.0 - pow(a->beta2, t);
    tg__opt_job q = {.h = a, .cdt = cdt, .p = p, .g = g, .st = st,
                    .decoupled = decoupled, .a = a->lr / bc1, .b = sqrt(bc2)};
    tg__parallel_range(n, n > 32768, adam_range, &q);
}

/* g = -g when maximizing;  g = g + wd * p;  v = v * alpha + (1 - alpha) * g * g;
 * centered: a = a * alpha + (1 - alpha) * g and d = sqrt(v + (-1) * a * a)
 * (torch's addcmul with value -1), else d = sqrt(v);  d = d + eps;
 * momentum > 0: buf = buf * mom + g / d and p = p + (-lr) * buf, else
 * p = p + (-lr) * g / d (addcdiv: the scalar times g, then divided). */
#define RMSPROP_LOOP(T)                                                       \
    {                                                                         \
        T *pp = q->p, *v = tg_tensor_data(st->buf[0]);                        \
        T *b = r->momentum > 0 ? tg_tensor_data(st->buf[1]) : NULL;          \
        T *a = r->centered ? tg_tensor_data(st->buf[2]) : NULL;               \
        const T *gg = q->g;                                                   \
        const T wd = (T)r->weight_decay, al = (T)r->alpha, c = (T)(1.0 - r->alpha); \
        const T mom = (T)r->momentum, eps = (T)r->eps, neg_lr = (T)(-r->lr), m1 = (T)-1; \
        for (int64_t i = lo; i < hi; i++) {                                   \
            T gi = r->maximize ? -gg[i] : gg[i];                              \
            if (r->weight_decay != 0) gi = gi + wd * pp[i];                   \
            v[i] = v[i] * al + c * gi * gi;                                   \
            T d;                                                              \
            if (a) {                                                          \
                a[i] = a[i] * al + c * gi;                                    \
                d = (T)sqrt(v[i] + m1 * a[i] * a[i]);                         \
            } else {                                                          \
                d = (T)sqrt(v[i]);                                            \
            }                                                                 \
            d = d + eps;                                                      \
            if (b) {                                                          \
                b[i] = b[i] * mom + gi / d;                                   \
                pp[i] = pp[i] + neg_lr * b[i];                                \
            } else {                                                          \
                pp[i] = pp[i] + neg_lr * gi / d;                              \
            }                                                                 \
        }                                                                     \
    }

static void rmsprop_range(void *job, int64_t lo, int64_t hi)
{
    const tg__opt_job *q = job;
    const tg__opt_hparams *r = q->h;
    const tg__opt_state *st = q->st;
    if (q->cdt == TG_F64) RMSPROP_LOOP(double)
    else RMSPROP_LOOP(float)
}

void tg__rmsprop_update(const tg__opt_hparams *r, tg_dtype cdt, void *p, const void *g,
                        tg__opt_state *st, int64_t n)
{
    TG_ASSERT(st->buf[0] != NULL && (r->momentum <= 0 || st->buf[1] != NULL) &&
              (!r->centered || st->buf[2] != NULL));
    st->step++;
    tg__opt_job q = {.h = r, .cdt = cdt, .p = p, .g = g, .st = st};
    tg__parallel_range(n, n > 32768, rmsprop_range, &q);
}
