/* tools/case.h - conv "case" files: one op call described in safetensors.
 *
 * A CASE file holds tensors x, weight, optional bias, optional grad_y and
 * string metadata:
 *   op              conv1d|conv2d|conv3d|conv_transpose1d|conv_transpose2d|
 *                   conv_transpose3d (required)
 *   stride          N comma-separated ints >= 1, or one int for every axis
 *   padding         N ints >= 0 (symmetric), 2N ints lo0,hi0,lo1,hi1,...,
 *                   or one int
 *   output_padding  as stride but >= 0 (conv_transpose only)
 *   dilation        as stride
 *   groups          one int >= 1
 *   activation      relu, leaky_relu:SLOPE, tanh, sigmoid, silu, gelu, none
 * Missing keys take PyTorch's defaults (1, 0, 0, 1, 1, none).
 *
 * A RESULT file holds y and, when grad_y was given, grad_x, grad_weight and
 * grad_bias (when there is a bias): the gradients of sum(grad_y * y).
 *
 * Used by `tapegrad run-op` and by tests/test_golden.c.  Public API only.
 */
#ifndef TAPEGRAD_TOOLS_CASE_H
#define TAPEGRAD_TOOLS_CASE_H

#include <stdbool.h>
#include <stddef.h>

#include "tapegrad/conv.h"
#include "tapegrad/safetensors.h"

typedef struct tg_case {
    const char *op;     /* borrowed from the file's metadata */
    bool transpose;     /* conv_transpose* */
    int nspatial;       /* N = 1, 2, 3 */
    tg_conv_params params;
    /* Borrowed from the file: valid while it is alive.  bias and grad_y may
     * be NULL. */
    tg_tensor *x, *weight, *bias, *grad_y;
} tg_case;

/* Fills *c from file f, checking every metadata value strictly.  On error
 * returns a negative tg_status, writes a message naming the key or tensor into
 * err (errlen bytes, always NUL-terminated) and leaves *c unchanged. */
int tg_case_parse(tg_case *c, const tg_st_file *f, char *err, size_t errlen);

/* Runs the case with the given algorithm: forward, and backward when grad_y
 * is set.  *result receives a new file (free with tg_st_free) holding y and
 * the gradients.  The case's tensors are not modified.  On error returns a
 * negative tg_status with a message in err and leaves *result unchanged. */
int tg_case_run(tg_st_file **result, const tg_case *c, tg_conv_algo algo, char *err,
                size_t errlen);

#endif
