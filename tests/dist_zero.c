/* Tests of the ZeroRedundancyOptimizer (tg_zero_*, tapegrad/dist.h): the
 * partition against torch's (tests/golden/zero_partition.txt, written by
 * scripts/make_zero_goldens.py), training under DDP bit for bit as one
 * optimizer over every parameter fed the same averaged gradients, each
 * rank's state holding its partition only, the consolidated state and its
 * reload through a checkpoint, and the refusals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_test.h"

enum { ZB = 3 };   /* rows per rank per step */

static int make_sgd(tg_optimizer **out, int n, tg_tensor *const *p, const void *o)
{
    return tg_sgd_new(out, n, p, o);
}
static int make_adam(tg_optimizer **out, int n, tg_tensor *const *p, const void *o)
{
    return tg_adam_new(out, n, p, o);
}
static int make_adamw(tg_optimizer **out, int n, tg_tensor *const *p, const void *o)
{
    return tg_adamw_new(out, n, p, o);
}

void zero_partition_is_torch_s(void)
{
    char path[1024], line[1024];
    snprintf(path, sizeof path, "%s/tests/golden/zero_partition.txt", TG_SOURCE_ROOT);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f) return;
    int cases = 0;
    while (fgets(line, sizeof line, f)) {
        int world = 0, n = 0, pos = 0, used = 0;
        if (sscanf(line, "%d %d%n", &world, &n, &pos) != 2 || n < 1 || n > 32) continue;
        int64_t sizes[32];
        int want[32], got[32];
        tg_tensor *params[32];
        for (int i = 0; i < n; i++, pos += used)
            sscanf(line + pos, " %lld%n", (long long *)&sizes[i], &used);
        pos += (int)(strchr(line + pos, ':') - (line + pos)) + 1;
        for (int i = 0; i < n; i++, pos += used) sscanf(line + pos, " %d%n", &want[i], &used);
        OK(tg_zero_partition(got, n, sizes, world));
        for (int i = 0; i < n; i++)
            CHECK(got[i] == want[i], "case %d (world %d): parameter %d on rank %d, torch's %d",
                  cases, world, i, got[i], want[i]);
        cases++;
        if (world != tg_dist_size(g_dist)) continue;
        /* the object's partition too, and its optimizer's order */
        for (int i = 0; i < n; i++) {
            OK(tg_tensor_zeros(&params[i], TG_F32, 1, &sizes[i]));
            tg_tensor_set_requires_grad(params[i], true);
        }
        tg_sgd_opts o = TG_SGD_OPTS_INIT;
        tg_zero *z = NULL;
        OK(tg_zero_new(&z, g_dist, n, params, make_sgd, &o));
        int n_local = 0;
        for (int i = 0; i < n; i++) {
            CHECK(tg_zero_owner(z, i) == want[i], "zero_new: parameter %d on %d, torch's %d", i,
                  tg_zero_owner(z, i), want[i]);
            n_local += want[i] == tg_dist_rank(g_dist);
        }
        /* every rank has a local optimizer of one group, empty where it
         * owns nothing (torch's) */
        int *idx = NULL, m = -1;
        OK(tg_zero_rank_params(&idx, &m, z, tg_dist_rank(g_dist), 0));
        free(idx);
        CHECK(tg_zero_local(z) != NULL && m == n_local &&
              tg_optimizer_param_group_count(tg_zero_local(z)) == 1,
              "a local optimizer of one group of %d parameters (%d)", n_local, m);
        tg_zero_free(z);
        for (int i = 0; i < n; i++) tg_tensor_release(params[i]);
    }
    fclose(f);
    CHECK(cases >= 10, "only %d golden cases read", cases);
    CHECK(tg_zero_partition(NULL, 1, (int64_t[]){1}, 2) == TG_EINVAL, "NULL owner");
    CHECK(tg_zero_partition((int[1]){0}, 1, (int64_t[]){-1}, 2) == TG_EINVAL, "numel -1");
    CHECK(tg_zero_partition((int[1]){0}, 1, (int64_t[]){1}, 0) == TG_EINVAL, "world 0");
}

/* A model under DDP and a ZeRO optimizer, and the same model (same init)
 * with one optimizer over all its parameters. */
typedef struct pair {
    tg_module *m, *ref;
    tg_ddp *ddp;
    tg_zero *zero;
    tg_optimizer *opt;
    tg_tensor **p, **rp;
    int n;
} pair;

