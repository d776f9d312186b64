/* tests/test_lr_scheduler_custom.c - CyclicLR's custom scale function and
 * explicit step_size_down 0, CyclicLR's and OneCycleLR's momenta per param
 * group, and ChainedSchedulers that nest and repeat schedulers or hold a
 * SequentialLR (lr_scheduler.h), against PyTorch 1.13's lrs and momenta
 * bit for bit
 * (tests/golden/optim/lr_scheduler4.safetensors,
 * scripts/make_lr_scheduler4_goldens.py, whose CASES the table below
 * mirrors); resuming from a checkpoint; a failed chain step changing
 * nothing; and every refusal. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "sched_run.h"
#include "tapegrad/checkpoint.h"
#include "tapegrad/lr_scheduler.h"
#include "tapegrad/optim.h"

#define REFUSED(call, words) th_expect_status(call, TG_EINVAL, words)

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

#define PAIR(a, b) 2, (double[]){a, b}
#define ONE(a) 1, (double[]){a}

/* ---- the cases ------------------------------------------------------------------ */

/* The script's scale functions, with its double operations. */
static double halving(double x, void *user)
{
    (void)user;
    return 1 / (0.5 * x + 0.5);
}

static double decay(double x, void *user)
{
    (void)user;
    return pow(0.97, x);
}

static tg_cyclic_opts cy(int64_t up, int64_t down, tg_cyclic_mode mode)
{
    tg_cyclic_opts o = TG_CYCLIC_OPTS_INIT;
    o.step_size_up = up;
    o.step_size_down = down;
    o.mode = mode;
    return o;
}

static void b_cy_scale_cycle(run *r)
{
    tg_cyclic_opts o = cy(3, 4, TG_CYCLIC_TRIANGULAR);
    o.scale_fn = halving;
    o.n_base_momentums = o.n_max_momentums = 2;
    o.base_momentums = (double[]){0.8, 0.7};
    o.max_momentums = (double[]){0.9, 0.95};
    OK(tg_cyclic_lr_new(&r->parts[0], r->opt, PAIR(0.01, 0.002), PAIR(0.1, 0.05), &o));
    r->top = r->parts[0];
}

static void b_cy_scale_iterations(run *r)
{
    tg_cyclic_opts o = cy(2, 5, TG_CYCLIC_TRIANGULAR2);   /* mode ignored, as in torch */
    o.scale_fn = decay;
    o.scale_mode = TG_CYCLIC_SCALE_ITERATIONS;
    o.n_base_momentums = 2;
    o.base_momentums = (double[]){0.85, 0.5};
    OK(tg_cyclic_lr_new(&r->parts[0], r->opt, ONE(0.01), PAIR(0.1, 0.05), &o));
    r->top = r->parts[0];
}

static void b_cy_down_zero(run *r)
{
    tg_cyclic_opts o = cy(4, 0, TG_CYCLIC_EXP_RANGE);
    o.step_size_down_set = true;
    o.gamma = 0.99;
    o.n_max_momentums = 2;
    o.max_momentums = (double[]){0.95, 0.9};
    OK(tg_cyclic_lr_new(&r->parts[0], r->opt, PAIR(0.01, 0.005), ONE(0.1), &o));
    r->top = r->parts[0];
}

static void b_cy_down_zero_triangular2(run *r)
{
    tg_cyclic_opts o = cy(3, 0, TG_CYCLIC_TRIANGULAR2);
    o.step_size_down_set = true;
    o.n_base_momentums = o.n_max_momentums = 2;
    o.base_momentums = (double[]){0.1, 0.2};
    o.max_momentums = (double[]){0.6, 0.4};
    OK(tg_cyclic_lr_new(&r->parts[0], r->opt, ONE(0.001), PAIR(0.01, 0.02), &o));
    r->top = r->parts[0];
}

static void b_oc_momentum_lists(run *r)
{
    tg_one_cycle_opts o = TG_ONE_CYCLE_OPTS_INIT;
    o.total_steps = 30;
    o.n_base_momentums = o.n_max_momentums = 2;
    o.base_momentums = (double[]){0.85, 0.6};
    o.max_momentums = (double[]){0.95, 0.9};
    OK(tg_one_cycle_lr_new(&r->parts[0], r->opt, PAIR(0.1, 0.05), &o));
    r->top = r->parts[0];
}

