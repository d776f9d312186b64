/* tests/test_nn_act.c - the modules nn.Softplus, nn.LogSigmoid, nn.Softmax,
 * nn.LogSoftmax, nn.Identity, nn.SELU, nn.CELU, nn.Hardshrink,
 * nn.Softshrink, nn.Threshold, nn.GLU, nn.Softsign, nn.Tanhshrink and
 * nn.Softmin (src/nn/act_modules.c): each forward and
 * backward is its functional op's, bit for bit, in f32 and in f64 (after
 * tg_module_to_dtype) and in a copy; the readers give what a module was
 * made with; no state and state-dict keys only from the other children;
 * the refusals.  The modules of tg_nn_activation_new have torch's class
 * names as their type names, and nn.Identity's namesake (TG_ACT_NONE) is
 * still read as an activation.  The same modules in a Sequential against
 * PyTorch: test_nn.c; their ONNX export: test_onnx_act.c. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* One module and the functional call it stands for. */
typedef struct act_case {
    const char *type;
    double beta, threshold;   /* Softplus; CELU alpha, lambd and Threshold in beta,
                                 Threshold's value in threshold */
    int dim;                  /* Softmax, LogSoftmax, Softmin, GLU */
} act_case;

static const act_case cases[] = {
    {"Softplus", 1, 20, 0},    {"Softplus", 2, 1, 0},     {"Softplus", 0.5, -1, 0},
    {"LogSigmoid", 0, 0, 0},   {"Softmax", 0, 0, 0},      {"Softmax", 0, 0, 1},
    {"Softmax", 0, 0, -1},     {"LogSoftmax", 0, 0, 2},   {"LogSoftmax", 0, 0, -3},
    {"LogSoftmax", 0, 0, 1},   {"Identity", 0, 0, 0},     {"SELU", 0, 0, 0},
    {"CELU", 1, 0, 0},         {"CELU", 0.4, 0, 0},       {"CELU", -2, 0, 0},
    {"Hardshrink", 0.5, 0, 0}, {"Hardshrink", 2.5, 0, 0}, {"Hardshrink", -1, 0, 0},
    {"Softshrink", 0.5, 0, 0}, {"Softshrink", 3, 0, 0},   {"Softshrink", 0, 0, 0},
    {"Threshold", 0.1, 20, 0}, {"Threshold", -2, -7, 0},  {"GLU", 0, 0, -1},
    {"GLU", 0, 0, 1},          {"GLU", 0, 0, -3},         {"Softsign", 0, 0, 0},
    {"Tanhshrink", 0, 0, 0},   {"Softmin", 0, 0, 0},      {"Softmin", 0, 0, -1},
    {"Softmin", 0, 0, 1},
};

static tg_module *make(const act_case *c)
{
    tg_module *m = NULL;
    if (!strcmp(c->type, "Softplus")) OK(tg_nn_softplus_new(&m, c->beta, c->threshold));
    else if (!strcmp(c->type, "LogSigmoid")) OK(tg_nn_logsigmoid_new(&m));
    else if (!strcmp(c->type, "Softmax")) OK(tg_nn_softmax_new(&m, c->dim));
    else if (!strcmp(c->type, "LogSoftmax")) OK(tg_nn_log_softmax_new(&m, c->dim));
    else if (!strcmp(c->type, "SELU")) OK(tg_nn_selu_new(&m));
    else if (!strcmp(c->type, "CELU")) OK(tg_nn_celu_new(&m, c->beta));
    else if (!strcmp(c->type, "Hardshrink")) OK(tg_nn_hardshrink_new(&m, c->beta));
    else if (!strcmp(c->type, "Softshrink")) OK(tg_nn_softshrink_new(&m, c->beta));
    else if (!strcmp(c->type, "Threshold")) OK(tg_nn_threshold_new(&m, c->beta, c->threshold));
    else if (!strcmp(c->type, "GLU")) OK(tg_nn_glu_new(&m, c->dim));
    else if (!strcmp(c->type, "Softsign")) OK(tg_nn_softsign_new(&m));
    else if (!strcmp(c->type, "Tanhshrink")) OK(tg_nn_tanhshrink_new(&m));
    else if (!strcmp(c->type, "Softmin")) OK(tg_nn_softmin_new(&m, c->dim));
    else OK(tg_nn_identity_new(&m));
    return m;
}

