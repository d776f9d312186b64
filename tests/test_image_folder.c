/* Tests of tg_image_folder_load: the committed folder of PNGs of every colour
 * type against what PIL makes of them (scripts/make_image_folder_goldens.py),
 * folders written here with tg_png_write_grid (orders, ignored entries,
 * channels, batches and loaders), and the refused folders. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

static void make_dir(void) { th_tmp_dir_make("tg_imgf_"); }

TestSuite(image_folder, .init = make_dir, .fini = th_tmp_dir_remove);

/* ---- helpers ------------------------------------------------------------- */

static void mkdir_in(const char *rel)
{
    char p[256];
    cr_assert(eq(int, mkdir(th_tmp_path(p, sizeof p, rel), 0755), 0), "mkdir %s", p);
}

/* Writes th_tmp_dir/rel, an h x w PNG of c channels (1 or 3) whose byte k
 * (in (C, H, W) order) is (seed + 7 k) mod 256; the same bytes into want
 * when not NULL. */
static void write_png(const char *rel, int c, int h, int w, int seed, uint8_t *want)
{
    int64_t n = (int64_t)c * h * w;
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t k = 0; k < n; k++) {
        v[k] = (double)((seed + 7 * k) % 256);
        if (want) want[k] = (uint8_t)v[k];
    }
    tg_tensor *t = th_tensor_from(TG_F64, 4, (int64_t[]){1, c, h, w}, v);
    char p[256];
    /* lo 0, hi 255: value v becomes byte round(v) = v. */
    cr_assert(eq(int, tg_png_write_grid(th_tmp_path(p, sizeof p, rel), t, 1, 0, 255, 0), 0),
              "%s", tg_error_message());
    tg_tensor_release(t);
    free(v);
}

static void write_text(const char *rel, const char *text)
{
    char p[256];
    th_write_bytes(th_tmp_path(p, sizeof p, rel), text, strlen(text));
}

/* Fails unless the f32 batch x (n, C, H, W) in the unit range holds
 * want[0..numel) / 255, bit for bit. */
static void expect_unit_pixels(const tg_tensor *x, const uint8_t *want, const char *what)
{
    const float *d = tg_tensor_cdata(x);
    for (int64_t k = 0; k < tg_tensor_numel(x); k++)
        cr_assert(d[k] == (float)(want[k] / 255.0), "%s: element %lld is %g, want %d / 255",
                  what, (long long)k, d[k], want[k]);
}

/* The whole dataset as one f32 batch in the unit range. */
static void whole_batch(tg_tensor **x, tg_tensor **y, tg_dataset *ds)
{
    int64_t n = tg_dataset_size(ds), idx[64];
    cr_assert(n >= 1 && n <= 64);
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    cr_assert(eq(int, tg_dataset_set_pixel_range(ds, TG_PIXELS_UNIT), 0));
    cr_assert(eq(int, tg_dataset_batch(x, y, ds, idx, n), 0), "%s", tg_error_message());
}

/* ---- against PIL ------------------------------------------------------------ */

/* Every colour type PIL writes (grey, grey+alpha, RGB, RGBA, palette, tRNS on
 * grey, RGB and palette), read as PIL's convert("L") and convert("RGB") read
 * them, in torchvision's order of classes and files. */
