/* tests/test_bf16_panels.c - bf16 weights packed once per version
 * (src/core/gemm_bf16_panels.c): the GEMM from panels gives the bits of
 * packing per call, for each layout and any cut among threads; conv,
 * conv_transpose and Linear pack each weight once per layout however often
 * a step multiplies it, with the same bits as without the cache; an
 * in-place update (an optimizer step) repacks; the bf16 casts of an f32
 * master weight under autocast share panels packed from the master, and a
 * cast made before the master changed keeps its own values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "core/core.h"
#include "core/gemm_bf16.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/conv.h"
#include "tapegrad/ops.h"
#include "tapegrad/optim.h"
#include "tapegrad/precision.h"
#include "tapegrad/registry.h"

static void need_avx512(void)
{
    if (!tg_bf16_kernel_available(TG_BF16_KERNEL_AVX512))
        cr_skip_test("the packers need AVX-512 F, BW, VL and BF16, which this CPU lacks");
    tg_set_num_threads(2);
}

static tg_tensor *weight(tg_dtype dt, int ndim, const int64_t *shape, uint64_t seed)
{
    tg_tensor *w = th_rand_uniform(dt, ndim, shape, seed);
    cr_assert(eq(int, tg_tensor_set_requires_grad(w, true), TG_OK));
    return w;
}

/* a and b hold the same values (the same bits, but for the sign of zeros). */
static void expect_same(const char *what, const tg_tensor *a, const tg_tensor *b)
{
    cr_assert(a && b, "%s: missing", what);
    const int64_t n = tg_tensor_numel(a);
    cr_assert(eq(i64, n, tg_tensor_numel(b)), "%s: sizes differ", what);
    double *x = th_doubles(a), *y = th_doubles(b);
    for (int64_t i = 0; i < n; i++)
        cr_assert(x[i] == y[i], "%s[%lld]: %.9g with the cache, %.9g packing per call", what,
                  (long long)i, x[i], y[i]);
    free(x);
    free(y);
}

static void expect_differ(const char *what, const tg_tensor *a, const tg_tensor *b)
{
    double *x = th_doubles(a), *y = th_doubles(b);
    bool differ = false;
    for (int64_t i = 0; i < tg_tensor_numel(a); i++) differ |= x[i] != y[i];
    free(x);
    free(y);
    cr_assert(differ, "%s: the update changed nothing (the test would prove nothing)", what);
}

/* ---- the GEMM ---- */

static float *widened(const tg_tensor *t)
{
    const int64_t n = tg_tensor_numel(t);
    double *v = th_doubles(t);
    float *f = malloc(sizeof(float) * (size_t)n);
    cr_assert(f != NULL);
    for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
    free(v);
    return f;
}

static void expect_same_c(const char *what, const float *c, const float *c0, int64_t n)
{
    cr_assert(memcmp(c, c0, sizeof(float) * (size_t)n) == 0, "%s: bits differ", what);
}

/* Without packing buffers, C from the panels alone (a and b NULL) by the
 * plain loops: each element within the f32 summation bound k u S of the
 * f64 product (the products of bf16 values are exact in f32). */
static void expect_fallback(tg_bf16_kernel kern, bool ta, bool tb, int64_t m, int64_t n,
                            int64_t k, const float *a, const float *b, const tg__bf16_panels *pa,
                            const tg__bf16_panels *pb, const char *what)
{
    const int64_t lda = ta ? m : k, ldb = tb ? k : n;
    float *c = malloc(sizeof(float) * (size_t)(m * n));
    cr_assert(c != NULL);
    tg__bf16_set_no_pack_buffers(true);
    tg__gemm_bf16_panels(kern, ta, tb, m, n, k, NULL, lda, NULL, ldb, 0, c, n, pa, 0, pb, 0);
    tg__bf16_set_no_pack_buffers(false);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double ref = 0, s = 0;
            for (int64_t t = 0; t < k; t++) {
                const double x = a[ta ? t * lda + i : i * lda + t];
                const double y = b[tb ? j * ldb + t : t * ldb + j];
                ref += x * y;
                s += fabs(x * y);
            }
            const double err = fabs(c[i * n + j] - ref), bound = (double)k * 0x1p-24 * s;
            cr_assert(err <= bound, "%s fallback [%lld, %lld]: %.9g, f64 %.9g", what,
                      (long long)i, (long long)j, c[i * n + j], ref);
        }
    free(c);
}

