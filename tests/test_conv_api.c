/* tests/test_conv_api.c - the conv API around the kernels: output sizes,
 * output_padding_for, activation names, the PyTorch weight layouts, every
 * caller error (status, message, nothing written) and the AMP policies. */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/autograd.h"
#include "tapegrad/conv.h"
#include "tapegrad/ops.h"

static uint64_t rng_state = 88172645463325252ull;

/* A new tensor of uniform values in [-1, 1). */
static tg_tensor *mk_rand(tg_dtype dt, int nd, const int64_t *shape)
{
    return th_rand_tensor(&rng_state, dt, nd, shape, -1.0, 1.0);
}

/* ---- helpers: output sizes, output_padding_for, activation names ---- */

Test(conv_api, output_sizes)
{
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = 2; p.dilation[0] = 2; p.padding[0][0] = 1; p.padding[0][1] = 2;
    p.output_padding[0] = 1;
    int64_t in[2] = {5, 7}, k[2] = {3, 2}, out[2] = {0, 0};
    /* convT: (5-1)*2 - 1 - 2 + 2*2 + 1 + 1 = 11;  axis 1: (7-1) + 1 + 1 = 8 */
    cr_assert(eq(int, tg_conv_transpose_output_size(out, 2, in, k, &p), TG_OK));
    cr_assert(eq(i64, out[0], 11));
    cr_assert(eq(i64, out[1], 8));
    /* conv: floor((5 + 3 - 4 - 1) / 2) + 1 = 2;  axis 1: 7 - 1 = 6 */
    cr_assert(eq(int, tg_conv_output_size(out, 2, in, k, &p), TG_OK));
    cr_assert(eq(i64, out[0], 2));
    cr_assert(eq(i64, out[1], 6));
    /* a kernel wider than the padded input: error, out untouched */
    int64_t big[1] = {9};
    cr_assert(eq(int, tg_conv_output_size(out, 1, in, big, &p), TG_EINVAL));
    cr_assert(eq(i64, out[0], 2));
    cr_assert(eq(int, tg_conv_output_size(out, 4, in, k, &p), TG_EINVAL));
}

Test(conv_api, output_padding_for)
{
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = 2; p.padding[0][0] = p.padding[0][1] = 1;
    int64_t in[2] = {8, 4}, k[2] = {3, 3}, want[2] = {16, 7};
    /* axis 0: base (8-1)*2 - 2 + 2 + 1 = 15, reachable 15..16 -> op 1;
     * axis 1: base 3 - 0 + 2 + 1 = 6, stride 1 -> only 6: 7 unreachable */
    cr_assert(eq(int, tg_conv_transpose_output_padding_for(&p, 2, in, k, want), TG_EINVAL));
    cr_assert(eq(i64, p.output_padding[0], 0));   /* unchanged */
    cr_assert(eq(str, (char *)tg_error_message(),
                 "conv_transpose2d: output size 7 on axis 1 cannot be reached: reachable 6..6"));
    want[1] = 6;
    cr_assert(eq(int, tg_conv_transpose_output_padding_for(&p, 2, in, k, want), TG_OK));
    cr_assert(eq(i64, p.output_padding[0], 1));
    cr_assert(eq(i64, p.output_padding[1], 0));
    int64_t got[2];
    cr_assert(eq(int, tg_conv_transpose_output_size(got, 2, in, k, &p), TG_OK));
    cr_assert(eq(i64, got[0], 16));
    want[0] = 17;
    cr_assert(eq(int, tg_conv_transpose_output_padding_for(&p, 2, in, k, want), TG_EINVAL));
    cr_assert(eq(str, (char *)tg_error_message(),
                 "conv_transpose2d: output size 17 on axis 0 cannot be reached: reachable 15..16"));
    cr_assert(eq(i64, p.output_padding[0], 1));
}

