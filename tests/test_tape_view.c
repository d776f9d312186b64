/* Tests of the views of a tape a learner reads: the DOT graph with its
 * options, the step-through backward and its TG_TRACE=2 printout. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autograd/tape.h"
#include "helpers.h"
#include "op_fixtures.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static const double X[3] = {1.0, 2.0, 3.0}, W[3] = {4.0, -5.0, 0.5};

/* The DOT text of t's tape with opts. */
static char *dot_of(const tg_tensor *t, const tg_dot_opts *opts)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    cr_assert(mf != NULL);
    OK(tg_graph_to_dot_ex(mf, t, opts));
    fclose(mf);
    return buf;
}

static int count_of(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what)) n++;
    return n;
}

/* y = sum(tanh(x * w) * 2.5) with x a constant; the intermediates are named
 * and released before the graph is drawn. */
static tg_tensor *small_graph(tg_tensor **x, tg_tensor **w)
{
    *x = th_vec(TG_F64, 3, X, "x", false);
    *w = th_vec(TG_F64, 3, W, "w", true);
    tg_tensor *xw = NULL, *t = NULL, *s = NULL, *y = NULL;
    OK(tg_mul(&xw, *x, *w));
    tg_tensor_set_name(xw, "xw");
    OK(tg_tanh(&t, xw));
    tg_tensor_set_name(t, "t");
    OK(tg_mul_scalar(&s, t, 2.5));
    OK(tg_sum(&y, s));
    tg_tensor_set_name(y, "loss");
    tg_tensor_release(xw);
    tg_tensor_release(t);
    tg_tensor_release(s);
    return y;
}

Test(tape_view, dot_keeps_names_of_freed_intermediates)
{
    tg_tensor *x, *w, *y = small_graph(&x, &w);
    char *dot = dot_of(y, NULL);
    cr_assert(strstr(dot, " mul\\nxw: f64 (3)") != NULL, "%s", dot);
    cr_assert(strstr(dot, " tanh\\nt: f64 (3)") != NULL, "%s", dot);
    cr_assert(strstr(dot, " sum\\nloss: f64 ()") != NULL, "%s", dot);
    free(dot);
    th_release_all(3, (tg_tensor *[]){y, w, x});
}

Test(tape_view, dot_draws_constants_and_scalar_operands)
{
    tg_tensor *x, *w, *y = small_graph(&x, &w);
    char *dot = dot_of(y, NULL);
    /* x is saved by mul, so it is drawn with its name; 2.5 is mul_scalar's s */
    cr_assert(strstr(dot, "label=\"x (constant)\\nf64 (3)\"") != NULL, "%s", dot);
    const char *s = strstr(dot, "label=\"s = 2.5\"");
    cr_assert(s != NULL, "%s", dot);
    cr_assert(eq(int, count_of(dot, "\n  \"s"), 2), "scalar node and its edge in\n%s", dot);
    /* mul now visibly has two inputs: an edge from x's node and one from w's */
    char id[64];
    snprintf(id, sizeof id, "\"t_%p\" -> \"n", (void *)x);
    cr_assert(strstr(dot, id) != NULL, "%s\n%s", id, dot);
    snprintf(id, sizeof id, "\"leaf_%p\" -> \"n", (void *)w);
    cr_assert(strstr(dot, id) != NULL, "%s\n%s", id, dot);
    free(dot);
    th_release_all(3, (tg_tensor *[]){y, w, x});
}

Test(tape_view, dot_saved_tensors_are_dashed_edges)
{
    tg_tensor *x, *w, *y = small_graph(&x, &w);
    char *dot = dot_of(y, NULL);
    /* mul saved x alone (w's gradient reads it; x needs none, so w is not
     * kept): a dashed edge from x and none from w; tanh saves its output,
     * which is freed here, so it shows as a saved tensor of its own */
    char want[96];
    snprintf(want, sizeof want, "\"t_%p\" -> \"n", (void *)x);
    const char *e = strstr(dot, want);
    cr_assert(e != NULL && (e = strstr(e + 1, want)) != NULL, "%s", dot);
    cr_assert(strstr(e, "style=dashed") < strchr(e, '\n'), "%s", dot);
    snprintf(want, sizeof want, "\"saved_leaf_%p", (void *)w);
    cr_assert(strstr(dot, want) == NULL, "%s", dot);
    cr_assert(eq(int, count_of(dot, "label=\"saved\""), 2), "%s", dot);
    cr_assert(strstr(dot, "label=\"saved\\nf64 (3)\"") != NULL, "%s", dot);
    free(dot);
    tg_dot_opts o = TG_DOT_OPTS_INIT;
    o.show_saved = false;
    dot = dot_of(y, &o);
    cr_assert(strstr(dot, "dashed, color") == NULL && strstr(dot, "saved") == NULL, "%s", dot);
    free(dot);
    th_release_all(3, (tg_tensor *[]){y, w, x});
}

