/* Activation recomputation (torch.utils.checkpoint.checkpoint): a block run
 * without keeping its activations, run again in the backward.
 *
 * The block's outputs are one node of op "recompute" whose inputs are the
 * block's tensor inputs (and, with tg_recompute_ex, one parameter that
 * requires grad, so that the node is recorded when no input requires grad:
 * torch's non-reentrant checkpoint).  Its forward calls fn with grad mode
 * off, so nothing inside is saved; it saves only the inputs.  Several
 * outputs leave the forward flattened into one tensor (their concatenation),
 * the node's output, and reach the caller as reshaped slices of it, so the
 * gradients of all of them reach the one node.
 *
 * Its backward calls fn again with grad mode on, on detached copies of the
 * inputs that require grad as the originals did, and runs a backward of its
 * own from the recomputed outputs with the incoming gradients: the
 * parameters fn uses receive their gradients into .grad there, the copies'
 * .grad are the gradients of the inputs.  The ops and their order are those
 * of the plain block, so the gradients are the same bits.  Under autocast
 * the node records the scope's state (on in which dtype, or off) and fn runs
 * again in that state, as torch's checkpoint does: the recomputed ops cast
 * as they did in the forward, also when the backward runs outside the
 * scope. */

#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "engine/engine.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"

#define MAX_OUT TG_OP_MAX_INPUTS

/* The node's params: fn, its user data (user_size bytes copied after this
 * header when user_size > 0, else the caller's pointer) and what the
 * forward gave, to check the recomputation against. */
typedef struct rc_params {
    tg_recompute_fn fn;
    void *user;
    size_t user_size;
    int n_in, n_out;
    bool autocast;           /* the forward ran inside an enabled autocast scope */
    tg_dtype autocast_dt;    /* its dtype */
    tg_meta out[MAX_OUT];
    _Alignas(max_align_t) unsigned char user_copy[];
} rc_params;

static void *user_of(const rc_params *p)
{
    return p->user_size ? (void *)p->user_copy : p->user;
}

static void release_all(tg_tensor **ts, int n)
{
    for (int i = 0; i < n; i++) {
        tg_tensor_release(ts[i]);
        ts[i] = NULL;
    }
}

/* Calls fn; every output must be set (a new reference). */
static int call_fn(const rc_params *p, tg_tensor **outs, tg_tensor *const *in)
{
    tg__callback_begin();
    int rc = tg__callback_end("recompute: fn", p->fn(outs, p->n_out, p->n_in, in, user_of(p)));
    for (int k = 0; rc >= 0 && k < p->n_out; k++)
        if (!outs[k]) rc = tg__error(TG_EINVAL, "recompute: fn returned TG_OK but left "
                                                "outs[%d] NULL", k);
    if (rc < 0) release_all(outs, p->n_out);
    return rc;
}

/* The outputs flattened and joined: the node's one output. */
static int pack(tg_tensor **out, int n, tg_tensor *const *outs)
{
    tg_tensor *flat[MAX_OUT] = {0};
    int rc = TG_OK;
    for (int k = 0; rc >= 0 && k < n; k++) {
        if (outs[k]->dtype != outs[0]->dtype)
            rc = tg__error(TG_EDTYPE, "recompute: outs[%d] is %s and outs[0] %s: the outputs "
                                      "of one block share a dtype", k,
                           tg_dtype_name(outs[k]->dtype), tg_dtype_name(outs[0]->dtype));
        else
            rc = tg_reshape(&flat[k], outs[k], 1, (int64_t[]){-1});
    }
    if (rc >= 0) rc = tg_cat(out, n, flat, 0);
    release_all(flat, n);
    return rc;
}

