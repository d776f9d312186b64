/* Tests of the ZeroRedundancyOptimizer's param groups, add_param_group and
 * step with a closure (tapegrad/dist.h): the partition with groups against
 * torch's (tests/golden/zero_partition_groups.txt, written by
 * scripts/make_zero_goldens.py), training under DDP bit for bit as one
 * optimizer with the same groups (SGD with momentum and two learning
 * rates, Adam; a learning-rate scheduler on the groups), a group added
 * half-way, the consolidated state with groups and its reload, and the
 * refusals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_test.h"

enum { GB = 3 };   /* rows per rank per step */

static int make_sgd(tg_optimizer **out, int n, tg_tensor *const *p, const void *o)
{
    return tg_sgd_new(out, n, p, o);
}
static int add_sgd(tg_optimizer *opt, int n, tg_tensor *const *p, const void *o)
{
    return tg_sgd_add_param_group(opt, n, p, o);
}
static int make_adam(tg_optimizer **out, int n, tg_tensor *const *p, const void *o)
{
    return tg_adam_new(out, n, p, o);
}
static int add_adam(tg_optimizer *opt, int n, tg_tensor *const *p, const void *o)
{
    return tg_adam_add_param_group(opt, n, p, o);
}

/* Reads "<ints> :" from s into v (at most cap); the count, s moved on. */
int dist_read_ints(const char **s, int64_t *v, int cap)
{
    int k = 0, used = 0;
    long long x = 0;
    while (k < cap && sscanf(*s, " %lld%n", &x, &used) == 1) v[k++] = x, *s += used;
    const char *colon = strchr(*s, ':');
    *s = colon ? colon + 1 : *s + strlen(*s);
    return k;
}

void zero_partition_with_groups_is_torch_s(void)
{
    char path[1024], line[1024];
    snprintf(path, sizeof path, "%s/tests/golden/zero_partition_groups.txt", TG_SOURCE_ROOT);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f) return;
    int cases = 0;
    while (fgets(line, sizeof line, f)) {
        const char *s = line;
        int64_t head[18], sizes[32], want[32];
        const int nh = dist_read_ints(&s, head, 18);
        const int n = dist_read_ints(&s, sizes, 32), nw = dist_read_ints(&s, want, 32);
        if (nh < 3 || nh != 2 + head[1] || n != nw) continue;
        const int world = (int)head[0], n_groups = (int)head[1];
        int counts[16], got[32];
        for (int g = 0; g < n_groups; g++) counts[g] = (int)head[2 + g];
        OK(tg_zero_partition_groups(got, n_groups, counts, sizes, world));
        for (int i = 0; i < n; i++)
            CHECK(got[i] == want[i], "case %d: parameter %d on rank %d, torch's %lld", cases, i,
                  got[i], (long long)want[i]);
        cases++;
        if (world != tg_dist_size(g_dist)) continue;
        /* the object's, made with the groups and made by adding them */
        tg_tensor *p[32], *q[32];
        for (int i = 0; i < n; i++) {
            OK(tg_tensor_zeros(&p[i], TG_F32, 1, &sizes[i]));
            OK(tg_tensor_zeros(&q[i], TG_F32, 1, &sizes[i]));
        }
        tg_sgd_opts o[16];
        tg_zero_group groups[16];
        for (int g = 0, at = 0; g < n_groups; at += counts[g], g++) {
            o[g] = (tg_sgd_opts)TG_SGD_OPTS_INIT;
            o[g].lr = 0.1 * (g + 1);
            groups[g] = (tg_zero_group){counts[g], p + at, &o[g]};
        }
        tg_zero *z = NULL, *y = NULL;
        OK(tg_zero_new_groups(&z, g_dist, n_groups, groups, make_sgd, add_sgd));
        OK(tg_zero_new(&y, g_dist, counts[0], q, make_sgd, &o[0]));
        for (int g = 1, at = counts[0]; g < n_groups; at += counts[g], g++)
            OK(tg_zero_add_param_group(y, add_sgd, counts[g], q + at, &o[g]));
        for (int i = 0; i < n; i++) {
            CHECK(tg_zero_owner(z, i) == want[i], "case %d: zero_new_groups: parameter %d on "
                  "%d, torch's %lld", cases, i, tg_zero_owner(z, i), (long long)want[i]);
            CHECK(tg_zero_owner(y, i) == want[i], "case %d: add_param_group: parameter %d on "
                  "%d, torch's %lld", cases, i, tg_zero_owner(y, i), (long long)want[i]);
        }
        /* the local optimizers: every group, empty ones too, with its lr */
        for (int k = 0; k < 2; k++) {
            const tg_optimizer *local = tg_zero_local(k ? y : z);
            CHECK(tg_optimizer_param_group_count(local) == n_groups, "case %d: %s: %d local "
                  "groups, torch's %d", cases, k ? "added" : "made",
                  tg_optimizer_param_group_count(local), n_groups);
            for (int g = 0; g < n_groups; g++)
                CHECK(tg_optimizer_get_group_lr(local, g) == o[g].lr, "case %d: local group "
                      "%d has lr %g, want %g", cases, g, tg_optimizer_get_group_lr(local, g),
                      o[g].lr);
        }
        tg_zero_free(z);
        tg_zero_free(y);
        for (int i = 0; i < n; i++) tg_tensor_release(p[i]), tg_tensor_release(q[i]);
    }
    fclose(f);
    CHECK(cases >= 7, "only %d golden cases read", cases);
    CHECK(tg_zero_partition_groups((int[2]){0}, 1, (int[]){-1}, (int64_t[]){1}, 2) == TG_EINVAL,
          "n_params -1");
    CHECK(tg_zero_partition_groups((int[2]){0}, 1, NULL, (int64_t[]){1}, 2) == TG_EINVAL,
          "NULL n_params");
}