Test(conv_api, activation_names_and_parse)
{
    const char *names[] = {"none", "relu", "leaky_relu", "tanh",
                           "sigmoid", "silu", "gelu", "gelu_tanh"};
    for (int a = 0; a < TG_ACT_COUNT; a++) {
        cr_assert(eq(str, (char *)tg_activation_name((tg_activation)a), (char *)names[a]));
        tg_activation got = TG_ACT_COUNT;
        cr_assert(eq(int, tg_activation_parse(names[a], &got, NULL), TG_OK));
        cr_assert(eq(int, got, a));
    }
    tg_activation act = TG_ACT_RELU;
    double slope = 0;
    cr_assert(eq(int, tg_activation_parse("leaky_relu:0.2", &act, &slope), TG_OK));
    cr_assert(eq(int, act, TG_ACT_LEAKY_RELU));
    cr_assert(epsilon_eq(dbl, slope, 0.2, 1e-15));
    cr_assert(eq(int, tg_activation_parse("leaky_relu", &act, &slope), TG_OK));
    cr_assert(epsilon_eq(dbl, slope, 0.01, 1e-15));
    cr_assert(eq(int, tg_activation_parse("", &act, &slope), TG_OK));
    cr_assert(eq(int, act, TG_ACT_NONE));
    const char *bad[] = {"relux", "relu:1", "leaky_relu:", "leaky_relu:x", "tan"};
    for (int i = 0; i < 5; i++) {
        act = TG_ACT_GELU;
        cr_assert(eq(int, tg_activation_parse(bad[i], &act, &slope), TG_EINVAL), "%s", bad[i]);
        cr_assert(eq(int, act, TG_ACT_GELU));
    }
    cr_assert(eq(str, (char *)tg_activation_name((tg_activation)42), "?"));
}

/* ---- weight layouts ---- */

/* PyTorch w (C_in 2, C_out/g 2, K 2) with w[ci, co, k] = 100 ci + 10 co + k.
 * KDHW_CI_CO[kk, ci, co] = w[ci, co, 1-kk] and KDHW_CO_CI[kk, co, ci] likewise. */
Test(conv_api, weight_layout_flipped_taps_by_hand)
{
    double v[8];
    for (int ci = 0; ci < 2; ci++)
        for (int co = 0; co < 2; co++)
            for (int k = 0; k < 2; k++) v[(ci * 2 + co) * 2 + k] = 100 * ci + 10 * co + k;
    int64_t ws[3] = {2, 2, 2};
    tg_tensor *w = th_tensor_from(TG_F32, 3, ws, v), *a = NULL, *b = NULL, *back = NULL;
    const double want_cico[8] = {1, 11, 101, 111, 0, 10, 100, 110};
    const double want_coci[8] = {1, 101, 11, 111, 0, 100, 10, 110};
    cr_assert(eq(int, tg_conv_weight_from_pytorch(&a, w, TG_LAYOUT_KDHW_CI_CO, 1), TG_OK));
    cr_assert(eq(int, tg_conv_weight_from_pytorch(&b, w, TG_LAYOUT_KDHW_CO_CI, 1), TG_OK));
    double *va = th_doubles(a), *vb = th_doubles(b);
    for (int i = 0; i < 8; i++) {
        cr_assert(ieee_ulp_eq(dbl, va[i], want_cico[i], 0));
        cr_assert(ieee_ulp_eq(dbl, vb[i], want_coci[i], 0));
    }
    cr_assert(eq(int, tg_conv_weight_to_pytorch(&back, b, TG_LAYOUT_KDHW_CO_CI, 1), TG_OK));
    double *vback = th_doubles(back);
    for (int i = 0; i < 8; i++) cr_assert(ieee_ulp_eq(dbl, vback[i], v[i], 0));
    free(va); free(vb); free(vback);
    tg_tensor_release(w); tg_tensor_release(a); tg_tensor_release(b); tg_tensor_release(back);
}

