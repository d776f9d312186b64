/* src/nn/module_internal.h - the module struct shared by src/nn's files. */
#ifndef TAPEGRAD_NN_MODULE_INTERNAL_H
#define TAPEGRAD_NN_MODULE_INTERNAL_H

#include "core/core.h"
#include "tapegrad/nn.h"

#define TG__NN_LOCAL_NAME_MAX 64

typedef struct tg__nn_tensor_entry {
    char name[TG__NN_LOCAL_NAME_MAX];
    tg_tensor *t;                      /* owned */
} tg__nn_tensor_entry;

typedef struct tg__nn_child_entry {
    char name[TG__NN_LOCAL_NAME_MAX];
    tg_module *m;                      /* owned */
} tg__nn_child_entry;

/* A tensor that a module computes before each of its forwards and that its
 * forward reads under a name, as an attribute that a torch forward pre-hook
 * sets (spectral_norm's `weight`).  tg__module_local and tg_module_find give
 * its last value.  It is not state: the state dict, parameter lists,
 * tg_module_to_dtype and checkpoints leave it out. */
typedef int (*tg__nn_compute_fn)(tg_module *m, void *state, tg_tensor **out);
typedef struct tg__nn_computed {
    char name[TG__NN_LOCAL_NAME_MAX];
    tg__nn_compute_fn compute;         /* *out: a new reference */
    void (*release)(void *state);      /* may be NULL */
    size_t state_size;                 /* > 0: state is flat, copied bytewise
                                        * by tg_module_copy; 0: not copyable */
    void *state;                       /* owned */
    tg_tensor *value;                  /* owned: the last value, or NULL */
} tg__nn_computed;

struct tg_module {
    _Atomic int refcount;
    const tg_module_vtable *vt;        /* borrowed, static */
    void *state;                       /* owned, freed by vt->release */
    bool training;
    bool autocast_weights;             /* tg_module_autocast_weights */
    int n_params, n_buffers, n_children;
    int cap_params, cap_buffers, cap_children;
    tg__nn_tensor_entry *params;
    tg__nn_tensor_entry *buffers;
    tg__nn_child_entry *children;
    int n_computed;
    tg__nn_computed *computed;         /* owned, n_computed entries */
};

/* Whether m was made by tg_nn_activation_new (or tg_nn_gelu_new): its type
 * name is torch's class name (ReLU, Tanh, GELU, Identity for TG_ACT_NONE),
 * which modules of other kinds share ("Identity"), so callers that handle
 * these modules ask this rather than compare names. */
bool tg__nn_is_basic_activation(const tg_module *m);
/* tg_module_new with a malloc'd copy of init (vt->state_size bytes, > 0)
 * as the state, freed again when tg_module_new fails.  TG_ENOMEM. */
int tg__module_new_state(tg_module **out, const tg_module_vtable *vt, const void *init);
/* Computes each of m's computed tensors (tg__nn_computed) afresh, as
 * tg_module_forward does before m's forward: torch's forward pre-hooks.
 * For a module's own entry points beside tg_module_forward; run at library
 * depth. */
int tg__module_compute(tg_module *m);
/* The parameter/buffer named name of m itself (borrowed), or NULL. */
tg_tensor *tg__module_local(const tg_module *m, const char *name);
/* The computed tensor named name of m (borrowed), or NULL. */
const tg__nn_computed *tg__module_computed(const tg_module *m, const char *name);
/* tg_module_add_parameter's name check (messages name op) and its list
 * growth (room for one more element in *arr of *cap, n used). */
int tg__module_check_name(const char *op, const tg_module *m, const char *name);
int tg__module_grow(void **arr, int *cap, int n, size_t sz);
/* *w = m's parameter `name` (borrowed), which fn may reparametrize as
 * `what` ("spectral norm", its computed tensors made by compute) under
 * names up to suffix_len characters longer ("_orig": 5).  TG_EINVAL, m
 * unchanged, when `what` is applied to it already, another computes it, m
 * has no such parameter, or the name is empty or too long for the
 * suffixes. */
int tg__module_reparam_target(const char *fn, tg_module *m, const char *name, const char *what,
                              tg__nn_compute_fn compute, int suffix_len, tg_tensor **w);
/* Moves m's parameter `name` to a computed one, as torch's spectral_norm
 * and weight_norm reparametrize a weight (module_reparam.c): the parameter
 * is removed, params[0..np) are registered as parameters param_names[i]
 * (requiring grad), then the parameter itself (the same tensor) as `orig`,
 * all at the end of the parameter list; bufs[0..nb) are added as buffers
 * named buf_names[i], and `name` becomes computed by c (c->name is
 * ignored; its state and value are stolen).  All names are checked first
 * (messages name fn); on error nothing is changed and c's state, its value,
 * params and bufs are released.  np + nb <= 7. */
int tg__module_reparametrize(const char *fn, tg_module *m, const char *name, const char *orig,
                             int np, const char *const *param_names, tg_tensor *const *params,
                             int nb, const char *const *buf_names, tg_tensor *const *bufs,
                             const tg__nn_computed *c);
/* The reverse, as torch's remove_spectral_norm / remove_weight_norm: the
 * parameters and buffers names[0..nr) (which must exist, a parameter among
 * them; the names may live in the computed entry's state) are released, the
 * computed `name` (which must exist) is dropped, and w (stolen; a float
 * leaf, else TG_EINVAL with m unchanged) is registered as parameter `name`,
 * last. */
