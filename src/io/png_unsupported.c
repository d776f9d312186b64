/* src/io/png_unsupported.c - the PNG functions of a build without libpng
 * (meson -Dpng=disabled, or libpng not found): each reports that the build
 * lacks PNG support. */
#include <string.h>

#include "core/core.h"
#include "tapegrad/image.h"

bool tg_png_available(void)
{
    return false;
}

int tg_png_write_grid(const char *path, const tg_tensor *images, int nrow, double lo, double hi,
                      int padding)
{
    (void)path, (void)images, (void)nrow, (void)lo, (void)hi, (void)padding;
    return tg__error(TG_EUNSUPPORTED, "png_write_grid: tapegrad was built without PNG support "
                                      "(configure with meson -Dpng=enabled and libpng installed)");
}

int tg_png_read(tg_image *out, const char *path)
{
    (void)out, (void)path;
    return tg__error(TG_EUNSUPPORTED, "png_read: tapegrad was built without PNG support "
                                      "(configure with meson -Dpng=enabled and libpng installed)");
}

void tg_image_free(tg_image *img)
{
    if (img) memset(img, 0, sizeof *img);
}
