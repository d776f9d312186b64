/* tapegrad/tensor.h - n-dimensional tensors: views over refcounted storage.
 *
 * A tensor is an opaque handle: dtype, up to TG_MAX_DIMS dims, a shape, strides
 * (in elements, may be 0 for broadcast dims) and an offset into a storage, a
 * 64-byte aligned refcounted byte buffer shared by all views of it.
 *
 * Refcount contract: every function that hands out a tensor through an
 * out-parameter returns a new reference, which the caller releases with
 * tg_tensor_release().  tg_tensor_retain() returns its argument;
 * tg_tensor_release(NULL) does nothing.  Releasing more often than retaining
 * is a use-after-free, as with any refcounted C object: the last release
 * frees the tensor, so a further one reads freed memory (AddressSanitizer
 * reports it; without it TG_ASSERT on the count catches it only while the
 * memory still holds the old object).  Tensor arguments are borrowed unless a
 * function says it steals them.
 *
 * Version counter: every in-place write (fill, set, random init, copy_, an
 * optimizer step) increments the version of the storage, shared by its views.
 * Autograd records the version of every tensor it saves for backward and
 * reports TG_EINPLACE at backward time if it changed.
 *
 * In-place writes are never recorded on the tape: they act as PyTorch's
 * writes under torch.no_grad() (or through .data), on a leaf that requires
 * grad and on views of it too, where PyTorch outside no_grad refuses ("a
 * leaf Variable that requires grad is being used in an in-place
 * operation") or records a CopySlices node.  This is deliberate: optimizers
 * and initialisers write parameters this way.  The version check above still
 * catches a write that a saved tensor would see.
 *
 * View-making operations (reshape, permute, transpose, slice, expand) are
 * differentiable ops and live in tapegrad/ops.h.
 */
#ifndef TAPEGRAD_TENSOR_H
#define TAPEGRAD_TENSOR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tapegrad/dtype.h"
#include "tapegrad/export.h"
#include "tapegrad/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_MAX_DIMS 8

typedef struct tg_tensor tg_tensor;

/* ---- creation (each returns a new reference in *out) ---- */

/* A contiguous tensor of the given shape filled with zeros.  ndim may be 0 (a
 * scalar with one element); every extent must be >= 0. */
TG_API int tg_tensor_zeros(tg_tensor **out, tg_dtype dt, int ndim, const int64_t *shape);
/* Same, filled with value v (converted to dt as tg_dtype_store does).  As
 * PyTorch, a v beyond dt's range is TG_EINVAL ("cannot be converted to f16
 * without overflow"), not inf or a saturated integer: a float dtype takes
 * NaN, +-inf and finite values up to its largest finite one (65504 for
 * f16), an integer dtype finite values in its range.  The same check applies
 * to tg_tensor_scalar, tg_tensor_fill, tg_tensor_set and tg_tensor_set_flat
 * (on error nothing is written). */
TG_API int tg_tensor_full(tg_tensor **out, tg_dtype dt, int ndim, const int64_t *shape, double v);
/* torch.eye(n, m): a contiguous n x m tensor with ones on its diagonal and
 * zeros elsewhere.  TG_EINVAL for a negative extent or NULL out. */
TG_API int tg_tensor_eye(tg_tensor **out, tg_dtype dt, int64_t n, int64_t m);
/* A 0-d tensor holding v. */
TG_API int tg_tensor_scalar(tg_tensor **out, tg_dtype dt, double v);
/* A contiguous tensor whose elements are copied from data (row-major, dtype dt). */
TG_API int tg_tensor_from_data(tg_tensor **out, tg_dtype dt, int ndim, const int64_t *shape,
                               const void *data);
/* A contiguous tensor with the same shape and dtype as t, filled with zeros. */
TG_API int tg_tensor_zeros_like(tg_tensor **out, const tg_tensor *t);
/* torch.full_like(t, v) (torch.ones_like: v = 1): t's shape and dtype,
 * filled with v (checked as tg_tensor_full). */
TG_API int tg_tensor_full_like(tg_tensor **out, const tg_tensor *t, double v);
/* A contiguous copy of t (same dtype), not connected to the graph. */
TG_API int tg_tensor_clone(tg_tensor **out, const tg_tensor *t);

