/* src/dist/gather.c - torch.distributed's rooted and point-to-point calls
 * on tensors: gather and scatter through a root, send and recv.
 *
 * gather and scatter are collective and agree on status, root and layout
 * before any data move (as collectives.c).  send and recv involve two
 * ranks only, so there is nothing to agree with: the sender first sends
 * its tensor's signature (dtype, ndim, shape: tg__dist_tensor_sig) under
 * the same tag, and the receiver compares it with its own tensor.  MPI
 * delivers the two messages of one sender and tag in order. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist_internal.h"

enum { SIG_N = 2 + TG_MAX_DIMS };

static int check_root(const char *fn, const tg_dist *d, int root)
{
    TG_CHECK(root >= 0 && root < d->size, TG_EINVAL, "%s: root=%d must be in [0, %d)", fn, root,
             d->size);
    return TG_OK;
}

/* Agreement on status, root and t's layout: sig = [root, dtype, ndim,
 * shape]. */
static int agree_rooted(tg_dist *d, int rc, const int64_t *sig, const char *fn)
{
    int differs = -1;
    TG_TRY(tg__dist_agree_sig(d, rc, 1 + SIG_N, sig, &differs));
    TG_CHECK(differs != 0, TG_EINVAL, "%s: the ranks passed different roots", fn);
    TG_CHECK(differs != 1, TG_EDTYPE, "%s: t's dtype differs between the ranks", fn);
    TG_CHECK(differs < 0, TG_ESHAPE, "%s: t's shape differs between the ranks", fn);
    return TG_OK;
}

/* A contiguous (size, *t's shape) tensor of t's dtype, for the root. */
static int stacked(tg_tensor **out, const tg_tensor *t, int size)
{
    int64_t shape[TG_MAX_DIMS + 1] = {size};
    memcpy(shape + 1, tg_tensor_shape(t), sizeof *shape * (size_t)tg_tensor_ndim(t));
    return tg_tensor_zeros(out, tg_tensor_dtype(t), tg_tensor_ndim(t) + 1, shape);
}

/* Block r of the stacked all (contiguous) into dst, in place. */
static int write_block(tg_tensor *dst, const tg_tensor *all, int r)
{
    const size_t bytes = (size_t)tg_tensor_numel(dst) * tg_dtype_size(tg_tensor_dtype(dst));
    const char *src = (const char *)tg_tensor_cdata(all) + bytes * (size_t)r;
    if (tg_tensor_is_contiguous(dst)) {
        memcpy(tg_tensor_data(dst), src, bytes);
        tg_tensor_bump_version(dst);
        return TG_OK;
    }
    tg_tensor *blk = NULL;
    TG_TRY(tg_tensor_from_data(&blk, tg_tensor_dtype(dst), tg_tensor_ndim(dst),
                               tg_tensor_shape(dst), src));
    const int rc = tg_tensor_copy_(dst, blk);
    tg_tensor_release(blk);
    return rc;
}

/* Block r of the stacked all (contiguous) = src's elements (any strides). */
static int read_block(tg_tensor *all, const tg_tensor *src, int r)
{
    tg_tensor *c = NULL;
    TG_TRY(tg__dist_stage_in(&c, src));
    const size_t bytes = (size_t)tg_tensor_numel(c) * tg_dtype_size(tg_tensor_dtype(c));
    memcpy((char *)tg_tensor_data(all) + bytes * (size_t)r, tg_tensor_cdata(c), bytes);
    tg_tensor_release(c);
    return TG_OK;
}

int tg_dist_gather(tg_dist *d, const tg_tensor *t, tg_tensor *const *gather_list, int root)
{
    static const char fn[] = "dist_gather";
    TG_CHECK(d != NULL, TG_EINVAL, "%s: d must not be NULL", fn);
    int64_t sig[1 + SIG_N] = {root};
    tg__dist_tensor_sig(sig + 1, t);
    tg_tensor *src = NULL, *all = NULL;
    int rc = check_root(fn, d, root);
    if (rc >= 0) rc = tg__dist_check_tensor(fn, "t", t, false);
    const bool me = rc >= 0 && d->rank == root;
    if (me) rc = tg__dist_check_list(fn, "gather_list", gather_list, d->size, t, true);
    if (rc >= 0) rc = tg__dist_stage_in(&src, t);
    if (rc >= 0 && me) rc = stacked(&all, t, d->size);
    rc = agree_rooted(d, rc, sig, fn);
    if (rc >= 0) {
        const MPI_Datatype w = tg__mpi_wire_type(tg_tensor_dtype(t));
        const int n = (int)tg_tensor_numel(t);
        rc = tg__mpi_check(MPI_Gather(tg_tensor_cdata(src), n, w, me ? tg_tensor_data(all) : NULL,
                                      n, w, root, d->comm), fn);
    }
    for (int r = 0; rc >= 0 && me && r < d->size; r++) rc = write_block(gather_list[r], all, r);
    tg_tensor_release(src);
    tg_tensor_release(all);
    return rc;
}

