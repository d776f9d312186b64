/* tests/test_lr_scheduler_cyclic.c - OneCycleLR, CyclicLR, ReduceLROnPlateau
 * and SWALR (lr_scheduler.h) against PyTorch 1.13's lrs, momenta and
 * plateau counters bit for bit (tests/golden/optim/lr_scheduler3.safetensors,
 * scripts/make_lr_scheduler3_goldens.py, whose CASES the table below
 * mirrors); resuming from a checkpoint at several steps; SequentialLR; the
 * optimizer's momentum accessors; and every refusal. */
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

/* ---- the cases ------------------------------------------------------------------ */

static tg_one_cycle_opts oc(int64_t total_steps)
{
    tg_one_cycle_opts o = TG_ONE_CYCLE_OPTS_INIT;
    o.total_steps = total_steps;
    return o;
}

static tg_cyclic_opts cy(int64_t up, int64_t down, tg_cyclic_mode mode)
{
    tg_cyclic_opts o = TG_CYCLIC_OPTS_INIT;
    o.step_size_up = up;
    o.step_size_down = down;
    o.mode = mode;
    return o;
}

static tg_plateau_opts pl(bool mode_max, double factor, int64_t patience, double threshold,
                          bool abs, int64_t cooldown)
{
    tg_plateau_opts o = TG_PLATEAU_OPTS_INIT;
    o.mode_max = mode_max;
    o.factor = factor;
    o.patience = patience;
    o.threshold = threshold;
    o.threshold_abs = abs;
    o.cooldown = cooldown;
    return o;
}

#define PAIR(a, b) 2, (double[]){a, b}
#define ONE(a) 1, (double[]){a}

static void one(run *r, int rc)
{
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    r->top = r->parts[0];
}

static void b_oc_cos(run *r)
{
    tg_one_cycle_opts o = oc(30);
    one(r, tg_one_cycle_lr_new(&r->parts[0], r->opt, PAIR(0.1, 0.05), &o));
}

static void b_oc_linear(run *r)
{
    tg_one_cycle_opts o = oc(40);
    o.pct_start = 0.25;
    o.anneal_strategy = TG_ANNEAL_LINEAR;
    o.div_factor = 10.0;
    o.final_div_factor = 100.0;
    o.base_momentum = 0.8;
    o.max_momentum = 0.9;
    one(r, tg_one_cycle_lr_new(&r->parts[0], r->opt, PAIR(0.2, 0.05), &o));
}

static void b_oc_three_phase(run *r)
{
    tg_one_cycle_opts o = oc(25);
    o.three_phase = true;
    one(r, tg_one_cycle_lr_new(&r->parts[0], r->opt, ONE(0.3), &o));
}

static void b_oc_three_phase_linear(run *r)
{
    tg_one_cycle_opts o = oc(0);
    o.epochs = 4;
    o.steps_per_epoch = 7;
    o.pct_start = 0.4;
    o.anneal_strategy = TG_ANNEAL_LINEAR;
    o.three_phase = true;
    one(r, tg_one_cycle_lr_new(&r->parts[0], r->opt, PAIR(0.05, 0.5), &o));
}

static void b_oc_adam(run *r)
{
    tg_one_cycle_opts o = oc(20);
    o.base_momentum = 0.8;
    o.max_momentum = 0.9;
    one(r, tg_one_cycle_lr_new(&r->parts[0], r->opt, ONE(0.01), &o));
}

static void b_oc_adamw_three_phase(run *r)
{
    tg_one_cycle_opts o = oc(17);
    o.three_phase = true;
    o.anneal_strategy = TG_ANNEAL_LINEAR;
    one(r, tg_one_cycle_lr_new(&r->parts[0], r->opt, PAIR(0.01, 0.002), &o));
}

static void b_oc_rmsprop(run *r)
{
    tg_one_cycle_opts o = oc(12);
    one(r, tg_one_cycle_lr_new(&r->parts[0], r->opt, ONE(0.02), &o));
}

static void b_oc_no_momentum(run *r)
{
    tg_one_cycle_opts o = oc(15);
    o.cycle_momentum = false;
    one(r, tg_one_cycle_lr_new(&r->parts[0], r->opt, PAIR(1.0, 0.1), &o));
}

static void b_oc_pct_zero(run *r)
{
    tg_one_cycle_opts o = oc(10);
    o.pct_start = 0.0;
    one(r, tg_one_cycle_lr_new(&r->parts[0], r->opt, ONE(0.1), &o));
}

static void b_oc_pct_one(run *r)
{
    tg_one_cycle_opts o = oc(12);
    o.pct_start = 1.0;
    o.three_phase = true;
    one(r, tg_one_cycle_lr_new(&r->parts[0], r->opt, ONE(0.1), &o));
}

static void b_oc_phase_end(run *r)
{
    tg_one_cycle_opts o = oc(4);
    o.pct_start = 0.5;
    o.three_phase = true;
    o.anneal_strategy = TG_ANNEAL_LINEAR;
    one(r, tg_one_cycle_lr_new(&r->parts[0], r->opt, PAIR(0.3, 0.7), &o));
}

static void b_oc_total_1(run *r)
{
    tg_one_cycle_opts o = oc(1);
    one(r, tg_one_cycle_lr_new(&r->parts[0], r->opt, ONE(0.1), &o));
}

static void b_oc_total_2_linear(run *r)
{
    tg_one_cycle_opts o = oc(2);
    o.anneal_strategy = TG_ANNEAL_LINEAR;
    one(r, tg_one_cycle_lr_new(&r->parts[0], r->opt, ONE(0.1), &o));
}

static void b_plateau_min_rel(run *r)
{
    tg_plateau_opts o = pl(false, 0.5, 2, 1e-2, false, 0);
    one(r, tg_reduce_lr_on_plateau_new(&r->parts[0], r->opt, &o, PAIR(1e-3, 1e-3)));
}

