/* tests/test_profile.c - the profiler (tapegrad/profile.h): op calls and
 * backward steps counted under their names and phases, self time without
 * what ran inside (an op of the test's own that sleeps and calls another),
 * ranges, the order of the rows, the printed table, threads, a full table,
 * and the refusals. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static void sleep_ms(double ms)
{
    struct timespec t = {.tv_sec = 0, .tv_nsec = (long)(ms * 1e6)};
    while (nanosleep(&t, &t) != 0) {
    }
}

/* The row (name, phase), or one with calls = 0 when there is none. */
static tg_profile_row row_named(const char *name, tg_profile_phase phase)
{
    for (int i = 0; i < tg_profile_row_count(); i++) {
        tg_profile_row r;
        OK(tg_profile_row_at(i, &r));
        if (r.phase == phase && strcmp(r.name, name) == 0) return r;
    }
    return (tg_profile_row){.calls = 0};
}

static void stop_if_running(void)
{
    if (tg_profile_running()) OK(tg_profile_stop());
}

TestSuite(profile, .fini = stop_if_running);

Test(profile, counts_each_op_call_and_backward_step)
{
    tg_tensor *a = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 4}, 1);
    tg_tensor *b = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 4}, 2);
    OK(tg_tensor_set_requires_grad(a, true));
    tg_tensor *s0 = NULL;   /* before the start: not counted */
    OK(tg_add(&s0, a, b));
    OK(tg_profile_start());
    cr_assert(tg_profile_running());
    tg_tensor *c = NULL, *d = NULL, *e = NULL, *m = NULL, *l = NULL;
    OK(tg_add(&c, a, b));
    OK(tg_add(&d, c, b));
    OK(tg_mul(&e, d, a));
    OK(tg_add(&m, e, c));
    OK(tg_sum(&l, m));
    OK(tg_profile_stop());
    cr_assert(tg_profile_running() == 0);
    tg_tensor *after = NULL;   /* after the stop: not counted */
    OK(tg_add(&after, a, b));
    cr_assert(eq(i64, row_named("add", TG_PROFILE_FORWARD).calls, 3));
    cr_assert(eq(i64, row_named("mul", TG_PROFILE_FORWARD).calls, 1));
    cr_assert(eq(i64, row_named("sum", TG_PROFILE_FORWARD).calls, 1));
    cr_assert(eq(int, tg_profile_row_count(), 3));
    /* a start clears the rows; the backward's steps, and the ops a step
     * runs (mul's backward multiplies g by each factor) inside them */
    OK(tg_profile_start());
    cr_assert(eq(int, tg_profile_row_count(), 0));
    OK(tg_backward(l, NULL, NULL));
    OK(tg_profile_stop());
    cr_assert(eq(i64, row_named("sum", TG_PROFILE_BACKWARD).calls, 1));
    cr_assert(eq(i64, row_named("add", TG_PROFILE_BACKWARD).calls, 3));
    const tg_profile_row mb = row_named("mul", TG_PROFILE_BACKWARD);
    const tg_profile_row mf = row_named("mul", TG_PROFILE_FORWARD);
    cr_assert(eq(i64, mb.calls, 1));
    cr_assert(mf.calls >= 2, "mul forward %lld calls", (long long)mf.calls);
    cr_assert(mb.total_s >= mf.total_s && mb.self_s <= mb.total_s - mf.total_s + 1e-9,
              "mul backward total %g self %g, mul forward total %g", mb.total_s, mb.self_s,
              mf.total_s);
    th_release_all(9, (tg_tensor *[]){a, b, s0, c, d, e, m, l, after});
}

/* An op of the test's own whose forward sleeps 30 ms around a call of an
 * op that sleeps 20 ms: its total holds both, its self time only its own
 * sleep, and the inner op's row is its own. */
static int inner_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                         const void *params)
{
    (void)ctx, (void)n, (void)params;
    sleep_ms(20);
    return tg_tensor_clone(out, in[0]);
}

static const tg_op_schema inner_op = {.name = "profile_test_inner", .arity = 1,
                                      .amp = TG_AMP_KEEP, .forward = inner_forward};

