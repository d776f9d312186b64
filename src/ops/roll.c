/* src/ops/roll.c - roll(x, shifts, dims): x with its elements moved
 * shifts[i] places along dims[i], those pushed past the end coming back at
 * the start (torch.roll), any dtype; without dims, the same over the
 * flattened x, the shape kept.
 *
 * With each shift taken mod its dim's extent D into s in [0, D),
 *   y[.., k, ..] = x[.., (k - s) mod D, ..],
 * so along a rolled dim the output's [s, D) is the input's [0, D - s) and
 * its [0, s) the input's [D - s, D): two runs.  The forward reads a
 * row-major x (a gathered copy when x is not contiguous) and recurses over
 * the dims up to the last rolled one; below it each pair of runs is one
 * memcpy.  A flattened roll is the same on x seen as one dim.
 *
 * roll is a permutation, so its gradient is g rolled back, by D - s along
 * each dim: differentiable to any order. */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/shape_internal.h"
#include "tapegrad/ops.h"

typedef struct roll_params {
    bool flat;                    /* roll the flattened x by shift[0] */
    int64_t shift[TG_MAX_DIMS];   /* per dim, in [0, extent) */
} roll_params;

/* The copy's geometry: extents, shifts and row-major byte strides of the
 * dims it walks; dims after `last` move as whole blocks. */
typedef struct roll_walk {
    int last;
    int64_t shape[TG_MAX_DIMS], shift[TG_MAX_DIMS], step[TG_MAX_DIMS];
} roll_walk;

static void roll_copy(const roll_walk *w, int d, char *dst, const char *src)
{
    const int64_t n = w->shape[d], s = w->shift[d], step = w->step[d];
    if (d == w->last) {   /* dst [s, n) <- src [0, n - s); dst [0, s) <- src [n - s, n) */
        memcpy(dst + s * step, src, (size_t)((n - s) * step));
        memcpy(dst, src + (n - s) * step, (size_t)(s * step));
        return;
    }
    for (int64_t k = 0; k < n; k++) {
        const int64_t from = k >= s ? k - s : k - s + n;
        roll_copy(w, d + 1, dst + k * step, src + from * step);
    }
}

static int roll_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    (void)ctx;
    (void)n;
    const tg_tensor *x = in[0];
    const roll_params *p = params;
    tg_tensor *y = tg__tensor_uninit(x->dtype, x->ndim, x->shape);
    if (!y) return TG_ENOMEM;
    const int64_t numel = tg__numel(x->ndim, x->shape), es = (int64_t)tg_dtype_size(x->dtype);
    if (numel == 0) {
        *out = y;
        return TG_OK;
    }
    const char *src = (const char *)x->storage->data + x->offset * es;
    void *copy = NULL;
    if (!tg__shape_is_contiguous(x)) {
        copy = tg__work_alloc((size_t)(numel * es));
        if (!copy) {
            tg_tensor_release(y);
            return TG_ENOMEM;
        }
        tg__gather(x, x->dtype, copy);
        src = copy;
    }
    roll_walk w = {.last = 0, .shape = {numel}, .shift = {p->flat ? p->shift[0] : 0},
                   .step = {es}};
    if (!p->flat && x->ndim > 0) {
        w.last = 0;
        for (int d = 0; d < x->ndim; d++) {
            w.shape[d] = x->shape[d];
            w.shift[d] = p->shift[d];
            if (p->shift[d] != 0) w.last = d;
        }
        int64_t block = es;   /* the dims after last move together */
        for (int d = x->ndim - 1; d > w.last; d--) block *= x->shape[d];
        for (int d = w.last; d >= 0; d--) {
            w.step[d] = block;
            block *= x->shape[d];
        }
    }
    roll_copy(&w, 0, y->storage->data, src);
    tg__work_free(copy);
    *out = y;
    return TG_OK;
}

/* d roll(x, s) = roll(g, -s): each shift s becomes D - s (0 stays 0). */
static int roll_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const roll_params *p = tg_op_ctx_params(ctx);
    int64_t back[TG_MAX_DIMS];
    int dims[TG_MAX_DIMS];
    const int nd = p->flat ? 0 : g->ndim;
    const int64_t numel = tg__numel(g->ndim, g->shape);
    if (p->flat) back[0] = p->shift[0] == 0 ? 0 : numel - p->shift[0];
    for (int d = 0; d < nd; d++) {
        dims[d] = d;
        back[d] = p->shift[d] == 0 ? 0 : g->shape[d] - p->shift[d];
    }
    if (!p->flat && nd == 0) back[0] = 0;   /* a 0-d g: the flattened roll by 0 */
    return tg_roll(&gi[0], g, nd, back, dims);
}

static const tg_op_schema roll_op = {.name = "roll", .arity = 1, .amp = TG_AMP_KEEP,
                                     .forward = roll_forward, .backward = roll_backward,
                                     .double_backward = true,
                                     .vjp = "da = roll(g) by -shifts along the same dims"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__roll_ops[] = {&roll_op};
static_assert(sizeof tg__roll_ops / sizeof tg__roll_ops[0] == TG__roll_N,
              "src/ops/families.h must count the roll ops");

/* s mod n in [0, n), for any int64 s (0 when n is 0). */
static int64_t wrap_shift(int64_t s, int64_t n)
{
    if (n == 0) return 0;
    const int64_t r = s % n;
    return r < 0 ? r + n : r;
}

int tg_roll(tg_tensor **out, tg_tensor *x, int n, const int64_t *shifts, const int *dims)
{
    TG_CHECK(out != NULL, TG_EINVAL, "roll: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "roll: x must not be NULL");
    TG_CHECK(shifts != NULL, TG_EINVAL, "roll: shifts must not be NULL (one shift at least)");
    TG_CHECK(n >= 0 && n <= TG_MAX_DIMS, TG_EINVAL, "roll: n=%d must be in [0, %d]", n,
             TG_MAX_DIMS);
    TG_CHECK(n == 0 || dims != NULL, TG_EINVAL, "roll: dims is NULL with n=%d (n=0 rolls the "
             "flattened x by shifts[0])", n);
    roll_params p;
    memset(&p, 0, sizeof p);
    if (n == 0) {
        p.flat = true;
        p.shift[0] = wrap_shift(shifts[0], tg__numel(x->ndim, x->shape));
    }
    /* as torch, a 0-d x has no dim to name (only the flattened roll), and a
     * dim named twice is rolled by the sum of its shifts */
    TG_CHECK(n == 0 || x->ndim > 0, TG_EINVAL, "roll: x is 0-d and has no dims[0]=%d to roll "
             "along (n=0 rolls the flattened x)", n > 0 ? dims[0] : 0);
    for (int i = 0; i < n; i++) {
        char arg[32];
        int d;
        snprintf(arg, sizeof arg, "dims[%d]", i);
        TG_TRY(tg__shape_wrap_dim("roll", arg, dims[i], x->ndim, &d));
        const int64_t ext = x->shape[d];
        p.shift[d] = wrap_shift(p.shift[d] + wrap_shift(shifts[i], ext), ext);
    }
    return tg_op_call(&roll_op, out, 1, (tg_tensor *[]){x}, &p, sizeof p);
}
