/* DDP with the gradients all-reduced in bf16 or f16 (tg_ddp_opts.compress,
 * PyTorch's bf16_compress_hook / fp16_compress_hook) on the ranks of
 * test_dist: the .grad every rank gets is, bit for bit, the rule
 * f32(h(h(g0 / 2) + h(g1 / 2))) of the two ranks' local gradients (the sum
 * in f32, rounded once), for every bucket layout, with and without
 * overlap, and with a rank whose backward reached nothing; compress=f32 is
 * the plain f32 mean; training with compression stays near training
 * without; f64 gradients are compressed as well, within the half's
 * rounding of the uncompressed f64 mean; and a bad compress is refused on
 * every rank.
 * Run by tests/dist.c's main.
 *
 * The model: Linear(5, 16) - tanh - Linear(16, 16) - tanh - Linear(16, 2),
 * MSE against a fixed target, on a global batch of 2B rows; rank r trains
 * on rows [r B, (r + 1) B).  Every rank can run both ranks' rows, so each
 * computes both local gradients itself. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dist_test.h"

enum { B = 4, IN = DIST_IN, OUT = DIST_OUT };

/* The .grad of p[0..n) concatenated (f32; zeros for a NULL .grad);
 * *total: the element count.  NULL when memory is short. */
static float *grads_flat(tg_tensor *const *p, int n, int64_t *total)
{
    *total = 0;
    for (int i = 0; i < n; i++) *total += tg_tensor_numel(p[i]);
    float *out = calloc((size_t)*total, sizeof *out), *q = out;
    for (int i = 0; i < n && out; i++) {
        const tg_tensor *g = tg_tensor_grad(p[i]);
        if (g) memcpy(q, tg_tensor_cdata(g), (size_t)tg_tensor_numel(g) * sizeof *q);
        q += tg_tensor_numel(p[i]);
    }
    return out;
}

/* Rank r's local gradient (rows [r B, (r + 1) B)) of model `seed`, from a
 * model without a tg_ddp; NULL on failure. */
static float *local_grads(uint64_t seed, int r, int64_t *total)
{
    tg_module *m = dist_mlp(seed, IN, OUT);
    tg_tensor **p = NULL;
    int n = 0;
    float *g = NULL;
    if (tg_module_parameters(m, &p, &n) >= 0 && dist_forward_backward(m, 0, (int64_t)r * B, B) >= 0)
        g = grads_flat(p, n, total);
    free(p);
    tg_module_release(m);
    return g;
}

static uint16_t to_half(tg_dtype h, float f)
{
    return h == TG_BF16 ? tg_f32_to_bf16(f) : tg_f32_to_f16(f);
}

static float from_half(tg_dtype h, uint16_t v)
{
    return h == TG_BF16 ? tg_bf16_to_f32(v) : tg_f16_to_f32(v);
}

/* PyTorch's compress hook on two ranks: each gradient divided by 2 and
 * rounded to h (nearest even), the halves added in f32 and the sum rounded
 * to h once, widened. */
static float rule(tg_dtype h, float g0, float g1)
{
    const float a = from_half(h, to_half(h, g0 / 2)), b = from_half(h, to_half(h, g1 / 2));
    return from_half(h, to_half(h, a + b));
}

/* One DDP step of model `seed` with options o: this rank's rows, or no
 * backward at all on rank 1 with skip1 (its parameters then contribute
 * zeros, having no .grad).  Returns the flat .grad after tg_ddp_finish,
 * and the tg_ddp's stats. */
static float *ddp_grads(uint64_t seed, const tg_ddp_opts *o, bool skip1, int64_t *total,
                        tg_ddp_stats *st)
{
    const int rank = tg_dist_rank(g_dist);
    tg_module *m = dist_mlp(seed, IN, OUT);
    tg_tensor **p = NULL;
    int n = 0;
    tg_ddp *ddp = NULL;
    float *g = NULL;
    int rc = tg_module_parameters(m, &p, &n);
    if (rc >= 0) rc = tg_ddp_new(&ddp, g_dist, n, p, o);
    if (rc >= 0) rc = tg_ddp_prepare(ddp);
    if (rc >= 0 && !(skip1 && rank == 1)) rc = dist_forward_backward(m, 0, (int64_t)rank * B, B);
    if (rc >= 0) rc = tg_ddp_finish(ddp);
    if (rc >= 0) rc = tg_ddp_get_stats(ddp, st);
    if (rc >= 0) g = grads_flat(p, n, total);
    CHECK(rc >= 0, "ddp step: %s", tg_error_message());
    tg_ddp_free(ddp);
    free(p);
    tg_module_release(m);
    return g;
}

