/* src/dist/zero.c - ZeroRedundancyOptimizer: the parameters partitioned
 * over the ranks (zero_partition.c), an optimizer on each rank over its
 * own, and a step that updates each parameter on its owner and then
 * broadcasts it from there.
 *
 * The update of a parameter depends only on that parameter, its gradient
 * and its own state, so the owner's optimizer over a part of the list
 * computes what one optimizer over the whole list would, bit for bit, when
 * the gradients are the same on every rank (as DDP leaves them).  The
 * state (zero_state.c) moves between the two numberings: parameter i of
 * tg_zero_new's list is local_index[i] of its owner's optimizer. */
#include <stdlib.h>
#include <string.h>

#include "dist/zero_internal.h"
#include "tapegrad/sparse.h"

/* FNV-1a over bytes: the parameters' layout, compared across ranks. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Local checks of tg_zero_new's arguments; *layout: the parameters'
 * dtypes and shapes hashed. */
static int check_args(tg_zero **out, int n, tg_tensor *const *params, tg_zero_make_fn make,
                      int64_t *layout)
{
    TG_CHECK(out != NULL && make != NULL, TG_EINVAL, "zero_new: out and make must not be NULL");
    TG_CHECK(n >= 1 && params != NULL, TG_EINVAL,
             "zero_new: n=%d parameters; at least 1, params not NULL", n);
    uint64_t h = fnv(0xcbf29ce484222325ull, &n, sizeof n);
    for (int i = 0; i < n; i++) {
        const tg_tensor *p = params[i];
        TG_CHECK(p != NULL, TG_EINVAL, "zero_new: params[%d] is NULL", i);
        TG_CHECK(tg_dtype_is_float(tg_tensor_dtype(p)), TG_EDTYPE,
                 "zero_new: params[%d] is %s; float parameters only", i,
                 tg_dtype_name(tg_tensor_dtype(p)));
        TG_CHECK(tg_tensor_is_contiguous(p) && !tg_tensor_is_sparse(p), TG_EINVAL,
                 "zero_new: params[%d] must be contiguous and dense (it is broadcast as bytes)",
                 i);
        for (int j = 0; j < i; j++)
            TG_CHECK(params[j] != p, TG_EINVAL, "zero_new: params[%d] is params[%d] again", i,
                     j);
        const int dt = (int)tg_tensor_dtype(p), nd = tg_tensor_ndim(p);
        h = fnv(h, &dt, sizeof dt);
        h = fnv(h, &nd, sizeof nd);
        h = fnv(h, tg_tensor_shape(p), sizeof(int64_t) * (size_t)nd);
    }
    *layout = (int64_t)h;
    return TG_OK;
}

/* z's partition and this rank's list of parameters, largest first (the
 * order of torch's param group on the rank): *local (n_local entries,
 * borrowed tensors) freed by the caller. */
static int partition(tg_zero *z, tg_tensor ***local)
{
    int64_t *numel = tg__calloc((size_t)z->n, sizeof *numel);
    int *idx = tg__calloc((size_t)z->n, sizeof *idx);
    *local = tg__calloc((size_t)z->n, sizeof **local);
    int rc = numel && idx && *local ? TG_OK : TG_ENOMEM;
    for (int i = 0; rc >= 0 && i < z->n; i++) numel[i] = tg_tensor_numel(z->params[i]);
    if (rc >= 0) rc = tg_zero_partition(z->owner, z->n, numel, z->d->size);
    /* this rank's parameters, stably sorted by numel, largest first */
    for (int i = 0; rc >= 0 && i < z->n; i++) {
        z->local_index[i] = -1;
        if (z->owner[i] != z->d->rank) continue;
        int j = z->n_local++;
        for (; j > 0 && numel[idx[j - 1]] < numel[i]; j--) idx[j] = idx[j - 1];
        idx[j] = i;
    }
    for (int k = 0; rc >= 0 && k < z->n_local; k++) {
        z->local_index[idx[k]] = k;
        (*local)[k] = z->params[idx[k]];
    }
    free(numel);
    free(idx);
    return rc;
}

/* The local optimizer, made by make over this rank's parameters. */
static int make_local(tg_zero *z, tg_tensor **local, tg_zero_make_fn make, const void *opts)
{
    if (z->n_local == 0) return TG_OK;
    tg_optimizer *opt = NULL;
    TG_TRY(make(&opt, z->n_local, local, opts));
    TG_CHECK(opt != NULL, TG_EINVAL, "zero_new: make returned TG_OK without an optimizer");
    z->opt = opt;
    TG_CHECK(tg_optimizer_param_group_count(opt) == 1, TG_EINVAL,
             "zero_new: make gave an optimizer of %d param groups; one only",
             tg_optimizer_param_group_count(opt));
    return TG_OK;
}

