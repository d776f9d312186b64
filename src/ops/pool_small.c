/* src/ops/pool_small.c - the kernels of adaptive_max_pool.c and
 * adaptive_pool.c for poolings to small outputs (pool_small_tmpl.h
 * instantiated for float and double): window maxima found with lanes, and
 * window sums of several planes side by side, each to the bit the result
 * of the one-window-at-a-time kernels of pool_kernels_tmpl.h (but the sum of a
 * whole f32 plane of 64 or more elements, tg__plane_sums_f32's, within its
 * bound). */
#include <math.h>
#include <string.h>

#include "ops/pool_internal.h"

/* The sums of np whole planes of n elements in f64, each from left to
 * right (window_sums' order). */
static void plane_sums_f64(double *s, const double *x, int64_t n, int64_t np)
{
    for (int64_t p = 0; p < np; p++) s[p] = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t p = 0; p < np; p++) s[p] += x[p * n + i];
}

#define T float
#define PLANE_SUMS tg__plane_sums_f32
#define IT int32_t
#define SUF f32
#include "ops/pool_small_tmpl.h"
#undef T
#undef IT
#undef SUF

#undef PLANE_SUMS
#define T double
#define PLANE_SUMS plane_sums_f64
#define IT int64_t
#define SUF f64
#include "ops/pool_small_tmpl.h"
#undef T
#undef IT
#undef SUF
#undef PLANE_SUMS

const tg__pool_kernels tg__adaptive_max_lanes_kernels = {adaptive_max_lanes_f32,
                                                         adaptive_max_lanes_f64};
const tg__pool_kernels tg__adaptive_avg_planes_kernels = {adaptive_avg_planes_f32,
                                                          adaptive_avg_planes_f64};
