/* bench/timing.c - see timing.h. */
#include "timing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool bench_parse_dtype(const char *s, tg_dtype *dt)
{
    static const struct {
        const char *name;
        tg_dtype dt;
    } names[] = {{"f32", TG_F32}, {"f64", TG_F64}, {"bf16", TG_BF16}, {"f16", TG_F16}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(s, names[i].name)) {
            *dt = names[i].dt;
            return true;
        }
    return false;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int bench_common_arg(int argc, char **argv, int *i, long *threads, long *repeat, bool *backward,
                     tg_dtype *dt)
{
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    long *dst = !strcmp(a, "--threads") ? threads : !strcmp(a, "--repeat") ? repeat : NULL;
    if (!strcmp(a, "--backward")) {
        *backward = true;
        return 1;
    }
    if (!dst && strcmp(a, "--dtype") != 0) return 0;
    if (!v) return -1;
    (*i)++;
    if (!dst) return bench_parse_dtype(v, dt) ? 1 : -1;
    char *end;
    *dst = strtol(v, &end, 10);
    return *end || end == v || *dst < 0 ? -1 : 1;
}

int bench_time_calls(void (*fn)(const void *arg), const void *arg, long repeat)
{
    for (int i = 0; i < 3; i++) fn(arg);
    double *ms = malloc((size_t)repeat * sizeof *ms);
    if (!ms) return 1;
    for (long i = 0; i < repeat; i++) {
        const double t0 = now_ms();
        fn(arg);
        ms[i] = now_ms() - t0;
    }
    qsort(ms, (size_t)repeat, sizeof *ms, cmp_double);
    const double med = repeat % 2 ? ms[repeat / 2] : 0.5 * (ms[repeat / 2 - 1] + ms[repeat / 2]);
    printf("{\"tool\": \"tapegrad\", \"median_ms\": %.4f, \"threads\": %d}\n", med,
           tg_get_num_threads());
    free(ms);
    return 0;
}
