/* src/core/lapack_lu.h - the LU solve with the transposed matrix
 * (src/core/lapack.c), for the backward of a solve that kept its forward's
 * factors (src/ops/linalg_lu.c).  Internal to tapegrad. */
#ifndef TAPEGRAD_CORE_LAPACK_LU_H
#define TAPEGRAD_CORE_LAPACK_LU_H

#include "core/core.h"

/* Solves A^T X = B for a row-major A factored by tg__lapack_getrf (whose
 * buffer holds the factors of A^T: getrs with trans 'N'), B column-major
 * (n rows, nrhs columns) in b, overwritten by X.  The companion of
 * tg__lapack_getrs_t (core.h), with its argument rules. */
void tg__lapack_getrs_n(tg_dtype dt, int n, int nrhs, const void *lu, const int *ipiv,
                        void *b);

#endif
