/* src/ops/elementwise.h - the element-wise driver (src/ops/elementwise.c) and
 * the kernel generators its op files use. */
#ifndef TAPEGRAD_OPS_ELEMENTWISE_H
#define TAPEGRAD_OPS_ELEMENTWISE_H

#include "ops/dispatch.h"

/* The broadcast shape of a and b (NumPy rules: align trailing dims, an extent
 * of 1 stretches) into *ndim_out / shape_out.  TG_ESHAPE naming op, both
 * shapes and the first clashing output dim otherwise. */
int tg__broadcast_shapes(const char *op, int ndim_a, const int64_t *shape_a, int ndim_b,
                         const int64_t *shape_b, int *ndim_out, int64_t *shape_out);
/* TG_EINVAL if t is NULL, TG_EDTYPE if its dtype is not float; i numbers the
 * input in the message ("mul: input 1 has dtype i32; float dtypes only"). */
int tg__ew_check_float(const char *op, int i, const tg_tensor *t);
/* Points *p at t's elements broadcast to (nd, shape) (n elements) as a
 * contiguous buffer of cdt: t's own data when possible, else a gathered
 * copy stored in *owned (a work buffer: tg__work_free).  TG_ENOMEM. */
int tg__ew_input(const tg_tensor *t, tg_dtype cdt, int nd, const int64_t *shape, int64_t n,
                 const void **p, void **owned);
/* where(cond, a, 0), the 0 in a's dtype (src/ops/where.c): a gradient kept
 * where cond holds and 0 elsewhere, differentiable again in a. */
int tg__where_or_zero(tg_tensor **out, tg_tensor *cond, tg_tensor *a);

/* An elementwise kernel over n contiguous elements of compute dtype cdt
 * (f32 or f64): out[i] = f(a[i], b[i]; s).  b is NULL for unary kernels; s is
 * the op's one scalar parameter (0 when it has none). */
typedef void (*tg_ew_kernel_fn)(tg_dtype cdt, void *out, const void *a, const void *b,
                                int64_t n, double s);
/* Runs a kernel on a and b broadcast together; *out (new reference) has
 * their common dtype.  Validates NULL, float dtypes, equal dtypes and shapes.
 * Not recorded: callers are forwards, or backwards building constants. */
int tg__ew_binary(const char *op, tg_tensor **out, const tg_tensor *a, const tg_tensor *b,
                  tg_ew_kernel_fn k, double s);
/* b = k(a, b), written over b itself: b contiguous, a of b's shape and dtype
 * (a may be strided).  For a backward that holds the only reference to b
 * (tg__grad_is_reusable).  The bits are those of tg__ew_binary. */
int tg__ew_binary_over(const char *op, const tg_tensor *a, tg_tensor *b, tg_ew_kernel_fn k,
                       double s);
/* b += a in place, with the bits of tg_add(b, a) (a + b == b + a exactly), and
 * b's version bumped: b contiguous from offset 0, a of b's shape and dtype (a
 * may be strided, and must not share b's storage).  Not recorded.  On error nothing
 * is written.  For the engine's accumulation into a leaf's .grad. */
int tg__add_over(tg_tensor *b, const tg_tensor *a);
/* Same for one input (the kernel sees b == NULL). */
int tg__ew_unary(const char *op, tg_tensor **out, const tg_tensor *a, tg_ew_kernel_fn k,
                 double s);
/* The floating functions' drivers (exp, sin, div, atan2, ...): as
 * tg__ew_unary and tg__ew_binary, except that an integer input (i8, u8,
 * i32, i64; for the binary one, two integer inputs of any integer dtypes) is
 * computed as torch computes it: its values converted to f32, torch's
 * default dtype (an i64 rounded once to the nearest f32), then the kernel
 * as for an f32 input, and the result f32.  An integer never requires grad,
 * so such a call is never recorded.  The binary one refuses an integer
 * with a float partner (TG_EDTYPE), whose result dtype torch's promotion
 * would take from the float. */
int tg__ew_unary_float(const char *op, tg_tensor **out, const tg_tensor *a, tg_ew_kernel_fn k,
                       double s);
int tg__ew_binary_float(const char *op, tg_tensor **out, const tg_tensor *a,
                        const tg_tensor *b, tg_ew_kernel_fn k, double s);
/* A Python-number operand s as torch uses it with a tensor of dtype dt:
 * converted to dt (f16/bf16 through f32), returned as a double; f64 and
 * other dtypes keep s (src/ops/binary.c). */
double tg__scalar_in_dtype(tg_dtype dt, double s);

/* ---- integers (src/ops/int_arith.c) ----
 * torch.result_type(a, b) into *r: a float wins over an integer (floats
 * promote as tg_promote_dtypes), two integers give the wider, and a 0-d
 * operand counts only against a 0-d one or one of a lower category (an
 * i32 tensor with a 0-d i64 is i32, with a 0-d f64 f64).  TG_EDTYPE naming
 * op and both dtypes for i8 with u8 (int16 in torch). */
int tg__result_dtype(const char *op, const tg_tensor *a, const tg_tensor *b, tg_dtype *r);
/* For a binary op of an integer and a float operand, whose torch result has
 * the float's dtype: eff[i] = in[i], except that the integer one is
 * converted to the float's dtype as torch's cast does (to a half dtype
 * through f32) into conv[i] (a new reference, else NULL), not recorded.
 * Nothing is converted unless exactly one of the two is an integer.
 * TG_EINVAL naming op for a NULL input. */
