/* Tests of tg_viz_backward_html as a file: what the page holds, that it
 * asks nothing of the network, and its errors.  The page in a browser is
 * tests/browser/viz_test.mjs. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static const double X[3] = {1.0, 2.0, 3.0}, W[3] = {4.0, -5.0, 0.5};

/* y = sum(x * w * 2) with x a constant. */
static tg_tensor *graph(tg_tensor **x, tg_tensor **w)
{
    *x = th_vec(TG_F64, 3, X, "x", false);
    *w = th_vec(TG_F64, 3, W, "w", true);
    tg_tensor *xw = NULL, *s = NULL, *y = NULL;
    OK(tg_mul(&xw, *x, *w));
    tg_tensor_set_name(xw, "x*w");
    OK(tg_mul_scalar(&s, xw, 2.0));
    OK(tg_sum(&y, s));
    th_release_all(2, (tg_tensor *[]){s, xw});
    return y;
}

static char *page_of(tg_tensor *y, const tg_viz_opts *o, int *rc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert(f != NULL);
    *rc = tg_viz_backward_html(f, y, NULL, o);
    fclose(f);
    return buf;
}

static void need_graphviz(void)
{
    if (!tg_viz_available()) cr_skip_test("this build has no Graphviz (libgvc)");
}

Test(viz, page_holds_the_svg_the_steps_and_the_leaf_gradients)
{
    need_graphviz();
    tg_tensor *x, *w, *y = graph(&x, &w);
    tg_viz_opts o = TG_VIZ_OPTS_INIT;
    o.title = "a <b> & \"c\"";
    o.caption = "caption </script> here";
    int rc;
    char *html = page_of(y, &o, &rc);
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    th_expect_in(html, "<title>a &lt;b&gt; &amp; &quot;c&quot;</title>");
    th_expect_in(html, "caption &lt;/script&gt; here");
    th_expect_in(html, "<svg");
    th_expect_in(html, "class=\"node\"");
    /* the DOT ids are the SVG ids the script highlights */
    char id[64];
    snprintf(id, sizeof id, "id=\"leaf_%p\"", (void *)w);
    th_expect_in(html, id);
    /* three steps: sum, mul_scalar, mul; mul's gradient for w is 2 x */
    th_expect_in(html, "\"op\":\"sum\"");
    th_expect_in(html, "\"op\":\"mul_scalar\",\"name\":\"\",\"vjp\":\"da = g * s\"");
    th_expect_in(html, "\"op\":\"mul\",\"name\":\"x*w\",\"vjp\":\"da = g * b, db = g * a\"");
    th_expect_in(html, "\"leaf\":true,\"label\":\"leaf w\",\"grad\":{\"dtype\":\"f64\","
                       "\"shape\":[3],\"numel\":3,\"values\":[2,4,6]}");
    /* the backward ran: w.grad = 2 x */
    cr_assert(eq(dbl, th_at(tg_tensor_grad(w), 2), 6.0));
    /* nothing is fetched: no script or style from elsewhere */
    cr_assert(strstr(html, "src=") == NULL && strstr(html, "href=") == NULL, "%s", html);
    free(html);
    th_release_all(3, (tg_tensor *[]){y, w, x});
}

Test(viz, large_tensors_are_cut_to_max_elems)
{
    need_graphviz();
    int64_t shape[1] = {100};
    tg_tensor *v = th_seq(TG_F64, 1, shape, 0.0, 99.0), *y = NULL;
    OK(tg_tensor_set_requires_grad(v, true));
    OK(tg_sum(&y, v));
    tg_viz_opts o = TG_VIZ_OPTS_INIT;
    o.max_elems = 2;
    int rc;
    char *html = page_of(y, &o, &rc);
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    th_expect_in(html, "\"shape\":[100],\"numel\":100,\"values\":[1,1]}");
    free(html);
    th_release_all(2, (tg_tensor *[]){y, v});
}

Test(viz, errors_write_nothing)
{
    tg_tensor *x, *w, *y = graph(&x, &w);
    tg_viz_opts o = TG_VIZ_OPTS_INIT;
    o.max_elems = 0;
    int rc;
    char *html = page_of(y, &o, &rc);
    cr_assert(eq(int, rc, TG_EINVAL));
    th_expect_in(tg_error_message(), "max_elems=0 must be >= 1");
    cr_assert(eq(sz, strlen(html), 0));
    free(html);
    cr_assert(eq(int, tg_viz_backward_html(NULL, y, NULL, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_viz_backward_html(stdout, NULL, NULL, NULL), TG_EINVAL));
    /* a tensor that does not require grad: backward's error, nothing written */
    html = page_of(x, NULL, &rc);
    cr_assert(eq(int, rc, tg_viz_available() ? TG_EGRAD : TG_EUNSUPPORTED), "%s",
              tg_error_message());
    cr_assert(eq(sz, strlen(html), 0));
    free(html);
    cr_assert(tg_tensor_grad(w) == NULL, "no backward ran");
    th_release_all(3, (tg_tensor *[]){y, w, x});
}
