/* tests/test_lr_scheduler.c - lr_scheduler.h: every kind's lr sequence
 * against PyTorch 1.13's (tests/golden/optim/lr_scheduler.safetensors,
 * scripts/make_sched_goldens.py, whose CASES this file's cases mirror;
 * param groups added after a scheduler was made and LambdaLR's functions
 * per group among them), argument errors, state save/load and checkpoint
 * resume equal to an uninterrupted run, refused states changing nothing,
 * and the optimizer stepping with the lr a scheduler set. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "tapegrad/checkpoint.h"
#include "tapegrad/lr_scheduler.h"
#include "tapegrad/nn.h"
#include "tapegrad/optim.h"

#define STEPS 40

static double pow095(int64_t e, void *user)
{
    (void)user;
    return pow(0.95, (double)e);
}

/* Python's min(1.0, (epoch + 1) / 5). */
static double warmup5(int64_t e, void *user)
{
    (void)user;
    double f = (double)(e + 1) / 5;
    return f < 1.0 ? f : 1.0;
}

/* ---- the golden cases ------------------------------------------------------- */

typedef enum { K_STEP, K_MULTI, K_EXPO, K_COS, K_LIN, K_LAMBDA, K_LAMBDAS } kind;

/* One scheduler: i is step_size, t_max or total_iters; a is gamma, eta_min
 * or start_factor; b end_factor. */
typedef struct spec {
    kind k;
    int64_t i;
    double a, b;
    int n_ms;
    int64_t ms[4];
    tg_lr_lambda_fn fn, fn2;   /* K_LAMBDAS: fn for group 0, fn2 for group 1 */
} spec;

#define STEP(sz, g) {.k = K_STEP, .i = (sz), .a = (g)}
#define MULTI(g, n, ...) {.k = K_MULTI, .a = (g), .n_ms = (n), .ms = {__VA_ARGS__}}
#define EXPO(g) {.k = K_EXPO, .a = (g)}
#define COS(t, eta) {.k = K_COS, .i = (t), .a = (eta)}
#define LIN(s, e, t) {.k = K_LIN, .a = (s), .b = (e), .i = (t)}
#define LAMBDA(f) {.k = K_LAMBDA, .fn = (f)}
#define LAMBDAS(f, f2) {.k = K_LAMBDAS, .fn = (f), .fn2 = (f2)}

/* A case: one scheduler, or a SequentialLR (seq) of n parts with n - 1
 * milestones; set_at > 0 sets the optimizer's lr to set_lr before that step
 * (of param group set_group when the case has two).  lr2 > 0 makes a
 * second param group with that lr; add_at > 0 adds one of lr add_lr
 * before that step, after the schedulers were made. */
typedef struct gcase {
    const char *name;
    double lr, lr2;
    int n;
    spec parts[3];
    bool seq;
    int64_t ms[2];
    int set_at, set_group;
    double set_lr;
    int add_at;
    double add_lr;
} gcase;

