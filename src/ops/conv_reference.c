/* src/ops/conv_reference.c - ConvTranspose the textbook way, for learners and
 * as an independent check of the fast path (conv_kernels.c).
 *
 * A ConvTranspose with stride s, dilation d, padding (lo, hi) and
 * output_padding op is a plain stride-1 Conv of a modified input:
 *   1. interleave s-1 zeros between neighbouring input elements
 *      (extent S becomes (S-1)*s + 1);
 *   2. pad each axis by d*(K-1) - lo on the low side and d*(K-1) - hi on the
 *      high side (a negative amount crops instead), plus op extra zeros on the
 *      high side;
 *   3. flip the kernel spatially (tap k becomes K-1-k) and swap its channel
 *      axes per group: (C_in, C_out/G, K...) becomes (C_out, C_in/G, K...);
 *   4. run Conv with stride 1, padding 0 and the same dilation d.
 * The result has extent (S-1)*s + 1 + 2*d*(K-1) - lo - hi + op - d*(K-1),
 * which is the ConvTranspose extent.  This multiplies every inserted zero,
 * so it is slow; the fast path never does.
 */
#include <string.h>

#include "ops/conv_internal.h"

/* Steps 1 and 2: x (B, C, S...) -> xz (B, C, Z...).  Input element i lands at
 * padded position z = i*s + (d*(K-1) - lo); positions cropped away (z < 0 or
 * z >= Z) are dropped.  xz must be zeroed. */
static void interleave_and_pad(const tg__conv_geom *g, const int64_t *Z, size_t esz,
                               const char *x, char *xz)
{
    const int64_t *S = g->col;
    int64_t shift[3];
    for (int a = 0; a < 3; a++) shift[a] = g->dil[a] * (g->k[a] - 1) - g->pad[a];
    const int64_t planes = g->batch * g->c_col;
    for (int64_t bc = 0; bc < planes; bc++)
        for (int64_t i0 = 0; i0 < S[0]; i0++)
        for (int64_t i1 = 0; i1 < S[1]; i1++)
        for (int64_t i2 = 0; i2 < S[2]; i2++) {
            int64_t z0 = i0 * g->stride[0] + shift[0], z1 = i1 * g->stride[1] + shift[1],
                    z2 = i2 * g->stride[2] + shift[2];
            if (z0 < 0 || z0 >= Z[0] || z1 < 0 || z1 >= Z[1] || z2 < 0 || z2 >= Z[2])
                continue;
            int64_t src = ((bc * S[0] + i0) * S[1] + i1) * S[2] + i2;
            int64_t dst = ((bc * Z[0] + z0) * Z[1] + z1) * Z[2] + z2;
            memcpy(xz + dst * (int64_t)esz, x + src * (int64_t)esz, esz);
        }
}

/* Step 3: w (c_col, c_img/G, K...) -> wc (c_img, c_col/G, K...) with
 * wc[g*co + o, i, k] = w[g*ci + i, o, K-1-k], ci = c_col/G, co = c_img/G. */
static void flip_and_swap(const tg__conv_geom *g, size_t esz, const char *w, char *wc)
{
    const int64_t ci = g->c_col / g->groups, co = g->c_img / g->groups;
    const int64_t ksz = tg__conv_prod3(g->k);
    for (int64_t gi = 0; gi < g->groups; gi++)
        for (int64_t i = 0; i < ci; i++)
            for (int64_t o = 0; o < co; o++)
                for (int64_t k = 0; k < ksz; k++) {
                    int64_t src = ((gi * ci + i) * co + o) * ksz + (ksz - 1 - k);
                    int64_t dst = ((gi * co + o) * ci + i) * ksz + k;
                    memcpy(wc + dst * (int64_t)esz, w + src * (int64_t)esz, esz);
                }
}

int tg__conv_transpose_reference_raw(tg_dtype dt, const tg__conv_geom *g,
                                     const int64_t *pad_hi, const int64_t *op,
                                     const void *x, const void *w, void *y)
{
    TG_ASSERT(dt == TG_F32 || dt == TG_F64);
    const size_t esz = tg_dtype_size(dt);
    /* The stride-1 Conv of step 4 reads the padded input xz (extent Z) and
     * writes y. */
    tg__conv_geom c = *g;
    for (int a = 0; a < 3; a++) {
        int64_t span = g->dil[a] * (g->k[a] - 1);
        c.img[a] = (g->col[a] - 1) * g->stride[a] + 1            /* interleaved */
                   + (span - g->pad[a]) + (span - pad_hi[a]) + op[a];
        c.col[a] = g->img[a];
        TG_ASSERT(c.img[a] - span == g->img[a]);   /* Conv extent, stride 1, no pad */
        c.stride[a] = 1;
        c.pad[a] = 0;
    }
    c.c_img = g->c_col;
    c.c_col = g->c_img;
    int64_t zsz = tg__conv_prod3(c.img);
    int64_t wsz = g->c_col * (g->c_img / g->groups) * tg__conv_prod3(g->k);
    char *xz = tg__calloc((size_t)(g->batch * g->c_col * zsz), esz);
    char *wc = tg__malloc((size_t)wsz * esz);
    int rc = TG_ENOMEM;
    if (!xz || !wc) goto done;
    interleave_and_pad(g, c.img, esz, x, xz);
    flip_and_swap(g, esz, w, wc);
    rc = tg__conv_forward_raw(dt, &c, xz, wc, y);
done:
    free(xz);
    free(wc);
    return rc;
}