Test(tape_view, dot_saved_output_alive_is_noted_on_its_node)
{
    tg_tensor *a = th_vec(TG_F64, 3, X, "a", true), *t = NULL, *y = NULL;
    OK(tg_tanh(&t, a));
    OK(tg_sum(&y, t));
    char *dot = dot_of(y, NULL);
    cr_assert(strstr(dot, " tanh\\nf64 (3)\\nsaves its output\"") != NULL, "%s", dot);
    cr_assert(strstr(dot, "label=\"saved\\n") == NULL, "%s", dot);
    free(dot);
    th_release_all(3, (tg_tensor *[]){y, t, a});
}

Test(tape_view, dot_declares_each_tensor_once)
{
    tg_tensor *w = th_vec(TG_F64, 3, W, "w", true), *ww = NULL, *s = NULL, *y = NULL;
    OK(tg_mul(&ww, w, w));
    OK(tg_add(&s, ww, w));
    OK(tg_sum(&y, s));
    char *dot = dot_of(y, NULL), decl[64];
    snprintf(decl, sizeof decl, "\"leaf_%p\" [", (void *)w);
    cr_assert(eq(int, count_of(dot, decl), 1), "%s", dot);
    snprintf(decl, sizeof decl, "\"leaf_%p\" -> ", (void *)w);
    /* mul(w, w): two inputs and two saved; add: one input */
    cr_assert(eq(int, count_of(dot, decl), 5), "%s", dot);
    free(dot);
    th_release_all(4, (tg_tensor *[]){y, s, ww, w});
}

Test(tape_view, dot_shows_values_and_grads_when_asked)
{
    tg_tensor *x, *w, *y = small_graph(&x, &w);
    tg_dot_opts o = TG_DOT_OPTS_INIT;
    char *dot = dot_of(y, &o);
    cr_assert(strstr(dot, "[4, -5") == NULL, "values only when asked:\n%s", dot);
    free(dot);
    o.show_values = true;
    o.show_grads = true;
    o.max_elems = 2;
    dot = dot_of(y, &o);
    cr_assert(strstr(dot, "label=\"w\\nf64 (3)\\n[4, -5, ...]\"") != NULL, "%s", dot);
    cr_assert(strstr(dot, "label=\"x (constant)\\nf64 (3)\\n[1, 2, ...]\"") != NULL, "%s", dot);
    cr_assert(strstr(dot, "grad [") == NULL, "no grad before backward:\n%s", dot);
    free(dot);
    OK(tg_backward(y, NULL, &(tg_backward_opts){.retain_graph = true}));
    o.max_elems = 3;
    dot = dot_of(y, &o);
    /* dL/dw = 2.5 x (1 - tanh(x w)^2) */
    char want[160], vals[3][32];
    for (int i = 0; i < 3; i++) {
        double t = tanh(X[i] * W[i]), g = 2.5 * X[i] * (1 - t * t);
        snprintf(vals[i], sizeof vals[i], "%.4g", g);
    }
    snprintf(want, sizeof want, "\\ngrad [%s, %s, %s]\"", vals[0], vals[1], vals[2]);
    cr_assert(strstr(dot, want) != NULL, "%s in\n%s", want, dot);
    /* the root's value: the loss itself, alive */
    cr_assert(strstr(dot, " sum\\nloss: f64 ()\\n[") != NULL, "%s", dot);
    free(dot);
    th_release_all(3, (tg_tensor *[]){y, w, x});
}

