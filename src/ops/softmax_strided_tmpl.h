/* src/ops/softmax_strided_tmpl.h - the kernels of src/ops/softmax_strided.c
 * at one vector width, included once per width with W (lanes), VF (W
 * floats), VD, VI, VU (W doubles, int64, uint64), FMA and TAB (the width's
 * helpers of src/ops/exp_simd.h), LOGTAB (its lookup of
 * src/ops/log_simd.h's tables), ATTR (its target attribute) and FN(name)
 * (name with the width's suffix), TO_VD and TO_VF (the conversions of a
 * VF to a VD and back, each value rounded as a C cast rounds it) and
 * MAXF(v, m) (each lane's v > m ? v : m of two VF) defined; no include
 * guard.
 *
 * A block is the n <= W positions i0 .. i0 + n - 1 of a slab (C, S) of
 * rows of stride S, one position a lane: the block functions take x + i0
 * (and the like), element (c, i0 + l) at c S + l.  Lanes past n load 0 and
 * store nothing; every lane takes the same operations, so a position's
 * bits depend neither on its lane nor on W. */

/* The helpers take their vectors by pointer: always inlined, no vector
 * crosses a call (no ABI that depends on the width). */

/* *d = lanes [0, n) of the floats at p, the others 0. */
ATTR static inline AI void FN(load_f)(VF *d, const float *p, int n)
{
    if (n == W) {
        memcpy(d, p, sizeof *d);
    } else {   /* through an array: a partial copy into the vector trips GCC 12 */
        float t[W] = {0};
        memcpy(t, p, (size_t)n * sizeof(float));
        memcpy(d, t, sizeof *d);
    }
}

/* *d = lanes [0, n) of the floats at p as doubles, the others 0. */
ATTR static inline AI void FN(load)(VD *d, const float *p, int n)
{
    VF v;
    FN(load_f)(&v, p, n);
    *d = TO_VD(v);
}

/* Lanes [0, n) of *v, each rounded once to f32, to p. */
ATTR static inline AI void FN(store)(float *p, const VD *v, int n)
{
    const VF f = TO_VF(*v);
    if (n == W) {
        memcpy(p, &f, sizeof f);
    } else {
        float t[W];
        memcpy(t, &f, sizeof t);
        memcpy(p, t, (size_t)n * sizeof(float));
    }
}

/* *t = exp(*t) for *t <= 0 (-inf: 0) or NaN (NaN), softmax_rows.c's: 0
 * below -708, where 2^k would be subnormal. */
ATTR static inline AI void FN(exp_le0)(VD *t)
{
    const VI tiny = *t < -708.0;         /* all ones where true; false for NaN */
    const VD z = (VD)((VI)*t & ~tiny);   /* 0 there, in the exp's range */
    VD y;
    TG__EXPV(VD, VU, FMA, TAB, z, y);
    *t = (VD)((VI)y & ~tiny);
}

/* *e = exp(x - m) of the n floats at p. */
ATTR static inline AI void FN(exp_shifted)(VD *e, const float *p, const VD *m, int n)
{
    FN(load)(e, p, n);
    *e -= *m;
    FN(exp_le0)(e);
}

/* *m = each lane's maximum over the C rows in class order, as softmax.c's
 * `if (x > m) m = x` from -inf: a NaN never becomes it.  In f32, the
 * values' own precision, widened once. */
ATTR static inline AI void FN(max_of)(VD *m, const float *x, int64_t C, int64_t S, int n)
{
    const VF zero = {0};
    VF mf = zero - INFINITY;
    for (int64_t c = 0; c < C; c++) {
        VF v;
        FN(load_f)(&v, x + c * S, n);
        mf = MAXF(v, mf);
    }
    *m = TO_VD(mf);
}

/* *s = log of each lane, src/ops/log_simd.h's (within 0.51 ulp). */
ATTR static inline AI void FN(log_lanes)(VD *s)
{
    TG__LOGV(VD, VU, FMA, LOGTAB, *s, *s);
}

