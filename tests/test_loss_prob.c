/* tests/test_loss_prob.c - tg_bce_loss (probabilities), tg_smooth_l1_loss
 * and tg_huber_loss against PyTorch's values, gradients and second
 * derivatives (tests/golden/optim/loss.safetensors,
 * scripts/make_optim_goldens.py), gradcheck/gradgradcheck in f64, half
 * dtypes and autocast, and the refusals. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/autograd.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"
#include "tapegrad/safetensors.h"

/* A golden case: name, which loss, its parameter (beta, delta) and whether
 * it has a weight. */
typedef enum { BCE, SL1, HUBER } kind;
static const struct {
    const char *name;
    kind k;
    double param;
    bool weighted;
} CASES[] = {{"bcep", BCE, 0, false},  {"bcep_w", BCE, 0, true},     {"sl1", SL1, 0.5, false},
             {"sl1_b0", SL1, 0.0, false}, {"huber", HUBER, 0.75, false}};
#define NCASES (sizeof CASES / sizeof CASES[0])
static const char *const RED_NAMES[] = {"mean", "sum", "none"};
static const tg_reduction REDS[] = {TG_REDUCTION_MEAN, TG_REDUCTION_SUM, TG_REDUCTION_NONE};

static int run(size_t c, tg_tensor **out, tg_tensor *x, tg_tensor *t, tg_tensor *w,
               tg_reduction red)
{
    switch (CASES[c].k) {
    case BCE: return tg_bce_loss(out, x, t, w, red);
    case SL1: return tg_smooth_l1_loss(out, x, t, red, CASES[c].param);
    default: return tg_huber_loss(out, x, t, red, CASES[c].param);
    }
}

/* A copy of t in dtype dt, requiring grad when rg. */
static tg_tensor *leaf(const tg_tensor *t, tg_dtype dt, bool rg)
{
    tg_tensor *c = NULL;
    cr_assert(eq(int, tg_tensor_to_dtype(&c, t, dt), TG_OK));
    if (rg) tg_tensor_set_requires_grad(c, true);
    return c;
}

/* Values, input and target gradients of every case and reduction, in f64
 * (to 1e-12) and f32 (to 1e-5). */
Test(loss_prob, values_and_gradients_match_pytorch)
{
    tg_st_file *f = th_golden_load("optim/loss.safetensors");
    const tg_dtype dts[2] = {TG_F64, TG_F32};
    for (int d = 0; d < 2; d++)
        for (size_t c = 0; c < NCASES; c++)
            for (int r = 0; r < 3; r++) {
                const char *cn = CASES[c].name, *rn = RED_NAMES[r];
                double tol = d == 0 ? 1e-12 : 1e-5;
                tg_tensor *x = leaf(th_golden_at(f, "%s%s.input", cn, ""), dts[d], true);
                tg_tensor *t = leaf(th_golden_at(f, "%s%s.target", cn, ""), dts[d], true);
                tg_tensor *w = CASES[c].weighted ? leaf(th_golden_at(f, "%s%s.weight", cn, ""),
                                                        dts[d], false) : NULL;
                tg_tensor *v = NULL;
                tg_tensor *gout = leaf(th_golden_at(f, "%s.%s.gout", cn, rn), dts[d], false);
                cr_assert(eq(int, run(c, &v, x, t, w, REDS[r]), TG_OK), "%s", tg_error_message());
                cr_assert(eq(int, tg_tensor_dtype(v), dts[d]));
                char what[96];
                snprintf(what, sizeof what, "%s %s %s value", tg_dtype_name(dts[d]), cn, rn);
                th_expect_near(what, v, th_golden_at(f, "%s.%s.value", cn, rn), tol, tol);
                cr_assert(eq(int, tg_backward(v, gout, NULL), TG_OK), "%s", tg_error_message());
                snprintf(what, sizeof what, "%s %s %s grad_input", tg_dtype_name(dts[d]), cn, rn);
                th_expect_near(what, tg_tensor_grad(x), th_golden_at(f, "%s.%s.grad_input", cn, rn),
                               tol, tol);
                snprintf(what, sizeof what, "%s %s %s grad_target", tg_dtype_name(dts[d]), cn, rn);
                th_expect_near(what, tg_tensor_grad(t),
                               th_golden_at(f, "%s.%s.grad_target", cn, rn), tol, tol);
                th_release_all(5, (tg_tensor *[]){v, gout, x, t, w});
            }
    tg_st_free(f);
}

