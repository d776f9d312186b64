/* tests/test_pad.c - tg_pad against PyTorch's F.pad (values and gradients,
 * every mode, ranks 1-3 of padding, negative pads that remove elements),
 * its derivatives to second order by finite differences (negative pads
 * too), other dtypes, its refusals; Conv's padding_mode
 * against torch's ConvNd(padding_mode=...), in the op and the module,
 * refused by ConvTranspose, and kept by a quantized model (its ONNX export:
 * tests/test_onnx_int8.c).  Goldens: scripts/make_pad_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static tg_st_file *golden(void)
{
    char path[512];
    tg_st_file *f = NULL;
    OK(tg_safetensors_load(&f, th_golden_path(path, sizeof path, "pad/pad.safetensors")));
    return f;
}

/* Tensor or metadata "<case>.<what>" of the golden, which must have it. */
static const void *entry(const tg_st_file *f, const char *c, const char *what, bool is_meta)
{
    char key[64];
    snprintf(key, sizeof key, "%s.%s", c, what);
    const void *v = is_meta ? (const void *)tg_st_meta_get(f, key) : (const void *)tg_st_get(f, key);
    cr_assert(v != NULL, "golden has no %s", key);
    return v;
}

static const tg_tensor *get(const tg_st_file *f, const char *c, const char *what)
{
    return entry(f, c, what, false);
}

static const char *meta(const tg_st_file *f, const char *c, const char *what)
{
    return entry(f, c, what, true);
}

static tg_pad_mode mode_of(const char *m)
{
    return !strcmp(m, "reflect")     ? TG_PAD_REFLECT
           : !strcmp(m, "replicate") ? TG_PAD_REPLICATE
           : !strcmp(m, "circular")  ? TG_PAD_CIRCULAR
                                     : TG_PAD_CONSTANT;
}

static int ints_of(const char *s, int64_t *v)
{
    int n = 0;
    for (char *end; *s; s = *end ? end + 1 : end) v[n++] = strtoll(s, &end, 10);
    return n;
}

/* The golden's cases <prefix>0, <prefix>1, ... (at least min of them):
 * values exactly torch's, the gradient within rounding. */
static void expect_pad_cases(const char *prefix, int min)
{
    tg_st_file *f = golden();
    char key[32];
    snprintf(key, sizeof key, "%s_cases", prefix);
    const int n = atoi(tg_st_meta_get(f, key));
    cr_assert(n >= min, "golden has %d %s cases", n, prefix);
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "%s%d", prefix, i);
        int64_t pads[8];
        const int np = ints_of(meta(f, c, "pads"), pads);
        tg_tensor *x = th_leaf_clone(get(f, c, "x")), *y = NULL;
        OK(tg_pad(&y, x, np, pads, mode_of(meta(f, c, "mode")), atof(meta(f, c, "value"))));
        /* a copy of the values: exactly torch's */
        th_expect_close(c, y, get(f, c, "y"), 0);
        th_backward_with(y, get(f, c, "grad_y"));
        th_expect_close_scaled(c, tg_tensor_grad(x), get(f, c, "grad_x"), 1e-14);
        th_release_all(2, (tg_tensor *[]){x, y});
    }
    tg_st_free(f);
}

Test(pad, every_mode_matches_torch)
{
    expect_pad_cases("pad", 10);
}

/* Negative pads remove elements: constant and circular up to the whole dim
 * (circular wrapping around what is left), reflect and replicate beyond it
 * while reading x's own ends; the removed elements get gradient 0. */
Test(pad, negative_pads_crop_as_torch)
{
    expect_pad_cases("crop", 16);
}

static int pad_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const tg_pad_mode mode = *(const tg_pad_mode *)user;
    return tg_pad(out, in[0], 4, (int64_t[]){2, 1, 1, 2}, mode, 0.25);
}

/* Padding that also removes: the last dim (4) loses 1 in front and gains
 * 2 at the end, the one before (3) gains 1 and loses 1. */
static int crop_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const tg_pad_mode mode = *(const tg_pad_mode *)user;
    return tg_pad(out, in[0], 4, (int64_t[]){-1, 2, 1, -1}, mode, 0.25);
}

/* pad and pad_backward are each other's adjoint: gradients of every order,
 * with negative pads too (the gradient of a crop is a zero-pad) */
