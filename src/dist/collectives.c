/* src/dist/collectives.c - torch.distributed's collectives on tensors:
 * all_reduce with every ReduceOp, all_gather (into a list or one tensor),
 * reduce_scatter_tensor and all_to_all_single; and the staging through
 * contiguous buffers that gather.c shares.
 *
 * Each call checks its arguments on its rank, makes every buffer it needs
 * (so that no allocation can fail after the data have moved), agrees with
 * the other ranks on the status and on the tensors' layout in one
 * all-reduce (tg__dist_agree_sig), and only then moves data: an error on
 * one rank is every rank's, and changes nothing.
 *
 * f16 and bf16 travel as uint16 bit patterns and are reduced by MPI_Ops
 * made for the call (MPI_Op_create; freed after it): each pair of values
 * is widened to f32, combined, and rounded back to nearest even, as torch's
 * c10::Half and c10::BFloat16 operators compute. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "dist/dist_internal.h"
#include "tapegrad/sparse.h"

MPI_Datatype tg__mpi_wire_type(tg_dtype dt)
{
    switch (dt) {
    case TG_F32: return MPI_FLOAT;
    case TG_F64: return MPI_DOUBLE;
    case TG_F16:
    case TG_BF16: return MPI_UINT16_T;
    case TG_I8: return MPI_INT8_T;
    case TG_U8: return MPI_UINT8_T;
    case TG_I32: return MPI_INT32_T;
    case TG_I64: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL;
    }
}

int tg__dist_check_tensor(const char *fn, const char *arg, const tg_tensor *t, bool written)
{
    TG_CHECK(t != NULL, TG_EINVAL, "%s: %s must not be NULL", fn, arg);
    TG_CHECK(!tg_tensor_is_sparse(t), TG_EINVAL, "%s: %s is sparse; dense tensors only", fn, arg);
    TG_CHECK(tg_tensor_numel(t) <= INT32_MAX, TG_EINVAL,
             "%s: %s has %lld elements; at most 2^31 - 1", fn, arg,
             (long long)tg_tensor_numel(t));
    for (int i = 0; written && i < tg_tensor_ndim(t); i++)
        TG_CHECK(tg_tensor_strides(t)[i] != 0 || tg_tensor_shape(t)[i] <= 1, TG_EINVAL,
                 "%s: %s is expanded (stride 0 on dim %d of extent %lld) and cannot be "
                 "written", fn, arg, i, (long long)tg_tensor_shape(t)[i]);
    return TG_OK;
}

int tg__dist_stage_in(tg_tensor **buf, const tg_tensor *t)
{
    /* tg_tensor_contiguous reads t only (it returns t retained, or a copy) */
    return tg_tensor_contiguous(buf, (tg_tensor *)t);
}

int tg__dist_stage_out(tg_tensor **buf, tg_tensor *t)
{
    if (tg_tensor_is_contiguous(t)) {
        *buf = tg_tensor_retain(t);
        return TG_OK;
    }
    return tg_tensor_zeros_like(buf, t);
}

int tg__dist_unstage(tg_tensor *t, tg_tensor *buf)
{
    int rc = TG_OK;
    if (buf == t) tg_tensor_bump_version(t);
    else rc = tg_tensor_copy_(t, buf);
    tg_tensor_release(buf);
    return rc;
}

/* ---- reduction ops ------------------------------------------------------ */

static float half_load(tg_dtype dt, uint16_t h)
{
    return dt == TG_F16 ? tg_f16_to_f32(h) : tg_bf16_to_f32(h);
}

static uint16_t half_store(tg_dtype dt, float f)
{
    return dt == TG_F16 ? tg_f32_to_f16(f) : tg_f32_to_bf16(f);
}

/* io[i] = io[i] op in[i] on n half values, in f32 and rounded back. */
static void half_combine(tg_dtype dt, tg_reduce_op op, const uint16_t *in, uint16_t *io, int n)
{
    for (int i = 0; i < n; i++) {
        const float a = half_load(dt, in[i]), b = half_load(dt, io[i]);
        float r = a + b;
        if (op == TG_REDUCE_PRODUCT) r = a * b;
        else if (op == TG_REDUCE_MIN) r = a < b ? a : b;
        else if (op == TG_REDUCE_MAX) r = a > b ? a : b;
        io[i] = half_store(dt, r);
    }
}

/* MPI_User_functions: f16_sum, f16_prod, f16_min, f16_max, bf16_sum,
 * bf16_prod, bf16_min, bf16_max (MPI passes no context, so one each). */
