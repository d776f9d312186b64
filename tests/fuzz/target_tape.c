/* tests/fuzz/target_tape.c - the "tape" fuzz target: bytes read as a program
 * over eight tensor slots.
 *
 * Each instruction is an opcode byte and its operand bytes (a missing byte
 * reads as 0, so every input is a program).  The instructions make small
 * tensors of every dtype, run elementwise, reduction, view, matmul and conv
 * ops and losses on them, change them in place, run tg_backward and tg_grad
 * (with hooks, retain_graph and create_graph, in no-grad and autocast
 * scopes), step SGD/Adam/AdamW/RMSprop over them, run blocks of them through
 * tg_recompute_ex, and release them in any order.
 * What must hold, whatever the program:
 *   - every call returns TG_OK or a refusal with a message of its own
 *     (tg_fuzz_refused, with the message cleared before each instruction);
 *   - an output is set exactly when its call succeeds;
 *   - at the end, with the scopes closed and the slots released, nothing
 *     leaks (LeakSanitizer) and grad mode and autocast are as at the start.
 * tg_backward runs without create_graph: with it a leaf's .grad refers back
 * to the leaf, a cycle the API documents (autograd.h); tg_grad, which stores
 * nothing, takes create_graph. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tapegrad/tapegrad.h"
#include "targets.h"

enum { SLOTS = 8, MAX_STEPS = 64 };

static const char NAME[] = "tape";

typedef struct {
    const uint8_t *p;
    size_t n, at;
    tg_tensor *s[SLOTS];
    int no_grad, autocast;   /* open scopes */
    tg_optimizer *opt;       /* at most one at a time */
    tg_tensor *kept[MAX_STEPS];   /* tensors recomputed blocks read (user data is borrowed),
                                   * at most one a step */
    int n_kept;
    FILE *devnull;
    bool trace;   /* TG_FUZZ_TRACE set: each call and its status on stderr */
} prog;

static uint8_t u8(prog *g) { return g->at < g->n ? g->p[g->at++] : 0; }
static tg_tensor *slot(prog *g) { return g->s[u8(g) % SLOTS]; }

/* Work bounds, so that an input runs in milliseconds: an op is skipped when
 * an input holds more than MAX_ELEMS elements, or when a conv or a matmul
 * would take more than MAX_MACS multiply-adds (a kernel as large as the
 * image, say: the columns of one image alone can reach a gigabyte). */
enum { MAX_ELEMS = 1 << 16, MAX_MACS = 1 << 20 };
static bool big(const tg_tensor *t) { return t && tg_tensor_numel(t) > MAX_ELEMS; }

/* numel(a) * numel(b) / n, where n is the extent they share (matmul's k,
 * a conv's C_in or C_out), as an upper bound on the multiply-adds. */
static bool too_much_work(const tg_tensor *a, const tg_tensor *b, int64_t n)
{
    if (!a || !b) return false;
    const double macs = (double)tg_tensor_numel(a) * (double)tg_tensor_numel(b);
    return macs / (double)(n > 0 ? n : 1) > MAX_MACS;
}

/* Stores t (owned) in slot i, dropping what was there. */
static void put(prog *g, int i, tg_tensor *t)
{
    tg_tensor_release(g->s[i]);
    g->s[i] = t;
}

/* tg_fuzz_refused, and the call's status on stderr when tracing. */
static int checked(const prog *g, const char *call, int rc)
{
    if (g->trace)
        fprintf(stderr, "  %s: %s %s\n", call, tg_status_name(rc), rc < 0 ? tg_error_message() : "");
    return tg_fuzz_refused(NAME, call, rc);
}

/* The check after a call with one output: rc and out agree. */
static int after(prog *g, int i, const char *call, int rc, tg_tensor *out)
{
    if (rc < 0 && out)
        return tg_fuzz_broken(NAME, "%s returned %s and an output", call, tg_status_name(rc));
    if (rc >= 0 && !out) return tg_fuzz_broken(NAME, "%s succeeded without an output", call);
    if (tg_fuzz_refused(NAME, call, rc) < 0) return -1;
    if (g->trace) {
        char sh[96] = "";
        if (out) tg_shape_str(sh, sizeof sh, tg_tensor_ndim(out), tg_tensor_shape(out));
        fprintf(stderr, "  %s -> slot %d: %s %s%s\n", call, i, tg_status_name(rc),
                rc < 0 ? tg_error_message() : "", sh);
    }
    if (out) put(g, i, out);
    return 0;
}

static const tg_dtype DTYPES[] = {TG_F32, TG_F64, TG_F16, TG_BF16, TG_I32, TG_I64, TG_U8};

