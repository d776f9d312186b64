/* tapegrad/dist.h - data-parallel training over MPI.
 *
 * Every process (rank) holds the whole model, trains on its own slice of
 * each batch, and averages the gradients with the others before each
 * optimizer step, so all ranks take the same step, the step a single process
 * would take on the whole batch (on a sharded loader's last, partial batch,
 * which tg_loader_set_shard pads with repeated samples so that the ranks'
 * slices are equal, the whole batch with that padding).  The transport is
 * MPI (Open MPI): start the
 * program with `mpirun -np N prog`.
 *
 *   tg_dist *d;  tg_ddp *ddp;
 *   tg_dist_init(&d, &argc, &argv);                  // MPI_Init, rank, size
 *   tg_ddp_new_module(&ddp, d, model, NULL);         // rank 0's weights everywhere;
 *                                                    // 25 MB buckets, overlapped
 *   tg_loader_set_shard(ld, tg_dist_rank(d), tg_dist_size(d));
 *   while (tg_loader_next(ld, &x, &y) == 1) {
 *       ... forward, loss ...
 *       tg_optimizer_zero_grad(opt);
 *       tg_ddp_prepare(ddp);                         // the next backward reduces
 *       tg_backward(loss, NULL, NULL);               // buckets reduced meanwhile
 *       tg_ddp_finish(ddp);                          // .grad = mean over ranks;
 *                                                    // rank 0's buffers everywhere
 *       tg_optimizer_step(opt);
 *   }
 *   tg_dist_checkpoint_save(d, ck, "ck.safetensors", NULL);   // rank 0 writes
 *   tg_ddp_free(ddp); tg_dist_free(d);               // MPI_Finalize (the last
 *                                                    // tg_dist alive)
 *
 * Gradient reduction (as PyTorch's DistributedDataParallel): the parameters
 * are grouped, in reverse order (the order their gradients become final in
 * backward), into buckets of at most bucket_cap_bytes, one dtype per
 * bucket.  A post-accumulate hook on each parameter copies its finished
 * gradient into its bucket; when a bucket is complete, and every bucket
 * before it has been started, it is all-reduced with MPI_Iallreduce while the
 * backward goes on (each hook call also drives MPI's progress with MPI_Test).
 * Buckets are started in the same order on every rank.  tg_ddp_finish waits
 * for them and writes sum / world_size into every parameter's .grad.
 *
 * Buffers (PyTorch's broadcast_buffers=True, the default): a tg_ddp made
 * from a module ends each tg_ddp_finish by copying rank 0's buffers of the
 * module (BatchNorm's running statistics) into every rank.  So every
 * forward starts from rank 0's buffers, as PyTorch's DDP makes it by
 * copying them at the start of each forward, and the ranks hold the same
 * buffers after each step.
 *
 * Collective calls: every function that takes a tg_dist and is marked
 * "collective" must be called by every rank, in the same order.  Its
 * errors are collective: a bad argument or a failure on one rank (a NULL
 * out, a tensor whose shape differs from the other ranks', no memory) is
 * returned by every rank, with that rank's message prefixed "rank R: ", and
 * changes nothing on any rank; no rank is left waiting for a message the
 * failing one never sends.  Local errors, on the calling rank alone: a NULL
 * d (or mpi_comm), MPI unusable in this process (finalized, or no MPI_Init
 * for tg_dist_init_comm), and TG_EIO from MPI itself, after which the job
 * cannot go on.  An error of the caller's own code on one rank (a file that
 * is missing there) is returned on that rank only; tg_dist_agree turns it
 * into the same error on every rank.  A call that one rank never makes (an
 * early return before it, training mode on one rank and eval on another)
 * still leaves the others waiting: see tg_dist_agree, tg_ddp_cancel.
 *
 * Built without MPI (meson option mpi=disabled, or libopenmpi-dev absent),
 * tg_dist_available() is false and every function here returns
 * TG_EUNSUPPORTED except tg_zero_partition and tg_loader_set_shard
 * (data.h), which need no MPI (tg_dist_rank, tg_dist_size and the
 * tg_zero getters give their values for NULL).
 *
 * Ownership: a tg_dist and a tg_ddp are owned by their creator (_free; NULL
 * does nothing).  A tg_ddp borrows its tg_dist and retains its parameters
 * (and its module).
 */
#ifndef TAPEGRAD_DIST_H
#define TAPEGRAD_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tapegrad/checkpoint.h"
#include "tapegrad/export.h"
#include "tapegrad/nn.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_dist tg_dist;

