/* src/dist/zero_partition.c - ZeroRedundancyOptimizer's partition of the
 * parameters over the ranks, as torch 1.13's
 * ZeroRedundancyOptimizer._partition_parameters computes it: the
 * parameters sorted by numel, largest first (Python's sorted is stable, so
 * equal sizes keep their order), each given to _get_min_index(sizes), the
 * first rank with the fewest elements so far.  Needs no MPI: built with and
 * without it. */
#include <stdlib.h>

#include "core/core.h"
#include "tapegrad/dist.h"

int tg_zero_partition(int *owner, int n, const int64_t *numel, int world)
{
    TG_CHECK(owner != NULL && (numel != NULL || n == 0), TG_EINVAL,
             "zero_partition: owner and numel must not be NULL");
    TG_CHECK(n >= 0, TG_EINVAL, "zero_partition: n=%d must be >= 0", n);
    TG_CHECK(world >= 1, TG_EINVAL, "zero_partition: world=%d must be >= 1", world);
    for (int i = 0; i < n; i++)
        TG_CHECK(numel[i] >= 0, TG_EINVAL, "zero_partition: numel[%d]=%lld must be >= 0", i,
                 (long long)numel[i]);
    int *order = tg__calloc((size_t)n + 1, sizeof *order);
    int64_t *sizes = tg__calloc((size_t)world, sizeof *sizes);
    if (!order || !sizes) {
        free(order);
        free(sizes);
        return TG_ENOMEM;
    }
    /* a stable insertion sort by numel, largest first */
    for (int i = 0; i < n; i++) {
        int j = i;
        for (; j > 0 && numel[order[j - 1]] < numel[i]; j--) order[j] = order[j - 1];
        order[j] = i;
    }
    for (int k = 0; k < n; k++) {
        int best = 0;
        for (int r = 1; r < world; r++)
            if (sizes[r] < sizes[best]) best = r;
        owner[order[k]] = best;
        sizes[best] += numel[order[k]];
    }
    free(order);
    free(sizes);
    return TG_OK;
}