Test(conv_api, weight_layout_round_trips)
{
    for (int nsp = 1; nsp <= 3; nsp++)
        for (int lay = TG_LAYOUT_PYTORCH; lay <= TG_LAYOUT_KDHW_CO_CI; lay++) {
            int64_t ws[5] = {3, 2, 2, 3, 2};
            tg_tensor *w = mk_rand(TG_F64, nsp + 2, ws), *k = NULL, *back = NULL;
            cr_assert(eq(int, tg_conv_weight_from_pytorch(&k, w, (tg_weight_layout)lay, nsp), TG_OK));
            if (lay == TG_LAYOUT_KDHW_CI_CO) {
                cr_assert(eq(i64, tg_tensor_dim(k, nsp), 3));
                cr_assert(eq(i64, tg_tensor_dim(k, nsp + 1), 2));
            }
            cr_assert(eq(int, tg_conv_weight_to_pytorch(&back, k, (tg_weight_layout)lay, nsp), TG_OK));
            cr_assert(tg_tensor_same_shape(w, back));
            double *a = th_doubles(w), *b = th_doubles(back);
            for (int64_t i = 0; i < tg_tensor_numel(w); i++) cr_assert(ieee_ulp_eq(dbl, a[i], b[i], 0));
            free(a); free(b);
            tg_tensor_release(w); tg_tensor_release(k); tg_tensor_release(back);
        }
    int64_t ws[4] = {2, 2, 2, 2};
    tg_tensor *w = mk_rand(TG_F32, 4, ws), *o = NULL;
    cr_assert(eq(int, tg_conv_weight_to_pytorch(&o, w, TG_LAYOUT_KDHW_CI_CO, 1), TG_ESHAPE));
    cr_assert(eq(int, tg_conv_weight_to_pytorch(&o, w, (tg_weight_layout)9, 2), TG_EINVAL));
    cr_assert(eq(int, tg_conv_weight_from_pytorch(&o, w, TG_LAYOUT_KDHW_CI_CO, 4), TG_EINVAL));
    cr_assert(eq(ptr, o, NULL));
    tg_tensor_release(w);
}

/* ---- caller errors: status, message, nothing written ---- */

typedef struct err_env {
    tg_tensor *x, *w, *b;      /* a valid 2-D conv_transpose: x (1,4,3,3), w (4,3,2,2) */
    tg_conv_params p;
} err_env;

static err_env err_setup(void)
{
    err_env e;
    int64_t xs[4] = {1, 4, 3, 3}, ws[4] = {4, 3, 2, 2}, bs[1] = {3};
    e.x = mk_rand(TG_F32, 4, xs);
    e.w = mk_rand(TG_F32, 4, ws);
    e.b = mk_rand(TG_F32, 1, bs);
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    e.p = p;
    return e;
}

static void err_free(err_env *e)
{
    tg_tensor_release(e->x);
    tg_tensor_release(e->w);
    tg_tensor_release(e->b);
}

static void expect_err(bool transpose, tg_tensor *x, tg_tensor *w, tg_tensor *b,
                       const tg_conv_params *p, int status, const char *msg)
{
    tg_tensor *out = NULL;
    uint64_t vx = x ? tg_tensor_version(x) : 0;
    int rc = transpose ? tg_conv_transpose(&out, x, w, b, p) : tg_conv(&out, x, w, b, p);
    cr_assert(eq(int, rc, status), "%s: %s", msg, tg_error_message());
    cr_assert(eq(ptr, out, NULL));
    cr_assert(strstr(tg_error_message(), msg) != NULL, "message \"%s\" lacks \"%s\"",
              tg_error_message(), msg);
    if (x) cr_assert(eq(u64, tg_tensor_version(x), vx));
}

