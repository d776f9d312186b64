/* tests/sched_cases.c - the learning-rate scheduler cases of
 * scripts/make_sched_goldens.py, made and stepped, and the checks shared
 * by test_lr_scheduler.c and test_lr_scheduler_state.c (sched_cases.h). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "sched_cases.h"
#include "tapegrad/lr_scheduler.h"
#include "tapegrad/optim.h"

double pow095(int64_t e, void *user)
{
    (void)user;
    return pow(0.95, (double)e);
}

/* Python's min(1.0, (epoch + 1) / 5). */
double warmup5(int64_t e, void *user)
{
    (void)user;
    double f = (double)(e + 1) / 5;
    return f < 1.0 ? f : 1.0;
}

/* ---- the golden cases ------------------------------------------------------- */

#define STEP(sz, g) {.k = K_STEP, .i = (sz), .a = (g)}
#define MULTI(g, n, ...) {.k = K_MULTI, .a = (g), .n_ms = (n), .ms = {__VA_ARGS__}}
#define EXPO(g) {.k = K_EXPO, .a = (g)}
#define COS(t, eta) {.k = K_COS, .i = (t), .a = (eta)}
#define LIN(s, e, t) {.k = K_LIN, .a = (s), .b = (e), .i = (t)}
#define LAMBDA(f) {.k = K_LAMBDA, .fn = (f)}
#define LAMBDAS(f, f2) {.k = K_LAMBDAS, .fn = (f), .fn2 = (f2)}

const gcase cases[] = {
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
const int N_CASES = (int)(sizeof cases / sizeof cases[0]);

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

int n_groups(const gcase *c) { return c->lr2 > 0 || c->add_at > 0 ? 2 : 1; }

/* Case c's second param group, of lr add_lr, added to r's optimizer. */
void add_group(run *r, const gcase *c)
{
    cr_assert(eq(int, tg_tensor_zeros(&r->q, TG_F64, 1, (int64_t[]){1}), TG_OK));
    tg_tensor_set_requires_grad(r->q, true);
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.lr = c->add_lr;
    cr_assert(eq(int, tg_sgd_add_param_group(r->opt, 1, &r->q, &so), TG_OK));
}

void run_make(run *r, const gcase *c)
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

void run_free(run *r)
{
    if (r->top != r->parts[0]) tg_lr_scheduler_free(r->top);
    for (int i = 0; i < 3; i++) tg_lr_scheduler_free(r->parts[i]);
    tg_optimizer_free(r->opt);
    tg_tensor_release(r->p);
    tg_tensor_release(r->q);
}

/* Step k of case c (with its set_lr or added group, if any, first). */
void run_step(run *r, const gcase *c, int k)
{
    if (k == c->add_at) add_group(r, c);
    if (k == c->set_at && c->lr2 > 0)
        cr_assert(eq(int, tg_optimizer_set_group_lr(r->opt, c->set_group, c->set_lr), TG_OK));
    else if (k == c->set_at)
        cr_assert(eq(int, tg_optimizer_set_lr(r->opt, c->set_lr), TG_OK));
    cr_assert(eq(int, tg_lr_scheduler_step(r->top), TG_OK), "%s step %d: %s", c->name, k,
              tg_error_message());
}

const gcase *find_case(const char *name)
{
    for (int i = 0; i < N_CASES; i++)
        if (strcmp(cases[i].name, name) == 0) return &cases[i];
    cr_assert(false, "no case %s", name);
    return NULL;
}

/* got equals torch's want to within 4 ulps; where torch's rounding made the
 * lr negative (about -1e-18), tapegrad's is 0. */
void expect_lr(const char *what, int k, double got, double want)
{
    if (want < 0)
        cr_assert(got == 0.0 && !signbit(got), "%s epoch %d: %.17g, want 0 (torch %.3g)", what,
                  k, got, want);
    else
        cr_assert(ieee_ulp_eq(dbl, got, want, 4), "%s epoch %d: %.17g vs torch %.17g", what, k,
                  got, want);
}

tg_st_file *snapshot(const tg_lr_scheduler *s)
{
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_lr_scheduler_state_save(s, f, "o"), TG_OK), "%s", tg_error_message());
    return f;
}
