/* tests/test_bf16_gemm.c - the bf16 GEMM kernels (tapegrad/precision.h):
 * each kernel this CPU runs against an f64 reference, on the GEMM itself and
 * on ConvNd / ConvTransposeNd (forward, input and weight gradient) and
 * Linear in bf16, and the kernels against each other.
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
#include "core/gemm_bf16.h"
#include "core/core.h"
#include "ops/conv_internal.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/amp.h"
#include "tapegrad/autograd.h"
#include "tapegrad/conv.h"
#include "tapegrad/nn.h"
#include "tapegrad/ops.h"
#include "tapegrad/precision.h"
#include "tapegrad/registry.h"
#include "tapegrad/status.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;   /* each test starts from it (fork) */
static double rnd(void) { return th_uniform_pm1(&rng_state); }
static int64_t rnd_int(int64_t lo, int64_t hi) { return th_rand_int(&rng_state, lo, hi); }

static const double U32 = 0x1p-24, U_BF16 = 0x1p-8;


/* Runs the test on kernel k, or skips it with the reason. */
static void use_kernel(tg_bf16_kernel k)
{
    if (!tg_bf16_kernel_available(k))
        cr_skip_test("the %s bf16 kernel needs CPU instructions this machine lacks (%s)",
                     tg_bf16_kernel_name(k),
                     k == TG_BF16_KERNEL_AMX ? "AMX-TILE and AMX-BF16, with the OS's permission"
                                             : "AVX-512 F, BW, VL and BF16");
    cr_assert(eq(int, tg_bf16_kernel_set(k), TG_OK));
    cr_assert(eq(int, tg_bf16_kernel_get(), k));
}

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

/* c = op(a) op(b) + beta c on kernel k against f64, element by element, over
 * shapes that cross the blocking (m past 144 and 32, n past 32, k odd and
 * past 384) and leading dimensions past the extents; a and b given as f32
 * and, above PORTABLE, as bf16 bits too (tg__gemm_bf16_bits). */