static int run_op(const act_case *c, tg_tensor **y, tg_tensor *x)
{
    if (!strcmp(c->type, "Softplus")) return tg_softplus(y, x, c->beta, c->threshold);
    if (!strcmp(c->type, "LogSigmoid")) return tg_logsigmoid(y, x);
    if (!strcmp(c->type, "Softmax")) return tg_softmax(y, x, c->dim);
    if (!strcmp(c->type, "LogSoftmax")) return tg_log_softmax(y, x, c->dim);
    if (!strcmp(c->type, "SELU")) return tg_selu(y, x);
    if (!strcmp(c->type, "CELU")) return tg_celu(y, x, c->beta);
    if (!strcmp(c->type, "Hardshrink")) return tg_hardshrink(y, x, c->beta);
    if (!strcmp(c->type, "Softshrink")) return tg_softshrink(y, x, c->beta);
    if (!strcmp(c->type, "Threshold")) return tg_threshold(y, x, c->beta, c->threshold);
    if (!strcmp(c->type, "GLU")) return tg_glu(y, x, c->dim);
    if (!strcmp(c->type, "Softsign")) return tg_softsign(y, x);
    if (!strcmp(c->type, "Tanhshrink")) return tg_tanhshrink(y, x);
    if (!strcmp(c->type, "Softmin")) return tg_softmin(y, x, c->dim);
    *y = tg_tensor_retain(x);
    return TG_OK;
}

/* m(x) and the op on a copy of x, the same bits, and so are the two
 * gradients of sum(y * g) for one random g of y's shape (GLU halves a dim:
 * every extent of x is even). */
static void expect_module_is_op(const act_case *c, tg_module *m, tg_dtype dt, uint64_t seed)
{
    const int64_t shape[3] = {4, 2, 6};
    uint64_t s = seed;
    tg_tensor *x = th_rand_tensor(&s, dt, 3, shape, -6, 6), *x2 = NULL, *y = NULL, *want = NULL;
    OK(tg_tensor_clone(&x2, x));
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_tensor_set_requires_grad(x2, true));
    OK(tg_module_forward(m, &y, x));
    OK(run_op(c, &want, x2));
    tg_tensor *g = th_rand_tensor(&s, dt, tg_tensor_ndim(y), tg_tensor_shape(y), -1, 1);
    th_expect_same_bits(c->type, x, y, want);
    th_backward_with(y, g);
    th_backward_with(want, g);
    th_expect_same_bits(c->type, x, tg_tensor_grad(x), tg_tensor_grad(x2));
    th_release_all(5, (tg_tensor *[]){x, x2, y, want, g});
}

Test(nn_act, forward_and_backward_are_the_ops)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const act_case *c = &cases[i];
        tg_module *m = make(c), *copy = NULL;
        cr_assert(strncmp(tg_module_type_name(m), c->type, strlen(c->type) + 1) == 0, "%s: %s",
                  c->type, tg_module_type_name(m));
        cr_assert(eq(int, tg_module_state_count(m), 0), "%s", c->type);
        cr_assert(eq(int, tg_module_parameter_count(m), 0), "%s", c->type);
        expect_module_is_op(c, m, TG_F32, 11 + i);
        OK(tg_module_copy(&copy, m));
        expect_module_is_op(c, copy, TG_F32, 31 + i);
        OK(tg_module_to_dtype(m, TG_F64));
        expect_module_is_op(c, m, TG_F64, 51 + i);
        tg_module_release(copy);
        tg_module_release(m);
    }
}

