/* tests/test_bf16_gemm_ops.c - the ops on the bf16 GEMM kernels
 * (tapegrad/precision.h): ConvNd / ConvTransposeNd (forward, input and
 * weight gradient) and Linear in bf16 on each kernel this CPU runs, against
 * an f64 reference and against the portable kernel; the columns of bf16
 * bits; a thin Linear's weight panels; an autocast conv.
 *
 * The bound is test_bf16_gemm.c's: a kernel's only errors are the f32
 * additions of a dot product of K terms, at most K u S with u = 2^-24 and S
 * the same dot product of |a| and |b|, and, for a bf16 result, its final
 * rounding, at most 2^-8 |c|. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "bf16_gemm_fixtures.h"
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
static int64_t rnd_int(int64_t lo, int64_t hi) { return th_rand_int(&rng_state, lo, hi); }

static const double U32 = 0x1p-24, U_BF16 = 0x1p-8;

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
Test(bf16_gemm_ops, columns_of_bf16_bits_give_the_bits_of_widened_columns)
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

Test(bf16_gemm_ops, portable_conv_sweep_against_f64) { conv_sweep(TG_BF16_KERNEL_PORTABLE, false); }
Test(bf16_gemm_ops, avx512_conv_sweep_against_f64_and_portable)
{
    conv_sweep(TG_BF16_KERNEL_AVX512, true);
}
Test(bf16_gemm_ops, amx_conv_sweep_against_f64_and_portable)
{
    conv_sweep(TG_BF16_KERNEL_AMX, true);
}
Test(bf16_gemm_ops, amx_conv_sweep_on_emulated_tiles_against_f64_and_portable)
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

Test(bf16_gemm_ops, portable_linear_against_f64) { linear_sweep(TG_BF16_KERNEL_PORTABLE, false); }
Test(bf16_gemm_ops, avx512_linear_against_f64_and_portable)
{
    linear_sweep(TG_BF16_KERNEL_AVX512, true);
}
Test(bf16_gemm_ops, amx_linear_against_f64_and_portable)
{
    linear_sweep(TG_BF16_KERNEL_AMX, true);
}
Test(bf16_gemm_ops, amx_linear_on_emulated_tiles_against_f64_and_portable)
{
    emulate_amx();
    linear_sweep(TG_BF16_KERNEL_AMX, true);
    tg__amx_set_emulated(false);
}

/* A Linear's bf16 weight is multiplied from its kept panels only when the
 * product pays for the kernels: a Linear to 1 or 16 features, or from 8,
 * packs none (and gives the portable kernel's bits), one to 64 does. */
Test(bf16_gemm_ops, a_thin_linear_packs_no_weight_panels)
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
Test(bf16_gemm_ops, autocast_conv_with_f32_master_weight_is_the_bf16_conv)
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
