/* tapegrad/amp.h - dynamic loss scaling for mixed-precision training.
 *
 * The AMP policies and autocast scopes live in registry.h; this header adds
 * tg_grad_scaler, which follows PyTorch's torch.cuda.amp.GradScaler:
 *
 *   tg_grad_scaler *gs;
 *   tg_grad_scaler_new(&gs, NULL);           // scale 65536, x2 every 2000 clean steps
 *   for (...) {
 *       tg_autocast_begin(TG_F16);
 *       ... forward, loss (f32 through the FP32 policy) ...
 *       tg_autocast_end();
 *       tg_tensor *scaled;
 *       tg_grad_scaler_scale(gs, &scaled, loss);   // loss * scale, recorded
 *       tg_backward(scaled, NULL, NULL);
 *       tg_grad_scaler_unscale(gs, n, params);     // grads /= scale, look for inf/NaN
 *       if (tg_grad_scaler_should_step(gs)) tg_optimizer_step(opt);
 *       tg_grad_scaler_update(gs);                 // back off or grow the scale
 *   }
 *   tg_grad_scaler_free(gs);
 *
 * tg_grad_scaler_step() bundles unscale + should_step + a callback for any
 * optimizer.  A scaler is an opaque object owned by its creator.  Functions
 * return TG_OK or a negative tg_status; on error nothing is changed.
 */
#ifndef TAPEGRAD_AMP_H
#define TAPEGRAD_AMP_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/export.h"
#include "tapegrad/safetensors.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_grad_scaler tg_grad_scaler;

/* init_scale > 0 and finite, growth_factor > 1, 0 < backoff_factor < 1,
 * growth_interval >= 1.  A disabled scaler does nothing: scale returns the
 * loss itself, unscale leaves the gradients alone and every step is taken. */
typedef struct tg_grad_scaler_opts {
    double init_scale;
    double growth_factor;
    double backoff_factor;
    int64_t growth_interval;
    bool enabled;
} tg_grad_scaler_opts;
#define TG_GRAD_SCALER_OPTS_INIT                                              \
    {.init_scale = 65536.0, .growth_factor = 2.0, .backoff_factor = 0.5,      \
     .growth_interval = 2000, .enabled = true}

/* *out is a new scaler (opts NULL: the defaults).  TG_EINVAL for a bad option. */
TG_API int tg_grad_scaler_new(tg_grad_scaler **out, const tg_grad_scaler_opts *opts);
/* NULL does nothing. */
TG_API void tg_grad_scaler_free(tg_grad_scaler *s);

/* *out (new reference) is loss * scale, recorded on the tape (so backward
 * delivers gradients multiplied by the scale), in f32 for an f32 or half
 * loss and f64 for an f64 one: as in PyTorch, whose f32 scale tensor
 * promotes an f16/bf16 loss (in f16 the default scale 65536 is itself inf).
 * Disabled: *out is loss itself, retained. */
TG_API int tg_grad_scaler_scale(tg_grad_scaler *s, tg_tensor **out, tg_tensor *loss);

/* Multiplies the .grad of each of params[0..n) in place by the f32
 * reciprocal of the scale (in f32, f64 for f64 gradients, rounded once, as
 * PyTorch; parameters without a gradient are skipped) and records whether
 * any gradient held inf or NaN.  At most once between two updates:
 * TG_EINVAL when already called since the last update, or for a NULL or
 * repeated parameter (checked before any gradient is touched). */
TG_API int tg_grad_scaler_unscale(tg_grad_scaler *s, int n, tg_tensor *const *params);
/* True when this step's gradients are finite (false after unscale found an
 * inf/NaN).  Always true when disabled. */
TG_API bool tg_grad_scaler_should_step(const tg_grad_scaler *s);
/* True when the last unscale found an inf or NaN. */
TG_API bool tg_grad_scaler_found_inf(const tg_grad_scaler *s);

/* The optimizer step as a callback: returns TG_OK or a negative status (with
 * a message from tg_error_set; without one, the scaler names the callback). */
typedef int (*tg_grad_scaler_step_fn)(void *user);
/* Unscales params (unless already done this step) and calls step(user) when
 * the gradients are finite.  *stepped (may be NULL) tells whether it ran.
 * Returns step's status when it fails (the step may then be retried);
 * TG_EINVAL when step was already called since the last update, or when no
 * parameter had a gradient to unscale (PyTorch: "No inf checks were
 * recorded for this optimizer"). */
TG_API int tg_grad_scaler_step(tg_grad_scaler *s, int n, tg_tensor *const *params,
                               tg_grad_scaler_step_fn step, void *user, bool *stepped);

/* Ends the step: after an inf/NaN the scale is multiplied by backoff_factor
 * and the count of clean steps restarts; otherwise the count grows and, when
 * it reaches growth_interval, the scale is multiplied by growth_factor (kept
 * if the product would overflow f32) and the count restarts.  TG_EINVAL when
 * no unscale (or step) happened since the last update, or it saw no
 * gradient.  Disabled: no-op. */
TG_API int tg_grad_scaler_update(tg_grad_scaler *s);

TG_API double tg_grad_scaler_get_scale(const tg_grad_scaler *s);
/* Clean steps since the last change of the scale. */
TG_API int64_t tg_grad_scaler_growth_tracker(const tg_grad_scaler *s);
TG_API bool tg_grad_scaler_enabled(const tg_grad_scaler *s);

/* Adds "prefix.scale", "prefix.growth_factor", "prefix.backoff_factor" (0-d
 * f64) and "prefix.growth_tracker", "prefix.growth_interval" (0-d i64) to f
 * (copies).  Disabled scalers save nothing (as PyTorch's empty state_dict). */
TG_API int tg_grad_scaler_state_save(const tg_grad_scaler *s, tg_st_file *f,
                                     const char *prefix);
/* Restores what state_save wrote (as PyTorch's load_state_dict, a step in
 * progress is left as it is).  TG_ENOTFOUND for a missing key, TG_EINVAL
 * for a value out of range (scale <= 0, tracker outside [0, interval), ...);
 * on error the scaler is unchanged.  Disabled: no-op. */
TG_API int tg_grad_scaler_state_load(tg_grad_scaler *s, const tg_st_file *f,
                                     const char *prefix);

#ifdef __cplusplus
}
#endif
#endif
