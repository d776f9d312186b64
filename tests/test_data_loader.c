/* Tests of datasets and batch loaders (the IDX reader: test_data.c). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/data.h"

/* ---- helpers ------------------------------------------------------------- */

static void make_dir(void) { th_tmp_dir_make("tg_data_"); }

TestSuite(data_loader, .init = make_dir, .fini = th_tmp_dir_remove);

/* ---- datasets -------------------------------------------------------------- */

/* n images (1, 2, 2) whose pixels all equal 20 * i + k (k = pixel 0..3) and
 * labels i % 7. */
static tg_dataset *make_dataset(int64_t n)
{
    uint8_t *px = malloc((size_t)n * 4);
    int32_t *lab = malloc((size_t)n * sizeof *lab);
    for (int64_t i = 0; i < n; i++) {
        for (int k = 0; k < 4; k++) px[i * 4 + k] = (uint8_t)(20 * i + k);
        lab[i] = (int32_t)(i % 7);
    }
    int64_t is[3] = {n, 2, 2}, ls[1] = {n};
    tg_tensor *img, *l;
    cr_assert(eq(int, tg_tensor_from_data(&img, TG_U8, 3, is, px), 0));
    cr_assert(eq(int, tg_tensor_from_data(&l, TG_I32, 1, ls, lab), 0));
    tg_dataset *ds = NULL;
    cr_assert(eq(int, tg_dataset_from_tensors(&ds, img, l), 0), "%s", tg_error_message());
    tg_tensor_release(img);
    tg_tensor_release(l);
    free(px);
    free(lab);
    return ds;
}

Test(data_loader, dataset_batch_scales_pixels)
{
    tg_dataset *ds = make_dataset(10);
    int64_t shape[3];
    tg_dataset_image_shape(ds, shape);
    cr_assert(eq(i64, shape[0], 1));
    cr_assert(eq(i64, shape[1], 2));
    cr_assert(eq(i64, tg_dataset_size(ds), 10));
    cr_assert(eq(int, tg_dataset_num_classes(ds), 7));
    cr_assert(eq(str, (char *)tg_dataset_class_name(ds, 3), "3"));
    cr_assert(tg_dataset_class_name(ds, 7) == NULL);
    int64_t idx[2] = {9, 2};
    for (int r = 0; r < 2; r++) {
        if (r) cr_assert(eq(int, tg_dataset_set_pixel_range(ds, TG_PIXELS_UNIT), 0));
        tg_tensor *x, *y;
        cr_assert(eq(int, tg_dataset_batch(&x, &y, ds, idx, 2), 0));
        cr_assert(eq(int, tg_tensor_dtype(x), TG_F32));
        cr_assert(eq(int, tg_tensor_dtype(y), TG_I64));
        cr_assert(eq(int, tg_tensor_ndim(x), 4));
        cr_assert(eq(i64, tg_tensor_dim(x, 0), 2));
        cr_assert(eq(i64, tg_tensor_dim(x, 1), 1));
        const float *dx = tg_tensor_cdata(x);
        const int64_t *dy = tg_tensor_cdata(y);
        for (int b = 0; b < 2; b++) {
            cr_assert(eq(i64, dy[b], idx[b] % 7));
            for (int k = 0; k < 4; k++) {
                double p = 20.0 * idx[b] + k;
                double want = r ? p / 255 : 2 * p / 255 - 1;
                cr_assert(epsilon_eq(dbl, dx[b * 4 + k], want, 1e-6));
            }
        }
        tg_tensor_release(x);
        tg_tensor_release(y);
    }
    int64_t bad[1] = {10};
    tg_tensor *x = NULL, *y = NULL;
    cr_assert(eq(int, tg_dataset_batch(&x, &y, ds, bad, 1), TG_EINVAL));
    cr_assert(x == NULL && y == NULL);
    cr_assert(eq(int, tg_dataset_set_pixel_range(ds, (tg_pixel_range)7), TG_EINVAL));
    tg_dataset_release(ds);
}

