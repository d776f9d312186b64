/* src/ops/clamp.c - clamp(x, lo, hi) = min(max(x, lo), hi), as torch.clamp;
 * a bound that is NaN is absent (torch's None).  NaN x stays NaN.
 *
 * The gradient passes where lo <= x <= hi (bounds included, as torch's
 * clamp_backward) and is 0 elsewhere and at NaN: g times a constant mask, a
 * product that can be differentiated again.
 *
 * An integer x with integral bounds stays an integer, as torch's with
 * Python int bounds: min(max(x, lo), hi) in x's dtype (src/ops/int_arith.c),
 * not recorded.  A bound must convert to x's dtype without torch's overflow
 * error (i8: [-128, 127]; u8: [-255, 255], a negative one wrapping, so
 * clamp(u8, -2, NaN) raises every element to 254, as torch's).  A
 * non-integral bound is refused: torch's result would be f32. */
#include <assert.h>
#include <math.h>

#include "ops/elementwise.h"
#include "ops/families.h"
#include "ops/pointwise_internal.h"
#include "tapegrad/ops.h"

typedef struct clamp_params {
    double lo, hi;   /* NaN: no bound */
} clamp_params;

static double clamp1(double x, const void *user)
{
    const clamp_params *p = user;
    if (!isnan(p->lo) && x < p->lo) x = p->lo;
    if (!isnan(p->hi) && x > p->hi) x = p->hi;
    return x;
}

static double inside(double x, const void *user)
{
    const clamp_params *p = user;
    bool ok = !isnan(x) && (isnan(p->lo) || x >= p->lo) && (isnan(p->hi) || x <= p->hi);
    return ok ? 1.0 : 0.0;
}

/* A bound for an integer x: integral (a Python int to torch), and one that
 * torch converts to x's dtype without its overflow error; into *v. */
static int int_bound(const char *arg, tg_dtype dt, double b, int64_t *v)
{
    TG_TRY(tg__scalar_as_int("clamp", arg, dt, b, v));
    return tg__int_in_dtype("clamp", arg, dt, *v);
}

static int clamp_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                         const void *params)
{
    const clamp_params *p = params;
    if (in[0] && !tg_dtype_is_float(in[0]->dtype)) {
        int64_t lo = 0, hi = 0;
        if (!isnan(p->lo)) TG_TRY(int_bound("lo", in[0]->dtype, p->lo, &lo));
        if (!isnan(p->hi)) TG_TRY(int_bound("hi", in[0]->dtype, p->hi, &hi));
        return tg__int_clamp(out, in[0], !isnan(p->lo), lo, !isnan(p->hi), hi);
    }
    TG_TRY(tg__ew_check_float("clamp", 0, in[0]));
    TG_TRY(tg__map_f64(out, in[0], in[0]->dtype, clamp1, params));
    if (ctx) tg__ctx_save(ctx, in[0]);
    return TG_OK;
}

static int clamp_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *x, *mask = NULL;
    TG_TRY(tg__ctx_saved(ctx, 0, &x));
    TG_TRY(tg__map_f64(&mask, x, g->dtype, inside, tg__ctx_params(ctx)));
    int rc = tg_mul(&gi[0], g, mask);
    tg_tensor_release(mask);
    return rc;
}

static const tg_op_schema clamp_op = {.name = "clamp", .arity = 1, .amp = TG_AMP_KEEP,
                                .forward = clamp_forward, .backward = clamp_backward,
                                .double_backward = true,
                                .vjp = "da = g where lo <= a <= hi, 0 outside"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__clamp_ops[] = {&clamp_op};
static_assert(sizeof tg__clamp_ops / sizeof tg__clamp_ops[0] == TG__clamp_N,
              "src/ops/families.h must count the clamp ops");

int tg_clamp(tg_tensor **out, tg_tensor *a, double lo, double hi)
{
    clamp_params prm = {.lo = lo, .hi = hi};
    if (a && !isnan(lo)) prm.lo = tg__scalar_in_dtype(a->dtype, lo);
    if (a && !isnan(hi)) prm.hi = tg__scalar_in_dtype(a->dtype, hi);
    tg_tensor *in[1] = {a};
    return tg_op_call(&clamp_op, out, 1, in, &prm, sizeof prm);
}
