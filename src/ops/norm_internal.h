/* src/ops/norm_internal.h - what the norm files share: the output and
 * compute dtype rules and a tensor of doubles (prefix tg__norm);
 * batch_norm's parameters, its create_graph backward (norm_backward_ops.c),
 * its statistics kernel, its loop over blocks of half channels
 * (norm_blocks.c) and a switch for tests (prefix tg__bn); and the backward
 * that batch_norm, layer_norm and group_norm run (norm.c, layer_norm.c). */
#ifndef TAPEGRAD_OPS_NORM_INTERNAL_H
#define TAPEGRAD_OPS_NORM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "autograd/tape.h"

/* The output dtype of a normalization of x with the affine w and b (either
 * may be NULL): x's own when x is half under autocast, else the promotion
 * of the three (norm.c; batch_norm, layer_norm and group_norm). */
tg_dtype tg__norm_out_dtype(const tg_tensor *x, const tg_tensor *w, const tg_tensor *b);
/* The dtype they compute in: f64 when x, w or b is f64, else f32. */
tg_dtype tg__norm_compute_dtype(const tg_tensor *x, const tg_tensor *w, const tg_tensor *b);
/* A new tensor of dtype dt and shape (ndim, shape) holding the doubles v
 * (rounded into dt); NULL without memory. */
tg_tensor *tg__norm_from_doubles(tg_dtype dt, int ndim, const int64_t *shape, const double *v);

/* x as (N, C, S): C channels of N rows of S contiguous values. */
typedef struct tg__bn_geom {
    int64_t n, c, s;
} tg__bn_geom;

/* batch_norm's kernels take rows shorter than TG__BN_BLK_ROW values
 * TG__BN_BLK channels at a time, with per-block arrays of TG__BN_BLK
 * values; a block of half channels (tg__bn_for_channels) is no larger.
 * norm.c names them BN_BLK_ROW and BN_BLK, as norm_kernels_tmpl.h uses
 * them. */
#define TG__BN_BLK_ROW 16
#define TG__BN_BLK 256

/* The mean and biased variance of each channel c of x (contiguous, of
 * dtype cdt: f32 or f64) into mean[c] and var[c]: sums in double with four
 * interleaved accumulators in a fixed order, channels shared out among the
 * threads, so the results do not depend on the thread count.  Every channel
 * must hold at least one value (N * S > 0). */
void tg__bn_stats(tg_dtype cdt, const void *x, tg__bn_geom g, double *mean, double *var);

typedef struct tg__bn_params {
    double momentum, eps;
    bool training;
    /* forward only: the running buffers read (eval) or updated (training) */
    tg_tensor *running_mean, *running_var;
} tg__bn_params;

/* The gradients of a norm op from its params and its node's saved tensors
 * (borrowed): g = dL/dy, x, w (NULL when no weight was given), mean and
 * invstd.  Sets gin[0] (dx), gin[1] (dweight) and gin[2] (dbias), each a
 * new reference, for the inputs whose gradient the node needs; on error
 * returns a negative status, and the caller releases what was set. */
typedef int (*tg__norm_grads_fn)(tg_op_ctx *ctx, const void *params, tg_tensor *g, tg_tensor *x,
                                 tg_tensor *w, tg_tensor *mean, tg_tensor *invstd,
                                 tg_tensor **gin);

/* The backward of a norm op (inputs x, weight, bias) whose forward saved x,
 * mean and invstd in slots 0-2, then the weight in slot 3 when one was
 * given: fused's gradients when grad mode is off (no graph recorded), else
 * ops' (create_graph).  On error gin[0..2] are released and cleared and
 * the status returned.  src/ops/norm.c. */
int tg__norm_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **gin, tg__norm_grads_fn fused,
                      tg__norm_grads_fn ops);

/* batch_norm's gradients as differentiable ops (create_graph), a
 * tg__norm_grads_fn of params tg__bn_params; mean and invstd are (C,). */
int tg__bn_backward_ops(tg_op_ctx *ctx, const void *params, tg_tensor *g, tg_tensor *x,
                        tg_tensor *w, tg_tensor *mean, tg_tensor *invstd, tg_tensor **gin);

