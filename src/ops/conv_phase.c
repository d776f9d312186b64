/* src/ops/conv_phase.c - the geometry of ConvTranspose by stride phases
 * (the kernels are conv_phase_tmpl.h, included by conv_phase_kernels.c).
 *
 * One axis, dilation 1: y[o] = sum over (i, k) with o = i*s - p + k of
 * x[i] w[k].  Write o + p = q*s + r with r = (o + p) mod s, the phase of o.
 * Then i*s + k = q*s + r, so k = r + s*t and i = q - t for t = 0, 1, ...:
 *   y[q*s + r - p] = sum_{t < T_r} x[q - t] w[r + s*t],   T_r = #{k < K : k = r mod s},
 * a stride-1 correlation of x with the sub-kernel (w[r], w[r+s], ...).  The
 * outputs of phase r are o = q*s + r - p for q in [qlo, qhi):
 *   o >= 0  <=>  q >= ceil((p - r)/s),   o < O  <=>  q < ceil((O + p - r)/s).
 * The phases partition [0, O), so each output is written exactly once.
 * With several axes a phase is one r per axis, T and Q multiply.
 */
#include "ops/conv_internal.h"

void tg__conv_phase_at(const tg__conv_geom *g, int64_t ph, tg__conv_phase *f)
{
    /* ph = (r0*s1 + r1)*s2 + r2 */
    f->taps = 1;
    f->pos = 1;
    for (int a = 2; a >= 0; a--) {
        const int64_t s = g->stride[a], r = ph % s;
        ph /= s;
        f->r[a] = r;
        f->t[a] = r < g->k[a] ? tg__conv_ceil_div(g->k[a] - r, s) : 0;
        f->qlo[a] = tg__conv_ceil_div(g->pad[a] - r, s);
        const int64_t qhi = tg__conv_ceil_div(g->img[a] + g->pad[a] - r, s);
        f->q[a] = qhi > f->qlo[a] ? qhi - f->qlo[a] : 0;
        f->taps *= f->t[a];
        f->pos *= f->q[a];
    }
}

bool tg__conv_phase_applies(const tg__conv_geom *g)
{
    for (int a = 0; a < 3; a++)
        if (g->dil[a] != 1 || g->stride[a] > g->k[a]) return false;
    return true;
}

/* Multiply-adds of the phase path over those of the column path.  Per axis
 * the column path multiplies K*S_in products; phase r multiplies T_r*Q_r,
 * which counts taps that fall outside x (zeros) when the output reaches
 * beyond the input's footprint, e.g. a stride-1 layer on a 1x1 input. */
double tg__conv_phase_work_ratio(const tg__conv_geom *g)
{
    double ratio = 1;
    for (int a = 0; a < 3; a++) {
        const int64_t s = g->stride[a], p = g->pad[a], o = g->img[a];
        int64_t sum = 0;
        for (int64_t r = 0; r < s && r < g->k[a]; r++) {
            const int64_t qlo = tg__conv_ceil_div(p - r, s), qhi = tg__conv_ceil_div(o + p - r, s);
            if (qhi > qlo) sum += tg__conv_ceil_div(g->k[a] - r, s) * (qhi - qlo);
        }
        ratio *= (double)sum / (double)(g->k[a] * g->col[a]);
    }
    return ratio;
}

static _Thread_local int shift_mode;

void tg__conv_phase_set_shift(int mode) { shift_mode = mode; }

/* Shift the last axis (conv_phase_tmpl.h, phase_dims) when its pad columns
 * cost at most 1/16 more GEMM work in every phase: 16*(T2 - 1) <= Q2. */
bool tg__conv_phase_shift(const tg__conv_geom *g)
{
    if (shift_mode) return shift_mode == 2;
    const int64_t s = g->stride[2], p = g->pad[2], o = g->img[2];
    for (int64_t r = 0; r < s && r < g->k[2]; r++) {
        const int64_t qlo = tg__conv_ceil_div(p - r, s), qhi = tg__conv_ceil_div(o + p - r, s);
        const int64_t t = tg__conv_ceil_div(g->k[2] - r, s);
        if (qhi > qlo && 16 * (t - 1) > qhi - qlo) return false;
    }
    return true;
}

/* Measured (docs/performance.md, 2 threads): the phase path was faster on
 * 2-D layers with C_in/G <= C_out/G, C_out/G >= 48 and >= 256 positions per
 * phase (its columns are then no larger than the column path's buffer, and
 * it drops col2im): 0.66-0.81x the time through `tapegrad bench`, 0.81-0.92x
 * in raw A/B runs.  Not clearly faster (so not taken): 1-D layers (0.9-1.07x),
 * 16-32 output channels (parity); slower: C_in > C_out (the DCGAN layers,
 * 1.1-1.4x: its columns scale with C_in), 3 output channels (6x, a GEMM with
 * M = 3), 64 positions per phase, the 3-D layers tried. */
bool tg__conv_phase_pays(const tg__conv_geom *g)
{
    const int64_t nph = tg__conv_prod3(g->stride);
    const int64_t cxg = g->c_col / g->groups, cyg = g->c_img / g->groups;
    return tg__conv_phase_applies(g) && g->nsp == 2 && nph >= 2 && cxg <= cyg && cyg >= 48 &&
           tg__conv_prod3(g->img) / nph >= 256 && tg__conv_phase_work_ratio(g) <= 1.05;
}
