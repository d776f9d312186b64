/* tests/test_pool_small.c - the kernels of src/ops/pool_small.c (adaptive
 * max pooling with lanes, adaptive average pooling with the sums of several
 * planes side by side) against the kernels that pool one window of one
 * plane at a time, bit for bit (a global average pooling computed in f32,
 * whose sums of whole planes take another order, within their bound):
 * values, indices and gradients, in every
 * float dtype, ranks 1 to 3, batched and not, global poolings and output
 * extents that divide x's or not, lengths that are not multiples of a
 * vector, rows longer than the lanes the kernel holds, x contiguous,
 * transposed and channels-last, on one thread and two; x holds random
 * values, ties of both zeros, NaNs of both signs and planes of -infs. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "ops/pool_internal.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* One call: x's shape and the output size. */
typedef struct pcase {
    int ns, ndim;
    int64_t shape[5];
    int64_t size[3];
} pcase;

static const pcase cases[] = {
    {1, 3, {3, 5, 37}, {1}},                /* 1-d global, 37 elements */
    {1, 2, {11, 16}, {1}},                  /* unbatched, a whole number of vectors */
    {1, 3, {2, 3, 50}, {3}},                /* windows of one row */
    {1, 3, {2, 2, 600}, {2}},               /* a row longer than the lanes' columns */
    {2, 4, {2, 5, 16, 16}, {1, 1}},         /* global */
    {2, 4, {3, 3, 7, 7}, {1, 1}},           /* global, 49 elements */
    {2, 4, {2, 3, 16, 16}, {3, 3}},         /* O does not divide I */
    {2, 4, {2, 3, 16, 16}, {2, 2}},         /* O divides I, last extent < 4 */
    {2, 3, {9, 13, 5}, {4, 2}},             /* unbatched */
    {2, 4, {1, 2, 15, 17}, {4, 5}},         /* last extent >= 4, O does not divide I */
    {2, 4, {1, 2, 3, 4}, {5, 7}},           /* O > I: windows repeat */
    {2, 4, {1, 2, 9, 600}, {2, 3}},         /* several rows longer than the columns */
    {2, 4, {2, 3, 6, 40}, {3, 1}},          /* whole rows, not the whole plane */
    {3, 5, {1, 2, 4, 5, 6}, {1, 1, 1}},     /* 3-d global */
    {3, 5, {1, 2, 5, 4, 9}, {2, 3, 1}},     /* 3-d, whole rows per i0 */
    {3, 4, {3, 7, 6, 5}, {2, 2, 2}},        /* 3-d unbatched */
    {2, 4, {4, 37, 17, 19}, {1, 1}},        /* in parallel; 148 planes */
    {2, 4, {4, 37, 17, 19}, {2, 3}},        /* in parallel */
    {2, 4, {2, 12, 8, 3}, {1, 1}},          /* global, 24 planes of 24: whole blocks */
    {1, 3, {1, 17, 5}, {1}},                /* global, planes shorter than a block */
    {2, 4, {1, 70, 4, 4}, {1, 1}},          /* global, more planes than one chunk */
};

/* Element e of a fill: 0 uniform in [-1, 1); 1 the values -1, -0, 0, 0.5
 * and 1 (ties, zeros of both signs); 2 those, -inf, and NaN and -NaN one
 * time in 24. */
static double fill_value(int fill, uint64_t *s)
{
    static const double levels[6] = {-1, -0.0, 0, 0.5, 1, -INFINITY};
    if (fill == 0) return th_uniform_pm1(s);
    if (fill == 2 && th_rand_int(s, 0, 23) == 0) return th_rand_int(s, 0, 1) ? NAN : -NAN;
    return levels[th_rand_int(s, 0, fill == 2 ? 5 : 4)];
}

/* x of case k: the fill's values, plane 1 all -inf; laid out contiguous
 * (layout 0), as the transpose of its last two dims (1) or channels-last
 * (2, 4 dims: a (N, H, W, C) tensor permuted).  *base gets the tensor the
 * view reads, which requires grad when `grad`.  New references. */
