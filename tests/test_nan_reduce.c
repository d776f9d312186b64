/* tests/test_nan_reduce.c - nansum, nanmean and count_nonzero against
 * PyTorch (f32, f64 and i32; dims, keepdim, NaNs and a row all NaN),
 * nanmean's derivatives to second order and the refusals.  Goldens:
 * scripts/make_special_goldens.py (tests/golden/special.safetensors). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* nansum, nanmean and count_nonzero over each (dims, keepdim) of the
 * golden's "nan_dims" ("all" is ndims 0, torch's dim=None) on a (3, 4, 5)
 * x with NaNs and a row that is all NaN, f32 and f64: values and gradients
 * within the rounding of the sums (torch sums in the dtype, tapegrad in
 * double rounded once), counts exactly; nanmean's gradient over an
 * all-NaN slice NaN, as torch's. */
Test(nan_reduce, matches_torch)
{
    tg_st_file *f = th_golden_load("special.safetensors");
    char list[128];
    snprintf(list, sizeof list, "%s", tg_st_meta_get(f, "nan_dims"));
    static const char *const nd[2] = {"f64", "f32"};
    int k = 0;
    char *save = NULL;
    for (char *c = strtok_r(list, ";", &save); c; c = strtok_r(NULL, ";", &save), k++) {
        int dims[4], ndims = 0;
        const bool keep = c[strlen(c) - 1] == '1';
        c[strlen(c) - 2] = '\0';
        if (strcmp(c, "all")) ndims = th_dims_of(c, dims);
        for (int d = 0; d < 2; d++) {
            char p[48], what[64];
            snprintf(p, sizeof p, "nanred.%s", nd[d]);
            const tg_tensor *x0 = th_golden_get(f, p, "x");
            const double rtol = d == 0 ? 1e-14 : 1e-5;
            for (int op = 0; op < 2; op++) {
                tg_tensor *x = th_leaf_clone(x0), *y = NULL;
                OK(op ? tg_nanmean_dims(&y, x, ndims, dims, keep)
                      : tg_nansum_dims(&y, x, ndims, dims, keep));
                snprintf(p, sizeof p, "%s%d.%s", op ? "nanmean" : "nansum", k, nd[d]);
                snprintf(what, sizeof what, "%s y", p);
                th_expect_close(what, y, th_golden_get(f, p, "y"), rtol);
                th_backward_with(y, th_golden_get(f, p, "g"));
                const tg_tensor *w = th_golden_get(f, p, "dx"), *gx = tg_tensor_grad(x);
                for (int64_t i = 0; i < tg_tensor_numel(w); i++) {
                    cr_assert(th_close(th_at(gx, i), th_at(w, i), rtol, 0), "%s dx[%lld]: %g, "
                              "torch %g", p, (long long)i, th_at(gx, i), th_at(w, i));
                }
                th_release_all(2, (tg_tensor *[]){x, y});
            }
            if (keep) continue;
            tg_tensor *cnt = NULL;
            OK(tg_count_nonzero(&cnt, (tg_tensor *)x0, ndims, dims));
            snprintf(what, sizeof what, "count_nonzero%d.%s", k, nd[d]);
            char key[48];
            snprintf(key, sizeof key, "count_nonzero%d", k);
            th_expect_same_tensor_bytes(what, cnt, th_golden_get(f, key, nd[d]));
            tg_tensor_release(cnt);
        }
    }
    cr_assert(eq(int, k, 5), "%d (dims, keepdim) cases", k);
    const tg_tensor *xi = th_golden_get(f, "nanred.i32", "x");
    tg_tensor *y = NULL;
    OK(tg_nansum(&y, (tg_tensor *)xi));
    th_expect_same_tensor_bytes("nansum(i32)", y, th_golden_get(f, "nanred.i32", "nansum"));
    tg_tensor_release(y);
    OK(tg_count_nonzero(&y, (tg_tensor *)xi, 2, (int[]){0, 2}));
    th_expect_same_tensor_bytes("count_nonzero(i32)", y,
                                th_golden_get(f, "nanred.i32", "count_nonzero"));
    tg_tensor_release(y);
    y = NULL;
    th_expect_refused(tg_nanmean(&y, (tg_tensor *)xi), TG_EDTYPE, "nanmean: x has dtype i32", y);
    th_expect_refused(tg_nansum(&y, NULL), TG_EINVAL, "nansum: x is NULL", y);
    th_expect_refused(tg_count_nonzero(&y, (tg_tensor *)xi, 1, NULL), TG_EINVAL,
                      "count_nonzero: ndims=1", y);
    th_expect_refused(tg_nansum_dims(&y, (tg_tensor *)xi, 1, (int[]){3}, false), TG_EINVAL, "",
                      y);
    tg_st_free(f);
}

static int nanmean_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    return tg_nanmean_dims(out, in[0], 1, (int[]){1}, false);
}

/* nanmean's gradient to second order in f64 (over dim 1 of a (3, 4)). */
Test(nan_reduce, nanmean_gradcheck_and_gradgradcheck)
{
    uint64_t s = 101;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, -2, 2);
    OK(tg_tensor_set_requires_grad(x, true));
    th_expect_gradchecks(nanmean_fn, NULL, 1, &x, "nanmean");
    tg_tensor_release(x);
}