void ddp_compressed_grads_follow_the_half_rule_bit_for_bit(void)
{
    if (tg_dist_size(g_dist) != 2) return;   /* the rule written for two ranks */
    int64_t total = 0, t1 = 0;
    float *g0 = local_grads(3, 0, &total), *g1 = local_grads(3, 1, &t1);
    CHECK(g0 && g1 && total == t1, "local gradients: %s", tg_error_message());
    float *want = malloc((size_t)total * sizeof *want);
    const size_t caps[] = {1, 64, 300, 1100, 2000, (size_t)1 << 30};
    const tg_dtype halves[2] = {TG_BF16, TG_F16};
    for (int hi = 0; hi < 2 && g0 && g1 && want; hi++) {
        const tg_dtype h = halves[hi];
        int64_t rounded = 0;   /* elements where the rule differs from the f32 mean */
        for (int skip1 = 0; skip1 < 2; skip1++) {
            for (int64_t k = 0; k < total; k++) {
                want[k] = rule(h, g0[k], skip1 ? 0.0f : g1[k]);
                rounded += want[k] != (g0[k] + (skip1 ? 0.0f : g1[k])) / 2;
            }
            for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
                for (int overlap = 0; overlap < 2; overlap++) {
                    tg_ddp_opts o = {.bucket_cap_bytes = caps[c], .overlap = overlap,
                                     .compress = h};
                    tg_ddp_stats st = {0};
                    int64_t n = 0;
                    float *got = ddp_grads(3, &o, skip1, &n, &st);
                    int64_t bad = -1;
                    for (int64_t k = 0; got && n == total && k < n && bad < 0; k++)
                        if (memcmp(&got[k], &want[k], sizeof *got) != 0) bad = k;
                    CHECK(got && n == total && bad < 0,
                          "%s, cap %zu, overlap %d, rank 1 %s: grad[%lld] = %a, the rule "
                          "gives %a", tg_dtype_name(h), caps[c], overlap,
                          skip1 ? "without backward" : "with backward", (long long)bad,
                          got && bad >= 0 ? (double)got[bad] : 0.0,
                          bad >= 0 ? (double)want[bad] : 0.0);
                    CHECK(st.bytes_per_step == total * 2, "%s: %lld bytes per step",
                          tg_dtype_name(h), (long long)st.bytes_per_step);
                    if (caps[c] == 1) CHECK(st.n_buckets == 6, "%d buckets", st.n_buckets);
                    if (overlap && st.n_buckets > 1 && !skip1)
                        CHECK(st.buckets_overlapped >= 1, "no bucket started during backward");
                    free(got);
                }
            }
        }
        /* the rule rounds: it must differ from the f32 mean somewhere */
        CHECK(rounded > 0, "%s: the rule never differs from the f32 mean", tg_dtype_name(h));
        if (tg_dist_rank(g_dist) == 0)
            printf("  %s: %lld of %lld elements differ from the f32 mean\n", tg_dtype_name(h),
                   (long long)rounded, (long long)(2 * total));
    }
    free(want);
    free(g0);
    free(g1);
}

void ddp_compress_f32_is_the_f32_mean_bit_for_bit(void)
{
    if (tg_dist_size(g_dist) != 2) return;
    int64_t total = 0, t1 = 0;
    float *g0 = local_grads(3, 0, &total), *g1 = local_grads(3, 1, &t1);
    CHECK(g0 && g1 && total == t1, "local gradients: %s", tg_error_message());
    /* the defaults (TG_DDP_OPTS_INIT, and NULL), and a zeroed struct */
    for (int v = 0; v < 3 && g0 && g1; v++) {
        tg_ddp_opts init = TG_DDP_OPTS_INIT, zeroed = {.bucket_cap_bytes = 64};
        const tg_ddp_opts *o = v == 0 ? &init : v == 1 ? NULL : &zeroed;
        tg_ddp_stats st = {0};
        int64_t n = 0;
        float *got = ddp_grads(3, o, false, &n, &st);
        int64_t bad = -1;
        for (int64_t k = 0; got && n == total && k < n && bad < 0; k++) {
            const float want = (g0[k] + g1[k]) / 2;
            if (memcmp(&got[k], &want, sizeof want) != 0) bad = k;
        }
        CHECK(got && n == total && bad < 0, "options %d: grad[%lld] is not the f32 mean", v,
              (long long)bad);
        CHECK(st.bytes_per_step == total * 4, "options %d: %lld bytes per step", v,
              (long long)st.bytes_per_step);
        free(got);
    }
    free(g0);
    free(g1);
}