static int pair_new(pair *s, tg_zero_make_fn make, const void *opts)
{
    memset(s, 0, sizeof *s);
    s->m = dist_mlp(7, DIST_IN, DIST_OUT);
    s->ref = dist_mlp(7, DIST_IN, DIST_OUT);
    int n2 = 0;
    TG_TRY(tg_ddp_new_module(&s->ddp, g_dist, s->m, NULL));
    TG_TRY(tg_module_parameters(s->m, &s->p, &s->n));
    TG_TRY(tg_module_parameters(s->ref, &s->rp, &n2));
    TG_TRY(tg_zero_new(&s->zero, g_dist, s->n, s->p, make, opts));
    return make(&s->opt, n2, s->rp, opts);
}

static void pair_free(pair *s)
{
    tg_zero_free(s->zero);
    tg_optimizer_free(s->opt);
    tg_ddp_free(s->ddp);
    free(s->p);
    free(s->rp);
    tg_module_release(s->m);
    tg_module_release(s->ref);
}

/* One step: DDP's averaged gradients into the ZeRO optimizer, copies of
 * them into the reference one. */
static int pair_step(pair *s, int step)
{
    const int rank = tg_dist_rank(g_dist);
    tg_zero_zero_grad(s->zero);
    tg_optimizer_zero_grad(s->opt);
    TG_TRY(tg_ddp_prepare(s->ddp));
    int rc = dist_forward_backward(s->m, step, (int64_t)rank * ZB, ZB);
    if (rc < 0) tg_dist_abort(g_dist, rc);
    TG_TRY(tg_ddp_finish(s->ddp));
    for (int i = 0; i < s->n; i++) {
        tg_tensor *g = NULL;
        TG_TRY(tg_tensor_clone(&g, tg_tensor_grad(s->p[i])));
        TG_TRY(tg_tensor_set_grad(s->rp[i], g));
    }
    TG_TRY(tg_zero_step(s->zero));
    return tg_optimizer_step(s->opt);
}

/* Parameter i's state bytes and the number of parameters with state in an
 * optimizer's saved state (keys "<prefix>.<i>.<name>"). */
static void state_size(const tg_optimizer *opt, int64_t *bytes, int *n_params)
{
    *bytes = 0, *n_params = 0;
    if (!opt) return;
    tg_st_file *f = NULL;
    tg_st_new(&f);
    tg_optimizer_state_save(opt, f, "s");
    int last = -1;
    for (int e = 0; e < tg_st_count(f); e++) {
        const char *name = NULL;
        tg_tensor *t = NULL;
        tg_st_at(f, e, &name, &t);
        int i = -1, len = 0;
        if (sscanf(name, "s.%d.%n", &i, &len) != 1 || len == 0) continue;
        *bytes += tg_tensor_numel(t) * (int64_t)tg_dtype_size(tg_tensor_dtype(t));
        if (i != last) (*n_params)++, last = i;
    }
    tg_st_free(f);
}

static void zero_matches_one_optimizer(const char *name, tg_zero_make_fn make,
                                       const void *opts)
{
    pair s;
    int rc = pair_new(&s, make, opts);
    CHECK(rc >= 0, "%s: setup: %s", name, tg_error_message());
    for (int step = 0; rc >= 0 && step < 6; step++) {
        rc = pair_step(&s, step);
        CHECK(rc >= 0, "%s step %d: %s", name, step, tg_error_message());
    }
    for (int i = 0; rc >= 0 && i < s.n; i++)
        CHECK(same_bits(s.p[i], s.rp[i]), "%s: parameter %d differs from one optimizer's", name,
              i);
    CHECK(tg_zero_steps(s.zero) == 6, "%s: %lld steps", name, (long long)tg_zero_steps(s.zero));
    /* each rank's state: its own parameters only; all ranks' together:
     * the whole optimizer's */
    int64_t bytes = 0, full_bytes = 0, owned_bytes = 0;
    int n_state = 0, full_n = 0, owned = 0;
    state_size(tg_zero_local(s.zero), &bytes, &n_state);
    state_size(s.opt, &full_bytes, &full_n);
    for (int i = 0; i < s.n; i++)
        if (tg_zero_owner(s.zero, i) == tg_dist_rank(g_dist)) {
            owned++;
            owned_bytes += tg_tensor_numel(s.p[i]) * 4;
        }
    const int bufs = make == make_sgd ? 1 : 2;   /* momentum; exp_avg, exp_avg_sq */
    const int64_t steps = make == make_sgd ? 0 : 8;   /* Adam's per-parameter step (i64) */
    CHECK(n_state == owned, "%s: state of %d parameters, owns %d", name, n_state, owned);
    CHECK(bytes == owned_bytes * bufs + steps * owned, "%s: %lld state bytes, want %lld", name,
          (long long)bytes, (long long)(owned_bytes * bufs + steps * owned));
    tg_tensor *total = NULL;
    tg_tensor_scalar(&total, TG_I64, (double)bytes);
    tg_dist_allreduce(g_dist, total, TG_REDUCE_SUM);
    CHECK(tg_tensor_item(total) == (double)full_bytes, "%s: ranks' state %g bytes, one "
          "optimizer's %lld", name, tg_tensor_item(total), (long long)full_bytes);
    tg_tensor_release(total);
    pair_free(&s);
}

