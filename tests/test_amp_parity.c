/* tests/test_amp_parity.c - the dtype rules of convolutions and products
 * with mixed float dtypes, in and out of autocast, as PyTorch 1.13's CPU
 * ops give them (scripts/amp_parity_torch.py prints torch's side of every
 * case below):
 *  - conv and conv_transpose refuse mixed dtypes of x, weight and bias
 *    outside autocast ("expected scalar type Float but found Double");
 *  - under autocast conv casts to the scope's dtype and conv_transpose to
 *    the widest, but an f64 beside another float dtype is refused in every
 *    product and convolution (autocast casts f32, f16 and bf16 only);
 *  - mv and dot are off torch's autocast list: f32 stays f32 in a scope;
 *  - outer promotes mixed dtypes as mul does, in and out of autocast. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static tg_tensor *t_of(tg_dtype dt, int nd, const int64_t *shape, uint64_t seed)
{
    return th_rand_tensor(&seed, dt, nd, shape, -1, 1);
}

#define SHAPE(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
                   (int64_t[]){__VA_ARGS__}

/* Each refusal: the status, words of the message, *out left NULL and no
 * tensor memory left behind. */
#define REFUSED(call, words) th_expect_refused_clean(call, TG_EDTYPE, words)

/* The dtype of f(x, w, b), or -1 when refused with TG_EDTYPE. */
typedef int (*conv_fn)(tg_tensor **, tg_tensor *, tg_tensor *, tg_tensor *,
                       const tg_conv_params *);

static int conv_dtype(conv_fn f, tg_tensor *x, tg_tensor *w, tg_tensor *b)
{
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    tg_tensor *y = NULL;
    const int rc = f(&y, x, w, b, &p);
    if (rc == TG_EDTYPE) {
        cr_assert(y == NULL);
        return -1;
    }
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    const int dt = (int)tg_tensor_dtype(y);
    tg_tensor_release(y);
    return dt;
}

/* ---- conv and conv_transpose outside autocast ---------------------------- */

Test(amp_parity, conv_refuses_mixed_dtypes_outside_autocast)
{
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    for (int nsp = 1; nsp <= 3; nsp++) {
        int64_t xs[5] = {1, 2, 4, 4, 4}, ws[5] = {3, 2, 2, 2, 2}, wts[5] = {2, 3, 2, 2, 2};
        tg_tensor *x32 = t_of(TG_F32, nsp + 2, xs, 1), *x64 = t_of(TG_F64, nsp + 2, xs, 2);
        tg_tensor *xbf = t_of(TG_BF16, nsp + 2, xs, 3), *w32 = t_of(TG_F32, nsp + 2, ws, 4);
        tg_tensor *w64 = t_of(TG_F64, nsp + 2, ws, 5), *wt32 = t_of(TG_F32, nsp + 2, wts, 6);
        tg_tensor *wt64 = t_of(TG_F64, nsp + 2, wts, 7), *b64 = t_of(TG_F64, SHAPE(3), 8);
        tg_tensor *b32 = t_of(TG_F32, SHAPE(3), 9);
        char want[64];
        snprintf(want, sizeof want, "conv%dd: weight is f64 but x is f32: outside autocast",
                 nsp);
        REFUSED(tg_conv(out_, x32, w64, NULL, &p), want);
        REFUSED(tg_conv(out_, x64, w32, NULL, &p), "weight is f32 but x is f64");
        REFUSED(tg_conv(out_, xbf, w32, NULL, &p), "weight is f32 but x is bf16");
        REFUSED(tg_conv(out_, x32, w32, b64, &p), "bias is f64 but x is f32");
        REFUSED(tg_conv(out_, x64, w64, b32, &p), "bias is f32 but x is f64");
        snprintf(want, sizeof want, "conv_transpose%dd: weight is f64 but x is f32", nsp);
        REFUSED(tg_conv_transpose(out_, x32, wt64, NULL, &p), want);
        REFUSED(tg_conv_transpose(out_, x64, wt32, NULL, &p), "weight is f32 but x is f64");
        REFUSED(tg_conv_transpose(out_, xbf, wt32, NULL, &p), "weight is f32 but x is bf16");
        REFUSED(tg_conv_transpose(out_, x32, wt32, b64, &p), "bias is f64 but x is f32");
        /* one dtype is fine */
        cr_assert(eq(int, conv_dtype(tg_conv, x64, w64, b64), TG_F64));
        cr_assert(eq(int, conv_dtype(tg_conv_transpose, x32, wt32, b32), TG_F32));
        th_release_all(9, (tg_tensor *[]){x32, x64, xbf, w32, w64, wt32, wt64, b64, b32});
    }
    /* unbatched x (C, H, W): the message names the 2-d op */
    tg_tensor *x = t_of(TG_F32, SHAPE(2, 4, 4), 1), *w = t_of(TG_F64, SHAPE(3, 2, 2, 2), 2);
    REFUSED(tg_conv(out_, x, w, NULL, &p), "conv2d: weight is f64 but x is f32");
    th_release_all(2, (tg_tensor *[]){x, w});
}

