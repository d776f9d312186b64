/* Refcounted, 64-byte aligned byte buffers shared by views: zero-filled, or
 * left uninitialised for outputs a kernel overwrites whole. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define TG__ALIGN 64u

/* Whether TG_POISON_EMPTY=1 is set: uninitialised storages are then filled
 * with 0xFF bytes (NaN for floats, -1 for integers), so a kernel that reads
 * an output before writing it shows up in the tests (scripts/run_tests.sh
 * runs the sanitizer build that way).  Read once. */
static bool poison_empty(void)
{
    static _Atomic int cached = -1;   /* every thread that races here stores the same value */
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("TG_POISON_EMPTY");
        v = e && e[0] == '1';
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v == 1;
}

/* Bytes of tensor storage alive now, and the most alive at once since the
 * last reset (tg_memory_stats).  Process-wide; the peak update is a CAS loop
 * so concurrent allocations never lose a maximum. */
static _Atomic int64_t mem_current, mem_peak;

static void mem_account(int64_t delta)
{
    int64_t now = atomic_fetch_add(&mem_current, delta) + delta;
    int64_t peak = atomic_load(&mem_peak);
    while (now > peak && !atomic_compare_exchange_weak(&mem_peak, &peak, now)) {
    }
}

void tg_memory_stats(int64_t *current_bytes, int64_t *peak_bytes)
{
    if (current_bytes) *current_bytes = atomic_load(&mem_current);
    if (peak_bytes) *peak_bytes = atomic_load(&mem_peak);
}

void tg_memory_reset_peak(void) { atomic_store(&mem_peak, atomic_load(&mem_current)); }

static tg_storage *storage_alloc(size_t nbytes, bool zero)
{
    /* aligned_alloc wants a size that is a multiple of the alignment; an
     * empty tensor still gets one line so data is never NULL. */
    if (nbytes > SIZE_MAX - TG__ALIGN) {
        tg__error(TG_ENOMEM, "storage: %zu bytes is too large", nbytes);
        return NULL;
    }
    size_t padded = nbytes == 0 ? TG__ALIGN : (nbytes + TG__ALIGN - 1) / TG__ALIGN * TG__ALIGN;
    tg_storage *s = tg__malloc(sizeof *s);
    if (!s) return NULL;
    s->data = aligned_alloc(TG__ALIGN, padded);
    if (!s->data) {
        free(s);
        tg__error(TG_ENOMEM, "storage: out of memory allocating %zu bytes", padded);
        return NULL;
    }
    if (zero) memset(s->data, 0, padded);
    else if (poison_empty()) memset(s->data, 0xFF, padded);
    s->refcount = 1;
    s->nbytes = nbytes;
    s->version = 0;
    mem_account((int64_t)nbytes);
    return s;
}

tg_storage *tg__storage_new(size_t nbytes) { return storage_alloc(nbytes, true); }

tg_storage *tg__storage_new_uninit(size_t nbytes) { return storage_alloc(nbytes, false); }

tg_storage *tg__storage_retain(tg_storage *s)
{
    if (s) {
        TG_ASSERT(s->refcount > 0);
        s->refcount++;
    }
    return s;
}

void tg__storage_release(tg_storage *s)
{
    if (!s) return;
    TG_ASSERT(s->refcount > 0);
    if (--s->refcount > 0) return;
    mem_account(-(int64_t)s->nbytes);
    free(s->data);
    free(s);
}