static const gcase cases[] = {
    {.name = "step_7_half", .lr = 0.1, .n = 1, .parts = {STEP(7, 0.5)}},
    {.name = "step_3_default", .lr = 0.05, .n = 1, .parts = {STEP(3, 0.1)}},
    {.name = "step_1", .lr = 1.0, .n = 1, .parts = {STEP(1, 0.9)}},
    {.name = "multistep", .lr = 0.1, .n = 1, .parts = {MULTI(0.3, 3, 5, 12, 30)}},
    {.name = "multistep_repeated_unsorted", .lr = 0.2, .n = 1,
     .parts = {MULTI(0.5, 4, 20, 8, 8, 0)}},
    {.name = "multistep_none", .lr = 0.3, .n = 1, .parts = {MULTI(0.1, 0, 0)}},
    {.name = "exponential", .lr = 0.1, .n = 1, .parts = {EXPO(0.9)}},
    {.name = "exponential_growing", .lr = 1e-3, .n = 1, .parts = {EXPO(1.05)}},
    {.name = "cosine_10", .lr = 0.1, .n = 1, .parts = {COS(10, 0.0)}},
    {.name = "cosine_13_eta", .lr = 0.05, .n = 1, .parts = {COS(13, 1e-3)}},
    {.name = "cosine_1", .lr = 0.1, .n = 1, .parts = {COS(1, 0.01)}},
    {.name = "cosine_40", .lr = 3e-4, .n = 1, .parts = {COS(40, 1e-6)}},
    {.name = "linear_default", .lr = 0.1, .n = 1, .parts = {LIN(1.0 / 3, 1.0, 5)}},
    {.name = "linear_warmup", .lr = 0.05, .n = 1, .parts = {LIN(0.1, 1.0, 10)}},
    {.name = "linear_to_zero", .lr = 0.1, .n = 1, .parts = {LIN(1.0, 0.0, 20)}},
    {.name = "linear_to_zero_third", .lr = 0.1, .n = 1, .parts = {LIN(1.0 / 3, 0.0, 5)}},
    {.name = "linear_down", .lr = 0.2, .n = 1, .parts = {LIN(0.5, 0.25, 7)}},
    {.name = "lambda_pow", .lr = 0.1, .n = 1, .parts = {LAMBDA(pow095)}},
    {.name = "lambda_warmup", .lr = 0.02, .n = 1, .parts = {LAMBDA(warmup5)}},
    {.name = "cosine_set_lr", .lr = 0.1, .n = 1,
     .parts = {COS(12, 0.002)}, .set_at = 5, .set_lr = 0.03},
    {.name = "linear_set_lr", .lr = 0.1, .n = 1,
     .parts = {LIN(0.2, 1.0, 10)}, .set_at = 4, .set_lr = 0.5},
    {.name = "exponential_set_lr", .lr = 0.1, .n = 1,
     .parts = {EXPO(0.8)}, .set_at = 10, .set_lr = 1.0},
    {.name = "lambda_set_lr", .lr = 0.1, .n = 1,
     .parts = {LAMBDA(pow095)}, .set_at = 6, .set_lr = 0.7},
    {.name = "seq_warmup_cosine", .lr = 0.1, .n = 2,
     .parts = {LIN(0.1, 1.0, 5), COS(30, 1e-4)}, .seq = true,
     .ms = {5}},
    {.name = "seq_three", .lr = 0.5, .n = 3,
     .parts = {EXPO(0.9), STEP(3, 0.5), LAMBDA(pow095)}, .seq = true,
     .ms = {4, 15}},
    {.name = "seq_multistep_zero", .lr = 0.2, .n = 2,
     .parts = {LIN(0.5, 1.0, 4), MULTI(0.5, 3, 0, 3, 3)}, .seq = true,
     .ms = {6}},
    {.name = "seq_cosine_linear", .lr = 0.08, .n = 2,
     .parts = {COS(6, 0.01), LIN(0.25, 0.75, 8)}, .seq = true,
     .ms = {10}},
    {.name = "seq_unsorted_milestones", .lr = 0.3, .n = 3,
     .parts = {EXPO(0.8), STEP(2, 0.5), COS(10, 0.0)}, .seq = true,
     .ms = {12, 6}},
    {.name = "seq_constant_exponential", .lr = 1.0, .n = 2,
     .parts = {LIN(0.1, 0.1, 2), EXPO(0.9)}, .seq = true, .ms = {2}},
    {.name = "seq_single", .lr = 0.4, .n = 1, .parts = {STEP(4, 0.5)}, .seq = true},
    {.name = "groups_cosine", .lr = 0.1, .lr2 = 0.02, .n = 1, .parts = {COS(10, 1e-3)}},
    {.name = "groups_linear", .lr = 0.05, .lr2 = 0.5, .n = 1, .parts = {LIN(0.1, 1.0, 10)}},
    {.name = "groups_step", .lr = 0.05, .lr2 = 1.0, .n = 1, .parts = {STEP(3, 0.5)}},
    {.name = "groups_multistep", .lr = 0.3, .lr2 = 0.01, .n = 1,
     .parts = {MULTI(0.4, 3, 2, 9, 9)}},
    {.name = "groups_lambda", .lr = 0.1, .lr2 = 0.3, .n = 1, .parts = {LAMBDA(warmup5)}},
    {.name = "groups_lambda_per_group", .lr = 0.1, .lr2 = 0.3, .n = 1,
     .parts = {LAMBDAS(pow095, warmup5)}},
    {.name = "groups_exponential_set_lr", .lr = 0.1, .lr2 = 0.2, .n = 1,
     .parts = {EXPO(0.8)}, .set_at = 10, .set_lr = 0.5, .set_group = 1},
    {.name = "groups_seq_warmup_cosine", .lr = 0.1, .lr2 = 0.01, .n = 2,
     .parts = {LIN(0.1, 1.0, 5), COS(30, 1e-4)}, .seq = true, .ms = {5}},
    {.name = "added_step", .lr = 1.0, .n = 1, .parts = {STEP(3, 0.5)}, .add_at = 4,
     .add_lr = 0.2},
    {.name = "added_multistep", .lr = 0.2, .n = 1, .parts = {MULTI(0.5, 4, 2, 6, 6, 11)},
     .add_at = 5, .add_lr = 0.3},
    {.name = "added_exponential", .lr = 0.1, .n = 1, .parts = {EXPO(0.9)}, .add_at = 3,
     .add_lr = 0.5},
    {.name = "added_cosine", .lr = 0.1, .n = 1, .parts = {COS(4, 0.01)}, .add_at = 2,
     .add_lr = 0.5},
    {.name = "added_linear", .lr = 0.1, .n = 1, .parts = {LIN(0.25, 1.0, 8)}, .add_at = 3,
     .add_lr = 0.4},
    {.name = "added_lambda", .lr = 0.1, .n = 1, .parts = {LAMBDA(pow095)}, .add_at = 2,
     .add_lr = 0.3},
    {.name = "added_seq_warmup_cosine", .lr = 0.1, .n = 2,
     .parts = {LIN(0.1, 1.0, 5), COS(30, 1e-4)}, .seq = true, .ms = {5}, .add_at = 3,
     .add_lr = 0.05},
    {.name = "added_seq_exponential_linear", .lr = 0.4, .n = 2,
     .parts = {EXPO(0.9), LIN(0.5, 1.0, 4)}, .seq = true, .ms = {4}, .add_at = 2,
     .add_lr = 0.6},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static int make_one(tg_lr_scheduler **out, tg_optimizer *o, const spec *p)
{
    switch (p->k) {
    case K_STEP: return tg_step_lr_new(out, o, p->i, p->a);
    case K_MULTI: return tg_multi_step_lr_new(out, o, p->n_ms, p->ms, p->a);
    case K_EXPO: return tg_exponential_lr_new(out, o, p->a);
    case K_COS: return tg_cosine_annealing_lr_new(out, o, p->i, p->a);
    case K_LIN: return tg_linear_lr_new(out, o, p->a, p->b, p->i);
    case K_LAMBDA: return tg_lambda_lr_new(out, o, p->fn, NULL);
    case K_LAMBDAS:
        return tg_lambda_lr_new_per_group(out, o, 2, (tg_lr_lambda_fn[]){p->fn, p->fn2}, NULL);
    }
    return TG_EINVAL;
}

/* A case's optimizer (SGD over one f64 parameter per param group) and
 * schedulers; top is the one to step. */
typedef struct run {
    tg_tensor *p, *q;
    tg_optimizer *opt;
    tg_lr_scheduler *parts[3], *top;
} run;

static int n_groups(const gcase *c) { return c->lr2 > 0 || c->add_at > 0 ? 2 : 1; }

/* Case c's second param group, of lr add_lr, added to r's optimizer. */
static void add_group(run *r, const gcase *c)
{
    cr_assert(eq(int, tg_tensor_zeros(&r->q, TG_F64, 1, (int64_t[]){1}), TG_OK));
    tg_tensor_set_requires_grad(r->q, true);
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.lr = c->add_lr;
    cr_assert(eq(int, tg_sgd_add_param_group(r->opt, 1, &r->q, &so), TG_OK));
}

/* a and b are the same lr, or both NaN (a group that does not exist). */
static bool same_lr(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

static void run_make(run *r, const gcase *c)
{
    memset(r, 0, sizeof *r);
    cr_assert(eq(int, tg_tensor_zeros(&r->p, TG_F64, 1, (int64_t[]){1}), TG_OK));
    tg_tensor_set_requires_grad(r->p, true);
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.lr = c->lr;
    cr_assert(eq(int, tg_sgd_new(&r->opt, 1, &r->p, &so), TG_OK));
    if (c->lr2 > 0) {
        cr_assert(eq(int, tg_tensor_zeros(&r->q, TG_F64, 1, (int64_t[]){1}), TG_OK));
        tg_tensor_set_requires_grad(r->q, true);
        so.lr = c->lr2;
        cr_assert(eq(int, tg_sgd_add_param_group(r->opt, 1, &r->q, &so), TG_OK));
    }
    for (int i = 0; i < c->n; i++)
        cr_assert(eq(int, make_one(&r->parts[i], r->opt, &c->parts[i]), TG_OK), "%s: %s",
                  c->name, tg_error_message());
    if (c->seq)
        cr_assert(eq(int, tg_sequential_lr_new(&r->top, r->opt, c->n, r->parts, c->ms), TG_OK),
                  "%s: %s", c->name, tg_error_message());
    else
        r->top = r->parts[0];
}

static void run_free(run *r)
{
    if (r->top != r->parts[0]) tg_lr_scheduler_free(r->top);
    for (int i = 0; i < 3; i++) tg_lr_scheduler_free(r->parts[i]);
    tg_optimizer_free(r->opt);
    tg_tensor_release(r->p);
    tg_tensor_release(r->q);
}

/* Step k of case c (with its set_lr or added group, if any, first). */
static void run_step(run *r, const gcase *c, int k)
{
    if (k == c->add_at) add_group(r, c);
    if (k == c->set_at && c->lr2 > 0)
        cr_assert(eq(int, tg_optimizer_set_group_lr(r->opt, c->set_group, c->set_lr), TG_OK));
    else if (k == c->set_at)
        cr_assert(eq(int, tg_optimizer_set_lr(r->opt, c->set_lr), TG_OK));
    cr_assert(eq(int, tg_lr_scheduler_step(r->top), TG_OK), "%s step %d: %s", c->name, k,
              tg_error_message());
}

static const gcase *find_case(const char *name)
{
    for (int i = 0; i < N_CASES; i++)
        if (strcmp(cases[i].name, name) == 0) return &cases[i];
    cr_assert(false, "no case %s", name);
    return NULL;
}

/* got equals torch's want to within 4 ulps; where torch's rounding made the
 * lr negative (about -1e-18), tapegrad's is 0. */
static void expect_lr(const char *what, int k, double got, double want)
{
    if (want < 0)
        cr_assert(got == 0.0 && !signbit(got), "%s epoch %d: %.17g, want 0 (torch %.3g)", what,
                  k, got, want);
    else
        cr_assert(ieee_ulp_eq(dbl, got, want, 4), "%s epoch %d: %.17g vs torch %.17g", what, k,
                  got, want);
}

/* Every case's lr (each param group's) after its construction and after
 * each of 40 steps is torch's; get_last_lr and last_epoch agree. */
Test(lr_scheduler, sequences_match_pytorch)
{
    tg_st_file *f = th_golden_load("optim/lr_scheduler.safetensors");
    cr_assert(eq(int, tg_st_count(f), N_CASES), "the golden file and cases[] differ");
    for (int ci = 0; ci < N_CASES; ci++) {
        const gcase *c = &cases[ci];
        char key[96];
        snprintf(key, sizeof key, "%s.lr", c->name);
        const tg_tensor *want = tg_st_get(f, key);
        const int G = n_groups(c);
        cr_assert(want != NULL && tg_tensor_numel(want) == (STEPS + 1) * G, "%s", key);
        run r;
        run_make(&r, c);
        for (int k = 0; k <= STEPS; k++) {
            if (k > 0) run_step(&r, c, k);
            for (int g = 0; g < G; g++) {
                double w, lr = tg_optimizer_get_group_lr(r.opt, g);
                tg_tensor_get_flat(want, k * G + g, &w);
                char what[96];
                snprintf(what, sizeof what, "%s group %d", c->name, g);
                /* torch's get_last_lr() has the groups of the last step */
                const double last = tg_lr_scheduler_get_group_last_lr(r.top, g);
                if (isnan(w)) {
                    cr_assert(isnan(lr) && isnan(last), "%s epoch %d: no group yet", what, k);
                    continue;
                }
                expect_lr(what, k, lr, w);
                cr_assert(eq(dbl, last, lr), "%s epoch %d: last lr %g", what, k, last);
            }
            cr_assert(eq(dbl, tg_lr_scheduler_get_last_lr(r.top), tg_optimizer_get_lr(r.opt)));
            cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), k));
        }
        run_free(&r);
    }
    tg_st_free(f);
}

