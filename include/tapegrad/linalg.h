/* tapegrad/linalg.h - torch.linalg's square-matrix functions: inverse,
 * determinant, log-determinant, linear solves, Cholesky factor,
 * triangular solves, symmetric eigendecomposition, singular value and QR
 * decompositions and functions made of them, with gradients of any order.
 *
 * Each takes a batch of matrices, the last two dims (..., n, n) of A (svd,
 * qr, lu_factor, lu, lstsq, householder_product: (..., m, n)), in f32
 * or f64 (LAPACK's getrf / getrs / potrf and BLAS's trsm in that dtype, as
 * PyTorch's CPU kernels), and computes every matrix of the batch on its
 * own.  Batch dims of two operands broadcast as torch's.  A NULL out or
 * operand, a tensor of an integer dtype ("Expected a floating point
 * tensor"), of f16 or bf16 ("Low precision dtypes not supported"; under
 * autocast inv, solve and cholesky take their operands in f32, as torch's
 * CPU autocast), dtypes that differ, fewer than two dims or matrices that are
 * not square are TG_EINVAL, TG_EDTYPE or TG_ESHAPE with a message naming
 * the function, the operand and the rule; a singular matrix given to inv or
 * solve, or one that is not positive-definite given to cholesky, is
 * TG_EINVAL naming the batch element, as torch's errors; so are two
 * out-pointers of one call that are the same place.  On error *out is
 * untouched.  Each result is a new reference that requires grad when an
 * input does.
 *
 * Gradients are torch's formulas written with these functions and
 * tg_matmul, so gradients of gradients follow:
 *   inv:    dA = -Y^T g Y^T                        (Y = inv(A))
 *   det:    dA = g det(A) inv(A)^T                 (nonsingular A)
 *   slogdet: dA = g inv(A)^T
 *   solve:  dB = solve(A^T, g),  dA = -dB X^T       (X = solve(A, B))
 *   cholesky: dA = L^-T Phi(L^T g) L^-1, symmetrized (Murray's rule)
 *   solve_triangular: dB = solve_triangular(A^T, g),  dA = -dB X^T kept on
 *           A's triangle.
 * The gradient of det at a singular matrix is the transposed adjugate (from
 * an SVD), which torch 1.13 gives as zeros; it has no further derivatives
 * (a create_graph backward through it is TG_EUNSUPPORTED). */
#ifndef TAPEGRAD_LINALG_H
#define TAPEGRAD_LINALG_H

#include <stdbool.h>

#include "tapegrad/export.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.linalg.inv(A): (..., n, n) -> (..., n, n), the solution of A Y = I
 * through LU with partial pivoting. */
TG_API int tg_linalg_inv(tg_tensor **out, tg_tensor *A);

/* torch.linalg.det(A): (..., n, n) -> (...), the product of U's diagonal
 * in order times the permutation's sign; 1 for n = 0. */
TG_API int tg_linalg_det(tg_tensor **out, tg_tensor *A);

/* torch.linalg.slogdet(A): *sign (-1, 0 or 1; not differentiable) and
 * *logabsdet (log |det A|, -inf for a singular A), both (...).  Either
 * out-pointer may be NULL (that result is not wanted), not both.  On error
 * neither is written. */
TG_API int tg_linalg_slogdet(tg_tensor **sign, tg_tensor **logabsdet, tg_tensor *A);

/* torch.linalg.solve(A, B): X with A X = B.  B is a batch of vectors when
 * it is 1-d or has A's shape without the last dim (..., n); otherwise a
 * batch of matrices (..., n, k).  Batch dims broadcast.  A singular matrix
 * is TG_EINVAL naming its index in A's own batch (as torch's).  The LU
 * factors of A are kept for the backward, which solves with A^T from them
 * unless it records a graph (create_graph: solve(A^T, g), as above). */
TG_API int tg_linalg_solve(tg_tensor **out, tg_tensor *A, tg_tensor *B);

