/* tests/test_bf16_gemm.c - the bf16 GEMM kernels (tapegrad/precision.h):
 * each kernel this CPU runs against an f64 reference on the GEMM itself,
 * the AMX-BF16 tile product, thin products that run sgemm, and choosing a
 * kernel.  The ops on the kernels (ConvNd, ConvTransposeNd, Linear) are in
 * test_bf16_gemm_ops.c.
 *
 * The bound.  Every product of two bf16 values is exact in f32 (8 + 8
 * significant bits), so a kernel's only errors are the f32 additions of a
 * dot product of K terms, at most K u S with u = 2^-24 and S the same dot
 * product of |a| and |b| (to first order, for any order of the additions),
 * and, for a bf16 result, its final rounding, at most 2^-8 |c| (bf16 keeps 8
 * significant bits).  A kernel that drops, repeats or misplaces one product
 * is off by about |a_i b_i|, far above K u S. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "bf16_gemm_fixtures.h"
#include "core/gemm_bf16.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/ops.h"
#include "tapegrad/precision.h"
#include "tapegrad/registry.h"
#include "tapegrad/status.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;   /* each test starts from it (fork) */
static double rnd(void) { return th_uniform_pm1(&rng_state); }
static int64_t rnd_int(int64_t lo, int64_t hi) { return th_rand_int(&rng_state, lo, hi); }

static const double U32 = 0x1p-24;

/* ---- the GEMM ---- */

/* A random bf16 value widened to f32, of magnitude about 1 (sometimes 0). */
static float rnd_bf16(void)
{
    return tg_bf16_to_f32(tg_f32_to_bf16((float)(rnd() * exp2(rnd_int(-3, 3)))));
}

/* The bf16 bits of n f32 values that are bf16 values. */
static uint16_t *bits_of(const float *v, int64_t n)
{
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)n);
    cr_assert(h != NULL);
    for (int64_t i = 0; i < n; i++) h[i] = tg_f32_to_bf16(v[i]);
    return h;
}

/* The GEMM shapes of the sweeps: m past 144 and 32, n past 32, k odd and
 * past 384. */
static const int64_t sweep_dims[][3] = {{1, 1, 1},    {3, 5, 7},     {12, 32, 2},   {13, 33, 3},
                                        {31, 17, 64}, {33, 65, 385}, {130, 70, 51},
                                        {5, 200, 800}, {64, 48, 1000}, {150, 40, 20}};

/* c = op(a) op(b) + beta c on kernel k against f64, element by element, over
 * shapes that cross the blocking (m past 144 and 32, n past 32, k odd and
 * past 384) and leading dimensions past the extents; a and b given as f32
 * and, above PORTABLE, as bf16 bits too (tg__gemm_bf16_bits). */
