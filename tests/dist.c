/* Tests of data-parallel training (tapegrad/dist.h), run as
 * `mpirun -np 2 tests/test_dist` (meson registers it that way).  A plain
 * program rather than a Criterion suite: Criterion forks a worker per test,
 * and an MPI process must not be forked.  Every test runs on every rank;
 * rank 0 prints one line per test and a closing "dist: N passed, N failed";
 * the exit status is non-zero when any check failed on any rank.  Arguments:
 * --timeout S ends the job when a test takes more than S seconds (60), and
 * NAME-PART... runs only the tests whose names contain one of them.
 *
 * This file holds main, the MPI call counters, same_bits and the test of
 * tg_dist_agree; the other tests are in dist_ddp.c, dist_sync_bn.c,
 * dist_ddp_edges.c, dist_errors.c, dist_train.c, dist_ddp_compress.c,
 * dist_collectives.c, dist_zero.c, dist_zero_groups.c, dist_zero_ranks.c and
 * dist_zero_buckets.c (declared in dist_test.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "dist_test.h"

tg_dist *g_dist;
int g_failed, g_checks;
const char *g_test;
int g_allreduces;   /* MPI_Allreduce calls of this process */
int g_bcasts;       /* MPI_Bcast calls of this process */

/* Count the blocking all-reduces and broadcasts (MPI's profiling interface:
 * these definitions take the place of the MPI library's and pass the call
 * on to PMPI_*). */
int MPI_Allreduce(const void *send, void *recv, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm)
{
    g_allreduces++;
    return PMPI_Allreduce(send, recv, count, type, op, comm);
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    g_bcasts++;
    return PMPI_Bcast(buf, count, type, root, comm);
}

bool same_bits(const tg_tensor *a, const tg_tensor *b)
{
    if (!a || !b) return a == b;
    return tg_tensor_dtype(a) == tg_tensor_dtype(b) && tg_tensor_numel(a) == tg_tensor_numel(b) &&
           memcmp(tg_tensor_cdata(a), tg_tensor_cdata(b),
                  (size_t)tg_tensor_numel(a) * tg_dtype_size(tg_tensor_dtype(a))) == 0;
}

/* ---- the tests ---------------------------------------------------------- */

static void an_error_on_one_rank_is_returned_on_every_rank(void)
{
    int rank = tg_dist_rank(g_dist), world = tg_dist_size(g_dist);
    int mine = rank == world - 1 ? tg_error_set(TG_EIO, "cannot open /no/such/data") : TG_OK;
    int rc = tg_dist_agree(g_dist, mine);
    CHECK(rc == TG_EIO, "agree gave %s", tg_status_name(rc));
    char want[64];
    snprintf(want, sizeof want, "rank %d: cannot open /no/such/data", world - 1);
    CHECK(strcmp(tg_error_message(), want) == 0, "message '%s'", tg_error_message());
    /* agreeing again on the agreed error keeps its message */
    rc = tg_dist_agree(g_dist, rc);
    CHECK(rc == TG_EIO && strcmp(tg_error_message(), want) == 0, "again: '%s'",
          tg_error_message());
    CHECK(tg_dist_agree(g_dist, TG_OK) == TG_OK, "all fine");
    /* a model that differs on one rank is refused everywhere */
    tg_module *m = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 1);
    OK(tg_nn_linear_new(&m, rank == 0 ? 3 : 4, 2, true, &rng));
    rc = tg_dist_broadcast_module(g_dist, m);
    CHECK(rc == (world > 1 ? TG_ESHAPE : TG_OK), "broadcast gave %s", tg_status_name(rc));
    tg_tensor **p = NULL;
    int n = 0;
    OK(tg_module_parameters(m, &p, &n));
    tg_ddp *ddp = NULL;
    rc = tg_ddp_new(&ddp, g_dist, n, p, NULL);
    CHECK(rc == (world > 1 ? TG_EINVAL : TG_OK), "ddp_new gave %s", tg_status_name(rc));
    tg_ddp_free(ddp);
    free(p);
    tg_module_release(m);
}

typedef void (*test_fn)(void);

/* A test that leaves a rank waiting in a collective call that another rank
 * never makes ends the job after g_timeout seconds, naming the test, rather
 * than holding the suite until meson's timeout: SIGALRM's handler writes the
 * line prepared in g_alarm_msg and exits, and mpirun ends the other ranks. */
static unsigned g_timeout = 60;
static char g_alarm_msg[256];

static void on_alarm(int sig)
{
    (void)sig;
    ssize_t w = write(STDERR_FILENO, g_alarm_msg, strlen(g_alarm_msg));
    (void)w;
    _exit(3);
}

/* Whether the test named name runs: every test when no filter was given,
 * else those whose name contains one of the filters. */
static bool selected(const char *name, int n_filters, char **filters)
{
    for (int i = 0; i < n_filters; i++)
        if (strstr(name, filters[i])) return true;
    return n_filters == 0;
}