/* torch.linalg.cholesky(A, upper): the lower triangular L with A = L L^T,
 * from A's lower triangle only; upper: the upper triangular U = L^T with A =
 * U^T U, from A's upper triangle only (the other one is not read). */
TG_API int tg_linalg_cholesky(tg_tensor **out, tg_tensor *A, bool upper);

/* torch.linalg.solve_triangular(A, B, upper, left, unitriangular): X with
 * A X = B (left) or X A = B (!left), A (..., n, n) read on its upper or
 * lower triangle only (unitriangular: its diagonal taken as ones and not
 * read), B (..., n, k) with left, (..., k, n) without; B needs at least two
 * dims.  Batch dims broadcast.  A zero on A's diagonal gives inf or NaN, as
 * torch's. */
TG_API int tg_linalg_solve_triangular(tg_tensor **out, tg_tensor *A, tg_tensor *B, bool upper,
                                      bool left, bool unitriangular);

/* torch.linalg.eigh(A, UPLO): the eigenvalues (..., n), ascending, and the
 * eigenvectors (..., n, n), orthonormal columns, of the symmetric A read
 * from its lower triangle (upper: the upper one), through LAPACK's syevd.
 * Either out-pointer may be NULL (not wanted), not both; on error neither
 * is written.  An eigenvector's sign is arbitrary (LAPACK's choice, which
 * torch's CPU kernel shares when linked with the same LAPACK): a loss of the
 * eigenvectors should not depend on it.  Gradient: torch's rule for a
 * Hermitian A, infinite or NaN where two eigenvalues are equal and the loss
 * reads the eigenvectors, as torch's.  TG_EUNSUPPORTED when syevd does not
 * converge. */
TG_API int tg_linalg_eigh(tg_tensor **eigenvalues, tg_tensor **eigenvectors, tg_tensor *A,
                          bool upper);
/* torch.linalg.eigvalsh(A, UPLO): tg_linalg_eigh's eigenvalues alone.
 * When no gradient is recorded (grad mode off, or A not requiring grad)
 * syevd computes the eigenvalues only (no eigenvectors, as torch's) and
 * the result is a contiguous (..., n) tensor of its own; otherwise it is
 * eigh's, with eigh's gradient. */
TG_API int tg_linalg_eigvalsh(tg_tensor **out, tg_tensor *A, bool upper);

/* torch.linalg.svd(A, full_matrices): A (..., m, n) = U diag(S) Vh, the k =
 * min(m, n) singular values S (..., k) descending, U (..., m, k) and Vh
 * (..., k, n) with orthonormal columns and rows (full_matrices: U (..., m,
 * m) and Vh (..., n, n)), through LAPACK's gesdd.  A need not be square.
 * Any of U, S, Vh may be NULL (not wanted), not all; on error none is
 * written.  The signs of a pair of singular vectors are arbitrary
 * (LAPACK's choice): a loss should not depend on them.  Gradient: torch
 * 1.13's rule; with full_matrices only U's first k columns and Vh's first k
 * rows carry one, as torch's; a loss of S alone takes U diag(gS) Vh; equal
 * singular values give inf or NaN where the loss reads U or Vh, as torch's.
 * TG_EUNSUPPORTED when gesdd does not converge. */
TG_API int tg_linalg_svd(tg_tensor **U, tg_tensor **S, tg_tensor **Vh, tg_tensor *A,
                         bool full_matrices);
/* torch.linalg.svdvals(A): tg_linalg_svd's S alone. */
TG_API int tg_linalg_svdvals(tg_tensor **out, tg_tensor *A);