/* An MLP under DDP with a ZeRO optimizer over two param groups (weights,
 * biases), and the same MLP with one optimizer over the same groups. */
typedef struct gpair {
    tg_module *m, *ref;
    tg_ddp *ddp;
    tg_zero *zero;
    tg_optimizer *opt;
    tg_tensor **p, **rp;
    tg_tensor *w[3], *b[3], *rw[3], *rb[3];
    int n;
} gpair;

/* With add set, the ZeRO optimizer and the reference start with the
 * weights and the biases come later (gpair_add). */
static int gpair_new(gpair *s, tg_zero_make_fn make, tg_zero_add_fn add, const void *ow,
                     const void *ob, bool later)
{
    memset(s, 0, sizeof *s);
    s->m = dist_mlp(11, DIST_IN, DIST_OUT);
    s->ref = dist_mlp(11, DIST_IN, DIST_OUT);
    int n2 = 0;
    TG_TRY(tg_ddp_new_module(&s->ddp, g_dist, s->m, NULL));
    TG_TRY(tg_module_parameters(s->m, &s->p, &s->n));
    TG_TRY(tg_module_parameters(s->ref, &s->rp, &n2));
    for (int k = 0; k < 3; k++) {   /* Linear's weight, then its bias */
        s->w[k] = s->p[2 * k], s->b[k] = s->p[2 * k + 1];
        s->rw[k] = s->rp[2 * k], s->rb[k] = s->rp[2 * k + 1];
    }
    const tg_zero_group groups[2] = {{3, s->w, ow}, {3, s->b, ob}};
    TG_TRY(tg_zero_new_groups(&s->zero, g_dist, later ? 1 : 2, groups, make, add));
    TG_TRY(make(&s->opt, 3, s->rw, ow));
    return later ? TG_OK : add(s->opt, 3, s->rb, ob);
}

static int gpair_add(gpair *s, tg_zero_add_fn add, const void *ob)
{
    TG_TRY(tg_zero_add_param_group(s->zero, add, 3, s->b, ob));
    return add(s->opt, 3, s->rb, ob);
}

static void gpair_free(gpair *s)
{
    tg_zero_free(s->zero);
    tg_optimizer_free(s->opt);
    tg_ddp_free(s->ddp);
    free(s->p);
    free(s->rp);
    tg_module_release(s->m);
    tg_module_release(s->ref);
}

/* DDP's averaged gradients into both (the reference gets copies). */
static int gpair_grads(gpair *s, int step)
{
    const int rank = tg_dist_rank(g_dist);
    tg_zero_zero_grad(s->zero);
    tg_optimizer_zero_grad(s->opt);
    TG_TRY(tg_ddp_prepare(s->ddp));
    int rc = dist_forward_backward(s->m, step, (int64_t)rank * GB, GB);
    if (rc < 0) tg_dist_abort(g_dist, rc);
    TG_TRY(tg_ddp_finish(s->ddp));
    for (int i = 0; i < s->n; i++) {
        tg_tensor *g = NULL;
        if (!tg_tensor_grad(s->p[i])) continue;
        TG_TRY(tg_tensor_clone(&g, tg_tensor_grad(s->p[i])));
        TG_TRY(tg_tensor_set_grad(s->rp[i], g));
    }
    return TG_OK;
}

static int gpair_step(gpair *s, int step)
{
    TG_TRY(gpair_grads(s, step));
    TG_TRY(tg_zero_step(s->zero));
    return tg_optimizer_step(s->opt);
}

