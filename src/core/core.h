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
#include "tapegrad/precision.h"
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
/* The same for part ("the forward", ...) of op name, the words made only on
 * a failure without a message. */
int tg__op_callback_end(const char *name, const char *part, int rc);
/* Scopes (src/core/scope.c): tg__lib_enter/leave bracket library code that
 * runs public ops on its own behalf; tg__scope_capture(out, rc) hands *out to
 * the caller's open scope when rc >= 0 and the call came from user code.
 * Returns rc, or TG_ENOMEM (with *out released and NULL). */
void tg__lib_enter(void);
void tg__lib_leave(void);
int tg__scope_capture(tg_tensor **out, int rc);
/* Hands a call's two results to the caller's scope, both or neither: with
 * rc >= 0, a goes to *out_a and b (may be NULL: not wanted) to *out_b; with
 * rc < 0, or when a capture fails (TG_ENOMEM), both are released and *out_a
 * and *out_b are left untouched.  Returns rc or the capture's status.
 * Steals a and b. */
int tg__scope_capture_pair(tg_tensor **out_a, tg_tensor *a, tg_tensor **out_b, tg_tensor *b,
                           int rc);

/* Argument check at the top of a function: return an error if cond fails. */
#define TG_CHECK(cond, status, ...)                                           \
    do {                                                                      \
        if (!(cond)) return tg__error((status), __VA_ARGS__);                 \
    } while (0)
/* TG_TRY (propagate a negative status) is public: tapegrad/status.h. */

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
typedef struct tg__bf16_panels tg__bf16_panels;

typedef struct tg_storage {
    _Atomic int refcount;
    size_t nbytes;
    void *data;          /* 64-byte aligned */
    uint64_t version;    /* bumped by every in-place write to any view */
    /* Writable pointers handed out by tg_tensor_data, whose writes need not
     * bump the version: packed copies of the values (panels, below) are
     * keyed on it too, so they never outlive a write made that way. */
    _Atomic uint64_t handed;
    /* The bf16 GEMM operands packed from this storage's values, each for the
     * version it was packed at (src/core/gemm_bf16_panels.c); owned, freed
     * with the storage. */
    tg__bf16_panels *panels;
    /* Set by to_dtype on an f32 -> bf16 cast of a contiguous leaf: this
     * storage (at version 0) holds the bf16 roundings of the f32 elements of
     * cast_of (owned reference) from element cast_offset on, as they were at
     * cast_of's version cast_version.  NULL otherwise. */
    struct tg_storage *cast_of;
    int64_t cast_offset;
    uint64_t cast_version, cast_handed;   /* cast_of's version and handed then */
    /* Set by tg_dequantize (per tensor) on its f32 output: this storage (at
     * version 0, never handed) holds the dequantization with deq_scale and
     * deq_zp of the deq_dtype (u8 or i8) elements of deq_of (owned
     * reference) from element deq_offset on, as they were at deq_of's
     * version deq_version, so that tg_quantize with the same parameters
     * copies those bytes instead of recomputing them (src/quant/quantize.c).
     * NULL otherwise. */
    struct tg_storage *deq_of;
    int64_t deq_offset;
    uint64_t deq_version, deq_handed;
    double deq_scale;
    int32_t deq_zp;
    int deq_dtype;
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
    bool removed;   /* removed while hooks ran: skipped, freed later */
    struct tg_hook *next;
} tg_hook;

/* The parts of a sparse COO tensor (tapegrad/sparse.h): indices (1, nnz)
 * int64 and values (nnz, shape[1], ...) of the tensor's dtype, both
 * contiguous and owned; coalesced when the indices are sorted and unique
 * (tg_sparse_coalesce made it). */
typedef struct tg__sparse {
    tg_tensor *indices;
    tg_tensor *values;
    bool coalesced;
} tg__sparse;

typedef struct tg_post_hook {
    tg_post_accumulate_hook_fn fn;
    void *user;
    bool removed;   /* removed while the hooks ran: unlinked and freed after */
    struct tg_post_hook *next;
} tg_post_hook;

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
    tg_post_hook *post_hooks;       /* leaves: run once .grad holds this backward's sum */
    int post_hooks_running;         /* > 0 while the engine runs post_hooks */
    char name[32];
    /* NULL for a dense (strided) tensor.  Else t is sparse COO: these are its
     * elements, and storage is an empty one that nothing may read. */
    tg__sparse *sparse;
};

