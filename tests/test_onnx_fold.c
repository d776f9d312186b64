/* tests/test_onnx_fold.c - tg_onnx_export of nn.Unfold (Pad, Gather,
 * Gather, Transpose, Reshape: copies, so ONNX Runtime gives tapegrad's
 * values exactly), batched, unbatched, with a dynamic batch and inside a
 * Sequential, and of nn.Fold (Reshape, a ConvTranspose with a 0/1 weight
 * per tap: col2im at opset 17) likewise, checked by onnx's checker and
 * ONNX Runtime. */
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

static tg_module *fold_module(int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t d0,
                              int64_t d1, int64_t p0, int64_t p1, int64_t s0, int64_t s1)
{
    tg_fold_params p = {.kernel_size = {kh, kw}, .dilation = {d0, d1}, .padding = {p0, p1},
                        .stride = {s0, s1}};
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_fold_new(&m, (const int64_t[]){oh, ow}, &p), TG_OK), "%s",
              tg_error_message());
    return m;
}

Test(onnx_fold, fold_matches_onnxruntime)
{
    need_onnx();
    /* overlapping blocks, padding, dilation, stride; H's blocks end one row
     * short of output_size (output_padding 1) */
    tg_module *a = fold_module(5, 7, 2, 3, 1, 2, 1, 0, 2, 1);
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (const int64_t[]){2, 12, 9}, 41);
    case_graph = "\"ops\": [\"Reshape\", \"ConvTranspose\"], "
                 "\"initializer_values\": {\"/blocks_shape\": [0, 12, 3, 3]}, "
                 "\"attributes\": {\"ConvTranspose\": {\"group\": 2, "
                 "\"kernel_shape\": [2, 3], \"strides\": [2, 1], \"dilations\": [1, 2], "
                 "\"pads\": [1, 0, 1, 0], \"output_padding\": [1, 0]}}";
    write_case("fold_padded", a, x, 1e-5, 1e-6, NULL, NULL);
    /* gaps between blocks, a dynamic batch */
    tg_module *b = fold_module(8, 9, 2, 2, 1, 1, 0, 0, 3, 3);
    tg_tensor *x2 = th_rand_uniform(TG_F32, 3, (const int64_t[]){3, 8, 9}, 42);
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    case_graph = "\"ops\": [\"Reshape\", \"ConvTranspose\"], "
                 "\"attributes\": {\"ConvTranspose\": {\"output_padding\": [0, 1]}}";
    write_case("fold_gaps_dynamic", b, x2, 1e-5, 1e-6, NULL, &o);
    /* unbatched (C kh kw, L) -> (C, H, W) */
    tg_module *c = fold_module(6, 5, 3, 2, 2, 1, 2, 1, 1, 2);
    tg_tensor *x3 = th_rand_uniform(TG_F32, 2, (const int64_t[]){12, 18}, 43);
    case_graph = "\"ops\": [\"Reshape\", \"ConvTranspose\", \"Reshape\"], "
                 "\"initializer_values\": {\"/blocks_shape\": [1, 12, 6, 3], "
                 "\"/image_shape\": [2, 6, 5]}";
    write_case("fold_unbatched", c, x3, 1e-5, 1e-6, NULL, NULL);
    /* Unfold then Fold in a Sequential: each pixel times its block count */
    tg_module *seq = NULL;
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    append(seq, unfold_module(2, 2, 1, 1, 0, 0, 1, 1));
    append(seq, fold_module(5, 7, 2, 2, 1, 1, 0, 0, 1, 1));
    tg_tensor *x4 = th_rand_uniform(TG_F32, 4, (const int64_t[]){2, 3, 5, 7}, 44);
    write_case("unfold_fold", seq, x4, 1e-5, 1e-6, NULL, NULL);
    check_cases();
    tg_module_release(a);
    tg_module_release(b);
    tg_module_release(c);
    tg_module_release(seq);
    th_release_all(4, (tg_tensor *[]){x, x2, x3, x4});
}
