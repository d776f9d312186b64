/* src/ops/conv_gemm_tmpl.h - the GEMM drivers of Conv, ConvTranspose and the
 * weight gradient for one element type (T, SUF as in conv_kernels_tmpl.h, and
 * GEMM_DT = TG_F32 or TG_F64), included by conv_gemm.c once per type.  It
 * defines tg__conv_{gemm_par,forward,transpose_cols,weight_grad,
 * and_weight_grad}_SUF (FN pastes the suffix; declared in conv_internal.h).
 *
 * The batch is cut into chunks of nb samples (tg__conv_chunk in conv_kernels.c)
 * and each chunk is ONE GEMM per group whose N dimension is nb*O, the chunk's
 * batch x spatial positions: per-sample GEMMs have N = O, which for small
 * images (4x4, 8x8, or 1x1 in a generator's first layer) leaves the GEMM far
 * from its peak.  The chunk's activations are first permuted from (nb, C, S)
 * to (C, nb*S) (pack_cbs).  With nb = 1 that permutation is the identity and
 * is skipped, and a pointwise kernel (all K = 1, stride 1, no padding) needs
 * no column buffer at all: its im2col is the image itself (both only for
 * activations of the compute dtype: half ones are converted by these copies).
 * Threads: only tapegrad's pool (src/core/parallel.c).  The kernels run with
 * OpenBLAS set to one thread (conv_kernels.c), so OpenBLAS's pool never spins
 * next to ours on the same cores.  With two chunks or more, the chunks run
 * in parallel, each on one thread from im2col to its GEMMs (one parallel
 * call per conv instead of several per chunk: a call that finds the workers
 * asleep pays a thread wake-up); with one chunk, each step is parallel
 * inside (gemm_par cuts a GEMM's output into one slice per thread).  Chunking depends only on
 * the shapes, each chunk's GEMMs are then unsliced, and weight-gradient
 * partials are summed in chunk order, so with two chunks or more the bits do
 * not depend on the thread count.  (With one chunk they may: OpenBLAS's edge
 * kernels round a sliced GEMM's border elements differently.) */

#define TG__CAT_(a, b) a##_##b
#define TG__CAT(a, b) TG__CAT_(a, b)
#define FN(name) TG__CAT(name, SUF)

/* C (m, n) = op(A) @ op(B) + beta*C cut into one slice per thread
 * (tg__gemm_par, src/core/blas.c), in this file's element type. */
void FN(tg__conv_gemm_par)(tg_bf16_kernel bf16, bool ta, bool tb, int64_t m, int64_t n,
                           int64_t k, const T *a, int64_t lda, const T *b, int64_t ldb, T beta,
                           T *c, int64_t ldc)
{
    tg__gemm_par(GEMM_DT, bf16, ta, tb, m, n, k, a, lda, b, ldb, (double)beta, c, ldc);
}

/* Element i of a column or packed buffer p: T, or bf16 bits (tg__conv_bits). */
static const void *FN(col_at)(const tg__conv_geom *g, const void *p, int64_t i)
{
    return (const char *)p + (size_t)i * (tg__conv_bits(g) ? sizeof(uint16_t) : sizeof(T));
}

/* C (m, n) = op(W_gi) @ B + beta*C for group gi of the weight, W_gi at
 * w + woff, B a column or packed buffer: from the weight's panels when g
 * has them (bf16, so T is float; one group; w is then NULL) and with B in
 * bits (tg__conv_bits), else as tg__conv_gemm_par. */
static void FN(weight_gemm)(const tg__conv_geom *g, bool ta, int64_t m, int64_t n, int64_t k,
                            const T *w, int64_t woff, int64_t lda, const void *b, int64_t ldb,
                            T beta, T *c, int64_t ldc)
{
    const bool bits = tg__conv_bits(g);
    if (!g->wp && !bits) {
        FN(tg__conv_gemm_par)(g->bf16, ta, false, m, n, k, w + woff, lda, b, ldb, beta, c, ldc);
        return;
    }
    TG_ASSERT(sizeof(T) == sizeof(float) && (!g->wp || woff == 0));
    tg__gemm_par_bits(g->bf16, ta, false, m, n, k, g->wp ? NULL : (const void *)(w + woff), false,
                      lda, b, bits, ldb, (float)beta, (float *)(void *)c, ldc, g->wp, NULL);
}