Test(data_loader, dataset_from_tensors_errors)
{
    int64_t is[3] = {4, 2, 2}, ls[1] = {4}, ls3[1] = {3};
    tg_tensor *img, *fimg, *lab, *lab3, *flab;
    tg_tensor_zeros(&img, TG_U8, 3, is);
    tg_tensor_zeros(&fimg, TG_F32, 3, is);
    tg_tensor_zeros(&lab, TG_I64, 1, ls);
    tg_tensor_zeros(&lab3, TG_I64, 1, ls3);
    tg_tensor_zeros(&flab, TG_F32, 1, ls);
    tg_dataset *ds = NULL;
    int64_t shape[3] = {7, 7, 7};
    tg_dataset_image_shape(NULL, shape);   /* no dataset: zeros, no crash */
    cr_assert(shape[0] == 0 && shape[1] == 0 && shape[2] == 0);
    tg_dataset_image_shape(NULL, NULL);
    cr_assert(eq(int, tg_dataset_from_tensors(&ds, fimg, lab), TG_EDTYPE));
    cr_assert(eq(int, tg_dataset_from_tensors(&ds, img, flab), TG_EDTYPE));
    cr_assert(eq(int, tg_dataset_from_tensors(&ds, img, lab3), TG_ESHAPE));
    cr_assert(eq(int, tg_dataset_from_tensors(&ds, lab, lab), TG_EDTYPE));
    cr_assert(eq(int, tg_dataset_from_tensors(&ds, NULL, lab), TG_EINVAL));
    int64_t i0[1] = {0};
    tg_tensor_set(lab, i0, -1);
    cr_assert(eq(int, tg_dataset_from_tensors(&ds, img, lab), TG_EINVAL));
    cr_assert(ds == NULL);
    tg_tensor_release(img);
    tg_tensor_release(fimg);
    tg_tensor_release(lab);
    tg_tensor_release(lab3);
    tg_tensor_release(flab);
}

/* ---- loaders ----------------------------------------------------------------- */

/* The sample behind a batch row: pixel 0 of image i is 20 * i (mod 256), so
 * with n <= 12 it identifies i. */
static int64_t sample_of(const float *img)
{
    return (int64_t)llround(((double)img[0] + 1) * 127.5) / 20;
}

/* Runs one epoch from the loader's position, appending sample ids to seen;
 * returns the number of batches and checks each batch's shape. */
static int run_epoch(tg_loader *ld, int64_t *seen, int64_t *count, int64_t bs)
{
    tg_tensor *x, *y;
    int batches = 0, rc;
    while ((rc = tg_loader_next(ld, &x, &y)) == 1) {
        int64_t b = tg_tensor_dim(x, 0);
        cr_assert(b >= 1 && b <= bs);
        cr_assert(eq(i64, tg_tensor_dim(y, 0), b));
        cr_assert(eq(i64, tg_tensor_dim(x, 2), 2));
        for (int64_t i = 0; i < b; i++) {
            int64_t s = sample_of((const float *)tg_tensor_cdata(x) + 4 * i);
            cr_assert(eq(i64, ((const int64_t *)tg_tensor_cdata(y))[i], s % 7));
            seen[(*count)++] = s;
        }
        tg_tensor_release(x);
        tg_tensor_release(y);
        batches++;
    }
    cr_assert(eq(int, rc, 0));
    return batches;
}

