/* src/core/core.h - what the core files (dtypes, storage, tensors, threads,
 * BLAS glue, errors) share with every layer above them (prefix tg__).
 * Not installed; tests may include it. */
#ifndef TAPEGRAD_CORE_CORE_H
#define TAPEGRAD_CORE_CORE_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/hash.h"   /* uthash, non-fatal when out of memory */

#include "tapegrad/autograd.h"   /* tg_grad_hook_fn, kept in a tensor's hook list */
#include "tapegrad/dtype.h"
#include "tapegrad/status.h"
#include "tapegrad/tensor.h"

/* ---- invariants and errors ---------------------------------------------- */

/* A broken internal invariant: abort with file and line.  Never for a
 * caller's mistake. */
#define TG_ASSERT(cond)                                                       \
    do {                                                                      \
        if (!(cond)) tg__assert_fail(#cond, __FILE__, __LINE__);              \
    } while (0)
_Noreturn void tg__assert_fail(const char *expr, const char *file, int line);

/* Sets the thread-local message (printf-style) and returns status. */
int tg__error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A call back into the user's code (a gradient hook, gradcheck's function,
 * a module's forward): rc = tg__callback_end(what, fn(...)) after
 * tg__callback_begin().  A failure the callback gave no message of its own
 * (tg_error_set) gets one naming it, instead of an older error's message. */
void tg__callback_begin(void);
int tg__callback_end(const char *what, int rc);

/* Argument check at the top of a function: return an error if cond fails. */
#define TG_CHECK(cond, status, ...)                                           \
    do {                                                                      \
        if (!(cond)) return tg__error((status), __VA_ARGS__);                 \
    } while (0)
/* Propagate a negative status. */
#define TG_TRY(expr)                                                          \
    do {                                                                      \
        int tg__rc_ = (expr);                                                 \
        if (tg__rc_ < 0) return tg__rc_;                                      \
    } while (0)

/* In a function with `int rc` and a `done:` cleanup label: on a negative
 * status, keep it in rc and go to done. */
#define TG_TRY_GOTO(expr)                                                     \
    do {                                                                      \
        rc = (expr);                                                          \
        if (rc < 0) goto done;                                                \
    } while (0)

/* malloc/calloc that set TG_ENOMEM's message on failure (return NULL). */
void *tg__malloc(size_t n);
void *tg__calloc(size_t n, size_t size);

/* ---- storage ------------------------------------------------------------ */

/* Refcounts are atomic: a tensor (a weight, a constant an op saves) may be
 * shared by graphs that threads build and release at the same time, as in
 * PyTorch.  A test of refcount == 1 is only meaningful to a sole owner. */
typedef struct tg_storage {
    _Atomic int refcount;
    size_t nbytes;
    void *data;          /* 64-byte aligned */
    uint64_t version;    /* bumped by every in-place write to any view */
} tg_storage;

/* A zeroed storage of nbytes (new reference); NULL + TG_ENOMEM message. */
tg_storage *tg__storage_new(size_t nbytes);
/* As tg__storage_new, but the bytes are left uninitialised (0xFF-filled when
 * TG_POISON_EMPTY=1): for outputs that are written whole. */
tg_storage *tg__storage_new_uninit(size_t nbytes);
tg_storage *tg__storage_retain(tg_storage *s);
void tg__storage_release(tg_storage *s);

/* ---- tensor ------------------------------------------------------------- */

typedef struct tg_node tg_node;

typedef struct tg_hook {
    tg_grad_hook_fn fn;
    void *user;
    struct tg_hook *next;
} tg_hook;

struct tg_tensor {
    _Atomic int refcount;
    tg_dtype dtype;
    int ndim;
    int64_t shape[TG_MAX_DIMS];
    int64_t strides[TG_MAX_DIMS];   /* in elements */
    int64_t offset;                 /* in elements */
    tg_storage *storage;
    bool requires_grad;
    tg_tensor *grad;                /* leaves: accumulated gradient, owned */
    tg_node *grad_fn;               /* non-leaves: the node that made it, owned */
    tg_hook *hooks;                 /* leaves' hooks (non-leaves keep them on grad_fn) */
    char name[32];
};

/* A tensor owns a reference to the node that made it (grad_fn), but core
 * knows nothing of nodes: the tape (src/autograd/node.c) installs the
 * function that releases one when it makes its first node, before any
 * tensor can have a grad_fn. */
typedef void (*tg__node_release_fn)(tg_node *n);
extern _Atomic(tg__node_release_fn) tg__grad_fn_release;

/* A new tensor viewing s (retained) with the given geometry.  strides may be
 * NULL for row-major contiguous.  Not connected to any graph. */
tg_tensor *tg__tensor_view_of(tg_storage *s, tg_dtype dt, int ndim, const int64_t *shape,
                              const int64_t *strides, int64_t offset);
/* A new zeroed contiguous tensor; NULL with TG_ENOMEM set on failure.
 * ndim/shape are trusted (validate first). */
tg_tensor *tg__tensor_empty(tg_dtype dt, int ndim, const int64_t *shape);
/* The same with its bytes left uninitialised (tg__storage_new_uninit), for an
 * output the caller writes whole: saves a memset pass on hot paths. */
tg_tensor *tg__tensor_uninit(tg_dtype dt, int ndim, const int64_t *shape);
/* Work memory of a kernel (compute-dtype copies of f16/bf16 operands):
 * uninitialised, 64-byte aligned, from the same cache of freed blocks as
 * tensor storage (src/core/storage.c), so the copies a training step makes
 * every step stop faulting in fresh pages; not counted by tg_memory_stats,
 * which counts tensors.  NULL with TG_ENOMEM set when out of memory.
 * tg__work_free(NULL) does nothing. */
void *tg__work_alloc(size_t nbytes);
void tg__work_free(void *p);
/* Row-major contiguous strides for shape. */
void tg__contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);
int64_t tg__numel(int ndim, const int64_t *shape);
/* The storage index of t's element i in row-major order (0 <= i < numel,
 * not checked). */
