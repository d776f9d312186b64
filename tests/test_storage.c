/* tests/test_storage.c - memory accounting and the storage cache: the
 * byte counts of tg_memory_stats, reuse of freed blocks, work buffers from
 * the same cache, and the cache running out of memory. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/conv.h"
#include "tapegrad/ops.h"

/* tg_memory_stats counts tensor storage: a new tensor adds its bytes, a view
 * adds nothing, the last release gives them back; the peak keeps the maximum
 * until tg_memory_reset_peak.  (Criterion runs each test in its own process,
 * so no other test's tensors are alive here.) */
Test(storage, memory_stats_count_storage_bytes)
{
    int64_t c0, p0, c1, p1, c2, p2;
    tg_memory_reset_peak();
    tg_memory_stats(&c0, &p0);
    cr_assert(eq(i64, p0, c0));
    tg_tensor *a = NULL, *b = NULL, *v = NULL;
    const int64_t sa[2] = {100, 30}, sb[1] = {7};
    cr_assert(eq(int, tg_tensor_zeros(&a, TG_F32, 2, sa), TG_OK));
    cr_assert(eq(int, tg_tensor_zeros(&b, TG_F64, 1, sb), TG_OK));
    tg_memory_stats(&c1, &p1);
    cr_assert(eq(i64, c1 - c0, 100 * 30 * 4 + 7 * 8));
    cr_assert(eq(i64, p1, c1));
    cr_assert(eq(int, tg_slice(&v, a, 0, 10, 20, 1), TG_OK));   /* a view: no new bytes */
    tg_memory_stats(&c2, NULL);
    cr_assert(eq(i64, c2, c1));
    tg_tensor_release(a);   /* v still holds a's storage */
    tg_memory_stats(&c2, NULL);
    cr_assert(eq(i64, c2, c1));
    tg_tensor_release(v);
    tg_tensor_release(b);
    tg_memory_stats(&c2, &p2);
    cr_assert(eq(i64, c2, c0));
    cr_assert(eq(i64, p2, p1));   /* the peak remembers */
    tg_memory_reset_peak();
    tg_memory_stats(NULL, &p2);
    cr_assert(eq(i64, p2, c0));
}

/* The cache of freed storage: a released tensor of 64 KiB or more goes to the
 * cache (tg_memory_cached grows by its bytes, tg_memory_stats drops them), the
 * next tensor of that size gets the same block back, and a zeros tensor made
 * from a dirty cached block is still all zeros.  Small tensors bypass it, the
 * limit bounds it, and empty_cache empties it.  The limit is set explicitly,
 * since the default is 0 under AddressSanitizer. */
Test(storage, freed_storage_is_cached_and_reused)
{
    const int64_t old_limit = tg_memory_set_cache_limit(1 << 20);
    tg_memory_empty_cache();
    cr_assert(eq(i64, tg_memory_cached(), 0));
    const int64_t big[1] = {32768}, small[1] = {1000};   /* 128 KiB and 4000 bytes of f32 */
    tg_tensor *a = NULL, *b = NULL, *s = NULL;
    int64_t c0, c1;
    tg_memory_stats(&c0, NULL);
    cr_assert(eq(int, tg_tensor_zeros(&a, TG_F32, 1, big), TG_OK));
    float *pa = tg_tensor_data(a);
    for (int64_t i = 0; i < big[0]; i++) pa[i] = 1.5f;
    tg_tensor_release(a);
    cr_assert(eq(i64, tg_memory_cached(), 32768 * 4));
    tg_memory_stats(&c1, NULL);
    cr_assert(eq(i64, c1, c0));   /* cached bytes are not tensor bytes */
    cr_assert(eq(int, tg_tensor_zeros(&b, TG_F32, 1, big), TG_OK));
    cr_assert(eq(ptr, tg_tensor_data(b), pa));   /* the same block back */
    cr_assert(eq(i64, tg_memory_cached(), 0));
    const float *pb = tg_tensor_data(b);
    for (int64_t i = 0; i < big[0]; i++) cr_assert(eq(flt, pb[i], 0.0f), "element %ld", (long)i);
    cr_assert(eq(int, tg_tensor_zeros(&s, TG_F32, 1, small), TG_OK));
    tg_tensor_release(s);
    cr_assert(eq(i64, tg_memory_cached(), 0));   /* below 64 KiB: back to malloc */

    /* Limit: 1 MiB holds 8 blocks of 128 KiB; the ninth released is freed. */
    tg_tensor *many[9] = {NULL};
    tg_tensor_release(b);
    for (int i = 0; i < 9; i++) cr_assert(eq(int, tg_tensor_zeros(&many[i], TG_F32, 1, big), TG_OK));
    for (int i = 0; i < 9; i++) tg_tensor_release(many[i]);
    cr_assert(eq(i64, tg_memory_cached(), 8 * 32768 * 4));
    cr_assert(eq(i64, tg_memory_set_cache_limit(3 * 32768 * 4), 1 << 20));
    cr_assert(eq(i64, tg_memory_cached(), 3 * 32768 * 4));   /* trimmed to the new limit */
    tg_memory_empty_cache();
    cr_assert(eq(i64, tg_memory_cached(), 0));
    tg_memory_set_cache_limit(0);   /* off: nothing is kept */
    cr_assert(eq(int, tg_tensor_zeros(&a, TG_F32, 1, big), TG_OK));
    tg_tensor_release(a);
    cr_assert(eq(i64, tg_memory_cached(), 0));
    tg_memory_set_cache_limit(old_limit);
}