#define HALF_FN(name, DT, OP)                                                 \
    static void name(void *in, void *io, int *n, MPI_Datatype *type)          \
    {                                                                         \
        (void)type;                                                           \
        half_combine(DT, OP, in, io, *n);                                     \
    }
HALF_FN(f16_sum, TG_F16, TG_REDUCE_SUM)
HALF_FN(f16_prod, TG_F16, TG_REDUCE_PRODUCT)
HALF_FN(f16_min, TG_F16, TG_REDUCE_MIN)
HALF_FN(f16_max, TG_F16, TG_REDUCE_MAX)
HALF_FN(bf16_sum, TG_BF16, TG_REDUCE_SUM)
HALF_FN(bf16_prod, TG_BF16, TG_REDUCE_PRODUCT)
HALF_FN(bf16_min, TG_BF16, TG_REDUCE_MIN)
HALF_FN(bf16_max, TG_BF16, TG_REDUCE_MAX)
#undef HALF_FN

/* The MPI_Op of op on dt; *made: it was created for this call (free it
 * with MPI_Op_free).  AVG's reduction is a sum. */
static int reduce_op(MPI_Op *m, bool *made, tg_dtype dt, tg_reduce_op op)
{
    static const MPI_Op builtin[TG_REDUCE_OP_COUNT] = {
        [TG_REDUCE_SUM] = MPI_SUM, [TG_REDUCE_AVG] = MPI_SUM, [TG_REDUCE_PRODUCT] = MPI_PROD,
        [TG_REDUCE_MIN] = MPI_MIN, [TG_REDUCE_MAX] = MPI_MAX};
    static MPI_User_function *const half[2][TG_REDUCE_OP_COUNT] = {
        {f16_sum, f16_sum, f16_prod, f16_min, f16_max},
        {bf16_sum, bf16_sum, bf16_prod, bf16_min, bf16_max}};
    *made = false;
    if (dt != TG_F16 && dt != TG_BF16) {
        *m = builtin[op];
        return TG_OK;
    }
    TG_TRY(tg__mpi_check(MPI_Op_create(half[dt == TG_BF16][op], 1, m), "dist: MPI_Op_create"));
    *made = true;
    return TG_OK;
}

/* AVG before the sum, on a contiguous buffer of floats: each value times
 * 1 / world, the factor and the products rounded to the dtype (NCCL's
 * pre-multiplied sum). */
static void avg_premul(tg_tensor *buf, int world)
{
    const int64_t n = tg_tensor_numel(buf);
    const tg_dtype dt = tg_tensor_dtype(buf);
    void *p = tg_tensor_data(buf);
    if (dt == TG_F32) {
        const float f = 1.0f / (float)world;
        for (int64_t i = 0; i < n; i++) ((float *)p)[i] *= f;
    } else if (dt == TG_F64) {
        const double f = 1.0 / world;
        for (int64_t i = 0; i < n; i++) ((double *)p)[i] *= f;
    } else {
        const float f = half_load(dt, half_store(dt, 1.0f / (float)world));
        uint16_t *h = p;
        for (int64_t i = 0; i < n; i++) h[i] = half_store(dt, half_load(dt, h[i]) * f);
    }
}

/* AVG after the sum, on a contiguous buffer of integers: each value divided
 * by world, truncated toward zero (NCCL's sum then divide). */
static void avg_postdiv(tg_tensor *buf, int world)
{
    const int64_t n = tg_tensor_numel(buf);
    void *p = tg_tensor_data(buf);
    switch (tg_tensor_dtype(buf)) {
    case TG_I8: for (int64_t i = 0; i < n; i++) ((int8_t *)p)[i] /= world; break;
    case TG_U8: for (int64_t i = 0; i < n; i++) ((uint8_t *)p)[i] /= world; break;
    case TG_I32: for (int64_t i = 0; i < n; i++) ((int32_t *)p)[i] /= world; break;
    case TG_I64: for (int64_t i = 0; i < n; i++) ((int64_t *)p)[i] /= world; break;
    default: TG_ASSERT(0 && "avg_postdiv: integer dtypes only");
    }
}

/* Reduces send (n elements per rank; NULL: in place in recv) into recv:
 * all-reduce (scatter false) or reduce-scatter of blocks of n / world
 * (scatter true).  send, when given, may be premultiplied in place. */
