/* tests/test_image_unsupported.c - in a build without libpng and cairo
 * (meson -Dpng=disabled -Dplot=disabled; it replaces test_image there): the
 * image functions say what the build lacks, and the DCGAN demo refuses to
 * start rather than train for nothing. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

static void make_dir(void) { th_tmp_dir_make("tg_noimg_"); }

TestSuite(image_unsupported, .init = make_dir, .fini = th_tmp_dir_remove);

Test(image_unsupported, functions_say_the_build_lacks_them)
{
    cr_assert(tg_png_available() == false && tg_plot_available() == false);
    tg_tensor *t;
    cr_assert(eq(int, tg_tensor_zeros(&t, TG_F32, 4, (int64_t[]){1, 1, 2, 2}), 0));
    cr_assert(eq(int, tg_png_write_grid("x.png", t, 1, 0, 1, 0), TG_EUNSUPPORTED));
    th_expect_in(tg_error_message(), "png_write_grid: tapegrad was built without PNG support");
    tg_image im = {0};
    cr_assert(eq(int, tg_png_read(&im, "x.png"), TG_EUNSUPPORTED));
    th_expect_in(tg_error_message(), "png_read: tapegrad was built without PNG support");
    tg_image_free(&im);
    tg_dataset *ds = NULL;
    cr_assert(eq(int, tg_image_folder_load(&ds, ".", 1), TG_EUNSUPPORTED));
    th_expect_in(tg_error_message(), "image_folder_load: tapegrad was built without PNG support");
    cr_assert(ds == NULL);
    tg_image_folder_options fo = {3, {8, 0}, 0, {8, 8}, TG_RESIZE_BILINEAR};
    cr_assert(eq(int, tg_image_folder_load_ex(&ds, ".", &fo), TG_EUNSUPPORTED));
    th_expect_in(tg_error_message(), "image_folder_load: tapegrad was built without PNG support");
    cr_assert(ds == NULL);
    const double v[1] = {1}, *vals[1] = {v};
    const char *names[1] = {"x"};
    cr_assert(eq(int, tg_plot_losses_png("x.png", NULL, 1, names, vals, 1), TG_EUNSUPPORTED));
    th_expect_in(tg_error_message(), "plot_losses_png: tapegrad was built without plot support");
    cr_assert(eq(int, tg_plot_lines_png("x.png", NULL, "s", 1, names, vals, 1), TG_EUNSUPPORTED));
    th_expect_in(tg_error_message(), "plot_lines_png: tapegrad was built without plot support");
    tg_plot_release_caches();
    tg_tensor_release(t);
}

Test(image_unsupported, the_demo_refuses_to_start)
{
    const char *args[] = {"--out", "out", "--epochs", "1", NULL};
    cr_assert(eq(int, th_run("TG_DCGAN", args), 1), "%s", th_err);
    th_expect_in(th_err, "dcgan: this tapegrad was built without PNG support");
    cr_assert(eq(int, th_tmp_dir_count(), 0), "it wrote something");
}