int tg_zero_new(tg_zero **out, tg_dist *d, int n, tg_tensor *const *params, tg_zero_make_fn make,
                const void *opts)
{
    TG_CHECK(d != NULL, TG_EINVAL, "zero_new: d must not be NULL");
    int64_t layout = 0;
    int rc = check_args(out, n, params, make, &layout), differs = -1;
    int64_t sig[2] = {rc >= 0 ? n : 0, layout};
    TG_TRY(tg__dist_agree_sig(d, rc, 2, sig, &differs));
    TG_CHECK(differs < 0, TG_EINVAL, "zero_new: the ranks passed different parameter lists "
                                     "(count, shapes or dtypes)");
    tg_zero *z = tg__calloc(1, sizeof *z);
    tg_tensor **local = NULL;
    rc = z ? TG_OK : TG_ENOMEM;
    if (rc >= 0) {
        *z = (tg_zero){.d = d, .n = n};
        z->params = tg__calloc((size_t)n, sizeof *z->params);
        z->owner = tg__calloc((size_t)n, sizeof *z->owner);
        z->local_index = tg__calloc((size_t)n, sizeof *z->local_index);
        rc = z->params && z->owner && z->local_index ? TG_OK : TG_ENOMEM;
    }
    if (rc >= 0) {
        for (int i = 0; i < n; i++) z->params[i] = tg_tensor_retain(params[i]);
        rc = partition(z, &local);
    }
    if (rc >= 0) rc = make_local(z, local, make, opts);
    free(local);
    rc = tg_dist_agree(d, rc);
    if (rc < 0) {
        tg_zero_free(z);
        return rc;
    }
    *out = z;
    return TG_OK;
}

void tg_zero_free(tg_zero *z)
{
    if (!z) return;
    tg_optimizer_free(z->opt);
    for (int i = 0; z->params && i < z->n; i++) tg_tensor_release(z->params[i]);
    free(z->params);
    free(z->owner);
    free(z->local_index);
    free(z);
}

/* The checks of tg_optimizer_step on this rank's gradients, made before
 * any rank steps: a float gradient of its parameter's shape. */
static int check_grads(const tg_zero *z)
{
    for (int i = 0; i < z->n; i++) {
        const tg_tensor *p = z->params[i], *g = tg_tensor_grad(p);
        if (z->local_index[i] < 0 || !g) continue;
        TG_CHECK(tg_dtype_is_float(tg_tensor_dtype(g)), TG_EDTYPE,
                 "zero_step: the gradient of parameter %d is %s; float only", i,
                 tg_dtype_name(tg_tensor_dtype(g)));
        TG_CHECK(tg_tensor_same_shape(g, p), TG_ESHAPE,
                 "zero_step: the gradient of parameter %d has another shape than it", i);
    }
    return TG_OK;
}

int tg_zero_step(tg_zero *z)
{
    TG_CHECK(z != NULL, TG_EINVAL, "zero_step: z must not be NULL");
    TG_TRY(tg_dist_agree(z->d, check_grads(z)));
    const int rc = z->opt ? tg_optimizer_step(z->opt) : TG_OK;
    TG_TRY(tg_dist_agree(z->d, rc));
    /* every parameter from its owner, in the list's order on every rank */
    for (int i = 0; i < z->n; i++) TG_TRY(tg__dist_bcast_bytes(z->d, z->params[i], z->owner[i]));
    z->steps++;
    return TG_OK;
}

void tg_zero_zero_grad(tg_zero *z)
{
    for (int i = 0; z && i < z->n; i++) tg_tensor_zero_grad(z->params[i]);
}

int tg_zero_set_lr(tg_zero *z, double lr)
{
    TG_CHECK(z != NULL, TG_EINVAL, "zero_set_lr: z must not be NULL");
    TG_CHECK(lr >= 0 && lr <= 1e300, TG_EINVAL, "zero_set_lr: lr=%g must be >= 0 and finite",
             lr);
    return z->opt ? tg_optimizer_set_lr(z->opt, lr) : TG_OK;
}

int tg_zero_owner(const tg_zero *z, int i)
{
    return z && i >= 0 && i < z->n ? z->owner[i] : -1;
}

int tg_zero_local_index(const tg_zero *z, int i)
{
    return z && i >= 0 && i < z->n ? z->local_index[i] : -1;
}

tg_optimizer *tg_zero_local(const tg_zero *z) { return z ? z->opt : NULL; }
int64_t tg_zero_steps(const tg_zero *z) { return z ? z->steps : 0; }