/* The gradient for input of sum(grad_input * hess), reduction none: a
 * second derivative through the backward's own graph (create_graph),
 * against PyTorch's double backward.  For bce PyTorch's double backward
 * divides by (x + 1e-12)^2 (1 - x + 1e-12)^2, where the derivative of its
 * backward (this one) has max((1 - x) x, 1e-12)^2: equal to 1e-10 for x in
 * (0.02, 0.98). */
Test(loss_prob, second_derivatives_match_pytorch)
{
    tg_st_file *f = th_golden_load("optim/loss.safetensors");
    tg_backward_opts cg = TG_BACKWARD_OPTS_INIT;
    cg.create_graph = true;
    for (size_t c = 0; c < NCASES; c++) {
        const char *cn = CASES[c].name;
        tg_tensor *x = leaf(th_golden_at(f, "%s%s.input", cn, ""), TG_F64, true);
        tg_tensor *t = leaf(th_golden_at(f, "%s%s.target", cn, ""), TG_F64, false);
        tg_tensor *w = CASES[c].weighted ? th_golden_at(f, "%s%s.weight", cn, "") : NULL;
        tg_tensor *v = NULL, *gx = NULL, *ggx = NULL;
        cr_assert(eq(int, run(c, &v, x, t, w, TG_REDUCTION_NONE), TG_OK));
        tg_tensor *gout = th_golden_at(f, "%s.%s.gout", cn, "none");
        tg_tensor *hess = th_golden_at(f, "%s.%s.hess", cn, "none");
        cr_assert(eq(int, tg_grad(&gx, 1, &v, &gout, 1, &x, &cg), TG_OK), "%s",
                  tg_error_message());
        cr_assert(eq(int, tg_grad(&ggx, 1, &gx, &hess, 1, &x, NULL), TG_OK), "%s: %s", cn,
                  tg_error_message());
        char what[64];
        snprintf(what, sizeof what, "%s d2/dx2", cn);
        th_expect_near(what, ggx, th_golden_at(f, "%s.%s.ggin", cn, "none"), 1e-9, 1e-9);
        th_release_all(5, (tg_tensor *[]){v, gx, ggx, x, t});
    }
    tg_st_free(f);
}

/* Probabilities 0 and 1: the clamp at -100 gives losses 0 or 100, and the
 * eps of the gradient +-1e12 where x and the target disagree, as PyTorch. */
Test(loss_prob, bce_at_0_and_1_gives_pytorch_values)
{
    tg_st_file *f = th_golden_load("optim/loss.safetensors");
    const tg_dtype dts[2] = {TG_F64, TG_F32};
    for (int d = 0; d < 2; d++) {
        tg_tensor *x = leaf(th_golden_at(f, "%s%s.input", "bcep_edge", ""), dts[d], true);
        tg_tensor *t = leaf(th_golden_at(f, "%s%s.target", "bcep_edge", ""), dts[d], false);
        tg_tensor *v = NULL, *s = NULL;
        cr_assert(eq(int, tg_bce_loss(&v, x, t, NULL, TG_REDUCTION_NONE), TG_OK), "%s",
                  tg_error_message());
        double tol = d == 0 ? 1e-12 : 1e-5;
        th_expect_near("edge value", v, th_golden_at(f, "%s.%s.value", "bcep_edge", "none"), tol,
                       tol);
        cr_assert(eq(int, tg_sum(&s, v), TG_OK));
        cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_OK));
        th_expect_near("edge grad_input", tg_tensor_grad(x),
                       th_golden_at(f, "%s.%s.grad_input", "bcep_edge", "none"), tol, tol);
        th_release_all(4, (tg_tensor *[]){s, v, x, t});
    }
    tg_st_free(f);
}

/* ---- gradcheck ---------------------------------------------------------- */

typedef struct {
    size_t c;
    tg_reduction red;
} gc_user;

/* in: input, target and, for a weighted case, the weight (4). */
static int gc_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const gc_user *u = user;
    return run(u->c, out, in[0], in[1], n > 2 ? in[2] : NULL, u->red);
}

static tg_tensor *rand_f64(int ndim, const int64_t *shape, uint64_t seed, double lo, double hi)
{
    tg_tensor *t = NULL;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_tensor_zeros(&t, TG_F64, ndim, shape);
    tg_tensor_rand_uniform(t, &rng, lo, hi);
    tg_tensor_set_requires_grad(t, true);
    return t;
}

/* Every case and reduction, for input, target and weight together.  bce's
 * input stays in [0.1, 0.9]; the smooth losses' x - t spans both sides of
 * beta (delta), where the seeds keep it 1e-3 or more from the kinks. */