/* Whether this build of the library has MPI. */
TG_API bool tg_dist_available(void);

/* Joins the MPI job the program was started in: MPI_Init_thread
 * (MPI_THREAD_FUNNELED: only the thread that called it talks to MPI) unless
 * MPI is already initialised, then a duplicate of MPI_COMM_WORLD.  argc/argv
 * may be NULL.  Started without mpirun, the job is one rank.  Collective:
 * an out NULL or no memory on one rank is that error on every rank, which
 * then holds no tg_dist.
 *
 * Who finalizes MPI: when tapegrad started it (a tg_dist_init with MPI not
 * yet initialised), the tg_dist_free of the last tg_dist alive calls
 * MPI_Finalize.  A tg_dist_init that fails leaves MPI running, so the
 * program may call it again (a call that succeeds joins the running MPI and
 * takes over the finalize), or give up: if the process exits (returns from
 * main or calls exit, from the thread that called tg_dist_init) while
 * tapegrad still owes the MPI_Finalize, a handler it registered with atexit
 * calls it, since mpirun ends the whole job as abnormally terminated when a
 * rank exits without it.  When the program initialised MPI itself, it
 * finalizes it too. */
TG_API int tg_dist_init(tg_dist **out, int *argc, char ***argv);
/* The same over a communicator the program made (MPI already initialised):
 * mpi_comm points at an MPI_Comm (borrowed; it is duplicated).  Collective
 * over that communicator. */
TG_API int tg_dist_init_comm(tg_dist **out, const void *mpi_comm);
/* Frees the duplicate communicator; the last tg_dist alive also calls
 * MPI_Finalize when tg_dist_init initialised MPI (and the program has not
 * finalized it).  Collective. */
TG_API void tg_dist_free(tg_dist *d);

/* This process's rank in [0, size) and the number of ranks; 0 and 1 for
 * NULL. */
TG_API int tg_dist_rank(const tg_dist *d);
TG_API int tg_dist_size(const tg_dist *d);

/* Collective.  Returns when every rank has called it. */
TG_API int tg_dist_barrier(tg_dist *d);

/* Every rank passes its own status; all return the same one: TG_OK when
 * every status was >= 0, else the most negative status, with the message of
 * the lowest rank that had it, prefixed "rank R: " (a message that begins
 * so already, from an earlier agreement, is kept as it is).  Collective.  Use it
 * after work that can fail on one rank only, so that no rank goes on to a
 * collective call the failing one never makes (which would hang). */
TG_API int tg_dist_agree(tg_dist *d, int status);

/* Prints "rank R: <message of status>" to stderr and ends every rank of the
 * job (MPI_Abort with exit code 1).  For an error in the middle of a step,
 * where the other ranks are blocked in a collective call and tg_dist_agree
 * cannot be reached.  Does not return. */
TG_API void tg_dist_abort(tg_dist *d, int status);

/* Copies rank 0's parameters and buffers of m into every rank's m (in
 * state-dict order; the data are sent as bytes).  Every rank's m must have
 * the same entries with the same shapes and dtypes: otherwise TG_ESHAPE on
 * every rank, and nothing is changed; m NULL or an entry that is not
 * contiguous is TG_EINVAL, on every rank.  Collective. */
TG_API int tg_dist_broadcast_module(tg_dist *d, tg_module *m);
/* dist.broadcast(t, src=root): copies root's t into every rank's t (same
 * root, shape and dtype on each: TG_EINVAL otherwise, on every rank).  Any
 * dtype; t may be strided (staged through a contiguous copy) but not
 * expanded, as the collectives below.  Collective. */
TG_API int tg_dist_broadcast_tensor(tg_dist *d, tg_tensor *t, int root);
/* t = sum over ranks of t, in place (f32, f64 or i64, contiguous; the
 * same shape and dtype on every rank: TG_ESHAPE / TG_EDTYPE otherwise, on
 * every rank, with t unchanged).  Collective. */
TG_API int tg_dist_allreduce_sum(tg_dist *d, tg_tensor *t);

