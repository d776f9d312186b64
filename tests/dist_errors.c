/* A caller's mistake on one rank of a distributed job: every collective call
 * must return the same error on every rank, rather than leave the ranks
 * without the mistake waiting for a message that never comes.  Each test
 * makes the mistake on rank 1 only (the tests need two ranks and do nothing
 * on one), checks the error on both ranks and that nothing changed, then
 * makes a good call, which completes only if the ranks' sequences of
 * collective calls still match.  A test that hangs is ended by test_dist's
 * per-test timeout. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <mpi.h>

#include "dist/dist_internal.h"
#include "dist_test.h"

/* Sequential(Linear(3, 4), tanh, Linear(4, 2)) drawn from seed. */
static tg_module *small_model(uint64_t seed)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *seq = NULL, *m = NULL;
    tg_nn_sequential_new(&seq);
    tg_nn_linear_new(&m, 3, 4, true, &rng);
    tg_nn_sequential_append(seq, m);
    tg_nn_activation_new(&m, TG_ACT_TANH, 0);
    tg_nn_sequential_append(seq, m);
    tg_nn_linear_new(&m, 4, 2, true, &rng);
    tg_nn_sequential_append(seq, m);
    return seq;
}

/* Backward of sum(m(x)), x (2, 3) filled with scale. */
static int small_backward(tg_module *m, double scale)
{
    tg_tensor *x = NULL, *y = NULL, *s = NULL;
    int rc = tg_tensor_full(&x, TG_F32, 2, (int64_t[]){2, 3}, scale);
    if (rc >= 0) rc = tg_module_forward(m, &y, x);
    if (rc >= 0) rc = tg_sum(&s, y);
    if (rc >= 0) rc = tg_backward(s, NULL, NULL);
    tg_tensor_release(s), tg_tensor_release(y), tg_tensor_release(x);
    return rc;
}

/* Whether every state entry of a and b (same layout) holds the same bits. */
static bool same_state(const tg_module *a, const tg_module *b)
{
    const int n = tg_module_state_count(a);
    if (n < 0 || n != tg_module_state_count(b)) return false;
    for (int i = 0; i < n; i++) {
        tg_tensor *u = NULL, *v = NULL;
        if (tg_module_state_at(a, i, NULL, 0, &u, NULL) < 0 ||
            tg_module_state_at(b, i, NULL, 0, &v, NULL) < 0 || !same_bits(u, v))
            return false;
    }
    return true;
}

/* Whether every rank holds the same bits in every state entry of m. */
static bool ranks_agree_on(const tg_module *m)
{
    tg_module *copy = small_model(999);
    bool same = tg_module_state_count(copy) == tg_module_state_count(m);
    for (int i = 0; same && i < tg_module_state_count(m); i++) {
        tg_tensor *t = NULL, *c = NULL;
        same = tg_module_state_at(m, i, NULL, 0, &t, NULL) >= 0 &&
               tg_module_state_at(copy, i, NULL, 0, &c, NULL) >= 0 &&
               tg_tensor_copy_(c, t) >= 0 && tg_dist_broadcast_tensor(g_dist, c, 0) >= 0 &&
               same_bits(c, t);
    }
    tg_module_release(copy);
    return same;
}

/* Clones of the n parameters' .grad (NULL where there is none). */
static void save_grads(tg_tensor **saved, tg_tensor *const *p, int n)
{
    for (int i = 0; i < n; i++) {
        saved[i] = NULL;
        if (tg_tensor_grad(p[i])) tg_tensor_clone(&saved[i], tg_tensor_grad(p[i]));
    }
}

static bool grads_are(tg_tensor **saved, tg_tensor *const *p, int n)
{
    bool same = true;
    for (int i = 0; i < n; i++) {
        same = same && same_bits(saved[i], tg_tensor_grad(p[i]));
        tg_tensor_release(saved[i]);
    }
    return same;
}

/* ---- tg_dist_init ---------------------------------------------------------- */

