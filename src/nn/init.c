/* src/nn/init.c - torch.nn.init for tensors (tapegrad/init.h): gains, fans
 * and the fills built on tg_tensor_rand_uniform / tg_tensor_rand_normal.
 *
 * Each fill checks everything before it writes, under its own name, and
 * then hands the bounds or the standard deviation, computed with torch's
 * formulas in double, to one draw:
 *   xavier:  std = gain sqrt(2 / (fan_in + fan_out)),  bound = sqrt(3) std
 *   kaiming: std = gain / sqrt(fan),                   bound = sqrt(3) std */
#include <math.h>

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