static int rc_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                      const void *params)
{
    (void)n;
    const rc_params *p = params;
    tg_tensor *outs[MAX_OUT] = {0};
    TG_TRY(call_fn(p, outs, in));
    int rc = TG_OK;
    if (p->n_out == 1) *out = tg_tensor_retain(outs[0]);
    else rc = pack(out, p->n_out, outs);
    if (rc >= 0 && ctx) {
        /* the node's copy of the params records what the forward gave */
        rc_params *kept = ctx->params;
        for (int k = 0; k < p->n_out; k++) tg__meta_of(&kept->out[k], outs[k]);
        for (int i = 0; rc >= 0 && i < p->n_in; i++) rc = tg_op_ctx_save(ctx, in[i]);
        if (rc < 0) tg_tensor_release(*out);
    }
    release_all(outs, p->n_out);
    return rc;
}

/* outs[k] against the forward's: TG_EGRAD naming the output. */
static int check_outputs(const rc_params *p, tg_tensor *const *outs)
{
    for (int k = 0; k < p->n_out; k++) {
        if (tg__meta_matches(outs[k], &p->out[k])) continue;
        char a[96], b[96];
        return tg__error(TG_EGRAD, "recompute: outs[%d] was %s %s in the forward but is %s %s "
                                   "when fn runs again: fn must compute the same thing",
                         k, tg_dtype_name(p->out[k].dtype),
                         tg_shape_str(a, sizeof a, p->out[k].ndim, p->out[k].shape),
                         tg_dtype_name(outs[k]->dtype),
                         tg_shape_str(b, sizeof b, outs[k]->ndim, outs[k]->shape));
    }
    return TG_OK;
}

/* The graph of the recomputed outputs must stay inside the block (nodes
 * recorded since `since`) apart from leaves: a tensor with a history that
 * fn reads without it being an input was not recorded as one of the node's
 * inputs, so the backward run here would go on through that history on its
 * own, beside the outer backward (twice through it, or into freed buffers). */
static int check_reads(const rc_params *p, tg_tensor *const *outs, uint64_t since)
{
    const tg_node *older = NULL;
    TG_TRY(tg__tape_find_older(outs, p->n_out, since, &older));
    TG_CHECK(!older, TG_EGRAD,
             "recompute: fn reads a tensor that is not one of its inputs and not a leaf "
             "(the output of %s, node #%llu): pass it in `in`, or detach it",
             older ? older->op->name : "", older ? (unsigned long long)older->seq : 0ULL);
    return TG_OK;
}

/* Output k of a packed tensor (the node's output, or its gradient): the
 * elements [off, off + its numel) of flat, reshaped to output k's shape. */
static int unpack_one(tg_tensor **res, tg_tensor *flat, int64_t off, const tg_meta *m)
{
    tg_tensor *s = NULL;
    TG_TRY(tg_slice(&s, flat, 0, off, off + tg__numel(m->ndim, m->shape), 1));
    int rc = tg_reshape(res, s, m->ndim, m->shape);
    tg_tensor_release(s);
    return rc;
}

/* The gradient of output k: g itself for one output, else its part of the
 * packed g. */
static int grad_of(tg_tensor **gk, const rc_params *p, tg_tensor *g, int k, int64_t off)
{
    if (p->n_out == 1) {
        *gk = tg_tensor_retain(g);
        return TG_OK;
    }
    return unpack_one(gk, g, off, &p->out[k]);
}

/* fn run again for the backward: grad mode on, autocast as in the forward
 * (the engine runs a backward with autocast suspended). */
static int call_fn_again(const rc_params *p, tg_tensor **outs, tg_tensor *const *in)
{
    tg__autocast_mark mark;
    TG_TRY(tg__autocast_enter(p->autocast, p->autocast ? p->autocast_dt : TG_F32, &mark));
    bool prev = tg_set_grad_enabled(true);
    int rc = call_fn(p, outs, in);
    tg_set_grad_enabled(prev);
    tg__autocast_leave(&mark);
    return rc;
}

/* Runs the backward of the recomputed outputs that require grad. */
static int backward_outputs(const rc_params *p, tg_tensor *const *outs, tg_tensor *g)
{
    tg_tensor *roots[MAX_OUT] = {0}, *grads[MAX_OUT] = {0};
    int n_roots = 0, rc = TG_OK;
    int64_t off = 0;
    for (int k = 0; rc >= 0 && k < p->n_out; k++) {
        int64_t numel = tg_tensor_numel(outs[k]);
        if (outs[k]->requires_grad) {
            roots[n_roots] = outs[k];
            rc = grad_of(&grads[n_roots++], p, g, k, off);
        }
        off += numel;
    }
    tg__engine_req req = {.accumulate = true};
    if (rc >= 0 && n_roots > 0) rc = tg__engine_run(&req, n_roots, roots, grads);
    release_all(grads, n_roots);
    return rc;
}