Test(pad, first_and_second_derivatives_by_finite_differences)
{
    static const tg_pad_mode modes[] = {TG_PAD_CONSTANT, TG_PAD_REFLECT, TG_PAD_REPLICATE,
                                        TG_PAD_CIRCULAR};
    static const tg_gradcheck_fn fns[] = {pad_fn, crop_fn};
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
        for (size_t k = 0; k < sizeof fns / sizeof *fns; k++) {
            tg_tensor *x = th_rand_uniform(TG_F64, 3, (int64_t[]){2, 3, 4}, 5 + m);
            OK(tg_tensor_set_requires_grad(x, true));
            tg_tensor *in[1] = {x};
            tg_pad_mode mode = modes[m];
            OK(tg_gradcheck(fns[k], &mode, 1, in, NULL));
            OK(tg_gradgradcheck(fns[k], &mode, 1, in, NULL));
            tg_tensor_release(x);
        }
    }
}

/* Any dtype: the values are copied as they are. */
Test(pad, integer_and_half_tensors_are_copied_exactly)
{
    static const tg_dtype dts[] = {TG_I64, TG_U8, TG_BF16, TG_F16, TG_F32};
    for (size_t k = 0; k < sizeof dts / sizeof *dts; k++) {
        tg_tensor *x64 = NULL, *x = NULL, *y = NULL, *yr = NULL, *yc = NULL, *y2 = NULL;
        OK(tg_tensor_zeros(&x64, TG_F64, 2, (int64_t[]){3, 4}));
        for (int i = 0; i < 12; i++) OK(tg_tensor_set_flat(x64, i, i * 3 % 7));
        OK(tg_tensor_to_dtype(&x, x64, dts[k]));
        OK(tg_pad(&y, x, 4, (int64_t[]){1, 2, 2, 0}, TG_PAD_REFLECT, 0));
        OK(tg_pad(&yr, x64, 4, (int64_t[]){1, 2, 2, 0}, TG_PAD_REFLECT, 0));
        cr_assert(eq(int, tg_tensor_dtype(y), dts[k]));
        OK(tg_tensor_to_dtype(&yc, y, TG_F64));
        th_expect_close(tg_dtype_name(dts[k]), yc, yr, 0);
        OK(tg_pad(&y2, x, 2, (int64_t[]){0, 1}, TG_PAD_CONSTANT, 5));
        cr_assert(eq(dbl, th_at(y2, 4), 5.0), "%s: the constant", tg_dtype_name(dts[k]));
        th_release_all(6, (tg_tensor *[]){x64, x, y, yr, yc, y2});
    }
}

Test(pad, refusals_name_the_rule)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 3, 4}, 1), *y = NULL, *e = NULL;
    cr_assert(eq(int, tg_pad(&y, x, 2, (int64_t[]){4, 0}, TG_PAD_REFLECT, 0), TG_EINVAL));
    th_expect_in(tg_error_message(), "reflect padding (4, 0) of dim 2 must be < its size 4");
    cr_assert(eq(int, tg_pad(&y, x, 2, (int64_t[]){0, 5}, TG_PAD_CIRCULAR, 0), TG_EINVAL));
    th_expect_in(tg_error_message(), "circular padding (0, 5) of dim 2 must be <= its size 4");
    cr_assert(eq(int, tg_pad(&y, x, 3, (int64_t[]){1, 1, 1}, TG_PAD_CONSTANT, 0), TG_EINVAL));
    th_expect_in(tg_error_message(), "(low, high) pair");
    cr_assert(eq(int, tg_pad(&y, x, 8, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1}, TG_PAD_CONSTANT, 0),
                 TG_EINVAL));
    cr_assert(eq(int, tg_pad(&y, x, 2, (int64_t[]){INT32_MIN, 0}, TG_PAD_CONSTANT, 0),
                 TG_EINVAL));
    th_expect_in(tg_error_message(), "must be in [-2147483647, 2147483647]");
    cr_assert(eq(int, tg_pad(&y, x, 2, (int64_t[]){1, 0}, (tg_pad_mode)9, 0), TG_EINVAL));
    cr_assert(eq(int, tg_pad(&y, x, 2, NULL, TG_PAD_CONSTANT, 0), TG_EINVAL));
    cr_assert(eq(int, tg_pad(NULL, x, 0, NULL, TG_PAD_CONSTANT, 0), TG_EINVAL));
    OK(tg_tensor_zeros(&e, TG_F32, 2, (int64_t[]){2, 0}));
    cr_assert(eq(int, tg_pad(&y, e, 2, (int64_t[]){1, 0}, TG_PAD_REPLICATE, 0), TG_ESHAPE));
    OK(tg_pad(&y, e, 2, (int64_t[]){1, 2}, TG_PAD_CONSTANT, 3));   /* zeros: fine */
    cr_assert(eq(i64, tg_tensor_dim(y, 1), 3));
    cr_assert(eq(dbl, th_at(y, 0), 3.0));
    cr_assert(y != NULL);
    th_release_all(3, (tg_tensor *[]){x, e, y});
}

