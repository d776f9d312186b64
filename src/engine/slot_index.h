/* src/engine/slot_index.h - the result slots of tg_grad's inputs by a key
 * (prefix tg__slot_index), which the run in engine.c looks up in O(1). */
#ifndef TAPEGRAD_ENGINE_SLOT_INDEX_H
#define TAPEGRAD_ENGINE_SLOT_INDEX_H

#include "core/core.h"

/* The result slots of tg_grad's inputs by a key (an input tensor, or the
 * grad_fn of a non-leaf input).  Each distinct key has one entry, holding the
 * first slot with that key; next[j] chains the later ones in increasing order
 * (-1 ends it).  An input passed twice, or two tensors that share one grad_fn,
 * so fill every one of their slots, as torch.autograd.grad does. */
typedef struct tg__slot_key {
    const void *key;
    int first, last;
    UT_hash_handle hh;
} tg__slot_key;

typedef struct tg__slot_index {
    tg__slot_key *table;          /* uthash head */
    tg__slot_key *keys;           /* the entries: at most one per slot */
    int n_keys;
    int *next;                    /* one per slot */
} tg__slot_index;

/* Room for n slots in ix, zeroed beforehand; TG_ENOMEM leaves what it could
 * allocate for tg__slot_index_free. */
int tg__slot_index_init(tg__slot_index *ix, int n);
/* Frees what ix holds (a zeroed ix too). */
void tg__slot_index_free(tg__slot_index *ix);
/* The first slot with key, or -1. */
int tg__slot_index_first(const tg__slot_index *ix, const void *key);
/* Adds slot j (greater than every slot added before) under key.  On
 * TG_ENOMEM the index is as it was, and still consistent. */
int tg__slot_index_add(tg__slot_index *ix, const void *key, int j);

#endif