/* ---- collectives on tensors (torch.distributed) ---------------------------
 *
 * Each is collective over d and checks its arguments as the calls above:
 * a NULL tensor, a dtype, a root or a shape refused on one rank is the same
 * error on every rank (TG_EINVAL / TG_EDTYPE / TG_ESHAPE, "rank R: ..."),
 * and then nothing is changed anywhere.  Every dtype is taken (f32, f64,
 * f16, bf16, i8, u8, i32, i64); f16 and bf16 travel as their 16-bit
 * patterns (MPI has no half type) and are reduced by an MPI_Op of
 * tapegrad's that widens each pair to f32, combines it and rounds back to
 * nearest even, as torch's Half and BFloat16 arithmetic does.  Inputs may
 * be non-contiguous (they are copied first); outputs and in-place tensors
 * may be non-contiguous views too, but not expanded (a stride 0 on an
 * extent > 1: TG_EINVAL).  At most 2^31 - 1 elements per tensor (MPI's
 * counts are int).  Sparse tensors are refused.  Tensors are borrowed; the
 * results are written into the caller's tensors, whose versions are
 * bumped. */

/* torch.distributed.ReduceOp.  AVG as NCCL computes it (torch's only
 * backend with AVG): a float value is multiplied by 1 / world_size (that
 * factor and the product rounded to the dtype) and the products summed; an
 * integer sum is divided by world_size, truncated toward zero.  MIN and MAX
 * compare as MPI's own do: with a NaN among the values, the result depends
 * on the order the ranks' values meet in (NaN is not reliably
 * propagated). */
typedef enum tg_reduce_op {
    TG_REDUCE_SUM = 0,
    TG_REDUCE_AVG,
    TG_REDUCE_PRODUCT,
    TG_REDUCE_MIN,
    TG_REDUCE_MAX,
    TG_REDUCE_OP_COUNT
} tg_reduce_op;

/* dist.all_reduce(t, op): t = op over the ranks' t, in place.  Same shape
 * and dtype on every rank (TG_ESHAPE / TG_EDTYPE), the same op (TG_EINVAL).
 * Collective. */
TG_API int tg_dist_allreduce(tg_dist *d, tg_tensor *t, tg_reduce_op op);
/* dist.all_gather(outs, t): outs[r] = rank r's t, for r in [0, size).
 * outs has tg_dist_size(d) tensors (borrowed, written in place) of t's
 * shape and dtype; t has the same shape and dtype on every rank.
 * Collective. */
TG_API int tg_dist_all_gather(tg_dist *d, tg_tensor *const *outs, const tg_tensor *t);
/* dist.all_gather_into_tensor(out, t): the ranks' t concatenated along
 * dim 0 into out, whose shape is t's with dim 0 times size, or stacked:
 * (size, *t.shape) (a 0-d t: (size)).  Collective. */
TG_API int tg_dist_all_gather_into_tensor(tg_dist *d, tg_tensor *out, const tg_tensor *t);
/* dist.reduce_scatter_tensor(out, in, op): in (borrowed) is size blocks
 * along dim 0, laid out as all_gather_into_tensor's out (concatenated or
 * stacked); out = op over the ranks of their block number rank.
 * Collective. */
TG_API int tg_dist_reduce_scatter_tensor(tg_dist *d, tg_tensor *out, const tg_tensor *in,
                                         tg_reduce_op op);
/* dist.all_to_all_single(out, in) with equal splits: in's and out's dim 0
 * are size blocks; block j of rank i's in becomes block i of rank j's out.
 * out has in's shape and dtype; dim 0 a multiple of size (TG_ESHAPE).
 * Collective. */
TG_API int tg_dist_all_to_all_single(tg_dist *d, tg_tensor *out, const tg_tensor *in);
/* dist.gather(t, gather_list, dst=root): root receives every rank's t:
 * gather_list[r] = rank r's t (size tensors of t's shape and dtype, on root
 * only; the others pass NULL, and theirs is not read).  Collective. */
TG_API int tg_dist_gather(tg_dist *d, const tg_tensor *t, tg_tensor *const *gather_list,
                          int root);
/* dist.scatter(t, scatter_list, src=root): every rank's t = root's
 * scatter_list[rank] (size tensors of t's shape and dtype, on root only).
 * Collective. */
TG_API int tg_dist_scatter(tg_dist *d, tg_tensor *t, tg_tensor *const *scatter_list, int root);
/* dist.send(t, dst, tag) / dist.recv(t, src, tag): point to point, not
 * collective: the two ranks make matching calls (same tag).  The sender's
 * dtype and shape travel first; recv returns TG_ESHAPE / TG_EDTYPE when
 * they are not its t's (the message is consumed and t left unchanged; the
 * sender has returned TG_OK).  TG_EINVAL, on the calling rank, for dst or
 * src out of range or the rank itself, a tag < 0 or above MPI's limit
 * (at least 32767).  send returns once t may be changed (MPI_Send);
 * recv waits for the message. */
TG_API int tg_dist_send(tg_dist *d, const tg_tensor *t, int dst, int tag);
TG_API int tg_dist_recv(tg_dist *d, tg_tensor *t, int src, int tag);

