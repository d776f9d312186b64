/* The harness of tests/dist.c, shared by the files of the test_dist program
 * (run as `mpirun -np 2 test_dist`): the job's tg_dist, and CHECK / OK,
 * which count a failure on this rank (main reports a test failed when it
 * failed on any rank). */
#ifndef TG_TESTS_DIST_TEST_H
#define TG_TESTS_DIST_TEST_H

#include <stdbool.h>
#include <stdio.h>

#include "tapegrad/dist.h"
#include "tapegrad/tapegrad.h"

extern tg_dist *g_dist;
extern int g_failed, g_checks;
extern const char *g_test;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        g_checks++;                                                           \
        if (!(cond)) {                                                        \
            g_failed++;                                                       \
            fprintf(stderr, "rank %d: %s: %s:%d: ", tg_dist_rank(g_dist), g_test, __FILE__, \
                    __LINE__);                                                \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
        }                                                                     \
    } while (0)
#define OK(call)                                                              \
    do {                                                                      \
        int rc_ = (call);                                                     \
        CHECK(rc_ >= 0, "%s = %s: %s", #call, tg_status_name(rc_), tg_error_message()); \
        if (rc_ < 0) return;                                                  \
    } while (0)

/* This process's MPI_Allreduce and MPI_Bcast calls so far (tests/dist.c
 * counts them through MPI's profiling interface). */
extern int g_allreduces, g_bcasts;

/* Both NULL, or the same dtype, number of elements and bytes (tests/dist.c). */
bool same_bits(const tg_tensor *a, const tg_tensor *b);

/* tests/dist_ddp.c: DDP against one process (the broadcast model, the same
 * training, a checkpoint resumed in one process, bucketed reductions, a
 * backward without prepare). */
void broadcast_gives_every_rank_rank_0s_model(void);
void ranks_with_batch_b_match_one_process_with_batch_world_b(void);
void checkpoint_of_a_ddp_run_resumes_in_one_process(void);
void bucketed_overlapped_reduction_is_bit_identical_to_one_allreduce(void);
void backward_without_prepare_reduces_nothing(void);

/* The tests of tests/dist_sync_bn.c: SyncBatchNorm against one BatchNorm
 * over the whole batch. */
void sync_batchnorm_matches_one_batchnorm_over_the_whole_batch(void);
void sync_batchnorm_takes_half_input_as_batchnorm_does(void);
void sync_batchnorm_makes_two_allreduces_forward_and_one_backward(void);
void convert_sync_batchnorm_keeps_the_init_and_syncs(void);
void sync_batchnorm_loads_a_state_dict_without_num_batches_tracked(void);
void sync_batchnorm_exports_as_batchnorm(void);

/* tests/dist_ddp_edges.c: rank 0's buffers, unused parameters, a padded
 * last batch. */
void ddp_keeps_every_rank_on_rank_0s_buffers(void);
void ddp_leaves_the_grad_of_a_parameter_no_rank_used_unset(void);
void ddp_on_a_padded_last_batch_weighs_every_sample_alike(void);

/* The tests of tests/dist_errors.c: a caller's mistake on one rank gives
 * every rank the same error rather than leaving one waiting. */
void dist_init_refused_on_one_rank_is_refused_on_every_rank(void);
void broadcast_module_refused_on_one_rank_is_refused_on_every_rank(void);
void broadcast_tensor_refused_on_one_rank_is_refused_on_every_rank(void);
void allreduce_sum_refused_on_one_rank_is_refused_on_every_rank(void);
void ddp_new_refused_on_one_rank_is_refused_on_every_rank(void);
void ddp_new_module_refused_changes_no_rank_s_module(void);
void ddp_finish_without_prepare_on_one_rank_fails_on_every_rank(void);
void ddp_free_in_the_middle_of_a_step_does_not_wait_forever(void);
void ddp_cancel_on_one_rank_fails_every_rank_s_finish(void);
void sync_batchnorm_refused_input_on_one_rank_is_refused_on_every_rank(void);
void sync_batchnorm_backward_failing_on_one_rank_fails_on_every_rank(void);

/* tests/dist_train.c: the dcgan example's step. */
void dcgan_step_failing_on_one_rank_fails_on_every_rank(void);

/* tests/dist_ddp_compress.c: gradients all-reduced in bf16 or f16
 * (tg_ddp_opts.compress). */
void ddp_compressed_grads_follow_the_half_rule_bit_for_bit(void);
void ddp_compress_f32_is_the_f32_mean_bit_for_bit(void);
void ddp_compressed_training_stays_close_to_uncompressed(void);
void ddp_compress_refuses_other_dtypes(void);
void ddp_compress_takes_f64_gradients_within_half_s_bound(void);

/* tests/dist_collectives.c: the collectives on tensors, every op and
 * dtype, against values computed on each rank. */
void allreduce_gives_every_op_of_every_dtype_as_computed_locally(void);
void all_gather_gives_every_rank_s_tensor_in_a_list_or_one_tensor(void);
void reduce_scatter_gives_each_rank_its_reduced_block(void);
void all_to_all_single_swaps_blocks(void);
void gather_and_scatter_go_through_the_root(void);
void broadcast_tensor_takes_every_dtype_and_strided_tensors(void);
void send_and_recv_match_by_tag_and_check_the_layout(void);
void collectives_refused_on_one_rank_are_refused_on_every_rank(void);

/* tests/dist_zero.c: ZeroRedundancyOptimizer. */
void zero_partition_is_torch_s(void);
void zero_under_ddp_is_bit_identical_to_one_optimizer(void);
void zero_consolidated_state_is_one_optimizer_s_and_reloads(void);
void zero_with_a_rank_that_owns_nothing_still_steps_and_consolidates(void);
void zero_refusals_are_every_rank_s_and_change_nothing(void);

/* tests/dist_zero_groups.c: its param groups, add_param_group, closures. */
void zero_partition_with_groups_is_torch_s(void);
void zero_groups_under_ddp_are_bit_identical_to_one_optimizer(void);
void zero_add_param_group_half_way_matches_one_optimizer(void);
void zero_step_closure_steps_as_step_and_ends_on_a_closure_s_error(void);
void zero_group_refusals_are_every_rank_s_and_change_nothing(void);
/* Reads "<ints> :" from *s into v (at most cap); their count, *s moved past
 * the colon (dist_zero_groups.c). */
int dist_read_ints(const char **s, int64_t *v, int cap);

/* tests/dist_zero_ranks.c: which parameters each rank owns, the local
 * optimizers' empty groups. */
void zero_rank_params_and_local_groups_are_torch_s(void);
void zero_empty_local_groups_follow_the_group_options(void);

/* tests/dist_zero_buckets.c: parameters_as_bucket_view. */
void zero_bucket_view_steps_bit_for_bit_with_one_broadcast_per_bucket(void);
void zero_bucket_view_refusals_are_every_rank_s_and_change_nothing(void);

/* The MLP of the DDP tests (dist_ddp.c): Linear(in, 16), tanh,
 * Linear(16, 16), tanh, Linear(16, out), initialised from seed. */
tg_module *dist_mlp(uint64_t seed, int64_t in, int64_t out);
/* The DDP tests' data: rows [row0, row0 + n) of the global batch of step
 * `step`, x (n, DIST_IN) from sines and the target y (n, DIST_OUT) a fixed
 * function of x (new tensors, NULL when memory is short). */
enum { DIST_IN = 5, DIST_OUT = 2 };
void dist_batch(tg_tensor **x, tg_tensor **y, int step, int64_t row0, int64_t n);
/* Forward and backward of m (the MSE to dist_batch's target) on those rows. */
int dist_forward_backward(tg_module *m, int step, int64_t row0, int64_t n);

#endif
