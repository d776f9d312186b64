/* tests/test_onnx_modules.c - the ONNX export of ChannelShuffle,
 * LocalResponseNorm (src/onnx/onnx_channel.c), AlphaDropout,
 * FeatureAlphaDropout (no node in eval), and of the modules of two inputs
 * Bilinear, CosineSimilarity and PairwiseDistance through
 * tg_onnx_export_n (src/onnx/onnx_pair.c), checked as test_onnx.c's cases
 * are: onnx's checker with the nodes and attributes each case lists, and
 * ONNX Runtime against tapegrad's forward (onnx_cases.h), with a dynamic
 * batch run on another batch than the export's.  LocalResponseNorm with
 * odd and even sizes (torch's window is ONNX LRN's for odd sizes only),
 * sizes past the channels and inputs of 3 to 5 dims; CosineSimilarity
 * with broadcast inputs, zero vectors and an eps that clamps; every kind
 * of PairwiseDistance's p.  A dynamic batch's output dims are read back
 * from the file.  The refusals name the module and the rule and write
 * nothing.  The loss modules: test_onnx_losses.c. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "onnx_cases.h"
#include "tapegrad/tapegrad.h"

TestSuite(onnx_modules, .init = onnx_setup, .fini = th_tmp_dir_remove);

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* f32 sums in other orders, and ONNX Runtime's f32 Pow where tapegrad's
 * norms are computed in double */
#define RTOL 1e-5
#define ATOL 1e-6

static const char *const no_inits[] = {NULL};
static const char *const X12[2] = {"x1", "x2"};

static tg_tensor *urand(uint64_t seed, int nd, const int64_t *shape, double lo, double hi)
{
    return th_rand_tensor(&seed, TG_F32, nd, shape, lo, hi);
}

/* Case `name`: m exported on x with a symbolic batch (case_graph checked
 * there), the output's dims as declared out_dims, then run by ONNX Runtime
 * on xr, another batch, against m(xr). */
static void dynamic_case(const char *name, tg_module *m, tg_tensor *x, tg_tensor *xr,
                         const char *out_dims)
{
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    write_case(name, m, x, RTOL, ATOL, NULL, &o);
    char *dims = onnx_output_dims(name);
    cr_assert(strcmp(dims, out_dims) == 0, "%s: output dims %s, not %s", name, dims, out_dims);
    free(dims);
    tg_tensor *y = forward(m, xr);
    write_expected(name, xr, y, RTOL, ATOL, NULL);
    tg_tensor_release(y);
}

static tg_module *channel_shuffle(int64_t groups)
{
    tg_module *m = NULL;
    OK(tg_nn_channel_shuffle_new(&m, groups));
    return m;
}

/* groups 2, 3, 1 and 4 on inputs of 4, 3, 4 and 5 dims; a dynamic batch. */
Test(onnx_modules, channel_shuffle_matches_onnxruntime)
{
    need_onnx();
    const struct {
        const char *name;
        int64_t groups;
        int nd;
        int64_t shape[5];
    } c[] = {
        {"shuffle_g2_4d", 2, 4, {2, 6, 3, 3}},
        {"shuffle_g3_3d", 3, 3, {2, 6, 5}},
        {"shuffle_g1", 1, 4, {1, 4, 2, 3}},
        {"shuffle_g4_5d", 4, 5, {2, 8, 2, 3, 2}},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        tg_module *m = channel_shuffle(c[i].groups);
        tg_tensor *x = urand(10 + i, c[i].nd, c[i].shape, -2, 2);
        char attrs[160];
        snprintf(attrs, sizeof attrs,
                 "\"ops\": [\"Reshape\", \"Transpose\", \"Reshape\"], \"attributes\": "
                 "{\"Transpose\": {\"perm\": [0, 2, 1%s]}}",
                 c[i].nd == 3 ? ", 3" : c[i].nd == 4 ? ", 3, 4" : ", 3, 4, 5");
        case_graph = attrs;
        write_case(c[i].name, m, x, 0, 0, (const char *const[]){"/split_shape", "/shape", NULL},
                   NULL);
        tg_module_release(m);
        tg_tensor_release(x);
    }
    tg_module *m = channel_shuffle(3);
    tg_tensor *x = urand(20, 4, (const int64_t[]){2, 9, 2, 2}, -2, 2);
    tg_tensor *xr = urand(21, 4, (const int64_t[]){5, 9, 2, 2}, -2, 2);
    dynamic_case("shuffle_dynamic", m, x, xr, "batch,9,2,2");
    check_cases();
    tg_module_release(m);
    th_release_all(2, (tg_tensor *[]){x, xr});
}

