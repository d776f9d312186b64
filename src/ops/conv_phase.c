/* src/ops/conv_phase.c - the geometry of ConvTranspose by stride phases
 * (the kernels are conv_phase_tmpl.h, included by conv_kernels.c).
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
