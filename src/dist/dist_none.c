/* src/dist/dist_none.c - tapegrad/dist.h in a build without MPI (meson
 * option mpi disabled or libopenmpi-dev absent): every call is
 * TG_EUNSUPPORTED and says how to get the real thing. */
#include <stdio.h>
#include <stdlib.h>

#include "core/core.h"
#include "tapegrad/dist.h"

#define NO_MPI(fn)                                                            \
    tg__error(TG_EUNSUPPORTED, fn ": tapegrad was built without MPI (install "     \
                                  "libopenmpi-dev and reconfigure with -Dmpi=enabled)")

bool tg_dist_available(void) { return false; }

int tg_dist_init(tg_dist **out, int *argc, char ***argv)
{
    (void)out, (void)argc, (void)argv;
    return NO_MPI("dist_init");
}

int tg_dist_init_comm(tg_dist **out, const void *mpi_comm)
{
    (void)out, (void)mpi_comm;
    return NO_MPI("dist_init_comm");
}

void tg_dist_free(tg_dist *d) { (void)d; }
int tg_dist_rank(const tg_dist *d) { return (void)d, 0; }
int tg_dist_size(const tg_dist *d) { return (void)d, 1; }
int tg_dist_barrier(tg_dist *d) { return (void)d, NO_MPI("dist_barrier"); }
int tg_dist_agree(tg_dist *d, int status) { return (void)d, (void)status, NO_MPI("dist_agree"); }

void tg_dist_abort(tg_dist *d, int status)
{
    (void)d;
    const char *msg = tg_error_message();
    fprintf(stderr, "rank 0: %s (%s)\n", msg[0] ? msg : tg_status_message(status),
            tg_status_name(status));
    exit(1);
}

int tg_dist_broadcast_module(tg_dist *d, tg_module *m)
{
    (void)d, (void)m;
    return NO_MPI("dist_broadcast_module");
}

int tg_dist_broadcast_tensor(tg_dist *d, tg_tensor *t, int root)
{
    (void)d, (void)t, (void)root;
    return NO_MPI("dist_broadcast_tensor");
}

int tg_dist_allreduce_sum(tg_dist *d, tg_tensor *t)
{
    (void)d, (void)t;
    return NO_MPI("dist_allreduce_sum");
}

int tg_dist_checkpoint_save(tg_dist *d, const tg_checkpoint *ck, const char *path,
                            const tg_st_file *extra)
{
    (void)d, (void)ck, (void)path, (void)extra;
    return NO_MPI("dist_checkpoint_save");
}

int tg_dist_sync_batchnorm_new(tg_module **out, tg_dist *d, int64_t num_features,
                               double eps, double momentum)
{
    (void)out, (void)d, (void)num_features, (void)eps, (void)momentum;
    return NO_MPI("dist_sync_batchnorm_new");
}

/* No module is a SyncBatchNorm without MPI. */
int tg_dist_sync_batchnorm_params(const tg_module *m, double *eps, double *momentum)
{
    (void)eps, (void)momentum;
    if (!m) return tg__error(TG_EINVAL, "dist_sync_batchnorm_params: m must not be NULL");
    return tg__error(TG_EINVAL, "dist_sync_batchnorm_params: m is a %s module, not "
                     "SyncBatchNorm (tapegrad was built without MPI)", tg_module_type_name(m));
}

int tg_dist_convert_sync_batchnorm(tg_dist *d, tg_module *m, int *n_converted)
{
    (void)d, (void)m, (void)n_converted;
    return NO_MPI("dist_convert_sync_batchnorm");
}

int tg_ddp_new(tg_ddp **out, tg_dist *d, int n, tg_tensor *const *params, const tg_ddp_opts *o)
{
    (void)out, (void)d, (void)n, (void)params, (void)o;
    return NO_MPI("ddp_new");
}

int tg_ddp_new_module(tg_ddp **out, tg_dist *d, tg_module *m, const tg_ddp_opts *o)
{
    (void)out, (void)d, (void)m, (void)o;
    return NO_MPI("ddp_new_module");
}

void tg_ddp_free(tg_ddp *ddp) { (void)ddp; }
int tg_ddp_prepare(tg_ddp *ddp) { return (void)ddp, NO_MPI("ddp_prepare"); }
int tg_ddp_finish(tg_ddp *ddp) { return (void)ddp, NO_MPI("ddp_finish"); }

int tg_ddp_cancel(tg_ddp *ddp, int status)
{
    (void)ddp, (void)status;
    return NO_MPI("ddp_cancel");
}

int tg_ddp_get_stats(const tg_ddp *ddp, tg_ddp_stats *s)
{
    (void)ddp, (void)s;
    return NO_MPI("ddp_get_stats");
}