/* A tensor owns a reference to the node that made it (grad_fn), but core
 * knows nothing of nodes: the tape (src/autograd/node.c) installs these when
 * it makes its first node, before any tensor can have a grad_fn.
 * tg__grad_fn_release(n, t): t, whose grad_fn is n, is being freed: drop
 * its reference.  tg__grad_fn_renamed(n, t): t was renamed (the tape keeps
 * the name for its views after t is gone). */
typedef void (*tg__grad_fn_fn)(tg_node *n, const tg_tensor *t);
extern _Atomic(tg__grad_fn_fn) tg__grad_fn_release;
extern _Atomic(tg__grad_fn_fn) tg__grad_fn_renamed;

/* The first dim of t with stride 0 and more than one element (an expanded
 * tensor, whose elements share memory locations), or -1. */
int tg__expanded_dim(const tg_tensor *t);

/* For messages: " 'name'" (" ('name')" with paren) when t has a name, else
 * "", written to buf (at least 48 bytes). */
const char *tg__name_note(const tg_tensor *t, bool paren, char *buf);

/* A new tensor viewing s (retained) with the given geometry.  strides may be
 * NULL for row-major contiguous.  Not connected to any graph. */
tg_tensor *tg__tensor_view_of(tg_storage *s, tg_dtype dt, int ndim, const int64_t *shape,
                              const int64_t *strides, int64_t offset);
/* Whether g, a leaf's .grad, is a plain contiguous tensor that only its
 * leaf refers to: no caller's reference, no view, no tape and no pending
 * sum of a backward shares it (each would hold a reference to g or to its
 * storage), and it is not a recorded result (create_graph).  The only .grad
 * that a backward adds into, or zero_grad zeroes, in place. */
bool tg__grad_is_own(const tg_tensor *g);
/* torch's zero_grad(set_to_none=False) over ts[0..n) (NULL entries and
 * tensors without a .grad are skipped): each .grad that is its leaf's own
 * (tg__grad_is_own) is zeroed in place, its version bumped; a shared one is
 * left as it was, and its leaf gets a new zero tensor of its dtype and
 * shape.  The new tensors are made before any .grad changes: on TG_ENOMEM
 * nothing has changed. */
int tg__zero_grads_in_place(int n, tg_tensor *const *ts);
/* A new zeroed contiguous tensor; NULL with TG_ENOMEM set on failure.
 * ndim/shape are trusted (validate first). */
tg_tensor *tg__tensor_empty(tg_dtype dt, int ndim, const int64_t *shape);
/* Leaf t takes data's dtype, geometry and storage (retained) and drops its
 * gradient, keeping its identity, requires_grad, hooks and name: torch's
 * `param.data = data`.  The storage's version is set past t's old one, so a
 * graph that saved t refuses it in backward. */
void tg__tensor_assign(tg_tensor *t, const tg_tensor *data);
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
/* The largest finite value of float dtype dt (torch.finfo(dt).max: 65504
 * for f16, 0x1.fep127 for bf16, FLT_MAX, DBL_MAX); its negation is the
 * lowest.  0 for an integer dtype. */
double tg__dtype_finite_max(tg_dtype dt);
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
/* Whether the bf16 kernels pay for a product of C (m, n) over k terms: not
 * for fewer than 32 columns (a kernel tile's width) or fewer than 32 terms,
 * where the packing and the tile's idle lanes cost more than the second
 * multiply-add per instruction gains (a Linear of 6272 features to 1 ran
 * 9x slower than sgemm).  Such a bf16 product runs OpenBLAS's sgemm on the
 * operands' f32 copies: the same products, exact in f32, added in f32. */
bool tg__bf16_gemm_pays(int64_t m, int64_t n, int64_t k);
/* C (m, n) = op(A) @ op(B) + beta*C, row-major, in dtype ct (f32 or f64;
 * TG_BF16: f32 buffers holding bf16 values, multiplied by tg__gemm_bf16
 * when tg__bf16_gemm_pays, else by sgemm);
 * ta: A is stored (k, m), tb: B is stored (n, k).  Runs on the library's
 * thread pool with OpenBLAS single-threaded inside (src/core/blas.c), so
 * OpenBLAS's own thread pool is never woken to spin beside ours. */
