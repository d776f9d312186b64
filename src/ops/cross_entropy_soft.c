/* src/ops/cross_entropy_soft.c - cross_entropy of f32 or f64 logits x
 * (N, C) or (N, C, d1, ...), with label smoothing e > 0 and class indices
 * (N) or (N, d1, ...), or with a target q of class probabilities of x's
 * shape and dtype (any e), weight (C) of x's dtype or none, as one
 * recorded op: one pass over each row of logits where torch's composition
 * (src/ops/cross_entropy.c) takes log_softmax, nll_loss and the smoothing
 * term's products and sums, each a pass and a saved tensor.
 *
 * x is walked as (N, C, S), S = d1 d2 ... (1 without spatial dims): row k
 * = n S + i is its C elements of stride S.  Its loss is -sum_c a_c logp_c,
 * logp = log_softmax(x), with the coefficients
 *   class t:          a_c = (1 - e) w_t [c = t] + e / C w_c,
 *   probabilities q:  a_c = w_c ((1 - e) q_c + e / C),
 *   ignored class:    a_c = 0,
 * (w_c = 1 without a weight), torch 1.13's (1 - e) nll + e / C smoothing
 * term.  With m the row's maximum, s = sum_c exp(x_c - m) and A = sum_c
 * a_c, logp_c = (x_c - m) - log(s), so
 *   loss_k = A log(s) - sum_c a_c (x_c - m),
 *   d loss_k / d x_c = A softmax(x)_c - a_c.
 * MEAN divides the sum by sum_k w_{t_k} over the targets not ignored
 * (class indices) or by N S (probabilities), as torch's.  Rows of 256 or
 * more classes (S = 1) go one at a time in vectors of 8 doubles, the
 * others in blocks of up to 64 rows (positions of a slab, or whole rows)
 * whose C P values go through the exp together (the kernels of
 * src/ops/cross_entropy_soft_tmpl.h, compiled at each width).  The forward
 * keeps (m, s, A) of each row in double and takes e^(x - m) by
 * src/ops/exp_simd.h's exp at the calling thread's width (the same bits at
 * every width); each loss and each gradient is computed in double and
 * rounded once to x's dtype.  A create_graph backward records
 * g (softmax(x) A - a) with softmax, mul and sub (a and A constants), so
 * higher derivatives follow. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/exp_simd.h"
#include "ops/families.h"
#include "ops/loss.h"
#include "ops/softmax_rows_internal.h"
#include "ops/softmax_strided_internal.h"
#include "tapegrad/ops.h"

typedef struct sce_params {
    tg_reduction red;
    int64_t ignore_index;
    double eps;   /* label smoothing */
    bool prob;    /* target holds class probabilities */
} sce_params;

/* The saved slots: x, target, the rows' stats (K, 3) f64, weight. */
enum { SAVED_X, SAVED_TARGET, SAVED_STATS, SAVED_WEIGHT };

/* Rows a block takes at most: a block of P rows and its C classes go
 * through the exp together, e[c P + p] (scratch of BLOCK_VALUES values). */
enum { BLOCK_ROWS = 64, BLOCK_VALUES = 2048 };

/* The rows [k0, k1) of a task: in the forward their stats st[3 k] = {m, s,
 * A} and losses l[k]; in the backward dx from st and the gradients gk[k]
 * of each row's loss (0 for an ignored target). */
typedef struct sce_job {
    bool backward, f64;
    const void *x, *q;   /* q: the probabilities (x's dtype), or NULL */
    void *dx;
    double *st, *l;
    const double *gk;
    const int64_t *cls;  /* class targets (-1: ignored), or NULL */
    const double *wk;    /* w_t of each class target (0: ignored) */
    const double *w;     /* the class weights (C), 1 without a weight */
    double u, v, wsum;   /* 1 - e, e / C, sum_c w_c */
    int64_t C, S, K, per;
    tg__exp_width wd;
} sce_job;

/* The offset of row k's class 0 in x (N, C, S). */
static int64_t row_at(const sce_job *j, int64_t k) { return k / j->S * j->C * j->S + k % j->S; }

