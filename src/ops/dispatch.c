/* src/ops/dispatch.c - the one path every op call takes, built-in or a
 * program's own (tapegrad/op.h): AMP casts, the shape rule, the forward,
 * recording on the tape and tracing. */
#include <string.h>

#include "core/core.h"
#include "core/profile.h"
#include "autograd/tape.h"
#include "tapegrad/ops.h"
#include "tapegrad/profile.h"

/* The dtype PROMOTE gives (registry.h). */
tg_dtype tg_promote_dtypes(tg_dtype a, tg_dtype b)
{
    if (a == b) return a;
    bool fa = tg_dtype_is_float(a), fb = tg_dtype_is_float(b);
    if (!fa || !fb) return fa ? a : b;   /* a float wins over an integer */
    if (a == TG_F64 || b == TG_F64) return TG_F64;
    /* f32 with a half type, or f16 with bf16 (neither holds the other). */
    return TG_F32;
}

/* The dtype op's AMP policy casts the float inputs to; false when none is cast. */
static bool amp_target(const tg_op_schema *op, int n, tg_tensor *const *in, tg_dtype *target)
{
    if (op->amp == TG_AMP_KEEP) return false;
    /* As PyTorch's type promotion: a 0-d tensor's dtype counts only when every
     * float input is 0-d (an f32 tensor times an f64 0-d tensor is f32). */
    bool any = false, dimensioned = false;
    for (int i = 0; i < n; i++)
        dimensioned |= in[i] && tg_dtype_is_float(in[i]->dtype) && in[i]->ndim > 0;
    tg_dtype widest = TG_F32;
    for (int i = 0; i < n; i++) {
        if (!in[i] || !tg_dtype_is_float(in[i]->dtype) || (dimensioned && in[i]->ndim == 0))
            continue;
        widest = any ? tg_promote_dtypes(widest, in[i]->dtype) : in[i]->dtype;
        any = true;
    }
    if (!any) return false;
    tg_dtype scope;
    *target = widest;
    /* Inside autocast f64 is never lowered: an f64 input makes the op f64. */
    if (widest != TG_F64 && tg__autocast_dtype(&scope)) {
        if (op->amp == TG_AMP_LOWER_PRECISION) *target = scope;
        else if (op->amp == TG_AMP_FP32) *target = TG_F32;
    }
    return true;
}

/* Fills eff[i] with in[i] or a recorded cast of it (casts[i], new reference). */
static int apply_amp(const tg_op_schema *op, int n, tg_tensor *const *in, tg_tensor **eff,
                     tg_tensor **casts)
{
    tg_dtype target = TG_F32;
    bool cast = amp_target(op, n, in, &target);
    for (int i = 0; i < n; i++) {
        eff[i] = in[i];
        casts[i] = NULL;
        if (!cast || !in[i] || !tg_dtype_is_float(in[i]->dtype) || in[i]->dtype == target)
            continue;
        int rc = tg_to_dtype(&casts[i], in[i], target);
        if (rc < 0) {
            for (int j = 0; j < i; j++) tg_tensor_release(casts[j]);
            return rc;
        }
        eff[i] = casts[i];
    }
    return TG_OK;
}

static void describe_input(char *buf, size_t size, const tg_tensor *t)
{
    char shape[96], who[64], nb[48];
    if (!t) {
        snprintf(buf, size, "none");
        return;
    }
    if (t->grad_fn) snprintf(who, sizeof who, "#%llu", (unsigned long long)t->grad_fn->seq);
    else if (t->requires_grad) snprintf(who, sizeof who, "leaf%s", tg__name_note(t, false, nb));
    else snprintf(who, sizeof who, "const");
    snprintf(buf, size, "%s %s %s", who, tg_dtype_name(t->dtype),
             tg_shape_str(shape, sizeof shape, t->ndim, t->shape));
}

