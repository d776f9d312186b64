/* Refcounted, 64-byte aligned byte buffers shared by views: zero-filled, or
 * left uninitialised for outputs a kernel overwrites whole.
 *
 * Large buffers are recycled through a cache of freed blocks keyed by size,
 * as PyTorch's CUDA caching allocator does.  A training loop allocates the
 * same sizes in the same order every step; without the cache, glibc either
 * hands each large block back to the kernel (and every step pays a page fault
 * per 4 KiB touched: measured 45% of the DCGAN step's time) or keeps them in
 * its heap, where blocks of different sizes fragment (a third more resident
 * memory than the step ever holds).  With it, a step after the first makes no
 * system call for tensor memory, and the resident set stays flat. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#define TG__ALIGN 64u

/* ---- the block cache -------------------------------------------------------- */

/* Blocks below this size are left to malloc, whose own bins serve them well. */
#define TG__CACHE_MIN_BYTES ((size_t)64 << 10)

/* The default limit on cached bytes; none under AddressSanitizer, so that a
 * use of freed tensor memory is still reported there. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TG__ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(TG__ASAN)
#define TG__CACHE_DEFAULT_LIMIT 0
#else
#define TG__CACHE_DEFAULT_LIMIT ((int64_t)256 << 20)
#endif

/* The freed blocks of one (padded) size: a stack linked through the first
 * bytes of each block, which is ours while it sits here. */
typedef struct cache_bin {
    size_t size;
    void *top;
    UT_hash_handle hh;
} cache_bin;

static struct {
    pthread_mutex_t lock;
    cache_bin *bins;          /* uthash by size */
    int64_t bytes;            /* held in the bins */
    int64_t limit;            /* bytes is never above it */
} cache = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, TG__CACHE_DEFAULT_LIMIT};

/* A cached block of exactly padded bytes, or NULL. */
static void *cache_take(size_t padded)
{
    if (padded < TG__CACHE_MIN_BYTES) return NULL;
    void *p = NULL;
    pthread_mutex_lock(&cache.lock);
    cache_bin *b;
    HASH_FIND(hh, cache.bins, &padded, sizeof padded, b);
    if (b && b->top) {
        p = b->top;
        memcpy(&b->top, p, sizeof(void *));
        cache.bytes -= (int64_t)padded;
    }
    pthread_mutex_unlock(&cache.lock);
    return p;
}

/* Keeps a freed block for reuse if it is large and fits under the limit;
 * false when the caller is to free it (also when no memory is left for a
 * new bin or a bigger index: a cache may always decline). */
static bool cache_put(void *p, size_t padded)
{
    if (padded < TG__CACHE_MIN_BYTES) return false;
    bool kept = false;
    pthread_mutex_lock(&cache.lock);
    if (cache.bytes + (int64_t)padded <= cache.limit) {
        cache_bin *b;
        HASH_FIND(hh, cache.bins, &padded, sizeof padded, b);
        if (!b && (b = calloc(1, sizeof *b)) != NULL) {
            b->size = padded;
            HASH_ADD(hh, cache.bins, size, sizeof b->size, b);
            if (TG_HASH_ADD_FAILED(b)) {   /* out of memory: p is not kept */
                free(b);
                b = NULL;
            }
        }
        if (b) {
            memcpy(p, &b->top, sizeof(void *));
            b->top = p;
            cache.bytes += (int64_t)padded;
            kept = true;
        }
    }
    pthread_mutex_unlock(&cache.lock);
    return kept;
}

/* Frees cached blocks until at most keep bytes remain; the lock is held. */
static void cache_trim_locked(int64_t keep)
{
    cache_bin *b, *tmp;
    HASH_ITER(hh, cache.bins, b, tmp) {
        while (b->top && cache.bytes > keep) {
            void *p = b->top;
            memcpy(&b->top, p, sizeof(void *));
            free(p);
            cache.bytes -= (int64_t)b->size;
        }
        if (!b->top) {
            HASH_DEL(cache.bins, b);
            free(b);
        }
        if (cache.bytes <= keep) break;
    }
}