static void b_oc_adam_momentum_lists(run *r)
{
    tg_one_cycle_opts o = TG_ONE_CYCLE_OPTS_INIT;
    o.total_steps = 20;
    o.three_phase = true;
    o.anneal_strategy = TG_ANNEAL_LINEAR;
    o.n_base_momentums = 2;
    o.base_momentums = (double[]){0.8, 0.7};
    o.max_momentum = 0.9;
    OK(tg_one_cycle_lr_new(&r->parts[0], r->opt, ONE(0.01), &o));
    r->top = r->parts[0];
}

static void chain(run *r, int n, tg_lr_scheduler *const *scheds)
{
    OK(tg_chained_scheduler_new(&r->top, n, scheds));
}

static void b_ch_repeat(run *r)
{
    tg_lr_scheduler **p = r->parts;
    OK(tg_exponential_lr_new(&p[0], r->opt, 0.9));
    OK(tg_constant_lr_new(&p[1], r->opt, 0.5, 3));
    chain(r, 3, (tg_lr_scheduler *[]){p[0], p[1], p[0]});
}

static void b_ch_nested(run *r)
{
    tg_lr_scheduler **p = r->parts;
    OK(tg_step_lr_new(&p[0], r->opt, 3, 0.5));
    OK(tg_exponential_lr_new(&p[1], r->opt, 0.95));
    OK(tg_chained_scheduler_new(&p[2], 2, p));
    OK(tg_linear_lr_new(&p[3], r->opt, 0.5, 1.0, 4));
    chain(r, 2, (tg_lr_scheduler *[]){p[2], p[3]});
}

static void b_ch_nested_repeat(run *r)
{
    tg_lr_scheduler **p = r->parts;
    tg_cyclic_opts o = cy(4, 0, TG_CYCLIC_TRIANGULAR);
    OK(tg_cyclic_lr_new(&p[0], r->opt, ONE(0.01), ONE(0.1), &o));
    OK(tg_multi_step_lr_new(&p[1], r->opt, 3, (int64_t[]){2, 5, 9}, 0.5));
    OK(tg_chained_scheduler_new(&p[2], 2, p));
    OK(tg_exponential_lr_new(&p[3], r->opt, 0.9));
    chain(r, 3, (tg_lr_scheduler *[]){p[2], p[3], p[2]});
}

static void b_ch_warm_repeat(run *r)
{
    tg_lr_scheduler **p = r->parts;
    OK(tg_cosine_annealing_warm_restarts_new(&p[0], r->opt, 3, 2, 0.0));
    OK(tg_exponential_lr_new(&p[1], r->opt, 0.9));
    chain(r, 3, (tg_lr_scheduler *[]){p[0], p[1], p[0]});
}

/* Built in torch's order of construction: a SequentialLR's schedulers
 * first, each taking its initial step. */
static void b_ch_sequential(run *r)
{
    tg_lr_scheduler **p = r->parts;
    OK(tg_constant_lr_new(&p[0], r->opt, 0.1, 2));
    OK(tg_exponential_lr_new(&p[1], r->opt, 0.9));
    OK(tg_sequential_lr_new(&p[2], r->opt, 2, p, (int64_t[]){2}));
    OK(tg_exponential_lr_new(&p[3], r->opt, 0.95));
    chain(r, 2, (tg_lr_scheduler *[]){p[2], p[3]});
}

static void b_ch_sequential_nested(run *r)
{
    tg_lr_scheduler **p = r->parts;
    OK(tg_multi_step_lr_new(&p[0], r->opt, 2, (int64_t[]){4, 11}, 0.5));
    OK(tg_linear_lr_new(&p[1], r->opt, 0.2, 1.0, 3));
    OK(tg_cosine_annealing_lr_new(&p[2], r->opt, 8, 0.0));
    OK(tg_step_lr_new(&p[3], r->opt, 4, 0.7));
    OK(tg_sequential_lr_new(&p[4], r->opt, 3, p + 1, (int64_t[]){5, 14}));
    OK(tg_chained_scheduler_new(&p[5], 2, (tg_lr_scheduler *[]){p[0], p[4]}));
    tg_cyclic_opts o = cy(5, 0, TG_CYCLIC_TRIANGULAR);
    OK(tg_cyclic_lr_new(&p[6], r->opt, ONE(0.01), ONE(0.1), &o));
    chain(r, 2, (tg_lr_scheduler *[]){p[5], p[6]});
}