/* torch.nn.Conv2d(2, 3, 3)(x.double()): "Input type (double) and bias type
 * (float) should be the same"; ConvTranspose2d: "expected scalar type
 * Double but found Float".  The module and its parameters are unchanged. */
Test(amp_parity, conv_modules_refuse_an_input_of_another_dtype)
{
    tg_rng rng;
    tg_rng_init(&rng, 5);
    tg_module *conv = NULL, *convt = NULL;
    OK(tg_nn_conv_new(&conv, 2, 2, 3, (int64_t[]){3, 3}, NULL, true, &rng));
    OK(tg_nn_conv_transpose_new(&convt, 2, 2, 3, (int64_t[]){3, 3}, NULL, true, &rng));
    tg_tensor *x64 = t_of(TG_F64, SHAPE(1, 2, 5, 5), 1), *xbf = t_of(TG_BF16, SHAPE(1, 2, 5, 5), 2);
    tg_tensor *y = NULL;
    th_expect_refused(tg_module_forward(conv, &y, x64), TG_EDTYPE,
                      "conv2d: weight is f32 but x is f64", y);
    th_expect_refused(tg_module_forward(convt, &y, x64), TG_EDTYPE,
                      "conv_transpose2d: weight is f32 but x is f64", y);
    th_expect_refused(tg_module_forward(convt, &y, xbf), TG_EDTYPE,
                      "weight is f32 but x is bf16", y);
    /* under autocast the same modules take the bf16 input */
    OK(tg_autocast_begin(TG_BF16));
    OK(tg_module_forward(conv, &y, xbf));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_BF16));
    tg_tensor_release(y);
    y = NULL;
    OK(tg_module_forward(convt, &y, xbf));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    tg_tensor_release(y);
    y = NULL;
    /* but not the f64 one: autocast does not cast f64 */
    th_expect_refused(tg_module_forward(conv, &y, x64), TG_EDTYPE, "autocast does not cast f64",
                      y);
    OK(tg_autocast_end());
    th_release_all(2, (tg_tensor *[]){x64, xbf});
    tg_module_release(conv);
    tg_module_release(convt);
}

/* ---- under autocast --------------------------------------------------------- */

/* torch.autocast("cpu", bfloat16): conv2d(bf16, f32) is bf16 and
 * conv_transpose2d(bf16, f32) f32; the gradients arrive in each input's
 * own dtype. */
Test(amp_parity, conv_mixed_half_dtypes_under_autocast_with_backward)
{
    tg_tensor *x = t_of(TG_BF16, SHAPE(1, 2, 4, 4), 1), *w = t_of(TG_F32, SHAPE(3, 2, 2, 2), 2);
    tg_tensor *wt = t_of(TG_F32, SHAPE(2, 3, 2, 2), 3), *b = t_of(TG_F32, SHAPE(3), 4);
    tg_tensor *ts[4] = {x, w, wt, b};
    for (int i = 0; i < 4; i++) OK(tg_tensor_set_requires_grad(ts[i], true));
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    tg_tensor *y1 = NULL, *y2 = NULL, *s1 = NULL, *s2 = NULL, *l1 = NULL, *l = NULL;
    OK(tg_autocast_begin(TG_BF16));
    OK(tg_conv(&y1, x, w, b, &p));
    OK(tg_conv_transpose(&y2, x, wt, b, &p));
    OK(tg_sum(&s1, y1));
    OK(tg_sum(&s2, y2));
    OK(tg_to_dtype(&l1, s1, TG_F32));
    OK(tg_add(&l, l1, s2));
    OK(tg_autocast_end());
    cr_assert(eq(int, tg_tensor_dtype(y1), TG_BF16));
    cr_assert(eq(int, tg_tensor_dtype(y2), TG_F32));
    OK(tg_backward(l, NULL, NULL));
    const tg_dtype want[4] = {TG_BF16, TG_F32, TG_F32, TG_F32};
    for (int i = 0; i < 4; i++)
        cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(ts[i])), want[i]), "input %d", i);
    th_release_all(6, (tg_tensor *[]){y1, y2, s1, s2, l1, l});
    th_release_all(4, ts);
}