/* The factors of batch_norm's dx for one channel:
 * dx = kt * (g - a - (x - mu) * bc) (norm_kernels_tmpl.h's bn_grad_factors). */
typedef struct tg__bn_dx_factors {
    float kt, mu, a, bc;
} tg__bn_dx_factors;

/* The kernels of batch_norm's half blocks (src/ops/norm_simd.c), on
 * halves of dtype dt (TG_F16 or TG_BF16) read and written in place, each
 * widened exactly into f32, with the bits of the f32 kernels of
 * norm_kernels_tmpl.h on an f32 copy rounded by the bulk conversion; simd
 * (the answer of tg__bn_half_simd, asked once per block, not per row)
 * picks the loops: 0 portable, 1 AVX2, 2 AVX-512 (the sums stay AVX2).
 * tg__bn_half_sums: bn_sum of the nc <= TG__BN_BLK channels of x (geometry g, channel k
 * at x + k*s, rows g.c*g.s apart) into out[k]: the sum of gr's value times
 * (x - mean[k]) when gr is not NULL (gr laid out as x), else of
 * (x - mean[k])^2 when centred_sq, else of x - mean[k] (mean NULL: 0).
 * tg__bn_half_affine: n values of a row, o = (p - mu) * k + sh (the
 * forward); tg__bn_half_dx: o = kt * (q - a - (p - mu) * bc) (dx from x's
 * row p and g's row q; o may be q). */
int tg__bn_half_simd(void);
void tg__bn_half_sums(tg_dtype dt, const uint16_t *x, const uint16_t *gr, const double *mean,
                      bool centred_sq, tg__bn_geom g, int64_t nc, double *out, int simd);
void tg__bn_half_affine(tg_dtype dt, const uint16_t *p, int64_t n, float mu, float k,
                        float sh, uint16_t *o, int simd);
void tg__bn_half_dx(tg_dtype dt, const uint16_t *p, const uint16_t *q, int64_t n,
                    const tg__bn_dx_factors *f, uint16_t *o, int simd);

/* bn_sum (norm_kernels_tmpl.h) of four f32 channels at once, with their
 * bits: out[k] = the sum over rows r < n of channel k's row at
 * x + r*rstride + k*s (s values) of gr's value times (x - mean[k]) when gr
 * is not NULL, else (x - mean[k])^2 when centred_sq, else x - mean[k].
 * False (nothing written) when this CPU lacks AVX2 or a test turned it off
 * (tg__bn_set_simd).  src/ops/norm_simd.c. */
bool tg__bn_sum4_f32(const float *x, const float *gr, const double *mean, bool centred_sq,
                     int64_t n, int64_t rstride, int64_t s, double *out);

/* batch_norm with x in f16/bf16, a block of channels at a time, read in
 * place by the kernels above instead of an f32 copy of the whole tensor
 * (src/ops/norm_blocks.c; norm.c runs the kernels on the blocks).
 * tg__bn_half_channels: whether t (x or dy, or NULL: false), of geometry
 * g, takes that path.  tg__bn_for_channels: fn(job, c0, nc) for blocks of
 * at most TG__BN_BLK channels that cover [0, C), shared among the
 * threads. */
bool tg__bn_half_channels(const tg_tensor *t, tg__bn_geom g);
void tg__bn_for_channels(tg__bn_geom g, void (*fn)(void *job, int64_t c0, int64_t nc), void *job);

/* Tests: false makes batch_norm on this thread take the f32 copy of the
 * whole half tensor instead of the half blocks (true, the default,
 * restores). */
void tg__bn_set_half_blocks(bool on);

/* Tests: false makes batch_norm take its portable loops instead of
 * norm_simd.c's, in every thread (true, the default, restores). */
void tg__bn_set_simd(bool on);

/* Tests: false makes batch_norm on this thread take its per-channel loops
 * for rows shorter than 16 values too, instead of blocks of channels (true,
 * the default, restores). */
void tg__bn_set_blocks(bool on);

#endif
