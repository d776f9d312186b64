/* src/dist/dist.c - the MPI context: joining the job, agreeing on errors,
 * broadcasting a model, and the rank-0 checkpoint.
 *
 * Every function here that communicates is collective over d->comm.  MPI
 * errors return codes on that communicator (MPI_ERRORS_RETURN) and become
 * TG_EIO; a check that can fail on some ranks only is followed by
 * tg_dist_agree, so that every rank returns the same status and none is
 * left waiting in a collective call the others skipped. */
#include <stdio.h>
#include <string.h>

#include "dist/dist_internal.h"

/* The longest message tg_dist_agree passes from the failing rank. */
#define AGREE_MSG_MAX 512

bool tg_dist_available(void) { return true; }

int tg__mpi_check(int mpi_rc, const char *what)
{
    if (mpi_rc == MPI_SUCCESS) return TG_OK;
    char s[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(mpi_rc, s, &len);
    return tg__error(TG_EIO, "%s: MPI error %d: %s", what, mpi_rc, s);
}

MPI_Datatype tg__mpi_type(tg_dtype dt)
{
    switch (dt) {
    case TG_F32: return MPI_FLOAT;
    case TG_F64: return MPI_DOUBLE;
    case TG_I64: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL;
    }
}

static int dist_make(tg_dist **out, MPI_Comm comm, bool finalize)
{
    tg_dist *d = tg__calloc(1, sizeof *d);
    if (!d) return TG_ENOMEM;
    int rc = tg__mpi_check(MPI_Comm_dup(comm, &d->comm), "dist_init: MPI_Comm_dup");
    if (rc < 0) {
        free(d);
        return rc;
    }
    MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(d->comm, &d->rank);
    MPI_Comm_size(d->comm, &d->size);
    d->finalize = finalize;
    *out = d;
    return TG_OK;
}

int tg_dist_init(tg_dist **out, int *argc, char ***argv)
{
    TG_CHECK(out != NULL, TG_EINVAL, "dist_init: out must not be NULL");
    int inited = 0, finalized = 0, provided = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    TG_CHECK(!finalized, TG_EINVAL,
             "dist_init: MPI was finalized in this process and cannot start again");
    if (!inited)
        TG_TRY(tg__mpi_check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided),
                             "dist_init: MPI_Init_thread"));
    int rc = dist_make(out, MPI_COMM_WORLD, !inited);
    if (rc < 0 && !inited) MPI_Finalize();
    return rc;
}

int tg_dist_init_comm(tg_dist **out, const void *mpi_comm)
{
    TG_CHECK(out != NULL && mpi_comm != NULL, TG_EINVAL,
             "dist_init_comm: out and mpi_comm must not be NULL");
    int inited = 0;
    MPI_Initialized(&inited);
    TG_CHECK(inited, TG_EINVAL, "dist_init_comm: MPI is not initialised (call MPI_Init, or "
                                "use tg_dist_init)");
    return dist_make(out, *(const MPI_Comm *)mpi_comm, false);
}

void tg_dist_free(tg_dist *d)
{
    if (!d) return;
    MPI_Comm_free(&d->comm);
    if (d->finalize) MPI_Finalize();
    free(d);
}

int tg_dist_rank(const tg_dist *d) { return d ? d->rank : 0; }
int tg_dist_size(const tg_dist *d) { return d ? d->size : 1; }

int tg_dist_barrier(tg_dist *d)
{
    TG_CHECK(d != NULL, TG_EINVAL, "dist_barrier: d must not be NULL");
    return tg__mpi_check(MPI_Barrier(d->comm), "dist_barrier");
}