static void same_params(const gpair *s, const char *what)
{
    for (int i = 0; i < s->n; i++)
        CHECK(same_bits(s->p[i], s->rp[i]), "%s: parameter %d differs from one optimizer's",
              what, i);
}

/* Six steps with a StepLR(2, 0.5) on the groups of each (the ZeRO
 * optimizer's through tg_zero_optimizer). */
static void groups_match_one_optimizer(const char *name, tg_zero_make_fn make,
                                       tg_zero_add_fn add, const void *ow, const void *ob)
{
    gpair s;
    tg_lr_scheduler *sz = NULL, *sr = NULL;
    int rc = gpair_new(&s, make, add, ow, ob, false);
    if (rc >= 0) rc = tg_step_lr_new(&sz, tg_zero_optimizer(s.zero), 2, 0.5);
    if (rc >= 0) rc = tg_step_lr_new(&sr, s.opt, 2, 0.5);
    CHECK(rc >= 0, "%s: setup: %s", name, tg_error_message());
    CHECK(tg_optimizer_param_group_count(tg_zero_optimizer(s.zero)) == 2,
          "%s: zero_optimizer has %d groups", name,
          tg_optimizer_param_group_count(tg_zero_optimizer(s.zero)));
    for (int step = 0; rc >= 0 && step < 6; step++) {
        rc = gpair_step(&s, step);
        if (rc >= 0) rc = tg_lr_scheduler_step(sz);
        if (rc >= 0) rc = tg_lr_scheduler_step(sr);
        CHECK(rc >= 0, "%s step %d: %s", name, step, tg_error_message());
    }
    if (rc >= 0) same_params(&s, name);
    tg_lr_scheduler_free(sz);
    tg_lr_scheduler_free(sr);
    gpair_free(&s);
}

void zero_groups_under_ddp_are_bit_identical_to_one_optimizer(void)
{
    tg_sgd_opts sw = TG_SGD_OPTS_INIT, sb = TG_SGD_OPTS_INIT;
    sw.lr = 0.05, sw.momentum = 0.9, sw.weight_decay = 1e-3;
    sb.lr = 0.2, sb.momentum = 0.5;
    tg_adam_opts aw = TG_ADAM_OPTS_INIT, ab = TG_ADAM_OPTS_INIT;
    aw.lr = 1e-2, aw.weight_decay = 0.05;
    ab.lr = 3e-2, ab.beta1 = 0.8, ab.amsgrad = true;
    groups_match_one_optimizer("sgd", make_sgd, add_sgd, &sw, &sb);
    groups_match_one_optimizer("adam", make_adam, add_adam, &aw, &ab);
}

