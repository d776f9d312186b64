/* tests/test_lr_scheduler_more.c - lr_scheduler.h's ConstantLR,
 * MultiplicativeLR, PolynomialLR, CosineAnnealingWarmRestarts (its step to
 * a fractional epoch too) and ChainedScheduler: their lr sequences and
 * last_epochs bit for bit against PyTorch 1.13's
 * (tests/golden/optim/lr_scheduler2.safetensors from
 * scripts/make_lr_scheduler2_goldens.py, whose CASES cases[] mirrors), alone,
 * in a SequentialLR and chained; a run saved (state functions or a
 * checkpoint), loaded into fresh schedulers and continued equal to an
 * uninterrupted one; every refusal. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/checkpoint.h"
#include "tapegrad/lr_scheduler.h"
#include "tapegrad/optim.h"

#define STEPS 30

static double mul095(int64_t e, void *user)
{
    (void)e;
    (void)user;
    return 0.95;
}

static double mul_cycle(int64_t e, void *user)
{
    (void)user;
    return e % 3 == 0 ? 0.9 : 1.02;
}

/* ---- the golden cases ------------------------------------------------------- */

typedef enum { K_CONST, K_MULT, K_MULTS, K_POLY, K_WARM, K_STEP, K_EXPO, K_COS, K_LIN } kind;

/* One scheduler: i is total_iters, T_0, step_size or T_max; j T_mult; a
 * factor, power, eta_min, gamma or start_factor; fn (fn2 for group 1 of
 * K_MULTS) MultiplicativeLR's. */
typedef struct spec {
    kind k;
    int64_t i, j;
    double a;
    tg_lr_lambda_fn fn, fn2;
} spec;

#define CONST(f, t) {.k = K_CONST, .a = (f), .i = (t)}
#define MULT(f) {.k = K_MULT, .fn = (f)}
#define MULTS(f, f2) {.k = K_MULTS, .fn = (f), .fn2 = (f2)}
#define POLY(t, p) {.k = K_POLY, .i = (t), .a = (p)}
#define WARM(t0, tm, eta) {.k = K_WARM, .i = (t0), .j = (tm), .a = (eta)}
#define STEP(sz, g) {.k = K_STEP, .i = (sz), .a = (g)}
#define EXPO(g) {.k = K_EXPO, .a = (g)}
#define COS(t, eta) {.k = K_COS, .i = (t), .a = (eta)}
#define LIN(s, t) {.k = K_LIN, .a = (s), .i = (t)}

/* NaN: step() */
#define N NAN
static const double mixed_3_2[STEPS] = {N, N, N, N, N, 26, N, N, 2.5, N, 9.0, N, 21.0, 13.5, N,
                                        N, 45.0, N, 0.0, N, N, N, N, N, N, N, N, N, N, N};
static const double mixed_1_3[STEPS] = {N, N, N, 121.0, N, 40.0, 39.5, N, 0.25, N, 13.0, N, N,
                                        N, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N};
#undef N

/* top: 0 one scheduler, 'S' a SequentialLR (milestone ms), 'C' a
 * ChainedScheduler of the n parts.  to_step > 0: step k goes to epoch
 * to_step * k; to: step k goes to to[k - 1] unless NaN.  set_at: group
 * set_group's lr set to set_lr before that step; add_at: a third group of
 * lr add_lr added before that step. */
typedef struct gcase {
    const char *name;
    int n;
    spec parts[3];
    char top;
    int64_t ms;
    double to_step;
    const double *to;
    int set_at, set_group;
    double set_lr;
    int add_at;
    double add_lr;
} gcase;

