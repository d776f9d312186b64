/* tests/test_transforms_options.c - the loader's augmentation options
 * beyond their values: draws that depend on (seed, epoch, index) alone
 * (a resumed loader, shards against one process), defaults that change
 * nothing, and the refusals of bad options. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"
#include "transforms_fixtures.h"

TestSuite(transforms);

/* Saving the position mid-epoch and resuming on a new loader (as a
 * checkpoint does) gives the same batches, bit for bit. */
Test(transforms, a_resumed_loader_hands_out_the_same_batches)
{
    tg_st_file *g = th_golden_load("transforms.safetensors");
    int64_t im[4];
    tg_dataset *ds = aug_dataset(g, 20, im);
    tg_loader_options lo = {3, true, 5, false};
    tg_augment_options ao = all_of_them();
    tg_loader *a, *b;
    OK(tg_loader_new(&a, ds, &lo));
    OK(tg_loader_set_augment(a, &ao));
    OK(tg_loader_reset(a, 2));
    tg_tensor *x, *y;
    for (int k = 0; k < 3; k++) {
        cr_assert(eq(int, tg_loader_next(a, &x, &y), 1));
        tg_tensor_release(x);
        tg_tensor_release(y);
    }
    int64_t epoch, index;
    tg_loader_position(a, &epoch, &index);
    cr_assert(epoch == 2 && index == 9);
    OK(tg_loader_new(&b, ds, &lo));
    OK(tg_loader_set_augment(b, &ao));
    OK(tg_loader_set_position(b, epoch, index));
    run ra = {0}, rb = {0};
    drain(&ra, a);
    drain(&rb, b);
    cr_assert(ra.n > 0);
    cr_assert(eq(i64, ra.n, rb.n));
    cr_assert(eq(i64, ra.n_labels, 11));
    cr_assert(memcmp(ra.x, rb.x, (size_t)ra.n * 4) == 0);
    cr_assert(memcmp(ra.labels, rb.labels, (size_t)ra.n_labels * 8) == 0);
    /* Another epoch draws otherwise. */
    run rc = {0};
    OK(tg_loader_set_position(b, 3, index));
    drain(&rc, b);
    cr_assert(memcmp(ra.x, rc.x, (size_t)ra.n * 4) != 0);
    run_free(&ra);
    run_free(&rb);
    run_free(&rc);
    tg_loader_free(a);
    tg_loader_free(b);
    tg_dataset_release(ds);
    tg_st_free(g);
}

/* Three ranks with batch 2: batch k of the ranks, side by side, is batch k
 * of one process with batch 6, augmentation included; the padded last run
 * repeats the epoch's first samples with their own draws. */
Test(transforms, shards_together_are_the_single_process_batches)
{
    tg_st_file *g = th_golden_load("transforms.safetensors");
    int64_t im[4];
    enum { N = 16, W = 3, B = 2 };
    tg_dataset *ds = aug_dataset(g, N, im);
    tg_augment_options ao = all_of_them();
    tg_loader_options one = {W * B, true, 11, false}, each = {B, true, 11, false};
    tg_loader *single, *rank[W];
    OK(tg_loader_new(&single, ds, &one));
    OK(tg_loader_set_augment(single, &ao));
    for (int r = 0; r < W; r++) {
        OK(tg_loader_new(&rank[r], ds, &each));
        OK(tg_loader_set_shard(rank[r], r, W));
        OK(tg_loader_set_augment(rank[r], &ao));
    }
    const int64_t per = im[0] * 5 * 6;
    for (int64_t epoch = 0; epoch < 2; epoch++) {
        OK(tg_loader_reset(single, epoch));
        for (int r = 0; r < W; r++) OK(tg_loader_reset(rank[r], epoch));
        run s = {0};
        drain(&s, single);
        cr_assert(eq(i64, s.n_labels, N));
        int64_t pos = 0;   /* the position in the single process's epoch */
        for (int k = 0; k < 3; k++)
            for (int r = 0; r < W; r++) {
                tg_tensor *x, *y;
                cr_assert(eq(int, tg_loader_next(rank[r], &x, &y), 1));
                cr_assert(eq(i64, tg_tensor_dim(x, 0), B));
                for (int64_t i = 0; i < B; i++, pos++) {
                    /* past the end: the epoch's first samples again */
                    int64_t p = pos < N ? pos : pos - N;
                    cr_assert(eq(i64, ((const int64_t *)tg_tensor_cdata(y))[i], s.labels[p]));
                    cr_assert(memcmp((const float *)tg_tensor_cdata(x) + i * per,
                                     s.x + p * per, (size_t)per * 4) == 0,
                              "epoch %lld rank %d batch %d sample %lld", (long long)epoch, r, k,
                              (long long)i);
                }
                tg_tensor_release(x);
                tg_tensor_release(y);
            }
        cr_assert(eq(i64, pos, 18));
        run_free(&s);
    }
    for (int r = 0; r < W; r++) tg_loader_free(rank[r]);
    tg_loader_free(single);
    tg_dataset_release(ds);
    tg_st_free(g);
}

