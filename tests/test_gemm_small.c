/* tests/test_gemm_small.c - the plain-loop GEMM of products of at most
 * TG__GEMM_SMALL_MAX multiply-adds and its vector kernels of products of up
 * to 32768 (src/core/gemm_small.c), and the batch of small products on the
 * thread pool (tg__gemm_batched, src/ops/linalg.c).
 *
 * The bound.  Each element is a dot product of k terms summed in f32 (f64),
 * so its error is at most k u S (to first order), u the unit roundoff and S
 * the same dot product of |a| and |b|, plus u |beta c| and the final
 * rounding; the tests allow (k + 2) u (S + |beta c|).  A dropped, repeated
 * or misplaced product is off by about |a_i b_i|, far above that. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/ops.h"
#include "tapegrad/tapegrad.h"

#define COUNT_OF(x) (sizeof(x) / sizeof((x)[0]))

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static double rnd(void) { return th_uniform_pm1(&rng_state); }

/* One product's operands in both dtypes: a stored (k, m) when ta, else
 * (m, k), with leading dimension lda (and b likewise, (n, k) when tb). */
typedef struct prod {
    bool ta, tb;
    int64_t m, n, k, lda, ldb, ldc;
    double beta;
    double *a, *b, *c;   /* c: C's values before the product */
} prod;

static void prod_make(prod *p, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double beta)
{
    *p = (prod){.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .beta = beta};
    const int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    p->lda = ac + 1;   /* padded rows: the leading dimension is used, not assumed */
    p->ldb = bc + 2;
    p->ldc = n + 1;
    p->a = calloc((size_t)(ar * p->lda + 1), sizeof(double));
    p->b = calloc((size_t)(br * p->ldb + 1), sizeof(double));
    p->c = calloc((size_t)(m * p->ldc + 1), sizeof(double));
    cr_assert(p->a != NULL && p->b != NULL && p->c != NULL);
    for (int64_t i = 0; i < ar * p->lda; i++) p->a[i] = rnd();
    for (int64_t i = 0; i < br * p->ldb; i++) p->b[i] = rnd();
    for (int64_t i = 0; i < m * p->ldc; i++) p->c[i] = rnd();
}

static void prod_free(prod *p)
{
    free(p->a);
    free(p->b);
    free(p->c);
}

static double elem_a(const prod *p, int64_t i, int64_t q)
{
    return p->ta ? p->a[q * p->lda + i] : p->a[i * p->lda + q];
}

static double elem_b(const prod *p, int64_t q, int64_t j)
{
    return p->tb ? p->b[j * p->ldb + q] : p->b[q * p->ldb + j];
}

/* Runs tg__gemm_small (small) or OpenBLAS (!small) on p in dtype ct; the
 * result (m x ldc) as doubles in out. */
static void run(const prod *p, tg_dtype ct, bool small, double *out)
{
    const int64_t na = (p->ta ? p->k : p->m) * p->lda + 1,
                  nb = (p->tb ? p->n : p->k) * p->ldb + 1, nc = p->m * p->ldc + 1;
    if (ct == TG_F64) {
        memcpy(out, p->c, (size_t)nc * sizeof(double));
        if (small)
            tg__gemm_small(TG_F64, p->ta, p->tb, p->m, p->n, p->k, p->a, p->lda, p->b, p->ldb,
                           p->beta, out, p->ldc);
        else
            cblas_dgemm(CblasRowMajor, p->ta ? CblasTrans : CblasNoTrans,
                        p->tb ? CblasTrans : CblasNoTrans, (int)p->m, (int)p->n, (int)p->k, 1,
                        p->a, (int)p->lda, p->b, (int)p->ldb, p->beta, out, (int)p->ldc);
        return;
    }
    float *a = malloc(sizeof(float) * (size_t)na), *b = malloc(sizeof(float) * (size_t)nb),
          *c = malloc(sizeof(float) * (size_t)nc);
    cr_assert(a != NULL && b != NULL && c != NULL);
    for (int64_t i = 0; i < na; i++) a[i] = (float)p->a[i];
    for (int64_t i = 0; i < nb; i++) b[i] = (float)p->b[i];
    for (int64_t i = 0; i < nc; i++) c[i] = (float)p->c[i];
    if (small)
        tg__gemm_small(TG_F32, p->ta, p->tb, p->m, p->n, p->k, a, p->lda, b, p->ldb, p->beta, c,
                       p->ldc);
    else
        cblas_sgemm(CblasRowMajor, p->ta ? CblasTrans : CblasNoTrans,
                    p->tb ? CblasTrans : CblasNoTrans, (int)p->m, (int)p->n, (int)p->k, 1, a,
                    (int)p->lda, b, (int)p->ldb, (float)p->beta, c, (int)p->ldc);
    for (int64_t i = 0; i < nc; i++) out[i] = c[i];
    free(a);
    free(b);
    free(c);
}

