/* src/dist/sync_batchnorm.c - BatchNorm whose batch statistics are those of
 * the whole job's batch (torch.nn.SyncBatchNorm).
 *
 * In training each rank sums x and x^2 over every dim but the channel (in
 * f64), one all-reduce makes them the sums over all ranks' batches, and
 *     mean = S1 / n,   var = S2 / n - mean^2   (n: elements per channel, all ranks)
 *     y = (x - mean) / sqrt(var + eps) * weight + bias.
 * The all-reduce is an op on the tape (dist_allreduce_sum): every rank's
 * sums feed every rank's output, so its backward is again an all-reduce of
 * the gradient, d x_r = sum_s d y_s.  Everything else is ordinary
 * differentiable ops, so the gradients of mean and var flow back through
 * all ranks exactly as through one BatchNorm over the whole batch.  A
 * training forward makes two MPI_Allreduce calls and its backward one.  The
 * forward's first sums the element counts and, with them, a flag for a
 * rank whose checks of x or local sums failed, so that every rank returns
 * that failure (tg_dist_agree gives them its message) rather than leave the
 * others waiting in the second, of the 2C sums.  Those reach every rank as
 * contiguous f64 tensors, so they skip tg_dist_allreduce_sum's checks and
 * agreement.  Each all-reduce also carries the number of ranks whose part
 * of it failed, so a failure of the all-reduce step itself, in the forward
 * or in the backward, is every rank's.  The
 * running statistics take the same update on every rank (PyTorch's, with
 * the unbiased variance var n / (n - 1)); in eval the module is a plain
 * batch_norm with them.  Dtypes are batch_norm's: an f16/bf16 x is computed
 * on in f32, and the output is x's dtype when x is half inside an autocast
 * scope, otherwise the promotion of x, weight and bias.  Parameter and buffer names are BatchNorm's, so a
 * state dict moves between the two, and tg_dist_convert_sync_batchnorm swaps
 * a model's BatchNorms for SyncBatchNorms that share their tensors. */
#include <math.h>
#include <string.h>

#include "dist/dist_internal.h"
#include "nn/module_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/op.h"
#include "tapegrad/ops.h"

/* ---- the differentiable all-reduce -------------------------------------- */

typedef struct ar_params {
    tg_dist *d;
} ar_params;

static int allreduce_diff(tg_tensor **out, tg_tensor *x, tg_dist *d);

static _Thread_local int fail_countdown = -1;

int tg__sbn_fail_after(int n)
{
    int prev = fail_countdown;
    fail_countdown = n < 0 ? -1 : n;
    return prev;
}

/* The message is x's values and one more, the number of ranks whose own
 * part failed (their values are zeros): so a rank that cannot make its
 * output (no memory) still takes part, and every rank returns its error
 * (tg_dist_agree, on failure only) instead of the others waiting for its
 * message.  Without memory for the message itself no call can answer the
 * others: the job ends, with the reason. */
static int ar_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                      const void *params)
{
    (void)ctx, (void)n;
    const ar_params *p = params;
    const int64_t k = tg_tensor_numel(in[0]);   /* 2C f64 on every rank */
    TG_ASSERT(tg_tensor_dtype(in[0]) == TG_F64 && k < INT32_MAX);
    double *msg = tg__calloc((size_t)k + 1, sizeof *msg);
    if (!msg)
        tg_dist_abort(p->d, tg__error(TG_ENOMEM, "sync_batchnorm: no memory for the all-reduce "
                                                 "of %lld statistics, which the other ranks "
                                                 "wait in: the job ends", (long long)k));
    tg_tensor *y = NULL;
    int rc = fail_countdown >= 0 && fail_countdown-- == 0
                 ? tg__error(TG_ENOMEM, "sync_batchnorm: out of memory (injected)")
                 : tg_tensor_clone(&y, in[0]);   /* contiguous */
    if (rc >= 0) memcpy(msg, tg_tensor_cdata(y), (size_t)k * sizeof *msg);
    msg[k] = rc < 0;
    int mrc = tg__mpi_check(MPI_Allreduce(MPI_IN_PLACE, msg, (int)k + 1, MPI_DOUBLE, MPI_SUM,
                                          p->d->comm), "sync_batchnorm: all-reduce");
    if (mrc >= 0 && msg[k] > 0) mrc = tg_dist_agree(p->d, rc);
    if (mrc >= 0) {
        memcpy(tg_tensor_data(y), msg, (size_t)k * sizeof *msg);
        tg_tensor_bump_version(y);
        *out = y;
    } else {
        tg_tensor_release(y);
    }
    free(msg);
    return mrc;
}

