/* Tests of the tape as a learner sees it and of the dispatcher that records
 * it: DOT and printed tapes, tracing, the op registry, autocast scopes and
 * dtype promotion. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "ops/dispatch.h"
#include "tapegrad/ops.h"

/* Criterion's new cr_assert cannot start with "!". */
static bool falsy(bool b) { return !b; }

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static const double X[3] = {1.0, 2.0, 3.0}, W[3] = {4.0, -5.0, 0.5};

/* y = sum(tanh(x * w + b)) into a string, through f. */
static char *render(int (*f)(FILE *, const tg_tensor *), tg_tensor **keep)
{
    tg_tensor *x = th_vec(TG_F64, 3, X, "x", false), *w = th_vec(TG_F64, 3, W, "w", true);
    tg_tensor *b = th_vec(TG_F64, 3, X, "b", true), *xw = NULL, *s = NULL, *t = NULL, *y = NULL;
    OK(tg_mul(&xw, x, w));
    OK(tg_add(&s, xw, b));
    OK(tg_tanh(&t, s));
    OK(tg_sum(&y, t));
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    OK(f(mf, y));
    fclose(mf);
    tg_tensor *all[] = {x, w, b, xw, s, t};
    for (size_t i = 0; i < 6; i++) tg_tensor_release(all[i]);
    *keep = y;
    return buf;
}

Test(tape, dot_names_ops_and_leaves)
{
    tg_tensor *y = NULL;
    char *dot = render(tg_graph_to_dot, &y);
    cr_assert(strncmp(dot, "digraph", 7) == 0, "%s", dot);
    const char *want[] = {" mul\\n", " add\\n", " tanh\\n", " sum\\n", "label=\"w\\n", "label=\"b\\n", "->", "root"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        cr_assert(strstr(dot, want[i]) != NULL, "missing %s in\n%s", want[i], dot);
    cr_assert(strstr(dot, "label=\"x\\n") == NULL);   /* x does not require grad */
    free(dot);
    tg_tensor_release(y);
}

Test(tape, tape_print_in_recording_order)
{
    tg_tensor *y = NULL;
    char *txt = render(tg_tape_print, &y);
    const char *mul = strstr(txt, " mul  inputs: const, leaf 'w'"), *add = strstr(txt, " add  inputs: #");
    const char *th = strstr(txt, " tanh  inputs: #"), *sum = strstr(txt, " sum  inputs: #");
    cr_assert(mul && add && th && sum, "%s", txt);
    cr_assert(mul < add && add < th && th < sum, "%s", txt);
    cr_assert(strstr(add, ", leaf 'b'") != NULL, "%s", txt);
    cr_assert(strstr(txt, "out: f64 (3)") != NULL && strstr(txt, "out: f64 ()") != NULL, "%s", txt);
    free(txt);
    tg_tensor_release(y);
}

Test(tape, autocast_scope_nesting)
{
    tg_dtype dt = TG_I8;
    cr_assert(falsy(tg_autocast_active(&dt)));
    cr_assert(eq(int, tg_autocast_end(), TG_EINVAL));
    cr_assert(eq(int, tg_autocast_begin(TG_I32), TG_EINVAL));
    cr_assert(eq(int, tg_autocast_begin(TG_F64), TG_EINVAL));
    cr_assert(falsy(tg_autocast_active(&dt)));
    OK(tg_autocast_begin(TG_F16));
    cr_assert(tg_autocast_active(&dt) && dt == TG_F16);
    OK(tg_autocast_disable_begin());
    cr_assert(falsy(tg_autocast_active(&dt)));
    OK(tg_autocast_begin(TG_BF16));
    cr_assert(tg_autocast_active(&dt) && dt == TG_BF16);
    OK(tg_autocast_end());
    OK(tg_autocast_end());
    cr_assert(tg_autocast_active(&dt) && dt == TG_F16);
    OK(tg_autocast_end());
    cr_assert(falsy(tg_autocast_active(&dt)));
    int depth = 0;
    while (tg_autocast_begin(TG_F32) == TG_OK) depth++;
    cr_assert(eq(int, depth, 16));
    while (depth-- > 0) OK(tg_autocast_end());
    cr_assert(eq(int, tg_autocast_end(), TG_EINVAL));
}

Test(tape, promote_dtypes_table)
{
    cr_assert(eq(int, tg_promote_dtypes(TG_F32, TG_F64), TG_F64));
    cr_assert(eq(int, tg_promote_dtypes(TG_F16, TG_F64), TG_F64));
    cr_assert(eq(int, tg_promote_dtypes(TG_F16, TG_F32), TG_F32));
    cr_assert(eq(int, tg_promote_dtypes(TG_F16, TG_BF16), TG_F32));
    cr_assert(eq(int, tg_promote_dtypes(TG_BF16, TG_BF16), TG_BF16));
}

Test(tape, promote_through_dispatch)
{
    const double A[3] = {0.5, 1.5, -2.0};
    tg_tensor *a = th_vec(TG_F32, 3, A, "a", true), *b = th_vec(TG_F64, 3, X, "b", true);
    tg_tensor *c = NULL, *m = NULL, *y = NULL;
    OK(tg_add(&c, a, b));
    cr_assert(eq(int, tg_tensor_dtype(c), TG_F64));
    OK(tg_mul(&m, c, b));   /* y = sum((a + b) b): dy/da = b, dy/db = a + 2b */
    OK(tg_sum(&y, m));
    OK(tg_backward(y, NULL, NULL));
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(a)), TG_F32));
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(b)), TG_F64));
    for (int i = 0; i < 3; i++) {
        cr_assert(epsilon_eq(dbl, th_at(tg_tensor_grad(a), i), X[i], 1e-6));
        cr_assert(epsilon_eq(dbl, th_at(tg_tensor_grad(b), i), A[i] + 2 * X[i], 1e-6));
    }
    tg_tensor *all[] = {a, b, c, m, y};
    for (size_t i = 0; i < 5; i++) tg_tensor_release(all[i]);
}

