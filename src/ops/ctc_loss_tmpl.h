/* src/ops/ctc_loss_tmpl.h - the per-sequence kernels of ctc_loss
 * (src/ops/ctc_loss.c, which has the formulas), for one scalar type.
 * Included once per type with
 *   CTC_R    the scalar type (float, double),
 *   CTC_SUF  its suffix (f32, f64),
 *   CTC_EXP, CTC_LOG  exp and log in that type (expf, logf; exp, log),
 * it defines ctc_alpha_<SUF> and ctc_grad_<SUF> (ctc_alpha_f32,
 * ctc_grad_f32, ctc_alpha_f64, ctc_grad_f64).  Every operation is in
 * CTC_R in torch's CPU kernel's order, so that the roundings are its own.
 * Needs ctc_job and ctc_label (ctc_loss.c) in scope. */

#define CTC_CAT2(a, b) a##_##b
#define CTC_CAT(a, b) CTC_CAT2(a, b)
#define CTC_NEGINF ((CTC_R)-INFINITY)

/* log(exp(a - m) + exp(b - m) + exp(c - m)) + m, m the largest of a, b, c
 * compared as torch compares them (0 when all are -inf, so that no
 * -inf - -inf appears), then + lp. */
static inline CTC_R CTC_CAT(ctc_step, CTC_SUF)(CTC_R a, CTC_R b, CTC_R c, CTC_R lp)
{
    CTC_R m = a;
    if (b > m) m = b;
    if (c > m) m = c;
    if (m == CTC_NEGINF) m = 0;
    return CTC_LOG(CTC_EXP(a - m) + CTC_EXP(b - m) + CTC_EXP(c - m)) + m + lp;
}

/* log(exp(a) + exp(b)) as torch's log-add of two (std::max's choice of m:
 * b when a < b, else a). */
static inline CTC_R CTC_CAT(ctc_logadd, CTC_SUF)(CTC_R a, CTC_R b)
{
    CTC_R m = a < b ? b : a;
    if (m == CTC_NEGINF) m = 0;
    return CTC_LOG(CTC_EXP(a - m) + CTC_EXP(b - m)) + m;
}

/* Sequence b's alphas into j->alpha[b] (T, Lmax) and its negative log
 * likelihood into j->nll[b] (+inf when no alignment reaches the target). */
static void CTC_CAT(ctc_alpha, CTC_SUF)(const ctc_job *j, int64_t b)
{
    const CTC_R *lp = (const CTC_R *)j->lp + b * j->lp_st[1];
    const int64_t st = j->lp_st[0], sc = j->lp_st[2], il = j->il[b], tl = j->tl[b],
                  L = 2 * tl + 1, W = j->Lmax;
    const int64_t *lab = j->tgt + j->tg_off[b];
    CTC_R *la = (CTC_R *)j->alpha + b * j->T * W;
    CTC_R *nll = (CTC_R *)j->nll;
    if (il == 0) {   /* the empty alignment: only the empty target */
        nll[b] = tl == 0 ? 0 : (CTC_R)INFINITY;
        return;
    }
    for (int64_t s = 0; s < W; s++) la[s] = CTC_NEGINF;
    la[0] = lp[sc * j->blank];
    if (tl > 0) la[1] = lp[sc * lab[0]];
    for (int64_t t = 1; t < il; t++) {
        const CTC_R *prev = la + (t - 1) * W, *lpt = lp + t * st;
        CTC_R *cur = la + t * W;
        for (int64_t s = 0; s < L; s++) {
            const int64_t c = ctc_label(lab, j->blank, s);
            const CTC_R a2 = s > 0 ? prev[s - 1] : CTC_NEGINF;
            /* a skip over the blank between two different labels */
            const CTC_R a3 = s > 1 && ctc_label(lab, j->blank, s - 2) != c ? prev[s - 2]
                                                                          : CTC_NEGINF;
            cur[s] = CTC_CAT(ctc_step, CTC_SUF)(prev[s], a2, a3, lpt[sc * c]);
        }
    }
    const CTC_R *last = la + (il - 1) * W;
    if (tl == 0) {
        nll[b] = -last[0];
        return;
    }
    nll[b] = -CTC_CAT(ctc_logadd, CTC_SUF)(last[2 * tl], last[2 * tl - 1]);
}

