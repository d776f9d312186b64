/* src/ops/addcmul.c - addcmul(x, t1, t2, value) = x + value t1 t2 and
 * addcdiv(x, t1, t2, value) = x + value t1 / t2 (torch.addcmul,
 * torch.addcdiv), the three tensors broadcast together, and square(x) =
 * x x (torch.square).
 *
 * Floats as torch 1.13's CPU kernels, bit for bit: addcmul is
 * fma(value t1, t2, x), the product value t1 rounded and the rest fused
 * (one rounding), and addcdiv x + (value t1) / t2, three roundings; value
 * is rounded to f32 for f32, bf16 and f16, and f16 and bf16 are computed in
 * f32 and rounded once at the end (torch 1.13 has no f16 kernel on the
 * CPU).  Mixed float dtypes are promoted as tg_add's; an integer operand
 * with a float one is converted to the float's dtype first.  Three integer
 * tensors stay integers (addcmul only; value integral), wrapping modulo
 * 2^bits as tg_mul and tg_add.  addcdiv of two integer t1 and t2 is
 * refused, as torch's.
 *
 * Gradients, as torch's derivatives, with differentiable ops (so to any
 * order), each summed back to its input's shape:
 *   addcmul: dx = g, dt1 = g (t2 value), dt2 = g (t1 value);
 *   addcdiv: dx = g, dt1 = g (value / t2),
 *            dt2 = -g ((value t1) / (t2 t2)). */
#include <assert.h>
#include <math.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/elementwise.h"
#include "ops/families.h"
#include "tapegrad/ops.h"

typedef struct addc_params {
    double value;
} addc_params;

static const char *const ADDC_NAMES[2] = {"addcmul", "addcdiv"};
static const char *const ARG_NAMES[3] = {"input", "tensor1", "tensor2"};

/* The float dtype of the result when some input is a float: the
 * promotion of the float inputs with dims, or of all of them when every
 * float input is 0-d (tg_add's rule). */
static tg_dtype float_dtype(tg_tensor *const *in)
{
    bool dims = false, any = false;
    tg_dtype dt = TG_F32;
    for (int i = 0; i < 3; i++) dims |= tg_dtype_is_float(in[i]->dtype) && in[i]->ndim > 0;
    for (int i = 0; i < 3; i++) {
        if (!tg_dtype_is_float(in[i]->dtype) || (dims && in[i]->ndim == 0)) continue;
        dt = any ? tg_promote_dtypes(dt, in[i]->dtype) : in[i]->dtype;
        any = true;
    }
    return dt;
}

/* res (contiguous, shape (nd, shape), n elements) = the op on eff, all of
 * float dtype res->dtype, in its compute dtype. */
static int addc_float(bool div, tg_tensor *res, int nd, const int64_t *shape, int64_t n,
                      tg_tensor *const *eff, double value)
{
    const tg_dtype dt = res->dtype, cdt = tg__compute_dtype(dt);
    const void *p[3] = {NULL, NULL, NULL};
    void *own[3] = {NULL, NULL, NULL};
    void *dst = cdt == dt ? tg_tensor_data(res) : tg__work_alloc((size_t)n * 4);
    int rc = dst ? TG_OK : TG_ENOMEM;
    for (int i = 0; i < 3 && rc == TG_OK; i++)
        rc = tg__ew_input(eff[i], cdt, nd, shape, n, &p[i], &own[i]);
    if (rc == TG_OK && cdt == TG_F64) {
        const double *x = p[0], *a = p[1], *b = p[2];
        double *o = dst;
        for (int64_t i = 0; i < n; i++)
            o[i] = div ? x[i] + value * a[i] / b[i] : fma(value * a[i], b[i], x[i]);
    } else if (rc == TG_OK) {
        const float *x = p[0], *a = p[1], *b = p[2], v = (float)value;
        float *o = dst;
        for (int64_t i = 0; i < n; i++)
            o[i] = div ? x[i] + v * a[i] / b[i] : fmaf(v * a[i], b[i], x[i]);
        if (cdt != dt) tg__f32_to_half_n(dt, dst, tg_tensor_data(res), n, true);
    }
    for (int i = 0; i < 3; i++) tg__work_free(own[i]);
    if (cdt != dt) tg__work_free(dst);
    return rc;
}

