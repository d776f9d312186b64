/* src/ops/linalg_la.h - what the square-matrix functions of
 * tapegrad/linalg.h share (src/ops/linalg_*.c; defined in linalg_la.c):
 * their argument rules, batch broadcasting, and the matrices of a batch as
 * one contiguous buffer.  Internal to src/ops. */
#ifndef TAPEGRAD_OPS_LINALG_LA_H
#define TAPEGRAD_OPS_LINALG_LA_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "autograd/tape.h"

/* A (fn's operand `what`, "A" or "B") is f32 or f64 with at least two dims;
 * square: its last two extents are equal.  torch's messages: TG_EDTYPE for
 * an integer dtype ("Expected a floating point tensor") or f16/bf16 ("Low
 * precision dtypes not supported"), TG_ESHAPE for the dims.  The extents
 * must fit LAPACK's int (TG_EINVAL). */
int tg__la_check(const char *fn, const char *what, const tg_tensor *A, bool square);
/* tg__la_check that also takes f16 and bf16 (matrix_exp, computed in f64
 * and rounded to them). */
int tg__la_check_half(const char *fn, const char *what, const tg_tensor *A, bool square);

/* A and B have one float dtype, as torch's solvers ask (TG_EDTYPE naming
 * fn): checked before dispatch, which would promote them.  fp32_policy:
 * under autocast f16 and bf16 count as f32 (the op takes them so).  NULL or
 * integer operands pass (the forward refuses them). */
int tg__la_same_dtype(const char *fn, const tg_tensor *A, const tg_tensor *B, bool fp32_policy);

/* The out-pointers of a function of several results (names[i] of outs[i];
 * NULL ones are not wanted): two that are the same place would lose a
 * result, so TG_EINVAL naming fn and them ("U and S must be two different
 * places"), as sort's values and indices. */
int tg__la_distinct(const char *fn, int n, tg_tensor **const *outs, const char *const *names);

/* The broadcast of the batch dims a[0..an) and b[0..bn) into out (*on
 * dims), as torch's; TG_ESHAPE naming fn when two extents differ and
 * neither is 1. */
int tg__la_broadcast(const char *fn, int an, const int64_t *a, int bn, const int64_t *b,
                     int *on, int64_t *out);

/* t's elements as the batch bshape (bn dims) followed by t's last `tail`
 * dims, t's own batch dims broadcast to bshape: a contiguous buffer of dt
 * (tg__work_alloc; tg__work_free it), NULL with TG_ENOMEM. */
void *tg__la_gather(const tg_tensor *t, int bn, const int64_t *bshape, int tail, tg_dtype dt);

/* The number of matrices of the batch shape bshape (bn dims). */
int64_t tg__la_count(int bn, const int64_t *bshape);

/* d (cols x rows, row-major) = the transpose of s (rows x cols,
 * row-major), d != s: a row-major matrix into LAPACK's column-major order
 * and back. */
void tg__la_transpose(tg_dtype dt, int64_t rows, int64_t cols, const void *s, void *d);

/* The sign of the row permutation in LAPACK's pivots ipiv (n, 1-based). */
int tg__la_perm_sign(int n, const int *ipiv);

/* tg_linalg_inv without its singular-matrix error: getrs's infinities or
 * NaN for a singular A (slogdet's gradient; src/ops/linalg_lu.c). */
int tg__linalg_inv_unchecked(tg_tensor **out, tg_tensor *A);
/* tg_linalg_solve (A and B of one float dtype, as it checks) without its
 * singular-matrix error, its create_graph backward unchecked too (det's
 * and slogdet's gradients under create_graph; src/ops/linalg_lu.c). */
int tg__linalg_solve_unchecked(tg_tensor **out, tg_tensor *A, tg_tensor *B);

/* A^-T for each matrix of a batch from the LU factors that solve's, det's
 * and slogdet's forwards keep (src/ops/linalg_lu.c): lu (..., n, n) the
 * buffers getrf factored in place, piv TG_I32 (..., n) their pivots; into
 * the new *out (lu's dtype and shape), by getrs with A^T against I, no new
 * factorization.  Not recorded: for a backward that records no graph.  A
 * singular matrix gives getrs's inf or NaN.  TG_ENOMEM. */
int tg__la_lu_inv_t(tg_tensor **out, tg_tensor *lu, tg_tensor *piv);

