/* tapegrad/nn.h - neural-network modules with PyTorch's names and layouts.
 *
 * A module is an opaque refcounted object with a vtable (forward, train/eval
 * hook, release of its private state), named children, named parameters
 * (leaf tensors with requires_grad) and named buffers (running statistics).
 *
 *   tg_module *seq, *lin, *act;
 *   tg_rng rng; tg_rng_init(&rng, 0);
 *   tg_nn_sequential_new(&seq);
 *   tg_nn_linear_new(&lin, 4, 3, true, &rng);
 *   tg_nn_sequential_append(seq, lin);                 // steals lin: "0"
 *   tg_nn_activation_new(&act, TG_ACT_RELU, 0);
 *   tg_nn_sequential_append(seq, act);                 // "1"
 *   tg_module_forward(seq, &y, x);                     // y = relu(x W^T + b)
 *   // state dict keys: "0.weight" (3, 4), "0.bias" (3)
 *
 * Names.  Children of a Sequential are "0", "1", ...; a child added with
 * tg_module_add_child(parent, "net", child) contributes "net.<its names>".
 * The state dict order is PyTorch's: each module's parameters, then its
 * buffers, in registration order, then its children depth-first in insertion
 * order.  BatchNorm has weight, bias, running_mean, running_var,
 * num_batches_tracked (an i64 0-d tensor).
 *
 * Layouts and initialisation follow torch.nn: Linear weight (out, in);
 * ConvNd weight (C_out, C_in/groups, K...); ConvTransposeNd weight
 * (C_in, C_out/groups, K...).  Weights and biases are drawn from
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (kaiming_uniform with a = sqrt(5)), with
 * fan_in = weight.shape[1] * prod(K) as torch computes it, i.e. C_in/groups *
 * prod(K) for Conv and C_out/groups * prod(K) for ConvTranspose.  Parameters
 * are f32; tg_module_to_dtype() converts a whole module.
 *
 * Refcounts: constructors return a new reference in *out;
 * tg_module_retain() returns its argument; tg_module_release(NULL) does
 * nothing.  Functions that take a child steal it, also on error (it is then
 * released).  Tensors returned by lookups are borrowed from the module.
 */
#ifndef TAPEGRAD_NN_H
#define TAPEGRAD_NN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tapegrad/conv.h"
#include "tapegrad/pool.h"
#include "tapegrad/export.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"
#include "tapegrad/safetensors.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_module tg_module;

/* Longest dotted state name (including the NUL). */
#define TG_MODULE_NAME_MAX 256

/* ---- custom modules ---- */

typedef struct tg_module_vtable {
    const char *type_name;   /* "Linear", "Sequential", ... */
    /* *y receives a new reference; x is borrowed.  NULL: forward is
     * TG_EUNSUPPORTED (a pure container).  On failure, a negative status
     * and a message (tg_error_set; without one, module_forward names the
     * module). */
    int (*forward)(tg_module *m, tg_tensor **y, tg_tensor *x);
    /* Forward of a module that takes several inputs (optional; as
     * `def forward(self, x, mask)`): xs[0..n) borrowed, *y a new reference.
     * A module with forward_n is run by tg_module_forward_n with any n and
     * by tg_module_forward with n = 1.  A module may set both. */
    int (*forward_n)(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs);
    /* Called after m's training flag changed (optional). */
    void (*train)(tg_module *m, bool training);
    /* Frees the private state (optional). */
    void (*release)(void *state);
    /* The number of inputs forward_n takes (0: any).  When set, a call with
     * another number, tg_module_forward's one included, is TG_EINVAL before
     * forward_n runs, as torch refuses a missing argument. */
    int n_inputs;
    /* The local name of a buffer that a state dict may lack (NULL: none):
     * tg_module_load_state_dict sets it to 0 then, strict or not, as torch's
     * BatchNorm and SyncBatchNorm read a dict without num_batches_tracked
     * (one from before torch 0.4.1).  Both set "num_batches_tracked". */
    const char *zero_if_missing;
    /* How tg_module_copy duplicates the private state (optional; a module
     * whose state is NULL needs neither).  copy_state, when set, makes *copy
     * a new state equal to state (freed later by release), or returns a
     * negative status with *copy untouched.  Otherwise state_size > 0 says
     * the state is one block of that many bytes owning nothing (pointers in
     * it are borrowed): the copy is a malloc'd duplicate, which release must
     * accept (free does).  With neither, tg_module_copy refuses the module
     * (TG_EUNSUPPORTED). */
    int (*copy_state)(void **copy, const void *state);
    size_t state_size;
    /* The forward of a module giving several outputs, as a torch forward
     * returning a tuple (optional): n_outputs (> 1) new references in
     * ys[0..n_outputs) from the n inputs xs (borrowed), run by
     * tg_module_forward_outputs.  forward or forward_n, which such a module
     * sets too, gives the first of them. */
    int (*forward_outputs)(tg_module *m, tg_tensor **ys, int n, tg_tensor *const *xs);
    int n_outputs;
} tg_module_vtable;

/* The most outputs a module's forward_outputs gives. */
#define TG_MODULE_MAX_OUTPUTS 4

/* A module with no parameters or children, in training mode.  vt is borrowed
 * and must outlive the module; state is owned by the module (vt->release). */
TG_API int tg_module_new(tg_module **out, const tg_module_vtable *vt, void *state);
/* The private state given to tg_module_new (borrowed). */
TG_API void *tg_module_state(const tg_module *m);
TG_API const char *tg_module_type_name(const tg_module *m);

TG_API tg_module *tg_module_retain(tg_module *m);
TG_API void tg_module_release(tg_module *m);

/* Registers a parameter (steals t; it becomes requires_grad; it must be a
 * float leaf) or a buffer (steals t).  Names are non-empty, without '.',
 * unique among m's parameters, buffers and children: TG_EINVAL otherwise (t
 * is released).  An unnamed t takes the name, which the tape's printouts
 * show. */
TG_API int tg_module_add_parameter(tg_module *m, const char *name, tg_tensor *t);
TG_API int tg_module_add_buffer(tg_module *m, const char *name, tg_tensor *t);
/* Adds child under name (steals child, also on error). */
TG_API int tg_module_add_child(tg_module *parent, const char *name, tg_module *child);
/* Borrowed direct child, or NULL. */
TG_API tg_module *tg_module_child(const tg_module *m, const char *name);
TG_API int tg_module_child_count(const tg_module *m);
/* Borrowed i-th direct child in insertion order, or NULL. */
TG_API tg_module *tg_module_child_at(const tg_module *m, int i);
/* The name of the i-th direct child (borrowed from m), or NULL. */
TG_API const char *tg_module_child_name_at(const tg_module *m, int i);
/* The parameter or buffer with the dotted name ("net.0.weight"), borrowed,
 * or NULL.  A computed weight (tg_nn_spectral_norm's, tg_nn_weight_norm's)
 * is found too: its value at the last forward. */
TG_API tg_tensor *tg_module_find(const tg_module *m, const char *dotted_name);

/* ---- running ---- */

/* *y is a new reference (owned by the caller's scope when one is open:
 * tapegrad/scope.h).  On error *y is untouched. */
TG_API int tg_module_forward(tg_module *m, tg_tensor **y, tg_tensor *x);
/* tg_module_forward as a recomputed block (tg_recompute_ex, autograd.h:
 * torch.utils.checkpoint.checkpoint(m, x, use_reentrant=False)): none of
 * m's activations is kept; the backward runs m again and back-propagates
 * through that.  m's parameters get their gradients even when x does not
 * require grad.  Each Dropout inside m draws the same mask in the
 * recomputation as in the forward, and its count of masks drawn is as if m
 * had run once.  Other state a forward changes (BatchNorm's running
 * statistics in training) changes again when m runs again, as in torch.
 * m must stay alive until the backward has run.  Errors as
 * tg_module_forward and tg_recompute_ex (m with more than 7 inputs is not
 * possible here); TG_EINVAL for a NULL m, y or x.
 * On error *y is untouched. */
TG_API int tg_module_forward_recompute(tg_module *m, tg_tensor **y, tg_tensor *x);
/* The forward of a module taking n >= 1 inputs (its vtable's forward_n; a
 * module with only forward takes n = 1).  TG_EINVAL for n < 1 or a NULL
 * input; TG_EUNSUPPORTED when m has no forward for n inputs. */
TG_API int tg_module_forward_n(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs);
/* The number of outputs of m's forward: its vtable's n_outputs for a
 * module with forward_outputs (a MaxPoolNd with return_indices gives 2:
 * (y, indices)), 1 for any other module and for NULL. */
TG_API int tg_module_output_count(const tg_module *m);
/* All the outputs of m's forward on its n >= 1 inputs xs (borrowed), as
 * torch's `y, indices = pool(x)`: ys[0..tg_module_output_count(m)) receive
 * new references (ys[0] alone, tg_module_forward_n's output, for a module
 * of one output).  Errors as tg_module_forward_n; on error no ys[i] is
 * written. */
TG_API int tg_module_forward_outputs(tg_module *m, tg_tensor **ys, int n, tg_tensor *const *xs);
/* Sets the training flag of m and every descendant (eval: training=false). */
TG_API void tg_module_train(tg_module *m, bool training);
TG_API bool tg_module_is_training(const tg_module *m);
/* Master weights under autocast.  With on, the Linear, Conv and ConvTranspose
 * layers among m and its descendants cast their float weight and bias to the
 * autocast dtype at each forward inside an autocast scope.  The cast is
 * recorded on the tape, so the parameters stay the (f32) master weights and
 * their gradients arrive in their own dtype.  This is what lets a PROMOTE op
 * run in half precision under autocast: the op itself promotes (a bf16 x with
 * an f32 ConvTranspose weight gives f32), so without the flag a ConvTranspose
 * layer computes, saves and returns f32 whatever its input; with it, a half
 * input gives a half result (an f32 input still gives f32, PROMOTE's rule,
 * with the weight rounded to half).  LOWER_PRECISION layers (Linear, Conv)
 * cast their inputs anyway: for them the flag changes no value.  No effect
 * outside autocast (where, as torch, an input of another dtype than the
 * weights is TG_EDTYPE), on f64 parameters or on other modules (BatchNorm keeps
 * f32 affine parameters: it returns x's dtype under autocast).  Off by
 * default; the call sets the flag on m and on the descendants it has now. */
TG_API void tg_module_autocast_weights(tg_module *m, bool on);
TG_API bool tg_module_is_autocast_weights(const tg_module *m);
/* Clears the .grad of every parameter (set_to_none); NULL does nothing. */
TG_API void tg_module_zero_grad(tg_module *m);
/* module.zero_grad(set_to_none) over every parameter of m and its
 * descendants, as tg_optimizer_zero_grad_ex (tapegrad/optim.h): false
 * zeroes each gradient, in place where the .grad is the parameter's own.
 * TG_EINVAL for NULL m; TG_ENOMEM with nothing changed. */
