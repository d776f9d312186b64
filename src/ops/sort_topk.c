/* src/ops/sort_topk.c - the first m positions of each row of an f32 x
 * (bf16 and f16: each row widened to f32 first, which keeps every value
 * and so the order) along its contiguous last dim, in the order of topk (largest first, NaN
 * before every number) or of kthvalue and topk's smallest (smallest first,
 * NaN after every number), ties by index: what topk and kthvalue keep when
 * m is within a quarter of the row.
 *
 * Each element becomes a 64-bit key, its order's rank in the high word
 * and its index in the low one, so that the order by (value, index) is the
 * keys' unsigned order: the rank maps a float's bits to an unsigned word
 * that grows with the value (-0.0 as 0.0, every NaN the largest), turned
 * over for the largest first.  A row's first m keys make a buffer and a
 * threshold, the rank of the last of them; the rest of the row is read
 * in vectors, and only the elements ranked strictly before the threshold
 * (an element tied with it comes later in index, so after it) are
 * appended.  When the buffer is full, quickselect keeps its first m and
 * the threshold moves to the last of those; at the end the first m are
 * sorted.  The kept keys are the row's first m in the order, whatever the
 * buffer's schedule, so every kernel gives the same indices:
 *   portable  C, blocks of 16 tested before their appends
 *   avx2      eight ranks a compare, the candidates appended one by one
 *   avx512    sixteen ranks a compare, the candidates compressed into
 *             the buffer eight keys at a time
 * chosen as the first-position kernel is (TG_FIRST_KERNEL, sort_first.c). */
#include <stdlib.h>
#include <string.h>

#include "ops/sort_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TOPK_X86 1
#define TOPK_AVX2 __attribute__((target("avx2")))
#define TOPK_AVX512 __attribute__((target("avx512f")))
#endif

/* Elements past which rows are shared among threads; the least room a
 * scan gets in the buffer before it is cut back to m; the room past a
 * buffer's end that the avx512 kernel's whole-vector stores may write. */
enum { PAR_ELEMENTS = 16384, ROOM = 128, SLACK = 16 };

/* The rank of f32 bits u in the ascending order: -0.0 as 0.0, every NaN
 * last; flip = ~0 turns it over (the largest first, NaN first). */
static inline uint32_t rank_of(uint32_t u, uint32_t flip)
{
    const uint32_t a = u & UINT32_C(0x7fffffff);
    u = a == 0 ? 0 : u;
    const uint32_t r = a > UINT32_C(0x7f800000)
                           ? UINT32_C(0xffffffff)
                           : u ^ ((uint32_t)((int32_t)u >> 31) | UINT32_C(0x80000000));
    return r ^ flip;
}

/* x[i]'s bits. */
static inline uint32_t bits_at(const float *x, int64_t i)
{
    uint32_t u;
    memcpy(&u, x + i, sizeof u);
    return u;
}

static inline uint64_t key_at(uint32_t rank, int64_t i)
{
    return (uint64_t)rank << 32 | (uint64_t)i;
}

/* A scan: appends to buf the keys of x[i..end) ranked before thr, in
 * index order; returns how many. */
typedef int64_t (*scan_fn)(const float *x, int64_t i, int64_t end, uint32_t thr,
                           uint32_t flip, uint64_t *buf);

static int64_t scan_portable(const float *x, int64_t i, int64_t end, uint32_t thr,
                             uint32_t flip, uint64_t *buf)
{
    int64_t c = 0;
    for (; i + 16 <= end; i += 16) {
        uint32_t any = 0;
        for (int w = 0; w < 16; w++) any |= rank_of(bits_at(x, i + w), flip) < thr;
        if (!any) continue;
        for (int w = 0; w < 16; w++) {
            const uint32_t r = rank_of(bits_at(x, i + w), flip);
            buf[c] = key_at(r, i + w);
            c += r < thr;
        }
    }
    for (; i < end; i++) {
        const uint32_t r = rank_of(bits_at(x, i), flip);
        buf[c] = key_at(r, i);
        c += r < thr;
    }
    return c;
}