static const gcase cases[] = {
    {.name = "const_default", .n = 1, .parts = {CONST(1.0 / 3, 5)}},
    {.name = "const_half_4", .n = 1, .parts = {CONST(0.5, 4)}},
    {.name = "const_0_3_10", .n = 1, .parts = {CONST(0.3, 10)}},
    {.name = "const_zero_iters", .n = 1, .parts = {CONST(0.7, 0)}},
    {.name = "const_one", .n = 1, .parts = {CONST(1.0, 3)}},
    {.name = "const_set_lr", .n = 1, .parts = {CONST(0.3, 6)},
     .set_at = 3, .set_group = 1, .set_lr = 0.5},
    {.name = "mult_095", .n = 1, .parts = {MULT(mul095)}},
    {.name = "mult_cycle", .n = 1, .parts = {MULT(mul_cycle)}},
    {.name = "mult_per_group", .n = 1, .parts = {MULTS(mul095, mul_cycle)}},
    {.name = "mult_set_lr", .n = 1, .parts = {MULT(mul_cycle)},
     .set_at = 5, .set_group = 0, .set_lr = 0.07},
    {.name = "poly_default", .n = 1, .parts = {POLY(5, 1.0)}},
    {.name = "poly_10_2", .n = 1, .parts = {POLY(10, 2.0)}},
    {.name = "poly_7_half", .n = 1, .parts = {POLY(7, 0.5)}},
    {.name = "poly_1", .n = 1, .parts = {POLY(1, 1.0)}},
    {.name = "poly_power0", .n = 1, .parts = {POLY(4, 0.0)}},
    {.name = "poly_40_3", .n = 1, .parts = {POLY(40, 3.0)}},
    {.name = "poly_set_lr", .n = 1, .parts = {POLY(12, 1.5)},
     .set_at = 4, .set_group = 1, .set_lr = 0.2},
    {.name = "warm_5", .n = 1, .parts = {WARM(5, 1, 0.0)}},
    {.name = "warm_3_2", .n = 1, .parts = {WARM(3, 2, 0.0)}},
    {.name = "warm_2_3_eta", .n = 1, .parts = {WARM(2, 3, 1e-3)}},
    {.name = "warm_1", .n = 1, .parts = {WARM(1, 1, 0.01)}},
    {.name = "warm_7_eta", .n = 1, .parts = {WARM(7, 1, 0.005)}},
    {.name = "warm_frac_3_2", .n = 1, .parts = {WARM(3, 2, 0.0)}, .to_step = 0.37},
    {.name = "warm_frac_4_1", .n = 1, .parts = {WARM(4, 1, 0.005)}, .to_step = 0.3},
    {.name = "warm_mixed_3_2", .n = 1, .parts = {WARM(3, 2, 1e-4)}, .to = mixed_3_2},
    {.name = "warm_mixed_1_3", .n = 1, .parts = {WARM(1, 3, 0.0)}, .to = mixed_1_3},
    {.name = "seq_const_expo", .n = 2, .parts = {CONST(0.1, 2), EXPO(0.9)}, .top = 'S', .ms = 2},
    {.name = "seq_linear_poly", .n = 2, .parts = {LIN(0.1, 5), POLY(20, 2.0)}, .top = 'S', .ms = 5},
    {.name = "seq_poly_const", .n = 2, .parts = {POLY(8, 1.0), CONST(0.5, 6)},
     .top = 'S', .ms = 10},
    {.name = "seq_step_const_zero", .n = 2, .parts = {STEP(2, 0.5), CONST(0.3, 0)},
     .top = 'S', .ms = 5},
    {.name = "seq_expo_mult", .n = 2, .parts = {EXPO(0.9), MULT(mul095)}, .top = 'S', .ms = 4},
    {.name = "seq_linear_warm", .n = 2, .parts = {LIN(0.2, 4), WARM(5, 2, 1e-4)},
     .top = 'S', .ms = 4},
    {.name = "seq_warm_first", .n = 2, .parts = {WARM(4, 1, 0.0), STEP(3, 0.5)},
     .top = 'S', .ms = 10},
    {.name = "chain_const_expo", .n = 2, .parts = {CONST(0.1, 2), EXPO(0.9)}, .top = 'C'},
    {.name = "chain_linear_cos", .n = 2, .parts = {LIN(0.1, 5), COS(20, 1e-4)}, .top = 'C'},
    {.name = "chain_warm_const", .n = 2, .parts = {WARM(4, 2, 0.0), CONST(0.5, 6)}, .top = 'C'},
    {.name = "chain_three", .n = 3, .parts = {MULT(mul_cycle), POLY(12, 1.5), STEP(5, 0.5)},
     .top = 'C'},
    {.name = "chain_single", .n = 1, .parts = {EXPO(0.8)}, .top = 'C'},
    {.name = "added_const", .n = 1, .parts = {CONST(0.4, 5)}, .add_at = 3, .add_lr = 0.5},
    {.name = "added_mult", .n = 1, .parts = {MULT(mul_cycle)}, .add_at = 2, .add_lr = 0.3},
    {.name = "added_poly", .n = 1, .parts = {POLY(9, 2.0)}, .add_at = 4, .add_lr = 0.2},
    {.name = "added_warm", .n = 1, .parts = {WARM(3, 2, 0.001)}, .add_at = 3, .add_lr = 0.5},
    {.name = "const_0_9_3", .n = 1, .parts = {CONST(0.9, 3)}},
};
static const int N_CASES = (int)(sizeof cases / sizeof cases[0]);