/* C = op(A) op(B) on kernel kern from A's panels, B's, both, and cut among
 * two threads: the bits of packing per call. */
static void gemm_case(tg_bf16_kernel kern, int64_t m, int64_t n, int64_t k, bool ta, bool tb)
{
    const int64_t as[2] = {ta ? k : m, ta ? m : k}, bs[2] = {tb ? n : k, tb ? k : n};
    tg_tensor *wa = weight(TG_BF16, 2, as, (uint64_t)(m * 7 + k)),
              *wb = weight(TG_BF16, 2, bs, (uint64_t)(n * 5 + k));
    float *a = widened(wa), *b = widened(wb);
    float *c0 = malloc(sizeof(float) * (size_t)(m * n)), *c = malloc(sizeof(float) * (size_t)(m * n));
    cr_assert(c0 && c);
    const int64_t lda = as[1], ldb = bs[1];
    tg__gemm_bf16(kern, ta, tb, m, n, k, a, lda, b, ldb, 0, c0, n);
    /* op(A)'s rows and op(B)'s columns are the lines */
    const tg__bf16_operand oa = {.lines = m, .k = k, .ld = lda, .tcontig = !ta};
    const tg__bf16_operand ob = {.lines = n, .k = k, .ld = ldb, .tcontig = tb};
    tg__bf16_panels *pa = tg__bf16_panels_get(wa, kern, false, &oa);
    tg__bf16_panels *pb = tg__bf16_panels_get(wb, kern, true, &ob);
    cr_assert(pa && pb, "no panels: %s", tg_error_message());
    char what[96];
    snprintf(what, sizeof what, "%s (%lld, %lld, %lld) ta %d tb %d", tg_bf16_kernel_name(kern),
             (long long)m, (long long)n, (long long)k, ta, tb);
    for (int form = 1; form < 4; form++) {
        memset(c, 0xFF, sizeof(float) * (size_t)(m * n));
        tg__gemm_bf16_panels(kern, ta, tb, m, n, k, a, lda, b, ldb, 0, c, n,
                             form & 1 ? pa : NULL, 0, form & 2 ? pb : NULL, 0);
        expect_same_c(what, c, c0, m * n);
        memset(c, 0xFF, sizeof(float) * (size_t)(m * n));
        tg__gemm_par_panels(kern, ta, tb, m, n, k, a, lda, b, ldb, 0, c, n,
                            form & 1 ? pa : NULL, form & 2 ? pb : NULL);
        expect_same_c(what, c, c0, m * n);
    }
    if (m * n * k <= 100000) expect_fallback(kern, ta, tb, m, n, k, a, b, pa, pb, what);
    tg__bf16_panels_release(pa);
    tg__bf16_panels_release(pb);
    free(a);
    free(b);
    free(c);
    free(c0);
    tg_tensor_release(wa);
    tg_tensor_release(wb);
}

/* Shapes crossing the blocks (k past 384 twice, m past 120/128, n past
 * 3072) and the panels' edges; m > n and m < n cut C's rows or columns. */
static void gemm_sweep(tg_bf16_kernel kern)
{
    static const int64_t dims[][3] = {{1, 1, 1},      {13, 33, 3},   {130, 70, 800},
                                      {70, 130, 385}, {4, 3100, 40}, {300, 9, 97},
                                      {5, 37, 800}};
    for (size_t s = 0; s < sizeof dims / sizeof *dims; s++)
        for (int form = 0; form < 4; form++)
            gemm_case(kern, dims[s][0], dims[s][1], dims[s][2], form & 1, form & 2);
}

Test(bf16_panels, gemm_from_panels_has_the_bits_of_packing_per_call)
{
    need_avx512();
    gemm_sweep(TG_BF16_KERNEL_AVX512);
}

Test(bf16_panels, amx_layout_from_panels_on_emulated_tiles)
{
    need_avx512();
    tg__amx_set_emulated(true);
    gemm_sweep(TG_BF16_KERNEL_AMX);
    tg__amx_set_emulated(false);
}

/* ---- the ops ---- */

typedef enum { CONV, CONV_T, LINEAR } kind;

typedef struct step {
    tg_tensor *y[3], *gx, *gw;
    int64_t packs;
} step;

static void step_release(step *s)
{
    for (int i = 0; i < 3; i++) tg_tensor_release(s->y[i]);
    tg_tensor_release(s->gx);
    tg_tensor_release(s->gw);
}

