/* tests/test_quant_model_fold.c - BatchNorm folding (tg_fold_batchnorm,
 * and tg_quantize_model's fold_batchnorm and fuse_relu options;
 * tapegrad/quant.h).
 *
 * Oracles: BatchNorm folding against the formula written out per weight
 * element and against the float modules, the folded quantized layer
 * against an error bound derived from its scales; the structure of the
 * quantized model with and without folding, and the float model it came
 * from left bit for bit as it was. */
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "quant_model_fixtures.h"
#include "tapegrad/nn.h"
#include "tapegrad/quant.h"
#include "tapegrad/status.h"

/* Eval-mode statistics and affine parameters away from the defaults (some
 * gamma negative); eps is the module's. */
static void randomize_bn(tg_module *bn, tg_rng *rng)
{
    const char *names[] = {"weight", "bias", "running_mean", "running_var"};
    const double lo[] = {0.5, -0.5, -0.3, 0.01}, hi[] = {1.5, 0.5, 0.3, 0.5};
    for (int k = 0; k < 4; k++) {
        tg_tensor *t = tg_module_find(bn, names[k]);
        for (int64_t c = 0; t && c < tg_tensor_numel(t); c++) {
            double u = lo[k] + (hi[k] - lo[k]) * (double)(xorshift(rng) >> 11) / 9007199254740992.0;
            if (k == 0 && c % 3 == 1) u = -u;
            tg_tensor_set_flat(t, c, u);
        }
    }
}

typedef struct fcase {
    int kind;            /* 0 linear, 1 conv, 2 conv_transpose */
    int nsp;             /* spatial dims (conv) */
    int64_t c_in, c_out, groups, k;
    bool bias;
    int64_t unflatten;   /* linear: > 0 makes out_f = c_out * unflatten, BN over c_out */
    int64_t xs[5];
    int xnd;
} fcase;

static tg_module *fcase_layer(const fcase *c, tg_rng *rng)
{
    tg_module *l = NULL;
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.groups = c->groups;
    p.stride[0] = p.stride[1] = 2;
    p.padding[0][0] = p.padding[0][1] = p.padding[1][0] = p.padding[1][1] = 1;
    const int64_t k[3] = {c->k, c->k, c->k};
    if (c->kind == 0) {
        const int64_t out_f = c->c_out * (c->unflatten > 0 ? c->unflatten : 1);
        cr_assert(eq(int, tg_nn_linear_new(&l, c->c_in, out_f, c->bias, rng), TG_OK));
    } else if (c->kind == 1) {
        cr_assert(eq(int, tg_nn_conv_new(&l, c->nsp, c->c_in, c->c_out, k, &p, c->bias, rng), TG_OK));
    } else {
        cr_assert(eq(int, tg_nn_conv_transpose_new(&l, c->nsp, c->c_in, c->c_out, k, &p, c->bias, rng),
                     TG_OK));
    }
    return l;
}

/* The output channel of weight element (i0, i1, ...) by the rule of torch's
 * layouts: Linear (out_f, in) feature i0 in channel i0 / r; Conv (C_out, ...)
 * i0; ConvTranspose (C_in, C_out/G, ...): (i0 / (C_in/G)) * (C_out/G) + i1. */
static int64_t fcase_channel(const fcase *c, int64_t i0, int64_t i1)
{
    if (c->kind == 0) return i0 / (c->unflatten > 0 ? c->unflatten : 1);
    if (c->kind == 1) return i0;
    return (i0 / (c->c_in / c->groups)) * (c->c_out / c->groups) + i1;
}