/* In a bf16 scope torch keeps f64 tensors as they are and casts the rest:
 * all-f64 products and convolutions stay f64; an f64 beside f32 or bf16
 * is refused ("expected scalar type Double but found BFloat16", "self and
 * mat2 must have the same dtype"); baddbmm casts its input to the
 * product's dtype either way. */
Test(amp_parity, f64_under_autocast_as_torch)
{
    tg_tensor *a64 = t_of(TG_F64, SHAPE(2, 3), 1), *b64 = t_of(TG_F64, SHAPE(3, 4), 2);
    tg_tensor *a32 = t_of(TG_F32, SHAPE(2, 3), 3), *b32 = t_of(TG_F32, SHAPE(3, 4), 4);
    tg_tensor *w64 = t_of(TG_F64, SHAPE(4, 3), 5), *w32 = t_of(TG_F32, SHAPE(4, 3), 6);
    tg_tensor *c64 = t_of(TG_F64, SHAPE(2, 4), 7), *c32 = t_of(TG_F32, SHAPE(2, 4), 8);
    tg_tensor *bias64 = t_of(TG_F64, SHAPE(4), 9), *bias32 = t_of(TG_F32, SHAPE(4), 10);
    tg_tensor *A64 = t_of(TG_F64, SHAPE(2, 2, 3), 11), *B64 = t_of(TG_F64, SHAPE(2, 3, 4), 12);
    tg_tensor *A32 = t_of(TG_F32, SHAPE(2, 2, 3), 13), *B32 = t_of(TG_F32, SHAPE(2, 3, 4), 14);
    tg_tensor *C64 = t_of(TG_F64, SHAPE(2, 2, 4), 15), *C32 = t_of(TG_F32, SHAPE(2, 2, 4), 16);
    tg_tensor *x64 = t_of(TG_F64, SHAPE(1, 2, 5, 5), 17);
    tg_tensor *x32 = t_of(TG_F32, SHAPE(1, 2, 5, 5), 18);
    tg_tensor *k64 = t_of(TG_F64, SHAPE(3, 2, 3, 3), 19);
    tg_tensor *k32 = t_of(TG_F32, SHAPE(3, 2, 3, 3), 20);
    tg_tensor *kt64 = t_of(TG_F64, SHAPE(2, 3, 3, 3), 21);
    tg_tensor *kt32 = t_of(TG_F32, SHAPE(2, 3, 3, 3), 22), *kb32 = t_of(TG_F32, SHAPE(3), 23);
    tg_tensor *xb = t_of(TG_BF16, SHAPE(1, 2, 5, 5), 24), *kb64 = t_of(TG_F64, SHAPE(3), 25);
    tg_tensor *y[11] = {NULL};
    OK(tg_autocast_begin(TG_BF16));
    OK(tg_matmul(&y[0], a64, b64));
    OK(tg_mm(&y[1], a64, b64));
    OK(tg_bmm(&y[2], A64, B64));
    OK(tg_linear(&y[3], a64, w64, bias64));
    OK(tg_addmm(&y[4], c64, a64, b64, 1, 1));
    OK(tg_baddbmm(&y[5], C64, A64, B64, 1, 1));
    OK(tg_conv(&y[6], x64, k64, kb64, NULL));
    OK(tg_conv_transpose(&y[7], x64, kt64, NULL, NULL));
    OK(tg_baddbmm(&y[8], C32, A64, B64, 1, 1));   /* f64: input cast */
    OK(tg_baddbmm(&y[9], C64, A32, B32, 1, 1));   /* bf16: input cast */
    OK(tg_addmm(&y[10], c32, a32, b32, 1, 1));
    REFUSED(tg_matmul(out_, a64, b32), "matmul: b is f32 but a is f64: autocast does not cast");
    REFUSED(tg_matmul(out_, a32, b64), "matmul: b is f64 but a is f32");
    REFUSED(tg_mm(out_, a64, b32), "mm: the second is f32 but the first operand is f64");
    REFUSED(tg_bmm(out_, A32, B64), "bmm: the second is f64 but the first operand is f32");
    REFUSED(tg_linear(out_, a64, w32, NULL), "linear: w is f32 but x is f64");
    REFUSED(tg_linear(out_, a32, w64, NULL), "linear: w is f64 but x is f32");
    REFUSED(tg_linear(out_, a32, w32, bias64), "linear: b is f64 but x is f32");
    REFUSED(tg_linear(out_, a64, w64, bias32), "linear: b is f32 but x is f64");
    REFUSED(tg_addmm(out_, c64, a32, b32, 1, 1), "addmm: input is f64 but the first");
    REFUSED(tg_addmm(out_, c32, a64, b64, 1, 1), "addmm: input is f32 but the first");
    REFUSED(tg_conv(out_, x64, k32, NULL, NULL), "conv2d: weight is f32 but x is f64");
    REFUSED(tg_conv(out_, x32, k64, NULL, NULL), "conv2d: weight is f64 but x is f32");
    REFUSED(tg_conv(out_, xb, k64, NULL, NULL), "conv2d: weight is f64 but x is bf16");
    REFUSED(tg_conv(out_, x32, k32, kb64, NULL), "conv2d: bias is f64 but x is f32");
    REFUSED(tg_conv(out_, x64, k64, kb32, NULL), "conv2d: bias is f32 but x is f64");
    REFUSED(tg_conv_transpose(out_, x64, kt32, NULL, NULL), "weight is f32 but x is f64");
    REFUSED(tg_conv_transpose(out_, x32, kt64, NULL, NULL), "weight is f64 but x is f32");
    REFUSED(tg_conv_transpose(out_, x32, kt32, kb64, NULL), "bias is f64 but x is f32");
    OK(tg_autocast_end());
    const tg_dtype want[11] = {TG_F64, TG_F64, TG_F64, TG_F64, TG_F64, TG_F64,
                               TG_F64, TG_F64, TG_F64, TG_BF16, TG_BF16};
    for (int i = 0; i < 11; i++)
        cr_assert(eq(int, tg_tensor_dtype(y[i]), want[i]), "y[%d] %s", i,
                  tg_dtype_name(tg_tensor_dtype(y[i])));
    th_release_all(11, y);
    th_release_all(25, (tg_tensor *[]){a64, b64, a32, b32, w64, w32, c64, c32, bias64, bias32,
                                       A64, B64, A32, B32, C64, C32, x64, x32, k64, k32, kt64,
                                       kt32, kb32, xb, kb64});
}