Test(data_loader, loader_covers_each_sample_once)
{
    tg_dataset *ds = make_dataset(10);
    tg_loader_options o = TG_LOADER_OPTIONS_INIT;
    o.batch_size = 3;
    o.seed = 7;
    tg_loader *ld;
    cr_assert(eq(int, tg_loader_new(&ld, ds, &o), 0));
    cr_assert(eq(i64, tg_loader_num_batches(ld), 4));
    for (int64_t e = 0; e < 3; e++) {
        int64_t seen[10], n = 0, hits[10] = {0};
        cr_assert(eq(int, tg_loader_reset(ld, e), 0));
        cr_assert(eq(int, run_epoch(ld, seen, &n, 3), 4));
        cr_assert(eq(i64, n, 10));
        for (int i = 0; i < 10; i++) hits[seen[i]]++;
        for (int i = 0; i < 10; i++) cr_assert(eq(i64, hits[i], 1), "epoch %lld", (long long)e);
    }
    /* The epoch is over: next keeps returning 0 and leaves the outs alone. */
    tg_tensor *x = NULL, *y = NULL;
    cr_assert(eq(int, tg_loader_next(ld, &x, &y), 0));
    cr_assert(x == NULL && y == NULL);
    tg_loader_free(ld);
    tg_dataset_release(ds);
}

static void epoch_order(tg_dataset *ds, const tg_loader_options *o, int64_t epoch, int64_t *seen)
{
    tg_loader *ld;
    int64_t n = 0;
    cr_assert(eq(int, tg_loader_new(&ld, ds, o), 0));
    cr_assert(eq(int, tg_loader_reset(ld, epoch), 0));
    run_epoch(ld, seen, &n, o->batch_size);
    tg_loader_free(ld);
}

Test(data_loader, loader_shuffle_is_deterministic)
{
    tg_dataset *ds = make_dataset(12);
    tg_loader_options o = TG_LOADER_OPTIONS_INIT;
    o.batch_size = 5;
    o.seed = 1234;
    int64_t a[12], b[12], c[12], d[12], plain[12];
    epoch_order(ds, &o, 0, a);
    epoch_order(ds, &o, 0, b);
    epoch_order(ds, &o, 1, c);
    o.seed = 1233;   /* seed + epoch is what counts: (1233, 1) is (1234, 0) */
    epoch_order(ds, &o, 1, d);
    o.shuffle = false;
    epoch_order(ds, &o, 3, plain);
    int same_ab = 0, same_ac = 0, same_ad = 0, moved = 0;
    for (int i = 0; i < 12; i++) {
        same_ab += a[i] == b[i];
        same_ac += a[i] == c[i];
        same_ad += a[i] == d[i];
        moved += a[i] != i;
        cr_assert(eq(i64, plain[i], i));
    }
    cr_assert(eq(int, same_ab, 12));
    cr_assert(eq(int, same_ad, 12));
    cr_assert(lt(int, same_ac, 12));
    cr_assert(moved > 0, "shuffling moved no sample");
    tg_dataset_release(ds);
}

Test(data_loader, loader_drop_last)
{
    tg_dataset *ds = make_dataset(10);
    tg_loader_options o = TG_LOADER_OPTIONS_INIT;
    o.batch_size = 3;
    o.drop_last = true;
    tg_loader *ld;
    cr_assert(eq(int, tg_loader_new(&ld, ds, &o), 0));
    cr_assert(eq(i64, tg_loader_num_batches(ld), 3));
    int64_t seen[10], n = 0;
    cr_assert(eq(int, run_epoch(ld, seen, &n, 3), 3));
    cr_assert(eq(i64, n, 9));
    int64_t e, idx;
    tg_loader_position(ld, &e, &idx);
    cr_assert(eq(i64, e, 0));
    cr_assert(eq(i64, idx, 9));
    tg_loader_free(ld);
    tg_dataset_release(ds);
}

