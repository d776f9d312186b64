/* src/ops/softmax_strided.c - softmax, log_softmax, their backwards and
 * cross_entropy's row stats and picked backward for f32 rows of stride S >
 * 1 (a dim that is not the last one), in double with the vectorized exp of
 * src/ops/exp_simd.h, rounded once to f32
 * (src/ops/softmax_strided_internal.h).
 *
 * A slab (C, S) holds S rows of C elements, element (c, i) at c S + i.
 * The kernels run W of its positions at once (W = 8 with AVX-512, 4 with
 * AVX2 and in plain C), one position a lane, the C classes in order: each
 * row's maximum m, e_c = exp(x_c - m) and s = sum_c e_c in class order,
 * then the outputs.  That is softmax.c's arithmetic for the f64 rows (and
 * the f32 rows along the last dim but for their eight partial sums), its
 * exp softmax_rows.c's (relative error under 2.3e-16), its log(s)
 * src/ops/log_simd.h's, W rows at once (within 0.51 ulp, where libm's
 * would take one call a row).  Every lane takes
 * the same operations (c17 contracts no multiply-add the code does not
 * write out), so the bits of a position depend neither on W, on its lane
 * nor on how the slabs are shared out.  The last, partial block of a slab
 * loads its missing lanes as 0 and stores none of them. */
#include <math.h>
#include <string.h>

#include "ops/exp_simd.h"
#include "ops/log_simd.h"
#include "ops/softmax_strided_internal.h"

typedef float strided_v4f __attribute__((vector_size(16)));
typedef float strided_v8f __attribute__((vector_size(32)));
typedef int32_t strided_v4fi __attribute__((vector_size(16)));
typedef int32_t strided_v8fi __attribute__((vector_size(32)));

/* The plain width's conversions and maximum; the others' are the
 * instructions (cvtps2pd, cvtpd2ps, maxps: maxps(v, m) is m where either
 * is NaN, else v > m ? v : m). */
#define TO_VD_PLAIN(v) __builtin_convertvector(v, tg__v4d)
#define TO_VF_PLAIN(v) __builtin_convertvector(v, strided_v4f)
#define MAXF_PLAIN(v, m)                                                                   \
    __extension__({                                                                       \
        const strided_v4fi gt_ = (v) > (m);                                               \
        (strided_v4f)((gt_ & (strided_v4fi)(v)) | (~gt_ & (strided_v4fi)(m)));            \
    })
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TO_VD_AVX2(v) ((tg__v4d)_mm256_cvtps_pd((__m128)(v)))
#define TO_VF_AVX2(v) ((strided_v4f)_mm256_cvtpd_ps((__m256d)(v)))
#define MAXF_AVX2(v, m) ((strided_v4f)_mm_max_ps((__m128)(v), (__m128)(m)))
#define TO_VD_AVX512(v) ((tg__v8d)_mm512_cvtps_pd((__m256)(v)))
#define TO_VF_AVX512(v) ((strided_v8f)_mm512_cvtpd_ps((__m512d)(v)))
#define MAXF_AVX512(v, m) ((strided_v8f)_mm256_max_ps((__m256)(v), (__m256)(m)))
#else   /* never taken (tg__exp_width_get), but compiled */
#define TO_VD_AVX2 TO_VD_PLAIN
#define TO_VF_AVX2 TO_VF_PLAIN
#define MAXF_AVX2 MAXF_PLAIN
#define TO_VD_AVX512(v) __builtin_convertvector(v, tg__v8d)
#define TO_VF_AVX512(v) __builtin_convertvector(v, strided_v8f)
#define MAXF_AVX512(v, m)                                                                  \
    __extension__({                                                                       \
        const strided_v8fi gt_ = (v) > (m);                                                  \
        (strided_v8f)((gt_ & (strided_v8fi)(v)) | (~gt_ & (strided_v8fi)(m)));                  \
    })
#endif

#define AI __attribute__((always_inline))
/* Blocks of W positions whose logs (log_softmax's forward, the stats) run
 * side by side: each log a chain of some sixty dependent steps, which one
 * block's other work cannot cover. */
#define GROUP 8
/* a where the lanes of the mask m are all ones, b elsewhere. */
#define SEL(m, a, b) ((VD)(((VI)(a) & (m)) | ((VI)(b) & ~(m))))

/* The three widths.  FN(name) pastes the width's suffix: the template
 * defines load, load_f, store, exp_le0, exp_shifted, max_of, log_lanes,
 * load_classes, forward_block, max_and_sum, log_forward_group,
 * backward_block, log_backward_block, stats_sums, stats_group, pick_block,
 * forward_slab, backward_slab, log_backward_slab,
 * stats_slab, pick_slab and log_array as name_plain, name_avx2 and
 * name_avx512. */