/* y_r = sum_s x_s on every rank r, so dL/dx_s = sum_r dL/dy_r. */
static int ar_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const ar_params *p = tg_op_ctx_params(ctx);
    return allreduce_diff(&gi[0], g, p->d);
}

static const tg_op_schema ar_op = {.name = "dist_allreduce_sum", .arity = 1, .amp = TG_AMP_KEEP,
                             .forward = ar_forward, .backward = ar_backward,
                             .double_backward = true};

static int allreduce_diff(tg_tensor **out, tg_tensor *x, tg_dist *d)
{
    ar_params p = {d};
    tg_tensor *in[1] = {x};
    return tg_op_call(&ar_op, out, 1, in, &p, sizeof p);
}

/* ---- the module ------------------------------------------------------------ */

typedef struct sbn_state {
    tg_dist *d;            /* borrowed */
    int64_t c;
    double eps, momentum;
} sbn_state;

/* Temporaries of one forward, released together. */
#define TMPS_MAX 32
typedef struct tmps {
    tg_tensor *t[TMPS_MAX];
    int n;
} tmps;

static tg_tensor *keep(tmps *k, tg_tensor *t)
{
    TG_ASSERT(k->n < TMPS_MAX);
    k->t[k->n++] = t;
    return t;
}
#define T(k, var, call)                                                       \
    do {                                                                      \
        var = NULL;                                                           \
        int rc_ = (call);                                                     \
        if (rc_ < 0) return rc_;                                              \
        keep((k), var);                                                       \
    } while (0)

/* The running statistics take the batch's (every rank computes the same). */
static int update_running(tg_module *m, const sbn_state *s, tg_tensor *mean, tg_tensor *var,
                          int64_t n)
{
    tg_tensor *rm = tg_module_find(m, "running_mean"), *rv = tg_module_find(m, "running_var");
    tg_tensor *nbt = tg_module_find(m, "num_batches_tracked");
    float *pm = tg_tensor_data(rm), *pv = tg_tensor_data(rv);
    const double mom = s->momentum, unbias = n > 1 ? (double)n / (double)(n - 1) : 1.0;
    for (int64_t c = 0; c < s->c; c++) {
        double mu = 0, v = 0;
        TG_TRY(tg_tensor_get_flat(mean, c, &mu));
        TG_TRY(tg_tensor_get_flat(var, c, &v));
        pm[c] = (float)((1 - mom) * pm[c] + mom * mu);
        pv[c] = (float)((1 - mom) * pv[c] + mom * v * unbias);
    }
    (*(int64_t *)tg_tensor_data(nbt))++;
    tg_tensor_bump_version(rm);
    tg_tensor_bump_version(rv);
    tg_tensor_bump_version(nbt);
    return TG_OK;
}

static bool is_half(tg_dtype dt) { return dt == TG_F16 || dt == TG_BF16; }

/* This rank's half of a training forward: the per-channel sums of x and
 * x^2 in f64, st = (S1, S2) of (2C), and xf, x in the compute dtype. */
static int local_sums(tmps *k, tg_tensor *x, tg_tensor **xf, tg_tensor **st)
{
    const int nd = tg_tensor_ndim(x);
    const tg_dtype cdt = is_half(tg_tensor_dtype(x)) ? TG_F32 : tg_tensor_dtype(x);
    int dims[TG_MAX_DIMS], nred = 0;
    for (int i = 0; i < nd; i++)
        if (i != 1) dims[nred++] = i;
    tg_tensor *x64, *x2, *s1, *s2;
    /* A half x is computed on in f32 (batch_norm's compute dtype), and its
     * gradient from both paths below meets in xf's f32, rounded once. */
    T(k, *xf, tg_to_dtype(xf, x, cdt));   /* x itself unless half */
    T(k, x64, tg_to_dtype(&x64, *xf, TG_F64));
    T(k, x2, tg_mul(&x2, x64, x64));
    T(k, s1, tg_sum_dims(&s1, x64, nred, dims, false));
    T(k, s2, tg_sum_dims(&s2, x2, nred, dims, false));
    T(k, *st, tg_cat(st, 2, (tg_tensor *[]){s1, s2}, 0));
    return TG_OK;
}

