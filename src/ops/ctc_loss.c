/* src/ops/ctc_loss.c - ctc_loss(log_probs, targets, input_lengths,
 * target_lengths) as torch 1.13's _ctc_loss and its CPU backward, and
 * tg_ctc_loss, F.ctc_loss: that op's per-sequence losses reduced.
 *
 * Sequence n has log_probs lp (T, C) (its column of the (T, N, C) input),
 * input length I and target l of length S.  The extended target l' of
 * length 2S + 1 puts a blank before, between and after the labels:
 * l'_s = blank for even s, l_{(s-1)/2} for odd s.  An alignment is a path
 * of I positions s_t in l', starting at s_0 in {0, 1}, ending at
 * s_{I-1} in {2S - 1, 2S}, each step staying (s), moving on (s + 1), or
 * skipping the blank between two different labels (s + 2 when
 * l'_{s+2} != l'_s; equal neighbours need a blank between them).  In
 * log space (Graves et al. 2006, eqs. 6-11, 0-based):
 *   alpha_0(0) = lp[0, blank], alpha_0(1) = lp[0, l_0], -inf elsewhere,
 *   alpha_t(s) = logsumexp(alpha_{t-1}(s), alpha_{t-1}(s - 1),
 *                          alpha_{t-1}(s - 2) where a skip) + lp[t, l'_s],
 *   nll = -logsumexp(alpha_{I-1}(2S), alpha_{I-1}(2S - 1))
 *         (-alpha_{I-1}(0) for S = 0; +inf when no path reaches the end),
 * and the betas the same recursion run backwards from t = I - 1, with
 * beta_t(s) including lp[t, l'_s] as alpha does.  Then
 * alpha_t(s) + beta_t(s) - lp[t, l'_s] is the log of the paths' mass
 * through (t, s), and the gradient torch's kernel returns is
 *   dlp[t, c] = g (exp(lp[t, c]) - exp(lcab_t(c) + nll - lp[t, c])),
 *   lcab_t(c) = logsumexp over s with l'_s = c of alpha_t(s) + beta_t(s)
 * for t < I (-inf for a c nowhere in l'), 0 for t >= I.  Without its
 * exp(lp) term it is the derivative in lp; with it, it is the derivative
 * through a log_softmax, which subtracts exp(lp) times the row's sum
 * (-1 without the term): torch's choice, kept, as every caller feeds
 * log_softmax outputs.  An infinite nll makes every lcab -inf and the
 * gradient NaN for t < I, as torch's; with zero_infinity the loss and the
 * gradient of that sequence are 0 (torch replaces the loss by where()).
 *
 * The forward keeps the alphas (N, T, Lmax), Lmax = 2 max(S) + 1, and the
 * raw nll (N) for the backward; the backward keeps two rows of betas per
 * sequence.  Both run one task per sequence (tg__run_tasks).  The
 * arithmetic is log_probs' dtype's, in torch's order (ctc_loss_tmpl.h).
 * The backward is loops, not recorded ops, as torch's: a create_graph
 * backward through ctc_loss is refused by the engine (double_backward is
 * false), where torch raises "derivative for _ctc_loss_backward is not
 * implemented". */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/loss.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"

typedef struct ctc_params {
    int64_t blank;
    bool zero_infinity;
} ctc_params;

/* One call's sequences: what the kernels read and write. */
typedef struct ctc_job {
    const void *lp;           /* log_probs' first element */
    int64_t lp_st[3];         /* its strides over (T, N, C), in elements */
    const int64_t *tgt;       /* the labels, as i64, flat */
    const int64_t *tg_off;    /* (N): where sequence b's labels start in tgt */
    const int64_t *il, *tl;   /* (N): input and target lengths */
    int64_t T, N, C, Lmax, blank;
    bool zero_infinity;
    tg_dtype dt;
    void *alpha;              /* (N, T, Lmax) */
    void *nll;                /* (N) */
    const void *g;            /* backward: the (N) gradient of the losses */
    void *grad;               /* backward: (T, N, C), zeroed */
    void *beta;               /* backward: (N, 2, Lmax) work */
} ctc_job;

/* l'_s: the blank at even s, label (s - 1) / 2 at odd s. */
static inline int64_t ctc_label(const int64_t *lab, int64_t blank, int64_t s)
{
    return s % 2 == 0 ? blank : lab[s / 2];
}