Test(loss_prob, gradcheck_and_gradgradcheck_every_case_and_reduction)
{
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    const int64_t s34[2] = {3, 4}, s4[1] = {4};
    for (size_t c = 0; c < NCASES; c++)
        for (int r = 0; r < 3; r++) {
            bool bce = CASES[c].k == BCE;
            tg_tensor *in[3] = {rand_f64(2, s34, 30 + c, bce ? 0.1 : -1.5, bce ? 0.9 : 1.5),
                                rand_f64(2, s34, 40 + c, bce ? 0 : -0.5, bce ? 1 : 0.5),
                                rand_f64(1, s4, 50 + c, 0.5, 1.5)};
            int n = CASES[c].weighted ? 3 : 2;
            if (!bce)
                for (int64_t i = 0; i < 12; i++) {
                    double dd = fabs(th_at(in[0], i) - th_at(in[1], i));
                    cr_assert(fabs(dd - CASES[c].param) > 1e-3 && dd > 1e-3,
                              "%s: element %lld is at a kink", CASES[c].name, (long long)i);
                }
            gc_user u = {c, REDS[r]};
            cr_assert(eq(int, tg_gradcheck(gc_fn, &u, n, in, &o), TG_OK), "%s/%s: %s",
                      CASES[c].name, RED_NAMES[r], tg_error_message());
            cr_assert(eq(int, tg_gradgradcheck(gc_fn, &u, n, in, &o), TG_OK), "%s/%s: %s",
                      CASES[c].name, RED_NAMES[r], tg_error_message());
            th_release_all(3, in);
        }
}

/* Third derivatives exist too (the backward's backward is built from the
 * same ops): d3/dx3 of sum(huber) is 0 a.e., of sum(bce) for t = 0 it is
 * 2 / (1 - x)^3. */
Test(loss_prob, third_derivative_of_bce)
{
    tg_tensor *x = th_tensor_from(TG_F64, 1, (int64_t[]){2}, (double[]){0.25, 0.5});
    tg_tensor *t = th_tensor_from(TG_F64, 1, (int64_t[]){2}, (double[]){0, 0});
    tg_tensor_set_requires_grad(x, true);
    tg_backward_opts cg = TG_BACKWARD_OPTS_INIT;
    cg.create_graph = true;
    tg_tensor *v = NULL, *g1 = NULL, *g2 = NULL, *g3 = NULL, *s1 = NULL, *s2 = NULL;
    cr_assert(eq(int, tg_bce_loss(&v, x, t, NULL, TG_REDUCTION_SUM), TG_OK));
    cr_assert(eq(int, tg_grad(&g1, 1, &v, NULL, 1, &x, &cg), TG_OK));
    cr_assert(eq(int, tg_sum(&s1, g1), TG_OK));
    cr_assert(eq(int, tg_grad(&g2, 1, &s1, NULL, 1, &x, &cg), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_sum(&s2, g2), TG_OK));
    cr_assert(eq(int, tg_grad(&g3, 1, &s2, NULL, 1, &x, NULL), TG_OK), "%s", tg_error_message());
    for (int i = 0; i < 2; i++) {
        double xi = th_at(x, i);
        cr_assert(epsilon_eq(dbl, th_at(g1, i), 1 / (1 - xi), 1e-12));
        cr_assert(epsilon_eq(dbl, th_at(g2, i), 1 / ((1 - xi) * (1 - xi)), 1e-12));
        cr_assert(epsilon_eq(dbl, th_at(g3, i), 2 / pow(1 - xi, 3), 1e-12), "d3[%d]=%g", i,
                  th_at(g3, i));
    }
    th_release_all(8, (tg_tensor *[]){v, g1, g2, g3, s1, s2, x, t});
}

/* ---- half dtypes ---------------------------------------------------------- */

/* f16 and bf16 inputs: the loss in their dtype, computed in f32 and rounded
 * once, so equal to the f32 loss of the same numbers rounded; inside
 * autocast the loss is f32 and the gradient comes back in the input's dtype. */
