/* uthash's allocator (src/hash.h), with the failure tests inject. */
#include <stdlib.h>

#include "core/core.h"

/* The uthash allocations still to succeed on this thread before one fails;
 * -1: none is to fail.  Off, the hook costs one thread-local load and a
 * branch before malloc, and uthash allocates only when it makes a table or
 * doubles its buckets, never once per element. */
static _Thread_local int countdown = -1;

void *tg__hash_malloc(size_t size)
{
    if (countdown >= 0 && countdown-- == 0) return NULL;
    return malloc(size);
}

int tg__hash_fail_after(int n)
{
    int prev = countdown;
    countdown = n < 0 ? -1 : n;
    return prev;
}
