/* Tests of a ZeroRedundancyOptimizer's parameters_as_bucket_view
 * (tg_zero_set_bucket_view): the parameters of each (rank, dtype) laid
 * back to back in one buffer, the steps bit for bit those without buckets
 * (across an add_param_group, which rebuilds them, and after turning them
 * off), one broadcast per bucket, the user's tensors keeping their values
 * and .grad, and the refusals (an `on` that differs, a parameter whose data
 * was replaced). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_test.h"

static int make_adam(tg_optimizer **out, int n, tg_tensor *const *p, const void *o)
{
    return tg_adam_new(out, n, p, o);
}
static int add_adam(tg_optimizer *opt, int n, tg_tensor *const *p, const void *o)
{
    return tg_adam_add_param_group(opt, n, p, o);
}

/* Two groups of mixed dtypes, then a third added later. */
enum { NP = 10, N0 = 5, N1 = 3, N2 = 2 };
static const int64_t sizes[NP] = {40, 7, 7, 13, 9, 3, 21, 5, 11, 2};
static const tg_dtype dts[NP] = {TG_F32, TG_F32, TG_F32, TG_F32, TG_F64,
                                 TG_F32, TG_F32, TG_F64, TG_F32, TG_F64};

typedef struct set {
    tg_tensor *p[NP];
    tg_zero *z;
} set;

static int set_new(set *s, const tg_adam_opts *o)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < NP; i++) {
        TG_TRY(tg_tensor_zeros(&s->p[i], dts[i], 1, &sizes[i]));
        for (int64_t k = 0; k < sizes[i]; k++)
            TG_TRY(tg_tensor_set_flat(s->p[i], k, 0.25 * (double)((k * 3 + i) % 7) - 0.5));
    }
    const tg_zero_group g[2] = {{N0, s->p, &o[0]}, {N1, s->p + N0, &o[1]}};
    return tg_zero_new_groups(&s->z, g_dist, 2, g, make_adam, add_adam);
}

static void set_free(set *s)
{
    tg_zero_free(s->z);
    for (int i = 0; i < NP; i++) tg_tensor_release(s->p[i]);
}

/* The same gradients on every rank and both sets, varying with step. */
static int set_grads(set *s, int n, int step)
{
    for (int i = 0; i < n; i++) {
        tg_tensor *g = NULL;
        TG_TRY(tg_tensor_zeros(&g, dts[i], 1, &sizes[i]));
        for (int64_t k = 0; k < sizes[i]; k++)
            tg_tensor_set_flat(g, k, 0.1 * (double)((k + step * 5 + i) % 9) - 0.3);
        TG_TRY(tg_tensor_set_grad(s->p[i], g));
    }
    return TG_OK;
}

/* The (rank, dtype) pairs owning a parameter among the first n. */
static int n_buckets(const set *s, int n)
{
    int count = 0;
    for (int r = 0; r < tg_dist_size(g_dist); r++)
        for (int d = 0; d < 2; d++) {
            bool any = false;
            for (int i = 0; i < n; i++)
                any |= tg_zero_owner(s->z, i) == r && dts[i] == (d ? TG_F64 : TG_F32);
            count += any;
        }
    return count;
}

/* With buckets, each rank's parameters of a dtype lie back to back in the
 * order of tg_zero_rank_params, group by group. */
static void check_layout(const set *s, int n_groups, const char *what)
{
    for (int r = 0; r < tg_dist_size(g_dist); r++)
        for (int d = 0; d < 2; d++) {
            const tg_tensor *prev = NULL;
            for (int g = 0; g < n_groups; g++) {
                int *idx = NULL, m = 0;
                OK(tg_zero_rank_params(&idx, &m, s->z, r, g));
                for (int k = 0; k < m; k++) {
                    const tg_tensor *p = s->p[idx[k]];
                    if (tg_tensor_dtype(p) != (d ? TG_F64 : TG_F32)) continue;
                    CHECK(!prev || (tg_tensor_shares_storage(prev, p) &&
                                    (const char *)tg_tensor_cdata(p) ==
                                        (const char *)tg_tensor_cdata(prev) +
                                            tg_tensor_numel(prev) * (d ? 8 : 4)),
                          "%s: parameter %d does not follow the one before in rank %d's "
                          "bucket", what, idx[k], r);
                    prev = p;
                }
                free(idx);
            }
        }
}

static void same_sets(const set *a, const set *b, int n, const char *what)
{
    for (int i = 0; i < n; i++)
        CHECK(same_bits(a->p[i], b->p[i]), "%s: parameter %d differs", what, i);
}