int64_t tg__flat_pos(const tg_tensor *t, int64_t i);
/* Validates an (ndim, shape) pair from a caller: 0 <= ndim <= TG_MAX_DIMS,
 * extents >= 0.  `what` names the caller in the message. */
int tg__check_shape(const char *what, int ndim, const int64_t *shape);
/* Validates a value v a caller writes into a tensor of dtype dt (full,
 * scalar, fill, set), as PyTorch's checked scalar conversion: a float dtype
 * takes NaN, +-inf and finite values within its finite range (65504 for
 * f16), an integer dtype finite values within its range (a fraction is then
 * rounded as tg_dtype_store does).  TG_EINVAL naming `what` otherwise. */
int tg__check_value(const char *what, tg_dtype dt, double v);
/* tg_tensor_set_flat without tg__check_value, for a value the library
 * computed into one of its own float buffers (a running statistic): a value
 * past the dtype's range is stored as +-inf, as arithmetic in that dtype
 * gives it (PyTorch's in-place updates), instead of being refused. */
int tg__set_flat_rounded(tg_tensor *t, int64_t i, double v);
/* Whether ndim extents (each >= 0) of elem_bytes-byte elements have a byte
 * count that fits in an int64, counting zero extents as 1 (so that every
 * contiguous stride fits too); checked before multiplying. */
bool tg__shape_bytes_fit(int ndim, const int64_t *shape, int64_t elem_bytes);

/* Copies t's elements in row-major order into dst as dtype `to` (a contiguous
 * buffer of numel elements).  Handles any strides, including 0.  */
void tg__gather(const tg_tensor *t, tg_dtype to, void *dst);
/* Writes a contiguous buffer of dtype `from` into t's elements (row-major),
 * converting to t's dtype; does not bump the version. */
