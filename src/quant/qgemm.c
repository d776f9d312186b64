/* src/quant/qgemm.c - the int8 GEMM c (m, n) = a (m, k) * w (n, k)^T in i32:
 * the portable kernel, kernel selection and the row-parallel driver.  The
 * x86 kernels live in qgemm_x86.c. */
#include <stdatomic.h>
#include <string.h>

#include "quant/quant_internal.h"

static const char *const kernel_names[] = {
    [TG_INT8_KERNEL_AUTO] = "auto",
    [TG_INT8_KERNEL_PORTABLE] = "portable",
    [TG_INT8_KERNEL_AVX2] = "avx2",
    [TG_INT8_KERNEL_VNNI] = "vnni",
    [TG_INT8_KERNEL_AMX] = "amx",
};

const char *tg_int8_kernel_name(tg_int8_kernel k)
{
    return (k >= TG_INT8_KERNEL_AUTO && k <= TG_INT8_KERNEL_AMX) ? kernel_names[k] : "?";
}

bool tg_int8_kernel_available(tg_int8_kernel k)
{
    switch (k) {
    case TG_INT8_KERNEL_PORTABLE: return true;
    case TG_INT8_KERNEL_AVX2: return tg__q_cpu_has_avx2();
    case TG_INT8_KERNEL_VNNI: return tg__q_cpu_has_vnni();
    case TG_INT8_KERNEL_AMX: return tg__q_cpu_has_amx();
    default: return false;
    }
}

/* The per-thread choice set by tg_int8_kernel_set (AUTO: not forced). */
static _Thread_local tg_int8_kernel forced = TG_INT8_KERNEL_AUTO;

int tg_int8_kernel_set(tg_int8_kernel k)
{
    TG_CHECK(k >= TG_INT8_KERNEL_AUTO && k <= TG_INT8_KERNEL_AMX, TG_EINVAL,
             "int8_kernel_set: k=%d is not a tg_int8_kernel", (int)k);
    TG_CHECK(k == TG_INT8_KERNEL_AUTO || tg_int8_kernel_available(k), TG_EUNSUPPORTED,
             "int8_kernel_set: this CPU cannot run the %s kernel", tg_int8_kernel_name(k));
    forced = k;
    return TG_OK;
}

static tg_int8_kernel best(void)
{
    if (tg__q_cpu_has_amx()) return TG_INT8_KERNEL_AMX;
    if (tg__q_cpu_has_vnni()) return TG_INT8_KERNEL_VNNI;
    if (tg__q_cpu_has_avx2()) return TG_INT8_KERNEL_AVX2;
    return TG_INT8_KERNEL_PORTABLE;
}

static bool available(int k) { return tg_int8_kernel_available((tg_int8_kernel)k); }

/* AUTO: TG_INT8_KERNEL=portable|avx2|vnni|amx when this CPU has it, else the
 * best (an unknown or unavailable name is reported once on stderr). */
tg_int8_kernel tg_int8_kernel_get(void)
{
    static atomic_flag told = ATOMIC_FLAG_INIT;
    if (forced != TG_INT8_KERNEL_AUTO) return forced;
    return (tg_int8_kernel)tg__kernel_from_env("TG_INT8_KERNEL", "an int8", kernel_names,
                                               TG_INT8_KERNEL_AMX + 1, available, best(), &told);
}

void tg__q_row_sums(const int8_t *w, int64_t n, int64_t k, int32_t *sums)
{
    for (int64_t j = 0; j < n; j++) {
        int32_t s = 0;
        for (int64_t t = 0; t < k; t++) s += w[j * k + t];
        sums[j] = s;
    }
}

static void row_portable(int32_t *c, const uint8_t *a, bool a_signed, const int8_t *w,
                         int64_t n, int64_t k)
{
    const int8_t *as = (const int8_t *)a;
    for (int64_t j = 0; j < n; j++) {
        const int8_t *wj = w + j * k;
        int32_t s = 0;
        if (a_signed)
            for (int64_t t = 0; t < k; t++) s += (int32_t)as[t] * wj[t];
        else
            for (int64_t t = 0; t < k; t++) s += (int32_t)a[t] * wj[t];
        c[j] = s;
    }
}

typedef struct {
    tg_int8_kernel kern;
    const uint8_t *a8;
    bool a_signed;
    const int8_t *w;
    const int32_t *wsum;
    int32_t *c;
    int64_t m, n, k;
} qgemm_job;

/* Row pairs [p0, p1) of a qgemm_job. */
static void qgemm_pairs(void *p, int64_t p0, int64_t p1)
{
    const qgemm_job *q = p;
    const int64_t m = q->m, n = q->n, k = q->k;
    const uint8_t *a8 = q->a8;
    int32_t *c = q->c;
    for (int64_t ip = p0; ip < p1; ip++) {
        const int64_t i = 2 * ip;
        const bool two = i + 1 < m;
        if (q->kern == TG_INT8_KERNEL_AVX2 && two) {
            tg__q_row2_avx2(c + i * n, c + (i + 1) * n, a8 + i * k, a8 + (i + 1) * k, q->a_signed,
                            q->w, n, k);
            continue;
        }
        for (int64_t r = i; r < (two ? i + 2 : i + 1); r++) {
            if (q->kern == TG_INT8_KERNEL_VNNI)
                tg__q_row_vnni(c + r * n, a8 + r * k, q->a_signed, q->w, q->wsum, n, k);
            else if (q->kern == TG_INT8_KERNEL_AVX2)
                tg__q_row_avx2(c + r * n, a8 + r * k, q->a_signed, q->w, n, k);
            else
                row_portable(c + r * n, a8 + r * k, q->a_signed, q->w, n, k);
        }
    }
}

int tg_int8_gemm(int32_t *c, const void *a, bool a_signed, const int8_t *w, int64_t m,
                 int64_t n, int64_t k)
{
    TG_CHECK(m >= 0 && n >= 0 && k >= 0, TG_EINVAL,
             "int8_gemm: m=%lld, n=%lld, k=%lld must be >= 0", (long long)m, (long long)n,
             (long long)k);
    TG_CHECK((c && a && w) || m * n == 0 || k == 0, TG_EINVAL,
             "int8_gemm: c, a and w must not be NULL");
    if (m == 0 || n == 0) return TG_OK;
    if (k == 0) {
        memset(c, 0, (size_t)(m * n) * sizeof *c);
        return TG_OK;
    }
    tg_int8_kernel kern = tg_int8_kernel_get();
    if (kern == TG_INT8_KERNEL_AMX) kern = TG_INT8_KERNEL_VNNI;   /* rows, not tiles */
    int32_t *wsum = NULL;
    if (kern == TG_INT8_KERNEL_VNNI && a_signed) {
        wsum = tg__malloc((size_t)n * sizeof *wsum);
        if (!wsum) return TG_ENOMEM;
        tg__q_row_sums(w, n, k, wsum);
    }
    qgemm_job q = {.kern = kern, .a8 = a, .a_signed = a_signed, .w = w, .wsum = wsum, .c = c,
                   .m = m, .n = n, .k = k};
    /* Rows are taken in pairs (the AVX2 kernel shares each w load between
     * two rows); an odd last row runs alone. */
    tg__parallel_range((m + 1) / 2, m * n * k > 65536, qgemm_pairs, &q);
    free(wsum);
    return TG_OK;
}