#define CTC_R float
#define CTC_SUF f32
#define CTC_EXP expf
#define CTC_LOG logf
#include "ops/ctc_loss_tmpl.h"
#undef CTC_R
#undef CTC_SUF
#undef CTC_EXP
#undef CTC_LOG
#define CTC_R double
#define CTC_SUF f64
#define CTC_EXP exp
#define CTC_LOG log
#include "ops/ctc_loss_tmpl.h"
#undef CTC_R
#undef CTC_SUF
#undef CTC_EXP
#undef CTC_LOG

/* ---- checks ---------------------------------------------------------------- */

static int check_int(const char *name, const tg_tensor *t)
{
    TG_CHECK(t != NULL, TG_EINVAL, "ctc_loss: %s must not be NULL", name);
    TG_CHECK(!tg_dtype_is_float(t->dtype), TG_EDTYPE,
             "ctc_loss: %s has dtype %s; it must be an integer tensor", name,
             tg_dtype_name(t->dtype));
    return TG_OK;
}

/* in: log_probs (T, N, C) f32/f64, targets (N, S) or 1-d, input_lengths and
 * target_lengths of N elements, all integer but log_probs; the result is
 * the (N) losses. */
static int ctc_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                     int *ndim, int64_t *shape)
{
    const ctc_params *p = params;
    const tg_tensor *lp = in[0], *tg = in[1];
    char s1[96], s2[96];
    TG_CHECK(p != NULL, TG_EINVAL, "ctc_loss: params (blank, zero_infinity) must not be NULL");
    TG_CHECK(lp != NULL, TG_EINVAL, "ctc_loss: log_probs must not be NULL");
    TG_CHECK(lp->dtype == TG_F32 || lp->dtype == TG_F64, TG_EDTYPE,
             "ctc_loss: log_probs has dtype %s; it must be f32 or f64 (torch's CPU kernel)",
             tg_dtype_name(lp->dtype));
    TG_CHECK(lp->ndim == 3, TG_ESHAPE, "ctc_loss: log_probs has shape %s; it must be (T, N, C)",
             tg_shape_str(s1, sizeof s1, lp->ndim, lp->shape));
    const int64_t N = lp->shape[1], C = lp->shape[2];
    TG_CHECK(p->blank >= 0 && p->blank < C, TG_EINVAL,
             "ctc_loss: blank=%lld must be a label in [0, C=%lld)", (long long)p->blank,
             (long long)C);
    TG_TRY(check_int("targets", tg));
    TG_CHECK(tg->ndim == 1 || tg->ndim == 2, TG_ESHAPE,
             "ctc_loss: targets has shape %s; it must be padded (N, S) or concatenated 1-d",
             tg_shape_str(s1, sizeof s1, tg->ndim, tg->shape));
    TG_CHECK(tg->ndim == 1 || tg->shape[0] == N, TG_ESHAPE,
             "ctc_loss: padded targets has shape %s; for log_probs %s it must have N=%lld rows",
             tg_shape_str(s1, sizeof s1, tg->ndim, tg->shape),
             tg_shape_str(s2, sizeof s2, lp->ndim, lp->shape), (long long)N);
    static const char *const names[2] = {"input_lengths", "target_lengths"};
    for (int i = 0; i < 2; i++) {
        TG_TRY(check_int(names[i], in[2 + i]));
        TG_CHECK(tg_tensor_numel(in[2 + i]) == N, TG_ESHAPE,
                 "ctc_loss: %s has shape %s; it must have N=%lld elements, one per sequence",
                 names[i], tg_shape_str(s1, sizeof s1, in[2 + i]->ndim, in[2 + i]->shape),
                 (long long)N);
    }
    *dtype = lp->dtype;
    *ndim = 1;
    shape[0] = N;
    return TG_OK;
}

/* ---- lengths and labels ------------------------------------------------------ */

/* The lengths, label offsets and labels of a call, as i64 (each array
 * allocated here; ctc_index_free frees them). */
typedef struct ctc_index {
    int64_t *il, *tl, *off, *tgt;
    int64_t Lmax;
} ctc_index;

static void ctc_index_free(ctc_index *x)
{
    free(x->il);
    free(x->tl);
    free(x->off);
    free(x->tgt);
}

/* Checks each length against its range and each label read against
 * [0, C): TG_EINVAL naming the first that is not; TG_ESHAPE for
 * concatenated targets that do not hold sum(target_lengths) labels. */
