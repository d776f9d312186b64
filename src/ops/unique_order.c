/* src/ops/unique_order.c - the order of torch 1.13's CPU unique values
 * when the input holds a NaN (declared in ops/unique_internal.h).
 *
 * torch builds a std::unordered_set of the elements (GCC's libstdc++),
 * copies it to a vector in the set's order and std::sorts that.  Without
 * NaN the result is ascending.  With one, `<` is no order (a NaN is
 * neither below nor above anything), each NaN is an element of its own
 * (it equals nothing), and where the NaNs and the numbers end up follows
 * from the set's order and from std::sort's steps.  Both are repeated
 * here, step for step:
 *  - the hash: std::hash<double> (<float> for f32) is 0 for a zero, else
 *    _Hash_bytes of the value's bytes with seed 0xc70f6907 (a Murmur2
 *    variant, 64-bit);
 *  - the set: buckets h % nb; a new element goes first in its bucket's
 *    run of the one linked list, or first in the list when its bucket is
 *    empty; the table starts at 13 buckets (11 wanted, the next size of
 *    libstdc++'s table) and, when a new element would pass nb elements,
 *    grows to the first prime of libstdc++'s list >= max(n + 1, 2 nb),
 *    relinking the list in order by the same rule;
 *  - the sort: introsort (median of three to the front, unguarded
 *    partition, depth limit 2 floor(log2 n), heapsort past it) down to
 *    runs of 16, then insertion sort (guarded over the first 16,
 *    unguarded after).
 * tests/test_unique_nan.c checks the result against torch's for inputs of
 * up to 3000 elements (tables of up to 5087 buckets).  Past the list's
 * last prime (more than 712697 distinct values) the order is not
 * modelled: tg_unique then keeps its own (numbers ascending, NaNs last). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "ops/unique_internal.h"

/* ---- the hash ---- */

static uint64_t shift_mix(uint64_t v) { return v ^ (v >> 47); }

/* libstdc++'s _Hash_bytes (64-bit) of n = 4 or 8 bytes: the tail of fewer
 * than 8 bytes is read little-endian. */
static uint64_t hash_bytes(const unsigned char *p, size_t n)
{
    const uint64_t mul = ((uint64_t)0xc6a4a793u << 32) + 0x5bd1e995u;
    uint64_t h = 0xc70f6907u ^ (n * mul);
    if (n == 8) {
        uint64_t d;
        memcpy(&d, p, 8);
        h ^= shift_mix(d * mul) * mul;
        h *= mul;
    } else {
        uint64_t d = 0;
        for (size_t k = n; k-- > 0;) d = (d << 8) + p[k];
        h ^= d;
        h *= mul;
    }
    h = shift_mix(h) * mul;
    return shift_mix(h);
}

static uint64_t std_hash(double v, bool f32)
{
    if (v == 0) return 0;
    unsigned char b[8];
    if (f32) {
        const float f = (float)v;
        memcpy(b, &f, 4);
        return hash_bytes(b, 4);
    }
    memcpy(b, &v, 8);
    return hash_bytes(b, 8);
}

/* libstdc++'s __prime_list from 13 up to 2^20 (the sizes the table grows
 * through are among them). */
static const int64_t PRIMES[] = {
    13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 103, 109,
    113, 127, 137, 139, 149, 157, 167, 179, 193, 199, 211, 227, 241, 257, 277, 293, 313, 337,
    359, 383, 409, 439, 467, 503, 541, 577, 619, 661, 709, 761, 823, 887, 953, 1031, 1109,
    1193, 1289, 1381, 1493, 1613, 1741, 1879, 2029, 2179, 2357, 2549, 2753, 2971, 3209, 3469,
    3739, 4027, 4349, 4703, 5087, 5503, 5953, 6427, 6949, 7517, 8123, 8783, 9497, 10273,
    11113, 12011, 12983, 14033, 15173, 16411, 17749, 19183, 20753, 22447, 24281, 26267,
    28411, 30727, 33223, 35933, 38873, 42043, 45481, 49201, 53201, 57557, 62233, 67307,
    72817, 78779, 85229, 92203, 99733, 107897, 116731, 126271, 136607, 147793, 159871,
    172933, 187091, 202409, 218971, 236897, 256279, 277261, 299951, 324503, 351061, 379787,
    410857, 444487, 480881, 520241, 562841, 608903, 658753, 712697, 771049, 834181, 902483,
    976369, 1056323};
enum { N_PRIMES = sizeof PRIMES / sizeof PRIMES[0] };

/* The first prime of the list >= n, or -1 past it. */
static int64_t next_bucket_count(int64_t n)
{
    for (int i = 0; i < N_PRIMES; i++)
        if (PRIMES[i] >= n) return PRIMES[i];
    return -1;
}

