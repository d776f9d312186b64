/* tests/test_shape_errors.c - the shape ops' errors: the status, a message
 * that names the argument and the rule, and nothing changed (out left
 * untouched, no overflow on huge shapes, cat's checks). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"
#include "tapegrad/tensor.h"

/* ---- errors: status, message, nothing changed ------------------------------------ */

Test(shape_errors, errors_leave_out_untouched)
{
    int64_t s[2] = {2, 3};
    tg_tensor *a = th_arange(TG_F32, 2, s), *out = NULL;
    uint64_t v0 = tg_tensor_version(a);
    cr_assert(eq(int, tg_permute(&out, a, (int[]){0, 0}), TG_EINVAL));
    cr_assert(eq(int, tg_permute(&out, a, (int[]){0, 2}), TG_EINVAL));
    cr_assert(eq(int, tg_transpose(&out, a, 0, 2), TG_EINVAL));
    cr_assert(eq(int, tg_reshape(&out, a, 2, (int64_t[]){4, 2}), TG_ESHAPE));
    cr_assert(eq(int, tg_reshape(&out, a, 2, (int64_t[]){-1, -1}), TG_EINVAL));
    cr_assert(eq(int, tg_reshape(&out, a, 1, (int64_t[]){-5}), TG_EINVAL));
    cr_assert(eq(int, tg_expand(&out, a, 2, (int64_t[]){2, 4}), TG_ESHAPE));
    cr_assert(eq(int, tg_expand(&out, a, 1, (int64_t[]){3}), TG_ESHAPE));
    cr_assert(eq(int, tg_slice(&out, a, 1, 0, 2, 0), TG_EINVAL));
    cr_assert(eq(int, tg_slice(&out, a, 2, 0, 2, 1), TG_EINVAL));
    cr_assert(eq(int, tg_unsqueeze(&out, a, 3), TG_EINVAL));
    cr_assert(eq(int, tg_squeeze(&out, a, -3), TG_EINVAL));
    cr_assert(eq(int, tg_reshape(&out, NULL, 1, (int64_t[]){6}), TG_EINVAL));
    cr_assert(eq(int, tg_sum_dims(&out, a, 2, (int[]){1, -1}, false), TG_EINVAL));
    cr_assert(eq(int, tg_sum_dims(&out, a, 1, (int[]){2}, false), TG_EINVAL));
    cr_assert(eq(int, tg_sum_to_shape(&out, a, 1, (int64_t[]){2}), TG_ESHAPE));
    cr_assert(eq(int, tg_sum_to_shape(&out, a, 3, (int64_t[]){1, 2, 3}), TG_ESHAPE));
    cr_assert(eq(ptr, out, NULL));
    cr_assert(eq(u64, tg_tensor_version(a), v0));
    cr_assert(eq(int, tg_tensor_ndim(a), 2));
    for (int64_t k = 0; k < 6; k++) cr_assert(eq(dbl, th_at(a, k), (double)k));
    tg_tensor_release(a);
}

/* Views hold no memory, so expand could name more elements than an int64
 * counts; it refuses.  A broadcast whose result would not fit is refused when
 * its output is allocated, with the shape in the message. */
Test(shape_errors, huge_shapes_are_errors_not_overflows)
{
    tg_tensor *a = th_arange(TG_F32, 2, (int64_t[]){1, 1}), *out = NULL, *u = NULL, *v = NULL;
    const int64_t big = (int64_t)1 << 40;
    cr_assert(eq(int, tg_expand(&out, a, 3, (int64_t[]){big, big, 1}), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "expand: shape (1099511627776, 1099511627776, 1) is "
                                         "too large") != NULL, "%s", tg_error_message());
    cr_assert(eq(ptr, out, NULL));
    /* No element, but the first stride would be 2^80: refused as well
     * (found by tests/fuzz: an IDX header with such extents). */
    cr_assert(eq(int, tg_tensor_zeros(&out, TG_U8, 3, (int64_t[]){big, 0, big}), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "(1099511627776, 0, 1099511627776) is too large") != NULL,
              "%s", tg_error_message());
    cr_assert(eq(ptr, out, NULL));
    cr_assert(eq(int, tg_tensor_zeros(&out, TG_U8, 3, (int64_t[]){big, 0, 1 << 10}), TG_OK));
    cr_assert(eq(i64, tg_tensor_numel(out), 0));
    cr_assert(eq(i64, tg_tensor_strides(out)[0], (int64_t)1 << 10));
    tg_tensor_release(out);
    out = NULL;
    /* each operand is 2^31 elements (a view of one), their sum 2^62 */
    const int64_t half = (int64_t)1 << 31;
    cr_assert(eq(int, tg_expand(&u, a, 2, (int64_t[]){half, 1}), TG_OK));
    cr_assert(eq(int, tg_expand(&v, a, 2, (int64_t[]){1, half}), TG_OK));
    cr_assert(eq(int, tg_add(&out, u, v), TG_ENOMEM));
    cr_assert(strstr(tg_error_message(), "shape (2147483648, 2147483648) is too large") != NULL,
              "%s", tg_error_message());
    cr_assert(eq(ptr, out, NULL));
    tg_tensor_release(u);
    tg_tensor_release(v);
    tg_tensor_release(a);
}