static void gemm_sweep_on(tg_bf16_kernel k)
{
    const int forms = k == TG_BF16_KERNEL_PORTABLE ? 8 : 32;
    for (size_t s = 0; s < sizeof sweep_dims / sizeof *sweep_dims; s++)
        for (int form = 0; form < forms; form++) {
            const bool ta = form & 1, tb = form & 2, a_bits = form & 8, b_bits = form & 16;
            const float beta = (form & 4) ? 1.0f : 0.0f;
            const int64_t m = sweep_dims[s][0], n = sweep_dims[s][1], kk = sweep_dims[s][2];
            const int64_t lda = (ta ? m : kk) + 3, ldb = (tb ? kk : n) + 1, ldc = n + 2;
            float *a = malloc(sizeof(float) * (size_t)((ta ? kk : m) * lda));
            float *b = malloc(sizeof(float) * (size_t)((tb ? n : kk) * ldb));
            float *c = malloc(sizeof(float) * (size_t)(m * ldc));
            float *c0 = malloc(sizeof(float) * (size_t)(m * ldc));
            cr_assert(a && b && c && c0);
            for (int64_t i = 0; i < (ta ? kk : m) * lda; i++) a[i] = rnd_bf16();
            for (int64_t i = 0; i < (tb ? n : kk) * ldb; i++) b[i] = rnd_bf16();
            for (int64_t i = 0; i < m * ldc; i++) c[i] = c0[i] = beta != 0 ? (float)rnd() : NAN;
            uint16_t *ah = a_bits ? bits_of(a, (ta ? kk : m) * lda) : NULL;
            uint16_t *bh = b_bits ? bits_of(b, (tb ? n : kk) * ldb) : NULL;
            if (a_bits || b_bits)
                tg__gemm_bf16_bits(k, ta, tb, m, n, kk, a_bits ? (const void *)ah : a, a_bits,
                                   lda, b_bits ? (const void *)bh : b, b_bits, ldb, beta, c, ldc,
                                   NULL, 0, NULL, 0);
            else
                tg__gemm_bf16(k, ta, tb, m, n, kk, a, lda, b, ldb, beta, c, ldc);
            free(ah);
            free(bh);
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double ref = beta != 0 ? c0[i * ldc + j] : 0, sabs = fabs(ref);
                    for (int64_t t = 0; t < kk; t++) {
                        const double p = (double)(ta ? a[t * lda + i] : a[i * lda + t]) *
                                         (tb ? b[j * ldb + t] : b[t * ldb + j]);
                        ref += p;
                        sabs += fabs(p);
                    }
                    const double bound = 1.01 * (double)(kk + 1) * U32 * sabs + 0x1p-120;
                    cr_assert(fabs(c[i * ldc + j] - ref) <= bound,
                              "%s m=%lld n=%lld k=%lld ta=%d tb=%d bits %d%d beta=%g: "
                              "c[%lld][%lld]=%.9g, f64 %.9g, bound %.3g",
                              tg_bf16_kernel_name(k), (long long)m, (long long)n, (long long)kk,
                              ta, tb, a_bits, b_bits, beta, (long long)i, (long long)j,
                              c[i * ldc + j], ref, bound);
                }
            for (int64_t i = 0; i < m; i++)   /* the padding between rows is untouched */
                for (int64_t j = n; j < ldc; j++)
                    cr_assert(c[i * ldc + j] == c0[i * ldc + j] ||
                              (isnan(c[i * ldc + j]) && isnan(c0[i * ldc + j])));
            free(a);
            free(b);
            free(c);
            free(c0);
        }
}

static void gemm_sweep(tg_bf16_kernel k)
{
    use_kernel(k);
    gemm_sweep_on(k);
}

Test(bf16_gemm, portable_kernel_against_f64) { gemm_sweep(TG_BF16_KERNEL_PORTABLE); }
Test(bf16_gemm, avx512_kernel_against_f64) { gemm_sweep(TG_BF16_KERNEL_AVX512); }
Test(bf16_gemm, amx_kernel_against_f64) { gemm_sweep(TG_BF16_KERNEL_AMX); }

/* The avx512 kernel's two ways of broadcasting A (by each instruction's
 * load, or once into a register), each forced: both against f64, and the
 * same bits as each other on every shape, form and beta of the sweep. */
Test(bf16_gemm, avx512_load_broadcast_against_f64)
{
    use_kernel(TG_BF16_KERNEL_AVX512);
    tg__bf16_set_broadcast(TG__BF16_BCAST_LOAD);
    gemm_sweep_on(TG_BF16_KERNEL_AVX512);
    tg__bf16_set_broadcast(TG__BF16_BCAST_AUTO);
}

Test(bf16_gemm, avx512_register_broadcast_against_f64)
{
    use_kernel(TG_BF16_KERNEL_AVX512);
    tg__bf16_set_broadcast(TG__BF16_BCAST_REGISTER);
    gemm_sweep_on(TG_BF16_KERNEL_AVX512);
    tg__bf16_set_broadcast(TG__BF16_BCAST_AUTO);
}

/* The sweep's shapes and tile edges: m and n at and past the 4-, 8- and
 * 12-row and 16- and 32-column tiles, k past a block. */
static const int64_t tile_dims[][3] = {{1, 1, 1},   {4, 16, 9},  {5, 17, 3},   {8, 8, 64},
                                       {9, 31, 5},  {12, 32, 2}, {13, 33, 389}, {20, 48, 7},
                                       {25, 40, 50}, {130, 70, 51}};

/* On every shape of dims (n_dims of them), form (ta, tb) and beta, the
 * avx512 GEMM once with choose(0) and once with choose(1) in force gives the
 * same bits; choose(-1) restores the default. */
