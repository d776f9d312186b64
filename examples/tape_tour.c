/* tape_tour: a guided tour of tapegrad's tape for learners.
 *
 * It builds a small network step by step,
 *     x -> Linear(3, 4) -> tanh -> reshape -> ConvTranspose1d(1, 2, k=3, s=2) -> mean,
 * shows the node each op records and says in words what it is for, prints the
 * whole tape, writes it as Graphviz DOT (tape.dot, or the path given as the
 * first argument), runs backward while hooks report the order in which the
 * engine reaches each tensor, prints the gradients, and finally takes a
 * second derivative with create_graph (checked against a formula and against
 * finite differences).  Last, it writes the backward as an HTML page beside
 * the DOT file (tape.html) to step through in a browser.
 *
 *   build/examples/tape_tour [tape.dot]
 *   TG_TRACE=1 build/examples/tape_tour     # the library's own trace on stderr
 *
 * Exit status 0, 1 when the DOT file or stdout cannot be written (the
 * reason is printed), 2 for a usage error (an unknown option, more than one
 * path); --help prints the usage on stdout.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tapegrad/tapegrad.h>

#define CHECK(call)                                                               \
    do {                                                                          \
        int rc_ = (call);                                                         \
        if (rc_ < 0) {                                                            \
            fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__,     \
                    #call, tg_status_name(rc_), tg_error_message());              \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

/* The leaves of the network: parameters (requires_grad) and the input. */
typedef struct net {
    tg_tensor *x;        /* (B=2, 3) input, a constant */
    tg_tensor *w1, *b1;  /* Linear: (4, 3), (4) */
    tg_tensor *w2, *b2;  /* ConvTranspose1d: (C_in=1, C_out=2, K=3), (2) */
} net;

/* The intermediate tensors of one forward pass (all new references). */
typedef struct acts {
    tg_tensor *h, *a, *r, *y, *loss;
} acts;

static void say(const char *text) { printf("    %s\n", text); }

/* Prints the newest node of t's tape: the last line of tg_tape_print. */
static void show_new_node(const tg_tensor *t)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) return;
    CHECK(tg_tape_print(mem, t));
    fclose(mem);
    while (len > 0 && buf[len - 1] == '\n') buf[--len] = '\0';
    const char *last = strrchr(buf, '\n');
    printf("  recorded: %s\n", last ? last + 1 : buf);
    free(buf);
}

static tg_tensor *leaf(tg_rng *rng, const char *name, int ndim, const int64_t *shape,
                       double std, bool requires_grad)
{
    tg_tensor *t;
    CHECK(tg_tensor_zeros(&t, TG_F64, ndim, shape));
    CHECK(tg_tensor_rand_normal(t, rng, 0.0, std));
    tg_tensor_set_name(t, name);
    CHECK(tg_tensor_set_requires_grad(t, requires_grad));
    return t;
}

static void net_init(net *n)
{
    tg_rng rng;
    tg_rng_init(&rng, 7);
    n->x = leaf(&rng, "x", 2, (int64_t[]){2, 3}, 1.0, false);
    n->w1 = leaf(&rng, "W1", 2, (int64_t[]){4, 3}, 0.5, true);
    n->b1 = leaf(&rng, "b1", 1, (int64_t[]){4}, 0.1, true);
    n->w2 = leaf(&rng, "w2", 3, (int64_t[]){1, 2, 3}, 0.5, true);
    n->b2 = leaf(&rng, "b2", 1, (int64_t[]){2}, 0.1, true);
}

