/* src/onnx_graph.c - the ONNX graph builder over the protobuf-c structs
 * that protoc-c generates from onnx.proto (the ModelProto of IR version 8,
 * which carries opsets up to 17).  Every struct, string and array is
 * allocated in one list owned by the builder, so one free releases the
 * whole model; the node and initializer arrays grow by doubling. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "io/atomic.h"
#include "onnx/onnx_graph.h"
#include "onnx/onnx.pb-c.h"

#define TG__ONNX_IR_VERSION 8
#define TG__ONNX_MAX_ATTRS 8

typedef struct tg__onnx_block {
    struct tg__onnx_block *next;
    max_align_t data[];
} tg__onnx_block;

struct tg__onnx_node {
    Onnx__NodeProto proto;
    Onnx__AttributeProto *attrs[TG__ONNX_MAX_ATTRS];
};

struct tg__onnx {
    tg__onnx_block *blocks;
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset;
    Onnx__OperatorSetIdProto *opsets[1];
    int64_t next_value;
    size_t n_nodes, cap_nodes, n_inits, cap_inits;
    Onnx__NodeProto **nodes;
    Onnx__TensorProto **inits;
    Onnx__ValueInfoProto *out[1 + TG__ONNX_MAX_EXTRA];   /* the outputs */
    size_t n_out;
    Onnx__ValueInfoProto *in[TG__ONNX_MAX_INPUTS];
    size_t n_in;
    tg_onnx_options opt;
};

/* n zeroed bytes owned by g, or NULL with TG_ENOMEM set. */
static void *tg__onnx_alloc(tg__onnx *g, size_t n)
{
    tg__onnx_block *b = tg__calloc(1, sizeof *b + n);
    if (!b) return NULL;
    b->next = g->blocks;
    g->blocks = b;
    return b->data;
}

int tg__onnx_new(tg__onnx **out, const tg_onnx_options *o)
{
    tg__onnx *g = tg__calloc(1, sizeof *g);
    if (!g) return TG_ENOMEM;
    g->opt = *o;
    onnx__model_proto__init(&g->model);
    onnx__graph_proto__init(&g->graph);
    onnx__operator_set_id_proto__init(&g->opset);
    g->opset.domain = "";
    g->opset.has_version = true;
    g->opset.version = o->opset;
    g->opsets[0] = &g->opset;
    g->model.has_ir_version = true;
    g->model.ir_version = TG__ONNX_IR_VERSION;
    g->model.producer_name = "tapegrad";
    g->model.n_opset_import = 1;
    g->model.opset_import = g->opsets;
    g->model.graph = &g->graph;
    g->graph.name = (char *)tg__onnx_str(g, "%s", o->graph_name);
    if (!g->graph.name) {
        tg__onnx_free(g);
        return TG_ENOMEM;
    }
    *out = g;
    return TG_OK;
}

const tg_onnx_options *tg__onnx_options(const tg__onnx *g) { return &g->opt; }

void tg__onnx_free(tg__onnx *g)
{
    if (!g) return;
    for (tg__onnx_block *b = g->blocks, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(g->nodes);
    free(g->inits);
    free(g);
}

const char *tg__onnx_str(tg__onnx *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    TG_ASSERT(n >= 0);
    char *s = tg__onnx_alloc(g, (size_t)n + 1);
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* Appends p to the growing array *arr of *n (capacity *cap) pointers. */
static int tg__onnx_push(void ***arr, size_t *n, size_t *cap, void *p)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        void **a = realloc(*arr, c * sizeof *a);
        if (!a) return tg__error(TG_ENOMEM, "onnx_export: out of memory growing the graph");
        *arr = a;
        *cap = c;
    }
    (*arr)[(*n)++] = p;
    return TG_OK;
}

int tg__onnx_add(tg__onnx *g, tg__onnx_node **node, const char **out, const char *scope,
                  const char *op_type, int n_in, const char *const *inputs)
{
    tg__onnx_node *n = tg__onnx_alloc(g, sizeof *n);
    char **ins = tg__onnx_alloc(g, (size_t)(n_in > 0 ? n_in : 1) * sizeof *ins);
    char **outs = tg__onnx_alloc(g, sizeof *outs);
    const int64_t k = g->next_value++;
    const char *name = tg__onnx_str(g, "%s/%s_%lld", scope, op_type, (long long)k);
    const char *value = tg__onnx_str(g, "%s/%s_output_%lld", scope, op_type, (long long)k);
    if (!n || !ins || !outs || !name || !value) return TG_ENOMEM;
    onnx__node_proto__init(&n->proto);
    for (int i = 0; i < n_in; i++) ins[i] = (char *)inputs[i];
    outs[0] = (char *)value;
    n->proto.n_input = (size_t)n_in;
    n->proto.input = ins;
    n->proto.n_output = 1;
    n->proto.output = outs;
    n->proto.name = (char *)name;
    n->proto.op_type = (char *)op_type;
    n->proto.attribute = n->attrs;
    TG_TRY(tg__onnx_push((void ***)&g->nodes, &g->n_nodes, &g->cap_nodes, &n->proto));
    if (node) *node = n;
    *out = value;
    return TG_OK;
}

