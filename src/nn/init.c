/* src/nn/init.c - torch.nn.init for tensors (tapegrad/init.h): gains, fans
 * and the fills built on tg_tensor_rand_uniform / tg_tensor_rand_normal.
 *
 * Each fill checks everything before it writes, under its own name, and
 * then hands the bounds or the standard deviation, computed with torch's
 * formulas in double, to one draw:
 *   xavier:  std = gain sqrt(2 / (fan_in + fan_out)),  bound = sqrt(3) std
 *   kaiming: std = gain / sqrt(fan),                   bound = sqrt(3) std */
#include <math.h>
#include <stdlib.h>

#include "core/core.h"
#include "tapegrad/init.h"

int tg_init_calculate_gain(double *out, tg_nonlinearity nl, double param)
{
    TG_CHECK(out != NULL, TG_EINVAL, "init_calculate_gain: out must not be NULL");
    switch (nl) {
    case TG_NL_LINEAR:
    case TG_NL_CONV1D:
    case TG_NL_CONV2D:
    case TG_NL_CONV3D:
    case TG_NL_CONV_TRANSPOSE1D:
    case TG_NL_CONV_TRANSPOSE2D:
    case TG_NL_CONV_TRANSPOSE3D:
    case TG_NL_SIGMOID: *out = 1.0; return TG_OK;
    case TG_NL_TANH: *out = 5.0 / 3; return TG_OK;
    case TG_NL_RELU: *out = sqrt(2.0); return TG_OK;
    case TG_NL_SELU: *out = 3.0 / 4; return TG_OK;
    case TG_NL_LEAKY_RELU: {
        const double slope = isnan(param) ? 0.01 : param;
        TG_CHECK(isfinite(slope), TG_EINVAL, "init_calculate_gain: param=%g, leaky_relu's "
                 "negative slope, must be finite (NAN for the default 0.01)", param);
        *out = sqrt(2.0 / (1 + slope * slope));
        return TG_OK;
    }
    default: break;
    }
    return tg__error(TG_EINVAL, "init_calculate_gain: nonlinearity=%d is not a tg_nonlinearity "
                     "(0..%d)", (int)nl, TG_NL_COUNT - 1);
}

/* The fans of t, checked under op's name. */
static int fans(const char *op, const tg_tensor *t, int64_t *fan_in, int64_t *fan_out)
{
    TG_CHECK(t != NULL, TG_EINVAL, "%s: t must not be NULL", op);
    char s[96];
    TG_CHECK(t->ndim >= 2, TG_ESHAPE, "%s: t is %s; fan_in and fan_out need a tensor of at "
             "least 2 dims", op, tg_shape_str(s, sizeof s, t->ndim, t->shape));
    int64_t rf = 1;   /* fits: numel of t fits */
    for (int d = 2; d < t->ndim; d++) rf *= t->shape[d];
    *fan_in = t->shape[1] * rf;
    *fan_out = t->shape[0] * rf;
    return TG_OK;
}

int tg_init_calculate_fan(int64_t *fan_in, int64_t *fan_out, const tg_tensor *t)
{
    int64_t fi = 0, fo = 0;
    TG_TRY(fans("init_calculate_fan", t, &fi, &fo));
    if (fan_in) *fan_in = fi;
    if (fan_out) *fan_out = fo;
    return TG_OK;
}

/* The checks every draw shares: t and rng given, t of a float dtype. */
static int check_draw(const char *op, const tg_tensor *t, const tg_rng *rng)
{
    TG_CHECK(t != NULL, TG_EINVAL, "%s: t must not be NULL", op);
    TG_CHECK(rng != NULL, TG_EINVAL, "%s: rng must not be NULL", op);
    TG_CHECK(tg_dtype_is_float(t->dtype), TG_EINVAL, "%s: t is %s; only float dtypes are "
             "drawn (as torch's init)", op, tg_dtype_name(t->dtype));
    return TG_OK;
}

int tg_init_uniform_(tg_tensor *t, double a, double b, tg_rng *rng)
{
    TG_TRY(check_draw("init_uniform_", t, rng));
    TG_CHECK(isfinite(a) && isfinite(b) && a <= b, TG_EINVAL,
             "init_uniform_: a=%g, b=%g must be finite with a <= b", a, b);
    return tg_tensor_rand_uniform(t, rng, a, b);
}

int tg_init_normal_(tg_tensor *t, double mean, double std, tg_rng *rng)
{
    TG_TRY(check_draw("init_normal_", t, rng));
    TG_CHECK(isfinite(mean) && isfinite(std) && std >= 0, TG_EINVAL,
             "init_normal_: mean=%g, std=%g must be finite with std >= 0", mean, std);
    return tg_tensor_rand_normal(t, rng, mean, std);
}

