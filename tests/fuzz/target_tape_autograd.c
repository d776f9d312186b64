/* tests/fuzz/target_tape_autograd.c - the "tape" program's instructions that
 * differentiate (tg_backward, tg_grad, hooks), change tensors in place, open
 * and close no-grad and autocast scopes, step optimizers, run blocks through
 * tg_recompute_ex and release slots (target_tape.h). */
#include <stdint.h>

#include "target_tape.h"

/* Hooks: user picks what it does with the gradient. */
static int hook(tg_tensor **grad, void *user)
{
    switch ((int)(intptr_t)user) {
    case 0: return TG_OK;   /* leaves it */
    case 1: {               /* doubles it */
        tg_tensor *d = NULL;
        int rc = tg_mul_scalar(&d, *grad, 2.0);
        if (rc < 0) return rc;
        tg_tensor_release(*grad);
        *grad = d;
        return TG_OK;
    }
    case 2:   /* drops it: TG_EGRAD */
        tg_tensor_release(*grad);
        *grad = NULL;
        return TG_OK;
    case 3: return tg_error_set(TG_EINVAL, "the fuzz hook refuses");
    default: return TG_EINVAL;   /* fails with no message of its own */
    }
}

int op_backward(prog *g)
{
    tg_tensor *y = slot(g), *go = slot(g);
    uint8_t f = u8(g);
    tg_backward_opts o = {.retain_graph = f & 2};
    return checked(g, "backward", tg_backward(y, f & 1 ? go : NULL, &o));
}

int op_grad(prog *g)
{
    tg_tensor *y = slot(g), *go = slot(g);
    uint8_t f = u8(g);
    int n = 1 + f % 3, at[3];
    tg_tensor *in[3], *out[3] = {NULL, NULL, NULL};
    for (int k = 0; k < n; k++) {
        at[k] = u8(g) % SLOTS;
        in[k] = g->s[at[k]];
    }
    tg_backward_opts o = {.retain_graph = f & 8, .create_graph = f & 16};
    int rc = tg_grad(out, 1, &y, f & 4 ? &go : NULL, n, in, &o);
    if (checked(g, "grad", rc) < 0) return -1;
    for (int k = 0; k < n; k++) {
        if (rc < 0 && out[k]) return tg_fuzz_broken(NAME, "grad failed and set an output");
        if (out[k]) put(g, (at[k] + 1) % SLOTS, out[k]);   /* beside its input */
    }
    return 0;
}

int op_in_place(prog *g)
{
    tg_tensor *a = slot(g), *b = slot(g);
    uint8_t k = u8(g) % 7;
    double v = value(u8(g));
    int rc = TG_OK;
    switch (k) {
    case 0: rc = tg_tensor_fill(a, v); break;
    case 1: rc = tg_tensor_copy_(a, b); break;
    case 2: rc = tg_tensor_set_flat(a, u8(g) % 8, v); break;
    case 3: tg_tensor_bump_version(a); break;
    case 4: rc = tg_tensor_set_requires_grad(a, v > 0); break;
    case 5: tg_tensor_zero_grad(a); break;
    default: {   /* a.grad = a detached b (a grad that needs no graph) */
        tg_tensor *d = NULL;
        rc = tg_tensor_detach(&d, b);
        if (rc == TG_OK) rc = tg_tensor_set_grad(a, d);
    }
    }
    return checked(g, "in-place change", rc);
}

int op_misc(prog *g)
{
    int i = u8(g) % SLOTS;
    tg_tensor *a = slot(g), *y = NULL;
    uint8_t k = u8(g) % 8, b = u8(g);
    int rc;
    switch (k) {
    case 0: rc = tg_tensor_detach(&y, a); break;
    case 1: rc = tg_tensor_clone(&y, a); break;
    case 2: rc = tg_to_dtype(&y, a, DTYPES[b % N_DTYPES]); break;
    case 3:   /* a's gradient into a slot, when it has one */
        if (!tg_tensor_grad(a)) return 0;
        y = tg_tensor_retain(tg_tensor_grad(a));
        rc = TG_OK;
        break;
    case 4: return checked(g, "register_hook",
                                   tg_tensor_register_hook(a, hook, (void *)(intptr_t)(b % 5)));
    case 5: return checked(g, "tape_print", tg_tape_print(g->devnull, a));
    case 6: return checked(g, "graph_to_dot", tg_graph_to_dot(g->devnull, a));
    default: return checked(g, "tensor_print", tg_tensor_print(g->devnull, a, b));
    }
    return after(g, i, "detach, clone or to_dtype", rc, y);
}