static tg_module *lrn(int64_t size, double alpha, double beta, double k)
{
    tg_module *m = NULL;
    OK(tg_nn_local_response_norm_new(&m, size, alpha, beta, k));
    return m;
}

/* A large alpha, so that every channel of the window weighs: a window one
 * channel off (ONNX LRN's own for an even size) fails. */
Test(onnx_modules, local_response_norm_matches_onnxruntime)
{
    need_onnx();
    const char *lrn4 = "\"ops\": [\"LRN\"]";
    const char *lrn_r = "\"ops\": [\"Reshape\", \"LRN\", \"Reshape\"]";
    const char *pooled = "\"ops\": [\"Mul\", \"Reshape\", \"AveragePool\", \"Reshape\", "
                         "\"Mul\", \"Add\", \"Pow\", \"Div\"]";
    const struct {
        const char *name;
        int64_t size;
        double alpha, beta, k;
        int nd;
        int64_t shape[5];
        const char *graph;
    } c[] = {
        {"lrn3_4d", 3, 0.9, 0.75, 1, 4, {2, 7, 3, 4}, lrn4},
        {"lrn5_3d", 5, 2.0, 0.6, 2, 3, {3, 8, 5}, lrn_r},
        {"lrn1_5d", 1, 1.5, 0.5, 1, 5, {2, 3, 2, 3, 2}, lrn_r},
        {"lrn2_4d", 2, 0.9, 0.75, 1, 4, {2, 6, 3, 3}, pooled},
        {"lrn4_3d", 4, 1.7, 1.2, 0.5, 3, {2, 9, 4}, pooled},
        {"lrn6_5d", 6, 1.0, 0.75, 1, 5, {1, 7, 2, 2, 3}, pooled},
        /* windows longer than the channels: cut to 2 C - 1 */
        {"lrn11_c3", 11, 3.0, 0.75, 1, 4, {2, 3, 2, 2}, lrn4},
        {"lrn10_c3", 10, 3.0, 0.75, 1, 3, {2, 3, 5}, pooled},
        {"lrn_default", 5, 1e-4, 0.75, 1, 4, {2, 6, 3, 3}, lrn4},
        /* the largest sizes: ONNX Runtime fails to allocate an LRN of 2^31 - 1 */
        {"lrn_huge_odd", 2147483647, 1e9, 0.75, 1, 4, {2, 3, 2, 2}, lrn4},
        {"lrn_huge_even", 2147483646, 1e9, 0.75, 1, 3, {2, 3, 4}, pooled},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        tg_module *m = lrn(c[i].size, c[i].alpha, c[i].beta, c[i].k);
        tg_tensor *x = urand(30 + i, c[i].nd, c[i].shape, -3, 3);
        case_graph = c[i].graph;
        write_case(c[i].name, m, x, RTOL, ATOL, NULL, NULL);
        tg_module_release(m);
        tg_tensor_release(x);
    }
    /* the LRN's size and alpha: cut to 5 = 2 C - 1, alpha 3 * 5 / 11 */
    tg_module *m = lrn(11, 3.0, 0.75, 1);
    tg_tensor *x = urand(40, 4, (const int64_t[]){2, 3, 2, 2}, -3, 3);
    case_graph = "\"ops\": [\"LRN\"], \"attributes\": {\"LRN\": {\"size\": 5, "
                 "\"beta\": 0.75, \"bias\": 1.0}}";
    write_case("lrn11_attrs", m, x, RTOL, ATOL, no_inits, NULL);
    tg_module_release(m);
    /* dynamic batch: both forms */
    tg_module *odd = lrn(3, 1.0, 0.75, 1), *even = lrn(4, 1.0, 0.75, 1);
    tg_tensor *x3 = urand(41, 3, (const int64_t[]){2, 5, 4}, -3, 3);
    tg_tensor *xr = urand(42, 3, (const int64_t[]){4, 5, 4}, -3, 3);
    dynamic_case("lrn_dynamic_odd", odd, x3, xr, "batch,5,4");
    dynamic_case("lrn_dynamic_even", even, x3, xr, "batch,5,4");
    check_cases();
    tg_module_release(odd);
    tg_module_release(even);
    th_release_all(3, (tg_tensor *[]){x, x3, xr});
}