/* ---- refcount ---- */
TG_API tg_tensor *tg_tensor_retain(tg_tensor *t);
TG_API void tg_tensor_release(tg_tensor *t);

/* ---- metadata (all borrowed, valid while t is alive) ---- */
TG_API tg_dtype tg_tensor_dtype(const tg_tensor *t);
TG_API int tg_tensor_ndim(const tg_tensor *t);
TG_API const int64_t *tg_tensor_shape(const tg_tensor *t);
TG_API const int64_t *tg_tensor_strides(const tg_tensor *t);
TG_API int64_t tg_tensor_offset(const tg_tensor *t);
/* Extent of dim (negative counts from the end); -1 if dim is out of range. */
TG_API int64_t tg_tensor_dim(const tg_tensor *t, int dim);
TG_API int64_t tg_tensor_numel(const tg_tensor *t);
TG_API bool tg_tensor_is_contiguous(const tg_tensor *t);
/* True when a and b have the same ndim and extents. */
TG_API bool tg_tensor_same_shape(const tg_tensor *a, const tg_tensor *b);
/* Pointer to element (0,...,0), i.e. storage base + offset * elem size.
 * Writing through it does not bump the version: call tg_tensor_bump_version()
 * so that autograd can tell a saved tensor changed.  Copies that kernels
 * keep of a weight's values (the packed bf16 operands) are not reused after
 * it, bumped or not; tg_tensor_cdata is the pointer for reading only.
 * Both are NULL, with the error message set, for a sparse tensor
 * (tapegrad/sparse.h), which has no dense elements. */
TG_API void *tg_tensor_data(tg_tensor *t);
TG_API const void *tg_tensor_cdata(const tg_tensor *t);
/* True when a and b share a storage. */
TG_API bool tg_tensor_shares_storage(const tg_tensor *a, const tg_tensor *b);
/* Number of references to t (for tests and debugging). */
TG_API int tg_tensor_refcount(const tg_tensor *t);

/* ---- element access (idx has ndim entries; flat index is row-major) ---- */
TG_API int tg_tensor_get(const tg_tensor *t, const int64_t *idx, double *out);
TG_API int tg_tensor_set(tg_tensor *t, const int64_t *idx, double v);
TG_API int tg_tensor_get_flat(const tg_tensor *t, int64_t i, double *out);
/* The value of a one-element tensor (any ndim), as PyTorch's .item().  NaN,
 * with this thread's error message set (TG_EINVAL), when t is NULL or has
 * another number of elements: test with tg_error_message() where a NaN value
 * is possible. */
TG_API double tg_tensor_item(const tg_tensor *t);
TG_API int tg_tensor_set_flat(tg_tensor *t, int64_t i, double v);
/* Copies all elements, in row-major order, into dst as doubles (n must equal numel). */
TG_API int tg_tensor_to_doubles(const tg_tensor *t, double *dst, int64_t n);
/* Sets every element to v (in place). */
TG_API int tg_tensor_fill(tg_tensor *t, double v);
/* Copies src into dst elementwise (in place), converting dtype; src is
 * broadcast to dst's shape.  Not recorded on the tape.  TG_EINVAL when dst
 * is expanded (a stride 0 on a dim of size > 1), as torch. */
TG_API int tg_tensor_copy_(tg_tensor *dst, const tg_tensor *src);
/* A tensor with the same elements that is contiguous: a new reference to t
 * itself when it already is, else a copy.  Not recorded on the tape; for a
 * differentiable version use tg_contiguous() in ops.h. */
TG_API int tg_tensor_contiguous(tg_tensor **out, tg_tensor *t);
/* A contiguous copy converted to dtype dt (not recorded; see tg_to_dtype). */
TG_API int tg_tensor_to_dtype(tg_tensor **out, const tg_tensor *t, tg_dtype dt);

/* ---- version counter ---- */
TG_API uint64_t tg_tensor_version(const tg_tensor *t);
TG_API void tg_tensor_bump_version(tg_tensor *t);

/* ---- random init from a counter-based generator ----
 * Philox-4x32-10: element k of the n-th draw depends only on (seed, counter),
 * so results are the same on every machine and thread count.  Each call
 * advances the counter by the number of 128-bit blocks it used. */
