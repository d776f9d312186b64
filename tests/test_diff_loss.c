/* tests/test_diff_loss.c - tg_mse_loss and tg_l1_loss of one f32 or f64
 * dtype run ops of their own (src/ops/diff_loss.c); they must give the
 * bits of the compositions they replace, mean/sum/none of mul(sub(x, t),
 * sub(x, t)) and of abs(sub(x, t)), value and both gradients, for every
 * reduction, for contiguous and strided inputs, on one thread and two.
 * Their derivatives against finite differences are in tests/test_loss.c
 * (gradcheck and gradgradcheck of every reduction), their values against
 * PyTorch's there too. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/autograd.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"
#include "tapegrad/op.h"
#include "tapegrad/tensor.h"

static const tg_reduction REDS[] = {TG_REDUCTION_MEAN, TG_REDUCTION_SUM, TG_REDUCTION_NONE};

typedef int (*loss_fn)(tg_tensor **, tg_tensor *, tg_tensor *, tg_reduction);

/* The compositions: reduce((x - t) (x - t)) and reduce(|x - t|). */
static int composed(bool l1, tg_tensor **out, tg_tensor *x, tg_tensor *t, tg_reduction red)
{
    tg_tensor *d = NULL, *sq = NULL;
    int rc = tg_sub(&d, x, t);
    if (rc == TG_OK) rc = l1 ? tg_abs(&sq, d) : tg_mul(&sq, d, d);
    if (rc == TG_OK) {
        if (red == TG_REDUCTION_MEAN) rc = tg_mean(out, sq);
        else if (red == TG_REDUCTION_SUM) rc = tg_sum(out, sq);
        else *out = tg_tensor_retain(sq);
    }
    th_release_all(2, (tg_tensor *[]){d, sq});
    return rc;
}

static int composed_mse(tg_tensor **out, tg_tensor *x, tg_tensor *t, tg_reduction red)
{
    return composed(false, out, x, t, red);
}

static int composed_l1(tg_tensor **out, tg_tensor *x, tg_tensor *t, tg_reduction red)
{
    return composed(true, out, x, t, red);
}

/* A leaf base (requires grad) and the view of shape (r, c) the loss reads
 * from it: the base itself (layout 0), the transpose of an (c, r) base (1),
 * every other row of a (2r, c) base (2). */
static void make_input(tg_dtype dt, int64_t r, int64_t c, int layout, uint64_t seed,
                       tg_tensor **base, tg_tensor **view)
{
    const int64_t s[3][2] = {{r, c}, {c, r}, {2 * r, c}};
    tg_tensor *b = th_layout_of(dt, 2, s[layout], 0, seed);
    *base = th_leaf_clone(b);
    tg_tensor_release(b);
    if (layout == 0) *view = tg_tensor_retain(*base);
    else if (layout == 1) cr_assert(eq(int, tg_transpose(view, *base, 0, 1), TG_OK));
    else cr_assert(eq(int, tg_slice(view, *base, 0, 1, 2 * r, 2), TG_OK));
}

/* The loss's value and the gradients of x's and t's bases under fn. */
static void run(loss_fn fn, tg_dtype dt,
                int64_t r, int64_t c, int lx, int lt, tg_reduction red, tg_tensor *out[3])
{
    tg_tensor *xb, *x, *tb, *t, *y = NULL;
    make_input(dt, r, c, lx, 11, &xb, &x);
    make_input(dt, r, c, lt, 12, &tb, &t);
    cr_assert(eq(int, fn(&y, x, t, red), TG_OK), "%s", tg_error_message());
    if (red == TG_REDUCTION_NONE) {
        uint64_t s = 13;
        tg_tensor *gy = th_rand_tensor(&s, dt, 2, (int64_t[]){r, c}, -2, 2);
        th_backward_with(y, gy);
        tg_tensor_release(gy);
    } else {
        cr_assert(eq(int, tg_backward(y, NULL, NULL), TG_OK), "%s", tg_error_message());
    }
    out[0] = y;
    out[1] = tg_tensor_retain(tg_tensor_grad(xb));
    out[2] = tg_tensor_retain(tg_tensor_grad(tb));
    cr_assert(out[1] != NULL && out[2] != NULL, "gradients missing");
    th_release_all(4, (tg_tensor *[]){xb, x, tb, t});
}

static void expect_loss_bits(int l, tg_dtype dt, int64_t r, int64_t c)
{
    static const char *const WHAT[3] = {"value", "x.grad", "t.grad"};
    static const loss_fn GOT[2] = {tg_mse_loss, tg_l1_loss}, WANT[2] = {composed_mse, composed_l1};
    for (int k = 0; k < 3; k++)
        for (int lx = 0; lx < 3; lx++)
            for (int lt = 0; lt < 3; lt += 2) {
                tg_tensor *got[3], *want[3];
                run(GOT[l], dt, r, c, lx, lt, REDS[k], got);
                run(WANT[l], dt, r, c, lx, lt, REDS[k], want);
                for (int i = 0; i < 3; i++) {
                    char what[96];
                    snprintf(what, sizeof what, "%s %s %s (%lld, %lld) red %d layouts %d %d",
                             l ? "l1" : "mse", tg_dtype_name(dt), WHAT[i], (long long)r,
                             (long long)c, k, lx, lt);
                    th_expect_same_tensor_bytes(what, got[i], want[i]);
                }
                th_release_all(3, got);
                th_release_all(3, want);
            }
}