/* Identity gives its input itself, as torch's. */
Test(nn_act, identity_returns_its_input)
{
    tg_module *m = NULL;
    OK(tg_nn_identity_new(&m));
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (const int64_t[]){2, 3}, 3), *y = NULL;
    OK(tg_module_forward(m, &y, x));
    cr_assert(y == x);
    th_release_all(2, (tg_tensor *[]){x, y});
    tg_module_release(m);
}

Test(nn_act, readers_give_what_the_modules_were_made_with)
{
    tg_module *sp = NULL, *sm = NULL, *lsm = NULL, *ls = NULL;
    OK(tg_nn_softplus_new(&sp, 0.75, -INFINITY));
    OK(tg_nn_softmax_new(&sm, -2));
    OK(tg_nn_log_softmax_new(&lsm, 7));
    OK(tg_nn_logsigmoid_new(&ls));
    double beta = 0, threshold = 0;
    int dim = 0;
    OK(tg_nn_softplus_params(sp, &beta, &threshold));
    cr_assert(beta == 0.75 && threshold == -INFINITY, "%g %g", beta, threshold);
    OK(tg_nn_softplus_params(sp, NULL, NULL));
    OK(tg_nn_act_dim(sm, &dim));
    cr_assert(eq(int, dim, -2));
    OK(tg_nn_act_dim(lsm, &dim));
    cr_assert(eq(int, dim, 7));
    OK(tg_nn_act_dim(lsm, NULL));
    cr_assert(strncmp(tg_module_type_name(lsm), "LogSoftmax", 11) == 0);
    th_expect_refused(tg_nn_softplus_params(sm, &beta, &threshold), TG_EINVAL,
                      "nn_softplus_params: m is a Softmax module, not Softplus", NULL);
    th_expect_refused(tg_nn_act_dim(sp, &dim), TG_EINVAL, "nn_act_dim: m is a Softplus module",
                      NULL);
    th_expect_refused(tg_nn_act_dim(ls, &dim), TG_EINVAL, "LogSigmoid module", NULL);
    th_expect_refused(tg_nn_softplus_params(NULL, &beta, NULL), TG_EINVAL,
                      "nn_softplus_params: m must not be NULL", NULL);
    /* tg_nn_activation_new's ReLU is not one of these, nor these one of it */
    tg_module *relu = NULL;
    OK(tg_nn_activation_new(&relu, TG_ACT_RELU, 0));
    th_expect_refused(tg_nn_softplus_params(relu, NULL, NULL), TG_EINVAL,
                      "m is a ReLU module, not Softplus", NULL);
    th_expect_refused(tg_nn_activation_params(sp, NULL, NULL), TG_EINVAL,
                      "m is a Softplus module, not one of tg_nn_activation_new", NULL);
    tg_module *mods[] = {sp, sm, lsm, ls, relu};
    for (int i = 0; i < 5; i++) tg_module_release(mods[i]);
}

Test(nn_act, constructors_refuse_bad_arguments)
{
    tg_module *m = NULL;
    th_expect_refused(tg_nn_softplus_new(NULL, 1, 20), TG_EINVAL,
                      "nn_softplus_new: out must not be NULL", NULL);
    th_expect_refused(tg_nn_softplus_new(&m, 0, 20), TG_EINVAL,
                      "nn_softplus_new: beta=0 must be finite and > 0", NULL);
    th_expect_refused(tg_nn_softplus_new(&m, -1, 20), TG_EINVAL, "beta=-1", NULL);
    th_expect_refused(tg_nn_softplus_new(&m, INFINITY, 20), TG_EINVAL, "beta=inf", NULL);
    th_expect_refused(tg_nn_softplus_new(&m, NAN, 20), TG_EINVAL, "beta=nan", NULL);
    th_expect_refused(tg_nn_softplus_new(&m, 1, NAN), TG_EINVAL,
                      "nn_softplus_new: threshold must not be NaN", NULL);
    th_expect_refused(tg_nn_softmax_new(&m, TG_MAX_DIMS), TG_EINVAL,
                      "nn_softmax_new: dim=8 must be in [-8, 7]", NULL);
    th_expect_refused(tg_nn_softmax_new(&m, -TG_MAX_DIMS - 1), TG_EINVAL, "dim=-9", NULL);
    th_expect_refused(tg_nn_log_softmax_new(&m, 100), TG_EINVAL,
                      "nn_log_softmax_new: dim=100", NULL);
    cr_assert_null(m);
    th_expect_refused(tg_nn_softmax_new(NULL, 0), TG_EINVAL, "nn_softmax_new: out", NULL);
    th_expect_refused(tg_nn_log_softmax_new(NULL, 0), TG_EINVAL, "nn_log_softmax_new: out",
                      NULL);
    th_expect_refused(tg_nn_logsigmoid_new(NULL), TG_EINVAL, "nn_logsigmoid_new: out", NULL);
    th_expect_refused(tg_nn_identity_new(NULL), TG_EINVAL, "nn_identity_new: out", NULL);
    /* the extremes of dim are taken */
    OK(tg_nn_softmax_new(&m, -TG_MAX_DIMS));
    tg_module_release(m);
    OK(tg_nn_log_softmax_new(&m, TG_MAX_DIMS - 1));
    tg_module_release(m);
}