/* ---- arguments ---------------------------------------------------------------- */

static double nan_at_3(int64_t e, void *user)
{
    (void)user;
    return e == 3 ? NAN : 1.0;
}

static double negative(int64_t e, void *user)
{
    (void)user;
    (void)e;
    return -0.5;
}

/* call fails with TG_EINVAL and a message holding words. */
#define REFUSED(call, words)                                                              \
    do {                                                                                  \
        cr_assert(eq(int, (call), TG_EINVAL), "%s", #call);                               \
        cr_assert(strstr(tg_error_message(), (words)) != NULL, "%s: %s", #call,           \
                  tg_error_message());                                                    \
    } while (0)

/* call fails with status and a message holding words. */
#define REFUSED_WITH(call, status, words)                                                     \
    do {                                                                                  \
        cr_assert(eq(int, (call), (status)), "%s", #call);                                \
        cr_assert(strstr(tg_error_message(), (words)) != NULL, "%s: %s", #call,           \
                  tg_error_message());                                                    \
    } while (0)

/* Each bad constructor call: its status, words of its message, and nothing
 * made (the optimizer's lr unchanged). */
Test(lr_scheduler, bad_arguments_are_refused_with_their_rule)
{
    run r;
    run_make(&r, find_case("step_1"));   /* opt: lr 1.0 */
    tg_lr_scheduler *s = NULL, *other = NULL;
    tg_optimizer *o = r.opt, *o2 = NULL;
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    cr_assert(eq(int, tg_sgd_new(&o2, 1, &r.p, &so), TG_OK));
    cr_assert(eq(int, tg_exponential_lr_new(&other, o2, 0.5), TG_OK));
    tg_lr_scheduler *seq = NULL;
    cr_assert(eq(int, tg_sequential_lr_new(&seq, o, 1, &r.top, NULL), TG_OK));
    const int64_t ms[2] = {3, 1};
    REFUSED(tg_step_lr_new(&s, o, 0, 0.1),
            "step_lr: step_size=0 must be >= 1");
    REFUSED(tg_step_lr_new(&s, o, 3, -0.1),
            "step_lr: gamma=-0.1 must be finite and >= 0");
    REFUSED(tg_step_lr_new(&s, o, 3, NAN),
            "step_lr: gamma=nan must be finite");
    REFUSED(tg_step_lr_new(NULL, o, 3, 0.1),
            "step_lr: out must not be NULL");
    REFUSED(tg_step_lr_new(&s, NULL, 3, 0.1),
            "step_lr: opt must not be NULL");
    REFUSED(tg_multi_step_lr_new(&s, o, -1, ms, 0.1),
            "multi_step_lr: n_milestones=-1 must be >= 0");
    REFUSED(tg_multi_step_lr_new(&s, o, 2, NULL, 0.1),
            "milestones must not be NULL when n_milestones=2 > 0");
    REFUSED(tg_multi_step_lr_new(&s, o, 2, ms, INFINITY),
            "multi_step_lr: gamma=inf must be finite");
    REFUSED(tg_exponential_lr_new(&s, o, -2),
            "exponential_lr: gamma=-2 must be finite and >= 0");
    REFUSED(tg_cosine_annealing_lr_new(&s, o, 0, 0.0),
            "cosine_annealing_lr: t_max=0 must be >= 1");
    REFUSED(tg_cosine_annealing_lr_new(&s, o, 10, -1e-3),
            "eta_min=-0.001 must be finite and >= 0");
    REFUSED(tg_linear_lr_new(&s, o, 0.0, 1.0, 5),
            "linear_lr: start_factor=0 must be in (0, 1]");
    REFUSED(tg_linear_lr_new(&s, o, 1.5, 1.0, 5),
            "linear_lr: start_factor=1.5 must be in (0, 1]");
    REFUSED(tg_linear_lr_new(&s, o, NAN, 1.0, 5),
            "linear_lr: start_factor=nan must be in (0, 1]");
    REFUSED(tg_linear_lr_new(&s, o, 0.5, -0.1, 5),
            "linear_lr: end_factor=-0.1 must be in [0, 1]");
    REFUSED(tg_linear_lr_new(&s, o, 0.5, 1.1, 5),
            "linear_lr: end_factor=1.1 must be in [0, 1]");
    REFUSED(tg_linear_lr_new(&s, o, 0.5, 1.0, 0),
            "linear_lr: total_iters=0 must be >= 1");
    REFUSED(tg_lambda_lr_new(&s, o, NULL, NULL),
            "lambda_lr: fn must not be NULL");
    REFUSED(tg_lambda_lr_new(&s, o, negative, NULL),
            "lambda_lr: the initial step gives lr=-0.5 at epoch 0");
    REFUSED(tg_sequential_lr_new(&s, o, 0, &r.top, NULL),
            "n_schedulers=0 must be >= 1");
    REFUSED(tg_sequential_lr_new(&s, o, 1, NULL, NULL),
            "schedulers must not be NULL");
    REFUSED(tg_sequential_lr_new(&s, o, 2, (tg_lr_scheduler *[]){r.top, r.top}, NULL),
            "milestones must not be NULL (n_schedulers - 1 = 1 of them)");
    REFUSED(tg_sequential_lr_new(&s, o, 2, (tg_lr_scheduler *[]){r.top, NULL}, ms),
            "schedulers[1] must not be NULL");
    REFUSED(tg_sequential_lr_new(&s, o, 2, (tg_lr_scheduler *[]){r.top, other}, ms),
            "schedulers[1] is attached to another optimizer");
    REFUSED(tg_sequential_lr_new(&s, o, 2, (tg_lr_scheduler *[]){seq, r.top}, ms),
            "schedulers[0] is a sequential_lr; they do not nest");
    cr_assert(s == NULL);
    cr_assert(eq(dbl, tg_optimizer_get_lr(o), 1.0));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), 0));
    tg_lr_scheduler_free(seq);
    tg_lr_scheduler_free(other);
    tg_optimizer_free(o2);
    run_free(&r);
}

