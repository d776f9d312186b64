/* src/data/image_folder.c - a dataset from a folder of PNG files laid out as
 * torchvision's ImageFolder: root/<class>/.../<file>.png, the classes in
 * byte order of their names and, class by class, the files of every folder
 * under the class folder, folder by folder in byte order of the folder's
 * path and each folder's files in byte order (torchvision's
 * sorted(os.walk(class folder, followlinks=True))). */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/core.h"
#include "data/dataset_names.h"
#include "data/dataset_pixels.h"
#include "data/image_transform.h"
#include "tapegrad/data.h"
#include "tapegrad/image.h"

/* A growable list of malloc'd strings. */
typedef struct name_list {
    char **v;
    size_t n, cap;
} name_list;

static void list_free(name_list *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* Appends s (steals it); frees s and returns TG_ENOMEM when the list cannot grow. */
static int list_push(name_list *l, char *s)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            free(s);
            return tg__error(TG_ENOMEM, "image_folder_load: out of memory");
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return 0;
}

/* "dir/name" in a new buffer, NULL (with TG_ENOMEM's message) when out of memory. */
static char *join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = tg__malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

static char *copy_text(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = tg__malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* Whether name ends in ".png", in any case (ASCII only: no locale). */
static bool is_png(const char *name)
{
    size_t n = strlen(name);
    if (n < 4) return false;
    const char *e = name + n - 4;
    return e[0] == '.' && (e[1] | 0x20) == 'p' && (e[2] | 0x20) == 'n' && (e[3] | 0x20) == 'g';
}

/* strcmp compares as unsigned char: the byte order of Python's sorted() on
 * UTF-8 names. */
static int by_bytes(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir, sorted, skipping those starting with '.': its folders
 * (symbolic links followed) when want_dirs, else its entries ending in .png
 * that are not folders (one that cannot be examined is kept: reading it
 * names the problem). */
static int list_dir(name_list *out, const char *dir, bool want_dirs)
{
    DIR *d = opendir(dir);
    if (!d)
        return tg__error(TG_EIO, "image_folder_load: cannot open folder '%s': %s", dir,
                         strerror(errno));
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.' || (!want_dirs && !is_png(e->d_name))) continue;
        char *path = join(dir, e->d_name);
        if (!path) {
            rc = TG_ENOMEM;
            break;
        }
        struct stat st;
        bool found = stat(path, &st) == 0, is_dir = found && S_ISDIR(st.st_mode);
        free(path);
        if (want_dirs ? is_dir : !is_dir) {
            char *name = copy_text(e->d_name);
            rc = name ? list_push(out, name) : TG_ENOMEM;
        }
    }
    closedir(d);
    if (rc == 0 && out->n > 1) qsort(out->v, out->n, sizeof *out->v, by_bytes);
    return rc;
}

enum { MAX_DEPTH = 32 };

/* dir and every folder under it (links followed, hidden names skipped),
 * pushed onto dirs as paths; depth counts the folders above dir. */
static int collect_dirs(name_list *dirs, const char *dir, int depth)
{
    TG_CHECK(depth <= MAX_DEPTH, TG_EINVAL,
             "image_folder_load: '%s' lies %d folders deep in a class folder; at most %d (a "
             "link to a folder above it?)", dir, depth, MAX_DEPTH);
    char *self = copy_text(dir);
    int rc = self ? list_push(dirs, self) : TG_ENOMEM;
    name_list subs = {0};
    if (rc == 0) rc = list_dir(&subs, dir, true);
    for (size_t i = 0; rc == 0 && i < subs.n; i++) {
        char *path = join(dir, subs.v[i]);
        rc = path ? collect_dirs(dirs, path, depth + 1) : TG_ENOMEM;
        free(path);
    }
    list_free(&subs);
    return rc;
}

/* The paths of the PNGs under class folder dir, in torchvision's order,
 * pushed onto files with label c in *labels (grown with files). */
static int class_files(name_list *files, int64_t **labels, size_t *cap, const char *dir,
                       int64_t c)
{
    name_list dirs = {0};
    int rc = collect_dirs(&dirs, dir, 0);
    if (rc == 0 && dirs.n > 1) qsort(dirs.v, dirs.n, sizeof *dirs.v, by_bytes);
    const size_t before = files->n;
    for (size_t d = 0; rc == 0 && d < dirs.n; d++) {
        name_list names = {0};
        rc = list_dir(&names, dirs.v[d], false);
        for (size_t i = 0; rc == 0 && i < names.n; i++) {
            char *path = join(dirs.v[d], names.v[i]);
            rc = path ? list_push(files, path) : TG_ENOMEM;
            if (rc == 0 && files->n > *cap) {
                *cap = files->cap;
                int64_t *l = realloc(*labels, *cap * sizeof *l);
                if (!l) rc = tg__error(TG_ENOMEM, "image_folder_load: out of memory");
                else *labels = l;
            }
            if (rc == 0) (*labels)[files->n - 1] = c;
        }
        list_free(&names);
    }
    list_free(&dirs);
    if (rc == 0 && files->n == before)
        rc = tg__error(TG_ENOTFOUND, "image_folder_load: class folder '%s' holds no .png file",
                       dir);
    return rc;
}

/* The class folders of root and, class by class, the paths of their PNGs
 * into files with their labels (a new array) into *labels. */
static int list_samples(name_list *classes, name_list *files, int64_t **labels, const char *root)
{
    int rc = list_dir(classes, root, true);
    if (rc < 0) return rc;
    TG_CHECK(classes->n > 0, TG_ENOTFOUND, "image_folder_load: '%s' has no class folder", root);
    TG_CHECK(classes->n <= TG__MAX_CLASSES, TG_EINVAL,
             "image_folder_load: '%s' has %zu class folders; at most %d", root, classes->n,
             TG__MAX_CLASSES);
    size_t cap = 0;
    for (size_t c = 0; c < classes->n; c++) {
        char *dir = join(root, classes->v[c]);
        if (!dir) return TG_ENOMEM;
        rc = class_files(files, labels, &cap, dir, (int64_t)c);
        free(dir);
        if (rc < 0) return rc;
    }
    return 0;
}

/* PIL's convert("L") (Pillow 9.4, libImaging/Convert.c): ITU-R 601-2 luma
 * with the weights 299/1000, 587/1000, 114/1000 in 16-bit fixed point,
 * rounded half up. */
static uint8_t pil_grey(const uint8_t *rgb)
{
    return (uint8_t)((rgb[0] * 19595u + rgb[1] * 38470u + rgb[2] * 7471u + 0x8000u) >> 16);
}

/* Writes img (height rows of width pixels of k interleaved bytes: grey,
 * grey+alpha, RGB or RGBA) into dst (C, H, W) planes, C = channels: grey is
 * copied or PIL's grey of RGB, RGB is copied or grey repeated; alpha is
 * dropped. */
static void to_planes(uint8_t *dst, const tg_image *img, int channels)
{
    int64_t hw = (int64_t)img->width * img->height;
    int k = img->channels;
    for (int64_t p = 0; p < hw; p++) {
        const uint8_t *s = img->pixels + p * k;
        if (channels == 1)
            dst[p] = k >= 3 ? pil_grey(s) : s[0];
        else
            for (int c = 0; c < 3; c++) dst[c * hw + p] = s[k >= 3 ? c : 0];
    }
}

/* TG_ESHAPE: files[i], img, whose processed shape s (C, H, W) is not the
 * first file's first (H, W).  Only resize {s, 0} without center_crop can
 * make images of other sizes the same, and differing ones. */
static int size_error(const name_list *files, int64_t i, const tg_image *img, const int64_t *s,
                      const int64_t first[2], const tg_image_folder_options *o)
{
    if (o->resize[0] == 0)
        return tg__error(TG_ESHAPE,
                         "image_folder_load: '%s' is %dx%d (width x height); every image must "
                         "have the size of '%s', %lldx%lld (or set resize or center_crop)",
                         files->v[i], img->width, img->height, files->v[0],
                         (long long)first[1], (long long)first[0]);
    return tg__error(TG_ESHAPE,
                     "image_folder_load_ex: '%s' is %dx%d (width x height), resized to "
                     "%lldx%lld; every image must end with the size of '%s', %lldx%lld (another "
                     "aspect ratio: set center_crop)",
                     files->v[i], img->width, img->height, (long long)s[2], (long long)s[1],
                     files->v[0], (long long)first[1], (long long)first[0]);
}

/* Reads files[0..n) through o's pipeline into images (n, C, H, W), a new
 * tensor of the first image's processed size, u8 (no resize) or f32. */
static int read_images(tg_tensor **images, const name_list *files,
                       const tg_image_folder_options *o)
{
    const int64_t n = (int64_t)files->n, c = o->channels;
    int64_t first[2] = {0, 0}, per = 0;
    uint8_t *planes = NULL, *data = NULL;
    size_t elt = 0;
    int rc = 0;
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        tg_image img = {0};
        tg_tensor *one = NULL;
        rc = tg_png_read(&img, files->v[i]);
        if (rc == 0) {
            uint8_t *p = realloc(planes, (size_t)(c * img.width * img.height));
            if (p) planes = p;
            else rc = tg__error(TG_ENOMEM, "image_folder_load: out of memory");
        }
        if (rc == 0) {
            to_planes(planes, &img, (int)c);
            rc = tg__image_transform(&one, planes, img.height, img.width, o, files->v[i]);
        }
        const int64_t *s = one ? tg_tensor_shape(one) : NULL;
        if (rc == 0 && i == 0) {
            first[0] = s[1];
            first[1] = s[2];
            per = c * s[1] * s[2];
            elt = tg_dtype_size(tg_tensor_dtype(one));
            if (per > INT64_MAX / 8 / n)
                rc = tg__error(TG_ENOMEM, "image_folder_load: %lld images of %lldx%lld do not "
                               "fit in memory", (long long)n, (long long)s[2], (long long)s[1]);
            else if (!(*images = tg__tensor_empty(tg_tensor_dtype(one), 4,
                                                  (int64_t[]){n, c, s[1], s[2]})))
                rc = TG_ENOMEM;
            else
                data = tg_tensor_data(*images);
        }
        if (rc == 0 && (s[1] != first[0] || s[2] != first[1]))
            rc = size_error(files, i, &img, s, first, o);
        if (rc == 0)
            memcpy(data + (size_t)(i * per) * elt, tg_tensor_cdata(one), (size_t)per * elt);
        tg_tensor_release(one);
        tg_image_free(&img);
    }
    free(planes);
    if (rc < 0 && *images) {
        tg_tensor_release(*images);
        *images = NULL;
    }
    return rc;
}

