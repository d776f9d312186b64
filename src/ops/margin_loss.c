/* src/ops/margin_loss.c - the margin and embedding losses of PyTorch 1.13,
 * composed of differentiable public ops (derivatives of any order follow):
 *
 *   margin_ranking_loss    max(0, -y (x1 - x2) + margin)
 *   hinge_embedding_loss   where(y != 1, max(0, margin - x), 0)
 *                          + where(y != -1, x, 0)
 *   soft_margin_loss       log1p(exp(-x y))
 *   cosine_embedding_loss  where(y == 1, 1 - cos, 0)
 *                          + where(y == -1, max(0, cos - margin), 0),
 *                          cos = sum(x1 x2) / sqrt((sum(x1^2) + e)
 *                                                  (sum(x2^2) + e)),
 *                          e = 1e-12 as a float
 *   triplet_margin_loss    max(0, margin + d(a, p) - d(a, n)), d the
 *                          pairwise distance; with swap, d(a, n) is
 *                          min(d(a, n), d(p, n))
 *   triplet_margin_with_distance_loss  the same with a caller's d
 *                          (tg_pairwise_distance(., ., 2, 1e-6) without)
 *
 * each reduced as its `reduction`.  max(0, .) is tg_clamp, whose gradient
 * passes where the argument is >= 0, as torch's clamp_min: a margin hit
 * exactly still has a gradient. */
#include <math.h>

#include "core/core.h"
#include "ops/elementwise.h"
#include "ops/loss.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"
#include "tapegrad/scope.h"

/* cosine_embedding_loss's EPSILON, added to each squared norm: torch's is
 * the float nearest 1e-12 (9.99999996e-13), also in f64. */
#define COS_EMB_EPS ((double)1e-12f)

/* t (named name) non-NULL and float. */
static int check_float(const char *op, const char *name, const tg_tensor *t)
{
    TG_CHECK(t != NULL, TG_EINVAL, "%s: %s must not be NULL", op, name);
    TG_CHECK(tg_dtype_is_float(t->dtype), TG_EDTYPE, "%s: %s has dtype %s; float dtypes only",
             op, name, tg_dtype_name(t->dtype));
    return TG_OK;
}

/* A target of labels, of any dtype (torch compares it with 1 and -1, or
 * multiplies by it): non-NULL. */
static int check_target(const char *op, const tg_tensor *t)
{
    TG_CHECK(t != NULL, TG_EINVAL, "%s: target must not be NULL", op);
    return TG_OK;
}

/* The shapes of a, b (and c, when not NULL) broadcast together. */
static int check_broadcast(const char *op, const tg_tensor *a, const tg_tensor *b,
                           const tg_tensor *c)
{
    int nd = 0;
    int64_t sh[TG_MAX_DIMS];
    TG_TRY(tg__broadcast_shapes(op, a->ndim, a->shape, b->ndim, b->shape, &nd, sh));
    if (c) {
        int64_t s2[TG_MAX_DIMS];
        TG_TRY(tg__broadcast_shapes(op, nd, sh, c->ndim, c->shape, &nd, s2));
    }
    return TG_OK;
}

/* *out = reduce(max(0, t)). */
static int relu_reduce(tg_tensor **out, tg_tensor *t, tg_reduction red)
{
    tg_tensor *c = NULL;
    int rc = tg_clamp(&c, t, 0.0, NAN);
    if (rc == TG_OK) rc = tg__loss_reduce(out, c, red);
    tg_tensor_release(c);
    return rc;
}

static int margin_ranking_loss(tg_tensor **out, tg_tensor *x1, tg_tensor *x2, tg_tensor *y,
                               double margin, tg_reduction red)
{
    const char *op = "margin_ranking_loss";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_TRY(check_float(op, "input1", x1));
    TG_TRY(check_float(op, "input2", x2));
    TG_TRY(check_target(op, y));
    TG_TRY(tg__loss_check_reduction(op, red));
    TG_CHECK(x1->ndim == x2->ndim && x1->ndim == y->ndim, TG_ESHAPE,
             "%s: input1, input2 and target must have the same number of dims, got %d, %d "
             "and %d", op, x1->ndim, x2->ndim, y->ndim);
    TG_TRY(check_broadcast(op, x1, x2, y));
    tg_tensor *t[4] = {0};
    int rc;
    TG_TRY_GOTO(tg_neg(&t[0], y));
    TG_TRY_GOTO(tg_sub(&t[1], x1, x2));
    TG_TRY_GOTO(tg_mul(&t[2], t[0], t[1]));
    TG_TRY_GOTO(tg_add_scalar(&t[3], t[2], margin));
    rc = relu_reduce(out, t[3], red);
done:
    tg__loss_release_all(t, 4);
    return rc;
}