static int rc_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **grad_in)
{
    const rc_params *p = ctx->params;
    const tg__engine_req *outer = tg__engine_current;
    TG_CHECK(!outer || outer->accumulate, TG_EGRAD,
             "recompute: a recomputed block gives its gradients through tg_backward only "
             "(its parameters' gradients go into .grad); tg_grad through it is refused");
    tg_tensor *in[TG_OP_MAX_INPUTS] = {0}, *outs[MAX_OUT] = {0};
    int rc = TG_OK;
    for (int i = 0; rc >= 0 && i < p->n_in; i++) {
        tg_tensor *x = NULL;
        rc = tg_op_ctx_saved(ctx, i, &x);
        if (rc >= 0) rc = tg_tensor_detach(&in[i], x);
        if (rc >= 0) rc = tg_tensor_set_requires_grad(in[i], ctx->needs_grad[i]);
    }
    const uint64_t since = tg__tape_seq_next();
    if (rc >= 0) rc = call_fn_again(p, outs, in);
    if (rc >= 0) rc = check_outputs(p, outs);
    if (rc >= 0) rc = check_reads(p, outs, since);
    if (rc >= 0) rc = backward_outputs(p, outs, g);
    for (int i = 0; rc >= 0 && i < p->n_in; i++)
        if (ctx->needs_grad[i] && tg_tensor_grad(in[i]))
            grad_in[i] = tg_tensor_retain(tg_tensor_grad(in[i]));
    release_all(outs, p->n_out);
    release_all(in, p->n_in);
    return rc;
}

/* Its backward runs a backward of its own without create_graph, whose
 * gradients are functions of the detached copies, not of the inputs: a
 * graph of it would give wrong higher derivatives, so the engine refuses
 * create_graph through it (double_backward = false). */
static const tg_op_schema recompute_op = {.name = "recompute",
                                          .arity = TG_OP_VARIADIC,
                                          .amp = TG_AMP_KEEP,
                                          .forward = rc_forward,
                                          .backward = rc_backward,
                                          .double_backward = false,
                                          .vjp = "da, db, ... = the gradients of the block run "
                                                 "again on a, b, ... with grad on (its parameters' "
                                                 "gradients go into .grad)"};

static int check_args(tg_tensor **outs, int n_out, tg_recompute_fn fn, const void *user,
                      size_t user_size, int n_in, tg_tensor *const *in, int n_params,
                      tg_tensor *const *params)
{
    TG_CHECK(outs, TG_EINVAL, "recompute: outs is NULL");
    TG_CHECK(fn, TG_EINVAL, "recompute: fn is NULL");
    TG_CHECK(n_out >= 1 && n_out <= MAX_OUT, TG_EINVAL,
             "recompute: n_out=%d must be in [1, %d]", n_out, MAX_OUT);
    TG_CHECK(n_in >= 1 && n_in <= TG_OP_MAX_INPUTS, TG_EINVAL,
             "recompute: n_in=%d must be in [1, %d]", n_in, TG_OP_MAX_INPUTS);
    TG_CHECK(in, TG_EINVAL, "recompute: in is NULL");
    for (int i = 0; i < n_in; i++) TG_CHECK(in[i], TG_EINVAL, "recompute: in[%d] is NULL", i);
    TG_CHECK(!user_size || user, TG_EINVAL, "recompute: user is NULL with user_size=%zu",
             user_size);
    TG_CHECK(n_params >= 0, TG_EINVAL, "recompute: n_params=%d must be >= 0", n_params);
    TG_CHECK(!n_params || params, TG_EINVAL, "recompute: params is NULL with n_params=%d",
             n_params);
    for (int i = 0; i < n_params; i++)
        TG_CHECK(params[i], TG_EINVAL, "recompute: params[%d] is NULL", i);
    return TG_OK;
}