int tg__onnx_add_output(tg__onnx *g, tg__onnx_node *n, const char *scope, const char **out)
{
    const size_t k = n->proto.n_output;
    char **outs = tg__onnx_alloc(g, (k + 1) * sizeof *outs);
    const char *value = tg__onnx_str(g, "%s/%s_output_%lld", scope, n->proto.op_type,
                                     (long long)g->next_value++);
    if (!outs || !value) return TG_ENOMEM;
    for (size_t i = 0; i < k; i++) outs[i] = n->proto.output[i];
    outs[k] = (char *)value;
    n->proto.output = outs;
    n->proto.n_output = k + 1;
    *out = value;
    return TG_OK;
}

static Onnx__AttributeProto *tg__onnx_attr(tg__onnx *g, tg__onnx_node *n, const char *name,
                                           Onnx__AttributeProto__AttributeType type)
{
    TG_ASSERT(n->proto.n_attribute < TG__ONNX_MAX_ATTRS);
    Onnx__AttributeProto *a = tg__onnx_alloc(g, sizeof *a);
    if (!a) return NULL;
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = true;
    a->type = type;
    n->attrs[n->proto.n_attribute++] = a;
    return a;
}

int tg__onnx_attr_int(tg__onnx *g, tg__onnx_node *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = tg__onnx_attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (!a) return TG_ENOMEM;
    a->has_i = true;
    a->i = v;
    return TG_OK;
}

int tg__onnx_attr_float(tg__onnx *g, tg__onnx_node *n, const char *name, float v)
{
    Onnx__AttributeProto *a =
        tg__onnx_attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (!a) return TG_ENOMEM;
    a->has_f = true;
    a->f = v;
    return TG_OK;
}

int tg__onnx_attr_str(tg__onnx *g, tg__onnx_node *n, const char *name, const char *v)
{
    Onnx__AttributeProto *a =
        tg__onnx_attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    const char *copy = tg__onnx_str(g, "%s", v);
    if (!a || !copy) return TG_ENOMEM;
    a->has_s = true;
    a->s.len = strlen(copy);
    a->s.data = (uint8_t *)copy;
    return TG_OK;
}

int tg__onnx_attr_strs(tg__onnx *g, tg__onnx_node *n, const char *name, int count,
                       const char *const *v)
{
    Onnx__AttributeProto *a =
        tg__onnx_attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
    ProtobufCBinaryData *list = tg__onnx_alloc(g, (size_t)(count > 0 ? count : 1) * sizeof *list);
    if (!a || !list) return TG_ENOMEM;
    for (int i = 0; i < count; i++) {
        const char *copy = tg__onnx_str(g, "%s", v[i]);
        if (!copy) return TG_ENOMEM;
        list[i].len = strlen(copy);
        list[i].data = (uint8_t *)copy;
    }
    a->n_strings = (size_t)count;
    a->strings = list;
    return TG_OK;
}

int tg__onnx_attr_ints(tg__onnx *g, tg__onnx_node *n, const char *name, int count,
                       const int64_t *v)
{
    Onnx__AttributeProto *a =
        tg__onnx_attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *copy = tg__onnx_alloc(g, (size_t)(count > 0 ? count : 1) * sizeof *copy);
    if (!a || !copy) return TG_ENOMEM;
    if (count > 0) memcpy(copy, v, (size_t)count * sizeof *copy);
    a->n_ints = (size_t)count;
    a->ints = copy;
    return TG_OK;
}

int tg__onnx_init_raw(tg__onnx *g, const char *name, int dt, int ndim, const int64_t *shape,
                      const void *data, size_t elem_size)
{
    Onnx__TensorProto *t = tg__onnx_alloc(g, sizeof *t);
    int64_t *dims = tg__onnx_alloc(g, (size_t)(ndim > 0 ? ndim : 1) * sizeof *dims);
    const char *nm = tg__onnx_str(g, "%s", name);
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) numel *= shape[d];
    const size_t bytes = (size_t)numel * elem_size;
    uint8_t *raw = tg__onnx_alloc(g, bytes ? bytes : 1);
    if (!t || !dims || !nm || !raw) return TG_ENOMEM;
    onnx__tensor_proto__init(t);
    if (ndim > 0) memcpy(dims, shape, (size_t)ndim * sizeof *dims);   /* NULL shape at 0-d */
    if (bytes > 0) memcpy(raw, data, bytes);   /* little-endian host: the raw_data byte order */
    t->n_dims = (size_t)ndim;
    t->dims = dims;
    t->has_data_type = true;
    t->data_type = dt;
    t->name = (char *)nm;
    t->has_raw_data = true;
    t->raw_data.len = bytes;
    t->raw_data.data = raw;
    return tg__onnx_push((void ***)&g->inits, &g->n_inits, &g->cap_inits, t);
}

