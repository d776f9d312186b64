/* src/ops/conv_im2col.c - the data movement of the conv kernels (im2col,
 * col2im, the batch permutations and the epilogue): the tables of kernel
 * taps they share, then conv_gather_tmpl.h and conv_kernels_tmpl.h
 * instantiated for float (f32) and double (f64), and conv_gather_tmpl.h for
 * bf16 bits.  The names it exports are listed in conv_internal.h. */
#include <math.h>
#include <string.h>

#include "core/half_simd.h"
#include "ops/conv_internal.h"
#include "ops/scratch.h"

/* The fused activation, evaluated in double (one rounding for f32). */
static double conv_activate(double v, tg_activation act, double slope)
{
    switch (act) {
    case TG_ACT_RELU: return v > 0 ? v : 0;
    case TG_ACT_LEAKY_RELU: return v > 0 ? v : slope * v;
    case TG_ACT_TANH: return tanh(v);
    case TG_ACT_SIGMOID: return 1.0 / (1.0 + exp(-v));
    case TG_ACT_SILU: return v / (1.0 + exp(-v));
    case TG_ACT_GELU: return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    case TG_ACT_GELU_TANH:   /* sqrt(2 / pi) (v + 0.044715 v^3) */
        return 0.5 * v * (1.0 + tanh(M_SQRT2 * M_2_SQRTPI * 0.5 * (v + 0.044715 * v * v * v)));
    default: return v;
    }
}

/* Activation inputs as the kernels read them: dst = elements [at, at + n)
 * of src, converted from half when the geometry says so (exact: every half
 * value is an f32 value), else copied. */
static void load_f32(const tg__conv_geom *g, const void *src, int64_t at, int64_t n, float *dst)
{
    if (tg__conv_half_in(g))
        tg__half_to_f32_k(g->half_in, (const uint16_t *)src + at, dst, n, tg__conv_cast(g));
    else
        memcpy(dst, (const float *)src + at, (size_t)n * sizeof(float));
}

static void load_f64(const tg__conv_geom *g, const void *src, int64_t at, int64_t n, double *dst)
{
    TG_ASSERT(!tg__conv_half_in(g));
    memcpy(dst, (const double *)src + at, (size_t)n * sizeof(double));
}

static void load_bf16(const tg__conv_geom *g, const void *src, int64_t at, int64_t n,
                      uint16_t *dst)
{
    TG_ASSERT(g->half_in == TG_BF16);
    memcpy(dst, (const uint16_t *)src + at, (size_t)n * sizeof(uint16_t));
}

/* col2im's taps, tabulated once per call: on axis a, tap k maps the column
 * positions o in [lo[a][k], hi[a][k]) inside the image, to o*s + off[a][k]. */
typedef struct conv_taps {
    int64_t *buf;
    int64_t *lo[3], *hi[3], *off[3];
} conv_taps;

static int conv_taps_init(conv_taps *tp, const tg__conv_geom *g)
{
    tp->buf = tg__malloc((size_t)(3 * (g->k[0] + g->k[1] + g->k[2])) * sizeof(int64_t));
    if (!tp->buf) return TG_ENOMEM;
    int64_t *p = tp->buf;
    for (int a = 0; a < 3; a++) {
        tp->lo[a] = p;
        tp->hi[a] = p + g->k[a];
        tp->off[a] = p + 2 * g->k[a];
        p += 3 * g->k[a];
        for (int64_t k = 0; k < g->k[a]; k++) {
            /* o*s + off in [0, I)  <=>  o in [ceil(-off/s), ceil((I-off)/s)) */
            const int64_t off = k * g->dil[a] - g->pad[a];
            tp->off[a][k] = off;
            tp->lo[a][k] = tg__conv_clamp(tg__conv_ceil_div(-off, g->stride[a]), 0, g->col[a]);
            tp->hi[a][k] = tg__conv_clamp(tg__conv_ceil_div(g->img[a] - off, g->stride[a]),
                                          tp->lo[a][k], g->col[a]);
        }
    }
    return TG_OK;
}

static void conv_taps_free(conv_taps *tp) { free(tp->buf); }

/* Small planes with short rows (the DCGAN layers: 7x7 and 14x14 column
 * planes) spend most of im2col and col2im on per-row bookkeeping, a few
 * elements at a time.  There one table, made once per call, gives for each
 * kernel tap k and column position o the offset in the image plane that the
 * column entry reads (im2col) or adds into (col2im), or -1 in the padding:
 * tab[k * O + o], k and o row-major.  Used when the column rows are shorter
 * than TG__TAP_TABLE_ROW and the table has at most TG__TAP_TABLE_MAX
 * entries; NULL otherwise, or when out of memory (the callers then take the
 * row-by-row path, which gives the same results). */
