/* tapegrad bench --in CASE.safetensors [--backward] [--repeat N] [--warmup N]
 *                [--threads T] [--algo reference|fast]
 *
 * Times the case's op (the same case files as run-op) and prints one JSON line:
 * the median, min and max time in milliseconds, GFLOP/s at the median and the
 * peak resident memory of the process.  FLOPs count 2 per multiply-add of the
 * un-dilated problem: a ConvTranspose forward is 2*B*C_in*prod(S_in)*
 * (C_out/groups)*prod(K); a Conv forward is 2*B*C_out*prod(S_out)*
 * (C_in/groups)*prod(K); a backward (dx and dW) is twice the forward.
 */
#include <cblas.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "tapegrad/tapegrad.h"
#include "case.h"
#include "tools.h"

typedef struct bench_opts {
    const char *in;
    long gemm[3];       /* M, N, K; gemm[0] == 0: not a GEMM run */
    bool backward;
    int repeat, warmup, threads;
    tg_conv_algo algo;
} bench_opts;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* Peak resident memory of this process in MiB: VmHWM, which starts afresh at
 * exec (ru_maxrss does not: a child of a large parent inherits its figure). */
static double peak_rss_mb(void)
{
    char line[256];
    double kb = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lf", &kb) == 1) break;
    if (f) fclose(f);
    if (kb < 0) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        kb = (double)ru.ru_maxrss;
    }
    return kb / 1024.0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char bench_usage[] =
    "usage: tapegrad bench --in CASE.safetensors [--backward] [--repeat N]\n"
    "                      [--warmup N] [--threads T] [--algo reference|fast]\n"
    "       tapegrad bench --gemm M,N,K [--repeat N] [--warmup N] [--threads T]\n";

/* "tapegrad bench: <why>" and the usage on stderr; the usage exit code. */
static int usage_error(const char *fmt, const char *arg)
{
    fputs("tapegrad bench: ", stderr);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    fputs(bench_usage, stderr);
    return TG_EXIT_USAGE;
}

static int parse_int(const char *s, int lo, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > 1000000) return -1;
    *out = (int)v;
    return 0;
}

/* "M,N,K" into g: each >= 1 and at most INT_MAX (cblas takes int), and no
 * operand over TG__GEMM_MAX_ELEMS elements (4 GiB of floats), so the sizes
 * computed in bench_gemm cannot overflow.  On error, says why on stderr. */
#define TG__GEMM_MAX_ELEMS ((long)1 << 30)
static int parse_gemm(const char *v, long g[3])
{
    char tail;
    if (sscanf(v, "%ld,%ld,%ld%c", &g[0], &g[1], &g[2], &tail) != 3 || g[0] < 1 || g[1] < 1 ||
        g[2] < 1) {
        fprintf(stderr, "tapegrad bench: --gemm '%s': expected M,N,K, three integers >= 1\n", v);
        return -1;
    }
    const long pairs[3][2] = {{g[0], g[2]}, {g[2], g[1]}, {g[0], g[1]}};   /* A, B, C */
    for (int i = 0; i < 3; i++) {
        if (g[i] > INT_MAX || pairs[i][0] > TG__GEMM_MAX_ELEMS / pairs[i][1]) {
            fprintf(stderr, "tapegrad bench: --gemm '%s': too large: each of M, N, K must be "
                    "<= %d and each matrix <= %ld elements\n", v, INT_MAX, TG__GEMM_MAX_ELEMS);
            return -1;
        }
    }
    return 0;
}

/* Returns -1 when the arguments are fine, else the exit code (after --help
 * or a usage error, which says why). */
static int parse_opts(bench_opts *o, int argc, char **argv)
{
    *o = (bench_opts){.repeat = 20, .warmup = 3, .threads = 0, .algo = TG_CONV_ALGO_DEFAULT};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(bench_usage, stdout);
            return TG_EXIT_OK;
        }
        if (!strcmp(a, "--backward")) { o->backward = true; continue; }
        static const char *const takes_value[] = {"--in", "--gemm", "--repeat", "--warmup",
                                                  "--threads", "--algo"};
        bool known = false;
        for (size_t k = 0; k < sizeof takes_value / sizeof *takes_value; k++)
            known = known || !strcmp(a, takes_value[k]);
        if (!known) return usage_error("unknown argument '%s'", a);
        if (!v || !strncmp(v, "--", 2)) return usage_error("option %s needs a value", a);
        if (!strcmp(a, "--in")) o->in = v;
        else if (!strcmp(a, "--gemm")) { if (parse_gemm(v, o->gemm)) return TG_EXIT_USAGE; }
        else if (!strcmp(a, "--repeat")) {
            if (parse_int(v, 1, &o->repeat))
                return usage_error("--repeat must be an integer in [1, 1000000], not '%s'", v);
        } else if (!strcmp(a, "--warmup")) {
            if (parse_int(v, 0, &o->warmup))
                return usage_error("--warmup must be an integer in [0, 1000000], not '%s'", v);
        } else if (!strcmp(a, "--threads")) {
            if (parse_int(v, 1, &o->threads) || o->threads > 256)
                return usage_error("--threads must be an integer in [1, 256], not '%s'", v);
        } else if (!strcmp(v, "fast")) {
            o->algo = TG_CONV_ALGO_FAST;
        } else if (!strcmp(v, "reference")) {
            o->algo = TG_CONV_ALGO_REFERENCE;
        } else {
            return usage_error("--algo must be reference or fast, not '%s'", v);
        }
        i++;
    }
    if (o->in && o->gemm[0] > 0) return usage_error("%s", "give --in or --gemm, not both");
    if (o->gemm[0] > 0 && (o->backward || o->algo != TG_CONV_ALGO_DEFAULT))
        return usage_error("%s", "--backward and --algo apply to --in CASE; --gemm times "
                                 "one OpenBLAS sgemm");
    if (!o->in && o->gemm[0] == 0) return usage_error("%s", "missing --in CASE or --gemm M,N,K");
    return -1;
}