/* ---- mv and dot: not on torch's autocast list --------------------------- */

/* with torch.autocast("cpu", dtype=torch.bfloat16): torch.mv(f32, f32) and
 * torch.dot(f32, f32) are f32, with f32 gradients; bf16 operands stay
 * bf16, f64 ones f64, and mixed ones are refused there too.  The values
 * are those computed outside the scope, bit for bit. */
Test(amp_parity, mv_and_dot_keep_their_dtype_under_autocast)
{
    tg_tensor *a = t_of(TG_F32, SHAPE(3, 4), 1), *v = t_of(TG_F32, SHAPE(4), 2);
    tg_tensor *ab = t_of(TG_BF16, SHAPE(3, 4), 3), *vb = t_of(TG_BF16, SHAPE(4), 4);
    tg_tensor *a64 = t_of(TG_F64, SHAPE(3, 4), 5), *v64 = t_of(TG_F64, SHAPE(4), 6);
    OK(tg_tensor_set_requires_grad(a, true));
    OK(tg_tensor_set_requires_grad(v, true));
    tg_tensor *mv0 = NULL, *dot0 = NULL, *y[6] = {NULL}, *s = NULL, *l = NULL;
    OK(tg_mv(&mv0, a, v));
    OK(tg_dot(&dot0, v, v));
    OK(tg_autocast_begin(TG_BF16));
    OK(tg_mv(&y[0], a, v));
    OK(tg_dot(&y[1], v, v));
    OK(tg_mv(&y[2], ab, vb));
    OK(tg_dot(&y[3], vb, vb));
    OK(tg_mv(&y[4], a64, v64));
    OK(tg_dot(&y[5], v64, v64));
    REFUSED(tg_mv(out_, ab, v), "dtypes must match");
    REFUSED(tg_dot(out_, v, vb), "dtypes must match");
    /* matmul of the same operands is on the list: bf16 */
    tg_tensor *m = NULL;
    OK(tg_matmul(&m, a, v));
    cr_assert(eq(int, tg_tensor_dtype(m), TG_BF16));
    OK(tg_sum(&s, y[0]));
    OK(tg_add(&l, s, y[1]));
    OK(tg_autocast_end());
    const tg_dtype want[6] = {TG_F32, TG_F32, TG_BF16, TG_BF16, TG_F64, TG_F64};
    for (int i = 0; i < 6; i++) cr_assert(eq(int, tg_tensor_dtype(y[i]), want[i]), "y[%d]", i);
    th_expect_same_bits("mv in a scope", a, y[0], mv0);
    th_expect_same_bits("dot in a scope", v, y[1], dot0);
    OK(tg_backward(l, NULL, NULL));
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(a)), TG_F32));
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(v)), TG_F32));
    /* d/da sum(a v) = 1 v^T: row r of a's gradient is v, exactly */
    for (int64_t e = 0; e < 12; e++)
        cr_assert(eq(dbl, th_at(tg_tensor_grad(a), e), th_at(v, e % 4)));
    th_release_all(6, y);
    th_release_all(11, (tg_tensor *[]){a, v, ab, vb, a64, v64, mv0, dot0, s, l, m});
}