TG_API int tg_module_zero_grad_ex(tg_module *m, bool set_to_none);
/* A deep copy of m, as copy.deepcopy(model): a new module tree of the same
 * types, names, private state (vtable copy_state or state_size), training
 * and autocast-weights flags, whose parameters and buffers are contiguous
 * copies of m's values and dtypes, with m's requires_grad flags, and no
 * gradients (as torch's Parameter.__deepcopy__).  Sharing inside m is kept:
 * a tensor under several names (tied weights) or a module added twice
 * appears once in the copy, under the same names.  The two trees share no
 * tensor or module, so changing one leaves the other as it is.  *out is a
 * new reference.  TG_EUNSUPPORTED naming the module's dotted path for a
 * module with private state but neither copy_state nor state_size (the
 * quantized layers of tapegrad/quant.h); on error *out is untouched. */
TG_API int tg_module_copy(tg_module **out, const tg_module *m);
/* Converts every float parameter and buffer to float dtype dt in place, as
 * torch's Module.to(): each keeps its tensor object (an optimizer made
 * before, or a pointer from tg_module_find, still holds it), parameters stay
 * leaves requiring grad, and gradients are dropped.  A graph recorded before
 * the conversion that saved one of them fails in backward (TG_EINPLACE).  A
 * tensor under several names (tied weights) is converted once and stays
 * shared.  On error nothing is changed. */
TG_API int tg_module_to_dtype(tg_module *m, tg_dtype dt);

/* ---- the state dict ---- */

/* Number of state entries (parameters and buffers) of m and its descendants
 * (0 for NULL), or TG_EINVAL when a dotted name is longer than
 * TG_MODULE_NAME_MAX - 1 characters (such a module cannot be saved). */
TG_API int tg_module_state_count(const tg_module *m);
/* The i-th entry in state-dict order: its dotted name (copied into name, of
 * cap bytes), the tensor (borrowed) and whether it is a parameter.  Any of
 * name/t/is_param may be NULL.  TG_EINVAL when i is out of range or the name
 * does not fit. */
TG_API int tg_module_state_at(const tg_module *m, int i, char *name, size_t cap,
                              tg_tensor **t, bool *is_param);
/* Calls fn for every entry in state-dict order; stops at (and returns) the
 * first negative status fn returns (with fn's message from tg_error_set, or
 * one naming fn).  Names are valid during the call. */
typedef int (*tg_module_state_fn)(const char *name, tg_tensor *t, bool is_param, void *user);
TG_API int tg_module_foreach_state(const tg_module *m, tg_module_state_fn fn, void *user);
/* The parameters in state-dict order: *params is a malloc'd array (free it)
 * of *n borrowed tensors (NULL when there are none).  As torch's
 * Module.parameters(), a tensor registered under several names (tied
 * weights, a module added twice) is listed once, at its first name, so the
 * list can be given to an optimizer; the state dict keeps every name. */
TG_API int tg_module_parameters(const tg_module *m, tg_tensor ***params, int *n);
/* torch's Module.named_parameters(): the same list as tg_module_parameters,
 * each tensor (borrowed) with its first dotted name.  *names is one malloc'd
 * block holding the *n name pointers and the names themselves (one free of
 * *names frees both); *params is a malloc'd array (free it).  Both NULL
 * when there are no parameters.  TG_EINVAL for a NULL argument or a name
 * longer than TG_MODULE_NAME_MAX - 1 characters, TG_ENOMEM; on an error
 * nothing is written. */
TG_API int tg_module_named_parameters(const tg_module *m, char ***names, tg_tensor ***params,
                                      int *n);
/* The length of that list. */
TG_API int tg_module_parameter_count(const tg_module *m);
/* The number of scalar weights in that list (the sum of their numel), as
 * sum(p.numel() for p in model.parameters()); 0 for NULL or out of memory. */
TG_API int64_t tg_module_parameter_numel(const tg_module *m);

/* Adds every entry to f under "<prefix>.<name>" (prefix NULL or "": just the
 * name; a prefix ending in '.' is used as is).  Tensors are retained by f,
 * not copied: save the file before changing the module. */
TG_API int tg_module_state_dict_save(const tg_module *m, tg_st_file *f, const char *prefix);
/* Copies f's tensors into m's parameters and buffers.  Every entry must have
 * the exact shape and dtype of the module's tensor: a mismatch is TG_ESHAPE
 * or TG_EDTYPE naming the key (no implicit conversion: convert the module
 * with tg_module_to_dtype first).  strict: a module entry missing from f is
 * TG_ENOTFOUND and a key of f under the prefix that the module does not have
 * is TG_EINVAL; non-strict skips both (tg_module_state_dict_compare lists
 * them).  Except, as in PyTorch (which reads a state dict without version
 * metadata, as every safetensors file is, this way): a BatchNorm's or
 * InstanceNorm's num_batches_tracked absent from f is set to 0, strict or
 * not (checkpoints from before torch 0.4.1 have none).  Everything is
 * validated before anything is copied, so on error the module is unchanged. */
TG_API int tg_module_load_state_dict(tg_module *m, const tg_st_file *f, const char *prefix,
                                     bool strict);
/* The keys a load of f under prefix would leave out, as the missing_keys
 * and unexpected_keys of PyTorch's load_state_dict(strict=False): fn (may
 * be NULL) is called with each key of m's state dict, prefixed, that f lacks
 * (missing true; a BatchNorm's or InstanceNorm's num_batches_tracked, which
 * loads as 0, is not missing), then with each tensor of f under prefix that m has no entry for
 * (missing false), in order; key is borrowed for the call.  *n_missing and
 * *n_unexpected (each may be NULL) get the counts.  Neither m nor f changes.
 * TG_EINVAL for NULL m or f; TG_ENOMEM. */
typedef void (*tg_state_key_fn)(const char *key, bool missing, void *user);
TG_API int tg_module_state_dict_compare(const tg_module *m, const tg_st_file *f,
                                        const char *prefix, tg_state_key_fn fn, void *user,
                                        int *n_missing, int *n_unexpected);

/* ---- layers ---- */

/* Linear: y = x W^T + b; W (out_f, in_f), b (out_f). */
TG_API int tg_nn_linear_new(tg_module **out, int64_t in_f, int64_t out_f, bool bias,
                            tg_rng *rng);
/* nn.Bilinear(in1_f, in2_f, out_f, bias) (type name "Bilinear"): forward
 * of two inputs (tg_module_forward_n with n = 2; any other n is TG_EINVAL)
 * is tg_bilinear(x1, x2, weight, bias) (ops.h): y = x1^T A x2 + b over the
 * last dims.  Parameters "weight" (out_f, in1_f, in2_f) and, with bias,
 * "bias" (out_f), f32, both drawn from U(-1/sqrt(in1_f), 1/sqrt(in1_f)),
 * weight first, as torch's reset_parameters (by rng: not torch's numbers).
 * TG_EINVAL for a NULL out or rng, a size < 1 or a weight too large to
 * count. */
TG_API int tg_nn_bilinear_new(tg_module **out, int64_t in1_f, int64_t in2_f, int64_t out_f,
                              bool bias, tg_rng *rng);
/* A Bilinear's sizes and whether it has a bias.  Out-pointers may be NULL;
 * TG_EINVAL for a NULL m or, naming its type, another module. */
TG_API int tg_nn_bilinear_params(const tg_module *m, int64_t *in1_f, int64_t *in2_f,
                                 int64_t *out_f, bool *bias);
/* nn.CosineSimilarity(dim, eps) and nn.PairwiseDistance(p, eps, keepdim)
 * (type names "CosineSimilarity", "PairwiseDistance"): forward of two
 * inputs (x1, x2) (tg_module_forward_n with n = 2) is tg_cosine_similarity
 * or tg_pairwise_distance (loss.h), whose rules and errors apply there.
 * torch's defaults: dim 1, eps 1e-8; p 2, eps 1e-6, keepdim false.  No
 * parameters or buffers.  TG_EINVAL for a NULL out, a NaN p or eps, or a
 * dim outside +-TG_MAX_DIMS. */
TG_API int tg_nn_cosine_similarity_new(tg_module **out, int dim, double eps);
TG_API int tg_nn_pairwise_distance_new(tg_module **out, double p, double eps, bool keepdim);
/* Their options.  Out-pointers may be NULL; TG_EINVAL for a NULL m or,
 * naming its type, another module. */
TG_API int tg_nn_cosine_similarity_params(const tg_module *m, int *dim, double *eps);
TG_API int tg_nn_pairwise_distance_params(const tg_module *m, double *p, double *eps,
                                          bool *keepdim);
/* ConvNd, nspatial 1..3: W (c_out, c_in/groups, kernel...), b (c_out).
 * p may be NULL for the defaults (stride 1, no padding); p->act is applied
 * after the bias. */
TG_API int tg_nn_conv_new(tg_module **out, int nspatial, int64_t c_in, int64_t c_out,
                          const int64_t *kernel, const tg_conv_params *p, bool bias,
                          tg_rng *rng);
/* The parameters of a Conv or ConvTranspose module, copied into *p
 * (stride, padding, dilation, groups, ...).  TG_EINVAL for another module. */
TG_API int tg_nn_conv_params(const tg_module *m, tg_conv_params *p);
/* ConvTransposeNd: W (c_in, c_out/groups, kernel...), b (c_out). */
TG_API int tg_nn_conv_transpose_new(tg_module **out, int nspatial, int64_t c_in,
                                    int64_t c_out, const int64_t *kernel,
                                    const tg_conv_params *p, bool bias, tg_rng *rng);
/* BatchNorm over dim 1.  nspatial 0 or 1: BatchNorm1d on (N, C) or (N, C, L);
 * 2: BatchNorm2d on (N, C, H, W); 3: BatchNorm3d.  momentum < 0 means
 * PyTorch's momentum=None (cumulative average).  Without
 * track_running_stats there are no buffers and batch statistics are always
 * used. */
TG_API int tg_nn_batchnorm_new(tg_module **out, int nspatial, int64_t num_features,
                               double eps, double momentum, bool affine,
                               bool track_running_stats);
/* nn.LayerNorm(normalized_shape, eps, elementwise_affine): tg_layer_norm
 * over the last n dims of its input, whose extents normalized_shape[0..n)
 * gives (1 <= n <= TG_MAX_DIMS, extents > 0; copied).  With
 * elementwise_affine, parameters "weight" (ones) and "bias" (zeros) of that
 * shape, f32.  PyTorch's defaults: eps 1e-5, elementwise_affine true. */
TG_API int tg_nn_layer_norm_new(tg_module **out, int n, const int64_t *normalized_shape,
                                double eps, bool elementwise_affine);
/* nn.GroupNorm(num_groups, num_channels, eps, affine): tg_group_norm of its
 * (N, C, ...) input in num_groups groups of channels.  num_channels > 0,
 * divisible by num_groups.  With affine, "weight" (ones) and "bias" (zeros)
 * of shape (num_channels), f32.  PyTorch's defaults: eps 1e-5, affine
 * true. */
TG_API int tg_nn_group_norm_new(tg_module **out, int64_t num_groups, int64_t num_channels,
                                double eps, bool affine);