/* rc: the status of this rank's checks of x. */
static int sbn_train_forward(tg_module *m, const sbn_state *s, tmps *k, tg_tensor **y,
                             tg_tensor *x, int rc)
{
    tg_tensor *xf = NULL, *st = NULL;
    if (rc >= 0) rc = local_sums(k, x, &xf, &st);
    /* The first message carries this rank's failure with its element count
     * (n: elements per channel over all ranks; batches may differ in size),
     * so that every rank learns of a failure anywhere and returns it, before
     * any rank waits in the all-reduce of the sums. */
    int64_t counts[2] = {rc >= 0 ? tg_tensor_numel(x) / s->c : 0, rc < 0};
    TG_TRY(tg__dist_sum_i64(s->d, counts, 2));
    if (counts[1] > 0) return tg_dist_agree(s->d, rc);
    const int64_t n = counts[0];
    TG_CHECK(n > 1, TG_EINVAL, "sync_batchnorm: expected more than 1 value per channel over "
             "all ranks when training, got %lld", (long long)n);
    const int nd = tg_tensor_ndim(x);
    const tg_dtype xdt = tg_tensor_dtype(x), cdt = tg_tensor_dtype(xf);
    int64_t bshape[TG_MAX_DIMS];
    for (int i = 0; i < nd; i++) bshape[i] = i == 1 ? s->c : 1;
    tg_tensor *S, *S1, *S2, *mean, *ex2, *m2, *var, *mean_b, *var_b, *ve, *sd, *xc, *xh, *xw;
    T(k, S, allreduce_diff(&S, st, s->d));
    T(k, S1, tg_slice(&S1, S, 0, 0, s->c, 1));
    T(k, S2, tg_slice(&S2, S, 0, s->c, 2 * s->c, 1));
    T(k, mean, tg_div_scalar(&mean, S1, (double)n));
    T(k, ex2, tg_div_scalar(&ex2, S2, (double)n));
    T(k, m2, tg_mul(&m2, mean, mean));
    T(k, var, tg_sub(&var, ex2, m2));
    tg_tensor *mean_x, *var_x;   /* in the compute dtype */
    T(k, mean_x, tg_to_dtype(&mean_x, mean, cdt));
    T(k, var_x, tg_to_dtype(&var_x, var, cdt));
    T(k, mean_b, tg_reshape(&mean_b, mean_x, nd, bshape));
    T(k, var_b, tg_reshape(&var_b, var_x, nd, bshape));
    T(k, ve, tg_add_scalar(&ve, var_b, s->eps));
    T(k, sd, tg_sqrt(&sd, ve));
    T(k, xc, tg_sub(&xc, xf, mean_b));
    T(k, xh, tg_div(&xh, xc, sd));
    tg_tensor *w_b, *b_b;
    T(k, w_b, tg_reshape(&w_b, tg_module_find(m, "weight"), nd, bshape));
    T(k, b_b, tg_reshape(&b_b, tg_module_find(m, "bias"), nd, bshape));
    T(k, xw, tg_mul(&xw, xh, w_b));
    /* The output dtype is batch_norm's: x's when x is half inside an
     * autocast scope (the activations after it stay half), otherwise the
     * promotion of x, weight and bias. */
    if (is_half(xdt) && tg_autocast_active(NULL)) {
        tg_tensor *yc;
        T(k, yc, tg_add(&yc, xw, b_b));
        TG_TRY(tg_to_dtype(y, yc, xdt));
    } else {
        TG_TRY(tg_add(y, xw, b_b));
    }
    tg_no_grad_begin();
    rc = update_running(m, s, mean, var, n);
    tg_no_grad_end();
    return rc;
}

/* The checks a training forward agrees on before any rank sends its sums. */
static int check_input(const sbn_state *s, const tg_tensor *x)
{
    TG_CHECK(x != NULL, TG_EINVAL, "sync_batchnorm: x must not be NULL");
    TG_CHECK(tg_tensor_ndim(x) >= 2 && tg_tensor_dim(x, 1) == s->c, TG_ESHAPE,
             "sync_batchnorm: input must be (N, C, ...) with C = %lld", (long long)s->c);
    TG_CHECK(tg_dtype_is_float(tg_tensor_dtype(x)), TG_EDTYPE,
             "sync_batchnorm: input has dtype %s; float dtypes only",
             tg_dtype_name(tg_tensor_dtype(x)));
    return TG_OK;
}

