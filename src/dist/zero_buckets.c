/* src/dist/zero_buckets.c - a ZeroRedundancyOptimizer's
 * parameters_as_bucket_view: the parameters each rank owns, of one dtype,
 * made views into one flat tensor per (rank, dtype), so that the broadcast
 * after a step is one message per bucket instead of one per parameter
 * (torch's _build_param_buckets, which makes a bucket per device and rank).
 *
 * A bucket holds its rank's parameters group by group, each group's in
 * the order of that group of the rank's optimizer (zero_groups.c's share),
 * back to back.  Every rank computes the same buckets from the partition,
 * so they match without a message.  A parameter keeps its identity, .grad
 * and hooks; only its storage changes (torch's `param.data = view`), so its
 * data pointer moves into the bucket. */
#include <stdlib.h>
#include <string.h>

#include "dist/zero_internal.h"

/* The float dtypes a bucket may hold, in the order buckets are made. */
static const tg_dtype bucket_dtypes[] = {TG_F32, TG_F64, TG_F16, TG_BF16};
enum { N_DT = sizeof bucket_dtypes / sizeof bucket_dtypes[0] };

/* The new layout, made before anything changes: the buckets, their roots,
 * and a view of its bucket (or, with no buckets, a copy) per parameter. */
typedef struct layout {
    int n_buckets;
    tg_tensor **buckets;   /* owned */
    int *root;
    int *bucket_of;        /* (n) -1 without buckets */
    tg_tensor **view;      /* (n) owned */
} layout;

static void layout_free(layout *l, int n)
{
    for (int k = 0; l->buckets && k < l->n_buckets; k++) tg_tensor_release(l->buckets[k]);
    for (int i = 0; l->view && i < n; i++) tg_tensor_release(l->view[i]);
    free(l->buckets);
    free(l->root);
    free(l->bucket_of);
    free(l->view);
    memset(l, 0, sizeof *l);
}

/* Rank r's parameters of dtype dt, in bucket order, into idx; their count
 * and total numel. */
static int collect(const tg_zero *z, int r, tg_dtype dt, int *idx, int *scratch,
                   int64_t *numel)
{
    int m = 0;
    *numel = 0;
    for (int g = 0; g < z->n_groups; g++) {
        const int k = tg__zero_share(z, g, r, scratch);
        for (int j = 0; j < k; j++) {
            const tg_tensor *p = z->params[scratch[j]];
            if (tg_tensor_dtype(p) != dt) continue;
            idx[m++] = scratch[j];
            *numel += tg_tensor_numel(p);
        }
    }
    return m;
}

/* Bucket k over idx[0..m) (numel elements of dt), rank r's: the values
 * copied in, a view per parameter. */
static int make_bucket(const tg_zero *z, layout *l, int r, tg_dtype dt, const int *idx, int m,
                       int64_t numel)
{
    const int k = l->n_buckets;
    TG_TRY(tg_tensor_zeros(&l->buckets[k], dt, 1, &numel));
    l->n_buckets++;
    l->root[k] = r;
    tg_tensor *b = l->buckets[k];
    const size_t es = tg_dtype_size(dt);
    int64_t off = 0;
    for (int j = 0; j < m; j++) {
        const tg_tensor *p = z->params[idx[j]];
        memcpy((char *)tg_tensor_data(b) + (size_t)off * es, tg_tensor_cdata(p),
               (size_t)tg_tensor_numel(p) * es);
        l->view[idx[j]] = tg__tensor_view_of(b->storage, dt, p->ndim, p->shape, NULL,
                                             b->offset + off);
        if (!l->view[idx[j]]) return TG_ENOMEM;
        l->bucket_of[idx[j]] = k;
        off += tg_tensor_numel(p);
    }
    return TG_OK;
}

/* The layout of z's parameters with (on) or without buckets; TG_ENOMEM
 * with nothing made. */