/* torch.linalg.qr(A, mode): A (..., m, n) = Q R with orthonormal columns in
 * Q and an upper triangular R, through LAPACK's geqrf and orgqr (R's
 * diagonal keeps LAPACK's signs, as torch's).  mode "reduced": Q (..., m,
 * k), R (..., k, n), k = min(m, n); "complete": Q (..., m, m), R (..., m,
 * n); "r": R alone (Q, if asked for, is torch's empty tensor of shape (0)).
 * Either out-pointer may be NULL, not both; on error neither is written.
 * TG_EINVAL for another mode.  Gradient: torch's rule; a backward through
 * mode "r", or "complete" with m > n, is TG_EUNSUPPORTED with torch's
 * words. */
TG_API int tg_linalg_qr(tg_tensor **Q, tg_tensor **R, tg_tensor *A, const char *mode);

/* ---- made of the functions above (their gradients follow) ---- */

/* torch.linalg.matrix_norm(A, ord, dim, keepdim): ord is "fro" (the root of
 * the sum of squares), "nuc" (the sum of the singular values), "2" / "-2"
 * (the largest / smallest singular value), "1" / "-1" (the largest /
 * smallest column sum of |A|) or "inf" / "-inf" (row sums); dims the two
 * dims of the matrices (NULL: -2 and -1, rows then columns), dropped from
 * the result unless keepdim.  TG_EINVAL for another ord or bad dims. */
TG_API int tg_linalg_matrix_norm(tg_tensor **out, tg_tensor *A, const char *ord, const int *dims,
                                 bool keepdim);

/* torch.linalg.pinv(A, atol, rtol, hermitian): V diag(1/S) U^T from A's SVD
 * (hermitian: Q diag(1/L) Q^T from eigh, A square and read from its lower
 * triangle), singular values (|eigenvalues|) at or below max(atol, rtol *
 * the largest) counted as zero.  A negative atol or rtol is unset, as
 * torch's None: both unset, rtol = eps * max(m, n); atol > 0 alone, rtol =
 * 0.  Its gradient is torch's pinv_backward formula (the derivative where
 * A's rank does not change, every entry of A independent, hermitian or
 * not), written with matmuls. */
TG_API int tg_linalg_pinv(tg_tensor **out, tg_tensor *A, double atol, double rtol,
                          bool hermitian);

/* torch.linalg.matrix_rank(A, atol, rtol, hermitian): the number of
 * singular values (|eigenvalues|) above pinv's tolerance, an i64 tensor
 * (...), not differentiable. */
TG_API int tg_linalg_matrix_rank(tg_tensor **out, tg_tensor *A, double atol, double rtol,
                                 bool hermitian);

/* torch.linalg.matrix_power(A, n): A^n by repeated squaring with matmul, in
 * torch's order; n = 0 the identity (a new tensor of A's shape), n < 0 the
 * power of inv(A). */
TG_API int tg_linalg_matrix_power(tg_tensor **out, tg_tensor *A, int64_t n);

/* torch.logdet(A): log det(A), -inf for a singular A and NaN for a negative
 * determinant, from tg_linalg_slogdet. */
TG_API int tg_logdet(tg_tensor **out, tg_tensor *A);

/* torch.linalg.multi_dot(tensors): the product of n >= 2 matrices (the first
 * and last may be vectors), multiplied in the order of fewest
 * multiply-adds (the matrix-chain order, as torch's). */
TG_API int tg_linalg_multi_dot(tg_tensor **out, int n, tg_tensor *const *tensors);

/* ---- LU factorization (torch.linalg.lu_factor, lu, lu_solve) ---- */

/* torch.linalg.lu_factor(A): A (..., m, n) = P L U with partial pivoting
 * (LAPACK's getrf), k = min(m, n): *LU (..., m, n) packs L's strictly
 * lower part (its unit diagonal implied) and U, *pivots (..., k) is i32,
 * LAPACK's 1-based row swaps in order, as torch's.  Either out-pointer may
 * be NULL, not both; on error neither is written.  An exact zero on U's
 * diagonal is TG_EINVAL with torch's words ("U[i,i] is zero ... division
 * by zero").  LU's gradient is torch 1.13's (lu_factor_ex_backward), made
 * of differentiable ops, with gL = gLU[:, :k] (strictly lower part), gU =
 * gLU[:k, :] (upper part); square: gA = P L^-T (tril(L^T gL, -1) + triu(gU
 * U^T)) U^-T; wide and tall as linalg_lu_backward (src/ops/linalg_lufact.c
 * gives them); pivots have none. */
