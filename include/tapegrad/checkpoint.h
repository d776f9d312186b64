/* tapegrad/checkpoint.h - a whole training state in one safetensors file.
 *
 * A checkpoint is a list of named slots that point at live objects: modules,
 * optimizers, learning-rate schedulers, grad scalers, data loaders, RNGs,
 * integer counters and plain tensors.  The same list is used to save and to
 * load, so the two can never disagree about what a run's state is:
 *
 *   tg_checkpoint *ck;
 *   tg_checkpoint_new(&ck);
 *   tg_checkpoint_add_module(ck, "gen", gen);        // keys "gen.net.0.weight", ...
 *   tg_checkpoint_add_optimizer(ck, "opt_g", opt_g); // "opt_g.step", "opt_g.0.exp_avg", ...
 *   tg_checkpoint_add_lr_scheduler(ck, "sched", sched); // "sched.last_epoch", ...
 *   tg_checkpoint_add_loader(ck, "loader", ld);      // "loader" i64 (2): epoch, index
 *   tg_checkpoint_add_rng(ck, "rng", &rng);          // "rng" i64 (2): seed, counter
 *   tg_checkpoint_add_i64(ck, "step", &step);        // "step" i64 ()
 *   tg_checkpoint_set_meta(ck, "arch", "nz=64", true);
 *   tg_checkpoint_save(ck, "out/checkpoint.safetensors", NULL);
 *   ...  // later, in a fresh process with the same objects rebuilt:
 *   tg_checkpoint_load(ck, "out/checkpoint.safetensors");
 *
 * File layout: module state dicts under "<prefix>.<name>" with PyTorch's
 * names (so "gen." keys load into a torch model after stripping the prefix),
 * optimizer, scheduler and scaler state as tg_optimizer_state_save /
 * tg_lr_scheduler_state_save / tg_grad_scaler_state_save write them, loader
 * positions, RNG states and counters as i64 tensors (u64 values bit-cast),
 * tensors as they are; the metadata holds "format" = TG_CHECKPOINT_FORMAT,
 * every tg_checkpoint_set_meta pair, and the number of masks each Dropout
 * (or MultiheadAttention's attention dropout, tapegrad/attention.h) of a
 * module slot has drawn, as "<prefix>.<path>.dropout_calls" (run state
 * outside the state dict, so that a resumed run draws the masks that would
 * have followed; a file without the entry leaves the count as it is).
 *
 * Saving is atomic (tg_safetensors_save: temporary file, fsync, rename): a
 * crash or a full disk mid-save leaves the previous checkpoint intact.
 * Loading is all or nothing: the file is parsed and every slot is validated
 * (keys present, shapes and dtypes exact, values in range, required metadata
 * equal) before anything changes; if applying a later slot still fails, the
 * slots already applied are restored from a snapshot.  On error nothing the
 * checkpoint points at is changed.
 *
 * Ownership: a checkpoint is owned by its creator (tg_checkpoint_free).  It
 * borrows the objects of its slots, which must outlive it.
 */
#ifndef TAPEGRAD_CHECKPOINT_H
#define TAPEGRAD_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/amp.h"
#include "tapegrad/data.h"
#include "tapegrad/export.h"
#include "tapegrad/lr_scheduler.h"
#include "tapegrad/nn.h"
#include "tapegrad/optim.h"
#include "tapegrad/safetensors.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The "format" metadata value of every checkpoint. */
#define TG_CHECKPOINT_FORMAT "tapegrad.checkpoint.v1"

typedef struct tg_checkpoint tg_checkpoint;

/* An empty checkpoint (new object in *out). */
TG_API int tg_checkpoint_new(tg_checkpoint **out);
/* NULL does nothing. */
TG_API void tg_checkpoint_free(tg_checkpoint *ck);

/* Adding slots.  name is a non-empty key prefix of at most 127 chars that
 * does not start or end with '.'; TG_EINVAL when it equals another slot's
 * name or one of them is a dotted prefix of the other ("gen" and "gen.x"),
 * which would mix their keys, or for a NULL argument.  The object is
 * borrowed. */
TG_API int tg_checkpoint_add_module(tg_checkpoint *ck, const char *name, tg_module *m);
TG_API int tg_checkpoint_add_optimizer(tg_checkpoint *ck, const char *name, tg_optimizer *opt);
/* A learning-rate scheduler (a SequentialLR with its schedulers).  Add its
 * optimizer too: the lr a resumed run continues from is the optimizer's. */
TG_API int tg_checkpoint_add_lr_scheduler(tg_checkpoint *ck, const char *name,
                                          tg_lr_scheduler *s);
TG_API int tg_checkpoint_add_grad_scaler(tg_checkpoint *ck, const char *name,
                                         tg_grad_scaler *s);
/* The loader's position (epoch, index): loading sets it, so the next batch is
 * the one that would have followed when the checkpoint was saved. */
TG_API int tg_checkpoint_add_loader(tg_checkpoint *ck, const char *name, tg_loader *ld);
TG_API int tg_checkpoint_add_rng(tg_checkpoint *ck, const char *name, tg_rng *rng);
TG_API int tg_checkpoint_add_i64(tg_checkpoint *ck, const char *name, int64_t *value);
/* A tensor whose contents are saved and, on load, copied back in place (the
 * file's tensor must have exactly t's shape and dtype). */
TG_API int tg_checkpoint_add_tensor(tg_checkpoint *ck, const char *name, tg_tensor *t);

/* Metadata written with every save (key and value are copied; a key set
 * again is replaced).  must_match: loading a file whose value for key differs
 * (or is missing) is TG_EINVAL, e.g. for an architecture string.  The key
 * "format" is reserved, and a key that a slot writes itself (an optimizer's
 * "<name>.kind") makes tg_checkpoint_save TG_EINVAL. */
TG_API int tg_checkpoint_set_meta(tg_checkpoint *ck, const char *key, const char *value,
                                  bool must_match);

/* Writes every slot (and every tensor and metadata pair of extra, which may
 * be NULL; an extra key that collides with a slot key or a reserved metadata
 * key is TG_EINVAL) atomically to path.  TG_EIO when it cannot be written;
 * the previous file at path is then intact. */
TG_API int tg_checkpoint_save(const tg_checkpoint *ck, const char *path,
                              const tg_st_file *extra);
/* Loads path into every slot: tg_safetensors_load then tg_checkpoint_load_file. */
TG_API int tg_checkpoint_load(tg_checkpoint *ck, const char *path);
/* Loads an already parsed file (borrowed) into every slot.  TG_EFORMAT when
 * its "format" metadata is not TG_CHECKPOINT_FORMAT; TG_ENOTFOUND for a
 * missing key; TG_ESHAPE / TG_EDTYPE for a tensor of the wrong shape or dtype;
 * TG_EINVAL for a value out of range or differing required metadata.  Keys of
 * f that belong to no slot are ignored, except under a module's prefix
 * (strict state dict).  On error nothing is changed. */
TG_API int tg_checkpoint_load_file(tg_checkpoint *ck, const tg_st_file *f);

#ifdef __cplusplus
}
#endif
#endif
