/* Tests of tg_gradcheck's fast mode (torch's fast_mode: v^T J u against
 * its finite difference, input by input): it passes and fails as slow mode
 * does, scales atol as torch does, and names the input and element that
 * fail. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "gradcheck_fixtures.h"
#include "tapegrad/tapegrad.h"

Test(gradcheck_fast, fast_mode_passes_and_fails_likewise)
{
    tg_tensor *x = make(TG_F64, 2, S23, 1, "x", true), *w = make(TG_F64, 2, S23, 2, "w", true);
    tg_tensor *b = make(TG_F64, 2, S34, 3, "b", true);
    tg_tensor *xw[2] = {x, w}, *xb[2] = {x, b};
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    o.fast_mode = true;
    o.seed = 7;
    OK(tg_gradcheck(f_tanh_mul, NULL, 2, xw, &o));
    OK(tg_gradcheck(f_matmul, NULL, 2, xb, &o));
    cr_assert(eq(int, tg_gradcheck(f_badmul, NULL, 2, xw, &o), TG_EGRADCHECK));
    cr_assert(strstr(tg_error_message(), "fast mode") != NULL, "%s", tg_error_message());
    tg_tensor_release(x);
    tg_tensor_release(w);
    tg_tensor_release(b);
}

/* An analytic Jacobian off by delta in every element: slow mode and fast
 * mode with seeds 0..9 must all give `want`. */
static void bias_gives_in_both_modes(double delta, int want)
{
    static const int64_t S45[2] = {4, 5};
    tg_tensor *x = make(TG_F64, 2, S45, 11, "x", true);
    lin_params p = {.a = 0, .k = 0, .delta = delta};
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    cr_assert(eq(int, tg_gradcheck(f_lin, &p, 1, &x, &o), want), "slow: %s", tg_error_message());
    o.fast_mode = true;
    for (o.seed = 0; o.seed < 10; o.seed++)
        cr_assert(eq(int, tg_gradcheck(f_lin, &p, 1, &x, &o), want), "seed %llu: %s",
                  (unsigned long long)o.seed, tg_error_message());
    tg_tensor_release(x);
}

/* Fast mode compares v^T J u, so atol is scaled by sum(u) sum(v), as torch
 * does (_adjusted_atol): an analytic Jacobian off by 0.5 atol in every
 * element passes slow mode, and must pass fast mode too, for any seed.
 * torch.autograd.gradcheck passes both modes on this op. */
Test(gradcheck_fast, fast_mode_allows_what_slow_mode_allows_within_atol)
{
    bias_gives_in_both_modes(0.5e-5, TG_OK);
}

/* ... and off by 2 atol in every element it fails both modes for any seed
 * (torch fails both too): u and v are drawn in [0, 1), so a bias of one sign
 * cannot cancel out in v^T J u. */
Test(gradcheck_fast, fast_mode_catches_a_uniform_bias_beyond_atol)
{
    bias_gives_in_both_modes(2e-5, TG_EGRADCHECK);
}

/* As torch's fast mode, which compares v^T J_i u_i input by input and names
 * input i; the slow check of that input then locates the element. */
Test(gradcheck_fast, fast_mode_failure_names_the_input_and_element)
{
    tg_tensor *x = make(TG_F64, 2, S23, 1, "x", true), *w = make(TG_F64, 2, S23, 2, "w", true);
    tg_tensor *xw[2] = {x, w};
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    o.fast_mode = true;
    cr_assert(eq(int, tg_gradcheck(f_badmul, NULL, 2, xw, &o), TG_EGRADCHECK));
    const char *msg = tg_error_message();
    cr_assert(strstr(msg, "fast mode") != NULL, "%s", msg);
    cr_assert(strstr(msg, "input 1 ('w')") != NULL, "%s", msg);
    cr_assert(strstr(msg, "input 0") == NULL, "%s", msg);
    cr_assert(strstr(msg, "element 0, output element 0") != NULL, "%s", msg);
    tg_tensor_release(x);
    tg_tensor_release(w);
}