int op_scope(prog *g)
{
    uint8_t k = u8(g) % 6;
    if (k == 0 && g->no_grad < 4) {
        tg_no_grad_begin();
        g->no_grad++;
    } else if (k == 1 && g->no_grad > 0) {
        tg_no_grad_end();
        g->no_grad--;
    } else if (k >= 2 && k <= 4 && g->autocast < 4) {
        int rc = k == 4 ? tg_autocast_disable_begin()
                        : tg_autocast_begin(k == 2 ? TG_F16 : TG_BF16);
        if (checked(g, "autocast_begin", rc) < 0) return -1;
        if (rc == TG_OK) g->autocast++;
    } else if (k == 5 && g->autocast > 0) {
        if (checked(g, "autocast_end", tg_autocast_end()) < 0) return -1;
        g->autocast--;
    }
    return 0;
}

/* An optimizer over up to three slots: made (SGD, Adam, AdamW, RMSprop,
 * Adagrad, Adamax, NAdam, RAdam, Adadelta, Rprop, L-BFGS, ASGD, with options
 * from the bytes, bad ones too), stepped, zeroed, its lr set, freed.  A step
 * changes the parameters in place, so a graph that saved one is refused at
 * its next backward. */
int op_optim(prog *g)
{
    uint8_t k = u8(g) % 5;
    if (k == 0) {
        tg_tensor *ps[3];
        int n = u8(g) % 4;
        for (int j = 0; j < n; j++) ps[j] = slot(g);
        const double lr = value(u8(g)), b1 = value(u8(g)) / 4, b2 = value(u8(g)) / 4,
                     wd = value(u8(g));
        const uint8_t kind = u8(g) % 12, flags = u8(g);
        tg_optimizer *o = NULL;
        int rc;
        if (kind == 0) {
            tg_sgd_opts so = {.lr = lr, .momentum = b1, .dampening = b2, .weight_decay = wd,
                              .nesterov = flags & 1};
            rc = tg_sgd_new(&o, n, ps, &so);
        } else if (kind == 3) {   /* alpha, momentum from the same bytes; bad ones too */
            tg_rmsprop_opts ro = {.lr = lr, .alpha = b1, .eps = 1e-8, .weight_decay = wd,
                                  .momentum = b2, .centered = flags & 1, .maximize = flags & 2};
            rc = tg_rmsprop_new(&o, n, ps, &ro);
        } else if (kind == 4) {   /* lr_decay and initial_accumulator_value from b1, b2 */
            tg_adagrad_opts go = {.lr = lr, .lr_decay = b1, .weight_decay = wd,
                                  .initial_accumulator_value = b2, .eps = 1e-10,
                                  .maximize = flags & 2};
            rc = tg_adagrad_new(&o, n, ps, &go);
        } else if (kind == 5) {
            tg_adamax_opts xo = {.lr = lr, .beta1 = b1, .beta2 = b2, .eps = 1e-8,
                                 .weight_decay = wd, .maximize = flags & 2};
            rc = tg_adamax_new(&o, n, ps, &xo);
        } else if (kind == 6) {
            tg_nadam_opts no = {.lr = lr, .beta1 = b1, .beta2 = b2, .eps = 1e-8,
                                .weight_decay = wd, .momentum_decay = value(flags)};
            rc = tg_nadam_new(&o, n, ps, &no);
        } else if (kind == 7) {
            tg_radam_opts ro = {.lr = lr, .beta1 = b1, .beta2 = b2, .eps = 1e-8,
                                .weight_decay = wd};
            rc = tg_radam_new(&o, n, ps, &ro);
        } else if (kind == 8) {   /* rho from b1 */
            tg_adadelta_opts ao = {.lr = lr, .rho = b1, .eps = 1e-6, .weight_decay = wd,
                                   .maximize = flags & 2};
            rc = tg_adadelta_new(&o, n, ps, &ao);
        } else if (kind == 9) {   /* etas and step sizes from the bytes */
            tg_rprop_opts po = {.lr = lr, .eta_minus = b1, .eta_plus = 1 + b2, .step_size_min = wd,
                                .step_size_max = value(flags), .maximize = flags & 2};
            rc = tg_rprop_new(&o, n, ps, &po);
        } else if (kind == 10) {   /* its step needs a closure: tg_optimizer_step refuses */
            tg_lbfgs_opts lo = {.lr = lr, .max_iter = flags % 8, .max_eval = flags / 32,
                                .tolerance_grad = wd, .tolerance_change = b2,
                                .history_size = 1 + flags % 4, .strong_wolfe = flags & 2};
            rc = tg_lbfgs_new(&o, n, ps, &lo);
        } else if (kind == 11) {   /* lambd, alpha, t0 from the bytes */
            tg_asgd_opts ao = {.lr = lr, .lambd = b1, .alpha = b2, .t0 = value(flags),
                               .weight_decay = wd, .maximize = flags & 2};
            rc = tg_asgd_new(&o, n, ps, &ao);
        } else {
            tg_adam_opts ao = {.lr = lr, .beta1 = b1, .beta2 = b2, .eps = 1e-8, .weight_decay = wd};
            rc = kind == 1 ? tg_adam_new(&o, n, ps, &ao) : tg_adamw_new(&o, n, ps, &ao);
        }
        if (rc < 0 && o) return tg_fuzz_broken(NAME, "optimizer_new failed and set *out");
        if (rc >= 0 && !o) return tg_fuzz_broken(NAME, "optimizer_new succeeded without *out");
        if (checked(g, "optimizer_new", rc) < 0) return -1;
        if (o) {
            tg_optimizer_free(g->opt);
            g->opt = o;
        }
        return 0;
    }
    if (!g->opt) return 0;
    switch (k) {
    case 1: return checked(g, "optimizer_step", tg_optimizer_step(g->opt));
    case 2: tg_optimizer_zero_grad(g->opt); return 0;
    case 3: return checked(g, "optimizer_set_lr", tg_optimizer_set_lr(g->opt, value(u8(g))));
    default:
        tg_optimizer_free(g->opt);
        g->opt = NULL;
        return 0;
    }
}

