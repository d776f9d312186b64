/* tests/test_loss.c - losses against PyTorch's values and gradients
 * (tests/golden/optim/loss.safetensors, scripts/make_optim_goldens.py),
 * gradcheck/gradgradcheck in f64, stability at |x| = 1000, AMP and errors. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/autograd.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"
#include "tapegrad/registry.h"
#include "tapegrad/safetensors.h"

typedef int (*loss_fn)(tg_tensor **, tg_tensor *, tg_tensor *, tg_reduction);

static const struct {
    const char *name;
    loss_fn fn;
} LOSSES[] = {{"mse", tg_mse_loss}, {"l1", tg_l1_loss}, {"bce", tg_bce_with_logits},
              {"ce", tg_cross_entropy}};
static const char *const RED_NAMES[] = {"mean", "sum", "none"};
static const tg_reduction REDS[] = {TG_REDUCTION_MEAN, TG_REDUCTION_SUM, TG_REDUCTION_NONE};

static tg_tensor *golden(const tg_st_file *f, const char *a, const char *b, const char *c)
{
    char k[128];
    snprintf(k, sizeof k, "%s%s%s%s%s", a, b ? "." : "", b ? b : "", c ? "." : "", c ? c : "");
    tg_tensor *t = tg_st_get(f, k);
    cr_assert(t != NULL, "golden key %s missing", k);
    return t;
}

/* Every element of got equals want within tol (relative for large values). */
static void assert_close(const tg_tensor *got, const tg_tensor *want, double tol, const char *what)
{
    cr_assert(tg_tensor_same_shape(got, want), "%s: shape", what);
    int64_t n = tg_tensor_numel(want);
    for (int64_t i = 0; i < n; i++) {
        double g, w;
        tg_tensor_get_flat(got, i, &g);
        tg_tensor_get_flat(want, i, &w);
        cr_assert(epsilon_eq(dbl, g, w, tol * (1 + fabs(w))), "%s[%lld]: %.17g vs %.17g", what,
                  (long long)i, g, w);
    }
}

static tg_tensor *leaf_copy(const tg_tensor *t, bool grad)
{
    tg_tensor *c = NULL;
    cr_assert(eq(int, tg_tensor_clone(&c, t), TG_OK));
    if (grad) cr_assert(eq(int, tg_tensor_set_requires_grad(c, true), TG_OK));
    return c;
}

Test(loss, values_and_gradients_match_pytorch)
{
    tg_st_file *f = th_golden_load("optim/loss.safetensors");
    for (size_t l = 0; l < sizeof LOSSES / sizeof *LOSSES; l++) {
        const char *ln = LOSSES[l].name;
        bool ce = strcmp(ln, "ce") == 0;
        for (int r = 0; r < 3; r++) {
            const char *rn = RED_NAMES[r];
            tg_tensor *x = leaf_copy(golden(f, ln, "input", NULL), true);
            tg_tensor *t = leaf_copy(golden(f, ln, "target", NULL), !ce);
            tg_tensor *v = NULL;
            cr_assert(eq(int, LOSSES[l].fn(&v, x, t, REDS[r]), TG_OK), "%s", tg_error_message());
            char what[64];
            snprintf(what, sizeof what, "%s.%s.value", ln, rn);
            assert_close(v, golden(f, ln, rn, "value"), 1e-12, what);
            cr_assert(eq(int, tg_backward(v, golden(f, ln, rn, "gout"), NULL), TG_OK), "%s",
                      tg_error_message());
            snprintf(what, sizeof what, "%s.%s.grad_input", ln, rn);
            assert_close(tg_tensor_grad(x), golden(f, ln, rn, "grad_input"), 1e-12, what);
            if (!ce) {
                snprintf(what, sizeof what, "%s.%s.grad_target", ln, rn);
                assert_close(tg_tensor_grad(t), golden(f, ln, rn, "grad_target"), 1e-12, what);
            }
            tg_tensor_release(v);
            tg_tensor_release(x);
            tg_tensor_release(t);
        }
    }
    tg_st_free(f);
}

/* As assert_close, but NaN must meet NaN and an infinity the same infinity. */
static void assert_close_nonfinite(const tg_tensor *got, const tg_tensor *want, double tol,
                                   const char *what)
{
    cr_assert(tg_tensor_same_shape(got, want), "%s: shape", what);
    for (int64_t i = 0, n = tg_tensor_numel(want); i < n; i++) {
        double g, w;
        tg_tensor_get_flat(got, i, &g);
        tg_tensor_get_flat(want, i, &w);
        bool ok = isnan(w) ? isnan(g) : isinf(w) ? g == w : fabs(g - w) <= tol * (1 + fabs(w));
        cr_assert(ok, "%s[%lld]: %.17g vs PyTorch's %.17g", what, (long long)i, g, w);
    }
}

