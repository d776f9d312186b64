/* src/onnx/onnx_rnn.c - nn.RNN, nn.LSTM, nn.GRU and their cells as ONNX nodes (opset
 * 17), as torch.onnx.export of PyTorch 1.13 writes them: one RNN / LSTM /
 * GRU node per layer, both directions in one node (direction
 * "bidirectional") when bidirectional.
 *
 * A node takes X (L, N, in) and, per direction d, W[d] (G H, in), R[d]
 * (G H, H) and B[d] = (Wb, Rb) (2 G H), the biases of the input and the
 * hidden projections; ONNX's gate blocks are ordered differently from
 * torch's, so each block of H rows is moved:
 *   LSTM: torch i, f, g, o -> ONNX i, o, f, c (c is torch's g)
 *   GRU:  torch r, z, n    -> ONNX z, r, h, with linear_before_reset = 1,
 *         h = tanh(Wx + Wb + r (R h + Rb)): torch's n
 *   RNN:  one block; activations Tanh or Relu, one per direction
 * The initializers are "<path>.W_l{k}", "<path>.R_l{k}" and "<path>.B_l{k}"
 * for layer k, shaped (D, G H, in), (D, G H, H) and (D, 2 G H); without
 * bias there is no B (ONNX's default: zeros), as torch writes it.  The
 * initial states are ONNX's default zeros, or the graph inputs h_0 and
 * c_0 of tg_onnx_export_n, in torch's layout (D num_layers, N, H) ((D
 * num_layers, H) unbatched: Unsqueezed to (D num_layers, 1, H)): layer k
 * takes rows [k D, (k + 1) D) as its initial_h / initial_c, a Slice on
 * axis 0 (the whole input for one layer), as torch.onnx.export does.
 *
 * The node's output Y is (L, D, N, H): Squeeze(axis 1) gives (L, N, H),
 * and with two directions Transpose (0, 2, 1, 3) and Reshape (0, 0, -1)
 * give torch's (L, N, 2 H), the directions side by side; that feeds the
 * next layer (dropout between layers is the identity in eval).  A
 * batch_first input (N, L, in) is Transposed (1, 0, 2) before the first
 * node and the output back after the last; an unbatched one (L, in) is
 * Unsqueezed to (L, 1, in) and the output Squeezed back to (L, D H).  The
 * Reshape keeps the batch free, so a dynamic batch exports too.
 *
 * With extra_outputs the final states are outputs too: each node's Y_h
 * (and an LSTM's Y_c), (D, N, H), Concat-ed on axis 0 over the layers
 * into torch's (D num_layers, N, H), Squeezed on axis 1 unbatched.
 *
 * A cell (RNNCell, LSTMCell, GRUCell) is one step of the same node, its
 * weights "<path>.W", "<path>.R", "<path>.B" (D = 1): x (N, in) and the
 * states hx, cx (N, H) Unsqueezed on axis 0 ((in) and (H) unbatched: on
 * axes 0 and 1), and the node's Y_h (and Y_c) Squeezed back give h' (and
 * c').
 *
 * An LSTM with proj_size > 0 projects h after every step, which ONNX's
 * LSTM cannot: it is refused before its forward runs. */
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "onnx/onnx_graph.h"
#include "tapegrad/nn.h"

/* A recurrent layer kind: its ONNX op, its gates G and, for ONNX's gate
 * block j, the torch block it holds. */
typedef struct tg__onnx_rnn_kind {
    const char *type;
    int gates;
    int perm[4];
} tg__onnx_rnn_kind;

static const tg__onnx_rnn_kind tg__onnx_rnn_kinds[] = {
    {"RNN", 1, {0}},
    {"LSTM", 4, {0, 3, 1, 2}},   /* i, o, f, c <- i, o, f, g */
    {"GRU", 3, {1, 0, 2}},       /* z, r, h <- z, r, n */
};

int tg__onnx_refuse_rnn(const tg_module *m, const char *path)
{
    tg_rnn_opts o;
    TG_TRY(tg_nn_rnn_options(m, NULL, NULL, &o));
    TG_CHECK(o.proj_size == 0, TG_EUNSUPPORTED,
             "onnx_export: module '%s' (LSTM) with proj_size=%lld is not supported: ONNX's "
             "LSTM has no projection of its hidden state", path[0] ? path : "<top>",
             (long long)o.proj_size);
    return TG_OK;
}

