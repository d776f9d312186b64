/* src/nn/loss_modules.c - torch.nn's loss classes (tapegrad/nn.h): modules
 * whose forward_n calls the loss function of tapegrad/loss.h with the
 * options kept in the module's state, and whose class weights are buffers
 * under torch's names ("weight", "pos_weight").  CrossEntropyLoss calls
 * tg_cross_entropy_ex, F.cross_entropy with all its arguments.
 * tg_nn_loss_options gives the options back under their torch names. */
#include <math.h>

#include "nn/module_internal.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"

typedef enum loss_kind {
    MSE, L1, CROSS_ENTROPY, NLL, BCE, BCE_LOGITS, HUBER, SMOOTH_L1, KL_DIV, MARGIN_RANKING,
    HINGE_EMBEDDING, COSINE_EMBEDDING, TRIPLET_MARGIN, SOFT_MARGIN, MULTI_MARGIN,
    MULTILABEL_MARGIN, MULTILABEL_SOFT_MARGIN, POISSON_NLL, GAUSSIAN_NLL, CTC, TRIPLET_DISTANCE,
    N_LOSS_KINDS
} loss_kind;

/* The options of every kind; each uses the fields its function takes. */
typedef struct loss_state {
    loss_kind kind;
    tg_reduction red;
    int64_t ignore_index;      /* CrossEntropyLoss, NLLLoss */
    double label_smoothing;    /* CrossEntropyLoss */
    double margin;             /* the margin losses */
    double beta;               /* HuberLoss's delta, SmoothL1Loss's beta */
    double p;                  /* TripletMarginLoss's norm, MultiMarginLoss's power */
    double eps;                /* TripletMarginLoss, PoissonNLLLoss, GaussianNLLLoss */
    bool flag;                 /* log_target, swap, full or zero_infinity */
    bool log_input;            /* PoissonNLLLoss */
    int64_t blank;             /* CTCLoss */
    tg_distance_fn distance;   /* TripletMarginWithDistanceLoss, NULL: pairwise_distance */
    void *distance_user;       /* its pointer, borrowed (copies share it) */
} loss_state;

static int loss_forward(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs);

#define LOSS_VT(name, n)                                                                  \
    {.type_name = name, .forward_n = loss_forward, .n_inputs = n, .release = free,        \
     .state_size = sizeof(loss_state)}

static const tg_module_vtable loss_vts[N_LOSS_KINDS] = {
    [MSE] = LOSS_VT("MSELoss", 2),
    [L1] = LOSS_VT("L1Loss", 2),
    [CROSS_ENTROPY] = LOSS_VT("CrossEntropyLoss", 2),
    [NLL] = LOSS_VT("NLLLoss", 2),
    [BCE] = LOSS_VT("BCELoss", 2),
    [BCE_LOGITS] = LOSS_VT("BCEWithLogitsLoss", 2),
    [HUBER] = LOSS_VT("HuberLoss", 2),
    [SMOOTH_L1] = LOSS_VT("SmoothL1Loss", 2),
    [KL_DIV] = LOSS_VT("KLDivLoss", 2),
    [MARGIN_RANKING] = LOSS_VT("MarginRankingLoss", 3),
    [HINGE_EMBEDDING] = LOSS_VT("HingeEmbeddingLoss", 2),
    [COSINE_EMBEDDING] = LOSS_VT("CosineEmbeddingLoss", 3),
    [TRIPLET_MARGIN] = LOSS_VT("TripletMarginLoss", 3),
    [SOFT_MARGIN] = LOSS_VT("SoftMarginLoss", 2),
    [MULTI_MARGIN] = LOSS_VT("MultiMarginLoss", 2),
    [MULTILABEL_MARGIN] = LOSS_VT("MultiLabelMarginLoss", 2),
    [MULTILABEL_SOFT_MARGIN] = LOSS_VT("MultiLabelSoftMarginLoss", 2),
    [POISSON_NLL] = LOSS_VT("PoissonNLLLoss", 2),
    [GAUSSIAN_NLL] = LOSS_VT("GaussianNLLLoss", 3),
    [CTC] = LOSS_VT("CTCLoss", 4),
    [TRIPLET_DISTANCE] = LOSS_VT("TripletMarginWithDistanceLoss", 3),
};