Test(quant_model_fold, fold_batchnorm_is_exact_in_float)
{
    static const fcase cases[] = {
        {2, 2, 4, 6, 2, 4, true, 0, {2, 4, 5, 5}, 4},     /* ConvTranspose2d, groups 2 */
        {2, 1, 6, 9, 3, 3, false, 0, {2, 6, 7}, 3},       /* ConvTranspose1d, groups 3, no bias */
        {1, 2, 4, 6, 2, 3, false, 0, {2, 4, 6, 6}, 4},    /* Conv2d, groups 2 */
        {1, 3, 2, 4, 1, 3, true, 0, {1, 2, 5, 5, 5}, 5},  /* Conv3d */
        {0, 0, 5, 7, 1, 0, true, 0, {3, 5}, 2},           /* Linear + BatchNorm1d */
        {0, 0, 5, 3, 1, 0, false, 4, {3, 5}, 2},          /* Linear + Unflatten(1, (3, 2, 2)) + BN2d */
    };
    const double eps = 1e-3;   /* not the default: the fold must use the module's */
    tg_rng rng;
    tg_rng_init(&rng, 21);
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        const fcase *c = &cases[ci];
        tg_module *l = fcase_layer(c, &rng), *bn = NULL, *seq = NULL, *unf = NULL, *folded = NULL;
        const int bn_sp = c->kind == 0 ? (c->unflatten > 0 ? 2 : 0) : c->nsp;
        cr_assert(eq(int, tg_nn_batchnorm_new(&bn, bn_sp, c->c_out, eps, 0.1, true, true), TG_OK));
        randomize_bn(bn, &rng);
        cr_assert(eq(int, tg_fold_batchnorm(&folded, l, bn), TG_OK), "case %zu: %s", ci,
                  tg_error_message());
        cr_assert(eq(str, (char *)tg_module_type_name(folded), (char *)tg_module_type_name(l)));
        cr_assert(tg_module_is_training(bn), "the probe restores bn's training flag");
        /* weights and bias against the formula, element by element */
        tg_tensor *w = tg_module_find(l, "weight"), *b = tg_module_find(l, "bias");
        tg_tensor *w2 = tg_module_find(folded, "weight"), *b2 = tg_module_find(folded, "bias");
        cr_assert(w2 && b2 && tg_tensor_same_shape(w, w2));
        const int64_t d0 = tg_tensor_dim(w, 0), d1 = tg_tensor_dim(w, 1);
        const int64_t inner = tg_tensor_numel(w) / (d0 * d1);
        double g, var, mean, beta, v;
        for (int64_t i0 = 0; i0 < d0; i0++)
            for (int64_t i1 = 0; i1 < d1; i1++)
                for (int64_t r = 0; r < inner; r++) {
                    const int64_t ch = fcase_channel(c, i0, i1), i = (i0 * d1 + i1) * inner + r;
                    tg_tensor_get_flat(tg_module_find(bn, "weight"), ch, &g);
                    tg_tensor_get_flat(tg_module_find(bn, "running_var"), ch, &var);
                    tg_tensor_get_flat(w, i, &v);
                    cr_assert(epsilon_eq(dbl, th_at(w2, i), v * g / sqrt(var + eps), 1e-6),
                              "case %zu weight %lld", ci, (long long)i);
                }
        const int64_t n_out = tg_tensor_numel(b2);
        for (int64_t f = 0; f < n_out; f++) {
            const int64_t ch = c->kind == 0 ? fcase_channel(c, f, 0) : f;
            tg_tensor_get_flat(tg_module_find(bn, "weight"), ch, &g);
            tg_tensor_get_flat(tg_module_find(bn, "bias"), ch, &beta);
            tg_tensor_get_flat(tg_module_find(bn, "running_mean"), ch, &mean);
            tg_tensor_get_flat(tg_module_find(bn, "running_var"), ch, &var);
            const double b0 = b ? th_at(b, f) : 0.0;
            cr_assert(epsilon_eq(dbl, th_at(b2, f), (b0 - mean) * g / sqrt(var + eps) + beta, 1e-6),
                      "case %zu bias %lld", ci, (long long)f);
        }
        /* and the float modules agree: bn(layer(x)) in eval vs folded(x) */
        cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
        cr_assert(eq(int, tg_nn_sequential_append(seq, tg_module_retain(l)), TG_OK));
        if (c->unflatten > 0) {
            const int64_t us[] = {c->c_out, 2, 2};
            cr_assert(eq(int, tg_nn_unflatten_new(&unf, 1, 3, us), TG_OK));
            cr_assert(eq(int, tg_nn_sequential_append(seq, tg_module_retain(unf)), TG_OK));
        }
        cr_assert(eq(int, tg_nn_sequential_append(seq, tg_module_retain(bn)), TG_OK));
        tg_module_train(seq, false);
        tg_tensor *x = rnd_tensor(TG_F32, c->xnd, c->xs, &rng, -1, 1), *yr = NULL, *yf = NULL, *yu = NULL;
        cr_assert(eq(int, tg_module_forward(seq, &yr, x), TG_OK), "case %zu: %s", ci, tg_error_message());
        cr_assert(eq(int, tg_module_forward(folded, &yf, x), TG_OK));
        if (unf) {
            cr_assert(eq(int, tg_module_forward(unf, &yu, yf), TG_OK));
            tg_tensor_release(yf), yf = yu;
        }
        cr_assert(tg_tensor_same_shape(yr, yf));
        for (int64_t i = 0; i < tg_tensor_numel(yr); i++)
            cr_assert(epsilon_eq(dbl, th_at(yf, i), th_at(yr, i), 1e-5), "case %zu y[%lld]: %g vs %g",
                      ci, (long long)i, th_at(yf, i), th_at(yr, i));
        tg_tensor_release(x), tg_tensor_release(yr), tg_tensor_release(yf);
        tg_module_release(seq), tg_module_release(unf), tg_module_release(folded);
        tg_module_release(bn), tg_module_release(l);
    }
}