static void b_plateau_min_abs_cooldown(run *r)
{
    tg_plateau_opts o = pl(false, 0.3, 1, 0.05, true, 2);
    one(r, tg_reduce_lr_on_plateau_new(&r->parts[0], r->opt, &o, ONE(0.005)));
}

static void b_plateau_max_rel(run *r)
{
    tg_plateau_opts o = pl(true, 0.7, 0, 1e-3, false, 0);
    one(r, tg_reduce_lr_on_plateau_new(&r->parts[0], r->opt, &o, 0, NULL));
}

static void b_plateau_max_abs_eps(run *r)
{
    tg_plateau_opts o = pl(true, 0.9, 1, 0.0, true, 0);
    o.eps = 2e-3;
    one(r, tg_reduce_lr_on_plateau_new(&r->parts[0], r->opt, &o, PAIR(0.05, 0.015)));
}

static void b_plateau_defaults(run *r)
{
    one(r, tg_reduce_lr_on_plateau_new(&r->parts[0], r->opt, NULL, 0, NULL));
}

static void b_plateau_cooldown_zero_factor(run *r)
{
    tg_plateau_opts o = pl(false, 0.0, 3, 1e-4, false, 5);
    one(r, tg_reduce_lr_on_plateau_new(&r->parts[0], r->opt, &o, PAIR(0.0, 0.01)));
}

static void b_plateau_eps_equal(run *r)
{
    tg_plateau_opts o = pl(false, 0.5, 0, 1e-4, false, 0);
    o.eps = 0.05;
    one(r, tg_reduce_lr_on_plateau_new(&r->parts[0], r->opt, &o, 0, NULL));
}

static void b_swa_cos(run *r)
{
    one(r, tg_swa_lr_new(&r->parts[0], r->opt, ONE(0.05), 10, TG_ANNEAL_COS));
}

static void b_swa_linear(run *r)
{
    one(r, tg_swa_lr_new(&r->parts[0], r->opt, PAIR(0.01, 0.005), 5, TG_ANNEAL_LINEAR));
}

static void b_swa_zero_epochs(run *r)
{
    one(r, tg_swa_lr_new(&r->parts[0], r->opt, ONE(0.2), 0, TG_ANNEAL_COS));
}

static void b_swa_one_epoch(run *r)
{
    one(r, tg_swa_lr_new(&r->parts[0], r->opt, PAIR(0.3, 0.001), 1, TG_ANNEAL_LINEAR));
}

static void b_cy_triangular(run *r)
{
    tg_cyclic_opts o = cy(5, 0, TG_CYCLIC_TRIANGULAR);
    one(r, tg_cyclic_lr_new(&r->parts[0], r->opt, PAIR(0.01, 0.001), PAIR(0.1, 0.01), &o));
}

static void b_cy_triangular2(run *r)
{
    tg_cyclic_opts o = cy(4, 6, TG_CYCLIC_TRIANGULAR2);
    o.base_momentum = 0.85;
    o.max_momentum = 0.95;
    one(r, tg_cyclic_lr_new(&r->parts[0], r->opt, ONE(0.001), PAIR(0.1, 0.05), &o));
}

static void b_cy_exp_range(run *r)
{
    tg_cyclic_opts o = cy(3, 5, TG_CYCLIC_EXP_RANGE);
    o.gamma = 0.95;
    one(r, tg_cyclic_lr_new(&r->parts[0], r->opt, PAIR(0.01, 0.002), ONE(0.1), &o));
}

static void b_cy_adam_no_momentum(run *r)
{
    tg_cyclic_opts o = cy(7, 2, TG_CYCLIC_TRIANGULAR);
    o.cycle_momentum = false;
    one(r, tg_cyclic_lr_new(&r->parts[0], r->opt, ONE(1e-4), PAIR(1e-3, 5e-3), &o));
}

static void b_cy_rmsprop(run *r)
{
    tg_cyclic_opts o = cy(2, 1, TG_CYCLIC_TRIANGULAR);
    one(r, tg_cyclic_lr_new(&r->parts[0], r->opt, ONE(0.001), ONE(0.01), &o));
}

static void seq(run *r, int64_t milestone)
{
    OK(tg_sequential_lr_new(&r->top, r->opt, 2, r->parts, (int64_t[]){milestone}));
}

static void b_seq_linear_one_cycle(run *r)
{
    OK(tg_linear_lr_new(&r->parts[0], r->opt, 0.5, 1.0, 4));
    tg_one_cycle_opts o = oc(35);
    OK(tg_one_cycle_lr_new(&r->parts[1], r->opt, PAIR(0.1, 0.05), &o));
    seq(r, 5);
}

static void b_seq_one_cycle_exponential(run *r)
{
    tg_one_cycle_opts o = oc(20);
    o.anneal_strategy = TG_ANNEAL_LINEAR;
    OK(tg_one_cycle_lr_new(&r->parts[0], r->opt, ONE(0.1), &o));
    OK(tg_exponential_lr_new(&r->parts[1], r->opt, 0.9));
    seq(r, 21);
}

static void b_seq_cosine_swa(run *r)
{
    OK(tg_cosine_annealing_lr_new(&r->parts[0], r->opt, 10, 0.0));
    OK(tg_swa_lr_new(&r->parts[1], r->opt, PAIR(0.01, 0.004), 5, TG_ANNEAL_COS));
    seq(r, 10);
}

static void b_seq_swa_exponential(run *r)
{
    OK(tg_swa_lr_new(&r->parts[0], r->opt, ONE(0.05), 4, TG_ANNEAL_LINEAR));
    OK(tg_exponential_lr_new(&r->parts[1], r->opt, 0.8));
    seq(r, 6);
}

static void b_seq_linear_cyclic(run *r)
{
    OK(tg_linear_lr_new(&r->parts[0], r->opt, 0.25, 1.0, 3));
    tg_cyclic_opts o = cy(4, 0, TG_CYCLIC_TRIANGULAR);
    OK(tg_cyclic_lr_new(&r->parts[1], r->opt, ONE(0.01), ONE(0.1), &o));
    seq(r, 3);
}

