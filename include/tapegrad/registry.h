/* tapegrad/registry.h - the op-schema registry and AMP policies.
 *
 * Every op registers once (when the library is first used) with its name,
 * arity, AMP policy, forward and backward.  The registry is the only global
 * mutable state of the library and is built once, thread-safely, by the first
 * call below.  If that build runs out of memory, the call returns TG_ENOMEM
 * and the next call builds it again.
 *
 * AMP policies, applied by one mechanism in the op dispatch:
 *  - PROMOTE: float inputs of different dtypes are cast to the widest of them
 *    (f16 with bf16 gives f32; f64 wins over all), in and out of autocast.
 *    As in PyTorch, 0-d inputs count only when every float input is 0-d: an
 *    f32 tensor times an f64 0-d tensor is computed in f32.
 *  - LOWER_PRECISION: inside an autocast scope, float inputs are cast to the
 *    scope's dtype (f64 is never lowered).  Outside, as PROMOTE.
 *  - FP32: inside an autocast scope, float inputs are cast to f32 (f64 kept).
 *    Outside, as PROMOTE.
 *  - KEEP: never cast; mixed dtypes are TG_EDTYPE.
 * The built-in products and convolutions (matmul and the products made of
 * it, linear, conv, conv_transpose) check their operands' dtypes before
 * the policy, as torch's: one dtype outside autocast, and inside it no f64
 * beside another float dtype (autocast casts f32, f16 and bf16 only).
 * Casts are recorded on the tape, so each gradient arrives in its own tensor's
 * dtype.  When an op saves a cast input for its backward, the tape keeps the
 * input itself and casts it again in backward (no second copy of the
 * activation in another dtype).  So, as without autocast, changing such an
 * input in place before backward (an optimizer step on a weight a live graph
 * still needs, say) is TG_EINPLACE at backward.
 */
#ifndef TAPEGRAD_REGISTRY_H
#define TAPEGRAD_REGISTRY_H

#include <stdbool.h>

#include "tapegrad/dtype.h"
#include "tapegrad/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tg_amp_policy {
    TG_AMP_PROMOTE = 0,
    TG_AMP_LOWER_PRECISION,
    TG_AMP_FP32,
    TG_AMP_KEEP,
    TG_AMP_POLICY_COUNT
} tg_amp_policy;

TG_API const char *tg_amp_policy_name(tg_amp_policy p);

typedef struct tg_op_info {
    const char *name;
    int arity;                /* number of tensor inputs; -1 for variadic */
    tg_amp_policy amp;
    bool has_backward;
    bool has_double_backward; /* backward written with differentiable ops */
    const char *vjp;          /* the schema's VJP formula (tapegrad/op.h), NULL if none */
} tg_op_info;

/* Number of registered ops, or TG_ENOMEM (negative) when the registry could
 * not be built. */
TG_API int tg_op_count(void);
/* Info of the i-th op in name order (0 <= i < tg_op_count()); TG_EINVAL if out
 * of range, TG_ENOMEM as tg_op_count. */
TG_API int tg_op_info_at(int i, tg_op_info *out);
/* Info of the op called name; TG_ENOTFOUND if there is none, TG_ENOMEM as
 * tg_op_count. */
TG_API int tg_op_info_find(const char *name, tg_op_info *out);

/* Autocast scopes: thread-local and nestable.  Inside begin(dt) (dt is f16,
 * bf16 or f32), LOWER_PRECISION ops compute in dt and FP32 ops in f32.
 * tg_autocast_disable_begin() opens a scope where autocast is off.  Each
 * begin must be matched by tg_autocast_end(); TG_EINVAL for a bad dtype or an
 * unmatched end. */
TG_API int tg_autocast_begin(tg_dtype dt);
TG_API int tg_autocast_disable_begin(void);
TG_API int tg_autocast_end(void);
/* True and *dt set when an enabled autocast scope is active. */
TG_API bool tg_autocast_active(tg_dtype *dt);
/* The dtype PROMOTE gives for float dtypes a and b. */
TG_API tg_dtype tg_promote_dtypes(tg_dtype a, tg_dtype b);

#ifdef __cplusplus
}
#endif
#endif