static void expect_composition_bits(tg_dtype dt, int64_t r, int64_t c)
{
    expect_loss_bits(0, dt, r, c);
    expect_loss_bits(1, dt, r, c);
}

Test(diff_loss, gives_the_compositions_bits_on_one_thread)
{
    cr_assert(eq(int, tg_set_num_threads(1), TG_OK));
    expect_composition_bits(TG_F32, 37, 29);
    expect_composition_bits(TG_F64, 37, 29);
    expect_composition_bits(TG_F32, 300, 130);
}

Test(diff_loss, gives_the_compositions_bits_on_two_threads)
{
    cr_assert(eq(int, tg_set_num_threads(2), TG_OK));
    expect_composition_bits(TG_F32, 300, 130);
    expect_composition_bits(TG_F64, 300, 130);
}

/* The op is recorded under its name, and its gradient's op too when the
 * backward builds a graph. */
Test(diff_loss, records_its_ops_by_name)
{
    const tg_op_schema *op = NULL;
    cr_assert(eq(int, tg_op_find(&op, "mse_loss"), TG_OK));
    cr_assert(eq(int, tg_op_find(&op, "mse_backward"), TG_OK));
    cr_assert(eq(int, tg_op_find(&op, "l1_loss"), TG_OK));
    cr_assert(eq(int, tg_op_find(&op, "l1_backward"), TG_OK));
    tg_tensor *xb, *x, *tb, *t, *y = NULL;
    make_input(TG_F64, 3, 4, 0, 5, &xb, &x);
    make_input(TG_F64, 3, 4, 0, 6, &tb, &t);
    cr_assert(eq(int, tg_mse_loss(&y, x, t, TG_REDUCTION_SUM), TG_OK));
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    cr_assert(eq(int, tg_tape_print(f, y), TG_OK), "%s", tg_error_message());
    fclose(f);
    cr_assert(strstr(buf, "mse_loss") != NULL, "tape: %s", buf);
    free(buf);
    th_release_all(5, (tg_tensor *[]){xb, x, tb, t, y});
}

/* L1 where x equals t: abs's gradient g sign(0) = g 0, -0 for a negative g
 * (the bytes differ from +0), and NaN differences give sign 0 too. */
Test(diff_loss, l1_at_equal_values_and_nan_gives_abss_zeros)
{
    const int64_t n = 8;
    const double xs[8] = {1, -2, 3, NAN, 0, -0.0, 5, 6}, ts[8] = {1, -2, 4, 1, -0.0, 0, NAN, 6};
    const double gs[8] = {-1, 2, -3, 4, -5, 6, -7, -8};
    for (int dti = 0; dti < 2; dti++) {
        const tg_dtype dt = dti ? TG_F64 : TG_F32;
        tg_tensor *gy = th_tensor_from(dt, 1, &n, gs), *grads[2][2], *ys[2];
        for (int w = 0; w < 2; w++) {
            tg_tensor *xv = th_tensor_from(dt, 1, &n, xs), *tv = th_tensor_from(dt, 1, &n, ts);
            tg_tensor *x = th_leaf_clone(xv), *t = th_leaf_clone(tv);
            cr_assert(eq(int, w ? composed_l1(&ys[w], x, t, TG_REDUCTION_NONE)
                                : tg_l1_loss(&ys[w], x, t, TG_REDUCTION_NONE), TG_OK));
            th_backward_with(ys[w], gy);
            grads[w][0] = tg_tensor_retain(tg_tensor_grad(x));
            grads[w][1] = tg_tensor_retain(tg_tensor_grad(t));
            th_release_all(4, (tg_tensor *[]){xv, tv, x, t});
        }
        th_expect_same_tensor_bytes("l1 value", ys[0], ys[1]);
        th_expect_same_tensor_bytes("l1 x.grad", grads[0][0], grads[1][0]);
        th_expect_same_tensor_bytes("l1 t.grad", grads[0][1], grads[1][1]);
        double v;
        cr_assert(eq(int, tg_tensor_get_flat(grads[0][0], 0, &v), TG_OK));
        cr_assert(v == 0 && signbit(v), "x.grad[0] = %g must be -0", v);
        th_release_all(7, (tg_tensor *[]){gy, ys[0], ys[1], grads[0][0], grads[0][1],
                                          grads[1][0], grads[1][1]});
    }
}