static int check_index(const ctc_index *x, const tg_tensor *targets, int64_t T, int64_t N,
                       int64_t C)
{
    const bool padded = targets->ndim == 2;
    const int64_t S = padded ? targets->shape[1] : tg_tensor_numel(targets);
    int64_t sum = 0;
    for (int64_t b = 0; b < N; b++) {
        TG_CHECK(x->il[b] >= 0 && x->il[b] <= T, TG_EINVAL,
                 "ctc_loss: input_lengths[%lld]=%lld must be in [0, T=%lld]", (long long)b,
                 (long long)x->il[b], (long long)T);
        TG_CHECK(x->tl[b] >= 0 && x->tl[b] <= S, TG_EINVAL,
                 "ctc_loss: target_lengths[%lld]=%lld must be in [0, %s=%lld]", (long long)b,
                 (long long)x->tl[b], padded ? "S" : "the targets' length", (long long)S);
        sum += x->tl[b];   /* each <= S, and sum <= S before: no overflow */
        TG_CHECK(padded || sum <= S, TG_ESHAPE,
                 "ctc_loss: concatenated targets has %lld labels; target_lengths[0..%lld] "
                 "already ask for %lld", (long long)S, (long long)b, (long long)sum);
    }
    TG_CHECK(padded || sum == S, TG_ESHAPE,
             "ctc_loss: concatenated targets has %lld labels; it must have sum(target_lengths)"
             "=%lld", (long long)S, (long long)sum);
    for (int64_t b = 0; b < N; b++)
        for (int64_t i = 0; i < x->tl[b]; i++) {
            const int64_t v = x->tgt[x->off[b] + i];
            if (v >= 0 && v < C) continue;
            if (padded)
                return tg__error(TG_EINVAL, "ctc_loss: targets[%lld, %lld]=%lld must be a label "
                                 "in [0, C=%lld)", (long long)b, (long long)i, (long long)v,
                                 (long long)C);
            return tg__error(TG_EINVAL, "ctc_loss: targets[%lld]=%lld (sequence %lld) must be "
                             "a label in [0, C=%lld)", (long long)(x->off[b] + i), (long long)v,
                             (long long)b, (long long)C);
        }
    return TG_OK;
}

/* Reads and checks the index of in (the op's inputs, shapes checked). */
static int read_index(ctc_index *x, tg_tensor *const *in)
{
    const tg_tensor *lp = in[0], *targets = in[1];
    const int64_t T = lp->shape[0], N = lp->shape[1], C = lp->shape[2],
                  K = tg_tensor_numel(targets), n1 = N > 0 ? N : 1;
    *x = (ctc_index){.il = tg__malloc((size_t)n1 * sizeof(int64_t)),
                     .tl = tg__malloc((size_t)n1 * sizeof(int64_t)),
                     .off = tg__malloc((size_t)n1 * sizeof(int64_t)),
                     .tgt = tg__malloc((size_t)(K > 0 ? K : 1) * sizeof(int64_t))};
    if (!x->il || !x->tl || !x->off || !x->tgt) {
        ctc_index_free(x);
        return TG_ENOMEM;
    }
    tg__gather(in[2], TG_I64, x->il);
    tg__gather(in[3], TG_I64, x->tl);
    tg__gather(targets, TG_I64, x->tgt);
    int64_t maxS = 0;
    for (int64_t b = 0, pos = 0; b < N; b++) {
        x->off[b] = targets->ndim == 2 ? b * targets->shape[1] : pos;
        if (x->tl[b] > 0) pos += x->tl[b];
        if (x->tl[b] > maxS) maxS = x->tl[b];
    }
    int rc = check_index(x, targets, T, N, C);
    if (rc < 0) ctc_index_free(x);
    x->Lmax = 2 * maxS + 1;
    return rc;
}

/* The job of in's sequences over x. */
static ctc_job job_of(tg_tensor *const *in, const ctc_index *x, const ctc_params *p)
{
    const tg_tensor *lp = in[0];
    return (ctc_job){.lp = tg_tensor_cdata(lp),
                     .lp_st = {lp->strides[0], lp->strides[1], lp->strides[2]},
                     .tgt = x->tgt, .tg_off = x->off, .il = x->il, .tl = x->tl,
                     .T = lp->shape[0], .N = lp->shape[1], .C = lp->shape[2], .Lmax = x->Lmax,
                     .blank = p->blank, .zero_infinity = p->zero_infinity, .dt = lp->dtype};
}

/* Whether the sequences are worth a thread each: their alpha cells. */
static bool worth_threads(const ctc_job *j)
{
    double cells = 0;
    for (int64_t b = 0; b < j->N; b++) cells += (double)j->il[b] * (double)(2 * j->tl[b] + 1);
    return j->N > 1 && cells * (double)(j->C > 8 ? 2 : 1) > 8192;
}

/* ---- ctc_loss ---------------------------------------------------------------- */

static int alpha_task(void *job, int64_t b)
{
    const ctc_job *j = job;
    if (j->dt == TG_F32) ctc_alpha_f32(j, b);
    else ctc_alpha_f64(j, b);
    return TG_OK;
}