/* AlphaDropout and FeatureAlphaDropout in training mode between Linears:
 * the export runs them in eval (no node) and gives them back their
 * training flag. */
Test(onnx_modules, alpha_dropouts_are_the_identity)
{
    need_onnx();
    tg_rng rng;
    tg_rng_init(&rng, 50);
    tg_module *seq = NULL, *l1 = NULL, *l2 = NULL, *ad = NULL, *fd = NULL;
    OK(tg_nn_sequential_new(&seq));
    OK(tg_nn_linear_new(&l1, 6, 8, true, &rng));
    OK(tg_nn_alpha_dropout_new(&ad, 0.5, 1));
    OK(tg_nn_linear_new(&l2, 8, 4, true, &rng));
    OK(tg_nn_feature_alpha_dropout_new(&fd, 0.3, 2));
    append(seq, l1);
    append(seq, ad);
    append(seq, l2);
    append(seq, fd);
    tg_module_train(seq, true);
    tg_tensor *x = urand(51, 2, (const int64_t[]){3, 6}, -1, 1);
    tg_module_train(seq, false);
    tg_tensor *y = forward(seq, x);
    tg_module_train(seq, true);
    char path[256];
    OK(tg_onnx_export(seq, x, th_tmp_path(path, sizeof path, "alpha_dropout.onnx"), NULL));
    cr_assert(tg_module_is_training(ad) && tg_module_is_training(fd),
              "the export did not restore the dropouts' training flags");
    case_graph = "\"ops\": [\"Gemm\", \"Gemm\"]";
    write_expected("alpha_dropout", x, y, RTOL, ATOL, (const char *const[]){"0.weight", "0.bias",
                                                                            "2.weight", "2.bias",
                                                                            NULL});
    /* alone: the identity model */
    tg_module *solo = NULL;
    OK(tg_nn_feature_alpha_dropout_new(&solo, 0.5, 3));
    tg_tensor *x4 = urand(52, 4, (const int64_t[]){2, 3, 2, 2}, -1, 1);
    case_graph = "\"ops\": [\"Identity\"]";
    write_case("feature_alpha_dropout_alone", solo, x4, 0, 0, no_inits, NULL);
    check_cases();
    tg_module_release(seq);
    tg_module_release(solo);
    th_release_all(3, (tg_tensor *[]){x, y, x4});
}

static tg_module *bilinear(int64_t in1, int64_t in2, int64_t out, bool bias, uint64_t seed)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *m = NULL;
    OK(tg_nn_bilinear_new(&m, in1, in2, out, bias, &rng));
    return m;
}

/* (N, in1) and (N, in2), with and without bias; (N, L, in) pairs;
 * unbatched vectors; a dynamic batch. */
Test(onnx_modules, bilinear_matches_onnxruntime)
{
    need_onnx();
    tg_module *b = bilinear(5, 4, 3, true, 60), *nb = bilinear(3, 6, 2, false, 61);
    tg_tensor *x1 = urand(62, 2, (const int64_t[]){4, 5}, -2, 2);
    tg_tensor *x2 = urand(63, 2, (const int64_t[]){4, 4}, -2, 2);
    case_graph = "\"ops\": [\"Einsum\", \"Add\"], \"attributes\": {\"Einsum\": "
                 "{\"equation\": \"...i,oij,...j->...o\"}}";
    write_case_n("bilinear", b, 2, (tg_tensor *[]){x1, x2}, X12, RTOL, ATOL,
                 (const char *const[]){"weight", "bias", NULL}, NULL);
    tg_tensor *y1 = urand(64, 3, (const int64_t[]){2, 5, 3}, -2, 2);
    tg_tensor *y2 = urand(65, 3, (const int64_t[]){2, 5, 6}, -2, 2);
    case_graph = "\"ops\": [\"Einsum\"]";
    write_case_n("bilinear_nobias_3d", nb, 2, (tg_tensor *[]){y1, y2}, NULL, RTOL, ATOL,
                 (const char *const[]){"weight", NULL}, NULL);
    tg_tensor *v1 = urand(66, 1, (const int64_t[]){5}, -2, 2);
    tg_tensor *v2 = urand(67, 1, (const int64_t[]){4}, -2, 2);
    write_case_n("bilinear_unbatched", b, 2, (tg_tensor *[]){v1, v2}, X12, RTOL, ATOL, NULL,
                 NULL);
    tg_tensor *r1 = urand(68, 2, (const int64_t[]){7, 5}, -2, 2);
    tg_tensor *r2 = urand(69, 2, (const int64_t[]){7, 4}, -2, 2);
    dynamic_case2("bilinear_dynamic", b, (tg_tensor *[]){x1, x2}, (tg_tensor *[]){r1, r2},
                   "batch,3");
    check_cases();
    tg_module_release(b);
    tg_module_release(nb);
    th_release_all(8, (tg_tensor *[]){x1, x2, y1, y2, v1, v2, r1, r2});
}

