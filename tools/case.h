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
 *   activation      relu, leaky_relu:SLOPE, tanh, sigmoid, silu, gelu, gelu_tanh, none
 * Missing keys take PyTorch's defaults (1, 0, 0, 1, 1, none).
 *
 * A RESULT file holds y and, when grad_y was given, grad_x, grad_weight and
 * grad_bias (when there is a bias): the gradients of sum(grad_y * y).
 *
 * Quantized cases (tapegrad/quant.h): op quantized_conv1d..3d or
 * quantized_conv_transpose1d..3d, x U8 or I8, weight I8 in the float layout,
 * optional bias F32, no grad_y, and the metadata
 *   x_scale, y_scale      one finite number > 0 (required)
 *   x_zero_point, y_zero_point   one int in x's dtype range (default 0)
 *   weight_scale          one number, or one per output channel (required)
 *   activation            none or relu
 * plus the conv parameters.  RESULT holds y in x's dtype.
 *
 * Used by `tapegrad run-op` and by tests/test_golden.c.  Public API only.
 */
#ifndef TAPEGRAD_TOOLS_CASE_H
#define TAPEGRAD_TOOLS_CASE_H

#include <stdbool.h>
#include <stddef.h>

#include "tapegrad/conv.h"
#include "tapegrad/quant.h"
#include "tapegrad/safetensors.h"

/* The most per-channel weight scales a quantized case may carry. */
#define TG_CASE_MAX_CHANNELS 2048

typedef struct tg_case {
    const char *op;     /* borrowed from the file's metadata */
    bool transpose;     /* conv_transpose* */
    bool quantized;     /* quantized_* : q below is filled in */
    int nspatial;       /* N = 1, 2, 3 */
    tg_conv_params params;
    /* Borrowed from the file: valid while it is alive.  bias and grad_y may
     * be NULL. */
    tg_tensor *x, *weight, *bias, *grad_y;
    tg_qscales q;       /* q.weight_scales points into weight_scales */
    double weight_scales[TG_CASE_MAX_CHANNELS];
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

/* Writes the message fmt into err (n bytes, NUL-terminated; nothing when err
 * is NULL or n is 0) and returns status: the failure path of case.c and
 * case_run.c. */
int tg_case_fail(char *err, size_t n, int status, const char *fmt, ...);

#endif