/* ---- the forward ---- */

static int loss_forward(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs)
{
    (void)n;   /* the vtable's n_inputs */
    const loss_state *s = tg_module_state(m);
    tg_tensor *w = tg__module_local(m, "weight");
    tg_tensor *pw = tg__module_local(m, "pos_weight");
    tg_tensor *x = xs[0], *t = xs[1];
    switch (s->kind) {
    case MSE: return tg_mse_loss(y, x, t, s->red);
    case L1: return tg_l1_loss(y, x, t, s->red);
    case CROSS_ENTROPY:
        return tg_cross_entropy_ex(y, x, t, w, s->ignore_index, s->red, s->label_smoothing);
    case NLL: return tg_nll_loss(y, x, t, w, s->red, s->ignore_index);
    case BCE: return tg_bce_loss(y, x, t, w, s->red);
    case BCE_LOGITS:
        if (!w && !pw) return tg_bce_with_logits(y, x, t, s->red);
        return tg_bce_with_logits_weighted(y, x, t, w, pw, s->red);
    case HUBER: return tg_huber_loss(y, x, t, s->red, s->beta);
    case SMOOTH_L1: return tg_smooth_l1_loss(y, x, t, s->red, s->beta);
    case KL_DIV: return tg_kl_div(y, x, t, s->red, s->flag);
    case MARGIN_RANKING: return tg_margin_ranking_loss(y, x, t, xs[2], s->margin, s->red);
    case HINGE_EMBEDDING: return tg_hinge_embedding_loss(y, x, t, s->margin, s->red);
    case COSINE_EMBEDDING: return tg_cosine_embedding_loss(y, x, t, xs[2], s->margin, s->red);
    case TRIPLET_MARGIN:
        return tg_triplet_margin_loss(y, x, t, xs[2], s->margin, s->p, s->eps, s->flag, s->red);
    case SOFT_MARGIN: return tg_soft_margin_loss(y, x, t, s->red);
    case MULTI_MARGIN: return tg_multi_margin_loss(y, x, t, (int)s->p, s->margin, w, s->red);
    case MULTILABEL_MARGIN: return tg_multilabel_margin_loss(y, x, t, s->red);
    case MULTILABEL_SOFT_MARGIN: return tg_multilabel_soft_margin_loss(y, x, t, w, s->red);
    case POISSON_NLL:
        return tg_poisson_nll_loss(y, x, t, s->log_input, s->flag, s->eps, s->red);
    case GAUSSIAN_NLL: return tg_gaussian_nll_loss(y, x, t, xs[2], s->flag, s->eps, s->red);
    case CTC: {
        const tg_ctc_loss_opts o = {.blank = s->blank, .reduction = s->red,
                                    .zero_infinity = s->flag};
        return tg_ctc_loss(y, x, t, xs[2], xs[3], &o);
    }
    case TRIPLET_DISTANCE:
        return tg_triplet_margin_with_distance_loss(y, x, t, xs[2], s->distance,
                                                    s->distance_user, s->margin, s->flag, s->red);
    case N_LOSS_KINDS: break;
    }
    TG_ASSERT(!"unknown loss kind");
    return TG_EINVAL;
}

/* ---- construction ---- */

static int check_weight(const char *op, const char *name, const tg_tensor *t, bool one_d)
{
    if (!t) return TG_OK;
    TG_CHECK(tg_dtype_is_float(t->dtype), TG_EINVAL,
             "%s: %s has dtype %s; must be a float tensor", op, name, tg_dtype_name(t->dtype));
    TG_CHECK(!one_d || t->ndim == 1, TG_EINVAL,
             "%s: %s has %d dims; must be 1-d (one weight per class)", op, name, t->ndim);
    return TG_OK;
}

