/* src/nn/lr_scheduler_new.c - the learning-rate schedulers' constructors:
 * their argument checks, each group's base lr and the initial step, as
 * torch's _LRScheduler.__init__ and SequentialLR.__init__ do. */
#include <math.h>
#include <string.h>

#include "lr_scheduler_internal.h"

int tg__sched_check_common(const char *op, tg_lr_scheduler **out, const tg_optimizer *opt)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(opt != NULL, TG_EINVAL, "%s: opt must not be NULL", op);
    return TG_OK;
}

static int check_factor(const char *op, const char *name, double v)
{
    TG_CHECK(v >= 0 && isfinite(v), TG_EINVAL, "%s: %s=%g must be finite and >= 0", op, name, v);
    return TG_OK;
}

/* base_lrs, and last_lrs and next, of s for G groups. */
static int alloc_lrs(tg_lr_scheduler *s, int G)
{
    double *b = tg__calloc((size_t)G, sizeof *b), *l = tg__calloc((size_t)G * 2, sizeof *l);
    if (!b || !l) {
        free(b);
        free(l);
        return TG_ENOMEM;
    }
    s->n_groups = s->n_last = s->cap = G;
    s->base_lrs = b;
    s->last_lrs = l;
    s->next = l + G;
    return TG_OK;
}

/* A new scheduler like proto (kind and options set; its arrays are taken
 * over on success) on opt, after torch's _LRScheduler.__init__: each
 * group's base_lr from its initial lr, recorded by the first scheduler, then
 * the initial step from last_epoch -1 to 0. */
static int attach(tg_lr_scheduler **out, tg_optimizer *opt, tg_lr_scheduler proto)
{
    proto.opt = opt;
    proto.last_epoch = -1;
    TG_TRY(alloc_lrs(&proto, opt->n_groups));
    for (int g = 0; g < opt->n_groups; g++) {
        const tg__opt_group *gr = &opt->groups[g];
        proto.base_lrs[g] = isnan(gr->initial_lr) ? gr->h.lr : gr->initial_lr;
    }
    tg__sched_current_lrs(opt, proto.next);
    int rc = tg__sched_next_lrs(&proto, 0, false, proto.next, tg__sched_kind_name(proto.kind));
    tg_lr_scheduler *s = rc < 0 ? NULL : tg__malloc(sizeof *s);
    if (!s) {
        free(proto.base_lrs);
        free(proto.last_lrs);
        return rc < 0 ? rc : TG_ENOMEM;
    }
    *s = proto;
    for (int g = 0; g < opt->n_groups; g++) opt->groups[g].initial_lr = s->base_lrs[g];
    tg__sched_commit(s, 0, s->next);
    *out = s;
    return TG_OK;
}

int tg_step_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, int64_t step_size, double gamma)
{
    TG_TRY(tg__sched_check_common("step_lr", out, opt));
    TG_CHECK(step_size >= 1, TG_EINVAL, "step_lr: step_size=%lld must be >= 1",
             (long long)step_size);
    TG_TRY(check_factor("step_lr", "gamma", gamma));
    return attach(out, opt, (tg_lr_scheduler){.kind = TG__SCHED_STEP,
                                              .u.step = {step_size, gamma}});
}

/* A malloc'd copy of a[0..n) (one element at least), or NULL (ENOMEM). */
static void *copy_array(const void *a, int n, size_t size)
{
    void *c = tg__malloc((size_t)(n > 0 ? n : 1) * size);
    if (c && n > 0) memcpy(c, a, (size_t)n * size);
    return c;
}

int tg_multi_step_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, int n_milestones,
                         const int64_t *milestones, double gamma)
{
    const char *op = "multi_step_lr";
    TG_TRY(tg__sched_check_common(op, out, opt));
    TG_CHECK(n_milestones >= 0, TG_EINVAL, "%s: n_milestones=%d must be >= 0", op, n_milestones);
    TG_CHECK(milestones != NULL || n_milestones == 0, TG_EINVAL,
             "%s: milestones must not be NULL when n_milestones=%d > 0", op, n_milestones);
    TG_TRY(check_factor(op, "gamma", gamma));
    int64_t *ms = copy_array(milestones, n_milestones, sizeof *ms);
    if (!ms) return TG_ENOMEM;
    int rc = attach(out, opt, (tg_lr_scheduler){.kind = TG__SCHED_MULTI_STEP,
                                                .u.multi_step = {n_milestones, ms, gamma}});
    if (rc < 0) free(ms);
    return rc;
}