/* The largest |a - b| over the parameters of two models of one layout. */
static double max_diff(tg_tensor *const *a, tg_tensor *const *b, int n)
{
    double worst = 0;
    for (int i = 0; i < n; i++)
        for (int64_t k = 0; k < tg_tensor_numel(a[i]); k++)
            worst = fmax(worst, fabs((double)((const float *)tg_tensor_cdata(a[i]))[k] -
                                     ((const float *)tg_tensor_cdata(b[i]))[k]));
    return worst;
}

/* STEPS of SGD (lr 0.1) on m with compress = h, on this rank's rows (a
 * tg_ddp_new_module, which first gives every rank rank 0's m). */
enum { STEPS = 20 };

static int train(tg_module *m, tg_dtype h)
{
    tg_tensor **p = NULL;
    int n = 0;
    tg_ddp *ddp = NULL;
    tg_optimizer *opt = NULL;
    tg_ddp_opts o = TG_DDP_OPTS_INIT;
    o.compress = h;
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.lr = 0.1;
    int rc = tg_module_parameters(m, &p, &n);
    if (rc >= 0) rc = tg_ddp_new_module(&ddp, g_dist, m, &o);
    if (rc >= 0) rc = tg_sgd_new(&opt, n, p, &so);
    for (int s = 0; rc >= 0 && s < STEPS; s++) {
        tg_optimizer_zero_grad(opt);
        rc = tg_ddp_prepare(ddp);
        if (rc >= 0) rc = dist_forward_backward(m, s, (int64_t)tg_dist_rank(g_dist) * B, B);
        if (rc < 0) tg_dist_abort(g_dist, rc);   /* the other rank waits in finish */
        rc = tg_ddp_finish(ddp);
        if (rc >= 0) rc = tg_optimizer_step(opt);
    }
    tg_optimizer_free(opt);
    tg_ddp_free(ddp);
    free(p);
    return rc;
}

/* Loose bounds on the drift from the f32 run of SGD's parameters (of
 * order 0.1 to 1) after STEPS steps on gradients rounded to 8 (bf16) or 11
 * (f16) significand bits: measured 2.5e-4 and 1.5e-5; the gradients not
 * divided by the number of ranks drift by 2.3e-2. */
#define BF16_BOUND 2e-3
#define F16_BOUND 2e-4

void ddp_compressed_training_stays_close_to_uncompressed(void)
{
    tg_module *ref = dist_mlp(5, IN, OUT);
    tg_tensor **pr = NULL;
    int n = 0;
    OK(train(ref, TG_F32));
    OK(tg_module_parameters(ref, &pr, &n));
    const tg_dtype halves[2] = {TG_BF16, TG_F16};
    for (int hi = 0; hi < 2; hi++) {
        tg_module *m = dist_mlp(5, IN, OUT);
        tg_tensor **p = NULL;
        OK(train(m, halves[hi]));
        OK(tg_module_parameters(m, &p, &n));
        const double diff = max_diff(p, pr, n), bound = hi == 0 ? BF16_BOUND : F16_BOUND;
        CHECK(diff <= bound && diff > 0, "%s: max |p - p_f32| = %g after %d SGD steps, "
              "not in (0, %g]", tg_dtype_name(halves[hi]), diff, STEPS, bound);
        if (tg_dist_rank(g_dist) == 0)
            printf("  %s: max |p - p_f32| = %.3g after %d SGD steps\n",
                   tg_dtype_name(halves[hi]), diff, STEPS);
        for (int i = 0; i < n; i++) {   /* the same parameters on every rank */
            tg_tensor *c = NULL;
            OK(tg_tensor_clone(&c, p[i]));
            OK(tg_dist_broadcast_tensor(g_dist, c, 0));
            CHECK(same_bits(c, p[i]), "%s: parameter %d differs from rank 0's",
                  tg_dtype_name(halves[hi]), i);
            tg_tensor_release(c);
        }
        free(p);
        tg_module_release(m);
    }
    free(pr);
    tg_module_release(ref);
}

