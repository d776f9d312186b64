/* src/core/profile.h - the profiler's hooks (tapegrad/profile.h) for the
 * layers that run ops: the dispatcher times each op's forward, the engine
 * each backward step.
 *
 *   const int d = tg__prof_enter(op->name, TG_PROFILE_FORWARD);
 *   ... the call ...
 *   tg__prof_leave(d);
 *
 * name must live until the leave.  tg__prof_enter returns -1 (and leave
 * does nothing with it) when the profiler is off or frames nest too deep. */
#ifndef TAPEGRAD_CORE_PROFILE_H
#define TAPEGRAD_CORE_PROFILE_H

int tg__prof_enter(const char *name, int phase);
void tg__prof_leave(int d);

#endif