void zero_under_ddp_is_bit_identical_to_one_optimizer(void)
{
    tg_sgd_opts sgd = TG_SGD_OPTS_INIT;
    sgd.lr = 0.05, sgd.momentum = 0.9, sgd.weight_decay = 1e-3;
    tg_adam_opts adam = TG_ADAM_OPTS_INIT, adamw = TG_ADAMW_OPTS_INIT;
    adam.lr = 1e-2;
    adamw.lr = 1e-2, adamw.weight_decay = 0.1;
    zero_matches_one_optimizer("sgd", make_sgd, &sgd);
    zero_matches_one_optimizer("adam", make_adam, &adam);
    zero_matches_one_optimizer("adamw", make_adamw, &adamw);
}

/* Whether every tensor and metadata pair of a is in b with the same bits,
 * and they have as many. */
static bool same_files(const tg_st_file *a, const tg_st_file *b, const char *what)
{
    bool ok = tg_st_count(a) == tg_st_count(b) && tg_st_meta_count(a) == tg_st_meta_count(b);
    CHECK(ok, "%s: %d and %d entries", what, tg_st_count(a), tg_st_count(b));
    for (int e = 0; ok && e < tg_st_count(a); e++) {
        const char *name = NULL;
        tg_tensor *t = NULL;
        tg_st_at(a, e, &name, &t);
        const tg_tensor *u = tg_st_get(b, name);
        ok = u && tg_tensor_same_shape(t, u) && same_bits(t, u);
        CHECK(ok, "%s: '%s' differs", what, name);
    }
    for (int e = 0; ok && e < tg_st_meta_count(a); e++) {
        const char *key = NULL, *value = NULL;
        tg_st_meta_at(a, e, &key, &value);
        const char *v = tg_st_meta_get(b, key);
        ok = v && !strcmp(v, value);
        CHECK(ok, "%s: metadata '%s' differs", what, key);
    }
    return ok;
}

