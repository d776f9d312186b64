/* src/onnx/onnx_pad.c - tg_pad as ONNX nodes: the padding modules
 * (ConstantPadNd, ZeroPad2d, ReflectionPadNd, ReplicationPadNd,
 * CircularPadNd), and a Conv's padding_mode other than zeros before the
 * Conv, which then has pads 0 (tg_conv pads x with tg_pad and convolves
 * without padding).  These are the nodes torch.onnx.export writes at
 * opset 17:
 *
 *   constant   Pad(x, pads, value, mode="constant")
 *   reflect    Pad(x, pads, mode="reflect")
 *   replicate  Pad(x, pads, mode="edge")
 *   circular   per padded spatial axis d: Concat(Slice(x, -lo, end),
 *              x, Slice(x, 0, hi), axis=d); opset 17's Pad has no "wrap"
 *              mode (it came in opset 19)
 *
 * `pads` is an int64 initializer listing every input dim's beginning, then
 * every dim's end, so the dims before the spatial ones get 0 and a dynamic
 * batch stays free.  tapegrad's padding (low, high) of spatial axis a is
 * input dim nd - ns + a; the modes take the same element as tg_pad: reflect
 * mirrors without repeating the edge (lo, hi < the extent), circular wraps
 * once (lo, hi <= the extent: the tail is the last lo elements, the head
 * the first hi).  A negative padding is a negative entry of `pads`, which
 * removes elements as tg_pad does.  Circular padding with a negative one
 * crops first and wraps around what is left, as tg_pad (and torch): a
 * Slice(x, c, -c') on that axis (c = max(-lo, 0), c' = max(-hi, 0); the
 * end INT64_MAX when c' = 0), then the Concat of the positive sides. */
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "onnx/onnx_graph.h"

/* A 1-d int64 initializer `<scope>/<what>` of n values: its name, or NULL
 * (TG_ENOMEM set). */
static const char *tg__onnx_i64s(tg__onnx *g, const char *scope, const char *what, int64_t n,
                                 const int64_t *v)
{
    const char *name = tg__onnx_str(g, "%s/%s", scope, what);
    if (!name || tg__onnx_init_raw(g, name, TG__ONNX_INT64, 1, &n, v, sizeof *v) < 0)
        return NULL;
    return name;
}

/* Slice(x, [start], [end], axes) -> *y, the bounds as initializers
 * `<scope>/wrap<d>_<part>_starts` and `_ends`. */
static int tg__onnx_slice(const tg__onnx_site *s, const char *x, const char *axes, int d,
                          const char *part, int64_t start, int64_t end, const char **y)
{
    char sw[48], ew[48];
    snprintf(sw, sizeof sw, "wrap%d_%s_starts", d, part);
    snprintf(ew, sizeof ew, "wrap%d_%s_ends", d, part);
    const char *sn = tg__onnx_i64s(s->g, s->scope, sw, 1, &start);
    const char *en = tg__onnx_i64s(s->g, s->scope, ew, 1, &end);
    if (!sn || !en) return TG_ENOMEM;
    return tg__onnx_add(s->g, NULL, y, s->scope, "Slice", 4,
                         (const char *const[]){x, sn, en, axes});
}

/* Circular padding: along each padded axis d a Slice cropping the
 * negative sides, then one Concat(tail, x, head) of the positive ones,
 * each axis reading the previous one's output (so the corners wrap on both
 * axes); the axis is the initializer `<scope>/wrap<d>_axes`. */
static int tg__onnx_wrap(const tg__onnx_site *s, int nd, int ns, const int64_t *lo_,
                         const int64_t *hi_, const char **y)
{
    const char *cur = s->x;
    for (int a = 0; a < ns; a++) {
        const int64_t lo = lo_[a], hi = hi_[a], d = nd - ns + a;
        if (lo == 0 && hi == 0) continue;
        char what[32];
        snprintf(what, sizeof what, "wrap%d_axes", (int)d);
        const char *parts[3], *axes = tg__onnx_i64s(s->g, s->scope, what, 1, &d);
        if (!axes) return TG_ENOMEM;
        if (lo < 0 || hi < 0)   /* x[c:I-c'], what the negative paddings keep */
            TG_TRY(tg__onnx_slice(s, cur, axes, (int)d, "crop", lo < 0 ? -lo : 0,
                                  hi < 0 ? hi : INT64_MAX, &cur));
        if (lo <= 0 && hi <= 0) continue;
        int n = 0;
        if (lo > 0)   /* x[-lo:], the last lo elements */
            TG_TRY(tg__onnx_slice(s, cur, axes, (int)d, "tail", -lo, INT64_MAX, &parts[n++]));
        parts[n++] = cur;
        if (hi > 0)   /* x[:hi] */
            TG_TRY(tg__onnx_slice(s, cur, axes, (int)d, "head", 0, hi, &parts[n++]));
        tg__onnx_node *node = NULL;
        TG_TRY(tg__onnx_add(s->g, &node, &cur, s->scope, "Concat", n, parts));
        TG_TRY(tg__onnx_attr_int(s->g, node, "axis", d));
    }
    *y = cur;
    return TG_OK;
}