static int make_one(tg_lr_scheduler **out, tg_optimizer *o, const spec *p)
{
    switch (p->k) {
    case K_CONST: return tg_constant_lr_new(out, o, p->a, p->i);
    case K_MULT: return tg_multiplicative_lr_new(out, o, p->fn, NULL);
    case K_MULTS:
        return tg_multiplicative_lr_new_per_group(out, o, 2, (tg_lr_lambda_fn[]){p->fn, p->fn2},
                                                  NULL);
    case K_POLY: return tg_polynomial_lr_new(out, o, p->i, p->a);
    case K_WARM: return tg_cosine_annealing_warm_restarts_new(out, o, p->i, p->j, p->a);
    case K_STEP: return tg_step_lr_new(out, o, p->i, p->a);
    case K_EXPO: return tg_exponential_lr_new(out, o, p->a);
    case K_COS: return tg_cosine_annealing_lr_new(out, o, p->i, p->a);
    case K_LIN: return tg_linear_lr_new(out, o, p->a, 1.0, p->i);
    }
    return TG_EINVAL;
}

/* A case's optimizer (SGD, param groups of lr 0.1 and 0.025, a third added
 * later) and schedulers; top is the one to step. */
typedef struct run {
    tg_tensor *p[3];
    tg_optimizer *opt;
    tg_lr_scheduler *parts[3], *top;
} run;

static void add_group(run *r, int g, double lr)
{
    cr_assert(eq(int, tg_tensor_zeros(&r->p[g], TG_F64, 1, (int64_t[]){1}), TG_OK));
    tg_tensor_set_requires_grad(r->p[g], true);
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.lr = lr;
    if (g == 0) cr_assert(eq(int, tg_sgd_new(&r->opt, 1, &r->p[0], &so), TG_OK));
    else cr_assert(eq(int, tg_sgd_add_param_group(r->opt, 1, &r->p[g], &so), TG_OK));
}

/* The optimizer and the schedulers, made in order (each constructor's
 * initial step starts from the lr the one before set). */
static void run_make(run *r, const gcase *c)
{
    memset(r, 0, sizeof *r);
    add_group(r, 0, 0.1);
    add_group(r, 1, 0.025);
    for (int i = 0; i < c->n; i++)
        cr_assert(eq(int, make_one(&r->parts[i], r->opt, &c->parts[i]), TG_OK), "%s: %s",
                  c->name, tg_error_message());
    r->top = r->parts[0];
    if (c->top == 'S')
        cr_assert(eq(int, tg_sequential_lr_new(&r->top, r->opt, c->n, r->parts, &c->ms), TG_OK),
                  "%s: %s", c->name, tg_error_message());
    if (c->top == 'C')
        cr_assert(eq(int, tg_chained_scheduler_new(&r->top, c->n, r->parts), TG_OK), "%s: %s",
                  c->name, tg_error_message());
}

static void run_free(run *r)
{
    if (r->top != r->parts[0]) tg_lr_scheduler_free(r->top);
    for (int i = 0; i < 3; i++) {
        tg_lr_scheduler_free(r->parts[i]);
        tg_tensor_release(r->p[i]);
    }
    tg_optimizer_free(r->opt);
}

/* Step k of case c, with its set lr or added group first. */
static void run_step(run *r, const gcase *c, int k)
{
    if (k == c->add_at) add_group(r, 2, c->add_lr);
    if (k == c->set_at)
        cr_assert(eq(int, tg_optimizer_set_group_lr(r->opt, c->set_group, c->set_lr), TG_OK));
    double to = c->to_step > 0 ? c->to_step * k : c->to ? c->to[k - 1] : NAN;
    int rc = isnan(to) ? tg_lr_scheduler_step(r->top)
                       : tg_cosine_annealing_warm_restarts_step_to(r->top, to);
    cr_assert(eq(int, rc, TG_OK), "%s step %d: %s", c->name, k, tg_error_message());
}

