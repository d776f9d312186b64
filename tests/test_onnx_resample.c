/* tests/test_onnx_resample.c - tg_onnx_export of pooling, upsampling and
 * normalisation, checked by onnx's checker and ONNX Runtime (within 1e-5):
 * Upsample (nearest, linear, bicubic, antialiased bilinear and bicubic; an
 * antialiased one with align_corners refused), AvgPool and MaxPool of every rank
 * (ceil_mode, count_include_pad, dilation) with the graph expected node by
 * node, AdaptiveAvgPool and AdaptiveMaxPool (global, kernel = stride;
 * uneven windows refused), and LayerNorm, GroupNorm and InstanceNorm (with and without running
 * statistics), and LPPool (even norm types as LpPool; the others:
 * test_onnx_unpool.c).
 * Each case writes its files into the test's temporary folder and
 * check_cases runs onnx's checker and ONNX Runtime over it (onnx_cases.h). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "onnx_cases.h"
#include "tapegrad/tapegrad.h"

TestSuite(onnx_resample, .init = onnx_setup, .fini = th_tmp_dir_remove);

/* ---- pooling and upsampling ---- */

/* One resampling module: kind 'u' (Upsample), 'l' 'L' (linear, 'L' with
 * align_corners), 'c' 'C' (bicubic), 'i' 'k' (antialiased bilinear and
 * bicubic), 'a' (AvgPoolNd), 'm' (MaxPoolNd); for pools kernel, stride, padding, dilation per axis; and
 * the graph expected, worked out by hand: the nodes and the pool's pads
 * (ceil_mode is written as floor mode with grown end pads; a
 * count_include_pad window cut at the padding is rescaled by a Mul; a
 * MaxPool pad that reaches the kernel is a Pad node of -inf). */
typedef struct pool_case {
    const char *name;
    char kind;
    int ns;
    int64_t k[3], stride[3], pad[3], dil[3];
    bool ceil, cip;
    int64_t in[5];   /* the input's shape, rank ns + 2 */
    const char *ops;
    int64_t pads[6];
    int cip_attr;
} pool_case;

/* Every rank; ceil_mode windows that run past the padding (torch divides
 * those by the count up to the padding's end) or would start in it (torch
 * drops them); both count_include_pad; dilation, with an end pad as large
 * as the kernel. */
static const pool_case pool_cases[] = {
    {"upsample1d_s3", 'u', 1, {3}, {0}, {0}, {0}, false, false, {2, 3, 5}, NULL, {0}, 0},
    {"upsample2d_s23", 'u', 2, {2, 3}, {0}, {0}, {0}, false, false, {2, 2, 4, 5}, NULL, {0}, 0},
    {"upsample3d_s212", 'u', 3, {2, 1, 2}, {0}, {0}, {0}, false, false, {1, 2, 2, 3, 2}, NULL,
     {0}, 0},
    {"upsample_linear1d_s3", 'l', 1, {3}, {0}, {0}, {0}, false, false, {2, 3, 5}, NULL, {0}, 0},
    {"upsample_bilinear2d_s23", 'l', 2, {2, 3}, {0}, {0}, {0}, false, false, {2, 2, 4, 5}, NULL,
     {0}, 0},
    {"upsample_bilinear2d_s22_aligned", 'L', 2, {2, 2}, {0}, {0}, {0}, false, false,
     {2, 2, 4, 5}, NULL, {0}, 0},
    {"upsample_trilinear3d_s212", 'l', 3, {2, 1, 2}, {0}, {0}, {0}, false, false,
     {1, 2, 2, 3, 2}, NULL, {0}, 0},
    {"upsample_bicubic2d_s23", 'c', 2, {2, 3}, {0}, {0}, {0}, false, false, {2, 2, 4, 5}, NULL,
     {0}, 0},
    {"upsample_bicubic2d_s22_aligned", 'C', 2, {2, 2}, {0}, {0}, {0}, false, false,
     {2, 2, 3, 5}, NULL, {0}, 0},
    {"upsample_bilinear2d_aa_s23", 'i', 2, {2, 3}, {0}, {0}, {0}, false, false, {2, 2, 4, 5},
     NULL, {0}, 0},
    {"upsample_bicubic2d_aa_s23", 'k', 2, {2, 3}, {0}, {0}, {0}, false, false, {2, 2, 4, 5},
     NULL, {0}, 0},
    {"upsample_bicubic2d_aa_s31", 'k', 2, {3, 1}, {0}, {0}, {0}, false, false, {1, 3, 2, 6},
     NULL, {0}, 0},
    {"avgpool1d_ceil_past_padding", 'a', 1, {3}, {2}, {1}, {1}, true, true, {2, 2, 6},
     "\"AveragePool\", \"Mul\"", {1, 2}, 1},
    {"avgpool1d_ceil_no_pad_count", 'a', 1, {3}, {2}, {1}, {1}, true, false, {2, 2, 6},
     "\"AveragePool\"", {1, 2}, 0},
    {"avgpool2d_k3s2p1", 'a', 2, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false, true, {2, 3, 7, 6},
     "\"AveragePool\"", {1, 1, 1, 1}, 1},
    {"avgpool2d_k32_s21_ceil", 'a', 2, {3, 2}, {2, 1}, {1, 1}, {1, 1}, true, false,
     {2, 3, 7, 6}, "\"AveragePool\"", {1, 1, 1, 1}, 0},
    {"avgpool2d_ceil_one_axis_past_padding", 'a', 2, {3, 2}, {2, 2}, {1, 1}, {1, 1}, true, true,
     {2, 2, 6, 5}, "\"AveragePool\", \"Mul\"", {1, 1, 2, 1}, 1},
    {"avgpool3d_ceil_drops_a_window", 'a', 3, {2, 2, 2}, {2, 2, 1}, {1, 0, 1}, {1, 1, 1}, true,
     true, {1, 2, 5, 4, 4}, "\"AveragePool\"", {1, 0, 1, 1, 0, 1}, 1},
    {"maxpool1d_ceil", 'm', 1, {3}, {2}, {1}, {1}, true, false, {2, 3, 10}, "\"MaxPool\"",
     {1, 2}, 0},
    {"maxpool1d_ceil_dilated_end_pad_2", 'm', 1, {2}, {3}, {1}, {2}, true, false, {2, 2, 6},
     "\"Pad\", \"MaxPool\"", {0, 0}, 0},
    {"maxpool2d_dilated", 'm', 2, {3, 2}, {1, 2}, {1, 1}, {2, 1}, false, false, {2, 2, 8, 7},
     "\"MaxPool\"", {1, 1, 1, 1}, 0},
    {"maxpool3d_ceil_dilated", 'm', 3, {2, 3, 2}, {2, 2, 1}, {1, 1, 0}, {1, 1, 2}, true, false,
     {1, 2, 5, 6, 5}, "\"MaxPool\"", {1, 1, 0, 1, 2, 0}, 0},
};