void dist_init_refused_on_one_rank_is_refused_on_every_rank(void)
{
    const int rank = tg_dist_rank(g_dist);
    if (tg_dist_size(g_dist) < 2) return;
    tg_dist *d = NULL;
    int rc = tg_dist_init(rank == 1 ? NULL : &d, NULL, NULL);
    CHECK(rc == TG_EINVAL && d == NULL, "dist_init, out NULL on rank 1: %s", tg_status_name(rc));
    CHECK(strstr(tg_error_message(), "out must not be NULL"), "message '%s'", tg_error_message());
    tg_dist_free(d);
    d = NULL;
    MPI_Comm world = MPI_COMM_WORLD;
    rc = tg_dist_init_comm(rank == 1 ? NULL : &d, &world);
    CHECK(rc == TG_EINVAL && d == NULL, "dist_init_comm, out NULL on rank 1: %s",
          tg_status_name(rc));
    tg_dist_free(d);
    d = NULL;
    OK(tg_dist_init(&d, NULL, NULL));
    CHECK(tg_dist_rank(d) == rank, "rank %d", tg_dist_rank(d));
    tg_dist_free(d);
}

/* ---- broadcast and all-reduce ---------------------------------------------- */

/* small_model(seed) five Sequentials deep, under names of 60 characters: its
 * dotted state names are longer than TG_MODULE_NAME_MAX - 1. */
static tg_module *deep_model(uint64_t seed)
{
    char name[61];
    memset(name, 'a', 60);
    name[60] = '\0';
    tg_module *m = small_model(seed);
    for (int i = 0; i < 5; i++) {
        tg_module *outer = NULL;
        tg_nn_sequential_new(&outer);
        tg_module_add_child(outer, name, m);
        m = outer;
    }
    return m;
}

void broadcast_module_refused_on_one_rank_is_refused_on_every_rank(void)
{
    const int rank = tg_dist_rank(g_dist);
    if (tg_dist_size(g_dist) < 2) return;
    tg_module *m = small_model(10 + (uint64_t)rank), *was = small_model(10 + (uint64_t)rank);
    int rc = tg_dist_broadcast_module(g_dist, rank == 1 ? NULL : m);
    CHECK(rc == TG_EINVAL, "m NULL on rank 1: %s", tg_status_name(rc));
    CHECK(same_state(m, was), "m NULL on rank 1: the module changed");
    /* rank 1's state names do not fit: its layout cannot be taken */
    tg_module *deep = rank == 1 ? deep_model(10 + (uint64_t)rank) : tg_module_retain(m);
    rc = tg_dist_broadcast_module(g_dist, deep);
    CHECK(rc == TG_EINVAL && strstr(tg_error_message(), "rank 1: "),
          "a name too long on rank 1: %s: %s", tg_status_name(rc), tg_error_message());
    CHECK(same_state(m, was), "a name too long on rank 1: the module changed");
    tg_module_release(deep);
    OK(tg_dist_broadcast_module(g_dist, m));
    CHECK(ranks_agree_on(m), "the ranks' modules differ after a broadcast");
    tg_module_release(was);
    tg_module_release(m);
}

void broadcast_tensor_refused_on_one_rank_is_refused_on_every_rank(void)
{
    const int rank = tg_dist_rank(g_dist);
    if (tg_dist_size(g_dist) < 2) return;
    tg_tensor *t = NULL, *was = NULL;
    OK(tg_tensor_full(&t, TG_F32, 1, (int64_t[]){3}, 1.0 + rank));
    OK(tg_tensor_clone(&was, t));
    int rc = tg_dist_broadcast_tensor(g_dist, rank == 1 ? NULL : t, 0);
    CHECK(rc == TG_EINVAL && same_bits(t, was), "t NULL on rank 1: %s", tg_status_name(rc));
    rc = tg_dist_broadcast_tensor(g_dist, t, rank);
    CHECK(rc == TG_EINVAL && same_bits(t, was), "root = rank: %s", tg_status_name(rc));
    rc = tg_dist_broadcast_tensor(g_dist, t, rank == 1 ? 5 : 0);
    CHECK(rc == TG_EINVAL && same_bits(t, was), "root 5 on rank 1: %s", tg_status_name(rc));
    OK(tg_dist_broadcast_tensor(g_dist, t, 1));
    float *v = tg_tensor_data(t);
    CHECK(v[0] == 2.0f && v[2] == 2.0f, "after a good broadcast from rank 1: %g", v[0]);
    tg_tensor_release(was);
    tg_tensor_release(t);
}