void zero_bucket_view_steps_bit_for_bit_with_one_broadcast_per_bucket(void)
{
    tg_adam_opts o[3] = {TG_ADAM_OPTS_INIT, TG_ADAM_OPTS_INIT, TG_ADAM_OPTS_INIT};
    o[0].lr = 1e-2, o[1].lr = 3e-2, o[1].amsgrad = true, o[2].lr = 5e-2;
    set a, b;
    OK(set_new(&a, o));
    OK(set_new(&b, o));
    /* a .grad set before is kept; the values too */
    OK(set_grads(&a, N0 + N1, 0));
    const tg_tensor *g0 = tg_tensor_grad(a.p[0]);
    OK(tg_zero_set_bucket_view(a.z, true));
    CHECK(tg_zero_bucket_view(a.z) && !tg_zero_bucket_view(b.z), "bucket_view flags");
    CHECK(tg_tensor_grad(a.p[0]) == g0, "the .grad changed");
    same_sets(&a, &b, N0 + N1, "on");
    check_layout(&a, 2, "made");
    for (int step = 0; step < 6; step++) {
        if (step == 3) {   /* a group added: buckets rebuilt over it */
            const int at = N0 + N1;
            OK(tg_zero_add_param_group(a.z, add_adam, N2, a.p + at, &o[2]));
            OK(tg_zero_add_param_group(b.z, add_adam, N2, b.p + at, &o[2]));
            same_sets(&a, &b, NP, "added");
            check_layout(&a, 3, "rebuilt");
        }
        const int n = step < 3 ? N0 + N1 : NP;
        OK(set_grads(&a, n, step));
        OK(set_grads(&b, n, step));
        const int before_a = g_bcasts;
        OK(tg_zero_step(a.z));
        const int sent_a = g_bcasts - before_a, before_b = g_bcasts;
        OK(tg_zero_step(b.z));
        const int sent_b = g_bcasts - before_b;
        CHECK(sent_a == n_buckets(&a, n) && sent_b == n, "step %d: %d broadcasts with "
              "buckets (%d expected), %d without (%d)", step, sent_a, n_buckets(&a, n),
              sent_b, n);
        same_sets(&a, &b, n, "step");
    }
    /* off: each parameter its own storage, the steps still alike */
    OK(tg_zero_set_bucket_view(a.z, false));
    for (int i = 1; i < NP; i++)
        CHECK(!tg_tensor_shares_storage(a.p[0], a.p[i]), "off: parameter %d shares", i);
    OK(set_grads(&a, NP, 6));
    OK(set_grads(&b, NP, 6));
    OK(tg_zero_step(a.z));
    OK(tg_zero_step(b.z));
    same_sets(&a, &b, NP, "off");
    set_free(&a);
    set_free(&b);
}

void zero_bucket_view_refusals_are_every_rank_s_and_change_nothing(void)
{
    const int world = tg_dist_size(g_dist);
    const bool last = tg_dist_rank(g_dist) == world - 1;
    tg_adam_opts o[2] = {TG_ADAM_OPTS_INIT, TG_ADAM_OPTS_INIT};
    set a;
    OK(set_new(&a, o));
    const void *data[NP];
    for (int i = 0; i < NP; i++) data[i] = tg_tensor_cdata(a.p[i]);
    int rc = tg_zero_set_bucket_view(a.z, !last);
    if (world > 1)
        CHECK(rc == TG_EINVAL && strstr(tg_error_message(), "on differs") != NULL,
              "on differing: %s (%s)", tg_status_name(rc), tg_error_message());
    else
        CHECK(rc == TG_OK, "one rank: %s", tg_error_message());
    if (world > 1) {
        CHECK(!tg_zero_bucket_view(a.z), "a refused call turned buckets on");
        for (int i = 0; i < NP; i++)
            CHECK(tg_tensor_cdata(a.p[i]) == data[i], "a refused call moved parameter %d", i);
    }
    /* a parameter whose data is replaced leaves its bucket: the step is
     * refused on every rank until the buckets are made again */
    tg_module *m = dist_mlp(3, DIST_IN, DIST_OUT);
    tg_tensor **mp = NULL;
    int mn = 0;
    tg_zero *z = NULL;
    OK(tg_module_parameters(m, &mp, &mn));
    OK(tg_zero_new(&z, g_dist, mn, mp, make_adam, &o[0]));
    OK(tg_zero_set_bucket_view(z, true));
    OK(tg_module_to_dtype(m, TG_F64));
    rc = tg_zero_step(z);
    CHECK(rc == TG_EINVAL && strstr(tg_error_message(), "no longer views its bucket") != NULL,
          "a replaced parameter: %s (%s)", tg_status_name(rc), tg_error_message());
    CHECK(tg_zero_steps(z) == 0, "a refused step counted");
    tg_zero_free(z);
    free(mp);
    tg_module_release(m);
    CHECK(tg_zero_set_bucket_view(NULL, true) == TG_EINVAL, "NULL z");
    CHECK(!tg_zero_bucket_view(NULL), "NULL z has buckets");
    set_free(&a);
}