int tg__onnx_init_tensor(tg__onnx *g, const char *name, const tg_tensor *t)
{
    int dt;
    switch (tg_tensor_dtype(t)) {
    case TG_F32: dt = TG__ONNX_FLOAT; break;
    case TG_U8: dt = TG__ONNX_UINT8; break;
    case TG_I8: dt = TG__ONNX_INT8; break;
    case TG_I32: dt = TG__ONNX_INT32; break;
    case TG_I64: dt = TG__ONNX_INT64; break;
    default:
        return tg__error(TG_EDTYPE, "onnx_export: '%s' has dtype %s; the export writes f32 "
                         "models (convert with tg_module_to_dtype)", name,
                         tg_dtype_name(tg_tensor_dtype(t)));
    }
    const size_t esz = tg_dtype_size(tg_tensor_dtype(t));
    void *buf = tg__malloc((size_t)tg_tensor_numel(t) * esz + 1);
    if (!buf) return TG_ENOMEM;
    tg__gather(t, tg_tensor_dtype(t), buf);
    int rc = tg__onnx_init_raw(g, name, dt, tg_tensor_ndim(t), tg_tensor_shape(t), buf, esz);
    free(buf);
    return rc;
}

int tg__onnx_io(tg__onnx *g, bool output, const char *name, int dt, int ndim,
                const int64_t *shape, bool dynamic_batch)
{
    return tg__onnx_io_axis(g, output, name, dt, ndim, shape, dynamic_batch ? 0 : -1);
}

int tg__onnx_io_axis(tg__onnx *g, bool output, const char *name, int dt, int ndim,
                     const int64_t *shape, int batch_axis)
{
    TG_ASSERT(output ? g->n_out < 1 + TG__ONNX_MAX_EXTRA : g->n_in < TG__ONNX_MAX_INPUTS);
    Onnx__ValueInfoProto *v = tg__onnx_alloc(g, sizeof *v);
    Onnx__TypeProto *type = tg__onnx_alloc(g, sizeof *type);
    Onnx__TypeProto__Tensor *tt = tg__onnx_alloc(g, sizeof *tt);
    Onnx__TensorShapeProto *sh = tg__onnx_alloc(g, sizeof *sh);
    Onnx__TensorShapeProto__Dimension **dims =
        tg__onnx_alloc(g, (size_t)(ndim > 0 ? ndim : 1) * sizeof *dims);
    const char *nm = tg__onnx_str(g, "%s", name);
    if (!v || !type || !tt || !sh || !dims || !nm) return TG_ENOMEM;
    onnx__value_info_proto__init(v);
    onnx__type_proto__init(type);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    for (int d = 0; d < ndim; d++) {
        Onnx__TensorShapeProto__Dimension *dim = tg__onnx_alloc(g, sizeof *dim);
        if (!dim) return TG_ENOMEM;
        onnx__tensor_shape_proto__dimension__init(dim);
        if (d == batch_axis) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dim->dim_param = "batch";
        } else {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim->dim_value = shape[d];
        }
        dims[d] = dim;
    }
    sh->n_dim = (size_t)ndim;
    sh->dim = dims;
    tt->has_elem_type = true;
    tt->elem_type = dt;
    tt->shape = sh;
    type->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    type->tensor_type = tt;
    v->name = (char *)nm;
    v->type = type;
    if (output) g->out[g->n_out++] = v;
    else g->in[g->n_in++] = v;
    return TG_OK;
}

int tg__onnx_rename(tg__onnx *g, const char *from, const char *to)
{
    const char *old = tg__onnx_str(g, "%s", from);   /* from may be a string replaced */
    if (!old) return TG_ENOMEM;
    for (size_t i = 0; i < g->n_nodes; i++) {
        Onnx__NodeProto *n = g->nodes[i];
        for (size_t j = 0; j < n->n_input; j++)
            if (!strcmp(n->input[j], old)) n->input[j] = (char *)to;
        for (size_t j = 0; j < n->n_output; j++)
            if (!strcmp(n->output[j], old)) n->output[j] = (char *)to;
    }
    return TG_OK;
}

int tg__onnx_write(tg__onnx *g, const char *path)
{
    const char *what = "onnx_export";
    TG_ASSERT(g->n_in > 0 && g->n_out > 0);
    g->graph.n_node = g->n_nodes;
    g->graph.node = g->nodes;
    g->graph.n_initializer = g->n_inits;
    g->graph.initializer = g->inits;
    g->graph.n_input = g->n_in;
    g->graph.input = g->in;
    g->graph.n_output = g->n_out;
    g->graph.output = g->out;
    const size_t n = onnx__model_proto__get_packed_size(&g->model);
    uint8_t *buf = tg__malloc(n ? n : 1);
    if (!buf) return TG_ENOMEM;
    const size_t packed = onnx__model_proto__pack(&g->model, buf);
    TG_ASSERT(packed == n);
    FILE *f = NULL;
    char *tmp = NULL;
    int rc = tg__atomic_open(&f, &tmp, what, path);
    if (rc == TG_OK) {
        bool ok = fwrite(buf, 1, n, f) == n;
        rc = tg__atomic_finish(f, &tmp, ok, what, path);
        if (rc == TG_OK && !ok) rc = tg__error(TG_EIO, "%s: writing '%s' failed", what, path);
    }
    free(buf);
    return rc;
}