/* nn.InstanceNorm{1,2,3}d(num_features, eps, affine) for n_spatial 1, 2, 3
 * (type names "InstanceNorm1d" ...), with torch's default
 * track_running_stats=False: each sample's channel normalised by its own
 * mean and biased variance over the spatial dims, in training and eval
 * alike (tg_group_norm with num_features groups; no running statistics, no
 * buffers).  Input (N, C, S...) or unbatched (C, S...) with C =
 * num_features; in training more than one spatial element (TG_ESHAPE, as
 * torch).  With affine, "weight" (ones) and "bias" (zeros) of shape
 * (num_features), f32.  PyTorch's defaults: eps 1e-5, affine false. */
TG_API int tg_nn_instance_norm_new(tg_module **out, int n_spatial, int64_t num_features,
                                   double eps, bool affine);
/* nn.InstanceNorm{1,2,3}d(num_features, eps, momentum, affine,
 * track_running_stats), as tg_nn_instance_norm_new (which is this with
 * momentum 0.1 and track_running_stats false) and, with
 * track_running_stats, buffers "running_mean" (zeros), "running_var" (ones),
 * f32, and "num_batches_tracked" (a 0-d i64), torch's state-dict keys:
 *  - training: each sample normalised by its own statistics, as without
 *    them; then each running statistic r becomes (1 - momentum) r +
 *    momentum * s, s the per-(sample, channel) mean, or unbiased variance,
 *    averaged over the batch (an empty batch gives NaN, as torch);
 *  - eval: every sample normalised by running_mean and running_var
 *    (tg_batch_norm in inference form), which do not change (torch's eval
 *    writes them back as the mean of N tiled copies, a few units in the
 *    last place off).
 * num_batches_tracked is never incremented (torch's InstanceNorm does not
 * count); a file without it loads it as 0, as BatchNorm's.  A training
 * forward writes the buffers, so two threads must not run the same module
 * at once.  momentum in [0, 1] (TG_EINVAL otherwise: torch's
 * momentum=None, a cumulative average, fails in InstanceNorm's forward).
 * PyTorch's defaults: eps 1e-5, momentum 0.1, affine false,
 * track_running_stats false. */
TG_API int tg_nn_instance_norm_new_ex(tg_module **out, int n_spatial, int64_t num_features,
                                      double eps, double momentum, bool affine,
                                      bool track_running_stats);
/* Dropout: in training each element is zeroed with probability p and the
 * rest scaled by 1/(1-p); the mask of the k-th training forward depends only
 * on (seed, k).  Eval is the identity.  k is not in the state dict (PyTorch's
 * Dropout has none); a checkpoint keeps it (checkpoint.h), so a resumed run
 * continues the sequence.  Processes given the same seed draw the same
 * masks: data-parallel ranks that should drop independently need seeds of
 * their own (seed + rank, say). */
TG_API int tg_nn_dropout_new(tg_module **out, double p, uint64_t seed);
/* nn.Dropout1d(p), nn.Dropout2d(p), nn.Dropout3d(p) for n_spatial 1, 2, 3
 * (type names "Dropout1d", ...): in training each channel is zeroed with
 * probability p and the rest scaled by 1/(1-p), tg_dropout_channels (ops.h,
 * which gives the input ranks and channels: torch 1.13's, a 3-d input to
 * Dropout2d read as (N, C, L)); eval is the identity.  The masks, their
 * count and the checkpoint and recompute behaviour are Dropout's above.  No
 * parameters or buffers.  TG_EINVAL for a NULL out, n_spatial outside 1..3
 * or p outside [0, 1]. */
TG_API int tg_nn_dropout_channels_new(tg_module **out, int n_spatial, double p, uint64_t seed);
/* A Dropout's p and its n_spatial (0 for Dropout, 1..3 for Dropout1d/2d/3d).
 * Out-pointers may be NULL; TG_EINVAL for a NULL m or, naming its type,
 * another module. */
TG_API int tg_nn_dropout_params(const tg_module *m, int *n_spatial, double *p);
/* nn.AlphaDropout(p) and nn.FeatureAlphaDropout(p) (type names
 * "AlphaDropout", "FeatureAlphaDropout"): tg_alpha_dropout or
 * tg_feature_alpha_dropout (ops.h: SELU's constants, torch's formula; a
 * FeatureAlphaDropout input needs 2 dims) in training, the identity in
 * eval.  The masks, their count and the checkpoint and recompute behaviour
 * are Dropout's above (not torch's random numbers).  No parameters or
 * buffers.  TG_EINVAL for a NULL out or p outside [0, 1] (NaN too). */
TG_API int tg_nn_alpha_dropout_new(tg_module **out, double p, uint64_t seed);
TG_API int tg_nn_feature_alpha_dropout_new(tg_module **out, double p, uint64_t seed);
/* An AlphaDropout's or FeatureAlphaDropout's p and which of the two it is
 * (*feature).  Out-pointers may be NULL; TG_EINVAL for a NULL m or, naming
 * its type, another module. */
TG_API int tg_nn_alpha_dropout_params(const tg_module *m, bool *feature, double *p);
/* The padding modules, F.pad with the module's padding (tg_pad, ops.h):
 * nn.ConstantPad{1,2,3}d(padding, value), nn.ReflectionPad{1,2,3}d and
 * nn.ReplicationPad{1,2,3}d(padding) for mode TG_PAD_CONSTANT,
 * TG_PAD_REFLECT, TG_PAD_REPLICATE and n_spatial 1, 2, 3, with torch's class
 * names as type names ("ReflectionPad2d", ...); TG_PAD_CIRCULAR gives
 * CircularPad{1,2,3}d, torch 2.1's module (torch 1.13 has only F.pad's
 * circular mode).  pads[0..2 n_spatial) (copied) are the paddings in
 * torch's order, the last dim first: (left, right), (left, right, top,
 * bottom) or (left, right, top, bottom, front, back); torch's int padding
 * is the same on every side (tg_nn_pad_new_int).  A negative padding
 * removes elements, as tg_pad allows in each mode.  value is the constant
 * (torch's ConstantPadNd has no default; 0 in the other modes).  No
 * parameters or buffers.  The forward takes, as torch's modules do, any
 * input of at least n_spatial dims in constant mode (the last n_spatial
 * padded), an (N, C, S...) or unbatched (C, S...) one in the others
 * (TG_ESHAPE otherwise), then tg_pad's rules: TG_EINVAL for a reflect
 * padding >= the dim's size, a circular one > it, or a negative one that
 * removes more than the dim.  TG_EINVAL for a NULL out or pads, a mode
 * that is not a tg_pad_mode, n_spatial outside 1..3, a padding outside
 * [-INT32_MAX, INT32_MAX], or a nonzero value in another mode than
 * TG_PAD_CONSTANT. */
TG_API int tg_nn_pad_new(tg_module **out, tg_pad_mode mode, int n_spatial, const int64_t *pads,
                         double value);
/* tg_nn_pad_new with padding on every side: nn.ReflectionPad2d(2) is
 * tg_nn_pad_new_int(&m, TG_PAD_REFLECT, 2, 2, 0). */
TG_API int tg_nn_pad_new_int(tg_module **out, tg_pad_mode mode, int n_spatial, int64_t padding,
                             double value);
/* nn.ZeroPad2d(padding) (type name "ZeroPad2d"): a ConstantPad2d of 0,
 * pads[0..4) (left, right, top, bottom); errors as tg_nn_pad_new's. */
TG_API int tg_nn_zero_pad2d_new(tg_module **out, const int64_t *pads);
/* What a padding module was made with: its mode (TG_PAD_CONSTANT for
 * ZeroPad2d), n_spatial, the 2 n_spatial paddings into pads and the
 * constant.  Out-pointers may be NULL; TG_EINVAL for a NULL m or, naming
 * its type, another module. */
TG_API int tg_nn_pad_params(const tg_module *m, tg_pad_mode *mode, int *n_spatial,
                            int64_t *pads, double *value);
/* relu, leaky_relu (slope), tanh, sigmoid, silu, gelu, gelu_tanh; TG_ACT_NONE
 * is the identity.  The type name is torch's class name: ReLU, LeakyReLU,
 * Tanh, Sigmoid, SiLU, GELU (both forms), Identity for TG_ACT_NONE. */
TG_API int tg_nn_activation_new(tg_module **out, tg_activation act, double slope);
/* nn.GELU(approximate=approximate): "none" (torch's default; NULL too) is
 * the activation module of TG_ACT_GELU, "tanh" that of TG_ACT_GELU_TANH
 * (tg_nn_activation_params reads which); any other string is TG_EINVAL. */
TG_API int tg_nn_gelu_new(tg_module **out, const char *approximate);
/* nn.Flatten(start_dim, end_dim): PyTorch's defaults are 1, -1. */
TG_API int tg_nn_flatten_new(tg_module **out, int start_dim, int end_dim);
/* nn.Unflatten(dim, shape): dim of extent prod(shape) becomes shape[0..ndim)
 * (tg_unflatten); one size may be -1, inferred from dim's extent. */
TG_API int tg_nn_unflatten_new(tg_module **out, int dim, int ndim, const int64_t *shape);
/* nn.PixelShuffle(r) and nn.PixelUnshuffle(r) (type names "PixelShuffle",
 * "PixelUnshuffle"): forward is tg_pixel_shuffle or tg_pixel_unshuffle
 * (tapegrad/ops.h); r in [1, 2^31]. */
TG_API int tg_nn_pixel_shuffle_new(tg_module **out, int64_t r);
TG_API int tg_nn_pixel_unshuffle_new(tg_module **out, int64_t r);
/* nn.ChannelShuffle(groups) (type name "ChannelShuffle"): forward is
 * tg_channel_shuffle (ops.h).  No parameters or buffers.  TG_EINVAL for a
 * NULL out or groups < 1 (torch's module takes any and fails in forward). */
TG_API int tg_nn_channel_shuffle_new(tg_module **out, int64_t groups);
/* nn.LocalResponseNorm(size, alpha, beta, k) (type name
 * "LocalResponseNorm"): forward is tg_local_response_norm (ops.h), inputs
 * of at least 3 dims.  torch's defaults: alpha 1e-4, beta 0.75, k 1.  No
 * parameters or buffers.  TG_EINVAL for a NULL out, size outside
 * [1, 2^31 - 1] or a NaN alpha, beta or k. */
TG_API int tg_nn_local_response_norm_new(tg_module **out, int64_t size, double alpha,
                                         double beta, double k);
/* Their options.  Out-pointers may be NULL; TG_EINVAL for a NULL m or,
 * naming its type, another module. */
TG_API int tg_nn_channel_shuffle_params(const tg_module *m, int64_t *groups);
TG_API int tg_nn_local_response_norm_params(const tg_module *m, int64_t *size, double *alpha,
                                            double *beta, double *k);
/* nn.Unfold(kernel_size, dilation, padding, stride) and
 * nn.Fold(output_size, kernel_size, dilation, padding, stride) (type names
 * "Unfold", "Fold"): forward is tg_unfold or tg_fold (tapegrad/conv.h) with
 * p (copied) and output_size[0..2) (copied).  TG_EINVAL for NULL out, p or
 * output_size, or a value outside tg_unfold's ranges (output_size >= 1),
 * where torch's modules take any and fail in forward. */