#define CASE(name, o) {#name, o, b_##name}
static const tcase cases[] = {
    CASE(cy_scale_cycle, O_SGD_M),
    CASE(cy_scale_iterations, O_SGD_M),
    CASE(cy_down_zero, O_SGD_M),
    CASE(cy_down_zero_triangular2, O_RMS3),
    CASE(oc_momentum_lists, O_SGD_M),
    CASE(oc_adam_momentum_lists, O_ADAM),
    CASE(ch_repeat, O_SGD),
    CASE(ch_nested, O_SGD),
    CASE(ch_nested_repeat, O_SGD_M),
    CASE(ch_warm_repeat, O_SGD),
    CASE(ch_sequential, O_SGD),
    CASE(ch_sequential_nested, O_SGD_M),
};
static const int n_cases = (int)(sizeof cases / sizeof *cases);

/* ---- goldens -------------------------------------------------------------------- */

static tg_st_file *goldens;

static void load_goldens(void) { goldens = th_golden_load("optim/lr_scheduler4.safetensors"); }

static void free_goldens(void) { tg_st_free(goldens); }

TestSuite(lr_scheduler_custom, .init = load_goldens, .fini = free_goldens);

/* After step k (0: construction), r's lrs and momenta are torch's, bit for
 * bit (a negative torch lr, OneCycleLR's linear extrapolation at its last
 * step, is 0 here). */
static void expect_row(const run *r, const tcase *c, int64_t k, const char *when)
{
    const tg_tensor *lr = sr_golden(goldens, c, "lr");
    const tg_tensor *mom = sr_golden(goldens, c, "momentum");
    for (int g = 0; g < 2; g++) {
        double want = th_at(lr, 2 * k + g), got = tg_optimizer_get_group_lr(r->opt, g);
        if (want < 0) want = 0;
        cr_assert(got == want, "%s%s step %lld group %d: lr %.17g, torch %.17g", c->name, when,
                  (long long)k, g, got, want);
        cr_assert(tg_lr_scheduler_get_group_last_lr(r->top, g) == got, "%s last_lr", c->name);
        if (!mom) continue;
        want = th_at(mom, 2 * k + g);
        got = tg_optimizer_get_group_momentum(r->opt, g);
        cr_assert(got == want, "%s%s step %lld group %d: momentum %.17g, torch %.17g", c->name,
                  when, (long long)k, g, got, want);
    }
}

Test(lr_scheduler_custom, every_case_matches_torch_bit_for_bit)
{
    cr_assert(eq(int, tg_st_count(goldens), n_cases + 8), "the golden file and cases[] differ");
    for (int ci = 0; ci < n_cases; ci++) {
        const tcase *c = &cases[ci];
        run r;
        sr_run_make(&r, c);
        expect_row(&r, c, 0, "");
        const int64_t n = sr_n_steps(goldens, c);
        for (int64_t k = 1; k <= n; k++) {
            cr_assert(eq(int, tg_lr_scheduler_step(r.top), TG_OK), "%s step %lld: %s",
                      c->name, (long long)k, tg_error_message());
            expect_row(&r, c, k, "");
            cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), k));
        }
        sr_run_free(&r);
    }
}

/* A scheduler listed twice steps twice per step of the chain; one in a
 * nested chain listed twice, too; the nested chain counts its own steps. */
Test(lr_scheduler_custom, repeated_schedulers_step_each_time)
{
    run r;
    sr_run_make(&r, &cases[8]);   /* ch_nested_repeat */
    cr_assert(strcmp(cases[8].name, "ch_nested_repeat") == 0);
    for (int k = 1; k <= 5; k++) OK(tg_lr_scheduler_step(r.top));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), 5));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.parts[2]), 10));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.parts[0]), 10));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.parts[3]), 5));
    cr_assert(tg_lr_scheduler_get_group_last_lr(r.parts[2], 1) ==
              tg_lr_scheduler_get_group_last_lr(r.top, 1));
    sr_run_free(&r);
}