/* Runs golden case name (bce_inf or ce_inf: reduction none, gout ones) in
 * f64 and f32 against PyTorch's values and gradients, inf and NaN included. */
static void check_infinite_case(const char *name, bool ce)
{
    tg_st_file *f = th_golden_load("optim/loss.safetensors");
    const tg_dtype dts[2] = {TG_F64, TG_F32};
    for (int d = 0; d < 2; d++) {
        tg_tensor *x = NULL, *t = NULL, *v = NULL, *ones = NULL;
        cr_assert(eq(int, tg_tensor_to_dtype(&x, golden(f, name, "input", NULL), dts[d]), TG_OK));
        cr_assert(eq(int, tg_tensor_to_dtype(&t, golden(f, name, "target", NULL), ce ? TG_I64 : dts[d]),
                     TG_OK));
        tg_tensor_set_requires_grad(x, true);
        if (!ce) tg_tensor_set_requires_grad(t, true);
        int rc = ce ? tg_cross_entropy(&v, x, t, TG_REDUCTION_NONE)
                    : tg_bce_with_logits(&v, x, t, TG_REDUCTION_NONE);
        cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
        tg_tensor_full(&ones, dts[d], tg_tensor_ndim(v), tg_tensor_shape(v), 1.0);
        cr_assert(eq(int, tg_backward(v, ones, NULL), TG_OK), "%s", tg_error_message());
        char what[64];
        double tol = d == 0 ? 1e-12 : 1e-6;
        snprintf(what, sizeof what, "%s %s value", name, tg_dtype_name(dts[d]));
        assert_close_nonfinite(v, golden(f, name, "none", "value"), tol, what);
        snprintf(what, sizeof what, "%s %s grad_input", name, tg_dtype_name(dts[d]));
        assert_close_nonfinite(tg_tensor_grad(x), golden(f, name, "none", "grad_input"), tol, what);
        if (!ce) {
            snprintf(what, sizeof what, "%s %s grad_target", name, tg_dtype_name(dts[d]));
            assert_close_nonfinite(tg_tensor_grad(t), golden(f, name, "none", "grad_target"), tol,
                                   what);
        }
        tg_tensor_release(ones);
        tg_tensor_release(v);
        tg_tensor_release(x);
        tg_tensor_release(t);
    }
    tg_st_free(f);
}

/* x = +inf gives (1 - t) x, inf or NaN, not inf - inf = NaN for every t;
 * x = -inf gives NaN, as PyTorch's formula does. */
Test(loss, bce_at_infinite_logits_gives_pytorch_values) { check_infinite_case("bce_inf", false); }

/* A row holding +inf is NaN throughout (value and every gradient entry), as
 * PyTorch's log_softmax makes it, whatever the target; a -inf logit is a
 * class of probability 0 (loss inf when it is the target). */
Test(loss, cross_entropy_with_an_infinite_logit_gives_pytorch_values)
{
    check_infinite_case("ce_inf", true);
}

/* mse in f32 against a naive loop over the same numbers. */
Test(loss, mse_f32_matches_naive_loop)
{
    float xs[6] = {0.5f, -1.25f, 2.f, 3.5f, 0.f, -0.75f}, ts[6] = {1.f, 1.f, -2.f, 3.f, 0.25f, 0.f};
    tg_tensor *x = NULL, *t = NULL, *v = NULL;
    int64_t shape[2] = {2, 3};
    tg_tensor_from_data(&x, TG_F32, 2, shape, xs);
    tg_tensor_from_data(&t, TG_F32, 2, shape, ts);
    double sum = 0;
    for (int i = 0; i < 6; i++) sum += (double)(xs[i] - ts[i]) * (xs[i] - ts[i]);
    cr_assert(eq(int, tg_mse_loss(&v, x, t, TG_REDUCTION_MEAN), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(v), TG_F32));
    double got;
    tg_tensor_get_flat(v, 0, &got);
    cr_assert(epsilon_eq(dbl, got, sum / 6, 1e-6));
    tg_tensor_release(v);
    tg_tensor_release(x);
    tg_tensor_release(t);
}

/* ---- gradcheck ---------------------------------------------------------- */