/* Sequence b's gradient into j->grad (T, N, C), contiguous and zeroed:
 * the betas row by row (two rows of j->beta's 2 Lmax for b), each
 * alpha + beta log-added into the gradient's entry of its label, then
 * (exp(lp) - exp(lcab + nll - lp)) g_b for t < il. */
static void CTC_CAT(ctc_grad, CTC_SUF)(const ctc_job *j, int64_t b)
{
    const CTC_R nll = ((const CTC_R *)j->nll)[b];
    if (j->zero_infinity && nll == (CTC_R)INFINITY) return;   /* zeros */
    const CTC_R *lp = (const CTC_R *)j->lp + b * j->lp_st[1];
    const int64_t st = j->lp_st[0], sc = j->lp_st[2], il = j->il[b], tl = j->tl[b],
                  C = j->C, NC = j->N * C, W = j->Lmax, top = 2 * tl;
    const int64_t *lab = j->tgt + j->tg_off[b];
    const CTC_R *la = (const CTC_R *)j->alpha + b * j->T * W;
    CTC_R *gr = (CTC_R *)j->grad + b * C;   /* row t at gr + t NC */
    CTC_R *next = (CTC_R *)j->beta + b * 2 * W, *cur = next + W;
    if (il == 0) return;
    for (int64_t t = 0; t < il; t++)
        for (int64_t c = 0; c < C; c++) gr[t * NC + c] = CTC_NEGINF;
    /* t = il - 1: beta is lp at the last two positions, -inf elsewhere */
    const CTC_R *lpl = lp + (il - 1) * st, *lal = la + (il - 1) * W;
    CTC_R *grl = gr + (il - 1) * NC;
    for (int64_t s = 0; s <= top; s++) next[s] = CTC_NEGINF;
    next[top] = lpl[sc * j->blank];
    grl[j->blank] = lal[top] + next[top];
    if (tl > 0) {
        const int64_t c = lab[tl - 1];
        next[top - 1] = lpl[sc * c];
        grl[c] = lal[top - 1] + next[top - 1];   /* assigned, as torch's */
    }
    for (int64_t t = il - 2; t >= 0; t--) {
        const CTC_R *lpt = lp + t * st, *lat = la + t * W;
        CTC_R *grt = gr + t * NC;
        for (int64_t s = top; s >= 0; s--) {
            const int64_t c = ctc_label(lab, j->blank, s);
            const CTC_R b2 = s < top ? next[s + 1] : CTC_NEGINF;
            const CTC_R b3 = s < top - 1 && ctc_label(lab, j->blank, s + 2) != c ? next[s + 2]
                                                                                : CTC_NEGINF;
            cur[s] = CTC_CAT(ctc_step, CTC_SUF)(next[s], b2, b3, lpt[sc * c]);
            const CTC_R ab = lat[s] + cur[s];
            CTC_R *lcab = &grt[c];
            *lcab = *lcab == CTC_NEGINF ? ab : CTC_CAT(ctc_logadd, CTC_SUF)(*lcab, ab);
        }
        CTC_R *tmp = next;
        next = cur;
        cur = tmp;
    }
    const CTC_R g = ((const CTC_R *)j->g)[b];
    for (int64_t t = 0; t < il; t++) {
        const CTC_R *lpt = lp + t * st;
        CTC_R *grt = gr + t * NC;
        for (int64_t c = 0; c < C; c++) {
            const CTC_R x = lpt[sc * c];
            grt[c] = (CTC_EXP(x) - CTC_EXP(grt[c] + nll - x)) * g;
        }
    }
}

#undef CTC_NEGINF
#undef CTC_CAT
#undef CTC_CAT2