/* A dim outside the input's rank and an integer input fail at the forward
 * with the op's message, led in a Sequential by the child's name and type. */
Test(nn_act, forward_refusals_name_the_child)
{
    tg_module *seq = NULL, *sm = NULL, *sp = NULL, *lin = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 2);
    OK(tg_nn_sequential_new(&seq));
    OK(tg_nn_linear_new(&lin, 3, 4, true, &rng));
    OK(tg_nn_sequential_append(seq, lin));
    OK(tg_nn_softmax_new(&sm, 2));
    OK(tg_nn_sequential_append(seq, sm));
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (const int64_t[]){2, 3}, 4), *y = NULL, *xi = NULL;
    th_expect_refused(tg_module_forward(seq, &y, x), TG_EINVAL, "in 1 (Softmax): softmax", y);
    th_expect_refused(tg_module_forward(sm, &y, x), TG_EINVAL, "dim", y);
    OK(tg_tensor_to_dtype(&xi, x, TG_I64));
    OK(tg_nn_softplus_new(&sp, 1, 20));
    th_expect_refused(tg_module_forward(sp, &y, xi), TG_EDTYPE, "softplus", y);
    th_release_all(2, (tg_tensor *[]){x, xi});
    tg_module_release(sp);
    tg_module_release(seq);
}

/* In a Sequential the modules add no state-dict keys: the Linears' keys
 * keep torch's child indices, and a save / load round trip leaves the
 * forward as it was. */