/* A step whose lr would not be finite fails and changes nothing. */
Test(lr_scheduler, failed_step_changes_nothing)
{
    run r;
    run_make(&r, find_case("step_1"));
    tg_lr_scheduler *lam = NULL, *big = NULL;
    cr_assert(eq(int, tg_lambda_lr_new(&lam, r.opt, nan_at_3, NULL), TG_OK));
    for (int k = 1; k <= 2; k++) cr_assert(eq(int, tg_lr_scheduler_step(lam), TG_OK));
    cr_assert(eq(int, tg_optimizer_set_lr(r.opt, 0.25), TG_OK));
    REFUSED(tg_lr_scheduler_step(lam),
            "lr_scheduler_step: lambda_lr gives lr=nan at epoch 3 (base_lr * fn(epoch))");
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(lam), 2));
    cr_assert(eq(dbl, tg_lr_scheduler_get_last_lr(lam), 1.0));
    cr_assert(eq(dbl, tg_optimizer_get_lr(r.opt), 0.25));
    /* 1.0 * 1e200 * 1e200 overflows */
    cr_assert(eq(int, tg_exponential_lr_new(&big, r.opt, 1e200), TG_OK));
    cr_assert(eq(int, tg_lr_scheduler_step(big), TG_OK));
    REFUSED(tg_lr_scheduler_step(big), "exponential_lr gives lr=inf at epoch 2");
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(big), 1));
    cr_assert(eq(dbl, tg_optimizer_get_lr(r.opt), 0.25 * 1e200));
    tg_lr_scheduler_free(big);
    tg_lr_scheduler_free(lam);
    run_free(&r);
}

/* NULL is refused by the step and gives NaN / INT64_MIN from the getters. */
Test(lr_scheduler, null_arguments)
{
    tg_lr_scheduler_free(NULL);
    REFUSED(tg_lr_scheduler_step(NULL), "lr_scheduler_step: s must not be NULL");
    cr_assert(isnan(tg_lr_scheduler_get_last_lr(NULL)));
    cr_assert(isnan(tg_lr_scheduler_base_lr(NULL)));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(NULL), INT64_MIN));
}

/* torch's initial_lr: the first scheduler records the optimizer's lr; a
 * later one takes it as base_lr although the lr has moved, and its own
 * initial step (ExponentialLR: none at epoch 0) keeps the current lr. */
Test(lr_scheduler, later_schedulers_take_the_first_ones_initial_lr)
{
    run r;
    run_make(&r, find_case("linear_default"));   /* lr 0.1 -> 0.1 / 3 */
    cr_assert(eq(dbl, tg_lr_scheduler_base_lr(r.top), 0.1));
    tg_lr_scheduler *e = NULL;
    double lr = tg_optimizer_get_lr(r.opt);
    cr_assert(eq(dbl, lr, 0.1 * (1.0 / 3)));
    cr_assert(eq(int, tg_exponential_lr_new(&e, r.opt, 0.5), TG_OK));
    cr_assert(eq(dbl, tg_lr_scheduler_base_lr(e), 0.1));
    cr_assert(eq(dbl, tg_optimizer_get_lr(r.opt), lr));
    tg_lr_scheduler_free(e);
    run_free(&r);
}

/* An SGD step uses the lr the scheduler set: with gradient 1, p moves by
 * exactly the lr of each step. */