/* ---- resuming ------------------------------------------------------------------- */

static char ck_path[160];

static void setup_tmp(void)
{
    th_tmp_dir_make("tg_sched4_");
    th_tmp_path(ck_path, sizeof ck_path, "checkpoint.safetensors");
}

static void teardown_tmp(void) { th_tmp_dir_remove(); }

/* Saved after step `at` and loaded into freshly made schedulers, every
 * case goes on with torch's values bit for bit (warm restarts' T_cur and
 * T_i, listed twice in a chain, are saved twice with the same values). */
Test(lr_scheduler_custom, checkpoint_resume_continues_bit_identically, .init = setup_tmp,
     .fini = teardown_tmp)
{
    for (int ci = 0; ci < n_cases; ci++) {
        const tcase *c = &cases[ci];
        const int64_t n = sr_n_steps(goldens, c);
        const int64_t splits[] = {0, 1, n / 2, n - 1};
        for (size_t si = 0; si < sizeof splits / sizeof *splits; si++) {
            const int64_t at = splits[si];
            run r;
            sr_run_make(&r, c);
            for (int64_t k = 1; k <= at; k++) OK(tg_lr_scheduler_step(r.top));
            tg_checkpoint *ck = sr_checkpoint_of(&r);
            OK(tg_checkpoint_save(ck, ck_path, NULL));
            tg_checkpoint_free(ck);
            sr_run_free(&r);

            sr_run_make(&r, c);
            ck = sr_checkpoint_of(&r);
            OK(tg_checkpoint_load(ck, ck_path));
            tg_checkpoint_free(ck);
            cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), at));
            expect_row(&r, c, at, " resumed");
            for (int64_t k = at + 1; k <= n; k++) {
                OK(tg_lr_scheduler_step(r.top));
                expect_row(&r, c, k, " resumed");
            }
            sr_run_free(&r);
        }
    }
}

/* The state of a chain with a nested chain and a repeat: the nested one
 * under "<prefix>.<i>", its schedulers under "<prefix>.<i>.<j>". */
Test(lr_scheduler_custom, nested_state_keys)
{
    run r;
    sr_run_make(&r, &cases[8]);   /* ch_nested_repeat: [[cyclic, multi_step], exp, same] */
    OK(tg_lr_scheduler_step(r.top));
    tg_st_file *f = NULL;
    OK(tg_st_new(&f));
    OK(tg_lr_scheduler_state_save(r.top, f, "s"));
    const char *kinds[][2] = {{"s.kind", "chained_scheduler"}, {"s.0.kind", "chained_scheduler"},
                              {"s.0.0.kind", "cyclic_lr"}, {"s.0.1.kind", "multi_step_lr"},
                              {"s.1.kind", "exponential_lr"}, {"s.2.kind", "chained_scheduler"},
                              {"s.2.1.kind", "multi_step_lr"}};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        const char *v = tg_st_meta_get(f, kinds[i][0]);
        cr_assert(v != NULL && strcmp(v, kinds[i][1]) == 0, "%s", kinds[i][0]);
    }
    cr_assert(eq(dbl, th_at(tg_st_get(f, "s.0.0.last_epoch"), 0), 2));
    OK(tg_lr_scheduler_state_load(r.top, f, "s"));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.parts[0]), 2));
    tg_st_free(f);
    sr_run_free(&r);
}

/* ---- a failing step ----------------------------------------------------------- */

/* A MultiplicativeLR factor that is NaN while *user is true. */
static double maybe_nan(int64_t epoch, void *user)
{
    (void)epoch;
    return *(bool *)user ? NAN : 0.97;
}

typedef struct fail_run {
    run r;
    bool fail;
} fail_run;

/* [swa, cyclic, [warm restarts, multiplicative, warm restarts], cyclic]:
 * every kind of state a step changes (momenta, SWALR's step count, T_cur
 * and T_i, last_epoch, the lrs), repeats and nesting. */
