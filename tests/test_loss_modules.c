/* tests/test_loss_modules.c - the loss modules of tapegrad/nn.h
 * (tg_nn_*_loss_new): each forward is its loss function's output bit for
 * bit for every reduction; values and state dicts against torch.nn's loss
 * classes (label smoothing, class weights, pos_weight, ignore_index,
 * probability targets); the
 * weight buffers' keys, copies and dtype conversion; gradients through
 * tg_backward and gradcheck in f64; the refusals of a wrong input count
 * (a Sequential too) and of bad options.
 * Goldens: scripts/make_loss_modules_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The module of torch class cls with the constructor's numbers a (in the C
 * constructor's order) and the weights w and pw (NULL: none). */
static int make_loss(tg_module **m, const char *cls, tg_reduction red, const double *a,
                     tg_tensor *w, tg_tensor *pw)
{
    if (!strcmp(cls, "MSELoss")) return tg_nn_mse_loss_new(m, red);
    if (!strcmp(cls, "L1Loss")) return tg_nn_l1_loss_new(m, red);
    if (!strcmp(cls, "CrossEntropyLoss"))
        return tg_nn_cross_entropy_loss_new(m, w, (int64_t)a[0], red, a[1]);
    if (!strcmp(cls, "NLLLoss")) return tg_nn_nll_loss_new(m, w, (int64_t)a[0], red);
    if (!strcmp(cls, "BCELoss")) return tg_nn_bce_loss_new(m, w, red);
    if (!strcmp(cls, "BCEWithLogitsLoss")) return tg_nn_bce_with_logits_loss_new(m, w, red, pw);
    if (!strcmp(cls, "HuberLoss")) return tg_nn_huber_loss_new(m, red, a[0]);
    if (!strcmp(cls, "SmoothL1Loss")) return tg_nn_smooth_l1_loss_new(m, red, a[0]);
    if (!strcmp(cls, "KLDivLoss")) return tg_nn_kl_div_loss_new(m, red, a[0] != 0);
    if (!strcmp(cls, "MarginRankingLoss")) return tg_nn_margin_ranking_loss_new(m, a[0], red);
    if (!strcmp(cls, "HingeEmbeddingLoss")) return tg_nn_hinge_embedding_loss_new(m, a[0], red);
    if (!strcmp(cls, "CosineEmbeddingLoss"))
        return tg_nn_cosine_embedding_loss_new(m, a[0], red);
    if (!strcmp(cls, "TripletMarginLoss"))
        return tg_nn_triplet_margin_loss_new(m, a[0], a[1], a[2], a[3] != 0, red);
    if (!strcmp(cls, "SoftMarginLoss")) return tg_nn_soft_margin_loss_new(m, red);
    if (!strcmp(cls, "MultiMarginLoss"))
        return tg_nn_multi_margin_loss_new(m, (int)a[0], a[1], w, red);
    if (!strcmp(cls, "MultiLabelMarginLoss")) return tg_nn_multilabel_margin_loss_new(m, red);
    if (!strcmp(cls, "MultiLabelSoftMarginLoss"))
        return tg_nn_multilabel_soft_margin_loss_new(m, w, red);
    if (!strcmp(cls, "PoissonNLLLoss"))
        return tg_nn_poisson_nll_loss_new(m, a[0] != 0, a[1] != 0, a[2], red);
    if (!strcmp(cls, "GaussianNLLLoss"))
        return tg_nn_gaussian_nll_loss_new(m, a[0] != 0, a[1], red);
    cr_assert(false, "unknown class %s", cls);
    return TG_EINVAL;
}

/* The numbers of "0.5,1.0" into a (at most 4). */
static void numbers_of(const char *s, double *a)
{
    if (!strcmp(s, "-")) return;
    for (int i = 0; i < 4 && *s; i++) {
        char *end = NULL;
        a[i] = strtod(s, &end);
        s = *end == ',' ? end + 1 : end;
    }
}