Test(lr_scheduler, sgd_steps_with_the_scheduled_lr)
{
    tg_tensor *p = NULL;
    cr_assert(eq(int, tg_tensor_full(&p, TG_F64, 1, (int64_t[]){1}, 1.0), TG_OK));
    tg_tensor_set_requires_grad(p, true);
    tg_optimizer *o = NULL;
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.lr = 0.1;
    cr_assert(eq(int, tg_sgd_new(&o, 1, &p, &so), TG_OK));
    tg_lr_scheduler *s = NULL;
    cr_assert(eq(int, tg_step_lr_new(&s, o, 2, 0.5), TG_OK));
    const double lrs[6] = {0.1, 0.1, 0.05, 0.05, 0.025, 0.025};
    double want = 1.0;
    for (int k = 0; k < 6; k++) {
        tg_tensor *g = NULL;
        tg_tensor_full(&g, TG_F64, 1, (int64_t[]){1}, 1.0);
        cr_assert(eq(int, tg_tensor_set_grad(p, g), TG_OK));
        cr_assert(eq(dbl, tg_optimizer_get_lr(o), lrs[k]));
        cr_assert(eq(int, tg_optimizer_step(o), TG_OK));
        want -= lrs[k];
        cr_assert(eq(dbl, th_at(p, 0), want), "step %d: %.17g vs %.17g", k, th_at(p, 0), want);
        cr_assert(eq(int, tg_lr_scheduler_step(s), TG_OK));
    }
    tg_lr_scheduler_free(s);
    tg_optimizer_free(o);
    tg_tensor_release(p);
}

/* ---- state files ---------------------------------------------------------------- */

static tg_st_file *snapshot(const tg_lr_scheduler *s)
{
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_lr_scheduler_state_save(s, f, "o"), TG_OK), "%s", tg_error_message());
    return f;
}

/* Two snapshots hold the same entries and kinds, bit for bit. */
static void expect_same_state(const tg_st_file *x, const tg_st_file *y)
{
    cr_assert(eq(int, tg_st_count(x), tg_st_count(y)));
    cr_assert(eq(int, tg_st_meta_count(x), tg_st_meta_count(y)));
    for (int e = 0; e < tg_st_count(x); e++) {
        const char *name;
        tg_tensor *t;
        tg_st_at(x, e, &name, &t);
        const tg_tensor *u = tg_st_get(y, name);
        cr_assert(u != NULL, "%s", name);
        th_expect_same_bits(name, t, u, t);
    }
    for (int e = 0; e < tg_st_meta_count(x); e++) {
        const char *k, *v;
        tg_st_meta_at(x, e, &k, &v);
        cr_assert(tg_st_meta_get(y, k) != NULL && strcmp(tg_st_meta_get(y, k), v) == 0, "%s", k);
    }
}

/* A copy of src without the entry (tensor or metadata) named skip. */
static tg_st_file *copy_without(const tg_st_file *src, const char *skip)
{
    tg_st_file *d = NULL;
    tg_st_new(&d);
    for (int e = 0; e < tg_st_count(src); e++) {
        const char *name;
        tg_tensor *t;
        tg_st_at(src, e, &name, &t);
        if (strcmp(name, skip) != 0) tg_st_set(d, name, t);
    }
    for (int e = 0; e < tg_st_meta_count(src); e++) {
        const char *k, *v;
        tg_st_meta_at(src, e, &k, &v);
        if (strcmp(k, skip) != 0) tg_st_meta_set(d, k, v);
    }
    return d;
}

/* Saved at epoch 7 and loaded after 5 more steps, a SequentialLR and its
 * schedulers are back at epoch 7 (the optimizer's lr is its own state). */
Test(lr_scheduler, state_round_trip_restores_every_value)
{
    const gcase *c = find_case("seq_warmup_cosine");
    run r;
    run_make(&r, c);
    for (int k = 1; k <= 7; k++) run_step(&r, c, k);
    tg_st_file *saved = snapshot(r.top);
    cr_assert(eq(str, (char *)tg_st_meta_get(saved, "o.kind"), "sequential_lr"));
    cr_assert(eq(str, (char *)tg_st_meta_get(saved, "o.1.kind"), "cosine_annealing_lr"));
    cr_assert(eq(int, tg_tensor_dtype(tg_st_get(saved, "o.last_epoch")), TG_I64));
    double lr7 = tg_optimizer_get_lr(r.opt);
    for (int k = 8; k <= 12; k++) run_step(&r, c, k);
    cr_assert(eq(int, tg_lr_scheduler_state_load(r.top, saved, "o"), TG_OK), "%s",
              tg_error_message());
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), 7));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.parts[0]), 4));   /* stepped to 5 - 1 */
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.parts[1]), 2));   /* restarted at 5 */
    cr_assert(eq(dbl, tg_lr_scheduler_get_last_lr(r.top), lr7));
    cr_assert(eq(dbl, tg_lr_scheduler_base_lr(r.top), 0.1));
    /* torch's load_state_dict leaves the optimizer's lr alone */
    cr_assert(tg_optimizer_get_lr(r.opt) != lr7);
    tg_st_file *again = snapshot(r.top);
    expect_same_state(saved, again);
    tg_st_free(again);
    tg_st_free(saved);
    run_free(&r);
}

/* Each bad file is refused with its status and words, and leaves the
 * SequentialLR and both its schedulers as they were. */
