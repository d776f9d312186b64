/* Views of a tape: Graphviz DOT and a one-line-per-node listing.
 *
 * DOT ids (also the SVG element ids of the HTML page): an op node is
 * n<seq>; a leaf leaf_<address>; a saved tensor t_<address>; a constant
 * input that was not saved c<seq>_<input>; a scalar operand s<seq>; the
 * edge from an input to its node e_<from>_<to>. */
#include "core/core.h"
#include "autograd/tape.h"

/* The nodes behind t sorted by seq, in a new array the caller frees; op names
 * the public function in the messages. */
static int collect(const char *op, FILE *f, const tg_tensor *t, tg_node ***nodes, int *count)
{
    TG_CHECK(f != NULL, TG_EINVAL, "%s: f must not be NULL", op);
    TG_CHECK(t != NULL, TG_EINVAL, "%s: t must not be NULL", op);
    tg_tensor *root = (tg_tensor *)t;   /* only read */
    return tg__tape_collect_read(&root, 1, nodes, count);
}

/* Addresses of the tensors declared so far, so each is declared once.  A
 * linear search: tapes drawn for reading have at most a few hundred. */
typedef struct declared {
    const void **items;
    int len, cap;
} declared;

/* True when p was declared before; else records it (false).  Out of memory
 * only means a tensor may be declared twice, which DOT merges. */
static bool seen(declared *d, const void *p)
{
    for (int i = 0; i < d->len; i++)
        if (d->items[i] == p) return true;
    if (d->len == d->cap) {
        int cap = d->cap ? 2 * d->cap : 32;
        const void **items = realloc(d->items, (size_t)cap * sizeof *items);
        if (!items) return false;
        d->items = items;
        d->cap = cap;
    }
    d->items[d->len++] = p;
    return false;
}

typedef struct dot_ctx {
    FILE *f;
    tg_dot_opts o;
    declared decl;
} dot_ctx;

/* Writes s as the inside of a DOT string. */
static void put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
}

static void put_values(dot_ctx *c, const char *what, const tg_tensor *t)
{
    char buf[512];
    fprintf(c->f, "\\n%s", what);
    put_escaped(c->f, tg__values_str(buf, sizeof buf, t, c->o.max_elems));
}

/* "f64 (3, 4)" for a tensor or a recorded meta. */
static const char *meta_str(char *buf, size_t size, tg_dtype dt, int ndim, const int64_t *shape)
{
    char sh[96];
    snprintf(buf, size, "%s %s", tg_dtype_name(dt), tg_shape_str(sh, sizeof sh, ndim, shape));
    return buf;
}

/* A tensor the tape holds (a leaf, or a saved tensor): its name (or `kind`),
 * dtype, shape and, when asked, values and gradient. */
static void dot_tensor(dot_ctx *c, const char *id, const tg_tensor *t, const char *kind,
                       const char *style)
{
    char meta[128];
    fprintf(c->f, "  \"%s\" [id=\"%s\", %s, label=\"", id, id, style);
    if (t->name[0]) {
        put_escaped(c->f, t->name);
        if (kind[0]) fprintf(c->f, " (%s)", kind);
    } else {
        fputs(kind[0] ? kind : "leaf", c->f);
    }
    fprintf(c->f, "\\n%s", meta_str(meta, sizeof meta, t->dtype, t->ndim, t->shape));
    if (c->o.show_values) put_values(c, "", t);
    if (c->o.show_grads && t->grad) put_values(c, "grad ", t->grad);
    fprintf(c->f, "\"];\n");
}

static const char *leaf_style(bool root)
{
    return root ? "shape=box, style=rounded, penwidth=3, color=red" : "shape=box, style=rounded";
}

void tg__dot_leaf_id(char *buf, size_t size, const tg_tensor *leaf)
{
    snprintf(buf, size, "leaf_%p", (const void *)leaf);
}

static void dot_leaf(dot_ctx *c, const tg_tensor *leaf, bool root)
{
    char id[48];
    tg__dot_leaf_id(id, sizeof id, leaf);
    if (!seen(&c->decl, leaf)) dot_tensor(c, id, leaf, "", leaf_style(root));
}

/* The saved tensor of n that is its input i, or -1. */
static int saved_slot_of_input(const tg_node *n, int i)
{
    for (int k = 0; k < n->n_saved; k++)
        if (n->saved[k].t && (uintptr_t)n->saved[k].t == n->in_id[i]) return k;
    return -1;
}

/* The input i of n that saved tensor k is, or -1. */
static int input_of_saved(const tg_node *n, int k)
{
    for (int i = 0; i < n->n_inputs; i++)
        if (n->in_meta[i].ndim >= 0 && (uintptr_t)n->saved[k].t == n->in_id[i]) return i;
    return -1;
}

