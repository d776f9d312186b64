/* src/nn/optim_internal.h - the optimizer object shared by optim*.c. */
#ifndef TAPEGRAD_OPTIM_INTERNAL_H
#define TAPEGRAD_OPTIM_INTERNAL_H

#include "core/core.h"
#include "tapegrad/optim.h"

typedef enum tg__opt_kind {
    TG__OPT_SGD = 0,
    TG__OPT_ADAM,
    TG__OPT_ADAMW,
    TG__OPT_RMSPROP,
    TG__OPT_ADAGRAD,
    TG__OPT_ADAMAX,
    TG__OPT_NADAM,
    TG__OPT_RADAM,
    TG__OPT_ADADELTA,
    TG__OPT_RPROP,
    TG__OPT_LBFGS,
    TG__OPT_ASGD,
    TG__OPT_SPARSE_ADAM,
    TG__OPT_N_KINDS   /* the count, for tables indexed by kind */
} tg__opt_kind;

#define TG__OPT_MAX_BUFS 3

/* One parameter's state.  buf[j] are contiguous tensors of the parameter's
 * shape in its compute dtype (f64 for f64, f32 otherwise), NULL until the
 * parameter's first step with a gradient: SGD's momentum_buffer; Adam's
 * exp_avg, exp_avg_sq and (amsgrad) max_exp_avg_sq; RMSprop's square_avg,
 * (momentum > 0) momentum_buffer and (centered) grad_avg; Adagrad's sum;
 * Adamax's exp_avg and exp_inf; NAdam's and RAdam's exp_avg and
 * exp_avg_sq; Adadelta's square_avg and acc_delta; Rprop's prev and
 * step_size; ASGD's ax. */
typedef struct tg__opt_state {
    int64_t step;                       /* all but SGD: this parameter's steps */
    double mu_product;                  /* NAdam: the product of its mu, an f32 value */
    double eta, mu;                     /* ASGD: its step size and averaging factor (f32) */
    tg_tensor *buf[TG__OPT_MAX_BUFS];   /* owned */
} tg__opt_state;

/* The hyperparameters, torch's param_group entries: SGD reads lr,
 * momentum, dampening, weight_decay, nesterov and maximize; Adam/AdamW lr,
 * beta1, beta2 (torch's betas), eps, weight_decay, amsgrad and maximize;
 * RMSprop lr, alpha, eps, weight_decay, momentum, centered and maximize;
 * Adagrad lr, lr_decay, weight_decay, initial_accumulator_value, eps and
 * maximize; Adamax lr, beta1, beta2, eps, weight_decay and maximize; NAdam
 * lr, beta1, beta2, eps, weight_decay and momentum_decay; RAdam lr, beta1,
 * beta2, eps and weight_decay; Adadelta lr, rho, eps, weight_decay and
 * maximize; Rprop lr, eta_minus, eta_plus (torch's etas), step_size_min,
 * step_size_max (torch's step_sizes) and maximize. */
typedef struct tg__opt_hparams {
    double lr, momentum, dampening, weight_decay, beta1, beta2, eps, alpha;
    double lr_decay, initial_accumulator_value, momentum_decay, rho;
    double eta_minus, eta_plus, step_size_min, step_size_max;
    double max_iter, max_eval, tolerance_grad, tolerance_change, history_size;   /* L-BFGS */
    double lambd, t0;   /* ASGD (and alpha) */
    bool nesterov, amsgrad, centered, maximize, strong_wolfe;
} tg__opt_hparams;

/* A param group: the optimizer's parameters [begin, end) and their
 * hyperparameters.  initial_lr is torch's param_group['initial_lr']: the
 * group's lr when the first learning-rate scheduler was attached (its
 * base_lr for every scheduler on the optimizer); NaN until then
 * (lr_scheduler_new.c). */
typedef struct tg__opt_group {
    int begin, end;
    tg__opt_hparams h;
    double initial_lr;
} tg__opt_group;

struct tg_optimizer {
    tg__opt_kind kind;
    int n;
    tg_tensor **params;        /* retained */
    tg__opt_state *state;      /* n entries */
    int n_groups;
    tg__opt_group *groups;     /* n_groups >= 1, consecutive, covering params[0..n) */
    tg__opt_hparams defaults;  /* the constructor's: torch's defaults for new groups */
    int64_t steps;             /* tg_optimizer_step calls */
    struct tg__lbfgs *lbfgs;   /* L-BFGS: its state (owned), NULL until its first step */
};