TG_API int tg_nn_unfold_new(tg_module **out, const tg_fold_params *p);
TG_API int tg_nn_fold_new(tg_module **out, const int64_t *output_size, const tg_fold_params *p);
/* What the built-in modules were made with, for code that walks a model
 * (an exporter).  Any out-pointer may be NULL.  TG_EINVAL naming the module's
 * type when m is not of that kind. */
TG_API int tg_nn_activation_params(const tg_module *m, tg_activation *act, double *slope);
TG_API int tg_nn_flatten_params(const tg_module *m, int *start_dim, int *end_dim);
/* shape receives *ndim sizes (at most TG_MAX_DIMS). */
TG_API int tg_nn_unflatten_params(const tg_module *m, int *dim, int *ndim, int64_t *shape);
/* A PixelShuffle's or PixelUnshuffle's r (*unshuffle: which of the two). */
TG_API int tg_nn_pixel_shuffle_params(const tg_module *m, int64_t *r, bool *unshuffle);
/* An Unfold's or Fold's parameters; output_size gets a Fold's (0, 0 for
 * an Unfold), *fold which of the two. */
TG_API int tg_nn_fold_params(const tg_module *m, tg_fold_params *p, int64_t *output_size,
                             bool *fold);
TG_API int tg_nn_batchnorm_params(const tg_module *m, int *nspatial, double *eps,
                                  double *momentum, bool *affine, bool *track_running_stats);
/* normalized_shape receives *n extents (at most TG_MAX_DIMS). */
TG_API int tg_nn_layer_norm_params(const tg_module *m, int *n, int64_t *normalized_shape,
                                   double *eps, bool *elementwise_affine);
TG_API int tg_nn_group_norm_params(const tg_module *m, int64_t *num_groups,
                                   int64_t *num_channels, double *eps, bool *affine);
TG_API int tg_nn_instance_norm_params(const tg_module *m, int *n_spatial, int64_t *num_features,
                                      double *eps, double *momentum, bool *affine,
                                      bool *track_running_stats);
/* nn.AvgPool{1,2,3}d and nn.MaxPool{1,2,3}d over n_spatial dims (type
 * names "AvgPool2d", "MaxPool1d", ...), and nn.Upsample(scale_factor=scale,
 * mode='nearest') with integer factors scale[0..n_spatial) (type name
 * "Upsample").  No parameters or buffers; forward is tg_avg_pool,
 * tg_max_pool or tg_upsample_nearest (tapegrad/pool.h).  p is copied, and
 * checked as those functions check it. */
TG_API int tg_nn_avg_pool_new(tg_module **out, int n_spatial, const tg_pool_params *p);
TG_API int tg_nn_max_pool_new(tg_module **out, int n_spatial, const tg_pool_params *p);
/* nn.MaxPoolNd's return_indices: with on, m's forward gives two outputs,
 * (y, indices) through tg_module_forward_outputs, as
 * tg_max_pool_with_indices (torch's indices within each (n, c) plane, i64);
 * tg_module_forward still gives y.  In a Sequential the next module gets
 * both when it takes two inputs (a MaxUnpoolNd: torch's `y, i = pool(x);
 * unpool(y, i)`), y alone otherwise.  TG_EINVAL for a NULL m or one that is
 * not a MaxPoolNd. */
TG_API int tg_nn_max_pool_set_return_indices(tg_module *m, bool on);
TG_API int tg_nn_upsample_new(tg_module **out, int n_spatial, const int64_t *scale);
/* nn.AdaptiveAvgPool{1,2,3}d(output_size) over n_spatial dims (type names
 * "AdaptiveAvgPool1d", ...): no parameters or buffers; forward is
 * tg_adaptive_avg_pool with output_size[0..n_spatial) (copied), each in
 * [1, TG_POOL_MAX_PARAM] or 0 for the input's extent (torch's None).
 * TG_EINVAL for a NULL out or output_size, n_spatial outside 1..3 or an
 * entry out of range. */
TG_API int tg_nn_adaptive_avg_pool_new(tg_module **out, int n_spatial,
                                       const int64_t *output_size);
/* nn.AdaptiveMaxPool{1,2,3}d(output_size) over n_spatial dims (type names
 * "AdaptiveMaxPool1d", ...), return_indices=False: forward is
 * tg_adaptive_max_pool without indices; output_size as
 * tg_nn_adaptive_avg_pool_new's, with its errors. */
TG_API int tg_nn_adaptive_max_pool_new(tg_module **out, int n_spatial,
                                       const int64_t *output_size);
/* nn.MaxUnpool{1,2,3}d(kernel, stride, padding) over n_spatial dims (type
 * names "MaxUnpool1d", ...): no parameters or buffers; forward takes two
 * inputs, (x, indices) (tg_module_forward_n with n = 2), and is
 * tg_max_unpool with p's kernel, stride (0: the kernel) and padding and
 * the default output size (torch's forward(input, indices, output_size)
 * has a third argument; call tg_max_unpool for it).  TG_EINVAL for a NULL
 * out or p, n_spatial outside 1..3 or a kernel, stride or padding out of
 * range. */
TG_API int tg_nn_max_unpool_new(tg_module **out, int n_spatial, const tg_pool_params *p);
/* A MaxUnpoolNd's n_spatial and parameters (strides resolved). */
TG_API int tg_nn_max_unpool_params(const tg_module *m, int *n_spatial, tg_pool_params *p);
/* nn.LPPool{1,2}d(norm_type, kernel, stride, ceil_mode) (type names
 * "LPPool1d", "LPPool2d"): forward is tg_lp_pool.  p's padding must be 0
 * and its dilation 1; TG_EINVAL for a NULL out or p, n_spatial not 1 or 2,
 * a norm_type that is 0 or not finite, or a parameter out of range. */
TG_API int tg_nn_lp_pool_new(tg_module **out, int n_spatial, double norm_type,
                             const tg_pool_params *p);
/* An LPPoolNd's n_spatial, norm_type and parameters (strides resolved). */
TG_API int tg_nn_lp_pool_params(const tg_module *m, int *n_spatial, double *norm_type,
                                tg_pool_params *p);
/* nn.FractionalMaxPool{2,3}d(kernel, output_size | output_ratio) over
 * n_spatial (2 or 3) dims (type names "FractionalMaxPool2d", ...),
 * return_indices=False: forward is tg_fractional_max_pool with samples
 * U[0, 1) of x's dtype drawn for each call (the k-th forward from counter
 * block k << 40 of seed), as torch draws them with torch.rand.  kernel and
 * output_size or output_ratio (exactly one; NULL for the other) are
 * copied.  TG_EINVAL for a NULL out or kernel, n_spatial not 2 or 3, both
 * or neither of output_size and output_ratio, a kernel or output_size entry
 * outside [1, TG_POOL_MAX_PARAM] or a ratio outside (0, 1) (torch's
 * "output_ratio must be between 0 and 1"). */
TG_API int tg_nn_fractional_max_pool_new(tg_module **out, int n_spatial, const int64_t *kernel,
                                         const int64_t *output_size,
                                         const double *output_ratio, uint64_t seed);
/* nn.Upsample(scale_factor=scale, mode='linear' | 'bilinear' | 'trilinear'
 * for n_spatial 1, 2, 3, align_corners=align_corners) with integer factors
 * (type name "Upsample"): forward is tg_upsample_linear to the extents
 * S*scale. */
TG_API int tg_nn_upsample_linear_new(tg_module **out, int n_spatial, const int64_t *scale,
                                     bool align_corners);
/* nn.Upsample(scale_factor=scale, mode='bicubic', align_corners=...) with
 * integer factors scale[0..2) (type name "Upsample"): forward is
 * tg_upsample_bicubic to the extents S*scale. */
TG_API int tg_nn_upsample_bicubic_new(tg_module **out, const int64_t *scale, bool align_corners);
/* nn.UpsamplingNearest2d(scale_factor=scale) and
 * nn.UpsamplingBilinear2d(scale_factor=scale) with integer factors
 * scale[0..2): Upsample modules (type name "Upsample", torch's base class:
 * tg_nn_upsample_params reads them, ONNX export is Upsample's) of mode
 * nearest, and bilinear with align_corners=True.  torch's size= form has
 * no equivalent.  TG_EINVAL as tg_nn_upsample_new's. */
TG_API int tg_nn_upsampling_nearest2d_new(tg_module **out, const int64_t *scale);
TG_API int tg_nn_upsampling_bilinear2d_new(tg_module **out, const int64_t *scale);
/* An Upsample (type name "Upsample") of mode TG_UPSAMPLE_LINEAR (bilinear)
 * or TG_UPSAMPLE_BICUBIC with integer factors scale[0..2) whose forward is
 * tg_upsample_antialias to the extents S*scale: F.interpolate(x,
 * scale_factor=scale, mode=..., align_corners=..., antialias=True)
 * (torch's nn.Upsample has no antialias argument).  Enlarging, the filter
 * is the plain one but for bicubic's a = -0.5 and align_corners's scale
 * (tapegrad/pool.h).  TG_EINVAL for another mode, as tg_upsample_antialias. */
TG_API int tg_nn_upsample_antialias_new(tg_module **out, tg_upsample_mode mode,
                                        const int64_t *scale, bool align_corners);
/* A pooling module's n_spatial and parameters, with its strides resolved
 * (a stride given as 0 reads as the kernel); an Upsample's n_spatial and
 * its *n_spatial scale factors.  Out-pointers may be NULL; TG_EINVAL naming
 * the module's type for another module. */
TG_API int tg_nn_pool_params(const tg_module *m, int *n_spatial, tg_pool_params *p);
TG_API int tg_nn_upsample_params(const tg_module *m, int *n_spatial, int64_t *scale);
/* An AdaptiveAvgPoolNd's or AdaptiveMaxPoolNd's n_spatial and its
 * *n_spatial output extents as given (0: the input's); tg_module_type_name
 * tells the two apart.  Out-pointers may be NULL; TG_EINVAL naming the
 * module's type for another module. */
TG_API int tg_nn_adaptive_pool_params(const tg_module *m, int *n_spatial, int64_t *output_size);
/* An Upsample's mode and align_corners (false for nearest).  Out-pointers
 * may be NULL; TG_EINVAL for another module. */
TG_API int tg_nn_upsample_mode(const tg_module *m, tg_upsample_mode *mode, bool *align_corners);
/* Whether an Upsample filters with antialias (made by
 * tg_nn_upsample_antialias_new).  antialias may be NULL; TG_EINVAL for
 * another module. */
TG_API int tg_nn_upsample_antialias(const tg_module *m, bool *antialias);
/* nn.ELU(alpha): forward is tg_elu(x, alpha) (ops.h); torch's default alpha
 * is 1.  No parameters.  TG_EINVAL for a NULL out or an alpha that is not
 * finite.  tg_nn_elu_alpha reads alpha back (TG_EINVAL for a NULL argument
 * or another module). */
