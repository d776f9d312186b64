/* src/ops/conv_gather_tmpl.h - the copies that make a conv GEMM's operands
 * from activations, for one element type: im2col and the (B, C, S) -> (C,
 * B*S) permutation that lets one GEMM cover a whole chunk of the batch.
 * Included by conv_im2col.c once per type with these macros defined:
 *   T     the element type: float, double, or uint16_t for bf16 bits
 *   SUF   the name suffix (f32, f64, bf16)
 *   BITS  1 for the bf16 bits (copied as they are from bf16 activations, for
 *         the bf16 GEMM kernels that pack bits: tg__conv_bits), else 0
 * and FN(load) (conv_im2col.c) reading activations into T.  It defines
 * tg__conv_{im2col_batch,pack_cbs}_SUF (declared in conv_internal.h), the
 * rest static.  Every buffer is contiguous row-major; every parallel loop
 * writes disjoint outputs. */

#define TG__CAT_(a, b) a##_##b
#define TG__CAT(a, b) TG__CAT_(a, b)
#define FN(name) TG__CAT(name, SUF)

/* One im2col row for kernel tap (k0, k1, k2) of one image plane (I0, I1, I2):
 * dst[o] = plane[o*s - pad + k*d], 0 outside the image, for the O0*O1*O2
 * column positions o.  ie, oe and ke are the image, column and kernel extents
 * (I is taken by <complex.h>). */
static void FN(im2col_row)(const T *plane, const tg__conv_geom *g, int64_t k0, int64_t k1,
                           int64_t k2, T *dst)
{
    const int64_t *ie = g->img, *oe = g->col, *s = g->stride, *d = g->dil, *p = g->pad;
    /* Along the last axis, o2 reads inside the image for o2 in [lo, hi). */
    const int64_t off2 = k2 * d[2] - p[2];
    const int64_t lo = tg__conv_clamp(tg__conv_ceil_div(-off2, s[2]), 0, oe[2]);
    const int64_t hi = tg__conv_clamp(tg__conv_ceil_div(ie[2] - off2, s[2]), lo, oe[2]);
    for (int64_t o0 = 0; o0 < oe[0]; o0++) {
        const int64_t i0 = o0 * s[0] - p[0] + k0 * d[0];
        for (int64_t o1 = 0; o1 < oe[1]; o1++, dst += oe[2]) {
            const int64_t i1 = o1 * s[1] - p[1] + k1 * d[1];
            if (i0 < 0 || i0 >= ie[0] || i1 < 0 || i1 >= ie[1]) {
                memset(dst, 0, (size_t)oe[2] * sizeof(T));
                continue;
            }
            const T *src = plane + (i0 * ie[1] + i1) * ie[2];
            for (int64_t o2 = 0; o2 < lo; o2++) dst[o2] = 0;
            if (s[2] == 1) {
                if (hi > lo) memcpy(dst + lo, src + lo + off2, (size_t)(hi - lo) * sizeof(T));
            } else {
                for (int64_t o2 = lo; o2 < hi; o2++) dst[o2] = src[o2 * s[2] + off2];
            }
            for (int64_t o2 = hi; o2 < oe[2]; o2++) dst[o2] = 0;
        }
    }
}

/* The work of im2col_batch, split by planes or rows over threads. */
typedef struct {
    const tg__conv_geom *g;
    const void *img;
    int64_t nb, c, ksz, osz, isz;
    const int32_t *tab;
    const uint16_t *idx;   /* bits: tab as tg__conv_perm_table made it, or NULL */
    T *cols;
} FN(im2col_job);

/* The cache lines of plane pl (channel pl / nb of image pl % nb) of q's
 * images, asked for ahead: the planes of one channel lie c planes apart, a
 * hop the hardware's prefetchers do not follow (waiting for each plane was
 * a third of the permutes' time in the DCGAN's bf16 step). */
static void FN(prefetch_plane)(const FN(im2col_job) *q, int64_t pl)
{
    const int64_t size = BITS || tg__conv_half_in(q->g) ? 2 : (int64_t)sizeof(T);
    const int64_t bytes = q->isz * size;
    const char *at = (const char *)q->img + ((pl % q->nb) * q->c + pl / q->nb) * bytes;
    for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(at + b);
    __builtin_prefetch(at + bytes - 1);   /* the last line, when the plane is not aligned */
}

