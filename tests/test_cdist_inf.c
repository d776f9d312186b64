/* tests/test_cdist_inf.c - tg_cdist with p = inf where differences are NaN
 * or infinite, against PyTorch 1.13's CPU cdist: the distance is the
 * largest |difference| that is not NaN (0 when none is), each tied largest
 * one gets the whole gradient, and a NaN or infinite difference gets NaN,
 * in x1's and x2's gradients (no distance is NaN).  Goldens: scripts/make_cdist_inf_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static int count_nans(const tg_tensor *t)
{
    int n = 0;
    for (int64_t i = 0; i < tg_tensor_numel(t); i++) n += isnan(th_at(t, i)) != 0;
    return n;
}

Test(cdist_inf, nan_and_infinite_differences_match_torch)
{
    tg_st_file *f = th_golden_load("cdist_inf.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int nan_grads = 0, nan_ys = 0;
    for (int i = 0; i < n; i++) {
        char c[16], what[64];
        snprintf(c, sizeof c, "case%d", i);
        const char *dt = th_golden_meta(f, c, "dtype");
        snprintf(what, sizeof what, "%s (%s)", c, dt);
        tg_tensor *in[2] = {th_leaf_clone(th_golden_get(f, c, "x1")),
                            th_leaf_clone(th_golden_get(f, c, "x2"))};
        tg_tensor *y = NULL, *d[2] = {NULL};
        cr_assert(eq(int, tg_cdist(&y, in[0], in[1], INFINITY), TG_OK), "%s: %s", what,
                  tg_error_message());
        th_expect_close(what, y, th_golden_get(f, c, "y"), 0);
        tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g");
        cr_assert(eq(int, tg_grad(d, 1, &y, &g, 2, in, NULL), TG_OK), "%s: %s", what,
                  tg_error_message());
        th_expect_close(what, d[0], th_golden_get(f, c, "d1"), 1e-6);
        th_expect_close(what, d[1], th_golden_get(f, c, "d2"), 1e-6);
        nan_grads += count_nans(d[0]) + count_nans(d[1]);
        nan_ys += count_nans(y);
        th_release_all(2, in);
        th_release_all(2, d);
        tg_tensor_release(y);
    }
    cr_assert(n >= 20 && nan_grads > 40 && nan_ys == 0, "%d cases, %d NaN gradients, %d NaN "
              "distances", n, nan_grads, nan_ys);
    tg_st_free(f);
}

/* Finite inputs keep their gradient (ties the whole of g) to any order:
 * gradcheck and gradgradcheck in f64. */
static int cdist_inf_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    return tg_cdist(out, in[0], in[1], INFINITY);
}

Test(cdist_inf, finite_inputs_pass_gradchecks)
{
    uint64_t s = 21;
    tg_tensor *in[2] = {th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, -1, 1),
                        th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 2, 4}, -1, 1)};
    for (int k = 0; k < 2; k++) OK(tg_tensor_set_requires_grad(in[k], true));
    th_expect_gradchecks(cdist_inf_fn, NULL, 2, in, "cdist p = inf");
    th_release_all(2, in);
}
