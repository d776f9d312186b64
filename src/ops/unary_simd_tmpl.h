/* src/ops/unary_simd_tmpl.h - the blocks of lanes of src/ops/unary_simd.c,
 * one vector (BLOCK) and N vectors (BLOCKN), included once per vector
 * width with VF (floats), VD (doubles), VI (int64), VU (uint64), FMA and
 * TAB (the width's helpers of src/ops/exp_simd.h), POLY and POLYN (gelu's
 * pieces), ANY, CVT_IN and CVT_OUT, N, BLOCK and BLOCKN (the functions'
 * names) and ATTR (their target attribute) defined; no include guard. */

/* o[0..W) = op(a, g) for one vector of W lanes (ops: unary_simd_internal.h). */
ATTR static inline __attribute__((always_inline)) void BLOCK(int op, float *o,
                                                             const float *a, const float *g)
{
    VF af, gf = {0}, of;
    memcpy(&af, a, sizeof af);
    if (op == TG__USIMD_GELU_GRAD || op == TG__USIMD_SILU_GRAD) memcpy(&gf, g, sizeof gf);
    const VD x = CVT_IN(af);
    const VD zero = {0};
    VD y;
    if (op == TG__USIMD_EXP) {
        /* [-120, 100]: 0 and inf in f32 beyond; NaN stays NaN */
        const VI lo = x < -120.0, hi = x > 100.0;
        const VD t = SEL(lo, zero - 120.0, SEL(hi, zero + 100.0, x));
        EXPV(t, y);
        y = (VD)((VI)y & ~lo);
        of = CVT_OUT(y);
        memcpy(o, &of, sizeof of);
        return;
    }
    VD e;
    if (op == TG__USIMD_TANH) {
        /* tanh|x| = u / (u + 2), u = expm1(2|x|), 2|x| capped at 40 (tanh is
         * 1 in f32 past 9.1); the sign back by copysign (tanh(-0) = -0);
         * NaN stays */
        const VD ax = ABSV(x), t = 2.0 * SEL(ax < 20.0, ax, zero + 20.0);
        VD u;
        TG__EXPM1V(VD, VU, FMA, TAB, t, u);
        y = (VD)((VI)(u / (u + 2.0)) | ((VI)x & ~0x7FFFFFFFFFFFFFFF));   /* copysign */
        y = SEL(x != x, x, y);
    } else if (op == TG__USIMD_SOFTPLUS) {
        /* e = exp(-|x|), 0 past |x| = 120 (below every f32 there) and at NaN */
        const VD t = zero - ABSV(x);
        const VI tiny = ~(t >= -120.0);
        EXPV(SEL(tiny, zero - 120.0, t), e);
        e = (VD)((VI)e & ~tiny);
        VD l;
        LOG1PV(e, l);
        y = SEL(x > 0.0, x, zero) + l;
        y = SEL(x != x, x, y);
    } else if (op == TG__USIMD_SILU_GRAD || op == TG__USIMD_SIGMOID ||
               op == TG__USIMD_SILU) {
        /* sigmoid_d's two forms, 1 / (1 + e) and e / (1 + e), with e =
         * exp(-|x|), 0 past |x| = 120 (sigmoid 0 or 1 in f32) and at NaN */
        const VD t = zero - ABSV(x);
        const VI tiny = ~(t >= -120.0);
        EXPV(SEL(tiny, zero - 120.0, t), e);
        e = (VD)((VI)e & ~tiny);
        const VD s = SEL(x >= 0.0, zero + 1.0, e) / (1.0 + e);
        if (op == TG__USIMD_SIGMOID) y = s;
        else if (op == TG__USIMD_SILU) y = x * s;
        else y = CVT_IN(gf) * (s * (1.0 + x * (1.0 - s)));
        y = SEL(x != x, x, y);
    } else {
        /* a = |x| <= GELU_AMAX: piece k of F (forward) or D (gradient) at t,
         * Phi(x) = F(a) and gelu'(x) = D(a) for x < 0, 1 minus those else
         * (src/ops/unary_simd.c) */
        const VD ax = ABSV(x), km = FMA(ax, zero + 8.0 / 3.0, zero + 0x1.8p52);
        const VU kb = (VU)km & 15;   /* inf and NaN: some piece, replaced below */
        const VD t = ax - (km - 0x1.8p52) * 0.375;
        VD p;
        if (op == TG__USIMD_GELU) POLY(GELU_F, GELU_FP, kb, t, p);
        else POLY(GELU_D, GELU_DP, kb, t, p);
        VD r = SEL(x < 0.0, p, 1.0 - p);   /* Phi(x) or gelu'(x) */
        const VI far = ~(ax <= GELU_AMAX);
        if (ANY(far)) {
            /* E = 0.5 erfc(|x| / sqrt2) = 0.5 exp(-x^2 / 2) erfcx(|x| / sqrt2),
             * x^2 / 2 exact for an f32 x; Phi = E for x < 0, 1 - E else.
             * Past x^2 / 2 = 120 (and for NaN) e and so E are 0. */
            VD z = ax * M_SQRT1_2, hx;
            z = SEL(z > 11.0, zero + 11.0, z);   /* inf too: the polynomial's range */
            ERFCXV(z, hx);
            const VD q = (x * x) * -0.5;
            const VI tiny = ~(q >= -120.0);
            EXPV(SEL(tiny, zero - 120.0, q), e);
            e = (VD)((VI)e & ~tiny);
            const VD big_e = (e * hx) / (1.0 + 2.0 * z);
            VD rf = SEL(x < 0.0, big_e, 1.0 - big_e);
            if (op == TG__USIMD_GELU_GRAD)
                rf = rf + x * (e * 0x1.9884533d43651p-2);   /* 1 / sqrt(2 pi) */
            r = SEL(far, rf, r);
        }
        if (op == TG__USIMD_GELU) {
            /* below |x| = 2^-60, Phi = 0.5 in double (libm's erfc is 1
             * there), which decides the rounding of x / 2 for a subnormal
             * x, a halfway case */
            y = x * SEL(ax < 0x1p-60, zero + 0.5, r);
        } else {
            y = CVT_IN(gf) * r;
        }
        y = SEL(x != x, x, y);   /* NaN: x's (widths differ in a NaN's sign) */
    }
    of = CVT_OUT(y);
    memcpy(o, &of, sizeof of);
}

