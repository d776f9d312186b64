/* Tests of which parameters each rank of a ZeroRedundancyOptimizer owns
 * (tg_zero_rank_params against torch's _partition_parameters(), from
 * tests/golden/zero_params_per_rank.txt, written by
 * scripts/make_zero_goldens.py) and of the local optimizers' groups: every
 * rank's has every group, empty ones too, so that group options and
 * schedulers set on tg_zero_optimizer reach the same group everywhere. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_test.h"

static int make_sgd(tg_optimizer **out, int n, tg_tensor *const *p, const void *o)
{
    return tg_sgd_new(out, n, p, o);
}
static int add_sgd(tg_optimizer *opt, int n, tg_tensor *const *p, const void *o)
{
    return tg_sgd_add_param_group(opt, n, p, o);
}

enum { MAXP = 32, MAXG = 16 };

/* One line of the golden file: the case, a rank and its lists. */
typedef struct golden {
    int world, n_groups, n, rank;
    int counts[MAXG];
    int64_t sizes[MAXP];
    int64_t lists[MAXP + MAXG];   /* m_0 i... m_1 i... */
    int n_lists;
} golden;

static bool parse(const char *line, golden *c)
{
    const char *s = line;
    int64_t head[2 + MAXG], rank = -1;
    const int nh = dist_read_ints(&s, head, 2 + MAXG);
    if (nh < 3 || head[1] < 1 || head[1] > MAXG || nh != 2 + head[1]) return false;
    c->world = (int)head[0], c->n_groups = (int)head[1];
    for (int g = 0; g < c->n_groups; g++) c->counts[g] = (int)head[2 + g];
    c->n = dist_read_ints(&s, c->sizes, MAXP);
    if (dist_read_ints(&s, &rank, 1) != 1) return false;
    c->rank = (int)rank;
    c->n_lists = dist_read_ints(&s, c->lists, MAXP + MAXG);
    return c->n >= 1;
}

/* z's lists of c's rank against torch's. */
static void check_lists(const tg_zero *z, const golden *c, int line)
{
    for (int g = 0, at = 0; g < c->n_groups; g++) {
        int *idx = NULL, m = -1;
        OK(tg_zero_rank_params(&idx, &m, z, c->rank, g));
        const int want = at < c->n_lists ? (int)c->lists[at] : -1;
        CHECK(m == want, "line %d: rank %d group %d: %d parameters, torch's %d", line, c->rank,
              g, m, want);
        for (int k = 0; k < m && k < want; k++)
            CHECK(idx[k] == c->lists[at + 1 + k], "line %d: rank %d group %d [%d]: %d, torch's "
                  "%lld", line, c->rank, g, k, idx[k], (long long)c->lists[at + 1 + k]);
        CHECK((idx == NULL) == (m == 0), "line %d: idx NULL iff empty", line);
        free(idx);
        at += 1 + (want > 0 ? want : 0);
    }
}

/* The local optimizer of c's rank (this rank): a group per group, the
 * group's lr, as many parameters as torch's list (its step count shows
 * them: a step with gradients everywhere). */
static void check_local(const tg_zero *z, const golden *c, const tg_sgd_opts *o, int line)
{
    const tg_optimizer *local = tg_zero_local(z);
    CHECK(local != NULL, "line %d: no local optimizer", line);
    CHECK(tg_optimizer_param_group_count(local) == c->n_groups, "line %d: %d local groups, "
          "torch's %d", line, tg_optimizer_param_group_count(local), c->n_groups);
    for (int g = 0; g < c->n_groups && local; g++)
        CHECK(tg_optimizer_get_group_lr(local, g) == o[g].lr, "line %d: local group %d lr %g",
              line, g, tg_optimizer_get_group_lr(local, g));
}

void zero_rank_params_and_local_groups_are_torch_s(void)
{
    char path[1024], line[1024];
    snprintf(path, sizeof path, "%s/tests/golden/zero_params_per_rank.txt", TG_SOURCE_ROOT);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f) return;
    int lines = 0, checked = 0, empty = 0;
    while (fgets(line, sizeof line, f)) {
        golden c;
        lines++;
        if (!parse(line, &c) || c.world != tg_dist_size(g_dist)) continue;
        tg_tensor *p[MAXP];
        for (int i = 0; i < c.n; i++) OK(tg_tensor_zeros(&p[i], TG_F32, 1, &c.sizes[i]));
        tg_sgd_opts o[MAXG];
        tg_zero_group groups[MAXG];
        for (int g = 0, at = 0; g < c.n_groups; at += c.counts[g], g++) {
            o[g] = (tg_sgd_opts)TG_SGD_OPTS_INIT;
            o[g].lr = 0.1 * (g + 1);
            groups[g] = (tg_zero_group){c.counts[g], p + at, &o[g]};
        }
        tg_zero *z = NULL;
        OK(tg_zero_new_groups(&z, g_dist, c.n_groups, groups, make_sgd, add_sgd));
        /* every rank checks every rank's lists; its own optimizer's groups */
        check_lists(z, &c, lines);
        if (c.rank == tg_dist_rank(g_dist)) check_local(z, &c, o, lines);
        for (int g = 0, at = 0; g < c.n_groups; g++) {
            empty += c.lists[at] == 0;
            at += 1 + (int)c.lists[at];
        }
        checked++;
        tg_zero_free(z);
        for (int i = 0; i < c.n; i++) tg_tensor_release(p[i]);
    }
    fclose(f);
    CHECK(checked >= 8 && empty >= 2, "only %d golden lines of %d ranks (%d empty groups)",
          checked, tg_dist_size(g_dist), empty);
}