/* y = softmax of the block's rows: m, then e_c = exp(x_c - m) and s =
 * sum_c e_c in class order, then y_c = e_c / s.  e: C W doubles of
 * scratch. */
ATTR static inline AI void FN(forward_block)(const float *x, float *y, int64_t C, int64_t S,
                                             double *e, int n)
{
    VD m, s = {0}, v;
    FN(max_of)(&m, x, C, S, n);
    for (int64_t c = 0; c < C; c++) {
        FN(exp_shifted)(&v, x + c * S, &m, n);
        s += v;
        memcpy(e + c * W, &v, sizeof v);
    }
    for (int64_t c = 0; c < C; c++) {
        memcpy(&v, e + c * W, sizeof v);
        v /= s;
        FN(store)(y + c * S, &v, n);
    }
}

/* *m and *s = the maximum and sum_c exp(x_c - m) of the block's rows, in
 * class order. */
ATTR static inline AI void FN(max_and_sum)(VD *m, VD *s, const float *x, int64_t C, int64_t S,
                                           int n)
{
    const VD zero = {0};
    VD v;
    FN(max_of)(m, x, C, S, n);
    *s = zero;
    for (int64_t c = 0; c < C; c++) {
        FN(exp_shifted)(&v, x + c * S, m, n);
        *s += v;
    }
}

/* y = log_softmax of the n <= GROUP W positions at x, GROUP blocks at a
 * time: each block's m and s, then their logs side by side (independent
 * chains, which the CPU overlaps), then y_c = (x_c - m) - log(s). */
ATTR static inline AI void FN(log_forward_group)(const float *x, float *y, int64_t C,
                                                 int64_t S, int64_t n)
{
    VD m[GROUP], s[GROUP], v;
    const int nb = (int)((n + W - 1) / W);
    for (int b = 0; b < nb; b++)
        FN(max_and_sum)(&m[b], &s[b], x + b * W, C, S, n - b * W < W ? (int)(n - b * W) : W);
    for (int b = 0; b < nb; b++) FN(log_lanes)(&s[b]);
    for (int b = 0; b < nb; b++) {
        const int k = n - b * W < W ? (int)(n - b * W) : W;
        for (int64_t c = 0; c < C; c++) {
            FN(load)(&v, x + b * W + c * S, k);
            v = (v - m[b]) - s[b];
            FN(store)(y + b * W + c * S, &v, k);
        }
    }
}

/* dx = y (g - sum_c g_c y_c), the sum in class order (each product exact:
 * two floats' fit in a double). */
ATTR static inline AI void FN(backward_block)(const float *y, const float *g, float *dx,
                                              int64_t C, int64_t S, int n)
{
    VD s = {0}, yv, gv;
    for (int64_t c = 0; c < C; c++) {
        FN(load)(&yv, y + c * S, n);
        FN(load)(&gv, g + c * S, n);
        s += gv * yv;
    }
    for (int64_t c = 0; c < C; c++) {
        FN(load)(&yv, y + c * S, n);
        FN(load)(&gv, g + c * S, n);
        gv = yv * (gv - s);
        FN(store)(dx + c * S, &gv, n);
    }
}

/* dx = g - e (sum(g) / s), e = exp(x - m), log_softmax's backward from its
 * input: the forward's m, e and s, sum(g) in class order.  e: C W doubles
 * of scratch. */
ATTR static inline AI void FN(log_backward_block)(const float *x, const float *g, float *dx,
                                                  int64_t C, int64_t S, double *e, int n)
{
    VD m, s = {0}, sg = {0}, v, gv;
    FN(max_of)(&m, x, C, S, n);
    for (int64_t c = 0; c < C; c++) {
        FN(exp_shifted)(&v, x + c * S, &m, n);
        s += v;
        FN(load)(&gv, g + c * S, n);
        sg += gv;
        memcpy(e + c * W, &v, sizeof v);
    }
    const VD f = sg / s;
    for (int64_t c = 0; c < C; c++) {
        memcpy(&v, e + c * W, sizeof v);
        FN(load)(&gv, g + c * S, n);
        gv -= v * f;
        FN(store)(dx + c * S, &gv, n);
    }
}