Test(loss_modules, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("loss_modules.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    cr_assert(n > 0);
    int n_ce = 0;
    for (int i = 0; i < n; i++) {
        char c[32], key[96];
        snprintf(c, sizeof c, "case%d", i);
        const char *cls = th_golden_meta(f, c, "cls");
        double a[4] = {0};
        numbers_of(th_golden_meta(f, c, "a"), a);
        snprintf(key, sizeof key, "%s.state.weight", c);
        tg_tensor *w = tg_st_get(f, key);
        snprintf(key, sizeof key, "%s.state.pos_weight", c);
        tg_tensor *pw = tg_st_get(f, key);
        tg_module *m = NULL;
        OK(make_loss(&m, cls, th_reduction_of(th_golden_meta(f, c, "red")), a, w, pw));
        cr_assert(strcmp(tg_module_type_name(m), cls) == 0, "%s: type name %s", c,
                  tg_module_type_name(m));
        tg_tensor *xs[3] = {NULL};
        int nx = 0;
        for (; nx < 3; nx++) {
            snprintf(key, sizeof key, "%s.x%d", c, nx);
            if (!(xs[nx] = tg_st_get(f, key))) break;
        }
        tg_tensor *y = NULL;
        int rc = tg_module_forward_n(m, &y, nx, xs);
        cr_assert(eq(int, rc, TG_OK), "%s %s (%s): %s", c, cls, th_golden_meta(f, c, "red"),
                  tg_error_message());
        char what[96];
        snprintf(what, sizeof what, "%s %s %s", c, cls, th_golden_meta(f, c, "red"));
        th_expect_close(what, y, th_golden_get(f, c, "y"), 1e-12);
        if (!strcmp(cls, "CrossEntropyLoss")) {   /* F.cross_entropy, the function */
            tg_tensor *yf = NULL;
            rc = tg_cross_entropy_ex(&yf, xs[0], xs[1], w, (int64_t)a[0],
                                     th_reduction_of(th_golden_meta(f, c, "red")), a[1]);
            cr_assert(eq(int, rc, TG_OK), "%s: %s", what, tg_error_message());
            th_expect_close(what, yf, th_golden_get(f, c, "y"), 1e-12);
            tg_tensor_release(yf);
            n_ce++;
        }
        th_expect_state_keys(m, th_golden_meta(f, c, "keys"));
        snprintf(key, sizeof key, "%s.state", c);
        th_expect_state(m, f, key, 0);
        tg_tensor_release(y);
        tg_module_release(m);
    }
    cr_assert(n_ce >= 10, "%d CrossEntropyLoss cases", n_ce);
    tg_st_free(f);
}

/* ---- each forward is its function, bit for bit ---- */

typedef struct inputs {
    tg_tensor *x, *t, *p, *q, *cls, *sign, *labels, *var, *x2, *w;
} inputs;

static inputs make_inputs(void)
{
    uint64_t s = 17;
    const int64_t sh[2] = {3, 4};
    inputs in = {
        .x = th_rand_tensor(&s, TG_F32, 2, sh, -2, 2),
        .t = th_rand_tensor(&s, TG_F32, 2, sh, -2, 2),
        .p = th_rand_tensor(&s, TG_F32, 2, sh, 0.01, 0.99),
        .q = th_rand_tensor(&s, TG_F32, 2, sh, 0, 1),
        .cls = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){2, 0, 3}),
        .sign = th_tensor_from(TG_F32, 2, sh, (double[]){1, -1, 1, 1, -1, -1, 1, -1, 1, 1, -1, 1}),
        .labels = th_tensor_from(TG_I64, 2, sh, (double[]){3, 0, -1, 1, 2, -1, 0, 0, 1, 2, 3, 0}),
        .var = th_rand_tensor(&s, TG_F32, 2, sh, 0.1, 2),
        .x2 = th_rand_tensor(&s, TG_F32, 2, sh, -2, 2),
        .w = th_tensor_from(TG_F32, 1, (int64_t[]){4}, (double[]){0.5, 2, 1.25, 0.75}),
    };
    return in;
}