/* Registers a detached contiguous copy of t (NULL: nothing) as buffer name. */
static int add_weight(tg_module *m, const char *name, const tg_tensor *t)
{
    if (!t) return TG_OK;
    tg_tensor *c = NULL;
    TG_TRY(tg_tensor_clone(&c, t));
    return tg_module_add_buffer(m, name, c);   /* steals c */
}

/* Makes the module of s->kind after checking the reduction and the weights
 * (the other options are checked by the constructors); on error nothing is
 * made. */
static int loss_new(tg_module **out, const char *op, const loss_state *s, tg_tensor *weight,
                    tg_tensor *pos_weight)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    const bool batchmean = s->kind == KL_DIV && s->red == TG_REDUCTION_BATCHMEAN;
    TG_CHECK(s->red == TG_REDUCTION_MEAN || s->red == TG_REDUCTION_SUM ||
                 s->red == TG_REDUCTION_NONE || batchmean, TG_EINVAL,
             "%s: reduction=%d must be MEAN, SUM or NONE%s", op, (int)s->red,
             s->kind == KL_DIV ? " or BATCHMEAN" : "");
    const bool one_d = s->kind == CROSS_ENTROPY || s->kind == NLL || s->kind == MULTI_MARGIN;
    TG_TRY(check_weight(op, "weight", weight, one_d));
    TG_TRY(check_weight(op, "pos_weight", pos_weight, false));
    tg_module *m = NULL;
    TG_TRY(tg__module_new_state(&m, &loss_vts[s->kind], s));
    int rc = add_weight(m, "weight", weight);
    if (rc >= 0) rc = add_weight(m, "pos_weight", pos_weight);
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}

#define NOT_NAN(op, name, v) \
    TG_CHECK(!isnan(v), TG_EINVAL, "%s: " name " must not be NaN", op)

int tg_nn_mse_loss_new(tg_module **out, tg_reduction red)
{
    return loss_new(out, "nn_mse_loss_new", &(loss_state){.kind = MSE, .red = red}, NULL, NULL);
}

int tg_nn_l1_loss_new(tg_module **out, tg_reduction red)
{
    return loss_new(out, "nn_l1_loss_new", &(loss_state){.kind = L1, .red = red}, NULL, NULL);
}

int tg_nn_cross_entropy_loss_new(tg_module **out, tg_tensor *weight, int64_t ignore_index,
                                 tg_reduction red, double label_smoothing)
{
    const char *op = "nn_cross_entropy_loss_new";
    TG_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, TG_EINVAL,
             "%s: label_smoothing=%g must be in [0, 1]", op, label_smoothing);
    loss_state s = {.kind = CROSS_ENTROPY, .red = red, .ignore_index = ignore_index,
                    .label_smoothing = label_smoothing};
    return loss_new(out, op, &s, weight, NULL);
}

int tg_nn_nll_loss_new(tg_module **out, tg_tensor *weight, int64_t ignore_index,
                       tg_reduction red)
{
    loss_state s = {.kind = NLL, .red = red, .ignore_index = ignore_index};
    return loss_new(out, "nn_nll_loss_new", &s, weight, NULL);
}

int tg_nn_bce_loss_new(tg_module **out, tg_tensor *weight, tg_reduction red)
{
    return loss_new(out, "nn_bce_loss_new", &(loss_state){.kind = BCE, .red = red}, weight,
                    NULL);
}

int tg_nn_bce_with_logits_loss_new(tg_module **out, tg_tensor *weight, tg_reduction red,
                                   tg_tensor *pos_weight)
{
    return loss_new(out, "nn_bce_with_logits_loss_new",
                    &(loss_state){.kind = BCE_LOGITS, .red = red}, weight, pos_weight);
}