static int sbn_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const sbn_state *s = tg_module_state(m);
    int rc = check_input(s, x);
    tg_tensor *w = tg_module_find(m, "weight"), *b = tg_module_find(m, "bias");
    if (!tg_module_is_training(m)) {
        TG_TRY(rc);
        return tg_batch_norm(y, x, tg_module_find(m, "running_mean"),
                             tg_module_find(m, "running_var"), w, b, false, 0.0, s->eps);
    }
    tmps k = {.n = 0};
    rc = sbn_train_forward(m, s, &k, y, x, rc);
    for (int i = 0; i < k.n; i++) tg_tensor_release(k.t[i]);
    return rc;
}

static const tg_module_vtable sbn_vt = {
    .type_name = "SyncBatchNorm", .forward = sbn_forward, .release = free,
    .state_size = sizeof(sbn_state), .zero_if_missing = "num_batches_tracked"};

/* The five state tensors, in BatchNorm's order. */
static const char *const sbn_names[5] = {"weight", "bias", "running_mean", "running_var",
                                         "num_batches_tracked"};

/* A SyncBatchNorm holding from[0..5) (retained: shared with their owner), or
 * fresh tensors (weight 1, bias 0, mean 0, var 1, count 0) when from is
 * NULL. */
static int sbn_make(tg_module **out, tg_dist *d, int64_t c, double eps, double momentum,
                    tg_tensor *const *from)
{
    sbn_state *s = tg__malloc(sizeof *s);
    if (!s) return TG_ENOMEM;
    *s = (sbn_state){.d = d, .c = c, .eps = eps, .momentum = momentum};
    tg_module *m = NULL;
    int rc = tg_module_new(&m, &sbn_vt, s);
    if (rc < 0) {
        free(s);
        return rc;
    }
    static const double fill[5] = {1.0, 0.0, 0.0, 1.0, 0.0};
    for (int i = 0; i < 5 && rc >= 0; i++) {
        tg_tensor *t = NULL;
        if (from) t = tg_tensor_retain(from[i]);
        else if (i == 4) rc = tg_tensor_zeros(&t, TG_I64, 0, NULL);
        else rc = tg_tensor_full(&t, TG_F32, 1, &c, fill[i]);
        if (rc >= 0)
            rc = i < 2 ? tg_module_add_parameter(m, sbn_names[i], t)
                       : tg_module_add_buffer(m, sbn_names[i], t);
    }
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}

int tg_dist_sync_batchnorm_new(tg_module **out, tg_dist *d, int64_t num_features, double eps,
                               double momentum)
{
    TG_CHECK(out != NULL && d != NULL, TG_EINVAL,
             "dist_sync_batchnorm_new: out and d must not be NULL");
    TG_CHECK(num_features > 0, TG_EINVAL,
             "dist_sync_batchnorm_new: num_features=%lld must be > 0", (long long)num_features);
    TG_CHECK(isfinite(eps) && eps >= 0, TG_EINVAL,
             "dist_sync_batchnorm_new: eps=%g must be >= 0", eps);
    TG_CHECK(momentum >= 0 && momentum <= 1, TG_EINVAL,
             "dist_sync_batchnorm_new: momentum=%g must be in [0, 1]", momentum);
    return sbn_make(out, d, num_features, eps, momentum, NULL);
}

int tg_dist_sync_batchnorm_params(const tg_module *m, double *eps, double *momentum)
{
    TG_CHECK(m != NULL, TG_EINVAL, "dist_sync_batchnorm_params: m must not be NULL");
    TG_CHECK(m->vt == &sbn_vt, TG_EINVAL,
             "dist_sync_batchnorm_params: m is a %s module, not SyncBatchNorm",
             tg_module_type_name(m));
    const sbn_state *s = m->state;
    if (eps) *eps = s->eps;
    if (momentum) *momentum = s->momentum;
    return TG_OK;
}

/* ---- converting a model's BatchNorms ---------------------------------------- */

/* A BatchNorm to replace: parent's child number index, and its successor. */
typedef struct bn_site {
    tg_module *parent;
    int index;
    tg_module *sync;
} bn_site;

typedef struct bn_sites {
    bn_site *v;
    int n, cap;
} bn_sites;