static tg_module *cosine(int dim, double eps)
{
    tg_module *m = NULL;
    OK(tg_nn_cosine_similarity_new(&m, dim, eps));
    return m;
}

/* A (3, 4) input whose row 1 is zeros and row 2 small (norm 0.02). */
static tg_tensor *with_small_rows(void)
{
    const float v[12] = {1, -2, 0.5f, 3, 0, 0, 0, 0, 0.01f, -0.01f, 0.01f, 0.01f};
    tg_tensor *t = NULL;
    OK(tg_tensor_from_data(&t, TG_F32, 2, (const int64_t[]){3, 4}, v));
    return t;
}

/* dim 1 (torch's default), -1 of 3-d inputs, 0; x2 broadcast over the
 * batch and stretched along dim (where it counts in x2's norm); a zero row
 * (0) and an eps that clamps a small norm; a dynamic batch. */
Test(onnx_modules, cosine_similarity_matches_onnxruntime)
{
    need_onnx();
    tg_module *d1 = cosine(1, 1e-8), *dl = cosine(-1, 1e-8), *d0 = cosine(0, 1e-8);
    tg_module *big = cosine(1, 0.1);
    tg_tensor *a = urand(70, 2, (const int64_t[]){4, 6}, -2, 2);
    tg_tensor *b = urand(71, 2, (const int64_t[]){4, 6}, -2, 2);
    case_graph = "\"ops\": [\"Mul\", \"ReduceSum\", \"Max\", \"Sqrt\", \"Div\", \"Mul\", "
                 "\"ReduceSum\", \"Max\", \"Sqrt\", \"Div\", \"Mul\", \"ReduceSum\"]";
    write_case_n("cosine_dim1", d1, 2, (tg_tensor *[]){a, b}, X12, RTOL, ATOL,
                 (const char *const[]){"/axes", "/eps_squared", NULL}, NULL);
    write_case_n("cosine_dim0", d0, 2, (tg_tensor *[]){a, b}, X12, RTOL, ATOL, NULL, NULL);
    tg_tensor *c = urand(72, 3, (const int64_t[]){2, 3, 5}, -2, 2);
    tg_tensor *d = urand(73, 3, (const int64_t[]){2, 3, 5}, -2, 2);
    write_case_n("cosine_3d_last", dl, 2, (tg_tensor *[]){c, d}, X12, RTOL, ATOL, NULL, NULL);
    /* x2 (1, 6) over the batch of x1; x2 (4, 1) stretched along dim 1 */
    tg_tensor *row = urand(74, 2, (const int64_t[]){1, 6}, -2, 2);
    tg_tensor *col = urand(75, 2, (const int64_t[]){4, 1}, 0.5, 2);
    case_graph = "\"ops\": [\"Shape\", \"Expand\", \"Mul\", \"ReduceSum\", \"Max\", \"Sqrt\", "
                 "\"Div\", \"Mul\", \"ReduceSum\", \"Max\", \"Sqrt\", \"Div\", \"Mul\", "
                 "\"ReduceSum\"]";
    write_case_n("cosine_broadcast_row", d1, 2, (tg_tensor *[]){a, row}, X12, RTOL, ATOL, NULL,
                 NULL);
    write_case_n("cosine_stretched", d1, 2, (tg_tensor *[]){a, col}, X12, RTOL, ATOL, NULL,
                 NULL);
    tg_tensor *z = with_small_rows(), *w = urand(76, 2, (const int64_t[]){3, 4}, -2, 2);
    write_case_n("cosine_zero_row", d1, 2, (tg_tensor *[]){z, w}, X12, RTOL, ATOL, NULL, NULL);
    write_case_n("cosine_eps_clamps", big, 2, (tg_tensor *[]){z, w}, X12, RTOL, ATOL, NULL,
                 NULL);
    tg_tensor *r1 = urand(77, 3, (const int64_t[]){5, 3, 5}, -2, 2);
    tg_tensor *r2 = urand(78, 3, (const int64_t[]){5, 3, 5}, -2, 2);
    dynamic_case2("cosine_dynamic", dl, (tg_tensor *[]){c, d}, (tg_tensor *[]){r1, r2},
                   "batch,3");
    check_cases();
    tg_module *ms[4] = {d1, dl, d0, big};
    for (int i = 0; i < 4; i++) tg_module_release(ms[i]);
    th_release_all(10, (tg_tensor *[]){a, b, c, d, row, col, z, w, r1, r2});
}

