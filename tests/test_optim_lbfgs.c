/* tests/test_optim_lbfgs.c - L-BFGS against torch.optim.LBFGS on a small
 * regression (tests/golden/optim/lbfgs*, scripts/make_optim_goldens.py):
 * the parameters, the loss each step returns and torch's func_evals and
 * n_iter after each of three steps, with a fixed step and a short history,
 * with the strong Wolfe line search (at lr 1 and, reaching its zoom's
 * insufficient-progress rule, 50), and with torch's defaults; then
 * tg_optimizer_step_closure for the other optimizers, closures that fail,
 * state saved and resumed bit for bit, and the options refused. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/autograd.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"
#include "tapegrad/optim.h"
#include "tapegrad/safetensors.h"

/* call fails with status and a message holding words */
#define REFUSED(call, status, words) th_expect_status(call, status, words)

/* The regression of the goldens: loss = mse(tanh(X W) v, y). */
typedef struct problem {
    tg_optimizer *opt;
    tg_tensor *X, *y, *W, *v;
    int calls, fail_at;   /* the closure fails at call fail_at (0: never) */
} problem;

static int closure(void *user, double *loss)
{
    problem *p = user;
    if (++p->calls == p->fail_at) return TG_EINVAL;
    tg_optimizer_zero_grad(p->opt);
    tg_tensor *h = NULL, *a = NULL, *out = NULL, *l = NULL;
    int rc = tg_matmul(&h, p->X, p->W);
    if (rc >= 0) rc = tg_tanh(&a, h);
    if (rc >= 0) rc = tg_matmul(&out, a, p->v);
    if (rc >= 0) rc = tg_mse_loss(&l, out, p->y, TG_REDUCTION_MEAN);
    if (rc >= 0) rc = tg_backward(l, NULL, NULL);
    if (rc >= 0) *loss = tg_tensor_item(l);
    tg_tensor_release(h);
    tg_tensor_release(a);
    tg_tensor_release(out);
    tg_tensor_release(l);
    return rc;
}

static double meta(const tg_st_file *f, const char *k)
{
    const char *v = tg_st_meta_get(f, k);
    cr_assert(v != NULL, "metadata %s", k);
    return strtod(v, NULL);
}

static tg_lbfgs_opts opts_of(const tg_st_file *f)
{
    return (tg_lbfgs_opts){.lr = meta(f, "lr"), .max_iter = (int)meta(f, "max_iter"),
                           .max_eval = (int)meta(f, "max_eval"),
                           .tolerance_grad = meta(f, "tolerance_grad"),
                           .tolerance_change = meta(f, "tolerance_change"),
                           .history_size = (int)meta(f, "history_size"),
                           .strong_wolfe = meta(f, "line_search_fn") != 0};
}

static tg_tensor *copy_of(const tg_st_file *f, const char *k, bool grad)
{
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_clone(&t, tg_st_get(f, k)), TG_OK), "%s", k);
    if (grad) tg_tensor_set_requires_grad(t, true);
    return t;
}

/* The problem of f, with an L-BFGS of its options (or opts). */
static problem setup(const tg_st_file *f, const tg_lbfgs_opts *opts)
{
    problem p = {.X = copy_of(f, "X", false), .y = copy_of(f, "y", false),
                 .W = copy_of(f, "W.init", true), .v = copy_of(f, "v.init", true)};
    const tg_lbfgs_opts o = opts ? *opts : opts_of(f);
    cr_assert(eq(int, tg_lbfgs_new(&p.opt, 2, (tg_tensor *[]){p.W, p.v}, &o), TG_OK), "%s",
              tg_error_message());
    return p;
}

static void teardown(problem *p)
{
    tg_optimizer_free(p->opt);
    tg_tensor_release(p->X);
    tg_tensor_release(p->y);
    tg_tensor_release(p->W);
    tg_tensor_release(p->v);
}

/* Every element of t within tol (relative, at least absolute) of want. */
static void expect_near(const tg_tensor *t, const tg_tensor *want, double tol, const char *what)
{
    cr_assert(eq(i64, tg_tensor_numel(t), tg_tensor_numel(want)));
    for (int64_t i = 0; i < tg_tensor_numel(t); i++) {
        double x, y;
        tg_tensor_get_flat(t, i, &x);
        tg_tensor_get_flat(want, i, &y);
        cr_assert(fabs(x - y) <= tol * fmax(1, fabs(y)), "%s[%lld]: %.17g vs %.17g", what,
                  (long long)i, x, y);
    }
}

/* A 0-d entry of the optimizer's saved state. */
static double saved(const tg_optimizer *o, const char *k)
{
    tg_st_file *s = NULL;
    cr_assert(eq(int, tg_st_new(&s), TG_OK));
    cr_assert(eq(int, tg_optimizer_state_save(o, s, "o"), TG_OK), "%s", tg_error_message());
    const tg_tensor *t = tg_st_get(s, k);
    cr_assert(t != NULL, "%s", k);
    const double v = tg_tensor_item(t);
    tg_st_free(s);
    return v;
}