/* Whether bn (named name) can become a SyncBatchNorm: affine, with running
 * statistics, momentum in [0, 1], f32 state. */
static int check_bn(const tg_module *bn, const char *name)
{
    double eps = 0, momentum = 0;
    bool affine = false, track = false;
    TG_TRY(tg_nn_batchnorm_params(bn, NULL, &eps, &momentum, &affine, &track));
    TG_CHECK(affine && track, TG_EINVAL,
             "dist_convert_sync_batchnorm: %s has affine=%d, track_running_stats=%d; "
             "SyncBatchNorm needs both", name, affine, track);
    TG_CHECK(momentum >= 0 && momentum <= 1, TG_EINVAL,
             "dist_convert_sync_batchnorm: %s has momentum=%g; SyncBatchNorm needs one in "
             "[0, 1] (no cumulative average)", name, momentum);
    for (int i = 0; i < 4; i++) {
        const tg_tensor *t = tg_module_find(bn, sbn_names[i]);
        TG_CHECK(tg_tensor_dtype(t) == TG_F32, TG_EDTYPE,
                 "dist_convert_sync_batchnorm: %s.%s is %s; SyncBatchNorm keeps f32 state",
                 name, sbn_names[i], tg_dtype_name(tg_tensor_dtype(t)));
    }
    return TG_OK;
}

/* Appends every BatchNorm below m (named prefix) to out, pre-order, after
 * checking it. */
static int find_bns(tg_module *m, const char *prefix, bn_sites *out)
{
    for (int i = 0; i < tg_module_child_count(m); i++) {
        tg_module *c = tg_module_child_at(m, i);
        char name[TG_MODULE_NAME_MAX];
        snprintf(name, sizeof name, "%s%s%s", prefix, prefix[0] ? "." : "",
                 tg_module_child_name_at(m, i));
        if (c->vt != &tg__nn_batchnorm_vt) {
            TG_TRY(find_bns(c, name, out));
            continue;
        }
        TG_TRY(check_bn(c, name));
        if (out->n == out->cap) {
            int cap = out->cap ? 2 * out->cap : 8;
            bn_site *v = realloc(out->v, (size_t)cap * sizeof *v);
            if (!v) return tg__error(TG_ENOMEM, "dist_convert_sync_batchnorm: out of memory");
            out->v = v;
            out->cap = cap;
        }
        out->v[out->n++] = (bn_site){.parent = m, .index = i};
    }
    return TG_OK;
}

/* The successor of site's BatchNorm: same tensors, options and modes. */
static int make_successor(bn_site *site, tg_dist *d)
{
    tg_module *bn = tg_module_child_at(site->parent, site->index);
    double eps = 0, momentum = 0;
    TG_TRY(tg_nn_batchnorm_params(bn, NULL, &eps, &momentum, NULL, NULL));
    tg_tensor *from[5];
    for (int i = 0; i < 5; i++) from[i] = tg_module_find(bn, sbn_names[i]);
    TG_TRY(sbn_make(&site->sync, d, tg_tensor_numel(from[0]), eps, momentum, from));
    tg_module_train(site->sync, tg_module_is_training(bn));
    tg_module_autocast_weights(site->sync, tg_module_is_autocast_weights(bn));
    return TG_OK;
}

int tg_dist_convert_sync_batchnorm(tg_dist *d, tg_module *m, int *n_converted)
{
    TG_CHECK(d != NULL && m != NULL, TG_EINVAL,
             "dist_convert_sync_batchnorm: d and m must not be NULL");
    if (m->vt == &tg__nn_batchnorm_vt)
        return tg__error(TG_EINVAL, "dist_convert_sync_batchnorm: m is itself a BatchNorm; "
                         "convert the module that holds it, or build it with "
                         "tg_dist_sync_batchnorm_new");
    bn_sites sites = {0};
    int rc = find_bns(m, "", &sites);
    for (int i = 0; i < sites.n && rc >= 0; i++) rc = make_successor(&sites.v[i], d);
    for (int i = 0; i < sites.n; i++) {
        if (rc < 0) tg_module_release(sites.v[i].sync);   /* nothing was changed */
        else tg__module_replace_child(sites.v[i].parent, sites.v[i].index, sites.v[i].sync);
    }
    if (rc >= 0 && n_converted) *n_converted = sites.n;
    free(sites.v);
    return rc;
}