Test(loss_prob, half_inputs_and_autocast)
{
    const tg_dtype halves[2] = {TG_F16, TG_BF16};
    tg_tensor *x64 = th_seq(TG_F64, 2, (int64_t[]){2, 3}, 0.05, 0.95);
    tg_tensor *t64 = th_seq(TG_F64, 2, (int64_t[]){2, 3}, 1.0, 0.0);
    for (int h = 0; h < 2; h++)
        for (size_t c = 0; c < NCASES; c++) {
            if (CASES[c].weighted) continue;
            tg_tensor *xh = leaf(x64, halves[h], true), *th = leaf(t64, halves[h], false);
            tg_tensor *x32 = leaf(xh, TG_F32, false), *t32 = leaf(th, TG_F32, false);
            tg_tensor *vh = NULL, *v32 = NULL, *va = NULL;
            cr_assert(eq(int, run(c, &vh, xh, th, NULL, TG_REDUCTION_NONE), TG_OK));
            cr_assert(eq(int, run(c, &v32, x32, t32, NULL, TG_REDUCTION_NONE), TG_OK));
            cr_assert(eq(int, tg_tensor_dtype(vh), halves[h]));
            for (int64_t i = 0; i < 6; i++)
                cr_assert(eq(dbl, th_at(vh, i), th_round_to(halves[h], th_at(v32, i))),
                          "%s %s[%lld]", tg_dtype_name(halves[h]), CASES[c].name, (long long)i);
            cr_assert(eq(int, tg_autocast_begin(halves[h]), TG_OK));
            cr_assert(eq(int, run(c, &va, xh, th, NULL, TG_REDUCTION_NONE), TG_OK));
            cr_assert(eq(int, tg_autocast_end(), TG_OK));
            cr_assert(eq(int, tg_tensor_dtype(va), TG_F32), "%s", CASES[c].name);
            cr_assert(eq(int, tg_backward(va, v32, NULL), TG_OK), "%s", tg_error_message());
            cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(xh)), halves[h]));
            th_release_all(7, (tg_tensor *[]){xh, th, x32, t32, vh, v32, va});
        }
    th_release_all(2, (tg_tensor *[]){x64, t64});
}

/* ---- refusals ------------------------------------------------------------- */

/* PyTorch's rule: every input element in [0, 1]; NaN is not.  The message
 * names the element; nothing is written or recorded. */
Test(loss_prob, bce_refuses_input_outside_0_1)
{
    const double bad[3] = {1.5, -0.25, NAN};
    const char *const want[3] = {"element 4 is 1.5", "element 4 is -0.25", "element 4 is nan"};
    for (int b = 0; b < 3; b++) {
        double xs[6] = {0, 0.5, 1, 0.25, bad[b], 2};
        tg_tensor *x = th_tensor_from(TG_F32, 1, (int64_t[]){6}, xs);
        tg_tensor *t = th_seq(TG_F32, 1, (int64_t[]){6}, 0, 1);
        tg_tensor_set_requires_grad(x, true);
        tg_tensor *v = NULL;
        cr_assert(eq(int, tg_bce_loss(&v, x, t, NULL, TG_REDUCTION_MEAN), TG_EINVAL));
        cr_assert(v == NULL);
        const char *m = tg_error_message();
        cr_assert(strstr(m, want[b]) != NULL && strstr(m, "[0, 1]") != NULL &&
                      strstr(m, "bce_loss") != NULL, "%s", m);
        th_release_all(2, (tg_tensor *[]){x, t});
    }
}

Test(loss_prob, bce_weight_must_broadcast_to_input)
{
    tg_tensor *x = th_seq(TG_F64, 2, (int64_t[]){2, 3}, 0.1, 0.9);
    tg_tensor *t = th_seq(TG_F64, 2, (int64_t[]){2, 3}, 0.0, 1.0);
    tg_tensor *grow = NULL, *clash = NULL, *wi = NULL, *ok = NULL, *v = NULL;
    tg_tensor_zeros(&grow, TG_F64, 3, (int64_t[]){2, 1, 3});
    tg_tensor_zeros(&clash, TG_F64, 1, (int64_t[]){2});
    tg_tensor_zeros(&wi, TG_I32, 1, (int64_t[]){3});
    tg_tensor_full(&ok, TG_F64, 2, (int64_t[]){2, 1}, 2.0);
    cr_assert(eq(int, tg_bce_loss(&v, x, t, grow, TG_REDUCTION_SUM), TG_ESHAPE));
    cr_assert(strstr(tg_error_message(), "weight shape (2, 1, 3)") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(int, tg_bce_loss(&v, x, t, clash, TG_REDUCTION_SUM), TG_ESHAPE));
    cr_assert(eq(int, tg_bce_loss(&v, x, t, wi, TG_REDUCTION_SUM), TG_EDTYPE));
    cr_assert(v == NULL);
    /* a (2, 1) weight scales each row */
    tg_tensor *plain = NULL;
    cr_assert(eq(int, tg_bce_loss(&v, x, t, ok, TG_REDUCTION_NONE), TG_OK));
    cr_assert(eq(int, tg_bce_loss(&plain, x, t, NULL, TG_REDUCTION_NONE), TG_OK));
    for (int64_t i = 0; i < 6; i++) cr_assert(eq(dbl, th_at(v, i), 2 * th_at(plain, i)));
    th_release_all(8, (tg_tensor *[]){x, t, grow, clash, wi, ok, v, plain});
}