static void gemm_sweep_on(tg_bf16_kernel k)
{
    static const int64_t dims[][3] = {{1, 1, 1},    {3, 5, 7},     {12, 32, 2},   {13, 33, 3},
                                      {31, 17, 64}, {33, 65, 385}, {130, 70, 51}, {5, 200, 800},
                                      {64, 48, 1000}, {150, 40, 20}};
    const int forms = k == TG_BF16_KERNEL_PORTABLE ? 8 : 32;
    for (size_t s = 0; s < sizeof dims / sizeof *dims; s++)
        for (int form = 0; form < forms; form++) {
            const bool ta = form & 1, tb = form & 2, a_bits = form & 8, b_bits = form & 16;
            const float beta = (form & 4) ? 1.0f : 0.0f;
            const int64_t m = dims[s][0], n = dims[s][1], kk = dims[s][2];
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
static void emulate_amx(void)
{
    if (!tg_bf16_kernel_available(TG_BF16_KERNEL_AVX512))
        cr_skip_test("the amx kernel packs with AVX-512 BF16, which this machine lacks: "
                     "amx not run, not even on emulated tiles");
    tg__amx_set_emulated(true);
}

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

/* ---- the ops: conv, conv_transpose, linear ---- */

/* One op on (x, w): y, and with dy the gradients gx, gw (tg_backward). */
typedef struct layer {
    int kind;   /* 0 conv, 1 conv_transpose, 2 linear */
    tg_conv_params p;
    int ndim;
    int64_t xs[5], ws[5];
    int64_t k_out, k_w;   /* the longest dot products of y and gx, and of gw */
} layer;

typedef struct outs {
    tg_tensor *y, *gx, *gw;
} outs;

static void outs_release(outs *o)
{
    tg_tensor_release(o->y);
    tg_tensor_release(o->gx);
    tg_tensor_release(o->gw);
}

/* f64 copies of x, w, dy, or of their absolute values. */
static tg_tensor *as_f64(tg_tensor *t, bool absval)
{
    tg_tensor *d = NULL;
    cr_assert(eq(int, tg_tensor_to_dtype(&d, t, TG_F64), TG_OK));
    if (absval) {
        double *v = tg_tensor_data(d);
        for (int64_t i = 0; i < tg_tensor_numel(d); i++) v[i] = fabs(v[i]);
    }
    return d;
}

static int forward(const layer *L, tg_tensor **y, tg_tensor *x, tg_tensor *w)
{
    if (L->kind == 2) return tg_linear(y, x, w, NULL);
    return L->kind ? tg_conv_transpose(y, x, w, NULL, &L->p) : tg_conv(y, x, w, NULL, &L->p);
}

/* Forward and backward of L on copies of x, w as leaves, dy the gradient. */
static outs run(const layer *L, tg_tensor *x0, tg_tensor *w0, tg_tensor *dy)
{
    tg_tensor *x = NULL, *w = NULL;
    cr_assert(eq(int, tg_tensor_clone(&x, x0), TG_OK));
    cr_assert(eq(int, tg_tensor_clone(&w, w0), TG_OK));
    tg_tensor_set_requires_grad(x, true);
    tg_tensor_set_requires_grad(w, true);
    outs o = {0};
    cr_assert(eq(int, forward(L, &o.y, x, w), TG_OK), "%s", tg_error_message());
    tg_tensor *g = NULL;
    cr_assert(eq(int, tg_tensor_to_dtype(&g, dy, tg_tensor_dtype(o.y)), TG_OK));
    cr_assert(eq(int, tg_backward(o.y, g, NULL), TG_OK), "%s", tg_error_message());
    o.gx = tg_tensor_retain(tg_tensor_grad(x));
    o.gw = tg_tensor_retain(tg_tensor_grad(w));
    cr_assert(o.gx && o.gw);
    tg_tensor_release(g);
    tg_tensor_release(x);
    tg_tensor_release(w);
    return o;
}

static double *doubles(const tg_tensor *t)
{
    const int64_t n = tg_tensor_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    cr_assert(v != NULL);
    cr_assert(eq(int, tg_tensor_to_doubles(t, v, n), TG_OK));
    return v;
}

/* |got - ref| <= scale * (2^-8 |ref| + K u S (1 + 2^-8)) on every element;
 * the number of elements whose bits differ from other (if not NULL). */
static int64_t check(const char *what, const char *tag, const tg_tensor *got,
                     const tg_tensor *ref, const tg_tensor *sabs, int64_t K, double scale,
                     const tg_tensor *other)
{
    const int64_t n = tg_tensor_numel(got);
    cr_assert(eq(i64, n, tg_tensor_numel(ref)));
    double *g = doubles(got), *r = doubles(ref), *s = doubles(sabs);
    double *o = other ? doubles(other) : NULL;
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++) {
        const double bound =
            scale * (U_BF16 * fabs(r[i]) + 1.01 * (double)K * U32 * s[i] * (1 + U_BF16) + 0x1p-100);
        cr_assert(fabs(g[i] - r[i]) <= bound, "%s %s[%lld] = %.9g, f64 %.9g, bound %.3g (K=%lld)",
                  tag, what, (long long)i, g[i], r[i], bound, (long long)K);
        if (o && o[i] != g[i]) differ++;
    }
    free(g);
    free(r);
    free(s);
    free(o);
    return differ;
}

/* L in bf16 on kernel k (and, when cmp, on the portable kernel too): every
 * output within the bound of f64, the kernels within twice it of each
 * other.  Returns the number of elements whose bits the two kernels differ
 * in. */
static int64_t check_layer(const layer *L, tg_bf16_kernel k, bool cmp, const char *tag)
{
    const int wnd = L->kind == 2 ? 2 : L->ndim;
    tg_tensor *x = th_rand_uniform(TG_BF16, L->ndim, L->xs, (uint64_t)rnd_int(1, 1 << 30));
    tg_tensor *w = th_rand_uniform(TG_BF16, wnd, L->ws, (uint64_t)rnd_int(1, 1 << 30));
    tg_tensor *y0 = NULL;
    cr_assert(eq(int, forward(L, &y0, x, w), TG_OK), "%s: %s", tag, tg_error_message());
    tg_tensor *dy = th_rand_uniform(TG_BF16, tg_tensor_ndim(y0), tg_tensor_shape(y0),
                                    (uint64_t)rnd_int(1, 1 << 30));
    tg_tensor *xd = as_f64(x, false), *wd = as_f64(w, false), *dyd = as_f64(dy, false);
    tg_tensor *xa = as_f64(x, true), *wa = as_f64(w, true), *dya = as_f64(dy, true);
    cr_assert(eq(int, tg_bf16_kernel_set(k), TG_OK));
    outs got = run(L, x, w, dy), ref = run(L, xd, wd, dyd), sab = run(L, xa, wa, dya);
    outs port = {0};
    if (cmp) {
        cr_assert(eq(int, tg_bf16_kernel_set(TG_BF16_KERNEL_PORTABLE), TG_OK));
        port = run(L, x, w, dy);
        cr_assert(eq(int, tg_bf16_kernel_set(k), TG_OK));
    }
    cr_assert(eq(int, tg_tensor_dtype(got.y), TG_BF16));
    int64_t differ = 0;
    differ += check("y", tag, got.y, ref.y, sab.y, L->k_out, 1, port.y);
    differ += check("dx", tag, got.gx, ref.gx, sab.gx, L->k_out, 1, port.gx);
    differ += check("dw", tag, got.gw, ref.gw, sab.gw, L->k_w, 1, port.gw);
    if (cmp) {   /* the two kernels within twice the bound of each other */
        check("y (portable)", tag, got.y, port.y, sab.y, L->k_out, 2, NULL);
        check("dx (portable)", tag, got.gx, port.gx, sab.gx, L->k_out, 2, NULL);
        check("dw (portable)", tag, got.gw, port.gw, sab.gw, L->k_w, 2, NULL);
    }
    outs_release(&got);
    outs_release(&ref);
    outs_release(&sab);
    outs_release(&port);
    tg_tensor *all[] = {x, w, y0, dy, xd, wd, dyd, xa, wa, dya};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
    return differ;
}

static int64_t prod(const int64_t *v, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= v[i];
    return p;
}

/* A random conv or conv_transpose of rank nsp (1..3) with groups, stride,
 * dilation, asymmetric padding and output_padding; big, one layer whose
 * dot products cross the GEMM's k blocks. */
static layer random_conv(int kind, int nsp, bool big)
{
    layer L = {.kind = kind, .p = TG_CONV_PARAMS_INIT, .ndim = nsp + 2};
    const int64_t G = rnd_int(1, 2), ci = G * (big ? 24 : rnd_int(1, 5)),
                  co = G * (big ? 20 : rnd_int(1, 5)), batch = rnd_int(1, 3);
    int64_t k[3], in[3], out[3];
    for (int a = 0; a < nsp; a++) {
        k[a] = big ? 4 : rnd_int(1, 3);
        const int64_t s = rnd_int(1, 2), d = big ? 1 : rnd_int(1, 2);
        L.p.stride[a] = s;
        L.p.dilation[a] = d;
        L.p.padding[a][0] = rnd_int(0, d * (k[a] - 1));
        L.p.padding[a][1] = rnd_int(0, d * (k[a] - 1));
        const int64_t span = d * (k[a] - 1) + 1;
        if (kind == 0) {
            in[a] = span + rnd_int(0, nsp == 3 ? 3 : 6);
            out[a] = (in[a] + L.p.padding[a][0] + L.p.padding[a][1] - span) / s + 1;
        } else {
            in[a] = rnd_int(1, nsp == 3 ? 3 : 6) + (big ? 4 : 0);
            L.p.output_padding[a] = rnd_int(0, (s > d ? s : d) - 1);
            out[a] = (in[a] - 1) * s - L.p.padding[a][0] - L.p.padding[a][1] + span +
                     L.p.output_padding[a];
            if (out[a] < 1) {   /* too much padding for this input: none */
                L.p.padding[a][0] = L.p.padding[a][1] = 0;
                out[a] = (in[a] - 1) * s + span + L.p.output_padding[a];
            }
        }
    }
    L.p.groups = G;
    L.xs[0] = batch;
    L.xs[1] = ci;
    memcpy(L.xs + 2, in, sizeof(int64_t) * (size_t)nsp);
    /* conv: (C_out, C_in/G, K...); conv_transpose: (C_in, C_out/G, K...) */
    L.ws[0] = kind == 0 ? co : ci;
    L.ws[1] = kind == 0 ? ci / G : co / G;
    memcpy(L.ws + 2, k, sizeof(int64_t) * (size_t)nsp);
    L.k_out = (ci > co ? ci : co) / G * prod(k, nsp);
    const int64_t pin = prod(in, nsp), pout = prod(out, nsp);
    L.k_w = batch * (pin > pout ? pin : pout);
    return L;
}

static void conv_sweep(tg_bf16_kernel k, bool cmp)
{
    use_kernel(k);
    int64_t differ = 0;
    char tag[96];
    for (int kind = 0; kind < 2; kind++)
        for (int nsp = 1; nsp <= 3; nsp++)
            for (int rep = 0; rep < (nsp == 3 ? 3 : 6); rep++) {
                const bool big = rep == 0 && nsp == 2;
                layer L = random_conv(kind, nsp, big);
                snprintf(tag, sizeof tag, "%s %s%dd #%d", tg_bf16_kernel_name(k),
                         kind ? "conv_transpose" : "conv", nsp, rep);
                differ += check_layer(&L, k, cmp, tag);
            }
    if (cmp)   /* the kernel ran: its f32 sums are not sgemm's everywhere */
        cr_assert(differ > 0, "the %s kernel gave the portable kernel's bits on every output",
                  tg_bf16_kernel_name(k));
}

static void expect_same_bits(const char *what, const char *tag, const tg_tensor *a,
                             const tg_tensor *b)
{
    cr_assert(eq(i64, tg_tensor_numel(a), tg_tensor_numel(b)));
    cr_assert(memcmp(tg_tensor_cdata(a), tg_tensor_cdata(b),
                     (size_t)tg_tensor_numel(a) * tg_dtype_size(tg_tensor_dtype(a))) == 0,
              "%s %s: the columns of bf16 bits gave other bits than widened columns", tag, what);
}

/* bf16 activations go into the columns (and the batch permutations) as
 * their bits, which the kernel packs as they are: the bits of columns
 * widened to f32 and rounded back when packed, over the conv sweep, with
 * chunks of 1 and 2 samples and whole batches; the columns of small planes
 * both by permutes (where the CPU has AVX-512 BW) and by the table-driven
 * copy. */
Test(bf16_gemm, columns_of_bf16_bits_give_the_bits_of_widened_columns)
{
    use_kernel(TG_BF16_KERNEL_AVX512);
    char tag[96];
    for (int kind = 0; kind < 2; kind++)
        for (int nsp = 1; nsp <= 3; nsp++)
            for (int rep = 0; rep < 6; rep++) {
                layer L = random_conv(kind, nsp, rep == 0 && nsp == 2);
                L.xs[0] = rnd_int(1, 5);
                snprintf(tag, sizeof tag, "%s%dd #%d", kind ? "conv_transpose" : "conv", nsp, rep);
                tg_tensor *x = th_rand_uniform(TG_BF16, L.ndim, L.xs, (uint64_t)rnd_int(1, 1 << 30));
                tg_tensor *w = th_rand_uniform(TG_BF16, L.ndim, L.ws, (uint64_t)rnd_int(1, 1 << 30));
                tg_tensor *y0 = NULL;
                cr_assert(eq(int, forward(&L, &y0, x, w), TG_OK), "%s: %s", tag, tg_error_message());
                tg_tensor *dy = th_rand_uniform(TG_BF16, tg_tensor_ndim(y0), tg_tensor_shape(y0),
                                                (uint64_t)rnd_int(1, 1 << 30));
                tg__conv_set_chunk(rep % 3);   /* 0: the default */
                tg__conv_set_bits(false);
                outs wide = run(&L, x, w, dy);
                tg__conv_set_bits(true);
                outs bits = run(&L, x, w, dy);
                tg__conv_set_perm(false);
                outs copied = run(&L, x, w, dy);
                tg__conv_set_perm(true);
                tg__conv_set_chunk(0);
                expect_same_bits("y", tag, bits.y, wide.y);
                expect_same_bits("dx", tag, bits.gx, wide.gx);
                expect_same_bits("dw", tag, bits.gw, wide.gw);
                expect_same_bits("y (copied columns)", tag, copied.y, wide.y);
                expect_same_bits("dx (copied columns)", tag, copied.gx, wide.gx);
                expect_same_bits("dw (copied columns)", tag, copied.gw, wide.gw);
                outs_release(&wide);
                outs_release(&bits);
                outs_release(&copied);
                tg_tensor *all[] = {x, w, y0, dy};
                for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
            }
}

Test(bf16_gemm, portable_conv_sweep_against_f64) { conv_sweep(TG_BF16_KERNEL_PORTABLE, false); }
Test(bf16_gemm, avx512_conv_sweep_against_f64_and_portable)
{
    conv_sweep(TG_BF16_KERNEL_AVX512, true);
}
Test(bf16_gemm, amx_conv_sweep_against_f64_and_portable)
{
    conv_sweep(TG_BF16_KERNEL_AMX, true);
}
Test(bf16_gemm, amx_conv_sweep_on_emulated_tiles_against_f64_and_portable)
{
    emulate_amx();
    conv_sweep(TG_BF16_KERNEL_AMX, true);
    tg__amx_set_emulated(false);
}

static void linear_sweep(tg_bf16_kernel k, bool cmp)
{
    use_kernel(k);
    static const int64_t dims[][3] = {
        {1, 1, 1}, {5, 13, 7}, {64, 100, 33}, {17, 500, 40}, {64, 500, 300}};
    int64_t differ = 0;
    for (size_t i = 0; i < sizeof dims / sizeof *dims; i++) {
        layer L = {.kind = 2, .ndim = 2, .xs = {dims[i][0], dims[i][1]},
                   .ws = {dims[i][2], dims[i][1]}};
        L.k_out = dims[i][1] > dims[i][2] ? dims[i][1] : dims[i][2];
        L.k_w = dims[i][0];
        differ += check_layer(&L, k, cmp, tg_bf16_kernel_name(k));
    }
    if (cmp)
        cr_assert(differ > 0, "the %s kernel gave the portable kernel's bits on every output",
                  tg_bf16_kernel_name(k));
}

Test(bf16_gemm, portable_linear_against_f64) { linear_sweep(TG_BF16_KERNEL_PORTABLE, false); }
Test(bf16_gemm, avx512_linear_against_f64_and_portable)
{
    linear_sweep(TG_BF16_KERNEL_AVX512, true);
}
Test(bf16_gemm, amx_linear_against_f64_and_portable)
{
    linear_sweep(TG_BF16_KERNEL_AMX, true);
}
Test(bf16_gemm, amx_linear_on_emulated_tiles_against_f64_and_portable)
{
    emulate_amx();
    linear_sweep(TG_BF16_KERNEL_AMX, true);
    tg__amx_set_emulated(false);
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

/* A Linear's bf16 weight is multiplied from its kept panels only when the
 * product pays for the kernels: a Linear to 1 or 16 features, or from 8,
 * packs none (and gives the portable kernel's bits), one to 64 does. */
Test(bf16_gemm, a_thin_linear_packs_no_weight_panels)
{
    use_kernel(TG_BF16_KERNEL_AVX512);
    static const int64_t dims[][3] = {{64, 6272, 1}, {64, 6272, 16}, {64, 8, 6272},
                                      {64, 6272, 64}};   /* B, in, out */
    for (size_t i = 0; i < sizeof dims / sizeof *dims; i++) {
        const int64_t B = dims[i][0], in = dims[i][1], out = dims[i][2];
        tg_tensor *x = th_rand_uniform(TG_BF16, 2, (int64_t[]){B, in}, 100 + i);
        tg_tensor *w = th_rand_uniform(TG_BF16, 2, (int64_t[]){out, in}, 200 + i);
        tg_tensor *y = NULL, *yp = NULL;
        const int64_t before = tg__bf16_panels_packed();
        cr_assert(eq(int, tg_linear(&y, x, w, NULL), TG_OK), "%s", tg_error_message());
        const int64_t packed = tg__bf16_panels_packed() - before;
        const bool thin = in < 32 || out < 32;
        cr_assert(eq(i64, packed, thin ? 0 : 1), "%lld -> %lld", (long long)in, (long long)out);
        cr_assert(eq(int, tg_bf16_kernel_set(TG_BF16_KERNEL_PORTABLE), TG_OK));
        cr_assert(eq(int, tg_linear(&yp, x, w, NULL), TG_OK));
        cr_assert(eq(int, tg_bf16_kernel_set(TG_BF16_KERNEL_AVX512), TG_OK));
        if (thin)
            cr_assert(memcmp(tg_tensor_cdata(y), tg_tensor_cdata(yp),
                             sizeof(uint16_t) * (size_t)(B * out)) == 0);
        th_release_all(4, (tg_tensor *[]){x, w, y, yp});
    }
}

/* Under autocast an f32 conv casts x and its f32 master weight to bf16 and
 * runs the bf16 kernel: the bits of the same conv on bf16 tensors. */
Test(bf16_gemm, autocast_conv_with_f32_master_weight_is_the_bf16_conv)
{
    use_kernel(tg_bf16_kernel_available(TG_BF16_KERNEL_AVX512) ? TG_BF16_KERNEL_AVX512
                                                                : TG_BF16_KERNEL_PORTABLE);
    const int64_t xs[] = {2, 16, 9, 9}, ws[] = {24, 16, 3, 3};
    tg_tensor *x = th_rand_uniform(TG_F32, 4, xs, 5), *w = th_rand_uniform(TG_F32, 4, ws, 6);
    tg_tensor *xb = NULL, *wb = NULL, *y = NULL, *yb = NULL;
    cr_assert(eq(int, tg_to_dtype(&xb, x, TG_BF16), TG_OK));
    cr_assert(eq(int, tg_to_dtype(&wb, w, TG_BF16), TG_OK));
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    cr_assert(eq(int, tg_autocast_begin(TG_BF16), TG_OK));
    cr_assert(eq(int, tg_conv(&y, x, w, NULL, &p), TG_OK));
    tg_autocast_end();
    cr_assert(eq(int, tg_conv(&yb, xb, wb, NULL, &p), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_BF16));
    cr_assert(eq(i64, tg_tensor_numel(y), tg_tensor_numel(yb)));
    cr_assert(memcmp(tg_tensor_cdata(y), tg_tensor_cdata(yb),
                     (size_t)tg_tensor_numel(y) * sizeof(uint16_t)) == 0);
    tg_tensor *all[] = {x, w, xb, wb, y, yb};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
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
