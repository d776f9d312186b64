/* The result slots of tg_grad's inputs by a key:
 * a uthash over the keys and a chain of the later slots of each. */
#include <stdlib.h>

#include "engine/slot_index.h"

int tg__slot_index_init(tg__slot_index *ix, int n)
{
    ix->keys = tg__calloc((size_t)n, sizeof *ix->keys);
    ix->next = tg__calloc((size_t)n, sizeof *ix->next);
    return ix->keys && ix->next ? TG_OK : TG_ENOMEM;
}

void tg__slot_index_free(tg__slot_index *ix)
{
    HASH_CLEAR(hh, ix->table);
    free(ix->keys);
    free(ix->next);
}

int tg__slot_index_first(const tg__slot_index *ix, const void *key)
{
    tg__slot_key *k = NULL;
    HASH_FIND_PTR(ix->table, &key, k);
    return k ? k->first : -1;
}

int tg__slot_index_add(tg__slot_index *ix, const void *key, int j)
{
    tg__slot_key *k = NULL;
    HASH_FIND_PTR(ix->table, &key, k);
    ix->next[j] = -1;
    if (k) {
        ix->next[k->last] = j;
        k->last = j;
        return TG_OK;
    }
    k = &ix->keys[ix->n_keys];
    *k = (tg__slot_key){.key = key, .first = j, .last = j};
    HASH_ADD_PTR(ix->table, key, k);
    if (TG_HASH_ADD_FAILED(k))
        return tg__error(TG_ENOMEM, "grad: out of memory indexing the inputs");
    ix->n_keys++;
    return TG_OK;
}