/* Rank 0 saves ck to path (tg_checkpoint_save); the others write nothing.
 * Every rank returns rank 0's status (and message).  Collective. */
TG_API int tg_dist_checkpoint_save(tg_dist *d, const tg_checkpoint *ck, const char *path,
                                   const tg_st_file *extra);

/* ---- synchronised BatchNorm -------------------------------------------- */

/* BatchNorm over dim 1 of (N, C, ...) float input whose batch statistics,
 * in training, are those of the whole job's batch (torch.nn.SyncBatchNorm):
 * each forward all-reduces the per-channel sums of x and x^2, and the
 * backward all-reduces their gradients, so every rank gets the output and
 * gradients one BatchNorm over the concatenated batch would give (within
 * f32 rounding).  Dtypes as tg_nn_batchnorm_new's: an f16/bf16 input is
 * computed on in f32 and gives an output of its own dtype inside an
 * autocast scope, f32 outside one.  In eval it uses the running statistics,
 * which every rank updates alike.  Affine, with running statistics; momentum in [0, 1].  The
 * state dict has BatchNorm's names (weight, bias, running_mean, running_var,
 * num_batches_tracked), so it loads from and into tg_nn_batchnorm_new's.
 * A plain BatchNorm (tg_nn_batchnorm_new) under data parallelism uses each
 * rank's own batch statistics, which is the default.  Training forward and
 * backward are collective: every rank must run them, in the same order.  An
 * input refused on one rank (its shape or dtype) is the same error on every
 * rank's forward, as is a batch of at most one value per channel over all
 * ranks (TG_EINVAL, as BatchNorm's rule); the running statistics are not
 * changed then.  The all-reduces carry a failure flag: a rank whose
 * all-reduce step fails (no memory for its result) still takes part, and
 * every rank's forward, or backward, returns its error; a rank without
 * memory for the message itself ends the job (tg_dist_abort, saying why).
 * What no rank can be told of: an error elsewhere in a backward on one rank
 * (an op or hook that runs before the all-reduce) stops that rank's
 * backward, and the others wait in the all-reduce: end the job with
 * tg_dist_abort when tg_backward fails on a graph with a SyncBatchNorm.
 * And an eval forward makes no collective call (one rank alone may run
 * inference), so a rank in eval while the others train leaves them waiting
 * in the training forward, undetected: set the mode on every rank alike.
 * d is borrowed and must outlive the module. */
TG_API int tg_dist_sync_batchnorm_new(tg_module **out, tg_dist *d, int64_t num_features,
                                      double eps, double momentum);
/* What a SyncBatchNorm was made with (a converted one: its BatchNorm's),
 * for code that walks a model (an exporter).  Out-pointers may be NULL;
 * TG_EINVAL for a NULL m or, naming its type, another module (every
 * module, in a library built without MPI). */
TG_API int tg_dist_sync_batchnorm_params(const tg_module *m, double *eps, double *momentum);

/* Replaces every BatchNorm (tg_nn_batchnorm_new) below m by a SyncBatchNorm
 * over d that shares its tensors (weight, bias, running statistics, count:
 * the same tensor objects, so an optimizer made before keeps working), eps,
 * momentum, training mode and autocast flag, under the same name
 * (torch.nn.SyncBatchNorm.convert_sync_batchnorm).  So a model is built and
 * initialised as for one process (tg_nn_init_normal knows BatchNorm), then
 * converted.  *n_converted (may be NULL) receives the count.  Each BatchNorm
 * must be affine with running statistics, momentum in [0, 1] and f32 state:
 * TG_EINVAL / TG_EDTYPE naming the first that is not, and nothing is
 * changed.  m itself must not be a BatchNorm (TG_EINVAL: convert the module
 * holding it).  Not collective (no messages); d is borrowed and must outlive
 * m. */
TG_API int tg_dist_convert_sync_batchnorm(tg_dist *d, tg_module *m, int *n_converted);

/* ---- gradient averaging ------------------------------------------------- */

typedef struct tg_ddp tg_ddp;