void tg__scatter(tg_tensor *t, tg_dtype from, const void *src);
/* C (m, n) = op(A) @ op(B) + beta*C, row-major, in dtype ct (f32 or f64);
 * ta: A is stored (k, m), tb: B is stored (n, k).  Runs on the library's
 * thread pool with OpenBLAS single-threaded inside (src/ops/conv_kernels.c),
 * so OpenBLAS's own thread pool is never woken to spin beside ours. */
void tg__gemm(tg_dtype ct, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a,
              int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc);
/* OpenBLAS's kernel set ("SkylakeX", "Haswell", ...), chosen when the library
 * is loaded (src/core/blas.c). */
const char *tg__blas_core(void);
/* Bulk half <-> f32 (src/core/dtype.c), bit-identical to tg_f32_to_f16 /
 * tg_f32_to_bf16 / tg_f16_to_f32 / tg_bf16_to_f32; `to`/`from` is TG_F16 or
 * TG_BF16.  simd=false forces the portable scalar loop (tests compare the
 * two); long runs are shared by the thread pool. */
void tg__f32_to_half_n(tg_dtype to, const float *src, uint16_t *dst, int64_t n, bool simd);
void tg__half_to_f32_n(tg_dtype from, const uint16_t *src, float *dst, int64_t n, bool simd);
/* The same for `rows` runs of len elements, row r at src + r*sstride and
 * dst + r*dstride (element strides): one call for a strided block, always
 * serial (for loops that are already parallel). */
void tg__f32_to_half_rows(tg_dtype to, const float *src, int64_t sstride, uint16_t *dst,
                          int64_t dstride, int64_t rows, int64_t len);
void tg__half_to_f32_rows(tg_dtype from, const uint16_t *src, int64_t sstride, float *dst,
                          int64_t dstride, int64_t rows, int64_t len);
/* True when this CPU runs the AVX2/F16C conversion kernels. */
bool tg__cpu_has_half_simd(void);
/* Converts n contiguous elements: src (dtype from) -> dst (dtype to), with
 * the rounding of tg_dtype_store.  src and dst must not overlap unless
 * from == to. */
void tg__convert_n(tg_dtype from, const void *src, tg_dtype to, void *dst, int64_t n);
/* The dtype element-wise kernels compute in: f64 for f64, f32 otherwise. */
static inline tg_dtype tg__compute_dtype(tg_dtype dt) { return dt == TG_F64 ? TG_F64 : TG_F32; }
/* f16 or bf16: stored in 16 bits, computed in f32. */
static inline bool tg__dtype_is_half(tg_dtype dt) { return dt == TG_F16 || dt == TG_BF16; }

/* Philox-4x32-10 block function (src/core/random.c): out = philox(ctr, key). */
void tg__philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* Runs task(job, i) for i in [0, n): in parallel, one task per thread at a
 * time, when `parallel` and there are two tasks, two threads and no
 * enclosing parallel region; otherwise in order on this thread.  Every
 * task's writes must be its own.  Returns TG_OK or the error of a failed task
 * (in parallel, tasks not yet started then are skipped; in order, it stops). */
int tg__run_tasks(int64_t n, bool parallel, int (*task)(void *job, int64_t i), void *job);

/* Runs body(ctx, lo, hi) over [0, n) cut into one contiguous range per
 * thread, when `parallel` and there are two threads and no enclosing
 * parallel call; otherwise body(ctx, 0, n) on this thread.  Every range's
 * writes must be its own. */
void tg__parallel_range(int64_t n, bool parallel, void (*body)(void *ctx, int64_t lo, int64_t hi),
                        void *ctx);
/* A thread count from an environment variable's value: a number >= 1
 * (capped at 256; "4,2" counts as 4), else 0. */
int tg__parse_threads(const char *s);
/* True inside a parallel call (tg__run_tasks, tg__parallel_range). */
bool tg__in_parallel(void);

/* Bumps the storage version of t. */
static inline void tg__bump_version(tg_tensor *t) { t->storage->version++; }

#endif