#define TG__TAP_TABLE_ROW 32
/* im2col copies planes up to this many elements next to a zero (one copy
 * per thread on its stack: 32 KiB for f64). */
#define TG__PLANE_COPY_MAX 4096
#define TG__TAP_TABLE_MAX ((int64_t)1 << 16)
static _Thread_local bool tap_tables_off;

void tg__conv_set_tap_tables(bool on) { tap_tables_off = !on; }

static int32_t *tap_table_new(const tg__conv_geom *g)
{
    const int64_t *oe = g->col, *ie = g->img, *ke = g->k;
    const int64_t ksz = tg__conv_prod3(ke), osz = tg__conv_prod3(oe);
    if (tap_tables_off || oe[2] >= TG__TAP_TABLE_ROW || ksz * osz > TG__TAP_TABLE_MAX ||
        tg__conv_prod3(ie) > INT32_MAX)
        return NULL;
    conv_taps tp;
    int32_t *tab = malloc((size_t)(ksz * osz) * sizeof *tab);
    if (!tab || conv_taps_init(&tp, g) < 0) {
        free(tab);
        return NULL;
    }
    int32_t *t = tab;
    for (int64_t k0 = 0; k0 < ke[0]; k0++)
        for (int64_t k1 = 0; k1 < ke[1]; k1++)
            for (int64_t k2 = 0; k2 < ke[2]; k2++)
                for (int64_t o0 = 0; o0 < oe[0]; o0++)
                    for (int64_t o1 = 0; o1 < oe[1]; o1++)
                        for (int64_t o2 = 0; o2 < oe[2]; o2++) {
                            const bool in = o0 >= tp.lo[0][k0] && o0 < tp.hi[0][k0] &&
                                            o1 >= tp.lo[1][k1] && o1 < tp.hi[1][k1] &&
                                            o2 >= tp.lo[2][k2] && o2 < tp.hi[2][k2];
                            const int64_t i0 = o0 * g->stride[0] + tp.off[0][k0],
                                          i1 = o1 * g->stride[1] + tp.off[1][k1],
                                          i2 = o2 * g->stride[2] + tp.off[2][k2];
                            *t++ = in ? (int32_t)((i0 * ie[1] + i1) * ie[2] + i2) : -1;
                        }
    conv_taps_free(&tp);
    return tab;
}

/* col2im by output phases.  With i = o*s + off_k on each axis (off_k =
 * k*dilation - pad), tap k adds column position o into image position i,
 * whose phase is r = i mod s and whose place within that phase is
 * q = i div s = o + d_k, where r_k = off_k mod s and d_k = (off_k - r_k)/s
 * do not depend on o.  So in an image stored phase after phase, each tap's
 * rows of columns add into contiguous runs (vectorisable adds, no index
 * table), and one interleaving pass writes the image.  Each element still
 * gets its terms tap by tap from zero: the bits of the other paths. */
#define TG__COL2IM_PHASES_MAX 64
#define TG__COL2IM_PHASED_ROW 6   /* shortest column rows that go by phases */

typedef struct col2im_phases {
    int64_t *r[3], *d[3];   /* per axis and tap: its phase and shift */
    int64_t *q[3];          /* per axis and phase: the image positions in it */
    int64_t *poff;          /* per phase (r0, r1, r2) row-major: its offset in the block */
    /* per tap k2 of the last axis, O1*O2 masks: all ones where column
     * position (o1, o2) is inside the image on the last axis, else 0; NULL
     * when O1*O2 > TG__COL2IM_KEEP_MAX */
    int32_t *keep;
    int64_t *buf;           /* all of the above */
} col2im_phases;
#define TG__COL2IM_KEEP_MAX 4096


/* From the tap offsets of tp; false (nothing to free) when the tap tables
 * are off, or there are more than TG__COL2IM_PHASES_MAX phases, or out of
 * memory. */