int tg_dist_scatter(tg_dist *d, tg_tensor *t, tg_tensor *const *scatter_list, int root)
{
    static const char fn[] = "dist_scatter";
    TG_CHECK(d != NULL, TG_EINVAL, "%s: d must not be NULL", fn);
    int64_t sig[1 + SIG_N] = {root};
    tg__dist_tensor_sig(sig + 1, t);
    tg_tensor *dst = NULL, *all = NULL;
    int rc = check_root(fn, d, root);
    if (rc >= 0) rc = tg__dist_check_tensor(fn, "t", t, true);
    const bool me = rc >= 0 && d->rank == root;
    if (me) rc = tg__dist_check_list(fn, "scatter_list", scatter_list, d->size, t, false);
    if (rc >= 0 && me) rc = stacked(&all, t, d->size);
    for (int r = 0; rc >= 0 && me && r < d->size; r++) rc = read_block(all, scatter_list[r], r);
    if (rc >= 0) rc = tg__dist_stage_out(&dst, t);
    rc = agree_rooted(d, rc, sig, fn);
    if (rc >= 0) {
        const MPI_Datatype w = tg__mpi_wire_type(tg_tensor_dtype(t));
        const int n = (int)tg_tensor_numel(t);
        rc = tg__mpi_check(MPI_Scatter(me ? tg_tensor_cdata(all) : NULL, n, w,
                                       tg_tensor_data(dst), n, w, root, d->comm), fn);
    }
    tg_tensor_release(all);
    if (rc >= 0) return tg__dist_unstage(t, dst);
    tg_tensor_release(dst);
    return rc;
}

/* ---- point to point ------------------------------------------------------- */

/* Local checks of send's dst / recv's src (peer) and of the tag. */
static int check_peer(const char *fn, const char *arg, const tg_dist *d, int peer, int tag)
{
    TG_CHECK(peer >= 0 && peer < d->size, TG_EINVAL, "%s: %s=%d must be in [0, %d)", fn, arg,
             peer, d->size);
    TG_CHECK(peer != d->rank, TG_EINVAL, "%s: %s=%d is this rank itself", fn, arg, peer);
    int *ub = NULL, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    const int max = flag && ub ? *ub : 32767;
    TG_CHECK(tag >= 0 && tag <= max, TG_EINVAL, "%s: tag=%d must be in [0, %d]", fn, tag, max);
    return TG_OK;
}

int tg_dist_send(tg_dist *d, const tg_tensor *t, int dst, int tag)
{
    static const char fn[] = "dist_send";
    TG_CHECK(d != NULL, TG_EINVAL, "%s: d must not be NULL", fn);
    TG_TRY(check_peer(fn, "dst", d, dst, tag));
    TG_TRY(tg__dist_check_tensor(fn, "t", t, false));
    tg_tensor *src = NULL;
    TG_TRY(tg__dist_stage_in(&src, t));
    int64_t sig[SIG_N];
    tg__dist_tensor_sig(sig, t);
    int rc = tg__mpi_check(MPI_Send(sig, SIG_N, MPI_INT64_T, dst, tag, d->comm), fn);
    if (rc >= 0)
        rc = tg__mpi_check(MPI_Send(tg_tensor_cdata(src), (int)tg_tensor_numel(src),
                                    tg__mpi_wire_type(tg_tensor_dtype(src)), dst, tag, d->comm),
                           fn);
    tg_tensor_release(src);
    return rc;
}

/* Receives and drops the next message from src with tag (the data of a
 * send whose signature recv refused). */
static int drain(tg_dist *d, int src, int tag, const char *fn)
{
    MPI_Status st;
    int bytes = 0;
    TG_TRY(tg__mpi_check(MPI_Probe(src, tag, d->comm, &st), fn));
    MPI_Get_count(&st, MPI_BYTE, &bytes);
    void *scratch = malloc(bytes > 0 ? (size_t)bytes : 1);
    TG_CHECK(scratch != NULL, TG_ENOMEM, "%s: no memory for a refused message of %d bytes", fn,
             bytes);
    const int rc = tg__mpi_check(MPI_Recv(scratch, bytes, MPI_BYTE, src, tag, d->comm,
                                          MPI_STATUS_IGNORE), fn);
    free(scratch);
    return rc;
}

int tg_dist_recv(tg_dist *d, tg_tensor *t, int src, int tag)
{
    static const char fn[] = "dist_recv";
    TG_CHECK(d != NULL, TG_EINVAL, "%s: d must not be NULL", fn);
    TG_TRY(check_peer(fn, "src", d, src, tag));
    TG_TRY(tg__dist_check_tensor(fn, "t", t, true));
    tg_tensor *dst = NULL;
    TG_TRY(tg__dist_stage_out(&dst, t));
    int64_t sig[SIG_N], mine[SIG_N];
    tg__dist_tensor_sig(mine, t);
    int rc = tg__mpi_check(MPI_Recv(sig, SIG_N, MPI_INT64_T, src, tag, d->comm,
                                    MPI_STATUS_IGNORE), fn);
    if (rc >= 0 && memcmp(sig, mine, sizeof sig) != 0) {
        const bool dtype = sig[0] != mine[0];
        rc = drain(d, src, tag, fn);
        if (rc >= 0 && dtype)
            rc = tg__error(TG_EDTYPE, "%s: rank %d sent %s; t is %s", fn, src,
                           sig[0] >= 0 && sig[0] < TG_DTYPE_COUNT ? tg_dtype_name((tg_dtype)sig[0])
                                                                   : "?",
                           tg_dtype_name(tg_tensor_dtype(t)));
        else if (rc >= 0)
            rc = tg__error(TG_ESHAPE, "%s: rank %d sent a tensor of another shape than t's", fn,
                           src);
    } else if (rc >= 0) {
        rc = tg__mpi_check(MPI_Recv(tg_tensor_data(dst), (int)tg_tensor_numel(dst),
                                    tg__mpi_wire_type(tg_tensor_dtype(dst)), src, tag, d->comm,
                                    MPI_STATUS_IGNORE), fn);
    }
    if (rc >= 0) return tg__dist_unstage(t, dst);
    tg_tensor_release(dst);
    return rc;
}
