/* tests/fuzz/target_safetensors.c - the "safetensors" fuzz target.
 *
 * Files go to one private directory (scratch_path) that is removed at exit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tapegrad/tapegrad.h"
#include "targets.h"

static char scratch_dir[64];

static void scratch_remove(void)
{
    char path[128];
    static const char *const names[] = {"roundtrip.safetensors"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", scratch_dir, names[i]);
        unlink(path);
    }
    rmdir(scratch_dir);
}

/* "<private directory>/<name>" in buf, or NULL when no directory can be made. */
static const char *scratch_path(char *buf, size_t n, const char *name)
{
    if (!scratch_dir[0]) {
        strcpy(scratch_dir, "/tmp/tg_fuzz_XXXXXX");
        if (!mkdtemp(scratch_dir)) {
            scratch_dir[0] = '\0';
            return NULL;
        }
        atexit(scratch_remove);
    }
    snprintf(buf, n, "%s/%s", scratch_dir, name);
    return buf;
}

/* Tensors and metadata of a and b agree (in order). */
static int files_identical(const tg_st_file *a, const tg_st_file *b)
{
    if (!tg_fuzz_same_tensors(a, b))
        return tg_fuzz_broken("safetensors", "round trip changed the tensors");
    if (tg_st_meta_count(a) != tg_st_meta_count(b))
        return tg_fuzz_broken("safetensors", "round trip changed the metadata count %d -> %d",
                      tg_st_meta_count(a), tg_st_meta_count(b));
    for (int i = 0; i < tg_st_meta_count(a); i++) {
        const char *ka, *va, *kb, *vb;
        tg_st_meta_at(a, i, &ka, &va);
        tg_st_meta_at(b, i, &kb, &vb);
        if (strcmp(ka, kb) != 0 || strcmp(va, vb) != 0)
            return tg_fuzz_broken("safetensors", "round trip changed metadata %d ('%s')", i, ka);
    }
    return 0;
}

int tg_fuzz_safetensors(const uint8_t *data, size_t size)
{
    tg_st_file *f = NULL, *back = NULL;
    int rc = tg_safetensors_parse(&f, data, size);
    if (rc < 0)
        return f ? tg_fuzz_broken("safetensors", "a refused parse set *out")
                 : tg_fuzz_refused("safetensors", "tg_safetensors_parse", rc);
    char path[128];
    int bad = 0;
    if (!scratch_path(path, sizeof path, "roundtrip.safetensors")) {
        bad = tg_fuzz_broken("safetensors", "no scratch directory");
    } else if ((rc = tg_safetensors_save(f, path)) < 0) {
        bad = tg_fuzz_broken("safetensors", "a parsed file does not save: %s", tg_error_message());
    } else if ((rc = tg_safetensors_load(&back, path)) < 0) {
        bad = tg_fuzz_broken("safetensors", "a saved file does not load: %s", tg_error_message());
    } else {
        bad = files_identical(f, back);
    }
    tg_st_free(back);
    tg_st_free(f);
    return bad;
}