TG_API int tg_linalg_lu_factor(tg_tensor **LU, tg_tensor **pivots, tg_tensor *A);

/* torch.linalg.lu(A): A (..., m, n) = P L U, P (..., m, m) (not
 * differentiable) a permutation matrix in A's dtype, L (..., m, k) unit
 * lower and U (..., k, n) upper triangular, k = min(m, n), from
 * tg_linalg_lu_factor's LU (tril and triu of its parts: the gradient is
 * lu_factor's).  A singular A is factored without error.  Any of P, L, U
 * may be NULL (not wanted), not all; on error none is written. */
TG_API int tg_linalg_lu(tg_tensor **P, tg_tensor **L, tg_tensor **U, tg_tensor *A);

/* torch.linalg.lu_solve(LU, pivots, B, left, adjoint): X with A X = B
 * (left) or X A = B (!left), A^T in place of A with adjoint, A = P L U
 * given by tg_linalg_lu_factor's LU (..., n, n) and i32 pivots (LU's shape
 * without its last dim, each in 1..n, else TG_EINVAL).  B (..., n, k) with
 * left, (..., k, n) without, at least two dims; batch dims of LU and B
 * broadcast.  Made of matmul with P and two tg_linalg_solve_triangular
 * (their gradients, with respect to LU's triangles and B, are torch's).
 * Zeros on U's diagonal give inf or NaN. */
TG_API int tg_linalg_lu_solve(tg_tensor **out, tg_tensor *LU, tg_tensor *pivots, tg_tensor *B,
                              bool left, bool adjoint);

/* ---- the _ex forms (torch.linalg.inv_ex, cholesky_ex, solve_ex,
 * lu_factor_ex) ----
 * Each gives its function's result and *info, a new i32 tensor of A's
 * batch shape (...): LAPACK's info of each matrix, 0 where it succeeded;
 * for inv_ex, solve_ex and lu_factor_ex getrf's (the 1-based index of U's
 * first exact zero on the diagonal, a singular matrix; inv_ex and solve_ex
 * factor A^T, as torch's for a contiguous A, so their info can differ from
 * lu_factor_ex's), for cholesky_ex
 * potrf's (the order of the first leading minor that is not
 * positive-definite).  With check_errors false such a matrix is no error:
 * its result is LAPACK's (inf, NaN or a partial factor), as torch's; with
 * check_errors true the first one is TG_EINVAL with torch's words, naming
 * the batch element.  Every other rule and error is the plain function's,
 * and so is the gradient of the result (info has none).  Either
 * out-pointer (lu_factor_ex: any of the three) may be NULL, not all; on
 * error none is written.  info comes from a factorization of its own, a
 * second one besides the result's.  Unlike inv, solve and cholesky, an f16
 * or bf16 A is refused inside autocast too (cast it to f32 first). */
TG_API int tg_linalg_inv_ex(tg_tensor **inverse, tg_tensor **info, tg_tensor *A,
                            bool check_errors);
TG_API int tg_linalg_cholesky_ex(tg_tensor **L, tg_tensor **info, tg_tensor *A, bool upper,
                                 bool check_errors);
/* torch.linalg.solve_ex(A, B, left=True, check_errors): info of A's batch
 * shape, as torch's. */
TG_API int tg_linalg_solve_ex(tg_tensor **result, tg_tensor **info, tg_tensor *A, tg_tensor *B,
                              bool check_errors);