static int apply_op(kind k, tg_tensor **y, tg_tensor *x, tg_tensor *w)
{
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    tg_conv_params_set_padding(&p, 1);
    if (k == LINEAR) return tg_linear(y, x, w, NULL);
    return k == CONV ? tg_conv(y, x, w, NULL, &p) : tg_conv_transpose(y, x, w, NULL, &p);
}

/* y = op(x, w); amp: in bf16 from f32 x and w, as autocast runs it (conv
 * and Linear cast their inputs; conv_transpose's inputs are cast by the
 * model, tg_module_autocast_weights, as here). */
static int apply(kind k, tg_tensor **y, tg_tensor *x, tg_tensor *w, bool amp)
{
    if (!amp) return apply_op(k, y, x, w);
    cr_assert(eq(int, tg_autocast_begin(TG_BF16), TG_OK));
    int rc;
    if (k == CONV_T) {
        tg_tensor *xb = NULL, *wb = NULL;
        cr_assert(eq(int, tg_to_dtype(&xb, x, TG_BF16), TG_OK));
        cr_assert(eq(int, tg_to_dtype(&wb, w, TG_BF16), TG_OK));
        rc = apply_op(k, y, xb, wb);
        tg_tensor_release(xb);
        tg_tensor_release(wb);
    } else {
        rc = apply_op(k, y, x, w);
    }
    cr_assert(eq(int, tg_autocast_end(), TG_OK));
    return rc;
}

/* One step of a model that multiplies the weight three times (as a GAN's
 * discriminator runs on real, fake, fake): three forwards on clones of
 * x0, w0 (w0's dtype: an f32 master under autocast bf16), each backward
 * with dy; the packs counted.  cached false packs per call. */
static step run_step(kind k, const tg_tensor *x0, const tg_tensor *w0, bool cached, bool amp)
{
    step s = {0};
    tg_tensor *w = NULL;
    cr_assert(eq(int, tg_tensor_clone(&w, w0), TG_OK));
    cr_assert(eq(int, tg_tensor_set_requires_grad(w, true), TG_OK));
    tg__bf16_panels_set_enabled(cached);
    const int64_t before = tg__bf16_panels_packed();
    for (int r = 0; r < 3; r++) {
        tg_tensor *x = NULL, *dy = NULL;
        cr_assert(eq(int, tg_tensor_clone(&x, x0), TG_OK));
        cr_assert(eq(int, tg_tensor_set_requires_grad(x, true), TG_OK));
        cr_assert(eq(int, apply(k, &s.y[r], x, w, amp), TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, tg_tensor_dtype(s.y[r]), TG_BF16));
        dy = th_rand_uniform(TG_BF16, tg_tensor_ndim(s.y[r]), tg_tensor_shape(s.y[r]),
                             (uint64_t)(11 + r));
        cr_assert(eq(int, tg_backward(s.y[r], dy, NULL), TG_OK), "%s", tg_error_message());
        if (r == 2) s.gx = tg_tensor_retain(tg_tensor_grad(x));
        tg_tensor_release(dy);
        tg_tensor_release(x);
    }
    s.packs = tg__bf16_panels_packed() - before;
    s.gw = tg_tensor_retain(tg_tensor_grad(w));
    tg__bf16_panels_set_enabled(true);
    tg_tensor_release(w);
    return s;
}

static void shapes(kind k, int *nd, int64_t *xs, int *wnd, int64_t *ws)
{
    static const int64_t conv_x[4] = {4, 8, 14, 14}, conv_w[4] = {24, 8, 4, 4};
    /* the Linear shapes padded to 4 (the copies below take the first nd) */
    static const int64_t convt_x[4] = {4, 24, 7, 7}, lin_x[4] = {16, 400}, lin_w[4] = {40, 400};
    *nd = k == LINEAR ? 2 : 4;
    *wnd = *nd;
    memcpy(xs, k == CONV ? conv_x : k == CONV_T ? convt_x : lin_x, sizeof(int64_t) * (size_t)*nd);
    memcpy(ws, k == LINEAR ? lin_w : conv_w, sizeof(int64_t) * (size_t)*nd);
}

/* The avx512 kernel forced, and an input and weight of kind k: f32 under
 * autocast (amp), else bf16. */