Test(nn_act, sequential_state_dict_has_only_the_linears)
{
    tg_rng rng;
    tg_rng_init(&rng, 8);
    tg_module *seq = NULL, *m = NULL;
    OK(tg_nn_sequential_new(&seq));
    OK(tg_nn_linear_new(&m, 4, 6, true, &rng));
    OK(tg_nn_sequential_append(seq, m));                       /* 0 */
    OK(tg_nn_softplus_new(&m, 2, 1));
    OK(tg_nn_sequential_append(seq, m));                       /* 1 */
    OK(tg_nn_logsigmoid_new(&m));
    OK(tg_nn_sequential_append(seq, m));                       /* 2 */
    OK(tg_nn_identity_new(&m));
    OK(tg_nn_sequential_append(seq, m));                       /* 3 */
    OK(tg_nn_linear_new(&m, 6, 3, false, &rng));
    OK(tg_nn_sequential_append(seq, m));                       /* 4 */
    OK(tg_nn_log_softmax_new(&m, 1));
    OK(tg_nn_sequential_append(seq, m));                       /* 5 */
    OK(tg_nn_softmax_new(&m, 0));
    OK(tg_nn_sequential_append(seq, m));                       /* 6 */
    const char *want[] = {"0.weight", "0.bias", "4.weight"};
    cr_assert(eq(int, tg_module_state_count(seq), 3));
    for (int i = 0; i < 3; i++) {
        char name[TG_MODULE_NAME_MAX];
        OK(tg_module_state_at(seq, i, name, sizeof name, NULL, NULL));
        cr_assert(strncmp(name, want[i], strlen(want[i]) + 1) == 0, "%d: %s", i, name);
    }
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (const int64_t[]){5, 4}, 6), *y0 = NULL, *y1 = NULL;
    OK(tg_module_forward(seq, &y0, x));
    char path[512];
    th_tmp_dir_make("tg_nn_act_");
    th_tmp_path(path, sizeof path, "seq.safetensors");
    tg_st_file *f = NULL;
    OK(tg_st_new(&f));
    OK(tg_module_state_dict_save(seq, f, NULL));
    OK(tg_safetensors_save(f, path));
    tg_st_free(f);
    tg_module *copy = NULL;
    OK(tg_module_copy(&copy, seq));
    OK(tg_tensor_fill(tg_module_find(copy, "4.weight"), 0.5));
    OK(tg_safetensors_load(&f, path));
    cr_assert(eq(int, tg_st_count(f), 3));
    OK(tg_module_load_state_dict(copy, f, NULL, true));
    OK(tg_module_forward(copy, &y1, x));
    th_expect_same_bits("round trip", x, y1, y0);
    tg_st_free(f);
    th_tmp_dir_remove();
    th_release_all(3, (tg_tensor *[]){x, y0, y1});
    tg_module_release(copy);
    tg_module_release(seq);
}

Test(nn_act, readers_of_the_new_kinds_give_their_numbers)
{
    tg_module *celu = NULL, *hs = NULL, *ss = NULL, *th = NULL, *glu = NULL, *smin = NULL;
    tg_module *sm = NULL, *lsm = NULL, *selu = NULL;
    OK(tg_nn_celu_new(&celu, -0.25));
    OK(tg_nn_hardshrink_new(&hs, INFINITY));
    OK(tg_nn_softshrink_new(&ss, 1.5));
    OK(tg_nn_threshold_new(&th, NAN, -INFINITY));
    OK(tg_nn_glu_new(&glu, -1));
    OK(tg_nn_softmin_new(&smin, 3));
    OK(tg_nn_softmax_new(&sm, -4));
    OK(tg_nn_log_softmax_new(&lsm, 5));
    OK(tg_nn_selu_new(&selu));
    double v = 0, t = 0;
    int dim = 0;
    OK(tg_nn_act_number(celu, &v));
    cr_assert(v == -0.25, "%g", v);
    OK(tg_nn_act_number(hs, &v));
    cr_assert(v == INFINITY, "%g", v);
    OK(tg_nn_act_number(ss, &v));
    cr_assert(v == 1.5, "%g", v);
    OK(tg_nn_act_number(ss, NULL));
    OK(tg_nn_threshold_params(th, &t, &v));
    cr_assert(isnan(t) && v == -INFINITY, "%g %g", t, v);
    OK(tg_nn_threshold_params(th, NULL, NULL));
    const struct { tg_module *m; int dim; } dims[] = {{glu, -1}, {smin, 3}, {sm, -4}, {lsm, 5}};
    for (int i = 0; i < 4; i++) {
        OK(tg_nn_act_dim(dims[i].m, &dim));
        cr_assert(eq(int, dim, dims[i].dim), "%d", i);
    }
    OK(tg_nn_act_dim(glu, NULL));
    th_expect_refused(tg_nn_act_number(th, &v), TG_EINVAL,
                      "nn_act_number: m is a Threshold module, not CELU, Hardshrink or "
                      "Softshrink", NULL);
    th_expect_refused(tg_nn_act_number(selu, &v), TG_EINVAL, "SELU module", NULL);
    th_expect_refused(tg_nn_threshold_params(hs, &t, &v), TG_EINVAL,
                      "nn_threshold_params: m is a Hardshrink module, not Threshold", NULL);
    th_expect_refused(tg_nn_act_dim(celu, &dim), TG_EINVAL,
                      "nn_act_dim: m is a CELU module, not Softmax, LogSoftmax, Softmin, GLU or "
                      "Softmax2d", NULL);
    th_expect_refused(tg_nn_act_number(NULL, &v), TG_EINVAL,
                      "nn_act_number: m must not be NULL", NULL);
    th_expect_refused(tg_nn_threshold_params(NULL, &t, &v), TG_EINVAL,
                      "nn_threshold_params: m must not be NULL", NULL);
    th_expect_refused(tg_nn_act_dim(NULL, &dim), TG_EINVAL, "nn_act_dim: m must not be NULL",
                      NULL);
    tg_module *mods[] = {celu, hs, ss, th, glu, smin, sm, lsm, selu};
    for (int i = 0; i < 9; i++) {
        cr_assert(eq(int, tg_module_state_count(mods[i]), 0), "%d", i);
        tg_module_release(mods[i]);
    }
}