/* Work buffers (a kernel's f32 copies of half operands) come from the same
 * cache as storages and go back to it, without counting as tensor memory: a
 * bf16 conv's copies are cached after the call, and the next call takes them
 * again instead of faulting in fresh pages. */
Test(storage, work_buffers_share_the_storage_cache)
{
    const int64_t old_limit = tg_memory_set_cache_limit(64 << 20);
    tg_memory_empty_cache();
    int64_t t0, t1;
    tg_memory_stats(&t0, NULL);
    void *p = tg__work_alloc(200000);
    cr_assert(p != NULL);
    cr_assert(eq(u64, (uintptr_t)p % 64, 0));
    memset(p, 7, 200000);
    tg_memory_stats(&t1, NULL);
    cr_assert(eq(i64, t1, t0));   /* not tensor memory */
    tg__work_free(p);
    const int64_t cached = tg_memory_cached();
    cr_assert(ge(i64, cached, 200000));
    void *q = tg__work_alloc(200000);
    cr_assert(eq(ptr, q, p));   /* the same block back */
    cr_assert(eq(i64, tg_memory_cached(), 0));
    tg__work_free(q);
    tg__work_free(NULL);

    /* a bf16 conv of a strided x: its f32 copy of x is a work buffer (a
     * contiguous x would be read in place).  One thread: with two, the bf16
     * GEMM's packing buffers of parallel slices come from the cache in an
     * order that varies from call to call, and so does what is left in it. */
    const int old_threads = tg_get_num_threads();
    tg_set_num_threads(1);
    tg_memory_empty_cache();
    const int64_t xs[4] = {16, 8, 16, 16}, ws[4] = {16, 16, 3, 3};
    tg_tensor *xt = NULL, *x = NULL, *w = NULL, *y = NULL, *y2 = NULL;
    cr_assert(eq(int, tg_tensor_full(&xt, TG_BF16, 4, xs, 0.5), TG_OK));
    cr_assert(eq(int, tg_transpose(&x, xt, 0, 1), TG_OK));
    tg_tensor_release(xt);
    cr_assert(eq(int, tg_tensor_full(&w, TG_BF16, 4, ws, 0.25), TG_OK));
    cr_assert(eq(int, tg_conv(&y, x, w, NULL, NULL), TG_OK), "%s", tg_error_message());
    const int64_t after_one = tg_memory_cached();
    cr_assert(ge(i64, after_one, 8 * 16 * 16 * 16 * 4), "the f32 copy of x was not cached");
    cr_assert(eq(int, tg_conv(&y2, x, w, NULL, NULL), TG_OK), "%s", tg_error_message());
    cr_assert(eq(i64, tg_memory_cached(), after_one), "the second call did not reuse them");
    cr_assert(eq(int, memcmp(tg_tensor_data(y), tg_tensor_data(y2),
                             (size_t)tg_tensor_numel(y) * 2), 0));
    tg_tensor_release(x), tg_tensor_release(w), tg_tensor_release(y), tg_tensor_release(y2);
    tg_memory_empty_cache();
    tg_memory_set_cache_limit(old_limit);
    tg_set_num_threads(old_threads);
}

enum { CACHE_SIZES = 600 };

/* Bytes of the CACHE_SIZES distinct block sizes: 64 KiB plus i lines. */
static int64_t cache_size(int i) { return ((int64_t)64 << 10) + 64 * i; }

/* The cache finds its bins (one per block size) through a uthash index.  When
 * that index cannot grow (its table, or a doubling of its buckets: here the
 * first uthash allocation of each release fails), the released block is not
 * cached but freed, and the cache stays consistent: tg_memory_cached counts
 * exactly the blocks it holds, each is given back for its size, and
 * empty_cache frees them all (a block kept in a bin the index lost would stay
 * counted, and leak in the sanitizer build). */
Test(storage, storage_cache_declines_a_block_when_its_index_cannot_grow)
{
    const int64_t old_limit = tg_memory_set_cache_limit((int64_t)1 << 30);
    tg_memory_empty_cache();
    tg_tensor *t[CACHE_SIZES] = {NULL};
    int64_t want = 0;
    int declined = 0;
    for (int i = 0; i < CACHE_SIZES; i++) {
        const int64_t shape[1] = {cache_size(i)};
        cr_assert(eq(int, tg_tensor_zeros(&t[i], TG_U8, 1, shape), TG_OK));
        tg__hash_fail_after(0);
        tg_tensor_release(t[i]);
        if (tg__hash_fail_after(-1) < 0) {   /* declined; with memory, it is kept */
            declined++;
            cr_assert(eq(i64, tg_memory_cached(), want), "block %d was counted", i);
            cr_assert(eq(int, tg_tensor_zeros(&t[i], TG_U8, 1, shape), TG_OK));
            tg_tensor_release(t[i]);
        }
        want += cache_size(i);
        cr_assert(eq(i64, tg_memory_cached(), want), "block %d", i);
    }
    cr_assert(declined >= 3, "%d declined: the table, then at least two doublings", declined);
    for (int i = 0; i < CACHE_SIZES; i++) {   /* each comes back for its size */
        const int64_t shape[1] = {cache_size(i)};
        cr_assert(eq(int, tg_tensor_zeros(&t[i], TG_U8, 1, shape), TG_OK));
        want -= cache_size(i);
        cr_assert(eq(i64, tg_memory_cached(), want), "block %d", i);
    }
    for (int i = 0; i < CACHE_SIZES; i++) tg_tensor_release(t[i]);
    tg_memory_empty_cache();
    cr_assert(eq(i64, tg_memory_cached(), 0));
    tg_memory_set_cache_limit(old_limit);
}