/* Three integers: x + (t1 value) t2 with tg_mul_scalar, tg_mul and tg_add's
 * wrapping integer arithmetic. */
static int addcmul_int(tg_tensor **out, tg_tensor *const *in, double value)
{
    int64_t v;
    TG_TRY(tg__scalar_as_int("addcmul", "value", in[1]->dtype, value, &v));
    tg_tensor *t = NULL, *u = NULL;
    int rc;
    TG_TRY_GOTO(tg_mul_scalar(&t, in[1], (double)v));
    TG_TRY_GOTO(tg_mul(&u, t, in[2]));
    TG_TRY_GOTO(tg_add(out, in[0], u));
done:
    tg_tensor_release(t);
    tg_tensor_release(u);
    return rc;
}

static int addc_forward(bool div, tg_ctx *ctx, tg_tensor **out, tg_tensor *const *in,
                        const addc_params *p)
{
    const char *op = ADDC_NAMES[div];
    for (int i = 0; i < 3; i++)
        TG_CHECK(in[i] != NULL, TG_EINVAL, "%s: %s must not be NULL", op, ARG_NAMES[i]);
    const bool f1 = tg_dtype_is_float(in[1]->dtype), f2 = tg_dtype_is_float(in[2]->dtype);
    TG_CHECK(!div || f1 || f2, TG_EDTYPE,
             "%s: tensor1 (%s) and tensor2 (%s) are both integers: integer division is "
             "refused, as torch's; use (input + value * tensor1 / tensor2) with tg_div", op,
             tg_dtype_name(in[1]->dtype), tg_dtype_name(in[2]->dtype));
    if (!f1 && !f2 && !tg_dtype_is_float(in[0]->dtype)) return addcmul_int(out, in, p->value);
    int nd, nd2;
    int64_t s2[TG_MAX_DIMS], shape[TG_MAX_DIMS];
    TG_TRY(tg__broadcast_shapes(op, in[0]->ndim, in[0]->shape, in[1]->ndim, in[1]->shape, &nd2,
                                s2));
    TG_TRY(tg__broadcast_shapes(op, nd2, s2, in[2]->ndim, in[2]->shape, &nd, shape));
    const tg_dtype dt = float_dtype(in);
    tg_tensor *eff[3] = {in[0], in[1], in[2]}, *conv[3] = {NULL, NULL, NULL}, *res = NULL;
    int rc = TG_OK;
    for (int i = 0; i < 3 && rc == TG_OK; i++)
        if (in[i]->dtype != dt) {
            rc = tg_to_dtype(&conv[i], in[i], dt);
            eff[i] = conv[i];
        }
    if (rc == TG_OK) {
        res = tg__tensor_uninit(dt, nd, shape);
        rc = res ? TG_OK : TG_ENOMEM;
    }
    const int64_t n = tg__numel(nd, shape);
    if (rc == TG_OK && n > 0) rc = addc_float(div, res, nd, shape, n, eff, p->value);
    if (rc == TG_OK && ctx) {
        /* dt1 reads t2; dt2 reads t1 (and t2 for addcdiv) */
        tg__ctx_save_if(ctx, eff[1], tg__ctx_needs_grad(ctx, 2));
        tg__ctx_save_if(ctx, eff[2], tg__ctx_needs_grad(ctx, 1) ||
                                         (div && tg__ctx_needs_grad(ctx, 2)));
    }
    for (int i = 0; i < 3; i++) tg_tensor_release(conv[i]);
    if (rc < 0) {
        tg_tensor_release(res);
        return rc;
    }
    *out = res;
    return TG_OK;
}

/* value as a 0-d tensor of t's dtype (torch's wrapped number). */
static int value_tensor(tg_tensor **out, const tg_tensor *t, double value)
{
    return tg_tensor_scalar(out, t->dtype, tg__scalar_in_dtype(t->dtype, value));
}

