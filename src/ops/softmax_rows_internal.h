/* src/ops/softmax_rows_internal.h - softmax, log_softmax and log_softmax's
 * backward of one contiguous f32 row in double with a vectorized exp
 * (src/ops/softmax_rows.c), for softmax.c's kernels and the fused
 * attention.  Internal to src/ops. */
#ifndef TAPEGRAD_OPS_SOFTMAX_ROWS_INTERNAL_H
#define TAPEGRAD_OPS_SOFTMAX_ROWS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

/* The vector width of the double-lane kernels (this exp, unary_simd.c's,
 * softmax_strided.c's, reduce_float.c's f32 sum lanes): plain C (four
 * lanes), AVX2 (with FMA), AVX-512. */
enum { TG__EXP_PAD = 8 };   /* doubles of scratch past a row's n */
typedef enum { TG__EXP_AUTO, TG__EXP_PLAIN, TG__EXP_AVX2, TG__EXP_AVX512 } tg__exp_width;

/* The width of this thread's calls: the widest this CPU runs, or the one
 * tg__exp_width_force chose when the CPU runs it. */
tg__exp_width tg__exp_width_get(void);

/* Tests: 0 the widest this CPU runs (the default), 1 plain C, 2 AVX2,
 * 3 AVX-512, for this thread; a width this CPU does not run is not taken. */
void tg__exp_width_force(int width);

/* e[i] = exp(e[i]) for i < n, in place, at width w: each e[i] <= 700
 * (below -708: 0; NaN: NaN), by src/ops/exp_simd.h's exp, the rows' exp;
 * e holds n rounded up to a multiple of 8 doubles (the last vector's
 * lanes past n are computed too).  For tests. */
void tg__exp_f64_inplace(double *e, int64_t n, tg__exp_width w);

/* y = softmax(x) (log_: log_softmax(x)) of the n values of x; y may be x.
 * e: n + TG__EXP_PAD doubles of scratch. */
void tg__softmax_row_f32(const float *x, float *y, int64_t n, bool log_, double *e,
                         tg__exp_width w);

/* e[c] = softmax(x)_c for the n values of x, in double and not rounded
 * (tg__softmax_row_f32's values before their rounding to f32), for callers
 * that round them to a half dtype.  e: n + TG__EXP_PAD doubles. */
void tg__softmax_row_f32_to_f64(const float *x, int64_t n, double *e, tg__exp_width w);

/* dx = g - softmax(x) sum(g): log_softmax's backward from its input x and
 * the gradient g, n values each; dx may be g.  e: n + TG__EXP_PAD doubles
 * of scratch. */
void tg__log_softmax_backward_row_f32(const float *x, const float *g, float *dx, int64_t n,
                                      double *e, tg__exp_width w);

/* Values of scratch the rows functions below take beside a row's. */
enum { TG__ROWS_BLOCK = 1024 };
/* tg__softmax_row_f32 of `rows` contiguous rows of n values (row r at x +
 * r n and y + r n), the same bits; short rows go through the exp
 * together.  e: max(n, TG__ROWS_BLOCK) + TG__EXP_PAD doubles of scratch. */
void tg__softmax_rows_f32(const float *x, float *y, int64_t rows, int64_t n, bool log_,
                          double *e, tg__exp_width w);
/* For each of `rows` contiguous rows r of the n >= 1 values of x (row r
 * at x + r n): st[2 r] = m, its maximum, and st[2 r + 1] = s = sum exp(x -
 * m), as tg__softmax_row_f32 computes them (log_softmax(x) = (x - m) -
 * log(s)).  e: max(n, TG__ROWS_BLOCK) + TG__EXP_PAD doubles of scratch. */
void tg__log_softmax_stats_rows_f32(const float *x, int64_t rows, int64_t n, double *st,
                                    double *e, tg__exp_width w);
/* tg__log_softmax_backward_row_f32 of each of those rows for a g that is
 * 0 but at class t[r] (none for t[r] < 0), g[t[r]] = gt[r], from their
 * stats st (tg__log_softmax_stats_rows_f32): the same bits, with no pass
 * for the maximum and the sums.  e as there. */
void tg__log_softmax_pick_backward_rows_f32(const float *x, float *dx, int64_t rows, int64_t n,
                                            const double *st, const int64_t *t, const float *gt,
                                            double *e, tg__exp_width w);
/* dx = y (g - sum(g y)): softmax's backward from its output y and the
 * gradient g, n values each, the sum in double (eight partial sums) and
 * each dx rounded once; dx may be g. */
void tg__softmax_backward_row_f32(const float *y, const float *g, float *dx, int64_t n);

#endif