Test(data_loader, loader_position_resumes_exactly)
{
    tg_dataset *ds = make_dataset(12);
    tg_loader_options o = TG_LOADER_OPTIONS_INIT;
    o.batch_size = 4;
    o.seed = 99;
    tg_loader *a, *b;
    tg_tensor *x, *y, *x2, *y2;
    cr_assert(eq(int, tg_loader_new(&a, ds, &o), 0));
    cr_assert(eq(int, tg_loader_new(&b, ds, &o), 0));
    cr_assert(eq(int, tg_loader_reset(a, 2), 0));
    cr_assert(eq(int, tg_loader_next(a, &x, &y), 1));
    tg_tensor_release(x);
    tg_tensor_release(y);
    int64_t e, idx;
    tg_loader_position(a, &e, &idx);
    cr_assert(eq(i64, e, 2));
    cr_assert(eq(i64, idx, 4));
    cr_assert(eq(int, tg_loader_set_position(b, e, idx), 0));
    for (int k = 0; k < 2; k++) {
        cr_assert(eq(int, tg_loader_next(a, &x, &y), 1));
        cr_assert(eq(int, tg_loader_next(b, &x2, &y2), 1));
        cr_assert(eq(int, memcmp(tg_tensor_cdata(x), tg_tensor_cdata(x2), 4 * 4 * 4), 0));
        cr_assert(eq(int, memcmp(tg_tensor_cdata(y), tg_tensor_cdata(y2), 4 * 8), 0));
        tg_tensor_release(x);
        tg_tensor_release(y);
        tg_tensor_release(x2);
        tg_tensor_release(y2);
    }
    /* Bad positions change nothing. */
    cr_assert(eq(int, tg_loader_set_position(b, -1, 0), TG_EINVAL));
    cr_assert(eq(int, tg_loader_set_position(b, 0, 13), TG_EINVAL));
    tg_loader_position(b, &e, &idx);
    cr_assert(eq(i64, e, 2));
    cr_assert(eq(i64, idx, 12));
    tg_loader_free(a);
    tg_loader_free(b);
    tg_dataset_release(ds);
}

Test(data_loader, loader_errors)
{
    tg_dataset *ds = make_dataset(4);
    tg_loader_options o = TG_LOADER_OPTIONS_INIT;
    o.batch_size = 0;
    tg_loader *ld = NULL;
    cr_assert(eq(int, tg_loader_new(&ld, ds, &o), TG_EINVAL));
    cr_assert(eq(int, tg_loader_new(&ld, NULL, NULL), TG_EINVAL));
    cr_assert(ld == NULL);
    cr_assert(eq(int, tg_loader_new(&ld, ds, NULL), 0));   /* defaults: one batch of 4 */
    cr_assert(eq(i64, tg_loader_num_batches(ld), 1));
    tg_loader_free(ld);
    o.batch_size = INT64_MAX;   /* one partial batch, or none with drop_last (UBSan: no overflow) */
    cr_assert(eq(int, tg_loader_new(&ld, ds, &o), 0));
    cr_assert(eq(i64, tg_loader_num_batches(ld), 1));
    tg_loader_free(ld);
    o.drop_last = true;
    cr_assert(eq(int, tg_loader_new(&ld, ds, &o), 0));
    cr_assert(eq(i64, tg_loader_num_batches(ld), 0));
    cr_assert(eq(int, tg_loader_reset(ld, -2), TG_EINVAL));
    cr_assert(eq(int, tg_loader_next(ld, NULL, NULL), TG_EINVAL));
    tg_loader_free(ld);
    tg_dataset_release(ds);
}

/* The samples of every batch of one epoch: ids[k][0..len[k]). */
typedef struct epoch_batches {
    int64_t ids[12][12], len[12];
    int n;
} epoch_batches;