/* tg_pad(x, mode, value) of s->x's last ns dims by (lo[a], hi[a]) on
 * spatial axis a (input dim nd - ns + a): *y is the padded value (s->x
 * itself when every padding is 0). */
static int tg__onnx_pad(const tg__onnx_site *s, tg_pad_mode mode, double value, int ns,
                        const int64_t *lo, const int64_t *hi, const char **y)
{
    const int nd = tg_tensor_ndim(s->xt);
    TG_ASSERT(ns >= 1 && nd >= ns && nd <= TG_MAX_DIMS);
    bool any = false;
    int64_t pads[2 * TG_MAX_DIMS] = {0};
    for (int a = 0; a < ns; a++) {
        pads[nd - ns + a] = lo[a];
        pads[2 * nd - ns + a] = hi[a];
        any |= lo[a] != 0 || hi[a] != 0;
    }
    *y = s->x;
    if (!any) return TG_OK;
    if (mode == TG_PAD_CIRCULAR) return tg__onnx_wrap(s, nd, ns, lo, hi, y);
    const char *in[3] = {s->x, tg__onnx_i64s(s->g, s->scope, "pads", 2 * nd, pads), NULL};
    if (!in[1]) return TG_ENOMEM;
    if (mode == TG_PAD_CONSTANT && !(in[2] = tg__onnx_const(s->g, s->scope, "value",
                                                            (float)value)))
        return TG_ENOMEM;
    static const char *const onnx_mode[] = {[TG_PAD_CONSTANT] = "constant",
                                            [TG_PAD_REFLECT] = "reflect",
                                            [TG_PAD_REPLICATE] = "edge"};
    TG_ASSERT(mode >= TG_PAD_CONSTANT && mode <= TG_PAD_REPLICATE);
    tg__onnx_node *node = NULL;
    TG_TRY(tg__onnx_add(s->g, &node, y, s->scope, "Pad", in[2] ? 3 : 2, in));
    return tg__onnx_attr_str(s->g, node, "mode", onnx_mode[mode]);
}

int tg__onnx_conv_pad(const tg__onnx_site *s, tg_conv_params *p, int ns, const char **x)
{
    *x = s->x;
    if (p->padding_mode == TG_PAD_CONSTANT) return TG_OK;
    /* the ConvTranspose modules take zero padding only, as PyTorch's */
    TG_ASSERT(strcmp(tg_module_type_name(s->m), "ConvTranspose") != 0 &&
              strcmp(tg_module_type_name(s->m), "QuantizedConvTranspose") != 0);
    TG_ASSERT(ns >= 1 && ns <= TG_CONV_MAX_SPATIAL);
    int64_t lo[TG_CONV_MAX_SPATIAL], hi[TG_CONV_MAX_SPATIAL];
    for (int a = 0; a < ns; a++) {
        lo[a] = p->padding[a][0];
        hi[a] = p->padding[a][1];
    }
    TG_TRY(tg__onnx_pad(s, p->padding_mode, 0.0, ns, lo, hi, x));
    p->padding_mode = TG_PAD_CONSTANT;
    for (int a = 0; a < ns; a++) p->padding[a][0] = p->padding[a][1] = 0;
    return TG_OK;
}

/* A padding module: its paddings are torch's, the last dim first, so pair
 * k is spatial axis ns - 1 - k. */
int tg__onnx_emit_pad(const tg__onnx_site *s, const char **y)
{
    tg_pad_mode mode = TG_PAD_CONSTANT;
    int ns = 0;
    int64_t pads[2 * TG_CONV_MAX_SPATIAL], lo[TG_CONV_MAX_SPATIAL], hi[TG_CONV_MAX_SPATIAL];
    double value = 0.0;
    TG_TRY(tg_nn_pad_params(s->m, &mode, &ns, pads, &value));
    for (int k = 0; k < ns; k++) {
        lo[ns - 1 - k] = pads[2 * k];
        hi[ns - 1 - k] = pads[2 * k + 1];
    }
    return tg__onnx_pad(s, mode, value, ns, lo, hi, y);   /* no padding: no node */
}