/* Parameters of 100, 1, 1, 1, 1 elements in two groups: on 2 ranks, rank 0
 * owns group 0 and rank 1 group 1 (torch's partition), so each rank's
 * optimizer has one empty group.  Options and a scheduler set on
 * tg_zero_optimizer's group g reach group g everywhere; the steps are one
 * optimizer's, bit for bit. */
void zero_empty_local_groups_follow_the_group_options(void)
{
    const int rank = tg_dist_rank(g_dist), world = tg_dist_size(g_dist);
    tg_tensor *p[5], *q[5], *g = NULL;
    const int64_t sizes[5] = {100, 1, 1, 1, 1};
    for (int i = 0; i < 5; i++) {
        OK(tg_tensor_full(&p[i], TG_F32, 1, &sizes[i], 0.5 + i));
        OK(tg_tensor_full(&q[i], TG_F32, 1, &sizes[i], 0.5 + i));
    }
    tg_sgd_opts o0 = TG_SGD_OPTS_INIT, o1 = TG_SGD_OPTS_INIT;
    o0.lr = 0.1, o0.momentum = 0.9;
    o1.lr = 0.3, o1.momentum = 0.5, o1.weight_decay = 0.01;
    const tg_zero_group groups[2] = {{1, p, &o0}, {4, p + 1, &o1}};
    tg_zero *z = NULL;
    tg_optimizer *ref = NULL;
    tg_lr_scheduler *sz = NULL, *sr = NULL;
    OK(tg_zero_new_groups(&z, g_dist, 2, groups, make_sgd, add_sgd));
    OK(make_sgd(&ref, 1, q, &o0));
    OK(add_sgd(ref, 4, q + 1, &o1));
    OK(tg_step_lr_new(&sz, tg_zero_optimizer(z), 1, 0.5));
    OK(tg_step_lr_new(&sr, ref, 1, 0.5));
    const tg_optimizer *local = tg_zero_local(z);
    CHECK(tg_optimizer_param_group_count(local) == 2, "%d local groups",
          tg_optimizer_param_group_count(local));
    int *idx = NULL, m0 = -1, m1 = -1;
    OK(tg_zero_rank_params(&idx, &m0, z, rank, 0));
    free(idx);
    OK(tg_zero_rank_params(&idx, &m1, z, rank, 1));
    free(idx);
    if (world == 2)
        CHECK(rank == 0 ? m0 == 1 && m1 == 0 : m0 == 0 && m1 == 4, "rank %d owns %d and %d", rank,
              m0, m1);
    for (int step = 0; step < 4; step++) {
        for (int i = 0; i < 5; i++) {
            OK(tg_tensor_full(&g, TG_F32, 1, &sizes[i], 0.125 * (step + 1) - 0.1 * i));
            OK(tg_tensor_set_grad(p[i], g));
            OK(tg_tensor_full(&g, TG_F32, 1, &sizes[i], 0.125 * (step + 1) - 0.1 * i));
            OK(tg_tensor_set_grad(q[i], g));
        }
        if (step == 2) {   /* a group option set by hand on both */
            OK(tg_optimizer_set_group_momentum(tg_zero_optimizer(z), 1, 0.25));
            OK(tg_optimizer_set_group_momentum(ref, 1, 0.25));
        }
        OK(tg_zero_step(z));
        OK(tg_optimizer_step(ref));
        OK(tg_lr_scheduler_step(sz));
        OK(tg_lr_scheduler_step(sr));
        /* the lr of each local group is its group's, after the next sync */
    }
    for (int i = 0; i < 5; i++)
        CHECK(same_bits(p[i], q[i]), "parameter %d differs from one optimizer's", i);
    for (int k = 0; k < 2; k++)
        CHECK(tg_optimizer_get_group_lr(local, k) == tg_optimizer_get_group_lr(ref, k) * 2,
              "local group %d: lr %g, the scheduler's last step %g", k,
              tg_optimizer_get_group_lr(local, k), tg_optimizer_get_group_lr(ref, k));
    /* the query's refusals touch nothing */
    int *keep = (int *)&m0, n_keep = 7;
    CHECK(tg_zero_rank_params(&keep, &n_keep, z, world, 0) == TG_EINVAL, "rank = world");
    CHECK(tg_zero_rank_params(&keep, &n_keep, z, -1, 0) == TG_EINVAL, "rank -1");
    CHECK(tg_zero_rank_params(&keep, &n_keep, z, 0, 2) == TG_EINVAL, "group 2 of 2");
    CHECK(tg_zero_rank_params(&keep, &n_keep, NULL, 0, 0) == TG_EINVAL, "NULL z");
    CHECK(tg_zero_rank_params(NULL, &n_keep, z, 0, 0) == TG_EINVAL, "NULL idx");
    CHECK(strstr(tg_error_message(), "zero_rank_params") != NULL, "message: %s",
          tg_error_message());
    CHECK(keep == &m0 && n_keep == 7, "a refused query wrote its outputs");
    tg_lr_scheduler_free(sz);
    tg_lr_scheduler_free(sr);
    tg_zero_free(z);
    tg_optimizer_free(ref);
    for (int i = 0; i < 5; i++) tg_tensor_release(p[i]), tg_tensor_release(q[i]);
}
