/* src/ops/cross_entropy_soft_tmpl.h - the kernels of
 * src/ops/cross_entropy_soft.c at one vector width, included once per width
 * with ATTR (the width's target attribute, src/ops/exp_simd.h's) and
 * FN(name) (name with the width's suffix) defined; no include guard.  The
 * code is plain C whose loops of fixed length the compiler vectorizes at
 * the width; C17 contracts no multiply-add, so every width takes the same
 * operations and gives the same bits. */

/* e[c P + p] = x (or q) of rows [k, k + P) as doubles. */
ATTR static void FN(load_block)(const sce_job *j, const void *src, int64_t k, int64_t P,
                                 double *e)
{
    const int64_t C = j->C, cs = j->S, ps = j->S == 1 ? C : 1, at = row_at(j, k);
    if (j->f64) {
        const double *x = (const double *)src + at;
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < P; p++) e[c * P + p] = x[c * cs + p * ps];
    } else {
        const float *x = (const float *)src + at;
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < P; p++) e[c * P + p] = (double)x[c * cs + p * ps];
    }
}

/* The forward of rows [k, k + P): e (C P values of scratch), qe (C P more
 * for probabilities). */
ATTR static void FN(fwd_block)(const sce_job *j, int64_t k, int64_t P, double *e, double *qe)
{
    const int64_t C = j->C;
    double m[BLOCK_ROWS], s[BLOCK_ROWS], D[BLOCK_ROWS], A[BLOCK_ROWS];
    FN(load_block)(j, j->x, k, P, e);
    if (j->q) FN(load_block)(j, j->q, k, P, qe);
    for (int64_t p = 0; p < P; p++) {
        m[p] = -INFINITY;
        s[p] = D[p] = A[p] = 0.0;
    }
    for (int64_t c = 0; c < C; c++)
        for (int64_t p = 0; p < P; p++)
            if (e[c * P + p] > m[p]) m[p] = e[c * P + p];
    /* e = x - m; D = sum_c a_c (x_c - m), A = sum_c a_c: for class targets
     * D accumulates sum_c w_c (x_c - m) and A, D take the target after */
    const double u = j->u, vv = j->v;
    double *restrict er = e;
    const double *restrict qr = qe;
    for (int64_t c = 0; c < C; c++) {
        const double wc = j->w[c];
        if (j->q) {
            for (int64_t p = 0; p < P; p++) {
                const double d = er[c * P + p] - m[p], a = wc * (u * qr[c * P + p] + vv);
                er[c * P + p] = d;
                D[p] += a * d;
                A[p] += a;
            }
        } else {
            for (int64_t p = 0; p < P; p++) {
                const double d = er[c * P + p] - m[p];
                er[c * P + p] = d;
                D[p] += wc * d;
            }
        }
    }
    if (!j->q)
        for (int64_t p = 0; p < P; p++) {
            const int64_t t = j->cls[k + p];
            const double wt = t < 0 ? 0.0 : j->u * j->wk[k + p];
            D[p] = t < 0 ? 0.0 : wt * e[t * P + p] + j->v * D[p];
            A[p] = t < 0 ? 0.0 : wt + j->v * j->wsum;
        }
    for (int i = 0; i < TG__EXP_PAD; i++) e[C * P + i] = 0.0;   /* the padding: defined */
    tg__exp_f64_inplace(e, C * P, j->wd);
    for (int64_t c = 0; c < C; c++)
        for (int64_t p = 0; p < P; p++) s[p] += e[c * P + p];
    for (int64_t p = 0; p < P; p++) {
        double *st = j->st + 3 * (k + p);
        st[0] = m[p];
        st[1] = s[p];
        st[2] = A[p];
        const bool ignored = !j->q && j->cls[k + p] < 0;
        j->l[k + p] = ignored ? 0.0 : A[p] * log(s[p]) - D[p];
    }
}

/* dx of rows [k, k + P): g_k (A softmax(x)_c - a_c) into e, then each
 * rounded once into dx
 * (an ignored target's row: g_k = 0, so +0 but where x holds NaN);
 * dx of a class target's row takes a_c = e / C w_c, then its target's
 * element again with the whole a_t. */