/* The per-chunk steps of conv, its weight gradient and both fused.  A chunk
 * is n samples, N = n*O column positions. */

/* cols (c_img*K, N) = im2col(z chunk), of T or bf16 bits (tg__conv_bits), in
 * scratch slot 0; a pointwise kernel on one sample of the columns' type
 * needs no copy (the columns are z itself).  NULL: no memory. */
static const void *FN(chunk_cols)(const tg__conv_geom *g, const void *zb, int64_t n, int64_t N)
{
    const bool bits = tg__conv_bits(g);
    if (tg__conv_is_pointwise(g) && n == 1 && (bits || !tg__conv_half_in(g))) return zb;
    const size_t es = bits ? sizeof(uint16_t) : sizeof(T);
    void *c = tg__conv_scratch(0, (size_t)(g->c_img * tg__conv_prod3(g->k) * N) * es);
    if (!c) return NULL;
    const int rc = bits ? tg__conv_im2col_batch_bf16(zb, n, g->c_img, g, c)
                        : FN(tg__conv_im2col_batch)(zb, n, g->c_img, g, c);
    return rc == TG_OK ? c : NULL;
}

/* The chunk's activations u (n, c_col, S) as a GEMM operand (c_col, n*S), of
 * T or bf16 bits: u itself for one sample of that type, else pack_cbs's copy
 * in scratch slot 1.  NULL: no memory. */
static const void *FN(chunk_packed)(const tg__conv_geom *g, const void *ub, int64_t n, int64_t N)
{
    const bool bits = tg__conv_bits(g);
    if (n == 1 && (bits || !tg__conv_half_in(g))) return ub;
    void *p = tg__conv_scratch(1, (size_t)(g->c_col * N) * (bits ? sizeof(uint16_t) : sizeof(T)));
    if (p && bits) tg__conv_pack_cbs_bf16(g, ub, n, g->c_col, N / n, p);
    else if (p) FN(tg__conv_pack_cbs)(g, ub, n, g->c_col, N / n, p);
    return p;
}

/* True when the GEMMs of g write C with beta = 0 without reading it: the
 * bf16 kernels of our own (src/core/gemm_bf16.c).  Their outputs then go to
 * plain scratch with beta = 0; the others (OpenBLAS's sgemm, which zeroes C
 * first for beta = 0) add into the zeroed buffer with beta = 1. */
static bool FN(writes_c)(const tg__conv_geom *g) { return g->bf16 > TG_BF16_KERNEL_PORTABLE; }

/* y's chunk from element at = unpack(yp); per group yp_g (c_col/G, N) =
 * W_g (c_col/G, kk) @ cols_g, with yp the zeroed buffer, added into and left
 * zero by the unpack, or scratch slot 2 (writes_c, or a half y) (y's chunk
 * itself for one sample of a T y).  A half y (g's half_out) is written by
 * tg__conv_store from yp in one pass. */
static int FN(chunk_conv)(const tg__conv_geom *g, const void *cols, const T *w, int64_t n,
                          int64_t N, void *y, int64_t at)
{
    const int64_t co = g->c_col / g->groups, kk = g->c_img / g->groups * tg__conv_prod3(g->k);
    const bool half = tg__conv_half_out(g), zeroed = n > 1 && !FN(writes_c)(g);
    const size_t bytes = (size_t)(g->c_col * N) * sizeof(T);
    T *yb = half ? NULL : (T *)y + at;
    T *yp = n == 1 && !half ? yb
            : zeroed        ? tg__conv_zeroed_take(bytes)
                            : tg__conv_scratch(2, bytes);
    if (!yp) return TG_ENOMEM;
    for (int64_t gi = 0; gi < g->groups; gi++)
        FN(weight_gemm)(g, false, co, N, kk, w, gi * co * kk, kk, FN(col_at)(g, cols, gi * kk * N),
                        N, zeroed ? 1 : 0, yp + gi * co * N, N);
    const int64_t osz = tg__conv_prod3(g->col);
    if (half)
        FN(tg__conv_store)(g, yp, n, g->c_col, osz, n > 1, y, at, zeroed ? yp : NULL);
    else if (n > 1)
        FN(tg__conv_unpack_cbs)(yp, n, g->c_col, osz, yb, zeroed ? yp : NULL);
    if (zeroed) tg__conv_zeroed_give();
    return TG_OK;
}

