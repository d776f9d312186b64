/* src/core/lapack_small.h - the plain loops behind src/core/lapack.c's
 * wrappers for small matrices (src/core/lapack_small.c). */
#ifndef TG_CORE_LAPACK_SMALL_H
#define TG_CORE_LAPACK_SMALL_H

#include "core/core.h"

/* The largest n (m and n for getrf_mn) for which the wrappers of
 * src/core/lapack.c run these plain loops instead of LAPACK, whose call
 * costs more than such a matrix's arithmetic (and takes OpenBLAS's lock).
 * tg__small_*: those loops, with the wrappers' arguments (getrs: trans
 * solves A X = B as tg__lapack_getrs_t, else tg__lapack_getrs_n). */
#define TG__LAPACK_SMALL_MAX 7
int tg__small_getrf(tg_dtype dt, int m, int n, void *a, int *ipiv);
void tg__small_getrs(tg_dtype dt, bool trans, int n, int nrhs, const void *lu, const int *ipiv,
                     void *b);
int tg__small_potrf_lower(tg_dtype dt, int n, void *a);
void tg__small_trsm_left(tg_dtype dt, bool upper, bool unit, int n, int nrhs, const void *a,
                         void *b);
void tg__small_geqrf(tg_dtype dt, int m, int n, void *a, void *tau);
void tg__small_orgqr(tg_dtype dt, int m, int n, int k, void *a, const void *tau);

#endif