#if BITS
/* Planes [p0, p1) by permutes (tg__conv_perm_plane). */
static void FN(im2col_planes_perm)(void *p, int64_t p0, int64_t p1)
{
    const FN(im2col_job) *q = p;
    const int64_t nb = q->nb, ksz = q->ksz, osz = q->osz, isz = q->isz;
    for (int64_t pl = p0; pl < p1; pl++) {
        const int64_t ch = pl / nb, j = pl % nb;
        if (pl + 1 < p1) FN(prefetch_plane)(q, pl + 1);
        tg__conv_perm_plane((const T *)q->img + (j * q->c + ch) * isz, isz, q->idx, ksz, osz,
                            q->cols + (ch * ksz * nb + j) * osz, nb * osz);
    }
}

/* Planes [p0, p1) row by row by permutes (tg__conv_rowperm_plane). */
static void FN(im2col_planes_rowperm)(void *p, int64_t p0, int64_t p1)
{
    const FN(im2col_job) *q = p;
    const int64_t nb = q->nb, ksz = q->ksz, osz = q->osz, isz = q->isz;
    for (int64_t pl = p0; pl < p1; pl++) {
        const int64_t ch = pl / nb, j = pl % nb;
        if (pl + 1 < p1) FN(prefetch_plane)(q, pl + 1);
        tg__conv_rowperm_plane((const T *)q->img + (j * q->c + ch) * isz, q->g,
                               q->cols + (ch * ksz * nb + j) * osz, nb * osz);
    }
}
#endif

/* Planes [p0, p1) through the tap table, each copied next to a zero. */
static void FN(im2col_planes_copied)(void *p, int64_t p0, int64_t p1)
{
    const FN(im2col_job) *q = p;
    const int64_t nb = q->nb, ksz = q->ksz, osz = q->osz, isz = q->isz;
    const int32_t *tab = q->tab;
    T *cols = q->cols;
    for (int64_t pl = p0; pl < p1; pl++) {
        const int64_t ch = pl / nb, j = pl % nb;
        if (pl + 1 < p1) FN(prefetch_plane)(q, pl + 1);
        T buf[TG__PLANE_COPY_MAX + 1];
        FN(load)(q->g, q->img, (j * q->c + ch) * isz, isz, buf);
        buf[isz] = 0;
        for (int64_t k = 0; k < ksz; k++) {
            const int32_t *t = tab + k * osz;
            T *dst = cols + ((ch * ksz + k) * nb + j) * osz;
            /* four loads, then four stores that gcc joins into one vector
             * store (it vectorised the plain loop inside an OpenMP region
             * but not here: 2x the time in the DCGAN step's profile) */
            int64_t o = 0;
            for (; o + 4 <= osz; o += 4) {
                const T v0 = buf[t[o]], v1 = buf[t[o + 1]], v2 = buf[t[o + 2]], v3 = buf[t[o + 3]];
                dst[o] = v0;
                dst[o + 1] = v1;
                dst[o + 2] = v2;
                dst[o + 3] = v3;
            }
            for (; o < osz; o++) dst[o] = buf[t[o]];
        }
    }
}

/* Planes [p0, p1) through the tap table, read in place. */
static void FN(im2col_planes)(void *p, int64_t p0, int64_t p1)
{
    const FN(im2col_job) *q = p;
    const int64_t nb = q->nb, ksz = q->ksz, osz = q->osz;
    for (int64_t pl = p0; pl < p1; pl++) {
        const int64_t ch = pl / nb, j = pl % nb;
        const T *plane = (const T *)q->img + (j * q->c + ch) * q->isz;
        for (int64_t k = 0; k < ksz; k++) {
            const int32_t *t = q->tab + k * osz;
            T *dst = q->cols + ((ch * ksz + k) * nb + j) * osz;
            for (int64_t o = 0; o < osz; o++) dst[o] = t[o] < 0 ? (T)0 : plane[t[o]];
        }
    }
}

/* Column rows [r0, r1), row by row. */
static void FN(im2col_rows)(void *p, int64_t r0, int64_t r1)
{
    const FN(im2col_job) *q = p;
    const int64_t *ke = q->g->k, nb = q->nb, ksz = q->ksz;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t j = r % nb, row = r / nb, ch = row / ksz, k = row % ksz;
        const int64_t k2 = k % ke[2], k1 = (k / ke[2]) % ke[1], k0 = k / (ke[1] * ke[2]);
        FN(im2col_row)((const T *)q->img + (j * q->c + ch) * q->isz, q->g, k0, k1, k2,
                       q->cols + r * q->osz);
    }
}