void allreduce_sum_refused_on_one_rank_is_refused_on_every_rank(void)
{
    const int rank = tg_dist_rank(g_dist);
    if (tg_dist_size(g_dist) < 2) return;
    tg_tensor *t = NULL, *was = NULL, *longer = NULL, *f64 = NULL;
    OK(tg_tensor_full(&t, TG_F32, 1, (int64_t[]){3}, 1.0 + rank));
    OK(tg_tensor_clone(&was, t));
    OK(tg_tensor_full(&longer, TG_F32, 1, (int64_t[]){4}, 1.0));
    OK(tg_tensor_full(&f64, TG_F64, 1, (int64_t[]){3}, 1.0));
    int rc = tg_dist_allreduce_sum(g_dist, rank == 1 ? NULL : t);
    CHECK(rc == TG_EINVAL && same_bits(t, was), "t NULL on rank 1: %s", tg_status_name(rc));
    rc = tg_dist_allreduce_sum(g_dist, rank == 1 ? longer : t);
    CHECK(rc == TG_ESHAPE && same_bits(t, was), "(3) and (4): %s", tg_status_name(rc));
    rc = tg_dist_allreduce_sum(g_dist, rank == 1 ? f64 : t);
    CHECK(rc == TG_EDTYPE && same_bits(t, was), "f32 and f64: %s", tg_status_name(rc));
    OK(tg_dist_allreduce_sum(g_dist, t));
    float *v = tg_tensor_data(t);
    CHECK(v[0] == 3.0f && v[2] == 3.0f, "1 + 2 = %g", v[0]);
    tg_tensor_release(f64), tg_tensor_release(longer), tg_tensor_release(was);
    tg_tensor_release(t);
}

/* ---- tg_ddp ---------------------------------------------------------------- */

/* Lowers this process's address-space limit to what it uses now plus
 * headroom bytes (returns the old limit in *old), so that a larger
 * allocation fails. */
static bool limit_memory(struct rlimit *old, size_t headroom)
{
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return false;
    bool ok = fscanf(f, "%ld", &pages) == 1;
    fclose(f);
    if (!ok || getrlimit(RLIMIT_AS, old) != 0) return false;
    struct rlimit now = *old;
    now.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + headroom;
    return setrlimit(RLIMIT_AS, &now) == 0;
}

void ddp_new_refused_on_one_rank_is_refused_on_every_rank(void)
{
    const int rank = tg_dist_rank(g_dist);
    if (tg_dist_size(g_dist) < 2) return;
    tg_tensor *w = NULL;
    tg_ddp *ddp = NULL;
    OK(tg_tensor_zeros(&w, TG_F32, 1, (int64_t[]){(int64_t)1 << 22}));   /* 16 MB */
    OK(tg_tensor_set_requires_grad(w, true));
    int rc = tg_ddp_new(rank == 1 ? NULL : &ddp, g_dist, 1, &w, NULL);
    CHECK(rc == TG_EINVAL && !ddp, "out NULL on rank 1: %s", tg_status_name(rc));
    tg_ddp_free(ddp);
    ddp = NULL;
    /* bucket plans that differ would send all-reduces of other sizes */
    tg_ddp_opts o = TG_DDP_OPTS_INIT;
    o.bucket_cap_bytes = rank == 1 ? 1 : (size_t)25 << 20;
    rc = tg_ddp_new(&ddp, g_dist, 1, &w, &o);
    CHECK(rc == TG_EINVAL && !ddp, "bucket caps that differ: %s", tg_status_name(rc));
    tg_ddp_free(ddp);
    ddp = NULL;
    /* rank 1 cannot allocate the 16 MB bucket */
    struct rlimit old;
    bool limited = rank == 1 && limit_memory(&old, (size_t)8 << 20);
    rc = tg_ddp_new(&ddp, g_dist, 1, &w, NULL);
    if (limited) setrlimit(RLIMIT_AS, &old);
    CHECK(rc == TG_ENOMEM && !ddp, "no memory on rank 1: %s: %s", tg_status_name(rc),
          tg_error_message());
    tg_ddp_free(ddp);
    ddp = NULL;
    OK(tg_ddp_new(&ddp, g_dist, 1, &w, NULL));
    tg_ddp_free(ddp);
    tg_tensor_release(w);
}