static void net_free(net *n)
{
    tg_tensor *all[] = {n->x, n->w1, n->b1, n->w2, n->b2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
}

static void acts_free(acts *a)
{
    tg_tensor_release(a->loss);
    tg_tensor_release(a->y);
    tg_tensor_release(a->r);
    tg_tensor_release(a->a);
    tg_tensor_release(a->h);
    memset(a, 0, sizeof *a);
}

/* One forward pass; with explain, narrates each recorded node. */
static void forward(const net *n, acts *o, bool explain)
{
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = 2;

    CHECK(tg_linear(&o->h, n->x, n->w1, n->b1));   /* h = x W1^T + b1, (2, 4) */
    if (explain) {
        printf("\nStep 1: h = linear(x, W1, b1) = x W1^T + b1, shape (2, 4)\n");
        show_new_node(o->h);
        say("x is a constant (nobody asked for its gradient), so it shows as 'const'.");
        say("W1 and b1 are leaves with requires_grad: the node keeps an edge to each.");
        say("It saves x alone: dL/dW1 = dL/dh^T x needs x; W1 would be needed only");
        say("for dL/dx = dL/dh W1, and x is a constant, so W1 is not kept (saved: 1).");
    }
    CHECK(tg_tanh(&o->a, o->h));                    /* a = tanh(h), (2, 4) */
    if (explain) {
        printf("\nStep 2: a = tanh(h)\n");
        show_new_node(o->a);
        say("Its input is the output of the previous node, so the edge points to that node,");
        say("not to a tensor: nodes own the nodes of their inputs, never their outputs.");
        say("It saves its output a: d tanh/dh = 1 - a^2, so backward computes no tanh.");
        say("(A detached alias of a: saving a itself would make the cycle a -> node -> a.)");
    }
    CHECK(tg_reshape(&o->r, o->a, 3, (int64_t[]){2, 1, 4}));   /* (B, C_in=1, L=4) */
    if (explain) {
        printf("\nStep 3: r = reshape(a, (2, 1, 4)), a batch of 1-channel signals of length 4\n");
        show_new_node(o->r);
        say("A view: no data is copied, but it is still recorded, because its backward");
        say("has to reshape the incoming gradient back to (2, 4).");
    }
    /* L_out = (L - 1) * stride + K = 3 * 2 + 3 = 9 */
    CHECK(tg_conv_transpose(&o->y, o->r, n->w2, n->b2, &p));
    if (explain) {
        printf("\nStep 4: y = conv_transpose1d(r, w2, b2, stride=2), shape (2, 2, 9)\n");
        show_new_node(o->y);
        say("Each input sample scatters a copy of the 3-tap kernel, scaled by its value,");
        say("into the output at position 2*i: L_out = (4 - 1) * 2 + 3 = 9.");
        say("It saves r and w2. Its backward is a Conv1d of dL/dy with w2 (for dL/dr)");
        say("and a weight-gradient op (for dL/dw2): differentiable ops, so they can be");
        say("recorded too (see the second-derivative part at the end).");
    }
    CHECK(tg_mean(&o->loss, o->y));                 /* 0-d */
    if (explain) {
        printf("\nStep 5: loss = mean(y), a single number\n");
        show_new_node(o->loss);
        say("Its backward spreads the gradient 1 evenly: dL/dy = 1/36 everywhere.");
    }
}

/* A hook that reports when the engine reaches a tensor; user is its label. */
static int announce(tg_tensor **grad, void *user)
{
    char shape[64];
    const tg_tensor *g = *grad;
    double first;
    CHECK(tg_tensor_get_flat(g, 0, &first));
    printf("  gradient of %-28s ready: %s, first element %+.6f\n", (const char *)user,
           tg_shape_str(shape, sizeof shape, tg_tensor_ndim(g), tg_tensor_shape(g)), first);
    return TG_OK;
}

/* Closes f, written by a call that returned rc, and exits with the reason if
 * the call or any write failed (a full disk shows up at the last write, which
 * fclose does). */
static void close_or_exit(FILE *f, const char *path, int rc)
{
    int err = ferror(f) ? errno : 0;
    if (fclose(f) != 0 && !err) err = errno;
    if (rc < 0 || err) {
        fprintf(stderr, "tape_tour: cannot write %s: %s\n", path,
                rc < 0 ? tg_error_message() : strerror(err));
        exit(1);
    }
}

/* Writes the tape of loss as DOT to path; exits with status 1 and the
 * reason when the file cannot be opened or written whole. */
static void write_dot(const tg_tensor *loss, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "tape_tour: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
    tg_dot_opts o = TG_DOT_OPTS_INIT;
    o.show_vjp = true;   /* each op's vector-Jacobian product under its name */
    close_or_exit(f, path, tg_graph_to_dot_ex(f, loss, &o));
    printf("\nThe same tape as a Graphviz graph is in %s: square boxes are op nodes, with\n"
           "the vector-Jacobian product each one's backward computes on its last line;\n"
           "rounded ones leaves (grey: constants; dashed: tensors saved for backward),\n"
           "arrows follow the forward computation, the root is red.\n", path);
    if (system("command -v dot >/dev/null 2>&1") == 0)
        printf("Graphviz is installed; draw it with:  dot -Tpng %s -o tape.png\n", path);
    else
        printf("Install Graphviz (apt install graphviz) and run:  dot -Tpng %s -o tape.png\n",
               path);
}

static void show_backward(net *n, acts *o)
{
    printf("\n== Backward ==\n");
    printf("tg_backward(loss) visits the nodes in decreasing sequence number. A node is\n"
           "always recorded after the nodes of its inputs, so by the time the engine\n"
           "reaches a node, every user of its output has already sent its share of the\n"
           "gradient. Hooks print each gradient as it becomes known:\n\n");
    CHECK(tg_tensor_register_hook(o->loss, announce, "loss (seed: 1)"));
    CHECK(tg_tensor_register_hook(o->y, announce, "y = conv_transpose(r)"));
    CHECK(tg_tensor_register_hook(o->r, announce, "r = reshape(a)"));
    CHECK(tg_tensor_register_hook(o->a, announce, "a = tanh(h)"));
    CHECK(tg_tensor_register_hook(o->h, announce, "h = linear(x)"));
    CHECK(tg_tensor_register_hook(n->w1, announce, "leaf W1"));
    CHECK(tg_tensor_register_hook(n->b1, announce, "leaf b1"));
    CHECK(tg_tensor_register_hook(n->w2, announce, "leaf w2"));
    CHECK(tg_tensor_register_hook(n->b2, announce, "leaf b2"));
    CHECK(tg_backward(o->loss, NULL, NULL));
    printf("\nLeaves come last: their total gradient is added into .grad at the end.\n"
           "(Run with TG_TRACE=1 to see the library's own record/backward trace.)\n"
           "Without retain_graph each node dropped its saved tensors once its backward\n"
           "ran: a second tg_backward(loss) would now fail with TG_EGRAD.\n\n");
    printf("dL/db2 (each output channel's bias touches 2*9 of the 36 outputs: 18/36 = 0.5):\n");
    CHECK(tg_tensor_print(stdout, tg_tensor_grad(n->b2), 8));
    printf("dL/dw2 (every tap meets every input value once: dL/dw2[0,c,k] = sum(r)/36):\n");
    CHECK(tg_tensor_print(stdout, tg_tensor_grad(n->w2), 8));
    printf("dL/dW1:\n");
    CHECK(tg_tensor_print(stdout, tg_tensor_grad(n->w1), 12));
    printf("dL/db1:\n");
    CHECK(tg_tensor_print(stdout, tg_tensor_grad(n->b1), 4));
}

/* d^2/du^2 tanh(u) at u0 through create_graph; compared with the formula. */
static void scalar_second_derivative(double u0)
{
    tg_tensor *u, *f, *df, *d2f;
    tg_backward_opts cg = {.create_graph = true};
    CHECK(tg_tensor_scalar(&u, TG_F64, u0));
    tg_tensor_set_name(u, "u");
    CHECK(tg_tensor_set_requires_grad(u, true));
    CHECK(tg_tanh(&f, u));
    CHECK(tg_grad(&df, 1, &f, NULL, 1, &u, &cg));   /* df is itself on a tape */
    printf("\nf = tanh(u) at u = %.2f.  g = df/du with create_graph has a tape of its own:\n",
           u0);
    CHECK(tg_tape_print(stdout, df));
    printf("  (#6 was f = tanh(u) itself. Its backward took the output t it saved (back\n"
           "  with #6 as its grad_fn), squared it, took 1 - t^2 and multiplied by the\n"
           "  incoming gradient 1: three new nodes.)\n");
    CHECK(tg_grad(&d2f, 1, &df, NULL, 1, &u, NULL));
    double t = tanh(u0), g1, g2;
    CHECK(tg_tensor_get_flat(df, 0, &g1));
    CHECK(tg_tensor_get_flat(d2f, 0, &g2));
    printf("  f'(u)  = %+.12f   formula 1 - tanh^2          = %+.12f\n", g1, 1 - t * t);
    printf("  f''(u) = %+.12f   formula -2 tanh (1 - tanh^2) = %+.12f\n", g2,
           -2 * t * (1 - t * t));
    tg_tensor_release(d2f);
    tg_tensor_release(df);
    tg_tensor_release(f);
    tg_tensor_release(u);
}

/* penalty(W1) = sum((dL/dw2)^2); with want_grad, also d penalty / d W1. */
static double penalty(net *n, tg_tensor **dpen_dw1)
{
    acts o = {0};
    tg_tensor *g, *g2, *pen;
    tg_backward_opts cg = {.create_graph = dpen_dw1 != NULL};
    forward(n, &o, false);
    CHECK(tg_grad(&g, 1, &o.loss, NULL, 1, &n->w2, &cg));
    CHECK(tg_mul(&g2, g, g));
    CHECK(tg_sum(&pen, g2));
    if (dpen_dw1) CHECK(tg_grad(dpen_dw1, 1, &pen, NULL, 1, &n->w1, NULL));
    double v;
    CHECK(tg_tensor_get_flat(pen, 0, &v));
    tg_tensor_release(pen);
    tg_tensor_release(g2);
    tg_tensor_release(g);
    acts_free(&o);
    return v;
}

static void network_second_derivative(net *n)
{
    printf("\nA gradient penalty, as WGAN-GP uses: P = sum((dL/dw2)^2). dL/dw2 depends on\n"
           "W1 (through r), so dP/dW1 is a second derivative: backward of a backward.\n");
    tg_tensor *dp;
    double p0 = penalty(n, &dp), analytic, w;
    CHECK(tg_tensor_get_flat(dp, 0, &analytic));
    /* Central difference on W1[0, 0]: (P(w + e) - P(w - e)) / 2e, error O(e^2). */
    const double e = 1e-5;
    CHECK(tg_tensor_get_flat(n->w1, 0, &w));
    CHECK(tg_tensor_set_flat(n->w1, 0, w + e));
    double pp = penalty(n, NULL);
    CHECK(tg_tensor_set_flat(n->w1, 0, w - e));
    double pm = penalty(n, NULL);
    CHECK(tg_tensor_set_flat(n->w1, 0, w));
    printf("  P = %.10f\n  dP/dW1[0,0]: create_graph %+.10f, finite differences %+.10f\n", p0,
           analytic, (pp - pm) / (2 * e));
    tg_tensor_release(dp);
}

/* The HTML path beside the DOT one: a.dot -> a.html, other names + ".html". */
static char *html_path_for(const char *dot_path)
{
    size_t n = strlen(dot_path);
    if (n > 4 && !strcmp(dot_path + n - 4, ".dot")) n -= 4;
    char *p = malloc(n + 6);
    if (!p) {
        fprintf(stderr, "tape_tour: out of memory\n");
        exit(1);
    }
    memcpy(p, dot_path, n);
    memcpy(p + n, ".html", 6);
    return p;
}

/* A fresh forward pass whose backward is written as a page to step through
 * in a browser (tg_viz_backward_html runs the backward itself). */
static void write_html(const char *dot_path)
{
    if (!tg_viz_available()) {
        printf("\n(This build has no Graphviz library, so no HTML page: install\n"
               "libgraphviz-dev and rebuild.)\n");
        return;
    }
    char *path = html_path_for(dot_path);
    net n;
    acts o = {0};
    net_init(&n);
    forward(&n, &o, false);
    tg_tensor_set_name(o.h, "h");
    tg_tensor_set_name(o.a, "a");
    tg_tensor_set_name(o.r, "r");
    tg_tensor_set_name(o.y, "y");
    tg_tensor_set_name(o.loss, "loss");
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "tape_tour: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
    tg_viz_opts vo = TG_VIZ_OPTS_INIT;
    vo.title = "tape_tour: loss = mean(convT1d(reshape(tanh(linear(x)))))";
    close_or_exit(f, path, tg_viz_backward_html(f, o.loss, NULL, &vo));
    printf("\nThe backward, one vector-Jacobian product at a time, is in %s: open it in a\n"
           "browser and step with the arrow keys.\n", path);
    acts_free(&o);
    net_free(&n);
    free(path);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: tape_tour [FILE.dot (tape.dot)]\n"
               "  Builds a small network, narrates its tape, writes it as Graphviz DOT to\n"
               "  FILE.dot, runs backward and takes a second derivative; writes the\n"
               "  backward as a page to step through in a browser to FILE.html.\n"
               "  TG_TRACE=1 adds the library's own trace on stderr.\n");
}

