/* src/dist/dist.c - the MPI context: joining the job, agreeing on errors,
 * broadcasting a model, and the rank-0 checkpoint.
 *
 * Every function here that communicates is collective over d->comm.  MPI
 * errors return codes on that communicator (MPI_ERRORS_RETURN) and become
 * TG_EIO.  A call checks what it can on its own rank first, then one
 * all-reduce (tg__dist_agree_sig) gives every rank the worst status of any
 * rank and tells whether the ranks passed the same layout (a tensor's
 * shape, a module's state, a root): so every rank returns the same status,
 * and none is left waiting in a collective call the others skipped.  Only
 * a NULL d is refused on its rank alone (without it there is nothing to
 * talk over). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist_internal.h"

/* The longest message tg_dist_agree passes from the failing rank. */
#define AGREE_MSG_MAX 512
/* The most values tg__dist_agree_sig compares. */
#define AGREE_SIG_MAX 16

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

/* Whether msg already names its rank ("rank R: ..."), as the message of an
 * agreement does: agreeing again on it keeps it as it is. */
static bool attributed(const char *msg)
{
    int len = 0;
    unsigned r = 0;
    return sscanf(msg, "rank %u: %n", &r, &len) == 1 && len > 0;
}

int tg__dist_agree_sig(tg_dist *d, int status, int n, const int64_t *sig, int *differs)
{
    TG_ASSERT(n >= 0 && n <= AGREE_SIG_MAX);
    /* One MAX over [key, sig, ~sig]: the key of the most negative status,
     * its rank in the low half so that the lowest rank wins a tie, then
     * each value's maximum and the complement of its minimum (~x = -x - 1
     * reverses the order without overflow). */
    int64_t in[1 + 2 * AGREE_SIG_MAX], out[1 + 2 * AGREE_SIG_MAX];
    const int64_t bad = status >= 0 ? 0 : status < -INT32_MAX ? INT32_MAX : -(int64_t)status;
    in[0] = bad ? (bad << 32) | (int64_t)(UINT32_MAX - (uint32_t)d->rank) : 0;
    for (int i = 0; i < n; i++) in[1 + i] = sig[i], in[1 + n + i] = ~sig[i];
    TG_TRY(tg__mpi_check(MPI_Allreduce(in, out, 1 + 2 * n, MPI_INT64_T, MPI_MAX, d->comm),
                         "dist_agree"));
    *differs = -1;
    if (out[0] != 0) {
        const int worst = -(int)(out[0] >> 32);
        const int who = (int)(UINT32_MAX - (uint32_t)(out[0] & UINT32_MAX));
        char msg[AGREE_MSG_MAX] = "";
        if (d->rank == who) snprintf(msg, sizeof msg, "%s", tg_error_message());
        TG_TRY(tg__mpi_check(MPI_Bcast(msg, AGREE_MSG_MAX, MPI_CHAR, who, d->comm),
                             "dist_agree"));
        msg[AGREE_MSG_MAX - 1] = '\0';
        if (attributed(msg)) return tg__error(worst, "%s", msg);
        return tg__error(worst, "rank %d: %s", who, msg[0] ? msg : tg_status_message(worst));
    }
    for (int i = 0; i < n && *differs < 0; i++)
        if (out[1 + i] != ~out[1 + n + i]) *differs = i;
    return TG_OK;
}

/* Who finalizes MPI.  MPI is process-wide and can start only once, so
 * this is process-wide too: when tg_dist_init started MPI, tapegrad owes
 * the MPI_Finalize, which the tg_dist_free of the last tg_dist alive pays;
 * a tg_dist_init that fails after starting MPI leaves it running (a later
 * tg_dist_init joins it), and the program's exit pays a debt still open
 * (mpirun reports a rank that exits without MPI_Finalize as an abnormal
 * termination, and ends the others).  Only the thread that called
 * tg_dist_init talks to MPI (MPI_THREAD_FUNNELED), so only that thread
 * reads or writes these. */
static bool owes_finalize;   /* tg_dist_init started MPI, not finalized yet */
static bool at_exit_set;     /* finalize_at_exit is registered */
static int n_alive;          /* tg_dists made and not freed */

static void finalize_owed(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owes_finalize && !finalized) MPI_Finalize();
    owes_finalize = false;
}

static void finalize_at_exit(void) { finalize_owed(); }

/* A tg_dist over a duplicate of comm, made on every rank or on none: out
 * NULL or an allocation that fails on one rank (rc: a failure before the
 * call) is agreed on over the new communicator, so that no rank keeps one
 * the others gave up. */