static tg_module *pool_module(const pool_case *c)
{
    tg_module *m = NULL;
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    for (int a = 0; a < c->ns; a++) {
        p.kernel[a] = c->k[a];
        p.stride[a] = c->stride[a];
        p.padding[a] = c->pad[a];
        p.dilation[a] = c->dil[a];
    }
    p.ceil_mode = c->ceil;
    p.count_include_pad = c->cip;
    int rc = c->kind == 'u'   ? tg_nn_upsample_new(&m, c->ns, c->k)
             : c->kind == 'l' || c->kind == 'L'
                 ? tg_nn_upsample_linear_new(&m, c->ns, c->k, c->kind == 'L')
             : c->kind == 'c' || c->kind == 'C'
                 ? tg_nn_upsample_bicubic_new(&m, c->k, c->kind == 'C')
             : c->kind == 'i' || c->kind == 'k'
                 ? tg_nn_upsample_antialias_new(
                       &m, c->kind == 'k' ? TG_UPSAMPLE_BICUBIC : TG_UPSAMPLE_LINEAR, c->k, false)
             : c->kind == 'a' ? tg_nn_avg_pool_new(&m, c->ns, &p)
                              : tg_nn_max_pool_new(&m, c->ns, &p);
    cr_assert(rc == TG_OK, "%s: %s", c->name, tg_error_message());
    return m;
}

/* What check.py checks of case c's graph: the nodes, Resize's attributes
 * and scales (1, 1, s...), or the pool's attributes. */