ATTR static void FN(bwd_block)(const sce_job *j, int64_t k, int64_t P, double *e, double *qe)
{
    const int64_t C = j->C, cs = j->S, ps = j->S == 1 ? C : 1, at = row_at(j, k);
    double m[BLOCK_ROWS], r[BLOCK_ROWS], gk[BLOCK_ROWS];
    FN(load_block)(j, j->x, k, P, e);
    if (j->q) FN(load_block)(j, j->q, k, P, qe);
    for (int64_t p = 0; p < P; p++) {
        const double *st = j->st + 3 * (k + p);
        m[p] = st[0];
        r[p] = st[2] / st[1];   /* A / s */
        gk[p] = j->gk[k + p];
    }
    for (int64_t c = 0; c < C; c++)
        for (int64_t p = 0; p < P; p++) e[c * P + p] -= m[p];
    for (int i = 0; i < TG__EXP_PAD; i++) e[C * P + i] = 0.0;   /* the padding: defined */
    tg__exp_f64_inplace(e, C * P, j->wd);
    double tv[BLOCK_ROWS];   /* dx at each class target, before e holds dx */
    for (int64_t p = 0; p < P; p++) {
        const int64_t t = j->q ? -1 : j->cls[k + p];
        if (t >= 0) tv[p] = gk[p] * (e[t * P + p] * r[p] - coef(j, k + p, t, 0.0));
    }
    const double u = j->u, vv = j->v;
    double *restrict er = e;
    const double *restrict qr = qe;
    for (int64_t c = 0; c < C; c++) {   /* +0 for an ignored row, as torch's */
        const double wc = j->w[c];
        if (j->q)
            for (int64_t p = 0; p < P; p++) {
                const double a = wc * (u * qr[c * P + p] + vv);
                er[c * P + p] = gk[p] * (er[c * P + p] * r[p] - a) + 0.0;
            }
        else
            for (int64_t p = 0; p < P; p++)
                er[c * P + p] = gk[p] * (er[c * P + p] * r[p] - vv * wc) + 0.0;
    }
    for (int64_t p = 0; !j->q && p < P; p++)
        if (j->cls[k + p] >= 0) er[j->cls[k + p] * P + p] = tv[p];
    if (j->f64) {
        double *restrict dx = (double *)j->dx + at;
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < P; p++) dx[c * cs + p * ps] = er[c * P + p];
    } else {
        float *restrict dx = (float *)j->dx + at;
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < P; p++) dx[c * cs + p * ps] = (float)er[c * P + p];
    }
}

ATTR static double FN(lanes_sum)(const double *acc)
{
    double r = 0.0;
    for (int l = 0; l < LANES; l++) r += acc[l];
    return r;
}

/* e = row k of x (or q) as doubles. */
ATTR static void FN(load_row)(const sce_job *j, const void *src, int64_t k, double *e)
{
    if (j->f64) memcpy(e, (const double *)src + k * j->C, (size_t)j->C * sizeof *e);
    else
        for (int64_t c = 0, n = j->C; c < n; c++) e[c] = ((const float *)src + k * n)[c];
}

/* *v = the LANES values of row src (x or q, x's dtype) from class c, as
 * doubles. */
ATTR static inline __attribute__((always_inline)) void FN(load8)(const sce_job *j,
                                                                 const void *src, int64_t c,
                                                                 sce_v8d *v)
{
    if (j->f64) {
        memcpy(v, (const double *)src + c, sizeof *v);
    } else {
        sce_v8f f;
        memcpy(&f, (const float *)src + c, sizeof f);
        *v = __builtin_convertvector(f, sce_v8d);
    }
}

/* fwd_block of one row of S = 1, in vectors of LANES classes, four of
 * them side by side: classes of [0, C32) in vector c / LANES mod 4 of the
 * partial sums (and maxima), the rest of [0, C8) in the first, the last
 * classes in its lanes; the four added in order. */
