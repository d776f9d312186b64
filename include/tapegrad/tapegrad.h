/* tapegrad.h - the umbrella header of tapegrad, an autograd mini-framework in
 * C17 centred on a transposed convolution.
 *
 * A worked example (examples/worked_example.c runs it: `build/examples/worked_example`):
 *
 *   tg_tensor *x, *w, *b, *y, *loss;
 *   int64_t xs[] = {1, 2, 3, 3}, ws[] = {2, 1, 4, 4}, bs[] = {1};
 *   tg_rng rng; tg_rng_init(&rng, 42);
 *   tg_tensor_zeros(&x, TG_F32, 4, xs); tg_tensor_rand_normal(x, &rng, 0, 1);
 *   tg_tensor_zeros(&w, TG_F32, 4, ws); tg_tensor_rand_normal(w, &rng, 0, 0.1);
 *   tg_tensor_zeros(&b, TG_F32, 1, bs);
 *   tg_tensor_set_requires_grad(w, true);   // leaves we want gradients for
 *   tg_tensor_set_requires_grad(b, true);
 *   tg_conv_params p = TG_CONV_PARAMS_INIT;  // PyTorch's defaults
 *   p.stride[0] = p.stride[1] = 2;
 *   tg_conv_params_set_padding(&p, 1);
 *   tg_conv_transpose(&y, x, w, b, &p);      // y is (1, 1, 6, 6), on the tape
 *   tg_mean(&loss, y);                       // a 0-d tensor
 *   tg_backward(loss, NULL, NULL);           // d loss / d leaves
 *   tg_tensor_print(stdout, tg_tensor_grad(w), 32);  // (2, 1, 4, 4)
 *   tg_tensor_release(loss); tg_tensor_release(y);   // every handle is
 *   tg_tensor_release(b); tg_tensor_release(w);      // released once
 *   tg_tensor_release(x);
 *
 * Every function returns a tg_status (0 or a negative code) and sets a
 * thread-local message on failure: check it with tg_error_message().
 */
#ifndef TAPEGRAD_TAPEGRAD_H
#define TAPEGRAD_TAPEGRAD_H

#include "tapegrad/status.h"
#include "tapegrad/dtype.h"
#include "tapegrad/tensor.h"
#include "tapegrad/scope.h"
#include "tapegrad/autograd.h"
#include "tapegrad/registry.h"
#include "tapegrad/op.h"
#include "tapegrad/amp.h"
#include "tapegrad/ops.h"
#include "tapegrad/linalg.h"
#include "tapegrad/conv.h"
#include "tapegrad/pool.h"
#include "tapegrad/safetensors.h"
#include "tapegrad/loss.h"
#include "tapegrad/optim.h"
#include "tapegrad/lr_scheduler.h"
#include "tapegrad/data.h"
#include "tapegrad/image.h"
#include "tapegrad/nn.h"
#include "tapegrad/attention.h"
#include "tapegrad/init.h"
#include "tapegrad/checkpoint.h"
#include "tapegrad/quant.h"
#include "tapegrad/precision.h"
#include "tapegrad/onnx.h"
#include "tapegrad/viz.h"
#include "tapegrad/dist.h"
#include "tapegrad/metrics.h"
#include "tapegrad/profile.h"
#include "tapegrad/sparse.h"

#define TG_VERSION_MAJOR 0
#define TG_VERSION_MINOR 1
#define TG_VERSION_PATCH 0
#define TG_VERSION_STRING "0.1.0"

#endif