int tg_image_folder_load_ex(tg_dataset **out, const char *root, const tg_image_folder_options *opt)
{
    static const tg_image_folder_options defaults = TG_IMAGE_FOLDER_OPTIONS_INIT;
    TG_CHECK(out != NULL && root != NULL, TG_EINVAL,
             "image_folder_load: out and root must not be NULL");
    if (!opt) opt = &defaults;
    TG_TRY(tg__image_options_check(opt));
    TG_CHECK(tg_png_available(), TG_EUNSUPPORTED,
             "image_folder_load: tapegrad was built without PNG support "
             "(configure with meson -Dpng=enabled and libpng installed)");
    name_list classes = {0}, files = {0};
    int64_t *label_v = NULL;
    tg_tensor *images = NULL, *labels = NULL;
    tg_dataset *ds = NULL;
    int rc;
    TG_TRY_GOTO(list_samples(&classes, &files, &label_v, root));
    TG_TRY_GOTO(read_images(&images, &files, opt));
    int64_t n = (int64_t)files.n;
    TG_TRY_GOTO(tg_tensor_from_data(&labels, TG_I64, 1, &n, label_v));
    if (tg_tensor_dtype(images) == TG_F32)
        TG_TRY_GOTO(tg__dataset_from_unit_images(&ds, images, labels));
    else
        TG_TRY_GOTO(tg_dataset_from_tensors(&ds, images, labels));
    TG_TRY_GOTO(tg__dataset_set_class_names(ds, (int)classes.n, (const char *const *)classes.v));
    *out = ds;
    ds = NULL;
done:
    tg_dataset_release(ds);
    tg_tensor_release(images);
    tg_tensor_release(labels);
    free(label_v);
    list_free(&files);
    list_free(&classes);
    return rc;
}

int tg_image_folder_load(tg_dataset **out, const char *root, int channels)
{
    tg_image_folder_options o = TG_IMAGE_FOLDER_OPTIONS_INIT;
    o.channels = channels;
    return tg_image_folder_load_ex(out, root, &o);
}
