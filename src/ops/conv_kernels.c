/* src/ops/conv_kernels.c - im2col/col2im and the GEMM-based Conv,
 * ConvTranspose (fast path) and weight-gradient kernels on raw contiguous
 * buffers, for float and double (conv_kernels_tmpl.h, included once per type).
 * f16/bf16 callers convert to f32 first and round once at the end. */
#include <math.h>
#include <string.h>

#include <cblas.h>

#include "ops/conv_internal.h"

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

#define T float
#define SUF f32
#define GEMM cblas_sgemm
#include "ops/conv_kernels_tmpl.h"
#undef T
#undef SUF
#undef GEMM

#define T double
#define SUF f64
#define GEMM cblas_dgemm
#include "ops/conv_kernels_tmpl.h"
#undef T
#undef SUF
#undef GEMM

int tg__conv_forward_raw(tg_dtype dt, const tg__conv_geom *g, const void *x, const void *w,
                         void *y)
{
    TG_ASSERT(dt == TG_F32 || dt == TG_F64);
    return dt == TG_F32 ? conv_forward_f32(g, x, w, y) : conv_forward_f64(g, x, w, y);
}

int tg__conv_transpose_fast_raw(tg_dtype dt, const tg__conv_geom *g, const void *x,
                                const void *w, void *y)
{
    TG_ASSERT(dt == TG_F32 || dt == TG_F64);
    return dt == TG_F32 ? conv_transpose_fast_f32(g, x, w, y)
                        : conv_transpose_fast_f64(g, x, w, y);
}

int tg__conv_weight_grad_raw(tg_dtype dt, const tg__conv_geom *g, const void *z,
                             const void *u, void *dw)
{
    TG_ASSERT(dt == TG_F32 || dt == TG_F64);
    return dt == TG_F32 ? conv_weight_grad_f32(g, z, u, dw) : conv_weight_grad_f64(g, z, u, dw);
}

void tg__conv_epilogue(tg_dtype dt, void *y, int64_t batch, int64_t c, int64_t s,
                       const void *bias, tg_activation act, double slope)
{
    TG_ASSERT(dt == TG_F32 || dt == TG_F64);
    if (dt == TG_F32)
        epilogue_f32(y, batch, c, s, bias, act, slope);
    else
        epilogue_f64(y, batch, c, s, bias, act, slope);
}