void zero_consolidated_state_is_one_optimizer_s_and_reloads(void)
{
    const int rank = tg_dist_rank(g_dist), world = tg_dist_size(g_dist);
    tg_adam_opts o = TG_ADAMW_OPTS_INIT;
    o.lr = 1e-2;
    pair s, t;
    OK(pair_new(&s, make_adamw, &o));
    for (int step = 0; step < 4; step++) OK(pair_step(&s, step));
    /* consolidated on the last rank: one optimizer's state_save */
    tg_st_file *f = NULL, *want = NULL;
    OK(tg_st_new(&f));
    OK(tg_st_new(&want));
    OK(tg_optimizer_state_save(s.opt, want, "opt"));
    OK(tg_zero_consolidate_state_dict(s.zero, world - 1, rank == world - 1 ? f : NULL, "opt"));
    if (rank == world - 1) same_files(want, f, "consolidated");
    else CHECK(tg_st_count(f) == 0, "a rank other than to got %d entries", tg_st_count(f));
    tg_st_free(f);
    /* to rank 0, into a checkpoint with the model; read back on every rank
     * into a new model and a new ZeRO optimizer (other init) */
    OK(tg_st_new(&f));
    OK(tg_zero_consolidate_state_dict(s.zero, 0, rank == 0 ? f : NULL, "opt"));
    tg_checkpoint *ck = NULL;
    OK(tg_checkpoint_new(&ck));
    OK(tg_checkpoint_add_module(ck, "model", s.m));
    static const char path[] = "dist_zero_checkpoint.safetensors";
    OK(tg_dist_checkpoint_save(g_dist, ck, path, rank == 0 ? f : NULL));
    tg_checkpoint_free(ck);
    OK(pair_new(&t, make_adamw, &o));
    tg_st_file *file = NULL;
    OK(tg_safetensors_load(&file, path));
    OK(tg_checkpoint_new(&ck));
    OK(tg_checkpoint_add_module(ck, "model", t.m));
    OK(tg_checkpoint_load_file(ck, file));
    tg_checkpoint_free(ck);
    OK(tg_zero_state_load(t.zero, file, "opt"));
    CHECK(tg_zero_steps(t.zero) == 4, "steps after load %lld", (long long)tg_zero_steps(t.zero));
    /* the unsharded optimizer loads the same file */
    OK(tg_optimizer_state_load(t.opt, file, "opt"));
    for (int i = 0; i < t.n; i++) OK(tg_tensor_copy_(t.rp[i], t.p[i]));
    OK(tg_dist_barrier(g_dist));
    if (rank == 0) remove(path);
    /* both go on alike: the same gradients into s and t */
    for (int step = 4; step < 7; step++) {
        OK(pair_step(&s, step));
        OK(pair_step(&t, step));
    }
    for (int i = 0; i < s.n; i++) {
        CHECK(same_bits(s.p[i], t.p[i]), "reloaded ZeRO: parameter %d differs", i);
        CHECK(same_bits(s.p[i], t.rp[i]), "reloaded unsharded: parameter %d differs", i);
    }
    tg_st_free(f);
    tg_st_free(want);
    tg_st_free(file);
    pair_free(&s);
    pair_free(&t);
}

void zero_with_a_rank_that_owns_nothing_still_steps_and_consolidates(void)
{
    const int rank = tg_dist_rank(g_dist), world = tg_dist_size(g_dist);
    tg_tensor *w = NULL, *ref = NULL, *g = NULL;
    OK(tg_tensor_full(&w, TG_F32, 1, (int64_t[]){4}, 0.5));
    OK(tg_tensor_full(&ref, TG_F32, 1, (int64_t[]){4}, 0.5));
    tg_tensor_set_requires_grad(w, true);
    tg_tensor_set_requires_grad(ref, true);
    tg_sgd_opts o = TG_SGD_OPTS_INIT;
    o.momentum = 0.5;
    tg_zero *z = NULL;
    tg_optimizer *opt = NULL;
    OK(tg_zero_new(&z, g_dist, 1, &w, make_sgd, &o));
    OK(tg_sgd_new(&opt, 1, &ref, &o));
    CHECK(tg_zero_owner(z, 0) == 0 && tg_zero_local(z) != NULL &&
          tg_zero_local_index(z, 0) == (rank == 0 ? 0 : -1),
          "rank 0 owns the parameter; every rank has a local optimizer");
    for (int step = 0; step < 3; step++) {
        OK(tg_tensor_full(&g, TG_F32, 1, (int64_t[]){4}, 0.25 * (step + 1)));
        OK(tg_tensor_set_grad(w, g));
        OK(tg_tensor_full(&g, TG_F32, 1, (int64_t[]){4}, 0.25 * (step + 1)));
        OK(tg_tensor_set_grad(ref, g));
        OK(tg_zero_step(z));
        OK(tg_optimizer_step(opt));
    }
    CHECK(same_bits(w, ref), "one parameter, %d ranks: differs from one optimizer", world);
    tg_st_file *f = NULL, *want = NULL;
    OK(tg_st_new(&f));
    OK(tg_st_new(&want));
    OK(tg_optimizer_state_save(opt, want, "o"));
    OK(tg_zero_consolidate_state_dict(z, world - 1, f, "o"));
    if (rank == world - 1) same_files(want, f, "consolidated from rank 0");
    tg_st_free(f);
    tg_st_free(want);
    tg_zero_free(z);
    tg_optimizer_free(opt);
    tg_tensor_release(w);
    tg_tensor_release(ref);
}

static void refused(int rc, int want, const char *what)
{
    CHECK(rc == want, "%s gave %s (%s), want %s", what, tg_status_name(rc), tg_error_message(),
          tg_status_name(want));
}