static void same_bits_either_way(const int64_t (*dims)[3], size_t n_dims, void (*choose)(int),
                                 const char *what)
{
    use_kernel(TG_BF16_KERNEL_AVX512);
    for (size_t s = 0; s < n_dims; s++)
        for (int form = 0; form < 8; form++) {
            const bool ta = form & 1, tb = form & 2;
            const float beta = (form & 4) ? 0.5f : 0.0f;
            const int64_t m = dims[s][0], n = dims[s][1], kk = dims[s][2];
            const int64_t lda = ta ? m : kk, ldb = tb ? kk : n;
            float *a = malloc(sizeof(float) * (size_t)(m * kk));
            float *b = malloc(sizeof(float) * (size_t)(kk * n));
            float *c[2] = {malloc(sizeof(float) * (size_t)(m * n)),
                           malloc(sizeof(float) * (size_t)(m * n))};
            cr_assert(a && b && c[0] && c[1]);
            for (int64_t i = 0; i < m * kk; i++) a[i] = rnd_bf16();
            for (int64_t i = 0; i < kk * n; i++) b[i] = rnd_bf16();
            for (int64_t i = 0; i < m * n; i++) c[0][i] = c[1][i] = (float)rnd();
            for (int f = 0; f < 2; f++) {
                choose(f);
                tg__gemm_bf16(TG_BF16_KERNEL_AVX512, ta, tb, m, n, kk, a, lda, b, ldb, beta,
                              c[f], n);
            }
            choose(-1);
            cr_assert(eq(int, memcmp(c[0], c[1], sizeof(float) * (size_t)(m * n)), 0),
                      "m=%lld n=%lld k=%lld ta=%d tb=%d beta=%g: %s differ", (long long)m,
                      (long long)n, (long long)kk, ta, tb, beta, what);
            free(a);
            free(b);
            free(c[0]);
            free(c[1]);
        }
}

static void choose_broadcast(int f)
{
    tg__bf16_set_broadcast(f < 0 ? TG__BF16_BCAST_AUTO
                           : f  ? TG__BF16_BCAST_REGISTER
                                : TG__BF16_BCAST_LOAD);
}

Test(bf16_gemm, avx512_broadcast_forms_give_the_same_bits)
{
    same_bits_either_way(sweep_dims, sizeof sweep_dims / sizeof *sweep_dims, choose_broadcast,
                         "the two broadcasts");
}

/* A tile of mr x nr runs as the smallest of 4, 8 or 12 rows by 16 or 32
 * columns that holds it: the same bits as the full 12 x 32 tile, in each
 * broadcast form. */
static void choose_full_tiles_load(int f)
{
    tg__bf16_set_full_tiles(f == 1);
    tg__bf16_set_broadcast(f < 0 ? TG__BF16_BCAST_AUTO : TG__BF16_BCAST_LOAD);
}

static void choose_full_tiles_register(int f)
{
    tg__bf16_set_full_tiles(f == 1);
    tg__bf16_set_broadcast(f < 0 ? TG__BF16_BCAST_AUTO : TG__BF16_BCAST_REGISTER);
}

Test(bf16_gemm, avx512_tile_sizes_give_the_full_tiles_bits)
{
    same_bits_either_way(tile_dims, sizeof tile_dims / sizeof *tile_dims, choose_full_tiles_load,
                         "sized and full tiles (load broadcast)");
    same_bits_either_way(tile_dims, sizeof tile_dims / sizeof *tile_dims,
                         choose_full_tiles_register, "sized and full tiles (register broadcast)");
}

/* TG_BF16_BROADCAST=load|register picks the form; any other value, or none,
 * leaves this CPU's best (tg__bf16_set_broadcast wins over all).  It is
 * read at the first call and again only after tg__bf16_broadcast_reread. */