int tg_init_constant_(tg_tensor *t, double val)
{
    TG_CHECK(t != NULL, TG_EINVAL, "init_constant_: t must not be NULL");
    TG_TRY(tg__check_value("init_constant_", t->dtype, val));
    return tg_tensor_fill(t, val);
}

int tg_init_zeros_(tg_tensor *t)
{
    TG_CHECK(t != NULL, TG_EINVAL, "init_zeros_: t must not be NULL");
    return tg_tensor_fill(t, 0.0);
}

int tg_init_ones_(tg_tensor *t)
{
    TG_CHECK(t != NULL, TG_EINVAL, "init_ones_: t must not be NULL");
    return tg_tensor_fill(t, 1.0);
}

/* U[-sqrt(3) std, sqrt(3) std) or N(0, std^2); nothing for an empty t,
 * whose fans may be 0 (std inf). */
static int draw(tg_tensor *t, tg_rng *rng, bool uniform, double std)
{
    if (tg__numel(t->ndim, t->shape) == 0) return TG_OK;
    if (!uniform) return tg_tensor_rand_normal(t, rng, 0.0, std);
    const double bound = sqrt(3.0) * std;
    return tg_tensor_rand_uniform(t, rng, -bound, bound);
}

static int xavier(const char *op, bool uniform, tg_tensor *t, double gain, tg_rng *rng)
{
    int64_t fi = 0, fo = 0;
    TG_TRY(check_draw(op, t, rng));
    TG_TRY(fans(op, t, &fi, &fo));
    TG_CHECK(isfinite(gain) && gain >= 0, TG_EINVAL, "%s: gain=%g must be finite and >= 0", op,
             gain);
    return draw(t, rng, uniform, gain * sqrt(2.0 / (double)(fi + fo)));
}

int tg_init_xavier_uniform_(tg_tensor *t, double gain, tg_rng *rng)
{
    return xavier("init_xavier_uniform_", true, t, gain, rng);
}

int tg_init_xavier_normal_(tg_tensor *t, double gain, tg_rng *rng)
{
    return xavier("init_xavier_normal_", false, t, gain, rng);
}

static int kaiming(const char *op, bool uniform, tg_tensor *t, double a, tg_fan_mode mode,
                   tg_nonlinearity nl, tg_rng *rng)
{
    int64_t fi = 0, fo = 0;
    double gain;
    TG_TRY(check_draw(op, t, rng));
    TG_TRY(fans(op, t, &fi, &fo));
    TG_CHECK(mode == TG_FAN_IN || mode == TG_FAN_OUT, TG_EINVAL, "%s: mode=%d must be "
             "TG_FAN_IN or TG_FAN_OUT", op, (int)mode);
    TG_CHECK(nl >= 0 && nl < TG_NL_COUNT, TG_EINVAL, "%s: nonlinearity=%d is not a "
             "tg_nonlinearity (0..%d)", op, (int)nl, TG_NL_COUNT - 1);
    TG_CHECK(isfinite(a), TG_EINVAL, "%s: a=%g must be finite", op, a);
    TG_TRY(tg_init_calculate_gain(&gain, nl, a));
    const int64_t fan = mode == TG_FAN_IN ? fi : fo;
    return draw(t, rng, uniform, gain / sqrt((double)fan));
}

int tg_init_kaiming_uniform_(tg_tensor *t, double a, tg_fan_mode mode, tg_nonlinearity nl,
                             tg_rng *rng)
{
    return kaiming("init_kaiming_uniform_", true, t, a, mode, nl, rng);
}

int tg_init_kaiming_normal_(tg_tensor *t, double a, tg_fan_mode mode, tg_nonlinearity nl,
                            tg_rng *rng)
{
    return kaiming("init_kaiming_normal_", false, t, a, mode, nl, rng);
}

/* ---- trunc_normal_ ------------------------------------------------------------- */

/* Phi(x), the standard normal cdf, through erfc: accurate in the lower tail
 * (relative error near 1 ulp down to Phi(-37) ~ 6e-300), where 1 + erf
 * would cancel. */
static double norm_cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

/* Phi^-1(p) for p in [0, 1]: a start with |error| < 4.5e-4 (Abramowitz and
 * Stegun 26.2.23, a rational function of sqrt(-2 ln p)), then Halley steps
 * on f(x) = Phi(x) - p, where f' = phi(x) and f''/f' = -x, each tripling
 * the correct digits.  Phi is taken in the tail p lies in, so that p small
 * keeps its relative precision. */