/* The hyperparameters of a constructor's options. */
tg__opt_hparams tg__opt_sgd_hparams(const tg_sgd_opts *o);
tg__opt_hparams tg__opt_adam_hparams(const tg_adam_opts *o);
tg__opt_hparams tg__opt_rmsprop_hparams(const tg_rmsprop_opts *o);
tg__opt_hparams tg__opt_adagrad_hparams(const tg_adagrad_opts *o);
tg__opt_hparams tg__opt_adamax_hparams(const tg_adamax_opts *o);
tg__opt_hparams tg__opt_nadam_hparams(const tg_nadam_opts *o);
tg__opt_hparams tg__opt_radam_hparams(const tg_radam_opts *o);
tg__opt_hparams tg__opt_adadelta_hparams(const tg_adadelta_opts *o);
tg__opt_hparams tg__opt_rprop_hparams(const tg_rprop_opts *o);
tg__opt_hparams tg__opt_lbfgs_hparams(const tg_lbfgs_opts *o);
tg__opt_hparams tg__opt_asgd_hparams(const tg_asgd_opts *o);
tg__opt_hparams tg__opt_sparse_adam_hparams(const tg_sparse_adam_opts *o);

/* TG_EINVAL unless h is valid for kind k: the rules of the constructors
 * (optim.h).  The message names each value as the constructors' option
 * ("<what>: beta1=2 must be in [0, 1)"), or, with a prefix, as the state
 * file's key ("<what>: '<prefix>.betas'[0]=2 must be in [0, 1)"), with the
 * group's index first when group >= 0 ("'<prefix>.betas'[1][0]=2"). */
int tg__opt_check_hparams(tg__opt_kind k, const tg__opt_hparams *h, const char *what,
                          const char *prefix, int group);
/* TG_EINVAL unless momentum (SGD's and RMSprop's momentum, Adam's and
 * AdamW's beta1) may become group g's: tg_optimizer_set_group_momentum's
 * rules, messages starting with what. */
int tg__opt_check_group_momentum(const tg_optimizer *opt, int g, double momentum,
                                 const char *what);
/* Sets group g's momentum (or beta1), checked by the above. */
void tg__opt_set_group_momentum(tg_optimizer *opt, int g, double momentum);
/* TG_EINVAL / TG_EDTYPE unless params[0..n) are n >= 1 distinct float leaf
 * tensors, none of them already in opt (may be NULL). */
int tg__opt_check_params(const char *what, const tg_optimizer *opt, int n,
                         tg_tensor *const *params);

/* A hyperparameter under torch's param_group key (optim_options.c): a
 * double, a flag (bool) or a pair of doubles (betas, etas, step_sizes),
 * the pair's elements named as the options' fields (beta1, beta2, ...). */
typedef enum { TG__HP_REAL, TG__HP_FLAG, TG__HP_PAIR } tg__hp_form;
typedef struct tg__hp_entry {
    const char *key;          /* torch's */
    const char *first, *second;   /* a pair's elements: the options' names */
    unsigned kinds;           /* a bit per tg__opt_kind that has it */
    tg__hp_form form;
    size_t off, off2;         /* of the double or bool in tg__opt_hparams (off2: second) */
} tg__hp_entry;
/* Every hyperparameter but lr, and their count. */
extern const tg__hp_entry tg__opt_hps[];
extern const int tg__opt_n_hps;
/* Whether kind k has e. */
bool tg__opt_hp_of(const tg__hp_entry *e, tg__opt_kind k);
/* The double or bool at off in h. */
double *tg__opt_hp_real(tg__opt_hparams *h, size_t off);
bool *tg__opt_hp_flag(tg__opt_hparams *h, size_t off);

/* Whether kind k's momentum (tg_optimizer_set_group_momentum) is beta1. */
bool tg__opt_momentum_is_beta1(tg__opt_kind k);

/* Whether a parameter of kind k with h has state buffer j in
 * [0, TG__OPT_MAX_BUFS) (SGD without momentum has none; buf[0] is there
 * whenever any is). */
bool tg__opt_has_buf(tg__opt_kind k, const tg__opt_hparams *h, int j);
/* Buffer j's name: "momentum_buffer"; "exp_avg", "exp_avg_sq", "max_exp_avg_sq";
 * "square_avg", "momentum_buffer", "grad_avg"; "sum"; "exp_avg", "exp_inf";
 * "square_avg", "acc_delta"; "prev", "step_size". */
const char *tg__opt_buf_name(tg__opt_kind k, int j);
/* The number of buffer names of kind k (1 for SGD and Adagrad, 3 for Adam,
 * AdamW and RMSprop, else 2). */
int tg__opt_n_buf_names(tg__opt_kind k);
/* "sgd", "adam", "adamw", "rmsprop", "adagrad", "adamax", "nadam", "radam",
 * "adadelta", "rprop". */
const char *tg__opt_kind_name(tg__opt_kind k);

/* One update call, for the workers of tg__parallel_range (elements
 * [lo, hi) of a parameter each): the parameter p, its gradient g and state
 * st in dtype cdt, and the rule's scalars of this step, computed once in
 * double as torch's Python computes them (a, b, c; flag: a condition of
 * the step, such as RAdam's rho_t > 5). */
typedef struct tg__opt_job {
    const tg__opt_hparams *h;
    tg_dtype cdt;
    void *p;
    const void *g;
    const tg__opt_state *st;
    bool first, decoupled, flag;
    double a, b, c;
} tg__opt_job;

