/* tests/first_kernels.h - the first-position kernels of src/ops/sort_first.c
 * one at a time, for the tests of the one-pass kernels (test_sort.c,
 * test_stats.c, test_topk_kernels.c).  Include after Criterion's headers. */
#ifndef TG_TESTS_FIRST_KERNELS_H
#define TG_TESTS_FIRST_KERNELS_H

#include <stdbool.h>
#include <stdlib.h>

#include "helpers.h"
#include "ops/sort_internal.h"

/* Forces kernel k (TG__FIRST_KERNEL_PORTABLE .. TG__FIRST_KERNEL_AVX512)
 * with TG_FIRST_KERNEL and returns true when this CPU runs it; else reports
 * it as not run and returns false.  unsetenv("TG_FIRST_KERNEL") after the
 * loop restores the choice. */
static inline bool th_force_first_kernel(int k)
{
    const char *name = tg__first_kernel_name((tg__first_kernel_id)k);
    if (!tg__first_kernel_available((tg__first_kernel_id)k)) {
        th_not_run("the %s first-position kernel is not run: this CPU lacks it", name);
        return false;
    }
    cr_assert(eq(int, setenv("TG_FIRST_KERNEL", name, 1), 0));
    cr_assert(eq(int, tg__first_kernel_get(), k), "TG_FIRST_KERNEL=%s", name);
    return true;
}

#endif
