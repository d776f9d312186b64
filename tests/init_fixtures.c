/* tests/init_fixtures.c - the tensors that the refusal tests of
 * test_init.c and test_init_trunc_orthogonal.c hand over (init_fixtures.h). */
#include "init_fixtures.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

void refusal_tensors(tg_tensor **v, tg_tensor **w, tg_tensor **i)
{
    OK(tg_tensor_zeros(v, TG_F32, 1, (int64_t[]){5}));
    OK(tg_tensor_zeros(w, TG_F32, 2, (int64_t[]){3, 4}));
    OK(tg_tensor_zeros(i, TG_I64, 2, (int64_t[]){3, 4}));
}
