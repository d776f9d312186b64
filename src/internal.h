/* src/internal.h - definitions shared by the library's files (prefix tg__).
 * Not installed; tests may include it. */
#ifndef TAPEGRAD_INTERNAL_H
#define TAPEGRAD_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hash.h"   /* uthash, non-fatal when out of memory */

#include "tapegrad/autograd.h"
#include "tapegrad/dtype.h"
#include "tapegrad/registry.h"
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
/* Scopes (src/core/scope.c): tg__lib_enter/leave bracket library code that
 * runs public ops on its own behalf; tg__scope_capture(out, rc) hands *out to
 * the caller's open scope when rc >= 0 and the call came from user code.
 * Returns rc, or TG_ENOMEM (with *out released and NULL). */
void tg__lib_enter(void);
void tg__lib_leave(void);
int tg__scope_capture(tg_tensor **out, int rc);
int tg__callback_end(const char *what, int rc);

/* Argument check at the top of a function: return an error if cond fails. */
#define TG_CHECK(cond, status, ...)                                           \
    do {                                                                      \
        if (!(cond)) return tg__error((status), __VA_ARGS__);                 \
    } while (0)
/* TG_TRY (propagate a negative status) is public: tapegrad/status.h. */

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
/* relu, leaky_relu (slope s) and their one-pass gradients, leaky_relu's
 * g * (a > 0 ? 1 : s) and relu's g * (a <= 0 ? 0 : 1), on n contiguous halves of
 * dtype dt, in one pass with AVX2/F16C (src/ops/activation_half.c): the bits
 * of the f32 kernels of activation.c followed by one rounding.  o may be a
 * or g.  g is read by the gradients only.  False (nothing written) on CPUs
 * without the vector kernels: the caller takes the general path. */
typedef enum tg__half_act {
    TG__HALF_RELU,
    TG__HALF_LEAKY,
    TG__HALF_MASKED_GRAD,
    TG__HALF_RELU_GRAD
} tg__half_act;
bool tg__half_act_n(tg__half_act op, tg_dtype dt, const uint16_t *a, const uint16_t *g,
                    uint16_t *o, int64_t n, double s);
/* Tests: false makes relu/leaky_relu on this thread take the general half
 * path instead of tg__half_act_n (true, the default, restores). */
void tg__act_set_half_fused(bool on);
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

/* Whether a backward may write its result over the incoming gradient g
 * (then passing on a new reference to g): g is the only reference to a
 * contiguous, unshared buffer of dtype dt and shape like, outside any graph.
 * The engine hands each backward its own reference to the summed gradient,
 * so this holds unless a hook or a tg_grad result slot kept one.  Only for
 * backwards that build no graph (grad mode off). */
static inline bool tg__grad_is_reusable(const tg_tensor *g, tg_dtype dt, const tg_tensor *like)
{
    if (g->refcount != 1 || g->storage->refcount != 1 || g->grad_fn || g->requires_grad ||
        g->dtype != dt || g->ndim != like->ndim || !tg_tensor_is_contiguous(g) || g->offset != 0)
        return false;
    for (int d = 0; d < g->ndim; d++)
        if (g->shape[d] != like->shape[d]) return false;
    return true;
}

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

/* ---- op registry and dispatch -------------------------------------------- */

typedef tg_node tg_ctx;   /* what forward/backward see of their node */

/* forward: computes out[0] (new reference) from in[0..n) (in[i] may be NULL
 * for an absent optional input).  Runs with grad mode off, so ops it calls
 * are not recorded.  When ctx is not NULL the op is being recorded and the
 * forward saves what backward needs with tg__ctx_save(). */
typedef int (*tg_forward_fn)(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                             const void *params);
/* backward: given grad_out (the gradient of the output), writes new
 * references into grad_in[i] for every i with tg__ctx_needs_grad(ctx, i)
 * (others stay NULL; leaving a needed one NULL means zero).  Written with
 * differentiable ops; the engine turns grad mode on or off around it
 * according to create_graph. */