Test(conv_api, errors_shapes_and_channels)
{
    err_env e = err_setup();
    int64_t s2[2] = {4, 3}, s3[3] = {4, 3, 2}, b4[1] = {4}, b2d[2] = {1, 3};
    tg_tensor *x2 = mk_rand(TG_F32, 2, s2), *w3 = mk_rand(TG_F32, 3, s3);
    tg_tensor *bad_b = mk_rand(TG_F32, 1, b4), *b_2d = mk_rand(TG_F32, 2, b2d);
    /* the weight's rank names the op; x may lack only the batch dim */
    expect_err(true, x2, e.w, NULL, &e.p, TG_ESHAPE,
               "conv_transpose2d: x must be 4-D (B, C, 2 spatial) like the 4-D weight, or 3-D "
               "without the batch dim; got 2-D");
    expect_err(false, e.x, w3, NULL, &e.p, TG_ESHAPE,
               "conv1d: x must be 3-D (B, C, 1 spatial) like the 3-D weight, or 2-D without "
               "the batch dim; got 4-D");
    expect_err(true, e.x, bad_b, NULL, &e.p, TG_ESHAPE, "conv_transpose2d: weight must be 4-D "
                                                        "like x, got 1-D");
    expect_err(true, x2, bad_b, NULL, &e.p, TG_ESHAPE, "x must be 3-D, 4-D or 5-D");
    expect_err(true, e.x, e.w, bad_b, &e.p, TG_ESHAPE, "bias must be 1-D of length C_out=3");
    expect_err(true, e.x, e.w, b_2d, &e.p, TG_ESHAPE, "bias must be 1-D");
    expect_err(false, e.x, e.w, NULL, &e.p, TG_ESHAPE,
               "conv2d: weight.shape[1]=3 times groups=1 must equal x's channels C_in=4");
    int64_t ws2[4] = {3, 3, 2, 2};
    tg_tensor *w_ci = mk_rand(TG_F32, 4, ws2);
    expect_err(true, e.x, w_ci, NULL, &e.p, TG_ESHAPE, "weight.shape[0]=3 must equal x's channels C_in=4");
    tg_conv_params p = e.p;
    p.groups = 3;
    expect_err(true, e.x, e.w, NULL, &p, TG_EINVAL, "groups=3 must divide C_in=4");
    p.groups = 0;
    expect_err(true, e.x, e.w, NULL, &p, TG_EINVAL, "groups=0 must be >= 1");
    p.groups = 2;   /* conv: C_in 4 = 2 * 2 but C_out 4 ... use w (3, 2, 2, 2) */
    int64_t ws3[4] = {3, 2, 2, 2};
    tg_tensor *w_co = mk_rand(TG_F32, 4, ws3);
    expect_err(false, e.x, w_co, NULL, &p, TG_EINVAL, "conv2d: groups=2 must divide C_out=3");
    expect_err(true, NULL, e.w, NULL, &e.p, TG_EINVAL, "x must not be NULL");
    expect_err(false, e.x, NULL, NULL, &e.p, TG_EINVAL, "weight must not be NULL");
    /* a zero extent anywhere but the batch: the message says which */
    int64_t xc0[4] = {1, 0, 3, 3}, xh0[4] = {1, 4, 3, 0}, wk0[4] = {4, 3, 2, 0};
    tg_tensor *x_c0 = mk_rand(TG_F32, 4, xc0), *x_h0 = mk_rand(TG_F32, 4, xh0);
    tg_tensor *w_k0 = mk_rand(TG_F32, 4, wk0);
    expect_err(true, x_c0, e.w, NULL, &e.p, TG_ESHAPE, "x (1, 0, 3, 3) has C_in = 0");
    expect_err(true, x_h0, e.w, NULL, &e.p, TG_ESHAPE,
               "x (1, 4, 3, 0) has a spatial extent of 0: it must be >= 1");
    expect_err(false, e.x, w_k0, NULL, &e.p, TG_ESHAPE,
               "weight (4, 3, 2, 0) has extent 0 in dim 3: every extent must be >= 1");
    tg_tensor *all[9] = {x2, w3, bad_b, b_2d, w_ci, w_co, x_c0, x_h0, w_k0};
    for (int i = 0; i < 9; i++) tg_tensor_release(all[i]);
    err_free(&e);
}

