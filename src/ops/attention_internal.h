/* src/ops/attention_internal.h - what attention's callers in higher layers
 * share with src/ops/attention.c. */
#ifndef TAPEGRAD_OPS_ATTENTION_INTERNAL_H
#define TAPEGRAD_OPS_ATTENTION_INTERNAL_H

#include "tapegrad/tensor.h"

/* Hands a call's two results to the caller's scope (tapegrad/scope.h), both
 * or neither: with rc >= 0, o goes to *out and w (may be NULL: not wanted)
 * to *weights; with rc < 0, or when a capture fails (TG_ENOMEM), both are
 * released and *out and *weights are left untouched.  Returns rc or the
 * capture's status.  Steals o and w. */
int tg__scope_capture_pair(tg_tensor **out, tg_tensor *o, tg_tensor **weights, tg_tensor *w,
                           int rc);

#endif