typedef struct {
    loss_fn fn;
    tg_reduction red;
    tg_tensor *target;   /* cross entropy's constant class indices */
} gc_user;

static int run_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const gc_user *u = user;
    return u->fn(out, in[0], u->target ? u->target : in[1], u->red);
}

static tg_tensor *rand_f64(int64_t r, int64_t c, uint64_t seed, double lo, double hi)
{
    tg_tensor *t = NULL;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_tensor_zeros(&t, TG_F64, 2, (int64_t[]){r, c});
    tg_tensor_rand_uniform(t, &rng, lo, hi);
    tg_tensor_set_requires_grad(t, true);
    return t;
}

Test(loss, gradcheck_and_gradgradcheck_every_loss_and_reduction)
{
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    int64_t ci[3] = {2, 0, 3};
    tg_tensor *cls = NULL;
    tg_tensor_from_data(&cls, TG_I64, 1, (int64_t[]){3}, ci);
    for (size_t l = 0; l < sizeof LOSSES / sizeof *LOSSES; l++) {
        bool ce = LOSSES[l].fn == tg_cross_entropy;
        bool bce = LOSSES[l].fn == tg_bce_with_logits;
        for (int r = 0; r < 3; r++) {
            tg_tensor *in[2];
            in[0] = rand_f64(3, 4, 10 + l, -3, 3);
            /* l1 is not differentiable at x == t: keep them apart. */
            in[1] = bce ? rand_f64(3, 4, 20 + l, 0, 1) : rand_f64(3, 4, 20 + l, 3.5, 5);
            gc_user u = {LOSSES[l].fn, REDS[r], ce ? cls : NULL};
            int n = ce ? 1 : 2;
            cr_assert(eq(int, tg_gradcheck(run_loss, &u, n, in, &o), TG_OK), "%s/%s: %s",
                      LOSSES[l].name, RED_NAMES[r], tg_error_message());
            cr_assert(eq(int, tg_gradgradcheck(run_loss, &u, n, in, &o), TG_OK), "%s/%s: %s",
                      LOSSES[l].name, RED_NAMES[r], tg_error_message());
            tg_tensor_release(in[0]);
            tg_tensor_release(in[1]);
        }
    }
    tg_tensor_release(cls);
}

/* ---- stability ---------------------------------------------------------- */

/* bce(x, t) = softplus(x) - x t: for |x| = 1000 that is max(x, 0) - x t
 * exactly, and the gradient sigmoid(x) - t is 1 - t or -t. */
Test(loss, bce_is_stable_at_1000_in_f32_and_f64)
{
    double xs[4] = {1000, -1000, 1000, -1000}, ts[4] = {0, 1, 1, 0.25};
    tg_dtype dts[2] = {TG_F32, TG_F64};
    for (int d = 0; d < 2; d++) {
        tg_tensor *x = NULL, *t = NULL, *v = NULL, *xd = NULL, *td = NULL;
        tg_tensor_from_data(&xd, TG_F64, 1, (int64_t[]){4}, xs);
        tg_tensor_from_data(&td, TG_F64, 1, (int64_t[]){4}, ts);
        tg_tensor_to_dtype(&x, xd, dts[d]);
        tg_tensor_to_dtype(&t, td, dts[d]);
        tg_tensor_set_requires_grad(x, true);
        cr_assert(eq(int, tg_bce_with_logits(&v, x, t, TG_REDUCTION_NONE), TG_OK));
        cr_assert(eq(int, tg_backward(v, t, NULL), TG_OK), "%s", tg_error_message());
        for (int i = 0; i < 4; i++) {
            double got, g, want = fmax(xs[i], 0) - xs[i] * ts[i];
            double gwant = ts[i] * ((xs[i] > 0 ? 1.0 : 0.0) - ts[i]);   /* gout = ts */
            tg_tensor_get_flat(v, i, &got);
            tg_tensor_get_flat(tg_tensor_grad(x), i, &g);
            cr_assert(epsilon_eq(dbl, got, want, 1e-9), "value[%d]=%g want %g", i, got, want);
            cr_assert(epsilon_eq(dbl, g, gwant, 1e-9), "grad[%d]=%g want %g", i, g, gwant);
        }
        tg_tensor_release(v);
        tg_tensor_release(x);
        tg_tensor_release(t);
        tg_tensor_release(xd);
        tg_tensor_release(td);
    }
}

/* Row [1000, 0, -1000] with target 1: loss = logsumexp - 0 = 1000 (to f32
 * precision), gradient softmax - onehot = (1, -1, 0). */
