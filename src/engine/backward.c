/* The backward engine's entry points: tg_backward, tg_backward_steps and
 * tg_grad.  They check the caller's arguments, make each root's seed
 * gradient and hand tg_grad's results out; the run itself is engine.c's. */

#include <stdlib.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "engine/engine.h"
#include "tapegrad/ops.h"

/* Checks root and its gradient; *seed_out is a new reference (ones when grad
 * is NULL). */
static int root_grad(const char *what, tg_tensor *root, tg_tensor *grad, tg_tensor **seed_out)
{
    char rs[96], gs[96];
    TG_CHECK(root->requires_grad, TG_EGRAD,
             "%s: tensor does not require grad and has no grad_fn", what);
    if (!grad) {
        TG_CHECK(tg_tensor_numel(root) == 1, TG_EINVAL,
                 "%s: grad may be NULL only for a one-element output (output has shape %s)",
                 what, tg_shape_str(rs, sizeof rs, root->ndim, root->shape));
        return tg_tensor_full(seed_out, root->dtype, root->ndim, root->shape, 1.0);
    }
    TG_CHECK(tg_tensor_same_shape(root, grad), TG_ESHAPE,
             "%s: grad shape %s must equal the output's shape %s", what,
             tg_shape_str(gs, sizeof gs, grad->ndim, grad->shape),
             tg_shape_str(rs, sizeof rs, root->ndim, root->shape));
    /* Another float dtype is cast to the output's, as in PyTorch. */
    TG_CHECK(grad->dtype == root->dtype || tg_dtype_is_float(grad->dtype), TG_EDTYPE,
             "%s: grad dtype %s must be a float dtype (the output is %s)", what,
             tg_dtype_name(grad->dtype), tg_dtype_name(root->dtype));
    if (grad->dtype != root->dtype) return tg_to_dtype(seed_out, grad, root->dtype);
    *seed_out = tg_tensor_retain(grad);
    return TG_OK;
}

static int backward(const char *what, tg_tensor *out, tg_tensor *grad,
                    const tg_backward_opts *opts, tg_backward_step_fn fn, void *user)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", what);
    tg_backward_opts o = opts ? *opts : (tg_backward_opts)TG_BACKWARD_OPTS_INIT;
    tg_tensor *g = NULL;
    TG_TRY(root_grad(what, out, grad, &g));
    tg__engine_req r = {.create_graph = o.create_graph,
                        .retain_graph = o.retain_graph || o.create_graph,
                        .accumulate = true, .on_step = fn, .step_user = user};
    int rc = tg__engine_run(&r, 1, &out, &g);
    tg_tensor_release(g);
    return rc;
}

static int grad_impl(tg_tensor **grads_out, int n_outputs, tg_tensor *const *outputs,
                     tg_tensor *const *grad_outputs, int n_inputs, tg_tensor *const *inputs,
                     const tg_backward_opts *opts)
{
    TG_CHECK(grads_out != NULL, TG_EINVAL, "grad: grads_out must not be NULL");
    TG_CHECK(n_outputs >= 1 && outputs != NULL, TG_EINVAL,
             "grad: n_outputs=%d must be >= 1 with outputs not NULL", n_outputs);
    TG_CHECK(n_inputs >= 1 && inputs != NULL, TG_EINVAL,
             "grad: n_inputs=%d must be >= 1 with inputs not NULL", n_inputs);
    for (int i = 0; i < n_inputs; i++) grads_out[i] = NULL;
    for (int i = 0; i < n_inputs; i++) {
        TG_CHECK(inputs[i] != NULL, TG_EINVAL, "grad: inputs[%d] must not be NULL", i);
        TG_CHECK(inputs[i]->requires_grad, TG_EGRAD,
                 "grad: inputs[%d] does not require grad, so it has no gradient (as PyTorch: "
                 "'One of the differentiated Tensors does not require grad')", i);
    }
    tg_backward_opts o = opts ? *opts : (tg_backward_opts)TG_BACKWARD_OPTS_INIT;
    tg_tensor **seeds = tg__calloc((size_t)n_outputs, sizeof *seeds);
    tg_tensor **results = tg__calloc((size_t)n_inputs, sizeof *results);
    int rc = seeds && results ? TG_OK : TG_ENOMEM;
    for (int j = 0; j < n_outputs && rc >= 0; j++) {
        rc = outputs[j] ? TG_OK : tg__error(TG_EINVAL, "grad: outputs[%d] must not be NULL", j);
        if (rc >= 0)
            rc = root_grad("grad", outputs[j], grad_outputs ? grad_outputs[j] : NULL, &seeds[j]);
    }
    if (rc >= 0) {
        tg__engine_req r = {.create_graph = o.create_graph,
                            .retain_graph = o.retain_graph || o.create_graph,
                            .n_targets = n_inputs, .targets = inputs, .results = results};
        rc = tg__engine_run(&r, n_outputs, outputs, seeds);
    }
    for (int j = 0; seeds && j < n_outputs; j++) tg_tensor_release(seeds[j]);
    for (int i = 0; results && i < n_inputs; i++) {
        if (rc >= 0) grads_out[i] = results[i];
        else tg_tensor_release(results[i]);
    }
    free(seeds);
    free(results);
    return rc;
}

/* Backward runs ops and hooks on the library's behalf (never captured by a
 * scope); the gradients tg_grad hands out are the caller's. */
int tg_backward(tg_tensor *out, tg_tensor *grad, const tg_backward_opts *opts)
{
    tg__lib_enter();
    int rc = backward("backward", out, grad, opts, NULL, NULL);
    tg__lib_leave();
    return rc;
}

int tg_backward_steps(tg_tensor *out, tg_tensor *grad, const tg_backward_opts *opts,
                      tg_backward_step_fn fn, void *user)
{
    TG_CHECK(fn != NULL, TG_EINVAL, "backward_steps: fn must not be NULL");
    tg__lib_enter();
    int rc = backward("backward_steps", out, grad, opts, fn, user);
    tg__lib_leave();
    return rc;
}

int tg_grad(tg_tensor **grads_out, int n_outputs, tg_tensor *const *outputs,
            tg_tensor *const *grad_outputs, int n_inputs, tg_tensor *const *inputs,
            const tg_backward_opts *opts)
{
    tg__lib_enter();
    int rc = grad_impl(grads_out, n_outputs, outputs, grad_outputs, n_inputs, inputs, opts);
    tg__lib_leave();
    for (int i = 0; rc >= 0 && i < n_inputs; i++) {
        rc = tg__scope_capture(&grads_out[i], rc);
        if (rc < 0)   /* out of memory: hand out nothing, as on any error */
            for (int k = 0; k < n_inputs; k++) {
                if (k >= i) tg_tensor_release(grads_out[k]);
                grads_out[k] = NULL;
            }
    }
    return rc;
}