Test(conv_api, errors_parameters)
{
    err_env e = err_setup();
    tg_conv_params p = e.p;
    p.stride[1] = 0;
    expect_err(true, e.x, e.w, NULL, &p, TG_EINVAL, "conv_transpose2d: stride[1]=0 must be >= 1");
    p = e.p;
    p.dilation[0] = -1;
    expect_err(true, e.x, e.w, NULL, &p, TG_EINVAL, "dilation[0]=-1 must be >= 1");
    p = e.p;
    p.padding[1][1] = -2;
    expect_err(true, e.x, e.w, NULL, &p, TG_EINVAL, "padding[1]=(0, -2) must be >= 0");
    p = e.p;
    p.output_padding[1] = 2;
    expect_err(true, e.x, e.w, NULL, &p, TG_EINVAL,
               "conv_transpose2d: output_padding[1]=2 must be < max(stride, dilation)=2");
    p = e.p;
    p.padding[0][0] = p.padding[0][1] = 3;   /* (3-1)*2 - 6 + 1 + 1 = 0 */
    expect_err(true, e.x, e.w, NULL, &p, TG_EINVAL, "output extent on axis 0 would be 0");
    p = e.p;
    p.act = (tg_activation)77;
    expect_err(true, e.x, e.w, NULL, &p, TG_EINVAL, "act=77 is not a tg_activation");
    p = e.p;
    p.algo = (tg_conv_algo)5;
    expect_err(true, e.x, e.w, NULL, &p, TG_EINVAL, "algo=5 is not a tg_conv_algo");
    /* conv: the dilated kernel does not fit */
    int64_t ws[4] = {2, 4, 3, 3};
    tg_tensor *w = mk_rand(TG_F32, 4, ws);
    p = e.p;
    p.dilation[1] = 2;
    expect_err(false, e.x, w, NULL, &p, TG_EINVAL, "conv2d: output extent on axis 1 would be 0");
    tg_tensor_release(w);
    err_free(&e);
}

/* Parameters near the int64 limits are errors with a message, never a signed
 * overflow (the sanitizer build reports one) or a wrapped allocation size. */
Test(conv_api, errors_huge_parameters_do_not_overflow)
{
    err_env e = err_setup();
    tg_conv_params p = e.p;
    p.stride[0] = TG_CONV_MAX_PARAM + 1;
    expect_err(true, e.x, e.w, NULL, &p, TG_EINVAL, "must each be <= 2147483647");
    p = e.p;
    p.padding[1][0] = INT64_MAX;
    expect_err(true, e.x, e.w, NULL, &p, TG_EINVAL,
               "conv_transpose2d: axis 1: stride=2, dilation=1, padding=(9223372036854775807, 0)");
    /* In range, but the output (1, 3, 2^32+1, 2^32+1) has more bytes than an
     * int64 holds: x is 3x3, so each extent is 2*(2^31-1) + 2 - 1 + 1. */
    p = e.p;
    p.stride[0] = p.stride[1] = TG_CONV_MAX_PARAM;
    expect_err(true, e.x, e.w, NULL, &p, TG_EINVAL,
               "conv_transpose2d: the output shape (1, 3, 4294967296, 4294967296) is too "
               "large: its byte count overflows an int64");
    /* A pointwise conv3d of 64 channels into 1 padded to about 2^58 positions:
     * the output's bytes (2^61) fit, the column buffer's (64 times more) not. */
    int64_t xs3[5] = {1, 64, 1, 1, 1}, ws3[5] = {1, 64, 1, 1, 1};
    tg_tensor *x3 = mk_rand(TG_F32, 5, xs3), *w3 = mk_rand(TG_F32, 5, ws3);
    p = e.p;
    for (int a = 0; a < 3; a++) {
        p.stride[a] = 1;
        p.padding[a][0] = p.padding[a][1] = a == 0 ? (int64_t)1 << 19 : (int64_t)1 << 18;
    }
    expect_err(false, x3, w3, NULL, &p, TG_EINVAL,
               "conv3d: the column buffer of one sample (C*prod(kernel), prod(positions)) is "
               "too large");
    tg_tensor_release(x3);
    tg_tensor_release(w3);
    /* Extents from the size helpers: terms past INT64_MAX/4 are refused. */
    int64_t in[1] = {INT64_MAX / 2}, k[1] = {3}, out[1] = {-7};
    p = e.p;
    cr_assert(eq(int, tg_conv_transpose_output_size(out, 1, in, k, &p), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "the output extent on axis 0 overflows") != NULL,
              "%s", tg_error_message());
    cr_assert(eq(i64, out[0], -7));
    in[0] = 5;
    k[0] = INT64_MAX / 2;
    p.dilation[0] = 2;
    cr_assert(eq(int, tg_conv_output_size(out, 1, in, k, &p), TG_EINVAL));
    cr_assert(eq(int, tg_conv_transpose_output_padding_for(&p, 1, in, k, in), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "overflows") != NULL, "%s", tg_error_message());
    /* the largest accepted stride still gives an exact extent: (5-1)*s + 2 + 1 */
    k[0] = 3;
    p = e.p;
    p.stride[0] = TG_CONV_MAX_PARAM;
    cr_assert(eq(int, tg_conv_transpose_output_size(out, 1, in, k, &p), TG_OK));
    cr_assert(eq(i64, out[0], 4 * TG_CONV_MAX_PARAM + 3));
    err_free(&e);
}