static void pool_graph_json(char *buf, size_t size, const pool_case *c)
{
    buf[0] = '\0';
    if (strchr("lLcCik", c->kind)) {
        /* antialiased and enlarging: the triangle is linear's, the cubic
         * has a = -0.5 and drops the taps outside x */
        const bool cubic = strchr("cCk", c->kind) != NULL;
        jcat(buf, size, "\"ops\": [\"Resize\"], \"attributes\": {\"Resize\": {\"mode\": "
             "\"%s\", %s\"coordinate_transformation_mode\": \"%s\"}}, "
             "\"initializer_values\": {\"/scales\": [1, 1",
             cubic ? "cubic" : "linear",
             c->kind == 'k' ? "\"cubic_coeff_a\": -0.5, \"exclude_outside\": 1, "
             : cubic        ? "\"cubic_coeff_a\": -0.75, "
                            : "",
             c->kind == 'L' || c->kind == 'C' ? "align_corners" : "pytorch_half_pixel");
        for (int a = 0; a < c->ns; a++) jcat(buf, size, ", %lld", (long long)c->k[a]);
        jcat(buf, size, "]}");
        return;
    }
    if (c->kind == 'u') {
        jcat(buf, size, "\"ops\": [\"Resize\"], \"attributes\": {\"Resize\": {\"mode\": "
             "\"nearest\", \"coordinate_transformation_mode\": \"asymmetric\", "
             "\"nearest_mode\": \"floor\"}}, \"initializer_values\": {\"/scales\": [1, 1");
        for (int a = 0; a < c->ns; a++) jcat(buf, size, ", %lld", (long long)c->k[a]);
        jcat(buf, size, "]}");
        return;
    }
    const char *op = c->kind == 'a' ? "AveragePool" : "MaxPool";
    jcat(buf, size, "\"ops\": [%s], \"attributes\": {\"%s\": {\"ceil_mode\": 0, \"pads\": [",
         c->ops, op);
    for (int e = 0; e < 2 * c->ns; e++) jcat(buf, size, "%s%lld", e ? ", " : "", (long long)c->pads[e]);
    jcat(buf, size, "], \"kernel_shape\": [");
    for (int a = 0; a < c->ns; a++) jcat(buf, size, "%s%lld", a ? ", " : "", (long long)c->k[a]);
    jcat(buf, size, "], \"strides\": [");
    for (int a = 0; a < c->ns; a++)
        jcat(buf, size, "%s%lld", a ? ", " : "", (long long)c->stride[a]);
    if (c->kind == 'a') {
        jcat(buf, size, "], \"count_include_pad\": %d}}", c->cip_attr);
        return;
    }
    jcat(buf, size, "], \"dilations\": [");
    for (int a = 0; a < c->ns; a++) jcat(buf, size, "%s%lld", a ? ", " : "", (long long)c->dil[a]);
    jcat(buf, size, "]}}");
}

Test(onnx_resample, pooling_and_upsampling_match_onnxruntime)
{
    need_onnx();
    for (size_t i = 0; i < sizeof pool_cases / sizeof *pool_cases; i++) {
        const pool_case *c = &pool_cases[i];
        tg_module *m = pool_module(c);
        tg_tensor *x = th_rand_uniform(TG_F32, c->ns + 2, c->in, 500 + i);
        char graph[1024];
        pool_graph_json(graph, sizeof graph, c);
        case_graph = graph;
        write_case(c->name, m, x, 1e-5, 0, NULL, NULL);
        tg_module_release(m);
        tg_tensor_release(x);
    }
    /* a decoder stage, Upsample + Conv in place of a ConvTranspose, then a
     * MaxPool, with a dynamic batch: exported on 2 samples, run on 3 */
    tg_rng rng;
    tg_rng_init(&rng, 5);
    tg_module *seq = NULL, *m = NULL;
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    cr_assert(tg_nn_upsample_new(&m, 2, (const int64_t[]){2, 2}) == TG_OK);
    append(seq, m);
    tg_conv_params cp = TG_CONV_PARAMS_INIT;
    tg_conv_params_set_padding(&cp, 1);
    cr_assert(tg_nn_conv_new(&m, 2, 3, 4, (const int64_t[]){3, 3}, &cp, true, &rng) == TG_OK);
    append(seq, m);
    tg_pool_params pp = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&pp, 3, 2, 1);
    cr_assert(tg_nn_max_pool_new(&m, 2, &pp) == TG_OK);
    append(seq, m);
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (const int64_t[]){2, 3, 5, 4}, 7);
    tg_tensor *xr = th_rand_uniform(TG_F32, 4, (const int64_t[]){3, 3, 5, 4}, 8);
    tg_tensor *y = forward(seq, xr);
    char path[256];
    cr_assert(tg_onnx_export(seq, x, th_tmp_path(path, sizeof path, "decoder.onnx"), &o) == TG_OK,
              "%s", tg_error_message());
    case_graph = "\"ops\": [\"Resize\", \"Conv\", \"MaxPool\"]";
    write_expected("decoder", xr, y, 1e-5, 0,
                   (const char *const[]){"/0/scales", "1.bias", "1.weight", NULL});
    th_release_all(3, (tg_tensor *[]){x, xr, y});
    tg_module_release(seq);
    /* a sub-pixel stage: Conv to 4r^2 channels, PixelShuffle (DepthToSpace
     * CRD), then PixelUnshuffle (Reshape, Transpose, Reshape) and a Conv,
     * also with a dynamic batch */
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    cr_assert(tg_nn_conv_new(&m, 2, 3, 16, (const int64_t[]){3, 3}, &cp, true, &rng) == TG_OK);
    append(seq, m);
    cr_assert(tg_nn_pixel_shuffle_new(&m, 2) == TG_OK);
    append(seq, m);
    cr_assert(tg_nn_pixel_unshuffle_new(&m, 2) == TG_OK);
    append(seq, m);
    cr_assert(tg_nn_conv_new(&m, 2, 16, 2, (const int64_t[]){1, 1}, &cp, true, &rng) == TG_OK);
    append(seq, m);
    x = th_rand_uniform(TG_F32, 4, (const int64_t[]){2, 3, 5, 4}, 9);
    xr = th_rand_uniform(TG_F32, 4, (const int64_t[]){3, 3, 5, 4}, 10);
    y = forward(seq, xr);
    cr_assert(tg_onnx_export(seq, x, th_tmp_path(path, sizeof path, "subpixel.onnx"), &o) ==
                  TG_OK, "%s", tg_error_message());
    case_graph = "\"ops\": [\"Conv\", \"DepthToSpace\", \"Reshape\", \"Transpose\", "
                 "\"Reshape\", \"Conv\"], \"attributes\": {\"DepthToSpace\": {\"blocksize\": "
                 "2, \"mode\": \"CRD\"}, \"Transpose\": {\"perm\": [0, 1, 3, 5, 2, 4]}}";
    write_expected("subpixel", xr, y, 1e-5, 1e-6,
                   (const char *const[]){"0.bias", "0.weight", "/2/split_shape", "/2/shape",
                                         "3.bias", "3.weight", NULL});
    check_cases();
    th_release_all(3, (tg_tensor *[]){x, xr, y});
    tg_module_release(seq);
}

