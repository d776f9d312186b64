/* src/dist/ddp_compress.c - gradients all-reduced in bf16 or f16
 * (tg_ddp_opts.compress), as PyTorch's bf16_compress_hook and
 * fp16_compress_hook: each rank divides its bucket by the number of ranks
 * N and rounds it to the half dtype h, the ranks sum the halves in h, and
 * the sum, widened, is the .grad:
 *
 *     grad = f32( h( ... h(h(g_0 / N) + h(g_1 / N)) ... + h(g_{N-1} / N)) )
 *
 * so half the bytes of f32 cross the network.  PyTorch rounds g to h first
 * and divides in h; the two agree whenever N is a power of two, g is within
 * h's range and g / N is not subnormal in h (dividing first keeps a g up to
 * N times h's largest value finite).
 *
 * MPI has no half types: a bucket travels as a 2-byte datatype of its own
 * (two MPI_BYTEs) and is reduced by a user-defined, commutative MPI_Op that
 * widens both halves to f32, adds them there and rounds the sum to h once.
 * The f32 sum of two halves, rounded to h, is the exactly rounded half sum:
 * f32 keeps 24 significand bits, at least 2p + 1 for h's p (11 for f16, 8
 * for bf16), so the two roundings never differ from one, and f32's range
 * holds every sum of two halves that stays finite in h.  The conversions
 * are the library's bulk ones (round to nearest even, bit for bit
 * tg_f32_to_bf16 / tg_f32_to_f16).
 *
 * An f64 bucket travels the same way (PyTorch's hooks cast any bucket to
 * the half): each rank's g / N, divided in f64, goes to the half through
 * f32, as PyTorch's double -> Half conversion does, and the half sum is
 * widened to f64 (exactly).  Its .grad is thus within the half's rounding
 * of the f64 mean, as an f32 one is. */
#include "dist/ddp_internal.h"

/* Elements converted per block: f32 room on the stack for two blocks. */
enum { BLOCK = 256 };

/* inout[i] = h(f32(in[i]) + f32(inout[i])) for i < n. */
static void half_sum(tg_dtype h, const uint16_t *in, uint16_t *inout, int64_t n)
{
    float a[BLOCK], b[BLOCK];
    const tg__cast k = tg__cast_kernel();
    for (int64_t i = 0; i < n; i += BLOCK) {
        const int64_t m = n - i < BLOCK ? n - i : BLOCK;
        tg__half_to_f32_k(h, in + i, a, m, k);
        tg__half_to_f32_k(h, inout + i, b, m, k);
        for (int64_t j = 0; j < m; j++) a[j] += b[j];
        tg__f32_to_half_k(h, a, inout + i, m, k);
    }
}

/* The MPI_User_function of each half dtype (the datatype is always the
 * tg_ddp's half_type, so it is not looked at). */
static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    half_sum(TG_BF16, in, inout, *len);
}

static void f16_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    half_sum(TG_F16, in, inout, *len);
}

int tg__ddp_compress_init(tg_ddp *ddp)
{
    const tg_dtype h = ddp->o.compress;
    TG_ASSERT(h == TG_BF16 || h == TG_F16);
    MPI_Datatype t = MPI_DATATYPE_NULL;
    TG_TRY(tg__mpi_check(MPI_Type_contiguous(2, MPI_BYTE, &t), "ddp_new: MPI_Type_contiguous"));
    ddp->half_type = t;
    TG_TRY(tg__mpi_check(MPI_Type_commit(&ddp->half_type), "ddp_new: MPI_Type_commit"));
    MPI_Type_set_name(ddp->half_type, h == TG_BF16 ? "tapegrad_bf16" : "tapegrad_f16");
    return tg__mpi_check(MPI_Op_create(h == TG_BF16 ? bf16_sum : f16_sum, 1, &ddp->half_sum),
                         "ddp_new: MPI_Op_create");
}

void tg__ddp_compress_free(tg_ddp *ddp)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;   /* MPI freed them already */
    if (ddp->half_sum != MPI_OP_NULL) MPI_Op_free(&ddp->half_sum);
    if (ddp->half_type != MPI_DATATYPE_NULL) MPI_Type_free(&ddp->half_type);
}

void tg__ddp_compress(tg_dtype half, tg_dtype dt, const void *src, int size, uint16_t *dst,
                      int64_t n)
{
    TG_ASSERT(dt == TG_F32 || dt == TG_F64);
    float q[BLOCK];
    const tg__cast k = tg__cast_kernel();
    const float *s32 = src;
    const double *s64 = src;
    for (int64_t i = 0; i < n; i += BLOCK) {
        const int64_t m = n - i < BLOCK ? n - i : BLOCK;
        if (dt == TG_F32)
            for (int64_t j = 0; j < m; j++) q[j] = s32[i + j] / (float)size;
        else
            for (int64_t j = 0; j < m; j++) q[j] = (float)(s64[i + j] / size);
        tg__f32_to_half_k(half, q, dst + i, m, k);
    }
}

void tg__ddp_decompress(tg_dtype half, tg_dtype dt, const uint16_t *src, void *dst, int64_t n)
{
    TG_ASSERT(dt == TG_F32 || dt == TG_F64);
    const tg__cast k = tg__cast_kernel();
    if (dt == TG_F32) {
        tg__half_to_f32_k(half, src, dst, n, k);
        return;
    }
    float w[BLOCK];
    double *d64 = dst;
    for (int64_t i = 0; i < n; i += BLOCK) {
        const int64_t m = n - i < BLOCK ? n - i : BLOCK;
        tg__half_to_f32_k(half, src + i, w, m, k);
        for (int64_t j = 0; j < m; j++) d64[i + j] = w[j];
    }
}
