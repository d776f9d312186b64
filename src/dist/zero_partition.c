/* src/dist/zero_partition.c - ZeroRedundancyOptimizer's partition of the
 * parameters over the ranks, as torch 1.13's
 * ZeroRedundancyOptimizer._partition_parameters computes it: group by
 * group, the group's parameters sorted by numel, largest first (Python's
 * sorted is stable, so equal sizes keep their order), each given to
 * _get_min_index(sizes), the first rank with the fewest elements so far;
 * sizes runs on over the groups.  Needs no MPI: built with and without
 * it. */
#include <limits.h>
#include <stdlib.h>

#include "core/core.h"
#include "tapegrad/dist.h"

static int check(const int *owner, int n_groups, const int *n_params, const int64_t *numel,
                 int world, int *total)
{
    TG_CHECK(owner != NULL && n_params != NULL, TG_EINVAL,
             "zero_partition: owner and n_params must not be NULL");
    TG_CHECK(n_groups >= 0, TG_EINVAL, "zero_partition: n_groups=%d must be >= 0", n_groups);
    TG_CHECK(world >= 1, TG_EINVAL, "zero_partition: world=%d must be >= 1", world);
    int n = 0;
    for (int g = 0; g < n_groups; g++) {
        TG_CHECK(n_params[g] >= 0 && n_params[g] <= INT_MAX - n, TG_EINVAL,
                 "zero_partition: n_params[%d]=%d must be >= 0 (and the total an int)", g,
                 n_params[g]);
        n += n_params[g];
    }
    TG_CHECK(numel != NULL || n == 0, TG_EINVAL, "zero_partition: numel must not be NULL");
    for (int i = 0; i < n; i++)
        TG_CHECK(numel[i] >= 0, TG_EINVAL, "zero_partition: numel[%d]=%lld must be >= 0", i,
                 (long long)numel[i]);
    *total = n;
    return TG_OK;
}

int tg_zero_partition_groups(int *owner, int n_groups, const int *n_params,
                             const int64_t *numel, int world)
{
    int n = 0;
    TG_TRY(check(owner, n_groups, n_params, numel, world, &n));
    int *order = tg__calloc((size_t)n + 1, sizeof *order);
    int64_t *sizes = tg__calloc((size_t)world, sizeof *sizes);
    if (!order || !sizes) {
        free(order);
        free(sizes);
        return TG_ENOMEM;
    }
    for (int g = 0, begin = 0; g < n_groups; begin += n_params[g], g++) {
        /* a stable insertion sort of the group by numel, largest first */
        const int m = n_params[g];
        for (int i = 0; i < m; i++) {
            int j = i;
            for (; j > 0 && numel[order[j - 1]] < numel[begin + i]; j--) order[j] = order[j - 1];
            order[j] = begin + i;
        }
        for (int k = 0; k < m; k++) {
            int best = 0;
            for (int r = 1; r < world; r++)
                if (sizes[r] < sizes[best]) best = r;
            owner[order[k]] = best;
            sizes[best] += numel[order[k]];
        }
    }
    free(order);
    free(sizes);
    return TG_OK;
}

int tg_zero_partition(int *owner, int n, const int64_t *numel, int world)
{
    TG_CHECK(n >= 0, TG_EINVAL, "zero_partition: n=%d must be >= 0", n);
    return tg_zero_partition_groups(owner, 1, &n, numel, world);
}
