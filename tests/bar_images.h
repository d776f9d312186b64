/* tests/bar_images.h - a small synthetic image set for training tests
 * (test_train.c, dist_train.c): n 28x28 u8 images, each a bright bar of
 * width 4..10 at a place that depends on its index, on a dark background,
 * labelled index % 4. */
#ifndef TG_TESTS_BAR_IMAGES_H
#define TG_TESTS_BAR_IMAGES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tapegrad/data.h"
#include "tapegrad/tensor.h"

/* The dataset, or NULL when it cannot be made. */
static inline tg_dataset *bar_images(int64_t n)
{
    uint8_t *px = malloc((size_t)n * 28 * 28), *labels = malloc((size_t)n);
    tg_tensor *im = NULL, *lb = NULL;
    tg_dataset *ds = NULL;
    if (px && labels) {
        memset(px, 10, (size_t)n * 28 * 28);
        for (int64_t i = 0; i < n; i++) {
            const int64_t w = 4 + 2 * (i % 4), x0 = 4 + i % 13;
            for (int64_t y = 4; y < 24; y++)
                for (int64_t x = x0; x < x0 + w && x < 28; x++) px[(i * 28 + y) * 28 + x] = 240;
            labels[i] = (uint8_t)(i % 4);
        }
        if (tg_tensor_from_data(&im, TG_U8, 3, (int64_t[]){n, 28, 28}, px) == TG_OK &&
            tg_tensor_from_data(&lb, TG_U8, 1, (int64_t[]){n}, labels) == TG_OK &&
            tg_dataset_from_tensors(&ds, im, lb) != TG_OK)
            ds = NULL;
    }
    tg_tensor_release(im);
    tg_tensor_release(lb);
    free(px);
    free(labels);
    return ds;
}

#endif
