/* tests/test_unique_nan.c - tg_unique of inputs that hold NaNs against
 * PyTorch 1.13's CPU unique: the values in torch's order (its hash set's,
 * then std::sort's, which a NaN leaves partly unsorted), bit for bit, and
 * the inverse and counts that go with them (a NaN's inverse and count 0).
 * Goldens: scripts/make_unique_nan_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* Whether the values of t (1-d) are not ascending with the NaNs last: the
 * orders that only torch's hash set and std::sort explain. */
static bool out_of_order(const tg_tensor *t)
{
    bool nan_seen = false;
    for (int64_t i = 0; i < tg_tensor_numel(t); i++) {
        const double v = th_at(t, i);
        if (isnan(v)) nan_seen = true;
        else if (nan_seen || (i > 0 && v < th_at(t, i - 1))) return true;
    }
    return false;
}

Test(unique_nan, values_inverse_and_counts_match_torch)
{
    tg_st_file *f = th_golden_load("unique_nan.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int unordered = 0;
    for (int i = 0; i < n; i++) {
        char c[16], what[64];
        snprintf(c, sizeof c, "case%d", i);
        snprintf(what, sizeof what, "%s (%s)", c, th_golden_meta(f, c, "dtype"));
        tg_tensor *x = (tg_tensor *)th_golden_get(f, c, "x"), *v = NULL, *inv = NULL, *cnt = NULL;
        OK(tg_unique(&v, &inv, &cnt, x, true));
        th_expect_same_tensor_bytes(what, v, th_golden_get(f, c, "values"));
        th_expect_same_tensor_bytes(what, inv, th_golden_get(f, c, "inverse"));
        th_expect_same_tensor_bytes(what, cnt, th_golden_get(f, c, "counts"));
        unordered += out_of_order(v);
        th_release_all(3, (tg_tensor *[]){v, inv, cnt});
    }
    cr_assert(n >= 58 && unordered > n / 2, "%d cases, %d out of ascending order", n,
              unordered);
    tg_st_free(f);
}

/* Without a NaN the values ascend, as before (the model is not needed). */
Test(unique_nan, no_nan_gives_ascending_values)
{
    const double d[7] = {3, -0.0, 2, 3, 0.0, -1, 2};
    tg_tensor *x = th_tensor_from(TG_F64, 1, (int64_t[]){7}, d), *v = NULL, *cnt = NULL;
    OK(tg_unique(&v, NULL, &cnt, x, true));
    const double want[4] = {-1, -0.0, 2, 3};
    const int64_t wc[4] = {1, 2, 2, 2};
    cr_assert(eq(i64, tg_tensor_numel(v), 4));
    for (int64_t i = 0; i < 4; i++) {
        cr_assert(eq(dbl, th_at(v, i), want[i]));
        cr_assert(eq(i64, (int64_t)th_at(cnt, i), wc[i]));
    }
    cr_assert(signbit(th_at(v, 1)) != 0, "the first zero's bits (-0.0)");
    th_release_all(3, (tg_tensor *[]){x, v, cnt});
}
