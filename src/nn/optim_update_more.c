/* src/nn/optim_update_more.c - the per-parameter update rules of Adagrad,
 * Adamax, NAdam, RAdam, Adadelta and Rprop, as PyTorch 1.13's _single_tensor_* functions do
 * them: the same operations in the same order, in the state's dtype T,
 * scalar factors computed in double as Python computes them and converted
 * to T as torch's kernels convert their Scalar arguments.  torch's kernels
 * evaluate addcmul as self + value * t1 * t2 and addcdiv as
 * self + value * t1 / t2, left to right.  Each element's update is
 * independent, so large parameters are updated in parallel with the same
 * bits (optim_update.c has SGD, Adam, AdamW and RMSprop).
 */
#include <math.h>

#include "optim_internal.h"

static void run(tg__opt_job *q, int64_t n, void (*fn)(void *, int64_t, int64_t))
{
    tg__parallel_range(n, n > 32768, fn, q);
}

/* Adagrad, a = -clr:  g = -g (maximize);  g = g + wd * p;  sum = sum + 1 * g * g;
 * std = sqrt(sum) + eps;  p = p + a * g / std. */
#define ADAGRAD_LOOP(T)                                                       \
    {                                                                         \
        T *pp = q->p, *sum = tg_tensor_data(q->st->buf[0]);                   \
        const T *gg = q->g;                                                   \
        const T wd = (T)h->weight_decay, eps = (T)h->eps, a = (T)q->a, one = 1; \
        for (int64_t i = lo; i < hi; i++) {                                   \
            T gi = h->maximize ? -gg[i] : gg[i];                              \
            if (h->weight_decay != 0) gi = gi + wd * pp[i];                   \
            sum[i] = sum[i] + one * gi * gi;                                  \
            const T std = (T)sqrt(sum[i]) + eps;                              \
            pp[i] = pp[i] + a * gi / std;                                     \
        }                                                                     \
    }

static void adagrad_range(void *job, int64_t lo, int64_t hi)
{
    const tg__opt_job *q = job;
    const tg__opt_hparams *h = q->h;
    if (q->cdt == TG_F64) ADAGRAD_LOOP(double)
    else ADAGRAD_LOOP(float)
}

void tg__adagrad_update(const tg__opt_hparams *h, tg_dtype cdt, void *p, const void *g,
                        tg__opt_state *st, int64_t n)
{
    TG_ASSERT(st->buf[0] != NULL);
    st->step++;
    const double clr = h->lr / (1 + ((double)st->step - 1) * h->lr_decay);
    tg__opt_job q = {.h = h, .cdt = cdt, .p = p, .g = g, .st = st, .a = -clr};
    run(&q, n, adagrad_range);
}

/* Adamax, a = -lr / (1 - b1^t):  g = -g (maximize);  g = g + wd * p;
 * m = m * b1 + (1 - b1) * g;  u = amax(u * b2, |g| + eps) (NaN when either
 * is, as torch.amax);  p = p + a * m / u. */
#define ADAMAX_LOOP(T)                                                        \
    {                                                                         \
        T *pp = q->p, *m = tg_tensor_data(q->st->buf[0]), *u = tg_tensor_data(q->st->buf[1]); \
        const T *gg = q->g;                                                   \
        const T wd = (T)h->weight_decay, eps = (T)h->eps, a = (T)q->a;        \
        const T b1 = (T)h->beta1, c1 = (T)(1.0 - h->beta1), b2 = (T)h->beta2;  \
        for (int64_t i = lo; i < hi; i++) {                                   \
            T gi = h->maximize ? -gg[i] : gg[i];                              \
            if (h->weight_decay != 0) gi = gi + wd * pp[i];                   \
            m[i] = m[i] * b1 + c1 * gi;                                       \
            const T x = u[i] * b2, y = (T)fabs(gi) + eps;                     \
            u[i] = isnan(x) || isnan(y) ? x + y : x > y ? x : y;              \
            pp[i] = pp[i] + a * m[i] / u[i];                                  \
        }                                                                     \
    }

static void adamax_range(void *job, int64_t lo, int64_t hi)
{
    const tg__opt_job *q = job;
    const tg__opt_hparams *h = q->h;
    if (q->cdt == TG_F64) ADAMAX_LOOP(double)
    else ADAMAX_LOOP(float)
}

