/* tg_dist_init's hold on MPI, run as `mpirun -np 2 tests/test_dist_init`
 * (meson registers it that way; a process of its own, since MPI starts
 * once per process and the test is what happens when tapegrad starts it).
 *
 *   test_dist_init            an init refused on rank 1 (out NULL), then
 *                             good ones on every rank: MPI keeps running
 *                             after the refusal, the good tg_dist talks,
 *                             and the last tg_dist_free finalizes MPI
 *   test_dist_init --give-up  an init refused on rank 1, then every rank
 *                             returns from main without a tg_dist: MPI is
 *                             finalized at exit, so mpirun reports no
 *                             abnormal termination (exit status 0)
 *
 * Rank 1 is known before MPI starts from Open MPI's OMPI_COMM_WORLD_RANK;
 * without it (one process, no mpirun) every rank passes out NULL.  Each
 * rank prints its failed checks and exits non-zero when it had one. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tapegrad/dist.h"
#include "tapegrad/tapegrad.h"

static int g_failed;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            g_failed++;                                                       \
            fprintf(stderr, "dist_init: %s:%d: ", __FILE__, __LINE__);        \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
        }                                                                     \
    } while (0)

static bool mpi_running(void)
{
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    return inited && !finalized;
}

/* An init refused on rank 1 (every rank without OMPI_COMM_WORLD_RANK):
 * TG_EINVAL on every rank, no tg_dist, MPI left running. */
static void refused_init(int *argc, char ***argv)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    const bool refuse = !r || !strcmp(r, "1");
    tg_dist *d = NULL;
    CHECK(!mpi_running(), "MPI runs before tg_dist_init");
    int rc = tg_dist_init(refuse ? NULL : &d, argc, argv);
    CHECK(rc == TG_EINVAL && d == NULL, "init with out NULL on rank 1: %s", tg_status_name(rc));
    CHECK(strstr(tg_error_message(), "out must not be NULL"), "message '%s'",
          tg_error_message());
    CHECK(mpi_running(), "a refused tg_dist_init stopped MPI");
}

/* Good inits after the refused one: the two tg_dists talk, MPI runs until
 * the last of them is freed, and cannot start again then. */
static void inits_after_a_refused_one(void)
{
    tg_dist *d = NULL, *d2 = NULL;
    int rc = tg_dist_init(&d, NULL, NULL);
    CHECK(rc == TG_OK, "init after a refused one: %s: %s", tg_status_name(rc),
          tg_error_message());
    if (rc < 0) return;
    tg_tensor *t = NULL;
    rc = tg_tensor_scalar(&t, TG_I64, tg_dist_rank(d) + 1);
    if (rc >= 0) rc = tg_dist_allreduce_sum(d, t);
    const int n = tg_dist_size(d);
    CHECK(rc == TG_OK && *(const int64_t *)tg_tensor_cdata(t) == n * (n + 1) / 2,
          "allreduce over %d ranks: %s", n, tg_status_name(rc));
    tg_tensor_release(t);
    rc = tg_dist_init(&d2, NULL, NULL);
    CHECK(rc == TG_OK, "a second tg_dist: %s", tg_status_name(rc));
    tg_dist_free(d);
    CHECK(mpi_running(), "MPI stopped while a tg_dist was alive");
    rc = tg_dist_barrier(d2);
    CHECK(rc == TG_OK, "barrier on the second tg_dist: %s", tg_status_name(rc));
    tg_dist_free(d2);
    CHECK(!mpi_running(), "the last tg_dist_free left MPI running");
    d = NULL;
    rc = tg_dist_init(&d, NULL, NULL);
    CHECK(rc == TG_EINVAL && d == NULL && strstr(tg_error_message(), "finalized"),
          "init after MPI_Finalize: %s: %s", tg_status_name(rc), tg_error_message());
}

int main(int argc, char **argv)
{
    const bool give_up = argc > 1 && !strcmp(argv[1], "--give-up");
    refused_init(&argc, &argv);
    if (!give_up) inits_after_a_refused_one();
    return g_failed ? 1 : 0;
}