/* ---- the set ---- */

/* Nodes are the distinct elements (each NaN one), in a singly linked list
 * (next, -1 ending it); bucket[b] is the node before the bucket's run (-2
 * the list's head slot, -1 an empty bucket). */
typedef struct table {
    int64_t nb, head, n;
    int64_t *bucket, *next, *bkt_of;
    const uint64_t *hash;
} table;

/* Links node x by libstdc++'s rule (_M_insert_bucket_begin). */
static void link_node(table *t, int64_t x)
{
    const int64_t b = (int64_t)(t->hash[x] % (uint64_t)t->nb);
    t->bkt_of[x] = b;
    if (t->bucket[b] != -1) {
        int64_t *after = t->bucket[b] == -2 ? &t->head : &t->next[t->bucket[b]];
        t->next[x] = *after;
        *after = x;
        return;
    }
    t->next[x] = t->head;
    t->head = x;
    if (t->next[x] >= 0) t->bucket[t->bkt_of[t->next[x]]] = x;
    t->bucket[b] = -2;
}

/* The table at nb buckets, its list relinked in order (_M_rehash_aux). */
static int rehash(table *t, int64_t nb)
{
    int64_t *bucket = realloc(t->bucket, (size_t)nb * sizeof *bucket);
    if (!bucket) return TG_ENOMEM;
    t->bucket = bucket;
    t->nb = nb;
    for (int64_t b = 0; b < nb; b++) bucket[b] = -1;
    int64_t p = t->head;
    t->head = -1;
    while (p >= 0) {
        const int64_t nx = t->next[p];
        link_node(t, p);
        p = nx;
    }
    return TG_OK;
}

/* The node holding a value equal to v (never a NaN), or -1. */
static int64_t find(const table *t, const double *val, double v, uint64_t h)
{
    const int64_t b = (int64_t)(h % (uint64_t)t->nb);
    if (t->bucket[b] == -1) return -1;
    for (int64_t p = t->bucket[b] == -2 ? t->head : t->next[t->bucket[b]];
         p >= 0 && t->bkt_of[p] == b; p = t->next[p])
        if (val[p] == v) return p;
    return -1;
}

/* ---- the sort (on node values with <) ---- */

static bool lt(const double *v, int64_t a, int64_t b) { return v[a] < v[b]; }

static void swap_at(int64_t *a, int64_t i, int64_t j)
{
    const int64_t t = a[i];
    a[i] = a[j];
    a[j] = t;
}

/* std::__adjust_heap then __push_heap over a[base..base+len). */
static void adjust_heap(const double *v, int64_t *a, int64_t len, int64_t hole, int64_t x)
{
    const int64_t top = hole;
    int64_t second = hole;
    while (second < (len - 1) / 2) {
        second = 2 * (second + 1);
        if (v[a[second]] < v[a[second - 1]]) second--;
        a[hole] = a[second];
        hole = second;
    }
    if ((len & 1) == 0 && second == (len - 2) / 2) {
        second = 2 * (second + 1);
        a[hole] = a[second - 1];
        hole = second - 1;
    }
    for (int64_t parent = (hole - 1) / 2; hole > top && v[a[parent]] < v[x];
         parent = (hole - 1) / 2) {
        a[hole] = a[parent];
        hole = parent;
    }
    a[hole] = x;
}

/* std::__make_heap then std::__sort_heap over a[0..n). */
static void heap_sort(const double *v, int64_t *a, int64_t n)
{
    if (n < 2) return;
    for (int64_t parent = (n - 2) / 2;; parent--) {
        adjust_heap(v, a, n, parent, a[parent]);
        if (parent == 0) break;
    }
    for (int64_t l = n - 1; l > 0; l--) {
        const int64_t x = a[l];
        a[l] = a[0];
        adjust_heap(v, a, l, 0, x);
    }
}

static void median_to_first(const double *v, int64_t *a, int64_t r, int64_t x, int64_t y,
                            int64_t z)
{
    if (lt(v, a[x], a[y])) {
        if (lt(v, a[y], a[z])) swap_at(a, r, y);
        else if (lt(v, a[x], a[z])) swap_at(a, r, z);
        else swap_at(a, r, x);
    } else if (lt(v, a[x], a[z])) {
        swap_at(a, r, x);
    } else if (lt(v, a[y], a[z])) {
        swap_at(a, r, z);
    } else {
        swap_at(a, r, y);
    }
}