Test(loss_prob, smooth_l1_and_huber_parameters_are_checked)
{
    tg_tensor *x = th_seq(TG_F32, 1, (int64_t[]){4}, -1, 1), *v = NULL;
    cr_assert(eq(int, tg_smooth_l1_loss(&v, x, x, TG_REDUCTION_MEAN, -0.5), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "beta=-0.5 must be >= 0") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(int, tg_smooth_l1_loss(&v, x, x, TG_REDUCTION_MEAN, NAN), TG_EINVAL));
    cr_assert(eq(int, tg_huber_loss(&v, x, x, TG_REDUCTION_MEAN, 0.0), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "huber_loss: delta=0 must be > 0") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(int, tg_huber_loss(&v, x, x, TG_REDUCTION_MEAN, -1.0), TG_EINVAL));
    cr_assert(eq(int, tg_huber_loss(&v, x, x, TG_REDUCTION_MEAN, NAN), TG_EINVAL));
    cr_assert(v == NULL);
    cr_assert(eq(int, tg_smooth_l1_loss(&v, x, x, TG_REDUCTION_MEAN, 0.0), TG_OK));
    tg_tensor_release(v);
    tg_tensor_release(x);
}

/* As the other elementwise losses: the same shapes (no broadcasting), float
 * dtypes, a known reduction, no NULLs; out untouched. */
Test(loss_prob, common_refusals)
{
    tg_tensor *x = NULL, *t = NULL, *ti = NULL, *row = NULL, *v = NULL;
    tg_tensor_full(&x, TG_F32, 2, (int64_t[]){2, 3}, 0.5);
    tg_tensor_full(&t, TG_F32, 2, (int64_t[]){2, 3}, 0.5);
    tg_tensor_zeros(&ti, TG_I32, 2, (int64_t[]){2, 3});
    tg_tensor_full(&row, TG_F32, 1, (int64_t[]){3}, 0.5);
    for (size_t c = 0; c < NCASES; c++) {
        if (CASES[c].weighted) continue;
        const char *cn = CASES[c].name;
        cr_assert(eq(int, run(c, &v, x, row, NULL, TG_REDUCTION_MEAN), TG_ESHAPE), "%s", cn);
        cr_assert(strstr(tg_error_message(), "no broadcasting") != NULL, "%s", tg_error_message());
        cr_assert(eq(int, run(c, &v, x, ti, NULL, TG_REDUCTION_MEAN), TG_EDTYPE), "%s", cn);
        cr_assert(eq(int, run(c, &v, ti, x, NULL, TG_REDUCTION_MEAN), TG_EDTYPE), "%s", cn);
        cr_assert(eq(int, run(c, &v, x, t, NULL, (tg_reduction)9), TG_EINVAL), "%s", cn);
        cr_assert(eq(int, run(c, &v, NULL, t, NULL, TG_REDUCTION_MEAN), TG_EINVAL), "%s", cn);
        cr_assert(eq(int, run(c, &v, x, NULL, NULL, TG_REDUCTION_MEAN), TG_EINVAL), "%s", cn);
        cr_assert(eq(int, run(c, NULL, x, t, NULL, TG_REDUCTION_MEAN), TG_EINVAL), "%s", cn);
        cr_assert(v == NULL);
    }
    th_release_all(4, (tg_tensor *[]){x, t, ti, row});
}

/* Called by name through the op API, the ops keep their rule: the shape
 * rule refuses operands that would broadcast. */
Test(loss_prob, ops_by_name_refuse_broadcasting)
{
    const char *const names[3] = {"bce_loss", "smooth_l1_loss", "huber_loss"};
    const struct { double b; bool huber; } params = {1.0, true};
    tg_tensor *x = NULL, *row = NULL, *v = NULL;
    tg_tensor_full(&x, TG_F64, 2, (int64_t[]){2, 3}, 0.5);
    tg_tensor_full(&row, TG_F64, 1, (int64_t[]){3}, 0.5);
    for (int i = 0; i < 3; i++) {
        const tg_op_schema *op = NULL;
        cr_assert(eq(int, tg_op_find(&op, names[i]), TG_OK), "%s", names[i]);
        cr_assert(eq(int, tg_op_call(op, &v, 2, (tg_tensor *[]){x, row}, &params, sizeof params),
                     TG_ESHAPE), "%s", names[i]);
        cr_assert(v == NULL);
    }
    th_release_all(2, (tg_tensor *[]){x, row});
}