static int hinge_embedding_loss(tg_tensor **out, tg_tensor *x, tg_tensor *y, double margin,
                                tg_reduction red)
{
    const char *op = "hinge_embedding_loss";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_TRY(check_float(op, "input", x));
    TG_TRY(check_target(op, y));
    TG_TRY(tg__loss_check_reduction(op, red));
    TG_TRY(check_broadcast(op, x, y, NULL));
    tg_tensor *t[7] = {0};
    int rc;
    TG_TRY_GOTO(tg_rsub_scalar(&t[0], x, margin));
    TG_TRY_GOTO(tg_clamp(&t[1], t[0], 0.0, NAN));
    TG_TRY_GOTO(tg_ne_scalar(&t[2], y, 1.0));
    TG_TRY_GOTO(tg__where_or_zero(&t[3], t[2], t[1]));
    TG_TRY_GOTO(tg_ne_scalar(&t[4], y, -1.0));
    TG_TRY_GOTO(tg__where_or_zero(&t[5], t[4], x));
    TG_TRY_GOTO(tg_add(&t[6], t[3], t[5]));
    rc = tg__loss_reduce(out, t[6], red);
done:
    tg__loss_release_all(t, 7);
    return rc;
}

static int soft_margin_loss(tg_tensor **out, tg_tensor *x, tg_tensor *y, tg_reduction red)
{
    const char *op = "soft_margin_loss";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_TRY(check_float(op, "input", x));
    TG_TRY(check_target(op, y));
    TG_TRY(tg__loss_check_reduction(op, red));
    /* torch writes into a tensor of input's shape: target must not grow it */
    TG_TRY(tg__loss_check_weight(op, "target", y, x));
    tg_tensor *t[4] = {0};
    int rc;
    TG_TRY_GOTO(tg_neg(&t[0], x));
    TG_TRY_GOTO(tg_mul(&t[1], t[0], y));
    TG_TRY_GOTO(tg_exp(&t[2], t[1]));
    TG_TRY_GOTO(tg_log1p(&t[3], t[2]));
    rc = tg__loss_reduce(out, t[3], red);
done:
    tg__loss_release_all(t, 4);
    return rc;
}

/* sum(a * b, dim). */
static int dot(tg_tensor **out, tg_tensor *a, tg_tensor *b, int dim)
{
    tg_tensor *p = NULL;
    int rc = tg_mul(&p, a, b);
    if (rc == TG_OK) rc = tg_sum_dims(out, p, 1, &dim, false);
    tg_tensor_release(p);
    return rc;
}

/* cos = sum(x1 x2) / sqrt((sum(x1^2) + eps) (sum(x2^2) + eps)), summed over
 * dim, in torch's order of operations. */
static int cos_emb(tg_tensor **out, tg_tensor *x1, tg_tensor *x2, int dim)
{
    tg_tensor *t[7] = {0};
    int rc;
    TG_TRY_GOTO(dot(&t[0], x1, x2, dim));
    TG_TRY_GOTO(dot(&t[1], x1, x1, dim));
    TG_TRY_GOTO(tg_add_scalar(&t[2], t[1], COS_EMB_EPS));
    TG_TRY_GOTO(dot(&t[3], x2, x2, dim));
    TG_TRY_GOTO(tg_add_scalar(&t[4], t[3], COS_EMB_EPS));
    TG_TRY_GOTO(tg_mul(&t[5], t[2], t[4]));
    TG_TRY_GOTO(tg_sqrt(&t[6], t[5]));
    rc = tg_div(out, t[0], t[6]);
done:
    tg__loss_release_all(t, 7);
    return rc;
}