void tg__gemm(tg_dtype ct, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a,
              int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc);
/* The largest m n k that tg__gemm and tg__gemm_par (off the bf16 kernels)
 * multiply with plain loops (tg__gemm_small) rather than through OpenBLAS,
 * whose call costs more than such a product (src/core/gemm_small.c); with
 * AVX2 and FMA or AVX-512, products of up to 32768 whose n fills a vector
 * go to its vector kernels too.  tg__gemm_small_pays: whether a product of
 * dtype ct takes them. */
#define TG__GEMM_SMALL_MAX 512
bool tg__gemm_small_pays(tg_dtype ct, int64_t m, int64_t n, int64_t k);
/* tg__gemm's arguments, ct TG_F32 or TG_F64, on the calling thread. */
void tg__gemm_small(tg_dtype ct, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                    const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                    int64_t ldc);
/* tg__gemm's work for a caller that has already set OpenBLAS to one thread:
 * dt TG_F32 or TG_F64, and for f32 the bf16 kernel (above PORTABLE: the
 * operands hold bf16 values).  The longer side of C is cut into one slice per
 * thread (none below 2^18 multiply-adds), each a single-threaded GEMM; every
 * element is still one dot product over all k. */
void tg__gemm_par(tg_dtype dt, tg_bf16_kernel bf16, bool ta, bool tb, int64_t m, int64_t n,
                  int64_t k, const void *a, int64_t lda, const void *b, int64_t ldb, double beta,
                  void *c, int64_t ldc);
/* Sets OpenBLAS to one thread (returns the count to restore) and back:
 * around kernels that call tg__gemm_par or OpenBLAS in the pool's threads. */
int tg__blas_single_begin(void);
void tg__blas_restore(int n);
/* ---- LAPACK (src/core/lapack.c): one matrix, f32 or f64 (dt) ----
 * The matrices are n x n buffers, read by LAPACK column-major: a row-major
 * A's buffer is A^T there.  Nonzero n, nrhs within int (the callers check).
 * tg__lapack_getrf: LU with partial pivoting of the buffer a in place (of
 * A^T for a row-major A; the same determinant), pivots into ipiv (n ints,
 * 1-based, LAPACK's); returns 0, or i > 0 when U's i-th diagonal element is
 * exactly zero (singular; the factorization is still complete).
 * tg__lapack_getrf_mn: the same for the column-major m x n a (lda m),
 * min(m, n) pivots.
 * tg__lapack_getrs_t: solves A X = B for a row-major A factored by getrf,
 * B column-major (n rows, nrhs columns) in b, overwritten by X.
 * tg__lapack_getrs_n: the same for A^T X = B (getrs with trans 'N' on the
 * factors of A^T that getrf left): a backward's solve with A^T from the
 * forward's factors.
 * tg__lapack_potrf_lower: the Cholesky factor L (A = L L^T) of a symmetric
 * row-major A, read from and written to a's lower triangle (the strictly
 * upper one is left as it was); 0, or i > 0 when the leading minor of
 * order i is not positive-definite.
 * tg__blas_trsm_left: B = A^-1 B in place, row-major, A (n x n) triangular
 * (upper or lower; unit: its diagonal taken as ones, not read), B (n x nrhs).
 * tg__lapack_svd: the row-major m x n A in a (destroyed) = U diag(s) Vh
 * (gesdd), k = min(m, n) singular values descending into s, U row-major
 * (m, k) and Vh (k, n), or with full (m, m) and (n, n); TG_ENOMEM, or
 * TG_EUNSUPPORTED when it does not converge.  tg__lapack_svd_query: the
 * work (elements of dt) and iwork (ints) sizes of tg__lapack_svd_work, the
 * same without allocating: a batch asks once and calls it per matrix.
 * tg__lapack_syevd: the eigenvalues (ascending, into w) and eigenvectors of
 * the symmetric row-major A read from its lower (else upper) triangle; a is
 * overwritten by the eigenvectors as its rows (column-major columns).
 * Errors as tg__lapack_svd's.
 * tg__lapack_geqrf: the Householder QR of the column-major m x n a in place
 * (R on and above the diagonal, the reflectors below), min(m, n) scalars
 * into tau; tg__lapack_orgqr: the first n columns of Q (m x n, n <= m,
 * column-major) from k reflectors in a (m x n, its first k columns geqrf's)
 * and tau.  TG_ENOMEM only. */
