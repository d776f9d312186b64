/* src/data/idx.c - tg_idx_load: the IDX format of MNIST-style datasets.
 *
 * Layout: bytes 0-1 are zero, byte 2 names the element type, byte 3 is ndim,
 * then ndim big-endian u32 extents and prod(extents) big-endian elements.
 * zlib's gz* functions read both gzip and plain files (gzread passes plain
 * bytes through), so one path serves both. */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <zlib.h>

#include "internal.h"
#include "tapegrad/data.h"

typedef struct idx_type {
    uint8_t code;
    int file_size;      /* bytes per element in the file */
    tg_dtype dtype;     /* what it becomes */
} idx_type;

static const idx_type idx_types[] = {
    {0x08, 1, TG_U8}, {0x09, 1, TG_I8}, {0x0B, 2, TG_I32},
    {0x0C, 4, TG_I32}, {0x0D, 4, TG_F32}, {0x0E, 8, TG_F64},
};

static const idx_type *find_type(uint8_t code)
{
    for (size_t i = 0; i < sizeof idx_types / sizeof idx_types[0]; i++)
        if (idx_types[i].code == code) return &idx_types[i];
    return NULL;
}

/* Maps the state of a gzFile after a short or failed read to a status. */
static int gz_status(gzFile gz, const char *path, const char *what)
{
    int zerr = Z_OK;
    const char *msg = gzerror(gz, &zerr);
    if (zerr == Z_ERRNO)
        return tg__error(TG_EIO, "idx_load: reading '%s': %s", path, strerror(errno));
    if (zerr == Z_MEM_ERROR) return tg__error(TG_ENOMEM, "idx_load: '%s': out of memory", path);
    if (zerr != Z_OK)
        return tg__error(TG_EFORMAT, "idx_load: '%s': corrupt gzip stream (%s)", path, msg);
    return tg__error(TG_EFORMAT, "idx_load: '%s': truncated %s", path, what);
}

/* Reads exactly n bytes (in chunks gzread's int length can take); a short
 * read is an error describing `what` was cut off. */