/* a_c of row k (the opening comment), q_c given for probabilities. */
static inline double coef(const sce_job *j, int64_t k, int64_t c, double q)
{
    const double wc = j->w[c];
    if (j->q) return wc * (j->u * q + j->v);
    if (j->cls[k] < 0) return 0.0;
    return j->v * wc + (c == j->cls[k] ? j->u * j->wk[k] : 0.0);
}

/* The rows of C >= ROW_CLASSES values (S = 1) go one at a time, in
 * vectors of LANES doubles (fwd_row's partial sums, added in a fixed
 * order), the others in blocks of up to BLOCK_ROWS rows. */
enum { ROW_CLASSES = 256, LANES = 8 };
typedef double sce_v8d __attribute__((vector_size(64)));
typedef int64_t sce_v8i __attribute__((vector_size(64)));
typedef float sce_v8f __attribute__((vector_size(32)));

/* The kernels at each width: FN(name) pastes the width's suffix, the
 * template defining load_block, fwd_block, bwd_block, lanes_sum, load_row,
 * fwd_row and bwd_row as name_plain, name_avx2 and name_avx512. */
#define ATTR
#define FN(name) name##_plain
#include "ops/cross_entropy_soft_tmpl.h"
#undef ATTR
#undef FN
#define ATTR TG__SIMD_AVX2
#define FN(name) name##_avx2
#include "ops/cross_entropy_soft_tmpl.h"
#undef ATTR
#undef FN
#define ATTR TG__SIMD_AVX512
#define FN(name) name##_avx512
#include "ops/cross_entropy_soft_tmpl.h"
#undef ATTR
#undef FN

/* The block and row kernels of the calling thread's width. */
typedef void (*sce_block_fn)(const sce_job *j, int64_t k, int64_t P, double *e, double *qe);
typedef void (*sce_row_fn)(const sce_job *j, int64_t k, double *e, double *qe);

static sce_block_fn block_fn(const sce_job *j)
{
    if (j->wd == TG__EXP_AVX512) return j->backward ? bwd_block_avx512 : fwd_block_avx512;
    if (j->wd == TG__EXP_AVX2) return j->backward ? bwd_block_avx2 : fwd_block_avx2;
    return j->backward ? bwd_block_plain : fwd_block_plain;
}

static sce_row_fn row_fn(const sce_job *j)
{
    if (j->wd == TG__EXP_AVX512) return j->backward ? bwd_row_avx512 : fwd_row_avx512;
    if (j->wd == TG__EXP_AVX2) return j->backward ? bwd_row_avx2 : fwd_row_avx2;
    return j->backward ? bwd_row_plain : fwd_row_plain;
}

static int sce_task(void *p, int64_t t)
{
    const sce_job *j = p;
    const int64_t k1 = (t + 1) * j->per < j->K ? (t + 1) * j->per : j->K;
    const int64_t rows = BLOCK_VALUES / j->C;
    const int64_t pmax = rows < 1 ? 1 : rows > BLOCK_ROWS ? BLOCK_ROWS : rows;
    const size_t ne = (size_t)(pmax * j->C + TG__EXP_PAD);
    double *e = tg__work_alloc((j->q ? 2 : 1) * ne * sizeof *e);
    if (!e)
        return tg__error(TG_ENOMEM, "cross_entropy: out of memory for a row of %lld classes",
                         (long long)j->C);
    if (j->S == 1 && j->C >= ROW_CLASSES) {
        const sce_row_fn row = row_fn(j);
        for (int64_t k = t * j->per; k < k1; k++) row(j, k, e, e + ne);
        tg__work_free(e);
        return TG_OK;
    }
    const sce_block_fn block = block_fn(j);
    for (int64_t k = t * j->per; k < k1;) {
        int64_t P = k1 - k < pmax ? k1 - k : pmax;
        if (j->S > 1 && j->S - k % j->S < P) P = j->S - k % j->S;   /* within a slab */
        block(j, k, P, e, e + ne);
        k += P;
    }
    tg__work_free(e);
    return TG_OK;
}

