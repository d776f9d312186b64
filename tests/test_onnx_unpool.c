/* tests/test_onnx_unpool.c - tg_onnx_export of LPPool (every norm type),
 * of MaxPool with return_indices and of MaxUnpool, checked by onnx's
 * checker and ONNX Runtime against PyTorch's values
 * (scripts/make_onnx_pool_goldens.py) and tapegrad's: LPPool1d/2d with odd,
 * fractional and even norm types on negative inputs, ceil_mode windows cut
 * short (torch's composition written out; NaN where torch gives it); a
 * MaxPool's indices as an extra output (torch's, within each (n, c) plane);
 * MaxUnpool on graph inputs (x, indices), with a dynamic batch run on
 * another batch, and a Sequential MaxPool -> MaxUnpool; the refusals, each naming its rule. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "onnx_cases.h"
#include "tapegrad/tapegrad.h"

TestSuite(onnx_unpool, .init = onnx_setup, .fini = th_tmp_dir_remove);

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The pooling parameters of golden case c. */
static tg_pool_params params_of(const tg_st_file *f, const char *c)
{
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    const char *kind = th_golden_meta(f, c, "kind");
    th_ints_of(th_golden_meta(f, c, "kernel"), p.kernel);
    th_ints_of(th_golden_meta(f, c, "stride"), p.stride);
    if (strcmp(kind, "lppool") != 0) th_ints_of(th_golden_meta(f, c, "padding"), p.padding);
    if (!strcmp(kind, "maxpool")) th_ints_of(th_golden_meta(f, c, "dilation"), p.dilation);
    if (strcmp(kind, "chain") != 0) p.ceil_mode = atoi(th_golden_meta(f, c, "ceil_mode")) != 0;
    return p;
}

/* Exports m on x as case name, expecting y (torch's) and, where idx is not
 * NULL, the extra output "indices". */
static void torch_case(const char *name, tg_module *m, const tg_tensor *x, const tg_tensor *y,
                       const tg_tensor *idx, bool dynamic)
{
    char path[256], file[128];
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.extra_outputs = idx != NULL;
    o.dynamic_batch = dynamic;
    snprintf(file, sizeof file, "%s.onnx", name);
    cr_assert(tg_onnx_export(m, (tg_tensor *)x, th_tmp_path(path, sizeof path, file), &o) ==
                  TG_OK, "%s: %s", name, tg_error_message());
    if (idx)
        case_extra_outputs(name, 1, (tg_tensor *[]){(tg_tensor *)idx},
                           (const char *[]){"indices"});
    write_expected(name, x, y, 1e-5, 1e-6, NULL);
}

/* ---- LPPool ---- */

/* Every norm type: ONNX Runtime gives torch's values (NaN where a window's
 * sum is negative under a fractional root, as torch), and so does
 * tapegrad; an even p without windows cut short stays one LpPool node. */