static int cosine_embedding_loss(tg_tensor **out, tg_tensor *x1, tg_tensor *x2, tg_tensor *y,
                                 double margin, tg_reduction red)
{
    const char *op = "cosine_embedding_loss";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_TRY(check_float(op, "input1", x1));
    TG_TRY(check_float(op, "input2", x2));
    TG_TRY(check_target(op, y));
    TG_TRY(tg__loss_check_reduction(op, red));
    TG_CHECK(y->ndim <= 1, TG_ESHAPE,
             "%s: target must be 0-d or 1-d (one target per pair), got %d dims", op, y->ndim);
    TG_CHECK(x1->ndim == y->ndim + 1 && x2->ndim == y->ndim + 1, TG_ESHAPE,
             "%s: a %d-d target takes %d-d input1 and input2, got %d and %d dims", op, y->ndim,
             y->ndim + 1, x1->ndim, x2->ndim);
    TG_TRY(check_broadcast(op, x1, x2, NULL));
    tg_tensor *t[9] = {0};
    int rc;
    TG_TRY_GOTO(cos_emb(&t[0], x1, x2, y->ndim));
    TG_TRY_GOTO(check_broadcast(op, t[0], y, NULL));
    TG_TRY_GOTO(tg_rsub_scalar(&t[1], t[0], 1.0));
    TG_TRY_GOTO(tg_sub_scalar(&t[2], t[0], margin));
    TG_TRY_GOTO(tg_clamp(&t[3], t[2], 0.0, NAN));
    TG_TRY_GOTO(tg_eq_scalar(&t[4], y, 1.0));
    TG_TRY_GOTO(tg__where_or_zero(&t[5], t[4], t[1]));
    TG_TRY_GOTO(tg_eq_scalar(&t[6], y, -1.0));
    TG_TRY_GOTO(tg__where_or_zero(&t[7], t[6], t[3]));
    TG_TRY_GOTO(tg_add(&t[8], t[5], t[7]));
    rc = tg__loss_reduce(out, t[8], red);
done:
    tg__loss_release_all(t, 9);
    return rc;
}

/* max(0, margin + d(a, p) - d(a, n)) reduced, d(a, n) replaced by
 * min(d(a, n), d(p, n)) with swap: both triplet losses, d = dist(., .,
 * user). */
static int triplet_core(tg_tensor **out, tg_tensor *a, tg_tensor *p, tg_tensor *n,
                        tg_distance_fn dist, void *user, double margin, bool swap,
                        tg_reduction red)
{
    tg_tensor *t[6] = {0};
    int rc;
    TG_TRY_GOTO(dist(&t[0], a, p, user));
    TG_TRY_GOTO(dist(&t[1], a, n, user));
    if (swap) {
        TG_TRY_GOTO(dist(&t[2], p, n, user));
        TG_TRY_GOTO(tg_minimum(&t[3], t[1], t[2]));
    } else {
        t[3] = tg_tensor_retain(t[1]);
    }
    TG_TRY_GOTO(tg_add_scalar(&t[4], t[0], margin));
    TG_TRY_GOTO(tg_sub(&t[5], t[4], t[3]));
    rc = relu_reduce(out, t[5], red);
done:
    tg__loss_release_all(t, 6);
    return rc;
}

typedef struct pairwise_args {
    double p, eps;
} pairwise_args;

/* tg_pairwise_distance(x1, x2, p, eps, false): TripletMarginLoss's d. */
static int pairwise_d(tg_tensor **out, tg_tensor *x1, tg_tensor *x2, void *user)
{
    const pairwise_args *pa = user;
    return tg_pairwise_distance(out, x1, x2, pa->p, pa->eps, false);
}

/* The same number of dims for the three (torch's rule for both losses). */
static int check_triplet_dims(const char *op, const tg_tensor *a, const tg_tensor *p,
                              const tg_tensor *n)
{
    TG_CHECK(a->ndim == p->ndim && p->ndim == n->ndim, TG_ESHAPE,
             "%s: anchor, positive and negative must have the same number of dims, got %d, %d "
             "and %d", op, a->ndim, p->ndim, n->ndim);
    return TG_OK;
}

static int triplet_margin_loss(tg_tensor **out, tg_tensor *a, tg_tensor *p, tg_tensor *n,
                               double margin, double norm_p, double eps, bool swap,
                               tg_reduction red)
{
    const char *op = "triplet_margin_loss";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_TRY(check_float(op, "anchor", a));
    TG_TRY(check_float(op, "positive", p));
    TG_TRY(check_float(op, "negative", n));
    TG_TRY(tg__loss_check_reduction(op, red));
    TG_TRY(check_triplet_dims(op, a, p, n));
    TG_CHECK(!isnan(norm_p), TG_EINVAL, "%s: p must not be NaN", op);
    TG_TRY(check_broadcast(op, a, p, n));
    pairwise_args pa = {.p = norm_p, .eps = eps};
    return triplet_core(out, a, p, n, pairwise_d, &pa, margin, swap, red);
}

/* Each public function runs its ops on the library's behalf; only the
 * result goes to the caller's scope (tapegrad/scope.h). */