static void fail_make(fail_run *fr)
{
    run *r = &fr->r;
    sr_make_opt(r, O_SGD_M);
    tg_lr_scheduler **p = r->parts;
    tg_cyclic_opts o = cy(3, 2, TG_CYCLIC_TRIANGULAR2);
    OK(tg_cyclic_lr_new(&p[0], r->opt, ONE(0.01), PAIR(0.1, 0.05), &o));
    OK(tg_cosine_annealing_warm_restarts_new(&p[1], r->opt, 2, 2, 0.001));
    OK(tg_multiplicative_lr_new(&p[2], r->opt, maybe_nan, &fr->fail));
    OK(tg_chained_scheduler_new(&p[3], 3, (tg_lr_scheduler *[]){p[1], p[2], p[1]}));
    OK(tg_swa_lr_new(&p[4], r->opt, PAIR(0.05, 0.01), 4, TG_ANNEAL_COS));
    OK(tg_chained_scheduler_new(&r->top, 4, (tg_lr_scheduler *[]){p[4], p[0], p[3], p[0]}));
}

static void expect_same(const fail_run *a, const fail_run *b, int k)
{
    for (int g = 0; g < 2; g++) {
        cr_assert(tg_optimizer_get_group_lr(a->r.opt, g) == tg_optimizer_get_group_lr(b->r.opt, g),
                  "step %d group %d lr", k, g);
        cr_assert(tg_optimizer_get_group_momentum(a->r.opt, g) ==
                  tg_optimizer_get_group_momentum(b->r.opt, g), "step %d group %d momentum", k, g);
        for (int i = 0; i < SR_PARTS && a->r.parts[i]; i++)
            cr_assert(tg_lr_scheduler_get_group_last_lr(a->r.parts[i], g) ==
                      tg_lr_scheduler_get_group_last_lr(b->r.parts[i], g), "step %d part %d", k, i);
    }
    for (int i = 0; i < SR_PARTS; i++)
        cr_assert(eq(i64, tg_lr_scheduler_last_epoch(a->r.parts[i]),
                     tg_lr_scheduler_last_epoch(b->r.parts[i])));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(a->r.top), tg_lr_scheduler_last_epoch(b->r.top)));
}

/* A step that fails in the middle of a chain (here in the nested chain,
 * after the SWALR, the cyclic and a warm restart stepped) puts every scheduler and
 * the optimizer back: the run then goes on exactly as one that never
 * failed. */
Test(lr_scheduler_custom, failed_chain_step_changes_nothing)
{
    fail_run a, b;
    a.fail = b.fail = false;
    fail_make(&a);
    fail_make(&b);
    for (int k = 1; k <= 12; k++) {
        if (k % 3 == 0) {
            a.fail = true;
            REFUSED(tg_lr_scheduler_step(a.r.top), "multiplicative_lr gives lr=nan");
            a.fail = false;
            expect_same(&a, &b, k);
        }
        OK(tg_lr_scheduler_step(a.r.top));
        OK(tg_lr_scheduler_step(b.r.top));
        expect_same(&a, &b, k);
    }
    sr_run_free(&a.r);
    sr_run_free(&b.r);
}

/* [SequentialLR([exponential, step]), multiplicative]: a step that fails
 * after the SequentialLR stepped one of its schedulers puts that one back
 * too. */
static void fail_make_sequential(fail_run *fr)
{
    run *r = &fr->r;
    sr_make_opt(r, O_SGD);
    tg_lr_scheduler **p = r->parts;
    OK(tg_exponential_lr_new(&p[0], r->opt, 0.9));
    OK(tg_step_lr_new(&p[1], r->opt, 2, 0.5));
    OK(tg_sequential_lr_new(&p[2], r->opt, 2, p, (int64_t[]){3}));
    OK(tg_multiplicative_lr_new(&p[3], r->opt, maybe_nan, &fr->fail));
    OK(tg_chained_scheduler_new(&r->top, 2, (tg_lr_scheduler *[]){p[2], p[3]}));
}