void tg__adamax_update(const tg__opt_hparams *h, tg_dtype cdt, void *p, const void *g,
                       tg__opt_state *st, int64_t n)
{
    TG_ASSERT(st->buf[0] != NULL && st->buf[1] != NULL);
    st->step++;
    const double clr = h->lr / (1 - pow(h->beta1, (double)st->step));
    tg__opt_job q = {.h = h, .cdt = cdt, .p = p, .g = g, .st = st, .a = -clr};
    run(&q, n, adamax_range);
}

/* NAdam, a = -lr (1 - mu) / (1 - P), b = -lr mu_next / (1 - P_next),
 * c = 1 - b2^t:  g = g + wd * p;  m = m * b1 + (1 - b1) * g;
 * v = v * b2 + (1 - b2) * g * g;  d = sqrt(v / c) + eps;
 * p = p + a * g / d;  p = p + b * m / d. */
#define NADAM_LOOP(T)                                                         \
    {                                                                         \
        T *pp = q->p, *m = tg_tensor_data(q->st->buf[0]), *v = tg_tensor_data(q->st->buf[1]); \
        const T *gg = q->g;                                                   \
        const T wd = (T)h->weight_decay, eps = (T)h->eps;                     \
        const T b1 = (T)h->beta1, c1 = (T)(1.0 - h->beta1);                   \
        const T b2 = (T)h->beta2, c2 = (T)(1.0 - h->beta2);                   \
        const T a = (T)q->a, b = (T)q->b, bc2 = (T)q->c;                      \
        for (int64_t i = lo; i < hi; i++) {                                   \
            T gi = gg[i];                                                     \
            if (h->weight_decay != 0) gi = gi + wd * pp[i];                   \
            m[i] = m[i] * b1 + c1 * gi;                                       \
            v[i] = v[i] * b2 + c2 * gi * gi;                                  \
            const T d = (T)sqrt(v[i] / bc2) + eps;                            \
            pp[i] = pp[i] + a * gi / d;                                       \
            pp[i] = pp[i] + b * m[i] / d;                                     \
        }                                                                     \
    }

static void nadam_range(void *job, int64_t lo, int64_t hi)
{
    const tg__opt_job *q = job;
    const tg__opt_hparams *h = q->h;
    if (q->cdt == TG_F64) NADAM_LOOP(double)
    else NADAM_LOOP(float)
}

/* The momentum cache of step t: b1 (1 - 0.96^(t momentum_decay) / 2). */
static double nadam_mu(const tg__opt_hparams *h, double t)
{
    return h->beta1 * (1. - 0.5 * pow(0.96, t * h->momentum_decay));
}

void tg__nadam_update(const tg__opt_hparams *h, tg_dtype cdt, void *p, const void *g,
                      tg__opt_state *st, int64_t n)
{
    TG_ASSERT(st->buf[0] != NULL && st->buf[1] != NULL);
    st->step++;
    const double t = (double)st->step;
    const double mu = nadam_mu(h, t), mu_next = nadam_mu(h, t + 1);
    /* torch's mu_product is an f32 tensor: each product rounded to f32,
     * the Python factor converted to f32 first.  torch 1.13 takes
     * mu_product * mu * mu_next for the next product, mu counted twice
     * (the paper's is mu_product * mu_next); so does this, as the oracle. */
    const float prod = (float)st->mu_product * (float)mu;
    const float prod_next = prod * (float)mu * (float)mu_next;
    st->mu_product = prod;
    tg__opt_job q = {.h = h, .cdt = cdt, .p = p, .g = g, .st = st,
                  .a = -h->lr * (1. - mu) / (1. - (double)prod),
                  .b = -h->lr * mu_next / (1. - (double)prod_next),
                  .c = 1 - pow(h->beta2, t)};
    run(&q, n, nadam_range);
}

/* RAdam, a = 1 - b1^t, b = sqrt(1 - b2^t), c = the rectification r:
 * g = g + wd * p;  m = m * b1 + (1 - b1) * g;  v = v * b2 + (1 - b2) * g * g;
 * e = m / a;  rectified: w = (1 / (sqrt(v) + eps)) * b (torch's
 * float / tensor is reciprocal() * float) and p = p + -1 * (e * lr * w * c),
 * else p = p + -1 * (e * lr). */