/* What one module's layers share. */
typedef struct tg__onnx_rnn {
    const tg__onnx_site *s;
    const tg__onnx_rnn_kind *k;
    bool cell;                  /* an RNNCell, LSTMCell or GRUCell: one layer */
    tg_rnn_opts o;
    int64_t in_size, h;
    int dirs;
    const char *axes, *shape;   /* int64 (1,) and (0, 0, -1); NULL until needed */
    const char *h0, *c0;        /* the initial states (L D, N, H), or NULL */
    const char *slice_axes;     /* int64 (0,); NULL until needed */
    /* with extra outputs: each layer's Y_h and Y_c (D, N, H) */
    const char **yh, **yc;
} tg__onnx_rnn;

/* The G H rows (cols values each) of m's parameter `name`, appended to dst
 * in ONNX's gate order. */
static int tg__onnx_rnn_rows(const tg__onnx_rnn *r, const char *name, int64_t cols, float *dst)
{
    tg_tensor *t = tg_module_find(r->s->m, name);
    const int64_t block = r->h * cols;
    TG_ASSERT(t != NULL && tg_tensor_numel(t) == r->k->gates * block);
    TG_CHECK(tg_tensor_dtype(t) == TG_F32, TG_EDTYPE,
             "onnx_export: '%s' of module '%s' has dtype %s; the export writes f32 models "
             "(convert with tg_module_to_dtype)", name, r->s->path[0] ? r->s->path : "<top>",
             tg_dtype_name(tg_tensor_dtype(t)));
    float *buf = tg__malloc((size_t)tg_tensor_numel(t) * sizeof *buf);
    if (!buf) return TG_ENOMEM;
    tg__gather(t, TG_F32, buf);
    for (int j = 0; j < r->k->gates; j++)
        memcpy(dst + j * block, buf + r->k->perm[j] * block, (size_t)block * sizeof *buf);
    free(buf);
    return TG_OK;
}

/* An f32 initializer "<path>.<what>_l<layer>" ("<path>.<what>" for a
 * cell) of the given shape. */
static const char *tg__onnx_rnn_init(const tg__onnx_rnn *r, const char *what, int layer,
                                     int ndim, const int64_t *shape, const float *v)
{
    const char *leaf = r->cell ? tg__onnx_str(r->s->g, "%s", what)
                               : tg__onnx_str(r->s->g, "%s_l%d", what, layer);
    const char *name = leaf ? tg__onnx_param_name(r->s, leaf) : NULL;
    if (!name || tg__onnx_init_raw(r->s->g, name, TG__ONNX_FLOAT, ndim, shape, v, sizeof *v) < 0)
        return NULL;
    return name;
}

/* W, R and B of layer `layer` as initializers: their names in names[0..3)
 * (names[2] "" without bias). */
static int tg__onnx_rnn_weights(const tg__onnx_rnn *r, int layer, const char **names)
{
    const int64_t d = r->dirs, gh = r->k->gates * r->h;
    const int64_t in = layer == 0 ? r->in_size : d * r->h;
    float *w = tg__malloc((size_t)(d * gh * in) * sizeof *w);
    float *rr = tg__malloc((size_t)(d * gh * r->h) * sizeof *rr);
    float *b = tg__malloc((size_t)(d * 2 * gh) * sizeof *b);
    int rc = w && rr && b ? TG_OK : TG_ENOMEM;
    for (int64_t i = 0; rc >= 0 && i < d; i++) {
        char sfx[32] = "";   /* a cell's names have none */
        if (!r->cell) snprintf(sfx, sizeof sfx, "_l%d%s", layer, i ? "_reverse" : "");
        char nm[4][48];
        snprintf(nm[0], sizeof nm[0], "weight_ih%s", sfx);
        snprintf(nm[1], sizeof nm[1], "weight_hh%s", sfx);
        snprintf(nm[2], sizeof nm[2], "bias_ih%s", sfx);
        snprintf(nm[3], sizeof nm[3], "bias_hh%s", sfx);
        rc = tg__onnx_rnn_rows(r, nm[0], in, w + i * gh * in);
        if (rc >= 0) rc = tg__onnx_rnn_rows(r, nm[1], r->h, rr + i * gh * r->h);
        if (rc >= 0 && r->o.bias) rc = tg__onnx_rnn_rows(r, nm[2], 1, b + i * 2 * gh);
        if (rc >= 0 && r->o.bias) rc = tg__onnx_rnn_rows(r, nm[3], 1, b + i * 2 * gh + gh);
    }
    if (rc >= 0) {
        names[0] = tg__onnx_rnn_init(r, "W", layer, 3, (const int64_t[]){d, gh, in}, w);
        names[1] = tg__onnx_rnn_init(r, "R", layer, 3, (const int64_t[]){d, gh, r->h}, rr);
        names[2] = r->o.bias ? tg__onnx_rnn_init(r, "B", layer, 2, (const int64_t[]){d, 2 * gh},
                                                 b)
                             : "";
        if (!names[0] || !names[1] || !names[2]) rc = TG_ENOMEM;
    }
    free(w);
    free(rr);
    free(b);
    return rc;
}

