/* src/dist/ddp.c - gradient averaging in buckets, overlapped with backward.
 *
 * Layout (as PyTorch's DDP reducer): the parameters, taken in reverse order,
 * are packed into buckets of one dtype and at most bucket_cap_bytes each
 * (a parameter larger than the cap is a bucket alone).  Reverse order is
 * roughly the order in which backward finishes the gradients, so the first
 * bucket is complete first.  Each bucket owns one contiguous buffer; slot s
 * of parameter p occupies buf[offset, offset + numel(p)).
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
 * backward reached (the others keep theirs).
 *
 * Errors: every rank makes the same collective calls in a step whatever
 * happens on it, and learns of a failure anywhere from the last flag.  A
 * rank that fails (no tg_ddp_prepare, no memory for a new .grad, or
 * tg_ddp_cancel / tg_ddp_free in the middle of the step) still starts
 * every bucket, with zeros, and raises the flag; then every rank returns
 * that rank's error (tg_dist_agree) and none writes a .grad.  Whatever can
 * fail is done before the flags go out.  Construction agrees the same way
 * on its checks and on all that fixes the sequence of collective calls: the
 * parameters' layout, the bucket cap, broadcast_buffers.
 *
 * Buffers (tg_ddp_new_module with broadcast_buffers): PyTorch's DDP copies
 * rank 0's buffers to every rank at the start of each forward, so each
 * forward starts from rank 0's running statistics while rank 0's own evolve
 * as in one process on its batches.  Here the copy closes tg_ddp_finish,
 * where every rank already is in a collective call; the buffers the next
 * forward starts from are the same, and the ranks agree after every step.
 * Rank 0 packs them into one buffer before the step's flags go out, and one
 * MPI_Bcast carries them (PyTorch coalesces them too).
 *
 * Every rank sums the same per-element values with the same MPI reduction
 * whatever the bucket layout, so the result does not depend on
 * bucket_cap_bytes or overlap for two ranks (a + b = b + a exactly); with
 * more ranks Open MPI may pick another summation order for another message
 * size. */
#include <string.h>

#include "dist/dist_internal.h"

typedef struct ddp_slot {
    tg_ddp *ddp;           /* back pointer for the hook */
    tg_tensor *p;          /* retained */
    int bucket;
    int64_t offset, numel; /* in elements of the bucket's buffer */
    bool ready;            /* copied into the bucket this step */
    tg_tensor *fresh;      /* owned: the .grad finish sets when the present one
                            * cannot take the result in place; NULL: none */
} ddp_slot;

typedef struct ddp_bucket {
    tg_dtype dt;
    MPI_Datatype mt;
    int64_t numel;
    size_t bytes;
    void *buf;             /* (numel) owned */
    int n_slots, n_ready;
    MPI_Request req;
    bool started, done;
} ddp_bucket;

struct tg_ddp {
    tg_dist *d;            /* borrowed */
    tg_module *m;          /* retained; NULL: made from a parameter list */
    tg_ddp_opts o;
    int n;
    ddp_slot *slots;       /* (n) in the caller's parameter order */
    int n_buckets;
    ddp_bucket *buckets;
    int next_start;        /* buckets [0, next_start) have been started */
    int next_test;         /* buckets [0, next_test) are known to be done */
    int *used;             /* (n + 1) used[i]: 1 where this step's backward
                            * reached parameter i (its hook ran); used[n]: 1
                            * when the step failed on this rank.  After
                            * finish's all-reduce, the number of ranks where
                            * it did, and where it failed. */
    MPI_Request used_req;
    unsigned char *bufs;   /* (bufs_bytes) owned: the module's buffers, packed
                            * for one broadcast (with broadcast_buffers) */
    size_t bufs_bytes;
    bool armed;
    tg_ddp_stats stats;
};

/* ---- construction ---------------------------------------------------------- */

