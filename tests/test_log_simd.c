/* tests/test_log_simd.c - the log in double of src/ops/log_simd.h (the log
 * of each row's sum in src/ops/softmax_strided.c): its tables hold what
 * scripts/make_log_table.py says (logc the double nearest -log(invc), within
 * 2^-10 of its ulp; invc near the inverse of its bucket's midpoint, |r| <
 * 2^-9, and 1 next to 1); its error against logl stays under 0.51 ulp in
 * every width this CPU runs, over a sweep of some six million doubles
 * (every bucket at both ends and inside, for exponents across the whole
 * range; around 1 on both sides; the sums a row can take, [1, C] for C up to
 * 2^20; any positive double's bits; subnormals); every width gives the
 * plain C width's bits; and special values. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "ops/log_simd.h"
#include "ops/softmax_rows_internal.h"
#include "ops/softmax_strided_internal.h"

static const char *const WIDTH_NAMES[] = {"", "plain", "AVX2", "AVX-512"};

static uint64_t next_u64(uint64_t *s)   /* splitmix64 */
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static double of_bits(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static uint64_t bits_of(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

/* The ends of bucket i of z in [0.6875, 1.375), as the header gives them. */
static void bucket(int i, double *a, double *b)
{
    *a = i < 160 ? 0.6875 + ldexp(i, -9) : 1.0 + ldexp(i - 160, -8);
    *b = i < 160 ? *a + 0x1p-9 : *a + 0x1p-8;
}

Test(log_simd, tables_hold_what_the_script_says)
{
    for (int i = 0; i < 256; i++) {
        const double inv = TG__LOG_INVC[i], lc = TG__LOG_LOGC[i];
        double a, b;
        bucket(i, &a, &b);
        /* r at the bucket's ends (a . inv within a long double's rounding) */
        const long double ra = (long double)a * inv - 1, rb = (long double)b * inv - 1;
        if (i == 159 || i == 160) {
            cr_assert(inv == 1.0 && bits_of(lc) == 0, "bucket %d next to 1: %a, %a", i, inv, lc);
            continue;
        }
        cr_assert(fabsl(ra) < 0x1p-9L && fabsl(rb) < 0x1p-9L, "bucket %d: r %La .. %La", i, ra,
                  rb);
        /* 2^-10 ulp from the script, logl's own error under 2^-11 ulp of a double */
        const long double want = -logl((long double)inv);
        const long double ulp = ldexpl(1.0L, ilogb(lc) - 52);
        cr_assert(fabsl((long double)lc - want) <= 0x1p-9L * ulp, "bucket %d: logc %a, want %La",
                  i, lc, want);
    }
}

/* The sweep, rounded up to a multiple of 8 with ones; returns n. */
static int64_t sweep(double **out)
{
    enum { IN_BUCKET = 1500, AROUND_ONE = 200000, SUMS = 1 << 21, BITS = 1 << 21,
           SUBNORMAL = 1 << 17 };
    static const int ks[] = {0, 1, -1, 2, -2, 5, 20, 63, -64, 300, -700, 1022, -1022};
    const int nk = (int)(sizeof ks / sizeof *ks);
    const int64_t n = 256 * (nk * 14 + IN_BUCKET) + 2 * AROUND_ONE + 2 * 20 * 1024 + SUMS +
                      (1 << 20) + BITS + SUBNORMAL + 2098 * 3;
    double *x = malloc((size_t)(n + 8) * sizeof *x);
    uint64_t st = 77;
    int64_t i = 0;
    for (int b = 0; b < 256; b++) {
        double lo, hi;
        bucket(b, &lo, &hi);
        for (int k = 0; k < nk; k++)   /* both ends, 3 doubles each side, times 2^k */
            for (int e = 0; e < 2; e++) {
                double c = e ? hi : lo;
                for (int s = 0; s < 3; s++) c = nextafter(c, 0.0);
                for (int s = 0; s < 7; s++, c = nextafter(c, INFINITY)) x[i++] = ldexp(c, ks[k]);
            }
        for (int s = 0; s < IN_BUCKET; s++) {   /* inside, times 2^k for k in [-1022, 1023] */
            const uint64_t u = next_u64(&st);
            const double z = lo + (hi - lo) * ((double)(u >> 11) * 0x1p-53);
            x[i++] = ldexp(z, (int)(u % 2046) - 1022);
        }
    }
    double up = 1.0, down = 1.0;   /* 1 and the doubles next to it */
    for (int s = 0; s < AROUND_ONE; s++) {
        x[i++] = up, x[i++] = down;
        up = nextafter(up, 2.0), down = nextafter(down, 0.0);
    }
    for (int e = -60; e < -40; e++)   /* 1 +- j 2^e */
        for (int j = 1; j <= 1024; j++) x[i++] = 1.0 + ldexp(j, e), x[i++] = 1.0 - ldexp(j, e);
    for (int s = 0; s < SUMS; s++) {   /* sums of a row: [1, 2^20] */
        const uint64_t u = next_u64(&st);
        x[i++] = exp2((double)(u >> 11) * 0x1p-53 * 20.0);
    }
    for (int s = 1; s <= 1 << 20; s++) x[i++] = s;   /* sums of equal maxima */
    for (int s = 0; s < BITS; s++) {   /* any positive finite double */
        uint64_t u = next_u64(&st) >> 1;
        if ((u >> 52) == 0x7FF) u &= ~(1ull << 62);
        x[i++] = of_bits(u);
    }
    for (int s = 0; s < SUBNORMAL; s++) x[i++] = of_bits(next_u64(&st) >> 12 | 1);
    for (int e = -1074; e <= 1023; e++) {   /* powers of two and their neighbours */
        const double p = ldexp(1.0, e);
        x[i++] = p, x[i++] = nextafter(p, 0.0), x[i++] = nextafter(p, INFINITY);
    }
    cr_assert(eq(i64, i, n));
    for (int s = 0; s < 8; s++) x[n + s] = 1.0;
    *out = x;
    return n;
}

Test(log_simd, error_under_0_51_ulp_against_logl_in_every_width)
{
    double *x, *y;
    const int64_t n = sweep(&x);
    y = malloc((size_t)(n + 8) * sizeof *y);
    int widths = 0;
    for (int w = TG__EXP_PLAIN; w <= TG__EXP_AVX512; w++) {
        tg__exp_width_force(w);
        if (tg__exp_width_get() != (tg__exp_width)w) {
            th_not_run("the %s width of the log is not run: this CPU lacks it", WIDTH_NAMES[w]);
            continue;
        }
        widths++;
        memcpy(y, x, (size_t)(n + 8) * sizeof *y);
        tg__log_f64_inplace(y, n, (tg__exp_width)w);
        double worst = 0.0, at = 0.0;
        for (int64_t i = 0; i < n; i++) {
            const long double want = logl((long double)x[i]);
            if (want == 0.0L) {
                cr_assert(bits_of(y[i]) == 0, "log(%a) = %a, want +0", x[i], y[i]);
                continue;
            }
            int e;
            frexpl(want, &e);   /* |want| in [2^(e-1), 2^e): ulp 2^(e-53) */
            const double err = (double)(fabsl((long double)y[i] - want) / ldexpl(1.0L, e - 53));
            if (err > worst) worst = err, at = x[i];
        }
        cr_log_info("log_simd %s: largest error %.4f ulp at x=%a (%lld values)",
                    WIDTH_NAMES[w], worst, at, (long long)n);
        cr_assert(worst < 0.51, "%s: error %.4f ulp at x=%a", WIDTH_NAMES[w], worst, at);
    }
    tg__exp_width_force(0);
    cr_assert(widths >= 1, "no width ran");
    free(x), free(y);
}

Test(log_simd, every_width_gives_the_plain_bits)
{
    double *x, *want, *got;
    const int64_t n = sweep(&x);
    const size_t bytes = (size_t)(n + 8) * sizeof *x;
    want = malloc(bytes), got = malloc(bytes);
    memcpy(want, x, bytes);
    tg__log_f64_inplace(want, n, TG__EXP_PLAIN);
    int widths = 0;
    for (int w = TG__EXP_AVX2; w <= TG__EXP_AVX512; w++) {
        tg__exp_width_force(w);
        if (tg__exp_width_get() != (tg__exp_width)w) continue;
        widths++;
        memcpy(got, x, bytes);
        tg__log_f64_inplace(got, n, (tg__exp_width)w);
        for (int64_t i = 0; i < n; i++)
            cr_assert(bits_of(got[i]) == bits_of(want[i]), "%s x=%a: %a, plain %a",
                      WIDTH_NAMES[w], x[i], got[i], want[i]);
    }
    tg__exp_width_force(0);
    cr_log_info("log_simd: %d vector widths besides plain", widths);
    free(x), free(want), free(got);
}

/* 1 gives +0, +inf itself, +-0 -inf, anything negative and NaN NaN; the
 * smallest subnormal and the largest double their logs; each lane on its
 * own: a special value in one lane leaves the others' bits as they are in
 * a vector of normal values only (which takes the shorter form). */
Test(log_simd, special_values_lane_by_lane)
{
    const double in[8] = {1.0, INFINITY, 0.0, -0.0, -1.0, -INFINITY, NAN, 0x1p-1074};
    const double big[8] = {DBL_MAX, 2.0, 0.5, DBL_MIN, 3.0, 10.0, 1e300, 1e-300};
    for (int w = TG__EXP_PLAIN; w <= TG__EXP_AVX512; w++) {
        tg__exp_width_force(w);
        if (tg__exp_width_get() != (tg__exp_width)w) continue;
        for (int rot = 0; rot < 8; rot++) {   /* each value in each lane */
            double v[8], u[8];
            for (int l = 0; l < 8; l++) v[l] = in[(l + rot) % 8], u[l] = big[(l + rot) % 8];
            double mixed[8];   /* u's values but one special */
            for (int l = 0; l < 8; l++) mixed[l] = l == rot % 4 ? in[rot] : u[l];
            tg__log_f64_inplace(v, 8, (tg__exp_width)w);
            tg__log_f64_inplace(mixed, 8, (tg__exp_width)w);
            tg__log_f64_inplace(u, 8, (tg__exp_width)w);
            for (int l = 0; l < 8; l++)
                cr_assert(l == rot % 4 || bits_of(mixed[l]) == bits_of(u[l]),
                          "%s lane %d beside %a: %a, alone %a", WIDTH_NAMES[w], l, in[rot],
                          mixed[l], u[l]);
            for (int l = 0; l < 8; l++) {
                const int k = (l + rot) % 8;
                const char *wn = WIDTH_NAMES[w];
                if (k == 0) cr_assert(bits_of(v[l]) == 0, "%s log 1 = %a", wn, v[l]);
                if (k == 1) cr_assert(isinf(v[l]) && v[l] > 0, "%s log inf = %a", wn, v[l]);
                if (k == 2 || k == 3)
                    cr_assert(isinf(v[l]) && v[l] < 0, "%s log %a = %a", wn, in[k], v[l]);
                if (k >= 4 && k <= 6) cr_assert(isnan(v[l]), "%s log %a = %a", wn, in[k], v[l]);
                if (k == 7)
                    cr_assert(epsilon_eq(dbl, v[l], -744.44007192138126, 1e-13), "%s: %a", wn,
                              v[l]);
                const double want = (double)logl((long double)big[k]);
                cr_assert(epsilon_eq(dbl, u[l], want, 2.3e-16 * fabs(want)), "%s log %a = %a",
                          wn, big[k], u[l]);
            }
        }
    }
    tg__exp_width_force(0);
}