int tg__lapack_getrf(tg_dtype dt, int n, void *a, int *ipiv);
int tg__lapack_getrf_mn(tg_dtype dt, int m, int n, void *a, int *ipiv);
void tg__lapack_getrs_t(tg_dtype dt, int n, int nrhs, const void *lu, const int *ipiv, void *b);
void tg__lapack_getrs_n(tg_dtype dt, int n, int nrhs, const void *lu, const int *ipiv, void *b);
int tg__lapack_potrf_lower(tg_dtype dt, int n, void *a);
void tg__blas_trsm_left(tg_dtype dt, bool upper, bool unit, int n, int nrhs, const void *a,
                        void *b);
int tg__lapack_svd(tg_dtype dt, int m, int n, void *a, bool full, void *s, void *u, void *vh);
void tg__lapack_svd_query(tg_dtype dt, int m, int n, bool full, int *lwork, int *liwork);
int tg__lapack_svd_work(tg_dtype dt, int m, int n, void *a, bool full, void *s, void *u,
                        void *vh, void *work, int lwork, int *iwork);
int tg__lapack_syevd(tg_dtype dt, int n, void *a, void *w, bool lower);
/* syevd's work sizes for an n x n matrix (*lwork elements of dt, *liwork
 * ints, each at least 1), and tg__lapack_syevd with the caller's work of
 * those sizes: a batch allocates it once.  !vectors: the eigenvalues alone
 * (jobz 'N', a smaller work; a is then destroyed). */
void tg__lapack_syevd_query(tg_dtype dt, int n, bool lower, bool vectors, int *lwork,
                            int *liwork);
int tg__lapack_syevd_work(tg_dtype dt, int n, void *a, void *w, bool lower, bool vectors,
                          void *work, int lwork, int *iwork, int liwork);
int tg__lapack_geqrf(tg_dtype dt, int m, int n, void *a, void *tau);
int tg__lapack_orgqr(tg_dtype dt, int m, int n, int k, void *a, void *tau);
/* The least-squares solve of the column-major m x n a (lda m, destroyed)
 * against the column-major b (ldb >= max(m, n) rows, nrhs columns), by
 * driver 'g' (gels, QR; A of full rank), 'y' (gelsy, pivoted QR), 'd'
 * (gelsd, SVD by divide and conquer) or 's' (gelss, SVD): b's first n rows
 * become the solution, and with gels and m > n rows n..m-1 hold the
 * residual's parts.  rcond: gelsy's, gelsd's and gelss's threshold; *rank
 * (not NULL) their rank estimate (gels: 0); s: gelsd's and gelss's
 * min(m, n) singular values, descending.  Returns 0, LAPACK's info > 0
 * (gels: a zero on R's diagonal, the rank is below full; gelsd, gelss: the
 * SVD did not converge) or TG_ENOMEM. */
int tg__lapack_lstsq(tg_dtype dt, char driver, int m, int n, int nrhs, void *a, void *b,
                     int ldb, double rcond, void *s, int *rank);
/* ---- AMX (src/core/amx.c), for every AMX kernel ---- */
typedef enum tg__amx_type { TG__AMX_BF16, TG__AMX_INT8 } tg__amx_type;
/* AMX-TILE and the type's AMX extension in the CPU, the tile state enabled
 * by the OS and granted to this process (Linux); probed once per type. */
bool tg__amx_available(tg__amx_type type);
/* Loads the tile configuration every AMX kernel uses (eight tiles of 16 rows
 * x 64 bytes) for the calling thread; tg__amx_tiles_end releases it. */
void tg__amx_tiles_begin(void);
void tg__amx_tiles_end(void);
/* Emulated tiles: with TG_AMX_EMULATE=1 in the environment, or after
 * tg__amx_set_emulated(true) (tests; process-wide), the AMX kernels run on
 * eight tiles of that configuration held in C, per thread, and
 * tg__amx_available answers yes for both types, so the kernels' addressing
 * and tile use run on CPUs without AMX.  Slow: for tests only. */
