/* src/nn/checkpoint_dropout.c - the Dropout mask counts of a checkpoint's
 * module slots.
 *
 * A Dropout's mask k is a function of (seed, k) alone, so a resumed run
 * continues the sequence only if it knows how many masks were drawn.  That
 * count is run state outside the state dict (PyTorch's Dropout has no
 * state, and a checkpoint's module keys must load into a torch model), so
 * a module slot keeps it in the file's metadata, one entry per Dropout:
 *     "<slot>.<dotted path>.dropout_calls" = the count in decimal
 * (a Dropout that is the slot's module itself: "<slot>.dropout_calls").
 * Metadata is a namespace of its own, and a slot's keys start with its name,
 * which no other slot's name shares (check_name), so no entry can clash
 * with a tensor key or another slot's; tg_checkpoint_save refuses user
 * metadata on the same key.  A file without an entry leaves that
 * Dropout's count as it is. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/checkpoint_internal.h"
#include "nn/module_internal.h"

#define SUFFIX ".dropout_calls"
#define KEY_MAX (TG_MODULE_NAME_MAX + 160)

typedef int (*dropout_fn)(tg_module *d, const char *key, void *user);

/* Calls fn for every Dropout at or below m; key[0..len) is m's key prefix
 * (the slot name, then the dotted path), a buffer of KEY_MAX chars. */
static int each_dropout(tg_module *m, char *key, size_t len, dropout_fn fn, void *user)
{
    uint64_t calls = 0;
    if (tg__nn_dropout_calls(m, &calls)) {
        TG_CHECK(len + sizeof SUFFIX <= KEY_MAX, TG_EINVAL,
                 "checkpoint: the metadata key of Dropout '%s' is too long", key);
        memcpy(key + len, SUFFIX, sizeof SUFFIX);
        int rc = fn(m, key, user);
        key[len] = '\0';
        return rc;
    }
    for (int i = 0; i < tg_module_child_count(m); i++) {
        const char *name = tg_module_child_name_at(m, i);
        size_t n = strlen(name);
        TG_CHECK(len + 1 + n < KEY_MAX, TG_EINVAL,
                 "checkpoint: the metadata key of '%s.%s' is too long", key, name);
        key[len] = '.';
        memcpy(key + len + 1, name, n + 1);
        int rc = each_dropout(tg_module_child_at(m, i), key, len + 1 + n, fn, user);
        key[len] = '\0';
        TG_TRY(rc);
    }
    return TG_OK;
}

static int walk(tg_module *m, const char *slot, dropout_fn fn, void *user)
{
    char key[KEY_MAX];
    size_t len = strlen(slot);
    TG_ASSERT(len < KEY_MAX);   /* slot names are < 128 chars */
    memcpy(key, slot, len + 1);
    return each_dropout(m, key, len, fn, user);
}

static int save_fn(tg_module *d, const char *key, void *user)
{
    uint64_t calls = 0;
    tg__nn_dropout_calls(d, &calls);
    char v[24];
    snprintf(v, sizeof v, "%" PRIu64, calls);
    return tg_st_meta_set(user, key, v);
}

int tg__checkpoint_dropouts_save(tg_module *m, const char *slot, tg_st_file *f)
{
    return walk(m, slot, save_fn, f);
}

/* The count under key in f: TG_ENOTFOUND without one (not an error for the
 * caller), TG_EFORMAT for anything but a decimal u64. */
static int read_count(const tg_st_file *f, const char *key, uint64_t *calls)
{
    const char *v = tg_st_meta_get(f, key);
    if (!v) return TG_ENOTFOUND;
    char *end = NULL;
    errno = 0;
    unsigned long long c = v[0] >= '0' && v[0] <= '9' ? strtoull(v, &end, 10) : 0;
    TG_CHECK(end != NULL && end != v && *end == '\0' && errno == 0, TG_EFORMAT,
             "checkpoint_load: metadata '%s' is '%.40s'; must be a count of Dropout masks "
             "(a decimal integer in [0, 2^64))", key, v);
    *calls = (uint64_t)c;
    return TG_OK;
}

static int check_fn(tg_module *d, const char *key, void *user)
{
    (void)d;
    uint64_t calls = 0;
    int rc = read_count(user, key, &calls);
    return rc == TG_ENOTFOUND ? TG_OK : rc;
}

int tg__checkpoint_dropouts_check(tg_module *m, const char *slot, const tg_st_file *f)
{
    return walk(m, slot, check_fn, (void *)f);
}

static int load_fn(tg_module *d, const char *key, void *user)
{
    uint64_t calls = 0;
    int rc = read_count(user, key, &calls);
    if (rc == TG_ENOTFOUND) return TG_OK;
    TG_TRY(rc);
    tg__nn_dropout_set_calls(d, calls);
    return TG_OK;
}

int tg__checkpoint_dropouts_load(tg_module *m, const char *slot, const tg_st_file *f)
{
    return walk(m, slot, load_fn, (void *)f);
}