int64_t tg_memory_cached(void)
{
    pthread_mutex_lock(&cache.lock);
    int64_t n = cache.bytes;
    pthread_mutex_unlock(&cache.lock);
    return n;
}

void tg_memory_empty_cache(void)
{
    pthread_mutex_lock(&cache.lock);
    cache_trim_locked(0);
    pthread_mutex_unlock(&cache.lock);
}

int64_t tg_memory_set_cache_limit(int64_t bytes)
{
    if (bytes < 0) bytes = 0;
    pthread_mutex_lock(&cache.lock);
    int64_t old = cache.limit;
    cache.limit = bytes;
    cache_trim_locked(bytes);
    pthread_mutex_unlock(&cache.lock);
    return old;
}

/* ---- storages --------------------------------------------------------------- */

/* aligned_alloc wants a size that is a multiple of the alignment; an empty
 * tensor still gets one line so data is never NULL. */
static size_t padded_size(size_t nbytes)
{
    return nbytes == 0 ? TG__ALIGN : (nbytes + TG__ALIGN - 1) / TG__ALIGN * TG__ALIGN;
}

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

/* A block of padded bytes (a multiple of TG__ALIGN): from the cache, else
 * newly allocated; NULL with TG_ENOMEM set (`what` names the caller). */
static void *block_get(size_t padded, const char *what)
{
    void *p = cache_take(padded);
    if (!p) p = aligned_alloc(TG__ALIGN, padded);
    if (!p) tg__error(TG_ENOMEM, "%s: out of memory allocating %zu bytes", what, padded);
    return p;
}

/* Gives a block back: to the cache if it keeps it, else to the system. */
static void block_put(void *p, size_t padded)
{
    if (!cache_put(p, padded)) free(p);
}

static tg_storage *storage_alloc(size_t nbytes, bool zero)
{
    if (nbytes > SIZE_MAX - TG__ALIGN) {
        tg__error(TG_ENOMEM, "storage: %zu bytes is too large", nbytes);
        return NULL;
    }
    size_t padded = padded_size(nbytes);
    tg_storage *s = tg__malloc(sizeof *s);
    if (!s) return NULL;
    if (!(s->data = block_get(padded, "storage"))) {
        free(s);
        return NULL;
    }
    if (zero) memset(s->data, 0, padded);
    else if (poison_empty()) memset(s->data, 0xFF, padded);
    s->refcount = 1;
    s->nbytes = nbytes;
    s->version = 0;
    atomic_init(&s->handed, 0);
    s->panels = NULL;
    s->cast_of = NULL;
    s->cast_offset = 0;
    s->cast_version = 0;
    s->cast_handed = 0;
    s->deq_of = NULL;
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
    tg__bf16_panels_free_all(s);
    tg__storage_release(s->cast_of);
    tg__storage_release(s->deq_of);
    mem_account(-(int64_t)s->nbytes);
    block_put(s->data, padded_size(s->nbytes));
    free(s);
}

/* ---- work buffers ----------------------------------------------------------- */

/* A header line before each work buffer holds its padded size, so that
 * tg__work_free can hand the block back to the cache by size. */
#define TG__WORK_HEADER TG__ALIGN

void *tg__work_alloc(size_t nbytes)
{
    if (nbytes > SIZE_MAX - 2 * TG__ALIGN) {
        tg__error(TG_ENOMEM, "work buffer: %zu bytes is too large", nbytes);
        return NULL;
    }
    size_t padded = padded_size(nbytes) + TG__WORK_HEADER;
    char *b = block_get(padded, "work buffer");
    if (!b) return NULL;
    memcpy(b, &padded, sizeof padded);
    if (poison_empty()) memset(b + TG__WORK_HEADER, 0xFF, padded - TG__WORK_HEADER);
    return b + TG__WORK_HEADER;
}

void tg__work_free(void *p)
{
    if (!p) return;
    char *b = (char *)p - TG__WORK_HEADER;
    size_t padded;
    memcpy(&padded, b, sizeof padded);
    block_put(b, padded);
}