/* A small value from a byte: -4 .. 4 in steps of 1/4, and a few specials. */
static double value(uint8_t b)
{
    switch (b) {
    case 250: return NAN;
    case 251: return INFINITY;
    case 252: return -INFINITY;
    case 253: return 1e30;
    case 254: return -0.0;
    default: return ((double)(b % 33) - 16.0) / 4.0;
    }
}

static int op_new(prog *g)
{
    int i = u8(g) % SLOTS, nd = u8(g) % 5;
    tg_dtype dt = DTYPES[u8(g) % (sizeof DTYPES / sizeof DTYPES[0])];
    int64_t shape[4];
    for (int d = 0; d < nd; d++) shape[d] = u8(g) % 5;
    uint8_t seed = u8(g), flags = u8(g);
    tg_tensor *t = NULL;
    int rc = tg_tensor_zeros(&t, dt, nd, shape);
    if (after(g, i, "tensor_zeros", rc, t) < 0) return -1;
    if (rc < 0) return 0;
    if (tg_dtype_is_float(dt)) {
        tg_rng rng;
        tg_rng_init(&rng, seed);
        rc = tg_tensor_rand_uniform(t, &rng, -2.0, 2.0);
    } else {
        rc = tg_tensor_fill(t, seed % 7);
    }
    if (checked(g, "fill", rc) < 0) return -1;
    if (flags & 1) rc = tg_tensor_set_requires_grad(t, true);
    return checked(g, "set_requires_grad", rc);
}

static int op_unary(prog *g)
{
    int i = u8(g) % SLOTS;
    tg_tensor *a = slot(g), *y = NULL;
    uint8_t k = u8(g) % 20;
    double s = value(u8(g));
    if (big(a)) return 0;
    int rc;
    switch (k) {
    case 0: rc = tg_neg(&y, a); break;
    case 1: rc = tg_exp(&y, a); break;
    case 2: rc = tg_log(&y, a); break;
    case 3: rc = tg_sqrt(&y, a); break;
    case 4: rc = tg_abs(&y, a); break;
    case 5: rc = tg_erf(&y, a); break;
    case 6: rc = tg_relu(&y, a); break;
    case 7: rc = tg_leaky_relu(&y, a, s); break;
    case 8: rc = tg_tanh(&y, a); break;
    case 9: rc = tg_sigmoid(&y, a); break;
    case 10: rc = tg_silu(&y, a); break;
    case 11: rc = tg_gelu(&y, a); break;
    case 12: rc = tg_sum(&y, a); break;
    case 13: rc = tg_mean(&y, a); break;
    case 14: rc = tg_add_scalar(&y, a, s); break;
    case 15: rc = tg_rsub_scalar(&y, a, s); break;
    case 16: rc = tg_mul_scalar(&y, a, s); break;
    case 17: rc = tg_div_scalar(&y, a, s); break;
    case 18: rc = tg_pow_scalar(&y, a, s); break;
    default: rc = tg_contiguous(&y, a); break;
    }
    return after(g, i, "unary op", rc, y);
}

/* The element count of a and b broadcast together (an upper bound when
 * they do not broadcast). */
static double broadcast_numel(const tg_tensor *a, const tg_tensor *b)
{
    if (!a || !b) return 0;
    const int na = tg_tensor_ndim(a), nb = tg_tensor_ndim(b), n = na > nb ? na : nb;
    double e = 1;
    for (int d = 1; d <= n; d++) {
        const int64_t x = d <= na ? tg_tensor_dim(a, -d) : 1, y = d <= nb ? tg_tensor_dim(b, -d) : 1;
        e *= (double)(x > y ? x : y);
    }
    return e;
}

static int op_binary(prog *g)
{
    int i = u8(g) % SLOTS;
    tg_tensor *a = slot(g), *b = slot(g), *y = NULL;
    uint8_t k = u8(g) % 8;
    if (big(a) || big(b) || broadcast_numel(a, b) > MAX_ELEMS) return 0;
    if ((k == 5 || k == 6) && too_much_work(a, b, a && tg_tensor_ndim(a) ? tg_tensor_dim(a, -1) : 1))
        return 0;
    int rc;
    switch (k) {
    case 0: rc = tg_add(&y, a, b); break;
    case 1: rc = tg_sub(&y, a, b); break;
    case 2: rc = tg_mul(&y, a, b); break;
    case 3: rc = tg_div(&y, a, b); break;
    case 4: rc = tg_pow(&y, a, b); break;
    case 5: rc = tg_matmul(&y, a, b); break;
    case 6: rc = tg_linear(&y, a, b, NULL); break;
    default: {
        tg_tensor *ts[2] = {a, b};
        rc = tg_cat(&y, 2, ts, (int)(u8(g) % 4) - 1);
    }
    }
    return after(g, i, "binary op", rc, y);
}