int tg__ew_mixed_to_float(const char *op, tg_tensor *const *in, tg_tensor **eff,
                          tg_tensor **conv);
/* The integer kernels: wrap-around arithmetic modulo 2^bits, the maximum
 * and minimum, and torch's integer power. */
typedef enum tg_int_op {
    TG_INT_ADD,
    TG_INT_SUB,
    TG_INT_MUL,
    TG_INT_MAX,
    TG_INT_MIN,
    TG_INT_POW
} tg_int_op;
/* *out (new reference) = k(a, b) for integer a and b broadcast together,
 * in tg__result_dtype's dtype, the operands converted to it modulo 2^bits.
 * TG_EINVAL for NULL, TG_EDTYPE for i8 with u8, TG_ESHAPE. */
int tg__int_binary(const char *op, tg_tensor **out, const tg_tensor *a, const tg_tensor *b,
                   tg_int_op k);
/* *out = k(a, s), or k(s, a) with s_first, in integer a's dtype, s taken
 * modulo 2^bits (torch wraps a Python int so: an i8 + 1000 adds -24). */
int tg__int_scalar(const char *op, tg_tensor **out, const tg_tensor *a, int64_t s, tg_int_op k,
                   bool s_first);
/* v modulo 2^bits into element k of a buffer of integer dtype dt. */
void tg__int_store(tg_dtype dt, void *buf, int64_t k, int64_t v);
/* A double scalar s for an integer tensor of dtype dt, read as torch reads a
 * Python int: TG_EDTYPE unless s is integral (torch gives f32 for a Python
 * float; the message says to convert), TG_EINVAL outside [-2^63, 2^63);
 * arg names it in the message. */
int tg__scalar_as_int(const char *op, const char *arg, tg_dtype dt, double s, int64_t *v);
/* TG_EINVAL unless torch converts the integer v to dtype dt without its
 * overflow error: dt's range, and for u8 also [-255, -1], which wraps. */
int tg__int_in_dtype(const char *op, const char *arg, tg_dtype dt, int64_t v);
/* *out = min(max(a, lo), hi) for an integer a, in a's dtype, each bound
 * only when has_*, taken modulo 2^bits. */
int tg__int_clamp(tg_tensor **out, const tg_tensor *a, bool has_lo, int64_t lo, bool has_hi,
                  int64_t hi);

/* Saves the op's output *out in ctx (when ctx is not NULL) as a detached
 * alias of it: saving *out itself would make the cycle out -> node -> ctx ->
 * out.  Its storage is *out's, so an in-place change of *out before the
 * backward is caught by the saved version.  On failure releases *out, sets
 * it to NULL and returns the error (src/ops/elementwise.c). */
int tg__ew_save_output(tg_ctx *ctx, tg_tensor **out);

/* For a backward of two broadcast inputs (src/ops/binary.c): sums *g to
 * input i's shape into *gi (a new reference; *g itself when the shapes are
 * equal).  Steals *g and sets it to NULL, on success and on error. */
int tg__ew_grad_to_input(tg_op_ctx *ctx, int i, tg_tensor **g, tg_tensor **gi);
/* rc, after releasing gi[0] and gi[1] (setting them NULL) when rc < 0, so
 * that a failed backward leaks no gradient it wrote. */
int tg__ew_grads_finish(int rc, tg_tensor **gi);

/* For a backward of one input whose derivative is an op h (src/ops/unary.c):
 * gi[0] = g * h(a) * c, a the saved input (the product by c only when c is
 * not 1), differentiable again. */
int tg__unary_g_times(tg_op_ctx *ctx, tg_tensor *g, int (*h)(tg_tensor **, tg_tensor *),
                      double c, tg_tensor **gi);

/* Kernel generators: expr is written with the element(s) `a` (and `b`) of
 * type T (float or double) and the scalar `s` (double); the result is cast
 * back to T.  A kernel is serial: the driver (elementwise.c) splits more
 * than 32k elements into one range per thread. */
#define TG__EW_FOR(i, n, ...) for (int64_t i = 0; i < (n); i++) { __VA_ARGS__ }
#define TG__EW_LOOP1(T, expr)                                                 \
    {                                                                         \
        T *o_ = out_;                                                         \
        const T *pa_ = a_;                                                    \
        TG__EW_FOR(i_, n, const T a = pa_[i_]; o_[i_] = (T)(expr);)           \
    }
#define TG__EW_LOOP2(T, expr)                                                 \
    {                                                                         \
        T *o_ = out_;                                                         \
        const T *pa_ = a_, *pb_ = b_;                                         \
        TG__EW_FOR(i_, n, const T a = pa_[i_], b = pb_[i_]; o_[i_] = (T)(expr);) \
    }
#define TG_EW_UNARY_KERNEL(fname, expr)                                       \
    static void fname(tg_dtype cdt_, void *out_, const void *a_, const void *b_, \
                      int64_t n, double s)                                    \
    {                                                                         \
        (void)b_;                                                             \
        (void)s;                                                              \
        if (cdt_ == TG_F64) TG__EW_LOOP1(double, expr)                        \
        else TG__EW_LOOP1(float, expr)                                        \
    }
#define TG_EW_BINARY_KERNEL(fname, expr)                                      \
    static void fname(tg_dtype cdt_, void *out_, const void *a_, const void *b_, \
                      int64_t n, double s)                                    \
    {                                                                         \
        (void)s;                                                              \
        if (cdt_ == TG_F64) TG__EW_LOOP2(double, expr)                        \
        else TG__EW_LOOP2(float, expr)                                        \
    }

#endif
