/* Tests of tg_gradcheck / tg_gradgradcheck: they pass on correct ops and
 * catch deliberately wrong backwards (test-only schemas dispatched through
 * tg_op_call); fast mode: test_gradcheck_fast.c. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "core/core.h"
#include "helpers.h"
#include "gradcheck_fixtures.h"
#include "tapegrad/tapegrad.h"
#include "autograd/tape.h"
#include "tapegrad/ops.h"

/* ---- functions under test ---- */

static int f_mul(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    return tg_mul(out, in[0], in[1]);
}

/* Uses only in[0]: in[1]'s gradient comes back NULL, which counts as zeros. */
static int f_ignores_second(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    return tg_mul_scalar(out, in[0], 3.0);
}

/* ---- 3x whose backward reads g as a flat f64 array: right only for a
 * contiguous g ---- */

static int flat3_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                         const void *params)
{
    (void)ctx, (void)n, (void)params;
    return tg_mul_scalar(out, in[0], 3.0);
}

static int flat3_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    (void)ctx;
    TG_TRY(tg_tensor_zeros(&gi[0], TG_F64, tg_tensor_ndim(g), tg_tensor_shape(g)));
    const double *gd = tg_tensor_cdata(g);   /* wrong on purpose: g may be strided */
    double *d = tg_tensor_data(gi[0]);
    for (int64_t i = 0; i < tg_tensor_numel(g); i++) d[i] = 3.0 * gd[i];
    return TG_OK;
}

static const tg_op_schema flat3_op = {.name = "test_flat_g", .arity = 1, .amp = TG_AMP_KEEP,
                                      .forward = flat3_forward, .backward = flat3_backward};

static int f_flat3(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)user;
    return tg_op_call(&flat3_op, out, n, in, NULL, 0);
}

/* ---- x^2 whose backward is right but computed off the tape, so its own
 * derivative (needed by create_graph) is lost ---- */

static int sq_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                      const void *params)
{
    (void)n;
    (void)params;
    TG_TRY(tg_mul(out, in[0], in[0]));
    if (ctx) tg__ctx_save(ctx, in[0]);
    return TG_OK;
}

static int sq_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *x = NULL, *gx = NULL;
    TG_TRY(tg__ctx_saved(ctx, 0, &x));
    tg_no_grad_begin();   /* wrong for double backward on purpose */
    int rc = tg_mul(&gx, g, x);
    if (rc >= 0) rc = tg_mul_scalar(&gi[0], gx, 2.0);
    tg_no_grad_end();
    tg_tensor_release(gx);
    return rc;
}

static const tg_op_schema sq_op = {.name = "test_square_no_double", .arity = 1, .amp = TG_AMP_KEEP,
                             .forward = sq_forward, .backward = sq_backward};

static int f_sq(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)user;
    return tg_op_call(&sq_op, out, n, in, NULL, 0);
}

/* ---- x^2 whose backward 2 x g is on the tape for x but takes g detached,
 * so the derivative of the gradient with respect to g is lost ---- */

static int sqd_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *x = NULL, *x2 = NULL, *gd = NULL;
    TG_TRY(tg__ctx_saved(ctx, 0, &x));
    int rc = tg_tensor_detach(&gd, g);   /* wrong for double backward on purpose */
    if (rc >= 0) rc = tg_mul_scalar(&x2, x, 2.0);
    if (rc >= 0) rc = tg_mul(&gi[0], x2, gd);
    tg_tensor_release(x2);
    tg_tensor_release(gd);
    return rc;
}

/* It claims a differentiable backward (the mistake gradgradcheck must find). */
static const tg_op_schema sqd_op = {.name = "test_square_detached_grad", .arity = 1,
                                    .amp = TG_AMP_KEEP, .forward = sq_forward,
                                    .backward = sqd_backward, .double_backward = true};

static int f_sqd(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)user;
    return tg_op_call(&sqd_op, out, n, in, NULL, 0);
}

/* ---- x^2 with a backward_into (tapegrad/op.h) that adds k x g, k = 2
 * (right) or 3 (wrong): gradcheck must run and check it ---- */

static int sq_into(tg_ctx *ctx, tg_tensor *g, tg_tensor *acc, double k)
{
    tg_tensor *x = NULL;
    TG_TRY(tg__ctx_saved(ctx, 0, &x));
    for (int64_t i = 0; i < tg_tensor_numel(acc); i++) {
        double a, xi, gi;
        TG_TRY(tg_tensor_get_flat(acc, i, &a));
        TG_TRY(tg_tensor_get_flat(x, i, &xi));
        TG_TRY(tg_tensor_get_flat(g, i, &gi));
        TG_TRY(tg_tensor_set_flat(acc, i, a + k * xi * gi));
    }
    return TG_OK;
}

