/* tests/test_grid_sample_kernels.c - grid_sample's 2-D f32 bilinear and
 * nearest kernels (src/ops/grid_sample_2d.h): the vector kernels give the
 * portable kernel's bits under every TG_MAX_ISA bound (set here through
 * tg__isa_set_bound), forward and both gradients, with blocks of points cut
 * short by the end of a sample; and the backward of a batch of one, whose
 * d input is split over the channels among the threads, gives the same bits
 * at 1 and 2 threads; and they agree with the general f64 kernels.  The
 * values themselves are checked against PyTorch's in test_grid_sample.c. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static int saved_bound;
static void setup(void) { saved_bound = tg__isa_set_bound(-1); }
static void teardown(void) { tg__isa_set_bound(saved_bound); }
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

/* grads_of f32 inputs drawn from seed 7: x (N, C, 9, 13), grid
 * (N, Ho, Wo, 2) reaching past the input. */
static void run(tg_tensor *r[3], int64_t N, int64_t C, int64_t Ho, int64_t Wo, int mode,
                int pad, bool align)
{
    uint64_t s = 7;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 4, (int64_t[]){N, C, 9, 13}, -1, 1);
    tg_tensor *g = th_rand_tensor(&s, TG_F32, 4, (int64_t[]){N, Ho, Wo, 2}, -1.3, 1.3);
    tg_tensor *gy = th_rand_tensor(&s, TG_F32, 4, (int64_t[]){N, C, Ho, Wo}, -1, 1);
    grads_of(r, x, g, gy, mode, pad, align);
    th_release_all(3, (tg_tensor *[]){x, g, gy});
}

Test(grid_sample_kernels, vector_kernels_give_the_portable_bits)
{
    static const char *const what[3] = {"output", "d input", "d grid"};
    for (int mode = 0; mode < 2; mode++)
        for (int pad = 0; pad < 3; pad++)
            for (int align = 0; align < 2; align++) {
                tg_tensor *want[3], *got[3];
                tg__isa_set_bound(TG__ISA_PORTABLE);
                run(want, 2, 5, 7, 11, mode, pad, align);   /* blocks of 64 and 13 points */
                for (int level = TG__ISA_AVX2; level <= TG__ISA_AVX512; level++) {
                    tg__isa_set_bound(level);
                    run(got, 2, 5, 7, 11, mode, pad, align);
                    for (int k = 0; k < 3; k++) {
                        char msg[96];
                        snprintf(msg, sizeof msg, "%s, mode %d, padding %d, align %d, isa %d",
                                 what[k], mode, pad, align, level);
                        th_expect_same_tensor_bytes(msg, got[k], want[k]);
                    }
                    th_release_all(3, got);
                }
                th_release_all(3, want);
            }
}

Test(grid_sample_kernels, batch_of_one_backward_same_bits_at_one_and_two_threads)
{
    const int threads = tg_get_num_threads();
    const int64_t patience = tg__pool_set_patience(-1);
    for (int mode = 0; mode < 2; mode++)
        for (int pad = 0; pad < 3; pad++) {
            tg_tensor *r[2][3];
            for (int t = 0; t < 2; t++) {
                OK(tg_set_num_threads(t + 1));
                run(r[t], 1, 5, 70, 80, mode, pad, false);   /* enough to split */
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
    for (int mode = 0; mode < 2; mode++)
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
