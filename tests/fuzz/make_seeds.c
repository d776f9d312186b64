/* tests/fuzz/make_seeds.c - writes the seed inputs that no other file
 * provides into the corpus folders: a valid checkpoint of the checkpoint
 * target's training state, and small IDX files, plain and gzip.
 *
 *   build-fuzz/tests/fuzz/make_seeds tests/fuzz/corpus
 *
 * (The case and safetensors targets start from tests/golden.) */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "tapegrad/status.h"
#include "targets.h"

static int write_idx(const char *dir, const char *name, const unsigned char *b, size_t n,
                     bool gzip)
{
    char path[512];
    snprintf(path, sizeof path, "%s/idx/%s", dir, name);
    gzFile f = gzopen(path, gzip ? "wb9" : "wbT");   /* T: no compression */
    if (!f || gzwrite(f, b, (unsigned)n) != (int)n) {
        fprintf(stderr, "make_seeds: cannot write %s\n", path);
        if (f) gzclose(f);
        return 1;
    }
    return gzclose(f) == Z_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds CORPUS_DIR\n");
        return 2;
    }
    /* u8 images (2, 2, 3), f32 vector (2), i32 labels (3) */
    static const unsigned char images[] = {0, 0, 0x08, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3,
                                           1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    static const unsigned char floats[] = {0, 0, 0x0D, 1, 0, 0, 0, 2,
                                           0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0};
    static const unsigned char ints[] = {0, 0, 0x0C, 1, 0, 0, 0, 3, 0, 0, 0, 1,
                                         0xff, 0xff, 0xff, 0xff, 0, 0, 1, 0};
    int bad = write_idx(argv[1], "images.idx", images, sizeof images, false);
    bad |= write_idx(argv[1], "images.idx.gz", images, sizeof images, true);
    bad |= write_idx(argv[1], "floats.idx", floats, sizeof floats, false);
    bad |= write_idx(argv[1], "ints.idx.gz", ints, sizeof ints, true);
    char path[512];
    snprintf(path, sizeof path, "%s/checkpoint/valid.safetensors", argv[1]);
    if (tg_fuzz_checkpoint_seed(path) < 0) {
        fprintf(stderr, "make_seeds: %s: %s\n", path, tg_error_message());
        bad = 1;
    }
    return bad;
}