/* The first parameter that requires grad, or NULL. */
static tg_tensor *anchor_of(int n_params, tg_tensor *const *params)
{
    for (int i = 0; i < n_params; i++)
        if (params[i]->requires_grad) return params[i];
    return NULL;
}

/* Splits the node's output y into the n_out outputs. */
static int unpack(tg_tensor **res, int n_out, tg_tensor *y, const rc_params *p)
{
    int64_t off = 0;
    int rc = TG_OK;
    for (int k = 0; rc >= 0 && k < n_out; k++) {
        rc = unpack_one(&res[k], y, off, &p->out[k]);
        off += tg__numel(p->out[k].ndim, p->out[k].shape);
    }
    if (rc < 0) release_all(res, n_out);
    return rc;
}

int tg_recompute_ex(tg_tensor **outs, int n_out, tg_recompute_fn fn, const void *user,
                    size_t user_size, int n_in, tg_tensor *const *in, int n_params,
                    tg_tensor *const *params)
{
    TG_TRY(check_args(outs, n_out, fn, user, user_size, n_in, in, n_params, params));
    tg_tensor *anchor = anchor_of(n_params, params);
    TG_CHECK(!anchor || n_in < TG_OP_MAX_INPUTS, TG_EINVAL,
             "recompute: n_in=%d must be < %d when a parameter requires grad", n_in,
             TG_OP_MAX_INPUTS);
    size_t size = sizeof(rc_params) + user_size;
    rc_params *p = tg__calloc(1, size);
    if (!p) return TG_ENOMEM;
    *p = (rc_params){.fn = fn, .user = (void *)user, .user_size = user_size, .n_in = n_in,
                     .n_out = n_out};
    p->autocast = tg__autocast_dtype(&p->autocast_dt);
    if (user_size) memcpy(p->user_copy, user, user_size);
    tg_tensor *all[TG_OP_MAX_INPUTS], *y = NULL, *res[MAX_OUT] = {0};
    memcpy(all, in, sizeof(tg_tensor *) * (size_t)n_in);
    if (anchor) all[n_in] = anchor;
    bool recorded = anchor != NULL;
    for (int i = 0; i < n_in; i++) recorded = recorded || in[i]->requires_grad;
    recorded = recorded && tg_grad_enabled();
    int rc = TG_OK;
    tg__lib_enter();   /* only the outputs go to the caller's scope */
    if (!recorded) {
        /* nothing to recompute for: fn runs once, with grad mode off as in
         * the recorded case, so its outputs are the same either way */
        bool prev = tg_set_grad_enabled(false);
        rc = call_fn(p, res, in);
        tg_set_grad_enabled(prev);
    } else {
        rc = tg_op_call(&recompute_op, &y, n_in + (anchor != NULL), all, p, size);
        if (rc >= 0 && n_out == 1) res[0] = tg_tensor_retain(y);
        else if (rc >= 0 && !y->grad_fn)   /* an integer output is never recorded */
            rc = tg__error(TG_EDTYPE, "recompute: the outputs are %s; several outputs of a "
                                      "recomputed block must be float", tg_dtype_name(y->dtype));
        else if (rc >= 0) rc = unpack(res, n_out, y, y->grad_fn->params);
    }
    tg_tensor_release(y);
    tg__lib_leave();
    free(p);
    for (int k = 0; rc >= 0 && k < n_out; k++) rc = tg__scope_capture(&res[k], rc);
    if (rc < 0) {
        release_all(res, n_out);
        return rc;
    }
    memcpy(outs, res, sizeof(tg_tensor *) * (size_t)n_out);
    return TG_OK;
}

int tg_recompute(tg_tensor **outs, int n_out, tg_recompute_fn fn, void *user, int n_in,
                 tg_tensor *const *in)
{
    return tg_recompute_ex(outs, n_out, fn, user, 0, n_in, in, 0, NULL);
}
