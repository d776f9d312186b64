/* src/autograd/ctx.c - the context a recorded op call's forward and backward
 * share (tapegrad/op.h): saved tensors, saved numbers, which inputs need a
 * gradient.  The ctx is the call's node on the tape. */
#include "core/core.h"
#include "autograd/tape.h"

int tg_op_ctx_save(tg_op_ctx *ctx, tg_tensor *t)
{
    TG_CHECK(ctx != NULL, TG_EINVAL, "op_ctx_save: ctx must not be NULL (the call is not "
             "recorded: test ctx before saving)");
    TG_CHECK(t != NULL, TG_EINVAL, "op_ctx_save: %s: t must not be NULL", ctx->op->name);
    TG_CHECK(ctx->n_saved < TG_OP_MAX_SAVED, TG_EINVAL,
             "op_ctx_save: %s: at most %d tensors are saved per call", ctx->op->name,
             TG_OP_MAX_SAVED);
    return tg__ctx_save(ctx, t);
}

int tg_op_ctx_save_output(tg_op_ctx *ctx, tg_tensor *out)
{
    TG_CHECK(ctx != NULL, TG_EINVAL, "op_ctx_save_output: ctx must not be NULL");
    TG_CHECK(out != NULL, TG_EINVAL, "op_ctx_save_output: %s: out must not be NULL",
             ctx->op->name);
    tg_tensor *alias = NULL;
    TG_TRY(tg_tensor_detach(&alias, out));
    int slot = tg_op_ctx_save(ctx, alias);
    tg_tensor_release(alias);
    return slot;
}

static int check_slot(const tg_op_ctx *ctx, const char *what, int i, int n)
{
    TG_CHECK(ctx != NULL, TG_EINVAL, "%s: ctx must not be NULL", what);
    TG_CHECK(i >= 0 && i < n, TG_EINVAL, "%s: %s: slot i=%d was not saved (%d saved)", what,
             ctx->op->name, i, n);
    return TG_OK;
}

int tg_op_ctx_saved(tg_op_ctx *ctx, int i, tg_tensor **t)
{
    TG_CHECK(t != NULL, TG_EINVAL, "op_ctx_saved: t must not be NULL");
    TG_TRY(check_slot(ctx, "op_ctx_saved", i, ctx ? ctx->n_saved : 0));
    return tg__ctx_saved(ctx, i, t);
}

int tg_op_ctx_saved_output(tg_op_ctx *ctx, int i, tg_tensor **t)
{
    TG_CHECK(t != NULL, TG_EINVAL, "op_ctx_saved_output: t must not be NULL");
    TG_TRY(check_slot(ctx, "op_ctx_saved_output", i, ctx ? ctx->n_saved : 0));
    return tg__ctx_saved_output(ctx, i, t);
}

int tg_op_ctx_save_scalar(tg_op_ctx *ctx, double v)
{
    TG_CHECK(ctx != NULL, TG_EINVAL, "op_ctx_save_scalar: ctx must not be NULL");
    TG_CHECK(ctx->n_scalars < TG_OP_MAX_SCALARS, TG_EINVAL,
             "op_ctx_save_scalar: %s: at most %d numbers are saved per call", ctx->op->name,
             TG_OP_MAX_SCALARS);
    ctx->scalars[ctx->n_scalars] = v;
    return ctx->n_scalars++;
}

int tg_op_ctx_saved_scalar(const tg_op_ctx *ctx, int i, double *v)
{
    TG_CHECK(v != NULL, TG_EINVAL, "op_ctx_saved_scalar: v must not be NULL");
    TG_TRY(check_slot(ctx, "op_ctx_saved_scalar", i, ctx ? ctx->n_scalars : 0));
    *v = ctx->scalars[i];
    return TG_OK;
}

bool tg_op_ctx_needs_grad(const tg_op_ctx *ctx, int i)
{
    return ctx && i >= 0 && i < ctx->n_inputs && ctx->needs_grad[i];
}

const void *tg_op_ctx_params(const tg_op_ctx *ctx) { return ctx ? ctx->params : NULL; }

void tg_op_ctx_input(const tg_op_ctx *ctx, int i, tg_dtype *dtype, int *ndim,
                     const int64_t **shape)
{
    bool ok = ctx && i >= 0 && i < ctx->n_inputs;
    const tg_meta *m = ok ? &ctx->in_meta[i] : NULL;
    if (dtype) *dtype = m ? m->dtype : TG_F32;
    if (ndim) *ndim = m ? m->ndim : -1;
    if (shape) *shape = m ? m->shape : NULL;
}

const tg_op_schema *tg_op_ctx_op(const tg_op_ctx *ctx) { return ctx ? ctx->op : NULL; }
