/* tests/test_onnx_act.c - the ONNX export of Softplus, LogSigmoid, Softmax,
 * LogSoftmax and Identity (src/onnx/onnx_act.c), checked as test_onnx.c's
 * cases are: onnx's checker with the nodes, attributes and constants each
 * case lists, and ONNX Runtime against tapegrad's outputs (onnx_cases.h).
 * Softplus is one node for beta 1 and a threshold >= 15 and torch's
 * formula otherwise; LogSigmoid is -softplus(-x), which keeps both tails
 * where torch.onnx's Log(Sigmoid(x)) gives -inf and 0; the identity's
 * pass-through refuses a custom module that only borrows the name.  SELU,
 * CELU, the shrinks, Threshold, GLU, Softsign, Tanhshrink and Softmin
 * alone, in a Sequential, with NaN inputs to Threshold, and their
 * refusals.  GELU(approximate='tanh') in torch.onnx's form. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "onnx_cases.h"
#include "tapegrad/tapegrad.h"

TestSuite(onnx_act, .init = onnx_setup, .fini = th_tmp_dir_remove);

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static const char *const no_inits[] = {NULL};

static tg_module *softplus(double beta, double threshold)
{
    tg_module *m = NULL;
    OK(tg_nn_softplus_new(&m, beta, threshold));
    return m;
}

static tg_module *softmax(bool log_, int dim)
{
    tg_module *m = NULL;
    OK(log_ ? tg_nn_log_softmax_new(&m, dim) : tg_nn_softmax_new(&m, dim));
    return m;
}

/* Softplus: beta 1 with torch's threshold (20) and with 15, one node, on
 * x in [-40, 40] (values past both thresholds); a threshold under 15 and
 * another beta, the Where of torch's formula, on x around their kinks. */
Test(onnx_act, softplus_matches_onnxruntime)
{
    need_onnx();
    uint64_t s = 3;
    tg_tensor *wide = th_rand_tensor(&s, TG_F32, 3, (const int64_t[]){4, 5, 6}, -40, 40);
    tg_tensor *near = th_rand_tensor(&s, TG_F32, 2, (const int64_t[]){6, 7}, -4, 4);
    tg_module *m[5] = {softplus(1, 20), softplus(1, 15), softplus(1, 0.5), softplus(2, 1),
                       softplus(0.5, 20)};
    case_graph = "\"ops\": [\"Softplus\"]";
    write_case("softplus_default", m[0], wide, 1e-6, 1e-7, no_inits, NULL);
    case_graph = "\"ops\": [\"Softplus\"]";
    write_case("softplus_threshold15", m[1], wide, 1e-6, 1e-7, no_inits, NULL);
    case_graph = "\"ops\": [\"Softplus\", \"Greater\", \"Where\"], "
                 "\"initializer_values\": {\"/threshold\": [0.5]}";
    write_case("softplus_threshold", m[2], near, 1e-6, 1e-7,
               (const char *const[]){"/threshold", NULL}, NULL);
    case_graph = "\"ops\": [\"Mul\", \"Softplus\", \"Div\", \"Greater\", \"Where\"], "
                 "\"initializer_values\": {\"/beta\": [2.0], \"/threshold\": [1.0]}";
    write_case("softplus_beta_threshold", m[3], near, 1e-6, 1e-7,
               (const char *const[]){"/beta", "/threshold", NULL}, NULL);
    case_graph = "\"ops\": [\"Mul\", \"Softplus\", \"Div\", \"Greater\", \"Where\"], "
                 "\"initializer_values\": {\"/beta\": [0.5], \"/threshold\": [20.0]}";
    write_case("softplus_beta_half", m[4], wide, 1e-6, 1e-7, NULL, NULL);
    check_cases();
    for (int i = 0; i < 5; i++) tg_module_release(m[i]);
    th_release_all(2, (tg_tensor *[]){wide, near});
}

/* LogSigmoid over [-200, 50], and over [10, 100] alone, where the values
 * are -e^-x (down to the subnormal -3.8e-44): within 1e-5 of the largest,
 * 4.5e-5, so a form that rounds them to 0 (Log(Sigmoid(x)) gives 0 from
 * x = 17 on) fails. */