static tg_tensor *make_x(const pcase *k, tg_dtype dt, int fill, int layout, bool grad,
                         uint64_t seed, tg_tensor **base)
{
    const int nd = k->ndim;
    int64_t n = 1, plane = 1;
    for (int d = 0; d < nd; d++) n *= k->shape[d];
    for (int d = nd - k->ns; d < nd; d++) plane *= k->shape[d];
    double *v = malloc((size_t)n * sizeof *v);
    cr_assert(v != NULL);
    uint64_t s = seed;
    for (int64_t e = 0; e < n; e++) v[e] = e >= plane && e < 2 * plane ? -INFINITY
                                                                       : fill_value(fill, &s);
    tg_tensor *c = th_tensor_from(dt, nd, k->shape, v), *t = NULL, *x = NULL;
    free(v);
    static const int to_last[4] = {0, 2, 3, 1}, from_last[4] = {0, 3, 1, 2};
    if (layout == 0) {
        *base = c;
        c = NULL;
    } else {
        if (layout == 1) OK(tg_transpose(&t, c, nd - 2, nd - 1));
        else OK(tg_permute(&t, c, to_last));
        OK(tg_tensor_contiguous(base, t));
    }
    if (grad) OK(tg_tensor_set_requires_grad(*base, true));
    if (layout == 0) x = tg_tensor_retain(*base);
    else if (layout == 1) OK(tg_transpose(&x, *base, nd - 2, nd - 1));
    else OK(tg_permute(&x, *base, from_last));
    th_release_all(2, (tg_tensor *[]){c, t});
    return x;
}

/* What one call gives: y, the indices and y of the call without them
 * (adaptive max pooling; NULL for average pooling), and the gradient of
 * x's storage for a random g (when recorded, else NULL). */
typedef struct result {
    tg_tensor *y, *idx, *y_alone, *dx;
} result;

/* The op (max or average pooling) of case k with the kernels `kernels`
 * allows on a fresh x. */
static void run(bool max, const pcase *k, tg_dtype dt, int fill, int layout, bool grad,
                uint64_t seed, unsigned kernels, result *r)
{
    tg_tensor *base = NULL, *x = make_x(k, dt, fill, layout, grad, seed, &base);
    *r = (result){0};
    if (max) {
        OK(tg__adaptive_max_pool_call(&r->y, &r->idx, x, k->ns, k->size, kernels));
        OK(tg__adaptive_max_pool_call(&r->y_alone, NULL, x, k->ns, k->size, kernels));
    } else {
        OK(tg__adaptive_avg_pool_call(&r->y, x, k->ns, k->size, kernels));
    }
    if (grad) {
        tg_tensor *y = max ? r->y_alone : r->y;
        tg_tensor *gy = th_rand_uniform(dt, tg_tensor_ndim(y), tg_tensor_shape(y), seed + 1);
        th_backward_with(y, gy);
        OK(tg_tensor_clone(&r->dx, tg_tensor_grad(base)));
        tg_tensor_release(gy);
    }
    th_release_all(2, (tg_tensor *[]){x, base});
}

/* The bound on a global average pooling's f32 result against the serial
 * kernel's, for x's values in [-1, 1] over planes of n elements: the
 * serial sum's error (n - 1) u sum |x| and the lanes' (ceil(n / 64) + 6) u
 * sum |x| (src/ops/pool_simd.c), sum |x| <= n, through the division by n
 * (u each way): (n + ceil(n / 64) + 8) u, for planes of 64 elements or
 * more.  0 (the same bytes) for any other call. */
static double global_tol(bool max, const pcase *k, tg_dtype dt)
{
    int64_t n = 1;
    bool global = !max && dt != TG_F64;
    for (int a = 0; a < k->ns; a++) {
        global = global && k->size[a] == 1;
        n *= k->shape[k->ndim - k->ns + a];
    }
    return global && n >= 64 ? (double)(n + (n + 63) / 64 + 8) * 0x1p-24 : 0;
}

/* got and want both NULL, or the same bytes; with `any_nan` a NaN matches
 * any NaN; with tol > 0 (dtype dt) a finite element matches within tol
 * plus an ulp of dt, the rounding of f16 and bf16 to either side.  (A sum
 * of two NaNs is one of them: x86 keeps the first operand's, and an add's
 * operands are the compiler's to order, so the sign
 * of a NaN sum is not a kernel's to keep.  A maximum is an element of x's,
 * NaN or not: its bytes are.) */