#define RADAM_LOOP(T)                                                         \
    {                                                                         \
        T *pp = q->p, *m = tg_tensor_data(q->st->buf[0]), *v = tg_tensor_data(q->st->buf[1]); \
        const T *gg = q->g;                                                   \
        const T wd = (T)h->weight_decay, eps = (T)h->eps, lr = (T)h->lr, one = 1;  \
        const T b1 = (T)h->beta1, c1 = (T)(1.0 - h->beta1);                   \
        const T b2 = (T)h->beta2, c2 = (T)(1.0 - h->beta2);                   \
        const T bc1 = (T)q->a, bc2s = (T)q->b, rect = (T)q->c;                \
        for (int64_t i = lo; i < hi; i++) {                                   \
            T gi = gg[i];                                                     \
            if (h->weight_decay != 0) gi = gi + wd * pp[i];                   \
            m[i] = m[i] * b1 + c1 * gi;                                       \
            v[i] = v[i] * b2 + c2 * gi * gi;                                  \
            const T e = m[i] / bc1;                                           \
            if (q->flag) {                                                 \
                const T w = one / ((T)sqrt(v[i]) + eps) * bc2s;               \
                pp[i] = pp[i] - e * lr * w * rect;                            \
            } else {                                                          \
                pp[i] = pp[i] - e * lr;                                       \
            }                                                                 \
        }                                                                     \
    }

static void radam_range(void *job, int64_t lo, int64_t hi)
{
    const tg__opt_job *q = job;
    const tg__opt_hparams *h = q->h;
    if (q->cdt == TG_F64) RADAM_LOOP(double)
    else RADAM_LOOP(float)
}

void tg__radam_update(const tg__opt_hparams *h, tg_dtype cdt, void *p, const void *g,
                      tg__opt_state *st, int64_t n)
{
    TG_ASSERT(st->buf[0] != NULL && st->buf[1] != NULL);
    st->step++;
    const double t = (double)st->step;
    const double bc1 = 1 - pow(h->beta1, t), bc2 = 1 - pow(h->beta2, t);
    const double rho_inf = 2 / (1 - h->beta2) - 1;
    const double rho_t = rho_inf - 2 * t * pow(h->beta2, t) / bc2;
    tg__opt_job q = {.h = h, .cdt = cdt, .p = p, .g = g, .st = st, .a = bc1, .b = sqrt(bc2),
                  .flag = rho_t > 5.};
    if (q.flag)
        q.c = sqrt((rho_t - 4) * (rho_t - 2) * rho_inf /
                   ((rho_inf - 4) * (rho_inf - 2) * rho_t));
    run(&q, n, radam_range);
}

/* Adadelta, a = -lr:  g = -g (maximize);  g = g + wd * p;
 * v = v * rho + (1 - rho) * g * g;  std = sqrt(v + eps);
 * d = sqrt(u + eps) / std * g;  u = u * rho + (1 - rho) * d * d;  p = p + a * d. */
#define ADADELTA_LOOP(T)                                                      \
    {                                                                         \
        T *pp = q->p, *v = tg_tensor_data(q->st->buf[0]), *u = tg_tensor_data(q->st->buf[1]); \
        const T *gg = q->g;                                                   \
        const T wd = (T)h->weight_decay, eps = (T)h->eps, a = (T)q->a;        \
        const T rho = (T)h->rho, c = (T)(1.0 - h->rho);                       \
        for (int64_t i = lo; i < hi; i++) {                                   \
            T gi = h->maximize ? -gg[i] : gg[i];                              \
            if (h->weight_decay != 0) gi = gi + wd * pp[i];                   \
            v[i] = v[i] * rho + c * gi * gi;                                  \
            const T std = (T)sqrt(v[i] + eps);                                \
            const T d = (T)sqrt(u[i] + eps) / std * gi;                       \
            u[i] = u[i] * rho + c * d * d;                                    \
            pp[i] = pp[i] + a * d;                                            \
        }                                                                     \
    }

static void adadelta_range(void *job, int64_t lo, int64_t hi)
{
    const tg__opt_job *q = job;
    const tg__opt_hparams *h = q->h;
    if (q->cdt == TG_F64) ADADELTA_LOOP(double)
    else ADADELTA_LOOP(float)
}

void tg__adadelta_update(const tg__opt_hparams *h, tg_dtype cdt, void *p, const void *g,
                         tg__opt_state *st, int64_t n)
{
    TG_ASSERT(st->buf[0] != NULL && st->buf[1] != NULL);
    st->step++;
    tg__opt_job q = {.h = h, .cdt = cdt, .p = p, .g = g, .st = st, .a = -h->lr};
    run(&q, n, adadelta_range);
}