static int op_view(prog *g)
{
    int i = u8(g) % SLOTS;
    tg_tensor *a = slot(g), *y = NULL;
    uint8_t k = u8(g) % 10;
    int nd = u8(g) % 5, d0 = (int)(u8(g) % 7) - 3, d1 = (int)(u8(g) % 7) - 3;
    int64_t shape[4];
    int dims[TG_MAX_DIMS];   /* permute reads one per dim of a */
    for (int d = 0; d < 4; d++) shape[d] = (int64_t)(u8(g) % 6) - 1;   /* -1: infer or keep */
    for (int d = 0; d < TG_MAX_DIMS; d++) dims[d] = (int)(u8(g) % 9) - 4;
    if (big(a)) return 0;
    int rc;
    switch (k) {
    case 0: rc = tg_reshape(&y, a, nd, shape); break;
    case 1: rc = tg_permute(&y, a, dims); break;
    case 2: rc = tg_transpose(&y, a, d0, d1); break;
    case 3: rc = tg_slice(&y, a, d0, shape[0], shape[1] + 1, d1); break;
    case 4: rc = tg_expand(&y, a, nd, shape); break;
    case 5: rc = tg_unsqueeze(&y, a, d0); break;
    case 6: rc = tg_squeeze(&y, a, d0); break;
    case 7: rc = tg_sum_dims(&y, a, nd % 3, dims, d1 & 1); break;
    case 8: rc = tg_mean_dims(&y, a, nd % 3, dims, d1 & 1); break;
    default: rc = tg_sum_to_shape(&y, a, nd, shape); break;
    }
    return after(g, i, "view or reduction", rc, y);
}

static int op_conv(prog *g)
{
    int i = u8(g) % SLOTS;
    tg_tensor *x = slot(g), *w = slot(g), *b = NULL, *y = NULL;
    uint8_t f = u8(g);
    if (f & 1) b = slot(g);
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    for (int d = 0; d < 3; d++) {
        p.stride[d] = 1 + u8(g) % 3;
        p.dilation[d] = 1 + u8(g) % 2;
        p.padding[d][0] = u8(g) % 3;
        p.padding[d][1] = u8(g) % 3;
        p.output_padding[d] = u8(g) % 2;
    }
    p.groups = 1 + u8(g) % 2;
    p.act = (tg_activation)(u8(g) % (TG_ACT_COUNT + 1));   /* one past the end too */
    if (big(x) || big(w) || big(b)) return 0;
    /* per output element of conv: C_in/groups * prod(K) = numel(w) / C_out;
     * per input element of conv_transpose: numel(w) / C_in, as for conv's
     * output: numel(x) * numel(w) / (its channels) bounds both, with stride 1 */
    if (x && w && tg_tensor_ndim(x) >= 2 && too_much_work(x, w, tg_tensor_dim(x, 1))) return 0;
    if (g->trace && x && w) {
        char xs[96], ws[96];
        tg_shape_str(xs, sizeof xs, tg_tensor_ndim(x), tg_tensor_shape(x));
        tg_shape_str(ws, sizeof ws, tg_tensor_ndim(w), tg_tensor_shape(w));
        fprintf(stderr, "  x %s %s weight %s %s\n", xs, tg_dtype_name(tg_tensor_dtype(x)), ws,
                tg_dtype_name(tg_tensor_dtype(w)));
    }
    if (g->trace)
        fprintf(stderr, "  stride %lld %lld dilation %lld %lld padding %lld,%lld %lld,%lld "
                        "output_padding %lld %lld groups %lld act %d\n",
                (long long)p.stride[0], (long long)p.stride[1], (long long)p.dilation[0],
                (long long)p.dilation[1], (long long)p.padding[0][0], (long long)p.padding[0][1],
                (long long)p.padding[1][0], (long long)p.padding[1][1],
                (long long)p.output_padding[0], (long long)p.output_padding[1],
                (long long)p.groups, (int)p.act);
    int rc = f & 2 ? tg_conv_transpose(&y, x, w, b, &p) : tg_conv(&y, x, w, b, &p);
    return after(g, i, f & 2 ? "conv_transpose" : "conv", rc, y);
}

static int op_batch_norm(prog *g)
{
    int i = u8(g) % SLOTS;
    tg_tensor *x = slot(g), *rm = slot(g), *rv = slot(g), *y = NULL;
    uint8_t f = u8(g);
    if (big(x)) return 0;
    int rc = tg_batch_norm(&y, x, f & 1 ? rm : NULL, f & 1 ? rv : NULL, f & 2 ? rm : NULL,
                           f & 4 ? rv : NULL, f & 8, 0.1, 1e-5);
    return after(g, i, "batch_norm", rc, y);
}

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

