/* src/dist/ddp.c - gradient averaging in buckets, overlapped with backward:
 * the tg_ddp made, agreed between the ranks, and freed.
 *
 * Layout (as PyTorch's DDP reducer): the parameters, taken in reverse order,
 * are packed into buckets of one dtype and at most bucket_cap_bytes each
 * (a parameter larger than the cap is a bucket alone).  Reverse order is
 * roughly the order in which backward finishes the gradients, so the first
 * bucket is complete first.  Each bucket owns one contiguous buffer; slot s
 * of parameter p occupies buf[offset, offset + numel(p)).
 *
 * A step (ddp_step.c): tg_ddp_prepare arms the hooks, which start the
 * buckets' all-reduces as backward completes them; tg_ddp_finish waits and
 * writes the averaged gradients.  The module's buffers: ddp_buffers.c.
 * Buckets sent in bf16 or f16 (opts.compress): ddp_compress.c.
 *
 * Every rank sums the same per-element values with the same MPI reduction
 * whatever the bucket layout, so the result does not depend on
 * bucket_cap_bytes or overlap for two ranks (a + b = b + a exactly); with
 * more ranks Open MPI may pick another summation order for another message
 * size. */
#include <string.h>

#include "dist/ddp_internal.h"

/* ---- construction ---------------------------------------------------------- */

/* The parameters' checks (f32 and f64, compressed or not). */
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
            *b = (ddp_bucket){.dt = dt, .wire = dt, .mt = tg__mpi_type(dt), .op = MPI_SUM,
                              .req = MPI_REQUEST_NULL};
            if (ddp->o.compress != TG_F32)
                b->wire = ddp->o.compress, b->mt = ddp->half_type, b->op = ddp->half_sum;
        }
        s->bucket = *o;
        s->offset = b->numel;
        b->numel += s->numel;
        b->bytes += bytes;
        b->n_slots++;
    }
    for (int k = 0; k < ddp->n_buckets; k++) {
        ddp_bucket *b = &ddp->buckets[k];
        const size_t wire_bytes = (size_t)b->numel * tg_dtype_size(b->wire);
        b->buf = tg__malloc(wire_bytes);
        if (!b->buf) return TG_ENOMEM;
        ddp->stats.bytes_per_step += (int64_t)wire_bytes;
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

static int ddp_build(tg_ddp *ddp, int n, tg_tensor *const *params)
{
    ddp->slots = tg__calloc((size_t)n, sizeof *ddp->slots);
    ddp->used = tg__calloc((size_t)n + 1, sizeof *ddp->used);
    ddp->used_req = MPI_REQUEST_NULL;
    if (!ddp->slots || !ddp->used) return TG_ENOMEM;
    if (ddp->o.compress != TG_F32) TG_TRY(tg__ddp_compress_init(ddp));
    for (int i = 0; i < n; i++) {
        ddp->slots[i] = (ddp_slot){.ddp = ddp, .p = tg_tensor_retain(params[i]),
                                   .numel = tg_tensor_numel(params[i])};
        ddp->n = i + 1;
    }
    TG_TRY(plan_buckets(ddp));
    for (int i = 0; i < n; i++) {
        int rc = tg_tensor_register_post_accumulate_hook(params[i], tg__ddp_hook, &ddp->slots[i]);
        if (rc < 0) {
            for (int j = 0; j < i; j++)
                tg_tensor_remove_post_accumulate_hook(params[j], tg__ddp_hook, &ddp->slots[j]);
            return rc;
        }
    }
    return TG_OK;
}

static void ddp_destroy(tg_ddp *ddp, bool hooks)
{
    for (int i = 0; i < ddp->n; i++) {
        if (hooks) tg_tensor_remove_post_accumulate_hook(ddp->slots[i].p, tg__ddp_hook, &ddp->slots[i]);
        tg_tensor_release(ddp->slots[i].p);
        tg_tensor_release(ddp->slots[i].fresh);
    }
    for (int k = 0; k < ddp->n_buckets; k++) free(ddp->buckets[k].buf);
    free(ddp->buckets);
    free(ddp->slots);
    free(ddp->used);
    free(ddp->bufs);
    tg__ddp_compress_free(ddp);
    tg_module_release(ddp->m);
    free(ddp);
}

/* This rank's tg_ddp, checked and built without sending a message. */
static int ddp_local(tg_ddp **out, tg_dist *d, int n, tg_tensor *const *params,
                     const tg_ddp_opts *o, const char *fn)
{
    TG_CHECK(o->bucket_cap_bytes >= 1, TG_EINVAL, "%s: bucket_cap_bytes must be >= 1", fn);
    TG_CHECK(o->compress == TG_F32 || o->compress == TG_BF16 || o->compress == TG_F16,
             TG_EINVAL, "%s: compress=%s (%d) must be f32 (no compression), bf16 or f16", fn,
             tg_dtype_name(o->compress), (int)o->compress);
    TG_TRY(check_params(n, params));
    tg_ddp *ddp = tg__calloc(1, sizeof *ddp);
    if (!ddp) return TG_ENOMEM;
    ddp->d = d;
    ddp->o = *o;
    ddp->half_type = MPI_DATATYPE_NULL;
    ddp->half_sum = MPI_OP_NULL;
    int rc = ddp_build(ddp, n, params);
    if (rc < 0) {
        ddp_destroy(ddp, false);
        return rc;
    }
    *out = ddp;
    return TG_OK;
}

/* Makes the tg_ddp on every rank or on none, and then (m not NULL) copies
 * rank 0's state of m into every rank: this rank's checks and allocations
 * first, then one agreement on their status and on what decides the
 * sequence of collective calls each step makes: the parameters' layout,
 * the bucket cap, compress, and with a module its layout and
 * broadcast_buffers.  rc:
 * the caller's own checks. */
static int ddp_create(tg_ddp **out, tg_dist *d, tg_module *m, int n, tg_tensor *const *params,
                      const tg_ddp_opts *o, int rc)
{
    static const tg_ddp_opts defaults = TG_DDP_OPTS_INIT;
    const char *fn = m ? "ddp_new_module" : "ddp_new";
    if (!o) o = &defaults;
    tg_ddp *ddp = NULL;
    /* what the ranks must agree on, the module's layout first */
    const int64_t cap = o->bucket_cap_bytes > INT64_MAX ? INT64_MAX : (int64_t)o->bucket_cap_bytes;
    int64_t sig[5] = {0, 0, cap, m && o->broadcast_buffers, (int64_t)o->compress};
    static const char *const what[5] = {
        "the ranks' modules differ in their state entries, shapes or dtypes",
        "the ranks' parameters differ in number, order, shape or dtype",
        "bucket_cap_bytes differs between the ranks (their buckets would not match)",
        "broadcast_buffers differs between the ranks",
        "compress differs between the ranks (their buckets would not match)"};
    if (rc >= 0 && !out) rc = tg__error(TG_EINVAL, "%s: out must not be NULL", fn);
    if (rc >= 0 && m) rc = tg__dist_module_layout(m, &sig[0], fn);
    if (rc >= 0) rc = ddp_local(&ddp, d, n, params, o, fn);
    if (rc >= 0 && m) rc = tg__ddp_plan_buffers(ddp, m);
    if (rc >= 0) sig[1] = params_hash(n, params);
    int differs = -1;
    rc = tg__dist_agree_sig(d, rc, 5, sig, &differs);
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
