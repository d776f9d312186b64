/* tests/test_unary_blocks.c - the blocks of several vectors of
 * src/ops/unary_simd.c (exp, gelu, softplus, sigmoid and silu of f32 and
 * the gradients of gelu and silu, N vectors side by side) against its
 * one-vector blocks, bit for bit, at
 * every width this CPU runs: a call of fewer than N W elements takes the
 * one-vector blocks only, a long call the N-vector ones.  Inputs: a sweep
 * of 2^24 f32 bit patterns (2^21 at the plain C width, whose fma() is a
 * library call), the special values and edges (+-0, subnormals, +-inf,
 * NaN, exp's overflow and underflow, gelu's piece boundaries and its
 * switch to erfc at |x| = 5.8), and blocks mixing a few such lanes into
 * ordinary ones, which send a block back vector by vector. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/unary_simd_internal.h"

/* Below the smallest N W (8, the plain C width's). */
enum { SHORT = 7 };

static const tg__unary_simd_op ops[] = {TG__USIMD_EXP,     TG__USIMD_GELU,
                                        TG__USIMD_SOFTPLUS, TG__USIMD_SIGMOID,
                                        TG__USIMD_SILU,    TG__USIMD_GELU_GRAD,
                                        TG__USIMD_SILU_GRAD};
enum { NOPS = (int)(sizeof ops / sizeof ops[0]) };

static const float specials[] = {0.0f,      -0.0f,      0x1p-149f, -0x1p-149f, 0x1.fffffcp-127f,
                                 -0x1p-126f, 1e-30f,    -1e-30f,   0x1p-61f,   -0x1p-60f,
                                 88.72f,    88.73f,     -87.3f,    -103.9f,    -104.0f,
                                 100.0f,    100.5f,     -120.0f,   -120.5f,    5.8f,
                                 -5.8f,     5.81f,      -5.81f,    15.5f,      -15.5f,
                                 1e6f,      -1e6f,      3e38f,     -3e38f,     INFINITY,
                                 -INFINITY, NAN,        -NAN};

static bool is_grad(tg__unary_simd_op op)
{
    return op == TG__USIMD_GELU_GRAD || op == TG__USIMD_SILU_GRAD;
}

/* o = op(a, g) of n elements at width w through the one-vector blocks
 * only: calls of SHORT elements (g only for the gradients). */
static void by_short_calls(tg__unary_simd_op op, float *o, const float *a, const float *g,
                           int64_t n, tg__exp_width w)
{
    for (int64_t i = 0; i < n; i += SHORT)
        tg__unary_simd_f32(op, o + i, a + i, is_grad(op) ? g + i : NULL,
                           n - i < SHORT ? n - i : SHORT, w);
}

/* The gradients' g: ordinary values, a few zeros and negatives. */
static void fill_g(float *g, int64_t n)
{
    for (int64_t i = 0; i < n; i++) g[i] = (float)((i * 13) % 17 - 8) * 0.37f;
}

/* Every op of a[0..n) (and g, for the gradients) at width w, one long call
 * against short calls. */
static void expect_blocks_match(const float *a, const float *g, int64_t n, tg__exp_width w,
                                float *want, float *got)
{
    for (int k = 0; k < NOPS; k++) {
        by_short_calls(ops[k], want, a, g, n, w);
        tg__unary_simd_f32(ops[k], got, a, is_grad(ops[k]) ? g : NULL, n, w);
        if (memcmp(got, want, (size_t)n * sizeof *got) == 0) continue;
        for (int64_t i = 0; i < n; i++)
            cr_assert(memcmp(&got[i], &want[i], sizeof *got) == 0,
                      "width %d op %d x=%a: %a, one vector at a time %a", (int)w, (int)ops[k],
                      (double)a[i], (double)got[i], (double)want[i]);
    }
}

/* The widths this CPU runs (the plain one always). */
static bool width_runs(tg__exp_width w)
{
    tg__exp_width_force((int)w);
    const bool ok = tg__exp_width_get() == w;
    tg__exp_width_force(0);
    return ok;
}

Test(unary_blocks, sweep_matches_one_vector_blocks)
{
    enum { CHUNK = 1 << 20 };
    float *a = malloc(CHUNK * sizeof *a), *want = malloc(CHUNK * sizeof *want),
          *got = malloc(CHUNK * sizeof *got), *g = malloc(CHUNK * sizeof *g);
    fill_g(g, CHUNK);
    for (int w = TG__EXP_PLAIN; w <= TG__EXP_AVX512; w++) {
        if (!width_runs((tg__exp_width)w)) continue;
        /* bit patterns k 2^(32 - bits) plus an offset that walks the low bits */
        const int bits = w == TG__EXP_PLAIN ? 21 : 24;
        for (uint64_t k0 = 0; k0 < (1ull << bits); k0 += CHUNK) {
            for (int64_t i = 0; i < CHUNK; i++) {
                const uint64_t k = k0 + (uint64_t)i;
                const uint64_t low = (k * 2654435761u >> 8) & ((1u << (32 - bits)) - 1);
                const uint32_t b = (uint32_t)((k << (32 - bits)) + low);
                memcpy(&a[i], &b, sizeof b);
            }
            expect_blocks_match(a, g, CHUNK, (tg__exp_width)w, want, got);
        }
    }
    free(a), free(want), free(got), free(g);
}

Test(unary_blocks, edges_match_one_vector_blocks)
{
    enum { NS = (int)(sizeof specials / sizeof specials[0]), STEPS = 9, MAX = 4096 };
    float a[MAX], want[MAX], got[MAX], g[MAX];
    fill_g(g, MAX);
    int64_t n = 0;
    /* each special and its neighbours, then gelu's piece boundaries a =
     * 0.375 (k + 1/2) and their neighbours, both signs */
    for (int s = 0; s < NS; s++) {
        float x = specials[s];
        for (int j = 0; j < STEPS / 2; j++) x = nextafterf(x, -INFINITY);
        for (int j = 0; j < STEPS; j++, x = nextafterf(x, INFINITY)) a[n++] = x;
    }
    for (int k = 0; k < 16; k++) {
        float x = 0.375f * ((float)k + 0.5f);
        for (int j = 0; j < STEPS / 2; j++) x = nextafterf(x, -INFINITY);
        for (int j = 0; j < STEPS; j++, x = nextafterf(x, INFINITY)) {
            a[n++] = x;
            a[n++] = -x;
        }
    }
    /* ordinary lanes with one or two of the specials mixed in at spread
     * positions: blocks that hold a lane past their range or NaN */
    const int64_t base = n;
    for (int64_t i = base; i < MAX; i++) {
        a[i] = (float)((i * 37) % 801 - 400) * 0.01f;
        if (i % 53 == 0) a[i] = specials[(i / 53) % NS];
        if (i % 131 == 7) a[i] = -6.5f;
    }
    n = MAX;
    for (int w = TG__EXP_PLAIN; w <= TG__EXP_AVX512; w++)
        if (width_runs((tg__exp_width)w))
            expect_blocks_match(a, g, n, (tg__exp_width)w, want, got);
}