#ifdef TOPK_X86
TOPK_AVX2 static int64_t scan_avx2(const float *x, int64_t i, int64_t end, uint32_t thr,
                                   uint32_t flip, uint64_t *buf)
{
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i top = _mm256_set1_epi32(INT32_MIN), vflip = _mm256_set1_epi32((int)flip);
    const __m256i zero = _mm256_setzero_si256();
    const __m256i sthr = _mm256_set1_epi32((int)(thr ^ UINT32_C(0x80000000)));
    int64_t c = 0;
    for (; i + 8 <= end; i += 8) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)(x + i));
        const __m256i a = _mm256_and_si256(u, abs_mask);
        u = _mm256_andnot_si256(_mm256_cmpeq_epi32(a, zero), u);
        const __m256i nan = _mm256_cmpgt_epi32(a, inf);
        __m256i r = _mm256_xor_si256(u, _mm256_or_si256(_mm256_srai_epi32(u, 31), top));
        r = _mm256_xor_si256(_mm256_or_si256(r, nan), vflip);
        /* r < thr unsigned: both with the sign bit flipped, compared signed */
        const __m256i lt = _mm256_cmpgt_epi32(sthr, _mm256_xor_si256(r, top));
        unsigned bits = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(lt));
        if (!bits) continue;
        uint32_t rs[8];
        _mm256_storeu_si256((__m256i *)(void *)rs, r);
        for (; bits; bits &= bits - 1) {
            const int w = __builtin_ctz(bits);
            buf[c++] = key_at(rs[w], i + w);
        }
    }
    _mm256_zeroupper();
    return c + scan_portable(x, i, end, thr, flip, buf + c);
}

TOPK_AVX512 static int64_t scan_avx512(const float *x, int64_t i, int64_t end,
                                       uint32_t thr, uint32_t flip, uint64_t *buf)
{
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i top = _mm512_set1_epi32(INT32_MIN), vflip = _mm512_set1_epi32((int)flip);
    const __m512i vthr = _mm512_set1_epi32((int)thr), ones = _mm512_set1_epi32(-1);
    const __m512i lanes = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
    int64_t c = 0;
    for (; i + 16 <= end; i += 16) {
        __m512i u = _mm512_loadu_si512(x + i);
        const __m512i a = _mm512_and_si512(u, abs_mask);
        u = _mm512_maskz_mov_epi32(_mm512_test_epi32_mask(a, a), u);
        const __mmask16 nan = _mm512_cmpgt_epi32_mask(a, inf);
        __m512i r = _mm512_xor_si512(u, _mm512_or_si512(_mm512_srai_epi32(u, 31), top));
        r = _mm512_xor_si512(_mm512_mask_mov_epi32(r, nan, ones), vflip);
        const __mmask16 in = _mm512_cmplt_epu32_mask(r, vthr);
        if (!in) continue;
        const __m512i at = _mm512_add_epi64(_mm512_set1_epi64(i), lanes);
        const __m512i lo = _mm512_or_si512(
            _mm512_slli_epi64(_mm512_cvtepu32_epi64(_mm512_castsi512_si256(r)), 32), at);
        const __m512i hi = _mm512_or_si512(
            _mm512_slli_epi64(_mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(r, 1)), 32),
            _mm512_add_epi64(at, _mm512_set1_epi64(8)));
        _mm512_storeu_si512(buf + c, _mm512_maskz_compress_epi64((__mmask8)in, lo));
        c += __builtin_popcount(in & 0xffu);
        _mm512_storeu_si512(buf + c, _mm512_maskz_compress_epi64((__mmask8)(in >> 8), hi));
        c += __builtin_popcount(in >> 8);
    }
    _mm256_zeroupper();
    return c + scan_portable(x, i, end, thr, flip, buf + c);
}
#endif

