/* tests/fuzz/targets.c - what the target files share, and the table of
 * targets (targets.h).
 *
 * What every target checks of a refusal (tg_fuzz_refused()): the status is one of
 * tapegrad's negative codes and tg_error_message() says something.  What
 * each checks of an acceptance is in targets.h. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tapegrad/tapegrad.h"
#include "targets.h"

int tg_fuzz_broken(const char *target, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz %s: ", target);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return -1;
}

/* A refusal must be a known negative status with a message. */
int tg_fuzz_refused(const char *target, const char *call, int rc)
{
    if (rc >= 0)
        return 0;
    if (strcmp(tg_status_name(rc), "TG_UNKNOWN") == 0)
        return tg_fuzz_broken(target, "%s returned %d, not a tg_status", call, rc);
    const char *msg = tg_error_message();
    if (!msg || !*msg)
        return tg_fuzz_broken(target, "%s returned %s with no message", call, tg_status_name(rc));
    return 0;
}

static size_t tensor_bytes(const tg_tensor *t)
{
    return (size_t)tg_tensor_numel(t) * tg_dtype_size(tg_tensor_dtype(t));
}

/* Same dtype, shape and bytes (both contiguous). */
static bool tensors_identical(const tg_tensor *a, const tg_tensor *b)
{
    return tg_tensor_dtype(a) == tg_tensor_dtype(b) && tg_tensor_same_shape(a, b) &&
           tg_tensor_is_contiguous(a) && tg_tensor_is_contiguous(b) &&
           memcmp(tg_tensor_cdata(a), tg_tensor_cdata(b), tensor_bytes(a)) == 0;
}

/* a and b hold the same tensors: in order, the same names, dtypes, shapes
 * and bytes. */
bool tg_fuzz_same_tensors(const tg_st_file *a, const tg_st_file *b)
{
    if (tg_st_count(a) != tg_st_count(b))
        return false;
    for (int i = 0; i < tg_st_count(a); i++) {
        const char *na, *nb;
        tg_tensor *ta, *tb;
        tg_st_at(a, i, &na, &ta);
        tg_st_at(b, i, &nb, &tb);
        if (strcmp(na, nb) != 0 || !tensors_identical(ta, tb))
            return false;
    }
    return true;
}

const tg_fuzz_target tg_fuzz_targets[] = {
    {"safetensors", tg_fuzz_safetensors},
    {"idx", tg_fuzz_idx},
    {"checkpoint", tg_fuzz_checkpoint},
    {"case", tg_fuzz_case},
    {"tape", tg_fuzz_tape},
    {NULL, NULL},
};
