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

#include <mpi.h>

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

static bool same_bits(const tg_tensor *a, const tg_tensor *b)
{
    if (!a || !b) return a == b;
    return tg_tensor_dtype(a) == tg_tensor_dtype(b) && tg_tensor_numel(a) == tg_tensor_numel(b) &&
           memcmp(tg_tensor_cdata(a), tg_tensor_cdata(b),
                  (size_t)tg_tensor_numel(a) * tg_dtype_size(tg_tensor_dtype(a))) == 0;
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