static bool same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* Row k of case c's golden lrs and last_epochs against r. */
static void expect_row(const run *r, const gcase *c, const tg_st_file *f, int k)
{
    char key[96];
    snprintf(key, sizeof key, "%s.lr", c->name);
    const tg_tensor *want = tg_st_get(f, key);
    snprintf(key, sizeof key, "%s.last_epoch", c->name);
    const tg_tensor *epochs = tg_st_get(f, key);
    cr_assert(want != NULL && epochs != NULL, "%s: not in the golden file", c->name);
    const int W = c->add_at > 0 ? 3 : 2;
    cr_assert(eq(i64, tg_tensor_numel(want), (STEPS + 1) * W), "%s", c->name);
    for (int g = 0; g < W; g++) {
        double w, lr = tg_optimizer_get_group_lr(r->opt, g);
        tg_tensor_get_flat(want, k * W + g, &w);
        const double last = tg_lr_scheduler_get_group_last_lr(r->top, g);
        if (isnan(w)) {
            cr_assert(isnan(lr) && isnan(last), "%s epoch %d group %d: no group yet", c->name,
                      k, g);
            continue;
        }
        cr_assert(same_bits(lr, w), "%s step %d group %d: %.17g vs torch %.17g", c->name, k, g,
                  lr, w);
        cr_assert(same_bits(last, lr), "%s step %d group %d: last lr %.17g", c->name, k, g,
                  last);
    }
    double e;
    tg_tensor_get_flat(epochs, k, &e);
    if (!isnan(e))
        cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r->top), (int64_t)e), "%s step %d",
                  c->name, k);
}

/* Every case's lrs, each group's, after its construction and after each
 * of 30 steps are torch's to the bit, and so are get_last_lr and
 * last_epoch. */
Test(lr_scheduler_more, sequences_match_pytorch_bit_for_bit)
{
    tg_st_file *f = th_golden_load("optim/lr_scheduler2.safetensors");
    cr_assert(eq(int, tg_st_count(f), 2 * N_CASES), "the golden file and cases[] differ");
    for (int ci = 0; ci < N_CASES; ci++) {
        const gcase *c = &cases[ci];
        run r;
        run_make(&r, c);
        for (int k = 0; k <= STEPS; k++) {
            if (k > 0) run_step(&r, c, k);
            expect_row(&r, c, f, k);
        }
        run_free(&r);
    }
    tg_st_free(f);
}

static char ck_path[128];

static void setup(void)
{
    th_tmp_dir_make("tg_sched_more_");
    th_tmp_path(ck_path, sizeof ck_path, "checkpoint.safetensors");
}

TestSuite(lr_scheduler_more, .init = setup, .fini = th_tmp_dir_remove);

/* Saves r's optimizer and top scheduler into the checkpoint file, or
 * (load) loads them from it. */
static void checkpoint(run *r, bool load)
{
    tg_checkpoint *ck = NULL;
    cr_assert(eq(int, tg_checkpoint_new(&ck), TG_OK));
    cr_assert(eq(int, tg_checkpoint_add_optimizer(ck, "opt", r->opt), TG_OK));
    cr_assert(eq(int, tg_checkpoint_add_lr_scheduler(ck, "sched", r->top), TG_OK));
    int rc = load ? tg_checkpoint_load(ck, ck_path) : tg_checkpoint_save(ck, ck_path, NULL);
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    tg_checkpoint_free(ck);
}

/* Every case saved after n steps (optimizer and scheduler, with the state
 * functions or in a checkpoint), loaded into a fresh optimizer and
 * schedulers and stepped on, gives the golden lrs: what an uninterrupted
 * run gives. */
Test(lr_scheduler_more, resumed_runs_continue_bit_for_bit)
{
    tg_st_file *gold = th_golden_load("optim/lr_scheduler2.safetensors");
    const int at[] = {1, 4, 7, 13};
    for (int ci = 0; ci < N_CASES; ci++) {
        const gcase *c = &cases[ci];
        for (size_t ai = 0; ai < sizeof at / sizeof at[0]; ai++) {
            run a, b;
            run_make(&a, c);
            for (int k = 1; k <= at[ai]; k++) run_step(&a, c, k);
            const bool ck = ai % 2 == 1;
            tg_st_file *f = NULL;
            cr_assert(eq(int, tg_st_new(&f), TG_OK));
            if (ck) checkpoint(&a, false);
            cr_assert(eq(int, tg_optimizer_state_save(a.opt, f, "opt"), TG_OK));
            cr_assert(eq(int, tg_lr_scheduler_state_save(a.top, f, "sched"), TG_OK), "%s: %s",
                      c->name, tg_error_message());
            run_free(&a);
            run_make(&b, c);
            if (c->add_at > 0 && c->add_at <= at[ai]) add_group(&b, 2, c->add_lr);
            if (ck) checkpoint(&b, true);
            else {
                cr_assert(eq(int, tg_optimizer_state_load(b.opt, f, "opt"), TG_OK), "%s: %s",
                          c->name, tg_error_message());
                cr_assert(eq(int, tg_lr_scheduler_state_load(b.top, f, "sched"), TG_OK),
                          "%s: %s", c->name, tg_error_message());
            }
            tg_st_free(f);
            expect_row(&b, c, gold, at[ai]);
            for (int k = at[ai] + 1; k <= STEPS; k++) {
                run_step(&b, c, k);
                expect_row(&b, c, gold, k);
            }
            run_free(&b);
        }
    }
    tg_st_free(gold);
}

