/* tests/fuzz/target_tape.c - the "tape" fuzz target: bytes read as a program
 * over eight tensor slots.
 *
 * Each instruction is an opcode byte and its operand bytes (a missing byte
 * reads as 0, so every input is a program).  The instructions make small
 * tensors of every dtype, run elementwise, reduction, view, matmul and conv
 * ops and losses on them, change them in place, run tg_backward and tg_grad
 * (with hooks, retain_graph and create_graph, in no-grad and autocast
 * scopes), step SGD/Adam/AdamW/RMSprop over them, run blocks of them through
 * tg_recompute_ex, and release them in any order.
 * What must hold, whatever the program:
 *   - every call returns TG_OK or a refusal with a message of its own
 *     (tg_fuzz_refused, with the message cleared before each instruction);
 *   - an output is set exactly when its call succeeds;
 *   - at the end, with the scopes closed and the slots released, nothing
 *     leaks (LeakSanitizer) and grad mode and autocast are as at the start.
 * tg_backward runs without create_graph: with it a leaf's .grad refers back
 * to the leaf, a cycle the API documents (autograd.h); tg_grad, which stores
 * nothing, takes create_graph.
 * The program's state is in target_tape.h, its instructions in
 * target_tape_ops.c and target_tape_autograd.c. */
#include <stdio.h>
#include <stdlib.h>

#include "target_tape.h"

static const struct {
    const char *name;
    int (*run)(prog *);
} OPS[] = {
    {"new", op_new},         {"new", op_new},           {"unary", op_unary},
    {"binary", op_binary},   {"view", op_view},         {"conv", op_conv},
    {"batch_norm", op_batch_norm}, {"backward", op_backward}, {"grad", op_grad},
    {"in_place", op_in_place}, {"misc", op_misc},       {"scope", op_scope},
    {"release", op_release}, {"loss", op_loss},         {"optim", op_optim},
    {"recompute", op_recompute},
};

int tg_fuzz_tape(const uint8_t *data, size_t size)
{
    prog g = {.p = data, .n = size, .trace = getenv("TG_FUZZ_TRACE") != NULL};
    g.devnull = fopen("/dev/null", "w");
    if (!g.devnull) return tg_fuzz_broken(NAME, "cannot open /dev/null");
    int rc = 0;
    for (int step = 0; step < MAX_STEPS && g.at < g.n && rc == 0; step++) {
        const int k = u8(&g) % (int)(sizeof OPS / sizeof OPS[0]);
        if (g.trace) fprintf(stderr, "step %d: %s\n", step, OPS[k].name);
        tg_error_clear();   /* so that a refusal's message is its own, not an old one */
        rc = OPS[k].run(&g);
    }
    while (g.no_grad-- > 0) tg_no_grad_end();
    while (g.autocast-- > 0)
        if (rc == 0 && checked(&g, "autocast_end", tg_autocast_end()) < 0) rc = -1;
    tg_optimizer_free(g.opt);
    for (int i = 0; i < SLOTS; i++) put(&g, i, NULL);
    for (int k = 0; k < g.n_kept; k++) tg_tensor_release(g.kept[k]);
    fclose(g.devnull);
    if (rc == 0 && !tg_grad_enabled()) rc = tg_fuzz_broken(NAME, "grad mode left off");
    if (rc == 0 && tg_autocast_active(NULL)) rc = tg_fuzz_broken(NAME, "autocast left on");
    return rc;
}
