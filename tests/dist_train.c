/* The DCGAN trainer of examples/dcgan on two ranks (its sources compiled in,
 * as tests/test_train.c does), with a failure on rank 1 at each point of a
 * step in turn: every rank's dcgan_trainer_step must return rank 1's error
 * rather than leave rank 0 waiting in a gradient reduction, and the next
 * step must complete.  The failures are those of the allocations that go
 * through uthash (tg__hash_fail_after: the autograd engine's indexes, the
 * op registry, ...), k = 0, 1, ... until a step makes fewer. */
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "../examples/dcgan/model.c"
#undef TRY
#include "../examples/dcgan/train.c"
#undef TRY
#include "../examples/dcgan/opts.c"

#include "bar_images.h"
#include "core/core.h"
#include "dist_test.h"

/* One step, starting a new epoch when one ends. */
static int step(dcgan_trainer *t)
{
    double d = 0, g = 0;
    int rc = dcgan_trainer_step(t, &d, &g);
    if (rc == 0) rc = dcgan_trainer_next_epoch(t);
    if (rc == 0) rc = dcgan_trainer_step(t, &d, &g);
    return rc;
}

/* Whether v is the same on every rank. */
static bool same_everywhere(int64_t v)
{
    int64_t mx[2] = {v, -v};
    MPI_Allreduce(MPI_IN_PLACE, mx, 2, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    return mx[0] == -mx[1];
}

static void failing_steps(dcgan_loss loss, int n_critic)
{
    const int rank = tg_dist_rank(g_dist);
    tg_dataset *ds = bar_images(64);
    dcgan_opts o = DCGAN_OPTS_INIT;
    o.arch = (dcgan_arch){.nz = 8, .g_ch = 8, .d_ch = 4, .d_batchnorm = loss == DCGAN_LOSS_BCE};
    o.loss = loss;
    o.batch = 16;
    o.n_critic = n_critic;
    o.dist = g_dist;
    dcgan_trainer *t = NULL;
    OK(dcgan_trainer_new(&t, &o, ds));
    const int failed_before = g_failed;
    int k = 0, fired = 1;
    for (; fired && k < 2000; k++) {
        if (rank == 1) tg__hash_fail_after(k);
        int rc = step(t);
        fired = rank == 1 && tg__hash_fail_after(-1) < 0;
        /* fired is rank 1's: every rank learns it */
        int64_t f[1] = {fired};
        MPI_Allreduce(MPI_IN_PLACE, f, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
        fired = f[0] > 0;
        if (!fired) {
            CHECK(rc == 1, "k=%d, no failure: %s: %s", k, tg_status_name(rc), tg_error_message());
            break;
        }
        CHECK(rc < 0 && same_everywhere(rc) &&
                  !strncmp(tg_error_message(), "rank 1: ", 8),
              "k=%d: rank 1 failed, this rank returned %s: %s", k, tg_status_name(rc),
              tg_error_message());
        if (g_failed > failed_before) break;
    }
    CHECK(k > 1, "only %d failure points in a step", k);
    OK(step(t));   /* and the job goes on */
    if (rank == 0) printf("  %s: %d failure points\n", loss == DCGAN_LOSS_BCE ? "bce" : "wgan-gp", k);
    dcgan_trainer_free(t);
    tg_dataset_release(ds);
}

void dcgan_step_failing_on_one_rank_fails_on_every_rank(void)
{
    if (tg_dist_size(g_dist) < 2) return;
    failing_steps(DCGAN_LOSS_BCE, 1);
    failing_steps(DCGAN_LOSS_WGAN_GP, 1);   /* a generator update in every step */
}