/* The number of elements of out (from run) outside the bound of the top
 * (with the operands as rounded to ct); the padding columns of C must keep
 * C's values. */
static int64_t outside_bound(const prod *p, tg_dtype ct, const double *out)
{
    const double u = ct == TG_F64 ? 0x1p-53 : 0x1p-24;
    int64_t bad = 0;
    for (int64_t i = 0; i < p->m; i++) {
        for (int64_t j = 0; j < p->n; j++) {
            double s = 0, sa = 0;
            for (int64_t q = 0; q < p->k; q++) {
                const double x = tg__round_to(ct, elem_a(p, i, q)),
                             y = tg__round_to(ct, elem_b(p, q, j));
                s += x * y;
                sa += fabs(x * y);
            }
            const double c0 = tg__round_to(ct, p->c[i * p->ldc + j]);
            const double want = s + (p->beta == 0 ? 0 : p->beta * c0);
            const double tol = (double)(p->k + 2) * u * (sa + fabs(p->beta * c0)) + 1e-300;
            bad += fabs(out[i * p->ldc + j] - want) > tol;
        }
        const double pad = tg__round_to(ct, p->c[i * p->ldc + p->n]);
        bad += out[i * p->ldc + p->n] != pad;
    }
    return bad;
}

/* Every shape with m n k <= TG__GEMM_SMALL_MAX from a grid of extents,
 * both transpositions of each operand, beta 0, 1 and 0.5, both dtypes. */
Test(gemm_small, within_the_dot_product_bound_of_every_small_shape)
{
    static const int64_t ext[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 33};
    static const double betas[] = {0, 1, 0.5};
    int64_t cases = 0, bad = 0;
    for (int dt = 0; dt < 2; dt++)
        for (size_t im = 0; im < COUNT_OF(ext); im++)
            for (size_t in = 0; in < COUNT_OF(ext); in++)
                for (size_t ik = 0; ik < COUNT_OF(ext); ik++) {
                    const int64_t m = ext[im], n = ext[in], k = ext[ik];
                    if (m * n * k > TG__GEMM_SMALL_MAX) continue;
                    for (int t = 0; t < 4; t++)
                        for (size_t ib = 0; ib < COUNT_OF(betas); ib++) {
                            const tg_dtype ct = dt ? TG_F64 : TG_F32;
                            prod p;
                            prod_make(&p, t & 1, t & 2, m, n, k, betas[ib]);
                            double *out = calloc((size_t)(m * p.ldc + 1), sizeof(double));
                            cr_assert(out != NULL);
                            run(&p, ct, true, out);
                            bad += outside_bound(&p, ct, out);
                            cases++;
                            free(out);
                            prod_free(&p);
                        }
                }
    cr_assert(cases > 1000, "%lld cases", (long long)cases);
    cr_assert(eq(i64, bad, 0), "%lld elements outside the bound", (long long)bad);
}

/* With k = 0 the product is empty: C becomes beta C (0 for beta 0, even
 * where C held NaN). */
Test(gemm_small, an_empty_product_scales_c_by_beta)
{
    float c[4] = {NAN, 2, 3, 4}, a[1] = {0}, b[1] = {0};
    tg__gemm_small(TG_F32, false, false, 2, 2, 0, a, 1, b, 2, 0.0, c, 2);
    for (int i = 0; i < 4; i++) cr_assert(eq(flt, c[i], 0.0f));
    double d[4] = {1, 2, 3, 4}, x[1] = {0};
    tg__gemm_small(TG_F64, true, true, 2, 2, 0, x, 2, x, 1, 0.5, d, 2);
    for (int i = 0; i < 4; i++) cr_assert(eq(dbl, d[i], 0.5 * (i + 1)));
}

/* The plain loops and OpenBLAS agree to the bound on the same operands
 * (both within it of the exact result), on the vector path and on the
 * portable one (TG_MAX_ISA). */
Test(gemm_small, agrees_with_openblas_on_both_isa_paths)
{
    const int saved = tg__isa_set_bound(-1);
    int64_t bad = 0;
    for (int isa = 0; isa < 2; isa++) {
        tg__isa_set_bound(isa ? TG__ISA_PORTABLE : -1);
        for (int t = 0; t < 4; t++) {
            prod p;
            prod_make(&p, t & 1, t & 2, 7, 9, 8, t == 3 ? 1.0 : 0.0);
            double *x = calloc((size_t)(7 * p.ldc + 1), sizeof(double)),
                   *y = calloc((size_t)(7 * p.ldc + 1), sizeof(double));
            cr_assert(x != NULL && y != NULL);
            run(&p, TG_F32, true, x);
            run(&p, TG_F32, false, y);
            bad += outside_bound(&p, TG_F32, x) + outside_bound(&p, TG_F32, y);
            free(x);
            free(y);
            prod_free(&p);
        }
    }
    tg__isa_set_bound(saved);
    cr_assert(eq(i64, bad, 0));
}