Test(image_folder, matches_pil_on_every_colour_type)
{
    char root[4096];
    th_golden_path(root, sizeof root, "image_folder/tree");
    tg_st_file *g = th_golden_load("image_folder/pil.safetensors");
    const char *classes[] = {"Zebra", "apple", "apple_2"};
    cr_assert(eq(str, (char *)tg_st_meta_get(g, "classes"), "Zebra,apple,apple_2"));
    const char *keys[2] = {"grey", "rgb"};
    for (int k = 0; k < 2; k++) {
        int channels = k == 0 ? 1 : 3;
        tg_dataset *ds = NULL;
        cr_assert(eq(int, tg_image_folder_load(&ds, root, channels), 0), "%s",
                  tg_error_message());
        const tg_tensor *want = tg_st_get(g, keys[k]), *want_y = tg_st_get(g, "labels");
        cr_assert(want != NULL && want_y != NULL && tg_tensor_dtype(want) == TG_U8);
        int64_t shape[3];
        tg_dataset_image_shape(ds, shape);
        cr_assert(shape[0] == channels && shape[1] == 5 && shape[2] == 7);
        cr_assert(eq(i64, tg_dataset_size(ds), tg_tensor_dim(want, 0)));
        cr_assert(eq(int, tg_dataset_num_classes(ds), 3));
        for (int c = 0; c < 3; c++)
            cr_assert(eq(str, (char *)tg_dataset_class_name(ds, c), (char *)classes[c]));
        cr_assert(tg_dataset_class_name(ds, 3) == NULL);
        tg_tensor *x, *y;
        whole_batch(&x, &y, ds);
        expect_unit_pixels(x, tg_tensor_cdata(want), keys[k]);
        const int64_t *gy = tg_tensor_cdata(want_y), *dy = tg_tensor_cdata(y);
        for (int64_t i = 0; i < tg_tensor_numel(y); i++) cr_assert(eq(i64, dy[i], gy[i]));
        tg_tensor_release(x);
        tg_tensor_release(y);
        tg_dataset_release(ds);
    }
    tg_st_free(g);
}

/* ---- folders written here ----------------------------------------------------- */

/* root/b/{x2, x10}.png, root/a/k.PNG, PNGs in folders under b (walked as
 * torchvision walks them: folder by folder in byte order of the path, so
 * "b/sub b" comes between "b/sub" and "b/sub/deep"), and entries to
 * ignore: a text file, a hidden PNG, a hidden class folder, a PNG beside
 * the class folders.  Fills want (N_TREE images of 1 x 3 x 4 bytes) in the
 * dataset's order: a/k.PNG, b/x10.png, b/x2.png, b/sub/x1.png,
 * b/sub b/y.png, b/sub/deep/z.png. */
enum { N_TREE = 6 };
static const int64_t tree_labels[N_TREE] = {0, 1, 1, 1, 1, 1};

static void write_tree(uint8_t want[N_TREE][12])
{
    mkdir_in("a");
    mkdir_in("b");
    mkdir_in("b/sub");
    mkdir_in("b/sub b");
    mkdir_in("b/sub/deep");
    mkdir_in(".hidden");
    write_png("b/x2.png", 1, 3, 4, 50, want[2]);
    write_png("b/x10.png", 1, 3, 4, 100, want[1]);
    write_png("a/k.PNG", 1, 3, 4, 150, want[0]);
    write_png("b/.x0.png", 1, 3, 4, 1, NULL);
    write_png("b/sub/x1.png", 1, 3, 4, 2, want[3]);
    write_png("b/sub b/y.png", 1, 3, 4, 60, want[4]);
    write_png("b/sub/deep/z.png", 1, 3, 4, 200, want[5]);
    write_png(".hidden/h.png", 1, 3, 4, 3, NULL);
    write_png("top.png", 1, 3, 4, 4, NULL);
    write_png("b/wide.png.bak", 1, 3, 9, 5, NULL);
    write_text("b/notes.txt", "not an image");
}

Test(image_folder, classes_and_files_in_byte_order_others_ignored)
{
    uint8_t want[N_TREE][12];
    write_tree(want);
    tg_dataset *ds = NULL;
    cr_assert(eq(int, tg_image_folder_load(&ds, th_tmp_dir, 1), 0), "%s", tg_error_message());
    cr_assert(eq(i64, tg_dataset_size(ds), N_TREE));
    cr_assert(eq(int, tg_dataset_num_classes(ds), 2));
    cr_assert(eq(str, (char *)tg_dataset_class_name(ds, 0), "a"));
    cr_assert(eq(str, (char *)tg_dataset_class_name(ds, 1), "b"));
    tg_tensor *x, *y;
    whole_batch(&x, &y, ds);
    expect_unit_pixels(x, &want[0][0], "grey");
    const int64_t *dy = tg_tensor_cdata(y);
    for (int i = 0; i < N_TREE; i++) cr_assert(eq(i64, dy[i], tree_labels[i]), "label %d", i);
    tg_tensor_release(x);
    tg_tensor_release(y);
    tg_dataset_release(ds);
}