Test(onnx_act, logsigmoid_keeps_both_tails)
{
    need_onnx();
    tg_module *m = NULL;
    OK(tg_nn_logsigmoid_new(&m));
    tg_tensor *wide = th_seq(TG_F32, 2, (const int64_t[]){5, 40}, -200, 50);
    tg_tensor *tail = th_seq(TG_F32, 2, (const int64_t[]){3, 30}, 10, 100);
    tg_tensor *neg = th_seq(TG_F32, 2, (const int64_t[]){3, 30}, -120, -15);
    case_graph = "\"ops\": [\"Neg\", \"Softplus\", \"Neg\"]";
    write_case("logsigmoid", m, wide, 1e-6, 1e-7, no_inits, NULL);
    write_case("logsigmoid_tail", m, tail, 1e-5, 0, no_inits, NULL);
    write_case("logsigmoid_negative", m, neg, 1e-6, 0, no_inits, NULL);
    check_cases();
    th_release_all(3, (tg_tensor *[]){wide, tail, neg});
    tg_module_release(m);
}

/* Softmax and LogSoftmax along each kind of dim of a (3, 4, 5) input: the
 * axis is the module's dim as given. */
Test(onnx_act, softmax_and_log_softmax_match_onnxruntime)
{
    need_onnx();
    uint64_t s = 7;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 3, (const int64_t[]){3, 4, 5}, -6, 6);
    const struct {
        const char *name;
        bool log_;
        int dim;
        const char *graph;
    } c[] = {
        {"softmax_dim1", false, 1, "\"ops\": [\"Softmax\"], \"attributes\": {\"Softmax\": "
                                   "{\"axis\": 1}}"},
        {"softmax_dim_last", false, -1, "\"ops\": [\"Softmax\"], \"attributes\": {\"Softmax\": "
                                        "{\"axis\": -1}}"},
        {"log_softmax_dim0", true, 0, "\"ops\": [\"LogSoftmax\"], \"attributes\": "
                                      "{\"LogSoftmax\": {\"axis\": 0}}"},
        {"log_softmax_dim2", true, 2, "\"ops\": [\"LogSoftmax\"], \"attributes\": "
                                      "{\"LogSoftmax\": {\"axis\": 2}}"},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        tg_module *m = softmax(c[i].log_, c[i].dim);
        case_graph = c[i].graph;
        write_case(c[i].name, m, x, 1e-6, 1e-7, no_inits, NULL);
        tg_module_release(m);
    }
    check_cases();
    tg_tensor_release(x);
}

/* Linear -> Softplus(2, 1) -> Linear -> LogSigmoid -> Identity -> Linear ->
 * Softmax(1) -> Linear -> LogSoftmax(-1), with a symbolic batch; and an
 * Identity alone, the identity model (one Identity node). */
Test(onnx_act, sequential_and_identity_match_onnxruntime)
{
    need_onnx();
    tg_rng rng;
    tg_rng_init(&rng, 9);
    tg_module *seq = NULL, *m = NULL, *id = NULL;
    OK(tg_nn_sequential_new(&seq));
    const int64_t dims[][2] = {{6, 8}, {8, 8}, {8, 5}, {5, 4}};
    tg_module *acts[] = {softplus(2, 1), NULL, softmax(false, 1), softmax(true, -1)};
    OK(tg_nn_logsigmoid_new(&acts[1]));
    for (int i = 0; i < 4; i++) {
        OK(tg_nn_linear_new(&m, dims[i][0], dims[i][1], true, &rng));
        append(seq, m);
        append(seq, acts[i]);
        if (i == 1) {
            OK(tg_nn_identity_new(&id));
            append(seq, id);
        }
    }
    tg_tensor *x = th_rand_tensor(&(uint64_t){5}, TG_F32, 2, (const int64_t[]){3, 6}, -2, 2);
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    case_graph = "\"ops\": [\"Gemm\", \"Mul\", \"Softplus\", \"Div\", \"Greater\", \"Where\", "
                 "\"Gemm\", \"Neg\", \"Softplus\", \"Neg\", \"Gemm\", \"Softmax\", \"Gemm\", "
                 "\"LogSoftmax\"], \"initializer_values\": {\"/1/beta\": [2.0], "
                 "\"/1/threshold\": [1.0]}";
    write_case("act_sequential", seq, x, 1e-5, 1e-7,
               (const char *const[]){"0.weight", "0.bias", "/1/beta", "/1/threshold",
                                     "2.weight", "2.bias", "5.weight", "5.bias", "7.weight",
                                     "7.bias", NULL},
               &o);
    OK(tg_nn_identity_new(&id));
    case_graph = "\"ops\": [\"Identity\"]";
    write_case("identity_module_alone", id, x, 0, 0, no_inits, NULL);
    check_cases();
    tg_module_release(id);
    tg_module_release(seq);
    tg_tensor_release(x);
}