/* o[0..N W) = op(a, g) for N vectors of W lanes, op EXP, GELU, SOFTPLUS,
 * SIGMOID, SILU (g unused) or GELU_GRAD, SILU_GRAD: BLOCK's operations per
 * lane, so the same bits, with
 * each step taken for all N vectors in turn (N independent chains of
 * dependent steps side by side, which the CPU overlaps).  A block holding
 * a lane outside the range where BLOCK's clamps, masks and NaN selects
 * change nothing (exp: x outside [-120, 100]; softplus, sigmoid, silu and
 * its gradient: |x| > 120; gelu and its gradient: |x| > GELU_AMAX; NaN for
 * all) goes through BLOCK vector by vector, so the block itself skips
 * them. */
ATTR static inline __attribute__((always_inline)) void BLOCKN(int op, float *o, const float *a,
                                                              const float *g)
{
    const bool grad = op == TG__USIMD_GELU_GRAD || op == TG__USIMD_SILU_GRAD;
    enum { W_ = (int)(sizeof(VF) / sizeof(float)) };
    const VD zero = {0};
    VD x[N], y[N];
    VI far = {0};
    TG__UNROLL for (int u = 0; u < N; u++) {
        VF af;
        memcpy(&af, a + u * W_, sizeof af);
        x[u] = CVT_IN(af);
        if (op == TG__USIMD_EXP) far |= ~((x[u] >= -120.0) & (x[u] <= 100.0));
        else if (op == TG__USIMD_GELU || op == TG__USIMD_GELU_GRAD)
            far |= ~(ABSV(x[u]) <= GELU_AMAX);
        else far |= ~(ABSV(x[u]) <= 120.0);
    }
    if (ANY(far)) {
        TG__UNROLL for (int u = 0; u < N; u++)
            BLOCK(op, o + u * W_, a + u * W_, grad ? g + u * W_ : NULL);
        return;
    }
    if (op == TG__USIMD_EXP) {
        TG__EXPV_N(VD, VU, FMA, TAB, N, x, y);
    } else if (op == TG__USIMD_GELU || op == TG__USIMD_GELU_GRAD) {
        VD ax[N], t[N], p[N];
        VU kb[N];
        TG__UNROLL for (int u = 0; u < N; u++) {
            ax[u] = ABSV(x[u]);
            const VD km = FMA(ax[u], zero + 8.0 / 3.0, zero + 0x1.8p52);
            kb[u] = (VU)km & 15;
            t[u] = ax[u] - (km - 0x1.8p52) * 0.375;
        }
        if (op == TG__USIMD_GELU) POLYN(GELU_F, GELU_FP, N, kb, t, p);
        else POLYN(GELU_D, GELU_DP, N, kb, t, p);
        TG__UNROLL for (int u = 0; u < N; u++) {
            const VD r = SEL(x[u] < 0.0, p[u], 1.0 - p[u]);
            if (op == TG__USIMD_GELU) {
                y[u] = x[u] * SEL(ax[u] < 0x1p-60, zero + 0.5, r);
            } else {
                VF gf;
                memcpy(&gf, g + u * W_, sizeof gf);
                y[u] = CVT_IN(gf) * r;
            }
        }
    } else {
        /* e = exp(-|x|), as BLOCK's (|x| <= 120: no clamp) */
        VD t[N], e[N];
        TG__UNROLL for (int u = 0; u < N; u++) t[u] = zero - ABSV(x[u]);
        TG__EXPV_N(VD, VU, FMA, TAB, N, t, e);
        TG__UNROLL for (int u = 0; u < N; u++) {
            if (op == TG__USIMD_SOFTPLUS) {
                VD l;
                LOG1PV(e[u], l);
                y[u] = SEL(x[u] > 0.0, x[u], zero) + l;
            } else {
                const VD s = SEL(x[u] >= 0.0, zero + 1.0, e[u]) / (1.0 + e[u]);
                if (op == TG__USIMD_SILU_GRAD) {
                    VF gf;
                    memcpy(&gf, g + u * W_, sizeof gf);
                    y[u] = CVT_IN(gf) * (s * (1.0 + x[u] * (1.0 - s)));
                } else {
                    y[u] = op == TG__USIMD_SIGMOID ? s : x[u] * s;
                }
            }
        }
    }
    TG__UNROLL for (int u = 0; u < N; u++) {
        const VF of = CVT_OUT(y[u]);
        memcpy(o + u * W_, &of, sizeof of);
    }
}