/* An int64 initializer "<scope>/<what>" of n values. */
static const char *tg__onnx_rnn_ints(const tg__onnx_rnn *r, const char *what, int64_t n,
                                     const int64_t *v)
{
    const char *name = tg__onnx_str(r->s->g, "%s/%s", r->s->scope, what);
    if (!name || tg__onnx_init_raw(r->s->g, name, TG__ONNX_INT64, 1, &n, v, sizeof *v) < 0)
        return NULL;
    return name;
}

/* op(x, axes (1,)): Squeeze or Unsqueeze of axis 1. */
static int tg__onnx_rnn_axis1(tg__onnx_rnn *r, const char *op, const char *x, const char **y)
{
    if (!r->axes && !(r->axes = tg__onnx_rnn_ints(r, "axes", 1, (const int64_t[]){1})))
        return TG_ENOMEM;
    return tg__onnx_add(r->s->g, NULL, y, r->s->scope, op, 2, (const char *const[]){x, r->axes});
}

/* Transpose(x, perm) of an n-d x. */
static int tg__onnx_rnn_transpose(const tg__onnx_rnn *r, const char *x, int n,
                                  const int64_t *perm, const char **y)
{
    tg__onnx_node *node = NULL;
    TG_TRY(tg__onnx_add(r->s->g, &node, y, r->s->scope, "Transpose", 1, (const char *const[]){x}));
    return tg__onnx_attr_ints(r->s->g, node, "perm", n, perm);
}

/* Layer `layer`'s rows [layer D, (layer + 1) D) of the initial states h0
 * and c0 (either NULL: none), the whole of them for one layer. */
static int tg__onnx_rnn_states(tg__onnx_rnn *r, int layer, const char **h0, const char **c0)
{
    if (r->h0) *h0 = r->h0;
    if (r->c0) *c0 = r->c0;
    if (!r->h0 || r->o.num_layers == 1) return TG_OK;
    const int64_t b[2] = {(int64_t)layer * r->dirs, (int64_t)(layer + 1) * r->dirs}, zero = 0;
    const char *se[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        const char *what = tg__onnx_str(r->s->g, "%s_l%d", i ? "ends" : "starts", layer);
        if (!what || !(se[i] = tg__onnx_rnn_ints(r, what, 1, &b[i]))) return TG_ENOMEM;
    }
    if (!r->slice_axes && !(r->slice_axes = tg__onnx_rnn_ints(r, "slice_axes", 1, &zero)))
        return TG_ENOMEM;
    const char *st[2] = {r->h0, r->c0};
    const char **out[2] = {h0, c0};
    for (int i = 0; i < 2 && st[i]; i++)
        TG_TRY(tg__onnx_add(r->s->g, NULL, out[i], r->s->scope, "Slice", 4,
                            (const char *const[]){st[i], se[0], se[1], r->slice_axes}));
    return TG_OK;
}