static int check_params(int n, tg_tensor *const *params)
{
    for (int i = 0; i < n; i++) {
        const tg_tensor *p = params[i];
        TG_CHECK(p != NULL, TG_EINVAL, "ddp_new: params[%d] must not be NULL", i);
        TG_CHECK(tg_tensor_is_leaf(p) && tg_tensor_requires_grad(p), TG_EINVAL,
                 "ddp_new: params[%d] must be a leaf that requires grad", i);
        TG_CHECK(tg_tensor_dtype(p) == TG_F32 || tg_tensor_dtype(p) == TG_F64, TG_EDTYPE,
                 "ddp_new: params[%d] is %s; f32 and f64 parameters only (keep f32 master "
                 "weights under autocast)", i, tg_dtype_name(tg_tensor_dtype(p)));
        TG_CHECK(tg_tensor_numel(p) <= INT32_MAX, TG_EINVAL,
                 "ddp_new: params[%d] has %lld elements; at most 2^31 - 1", i,
                 (long long)tg_tensor_numel(p));
        for (int j = 0; j < i; j++)
            TG_CHECK(params[j] != p, TG_EINVAL, "ddp_new: params[%d] repeats params[%d]", i, j);
    }
    return TG_OK;
}

/* Assigns slots to buckets, last parameter first; one open bucket per dtype. */
static int plan_buckets(tg_ddp *ddp)
{
    ddp->buckets = tg__calloc((size_t)ddp->n, sizeof *ddp->buckets);
    if (!ddp->buckets) return TG_ENOMEM;
    int open[2] = {-1, -1};   /* f32, f64 */
    for (int i = ddp->n - 1; i >= 0; i--) {
        ddp_slot *s = &ddp->slots[i];
        tg_dtype dt = tg_tensor_dtype(s->p);
        size_t bytes = (size_t)s->numel * tg_dtype_size(dt);
        int *o = &open[dt == TG_F64];
        ddp_bucket *b = *o >= 0 ? &ddp->buckets[*o] : NULL;
        if (!b || b->bytes + bytes > ddp->o.bucket_cap_bytes ||
            b->numel + s->numel > INT32_MAX) {
            *o = ddp->n_buckets++;
            b = &ddp->buckets[*o];
            *b = (ddp_bucket){.dt = dt, .mt = tg__mpi_type(dt), .req = MPI_REQUEST_NULL};
        }
        s->bucket = *o;
        s->offset = b->numel;
        b->numel += s->numel;
        b->bytes += bytes;
        b->n_slots++;
    }
    for (int k = 0; k < ddp->n_buckets; k++) {
        ddp->buckets[k].buf = tg__malloc(ddp->buckets[k].bytes);
        if (!ddp->buckets[k].buf) return TG_ENOMEM;
        ddp->stats.bytes_per_step += (int64_t)ddp->buckets[k].bytes;
    }
    ddp->stats.n_buckets = ddp->n_buckets;
    return TG_OK;
}

/* A fingerprint of the parameter list, compared across ranks. */
static int64_t params_hash(int n, tg_tensor *const *params)
{
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h = (h ^ (uint64_t)tg_tensor_dtype(params[i])) * 0x100000001b3ull;
        for (int k = 0; k < tg_tensor_ndim(params[i]); k++)
            h = (h ^ (uint64_t)tg_tensor_shape(params[i])[k]) * 0x100000001b3ull;
        h = (h ^ 0xff) * 0x100000001b3ull;
    }
    return (int64_t)h;
}

static int ddp_hook(tg_tensor *leaf, void *user);

static int ddp_build(tg_ddp *ddp, int n, tg_tensor *const *params)
{
    ddp->slots = tg__calloc((size_t)n, sizeof *ddp->slots);
    ddp->used = tg__calloc((size_t)n + 1, sizeof *ddp->used);
    ddp->used_req = MPI_REQUEST_NULL;
    if (!ddp->slots || !ddp->used) return TG_ENOMEM;
    for (int i = 0; i < n; i++) {
        ddp->slots[i] = (ddp_slot){.ddp = ddp, .p = tg_tensor_retain(params[i]),
                                   .numel = tg_tensor_numel(params[i])};
        ddp->n = i + 1;
    }
    TG_TRY(plan_buckets(ddp));
    for (int i = 0; i < n; i++) {
        int rc = tg_tensor_register_post_accumulate_hook(params[i], ddp_hook, &ddp->slots[i]);
        if (rc < 0) {
            for (int j = 0; j < i; j++)
                tg_tensor_remove_post_accumulate_hook(params[j], ddp_hook, &ddp->slots[j]);
            return rc;
        }
    }
    return TG_OK;
}