Test(bf16_gemm, environment_variable_chooses_the_broadcast)
{
    const tg__bf16_bcast best = tg__bf16_broadcast_best_register() ? TG__BF16_BCAST_REGISTER
                                                                   : TG__BF16_BCAST_LOAD;
    cr_assert(eq(int, unsetenv("TG_BF16_BROADCAST"), 0));
    tg__bf16_broadcast_reread();
    cr_assert(eq(int, tg__bf16_broadcast(), best));
    cr_assert(eq(int, setenv("TG_BF16_BROADCAST", "load", 1), 0));
    cr_assert(eq(int, tg__bf16_broadcast(), best), "read once: not yet seen");
    tg__bf16_broadcast_reread();
    cr_assert(eq(int, tg__bf16_broadcast(), TG__BF16_BCAST_LOAD));
    cr_assert(eq(str, (char *)tg_bf16_broadcast_name(), "load"));
    cr_assert(eq(int, setenv("TG_BF16_BROADCAST", "register", 1), 0));
    tg__bf16_broadcast_reread();
    cr_assert(eq(int, tg__bf16_broadcast(), TG__BF16_BCAST_REGISTER));
    cr_assert(eq(str, (char *)tg_bf16_broadcast_name(), "register"));
    cr_assert(eq(int, setenv("TG_BF16_BROADCAST", "sideways", 1), 0));
    tg__bf16_broadcast_reread();
    cr_assert(eq(int, tg__bf16_broadcast(), best));
    tg__bf16_set_broadcast(TG__BF16_BCAST_LOAD);
    cr_assert(eq(int, tg__bf16_broadcast(), TG__BF16_BCAST_LOAD));
    tg__bf16_set_broadcast(TG__BF16_BCAST_AUTO);
    cr_assert(eq(int, unsetenv("TG_BF16_BROADCAST"), 0));
    tg__bf16_broadcast_reread();
}

/* Without memory for the packing buffers: the plain loops, which read f32
 * operands, bits and panels alike. */
Test(bf16_gemm, avx512_kernel_without_packing_buffers_against_f64)
{
    use_kernel(TG_BF16_KERNEL_AVX512);
    tg__bf16_set_no_pack_buffers(true);
    gemm_sweep_on(TG_BF16_KERNEL_AVX512);
    tg__bf16_set_no_pack_buffers(false);
}

/* The amx kernel (its packing, its blocking: A as rows of k, k padded to
 * 32, 32 x 32 tiles, and its micro-kernel's tile loads, products and
 * stores) on emulated tiles: it runs where the CPU has the AVX-512 BF16
 * packers, with AMX or without. */
static void gemm_sweep_amx_layout(void)
{
    emulate_amx();
    gemm_sweep_on(TG_BF16_KERNEL_AMX);
    tg__amx_set_emulated(false);
}

Test(bf16_gemm, amx_layout_on_emulated_tiles_against_f64) { gemm_sweep_amx_layout(); }

/* ---- the AMX-BF16 tile product ---- */

/* c (16 x 16 f32) += a (16 rows of 32 bf16) times b (16 rows of 16 bf16
 * pairs) as tdpbf16ps defines it: c[m][n] += sum over k < 16, i < 2 of
 * a[m][2k+i] b[k][2n+i]; here in f64, for a bound on the f32 sums. */
static void naive_tile_dpbf16(double *c, double *mag, const uint16_t *a, const uint16_t *b)
{
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            double s = c[m * 16 + n], g = fabs(s);
            for (int k = 0; k < 16; k++)
                for (int i = 0; i < 2; i++) {
                    const double p = (double)tg_bf16_to_f32(a[m * 32 + 2 * k + i]) *
                                     tg_bf16_to_f32(b[k * 32 + 2 * n + i]);
                    s += p, g += fabs(p);
                }
            c[m * 16 + n] = s, mag[m * 16 + n] = g;
        }
}

/* One tile product, on the tiles that core/amx_tiles.h names at its use. */
#define TILE_DPBF16(c, a, b)                                                                    \
    do {                                                                                        \
        TG__TILE_LOAD(2, c, 64);                                                                \
        TG__TILE_LOAD(6, a, 64);                                                                \
        TG__TILE_LOAD(1, b, 64);                                                                \
        TG__TILE_DPBF16PS(2, 6, 1);                                                             \
        TG__TILE_STORE(2, c, 64);                                                               \
    } while (0)