/* Layer `layer` on x (L, N, in): its node, then its output as (L, N, D H). */
static int tg__onnx_rnn_layer(tg__onnx_rnn *r, int layer, const char *x, const char **y)
{
    tg__onnx *g = r->s->g;
    const char *w[3] = {0}, *t = NULL, *h0 = "", *c0 = "";
    TG_TRY(tg__onnx_rnn_weights(r, layer, w));
    TG_TRY(tg__onnx_rnn_states(r, layer, &h0, &c0));
    const int n_in = r->c0 ? 7 : r->h0 ? 6 : w[2][0] ? 4 : 3;
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_add(g, &n, &t, r->s->scope, r->k->type, n_in,
                        (const char *const[]){x, w[0], w[1], w[2], "", h0, c0}));
    /* Y_h (and an LSTM's Y_c) for a cell's output or the final states */
    if (r->yh) TG_TRY(tg__onnx_add_output(g, n, r->s->scope, &r->yh[layer]));
    if (r->yc) TG_TRY(tg__onnx_add_output(g, n, r->s->scope, &r->yc[layer]));
    TG_TRY(tg__onnx_attr_int(g, n, "hidden_size", r->h));
    if (r->dirs == 2) TG_TRY(tg__onnx_attr_str(g, n, "direction", "bidirectional"));
    if (!strcmp(r->k->type, "GRU")) TG_TRY(tg__onnx_attr_int(g, n, "linear_before_reset", 1));
    if (!strcmp(r->k->type, "RNN")) {
        const char *a = r->o.nonlinearity == TG_RNN_RELU ? "Relu" : "Tanh";
        TG_TRY(tg__onnx_attr_strs(g, n, "activations", r->dirs, (const char *const[]){a, a}));
    }
    /* Y (L, D, N, H) -> (L, N, D H) */
    if (r->cell) return TG_OK;   /* Y_h is the cell's output */
    if (r->dirs == 1) return tg__onnx_rnn_axis1(r, "Squeeze", t, y);
    TG_TRY(tg__onnx_rnn_transpose(r, t, 4, (const int64_t[]){0, 2, 1, 3}, &t));
    if (!r->shape && !(r->shape = tg__onnx_rnn_ints(r, "shape", 3, (const int64_t[]){0, 0, -1})))
        return TG_ENOMEM;
    return tg__onnx_add(g, NULL, y, r->s->scope, "Reshape", 2, (const char *const[]){t, r->shape});
}

/* The kind of s's module, a layer or (cell) a cell. */
static int tg__onnx_rnn_start(const tg__onnx_site *s, tg__onnx_rnn *r, bool cell)
{
    *r = (tg__onnx_rnn){.s = s, .cell = cell};
    const char *type = tg_module_type_name(s->m);
    for (size_t i = 0; i < sizeof tg__onnx_rnn_kinds / sizeof *tg__onnx_rnn_kinds; i++) {
        const size_t len = strlen(tg__onnx_rnn_kinds[i].type);
        if (!strncmp(type, tg__onnx_rnn_kinds[i].type, len) && !strcmp(type + len,
                                                                        cell ? "Cell" : ""))
            r->k = &tg__onnx_rnn_kinds[i];
    }
    TG_ASSERT(r->k != NULL);
    TG_TRY(tg_nn_rnn_options(s->m, &r->in_size, &r->h, &r->o));
    TG_ASSERT(r->o.proj_size == 0);   /* tg__onnx_refuse_rnn */
    r->dirs = r->o.bidirectional ? 2 : 1;
    return TG_OK;
}

/* The final states from the layers' Y_h and Y_c: Concat on axis 0 of
 * several layers' (D, N, H), Squeezed to (D num_layers, H) unbatched. */
static int tg__onnx_rnn_final(tg__onnx_rnn *r, const char **ys, bool batched, const char **y)
{
    const int layers = r->o.num_layers;
    const char *t = ys[0];
    if (layers > 1) {
        tg__onnx_node *n = NULL;
        TG_TRY(tg__onnx_add(r->s->g, &n, &t, r->s->scope, "Concat", layers, ys));
        TG_TRY(tg__onnx_attr_int(r->s->g, n, "axis", 0));
    }
    if (batched) {
        *y = t;
        return TG_OK;
    }
    return tg__onnx_rnn_axis1(r, "Squeeze", t, y);
}

