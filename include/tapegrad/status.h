/* tapegrad/status.h - status codes and the thread-local last-error message.
 *
 * Every public function that can fail returns a tg_status: TG_OK (0) on success,
 * a negative code on failure.  On failure the function also sets a thread-local
 * message, read with tg_error_message(), that names the argument and the rule it
 * broke, e.g. "conv_transpose2d: output_padding[1]=2 must be < max(stride, dilation)=2".
 * Unless a function says otherwise, on error nothing is changed: out-parameters are
 * left untouched and no tensor is written.
 */
#ifndef TAPEGRAD_STATUS_H
#define TAPEGRAD_STATUS_H

#include "tapegrad/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, default message): the one list that generates the enum, the
 * names and the messages. */
#define TG_STATUS_MAP(X)                                                      \
    X(OK,          0, "success")                                              \
    X(EINVAL,     -1, "invalid argument")                                     \
    X(ESHAPE,     -2, "shape mismatch")                                       \
    X(EDTYPE,     -3, "dtype mismatch or unsupported dtype")                  \
    X(ENOMEM,     -4, "out of memory")                                        \
    X(EIO,        -5, "input/output error")                                   \
    X(EFORMAT,    -6, "malformed file")                                       \
    X(EGRAD,      -7, "autograd error")                                       \
    X(EINPLACE,   -8, "a tensor saved for backward was modified in place")    \
    X(EGRADCHECK, -9, "gradient check failed")                                \
    X(ENOTFOUND, -10, "not found")                                            \
    X(EUNSUPPORTED, -11, "unsupported operation")

typedef enum tg_status {
#define TG__STATUS_ENUM(name, value, msg) TG_##name = value,
    TG_STATUS_MAP(TG__STATUS_ENUM)
#undef TG__STATUS_ENUM
} tg_status;

/* "TG_EINVAL" for TG_EINVAL; "TG_UNKNOWN" for a value not in the list. */
TG_API const char *tg_status_name(int status);
/* The default message of a status ("invalid argument"). */
TG_API const char *tg_status_message(int status);
/* The detailed message of the last failing call on this thread; "" if none.
 * Borrowed: valid until the next tapegrad call on this thread. */
TG_API const char *tg_error_message(void);
/* Forget the last error on this thread. */
TG_API void tg_error_clear(void);
/* For code built on tapegrad (a module's forward, a program): sets this
 * thread's message as the library does and returns status, so that
 *   return tg_error_set(TG_EINVAL, "mymodule: k=%d must be odd", k);
 * reports like any tapegrad call.  status must be negative (otherwise the
 * result is TG_EINVAL saying so); fmt NULL gives the status's default
 * message. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
TG_API int tg_error_set(int status, const char *fmt, ...);

/* Propagates a failure: evaluates expr (a tapegrad call, or any int status)
 * and, when it is negative, returns it from the enclosing function, whose
 * return type must be int.  The thread's message stays the failing call's.
 *
 *   static int step(tg_module *m, tg_tensor *x, double *loss_out) {
 *       tg_tensor *y, *loss;
 *       TG_TRY(tg_module_forward(m, &y, x));   // the caller's scope owns y
 *       TG_TRY(tg_mse_loss(&loss, y, x, TG_REDUCTION_MEAN));
 *       ...
 *   }
 *
 * Called between the caller's tg_scope_begin and tg_scope_end, the early
 * return leaves nothing behind: the caller ends the scope either way
 * (tapegrad/scope.h).  Outside a scope, what the function holds leaks on
 * the early return: clean up with a goto instead.  Never TG_TRY between a
 * tg_scope_begin and its tg_scope_end in one function: the return skips the
 * end. */
#define TG_TRY(expr)                                                          \
    do {                                                                      \
        int tg__rc_ = (expr);                                                 \
        if (tg__rc_ < 0) return tg__rc_;                                      \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