typedef int (*tg_backward_fn)(tg_ctx *ctx, tg_tensor *grad_out, tg_tensor **grad_in);

typedef struct tg_op_schema {
    const char *name;
    int arity;                  /* -1: variadic */
    tg_amp_policy amp;
    tg_forward_fn forward;
    tg_backward_fn backward;    /* NULL: not differentiable */
    bool double_backward;       /* backward uses only differentiable ops */
    UT_hash_handle hh;
} tg_op_schema;

/* The registry is used by name (tg_op_info_*, tg__op_find); dispatch takes
 * the schema itself and never needs it.  It is built on first use; a build
 * that fails (TG_ENOMEM) leaves it empty, and the next use tries again.
 * Registers an op: from each op family's tg__register_* function during the
 * build (which reports the first error), or later (a test's own op, after
 * the built-ins).  TG_ENOMEM with nothing registered when out of memory. */
int tg__op_register(tg_op_schema *op);
/* Lookup by name (builds the registry on first use); NULL if unknown, or if
 * the registry cannot be built (message set). */
tg_op_schema *tg__op_find(const char *name);

/* The one dispatch path of every op:
 *  1. checks inputs are non-NULL where required (in[i] may be NULL only if
 *     the op allows it: forward decides),
 *  2. applies the op's AMP policy to float inputs (recorded casts),
 *  3. runs forward with grad mode off, with a ctx when the op is recorded
 *     (grad mode on, an input requires grad, op has backward),
 *  4. links the output to its new node and traces it when TG_TRACE=1.
 * params (params_size bytes) is copied into the node.  On error *out is
 * untouched. */
int tg__op_call(const tg_op_schema *op, tg_tensor **out, int n, tg_tensor *const *in,
                const void *params, size_t params_size);

/* ---- nodes (the tape) ----------------------------------------------------- */

#define TG_NODE_MAX_INPUTS 8
#define TG_NODE_MAX_SAVED 8

typedef struct tg_edge {
    tg_node *fn;          /* the input's node (retained), or NULL */
    tg_tensor *leaf;      /* the input itself if it is a leaf requiring grad (retained) */
} tg_edge;

typedef struct tg_meta {
    tg_dtype dtype;
    int ndim;
    int64_t shape[TG_MAX_DIMS];
} tg_meta;

typedef struct tg_saved {
    tg_tensor *t;         /* retained */
    uint64_t version;     /* storage version when saved */
    /* An AMP cast of an input that the forward saved is kept as the input
     * itself (t) and cast again when backward asks for it (recast, owned):
     * the tape then holds no second copy of the activation in another dtype.
     * recast gets the forward cast's node as its grad_fn, so gradients that
     * reach it (higher derivatives) add up with the first-order ones there
     * before the cast's backward, as they would through the saved cast. */
    bool is_cast;
    tg_dtype cast_to;
    tg_tensor *recast;
    tg_node *cast_fn;     /* the forward cast's node (retained; NULL if not recorded) */
} tg_saved;

struct tg_node {
    _Atomic int refcount;
    const tg_op_schema *op;
    uint64_t seq;                          /* recording order, one process-wide counter */
    int n_inputs;
    tg_edge edges[TG_NODE_MAX_INPUTS];
    tg_meta in_meta[TG_NODE_MAX_INPUTS];   /* dtype/shape of each input (ndim -1: absent) */
    bool needs_grad[TG_NODE_MAX_INPUTS];
    tg_meta out_meta;
    int n_saved;
    tg_saved saved[TG_NODE_MAX_SAVED];
    void *params;                          /* copy of the op's params, owned */
    size_t params_size;
    bool released;                         /* saved tensors/params freed after backward */
    tg_hook *hooks;                        /* hooks of the output tensor */
    /* engine scratch during one backward */
    tg_tensor *grad_accum;
    int dependencies;
};