Test(lr_scheduler_custom, failed_chain_step_puts_a_sequential_lr_back)
{
    fail_run a, b;
    a.fail = b.fail = false;
    fail_make_sequential(&a);
    fail_make_sequential(&b);
    for (int k = 1; k <= 8; k++) {
        if (k % 2 == 0) {
            a.fail = true;
            REFUSED(tg_lr_scheduler_step(a.r.top), "multiplicative_lr gives lr=nan");
            a.fail = false;
            expect_same(&a, &b, k);
        }
        OK(tg_lr_scheduler_step(a.r.top));
        OK(tg_lr_scheduler_step(b.r.top));
        expect_same(&a, &b, k);
    }
    sr_run_free(&a.r);
    sr_run_free(&b.r);
}

/* ---- refusals ------------------------------------------------------------------- */

/* r's optimizer still has its lrs (0.1, 0.02) and momenta m0. */
static void expect_untouched(const run *r, double m0)
{
    cr_assert(tg_optimizer_get_group_lr(r->opt, 0) == 0.1);
    cr_assert(tg_optimizer_get_group_lr(r->opt, 1) == 0.02);
    cr_assert(tg_optimizer_get_group_momentum(r->opt, 0) == m0);
    cr_assert(tg_optimizer_get_group_momentum(r->opt, 1) == m0);
}

static double nan_from_2(double x, void *user)
{
    (void)user;
    return x >= 2 ? NAN : 1.0;
}

static double times_user(double x, void *user)
{
    (void)x;
    return *(double *)user;
}

Test(lr_scheduler_custom, cyclic_scale_refusals)
{
    run r;
    sr_make_opt(&r, O_SGD_M);
    tg_lr_scheduler *s = NULL;
    tg_cyclic_opts o = cy(2, 2, TG_CYCLIC_TRIANGULAR);
    o.scale_mode = TG_CYCLIC_SCALE_ITERATIONS;
    REFUSED(tg_cyclic_lr_new(&s, r.opt, ONE(0.01), ONE(0.1), &o), "needs a scale_fn");
    o.scale_fn = halving;
    o.scale_mode = (tg_cyclic_scale_mode)7;
    REFUSED(tg_cyclic_lr_new(&s, r.opt, ONE(0.01), ONE(0.1), &o), "scale_mode=7 must be");
    o = cy(2, 2, (tg_cyclic_mode)9);
    REFUSED(tg_cyclic_lr_new(&s, r.opt, ONE(0.01), ONE(0.1), &o), "scale_fn is NULL");
    /* a factor of 3 takes group 1's lr below 0 (max_lr < base_lr) */
    double factor = 3;
    o = cy(2, 2, TG_CYCLIC_TRIANGULAR);
    o.scale_fn = times_user;
    o.scale_user = &factor;
    o.cycle_momentum = false;
    OK(tg_cyclic_lr_new(&s, r.opt, ONE(0.01), PAIR(0.1, 0.0), &o));
    REFUSED(tg_lr_scheduler_step(s), "with its scale_fn");
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(s), 0));
    cr_assert(tg_optimizer_get_group_lr(r.opt, 1) == 0.01);
    factor = 0.5;
    OK(tg_lr_scheduler_step(s));
    cr_assert(tg_optimizer_get_group_lr(r.opt, 1) == 0.01 + (0.0 - 0.01) * 0.5 * 0.5);
    tg_lr_scheduler_free(s);
    s = NULL;
    sr_run_free(&r);

    sr_make_opt(&r, O_SGD_M);
    o = cy(2, 2, TG_CYCLIC_TRIANGULAR);
    o.scale_fn = nan_from_2;   /* of the cycle: NaN from step 4 on */
    OK(tg_cyclic_lr_new(&s, r.opt, ONE(0.01), ONE(0.1), &o));
    for (int k = 1; k <= 3; k++) OK(tg_lr_scheduler_step(s));
    const double lr = tg_optimizer_get_group_lr(r.opt, 0);
    const double m = tg_optimizer_get_group_momentum(r.opt, 0);
    REFUSED(tg_lr_scheduler_step(s), "gives lr=nan at epoch 4");
    cr_assert(tg_optimizer_get_group_lr(r.opt, 0) == lr);
    cr_assert(tg_optimizer_get_group_momentum(r.opt, 0) == m);
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(s), 3));
    tg_lr_scheduler_free(s);
    s = NULL;
    o.scale_mode = TG_CYCLIC_SCALE_ITERATIONS;   /* NaN from step 2 on */
    OK(tg_cyclic_lr_new(&s, r.opt, ONE(0.01), ONE(0.1), &o));
    OK(tg_lr_scheduler_step(s));
    REFUSED(tg_lr_scheduler_step(s), "gives lr=nan at epoch 2");
    tg_lr_scheduler_free(s);
    sr_run_free(&r);
}

