/* tests/sched_run.h - a scheduler case run on two param groups, shared by
 * test_lr_scheduler_cyclic.c and test_lr_scheduler_custom.c
 * (sched_run.c): the optimizer of a case (param groups of lr 0.1 and 0.02,
 * one f64 parameter each), its schedulers, the checkpoint of both, and
 * the golden entries "<case>.<what>" of the file the test loaded. */
#ifndef TG_TESTS_SCHED_RUN_H
#define TG_TESTS_SCHED_RUN_H

#include <stdint.h>

#include "tapegrad/checkpoint.h"
#include "tapegrad/lr_scheduler.h"
#include "tapegrad/optim.h"
#include "tapegrad/safetensors.h"

/* SGD(momentum=0.9), SGD(), Adam(), AdamW(betas=(0.5, 0.99)),
 * RMSprop(momentum=0.5) and RMSprop(momentum=0.3). */
typedef enum { O_SGD_M, O_SGD, O_ADAM, O_ADAMW, O_RMS5, O_RMS3 } okind;

#define SR_PARTS 8
typedef struct run {
    tg_tensor *p, *q;
    tg_optimizer *opt;
    tg_lr_scheduler *parts[SR_PARTS], *top;   /* top is a part or its own */
} run;

typedef void (*build_fn)(run *r);

typedef struct tcase {
    const char *name;
    okind o;
    build_fn build;
} tcase;

/* A leaf f64 parameter of one element, 0. */
tg_tensor *sr_param(void);
/* r zeroed, then an optimizer of kind k over two new parameters. */
void sr_make_opt(run *r, okind k);
/* sr_make_opt with case c's kind, then c->build's schedulers. */
void sr_run_make(run *r, const tcase *c);
/* Frees top unless it is a part, every part (a chain borrows its
 * schedulers, so the order is free), the optimizer and the parameters. */
void sr_run_free(run *r);
/* A checkpoint of r's optimizer ("opt") and top scheduler ("sched"). */
tg_checkpoint *sr_checkpoint_of(const run *r);
/* The entry "<c->name>.<what>" of goldens, or NULL; sr_n_steps: the steps
 * of its "lr" sequence after the one at construction. */
const tg_tensor *sr_golden(tg_st_file *goldens, const tcase *c, const char *what);
int64_t sr_n_steps(tg_st_file *goldens, const tcase *c);

#endif