/* Options left at their defaults (or NULL) change nothing: the batches are
 * a plain loader's, bit for bit. */
Test(transforms, default_options_change_nothing)
{
    tg_st_file *g = th_golden_load("transforms.safetensors");
    int64_t im[4];
    tg_dataset *ds = aug_dataset(g, 7, im);
    tg_loader_options lo = {3, true, 9, false};
    run want = {0};
    tg_loader *plain;
    OK(tg_loader_new(&plain, ds, &lo));
    drain(&want, plain);
    tg_loader_free(plain);
    tg_augment_options init = TG_AUGMENT_OPTIONS_INIT, on = all_of_them();
    for (int k = 0; k < 2; k++) {
        tg_loader *ld;
        OK(tg_loader_new(&ld, ds, &lo));
        OK(tg_loader_set_augment(ld, &on));
        OK(tg_loader_set_augment(ld, k ? NULL : &init));
        run got = {0};
        drain(&got, ld);
        cr_assert(eq(i64, got.n, want.n));
        cr_assert(memcmp(got.x, want.x, (size_t)got.n * 4) == 0);
        run_free(&got);
        tg_loader_free(ld);
    }
    run_free(&want);
    tg_dataset_release(ds);
    tg_st_free(g);
}

Test(transforms, bad_augment_options_are_refused)
{
    tg_st_file *g = th_golden_load("transforms.safetensors");
    int64_t im[4];   /* images (3, 6, 7) */
    tg_dataset *ds = aug_dataset(g, 4, im);
    cr_assert(im[0] == 3 && im[1] == 6 && im[2] == 7);
    const double two[2] = {0.5, 0.5}, zero[3] = {0.5, 1e-50, 0.5}, nan3[3] = {1, NAN, 1};
    struct {
        tg_augment_options o;
        int rc;
        const char *msg;
    } bad[] = {
        {{-0.1, {0, 0}, {0}, 0, 0, 0, NULL, NULL, 0, false, AUG_NEW_OFF}, TG_EINVAL,
         "hflip_p=-0.1 must be in [0, 1]"},
        {{1.5, {0, 0}, {0}, 0, 0, 0, NULL, NULL, 0, false, AUG_NEW_OFF}, TG_EINVAL,
         "hflip_p=1.5 must be in [0, 1]"},
        {{NAN, {0, 0}, {0}, 0, 0, 0, NULL, NULL, 0, false, AUG_NEW_OFF}, TG_EINVAL,
         "hflip_p=nan must be in [0, 1]"},
        {{0, {-1, 2}, {0}, 0, 0, 0, NULL, NULL, 0, false, AUG_NEW_OFF},
         TG_EINVAL, "crop[0]=-1 must be >= 0"},
        {{0, {0, 3}, {0}, 0, 0, 0, NULL, NULL, 0, false, AUG_NEW_OFF}, TG_EINVAL,
         "crop={0, 3} must be {0, 0} (none) or two extents >= 1"},
        {{0, {2, 2}, {0, -4, 0, -2}, 0, 0, 0, NULL, NULL, 0, false, AUG_NEW_OFF}, TG_EINVAL,
         "padding[1] + padding[3] = -6 leaves the images' height 6 no pixel"},
        {{0, {2, 2}, {0, -INT32_MAX - 1LL, 0, 0}, 0, 0, 0, NULL, NULL, 0, false, AUG_NEW_OFF},
         TG_EINVAL, "padding[1]=-2147483648 must be in [-2147483647, 2147483647]"},
        {{0, {0, 0}, {1, 0, 0, 0}, 0, 0, 0, NULL, NULL, 0, false, AUG_NEW_OFF}, TG_EINVAL,
         "padding is for the crop; crop must be given with it"},
        {{0, {2, 2}, {0}, TG_PAD_CIRCULAR, 0, 0, NULL, NULL, 0, false, AUG_NEW_OFF}, TG_EINVAL,
         "padding_mode=3 must be TG_PAD_CONSTANT, TG_PAD_REFLECT or TG_PAD_REPLICATE"},
        {{0, {2, 2}, {0, 0, 7, 0}, TG_PAD_REFLECT, 0, 0, NULL, NULL, 0, false, AUG_NEW_OFF},
         TG_EINVAL, "padding[2]=7 must be < the images' width 7 with TG_PAD_REFLECT"},
        {{0, {2, 2}, {0, 6, 0, 0}, TG_PAD_REFLECT, 0, 0, NULL, NULL, 0, false, AUG_NEW_OFF},
         TG_EINVAL, "padding[1]=6 must be < the images' height 6 with TG_PAD_REFLECT"},
        {{0, {2, 2}, {0}, 0, INFINITY, 0, NULL, NULL, 0, false, AUG_NEW_OFF}, TG_EINVAL,
         "fill=inf must be finite"},
        {{0, {0, 0}, {0}, 0, 0, 2, two, two, 0, false, AUG_NEW_OFF}, TG_EINVAL,
         "norm_channels=2 must be 0 (none), 1 or 3 (the images' channels)"},
        {{0, {0, 0}, {0}, 0, 0, 3, NULL, zero, 0, false, AUG_NEW_OFF}, TG_EINVAL,
         "mean and std must not be NULL with norm_channels=3"},
        {{0, {0, 0}, {0}, 0, 0, 3, zero, nan3, 0, false, AUG_NEW_OFF},
         TG_EINVAL, "std[1]=nan must be finite"},
        {{0, {0, 0}, {0}, 0, 0, 3, two, zero, 0, false, AUG_NEW_OFF}, TG_EINVAL,
         "std[1]=1e-50 is 0 in f32 (a division by zero)"},
        /* torchvision: "Required crop size (7, 7) is larger than input image size (6, 7)" */
        {{0, {7, 7}, {0}, 0, 0, 0, NULL, NULL, 0, false, AUG_NEW_OFF}, TG_ESHAPE,
         "crop=(7, 7) is larger than the padded images, (6, 7) (height, width)"},
        {{0, {9, 8}, {1, 1, 1, 1}, 0, 0, 0, NULL, NULL, 0, false, AUG_NEW_OFF}, TG_ESHAPE,
         "crop=(9, 8) is larger than the padded images, (8, 9)"},
    };
    tg_loader *ld;
    OK(tg_loader_new(&ld, ds, NULL));
    /* a crop + flip set before stays in force after each refusal */
    tg_augment_options keep = {1, {4, 4}, {0}, TG_PAD_CONSTANT, 0, 0, NULL, NULL, 0, false,
                               AUG_NEW_OFF};
    OK(tg_loader_set_augment(ld, &keep));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert(eq(int, tg_loader_set_augment(ld, &bad[i].o), bad[i].rc), "case %zu", i);
        th_expect_in(tg_error_message(), "loader_set_augment: ");
        th_expect_in(tg_error_message(), bad[i].msg);
    }
    tg_tensor *x, *y;
    cr_assert(eq(int, tg_loader_next(ld, &x, &y), 1));
    cr_assert(tg_tensor_dim(x, 2) == 4 && tg_tensor_dim(x, 3) == 4);
    tg_tensor_release(x);
    tg_tensor_release(y);
    cr_assert(eq(int, tg_loader_set_augment(NULL, &keep), TG_EINVAL));
    th_expect_in(tg_error_message(), "loader_set_augment: ld must not be NULL");
    tg_loader_free(ld);
    tg_dataset_release(ds);
    tg_st_free(g);
}