/* tg__gemm and tg__gemm_par take the plain loops up to TG__GEMM_SMALL_MAX
 * (and the vector kernels up to 32768 where n fills a vector) and OpenBLAS
 * above: their results have tg__gemm_small's bits there. */
Test(gemm_small, tg_gemm_takes_the_loops_for_small_products)
{
    prod p;
    prod_make(&p, false, true, 8, 8, 8, 0.0);
    double *x = calloc((size_t)(8 * p.ldc + 1), sizeof(double)),
           *y = calloc((size_t)(8 * p.ldc + 1), sizeof(double));
    cr_assert(x != NULL && y != NULL);
    run(&p, TG_F64, true, x);
    memcpy(y, p.c, sizeof(double) * (size_t)(8 * p.ldc + 1));
    tg__gemm(TG_F64, false, true, 8, 8, 8, p.a, p.lda, p.b, p.ldb, 0.0, y, p.ldc);
    cr_assert(memcmp(x, y, sizeof(double) * (size_t)(8 * p.ldc)) == 0);
    memcpy(y, p.c, sizeof(double) * (size_t)(8 * p.ldc + 1));
    tg__gemm_par(TG_F64, TG_BF16_KERNEL_AUTO, false, true, 8, 8, 8, p.a, p.lda, p.b, p.ldb, 0.0,
                 y, p.ldc);
    cr_assert(memcmp(x, y, sizeof(double) * (size_t)(8 * p.ldc)) == 0, "tg__gemm_par");
    cr_assert(tg__gemm_small_pays(TG_F64, 8, 8, 8));
    cr_assert(tg__gemm_small_pays(TG_F64, 40, 40, 40) == false, "64000 multiply-adds: OpenBLAS");
    cr_assert(tg__gemm_small_pays(TG_F32, 64, 2, 64) == false, "n below a vector: OpenBLAS");
    free(x);
    free(y);
    prod_free(&p);
}

/* The element (i, j) of p as the vector kernels must give it in ct: one
 * fused multiply-add chain over q from 0, then beta c added unfused. */
static double fused_chain(const prod *p, tg_dtype ct, int64_t i, int64_t j)
{
    const double c0 = p->c[i * p->ldc + j];
    if (ct == TG_F64) {
        double acc = 0;
        for (int64_t q = 0; q < p->k; q++) acc = fma(elem_a(p, i, q), elem_b(p, q, j), acc);
        return p->beta == 0 ? acc : p->beta * c0 + acc;
    }
    float acc = 0;
    for (int64_t q = 0; q < p->k; q++)
        acc = fmaf((float)elem_a(p, i, q), (float)elem_b(p, q, j), acc);
    const float bf = (float)p->beta, cf = (float)c0;
    return p->beta == 0 ? acc : bf * cf + acc;
}

/* Products above TG__GEMM_SMALL_MAX and up to 32768 multiply-adds (row
 * blocks of 8, 4 and 1, the last columns short of a vector, transposed
 * operands, beta 0, 1 and 0.5) on the AVX-512 and AVX2 kernels: each has
 * the fused chain's bits, so both paths and the small loops agree.  A path
 * this CPU (or TG_MAX_ISA) lacks is skipped with its reason printed. */