/* f32 bce_with_logits, element by element (reduction none): softplus(x)
 * rounded to f32, then minus x t in f32, with softplus through libm's log1p
 * in double here, over logits from -104 to 88 (exp(x) down to the smallest
 * f32 subnormals, where log1p of a tiny e must keep all of e) and targets 0,
 * 0.3 and 1: the same bits. */
Test(loss, bce_f32_softplus_is_libms_rounded)
{
    enum { N = 4001 };
    static float xs[N], ts[N];
    for (int i = 0; i < N; i++) {
        xs[i] = (float)(-104.0 + 192.0 * i / (N - 1) + 1e-3 * (i % 7));
        ts[i] = i % 3 == 0 ? 0.0f : i % 3 == 1 ? 0.3f : 1.0f;
    }
    tg_tensor *x = NULL, *t = NULL, *l = NULL;
    cr_assert(eq(int, tg_tensor_from_data(&x, TG_F32, 1, (int64_t[]){N}, xs), TG_OK));
    cr_assert(eq(int, tg_tensor_from_data(&t, TG_F32, 1, (int64_t[]){N}, ts), TG_OK));
    cr_assert(eq(int, tg_bce_with_logits(&l, x, t, TG_REDUCTION_NONE), TG_OK));
    const float *lv = tg_tensor_cdata(l);
    for (int i = 0; i < N; i++) {
        const double a = xs[i];
        const float sp = (float)((a > 0 ? a : 0.0) + log1p(exp(-fabs(a))));
        const float want = sp - xs[i] * ts[i];
        cr_assert(memcmp(&lv[i], &want, sizeof want) == 0, "x %.9g t %g: %.9g, want %.9g",
                  (double)xs[i], (double)ts[i], (double)lv[i], (double)want);
    }
    th_release_all(3, (tg_tensor *[]){x, t, l});
}

Test(loss, cross_entropy_is_stable_at_1000_in_f32)
{
    float xs[3] = {1000.f, 0.f, -1000.f};
    int64_t ti[1] = {1};
    tg_tensor *x = NULL, *t = NULL, *v = NULL;
    tg_tensor_from_data(&x, TG_F32, 2, (int64_t[]){1, 3}, xs);
    tg_tensor_from_data(&t, TG_I64, 1, (int64_t[]){1}, ti);
    tg_tensor_set_requires_grad(x, true);
    cr_assert(eq(int, tg_cross_entropy(&v, x, t, TG_REDUCTION_SUM), TG_OK));
    double got, g[3], want_g[3] = {1, -1, 0};
    tg_tensor_get_flat(v, 0, &got);
    cr_assert(epsilon_eq(dbl, got, 1000.0, 1e-3));
    cr_assert(eq(int, tg_backward(v, NULL, NULL), TG_OK));
    tg_tensor_to_doubles(tg_tensor_grad(x), g, 3);
    for (int i = 0; i < 3; i++) cr_assert(epsilon_eq(dbl, g[i], want_g[i], 1e-6), "grad[%d]", i);
    tg_tensor_release(v);
    tg_tensor_release(x);
    tg_tensor_release(t);
}

/* A masked class (-inf logit, not the target) is a class that is not there:
 * the loss and the other gradients are those of the row without it, its own
 * gradient is 0, and nothing is NaN (0 * -inf must never be formed). */