/* What a recomputed block does: outs[0] = tanh(in[0]) (* in[1]) (* extra),
 * outs[1] = its sum; extra is a slot fn reads besides its inputs (a leaf, or
 * a tensor with a history, which the backward refuses); fn fails at its
 * fail_at-th call (0: never), counted per copy of this block (the node keeps
 * its own). */
typedef struct {
    tg_tensor *extra;
    int fail_at, calls;
} block_user;

static int block_fn(tg_tensor **outs, int n_out, int n_in, tg_tensor *const *in, void *user)
{
    block_user *u = user;
    if (++u->calls == u->fail_at) return tg_error_set(TG_EINVAL, "the fuzz block refuses");
    tg_tensor *t = NULL, *m = NULL;
    int rc = tg_tanh(&t, in[0]);
    if (rc >= 0 && n_in == 2) {
        rc = tg_mul(&m, t, in[1]);
        tg_tensor_release(t);
        t = m;
    }
    if (rc >= 0 && u->extra) {
        m = NULL;
        rc = tg_mul(&m, t, u->extra);
        tg_tensor_release(t);
        t = m;
    }
    if (rc >= 0 && n_out == 2) rc = tg_sum(&outs[1], t);
    if (rc < 0) {
        tg_tensor_release(t);
        return rc;
    }
    outs[0] = t;
    return TG_OK;
}

/* tg_recompute_ex over one or two slots, with the block above, parameters
 * from a third slot or none; the outputs go to two slots. */
int op_recompute(prog *g)
{
    const int i = u8(g) % SLOTS, j = u8(g) % SLOTS;
    tg_tensor *in[2] = {slot(g), slot(g)}, *extra = slot(g);
    const uint8_t f = u8(g);
    const int n_in = 1 + (f & 1), n_out = 1 + ((f >> 1) & 1);
    block_user u = {.extra = f & 4 ? extra : NULL, .fail_at = (f >> 3) % 4};
    if (big(in[0]) || big(in[1]) || big(extra) || broadcast_numel(in[0], in[1]) > MAX_ELEMS ||
        broadcast_numel(in[0], extra) > MAX_ELEMS)
        return 0;
    tg_tensor *outs[2] = {NULL, NULL};
    int rc = tg_recompute_ex(outs, n_out, block_fn, &u, sizeof u, n_in, in, f & 32 ? 1 : 0,
                             &extra);
    if (checked(g, "recompute", rc) < 0) return -1;
    if (rc < 0 && (outs[0] || outs[1]))
        return tg_fuzz_broken(NAME, "recompute failed and set an output");
    if (rc >= 0 && (!outs[0] || (n_out == 2 && !outs[1])))
        return tg_fuzz_broken(NAME, "recompute succeeded without its outputs");
    /* alive until the end (one block a step: MAX_STEPS slots are enough) */
    if (rc >= 0 && u.extra) g->kept[g->n_kept++] = tg_tensor_retain(extra);
    if (outs[0]) put(g, i, outs[0]);
    if (outs[1]) put(g, j, outs[1]);
    return 0;
}

int op_release(prog *g)
{
    put(g, u8(g) % SLOTS, NULL);
    return 0;
}