static void free_inputs(inputs *in)
{
    th_release_all(10, (tg_tensor *[]){in->x, in->t, in->p, in->q, in->cls, in->sign,
                                       in->labels, in->var, in->x2, in->w});
}

enum { N_CHECKS = 21 };

/* Check k: the module and the function of one loss with options, on the
 * same inputs xs[0..*n). */
static void module_and_function(int k, tg_reduction r, const inputs *in, tg_module **m,
                                tg_tensor **want, tg_tensor **xs, int *n)
{
    tg_tensor *x = in->x, *t = in->t, *w = in->w, *lp = NULL;
    *n = 2;
    xs[0] = x;
    xs[1] = t;
    switch (k) {
    case 0: OK(tg_nn_mse_loss_new(m, r)); OK(tg_mse_loss(want, x, t, r)); break;
    case 1: OK(tg_nn_l1_loss_new(m, r)); OK(tg_l1_loss(want, x, t, r)); break;
    case 2:
        xs[1] = in->cls;
        OK(tg_nn_cross_entropy_loss_new(m, NULL, -100, r, 0));
        OK(tg_cross_entropy(want, x, in->cls, r));
        break;
    case 3:
        xs[1] = in->cls;
        OK(tg_nn_cross_entropy_loss_new(m, w, 3, r, 0));
        OK(tg_log_softmax(&lp, x, 1));
        OK(tg_nll_loss(want, lp, in->cls, w, r, 3));
        break;
    case 4:
        OK(tg_log_softmax(&lp, x, 1));
        xs[0] = lp;
        xs[1] = in->cls;
        OK(tg_nn_nll_loss_new(m, w, 0, r));
        OK(tg_nll_loss(want, lp, in->cls, w, r, 0));
        lp = NULL;   /* released with xs[0] by the caller */
        break;
    case 5:
        xs[0] = in->p;
        xs[1] = in->q;
        OK(tg_nn_bce_loss_new(m, w, r));
        OK(tg_bce_loss(want, in->p, in->q, w, r));
        break;
    case 6:
        xs[1] = in->q;
        OK(tg_nn_bce_with_logits_loss_new(m, NULL, r, NULL));
        OK(tg_bce_with_logits(want, x, in->q, r));
        break;
    case 7:
        xs[1] = in->q;
        OK(tg_nn_bce_with_logits_loss_new(m, NULL, r, w));
        OK(tg_bce_with_logits_weighted(want, x, in->q, NULL, w, r));
        break;
    case 8: OK(tg_nn_huber_loss_new(m, r, 0.6)); OK(tg_huber_loss(want, x, t, r, 0.6)); break;
    case 9:
        OK(tg_nn_smooth_l1_loss_new(m, r, 0.4));
        OK(tg_smooth_l1_loss(want, x, t, r, 0.4));
        break;
    case 10: OK(tg_nn_kl_div_loss_new(m, r, true)); OK(tg_kl_div(want, x, t, r, true)); break;
    case 11:
        *n = 3;
        xs[1] = in->x2;
        xs[2] = in->sign;
        OK(tg_nn_margin_ranking_loss_new(m, 0.25, r));
        OK(tg_margin_ranking_loss(want, x, in->x2, in->sign, 0.25, r));
        break;
    case 12:
        xs[1] = in->sign;
        OK(tg_nn_hinge_embedding_loss_new(m, 1.5, r));
        OK(tg_hinge_embedding_loss(want, x, in->sign, 1.5, r));
        break;
    case 13: {
        *n = 3;
        tg_tensor *y3 = NULL;
        OK(tg_narrow(&y3, in->sign, 1, 0, 1));
        OK(tg_reshape(&lp, y3, 1, (int64_t[]){3}));
        tg_tensor_release(y3);
        xs[1] = in->x2;
        xs[2] = lp;
        OK(tg_nn_cosine_embedding_loss_new(m, 0.1, r));
        OK(tg_cosine_embedding_loss(want, x, in->x2, lp, 0.1, r));
        lp = NULL;   /* released with xs[2] by the caller */
        break;
    }
    case 14:
        *n = 3;
        xs[2] = in->x2;
        OK(tg_nn_triplet_margin_loss_new(m, 0.7, 1.5, 1e-5, true, r));
        OK(tg_triplet_margin_loss(want, x, t, in->x2, 0.7, 1.5, 1e-5, true, r));
        break;
    case 15:
        xs[1] = in->sign;
        OK(tg_nn_soft_margin_loss_new(m, r));
        OK(tg_soft_margin_loss(want, x, in->sign, r));
        break;
    case 16:
        xs[1] = in->cls;
        OK(tg_nn_multi_margin_loss_new(m, 2, 0.9, w, r));
        OK(tg_multi_margin_loss(want, x, in->cls, 2, 0.9, w, r));
        break;
    case 17:
        xs[1] = in->labels;
        OK(tg_nn_multilabel_margin_loss_new(m, r));
        OK(tg_multilabel_margin_loss(want, x, in->labels, r));
        break;
    case 18:
        xs[1] = in->q;
        OK(tg_nn_multilabel_soft_margin_loss_new(m, w, r));
        OK(tg_multilabel_soft_margin_loss(want, x, in->q, w, r));
        break;
    case 19:
        xs[0] = in->var;
        xs[1] = in->q;
        OK(tg_nn_poisson_nll_loss_new(m, false, true, 1e-6, r));
        OK(tg_poisson_nll_loss(want, in->var, in->q, false, true, 1e-6, r));
        break;
    case 20:
        *n = 3;
        xs[2] = in->var;
        OK(tg_nn_gaussian_nll_loss_new(m, true, 1e-3, r));
        OK(tg_gaussian_nll_loss(want, x, t, in->var, true, 1e-3, r));
        break;
    default: cr_assert(false, "check %d", k);
    }
    tg_tensor_release(lp);
}