int tg_dist_agree(tg_dist *d, int status)
{
    TG_CHECK(d != NULL, TG_EINVAL, "dist_agree: d must not be NULL");
    /* MINLOC over (status, rank): the most negative status, lowest rank on ties */
    int in[2] = {status < 0 ? status : 0, d->rank}, worst[2] = {0, 0};
    TG_TRY(tg__mpi_check(MPI_Allreduce(in, worst, 1, MPI_2INT, MPI_MINLOC, d->comm),
                         "dist_agree"));
    if (worst[0] >= 0) return TG_OK;
    char msg[AGREE_MSG_MAX] = "";
    if (d->rank == worst[1]) snprintf(msg, sizeof msg, "%s", tg_error_message());
    TG_TRY(tg__mpi_check(MPI_Bcast(msg, AGREE_MSG_MAX, MPI_CHAR, worst[1], d->comm),
                         "dist_agree"));
    msg[AGREE_MSG_MAX - 1] = '\0';
    return tg__error(worst[0], "rank %d: %s", worst[1],
                     msg[0] ? msg : tg_status_message(worst[0]));
}

void tg_dist_abort(tg_dist *d, int status)
{
    const char *msg = tg_error_message();
    fprintf(stderr, "rank %d: %s (%s)\n", tg_dist_rank(d),
            msg[0] ? msg : tg_status_message(status), tg_status_name(status));
    fflush(stderr);
    MPI_Abort(d ? d->comm : MPI_COMM_WORLD, 1);
    abort();   /* MPI_Abort does not return; in case it does */
}

/* ---- broadcast ------------------------------------------------------------ */

/* FNV-1a over bytes, to compare the layout of a model across ranks. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* A fingerprint of (dtype, shape) of every state entry of m, and whether all
 * are contiguous. */
static int module_layout(const tg_module *m, uint64_t *hash, bool *contiguous)
{
    int n = tg_module_state_count(m);
    if (n < 0) return n;
    uint64_t h = fnv(0xcbf29ce484222325ull, &n, sizeof n);
    *contiguous = true;
    for (int i = 0; i < n; i++) {
        tg_tensor *t = NULL;
        TG_TRY(tg_module_state_at(m, i, NULL, 0, &t, NULL));
        int dt = (int)tg_tensor_dtype(t), nd = tg_tensor_ndim(t);
        h = fnv(h, &dt, sizeof dt);
        h = fnv(h, &nd, sizeof nd);
        h = fnv(h, tg_tensor_shape(t), sizeof(int64_t) * (size_t)nd);
        *contiguous = *contiguous && tg_tensor_is_contiguous(t);
    }
    *hash = h;
    return TG_OK;
}

int tg__dist_bcast_bytes(tg_dist *d, tg_tensor *t, int root)
{
    size_t nbytes = (size_t)tg_tensor_numel(t) * tg_dtype_size(tg_tensor_dtype(t));
    unsigned char *p = tg_tensor_data(t);
    /* in pieces of at most INT_MAX bytes: MPI counts are int */
    for (size_t off = 0; off < nbytes;) {
        size_t k = nbytes - off < (size_t)1 << 30 ? nbytes - off : (size_t)1 << 30;
        TG_TRY(tg__mpi_check(MPI_Bcast(p + off, (int)k, MPI_BYTE, root, d->comm),
                             "dist_broadcast"));
        off += k;
    }
    if (d->rank != root) tg_tensor_bump_version(t);
    return TG_OK;
}

int tg_dist_broadcast_module(tg_dist *d, tg_module *m)
{
    TG_CHECK(d != NULL && m != NULL, TG_EINVAL,
             "dist_broadcast_module: d and m must not be NULL");
    uint64_t mine = 0, root = 0;
    bool contiguous = false;
    int rc = module_layout(m, &mine, &contiguous);
    root = mine;
    if (rc >= 0)
        rc = tg__mpi_check(MPI_Bcast(&root, 1, MPI_UINT64_T, 0, d->comm), "dist_broadcast_module");
    if (rc >= 0 && root != mine)
        rc = tg__error(TG_ESHAPE, "dist_broadcast_module: this rank's module has other state "
                                  "entries, shapes or dtypes than rank 0's");
    if (rc >= 0 && !contiguous)
        rc = tg__error(TG_EINVAL, "dist_broadcast_module: a parameter or buffer is not "
                                  "contiguous");
    TG_TRY(tg_dist_agree(d, rc));
    const int n = tg_module_state_count(m);
    for (int i = 0; i < n; i++) {
        tg_tensor *t = NULL;
        TG_TRY(tg_module_state_at(m, i, NULL, 0, &t, NULL));
        TG_TRY(tg__dist_bcast_bytes(d, t, 0));
    }
    return TG_OK;
}