#define TG__AMX_EMU 1
#include "core/amx_tiles.h"
static void emulated_tile_dpbf16(float *c, const uint16_t *a, const uint16_t *b)
{
    tg__amx_emu_config();
    TILE_DPBF16(c, a, b);
    tg__amx_emu_release();
}
#undef TG__AMX_EMU

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TG__AMX_EMU 0
#include "core/amx_tiles.h"
__attribute__((target("amx-tile,amx-bf16"))) static void cpu_tile_dpbf16(float *c,
                                                                         const uint16_t *a,
                                                                         const uint16_t *b)
{
    tg__amx_tiles_begin();
    TILE_DPBF16(c, a, b);
    tg__amx_tiles_end();
}
#undef TG__AMX_EMU
static bool cpu_has_amx_bf16(void) { return !tg__amx_emulated() && tg__amx_available(TG__AMX_BF16); }
#else
static void cpu_tile_dpbf16(float *c, const uint16_t *a, const uint16_t *b) {}
static bool cpu_has_amx_bf16(void) { return false; }
#endif

/* The emulated tdpbf16ps, and the CPU's where it has AMX-BF16, within 33
 * f32 roundings of the f64 sums (one per added term). */
Test(bf16_gemm, amx_tile_product_follows_the_instruction)
{
    const bool cpu = cpu_has_amx_bf16();
    uint16_t a[512], b[512];
    float c0[256], got[256];
    double want[256], mag[256];
    for (int trial = 0; trial < 20; trial++) {
        for (int i = 0; i < 512; i++)
            a[i] = tg_f32_to_bf16(rnd_bf16()), b[i] = tg_f32_to_bf16(rnd_bf16());
        for (int i = 0; i < 256; i++) c0[i] = trial % 2 ? (float)(rnd() * 8) : 0.0f;
        for (int i = 0; i < 256; i++) want[i] = c0[i];
        naive_tile_dpbf16(want, mag, a, b);
        for (int run = 0; run < (cpu ? 2 : 1); run++) {
            memcpy(got, c0, sizeof got);
            if (run == 0) emulated_tile_dpbf16(got, a, b);
            else cpu_tile_dpbf16(got, a, b);
            for (int i = 0; i < 256; i++)
                cr_assert(fabs(got[i] - want[i]) <= 33 * U32 * mag[i], "%s, trial %d, %d: %g, not %g",
                          run ? "the CPU's" : "emulated", trial, i, got[i], want[i]);
        }
    }
    if (!cpu) th_not_run("this CPU has no AMX-BF16: the tile product ran emulated only");
}

/* Subnormals are zeros to tdpbf16ps, in and out: a subnormal bf16 input
 * times 2^100 adds nothing, a product of 2^-70 and 2^-70 (2^-140, an f32
 * subnormal) adds nothing, and a subnormal c comes out as zero; a normal
 * product beside them is kept. */
Test(bf16_gemm, amx_tile_product_flushes_subnormals)
{
    const bool cpu = cpu_has_amx_bf16();
    uint16_t a[512] = {0}, b[512] = {0};
    float got[256];
    const uint16_t tiny = 0x0001,   /* the least bf16 subnormal, 2^-133 */
        big = tg_f32_to_bf16(0x1p100f), small = tg_f32_to_bf16(0x1p-70f);
    /* c[0][0]: tiny x big; c[1][0]: small x small (the odd elements of
     * pair 0); c[2][1]: 1 x 3 */
    a[0] = tiny, b[0] = big;
    a[33] = small, b[1] = small;
    a[64] = tg_f32_to_bf16(1.0f), b[2] = tg_f32_to_bf16(3.0f), b[3] = tg_f32_to_bf16(3.0f);
    for (int run = 0; run < (cpu ? 2 : 1); run++) {
        for (int i = 0; i < 256; i++) got[i] = 0.0f;
        got[3 * 16] = 0x1p-140f;   /* row 3: a subnormal c, nothing added */
        if (run == 0) emulated_tile_dpbf16(got, a, b);
        else cpu_tile_dpbf16(got, a, b);
        const char *who = run ? "the CPU's" : "emulated";
        cr_assert(got[0] == 0.0f, "%s: a subnormal input counted: %a", who, got[0]);
        cr_assert(got[16] == 0.0f, "%s: a subnormal product kept: %a", who, got[16]);
        cr_assert(got[32 + 1] == 3.0f, "%s: 1 x 3 gave %a", who, got[33]);
        cr_assert(got[48] == 0.0f, "%s: a subnormal c kept: %a", who, got[48]);
    }
    if (!cpu) th_not_run("this CPU has no AMX-BF16: the tile product ran emulated only");
}