Test(loss_modules, forward_is_the_function_bit_for_bit)
{
    inputs in = make_inputs();
    const tg_reduction reds[3] = {TG_REDUCTION_MEAN, TG_REDUCTION_SUM, TG_REDUCTION_NONE};
    for (int k = 0; k < N_CHECKS; k++) {
        for (int j = 0; j < 3; j++) {
            tg_module *m = NULL;
            tg_tensor *want = NULL, *got = NULL, *xs[3] = {NULL};
            int n = 0;
            module_and_function(k, reds[j], &in, &m, &want, xs, &n);
            OK(tg_module_forward_n(m, &got, n, xs));
            char what[64];
            snprintf(what, sizeof what, "check %d (%s) reduction %d", k,
                     tg_module_type_name(m), j);
            th_expect_same_bits(what, xs[0], got, want);
            if (k == 4) tg_tensor_release(xs[0]);
            if (k == 13) tg_tensor_release(xs[2]);
            th_release_all(2, (tg_tensor *[]){want, got});
            tg_module_release(m);
        }
    }
    free_inputs(&in);
}

/* ---- buffers ---- */

Test(loss_modules, weight_buffers_have_torch_keys)
{
    tg_tensor *w = th_tensor_from(TG_F32, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    tg_module *m = NULL;
    OK(tg_nn_cross_entropy_loss_new(&m, NULL, -100, TG_REDUCTION_MEAN, 0));
    th_expect_state_keys(m, "");
    cr_assert(eq(int, tg_module_state_count(m), 0));
    tg_module_release(m);
    OK(tg_nn_cross_entropy_loss_new(&m, w, -100, TG_REDUCTION_MEAN, 0.1));
    th_expect_state_keys(m, "weight");
    cr_assert(eq(int, tg_module_parameter_count(m), 0));
    tg_tensor *b = tg_module_find(m, "weight");
    cr_assert(b != w, "the buffer is a copy of the weight given");
    th_expect_same_bits("weight", w, b, w);
    tg_module_release(m);
    OK(tg_nn_bce_with_logits_loss_new(&m, w, TG_REDUCTION_SUM, w));
    th_expect_state_keys(m, "weight,pos_weight");
    tg_module_release(m);
    OK(tg_nn_bce_with_logits_loss_new(&m, NULL, TG_REDUCTION_SUM, w));
    th_expect_state_keys(m, "pos_weight");
    tg_module_release(m);
    const char *one[] = {"NLLLoss", "BCELoss", "MultiMarginLoss", "MultiLabelSoftMarginLoss"};
    for (int i = 0; i < 4; i++) {
        OK(make_loss(&m, one[i], TG_REDUCTION_MEAN, (double[]){1, 1}, w, NULL));
        th_expect_state_keys(m, "weight");
        tg_module_release(m);
        OK(make_loss(&m, one[i], TG_REDUCTION_MEAN, (double[]){1, 1}, NULL, NULL));
        th_expect_state_keys(m, "");
        tg_module_release(m);
    }
    tg_tensor_release(w);
}

Test(loss_modules, module_to_dtype_moves_the_weight)
{
    tg_tensor *w = th_tensor_from(TG_F32, 1, (int64_t[]){4}, (double[]){0.5, 2, 1.25, 0.75});
    tg_tensor *x = th_rand_uniform(TG_F64, 2, (int64_t[]){3, 4}, 9);
    tg_tensor *t = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){1, 3, 0});
    tg_module *m = NULL;
    OK(tg_nn_cross_entropy_loss_new(&m, w, -100, TG_REDUCTION_MEAN, 0));
    tg_tensor *b = tg_module_find(m, "weight");
    OK(tg_module_to_dtype(m, TG_F64));
    cr_assert(tg_module_find(m, "weight") == b, "the buffer keeps its tensor object");
    cr_assert(eq(int, tg_tensor_dtype(b), TG_F64));
    cr_assert(eq(int, tg_tensor_dtype(w), TG_F32), "the caller's weight is unchanged");
    tg_tensor *w64 = NULL, *lp = NULL, *want = NULL, *got = NULL;
    OK(tg_tensor_to_dtype(&w64, w, TG_F64));
    OK(tg_log_softmax(&lp, x, 1));
    OK(tg_nll_loss(&want, lp, t, w64, TG_REDUCTION_MEAN, -100));
    OK(tg_module_forward_n(m, &got, 2, (tg_tensor *[]){x, t}));
    cr_assert(eq(int, tg_tensor_dtype(got), TG_F64));
    th_expect_same_bits("f64 weight", x, got, want);
    tg_module_release(m);
    th_release_all(7, (tg_tensor *[]){w, x, t, w64, lp, want, got});
}