static int sq_into_right(tg_ctx *ctx, tg_tensor *g, tg_tensor *acc)
{
    return sq_into(ctx, g, acc, 2.0);
}

static int sq_into_wrong(tg_ctx *ctx, tg_tensor *g, tg_tensor *acc)
{
    return sq_into(ctx, g, acc, 3.0);
}

static const tg_op_schema sq_into_ops[2] = {
    {.name = "test_square_into", .arity = 1, .amp = TG_AMP_KEEP, .forward = sq_forward,
     .backward = sq_backward, .backward_into = sq_into_right},
    {.name = "test_square_into_wrong", .arity = 1, .amp = TG_AMP_KEEP, .forward = sq_forward,
     .backward = sq_backward, .backward_into = sq_into_wrong}};

static int f_sq_into(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_op_call(&sq_into_ops[*(const int *)user], out, n, in, NULL, 0);
}

/* ---- tests ---- */

Test(gradcheck, passes_on_correct_ops)
{
    tg_tensor *x = make(TG_F64, 2, S23, 1, "x", true), *w = make(TG_F64, 2, S23, 2, "w", true);
    tg_tensor *b = make(TG_F64, 2, S34, 3, "b", true);
    tg_tensor *xw[2] = {x, w}, *xb[2] = {x, b};
    OK(tg_gradcheck(f_mul, NULL, 2, xw, NULL));
    OK(tg_gradcheck(f_tanh_mul, NULL, 2, xw, NULL));
    OK(tg_gradcheck(f_matmul, NULL, 2, xb, NULL));
    OK(tg_gradcheck(f_ignores_second, NULL, 2, xw, NULL));
    tg_tensor_release(x);
    tg_tensor_release(w);
    tg_tensor_release(b);
}

Test(gradcheck, inputs_are_restored_exactly)
{
    tg_tensor *x = make(TG_F64, 2, S23, 1, "x", true), *w = make(TG_F64, 2, S23, 2, "w", true);
    double before[6], after[6];
    OK(tg_tensor_to_doubles(x, before, 6));
    tg_tensor *xw[2] = {x, w};
    OK(tg_gradcheck(f_tanh_mul, NULL, 2, xw, NULL));
    OK(tg_tensor_to_doubles(x, after, 6));
    cr_assert(memcmp(before, after, sizeof before) == 0);
    tg_tensor_release(x);
    tg_tensor_release(w);
}

Test(gradcheck, fails_on_wrong_backward_naming_input_and_element)
{
    tg_tensor *x = make(TG_F64, 2, S23, 1, "x", true), *w = make(TG_F64, 2, S23, 2, "w", true);
    tg_tensor *xw[2] = {x, w};
    int rc = tg_gradcheck(f_badmul, NULL, 2, xw, NULL);
    cr_assert(eq(int, rc, TG_EGRADCHECK));
    const char *msg = tg_error_message();
    /* x's gradient is right; the first wrong entry is w's element 0 for output 0. */
    cr_assert(strstr(msg, "input 1 ('w') element 0, output element 0") != NULL, "%s", msg);
    double x0 = 0, a = 0, num = 0;
    OK(tg_tensor_get_flat(x, 0, &x0));
    const char *vals = strstr(msg, "analytic ");
    cr_assert(vals && sscanf(vals, "analytic %lf vs numeric %lf", &a, &num) == 2, "%s", msg);
    cr_assert(epsilon_eq(dbl, num, x0, 1e-8), "%s", msg);       /* d(x0 w0)/dw0 */
    cr_assert(epsilon_eq(dbl, a, 0.5 * x0, 1e-9), "%s", msg);   /* the halved backward */
    tg_tensor_release(x);
    tg_tensor_release(w);
}

/* The output gradients gradcheck feeds backward are strided views, as in
 * real graphs, so a backward that reads g as a flat array fails, in both
 * modes. */
Test(gradcheck, a_backward_that_assumes_a_contiguous_g_fails)
{
    tg_tensor *x = make(TG_F64, 2, S23, 1, "x", true);
    cr_assert(eq(int, tg_gradcheck(f_flat3, NULL, 1, &x, NULL), TG_EGRADCHECK));
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    o.fast_mode = true;
    cr_assert(eq(int, tg_gradcheck(f_flat3, NULL, 1, &x, &o), TG_EGRADCHECK));
    tg_tensor_release(x);
}

