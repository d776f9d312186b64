/* tg_viz_backward_html: a backward as a self-contained HTML page.
 *
 * The page (src/io/viz_page.html, embedded at build time) holds four things
 * the writer fills in: the title, a caption, the tape as SVG (its DOT laid
 * out by libgvc; the DOT ids of src/autograd/dot.c become the SVG element
 * ids the script highlights) and the steps as JSON.  Each step is what
 * tg_backward_steps reports: the node, the gradient g that reached it, and
 * the gradient it sent to each input, with values printed to 17 significant
 * digits so that the page's numbers are the library's, bit for bit (f64).
 * Everything is built in memory first: on error nothing is written to f. */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "tapegrad/viz.h"
#include "io/viz_page.h"   /* tg__viz_page, generated from viz_page.html */

#ifdef TG_HAVE_GRAPHVIZ
#include <gvc.h>
#include <gvplugin.h>

/* The layout and SVG plugins are linked in, so no plugin configuration
 * file (made by `dot -c` when Graphviz is installed) is needed. */
extern gvplugin_library_t gvplugin_dot_layout_LTX_library;
extern gvplugin_library_t gvplugin_core_LTX_library;
static lt_symlist_t gv_builtins[] = {
    {"gvplugin_dot_layout_LTX_library", &gvplugin_dot_layout_LTX_library},
    {"gvplugin_core_LTX_library", &gvplugin_core_LTX_library},
    {NULL, NULL},
};

bool tg_viz_available(void) { return true; }

/* The SVG of a DOT text, from its <svg element on, in *svg (malloc'd). */
static int layout_svg(const char *dot, char **svg)
{
    GVC_t *gvc = gvContextPlugins(gv_builtins, 0);
    if (!gvc) return tg__error(TG_ENOMEM, "viz_backward_html: cannot start Graphviz");
    Agraph_t *g = agmemread(dot);
    int rc = TG_OK;
    char *data = NULL;
    unsigned len = 0;
    if (!g || gvLayout(gvc, g, "dot") != 0) {
        rc = tg__error(TG_EIO, "viz_backward_html: Graphviz could not lay out the tape");
    } else {
        if (gvRenderData(gvc, g, "svg", &data, &len) != 0 || !data)
            rc = tg__error(TG_EIO, "viz_backward_html: Graphviz could not render the SVG");
        gvFreeLayout(gvc, g);
    }
    if (rc >= 0) {
        const char *start = strstr(data, "<svg");
        *svg = strdup(start ? start : "");
        if (!*svg) rc = TG_ENOMEM;
    }
    if (data) gvFreeRenderData(data);
    if (g) agclose(g);
    gvFreeContext(gvc);
    return rc;
}
#else
bool tg_viz_available(void) { return false; }

static int layout_svg(const char *dot, char **svg)
{
    (void)dot;
    *svg = NULL;
    return tg__error(TG_EUNSUPPORTED, "viz_backward_html: this build has no Graphviz "
                                      "(install libgraphviz-dev and reconfigure)");
}
#endif