/* ---- refusals ----------------------------------------------------------------- */

/* call fails with status and a message holding words. */
#define REFUSED_WITH(call, status, words) th_expect_status(call, status, words)
#define REFUSED(call, words) REFUSED_WITH(call, TG_EINVAL, words)

static double negative_at_2(int64_t e, void *user)
{
    (void)user;
    return e == 2 ? -0.5 : 0.5;
}

static double nan_at_3(int64_t e, void *user)
{
    (void)user;
    return e == 3 ? NAN : 1.0;
}

/* Each bad constructor call: words of its message, and nothing made (the
 * optimizer's lrs unchanged). */
Test(lr_scheduler_more, bad_arguments_are_refused_with_their_rule)
{
    run r;
    run_make(&r, &cases[0]);   /* ConstantLR: lr 0.1 / 3 */
    const double lr0 = tg_optimizer_get_lr(r.opt);
    tg_lr_scheduler *s = NULL, *other = NULL, *seq = NULL, *chain = NULL, *expo = NULL;
    tg_optimizer *o = r.opt, *o2 = NULL;
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    cr_assert(eq(int, tg_sgd_new(&o2, 1, &r.p[0], &so), TG_OK));
    cr_assert(eq(int, tg_exponential_lr_new(&other, o2, 0.5), TG_OK));
    cr_assert(eq(int, tg_exponential_lr_new(&expo, o, 1.0), TG_OK));
    cr_assert(eq(int, tg_sequential_lr_new(&seq, o, 1, &r.top, NULL), TG_OK));
    cr_assert(eq(int, tg_chained_scheduler_new(&chain, 1, &r.top), TG_OK));
    const tg_lr_lambda_fn fns[2] = {mul095, NULL};
    REFUSED(tg_constant_lr_new(NULL, o, 0.5, 3), "constant_lr: out must not be NULL");
    REFUSED(tg_constant_lr_new(&s, NULL, 0.5, 3), "constant_lr: opt must not be NULL");
    REFUSED(tg_constant_lr_new(&s, o, 0.0, 3), "constant_lr: factor=0 must be in (0, 1]");
    REFUSED(tg_constant_lr_new(&s, o, 1.5, 3), "constant_lr: factor=1.5 must be in (0, 1]");
    REFUSED(tg_constant_lr_new(&s, o, -0.1, 3), "constant_lr: factor=-0.1 must be in (0, 1]");
    REFUSED(tg_constant_lr_new(&s, o, NAN, 3), "constant_lr: factor=nan must be in (0, 1]");
    REFUSED(tg_constant_lr_new(&s, o, 0.5, -1), "constant_lr: total_iters=-1 must be >= 0");
    REFUSED(tg_multiplicative_lr_new(NULL, o, mul095, NULL), "out must not be NULL");
    REFUSED(tg_multiplicative_lr_new(&s, NULL, mul095, NULL), "opt must not be NULL");
    REFUSED(tg_multiplicative_lr_new(&s, o, NULL, NULL), "multiplicative_lr: fn must not be NULL");
    REFUSED(tg_multiplicative_lr_new_per_group(&s, o, 1, fns, NULL),
            "multiplicative_lr_per_group: n_fns=1 must equal the optimizer's param group "
            "count 2");
    REFUSED(tg_multiplicative_lr_new_per_group(&s, o, 2, NULL, NULL), "fns must not be NULL");
    REFUSED(tg_multiplicative_lr_new_per_group(&s, o, 2, fns, NULL),
            "fns[1] must not be NULL");
    REFUSED(tg_multiplicative_lr_new_per_group(&s, NULL, 2, fns, NULL), "opt must not be NULL");
    REFUSED(tg_polynomial_lr_new(&s, o, 0, 1.0), "polynomial_lr: total_iters=0 must be >= 1");
    REFUSED(tg_polynomial_lr_new(&s, o, 5, -1.0),
            "polynomial_lr: power=-1 must be finite and >= 0");
    REFUSED(tg_polynomial_lr_new(&s, o, 5, NAN), "polynomial_lr: power=nan must be finite");
    REFUSED(tg_polynomial_lr_new(&s, o, 5, INFINITY), "polynomial_lr: power=inf must be finite");
    REFUSED(tg_polynomial_lr_new(NULL, o, 5, 1.0), "polynomial_lr: out must not be NULL");
    REFUSED(tg_cosine_annealing_warm_restarts_new(&s, o, 0, 1, 0.0),
            "cosine_annealing_warm_restarts: t_0=0 must be >= 1");
    REFUSED(tg_cosine_annealing_warm_restarts_new(&s, o, INT64_MAX, 1, 0.0),
            "t_0=9223372036854775807 must be >= 1 (and <= 2^53)");
    REFUSED(tg_cosine_annealing_warm_restarts_new(&s, o, 5, 0, 0.0),
            "cosine_annealing_warm_restarts: t_mult=0 must be >= 1");
    REFUSED(tg_cosine_annealing_warm_restarts_new(&s, o, 5, 1, -1e-3),
            "cosine_annealing_warm_restarts: eta_min=-0.001 must be finite and >= 0");
    REFUSED(tg_cosine_annealing_warm_restarts_new(&s, o, 5, 1, NAN), "eta_min=nan must be finite");
    REFUSED(tg_cosine_annealing_warm_restarts_new(&s, NULL, 5, 1, 0.0), "opt must not be NULL");
    REFUSED(tg_chained_scheduler_new(NULL, 1, &r.top), "chained_scheduler: out must not be NULL");
    REFUSED(tg_chained_scheduler_new(&s, 0, &r.top), "chained_scheduler: n_schedulers=0 must be "
            ">= 1");
    REFUSED(tg_chained_scheduler_new(&s, 1, NULL),
            "chained_scheduler: schedulers must not be NULL");
    REFUSED(tg_chained_scheduler_new(&s, 2, (tg_lr_scheduler *[]){r.top, NULL}),
            "chained_scheduler: schedulers[1] must not be NULL");
    REFUSED(tg_chained_scheduler_new(&s, 2, (tg_lr_scheduler *[]){r.top, other}),
            "schedulers[1] is attached to another optimizer than schedulers[0]");
    /* torch's nesting, repeats and SequentialLRs are accepted
     * (test_lr_scheduler_custom.c) */
    cr_assert(eq(int, tg_chained_scheduler_new(&s, 2, (tg_lr_scheduler *[]){r.top, seq}),
                 TG_OK));
    tg_lr_scheduler_free(s);
    cr_assert(eq(int, tg_chained_scheduler_new(&s, 2, (tg_lr_scheduler *[]){chain, r.top}),
                 TG_OK));
    tg_lr_scheduler_free(s);
    cr_assert(eq(int, tg_chained_scheduler_new(&s, 3, (tg_lr_scheduler *[]){r.top, expo, r.top}),
                 TG_OK));
    tg_lr_scheduler_free(s);
    s = NULL;
    REFUSED(tg_sequential_lr_new(&s, o, 2, (tg_lr_scheduler *[]){r.top, chain}, (int64_t[]){3}),
            "sequential_lr: schedulers[1] is a chained_scheduler; they do not nest");
    cr_assert(s == NULL);
    cr_assert(eq(dbl, tg_optimizer_get_lr(o), lr0));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), 0));
    tg_lr_scheduler_free(chain);
    tg_lr_scheduler_free(seq);
    tg_lr_scheduler_free(expo);
    tg_lr_scheduler_free(other);
    tg_optimizer_free(o2);
    run_free(&r);
}