/* torch.linalg.lu_factor_ex(A, pivot=True, check_errors): A (..., m, n). */
TG_API int tg_linalg_lu_factor_ex(tg_tensor **LU, tg_tensor **pivots, tg_tensor **info,
                                  tg_tensor *A, bool check_errors);

/* ---- solves with a Cholesky factor (torch.cholesky_solve, inverse) ---- */

/* torch.cholesky_solve(B, L, upper): X with A X = B, A = L L^T (upper: A =
 * U^T U) given its Cholesky factor L (..., n, n), read on its lower (upper)
 * triangle only; B (..., n, k), at least two dims; batch dims broadcast.
 * Dtypes must match ("Expected b and A to have the same dtype", TG_EDTYPE).
 * A zero on L's diagonal gives inf or NaN.  Gradient: torch 1.13's, which
 * takes L as a full matrix (its other triangle gets one too):
 * gB = cholesky_solve(g, L), gL = -(gB X^T + X gB^T) L (upper: -U (...)). */
TG_API int tg_cholesky_solve(tg_tensor **out, tg_tensor *B, tg_tensor *L, bool upper);

/* torch.cholesky_inverse(L, upper): (L L^T)^-1 (upper: (U^T U)^-1), L (...,
 * n, n) read on one triangle; a zero on L's diagonal is TG_EINVAL with
 * torch's words ("The diagonal element i is zero").  Gradient: torch
 * 1.13's, gL = -Y (g + g^T) Y L (upper: -U Y (g + g^T) Y), Y the result. */
TG_API int tg_cholesky_inverse(tg_tensor **out, tg_tensor *L, bool upper);

/* torch.linalg.lstsq(A, B, rcond, driver): X minimizing |A X - B| by
 * LAPACK's driver "gels" (QR; A of full rank, else TG_EINVAL with torch's
 * words "does not have full rank"), "gelsy" (pivoted QR, the minimum-norm
 * X; NULL: this one, torch's CPU default), "gelsd" or "gelss" (SVD, the
 * minimum-norm X; TG_EUNSUPPORTED when it does not converge); another
 * driver is TG_EINVAL.  A (..., m, n) of any shape (tall or wide), B (...,
 * m, k), or a batch of vectors (..., m) when it has one dim fewer than A;
 * batch dims broadcast.  rcond: the relative threshold below which
 * singular values (gelsy: R's diagonal) count as zero, not used by gels; a
 * negative rcond is torch's None, eps * max(m, n).  The results, as torch
 * 1.13's (each out-pointer may be NULL: not wanted; not all; on error none
 * is written):
 *   *solution (..., n, k) (vectors: (..., n));
 *   *residuals (..., k) (vectors: (..., 1)), the squared norms of B's
 *     columns less A X's, given when m > n, the driver is not gelsy and
 *     (gelsd, gelss) every matrix has rank n; otherwise empty, shape (0);
 *   *rank, i64 (...), the driver's rank estimate; empty (0) for gels;
 *   *singular_values (..., min(m, n)) descending, gelsd and gelss only;
 *     otherwise empty (0).
 * Gradient (solution only; the others are not differentiable): torch's,
 * the derivative of pinv(A) B with pinv at its default tolerance, whatever
 * the driver and rcond.  Under autocast f16 and bf16 operands are taken in
 * f32, as torch's CPU autocast. */
TG_API int tg_linalg_lstsq_ex(tg_tensor **solution, tg_tensor **residuals, tg_tensor **rank,
                              tg_tensor **singular_values, tg_tensor *A, tg_tensor *B,
                              double rcond, const char *driver);

/* tg_linalg_lstsq_ex with the default driver (gelsy): the solution and the
 * i64 rank (...), either may be NULL, not both. */
TG_API int tg_linalg_lstsq(tg_tensor **solution, tg_tensor **rank, tg_tensor *A, tg_tensor *B,
                           double rcond);