static int ctc_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    const ctc_params *p = params;
    const tg_tensor *lp = in[0];
    const tg_dtype dt = lp->dtype;
    const int64_t T = lp->shape[0], N = lp->shape[1];
    ctc_index x;
    TG_TRY(read_index(&x, in));
    const int64_t ashape[3] = {N, T, x.Lmax};
    tg_tensor *alpha = NULL, *nll = NULL, *loss = NULL;
    int rc = TG_OK;
    if (!tg__shape_bytes_fit(3, ashape, (int64_t)tg_dtype_size(dt))) {
        rc = tg__error(TG_EINVAL, "ctc_loss: the alphas (N=%lld, T=%lld, 2 max(target_lengths)"
                       " + 1=%lld) are too large", (long long)N, (long long)T,
                       (long long)x.Lmax);
        goto done;
    }
    alpha = tg__tensor_uninit(dt, 3, ashape);
    nll = tg__tensor_uninit(dt, 1, &N);
    loss = tg__tensor_uninit(dt, 1, &N);
    if (!alpha || !nll || !loss) {
        rc = TG_ENOMEM;
        goto done;
    }
    ctc_job j = job_of(in, &x, p);
    j.alpha = tg_tensor_data(alpha);
    j.nll = tg_tensor_data(nll);
    TG_TRY_GOTO(tg__run_tasks(N, worth_threads(&j), alpha_task, &j));
    /* zero_infinity: torch's where(loss == inf, 0, loss) */
    for (int64_t b = 0; b < N; b++) {
        double v = tg_dtype_load(dt, j.nll, b);
        tg_dtype_store(dt, tg_tensor_data(loss), b, p->zero_infinity && v == INFINITY ? 0 : v);
    }
    if (ctx) {
        for (int i = 0; i < 4; i++) TG_TRY_GOTO(tg__ctx_save(ctx, in[i]));
        TG_TRY_GOTO(tg__ctx_save(ctx, alpha));
        TG_TRY_GOTO(tg__ctx_save(ctx, nll));
    }
    *out = loss;
    loss = NULL;
done:
    tg_tensor_release(alpha);
    tg_tensor_release(nll);
    tg_tensor_release(loss);
    ctc_index_free(&x);
    return rc;
}

static int grad_task(void *job, int64_t b)
{
    const ctc_job *j = job;
    if (j->dt == TG_F32) ctc_grad_f32(j, b);
    else ctc_grad_f64(j, b);
    return TG_OK;
}

/* dlog_probs as at the top, from the saved inputs, alphas and nll; the
 * targets and lengths get none. */
static int ctc_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    if (!tg__ctx_needs_grad(ctx, 0)) return TG_OK;
    tg_tensor *in[4], *alpha, *nll;
    for (int i = 0; i < 4; i++) TG_TRY(tg__ctx_saved(ctx, i, &in[i]));
    TG_TRY(tg__ctx_saved(ctx, 4, &alpha));
    TG_TRY(tg__ctx_saved(ctx, 5, &nll));
    const tg_tensor *lp = in[0];
    const tg_dtype dt = lp->dtype;
    const int64_t N = lp->shape[1];
    ctc_index x;
    TG_TRY(read_index(&x, in));
    tg_tensor *grad = tg__tensor_empty(dt, lp->ndim, lp->shape);   /* zeros */
    void *gv = tg__malloc((size_t)(N > 0 ? N : 1) * tg_dtype_size(dt));
    void *beta = tg__malloc((size_t)(N > 0 ? N : 1) * 2 * (size_t)x.Lmax * tg_dtype_size(dt));
    int rc = TG_OK;
    if (!grad || !gv || !beta) {
        rc = TG_ENOMEM;
        goto done;
    }
    tg__gather(g, dt, gv);
    ctc_job j = job_of(in, &x, tg__ctx_params(ctx));
    j.alpha = (void *)tg_tensor_cdata(alpha);
    j.nll = (void *)tg_tensor_cdata(nll);
    j.g = gv;
    j.grad = tg_tensor_data(grad);
    j.beta = beta;
    TG_TRY_GOTO(tg__run_tasks(N, worth_threads(&j), grad_task, &j));
    gi[0] = grad;
    grad = NULL;
done:
    tg_tensor_release(grad);
    free(gv);
    free(beta);
    ctc_index_free(&x);
    return rc;
}