Test(lr_scheduler, bad_states_change_nothing)
{
    const gcase *c = find_case("seq_warmup_cosine");
    run r;
    run_make(&r, c);
    for (int k = 1; k <= 8; k++) run_step(&r, c, k);
    tg_st_file *before = snapshot(r.top);
    const struct {
        const char *skip, *set_key;   /* entry left out; tensor or metadata set */
        double v;
        const char *kind;             /* metadata value, when set_key is a kind */
        int status;
        const char *words;
    } bad[] = {
        {"o.last_epoch", NULL, 0, NULL, TG_ENOTFOUND, "missing key 'o.last_epoch'"},
        {"o.1.last_lr", NULL, 0, NULL, TG_ENOTFOUND, "missing key 'o.1.last_lr'"},
        {"o.1.kind", NULL, 0, NULL, TG_ENOTFOUND, "missing metadata 'o.1.kind'"},
        {"", "o.kind", 0, "step_lr", TG_EINVAL, "'o.kind' is 'step_lr'; this scheduler is "
                                                "'sequential_lr'"},
        {"", "o.1.kind", 0, "linear_lr", TG_EINVAL, "'o.1.kind' is 'linear_lr'; this "
                                                    "scheduler is 'cosine_annealing_lr'"},
        {"", "o.last_epoch", 2.5, NULL, TG_EINVAL, "'o.last_epoch'=2.5 must be an integer"},
        {"", "o.1.last_epoch", 0x1p60, NULL, TG_EINVAL, "must be an integer within +-2^53"},
        {"", "o.0.last_lr", -1, NULL, TG_EINVAL, "'o.0.last_lr'=-1 must be finite and >= 0"},
        {"", "o.1.base_lr", NAN, NULL, TG_EINVAL, "'o.1.base_lr'=nan must be finite"},
        {"", "o.2.last_lr", 0.5, NULL, TG_EINVAL, "'o.2.last_lr' is for scheduler 2; this "
                                                  "sequential_lr has 2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tg_st_file *f = copy_without(before, bad[i].skip);
        if (bad[i].kind) tg_st_meta_set(f, bad[i].set_key, bad[i].kind);
        else if (bad[i].set_key) {
            tg_tensor *v = NULL;
            tg_tensor_scalar(&v, TG_F64, bad[i].v);
            tg_st_set(f, bad[i].set_key, v);
            tg_tensor_release(v);
        }
        cr_assert(eq(int, tg_lr_scheduler_state_load(r.top, f, "o"), bad[i].status), "case %zu",
                  i);
        cr_assert(strstr(tg_error_message(), bad[i].words) != NULL, "case %zu: %s", i,
                  tg_error_message());
        tg_st_free(f);
        tg_st_file *after = snapshot(r.top);
        expect_same_state(before, after);
        tg_st_free(after);
    }
    cr_assert(eq(int, tg_lr_scheduler_state_load(r.top, before, "other"), TG_ENOTFOUND));
    /* the run goes on as PyTorch's */
    tg_st_file *g = th_golden_load("optim/lr_scheduler.safetensors");
    for (int k = 9; k <= STEPS; k++) {
        run_step(&r, c, k);
        double w;
        tg_tensor_get_flat(tg_st_get(g, "seq_warmup_cosine.lr"), k, &w);
        expect_lr("after refused loads", k, tg_optimizer_get_lr(r.opt), w);
    }
    tg_st_free(g);
    tg_st_free(before);
    run_free(&r);
}

/* factor^epoch, factor the double user points to. */
static double power_of_user(int64_t e, void *user) { return pow(*(double *)user, (double)e); }

/* One function per param group: over 12 epochs group g's lr is
 * base_g * fns[g](epoch, users[g]), each group with its own function and
 * user pointer, and state saved at epoch 5 loads back.  The checks name
 * n_fns, fns and fns[g]; a refused call makes nothing. */
Test(lr_scheduler, lambda_lr_takes_one_function_per_group)
{
    run r;
    run_make(&r, find_case("groups_lambda"));   /* lrs 0.1 and 0.3 */
    double f0 = 0.8, f1 = 1.5;
    tg_lr_scheduler *s = NULL;
    const tg_lr_lambda_fn fns[2] = {power_of_user, warmup5};
    cr_assert(eq(int, tg_lambda_lr_new_per_group(&s, r.opt, 2,
                                                  (tg_lr_lambda_fn[]){power_of_user,
                                                                      power_of_user},
                                                  (void *[]){&f0, &f1}), TG_OK));
    for (int k = 0; k <= 12; k++) {
        if (k > 0) cr_assert(eq(int, tg_lr_scheduler_step(s), TG_OK), "%s", tg_error_message());
        cr_assert(eq(dbl, tg_optimizer_get_group_lr(r.opt, 0), 0.1 * pow(0.8, k)), "epoch %d", k);
        cr_assert(eq(dbl, tg_optimizer_get_group_lr(r.opt, 1), 0.3 * pow(1.5, k)), "epoch %d", k);
        cr_assert(eq(dbl, tg_lr_scheduler_get_group_last_lr(s, 1), 0.3 * pow(1.5, k)));
    }
    tg_lr_scheduler_free(s);
    s = NULL;
    cr_assert(eq(int, tg_lambda_lr_new_per_group(&s, r.opt, 2, fns, (void *[]){&f0, NULL}),
                 TG_OK));
    tg_st_file *at5 = NULL;
    for (int k = 1; k <= 8; k++) {
        cr_assert(eq(int, tg_lr_scheduler_step(s), TG_OK));
        cr_assert(eq(dbl, tg_optimizer_get_group_lr(r.opt, 0), 0.1 * pow(0.8, k)));
        cr_assert(eq(dbl, tg_optimizer_get_group_lr(r.opt, 1), 0.3 * warmup5(k, NULL)));
        if (k == 5) at5 = snapshot(s);
    }
    cr_assert(eq(str, (char *)tg_st_meta_get(at5, "o.kind"), "lambda_lr"));
    cr_assert(eq(int, tg_lr_scheduler_state_load(s, at5, "o"), TG_OK));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(s), 5));
    cr_assert(eq(int, tg_lr_scheduler_step(s), TG_OK));
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(r.opt, 0), 0.1 * pow(0.8, 6)));
    tg_st_free(at5);
    tg_lr_scheduler_free(s);

    const double lr0 = tg_optimizer_get_group_lr(r.opt, 0);
    s = NULL;
    REFUSED(tg_lambda_lr_new_per_group(&s, r.opt, 1, fns, NULL),
            "lambda_lr_per_group: n_fns=1 must equal the optimizer's param group count 2");
    REFUSED(tg_lambda_lr_new_per_group(&s, r.opt, 3, fns, NULL),
            "lambda_lr_per_group: n_fns=3 must equal");
    REFUSED(tg_lambda_lr_new_per_group(&s, r.opt, 2, NULL, NULL),
            "lambda_lr_per_group: fns must not be NULL");
    REFUSED(tg_lambda_lr_new_per_group(&s, r.opt, 2, (tg_lr_lambda_fn[]){warmup5, NULL}, NULL),
            "lambda_lr_per_group: fns[1] must not be NULL");
    REFUSED(tg_lambda_lr_new_per_group(NULL, r.opt, 2, fns, NULL),
            "lambda_lr_per_group: out must not be NULL");
    REFUSED(tg_lambda_lr_new_per_group(&s, NULL, 2, fns, NULL),
            "lambda_lr_per_group: opt must not be NULL");
    REFUSED(tg_lambda_lr_new_per_group(&s, r.opt, 2, (tg_lr_lambda_fn[]){warmup5, negative},
                                       NULL),
            "lambda_lr: the initial step gives lr=-0.15 at epoch 0 for param group 1");
    cr_assert(s == NULL);
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(r.opt, 0), lr0));
    run_free(&r);
}

/* A param group added after a scheduler was made, as in torch: a StepLR
 * steps it with gamma from its own lr, it has no base lr, and get_last_lr
 * covers it from the next step on; a LambdaLR leaves it alone.  The state
 * holds one base_lr and two last_lrs and loads back bit for bit; it does
 * not load into a scheduler of an optimizer of one group (two last lrs) nor
 * into one made after the group was added (one base lr).  A SequentialLR of
 * the first scheduler is refused (torch's lacks the new group's
 * initial_lr).  One made afterwards takes the new group's lr as its base
 * lr and the first group's initial lr. */