void zero_add_param_group_half_way_matches_one_optimizer(void)
{
    tg_adam_opts aw = TG_ADAM_OPTS_INIT, ab = TG_ADAM_OPTS_INIT;
    aw.lr = 1e-2;
    ab.lr = 5e-2, ab.eps = 1e-6;
    gpair s;
    OK(gpair_new(&s, make_adam, add_adam, &aw, &ab, true));
    for (int step = 0; step < 3; step++) OK(gpair_step(&s, step));
    same_params(&s, "before the add");
    OK(gpair_add(&s, add_adam, &ab));
    CHECK(tg_optimizer_param_group_count(tg_zero_optimizer(s.zero)) == 2, "2 groups");
    /* the owners: as torch partitions both groups */
    int counts[2] = {3, 3}, want[6];
    int64_t numel[6];
    for (int i = 0; i < 6; i++) numel[i] = tg_tensor_numel(i < 3 ? s.w[i] : s.b[i - 3]);
    OK(tg_zero_partition_groups(want, 2, counts, numel, tg_dist_size(g_dist)));
    for (int i = 0; i < 6; i++)
        CHECK(tg_zero_owner(s.zero, i) == want[i], "parameter %d on %d, want %d", i,
              tg_zero_owner(s.zero, i), want[i]);
    for (int step = 3; step < 7; step++) OK(gpair_step(&s, step));
    same_params(&s, "after the add");
    /* the consolidated state with groups: one optimizer's */
    const int rank = tg_dist_rank(g_dist);
    tg_st_file *f = NULL, *ref = NULL;
    OK(tg_st_new(&f));
    OK(tg_st_new(&ref));
    OK(tg_optimizer_state_save(s.opt, ref, "o"));
    OK(tg_zero_consolidate_state_dict(s.zero, 0, rank == 0 ? f : NULL, "o"));
    /* rank 0 writes it, every rank reads it */
    static const char path[] = "dist_zero_groups.safetensors";
    OK(tg_dist_agree(g_dist, rank == 0 ? tg_safetensors_save(f, path) : TG_OK));
    tg_st_free(f);
    f = NULL;
    OK(tg_safetensors_load(&f, path));
    OK(tg_dist_barrier(g_dist));
    if (rank == 0) remove(path);
    CHECK(tg_st_count(f) == tg_st_count(ref), "consolidated: %d entries, one optimizer's %d",
          tg_st_count(f), tg_st_count(ref));
    for (int e = 0; e < tg_st_count(ref); e++) {
        const char *key = NULL;
        tg_tensor *t = NULL;
        tg_st_at(ref, e, &key, &t);
        const tg_tensor *u = tg_st_get(f, key);
        CHECK(u && tg_tensor_same_shape(t, u) && same_bits(t, u), "consolidated '%s' differs",
              key);
    }
    /* a new pair (groups from the start, other options) loads it and goes
     * on as the first */
    tg_adam_opts other = TG_ADAM_OPTS_INIT;
    gpair t;
    OK(gpair_new(&t, make_adam, add_adam, &other, &other, false));
    for (int i = 0; i < t.n; i++) {
        OK(tg_tensor_copy_(t.p[i], s.p[i]));
        OK(tg_tensor_copy_(t.rp[i], s.p[i]));
    }
    OK(tg_zero_state_load(t.zero, f, "o"));
    OK(tg_optimizer_state_load(t.opt, f, "o"));
    CHECK(tg_optimizer_get_group_lr(tg_zero_optimizer(t.zero), 1) == ab.lr, "loaded lr %g",
          tg_optimizer_get_group_lr(tg_zero_optimizer(t.zero), 1));
    for (int step = 7; step < 9; step++) {
        OK(gpair_step(&s, step));
        OK(gpair_step(&t, step));
    }
    for (int i = 0; i < s.n; i++)
        CHECK(same_bits(s.p[i], t.p[i]), "reloaded: parameter %d differs", i);
    same_params(&t, "reloaded");
    tg_st_free(f);
    tg_st_free(ref);
    gpair_free(&s);
    gpair_free(&t);
}

/* The closure of the closure test: gradients as gpair_step's, the loss
 * the step's number; fail_on: the rank whose closure fails (-1: none;
 * else the other ranks' closures do nothing). */
typedef struct closure_ctx {
    gpair *s;
    int step, fail_on, calls;
} closure_ctx;

static int closure(void *user, double *loss)
{
    closure_ctx *c = user;
    c->calls++;
    if (tg_dist_rank(g_dist) == c->fail_on)
        return tg_error_set(TG_EIO, "closure: the batch of step %d is unreadable", c->step);
    if (c->fail_on >= 0) {   /* the others: no DDP, which the failing rank would miss */
        *loss = 0;
        return TG_OK;
    }
    TG_TRY(gpair_grads(c->s, c->step));
    *loss = c->step + 0.5;
    return TG_OK;
}

void zero_step_closure_steps_as_step_and_ends_on_a_closure_s_error(void)
{
    tg_sgd_opts sw = TG_SGD_OPTS_INIT, sb = TG_SGD_OPTS_INIT;
    sw.lr = 0.05, sw.momentum = 0.9;
    sb.lr = 0.1, sb.nesterov = true, sb.momentum = 0.5;
    gpair s;
    OK(gpair_new(&s, make_sgd, add_sgd, &sw, &sb, false));
    closure_ctx c = {.s = &s, .fail_on = -1};
    for (int step = 0; step < 4; step++) {
        double loss = 0;
        c.step = step;
        OK(tg_zero_step_closure(s.zero, closure, &c, &loss));
        OK(tg_optimizer_step(s.opt));
        CHECK(loss == step + 0.5, "step %d: loss %g", step, loss);
    }
    CHECK(c.calls == 4, "the closure ran %d times in 4 steps", c.calls);
    same_params(&s, "closure");
    CHECK(tg_zero_steps(s.zero) == 4, "%lld steps", (long long)tg_zero_steps(s.zero));
    /* a closure failing on the last rank: every rank's error, nothing moves */
    tg_tensor *before = NULL;
    OK(tg_tensor_clone(&before, s.p[0]));
    c.fail_on = tg_dist_size(g_dist) - 1, c.step = 4;
    double loss = -1;
    const int rc = tg_zero_step_closure(s.zero, closure, &c, &loss);
    CHECK(rc == TG_EIO, "a failing closure gave %s (%s)", tg_status_name(rc),
          tg_error_message());
    CHECK(strstr(tg_error_message(), "unreadable") != NULL, "message: %s", tg_error_message());
    CHECK(same_bits(before, s.p[0]) && loss == -1, "a failed closure step changed something");
    CHECK(tg_zero_steps(s.zero) == 4, "a failed step counted");
    CHECK(tg_zero_step_closure(s.zero, NULL, NULL, NULL) == TG_EINVAL, "NULL closure");
    CHECK(tg_zero_step_closure(NULL, closure, &c, NULL) == TG_EINVAL, "NULL z");
    tg_tensor_release(before);
    gpair_free(&s);
}

