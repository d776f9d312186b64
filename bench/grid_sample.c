/* bench/grid_sample: the time of one grid_sample call (align_corners
 * false), forward or forward and backward, for
 * bench/grid_sample.py (which runs the same call in PyTorch and gives the
 * ratio).
 *
 *   grid_sample --shape N,C,H,W,Ho,Wo [--dtype f32|f64] [--threads T] [--repeat R (20)]
 *               [--mode bilinear|nearest|bicubic] [--backward]
 *               [--padding zeros|border|reflection]
 *
 * input (N, C, H, W) of U[-1, 1) values, grid (N, Ho, Wo, 2) of U[-1.1, 1.1);
 * --shape N,C,D,H,W,Do,Ho,Wo: input (N, C, D, H, W), grid (N, Do, Ho, Wo, 3).
 * With --backward input and grid require grad and a pass is the call, the
 * backward of its sum and both gradients released, as PyTorch's
 * x.grad = None.  After three passes of warmup, times R passes and prints
 * one JSON line with the median in ms. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tapegrad/tapegrad.h>

#include "timing.h"

#define CHECK(call) BENCH_CHECK("grid_sample", call)

typedef struct gs_case {
    tg_tensor *x, *grid;
    tg_grid_sample_mode mode;
    tg_grid_sample_padding padding;
    bool backward;
} gs_case;

static void pass(const void *arg)
{
    const gs_case *c = arg;
    tg_tensor *y = NULL, *s = NULL;
    CHECK(tg_grid_sample(&y, c->x, c->grid, c->mode, c->padding, false));
    if (c->backward) {
        CHECK(tg_sum(&s, y));
        CHECK(tg_backward(s, NULL, NULL));
        tg_tensor_zero_grad(c->x);
        tg_tensor_zero_grad(c->grid);
    }
    tg_tensor_release(s);
    tg_tensor_release(y);
}

static int usage(void)
{
    fprintf(stderr, "usage: grid_sample --shape N,C,H,W,Ho,Wo|N,C,D,H,W,Do,Ho,Wo "
                    "[--dtype f32|f64] [--threads T] [--repeat R] "
                    "[--mode bilinear|nearest|bicubic] [--backward] "
                    "[--padding zeros|border|reflection]\n");
    return 2;
}

int main(int argc, char **argv)
{
    long threads = 0, repeat = 20;
    int64_t s[8] = {0};
    int ns = 0;   /* spatial dims: 2 or 3 */
    tg_dtype dt = TG_F32;
    gs_case c = {.mode = TG_GRID_SAMPLE_BILINEAR, .padding = TG_GRID_SAMPLE_ZEROS,
                 .backward = false};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const int common = bench_common_arg(argc, argv, &i, &threads, &repeat, &c.backward, &dt);
        if (common < 0) return usage();
        if (common > 0) {
            continue;
        } else if (!strcmp(a, "--mode") && v) {
            c.mode = !strcmp(v, "nearest") ? TG_GRID_SAMPLE_NEAREST
                     : !strcmp(v, "bicubic") ? TG_GRID_SAMPLE_BICUBIC : TG_GRID_SAMPLE_BILINEAR;
            i++;
        } else if (!strcmp(a, "--padding") && v) {
            c.padding = !strcmp(v, "border")       ? TG_GRID_SAMPLE_BORDER
                        : !strcmp(v, "reflection") ? TG_GRID_SAMPLE_REFLECTION
                                                   : TG_GRID_SAMPLE_ZEROS;
            i++;
        } else if (!strcmp(a, "--shape") && v) {
            const int got = sscanf(v, "%" SCNd64 ",%" SCNd64 ",%" SCNd64 ",%" SCNd64
                                      ",%" SCNd64 ",%" SCNd64 ",%" SCNd64 ",%" SCNd64, &s[0],
                                   &s[1], &s[2], &s[3], &s[4], &s[5], &s[6], &s[7]);
            ns = got == 6 ? 2 : got == 8 ? 3 : 0;
            i++;
        } else {
            return usage();
        }
    }
    if (ns == 0 || repeat < 1) return usage();
    for (int k = 0; k < 2 + 2 * ns; k++)
        if (s[k] < 1) return usage();
    if (threads > 0) CHECK(tg_set_num_threads((int)threads));
    tg_rng rng;
    tg_rng_init(&rng, 1);
    /* x (N, C, in...), grid (N, out..., ns) */
    int64_t xs[5] = {s[0], s[1]}, gs[5] = {s[0]};
    for (int a = 0; a < ns; a++) {
        xs[2 + a] = s[2 + a];
        gs[1 + a] = s[2 + ns + a];
    }
    gs[1 + ns] = ns;
    CHECK(tg_tensor_zeros(&c.x, dt, 2 + ns, xs));
    CHECK(tg_tensor_rand_uniform(c.x, &rng, -1.0, 1.0));
    CHECK(tg_tensor_zeros(&c.grid, dt, 2 + ns, gs));
    CHECK(tg_tensor_rand_uniform(c.grid, &rng, -1.1, 1.1));
    if (c.backward) {
        CHECK(tg_tensor_set_requires_grad(c.x, true));
        CHECK(tg_tensor_set_requires_grad(c.grid, true));
    }
    if (bench_time_calls(pass, &c, repeat)) return 1;
    tg_tensor_release(c.x);
    tg_tensor_release(c.grid);
    return 0;
}