Test(loss, cross_entropy_masked_class_is_an_absent_class)
{
    double masked[2][3] = {{0.5, -INFINITY, 1.5}, {-INFINITY, 2.0, -1.0}},
           kept[2][2] = {{0.5, 1.5}, {2.0, -1.0}};
    int64_t ti[2] = {0, 1}, tk[2] = {0, 0};
    tg_tensor *xm = NULL, *xk = NULL, *t = NULL, *tkt = NULL;
    tg_tensor_from_data(&xm, TG_F64, 2, (int64_t[]){2, 3}, masked);
    tg_tensor_from_data(&xk, TG_F64, 2, (int64_t[]){2, 2}, kept);
    tg_tensor_from_data(&t, TG_I64, 1, (int64_t[]){2}, ti);
    tg_tensor_from_data(&tkt, TG_I64, 1, (int64_t[]){2}, tk);
    tg_tensor_set_requires_grad(xm, true);
    tg_tensor_set_requires_grad(xk, true);
    for (int r = 0; r < 3; r++) {
        tg_tensor *vm = NULL, *vk = NULL;
        cr_assert(eq(int, tg_cross_entropy(&vm, xm, t, REDS[r]), TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, tg_cross_entropy(&vk, xk, tkt, REDS[r]), TG_OK));
        for (int64_t i = 0; i < tg_tensor_numel(vk); i++)
            cr_assert(epsilon_eq(dbl, th_at(vm, i), th_at(vk, i), 1e-14), "%s: loss[%lld] %g vs %g",
                      RED_NAMES[r], (long long)i, th_at(vm, i), th_at(vk, i));
        tg_tensor *sm = NULL, *sk = NULL;
        tg_sum(&sm, vm);
        tg_sum(&sk, vk);
        cr_assert(eq(int, tg_backward(sm, NULL, NULL), TG_OK));
        cr_assert(eq(int, tg_backward(sk, NULL, NULL), TG_OK));
        const tg_tensor *gm = tg_tensor_grad(xm), *gk = tg_tensor_grad(xk);
        /* row 0 keeps columns 0 and 2, row 1 columns 1 and 2 */
        const int keep[2][2] = {{0, 2}, {1, 2}}, drop[2] = {1, 0};
        for (int row = 0; row < 2; row++) {
            cr_assert(eq(dbl, th_at(gm, row * 3 + drop[row]), 0.0), "%s: row %d", RED_NAMES[r], row);
            for (int j = 0; j < 2; j++)
                cr_assert(epsilon_eq(dbl, th_at(gm, row * 3 + keep[row][j]), th_at(gk, row * 2 + j),
                                     1e-14), "%s: grad[%d][%d]", RED_NAMES[r], row, keep[row][j]);
        }
        tg_tensor_zero_grad(xm);
        tg_tensor_zero_grad(xk);
        tg_tensor_release(sm);
        tg_tensor_release(sk);
        tg_tensor_release(vm);
        tg_tensor_release(vk);
    }
    tg_tensor_release(xm);
    tg_tensor_release(xk);
    tg_tensor_release(t);
    tg_tensor_release(tkt);
}

/* A target of -100 is ignored, as by PyTorch's default ignore_index: its
 * loss and gradient row are 0, and mean averages over the other rows. */
Test(loss, cross_entropy_ignores_target_minus_100)
{
    tg_tensor *x = th_seq(TG_F64, 2, (int64_t[]){3, 4}, -2, 2);
    tg_tensor *t = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){2, -100, 0});
    tg_tensor *none = NULL, *mean = NULL;
    tg_tensor_set_requires_grad(x, true);
    cr_assert(eq(int, tg_cross_entropy(&none, x, t, TG_REDUCTION_NONE), TG_OK), "%s",
              tg_error_message());
    cr_assert(eq(int, tg_cross_entropy(&mean, x, t, TG_REDUCTION_MEAN), TG_OK));
    cr_assert(eq(dbl, th_at(none, 1), 0.0));
    cr_assert(epsilon_eq(dbl, th_at(mean, 0), (th_at(none, 0) + th_at(none, 2)) / 2, 1e-15));
    cr_assert(eq(int, tg_backward(mean, NULL, NULL), TG_OK));
    for (int c = 0; c < 4; c++) cr_assert(eq(dbl, th_at(tg_tensor_grad(x), 4 + c), 0.0));
    tg_tensor_release(none);
    tg_tensor_release(mean);
    tg_tensor_release(x);
    tg_tensor_release(t);
}

/* Inside autocast(f16) an f16 input is cast to f32 first: the loss is f32,
 * the gradient comes back in f16. */
Test(loss, autocast_computes_in_f32)
{
    tg_tensor *x = NULL, *t = NULL, *v = NULL;
    int64_t s[1] = {4};
    tg_tensor_full(&x, TG_F16, 1, s, 0.5);
    tg_tensor_full(&t, TG_F16, 1, s, 0.25);
    tg_tensor_set_requires_grad(x, true);
    cr_assert(eq(int, tg_autocast_begin(TG_F16), TG_OK));
    for (size_t l = 0; l < 3; l++) {
        cr_assert(eq(int, LOSSES[l].fn(&v, x, t, TG_REDUCTION_MEAN), TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, tg_tensor_dtype(v), TG_F32), "%s", LOSSES[l].name);
        cr_assert(eq(int, tg_backward(v, NULL, NULL), TG_OK));
        cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(x)), TG_F16));
        tg_tensor_zero_grad(x);
        tg_tensor_release(v);
        v = NULL;
    }
    cr_assert(eq(int, tg_autocast_end(), TG_OK));
    tg_tensor_release(x);
    tg_tensor_release(t);
}