typedef struct tg_rng {
    uint64_t seed;
    uint64_t counter;
} tg_rng;

TG_API void tg_rng_init(tg_rng *rng, uint64_t seed);
/* Fills t in place with U[lo, hi).  t must have a float dtype (an integer one
 * is TG_EINVAL, as torch's uniform_ and normal_ refuse it; nothing is written). */
TG_API int tg_tensor_rand_uniform(tg_tensor *t, tg_rng *rng, double lo, double hi);
/* Fills t in place with N(mean, std^2) (Box-Muller); float dtypes only, as above. */
TG_API int tg_tensor_rand_normal(tg_tensor *t, tg_rng *rng, double mean, double std);
/* torch.randn_like(t): a new tensor of t's shape and float dtype drawn from
 * N(0, 1) by rng, as tg_tensor_rand_normal (an integer t is TG_EINVAL, as
 * torch's; *out is then untouched). */
TG_API int tg_tensor_randn_like(tg_tensor **out, const tg_tensor *t, tg_rng *rng);
/* torch.randn(shape, dtype=dt) and torch.rand(shape, dtype=dt): a new
 * tensor of that shape drawn by rng from N(0, 1) (tg_tensor_rand_normal) or
 * U[0, 1) (tg_tensor_rand_uniform), the numbers a tg_tensor_zeros filled
 * by those would hold.  dt a float dtype (TG_EINVAL otherwise, as torch's
 * randn of an integer dtype); shape as tg_tensor_zeros's.  On error *out is
 * untouched. */
TG_API int tg_tensor_randn(tg_tensor **out, tg_dtype dt, int ndim, const int64_t *shape,
                           tg_rng *rng);
TG_API int tg_tensor_rand(tg_tensor **out, tg_dtype dt, int ndim, const int64_t *shape,
                          tg_rng *rng);
/* One uniform double in [0, 1); advances the counter by one block. */
TG_API double tg_rng_uniform(tg_rng *rng);

/* ---- autograd attributes (see tapegrad/autograd.h for the engine) ---- */
/* Only leaves may change requires_grad; TG_EGRAD for a non-leaf, TG_EDTYPE
 * when asking for gradients of a non-float tensor. */
TG_API int tg_tensor_set_requires_grad(tg_tensor *t, bool requires_grad);
TG_API bool tg_tensor_requires_grad(const tg_tensor *t);
/* A leaf is a tensor not produced by a recorded op. */
TG_API bool tg_tensor_is_leaf(const tg_tensor *t);
/* The accumulated gradient of a leaf, or NULL.  Borrowed: valid for as long
 * as it stays t's .grad.  A tg_backward without create_graph adds into that
 * same tensor in place (bumping its version) when t holds the only reference
 * to it, it has no views and is a plain contiguous tensor, so a pointer kept
 * across micro-batches sees each sum.  .grad is replaced, and the borrowed
 * pointer released, by tg_tensor_zero_grad, tg_tensor_set_grad, and by a
 * backward that cannot add in place: one with create_graph, or one where
 * the .grad is shared (retained by the caller, viewed, or saved by an op),
 * which then gets the sum in a new tensor and leaves the shared one as it
 * was (PyTorch adds into it in place even then).  Retain it to keep it
 * beyond that.  tg_optimizer_zero_grad_ex and tg_module_zero_grad_ex with
 * set_to_none false zero it in place by the same rule.  A parameter used by
 * an Embedding with sparse=true gets a sparse COO .grad (tapegrad/sparse.h),
 * which is never added into in place and which zero_grad_ex replaces by one
 * with no rows. */
TG_API tg_tensor *tg_tensor_grad(const tg_tensor *t);
/* Replaces t's gradient (steals grad, also on error; NULL clears it).
 * TG_ESHAPE / TG_EDTYPE when grad's shape or dtype is not t's (as PyTorch's
 * "assigned grad has data of a different size/type"): t keeps its old
 * gradient.  TG_EINVAL for NULL t. */
TG_API int tg_tensor_set_grad(tg_tensor *t, tg_tensor *grad);
/* Releases t's gradient (as PyTorch's zero_grad(set_to_none=True)). */
TG_API void tg_tensor_zero_grad(tg_tensor *t);
/* A new tensor sharing t's storage, a leaf with requires_grad false. */
TG_API int tg_tensor_detach(tg_tensor **out, tg_tensor *t);
/* A short name shown in DOT graphs, traces and gradcheck reports (copied,
 * truncated to 31 chars). */