/* An antialiased Upsample with align_corners reads the source positions
 * (o + 1/2) (S-1)/(O-1), which no coordinate_transformation_mode of
 * Resize gives: refused, nothing written. */
Test(onnx_resample, antialias_with_align_corners_is_refused)
{
    tg_module *m = NULL;
    cr_assert(tg_nn_upsample_antialias_new(&m, TG_UPSAMPLE_BICUBIC, (const int64_t[]){2, 2},
                                           true) == TG_OK);
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (const int64_t[]){1, 2, 3, 4}, 3);
    char path[256];
    th_tmp_path(path, sizeof path, "aa_aligned.onnx");
    cr_assert(eq(int, tg_onnx_export(m, x, path, NULL), TG_EUNSUPPORTED), "%s",
              tg_error_message());
    th_expect_in(tg_error_message(), "onnx_export: module '<top>' (Upsample) is antialiased "
                                     "with align_corners");
    cr_assert(th_exists(path) == false, "a refused export left %s", path);
    tg_module_release(m);
    tg_tensor_release(x);
}

/* A case of an adaptive pooling module: output_size (0: the input's),
 * the input's shape and the graph's expected ops and attributes. */
typedef struct adaptive_case {
    const char *name;
    int ns;
    int64_t size[3], in[5];
    const char *graph;
} adaptive_case;

/* The adaptive average (max) pooling modules of cases exported and run in
 * ONNX Runtime; then, with output_size `size`, the input of shape `in` (an
 * extent it does not divide) refused naming `uneven`, and the unbatched
 * input of shape `flat` refused, no file written. */
static void adaptive_exports(bool max, const adaptive_case *cases, size_t n, int ns,
                             const int64_t *size, const int64_t *in, const char *uneven,
                             const int64_t *flat)
{
    need_onnx();
    int (*make)(tg_module **, int, const int64_t *) =
        max ? tg_nn_adaptive_max_pool_new : tg_nn_adaptive_avg_pool_new;
    for (size_t i = 0; i < n; i++) {
        tg_module *m = NULL;
        cr_assert(make(&m, cases[i].ns, cases[i].size) == TG_OK);
        tg_tensor *x = th_rand_uniform(TG_F32, cases[i].ns + 2, cases[i].in, 700 + 20 * max + i);
        case_graph = cases[i].graph;
        write_case(cases[i].name, m, x, 1e-5, 0, NULL, NULL);
        tg_module_release(m);
        tg_tensor_release(x);
    }
    check_cases();

    tg_module *m = NULL;
    char path[256], words[96];
    th_tmp_path(path, sizeof path, max ? "adaptive_max_uneven.onnx" : "adaptive_uneven.onnx");
    cr_assert(make(&m, ns, size) == TG_OK);
    tg_tensor *x = th_rand_uniform(TG_F32, ns + 2, in, 3);
    cr_assert(eq(int, tg_onnx_export(m, x, path, NULL), TG_EUNSUPPORTED), "%s",
              tg_error_message());
    th_expect_in(tg_error_message(), uneven);
    cr_assert(th_exists(path) == false, "a refused export left %s", path);
    tg_tensor_release(x);
    x = th_rand_uniform(TG_F32, ns + 1, flat, 4);
    cr_assert(eq(int, tg_onnx_export(m, x, path, NULL), TG_EUNSUPPORTED));
    snprintf(words, sizeof words, "(Adaptive%sPool%dd) runs on an unbatched input (%d dims)",
             max ? "Max" : "Avg", ns, ns + 1);
    th_expect_in(tg_error_message(), words);
    cr_assert(th_exists(path) == false, "a refused export left %s", path);
    tg_module_release(m);
    tg_tensor_release(x);
}

