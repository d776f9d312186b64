/* tests/test_amp_promote.c - the promote table of mixed float dtypes: the
 * widest of two inputs, written out by hand, for add and for
 * conv_transpose in and out of autocast (values rounded once in the
 * promoted dtype), and 0-d inputs that do not widen dimensioned ones, as in
 * PyTorch. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/amp.h"
#include "tapegrad/autograd.h"
#include "tapegrad/conv.h"
#include "tapegrad/ops.h"

/* The widest of a and b, written out by hand as a table (rows/cols th_floats). */
static tg_dtype expected_promote(int i, int j)
{
    static const tg_dtype table[4][4] = {
        /*            f32     f64     f16     bf16 */
        /* f32  */ {TG_F32, TG_F64, TG_F32, TG_F32},
        /* f64  */ {TG_F64, TG_F64, TG_F64, TG_F64},
        /* f16  */ {TG_F32, TG_F64, TG_F16, TG_F32},
        /* bf16 */ {TG_F32, TG_F64, TG_F32, TG_BF16},
    };
    return table[i][j];
}

/* Tolerance for a value computed in the promoted dtype: 0 when every input
 * is a half type (products and two-term sums are exact in f32, so the one
 * rounding is all there is). */
static double tol_for(tg_dtype a, tg_dtype b, tg_dtype res, double ref)
{
    bool halves = (a == TG_F16 || a == TG_BF16) && (b == TG_F16 || b == TG_BF16);
    if (halves) return 0.0;
    return (res == TG_F64 ? 1e-14 : 1e-6) * fmax(1.0, fabs(ref));
}

Test(amp_promote, promote_table_add)
{
    /* f16 has 11 significant bits, bf16 8: a = 1 + 2^-10 is exact only in f16
     * and b = 2^-7 + 2^-9 in both, so a + b needs f32 when mixing halves. */
    const double av[2] = {1.0 + 0x1p-10, -3.5}, bv[2] = {0x1p-7 + 0x1p-9, 0.25};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            tg_tensor *a = th_tensor_from(th_floats[i], 1, (int64_t[]){2}, av);
            tg_tensor *b = th_tensor_from(th_floats[j], 1, (int64_t[]){2}, bv), *y = NULL;
            cr_assert(eq(int, tg_add(&y, a, b), TG_OK));
            tg_dtype want = expected_promote(i, j);
            cr_assert(eq(str, (char *)tg_dtype_name(tg_tensor_dtype(y)),
                         (char *)tg_dtype_name(want)), "%s + %s",
                      tg_dtype_name(th_floats[i]), tg_dtype_name(th_floats[j]));
            for (int k = 0; k < 2; k++) {
                double ref = th_round_to(want, th_at(a, k) + th_at(b, k));
                cr_assert(eq(dbl, th_at(y, k), ref), "%s + %s [%d]", tg_dtype_name(th_floats[i]),
                          tg_dtype_name(th_floats[j]), k);
            }
            tg_tensor_release(a);
            tg_tensor_release(b);
            tg_tensor_release(y);
        }
    cr_assert(eq(int, tg_promote_dtypes(TG_F16, TG_BF16), TG_F32));
    cr_assert(eq(int, tg_promote_dtypes(TG_BF16, TG_F64), TG_F64));
}

/* As PyTorch: a 0-d input's dtype counts only when no float input has
 * dimensions, so a (2,) tensor of any float dtype times a 0-d tensor of any
 * other keeps its dtype (torch: ones(2, dtype=a) * tensor(2., dtype=b) is
 * a for every pair), two 0-d tensors follow the table, and the 0-d input's
 * gradient comes back in its own dtype. */