void ddp_new_module_refused_changes_no_rank_s_module(void)
{
    const int rank = tg_dist_rank(g_dist);
    if (tg_dist_size(g_dist) < 2) return;
    tg_module *m = small_model(20 + (uint64_t)rank), *was = small_model(20 + (uint64_t)rank);
    tg_module *half = small_model(20 + (uint64_t)rank), *half_was = small_model(20 + (uint64_t)rank);
    tg_ddp *ddp = NULL;
    int rc = tg_ddp_new_module(rank == 1 ? NULL : &ddp, g_dist, m, NULL);
    CHECK(rc == TG_EINVAL && !ddp && same_state(m, was), "out NULL on rank 1: %s",
          tg_status_name(rc));
    /* broadcast_buffers that differ: one rank would broadcast after each step */
    tg_ddp_opts o = TG_DDP_OPTS_INIT;
    o.broadcast_buffers = rank == 0;
    rc = tg_ddp_new_module(&ddp, g_dist, m, &o);
    CHECK(rc == TG_EINVAL && !ddp && same_state(m, was), "broadcast_buffers that differ: %s",
          tg_status_name(rc));
    tg_ddp_free(ddp);
    ddp = NULL;
    /* rank 1's module has another layout */
    tg_module *other = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 1);
    if (rank == 1) OK(tg_nn_linear_new(&other, 3, 2, true, &rng));
    rc = tg_ddp_new_module(&ddp, g_dist, rank == 1 ? other : m, NULL);
    CHECK(rc == TG_ESHAPE && !ddp && same_state(m, was), "another layout on rank 1: %s",
          tg_status_name(rc));
    tg_module_release(other);
    /* f16 parameters, refused by every rank: no module takes rank 0's state */
    OK(tg_module_to_dtype(half, TG_F16));
    OK(tg_module_to_dtype(half_was, TG_F16));
    rc = tg_ddp_new_module(&ddp, g_dist, half, NULL);
    CHECK(rc == TG_EDTYPE && !ddp, "f16 parameters: %s", tg_status_name(rc));
    CHECK(same_state(half, half_was), "a refused tg_ddp_new_module changed the module");
    tg_ddp_free(ddp);
    ddp = NULL;
    OK(tg_ddp_new_module(&ddp, g_dist, m, NULL));
    CHECK(ranks_agree_on(m), "the ranks' modules differ after tg_ddp_new_module");
    tg_ddp_free(ddp);
    tg_module_release(half_was), tg_module_release(half);
    tg_module_release(was), tg_module_release(m);
}

/* A step whose backward ran on rank 0 only, with one bucket per parameter:
 * rank 0's hooks have started every bucket's all-reduce, rank 1's none. */
static int half_a_step(tg_module *m, tg_ddp **ddp)
{
    tg_ddp_opts o = TG_DDP_OPTS_INIT;
    o.bucket_cap_bytes = 1;
    int rc = tg_ddp_new_module(ddp, g_dist, m, &o);
    if (rc >= 0) rc = tg_ddp_prepare(*ddp);
    if (rc >= 0 && tg_dist_rank(g_dist) == 0) rc = small_backward(m, 1.0);
    return rc;
}

void ddp_finish_without_prepare_on_one_rank_fails_on_every_rank(void)
{
    const int rank = tg_dist_rank(g_dist);
    if (tg_dist_size(g_dist) < 2) return;
    tg_module *m = small_model(30);
    tg_tensor **p = NULL, *saved[4];
    int n = 0;
    tg_ddp *ddp = NULL;
    tg_ddp_opts o = TG_DDP_OPTS_INIT;
    o.bucket_cap_bytes = 1;
    OK(tg_ddp_new_module(&ddp, g_dist, m, &o));
    OK(tg_module_parameters(m, &p, &n));
    if (rank == 0) OK(tg_ddp_prepare(ddp));   /* rank 1 forgets it */
    OK(small_backward(m, 1.0 + rank));
    save_grads(saved, p, n);
    int rc = tg_ddp_finish(ddp);
    CHECK(rc == TG_EINVAL && strstr(tg_error_message(), "no tg_ddp_prepare"),
          "prepare on rank 0 only: %s: %s", tg_status_name(rc), tg_error_message());
    CHECK(grads_are(saved, p, n), "a failed finish changed a gradient");
    /* and the next step is reduced as usual */
    for (int i = 0; i < n; i++) tg_tensor_zero_grad(p[i]);
    OK(tg_ddp_prepare(ddp));
    OK(small_backward(m, 1.0 + rank));
    OK(tg_ddp_finish(ddp));
    for (int i = 0; i < n; i++) {
        tg_tensor *g = NULL;
        OK(tg_tensor_clone(&g, tg_tensor_grad(p[i])));
        OK(tg_dist_broadcast_tensor(g_dist, g, 0));
        CHECK(same_bits(g, tg_tensor_grad(p[i])), "grad %d differs between the ranks", i);
        tg_tensor_release(g);
    }
    tg_ddp_free(ddp);
    free(p);
    tg_module_release(m);
}