Test(tape_view, dot_rejects_bad_arguments)
{
    tg_tensor *x, *w, *y = small_graph(&x, &w);
    tg_dot_opts o = TG_DOT_OPTS_INIT;
    o.max_elems = -1;
    cr_assert(eq(int, tg_graph_to_dot_ex(stdout, y, &o), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "max_elems=-1 must be >= 0") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(int, tg_graph_to_dot_ex(NULL, y, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_graph_to_dot_ex(stdout, NULL, NULL), TG_EINVAL));
    th_release_all(3, (tg_tensor *[]){y, w, x});
}

/* The line of text that holds what, in a new string (NULL when none does). */
static char *line_of(const char *text, const char *what)
{
    const char *at = strstr(text, what);
    if (!at) return NULL;
    const char *start = at, *end = strchr(at, '\n');
    while (start > text && start[-1] != '\n') start--;
    return strndup(start, end ? (size_t)(end - start) : strlen(start));
}

/* The declaration of the node of op in dot (its label begins "#<seq> op\n"). */
static char *node_of(const char *dot, const char *op)
{
    char what[64];
    snprintf(what, sizeof what, " %s\\n", op);
    char *line = line_of(dot, what);
    cr_assert(line != NULL, "no %s node in\n%s", op, dot);
    return line;
}

Test(tape_view, dot_shows_each_ops_vjp_as_its_tooltip_and_with_show_vjp_in_its_label)
{
    tg_tensor *x, *w, *y = small_graph(&x, &w);
    char *dot = dot_of(y, NULL);
    char *mul = node_of(dot, "mul");
    th_expect_in(mul, "tooltip=\"da = g * b, db = g * a\", label=\"#");
    th_expect_in(mul, " mul\\nxw: f64 (3)\"];");
    /* mul, tanh, mul_scalar and sum: each op node has one, nothing else */
    cr_assert(eq(int, count_of(dot, "tooltip="), 4), "%s", dot);
    cr_assert(strstr(dot, "\\nda = ") == NULL, "a formula in a label by default:\n%s", dot);
    free(mul);
    free(dot);
    tg_dot_opts o = TG_DOT_OPTS_INIT;
    o.show_vjp = true;
    dot = dot_of(y, &o);
    mul = node_of(dot, "mul");
    th_expect_in(mul, "tooltip=\"da = g * b, db = g * a\"");
    th_expect_in(mul, " mul\\nxw: f64 (3)\\nda = g * b, db = g * a\"];");
    th_expect_in(dot, " mul_scalar\\nf64 (3)\\nda = g * s\"];");
    free(mul);
    free(dot);
    th_release_all(3, (tg_tensor *[]){y, w, x});
}

/* sum(op(x)) with params k = 0.75, and the DOT text of its tape with opts. */
static char *dot_of_op(const tg_op_schema *op, const tg_dot_opts *opts)
{
    tg_tensor *x = th_vec(TG_F64, 3, X, "x", true), *y = NULL, *s = NULL;
    scale_params p = {.k = 0.75};
    OK(tg_op_call(op, &y, 1, &x, &p, sizeof p));
    OK(tg_sum(&s, y));
    char *dot = dot_of(s, opts);
    th_release_all(3, (tg_tensor *[]){s, y, x});
    return dot;
}

Test(tape_view, dot_shows_the_vjp_of_a_registered_op_of_ones_own)
{
    OK(tg_op_register(&scale_op));
    const tg_op_schema *op;
    OK(tg_op_find(&op, "test_scale"));
    tg_dot_opts o = TG_DOT_OPTS_INIT;
    o.show_vjp = true;
    char *dot = dot_of_op(op, &o), *node = node_of(dot, "test_scale");
    th_expect_in(node, "tooltip=\"da = g * k\"");
    th_expect_in(node, " test_scale\\nf64 (3)\\nda = g * k\"];");
    th_expect_in(dot, "label=\"k = 0.75\"");
    free(node);
    free(dot);
}

/* An op whose schema has no vjp (or an empty one) gets neither a tooltip nor
 * a label line: not the steps' generic text. */
Test(tape_view, dot_gives_an_op_without_vjp_no_tooltip)
{
    const tg_op_schema plain = {.name = "test_plain", .arity = 1, .amp = TG_AMP_KEEP,
                                .forward = scale_forward, .backward = scale_backward},
                       empty = {.name = "test_empty", .arity = 1, .amp = TG_AMP_KEEP,
                                .forward = scale_forward, .backward = scale_backward,
                                .vjp = ""};
    const tg_op_schema *ops[2] = {&plain, &empty};
    tg_dot_opts o = TG_DOT_OPTS_INIT;
    o.show_vjp = true;
    for (int i = 0; i < 2; i++) {
        char *dot = dot_of_op(ops[i], &o), *node = node_of(dot, ops[i]->name);
        char *sum = node_of(dot, "sum");
        cr_assert(strstr(node, "tooltip") == NULL, "%s", node);
        th_expect_in(node, "\\nf64 (3)\"];");
        th_expect_in(sum, "tooltip=");   /* sum's own is still there */
        cr_assert(strstr(dot, "own backward") == NULL, "%s", dot);
        free(sum);
        free(node);
        free(dot);
    }
}

/* The formula is a DOT string: its quotes and backslashes are escaped. */
Test(tape_view, dot_escapes_quotes_and_backslashes_in_the_vjp)
{
    const tg_op_schema quoted = {.name = "test_quoted", .arity = 1, .amp = TG_AMP_KEEP,
                                 .forward = scale_forward, .backward = scale_backward,
                                 .vjp = "da = g * \"k\" \\ 1"};
    tg_dot_opts o = TG_DOT_OPTS_INIT;
    o.show_vjp = true;
    char *dot = dot_of_op(&quoted, &o), *node = node_of(dot, "test_quoted");
    th_expect_in(node, "tooltip=\"da = g * \\\"k\\\" \\\\ 1\", label=\"#");
    th_expect_in(node, "\\nf64 (3)\\nda = g * \\\"k\\\" \\\\ 1\"];");
    free(node);
    free(dot);
}

/* ---- step-through backward ---- */

/* A network with a leaf used twice, a conv_transpose and a broadcast:
 * L = sum(convT(tanh(x * w1) + w1, w2) * 0.5). */
typedef struct net {
    tg_tensor *x, *w1, *w2, *loss;
} net;

static void net_build(net *n)
{
    int64_t xs[3] = {1, 1, 5}, ws[3] = {1, 2, 3};
    n->x = th_rand_uniform(TG_F64, 3, xs, 1);
    n->w1 = th_rand_uniform(TG_F64, 3, xs, 2);
    n->w2 = th_rand_uniform(TG_F64, 3, ws, 3);
    OK(tg_tensor_set_requires_grad(n->w1, true));
    OK(tg_tensor_set_requires_grad(n->w2, true));
    tg_tensor *t[5] = {0};
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = 2;
    OK(tg_mul(&t[0], n->x, n->w1));
    OK(tg_tanh(&t[1], t[0]));
    OK(tg_add(&t[2], t[1], n->w1));
    OK(tg_conv_transpose(&t[3], t[2], n->w2, NULL, &p));
    OK(tg_mul_scalar(&t[4], t[3], 0.5));
    OK(tg_sum(&n->loss, t[4]));
    th_release_all(5, t);
}

static void net_free(net *n) { th_release_all(4, (tg_tensor *[]){n->loss, n->w2, n->w1, n->x}); }

/* What the steps showed: per leaf, the sum of the gradients sent to it, added
 * in the order the steps came (the order the engine adds them). */
typedef struct watch {
    const tg_tensor *leaf[2];
    tg_tensor *sum[2];
    int n_steps;
    uint64_t last_seq;
    bool seed_seen;
    int fail_at;   /* step index whose callback fails, -1 for none */
} watch;

static int on_step(const tg_backward_step *s, void *user)
{
    watch *w = user;
    cr_assert(eq(int, s->index, w->n_steps));
    cr_assert(w->n_steps == 0 || s->seq < w->last_seq, "decreasing seq");
    if (s->index == 0) {
        cr_assert(strcmp(s->op, "sum") == 0 && tg_tensor_numel(s->grad_out) == 1);
        cr_assert(eq(dbl, th_at(s->grad_out, 0), 1.0));
        w->seed_seen = true;
    }
    cr_assert(s->vjp != NULL && s->vjp[0] != '\0');
    w->n_steps++;
    w->last_seq = s->seq;
    if (s->index == w->fail_at) return tg_error_set(TG_EINVAL, "stop at step %d", s->index);
    for (int i = 0; i < s->n_inputs; i++)
        for (int l = 0; l < 2; l++) {
            if (!s->grad_in[i] || s->input_leaf[i] != w->leaf[l]) continue;
            tg_tensor *sum = NULL;
            if (!w->sum[l]) sum = tg_tensor_retain((tg_tensor *)s->grad_in[i]);
            else OK(tg_add(&sum, w->sum[l], (tg_tensor *)s->grad_in[i]));
            tg_tensor_release(w->sum[l]);
            w->sum[l] = sum;
        }
    return TG_OK;
}

/* tg_backward on a, tg_backward_steps(fn, user) on b (two builds of the net):
 * b's leaves get a's gradients bit for bit. */
static void backward_and_steps(net *a, net *b, tg_backward_step_fn fn, void *user)
{
    OK(tg_backward(a->loss, NULL, NULL));
    OK(tg_backward_steps(b->loss, NULL, NULL, fn, user));
    th_expect_same_bits("w1", a->w1, tg_tensor_grad(b->w1), tg_tensor_grad(a->w1));
    th_expect_same_bits("w2", a->w2, tg_tensor_grad(b->w2), tg_tensor_grad(a->w2));
}

Test(tape_view, steps_give_the_gradients_of_backward_bit_for_bit)
{
    net a, b;
    net_build(&a);
    net_build(&b);
    watch w = {.leaf = {b.w1, b.w2}, .fail_at = -1};
    backward_and_steps(&a, &b, on_step, &w);
    cr_assert(eq(int, w.n_steps, 6));
    cr_assert(w.seed_seen);
    /* what the steps showed flowing into each leaf is its whole gradient */
    th_expect_same_bits("steps into w1", a.w1, w.sum[0], tg_tensor_grad(a.w1));
    th_expect_same_bits("steps into w2", a.w2, w.sum[1], tg_tensor_grad(a.w2));
    th_release_all(2, w.sum);
    net_free(&a);
    net_free(&b);
}

Test(tape_view, steps_callback_error_aborts_the_backward)
{
    net n;
    net_build(&n);
    watch w = {.leaf = {n.w1, n.w2}, .fail_at = 2};
    cr_assert(eq(int, tg_backward_steps(n.loss, NULL, NULL, on_step, &w), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "stop at step 2") != NULL, "%s", tg_error_message());
    cr_assert(eq(int, w.n_steps, 3));
    cr_assert(tg_tensor_grad(n.w1) == NULL, "nothing reached the leaves");
    th_release_all(2, w.sum);
    cr_assert(eq(int, tg_backward_steps(n.loss, NULL, NULL, NULL, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_backward_steps(NULL, NULL, NULL, on_step, &w), TG_EINVAL));
    net_free(&n);
}

/* A learner stepping through a backward prints the tape at each step: the
 * tape's printout and its DOT work while the backward runs over the same
 * nodes, and list every node each time. */
typedef struct printing {
    const tg_tensor *loss;
    int steps, nodes_seen;
} printing;

static int print_at_step(const tg_backward_step *s, void *user)
{
    (void)s;
    printing *p = user;
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    cr_assert(mf != NULL);
    OK(tg_tape_print(mf, p->loss));
    OK(tg_graph_to_dot(mf, p->loss));
    fclose(mf);
    p->nodes_seen = count_of(buf, "tanh");
    free(buf);
    p->steps++;
    return TG_OK;
}

Test(tape_view, the_tape_prints_from_a_step)
{
    net a, b;
    net_build(&a);
    net_build(&b);
    printing p = {.loss = b.loss};
    backward_and_steps(&a, &b, print_at_step, &p);
    cr_assert(eq(int, p.steps, 6));
    cr_assert(p.nodes_seen >= 2, "the tanh node in the printout and in the DOT");
    net_free(&a);
    net_free(&b);
}

/* Every built-in op's schema has its own VJP note, which the views show (an
 * op without one gets the generic text). */
Test(tape_view, every_built_in_op_has_a_vjp_note)
{
    const int n = tg_op_count();
    cr_assert(n > 50);
    for (int i = 0; i < n; i++) {
        tg_op_info info;
        const tg_op_schema *op;
        OK(tg_op_info_at(i, &info));
        OK(tg_op_find(&op, info.name));
        cr_assert(info.vjp != NULL && info.vjp[0] != '\0', "%s has no VJP note", info.name);
        cr_assert(tg__vjp_formula(op) == info.vjp, "%s: the views show another text",
                  info.name);
    }
}

/* The gradient a hook sees on a (tanh's output), and the one step shows. */
static int keep_grad(tg_tensor **grad, void *user)
{
    tg_tensor **kept = user;
    OK(tg_tensor_clone(kept, *grad));
    return TG_OK;
}

static int keep_tanh_g(const tg_backward_step *s, void *user)
{
    if (strcmp(s->op, "tanh") == 0) OK(tg_tensor_clone(user, s->grad_out));
    return TG_OK;
}

/* tanh's backward may overwrite its incoming gradient in place when it holds
 * the only reference: the step still shows g as it arrived. */
Test(tape_view, steps_show_each_incoming_gradient_as_it_arrived)
{
    int64_t shape[1] = {5};
    tg_tensor *x = th_rand_uniform(TG_F64, 1, shape, 4), *a = NULL, *b = NULL, *y = NULL;
    tg_tensor *by_hook = NULL, *by_step = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_tanh(&a, x));
    OK(tg_mul(&b, a, a));
    OK(tg_sum(&y, b));
    OK(tg_tensor_register_hook(a, keep_grad, &by_hook));
    OK(tg_backward_steps(y, NULL, NULL, keep_tanh_g, &by_step));
    cr_assert(by_hook != NULL && by_step != NULL);
    th_expect_same_bits("g of tanh", x, by_step, by_hook);
    th_release_all(6, (tg_tensor *[]){by_step, by_hook, y, b, a, x});
}

/* Runs y's backward with stderr captured; returns what was printed. */
static char *captured_backward(tg_tensor *y)
{
    char path[] = "/tmp/tg_trace2_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    cr_assert(dup2(fd, 2) == 2);
    OK(tg_backward(y, NULL, NULL));
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    off_t size = lseek(fd, 0, SEEK_END);
    char *buf = calloc((size_t)size + 1, 1);
    cr_assert(pread(fd, buf, (size_t)size, 0) == size);
    close(fd);
    unlink(path);
    return buf;
}

/* TG_TRACE=2 (read once per process; each Criterion test is a process). */
Test(tape_view, trace_2_prints_each_vjp_with_its_gradients)
{
    cr_assert(eq(int, setenv("TG_TRACE", "2", 1), 0));
    tg_tensor *x, *w, *y = small_graph(&x, &w);
    int64_t big[1] = {40};
    tg_tensor *v = th_seq(TG_F64, 1, big, 1.0, 40.0), *vs = NULL, *z = NULL;
    tg_tensor_set_name(v, "v");
    OK(tg_tensor_set_requires_grad(v, true));
    OK(tg_mul_scalar(&vs, v, 3.0));
    OK(tg_mean(&z, vs));
    char *out = captured_backward(y);
    const char *s0 = strstr(out, "[tape] step 0: #"), *s1 = strstr(out, "[tape] step 1: #");
    cr_assert(s0 && s1 && s0 < s1, "%s", out);
    cr_assert(strstr(s0, " sum 'loss'\n[tape]   vjp: da = g copied to every element of a\n"
                         "[tape]   g: f64 () [1]\n[tape]   -> input 0 (#") != NULL, "%s", out);
    cr_assert(strstr(out, "): f64 (3) [1, 1, 1]\n") != NULL, "%s", out);
    cr_assert(strstr(out, "mul_scalar\n[tape]   vjp: da = g * s\n[tape]   g: f64 (3) [1, 1, 1]\n"
                          "[tape]   -> input 0 (#") != NULL, "%s", out);
    cr_assert(strstr(out, "): f64 (3) [2.5, 2.5, 2.5]\n") != NULL, "%s", out);
    cr_assert(strstr(out, " mul 'xw'\n[tape]   vjp: da = g * b, db = g * a\n") != NULL, "%s", out);
    cr_assert(strstr(out, "-> input 1 (leaf 'w'): f64 (3) [") != NULL, "%s", out);
    cr_assert(strstr(out, "-> input 0 (leaf") == NULL, "x is a constant: %s", out);
    free(out);
    /* 40 elements are summarised */
    out = captured_backward(z);
    cr_assert(strstr(out, "-> input 0 (leaf 'v'): f64 (40) min 0.075 max 0.075 mean 0.075 "
                          "[0.075, 0.075, 0.075, 0.075, ...]\n") != NULL, "%s", out);
    free(out);
    th_release_all(7, (tg_tensor *[]){z, vs, v, y, w, x, NULL});
}