Test(conv_api, errors_dtypes)
{
    err_env e = err_setup();
    int64_t xs[4] = {1, 4, 3, 3}, ws[4] = {4, 3, 2, 2};
    tg_tensor *xi = NULL, *wi = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&xi, TG_I32, 4, xs), TG_OK));
    cr_assert(eq(int, tg_tensor_zeros(&wi, TG_I32, 4, ws), TG_OK));
    expect_err(true, xi, wi, NULL, &e.p, TG_EDTYPE, "x must be a float tensor, got i32");
    expect_err(true, e.x, wi, NULL, &e.p, TG_EDTYPE, "weight dtype i32 must match x dtype f32");
    tg_tensor_release(xi);
    tg_tensor_release(wi);
    err_free(&e);
}

Test(conv_api, errors_weight_grad)
{
    int64_t zs[3] = {1, 2, 5}, us[3] = {1, 3, 4}, wshape[3] = {3, 2, 2};
    tg_tensor *z = mk_rand(TG_F64, 3, zs), *u = mk_rand(TG_F64, 3, us), *out = NULL;
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    cr_assert(eq(int, tg_conv_weight_grad(&out, z, u, 3, wshape, &p), TG_OK));
    tg_tensor_release(out);
    out = NULL;
    int64_t bad_w[3] = {2, 2, 2};   /* wshape[0] != u's channels */
    cr_assert(eq(int, tg_conv_weight_grad(&out, z, u, 3, bad_w, &p), TG_ESHAPE));
    int64_t us2[3] = {1, 3, 2};     /* extent 2 is not conv's 4 */
    tg_tensor *u2 = mk_rand(TG_F64, 3, us2);
    cr_assert(eq(int, tg_conv_weight_grad(&out, z, u2, 3, wshape, &p), TG_ESHAPE));
    cr_assert(eq(int, tg_conv_weight_grad(&out, z, u, 2, wshape, &p), TG_EINVAL));
    cr_assert(eq(int, tg_conv_weight_grad(&out, NULL, u, 3, wshape, &p), TG_EINVAL));
    cr_assert(eq(ptr, out, NULL));
    tg_tensor_release(z); tg_tensor_release(u); tg_tensor_release(u2);
}

/* AMP: conv is LOWER_PRECISION (autocast dtype inside a scope), conv_transpose
 * and conv_weight_grad PROMOTE (mixed floats widen under autocast; outside
 * it conv_transpose refuses them, as torch). */
