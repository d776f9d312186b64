/* src/dist/ddp_buffers.c - rank 0's module buffers to every rank at the
 * end of a step.
 *
 * Buffers (tg_ddp_new_module with broadcast_buffers): PyTorch's DDP copies
 * rank 0's buffers to every rank at the start of each forward, so each
 * forward starts from rank 0's running statistics while rank 0's own evolve
 * as in one process on its batches.  Here the copy closes tg_ddp_finish,
 * where every rank already is in a collective call; the buffers the next
 * forward starts from are the same, and the ranks agree after every step.
 * Rank 0 packs them into one buffer before the step's flags go out, and one
 * MPI_Bcast carries them (PyTorch coalesces them too). */
#include <string.h>

#include "dist/ddp_internal.h"

/* A walk over the module's buffers in state-dict order that packs them into
 * (pack) or unpacks them from (unpack) buf, or only counts their bytes.  The
 * buffers go to the other ranks in one message, as PyTorch's DDP broadcasts
 * them coalesced: a message per buffer would make each step wait on every
 * rank that many times. */
typedef struct buf_walk {
    unsigned char *buf;
    size_t off, cap;
    bool pack, unpack;
} buf_walk;

static int buf_fn(const char *name, tg_tensor *t, bool is_param, void *user)
{
    buf_walk *w = user;
    if (is_param) return TG_OK;
    const size_t nb = (size_t)tg_tensor_numel(t) * tg_dtype_size(tg_tensor_dtype(t));
    TG_CHECK(tg_tensor_is_contiguous(t) && nb <= w->cap - w->off, TG_EINVAL,
             "ddp_finish: the module's buffer %s is not the size or layout it had at "
             "tg_ddp_new_module", name);
    if (w->pack) memcpy(w->buf + w->off, tg_tensor_cdata(t), nb);
    if (w->unpack) {
        memcpy(tg_tensor_data(t), w->buf + w->off, nb);
        tg_tensor_bump_version(t);
    }
    w->off += nb;
    return TG_OK;
}

/* The room for m's buffers (none when they are not broadcast). */
int tg__ddp_plan_buffers(tg_ddp *ddp, const tg_module *m)
{
    if (!ddp->o.broadcast_buffers) return TG_OK;
    buf_walk w = {.cap = SIZE_MAX};
    TG_TRY(tg_module_foreach_state(m, buf_fn, &w));
    ddp->bufs_bytes = w.off;
    if (w.off == 0) return TG_OK;
    ddp->bufs = tg__malloc(w.off);
    return ddp->bufs ? TG_OK : TG_ENOMEM;
}

/* Before the step's flags go out: checks that the buffers kept their sizes
 * and, on rank 0, packs them. */
int tg__ddp_pack_buffers(tg_ddp *ddp)
{
    buf_walk w = {.buf = ddp->bufs, .cap = ddp->bufs_bytes, .pack = ddp->d->rank == 0};
    TG_TRY(tg_module_foreach_state(ddp->m, buf_fn, &w));
    TG_CHECK(w.off == ddp->bufs_bytes, TG_EINVAL,
             "ddp_finish: the module's buffers hold %zu bytes, not the %zu they held at "
             "tg_ddp_new_module", w.off, ddp->bufs_bytes);
    return TG_OK;
}

/* Rank 0's packed buffers to every rank, which unpacks them.  Collective. */
int tg__ddp_broadcast_buffers(tg_ddp *ddp)
{
    /* in pieces of at most 2^30 bytes: MPI counts are int */
    for (size_t off = 0; off < ddp->bufs_bytes;) {
        const size_t k = ddp->bufs_bytes - off < (size_t)1 << 30 ? ddp->bufs_bytes - off
                                                                  : (size_t)1 << 30;
        TG_TRY(tg__mpi_check(MPI_Bcast(ddp->bufs + off, (int)k, MPI_BYTE, 0, ddp->d->comm),
                             "ddp: broadcast of the buffers"));
        off += k;
    }
    if (ddp->d->rank == 0) return TG_OK;
    buf_walk w = {.buf = ddp->bufs, .cap = ddp->bufs_bytes, .unpack = true};
    return tg_module_foreach_state(ddp->m, buf_fn, &w);
}