Test(gradcheck, gradgradcheck_passes_on_differentiable_backwards)
{
    tg_tensor *x = make(TG_F64, 2, S23, 1, "x", true), *w = make(TG_F64, 2, S23, 2, "w", true);
    tg_tensor *b = make(TG_F64, 2, S34, 3, "b", true);
    tg_tensor *xw[2] = {x, w}, *xb[2] = {x, b};
    OK(tg_gradgradcheck(f_tanh_mul, NULL, 2, xw, NULL));
    OK(tg_gradgradcheck(f_mul, NULL, 2, xw, NULL));
    OK(tg_gradgradcheck(f_matmul, NULL, 2, xb, NULL));
    tg_tensor_release(x);
    tg_tensor_release(w);
    tg_tensor_release(b);
}

Test(gradcheck, gradgradcheck_catches_backward_off_the_tape)
{
    tg_tensor *x = make(TG_F64, 2, S23, 1, "x", true);
    OK(tg_gradcheck(f_sq, NULL, 1, &x, NULL));   /* first derivative is right */
    /* refused outright: its schema says the backward is not differentiable */
    cr_assert(eq(int, tg_gradgradcheck(f_sq, NULL, 1, &x, NULL), TG_EGRAD));
    th_expect_in(tg_error_message(), "test_square_no_double: create_graph through an op whose "
                                     "backward is not differentiable");
    tg_tensor_release(x);
}

Test(gradcheck, argument_errors)
{
    tg_tensor *x32 = make(TG_F32, 2, S23, 1, "x32", true), *w = make(TG_F64, 2, S23, 2, "w", true);
    tg_tensor *c = make(TG_F64, 2, S23, 3, "c", false);
    tg_tensor *in[2] = {x32, w};
    cr_assert(eq(int, tg_gradcheck(f_mul, NULL, 2, in, NULL), TG_EDTYPE));
    cr_assert(strstr(tg_error_message(), "input 0 ('x32')") != NULL, "%s", tg_error_message());
    cr_assert(eq(int, tg_gradgradcheck(f_mul, NULL, 2, in, NULL), TG_EDTYPE));
    tg_tensor *cc[2] = {c, c};
    cr_assert(eq(int, tg_gradcheck(f_mul, NULL, 2, cc, NULL), TG_EINVAL));   /* none requires grad */
    cr_assert(eq(int, tg_gradcheck(NULL, NULL, 2, in, NULL), TG_EINVAL));
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    o.eps = 0;
    in[0] = c;
    cr_assert(eq(int, tg_gradcheck(f_mul, NULL, 2, in, &o), TG_EINVAL));
    tg_tensor_release(x32);
    tg_tensor_release(w);
    tg_tensor_release(c);
}

/* As torch.autograd.gradcheck, which perturbs through .data: the inputs' version
 * counters do not move, so a graph built before the check still runs backward. */
Test(gradcheck, inputs_keep_their_version_so_earlier_graphs_still_run_backward)
{
    tg_tensor *x = make(TG_F64, 2, S23, 1, "x", true), *w = make(TG_F64, 2, S23, 2, "w", true);
    tg_tensor *xw[2] = {x, w}, *y = NULL, *loss = NULL;
    OK(tg_mul(&y, x, w));   /* saves x and w */
    OK(tg_sum(&loss, y));
    uint64_t vx = tg_tensor_version(x), vw = tg_tensor_version(w);
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    OK(tg_gradcheck(f_tanh_mul, NULL, 2, xw, NULL));
    o.fast_mode = true;
    OK(tg_gradcheck(f_tanh_mul, NULL, 2, xw, &o));
    OK(tg_gradgradcheck(f_tanh_mul, NULL, 2, xw, NULL));
    cr_assert(eq(u64, tg_tensor_version(x), vx));
    cr_assert(eq(u64, tg_tensor_version(w), vw));
    OK(tg_backward(loss, NULL, NULL));
    tg_tensor_release(loss);
    tg_tensor_release(y);
    tg_tensor_release(x);
    tg_tensor_release(w);
}

/* An expanded input (a stride-0 dim) would move several elements with one
 * perturbation; torch.autograd.gradcheck refuses it, and so do we. */