tg_node *tg__node_retain(tg_node *n);
void tg__node_release(tg_node *n);
/* After a forward: the saved tensors that are the dispatcher's AMP casts of
 * inputs (cast[i] of in[i], NULL where not cast) are replaced by the inputs
 * themselves, to be cast again in tg__ctx_saved. */
void tg__node_save_uncast(tg_node *n, int n_in, tg_tensor *const *in, tg_tensor *const *cast);
/* Releases saved tensors and params after backward (not the edges' nodes). */
void tg__node_release_saved(tg_node *n);
/* A new node (refcount 1, next process-wide seq) for op applied to in[0..n):
 * edges, input metadata and needs_grad filled in; params and out_meta left
 * for the caller.  NULL with TG_ENOMEM set on failure. */
tg_node *tg__node_new(const tg_op_schema *op, int n, tg_tensor *const *in);
/* Number of nodes alive in the process (tests check memory stays flat). */
long tg__node_live_count(void);
/* The nodes reachable from the grad_fn of roots[0..n_roots), sorted by
 * increasing seq, in a malloc'd array (*nodes, freed by the caller; the node
 * pointers are borrowed).  Uses each node's `dependencies` field as a mark and
 * leaves it 0.  TG_ENOMEM, or TG_EGRAD when a backward is already running over
 * the same nodes. */
int tg__tape_collect(tg_tensor *const *roots, int n_roots, tg_node ***nodes, int *count);

/* Saves t for backward (retained; its version recorded).  Returns the slot. */
int tg__ctx_save(tg_ctx *ctx, tg_tensor *t);
/* The i-th saved tensor (borrowed) after checking its version:
 * TG_EINPLACE with a message naming the op when it was modified in place,
 * TG_EGRAD when the graph was already freed. */
int tg__ctx_saved(tg_ctx *ctx, int i, tg_tensor **t);
/* For a saved output y of the op itself (saved as a detached alias: saving y
 * would make the cycle y -> node -> y): a new reference to y, after the same
 * checks as tg__ctx_saved.  In grad mode (a create_graph backward) it is an
 * alias whose grad_fn is ctx, as y's own was, so that gradients of the
 * backward's result reach the input through this op again; the caller
 * releases it, so no cycle outlives the call. */
int tg__ctx_saved_output(tg_ctx *ctx, int i, tg_tensor **t);
static inline const void *tg__ctx_params(const tg_ctx *ctx) { return ctx->params; }
static inline bool tg__ctx_needs_grad(const tg_ctx *ctx, int i) { return ctx->needs_grad[i]; }
static inline const tg_meta *tg__ctx_input_meta(const tg_ctx *ctx, int i) { return &ctx->in_meta[i]; }

/* True when TG_TRACE=1 (read once). */
bool tg__trace_enabled(void);

/* Each op family registers its schemas in one function, called by the
 * registry's build (src/ops/registry.c). */
void tg__register_binary(void);      /* binary.c: add sub mul div pow + scalar variants */
void tg__register_unary(void);       /* unary.c: neg exp log sqrt abs pow_scalar erf */
void tg__register_activation(void);  /* activation.c: relu leaky_relu tanh sigmoid silu gelu */
void tg__register_cast(void);        /* cast.c: to_dtype */
void tg__register_reduce(void);      /* reduce.c: sum mean sum_dims mean_dims sum_to_shape */
/* Sum of an integer tensor a into a new int64 tensor (ndim, shape), exact
 * and wrapping as torch's; ostride as in reduce.c (0 for a reduced dim,
 * else the output's contiguous stride).  src/ops/reduce_int.c. */
int tg__reduce_int(tg_tensor **out, const tg_tensor *a, int ndim, const int64_t *shape,
                   const int64_t *ostride);
