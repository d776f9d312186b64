/* src/io/plot_unsupported.c - the plot functions of a build without cairo
 * (meson -Dplot=disabled, or cairo/fontconfig not found). */
#include "core/core.h"
#include "tapegrad/image.h"

bool tg_plot_available(void)
{
    return false;
}

int tg_plot_losses_png(const char *path, const char *title, int n_series,
                       const char *const *names, const double *const *values, int n_points)
{
    (void)path, (void)title, (void)n_series, (void)names, (void)values, (void)n_points;
    return tg__error(TG_EUNSUPPORTED,
                     "plot_losses_png: tapegrad was built without plot support (configure with "
                     "meson -Dplot=enabled and cairo and fontconfig installed)");
}

int tg_plot_lines_png(const char *path, const char *title, const char *x_label, int n_series,
                      const char *const *names, const double *const *values, int n_points)
{
    (void)path, (void)title, (void)x_label, (void)n_series, (void)names, (void)values,
        (void)n_points;
    return tg__error(TG_EUNSUPPORTED,
                     "plot_lines_png: tapegrad was built without plot support (configure with "
                     "meson -Dplot=enabled and cairo and fontconfig installed)");
}

void tg_plot_release_caches(void)
{
}
