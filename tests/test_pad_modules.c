/* tests/test_pad_modules.c - the padding modules (tg_nn_pad_new,
 * tg_nn_pad_new_int, tg_nn_zero_pad2d_new): values and gradients of
 * ZeroPad2d, ConstantPad, ReflectionPad and ReplicationPad of every rank
 * against torch's modules in f32, f64 and bf16 (batched, unbatched, more
 * leading dims, negative padding), derivatives to second order by finite
 * differences, torch's class names, no state, what tg_nn_pad_params reads
 * back, the input ranks each module takes and the refusals.  Goldens:
 * scripts/make_pad_modules_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The module of torch's class `type` with pads[0..2 ns) and value. */
static tg_module *pad_module(const char *type, const int64_t *pads, double value)
{
    tg_pad_mode mode = !strncmp(type, "Reflection", 10)    ? TG_PAD_REFLECT
                       : !strncmp(type, "Replication", 11) ? TG_PAD_REPLICATE
                       : !strncmp(type, "Circular", 8)     ? TG_PAD_CIRCULAR
                                                           : TG_PAD_CONSTANT;
    const int ns = type[strlen(type) - 2] - '0';
    tg_module *m = NULL;
    if (!strcmp(type, "ZeroPad2d"))
        OK(tg_nn_zero_pad2d_new(&m, pads));
    else
        OK(tg_nn_pad_new(&m, mode, ns, pads, value));
    return m;
}

Test(pad_modules, every_module_matches_torch_in_f32_f64_and_bf16)
{
    tg_st_file *f = th_golden_load("pad/pad_modules.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    cr_assert(n >= 26, "golden has %d cases", n);
    int per_dtype[3] = {0};
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "m%d", i);
        const char *type = th_golden_meta(f, c, "type");
        int64_t pads[6] = {0};
        th_ints_of(th_golden_meta(f, c, "pads"), pads);
        tg_module *m = pad_module(type, pads, atof(th_golden_meta(f, c, "value")));
        cr_assert(strncmp(tg_module_type_name(m), type, 32) == 0, "%s: type %s, torch's %s", c,
                  tg_module_type_name(m), type);
        cr_assert(eq(int, tg_module_state_count(m), 0), "%s: torch's module has no state", c);
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x")), *y = NULL;
        OK(tg_module_forward(m, &y, x));
        th_expect_close(c, y, th_golden_get(f, c, "y"), 0);   /* copies: exactly torch's */
        th_backward_with(y, th_golden_get(f, c, "grad_y"));
        const tg_dtype dt = tg_tensor_dtype(x);
        /* the gradient adds up to a few copies' gradients: f32 and bf16
         * round the sum once (torch's f32 rounds each addition) */
        const double rtol = dt == TG_F64 ? 1e-14 : dt == TG_F32 ? 1e-6 : 1e-2;
        th_expect_close_scaled(c, tg_tensor_grad(x), th_golden_get(f, c, "grad_x"), rtol);
        per_dtype[dt == TG_F64 ? 0 : dt == TG_F32 ? 1 : 2]++;
        th_release_all(2, (tg_tensor *[]){x, y});
        tg_module_release(m);
    }
    cr_assert(per_dtype[0] >= 8 && per_dtype[1] >= 8 && per_dtype[2] >= 3,
              "f64 %d, f32 %d, bf16 %d cases", per_dtype[0], per_dtype[1], per_dtype[2]);
    tg_st_free(f);
}

typedef struct pad_fn_case {
    tg_pad_mode mode;
    int ns;
    int64_t pads[6];
} pad_fn_case;

static int module_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const pad_fn_case *c = user;
    tg_module *m = NULL;
    int rc = tg_nn_pad_new(&m, c->mode, c->ns, c->pads, c->mode == TG_PAD_CONSTANT ? 0.5 : 0);
    if (rc >= 0) rc = tg_module_forward(m, out, in[0]);
    tg_module_release(m);
    return rc;
}

/* Every mode and rank, some paddings negative: gradients of the first and
 * second order by finite differences in f64. */