static double norm_ppf(double p)
{
    if (!(p > 0)) return -INFINITY;
    if (!(p < 1)) return INFINITY;
    const double q = p < 0.5 ? p : 1 - p, r = sqrt(-2 * log(q));
    double x = r - (2.515517 + r * (0.802853 + r * 0.010328)) /
                   (1 + r * (1.432788 + r * (0.189269 + r * 0.001308)));
    if (p < 0.5) x = -x;
    for (int it = 0; it < 4; it++) {
        /* Phi(x) - p, with Phi(x) = 1 - Phi(-x) for x >= 0 */
        const double f = x < 0 ? norm_cdf(x) - p : (1 - p) - norm_cdf(-x);
        const double d = exp(-0.5 * x * x) / sqrt(2 * M_PI);
        if (!(d > 0)) break;
        const double u = f / d;   /* Newton's step, then Halley's */
        const double step = u / (1 + 0.5 * x * u);
        x -= step;
        if (fabs(step) <= 1e-16 * fabs(x)) break;
    }
    return x;
}

/* The probability of (alpha, beta) in the tail it lies nearer, with the sign
 * that maps a draw there back: for alpha + beta > 0 the interval is
 * mirrored to (-beta, -alpha), where Phi keeps its precision. */
typedef struct trunc_range {
    double sign, lo, p_lo, p_hi;
} trunc_range;

static trunc_range trunc_range_of(double alpha, double beta)
{
    trunc_range r = {1.0, alpha, 0, 0};
    if (alpha + beta > 0) r = (trunc_range){-1.0, -beta, 0, 0};
    const double hi = r.sign > 0 ? beta : -alpha;
    r.p_lo = norm_cdf(r.lo);
    r.p_hi = norm_cdf(hi);
    return r;
}

int tg_init_trunc_normal_(tg_tensor *t, double mean, double std, double a, double b,
                          tg_rng *rng)
{
    const char *op = "init_trunc_normal_";
    TG_TRY(check_draw(op, t, rng));
    TG_CHECK(isfinite(mean), TG_EINVAL, "%s: mean=%g must be finite", op, mean);
    TG_CHECK(isfinite(std) && std > 0, TG_EINVAL, "%s: std=%g must be finite and > 0", op, std);
    TG_CHECK(isfinite(a) && isfinite(b) && a < b, TG_EINVAL,
             "%s: a=%g, b=%g must be finite with a < b", op, a, b);
    const double alpha = (a - mean) / std, beta = (b - mean) / std;
    const trunc_range r = trunc_range_of(alpha, beta);
    TG_CHECK(r.p_hi > r.p_lo, TG_EINVAL, "%s: [a, b] = [%g, %g] is [%g, %g] std from "
             "mean=%g; its probability under N(mean, std^2) is 0 in double", op, a, b, alpha,
             beta, mean);
    const int64_t n = tg__numel(t->ndim, t->shape);
    if (n == 0) return TG_OK;
    /* u ~ U[0, 1) as one f64 fill of n elements draws it, so the rng moves
     * on as for any other fill of t */
    tg_tensor *u = NULL;
    TG_TRY(tg_tensor_zeros(&u, TG_F64, 1, &n));
    int rc = tg_tensor_rand_uniform(u, rng, 0.0, 1.0);
    if (rc < 0) {
        tg_tensor_release(u);
        return rc;
    }
    double *v = tg_tensor_data(u);
    for (int64_t i = 0; i < n; i++) {
        const double z = r.sign * norm_ppf(r.p_lo + (r.p_hi - r.p_lo) * v[i]);
        v[i] = fmin(fmax(mean + std * z, a), b);
    }
    tg__scatter(t, TG_F64, v);
    tg__bump_version(t);
    tg_tensor_release(u);
    return TG_OK;
}

/* ---- orthogonal_ --------------------------------------------------------------- */

/* Householder QR of the m x n matrix a (m >= n, column-major, column j at
 * a + j m), in place: column k of a becomes v_k, zero above row k, with
 * H_k = I - beta[k] v_k v_k^T mapping what was left of column k to
 * rdiag[k] e_k.  rdiag[k] takes the sign opposite to a_kk, so that v_k's
 * leading entry a_kk - rdiag[k] adds two numbers of one sign. */