Test(transforms, bad_flip_and_padding_options_are_refused)
{
    tg_st_file *g = th_golden_load("transforms.safetensors");
    int64_t im[4];   /* images (3, 6, 7) */
    tg_dataset *ds = aug_dataset(g, 4, im);
    const tg_pad_mode sym = TG_PAD_SYMMETRIC, refl = TG_PAD_REFLECT;
    struct {
        tg_augment_options o;
        const char *msg;
    } bad[] = {
        {{.vflip_p = -0.5}, "vflip_p=-0.5 must be in [0, 1]"},
        {{.vflip_p = 1.5}, "vflip_p=1.5 must be in [0, 1]"},
        {{.vflip_p = NAN}, "vflip_p=nan must be in [0, 1]"},
        {{.pad_if_needed = true}, "pad_if_needed is for the crop; crop must be given with it"},
        {{.crop = {2, 2}, .padding = {8, 0, 0, 0}, .padding_mode = sym},
         "padding[0]=8 must be <= the images' width 7 with TG_PAD_SYMMETRIC"},
        {{.crop = {2, 2}, .padding = {7, 6, 0, 7}, .padding_mode = sym},
         "padding[3]=7 must be <= the images' height 6 with TG_PAD_SYMMETRIC"},
        {{.crop = {6, 14}, .pad_if_needed = true, .padding_mode = refl},
         "pad_if_needed pads the width by crop[1] - 7 = 7 on each side, which must be < the "
         "padded width 7 with TG_PAD_REFLECT"},
        {{.crop = {15, 9}, .padding = {0, 1, 0, 0}, .pad_if_needed = true, .padding_mode = sym},
         "pad_if_needed pads the height by crop[0] - 7 = 8 on each side, which must be <= the "
         "padded height 7 with TG_PAD_SYMMETRIC"},
        {{.crop = {4, (int64_t)1 << 31}, .pad_if_needed = true},
         "crop[1]=2147483648 must be <= 2147483647 with pad_if_needed"},
        {{.crop = {2, 2}, .padding_mode = (tg_pad_mode)5},
         "padding_mode=5 must be TG_PAD_CONSTANT, TG_PAD_REFLECT or TG_PAD_REPLICATE, or "
         "torchvision's TG_PAD_SYMMETRIC"},
    };
    tg_loader *ld;
    OK(tg_loader_new(&ld, ds, NULL));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert(eq(int, tg_loader_set_augment(ld, &bad[i].o), TG_EINVAL), "case %zu", i);
        th_expect_in(tg_error_message(), "loader_set_augment: ");
        th_expect_in(tg_error_message(), bad[i].msg);
    }
    /* at the limits: symmetric paddings of the whole side, pad_if_needed's
     * too; a crop larger than the image with pad_if_needed */
    const tg_augment_options fine[] = {
        {.crop = {2, 2}, .padding = {7, 6, 7, 6}, .padding_mode = sym},
        {.crop = {12, 14}, .pad_if_needed = true, .padding_mode = sym},
        {.crop = {11, 13}, .pad_if_needed = true, .padding_mode = refl},
        {.crop = {40, 50}, .pad_if_needed = true},
    };
    /* the largest crop with pad_if_needed is taken, and a batch of it is
     * out of memory, not a crash */
    const tg_augment_options huge = {.crop = {INT32_MAX, INT32_MAX}, .pad_if_needed = true};
    OK(tg_loader_set_augment(ld, &huge));
    tg_tensor *hx = NULL, *hy = NULL;
    cr_assert(eq(int, tg_loader_next(ld, &hx, &hy), TG_ENOMEM));
    th_expect_in(tg_error_message(), "out of memory for the augmented batch (4, 3, 2147483647, "
                                     "2147483647)");
    cr_assert(hx == NULL && hy == NULL);
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        OK(tg_loader_set_augment(ld, &fine[i]));
        tg_tensor *x, *y;
        OK(tg_loader_reset(ld, 0));
        cr_assert(eq(int, tg_loader_next(ld, &x, &y), 1));
        cr_assert(tg_tensor_dim(x, 2) == fine[i].crop[0] && tg_tensor_dim(x, 3) == fine[i].crop[1],
                  "case %zu", i);
        tg_tensor_release(x);
        tg_tensor_release(y);
    }
    /* tg_pad has no symmetric mode (torch's F.pad has none) */
    tg_tensor *t = th_tensor_from(TG_F32, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4}), *p;
    cr_assert(eq(int, tg_pad(&p, t, 2, (int64_t[]){1, 1}, sym, 0), TG_EINVAL));
    th_expect_in(tg_error_message(), "pad: mode TG_PAD_SYMMETRIC is torchvision's");
    tg_tensor_release(t);
    tg_loader_free(ld);
    tg_dataset_release(ds);
    tg_st_free(g);
}