/* s as a JSON string; '<' escaped so that no "</script>" ends the block. */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == '<') fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* {"dtype", "shape", "numel", "values"}: the first max_elems values, each
 * exactly (%.17g; a non-finite one as the string JavaScript's Number reads). */
static void json_tensor(FILE *f, const tg_tensor *t, int max_elems)
{
    int64_t n = tg_tensor_numel(t);
    fprintf(f, "{\"dtype\":\"%s\",\"shape\":[", tg_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim; d++) fprintf(f, "%s%lld", d ? "," : "", (long long)t->shape[d]);
    fprintf(f, "],\"numel\":%lld,\"values\":[", (long long)n);
    for (int64_t i = 0; i < n && i < max_elems; i++) {
        double v = 0;
        tg_tensor_get_flat(t, i, &v);
        if (i) fputc(',', f);
        if (isfinite(v)) fprintf(f, "%.17g", v);
        else fprintf(f, "\"%s\"", isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
    }
    fprintf(f, "]}");
}

/* What the steps' callback collects. */
typedef struct recorder {
    FILE *steps;               /* the JSON array's items */
    char *steps_buf;
    size_t steps_len;
    int max_elems;
    tg_tensor **leaves;        /* retained, in the order first reached */
    int n_leaves, cap_leaves;
} recorder;

static int add_leaf(recorder *r, const tg_tensor *leaf)
{
    for (int i = 0; i < r->n_leaves; i++)
        if (r->leaves[i] == leaf) return TG_OK;
    if (r->n_leaves == r->cap_leaves) {
        int cap = r->cap_leaves ? 2 * r->cap_leaves : 8;
        tg_tensor **p = realloc(r->leaves, (size_t)cap * sizeof *p);
        if (!p) return tg__error(TG_ENOMEM, "viz_backward_html: out of memory");
        r->leaves = p;
        r->cap_leaves = cap;
    }
    r->leaves[r->n_leaves++] = tg_tensor_retain((tg_tensor *)leaf);
    return TG_OK;
}

/* "#3 tanh (t)" or "leaf w": where input i's gradient goes. */
static void input_label(char *buf, size_t size, const tg_backward_step *s, int i)
{
    const tg_node *src = s->node->edges[i].fn;
    if (src)
        snprintf(buf, size, "#%llu %s%s%s%s", (unsigned long long)src->seq, src->op->name,
                 src->name[0] ? " (" : "", src->name, src->name[0] ? ")" : "");
    else
        snprintf(buf, size, "leaf %s", s->input_leaf[i]->name[0] ? s->input_leaf[i]->name : "");
}

static int record_step(const tg_backward_step *s, void *user)
{
    recorder *r = user;
    FILE *f = r->steps;
    char id[64], label[128];
    fprintf(f, "%s{\"seq\":%llu,\"node\":\"n%llu\",\"op\":", s->index ? ",\n" : "",
            (unsigned long long)s->seq, (unsigned long long)s->seq);
    json_str(f, s->op);
    fprintf(f, ",\"name\":");
    json_str(f, s->name);
    fprintf(f, ",\"vjp\":");
    json_str(f, s->vjp);
    fprintf(f, ",\"g\":");
    json_tensor(f, s->grad_out, r->max_elems);
    fprintf(f, ",\"inputs\":[");
    bool first = true;
    for (int i = 0; i < s->n_inputs; i++) {
        if (!s->grad_in[i]) continue;
        tg__dot_input_id(id, sizeof id, s->node, i);
        input_label(label, sizeof label, s, i);
        fprintf(f, "%s{\"index\":%d,\"target\":\"%s\",\"leaf\":%s,\"label\":", first ? "" : ",",
                i, id, s->input_leaf[i] ? "true" : "false");
        json_str(f, label);
        fprintf(f, ",\"grad\":");
        json_tensor(f, s->grad_in[i], r->max_elems);
        fprintf(f, "}");
        first = false;
        if (s->input_leaf[i]) TG_TRY(add_leaf(r, s->input_leaf[i]));
    }
    fprintf(f, "]}");
    return TG_OK;
}

/* text with & < > " escaped for HTML. */
static void html_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

typedef struct page_parts {
    const char *title, *caption, *svg, *steps;
    recorder *rec;
} page_parts;

static void write_data(FILE *f, const page_parts *p)
{
    fprintf(f, "{\"steps\":[%s],\"leaves\":[", p->steps);
    for (int i = 0; i < p->rec->n_leaves; i++) {
        const tg_tensor *leaf = p->rec->leaves[i];
        char id[48];
        tg__dot_leaf_id(id, sizeof id, leaf);
        fprintf(f, "%s{\"id\":\"%s\",\"name\":", i ? "," : "", id);
        json_str(f, leaf->name);
        fprintf(f, ",\"grad\":");
        json_tensor(f, leaf->grad ? leaf->grad : leaf, p->rec->max_elems);
        fprintf(f, "}");
    }
    fprintf(f, "]}");
}

/* One line of the template with each @NAME@ in it replaced. */
static void write_line(FILE *f, const char *s, const page_parts *p)
{
    for (const char *at; (at = strchr(s, '@')) != NULL;) {
        fwrite(s, 1, (size_t)(at - s), f);
        const char *end = strchr(at + 1, '@');
        size_t len = end ? (size_t)(end - at - 1) : 0;
        if (len == 5 && !strncmp(at + 1, "TITLE", 5)) html_text(f, p->title);
        else if (len == 7 && !strncmp(at + 1, "CAPTION", 7)) html_text(f, p->caption);
        else if (len == 3 && !strncmp(at + 1, "SVG", 3)) fputs(p->svg, f);
        else if (len == 4 && !strncmp(at + 1, "DATA", 4)) write_data(f, p);
        else {
            fputc('@', f);   /* an '@' that is not a marker */
            s = at + 1;
            continue;
        }
        s = end + 1;
    }
    fputs(s, f);
}

/* The template with each @NAME@ replaced (a marker is within one line). */
static void write_page(FILE *f, const page_parts *p)
{
    for (const char *const *line = tg__viz_page; *line; line++) write_line(f, *line, p);
}

/* The DOT text of out's tape, as the page draws it. */
static int tape_dot(const tg_tensor *out, char **dot)
{
    size_t len = 0;
    FILE *m = open_memstream(dot, &len);
    if (!m) return tg__error(TG_ENOMEM, "viz_backward_html: out of memory");
    tg_dot_opts o = TG_DOT_OPTS_INIT;
    o.show_values = true;
    o.max_elems = 3;
    int rc = tg_graph_to_dot_ex(m, out, &o);
    fclose(m);
    return rc;
}

int tg_viz_backward_html(FILE *f, tg_tensor *out, tg_tensor *grad, const tg_viz_opts *opts)
{
    tg_viz_opts o = opts ? *opts : (tg_viz_opts)TG_VIZ_OPTS_INIT;
    TG_CHECK(f != NULL, TG_EINVAL, "viz_backward_html: f must not be NULL");
    TG_CHECK(out != NULL, TG_EINVAL, "viz_backward_html: out must not be NULL");
    TG_CHECK(o.max_elems >= 1, TG_EINVAL, "viz_backward_html: opts->max_elems=%d must be >= 1",
             o.max_elems);
    char *dot = NULL, *svg = NULL;
    recorder rec = {.max_elems = o.max_elems};
    int rc = tape_dot(out, &dot);   /* before backward frees the saved tensors */
    if (rc >= 0) rc = layout_svg(dot, &svg);
    if (rc >= 0) {
        rec.steps = open_memstream(&rec.steps_buf, &rec.steps_len);
        rc = rec.steps ? TG_OK : tg__error(TG_ENOMEM, "viz_backward_html: out of memory");
    }
    if (rc >= 0) rc = tg_backward_steps(out, grad, &o.backward, record_step, &rec);
    if (rec.steps) fclose(rec.steps);
    if (rc >= 0) {
        page_parts p = {.title = o.title ? o.title : "Backward, step by step",
                        .caption = o.caption ? o.caption : "", .svg = svg,
                        .steps = rec.steps_buf ? rec.steps_buf : "", .rec = &rec};
        write_page(f, &p);
        if (ferror(f)) rc = tg__error(TG_EIO, "viz_backward_html: cannot write the page");
    }
    for (int i = 0; i < rec.n_leaves; i++) tg_tensor_release(rec.leaves[i]);
    free(rec.leaves);
    free(rec.steps_buf);
    free(svg);
    free(dot);
    return rc;
}