static int dist_make(tg_dist **out, MPI_Comm comm, int rc, const char *fn)
{
    if (rc >= 0 && !out) rc = tg__error(TG_EINVAL, "%s: out must not be NULL", fn);
    tg_dist made = {.comm = MPI_COMM_NULL};
    TG_TRY(tg__mpi_check(MPI_Comm_dup(comm, &made.comm), "dist_init: MPI_Comm_dup"));
    MPI_Comm_set_errhandler(made.comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(made.comm, &made.rank);
    MPI_Comm_size(made.comm, &made.size);
    tg_dist *d = rc >= 0 ? tg__calloc(1, sizeof *d) : NULL;
    if (rc >= 0 && !d) rc = TG_ENOMEM;
    rc = tg_dist_agree(&made, rc);
    if (rc < 0) {
        free(d);
        MPI_Comm_free(&made.comm);
        return rc;
    }
    *d = made;
    *out = d;
    n_alive++;
    return TG_OK;
}

int tg_dist_init(tg_dist **out, int *argc, char ***argv)
{
    int inited = 0, finalized = 0, provided = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    TG_CHECK(!finalized, TG_EINVAL,
             "dist_init: MPI was finalized in this process and cannot start again");
    int rc = TG_OK;
    if (!inited) {
        TG_TRY(tg__mpi_check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided),
                             "dist_init: MPI_Init_thread"));
        owes_finalize = true;
    }
    if (owes_finalize && !at_exit_set) {
        at_exit_set = atexit(finalize_at_exit) == 0;
        if (!at_exit_set)
            rc = tg__error(TG_ENOMEM, "dist_init: atexit: no room to register the MPI_Finalize "
                                      "at exit");
    }
    return dist_make(out, MPI_COMM_WORLD, rc, "dist_init");
}

int tg_dist_init_comm(tg_dist **out, const void *mpi_comm)
{
    TG_CHECK(mpi_comm != NULL, TG_EINVAL, "dist_init_comm: mpi_comm must not be NULL");
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    TG_CHECK(inited && !finalized, TG_EINVAL, "dist_init_comm: MPI is not initialised, or was "
                                              "finalized (call MPI_Init, or use tg_dist_init)");
    return dist_make(out, *(const MPI_Comm *)mpi_comm, TG_OK, "dist_init_comm");
}