Test(conv_api, amp_policies)
{
    int64_t xs[3] = {1, 2, 4}, ws[3] = {2, 2, 3};
    tg_tensor *x = mk_rand(TG_F32, 3, xs), *w64 = mk_rand(TG_F64, 3, ws), *y = NULL;
    cr_assert(eq(int, tg_conv_transpose(&y, x, w64, NULL, NULL), TG_EDTYPE));
    th_expect_in(tg_error_message(), "conv_transpose1d: weight is f64 but x is f32");
    cr_assert(y == NULL);
    tg_tensor *w = NULL;
    cr_assert(eq(int, tg_tensor_to_dtype(&w, w64, TG_F32), TG_OK));
    cr_assert(eq(int, tg_autocast_begin(TG_BF16), TG_OK));
    y = NULL;
    cr_assert(eq(int, tg_conv(&y, x, w, NULL, NULL), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_dtype(y), TG_BF16));
    tg_tensor_release(y);
    y = NULL;
    cr_assert(eq(int, tg_conv_transpose(&y, x, w, NULL, NULL), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    tg_tensor_release(y);
    cr_assert(eq(int, tg_autocast_end(), TG_OK));
    tg_op_info info;
    cr_assert(eq(int, tg_op_info_find("conv", &info), TG_OK));
    cr_assert(eq(int, info.amp, TG_AMP_LOWER_PRECISION));
    cr_assert(info.has_double_backward);
    cr_assert(eq(int, tg_op_info_find("conv_transpose", &info), TG_OK));
    cr_assert(eq(int, info.amp, TG_AMP_PROMOTE));
    cr_assert(eq(int, tg_op_info_find("conv_weight_grad", &info), TG_OK));
    cr_assert(eq(int, info.amp, TG_AMP_PROMOTE));
    tg_tensor_release(x); tg_tensor_release(w); tg_tensor_release(w64);
}

/* An unbatched x (C, S...), as torch: the batched result's one sample, and
 * x's gradient of x's shape, for Conv and ConvTranspose of every rank. */
Test(conv_api, unbatched_input_is_one_sample)
{
    for (int nsp = 1; nsp <= 3; nsp++)
        for (int tr = 0; tr < 2; tr++) {
            int64_t xs[5] = {1, 2}, ws[5] = {2, 3};   /* C_in 2; C_out 3 */
            if (tr) ws[0] = 2, ws[1] = 3;
            else ws[0] = 3, ws[1] = 2;
            for (int a = 0; a < nsp; a++) xs[2 + a] = 4, ws[2 + a] = 2;
            tg_tensor *xb = mk_rand(TG_F64, nsp + 2, xs), *w = mk_rand(TG_F64, nsp + 2, ws);
            tg_tensor *x = NULL, *yb = NULL, *y = NULL, *sb = NULL, *s = NULL;
            cr_assert(eq(int, tg_tensor_clone(&x, xb), TG_OK));
            int64_t us[4];
            memcpy(us, xs + 1, sizeof(int64_t) * (size_t)(nsp + 1));
            tg_tensor *xu = NULL;
            cr_assert(eq(int, tg_reshape(&xu, x, nsp + 1, us), TG_OK));
            tg_tensor_release(x);
            x = NULL;
            cr_assert(eq(int, tg_tensor_contiguous(&x, xu), TG_OK));
            tg_tensor_release(xu);
            tg_tensor_set_requires_grad(x, true);
            tg_tensor_set_requires_grad(xb, true);
            tg_conv_params p = TG_CONV_PARAMS_INIT;
            p.stride[0] = p.stride[1] = p.stride[2] = 2;
            int (*f)(tg_tensor **, tg_tensor *, tg_tensor *, tg_tensor *, const tg_conv_params *) =
                tr ? tg_conv_transpose : tg_conv;
            cr_assert(eq(int, f(&yb, xb, w, NULL, &p), TG_OK), "%s", tg_error_message());
            cr_assert(eq(int, f(&y, x, w, NULL, &p), TG_OK), "%s", tg_error_message());
            cr_assert(eq(int, tg_tensor_ndim(y), nsp + 1));
            cr_assert(eq(i64, tg_tensor_numel(y), tg_tensor_numel(yb)));
            for (int64_t i = 0; i < tg_tensor_numel(y); i++)
                cr_assert(eq(dbl, th_at(y, i), th_at(yb, i)));
            cr_assert(eq(int, tg_sum(&sb, yb), TG_OK));
            cr_assert(eq(int, tg_sum(&s, y), TG_OK));
            cr_assert(eq(int, tg_backward(sb, NULL, NULL), TG_OK));
            cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_OK), "%s", tg_error_message());
            cr_assert(eq(int, tg_tensor_ndim(tg_tensor_grad(x)), nsp + 1));
            for (int64_t i = 0; i < tg_tensor_numel(x); i++)
                cr_assert(eq(dbl, th_at(tg_tensor_grad(x), i), th_at(tg_tensor_grad(xb), i)));
            tg_tensor_release(s);
            tg_tensor_release(sb);
            tg_tensor_release(y);
            tg_tensor_release(yb);
            tg_tensor_release(x);
            tg_tensor_release(w);
            tg_tensor_release(xb);
        }
}
