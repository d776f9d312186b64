/* tests/test_onnx_fold.c - tg_onnx_export of nn.Unfold (Pad, Gather,
 * Gather, Transpose, Reshape: copies, so ONNX Runtime gives tapegrad's
 * values exactly), batched, unbatched, with a dynamic batch and inside a
 * Sequential, checked by onnx's checker and ONNX Runtime; nn.Fold refused
 * (ONNX's Col2Im is opset 18), nothing written. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "onnx_cases.h"
#include "tapegrad/tapegrad.h"

TestSuite(onnx_fold, .init = onnx_setup, .fini = th_tmp_dir_remove);

static tg_module *unfold_module(int64_t kh, int64_t kw, int64_t d0, int64_t d1, int64_t p0,
                                int64_t p1, int64_t s0, int64_t s1)
{
    tg_fold_params p = {.kernel_size = {kh, kw}, .dilation = {d0, d1}, .padding = {p0, p1},
                        .stride = {s0, s1}};
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_unfold_new(&m, &p), TG_OK), "%s", tg_error_message());
    return m;
}

Test(onnx_fold, unfold_matches_onnxruntime)
{
    need_onnx();
    /* overlapping blocks with padding: every node, the gathers' indices
     * l*stride + i*dilation in padded coordinates */
    tg_module *a = unfold_module(2, 3, 1, 2, 1, 0, 2, 1);
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (const int64_t[]){2, 3, 5, 7}, 31);
    case_graph = "\"ops\": [\"Pad\", \"Gather\", \"Gather\", \"Transpose\", \"Reshape\"], "
                 "\"initializer_values\": {\"/pads\": [0, 0, 1, 0, 0, 0, 1, 0], "
                 "\"/rows\": [0, 2, 4, 1, 3, 5], \"/cols\": [0, 1, 2, 2, 3, 4, 4, 5, 6], "
                 "\"/shape\": [0, 18, 9]}, "
                 "\"attributes\": {\"Transpose\": {\"perm\": [0, 1, 2, 4, 3, 5]}}";
    write_case("unfold_padded", a, x, 0, 0, NULL, NULL);
    /* no padding (no Pad node), gaps between blocks, a dynamic batch */
    tg_module *b = unfold_module(2, 2, 1, 1, 0, 0, 3, 3);
    tg_tensor *x2 = th_rand_uniform(TG_F32, 4, (const int64_t[]){3, 2, 8, 9}, 32);
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    case_graph = "\"ops\": [\"Gather\", \"Gather\", \"Transpose\", \"Reshape\"]";
    write_case("unfold_gaps_dynamic", b, x2, 0, 0, NULL, &o);
    /* unbatched (C, H, W): the same nodes one rank lower */
    tg_module *c = unfold_module(3, 2, 2, 1, 2, 1, 1, 2);
    tg_tensor *x3 = th_rand_uniform(TG_F32, 3, (const int64_t[]){2, 6, 5}, 33);
    case_graph = "\"ops\": [\"Pad\", \"Gather\", \"Gather\", \"Transpose\", \"Reshape\"], "
                 "\"attributes\": {\"Transpose\": {\"perm\": [0, 1, 3, 2, 4]}}";
    write_case("unfold_unbatched", c, x3, 0, 0, NULL, NULL);
    /* in a Sequential after a Conv */
    tg_module *seq = NULL, *conv = NULL;
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    tg_rng rng;
    tg_rng_init(&rng, 5);
    tg_conv_params cp = TG_CONV_PARAMS_INIT;
    cr_assert(tg_nn_conv_new(&conv, 2, 3, 4, (const int64_t[]){3, 3}, &cp, true, &rng) == TG_OK,
              "%s", tg_error_message());
    append(seq, conv);
    append(seq, unfold_module(2, 2, 1, 1, 0, 0, 2, 2));
    write_case("conv_unfold", seq, x, 1e-5, 1e-6, NULL, NULL);
    check_cases();
    tg_module_release(a);
    tg_module_release(b);
    tg_module_release(c);
    tg_module_release(seq);
    th_release_all(3, (tg_tensor *[]){x, x2, x3});
}

Test(onnx_fold, fold_is_refused)
{
    need_onnx();
    tg_fold_params p = TG_FOLD_PARAMS_INIT;
    p.kernel_size[0] = p.kernel_size[1] = 2;
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_fold_new(&m, (const int64_t[]){5, 6}, &p), TG_OK));
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (const int64_t[]){2, 12, 20}, 3);
    char path[256];
    th_tmp_path(path, sizeof path, "fold.onnx");
    cr_assert(eq(int, tg_onnx_export(m, x, path, NULL), TG_EUNSUPPORTED), "%s",
              tg_error_message());
    th_expect_in(tg_error_message(),
                 "onnx_export: module '<top>' (Fold) is not supported: summing the blocks into "
                 "the image takes ONNX's Col2Im, an opset 18 operator, and the export writes "
                 "opset 17");
    cr_assert(th_exists(path) == false, "a refused export left %s", path);
    tg_module_release(m);
    tg_tensor_release(x);
}