static bool col2im_phases_init(col2im_phases *ph, const tg__conv_geom *g, const conv_taps *tp)
{
    const int64_t *s = g->stride;
    if (tap_tables_off || s[0] > TG__COL2IM_PHASES_MAX ||
        s[0] * s[1] > TG__COL2IM_PHASES_MAX || s[0] * s[1] * s[2] > TG__COL2IM_PHASES_MAX)
        return false;
    const int64_t nph = s[0] * s[1] * s[2], o12 = g->col[1] * g->col[2];
    const size_t n = (size_t)(2 * (g->k[0] + g->k[1] + g->k[2]) + s[0] + s[1] + s[2] + nph);
    const size_t nkeep = o12 <= TG__COL2IM_KEEP_MAX ? (size_t)(g->k[2] * o12) : 0;
    /* (no error set: optional) */
    int64_t *p = ph->buf = malloc(n * sizeof(int64_t) + nkeep * sizeof(int32_t));
    if (!p) return false;
    ph->keep = nkeep ? (int32_t *)(void *)(p + n) : NULL;
    for (size_t i = 0; i < nkeep; i++) {
        const int64_t k2 = (int64_t)i / o12, o2 = (int64_t)i % g->col[2];
        ph->keep[i] = o2 >= tp->lo[2][k2] && o2 < tp->hi[2][k2] ? -1 : 0;
    }
    for (int a = 0; a < 3; a++) {
        ph->r[a] = p;
        ph->d[a] = p + g->k[a];
        ph->q[a] = p + 2 * g->k[a];
        p += 2 * g->k[a] + s[a];
        for (int64_t k = 0; k < g->k[a]; k++) {
            const int64_t off = tp->off[a][k];
            const int64_t r = ((off % s[a]) + s[a]) % s[a];
            ph->r[a][k] = r;
            ph->d[a][k] = (off - r) / s[a];
        }
        for (int64_t r = 0; r < s[a]; r++)
            ph->q[a][r] = r < g->img[a] ? tg__conv_ceil_div(g->img[a] - r, s[a]) : 0;
    }
    ph->poff = p;
    int64_t at = 0;
    for (int64_t r0 = 0; r0 < s[0]; r0++)
        for (int64_t r1 = 0; r1 < s[1]; r1++)
            for (int64_t r2 = 0; r2 < s[2]; r2++) {
                *p++ = at;
                at += ph->q[0][r0] * ph->q[1][r1] * ph->q[2][r2];
            }
    TG_ASSERT(at == tg__conv_prod3(g->img));
    return true;
}

/* col2im by phases across a block's samples.  When every phase plane has
 * the shape of a column plane (image = stride x columns on every axis: the
 * DCGAN's 7 -> 14 and 14 -> 28), the block's phase planes are stored phase
 * after phase and, within a phase, sample after sample, O apart as the
 * block's column entries are.  Then each tap adds one run of jb*O entries
 * (all the block's samples) at one shift, its entries outside the image
 * masked to +0, where col2im_phased's runs are one a sample and tap: 42
 * entries a call on the DCGAN's layers, which the calls' own work
 * outweighed.  The masked entries land up to `margin` past either end of
 * the block (kept as spare room) or in another plane, which +0 leaves as
 * it is (a sum started at +0 is never -0); each element still gets its
 * terms tap by tap from zero. */
#define TG__COL2IM_RUNS_MAX ((int64_t)1 << 18)   /* mask entries, at most */

typedef struct col2im_runs {
    int64_t n;        /* jb*O: a run's entries */
    int64_t margin;   /* the largest |shift|: the block's spare room each side */
    int64_t *phase;   /* per tap: its phase (r0, r1, r2) row-major, or -1: no entry inside */
    int64_t *shift;   /* per tap: its shift d in a phase plane, d0*O1*O2 + d1*O2 + d2 */
    int64_t *poff;    /* per phase: its offset in the block, phase*jb*O */
    int32_t *mask;    /* per tap, n masks: all ones where the entry is inside the image */
    int64_t *buf;     /* all of the above */
} col2im_runs;

static _Thread_local bool col2im_runs_off;
static _Atomic int64_t col2im_runs_calls;

void tg__conv_set_col2im_runs(bool on) { col2im_runs_off = !on; }
int64_t tg__conv_col2im_runs_calls(void) { return col2im_runs_calls; }

/* For blocks of jb samples; false (nothing to free) when the geometry is
 * not of that shape, jb < 2, the masks would pass TG__COL2IM_RUNS_MAX, or
 * out of memory. */