void ddp_free_in_the_middle_of_a_step_does_not_wait_forever(void)
{
    const int rank = tg_dist_rank(g_dist);
    if (tg_dist_size(g_dist) < 2) return;
    tg_module *m = small_model(40);
    tg_ddp *ddp = NULL;
    /* every rank frees: rank 0 with its buckets in flight */
    OK(half_a_step(m, &ddp));
    tg_ddp_free(ddp);
    ddp = NULL;
    /* rank 1 frees, rank 0 finishes: its finish fails, with no gradient changed */
    tg_tensor **p = NULL, *saved[4];
    int n = 0;
    OK(tg_module_parameters(m, &p, &n));
    for (int i = 0; i < n; i++) tg_tensor_zero_grad(p[i]);
    OK(half_a_step(m, &ddp));
    if (rank == 1) {
        tg_ddp_free(ddp);
        ddp = NULL;
    } else {
        save_grads(saved, p, n);
        int rc = tg_ddp_finish(ddp);
        CHECK(rc == TG_EINVAL && strstr(tg_error_message(), "rank 1: ddp_free"),
              "finish against a free: %s: %s", tg_status_name(rc), tg_error_message());
        CHECK(grads_are(saved, p, n), "a failed finish changed a gradient");
    }
    tg_ddp_free(ddp);
    free(p);
    OK(tg_dist_broadcast_module(g_dist, m));
    tg_module_release(m);
}

/* ---- SyncBatchNorm --------------------------------------------------------- */

void sync_batchnorm_refused_input_on_one_rank_is_refused_on_every_rank(void)
{
    const int rank = tg_dist_rank(g_dist);
    if (tg_dist_size(g_dist) < 2) return;
    tg_module *sbn = NULL;
    tg_tensor *x = NULL, *x4 = NULL, *xi = NULL, *y = NULL, *rm = NULL;
    OK(tg_dist_sync_batchnorm_new(&sbn, g_dist, 3, 1e-5, 0.1));
    OK(tg_tensor_full(&x, TG_F32, 4, (int64_t[]){2, 3, 4, 5}, 1.0 + rank));
    OK(tg_tensor_full(&x4, TG_F32, 4, (int64_t[]){2, 4, 4, 5}, 1.0));
    OK(tg_tensor_zeros(&xi, TG_I64, 4, (int64_t[]){2, 3, 4, 5}));
    OK(tg_tensor_clone(&rm, tg_module_find(sbn, "running_mean")));
    int rc = tg_module_forward(sbn, &y, rank == 1 ? x4 : x);
    CHECK(rc == TG_ESHAPE && !y, "4 channels on rank 1: %s", tg_status_name(rc));
    rc = tg_module_forward(sbn, &y, rank == 1 ? xi : x);
    CHECK(rc == TG_EDTYPE && !y, "i64 input on rank 1: %s", tg_status_name(rc));
    /* an empty batch on every rank has no statistics: refused, as BatchNorm
     * refuses one value per channel */
    tg_tensor *x0 = NULL;
    OK(tg_tensor_zeros(&x0, TG_F32, 4, (int64_t[]){0, 3, 4, 5}));
    rc = tg_module_forward(sbn, &y, x0);
    tg_tensor_release(x0);
    CHECK(rc == TG_EINVAL && !y, "empty batches: %s", tg_status_name(rc));
    CHECK(same_bits(rm, tg_module_find(sbn, "running_mean")), "a refused forward changed "
          "running_mean");
    OK(tg_module_forward(sbn, &y, x));
    double mean = 0;
    OK(tg_tensor_get_flat(tg_module_find(sbn, "running_mean"), 0, &mean));
    CHECK(mean > 0.149 && mean < 0.151, "running_mean %g, not 0.1 * 1.5", mean);
    tg_tensor_release(y), tg_tensor_release(rm), tg_tensor_release(xi);
    tg_tensor_release(x4), tg_tensor_release(x);
    tg_module_release(sbn);
}

/* sum((SyncBatchNorm(x))^2) for x (2, 3, 4, 5) of a ramp from phase, and
 * its backward. */