static int sce_run(sce_job *j)
{
    j->wd = tg__exp_width_get();
    const int64_t rows = TG__SLAB_TASK / j->C;
    j->per = rows < 1 ? 1 : rows;
    return tg__run_tasks((j->K + j->per - 1) / j->per, j->K * j->C > TG__SLAB_TASK, sce_task,
                         j);
}

/* What a job needs of the inputs besides x: the class targets and their
 * weights (class indices), the probabilities (contiguous), the class
 * weights as doubles and their sum; freed by inputs_free. */
typedef struct sce_inputs {
    int64_t *cls;
    double *wk, *w, total;
    tg_tensor *xc, *qc;
} sce_inputs;

static void inputs_free(sce_inputs *in)
{
    free(in->cls);
    free(in->wk);
    free(in->w);
    tg_tensor_release(in->xc);
    tg_tensor_release(in->qc);
}

/* S of x (N, C, d1, ...): d1 d2 ... */
static int64_t spatial_of(const tg_tensor *x)
{
    int64_t S = 1;
    for (int d = 2; d < x->ndim; d++) S *= x->shape[d];
    return S;
}

/* Reads the inputs into *in and fills j's fields but x's direction. */
static int inputs_read(sce_inputs *in, sce_job *j, const sce_params *p, tg_tensor *x,
                       tg_tensor *target, tg_tensor *weight)
{
    const int64_t C = x->shape[1], K = x->shape[0] * spatial_of(x);
    *j = (sce_job){.f64 = x->dtype == TG_F64, .C = C, .S = spatial_of(x), .K = K,
                   .u = 1.0 - p->eps, .v = p->eps / (double)C, .wsum = (double)C};
    TG_TRY(tg_contiguous(&in->xc, x));
    j->x = tg_tensor_cdata(in->xc);
    if (!(in->w = tg__malloc((size_t)C * sizeof *in->w))) return TG_ENOMEM;
    for (int64_t c = 0; c < C; c++) in->w[c] = 1.0;   /* w_c = 1 without a weight */
    if (weight) {
        tg__gather(weight, TG_F64, in->w);
        j->wsum = 0.0;
        for (int64_t c = 0; c < C; c++) j->wsum += in->w[c];
    }
    j->w = in->w;
    if (p->prob) {
        TG_TRY(tg_contiguous(&in->qc, target));
        j->q = tg_tensor_cdata(in->qc);
        in->total = (double)K;
        return TG_OK;
    }
    in->cls = tg__malloc((size_t)K * sizeof *in->cls);
    in->wk = tg__malloc((size_t)K * sizeof *in->wk);
    if (!in->cls || !in->wk) return TG_ENOMEM;
    j->cls = in->cls;
    j->wk = in->wk;
    /* the messages name nll_loss, as the composition's */
    return tg__nll_read_targets("nll_loss", target, weight, C, p->ignore_index, in->cls, in->wk,
                                &in->total);
}

/* ---- the op ---------------------------------------------------------------------- */

/* tg__cross_entropy_soft has checked the inputs: a loss of x's shape
 * without the class dim, or a 0-d one, of x's dtype. */
static int sce_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                     int *ndim, int64_t *shape)
{
    const sce_params *p = params;
    *dtype = in[0]->dtype;
    *ndim = p->red == TG_REDUCTION_NONE ? in[0]->ndim - 1 : 0;
    for (int d = 0; d < *ndim; d++) shape[d] = in[0]->shape[d == 0 ? 0 : d + 1];
    return TG_OK;
}

static int sce_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    const sce_params *p = params;
    tg_tensor *x = in[0], *target = in[1], *weight = in[2];
    sce_inputs si = {0};
    sce_job j;
    tg_tensor *st = NULL, *r = NULL;
    int rc = inputs_read(&si, &j, p, x, target, weight);
    const bool none = p->red == TG_REDUCTION_NONE;
    double *l = rc < 0 ? NULL : tg__malloc((size_t)j.K * sizeof *l);
    if (rc >= 0 && !l) rc = TG_ENOMEM;
    if (rc < 0) goto done;
    st = tg__tensor_uninit(TG_F64, 2, (int64_t[]){j.K, 3});
    int64_t rs[TG_MAX_DIMS];
    for (int d = 0; d + 1 < x->ndim; d++) rs[d] = x->shape[d == 0 ? 0 : d + 1];
    r = tg__tensor_uninit(x->dtype, none ? x->ndim - 1 : 0, rs);
    if (!st || !r) {
        rc = TG_ENOMEM;
        goto done;
    }
    j.st = tg_tensor_data(st);
    j.l = l;
    TG_TRY_GOTO(sce_run(&j));
    TG_TRY_GOTO(tg__ce_rows_finish(ctx, r, l, j.K, p->red, si.total, x, target, st, weight));
    *out = r;
    r = NULL;