bool tg__amx_emulated(void);
void tg__amx_set_emulated(bool on);
/* The tile instructions on the emulated tiles (t, c, a, b: tile numbers
 * 0-7; loads and stores move 16 rows of 64 bytes, stride bytes apart):
 * tdpbusd c += u8 a . s8 b, tdpbsud c += s8 a . u8 b (four byte products
 * per i32, wrapping), tdpbf16ps c += bf16 a . bf16 b (pairs, into f32:
 * the even and odd products summed apart, subnormals taken as zero). */
/* tg__amx_emu_config / _release: the thread's emulated tiles configured (as
 * tg__amx_tiles_begin does under emulation) and released; a tile
 * instruction outside them aborts, as the CPU's raises #UD. */
void tg__amx_emu_config(void);
void tg__amx_emu_release(void);
void tg__amx_emu_zero(int t);
void tg__amx_emu_load(int t, const void *base, int64_t stride);
void tg__amx_emu_store(int t, void *base, int64_t stride);
void tg__amx_emu_dpbusd(int c, int a, int b);
void tg__amx_emu_dpbsud(int c, int a, int b);
void tg__amx_emu_dpbf16ps(int c, int a, int b);

/* C (m, n) = op(A) @ op(B) + beta*C as tg__gemm in f32, with A and B f32
 * buffers that hold bf16 values (widened, as the GEMM kernels' columns of
 * bf16 tensors are): the products of bf16 values added in f32 by kernel kern
 * (not AUTO; tapegrad/precision.h).  Single-threaded (src/core/gemm_bf16.c). */
void tg__gemm_bf16(tg_bf16_kernel kern, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                   int64_t ldc);
/* ---- bf16 GEMM operands packed once (src/core/gemm_bf16_panels.c) ----
 *
 * A weight that several GEMMs of a step multiply (a conv's forward and its
 * input gradient, a Linear's forward and dx, one model run three times) is
 * packed into the kernel's pair-interleaved panels once and kept on its
 * storage until its version changes (an optimizer step) or it is freed.  A
 * bf16 cast of an f32 master weight (to_dtype, autocast) keeps its panels on
 * the master's storage, packed straight from the f32 values (the same bf16
 * roundings), so the casts of one master share them. */

/* The operand: line l (a row of op(A), a column of op(B)), element t along
 * k, is element off + (tcontig ? l*ld + t : t*ld + l) of tensor t's
 * row-major elements. */
typedef struct tg__bf16_operand {
    int64_t off, lines, k, ld;
    bool tcontig;
} tg__bf16_operand;

/* Panels of operand o of the bf16 weight t (contiguous; o within its
 * elements) as the A (b_side false) or B operand of kernel kern (AVX512 or
 * AMX): a new reference, found packed for the current version or packed
 * now and kept (on t's storage, or on its master's: see tg_storage's
 * cast_of) until the storage is written or freed; NULL (pack per call) when
 * t is not a contiguous bf16 tensor or memory is short.  Callers pass
 * weights only (an activation's panels would be kept for nothing).  Safe to
 * call from several threads. */
tg__bf16_panels *tg__bf16_panels_get(const tg_tensor *t, tg_bf16_kernel kern, bool b_side,
                                     const tg__bf16_operand *o);
/* Drops a reference; NULL does nothing. */
void tg__bf16_panels_release(tg__bf16_panels *p);
/* Notes that dst (new, contiguous) was just made as src's values rounded to
 * bf16 (a cast): when src is a contiguous f32 leaf (a master weight), sets
 * dst's storage's cast_of.  Otherwise does nothing. */
void tg__bf16_note_cast(tg_tensor *dst, const tg_tensor *src);
/* Tests: the number of times panels were packed since the process began. */
int64_t tg__bf16_panels_packed(void);
/* Tests: false makes tg__bf16_panels_get return NULL on this thread (every
 * GEMM packs its operands per call, as without the cache); true restores. */
void tg__bf16_panels_set_enabled(bool on);
/* Storage teardown: frees s's panels. */
void tg__bf16_panels_free_all(tg_storage *s);

/* tg__gemm_bf16 with either packed operand taken from panels (NULL: packed
 * per call from a or b): pa's lines from pa_line0 on are op(A)'s rows,
 * pb's from pb_line0 on op(B)'s columns; each line0 is a multiple of the
 * panel height (tg__bf16_panel_lines).  a (b) may be NULL when pa (pb) is
 * given: the panels hold its values. */