/* ---- gradients ---- */

typedef struct grad_case {
    tg_module *m;
    tg_tensor *target;   /* NULL: the inputs are all the forward's */
} grad_case;

static int grad_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const grad_case *g = user;
    if (!g->target) return tg_module_forward_n(g->m, out, n, in);
    return tg_module_forward_n(g->m, out, 2, (tg_tensor *[]){in[0], g->target});
}

Test(loss_modules, gradients_reach_the_input)
{
    tg_tensor *w = th_tensor_from(TG_F64, 1, (int64_t[]){4}, (double[]){0.5, 2, 1.25, 0.75});
    tg_tensor *x = th_rand_uniform(TG_F64, 2, (int64_t[]){3, 4}, 3);
    tg_tensor *t = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){1, -100, 2});
    tg_tensor *q = th_rand_uniform(TG_F64, 2, (int64_t[]){3, 4}, 4);
    tg_tensor *v = th_seq(TG_F64, 2, (int64_t[]){3, 4}, 0.5, 1.5);
    tg_tensor_set_requires_grad(x, true);
    grad_case g = {NULL, t};
    OK(tg_nn_cross_entropy_loss_new(&g.m, w, -100, TG_REDUCTION_MEAN, 0.2));
    tg_tensor *y = NULL;
    OK(tg_module_forward_n(g.m, &y, 2, (tg_tensor *[]){x, t}));
    OK(tg_backward(y, NULL, NULL));
    const tg_tensor *dx = tg_tensor_grad(x);
    cr_assert(dx != NULL, "CrossEntropyLoss: x has no gradient");
    double row = 0;   /* the ignored row's gradient is 0 */
    for (int c = 0; c < 4; c++) row += fabs(th_get(dx, (int64_t[]){1, c}));
    cr_assert(eq(dbl, row, 0));
    cr_assert(th_get(dx, (int64_t[]){0, 0}) != 0);
    tg_tensor_release(y);
    th_expect_gradchecks(grad_fn, &g, 1, &x, "CrossEntropyLoss");
    tg_module_release(g.m);
    g.target = q;
    OK(tg_nn_bce_with_logits_loss_new(&g.m, NULL, TG_REDUCTION_SUM, w));
    th_expect_gradchecks(grad_fn, &g, 1, &x, "BCEWithLogitsLoss");
    tg_module_release(g.m);
    g.target = NULL;
    tg_tensor_set_requires_grad(q, true);
    tg_tensor_set_requires_grad(v, true);
    OK(tg_nn_cross_entropy_loss_new(&g.m, w, -100, TG_REDUCTION_MEAN, 0.1));
    th_expect_gradchecks(grad_fn, &g, 2, (tg_tensor *[]){x, q}, "probability targets");
    tg_module_release(g.m);
    OK(tg_nn_gaussian_nll_loss_new(&g.m, true, 1e-6, TG_REDUCTION_MEAN));
    th_expect_gradchecks(grad_fn, &g, 3, (tg_tensor *[]){x, q, v}, "GaussianNLLLoss");
    tg_module_release(g.m);
    th_release_all(5, (tg_tensor *[]){w, x, t, q, v});
}