/* Merges the ascending runs s[lo..mid) and s[mid..hi) (distinct keys)
 * into d[lo..hi) from both ends at once, so that two chains of loads and
 * compares overlap: the front takes the smallest half, the back the
 * largest, and an odd run's middle key is the one left.  Where one end
 * has used up a run, the key it reads there is one the other end took,
 * on the far side of every key left, so it is not taken again; only the
 * ends of the runs need the guards. */
static void merge_runs(const uint64_t *s, uint64_t *d, int64_t lo, int64_t mid, int64_t hi)
{
    int64_t a = lo, b = mid, o = lo, ra = mid - 1, rb = hi - 1, ro = hi - 1, t = 0;
    const int64_t half = (hi - lo) / 2;
    for (; t < half && a < mid && b < hi && ra >= lo && rb >= mid; t++) {
        const uint64_t x = s[a], y = s[b], u = s[ra], w = s[rb];
        const bool fb = y < x, ba = u > w;
        d[o++] = fb ? y : x;
        b += fb;
        a += !fb;
        d[ro--] = ba ? u : w;
        ra -= ba;
        rb -= !ba;
    }
    for (; t < half; t++) {
        const bool fa = a < mid && (b >= hi || s[a] < s[b]);
        d[o++] = fa ? s[a++] : s[b++];
        const bool ba = ra >= lo && (rb < mid || s[ra] > s[rb]);
        d[ro--] = ba ? s[ra--] : s[rb--];
    }
    if (o == ro) d[o] = a <= ra ? s[a] : s[b];
}

/* Sorts v[0..n) ascending, tmp having room for n: insertion sorts of runs
 * of 16, then merges (the keys are distinct: any sort gives one order). */
static void sort_keys(uint64_t *v, uint64_t *tmp, int64_t n)
{
    for (int64_t lo = 0; lo < n; lo += 16) {
        const int64_t hi = lo + 16 < n ? lo + 16 : n;
        for (int64_t i = lo + 1; i < hi; i++) {
            const uint64_t x = v[i];
            int64_t j = i;
            for (; j > lo && x < v[j - 1]; j--) v[j] = v[j - 1];
            v[j] = x;
        }
    }
    uint64_t *src = v, *dst = tmp;
    for (int64_t w = 16; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            const int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            merge_runs(src, dst, lo, mid, hi);
        }
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != v) memcpy(v, src, (size_t)n * sizeof *v);
}

/* Moves the m smallest of the n distinct keys v[0..n) to v[0..m), in any
 * order (quickselect around the median of three; after 64 partitions, the
 * rest is sorted, tmp having room for n). */
static void select_keys(uint64_t *v, uint64_t *tmp, int64_t n, int64_t m)
{
    int64_t lo = 0, hi = n;
    for (int rounds = 0; lo < m && m < hi && hi - lo > 16; rounds++) {
        if (rounds == 64) break;
        const int64_t b = lo + (hi - lo) / 2;
        uint64_t p0 = v[lo], p1 = v[b], p2 = v[hi - 1], t;
        if (p1 < p0) t = p0, p0 = p1, p1 = t;
        if (p2 < p1) t = p1, p1 = p2, p2 = t;
        if (p1 < p0) p1 = p0;
        const uint64_t x = p1;   /* the median; one of v[lo..hi) */
        int64_t s = lo;
        for (int64_t i = lo; i < hi; i++) {   /* swaps without a branch */
            const uint64_t y = v[i];
            const bool lt = y < x;
            v[i] = v[s];
            v[s] = y;
            s += lt;
        }
        /* v[lo..s) < x <= v[s..hi): x itself is in the right part */
        if (s > m) hi = s;
        else if (s == m) return;
        else {
            int64_t e = s;   /* x to v[s], the right part after it */
            while (v[e] != x) e++;
            v[e] = v[s];
            v[s] = x;
            lo = s + 1;
        }
    }
    if (lo < m && m < hi) sort_keys(v + lo, tmp, hi - lo);
}