static void check_case(const char *name, const char *dt, double tol)
{
    tg_st_file *f = th_golden_load("optim/%s_%s.safetensors", name, dt);
    problem p = setup(f, NULL);
    for (int k = 0; k < 3; k++) {
        char kw[32], kv[32], kl[32], ke[32], ki[32];
        snprintf(kw, sizeof kw, "W.step%d", k);
        snprintf(kv, sizeof kv, "v.step%d", k);
        snprintf(kl, sizeof kl, "loss%d", k);
        snprintf(ke, sizeof ke, "func_evals%d", k);
        snprintf(ki, sizeof ki, "n_iter%d", k);
        double loss = NAN;
        cr_assert(eq(int, tg_optimizer_step_closure(p.opt, closure, &p, &loss), TG_OK), "%s",
                  tg_error_message());
        cr_assert(fabs(loss - tg_tensor_item(tg_st_get(f, kl))) <=
                      tol * fmax(1, fabs(loss)), "%s %s step %d loss %.17g", name, dt, k, loss);
        char what[96];
        snprintf(what, sizeof what, "%s %s %s", name, dt, kw);
        expect_near(p.W, tg_st_get(f, kw), tol, what);
        snprintf(what, sizeof what, "%s %s %s", name, dt, kv);
        expect_near(p.v, tg_st_get(f, kv), tol, what);
        cr_assert(eq(dbl, saved(p.opt, "o.0.func_evals"), tg_tensor_item(tg_st_get(f, ke))),
                  "%s %s step %d func_evals", name, dt, k);
        cr_assert(eq(dbl, saved(p.opt, "o.0.n_iter"), tg_tensor_item(tg_st_get(f, ki))),
                  "%s %s step %d n_iter", name, dt, k);
    }
    cr_assert(eq(int, p.calls, (int)saved(p.opt, "o.0.func_evals")));
    teardown(&p);
    tg_st_free(f);
}

/* f64 to rounding (torch's dot products sum in another order), f32 to f32
 * rounding amplified by the iterations (torch works in f32, tapegrad in
 * double: over the default's 20 iterations a step the two take apart, so
 * its f32 run is left out); the evaluation and iteration counts exactly. */
Test(optim_lbfgs, matches_pytorch)
{
    const char *names[4] = {"lbfgs", "lbfgs_wolfe", "lbfgs_wolfe_far", "lbfgs_default"};
    for (int c = 0; c < 4; c++) {
        check_case(names[c], "f64", 1e-9);
        if (c < 2) check_case(names[c], "f32", 2e-4);
    }
}

/* Saved after a step and loaded into a new L-BFGS made with other options
 * (restored from the file), the next two steps give the uninterrupted
 * run's bits; a file without L-BFGS state loads as "no state yet". */
Test(optim_lbfgs, state_save_load_resumes_bit_identically)
{
    tg_st_file *f = th_golden_load("optim/lbfgs_wolfe_f64.safetensors");
    problem a = setup(f, NULL), b = setup(f, NULL);
    for (int k = 0; k < 3; k++)
        cr_assert(eq(int, tg_optimizer_step_closure(a.opt, closure, &a, NULL), TG_OK));
    cr_assert(eq(int, tg_optimizer_step_closure(b.opt, closure, &b, NULL), TG_OK));
    tg_st_file *s = NULL;
    cr_assert(eq(int, tg_st_new(&s), TG_OK));
    cr_assert(eq(int, tg_optimizer_state_save(b.opt, s, "opt"), TG_OK), "%s", tg_error_message());
    tg_optimizer_free(b.opt);
    tg_lbfgs_opts other = TG_LBFGS_OPTS_INIT;
    other.history_size = 2;
    other.lr = 0.5;
    cr_assert(eq(int, tg_lbfgs_new(&b.opt, 2, (tg_tensor *[]){b.W, b.v}, &other), TG_OK));
    cr_assert(eq(int, tg_optimizer_state_load(b.opt, s, "opt"), TG_OK), "%s", tg_error_message());
    for (int k = 1; k < 3; k++)
        cr_assert(eq(int, tg_optimizer_step_closure(b.opt, closure, &b, NULL), TG_OK));
    const tg_tensor *pa[2] = {a.W, a.v}, *pb[2] = {b.W, b.v};
    for (int j = 0; j < 2; j++)
        cr_assert(memcmp(tg_tensor_cdata(pa[j]), tg_tensor_cdata(pb[j]),
                         (size_t)tg_tensor_numel(pa[j]) * sizeof(double)) == 0, "param %d", j);
    /* a history longer than the file's history_size is refused, nothing changed */
    tg_st_file *bad = th_st_copy_without(s, "opt.history_size");
    tg_tensor *hs = NULL;
    cr_assert(eq(int, tg_tensor_scalar(&hs, TG_F64, 1.0), TG_OK));
    cr_assert(eq(int, tg_st_set(bad, "opt.history_size", hs), TG_OK));
    REFUSED(tg_optimizer_state_load(b.opt, bad, "opt"), TG_EINVAL, "history_size is 1");
    tg_tensor_release(hs);
    tg_st_free(bad);
    bad = th_st_copy_without(s, "opt.0.d");
    REFUSED(tg_optimizer_state_load(b.opt, bad, "opt"), TG_ENOTFOUND, "'opt.0.d'");
    tg_st_free(bad);
    tg_st_free(s);
    teardown(&a);
    teardown(&b);
    tg_st_free(f);
}