TG_API void tg_tensor_set_name(tg_tensor *t, const char *name);
TG_API const char *tg_tensor_name(const tg_tensor *t);

/* Prints dtype, shape and (up to max_elems) values. */
TG_API int tg_tensor_print(FILE *f, const tg_tensor *t, int64_t max_elems);
/* "(2, 3, 4)" into buf (always NUL-terminated); returns buf. */
TG_API char *tg_shape_str(char *buf, size_t n, int ndim, const int64_t *shape);

/* Tensor memory, as torch.cuda.memory_allocated / max_memory_allocated: the
 * bytes of tensor storage alive now and the most alive at once since the last
 * tg_memory_reset_peak (or since start), over the whole process.  Counts the
 * data of tensors (parameters, gradients, activations saved for backward,
 * optimizer state), not the kernels' reusable scratch buffers.  Either
 * pointer may be NULL. */
TG_API void tg_memory_stats(int64_t *current_bytes, int64_t *peak_bytes);
/* Sets the peak to the current value. */
TG_API void tg_memory_reset_peak(void);

/* The cache of freed tensor memory, as torch.cuda.memory_reserved /
 * empty_cache.  A freed storage of 64 KiB or more is kept for the next
 * storage of the same padded size instead of going back to malloc, up to a
 * limit on the bytes kept (256 MiB by default; 0 under AddressSanitizer, so
 * that a use after free is still caught).  Process-wide and thread-safe.
 * tg_memory_cached: the bytes held in the cache now (not counted by
 * tg_memory_stats).  tg_memory_empty_cache: frees them all.
 * tg_memory_set_cache_limit: sets the limit (negative counts as 0, which
 * turns the cache off), frees what is above it, and returns the old limit. */
TG_API int64_t tg_memory_cached(void);
TG_API void tg_memory_empty_cache(void);
TG_API int64_t tg_memory_set_cache_limit(int64_t bytes);

/* Threads, as torch.set_num_threads / get_num_threads.  The kernels split
 * their work over the calling thread and a pool of workers started on first
 * use (src/core/parallel.c).  The default is TG_NUM_THREADS, else
 * OMP_NUM_THREADS, else the CPUs the process may run on.  Idle workers spin for
 * 50 us (not at all with more threads than CPUs), then sleep;
 * OMP_WAIT_POLICY does not apply.
 * tg_set_num_threads: n in [1, 256], for the calls that follow; TG_EINVAL
 * outside that range or from inside a kernel's parallel call.
 * tg_get_num_threads: the number the next call uses (1 inside a parallel
 * call).  Results do not depend on it except where docs/performance.md
 * says so (a GEMM cut into slices). */
TG_API int tg_set_num_threads(int n);
TG_API int tg_get_num_threads(void);

/* The name of the kernel set OpenBLAS runs ("SkylakeX", "Haswell", "Zen",
 * ...).  Where Debian's OpenBLAS does not know the CPU and falls back to its
 * SSE3 kernels ("Prescott") though the CPU has AVX2 or AVX-512, tapegrad
 * selects Haswell or SkylakeX when it is loaded, unless OPENBLAS_CORETYPE is
 * set (src/core/blas.c). */
TG_API const char *tg_blas_core(void);

/* The widest instruction set tapegrad's own kernels use here: "amx",
 * "avx512", "avx2" or "portable" (plain C), the CPU's, lowered by the
 * environment variable TG_MAX_ISA when it is set to one of those (read at
 * the first kernel choice; "native" or unset: no bound).  The variable makes
 * a machine run the kernels a narrower CPU runs, as oneDNN's
 * ONEDNN_MAX_CPU_ISA; OpenBLAS's are OPENBLAS_CORETYPE's. */
TG_API const char *tg_cpu_isa(void);
/* The level TG_MAX_ISA names ("portable", "avx2", "avx512" or "amx"), or
 * NULL when it names none (unset, "native" or an unknown value). */
TG_API const char *tg_cpu_isa_bound(void);

#ifdef __cplusplus
}
#endif
#endif
