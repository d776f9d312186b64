/* src/ops/conv_im2col.c - the data movement of the conv kernels (im2col,
 * col2im, the batch permutations and the epilogue): conv_kernels_tmpl.h
 * instantiated for float (f32) and double (f64).  The names it exports are
 * listed in conv_internal.h. */
#include <math.h>
#include <string.h>

#include "ops/conv_internal.h"
#include "ops/scratch.h"

/* The fused activation, evaluated in double (one rounding for f32). */
static double conv_activate(double v, tg_activation act, double slope)
{
    switch (act) {
    case TG_ACT_RELU: return v > 0 ? v : 0;
    case TG_ACT_LEAKY_RELU: return v > 0 ? v : slope * v;
    case TG_ACT_TANH: return tanh(v);
    case TG_ACT_SIGMOID: return 1.0 / (1.0 + exp(-v));
    case TG_ACT_SILU: return v / (1.0 + exp(-v));
    case TG_ACT_GELU: return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    default: return v;
    }
}

/* Activation inputs as the kernels read them: dst = elements [at, at + n)
 * of src, converted from half when the geometry says so (exact: every half
 * value is an f32 value), else copied. */
static void load_f32(const tg__conv_geom *g, const void *src, int64_t at, int64_t n, float *dst)
{
    if (tg__conv_half_in(g))
        tg__half_to_f32_n(g->half_in, (const uint16_t *)src + at, dst, n, true);
    else
        memcpy(dst, (const float *)src + at, (size_t)n * sizeof(float));
}

static void load_f64(const tg__conv_geom *g, const void *src, int64_t at, int64_t n, double *dst)
{
    TG_ASSERT(!tg__conv_half_in(g));
    memcpy(dst, (const double *)src + at, (size_t)n * sizeof(double));
}

#define T float
#define SUF f32
#include "ops/conv_kernels_tmpl.h"
#undef T
#undef SUF

#define T double
#define SUF f64
#include "ops/conv_kernels_tmpl.h"
#undef T
#undef SUF