typedef struct tg_ddp_opts {
    size_t bucket_cap_bytes;   /* a bucket closes before it would exceed this (a
                                * parameter larger than the cap gets a bucket of
                                * its own); 1 gives one bucket per parameter */
    bool overlap;              /* start each bucket's all-reduce during backward;
                                * false: all of them in tg_ddp_finish */
    bool broadcast_buffers;    /* tg_ddp_new_module: tg_ddp_finish copies rank 0's
                                * buffers of the module into every rank (PyTorch's
                                * broadcast_buffers); no effect on tg_ddp_new */
    tg_dtype compress;         /* the dtype gradients travel in: TG_F32 (0), no
                                * compression; TG_BF16 or TG_F16: PyTorch's
                                * bf16_compress_hook / fp16_compress_hook (each
                                * bucket divided by the number of ranks, rounded
                                * to the half dtype, summed in it, widened into
                                * .grad; f32 and f64 parameters, an f64 bucket
                                * divided in f64 and rounded through f32) */
} tg_ddp_opts;
#define TG_DDP_OPTS_INIT                                                      \
    {.bucket_cap_bytes = (size_t)25 << 20, .overlap = true, .broadcast_buffers = true, \
     .compress = TG_F32}

/* Averages the gradients of params[0..n) (f32 or f64 leaves that require
 * grad, distinct, contiguous; retained) over the ranks of d.  Every rank
 * must pass the same list (same count, shapes and dtypes, in the same
 * order), the same bucket_cap_bytes and the same compress: checked,
 * TG_EINVAL on every rank otherwise.  o NULL: the defaults.  TG_EINVAL
 * when o->compress is not TG_F32, TG_BF16 or TG_F16.  Registers a
 * post-accumulate hook on each parameter (removed by tg_ddp_free).
 * Collective: an error on any rank (a bad argument, no memory) is returned
 * by every rank, and no rank makes a tg_ddp. */
TG_API int tg_ddp_new(tg_ddp **out, tg_dist *d, int n, tg_tensor *const *params,
                      const tg_ddp_opts *o);
/* torch.nn.parallel.DistributedDataParallel(m): copies rank 0's parameters
 * and buffers of m into every rank (tg_dist_broadcast_module, so the ranks'
 * m must have the same layout), then averages the gradients of m's
 * parameters that require grad (tg_module_parameters' order) as tg_ddp_new;
 * with o->broadcast_buffers (the default) every tg_ddp_finish ends by
 * copying rank 0's buffers of m into every rank (broadcast_buffers must be
 * the same on every rank).  m is retained; its parameters and buffers must
 * keep their shapes and dtypes while the tg_ddp lives.  TG_EINVAL on every
 * rank when m has no parameter that requires grad.  Collective: every
 * check (tg_ddp_new's too) is made, and agreed on, before the copy, so on
 * error no rank's m is changed. */
TG_API int tg_ddp_new_module(tg_ddp **out, tg_dist *d, tg_module *m, const tg_ddp_opts *o);
/* Removes the hooks, releases the parameters.  NULL does nothing.  Between
 * tg_ddp_prepare and tg_ddp_finish it first ends the step as
 * tg_ddp_cancel(ddp, TG_EINVAL) does (collective then: the other ranks'
 * tg_ddp_finish of the step returns TG_EINVAL "rank R: ddp_free: ..."
 * rather than waiting for this rank); the caller's error message is kept. */
TG_API void tg_ddp_free(tg_ddp *ddp);

/* Arms the hooks for the next backward: the gradients it finishes are sent
 * off.  Backward passes without prepare reduce nothing (a GAN's generator
 * step through the discriminator, say).  TG_EINVAL if the previous prepare
 * was not finished. */
TG_API int tg_ddp_prepare(tg_ddp *ddp);
/* Waits for every bucket (starting those the backward left unstarted, in
 * order; a parameter that received no gradient in this rank's backward
 * contributes its current .grad, or zeros without one), then sets the
 * .grad of every parameter that some rank's backward reached to the sum
 * over ranks divided by the number of ranks; a parameter no rank's backward
 * reached keeps its .grad (NULL after tg_optimizer_zero_grad, so the
 * optimizer leaves it alone: PyTorch's DDP with find_unused_parameters).
 * Then it copies rank 0's buffers into every rank (tg_ddp_new_module with
 * broadcast_buffers).  Collective: every rank must have called
 * tg_ddp_prepare and run its backward.  An error of the step on any rank
 * (no tg_ddp_prepare there, no memory for a .grad, a parameter whose dtype
 * or shape changed, or a rank's tg_ddp_cancel or tg_ddp_free) is returned
 * by every rank, with no .grad or buffer changed anywhere.  An MPI error is
 * TG_EIO. */