/* Per group dW_g (c_col/G, kk) = up_g (c_col/G, N) @ cols_g^T, up = pack(u
 * chunk) in scratch slot 1: one chunk's share of the weight gradient. */
static int FN(chunk_wgrad)(const tg__conv_geom *g, const void *cols, const void *ub, int64_t n,
                           int64_t N, T *dw)
{
    const int64_t co = g->c_col / g->groups, kk = g->c_img / g->groups * tg__conv_prod3(g->k);
    const void *up = FN(chunk_packed)(g, ub, n, N);
    if (!up) return TG_ENOMEM;
    for (int64_t gi = 0; gi < g->groups; gi++) {
        const void *ug = FN(col_at)(g, up, gi * co * N), *cg = FN(col_at)(g, cols, gi * kk * N);
        if (tg__conv_bits(g))
            tg__gemm_par_bits(g->bf16, false, true, co, kk, N, ug, true, N, cg, true, N, 0,
                              (float *)(void *)(dw + gi * co * kk), kk, NULL, NULL);
        else
            FN(tg__conv_gemm_par)(g->bf16, false, true, co, kk, N, ug, N, cg, N, 0,
                                  dw + gi * co * kk, kk);
    }
    return TG_OK;
}

/* Samples per chunk: the column buffer (c_img*K, nb*O) within the budget,
 * or within half of it for the bf16 kernels, which read the columns once
 * more to pack them (the DCGAN bf16 step: 1.4% more images/s and 1.9% less
 * CPU time with half; f32 unchanged).  Counted in T even when the columns
 * are bf16 bits: the DCGAN bf16 step ran 5% slower on the twice larger
 * chunks that counting their own bytes gave, and 5% slower on chunks half
 * as large.  A batch that fits one chunk is cut in two when its columns
 * are large enough (tg__conv_chunk_split). */
static int64_t FN(cols_chunk)(const tg__conv_geom *g)
{
    const int64_t per = g->c_img * tg__conv_prod3(g->k) * tg__conv_prod3(g->col) *
                        (int64_t)sizeof(T);
    return tg__conv_chunk_split(g->batch, g->bf16 > TG_BF16_KERNEL_PORTABLE ? 2 * per : per);
}

static int FN(conv_passes)(const tg__conv_geom *g, const void *z, const T *w, const void *u,
                           void *y, T *dw);

/* Conv: per chunk, cols = im2col(x chunk), y chunk = W @ cols (per group). */
int FN(tg__conv_forward)(const tg__conv_geom *g, const void *x, const T *w, void *y)
{
    return FN(conv_passes)(g, x, w, NULL, y, NULL);
}

/* ConvTranspose: per chunk, xp (c_col, nb*O) = pack(x chunk); per group
 * cols_g (c_img/G*K, nb*O) = W_g^T (c_img/G*K, c_col/G) @ xp_g, computed on the
 * un-dilated input (no inserted zero is ever multiplied); then col2im gathers
 * every y[i] from the column entries with i = o*stride - pad + k*dilation. */
typedef struct FN(transpose_job) {
    const tg__conv_geom *g;
    const void *x;   /* an activation input */
    const T *w;
    void *y;         /* T, or half (g->half_out) */
    int64_t nc;   /* chunks */
} FN(transpose_job);