/* Runs one(job, b, ws) for every matrix b in [0, count) of a batch, with
 * OpenBLAS on one thread meanwhile: on tapegrad's pool in contiguous ranges
 * of b (each range in order on one thread, so a matrix's LAPACK calls and
 * results are those of a serial run) when the batch is worth splitting
 * (count * cost, cost about one matrix's flops), else on this thread.  ws
 * is the range's own work buffer of ws_bytes (tg__work_alloc'd once per
 * range, 64-byte aligned).  one returns TG_OK or a negative status with its
 * message set (tg__error); a range stops at its first failure, and the
 * error returned is that of the lowest failing b, whatever the thread
 * count (its message restored on this thread).  A batch of one large
 * matrix keeps OpenBLAS on one thread as well: its pool's workers would
 * spin next to tapegrad's (src/core/blas.c), and on two cores its
 * threaded getrf and potrf did not beat the single-threaded ones. */
int tg__la_batch(int64_t count, double cost, size_t ws_bytes,
                 int (*one)(void *job, int64_t b, void *ws), void *job);

/* The end of a forward that made y (a new reference): with rc >= 0 and a
 * ctx, saves A (when not NULL, slot 0) and y as its output (the next
 * slot), then *out = y; on any error y is released and *out untouched.
 * Returns rc or the saving's status. */
int tg__la_finish(tg_ctx *ctx, int rc, tg_tensor *A, tg_tensor *y, tg_tensor **out);

/* The backward of a solve X = A^-1 B whose op saved A (slot 0) and its
 * output X (slot 1): dB = solve_t(A^T, g) (the solve of A^T: tg_linalg_solve,
 * or solve_triangular on the other triangle), dA = -dB X^T (vec: B and X
 * are vectors, -dB x^T), kept on A's triangle by mask when not NULL; each
 * summed over the batch dims its operand was broadcast along, into gi[0]
 * and gi[1] as the op's inputs need them.  arg goes to solve_t and mask. */
typedef int (*tg__la_solve_t_fn)(tg_tensor **out, tg_tensor *at, tg_tensor *g, const void *arg);
typedef int (*tg__la_mask_fn)(tg_tensor **out, tg_tensor *x, const void *arg);
int tg__la_solve_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi, bool vec,
                          tg__la_solve_t_fn solve_t, tg__la_mask_fn mask, const void *arg);

/* A part of the packed result y of an op of several results: the elements
 * [start, start + rows * cols) of y's last dim as a (..., rows, cols) view
 * (rows < 0: the cols elements as they are, (..., cols)); differentiable. */
int tg__la_part(tg_tensor *y, int64_t start, int64_t rows, int64_t cols, tg_tensor **out);

/* *out = x + (y - detach(y)): x's values (y - y is exactly zero where y is
 * finite) with y's gradient, of any order; x and y of one shape.  For a
 * result computed by LAPACK whose torch gradient is that of a composition
 * y of differentiable ops (lstsq, householder_product). */
int tg__la_attach(tg_tensor **out, tg_tensor *x, tg_tensor *y);

/* getrf's info of each matrix of A (..., m, n) as a new i32 tensor (...)
 * in *info: the 1-based index of U's first exact zero on the diagonal, 0
 * where there is none; and, when pivots is not NULL, its i32 pivots
 * (..., min(m, n)) (src/ops/linalg_lufact.c).  Not recorded.  TG_ENOMEM. */
int tg__la_lu_info(tg_tensor **info, tg_tensor **pivots, const tg_tensor *A);

/* The check_errors of torch's *_ex functions: TG_EINVAL when an element of
 * the i32 info (...) is positive, for the first one, with the message
 * "fn: rule" (" (Batch element b):" after fn for a batched info) where
 * rule is a format whose %d (at most two) are that info value; else
 * TG_OK. */
int tg__la_info_check(const char *fn, const tg_tensor *info, const char *rule);

/* Releases ts[0..n) (NULL entries too). */
void tg__la_release(tg_tensor **ts, int n);

/* The transposed dims -2, -1 of a (a view; differentiable). */
int tg__la_mT(tg_tensor **out, tg_tensor *a);

/* Hands up to three results to the caller's scope, all or none (as
 * tg__scope_capture_pair): v[i] to *o[i] for each o[i] not NULL (v[i] is
 * then the result; a v[i] whose o[i] is NULL is released).  With rc < 0, or when a
 * capture fails, every v[i] is released and no *o[i] written.  Returns rc
 * or the capture's status.  Steals v[0..3). */
int tg__la_capture3(tg_tensor **o[3], tg_tensor *v[3], int rc);

#endif