/* ddp_new with compress = c (on this rank) over w: the status, and *msg
 * set to whether the message contains want. */
static int new_with(tg_tensor *w, tg_dtype c, const char *want, bool *msg)
{
    tg_ddp_opts o = TG_DDP_OPTS_INIT;
    o.compress = c;
    tg_ddp *ddp = NULL;
    int rc = tg_ddp_new(&ddp, g_dist, 1, &w, &o);
    *msg = strstr(tg_error_message(), want) != NULL;
    if (rc < 0 && ddp) rc = TG_OK;   /* an error must leave no tg_ddp */
    tg_ddp_free(ddp);
    return rc;
}

void ddp_compress_refuses_other_dtypes(void)
{
    const int rank = tg_dist_rank(g_dist);
    tg_tensor *w = NULL, *w64 = NULL;
    bool msg = false;
    OK(tg_tensor_zeros(&w, TG_F32, 1, (int64_t[]){8}));
    OK(tg_tensor_zeros(&w64, TG_F64, 1, (int64_t[]){8}));
    OK(tg_tensor_set_requires_grad(w, true));
    OK(tg_tensor_set_requires_grad(w64, true));
    /* compress names the dtype a gradient travels in: only f32 (off), bf16, f16 */
    const tg_dtype bad[3] = {TG_I8, TG_F64, (tg_dtype)99};
    const char *names[3] = {"compress=i8 (4)", "compress=f64 (1)", "compress=? (99)"};
    for (int i = 0; i < 3; i++) {
        int rc = new_with(w, bad[i], names[i], &msg);
        CHECK(rc == TG_EINVAL && msg, "compress %d: %s: %s", (int)bad[i], tg_status_name(rc),
              tg_error_message());
    }
    /* on rank 1 only: every rank returns rank 1's error */
    int rc = new_with(w, rank == 1 ? TG_I8 : TG_BF16, "rank 1: ddp_new: compress=i8", &msg);
    CHECK(rc == TG_EINVAL && msg, "compress i8 on rank 1: %s: %s", tg_status_name(rc),
          tg_error_message());
    /* ranks compressing differently would reduce other bytes with other sums */
    rc = new_with(w, rank == 1 ? TG_F16 : TG_BF16, "compress differs", &msg);
    CHECK(rc == TG_EINVAL && msg, "compress differing: %s: %s", tg_status_name(rc),
          tg_error_message());
    /* f64 parameters are taken with every compress, as torch's hooks do */
    OK(new_with(w64, TG_BF16, "", &msg));
    OK(new_with(w64, TG_F16, "", &msg));
    OK(new_with(w64, TG_F32, "", &msg));
    OK(new_with(w, TG_BF16, "", &msg));
    tg_tensor_release(w);
    tg_tensor_release(w64);
}

/* Rank r's gradient of element k of an f64 parameter: of order 0.1 to 10,
 * of both signs, with bits below any half's precision. */
static double grad64(int r, int64_t k)
{
    return (k % 3 == 1 ? -1 : 1) * (0.1 + 0.37 * (double)((k * 7 + r * 5) % 23)) *
           (1 + 1e-9 * (double)(r + 1));
}

enum { N64 = 41 };   /* elements of the f64 parameter */

/* One DDP step over an f64 parameter w (N64) and an f32 one v (3) with
 * compress = c, loss = sum(w * grad64(rank)) + sum(v): w's .grad into out
 * (N64), the stats into st. */