Test(gemm_small, vector_kernels_give_the_fused_chain_bits_on_every_isa_path)
{
    static const int64_t ms[] = {1, 3, 4, 5, 8, 9, 13, 17}, ns[] = {8, 15, 16, 17, 24, 33},
                         ks[] = {1, 7, 16, 33};
    static const double betas[] = {0, 1, 0.5};
    const int saved = tg__isa_set_bound(-1);
    int64_t checked = 0;
    for (int path = 0; path < 2; path++) {
        tg__isa_set_bound(path ? TG__ISA_AVX2 : -1);
        for (int dt = 0; dt < 2; dt++) {
            const tg_dtype ct = dt ? TG_F64 : TG_F32;
            if (!tg__gemm_small_pays(ct, 8, 16, 16)) {
                fprintf(stderr, "gemm_small: %s %s vector kernel skipped: this CPU (or "
                        "TG_MAX_ISA) has no AVX2 with FMA\n", path ? "avx2" : "native",
                        tg_dtype_name(ct));
                continue;
            }
            for (size_t im = 0; im < COUNT_OF(ms); im++)
                for (size_t in = 0; in < COUNT_OF(ns); in++)
                    for (size_t ik = 0; ik < COUNT_OF(ks); ik++)
                        for (int t = 0; t < 4; t++) {
                            const int64_t m = ms[im], n = ns[in], k = ks[ik];
                            if (m * n * k <= TG__GEMM_SMALL_MAX ||
                                !tg__gemm_small_pays(ct, m, n, k))
                                continue;
                            prod p;
                            prod_make(&p, t & 1, t & 2, m, n, k, betas[(im + t) % 3]);
                            double *out = calloc((size_t)(m * p.ldc + 1), sizeof(double));
                            cr_assert(out != NULL);
                            run(&p, ct, true, out);
                            for (int64_t i = 0; i < m; i++)
                                for (int64_t j = 0; j < n; j++) {
                                    const double want = fused_chain(&p, ct, i, j),
                                                 got = out[i * p.ldc + j];
                                    cr_assert(memcmp(&want, &got, sizeof want) == 0,
                                              "path %d %s %lld x %lld x %lld t %d (%lld, %lld): "
                                              "%a, not %a", path, tg_dtype_name(ct),
                                              (long long)m, (long long)n, (long long)k, t,
                                              (long long)i, (long long)j, got, want);
                                }
                            cr_assert(outside_bound(&p, ct, out) == 0);
                            checked++;
                            free(out);
                            prod_free(&p);
                        }
        }
    }
    tg__isa_set_bound(saved);
    fprintf(stderr, "gemm_small: %lld products on the vector kernels\n", (long long)checked);
}

/* A (B, m, k) @ (B, k, n) of f32, made from doubles. */
static tg_tensor *batch_tensor(int64_t b, int64_t r, int64_t c)
{
    const int64_t shape[3] = {b, r, c};
    tg_tensor *t = NULL;
    cr_assert(tg_tensor_zeros(&t, TG_F32, 3, shape) == TG_OK);
    float *d = tg_tensor_data(t);
    for (int64_t i = 0; i < b * r * c; i++) d[i] = (float)rnd();
    return t;
}

/* A batch of small products on the pool: the same bits at 1 and 2 threads
 * and as each matrix multiplied alone (a batch of one), for products on the
 * plain loops (4 x 4 x 4), the vector kernels where the CPU has them
 * (16 x 24 x 12) and OpenBLAS (40 x 40 x 40), with a transposed operand. */
Test(gemm_small, a_batch_on_the_pool_keeps_each_products_bits)
{
    static const int64_t shapes[][4] = {{4096, 4, 4, 4}, {300, 16, 12, 24}, {64, 40, 40, 40}};
    const int threads = tg_get_num_threads();
    for (size_t s = 0; s < COUNT_OF(shapes); s++) {
        const int64_t nb = shapes[s][0], m = shapes[s][1], k = shapes[s][2], n = shapes[s][3];
        tg_tensor *a = batch_tensor(nb, m, k), *bt = batch_tensor(nb, n, k), *b = NULL;
        cr_assert(tg_transpose(&b, bt, 1, 2) == TG_OK);
        tg_tensor *y[2] = {NULL, NULL};
        for (int t = 0; t < 2; t++) {
            cr_assert(tg_set_num_threads(t + 1) == TG_OK);
            cr_assert(tg_matmul(&y[t], a, b) == TG_OK);
        }
        cr_assert(tg_set_num_threads(threads) == TG_OK);
        const float *y0 = tg_tensor_data(y[0]), *y1 = tg_tensor_data(y[1]);
        cr_assert(memcmp(y0, y1, sizeof(float) * (size_t)(nb * m * n)) == 0);
        for (int64_t i = 0; i < nb; i += nb / 7) {
            tg_tensor *ai = NULL, *bi = NULL, *yi = NULL;
            cr_assert(tg_narrow(&ai, a, 0, i, 1) == TG_OK);
            cr_assert(tg_narrow(&bi, b, 0, i, 1) == TG_OK);
            cr_assert(tg_matmul(&yi, ai, bi) == TG_OK);
            cr_assert(memcmp(tg_tensor_data(yi), y0 + i * m * n, sizeof(float) * (size_t)(m * n)) ==
                      0, "matrix %lld of shape %zu", (long long)i, s);
            tg_tensor_release(ai);
            tg_tensor_release(bi);
            tg_tensor_release(yi);
        }
        tg_tensor_release(y[0]);
        tg_tensor_release(y[1]);
        tg_tensor_release(a);
        tg_tensor_release(b);
        tg_tensor_release(bt);
    }
}