ATTR static void FN(fwd_row)(const sce_job *j, int64_t k, double *e, double *qe)
{
    const int64_t C = j->C, C8 = C / LANES * LANES, C32 = C / (4 * LANES) * (4 * LANES);
    const double *w = j->w, u = j->u, vv = j->v;
    const void *x = j->f64 ? (const void *)((const double *)j->x + k * C)
                           : (const void *)((const float *)j->x + k * C);
    const void *q = !j->q ? NULL
                    : j->f64 ? (const void *)((const double *)j->q + k * C)
                             : (const void *)((const float *)j->q + k * C);
    sce_v8d mx[4], dacc[4] = {{0}}, aacc[4] = {{0}}, sacc[4] = {{0}}, v, wv, qv;
    for (int l = 0; l < LANES; l++) mx[0][l] = -INFINITY;
    mx[1] = mx[2] = mx[3] = mx[0];
    int64_t c = 0;
    /* e = x as doubles; each lane's maximum v > mx ? v : mx */
#define SCE_MAX(h)                                                                        \
    do {                                                                                  \
        FN(load8)(j, x, c + (h) * LANES, &v);                                             \
        memcpy(e + c + (h) * LANES, &v, sizeof v);                                        \
        const sce_v8i gt = v > mx[h];                                                     \
        mx[h] = (sce_v8d)((gt & (sce_v8i)v) | (~gt & (sce_v8i)mx[h]));                    \
    } while (0)
    for (; c < C32; c += 4 * LANES) {
        SCE_MAX(0);
        SCE_MAX(1);
        SCE_MAX(2);
        SCE_MAX(3);
    }
    for (; c < C8; c += LANES) SCE_MAX(0);
#undef SCE_MAX
    for (; c < C; c++) e[c] = j->f64 ? ((const double *)x)[c] : ((const float *)x)[c];
    double m = -INFINITY;
    for (int h = 0; h < 4; h++)
        for (int l = 0; l < LANES; l++) m = mx[h][l] > m ? mx[h][l] : m;
    for (c = C8; c < C; c++) m = e[c] > m ? e[c] : m;
    /* e = x - m; D = sum_c a_c (x_c - m), A = sum_c a_c (class targets: D =
     * sum_c w_c (x_c - m)) */
#define SCE_D(h)                                                                          \
    do {                                                                                  \
        memcpy(&v, e + c + (h) * LANES, sizeof v);                                        \
        v -= m;                                                                           \
        memcpy(e + c + (h) * LANES, &v, sizeof v);                                        \
        memcpy(&wv, w + c + (h) * LANES, sizeof wv);                                      \
        if (q) {                                                                          \
            FN(load8)(j, q, c + (h) * LANES, &qv);                                        \
            const sce_v8d a = wv * (u * qv + vv);                                         \
            dacc[h] += a * v;                                                             \
            aacc[h] += a;                                                                 \
        } else {                                                                          \
            dacc[h] += wv * v;                                                            \
        }                                                                                 \
    } while (0)
    for (c = 0; c < C32; c += 4 * LANES) {
        SCE_D(0);
        SCE_D(1);
        SCE_D(2);
        SCE_D(3);
    }
    for (; c < C8; c += LANES) SCE_D(0);
#undef SCE_D
    for (; c < C; c++) {
        const double qc = !q ? 0.0 : j->f64 ? ((const double *)q)[c] : ((const float *)q)[c];
        const double a = q ? w[c] * (u * qc + vv) : w[c];
        e[c] -= m;
        dacc[0][c - C8] += a * e[c];
        aacc[0][c - C8] += a;
    }
    const sce_v8d dsum = ((dacc[0] + dacc[1]) + dacc[2]) + dacc[3];
    const sce_v8d asum = ((aacc[0] + aacc[1]) + aacc[2]) + aacc[3];
    double D = FN(lanes_sum)((const double *)&dsum), A = FN(lanes_sum)((const double *)&asum);
    const int64_t t = j->q ? 0 : j->cls[k];
    if (!j->q) {
        const double wt = t < 0 ? 0.0 : u * j->wk[k];
        D = t < 0 ? 0.0 : wt * e[t] + vv * D;
        A = t < 0 ? 0.0 : wt + vv * j->wsum;
    }
    for (int i = 0; i < TG__EXP_PAD; i++) e[C + i] = 0.0;   /* the padding: defined */
    tg__exp_f64_inplace(e, C, j->wd);
    for (c = 0; c < C32; c += 4 * LANES)
        for (int h = 0; h < 4; h++) {
            memcpy(&v, e + c + h * LANES, sizeof v);
            sacc[h] += v;
        }
    for (; c < C8; c += LANES) {
        memcpy(&v, e + c, sizeof v);
        sacc[0] += v;
    }
    for (; c < C; c++) sacc[0][c - C8] += e[c];
    const sce_v8d ssum = ((sacc[0] + sacc[1]) + sacc[2]) + sacc[3];
    const double sum = FN(lanes_sum)((const double *)&ssum);
    double *st = j->st + 3 * k;
    st[0] = m;
    st[1] = sum;
    st[2] = A;
    j->l[k] = !j->q && t < 0 ? 0.0 : A * log(sum) - D;
    (void)qe;
}

/* bwd_block of one row of S = 1: e = exp(x - m), then dx in one pass. */
ATTR static void FN(bwd_row)(const sce_job *j, int64_t k, double *e, double *qe)
{
    const int64_t C = j->C;
    const double *st = j->st + 3 * k, *w = j->w;
    const double m = st[0], r = st[2] / st[1], g = j->gk[k], u = j->u, vv = j->v;
    FN(load_row)(j, j->x, k, e);
    if (j->q) FN(load_row)(j, j->q, k, qe);
    for (int64_t c = 0; c < C; c++) e[c] -= m;
    for (int i = 0; i < TG__EXP_PAD; i++) e[C + i] = 0.0;   /* the padding: defined */
    tg__exp_f64_inplace(e, C, j->wd);
    if (j->f64) {
        double *restrict dx = (double *)j->dx + k * C;
        if (j->q)
            for (int64_t c = 0; c < C; c++) dx[c] = g * (e[c] * r - w[c] * (u * qe[c] + vv)) + 0.0;
        else
            for (int64_t c = 0; c < C; c++) dx[c] = g * (e[c] * r - vv * w[c]) + 0.0;
    } else {
        float *restrict dx = (float *)j->dx + k * C;
        if (j->q)
            for (int64_t c = 0; c < C; c++)
                dx[c] = (float)(g * (e[c] * r - w[c] * (u * qe[c] + vv)) + 0.0);
        else
            for (int64_t c = 0; c < C; c++) dx[c] = (float)(g * (e[c] * r - vv * w[c]) + 0.0);
    }
    const int64_t t = j->q ? -1 : j->cls[k];
    if (t < 0) return;
    const double d = g * (e[t] * r - coef(j, k, t, 0.0));
    if (j->f64) ((double *)j->dx)[k * C + t] = d;
    else ((float *)j->dx)[k * C + t] = (float)d;
}