static int reduce(tg_dist *d, tg_tensor *send, tg_tensor *recv, tg_reduce_op op, bool scatter,
                  const char *fn)
{
    tg_tensor *src = send ? send : recv;
    const tg_dtype dt = tg_tensor_dtype(src);
    const bool fl = tg_dtype_is_float(dt);
    if (op == TG_REDUCE_AVG && fl) avg_premul(src, d->size);
    MPI_Op m;
    bool made = false;
    TG_TRY(reduce_op(&m, &made, dt, op));
    const MPI_Datatype w = tg__mpi_wire_type(dt);
    int mrc;
    if (scatter)
        mrc = MPI_Reduce_scatter_block(tg_tensor_cdata(send), tg_tensor_data(recv),
                                       (int)tg_tensor_numel(recv), w, m, d->comm);
    else
        mrc = MPI_Allreduce(send ? tg_tensor_cdata(send) : MPI_IN_PLACE, tg_tensor_data(recv),
                            (int)tg_tensor_numel(recv), w, m, d->comm);
    if (made) MPI_Op_free(&m);
    TG_TRY(tg__mpi_check(mrc, fn));
    if (op == TG_REDUCE_AVG && !fl) avg_postdiv(recv, d->size);
    return TG_OK;
}

/* The agreement of every call here: sig = [op or root, t's dtype, ndim,
 * shape]; what0 names sig[0] ("ops", "roots"), or NULL when it is unused. */
static int agree(tg_dist *d, int rc, const int64_t *sig, const char *fn, const char *what0,
                 const char *arg)
{
    int differs = -1;
    TG_TRY(tg__dist_agree_sig(d, rc, 3 + TG_MAX_DIMS, sig, &differs));
    TG_CHECK(differs != 0, TG_EINVAL, "%s: the ranks passed different %s", fn,
             what0 ? what0 : "arguments");
    TG_CHECK(differs != 1, TG_EDTYPE, "%s: %s's dtype differs between the ranks", fn, arg);
    TG_CHECK(differs < 0, TG_ESHAPE, "%s: %s's shape differs between the ranks", fn, arg);
    return TG_OK;
}

static int check_op(const char *fn, tg_reduce_op op)
{
    TG_CHECK((int)op >= 0 && op < TG_REDUCE_OP_COUNT, TG_EINVAL,
             "%s: op=%d is not a tg_reduce_op (0..%d)", fn, (int)op, TG_REDUCE_OP_COUNT - 1);
    return TG_OK;
}

int tg_dist_allreduce(tg_dist *d, tg_tensor *t, tg_reduce_op op)
{
    static const char fn[] = "dist_allreduce";
    TG_CHECK(d != NULL, TG_EINVAL, "%s: d must not be NULL", fn);
    int64_t sig[3 + TG_MAX_DIMS] = {(int64_t)op};
    tg__dist_tensor_sig(sig + 1, t);
    tg_tensor *buf = NULL;
    int rc = check_op(fn, op);
    if (rc >= 0) rc = tg__dist_check_tensor(fn, "t", t, true);
    if (rc >= 0) rc = tg__dist_stage_in(&buf, t);
    rc = agree(d, rc, sig, fn, "ops", "t");
    if (rc >= 0) rc = reduce(d, NULL, buf, op, false, fn);
    if (rc >= 0) return tg__dist_unstage(t, buf);
    tg_tensor_release(buf);
    return rc;
}

/* Whether big is size blocks of small along dim 0: small's shape with dim
 * 0 times size (concatenated), or (size, *small's shape) (stacked), and
 * the same dtype. */
int tg__dist_blocks_of(const tg_tensor *big, const tg_tensor *small, int size)
{
    const int nb = tg_tensor_ndim(big), ns = tg_tensor_ndim(small);
    const int64_t *b = tg_tensor_shape(big), *s = tg_tensor_shape(small);
    if (tg_tensor_dtype(big) != tg_tensor_dtype(small)) return TG_EDTYPE;
    if (nb == ns + 1 && b[0] == size && !memcmp(b + 1, s, sizeof *s * (size_t)ns)) return TG_OK;
    if (nb == ns && ns > 0 && b[0] == s[0] * size &&
        !memcmp(b + 1, s + 1, sizeof *s * (size_t)(ns - 1)))
        return TG_OK;
    return TG_ESHAPE;
}