Test(quant_model_fold, fold_batchnorm_errors_change_nothing)
{
    tg_rng rng;
    tg_rng_init(&rng, 4);
    const fcase c = {1, 2, 4, 6, 1, 3, true, 0, {0}, 0};
    tg_module *l = fcase_layer(&c, &rng), *bn = NULL, *bn5 = NULL, *nostats = NULL, *act = NULL;
    tg_module *reluconv = NULL, *out = NULL;
    cr_assert(eq(int, tg_nn_batchnorm_new(&bn, 2, 6, 1e-5, 0.1, true, true), TG_OK));
    cr_assert(eq(int, tg_nn_batchnorm_new(&bn5, 2, 5, 1e-5, 0.1, true, true), TG_OK));
    cr_assert(eq(int, tg_nn_batchnorm_new(&nostats, 2, 6, 1e-5, 0.1, true, false), TG_OK));
    cr_assert(eq(int, tg_nn_activation_new(&act, TG_ACT_RELU, 0), TG_OK));
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.act = TG_ACT_RELU;
    const int64_t k[] = {3, 3};
    cr_assert(eq(int, tg_nn_conv_new(&reluconv, 2, 4, 6, k, &p, true, &rng), TG_OK));
    const double w5 = th_at(tg_module_find(l, "weight"), 5);
    cr_assert(eq(int, tg_fold_batchnorm(&out, l, bn5), TG_ESHAPE));      /* 6 channels vs 5 */
    cr_assert(eq(int, tg_fold_batchnorm(&out, l, nostats), TG_EINVAL));  /* no running stats */
    cr_assert(eq(int, tg_fold_batchnorm(&out, l, act), TG_EINVAL));      /* not a BatchNorm */
    cr_assert(eq(int, tg_fold_batchnorm(&out, act, bn), TG_EINVAL));     /* not a layer */
    cr_assert(eq(int, tg_fold_batchnorm(&out, reluconv, bn), TG_EINVAL)); /* ReLU before the BN */
    cr_assert(eq(int, tg_fold_batchnorm(&out, l, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_fold_batchnorm(NULL, l, bn), TG_EINVAL));
    cr_assert(out == NULL);
    cr_assert(eq(dbl, th_at(tg_module_find(l, "weight"), 5), w5));
    tg_module_release(l), tg_module_release(bn), tg_module_release(bn5), tg_module_release(nostats);
    tg_module_release(act), tg_module_release(reluconv);
}

/* Every state entry of m, cloned, to compare later. */
static int snap_fn(const char *name, tg_tensor *t, bool is_param, void *user)
{
    (void)name, (void)is_param;
    tg_tensor ***p = user;
    cr_assert(eq(int, tg_tensor_clone(*p, t), TG_OK));
    (*p)++;
    return TG_OK;
}

static bool has_type(const tg_module *m, const char *type)
{
    if (!strcmp(tg_module_type_name(m), type)) return true;
    for (int i = 0; i < tg_module_child_count(m); i++)
        if (has_type(tg_module_child_at(m, i), type)) return true;
    return false;
}

Test(quant_model_fold, folding_removes_batchnorm_fuses_relu_and_leaves_the_float_model_alone)
{
    tg_rng rng;
    tg_rng_init(&rng, 11);
    tg_module *f = small_model(&rng);   /* left in training mode */
    const int n_state = tg_module_state_count(f);
    tg_tensor *before[32], **p = before;
    cr_assert(n_state <= 32);
    tg_module_foreach_state(f, snap_fn, &p);
    const int64_t xs[] = {16, 8};
    tg_tensor *batches[4];
    for (int i = 0; i < 4; i++) batches[i] = rnd_tensor(TG_F32, 2, xs, &rng, -2, 2);
    tg_module *q = NULL, *q_off = NULL;
    cr_assert(eq(int, tg_quantize_model(&q, f, 4, batches, NULL), TG_OK), "%s", tg_error_message());
    /* Linear -> Unflatten -> ReLU: the ReLU is fused across the Unflatten;
     * ConvTranspose -> BatchNorm -> ReLU: both fold into it */
    const char *want[] = {"QuantizedLinear", "Unflatten", "Identity", "QuantizedConvTranspose",
                          "Identity", "Identity", "QuantizedConv"};
    tg_module *fnet = tg_module_child(f, "net"), *qnet = tg_module_child(q, "net");
    for (int i = 0; i < 7; i++)
        cr_assert(eq(str, (char *)tg_module_type_name(tg_module_child_at(qnet, i)), (char *)want[i]));
    cr_assert(tg_module_child(qnet, "4") != NULL, "children keep their names");
    cr_assert(tg_module_child_at(qnet, 1) == tg_module_child_at(fnet, 1), "Unflatten shared");
    cr_assert(not(has_type(q, "BatchNorm") || has_type(q, "ReLU")));
    cr_assert(eq(int, tg_module_state_count(q), 0), "no BatchNorm buffers remain");
    /* option off: the old structure, BatchNorm and ReLU float and shared */
    tg_quantize_options o = TG_QUANTIZE_OPTIONS_INIT;
    o.fold_batchnorm = o.fuse_relu = false;
    cr_assert(eq(int, tg_quantize_model(&q_off, f, 4, batches, &o), TG_OK), "%s", tg_error_message());
    const char *old[] = {"QuantizedLinear", "Unflatten", "ReLU", "QuantizedConvTranspose",
                         "BatchNorm", "ReLU", "QuantizedConv"};
    tg_module *onet = tg_module_child(q_off, "net");
    for (int i = 0; i < 7; i++) {
        cr_assert(eq(str, (char *)tg_module_type_name(tg_module_child_at(onet, i)), (char *)old[i]));
        if (strncmp(old[i], "Quantized", 9) != 0)
            cr_assert(tg_module_child_at(onet, i) == tg_module_child_at(fnet, i));
    }
    /* the float model's values are bit for bit the same (running stats included) */
    cr_assert(eq(int, tg_module_state_count(f), n_state));
    for (int i = 0; i < n_state; i++) {
        tg_tensor *t = NULL;
        tg_module_state_at(f, i, NULL, 0, &t, NULL);
        cr_assert(tg_tensor_same_shape(t, before[i]));
        for (int64_t e = 0; e < tg_tensor_numel(t); e++)
            cr_assert(eq(dbl, th_at(t, e), th_at(before[i], e)), "state %d element %lld", i, (long long)e);
        tg_tensor_release(before[i]);
    }
    for (int i = 0; i < 4; i++) tg_tensor_release(batches[i]);
    tg_module_release(q), tg_module_release(q_off), tg_module_release(f);
}

/* One ConvTranspose2d (groups 2) + BatchNorm2d + ReLU, quantized with
 * folding, against the float model in eval mode.  The bound per output
 * element, from the scales the observers must have chosen (recomputed here
 * from the calibration data by torch's min-max formula):
 *   y_s                              output rounding (1/2) + requantization (1/2)
 * + x_s/2 * max_c sum |W'_c|          input rounding times the folded weights
 * + max|x| * taps * max_c w_s_c / 2  weight rounding, w_s_c = max|W'_c| / 127.5
 * (taps = C_in/G * K*K bounds the terms of one output; ReLU is 1-Lipschitz). */
Test(quant_model_fold, folded_quantized_layer_is_within_the_scale_bound)
{
    tg_rng rng;
    tg_rng_init(&rng, 5);
    const fcase c = {2, 2, 4, 6, 2, 4, true, 0, {4, 4, 6, 6}, 4};
    tg_module *l = fcase_layer(&c, &rng), *bn = NULL, *relu = NULL, *seq = NULL, *folded = NULL;
    cr_assert(eq(int, tg_nn_batchnorm_new(&bn, 2, 6, 1e-5, 0.1, true, true), TG_OK));
    randomize_bn(bn, &rng);
    cr_assert(eq(int, tg_nn_activation_new(&relu, TG_ACT_RELU, 0), TG_OK));
    cr_assert(eq(int, tg_fold_batchnorm(&folded, l, bn), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, l), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, bn), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, relu), TG_OK));
    tg_module_train(seq, false);
    tg_tensor *batches[3], *x = rnd_tensor(TG_F32, 4, c.xs, &rng, -0.9, 0.9), *yf = NULL, *yq = NULL;
    double xlo = 0, xhi = 0, yhi = 0;
    for (int i = 0; i < 3; i++) {
        batches[i] = rnd_tensor(TG_F32, 4, c.xs, &rng, -1, 1);
        tg_tensor *y = NULL;
        cr_assert(eq(int, tg_module_forward(seq, &y, batches[i]), TG_OK));
        for (int64_t e = 0; e < tg_tensor_numel(batches[i]); e++)
            xlo = fmin(xlo, th_at(batches[i], e)), xhi = fmax(xhi, th_at(batches[i], e));
        for (int64_t e = 0; e < tg_tensor_numel(y); e++) yhi = fmax(yhi, th_at(y, e));
        tg_tensor_release(y);
    }
    const double x_s = (xhi - xlo) / 255, y_s = yhi / 255;   /* u8, post-ReLU output >= 0 */
    tg_tensor *w = tg_module_find(folded, "weight");
    double l1[6] = {0}, amax[6] = {0};
    const int64_t taps = (c.c_in / c.groups) * c.k * c.k, inner = c.k * c.k;
    for (int64_t i = 0; i < tg_tensor_numel(w); i++) {
        const int64_t ch = fcase_channel(&c, i / (3 * inner), (i / inner) % 3);
        l1[ch] += fabs(th_at(w, i)), amax[ch] = fmax(amax[ch], fabs(th_at(w, i)));
    }
    double bound = 0;
    for (int ch = 0; ch < 6; ch++)
        bound = fmax(bound, y_s + x_s / 2 * l1[ch] + 0.9 * taps * amax[ch] / 127.5 / 2);
    tg_module *q = NULL;
    cr_assert(eq(int, tg_quantize_model(&q, seq, 3, batches, NULL), TG_OK), "%s", tg_error_message());
    cr_assert(eq(str, (char *)tg_module_type_name(tg_module_child_at(q, 1)), "Identity"));
    cr_assert(eq(int, tg_module_forward(seq, &yf, x), TG_OK));
    cr_assert(eq(int, tg_module_forward(q, &yq, x), TG_OK));
    double emax = 0;
    for (int64_t e = 0; e < tg_tensor_numel(yf); e++) {
        cr_assert(th_at(yq, e) >= 0, "fused ReLU");
        emax = fmax(emax, fabs(th_at(yq, e) - th_at(yf, e)));
    }
    cr_log_info("folded int8 ConvT+BN+ReLU: max error %.4g, bound %.4g, y_scale %.4g", emax, bound, y_s);
    cr_assert(emax <= bound, "max error %g > bound %g", emax, bound);
    cr_assert(emax > y_s / 8, "max error %g: is the layer really quantized?", emax);
    for (int i = 0; i < 3; i++) tg_tensor_release(batches[i]);
    tg_tensor_release(x), tg_tensor_release(yf), tg_tensor_release(yq);
    tg_module_release(q), tg_module_release(seq), tg_module_release(folded);
}