Test(tape, autocast_lowers_matmul_but_not_f64)
{
    tg_op_info info;
    OK(tg_op_info_find("matmul", &info));
    cr_assert(eq(int, info.amp, TG_AMP_LOWER_PRECISION));
    int64_t s[2] = {2, 2};
    tg_tensor *a = NULL, *b = NULL, *c = NULL, *d = NULL, *y = NULL;
    OK(tg_tensor_full(&a, TG_F32, 2, s, 1.5));
    OK(tg_tensor_full(&b, TG_F32, 2, s, 2.0));
    OK(tg_tensor_set_requires_grad(a, true));
    OK(tg_autocast_begin(TG_BF16));
    OK(tg_matmul(&c, a, b));
    cr_assert(eq(int, tg_tensor_dtype(c), TG_BF16));
    OK(tg_sum(&y, c));   /* FP32 policy: the sum is f32 inside autocast */
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    OK(tg_autocast_end());
    cr_assert(epsilon_eq(dbl, th_at(c, 0), 6.0, 1e-9));   /* 2 * 1.5 * 2, exact in bf16 */
    OK(tg_backward(y, NULL, NULL));
    /* d sum(a b) / da = ones b^T: every element 4; it comes back as f32. */
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(a)), TG_F32));
    for (int i = 0; i < 4; i++) cr_assert(epsilon_eq(dbl, th_at(tg_tensor_grad(a), i), 4.0, 1e-9));
    tg_tensor *a64 = NULL, *b64 = NULL;
    OK(tg_tensor_full(&a64, TG_F64, 2, s, 1.5));
    OK(tg_tensor_full(&b64, TG_F64, 2, s, 2.0));
    OK(tg_autocast_begin(TG_F16));
    OK(tg_matmul(&d, a64, b64));   /* f64 inputs are never lowered: the op runs in f64 */
    /* nor cast to meet an f32 one: refused, as torch's "expected scalar type" */
    tg_tensor *e = NULL;
    th_expect_refused(tg_matmul(&e, a64, b), TG_EDTYPE, "autocast does not cast f64", e);
    OK(tg_autocast_end());
    cr_assert(eq(int, tg_tensor_dtype(d), TG_F64));
    tg_tensor *all[] = {a, b, c, d, y, a64, b64};
    for (size_t i = 0; i < 7; i++) tg_tensor_release(all[i]);
}

