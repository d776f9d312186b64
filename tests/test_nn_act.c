/* tests/test_nn_act.c - the modules nn.Softplus, nn.LogSigmoid, nn.Softmax,
 * nn.LogSoftmax and nn.Identity (src/nn/act_modules.c): each forward and
 * backward is its functional op's, bit for bit, in f32 and in f64 (after
 * tg_module_to_dtype) and in a copy; the readers give what a module was
 * made with; no state and state-dict keys only from the other children;
 * the refusals.  The same modules in a Sequential against PyTorch:
 * test_nn.c; their ONNX export: test_onnx_act.c. */
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
    double beta, threshold;   /* Softplus */
    int dim;                  /* Softmax, LogSoftmax */
} act_case;

static const act_case cases[] = {
    {"Softplus", 1, 20, 0},    {"Softplus", 2, 1, 0},     {"Softplus", 0.5, -1, 0},
    {"LogSigmoid", 0, 0, 0},   {"Softmax", 0, 0, 0},      {"Softmax", 0, 0, 1},
    {"Softmax", 0, 0, -1},     {"LogSoftmax", 0, 0, 2},   {"LogSoftmax", 0, 0, -3},
    {"LogSoftmax", 0, 0, 1},   {"Identity", 0, 0, 0},
};

static tg_module *make(const act_case *c)
{
    tg_module *m = NULL;
    if (!strcmp(c->type, "Softplus")) OK(tg_nn_softplus_new(&m, c->beta, c->threshold));
    else if (!strcmp(c->type, "LogSigmoid")) OK(tg_nn_logsigmoid_new(&m));
    else if (!strcmp(c->type, "Softmax")) OK(tg_nn_softmax_new(&m, c->dim));
    else if (!strcmp(c->type, "LogSoftmax")) OK(tg_nn_log_softmax_new(&m, c->dim));
    else OK(tg_nn_identity_new(&m));
    return m;
}

static int run_op(const act_case *c, tg_tensor **y, tg_tensor *x)
{
    if (!strcmp(c->type, "Softplus")) return tg_softplus(y, x, c->beta, c->threshold);
    if (!strcmp(c->type, "LogSigmoid")) return tg_logsigmoid(y, x);
    if (!strcmp(c->type, "Softmax")) return tg_softmax(y, x, c->dim);
    if (!strcmp(c->type, "LogSoftmax")) return tg_log_softmax(y, x, c->dim);
    *y = tg_tensor_retain(x);
    return TG_OK;
}

/* m(x) and the op on a copy of x, the same bits, and so are the two
 * gradients of sum(y * g) for one random g. */
static void expect_module_is_op(const act_case *c, tg_module *m, tg_dtype dt, uint64_t seed)
{
    const int64_t shape[3] = {3, 4, 5};
    uint64_t s = seed;
    tg_tensor *x = th_rand_tensor(&s, dt, 3, shape, -6, 6), *x2 = NULL, *y = NULL, *want = NULL;
    tg_tensor *g = th_rand_tensor(&s, dt, 3, shape, -1, 1);
    OK(tg_tensor_clone(&x2, x));
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_tensor_set_requires_grad(x2, true));
    OK(tg_module_forward(m, &y, x));
    OK(run_op(c, &want, x2));
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
    OK(tg_nn_softmax_params(sm, &dim));
    cr_assert(eq(int, dim, -2));
    OK(tg_nn_softmax_params(lsm, &dim));
    cr_assert(eq(int, dim, 7));
    OK(tg_nn_softmax_params(lsm, NULL));
    cr_assert(strncmp(tg_module_type_name(lsm), "LogSoftmax", 11) == 0);
    th_expect_refused(tg_nn_softplus_params(sm, &beta, &threshold), TG_EINVAL,
                      "nn_softplus_params: m is a Softmax module, not Softplus", NULL);
    th_expect_refused(tg_nn_softmax_params(sp, &dim), TG_EINVAL,
                      "nn_softmax_params: m is a Softplus module, not Softmax or LogSoftmax",
                      NULL);
    th_expect_refused(tg_nn_softmax_params(ls, &dim), TG_EINVAL, "LogSigmoid module", NULL);
    th_expect_refused(tg_nn_softplus_params(NULL, &beta, NULL), TG_EINVAL,
                      "nn_softplus_params: m must not be NULL", NULL);
    th_expect_refused(tg_nn_softmax_params(NULL, &dim), TG_EINVAL,
                      "nn_softmax_params: m must not be NULL", NULL);
    /* the Activation module is not one of these, nor these an Activation */
    tg_module *relu = NULL;
    OK(tg_nn_activation_new(&relu, TG_ACT_RELU, 0));
    th_expect_refused(tg_nn_softplus_params(relu, NULL, NULL), TG_EINVAL, "Activation", NULL);
    th_expect_refused(tg_nn_activation_params(sp, NULL, NULL), TG_EINVAL, "Softplus", NULL);
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
