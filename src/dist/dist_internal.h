/* src/dist/dist_internal.h - the MPI context shared by the files of src/dist. */
#ifndef TG_DIST_INTERNAL_H
#define TG_DIST_INTERNAL_H

#include <mpi.h>

#include "core/core.h"
#include "tapegrad/dist.h"

struct tg_dist {
    MPI_Comm comm;       /* a duplicate: our messages never meet the program's */
    int rank, size;
};

/* TG_OK when an MPI call returned MPI_SUCCESS, else TG_EIO naming what. */
int tg__mpi_check(int mpi_rc, const char *what);

/* The MPI datatype of a float tensor dtype (f32, f64, i64), or
 * MPI_DATATYPE_NULL. */
MPI_Datatype tg__mpi_type(tg_dtype dt);

/* Agreement on a status and a layout in one MPI_Allreduce: every rank
 * passes its status and sig[0..n) (n <= 16), and every rank returns the
 * same result: the most negative status, with the message of the lowest
 * rank that had it prefixed "rank R: " (as tg_dist_agree); else TG_OK, with
 * *differs the first index where the ranks' sig differ, or -1.
 * Collective. */
int tg__dist_agree_sig(tg_dist *d, int status, int n, const int64_t *sig, int *differs);

/* A fingerprint of the dtype and shape of every state entry of m, in
 * state-dict order, to compare across ranks with tg__dist_agree_sig.
 * TG_EINVAL (fn: the caller's name) when an entry is not contiguous or a
 * dotted name is too long. */
int tg__dist_module_layout(const tg_module *m, int64_t *layout, const char *fn);

/* Rank 0's bytes of every state entry of m into every rank's, whose
 * layouts are known to agree.  Collective. */
int tg__dist_bcast_module(tg_dist *d, tg_module *m);

/* v[0..n) = its sum over the ranks, in place.  Collective. */
int tg__dist_sum_i64(tg_dist *d, int64_t *v, int n);

/* Copies root's bytes of the contiguous t into every rank's t, which must
 * have the same size (not checked: the caller knows the layouts agree).
 * Collective. */
int tg__dist_bcast_bytes(tg_dist *d, tg_tensor *t, int root);

/* sig[0..2 + TG_MAX_DIMS): t's dtype, ndim and shape (zeros past ndim;
 * all zeros for a NULL t), to compare across ranks with
 * tg__dist_agree_sig. */
void tg__dist_tensor_sig(int64_t *sig, const tg_tensor *t);

/* The MPI datatype that carries the elements of any dtype: its own type,
 * MPI_UINT16_T (the bit patterns) for f16 and bf16. */
MPI_Datatype tg__mpi_wire_type(tg_dtype dt);

/* Local checks of the tensor argument arg of fn (collectives.c): TG_EINVAL
 * for NULL, sparse, more than INT32_MAX elements, or (written) expanded. */
int tg__dist_check_tensor(const char *fn, const char *arg, const tg_tensor *t, bool written);

/* Staging through contiguous buffers (collectives.c).  tg__dist_stage_in:
 * *buf holds t's elements, a new reference to t itself when it is
 * contiguous, else a copy.  tg__dist_stage_out: *buf is contiguous with
 * t's shape and dtype to receive a result, t itself or a new tensor.
 * tg__dist_unstage: writes buf into t when it is a copy (else bumps t's
 * version) and releases buf. */
int tg__dist_stage_in(tg_tensor **buf, const tg_tensor *t);
int tg__dist_stage_out(tg_tensor **buf, tg_tensor *t);
int tg__dist_unstage(tg_tensor *t, tg_tensor *buf);

/* TG_OK when big is size blocks of small along dim 0 (small's shape with
 * dim 0 times size, or (size, *small's shape)) of small's dtype, else
 * TG_EDTYPE or TG_ESHAPE (no message). */
int tg__dist_blocks_of(const tg_tensor *big, const tg_tensor *small, int size);

/* Local checks of list[0..size) (argument arg of fn): tensors as
 * tg__dist_check_tensor's, each of t's dtype and shape. */
int tg__dist_check_list(const char *fn, const char *arg, tg_tensor *const *list, int size,
                        const tg_tensor *t, bool written);

/* For tests: the (n+1)-th all-reduce node of a SyncBatchNorm run by this
 * thread from now on (forward or backward) fails on this rank as if out of
 * memory; n < 0: none (the default).  Returns the previous countdown. */
int tg__sbn_fail_after(int n);

#endif