static int op_backward(prog *g)
{
    tg_tensor *y = slot(g), *go = slot(g);
    uint8_t f = u8(g);
    tg_backward_opts o = {.retain_graph = f & 2};
    return checked(g, "backward", tg_backward(y, f & 1 ? go : NULL, &o));
}

static int op_grad(prog *g)
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

static int op_in_place(prog *g)
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

static int op_misc(prog *g)
{
    int i = u8(g) % SLOTS;
    tg_tensor *a = slot(g), *y = NULL;
    uint8_t k = u8(g) % 8, b = u8(g);
    int rc;
    switch (k) {
    case 0: rc = tg_tensor_detach(&y, a); break;
    case 1: rc = tg_tensor_clone(&y, a); break;
    case 2: rc = tg_to_dtype(&y, a, DTYPES[b % 7]); break;
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

static int op_scope(prog *g)
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

static int op_loss(prog *g)
{
    int i = u8(g) % SLOTS;
    tg_tensor *a = slot(g), *b = slot(g), *y = NULL;
    uint8_t k = u8(g) % 4;
    tg_reduction red = (tg_reduction)(u8(g) % 4);   /* one past the end too */
    if (big(a) || big(b)) return 0;
    int rc;
    switch (k) {
    case 0: rc = tg_mse_loss(&y, a, b, red); break;
    case 1: rc = tg_l1_loss(&y, a, b, red); break;
    case 2: rc = tg_bce_with_logits(&y, a, b, red); break;
    default: rc = tg_cross_entropy(&y, a, b, red); break;
    }
    return after(g, i, "loss", rc, y);
}

/* An optimizer over up to three slots: made (SGD, Adam, AdamW, RMSprop, with
 * options from the bytes, bad ones too), stepped, zeroed, its lr set, freed.  A step
 * changes the parameters in place, so a graph that saved one is refused at
 * its next backward. */
static int op_optim(prog *g)
{
    uint8_t k = u8(g) % 5;
    if (k == 0) {
        tg_tensor *ps[3];
        int n = u8(g) % 4;
        for (int j = 0; j < n; j++) ps[j] = slot(g);
        const double lr = value(u8(g)), b1 = value(u8(g)) / 4, b2 = value(u8(g)) / 4,
                     wd = value(u8(g));
        const uint8_t kind = u8(g) % 4, flags = u8(g);
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
static int op_recompute(prog *g)
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

static int op_release(prog *g)
{
    put(g, u8(g) % SLOTS, NULL);
    return 0;
}

static const struct {
    const char *name;
    int (*run)(prog *);
} OPS[] = {
    {"new", op_new},         {"new", op_new},           {"unary", op_unary},
    {"binary", op_binary},   {"view", op_view},         {"conv", op_conv},
    {"batch_norm", op_batch_norm}, {"backward", op_backward}, {"grad", op_grad},
    {"in_place", op_in_place}, {"misc", op_misc},       {"scope", op_scope},
    {"release", op_release}, {"loss", op_loss},         {"optim", op_optim},
    {"recompute", op_recompute},
};

int tg_fuzz_tape(const uint8_t *data, size_t size)
{
    prog g = {.p = data, .n = size, .trace = getenv("TG_FUZZ_TRACE") != NULL};
    g.devnull = fopen("/dev/null", "w");
    if (!g.devnull) return tg_fuzz_broken(NAME, "cannot open /dev/null");
    int rc = 0;
    for (int step = 0; step < MAX_STEPS && g.at < g.n && rc == 0; step++) {
        const int k = u8(&g) % (int)(sizeof OPS / sizeof OPS[0]);
        if (g.trace) fprintf(stderr, "step %d: %s\n", step, OPS[k].name);
        tg_error_clear();   /* so that a refusal's message is its own, not an old one */
        rc = OPS[k].run(&g);
    }
    while (g.no_grad-- > 0) tg_no_grad_end();
    while (g.autocast-- > 0)
        if (rc == 0 && checked(&g, "autocast_end", tg_autocast_end()) < 0) rc = -1;
    tg_optimizer_free(g.opt);
    for (int i = 0; i < SLOTS; i++) put(&g, i, NULL);
    for (int k = 0; k < g.n_kept; k++) tg_tensor_release(g.kept[k]);
    fclose(g.devnull);
    if (rc == 0 && !tg_grad_enabled()) rc = tg_fuzz_broken(NAME, "grad mode left off");
    if (rc == 0 && tg_autocast_active(NULL)) rc = tg_fuzz_broken(NAME, "autocast left on");
    return rc;
}