void tg_dist_free(tg_dist *d)
{
    if (!d) return;
    MPI_Comm_free(&d->comm);
    free(d);
    if (--n_alive == 0) finalize_owed();
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
    int differs = -1;
    return tg__dist_agree_sig(d, status, 0, NULL, &differs);
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

int tg__dist_module_layout(const tg_module *m, int64_t *layout, const char *fn)
{
    int n = tg_module_state_count(m);
    if (n < 0) return n;
    uint64_t h = fnv(0xcbf29ce484222325ull, &n, sizeof n);
    for (int i = 0; i < n; i++) {
        tg_tensor *t = NULL;
        char name[TG_MODULE_NAME_MAX];
        TG_TRY(tg_module_state_at(m, i, name, sizeof name, &t, NULL));
        TG_CHECK(tg_tensor_is_contiguous(t), TG_EINVAL, "%s: %s is not contiguous", fn, name);
        int dt = (int)tg_tensor_dtype(t), nd = tg_tensor_ndim(t);
        h = fnv(h, &dt, sizeof dt);
        h = fnv(h, &nd, sizeof nd);
        h = fnv(h, tg_tensor_shape(t), sizeof(int64_t) * (size_t)nd);
    }
    *layout = (int64_t)h;
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

int tg__dist_bcast_module(tg_dist *d, tg_module *m)
{
    const int n = tg_module_state_count(m);
    for (int i = 0; i < n; i++) {
        tg_tensor *t = NULL;
        TG_TRY(tg_module_state_at(m, i, NULL, 0, &t, NULL));
        TG_TRY(tg__dist_bcast_bytes(d, t, 0));
    }
    return TG_OK;
}

int tg_dist_broadcast_module(tg_dist *d, tg_module *m)
{
    TG_CHECK(d != NULL, TG_EINVAL, "dist_broadcast_module: d must not be NULL");
    int64_t layout = 0;
    int differs = -1;
    int rc = m ? tg__dist_module_layout(m, &layout, "dist_broadcast_module")
               : tg__error(TG_EINVAL, "dist_broadcast_module: m must not be NULL");
    TG_TRY(tg__dist_agree_sig(d, rc, 1, &layout, &differs));
    TG_CHECK(differs < 0, TG_ESHAPE, "dist_broadcast_module: the ranks' modules differ in their "
                                     "state entries, shapes or dtypes");
    return tg__dist_bcast_module(d, m);
}

void tg__dist_tensor_sig(int64_t *sig, const tg_tensor *t)
{
    memset(sig, 0, sizeof(int64_t) * (2 + TG_MAX_DIMS));
    if (!t) return;
    sig[0] = tg_tensor_dtype(t);
    sig[1] = tg_tensor_ndim(t);
    memcpy(sig + 2, tg_tensor_shape(t), sizeof(int64_t) * (size_t)tg_tensor_ndim(t));
}

int tg_dist_broadcast_tensor(tg_dist *d, tg_tensor *t, int root)
{
    static const char fn[] = "dist_broadcast_tensor";
    TG_CHECK(d != NULL, TG_EINVAL, "%s: d must not be NULL", fn);
    int64_t sig[3 + TG_MAX_DIMS] = {root};
    tg__dist_tensor_sig(sig + 1, t);
    int rc = TG_OK, differs = -1;
    tg_tensor *buf = NULL;   /* t, or a contiguous copy of a strided t */
    if (root < 0 || root >= d->size)
        rc = tg__error(TG_EINVAL, "%s: root=%d must be in [0, %d)", fn, root, d->size);
    else rc = tg__dist_check_tensor(fn, "t", t, true);
    if (rc >= 0) rc = tg__dist_stage_in(&buf, t);
    rc = tg__dist_agree_sig(d, rc, 3 + TG_MAX_DIMS, sig, &differs);
    if (rc >= 0 && differs == 0)
        rc = tg__error(TG_EINVAL, "%s: the ranks passed different roots", fn);
    else if (rc >= 0 && differs > 0)
        rc = tg__error(TG_EINVAL, "%s: t's shape or dtype differs between the ranks", fn);
    if (rc >= 0) rc = tg__dist_bcast_bytes(d, buf, root);
    /* a strided t receives the copy's elements */
    if (rc >= 0 && buf != t && d->rank != root) rc = tg_tensor_copy_(t, buf);
    tg_tensor_release(buf);
    return rc;
}

/* tg_dist_allreduce_sum after its checks and their agreement. */
static int allreduce_sum(tg_dist *d, tg_tensor *t)
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

int tg_dist_allreduce_sum(tg_dist *d, tg_tensor *t)
{
    TG_CHECK(d != NULL, TG_EINVAL, "dist_allreduce_sum: d must not be NULL");
    int64_t sig[2 + TG_MAX_DIMS];
    tg__dist_tensor_sig(sig, t);
    int rc = TG_OK, differs = -1;
    if (!t)
        rc = tg__error(TG_EINVAL, "dist_allreduce_sum: t must not be NULL");
    else if (tg__mpi_type(tg_tensor_dtype(t)) == MPI_DATATYPE_NULL)
        rc = tg__error(TG_EDTYPE, "dist_allreduce_sum: t is %s; f32, f64 or i64 only",
                       tg_dtype_name(tg_tensor_dtype(t)));
    else if (!tg_tensor_is_contiguous(t))
        rc = tg__error(TG_EINVAL, "dist_allreduce_sum: t must be contiguous");
    else if (tg_tensor_numel(t) > INT32_MAX)
        rc = tg__error(TG_EINVAL, "dist_allreduce_sum: t has %lld elements; at most 2^31 - 1",
                       (long long)tg_tensor_numel(t));
    TG_TRY(tg__dist_agree_sig(d, rc, 2 + TG_MAX_DIMS, sig, &differs));
    TG_CHECK(differs != 0, TG_EDTYPE, "dist_allreduce_sum: t's dtype differs between the ranks");
    TG_CHECK(differs < 0, TG_ESHAPE, "dist_allreduce_sum: t's shape differs between the ranks");
    return allreduce_sum(d, t);
}

int tg__dist_sum_i64(tg_dist *d, int64_t *v, int n)
{
    return tg__mpi_check(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, MPI_SUM, d->comm),
                         "dist_allreduce_sum");
}

int tg_dist_checkpoint_save(tg_dist *d, const tg_checkpoint *ck, const char *path,
                            const tg_st_file *extra)
{
    TG_CHECK(d != NULL, TG_EINVAL, "dist_checkpoint_save: d must not be NULL");
    int rc = d->rank == 0 ? tg_checkpoint_save(ck, path, extra) : TG_OK;
    return tg_dist_agree(d, rc);
}
