/* src/ops/special_internal.h - the kernel generators of the special math
 * ops (logaddexp.c, xlogy_hypot.c, special_math.c): one function per
 * compute dtype, so that the f32 form can take torch's f32 steps (each
 * intermediate rounded to f32, its transcendental functions computed in
 * double and rounded once) and the f64 form torch's f64 steps. */
#ifndef TAPEGRAD_OPS_SPECIAL_INTERNAL_H
#define TAPEGRAD_OPS_SPECIAL_INTERNAL_H

#include "ops/elementwise.h"

/* A tg_ew_kernel_fn calling ff(float a, double s) for f32 and
 * df(double a, double s) for f64. */
#define TG__SP_UNARY_KERNEL(fname, ff, df)                                    \
    static void fname(tg_dtype cdt_, void *out_, const void *a_, const void *b_, \
                      int64_t n, double s)                                    \
    {                                                                         \
        (void)b_;                                                             \
        if (cdt_ == TG_F64) {                                                 \
            double *o_ = out_;                                                \
            const double *pa_ = a_;                                           \
            for (int64_t i_ = 0; i_ < n; i_++) o_[i_] = df(pa_[i_], s);       \
        } else {                                                              \
            float *o_ = out_;                                                 \
            const float *pa_ = a_;                                            \
            for (int64_t i_ = 0; i_ < n; i_++) o_[i_] = ff(pa_[i_], s);       \
        }                                                                     \
    }

/* The same for two operands: ff(float a, float b), df(double a, double b). */
#define TG__SP_BINARY_KERNEL(fname, ff, df)                                   \
    static void fname(tg_dtype cdt_, void *out_, const void *a_, const void *b_, \
                      int64_t n, double s)                                    \
    {                                                                         \
        (void)s;                                                              \
        if (cdt_ == TG_F64) {                                                 \
            double *o_ = out_;                                                \
            const double *pa_ = a_, *pb_ = b_;                                \
            for (int64_t i_ = 0; i_ < n; i_++) o_[i_] = df(pa_[i_], pb_[i_]); \
        } else {                                                              \
            float *o_ = out_;                                                 \
            const float *pa_ = a_, *pb_ = b_;                                 \
            for (int64_t i_ = 0; i_ < n; i_++) o_[i_] = ff(pa_[i_], pb_[i_]); \
        }                                                                     \
    }

#endif
