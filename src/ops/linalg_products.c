/* src/ops/linalg_products.c - torch's fixed-rank products, each a shape
 * check in front of the ops it is made of, so their gradients, of any
 * order, are matmul's (src/ops/matmul.c) and mul's:
 *   mm (n, m) x (m, p),  bmm (B, n, m) x (B, m, p) (no broadcasting),
 *   mv (n, m) x (m),  dot (n) . (n),  outer (n) x (m) = a[:, None] * b
 *   (of any dtypes, promoting as mul),
 *   addmm = beta * input + alpha * (m1 @ m2),  baddbmm = the same batched,
 * input broadcast to the product's shape. */
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/linalg_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"

/* TG_EINVAL unless t (named name) has nd dims. */
static int check_rank(const char *op, const char *name, const tg_tensor *t, int nd)
{
    char s[96];
    tg_shape_str(s, sizeof s, t->ndim, t->shape);
    TG_CHECK(t->ndim == nd, TG_EINVAL, "%s: %s is %s but must be %d-d", op, name, s, nd);
    return TG_OK;
}

/* Whether an autocast scope is open: mm, bmm, addmm and baddbmm are on
 * torch's lower_precision_fp list, so there their operands may have any
 * float dtypes (matmul casts them); mv and dot are not: they refuse mixed
 * dtypes and run in their operands' dtype. */
static bool in_autocast(void)
{
    tg_dtype scope;
    return tg__autocast_dtype(&scope);
}

/* The checks of a product of a (na dims) and b (nb dims): non-NULL, float
 * dtypes that match (any float dtypes under autocast when mixed_ok), the
 * ranks, a's last extent equal to b's contracted one (its first after the
 * batch dim), and for 3-d operands equal batch extents. */
static int check_product(const char *op, tg_tensor **out, const tg_tensor *a, int na,
                         const tg_tensor *b, int nb, bool mixed_ok)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(a != NULL && b != NULL, TG_EINVAL, "%s: the operands must not be NULL", op);
    if (mixed_ok && in_autocast()) {
        TG_TRY(tg__check_float_pair(op, "the first operand", a, "the first operand", a));
        TG_TRY(tg__check_float_pair(op, "the second operand", b, "the second operand", b));
        TG_TRY(tg__check_amp_dtypes(op, "the first operand", a, "the second", b));
    } else {
        TG_TRY(tg__check_float_pair(op, "the first operand", a, "the second", b));
    }
    TG_TRY(check_rank(op, "the first operand", a, na));
    TG_TRY(check_rank(op, "the second operand", b, nb));
    char sa[96], sb[96];
    tg_shape_str(sa, sizeof sa, a->ndim, a->shape);
    tg_shape_str(sb, sizeof sb, b->ndim, b->shape);
    const int64_t ka = a->shape[na - 1], kb = b->shape[nb == 3 ? 1 : 0];
    TG_CHECK(ka == kb, TG_ESHAPE, "%s: %s and %s cannot be multiplied: %lld and %lld differ",
             op, sa, sb, (long long)ka, (long long)kb);
    TG_CHECK(na < 3 || a->shape[0] == b->shape[0], TG_ESHAPE,
             "%s: %s and %s: batch sizes %lld and %lld differ (bmm does not broadcast)", op, sa,
             sb, (long long)a->shape[0], (long long)b->shape[0]);
    return TG_OK;
}

/* a @ b through matmul, after check_product.  Off torch's autocast list
 * (mixed_ok false: mv, dot), matmul runs with autocast suspended, so in
 * the operands' dtype, as torch's mv and dot (f32 stay f32 in a bf16 scope). */
static int product(const char *op, tg_tensor **out, tg_tensor *a, int na, tg_tensor *b, int nb,
                   bool mixed_ok)
{
    TG_TRY(check_product(op, out, a, na, b, nb, mixed_ok));
    tg__lib_enter();
    tg_tensor *y = NULL;
    bool suspended = false;
    if (!mixed_ok) suspended = tg__autocast_suspend(true);
    const int rc = tg_matmul(&y, a, b);
    if (!mixed_ok) tg__autocast_suspend(suspended);
    tg__lib_leave();
    if (rc >= 0) *out = y;
    return tg__scope_capture(out, rc);
}

int tg_mm(tg_tensor **out, tg_tensor *a, tg_tensor *b)
{
    return product("mm", out, a, 2, b, 2, true);
}

int tg_bmm(tg_tensor **out, tg_tensor *a, tg_tensor *b)
{
    return product("bmm", out, a, 3, b, 3, true);
}

int tg_mv(tg_tensor **out, tg_tensor *a, tg_tensor *v)
{
    return product("mv", out, a, 2, v, 1, false);
}

int tg_dot(tg_tensor **out, tg_tensor *a, tg_tensor *b)
{
    return product("dot", out, a, 1, b, 1, false);
}

