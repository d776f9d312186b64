/* tests/test_op.c - the public op API (tapegrad/op.h) as a program uses it:
 * registration rules, dispatch of an op of its own (recording, the shape
 * rule, refusals that leave nothing on the tape), the backward's context
 * and the engine's checks of what a backward returns; and the in-place rule
 * for inputs that autocast cast and an op saved. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/tape.h"
#include "helpers.h"
#include "op_fixtures.h"
#include "tapegrad/tapegrad.h"

#define OK(expr) cr_assert(eq(int, (expr), TG_OK), "%s", tg_error_message())

/* ---- an op of the test's own: y = 2 x, with switches for misbehaving ---- */

typedef struct twice_params {
    int backward_shape;   /* 0: right; else the gradient's extent */
    bool backward_f32;    /* return an f32 gradient for an f64 input */
    bool forward_fails;
    bool forward_no_output;
    bool forward_quiet, backward_quiet;   /* fail without a message */
} twice_params;

static int twice_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                         const void *params)
{
    const twice_params *p = params;
    if (p && p->forward_fails) return tg_error_set(TG_EINVAL, "test_twice: told to fail");
    if (p && p->forward_no_output) return TG_OK;
    if (p && p->forward_quiet) return TG_ESHAPE;
    if (ctx) {
        int s = tg_op_ctx_save_scalar(ctx, 2.0);
        if (s < 0) return s;
    }
    return tg_mul_scalar(out, in[0], 2.0);
}

static int twice_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const twice_params *p = tg_op_ctx_params(ctx);
    double k = 0;
    int rc = tg_op_ctx_saved_scalar(ctx, 0, &k);
    if (rc < 0) return rc;
    if (p && p->backward_quiet) return TG_EIO;
    if (p && p->backward_shape) {
        int64_t shape[] = {p->backward_shape};
        return tg_tensor_zeros(&gi[0], tg_tensor_dtype(g), 1, shape);
    }
    if (p && p->backward_f32) {
        tg_tensor *t = NULL;
        rc = tg_mul_scalar(&t, g, k);
        if (rc == TG_OK) rc = tg_to_dtype(&gi[0], t, TG_F32);
        tg_tensor_release(t);
        return rc;
    }
    return tg_mul_scalar(&gi[0], g, k);
}

static int twice_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                       int *ndim, int64_t *shape)
{
    (void)n, (void)params;
    *dtype = tg_tensor_dtype(in[0]);
    *ndim = tg_tensor_ndim(in[0]);
    memcpy(shape, tg_tensor_shape(in[0]), sizeof(int64_t) * (size_t)*ndim);
    return TG_OK;
}

static const tg_op_schema twice_op = {.name = "test_twice", .arity = 1, .amp = TG_AMP_KEEP,
                                      .forward = twice_forward, .backward = twice_backward,
                                      .double_backward = true};
static const tg_op_schema twice_shaped_op = {.name = "test_twice_shaped", .arity = 1,
                                             .amp = TG_AMP_KEEP, .forward = twice_forward,
                                             .backward = twice_backward, .shape = twice_shape,
                                             .double_backward = true};

static tg_tensor *leaf(tg_dtype dt, int64_t n)
{
    tg_tensor *x = NULL;
    int64_t shape[] = {n};
    OK(tg_tensor_zeros(&x, dt, 1, shape));
    for (int64_t i = 0; i < n; i++) OK(tg_tensor_set_flat(x, i, (double)i - 1.5));
    OK(tg_tensor_set_requires_grad(x, true));
    return x;
}

/* ---- registration ---- */

static void expect_refused(const tg_op_schema *s, const char *msg)
{
    cr_assert(eq(int, tg_op_register(s), TG_EINVAL), "%s", msg);
    th_expect_in(tg_error_message(), msg);
}

