/* tests/fuzz/fuzz_main.c - libFuzzer's entry point for the target named by
 * TG_FUZZ_TARGET (tests/meson.build builds one program per target with
 * -Dfuzz=true; docs/fuzzing.md shows how to run them).  A broken property
 * aborts, which libFuzzer reports like a crash and saves the input. */
#include <stdlib.h>

#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (TG_FUZZ_TARGET(data, size) < 0)
        abort();
    return 0;
}