void tg__gemm_bf16_panels(tg_bf16_kernel kern, bool ta, bool tb, int64_t m, int64_t n,
                          int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                          float beta, float *c, int64_t ldc, const tg__bf16_panels *pa,
                          int64_t pa_line0, const tg__bf16_panels *pb, int64_t pb_line0);
/* tg__gemm_bf16_panels with a (b) given as bf16 bits (uint16_t elements) when
 * a_bits (b_bits), as f32 holding bf16 values otherwise: the same products
 * (the packers copy bits into the pairs, and round f32 values that are
 * already bf16 exactly). */
void tg__gemm_bf16_bits(tg_bf16_kernel kern, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                        const void *a, bool a_bits, int64_t lda, const void *b, bool b_bits,
                        int64_t ldb, float beta, float *c, int64_t ldc,
                        const tg__bf16_panels *pa, int64_t pa_line0, const tg__bf16_panels *pb,
                        int64_t pb_line0);
/* Lines per panel of kernel kern's A (b_side false) or B operand. */
int64_t tg__bf16_panel_lines(tg_bf16_kernel kern, bool b_side);
/* tg__gemm_par with panels for A and/or B (NULL: packed per call; a or b
 * may be NULL as above); the slices of C start at whole panels. */
void tg__gemm_par_panels(tg_bf16_kernel bf16, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                         const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                         float *c, int64_t ldc, const tg__bf16_panels *pa,
                         const tg__bf16_panels *pb);
/* tg__gemm_par_panels with either operand as bf16 bits (tg__gemm_bf16_bits);
 * bits only with a bf16 kernel above PORTABLE. */
void tg__gemm_par_bits(tg_bf16_kernel bf16, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                       const void *a, bool a_bits, int64_t lda, const void *b, bool b_bits,
                       int64_t ldb, float beta, float *c, int64_t ldc, const tg__bf16_panels *pa,
                       const tg__bf16_panels *pb);
/* OpenBLAS's kernel set ("SkylakeX", "Haswell", ...), chosen when the library
 * is loaded (src/core/blas.c). */
const char *tg__blas_core(void);
/* The kernel of the bulk conversions (all give the same bits): the tests'
 * choice (tg__set_cast_kernel), else TG_CAST_KERNEL=portable|avx2|avx512
 * from the environment when the CPU runs it, else the widest this CPU runs
 * (avx512 needs AVX-512 F and BW besides AVX2 and F16C).  Asking reads the
 * environment: an op asks once and passes the answer to the *_k functions
 * below rather than asking per row or per block. */
typedef enum {
    TG__CAST_AUTO = 0,
    TG__CAST_PORTABLE,
    TG__CAST_AVX2,
    TG__CAST_AVX512,
} tg__cast;
/* Bulk half <-> f32 (src/core/dtype.c), bit-identical to tg_f32_to_f16 /
 * tg_f32_to_bf16 / tg_f16_to_f32 / tg_bf16_to_f32; `to`/`from` is TG_F16 or
 * TG_BF16.  simd=false forces the portable scalar loop (tests compare the
 * two), else the kernel is tg__cast_kernel()'s; long runs are shared by the
 * thread pool. */
void tg__f32_to_half_n(tg_dtype to, const float *src, uint16_t *dst, int64_t n, bool simd);
void tg__half_to_f32_n(tg_dtype from, const uint16_t *src, float *dst, int64_t n, bool simd);
/* The same for `rows` runs of len elements, row r at src + r*sstride and
 * dst + r*dstride (element strides): one call for a strided block, always
 * serial (for loops that are already parallel). */
void tg__f32_to_half_rows(tg_dtype to, const float *src, int64_t sstride, uint16_t *dst,
                          int64_t dstride, int64_t rows, int64_t len);
void tg__half_to_f32_rows(tg_dtype from, const uint16_t *src, int64_t sstride, float *dst,
                          int64_t dstride, int64_t rows, int64_t len);
/* One serial run of n elements by kernel k (a tg__cast_kernel() answer, or
 * PORTABLE; AUTO asks it), with the bits of the functions above. */