Test(amp_promote, zero_dim_inputs_do_not_widen_dimensioned_ones)
{
    const double av[2] = {1.5, -0.75}, bv[1] = {2.0};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            tg_tensor *a = th_tensor_from(th_floats[i], 1, (int64_t[]){2}, av);
            tg_tensor *b = th_tensor_from(th_floats[j], 0, NULL, bv), *y = NULL, *s = NULL;
            cr_assert(eq(int, tg_tensor_set_requires_grad(b, true), TG_OK));
            cr_assert(eq(int, tg_mul(&y, a, b), TG_OK), "%s", tg_error_message());
            cr_assert(eq(int, tg_tensor_dtype(y), th_floats[i]), "%s (2,) * %s (): %s",
                      tg_dtype_name(th_floats[i]), tg_dtype_name(th_floats[j]),
                      tg_dtype_name(tg_tensor_dtype(y)));
            for (int k = 0; k < 2; k++) cr_assert(eq(dbl, th_at(y, k), 2 * av[k]));
            cr_assert(eq(int, tg_sum(&s, y), TG_OK));
            cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_OK), "%s", tg_error_message());
            const tg_tensor *g = tg_tensor_grad(b);
            cr_assert(g != NULL && tg_tensor_dtype(g) == th_floats[j] && tg_tensor_ndim(g) == 0);
            cr_assert(eq(dbl, th_at(g, 0), av[0] + av[1]));
            tg_tensor_release(s), tg_tensor_release(y), tg_tensor_release(a);
            tg_tensor *a0 = th_tensor_from(th_floats[i], 0, NULL, av);
            cr_assert(eq(int, tg_mul(&y, a0, b), TG_OK));
            cr_assert(eq(int, tg_tensor_dtype(y), expected_promote(i, j)), "() * ()");
            tg_tensor_release(y), tg_tensor_release(a0), tg_tensor_release(b);
        }
}

Test(amp_promote, promote_table_conv_transpose_in_and_out_of_autocast)
{
    /* 1-d, one channel, L = 2, K = 2, stride 1: y = (x0 w0, x0 w1 + x1 w0, x1 w1). */
    const double xv[2] = {1.0 + 0x1p-10, -0.75}, wv[2] = {1.0 + 0x1p-7, 0.5 + 0x1p-9};
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    for (int scope = 0; scope < 2; scope++) {
        if (scope) cr_assert(eq(int, tg_autocast_begin(TG_BF16), TG_OK));
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                tg_tensor *x = th_tensor_from(th_floats[i], 3, (int64_t[]){1, 1, 2}, xv);
                tg_tensor *w = th_tensor_from(th_floats[j], 3, (int64_t[]){1, 1, 2}, wv), *y = NULL;
                /* torch's rule first: one dtype outside autocast; inside,
                 * f64 only with f64 (autocast does not cast it) */
                const bool f64x = th_floats[i] == TG_F64, f64w = th_floats[j] == TG_F64;
                if (i != j && (!scope || f64x != f64w)) {
                    th_expect_refused(tg_conv_transpose(&y, x, w, NULL, &p), TG_EDTYPE,
                                      tg_dtype_name(th_floats[j]), y);
                    tg_tensor_release(x);
                    tg_tensor_release(w);
                    continue;
                }
                cr_assert(eq(int, tg_conv_transpose(&y, x, w, NULL, &p), TG_OK));
                tg_dtype want = expected_promote(i, j);
                cr_assert(eq(int, tg_tensor_dtype(y), want), "convT %s x %s (autocast %d)",
                          tg_dtype_name(th_floats[i]), tg_dtype_name(th_floats[j]), scope);
                double x0 = th_at(x, 0), x1 = th_at(x, 1), w0 = th_at(w, 0), w1 = th_at(w, 1);
                const double exact[3] = {x0 * w0, x0 * w1 + x1 * w0, x1 * w1};
                cr_assert(eq(i64, tg_tensor_numel(y), 3));
                for (int k = 0; k < 3; k++) {
                    double ref = th_round_to(want, exact[k]);
                    cr_assert(epsilon_eq(dbl, th_at(y, k), ref,
                                         tol_for(th_floats[i], th_floats[j], want, ref)),
                              "convT %s x %s [%d]", tg_dtype_name(th_floats[i]),
                              tg_dtype_name(th_floats[j]), k);
                }
                tg_tensor_release(x);
                tg_tensor_release(w);
                tg_tensor_release(y);
            }
        if (scope) cr_assert(eq(int, tg_autocast_end(), TG_OK));
    }
}