static void step_inputs(kind k, bool amp, tg_tensor **x, tg_tensor **w)
{
    need_avx512();
    cr_assert(eq(int, tg_bf16_kernel_set(TG_BF16_KERNEL_AVX512), TG_OK));
    int nd, wnd;
    int64_t xs[4], ws[4];
    shapes(k, &nd, xs, &wnd, ws);
    const tg_dtype dt = amp ? TG_F32 : TG_BF16;
    *x = th_rand_uniform(dt, nd, xs, 5);
    *w = weight(dt, wnd, ws, 6);
}

/* Each weight is packed once per layout its GEMMs read: the forward's and
 * the input gradient's (2), however many times the step multiplies it, and
 * the step's outputs and gradients are those of packing per call. */
static void packs_once(kind k, const char *name, bool amp)
{
    tg_tensor *x, *w;
    step_inputs(k, amp, &x, &w);
    step on = run_step(k, x, w, true, amp), off = run_step(k, x, w, false, amp);
    cr_assert(eq(i64, on.packs, 2), "%s: %lld packs in a step that multiplies the weight 6 times "
              "(3 forwards, 3 input gradients)", name, (long long)on.packs);
    cr_assert(eq(i64, off.packs, 0));
    for (int r = 0; r < 3; r++) expect_same(name, on.y[r], off.y[r]);
    expect_same(name, on.gx, off.gx);
    expect_same(name, on.gw, off.gw);
    step_release(&on);
    step_release(&off);
    tg_tensor_release(x);
    tg_tensor_release(w);
}

Test(bf16_panels, conv_packs_its_weight_once_per_layout) { packs_once(CONV, "conv", false); }

Test(bf16_panels, conv_transpose_packs_its_weight_once_per_layout)
{
    packs_once(CONV_T, "conv_transpose", false);
}

Test(bf16_panels, linear_packs_its_weight_once_per_layout) { packs_once(LINEAR, "linear", false); }

Test(bf16_panels, autocast_casts_share_the_masters_panels)
{
    packs_once(CONV, "conv under autocast", true);
    packs_once(LINEAR, "linear under autocast", true);
}

/* y = apply(x, w) with the cache, then packing per call: the same. */
static tg_tensor *expect_fresh(kind k, tg_tensor *x, tg_tensor *w, bool amp, const char *what)
{
    tg_tensor *y = NULL, *y0 = NULL;
    cr_assert(eq(int, apply(k, &y, x, w, amp), TG_OK), "%s", tg_error_message());
    tg__bf16_panels_set_enabled(false);
    cr_assert(eq(int, apply(k, &y0, x, w, amp), TG_OK), "%s", tg_error_message());
    tg__bf16_panels_set_enabled(true);
    expect_same(what, y, y0);
    tg_tensor_release(y0);
    return y;
}

/* An optimizer step writes the weight in place and bumps its version: the
 * next forward repacks and sees the new values. */
static void update_repacks(kind k, bool amp)
{
    tg_tensor *x, *w;
    step_inputs(k, amp, &x, &w);
    tg_optimizer *opt = NULL;
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.lr = 0.5;
    cr_assert(eq(int, tg_sgd_new(&opt, 1, &w, &so), TG_OK));
    const int64_t p0 = tg__bf16_panels_packed();
    tg_tensor *y1 = expect_fresh(k, x, w, amp, "before the update");
    cr_assert(eq(i64, tg__bf16_panels_packed() - p0, 1));
    tg_tensor *dy = th_rand_uniform(TG_BF16, tg_tensor_ndim(y1), tg_tensor_shape(y1), 9);
    cr_assert(eq(int, tg_backward(y1, dy, NULL), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_optimizer_step(opt), TG_OK));
    const int64_t p1 = tg__bf16_panels_packed();
    tg_tensor *y2 = expect_fresh(k, x, w, amp, "after the update");
    cr_assert(eq(i64, tg__bf16_panels_packed() - p1, 1), "the update did not repack");
    expect_differ("y", y1, y2);
    tg_tensor *all[] = {x, w, y1, y2, dy};
    th_release_all(5, all);
    tg_optimizer_free(opt);
}

Test(bf16_panels, an_optimizer_step_repacks) { update_repacks(CONV, false); }

Test(bf16_panels, an_optimizer_step_on_the_master_repacks)
{
    update_repacks(CONV_T, true);
    update_repacks(LINEAR, true);
}

/* The master's values are rounded to bf16 as the cast rounds them, down to
 * the f32 subnormals (one rounds up to bf16's smallest normal, which the
 * packers keep; the packers alone would flush it). */