static int tg__onnx_rnn_body(tg__onnx_rnn *r, const char **y)
{
    const tg__onnx_site *s = r->s;
    const bool batched = tg_tensor_ndim(s->xt) == 3;
    static const int64_t swap01[3] = {1, 0, 2};
    const char *x = s->x;
    if (s->n > 1) r->h0 = s->xs[1];
    if (s->n > 2) r->c0 = s->xs[2];
    if (!batched && r->h0) TG_TRY(tg__onnx_rnn_axis1(r, "Unsqueeze", r->h0, &r->h0));
    if (!batched && r->c0) TG_TRY(tg__onnx_rnn_axis1(r, "Unsqueeze", r->c0, &r->c0));
    if (!batched) TG_TRY(tg__onnx_rnn_axis1(r, "Unsqueeze", x, &x));
    else if (r->o.batch_first) TG_TRY(tg__onnx_rnn_transpose(r, x, 3, swap01, &x));
    for (int k = 0; k < r->o.num_layers; k++) {
        const bool last = k == r->o.num_layers - 1;
        TG_TRY(tg__onnx_rnn_layer(r, k, x, last && batched && !r->o.batch_first ? y : &x));
    }
    if (!batched) TG_TRY(tg__onnx_rnn_axis1(r, "Squeeze", x, y));
    else if (r->o.batch_first) TG_TRY(tg__onnx_rnn_transpose(r, x, 3, swap01, y));
    if (r->yh) TG_TRY(tg__onnx_rnn_final(r, r->yh, batched, &s->extra[0]));
    if (r->yc) TG_TRY(tg__onnx_rnn_final(r, r->yc, batched, &s->extra[1]));
    return TG_OK;
}

int tg__onnx_emit_rnn(const tg__onnx_site *s, const char **y)
{
    tg__onnx_rnn r;
    TG_TRY(tg__onnx_rnn_start(s, &r, false));
    const size_t nl = (size_t)r.o.num_layers;
    const bool lstm = r.k->gates == 4;
    if (s->extra) {   /* h_n (and c_n) from every layer's Y_h (and Y_c) */
        r.yh = tg__calloc(nl, sizeof *r.yh);
        r.yc = lstm ? tg__calloc(nl, sizeof *r.yc) : NULL;
        if (!r.yh || (lstm && !r.yc)) {
            free(r.yh);
            free(r.yc);
            return TG_ENOMEM;
        }
    }
    int rc = tg__onnx_rnn_body(&r, y);
    free(r.yh);
    free(r.yc);
    return rc;
}

/* op(x, axes) of an int64 initializer "<scope>/<what>" of n axes. */
static int tg__onnx_rnn_axes(tg__onnx_rnn *r, const char *op, const char *what, int n,
                             const int64_t *axes, const char *x, const char **y)
{
    const char *a = tg__onnx_rnn_ints(r, what, n, axes);
    if (!a) return TG_ENOMEM;
    return tg__onnx_add(r->s->g, NULL, y, r->s->scope, op, 2, (const char *const[]){x, a});
}

/* A cell: x (N, in) Unsqueezed to a sequence of one step (1, N, in), hx and
 * cx (N, H) to (1, N, H) (unbatched (in) and (H): to (1, 1, in) and (1, 1,
 * H)), one ONNX node, and its Y_h (and Y_c) (1, N, H) Squeezed back. */
int tg__onnx_emit_rnn_cell(const tg__onnx_site *s, const char **y)
{
    tg__onnx_rnn r;
    TG_TRY(tg__onnx_rnn_start(s, &r, true));
    const bool batched = tg_tensor_ndim(s->xt) == 2, lstm = r.k->gates == 4;
    const int na = batched ? 1 : 2;
    static const int64_t axes[2] = {0, 1};
    const char *yh[1] = {NULL}, *yc[1] = {NULL}, *x = NULL;
    r.yh = yh;
    if (lstm && s->extra) r.yc = yc;
    TG_TRY(tg__onnx_rnn_axes(&r, "Unsqueeze", "x_axes", na, axes, s->x, &x));
    if (s->n > 1) r.h0 = s->xs[1];
    if (s->n > 2) r.c0 = s->xs[2];
    if (r.h0) TG_TRY(tg__onnx_rnn_axes(&r, "Unsqueeze", "hx_axes", na, axes, r.h0, &r.h0));
    if (r.c0) TG_TRY(tg__onnx_rnn_axes(&r, "Unsqueeze", "cx_axes", na, axes, r.c0, &r.c0));
    TG_TRY(tg__onnx_rnn_layer(&r, 0, x, NULL));
    TG_TRY(tg__onnx_rnn_axes(&r, "Squeeze", "h_axes", na, axes, yh[0], y));
    if (r.yc) TG_TRY(tg__onnx_rnn_axes(&r, "Squeeze", "c_axes", na, axes, yc[0], &s->extra[0]));
    return TG_OK;
}