void zero_refusals_are_every_rank_s_and_change_nothing(void)
{
    const int rank = tg_dist_rank(g_dist), world = tg_dist_size(g_dist);
    if (world < 2) return;
    const bool last = rank == world - 1;
    tg_module *m = dist_mlp(3, DIST_IN, DIST_OUT);
    tg_tensor **p = NULL;
    int n = 0;
    OK(tg_module_parameters(m, &p, &n));
    tg_sgd_opts o = TG_SGD_OPTS_INIT, bad = TG_SGD_OPTS_INIT;
    o.momentum = 0.9;
    bad.lr = -1;
    tg_zero *z = NULL;
    refused(tg_zero_new(&z, g_dist, last ? n - 1 : n, p, make_sgd, &o), TG_EINVAL,
            "different lists");
    CHECK(z == NULL, "a refused zero_new made one");
    refused(tg_zero_new(&z, g_dist, n, p, make_sgd, last ? &bad : &o), TG_EINVAL,
            "make failing on one rank");
    refused(tg_zero_new(&z, g_dist, n, p, last ? NULL : make_sgd, &o), TG_EINVAL,
            "make NULL on one rank");
    refused(tg_zero_new(&z, NULL, n, p, make_sgd, &o), TG_EINVAL, "NULL d");
    OK(tg_zero_new(&z, g_dist, n, p, make_sgd, &o));
    /* a step without gradients changes nothing */
    tg_tensor *before = NULL;
    OK(tg_tensor_clone(&before, p[0]));
    OK(tg_zero_step(z));
    CHECK(same_bits(before, p[0]), "a step without gradients moved a parameter");
    /* consolidation: to out of range, or different */
    tg_st_file *f = NULL, *kept = NULL, *after = NULL;
    OK(tg_st_new(&f));
    refused(tg_zero_consolidate_state_dict(z, last ? world : 0, f, "o"), TG_EINVAL, "to range");
    refused(tg_zero_consolidate_state_dict(z, last ? 1 : 0, f, "o"), TG_EINVAL, "to differs");
    refused(tg_zero_consolidate_state_dict(z, 0, rank == 0 ? NULL : f, "o"), TG_EINVAL,
            "f NULL on to");
    /* a state with a parameter index past the list, on one rank: refused
     * on every rank, and no rank's state changes */
    for (int i = 0; i < n; i++) {
        tg_tensor *gr = NULL;
        OK(tg_tensor_full_like(&gr, p[i], 0.01));
        OK(tg_tensor_set_grad(p[i], gr));
    }
    OK(tg_zero_step(z));
    OK(tg_zero_consolidate_state_dict(z, 0, f, "o"));
    /* rank 0 writes the file, every rank reads it */
    static const char path[] = "dist_zero_refusal.safetensors";
    tg_st_file *file = NULL;
    int rc = rank == 0 ? tg_safetensors_save(f, path) : TG_OK;
    OK(tg_dist_agree(g_dist, rc));
    OK(tg_safetensors_load(&file, path));
    OK(tg_dist_barrier(g_dist));
    if (rank == 0) remove(path);
    /* one more step, so that the file holds another state than the ranks' */
    OK(tg_zero_step(z));
    tg_tensor *extra = NULL;
    OK(tg_tensor_zeros(&extra, TG_F32, 1, (int64_t[]){3}));
    if (last) OK(tg_st_set(file, "o.99.momentum_buffer", extra));
    OK(tg_st_new(&kept));
    if (tg_zero_local(z)) OK(tg_optimizer_state_save(tg_zero_local(z), kept, "k"));
    refused(tg_zero_state_load(z, file, "o"), TG_EINVAL, "a parameter index past the list");
    OK(tg_st_new(&after));
    if (tg_zero_local(z)) OK(tg_optimizer_state_save(tg_zero_local(z), after, "k"));
    same_files(kept, after, "state after a refused load");
    refused(tg_zero_state_load(z, last ? NULL : file, "o"), TG_EINVAL, "NULL f on one rank");
    refused(tg_zero_step(NULL), TG_EINVAL, "step NULL");
    tg_tensor_release(extra);
    tg_tensor_release(before);
    tg_st_free(f);
    tg_st_free(kept);
    tg_st_free(after);
    tg_st_free(file);
    tg_zero_free(z);
    free(p);
    tg_module_release(m);
}