int tg_exponential_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, double gamma)
{
    TG_TRY(tg__sched_check_common("exponential_lr", out, opt));
    TG_TRY(check_factor("exponential_lr", "gamma", gamma));
    return attach(out, opt, (tg_lr_scheduler){.kind = TG__SCHED_EXPONENTIAL,
                                              .u.exponential = {gamma}});
}

int tg_cosine_annealing_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, int64_t t_max,
                               double eta_min)
{
    const char *op = "cosine_annealing_lr";
    TG_TRY(tg__sched_check_common(op, out, opt));
    TG_CHECK(t_max >= 1, TG_EINVAL, "%s: t_max=%lld must be >= 1", op, (long long)t_max);
    TG_TRY(check_factor(op, "eta_min", eta_min));
    return attach(out, opt, (tg_lr_scheduler){.kind = TG__SCHED_COSINE,
                                              .u.cosine = {t_max, eta_min}});
}

int tg_linear_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, double start_factor,
                     double end_factor, int64_t total_iters)
{
    const char *op = "linear_lr";
    TG_TRY(tg__sched_check_common(op, out, opt));
    TG_CHECK(start_factor > 0 && start_factor <= 1, TG_EINVAL,
             "%s: start_factor=%g must be in (0, 1]", op, start_factor);
    TG_CHECK(end_factor >= 0 && end_factor <= 1, TG_EINVAL,
             "%s: end_factor=%g must be in [0, 1]", op, end_factor);
    TG_CHECK(total_iters >= 1, TG_EINVAL, "%s: total_iters=%lld must be >= 1", op,
             (long long)total_iters);
    return attach(out, opt, (tg_lr_scheduler){
        .kind = TG__SCHED_LINEAR, .u.linear = {start_factor, end_factor, total_iters}});
}

int tg__sched_attach(tg_lr_scheduler **out, tg_optimizer *opt, tg_lr_scheduler proto)
{
    return attach(out, opt, proto);
}

int tg__sched_lambda_new(const char *op, tg_lr_scheduler **out, tg_optimizer *opt,
                         tg__sched_kind kind, int n, const tg_lr_lambda_fn *fns,
                         void *const *users, bool shared)
{
    TG_TRY(tg__sched_check_common(op, out, opt));
    if (shared) {
        TG_CHECK(fns[0] != NULL, TG_EINVAL, "%s: fn must not be NULL", op);
        n = opt->n_groups;
    } else {
        TG_CHECK(n == opt->n_groups, TG_EINVAL, "%s: n_fns=%d must equal the optimizer's "
                 "param group count %d (one fn per group)", op, n, opt->n_groups);
        TG_CHECK(fns != NULL, TG_EINVAL, "%s: fns must not be NULL", op);
        for (int g = 0; g < n; g++)
            TG_CHECK(fns[g] != NULL, TG_EINVAL, "%s: fns[%d] must not be NULL", op, g);
    }
    tg_lr_lambda_fn *f = tg__malloc((size_t)n * sizeof *f);
    void **u = tg__malloc((size_t)n * sizeof *u);
    int rc = f && u ? TG_OK : TG_ENOMEM;
    for (int g = 0; rc == TG_OK && g < n; g++) {
        f[g] = fns[shared ? 0 : g];
        u[g] = users ? users[shared ? 0 : g] : NULL;
    }
    if (rc == TG_OK)
        rc = attach(out, opt, (tg_lr_scheduler){.kind = kind, .u.lambda = {f, u}});
    if (rc < 0) {
        free(f);
        free(u);
    }
    return rc;
}

