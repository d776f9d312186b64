/* src/hash.h - uthash as the library uses it: an allocation that fails inside
 * uthash is an error the caller reports, never an exit.  Not installed.
 *
 * uthash's default, when its malloc fails inside HASH_ADD, is exit(-1).  In
 * its non-fatal mode (HASH_NONFATAL_OOM) the add is undone instead: the user
 * guide ("Out of memory") says the table is rolled back to its state before
 * the call, nothing leaks, and the element's hh.tbl is NULL.  That holds for
 * each of the allocations an add can make: the table and its first buckets
 * (first add), and the doubled bucket array when a bucket grows too long
 * (a later add, to a table that is then left as it was, still usable, with
 * its old buckets).  So the element is simply not in the table, and every
 * site must check TG_HASH_ADD_FAILED right after each HASH_ADD*, then free
 * or keep the element itself and return TG_ENOMEM (or, where that is
 * correct, go on without the entry: src/core/storage.c's cache).
 *
 * Every file gets uthash through this header (internal.h includes it), so
 * that no table in the library is built in the fatal mode. */
#ifndef TAPEGRAD_HASH_H
#define TAPEGRAD_HASH_H

#ifdef UTHASH_H
#error "<uthash.h> was included before src/hash.h: its tables would exit(-1) when out of memory"
#endif

#include <stddef.h>

#define HASH_NONFATAL_OOM 1
#define uthash_malloc(sz) tg__hash_malloc(sz)
#include <uthash.h>

/* True when the HASH_ADD* just made with elt did not add it, for want of
 * memory; the table is then as it was before that add. */
#define TG_HASH_ADD_FAILED(elt) ((elt)->hh.tbl == NULL)

/* malloc for uthash, with a failure that tests can inject. */
void *tg__hash_malloc(size_t size);

/* Tests: makes the uthash allocation after the next n on this thread fail,
 * once (n < 0: none fails; the default).  Returns the previous countdown:
 * the number of allocations that were still to succeed before the failing
 * one, or -1 when it has failed already or none was set.  So
 * `tg__hash_fail_after(k); op(); fired = tg__hash_fail_after(-1) < 0;` runs
 * op with its (k+1)-th uthash allocation failing, and INT_MAX minus what
 * tg__hash_fail_after(-1) returns after tg__hash_fail_after(INT_MAX); op();
 * counts op's uthash allocations. */
int tg__hash_fail_after(int n);

#endif