/* channels 3: grey repeated in R, G and B; RGB files as they are. */
Test(image_folder, grey_repeated_and_rgb_kept)
{
    uint8_t grey[6], rgb[18], want[2][18];
    mkdir_in("g");
    mkdir_in("r");
    write_png("g/0.png", 1, 2, 3, 9, grey);
    write_png("r/0.png", 3, 2, 3, 77, rgb);
    for (int c = 0; c < 3; c++) memcpy(&want[0][6 * c], grey, 6);
    memcpy(want[1], rgb, 18);
    tg_dataset *ds = NULL;
    cr_assert(eq(int, tg_image_folder_load(&ds, th_tmp_dir, 3), 0), "%s", tg_error_message());
    tg_tensor *x, *y;
    whole_batch(&x, &y, ds);
    cr_assert(tg_tensor_dim(x, 1) == 3);
    expect_unit_pixels(x, &want[0][0], "rgb");
    tg_tensor_release(x);
    tg_tensor_release(y);
    tg_dataset_release(ds);
}

/* A loader without shuffle hands out the files in order; a shuffled one
 * gives each sample with its file's pixels and label.  The default range
 * is the symmetric one. */
Test(image_folder, batches_through_a_loader_are_the_files)
{
    uint8_t want[N_TREE][12];
    write_tree(want);
    tg_dataset *ds = NULL;
    cr_assert(eq(int, tg_image_folder_load(&ds, th_tmp_dir, 1), 0), "%s", tg_error_message());
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        tg_loader *ld;
        tg_loader_options o = {2, shuffle == 1, 5, false};
        cr_assert(eq(int, tg_loader_new(&ld, ds, &o), 0));
        tg_tensor *x, *y;
        int seen = 0, visits[N_TREE] = {0};
        while (tg_loader_next(ld, &x, &y) == 1) {
            const float *d = tg_tensor_cdata(x);
            const int64_t *l = tg_tensor_cdata(y);
            for (int64_t i = 0; i < tg_tensor_dim(x, 0); i++, seen++) {
                /* The sample is the file whose pixels it holds. */
                int f = -1;
                for (int j = 0; j < N_TREE; j++)
                    if (d[i * 12] == (float)(want[j][0] / 127.5 - 1.0)) f = j;
                cr_assert(f >= 0 && (shuffle || f == seen), "batch sample %d", seen);
                visits[f]++;
                cr_assert(eq(i64, l[i], tree_labels[f]));
                for (int k = 0; k < 12; k++)
                    cr_assert(d[i * 12 + k] == (float)(want[f][k] / 127.5 - 1.0));
            }
            tg_tensor_release(x);
            tg_tensor_release(y);
        }
        cr_assert(eq(int, seen, N_TREE));
        for (int j = 0; j < N_TREE; j++) cr_assert(eq(int, visits[j], 1), "file %d", j);
        tg_loader_free(ld);
    }
    tg_dataset_release(ds);
}

/* ---- refused folders -------------------------------------------------------- */

Test(image_folder, sizes_must_match)
{
    mkdir_in("a");
    mkdir_in("b");
    write_png("a/1.png", 1, 2, 3, 0, NULL);
    write_png("b/1.png", 3, 2, 3, 0, NULL);
    write_png("b/2.png", 1, 3, 2, 0, NULL);
    tg_dataset *ds = (tg_dataset *)&ds;
    cr_assert(eq(int, tg_image_folder_load(&ds, th_tmp_dir, 1), TG_ESHAPE));
    const char *m = tg_error_message();
    th_expect_in(m, "b/2.png' is 2x3 (width x height)");
    th_expect_in(m, "the size of '");
    th_expect_in(m, "a/1.png', 3x2");
    cr_assert(ds == (tg_dataset *)&ds, "out was changed on error");
}

