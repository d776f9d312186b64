/* src/ops/conv_phase_kernels.c - ConvTranspose by stride phases:
 * conv_phase_tmpl.h instantiated for float (f32) and double (f64).  The
 * phase geometry is in conv_phase.c; the names this file exports are listed
 * in conv_internal.h. */
#include <string.h>

#include "ops/conv_internal.h"
#include "ops/scratch.h"

#define T float
#define SUF f32
#include "ops/conv_phase_tmpl.h"
#undef T
#undef SUF

#define T double
#define SUF f64
#include "ops/conv_phase_tmpl.h"
#undef T
#undef SUF
