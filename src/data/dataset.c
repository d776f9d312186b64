/* src/data/dataset.c - in-memory image-classification datasets: u8 images
 * (N, C, H, W) and i64 labels (N), turned into f32 batches on demand so that
 * a 60000-image dataset costs 47 MB rather than 188 MB.  Resized image
 * folders keep f32 images in [0, 1] instead (dataset_pixels.h). */
#include <stdatomic.h>
#include <string.h>

#include "core/core.h"
#include "data/dataset_names.h"
#include "data/dataset_pixels.h"
#include "tapegrad/data.h"

struct tg_dataset {
    _Atomic int refcount;
    tg_tensor *images;        /* u8 (N, C, H, W), or f32 in [0, 1], contiguous, owned */
    tg_tensor *labels;        /* i64 (N), contiguous, owned */
    int n_classes;
    tg_pixel_range range;
    bool fashion;             /* class names are Fashion-MNIST's */
    char **names;             /* n_classes pointers, then the NUL-terminated texts
                                 they point to, in one owned block: "0", "1", ...
                                 or the names a loader set */
};

static const char *const fashion_names[10] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
};

const char *tg_fashion_mnist_class_name(int label)
{
    return label >= 0 && label < 10 ? fashion_names[label] : NULL;
}

static int check_inputs(const tg_tensor *images, const tg_tensor *labels)
{
    TG_CHECK(images != NULL && labels != NULL, TG_EINVAL,
             "dataset_from_tensors: images and labels must not be NULL");
    TG_CHECK(tg_tensor_dtype(images) == TG_U8, TG_EDTYPE,
             "dataset_from_tensors: images have dtype %s; must be u8",
             tg_dtype_name(tg_tensor_dtype(images)));
    int nd = tg_tensor_ndim(images);
    TG_CHECK(nd == 3 || nd == 4, TG_ESHAPE,
             "dataset_from_tensors: images have %d dims; must be (N, H, W) or (N, C, H, W)", nd);
    TG_CHECK(!tg_dtype_is_float(tg_tensor_dtype(labels)), TG_EDTYPE,
             "dataset_from_tensors: labels have dtype %s; must be an integer dtype",
             tg_dtype_name(tg_tensor_dtype(labels)));
    TG_CHECK(tg_tensor_ndim(labels) == 1 && tg_tensor_dim(labels, 0) == tg_tensor_dim(images, 0),
             TG_ESHAPE, "dataset_from_tensors: labels must be (N) with N=%lld (the image count)",
             (long long)tg_tensor_dim(images, 0));
    return 0;
}

/* max(label) + 1 after checking every label is in [0, TG__MAX_CLASSES). */
static int count_classes(const tg_tensor *labels, int *n_classes)
{
    const int64_t *l = tg_tensor_cdata(labels);
    int64_t n = tg_tensor_numel(labels), top = -1;
    for (int64_t i = 0; i < n; i++) {
        TG_CHECK(l[i] >= 0 && l[i] < TG__MAX_CLASSES, TG_EINVAL,
                 "dataset_from_tensors: labels[%lld]=%lld must be in [0, %d)", (long long)i,
                 (long long)l[i], TG__MAX_CLASSES);
        if (l[i] > top) top = l[i];
    }
    *n_classes = (int)(top + 1);
    return 0;
}

static void dataset_free(tg_dataset *ds)
{
    tg_tensor_release(ds->images);
    tg_tensor_release(ds->labels);
    free(ds->names);
    free(ds);
}

/* A dataset over images (contiguous (N, C, H, W); retained) and a copy of
 * labels (checked by the caller). */
static int dataset_new(tg_dataset **out, tg_tensor *images, const tg_tensor *labels)
{
    tg_dataset *ds = tg__calloc(1, sizeof *ds);
    if (!ds) return TG_ENOMEM;
    ds->refcount = 1;
    ds->images = tg_tensor_retain(images);
    int rc = tg_tensor_to_dtype(&ds->labels, labels, TG_I64);
    if (rc == 0) rc = count_classes(ds->labels, &ds->n_classes);
    if (rc == 0) rc = tg__dataset_set_class_names(ds, ds->n_classes, NULL);
    if (rc < 0) {
        dataset_free(ds);
        return rc;
    }
    *out = ds;
    return 0;
}