int tg_lambda_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, tg_lr_lambda_fn fn, void *user)
{
    return tg__sched_lambda_new("lambda_lr", out, opt, TG__SCHED_LAMBDA, 1, &fn, &user, true);
}

int tg_lambda_lr_new_per_group(tg_lr_scheduler **out, tg_optimizer *opt, int n_fns,
                               const tg_lr_lambda_fn *fns, void *const *users)
{
    return tg__sched_lambda_new("lambda_lr_per_group", out, opt, TG__SCHED_LAMBDA, n_fns, fns,
                                users, false);
}

static int check_sequential(tg_lr_scheduler **out, const tg_optimizer *opt, int n,
                            tg_lr_scheduler *const *scheds, const int64_t *milestones)
{
    const char *op = "sequential_lr";
    TG_TRY(tg__sched_check_common(op, out, opt));
    TG_CHECK(n >= 1, TG_EINVAL, "%s: n_schedulers=%d must be >= 1", op, n);
    TG_CHECK(scheds != NULL, TG_EINVAL, "%s: schedulers must not be NULL", op);
    TG_CHECK(milestones != NULL || n == 1, TG_EINVAL,
             "%s: milestones must not be NULL (n_schedulers - 1 = %d of them)", op, n - 1);
    for (int i = 0; i < n; i++) {
        const tg_lr_scheduler *c = scheds[i];
        TG_CHECK(c != NULL, TG_EINVAL, "%s: schedulers[%d] must not be NULL", op, i);
        TG_CHECK(c->opt == opt, TG_EINVAL,
                 "%s: schedulers[%d] is attached to another optimizer; all must be on opt", op,
                 i);
        TG_CHECK(!tg__sched_borrows(c), TG_EINVAL,
                 "%s: schedulers[%d] is a %s; they do not nest", op, i,
                 tg__sched_kind_name(c->kind));
        TG_CHECK(c->n_groups == opt->n_groups, TG_EINVAL,
                 "%s: schedulers[%d] was made for %d param groups; the optimizer has %d", op, i,
                 c->n_groups, opt->n_groups);
    }
    return tg__sched_cyclic_check_sequential(op, scheds, n);
}

/* torch's SequentialLR.__init__: the lr back to the initial lr, every
 * scheduler's last_epoch - 1, then the first one's initial step again (from
 * its last_epoch - 1 back to its last_epoch, at the initial lr; a scheduler
 * listed twice goes back twice, as in torch). */
int tg_sequential_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, int n,
                         tg_lr_scheduler *const *scheds, const int64_t *milestones)
{
    TG_TRY(check_sequential(out, opt, n, scheds, milestones));
    tg_lr_scheduler *first = scheds[0];
    const int G = opt->n_groups;
    int64_t e0 = first->last_epoch + 1;
    for (int i = 0; i < n; i++) e0 -= scheds[i] == first;
    for (int g = 0; g < G; g++) {
        TG_ASSERT(!isnan(opt->groups[g].initial_lr));   /* set by attaching scheds[0] */
        first->next[g] = opt->groups[g].initial_lr;
    }
    TG_TRY(tg__sched_next_lrs(first, e0, false, first->next, "sequential_lr"));
    tg_lr_scheduler *s = tg__calloc(1, sizeof *s);
    tg_lr_scheduler **cs = copy_array(scheds, n, sizeof *cs);
    int64_t *ms = copy_array(milestones, n - 1, sizeof *ms);
    if (!s || !cs || !ms || alloc_lrs(s, G) < 0) {
        free(s);
        free(cs);
        free(ms);
        return TG_ENOMEM;
    }
    s->kind = TG__SCHED_SEQUENTIAL;
    s->opt = opt;
    s->last_epoch = 0;
    s->u.sequential.n = n;
    s->u.sequential.schedulers = cs;
    s->u.sequential.milestones = ms;
    for (int g = 0; g < G; g++) {
        s->base_lrs[g] = opt->groups[g].initial_lr;
        s->last_lrs[g] = first->next[g];
    }
    for (int i = 0; i < n; i++) scheds[i]->last_epoch -= 1;
    tg__sched_commit(first, e0, first->next);
    *out = s;
    return TG_OK;
}
