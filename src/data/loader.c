/* src/data/loader.c - batches over a dataset, reshuffled per epoch.
 *
 * The order of epoch e is a function of (seed + e) alone: a Fisher-Yates
 * shuffle of 0..N-1 whose draws come from the counter-based tg_rng, so the
 * same seed gives the same batches on every machine, and a saved
 * (epoch, index) position is enough to resume exactly.
 *
 * A shard (rank r of w) hands out rank r's slice of each run of w * b
 * positions of that order; index stays a position in the whole epoch.  A
 * last, partial run (without drop_last) of L positions is padded to
 * ceil(L / w) w with the epoch's first samples, positions n, n + 1, ...
 * reading order[0], order[1], ... (PyTorch's DistributedSampler pads its
 * indices the same way), so every rank's last batch has the same size.
 *
 * An augmentation (src/data/augment.c) changes each batch sample by sample,
 * each sample's draw a function of (seed, epoch, its dataset index). */
#include <string.h>

#include "core/core.h"
#include "data/augment.h"
#include "data/loader_check.h"
#include "tapegrad/data.h"

struct tg_loader {
    tg_dataset *ds;           /* retained */
    tg_loader_options opt;
    int64_t n;                /* dataset size */
    int64_t epoch;
    int64_t index;            /* samples of this epoch already handed out */
    int64_t *order;           /* (n) the sample order of this epoch, owned */
    int rank, world;          /* the shard: rank's slice of each run of world * batch */
    tg__augment *aug;         /* owned; NULL: none */
};

/* order[0..n) = a uniformly random permutation: for i = n-1 down to 1, swap
 * order[i] with order[j], j uniform in [0, i] (Durstenfeld's form). */
static void make_order(tg_loader *ld)
{
    for (int64_t i = 0; i < ld->n; i++) ld->order[i] = i;
    if (!ld->opt.shuffle) return;
    tg_rng rng;
    tg_rng_init(&rng, ld->opt.seed + (uint64_t)ld->epoch);
    for (int64_t i = ld->n - 1; i > 0; i--) {
        int64_t j = (int64_t)(tg_rng_uniform(&rng) * (double)(i + 1));
        if (j > i) j = i;   /* u * (i + 1) may round up to i + 1 */
        int64_t t = ld->order[i];
        ld->order[i] = ld->order[j];
        ld->order[j] = t;
    }
}

int tg_loader_new(tg_loader **out, tg_dataset *ds, const tg_loader_options *opt)
{
    static const tg_loader_options defaults = TG_LOADER_OPTIONS_INIT;
    TG_CHECK(out != NULL && ds != NULL, TG_EINVAL, "loader_new: out and ds must not be NULL");
    if (!opt) opt = &defaults;
    TG_CHECK(opt->batch_size >= 1, TG_EINVAL, "loader_new: batch_size=%lld must be >= 1",
             (long long)opt->batch_size);
    tg_loader *ld = tg__calloc(1, sizeof *ld);
    if (!ld) return TG_ENOMEM;
    ld->n = tg_dataset_size(ds);
    ld->order = tg__malloc((size_t)(ld->n ? ld->n : 1) * sizeof *ld->order);
    if (!ld->order) {
        free(ld);
        return TG_ENOMEM;
    }
    ld->ds = tg_dataset_retain(ds);
    ld->opt = *opt;
    ld->world = 1;
    make_order(ld);
    *out = ld;
    return 0;
}

void tg_loader_free(tg_loader *ld)
{
    if (!ld) return;
    tg_dataset_release(ld->ds);
    tg__augment_free(ld->aug);
    free(ld->order);
    free(ld);
}

/* The samples at epoch positions [from, from + count), past n wrapping to
 * the epoch's first ones: a new array, or NULL out of memory. */
static int64_t *padded_ids(const tg_loader *ld, int64_t from, int64_t count)
{
    int64_t *ids = tg__malloc((size_t)count * sizeof *ids);
    for (int64_t i = 0; ids && i < count; i++) {
        int64_t p = from + i;
        ids[i] = ld->order[p < ld->n ? p : (p - ld->n) % ld->n];
    }
    return ids;
}

