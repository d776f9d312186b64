/* src/data/augment.h - a loader's random crops, flips, rotations, colour
 * jitter and normalize (tg_loader_set_augment), applied to each batch by
 * src/data/loader.c. */
#ifndef TAPEGRAD_DATA_AUGMENT_H
#define TAPEGRAD_DATA_AUGMENT_H

#include <stdint.h>

#include "tapegrad/data.h"

typedef struct tg__augment tg__augment;

/* A checked copy of o for ds's images (the rules of tg_loader_set_augment);
 * *out is NULL when o asks for nothing. */
int tg__augment_new(tg__augment **out, const tg_augment_options *o, const tg_dataset *ds);
/* NULL does nothing. */
void tg__augment_free(tg__augment *a);

/* Replaces *images, the batch (n, C, H, W) tg_dataset_batch made of ds's
 * samples ids[0..n) (owned by the caller, who must hold the only
 * reference), by its augmented version, the draws of epoch `epoch` of a
 * loader seeded with seed.  On error *images is unchanged or a partly
 * augmented batch that replaced it; the caller releases it either way. */
int tg__augment_apply(const tg__augment *a, const tg_dataset *ds, tg_tensor **images,
                      const int64_t *ids, uint64_t seed, int64_t epoch);

#endif
