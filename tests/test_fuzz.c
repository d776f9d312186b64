/* tests/test_fuzz.c - every fuzz target (tests/fuzz/targets.h) over every
 * file of its committed corpus, tests/fuzz/corpus/<target>/, and over the
 * goldens it starts from.  A target returning -1 fails the test with the
 * file's name; a crash fails it too. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/targets.h"
#include "helpers.h"

static const tg_fuzz_target *target(const char *name)
{
    for (const tg_fuzz_target *t = tg_fuzz_targets; t->name; t++)
        if (strcmp(t->name, name) == 0)
            return t;
    cr_fatal("no fuzz target '%s'", name);
}

/* Runs target t on every regular file of <source root>/rel whose name ends
 * with suffix ("" for all); returns how many there were. */
static int replay(const tg_fuzz_target *t, const char *rel, const char *suffix)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", TG_SOURCE_ROOT, rel);
    DIR *d = opendir(dir);
    cr_assert(d != NULL, "cannot open %s", dir);
    int n = 0;
    const size_t ls = strlen(suffix);
    for (struct dirent *e; (e = readdir(d));) {
        const size_t le = strlen(e->d_name);
        if (e->d_name[0] == '.' || le < ls || strcmp(e->d_name + le - ls, suffix) != 0)
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len = 0;
        char *buf = th_read_file(path, &len);
        cr_assert(buf != NULL, "cannot read %s", path);
        int rc = t->run((const uint8_t *)buf, len);
        free(buf);
        cr_expect(eq(int, rc, 0), "fuzz target %s broke on %s", t->name, path);
        n++;
    }
    closedir(d);
    return n;
}

Test(fuzz, safetensors_corpus)
{
    const tg_fuzz_target *t = target("safetensors");
    cr_assert(replay(t, "tests/fuzz/corpus/safetensors", "") > 0);
    cr_assert(replay(t, "tests/golden", ".safetensors") > 10);
}

Test(fuzz, idx_corpus)
{
    cr_assert(replay(target("idx"), "tests/fuzz/corpus/idx", "") > 3);
}

Test(fuzz, checkpoint_corpus)
{
    cr_assert(replay(target("checkpoint"), "tests/fuzz/corpus/checkpoint", "") > 0);
}

Test(fuzz, case_corpus)
{
    const tg_fuzz_target *t = target("case");
    cr_assert(replay(t, "tests/fuzz/corpus/case", "") > 0);
    cr_assert(replay(t, "tests/golden", ".case.safetensors") > 30);
    cr_assert(replay(t, "tests/golden/quant", ".case.safetensors") > 0);
}

Test(fuzz, tape_corpus)
{
    cr_assert(replay(target("tape"), "tests/fuzz/corpus/tape", "") > 5);
}
