/* tools/cmd_viz.c - `tapegrad viz --in CASE --out PAGE.html|GRAPH.dot
 * [--algo A]`.
 *
 * Runs the conv op of a case file (case.h) with x, weight and bias as leaves
 * that require grad, takes loss = sum(grad_y * y) (sum(y) without grad_y),
 * and writes its backward as a page to step through in a browser
 * (tg_viz_backward_html), or, for an --out ending in .dot or .gv, the
 * loss's graph as Graphviz DOT with each op's VJP formula
 * (tg_graph_to_dot_ex with show_vjp).  Errors print "tapegrad viz:
 * <message>" and exit 1; usage errors exit 2.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "case.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"
#include "tapegrad/status.h"
#include "tapegrad/viz.h"
#include "tools.h"

static const char viz_usage[] =
    "usage: tapegrad viz --in CASE.safetensors --out PAGE.html|GRAPH.dot\n"
    "                    [--algo reference|fast]\n"
    "Runs the conv op of CASE (x, weight, [bias], [grad_y] and metadata as for\n"
    "run-op), takes loss = sum(grad_y * y), or sum(y) without grad_y, and writes\n"
    "its backward as a self-contained HTML page: open it in a browser and step\n"
    "through it with the arrow keys.  An --out ending in .dot or .gv gets the\n"
    "loss's graph as Graphviz DOT instead, each op's VJP formula on its node\n"
    "(dot -Tsvg GRAPH.dot > GRAPH.svg draws it).\n";

/* A copy of a case tensor (borrowed from the file) as a named leaf. */
static int leaf(tg_tensor **out, const tg_tensor *t, const char *name)
{
    if (!t) return TG_OK;
    int rc = tg_tensor_clone(out, t);
    if (rc < 0) return rc;
    tg_tensor_set_name(*out, name);
    return tg_tensor_set_requires_grad(*out, true);
}

/* The loss of the case (a new reference in *loss). */
static int case_loss(tg_tensor **loss, const tg_case *c, tg_tensor *const *p, tg_conv_algo algo)
{
    tg_conv_params prm = c->params;
    tg_tensor *y = NULL, *yg = NULL;
    prm.algo = algo;
    int rc = c->transpose ? tg_conv_transpose(&y, p[0], p[1], p[2], &prm)
                          : tg_conv(&y, p[0], p[1], p[2], &prm);
    if (rc >= 0) tg_tensor_set_name(y, "y");
    if (rc >= 0 && c->grad_y) rc = tg_mul(&yg, y, c->grad_y);
    if (rc >= 0) rc = tg_sum(loss, yg ? yg : y);
    if (rc >= 0) tg_tensor_set_name(*loss, "loss");
    tg_tensor_release(yg);
    tg_tensor_release(y);
    return rc;
}

/* True when path ends in suffix. */
static bool ends_with(const char *path, const char *suffix)
{
    const size_t n = strlen(path), k = strlen(suffix);
    return n > k && strcmp(path + n - k, suffix) == 0;
}

/* Writes a->out: the graph of loss as DOT, with each op's VJP formula in its
 * label, for a path ending in .dot or .gv; else the page.  A failed write
 * leaves no file. */
static int write_out(const tg_case_args *a, const tg_case *c, tg_tensor *loss)
{
    FILE *f = fopen(a->out, "w");
    if (!f) return tg_error_set(TG_EIO, "cannot write %s", a->out);
    int rc;
    if (ends_with(a->out, ".dot") || ends_with(a->out, ".gv")) {
        tg_dot_opts o = TG_DOT_OPTS_INIT;
        o.show_vjp = true;
        rc = tg_graph_to_dot_ex(f, loss, &o);
    } else {
        char title[256];
        snprintf(title, sizeof title, "%s: backward of loss = sum(%sy)", c->op,
                 c->grad_y ? "grad_y * " : "");
        tg_viz_opts o = TG_VIZ_OPTS_INIT;
        o.title = title;
        rc = tg_viz_backward_html(f, loss, NULL, &o);
    }
    if (fclose(f) != 0 && rc >= 0) rc = tg_error_set(TG_EIO, "cannot write %s", a->out);
    if (rc < 0) remove(a->out);
    return rc;
}

static int run(const tg_case_args *a)
{
    char err[1024] = "";
    tg_st_file *in = NULL;
    tg_case c;
    tg_tensor *p[3] = {NULL, NULL, NULL}, *loss = NULL;
    int rc = tg_safetensors_load(&in, a->in);
    if (rc < 0) snprintf(err, sizeof err, "cannot read %s: %s", a->in, tg_error_message());
    if (rc >= 0) rc = tg_case_parse(&c, in, err, sizeof err);
    if (rc >= 0 && c.quantized) {
        rc = TG_EUNSUPPORTED;
        snprintf(err, sizeof err, "%s has no backward to show (quantized ops are inference only)",
                 c.op);
    }
    if (rc >= 0) {
        rc = leaf(&p[0], c.x, "x");
        if (rc >= 0) rc = leaf(&p[1], c.weight, "weight");
        if (rc >= 0) rc = leaf(&p[2], c.bias, "bias");
        if (rc >= 0) rc = case_loss(&loss, &c, p, a->algo);
        if (rc >= 0) rc = write_out(a, &c, loss);
        if (rc < 0) snprintf(err, sizeof err, "%s", tg_error_message());
    }
    tg_tensor_release(loss);
    for (int i = 0; i < 3; i++) tg_tensor_release(p[i]);
    tg_st_free(in);
    if (rc < 0) {
        fprintf(stderr, "tapegrad viz: %s\n", err);
        return TG_EXIT_FAIL;
    }
    printf("wrote %s\n", a->out);
    return TG_EXIT_OK;
}

int tg_cmd_viz(int argc, char **argv)
{
    tg_case_args a;
    int code = tg_tool_case_args("viz", viz_usage, argc, argv, &a);
    return code >= 0 ? code : run(&a);
}
