/* tests/test_mse_loss.c - tg_mse_loss of one f32 or f64 dtype runs its own op
 * (src/ops/mse_loss.c); it must give the bits of the composition it
 * replaces, mean/sum/none of mul(sub(x, t), sub(x, t)), value and both
 * gradients, for every reduction, for contiguous and strided inputs, on one
 * thread and two.  Its derivatives against finite differences are in
 * tests/test_loss.c (gradcheck and gradgradcheck of every reduction), its
 * values against PyTorch's there too. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
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

/* The composition: reduce((x - t) (x - t)). */
static int composed(tg_tensor **out, tg_tensor *x, tg_tensor *t, tg_reduction red)
{
    tg_tensor *d = NULL, *sq = NULL;
    int rc = tg_sub(&d, x, t);
    if (rc == TG_OK) rc = tg_mul(&sq, d, d);
    if (rc == TG_OK) {
        if (red == TG_REDUCTION_MEAN) rc = tg_mean(out, sq);
        else if (red == TG_REDUCTION_SUM) rc = tg_sum(out, sq);
        else *out = tg_tensor_retain(sq);
    }
    th_release_all(2, (tg_tensor *[]){d, sq});
    return rc;
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
static void run(int (*fn)(tg_tensor **, tg_tensor *, tg_tensor *, tg_reduction), tg_dtype dt,
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

static void expect_composition_bits(tg_dtype dt, int64_t r, int64_t c)
{
    static const char *const WHAT[3] = {"value", "x.grad", "t.grad"};
    for (int k = 0; k < 3; k++)
        for (int lx = 0; lx < 3; lx++)
            for (int lt = 0; lt < 3; lt += 2) {
                tg_tensor *got[3], *want[3];
                run(tg_mse_loss, dt, r, c, lx, lt, REDS[k], got);
                run(composed, dt, r, c, lx, lt, REDS[k], want);
                for (int i = 0; i < 3; i++) {
                    char what[96];
                    snprintf(what, sizeof what, "%s %s (%lld, %lld) red %d layouts %d %d",
                             tg_dtype_name(dt), WHAT[i], (long long)r, (long long)c, k, lx,
                             lt);
                    th_expect_same_tensor_bytes(what, got[i], want[i]);
                }
                th_release_all(3, got);
                th_release_all(3, want);
            }
}

Test(mse_loss, gives_the_compositions_bits_on_one_thread)
{
    cr_assert(eq(int, tg_set_num_threads(1), TG_OK));
    expect_composition_bits(TG_F32, 37, 29);
    expect_composition_bits(TG_F64, 37, 29);
    expect_composition_bits(TG_F32, 300, 130);
}

Test(mse_loss, gives_the_compositions_bits_on_two_threads)
{
    cr_assert(eq(int, tg_set_num_threads(2), TG_OK));
    expect_composition_bits(TG_F32, 300, 130);
    expect_composition_bits(TG_F64, 300, 130);
}

/* The op is recorded under its name, and its gradient's op too when the
 * backward builds a graph. */
Test(mse_loss, records_its_ops_by_name)
{
    const tg_op_schema *op = NULL;
    cr_assert(eq(int, tg_op_find(&op, "mse_loss"), TG_OK));
    cr_assert(eq(int, tg_op_find(&op, "mse_backward"), TG_OK));
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
