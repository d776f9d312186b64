/* tests/test_shape_grad.c - the gradients of the shape ops and reductions
 * (the reductions' values are in test_reduce.c): gradcheck in f64 of each,
 * and of cat, and slice's gradient by index arithmetic. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"
#include "tapegrad/tensor.h"

/* ---- gradients ------------------------------------------------------------------ */

typedef int (*op1_fn)(tg_tensor **out, tg_tensor *x);
/* Function pointers travel through gradcheck's void *user inside a struct. */
typedef struct op1_box {
    op1_fn f;
} op1_box;

static int g_reshape(tg_tensor **out, tg_tensor *x)
{
    /* Through a transpose, so the reshape has to copy. */
    tg_tensor *t = NULL;
    TG_TRY(tg_transpose(&t, x, 0, 1));
    int rc = tg_reshape(out, t, 2, (int64_t[]){2, -1});
    tg_tensor_release(t);
    return rc;
}
static int g_permute(tg_tensor **out, tg_tensor *x) { return tg_permute(out, x, (int[]){1, 0}); }
static int g_transpose(tg_tensor **out, tg_tensor *x) { return tg_transpose(out, x, -1, 0); }
static int g_slice(tg_tensor **out, tg_tensor *x) { return tg_slice(out, x, 1, -3, 10, 2); }
static int g_expand(tg_tensor **out, tg_tensor *x)
{
    tg_tensor *t = NULL;
    TG_TRY(tg_slice(&t, x, 1, 0, 1, 1));   /* (3, 1) */
    int rc = tg_expand(out, t, 3, (int64_t[]){2, 3, 4});
    tg_tensor_release(t);
    return rc;
}
static int g_unsqueeze(tg_tensor **out, tg_tensor *x) { return tg_unsqueeze(out, x, 1); }
static int g_squeeze(tg_tensor **out, tg_tensor *x)
{
    tg_tensor *t = NULL;
    TG_TRY(tg_slice(&t, x, 0, 1, 2, 1));   /* (1, 4) */
    int rc = tg_squeeze(out, t, 0);
    tg_tensor_release(t);
    return rc;
}
static int g_contiguous(tg_tensor **out, tg_tensor *x)
{
    tg_tensor *t = NULL;
    TG_TRY(tg_transpose(&t, x, 0, 1));
    int rc = tg_contiguous(out, t);
    tg_tensor_release(t);
    return rc;
}
static int g_sum(tg_tensor **out, tg_tensor *x) { return tg_sum(out, x); }
static int g_mean(tg_tensor **out, tg_tensor *x) { return tg_mean(out, x); }
static int g_sum_dims(tg_tensor **out, tg_tensor *x) { return tg_sum_dims(out, x, 1, (int[]){0}, false); }
static int g_mean_dims(tg_tensor **out, tg_tensor *x) { return tg_mean_dims(out, x, 1, (int[]){-1}, true); }
static int g_sum_to_shape(tg_tensor **out, tg_tensor *x)
{
    return tg_sum_to_shape(out, x, 2, (int64_t[]){1, 4});
}

static int run1(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return ((const op1_box *)user)->f(out, in[0]);
}

/* op(x) * op(x): its second derivative goes through op's backward twice. */
static int run1_sq(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_tensor *y = NULL;
    TG_TRY(((const op1_box *)user)->f(&y, in[0]));
    int rc = tg_mul(out, y, y);
    tg_tensor_release(y);
    return rc;
}

static int run_cat(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_tensor *c = NULL;
    TG_TRY(tg_cat(&c, n, in, 1));
    int rc = user ? tg_mul(out, c, c) : (*out = tg_tensor_retain(c), TG_OK);
    tg_tensor_release(c);
    return rc;
}

static tg_tensor *leaf(int ndim, const int64_t *shape, uint64_t seed)
{
    tg_tensor *x = th_rand_uniform(TG_F64, ndim, shape, seed);
    cr_assert(eq(int, tg_tensor_set_requires_grad(x, true), TG_OK));
    return x;
}

Test(shape_grad, gradcheck_every_op_in_f64)
{
    struct { const char *name; op1_fn f; bool gradgrad; } ops[] = {
        {"reshape", g_reshape, false},     {"permute", g_permute, true},
        {"transpose", g_transpose, false}, {"slice", g_slice, true},
        {"expand", g_expand, true},        {"unsqueeze", g_unsqueeze, false},
        {"squeeze", g_squeeze, false},     {"contiguous", g_contiguous, false},
        {"sum", g_sum, false},             {"mean", g_mean, false},
        {"sum_dims", g_sum_dims, true},    {"mean_dims", g_mean_dims, false},
        {"sum_to_shape", g_sum_to_shape, false},
    };
    int64_t s[2] = {3, 4};
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        tg_tensor *x = leaf(2, s, 100 + i);
        op1_box box = {ops[i].f};
        int rc = tg_gradcheck(run1, &box, 1, &x, &o);
        cr_assert(eq(int, rc, TG_OK), "gradcheck %s: %s", ops[i].name, tg_error_message());
        if (ops[i].gradgrad) {
            rc = tg_gradgradcheck(run1_sq, &box, 1, &x, &o);
            cr_assert(eq(int, rc, TG_OK), "gradgradcheck %s: %s", ops[i].name,
                      tg_error_message());
        }
        tg_tensor_release(x);
    }
}

Test(shape_grad, gradcheck_cat)
{
    tg_tensor *in[3] = {leaf(2, (int64_t[]){2, 1}, 1), leaf(2, (int64_t[]){2, 3}, 2),
                        leaf(2, (int64_t[]){2, 2}, 3)};
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    cr_assert(eq(int, tg_gradcheck(run_cat, NULL, 3, in, &o), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_gradgradcheck(run_cat, (void *)1, 3, in, &o), TG_OK), "%s",
              tg_error_message());
    for (int i = 0; i < 3; i++) tg_tensor_release(in[i]);
}

Test(shape_grad, slice_gradient_is_ones_on_the_picked_elements)
{
    tg_tensor *x = leaf(2, (int64_t[]){3, 5}, 9), *y = NULL, *s = NULL;
    cr_assert(eq(int, tg_slice(&y, x, 1, 1, 5, 2), TG_OK));   /* columns 1 and 3 */
    cr_assert(eq(int, tg_sum(&s, y), TG_OK));
    cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_OK));
    tg_tensor *g = tg_tensor_grad(x);
    cr_assert(not(eq(ptr, g, NULL)));
    for (int64_t k = 0; k < 15; k++)
        cr_assert(eq(dbl, th_at(g, k), (k % 5 == 1 || k % 5 == 3) ? 1.0 : 0.0));
    tg_tensor_release(s);
    tg_tensor_release(y);
    tg_tensor_release(x);
}
