/* src/ops/cumsum.c - cumsum(x, dim): the running sums of x along dim
 * (torch.cumsum), y[.., k, ..] = sum_{j <= k} x[.., j, ..].
 *
 * x is gathered row-major into one buffer, of double for a float x and of
 * int64 for an integer x (torch promotes integers to int64), and each line
 * along dim is summed in place: with O the extent of the dims before dim,
 * D dim's extent and I that of the dims after it, the buffer is (O, D, I)
 * and line (o, i) runs over k with stride I.  A float result is rounded
 * once per element from its double sum; integer sums wrap as torch's.
 *
 * cumsum is linear, and x[j] reaches every y[k] with k >= j, so
 *   dx[j] = sum_{k >= j} g[k] = flip(cumsum(flip(g))),
 * the reversed running sum, written with flip and cumsum itself:
 * differentiable to any order. */
#include <assert.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/shape_internal.h"
#include "tapegrad/ops.h"

typedef struct cumsum_params {
    int dim;   /* wrapped into [0, ndim); 0 for a 0-d x */
} cumsum_params;

/* The buffer (O, D, I) and its element type, split over o for the pool.
 * Within a slab of D I elements, element k's predecessor along dim is
 * k - I, so one pass over the slab in order adds each line's running sum. */
typedef struct cumsum_job {
    void *buf;
    bool ints;
    int64_t d, inner;
} cumsum_job;

static void cumsum_range(void *p, int64_t lo, int64_t hi)
{
    const cumsum_job *j = p;
    const int64_t line = j->d * j->inner;
    for (int64_t o = lo; o < hi; o++) {
        if (j->ints) {   /* unsigned, so that overflow wraps as torch's int64 */
            uint64_t *v = (uint64_t *)j->buf + o * line;
            for (int64_t k = j->inner; k < line; k++) v[k] += v[k - j->inner];
        } else {
            double *v = (double *)j->buf + o * line;
            for (int64_t k = j->inner; k < line; k++) v[k] += v[k - j->inner];
        }
    }
}

static int cumsum_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                          const void *params)
{
    (void)ctx;
    (void)n;
    const tg_tensor *x = in[0];
    const int dim = ((const cumsum_params *)params)->dim;
    const bool ints = !tg_dtype_is_float(x->dtype);
    const tg_dtype as = ints ? TG_I64 : TG_F64;
    tg_tensor *y = tg__tensor_uninit(ints ? TG_I64 : x->dtype, x->ndim, x->shape);
    if (!y) return TG_ENOMEM;
    const int64_t numel = tg__numel(x->ndim, x->shape);
    if (numel > 0) {
        cumsum_job j = {.ints = ints, .d = 1, .inner = 1};
        int64_t outer = 1;
        for (int d = 0; d < x->ndim; d++) {
            if (d < dim) outer *= x->shape[d];
            else if (d == dim) j.d = x->shape[d];
            else j.inner *= x->shape[d];
        }
        j.buf = tg__work_alloc((size_t)numel * 8);
        if (!j.buf) {
            tg_tensor_release(y);
            return TG_ENOMEM;
        }
        tg__gather(x, as, j.buf);
        tg__parallel_range(outer, numel > 32768, cumsum_range, &j);
        tg__scatter(y, as, j.buf);
        tg__work_free(j.buf);
    }
    *out = y;
    return TG_OK;
}

/* dx = flip(cumsum(flip(g, dim), dim), dim): the sums of g from each index on. */
static int cumsum_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const int dim = ((const cumsum_params *)tg_op_ctx_params(ctx))->dim;
    tg_tensor *f = NULL, *c = NULL;
    int rc;
    TG_TRY(tg_flip(&f, g, 1, &dim));
    TG_TRY_GOTO(tg_cumsum(&c, f, dim));
    rc = tg_flip(&gi[0], c, 1, &dim);
done:
    tg_tensor_release(f);
    tg_tensor_release(c);
    return rc;
}

/* FP32, as sum: a running sum accumulates rounding, so a half x inside an
 * autocast scope gives an f32 result (torch's CUDA autocast lists cumsum
 * as fp32). */
static const tg_op_schema cumsum_op = {
    .name = "cumsum", .arity = 1, .amp = TG_AMP_FP32, .forward = cumsum_forward,
    .backward = cumsum_backward, .double_backward = true,
    .vjp = "da = flip(cumsum(flip(g))) along dim"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__cumsum_ops[] = {&cumsum_op};
static_assert(sizeof tg__cumsum_ops / sizeof tg__cumsum_ops[0] == TG__cumsum_N,
              "src/ops/families.h must count the cumsum ops");

int tg_cumsum(tg_tensor **out, tg_tensor *x, int dim)
{
    TG_CHECK(out != NULL, TG_EINVAL, "cumsum: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "cumsum: x must not be NULL");
    cumsum_params p = {0};
    /* as torch, a 0-d x takes dim 0 or -1 (and its running sum is itself) */
    TG_TRY(tg__shape_wrap_dim("cumsum", "dim", dim, x->ndim > 0 ? x->ndim : 1, &p.dim));
    return tg_op_call(&cumsum_op, out, 1, (tg_tensor *[]){x}, &p, sizeof p);
}