static void expect_same(const char *what, const char *part, const tg_tensor *got,
                        const tg_tensor *want, bool any_nan, double tol)
{
    char m[160];
    snprintf(m, sizeof m, "%s: %s", what, part);
    const bool same_presence = (got == NULL) == (want == NULL);
    cr_assert(same_presence, "%s", m);
    if (!got) return;
    if (!any_nan) {
        th_expect_same_tensor_bytes(m, got, want);
        return;
    }
    th_expect_shape(got, tg_tensor_ndim(want), tg_tensor_shape(want));
    const tg_dtype dt = tg_tensor_dtype(want);
    cr_assert(eq(int, tg_tensor_dtype(got), dt), "%s", m);
    for (int64_t i = 0; i < tg_tensor_numel(want); i++) {
        const double g = th_at(got, i), w = th_at(want, i);
        const double ulp = dt == TG_F16    ? fmax(fabs(w), 0x1p-14) * 0x1p-10
                           : dt == TG_BF16 ? fmax(fabs(w), 0x1p-126) * 0x1p-7
                                           : 0;
        const bool same = isnan(w)                  ? isnan(g)
                          : tol > 0 && isfinite(w) ? fabs(g - w) <= tol + ulp
                                                   : g == w && signbit(g) == signbit(w);
        cr_assert(same, "%s: element %lld is %a, want %a", m, (long long)i, g, w);
    }
}

/* Every case, dtype, fill and layout, recorded and not, on one thread and
 * two: the kernels `fast` allows against those `serial` allows. */
static void sweep(bool max, unsigned fast, unsigned serial)
{
    const int threads = tg_get_num_threads();
    for (int th = 1; th <= 2; th++) {
        OK(tg_set_num_threads(th));
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
            for (int d = 0; d < 4; d++)
                for (int fill = 0; fill < 3; fill++)
                    for (int layout = 0; layout < (cases[i].ndim == 4 ? 3 : 2); layout++) {
                        const pcase *k = &cases[i];
                        const bool grad = (d + fill + layout) % 2 == 0;
                        const uint64_t seed = 1 + i * 97 + (size_t)d * 13 + (size_t)fill * 5;
                        result a, b;
                        run(max, k, th_floats[d], fill, layout, grad, seed, fast, &a);
                        run(max, k, th_floats[d], fill, layout, grad, seed, serial, &b);
                        char what[96];
                        snprintf(what, sizeof what, "case %zu dtype %d fill %d layout %d%s, %d "
                                 "threads", i, d, fill, layout, grad ? " recorded" : "", th);
                        const double tol = global_tol(max, k, th_floats[d]);
                        expect_same(what, "y", a.y, b.y, !max, tol);
                        expect_same(what, "indices", a.idx, b.idx, false, 0);
                        expect_same(what, "y without indices", a.y_alone, b.y_alone, false, 0);
                        expect_same(what, "x's gradient", a.dx, b.dx, !max, 0);
                        th_release_all(8, (tg_tensor *[]){a.y, a.idx, a.y_alone, a.dx, b.y,
                                                          b.idx, b.y_alone, b.dx});
                    }
    }
    OK(tg_set_num_threads(threads));
}

/* The lanes give the serial scan's values and indices (ties keep the
 * first, the last NaN wins, a window of -infs gives its first element, -0
 * and +0 tie), so the same gradient, whether max_pool's kernels may run
 * or not. */
Test(pool_small, adaptive_max_lanes_are_the_serial_scan)
{
    sweep(true, 0, TG__POOL_GENERAL | TG__POOL_SERIAL);
    sweep(true, TG__POOL_GENERAL, TG__POOL_GENERAL | TG__POOL_SERIAL);
}

/* The planes side by side give the serial sums and divisions: avg_pool's
 * where its kernels would run (one division by the window's size), the
 * adaptive kernels' elsewhere and when asked for (by each extent); the
 * gradients too.  A global pooling computed in f32 within global_tol. */