void tg__f32_to_half_k(tg_dtype to, const float *src, uint16_t *dst, int64_t n, tg__cast k);
void tg__half_to_f32_k(tg_dtype from, const uint16_t *src, float *dst, int64_t n, tg__cast k);
/* f rounded to a half of dtype dt (TG_F16 or TG_BF16): tg_f32_to_f16 or
 * tg_f32_to_bf16, the bulk conversions' rule, one value at a time. */
static inline uint16_t tg__f32_to_half(tg_dtype dt, float f)
{
    return dt == TG_F16 ? tg_f32_to_f16(f) : tg_f32_to_bf16(f);
}
/* dst[i] = half(src[i] + bias) for i < n, the sum in f32 (without add:
 * half(src[i]), -0.0 kept), rounded with the bulk conversions' rule; serial
 * (for loops that are already parallel).  k is the conversion kernel
 * (tg__cast_kernel(), asked once per op by the caller, not once per row). */
void tg__half_add_round(tg_dtype to, const float *src, bool add, float bias, uint16_t *dst,
                        int64_t n, tg__cast k);
/* Bulk half <-> f64, serial (for loops that are already parallel), with
 * the bits of tg_dtype_load and tg_dtype_store element by element: f64 to
 * half rounds once (round-to-odd into f32, then the f32 kernels above). */
void tg__f64_to_half_n(tg_dtype to, const double *src, uint16_t *dst, int64_t n);
void tg__half_to_f64_n(tg_dtype from, const uint16_t *src, double *dst, int64_t n);
/* The kernel that the environment variable var (TG_INT8_KERNEL,
 * TG_BF16_KERNEL) chooses among names[1..n): k when the variable is
 * names[k] and available(k), best when it is unset or empty.  Any other
 * value gives best and is reported on stderr once per *told ("tapegrad:
 * TG_INT8_KERNEL=x is not an int8 kernel this CPU runs (portable, avx2,
 * vnni, amx); using avx2"); `a_kind` is "an int8", "a bf16". */
int tg__kernel_from_env(const char *var, const char *a_kind, const char *const *names, int n,
                        bool (*available)(int), int best, atomic_flag *told);
/* The kernel of the bulk conversions (tg__cast above). */
tg__cast tg__cast_kernel(void);
/* Tests: forces kernel k in every thread (AUTO restores); a kernel this
 * CPU cannot run is not taken. */
void tg__set_cast_kernel(tg__cast k);
/* The instruction sets of the vector kernels, narrowest first. */
typedef enum tg__isa { TG__ISA_PORTABLE, TG__ISA_AVX2, TG__ISA_AVX512, TG__ISA_AMX } tg__isa;
/* False when TG_MAX_ISA (portable, avx2, avx512, amx or native; read once)
 * puts level above the bound (src/core/cpu.c).  Every vector kernel's
 * dispatch asks this as well as the CPU. */
bool tg__isa_allows(tg__isa level);
/* Tests: sets the bound to level (a tg__isa; -1: read TG_MAX_ISA again at
 * the next question); returns the one it replaces. */
int tg__isa_set_bound(int level);
/* True when this CPU runs the AVX2/F16C conversion kernels (and TG_MAX_ISA
 * allows AVX2). */
bool tg__cpu_has_half_simd(void);
/* True when this CPU has AVX-512 F and BW (the kernels of half_simd.h's
 * sixteen-lane helpers) and TG_MAX_ISA allows AVX-512. */
bool tg__cpu_has_avx512bw(void);
/* Converts n contiguous elements: src (dtype from) -> dst (dtype to), with
 * the rounding of tg_dtype_store.  src and dst must not overlap unless
 * from == to. */
void tg__convert_n(tg_dtype from, const void *src, tg_dtype to, void *dst, int64_t n);
/* The dtype element-wise kernels compute in: f64 for f64, f32 otherwise. */
static inline tg_dtype tg__compute_dtype(tg_dtype dt) { return dt == TG_F64 ? TG_F64 : TG_F32; }
/* f16 or bf16: stored in 16 bits, computed in f32. */
static inline bool tg__dtype_is_half(tg_dtype dt) { return dt == TG_F16 || dt == TG_BF16; }
/* v rounded to float dtype dt, as tg_dtype_store rounds it (f64: v). */
static inline double tg__round_to(tg_dtype dt, double v)
{
    if (dt == TG_F64) return v;
    if (dt == TG_F32) return (double)(float)v;
    uint16_t h;
    tg_dtype_store(dt, &h, 0, v);
    return tg_dtype_load(dt, &h, 0);
}

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
/* Tests: how long a parallel call waits for its workers to join before it
 * runs their shares itself (default 200 us; negative: without end; returns
 * the one it replaces), and workers held back from joining (true) or let
 * go (false). */
