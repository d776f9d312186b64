/* src/ops/tril.c - tril(x, diagonal) and triu(x, diagonal) (torch.tril,
 * torch.triu), any dtype: a copy of x with each matrix of its last two dims
 * (R, C) zeroed above or below a diagonal.
 *
 * Element (i, j) lies on diagonal j - i.  tril keeps j - i <= diagonal, so
 * row i is zeroed from column i + diagonal + 1 on; triu keeps j - i >=
 * diagonal, so row i is zeroed before column i + diagonal.  Both are
 * masks, linear in x: the backward is the same mask of g (tril of g for
 * tril), so every order of derivative works. */
#include <assert.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "tapegrad/ops.h"

typedef struct tri_params {
    int64_t diagonal;
    bool upper;   /* triu */
} tri_params;

static int tri_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    (void)ctx;
    (void)n;
    const tg_tensor *x = in[0];
    const tri_params *p = params;
    tg_tensor *y = tg__tensor_uninit(x->dtype, x->ndim, x->shape);
    if (!y) return TG_ENOMEM;
    const int64_t R = x->shape[x->ndim - 2], C = x->shape[x->ndim - 1];
    const int64_t numel = tg__numel(x->ndim, x->shape);
    if (numel > 0) {
        tg__gather(x, x->dtype, y->storage->data);
        /* the diagonal clamped to [-R, C] names the same columns, without
         * overflow in i + diagonal */
        const int64_t dg = p->diagonal < -R ? -R : p->diagonal > C ? C : p->diagonal;
        const size_t es = tg_dtype_size(x->dtype);
        char *base = y->storage->data;
        for (int64_t m = 0; m < numel / (R * C); m++)
            for (int64_t i = 0; i < R; i++) {
                char *row = base + (size_t)((m * R + i) * C) * es;
                int64_t lo = p->upper ? 0 : i + dg + 1, hi = p->upper ? i + dg : C;
                lo = lo < 0 ? 0 : lo > C ? C : lo;
                hi = hi < 0 ? 0 : hi > C ? C : hi;
                if (hi > lo) memset(row + (size_t)lo * es, 0, (size_t)(hi - lo) * es);
            }
    }
    *out = y;
    return TG_OK;
}

/* The mask is linear: d tril(x) = tril(g), d triu(x) = triu(g). */
static int tri_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const tri_params *p = tg__ctx_params(ctx);
    return p->upper ? tg_triu(&gi[0], g, p->diagonal) : tg_tril(&gi[0], g, p->diagonal);
}

static const tg_op_schema tril_op = {.name = "tril", .arity = 1, .amp = TG_AMP_KEEP,
                                     .forward = tri_forward, .backward = tri_backward,
                                     .double_backward = true,
                                     .vjp = "da = tril(g) with the same diagonal"};
static const tg_op_schema triu_op = {.name = "triu", .arity = 1, .amp = TG_AMP_KEEP,
                                     .forward = tri_forward, .backward = tri_backward,
                                     .double_backward = true,
                                     .vjp = "da = triu(g) with the same diagonal"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__tril_ops[] = {&tril_op, &triu_op};
static_assert(sizeof tg__tril_ops / sizeof tg__tril_ops[0] == TG__tril_N,
              "src/ops/families.h must count the tril ops");

static int tri_call(const char *op, const tg_op_schema *s, tg_tensor **out, tg_tensor *x,
                    int64_t diagonal, bool upper)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    char sx[96];
    tg_shape_str(sx, sizeof sx, x->ndim, x->shape);
    TG_CHECK(x->ndim >= 2, TG_ESHAPE, "%s: x is %s but must have at least 2 dims", op, sx);
    tri_params p;
    memset(&p, 0, sizeof p);
    p.diagonal = diagonal;
    p.upper = upper;
    return tg_op_call(s, out, 1, (tg_tensor *[]){x}, &p, sizeof p);
}

int tg_tril(tg_tensor **out, tg_tensor *x, int64_t diagonal)
{
    return tri_call("tril", &tril_op, out, x, diagonal, false);
}

int tg_triu(tg_tensor **out, tg_tensor *x, int64_t diagonal)
{
    return tri_call("triu", &triu_op, out, x, diagonal, true);
}