Test(lr_scheduler_custom, explicit_step_size_down)
{
    /* 0 without step_size_down_set is torch's None: the same as 3 */
    run r;
    sr_make_opt(&r, O_SGD);
    tg_lr_scheduler *s = NULL, *t = NULL;
    tg_cyclic_opts o = cy(3, 0, TG_CYCLIC_TRIANGULAR), p = cy(3, 3, TG_CYCLIC_TRIANGULAR);
    o.cycle_momentum = p.cycle_momentum = false;
    OK(tg_cyclic_lr_new(&s, r.opt, ONE(0.01), ONE(0.1), &o));
    double a[8], b[8];
    for (int k = 0; k < 8; k++, tg_lr_scheduler_step(s)) a[k] = tg_lr_scheduler_get_last_lr(s);
    tg_lr_scheduler_free(s);
    OK(tg_cyclic_lr_new(&t, r.opt, ONE(0.01), ONE(0.1), &p));
    for (int k = 0; k < 8; k++, tg_lr_scheduler_step(t)) b[k] = tg_lr_scheduler_get_last_lr(t);
    tg_lr_scheduler_free(t);
    for (int k = 0; k < 8; k++) cr_assert(a[k] == b[k], "step %d", k);
    o.step_size_down = -1;
    o.step_size_down_set = true;
    REFUSED(tg_cyclic_lr_new(&s, r.opt, ONE(0.01), ONE(0.1), &o), "step_size_down=-1 must be");
    sr_run_free(&r);
}

Test(lr_scheduler_custom, momentum_list_refusals)
{
    run r;
    sr_make_opt(&r, O_SGD_M);
    tg_lr_scheduler *s = NULL;
    tg_cyclic_opts c = cy(2, 2, TG_CYCLIC_TRIANGULAR);
    c.base_momentums = (double[]){0.8, 0.7, 0.6};
    c.n_base_momentums = 3;
    REFUSED(tg_cyclic_lr_new(&s, r.opt, ONE(0.01), ONE(0.1), &c),
            "n_base_momentums=3 must be 1 or the optimizer's param group count 2");
    c.n_base_momentums = 2;
    c.base_momentums = (double[]){0.8, -0.1};
    REFUSED(tg_cyclic_lr_new(&s, r.opt, ONE(0.01), ONE(0.1), &c),
            "base_momentums[1]=-0.1 must be finite and >= 0");
    c = cy(2, 2, TG_CYCLIC_TRIANGULAR);
    c.n_max_momentums = 2;
    c.max_momentums = (double[]){NAN, 0.9};
    REFUSED(tg_cyclic_lr_new(&s, r.opt, ONE(0.01), ONE(0.1), &c), "max_momentums[0]=nan");
    c.cycle_momentum = false;   /* not read without cycle_momentum, as in torch */
    OK(tg_cyclic_lr_new(&s, r.opt, ONE(0.01), ONE(0.1), &c));
    tg_lr_scheduler_free(s);
    s = NULL;
    sr_run_free(&r);

    sr_make_opt(&r, O_SGD_M);
    tg_one_cycle_opts o = TG_ONE_CYCLE_OPTS_INIT;
    o.total_steps = 10;
    o.n_max_momentums = 0;
    o.max_momentums = (double[]){0.9, 0.9};
    REFUSED(tg_one_cycle_lr_new(&s, r.opt, ONE(0.1), &o), "n_max_momentums=0 must be 1");
    o.n_max_momentums = 2;
    o.max_momentums = (double[]){0.9, INFINITY};
    REFUSED(tg_one_cycle_lr_new(&s, r.opt, ONE(0.1), &o), "max_momentums[1]=inf");
    o.max_momentums = NULL;
    o.n_base_momentums = 1;
    o.base_momentums = (double[]){-1};
    REFUSED(tg_one_cycle_lr_new(&s, r.opt, ONE(0.1), &o), "base_momentums[0]=-1");
    cr_assert(s == NULL);
    expect_untouched(&r, 0.9);
    sr_run_free(&r);

    sr_make_opt(&r, O_ADAM);   /* a beta1 must be < 1 */
    o = (tg_one_cycle_opts)TG_ONE_CYCLE_OPTS_INIT;
    o.total_steps = 10;
    o.n_max_momentums = 2;
    o.max_momentums = (double[]){0.9, 1.5};
    cr_assert(tg_one_cycle_lr_new(&s, r.opt, ONE(0.1), &o) == TG_EINVAL);
    cr_assert(s == NULL);
    expect_untouched(&r, 0.9);
    sr_run_free(&r);
}