static bool col2im_runs_init(col2im_runs *rn, const tg__conv_geom *g, const conv_taps *tp,
                             const col2im_phases *ph, int64_t jb)
{
    const int64_t *s = g->stride, *oe = g->col, *ke = g->k;
    const int64_t ksz = tg__conv_prod3(ke), osz = tg__conv_prod3(oe);
    const int64_t nph = s[0] * s[1] * s[2], n = jb * osz;
    if (col2im_runs_off || jb < 2 || ksz * n > TG__COL2IM_RUNS_MAX) return false;
    for (int a = 0; a < 3; a++)
        if (g->img[a] != s[a] * oe[a]) return false;
    int64_t *p = rn->buf = malloc((size_t)(2 * ksz + nph) * sizeof(int64_t) +
                                  (size_t)(ksz * n) * sizeof(int32_t));
    if (!p) return false;   /* (no error set: optional) */
    rn->n = n;
    rn->phase = p;
    rn->shift = p + ksz;
    rn->poff = p + 2 * ksz;
    rn->mask = (int32_t *)(void *)(p + 2 * ksz + nph);
    rn->margin = 0;
    for (int64_t r = 0; r < nph; r++) rn->poff[r] = r * n;
    for (int64_t k = 0; k < ksz; k++) {
        const int64_t kk[3] = {k / (ke[1] * ke[2]), (k / ke[2]) % ke[1], k % ke[2]};
        bool empty = false;
        for (int a = 0; a < 3; a++) empty |= tp->lo[a][kk[a]] >= tp->hi[a][kk[a]];
        const int64_t d = (ph->d[0][kk[0]] * oe[1] + ph->d[1][kk[1]]) * oe[2] + ph->d[2][kk[2]],
                      r = (ph->r[0][kk[0]] * s[1] + ph->r[1][kk[1]]) * s[2] + ph->r[2][kk[2]];
        rn->phase[k] = empty ? -1 : r;
        rn->shift[k] = d;
        if (!empty && (d < 0 ? -d : d) > rn->margin) rn->margin = d < 0 ? -d : d;
        int32_t *m = rn->mask + k * n;
        for (int64_t o = 0; o < osz; o++) {
            const int64_t o_[3] = {o / (oe[1] * oe[2]), (o / oe[2]) % oe[1], o % oe[2]};
            bool in = true;
            for (int a = 0; a < 3; a++)
                in &= o_[a] >= tp->lo[a][kk[a]] && o_[a] < tp->hi[a][kk[a]];
            m[o] = in ? -1 : 0;
        }
        for (int64_t j = 1; j < jb; j++) memcpy(m + j * osz, m, (size_t)osz * sizeof *m);
    }
    col2im_runs_calls++;
    return true;
}

static const char *const col2im_names[] = {
    [TG__CONV_COL2IM_AUTO] = "auto",
    [TG__CONV_COL2IM_PORTABLE] = "portable",
    [TG__CONV_COL2IM_AVX512] = "avx512",
};

static bool col2im_runs_on(int k)
{
    return k != TG__CONV_COL2IM_AVX512 || tg__cpu_has_avx512bw();
}

/* process-wide: col2im's blocks run on the pool's threads */
static atomic_int col2im_forced;

void tg__conv_set_col2im_kernel(tg__conv_col2im k) { atomic_store(&col2im_forced, (int)k); }

tg__conv_col2im tg__conv_col2im_kernel(void)
{
    static atomic_flag told = ATOMIC_FLAG_INIT;
    const int f = atomic_load(&col2im_forced);
    if (f != TG__CONV_COL2IM_AUTO && col2im_runs_on(f)) return (tg__conv_col2im)f;
    const int best = tg__cpu_has_avx512bw() ? TG__CONV_COL2IM_AVX512 : TG__CONV_COL2IM_PORTABLE;
    return (tg__conv_col2im)tg__kernel_from_env("TG_COL2IM_KERNEL", "a col2im", col2im_names,
                                                TG__CONV_COL2IM_AVX512 + 1, col2im_runs_on, best,
                                                &told);
}

#define T float
#define SUF f32
#define BITS 0
#include "ops/conv_gather_tmpl.h"
#include "ops/conv_kernels_tmpl.h"
#undef T
#undef SUF
#undef BITS

#define T double
#define SUF f64
#define BITS 0
#include "ops/conv_gather_tmpl.h"
#include "ops/conv_kernels_tmpl.h"
#undef T
#undef SUF
#undef BITS

#define T uint16_t
#define SUF bf16
#define BITS 1
#include "ops/conv_gather_tmpl.h"
#undef T
#undef SUF
#undef BITS
