/* src/data/dataset_names.h - a dataset's class names set by a loader of the
 * data layer (src/data/image_folder.c: the folder names). */
#ifndef TAPEGRAD_DATA_DATASET_NAMES_H
#define TAPEGRAD_DATA_DATASET_NAMES_H

#include "tapegrad/data.h"

/* Labels stay below this, so that a dataset's class names stay small. */
#define TG__MAX_CLASSES 65536

/* Replaces ds's class names by copies of names[0..n) (NULL: "0", "1", ...);
 * n must be ds's class count.  TG_ENOMEM leaves the old names in place. */
int tg__dataset_set_class_names(tg_dataset *ds, int n, const char *const *names);

#endif
