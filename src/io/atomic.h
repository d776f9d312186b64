/* src/io/atomic.h - atomic file replacement, used by every writer. */
#ifndef TAPEGRAD_IO_ATOMIC_H
#define TAPEGRAD_IO_ATOMIC_H

#include <stdbool.h>
#include <stdio.h>

/* Creates and opens for writing a new temporary file "<path>.tmp.XXXXXX"
 * next to path; *tmp (malloc'd) gets its name.  TG_EIO naming `what`. */
int tg__atomic_open(FILE **f, char **tmp, const char *what, const char *path);
/* Flushes, fsyncs and closes f, then renames *tmp over path.  Always closes f,
 * removes the temporary file on failure and frees *tmp (set to NULL);
 * ok = false just discards (returns 0).  On success the folder is fsynced
 * too, so the rename is durable. */
int tg__atomic_finish(FILE *f, char **tmp, bool ok, const char *what, const char *path);

#endif