TG_API int tg_ddp_finish(tg_ddp *ddp);
/* Ends the step begun by tg_ddp_prepare without changing any .grad, on a
 * rank whose forward or backward failed: it makes the step's remaining
 * collective calls as tg_ddp_finish would, so that every rank's
 * tg_ddp_finish (or tg_ddp_cancel) of this step returns this rank's status
 * and message ("rank R: ...") instead of waiting for it.  Call it in place
 * of tg_ddp_finish with the failure's status (negative; TG_EINVAL
 * otherwise).  Returns the status every rank returns.  Collective. */
TG_API int tg_ddp_cancel(tg_ddp *ddp, int status);

/* Counters since tg_ddp_new. */
typedef struct tg_ddp_stats {
    int n_buckets;
    int64_t bytes_per_step;     /* gradient bytes each rank sends into the reduction */
    int64_t steps;              /* finished reductions */
    int64_t buckets_overlapped; /* buckets started during backward */
    double finish_seconds;      /* total time spent inside tg_ddp_finish: the part of
                                 * the reduction not hidden behind backward, and
                                 * the buffers' broadcast (tg_ddp_new_module) */
} tg_ddp_stats;
TG_API int tg_ddp_get_stats(const tg_ddp *ddp, tg_ddp_stats *s);

/* ---- ZeroRedundancyOptimizer (torch.distributed.optim) ------------------
 *
 * Shards an optimizer's state over the ranks (ZeRO stage 1): every rank
 * holds every parameter, but each parameter is owned by one rank, which
 * alone keeps its optimizer state and updates it; after each step the
 * owners broadcast the updated parameters.  The parameters are partitioned
 * as torch 1.13's _partition_parameters does: sorted by number of elements,
 * largest first (equal sizes keep their order), each goes to the rank with
 * the fewest elements so far (the lowest such rank on a tie); with param
 * groups, group by group (tg_zero_new_groups).  The usual loop, with DDP
 * averaging the gradients:
 *
 *   static int make_adam(tg_optimizer **out, int n, tg_tensor *const *p,
 *                        const void *opts) { return tg_adam_new(out, n, p, opts); }
 *   tg_adam_opts o = TG_ADAM_OPTS_INIT;
 *   tg_zero_new(&zero, d, n, params, make_adam, &o);
 *   for (...) {
 *       tg_zero_zero_grad(zero);
 *       tg_ddp_prepare(ddp); ... backward ...; tg_ddp_finish(ddp);
 *       tg_zero_step(zero);     // the parameters as a tg_adam_new over all of
 *   }                           // them would leave them, bit for bit
 *
 * Ownership: a tg_zero is owned by its creator (tg_zero_free; NULL does
 * nothing).  It borrows d (which must outlive it) and retains the
 * parameters; it owns its rank's optimizer. */
typedef struct tg_zero tg_zero;

/* Makes the optimizer of one rank's partition: *out a new optimizer over
 * params[0..n) with options opts, as tg_adam_new and the other
 * constructors of optim.h (torch's optimizer_class and **defaults).  n is
 * 0 on a rank that owns none of the first group's parameters: the
 * optimizer's group 0 is then empty, as torch's. */
typedef int (*tg_zero_make_fn)(tg_optimizer **out, int n, tg_tensor *const *params,
                               const void *opts);

/* Adds a param group to an optimizer that make made: params[0..n) with
 * options opts, as tg_adam_add_param_group and the others of optim.h (n 0:
 * an empty group). */
typedef int (*tg_zero_add_fn)(tg_optimizer *opt, int n, tg_tensor *const *params,
                              const void *opts);

/* One param group of tg_zero_new_groups (torch's {"params": ..., **opts}):
 * params[0..n) (n >= 1, borrowed) with opts, make's and add's options
 * struct (tg_adam_opts for tg_adam_new and tg_adam_add_param_group). */
typedef struct tg_zero_group {
    int n;
    tg_tensor *const *params;
    const void *opts;
} tg_zero_group;

/* The partition alone: owner[i] = the rank of parameter i of numel[0..n)
 * elements among world ranks, by the rule above.  TG_EINVAL for NULL
 * arrays, n < 0, world < 1 or a negative numel.  Not collective; no MPI
 * needed (also in a build without it). */
TG_API int tg_zero_partition(int *owner, int n, const int64_t *numel, int world);
/* The partition of n_groups param groups, group g the next n_params[g]
 * parameters of numel (so numel has their sum): torch 1.13's rule group
 * by group, each group sorted by numel alone, the ranks' totals carried
 * on from one group to the next.  tg_zero_partition's errors, and
 * TG_EINVAL for n_groups < 0 or a negative n_params[g]. */
TG_API int tg_zero_partition_groups(int *owner, int n_groups, const int *n_params,
                                    const int64_t *numel, int world);