/* FP32, as PyTorch's autocast lists ctc_loss.  Not twice differentiable. */
static const tg_op_schema ctc_op = {
    .name = "ctc_loss", .arity = 4, .amp = TG_AMP_FP32, .forward = ctc_forward,
    .backward = ctc_backward, .shape = ctc_shape, .double_backward = false,
    .vjp = "dlog_probs = g * (exp(lp) - exp(log_alpha + log_beta + nll - lp) summed over "
           "each label's positions) for t < input_length, 0 after; targets and lengths get "
           "none"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__ctc_loss_ops[] = {&ctc_op};
static_assert(sizeof tg__ctc_loss_ops / sizeof tg__ctc_loss_ops[0] == TG__ctc_loss_N,
              "src/ops/families.h must count the ctc_loss ops");

/* ---- tg_ctc_loss: F.ctc_loss ----------------------------------------------------- */

/* *out (new reference): the (N) losses l divided by max(target length, 1)
 * and averaged, torch's mean; tl is checked by the op already. */
static int mean_over_lengths(tg_tensor **out, tg_tensor *l, const tg_tensor *tl)
{
    const int64_t N = l->shape[0];
    double *v = tg__malloc((size_t)(N > 0 ? N : 1) * sizeof *v);
    if (!v) return TG_ENOMEM;
    tg__gather(tl, TG_F64, v);
    for (int64_t b = 0; b < N; b++) v[b] = v[b] < 1 ? 1 : v[b];
    tg_tensor *d = tg__tensor_uninit(l->dtype, 1, &N), *q = NULL;
    int rc = d ? TG_OK : TG_ENOMEM;
    if (d) tg__scatter(d, TG_F64, v);
    if (rc >= 0) rc = tg_div(&q, l, d);
    if (rc >= 0) rc = tg_mean(out, q);
    free(v);
    tg_tensor_release(d);
    tg_tensor_release(q);
    return rc;
}

/* The op, then the reduction; the checks that name the caller's dtypes and
 * shapes are tg_ctc_loss's. */
static int ctc_loss_reduced(tg_tensor **out, tg_tensor *log_probs, tg_tensor *targets,
                            tg_tensor *input_lengths, tg_tensor *target_lengths,
                            const tg_ctc_loss_opts *o)
{
    const bool batched = log_probs->ndim == 3;
    const ctc_params p = {.blank = o->blank, .zero_infinity = o->zero_infinity};
    tg_tensor *lp3 = NULL, *l = NULL;
    int rc = TG_OK;
    if (!batched) TG_TRY_GOTO(tg_unsqueeze(&lp3, log_probs, 1));
    TG_TRY_GOTO(tg_op_call(&ctc_op, &l, 4,
                           (tg_tensor *[]){batched ? log_probs : lp3, targets, input_lengths,
                                           target_lengths},
                           &p, sizeof p));
    if (o->reduction == TG_REDUCTION_MEAN) rc = mean_over_lengths(out, l, target_lengths);
    else if (o->reduction == TG_REDUCTION_SUM) rc = tg_sum(out, l);
    else if (!batched) rc = tg_reshape(out, l, 0, NULL);
    else *out = tg_tensor_retain(l);
done:
    tg_tensor_release(lp3);
    tg_tensor_release(l);
    return rc;
}

/* The ops run on the library's behalf; only the result goes to the
 * caller's scope (tapegrad/scope.h). */
int tg_ctc_loss(tg_tensor **out, tg_tensor *log_probs, tg_tensor *targets,
                tg_tensor *input_lengths, tg_tensor *target_lengths, const tg_ctc_loss_opts *opts)
{
    const tg_ctc_loss_opts o = opts ? *opts : (tg_ctc_loss_opts)TG_CTC_LOSS_OPTS_INIT;
    TG_CHECK(out != NULL, TG_EINVAL, "ctc_loss: out must not be NULL");
    TG_CHECK(log_probs != NULL, TG_EINVAL, "ctc_loss: log_probs must not be NULL");
    TG_TRY(tg__loss_check_reduction("ctc_loss", o.reduction));
    char s[96];
    TG_CHECK(log_probs->ndim == 2 || log_probs->ndim == 3, TG_ESHAPE,
             "ctc_loss: log_probs has shape %s; it must be (T, N, C) or unbatched (T, C)",
             tg_shape_str(s, sizeof s, log_probs->ndim, log_probs->shape));
    /* before dispatch, which would promote float targets or lengths with
     * log_probs: the message names the caller's dtype */
    TG_TRY(check_int("targets", targets));
    TG_TRY(check_int("input_lengths", input_lengths));
    TG_TRY(check_int("target_lengths", target_lengths));
    tg__lib_enter();
    int rc = ctc_loss_reduced(out, log_probs, targets, input_lengths, target_lengths, &o);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