int tg__onnx_inputs_rnn(const tg_module *m, const char *path, int n, tg_tensor *const *xs,
                        int *axes)
{
    const bool lstm = !strcmp(tg_module_type_name(m), "LSTM");
    TG_CHECK(n == 1 || n == (lstm ? 3 : 2), TG_EINVAL,
             "onnx_export: module '%s' (%s) takes the graph inputs (input) or (input, %s), "
             "not %d", path[0] ? path : "<top>", tg_module_type_name(m),
             lstm ? "h_0, c_0" : "h_0", n);
    tg_rnn_opts o;
    TG_TRY(tg_nn_rnn_options(m, NULL, NULL, &o));
    const bool batched = tg_tensor_ndim(xs[0]) == 3;
    axes[0] = axes[n] = batched ? (o.batch_first ? 0 : 1) : -1;
    for (int i = 1; i < n; i++) {
        TG_CHECK(tg_tensor_dtype(xs[i]) == TG_F32, TG_EDTYPE,
                 "onnx_export: module '%s' (%s): graph input %d (%s) has dtype %s; it must be "
                 "f32", path[0] ? path : "<top>", tg_module_type_name(m), i,
                 i == 1 ? "h_0" : "c_0", tg_dtype_name(tg_tensor_dtype(xs[i])));
        axes[i] = batched ? 1 : -1;   /* (D num_layers, N, H) in either layout */
    }
    return TG_OK;
}

int tg__onnx_inputs_rnn_cell(const tg_module *m, const char *path, int n, tg_tensor *const *xs,
                             int *axes)
{
    const bool lstm = !strcmp(tg_module_type_name(m), "LSTMCell");
    TG_CHECK(n == 1 || n == (lstm ? 3 : 2), TG_EINVAL,
             "onnx_export: module '%s' (%s) takes the graph inputs (x) or (x, %s), not %d",
             path[0] ? path : "<top>", tg_module_type_name(m), lstm ? "hx, cx" : "hx", n);
    const bool batched = tg_tensor_ndim(xs[0]) == 2;
    for (int i = 0; i <= n; i++) axes[i] = batched ? 0 : -1;
    for (int i = 0; i < n; i++)
        TG_CHECK(tg_tensor_dtype(xs[i]) == TG_F32, TG_EDTYPE,
                 "onnx_export: module '%s' (%s): graph input %d (%s) has dtype %s; it must be "
                 "f32", path[0] ? path : "<top>", tg_module_type_name(m), i,
                 i == 0 ? "x" : i == 1 ? "hx" : "cx", tg_dtype_name(tg_tensor_dtype(xs[i])));
    return TG_OK;
}

int tg__onnx_extra_rnn(tg_module *m, const tg_onnx_options *opt, int n, tg_tensor *const *xs,
                       tg_tensor **ys, const char **names, int *axes)
{
    (void)opt;
    const char *type = tg_module_type_name(m);
    tg_tensor *h0 = n > 1 ? xs[1] : NULL, *c0 = n > 2 ? xs[2] : NULL;
    if (!strcmp(type, "RNNCell") || !strcmp(type, "GRUCell")) return 0;   /* h' only */
    if (!strcmp(type, "LSTMCell")) {
        TG_TRY(tg_nn_lstm_cell_forward(m, NULL, &ys[0], xs[0], h0, c0));
        names[0] = "c_n";
        axes[0] = tg_tensor_ndim(xs[0]) == 2 ? 0 : -1;
        return 1;
    }
    const bool lstm = !strcmp(type, "LSTM"), batched = tg_tensor_ndim(xs[0]) == 3;
    TG_TRY(lstm ? tg_nn_lstm_forward(m, NULL, &ys[0], &ys[1], xs[0], h0, c0)
                : tg_nn_rnn_forward(m, NULL, &ys[0], xs[0], h0));
    names[0] = "h_n";
    names[1] = "c_n";
    axes[0] = axes[1] = batched ? 1 : -1;
    return lstm ? 2 : 1;
}
