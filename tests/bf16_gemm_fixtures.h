/* tests/bf16_gemm_fixtures.h - choosing the bf16 kernel under test, shared
 * by the bf16 GEMM and fused attention tests. */
#ifndef TAPEGRAD_TESTS_BF16_GEMM_FIXTURES_H
#define TAPEGRAD_TESTS_BF16_GEMM_FIXTURES_H

#include <stdbool.h>

#include "tapegrad/precision.h"

/* Runs the test on kernel k, or skips it with the reason. */
void use_kernel(tg_bf16_kernel k);
/* Runs the rest on kernel k and returns true, or logs why k is not run
 * (the CPU lacks its instructions) and returns false: for a test that
 * goes on with the next kernel. */
bool use_kernel_if_there(tg_bf16_kernel k);
/* Runs the amx kernel on emulated tiles from here on (tg__amx_set_emulated;
 * the test turns it off), or skips the test where the CPU lacks the
 * AVX-512 BF16 packers the kernel needs even then. */
void emulate_amx(void);

#endif