/* *tv = the classes t[0..n) as lanes, -1 (no class) past n. */
ATTR static inline AI void FN(load_classes)(VI *tv, const int64_t *t, int n)
{
    int64_t a[W];
    for (int l = 0; l < W; l++) a[l] = l < n ? t[l] : -1;
    memcpy(tv, a, sizeof a);
}

/* *m and *s as max_and_sum gives them, and *xt = x at class t[l] in lane
 * l < n (0 for t[l] < 0 and past n). */
ATTR static inline AI void FN(stats_sums)(VD *m, VD *s, VD *xt, const float *x, int64_t C,
                                          int64_t S, const int64_t *t, int n)
{
    const VD zero = {0};
    VD v;
    VI tv;
    FN(load_classes)(&tv, t, n);
    FN(max_of)(m, x, C, S, n);
    *s = *xt = zero;
    for (int64_t c = 0; c < C; c++) {
        FN(load)(&v, x + c * S, n);
        const VI at = tv == c;
        *xt = SEL(at, v, *xt);
        v -= *m;
        FN(exp_le0)(&v);
        *s += v;
    }
}

/* For the n <= GROUP W positions at x, GROUP blocks at a time (their logs
 * side by side, as log_forward_group's): st[2 l] = m and st[2 l + 1] = s
 * of position l, as log_forward_group computes them, and lp[l] =
 * log_softmax at class t[l] as it rounds it to f32, (x_t - m) - log(s) (0
 * for t[l] < 0). */
ATTR static inline AI void FN(stats_group)(const float *x, int64_t C, int64_t S,
                                           const int64_t *t, double *st, double *lp, int64_t n)
{
    VD m[GROUP], s[GROUP], ls[GROUP], xt[GROUP];
    const int nb = (int)((n + W - 1) / W);
    for (int b = 0; b < nb; b++)
        FN(stats_sums)(&m[b], &s[b], &xt[b], x + b * W, C, S, t + b * W,
                       n - b * W < W ? (int)(n - b * W) : W);
    for (int b = 0; b < nb; b++) {
        ls[b] = s[b];
        FN(log_lanes)(&ls[b]);
    }
    for (int b = 0; b < nb; b++) {
        const int k = n - b * W < W ? (int)(n - b * W) : W;
        const VD p = TO_VD(TO_VF((xt[b] - m[b]) - ls[b]));
        double a[W], c[W], q[W];
        memcpy(a, &m[b], sizeof a);
        memcpy(c, &s[b], sizeof c);
        memcpy(q, &p, sizeof q);
        for (int l = 0; l < k; l++) {
            const int64_t i = b * W + l;
            st[2 * i] = a[l];
            st[2 * i + 1] = c[l];
            lp[i] = t[i] >= 0 ? q[l] : 0.0;
        }
    }
}

/* log_backward_block for a g zero but at class t[l] of lane l (none for
 * t[l] < 0), g = gt[l] there, from the lanes' stats st (stats_group):
 * sum(g) = 0 + gt, f = sum(g) / s, dx = 0 - e f, and g - e f at the
 * target. */