Test(image_folder, empty_folders_are_not_found)
{
    tg_dataset *ds = (tg_dataset *)&ds;
    /* No class folder: only files and hidden folders. */
    write_png("top.png", 1, 2, 2, 0, NULL);
    mkdir_in(".git");
    cr_assert(eq(int, tg_image_folder_load(&ds, th_tmp_dir, 1), TG_ENOTFOUND));
    th_expect_in(tg_error_message(), "' has no class folder");
    th_expect_in(tg_error_message(), th_tmp_dir);
    /* A class folder whose only entries are not PNGs. */
    mkdir_in("a");
    mkdir_in("b");
    write_png("a/0.png", 1, 2, 2, 0, NULL);
    write_text("b/0.jpg", "x");
    write_png("b/.0.png", 1, 2, 2, 0, NULL);
    mkdir_in("b/1.png");
    cr_assert(eq(int, tg_image_folder_load(&ds, th_tmp_dir, 1), TG_ENOTFOUND));
    th_expect_in(tg_error_message(), "image_folder_load: class folder '");
    th_expect_in(tg_error_message(), "/b' holds no .png file");
    cr_assert(ds == (tg_dataset *)&ds, "out was changed on error");
}

Test(image_folder, bad_arguments_and_files)
{
    tg_dataset *ds = (tg_dataset *)&ds;
    cr_assert(eq(int, tg_image_folder_load(NULL, th_tmp_dir, 1), TG_EINVAL));
    cr_assert(eq(int, tg_image_folder_load(&ds, NULL, 1), TG_EINVAL));
    for (int c = -1; c <= 4; c += 1) {
        if (c == 1 || c == 3) continue;
        cr_assert(eq(int, tg_image_folder_load(&ds, th_tmp_dir, c), TG_EINVAL));
        th_expect_in(tg_error_message(), "must be 1 (grey) or 3 (RGB)");
    }
    char p[256];
    cr_assert(eq(int, tg_image_folder_load(&ds, th_tmp_path(p, sizeof p, "missing"), 1), TG_EIO));
    th_expect_in(tg_error_message(), "cannot open folder '");
    mkdir_in("a");
    write_png("a/0.png", 1, 2, 2, 0, NULL);
    write_text("a/1.png", "not a png");
    cr_assert(eq(int, tg_image_folder_load(&ds, th_tmp_dir, 3), TG_EFORMAT));
    th_expect_in(tg_error_message(), "a/1.png");
    cr_assert(ds == (tg_dataset *)&ds, "out was changed on error");
}

/* The numbered class names of other datasets, up to the last label a
 * dataset allows (the limit tg_image_folder_load applies to class folders;
 * 65537 folders take too long to make to be tested here). */
Test(image_folder, other_datasets_keep_numbered_class_names)
{
    tg_dataset *ds;
    tg_tensor *img, *lab;
    cr_assert(eq(int, tg_tensor_zeros(&img, TG_U8, 3, (int64_t[]){2, 1, 1}), 0));
    lab = th_tensor_from(TG_I32, 1, (int64_t[]){2}, (double[]){65535, 7});
    cr_assert(eq(int, tg_dataset_from_tensors(&ds, img, lab), 0));
    cr_assert(eq(int, tg_dataset_num_classes(ds), 65536));
    cr_assert(eq(str, (char *)tg_dataset_class_name(ds, 0), "0"));
    cr_assert(eq(str, (char *)tg_dataset_class_name(ds, 7), "7"));
    cr_assert(eq(str, (char *)tg_dataset_class_name(ds, 65535), "65535"));
    cr_assert(tg_dataset_class_name(ds, 65536) == NULL);
    tg_dataset_release(ds);
    tg_tensor_release(img);
    tg_tensor_release(lab);
}

/* A link to a folder above it makes the walk endless (torchvision's
 * os.walk with followlinks loops): refused past 32 folders deep. */
Test(image_folder, a_link_loop_is_refused)
{
    tg_dataset *ds = (tg_dataset *)&ds;
    mkdir_in("a");
    write_png("a/0.png", 1, 2, 2, 0, NULL);
    char link[256];
    cr_assert(eq(int, symlink("..", th_tmp_path(link, sizeof link, "a/up")), 0));
    cr_assert(eq(int, tg_image_folder_load(&ds, th_tmp_dir, 1), TG_EINVAL));
    th_expect_in(tg_error_message(), "folders deep in a class folder; at most 32");
    cr_assert(ds == (tg_dataset *)&ds, "out was changed on error");
}