static tg_module *pairwise(double p, double eps, bool keepdim)
{
    tg_module *m = NULL;
    OK(tg_nn_pairwise_distance_new(&m, p, eps, keepdim));
    return m;
}

/* Every kind of p (2, 1, inf, -inf, 0, 3, 0.5, -1), with keepdim, a large
 * eps, x2 broadcast over the batch, 3-d inputs and a dynamic batch. */
Test(onnx_modules, pairwise_distance_matches_onnxruntime)
{
    need_onnx();
    tg_tensor *a = urand(80, 2, (const int64_t[]){4, 6}, -2, 2);
    tg_tensor *b = urand(81, 2, (const int64_t[]){4, 6}, -2, 2);
    /* b with a's values in row 0, columns 0..2: zero differences for p 0
     * with eps 0 */
    tg_tensor *e = urand(81, 2, (const int64_t[]){4, 6}, -2, 2);
    for (int64_t j = 0; j < 3; j++) OK(tg_tensor_set_flat(e, j, th_at(a, j)));
    const struct {
        const char *name;
        double p, eps;
        bool keepdim;
        const char *graph;
    } c[] = {
        {"pdist_p2", 2, 1e-6, false, "\"ops\": [\"Sub\", \"Add\", \"ReduceL2\"]"},
        {"pdist_p2_keepdim", 2, 1e-6, true, "\"attributes\": {\"ReduceL2\": {\"keepdims\": 1}}"},
        {"pdist_p1", 1, 1e-6, false, "\"ops\": [\"Sub\", \"Add\", \"ReduceL1\"]"},
        {"pdist_inf", INFINITY, 1e-6, false,
         "\"ops\": [\"Sub\", \"Add\", \"Abs\", \"ReduceMax\"]"},
        {"pdist_minus_inf", -INFINITY, 1e-6, true,
         "\"ops\": [\"Sub\", \"Add\", \"Abs\", \"ReduceMin\"]"},
        {"pdist_p0", 0, 0, false,
         "\"ops\": [\"Sub\", \"Add\", \"Equal\", \"Not\", \"Cast\", \"ReduceSum\"]"},
        {"pdist_p3", 3, 1e-6, false,
         "\"ops\": [\"Sub\", \"Add\", \"Abs\", \"Pow\", \"ReduceSum\", \"Pow\"]"},
        {"pdist_p_half", 0.5, 1e-6, true, NULL},
        {"pdist_p_minus1", -1, 1e-6, false, NULL},
        {"pdist_big_eps", 2, 0.25, false, NULL},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        tg_module *m = pairwise(c[i].p, c[i].eps, c[i].keepdim);
        case_graph = c[i].graph;
        write_case_n(c[i].name, m, 2, (tg_tensor *[]){a, c[i].p == 0 ? e : b}, X12, RTOL, ATOL,
                     NULL, NULL);
        tg_module_release(m);
    }
    tg_module *m = pairwise(2, 1e-6, false), *m3 = pairwise(3, 1e-6, true);
    tg_tensor *row = urand(82, 1, (const int64_t[]){6}, -2, 2);
    write_case_n("pdist_broadcast", m3, 2, (tg_tensor *[]){a, row}, X12, RTOL, ATOL, NULL, NULL);
    tg_tensor *c3 = urand(83, 3, (const int64_t[]){2, 3, 5}, -2, 2);
    tg_tensor *d3 = urand(84, 3, (const int64_t[]){2, 3, 5}, -2, 2);
    write_case_n("pdist_3d", m, 2, (tg_tensor *[]){c3, d3}, X12, RTOL, ATOL, NULL, NULL);
    tg_tensor *r1 = urand(85, 2, (const int64_t[]){9, 6}, -2, 2);
    tg_tensor *r2 = urand(86, 2, (const int64_t[]){9, 6}, -2, 2);
    dynamic_case2("pdist_dynamic", m3, (tg_tensor *[]){a, b}, (tg_tensor *[]){r1, r2},
                   "batch,1");
    check_cases();
    tg_module_release(m);
    tg_module_release(m3);
    th_release_all(8, (tg_tensor *[]){a, b, e, row, c3, d3, r1, r2});
}