/* The ops' refusals of their numbers, made at construction. */
Test(nn_act, constructors_of_the_new_kinds_refuse_bad_arguments)
{
    tg_module *m = NULL;
    th_expect_refused(tg_nn_celu_new(&m, 0), TG_EINVAL,
                      "nn_celu_new: alpha=0 must be finite and not 0", NULL);
    th_expect_refused(tg_nn_celu_new(&m, INFINITY), TG_EINVAL, "alpha=inf", NULL);
    th_expect_refused(tg_nn_celu_new(&m, -INFINITY), TG_EINVAL, "alpha=-inf", NULL);
    th_expect_refused(tg_nn_celu_new(&m, NAN), TG_EINVAL, "alpha=nan", NULL);
    th_expect_refused(tg_nn_hardshrink_new(&m, NAN), TG_EINVAL,
                      "nn_hardshrink_new: lambd must not be NaN", NULL);
    th_expect_refused(tg_nn_softshrink_new(&m, -0.5), TG_EINVAL,
                      "nn_softshrink_new: lambd=-0.5 must be >= 0", NULL);
    th_expect_refused(tg_nn_softshrink_new(&m, NAN), TG_EINVAL, "lambd=nan", NULL);
    th_expect_refused(tg_nn_glu_new(&m, TG_MAX_DIMS), TG_EINVAL,
                      "nn_glu_new: dim=8 must be in [-8, 7]", NULL);
    th_expect_refused(tg_nn_softmin_new(&m, -TG_MAX_DIMS - 1), TG_EINVAL,
                      "nn_softmin_new: dim=-9 must be in [-8, 7]", NULL);
    cr_assert_null(m);
    th_expect_refused(tg_nn_selu_new(NULL), TG_EINVAL, "nn_selu_new: out", NULL);
    th_expect_refused(tg_nn_celu_new(NULL, 1), TG_EINVAL, "nn_celu_new: out", NULL);
    th_expect_refused(tg_nn_hardshrink_new(NULL, 0.5), TG_EINVAL, "nn_hardshrink_new: out", NULL);
    th_expect_refused(tg_nn_softshrink_new(NULL, 0.5), TG_EINVAL, "nn_softshrink_new: out", NULL);
    th_expect_refused(tg_nn_threshold_new(NULL, 0, 0), TG_EINVAL, "nn_threshold_new: out", NULL);
    th_expect_refused(tg_nn_glu_new(NULL, -1), TG_EINVAL, "nn_glu_new: out", NULL);
    th_expect_refused(tg_nn_softsign_new(NULL), TG_EINVAL, "nn_softsign_new: out", NULL);
    th_expect_refused(tg_nn_tanhshrink_new(NULL), TG_EINVAL, "nn_tanhshrink_new: out", NULL);
    th_expect_refused(tg_nn_softmin_new(NULL, 0), TG_EINVAL, "nn_softmin_new: out", NULL);
    /* the edges the ops take: a negative hardshrink lambd, a softshrink lambd of 0, a
     * negative CELU alpha, the extreme dims, any Threshold numbers */
    OK(tg_nn_hardshrink_new(&m, -1));
    tg_module_release(m);
    OK(tg_nn_softshrink_new(&m, 0));
    tg_module_release(m);
    OK(tg_nn_celu_new(&m, -1e-300));
    tg_module_release(m);
    OK(tg_nn_glu_new(&m, -TG_MAX_DIMS));
    tg_module_release(m);
    OK(tg_nn_softmin_new(&m, TG_MAX_DIMS - 1));
    tg_module_release(m);
    OK(tg_nn_threshold_new(&m, INFINITY, NAN));
    tg_module_release(m);
}