/* A MultiplicativeLR factor that makes the lr negative or NaN fails the
 * step (or a ChainedScheduler's, before any of its schedulers moved) and
 * changes nothing. */
Test(lr_scheduler_more, failed_steps_change_nothing)
{
    run r;
    run_make(&r, &cases[6]);   /* mult_095 */
    tg_lr_scheduler *neg = NULL, *bad = NULL, *chain = NULL;
    cr_assert(eq(int, tg_multiplicative_lr_new(&neg, r.opt, negative_at_2, NULL), TG_OK));
    cr_assert(eq(int, tg_multiplicative_lr_new(&bad, r.opt, nan_at_3, NULL), TG_OK));
    cr_assert(eq(int, tg_lr_scheduler_step(neg), TG_OK));
    const double lr = tg_optimizer_get_lr(r.opt);
    REFUSED(tg_lr_scheduler_step(neg),
            "lr_scheduler_step: multiplicative_lr gives lr=-0.025 at epoch 2 for param group 0 "
            "(lr * fn(epoch))");
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(neg), 1));
    cr_assert(eq(dbl, tg_optimizer_get_lr(r.opt), lr));
    cr_assert(eq(int, tg_chained_scheduler_new(&chain, 2, (tg_lr_scheduler *[]){r.top, bad}),
                 TG_OK));
    for (int k = 1; k <= 2; k++) cr_assert(eq(int, tg_lr_scheduler_step(chain), TG_OK));
    const double lr2 = tg_optimizer_get_lr(r.opt);
    REFUSED(tg_lr_scheduler_step(chain), "multiplicative_lr gives lr=nan at epoch 3");
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), 2));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(bad), 2));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(chain), 2));
    cr_assert(eq(dbl, tg_lr_scheduler_get_last_lr(r.top), lr2));
    cr_assert(eq(dbl, tg_lr_scheduler_get_last_lr(chain), lr2));
    cr_assert(eq(dbl, tg_optimizer_get_lr(r.opt), lr2));
    tg_lr_scheduler_free(chain);
    tg_lr_scheduler_free(bad);
    tg_lr_scheduler_free(neg);
    run_free(&r);
}

