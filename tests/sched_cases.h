/* tests/sched_cases.h - the learning-rate scheduler cases that
 * scripts/make_sched_goldens.py's CASES mirror (their lr sequences are
 * tests/golden/optim/lr_scheduler.safetensors), a case's optimizer and
 * schedulers made and stepped, and the checks shared by
 * test_lr_scheduler.c and test_lr_scheduler_state.c (sched_cases.c). */
#ifndef TG_TESTS_SCHED_CASES_H
#define TG_TESTS_SCHED_CASES_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/lr_scheduler.h"
#include "tapegrad/optim.h"
#include "tapegrad/safetensors.h"

/* The steps of each golden lr sequence (after the one at construction). */
#define STEPS 40

typedef enum { K_STEP, K_MULTI, K_EXPO, K_COS, K_LIN, K_LAMBDA, K_LAMBDAS } kind;

/* One scheduler: i is step_size, t_max or total_iters; a is gamma, eta_min
 * or start_factor; b end_factor. */
typedef struct spec {
    kind k;
    int64_t i;
    double a, b;
    int n_ms;
    int64_t ms[4];
    tg_lr_lambda_fn fn, fn2;   /* K_LAMBDAS: fn for group 0, fn2 for group 1 */
} spec;

/* A case: one scheduler, or a SequentialLR (seq) of n parts with n - 1
 * milestones; set_at > 0 sets the optimizer's lr to set_lr before that step
 * (of param group set_group when the case has two).  lr2 > 0 makes a
 * second param group with that lr; add_at > 0 adds one of lr add_lr
 * before that step, after the schedulers were made. */
typedef struct gcase {
    const char *name;
    double lr, lr2;
    int n;
    spec parts[3];
    bool seq;
    int64_t ms[2];
    int set_at, set_group;
    double set_lr;
    int add_at;
    double add_lr;
} gcase;

extern const gcase cases[];
extern const int N_CASES;

/* A case's optimizer (SGD over one f64 parameter per param group) and
 * schedulers; top is the one to step. */
typedef struct run {
    tg_tensor *p, *q;
    tg_optimizer *opt;
    tg_lr_scheduler *parts[3], *top;
} run;

/* pow(0.95, e). */
double pow095(int64_t e, void *user);

/* Python's min(1.0, (epoch + 1) / 5). */
double warmup5(int64_t e, void *user);

/* 2 when case c has a second param group (made with it or added later). */
int n_groups(const gcase *c);

/* Case c's second param group, of lr add_lr, added to r's optimizer. */
void add_group(run *r, const gcase *c);

/* Case c's optimizer and schedulers, made in r. */
void run_make(run *r, const gcase *c);

void run_free(run *r);

/* Step k of case c (with its set_lr or added group, if any, first). */
void run_step(run *r, const gcase *c, int k);

/* The case named name (asserting there is one). */
const gcase *find_case(const char *name);

/* got equals torch's want to within 4 ulps; where torch's rounding made the
 * lr negative (about -1e-18), tapegrad's is 0. */
void expect_lr(const char *what, int k, double got, double want);

/* The scheduler's state saved into a new file under the prefix "o". */
tg_st_file *snapshot(const tg_lr_scheduler *s);

/* call fails with TG_EINVAL and a message holding words. */
#define REFUSED(call, words)                                                              \
    do {                                                                                  \
        cr_assert(eq(int, (call), TG_EINVAL), "%s", #call);                               \
        cr_assert(strstr(tg_error_message(), (words)) != NULL, "%s: %s", #call,           \
                  tg_error_message());                                                    \
    } while (0)

/* call fails with status and a message holding words. */
#define REFUSED_WITH(call, status, words)                                                     \
    do {                                                                                  \
        cr_assert(eq(int, (call), (status)), "%s", #call);                                \
        cr_assert(strstr(tg_error_message(), (words)) != NULL, "%s: %s", #call,           \
                  tg_error_message());                                                    \
    } while (0)


#endif