void tg__dot_input_id(char *buf, size_t size, const tg_node *n, int i)
{
    const tg_edge *e = &n->edges[i];
    int k = e->fn || e->leaf ? -1 : saved_slot_of_input(n, i);
    if (e->fn) snprintf(buf, size, "n%llu", (unsigned long long)e->fn->seq);
    else if (e->leaf) tg__dot_leaf_id(buf, size, e->leaf);
    else if (k >= 0) snprintf(buf, size, "t_%p", (const void *)n->saved[k].t);
    else snprintf(buf, size, "c%llu_%d", (unsigned long long)n->seq, i);
}

static const char *const const_style =
    "shape=box, style=\"rounded,filled\", fillcolor=\"#eeeeee\", fontsize=10";
static const char *const saved_style = "shape=box, style=\"dashed,rounded\", fontsize=10";

/* The inputs of n that are not leaves with requires_grad nor node outputs:
 * constants (a saved one shows its name and values) and the scalar operand. */
static void dot_operands(dot_ctx *c, const tg_node *n)
{
    char id[64], meta[128];
    for (int i = 0; i < n->n_inputs; i++) {
        const tg_edge *e = &n->edges[i];
        if (n->in_meta[i].ndim < 0 || e->fn || e->leaf) continue;
        tg__dot_input_id(id, sizeof id, n, i);
        int k = saved_slot_of_input(n, i);
        if (k >= 0) {
            if (!seen(&c->decl, n->saved[k].t))
                dot_tensor(c, id, n->saved[k].t, "constant", const_style);
        } else {
            const tg_meta *m = &n->in_meta[i];
            fprintf(c->f, "  \"%s\" [id=\"%s\", %s, label=\"constant\\n%s\"];\n", id, id,
                    const_style, meta_str(meta, sizeof meta, m->dtype, m->ndim, m->shape));
        }
    }
    double v;
    const char *sym;
    if (tg__node_scalar(n, &v, &sym)) {
        fprintf(c->f, "  \"s%llu\" [id=\"s%llu\", %s, label=\"%s = %.6g\"];\n",
                (unsigned long long)n->seq, (unsigned long long)n->seq, const_style, sym, v);
        fprintf(c->f, "  \"s%llu\" -> \"n%llu\" [id=\"e_s%llu_n%llu\"];\n",
                (unsigned long long)n->seq, (unsigned long long)n->seq,
                (unsigned long long)n->seq, (unsigned long long)n->seq);
    }
}

/* True when saved tensor t is n's own output (a detached alias of it, as
 * tanh saves): known only while the output is alive. */
static bool is_own_output(const tg_node *n, const tg_tensor *t)
{
    const tg_tensor *y = n->out;
    return y && t->storage == y->storage && t->offset == y->offset && tg_tensor_same_shape(t, y);
}

/* Dashed edges from each saved tensor to n; a saved tensor that is not an
 * input gets a node of its own (declared once). */
static void dot_saved(dot_ctx *c, const tg_node *n)
{
    char from[64], to[32];
    snprintf(to, sizeof to, "n%llu", (unsigned long long)n->seq);
    for (int k = 0; k < n->n_saved; k++) {
        const tg_tensor *t = n->saved[k].t;
        if (!t || is_own_output(n, t)) continue;
        int i = input_of_saved(n, k);
        if (i >= 0) {
            tg__dot_input_id(from, sizeof from, n, i);
        } else {
            snprintf(from, sizeof from, "t_%p", (const void *)t);
            if (!seen(&c->decl, t)) dot_tensor(c, from, t, "saved", saved_style);
        }
        fprintf(c->f, "  \"%s\" -> \"%s\" [id=\"saved_%s_%s_%d\", style=dashed, color=gray40, "
                      "fontsize=9, label=\"saved\", constraint=false];\n",
                from, to, from, to, k);
    }
}

/* A tooltip attribute: Graphviz's SVG shows it when the pointer rests on
 * the node. */
static void put_tooltip(FILE *f, const char *text)
{
    fputs("tooltip=\"", f);
    put_escaped(f, text);
    fputs("\", ", f);
}