int tg_nn_huber_loss_new(tg_module **out, tg_reduction red, double delta)
{
    const char *op = "nn_huber_loss_new";
    TG_CHECK(delta > 0, TG_EINVAL, "%s: delta=%g must be > 0", op, delta);
    return loss_new(out, op, &(loss_state){.kind = HUBER, .red = red, .beta = delta}, NULL,
                    NULL);
}

int tg_nn_smooth_l1_loss_new(tg_module **out, tg_reduction red, double beta)
{
    const char *op = "nn_smooth_l1_loss_new";
    TG_CHECK(beta >= 0, TG_EINVAL, "%s: beta=%g must be >= 0", op, beta);
    return loss_new(out, op, &(loss_state){.kind = SMOOTH_L1, .red = red, .beta = beta}, NULL,
                    NULL);
}

int tg_nn_kl_div_loss_new(tg_module **out, tg_reduction red, bool log_target)
{
    loss_state s = {.kind = KL_DIV, .red = red, .flag = log_target};
    return loss_new(out, "nn_kl_div_loss_new", &s, NULL, NULL);
}

static int margin_new(tg_module **out, const char *op, loss_kind kind, double margin,
                      tg_reduction red)
{
    NOT_NAN(op, "margin", margin);
    return loss_new(out, op, &(loss_state){.kind = kind, .red = red, .margin = margin}, NULL,
                    NULL);
}

int tg_nn_margin_ranking_loss_new(tg_module **out, double margin, tg_reduction red)
{
    return margin_new(out, "nn_margin_ranking_loss_new", MARGIN_RANKING, margin, red);
}

int tg_nn_hinge_embedding_loss_new(tg_module **out, double margin, tg_reduction red)
{
    return margin_new(out, "nn_hinge_embedding_loss_new", HINGE_EMBEDDING, margin, red);
}

int tg_nn_cosine_embedding_loss_new(tg_module **out, double margin, tg_reduction red)
{
    return margin_new(out, "nn_cosine_embedding_loss_new", COSINE_EMBEDDING, margin, red);
}

int tg_nn_triplet_margin_loss_new(tg_module **out, double margin, double p, double eps,
                                  bool swap, tg_reduction red)
{
    const char *op = "nn_triplet_margin_loss_new";
    NOT_NAN(op, "margin", margin);
    NOT_NAN(op, "p", p);
    NOT_NAN(op, "eps", eps);
    loss_state s = {.kind = TRIPLET_MARGIN, .red = red, .margin = margin, .p = p, .eps = eps,
                    .flag = swap};
    return loss_new(out, op, &s, NULL, NULL);
}

int tg_nn_soft_margin_loss_new(tg_module **out, tg_reduction red)
{
    return loss_new(out, "nn_soft_margin_loss_new",
                    &(loss_state){.kind = SOFT_MARGIN, .red = red}, NULL, NULL);
}

int tg_nn_multilabel_margin_loss_new(tg_module **out, tg_reduction red)
{
    return loss_new(out, "nn_multilabel_margin_loss_new",
                    &(loss_state){.kind = MULTILABEL_MARGIN, .red = red}, NULL, NULL);
}

int tg_nn_multi_margin_loss_new(tg_module **out, int p, double margin, tg_tensor *weight,
                                tg_reduction red)
{
    const char *op = "nn_multi_margin_loss_new";
    TG_CHECK(p == 1 || p == 2, TG_EINVAL, "%s: p=%d must be 1 or 2", op, p);
    NOT_NAN(op, "margin", margin);
    loss_state s = {.kind = MULTI_MARGIN, .red = red, .margin = margin, .p = p};
    return loss_new(out, op, &s, weight, NULL);
}

int tg_nn_multilabel_soft_margin_loss_new(tg_module **out, tg_tensor *weight, tg_reduction red)
{
    return loss_new(out, "nn_multilabel_soft_margin_loss_new",
                    &(loss_state){.kind = MULTILABEL_SOFT_MARGIN, .red = red}, weight, NULL);
}

