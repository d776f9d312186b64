/* Counter-based random numbers: Philox-4x32-10 (Salmon et al., "Parallel
 * random numbers: as easy as 1, 2, 3", SC 2011).  Block b of a draw is
 * philox(counter = rng->counter + b, key = seed); every block gives four 32-bit
 * words, i.e. two 53-bit uniforms, so element k of a fill comes from block
 * k / 2, word pair k % 2, whatever the machine or thread count. */
#include <math.h>
#include <string.h>

#include "core/core.h"

#define TG__PHILOX_M0 0xD2511F53u
#define TG__PHILOX_M1 0xCD9E8D57u
#define TG__PHILOX_W0 0x9E3779B9u   /* golden ratio */
#define TG__PHILOX_W1 0xBB67AE85u   /* sqrt(3) - 1 */

void tg__philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        /* One round: two 32x32->64 multiplies, the high halves xored with
         * the other words and the key, then the Weyl sequence bumps the key. */
        uint64_t p0 = (uint64_t)TG__PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)TG__PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += TG__PHILOX_W0;
        k1 += TG__PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* The two uniforms in [0, 1) of block `block` of rng's stream: the top 53
 * bits of each 64-bit word pair, times 2^-53. */
static void tg__philox_uniform2(const tg_rng *rng, uint64_t block, double u[2])
{
    uint64_t c = rng->counter + block;
    uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), 0, 0};
    uint32_t key[2] = {(uint32_t)rng->seed, (uint32_t)(rng->seed >> 32)};
    uint32_t w[4];
    tg__philox4x32_10(ctr, key, w);
    u[0] = (double)((((uint64_t)w[0] << 32) | w[1]) >> 11) * 0x1p-53;
    u[1] = (double)((((uint64_t)w[2] << 32) | w[3]) >> 11) * 0x1p-53;
}

void tg_rng_init(tg_rng *rng, uint64_t seed)
{
    if (!rng) return;
    rng->seed = seed;
    rng->counter = 0;
}

double tg_rng_uniform(tg_rng *rng)
{
    if (!rng) return 0.0;
    double u[2];
    tg__philox_uniform2(rng, 0, u);
    rng->counter++;
    return u[0];
}

typedef enum { TG__DIST_UNIFORM, TG__DIST_NORMAL } tg__dist;

/* The largest value of float dtype dt below y (y representable in dt): one
 * step of the sign-magnitude bit pattern towards -inf. */
static double tg__step_down(tg_dtype dt, double y)
{
    if (dt == TG_F32) return nextafterf((float)y, -INFINITY);
    uint16_t h;
    tg_dtype_store(dt, &h, 0, y);
    if (y > 0) h--;
    else if (y == 0) h = 0x8001;   /* the smallest negative subnormal */
    else h++;
    return tg_dtype_load(dt, &h, 0);
}

/* Uniforms are drawn in f64; rounding lo + (hi - lo) u to a narrower float
 * dtype can land on hi itself, which U[lo, hi) excludes: move such a value
 * one step down (staying >= lo when the range allows it). */
static double tg__below_hi(tg_dtype dt, double v, double lo, double hi)
{
    if (dt == TG_F64 || !tg_dtype_is_float(dt) || !(hi > lo)) return v;
    uint32_t tmp[2];
    tg_dtype_store(dt, tmp, 0, v);
    double y = tg_dtype_load(dt, tmp, 0);
    if (y < hi) return v;
    double below = tg__step_down(dt, y);
    return below >= lo ? below : lo;
}

/* Fills t, in row-major order of its logical elements, with a*x + b where x
 * is U[0,1) or N(0,1) (for uniforms b = lo and values stay below hi);
 * advances the counter by the blocks used. */