int64_t tg__pool_set_patience(int64_t ns);
void tg__pool_hold(bool hold);

/* Bumps the storage version of t. */
static inline void tg__bump_version(tg_tensor *t) { t->storage->version++; }

/* ---- sparse COO tensors (src/core/sparse.c) ---- */

/* TG_EUNSUPPORTED naming fn and the argument arg when t is sparse: the
 * check of every function that reads or writes a tensor's dense elements
 * (dispatch does it for every op).  TG_OK for a dense or NULL t. */
static inline int tg__refuse_sparse(const char *fn, const char *arg, const tg_tensor *t)
{
    if (!t || !t->sparse) return TG_OK;
    return tg__error(TG_EUNSUPPORTED, "%s: %s is a sparse COO tensor (a sparse gradient); %s "
                     "takes dense tensors only (tg_sparse_to_dense makes one)", fn, arg, fn);
}
/* A new sparse tensor of dtype dt and shape (ndim >= 1) holding indices
 * ((1, nnz) int64, contiguous) and values ((nnz, shape[1], ...), dt,
 * contiguous), both stolen (released also on failure); not checked.  NULL
 * with TG_ENOMEM set when out of memory. */
tg_tensor *tg__sparse_new(tg_dtype dt, int ndim, const int64_t *shape, tg_tensor *indices,
                          tg_tensor *values, bool coalesced);
/* A sparse tensor of t's dtype and shape with no rows (t sparse or dense). */
tg_tensor *tg__sparse_empty_like(const tg_tensor *t);
/* A deep copy of sparse t (new indices and values). */
int tg__sparse_clone(tg_tensor **out, const tg_tensor *t);
/* *out = a + b, a gradient sum where a or b is sparse (same dtype and
 * shape, not checked): both sparse give torch's merge of their rows
 * (tapegrad/sparse.h; a copy of one when the other has none); a dense one
 * gives a new dense tensor, the dense values plus each sparse row in order,
 * one rounding per addition. */
int tg__sparse_grad_sum(tg_tensor **out, const tg_tensor *a, const tg_tensor *b);
/* dense += sparse in place, as tg__sparse_grad_sum adds (dense contiguous
 * from offset 0, the same dtype and shape; not checked); bumps the version. */
void tg__sparse_add_into(tg_tensor *dense, const tg_tensor *sparse);
/* The coalesced indices and values of sparse t: *rows (n int64, sorted,
 * unique) and *vals (n * row_numel doubles, each row the sum in double of
 * its stored rows in order, rounded once to t's dtype), both malloc'd;
 * NULL with n 0 when t has no rows.  TG_ENOMEM. */
int tg__sparse_coalesced_rows(const tg_tensor *t, int64_t **rows, double **vals, int64_t *n);
/* The elements per row of sparse t (shape[1] * ... ). */
int64_t tg__sparse_row_numel(const tg_tensor *t);

/* ---- in-place passes over parameters' gradients (src/core/grad_pass.c) ---- */

/* Checks a parameter list given to a gradient utility named fn: n >= 0,
 * params non-NULL when n > 0, no NULL and no repeated entry (its gradient
 * would be changed twice) and, when float_grads, no gradient of a non-float
 * dtype.  TG_EINVAL (TG_EDTYPE for the dtype) naming fn and the entry. */
int tg__check_param_list(const char *fn, int n, tg_tensor *const *params, bool float_grads);
/* Changes buf[0..n), n >= 1 elements of dtype cdt (TG_F32 or TG_F64), in
 * place; user is the caller's state. */
typedef void (*tg__elems_fn)(tg_dtype cdt, void *buf, int64_t n, void *user);
/* Runs fn over t's elements (any strides; row-major order) in t's compute
 * dtype and writes them back, rounded once to t's dtype, then bumps t's
 * version.  An empty t is left alone.  TG_ENOMEM when the copy a strided or
 * half t needs cannot be made; t is then unchanged. */
int tg__update_in_compute_dtype(tg_tensor *t, tg__elems_fn fn, void *user);

#endif