static void dot_node(dot_ctx *c, const tg_node *n, bool root)
{
    char meta[128];
    unsigned long long seq = (unsigned long long)n->seq;
    /* an op without a formula gets neither a tooltip nor a label line,
     * rather than the steps' generic text */
    const char *vjp = tg__vjp_given(n->op);
    fprintf(c->f, "  \"n%llu\" [id=\"n%llu\", shape=box, ", seq, seq);
    if (vjp) put_tooltip(c->f, vjp);
    fprintf(c->f, "label=\"#%llu %s\\n", seq, n->op->name);
    if (n->name[0]) {
        put_escaped(c->f, n->name);
        fputs(": ", c->f);
    }
    fputs(meta_str(meta, sizeof meta, n->out_meta.dtype, n->out_meta.ndim, n->out_meta.shape),
          c->f);
    if (c->o.show_values && n->out) put_values(c, "", n->out);
    bool saves_out = false;
    for (int k = 0; k < n->n_saved; k++)
        saves_out |= n->saved[k].t && is_own_output(n, n->saved[k].t);
    if (c->o.show_saved && saves_out) fputs("\\nsaves its output", c->f);
    if (c->o.show_vjp && vjp) {
        fputs("\\n", c->f);
        put_escaped(c->f, vjp);
    }
    fprintf(c->f, "\"%s];\n", root ? ", penwidth=3, color=red" : "");
}

static void dot_edges(dot_ctx *c, const tg_node *n)
{
    char from[64];
    for (int i = 0; i < n->n_inputs; i++) {
        if (n->in_meta[i].ndim < 0) continue;
        if (n->edges[i].leaf) dot_leaf(c, n->edges[i].leaf, false);
        tg__dot_input_id(from, sizeof from, n, i);
        /* the input's slot in the id: x * x has two edges from x */
        fprintf(c->f, "  \"%s\" -> \"n%llu\" [id=\"e_%s_n%llu_%d\"];\n", from,
                (unsigned long long)n->seq, from, (unsigned long long)n->seq, i);
    }
}

int tg_graph_to_dot_ex(FILE *f, const tg_tensor *t, const tg_dot_opts *opts)
{
    tg_dot_opts o = opts ? *opts : (tg_dot_opts)TG_DOT_OPTS_INIT;
    TG_CHECK(o.max_elems >= 0, TG_EINVAL, "graph_to_dot: opts->max_elems=%d must be >= 0",
             o.max_elems);
    tg_node **nodes = NULL;
    int count = 0;
    TG_TRY(collect("graph_to_dot", f, t, &nodes, &count));
    dot_ctx c = {.f = f, .o = o};
    fprintf(f, "digraph tape {\n  rankdir=TB;\n  node [fontname=\"Courier\"];\n"
               "  edge [fontname=\"Courier\"];\n");
    if (!t->grad_fn) dot_leaf(&c, t, true);
    for (int k = 0; k < count; k++) {
        dot_node(&c, nodes[k], nodes[k] == t->grad_fn);
        dot_operands(&c, nodes[k]);
        dot_edges(&c, nodes[k]);
        if (o.show_saved) dot_saved(&c, nodes[k]);
    }
    if (t->grad_fn)
        fprintf(f, "  root [id=\"root\", shape=plaintext, label=\"root\"];\n"
                   "  \"n%llu\" -> root [style=dashed];\n",
                (unsigned long long)t->grad_fn->seq);
    fprintf(f, "}\n");
    free(c.decl.items);
    free(nodes);
    return TG_OK;
}

int tg_graph_to_dot(FILE *f, const tg_tensor *t) { return tg_graph_to_dot_ex(f, t, NULL); }

static void print_input(FILE *f, const tg_node *n, int i)
{
    const tg_edge *e = &n->edges[i];
    if (n->in_meta[i].ndim < 0) {
        fprintf(f, "none");
    } else if (e->fn) {
        fprintf(f, "#%llu", (unsigned long long)e->fn->seq);
    } else if (e->leaf) {
        char shape[96];
        if (e->leaf->name[0]) fprintf(f, "leaf '%s'", e->leaf->name);
        else fprintf(f, "leaf %s", tg_shape_str(shape, sizeof shape, e->leaf->ndim, e->leaf->shape));
    } else {
        fprintf(f, "const");
    }
}

int tg_tape_print(FILE *f, const tg_tensor *t)
{
    tg_node **nodes = NULL;
    int count = 0;
    TG_TRY(collect("tape_print", f, t, &nodes, &count));
    if (count == 0) fprintf(f, "(empty tape: the tensor has no grad_fn)\n");
    for (int k = 0; k < count; k++) {
        const tg_node *n = nodes[k];
        char shape[96];
        fprintf(f, "#%llu %s  inputs: ", (unsigned long long)n->seq, n->op->name);
        for (int i = 0; i < n->n_inputs; i++) {
            if (i) fprintf(f, ", ");
            print_input(f, n, i);
        }
        int kept = 0;   /* slots tg__ctx_save_if left empty hold nothing */
        for (int j = 0; j < n->n_saved; j++) kept += n->saved[j].t != NULL;
        fprintf(f, "  saved: %d  out: %s %s\n", kept, tg_dtype_name(n->out_meta.dtype),
                tg_shape_str(shape, sizeof shape, n->out_meta.ndim, n->out_meta.shape));
    }
    free(nodes);
    return TG_OK;
}