/* ---- refusals ---- */

Test(loss_modules, wrong_input_count_is_refused)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 4}, 5);
    tg_module *m = NULL, *seq = NULL;
    OK(tg_nn_mse_loss_new(&m, TG_REDUCTION_MEAN));
    tg_tensor *y = NULL;
    int rc = tg_module_forward(m, &y, x);
    th_expect_refused(rc, TG_EINVAL, "MSELoss takes 2 inputs", y);
    rc = tg_module_forward_n(m, &y, 3, (tg_tensor *[]){x, x, x});
    th_expect_refused(rc, TG_EINVAL, "MSELoss takes 2 inputs, got n=3", y);
    tg_module_release(m);
    OK(tg_nn_triplet_margin_loss_new(&m, 1, 2, 1e-6, false, TG_REDUCTION_MEAN));
    rc = tg_module_forward_n(m, &y, 2, (tg_tensor *[]){x, x});
    th_expect_refused(rc, TG_EINVAL, "TripletMarginLoss takes 3 inputs, got n=2", y);
    tg_module_release(m);
    OK(tg_nn_sequential_new(&seq));
    OK(tg_nn_cross_entropy_loss_new(&m, NULL, -100, TG_REDUCTION_MEAN, 0));
    OK(tg_nn_sequential_append(seq, m));
    rc = tg_module_forward(seq, &y, x);
    th_expect_refused(rc, TG_EINVAL, "CrossEntropyLoss takes 2 inputs", y);
    tg_module_release(seq);
    OK(tg_nn_cross_entropy_loss_new(&m, NULL, -100, TG_REDUCTION_MEAN, 0));
    tg_tensor *p = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 5}, 7);
    rc = tg_module_forward_n(m, &y, 2, (tg_tensor *[]){x, p});
    th_expect_refused(rc, TG_ESHAPE, "a float target (class probabilities) must have", y);
    tg_module_release(m);
    th_release_all(2, (tg_tensor *[]){x, p});
}