static int plan(const tg_zero *z, bool on, layout *l)
{
    const int n = z->n, size = z->d->size;
    memset(l, 0, sizeof *l);
    l->buckets = tg__calloc((size_t)size * N_DT, sizeof *l->buckets);
    l->root = tg__calloc((size_t)size * N_DT, sizeof *l->root);
    l->bucket_of = tg__calloc((size_t)n, sizeof *l->bucket_of);
    l->view = tg__calloc((size_t)n, sizeof *l->view);
    int *idx = tg__calloc((size_t)n, sizeof *idx), *scratch = tg__calloc((size_t)n, sizeof *idx);
    int rc = l->buckets && l->root && l->bucket_of && l->view && idx && scratch ? TG_OK
                                                                                : TG_ENOMEM;
    for (int i = 0; rc >= 0 && i < n; i++) l->bucket_of[i] = -1;
    for (int r = 0; rc >= 0 && on && r < size; r++)
        for (int t = 0; rc >= 0 && t < N_DT; t++) {
            int64_t numel = 0;
            const int m = collect(z, r, bucket_dtypes[t], idx, scratch, &numel);
            if (m > 0) rc = make_bucket(z, l, r, bucket_dtypes[t], idx, m, numel);
        }
    /* off: each parameter its own storage again, a copy of its values */
    for (int i = 0; rc >= 0 && !on && i < n; i++) rc = tg_tensor_clone(&l->view[i], z->params[i]);
    free(idx);
    free(scratch);
    if (rc < 0) layout_free(l, n);
    return rc;
}

/* Puts l in place (cannot fail): each parameter takes its view, keeping
 * its .grad; z's old buckets go. */
static void commit(tg_zero *z, layout *l)
{
    for (int i = 0; i < z->n; i++) {
        tg_tensor *p = z->params[i], *g = p->grad;
        p->grad = NULL;
        tg__tensor_assign(p, l->view[i]);
        p->grad = g;
    }
    layout old = {.n_buckets = z->n_buckets, .buckets = z->buckets, .root = z->bucket_root,
                  .bucket_of = z->bucket_of};
    layout_free(&old, z->n);
    z->n_buckets = l->n_buckets, z->buckets = l->buckets, z->bucket_root = l->root;
    z->bucket_of = l->bucket_of;
    for (int i = 0; i < z->n; i++) tg_tensor_release(l->view[i]);
    free(l->view);
    memset(l, 0, sizeof *l);
}

int tg__zero_build_buckets(tg_zero *z, bool on)
{
    layout l;
    TG_TRY(plan(z, on, &l));
    commit(z, &l);
    z->bucket_view = on;
    return TG_OK;
}

int tg_zero_set_bucket_view(tg_zero *z, bool on)
{
    static const char fn[] = "zero_set_bucket_view";
    TG_CHECK(z != NULL, TG_EINVAL, "%s: z must not be NULL", fn);
    layout l = {0};
    int rc = z->broken ? tg__error(TG_EINVAL, "%s: z ran out of memory in zero_add_param_group; "
                                              "it can only be freed", fn)
                       : plan(z, on, &l);
    int64_t sig[1] = {on};
    int differs = -1;
    rc = tg__dist_agree_sig(z->d, rc, 1, sig, &differs);
    if (rc >= 0 && differs >= 0)
        rc = tg__error(TG_EINVAL, "%s: on differs between the ranks", fn);
    if (rc < 0) {
        layout_free(&l, z->n);
        return rc;
    }
    commit(z, &l);
    z->bucket_view = on;
    return TG_OK;
}

bool tg_zero_bucket_view(const tg_zero *z) { return z && z->bucket_view; }

int tg__zero_check_buckets(const tg_zero *z)
{
    for (int i = 0; z->bucket_view && i < z->n; i++) {
        const tg_tensor *p = z->params[i], *b = z->buckets[z->bucket_of[i]];
        TG_CHECK(p->storage == b->storage, TG_EINVAL,
                 "zero_step: parameter %d no longer views its bucket (its data was replaced; "
                 "call zero_set_bucket_view again)", i);
    }
    return TG_OK;
}

int tg__zero_broadcast(tg_zero *z)
{
    if (!z->bucket_view) {
        /* every parameter from its owner, in the list's order on every rank */
        for (int i = 0; i < z->n; i++)
            TG_TRY(tg__dist_bcast_bytes(z->d, z->params[i], z->owner[i]));
        return TG_OK;
    }
    for (int k = 0; k < z->n_buckets; k++)
        TG_TRY(tg__dist_bcast_bytes(z->d, z->buckets[k], z->bucket_root[k]));
    return TG_OK;
}