done:
    free(l);
    inputs_free(&si);
    tg_tensor_release(st);
    tg_tensor_release(r);
    return rc;
}

/* gk[k], the gradient of row k's loss: g (g[k] for NONE), over the MEAN
 * divisor; 0 for an ignored target. */
static int row_grads(const sce_params *p, const sce_inputs *si, const tg_tensor *g, int64_t K,
                     double *gk)
{
    if (p->red == TG_REDUCTION_NONE) {
        tg__gather(g, TG_F64, gk);
    } else {
        double g0;
        tg__gather(g, TG_F64, &g0);
        if (p->red == TG_REDUCTION_MEAN) g0 /= si->total;
        for (int64_t k = 0; k < K; k++) gk[k] = g0;
    }
    if (si->cls)
        for (int64_t k = 0; k < K; k++)
            if (si->cls[k] < 0) gk[k] = 0.0;
    return TG_OK;
}

/* The constants of the recorded gradient: a (x's shape) and A (x's shape
 * with 1 classes) of x's dtype, from the job's inputs and stats. */
static int coefs_tensors(const sce_job *j, const tg_tensor *x, tg_tensor **a, tg_tensor **A)
{
    int64_t shape[TG_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) shape[d] = d == 1 ? 1 : x->shape[d];
    const int64_t C = j->C, S = j->S, K = j->K;
    double *av = tg__malloc((size_t)(K * C) * sizeof *av);
    double *Av = tg__malloc((size_t)K * sizeof *Av);
    double *qv = j->q ? tg__malloc((size_t)(K * C) * sizeof *qv) : NULL;
    int rc = av && Av && (qv || !j->q) ? TG_OK : TG_ENOMEM;
    if (rc < 0) goto done;
    if (qv) {
        for (int64_t i = 0; i < K * C; i++)
            qv[i] = j->f64 ? ((const double *)j->q)[i] : (double)((const float *)j->q)[i];
    }
    for (int64_t k = 0; k < K; k++) {
        Av[k] = j->st[3 * k + 2];
        for (int64_t c = 0; c < C; c++) {
            const int64_t at = row_at(j, k) + c * S;
            av[at] = coef(j, k, c, qv ? qv[at] : 0.0);
        }
    }
    *a = tg__tensor_uninit(x->dtype, x->ndim, x->shape);
    *A = tg__tensor_uninit(x->dtype, x->ndim, shape);
    if (!*a || !*A) {
        rc = TG_ENOMEM;
        goto done;
    }
    tg__scatter(*a, TG_F64, av);
    tg__scatter(*A, TG_F64, Av);
done:
    free(av);
    free(Av);
    free(qv);
    return rc;
}

/* The gradient as recorded ops (a create_graph backward, or a g of another
 * dtype): dx = g' (softmax(x) A - a), g' = g viewed as (N, 1, d...) for
 * NONE, over the MEAN divisor for MEAN. */
static int backward_composed(const sce_params *p, const sce_job *j, const sce_inputs *si,
                             tg_tensor *g, tg_tensor *x, tg_tensor **dx)
{
    tg_tensor *t[7] = {NULL};   /* a, A, g', softmax, times A, minus a, g cast */
    int rc = coefs_tensors(j, x, &t[0], &t[1]);
    if (rc < 0) goto done;
    if (g->dtype != x->dtype) {
        TG_TRY_GOTO(tg_to_dtype(&t[6], g, x->dtype));
        g = t[6];
    }
    if (p->red == TG_REDUCTION_NONE)
        TG_TRY_GOTO(tg_reshape(&t[2], g, x->ndim, tg_tensor_shape(t[1])));
    else if (p->red == TG_REDUCTION_MEAN)
        TG_TRY_GOTO(tg_div_scalar(&t[2], g, si->total));
    else
        t[2] = tg_tensor_retain(g);
    TG_TRY_GOTO(tg_softmax(&t[3], x, 1));
    TG_TRY_GOTO(tg_mul(&t[4], t[3], t[1]));
    TG_TRY_GOTO(tg_sub(&t[5], t[4], t[0]));
    rc = tg_mul(dx, t[5], t[2]);
done:
    tg__loss_release_all(t, 7);
    return rc;
}