static void refused(int rc, int want, const char *what)
{
    CHECK(rc == want, "%s gave %s (%s), want %s", what, tg_status_name(rc), tg_error_message(),
          tg_status_name(want));
}

void zero_group_refusals_are_every_rank_s_and_change_nothing(void)
{
    const int world = tg_dist_size(g_dist);
    if (world < 2) return;
    const bool last = tg_dist_rank(g_dist) == world - 1;
    gpair s;
    tg_sgd_opts o = TG_SGD_OPTS_INIT, bad = TG_SGD_OPTS_INIT;
    o.momentum = 0.9;
    bad.lr = -1;
    OK(gpair_new(&s, make_sgd, add_sgd, &o, &o, true));
    /* the groups' layout differs on one rank */
    tg_zero *z = NULL;
    const tg_zero_group two[2] = {{3, s.rw, &o}, {3, s.rb, &o}};
    tg_tensor *flat[6] = {s.rw[0], s.rw[1], s.rw[2], s.rb[0], s.rb[1], s.rb[2]};
    const tg_zero_group one_mixed[2] = {{2, flat, &o}, {4, flat + 2, &o}};
    refused(tg_zero_new_groups(&z, g_dist, 2, last ? one_mixed : two, make_sgd, add_sgd),
            TG_EINVAL, "different groups");
    CHECK(strstr(tg_error_message(), "different parameter lists (groups") != NULL, "message: %s",
          tg_error_message());
    CHECK(z == NULL, "a refused zero_new_groups made one");
    refused(tg_zero_new_groups(&z, g_dist, 2, two, make_sgd, last ? NULL : add_sgd), TG_EINVAL,
            "add NULL on one rank");
    const tg_zero_group bad_two[2] = {{3, s.rw, &o}, {3, s.rb, &bad}};
    refused(tg_zero_new_groups(&z, g_dist, 2, last ? bad_two : two, make_sgd, add_sgd),
            TG_EINVAL, "a group's lr -1 on one rank");
    const tg_zero_group empty[2] = {{3, s.rw, &o}, {0, s.rb, &o}};
    refused(tg_zero_new_groups(&z, g_dist, 2, empty, make_sgd, add_sgd), TG_EINVAL,
            "an empty group");
    refused(tg_zero_new_groups(&z, g_dist, 2, (tg_zero_group[2]){{3, s.rw, &o}, {3, s.rw, &o}},
                               make_sgd, add_sgd), TG_EINVAL, "a parameter in two groups");
    /* add_param_group: refused on every rank, z as it was */
    refused(tg_zero_add_param_group(s.zero, add_sgd, 3, s.b, last ? &bad : &o), TG_EINVAL,
            "add with lr -1 on one rank");
    refused(tg_zero_add_param_group(s.zero, add_sgd, last ? 2 : 3, s.b, &o), TG_EINVAL,
            "add of different lists");
    refused(tg_zero_add_param_group(s.zero, add_sgd, 1, s.w, &o), TG_EINVAL,
            "add of a parameter already in z");
    refused(tg_zero_add_param_group(s.zero, last ? add_adam : add_sgd, 3, s.b,
                                    &o), TG_EINVAL, "add of another family on one rank");
    refused(tg_zero_add_param_group(NULL, add_sgd, 3, s.b, &o), TG_EINVAL, "NULL z");
    CHECK(tg_optimizer_param_group_count(tg_zero_optimizer(s.zero)) == 1,
          "a refused add changed the groups");
    /* z goes on as the reference */
    OK(gpair_add(&s, add_sgd, &o));
    for (int step = 0; step < 2; step++) OK(gpair_step(&s, step));
    same_params(&s, "after refusals");
    /* a group option set on one rank only that the state refuses: not
     * here; an lr set on the ZeRO optimizer reaches the local one */
    OK(tg_optimizer_set_group_lr(tg_zero_optimizer(s.zero), 1, 0.125));
    OK(tg_optimizer_set_group_lr(s.opt, 1, 0.125));
    OK(gpair_step(&s, 2));
    same_params(&s, "after set_group_lr");
    gpair_free(&s);
}