TG_API int tg_nn_elu_new(tg_module **out, double alpha);
TG_API int tg_nn_elu_alpha(const tg_module *m, double *alpha);
/* nn.Hardtanh(min_val, max_val) and nn.ReLU6 (Hardtanh(0, 6) under its own
 * name): forward is tg_hardtanh(x, min_val, max_val) (ops.h); torch's
 * defaults are -1 and 1.  No parameters.  TG_EINVAL for a NULL out or
 * max_val <= min_val (NaN too), as nn.Hardtanh refuses (tg_hardtanh itself
 * takes min_val = max_val).  tg_nn_hardtanh_bounds reads the bounds back
 * from either module (TG_EINVAL for a NULL argument or another module). */
TG_API int tg_nn_hardtanh_new(tg_module **out, double min_val, double max_val);
TG_API int tg_nn_relu6_new(tg_module **out);
TG_API int tg_nn_hardtanh_bounds(const tg_module *m, double *min_val, double *max_val);
/* nn.Hardsigmoid, nn.Hardswish and nn.Mish: forward is tg_hardsigmoid,
 * tg_hardswish or tg_mish (ops.h).  No parameters, no state.  TG_EINVAL for
 * a NULL out. */
TG_API int tg_nn_hardsigmoid_new(tg_module **out);
TG_API int tg_nn_hardswish_new(tg_module **out);
TG_API int tg_nn_mish_new(tg_module **out);
/* nn.PReLU(num_parameters, init): the parameter "weight" (num_parameters),
 * f32, each element init (torch's defaults: 1, 0.25); forward is
 * tg_prelu(x, weight) (ops.h), so num_parameters is 1 or x's channel count
 * (dim 1).  TG_EINVAL for a NULL out, num_parameters < 1 or an init that
 * is not finite. */
TG_API int tg_nn_prelu_new(tg_module **out, int64_t num_parameters, double init);
/* nn.Softplus(beta, threshold) (type name "Softplus"): forward is
 * tg_softplus(x, beta, threshold) (ops.h), x itself where beta x >
 * threshold; torch's defaults are 1 and 20.  No parameters or buffers.
 * TG_EINVAL for a NULL out, a beta that is not finite and > 0 (torch takes
 * any beta; tg_softplus does not) or a NaN threshold.  An infinite
 * threshold is allowed (+inf: never x). */
TG_API int tg_nn_softplus_new(tg_module **out, double beta, double threshold);
/* nn.LogSigmoid (type name "LogSigmoid"): forward is tg_logsigmoid (ops.h).
 * No parameters or buffers.  TG_EINVAL for a NULL out. */
TG_API int tg_nn_logsigmoid_new(tg_module **out);
/* nn.Softmax(dim) and nn.LogSoftmax(dim) (type names "Softmax",
 * "LogSoftmax"): forward is tg_softmax(x, dim) or tg_log_softmax(x, dim)
 * (ops.h), so dim counts from the end when negative and a dim outside x's
 * rank fails at the forward, as torch's.  dim is explicit: torch's dim=None
 * (a dim chosen by the input's rank, with a warning) has no equivalent.
 * No parameters or buffers.  TG_EINVAL for a NULL out or dim outside
 * [-TG_MAX_DIMS, TG_MAX_DIMS - 1]. */
TG_API int tg_nn_softmax_new(tg_module **out, int dim);
TG_API int tg_nn_log_softmax_new(tg_module **out, int dim);
/* nn.Softmax2d (type name "Softmax2d"): tg_softmax over the channels,
 * dim -3, of a (C, H, W) or (N, C, H, W) input; another rank is TG_ESHAPE
 * at the forward ("expected input to be 3D or 4D", torch's words).  Its
 * tg_nn_act_dim is -3.  TG_EINVAL for a NULL out. */
TG_API int tg_nn_softmax2d_new(tg_module **out);
/* nn.Identity (type name "Identity"): forward gives x itself (a new
 * reference to the same tensor), as torch's.  TG_EINVAL for a NULL out. */
TG_API int tg_nn_identity_new(tg_module **out);
/* What a Softplus was made with (a Softmax's or LogSoftmax's dim:
 * tg_nn_act_dim below).  Out-pointers may be NULL; TG_EINVAL for a NULL m
 * or, naming its type, another module. */
TG_API int tg_nn_softplus_params(const tg_module *m, double *beta, double *threshold);
/* nn.SELU, nn.Softsign and nn.Tanhshrink (type names "SELU", "Softsign",
 * "Tanhshrink"): forward is tg_selu, tg_softsign or tg_tanhshrink (ops.h).
 * nn.CELU(alpha) ("CELU"): tg_celu(x, alpha), torch's default alpha 1;
 * TG_EINVAL for an alpha that is 0 or not finite, as tg_celu.
 * nn.Hardshrink(lambd) and nn.Softshrink(lambd) ("Hardshrink",
 * "Softshrink"): tg_hardshrink or tg_softshrink(x, lambd), torch's default
 * lambd 0.5; TG_EINVAL for a NaN lambd, or a Softshrink lambd < 0, as the
 * ops.  nn.Threshold(threshold, value) ("Threshold"): tg_threshold(x,
 * threshold, value), any numbers; an integer x keeps its dtype and the op
 * refuses, at the forward, a NaN threshold or a value outside x's range.
 * nn.GLU(dim) and nn.Softmin(dim) ("GLU", "Softmin"): tg_glu(x, dim) and
 * tg_softmin(x, dim), torch's GLU default dim -1 (Softmin's dim is explicit,
 * as Softmax's); dim counts from the end when negative and is checked
 * against x's rank at the forward; TG_EINVAL for dim outside
 * [-TG_MAX_DIMS, TG_MAX_DIMS - 1].  No parameters or buffers.  TG_EINVAL
 * for a NULL out. */
TG_API int tg_nn_selu_new(tg_module **out);
TG_API int tg_nn_celu_new(tg_module **out, double alpha);
TG_API int tg_nn_hardshrink_new(tg_module **out, double lambd);
TG_API int tg_nn_softshrink_new(tg_module **out, double lambd);
TG_API int tg_nn_threshold_new(tg_module **out, double threshold, double value);
TG_API int tg_nn_glu_new(tg_module **out, int dim);
TG_API int tg_nn_softsign_new(tg_module **out);
TG_API int tg_nn_tanhshrink_new(tg_module **out);
TG_API int tg_nn_softmin_new(tg_module **out, int dim);
/* The one number a CELU (alpha), Hardshrink or Softshrink (lambd) was made
 * with; a Threshold's threshold and value; the dim of a Softmax,
 * LogSoftmax, Softmin or GLU as given, -3 for a Softmax2d
 * (tg_module_type_name tells the kinds apart).  Out-pointers may be NULL;
 * TG_EINVAL for a NULL m or, naming its type, another module. */
TG_API int tg_nn_act_number(const tg_module *m, double *value);
TG_API int tg_nn_threshold_params(const tg_module *m, double *threshold, double *value);
TG_API int tg_nn_act_dim(const tg_module *m, int *dim);
/* nn.Embedding(num_embeddings, dim): weight (num_embeddings, dim) ~ N(0, 1);
 * forward takes integer indices (...) and gives (..., dim) (tg_embedding). */
TG_API int tg_nn_embedding_new(tg_module **out, int64_t num_embeddings, int64_t dim,
                               tg_rng *rng);
/* The same with F.embedding's options (tg_embedding_opts in ops.h; NULL: the
 * defaults), as nn.Embedding(V, D, padding_idx, max_norm, norm_type,
 * scale_grad_by_freq): padding_idx's row of the weight starts at 0 and a
 * negative one is kept counted from the start, as torch's.  An option
 * outside its range is TG_EINVAL here, before any forward. */
TG_API int tg_nn_embedding_new_ex(tg_module **out, int64_t num_embeddings, int64_t dim,
                                  const tg_embedding_opts *opts, tg_rng *rng);
/* nn.Embedding.from_pretrained(embeddings, freeze, ...): the weight is a
 * copy of embeddings (V, D) of a float dtype (borrowed; torch shares its
 * storage), which requires grad unless freeze (an optimizer then skips it);
 * padding_idx's row is kept as given. */
TG_API int tg_nn_embedding_from_pretrained(tg_module **out, tg_tensor *embeddings, bool freeze,
                                           const tg_embedding_opts *opts);
/* The options an Embedding was made with (padding_idx counted from the
 * start); TG_EINVAL for NULL arguments or, naming its type, another module. */
TG_API int tg_nn_embedding_options(const tg_module *m, tg_embedding_opts *opts);
/* nn.EmbeddingBag(num_embeddings, dim, ...) (type name "EmbeddingBag"):
 * weight (num_embeddings, dim) ~ N(0, 1), padding_idx's row zeroed;
 * forward is tg_embedding_bag with opts (NULL: TG_EMBEDDING_BAG_OPTS_INIT,
 * mode mean) and takes (input) or (input, per_sample_weights) for a 2-d
 * input, (input, offsets) or (input, offsets, per_sample_weights) for a
 * 1-d one (tg_module_forward_n).  TG_EINVAL for a NULL out or rng,
 * extents below 1, a bad mode or padding_idx, or max with sparse or
 * scale_grad_by_freq. */
TG_API int tg_nn_embedding_bag_new(tg_module **out, int64_t num_embeddings, int64_t dim,
                                   const tg_embedding_bag_opts *opts, tg_rng *rng);
/* nn.EmbeddingBag.from_pretrained(embeddings, freeze, ...): the weight is a
 * copy of embeddings (V, D) of a float dtype (borrowed), not requiring
 * grad when freeze; its padding_idx row is kept as it is, as torch's. */
TG_API int tg_nn_embedding_bag_from_pretrained(tg_module **out, tg_tensor *embeddings,
                                               bool freeze, const tg_embedding_bag_opts *opts);
/* An EmbeddingBag's options (padding_idx counted from the start). */
TG_API int tg_nn_embedding_bag_options(const tg_module *m, tg_embedding_bag_opts *opts);
/* nn.Sequential: its forward runs the children in order.  A child of k > 1
 * outputs (tg_module_output_count) hands all k to the next child when that
 * one takes k inputs (a MaxPoolNd with return_indices, then a MaxUnpoolNd),
 * its first output otherwise, and the Sequential's output is its last
 * child's first (torch's Sequential passes the tuple on as one argument,
 * which a MaxUnpoolNd refuses).  A child's failure
 * keeps its status, its message led by the child's path and type: "in
 * enc.2 (Linear): linear: x is (3, 7) and w is (2, 6): ..." (nested
 * Sequentials join their names with dots). */
TG_API int tg_nn_sequential_new(tg_module **out);
/* Appends child (steals it, also on error) under the name "<count>". */
TG_API int tg_nn_sequential_append(tg_module *seq, tg_module *child);

