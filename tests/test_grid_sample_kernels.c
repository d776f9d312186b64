/* tests/test_grid_sample_kernels.c - grid_sample's vectorized f32 kernels
 * (src/ops/grid_sample_2d.h: 2-D bilinear and nearest; grid_sample_cubic.h:
 * bicubic; grid_sample_3d.h: 3-D trilinear and nearest) give the general
 * kernels' bits (grid_sample_tmpl.h, chosen through tg__grid_sample_set_fast)
 * under every TG_MAX_ISA bound (set here through tg__isa_set_bound), forward
 * and both gradients, with blocks of points cut short by the end of a
 * sample, grid points outside the input, on its edges, far out, infinite
 * and NaN, and empty tensors; the backward of a batch of one, whose d input
 * is split over the channels among the threads, gives the same bits at 1
 * and 2 threads, by the vectorized and by the general kernels; and the f32
 * kernels agree with the f64 ones.  The values themselves are checked
 * against PyTorch's in test_grid_sample.c. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "ops/grid_sample_internal.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static int saved_bound;
static void setup(void) { saved_bound = tg__isa_set_bound(-1); }
static void teardown(void)
{
    tg__isa_set_bound(saved_bound);
    tg__grid_sample_set_fast(true);
}
TestSuite(grid_sample_kernels, .init = setup, .fini = teardown);

/* out, d input and d grid of grid_sample(x, grid) with upstream gradient
 * gy (x and grid are left requiring grad). */
static void grads_of(tg_tensor *r[3], tg_tensor *x, tg_tensor *g, tg_tensor *gy, int mode,
                     int pad, bool align)
{
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_tensor_set_requires_grad(g, true));
    OK(tg_grid_sample(&r[0], x, g, mode, pad, align));
    th_backward_with(r[0], gy);
    r[1] = tg_tensor_retain(tg_tensor_grad(x));
    r[2] = tg_tensor_retain(tg_tensor_grad(g));
}

/* The grid's values past random ones: the edges, just inside, far out
 * (reflection's later folds), infinite and NaN. */
static const float specials[] = {-1.0f, 1.0f, 0.99999994f, -1.0000001f, 0.0f, 5.3f, -7.9f,
                                 1e10f, -1e10f, INFINITY, -INFINITY, NAN};
enum { NSPECIAL = sizeof specials / sizeof specials[0] };

/* grads_of f32 inputs drawn from seed 7: x (N, C, 9, 13) with grid
 * (N, Ho, Wo, 2), or with ns 3 x (N, C, 4, 5, 6) with grid (N, Ho, Wo, 3, 3)
 * (Ho Wo 3 points), reaching past the input; with specials, the grid's
 * entries 3 k + 1 are specials[k] (as far as the grid goes). */
static void run_nd(tg_tensor *r[3], int ns, int64_t N, int64_t C, int64_t Ho, int64_t Wo,
                   int mode, int pad, bool align, bool with_specials)
{
    uint64_t s = 7;
    const int64_t xs2[4] = {N, C, 9, 13}, gs2[4] = {N, Ho, Wo, 2}, ys2[4] = {N, C, Ho, Wo};
    const int64_t xs3[5] = {N, C, 4, 5, 6}, gs3[5] = {N, Ho, Wo, 3, 3};
    const int64_t ys3[5] = {N, C, Ho, Wo, 3};
    const int nd = 2 + ns;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, nd, ns == 2 ? xs2 : xs3, -1, 1);
    tg_tensor *g = th_rand_tensor(&s, TG_F32, nd, ns == 2 ? gs2 : gs3, -1.3, 1.3);
    tg_tensor *gy = th_rand_tensor(&s, TG_F32, nd, ns == 2 ? ys2 : ys3, -1, 1);
    float *gd = tg_tensor_data(g);
    for (int64_t k = 0; with_specials && k < NSPECIAL && 3 * k + 1 < tg_tensor_numel(g); k++)
        gd[3 * k + 1] = specials[k];
    grads_of(r, x, g, gy, mode, pad, align);
    th_release_all(3, (tg_tensor *[]){x, g, gy});
}

/* The vectorized kernels at every ISA bound against the general kernels,
 * for ns spatial dims, every mode, padding and align_corners. */