int tg__module_unreparametrize(const char *fn, tg_module *m, const char *name, tg_tensor *w,
                               int nr, const char *const *names);
/* Puts child (stolen) in place of parent's i-th child, which is released;
 * the name stays.  i must be in [0, n_children). */
void tg__module_replace_child(tg_module *parent, int i, tg_module *child);
/* tg_module_add_child, its messages naming fn (the public function called). */
int tg__module_add_child_as(const char *fn, tg_module *parent, const char *name,
                            tg_module *child);
/* Whether m is a BatchNorm (tg_nn_batchnorm_new) with running statistics;
 * its momentum replaced (< 0: the cumulative average), the old one returned
 * (m must be a BatchNorm). */
bool tg__nn_batchnorm_tracks(const tg_module *m);
double tg__nn_batchnorm_swap_momentum(tg_module *m, double momentum);
/* Calls visit(m, user) for m and every descendant, pre-order, children in
 * insertion order (state-dict order); stops at the first negative status. */
int tg__module_visit(tg_module *m, int (*visit)(tg_module *m, void *user), void *user);

/* w, or (when m->autocast_weights and an autocast scope is active) w cast to
 * the scope's dtype on the tape: a new reference in *out either way; NULL w
 * gives NULL. */
int tg__module_weight(const tg_module *m, tg_tensor *w, tg_tensor **out);

/* Fills w (and b, when not NULL) with U(-1/sqrt(fan_in), 1/sqrt(fan_in)):
 * torch's kaiming_uniform_(a=sqrt(5)) and its bias rule. */
int tg__nn_init_uniform_fan_in(tg_tensor *w, tg_tensor *b, int64_t fan_in, tg_rng *rng);
/* A new zero-filled f32 tensor registered as parameter/buffer `name`. */
int tg__nn_add_param_zeros(tg_module *m, const char *name, int ndim, const int64_t *shape,
                           tg_tensor **borrowed);

/* A norm module's state as torch's _NormBase registers it (batchnorm.c):
 * weight (ones) and bias (zeros) of c elements when affine, then
 * running_mean (zeros), running_var (ones) and num_batches_tracked (an i64
 * scalar 0) when track; f32. */
int tg__nn_add_norm_state(tg_module *m, int64_t c, bool affine, bool track);

/* Dropout's count of masks drawn (mask k comes from counter block k of its
 * seed): run state outside the state dict, which checkpoints keep
 * (checkpoint.c).  false when m is not a Dropout (or Dropout1d/2d/3d, an
 * RNN, LSTM or GRU with dropout between layers, a MultiheadAttention, an
 * AlphaDropout or a FeatureAlphaDropout, which count alike). */
bool tg__nn_dropout_calls(const tg_module *m, uint64_t *calls);
/* Sets that count; m must be one of those modules. */
void tg__nn_dropout_set_calls(tg_module *m, uint64_t calls);
/* A MultiheadAttention's count of dropout masks drawn (borrowed from m's
 * state), or NULL for another module (multihead_attention.c). */
uint64_t *tg__nn_mha_dropout_calls(tg_module *m);
/* A MultiheadAttention's dropout seed (borrowed from m's state), or NULL
 * for another module (multihead_attention.c). */
uint64_t *tg__nn_mha_dropout_seed(tg_module *m);
/* An AlphaDropout's or FeatureAlphaDropout's count of masks drawn
 * (borrowed from m's state), or NULL for another module (alpha_dropout.c). */
uint64_t *tg__nn_alpha_dropout_calls(tg_module *m);
/* Sets the seed of a Dropout's (or a MultiheadAttention's) masks; m must
 * be one of those modules (module_simple.c). */
void tg__nn_dropout_set_seed(tg_module *m, uint64_t seed);

/* nn.Embedding's and nn.EmbeddingBag's constructor checks (src/nn/
 * embedding.c): out and rng non-NULL, V and D >= 1, the messages naming
 * fn.  Then their weight: (V, D) f32 drawn from N(0, 1) as torch
 * initialises it, row padding_idx zeroed (none for
 * TG_EMBEDDING_NO_PADDING). */
int tg__nn_embedding_check(tg_module **out, int64_t V, int64_t D, const tg_rng *rng,
                           const char *fn);
int tg__nn_embedding_weight(tg_tensor **w, int64_t V, int64_t D, int64_t padding_idx,
                            tg_rng *rng);
/* from_pretrained's checks of embeddings (a 2-d float tensor of extents
 * >= 1, out non-NULL), the messages naming fn. */
int tg__nn_pretrained_check(tg_module **out, const tg_tensor *embeddings, const char *fn);
/* A new module of vt with state init whose "weight" parameter is w (stolen,
 * also on error). */
int tg__nn_weight_module(tg_module **out, const tg_module_vtable *vt, const void *init,
                         tg_tensor *w);
/* Vtables that tg_nn_init_normal recognises (layers.c, batchnorm.c). */
extern const tg_module_vtable tg__nn_linear_vt, tg__nn_conv_vt, tg__nn_conv_transpose_vt,
    tg__nn_batchnorm_vt;

#endif