/* torch's limits on negative pads, on a last dim of 5. */
Test(pad, negative_pads_refusals_name_the_rule)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 3, 5}, 1), *y = NULL;
    static const struct {
        tg_pad_mode mode;
        int64_t lo, hi;
        const char *want;
    } bad[] = {
        {TG_PAD_CONSTANT, -3, -3, "constant padding (-3, -3) of dim 2 removes 6 elements, "
                                  "more than its size 5"},
        {TG_PAD_CONSTANT, -6, 2, "removes 6 elements"},
        {TG_PAD_CIRCULAR, -6, 0, "circular padding (-6, 0) of dim 2 removes 6 elements"},
        {TG_PAD_CIRCULAR, -2, 4, "circular padding (-2, 4) of dim 2 must be <= 3, its size 5 "
                                 "less the 2 elements the negative padding removes"},
        {TG_PAD_CIRCULAR, 3, -3, "must be <= 2, its size 5"},
        {TG_PAD_REFLECT, -4, -1, "reflect padding (-4, -1) of dim 2 leaves it 0 elements of 5: "
                                 "it must keep at least 1"},
        {TG_PAD_REFLECT, -1, 5, "reflect padding (-1, 5) of dim 2 must be < its size 5"},
        {TG_PAD_REPLICATE, -9, 3, "replicate padding (-9, 3) of dim 2 leaves it -1 elements"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert(eq(int, tg_pad(&y, x, 2, (int64_t[]){bad[i].lo, bad[i].hi}, bad[i].mode, 0),
                     TG_EINVAL), "case %zu", i);
        th_expect_in(tg_error_message(), bad[i].want);
        cr_assert(y == NULL);
    }
    /* at the limits: all removed (constant, circular), one left (reflect, replicate) */
    static const struct {
        tg_pad_mode mode;
        int64_t lo, hi, size;
    } edge[] = {{TG_PAD_CONSTANT, -3, -2, 0}, {TG_PAD_CIRCULAR, -5, 0, 0},
                {TG_PAD_CIRCULAR, -1, 4, 8},  {TG_PAD_REFLECT, -8, 4, 1},
                {TG_PAD_REPLICATE, -9, 5, 1}};
    for (size_t i = 0; i < sizeof edge / sizeof *edge; i++) {
        OK(tg_pad(&y, x, 2, (int64_t[]){edge[i].lo, edge[i].hi}, edge[i].mode, 0));
        cr_assert(eq(i64, tg_tensor_dim(y, 2), edge[i].size), "edge case %zu", i);
        tg_tensor_release(y);
        y = NULL;
    }
    tg_tensor_release(x);
}

/* The conv case c of the golden as params: padding per axis, stride, mode. */
static tg_conv_params conv_params_of(const tg_st_file *f, const char *c)
{
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    int64_t pad[3];
    const int nsp = ints_of(meta(f, c, "padding"), pad);
    for (int k = 0; k < nsp; k++) {
        p.padding[k][0] = p.padding[k][1] = pad[k];
        p.stride[k] = atoll(meta(f, c, "stride"));
    }
    p.padding_mode = mode_of(meta(f, c, "mode"));
    return p;
}

Test(pad, conv_padding_mode_matches_torch_in_the_op_and_the_module)
{
    tg_st_file *f = golden();
    const int n = atoi(tg_st_meta_get(f, "conv_cases"));
    cr_assert(n >= 5);
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "conv%d", i);
        const tg_conv_params p = conv_params_of(f, c);
        tg_tensor *x = th_leaf_clone(get(f, c, "x")), *w = th_leaf_clone(get(f, c, "w"));
        tg_tensor *b = th_leaf_clone(get(f, c, "b")), *y = NULL;
        OK(tg_conv(&y, x, w, b, &p));
        th_expect_close_scaled(c, y, get(f, c, "y"), 1e-12);
        th_backward_with(y, get(f, c, "grad_y"));
        th_expect_close_scaled(c, tg_tensor_grad(x), get(f, c, "grad_x"), 1e-12);
        th_expect_close_scaled(c, tg_tensor_grad(w), get(f, c, "grad_w"), 1e-12);
        th_expect_close_scaled(c, tg_tensor_grad(b), get(f, c, "grad_b"), 1e-12);
        /* the module with the same params and weights gives the op's bits */
        const tg_tensor *wg = get(f, c, "w");
        const int nsp = tg_tensor_ndim(wg) - 2;
        tg_module *m = NULL;
        tg_rng rng;
        tg_rng_init(&rng, 1);
        OK(tg_nn_conv_new(&m, nsp, tg_tensor_dim(wg, 1), tg_tensor_dim(wg, 0),
                          tg_tensor_shape(wg) + 2, &p, true, &rng));
        OK(tg_module_to_dtype(m, TG_F64));
        OK(tg_tensor_copy_(tg_module_find(m, "weight"), wg));
        OK(tg_tensor_copy_(tg_module_find(m, "bias"), get(f, c, "b")));
        tg_tensor *ym = NULL;
        OK(tg_module_forward(m, &ym, x));
        th_expect_same_bits(c, ym, ym, y);
        tg_module_release(m);
        th_release_all(5, (tg_tensor *[]){x, w, b, y, ym});
    }
    tg_st_free(f);
}