static void ddp_destroy(tg_ddp *ddp, bool hooks)
{
    for (int i = 0; i < ddp->n; i++) {
        if (hooks) tg_tensor_remove_post_accumulate_hook(ddp->slots[i].p, ddp_hook, &ddp->slots[i]);
        tg_tensor_release(ddp->slots[i].p);
        tg_tensor_release(ddp->slots[i].fresh);
    }
    for (int k = 0; k < ddp->n_buckets; k++) free(ddp->buckets[k].buf);
    free(ddp->buckets);
    free(ddp->slots);
    free(ddp->used);
    free(ddp->bufs);
    tg_module_release(ddp->m);
    free(ddp);
}

/* This rank's tg_ddp, checked and built without sending a message. */
static int ddp_local(tg_ddp **out, tg_dist *d, int n, tg_tensor *const *params,
                     const tg_ddp_opts *o, const char *fn)
{
    TG_CHECK(o->bucket_cap_bytes >= 1, TG_EINVAL, "%s: bucket_cap_bytes must be >= 1", fn);
    TG_TRY(check_params(n, params));
    tg_ddp *ddp = tg__calloc(1, sizeof *ddp);
    if (!ddp) return TG_ENOMEM;
    ddp->d = d;
    ddp->o = *o;
    int rc = ddp_build(ddp, n, params);
    if (rc < 0) {
        ddp_destroy(ddp, false);
        return rc;
    }
    *out = ddp;
    return TG_OK;
}

/* ---- the module's buffers -------------------------------------------------- */

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
static int plan_buffers(tg_ddp *ddp, const tg_module *m)
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
static int pack_buffers(tg_ddp *ddp)
{
    buf_walk w = {.buf = ddp->bufs, .cap = ddp->bufs_bytes, .pack = ddp->d->rank == 0};
    TG_TRY(tg_module_foreach_state(ddp->m, buf_fn, &w));
    TG_CHECK(w.off == ddp->bufs_bytes, TG_EINVAL,
             "ddp_finish: the module's buffers hold %zu bytes, not the %zu they held at "
             "tg_ddp_new_module", w.off, ddp->bufs_bytes);
    return TG_OK;
}

/* Rank 0's packed buffers to every rank, which unpacks them.  Collective. */
static int broadcast_buffers(tg_ddp *ddp)
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

/* Makes the tg_ddp on every rank or on none, and then (m not NULL) copies
 * rank 0's state of m into every rank: this rank's checks and allocations
 * first, then one agreement on their status and on what decides the
 * sequence of collective calls each step makes: the parameters' layout,
 * the bucket cap, and with a module its layout and broadcast_buffers.  rc:
 * the caller's own checks. */
static int ddp_create(tg_ddp **out, tg_dist *d, tg_module *m, int n, tg_tensor *const *params,
                      const tg_ddp_opts *o, int rc)
{
    static const tg_ddp_opts defaults = TG_DDP_OPTS_INIT;
    const char *fn = m ? "ddp_new_module" : "ddp_new";
    if (!o) o = &defaults;
    tg_ddp *ddp = NULL;
    /* what the ranks must agree on, the module's layout first */
    int64_t sig[4] = {0, 0, o->bucket_cap_bytes > INT64_MAX ? INT64_MAX : (int64_t)o->bucket_cap_bytes,
                      m && o->broadcast_buffers};
    static const char *const what[4] = {
        "the ranks' modules differ in their state entries, shapes or dtypes",
        "the ranks' parameters differ in number, order, shape or dtype",
        "bucket_cap_bytes differs between the ranks (their buckets would not match)",
        "broadcast_buffers differs between the ranks"};
    if (rc >= 0 && !out) rc = tg__error(TG_EINVAL, "%s: out must not be NULL", fn);
    if (rc >= 0 && m) rc = tg__dist_module_layout(m, &sig[0], fn);
    if (rc >= 0) rc = ddp_local(&ddp, d, n, params, o, fn);
    if (rc >= 0 && m) rc = plan_buffers(ddp, m);
    if (rc >= 0) sig[1] = params_hash(n, params);
    int differs = -1;
    rc = tg__dist_agree_sig(d, rc, 4, sig, &differs);
    if (rc >= 0 && differs >= 0)
        rc = tg__error(differs == 0 ? TG_ESHAPE : TG_EINVAL, "%s: %s", fn, what[differs]);
    if (rc >= 0 && m) rc = tg__dist_bcast_module(d, m);
    if (rc < 0) {
        if (ddp) ddp_destroy(ddp, true);
        return rc;
    }
    ddp->m = tg_module_retain(m);
    *out = ddp;
    return TG_OK;
}