static int step64(tg_dtype c, size_t cap, double *out, tg_ddp_stats *st)
{
    const int rank = tg_dist_rank(g_dist);
    double coef[N64];
    for (int64_t k = 0; k < N64; k++) coef[k] = grad64(rank, k);
    tg_tensor *w = NULL, *v = NULL, *cw = NULL, *wc = NULL, *sw = NULL, *sv = NULL;
    tg_ddp *ddp = NULL;
    tg_ddp_opts o = TG_DDP_OPTS_INIT;
    o.compress = c, o.bucket_cap_bytes = cap;
    int rc = tg_tensor_full(&w, TG_F64, 1, (int64_t[]){N64}, 0.5);
    if (rc >= 0) rc = tg_tensor_full(&v, TG_F32, 1, (int64_t[]){3}, 0.5);
    if (rc >= 0) rc = tg_tensor_set_requires_grad(w, true);
    if (rc >= 0) rc = tg_tensor_set_requires_grad(v, true);
    if (rc >= 0) rc = tg_tensor_from_data(&cw, TG_F64, 1, (int64_t[]){N64}, coef);
    if (rc >= 0) rc = tg_ddp_new(&ddp, g_dist, 2, (tg_tensor *[]){w, v}, &o);
    if (rc >= 0) rc = tg_ddp_prepare(ddp);
    if (rc >= 0) rc = tg_mul(&wc, w, cw);
    if (rc >= 0) rc = tg_sum(&sw, wc);
    if (rc >= 0) rc = tg_sum(&sv, v);
    if (rc >= 0) rc = tg_backward(sw, NULL, NULL);
    if (rc >= 0) rc = tg_backward(sv, NULL, NULL);
    if (rc < 0) tg_dist_abort(g_dist, rc);   /* the others wait in finish */
    rc = tg_ddp_finish(ddp);
    if (rc >= 0) rc = tg_ddp_get_stats(ddp, st);
    if (rc >= 0) memcpy(out, tg_tensor_cdata(tg_tensor_grad(w)), sizeof(double) * N64);
    tg_ddp_free(ddp);
    tg_tensor_release(sw);
    tg_tensor_release(sv);
    tg_tensor_release(wc);
    tg_tensor_release(cw);
    tg_tensor_release(w);
    tg_tensor_release(v);
    return rc;
}

void ddp_compress_takes_f64_gradients_within_half_s_bound(void)
{
    const int world = tg_dist_size(g_dist);
    double plain[N64], got[N64];
    tg_ddp_stats st = {0};
    OK(step64(TG_F32, (size_t)1 << 20, plain, &st));
    const tg_dtype halves[2] = {TG_BF16, TG_F16};
    const double unit[2] = {0x1p-8, 0x1p-11};   /* unit roundoff of bf16, f16 */
    for (int hi = 0; hi < 2; hi++) {
        const tg_dtype h = halves[hi];
        for (int c = 0; c < 2; c++) {
            OK(step64(h, c ? 64 : (size_t)1 << 20, got, &st));
            CHECK(st.bytes_per_step == (N64 + 3) * 2, "%s: %lld bytes per step (2 a value)",
                  tg_dtype_name(h), (long long)st.bytes_per_step);
            int rounded = 0;
            for (int64_t k = 0; k < N64; k++) {
                /* each g_r / N rounded (u each), then N - 1 rounded sums (u of
                 * the partial sums, each at most S (1 + u)): (N + 1) u S */
                double S = 0, mean = 0;
                for (int r = 0; r < world; r++) {
                    S += fabs(grad64(r, k)) / world;
                    mean += grad64(r, k);
                }
                mean /= world;
                const double bound = (world + 1) * unit[hi] * S;
                CHECK(fabs(got[k] - plain[k]) <= bound && fabs(plain[k] - mean) <= 1e-12 * S,
                      "%s cap %d: grad[%lld] = %.17g, uncompressed %.17g, bound %g",
                      tg_dtype_name(h), c, (long long)k, got[k], plain[k], bound);
                rounded += got[k] != plain[k];
                if (world == 2) {   /* the rule of two ranks, through f32, bit for bit */
                    const float a = from_half(h, to_half(h, (float)(grad64(0, k) / 2)));
                    const float b = from_half(h, to_half(h, (float)(grad64(1, k) / 2)));
                    const double want = from_half(h, to_half(h, a + b));
                    CHECK(memcmp(&got[k], &want, sizeof want) == 0, "%s: grad[%lld] = %a, the "
                          "rule gives %a", tg_dtype_name(h), (long long)k, got[k], want);
                }
            }
            CHECK(rounded > N64 / 2, "%s: only %d of %d values rounded", tg_dtype_name(h),
                  rounded, N64);
        }
    }
}