int tg_dist_allreduce(tg_dist *d, tg_tensor *t, tg_reduce_op op)
{
    (void)d, (void)t, (void)op;
    return NO_MPI("dist_allreduce");
}

int tg_dist_all_gather(tg_dist *d, tg_tensor *const *outs, const tg_tensor *t)
{
    (void)d, (void)outs, (void)t;
    return NO_MPI("dist_all_gather");
}

int tg_dist_all_gather_into_tensor(tg_dist *d, tg_tensor *out, const tg_tensor *t)
{
    (void)d, (void)out, (void)t;
    return NO_MPI("dist_all_gather_into_tensor");
}

int tg_dist_reduce_scatter_tensor(tg_dist *d, tg_tensor *out, const tg_tensor *in,
                                  tg_reduce_op op)
{
    (void)d, (void)out, (void)in, (void)op;
    return NO_MPI("dist_reduce_scatter_tensor");
}

int tg_dist_all_to_all_single(tg_dist *d, tg_tensor *out, const tg_tensor *in)
{
    (void)d, (void)out, (void)in;
    return NO_MPI("dist_all_to_all_single");
}

int tg_dist_gather(tg_dist *d, const tg_tensor *t, tg_tensor *const *gather_list, int root)
{
    (void)d, (void)t, (void)gather_list, (void)root;
    return NO_MPI("dist_gather");
}

int tg_dist_scatter(tg_dist *d, tg_tensor *t, tg_tensor *const *scatter_list, int root)
{
    (void)d, (void)t, (void)scatter_list, (void)root;
    return NO_MPI("dist_scatter");
}

int tg_dist_send(tg_dist *d, const tg_tensor *t, int dst, int tag)
{
    (void)d, (void)t, (void)dst, (void)tag;
    return NO_MPI("dist_send");
}

int tg_dist_recv(tg_dist *d, tg_tensor *t, int src, int tag)
{
    (void)d, (void)t, (void)src, (void)tag;
    return NO_MPI("dist_recv");
}

int tg_zero_new(tg_zero **out, tg_dist *d, int n, tg_tensor *const *params, tg_zero_make_fn make,
                const void *opts)
{
    (void)out, (void)d, (void)n, (void)params, (void)make, (void)opts;
    return NO_MPI("zero_new");
}

void tg_zero_free(tg_zero *z) { (void)z; }
int tg_zero_step(tg_zero *z) { return (void)z, NO_MPI("zero_step"); }
void tg_zero_zero_grad(tg_zero *z) { (void)z; }

int tg_zero_set_lr(tg_zero *z, double lr)
{
    (void)z, (void)lr;
    return NO_MPI("zero_set_lr");
}

int tg_zero_owner(const tg_zero *z, int i) { return (void)z, (void)i, -1; }
int tg_zero_local_index(const tg_zero *z, int i) { return (void)z, (void)i, -1; }
tg_optimizer *tg_zero_local(const tg_zero *z) { return (void)z, NULL; }
int64_t tg_zero_steps(const tg_zero *z) { return (void)z, 0; }

int tg_zero_consolidate_state_dict(tg_zero *z, int to, tg_st_file *f, const char *prefix)
{
    (void)z, (void)to, (void)f, (void)prefix;
    return NO_MPI("zero_consolidate_state_dict");
}

int tg_zero_state_load(tg_zero *z, const tg_st_file *f, const char *prefix)
{
    (void)z, (void)f, (void)prefix;
    return NO_MPI("zero_state_load");
}

int tg_zero_new_groups(tg_zero **out, tg_dist *d, int n_groups, const tg_zero_group *groups,
                       tg_zero_make_fn make, tg_zero_add_fn add)
{
    (void)out, (void)d, (void)n_groups, (void)groups, (void)make, (void)add;
    return NO_MPI("zero_new");
}

int tg_zero_add_param_group(tg_zero *z, tg_zero_add_fn add, int n, tg_tensor *const *params,
                            const void *opts)
{
    (void)z, (void)add, (void)n, (void)params, (void)opts;
    return NO_MPI("zero_add_param_group");
}

int tg_zero_step_closure(tg_zero *z, tg_closure_fn closure, void *user, double *loss)
{
    (void)z, (void)closure, (void)user, (void)loss;
    return NO_MPI("zero_step_closure");
}

tg_optimizer *tg_zero_optimizer(const tg_zero *z) { return (void)z, NULL; }

int tg_zero_rank_params(int **idx, int *n, const tg_zero *z, int rank, int group)
{
    (void)idx, (void)n, (void)z, (void)rank, (void)group;
    return NO_MPI("zero_rank_params");
}

int tg_zero_set_bucket_view(tg_zero *z, bool on)
{
    (void)z, (void)on;
    return NO_MPI("zero_set_bucket_view");
}

bool tg_zero_bucket_view(const tg_zero *z) { return (void)z, false; }