/* call (writing a module through out_) is refused with status and words,
 * leaves *out_ NULL and no tensor memory behind. */
#define REFUSED(call, status, words)                                                       \
    do {                                                                                   \
        tg_module *mod_ = NULL, **out_ = &mod_;                                            \
        int64_t before_, after_;                                                           \
        tg_memory_stats(&before_, NULL);                                                   \
        int rc_ = (call);                                                                  \
        tg_memory_stats(&after_, NULL);                                                    \
        th_expect_refused(rc_, status, words, NULL);                                       \
        cr_assert(mod_ == NULL, "%s made a module", #call);                                \
        cr_assert(eq(i64, after_, before_), "%s leaves %lld bytes", #call,                 \
                  (long long)(after_ - before_));                                          \
    } while (0)

Test(loss_modules, bad_options_are_refused)
{
    tg_tensor *wi = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    tg_tensor *w2 = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 3}, 1);
    tg_tensor *w = th_tensor_from(TG_F32, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    const tg_reduction bm = TG_REDUCTION_BATCHMEAN, mean = TG_REDUCTION_MEAN;
    REFUSED(tg_nn_mse_loss_new(out_, bm), TG_EINVAL, "reduction=3 must be MEAN, SUM or NONE");
    REFUSED(tg_nn_l1_loss_new(out_, (tg_reduction)7), TG_EINVAL, "nn_l1_loss_new: reduction=7");
    REFUSED(tg_nn_kl_div_loss_new(out_, (tg_reduction)-1, false), TG_EINVAL,
            "MEAN, SUM or NONE or BATCHMEAN");
    REFUSED(tg_nn_cross_entropy_loss_new(out_, w, -100, mean, 1.5), TG_EINVAL,
            "label_smoothing=1.5 must be in [0, 1]");
    REFUSED(tg_nn_cross_entropy_loss_new(out_, w, -100, mean, NAN), TG_EINVAL,
            "label_smoothing");
    REFUSED(tg_nn_cross_entropy_loss_new(out_, wi, -100, mean, 0), TG_EINVAL,
            "weight has dtype i64; must be a float tensor");
    REFUSED(tg_nn_nll_loss_new(out_, w2, -100, mean), TG_EINVAL, "weight has 2 dims");
    REFUSED(tg_nn_multi_margin_loss_new(out_, 1, 1, w2, mean), TG_EINVAL, "weight has 2 dims");
    REFUSED(tg_nn_multi_margin_loss_new(out_, 3, 1, NULL, mean), TG_EINVAL, "p=3 must be 1 or 2");
    REFUSED(tg_nn_bce_with_logits_loss_new(out_, w, mean, wi), TG_EINVAL,
            "pos_weight has dtype i64");
    REFUSED(tg_nn_huber_loss_new(out_, mean, 0), TG_EINVAL, "delta=0 must be > 0");
    REFUSED(tg_nn_huber_loss_new(out_, mean, NAN), TG_EINVAL, "delta");
    REFUSED(tg_nn_smooth_l1_loss_new(out_, mean, -1), TG_EINVAL, "beta=-1 must be >= 0");
    REFUSED(tg_nn_hinge_embedding_loss_new(out_, NAN, mean), TG_EINVAL, "margin must not be NaN");
    REFUSED(tg_nn_triplet_margin_loss_new(out_, 1, NAN, 1e-6, false, mean), TG_EINVAL,
            "p must not be NaN");
    REFUSED(tg_nn_gaussian_nll_loss_new(out_, false, NAN, mean), TG_EINVAL,
            "eps must not be NaN");
    REFUSED(tg_nn_mse_loss_new(NULL, mean), TG_EINVAL, "out must not be NULL");
    /* BCELoss's weight broadcasts: any shape of a float dtype */
    tg_module *m = NULL;
    OK(tg_nn_bce_loss_new(&m, w2, TG_REDUCTION_SUM));
    tg_module_release(m);
    th_release_all(3, (tg_tensor *[]){wi, w2, w});
}