Test(lr_scheduler_custom, chain_refusals)
{
    run r;
    sr_make_opt(&r, O_SGD_M);
    tg_lr_scheduler **p = r.parts, *s = NULL;
    tg_one_cycle_opts o = TG_ONE_CYCLE_OPTS_INIT;
    o.total_steps = 10;
    OK(tg_one_cycle_lr_new(&p[0], r.opt, ONE(0.1), &o));
    OK(tg_one_cycle_lr_new(&p[1], r.opt, ONE(0.2), &o));
    OK(tg_chained_scheduler_new(&p[2], 1, &p[0]));
    /* the same OneCycleLR twice, also through a nested chain, is one */
    OK(tg_chained_scheduler_new(&s, 3, (tg_lr_scheduler *[]){p[0], p[2], p[0]}));
    tg_lr_scheduler_free(s);
    s = NULL;
    REFUSED(tg_chained_scheduler_new(&s, 2, (tg_lr_scheduler *[]){p[2], p[1]}),
            "(nested, in stepping order): schedulers[0] and schedulers[1] are both one_cycle");
    /* a SequentialLR's OneCycleLR counts too: p[1] inside, p[0] in p[2] */
    OK(tg_sequential_lr_new(&p[3], r.opt, 1, &p[1], NULL));
    REFUSED(tg_chained_scheduler_new(&s, 2, (tg_lr_scheduler *[]){p[2], p[3]}),
            "(nested, in stepping order): schedulers[0] and schedulers[1] are both one_cycle");
    OK(tg_chained_scheduler_new(&p[5], 1, &p[3]));   /* and in a chain in a chain */
    REFUSED(tg_chained_scheduler_new(&s, 2, (tg_lr_scheduler *[]){p[2], p[5]}),
            "(nested, in stepping order): schedulers[0] and schedulers[1] are both one_cycle");
    OK(tg_sequential_lr_new(&p[4], r.opt, 1, &p[0], NULL));
    OK(tg_chained_scheduler_new(&s, 2, (tg_lr_scheduler *[]){p[2], p[4]}));
    tg_lr_scheduler_free(s);
    s = NULL;
    REFUSED(tg_sequential_lr_new(&s, r.opt, 1, &p[2], NULL), "chained_scheduler");
    cr_assert(s == NULL);
    sr_run_free(&r);

    /* a chain of more than 4096 entries, counted through nesting */
    sr_make_opt(&r, O_SGD);
    OK(tg_exponential_lr_new(&p[0], r.opt, 0.9));
    tg_lr_scheduler *many[65];
    for (int i = 0; i < 65; i++) many[i] = p[0];
    OK(tg_chained_scheduler_new(&p[1], 64, many));
    for (int i = 0; i < 65; i++) many[i] = p[1];
    REFUSED(tg_chained_scheduler_new(&s, 64, many), "4160 entries; at most 4096");
    OK(tg_chained_scheduler_new(&p[2], 62, many));   /* 62 + 62 * 64 = 4030 */
    OK(tg_lr_scheduler_step(p[2]));
    cr_assert(eq(i64, tg_lr_scheduler_last_epoch(p[0]), 62 * 64));
    cr_assert(s == NULL);
    sr_run_free(&r);
}