/* *gi = g times the derivative for input i (1 or 2), as the header says. */
static int addc_grad(bool div, tg_ctx *ctx, int i, tg_tensor *g, double value, tg_tensor **gi)
{
    tg_tensor *t1 = NULL, *t2 = NULL, *k[4] = {NULL, NULL, NULL, NULL};
    int rc;
    if (i == 1 || div) TG_TRY_GOTO(tg__ctx_saved(ctx, 1, &t2));
    if (i == 2) TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &t1));
    if (!div) {
        TG_TRY_GOTO(tg_mul_scalar(&k[0], i == 1 ? t2 : t1, value));
        TG_TRY_GOTO(tg_mul(gi, g, k[0]));
    } else if (i == 1) {
        TG_TRY_GOTO(value_tensor(&k[0], t2, value));
        TG_TRY_GOTO(tg_div(&k[1], k[0], t2));
        TG_TRY_GOTO(tg_mul(gi, g, k[1]));
    } else {
        TG_TRY_GOTO(tg_mul_scalar(&k[0], t1, value));
        TG_TRY_GOTO(tg_mul(&k[1], t2, t2));
        TG_TRY_GOTO(tg_div(&k[2], k[0], k[1]));
        TG_TRY_GOTO(tg_neg(&k[3], g));
        TG_TRY_GOTO(tg_mul(gi, k[3], k[2]));
    }
done:
    for (int j = 0; j < 4; j++) tg_tensor_release(k[j]);
    return rc;
}

static int addc_backward(bool div, tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const double value = ((const addc_params *)tg__ctx_params(ctx))->value;
    int rc = TG_OK;
    for (int i = 0; i < 3 && rc == TG_OK; i++) {
        if (!tg__ctx_needs_grad(ctx, i)) continue;
        tg_tensor *t = NULL, *s = NULL;
        rc = i == 0 ? (t = tg_tensor_retain(g), TG_OK) : addc_grad(div, ctx, i, g, value, &t);
        if (rc == TG_OK) rc = tg__ew_grad_to_input(ctx, i, &t, &s);
        /* an input of another float dtype than the result's (a 0-d one) */
        const tg_dtype want = tg__ctx_input_meta(ctx, i)->dtype;
        if (rc == TG_OK && s->dtype != want) {
            rc = tg_to_dtype(&gi[i], s, want);
            tg_tensor_release(s);
        } else if (rc == TG_OK) {
            gi[i] = s;
        }
    }
    if (rc < 0)
        for (int i = 0; i < 3; i++) {
            tg_tensor_release(gi[i]);
            gi[i] = NULL;
        }
    return rc;
}

static int addcmul_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                           const void *params)
{
    return addc_forward(false, ctx, out, in, params);
}

static int addcdiv_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                           const void *params)
{
    return addc_forward(true, ctx, out, in, params);
}

static int addcmul_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return addc_backward(false, ctx, g, gi);
}

static int addcdiv_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return addc_backward(true, ctx, g, gi);
}

static const tg_op_schema addcmul_op = {
    .name = "addcmul", .arity = 3, .amp = TG_AMP_PROMOTE, .forward = addcmul_forward,
    .backward = addcmul_backward, .double_backward = true,
    .vjp = "da = g, db = g * c * s, dc = g * b * s", .scalar = "s"};
static const tg_op_schema addcdiv_op = {
    .name = "addcdiv", .arity = 3, .amp = TG_AMP_PROMOTE, .forward = addcdiv_forward,
    .backward = addcdiv_backward, .double_backward = true,
    .vjp = "da = g, db = g * s / c, dc = -g * s * b / c^2", .scalar = "s"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__addcmul_ops[] = {&addcmul_op, &addcdiv_op};
static_assert(sizeof tg__addcmul_ops / sizeof tg__addcmul_ops[0] == TG__addcmul_N,
              "src/ops/families.h must count the addcmul ops");

static int call3(const tg_op_schema *op, tg_tensor **out, tg_tensor *x, tg_tensor *t1,
                 tg_tensor *t2, double value)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op->name);
    addc_params p = {.value = value};
    return tg_op_call(op, out, 3, (tg_tensor *[]){x, t1, t2}, &p, sizeof p);
}

int tg_addcmul(tg_tensor **out, tg_tensor *input, tg_tensor *t1, tg_tensor *t2, double value)
{
    return call3(&addcmul_op, out, input, t1, t2, value);
}

int tg_addcdiv(tg_tensor **out, tg_tensor *input, tg_tensor *t1, tg_tensor *t2, double value)
{
    return call3(&addcdiv_op, out, input, t1, t2, value);
}

int tg_square(tg_tensor **out, tg_tensor *x)
{
    TG_CHECK(out != NULL, TG_EINVAL, "square: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "square: x must not be NULL");
    return tg_mul(out, x, x);
}