Test(pad, conv_transpose_takes_zero_padding_only)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){1, 2, 4, 4}, 1);
    tg_tensor *w = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 3, 3, 3}, 2), *y = NULL;
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    tg_conv_params_set_padding(&p, 1);
    p.padding_mode = TG_PAD_REFLECT;
    cr_assert(eq(int, tg_conv_transpose(&y, x, w, NULL, &p), TG_EINVAL));
    th_expect_in(tg_error_message(), "conv_transpose: padding_mode=1: only TG_PAD_CONSTANT");
    cr_assert(y == NULL);
    /* so does the module, refused when made; and a Conv takes a real mode only */
    tg_module *m = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 1);
    cr_assert(eq(int, tg_nn_conv_transpose_new(&m, 2, 2, 3, (int64_t[]){3, 3}, &p, true, &rng),
                 TG_EINVAL));
    th_expect_in(tg_error_message(), "padding_mode=1 must be TG_PAD_CONSTANT");
    p.padding_mode = (tg_pad_mode)7;
    cr_assert(eq(int, tg_nn_conv_new(&m, 2, 2, 3, (int64_t[]){3, 3}, &p, true, &rng), TG_EINVAL));
    cr_assert(m == NULL);
    p.padding_mode = TG_PAD_REFLECT;
    /* the weight gradient's op pads with zeros only */
    cr_assert(eq(int, tg_conv_weight_grad(&y, x, x, 4, (int64_t[]){2, 2, 3, 3}, &p), TG_EINVAL));
    th_expect_in(tg_error_message(), "padding_mode=1: only zero padding here");
    th_release_all(2, (tg_tensor *[]){x, w});
}

/* A quantized model pads as the float one: its int8 conv's output is the
 * float output to within the quantization (and not the zero-padded one at
 * the borders). */
Test(pad, a_quantized_conv_keeps_its_padding_mode)
{
    tg_rng rng;
    tg_rng_init(&rng, 3);
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    tg_conv_params_set_padding(&p, 1);
    p.padding_mode = TG_PAD_REPLICATE;
    tg_module *conv = NULL, *seq = NULL, *q = NULL;
    OK(tg_nn_conv_new(&conv, 2, 2, 3, (int64_t[]){3, 3}, &p, true, &rng));
    OK(tg_nn_sequential_new(&seq));
    OK(tg_nn_sequential_append(seq, conv));
    tg_tensor *x0 = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 2, 6, 6}, 4), *x = NULL;
    OK(tg_add_scalar(&x, x0, 3.0));   /* far from 0: zero padding would show */
    tg_tensor_release(x0);
    OK(tg_quantize_model(&q, seq, 1, (tg_tensor *[]){x}, NULL));
    tg_tensor *yf = NULL, *yq = NULL;
    tg_no_grad_begin();
    OK(tg_module_forward(seq, &yf, x));
    OK(tg_module_forward(q, &yq, x));
    tg_no_grad_end();
    double top = 0, err = 0;
    for (int64_t i = 0; i < tg_tensor_numel(yf); i++) {
        top = fmax(top, fabs(th_at(yf, i)));
        err = fmax(err, fabs(th_at(yq, i) - th_at(yf, i)));
    }
    cr_assert(err <= 0.05 * top, "int8 %g off the float output (largest %g)", err, top);
    tg_qlayer_info info;
    OK(tg_quantized_layer_info(tg_module_child(q, "0"), &info));
    cr_assert(eq(int, info.p.padding_mode, TG_PAD_REPLICATE));
    cr_assert(eq(i64, info.p.padding[0][0], 1));
    th_release_all(3, (tg_tensor *[]){x, yf, yq});
    tg_module_release(q);
    tg_module_release(seq);
}