/* Sum of a float tensor a into a new tensor (ndim, shape) of a's dtype,
 * times scale; ostride as for tg__reduce_int.  src/ops/reduce_float.c. */
int tg__reduce_float(tg_tensor **out, const tg_tensor *a, int ndim, const int64_t *shape,
                     const int64_t *ostride, double scale);
/* One step of the reductions' row-major walk over a: advances the counter
 * idx (a->ndim entries, all 0 at the start) and returns the output index o
 * moved with it, ostride[d] being o's step along dim d (reduce_float.c,
 * reduce_int.c). */
static inline int64_t tg__reduce_next(const tg_tensor *a, const int64_t *ostride, int64_t *idx,
                                      int64_t o)
{
    for (int d = a->ndim - 1; d >= 0; d--) {
        o += ostride[d];
        if (++idx[d] < a->shape[d]) break;
        o -= ostride[d] * a->shape[d];
        idx[d] = 0;
    }
    return o;
}
void tg__register_shape(void);       /* shape.c: reshape permute slice expand cat contiguous ... */
void tg__register_linalg(void);      /* linalg.c: matmul linear */
void tg__register_conv(void);        /* conv.c: conv conv_transpose conv_weight_grad */
void tg__register_norm(void);        /* norm.c: batch_norm */
void tg__register_loss(void);        /* nn/loss.c: bce_logits, ce_pick */
void tg__register_quant(void);       /* quant/fake_quantize.c: fake_quantize */

/* Tests: false makes batch_norm on this thread take its per-channel loops
 * for rows shorter than 16 values too, instead of blocks of channels (true,
 * the default, restores). */
void tg__bn_set_blocks(bool on);

/* ---- elementwise helpers (src/ops/elementwise.c) -------------------------- */

/* The broadcast shape of a and b (NumPy rules: align trailing dims, an extent
 * of 1 stretches) into *ndim_out / shape_out.  TG_ESHAPE naming op, both
 * shapes and the first clashing output dim otherwise. */
int tg__broadcast_shapes(const char *op, int ndim_a, const int64_t *shape_a, int ndim_b,
                         const int64_t *shape_b, int *ndim_out, int64_t *shape_out);
/* TG_EINVAL if t is NULL, TG_EDTYPE if its dtype is not float; i numbers the
 * input in the message ("mul: input 1 has dtype i32; float dtypes only"). */
int tg__ew_check_float(const char *op, int i, const tg_tensor *t);

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
/* Same for one input (the kernel sees b == NULL). */
int tg__ew_unary(const char *op, tg_tensor **out, const tg_tensor *a, tg_ew_kernel_fn k,
                 double s);
/* A Python-number operand s as torch uses it with a tensor of dtype dt:
 * converted to dt (f16/bf16 through f32), returned as a double; f64 and
 * other dtypes keep s (src/ops/binary.c). */
double tg__scalar_in_dtype(tg_dtype dt, double s);

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

/* ---- atomic file replacement (src/io/atomic.c; used by every writer) ---- */
/* Creates and opens for writing a new temporary file "<path>.tmp.XXXXXX"
 * next to path; *tmp (malloc'd) gets its name.  TG_EIO naming `what`. */
int tg__atomic_open(FILE **f, char **tmp, const char *what, const char *path);
/* Flushes, fsyncs and closes f, then renames *tmp over path.  Always closes f,
 * removes the temporary file on failure and frees *tmp (set to NULL);
 * ok = false just discards (returns 0).  On success the folder is fsynced
 * too, so the rename is durable. */
int tg__atomic_finish(FILE *f, char **tmp, bool ok, const char *what, const char *path);

/* ---- autocast state (thread-local) --------------------------------------- */
bool tg__autocast_dtype(tg_dtype *dt);
/* Turns autocast off (true) or back on for this thread regardless of the
 * scopes; returns the previous setting.  The backward engine suspends it. */
bool tg__autocast_suspend(bool suspend);

#endif