int tg_dataset_from_tensors(tg_dataset **out, const tg_tensor *images, const tg_tensor *labels)
{
    TG_CHECK(out != NULL, TG_EINVAL, "dataset_from_tensors: out must not be NULL");
    TG_TRY(check_inputs(images, labels));
    tg_tensor *copy = NULL, *view = NULL;
    TG_TRY(tg_tensor_clone(&copy, images));
    /* (N, H, W) is read as (N, 1, H, W): same bytes, one more extent. */
    const int64_t *s = tg_tensor_shape(copy);
    int64_t shape[4] = {s[0], 1, s[1], s[2]};
    if (tg_tensor_ndim(copy) == 4) memcpy(shape, s, sizeof shape);
    view = tg__tensor_view_of(copy->storage, TG_U8, 4, shape, NULL, copy->offset);
    tg_tensor_release(copy);
    if (!view) return TG_ENOMEM;
    int rc = dataset_new(out, view, labels);
    tg_tensor_release(view);
    return rc;
}

int tg__dataset_from_unit_images(tg_dataset **out, tg_tensor *images, const tg_tensor *labels)
{
    TG_ASSERT(tg_tensor_dtype(images) == TG_F32 && tg_tensor_ndim(images) == 4 &&
              tg_tensor_is_contiguous(images) && tg_tensor_ndim(labels) == 1 &&
              tg_tensor_dim(labels, 0) == tg_tensor_dim(images, 0));
    return dataset_new(out, images, labels);
}

int tg__dataset_set_class_names(tg_dataset *ds, int n, const char *const *names)
{
    TG_ASSERT(ds != NULL && n == ds->n_classes);
    char num[12];
    size_t text = 0;
    for (int c = 0; c < n; c++)
        text += (names ? strlen(names[c]) : (size_t)snprintf(num, sizeof num, "%d", c)) + 1;
    char **block = n > 0 ? tg__malloc((size_t)n * sizeof *block + text) : NULL;
    if (n > 0 && !block) return TG_ENOMEM;
    /* The texts follow the pointers: block[c] points into the same block. */
    char *p = (char *)(block + n);
    for (int c = 0; c < n; c++) {
        if (!names) snprintf(num, sizeof num, "%d", c);
        const char *src = names ? names[c] : num;
        size_t len = strlen(src) + 1;
        memcpy(p, src, len);
        block[c] = p;
        p += len;
    }
    free(ds->names);
    ds->names = block;
    return 0;
}

tg_dataset *tg_dataset_retain(tg_dataset *ds)
{
    if (ds) ds->refcount++;
    return ds;
}

void tg_dataset_release(tg_dataset *ds)
{
    if (!ds) return;
    TG_ASSERT(ds->refcount > 0);
    if (--ds->refcount == 0) dataset_free(ds);
}

int64_t tg_dataset_size(const tg_dataset *ds) { return ds ? tg_tensor_dim(ds->images, 0) : 0; }
int tg_dataset_num_classes(const tg_dataset *ds) { return ds ? ds->n_classes : 0; }

void tg_dataset_image_shape(const tg_dataset *ds, int64_t shape[3])
{
    if (!shape) return;
    for (int d = 0; d < 3; d++) shape[d] = ds ? tg_tensor_dim(ds->images, d + 1) : 0;
}

int tg_dataset_set_pixel_range(tg_dataset *ds, tg_pixel_range range)
{
    TG_CHECK(ds != NULL, TG_EINVAL, "dataset_set_pixel_range: ds must not be NULL");
    TG_CHECK(range == TG_PIXELS_SYMMETRIC || range == TG_PIXELS_UNIT, TG_EINVAL,
             "dataset_set_pixel_range: range=%d must be TG_PIXELS_SYMMETRIC or TG_PIXELS_UNIT",
             (int)range);
    ds->range = range;
    return 0;
}

const char *tg_dataset_class_name(const tg_dataset *ds, int label)
{
    if (!ds || label < 0 || label >= ds->n_classes) return NULL;
    return ds->fashion ? fashion_names[label] : ds->names[label];
}

/* Pixel p in 0..255 as a float, computed in double and rounded once. */
static void scale_pixels(float *dst, const uint8_t *src, int64_t n, tg_pixel_range r)
{
    if (r == TG_PIXELS_UNIT)
        for (int64_t i = 0; i < n; i++) dst[i] = (float)(src[i] / 255.0);
    else
        for (int64_t i = 0; i < n; i++) dst[i] = (float)(src[i] / 127.5 - 1.0);
}

/* x in [0, 1] in the range r: x itself, or T.Normalize(0.5, 0.5)'s
 * (x - 0.5) / 0.5 with f32 operations. */
static float map_unit(float x, tg_pixel_range r)
{
    return r == TG_PIXELS_UNIT ? x : (x - 0.5f) / 0.5f;
}

static void map_unit_pixels(float *dst, const float *src, int64_t n, tg_pixel_range r)
{
    for (int64_t i = 0; i < n; i++) dst[i] = map_unit(src[i], r);
}

float tg__dataset_map_unit(const tg_dataset *ds, double x)
{
    return map_unit((float)x, ds->range);
}