#define CASE(name, o) {#name, o, b_##name}
static const tcase cases[] = {
    CASE(oc_cos, O_SGD_M),
    CASE(oc_linear, O_SGD_M),
    CASE(oc_three_phase, O_SGD_M),
    CASE(oc_three_phase_linear, O_SGD_M),
    CASE(oc_adam, O_ADAM),
    CASE(oc_adamw_three_phase, O_ADAMW),
    CASE(oc_rmsprop, O_RMS5),
    CASE(oc_no_momentum, O_SGD),
    CASE(oc_pct_zero, O_SGD_M),
    CASE(oc_pct_one, O_SGD_M),
    CASE(oc_phase_end, O_SGD_M),
    CASE(oc_total_1, O_SGD_M),
    CASE(oc_total_2_linear, O_SGD_M),
    CASE(plateau_min_rel, O_SGD),
    CASE(plateau_min_abs_cooldown, O_SGD),
    CASE(plateau_max_rel, O_SGD),
    CASE(plateau_max_abs_eps, O_SGD),
    CASE(plateau_defaults, O_SGD),
    CASE(plateau_cooldown_zero_factor, O_SGD),
    CASE(plateau_eps_equal, O_SGD),
    CASE(swa_cos, O_SGD),
    CASE(swa_linear, O_SGD),
    CASE(swa_zero_epochs, O_SGD),
    CASE(swa_one_epoch, O_SGD),
    CASE(cy_triangular, O_SGD_M),
    CASE(cy_triangular2, O_SGD_M),
    CASE(cy_exp_range, O_SGD_M),
    CASE(cy_adam_no_momentum, O_ADAM),
    CASE(cy_rmsprop, O_RMS3),
    CASE(seq_linear_one_cycle, O_SGD_M),
    CASE(seq_one_cycle_exponential, O_SGD_M),
    CASE(seq_cosine_swa, O_SGD),
    CASE(seq_swa_exponential, O_SGD),
    CASE(seq_linear_cyclic, O_SGD_M),
};
static const int n_cases = (int)(sizeof cases / sizeof *cases);

static const tcase *find(const char *name)
{
    for (int i = 0; i < n_cases; i++)
        if (strcmp(cases[i].name, name) == 0) return &cases[i];
    cr_assert(0, "no case %s", name);
    return NULL;
}

static bool is_plateau(const tcase *c) { return strncmp(c->name, "plateau", 7) == 0; }

/* ---- goldens -------------------------------------------------------------------- */

static tg_st_file *goldens;

static void load_goldens(void) { goldens = th_golden_load("optim/lr_scheduler3.safetensors"); }

static void free_goldens(void) { tg_st_free(goldens); }

TestSuite(lr_scheduler_cyclic, .init = load_goldens, .fini = free_goldens);

/* Step k (1-based) of case c. */
static int step(run *r, const tcase *c, int64_t k)
{
    if (!is_plateau(c)) return tg_lr_scheduler_step(r->top);
    const char *m = strstr(c->name, "max") ? "metrics_max" : "metrics";
    return tg_reduce_lr_on_plateau_step(r->top, th_at(tg_st_get(goldens, m), k - 1));
}

/* After step k (0: construction), r's lrs, momenta and plateau counters are
 * torch's, bit for bit (a negative torch lr is 0 here). */
static void expect_row(const run *r, const tcase *c, int64_t k, const char *when)
{
    const tg_tensor *lr = sr_golden(goldens, c, "lr");
    const tg_tensor *mom = sr_golden(goldens, c, "momentum");
    const tg_tensor *st = sr_golden(goldens, c, "state");
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
    if (!st) return;
    double best;
    int64_t bad, cool;
    OK(tg_reduce_lr_on_plateau_get(r->top, &best, &bad, &cool));
    cr_assert(best == th_at(st, 3 * k) && bad == th_at(st, 3 * k + 1) &&
              cool == th_at(st, 3 * k + 2), "%s%s step %lld: best %g bad %lld cooldown %lld",
              c->name, when, (long long)k, best, (long long)bad, (long long)cool);
}

Test(lr_scheduler_cyclic, every_case_matches_torch_bit_for_bit)
{
    cr_assert(eq(int, tg_st_count(goldens), 2 + n_cases + 19 + 7),
              "the golden file and cases[] differ");
    for (int ci = 0; ci < n_cases; ci++) {
        const tcase *c = &cases[ci];
        run r;
        sr_run_make(&r, c);
        expect_row(&r, c, 0, "");
        const int64_t n = sr_n_steps(goldens, c);
        for (int64_t k = 1; k <= n; k++) {
            cr_assert(eq(int, step(&r, c, k), TG_OK), "%s step %lld: %s", c->name,
                      (long long)k, tg_error_message());
            expect_row(&r, c, k, "");
            cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), k));
        }
        sr_run_free(&r);
    }
}

/* OneCycleLR refuses a step past total_steps, as torch's "Tried to step
 * X times", and changes nothing: not the lrs, momenta nor last_epoch. */
Test(lr_scheduler_cyclic, one_cycle_refuses_a_step_past_total_steps)
{
    const char *names[] = {"oc_cos", "oc_total_1", "oc_linear", "seq_linear_one_cycle"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const tcase *c = find(names[i]);
        run r;
        sr_run_make(&r, c);
        const int64_t n = sr_n_steps(goldens, c);
        for (int64_t k = 1; k <= n; k++) OK(step(&r, c, k));
        /* the OneCycleLR's own steps: after the SequentialLR's milestone 5 */
        const int64_t own = strncmp(c->name, "seq", 3) == 0 ? n - 5 : n;
        char words[64];
        snprintf(words, sizeof words, "tried to step %lld times", (long long)own + 2);
        REFUSED(step(&r, c, n + 1), words);
        expect_row(&r, c, n, " after the refused step");
        cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), n));
        sr_run_free(&r);
    }
}