Test(pool_small, adaptive_avg_planes_are_the_serial_sums)
{
    sweep(false, 0, TG__POOL_SERIAL);
    sweep(false, TG__POOL_GENERAL, TG__POOL_GENERAL | TG__POOL_SERIAL);
}

/* Each kernel of the sums of whole planes (global average pooling),
 * forced with TG_POOL_KERNEL: the serial sums (within global_tol), every
 * case above; a kernel this CPU lacks is left out with the reason. */
Test(pool_small, global_avg_kernels_are_the_serial_sums)
{
    const char *old = getenv("TG_POOL_KERNEL");
    char saved[32] = "";
    if (old) snprintf(saved, sizeof saved, "%s", old);
    for (int k = TG__POOL_KERNEL_PORTABLE; k <= TG__POOL_KERNEL_AVX512; k++) {
        if (!tg__pool_kernel_available((tg__pool_kernel_id)k)) {
            th_not_run("the %s pooling kernel is not run: this CPU lacks it",
                       tg__pool_kernel_name((tg__pool_kernel_id)k));
            continue;
        }
        cr_assert(eq(int, setenv("TG_POOL_KERNEL", tg__pool_kernel_name(k), 1), 0));
        cr_assert(eq(int, tg__pool_kernel_get(), k), "TG_POOL_KERNEL=%s",
                  tg__pool_kernel_name((tg__pool_kernel_id)k));
        sweep(false, 0, TG__POOL_SERIAL);
    }
    if (old) setenv("TG_POOL_KERNEL", saved, 1);
    else unsetenv("TG_POOL_KERNEL");
}

/* The sum of a plane of n floats in the order src/ops/pool_simd.c states,
 * written out here: below 64 elements from 0 left to right; else element
 * i in lane i % 16 of partial sum (i / 16) % 4, each from 0; v[l] = (p0[l]
 * + p1[l]) + (p2[l] + p3[l]); v[l] += v[l + h] for h = 8, 4, 2, 1. */
static float lanes_sum(const float *x, int64_t n)
{
    float p[4][16], v[16];
    if (n < 64) {
        float s = 0;
        for (int64_t i = 0; i < n; i++) s += x[i];
        return s;
    }
    for (int a = 0; a < 4; a++)
        for (int l = 0; l < 16; l++) p[a][l] = 0;
    for (int64_t i = 0; i < n; i++) p[i / 16 % 4][i % 16] += x[i];
    for (int l = 0; l < 16; l++) v[l] = (p[0][l] + p[1][l]) + (p[2][l] + p[3][l]);
    for (int h = 8; h >= 1; h /= 2)
        for (int l = 0; l < h; l++) v[l] += v[l + h];
    return v[0];
}

/* The whole-plane sums of each kernel against lanes_sum, bit for bit (any
 * NaN for a NaN), and from 64 elements on against the exact sum within
 * (ceil(n / 64) + 6) u sum |x|: plane lengths from 1 to past several
 * blocks, 5 and 19 planes (the short planes' groups of eight and their
 * tail), values of mixed magnitudes, zeros of both signs, infinities and
 * NaNs; and by hand, 1 + 63 terms 2^-24, which is 1 from left to right,
 * 1 + 31 2^-23 here, and 1 + 62 such terms, 1 in any kernel. */