/* step_to refuses NULL, another kind, an epoch outside [0, 2^53] and a T_i
 * past 2^53, changing nothing. */
Test(lr_scheduler_more, step_to_refusals_change_nothing)
{
    run r;
    run_make(&r, &cases[18]);   /* warm_3_2 */
    cr_assert(eq(str, (char *)cases[18].name, "warm_3_2"));
    tg_lr_scheduler *big = NULL, *poly = NULL;
    cr_assert(eq(int, tg_polynomial_lr_new(&poly, r.opt, 5, 1.0), TG_OK));
    for (int k = 1; k <= 4; k++) cr_assert(eq(int, tg_lr_scheduler_step(r.top), TG_OK));
    const double lr = tg_optimizer_get_lr(r.opt);
    const char *op = "cosine_annealing_warm_restarts_step_to";
    REFUSED(tg_cosine_annealing_warm_restarts_step_to(NULL, 1.0), "step_to: s must not be NULL");
    REFUSED(tg_cosine_annealing_warm_restarts_step_to(poly, 1.0),
            "step_to: s is a polynomial_lr; it must be a cosine_annealing_warm_restarts");
    REFUSED(tg_cosine_annealing_warm_restarts_step_to(r.top, -0.5),
            "step_to: epoch=-0.5 must be >= 0 and <= 2^53");
    REFUSED(tg_cosine_annealing_warm_restarts_step_to(r.top, NAN), "epoch=nan must be >= 0");
    REFUSED(tg_cosine_annealing_warm_restarts_step_to(r.top, INFINITY), "epoch=inf must be");
    REFUSED(tg_cosine_annealing_warm_restarts_step_to(r.top, 0x1p54), "and <= 2^53");
    cr_assert(eq(int, tg_cosine_annealing_warm_restarts_new(&big, r.opt, INT64_C(1) << 40,
                                                            INT64_C(1) << 20, 0.0), TG_OK));
    REFUSED(tg_cosine_annealing_warm_restarts_step_to(big, 0x1p53),
            "epoch=9.0072e+15 puts T_i = t_0 * t_mult^1 beyond 2^53");
    cr_assert(strstr(tg_error_message(), op) != NULL);
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(big), 0));
    cr_assert(eq(int, tg_lr_scheduler_step(r.top), TG_OK));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), 5));
    cr_assert(tg_optimizer_get_lr(r.opt) != lr);
    tg_lr_scheduler_free(big);
    tg_lr_scheduler_free(poly);
    run_free(&r);
}

/* ---- state ------------------------------------------------------------------ */

/* What the new kinds save: their kind names, warm restarts' T_cur and T_i,
 * a ChainedScheduler's schedulers under "<prefix>.<i>". */
Test(lr_scheduler_more, state_holds_the_kind_and_warm_restarts_counters)
{
    run r;
    const gcase *c = &cases[35];   /* chain_warm_const */
    cr_assert(eq(str, (char *)c->name, "chain_warm_const"));
    run_make(&r, c);
    for (int k = 1; k <= 9; k++) run_step(&r, c, k);   /* T_i 4 then 8: T_cur 5 */
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_lr_scheduler_state_save(r.top, f, "o"), TG_OK));
    cr_assert(eq(str, (char *)tg_st_meta_get(f, "o.kind"), "chained_scheduler"));
    cr_assert(eq(str, (char *)tg_st_meta_get(f, "o.0.kind"), "cosine_annealing_warm_restarts"));
    cr_assert(eq(str, (char *)tg_st_meta_get(f, "o.1.kind"), "constant_lr"));
    double v;
    cr_assert(eq(int, tg_tensor_get_flat(tg_st_get(f, "o.0.T_cur"), 0, &v), TG_OK));
    cr_assert(eq(dbl, v, 5.0));
    cr_assert(eq(int, tg_tensor_dtype(tg_st_get(f, "o.0.T_i")), TG_I64));
    cr_assert(eq(int, tg_tensor_get_flat(tg_st_get(f, "o.0.T_i"), 0, &v), TG_OK));
    cr_assert(eq(dbl, v, 8.0));
    cr_assert(eq(int, tg_tensor_get_flat(tg_st_get(f, "o.last_epoch"), 0, &v), TG_OK));
    cr_assert(eq(dbl, v, 9.0));
    tg_st_free(f);
    const char *names[] = {"constant_lr", "multiplicative_lr", "multiplicative_lr",
                           "polynomial_lr"};
    const int which[] = {0, 6, 8, 10};
    for (int i = 0; i < 4; i++) {
        run q;
        run_make(&q, &cases[which[i]]);
        cr_assert(eq(int, tg_st_new(&f), TG_OK));
        cr_assert(eq(int, tg_lr_scheduler_state_save(q.top, f, "o"), TG_OK));
        cr_assert(eq(str, (char *)tg_st_meta_get(f, "o.kind"), (char *)names[i]));
        tg_st_free(f);
        run_free(&q);
    }
    run_free(&r);
}