static void householder_qr(double *a, int64_t m, int64_t n, double *beta, double *rdiag)
{
    for (int64_t k = 0; k < n; k++) {
        double *v = a + k * m, ss = 0;
        for (int64_t i = k; i < m; i++) ss += v[i] * v[i];
        beta[k] = 0;
        rdiag[k] = 0;
        if (ss == 0) continue;   /* H_k = I */
        const double norm = sqrt(ss), alpha = v[k] >= 0 ? -norm : norm;
        /* |v|^2 = ss - v_k^2 + (v_k - alpha)^2 = 2 (ss - alpha v_k) */
        beta[k] = 1 / (ss - alpha * v[k]);
        v[k] -= alpha;
        rdiag[k] = alpha;
        for (int64_t j = k + 1; j < n; j++) {
            double *c = a + j * m, dot = 0;
            for (int64_t i = k; i < m; i++) dot += v[i] * c[i];
            dot *= beta[k];
            for (int64_t i = k; i < m; i++) c[i] -= dot * v[i];
        }
    }
}

/* q (m x n, column-major) = H_0 ... H_{n-1} [I_n; 0], the thin Q of
 * householder_qr's factors, built from the last reflector back: when H_k
 * applies, columns j < k are still e_j, zero in the rows H_k touches. */
static void householder_q(const double *a, int64_t m, int64_t n, const double *beta, double *q)
{
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++) q[j * m + i] = i == j;
    for (int64_t k = n - 1; k >= 0; k--) {
        const double *v = a + k * m;
        for (int64_t j = k; j < n && beta[k] != 0; j++) {
            double *c = q + j * m, dot = 0;
            for (int64_t i = k; i < m; i++) dot += v[i] * c[i];
            dot *= beta[k];
            for (int64_t i = k; i < m; i++) c[i] -= dot * v[i];
        }
    }
}

/* torch's orthogonal_: a (rows, cols) draw of N(0, 1), transposed when
 * rows < cols so that it is tall (m x n, m >= n), factored A = Q R; Q's
 * column k times sign(R_kk) (+1 for R_kk = 0) is the Q of the QR whose R
 * has a non-negative diagonal, which for a Gaussian A is Haar-distributed.
 * out (rows x cols, row-major) = gain Q, or gain Q^T for the wide case. */
static int orthogonal_fill(double *out, const double *draw, int64_t rows, int64_t cols,
                           double gain)
{
    const bool wide = rows < cols;
    const int64_t m = wide ? cols : rows, n = wide ? rows : cols;
    double *a = tg__malloc((size_t)(2 * m * n + 2 * n) * sizeof *a);
    if (!a) return TG_ENOMEM;
    double *q = a + m * n, *beta = q + m * n, *rdiag = beta + n;
    /* a[j m + i] = A[i][j], A = draw or draw^T */
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            a[j * m + i] = wide ? draw[j * cols + i] : draw[i * cols + j];
    householder_qr(a, m, n, beta, rdiag);
    householder_q(a, m, n, beta, q);
    for (int64_t j = 0; j < n; j++) {
        const double s = rdiag[j] < 0 ? -gain : gain;
        for (int64_t i = 0; i < m; i++) {
            if (wide) out[j * cols + i] = s * q[j * m + i];
            else out[i * cols + j] = s * q[j * m + i];
        }
    }
    free(a);
    return TG_OK;
}

int tg_init_orthogonal_(tg_tensor *t, double gain, tg_rng *rng)
{
    const char *op = "init_orthogonal_";
    TG_TRY(check_draw(op, t, rng));
    char s[96];
    TG_CHECK(t->ndim >= 2, TG_ESHAPE, "%s: t is %s; orthogonal_ needs a tensor of at least 2 "
             "dims (the trailing ones are flattened)", op,
             tg_shape_str(s, sizeof s, t->ndim, t->shape));
    TG_CHECK(isfinite(gain) && gain >= 0, TG_EINVAL, "%s: gain=%g must be finite and >= 0", op,
             gain);
    const int64_t numel = tg__numel(t->ndim, t->shape);
    if (numel == 0) return TG_OK;
    const int64_t rows = t->shape[0], cols = numel / rows;
    tg_tensor *d = NULL;
    double *out = tg__malloc((size_t)numel * sizeof *out);
    int rc = out ? tg_tensor_zeros(&d, TG_F64, 2, (int64_t[]){rows, cols}) : TG_ENOMEM;
    tg_rng before = *rng;
    if (rc >= 0) rc = tg_tensor_rand_normal(d, rng, 0.0, 1.0);
    if (rc >= 0) rc = orthogonal_fill(out, tg_tensor_cdata(d), rows, cols, gain);
    if (rc >= 0) {
        tg__scatter(t, TG_F64, out);
        tg__bump_version(t);
    } else {
        *rng = before;   /* on error nothing is changed */
    }
    tg_tensor_release(d);
    free(out);
    return rc;
}