Test(pool_small, global_sums_in_lanes)
{
    enum { NP = 19, MAXN = 700 };
    float *x = malloc(sizeof *x * NP * MAXN), s[NP];
    cr_assert(x != NULL);
    static const int64_t lengths[] = {1, 2, 7, 8, 15, 16, 17, 31, 33, 49, 63, 64, 65, 100,
                                      127, 128, 129, 191, 256, 257, 600, 700};
    uint64_t seed = 91;
    for (int k = TG__POOL_KERNEL_PORTABLE; k <= TG__POOL_KERNEL_AVX512; k++) {
        const char *name = tg__pool_kernel_name((tg__pool_kernel_id)k);
        if (!tg__pool_kernel_available((tg__pool_kernel_id)k)) continue;
        cr_assert(eq(int, setenv("TG_POOL_KERNEL", name, 1), 0));
        for (size_t c = 0; c < sizeof lengths / sizeof *lengths; c++)
            for (int fill = 0; fill < 6; fill++) {
                const int64_t n = lengths[c], np = fill < 3 ? 5 : NP;
                for (int64_t e = 0; e < np * n; e++) {
                    const double r = th_uniform_pm1(&seed);
                    const int kind = fill % 3;
                    x[e] = kind == 0   ? (float)(r * ldexp(1, (int)th_rand_int(&seed, -30, 30)))
                           : kind == 1 ? (r < 0 ? -0.0f : 0.0f)
                           : th_rand_int(&seed, 0, 40) == 0 ? (r < 0 ? -INFINITY : NAN)
                                                            : (float)r;
                }
                tg__plane_sums_f32(s, x, n, np);
                for (int p = 0; p < np; p++) {
                    const float want = lanes_sum(x + p * n, n);
                    double exact = 0, abs_sum = 0;
                    for (int64_t i = 0; i < n; i++) {
                        exact += x[p * n + i];
                        abs_sum += fabs(x[p * n + i]);
                    }
                    const bool same = isnan(want) ? isnan(s[p])
                                                  : memcmp(&s[p], &want, sizeof want) == 0;
                    cr_assert(same, "%s, n %lld, fill %d, plane %d: %a, want %a", name,
                              (long long)n, fill, p, (double)s[p], (double)want);
                    if (isfinite(exact) && n >= 64)
                        cr_assert(fabs(s[p] - exact) <=
                                      (double)((n + 63) / 64 + 6) * 0x1p-24 * abs_sum * 1.0001,
                                  "%s, n %lld: %a, exact %a", name, (long long)n, (double)s[p],
                                  exact);
                }
            }
        for (int64_t i = 0; i < 64; i++) x[i] = i == 0 ? 1.0f : 0x1p-24f;
        tg__plane_sums_f32(s, x, 64, 1);
        cr_assert(s[0] == 1.0f + 31 * 0x1p-23f, "%s: %a", name, (double)s[0]);
        tg__plane_sums_f32(s, x, 63, 1);
        cr_assert(s[0] == 1.0f, "%s: %a", name, (double)s[0]);
    }
    unsetenv("TG_POOL_KERNEL");
    free(x);
}

/* A window whose maximum sits in the last elements of a run that is not a
 * whole number of lanes, one whose NaNs are first and last, and -0 before
 * +0: by hand, through the lanes. */
Test(pool_small, windows_by_hand)
{
    const int64_t n = 37;
    double v[37];
    for (int64_t e = 0; e < n; e++) v[e] = (double)(e % 7) - 10;
    v[35] = v[36] = 2;   /* a tie in the tail: the first */
    tg_tensor *x = th_tensor_from(TG_F32, 2, (int64_t[]){1, n}, v), *y = NULL, *idx = NULL;
    OK(tg_adaptive_max_pool(&y, &idx, x, 1, (int64_t[]){1}));
    cr_assert(eq(dbl, th_at(idx, 0), 35));
    th_release_all(3, (tg_tensor *[]){x, y, idx});

    v[0] = NAN;
    v[36] = -NAN;   /* the last NaN wins: y is -NaN */
    x = th_tensor_from(TG_F32, 2, (int64_t[]){1, n}, v);
    OK(tg_adaptive_max_pool(&y, &idx, x, 1, (int64_t[]){1}));
    cr_assert(eq(dbl, th_at(idx, 0), 36));
    cr_assert(isnan(th_at(y, 0)) && signbit(th_at(y, 0)));
    th_release_all(3, (tg_tensor *[]){x, y, idx});

    for (int64_t e = 0; e < n; e++) v[e] = e == 20 ? -0.0 : e == 30 ? 0.0 : -1;
    x = th_tensor_from(TG_F64, 2, (int64_t[]){1, n}, v);
    OK(tg_adaptive_max_pool(&y, &idx, x, 1, (int64_t[]){1}));
    cr_assert(eq(dbl, th_at(idx, 0), 20));
    cr_assert(signbit(th_at(y, 0)), "y is x[20], -0");
    th_release_all(3, (tg_tensor *[]){x, y, idx});
}