static int outer_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                         const void *params)
{
    (void)ctx, (void)n, (void)params;
    sleep_ms(15);
    tg_tensor *t = NULL;
    int rc = tg_op_call(&inner_op, &t, 1, in, NULL, 0);
    sleep_ms(15);
    if (rc == TG_OK) *out = t;
    return rc;
}

static const tg_op_schema outer_op = {.name = "profile_test_outer", .arity = 1,
                                      .amp = TG_AMP_KEEP, .forward = outer_forward};

Test(profile, self_time_leaves_out_what_ran_inside)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 1, (int64_t[]){4}, 3), *y = NULL;
    OK(tg_profile_start());
    OK(tg_op_call(&outer_op, &y, 1, &x, NULL, 0));
    OK(tg_profile_stop());
    const tg_profile_row o = row_named("profile_test_outer", TG_PROFILE_FORWARD);
    const tg_profile_row i = row_named("profile_test_inner", TG_PROFILE_FORWARD);
    cr_assert(eq(i64, o.calls, 1));
    cr_assert(eq(i64, i.calls, 1));
    cr_assert(i.self_s >= 0.019 && i.self_s <= i.total_s + 1e-12, "inner self %g total %g",
              i.self_s, i.total_s);
    cr_assert(o.total_s >= 0.049, "outer total %g", o.total_s);
    /* self = total less the inner call, to the clock's resolution */
    cr_assert(fabs(o.self_s - (o.total_s - i.total_s)) < 1e-6, "outer self %g, total %g, inner %g",
              o.self_s, o.total_s, i.total_s);
    cr_assert(o.self_s >= 0.029 && o.self_s < o.total_s - 0.019, "outer self %g", o.self_s);
    /* ordered by self time: the outer op's 30 ms before the inner's 20 */
    tg_profile_row first;
    OK(tg_profile_row_at(0, &first));
    cr_assert(eq(str, first.name, "profile_test_outer"));
    th_release_all(2, (tg_tensor *[]){x, y});
}

Test(profile, ranges_nest_and_hold_the_ops_inside)
{
    tg_tensor *a = th_rand_uniform(TG_F32, 1, (int64_t[]){8}, 4), *b = NULL;
    OK(tg_profile_push("opened before the start"));   /* never counted */
    OK(tg_profile_start());
    OK(tg_profile_push("outer range"));
    sleep_ms(10);
    OK(tg_profile_push("inner range"));
    OK(tg_op_call(&inner_op, &b, 1, &a, NULL, 0));
    OK(tg_profile_pop());
    OK(tg_profile_pop());
    OK(tg_profile_pop());
    OK(tg_profile_stop());
    cr_assert(eq(int, tg_profile_pop(), TG_EINVAL));
    th_expect_in(tg_error_message(), "profile_pop: no range is open on this thread");
    const tg_profile_row o = row_named("outer range", TG_PROFILE_RANGE);
    const tg_profile_row in = row_named("inner range", TG_PROFILE_RANGE);
    const tg_profile_row op = row_named("profile_test_inner", TG_PROFILE_FORWARD);
    cr_assert(eq(i64, o.calls, 1));
    cr_assert(eq(i64, in.calls, 1));
    cr_assert(eq(i64, row_named("opened before the start", TG_PROFILE_RANGE).calls, 0));
    cr_assert(in.self_s < 0.005 && in.total_s >= op.total_s, "inner range self %g", in.self_s);
    cr_assert(o.self_s >= 0.009 && o.total_s >= 0.029, "outer range self %g total %g", o.self_s,
              o.total_s);
    th_release_all(2, (tg_tensor *[]){a, b});
}

Test(profile, the_optimizer_step_is_a_range)
{
    tg_tensor *w = th_rand_uniform(TG_F32, 1, (int64_t[]){5}, 5), *l = NULL;
    OK(tg_tensor_set_requires_grad(w, true));
    tg_optimizer *opt = NULL;
    tg_sgd_opts o = TG_SGD_OPTS_INIT;
    OK(tg_sgd_new(&opt, 1, &w, &o));
    OK(tg_sum(&l, w));
    OK(tg_backward(l, NULL, NULL));
    OK(tg_profile_start());
    OK(tg_optimizer_step(opt));
    OK(tg_optimizer_step(opt));
    OK(tg_profile_stop());
    cr_assert(eq(i64, row_named("optimizer.step", TG_PROFILE_RANGE).calls, 2));
    tg_optimizer_free(opt);
    th_release_all(2, (tg_tensor *[]){w, l});
}