/* ---- outer: promotes, as torch.outer and torch.ger -------------------------- */

Test(amp_parity, outer_promotes_mixed_dtypes_as_torch)
{
    tg_tensor *v32 = t_of(TG_F32, SHAPE(3), 1), *u64 = t_of(TG_F64, SHAPE(4), 2);
    tg_tensor *ubf = t_of(TG_BF16, SHAPE(4), 3), *v16 = t_of(TG_F16, SHAPE(3), 4);
    tg_tensor *y = NULL, *s = NULL;
    struct { tg_tensor *a, *b; tg_dtype want; } cases[] = {
        {v32, u64, TG_F64}, {u64, v32, TG_F64}, {v32, ubf, TG_F32}, {v16, ubf, TG_F32},
    };
    for (int scope = 0; scope < 2; scope++) {
        if (scope) OK(tg_autocast_begin(TG_BF16));
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            OK(tg_outer(&y, cases[i].a, cases[i].b));
            cr_assert(eq(int, tg_tensor_dtype(y), cases[i].want), "case %zu scope %d", i,
                      scope);
            tg_tensor_release(y);
            y = NULL;
        }
        if (scope) OK(tg_autocast_end());
    }
    /* integers too, as torch.outer: i64 with i64 is i64, f32 with i64 f32 */
    tg_tensor *n3 = th_arange(TG_I64, SHAPE(3)), *n4 = th_arange(TG_I64, SHAPE(4));
    OK(tg_outer(&y, n3, n4));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_I64));
    cr_assert(eq(dbl, th_at(y, 2 * 4 + 3), 6.0));
    tg_tensor_release(y);
    y = NULL;
    OK(tg_outer(&y, v32, n4));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    tg_tensor_release(y);
    y = NULL;
    th_release_all(2, (tg_tensor *[]){n3, n4});
    /* the values: v[i] * u[j] in f64; gradients in each input's dtype
     * (d/dv sum = sum(u) per element, d/du = sum(v)) */
    OK(tg_tensor_set_requires_grad(v32, true));
    OK(tg_tensor_set_requires_grad(u64, true));
    OK(tg_outer(&y, v32, u64));
    for (int64_t i = 0; i < 3; i++)
        for (int64_t j = 0; j < 4; j++)
            cr_assert(eq(dbl, th_at(y, i * 4 + j), th_at(v32, i) * th_at(u64, j)));
    OK(tg_sum(&s, y));
    OK(tg_backward(s, NULL, NULL));
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(v32)), TG_F32));
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(u64)), TG_F64));
    double su = 0, sv = 0;
    for (int64_t j = 0; j < 4; j++) su += th_at(u64, j);
    for (int64_t i = 0; i < 3; i++) sv += th_at(v32, i);
    cr_assert(th_close(th_at(tg_tensor_grad(v32), 0), su, 1e-6, 1e-6));
    cr_assert(th_close(th_at(tg_tensor_grad(u64), 0), sv, 1e-12, 1e-12));
    th_release_all(6, (tg_tensor *[]){v32, u64, ubf, v16, y, s});
}
