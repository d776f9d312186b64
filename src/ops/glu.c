/* src/ops/glu.c - glu (F.glu): x split in halves a, b along dim, out =
 * a * sigmoid(b), half x's extent along dim.
 *
 * The value is a * sigmoid(b) in double, rounded once (f32 arithmetic for
 * bf16 and f16, rounded once, as torch's bf16 kernel).  The gradient is
 * torch's glu_backward, in its order of products, each product an op of x's
 * dtype (torch's bf16 backward rounds each one too):
 *   da = s * g,  db = (1 - s) * s * a * g,  s = sigmoid(b),
 * dx their concatenation along dim, built from slice, sigmoid, rsub_scalar,
 * mul and cat, so it is differentiable again. */
#include <assert.h>
#include <math.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/elementwise.h"
#include "ops/families.h"
#include "ops/shape_internal.h"
#include "tapegrad/ops.h"

typedef struct glu_params {
    int dim;   /* as given; wrapped by glu_shape */
} glu_params;

/* sigmoid(x) with e = exp(-|x|) <= 1, as activation.c's: no overflow. */
static inline double sigmoid_d(double x)
{
    double e = exp(-fabs(x));
    return x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

TG_EW_BINARY_KERNEL(k_glu, (double)a * sigmoid_d(b))

static int glu_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                     int *ndim, int64_t *shape)
{
    (void)n;
    const tg_tensor *x = in[0];
    int d;
    TG_TRY(tg__ew_check_float("glu", 0, x));
    TG_CHECK(x->ndim > 0, TG_EINVAL, "glu: x must have at least 1 dim (a 0-d x cannot be "
             "halved)");
    TG_TRY(tg__shape_wrap_dim("glu", "dim", ((const glu_params *)params)->dim, x->ndim, &d));
    TG_CHECK(x->shape[d] % 2 == 0, TG_ESHAPE, "glu: x's extent along dim %d is %lld; it must "
             "be even (halved into a and b)", d, (long long)x->shape[d]);
    *dtype = x->dtype;
    *ndim = x->ndim;
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[d] /= 2;
    return TG_OK;
}

/* *a and *b: the halves of x along dim (views), dim wrapped. */
static int halves(tg_tensor *x, int dim, tg_tensor **a, tg_tensor **b)
{
    int d;
    TG_TRY(tg__shape_wrap_dim("glu", "dim", dim, x->ndim, &d));
    const int64_t h = x->shape[d] / 2;
    TG_TRY(tg_slice(a, x, d, 0, h, 1));
    int rc = tg_slice(b, x, d, h, 2 * h, 1);
    if (rc < 0) {
        tg_tensor_release(*a);
        *a = NULL;
    }
    return rc;
}

static int glu_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    (void)n;
    tg_tensor *a = NULL, *b = NULL;
    TG_TRY(halves(in[0], ((const glu_params *)params)->dim, &a, &b));
    int rc = tg__ew_binary("glu", out, a, b, k_glu, 0.0);
    tg_tensor_release(a);
    tg_tensor_release(b);
    if (rc >= 0 && ctx) tg__ctx_save(ctx, in[0]);
    return rc;
}

static int glu_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    enum { N = 8 };
    const int dim = ((const glu_params *)tg__ctx_params(ctx))->dim;
    tg_tensor *x, *t[N] = {NULL};
    int rc;
    TG_TRY(tg__ctx_saved(ctx, 0, &x));
    TG_TRY_GOTO(halves(x, dim, &t[0], &t[1]));   /* a, b */
    TG_TRY_GOTO(tg_sigmoid(&t[2], t[1]));       /* s */
    TG_TRY_GOTO(tg_mul(&t[3], t[2], g));        /* da */
    TG_TRY_GOTO(tg_rsub_scalar(&t[4], t[2], 1.0));
    TG_TRY_GOTO(tg_mul(&t[5], t[4], t[2]));
    TG_TRY_GOTO(tg_mul(&t[6], t[5], t[0]));
    TG_TRY_GOTO(tg_mul(&t[7], t[6], g));        /* db */
    TG_TRY_GOTO(tg_cat(&gi[0], 2, (tg_tensor *[]){t[3], t[7]}, dim < 0 ? dim + x->ndim : dim));
done:
    for (int i = 0; i < N; i++) tg_tensor_release(t[i]);
    return rc;
}

static const tg_op_schema glu_op = {.name = "glu", .arity = 1, .amp = TG_AMP_KEEP,
                                    .forward = glu_forward, .backward = glu_backward,
                                    .shape = glu_shape, .double_backward = true,
                                    .vjp = "da = g * s, db = g * a * s (1 - s), s = sigmoid(b), "
                                           "[a, b] = halves of x along dim"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__glu_ops[] = {&glu_op};
static_assert(sizeof tg__glu_ops / sizeof tg__glu_ops[0] == TG__glu_N,
              "src/ops/families.h must count the glu ops");

int tg_glu(tg_tensor **out, tg_tensor *x, int dim)
{
    TG_CHECK(out != NULL, TG_EINVAL, "glu: out must not be NULL");
    glu_params p = {.dim = dim};
    return tg_op_call(&glu_op, out, 1, (tg_tensor *[]){x}, &p, sizeof p);
}