/* tg__dist_blocks_of as an error of fn naming big and small. */
static int check_blocks(const char *fn, const char *bn, const tg_tensor *big, const char *sn,
                        const tg_tensor *small, int size)
{
    const int rc = tg__dist_blocks_of(big, small, size);
    if (rc == TG_OK) return TG_OK;
    char bs[96], ss[96];
    tg_shape_str(bs, sizeof bs, tg_tensor_ndim(big), tg_tensor_shape(big));
    tg_shape_str(ss, sizeof ss, tg_tensor_ndim(small), tg_tensor_shape(small));
    if (rc == TG_EDTYPE)
        return tg__error(rc, "%s: %s is %s and %s is %s; they must have one dtype", fn, bn,
                         tg_dtype_name(tg_tensor_dtype(big)), sn,
                         tg_dtype_name(tg_tensor_dtype(small)));
    return tg__error(rc, "%s: %s%s must be %d blocks of %s%s along dim 0 (concatenated, or "
                         "stacked in a new dim 0)", fn, bn, bs, size, sn, ss);
}

int tg_dist_all_gather_into_tensor(tg_dist *d, tg_tensor *out, const tg_tensor *t)
{
    static const char fn[] = "dist_all_gather_into_tensor";
    TG_CHECK(d != NULL, TG_EINVAL, "%s: d must not be NULL", fn);
    int64_t sig[3 + TG_MAX_DIMS] = {0};
    tg__dist_tensor_sig(sig + 1, t);
    tg_tensor *src = NULL, *dst = NULL;
    int rc = tg__dist_check_tensor(fn, "t", t, false);
    if (rc >= 0) rc = tg__dist_check_tensor(fn, "out", out, true);
    if (rc >= 0) rc = check_blocks(fn, "out", out, "t", t, d->size);
    if (rc >= 0) rc = tg__dist_stage_in(&src, t);
    if (rc >= 0) rc = tg__dist_stage_out(&dst, out);
    rc = agree(d, rc, sig, fn, NULL, "t");
    if (rc >= 0) {
        const MPI_Datatype w = tg__mpi_wire_type(tg_tensor_dtype(t));
        const int n = (int)tg_tensor_numel(t);
        rc = tg__mpi_check(MPI_Allgather(tg_tensor_cdata(src), n, w, tg_tensor_data(dst), n, w,
                                         d->comm), fn);
    }
    tg_tensor_release(src);
    if (rc >= 0) return tg__dist_unstage(out, dst);
    tg_tensor_release(dst);
    return rc;
}

int tg__dist_check_list(const char *fn, const char *arg, tg_tensor *const *list, int size,
                        const tg_tensor *t, bool written)
{
    TG_CHECK(list != NULL, TG_EINVAL, "%s: %s must not be NULL (%d tensors)", fn, arg, size);
    char name[48];
    for (int r = 0; r < size; r++) {
        snprintf(name, sizeof name, "%s[%d]", arg, r);
        TG_TRY(tg__dist_check_tensor(fn, name, list[r], written));
        TG_CHECK(tg_tensor_dtype(list[r]) == tg_tensor_dtype(t), TG_EDTYPE,
                 "%s: %s is %s; t is %s", fn, name, tg_dtype_name(tg_tensor_dtype(list[r])),
                 tg_dtype_name(tg_tensor_dtype(t)));
        TG_CHECK(tg_tensor_same_shape(list[r], t), TG_ESHAPE,
                 "%s: %s's shape is not t's", fn, name);
    }
    return TG_OK;
}

int tg_dist_all_gather(tg_dist *d, tg_tensor *const *outs, const tg_tensor *t)
{
    static const char fn[] = "dist_all_gather";
    TG_CHECK(d != NULL, TG_EINVAL, "%s: d must not be NULL", fn);
    int64_t sig[3 + TG_MAX_DIMS] = {0};
    tg__dist_tensor_sig(sig + 1, t);
    tg_tensor *all = NULL;
    int rc = tg__dist_check_tensor(fn, "t", t, false);
    if (rc >= 0) rc = tg__dist_check_list(fn, "outs", outs, d->size, t, true);
    const int64_t n = rc >= 0 ? tg_tensor_numel(t) : 0;
    if (rc >= 0) {
        /* the ranks' t stacked: (size, *t's shape) */
        int64_t shape[TG_MAX_DIMS + 1] = {d->size};
        memcpy(shape + 1, tg_tensor_shape(t), sizeof *shape * (size_t)tg_tensor_ndim(t));
        rc = tg_tensor_zeros(&all, tg_tensor_dtype(t), tg_tensor_ndim(t) + 1, shape);
    }
    rc = agree(d, rc, sig, fn, NULL, "t");
    if (rc >= 0) rc = tg_dist_all_gather_into_tensor(d, all, t);
    /* each block of all into its outs[r] (in place, version bumped) */
    const size_t bytes = (size_t)n * tg_dtype_size(rc >= 0 ? tg_tensor_dtype(t) : TG_F32);
    for (int r = 0; rc >= 0 && r < d->size; r++) {
        if (tg_tensor_is_contiguous(outs[r])) {
            memcpy(tg_tensor_data(outs[r]), (const char *)tg_tensor_cdata(all) + bytes * r,
                   bytes);
            tg_tensor_bump_version(outs[r]);
            continue;
        }
        tg_tensor *blk = NULL;
        rc = tg_tensor_from_data(&blk, tg_tensor_dtype(t), tg_tensor_ndim(t), tg_tensor_shape(t),
                                 (const char *)tg_tensor_cdata(all) + bytes * r);
        if (rc >= 0) rc = tg_tensor_copy_(outs[r], blk);
        tg_tensor_release(blk);
    }
    tg_tensor_release(all);
    return rc;
}