Test(onnx_unpool, lp_pool_matches_torch_and_onnxruntime)
{
    need_onnx();
    tg_st_file *f = th_golden_load("pool/onnx_pool.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int count = 0, odd = 0, cut = 0;
    for (int i = 0; i < n; i++) {
        char c[16], name[32];
        snprintf(c, sizeof c, "case%d", i);
        if (strcmp(th_golden_meta(f, c, "kind"), "lppool") != 0) continue;
        const int ns = atoi(th_golden_meta(f, c, "ns"));
        const double pn = atof(th_golden_meta(f, c, "norm_type"));
        tg_pool_params p = params_of(f, c);
        tg_module *m = NULL;
        OK(tg_nn_lp_pool_new(&m, ns, pn, &p));
        const tg_tensor *x = th_golden_get(f, c, "x"), *y = th_golden_get(f, c, "y");
        tg_tensor *z = forward(m, (tg_tensor *)x);
        th_expect_close(c, z, y, 2e-6);
        const bool lp = fmod(pn, 2) == 0 && !p.ceil_mode;
        case_graph = lp ? "\"ops\": [\"LpPool\"]"
                        : "\"ops\": [\"Pow\", \"AveragePool\", \"Sign\", \"Abs\", \"Relu\", "
                          "\"Mul\", \"Mul\", \"Pow\"], \"attributes\": {\"AveragePool\": "
                          "{\"count_include_pad\": 0, \"ceil_mode\": 0}}";
        snprintf(name, sizeof name, "lppool_torch_%d", i);
        torch_case(name, m, x, y, NULL, false);
        odd += fmod(pn, 2) != 0;
        cut += p.ceil_mode;
        count++;
        tg_tensor_release(z);
        tg_module_release(m);
    }
    cr_assert(count >= 6 && odd >= 4 && cut >= 3, "%d cases, %d odd, %d ceil_mode", count, odd,
              cut);
    tg_st_free(f);
    check_cases();
}

/* ---- MaxPool's indices ---- */

/* The module's two outputs are torch's values and indices to the bit; the
 * exported graph gives both (the indices i64, an extra output). */
Test(onnx_unpool, max_pool_indices_match_torch_and_onnxruntime)
{
    need_onnx();
    tg_st_file *f = th_golden_load("pool/onnx_pool.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int count = 0;
    for (int i = 0; i < n; i++) {
        char c[16], name[32];
        snprintf(c, sizeof c, "case%d", i);
        if (strcmp(th_golden_meta(f, c, "kind"), "maxpool") != 0) continue;
        const int ns = atoi(th_golden_meta(f, c, "ns"));
        tg_pool_params p = params_of(f, c);
        tg_module *m = NULL;
        OK(tg_nn_max_pool_new(&m, ns, &p));
        OK(tg_nn_max_pool_set_return_indices(m, true));
        cr_assert(eq(int, tg_module_output_count(m), 2));
        const tg_tensor *x = th_golden_get(f, c, "x"), *y = th_golden_get(f, c, "y");
        const tg_tensor *idx = th_golden_get(f, c, "indices");
        tg_tensor *ys[2] = {NULL, NULL};
        OK(tg_module_forward_outputs(m, ys, 1, (tg_tensor *[]){(tg_tensor *)x}));
        th_expect_same_bits(c, x, ys[0], y);
        th_expect_same_bits(c, x, ys[1], idx);
        case_graph = "\"ops\": [\"MaxPool\", \"Mod\"]";
        snprintf(name, sizeof name, "maxpool_indices_%d", i);
        torch_case(name, m, x, y, idx, false);
        count++;
        th_release_all(2, ys);
        tg_module_release(m);
    }
    cr_assert(count >= 4, "%d cases", count);
    tg_st_free(f);
    check_cases();
}

/* ---- MaxUnpool ---- */

/* A MaxUnpool of every rank on graph inputs (x, indices), the indices
 * tg_max_pool_with_indices's (overlapping windows repeat some); a
 * Sequential MaxPool(return_indices) -> MaxUnpool -> ReLU gives torch's
 * values, with a fixed and a dynamic batch. */
Test(onnx_unpool, max_unpool_matches_torch_and_onnxruntime)
{
    need_onnx();
    static const struct {
        const char *name;
        int ns;
        int64_t k[3], s[3], pad[3], in[5];
    } cases[] = {
        {"unpool1d", 1, {3}, {2}, {1}, {2, 3, 9}},
        {"unpool2d_overlap", 2, {3, 2}, {2, 1}, {1, 0}, {1, 2, 7, 9}},
        {"unpool3d", 3, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {2, 2, 4, 6, 4}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const int ns = cases[i].ns;
        tg_pool_params p = TG_POOL_PARAMS_INIT;
        for (int a = 0; a < ns; a++) {
            p.kernel[a] = cases[i].k[a];
            p.stride[a] = cases[i].s[a];
            p.padding[a] = cases[i].pad[a];
        }
        tg_tensor *x0 = th_rand_uniform(TG_F32, ns + 2, cases[i].in, 40 + i), *y = NULL,
                  *idx = NULL;
        OK(tg_max_pool_with_indices(&y, &idx, x0, ns, &p));
        tg_module *m = NULL;
        OK(tg_nn_max_unpool_new(&m, ns, &p));
        case_graph = "\"ops\": [\"Slice\", \"Mul\", \"Add\", \"CumSum\", \"Add\", \"Add\", "
                     "\"MaxUnpool\"], \"attributes\": {\"CumSum\": {\"exclusive\": 1}}";
        write_case_n(cases[i].name, m, 2, (tg_tensor *[]){y, idx},
                     (const char *[]){"x", "indices"}, 1e-6, 0, NULL, NULL);
        if (i == 0) {   /* a dynamic batch, run on 3 rows for 2 */
            int64_t in3[3] = {3, cases[i].in[1], cases[i].in[2]};
            tg_tensor *x3 = th_rand_uniform(TG_F32, 3, in3, 50), *y3 = NULL, *idx3 = NULL;
            OK(tg_max_pool_with_indices(&y3, &idx3, x3, ns, &p));
            case_graph = NULL;
            dynamic_case2("unpool1d_dynamic", m, (tg_tensor *[]){y, idx},
                          (tg_tensor *[]){y3, idx3}, "batch,3,9");
            th_release_all(3, (tg_tensor *[]){x3, y3, idx3});
        }
        th_release_all(3, (tg_tensor *[]){x0, y, idx});
        tg_module_release(m);
    }

    tg_st_file *f = th_golden_load("pool/onnx_pool.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int count = 0;
    for (int i = 0; i < n; i++) {
        char c[16], name[32];
        snprintf(c, sizeof c, "case%d", i);
        if (strcmp(th_golden_meta(f, c, "kind"), "chain") != 0) continue;
        const int ns = atoi(th_golden_meta(f, c, "ns"));
        tg_pool_params p = params_of(f, c);
        tg_module *seq = NULL, *pool = NULL, *unpool = NULL;
        OK(tg_nn_sequential_new(&seq));
        OK(tg_nn_max_pool_new(&pool, ns, &p));
        OK(tg_nn_max_pool_set_return_indices(pool, true));
        OK(tg_nn_max_unpool_new(&unpool, ns, &p));
        append(seq, pool);
        append(seq, unpool);
        const tg_tensor *x = th_golden_get(f, c, "x"), *y = th_golden_get(f, c, "y");
        tg_tensor *z = forward(seq, (tg_tensor *)x);
        th_expect_same_bits(c, x, z, y);
        snprintf(name, sizeof name, "chain_%d", i);
        torch_case(name, seq, x, y, NULL, count % 2 == 1);
        count++;
        tg_tensor_release(z);
        tg_module_release(seq);
    }
    cr_assert(count >= 4, "%d chain cases", count);
    tg_st_free(f);
    check_cases();
}

/* ---- refusals ---- */

/* Custom modules under the names of exported leaves: one taking two
 * inputs (x, indices), one giving two outputs (x, x's indices as x). */
static int two_in(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs)
{
    (void)m;
    (void)n;
    *y = tg_tensor_retain(xs[0]);
    return TG_OK;
}

static int one_in(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    (void)m;
    *y = tg_tensor_retain(x);
    return TG_OK;
}

static int two_out(tg_module *m, tg_tensor **ys, int n, tg_tensor *const *xs)
{
    (void)m;
    (void)n;
    ys[0] = tg_tensor_retain(xs[0]);
    return tg_tensor_to_dtype(&ys[1], xs[0], TG_I64);
}

static const tg_module_vtable linear2_vt = {.type_name = "Linear", .forward_n = two_in,
                                            .n_inputs = 2};
static const tg_module_vtable identity2_vt = {.type_name = "Identity", .forward = one_in,
                                              .forward_outputs = two_out, .n_outputs = 2};

/* A leaf's export takes one input and gives one output: custom modules of
 * its name that take or give two in a Sequential are refused, no abort. */
Test(onnx_unpool, custom_modules_of_two_values_are_refused)
{
    need_onnx();
    char path[256];
    th_tmp_path(path, sizeof path, "refused.onnx");
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 2, 0, 0);
    tg_module *seq = NULL, *pool = NULL, *custom = NULL, *unpool = NULL;
    OK(tg_nn_sequential_new(&seq));
    OK(tg_nn_max_pool_new(&pool, 1, &p));
    OK(tg_nn_max_pool_set_return_indices(pool, true));
    OK(tg_module_new(&custom, &linear2_vt, NULL));
    append(seq, pool);
    append(seq, custom);
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){1, 2, 6}, 11);
    cr_assert(eq(int, tg_onnx_export(seq, x, path, NULL), TG_EUNSUPPORTED));
    th_expect_in(tg_error_message(), "module '1' (Linear) is not supported: it takes the 2 "
                                     "outputs of the module before it");
    tg_module_release(seq);

    OK(tg_nn_sequential_new(&seq));
    OK(tg_module_new(&custom, &identity2_vt, NULL));
    OK(tg_nn_max_unpool_new(&unpool, 1, &p));
    append(seq, custom);
    append(seq, unpool);
    cr_assert(eq(int, tg_onnx_export(seq, x, path, NULL), TG_EUNSUPPORTED));
    th_expect_in(tg_error_message(), "module '0' (Identity) is not supported: it gives 2 "
                                     "outputs to the next module");
    cr_assert(th_exists(path) == false);
    tg_module_release(seq);
    tg_tensor_release(x);
}

Test(onnx_unpool, refusals_name_their_rule)
{
    need_onnx();
    char path[256];
    th_tmp_path(path, sizeof path, "refused.onnx");
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.extra_outputs = true;

    /* a ceil_mode end pad that reaches the dilated kernel: a -inf Pad, whose
     * indices would count the padding */
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    p.kernel[0] = 2;
    p.stride[0] = 3;
    p.padding[0] = 1;
    p.dilation[0] = 2;
    p.ceil_mode = true;
    tg_module *m = NULL;
    OK(tg_nn_max_pool_new(&m, 1, &p));
    OK(tg_nn_max_pool_set_return_indices(m, true));
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 2, 6}, 3);
    cr_assert(eq(int, tg_onnx_export(m, x, path, &o), TG_EUNSUPPORTED), "%s",
              tg_error_message());
    th_expect_in(tg_error_message(), "(MaxPool1d) with return_indices has an end pad as large");
    cr_assert(th_exists(path) == false);
    /* without return_indices the same module exports, its output alone */
    OK(tg_nn_max_pool_set_return_indices(m, false));
    cr_assert(eq(int, tg_module_output_count(m), 1));
    OK(tg_onnx_export(m, x, path, &o));
    remove(path);
    tg_module_release(m);
    tg_tensor_release(x);

    /* MaxUnpool: indices of another dtype, an unbatched input */
    tg_pool_params q = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&q, 2, 0, 0);
    OK(tg_nn_max_unpool_new(&m, 1, &q));
    tg_tensor *x4 = th_rand_uniform(TG_F32, 3, (int64_t[]){1, 2, 4}, 5), *y = NULL, *i64 = NULL,
              *i32 = NULL;
    OK(tg_max_pool_with_indices(&y, &i64, x4, 1, &q));
    OK(tg_tensor_to_dtype(&i32, i64, TG_I32));
    refused_export_n(m, 2, (tg_tensor *[]){y, i32}, NULL, TG_EDTYPE,
                     "(MaxUnpool1d) takes x f32 and indices i64, not f32 and i32");
    tg_tensor *x2 = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 6}, 7), *yu = NULL, *iu = NULL;
    OK(tg_max_pool_with_indices(&yu, &iu, x2, 1, &q));
    refused_export_n(m, 2, (tg_tensor *[]){yu, iu}, NULL, TG_EUNSUPPORTED,
                     "(MaxUnpool1d) runs on an unbatched input (2 dims)");
    th_release_all(7, (tg_tensor *[]){x4, y, i64, i32, x2, yu, iu});

    /* return_indices is MaxPool's alone */
    cr_assert(eq(int, tg_nn_max_pool_set_return_indices(m, true), TG_EINVAL));
    th_expect_in(tg_error_message(), "m is a MaxUnpool1d module, not MaxPoolNd");
    cr_assert(eq(int, tg_nn_max_pool_set_return_indices(NULL, true), TG_EINVAL));
    tg_module_release(m);
}