Test(shape_errors, cat_errors)
{
    tg_tensor *a = th_arange(TG_F32, 2, (int64_t[]){2, 3}),
              *b = th_arange(TG_F32, 2, (int64_t[]){3, 3});
    tg_tensor *c = th_arange(TG_F64, 2, (int64_t[]){2, 4}),
              *d = th_arange(TG_F32, 1, (int64_t[]){3});
    tg_tensor *out = NULL;
    cr_assert(eq(int, tg_cat(&out, 2, (tg_tensor *[]){a, b}, 1), TG_ESHAPE));
    cr_assert(strstr(tg_error_message(), "cat:") != NULL);
    cr_assert(eq(int, tg_cat(&out, 2, (tg_tensor *[]){a, c}, 0), TG_ESHAPE));   /* dtypes promote */
    cr_assert(eq(int, tg_cat(&out, 2, (tg_tensor *[]){a, d}, 0), TG_ESHAPE));
    cr_assert(eq(int, tg_cat(&out, 0, (tg_tensor *[]){a}, 0), TG_EINVAL));
    cr_assert(eq(int, tg_cat(&out, 2, (tg_tensor *[]){a, NULL}, 0), TG_EINVAL));
    cr_assert(eq(int, tg_cat(&out, 2, (tg_tensor *[]){a, a}, 2), TG_EINVAL));
    cr_assert(eq(ptr, out, NULL));
    tg_tensor_release(a);
    tg_tensor_release(b);
    tg_tensor_release(c);
    tg_tensor_release(d);
}

/* ---- error messages name the argument and the rule ------------------------------- */

/* unsqueeze takes dim in [-ndim-1, ndim] of a (torch's [-3, 2] for a 2-d a):
 * the message states that range and a's own ndim, not ndim + 1. */
Test(shape_errors, unsqueeze_out_of_range_names_a_and_its_range)
{
    tg_tensor *a = th_arange(TG_F32, 2, (int64_t[]){2, 3}), *s = NULL, *out = NULL;
    cr_assert(eq(int, tg_unsqueeze(&out, a, 3), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "unsqueeze: dim=3 must be in [-3, 2] for a 2-d tensor")
              != NULL, "%s", tg_error_message());
    cr_assert(eq(int, tg_unsqueeze(&out, a, -4), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "dim=-4 must be in [-3, 2] for a 2-d tensor") != NULL,
              "%s", tg_error_message());
    tg_tensor_scalar(&s, TG_F32, 1.0);
    cr_assert(eq(int, tg_unsqueeze(&out, s, 1), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "dim=1 must be in [-1, 0] for a 0-d tensor") != NULL,
              "%s", tg_error_message());
    cr_assert(eq(ptr, out, NULL));
    tg_tensor_release(s);
    tg_tensor_release(a);
}

Test(shape_errors, permute_error_names_the_entry_of_perm)
{
    tg_tensor *a = th_arange(TG_F32, 2, (int64_t[]){2, 3}), *out = NULL;
    cr_assert(eq(int, tg_permute(&out, a, (int[]){0, 5}), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "permute: perm[1]=5 must be in [-2, 2)") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(ptr, out, NULL));
    tg_tensor_release(a);
}

/* torch refuses expand(3, -2) of a (3, 1) tensor; the message says why. */
Test(shape_errors, expand_negative_extent_names_the_rule)
{
    tg_tensor *a = th_arange(TG_F32, 2, (int64_t[]){3, 1}), *out = NULL;
    cr_assert(eq(int, tg_expand(&out, a, 2, (int64_t[]){3, -2}), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "expand: shape[1]=-2 must be >= 0 or -1") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(ptr, out, NULL));
    tg_tensor_release(a);
}