/* test_dist [--timeout SECONDS] [NAME-PART...] */
int main(int argc, char **argv)
{
    int rc = tg_dist_init(&g_dist, &argc, &argv);
    if (rc < 0) {
        fprintf(stderr, "dist_init: %s\n", tg_error_message());
        return 1;
    }
    int n_filters = 0;
    char **filters = argv + 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--timeout") && i + 1 < argc) g_timeout = (unsigned)atoi(argv[++i]);
        else filters[n_filters++] = argv[i];
    }
    signal(SIGALRM, on_alarm);
    tg_set_num_threads(1);
    static const struct { const char *name; test_fn fn; } tests[] = {
        {"broadcast_gives_every_rank_rank_0s_model", broadcast_gives_every_rank_rank_0s_model},
        {"ranks_with_batch_b_match_one_process_with_batch_world_b",
         ranks_with_batch_b_match_one_process_with_batch_world_b},
        {"checkpoint_of_a_ddp_run_resumes_in_one_process",
         checkpoint_of_a_ddp_run_resumes_in_one_process},
        {"bucketed_overlapped_reduction_is_bit_identical_to_one_allreduce",
         bucketed_overlapped_reduction_is_bit_identical_to_one_allreduce},
        {"backward_without_prepare_reduces_nothing", backward_without_prepare_reduces_nothing},
        {"sync_batchnorm_matches_one_batchnorm_over_the_whole_batch",
         sync_batchnorm_matches_one_batchnorm_over_the_whole_batch},
        {"sync_batchnorm_makes_two_allreduces_forward_and_one_backward",
         sync_batchnorm_makes_two_allreduces_forward_and_one_backward},
        {"sync_batchnorm_takes_half_input_as_batchnorm_does",
         sync_batchnorm_takes_half_input_as_batchnorm_does},
        {"convert_sync_batchnorm_keeps_the_init_and_syncs",
         convert_sync_batchnorm_keeps_the_init_and_syncs},
        {"sync_batchnorm_loads_a_state_dict_without_num_batches_tracked",
         sync_batchnorm_loads_a_state_dict_without_num_batches_tracked},
        {"ddp_keeps_every_rank_on_rank_0s_buffers", ddp_keeps_every_rank_on_rank_0s_buffers},
        {"ddp_leaves_the_grad_of_a_parameter_no_rank_used_unset",
         ddp_leaves_the_grad_of_a_parameter_no_rank_used_unset},
        {"ddp_on_a_padded_last_batch_weighs_every_sample_alike",
         ddp_on_a_padded_last_batch_weighs_every_sample_alike},
        {"an_error_on_one_rank_is_returned_on_every_rank",
         an_error_on_one_rank_is_returned_on_every_rank},
        {"dist_init_refused_on_one_rank_is_refused_on_every_rank",
         dist_init_refused_on_one_rank_is_refused_on_every_rank},
        {"broadcast_module_refused_on_one_rank_is_refused_on_every_rank",
         broadcast_module_refused_on_one_rank_is_refused_on_every_rank},
        {"broadcast_tensor_refused_on_one_rank_is_refused_on_every_rank",
         broadcast_tensor_refused_on_one_rank_is_refused_on_every_rank},
        {"allreduce_sum_refused_on_one_rank_is_refused_on_every_rank",
         allreduce_sum_refused_on_one_rank_is_refused_on_every_rank},
        {"ddp_new_refused_on_one_rank_is_refused_on_every_rank",
         ddp_new_refused_on_one_rank_is_refused_on_every_rank},
        {"ddp_new_module_refused_changes_no_rank_s_module",
         ddp_new_module_refused_changes_no_rank_s_module},
        {"ddp_finish_without_prepare_on_one_rank_fails_on_every_rank",
         ddp_finish_without_prepare_on_one_rank_fails_on_every_rank},
        {"ddp_free_in_the_middle_of_a_step_does_not_wait_forever",
         ddp_free_in_the_middle_of_a_step_does_not_wait_forever},
        {"ddp_cancel_on_one_rank_fails_every_rank_s_finish",
         ddp_cancel_on_one_rank_fails_every_rank_s_finish},
        {"sync_batchnorm_refused_input_on_one_rank_is_refused_on_every_rank",
         sync_batchnorm_refused_input_on_one_rank_is_refused_on_every_rank},
        {"sync_batchnorm_backward_failing_on_one_rank_fails_on_every_rank",
         sync_batchnorm_backward_failing_on_one_rank_fails_on_every_rank},
        {"dcgan_step_failing_on_one_rank_fails_on_every_rank",
         dcgan_step_failing_on_one_rank_fails_on_every_rank},
        {"ddp_compressed_grads_follow_the_half_rule_bit_for_bit",
         ddp_compressed_grads_follow_the_half_rule_bit_for_bit},
        {"ddp_compress_f32_is_the_f32_mean_bit_for_bit",
         ddp_compress_f32_is_the_f32_mean_bit_for_bit},
        {"ddp_compressed_training_stays_close_to_uncompressed",
         ddp_compressed_training_stays_close_to_uncompressed},
        {"ddp_compress_refuses_other_dtypes", ddp_compress_refuses_other_dtypes},
        {"ddp_compress_takes_f64_gradients_within_half_s_bound",
         ddp_compress_takes_f64_gradients_within_half_s_bound},
        {"allreduce_gives_every_op_of_every_dtype_as_computed_locally",
         allreduce_gives_every_op_of_every_dtype_as_computed_locally},
        {"all_gather_gives_every_rank_s_tensor_in_a_list_or_one_tensor",
         all_gather_gives_every_rank_s_tensor_in_a_list_or_one_tensor},
        {"reduce_scatter_gives_each_rank_its_reduced_block",
         reduce_scatter_gives_each_rank_its_reduced_block},
        {"all_to_all_single_swaps_blocks",
         all_to_all_single_swaps_blocks},
        {"gather_and_scatter_go_through_the_root",
         gather_and_scatter_go_through_the_root},
        {"send_and_recv_match_by_tag_and_check_the_layout",
         send_and_recv_match_by_tag_and_check_the_layout},
        {"collectives_refused_on_one_rank_are_refused_on_every_rank",
         collectives_refused_on_one_rank_are_refused_on_every_rank},
        {"zero_partition_is_torch_s",
         zero_partition_is_torch_s},
        {"zero_under_ddp_is_bit_identical_to_one_optimizer",
         zero_under_ddp_is_bit_identical_to_one_optimizer},
        {"zero_consolidated_state_is_one_optimizer_s_and_reloads",
         zero_consolidated_state_is_one_optimizer_s_and_reloads},
        {"zero_with_a_rank_that_owns_nothing_still_steps_and_consolidates",
         zero_with_a_rank_that_owns_nothing_still_steps_and_consolidates},
        {"zero_refusals_are_every_rank_s_and_change_nothing",
         zero_refusals_are_every_rank_s_and_change_nothing},
        {"zero_partition_with_groups_is_torch_s", zero_partition_with_groups_is_torch_s},
        {"zero_groups_under_ddp_are_bit_identical_to_one_optimizer",
         zero_groups_under_ddp_are_bit_identical_to_one_optimizer},
        {"zero_add_param_group_half_way_matches_one_optimizer",
         zero_add_param_group_half_way_matches_one_optimizer},
        {"zero_step_closure_steps_as_step_and_ends_on_a_closure_s_error",
         zero_step_closure_steps_as_step_and_ends_on_a_closure_s_error},
        {"zero_group_refusals_are_every_rank_s_and_change_nothing",
         zero_group_refusals_are_every_rank_s_and_change_nothing},
        {"zero_rank_params_and_local_groups_are_torch_s",
         zero_rank_params_and_local_groups_are_torch_s},
        {"zero_empty_local_groups_follow_the_group_options",
         zero_empty_local_groups_follow_the_group_options},
        {"zero_bucket_view_steps_bit_for_bit_with_one_broadcast_per_bucket",
         zero_bucket_view_steps_bit_for_bit_with_one_broadcast_per_bucket},
        {"zero_bucket_view_refusals_are_every_rank_s_and_change_nothing",
         zero_bucket_view_refusals_are_every_rank_s_and_change_nothing},
        {"broadcast_tensor_takes_every_dtype_and_strided_tensors",
         broadcast_tensor_takes_every_dtype_and_strided_tensors},
        {"sync_batchnorm_exports_as_batchnorm", sync_batchnorm_exports_as_batchnorm},
    };
    int n_tests = 0, passed = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (!selected(tests[i].name, n_filters, filters)) continue;
        n_tests++;
        g_test = tests[i].name;
        snprintf(g_alarm_msg, sizeof g_alarm_msg, "rank %d: dist::%s did not end within %u s "
                 "(a rank waits in a collective call)\n", tg_dist_rank(g_dist), g_test, g_timeout);
        int before = g_failed, failed_any = 0;
        alarm(g_timeout);
        tests[i].fn();
        int mine = g_failed > before;
        tg_dist_barrier(g_dist);
        /* a test fails when it failed on any rank */
        tg_tensor *f = NULL;
        tg_tensor_scalar(&f, TG_I64, mine);
        tg_dist_allreduce_sum(g_dist, f);
        failed_any = *(const int64_t *)tg_tensor_cdata(f) > 0;
        tg_tensor_release(f);
        alarm(0);
        passed += !failed_any;
        if (tg_dist_rank(g_dist) == 0)
            printf("[%s] dist::%s\n", failed_any ? "FAIL" : "PASS", tests[i].name);
        fflush(stdout);
    }
    if (tg_dist_rank(g_dist) == 0)
        printf("dist (%d ranks): %d passed, %d failed\n", tg_dist_size(g_dist), passed,
               n_tests - passed);
    tg_dist_free(g_dist);
    return passed == n_tests ? 0 : 1;
}