int tg_ddp_new(tg_ddp **out, tg_dist *d, int n, tg_tensor *const *params, const tg_ddp_opts *o)
{
    TG_CHECK(d != NULL, TG_EINVAL, "ddp_new: d must not be NULL");
    int rc = n >= 1 && params != NULL
                 ? TG_OK
                 : tg__error(TG_EINVAL, "ddp_new: n=%d must be >= 1 with params not NULL", n);
    return ddp_create(out, d, NULL, n, params, o, rc);
}

int tg_ddp_new_module(tg_ddp **out, tg_dist *d, tg_module *m, const tg_ddp_opts *o)
{
    TG_CHECK(d != NULL, TG_EINVAL, "ddp_new_module: d must not be NULL");
    /* the parameters that require grad, in state-dict order (torch's DDP
     * leaves the others out of the reduction) */
    tg_tensor **all = NULL;
    int n_all = 0, n = 0;
    int rc = m ? tg_module_parameters(m, &all, &n_all)
               : tg__error(TG_EINVAL, "ddp_new_module: m must not be NULL");
    for (int i = 0; rc >= 0 && i < n_all; i++)
        if (tg_tensor_requires_grad(all[i])) all[n++] = all[i];
    if (rc >= 0 && n == 0)
        rc = tg__error(TG_EINVAL, "ddp_new_module: m has no parameter that requires grad");
    rc = ddp_create(out, d, m, n, all, o, rc);
    free(all);
    return rc;
}

/* ---- a step ---------------------------------------------------------------- */

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
    const size_t es = tg_dtype_size(b->dt);
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

/* Copies p's .grad (zeros without one) into its slot; on error the slot is
 * left unfilled. */
static int copy_in(tg_ddp *ddp, ddp_slot *s)
{
    TG_TRY(check_slot(ddp, s, "ddp"));
    ddp_bucket *b = &ddp->buckets[s->bucket];
    size_t es = tg_dtype_size(b->dt);
    unsigned char *dst = (unsigned char *)b->buf + (size_t)s->offset * es;
    tg_tensor *g = tg_tensor_grad(s->p), *c = NULL;
    if (!g) {
        zero_in(ddp, s);
        return TG_OK;
    }
    if (tg_tensor_is_contiguous(g)) {
        memcpy(dst, tg_tensor_cdata(g), (size_t)s->numel * es);
    } else {
        TG_TRY(tg_tensor_contiguous(&c, g));
        memcpy(dst, tg_tensor_cdata(c), (size_t)s->numel * es);
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
        TG_TRY(tg__mpi_check(MPI_Iallreduce(MPI_IN_PLACE, b->buf, (int)b->numel, b->mt, MPI_SUM,
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

static int ddp_hook(tg_tensor *leaf, void *user)
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
    if (*rc >= 0 && ddp->bufs_bytes > 0) *rc = pack_buffers(ddp);
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

/* .grad of s's parameter = its slot / size: in place, or in the fresh
 * tensor made for it. */
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
    if (b->dt == TG_F32) {
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
    return ddp->bufs_bytes > 0 ? broadcast_buffers(ddp) : TG_OK;
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

void tg_ddp_free(tg_ddp *ddp)
{
    if (!ddp) return;
    if (ddp->armed) {
        /* A step in progress: end it as a cancelled one, so that the other
         * ranks' tg_ddp_finish (or free) of it returns rather than waits.
         * The caller's error message is kept. */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", tg_error_message());
        tg_ddp_cancel(ddp, tg__error(TG_EINVAL, "ddp_free: the tg_ddp was freed between "
                                                "tg_ddp_prepare and tg_ddp_finish"));
        tg__error(TG_EINVAL, "%s", msg);
    }
    ddp_destroy(ddp, true);
}

int tg_ddp_get_stats(const tg_ddp *ddp, tg_ddp_stats *s)
{
    TG_CHECK(ddp != NULL && s != NULL, TG_EINVAL, "ddp_get_stats: ddp and s must not be NULL");
    *s = ddp->stats;
    return TG_OK;
}