/* The modules of two inputs take exactly (x1, x2), f32, at the top of the
 * export; below a Sequential they are refused with their path; a module
 * of one input given two names the ones that take several; a loss module
 * has no export. */
Test(onnx_modules, refusals_name_the_module_and_write_nothing)
{
    need_onnx();
    tg_module *b = bilinear(5, 4, 3, true, 90), *cs = cosine(1, 1e-8);
    tg_module *pd = pairwise(2, 1e-6, false);
    tg_tensor *x1 = urand(91, 2, (const int64_t[]){4, 5}, -2, 2);
    tg_tensor *x2 = urand(92, 2, (const int64_t[]){4, 4}, -2, 2);
    refused_export_n(b, 1, (tg_tensor *[]){x1}, NULL, TG_EINVAL,
              "module '<top>' (Bilinear) takes the graph inputs (x1, x2), not 1");
    refused_export_n(cs, 3, (tg_tensor *[]){x1, x1, x1}, NULL, TG_EINVAL,
              "module '<top>' (CosineSimilarity) takes the graph inputs (x1, x2), not 3");
    tg_tensor *idx = NULL;
    OK(tg_tensor_zeros(&idx, TG_I64, 2, (const int64_t[]){4, 5}));
    refused_export_n(pd, 2, (tg_tensor *[]){x1, idx}, NULL, TG_EDTYPE,
              "module '<top>' (PairwiseDistance): graph input 1 (x2) has dtype i64; it must be "
              "f32");
    /* inside a Sequential: one input there */
    tg_module *seq = NULL;
    OK(tg_nn_sequential_new(&seq));
    append(seq, tg_module_retain(pd));
    refused_export_n(seq, 1, (tg_tensor *[]){x1}, NULL, TG_EINVAL,
              "module '0' (PairwiseDistance) takes the graph inputs (x1, x2), not 1");
    tg_rng rng;
    tg_rng_init(&rng, 93);
    tg_module *lin = NULL, *loss = NULL;
    OK(tg_nn_linear_new(&lin, 5, 3, true, &rng));
    refused_export_n(lin, 2, (tg_tensor *[]){x1, x1}, NULL, TG_EINVAL,
              "module '<top>' (Linear) takes one graph input, not 2 (a MultiheadAttention, a "
              "module of the Transformer family, RNN, LSTM, GRU, Bilinear, CosineSimilarity, "
              "PairwiseDistance, MaxUnpoolNd, CrossEntropyLoss, NLLLoss, BCEWithLogitsLoss or "
              "KLDivLoss at the top takes several");
    OK(tg_nn_mse_loss_new(&loss, TG_REDUCTION_MEAN));
    refused_export_n(loss, 2, (tg_tensor *[]){x1, x1}, NULL, TG_EUNSUPPORTED,
              "module '<top>' (MSELoss) is not supported (docs/onnx.md lists the modules that "
              "export)");
    /* an empty LocalResponseNorm input */
    tg_module *l = lrn(3, 1, 0.75, 1);
    tg_tensor *empty = NULL;
    OK(tg_tensor_zeros(&empty, TG_F32, 3, (const int64_t[]){2, 3, 0}));
    refused_export_n(l, 1, (tg_tensor *[]){empty}, NULL, TG_EUNSUPPORTED,
              "module '<top>' (LocalResponseNorm) runs on an empty input");
    tg_module *ms[7] = {b, cs, pd, seq, lin, loss, l};
    for (int i = 0; i < 7; i++) tg_module_release(ms[i]);
    th_release_all(4, (tg_tensor *[]){x1, x2, idx, empty});
}