/* The DOT path from the command line (after "--", a name may start with
 * '-'), or NULL after --help (*status 0) or a usage error (*status 2,
 * printed). */
static const char *parse_args(int argc, char **argv, int *status)
{
    const char *path = NULL;
    bool options = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
            usage(stdout);
            *status = 0;
            return NULL;
        }
        if (options && !strcmp(a, "--")) {
            options = false;
            continue;
        }
        if (options && a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "tape_tour: unknown option '%s'\n", a);
            goto usage_error;
        }
        if (path) {
            fprintf(stderr, "tape_tour: one DOT file only, got '%s' and '%s'\n", path, a);
            goto usage_error;
        }
        if (a[0] == '\0') {
            fprintf(stderr, "tape_tour: the DOT file name is empty\n");
            goto usage_error;
        }
        path = a;
    }
    return path ? path : "tape.dot";
usage_error:
    usage(stderr);
    *status = 2;
    return NULL;
}

int main(int argc, char **argv)
{
    int status;
    const char *dot_path = parse_args(argc, argv, &status);
    if (!dot_path) return status;
    net n;
    acts o = {0};
    net_init(&n);

    printf("== Forward: every op that touches a tensor with requires_grad records a node ==\n");
    printf("Each node holds: the op, edges to its inputs (their nodes, or the leaves\n"
           "themselves), the tensors its backward needs ('saved') and a sequence number.\n");
    forward(&n, &o, true);

    printf("\n== The whole tape of loss (tg_tape_print), in recording order ==\n");
    CHECK(tg_tape_print(stdout, o.loss));
    write_dot(o.loss, dot_path);

    show_backward(&n, &o);
    acts_free(&o);

    printf("\n== Second derivatives with create_graph ==\n");
    printf("With create_graph the backward ops are recorded as they run, so a gradient\n"
           "is an ordinary tensor on a tape and can be differentiated again.\n");
    scalar_second_derivative(0.5);
    net_free(&n);
    net_init(&n);   /* the same values, without the printing hooks */
    network_second_derivative(&n);

    net_free(&n);
    write_html(dot_path);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "tape_tour: cannot write to stdout: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}