static int doubler_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    (void)m;
    return tg_mul_scalar(y, x, 2.0);
}
static const tg_module_vtable fake_identity_vt = {.type_name = "Identity",
                                                  .forward = doubler_forward};
static const tg_module_vtable fake_softmax_vt = {.type_name = "Softmax",
                                                 .forward = doubler_forward};

/* Custom modules that borrow the names Identity and Softmax are refused,
 * and nothing is written. */
Test(onnx_act, borrowed_names_are_refused)
{
    need_onnx();
    tg_module *fake = NULL, *fsm = NULL;
    OK(tg_module_new(&fake, &fake_identity_vt, NULL));
    OK(tg_module_new(&fsm, &fake_softmax_vt, NULL));
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (const int64_t[]){2, 4}, 1);
    char path[256];
    th_tmp_path(path, sizeof path, "refused.onnx");
    th_expect_refused(tg_onnx_export(fake, x, path, NULL), TG_EUNSUPPORTED,
                      "module '<top>' (Identity) is not supported: its eval forward is not the "
                      "identity", NULL);
    th_expect_refused(tg_onnx_export(fsm, x, path, NULL), TG_EINVAL,
                      "nn_act_dim: m is a Softmax module, not Softmax, LogSoftmax, Softmin, GLU "
                      "or Softmax2d", NULL);
    cr_assert(th_tmp_dir_count() == 0, "a refused export left a file");
    tg_tensor_release(x);
    tg_module_release(fake);
    tg_module_release(fsm);
}

/* ---- SELU, CELU, the shrinks, Threshold, GLU, Softsign, Tanhshrink, Softmin ---- */

static void expect_ok(int rc)
{
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
}

/* The module a constructor call made into m (the comma sequences the two). */
#define MADE(call) (expect_ok(call), m)

/* Each module alone on x in [-4, 4] (both sides of every kink, the shrinks'
 * dead zones and Threshold's cut), its nodes and attributes as listed. */
Test(onnx_act, newer_activations_match_onnxruntime)
{
    need_onnx();
    uint64_t s = 11;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 3, (const int64_t[]){3, 4, 6}, -4, 4);
    tg_module *m = NULL;
    const struct {
        const char *name;
        tg_module *m;
        const char *graph;
        const char *const *inits;
    } c[] = {
        {"selu", MADE(tg_nn_selu_new(&m)),
         "\"ops\": [\"Selu\"], \"attributes\": {\"Selu\": {\"alpha\": 1.6732631921768188, "
         "\"gamma\": 1.0507010221481323}}", no_inits},
        {"celu", MADE(tg_nn_celu_new(&m, 0.5)),
         "\"ops\": [\"Celu\"], \"attributes\": {\"Celu\": {\"alpha\": 0.5}}", no_inits},
        {"celu_default", MADE(tg_nn_celu_new(&m, 1)),
         "\"ops\": [\"Celu\"], \"attributes\": {\"Celu\": {\"alpha\": 1.0}}", no_inits},
        {"hardshrink", MADE(tg_nn_hardshrink_new(&m, 1.5)),
         "\"ops\": [\"Shrink\"], \"attributes\": {\"Shrink\": {\"bias\": 0.0, "
         "\"lambd\": 1.5}}", no_inits},
        {"softshrink", MADE(tg_nn_softshrink_new(&m, 0.75)),
         "\"ops\": [\"Shrink\"], \"attributes\": {\"Shrink\": {\"bias\": 0.75, "
         "\"lambd\": 0.75}}", no_inits},
        {"softshrink_zero", MADE(tg_nn_softshrink_new(&m, 0)),
         "\"ops\": [\"Shrink\"], \"attributes\": {\"Shrink\": {\"bias\": 0.0, "
         "\"lambd\": 0.0}}", no_inits},
        {"threshold", MADE(tg_nn_threshold_new(&m, 0.5, -2)),
         "\"ops\": [\"LessOrEqual\", \"Where\"], \"initializer_values\": "
         "{\"/threshold\": [0.5], \"/value\": [-2.0]}",
         (const char *const[]){"/threshold", "/value", NULL}},
        {"glu_last", MADE(tg_nn_glu_new(&m, -1)),
         "\"ops\": [\"Split\", \"Sigmoid\", \"Mul\"], \"attributes\": {\"Split\": "
         "{\"axis\": -1}}", no_inits},
        {"glu_dim1", MADE(tg_nn_glu_new(&m, 1)),
         "\"ops\": [\"Split\", \"Sigmoid\", \"Mul\"], \"attributes\": {\"Split\": "
         "{\"axis\": 1}}", no_inits},
        {"softsign", MADE(tg_nn_softsign_new(&m)), "\"ops\": [\"Softsign\"]", no_inits},
        {"tanhshrink", MADE(tg_nn_tanhshrink_new(&m)), "\"ops\": [\"Tanh\", \"Sub\"]",
         no_inits},
        {"softmin_dim0", MADE(tg_nn_softmin_new(&m, 0)),
         "\"ops\": [\"Neg\", \"Softmax\"], \"attributes\": {\"Softmax\": {\"axis\": 0}}",
         no_inits},
        {"softmin_last", MADE(tg_nn_softmin_new(&m, -1)),
         "\"ops\": [\"Neg\", \"Softmax\"], \"attributes\": {\"Softmax\": {\"axis\": -1}}",
         no_inits},
        {"softmax2d", MADE(tg_nn_softmax2d_new(&m)),
         "\"ops\": [\"Softmax\"], \"attributes\": {\"Softmax\": {\"axis\": -3}}",
         no_inits},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        case_graph = c[i].graph;
        write_case(c[i].name, c[i].m, x, 1e-6, 1e-7, c[i].inits, NULL);
    }
    check_cases();
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) tg_module_release(c[i].m);
    tg_tensor_release(x);
}

