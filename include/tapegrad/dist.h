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
 * TG_EUNSUPPORTED except tg_loader_set_shard (data.h), which needs no MPI.
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
/* Copies root's t into every rank's t (same root, shape and dtype on
 * each, and contiguous: TG_EINVAL otherwise, on every rank).  Collective. */
TG_API int tg_dist_broadcast_tensor(tg_dist *d, tg_tensor *t, int root);
/* t = sum over ranks of t, in place (f32, f64 or i64, contiguous; the
 * same shape and dtype on every rank: TG_ESHAPE / TG_EDTYPE otherwise, on
 * every rank, with t unchanged).  Collective. */
TG_API int tg_dist_allreduce_sum(tg_dist *d, tg_tensor *t);

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
                                * .grad); f32 parameters only */
} tg_ddp_opts;
#define TG_DDP_OPTS_INIT                                                      \
    {.bucket_cap_bytes = (size_t)25 << 20, .overlap = true, .broadcast_buffers = true, \
     .compress = TG_F32}

/* Averages the gradients of params[0..n) (f32 or f64 leaves that require
 * grad, distinct, contiguous; retained) over the ranks of d.  Every rank
 * must pass the same list (same count, shapes and dtypes, in the same
 * order), the same bucket_cap_bytes and the same compress: checked,
 * TG_EINVAL on every rank otherwise.  o NULL: the defaults.  TG_EINVAL
 * when o->compress is not TG_F32, TG_BF16 or TG_F16, and when it
 * compresses (bf16, f16) while a parameter is f64.  Registers a post-accumulate hook on
 * each parameter (removed by tg_ddp_free).  Collective: an error on any
 * rank (a bad argument, no memory) is returned by every rank, and no rank
 * makes a tg_ddp. */
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

#ifdef __cplusplus
}
#endif
#endif