/* 2 * multiply-adds of one forward call. */
static double forward_flops(const tg_case *c, const tg_tensor *y)
{
    const int64_t *xs = tg_tensor_shape(c->x), *ws = tg_tensor_shape(c->weight);
    const int64_t *ys = tg_tensor_shape(y);
    double k = 1, sin = 1, sout = 1;
    for (int d = 0; d < c->nspatial; d++) {
        k *= (double)ws[2 + d];
        sin *= (double)xs[2 + d];
        sout *= (double)ys[2 + d];
    }
    double groups = (double)c->params.groups;
    if (c->transpose) /* weight (C_in, C_out/g, K...) */
        return 2.0 * (double)xs[0] * (double)xs[1] * sin * (double)ws[1] * k;
    (void)groups; /* conv weight (C_out, C_in/g, K...) */
    return 2.0 * (double)xs[0] * (double)ys[1] * sout * (double)ws[1] * k;
}

/* A quantized case (forward only): the integer op of tapegrad/quant.h with
 * the weight packed once beforehand (qw), as a quantized module keeps it. */
static int run_quantized(const tg_case *c, const tg_conv_params *p, const tg_qweight *qw,
                         tg_tensor **y)
{
    tg_qscales q = c->q;
    q.weight_scales = c->weight_scales;
    return c->transpose ? tg_quantized_conv_transpose_packed(y, c->x, qw, c->bias, p, &q)
                        : tg_quantized_conv_packed(y, c->x, qw, c->bias, p, &q);
}

/* Quantized ops are not differentiable: say so through the usual message. */
static int run_once(const tg_case *c, tg_conv_params *p, const tg_qweight *qw, bool backward,
                    tg_tensor **y_out)
{
    tg_tensor *y = NULL;
    int rc = c->quantized ? run_quantized(c, p, qw, &y)
             : c->transpose ? tg_conv_transpose(&y, c->x, c->weight, c->bias, p)
                            : tg_conv(&y, c->x, c->weight, c->bias, p);
    if (rc < 0) return rc;
    if (backward) {
        tg_tensor *g = c->grad_y;
        tg_tensor *ones = NULL;
        if (!g) {
            rc = tg_tensor_full(&ones, tg_tensor_dtype(y), tg_tensor_ndim(y), tg_tensor_shape(y), 1.0);
            g = ones;
        }
        if (rc >= 0) rc = tg_backward(y, g, NULL);
        tg_tensor_release(ones);
        tg_tensor_zero_grad(c->x);
        tg_tensor_zero_grad(c->weight);
        if (c->bias) tg_tensor_zero_grad(c->bias);
    }
    if (y_out && rc >= 0) *y_out = y;
    else tg_tensor_release(y);
    return rc;
}