/* torch.linalg.matrix_exp(A): the exponential of each square matrix of A
 * (..., n, n), f32 or f64, by scaling and squaring with a Taylor
 * polynomial computed in f64 (torch's picks the degree by the norm; both
 * round to the exponential in A's dtype).  Gradient: torch's, the upper
 * right block of matrix_exp([[A^T, g], [0, A^T]]), made of matrix_exp
 * itself so gradients of gradients follow. */
TG_API int tg_linalg_matrix_exp(tg_tensor **out, tg_tensor *A);

/* ---- more of torch.linalg, made of the functions above ---- */

/* torch.linalg.cond(A, p): A's condition number in matrix norm p, (...).
 * p NULL or "2": s_max / s_min, "-2": s_min / s_max, from svdvals (A (...,
 * m, n) of any shape; a singular A gives inf, a zero one NaN); "fro",
 * "nuc", "inf", "-inf", "1", "-1": |A|_p |A^-1|_p (tg_linalg_matrix_norm;
 * A square, else TG_ESHAPE naming the order, as torch's), inf where A is
 * singular.  Empty matrices give zeros.  Another p is TG_EINVAL ("invalid
 * norm type").  Differentiable where A is not singular (its gradient is
 * that of the composition). */
TG_API int tg_linalg_cond(tg_tensor **out, tg_tensor *A, const char *p);

/* torch.linalg.tensorinv(A, ind): the inverse of A taken as a matrix of
 * prod(shape[:ind]) rows and prod(shape[ind:]) columns (they must be
 * equal, TG_ESHAPE with torch's words; ind > 0, TG_EINVAL), shaped
 * shape[ind:] + shape[:ind], so that tensordot(tensorinv(A), A, ind) is the
 * identity.  A singular A is tg_linalg_inv's error.  Gradient: inv's. */
TG_API int tg_linalg_tensorinv(tg_tensor **out, tg_tensor *A, int ind);

/* torch.linalg.tensorsolve(A, B, dims): X with tensordot(A, X, X.ndim) =
 * B: A's dims `dims` (ndims of them; NULL / 0: none) moved to the end,
 * then A taken as a (prod(A.shape[:B.ndim]), prod(A.shape[B.ndim:]))
 * matrix (square, else TG_ESHAPE with torch's words) solved against B
 * flattened; X has A's (moved) shape[B.ndim:].  Gradient: solve's. */
TG_API int tg_linalg_tensorsolve(tg_tensor **out, tg_tensor *A, tg_tensor *B, int ndims,
                                 const int *dims);

/* torch.linalg.householder_product(A, tau): the first n columns of H_1 ..
 * H_k, H_i = I - tau_i v_i v_i^T with v_i A's column i below the diagonal
 * and 1 on it (geqrf's reflectors), A (..., m, n), tau (..., k), m >= n >=
 * k, tau's batch dims A's (TG_ESHAPE), one dtype (TG_EDTYPE), through
 * LAPACK's orgqr.  Gradient (A and tau): that of the product written with
 * matmuls (the same derivative as torch's), of any order. */
TG_API int tg_linalg_householder_product(tg_tensor **out, tg_tensor *A, tg_tensor *tau);

/* torch.linalg.vander(x, N): x (..., n) -> (..., n, N), column j x^j (j =
 * 0 .. N-1) from a cumulative product, as torch's; N < 0 is torch's None
 * (N = n); N must be above 1 (TG_EINVAL).  Any dtype cumprod takes;
 * differentiable. */
TG_API int tg_linalg_vander(tg_tensor **out, tg_tensor *x, int64_t N);

/* torch.linalg.vecdot(x, y, dim): sum(x * y) over dim, x and y broadcast,
 * one dtype (TG_EDTYPE, torch's words); differentiable. */
TG_API int tg_linalg_vecdot(tg_tensor **out, tg_tensor *x, tg_tensor *y, int dim);

#ifdef __cplusplus
}
#endif

#endif