static void shard_epoch(tg_dataset *ds, const tg_loader_options *o, int rank, int world,
                        epoch_batches *eb)
{
    tg_loader *ld;
    cr_assert(eq(int, tg_loader_new(&ld, ds, o), 0));
    cr_assert(eq(int, tg_loader_set_shard(ld, rank, world), 0));
    cr_assert(eq(int, tg_loader_reset(ld, 1), 0));
    tg_tensor *x, *y;
    eb->n = 0;
    while (tg_loader_next(ld, &x, &y) == 1) {
        int64_t b = tg_tensor_dim(x, 0);
        for (int64_t i = 0; i < b; i++)
            eb->ids[eb->n][i] = sample_of((const float *)tg_tensor_cdata(x) + 4 * i);
        eb->len[eb->n++] = b;
        tg_tensor_release(x);
        tg_tensor_release(y);
    }
    cr_assert(eq(i64, tg_loader_num_batches(ld), eb->n), "rank %d of %d", rank, world);
    tg_loader_free(ld);
}

/* Rank r's k-th batch is its slice of the k-th batch of one loader with
 * batch world * b; the ranks' k-th batches, in rank order, are that batch,
 * the last one padded to a multiple of world with the epoch's first samples
 * (PyTorch's DistributedSampler). */
static void expect_shards_make_global_batches(int64_t n, int64_t b, int world,
                                              const int64_t *want_len0)
{
    tg_dataset *ds = make_dataset(n);
    tg_loader_options o = TG_LOADER_OPTIONS_INIT;
    o.batch_size = b * world;
    o.seed = 5;
    epoch_batches whole, part[3];
    shard_epoch(ds, &o, 0, 1, &whole);
    o.batch_size = b;
    for (int r = 0; r < world; r++) shard_epoch(ds, &o, r, world, &part[r]);
    int64_t seen = 0;
    for (int k = 0; k < part[0].n; k++) {
        int64_t pos = 0;
        for (int r = 0; r < world; r++) {
            cr_assert(eq(int, part[r].n, part[0].n), "every rank does the same steps");
            cr_assert(eq(i64, part[r].len[k], want_len0[r + k * world]), "batch %d rank %d", k, r);
            for (int64_t i = 0; i < part[r].len[k]; i++, pos++) {
                const int64_t pad = pos - whole.len[k];   /* >= 0: the epoch's pad-th sample */
                cr_assert(eq(i64, part[r].ids[k][i],
                             pad < 0 ? whole.ids[k][pos] : whole.ids[0][pad % n]),
                          "batch %d rank %d sample %lld", k, r, (long long)i);
            }
        }
        cr_assert(pos >= whole.len[k] && pos < whole.len[k] + world, "batch %d", k);
        seen += pos;
    }
    /* the whole epoch, the last run padded to a multiple of the world size */
    cr_assert(eq(int, part[0].n, whole.n));
    cr_assert(eq(i64, seen, (n + world - 1) / world * world));
    tg_dataset_release(ds);
}

Test(data_loader, loader_shards_split_each_global_batch_between_ranks)
{
    expect_shards_make_global_batches(12, 2, 2, (const int64_t[]){2, 2, 2, 2, 2, 2});
    /* 11 = 6 + 5: the last run is padded to 6 with the epoch's first sample */
    expect_shards_make_global_batches(11, 2, 3, (const int64_t[]){2, 2, 2, 2, 2, 2});
    /* 10 = 9 + 1: a remainder of 1 < 3 ranks is padded to 3 */
    expect_shards_make_global_batches(10, 3, 3, (const int64_t[]){3, 3, 3, 1, 1, 1});
    /* 2 samples over 3 ranks: the padding wraps around the epoch */
    expect_shards_make_global_batches(2, 2, 3, (const int64_t[]){1, 1, 1});
    tg_dataset *ds = make_dataset(4);
    tg_loader *ld;
    cr_assert(eq(int, tg_loader_new(&ld, ds, NULL), 0));
    cr_assert(eq(int, tg_loader_set_shard(ld, 2, 2), TG_EINVAL));
    cr_assert(eq(int, tg_loader_set_shard(ld, 0, 0), TG_EINVAL));
    cr_assert(eq(int, tg_loader_set_shard(ld, 0, INT32_MAX), TG_OK));
    tg_loader_free(ld);
    tg_dataset_release(ds);
}