int tg_margin_ranking_loss(tg_tensor **out, tg_tensor *input1, tg_tensor *input2,
                           tg_tensor *target, double margin, tg_reduction red)
{
    tg__lib_enter();
    tg_tensor *c[3];
    int rc = tg__loss_amp_f32(c, (tg_tensor *[]){input1, input2, target}, 3);
    if (rc == TG_OK) rc = tg__loss_ints_to_float(c, 2);
    if (rc == TG_OK) rc = margin_ranking_loss(out, c[0], c[1], c[2], margin, red);
    tg__lib_leave();
    for (int i = 0; i < 3; i++) tg_tensor_release(c[i]);
    return tg__scope_capture(out, rc);
}

int tg_hinge_embedding_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target,
                            double margin, tg_reduction red)
{
    tg__lib_enter();
    tg_tensor *c[2];
    int rc = tg__loss_amp_f32(c, (tg_tensor *[]){input, target}, 2);
    if (rc == TG_OK) rc = hinge_embedding_loss(out, c[0], c[1], margin, red);
    tg__lib_leave();
    for (int i = 0; i < 2; i++) tg_tensor_release(c[i]);
    return tg__scope_capture(out, rc);
}

int tg_soft_margin_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target, tg_reduction red)
{
    TG_TRY(tg__loss_check_constant("soft_margin_loss", "target", target));
    tg__lib_enter();
    tg_tensor *c[2];
    int rc = tg__loss_amp_f32(c, (tg_tensor *[]){input, target}, 2);
    if (rc == TG_OK) rc = soft_margin_loss(out, c[0], c[1], red);
    tg__lib_leave();
    for (int i = 0; i < 2; i++) tg_tensor_release(c[i]);
    return tg__scope_capture(out, rc);
}

int tg_cosine_embedding_loss(tg_tensor **out, tg_tensor *input1, tg_tensor *input2,
                             tg_tensor *target, double margin, tg_reduction red)
{
    tg__lib_enter();
    tg_tensor *c[3];
    int rc = tg__loss_amp_f32(c, (tg_tensor *[]){input1, input2, target}, 3);
    if (rc == TG_OK) rc = tg__loss_ints_to_float(c, 2);
    if (rc == TG_OK) rc = cosine_embedding_loss(out, c[0], c[1], c[2], margin, red);
    tg__lib_leave();
    for (int i = 0; i < 3; i++) tg_tensor_release(c[i]);
    return tg__scope_capture(out, rc);
}

int tg_triplet_margin_loss(tg_tensor **out, tg_tensor *anchor, tg_tensor *positive,
                           tg_tensor *negative, double margin, double p, double eps, bool swap,
                           tg_reduction red)
{
    tg__lib_enter();
    tg_tensor *c[3];
    int rc = tg__loss_amp_f32(c, (tg_tensor *[]){anchor, positive, negative}, 3);
    if (rc == TG_OK) rc = tg__loss_ints_to_float(c, 3);
    if (rc == TG_OK) rc = triplet_margin_loss(out, c[0], c[1], c[2], margin, p, eps, swap, red);
    tg__lib_leave();
    for (int i = 0; i < 3; i++) tg_tensor_release(c[i]);
    return tg__scope_capture(out, rc);
}

int tg_triplet_margin_with_distance_loss(tg_tensor **out, tg_tensor *anchor,
                                         tg_tensor *positive, tg_tensor *negative,
                                         tg_distance_fn distance, void *user, double margin,
                                         bool swap, tg_reduction red)
{
    const char *op = "triplet_margin_with_distance_loss";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(anchor != NULL, TG_EINVAL, "%s: anchor must not be NULL", op);
    TG_CHECK(positive != NULL, TG_EINVAL, "%s: positive must not be NULL", op);
    TG_CHECK(negative != NULL, TG_EINVAL, "%s: negative must not be NULL", op);
    TG_TRY(tg__loss_check_reduction(op, red));
    TG_CHECK(margin > 0, TG_EINVAL, "%s: margin=%g must be > 0", op, margin);
    TG_TRY(check_triplet_dims(op, anchor, positive, negative));
    pairwise_args pa = {.p = 2.0, .eps = 1e-6};   /* torch's pairwise_distance defaults */
    if (!distance) {
        distance = pairwise_d;
        user = &pa;
    }
    tg__lib_enter();
    const int rc = triplet_core(out, anchor, positive, negative, distance, user, margin, swap,
                                red);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