/* GELU(approximate='tanh') in torch.onnx's form, on x in [-8, 8] and on
 * wide values (x^3 past f32's range gives x and -0.0); its constants are
 * f32 initializers. */
Test(onnx_act, gelu_tanh_matches_onnxruntime)
{
    need_onnx();
    uint64_t s = 13;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 3, (const int64_t[]){3, 4, 6}, -8, 8);
    tg_tensor *wide = th_seq(TG_F32, 2, (const int64_t[]){4, 25}, -1e13, 1e13);
    tg_module *m = NULL, *seq = NULL, *lin = NULL, *act = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 5);
    expect_ok(tg_nn_gelu_new(&m, "tanh"));
    const char *inits[] = {"/beta", "/kappa", "/one", "/half", NULL};
    case_graph = "\"ops\": [\"Mul\", \"Mul\", \"Mul\", \"Add\", \"Mul\", \"Tanh\", "
                 "\"Add\", \"Mul\", \"Mul\"], \"initializer_values\": {\"/beta\": "
                 "[0.7978845834732056], \"/kappa\": [0.044714998453855515], \"/one\": [1.0], "
                 "\"/half\": [0.5]}";
    write_case("gelu_tanh", m, x, 1e-5, 1e-6, inits, NULL);
    write_case("gelu_tanh_wide", m, wide, 1e-6, 0, inits, NULL);
    /* inside a Sequential after a Linear: the constants under its scope */
    expect_ok(tg_nn_sequential_new(&seq));
    expect_ok(tg_nn_linear_new(&lin, 6, 5, true, &rng));
    expect_ok(tg_nn_sequential_append(seq, lin));
    expect_ok(tg_nn_gelu_new(&act, "tanh"));
    expect_ok(tg_nn_sequential_append(seq, act));
    case_graph = NULL;
    write_case("gelu_tanh_seq", seq, x, 1e-5, 1e-6, NULL, NULL);
    check_cases();
    tg_module_release(m);
    tg_module_release(seq);
    th_release_all(2, (tg_tensor *[]){x, wide});
}

/* Threshold keeps a NaN x as torch does (x <= threshold is false there),
 * and a negative CELU alpha is ONNX's formula too. */
