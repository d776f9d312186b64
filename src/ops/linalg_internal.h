/* src/ops/linalg_internal.h - the batched gemm of src/ops/linalg.c, shared
 * by linear (linalg.c) and matmul (matmul.c), and the products' dtype
 * rule. */
#ifndef TAPEGRAD_OPS_LINALG_INTERNAL_H
#define TAPEGRAD_OPS_LINALG_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/tensor.h"

/* Matrix k of a batch: element (i, j) is data[off + k*bs + i*rs + j*cs]
 * of t's storage (t borrowed). */
typedef struct tg__mat {
    const tg_tensor *t;
    int64_t rows, cols;
    int64_t off, bs, rs, cs;
} tg__mat;

/* c (nb, M, N) = a (nb, M, K) x b (nb, K, N) [+ bias (N) on every row]; out
 * is a contiguous tensor of nb*M*N elements, written directly when its dtype
 * is the compute dtype.  b_weight: b is a weight, multiplied from its panels
 * when the product is one bf16 GEMM.  TG_ENOMEM, or TG_EUNSUPPORTED for an
 * extent above INT_MAX. */
int tg__gemm_batched(int64_t nb, const tg__mat *a, const tg__mat *b, const tg_tensor *bias,
                     tg_tensor *out, bool b_weight);
/* TG_EDTYPE unless a (named na in op's message) has a float dtype and b
 * (nb) the same one. */
int tg__check_float_pair(const char *op, const char *na, const tg_tensor *a, const char *nb,
                         const tg_tensor *b);

/* The dtype rule of torch's products and convolutions for operands a and
 * b (named na, nb; b may be NULL): outside an autocast scope TG_EDTYPE
 * naming both dtypes unless they are one ("expected scalar type Float but
 * found Double"); inside one the AMP cast comes first, so any float dtypes
 * are fine except f64 beside another float dtype, since autocast casts
 * f32, f16 and bf16 only.  Used by linear, matmul and its fixed-rank
 * products, and conv and conv_transpose (src/ops/conv.c). */
int tg__check_amp_dtypes(const char *op, const char *na, const tg_tensor *a, const char *nb,
                         const tg_tensor *b);

#endif
