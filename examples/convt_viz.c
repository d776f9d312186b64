/* convt_viz: a ConvTranspose1d small enough to follow by hand, and its
 * backward as a page to step through in a browser.
 *
 * y = conv_transpose1d(x, w, stride 2) for x = [1, 2, 3] and a 3-tap kernel
 * w.  The reference path computes it as a plain convolution: interleave
 * stride - 1 zeros between the inputs, pad K - 1 zeros on both sides, and
 * correlate with the flipped kernel.  The fast path never builds that
 * mostly-zero signal: it scatters w scaled by each input into the output at
 * 2 i (GEMM then col2im).  The program prints both, checks they agree, and
 * writes the backward of loss = sum(y * c), c = [1, ..., 7], to convt.html
 * (or the path given), with the interleaved input shown on the page.
 *
 *   build/examples/convt_viz [convt.html]
 *
 * Exit status 0; 1 when the page cannot be written (the reason is printed)
 * or the two paths disagree; 2 for a usage error.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tapegrad/tapegrad.h>

#define CHECK(call)                                                               \
    do {                                                                          \
        int rc_ = (call);                                                         \
        if (rc_ < 0) {                                                            \
            fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__,     \
                    #call, tg_status_name(rc_), tg_error_message());              \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

enum { L = 3, K = 3, S = 2, L_OUT = (L - 1) * S + K, L_PAD = (L - 1) * S + 1 + 2 * (K - 1) };

static const double X[L] = {1, 2, 3}, W[K] = {1, 0.5, -1};

static tg_tensor *tensor1d(const char *name, int n, const double *v, bool requires_grad)
{
    tg_tensor *t;
    CHECK(tg_tensor_from_data(&t, TG_F64, 3, (int64_t[]){1, 1, n}, v));
    tg_tensor_set_name(t, name);
    CHECK(tg_tensor_set_requires_grad(t, requires_grad));
    return t;
}

/* "[a, b, c]" of t's values into buf. */
static const char *values(char *buf, size_t size, const tg_tensor *t)
{
    size_t len = (size_t)snprintf(buf, size, "[");
    for (int64_t i = 0; i < tg_tensor_numel(t); i++) {
        double v;
        CHECK(tg_tensor_get_flat(t, i, &v));
        len += (size_t)snprintf(buf + len, size - len, "%s%g", i ? ", " : "", v);
    }
    snprintf(buf + len, size - len, "]");
    return buf;
}

/* The reference path by hand: zeros interleaved and padded, then a plain
 * convolution (correlation) with the flipped kernel.  *padded is the
 * signal it convolves. */
static tg_tensor *reference(tg_tensor **padded)
{
    double z[L_PAD] = {0}, wf[K];
    for (int i = 0; i < L; i++) z[(K - 1) + S * i] = X[i];   /* x[i] lands at K-1 + 2i */
    for (int k = 0; k < K; k++) wf[k] = W[K - 1 - k];
    *padded = tensor1d("x interleaved", L_PAD, z, false);
    tg_tensor *wt = tensor1d("w flipped", K, wf, false), *y;
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    CHECK(tg_conv(&y, *padded, wt, NULL, &p));
    tg_tensor_release(wt);
    return y;
}

static const char *parse_args(int argc, char **argv, int *status)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: convt_viz [FILE.html (convt.html)]\n"
               "  A ConvTranspose1d by its reference and fast paths, and its backward as a\n"
               "  page to step through in a browser.\n");
        *status = 0;
        return NULL;
    }
    if (argc > 2 || (argc == 2 && (argv[1][0] == '-' || argv[1][0] == '\0'))) {
        fprintf(stderr, "usage: convt_viz [FILE.html]\n");
        *status = 2;
        return NULL;
    }
    return argc == 2 ? argv[1] : "convt.html";
}

int main(int argc, char **argv)
{
    int status = 0;
    const char *path = parse_args(argc, argv, &status);
    if (!path) return status;

    tg_tensor *x = tensor1d("x", L, X, true), *w = tensor1d("w", K, W, true);
    double cv[L_OUT];
    for (int i = 0; i < L_OUT; i++) cv[i] = i + 1;
    tg_tensor *c = tensor1d("c", L_OUT, cv, false), *padded, *ref = reference(&padded);
    tg_tensor *y, *yc, *loss;
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = S;
    p.algo = TG_CONV_ALGO_FAST;
    CHECK(tg_conv_transpose(&y, x, w, NULL, &p));
    tg_tensor_set_name(y, "y");
    CHECK(tg_mul(&yc, y, c));
    CHECK(tg_sum(&loss, yc));
    tg_tensor_set_name(loss, "loss");

    char caption[2048], b[5][256];
    snprintf(caption, sizeof caption,
             "y = conv_transpose1d(x, w, stride %d), loss = sum(y * c)\n"
             "x                                 %s\n"
             "w                                 %s\n"
             "reference path: x with %d zero between inputs, %d zeros of padding each side\n"
             "  x interleaved and padded        %s\n"
             "  conv with w flipped             %s\n"
             "fast path (GEMM, then col2im)     %s\n"
             "Backward of a conv_transpose is a conv: dx = conv(g, w).",
             S, values(b[0], sizeof b[0], x), values(b[1], sizeof b[1], w), S - 1, K - 1,
             values(b[2], sizeof b[2], padded), values(b[3], sizeof b[3], ref),
             values(b[4], sizeof b[4], y));
    printf("%s\n", caption);
    for (int i = 0; i < L_OUT; i++) {
        double r, f;
        CHECK(tg_tensor_get_flat(ref, i, &r));
        CHECK(tg_tensor_get_flat(y, i, &f));
        if (fabs(r - f) > 1e-12) {
            fprintf(stderr, "convt_viz: the paths disagree at %d: %g and %g\n", i, r, f);
            return 1;
        }
    }
    printf("The two paths agree.\n");

    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "convt_viz: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    tg_viz_opts vo = TG_VIZ_OPTS_INIT;
    vo.title = "ConvTranspose1d, stride 2: backward step by step";
    vo.caption = caption;
    int rc = tg_viz_backward_html(f, loss, NULL, &vo);
    int err = ferror(f) ? errno : 0;
    if (fclose(f) != 0 && !err) err = errno;
    if (rc < 0 || err) {
        fprintf(stderr, "convt_viz: cannot write %s: %s\n", path,
                rc < 0 ? tg_error_message() : strerror(err));
        remove(path);
        status = 1;
    } else {
        printf("dL/dx = %s (= conv(c, w): each x[i] meets c[2i .. 2i+2])\n",
               values(b[0], sizeof b[0], tg_tensor_grad(x)));
        printf("The backward, step by step, is in %s.\n", path);
    }
    tg_tensor *all[] = {loss, yc, y, ref, padded, c, w, x};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
    return status;
}