static int read_exact(gzFile gz, void *dst, size_t n, const char *path, const char *what)
{
    unsigned char *p = dst;
    while (n > 0) {
        unsigned chunk = n > (1u << 30) ? (1u << 30) : (unsigned)n;
        int got = gzread(gz, p, chunk);
        if (got <= 0 || (unsigned)got < chunk) return gz_status(gz, path, what);
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Parses the header into *type, ndim and shape. */
static int read_header(gzFile gz, const char *path, const idx_type **type, int *ndim,
                       int64_t *shape, size_t *nbytes)
{
    unsigned char h[4], d[4 * TG_MAX_DIMS];
    TG_TRY(read_exact(gz, h, 4, path, "header"));
    TG_CHECK(h[0] == 0 && h[1] == 0, TG_EFORMAT,
             "idx_load: '%s': bad magic %02x%02x (must be 0000)", path, h[0], h[1]);
    *type = find_type(h[2]);
    TG_CHECK(*type != NULL, TG_EFORMAT, "idx_load: '%s': unknown type byte 0x%02x", path, h[2]);
    TG_CHECK(h[3] >= 1 && h[3] <= TG_MAX_DIMS, TG_EFORMAT,
             "idx_load: '%s': ndim=%d must be in 1..%d", path, h[3], TG_MAX_DIMS);
    *ndim = h[3];
    TG_TRY(read_exact(gz, d, 4 * (size_t)*ndim, path, "dimensions"));
    for (int i = 0; i < *ndim; i++) shape[i] = be32(d + 4 * i);
    /* The tensor's own rule (its bytes and strides fit in an int64); the
     * file's bytes, file_size <= the tensor's element size each, fit then. */
    if (!tg__shape_bytes_fit(*ndim, shape, (int64_t)tg_dtype_size((*type)->dtype))) {
        char buf[160];
        return tg__error(TG_EFORMAT, "idx_load: '%s': dimensions %s overflow", path,
                         tg_shape_str(buf, sizeof buf, *ndim, shape));
    }
    *nbytes = (size_t)tg__numel(*ndim, shape) * (size_t)(*type)->file_size;
    return 0;
}

/* Reads the nbytes of data into a malloc'd buffer grown as bytes arrive, so a
 * header that claims terabytes fails as truncated instead of allocating them. */
static int read_data(gzFile gz, const char *path, size_t nbytes, unsigned char **buf)
{
    size_t cap = nbytes < (1u << 20) ? nbytes : (1u << 20), have = 0;
    unsigned char *b = tg__malloc(cap ? cap : 1);
    if (!b) return TG_ENOMEM;
    while (have < nbytes) {
        if (have == cap) {
            size_t ncap = cap > nbytes / 2 ? nbytes : cap * 2;
            unsigned char *nb = realloc(b, ncap);
            if (!nb) {
                free(b);
                return tg__error(TG_ENOMEM, "idx_load: '%s': out of memory", path);
            }
            b = nb;
            cap = ncap;
        }
        size_t want = cap - have > (1u << 30) ? (1u << 30) : cap - have;
        int got = gzread(gz, b + have, (unsigned)want);
        if (got <= 0) {
            free(b);
            return gz_status(gz, path, "data (fewer bytes than the dimensions say)");
        }
        have += (size_t)got;
    }
    *buf = b;
    return 0;
}

/* Converts big-endian file elements to the tensor's native elements. */
static void decode(const idx_type *ty, const unsigned char *src, void *dst, int64_t n)
{
    if (ty->file_size == 1) {
        memcpy(dst, src, (size_t)n);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *s = src + i * ty->file_size;
        if (ty->code == 0x0B) {
            ((int32_t *)dst)[i] = (int16_t)((uint16_t)s[0] << 8 | s[1]);
        } else if (ty->file_size == 4) {
            uint32_t u = be32(s);
            memcpy((char *)dst + 4 * i, &u, 4);
        } else {
            uint64_t u = (uint64_t)be32(s) << 32 | be32(s + 4);
            memcpy((char *)dst + 8 * i, &u, 8);
        }
    }
}

static int load_open(tg_tensor **out, gzFile gz, const char *path)
{
    const idx_type *ty = NULL;
    int ndim = 0;
    int64_t shape[TG_MAX_DIMS];
    size_t nbytes = 0;
    unsigned char *buf = NULL, extra;
    TG_TRY(read_header(gz, path, &ty, &ndim, shape, &nbytes));
    TG_TRY(read_data(gz, path, nbytes, &buf));
    /* The stream must end exactly here: a clean end leaves gzerror at Z_OK,
     * while a gzip stream cut inside its trailer or CRC is corruption. */
    int got = gzread(gz, &extra, 1), zerr = Z_OK, rc = 0;
    if (got > 0) rc = tg__error(TG_EFORMAT, "idx_load: '%s': trailing bytes after the data", path);
    else if (got < 0 || (gzerror(gz, &zerr), zerr != Z_OK)) rc = gz_status(gz, path, "data");
    tg_tensor *t = NULL;
    if (rc == 0 && !(t = tg__tensor_empty(ty->dtype, ndim, shape))) rc = TG_ENOMEM;
    if (rc == 0) decode(ty, buf, tg_tensor_data(t), (int64_t)(nbytes / (size_t)ty->file_size));
    free(buf);
    if (rc == 0) *out = t;
    return rc;
}

int tg_idx_load(tg_tensor **out, const char *path)
{
    TG_CHECK(out != NULL, TG_EINVAL, "idx_load: out must not be NULL");
    TG_CHECK(path != NULL, TG_EINVAL, "idx_load: path must not be NULL");
    errno = 0;
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return tg__error(errno == ENOMEM ? TG_ENOMEM : TG_EIO, "idx_load: cannot open '%s': %s",
                         path, errno ? strerror(errno) : "gzopen failed");
    int rc = load_open(out, gz, path);
    gzclose_r(gz);
    return rc;
}