/* A product thin for the kernels (fewer than 32 columns or terms:
 * tg__bf16_gemm_pays) runs sgemm on the f32 buffers holding bf16 values:
 * the bits of the f32 GEMM of the same buffers; a wide one runs the
 * kernel, whose sums of 6272 terms differ from sgemm's in some bits. */
static void thin_gemm(tg_bf16_kernel k)
{
    use_kernel(k);
    static const int64_t dims[][3] = {   /* m, n, k */
        {64, 1, 6272}, {64, 16, 6272}, {64, 31, 500}, {64, 6272, 8}, {300, 500, 31},
        {64, 64, 6272}};
    for (size_t i = 0; i < sizeof dims / sizeof *dims; i++) {
        const int64_t m = dims[i][0], n = dims[i][1], kk = dims[i][2];
        float *a = malloc(sizeof(float) * (size_t)(m * kk));
        float *b = malloc(sizeof(float) * (size_t)(kk * n));
        float *c = malloc(sizeof(float) * (size_t)(m * n));
        float *c32 = malloc(sizeof(float) * (size_t)(m * n));
        cr_assert(a && b && c && c32);
        for (int64_t e = 0; e < m * kk; e++) a[e] = rnd_bf16();
        for (int64_t e = 0; e < kk * n; e++) b[e] = rnd_bf16();
        tg__gemm(TG_BF16, false, false, m, n, kk, a, kk, b, n, 0.0, c, n);
        tg__gemm(TG_F32, false, false, m, n, kk, a, kk, b, n, 0.0, c32, n);
        int64_t differ = 0;
        for (int64_t e = 0; e < m * n; e++) differ += memcmp(&c[e], &c32[e], sizeof *c) != 0;
        const bool thin = n < 32 || kk < 32;
        cr_assert(thin == false || differ == 0, "%s, %lld x %lld x %lld: %lld elements differ "
                  "from sgemm's", tg_bf16_kernel_name(k), (long long)m, (long long)n,
                  (long long)kk, (long long)differ);
        cr_assert(thin || differ > 0, "%s, %lld x %lld x %lld: the kernel gave sgemm's bits",
                  tg_bf16_kernel_name(k), (long long)m, (long long)n, (long long)kk);
        free(a);
        free(b);
        free(c);
        free(c32);
    }
}

Test(bf16_gemm, avx512_thin_products_run_sgemm) { thin_gemm(TG_BF16_KERNEL_AVX512); }
Test(bf16_gemm, amx_thin_products_run_sgemm_on_emulated_tiles)
{
    emulate_amx();
    thin_gemm(TG_BF16_KERNEL_AMX);
    tg__amx_set_emulated(false);
}

Test(bf16_gemm, forcing_a_kernel_the_cpu_lacks_is_refused)
{
    cr_assert(eq(int, tg_bf16_kernel_set((tg_bf16_kernel)9), TG_EINVAL));
    for (int k = TG_BF16_KERNEL_PORTABLE; k <= TG_BF16_KERNEL_AMX; k++) {
        const int rc = tg_bf16_kernel_set((tg_bf16_kernel)k);
        const int want = tg_bf16_kernel_available((tg_bf16_kernel)k) ? TG_OK : TG_EUNSUPPORTED;
        cr_assert(eq(int, rc, want));
        if (rc < 0) th_expect_in(tg_error_message(), tg_bf16_kernel_name((tg_bf16_kernel)k));
    }
    cr_assert(eq(int, tg_bf16_kernel_set(TG_BF16_KERNEL_AUTO), TG_OK));
    cr_assert(tg_bf16_kernel_get() != TG_BF16_KERNEL_AUTO);
    cr_assert(tg_bf16_kernel_available(TG_BF16_KERNEL_PORTABLE));
}

/* TG_BF16_KERNEL picks a kernel this CPU has; any other value leaves the
 * best one (a forced tg_bf16_kernel_set wins over both). */
