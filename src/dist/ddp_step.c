/* src/dist/ddp_step.c - a step of a tg_ddp: the hooks that start the
 * buckets' all-reduces while backward runs, and tg_ddp_finish.
 *
 * A step: tg_ddp_prepare arms the hooks.  When backward finishes parameter
 * p's gradient, its post-accumulate hook copies .grad into the slot and, if
 * that completes buckets [next_start, ...) in order, starts their
 * MPI_Iallreduce (sum, in place), then calls MPI_Test on the oldest bucket
 * still in flight, which drives MPI's progress engine (Open MPI has no
 * progress thread for non-blocking collectives: they advance inside MPI
 * calls).  Starting strictly in bucket order keeps the sequence of
 * collectives the same on every rank whatever the order in which hooks run
 * there.  tg_ddp_finish fills the slots the backward did not reach, starts
 * what remains and, last, the all-reduce of the per-parameter flags "the
 * backward reached it here" and of one more, "the step failed here", waits,
 * and writes buf / size into the .grad of each parameter some rank's
 * backward reached (the others keep theirs).  With compression (bf16 or
 * f16 buckets, ddp_compress.c) the hook divides by size as it rounds the
 * gradient into the bucket, and finish widens the sum.
 *
 * Errors: every rank makes the same collective calls in a step whatever
 * happens on it, and learns of a failure anywhere from the last flag.  A
 * rank that fails (no tg_ddp_prepare, no memory for a new .grad, or
 * tg_ddp_cancel / tg_ddp_free in the middle of the step) still starts
 * every bucket, with zeros, and raises the flag; then every rank returns
 * that rank's error (tg_dist_agree) and none writes a .grad.  Whatever can
 * fail is done before the flags go out.  Construction agrees the same way
 * on its checks and on all that fixes the sequence of collective calls: the
 * parameters' layout, the bucket cap, broadcast_buffers. */
#include <string.h>

#include "dist/ddp_internal.h"
#include "tapegrad/sparse.h"

static void reset_step(tg_ddp *ddp)
{
    for (int i = 0; i < ddp->n; i++) {
        ddp->slots[i].ready = false;
        ddp->used[i] = 0;
        tg_tensor_release(ddp->slots[i].fresh);
        ddp->slots[i].fresh = NULL;
    }
    ddp->used[ddp->n] = 0;
    ddp->used_req = MPI_REQUEST_NULL;
    for (int k = 0; k < ddp->n_buckets; k++) {
        ddp_bucket *b = &ddp->buckets[k];
        b->n_ready = 0;
        b->started = b->done = false;
        b->req = MPI_REQUEST_NULL;
    }
    ddp->next_start = ddp->next_test = 0;
    ddp->armed = false;
}

int tg_ddp_prepare(tg_ddp *ddp)
{
    TG_CHECK(ddp != NULL, TG_EINVAL, "ddp_prepare: ddp must not be NULL");
    TG_CHECK(!ddp->armed, TG_EINVAL,
             "ddp_prepare: the previous tg_ddp_prepare has not been finished (tg_ddp_finish)");
    ddp->armed = true;
    return TG_OK;
}

/* Marks s's slot filled, with zeros: for a parameter without .grad, and for
 * every slot of a step that failed on this rank (whose values no rank
 * uses). */
static void zero_in(tg_ddp *ddp, ddp_slot *s)
{
    ddp_bucket *b = &ddp->buckets[s->bucket];
    const size_t es = tg_dtype_size(b->wire);   /* 0x0000 is +0 in bf16 and f16 too */
    memset((unsigned char *)b->buf + (size_t)s->offset * es, 0, (size_t)s->numel * es);
    s->ready = true;
    b->n_ready++;
}

/* Whether s's parameter still has the dtype and size its slot was planned
 * for (TG_EINVAL naming it otherwise). */
static int check_slot(const tg_ddp *ddp, const ddp_slot *s, const char *fn)
{
    TG_CHECK(tg_tensor_dtype(s->p) == ddp->buckets[s->bucket].dt &&
             tg_tensor_numel(s->p) == s->numel, TG_EINVAL,
             "%s: parameter %d is now %s of %lld elements; a tg_ddp's parameters must keep "
             "their dtype and shape", fn, (int)(s - ddp->slots),
             tg_dtype_name(tg_tensor_dtype(s->p)), (long long)tg_tensor_numel(s->p));
    return TG_OK;
}

/* The contiguous values of g into s's slot: copied, or with compression
 * divided by the number of ranks and rounded to the half (ddp_compress.c). */
static void fill_slot(tg_ddp *ddp, const ddp_slot *s, const void *g)
{
    ddp_bucket *b = &ddp->buckets[s->bucket];
    unsigned char *dst = (unsigned char *)b->buf + (size_t)s->offset * tg_dtype_size(b->wire);
    if (b->wire == b->dt)
        memcpy(dst, g, (size_t)s->numel * tg_dtype_size(b->dt));
    else
        tg__ddp_compress(b->wire, b->dt, g, ddp->d->size, (uint16_t *)(void *)dst, s->numel);
}

