/* tapegrad/viz.h - a backward to watch in a browser.
 *
 * tg_viz_backward_html runs a backward and writes one self-contained HTML
 * file (no network: the graph is laid out to SVG by Graphviz's library when
 * the page is written, plus a little plain JavaScript).  It shows the tape
 * and lets the reader step backward node by node with the arrow keys or
 * buttons: the current node is highlighted with the gradient that arrives
 * at its output, the vector-Jacobian product it applies, the gradient it
 * sends to each input (the edges it flows along are drawn in colour), and a
 * table of what has reached each leaf so far.
 *
 *     tg_viz_opts o = TG_VIZ_OPTS_INIT;
 *     o.title = "y = tanh(x * w)";
 *     FILE *f = fopen("tape.html", "w");
 *     tg_viz_backward_html(f, loss, NULL, &o);   // instead of tg_backward(loss, ...)
 *     fclose(f);
 */
#ifndef TAPEGRAD_VIZ_H
#define TAPEGRAD_VIZ_H

#include <stdio.h>

#include "tapegrad/autograd.h"
#include "tapegrad/export.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_viz_opts {
    const char *title;          /* page title; NULL for "Backward, step by step" */
    const char *caption;        /* preformatted text above the steps, or NULL */
    int max_elems;              /* values kept per tensor in the page, >= 1 */
    tg_backward_opts backward;  /* passed to the backward the page shows */
} tg_viz_opts;
#define TG_VIZ_OPTS_INIT {.title = NULL, .caption = NULL, .max_elems = 64, \
                          .backward = TG_BACKWARD_OPTS_INIT}

/* True when this build can lay graphs out (it was built with libgvc). */
TG_API bool tg_viz_available(void);

/* Runs tg_backward_steps(out, grad, &opts->backward) (so leaves' .grad are
 * accumulated as by tg_backward) and writes the page to f.  opts may be
 * NULL for TG_VIZ_OPTS_INIT.  The page is written only when the backward
 * and the layout succeed; on error nothing is written.  Errors: those of
 * tg_backward, TG_EINVAL for a NULL f or out or max_elems < 1,
 * TG_EUNSUPPORTED in a build without Graphviz (tg_viz_available), TG_EIO
 * when Graphviz cannot lay the graph out. */
TG_API int tg_viz_backward_html(FILE *f, tg_tensor *out, tg_tensor *grad,
                                const tg_viz_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