/* ---- recurrent layers ----
 *
 * nn.RNNCell, nn.LSTMCell, nn.GRUCell, nn.RNN, nn.LSTM and nn.GRU as torch
 * 1.13 has them (type names "RNNCell", ..., "GRU"), made of recorded
 * differentiable ops (tg_linear, tg_sigmoid, tg_tanh, tg_mul, ...), so
 * gradients of every order flow through them.  With H = hidden_size and
 * x W^T + b a tg_linear, one step from the input x_t and the state h (and
 * c) is torch's:
 *   RNN:  h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (relu with
 *         TG_RNN_RELU)
 *   LSTM: i, f, g, o = the four H-wide blocks of x W_ih^T + b_ih +
 *         h W_hh^T + b_hh; c' = sig(f) c + sig(i) tanh(g);
 *         h' = sig(o) tanh(c') (then h' W_hr^T with proj_size)
 *   GRU:  r, z, n blocks of gi = x W_ih^T + b_ih and gh = h W_hh^T + b_hh;
 *         r = sig(gi_r + gh_r), z = sig(gi_z + gh_z),
 *         n = tanh(gi_n + r gh_n), h' = (h - n) z + n
 * Parameters (f32; tg_module_to_dtype converts) with torch's names, shapes
 * and state-dict order; G is 1, 4 or 3 gates:
 *   cells:  weight_ih (G H, input_size), weight_hh (G H, H), bias_ih and
 *           bias_hh (G H) when bias;
 *   layers: for each layer k, then each direction (sfx "" and, when
 *           bidirectional, "_reverse"): weight_ih_l{k}{sfx} (G H, in) with
 *           in = input_size for k = 0, else D * H_out, weight_hh_l{k}{sfx}
 *           (G H, H_out), bias_ih_l{k}{sfx}, bias_hh_l{k}{sfx} (G H) when
 *           bias, weight_hr_l{k}{sfx} (proj_size, H) when proj_size > 0;
 *           D = 2 when bidirectional, else 1, and H_out = proj_size when
 *           it is > 0, else H.
 * Every parameter is drawn from U(-1/sqrt(H), 1/sqrt(H)) with rng in
 * registration order: torch's law, not its numbers (load torch's state
 * dict for those).  The inputs and states must have the parameters'
 * dtype (TG_EDTYPE otherwise, as torch).  Errors name the argument and the
 * rule; on error nothing is written and no module changes. */
typedef enum tg_rnn_nonlinearity { TG_RNN_TANH, TG_RNN_RELU } tg_rnn_nonlinearity;

/* The options of nn.RNN, nn.LSTM and nn.GRU with torch's defaults
 * (TG_RNN_OPTS_INIT).  dropout: in training, the output of every layer but
 * the last goes through tg_dropout with probability dropout (eval: none);
 * the mask of the k-th training forward that draws depends only on (seed,
 * k), as a Dropout module's.  proj_size: LSTM only (0 for the others).
 * nonlinearity: RNN only (TG_RNN_TANH for the others). */
typedef struct tg_rnn_opts {
    int num_layers;                     /* >= 1; 1 */
    bool bias;                          /* true */
    bool batch_first;                   /* false */
    double dropout;                     /* in [0, 1]; 0 */
    bool bidirectional;                 /* false */
    int64_t proj_size;                  /* in [0, hidden_size); 0 */
    tg_rnn_nonlinearity nonlinearity;   /* TG_RNN_TANH */
    uint64_t seed;                      /* of the dropout masks; 0 */
} tg_rnn_opts;
#define TG_RNN_OPTS_INIT                                                      \
    {.num_layers = 1, .bias = true, .batch_first = false, .dropout = 0,       \
     .bidirectional = false, .proj_size = 0, .nonlinearity = TG_RNN_TANH,     \
     .seed = 0}

/* nn.RNNCell(input_size, hidden_size, bias, nonlinearity), nn.LSTMCell and
 * nn.GRUCell(input_size, hidden_size, bias).  TG_EINVAL for a NULL out or
 * rng, a size < 1 or a nonlinearity that is not a tg_rnn_nonlinearity. */
TG_API int tg_nn_rnn_cell_new(tg_module **out, int64_t input_size, int64_t hidden_size,
                              bool bias, tg_rnn_nonlinearity nonlinearity, tg_rng *rng);
TG_API int tg_nn_lstm_cell_new(tg_module **out, int64_t input_size, int64_t hidden_size,
                               bool bias, tg_rng *rng);
TG_API int tg_nn_gru_cell_new(tg_module **out, int64_t input_size, int64_t hidden_size,
                              bool bias, tg_rng *rng);
/* One step of an RNNCell or GRUCell: x (N, input_size) (N >= 0) or unbatched
 * (input_size), hx (N, H) or (H) to match, NULL for zeros; *h gets the new
 * state (N, H) or (H), a new reference.  The LSTMCell's takes and gives
 * h and c (c (N, H) or (H); hx or cx NULL: zeros).  h or c may be NULL
 * when not wanted.  tg_module_forward(m, &h, x) gives h from a zero state;
 * tg_module_forward_n takes (x, hx) for RNNCell and GRUCell, (x, hx, cx)
 * for LSTMCell.  TG_ESHAPE for sizes that do not match (the message names
 * the argument), TG_EDTYPE for a dtype other than the parameters',
 * TG_EINVAL for a NULL m or x or a module of another kind. */
TG_API int tg_nn_rnn_cell_forward(tg_module *m, tg_tensor **h, tg_tensor *x, tg_tensor *hx);
TG_API int tg_nn_lstm_cell_forward(tg_module *m, tg_tensor **h, tg_tensor **c, tg_tensor *x,
                                   tg_tensor *hx, tg_tensor *cx);
/* nn.RNN, nn.LSTM and nn.GRU(input_size, hidden_size, **opts) (opts NULL:
 * TG_RNN_OPTS_INIT).  TG_EINVAL for a NULL out or rng, a size < 1,
 * num_layers < 1, dropout outside [0, 1], a nonlinearity that is not a
 * tg_rnn_nonlinearity or given to an LSTM or GRU, a proj_size outside
 * [0, hidden_size) or given to an RNN or GRU. */
TG_API int tg_nn_rnn_new(tg_module **out, int64_t input_size, int64_t hidden_size,
                         const tg_rnn_opts *opts, tg_rng *rng);
TG_API int tg_nn_lstm_new(tg_module **out, int64_t input_size, int64_t hidden_size,
                          const tg_rnn_opts *opts, tg_rng *rng);
TG_API int tg_nn_gru_new(tg_module **out, int64_t input_size, int64_t hidden_size,
                         const tg_rnn_opts *opts, tg_rng *rng);
/* The forward of an RNN or GRU (tg_nn_rnn_forward) or an LSTM
 * (tg_nn_lstm_forward), as torch's:
 *   input  (L, N, input_size), (N, L, input_size) with batch_first, or
 *          unbatched (L, input_size); L >= 1, N >= 0 (N = 0 gives
 *          empty output, h_n and c_n, as torch);
 *   h_0    (D num_layers, N, H_out), or (D num_layers, H_out) for an
 *          unbatched input (never batch first); NULL for zeros;
 *   c_0    (D num_layers, N, H) or (D num_layers, H), LSTM only; NULL for
 *          zeros (h_0 and c_0 may each be NULL on its own, the other one
 *          given: torch takes the two as one tuple, both or neither);
 *   output (L, N, D H_out) (batch_first: (N, L, D H_out), a transposed
 *          view as torch's) or (L, D H_out): the last layer's h at every
 *          step, the two directions side by side;
 *   h_n, c_n  the final states in h_0's and c_0's shapes, ordered layer
 *          0, layer 0 reverse, layer 1, ...
 * New references; any of output, h_n, c_n may be NULL when not wanted.
 * tg_module_forward(m, &output, input) gives the output from zero states;
 * tg_module_forward_n takes (input, h_0), or (input, h_0, c_0) for an
 * LSTM.  Errors as the cells'. */
TG_API int tg_nn_rnn_forward(tg_module *m, tg_tensor **output, tg_tensor **h_n,
                             tg_tensor *input, tg_tensor *h_0);
TG_API int tg_nn_lstm_forward(tg_module *m, tg_tensor **output, tg_tensor **h_n,
                              tg_tensor **c_n, tg_tensor *input, tg_tensor *h_0,
                              tg_tensor *c_0);
/* torch.nn.utils.rnn.pad_sequence(seqs, batch_first, padding_value): the
 * n >= 1 sequences seqs[i] (L_i, *) (borrowed; the dims after the first
 * alike) padded at the end of dim 0 with padding_value to L = max L_i and
 * stacked: *out (new reference) is (L, n, *), or (n, L, *) with
 * batch_first, in seqs[0]'s dtype (the others are cast to it, as torch
 * copies them).  Differentiable to any order: each sequence gets its slice
 * of the gradient.  With the lengths L_i it is the input of the forwards
 * over sequences of different lengths below.  TG_EINVAL for NULL out or
 * seqs, n < 1 or a NULL sequence; TG_ESHAPE, naming the sequence, for a
 * 0-d one or dims after the first that differ from seqs[0]'s; on error
 * *out is not written. */
TG_API int tg_pad_sequence(tg_tensor **out, int n, tg_tensor *const *seqs, bool batch_first,
                           double padding_value);
/* The forwards over sequences of different lengths: torch's
 *   packed = pack_padded_sequence(input, lengths, batch_first,
 *                                 enforce_sorted=False)
 *   out, h_n (or (h_n, c_n)) = m(packed, h_0 (or (h_0, c_0)))
 *   output, _ = pad_packed_sequence(out, batch_first, total_length=L)
 * in one call.  lengths: i64 (or i32) (N), borrowed, in any order, each in
 * [1, L]: batch row b holds lengths[b] valid steps, 0 .. lengths[b] - 1,
 * and the input's other steps are padding: their values (NaN too)
 * change nothing, and their gradients are zero.  The output is zero at the
 * padded steps; h_n and c_n hold each row's state after its last valid
 * step: for the forward direction, after step lengths[b] - 1; for the
 * reverse direction, which starts at step lengths[b] - 1, after step 0.
 * All in the input's batch order.  The input must be batched (3-d);
 * everything else as tg_nn_rnn_forward and tg_nn_lstm_forward (dropout,
 * proj_size, batch_first, bidirectional).  With every length L the results
 * are those of the plain forwards.  TG_EINVAL, naming lengths and the
 * rule, for a NULL lengths, a dtype other than i64 and i32, a shape other
 * than (N) or a length outside [1, L]; TG_ESHAPE for an unbatched input
 * or N = 0 (torch cannot pack an empty batch); on error nothing is
 * written. */
TG_API int tg_nn_rnn_forward_packed(tg_module *m, tg_tensor **output, tg_tensor **h_n,
                                    tg_tensor *input, const tg_tensor *lengths,
                                    tg_tensor *h_0);
TG_API int tg_nn_lstm_forward_packed(tg_module *m, tg_tensor **output, tg_tensor **h_n,
                                     tg_tensor **c_n, tg_tensor *input,
                                     const tg_tensor *lengths, tg_tensor *h_0,
                                     tg_tensor *c_0);