Test(bf16_gemm, environment_variable_forces_a_kernel)
{
    /* the best kernel, even in a run of the suite with one forced */
    cr_assert(eq(int, unsetenv("TG_BF16_KERNEL"), 0));
    tg_bf16_kernel best = tg_bf16_kernel_get();
    cr_assert(eq(int, setenv("TG_BF16_KERNEL", "portable", 1), 0));
    cr_assert(eq(int, tg_bf16_kernel_get(), TG_BF16_KERNEL_PORTABLE));
    cr_assert(eq(int, setenv("TG_BF16_KERNEL", "avx512", 1), 0));
    cr_assert(eq(int, tg_bf16_kernel_get(),
                 tg_bf16_kernel_available(TG_BF16_KERNEL_AVX512) ? TG_BF16_KERNEL_AVX512 : best));
    cr_assert(eq(int, setenv("TG_BF16_KERNEL", "tiles", 1), 0));
    cr_assert(eq(int, tg_bf16_kernel_get(), best));
    cr_assert(eq(int, tg_bf16_kernel_set(TG_BF16_KERNEL_PORTABLE), TG_OK));
    cr_assert(eq(int, tg_bf16_kernel_get(), TG_BF16_KERNEL_PORTABLE));
    cr_assert(eq(int, unsetenv("TG_BF16_KERNEL"), 0));
}

/* Operands whose k is contiguous (A not transposed, B transposed), given
 * as bf16 bits, give the bits of the same values given as f32: the packer
 * of such lines takes whole groups of bits (sixteen lines of a B panel,
 * the twelve of an A panel) without masks, and the rest line by line;
 * shapes with m, n and k on both sides of 12, 16, 32 and the blocks of k,
 * leading dimensions past the extents, both broadcast forms. */
Test(bf16_gemm, avx512_k_contiguous_bits_same_bits_as_f32)
{
    if (!tg_bf16_kernel_available(TG_BF16_KERNEL_AVX512))
        cr_skip_test("the avx512 bf16 kernel needs AVX-512 BF16");
    static const int64_t ms[] = {1, 11, 12, 13, 24, 25, 40};
    static const int64_t ns[] = {1, 15, 16, 17, 32, 33, 50};
    static const int64_t ks[] = {1, 31, 32, 33, 64, 65, 200, 385, 800};
    for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
            for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
                for (int reg = 0; reg < 2; reg++) {
                    const int64_t m = ms[mi], n = ns[ni], kk = ks[ki];
                    const int64_t lda = kk + 3, ldb = kk + 5;   /* a (m, k), b (n, k) */
                    float *a = malloc(sizeof(float) * (size_t)(m * lda));
                    float *b = malloc(sizeof(float) * (size_t)(n * ldb));
                    float *c[2] = {malloc(sizeof(float) * (size_t)(m * n)),
                                   malloc(sizeof(float) * (size_t)(m * n))};
                    cr_assert(a && b && c[0] && c[1]);
                    for (int64_t i = 0; i < m * lda; i++) a[i] = rnd_bf16();
                    for (int64_t i = 0; i < n * ldb; i++) b[i] = rnd_bf16();
                    uint16_t *ah = bits_of(a, m * lda), *bh = bits_of(b, n * ldb);
                    tg__bf16_set_broadcast(reg ? TG__BF16_BCAST_REGISTER : TG__BF16_BCAST_LOAD);
                    for (int v = 0; v < 2; v++)
                        tg__gemm_bf16_bits(TG_BF16_KERNEL_AVX512, false, true, m, n, kk,
                                           v ? (const void *)ah : a, v == 1, lda,
                                           v ? (const void *)bh : b, v == 1, ldb, 0, c[v], n,
                                           NULL, 0, NULL, 0);
                    tg__bf16_set_broadcast(TG__BF16_BCAST_AUTO);
                    cr_assert(eq(int, memcmp(c[0], c[1], sizeof(float) * (size_t)(m * n)), 0),
                              "m=%lld n=%lld k=%lld register %d: other bits", (long long)m,
                              (long long)n, (long long)kk, reg);
                    free(a), free(b), free(c[0]), free(c[1]), free(ah), free(bh);
                }
}