ATTR static inline AI void FN(pick_block)(const float *x, float *dx, int64_t C, int64_t S,
                                          const double *st, const int64_t *t, const double *gt,
                                          int n)
{
    double ma[W], sa[W], ga[W];
    for (int l = 0; l < W; l++) {   /* padding lanes: m 0, s 1, no target */
        ma[l] = l < n ? st[2 * l] : 0.0;
        sa[l] = l < n ? st[2 * l + 1] : 1.0;
        ga[l] = l < n ? gt[l] : 0.0;
    }
    VD m, s, gv, v;
    VI tv;
    memcpy(&m, ma, sizeof m);
    memcpy(&s, sa, sizeof s);
    memcpy(&gv, ga, sizeof gv);
    FN(load_classes)(&tv, t, n);
    const VD zero = {0}, f = (zero + gv) / s;
    for (int64_t c = 0; c < C; c++) {
        FN(exp_shifted)(&v, x + c * S, &m, n);
        v *= f;
        const VI at = tv == c;
        v = SEL(at, gv - v, zero - v);
        FN(store)(dx + c * S, &v, n);
    }
}

/* The slab functions: whole blocks of W, then the tail (the softmax ones
 * over positions [i0, i1) of the slab). */
ATTR static void FN(forward_slab)(const float *x, float *y, int64_t C, int64_t S, int64_t i0,
                                  int64_t i1, bool log_, double *e)
{
    int64_t i = i0;
    if (log_) {
        for (; i < i1; i += GROUP * W)
            FN(log_forward_group)(x + i, y + i, C, S, i1 - i < GROUP * W ? i1 - i : GROUP * W);
        return;
    }
    for (; i + W <= i1; i += W) FN(forward_block)(x + i, y + i, C, S, e, W);
    if (i < i1) FN(forward_block)(x + i, y + i, C, S, e, (int)(i1 - i));
}

ATTR static void FN(backward_slab)(const float *y, const float *g, float *dx, int64_t C,
                                   int64_t S, int64_t i0, int64_t i1)
{
    int64_t i = i0;
    for (; i + W <= i1; i += W) FN(backward_block)(y + i, g + i, dx + i, C, S, W);
    if (i < i1) FN(backward_block)(y + i, g + i, dx + i, C, S, (int)(i1 - i));
}

ATTR static void FN(log_backward_slab)(const float *x, const float *g, float *dx, int64_t C,
                                       int64_t S, int64_t i0, int64_t i1, double *e)
{
    int64_t i = i0;
    for (; i + W <= i1; i += W) FN(log_backward_block)(x + i, g + i, dx + i, C, S, e, W);
    if (i < i1) FN(log_backward_block)(x + i, g + i, dx + i, C, S, e, (int)(i1 - i));
}

ATTR static void FN(stats_slab)(const float *x, int64_t C, int64_t S, int64_t i0, int64_t i1,
                                const int64_t *t, double *st, double *lp)
{
    for (int64_t i = i0; i < i1; i += GROUP * W)
        FN(stats_group)(x + i, C, S, t + i, st + 2 * i, lp + i,
                        i1 - i < GROUP * W ? i1 - i : GROUP * W);
}

ATTR static void FN(pick_slab)(const float *x, float *dx, int64_t C, int64_t S, int64_t i0,
                               int64_t i1, const double *st, const int64_t *t, const double *gt)
{
    int64_t i = i0;
    for (; i + W <= i1; i += W)
        FN(pick_block)(x + i, dx + i, C, S, st + 2 * i, t + i, gt + i, W);
    if (i < i1) FN(pick_block)(x + i, dx + i, C, S, st + 2 * i, t + i, gt + i, (int)(i1 - i));
}

/* v[i] = log(v[i]) for i < n, in place (tg__log_f64_inplace). */
ATTR static void FN(log_array)(double *v, int64_t n)
{
    int64_t i = 0;
    VD x;
    for (; i + W <= n; i += W) {
        memcpy(&x, v + i, sizeof x);
        FN(log_lanes)(&x);
        memcpy(v + i, &x, sizeof x);
    }
    if (i < n) {   /* the tail through an array, its other lanes 1 */
        double a[W];
        for (int l = 0; l < W; l++) a[l] = i + l < n ? v[i + l] : 1.0;
        memcpy(&x, a, sizeof x);
        FN(log_lanes)(&x);
        memcpy(a, &x, sizeof a);
        memcpy(v + i, a, (size_t)(n - i) * sizeof *a);
    }
}
