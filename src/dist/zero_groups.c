/* src/dist/zero_groups.c - a ZeroRedundancyOptimizer's param groups:
 * each group partitioned as torch 1.13's _partition_parameters does
 * (zero_partition.c), this rank's share of it a group of its optimizer,
 * add_param_group, and the hyperparameters copied from the groups of
 * z->all (torch's ZeroRedundancyOptimizer.param_groups, where schedulers
 * set them) to the local optimizer's (_sync_param_groups). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "dist/zero_internal.h"

/* p = realloc(p, n * size), p kept on failure. */
static bool grow(void *pp, size_t n, size_t size)
{
    void **p = pp;
    void *q = realloc(*p, n * size);
    if (!q) return false;
    *p = q;
    return true;
}

int tg__zero_reserve(tg_zero *z, int n, int n_groups)
{
    const size_t np = (size_t)n, ng = (size_t)n_groups;
    const bool ok = grow(&z->params, np, sizeof *z->params) &&
                    grow(&z->owner, np, sizeof *z->owner) &&
                    grow(&z->local_index, np, sizeof *z->local_index) &&
                    grow(&z->group_end, ng, sizeof *z->group_end) &&
                    grow(&z->local_group, ng, sizeof *z->local_group);
    return ok ? TG_OK : tg__error(TG_ENOMEM, "zero: no memory for %d parameters", n);
}

/* owner[0..n) of z's parameters by torch's rule over groups 0..n_groups. */
static int partition(const tg_zero *z, int *owner, int n_groups)
{
    const int n = z->group_end[n_groups - 1];
    int64_t *numel = tg__calloc((size_t)n, sizeof *numel);
    int *counts = tg__calloc((size_t)n_groups, sizeof *counts);
    int rc = numel && counts ? TG_OK : TG_ENOMEM;
    for (int i = 0; rc >= 0 && i < n; i++) numel[i] = tg_tensor_numel(z->params[i]);
    for (int g = 0; rc >= 0 && g < n_groups; g++)
        counts[g] = z->group_end[g] - (g ? z->group_end[g - 1] : 0);
    if (rc >= 0) rc = tg_zero_partition_groups(owner, n_groups, counts, numel, z->d->size);
    free(numel);
    free(counts);
    return rc;
}

/* Rank's parameters of group g, stably sorted by numel, largest first
 * (the order of torch's param group on the rank), into idx; their count. */
int tg__zero_share(const tg_zero *z, int g, int rank, int *idx)
{
    const int begin = g ? z->group_end[g - 1] : 0;
    int m = 0;
    for (int i = begin; i < z->group_end[g]; i++) {
        if (z->owner[i] != rank) continue;
        const int64_t numel = tg_tensor_numel(z->params[i]);
        int j = m++;
        for (; j > 0 && tg_tensor_numel(z->params[idx[j - 1]]) < numel; j--) idx[j] = idx[j - 1];
        idx[j] = i;
    }
    return m;
}

/* Adds local[0..m) (m may be 0) as the local optimizer's next group. */
static int add_local(tg_zero *z, int m, tg_tensor **local, tg_zero_add_fn add, const void *opts)
{
    const int before = tg_optimizer_param_group_count(z->opt);
    if (!z->opt) {
        TG_TRY(z->make(&z->opt, m, local, opts));
        TG_CHECK(z->opt != NULL, TG_EINVAL, "zero_new: make returned TG_OK without an optimizer");
    } else {
        TG_CHECK(add != NULL, TG_EINVAL, "zero_new: add must not be NULL for a second group");
        TG_TRY(add(z->opt, m, local, opts));
    }
    TG_CHECK(tg_optimizer_param_group_count(z->opt) == before + 1, TG_EINVAL,
             "zero_new: this rank's optimizer has %d param groups, %d expected; make and add "
             "give one each", tg_optimizer_param_group_count(z->opt), before + 1);
    return TG_OK;
}

int tg__zero_place_group(tg_zero *z, int g, tg_zero_add_fn add, const void *opts)
{
    const int begin = g ? z->group_end[g - 1] : 0, n = z->group_end[g];
    int *owner = tg__calloc((size_t)n, sizeof *owner);
    int *idx = tg__calloc((size_t)(n - begin), sizeof *idx);
    tg_tensor **local = tg__calloc((size_t)(n - begin), sizeof *local);
    int rc = owner && idx && local ? TG_OK : TG_ENOMEM;
    if (rc >= 0) rc = partition(z, owner, g + 1);
    /* torch re-partitions every group; the earlier ones come out as they were */
    for (int i = 0; rc >= 0 && i < begin; i++) TG_ASSERT(owner[i] == z->owner[i]);
    for (int i = begin; rc >= 0 && i < n; i++) {
        z->owner[i] = owner[i];
        z->local_index[i] = -1;
    }
    const int m = rc >= 0 ? tg__zero_share(z, g, z->d->rank, idx) : 0;
    for (int k = 0; k < m; k++) local[k] = z->params[idx[k]];
    z->local_group[g] = -1;
    /* an empty share is an empty group, as torch's local optimizer keeps it:
     * group g of z is group g of every rank's optimizer */
    if (rc >= 0) rc = add_local(z, m, local, add, opts);
    if (rc >= 0) {
        z->local_group[g] = tg_optimizer_param_group_count(z->opt) - 1;
        TG_ASSERT(z->local_group[g] == g);
        for (int k = 0; k < m; k++) z->local_index[idx[k]] = z->n_local + k;
        z->n_local += m;
    }
    free(owner);
    free(idx);
    free(local);
    return rc;
}

