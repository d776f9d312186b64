/* Status names and messages (from the one X-macro list), the thread-local
 * last-error message, internal assertion failure, checked allocation, and
 * the kernel that a TG_*_KERNEL variable chooses (with its report of a name
 * this CPU cannot run). */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static _Thread_local char tg__last_error[512];

const char *tg_status_name(int status)
{
    switch (status) {
#define TG__STATUS_NAME(name, value, msg) case value: return "TG_" #name;
        TG_STATUS_MAP(TG__STATUS_NAME)
#undef TG__STATUS_NAME
    }
    return "TG_UNKNOWN";
}

const char *tg_status_message(int status)
{
    switch (status) {
#define TG__STATUS_MSG(name, value, msg) case value: return msg;
        TG_STATUS_MAP(TG__STATUS_MSG)
#undef TG__STATUS_MSG
    }
    return "unknown status";
}

const char *tg_error_message(void) { return tg__last_error; }

void tg_error_clear(void) { tg__last_error[0] = '\0'; }

void tg__callback_begin(void) { tg_error_clear(); }

int tg__callback_end(const char *what, int rc)
{
    if (rc >= 0 || tg__last_error[0]) return rc;
    return tg__error(rc, "%s failed with %s and no message (a callback sets one with "
                         "tg_error_set)", what, tg_status_name(rc));
}

int tg__op_callback_end(const char *name, const char *part, int rc)
{
    if (rc >= 0 || tg__last_error[0]) return rc;
    char what[160];
    snprintf(what, sizeof what, "%s: %s", name, part);
    return tg__callback_end(what, rc);
}

int tg_error_set(int status, const char *fmt, ...)
{
    if (status >= 0)
        return tg__error(TG_EINVAL, "error_set: status=%d must be a negative tg_status", status);
    if (!fmt) return tg__error(status, "%s", tg_status_message(status));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tg__last_error, sizeof tg__last_error, fmt, ap);
    va_end(ap);
    return status;
}

int tg__error(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tg__last_error, sizeof tg__last_error, fmt, ap);
    va_end(ap);
    return status;
}

_Noreturn void tg__assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "tapegrad: internal invariant broken: %s (%s:%d)\n", expr, file, line);
    fflush(stderr);
    abort();
}

void *tg__malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) tg__error(TG_ENOMEM, "out of memory allocating %zu bytes", n);
    return p;
}

void *tg__calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) tg__error(TG_ENOMEM, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

int tg__kernel_from_env(const char *var, const char *a_kind, const char *const *names, int n,
                        bool (*available)(int), int best, atomic_flag *told)
{
    const char *env = getenv(var);
    if (!env || !*env) return best;
    for (int k = 1; k < n; k++)
        if (strcmp(env, names[k]) == 0 && available(k)) return k;
    if (!atomic_flag_test_and_set(told)) {
        char list[128] = "";
        for (int k = 1; k < n; k++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k > 1 ? ", " : "",
                     names[k]);
        fprintf(stderr, "tapegrad: %s=%s is not %s kernel this CPU runs (%s); using %s\n", var,
                env, a_kind, list, names[best]);
    }
    return best;
}