static void trace_record(const tg_node *node, int n, tg_tensor *const *in, const tg_tensor *out)
{
    char desc[160], shape[96];
    fprintf(stderr, "[tape] record #%llu %s(", (unsigned long long)node->seq, node->op->name);
    for (int i = 0; i < n; i++) {
        describe_input(desc, sizeof desc, in[i]);
        fprintf(stderr, "%s%s", i ? ", " : "", desc);
    }
    fprintf(stderr, ") -> %s %s\n", tg_dtype_name(out->dtype),
            tg_shape_str(shape, sizeof shape, out->ndim, out->shape));
}

static bool any_requires_grad(int n, tg_tensor *const *in)
{
    for (int i = 0; i < n; i++)
        if (in[i] && in[i]->requires_grad) return true;
    return false;
}

/* A recorded output must be a tensor of its own: a forward that hands back an
 * input (retained) gets a fresh view of it instead, so the input's grad_fn is
 * not overwritten. */
static int own_output(tg_tensor **res)
{
    tg_tensor *t = *res;
    if (t->refcount == 1 && !t->grad_fn && !t->requires_grad) return TG_OK;
    tg_tensor *v = tg__tensor_view_of(t->storage, t->dtype, t->ndim, t->shape, t->strides,
                                      t->offset);
    if (!v) return TG_ENOMEM;
    tg_tensor_release(t);
    *res = v;
    return TG_OK;
}

static tg_node *make_node(const tg_op_schema *op, int n, tg_tensor *const *in,
                          const void *params, size_t params_size)
{
    tg_node *node = tg__node_new(op, n, in);
    if (!node || params_size == 0) return node;
    node->params = tg__malloc(params_size);
    if (!node->params) {
        tg__node_release(node);
        return NULL;
    }
    memcpy(node->params, params, params_size);
    node->params_size = params_size;
    return node;
}

/* Runs op's shape rule on the inputs it will see (eff): *meta gets the
 * output it promises. */
static int run_shape_rule(const tg_op_schema *op, int n, tg_tensor *const *eff,
                          const void *params, tg_meta *meta)
{
    *meta = (tg_meta){.dtype = TG_F32, .ndim = 0};
    tg__callback_begin();
    TG_TRY(tg__op_callback_end(op->name, "the shape rule",
                               op->shape(n, eff, params, &meta->dtype, &meta->ndim, meta->shape)));
    TG_CHECK(meta->ndim >= 0 && meta->ndim <= TG_MAX_DIMS, TG_EINVAL,
             "%s: the shape rule gave ndim=%d; it must be in [0, %d]", op->name, meta->ndim,
             TG_MAX_DIMS);
    return TG_OK;
}

/* The forward's result against what the op promised: a result at all, and
 * the shape rule's dtype and shape when there is one. */
static int check_result(const tg_op_schema *op, const tg_tensor *res, const tg_meta *promised)
{
    TG_CHECK(res != NULL, TG_EINVAL, "%s: forward returned TG_OK without an output", op->name);
    if (!op->shape) return TG_OK;
    bool same = res->dtype == promised->dtype && res->ndim == promised->ndim;
    for (int d = 0; same && d < res->ndim; d++) same = res->shape[d] == promised->shape[d];
    if (same) return TG_OK;
    char rs[96], ps[96];
    return tg__error(TG_ESHAPE, "%s: forward gave %s %s, but the shape rule said %s %s", op->name,
                     tg_dtype_name(res->dtype), tg_shape_str(rs, sizeof rs, res->ndim, res->shape),
                     tg_dtype_name(promised->dtype),
                     tg_shape_str(ps, sizeof ps, promised->ndim, promised->shape));
}

/* Runs op's forward (a program's own code, for its own ops) with grad mode
 * off. */
static int run_forward(const tg_op_schema *op, tg_node *node, tg_tensor **res, int n,
                       tg_tensor *const *eff, const void *params)
{
    bool prev = tg_set_grad_enabled(false);
    tg__callback_begin();
    int rc = tg__op_callback_end(op->name, "the forward", op->forward(node, res, n, eff, params));
    tg_set_grad_enabled(prev);
    return rc;
}