int tg_loader_next(tg_loader *ld, tg_tensor **images, tg_tensor **labels)
{
    TG_CHECK(ld && images && labels, TG_EINVAL, "loader_next: NULL argument");
    /* the run of the whole world's batch (set_shard checked that b * w fits) */
    int64_t left = ld->n - ld->index, run = ld->opt.batch_size * ld->world;
    if (left <= 0 || (ld->opt.drop_last && left < run)) return 0;
    /* len, padded to a multiple of the world (<= run, itself one) */
    int64_t len = left < run ? left : run, share = (len + ld->world - 1) / ld->world;
    int64_t from = ld->index + share * ld->rank;
    int64_t *ids = from + share <= ld->n ? ld->order + from : padded_ids(ld, from, share);
    if (!ids) return TG_ENOMEM;
    tg_tensor *x = NULL, *y = NULL;
    int rc = tg_dataset_batch(&x, &y, ld->ds, ids, share);
    if (rc == 0 && ld->aug)
        rc = tg__augment_apply(ld->aug, ld->ds, &x, ids, ld->opt.seed, ld->epoch);
    if (ids != ld->order + from) free(ids);
    if (rc < 0) {
        tg_tensor_release(x);
        tg_tensor_release(y);
        return rc;
    }
    *images = x;
    *labels = y;
    ld->index += len;
    return 1;
}

int tg_loader_set_augment(tg_loader *ld, const tg_augment_options *opt)
{
    TG_CHECK(ld != NULL, TG_EINVAL, "loader_set_augment: ld must not be NULL");
    tg__augment *a = NULL;
    if (opt) TG_TRY(tg__augment_new(&a, opt, ld->ds));
    tg__augment_free(ld->aug);
    ld->aug = a;
    return TG_OK;
}

int tg__loader_position_check(const tg_loader *ld, int64_t epoch, int64_t index)
{
    TG_CHECK(epoch >= 0, TG_EINVAL, "loader_set_position: epoch=%lld must be >= 0",
             (long long)epoch);
    TG_CHECK(index >= 0 && index <= ld->n, TG_EINVAL,
             "loader_set_position: index=%lld must be in [0, %lld] (the dataset size)",
             (long long)index, (long long)ld->n);
    return TG_OK;
}

int tg_loader_set_position(tg_loader *ld, int64_t epoch, int64_t index)
{
    TG_CHECK(ld != NULL, TG_EINVAL, "loader_set_position: ld must not be NULL");
    TG_TRY(tg__loader_position_check(ld, epoch, index));
    if (epoch != ld->epoch) {
        ld->epoch = epoch;
        make_order(ld);
    }
    ld->index = index;
    return 0;
}

int tg_loader_reset(tg_loader *ld, int64_t epoch)
{
    TG_CHECK(ld != NULL, TG_EINVAL, "loader_reset: ld must not be NULL");
    TG_CHECK(epoch >= 0, TG_EINVAL, "loader_reset: epoch=%lld must be >= 0", (long long)epoch);
    return tg_loader_set_position(ld, epoch, 0);
}

void tg_loader_position(const tg_loader *ld, int64_t *epoch, int64_t *index)
{
    if (!ld) return;
    if (epoch) *epoch = ld->epoch;
    if (index) *index = ld->index;
}

int64_t tg_loader_num_batches(const tg_loader *ld)
{
    if (!ld) return 0;
    int64_t b = ld->opt.batch_size * ld->world;   /* n + b - 1 could overflow */
    return ld->n / b + (!ld->opt.drop_last && ld->n % b > 0);
}

int tg_loader_set_shard(tg_loader *ld, int rank, int world_size)
{
    TG_CHECK(ld != NULL, TG_EINVAL, "loader_set_shard: ld must not be NULL");
    TG_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, TG_EINVAL,
             "loader_set_shard: rank=%d must be in [0, world_size=%d)", rank, world_size);
    TG_CHECK(ld->opt.batch_size <= INT64_MAX / world_size, TG_EINVAL,
             "loader_set_shard: batch_size=%lld times world_size=%d overflows",
             (long long)ld->opt.batch_size, world_size);
    ld->rank = rank;
    ld->world = world_size;
    return TG_OK;
}