/* The updates of one parameter with hyperparameters h (optim_update.c).
 * p and g are contiguous buffers of n elements of dtype cdt (f32 or f64); p
 * is updated in place and so is st->buf[*] (same dtype).  first: st's
 * buffers were created for this step (SGD then sets its momentum buffer to
 * the gradient). */
void tg__sgd_update(const tg__opt_hparams *h, tg_dtype cdt, void *p, const void *g,
                    tg__opt_state *st, bool first, int64_t n);
/* Adam, or AdamW when decoupled; also increments st->step. */
void tg__adam_update(const tg__opt_hparams *h, bool decoupled, tg_dtype cdt, void *p,
                     const void *g, tg__opt_state *st, int64_t n);
/* Tests: false makes the updates take their portable loops instead of
 * the SIMD ones, in every thread (true, the default, restores). */
void tg__optim_set_simd(bool on);
/* RMSprop; also increments st->step. */
void tg__rmsprop_update(const tg__opt_hparams *h, tg_dtype cdt, void *p, const void *g,
                        tg__opt_state *st, int64_t n);
/* Adagrad, Adamax, NAdam, RAdam, Adadelta and Rprop (optim_update_more.c);
 * each increments st->step.  Adagrad's sum, NAdam's mu_product and Rprop's
 * step_size must hold their starting values (initial_accumulator_value, 1,
 * lr) before the first step. */
void tg__adagrad_update(const tg__opt_hparams *h, tg_dtype cdt, void *p, const void *g,
                        tg__opt_state *st, int64_t n);
void tg__adamax_update(const tg__opt_hparams *h, tg_dtype cdt, void *p, const void *g,
                       tg__opt_state *st, int64_t n);
void tg__nadam_update(const tg__opt_hparams *h, tg_dtype cdt, void *p, const void *g,
                      tg__opt_state *st, int64_t n);
void tg__radam_update(const tg__opt_hparams *h, tg_dtype cdt, void *p, const void *g,
                      tg__opt_state *st, int64_t n);
void tg__adadelta_update(const tg__opt_hparams *h, tg_dtype cdt, void *p, const void *g,
                         tg__opt_state *st, int64_t n);
void tg__rprop_update(const tg__opt_hparams *h, tg_dtype cdt, void *p, const void *g,
                      tg__opt_state *st, int64_t n);
/* ASGD; st->eta and st->mu must hold lr and 1 before the first step. */
void tg__asgd_update(const tg__opt_hparams *h, tg_dtype cdt, void *p, const void *g,
                     tg__opt_state *st, int64_t n);

/* Sparse gradients (optim_sparse.c).  tg__opt_check_sparse: TG_EUNSUPPORTED
 * naming params[i] when its gradient g's layout (sparse or dense) is not
 * one kind k takes with h (tapegrad/optim.h's rules, torch's messages).
 * tg__opt_sparse_update: parameter i's update with its sparse gradient
 * (SGD, Adagrad, SparseAdam), its state made already; bumps its version. */
int tg__opt_check_sparse(tg__opt_kind k, const tg__opt_hparams *h, int i, const tg_tensor *p,
                         const tg_tensor *g);
int tg__opt_sparse_update(tg_optimizer *o, const tg__opt_hparams *h, int i);

/* L-BFGS's state, torch's state of the first parameter. */
struct tg__lbfgs {
    int64_t func_evals, n_iter;   /* torch's state['func_evals'], ['n_iter'] */
    int64_t n;                    /* the parameters' total size */
    double *d, *prev;             /* direction, previous gradient (from an iteration on) */
    double t, h_diag, prev_loss;
    int k;                        /* pairs in the history */
    double **dirs, **stps, *ro;   /* history_size entries each, the oldest first */
    int cap;
};

/* A state for n values and a history of cap pairs, or NULL (ENOMEM). */
struct tg__lbfgs *tg__lbfgs_state_new(int64_t n, int cap);
/* The parameters' total size. */
int64_t tg__lbfgs_size(const tg_optimizer *o);

/* L-BFGS (optim_lbfgs.c, optim_lbfgs_state.c): one step of opt (kind
 * TG__OPT_LBFGS) with the closure, as tg_optimizer_step_closure; its state
 * freed; saved under prefix; checked and read from f, for a history of history_size pairs,
 * into a new state (*out NULL when f holds none), swapped in by the
 * caller. */
int tg__lbfgs_step(tg_optimizer *opt, tg_closure_fn closure, void *user, double *loss);
void tg__lbfgs_free(struct tg__lbfgs *s);
int tg__lbfgs_state_save(const tg_optimizer *opt, tg_st_file *f, const char *prefix);
int tg__lbfgs_state_read(const tg_optimizer *opt, const tg_st_file *f, const char *prefix,
                         int history_size, struct tg__lbfgs **out);

#endif
