/* Thread-local grad mode: on by default.  tg_no_grad_begin/end keep a small
 * stack of the previous modes so scopes nest. */
#include "core/core.h"

#define TG__NO_GRAD_DEPTH 64

static _Thread_local bool tg__grad_off;   /* zero-initialised: grad mode on */
static _Thread_local bool tg__no_grad_prev[TG__NO_GRAD_DEPTH];
static _Thread_local int tg__no_grad_depth;

bool tg_grad_enabled(void) { return !tg__grad_off; }

bool tg_set_grad_enabled(bool enabled)
{
    bool prev = !tg__grad_off;
    tg__grad_off = !enabled;
    return prev;
}

void tg_no_grad_begin(void)
{
    bool prev = tg_set_grad_enabled(false);
    /* Beyond the stack's depth the previous mode is not remembered; those
     * scopes restore "off", which is what an outer no_grad scope implies
     * unless the caller re-enabled grad mode inside it. */
    if (tg__no_grad_depth < TG__NO_GRAD_DEPTH) tg__no_grad_prev[tg__no_grad_depth] = prev;
    tg__no_grad_depth++;
}

void tg_no_grad_end(void)
{
    if (tg__no_grad_depth == 0) return;   /* unmatched end: nothing to restore */
    tg__no_grad_depth--;
    bool prev = tg__no_grad_depth < TG__NO_GRAD_DEPTH ? tg__no_grad_prev[tg__no_grad_depth]
                                                       : false;
    tg_set_grad_enabled(prev);
}