static int tg__rand_fill(tg_tensor *t, tg_rng *rng, tg__dist dist, double a, double b, double hi)
{
    int64_t n = tg__numel(t->ndim, t->shape);
    double *buf = tg__malloc((size_t)n * sizeof *buf);
    if (!buf) return TG_ENOMEM;
    for (int64_t k = 0; k < n; k += 2) {
        double u[2], x[2];
        tg__philox_uniform2(rng, (uint64_t)k / 2, u);
        if (dist == TG__DIST_UNIFORM) {
            x[0] = u[0];
            x[1] = u[1];
        } else {
            /* Box-Muller: for U1 in (0, 1] and U2 in [0, 1),
             * sqrt(-2 ln U1) (cos 2 pi U2, sin 2 pi U2) are two independent
             * N(0, 1); 1 - u keeps log away from 0. */
            double r = sqrt(-2.0 * log(1.0 - u[0]));
            x[0] = r * cos(2.0 * M_PI * u[1]);
            x[1] = r * sin(2.0 * M_PI * u[1]);
        }
        for (int j = 0; j < 2 && k + j < n; j++) {
            buf[k + j] = a * x[j] + b;
            if (dist == TG__DIST_UNIFORM)
                buf[k + j] = tg__below_hi(t->dtype, buf[k + j], b, hi);
        }
    }
    tg__scatter(t, TG_F64, buf);
    free(buf);
    rng->counter += (uint64_t)(n + 1) / 2;
    tg__bump_version(t);
    return TG_OK;
}

int tg_tensor_rand_uniform(tg_tensor *t, tg_rng *rng, double lo, double hi)
{
    TG_CHECK(t != NULL && rng != NULL, TG_EINVAL, "tensor_rand_uniform: t and rng must not be NULL");
    TG_CHECK(tg_dtype_is_float(t->dtype), TG_EINVAL,
             "tensor_rand_uniform: t is %s; only float dtypes are drawn (as torch's uniform_)",
             tg_dtype_name(t->dtype));
    TG_CHECK(isfinite(lo) && isfinite(hi) && lo <= hi, TG_EINVAL,
             "tensor_rand_uniform: lo=%g, hi=%g must be finite with lo <= hi", lo, hi);
    return tg__rand_fill(t, rng, TG__DIST_UNIFORM, hi - lo, lo, hi);
}

/* A new tensor of dtype dt and shape drawn from N(0, 1) (normal) or
 * U[0, 1); fn names the public function in messages. */
static int tg__rand_new(const char *fn, tg_tensor **out, tg_dtype dt, int ndim,
                        const int64_t *shape, tg_rng *rng, bool normal)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", fn);
    TG_CHECK(rng != NULL, TG_EINVAL, "%s: rng must not be NULL", fn);
    TG_CHECK(tg_dtype_is_float(dt), TG_EINVAL,
             "%s: dtype %s; only float dtypes are drawn (as torch's %s)", fn, tg_dtype_name(dt),
             fn + strlen("tensor_"));
    tg_tensor *r = NULL;
    TG_TRY(tg_tensor_zeros(&r, dt, ndim, shape));
    int rc = normal ? tg_tensor_rand_normal(r, rng, 0.0, 1.0)
                    : tg_tensor_rand_uniform(r, rng, 0.0, 1.0);
    if (rc < 0) {
        tg_tensor_release(r);
        return rc;
    }
    *out = r;
    return TG_OK;
}

int tg_tensor_randn_like(tg_tensor **out, const tg_tensor *t, tg_rng *rng)
{
    TG_CHECK(t != NULL, TG_EINVAL, "tensor_randn_like: t must not be NULL");
    return tg__rand_new("tensor_randn_like", out, t->dtype, t->ndim, t->shape, rng, true);
}

int tg_tensor_randn(tg_tensor **out, tg_dtype dt, int ndim, const int64_t *shape, tg_rng *rng)
{
    return tg__rand_new("tensor_randn", out, dt, ndim, shape, rng, true);
}

int tg_tensor_rand(tg_tensor **out, tg_dtype dt, int ndim, const int64_t *shape, tg_rng *rng)
{
    return tg__rand_new("tensor_rand", out, dt, ndim, shape, rng, false);
}

int tg_tensor_rand_normal(tg_tensor *t, tg_rng *rng, double mean, double std)
{
    TG_CHECK(t != NULL && rng != NULL, TG_EINVAL, "tensor_rand_normal: t and rng must not be NULL");
    TG_CHECK(tg_dtype_is_float(t->dtype), TG_EINVAL,
             "tensor_rand_normal: t is %s; only float dtypes are drawn (as torch's normal_)",
             tg_dtype_name(t->dtype));
    TG_CHECK(isfinite(mean) && isfinite(std) && std >= 0, TG_EINVAL,
             "tensor_rand_normal: mean=%g, std=%g must be finite with std >= 0", mean, std);
    return tg__rand_fill(t, rng, TG__DIST_NORMAL, std, mean, INFINITY);
}