/* torch.distributed.optim.ZeroRedundancyOptimizer(params, optimizer_class,
 * **defaults): partitions params[0..n) (float leaves, distinct,
 * contiguous, keeping their shapes and dtypes while z lives; retained)
 * over d's ranks and calls make(opts) with this rank's parameters,
 * largest first as torch orders them (n 0 and an empty list for a rank
 * that owns none: every rank has an optimizer).  The optimizer must have
 * one param group.
 * Every rank passes the same list (count, shapes and dtypes in order;
 * TG_EINVAL otherwise).  Collective: an error on any rank (a bad argument,
 * make's error, no memory) is returned by every rank, and no rank keeps a
 * tg_zero. */
TG_API int tg_zero_new(tg_zero **out, tg_dist *d, int n, tg_tensor *const *params,
                       tg_zero_make_fn make, const void *opts);
/* ZeroRedundancyOptimizer([{"params": ..., **opts}, ...], optimizer_class):
 * tg_zero_new over the param groups groups[0..n_groups) (n_groups >= 1),
 * the parameters numbered on across the groups (group 0's first).  The
 * partition is tg_zero_partition_groups'; this rank's optimizer has a
 * group for each group, its share of it largest first (empty when it owns
 * none of it), made by make with group 0's opts and add with the others',
 * each with its group's hyperparameters (tg_zero_optimizer).  add may be NULL
 * for one group.  tg_zero_new's errors, make's and add's (an add of
 * another family: TG_EINVAL), and TG_EINVAL for a group of n < 1 or a
 * different group layout on some rank.  Collective. */
TG_API int tg_zero_new_groups(tg_zero **out, tg_dist *d, int n_groups,
                              const tg_zero_group *groups, tg_zero_make_fn make,
                              tg_zero_add_fn add);
/* zero.add_param_group({"params": params, **opts}): appends params[0..n)
 * as the next param group (its parameters numbered on), partitioned as
 * torch does, the earlier parameters keeping their owners; each rank adds
 * its share of it (possibly empty) to its optimizer with add.  Add the groups before
 * making a learning-rate scheduler.  Every rank passes the same list and
 * the same add.  tg_zero_new_groups' errors and TG_EINVAL for a parameter
 * already in z; an error on any rank is every rank's, with nothing
 * changed, except TG_ENOMEM while adding, after which z only frees.
 * Collective. */
TG_API int tg_zero_add_param_group(tg_zero *z, tg_zero_add_fn add, int n,
                                   tg_tensor *const *params, const void *opts);
/* Frees z and its optimizers, releases the parameters.  Not collective. */
TG_API void tg_zero_free(tg_zero *z);

/* torch's zero.param_groups: an optimizer over every parameter, with
 * every param group's hyperparameters and no state (borrowed).  Give it to
 * a learning-rate scheduler (lr_scheduler.h), or set its group options,
 * alike on every rank: each tg_zero_step first copies each group's
 * hyperparameters to this rank's optimizer (torch's _sync_param_groups;
 * tg_optimizer_copy_group_options).  Never step it, nor save its state
 * (tg_zero_consolidate_state_dict saves the whole).  NULL for NULL z. */
TG_API tg_optimizer *tg_zero_optimizer(const tg_zero *z);

/* zero.step(): this rank's optimizer takes tg_zero_optimizer's
 * hyperparameters, then steps its parameters (those with a
 * .grad; the gradients must be the same on every rank, as DDP leaves
 * them), then every parameter is broadcast from its owner.  The gradients
 * of this rank's parameters are checked first (float, the parameter's
 * shape): an error on any rank is every rank's, before any parameter
 * changes.  An error of a rank's optimizer step itself (tg_optimizer_step's:
 * a sparse gradient the kind refuses, no memory) is every rank's too, but
 * the ranks whose step succeeded have updated their own parameters by then;
 * nothing is broadcast.  Collective. */
TG_API int tg_zero_step(tg_zero *z);
/* zero.step(closure): closure(user, &loss) once on every rank, with grad
 * mode on (it typically zeroes the gradients, runs the forward and, under
 * DDP, the backward), then tg_zero_step.  *loss (may be NULL): this rank's
 * loss, torch's return value.  A closure's negative status on any rank
 * ends the step on every rank with it (no parameter changes); TG_EINVAL
 * for a NULL closure.  A local L-BFGS is refused as by tg_zero_step.
 * Collective. */
TG_API int tg_zero_step_closure(tg_zero *z, tg_closure_fn closure, void *user, double *loss);
/* Releases the .grad of every parameter (not only this rank's), as
 * tg_optimizer_zero_grad.  NULL does nothing. */