static int sbn_backward(tg_module *sbn, double phase)
{
    tg_tensor *x = NULL, *y = NULL, *y2 = NULL, *s = NULL;
    int rc = tg_tensor_zeros(&x, TG_F32, 4, (int64_t[]){2, 3, 4, 5});
    for (int64_t i = 0; rc >= 0 && i < 120; i++) rc = tg_tensor_set_flat(x, i, phase + 0.1 * i);
    if (rc >= 0) rc = tg_tensor_set_requires_grad(x, true);
    if (rc >= 0) rc = tg_module_forward(sbn, &y, x);
    if (rc >= 0) rc = tg_mul(&y2, y, y);
    if (rc >= 0) rc = tg_sum(&s, y2);
    if (rc >= 0) rc = tg_backward(s, NULL, NULL);
    tg_tensor_release(s), tg_tensor_release(y2), tg_tensor_release(y), tg_tensor_release(x);
    return rc;
}

/* A SyncBatchNorm's backward all-reduce fails on rank 1 (its output, no
 * memory: injected): every rank's backward returns rank 1's error rather
 * than rank 0 waiting in the all-reduce, and the next step completes. */
void sync_batchnorm_backward_failing_on_one_rank_fails_on_every_rank(void)
{
    const int rank = tg_dist_rank(g_dist);
    if (tg_dist_size(g_dist) < 2) return;
    tg_module *sbn = NULL;
    OK(tg_dist_sync_batchnorm_new(&sbn, g_dist, 3, 1e-5, 0.1));
    /* the forward's all-reduce passes, the backward's fails */
    if (rank == 1) tg__sbn_fail_after(1);
    int rc = sbn_backward(sbn, rank);
    tg__sbn_fail_after(-1);
    CHECK(rc == TG_ENOMEM && strstr(tg_error_message(), "rank 1: sync_batchnorm: out of memory"),
          "backward failing on rank 1: %s: %s", tg_status_name(rc), tg_error_message());
    /* in a forward: refused on every rank as well */
    if (rank == 1) tg__sbn_fail_after(0);
    rc = sbn_backward(sbn, rank);
    tg__sbn_fail_after(-1);
    CHECK(rc == TG_ENOMEM && strstr(tg_error_message(), "rank 1: sync_batchnorm: out of memory"),
          "forward failing on rank 1: %s: %s", tg_status_name(rc), tg_error_message());
    OK(sbn_backward(sbn, rank));
    tg_module_release(sbn);
}

/* A rank whose backward failed ends the step with tg_ddp_cancel: the other
 * rank's tg_ddp_finish returns that failure, no gradient changes, and the
 * next step is reduced as usual. */
void ddp_cancel_on_one_rank_fails_every_rank_s_finish(void)
{
    const int rank = tg_dist_rank(g_dist);
    if (tg_dist_size(g_dist) < 2) return;
    tg_module *m = small_model(50);
    tg_tensor **p = NULL, *saved[4];
    int n = 0;
    tg_ddp *ddp = NULL;
    OK(half_a_step(m, &ddp));
    OK(tg_module_parameters(m, &p, &n));
    save_grads(saved, p, n);
    int rc = rank == 1 ? tg_ddp_cancel(ddp, tg_error_set(TG_ENOMEM, "backward: out of memory"))
                       : tg_ddp_finish(ddp);
    CHECK(rc == TG_ENOMEM && !strcmp(tg_error_message(), "rank 1: backward: out of memory"),
          "%s: %s: %s", rank == 1 ? "cancel" : "finish", tg_status_name(rc), tg_error_message());
    CHECK(grads_are(saved, p, n), "a cancelled step changed a gradient");
    /* a status that is not an error is refused, on every rank */
    OK(tg_ddp_prepare(ddp));
    rc = rank == 1 ? tg_ddp_cancel(ddp, TG_OK) : tg_ddp_finish(ddp);
    CHECK(rc == TG_EINVAL && strstr(tg_error_message(), "must be a negative"), "cancel(TG_OK): %s",
          tg_status_name(rc));
    for (int i = 0; i < n; i++) tg_tensor_zero_grad(p[i]);
    OK(tg_ddp_prepare(ddp));
    OK(small_backward(m, 1.0 + rank));
    OK(tg_ddp_finish(ddp));
    tg_tensor *g = NULL;
    OK(tg_tensor_clone(&g, tg_tensor_grad(p[0])));
    OK(tg_dist_broadcast_tensor(g_dist, g, 1));
    CHECK(same_bits(g, tg_tensor_grad(p[0])), "the step after a cancelled one is not averaged");
    tg_tensor_release(g);
    tg_ddp_free(ddp);
    free(p);
    tg_module_release(m);
}
