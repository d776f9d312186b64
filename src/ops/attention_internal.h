/* src/ops/attention_internal.h - the inference path of scaled dot-product
 * attention (src/ops/attention_fast.c), which tg_scaled_dot_product_attention
 * (src/ops/attention.c) takes when no gradient and no weights are wanted.
 * Tests include it to see which path ran. */
#ifndef TAPEGRAD_OPS_ATTENTION_INTERNAL_H
#define TAPEGRAD_OPS_ATTENTION_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/attention.h"
#include "tapegrad/tensor.h"

/* Whether the fused kernel may compute attention(q, k, v, o), the
 * arguments checked (tg_scaled_dot_product_attention's rules): no weights
 * are wanted (the caller's part), no dropout draws (eval, or p = 0), no
 * gradient is recorded (grad mode off, or none of q, k, v and the mask
 * requires one), q, k and v of one float dtype (f32, f64, bf16 or f16; a
 * float mask of their dtype), outside autocast or of its dtype (bf16 or
 * f16; inside autocast a float mask may also be f32), every extent >= 1,
 * and the environment variable TG_ATTENTION_FAST is not "0". */
bool tg__attention_fast_applies(const tg_tensor *q, const tg_tensor *k, const tg_tensor *v,
                                const tg_attention_opts *o);
/* Whether the fused kernel takes a mask m (NULL: none) for q, k and v of
 * dtype dt: u8, of dt, or inside autocast f32. */
bool tg__attention_fast_mask_fits(const tg_tensor *m, tg_dtype dt);
/* The same for q, k and v that reach the kernel in dtype dt: q's own, or
 * inside autocast of the half dtype dt, f32 that the caller casts to dt
 * first, as autocast's products would (MultiheadAttention's projections). */
bool tg__attention_fast_applies_as(const tg_tensor *q, const tg_tensor *k, const tg_tensor *v,
                                   const tg_attention_opts *o, tg_dtype dt);

/* *out (new, contiguous, (..., L, Ev)) = softmax(q / sqrt(E) @ k^T + mask)
 * @ v without a tape and without the (..., L, S) weights: blocks of query
 * rows per matrix on the thread pool.  mask NULL, u8 (nonzero: -inf), of
 * q's dtype or (half q inside autocast) f32, broadcast to (..., L, S).
 * Only after tg__attention_fast_applies; TG_ENOMEM otherwise. */
int tg__attention_fast(tg_tensor **out, tg_tensor *q, tg_tensor *k, tg_tensor *v,
                       tg_tensor *mask);

/* The same written into y (..., L, Ev) of k's dtype (q's, or with f32 q
 * the half dtype of k and v) and q's rank, which may be a strided view:
 * its last dim unit-stride, its rows at least Ev apart
 * (a GEMM's leading dim) and not overlapping, so that a caller can have the
 * heads land where the next product reads them.  y's storage is written in
 * place (its version is not bumped: for tensors the caller just made). */
int tg__attention_fast_into(tg_tensor *y, tg_tensor *q, tg_tensor *k, tg_tensor *v,
                            tg_tensor *mask);

/* tg__attention_fast for f32 q, k and v inside autocast of the half dtype
 * dt, as the taped path there computes it: k and v cast to dt, q divided
 * by sqrt(E) in f32 and then cast (the products' casts), the output in dt.
 * Only after tg__attention_fast_applies_as(q, k, v, o, dt). */
int tg__attention_fast_cast(tg_tensor **out, tg_tensor *q, tg_tensor *k, tg_tensor *v,
                            tg_tensor *mask, tg_dtype dt);

/* The number of tg__attention_fast and tg__attention_fast_into calls that this thread has made. */
uint64_t tg__attention_fast_calls(void);

#endif