/* tg_cross_entropy_ex's own refusals, each naming the rule. */
Test(loss_modules, cross_entropy_ex_refusals)
{
    tg_tensor *x = th_rand_uniform(TG_F64, 2, (int64_t[]){4, 3}, 1);
    tg_tensor *t = th_tensor_from(TG_I64, 1, (int64_t[]){4}, (double[]){0, 2, 1, 2});
    tg_tensor *p = th_rand_uniform(TG_F64, 2, (int64_t[]){4, 2}, 2);
    tg_tensor *w = th_tensor_from(TG_F64, 1, (int64_t[]){2}, (double[]){1, 2});
    tg_tensor *z = th_tensor_from(TG_F64, 0, NULL, (double[]){1});
    tg_tensor *y = NULL;
    const tg_reduction mean = TG_REDUCTION_MEAN;
    th_expect_refused(tg_cross_entropy_ex(&y, NULL, t, NULL, -100, mean, 0), TG_EINVAL,
                      "out, input and target must not be NULL", y);
    th_expect_refused(tg_cross_entropy_ex(&y, x, t, NULL, -100, mean, 1.5), TG_EINVAL,
                      "label_smoothing=1.5 must be in [0, 1]", y);
    th_expect_refused(tg_cross_entropy_ex(&y, x, t, NULL, -100, mean, NAN), TG_EINVAL,
                      "label_smoothing", y);
    th_expect_refused(tg_cross_entropy_ex(&y, z, t, NULL, -100, mean, 0), TG_ESHAPE,
                      "input is 0-d", y);
    th_expect_refused(tg_cross_entropy_ex(&y, x, p, NULL, -100, mean, 0), TG_ESHAPE,
                      "a float target (class probabilities) must have input's shape", y);
    th_expect_refused(tg_cross_entropy_ex(&y, x, x, w, -100, mean, 0.1), TG_ESHAPE,
                      "weight has 2 elements; input has 3 classes", y);
    OK(tg_cross_entropy_ex(&y, x, t, NULL, -100, mean, 0));   /* the plain case */
    tg_tensor *want = NULL;
    OK(tg_cross_entropy(&want, x, t, mean));
    th_expect_close("cross_entropy_ex = cross_entropy", y, want, 0);
    th_release_all(7, (tg_tensor *[]){x, t, p, w, z, y, want});
}

Test(loss_modules, modules_copy)
{
    tg_tensor *w = th_tensor_from(TG_F32, 1, (int64_t[]){4}, (double[]){0.5, 2, 1.25, 0.75});
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 4}, 6);
    tg_tensor *t = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){1, 3, 0});
    tg_module *m = NULL, *c = NULL;
    OK(tg_nn_cross_entropy_loss_new(&m, w, 3, TG_REDUCTION_SUM, 0.3));
    OK(tg_module_copy(&c, m));
    tg_tensor *a = NULL, *b = NULL;
    OK(tg_module_forward_n(m, &a, 2, (tg_tensor *[]){x, t}));
    OK(tg_module_forward_n(c, &b, 2, (tg_tensor *[]){x, t}));
    th_expect_same_bits("copy", x, b, a);
    cr_assert(strcmp(tg_module_type_name(c), "CrossEntropyLoss") == 0);
    tg_module_release(m);
    tg_module_release(c);
    th_release_all(5, (tg_tensor *[]){w, x, t, a, b});
}