static int op_call(const tg_op_schema *op, tg_tensor **out, int n, tg_tensor *const *in,
                   const void *params, size_t params_size)
{
    TG_CHECK(op != NULL && op->name != NULL && op->forward != NULL, TG_EINVAL,
             "op_call: op must be a schema with a name and a forward");
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op->name);
    TG_CHECK(n >= 0 && n <= TG_NODE_MAX_INPUTS, TG_EINVAL, "%s: n=%d inputs must be in [0, %d]",
             op->name, n, TG_NODE_MAX_INPUTS);
    TG_CHECK(op->arity < 0 || op->arity == n, TG_EINVAL, "%s: n=%d inputs; the op takes %d",
             op->name, n, op->arity);
    TG_CHECK(n == 0 || in != NULL, TG_EINVAL, "%s: inputs must not be NULL", op->name);
    TG_CHECK(params_size == 0 || params != NULL, TG_EINVAL,
             "%s: params must not be NULL when params_size=%zu", op->name, params_size);

    /* A sparse COO tensor (a sparse gradient) has no dense elements for a
     * forward to read: every op refuses it here (tapegrad/sparse.h). */
    for (int i = 0; i < n; i++)
        if (in[i] && in[i]->sparse)
            return tg__error(TG_EUNSUPPORTED, "%s: input %d is a sparse COO tensor (a sparse "
                             "gradient); ops take dense tensors only (tg_sparse_to_dense makes "
                             "one)", op->name, i);
    tg_tensor *eff[TG_NODE_MAX_INPUTS], *casts[TG_NODE_MAX_INPUTS];
    TG_TRY(apply_amp(op, n, in, eff, casts));

    int rc = TG_OK;
    tg_node *node = NULL;
    tg_tensor *res = NULL;
    tg_meta promised;
    if (op->shape && (rc = run_shape_rule(op, n, eff, params, &promised)) < 0) goto done;
    if (tg_grad_enabled() && op->backward && any_requires_grad(n, eff)) {
        node = make_node(op, n, eff, params, params_size);
        if (!node) {
            rc = TG_ENOMEM;
            goto done;
        }
    }
    rc = run_forward(op, node, &res, n, eff, params);
    if (rc >= 0) rc = check_result(op, res, &promised);
    if (rc < 0) {
        tg_tensor_release(res);   /* a forward should not leave one; be safe */
        goto done;
    }
    /* As PyTorch, an integer output is never differentiable: it is not
     * recorded (the node goes, with what the forward saved) and does not
     * require grad, whatever the op's schema says. */
    if (node && !tg_dtype_is_float(res->dtype)) {
        tg__node_release(node);
        node = NULL;
    }
    if (node) {
        rc = own_output(&res);
        if (rc < 0) {
            tg_tensor_release(res);
            goto done;
        }
        tg__node_save_uncast(node, n, in, casts);
        node->out_meta.dtype = res->dtype;
        node->out_meta.ndim = res->ndim;
        memcpy(node->out_meta.shape, res->shape, sizeof(int64_t) * (size_t)res->ndim);
        res->grad_fn = node;   /* steals the node's first reference */
        node->out = res;       /* borrowed: cleared when res is freed */
        res->requires_grad = true;
        if (tg__trace_enabled()) trace_record(node, n, eff, res);
        node = NULL;
    }
    *out = res;
done:
    tg__node_release(node);
    for (int i = 0; i < n; i++) tg_tensor_release(casts[i]);
    return rc;
}

/* The ops an op runs itself (casts, its forward's helpers) are the library's;
 * its result goes to the caller's scope (tapegrad/scope.h). */
int tg_op_call(const tg_op_schema *op, tg_tensor **out, int n, tg_tensor *const *in,
               const void *params, size_t params_size)
{
    tg__lib_enter();
    const int prof = op && op->name ? tg__prof_enter(op->name, TG_PROFILE_FORWARD) : -1;
    int rc = op_call(op, out, n, in, params, params_size);
    tg__prof_leave(prof);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
