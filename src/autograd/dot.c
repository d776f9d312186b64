/* Views of a tape: Graphviz DOT and a one-line-per-node listing. */
#include "core/core.h"
#include "autograd/tape.h"

/* Index of n in nodes (sorted by seq); -1 if absent. */
static int find_node(tg_node *const *nodes, int count, const tg_node *n)
{
    int lo = 0, hi = count - 1;
    while (lo <= hi) {   /* seqs are unique (node.c) */
        int mid = lo + (hi - lo) / 2;
        if (nodes[mid]->seq < n->seq) lo = mid + 1;
        else if (nodes[mid]->seq > n->seq) hi = mid - 1;
        else return nodes[mid] == n ? mid : -1;
    }
    return -1;
}

/* The nodes behind t sorted by seq, in a new array the caller frees; op names
 * the public function in the messages. */
static int collect(const char *op, FILE *f, const tg_tensor *t, tg_node ***nodes, int *count)
{
    TG_CHECK(f != NULL, TG_EINVAL, "%s: f must not be NULL", op);
    TG_CHECK(t != NULL, TG_EINVAL, "%s: t must not be NULL", op);
    tg_tensor *root = (tg_tensor *)t;   /* only read */
    return tg__tape_collect(&root, 1, nodes, count);
}

static void leaf_label(char *buf, size_t size, const tg_tensor *leaf)
{
    char shape[96];
    tg_shape_str(shape, sizeof shape, leaf->ndim, leaf->shape);
    snprintf(buf, size, "%s\\n%s %s", leaf->name[0] ? leaf->name : "leaf",
             tg_dtype_name(leaf->dtype), shape);
}

static void dot_leaf(FILE *f, const tg_tensor *leaf, bool root)
{
    char label[160];
    leaf_label(label, sizeof label, leaf);
    fprintf(f, "  \"leaf_%p\" [shape=ellipse, label=\"%s\"%s];\n", (const void *)leaf, label,
            root ? ", penwidth=3, color=red" : "");
}

int tg_graph_to_dot(FILE *f, const tg_tensor *t)
{
    tg_node **nodes = NULL;
    int count = 0;
    TG_TRY(collect("graph_to_dot", f, t, &nodes, &count));
    fprintf(f, "digraph tape {\n  rankdir=TB;\n  node [fontname=\"monospace\"];\n");
    if (!t->grad_fn) dot_leaf(f, t, true);
    for (int k = 0; k < count; k++) {
        const tg_node *n = nodes[k];
        char shape[96];
        tg_shape_str(shape, sizeof shape, n->out_meta.ndim, n->out_meta.shape);
        fprintf(f, "  n%d [shape=box, label=\"#%llu %s\\nout %s %s\"%s];\n", k,
                (unsigned long long)n->seq, n->op->name, tg_dtype_name(n->out_meta.dtype),
                shape, n == t->grad_fn ? ", penwidth=3, color=red" : "");
        for (int i = 0; i < n->n_inputs; i++) {
            const tg_edge *e = &n->edges[i];
            if (e->fn) {
                fprintf(f, "  n%d -> n%d;\n", find_node(nodes, count, e->fn), k);
            } else if (e->leaf) {
                /* A leaf used twice is declared twice with the same id: DOT merges them. */
                dot_leaf(f, e->leaf, false);
                fprintf(f, "  \"leaf_%p\" -> n%d;\n", (const void *)e->leaf, k);
            }
        }
    }
    if (t->grad_fn)
        fprintf(f, "  root [shape=plaintext, label=\"root\"];\n  n%d -> root [style=dashed];\n",
                find_node(nodes, count, t->grad_fn));
    fprintf(f, "}\n");
    free(nodes);
    return TG_OK;
}

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
        fprintf(f, "  saved: %d  out: %s %s\n", n->n_saved, tg_dtype_name(n->out_meta.dtype),
                tg_shape_str(shape, sizeof shape, n->out_meta.ndim, n->out_meta.shape));
    }
    free(nodes);
    return TG_OK;
}