/* cols (c*K, nb*O) = im2col of nb images img (nb, c, I):
 * cols[(ch, k), j*O + o] = img[j, ch, o*s - pad + k*d].  Short rows go
 * through the tap table (tap_table_new), the others row by row.  img is an
 * activation input (half when g->half_in says so).  TG_ENOMEM: no memory. */
int FN(tg__conv_im2col_batch)(const void *img, int64_t nb, int64_t c, const tg__conv_geom *g,
                              T *cols)
{
    const int64_t ksz = tg__conv_prod3(g->k), osz = tg__conv_prod3(g->col),
                  isz = tg__conv_prod3(g->img);
    const int64_t rows = c * ksz * nb;
    int32_t *tab = tap_table_new(g);
    tg__conv_geom gf;   /* g, reading the converted copy below */
    if (!BITS && tg__conv_half_in(g) && !(tab && isz <= TG__PLANE_COPY_MAX)) {
        /* Large planes: the paths below index img directly, so the half
         * images are converted first (one chunk, in scratch slot 3). */
        T *cv = tg__conv_scratch(3, (size_t)(nb * c * isz) * sizeof(T));
        if (!cv) {
            free(tab);
            return TG_ENOMEM;
        }
        FN(load)(g, img, 0, nb * c * isz, cv);
        gf = *g;
        gf.half_in = TG_F32;
        g = &gf;
        img = cv;
    }
    FN(im2col_job) q = {.g = g, .img = img, .nb = nb, .c = c, .ksz = ksz, .osz = osz,
                        .isz = isz, .tab = tab, .cols = cols};
    const bool par = rows * osz > 32768;
    if (tab && isz <= TG__PLANE_COPY_MAX) {
        /* Plane by plane, all taps of one (image, channel) plane while it is
         * in L1 (measured 25% faster than row order on the DCGAN layers).
         * The plane is copied with a zero after it, and the table's padding
         * entries point at that zero: a gather without a branch, which at
         * -O3 gcc turned into code twice as slow (0.86 vs 0.42 ms per DCGAN
         * chunk in a standalone test). */
        for (int64_t i = 0; i < ksz * osz; i++)
            if (tab[i] < 0) tab[i] = (int32_t)isz;
        void (*planes)(void *, int64_t, int64_t) = FN(im2col_planes_copied);
#if BITS
        /* bits planes of under 256 elements: by permutes, when the CPU has them */
        if (tg__conv_perm_usable(isz) && (q.idx = tg__conv_perm_table(tab, ksz, osz)))
            planes = FN(im2col_planes_perm);
        else if (tg__conv_rowperm_usable(g))   /* larger planes of short rows */
            planes = FN(im2col_planes_rowperm);
#endif
        tg__parallel_range(c * nb, par, planes, &q);
    } else if (tab) {   /* a large plane: the padding test stays in the loop */
        tg__parallel_range(c * nb, par, FN(im2col_planes), &q);
    } else {
        tg__parallel_range(rows, par, FN(im2col_rows), &q);
    }
    free((void *)q.idx);
    free(tab);
    return TG_OK;
}

/* The rows of the permutation, split over threads. */
typedef struct {
    const tg__conv_geom *g;
    const void *x;
    int64_t nb, c, s;
    T *y;
} FN(cbs_job);

static void FN(pack_rows)(void *p, int64_t r0, int64_t r1)
{
    const FN(cbs_job) *q = p;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t ch = r / q->nb, j = r % q->nb;
        FN(load)(q->g, q->x, (j * q->c + ch) * q->s, q->s, q->y + r * q->s);
    }
}

/* xp (c, nb*S) = x (nb, c, S) with the batch moved inside: xp[ch, j*S + s] = x[j, ch, s].
 * x is an activation input (half when g->half_in says so). */
void FN(tg__conv_pack_cbs)(const tg__conv_geom *g, const void *x, int64_t nb, int64_t c,
                           int64_t s, T *xp)
{
    FN(cbs_job) q = {.g = g, .x = x, .nb = nb, .c = c, .s = s, .y = xp};
    tg__parallel_range(c * nb, nb * c * s > 32768, FN(pack_rows), &q);
}

#undef FN
#undef TG__CAT
#undef TG__CAT_