tg_pixel_range tg__dataset_pixel_range(const tg_dataset *ds) { return ds->range; }

int tg_dataset_batch(tg_tensor **images, tg_tensor **labels, const tg_dataset *ds,
                     const int64_t *idx, int64_t n)
{
    TG_CHECK(images && labels && ds && idx, TG_EINVAL, "dataset_batch: NULL argument");
    TG_CHECK(n >= 1, TG_EINVAL, "dataset_batch: n=%lld must be >= 1", (long long)n);
    int64_t size = tg_dataset_size(ds);
    for (int64_t i = 0; i < n; i++)
        TG_CHECK(idx[i] >= 0 && idx[i] < size, TG_EINVAL,
                 "dataset_batch: idx[%lld]=%lld must be in [0, %lld)", (long long)i,
                 (long long)idx[i], (long long)size);
    const int64_t *s = tg_tensor_shape(ds->images);
    int64_t per = s[1] * s[2] * s[3], ishape[4] = {n, s[1], s[2], s[3]};
    tg_tensor *x = tg__tensor_empty(TG_F32, 4, ishape);
    tg_tensor *y = tg__tensor_empty(TG_I64, 1, &n);
    if (!x || !y) {
        tg_tensor_release(x);
        tg_tensor_release(y);
        return TG_ENOMEM;
    }
    const bool unit = tg_tensor_dtype(ds->images) == TG_F32;
    const void *src = tg_tensor_cdata(ds->images);
    const int64_t *lab = tg_tensor_cdata(ds->labels);
    float *dx = tg_tensor_data(x);
    int64_t *dy = tg_tensor_data(y);
    for (int64_t i = 0; i < n; i++) {
        if (unit)
            map_unit_pixels(dx + i * per, (const float *)src + idx[i] * per, per, ds->range);
        else
            scale_pixels(dx + i * per, (const uint8_t *)src + idx[i] * per, per, ds->range);
        dy[i] = lab[idx[i]];
    }
    *images = x;
    *labels = y;
    return 0;
}

/* ---- Fashion-MNIST / MNIST files ------------------------------------------ */

/* Loads dir/<prefix>-<kind>-ubyte.gz, or the same name without .gz. */
static int load_part(tg_tensor **out, const char *dir, const char *prefix, const char *kind)
{
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/%s-%s-ubyte.gz", dir, prefix, kind);
    TG_CHECK(n > 0 && (size_t)n < sizeof path, TG_EINVAL, "fashion_mnist_load: dir is too long");
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    else path[n - 3] = '\0';   /* drop ".gz" */
    return tg_idx_load(out, path);
}

static int check_mnist(const tg_tensor *img, const tg_tensor *lab)
{
    TG_CHECK(tg_tensor_dtype(img) == TG_U8 && tg_tensor_ndim(img) == 3, TG_EFORMAT,
             "fashion_mnist_load: images must be u8 (N, H, W)");
    TG_CHECK(tg_tensor_dtype(lab) == TG_U8 && tg_tensor_ndim(lab) == 1, TG_EFORMAT,
             "fashion_mnist_load: labels must be u8 (N)");
    TG_CHECK(tg_tensor_dim(img, 0) == tg_tensor_dim(lab, 0), TG_EFORMAT,
             "fashion_mnist_load: %lld images but %lld labels",
             (long long)tg_tensor_dim(img, 0), (long long)tg_tensor_dim(lab, 0));
    const uint8_t *l = tg_tensor_cdata(lab);
    for (int64_t i = 0; i < tg_tensor_dim(lab, 0); i++)
        TG_CHECK(l[i] <= 9, TG_EFORMAT, "fashion_mnist_load: label[%lld]=%d must be in 0..9",
                 (long long)i, l[i]);
    return 0;
}

int tg_fashion_mnist_load(tg_dataset **out, const char *dir, bool train)
{
    TG_CHECK(out != NULL, TG_EINVAL, "fashion_mnist_load: out must not be NULL");
    if (!dir) dir = TG_FASHION_MNIST_DIR;
    const char *prefix = train ? "train" : "t10k";
    tg_tensor *img = NULL, *lab = NULL;
    tg_dataset *ds = NULL;
    int rc = load_part(&img, dir, prefix, "images-idx3");
    if (rc == 0) rc = load_part(&lab, dir, prefix, "labels-idx1");
    if (rc == 0) rc = check_mnist(img, lab);
    if (rc == 0) rc = tg_dataset_from_tensors(&ds, img, lab);
    tg_tensor_release(img);
    tg_tensor_release(lab);
    if (rc < 0) return rc;
    ds->fashion = true;
    *out = ds;
    return 0;
}