int tg_outer(tg_tensor **out, tg_tensor *a, tg_tensor *b)
{
    const char *op = "outer";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(a != NULL && b != NULL, TG_EINVAL, "%s: the operands must not be NULL", op);
    TG_TRY(check_rank(op, "the first operand", a, 1));
    TG_TRY(check_rank(op, "the second operand", b, 1));
    /* mul's dtype rule, as torch's outer: mixed dtypes promote (f32 with
     * f64 gives f64, with bf16 f32), also under autocast. */
    tg_tensor *col = NULL, *row = NULL, *y = NULL;
    tg__lib_enter();
    int rc = tg_unsqueeze(&col, a, 1);
    if (rc >= 0) rc = tg_unsqueeze(&row, b, 0);
    if (rc >= 0) rc = tg_mul(&y, col, row);
    tg_tensor_release(col);
    tg_tensor_release(row);
    tg__lib_leave();
    if (rc >= 0) *out = y;
    return tg__scope_capture(out, rc);
}

/* *y = p + input filled with -0.0: p's values exactly (x + -0.0 = x, also
 * for x = -0.0 and NaN), and an edge through which input, broadcast to p,
 * gets torch's gradient of zeros at beta = 0 (masked_fill's gradient is g
 * where the mask is 0, so zeros, differentiable to any order). */
static int add_zero_edge(tg_tensor **y, tg_tensor *p, tg_tensor *input)
{
    tg_tensor *one = NULL, *z = NULL;
    int rc = tg_tensor_scalar(&one, TG_U8, 1);
    if (rc >= 0) rc = tg_masked_fill(&z, input, one, -0.0);
    if (rc >= 0) rc = tg_add(y, p, z);
    tg_tensor_release(one);
    tg_tensor_release(z);
    return rc;
}

/* beta * input + alpha * (m1 @ m2), the product's shape (nd dims) taking
 * input's by broadcasting one way.  beta = 0 leaves input's values out
 * (its NaN and infinities too, as torch), but an input that requires grad
 * still gets a gradient, of zeros, as torch's; alpha = 1 and beta = 1
 * multiply by nothing. */
static int add_product(const char *op, tg_tensor **out, tg_tensor *input, tg_tensor *m1,
                       tg_tensor *m2, int nd, double beta, double alpha)
{
    TG_TRY(check_product(op, out, m1, nd, m2, nd, true));
    TG_CHECK(input != NULL, TG_EINVAL, "%s: input must not be NULL", op);
    /* torch's baddbmm casts input to the product's dtype, as its addmm
     * does under autocast; addmm outside autocast refuses ("self and mat2
     * must have the same dtype"). */
    const bool cast_input = nd == 3 || in_autocast();
    if (!cast_input) {
        TG_TRY(tg__check_float_pair(op, "the first operand", m1, "input", input));
    } else {
        TG_TRY(tg__check_float_pair(op, "input", input, "input", input));
        /* addmm under autocast: autocast does not cast an f64 input */
        if (nd == 2) TG_TRY(tg__check_amp_dtypes(op, "the first operand", m1, "input", input));
    }
    int64_t shape[3];
    memcpy(shape, m1->shape, sizeof(int64_t) * (size_t)(nd - 1));
    shape[nd - 1] = m2->shape[nd - 1];
    bool fits = input->ndim <= nd;
    for (int d = 0; fits && d < input->ndim; d++) {
        const int64_t e = input->shape[input->ndim - 1 - d];
        fits = e == 1 || e == shape[nd - 1 - d];
    }
    char si[96], sp[96];
    tg_shape_str(si, sizeof si, input->ndim, input->shape);
    tg_shape_str(sp, sizeof sp, nd, shape);
    TG_CHECK(fits, TG_ESHAPE, "%s: input %s does not broadcast to the product's shape %s", op,
             si, sp);
    tg_tensor *p = NULL, *t = NULL, *s = NULL, *y = NULL, *in = NULL;
    tg__lib_enter();
    int rc = tg_matmul(&p, m1, m2);
    if (rc >= 0 && alpha != 1.0) {
        rc = tg_mul_scalar(&t, p, alpha);
        tg_tensor_release(p);
        p = rc >= 0 ? t : NULL;
    }
    const bool uses_input = beta != 0.0 || (tg_grad_enabled() && input->requires_grad);
    if (rc >= 0 && uses_input && input->dtype != p->dtype) {   /* cast_input */
        rc = tg_to_dtype(&in, input, p->dtype);
        input = in;
    }
    if (rc >= 0 && !uses_input) {
        y = p;
        p = NULL;
    } else if (rc >= 0 && beta == 0.0) {
        rc = add_zero_edge(&y, p, input);
    } else if (rc >= 0) {
        rc = beta == 1.0 ? TG_OK : tg_mul_scalar(&s, input, beta);
        if (rc >= 0) rc = tg_add(&y, beta == 1.0 ? input : s, p);
    }
    tg_tensor_release(p);
    tg_tensor_release(s);
    tg_tensor_release(in);
    tg__lib_leave();
    if (rc >= 0) *out = y;
    return tg__scope_capture(out, rc);
}

int tg_addmm(tg_tensor **out, tg_tensor *input, tg_tensor *m1, tg_tensor *m2, double beta,
             double alpha)
{
    return add_product("addmm", out, input, m1, m2, 2, beta, alpha);
}

int tg_baddbmm(tg_tensor **out, tg_tensor *input, tg_tensor *b1, tg_tensor *b2, double beta,
               double alpha)
{
    return add_product("baddbmm", out, input, b1, b2, 3, beta, alpha);
}
