/* tests/fuzz/target_tape.h - the state of a "tape" fuzz program (target_tape.c)
 * and what its instructions share: reading operands, the work bounds and the
 * check after each call. */
#ifndef TAPEGRAD_TESTS_FUZZ_TARGET_TAPE_H
#define TAPEGRAD_TESTS_FUZZ_TARGET_TAPE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

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

static inline uint8_t u8(prog *g) { return g->at < g->n ? g->p[g->at++] : 0; }
static inline tg_tensor *slot(prog *g) { return g->s[u8(g) % SLOTS]; }

/* Work bounds, so that an input runs in milliseconds: an op is skipped when
 * an input holds more than MAX_ELEMS elements, or when a conv or a matmul
 * would take more than MAX_MACS multiply-adds (a kernel as large as the
 * image, say: the columns of one image alone can reach a gigabyte). */
enum { MAX_ELEMS = 1 << 16, MAX_MACS = 1 << 20 };
static inline bool big(const tg_tensor *t) { return t && tg_tensor_numel(t) > MAX_ELEMS; }

/* numel(a) * numel(b) / n, where n is the extent they share (matmul's k,
 * a conv's C_in or C_out), as an upper bound on the multiply-adds. */
static inline bool too_much_work(const tg_tensor *a, const tg_tensor *b, int64_t n)
{
    if (!a || !b) return false;
    const double macs = (double)tg_tensor_numel(a) * (double)tg_tensor_numel(b);
    return macs / (double)(n > 0 ? n : 1) > MAX_MACS;
}

/* Stores t (owned) in slot i, dropping what was there. */
static inline void put(prog *g, int i, tg_tensor *t)
{
    tg_tensor_release(g->s[i]);
    g->s[i] = t;
}

/* tg_fuzz_refused, and the call's status on stderr when tracing. */
static inline int checked(const prog *g, const char *call, int rc)
{
    if (g->trace)
        fprintf(stderr, "  %s: %s %s\n", call, tg_status_name(rc), rc < 0 ? tg_error_message() : "");
    return tg_fuzz_refused(NAME, call, rc);
}

/* The check after a call with one output: rc and out agree. */
static inline int after(prog *g, int i, const char *call, int rc, tg_tensor *out)
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

static const tg_dtype DTYPES[] = {TG_F32, TG_F64, TG_F16, TG_BF16, TG_I32, TG_I64, TG_U8, TG_I8};
#define N_DTYPES ((int)(sizeof DTYPES / sizeof DTYPES[0]))

/* A small value from a byte: -4 .. 4 in steps of 1/4, and a few specials. */
static inline double value(uint8_t b)
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

/* The element count of a and b broadcast together (an upper bound when
 * they do not broadcast). */
static inline double broadcast_numel(const tg_tensor *a, const tg_tensor *b)
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

/* The instructions: each reads its operands from the program and returns 0,
 * or -1 when a property broke.  Tensors and their ops (target_tape_ops.c): */
int op_new(prog *g);
int op_unary(prog *g);
int op_binary(prog *g);
int op_view(prog *g);
int op_conv(prog *g);
int op_batch_norm(prog *g);
int op_loss(prog *g);
/* Gradients, in-place changes, scopes, optimizers, recomputed blocks and
 * releases (target_tape_autograd.c): */
int op_backward(prog *g);
int op_grad(prog *g);
int op_in_place(prog *g);
int op_misc(prog *g);
int op_scope(prog *g);
int op_optim(prog *g);
int op_recompute(prog *g);
int op_release(prog *g);

#endif