static int bench(const bench_opts *o, tg_case *c)
{
    tg_conv_params p = c->params;
    p.algo = o->algo;
    if (o->backward && c->quantized)
        return tg_error_set(TG_EUNSUPPORTED, "--backward is not available for quantized ops "
                            "(they have no gradient)");
    if (o->backward) {
        tg_tensor *ts[3] = {c->x, c->weight, c->bias};
        for (int i = 0; i < 3; i++)
            if (ts[i] && tg_tensor_set_requires_grad(ts[i], true) < 0) return -1;
    }
    tg_qweight *qw = NULL;
    if (c->quantized && tg_qweight_new(&qw, c->weight, c->transpose, p.groups) < 0) return -1;
    tg_tensor *y = NULL;
    double *t = NULL;
    if (run_once(c, &p, qw, false, &y) < 0) goto fail;
    double flops = forward_flops(c, y) * (o->backward ? 3.0 : 1.0);
    tg_tensor_release(y);

    for (int i = 0; i < o->warmup; i++)
        if (run_once(c, &p, qw, o->backward, NULL) < 0) goto fail;
    t = calloc((size_t)o->repeat, sizeof *t);
    if (!t) goto fail;
    for (int i = 0; i < o->repeat; i++) {
        double t0 = now_ms();
        if (run_once(c, &p, qw, o->backward, NULL) < 0) goto fail;
        t[i] = now_ms() - t0;
    }
    tg_qweight_free(qw);
    double med = median(t, o->repeat);
    /* What ran: --algo, else TG_CONV_ALGO as tg_conv_algo's default reads it;
     * --threads, else the library's default. */
    const char *env = getenv("TG_CONV_ALGO");
    bool reference = o->algo == TG_CONV_ALGO_REFERENCE ||
                     (o->algo == TG_CONV_ALGO_DEFAULT && env && !strcmp(env, "reference"));
    printf("{\"tool\": \"tapegrad\", \"op\": \"%s\", \"dtype\": \"%s\", \"backward\": %s, "
           "\"algo\": \"%s\", \"threads\": %d, \"repeat\": %d, \"median_ms\": %.4f, "
           "\"min_ms\": %.4f, \"max_ms\": %.4f, \"gflops\": %.3f, \"peak_rss_mb\": %.1f}\n",
           c->op, tg_dtype_name(tg_tensor_dtype(c->x)), o->backward ? "true" : "false",
           reference ? "reference" : "fast", tg_get_num_threads(), o->repeat,
           med, t[0], t[o->repeat - 1], flops / (med * 1e6), peak_rss_mb());
    free(t);
    return 0;
fail:
    tg_qweight_free(qw);
    free(t);
    return -1;
}

/* C (M x N) = A (M x K) B (K x N), row-major, beta = 0. */
static int bench_gemm(const bench_opts *o)
{
    long m = o->gemm[0], n = o->gemm[1], k = o->gemm[2];
    float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
    float *c = malloc(sizeof(float) * (size_t)(m * n));
    double *t = calloc((size_t)o->repeat, sizeof *t);
    int rc = TG_EXIT_FAIL;
    if (!a || !b || !c || !t) {
        fprintf(stderr, "tapegrad bench: --gemm %ld,%ld,%ld: out of memory for %.1f MiB\n", m, n,
                k, 4.0 * ((double)m * k + (double)k * n + (double)m * n) / (1 << 20));
        goto done;
    }
    for (long i = 0; i < m * k; i++) a[i] = (float)((i % 13) - 6) / 8.0f;
    for (long i = 0; i < k * n; i++) b[i] = (float)((i % 7) - 3) / 4.0f;
    for (int i = -o->warmup; i < o->repeat; i++) {
        double t0 = now_ms();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a,
                    (int)k, b, (int)n, 0.0f, c, (int)n);
        if (i >= 0) t[i] = now_ms() - t0;
    }
    double med = median(t, o->repeat);
    printf("{\"tool\": \"sgemm\", \"m\": %ld, \"n\": %ld, \"k\": %ld, \"threads\": %d, "
           "\"blas_core\": \"%s\", \"median_ms\": %.4f, \"gflops\": %.3f}\n",
           m, n, k, openblas_get_num_threads(), tg_blas_core(), med,
           2.0 * (double)m * (double)n * (double)k / (med * 1e6));
    rc = TG_EXIT_OK;
done:
    free(a);
    free(b);
    free(c);
    free(t);
    return rc;
}

int tg_cmd_bench(int argc, char **argv)
{
    bench_opts o;
    const int code = parse_opts(&o, argc, argv);
    if (code >= 0) return code;
    if (o.threads > 0) {
        /* OpenBLAS's own threads only for the sgemm; tapegrad's ops run
         * OpenBLAS single-threaded on tapegrad's pool */
        if (o.gemm[0] > 0) openblas_set_num_threads(o.threads);
        tg_set_num_threads(o.threads);
    }
    if (o.gemm[0] > 0) return bench_gemm(&o);
    tg_st_file *f = NULL;
    if (tg_safetensors_load(&f, o.in) < 0) {
        fprintf(stderr, "tapegrad bench: %s: %s\n", o.in, tg_error_message());
        return TG_EXIT_FAIL;
    }
    tg_case c;
    char err[512];
    int rc = TG_EXIT_OK;
    if (tg_case_parse(&c, f, err, sizeof err) < 0) {
        fprintf(stderr, "tapegrad bench: %s: %s\n", o.in, err);
        rc = TG_EXIT_FAIL;
    } else if (bench(&o, &c) < 0) {
        fprintf(stderr, "tapegrad bench: %s: %s\n", o.in, tg_error_message());
        rc = TG_EXIT_FAIL;
    }
    tg_st_free(f);
    return rc;
}