Test(op, bad_schemas_are_refused_with_the_field_named)
{
    const tg_op_schema good = {.name = "test_bad_x", .arity = 1, .amp = TG_AMP_KEEP,
                               .forward = twice_forward, .backward = twice_backward};
    tg_op_schema s;
    cr_assert(eq(int, tg_op_register(NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "op_register: op must not be NULL");
    s = good, s.name = NULL;
    expect_refused(&s, "name must be a non-empty string");
    s = good, s.name = "";
    expect_refused(&s, "name must be a non-empty string");
    s = good, s.name = "test bad";
    expect_refused(&s, "name 'test bad' has ' ' at 4; letters, digits and '_' only");
    s = good, s.arity = TG_OP_MAX_INPUTS + 1;
    expect_refused(&s, "test_bad_x: arity=9 must be in [0, 8] or TG_OP_VARIADIC (-1)");
    s = good, s.arity = -2;
    expect_refused(&s, "test_bad_x: arity=-2 must be in [0, 8]");
    s = good, s.amp = (tg_amp_policy)99;
    expect_refused(&s, "test_bad_x: amp=99 is not a tg_amp_policy");
    s = good, s.forward = NULL;
    expect_refused(&s, "test_bad_x: forward must not be NULL");
    s = good, s.backward = NULL, s.double_backward = true;
    expect_refused(&s, "test_bad_x: double_backward needs a backward");
    const tg_op_schema *found = NULL;
    cr_assert(eq(int, tg_op_find(&found, "test_bad_x"), TG_ENOTFOUND));   /* none got in */
}

Test(op, a_name_registers_once)
{
    int n = tg_op_count();
    OK(tg_op_register(&twice_op));
    cr_assert(eq(int, tg_op_count(), n + 1));
    cr_assert(eq(int, tg_op_register(&twice_op), TG_EINVAL));
    th_expect_in(tg_error_message(), "an op named 'test_twice' is registered already");
    const tg_op_schema mine = {.name = "add", .arity = 2, .forward = twice_forward};
    cr_assert(eq(int, tg_op_register(&mine), TG_EINVAL));   /* a built-in's name */
    th_expect_in(tg_error_message(), "an op named 'add' is registered already");
    cr_assert(eq(int, tg_op_count(), n + 1));
    const tg_op_schema *found = NULL;
    OK(tg_op_find(&found, "test_twice"));
    cr_assert(found == &twice_op);
    tg_op_info info;
    OK(tg_op_info_find("test_twice", &info));
    cr_assert(info.has_backward && info.has_double_backward);
}

/* ---- dispatch ---- */

Test(op, a_call_is_recorded_and_differentiated_twice)
{
    tg_tensor *x = leaf(TG_F64, 3), *y = NULL, *s = NULL, *g = NULL, *gg = NULL;
    OK(tg_op_call(&twice_op, &y, 1, &x, NULL, 0));
    cr_assert(y->grad_fn != NULL);
    cr_assert(eq(str, (char *)y->grad_fn->op->name, "test_twice"));
    OK(tg_mul(&s, y, y));   /* s = 4 x^2: ds/dx = 8 x, d2 = 8 */
    tg_tensor *sum = NULL;
    OK(tg_sum(&sum, s));
    tg_backward_opts o = TG_BACKWARD_OPTS_INIT;
    o.create_graph = true;
    OK(tg_grad(&g, 1, &sum, NULL, 1, &x, &o));
    double v;
    OK(tg_tensor_get_flat(g, 0, &v));
    cr_assert(eq(dbl, v, 8 * -1.5));
    tg_tensor *gsum = NULL;
    OK(tg_sum(&gsum, g));
    OK(tg_grad(&gg, 1, &gsum, NULL, 1, &x, NULL));
    OK(tg_tensor_get_flat(gg, 2, &v));
    cr_assert(eq(dbl, v, 8.0));
    th_release_all(7, (tg_tensor *[]){x, y, s, sum, g, gsum, gg});
}

Test(op, a_failing_forward_leaves_nothing_on_the_tape)
{
    tg_tensor *x = leaf(TG_F32, 4), *y = (tg_tensor *)&y;   /* must stay untouched */
    long nodes = tg__node_live_count();
    twice_params p = {.forward_fails = true};
    cr_assert(eq(int, tg_op_call(&twice_op, &y, 1, &x, &p, sizeof p), TG_EINVAL));
    th_expect_in(tg_error_message(), "test_twice: told to fail");
    cr_assert(y == (tg_tensor *)&y);
    cr_assert(eq(long, tg__node_live_count(), nodes));
    p = (twice_params){.forward_no_output = true};
    cr_assert(eq(int, tg_op_call(&twice_op, &y, 1, &x, &p, sizeof p), TG_EINVAL));
    th_expect_in(tg_error_message(), "test_twice: forward returned TG_OK without an output");
    cr_assert(eq(long, tg__node_live_count(), nodes));
    p = (twice_params){.forward_quiet = true};   /* the message names the op */
    cr_assert(eq(int, tg_op_call(&twice_op, &y, 1, &x, &p, sizeof p), TG_ESHAPE));
    th_expect_in(tg_error_message(), "test_twice: the forward failed with TG_ESHAPE and no message");
    cr_assert(eq(long, tg__node_live_count(), nodes));
    cr_assert(eq(int, tg_op_call(&twice_op, &y, 2, (tg_tensor *[]){x, x}, NULL, 0), TG_EINVAL));
    th_expect_in(tg_error_message(), "test_twice: n=2 inputs; the op takes 1");
    cr_assert(eq(int, tg_op_call(&twice_op, &y, 1, &x, NULL, 8), TG_EINVAL));
    th_expect_in(tg_error_message(), "params must not be NULL when params_size=8");
    cr_assert(y == (tg_tensor *)&y);
    tg_tensor_release(x);
}

/* A forward whose result disagrees with the op's shape rule. */
static int wrong_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                         const void *params)
{
    (void)ctx, (void)n, (void)params;
    int64_t shape[] = {tg_tensor_shape(in[0])[0] + 1};
    return tg_tensor_zeros(out, tg_tensor_dtype(in[0]), 1, shape);
}

Test(op, the_shape_rule_is_checked_against_the_forward)
{
    tg_tensor *x = leaf(TG_F32, 4), *y = NULL;
    OK(tg_op_call(&twice_shaped_op, &y, 1, &x, NULL, 0));
    tg_tensor_release(y);
    const tg_op_schema liar = {.name = "test_liar", .arity = 1, .forward = wrong_forward,
                               .shape = twice_shape};
    long nodes = tg__node_live_count();
    cr_assert(eq(int, tg_op_call(&liar, &y, 1, &x, NULL, 0), TG_ESHAPE));
    th_expect_in(tg_error_message(), "test_liar: forward gave f32 (5), but the shape rule said "
                                     "f32 (4)");
    cr_assert(eq(long, tg__node_live_count(), nodes));
    tg_tensor_release(x);
}

/* A forward that rounds its input to integers (a bucketize, an argmax). */
static int round_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                         const void *params)
{
    (void)n, (void)params;
    if (ctx) {   /* saved, to show that the node and what it saved go away */
        int rc = tg_op_ctx_save(ctx, in[0]);
        if (rc < 0) return rc;
    }
    return tg_tensor_to_dtype(out, in[0], TG_I64);
}