int tg_dist_reduce_scatter_tensor(tg_dist *d, tg_tensor *out, const tg_tensor *in,
                                  tg_reduce_op op)
{
    static const char fn[] = "dist_reduce_scatter_tensor";
    TG_CHECK(d != NULL, TG_EINVAL, "%s: d must not be NULL", fn);
    int64_t sig[3 + TG_MAX_DIMS] = {(int64_t)op};
    tg__dist_tensor_sig(sig + 1, in);
    tg_tensor *src = NULL, *dst = NULL;
    int rc = check_op(fn, op);
    if (rc >= 0) rc = tg__dist_check_tensor(fn, "in", in, false);
    if (rc >= 0) rc = tg__dist_check_tensor(fn, "out", out, true);
    if (rc >= 0) rc = check_blocks(fn, "in", in, "out", out, d->size);
    /* AVG premultiplies its input: a copy of in then */
    if (rc >= 0 && op == TG_REDUCE_AVG) rc = tg_tensor_clone(&src, in);
    else if (rc >= 0) rc = tg__dist_stage_in(&src, in);
    if (rc >= 0) rc = tg__dist_stage_out(&dst, out);
    rc = agree(d, rc, sig, fn, "ops", "in");
    if (rc >= 0) rc = reduce(d, src, dst, op, true, fn);
    tg_tensor_release(src);
    if (rc >= 0) return tg__dist_unstage(out, dst);
    tg_tensor_release(dst);
    return rc;
}

int tg_dist_all_to_all_single(tg_dist *d, tg_tensor *out, const tg_tensor *in)
{
    static const char fn[] = "dist_all_to_all_single";
    TG_CHECK(d != NULL, TG_EINVAL, "%s: d must not be NULL", fn);
    int64_t sig[3 + TG_MAX_DIMS] = {0};
    tg__dist_tensor_sig(sig + 1, in);
    tg_tensor *src = NULL, *dst = NULL;
    int rc = tg__dist_check_tensor(fn, "in", in, false);
    if (rc >= 0) rc = tg__dist_check_tensor(fn, "out", out, true);
    if (rc >= 0 && tg_tensor_dtype(out) != tg_tensor_dtype(in))
        rc = tg__error(TG_EDTYPE, "%s: out is %s and in is %s; they must have one dtype", fn,
                       tg_dtype_name(tg_tensor_dtype(out)), tg_dtype_name(tg_tensor_dtype(in)));
    else if (rc >= 0 && !tg_tensor_same_shape(out, in))
        rc = tg__error(TG_ESHAPE, "%s: out's shape must be in's", fn);
    else if (rc >= 0 && (tg_tensor_ndim(in) == 0 || tg_tensor_shape(in)[0] % d->size != 0))
        rc = tg__error(TG_ESHAPE, "%s: in's dim 0 (%lld) must be a multiple of the %d ranks", fn,
                       tg_tensor_ndim(in) ? (long long)tg_tensor_shape(in)[0] : 0LL, d->size);
    if (rc >= 0) rc = tg__dist_stage_in(&src, in);
    if (rc >= 0) rc = tg__dist_stage_out(&dst, out);
    rc = agree(d, rc, sig, fn, NULL, "in");
    if (rc >= 0) {
        const MPI_Datatype w = tg__mpi_wire_type(tg_tensor_dtype(in));
        const int n = (int)(tg_tensor_numel(in) / d->size);
        rc = tg__mpi_check(MPI_Alltoall(tg_tensor_cdata(src), n, w, tg_tensor_data(dst), n, w,
                                        d->comm), fn);
    }
    tg_tensor_release(src);
    if (rc >= 0) return tg__dist_unstage(out, dst);
    tg_tensor_release(dst);
    return rc;
}
