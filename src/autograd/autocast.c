/* src/autograd/autocast.c - the thread-local autocast scopes, kept beside
 * grad mode: both are state of the thread that records a tape, read by the
 * op dispatch (src/ops/dispatch.c) and suspended by the backward engine. */
#include "core/core.h"
#include "autograd/tape.h"

#define TG__AUTOCAST_DEPTH 16

typedef struct autocast_entry {
    bool enabled;
    tg_dtype dtype;
} autocast_entry;

static _Thread_local autocast_entry tg__autocast[TG__AUTOCAST_DEPTH];
static _Thread_local int tg__autocast_depth;

static int autocast_push(const char *what, bool enabled, tg_dtype dt)
{
    TG_CHECK(tg__autocast_depth < TG__AUTOCAST_DEPTH, TG_EINVAL,
             "%s: autocast scopes nested deeper than %d", what, TG__AUTOCAST_DEPTH);
    tg__autocast[tg__autocast_depth++] = (autocast_entry){.enabled = enabled, .dtype = dt};
    return TG_OK;
}

int tg_autocast_begin(tg_dtype dt)
{
    TG_CHECK(dt == TG_F16 || dt == TG_BF16 || dt == TG_F32, TG_EINVAL,
             "autocast_begin: dt=%s must be f16, bf16 or f32", tg_dtype_name(dt));
    return autocast_push("autocast_begin", true, dt);
}

int tg_autocast_disable_begin(void) { return autocast_push("autocast_disable_begin", false, TG_F32); }

int tg_autocast_end(void)
{
    TG_CHECK(tg__autocast_depth > 0, TG_EINVAL,
             "autocast_end: no autocast scope is open (unmatched end)");
    tg__autocast_depth--;
    return TG_OK;
}

/* Set by the backward engine: a backward's ops are never autocast, since
 * each gradient must keep the dtype its forward gave it. */
static _Thread_local bool tg__autocast_suspended;

bool tg__autocast_suspend(bool suspend)
{
    bool prev = tg__autocast_suspended;
    tg__autocast_suspended = suspend;
    return prev;
}

int tg__autocast_enter(bool enabled, tg_dtype dt, tg__autocast_mark *mark)
{
    *mark = (tg__autocast_mark){.depth = tg__autocast_depth, .suspended = tg__autocast_suspended};
    TG_TRY(autocast_push("autocast", enabled, dt));
    tg__autocast_suspended = false;
    return TG_OK;
}

void tg__autocast_leave(const tg__autocast_mark *mark)
{
    if (tg__autocast_depth > mark->depth) tg__autocast_depth = mark->depth;
    tg__autocast_suspended = mark->suspended;
}

bool tg__autocast_dtype(tg_dtype *dt)
{
    if (tg__autocast_depth == 0 || tg__autocast_suspended) return false;
    const autocast_entry *e = &tg__autocast[tg__autocast_depth - 1];
    if (!e->enabled) return false;
    if (dt) *dt = e->dtype;
    return true;
}

bool tg_autocast_active(tg_dtype *dt) { return tg__autocast_dtype(dt); }