/* What depends on x fails at the forward with the op's message: an odd
 * GLU extent, a dim beyond x's rank, a Threshold value outside an integer
 * x's range; an integer x through Threshold keeps its dtype. */
Test(nn_act, forward_refusals_of_the_new_kinds)
{
    tg_module *glu = NULL, *smin = NULL, *th = NULL, *th2 = NULL;
    OK(tg_nn_glu_new(&glu, 0));
    OK(tg_nn_softmin_new(&smin, 2));
    OK(tg_nn_threshold_new(&th, 1, 300));
    OK(tg_nn_threshold_new(&th2, 1.5, -3));
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (const int64_t[]){3, 4}, 5), *y = NULL;
    tg_tensor *xi = NULL;
    th_expect_refused(tg_module_forward(glu, &y, x), TG_ESHAPE, "glu: x's extent along dim 0",
                      y);
    th_expect_refused(tg_module_forward(smin, &y, x), TG_EINVAL, "dim", y);
    OK(tg_tensor_to_dtype(&xi, x, TG_I8));
    th_expect_refused(tg_module_forward(th, &y, xi), TG_EINVAL,
                      "threshold: value=300 must fit in x's dtype", y);
    OK(tg_module_forward(th2, &y, xi));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_I8));
    th_release_all(3, (tg_tensor *[]){x, xi, y});
    tg_module_release(glu);
    tg_module_release(smin);
    tg_module_release(th);
    tg_module_release(th2);
}

/* tg_nn_activation_new's modules are named as torch's classes (nn.ReLU,
 * nn.LeakyReLU, ...; TG_ACT_NONE as nn.Identity, both GELUs nn.GELU), and
 * each is still read back by tg_nn_activation_params, while
 * tg_nn_identity_new's Identity, of the same name, is not. */
Test(nn_act, activation_modules_have_torchs_class_names)
{
    static const char *const names[TG_ACT_COUNT] = {
        [TG_ACT_NONE] = "Identity", [TG_ACT_RELU] = "ReLU",       [TG_ACT_LEAKY_RELU] = "LeakyReLU",
        [TG_ACT_TANH] = "Tanh",     [TG_ACT_SIGMOID] = "Sigmoid", [TG_ACT_SILU] = "SiLU",
        [TG_ACT_GELU] = "GELU",     [TG_ACT_GELU_TANH] = "GELU"};
    for (int a = 0; a < TG_ACT_COUNT; a++) {
        tg_module *m = NULL;
        OK(tg_nn_activation_new(&m, (tg_activation)a, 0.2));
        cr_assert(strncmp(tg_module_type_name(m), names[a], 16) == 0, "act %d: %s, want %s", a,
                  tg_module_type_name(m), names[a]);
        tg_activation got = TG_ACT_COUNT;
        double slope = 0;
        OK(tg_nn_activation_params(m, &got, &slope));
        cr_assert(eq(int, got, a));
        cr_assert(eq(dbl, slope, 0.2));
        tg_module_release(m);
    }
    tg_module *id = NULL;
    OK(tg_nn_identity_new(&id));
    cr_assert(strncmp(tg_module_type_name(id), "Identity", 9) == 0);
    th_expect_refused(tg_nn_activation_params(id, NULL, NULL), TG_EINVAL,
                      "m is a Identity module, not one of tg_nn_activation_new", NULL);
    tg_module_release(id);
}