/* A failing closure's status ends the step (the first call, or one in the
 * middle of the iterations); L-BFGS refuses tg_optimizer_step and param
 * groups; another optimizer's step_closure is the closure, then its step. */
Test(optim_lbfgs, closures_steps_and_groups)
{
    tg_st_file *f = th_golden_load("optim/lbfgs_f64.safetensors");
    problem p = setup(f, NULL);
    p.fail_at = 1;
    cr_assert(eq(int, tg_optimizer_step_closure(p.opt, closure, &p, NULL), TG_EINVAL));
    p.fail_at = 4;
    cr_assert(eq(int, tg_optimizer_step_closure(p.opt, closure, &p, NULL), TG_EINVAL));
    cr_assert(eq(int, p.calls, 4));
    REFUSED(tg_optimizer_step(p.opt), TG_EINVAL, "tg_optimizer_step_closure");
    REFUSED(tg_optimizer_step_closure(p.opt, NULL, &p, NULL), TG_EINVAL, "closure must not");
    REFUSED(tg_optimizer_step_closure(NULL, closure, &p, NULL), TG_EINVAL, "opt and closure");
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    REFUSED(tg_sgd_add_param_group(p.opt, 1, &p.X, &so), TG_EINVAL, "one param group");
    cr_assert(isnan(tg_optimizer_get_group_momentum(p.opt, 0)));
    teardown(&p);

    /* Adam through a closure = the closure, then tg_optimizer_step */
    problem a = setup(f, NULL), b = setup(f, NULL);
    tg_optimizer_free(a.opt);
    tg_optimizer_free(b.opt);
    tg_adam_opts ao = TG_ADAM_OPTS_INIT;
    ao.lr = 0.1;
    cr_assert(eq(int, tg_adam_new(&a.opt, 2, (tg_tensor *[]){a.W, a.v}, &ao), TG_OK));
    cr_assert(eq(int, tg_adam_new(&b.opt, 2, (tg_tensor *[]){b.W, b.v}, &ao), TG_OK));
    for (int k = 0; k < 3; k++) {
        double la = NAN, lb = NAN;
        cr_assert(eq(int, tg_optimizer_step_closure(a.opt, closure, &a, &la), TG_OK));
        cr_assert(eq(int, closure(&b, &lb), TG_OK));
        cr_assert(eq(int, tg_optimizer_step(b.opt), TG_OK));
        cr_assert(eq(dbl, la, lb));
    }
    cr_assert(memcmp(tg_tensor_cdata(a.W), tg_tensor_cdata(b.W), 12 * sizeof(double)) == 0);
    teardown(&a);
    teardown(&b);
    tg_st_free(f);
}

Test(optim_lbfgs, bad_options_are_refused)
{
    tg_tensor *w = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&w, TG_F64, 1, (int64_t[]){3}), TG_OK));
    tg_optimizer *o = NULL;
    const char *words[6] = {"lbfgs: max_iter=0 must be an integer in [1,",
                            "lbfgs: history_size=0 must be", "lbfgs: max_eval=-1 must be",
                            "lbfgs: tolerance_grad=-1 must be >= 0",
                            "lbfgs: tolerance_change=nan must be >= 0",
                            "lbfgs: lr=inf must be finite"};
    for (int c = 0; c < 6; c++) {
        tg_lbfgs_opts b = TG_LBFGS_OPTS_INIT;
        if (c == 0) b.max_iter = 0;
        else if (c == 1) b.history_size = 0;
        else if (c == 2) b.max_eval = -1;
        else if (c == 3) b.tolerance_grad = -1;
        else if (c == 4) b.tolerance_change = NAN;
        else b.lr = INFINITY;
        REFUSED(tg_lbfgs_new(&o, 1, &w, &b), TG_EINVAL, words[c]);
    }
    REFUSED(tg_lbfgs_new(&o, 1, &w, NULL), TG_EINVAL, "use TG_LBFGS_OPTS_INIT");
    cr_assert(o == NULL);
    tg_lbfgs_opts d = TG_LBFGS_OPTS_INIT;   /* max_eval 0: torch's max_iter * 5 // 4 */
    d.max_iter = 7;
    cr_assert(eq(int, tg_lbfgs_new(&o, 1, &w, &d), TG_OK));
    tg_st_file *s = NULL;
    cr_assert(eq(int, tg_st_new(&s), TG_OK));
    cr_assert(eq(int, tg_optimizer_state_save(o, s, "o"), TG_OK));
    cr_assert(eq(dbl, tg_tensor_item(tg_st_get(s, "o.max_eval")), 8.0));
    cr_assert(eq(str, (char *)tg_st_meta_get(s, "o.kind"), "lbfgs"));
    tg_st_free(s);
    tg_optimizer_free(o);
    tg_tensor_release(w);
}