static void introsort_loop(const double *v, int64_t *a, int64_t f, int64_t l, int depth)
{
    while (l - f > 16) {
        if (depth == 0) {
            heap_sort(v, a + f, l - f);
            return;
        }
        depth--;
        median_to_first(v, a, f, f + 1, f + (l - f) / 2, l - 1);
        /* __unguarded_partition around a[f]; the bounds only keep a scan
         * that a NaN could let run off the end (where libstdc++ would read
         * past the array) inside it */
        int64_t lo = f + 1, hi = l;
        for (;;) {
            while (lo < l - 1 && lt(v, a[lo], a[f])) lo++;
            hi--;
            while (hi > f && lt(v, a[f], a[hi])) hi--;
            if (!(lo < hi)) break;
            swap_at(a, lo, hi);
            lo++;
        }
        introsort_loop(v, a, lo, l, depth);
        l = lo;
    }
}

static void linear_insert(const double *v, int64_t *a, int64_t i)
{
    const int64_t x = a[i];
    int64_t j = i;
    for (; j > 0 && lt(v, x, a[j - 1]); j--) a[j] = a[j - 1];   /* j > 0: as above */
    a[j] = x;
}

/* std::sort(a, a + n) by v[a[.]] < v[a[.]]. */
static void std_sort(const double *v, int64_t *a, int64_t n)
{
    if (n == 0) return;
    int lg = 0;
    while ((n >> (lg + 1)) > 0) lg++;
    introsort_loop(v, a, 0, n, 2 * lg);
    const int64_t guarded = n > 16 ? 16 : n;
    for (int64_t i = 1; i < guarded; i++) {
        if (lt(v, a[i], a[0])) {
            const int64_t x = a[i];
            memmove(a + 1, a, (size_t)i * sizeof *a);
            a[0] = x;
        } else {
            linear_insert(v, a, i);
        }
    }
    for (int64_t i = guarded; i < n; i++) linear_insert(v, a, i);
}

/* ---- the order ---- */

/* Builds the set of v[0..n) in t, node_of[e] the node of element e (node
 * x is the element first[x]); TG__UNIQUE_UNMODELLED when the table would
 * outgrow the prime list. */
static int build_set(table *t, const double *v, int64_t n, bool f32, uint64_t *hash,
                     double *val, int64_t *first, int64_t *node_of)
{
    TG_TRY(rehash(t, 13));
    for (int64_t e = 0; e < n; e++) {
        const uint64_t h = std_hash(v[e], f32);
        const int64_t found = v[e] == v[e] ? find(t, val, v[e], h) : -1;
        if (found >= 0) {
            node_of[e] = found;
            continue;
        }
        if (t->n + 1 > t->nb) {
            const int64_t want = t->n + 2 > 2 * t->nb ? t->n + 2 : 2 * t->nb;
            const int64_t nb = next_bucket_count(want);
            if (nb < 0) return TG__UNIQUE_UNMODELLED;
            TG_TRY(rehash(t, nb));
        }
        const int64_t x = t->n++;
        hash[x] = h;
        val[x] = v[e];
        first[x] = e;
        node_of[e] = x;
        link_node(t, x);
    }
    return TG_OK;
}

int tg__unique_torch_order(const double *v, int64_t n, bool f32, int64_t *perm)
{
    const size_t cells = (size_t)(n > 0 ? n : 1);
    table t = {.nb = 0, .head = -1, .n = 0};
    uint64_t *hash = malloc(cells * sizeof *hash);
    double *val = malloc(cells * sizeof *val);
    int64_t *first = malloc(cells * sizeof *first), *node_of = malloc(cells * sizeof *node_of);
    int64_t *order = malloc(cells * sizeof *order), *start = calloc(cells + 1, sizeof *start);
    t.next = malloc(cells * sizeof *t.next);
    t.bkt_of = malloc(cells * sizeof *t.bkt_of);
    t.hash = hash;
    int rc = hash && val && first && node_of && order && start && t.next && t.bkt_of
                 ? TG_OK : TG_ENOMEM;
    if (rc == TG_OK) rc = build_set(&t, v, n, f32, hash, val, first, node_of);
    if (rc == TG_OK) {
        int64_t k = 0;   /* the set's order, then std::sort's */
        for (int64_t p = t.head; p >= 0; p = t.next[p]) order[k++] = p;
        std_sort(val, order, k);
        /* perm: each node's elements in x's order, the nodes in order */
        int64_t *pos = first;   /* reused: first[] is no longer needed */
        for (int64_t r = 0; r < k; r++) pos[order[r]] = r;
        for (int64_t e = 0; e < n; e++) start[pos[node_of[e]] + 1]++;
        for (int64_t r = 0; r < k; r++) start[r + 1] += start[r];
        for (int64_t e = 0; e < n; e++) perm[start[pos[node_of[e]]]++] = e;
    }
    free(hash);
    free(val);
    free(first);
    free(node_of);
    free(order);
    free(start);
    free(t.next);
    free(t.bkt_of);
    free(t.bucket);
    return rc;
}