static void against_general(int ns, int64_t N, int64_t C, int64_t Ho, int64_t Wo,
                            bool with_specials)
{
    static const char *const what[3] = {"output", "d input", "d grid"};
    for (int mode = 0; mode < (ns == 2 ? 3 : 2); mode++)
        for (int pad = 0; pad < 3; pad++)
            for (int align = 0; align < 2; align++) {
                tg_tensor *want[3], *got[3];
                tg__grid_sample_set_fast(false);
                run_nd(want, ns, N, C, Ho, Wo, mode, pad, align, with_specials);
                tg__grid_sample_set_fast(true);
                for (int level = TG__ISA_PORTABLE; level <= TG__ISA_AVX512; level++) {
                    tg__isa_set_bound(level);
                    run_nd(got, ns, N, C, Ho, Wo, mode, pad, align, with_specials);
                    for (int k = 0; k < 3; k++) {
                        char msg[128];
                        snprintf(msg, sizeof msg, "%dD %s, mode %d, padding %d, align %d, isa %d",
                                 ns + 2, what[k], mode, pad, align, level);
                        th_expect_same_tensor_bytes(msg, got[k], want[k]);
                    }
                    th_release_all(3, got);
                }
                th_release_all(3, want);
            }
}

Test(grid_sample_kernels, vector_kernels_give_the_general_kernels_bits_2d)
{
    against_general(2, 2, 5, 7, 11, false);   /* blocks of 64 and 13 points */
}

Test(grid_sample_kernels, vector_kernels_give_the_general_kernels_bits_3d)
{
    against_general(3, 2, 3, 5, 7, false);   /* blocks of 64 and 41 points */
}

Test(grid_sample_kernels, edge_inf_and_nan_coordinates_give_the_general_kernels_bits)
{
    against_general(2, 1, 3, 3, 9, true);
    against_general(3, 1, 3, 2, 3, true);
}

Test(grid_sample_kernels, empty_tensors_give_the_general_kernels_bits)
{
    static const int64_t shapes[3][4] = {{0, 3, 4, 5}, {2, 0, 4, 5}, {2, 3, 0, 5}};
    for (int ns = 2; ns <= 3; ns++)
        for (int k = 0; k < 3; k++)
            against_general(ns, shapes[k][0], shapes[k][1], shapes[k][2], shapes[k][3], false);
}

Test(grid_sample_kernels, batch_of_one_backward_same_bits_at_one_and_two_threads)
{
    const int threads = tg_get_num_threads();
    const int64_t patience = tg__pool_set_patience(-1);
    for (int fast = 0; fast < 2; fast++)   /* the general kernels, then the vectorized */
        for (int ns = 2; ns <= 3; ns++)
            for (int mode = 0; mode < (ns == 2 ? 3 : 2); mode++)
                for (int pad = 0; pad < 3; pad++) {
                    tg_tensor *r[2][3];
                    tg__grid_sample_set_fast(fast == 1);
                    for (int t = 0; t < 2; t++) {   /* enough points to split */
                        OK(tg_set_num_threads(t + 1));
                        run_nd(r[t], ns, 1, 5, ns == 2 ? 70 : 30, ns == 2 ? 80 : 40, mode, pad,
                               false, false);
                    }
                    for (int k = 0; k < 3; k++)
                        th_expect_same_tensor_bytes("2 threads against 1", r[1][k], r[0][k]);
                    th_release_all(3, r[0]);
                    th_release_all(3, r[1]);
                }
    OK(tg_set_num_threads(threads));
    tg__pool_set_patience(patience);
}

/* The f32 kernels against the f64 ones (the general kernels of
 * grid_sample_tmpl.h), with coordinates up to 5 (reflection's folds past
 * the first two, which the f32 kernels leave to gs_pad_f32) and NaN. */
Test(grid_sample_kernels, f32_kernels_agree_with_the_f64_ones)
{
    for (int mode = 0; mode < 3; mode++)
        for (int pad = 0; pad < 3; pad++)
            for (int align = 0; align < 2; align++) {
                uint64_t s = 9;
                tg_tensor *in[2][3], *r[2][3];
                in[1][0] = th_rand_tensor(&s, TG_F64, 4, (int64_t[]){2, 3, 9, 13}, -1, 1);
                in[1][1] = th_rand_tensor(&s, TG_F64, 4, (int64_t[]){2, 9, 10, 2}, -5, 5);
                in[1][2] = th_rand_tensor(&s, TG_F64, 4, (int64_t[]){2, 3, 9, 10}, -1, 1);
                ((double *)tg_tensor_data(in[1][1]))[7] = NAN;
                for (int k = 0; k < 3; k++) OK(tg_to_dtype(&in[0][k], in[1][k], TG_F32));
                for (int d = 0; d < 2; d++) grads_of(r[d], in[d][0], in[d][1], in[d][2], mode,
                                                     pad, align);
                for (int k = 0; k < 3; k++) {
                    tg_tensor *want = NULL;
                    OK(tg_to_dtype(&want, r[1][k], TG_F32));
                    th_expect_close_scaled("f32 against f64", r[0][k], want, 2e-5);
                    th_release_all(3, (tg_tensor *[]){want, r[0][k], r[1][k]});
                }
                th_release_all(3, in[0]);
                th_release_all(3, in[1]);
            }
}