Test(lr_scheduler, a_group_added_later_is_stepped_as_torch_steps_it)
{
    run r;
    run_make(&r, find_case("step_1"));   /* lr 1.0, gamma 0.9 every step */
    tg_lr_scheduler *lam = NULL;
    cr_assert(eq(int, tg_lambda_lr_new(&lam, r.opt, pow095, NULL), TG_OK));
    cr_assert(eq(int, tg_lr_scheduler_step(r.top), TG_OK));
    tg_tensor *q = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&q, TG_F64, 1, (int64_t[]){1}), TG_OK));
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.lr = 0.5;
    cr_assert(eq(int, tg_sgd_add_param_group(r.opt, 1, &q, &so), TG_OK));
    cr_assert(isnan(tg_lr_scheduler_get_group_last_lr(r.top, 1)));
    cr_assert(eq(int, tg_lr_scheduler_step(r.top), TG_OK), "%s", tg_error_message());
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), 2));
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(r.opt, 0), 1.0 * 0.9 * 0.9));
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(r.opt, 1), 0.5 * 0.9));
    cr_assert(eq(dbl, tg_lr_scheduler_get_group_last_lr(r.top, 1), 0.5 * 0.9));
    cr_assert(isnan(tg_lr_scheduler_group_base_lr(r.top, 1)));
    /* LambdaLR: base_lr * fn(epoch) for group 0 only */
    cr_assert(eq(int, tg_optimizer_set_group_lr(r.opt, 1, 0.7), TG_OK));
    cr_assert(eq(int, tg_lr_scheduler_step(lam), TG_OK), "%s", tg_error_message());
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(r.opt, 0), 1.0 * pow(0.95, 1)));
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(r.opt, 1), 0.7));
    cr_assert(eq(dbl, tg_lr_scheduler_get_group_last_lr(lam, 1), 0.7));

    tg_st_file *one = snapshot(r.top);
    cr_assert(eq(i64, tg_tensor_numel(tg_st_get(one, "o.base_lr")), 1));
    cr_assert(eq(i64, tg_tensor_numel(tg_st_get(one, "o.last_lr")), 2));
    cr_assert(eq(int, tg_lr_scheduler_step(r.top), TG_OK));
    cr_assert(eq(int, tg_lr_scheduler_state_load(r.top, one, "o"), TG_OK), "%s",
              tg_error_message());
    tg_st_file *again = snapshot(r.top);
    expect_same_state(one, again);
    tg_st_free(again);

    run fresh;
    run_make(&fresh, find_case("step_1"));
    tg_st_file *before = snapshot(fresh.top);
    REFUSED_WITH(tg_lr_scheduler_state_load(fresh.top, one, "o"), TG_ESHAPE,
                 "'o.last_lr' must hold 1 value (one per param group), has 2");
    again = snapshot(fresh.top);
    expect_same_state(before, again);
    tg_st_free(again);
    tg_st_free(before);
    run_free(&fresh);

    tg_lr_scheduler *seq = NULL, *e = NULL, *s2 = NULL;
    REFUSED(tg_sequential_lr_new(&seq, r.opt, 1, &r.top, NULL),
            "sequential_lr: schedulers[0] was made for 1 param groups; the optimizer has 2");
    cr_assert(eq(int, tg_exponential_lr_new(&e, r.opt, 0.5), TG_OK));
    cr_assert(eq(dbl, tg_lr_scheduler_group_base_lr(e, 0), 1.0));
    /* group 1's lr after the step that followed the snapshot */
    cr_assert(eq(dbl, tg_lr_scheduler_group_base_lr(e, 1), 0.7 * 0.9));
    cr_assert(isnan(tg_lr_scheduler_group_base_lr(e, 2)));
    cr_assert(isnan(tg_lr_scheduler_get_group_last_lr(e, -1)));
    cr_assert(isnan(tg_lr_scheduler_get_group_last_lr(NULL, 0)));
    cr_assert(eq(int, tg_step_lr_new(&s2, r.opt, 1, 0.9), TG_OK));
    tg_st_file *two = snapshot(s2);
    REFUSED_WITH(tg_lr_scheduler_state_load(s2, one, "o"), TG_ESHAPE,
             "'o.base_lr' must hold 2 values (one per param group), has 1");
    again = snapshot(s2);
    expect_same_state(two, again);
    tg_st_free(again);
    tg_st_free(two);
    tg_st_free(one);
    tg_lr_scheduler_free(s2);
    tg_lr_scheduler_free(e);
    tg_lr_scheduler_free(lam);
    tg_tensor_release(q);
    run_free(&r);
}

/* A scheduler saved before its first step after a group was added holds
 * one last lr, and loads into one whose optimizer has two groups; one
 * saved with three loads into one not stepped since its optimizer got
 * them; three last lrs do not load where the optimizer has two. */
Test(lr_scheduler, last_lrs_load_from_the_groups_of_the_last_step)
{
    run r;
    run_make(&r, find_case("added_exponential"));
    tg_st_file *f = snapshot(r.top);
    add_group(&r, find_case("added_exponential"));
    cr_assert(eq(int, tg_lr_scheduler_step(r.top), TG_OK));
    cr_assert(eq(int, tg_lr_scheduler_state_load(r.top, f, "o"), TG_OK), "%s",
              tg_error_message());
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), 0));
    cr_assert(isnan(tg_lr_scheduler_get_group_last_lr(r.top, 1)));
    /* saved with three groups, loaded into a scheduler never stepped since
     * two were added: its last lrs grow to three */
    run a, b;
    const gcase *c = find_case("added_exponential");
    run_make(&a, c);
    run_make(&b, c);
    for (int k = 0; k < 2; k++) {
        add_group(&a, c);
        add_group(&b, c);
        tg_tensor_release(a.q);   /* the optimizers hold them */
        tg_tensor_release(b.q);
        a.q = b.q = NULL;
    }
    cr_assert(eq(int, tg_lr_scheduler_step(a.top), TG_OK));
    tg_st_file *g3 = snapshot(a.top);
    cr_assert(eq(int, tg_lr_scheduler_state_load(b.top, g3, "o"), TG_OK), "%s",
              tg_error_message());
    cr_assert(eq(dbl, tg_lr_scheduler_get_group_last_lr(b.top, 2), 0.5 * 0.9));
    tg_st_file *again = snapshot(b.top);
    expect_same_state(g3, again);
    tg_st_free(again);
    tg_st_free(g3);
    run_free(&a);
    run_free(&b);
    tg_tensor *three = NULL;
    cr_assert(eq(int, tg_tensor_full(&three, TG_F64, 1, (int64_t[]){3}, 0.1), TG_OK));
    cr_assert(eq(int, tg_st_set(f, "o.last_lr", three), TG_OK));
    REFUSED_WITH(tg_lr_scheduler_state_load(r.top, f, "o"), TG_ESHAPE,
                 "'o.last_lr' must hold 1 to 2 values (one per param group at the last step), "
                 "has 3");
    tg_tensor_release(three);
    tg_st_free(f);
    run_free(&r);
}