int tg_dist_broadcast_tensor(tg_dist *d, tg_tensor *t, int root)
{
    TG_CHECK(d != NULL && t != NULL, TG_EINVAL, "dist_broadcast_tensor: d and t must not be NULL");
    TG_CHECK(root >= 0 && root < d->size, TG_EINVAL,
             "dist_broadcast_tensor: root=%d must be in [0, %d)", root, d->size);
    int64_t desc[2 + TG_MAX_DIMS] = {tg_tensor_dtype(t), tg_tensor_ndim(t)}, theirs[2 + TG_MAX_DIMS];
    memcpy(desc + 2, tg_tensor_shape(t), sizeof(int64_t) * (size_t)tg_tensor_ndim(t));
    memcpy(theirs, desc, sizeof desc);
    int rc = tg__mpi_check(MPI_Bcast(theirs, 2 + TG_MAX_DIMS, MPI_INT64_T, root, d->comm),
                           "dist_broadcast_tensor");
    if (rc >= 0 && memcmp(theirs, desc, sizeof desc) != 0)
        rc = tg__error(TG_EINVAL, "dist_broadcast_tensor: t's shape or dtype differs from "
                                  "rank %d's", root);
    if (rc >= 0 && !tg_tensor_is_contiguous(t))
        rc = tg__error(TG_EINVAL, "dist_broadcast_tensor: t must be contiguous");
    TG_TRY(tg_dist_agree(d, rc));
    return tg__dist_bcast_bytes(d, t, root);
}

int tg_dist_allreduce_sum(tg_dist *d, tg_tensor *t)
{
    TG_CHECK(d != NULL && t != NULL, TG_EINVAL, "dist_allreduce_sum: d and t must not be NULL");
    MPI_Datatype mt = tg__mpi_type(tg_tensor_dtype(t));
    int rc = TG_OK;
    if (mt == MPI_DATATYPE_NULL)
        rc = tg__error(TG_EDTYPE, "dist_allreduce_sum: t is %s; f32, f64 or i64 only",
                       tg_dtype_name(tg_tensor_dtype(t)));
    else if (!tg_tensor_is_contiguous(t))
        rc = tg__error(TG_EINVAL, "dist_allreduce_sum: t must be contiguous");
    else if (tg_tensor_numel(t) > INT32_MAX)
        rc = tg__error(TG_EINVAL, "dist_allreduce_sum: t has %lld elements; at most 2^31 - 1",
                       (long long)tg_tensor_numel(t));
    TG_TRY(tg_dist_agree(d, rc));
    return tg__dist_allreduce_sum(d, t);
}

int tg__dist_allreduce_sum(tg_dist *d, tg_tensor *t)
{
    MPI_Datatype mt = tg__mpi_type(tg_tensor_dtype(t));
    TG_ASSERT(mt != MPI_DATATYPE_NULL && tg_tensor_is_contiguous(t) &&
              tg_tensor_numel(t) <= INT32_MAX);
    TG_TRY(tg__mpi_check(MPI_Allreduce(MPI_IN_PLACE, tg_tensor_data(t),
                                       (int)tg_tensor_numel(t), mt, MPI_SUM, d->comm),
                         "dist_allreduce_sum"));
    tg_tensor_bump_version(t);
    return TG_OK;
}

int tg_dist_checkpoint_save(tg_dist *d, const tg_checkpoint *ck, const char *path,
                            const tg_st_file *extra)
{
    TG_CHECK(d != NULL, TG_EINVAL, "dist_checkpoint_save: d must not be NULL");
    int rc = d->rank == 0 ? tg_checkpoint_save(ck, path, extra) : TG_OK;
    return tg_dist_agree(d, rc);
}