static int sce_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    if (!tg__ctx_needs_grad(ctx, 0)) return TG_OK;
    const sce_params *p = tg__ctx_params(ctx);
    tg_tensor *x, *target, *st, *weight = NULL, *dx = NULL;
    TG_TRY(tg__ctx_saved(ctx, SAVED_X, &x));
    TG_TRY(tg__ctx_saved(ctx, SAVED_TARGET, &target));
    TG_TRY(tg__ctx_saved(ctx, SAVED_STATS, &st));
    if (tg__ctx_input_meta(ctx, 2)->ndim >= 0) TG_TRY(tg__ctx_saved(ctx, SAVED_WEIGHT, &weight));
    sce_inputs si = {0};
    sce_job j;
    double *gk = NULL;
    int rc = inputs_read(&si, &j, p, x, target, weight);
    if (rc < 0) goto done;
    j.st = (double *)tg_tensor_cdata(st);
    if (tg_grad_enabled() || g->dtype != x->dtype) {
        rc = backward_composed(p, &j, &si, g, x, &gi[0]);
        goto done;
    }
    gk = tg__malloc((size_t)j.K * sizeof *gk);
    dx = tg__tensor_uninit(x->dtype, x->ndim, x->shape);
    if (!gk || !dx) {
        rc = TG_ENOMEM;
        goto done;
    }
    TG_TRY_GOTO(row_grads(p, &si, g, j.K, gk));
    j.backward = true;
    j.gk = gk;
    j.dx = tg_tensor_data(dx);
    TG_TRY_GOTO(sce_run(&j));
    gi[0] = dx;
    dx = NULL;
done:
    free(gk);
    inputs_free(&si);
    tg_tensor_release(dx);
    return rc;
}

static const tg_op_schema sce_op = {.name = "cross_entropy_soft", .arity = 3,
                                    .amp = TG_AMP_FP32, .forward = sce_forward,
                                    .backward = sce_backward, .shape = sce_shape,
                                    .double_backward = true,
                                    .vjp = "dx = g' (softmax(x) A - a), a the rows' target "
                                           "coefficients, A their sum; target and weight "
                                           "get none"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__ce_soft_ops[] = {&sce_op};
static_assert(sizeof tg__ce_soft_ops / sizeof tg__ce_soft_ops[0] == TG__ce_soft_N,
              "src/ops/families.h must count the ce_soft ops");

int tg__cross_entropy_soft(tg_tensor **out, tg_tensor *x, tg_tensor *target, tg_tensor *weight,
                           tg_reduction red, int64_t ignore_index, double label_smoothing)
{
    if (!out || !x || !target || !(label_smoothing >= 0.0 && label_smoothing <= 1.0))
        return TG__CE_ROWS_NOT_TAKEN;
    const bool prob = tg_dtype_is_float(target->dtype);
    if (!tg__ce_rows_fit(x, prob ? NULL : target, weight, red) ||
        (!prob && label_smoothing == 0.0))
        return TG__CE_ROWS_NOT_TAKEN;
    if (prob) {   /* of x's dtype and shape, a constant */
        if (target->dtype != x->dtype || !tg_tensor_same_shape(target, x) ||
            tg_tensor_requires_grad(target))
            return TG__CE_ROWS_NOT_TAKEN;
    }
    sce_params p = {.red = red, .ignore_index = ignore_index, .eps = label_smoothing,
                    .prob = prob};
    tg_tensor *in[3] = {x, target, weight};
    return tg_op_call(&sce_op, out, 3, in, &p, sizeof p);
}