/* Rprop:  g = -g (maximize);  s = g * prev;  f = eta_plus where s > 0,
 * eta_minus where s < 0, else 1 (torch's sign of NaN is 0);
 * step = clamp(step * f, min, max) (min(max(x, min), max): max where
 * min > max, NaN kept);  g = 0 where f is eta_minus;
 * p = p + -1 * sign(g) * step (sign(NaN) = 0);  prev = g. */
#define RPROP_LOOP(T)                                                         \
    {                                                                         \
        T *pp = q->p, *prev = tg_tensor_data(q->st->buf[0]);                  \
        T *step = tg_tensor_data(q->st->buf[1]);                              \
        const T *gg = q->g;                                                   \
        const T up = (T)h->eta_plus, down = (T)h->eta_minus, m1 = -1;        \
        const T lo_s = (T)h->step_size_min, hi_s = (T)h->step_size_max;       \
        for (int64_t i = lo; i < hi; i++) {                                   \
            T gi = h->maximize ? -gg[i] : gg[i];                              \
            const T s = gi * prev[i];                                         \
            const T f = s > 0 ? up : s < 0 ? down : (T)1;                     \
            T x = step[i] * f;                                                \
            if (!isnan(x)) x = x < lo_s ? lo_s : x;                           \
            if (!isnan(x)) x = x > hi_s ? hi_s : x;                           \
            step[i] = x;                                                      \
            if (f == down) gi = 0;                                            \
            const T sg = gi > 0 ? (T)1 : gi < 0 ? (T)-1 : (T)0;               \
            pp[i] = pp[i] + m1 * sg * step[i];                                \
            prev[i] = gi;                                                     \
        }                                                                     \
    }

static void rprop_range(void *job, int64_t lo, int64_t hi)
{
    const tg__opt_job *q = job;
    const tg__opt_hparams *h = q->h;
    if (q->cdt == TG_F64) RPROP_LOOP(double)
    else RPROP_LOOP(float)
}

void tg__rprop_update(const tg__opt_hparams *h, tg_dtype cdt, void *p, const void *g,
                      tg__opt_state *st, int64_t n)
{
    TG_ASSERT(st->buf[0] != NULL && st->buf[1] != NULL);
    st->step++;
    tg__opt_job q = {.h = h, .cdt = cdt, .p = p, .g = g, .st = st};
    run(&q, n, rprop_range);
}

/* ASGD, eta and mu the state's (f32 values):  g = -g (maximize);
 * g = g + wd * p;  p = p * (1 - lambd * eta);  p = p + (-eta) * g;
 * ax = ax + (p - ax) * mu, or ax = p while mu is 1. */
#define ASGD_LOOP(T)                                                          \
    {                                                                         \
        T *pp = q->p, *ax = tg_tensor_data(q->st->buf[0]);                    \
        const T *gg = q->g;                                                   \
        const T wd = (T)h->weight_decay, decay = (T)q->a, neg_eta = (T)q->b, mu = (T)q->c; \
        for (int64_t i = lo; i < hi; i++) {                                   \
            T gi = h->maximize ? -gg[i] : gg[i];                              \
            if (h->weight_decay != 0) gi = gi + wd * pp[i];                   \
            pp[i] = pp[i] * decay;                                            \
            pp[i] = pp[i] + neg_eta * gi;                                     \
            ax[i] = q->flag ? pp[i] : ax[i] + (pp[i] - ax[i]) * mu;        \
        }                                                                     \
    }

static void asgd_range(void *job, int64_t lo, int64_t hi)
{
    const tg__opt_job *q = job;
    const tg__opt_hparams *h = q->h;
    if (q->cdt == TG_F64) ASGD_LOOP(double)
    else ASGD_LOOP(float)
}

void tg__asgd_update(const tg__opt_hparams *h, tg_dtype cdt, void *p, const void *g,
                     tg__opt_state *st, int64_t n)
{
    TG_ASSERT(st->buf[0] != NULL);
    st->step++;
    const double t = (double)st->step;
    /* flag: ax copies p (torch's mu.item() == 1) */
    tg__opt_job q = {.h = h, .cdt = cdt, .p = p, .g = g, .st = st,
                  .a = 1 - h->lambd * st->eta, .b = -st->eta, .c = st->mu,
                  .flag = st->mu == 1};
    run(&q, n, asgd_range);
    st->eta = (float)(h->lr / pow(1 + h->lambd * h->lr * t, h->alpha));
    const double m = t - h->t0;
    st->mu = (float)(1 / (m > 1 ? m : 1));
}