int tg_nn_poisson_nll_loss_new(tg_module **out, bool log_input, bool full, double eps,
                               tg_reduction red)
{
    const char *op = "nn_poisson_nll_loss_new";
    NOT_NAN(op, "eps", eps);
    loss_state s = {.kind = POISSON_NLL, .red = red, .eps = eps, .flag = full,
                    .log_input = log_input};
    return loss_new(out, op, &s, NULL, NULL);
}

int tg_nn_gaussian_nll_loss_new(tg_module **out, bool full, double eps, tg_reduction red)
{
    const char *op = "nn_gaussian_nll_loss_new";
    NOT_NAN(op, "eps", eps);
    loss_state s = {.kind = GAUSSIAN_NLL, .red = red, .eps = eps, .flag = full};
    return loss_new(out, op, &s, NULL, NULL);
}

int tg_nn_ctc_loss_new(tg_module **out, int64_t blank, tg_reduction red, bool zero_infinity)
{
    const char *op = "nn_ctc_loss_new";
    TG_CHECK(blank >= 0, TG_EINVAL, "%s: blank=%lld must be >= 0 (a label)", op,
             (long long)blank);
    loss_state s = {.kind = CTC, .red = red, .blank = blank, .flag = zero_infinity};
    return loss_new(out, op, &s, NULL, NULL);
}

int tg_nn_triplet_margin_with_distance_loss_new(tg_module **out, tg_distance_fn distance,
                                                void *user, double margin, bool swap,
                                                tg_reduction red)
{
    const char *op = "nn_triplet_margin_with_distance_loss_new";
    TG_CHECK(margin > 0, TG_EINVAL, "%s: margin=%g must be > 0", op, margin);
    loss_state s = {.kind = TRIPLET_DISTANCE, .red = red, .margin = margin, .flag = swap,
                    .distance = distance, .distance_user = user};
    return loss_new(out, op, &s, NULL, NULL);
}

/* ---- the options ---- */

int tg_nn_loss_options(const tg_module *m, tg_nn_loss_opts *opts)
{
    TG_CHECK(m != NULL && opts != NULL, TG_EINVAL,
             "nn_loss_options: m and opts must not be NULL");
    int kind = 0;
    while (kind < N_LOSS_KINDS && m->vt != &loss_vts[kind]) kind++;
    TG_CHECK(kind < N_LOSS_KINDS, TG_EINVAL,
             "nn_loss_options: m is a %s module, not a loss (tg_nn_*_loss_new)",
             tg_module_type_name(m));
    const loss_state *s = tg_module_state(m);
    const loss_kind k = s->kind;
    const bool margin = k == MARGIN_RANKING || k == HINGE_EMBEDDING || k == COSINE_EMBEDDING ||
                        k == TRIPLET_MARGIN || k == MULTI_MARGIN || k == TRIPLET_DISTANCE;
    *opts = (tg_nn_loss_opts){
        .reduction = s->red,
        .ignore_index = k == CROSS_ENTROPY || k == NLL ? s->ignore_index : 0,
        .label_smoothing = k == CROSS_ENTROPY ? s->label_smoothing : 0,
        .delta = k == HUBER ? s->beta : 0,
        .beta = k == SMOOTH_L1 ? s->beta : 0,
        .margin = margin ? s->margin : 0,
        .p = k == TRIPLET_MARGIN || k == MULTI_MARGIN ? s->p : 0,
        .eps = k == TRIPLET_MARGIN || k == POISSON_NLL || k == GAUSSIAN_NLL ? s->eps : 0,
        .log_target = k == KL_DIV && s->flag,
        .swap = (k == TRIPLET_MARGIN || k == TRIPLET_DISTANCE) && s->flag,
        .full = (k == POISSON_NLL || k == GAUSSIAN_NLL) && s->flag,
        .log_input = k == POISSON_NLL && s->log_input,
        .blank = k == CTC ? s->blank : 0,
        .zero_infinity = k == CTC && s->flag,
    };
    return TG_OK;
}