/* Chunk c of a transpose_job (a tg__run_tasks task). */
static int FN(transpose_chunk)(void *job, int64_t c)
{
    const FN(transpose_job) *j = job;
    const tg__conv_geom *g = j->g;
    const T *w = j->w;
    const int64_t nc = j->nc;
    const int64_t ksz = tg__conv_prod3(g->k), osz = tg__conv_prod3(g->col),
                  isz = tg__conv_prod3(g->img);
    const int64_t ci = g->c_img / g->groups, co = g->c_col / g->groups, kk = ci * ksz;
    int64_t b0, n;
    chunk_range(g->batch, nc, c, &b0, &n);
    const int64_t N = n * osz;
    /* y's chunk, or its f32 values before they are rounded into half y */
    T *yb = tg__conv_half_out(g) ? tg__conv_scratch(4, (size_t)(n * g->c_img * isz) * sizeof(T))
                                 : (T *)j->y + b0 * g->c_img * isz;
    if (!yb) return TG_ENOMEM;
    const void *xp = FN(chunk_packed)(g, in_at(g, j->x, sizeof(T), b0 * g->c_col * osz), n, N);
    if (!xp) return TG_ENOMEM;
    /* Pointwise, one sample: the columns are y itself.  Otherwise the rows
     * of cols are padded to ld = N + 16: col2im reads up to K rows at once,
     * and with N a multiple of 1024 (usual for power-of-two images) rows
     * exactly 4 KiB apart would all fall into the same L1 cache sets.  The
     * columns are then the zeroed buffer, which the GEMM adds into (beta = 1:
     * the same bits as beta = 0, without OpenBLAS zeroing C first, 4% of the
     * DCGAN step) and col2im leaves zero again; or, for a GEMM that writes C
     * (writes_c), scratch slot 0 with beta = 0 (no zeroing, and C is not read). */
    const bool direct = tg__conv_is_pointwise(g) && n == 1;
    const bool zeroed = !direct && !FN(writes_c)(g);
    const int64_t ld = direct ? N : N + 16;
    const size_t bytes = (size_t)(g->c_img * ksz * ld) * sizeof(T);
    T *cols = direct ? yb : zeroed ? tg__conv_zeroed_take(bytes) : tg__conv_scratch(0, bytes);
    if (!cols) return TG_ENOMEM;
    for (int64_t gi = 0; gi < g->groups; gi++)
        FN(weight_gemm)(g, true, kk, N, co, w, gi * co * kk, kk, FN(col_at)(g, xp, gi * co * N),
                        N, zeroed ? 1 : 0, cols + gi * kk * ld, ld);
    int rc = TG_OK;
    if (!direct) rc = FN(tg__conv_col2im_batch)(cols, ld, n, g->c_img, g, yb, zeroed ? cols : NULL);
    if (zeroed) tg__conv_zeroed_give();
    TG_TRY(rc);
    if (tg__conv_half_out(g))
        FN(tg__conv_store)(g, yb, n, g->c_img, isz, false, j->y, b0 * g->c_img * isz, NULL);
    return TG_OK;
}

int FN(tg__conv_transpose_cols)(const tg__conv_geom *g, const void *x, const T *w, void *y)
{
    FN(transpose_job) j = {.g = g, .x = x, .w = w, .y = y,
                           .nc = chunk_count(g->batch, FN(cols_chunk)(g))};
    return tg__run_tasks(j.nc, true, FN(transpose_chunk), &j);
}

/* Weight gradient: dW_g (c_col/G, c_img/G*K) = sum over chunks of
 * up_g (c_col/G, nb*O) @ cols_g^T (nb*O, c_img/G*K), with cols = im2col(z chunk)
 * and up = pack(u chunk), summed in chunk order (conv_passes). */
int FN(tg__conv_weight_grad)(const tg__conv_geom *g, const void *z, const void *u, T *dw)
{
    return FN(conv_passes)(g, z, NULL, u, NULL, dw);
}

/* Both at once, sharing each chunk's im2col(z): conv(z, W) into y and
 * conv_weight_grad(z, u) into dw (ConvTranspose's backward: z = dy, u = x).
 * Same GEMMs on the same buffers as the two separate kernels, so the same
 * bits. */
int FN(tg__conv_and_weight_grad)(const tg__conv_geom *g, const void *z, const T *w,
                                 const void *u, void *y, T *dw)
{
    return FN(conv_passes)(g, z, w, u, y, dw);
}

/* The chunk loop of the three above: per chunk, cols = im2col(z chunk), then
 * y chunk = W @ cols when y is wanted and dW_c = pack(u chunk) @ cols^T when
 * dw is wanted, dw = ((dW_0 + dW_1) + dW_2) + ...: the same sum for any
 * number of threads and any wave size. */
typedef struct FN(passes_job) {
    const tg__conv_geom *g;
    const void *z, *u;   /* activation inputs */
    const T *w;
    void *y;             /* T, or half (g->half_out) */
    T *dw;
    T *part;          /* a wave's weight-gradient partials, dwn elements each */
    int64_t dwn, nc, c0;   /* dW's size, the chunk count, the wave's first chunk */
} FN(passes_job);

/* dw[i] += part[k][i] for k in [k0, len), in chunk order, over a range of i. */
typedef struct {
    T *dw;
    const T *part;
    int64_t dwn, k0, len;
} FN(part_sum);