/* ---- resuming ------------------------------------------------------------------- */

static char ck_path[160];

static void setup_tmp(void)
{
    th_tmp_dir_make("tg_sched3_");
    th_tmp_path(ck_path, sizeof ck_path, "checkpoint.safetensors");
}

static void teardown_tmp(void) { th_tmp_dir_remove(); }

/* Saved after step `at` (checkpoint of the optimizer and the scheduler)
 * and loaded into freshly made ones, every case goes on with torch's
 * values bit for bit: the momenta come back with the optimizer, SWALR's
 * step count and ReduceLROnPlateau's counters with the scheduler. */
Test(lr_scheduler_cyclic, checkpoint_resume_continues_bit_identically, .init = setup_tmp,
     .fini = teardown_tmp)
{
    for (int ci = 0; ci < n_cases; ci++) {
        const tcase *c = &cases[ci];
        const int64_t n = sr_n_steps(goldens, c);
        const int64_t splits[] = {0, 1, n / 2, n - 1};
        for (size_t si = 0; si < sizeof splits / sizeof *splits; si++) {
            const int64_t at = splits[si];
            if (at < 0) continue;
            run r;
            sr_run_make(&r, c);
            for (int64_t k = 1; k <= at; k++) OK(step(&r, c, k));
            tg_checkpoint *ck = sr_checkpoint_of(&r);
            OK(tg_checkpoint_save(ck, ck_path, NULL));
            tg_checkpoint_free(ck);
            sr_run_free(&r);

            sr_run_make(&r, c);   /* a new process: its constructors set the lrs again */
            ck = sr_checkpoint_of(&r);
            OK(tg_checkpoint_load(ck, ck_path));
            tg_checkpoint_free(ck);
            cr_assert(eq(i64, tg_lr_scheduler_last_epoch(r.top), at));
            expect_row(&r, c, at, " resumed");
            for (int64_t k = at + 1; k <= n; k++) {
                OK(step(&r, c, k));
                expect_row(&r, c, k, " resumed");
            }
            sr_run_free(&r);
        }
    }
}

/* ---- refusals ------------------------------------------------------------------- */

/* r's optimizer still has its lrs (0.1, 0.02), momenta m0 and no initial
 * lr (a StepLR made now takes the lrs as its base lrs). */
static void expect_untouched(run *r, double m0)
{
    cr_assert(tg_optimizer_get_group_lr(r->opt, 0) == 0.1);
    cr_assert(tg_optimizer_get_group_lr(r->opt, 1) == 0.02);
    cr_assert(tg_optimizer_get_group_momentum(r->opt, 0) == m0);
    cr_assert(tg_optimizer_get_group_momentum(r->opt, 1) == m0);
    tg_lr_scheduler *s = NULL;
    OK(tg_step_lr_new(&s, r->opt, 1, 1.0));
    cr_assert(tg_lr_scheduler_group_base_lr(s, 1) == 0.02);
    tg_lr_scheduler_free(s);
}