/* AdaptiveAvgPoolNd: output 1 everywhere is GlobalAveragePool, output
 * extents that divide the input's an AveragePool with kernel = stride =
 * I/O; ONNX Runtime computes tapegrad's outputs.  Uneven windows and an
 * unbatched input are refused, nothing written. */
Test(onnx_resample, adaptive_avg_pool_matches_onnxruntime)
{
    static const adaptive_case cases[] = {
        {"adaptive1d_global", 1, {1}, {2, 3, 7}, "\"ops\": [\"GlobalAveragePool\"]"},
        {"adaptive2d_global", 2, {1, 1}, {2, 3, 5, 6}, "\"ops\": [\"GlobalAveragePool\"]"},
        {"adaptive3d_global", 3, {1, 1, 1}, {1, 2, 3, 4, 5},
         "\"ops\": [\"GlobalAveragePool\"]"},
        {"adaptive1d_divides", 1, {4}, {2, 3, 12},
         "\"ops\": [\"AveragePool\"], \"attributes\": {\"AveragePool\": {\"kernel_shape\": "
         "[3], \"strides\": [3], \"pads\": [0, 0], \"count_include_pad\": 0}}"},
        {"adaptive2d_divides_none", 2, {2, 0}, {2, 3, 8, 5},
         "\"ops\": [\"AveragePool\"], \"attributes\": {\"AveragePool\": {\"kernel_shape\": "
         "[4, 1], \"strides\": [4, 1], \"pads\": [0, 0, 0, 0]}}"},
        {"adaptive3d_divides", 3, {2, 1, 3}, {1, 2, 4, 3, 6},
         "\"ops\": [\"AveragePool\"], \"attributes\": {\"AveragePool\": {\"kernel_shape\": "
         "[2, 3, 2], \"strides\": [2, 3, 2]}}"},
    };
    adaptive_exports(false, cases, sizeof cases / sizeof *cases, 2, (const int64_t[]){3, 2},
                     (const int64_t[]){1, 2, 7, 4},
                     "onnx_export: module '<top>' (AdaptiveAvgPool2d) pools spatial dim 0 of "
                     "extent 7 to 3, which does not divide it",
                     (const int64_t[]){2, 6, 4});
}

/* AdaptiveMaxPoolNd: output 1 everywhere is GlobalMaxPool, output extents
 * that divide the input's a MaxPool with kernel = stride = I/O; ONNX
 * Runtime computes tapegrad's outputs.  Uneven windows and an unbatched
 * input are refused, nothing written. */
Test(onnx_resample, adaptive_max_pool_matches_onnxruntime)
{
    static const adaptive_case cases[] = {
        {"adaptive_max1d_global", 1, {1}, {2, 3, 7}, "\"ops\": [\"GlobalMaxPool\"]"},
        {"adaptive_max2d_global", 2, {1, 1}, {2, 3, 5, 6}, "\"ops\": [\"GlobalMaxPool\"]"},
        {"adaptive_max3d_global", 3, {1, 1, 1}, {1, 2, 3, 4, 5},
         "\"ops\": [\"GlobalMaxPool\"]"},
        {"adaptive_max1d_divides", 1, {4}, {2, 3, 12},
         "\"ops\": [\"MaxPool\"], \"attributes\": {\"MaxPool\": {\"kernel_shape\": "
         "[3], \"strides\": [3], \"pads\": [0, 0]}}"},
        {"adaptive_max2d_divides_none", 2, {2, 0}, {2, 3, 8, 5},
         "\"ops\": [\"MaxPool\"], \"attributes\": {\"MaxPool\": {\"kernel_shape\": "
         "[4, 1], \"strides\": [4, 1], \"pads\": [0, 0, 0, 0]}}"},
        {"adaptive_max3d_divides", 3, {2, 1, 3}, {1, 2, 4, 3, 6},
         "\"ops\": [\"MaxPool\"], \"attributes\": {\"MaxPool\": {\"kernel_shape\": "
         "[2, 3, 2], \"strides\": [2, 3, 2]}}"},
    };
    adaptive_exports(true, cases, sizeof cases / sizeof *cases, 3, (const int64_t[]){2, 2, 5},
                     (const int64_t[]){1, 2, 4, 6, 3},
                     "onnx_export: module '<top>' (AdaptiveMaxPool3d) pools spatial dim 2 of "
                     "extent 3 to 5, which does not divide it",
                     (const int64_t[]){2, 4, 6, 5});
}

