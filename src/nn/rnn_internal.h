/* src/nn/rnn_internal.h - what the recurrent modules' files share: the
 * module state, one time step of each cell kind, the parameter setup and
 * the argument messages (rnn_cell.c; the layers in rnn.c), and the
 * sequence padding and packing (rnn_utils.c, packed_sequence.c) that the
 * forwards over a packed sequence (rnn_packed_sequence.c) use. */
#ifndef TAPEGRAD_NN_RNN_INTERNAL_H
#define TAPEGRAD_NN_RNN_INTERNAL_H

#include "nn/module_internal.h"
#include "tapegrad/nn.h"

/* The cell kinds: torch's mode names RNN_TANH, RNN_RELU, LSTM, GRU. */
typedef enum tg__rnn_kind { TG__RNN_TANH, TG__RNN_RELU, TG__RNN_LSTM, TG__RNN_GRU } tg__rnn_kind;

/* The state of an RNNCell, LSTMCell, GRUCell, RNN, LSTM or GRU: flat, so
 * tg_module_copy duplicates it bytewise (vtable state_size). */
typedef struct tg__rnn_state {
    tg__rnn_kind kind;
    int64_t input_size, hidden_size;
    tg_rnn_opts o;       /* a cell's: num_layers 1, no dropout */
    uint64_t calls;      /* training forwards that drew dropout masks */
} tg__rnn_state;

/* The number of gates (rows of weight_ih per hidden unit): 1, 4 or 3. */
int tg__rnn_gates(tg__rnn_kind k);
/* torch's class name of a cell ("LSTMCell") or layer ("LSTM") of kind k. */
const char *tg__rnn_name(tg__rnn_kind k, bool cell);

/* Registers one layer-direction's parameters on m, torch's order and
 * shapes: weight_ih<sfx> (G H, in), weight_hh<sfx> (G H, h_in), and with
 * bias bias_ih<sfx>, bias_hh<sfx> (G H); with proj > 0 weight_hr<sfx>
 * (proj, H).  Zeros, f32; tg__rnn_init draws them afterwards. */
int tg__rnn_add_params(tg_module *m, const tg__rnn_state *s, const char *sfx, int64_t in,
                       int64_t h_in);
/* Every parameter of m, in registration order, ~ U(-1/sqrt(H), 1/sqrt(H)),
 * torch's reset_parameters. */
int tg__rnn_init(tg_module *m, int64_t hidden_size, tg_rng *rng);

/* The weights of one layer-direction (borrowed; b_ih, b_hh, w_hr may be
 * NULL). */
typedef struct tg__rnn_weights {
    tg_tensor *w_ih, *w_hh, *b_ih, *b_hh, *w_hr;
} tg__rnn_weights;
/* Looks them up on m under the suffix ("_l0_reverse"; "" for a cell). */
void tg__rnn_weights_of(const tg_module *m, const char *sfx, tg__rnn_weights *w);

/* One time step from gi = x W_ih^T + b_ih (N, G H) and the state h (N,
 * H_out), c (N, H; LSTM only): *h_out and (LSTM) *c_out are new
 * references.  Every op is a recorded differentiable one, so gradients of
 * any order flow through it.  On error both are untouched. */
int tg__rnn_step(tg__rnn_kind k, const tg__rnn_weights *w, tg_tensor *gi, tg_tensor *h,
                 tg_tensor *c, tg_tensor **h_out, tg_tensor **c_out);

/* "(2, 3, 4)" for t's shape into buf (n bytes); returns buf. */
const char *tg__rnn_shape(char *buf, size_t n, const tg_tensor *t);
/* TG_EDTYPE naming `what` when t's dtype is not the parameters' dt. */
int tg__rnn_check_dtype(const char *fn, const char *what, const tg_tensor *t, tg_dtype dt);

/* The state of m when it is one of the six recurrent modules; NULL
 * otherwise. */
tg__rnn_state *tg__rnn_state_of(const tg_module *m);

/* The vtables, indexed by kind - 1 (TG__RNN_TANH and TG__RNN_RELU share
 * index 0): the cells' (rnn_cell.c) and the layers' (rnn.c). */
extern const tg_module_vtable tg__nn_rnn_cell_vts[3], tg__nn_rnn_layer_vts[3];
static inline int tg__rnn_vt_index(tg__rnn_kind k) { return k <= TG__RNN_RELU ? 0 : (int)k - 1; }

/* TG_EINVAL (naming fn) when two of the non-NULL out-pointers dst[0..n) are
 * one place: a second result would overwrite the first and leak it. */
int tg__rnn_check_outputs(const char *fn, int n, tg_tensor **const *dst);
/* Hands src[0..n) (new references or NULL) to the caller: each into the
 * caller's open scope, then into *dst[i]; where dst[i] is NULL, src[i] is
 * released instead.  On TG_ENOMEM every src[i] is released and nothing is
 * written. */
int tg__rnn_hand_out(int n, tg_tensor **const *dst, tg_tensor **src);

/* pad_sequence's check of seqs[0..n) (rnn_utils.c), its messages led by
 * op: n >= 1, no sequence NULL or 0-d, the dims after the first all
 * seqs[0]'s; *longest gets the largest first extent. */
int tg__rnn_check_sequences(const char *op, int n, tg_tensor *const *seqs, int64_t *longest);

/* The layout of a packed sequence (packed_sequence.c): T steps of
 * sizes[t] rows each, N = sizes[0] sequences, rows = the sum of the sizes;
 * order[p] is the batch row of the p-th longest sequence and rank its
 * inverse (both the identity without indices); off[t] the first row of
 * step t.  Owned arrays. */
typedef struct tg__packed_layout {
    int64_t steps, batch, rows;
    int64_t *sizes, *off, *order, *rank;
} tg__packed_layout;
/* Reads and checks ps (the rules in nn.h, messages led by fn) into *lay;
 * on error *lay holds nothing to free. */
int tg__packed_layout_of(tg__packed_layout *lay, const char *fn, const tg_packed_sequence *ps);
void tg__packed_layout_free(tg__packed_layout *lay);
/* *data (S, *): the valid rows of padded (T' >= T steps, N, *), time first
 * or batch_first, packed by lay: one recorded index_select. */
int tg__packed_gather(tg_tensor **data, tg_tensor *padded, const tg__packed_layout *lay,
                      bool batch_first);
/* *padded (T', N, *) (batch_first: (N, T', *)) from data (S, *) by lay,
 * value at the padded steps, T' = total >= T: one recorded index_select;
 * *lengths (may be NULL) i64 (N) in batch order. */
int tg__packed_scatter(tg_tensor **padded, tg_tensor **lengths, tg_tensor *data,
                       const tg__packed_layout *lay, bool batch_first, double value,
                       int64_t total);

#endif