/* The largest key's rank among v[0..m). */
static uint32_t last_rank(const uint64_t *v, int64_t m)
{
    uint64_t most = 0;
    for (int64_t i = 0; i < m; i++) most = v[i] > most ? v[i] : most;
    return (uint32_t)(most >> 32);
}

typedef struct topk_job {
    const void *x;
    tg_dtype dt;    /* x's: TG_F32, TG_BF16 or TG_F16 */
    int64_t n, m, start, count;
    uint32_t flip;
    scan_fn scan;
    int64_t *out;   /* rows x count */
    bool failed;    /* no memory for a thread's buffer */
} topk_job;

static void topk_rows(void *p, int64_t lo, int64_t hi)
{
    topk_job *j = p;
    const int64_t n = j->n, m = j->m, cap = 2 * m + ROOM;
    const bool half = j->dt != TG_F32;
    uint64_t *buf = tg__malloc((size_t)(cap + SLACK + cap) * sizeof *buf);
    float *wide = half ? tg__malloc((size_t)n * sizeof *wide) : NULL;
    if (!buf || (half && !wide)) {
        free(buf);
        j->failed = true;
        return;
    }
    uint64_t *tmp = buf + cap + SLACK;
    for (int64_t row = lo; row < hi; row++) {
        const float *x = (const float *)j->x + row * n;
        if (half) {   /* exact: the same order and ties */
            tg__half_to_f32_rows(j->dt, (const uint16_t *)j->x + row * n, n, wide, n, 1, n);
            x = wide;
        }
        for (int64_t i = 0; i < m; i++) buf[i] = key_at(rank_of(bits_at(x, i), j->flip), i);
        int64_t cnt = m;
        uint32_t thr = last_rank(buf, m);
        for (int64_t i = m; i < n && thr > 0;) {
            if (cap - cnt < ROOM) {
                select_keys(buf, tmp, cnt, m);
                cnt = m;
                thr = last_rank(buf, m);
            }
            const int64_t end = n - i < cap - cnt ? n : i + (cap - cnt);
            cnt += j->scan(x, i, end, thr, j->flip, buf + cnt);
            i = end;
        }
        if (cnt > m) select_keys(buf, tmp, cnt, m);
        sort_keys(buf, tmp, m);
        int64_t *out = j->out + row * j->count;
        for (int64_t c = 0; c < j->count; c++) out[c] = (int64_t)(uint32_t)buf[j->start + c];
    }
    free(buf);
    free(wide);
}

bool tg__topk_applies(const tg_tensor *x, int64_t n, int64_t inner, int64_t m)
{
    const tg_dtype dt = x->dtype;
    return (dt == TG_F32 || dt == TG_BF16 || dt == TG_F16) && x->ndim >= 1 && inner == 1 &&
           tg_tensor_is_contiguous(x) &&
           m >= 2 && 4 * m <= n && n <= INT32_MAX;
}

int tg__topk_rows(const tg_tensor *x, bool desc, int64_t n, int64_t start, int64_t count,
                  int64_t *out)
{
    topk_job j = {.x = tg_tensor_cdata(x), .dt = x->dtype, .n = n, .m = start + count,
                  .start = start, .count = count, .flip = desc ? UINT32_MAX : 0, .out = out,
                  .scan = scan_portable};
#ifdef TOPK_X86
    const tg__first_kernel_id k = tg__first_kernel_get();
    if (k == TG__FIRST_KERNEL_AVX512) j.scan = scan_avx512;
    else if (k == TG__FIRST_KERNEL_AVX2) j.scan = scan_avx2;
#endif
    const int64_t rows = tg_tensor_numel(x) / n;
    tg__parallel_range(rows, rows * n > PAR_ELEMENTS, topk_rows, &j);
    return j.failed ? TG_ENOMEM : TG_OK;
}