Test(bf16_panels, master_panels_round_as_the_cast)
{
    need_avx512();
    cr_assert(eq(int, tg_bf16_kernel_set(TG_BF16_KERNEL_AVX512), TG_OK));
    const int64_t xs[2] = {8, 64}, ws[2] = {32, 64};
    tg_tensor *x = th_rand_uniform(TG_F32, 2, xs, 1), *w = weight(TG_F32, 2, ws, 2);
    float *wv = tg_tensor_data(w), *xv = tg_tensor_data(x);
    const uint32_t bits[] = {0x007FFFFFu, 0x007F9000u, 0x00000001u, 0x80400000u,
                             0x3F808000u, 0x3F818000u, 0x7F7F0000u};
    /* y[i][i] = 2^100 w[i][i] alone: row i of x is 2^100 at i, else 0 */
    memset(xv, 0, sizeof(float) * 7 * 64);
    for (size_t i = 0; i < sizeof bits / sizeof *bits; i++) {
        memcpy(&wv[i * 65], &bits[i], sizeof(float));
        xv[i * 65] = 0x1p100f;
    }
    tg_tensor_bump_version(w);
    tg_tensor_bump_version(x);
    tg_tensor *y = expect_fresh(LINEAR, x, w, true, "tiny master values");
    tg_tensor *all[] = {x, w, y};
    th_release_all(3, all);
}

/* A cast made before an update of its master holds the old values: it is
 * packed from its own, not from the master's new ones. */
Test(bf16_panels, a_cast_older_than_its_master_keeps_its_values)
{
    need_avx512();
    cr_assert(eq(int, tg_bf16_kernel_set(TG_BF16_KERNEL_AVX512), TG_OK));
    const int64_t xs[2] = {8, 64}, ws[2] = {32, 64};
    tg_tensor *x = th_rand_uniform(TG_BF16, 2, xs, 1), *w = weight(TG_F32, 2, ws, 2);
    tg_tensor *wb = NULL, *y = NULL, *y0 = NULL;
    cr_assert(eq(int, tg_to_dtype(&wb, w, TG_BF16), TG_OK));
    cr_assert(eq(int, tg_linear(&y0, x, wb, NULL), TG_OK));   /* packs the master */
    float *wv = tg_tensor_data(w);
    for (int64_t i = 0; i < 32 * 64; i++) wv[i] *= 3;
    tg_tensor_bump_version(w);
    tg_tensor_release(y0);
    y0 = NULL;
    tg_tensor *fresh = expect_fresh(LINEAR, x, wb, false, "an old cast");
    tg__bf16_panels_set_enabled(false);
    cr_assert(eq(int, tg_linear(&y, x, wb, NULL), TG_OK));
    tg__bf16_panels_set_enabled(true);
    expect_same("an old cast", fresh, y);
    tg_tensor *all[] = {x, w, wb, y, fresh};
    th_release_all(5, all);
}

/* A weight written through tg_tensor_data without a version bump (a loop of
 * the caller's own, as in a hand-written SGD): the next forward does not use
 * the panels of the old values, on the weight itself and on an autocast
 * master; reading through tg_tensor_cdata keeps them. */
static void raw_write_repacks(kind k, bool amp)
{
    tg_tensor *x, *w;
    step_inputs(k, amp, &x, &w);
    tg_tensor *y1 = expect_fresh(k, x, w, amp, "before the write");
    const int64_t p0 = tg__bf16_panels_packed();
    (void)tg_tensor_cdata(w);
    tg_tensor *y2 = expect_fresh(k, x, w, amp, "after a read");
    cr_assert(eq(i64, tg__bf16_panels_packed() - p0, 0), "a read repacked");
    expect_same("y after a read", y1, y2);
    char *wv = tg_tensor_data(w);   /* the weight negated, no bump */
    const int64_t es = tg_dtype_size(tg_tensor_dtype(w));
    for (int64_t i = 0; i < tg_tensor_numel(w); i++) wv[i * es + es - 1] ^= (char)0x80;
    tg_tensor *y3 = expect_fresh(k, x, w, amp, "after the write");
    cr_assert(eq(i64, tg__bf16_panels_packed() - p0, 1), "the write did not repack");
    expect_differ("y after the write", y1, y3);
    tg_tensor *all[] = {x, w, y1, y2, y3};
    th_release_all(5, all);
}

Test(bf16_panels, a_write_through_tensor_data_repacks)
{
    raw_write_repacks(CONV, false);
    raw_write_repacks(LINEAR, true);
}