/* In blocks of 256 elements, partial by partial: the same terms in the same
 * order per element as one element at a time, but each inner loop is a
 * contiguous one that the compiler vectorises (element by element, the
 * partials are dwn apart: 2.5% of the DCGAN bf16 step). */
static void FN(part_sum_range)(void *p, int64_t i0, int64_t i1)
{
    const FN(part_sum) *q = p;
    T acc[256];
    for (int64_t b = i0; b < i1; b += 256) {
        const int64_t nb = i1 - b < 256 ? i1 - b : 256;
        memcpy(acc, q->dw + b, (size_t)nb * sizeof(T));
        for (int64_t k = q->k0; k < q->len; k++) {
            const T *pk = q->part + k * q->dwn + b;
            for (int64_t i = 0; i < nb; i++) acc[i] += pk[i];
        }
        memcpy(q->dw + b, acc, (size_t)nb * sizeof(T));
    }
}

/* Chunk c0 + i of a passes_job (a tg__run_tasks task): its share of y, and
 * of dW into dw (chunk 0) or its partial. */
static int FN(passes_chunk)(void *job, int64_t i)
{
    const FN(passes_job) *j = job;
    const tg__conv_geom *g = j->g;
    const int64_t c = j->c0 + i, osz = tg__conv_prod3(g->col), isz = tg__conv_prod3(g->img);
    int64_t b0, n;
    chunk_range(g->batch, j->nc, c, &b0, &n);
    const int64_t N = n * osz;
    const void *cols = FN(chunk_cols)(g, in_at(g, j->z, sizeof(T), b0 * g->c_img * isz), n, N);
    if (!cols) return TG_ENOMEM;
    if (j->y) TG_TRY(FN(chunk_conv)(g, cols, j->w, n, N, j->y, b0 * g->c_col * osz));
    if (!j->dw) return TG_OK;
    return FN(chunk_wgrad)(g, cols, in_at(g, j->u, sizeof(T), b0 * g->c_col * osz), n, N,
                           c ? j->part + i * j->dwn : j->dw);
}

static int FN(conv_passes)(const tg__conv_geom *g, const void *z, const T *w, const void *u,
                           void *y, T *dw)
{
    int64_t nc = chunk_count(g->batch, FN(cols_chunk)(g));
    const int64_t dwn = g->c_col * g->c_img / g->groups * tg__conv_prod3(g->k);
    if (dw && nc == 0) memset(dw, 0, (size_t)dwn * sizeof(T));
    /* Chunks run in waves of `per`: a wave's chunks in parallel, each
     * weight-gradient share into its own partial (chunk 0 into dw itself),
     * then the partials added to dw in chunk order.  The partials take at
     * most TG__CONV_PART_BYTES when that holds two; waves are then of an even
     * size and the chunk count a multiple of it, so two threads always have
     * one chunk each. */
    int64_t per = nc;
    T *part = NULL;
    if (dw && nc > 1) {
        const int64_t fit = part_bytes() / (dwn * (int64_t)sizeof(T));
        if (fit < nc) {
            per = fit < 2 ? 2 : fit & ~(int64_t)1;
            nc = (nc + per - 1) / per * per;
            if (nc > g->batch) nc = g->batch;
        }
        if (!(part = tg__work_alloc((size_t)(per * dwn) * sizeof(T)))) return TG_ENOMEM;
    }
    FN(passes_job) j = {.g = g, .z = z, .w = w, .u = u, .y = y, .dw = dw, .part = part,
                        .dwn = dwn, .nc = nc};
    int rc = TG_OK;
    for (int64_t c0 = 0; c0 < nc && rc == TG_OK; c0 += per) {
        const int64_t len = nc - c0 < per ? nc - c0 : per;
        j.c0 = c0;
        rc = tg__run_tasks(len, true, FN(passes_chunk), &j);
        const int64_t k0 = c0 == 0 ? 1 : 0;   /* chunk 0 wrote dw */
        if (rc == TG_OK && part && len > k0) {
            FN(part_sum) ps = {.dw = dw, .part = part, .dwn = dwn, .k0 = k0, .len = len};
            tg__parallel_range(dwn, dwn * len > 32768, FN(part_sum_range), &ps);
        }
    }
    tg__work_free(part);
    return rc;
}

#undef FN
#undef TG__CAT
#undef TG__CAT_