/* ---- layer and group normalisation ---- */

/* Weight and bias of m (when it has them) set to random values, so that a
 * mix-up of the two, or of their axes, shows. */
static void randomize_affine(tg_module *m, uint64_t seed)
{
    for (int i = 0; i < 2; i++) {
        tg_tensor *t = tg_module_find(m, i ? "bias" : "weight");
        if (!t) continue;
        tg_tensor *r = th_rand_uniform(TG_F32, tg_tensor_ndim(t), tg_tensor_shape(t), seed + i);
        for (int64_t e = 0; e < tg_tensor_numel(t); e++)
            tg_tensor_set_flat(t, e, (i ? 0.0 : 1.0) + th_at(r, e));
        tg_tensor_release(r);
    }
}

/* One LayerNorm (groups 0) or GroupNorm case: the input's shape, the
 * normalized shape or the groups, affine, and the graph expected. */
typedef struct norm_case {
    const char *name;
    int nd;
    int64_t in[5];
    int n_norm;
    int64_t groups;
    bool affine;
    double eps;
    const char *graph;
    const char *inits[8];   /* the initializers, sorted */
} norm_case;

static const norm_case norm_cases[] = {
    {"layernorm_last", 3, {2, 3, 8}, 1, 0, true, 1e-5,
     "\"ops\": [\"LayerNormalization\"], \"attributes\": {\"LayerNormalization\": "
     "{\"axis\": -1}}", {"bias", "weight"}},
    {"layernorm_two_dims_no_affine", 3, {2, 4, 5}, 2, 0, false, 1e-3,
     "\"ops\": [\"LayerNormalization\"], \"attributes\": {\"LayerNormalization\": "
     "{\"axis\": -2}}, \"initializer_values\": {\"unit_weight\": [1, 1, 1, 1, 1, 1, 1, 1, 1, "
     "1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]}", {"unit_weight"}},
    {"groupnorm2d", 4, {2, 6, 4, 5}, 0, 3, true, 1e-5,
     "\"ops\": [\"Reshape\", \"InstanceNormalization\", \"Reshape\", \"Unsqueeze\", \"Mul\", "
     "\"Unsqueeze\", \"Add\"], \"initializer_values\": {\"/group_shape\": [0, 3, -1], "
     "\"/shape\": [0, 6, 4, 5], \"/affine_axes\": [1, 2], \"/group_scale\": [1, 1, 1]}",
     {"/affine_axes", "/group_bias", "/group_scale", "/group_shape", "/shape", "bias", "weight"}},
    {"groupnorm1d_instance_no_affine", 3, {2, 4, 7}, 0, 4, false, 1e-4,
     "\"ops\": [\"Reshape\", \"InstanceNormalization\", \"Reshape\"]",
     {"/group_bias", "/group_scale", "/group_shape", "/shape"}},
    {"groupnorm_no_spatial", 2, {3, 6}, 0, 2, true, 1e-5,
     "\"ops\": [\"Reshape\", \"InstanceNormalization\", \"Reshape\", \"Mul\", \"Add\"]",
     {"/group_bias", "/group_scale", "/group_shape", "/shape", "bias", "weight"}},
    {"groupnorm3d_one_group", 5, {1, 4, 2, 3, 3}, 0, 1, true, 1e-5, NULL,
     {"/affine_axes", "/group_bias", "/group_scale", "/group_shape", "/shape", "bias", "weight"}},
    /* groups -N: InstanceNormNd */
    {"instancenorm2d", 4, {2, 3, 4, 5}, 0, -2, true, 1e-5,
     "\"ops\": [\"InstanceNormalization\"]", {"bias", "weight"}},
    {"instancenorm1d_no_affine", 3, {2, 4, 7}, 0, -1, false, 1e-4,
     "\"ops\": [\"InstanceNormalization\"], \"initializer_values\": {\"/instance_scale\": "
     "[1, 1, 1, 1], \"/instance_bias\": [0, 0, 0, 0]}", {"/instance_bias", "/instance_scale"}},
};