/* Each bad warm restarts or chained state is refused with its status and
 * words and changes nothing; another kind's state is refused. */
Test(lr_scheduler_more, bad_states_change_nothing)
{
    run r;
    const gcase *c = &cases[35];   /* chain_warm_const */
    run_make(&r, c);
    for (int k = 1; k <= 6; k++) run_step(&r, c, k);
    tg_st_file *before = NULL;
    cr_assert(eq(int, tg_st_new(&before), TG_OK));
    cr_assert(eq(int, tg_lr_scheduler_state_save(r.top, before, "o"), TG_OK));
    const struct {
        const char *skip, *set_key;
        double v;
        const char *kind;
        int status;
        const char *words;
    } bad[] = {
        {"o.0.T_cur", NULL, 0, NULL, TG_ENOTFOUND, "missing key 'o.0.T_cur'"},
        {"o.0.T_i", NULL, 0, NULL, TG_ENOTFOUND, "missing key 'o.0.T_i'"},
        {"o.1.kind", NULL, 0, NULL, TG_ENOTFOUND, "missing metadata 'o.1.kind'"},
        {"", "o.0.T_i", 0, NULL, TG_EINVAL, "'o.0.T_i'=0 must be >= 1"},
        {"", "o.0.T_i", 2.5, NULL, TG_EINVAL, "'o.0.T_i'=2.5 must be an integer within +-2^53"},
        {"", "o.0.T_cur", NAN, NULL, TG_EINVAL, "'o.0.T_cur'=nan must be a finite number"},
        {"", "o.0.T_cur", 0x1p60, NULL, TG_EINVAL, "must be a finite number within +-2^53"},
        {"", "o.kind", 0, "sequential_lr", TG_EINVAL,
         "'o.kind' is 'sequential_lr'; this scheduler is 'chained_scheduler'"},
        {"", "o.0.kind", 0, "cosine_annealing_lr", TG_EINVAL,
         "this scheduler is 'cosine_annealing_warm_restarts'"},
        {"", "o.2.last_lr", 0.5, NULL, TG_EINVAL,
         "'o.2.last_lr' is for scheduler 2; this chained_scheduler has 2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tg_st_file *f = th_st_copy_without(before, bad[i].skip);
        if (bad[i].kind) tg_st_meta_set(f, bad[i].set_key, bad[i].kind);
        else if (bad[i].set_key) {
            tg_tensor *v = NULL;
            tg_tensor_scalar(&v, TG_F64, bad[i].v);
            tg_st_set(f, bad[i].set_key, v);
            tg_tensor_release(v);
        }
        REFUSED_WITH(tg_lr_scheduler_state_load(r.top, f, "o"), bad[i].status, bad[i].words);
        tg_st_free(f);
        tg_st_file *after = NULL;
        cr_assert(eq(int, tg_st_new(&after), TG_OK));
        cr_assert(eq(int, tg_lr_scheduler_state_save(r.top, after, "o"), TG_OK));
        cr_assert(eq(int, tg_st_count(after), tg_st_count(before)));
        for (int e = 0; e < tg_st_count(before); e++) {
            const char *k;
            tg_tensor *x;
            tg_st_at(before, e, &k, &x);
            const tg_tensor *y = tg_st_get(after, k);
            cr_assert(y != NULL, "case %zu: %s", i, k);
            th_expect_same_bits(k, x, y, x);
        }
        tg_st_free(after);
    }
    tg_st_free(before);
    run_free(&r);
}