int tg_zero_rank_params(int **idx, int *n, const tg_zero *z, int rank, int group)
{
    static const char fn[] = "zero_rank_params";
    TG_CHECK(idx != NULL && n != NULL && z != NULL, TG_EINVAL,
             "%s: idx, n and z must not be NULL", fn);
    TG_CHECK(rank >= 0 && rank < z->d->size, TG_EINVAL, "%s: rank=%d must be in [0, %d)", fn,
             rank, z->d->size);
    TG_CHECK(group >= 0 && group < z->n_groups, TG_EINVAL, "%s: group=%d must be in [0, %d)",
             fn, group, z->n_groups);
    TG_CHECK(!z->broken, TG_EINVAL,
             "%s: z ran out of memory in zero_add_param_group; it can only be freed", fn);
    const int size = z->group_end[group] - (group ? z->group_end[group - 1] : 0);
    int *v = tg__calloc((size_t)size, sizeof *v);
    if (!v) return TG_ENOMEM;
    const int m = tg__zero_share(z, group, rank, v);
    if (m == 0) free(v), v = NULL;
    *idx = v, *n = m;
    return TG_OK;
}

int tg__zero_sync(tg_zero *z)
{
    for (int g = 0; g < z->n_groups; g++)
        if (z->local_group[g] >= 0)
            TG_TRY(tg_optimizer_copy_group_options(z->opt, z->local_group[g], z->all, g));
    return TG_OK;
}

/* The local checks of add_param_group: params new to z, and add's own
 * checks of them and of opts, tried on a scratch optimizer (make over a
 * one-element tensor) so that z->all is changed only once every rank
 * agrees. */
static int check_add(const tg_zero *z, tg_zero_add_fn add, int n, tg_tensor *const *params,
                     const void *opts, uint64_t *layout)
{
    static const char fn[] = "zero_add_param_group";
    TG_CHECK(add != NULL, TG_EINVAL, "%s: add must not be NULL", fn);
    TG_TRY(tg__zero_check_params(fn, n, params, layout));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < z->n; j++)
            TG_CHECK(params[i] != z->params[j], TG_EINVAL,
                     "%s: params[%d] is already parameter %d of z (each parameter in one "
                     "group)", fn, i, j);
    tg_tensor *dummy = NULL;
    tg_optimizer *scratch = NULL;
    TG_TRY(tg_tensor_zeros(&dummy, tg_tensor_dtype(params[0]), 1, (int64_t[]){1}));
    int rc = z->make(&scratch, 1, &dummy, opts);
    if (rc >= 0) rc = add(scratch, n, params, opts);
    tg_optimizer_free(scratch);
    tg_tensor_release(dummy);
    return rc;
}

int tg_zero_add_param_group(tg_zero *z, tg_zero_add_fn add, int n, tg_tensor *const *params,
                            const void *opts)
{
    static const char fn[] = "zero_add_param_group";
    TG_CHECK(z != NULL, TG_EINVAL, "%s: z must not be NULL", fn);
    uint64_t h = TG__ZERO_FNV_BASIS;
    int rc = z->broken ? tg__error(TG_EINVAL, "%s: z ran out of memory in an earlier "
                                              "add_param_group; it can only be freed", fn)
                       : check_add(z, add, n, params, opts, &h);
    if (rc >= 0 && n > INT_MAX - z->n) rc = tg__error(TG_EINVAL, "%s: too many parameters", fn);
    if (rc >= 0) rc = tg__zero_reserve(z, z->n + n, z->n_groups + 1);
    int64_t sig[2] = {rc >= 0 ? n : 0, (int64_t)h};
    int differs = -1;
    TG_TRY(tg__dist_agree_sig(z->d, rc, 2, sig, &differs));
    TG_CHECK(differs < 0, TG_EINVAL, "%s: the ranks passed different parameter lists (count, "
                                     "shapes or dtypes)", fn);
    /* every rank goes on: only no memory fails from here */
    rc = add(z->all, n, params, opts);
    if (rc >= 0) {
        const int g = z->n_groups++;
        for (int i = 0; i < n; i++) z->params[z->n + i] = tg_tensor_retain(params[i]);
        z->n += n;
        z->group_end[g] = z->n;
        rc = tg__zero_place_group(z, g, add, opts);
    }
    /* torch rebuilds the buckets over the new partition */
    if (rc >= 0 && z->bucket_view) rc = tg__zero_build_buckets(z, true);
    if (rc >= 0) rc = tg__zero_sync(z);
    rc = tg_dist_agree(z->d, rc);
    if (rc < 0) z->broken = true;
    return rc;
}