/* InstanceNormNd with track_running_stats: its eval form, which
 * normalises by the running statistics, is BatchNormalization with them.
 * Training forwards first move the statistics away from (0, 1), where
 * InstanceNormalization would give other numbers. */
static const norm_case running_cases[] = {
    {"instancenorm2d_running", 4, {2, 3, 4, 5}, 0, -2, true, 1e-5,
     "\"ops\": [\"BatchNormalization\"], \"attributes\": {\"BatchNormalization\": "
     "{\"epsilon\": 9.999999747378752e-06}}", {"bias", "running_mean", "running_var", "weight"}},
    {"instancenorm1d_running_no_affine", 3, {3, 4, 7}, 0, -1, false, 1e-3,
     "\"ops\": [\"BatchNormalization\"], \"initializer_values\": {\"/instance_scale\": "
     "[1, 1, 1, 1], \"/instance_bias\": [0, 0, 0, 0]}",
     {"/instance_bias", "/instance_scale", "running_mean", "running_var"}},
    {"instancenorm3d_running", 5, {1, 2, 3, 2, 4}, 0, -3, true, 1e-5,
     "\"ops\": [\"BatchNormalization\"]", {"bias", "running_mean", "running_var", "weight"}},
};

Test(onnx_resample, instance_norm_running_statistics_match_onnxruntime)
{
    need_onnx();
    for (size_t i = 0; i < sizeof running_cases / sizeof *running_cases; i++) {
        const norm_case *c = &running_cases[i];
        tg_module *m = NULL;
        cr_assert(tg_nn_instance_norm_new_ex(&m, (int)-c->groups, c->in[1], c->eps, 0.5, c->affine,
                                             true) == TG_OK, "%s: %s", c->name, tg_error_message());
        randomize_affine(m, 900 + 2 * i);
        tg_tensor *x = th_rand_uniform(TG_F32, c->nd, c->in, 950 + i), *t = NULL;
        tg_module_train(m, true);
        for (int k = 0; k < 2; k++) {
            tg_tensor *xt = th_rand_uniform(TG_F32, c->nd, c->in, 970 + 2 * i + k);
            cr_assert(tg_module_forward(m, &t, xt) == TG_OK, "%s", tg_error_message());
            th_release_all(2, (tg_tensor *[]){xt, t});
        }
        case_graph = c->graph;
        write_case(c->name, m, x, 1e-5, 0, c->inits, NULL);
        tg_module_release(m);
        tg_tensor_release(x);
    }
    check_cases();
}

Test(onnx_resample, layer_and_group_norm_match_onnxruntime)
{
    need_onnx();
    for (size_t i = 0; i < sizeof norm_cases / sizeof *norm_cases; i++) {
        const norm_case *c = &norm_cases[i];
        tg_module *m = NULL;
        int rc = c->groups < 0
                     ? tg_nn_instance_norm_new(&m, (int)-c->groups, c->in[1], c->eps, c->affine)
                 : c->groups ? tg_nn_group_norm_new(&m, c->groups, c->in[1], c->eps, c->affine)
                             : tg_nn_layer_norm_new(&m, c->n_norm, &c->in[c->nd - c->n_norm],
                                                    c->eps, c->affine);
        cr_assert(rc == TG_OK, "%s: %s", c->name, tg_error_message());
        randomize_affine(m, 600 + 2 * i);
        tg_tensor *x = th_rand_uniform(TG_F32, c->nd, c->in, 700 + i);
        case_graph = c->graph;
        write_case(c->name, m, x, 1e-5, 0, c->inits, NULL);
        tg_module_release(m);
        tg_tensor_release(x);
    }
    /* decoder stages with a dynamic batch, exported on 2 samples and run on
     * 3: Linear -> LayerNorm -> Unflatten -> ConvTranspose -> GroupNorm ->
     * ReLU */
    tg_rng rng;
    tg_rng_init(&rng, 9);
    tg_module *seq = NULL, *m = NULL;
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    cr_assert(tg_nn_linear_new(&m, 6, 32, true, &rng) == TG_OK);
    append(seq, m);
    cr_assert(tg_nn_layer_norm_new(&m, 1, (const int64_t[]){32}, 1e-5, true) == TG_OK);
    randomize_affine(m, 801);
    append(seq, m);
    cr_assert(tg_nn_unflatten_new(&m, 1, 3, (const int64_t[]){8, 2, 2}) == TG_OK);
    append(seq, m);
    tg_conv_params cp = TG_CONV_PARAMS_INIT;
    cp.stride[0] = cp.stride[1] = 2;
    tg_conv_params_set_padding(&cp, 1);
    cr_assert(tg_nn_conv_transpose_new(&m, 2, 8, 4, (const int64_t[]){4, 4}, &cp, true, &rng) ==
              TG_OK);
    append(seq, m);
    cr_assert(tg_nn_group_norm_new(&m, 2, 4, 1e-5, true) == TG_OK);
    randomize_affine(m, 803);
    append(seq, m);
    append(seq, act(TG_ACT_RELU, 0));
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (const int64_t[]){2, 6}, 805);
    tg_tensor *xr = th_rand_uniform(TG_F32, 2, (const int64_t[]){3, 6}, 806);
    tg_tensor *y = forward(seq, xr);
    char path[256];
    cr_assert(tg_onnx_export(seq, x, th_tmp_path(path, sizeof path, "norm_decoder.onnx"), &o) ==
                  TG_OK, "%s", tg_error_message());
    write_expected("norm_decoder", xr, y, 1e-5, 0,
                   (const char *const[]){"/2/shape", "/4/affine_axes", "/4/group_bias",
                                         "/4/group_scale", "/4/group_shape", "/4/shape",
                                         "0.bias", "0.weight", "1.bias", "1.weight", "3.bias",
                                         "3.weight", "4.bias", "4.weight", NULL});
    check_cases();
    th_release_all(3, (tg_tensor *[]){x, xr, y});
    tg_module_release(seq);
}