/* ---- packed sequences: torch.nn.utils.rnn.PackedSequence ----
 *
 * N sequences of different lengths packed step by step, as torch's
 * PackedSequence: with the sequences ordered longest first (ties keep
 * their batch order), step t of data holds the rows of the batch_sizes[t]
 * sequences longer than t, longest first.  For the lengths (3, 1, 2) of
 * rows 0, 1, 2: sorted_indices (0, 2, 1), batch_sizes (3, 2, 1) and data
 * the rows x0[0] x2[0] x1[0] x0[1] x2[1] x0[2].
 *
 * Ownership: the struct holds one reference to each of its non-NULL
 * tensors; tg_packed_sequence_release releases them.  The functions that
 * fill a tg_packed_sequence write four new references (the indices NULL
 * when the lengths were sorted, enforce_sorted) over *out's old contents
 * without releasing them; an open scope does not capture them, so release
 * the struct inside a scope too.  The functions that read one borrow it
 * and check it first (TG_EINVAL naming the field and the rule): data at
 * least 1-d; batch_sizes i64 (T), T >= 1, each >= 1, non-increasing,
 * summing to data's first extent; sorted_indices and unsorted_indices
 * both NULL or both i64 (N = batch_sizes[0]), a permutation and its
 * inverse. */
typedef struct tg_packed_sequence {
    tg_tensor *data;               /* (sum of the lengths, *) */
    tg_tensor *batch_sizes;        /* i64 (T): rows of data at each step */
    tg_tensor *sorted_indices;     /* i64 (N): the batch row of the k-th
                                      longest sequence; or NULL */
    tg_tensor *unsorted_indices;   /* i64 (N): its inverse; or NULL */
} tg_packed_sequence;
#define TG_PACKED_SEQUENCE_INIT {NULL, NULL, NULL, NULL}
/* Releases ps's four tensors and sets them NULL; NULL ps does nothing. */
TG_API void tg_packed_sequence_release(tg_packed_sequence *ps);
/* torch.nn.utils.rnn.pack_padded_sequence(input, lengths, batch_first,
 * enforce_sorted): input (T, N, *) (batch_first: (N, T, *)), borrowed;
 * lengths i64 or i32 (N), borrowed, each in [1, T] (torch refuses a length
 * <= 0), row b holding lengths[b] valid steps.  With enforce_sorted the
 * lengths must be non-increasing and the indices are NULL.  data is one
 * recorded index_select of input, so input's gradient is data's at the
 * valid steps and zero at the others, to any order.  TG_EINVAL for NULL
 * arguments, a lengths of another dtype or shape, a length outside
 * [1, T] or, with enforce_sorted, lengths not sorted in decreasing
 * order; TG_ESHAPE for an input of fewer than 2 dims or N = 0; on error
 * *out is not written. */
TG_API int tg_pack_padded_sequence(tg_packed_sequence *out, tg_tensor *input,
                                   const tg_tensor *lengths, bool batch_first,
                                   bool enforce_sorted);
/* torch.nn.utils.rnn.pad_packed_sequence(packed, batch_first,
 * padding_value, total_length): *out (new reference) is (T', N, *)
 * (batch_first: (N, T', *)) in the batch order packed came from, row b
 * holding its sequence, then padding_value; T' = total_length, or T when
 * total_length is -1 (torch's None).  *out_lengths (new reference; NULL
 * when not wanted) is i64 (N), each row's length.  Both go to an open
 * scope.  Differentiable to any order: data's gradient is out's at the
 * valid steps.  TG_EINVAL for NULL out or packed, a packed that breaks
 * the rules above, a total_length other than -1 below T or a
 * padding_value data's dtype cannot hold; on error nothing is written. */
TG_API int tg_pad_packed_sequence(tg_tensor **out, tg_tensor **out_lengths,
                                  const tg_packed_sequence *packed, bool batch_first,
                                  double padding_value, int64_t total_length);
/* torch.nn.utils.rnn.pack_sequence(seqs, enforce_sorted): the n >= 1
 * sequences seqs[i] (L_i, *) (borrowed; the dims after the first alike,
 * cast to seqs[0]'s dtype) packed as tg_pack_padded_sequence packs their
 * tg_pad_sequence with the lengths L_i.  Differentiable: each sequence
 * gets its rows' gradient.  TG_EINVAL for NULL out or seqs, n < 1, a NULL
 * sequence, a length L_i of 0 or, with enforce_sorted, lengths not in
 * decreasing order; TG_ESHAPE as tg_pad_sequence; on error *out is not
 * written. */
TG_API int tg_pack_sequence(tg_packed_sequence *out, int n, tg_tensor *const *seqs,
                            bool enforce_sorted);
/* An RNN or GRU (tg_nn_rnn_forward_packed_sequence) or an LSTM
 * (tg_nn_lstm_forward_packed_sequence) called with a packed sequence, as
 * torch's module is: input's data is (sum of lengths, input_size) (the
 * module's batch_first does not apply); *output gets the last layer's h at
 * every valid step, (sum of lengths, D H_out), packed as input is (its
 * batch_sizes and indices are input's, retained); h_0, c_0, h_n and c_n
 * are (D num_layers, N, H_out or H) in the batch order the sequences came
 * from (torch permutes them by sorted_indices and back).  Computed as
 * tg_pad_packed_sequence, the forwards over lengths above, then packing:
 * differentiable to any order, the same numbers.  output as a packed
 * sequence above (not captured by a scope); h_n and c_n new references
 * (NULL when not wanted) captured by an open scope.  TG_EINVAL for a NULL
 * m, output or input, output and input one place, a module of another
 * kind or a packed sequence that breaks the rules above; TG_ESHAPE for a
 * data that is not (S, input_size); the forwards' errors otherwise; on
 * error nothing is written. */
TG_API int tg_nn_rnn_forward_packed_sequence(tg_module *m, tg_packed_sequence *output,
                                             tg_tensor **h_n, const tg_packed_sequence *input,
                                             tg_tensor *h_0);
TG_API int tg_nn_lstm_forward_packed_sequence(tg_module *m, tg_packed_sequence *output,
                                              tg_tensor **h_n, tg_tensor **c_n,
                                              const tg_packed_sequence *input, tg_tensor *h_0,
                                              tg_tensor *c_0);
/* What a recurrent module (cell or layer) was made with; a cell reads as
 * one layer of its options.  Out-pointers may be NULL; TG_EINVAL for a
 * NULL m or, naming its type, another module. */
TG_API int tg_nn_rnn_options(const tg_module *m, int64_t *input_size, int64_t *hidden_size,
                             tg_rnn_opts *opts);

/* DCGAN's weights_init: every Linear/Conv/ConvTranspose weight ~ N(mean, std)
 * (their biases unchanged); every affine BatchNorm weight ~ N(1, std) and
 * bias = 0.  Modules are visited in state-dict order.  For synchronised
 * BatchNorm, initialise the plain model, then convert it
 * (tg_dist_convert_sync_batchnorm keeps the values). */
TG_API int tg_nn_init_normal(tg_module *m, double mean, double std, tg_rng *rng);

/* torch.nn.utils.spectral_norm(m, name, n_power_iterations, eps, dim): m's
 * parameter `name` is divided by its largest singular value sigma at every
 * forward, as SNGAN's discriminators use.  In place, as torch: the parameter
 * (the same tensor, so an optimizer made before still holds it) is renamed
 * "<name>_orig" and moved to the end of m's parameters, and buffers
 * "<name>_u" (h) and "<name>_v" (w) are added, for W (h, w) the parameter
 * with dim `dim` moved first and the others flattened.  The state dict keys
 * are torch's ("weight_orig", "weight_u", "weight_v" next to "bias"), so
 * state dicts and checkpoints load both ways.  u and v start as N(0, 1)
 * draws from rng, normalized: the same law as torch's, not its numbers
 * (load torch's buffers to get its values).
 *
 * Each forward of m first computes `name` = <name>_orig / sigma, then runs
 * m's own forward, which reads it (tg_module_find(m, name) gives the value
 * the last forward used; before the first, the eval-mode value).  In
 * training, n_power_iterations steps v = normalize(W^T u),
 * u = normalize(W v), with normalize(x) = x / max(|x|, eps), update u and v
 * in place without recording; then sigma = u . (W v) is recorded with u and
 * v held constant, so the gradient of <name>_orig includes sigma's, as
 * torch's.  In eval, the stored u and v are used as they are, without
 * iterating (an ONNX export uses this weight).  The computation runs in the
 * parameter's dtype, also under autocast.  A forward writes to m (the
 * computed weight; u and v in training), so two threads must not run the
 * same spectral-normed module at once.
 *
 * Works with any module whose forward reads the parameter by name (Linear,
 * Conv, ConvTranspose, Embedding, a custom module using tg_module_find).
 * dim -1 is torch's default: 1 for ConvTranspose (whose weight is (C_in,
 * C_out/groups, K...)), 0 otherwise.  Errors (TG_EINVAL, TG_ESHAPE for a
 * 0-d parameter): m has no parameter `name`, spectral norm is already
 * applied to it, a name "<name>_orig/_u/_v" is taken, n_power_iterations < 1,
 * eps <= 0, dim outside [0, ndim) and not -1.  On error m is unchanged. */
TG_API int tg_nn_spectral_norm(tg_module *m, const char *name, int n_power_iterations,
                               double eps, int dim, tg_rng *rng);
/* torch.nn.utils.remove_spectral_norm(m, name): `name` becomes a plain
 * parameter again, holding the weight computed with the stored u and v
 * (the eval-mode weight, not recorded) as a new tensor, last among m's
 * parameters (torch's order: "bias", "weight"); "<name>_orig", "<name>_u"
 * and "<name>_v" are released.  An optimizer made before still holds
 * <name>_orig, not the new parameter.  TG_EINVAL when spectral norm is not
 * applied to m's `name`; on error m is unchanged. */
TG_API int tg_nn_remove_spectral_norm(tg_module *m, const char *name);

/* torch.nn.utils.weight_norm(m, name, dim)'s dim=None: the norm of the
 * whole weight, one g. */
#define TG_NN_WEIGHT_NORM_NONE (-1)

/* torch.nn.utils.weight_norm(m, name, dim): m's parameter `name` becomes
 * name_v * (name_g / ||name_v||) at every forward, the norm over every dim
 * but dim (tg_weight_norm, ops.h), as HiFi-GAN's and MelGAN's layers use.
 * In place, as torch 1.13: the parameter `name` is removed, then
 * "<name>_g" (a new tensor: the weight's norm_except_dim, of shape
 * (1, .., size(dim), .., 1), 0-d for dim TG_NN_WEIGHT_NORM_NONE) and
 * "<name>_v" (the weight's tensor itself, renamed) are registered, last, so
 * the state dict reads "bias", "weight_g", "weight_v", torch's keys in
 * torch's order: state dicts, safetensors and checkpoints load both ways.
 * The first forward's weight equals the old one (up to rounding).
 * Optimizers made afterwards see g and v.
 *
 * dim: torch's default is 0 for every module, ConvTranspose too (whose
 * weight is (C_in, C_out/groups, K...): one g per input channel, unlike
 * spectral norm's default); -1 (TG_NN_WEIGHT_NORM_NONE) is torch's
 * dim=None; other negative dims count from the end, as torch's.  Each
 * forward of m computes `name` first, recorded, so g and v get gradients
 * of every order; tg_module_find(m, name) gives the value the last forward
 * used (before the first: the initial one), and an ONNX export holds that
 * weight.  The computation runs in the parameters' dtype, also under
 * autocast.  A forward writes the computed weight to m, so two threads
 * must not run the same module at once.
 *
 * Works with any module whose forward reads the parameter by name (Linear,
 * Conv, ConvTranspose, Embedding, a custom module using tg_module_find).
 * Errors (TG_EINVAL): m or name NULL, m has no parameter `name`, weight
 * norm (or spectral norm) is already applied to it, "<name>_g" or
 * "<name>_v" is taken, dim outside [-ndim, ndim) and not -1.  On error m
 * is unchanged. */