static int round_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    (void)ctx;
    return tg_tensor_to_dtype(&gi[0], g, TG_F32);
}

/* As PyTorch, an integer output is never differentiable, whatever the op's
 * schema: the call is not recorded and the output does not require grad,
 * so a backward from it is refused as from any constant. */
Test(op, an_integer_output_is_not_recorded)
{
    const tg_op_schema round_op = {.name = "test_round", .arity = 1, .forward = round_forward,
                                   .backward = round_backward};
    tg_tensor *x = leaf(TG_F32, 3), *y = NULL, *s = NULL;
    const long nodes = tg__node_live_count();
    OK(tg_op_call(&round_op, &y, 1, &x, NULL, 0));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_I64));
    cr_assert(tg_tensor_requires_grad(y) == false);
    cr_assert(y->grad_fn == NULL);
    cr_assert(tg_tensor_is_leaf(y));
    cr_assert(eq(long, tg__node_live_count(), nodes));
    OK(tg_sum(&s, y));
    cr_assert(tg_tensor_requires_grad(s) == false);
    cr_assert(eq(int, tg_backward(y, NULL, NULL), TG_EGRAD));
    cr_assert(tg_tensor_grad(x) == NULL);
    th_release_all(3, (tg_tensor *[]){x, y, s});
}

/* ---- what a backward returns ---- */