#define W 4
#define VF strided_v4f
#define VD tg__v4d
#define VI tg__v4i
#define VU tg__v4u
#define FMA TG__FMA4
#define TAB TG__TAB4
#define LOGTAB TG__TAB4
#define ATTR
#define FN(name) name##_plain
#define TO_VD TO_VD_PLAIN
#define TO_VF TO_VF_PLAIN
#define MAXF MAXF_PLAIN
#include "ops/softmax_strided_tmpl.h"
#undef FMA
#undef TAB
#undef LOGTAB
#undef ATTR
#undef FN
#undef TO_VD
#undef TO_VF
#undef MAXF
#define FMA TG__FMA4X
#define TAB TG__TAB4X
#define LOGTAB TG__TAB4X
#define ATTR TG__SIMD_AVX2
#define FN(name) name##_avx2
#define TO_VD TO_VD_AVX2
#define TO_VF TO_VF_AVX2
#define MAXF MAXF_AVX2
#include "ops/softmax_strided_tmpl.h"
#undef W
#undef TO_VD
#undef TO_VF
#undef MAXF
#undef VF
#undef VD
#undef VI
#undef VU
#undef FMA
#undef TAB
#undef LOGTAB
#undef ATTR
#undef FN
#define W 8
#define VF strided_v8f
#define VD tg__v8d
#define VI tg__v8i
#define VU tg__v8u
#define FMA TG__FMA8
#define TAB TG__TAB8
#define LOGTAB TG__GATHER8
#define ATTR TG__SIMD_AVX512
#define FN(name) name##_avx512
#define TO_VD TO_VD_AVX512
#define TO_VF TO_VF_AVX512
#define MAXF MAXF_AVX512
#include "ops/softmax_strided_tmpl.h"

void tg__softmax_strided_f32(const float *x, float *y, int64_t C, int64_t S, int64_t i0,
                             int64_t i1, bool log_, double *e, tg__exp_width w)
{
    if (C <= 0 || i0 >= i1) return;
    if (w == TG__EXP_AVX512) forward_slab_avx512(x, y, C, S, i0, i1, log_, e);
    else if (w == TG__EXP_AVX2) forward_slab_avx2(x, y, C, S, i0, i1, log_, e);
    else forward_slab_plain(x, y, C, S, i0, i1, log_, e);
}

void tg__softmax_backward_strided_f32(const float *y, const float *g, float *dx, int64_t C,
                                      int64_t S, int64_t i0, int64_t i1, tg__exp_width w)
{
    if (C <= 0 || i0 >= i1) return;
    if (w == TG__EXP_AVX512) backward_slab_avx512(y, g, dx, C, S, i0, i1);
    else if (w == TG__EXP_AVX2) backward_slab_avx2(y, g, dx, C, S, i0, i1);
    else backward_slab_plain(y, g, dx, C, S, i0, i1);
}

void tg__log_softmax_backward_strided_f32(const float *x, const float *g, float *dx,
                                          int64_t C, int64_t S, int64_t i0, int64_t i1,
                                          double *e, tg__exp_width w)
{
    if (C <= 0 || i0 >= i1) return;
    if (w == TG__EXP_AVX512) log_backward_slab_avx512(x, g, dx, C, S, i0, i1, e);
    else if (w == TG__EXP_AVX2) log_backward_slab_avx2(x, g, dx, C, S, i0, i1, e);
    else log_backward_slab_plain(x, g, dx, C, S, i0, i1, e);
}

void tg__log_softmax_stats_strided_f32(const float *x, int64_t C, int64_t S, int64_t i0,
                                       int64_t i1, const int64_t *t, double *st, double *lp,
                                       tg__exp_width w)
{
    if (C <= 0 || i0 >= i1) return;
    if (w == TG__EXP_AVX512) stats_slab_avx512(x, C, S, i0, i1, t, st, lp);
    else if (w == TG__EXP_AVX2) stats_slab_avx2(x, C, S, i0, i1, t, st, lp);
    else stats_slab_plain(x, C, S, i0, i1, t, st, lp);
}

void tg__log_softmax_pick_backward_strided_f32(const float *x, float *dx, int64_t C,
                                               int64_t S, int64_t i0, int64_t i1,
                                               const double *st, const int64_t *t,
                                               const double *gt, tg__exp_width w)
{
    if (C <= 0 || i0 >= i1) return;
    if (w == TG__EXP_AVX512) pick_slab_avx512(x, dx, C, S, i0, i1, st, t, gt);
    else if (w == TG__EXP_AVX2) pick_slab_avx2(x, dx, C, S, i0, i1, st, t, gt);
    else pick_slab_plain(x, dx, C, S, i0, i1, st, t, gt);
}

void tg__log_f64_inplace(double *v, int64_t n, tg__exp_width w)
{
    if (n <= 0) return;
    if (w == TG__EXP_AVX512) log_array_avx512(v, n);
    else if (w == TG__EXP_AVX2) log_array_avx2(v, n);
    else log_array_plain(v, n);
}