Test(quant_model_fold, folded_linear_needs_2d_input)
{
    tg_rng rng;
    tg_rng_init(&rng, 8);
    tg_module *seq = NULL, *l = NULL, *bn = NULL, *q = NULL;
    cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
    cr_assert(eq(int, tg_nn_linear_new(&l, 4, 3, true, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, l), TG_OK));
    cr_assert(eq(int, tg_nn_batchnorm_new(&bn, 1, 3, 1e-5, 0.1, true, true), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, bn), TG_OK));
    /* (N, 3, 4): Linear gives (N, 3, 3), and BatchNorm1d normalises dim 1,
     * which is not the Linear's feature axis: folding would be wrong */
    const int64_t xs[] = {2, 3, 4};
    tg_tensor *x = rnd_tensor(TG_F32, 3, xs, &rng, -1, 1);
    cr_assert(eq(int, tg_quantize_model(&q, seq, 1, &x, NULL), TG_EINVAL));
    cr_assert(q == NULL);
    tg_quantize_options o = TG_QUANTIZE_OPTIONS_INIT;
    o.fold_batchnorm = false;
    cr_assert(eq(int, tg_quantize_model(&q, seq, 1, &x, &o), TG_OK), "%s", tg_error_message());
    tg_module_release(q), tg_module_release(seq), tg_tensor_release(x);
}

