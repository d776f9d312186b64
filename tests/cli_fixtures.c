/* The dcgan runs' fixtures of the cli test files; see cli_fixtures.h. */
#include "cli_fixtures.h"

#include <stdio.h>

#include "helpers.h"

void write_train_set(uint32_t n) { th_write_idx_set(th_tmp_dir, "train", n, 28, 7); }

bool file_exists(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}
