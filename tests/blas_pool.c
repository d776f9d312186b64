/* tests/blas_pool.c - OpenBLAS's own thread pool beside tapegrad's
 * (src/core/blas.c).  With OpenBLAS's pthread build and two or more CPUs,
 * OpenBLAS starts a pool when it is loaded; tapegrad stops it before main,
 * keeps it stopped while its ops switch OpenBLAS to one thread and back, and
 * leaves OpenBLAS's thread count as it was, so that a program's own
 * multi-threaded sgemm starts the pool again and gives the right numbers.
 *
 * A plain program, not a Criterion test: Criterion runs each test in a
 * forked child, and OpenBLAS stops its pool before every fork, so only the
 * first process shows what happened when the libraries were loaded.  Exits
 * 1 with a message on a failed check, 0 with a printed reason when this
 * OpenBLAS has no pool to stop. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <cblas.h>

#include "tapegrad/tapegrad.h"

extern int blas_server_avail __attribute__((weak));

static int fail(const char *what)
{
    fprintf(stderr, "blas_pool: %s\n", what);
    return 1;
}

/* A Conv2d on the f32 path: GEMMs through OpenBLAS, switched to one thread
 * and back around them. */
static bool run_conv(void)
{
    const int64_t xs[] = {4, 8, 16, 16}, ws[] = {16, 8, 3, 3};
    tg_tensor *x = NULL, *w = NULL, *y = NULL;
    bool ok = tg_tensor_zeros(&x, TG_F32, 4, xs) == TG_OK &&
              tg_tensor_zeros(&w, TG_F32, 4, ws) == TG_OK;
    if (ok) {
        float *xd = tg_tensor_data(x), *wd = tg_tensor_data(w);
        for (int64_t i = 0; i < tg_tensor_numel(x); i++) xd[i] = (float)(i % 7) - 3;
        for (int64_t i = 0; i < tg_tensor_numel(w); i++) wd[i] = (float)(i % 5) - 2;
        const tg_conv_params p = TG_CONV_PARAMS_INIT;
        ok = tg_conv(&y, x, w, NULL, &p) == TG_OK;
    }
    tg_tensor_release(x);
    tg_tensor_release(w);
    tg_tensor_release(y);
    return ok;
}

int main(void)
{
    if (openblas_get_parallel() != 1 || !&blas_server_avail) {
        printf("blas_pool: skipped: OpenBLAS is not its pthread build here\n");
        return 0;
    }
    const int blas_threads = openblas_get_num_threads();
    if (blas_threads < 2) {
        printf("blas_pool: skipped: OpenBLAS runs one thread here (one CPU, or "
               "OPENBLAS_NUM_THREADS=1), so it has no pool\n");
        return 0;
    }
    if (blas_server_avail) return fail("OpenBLAS's pool still runs when main starts");
    if (tg_set_num_threads(2) != TG_OK || !run_conv()) return fail(tg_error_message());
    if (blas_server_avail) return fail("a conv on the f32 path started OpenBLAS's pool");
    if (openblas_get_num_threads() != blas_threads)
        return fail("OpenBLAS's thread count changed after a conv");

    /* the program's own sgemm, on OpenBLAS's threads */
    enum { N = 512 };
    float *a = malloc(sizeof(float) * N * N), *b = malloc(sizeof(float) * N * N),
          *c = malloc(sizeof(float) * N * N);
    if (!a || !b || !c) return fail("out of memory");
    for (int i = 0; i < N * N; i++) a[i] = (float)(i % 3), b[i] = (float)(i % 4);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
    int bad = 0;
    for (int i = 0; i < N; i += 37)
        for (int j = 0; j < N; j += 41) {
            double s = 0;
            for (int k = 0; k < N; k++) s += (double)a[i * N + k] * b[k * N + j];
            bad += c[i * N + j] != (float)s;
        }
    free(a);
    free(b);
    free(c);
    if (bad) return fail("the program's own sgemm gave wrong numbers");
    if (!blas_server_avail) return fail("the program's own sgemm did not start OpenBLAS's pool");
    printf("blas_pool: OpenBLAS's pool (%d threads) stopped at start, kept stopped by tapegrad's "
           "ops, started again by the program's own sgemm\n", blas_threads);
    return 0;
}