Test(gradcheck, refuses_an_input_with_a_stride_0_dim)
{
    static const int64_t S31[2] = {3, 1};
    tg_tensor *b = make(TG_F64, 2, S31, 1, "b", false), *e = NULL, *x = NULL;
    OK(tg_expand(&e, b, 2, S34));
    OK(tg_tensor_detach(&x, e));
    tg_tensor_set_name(x, "e");
    OK(tg_tensor_set_requires_grad(x, true));
    cr_assert(eq(int, tg_gradcheck(f_ignores_second, NULL, 1, &x, NULL), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "input 0 ('e') has a dimension with stride 0") != NULL,
              "%s", tg_error_message());
    cr_assert(eq(int, tg_gradgradcheck(f_ignores_second, NULL, 1, &x, NULL), TG_EINVAL));
    tg_tensor_release(x);
    tg_tensor_release(e);
    tg_tensor_release(b);
}

/* Values are printed so that small ones stay readable (torch prints
 * tensor(3.0000e-07)), not as %f's 0.000000. */
Test(gradcheck, failure_report_keeps_small_values_readable)
{
    tg_tensor *x = make(TG_F64, 2, S23, 1, "x", true);
    lin_params p = {.a = 1e-7, .k = 3e-7, .delta = 0};
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    o.atol = 0;
    cr_assert(eq(int, tg_gradcheck(f_lin, &p, 1, &x, &o), TG_EGRADCHECK));
    const char *msg = strstr(tg_error_message(), "analytic ");
    double a = 0, num = 0;
    cr_assert(msg && sscanf(msg, "analytic %lf vs numeric %lf", &a, &num) == 2, "%s",
              tg_error_message());
    cr_assert(ieee_ulp_eq(dbl, a, 3e-7, 4), "%s", tg_error_message());
    cr_assert(epsilon_eq(dbl, num, 1e-7, 1e-12), "%s", tg_error_message());
    tg_tensor_release(x);
}

/* As torch.autograd.gradgradcheck, the grad_output v is an input of the
 * checked map (x, v) -> d<fn(x), v>/dx too: a backward that detaches its
 * grad_output passes gradcheck, and gradgradcheck with respect to x alone,
 * but fails with respect to v (torch: "Jacobian mismatch for output 0 with
 * respect to input 1"). */
Test(gradcheck, gradgradcheck_checks_the_derivative_in_grad_output)
{
    tg_tensor *x = make(TG_F64, 2, S23, 1, "x", true);
    OK(tg_gradcheck(f_sqd, NULL, 1, &x, NULL));
    cr_assert(eq(int, tg_gradgradcheck(f_sqd, NULL, 1, &x, NULL), TG_EGRADCHECK));
    cr_assert(strstr(tg_error_message(), "input 1 ('grad_output')") != NULL, "%s",
              tg_error_message());
    tg_tensor_release(x);
}

/* (2, 3) at x, (3, 2) once x[0] moves up: torch refuses with "Expected
 * `func` to return outputs with the same shape when inputs are perturbed". */
static int f_shape_moves(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    static const int64_t S32[2] = {3, 2};
    double x0 = 0;
    TG_TRY(tg_tensor_get_flat(in[0], 0, &x0));
    if (x0 > *(const double *)user) return tg_reshape(out, in[0], 2, S32);
    return tg_mul_scalar(out, in[0], 1.0);
}

Test(gradcheck, refuses_an_output_whose_shape_changes_under_perturbation)
{
    tg_tensor *x = make(TG_F64, 2, S23, 1, "x", true);
    double x0 = 0;
    OK(tg_tensor_get_flat(x, 0, &x0));
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    cr_assert(eq(int, tg_gradcheck(f_shape_moves, &x0, 1, &x, &o), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "output shape changed") != NULL, "%s",
              tg_error_message());
    o.fast_mode = true;
    cr_assert(eq(int, tg_gradcheck(f_shape_moves, &x0, 1, &x, &o), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "output shape changed") != NULL, "%s",
              tg_error_message());
    tg_tensor_release(x);
}

/* fn itself takes a gradient, as a function checked for a higher derivative
 * does: d/dx sum(tanh(x) * w), recorded (create_graph) so that it is
 * differentiable.  gradcheck calls fn in grad mode for the finite
 * differences too (as torch does); under no-grad, fn's tg_grad would find
 * nothing recorded and the check would fail with "tensor does not require
 * grad".  Also from a caller in no-grad mode. */