TG_API void tg_zero_zero_grad(tg_zero *z);
/* Learning rate of every param group (tg_zero_optimizer's, and this
 * rank's optimizer's); set it on every rank alike;
 * tg_optimizer_set_lr's rules. */
TG_API int tg_zero_set_lr(tg_zero *z, double lr);

/* torch's parameters_as_bucket_view=True (on) or False (the default):
 * with on, the parameters that one rank owns of one dtype become views
 * into one flat buffer of that (rank, dtype), back to back (group by group,
 * each in the order of that rank's optimizer), so the broadcast after each
 * step is one message per (rank, dtype) with parameters instead of one per
 * parameter; the steps' results are the same, bit for bit.  The user's
 * tensors stay valid and keep their values, .grad and hooks, but their
 * storage changes (torch's `param.data = bucket view`): a data pointer
 * taken before (tg_tensor_data) is stale, and a graph that saved a
 * parameter before the call refuses it in backward.  tg_zero_add_param_group
 * rebuilds the buckets (the pointers move again).  A parameter whose data
 * is replaced afterwards (tg_module_to_dtype) is refused by tg_zero_step
 * (TG_EINVAL) until this is called again.  off gives each parameter its own
 * storage again (a copy).  Every rank passes the same on (TG_EINVAL
 * otherwise); an error on any rank (no memory) is every rank's, with
 * nothing changed.  Collective. */
TG_API int tg_zero_set_bucket_view(tg_zero *z, bool on);
/* Whether z's parameters are bucket views; false for NULL. */
TG_API bool tg_zero_bucket_view(const tg_zero *z);

/* The rank that owns parameter i, -1 for i out of range or NULL z. */
TG_API int tg_zero_owner(const tg_zero *z, int i);
/* This rank's optimizer (borrowed; NULL for NULL z): its state is that of
 * this rank's parameters only, numbered in its own order
 * (tg_zero_local_index).  It has every param group of z, in z's order, as
 * torch's local optimizer: group g holds this rank's share of group g, an
 * empty group when the rank owns none of it (so group indices, options and
 * schedulers agree on every rank). */
TG_API tg_optimizer *tg_zero_local(const tg_zero *z);
/* Parameter i's index in tg_zero_local's optimizer, -1 when another rank
 * owns it (or i is out of range). */
TG_API int tg_zero_local_index(const tg_zero *z, int i);
/* torch's zero._partition_parameters()[rank][group]["params"]: *idx a new
 * array (free it with free; NULL when *n is 0) of the *n parameters of
 * param group `group` that `rank` owns, as indices into tg_zero_new's list
 * (numbered on across the groups), in the order of that group of rank's
 * optimizer (largest first, equal sizes in list order).  TG_EINVAL for
 * NULL arguments, rank outside [0, world) or a group z does not have; on
 * error *idx and *n are not touched.  Not collective. */
TG_API int tg_zero_rank_params(int **idx, int *n, const tg_zero *z, int rank, int group);
/* The number of tg_zero_step calls that succeeded. */
TG_API int64_t tg_zero_steps(const tg_zero *z);

/* consolidate_state_dict(to) then state_dict(): gathers every rank's
 * optimizer state to rank `to`, which adds the whole optimizer's state to f
 * under prefix, the keys and values tg_optimizer_state_save of one
 * optimizer over all the parameters (after the same steps) would write:
 * "prefix.<i>.<name>" with i the parameter's index in tg_zero_new's list.
 * Other ranks pass f NULL (theirs is not touched).  Save it with
 * tg_dist_checkpoint_save's extra, or tg_safetensors_save.  to out of range
 * (or different on some rank), f or prefix NULL on `to`: TG_EINVAL on every
 * rank.  At most 2 GiB of state in all.  Collective. */
TG_API int tg_zero_consolidate_state_dict(tg_zero *z, int to, tg_st_file *f,
                                          const char *prefix);
/* load_state_dict: every rank passes the whole state (a file that
 * tg_zero_consolidate_state_dict or tg_optimizer_state_save of an
 * unsharded optimizer wrote; borrowed) and keeps its own parameters' part.
 * tg_optimizer_state_load's errors, and TG_EINVAL for an entry of a
 * parameter index >= n; an error on any rank is every rank's, and no
 * rank's state changes.  Collective. */
TG_API int tg_zero_state_load(tg_zero *z, const tg_st_file *f, const char *prefix);

#ifdef __cplusplus
}
#endif
#endif