/* NULL arguments and a prefix too long for a key. */
Test(lr_scheduler, state_functions_refuse_null)
{
    run r;
    run_make(&r, find_case("step_1"));
    tg_st_file *f = NULL;
    tg_st_new(&f);
    REFUSED(tg_lr_scheduler_state_save(NULL, f, "o"), "s, f and prefix must not be NULL");
    REFUSED(tg_lr_scheduler_state_save(r.top, NULL, "o"), "s, f and prefix must not be NULL");
    REFUSED(tg_lr_scheduler_state_save(r.top, f, NULL), "s, f and prefix must not be NULL");
    cr_assert(eq(int, tg_lr_scheduler_state_save(r.top, f, "o"), TG_OK));
    REFUSED(tg_lr_scheduler_state_load(NULL, f, "o"), "s, f and prefix must not be NULL");
    REFUSED(tg_lr_scheduler_state_load(r.top, NULL, "o"), "s, f and prefix must not be NULL");
    REFUSED(tg_lr_scheduler_state_load(r.top, f, NULL), "s, f and prefix must not be NULL");
    char longp[300];
    memset(longp, 'p', sizeof longp - 1);
    longp[sizeof longp - 1] = '\0';
    REFUSED(tg_lr_scheduler_state_save(r.top, f, longp), "too long");
    tg_st_free(f);
    run_free(&r);
}

/* ---- resuming ------------------------------------------------------------------ */

static char dir[64], ck_path[128];

static void setup(void)
{
    strcpy(dir, "/tmp/tg_schedXXXXXX");
    cr_assert(mkdtemp(dir) != NULL);
    snprintf(ck_path, sizeof ck_path, "%s/checkpoint.safetensors", dir);
}

static void teardown(void)
{
    unlink(ck_path);
    rmdir(dir);
}

TestSuite(lr_scheduler, .init = setup, .fini = teardown);

/* A checkpoint of module m (when not NULL), r's optimizer and its top
 * scheduler. */
static tg_checkpoint *checkpoint_with(tg_module *m, const run *r)
{
    tg_checkpoint *ck = NULL;
    cr_assert(eq(int, tg_checkpoint_new(&ck), TG_OK));
    if (m) cr_assert(eq(int, tg_checkpoint_add_module(ck, "model", m), TG_OK));
    cr_assert(eq(int, tg_checkpoint_add_optimizer(ck, "opt", r->opt), TG_OK));
    cr_assert(eq(int, tg_checkpoint_add_lr_scheduler(ck, "sched", r->top), TG_OK));
    return ck;
}

/* Saved after epoch `at` and loaded into freshly made objects, every case
 * goes on with the uninterrupted run's lrs, bit for bit. */
Test(lr_scheduler, checkpoint_resume_equals_uninterrupted_run)
{
    const int splits[] = {0, 3, 5, 17};
    for (int ci = 0; ci < N_CASES; ci++) {
        const gcase *c = &cases[ci];
        double whole[STEPS + 1], whole2[STEPS + 1];
        run r;
        run_make(&r, c);
        whole[0] = tg_optimizer_get_lr(r.opt);
        whole2[0] = tg_optimizer_get_group_lr(r.opt, n_groups(c) - 1);
        for (int k = 1; k <= STEPS; k++) {
            run_step(&r, c, k);
            whole[k] = tg_optimizer_get_lr(r.opt);
            whole2[k] = tg_optimizer_get_group_lr(r.opt, n_groups(c) - 1);
        }
        run_free(&r);
        for (size_t si = 0; si < sizeof splits / sizeof *splits; si++) {
            int at = splits[si];
            run_make(&r, c);
            for (int k = 1; k <= at; k++) run_step(&r, c, k);
            tg_checkpoint *ck = checkpoint_with(NULL, &r);
            cr_assert(eq(int, tg_checkpoint_save(ck, ck_path, NULL), TG_OK));
            tg_checkpoint_free(ck);
            run_free(&r);

            run_make(&r, c);   /* a new process: its constructors step the lr again */
            if (c->add_at > 0 && at >= c->add_at) add_group(&r, c);
            ck = checkpoint_with(NULL, &r);
            cr_assert(eq(int, tg_checkpoint_load(ck, ck_path), TG_OK), "%s", tg_error_message());
            tg_checkpoint_free(ck);
            cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), at));
            cr_assert(eq(dbl, tg_lr_scheduler_get_last_lr(r.top), whole[at]));
            for (int k = at + 1; k <= STEPS; k++) {
                run_step(&r, c, k);
                cr_assert(eq(dbl, tg_optimizer_get_lr(r.opt), whole[k]),
                          "%s resumed after %d, epoch %d: %.17g vs %.17g", c->name, at, k,
                          tg_optimizer_get_lr(r.opt), whole[k]);
                cr_assert(same_lr(tg_optimizer_get_group_lr(r.opt, n_groups(c) - 1), whole2[k]),
                          "%s resumed after %d, epoch %d, last group", c->name, at, k);
            }
            run_free(&r);
        }
    }
}

/* A checkpoint of another scheduler kind is refused before any slot loads:
 * the model and optimizer slots before it keep their weights (not even a
 * version counter moves) and lr. */
Test(lr_scheduler, checkpoint_of_another_kind_changes_nothing)
{
    tg_rng rng;
    tg_rng_init(&rng, 5);
    tg_module *lin = NULL;
    cr_assert(eq(int, tg_nn_linear_new(&lin, 2, 1, true, &rng), TG_OK));
    tg_tensor **params = NULL;
    int n = 0;
    cr_assert(eq(int, tg_module_parameters(lin, &params, &n), TG_OK));
    run a, b;
    run_make(&a, find_case("step_1"));
    run_make(&b, find_case("exponential"));
    tg_checkpoint *ck = checkpoint_with(lin, &a);
    cr_assert(eq(int, tg_checkpoint_save(ck, ck_path, NULL), TG_OK));
    tg_checkpoint_free(ck);
    tg_lr_scheduler_step(b.top);
    double lr = tg_optimizer_get_lr(b.opt);
    uint64_t version = tg_tensor_version(params[0]);
    ck = checkpoint_with(lin, &b);
    cr_assert(eq(int, tg_checkpoint_load(ck, ck_path), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "'sched.kind' is 'step_lr'") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(u64, tg_tensor_version(params[0]), version));
    cr_assert(eq(dbl, tg_optimizer_get_lr(b.opt), lr));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(b.top), 1));
    cr_assert(eq(int, tg_checkpoint_add_lr_scheduler(ck, "s2", NULL), TG_EINVAL));
    cr_assert(eq(int, tg_checkpoint_add_lr_scheduler(ck, "sched", b.top), TG_EINVAL));
    tg_checkpoint_free(ck);
    free(params);
    tg_module_release(lin);
    run_free(&a);
    run_free(&b);
}