/* Copies p's .grad (zeros without one) into its slot; on error the slot is
 * left unfilled. */
static int copy_in(tg_ddp *ddp, ddp_slot *s)
{
    TG_TRY(check_slot(ddp, s, "ddp"));
    ddp_bucket *b = &ddp->buckets[s->bucket];
    tg_tensor *g = tg_tensor_grad(s->p), *c = NULL;
    if (!g) {
        zero_in(ddp, s);
        return TG_OK;
    }
    TG_CHECK(!tg_tensor_is_sparse(g), TG_EUNSUPPORTED,
             "ddp: a parameter's gradient is sparse (an Embedding with sparse=true); DDP "
             "averages dense gradients only");
    if (tg_tensor_is_contiguous(g)) {
        fill_slot(ddp, s, tg_tensor_cdata(g));
    } else {
        TG_TRY(tg_tensor_contiguous(&c, g));
        fill_slot(ddp, s, tg_tensor_cdata(c));
        tg_tensor_release(c);
    }
    s->ready = true;
    b->n_ready++;
    return TG_OK;
}

/* Starts every complete bucket that follows the started ones, in order. */
static int start_ready(tg_ddp *ddp)
{
    for (; ddp->next_start < ddp->n_buckets; ddp->next_start++) {
        ddp_bucket *b = &ddp->buckets[ddp->next_start];
        if (b->n_ready < b->n_slots) break;
        TG_TRY(tg__mpi_check(MPI_Iallreduce(MPI_IN_PLACE, b->buf, (int)b->numel, b->mt, b->op,
                                            ddp->d->comm, &b->req),
                             "ddp: MPI_Iallreduce"));
        b->started = true;
    }
    return TG_OK;
}

/* Lets MPI advance the reductions in flight; marks the finished ones. */
static int progress(tg_ddp *ddp)
{
    for (; ddp->next_test < ddp->next_start; ddp->next_test++) {
        ddp_bucket *b = &ddp->buckets[ddp->next_test];
        int flag = 0;
        TG_TRY(tg__mpi_check(MPI_Test(&b->req, &flag, MPI_STATUS_IGNORE), "ddp: MPI_Test"));
        if (!flag) break;
        b->done = true;
    }
    return TG_OK;
}

int tg__ddp_hook(tg_tensor *leaf, void *user)
{
    ddp_slot *s = user;
    tg_ddp *ddp = s->ddp;
    (void)leaf;
    if (!ddp->armed) return TG_OK;
    TG_CHECK(!s->ready, TG_EGRAD,
             "ddp: a parameter's gradient was finished twice after one tg_ddp_prepare (a "
             "second backward needs tg_ddp_finish and tg_ddp_prepare first)");
    TG_TRY(copy_in(ddp, s));
    ddp->used[s - ddp->slots] = 1;
    if (!ddp->o.overlap) return TG_OK;
    TG_TRY(start_ready(ddp));
    return progress(ddp);
}

/* The new .grad tensors finish will set, made before the flags go out so
 * that a failure here is one of the step's failures every rank learns of:
 * one for each parameter whose .grad cannot take the result in place (none,
 * not contiguous, itself requiring grad, or of another dtype). */
static int make_fresh_grads(tg_ddp *ddp)
{
    for (int i = 0; i < ddp->n; i++) {
        ddp_slot *s = &ddp->slots[i];
        const tg_tensor *g = tg_tensor_grad(s->p);
        if (g && tg_tensor_is_contiguous(g) && !tg_tensor_requires_grad(g) &&
            tg_tensor_dtype(g) == ddp->buckets[s->bucket].dt)
            continue;
        TG_TRY(tg_tensor_zeros_like(&s->fresh, s->p));
    }
    return TG_OK;
}

/* The rest of the step's collective calls, the same on every rank whatever
 * happened on this one (*rc: this rank's status so far, updated): the
 * buckets not started yet, in order, with the slots the backward did not
 * reach filled (their .grad, or zeros; all zeros once this rank has
 * failed); then the all-reduce of used[0..n] (per parameter "the backward
 * reached it", and "the step failed here"); then it waits for all of them.
 * Returns an MPI error (TG_EIO), after which the ranks cannot go on. */