/* ---- LPPool ---- */

/* LPPool1d/2d with an even norm_type is one LpPool node, which ONNX
 * Runtime computes as tapegrad (ceil_mode without a window cut short
 * included); an unbatched input is refused, nothing written. */
Test(onnx_resample, lp_pool_matches_onnxruntime)
{
    need_onnx();
    static const struct {
        const char *name;
        int ns;
        double p;
        int64_t k[2], s[2], in[4];
        bool ceil;
        const char *graph;
    } cases[] = {
        {"lppool1d_p2", 1, 2, {3}, {2}, {2, 3, 9}, false,
         "\"ops\": [\"LpPool\"], \"attributes\": {\"LpPool\": {\"kernel_shape\": [3], "
         "\"strides\": [2], \"pads\": [0, 0], \"p\": 2}}"},
        {"lppool2d_p4", 2, 4, {2, 3}, {0, 0}, {2, 2, 6, 7}, false,
         "\"ops\": [\"LpPool\"], \"attributes\": {\"LpPool\": {\"kernel_shape\": [2, 3], "
         "\"strides\": [2, 3], \"p\": 4}}"},
        {"lppool2d_p2_ceil_whole", 2, 2, {2, 2}, {2, 2}, {1, 3, 6, 8}, true,
         "\"ops\": [\"LpPool\"]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tg_pool_params p = TG_POOL_PARAMS_INIT;
        for (int a = 0; a < cases[i].ns; a++) {
            p.kernel[a] = cases[i].k[a];
            p.stride[a] = cases[i].s[a];
        }
        p.ceil_mode = cases[i].ceil;
        tg_module *m = NULL;
        cr_assert(tg_nn_lp_pool_new(&m, cases[i].ns, cases[i].p, &p) == TG_OK);
        tg_tensor *x = th_rand_uniform(TG_F32, cases[i].ns + 2, cases[i].in, 900 + i);
        case_graph = cases[i].graph;
        write_case(cases[i].name, m, x, 1e-5, 1e-6, NULL, NULL);
        tg_module_release(m);
        tg_tensor_release(x);
    }
    check_cases();

    char path[256];
    th_tmp_path(path, sizeof path, "lppool_refused.onnx");
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 2, 0, 0);
    const struct {
        double norm;
        bool ceil;
        int nd;
        int64_t in[4];
        const char *words;
    } refused[] = {
        {2, false, 3, {2, 4, 4}, "(LPPool2d) runs on an unbatched input (3 dims)"},
        {3, true, 3, {2, 5, 4}, "(LPPool2d) runs on an unbatched input (3 dims)"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        p.ceil_mode = refused[i].ceil;
        tg_module *m = NULL;
        cr_assert(tg_nn_lp_pool_new(&m, 2, refused[i].norm, &p) == TG_OK);
        tg_tensor *x = th_rand_uniform(TG_F32, refused[i].nd, refused[i].in, 5);
        cr_assert(eq(int, tg_onnx_export(m, x, path, NULL), TG_EUNSUPPORTED), "%zu: %s", i,
                  tg_error_message());
        th_expect_in(tg_error_message(), refused[i].words);
        cr_assert(th_exists(path) == false, "a refused export left %s", path);
        tg_module_release(m);
        tg_tensor_release(x);
    }
}