TG_API int tg_nn_weight_norm(tg_module *m, const char *name, int dim);
/* torch.nn.utils.remove_weight_norm(m, name): `name` becomes a plain
 * parameter again, holding the current computed weight (not recorded) as a
 * new tensor, last among m's parameters (torch's order: "bias",
 * "weight"); "<name>_g" and "<name>_v" are released.  TG_EINVAL when
 * weight norm is not applied to m's `name`; on error m is unchanged. */
TG_API int tg_nn_remove_weight_norm(tg_module *m, const char *name);

/* ---- loss modules ----
 *
 * torch.nn's loss classes, each a module whose forward calls the loss
 * function of tapegrad/loss.h with the options given at construction, so
 * its output is that function's, bit for bit.  The type name is torch's
 * class name ("CrossEntropyLoss", ...).  No parameters.  The forward takes
 * torch's forward arguments in torch's order through tg_module_forward_n:
 *   2 inputs (input, target): MSELoss, L1Loss, CrossEntropyLoss, NLLLoss,
 *     BCELoss, BCEWithLogitsLoss, HuberLoss, SmoothL1Loss, KLDivLoss,
 *     HingeEmbeddingLoss, SoftMarginLoss, MultiMarginLoss,
 *     MultiLabelMarginLoss, MultiLabelSoftMarginLoss, PoissonNLLLoss;
 *   3 inputs: MarginRankingLoss and CosineEmbeddingLoss (input1, input2,
 *     target), TripletMarginLoss (anchor, positive, negative),
 *     GaussianNLLLoss (input, target, var);
 *   4 inputs: CTCLoss (log_probs, targets, input_lengths, target_lengths).
 * Any other count (tg_module_forward's one included, so a loss appended to
 * a Sequential) is TG_EINVAL before the forward runs.
 *
 * The class weights torch registers as buffers are buffers here, under
 * torch's names, so state dicts match torch's: "weight" (CrossEntropyLoss,
 * NLLLoss, BCELoss, BCEWithLogitsLoss, MultiMarginLoss,
 * MultiLabelSoftMarginLoss) and "pos_weight" (BCEWithLogitsLoss); a NULL
 * weight registers nothing, as torch's register_buffer(name, None).  Each
 * is a detached contiguous copy of the tensor given (borrowed; torch keeps
 * the tensor itself), so tg_module_to_dtype converts it with the module
 * and the caller's tensor never changes.  weight and pos_weight must be
 * float tensors; those of CrossEntropyLoss, NLLLoss and MultiMarginLoss
 * 1-d (C), the others any shape that broadcasts at the forward.
 *
 * red is MEAN, SUM or NONE (KLDivLoss: BATCHMEAN too); torch's default is
 * MEAN.  Errors: TG_EINVAL, naming the argument and the rule, for a NULL
 * out, another reduction, a weight of another dtype or shape, a NaN
 * number or one out of its function's range (given with each); nothing is
 * made then.  Forward errors are the functions'. */
TG_API int tg_nn_mse_loss_new(tg_module **out, tg_reduction red);
TG_API int tg_nn_l1_loss_new(tg_module **out, tg_reduction red);
/* nn.CrossEntropyLoss(weight, ignore_index, reduction, label_smoothing):
 * tg_log_softmax over the class dim (1; 0 for an input (C) of one sample),
 * then tg_nll_loss(logp, target, weight, red, ignore_index), so input (N,
 * C), (N, C, d1, ...) or (C) with i64 class indices target (N), (N, d1,
 * ...) or 0-d.  With label_smoothing e in [0, 1] (torch's default 0):
 * (1 - e) nll + e / C * s, s the sum over classes of -weight[c] logp[c]
 * per sample (0 where the target is ignore_index), reduced by red as
 * torch's: MEAN divides by the weights of the targets not ignored (their
 * count without weight).  Without weight, ignore_index -100 and e = 0 this
 * is tg_cross_entropy.  A float target of input's shape (TG_ESHAPE
 * otherwise) holds class probabilities p, as torch 1.13's: the loss is
 * -sum_c w[c] p'[c] logp[c] per sample, p' = (1 - e) p + e / C, MEAN
 * dividing the sum by the number of samples (numel / C); ignore_index plays
 * no part then. */
TG_API int tg_nn_cross_entropy_loss_new(tg_module **out, tg_tensor *weight,
                                        int64_t ignore_index, tg_reduction red,
                                        double label_smoothing);
/* nn.NLLLoss(weight, ignore_index, reduction): tg_nll_loss. */
TG_API int tg_nn_nll_loss_new(tg_module **out, tg_tensor *weight, int64_t ignore_index,
                              tg_reduction red);
/* nn.BCELoss(weight, reduction): tg_bce_loss. */
TG_API int tg_nn_bce_loss_new(tg_module **out, tg_tensor *weight, tg_reduction red);
/* nn.BCEWithLogitsLoss(weight, reduction, pos_weight):
 * tg_bce_with_logits_weighted, tg_bce_with_logits when both are NULL. */
TG_API int tg_nn_bce_with_logits_loss_new(tg_module **out, tg_tensor *weight,
                                          tg_reduction red, tg_tensor *pos_weight);
/* nn.HuberLoss(reduction, delta): tg_huber_loss, delta > 0 (torch's
 * default 1).  nn.SmoothL1Loss(reduction, beta): tg_smooth_l1_loss,
 * beta >= 0 (torch's default 1). */
TG_API int tg_nn_huber_loss_new(tg_module **out, tg_reduction red, double delta);
TG_API int tg_nn_smooth_l1_loss_new(tg_module **out, tg_reduction red, double beta);
/* nn.KLDivLoss(reduction, log_target): tg_kl_div; red may be BATCHMEAN. */
TG_API int tg_nn_kl_div_loss_new(tg_module **out, tg_reduction red, bool log_target);
/* nn.MarginRankingLoss(margin, reduction) (torch's default margin 0),
 * nn.HingeEmbeddingLoss(margin, reduction) (1) and
 * nn.CosineEmbeddingLoss(margin, reduction) (0): the functions of the same
 * names. */
TG_API int tg_nn_margin_ranking_loss_new(tg_module **out, double margin, tg_reduction red);
TG_API int tg_nn_hinge_embedding_loss_new(tg_module **out, double margin, tg_reduction red);
TG_API int tg_nn_cosine_embedding_loss_new(tg_module **out, double margin, tg_reduction red);
/* nn.TripletMarginLoss(margin, p, eps, swap, reduction): torch's defaults
 * 1, 2, 1e-6, false. */
TG_API int tg_nn_triplet_margin_loss_new(tg_module **out, double margin, double p, double eps,
                                         bool swap, tg_reduction red);
/* nn.TripletMarginWithDistanceLoss(distance_function, margin, swap,
 * reduction): tg_triplet_margin_with_distance_loss with distance and user
 * (NULL distance: pairwise_distance, torch's None); torch's defaults NULL,
 * 1, false.  user is borrowed: it must outlive the module and its copies
 * (tg_module_copy shares it).  margin > 0 (TG_EINVAL). */
TG_API int tg_nn_triplet_margin_with_distance_loss_new(tg_module **out, tg_distance_fn distance,
                                                       void *user, double margin, bool swap,
                                                       tg_reduction red);
/* nn.SoftMarginLoss(reduction) and nn.MultiLabelMarginLoss(reduction). */
TG_API int tg_nn_soft_margin_loss_new(tg_module **out, tg_reduction red);
TG_API int tg_nn_multilabel_margin_loss_new(tg_module **out, tg_reduction red);
/* nn.MultiMarginLoss(p, margin, weight, reduction): p 1 or 2 (torch's
 * defaults 1, 1). */
TG_API int tg_nn_multi_margin_loss_new(tg_module **out, int p, double margin,
                                       tg_tensor *weight, tg_reduction red);
/* nn.MultiLabelSoftMarginLoss(weight, reduction). */
TG_API int tg_nn_multilabel_soft_margin_loss_new(tg_module **out, tg_tensor *weight,
                                                 tg_reduction red);
/* nn.PoissonNLLLoss(log_input, full, eps, reduction) (torch's defaults
 * true, false, 1e-8) and nn.GaussianNLLLoss(full, eps, reduction) (false,
 * 1e-6). */
TG_API int tg_nn_poisson_nll_loss_new(tg_module **out, bool log_input, bool full, double eps,
                                      tg_reduction red);
TG_API int tg_nn_gaussian_nll_loss_new(tg_module **out, bool full, double eps,
                                       tg_reduction red);
/* nn.CTCLoss(blank, reduction, zero_infinity) (torch's defaults 0, MEAN,
 * false): tg_ctc_loss with those options.  blank >= 0 (TG_EINVAL
 * otherwise); that it is below the number of classes C is checked at the
 * forward, as torch. */
TG_API int tg_nn_ctc_loss_new(tg_module **out, int64_t blank, tg_reduction red,
                              bool zero_infinity);

/* The options a loss module was made with, as its constructor took them
 * (torch's attributes of the same names).  An option the module's class
 * does not have is 0 or false; the class weights are its buffers
 * ("weight", "pos_weight"), not options. */
typedef struct tg_nn_loss_opts {
    tg_reduction reduction;   /* every class */
    int64_t ignore_index;     /* CrossEntropyLoss, NLLLoss */
    double label_smoothing;   /* CrossEntropyLoss */
    double delta;             /* HuberLoss */
    double beta;              /* SmoothL1Loss */
    double margin;            /* MarginRanking, HingeEmbedding, CosineEmbedding, TripletMargin,
                                 MultiMargin, TripletMarginWithDistance */
    double p;                 /* TripletMarginLoss (the norm), MultiMarginLoss (1 or 2) */
    double eps;               /* TripletMarginLoss, PoissonNLLLoss, GaussianNLLLoss */
    bool log_target;          /* KLDivLoss */
    bool swap;                /* TripletMarginLoss, TripletMarginWithDistanceLoss */
    bool full;                /* PoissonNLLLoss, GaussianNLLLoss */
    bool log_input;           /* PoissonNLLLoss */
    int64_t blank;            /* CTCLoss */
    bool zero_infinity;       /* CTCLoss */
} tg_nn_loss_opts;
/* *opts = the options of loss module m (any of the tg_nn_*_loss_new
 * classes above).  TG_EINVAL for a NULL argument or, naming its type, a
 * module that is not a loss; *opts is then untouched. */
TG_API int tg_nn_loss_options(const tg_module *m, tg_nn_loss_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