static int f_grad_of_tanh_mul(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    tg_tensor *y = NULL;
    TG_TRY(f_tanh_mul(&y, 2, in, NULL));
    tg_backward_opts o = {.create_graph = true};
    tg_tensor *ones = NULL;
    int rc = tg_tensor_full(&ones, TG_F64, y->ndim, y->shape, 1.0);
    if (rc == TG_OK) rc = tg_grad(out, 1, &y, &ones, 1, in, &o);
    tg_tensor_release(ones);
    tg_tensor_release(y);
    return rc;
}

Test(gradcheck, fn_may_take_gradients_itself)
{
    tg_tensor *x = make(TG_F64, 2, S23, 1, "x", true), *w = make(TG_F64, 2, S23, 2, "w", true);
    tg_tensor *xw[2] = {x, w};
    OK(tg_gradcheck(f_grad_of_tanh_mul, NULL, 2, xw, NULL));
    OK(tg_gradgradcheck(f_grad_of_tanh_mul, NULL, 2, xw, NULL));
    tg_gradcheck_opts fast = TG_GRADCHECK_OPTS_INIT;
    fast.fast_mode = true;
    OK(tg_gradcheck(f_grad_of_tanh_mul, NULL, 2, xw, &fast));
    tg_no_grad_begin();
    int rc = tg_gradcheck(f_grad_of_tanh_mul, NULL, 2, xw, NULL);
    tg_no_grad_end();
    cr_assert(eq(int, rc, TG_OK), "from no-grad mode: %s", tg_error_message());
    cr_assert(tg_grad_enabled(), "grad mode is restored");
    tg_tensor_release(x);
    tg_tensor_release(w);
}

/* fn fails without a message of its own: gradcheck's message names fn
 * rather than repeating an older error's. */
static int f_fails_quietly(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)out, (void)n, (void)in, (void)user;
    return TG_EIO;
}

Test(gradcheck, fn_failing_without_a_message_gets_one)
{
    tg_tensor *x = make(TG_F64, 2, S23, 1, "x", true), *bad = NULL;
    cr_assert(eq(int, tg_reshape(&bad, x, 1, (int64_t[]){4}), TG_ESHAPE));   /* an old error */
    cr_assert(eq(int, tg_gradcheck(f_fails_quietly, NULL, 1, &x, NULL), TG_EIO));
    cr_assert(strstr(tg_error_message(), "gradcheck: fn failed with TG_EIO and no message") != NULL,
              "%s", tg_error_message());
    tg_tensor_release(x);
}

/* An op's backward_into is what a backward runs when the op's input comes
 * from another op: gradcheck takes every other row of the Jacobian through
 * inputs made by an op, so a wrong one fails and a right one passes. */
Test(gradcheck, checks_an_ops_backward_into)
{
    tg_tensor *x = make(TG_F64, 2, S23, 1, "x", true);
    const int right = 0, wrong = 1;
    OK(tg_gradcheck(f_sq_into, (void *)&right, 1, &x, NULL));
    cr_assert(eq(int, tg_gradcheck(f_sq_into, (void *)&wrong, 1, &x, NULL), TG_EGRADCHECK));
    cr_assert(strstr(tg_error_message(), "output element 1:") != NULL, "%s",
              tg_error_message());
    tg_tensor_release(x);
}

/* Fast mode takes v^T J both on the inputs and on inputs made by an
 * identity op, so a wrong backward_into fails there too; the slow check of
 * the input that fast mode reruns then names the element. */
Test(gradcheck, fast_mode_checks_an_ops_backward_into)
{
    tg_tensor *x = make(TG_F64, 2, S23, 1, "x", true);
    const int right = 0, wrong = 1;
    tg_gradcheck_opts fast = TG_GRADCHECK_OPTS_INIT;
    fast.fast_mode = true;
    for (uint64_t seed = 0; seed < 3; seed++) {
        fast.seed = seed;
        OK(tg_gradcheck(f_sq_into, (void *)&right, 1, &x, &fast));
        cr_assert(eq(int, tg_gradcheck(f_sq_into, (void *)&wrong, 1, &x, &fast),
                     TG_EGRADCHECK));
        cr_assert(strstr(tg_error_message(), "fast mode") != NULL, "%s", tg_error_message());
        cr_assert(strstr(tg_error_message(), "slow mode: gradcheck: input 0") != NULL, "%s",
                  tg_error_message());
    }
    tg_tensor_release(x);
}