Test(lr_scheduler_cyclic, one_cycle_refusals_change_nothing)
{
    run r;
    sr_make_opt(&r, O_SGD_M);
    tg_lr_scheduler *s = NULL;
    tg_one_cycle_opts o = oc(10);
    REFUSED(tg_one_cycle_lr_new(NULL, r.opt, ONE(0.1), &o), "out must not be NULL");
    REFUSED(tg_one_cycle_lr_new(&s, NULL, ONE(0.1), &o), "opt must not be NULL");
    REFUSED(tg_one_cycle_lr_new(&s, r.opt, 3, (double[]){1, 2, 3}, &o),
            "n_max_lr=3 must be 1 or the optimizer's param group count 2");
    REFUSED(tg_one_cycle_lr_new(&s, r.opt, 1, NULL, &o), "max_lr must not be NULL");
    REFUSED(tg_one_cycle_lr_new(&s, r.opt, PAIR(0.1, -1), &o), "max_lr[1]=-1 must be finite");
    REFUSED(tg_one_cycle_lr_new(&s, r.opt, ONE(NAN), &o), "max_lr[0]=nan must be finite");
    const struct {
        const char *field;
        tg_one_cycle_opts o;
        const char *words;
    } bad[] = {
        {"total_steps", {.total_steps = -1}, "total_steps=-1 must be a positive integer"},
        {"none", {.total_steps = 0}, "you must define either total_steps OR (epochs AND"},
        {"epochs", {.steps_per_epoch = 5}, "epochs=0 must be a positive integer"},
        {"steps_per_epoch", {.epochs = 5, .steps_per_epoch = -2},
         "steps_per_epoch=-2 must be a positive integer"},
        {"product", {.epochs = INT64_C(1) << 40, .steps_per_epoch = INT64_C(1) << 20},
         "must be at most 2^53"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tg_one_cycle_opts b = oc(0);
        b.total_steps = bad[i].o.total_steps;
        b.epochs = bad[i].o.epochs;
        b.steps_per_epoch = bad[i].o.steps_per_epoch;
        REFUSED(tg_one_cycle_lr_new(&s, r.opt, ONE(0.1), &b), bad[i].words);
    }
    tg_one_cycle_opts b = o;
    b.pct_start = 1.5;
    REFUSED(tg_one_cycle_lr_new(&s, r.opt, ONE(0.1), &b),
            "pct_start=1.5 must be a float between 0 and 1");
    b = o;
    b.anneal_strategy = (tg_anneal_strategy)7;
    REFUSED(tg_one_cycle_lr_new(&s, r.opt, ONE(0.1), &b), "anneal_strategy=7 must be");
    b = o;
    b.div_factor = 0;
    REFUSED(tg_one_cycle_lr_new(&s, r.opt, ONE(0.1), &b), "div_factor=0 must be finite and > 0");
    b = o;
    b.final_div_factor = INFINITY;
    REFUSED(tg_one_cycle_lr_new(&s, r.opt, ONE(0.1), &b), "final_div_factor=inf must be");
    b = o;
    b.base_momentum = -0.5;
    REFUSED(tg_one_cycle_lr_new(&s, r.opt, ONE(0.1), &b), "base_momentum=-0.5 must be");
    b = o;
    b.max_momentum = NAN;
    REFUSED(tg_one_cycle_lr_new(&s, r.opt, ONE(0.1), &b), "max_momentum=nan must be");
    /* torch divides by zero: 0.1 * 10 - 1 = 0 ends phase 0 at step 0, and
     * pct_start 1 leaves the last phase no steps while step 10 falls in it */
    b = o;
    b.pct_start = 0.1;
    REFUSED(tg_one_cycle_lr_new(&s, r.opt, ONE(0.1), &b), "makes phase 0 empty");
    b = o;
    b.pct_start = 1.0;
    REFUSED(tg_one_cycle_lr_new(&s, r.opt, ONE(0.1), &b), "makes phase 1 empty");
    b.three_phase = true;
    b.pct_start = 0.55;   /* 2 * 0.55 * 10 - 2 = 9 = total_steps - 1: phase 2 empty */
    REFUSED(tg_one_cycle_lr_new(&s, r.opt, ONE(0.1), &b), "makes phase 2 empty");
    cr_assert(s == NULL);
    expect_untouched(&r, 0.9);
    sr_run_free(&r);

    sr_make_opt(&r, O_SGD_M);
    OK(tg_optimizer_set_group_momentum(r.opt, 0, 0.9));
    b = o;
    b.max_momentum = 0.0;   /* SGD nesterov needs momentum > 0 */
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.momentum = 0.9;
    so.nesterov = true;
    tg_tensor *x = sr_param();
    OK(tg_sgd_add_param_group(r.opt, 1, &x, &so));
    REFUSED(tg_one_cycle_lr_new(&s, r.opt, ONE(0.1), &b), "nesterov requires momentum > 0");
    tg_tensor_release(x);
    sr_run_free(&r);

    sr_make_opt(&r, O_ADAM);
    b = o;
    b.max_momentum = 1.5;
    REFUSED(tg_one_cycle_lr_new(&s, r.opt, ONE(0.1), &b), "beta1=1.5 must be in [0, 1)");
    expect_untouched(&r, 0.9);
    sr_run_free(&r);
}

/* A linear OneCycleLR's last step extrapolates: torch gives beta1 > 1 and a
 * negative lr there; tapegrad the double below 1 and 0. */
Test(lr_scheduler_cyclic, one_cycle_last_step_stays_in_range)
{
    run r;
    sr_make_opt(&r, O_ADAM);
    tg_one_cycle_opts o = oc(10);
    o.anneal_strategy = TG_ANNEAL_LINEAR;
    o.max_momentum = 0.99;
    tg_lr_scheduler *s = NULL;
    OK(tg_one_cycle_lr_new(&s, r.opt, ONE(0.1), &o));
    for (int k = 1; k < 10; k++) OK(tg_lr_scheduler_step(s));
    cr_assert(tg_optimizer_get_group_momentum(r.opt, 0) == 0.99);
    OK(tg_lr_scheduler_step(s));
    cr_assert(tg_optimizer_get_group_momentum(r.opt, 0) == nextafter(1.0, 0.0));
    cr_assert(tg_optimizer_get_group_lr(r.opt, 0) == 0.0);
    tg_lr_scheduler_free(s);
    sr_run_free(&r);
}

Test(lr_scheduler_cyclic, cyclic_refusals)
{
    run r;
    sr_make_opt(&r, O_SGD_M);
    tg_lr_scheduler *s = NULL;
    tg_cyclic_opts o = cy(4, 0, TG_CYCLIC_TRIANGULAR);
    REFUSED(tg_cyclic_lr_new(NULL, r.opt, ONE(0.01), ONE(0.1), &o), "out must not be NULL");
    REFUSED(tg_cyclic_lr_new(&s, NULL, ONE(0.01), ONE(0.1), &o), "opt must not be NULL");
    REFUSED(tg_cyclic_lr_new(&s, r.opt, 0, NULL, ONE(0.1), &o), "n_base_lr=0 must be 1");
    REFUSED(tg_cyclic_lr_new(&s, r.opt, ONE(0.01), 2, NULL, &o), "max_lr must not be NULL");
    REFUSED(tg_cyclic_lr_new(&s, r.opt, ONE(-0.01), ONE(0.1), &o), "base_lr[0]=-0.01 must be");
    tg_cyclic_opts b = o;
    b.step_size_up = 0;
    REFUSED(tg_cyclic_lr_new(&s, r.opt, ONE(0.01), ONE(0.1), &b), "step_size_up=0 must be >= 1");
    b = o;
    b.step_size_down = -1;
    REFUSED(tg_cyclic_lr_new(&s, r.opt, ONE(0.01), ONE(0.1), &b), "step_size_down=-1 must be");
    b = o;
    b.step_size_up = INT64_MAX;
    REFUSED(tg_cyclic_lr_new(&s, r.opt, ONE(0.01), ONE(0.1), &b), "at most 2^53");
    b = o;
    b.mode = (tg_cyclic_mode)-1;
    REFUSED(tg_cyclic_lr_new(&s, r.opt, ONE(0.01), ONE(0.1), &b), "mode=-1 is invalid");
    b = o;
    b.gamma = 0;
    REFUSED(tg_cyclic_lr_new(&s, r.opt, ONE(0.01), ONE(0.1), &b), "gamma=0 must be finite");
    b = o;
    b.base_momentum = INFINITY;
    REFUSED(tg_cyclic_lr_new(&s, r.opt, ONE(0.01), ONE(0.1), &b), "base_momentum=inf must be");
    cr_assert(s == NULL);
    expect_untouched(&r, 0.9);
    sr_run_free(&r);

    sr_make_opt(&r, O_ADAMW);   /* torch: 'momentum' not in optimizer.defaults */
    REFUSED(tg_cyclic_lr_new(&s, r.opt, ONE(0.01), ONE(0.1), &o),
            "optimizer must support momentum with cycle_momentum");
    expect_untouched(&r, 0.5);
    sr_run_free(&r);
}

Test(lr_scheduler_cyclic, swa_refusals)
{
    run r;
    sr_make_opt(&r, O_SGD);
    tg_lr_scheduler *s = NULL;
    REFUSED(tg_swa_lr_new(NULL, r.opt, ONE(0.1), 5, TG_ANNEAL_COS), "out must not be NULL");
    REFUSED(tg_swa_lr_new(&s, NULL, ONE(0.1), 5, TG_ANNEAL_COS), "opt must not be NULL");
    REFUSED(tg_swa_lr_new(&s, r.opt, 3, (double[]){1, 2, 3}, 5, TG_ANNEAL_COS),
            "n_swa_lr=3 must be 1 or");
    REFUSED(tg_swa_lr_new(&s, r.opt, 1, NULL, 5, TG_ANNEAL_COS), "swa_lr must not be NULL");
    REFUSED(tg_swa_lr_new(&s, r.opt, PAIR(0.1, INFINITY), 5, TG_ANNEAL_COS),
            "swa_lr[1]=inf must be finite");
    REFUSED(tg_swa_lr_new(&s, r.opt, ONE(0.1), -1, TG_ANNEAL_COS),
            "anneal_epochs=-1 must be >= 0");
    REFUSED(tg_swa_lr_new(&s, r.opt, ONE(0.1), 5, (tg_anneal_strategy)2),
            "anneal_strategy=2 must be");
    cr_assert(s == NULL);
    expect_untouched(&r, 0.0);
    sr_run_free(&r);
}

Test(lr_scheduler_cyclic, plateau_refusals)
{
    run r;
    sr_make_opt(&r, O_SGD);
    tg_lr_scheduler *s = NULL;
    REFUSED(tg_reduce_lr_on_plateau_new(NULL, r.opt, NULL, 0, NULL), "out must not be NULL");
    REFUSED(tg_reduce_lr_on_plateau_new(&s, NULL, NULL, 0, NULL), "opt must not be NULL");
    tg_plateau_opts o = TG_PLATEAU_OPTS_INIT;
    o.factor = 1.0;
    REFUSED(tg_reduce_lr_on_plateau_new(&s, r.opt, &o, 0, NULL), "factor=1 should be < 1.0");
    o.factor = -0.1;
    REFUSED(tg_reduce_lr_on_plateau_new(&s, r.opt, &o, 0, NULL), "factor=-0.1 must be >= 0");
    o = (tg_plateau_opts)TG_PLATEAU_OPTS_INIT;
    o.patience = -1;
    REFUSED(tg_reduce_lr_on_plateau_new(&s, r.opt, &o, 0, NULL), "patience=-1 must be >= 0");
    o = (tg_plateau_opts)TG_PLATEAU_OPTS_INIT;
    o.cooldown = -3;
    REFUSED(tg_reduce_lr_on_plateau_new(&s, r.opt, &o, 0, NULL), "cooldown=-3 must be >= 0");
    o = (tg_plateau_opts)TG_PLATEAU_OPTS_INIT;
    o.threshold = NAN;
    REFUSED(tg_reduce_lr_on_plateau_new(&s, r.opt, &o, 0, NULL), "threshold=nan must be");
    o = (tg_plateau_opts)TG_PLATEAU_OPTS_INIT;
    o.eps = -1;
    REFUSED(tg_reduce_lr_on_plateau_new(&s, r.opt, &o, 0, NULL), "eps=-1 must be finite");
    REFUSED(tg_reduce_lr_on_plateau_new(&s, r.opt, NULL, 2, NULL),
            "min_lr must not be NULL when n_min_lr=2");
    REFUSED(tg_reduce_lr_on_plateau_new(&s, r.opt, NULL, 3, (double[]){0, 0, 0}),
            "n_min_lr=3 must be 1 or");
    REFUSED(tg_reduce_lr_on_plateau_new(&s, r.opt, NULL, ONE(-1e-3)), "min_lr[0]=-0.001");
    cr_assert(s == NULL);

    REFUSED(tg_reduce_lr_on_plateau_step(NULL, 1.0), "s must not be NULL");
    REFUSED(tg_reduce_lr_on_plateau_get(NULL, NULL, NULL, NULL), "s must not be NULL");
    tg_lr_scheduler *step = NULL;
    OK(tg_step_lr_new(&step, r.opt, 2, 0.5));
    REFUSED(tg_reduce_lr_on_plateau_step(step, 1.0), "s is a step_lr, not a reduce_lr_on_plateau");
    REFUSED(tg_reduce_lr_on_plateau_get(step, NULL, NULL, NULL), "not a reduce_lr_on_plateau");

    o = (tg_plateau_opts)TG_PLATEAU_OPTS_INIT;
    o.patience = 0;
    OK(tg_reduce_lr_on_plateau_new(&s, r.opt, &o, 0, NULL));
    cr_assert(tg_lr_scheduler_get_last_lr(s) == 0.1 && tg_lr_scheduler_last_epoch(s) == 0);
    REFUSED(tg_lr_scheduler_step(s), "steps with a metric (tg_reduce_lr_on_plateau_step)");
    tg_lr_scheduler *seq = NULL;
    REFUSED(tg_sequential_lr_new(&seq, r.opt, 2, (tg_lr_scheduler *[]){step, s},
                                 (int64_t[]){3}),
            "schedulers[1] is a reduce_lr_on_plateau, which steps with a metric");
    tg_lr_scheduler *chain = NULL;
    REFUSED(tg_chained_scheduler_new(&chain, 2, (tg_lr_scheduler *[]){step, s}),
            "chained_scheduler: schedulers[1] is a reduce_lr_on_plateau, which steps with a "
            "metric; a chained_scheduler steps it without one");
    cr_assert(chain == NULL);
    /* the nan is a bad step: patience 0 reduces at once (torch's is_better
     * is false for nan) */
    OK(tg_reduce_lr_on_plateau_step(s, 1.0));
    OK(tg_reduce_lr_on_plateau_step(s, NAN));
    cr_assert(tg_optimizer_get_group_lr(r.opt, 0) == 0.1 * 0.1);
    double best;
    int64_t bad, cool;
    OK(tg_reduce_lr_on_plateau_get(s, &best, &bad, &cool));
    cr_assert(best == 1.0 && bad == 0 && cool == 0);
    OK(tg_reduce_lr_on_plateau_get(s, NULL, NULL, NULL));
    tg_lr_scheduler_free(s);
    tg_lr_scheduler_free(step);
    sr_run_free(&r);
}

/* A SequentialLR refuses two OneCycleLRs, which torch's make share each
 * group's max_lr, initial and min lr; one of them, listed twice, is fine.
 * A ChainedScheduler refuses the two as well. */
Test(lr_scheduler_cyclic, sequential_refuses_two_one_cycles)
{
    run r;
    sr_make_opt(&r, O_SGD_M);
    tg_one_cycle_opts o = oc(10);
    OK(tg_one_cycle_lr_new(&r.parts[0], r.opt, ONE(0.1), &o));
    OK(tg_one_cycle_lr_new(&r.parts[1], r.opt, ONE(0.2), &o));
    REFUSED(tg_sequential_lr_new(&r.top, r.opt, 2, r.parts, (int64_t[]){5}),
            "schedulers[0] and schedulers[1] are both one_cycle_lr");
    OK(tg_sequential_lr_new(&r.top, r.opt, 2, (tg_lr_scheduler *[]){r.parts[0], r.parts[0]},
                            (int64_t[]){5}));
    /* a ChainedScheduler too (it steps both on the same groups) */
    tg_lr_scheduler *chain = NULL;
    REFUSED(tg_chained_scheduler_new(&chain, 2, r.parts),
            "chained_scheduler: schedulers[0] and schedulers[1] are both one_cycle_lr");
    cr_assert(chain == NULL);
    sr_run_free(&r);
}

/* A param group added after the scheduler was made: torch raises a
 * KeyError for OneCycleLR and SWALR (no max_lr, swa_lr) and for
 * ReduceLROnPlateau when it reduces (no min_lr); CyclicLR zips over its
 * base lrs and leaves the group alone. */
Test(lr_scheduler_cyclic, param_group_added_later)
{
    const char *names[] = {"oc_cos", "swa_cos", "cy_triangular", "plateau_max_rel"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const tcase *c = find(names[i]);
        run r;
        sr_run_make(&r, c);
        OK(step(&r, c, 1));
        tg_tensor *x = sr_param();
        if (c->o == O_SGD_M || c->o == O_SGD) {
            tg_sgd_opts so = TG_SGD_OPTS_INIT;
            so.lr = 0.5;
            so.momentum = 0.25;
            OK(tg_sgd_add_param_group(r.opt, 1, &x, &so));
        }
        if (is_plateau(c)) {
            OK(step(&r, c, 2));   /* an improvement: no reduction, the group kept */
            cr_assert(tg_lr_scheduler_get_group_last_lr(r.top, 2) == 0.5);
            REFUSED(tg_reduce_lr_on_plateau_step(r.top, -100.0), "param group 2 was added");
        } else if (strncmp(c->name, "cy", 2) == 0) {
            OK(step(&r, c, 2));
            expect_row(&r, c, 2, "");
            cr_assert(tg_optimizer_get_group_lr(r.opt, 2) == 0.5);
            cr_assert(tg_optimizer_get_group_momentum(r.opt, 2) == 0.25);
            cr_assert(tg_lr_scheduler_get_group_last_lr(r.top, 2) == 0.5);
        } else {
            REFUSED(step(&r, c, 2), "param group 2 was added after the");
        }
        expect_row(&r, c, is_plateau(c) || c->name[0] == 'c' ? 2 : 1, " with a group added");
        tg_tensor_release(x);
        sr_run_free(&r);
    }
}

/* ---- the optimizer's momentum ------------------------------------------------------- */

Test(lr_scheduler_cyclic, optimizer_group_momentum)
{
    const okind kinds[] = {O_SGD_M, O_ADAM, O_ADAMW, O_RMS5};
    const double want[] = {0.9, 0.9, 0.5, 0.5};
    for (int i = 0; i < 4; i++) {
        run r;
        sr_make_opt(&r, kinds[i]);
        cr_assert(tg_optimizer_get_group_momentum(r.opt, 1) == want[i]);
        OK(tg_optimizer_set_group_momentum(r.opt, 1, 0.25));
        cr_assert(tg_optimizer_get_group_momentum(r.opt, 1) == 0.25);
        cr_assert(tg_optimizer_get_group_momentum(r.opt, 0) == want[i]);
        REFUSED(tg_optimizer_set_group_momentum(r.opt, 2, 0.5), "group=2 must be in [0, 2)");
        REFUSED(tg_optimizer_set_group_momentum(r.opt, -1, 0.5), "group=-1 must be in [0, 2)");
        REFUSED(tg_optimizer_set_group_momentum(r.opt, 0, NAN), "momentum=nan must be finite");
        REFUSED(tg_optimizer_set_group_momentum(r.opt, 0, -0.5), "=-0.5 must be");
        if (kinds[i] == O_ADAM || kinds[i] == O_ADAMW)
            REFUSED(tg_optimizer_set_group_momentum(r.opt, 0, 1.0), "beta1=1 must be in [0, 1)");
        cr_assert(tg_optimizer_get_group_momentum(r.opt, 0) == want[i]);
        cr_assert(isnan(tg_optimizer_get_group_momentum(r.opt, 2)));
        sr_run_free(&r);
    }
    REFUSED(tg_optimizer_set_group_momentum(NULL, 0, 0.5), "opt must not be NULL");
    cr_assert(isnan(tg_optimizer_get_group_momentum(NULL, 0)));

    /* RMSprop keeps a momentum buffer only when momentum > 0 at a
     * parameter's first step */
    run r;
    sr_make_opt(&r, O_RMS5);
    tg_tensor *g = NULL;
    OK(tg_tensor_full(&g, TG_F64, 1, (int64_t[]){1}, 1.0));
    OK(tg_tensor_set_grad(r.p, g));
    OK(tg_optimizer_step(r.opt));
    REFUSED(tg_optimizer_set_group_momentum(r.opt, 0, 0.0),
            "rmsprop param group 0 has state made with momentum > 0");
    OK(tg_optimizer_set_group_momentum(r.opt, 0, 0.7));
    OK(tg_optimizer_set_group_momentum(r.opt, 1, 0.0));   /* no state yet */
    sr_run_free(&r);
}

/* ---- state refusals ----------------------------------------------------------------- */

/* s's state under "o", with the entry `name` replaced by a 0-d tensor of
 * dtype dt holding v, or left out when dt is TG_U8 (a marker). */
static tg_st_file *state_with(const tg_lr_scheduler *s, const char *name, tg_dtype dt, double v)
{
    tg_st_file *f = NULL, *g = NULL;
    OK(tg_st_new(&f));
    OK(tg_lr_scheduler_state_save(s, f, "o"));
    OK(tg_st_new(&g));
    for (int i = 0; i < tg_st_meta_count(f); i++) {
        const char *k, *val;
        tg_st_meta_at(f, i, &k, &val);
        OK(tg_st_meta_set(g, k, val));
    }
    for (int i = 0; i < tg_st_count(f); i++) {
        const char *k;
        tg_tensor *t;
        tg_st_at(f, i, &k, &t);
        if (strcmp(k, name) != 0) OK(tg_st_set(g, k, t));
    }
    if (dt != TG_U8) {
        tg_tensor *t = NULL;
        OK(tg_tensor_scalar(&t, dt, v));
        OK(tg_st_set(g, name, t));
        tg_tensor_release(t);
    }
    tg_st_free(f);
    return g;
}

/* Bad plateau and SWALR states are refused with everything unchanged; a
 * good one restores the counters (best may be an infinity). */
Test(lr_scheduler_cyclic, state_refusals_change_nothing)
{
    const tcase *c = find("plateau_min_abs_cooldown");
    run r;
    sr_run_make(&r, c);
    for (int k = 1; k <= 6; k++) OK(step(&r, c, k));
    const struct {
        const char *key;
        tg_dtype dt;
        double v;
        int status;
        const char *words;
    } bad[] = {
        {"o.best", TG_F64, NAN, TG_EINVAL, "'o.best' must not be NaN"},
        {"o.best", TG_U8, 0, TG_ENOTFOUND, "missing key 'o.best'"},
        {"o.num_bad_epochs", TG_I64, -1, TG_EINVAL,
         "'o.num_bad_epochs'=-1 must be an integer in [0, 2^53]"},
        {"o.cooldown_counter", TG_F64, 0.5, TG_EINVAL, "'o.cooldown_counter'=0.5 must be"},
        {"o.cooldown_counter", TG_U8, 0, TG_ENOTFOUND, "missing key 'o.cooldown_counter'"},
    };
    double best0;
    int64_t bad0, cool0;
    OK(tg_reduce_lr_on_plateau_get(r.top, &best0, &bad0, &cool0));
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tg_st_file *f = state_with(r.top, bad[i].key, bad[i].dt, bad[i].v);
        cr_assert(eq(int, tg_lr_scheduler_state_load(r.top, f, "o"), bad[i].status), "%s",
                  bad[i].key);
        cr_assert(strstr(tg_error_message(), bad[i].words) != NULL, "%s", tg_error_message());
        tg_st_free(f);
        expect_row(&r, c, 6, " after a refused load");
    }
    tg_st_file *f = state_with(r.top, "o.best", TG_F64, INFINITY);
    OK(tg_lr_scheduler_state_load(r.top, f, "o"));
    tg_st_free(f);
    double best;
    int64_t nbad, cool;
    OK(tg_reduce_lr_on_plateau_get(r.top, &best, &nbad, &cool));
    cr_assert(best == INFINITY && nbad == bad0 && cool == cool0);
    sr_run_free(&r);

    c = find("swa_cos");
    sr_run_make(&r, c);
    for (int k = 1; k <= 3; k++) OK(step(&r, c, k));
    f = state_with(r.top, "o.step_count", TG_U8, 0);
    cr_assert(eq(int, tg_lr_scheduler_state_load(r.top, f, "o"), TG_ENOTFOUND));
    tg_st_free(f);
    f = state_with(r.top, "o.step_count", TG_F64, 2.5);
    REFUSED(tg_lr_scheduler_state_load(r.top, f, "o"), "'o.step_count'=2.5 must be an integer");
    tg_st_free(f);
    f = state_with(r.top, "o.last_epoch", TG_I64, 1);   /* the kind is checked first */
    tg_st_meta_set(f, "o.kind", "one_cycle_lr");
    REFUSED(tg_lr_scheduler_state_load(r.top, f, "o"),
            "is 'one_cycle_lr'; this scheduler is 'swa_lr'");
    tg_st_free(f);
    for (int k = 4; k <= 6; k++) {
        OK(step(&r, c, k));
        expect_row(&r, c, k, " after refused loads");
    }
    sr_run_free(&r);
}