static int backward_of(const twice_params *p, tg_tensor *x)
{
    tg_tensor *y = NULL, *s = NULL;
    OK(tg_op_call(&twice_op, &y, 1, &x, p, sizeof *p));
    OK(tg_sum(&s, y));
    int rc = tg_backward(s, NULL, NULL);
    tg_tensor_release(s);
    tg_tensor_release(y);
    return rc;
}

Test(op, a_gradient_of_the_wrong_shape_or_dtype_is_an_error)
{
    tg_tensor *x = leaf(TG_F64, 3);
    twice_params p = {.backward_shape = 5};
    cr_assert(eq(int, backward_of(&p, x), TG_EGRAD));
    th_expect_in(tg_error_message(), "backward: test_twice returned a gradient f64 (5) for "
                                     "input 0 of f64 (3)");
    cr_assert(tg_tensor_grad(x) == NULL);
    p = (twice_params){.backward_f32 = true};
    cr_assert(eq(int, backward_of(&p, x), TG_EGRAD));
    th_expect_in(tg_error_message(), "returned a gradient f32 (3) for input 0 of f64 (3)");
    p = (twice_params){.backward_quiet = true};   /* a failure without a message */
    cr_assert(eq(int, backward_of(&p, x), TG_EIO));
    th_expect_in(tg_error_message(), "test_twice: the backward failed with TG_EIO and no message");
    cr_assert(tg_tensor_grad(x) == NULL);
    p = (twice_params){0};
    OK(backward_of(&p, x));
    double v;
    OK(tg_tensor_get_flat(tg_tensor_grad(x), 1, &v));
    cr_assert(eq(dbl, v, 2.0));
    tg_tensor_release(x);
}

/* A backward that also writes a gradient into a slot past its op's inputs
 * (slot 3 of a one-input op). */
static int extra_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    (void)ctx;
    int rc = tg_mul_scalar(&gi[0], g, 2.0);
    return rc < 0 ? rc : tg_mul_scalar(&gi[3], g, 2.0);
}

/* The engine checks the slots past the inputs after the call: a gradient
 * there is released (LeakSanitizer would report it otherwise) and the
 * backward is refused, naming the op and the slot; .grad is not touched. */
Test(op, a_gradient_past_the_inputs_is_an_error)
{
    const tg_op_schema extra_op = {.name = "test_extra", .arity = 1, .forward = twice_forward,
                                   .backward = extra_backward};
    tg_tensor *x = leaf(TG_F32, 3), *y = NULL, *s = NULL;
    OK(tg_op_call(&extra_op, &y, 1, &x, NULL, 0));
    OK(tg_sum(&s, y));
    cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_EGRAD));
    th_expect_in(tg_error_message(), "backward: test_extra wrote a gradient into grad_in[3]; "
                                     "the op has 1 input");
    cr_assert(tg_tensor_grad(x) == NULL);
    th_release_all(3, (tg_tensor *[]){x, y, s});
}