/* ---- errors ------------------------------------------------------------- */

Test(loss, shape_mismatch_is_eshape_and_out_untouched)
{
    tg_tensor *x = NULL, *t = NULL, *v = NULL;
    tg_tensor_zeros(&x, TG_F32, 2, (int64_t[]){2, 3});
    tg_tensor_zeros(&t, TG_F32, 2, (int64_t[]){3, 2});
    for (size_t l = 0; l < 3; l++) {
        cr_assert(eq(int, LOSSES[l].fn(&v, x, t, TG_REDUCTION_MEAN), TG_ESHAPE));
        cr_assert(v == NULL);
        cr_assert(strstr(tg_error_message(), "(3, 2)") != NULL, "%s", tg_error_message());
    }
    /* cross entropy: target (N) must match logits (N, C). */
    tg_tensor *ti = NULL;
    tg_tensor_zeros(&ti, TG_I64, 1, (int64_t[]){3});
    cr_assert(eq(int, tg_cross_entropy(&v, x, ti, TG_REDUCTION_MEAN), TG_ESHAPE));
    cr_assert(v == NULL);
    tg_tensor_release(ti);
    tg_tensor_release(x);
    tg_tensor_release(t);
}

Test(loss, cross_entropy_target_out_of_range_names_the_index)
{
    tg_tensor *x = NULL, *t = NULL, *v = NULL;
    int64_t ti[3] = {0, 4, 1}, tn[3] = {0, 1, -1};
    tg_tensor_zeros(&x, TG_F32, 2, (int64_t[]){3, 4});
    tg_tensor_set_requires_grad(x, true);
    tg_tensor_from_data(&t, TG_I64, 1, (int64_t[]){3}, ti);
    cr_assert(eq(int, tg_cross_entropy(&v, x, t, TG_REDUCTION_MEAN), TG_EINVAL));
    cr_assert(v == NULL);
    cr_assert(strstr(tg_error_message(), "target[1]=4") != NULL, "%s", tg_error_message());
    tg_tensor_release(t);
    tg_tensor_from_data(&t, TG_I64, 1, (int64_t[]){3}, tn);
    cr_assert(eq(int, tg_cross_entropy(&v, x, t, TG_REDUCTION_MEAN), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "target[2]=-1") != NULL, "%s", tg_error_message());
    cr_assert(v == NULL);
    cr_assert(tg_tensor_grad(x) == NULL);
    tg_tensor_release(t);
    tg_tensor_release(x);
}

Test(loss, bad_arguments_are_rejected)
{
    tg_tensor *x = NULL, *t = NULL, *ti = NULL, *v = NULL;
    tg_tensor_zeros(&x, TG_F32, 2, (int64_t[]){2, 3});
    tg_tensor_zeros(&t, TG_F32, 2, (int64_t[]){2, 3});
    tg_tensor_zeros(&ti, TG_I32, 2, (int64_t[]){2, 3});
    cr_assert(eq(int, tg_mse_loss(&v, x, t, (tg_reduction)7), TG_EINVAL));
    cr_assert(eq(int, tg_mse_loss(&v, NULL, t, TG_REDUCTION_SUM), TG_EINVAL));
    cr_assert(eq(int, tg_l1_loss(&v, x, NULL, TG_REDUCTION_SUM), TG_EINVAL));
    cr_assert(eq(int, tg_bce_with_logits(NULL, x, t, TG_REDUCTION_SUM), TG_EINVAL));
    cr_assert(eq(int, tg_mse_loss(&v, x, ti, TG_REDUCTION_SUM), TG_EDTYPE));
    cr_assert(eq(int, tg_mse_loss(&v, ti, x, TG_REDUCTION_SUM), TG_EDTYPE));
    /* cross entropy wants i64 targets of shape (N) and 2-D logits. */
    tg_tensor *tf = NULL, *x1 = NULL;
    tg_tensor_zeros(&tf, TG_F32, 1, (int64_t[]){2});
    tg_tensor_zeros(&x1, TG_F32, 1, (int64_t[]){2});
    cr_assert(eq(int, tg_cross_entropy(&v, x, tf, TG_REDUCTION_SUM), TG_EDTYPE));
    cr_assert(eq(int, tg_cross_entropy(&v, x1, tf, TG_REDUCTION_SUM), TG_ESHAPE));
    cr_assert(v == NULL);
    tg_tensor_release(tf);
    tg_tensor_release(x1);
    tg_tensor_release(x);
    tg_tensor_release(t);
    tg_tensor_release(ti);
}