Test(tape, registry_lists_ops_in_name_order)
{
    int n = tg_op_count();
    cr_assert(n >= 20, "only %d ops", n);
    tg_op_info prev, cur;
    OK(tg_op_info_at(0, &prev));
    for (int i = 1; i < n; i++) {
        OK(tg_op_info_at(i, &cur));
        cr_assert(strcmp(prev.name, cur.name) < 0, "%s before %s", prev.name, cur.name);
        prev = cur;
    }
    cr_assert(eq(int, tg_op_info_at(n, &cur), TG_EINVAL));
    cr_assert(eq(int, tg_op_info_at(-1, &cur), TG_EINVAL));
    OK(tg_op_info_find("mul", &cur));
    cr_assert(eq(int, cur.arity, 2));
    cr_assert(cur.has_backward);
    cr_assert(tg__op_find("mul") != NULL);
    cr_assert(eq(int, tg_op_info_find("no_such_op", &cur), TG_ENOTFOUND));
    cr_assert(eq(str, (char *)tg_amp_policy_name(TG_AMP_LOWER_PRECISION), "lower_precision"));
}

/* TG_TRACE=1 prints each recorded op and each backward step on stderr.  The
 * variable is read once per process; every Criterion test runs in a process of
 * its own, so setting it here, before the first op, takes effect. */
Test(tape, trace_prints_record_and_backward)
{
    cr_assert(eq(int, setenv("TG_TRACE", "1", 1), 0));
    char path[] = "/tmp/tg_trace_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    cr_assert(dup2(fd, 2) == 2);

    tg_tensor *x = th_vec(TG_F64, 3, X, "x", true), *w = th_vec(TG_F64, 3, W, "w", true);
    tg_tensor *xw = NULL, *s = NULL, *y = NULL;   /* y = sum(x * w + x) + sum(u) */
    tg_tensor *u = th_vec(TG_F64, 3, W, "", true), *su = NULL, *y1 = NULL;   /* unnamed */
    OK(tg_mul(&xw, x, w));
    OK(tg_add(&s, xw, x));
    OK(tg_sum(&y1, s));
    OK(tg_sum(&su, u));
    OK(tg_add(&y, y1, su));
    tg_tensor_release(xw);
    tg_tensor_release(s);
    tg_tensor_release(y1);
    tg_tensor_release(su);
    tg_tensor_release(u);
    OK(tg_backward(y, NULL, NULL));

    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char buf[4096] = {0};
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    unlink(path);
    cr_assert(n > 0);
    cr_assert(strstr(buf, "[tape] record #") != NULL, "trace was: %s", buf);
    cr_assert(strstr(buf, " mul(") != NULL && strstr(buf, "leaf 'w'") != NULL, "trace: %s", buf);
    cr_assert(strstr(buf, " sum(") != NULL, "trace: %s", buf);
    cr_assert(strstr(buf, "sum(leaf f64 (3))") != NULL && strstr(buf, "''") == NULL,
              "an unnamed leaf is shown without quotes: %s", buf);
    /* Backward runs the nodes in reverse recording order: sum before mul. */
    const char *bsum = strstr(buf, "[tape] backward #3 sum");
    const char *bmul = strstr(buf, "[tape] backward #1 mul");
    cr_assert(bsum != NULL && bmul != NULL && bsum < bmul, "trace: %s", buf);
    tg_tensor_release(y);
    tg_tensor_release(w);
    tg_tensor_release(x);
}