Test(profile, the_table_lists_the_rows_in_order)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 1, (int64_t[]){4}, 6), *y = NULL, *z = NULL;
    OK(tg_profile_start());
    OK(tg_op_call(&outer_op, &y, 1, &x, NULL, 0));
    OK(tg_relu(&z, x));
    OK(tg_profile_stop());
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert(f != NULL);
    OK(tg_profile_print(f, 0));
    fclose(f);
    cr_assert(strstr(buf, "name") == buf, "%s", buf);
    const char *o = strstr(buf, "profile_test_outer"), *i = strstr(buf, "profile_test_inner"),
               *r = strstr(buf, "relu");
    cr_assert(o && i && r && o < i && i < r, "%s", buf);
    th_expect_in(buf, "3 of 3 rows shown");
    free(buf);
    buf = NULL;
    f = open_memstream(&buf, &len);
    OK(tg_profile_print(f, 1));
    fclose(f);
    cr_assert(strstr(buf, "profile_test_inner") == NULL, "%s", buf);
    th_expect_in(buf, "1 of 3 rows shown");
    free(buf);
    th_release_all(3, (tg_tensor *[]){x, y, z});
}

static void *add_many(void *p)
{
    tg_tensor *x = p;
    for (int i = 0; i < 200; i++) {
        tg_tensor *y = NULL;
        if (tg_add(&y, x, x) != TG_OK) return (void *)1;
        tg_tensor_release(y);
    }
    return NULL;
}

Test(profile, threads_add_into_one_table)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 1, (int64_t[]){16}, 7);
    OK(tg_profile_start());
    pthread_t t[3];
    for (int i = 0; i < 3; i++) cr_assert(pthread_create(&t[i], NULL, add_many, x) == 0);
    for (int i = 0; i < 3; i++) {
        void *r = NULL;
        pthread_join(t[i], &r);
        cr_assert(r == NULL);
    }
    OK(tg_profile_stop());
    cr_assert(eq(i64, row_named("add", TG_PROFILE_FORWARD).calls, 600));
    tg_tensor_release(x);
}

/* More names than the table holds: the rest go to "(other)". */
Test(profile, a_full_table_counts_the_rest_as_other)
{
    OK(tg_profile_start());
    char label[32];
    for (int i = 0; i < 1100; i++) {
        snprintf(label, sizeof label, "range %d", i);
        OK(tg_profile_push(label));
        OK(tg_profile_pop());
    }
    OK(tg_profile_stop());
    const int n = tg_profile_row_count();
    cr_assert(n > 1000 && n <= 1024, "%d rows", n);
    const tg_profile_row other = row_named("(other)", TG_PROFILE_RANGE);
    cr_assert(eq(i64, other.calls, 1100 - (n - 1)));
}

Test(profile, refusals_name_the_rule)
{
    OK(tg_profile_start());
    cr_assert(eq(int, tg_profile_start(), TG_EINVAL));
    th_expect_in(tg_error_message(), "profile_start: the profiler already runs");
    OK(tg_profile_stop());
    cr_assert(eq(int, tg_profile_stop(), TG_EINVAL));
    th_expect_in(tg_error_message(), "profile_stop: the profiler does not run");
    cr_assert(eq(int, tg_profile_push(NULL), TG_EINVAL));
    cr_assert(eq(int, tg_profile_print(NULL, 0), TG_EINVAL));
    tg_profile_row r;
    cr_assert(eq(int, tg_profile_row_at(0, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_profile_row_at(tg_profile_row_count(), &r), TG_EINVAL));
    th_expect_in(tg_error_message(), "profile_row_at: i=");
    cr_assert(eq(int, tg_profile_row_at(-1, &r), TG_EINVAL));
    /* ranges nest at most 64 deep */
    int pushed = 0;
    while (pushed < 100 && tg_profile_push("deep") == TG_OK) pushed++;
    cr_assert(eq(int, pushed, 64));
    th_expect_in(tg_error_message(), "nest deeper than 64");
    for (int i = 0; i < pushed; i++) OK(tg_profile_pop());
    cr_assert(eq(int, tg_profile_pop(), TG_EINVAL));
}
