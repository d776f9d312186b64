/* tapegrad/dtype.h - element types, their traits and scalar conversions. */
#ifndef TAPEGRAD_DTYPE_H
#define TAPEGRAD_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tapegrad/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tg_dtype {
    TG_F32 = 0,
    TG_F64,
    TG_F16,
    TG_BF16,
    TG_I8,
    TG_U8,
    TG_I32,
    TG_I64,
    TG_DTYPE_COUNT
} tg_dtype;

typedef struct tg_dtype_traits {
    const char *name;        /* "f32", "bf16", ... */
    const char *st_name;     /* safetensors name: "F32", "BF16", ... */
    size_t size;             /* bytes per element */
    bool is_float;
    bool is_signed;
} tg_dtype_traits;

/* Traits of dt; NULL when dt is not a valid dtype.  Borrowed (static table). */
TG_API const tg_dtype_traits *tg_dtype_get_traits(tg_dtype dt);
/* Shorthands; for an invalid dtype: "?", 0, false. */
TG_API const char *tg_dtype_name(tg_dtype dt);
TG_API size_t tg_dtype_size(tg_dtype dt);
TG_API bool tg_dtype_is_float(tg_dtype dt);
/* Parses "f32"/"F32"/"float32"/"bf16"/... into *out.  TG_EINVAL if unknown. */
TG_API int tg_dtype_from_name(tg_dtype *out, const char *name);

/* Half-precision conversions, round-to-nearest-even; NaN stays NaN (quiet),
 * infinities stay infinite, values beyond the range round to +-inf, tiny values
 * become subnormals or signed zero.  Bit for bit PyTorch 1.13's .half() /
 * .bfloat16() of f32 for every non-NaN input (3 million checked, all 65536
 * half patterns back to f32); a NaN keeps its sign and top payload bits,
 * quieted, where torch gives a canonical NaN (f16 0x7e00 | sign). */
TG_API uint16_t tg_f32_to_f16(float f);
TG_API float tg_f16_to_f32(uint16_t h);
TG_API uint16_t tg_f32_to_bf16(float f);
TG_API float tg_bf16_to_f32(uint16_t h);

/* Raw buffer access, as memcpy: base must hold at least i + 1 elements of dt
 * (i is not checked: these run per element; use tg_tensor_get_flat and
 * tg_tensor_set_flat for checked access to a tensor).  A NULL base or a dt
 * that is not a tg_dtype reads NaN and writes nothing.
 * Reads element i of a buffer of dtype dt as a double (exact for every dtype but
 * i64 beyond 2^53). */
TG_API double tg_dtype_load(tg_dtype dt, const void *base, int64_t i);
/* Writes v into element i of a buffer of dtype dt: floats round to nearest even;
 * integers truncate toward zero, as a C cast and PyTorch's Tensor.to (2.7 -> 2,
 * -2.7 -> -2), and saturate at the type's range, where C and PyTorch are
 * undefined (torch 1.13 gives 300.0 -> int8 44 on x86); NaN becomes 0.
 * A double goes to f16/bf16 in one rounding; PyTorch converts through f32
 * (c10::Half(float)), which differs when v lies within 2^-29 (relative) of a
 * half tie: 5549.999999999999 is 5548 here, 5552 in torch. */
TG_API void tg_dtype_store(tg_dtype dt, void *base, int64_t i, double v);

#ifdef __cplusplus
}
#endif
#endif