Test(onnx_act, threshold_keeps_nan_and_celu_takes_a_negative_alpha)
{
    need_onnx();
    tg_tensor *x = th_seq(TG_F32, 2, (const int64_t[]){4, 10}, -5, 5);
    float *px = tg_tensor_data(x);
    px[3] = NAN;
    px[17] = NAN;
    tg_module *t = NULL, *c = NULL;
    OK(tg_nn_threshold_new(&t, 1.25, 7));
    OK(tg_nn_celu_new(&c, -2));
    tg_tensor *y = forward(t, x);
    cr_assert(isnan(((const float *)tg_tensor_cdata(y))[3]));
    tg_tensor_release(y);
    case_graph = "\"ops\": [\"LessOrEqual\", \"Where\"]";
    write_case("threshold_nan", t, x, 0, 0, NULL, NULL);
    tg_tensor *xc = th_seq(TG_F32, 2, (const int64_t[]){4, 10}, -5, 5);
    case_graph = "\"ops\": [\"Celu\"], \"attributes\": {\"Celu\": {\"alpha\": -2.0}}";
    write_case("celu_negative_alpha", c, xc, 1e-6, 1e-7, no_inits, NULL);
    check_cases();
    th_release_all(2, (tg_tensor *[]){x, xc});
    tg_module_release(t);
    tg_module_release(c);
}

/* Linear -> SELU -> Linear -> Softshrink(0.25) -> Threshold(0.1, -1) ->
 * Linear -> GLU(-1) -> Tanhshrink -> Linear -> Softmin(1), with a symbolic
 * batch. */
Test(onnx_act, newer_sequential_matches_onnxruntime)
{
    need_onnx();
    tg_rng rng;
    tg_rng_init(&rng, 12);
    tg_module *seq = NULL, *m = NULL;
    OK(tg_nn_sequential_new(&seq));
    const int64_t dims[][2] = {{6, 8}, {8, 8}, {8, 10}, {5, 4}};
    for (int i = 0; i < 4; i++) {
        OK(tg_nn_linear_new(&m, dims[i][0], dims[i][1], true, &rng));
        append(seq, m);
        if (i == 0) append(seq, MADE(tg_nn_selu_new(&m)));
        if (i == 1) {
            append(seq, MADE(tg_nn_softshrink_new(&m, 0.25)));
            append(seq, MADE(tg_nn_threshold_new(&m, 0.1, -1)));
        }
        if (i == 2) {
            append(seq, MADE(tg_nn_glu_new(&m, -1)));
            append(seq, MADE(tg_nn_tanhshrink_new(&m)));
        }
        if (i == 3) append(seq, MADE(tg_nn_softmin_new(&m, 1)));
    }
    tg_tensor *x = th_rand_tensor(&(uint64_t){13}, TG_F32, 2, (const int64_t[]){3, 6}, -2, 2);
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    case_graph = "\"ops\": [\"Gemm\", \"Selu\", \"Gemm\", \"Shrink\", \"LessOrEqual\", "
                 "\"Where\", \"Gemm\", \"Split\", \"Sigmoid\", \"Mul\", \"Tanh\", \"Sub\", "
                 "\"Gemm\", \"Neg\", \"Softmax\"], \"initializer_values\": "
                 "{\"/4/threshold\": [0.10000000149011612], \"/4/value\": [-1.0]}";
    write_case("newer_act_sequential", seq, x, 1e-5, 1e-7,
               (const char *const[]){"0.weight", "0.bias", "2.weight", "2.bias",
                                     "/4/threshold", "/4/value", "5.weight", "5.bias",
                                     "8.weight", "8.bias", NULL},
               &o);
    check_cases();
    tg_module_release(seq);
    tg_tensor_release(x);
}

static const tg_module_vtable fake_glu_vt = {.type_name = "GLU", .forward = doubler_forward};

/* A custom module named GLU is refused by the reader, and nothing is
 * written. */
Test(onnx_act, a_borrowed_glu_name_is_refused)
{
    need_onnx();
    tg_module *fake = NULL;
    OK(tg_module_new(&fake, &fake_glu_vt, NULL));
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (const int64_t[]){2, 4}, 1);
    char path[256];
    th_tmp_path(path, sizeof path, "refused.onnx");
    th_expect_refused(tg_onnx_export(fake, x, path, NULL), TG_EINVAL,
                      "nn_act_dim: m is a GLU module", NULL);
    cr_assert(th_tmp_dir_count() == 0, "a refused export left a file");
    tg_tensor_release(x);
    tg_module_release(fake);
}