Test(op, the_context_refuses_slots_never_saved)
{
    tg_op_ctx *none = NULL;
    double v;
    tg_tensor *t;
    cr_assert(eq(int, tg_op_ctx_save(none, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "ctx must not be NULL");
    cr_assert(eq(int, tg_op_ctx_saved_scalar(none, 0, &v), TG_EINVAL));
    cr_assert(eq(int, tg_op_ctx_saved(none, 0, &t), TG_EINVAL));
    cr_assert(tg_op_ctx_needs_grad(none, 0) == false);
    cr_assert(tg_op_ctx_params(none) == NULL);
}

/* ---- what the views of the tape show of an op of its own (scale_op, op_fixtures.c) ---- */

/* The DOT text of t's tape, which the caller frees. */
static char *dot_of(const tg_tensor *t)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    cr_assert(mf != NULL);
    OK(tg_graph_to_dot(mf, t));
    fclose(mf);
    return buf;
}

/* The vjp of the backward step at the node of op. */
typedef struct step_vjp {
    const char *op;
    char vjp[128];
} step_vjp;

static int keep_vjp(const tg_backward_step *s, void *user)
{
    step_vjp *seen = user;
    if (strcmp(s->op, seen->op) == 0) snprintf(seen->vjp, sizeof seen->vjp, "%s", s->vjp);
    return TG_OK;
}

/* What the views show of op called with params p on a leaf, summed: the
 * DOT text of the tape (the caller frees it), the vjp of op's backward step,
 * and the op's tg_op_info once it is registered. */
typedef struct op_views {
    char *dot;
    step_vjp step;
    tg_op_info info;
} op_views;

static op_views views_of(const tg_op_schema *op, const void *p, size_t size)
{
    tg_tensor *x = leaf(TG_F64, 3), *y = NULL, *s = NULL;
    OK(tg_op_call(op, &y, 1, &x, p, size));
    OK(tg_sum(&s, y));
    op_views v = {.dot = dot_of(s), .step = {.op = op->name}};
    OK(tg_backward_steps(s, NULL, NULL, keep_vjp, &v.step));
    OK(tg_op_register(op));
    OK(tg_op_info_find(op->name, &v.info));
    th_release_all(3, (tg_tensor *[]){x, y, s});
    return v;
}

/* The schema's vjp is what a backward step says (and so TG_TRACE=2 and the
 * viz page) and what tg_op_info reports; its scalar operand is drawn in the
 * DOT graph with the call's value. */
Test(op, the_schemas_vjp_and_scalar_show_in_the_views)
{
    scale_params p = {.k = 0.75};
    op_views v = views_of(&scale_op, &p, sizeof p);
    th_expect_in(v.dot, "test_scale");
    th_expect_in(v.dot, "label=\"k = 0.75\"");
    free(v.dot);
    cr_assert(eq(str, v.step.vjp, "da = g * k"));
    cr_assert(v.info.vjp != NULL && strcmp(v.info.vjp, "da = g * k") == 0);
}

/* Without vjp the views give the generic text, and without scalar they draw
 * no scalar operand even when params begin with 8 bytes. */
Test(op, without_vjp_the_views_say_the_ops_own_backward)
{
    twice_params p = {0};
    op_views v = views_of(&twice_op, &p, sizeof p);
    th_expect_in(v.dot, "test_twice");
    cr_assert(strstr(v.dot, "[id=\"s") == NULL, "a scalar operand drawn:\n%s", v.dot);
    free(v.dot);
    cr_assert(eq(str, v.step.vjp, "the op's own backward"));
    cr_assert(v.info.vjp == NULL);
}

/* An empty vjp is no vjp: the steps give the generic text (and the DOT
 * graph no tooltip, test_tape_view.c), `tapegrad ops --vjp` a dash. */
Test(op, an_empty_vjp_is_no_vjp_in_the_steps)
{
    static const tg_op_schema empty = {.name = "test_twice_empty_vjp", .arity = 1,
                                       .amp = TG_AMP_KEEP, .forward = twice_forward,
                                       .backward = twice_backward, .vjp = ""};
    twice_params p = {0};
    op_views v = views_of(&empty, &p, sizeof p);
    free(v.dot);
    cr_assert(eq(str, v.step.vjp, "the op's own backward"));
}

/* ---- in place, after autocast cast an input that an op saved ---- */

/* linear under autocast bf16 casts x and w (LOWER_PRECISION) and saves the
 * casts; the tape keeps w itself and casts it again in backward, so a change
 * of w in between must be caught as for an uncast input. */
Test(op, changing_a_cast_saved_input_in_place_is_einplace)
{
    int64_t xs[] = {2, 3}, ws[] = {4, 3};
    tg_tensor *x = NULL, *w = NULL, *y = NULL, *s = NULL;
    OK(tg_tensor_zeros(&x, TG_F32, 2, xs));
    OK(tg_tensor_zeros(&w, TG_F32, 2, ws));
    OK(tg_tensor_fill(x, 0.5));
    OK(tg_tensor_fill(w, 0.25));
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_tensor_set_requires_grad(w, true));
    tg_tensor_set_name(w, "weight");
    OK(tg_autocast_begin(TG_BF16));
    OK(tg_linear(&y, x, w, NULL));
    OK(tg_autocast_end());
    cr_assert(eq(int, tg_tensor_dtype(y), TG_BF16));
    OK(tg_sum(&s, y));
    OK(tg_tensor_fill(w, 1.0));   /* as an optimizer step would */
    cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_EINPLACE));
    th_expect_in(tg_error_message(), "linear: saved tensor #1 'weight' (4, 3) was modified in place");
    th_release_all(4, (tg_tensor *[]){x, w, y, s});
}