static int complete_step(tg_ddp *ddp, int *rc)
{
    for (int i = 0; i < ddp->n; i++) {
        ddp_slot *s = &ddp->slots[i];
        if (!s->ready && *rc >= 0) *rc = copy_in(ddp, s);
        if (!s->ready) zero_in(ddp, s);
    }
    TG_TRY(start_ready(ddp));
    TG_ASSERT(ddp->next_start == ddp->n_buckets);
    if (*rc >= 0) *rc = make_fresh_grads(ddp);
    if (*rc >= 0 && ddp->bufs_bytes > 0) *rc = tg__ddp_pack_buffers(ddp);
    ddp->used[ddp->n] = *rc < 0;
    /* after the buckets, in the same order on every rank */
    TG_TRY(tg__mpi_check(MPI_Iallreduce(MPI_IN_PLACE, ddp->used, ddp->n + 1, MPI_INT, MPI_SUM,
                                        ddp->d->comm, &ddp->used_req),
                         "ddp: MPI_Iallreduce"));
    for (int k = ddp->next_test; k < ddp->n_buckets; k++) {
        TG_TRY(tg__mpi_check(MPI_Wait(&ddp->buckets[k].req, MPI_STATUS_IGNORE), "ddp: MPI_Wait"));
        ddp->buckets[k].done = true;
    }
    return tg__mpi_check(MPI_Wait(&ddp->used_req, MPI_STATUS_IGNORE), "ddp: MPI_Wait");
}

/* .grad of s's parameter = its slot / size (with compression: its slot,
 * widened, which the ranks divided before the sum): in place, or in the
 * fresh tensor made for it. */
static void copy_out(tg_ddp *ddp, ddp_slot *s)
{
    ddp_bucket *b = &ddp->buckets[s->bucket];
    if (s->fresh) {
        /* cannot fail: zeros_like of the parameter, whose shape and dtype
         * check_slot saw */
        tg_tensor_set_grad(s->p, s->fresh);
        s->fresh = NULL;
    }
    tg_tensor *g = tg_tensor_grad(s->p);
    if (b->wire != b->dt) {
        tg__ddp_decompress(b->wire, b->dt, (const uint16_t *)b->buf + s->offset,
                           tg_tensor_data(g), s->numel);
    } else if (b->dt == TG_F32) {
        const float *src = (const float *)b->buf + s->offset, size = (float)ddp->d->size;
        float *dst = tg_tensor_data(g);
        for (int64_t i = 0; i < s->numel; i++) dst[i] = src[i] / size;
    } else {
        const double *src = (const double *)b->buf + s->offset, size = ddp->d->size;
        double *dst = tg_tensor_data(g);
        for (int64_t i = 0; i < s->numel; i++) dst[i] = src[i] / size;
    }
    tg_tensor_bump_version(g);
}

/* Ends the step on every rank alike.  rc: this rank's status so far; when
 * the step failed on any rank, every rank returns that rank's error (the
 * lowest rank's of the most negative status) and no .grad changes. */
static int end_step(tg_ddp *ddp, int rc)
{
    if (ddp->armed) ddp->stats.buckets_overlapped += ddp->next_start;
    int mrc = complete_step(ddp, &rc);
    if (mrc < 0) {
        /* a request that MPI_Wait did not see complete is still MPI's */
        for (int k = 0; k < ddp->next_start; k++)
            if (!ddp->buckets[k].done) MPI_Wait(&ddp->buckets[k].req, MPI_STATUS_IGNORE);
        if (ddp->used_req != MPI_REQUEST_NULL) MPI_Wait(&ddp->used_req, MPI_STATUS_IGNORE);
        return mrc;
    }
    if (ddp->used[ddp->n] > 0) return tg_dist_agree(ddp->d, rc);
    /* a parameter no rank's backward reached keeps its .grad (NULL stays
     * NULL, so the optimizer skips it), as PyTorch's reducer leaves a
     * globally unused parameter's; one that some ranks reached averages
     * with what the others hold (their .grad, or zeros) */
    for (int i = 0; i < ddp->n; i++)
        if (ddp->used[i] > 0) copy_out(ddp, &ddp->slots[i]);
    return ddp->bufs_bytes > 0 ? tg__ddp_broadcast_buffers(ddp) : TG_OK;
}

int tg_ddp_finish(tg_ddp *ddp)
{
    TG_CHECK(ddp != NULL, TG_EINVAL, "ddp_finish: ddp must not be NULL");
    int rc = ddp->armed ? TG_OK
                        : tg__error(TG_EINVAL, "ddp_finish: no tg_ddp_prepare before this backward");
    double t0 = MPI_Wtime();
    rc = end_step(ddp, rc);
    reset_step(ddp);
    ddp->stats.finish_seconds += MPI_Wtime() - t0;
    if (rc >= 0) ddp->stats.steps++;
    return rc;
}

int tg_ddp_cancel(tg_ddp *ddp, int status)
{
    TG_CHECK(ddp != NULL, TG_EINVAL, "ddp_cancel: ddp must not be NULL");
    if (status >= 0)
        status = tg__error(TG_EINVAL, "ddp_cancel: status=%d must be a negative tg_status", status);
    int rc = end_step(ddp, status);
    reset_step(ddp);
    return rc;
}