Test(pad_modules, gradients_to_second_order_by_finite_differences)
{
    static const pad_fn_case cases[] = {
        {TG_PAD_CONSTANT, 1, {2, -1}},
        {TG_PAD_REFLECT, 1, {2, 1}},
        {TG_PAD_REPLICATE, 2, {1, 2, -1, 1}},
        {TG_PAD_REFLECT, 2, {1, -1, 2, 1}},
        {TG_PAD_CIRCULAR, 2, {1, 2, 2, 0}},
        {TG_PAD_CONSTANT, 3, {1, 0, 0, 1, 1, -1}},
        {TG_PAD_REPLICATE, 3, {1, 1, 0, 1, 2, 0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        /* (2, 3, 3, 4): batched for 2-d, unbatched for 3-d modules */
        const int64_t shape[] = {2, 3, 3, 4};
        const int nd = cases[i].ns == 1 ? 3 : 4;
        tg_tensor *x = th_rand_uniform(TG_F64, nd, shape + 4 - nd, 30 + i);
        OK(tg_tensor_set_requires_grad(x, true));
        tg_tensor *in[1] = {x};
        OK(tg_gradcheck(module_fn, (void *)&cases[i], 1, in, NULL));
        OK(tg_gradgradcheck(module_fn, (void *)&cases[i], 1, in, NULL));
        tg_tensor_release(x);
    }
}

/* The type names are torch's class names (CircularPadNd: torch 2.1's);
 * the int form pads every side alike; tg_nn_pad_params reads back what
 * the module was made with. */
Test(pad_modules, names_int_padding_and_params)
{
    static const char *const names[4][3] = {
        {"ConstantPad1d", "ConstantPad2d", "ConstantPad3d"},
        {"ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d"},
        {"ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d"},
        {"CircularPad1d", "CircularPad2d", "CircularPad3d"}};
    for (int mode = 0; mode < 4; mode++) {
        for (int ns = 1; ns <= 3; ns++) {
            tg_module *m = NULL;
            const double v = mode == TG_PAD_CONSTANT ? -1.5 : 0.0;
            OK(tg_nn_pad_new_int(&m, (tg_pad_mode)mode, ns, 2, v));
            cr_assert(strncmp(tg_module_type_name(m), names[mode][ns - 1], 32) == 0, "%s",
                      tg_module_type_name(m));
            cr_assert(eq(int, tg_module_state_count(m), 0));
            tg_pad_mode got_mode = TG_PAD_CIRCULAR;
            int got_ns = 0;
            int64_t pads[6] = {0};
            double value = 7;
            OK(tg_nn_pad_params(m, &got_mode, &got_ns, pads, &value));
            cr_assert(eq(int, (int)got_mode, mode));
            cr_assert(eq(int, got_ns, ns));
            for (int k = 0; k < 6; k++)
                cr_assert(eq(i64, pads[k], k < 2 * ns ? 2 : 0), "pads[%d]", k);
            cr_assert(eq(dbl, value, v));
            OK(tg_nn_pad_params(m, NULL, NULL, NULL, NULL));
            tg_module_release(m);
        }
    }
    tg_module *z = NULL, *copy = NULL;
    OK(tg_nn_zero_pad2d_new(&z, (const int64_t[]){1, 2, 3, 4}));
    cr_assert(strncmp(tg_module_type_name(z), "ZeroPad2d", 16) == 0);
    tg_pad_mode mode = TG_PAD_REFLECT;
    int64_t pads[4];
    double value = 1;
    OK(tg_nn_pad_params(z, &mode, NULL, pads, &value));
    cr_assert(mode == TG_PAD_CONSTANT && value == 0.0 && pads[0] == 1 && pads[3] == 4);
    /* a deep copy is the same module */
    OK(tg_module_copy(&copy, z));
    cr_assert(strncmp(tg_module_type_name(copy), "ZeroPad2d", 16) == 0);
    OK(tg_nn_pad_params(copy, NULL, NULL, pads, NULL));
    cr_assert(pads[0] == 1 && pads[1] == 2 && pads[2] == 3 && pads[3] == 4);
    tg_module_release(copy);
    tg_module_release(z);
}

/* Modules are what tg_pad gives, inside a Sequential too: the circular
 * module (torch has only F.pad's mode), then a ConstantPad3d that also
 * pads the channels of the (N, C, H, W) result. */
Test(pad_modules, forward_is_tg_pad_in_a_sequential)
{
    tg_module *seq = NULL, *m = NULL;
    OK(tg_nn_sequential_new(&seq));
    const int64_t circ[] = {2, 1, 1, 3}, cst[] = {1, -1, 0, 2, 3, 0};
    OK(tg_nn_pad_new(&m, TG_PAD_CIRCULAR, 2, circ, 0));
    OK(tg_nn_sequential_append(seq, m));
    OK(tg_nn_pad_new(&m, TG_PAD_CONSTANT, 3, cst, 4.25));
    OK(tg_nn_sequential_append(seq, m));
    cr_assert(eq(int, tg_module_state_count(seq), 0));
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (const int64_t[]){2, 3, 4, 5}, 3);
    tg_tensor *y = NULL, *a = NULL, *b = NULL;
    OK(tg_module_forward(seq, &y, x));
    OK(tg_pad(&a, x, 4, circ, TG_PAD_CIRCULAR, 0));
    OK(tg_pad(&b, a, 6, cst, TG_PAD_CONSTANT, 4.25));
    th_expect_shape(y, 4, (const int64_t[]){2, 6, 10, 8});
    th_expect_close("seq", y, b, 0);
    th_release_all(4, (tg_tensor *[]){x, y, a, b});
    tg_module_release(seq);
}

/* torch's ranks: constant mode pads the last n dims of any input with at
 * least n; the other modes take (C, S...) or (N, C, S...). */
Test(pad_modules, input_ranks_are_torchs)
{
    const int64_t shape[] = {2, 2, 3, 3, 4, 4};
    for (int mode = 0; mode < 4; mode++) {
        for (int ns = 1; ns <= 3; ns++) {
            tg_module *m = NULL;
            OK(tg_nn_pad_new_int(&m, (tg_pad_mode)mode, ns, 1, 0));
            for (int nd = 0; nd <= 6; nd++) {
                tg_tensor *x = th_rand_uniform(TG_F32, nd, shape + 6 - nd, 9), *y = NULL;
                const bool ok = mode == TG_PAD_CONSTANT ? nd >= ns : nd == ns + 1 || nd == ns + 2;
                int rc = tg_module_forward(m, &y, x);
                if (ok) {
                    cr_assert(eq(int, rc, TG_OK), "%s on %d dims: %s", tg_module_type_name(m),
                              nd, tg_error_message());
                    cr_assert(eq(i64, tg_tensor_shape(y)[nd - 1], 6));
                } else {
                    char want[96];
                    snprintf(want, sizeof want, "%s: x has %d dims; it must have",
                             tg_module_type_name(m), nd);
                    th_expect_refused(rc, TG_ESHAPE, want, y);
                }
                th_release_all(2, (tg_tensor *[]){x, y});
            }
            tg_module_release(m);
        }
    }
}

/* A caller's mistake is a negative status naming the argument and the
 * rule, at construction or at the forward (tg_pad's rules for the sizes). */
Test(pad_modules, refusals_name_the_argument_and_the_rule)
{
    tg_module *m = NULL;
    const int64_t pads[] = {1, 1, 1, 1, 1, 1};
    cr_assert(eq(int, tg_nn_pad_new(NULL, TG_PAD_REFLECT, 2, pads, 0), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_pad_new: out and pads must not be NULL");
    cr_assert(eq(int, tg_nn_pad_new(&m, TG_PAD_REFLECT, 2, NULL, 0), TG_EINVAL));
    cr_assert(eq(int, tg_nn_pad_new(&m, (tg_pad_mode)4, 2, pads, 0), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_pad_new: mode=4 is not a tg_pad_mode");
    cr_assert(eq(int, tg_nn_pad_new(&m, (tg_pad_mode)-1, 2, pads, 0), TG_EINVAL));
    for (int ns = -1; ns <= 4; ns += 5) {
        cr_assert(eq(int, tg_nn_pad_new(&m, TG_PAD_CONSTANT, ns, pads, 0), TG_EINVAL));
        th_expect_in(tg_error_message(), "must be 1, 2 or 3");
    }
    cr_assert(eq(int, tg_nn_pad_new(&m, TG_PAD_REFLECT, 2, pads, 1.0), TG_EINVAL));
    th_expect_in(tg_error_message(),
                 "nn_pad_new: value=1 is for TG_PAD_CONSTANT; ReflectionPad2d takes none");
    const int64_t big[] = {1, (int64_t)INT32_MAX + 1};
    cr_assert(eq(int, tg_nn_pad_new(&m, TG_PAD_CONSTANT, 1, big, 0), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_pad_new: pads[1]=2147483648 must be in");
    cr_assert(eq(int, tg_nn_zero_pad2d_new(&m, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_zero_pad2d_new: out and pads must not be NULL");
    cr_assert(m == NULL, "nothing made");
    /* at the forward: tg_pad's size rules */
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (const int64_t[]){2, 3, 4}, 1), *y = NULL;
    OK(tg_nn_pad_new(&m, TG_PAD_REFLECT, 1, (const int64_t[]){4, 0}, 0));
    th_expect_refused(tg_module_forward(m, &y, x), TG_EINVAL,
                      "reflect padding (4, 0) of dim 2 must be < its size 4", y);
    tg_module_release(m);
    OK(tg_nn_pad_new(&m, TG_PAD_CIRCULAR, 2, (const int64_t[]){0, 0, 4, 0}, 0));
    th_expect_refused(tg_module_forward(m, &y, x), TG_EINVAL,
                      "circular padding (4, 0) of dim 1 must be <= its size 3", y);
    tg_module_release(m);
    OK(tg_nn_pad_new(&m, TG_PAD_CONSTANT, 1, (const int64_t[]){-3, -2}, 0));
    th_expect_refused(tg_module_forward(m, &y, x), TG_EINVAL,
                      "removes 5 elements, more than its size 4", y);
    tg_module_release(m);
    OK(tg_nn_pad_new(&m, TG_PAD_REPLICATE, 1, (const int64_t[]){-3, -2}, 0));
    th_expect_refused(tg_module_forward(m, &y, x), TG_EINVAL, "it must keep at least 1", y);
    /* tg_nn_pad_params of another module */
    tg_module *d = NULL;
    OK(tg_nn_dropout_new(&d, 0.5, 1));
    cr_assert(eq(int, tg_nn_pad_params(d, NULL, NULL, NULL, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_pad_params: m is a Dropout module, not one of the "
                                     "padding modules");
    cr_assert(eq(int, tg_nn_pad_params(NULL, NULL, NULL, NULL, NULL), TG_EINVAL));
    tg_module_release(d);
    tg_module_release(m);
    tg_tensor_release(x);
}
