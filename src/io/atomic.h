/* src/io/atomic.h - atomic file replacement, used by every writer. */
#ifndef TAPEGRAD_IO_ATOMIC_H
#define TAPEGRAD_IO_ATOMIC_H

#include <stdbool.h>
#include <stdio.h>

/* Creates and opens for writing a new temporary file next to path: unnamed
 * (O_TMPFILE) where the file system allows, else "<path>.tmp.XXXXXX"; *tmp
 * (malloc'd) gets that name, or for an unnamed file the name finish will
 * link it under.  TG_EIO naming `what`. */
int tg__atomic_open(FILE **f, char **tmp, const char *what, const char *path);
/* Flushes, fsyncs and closes f, then renames *tmp over path.  Always closes f,
 * removes the temporary file on failure and frees *tmp (set to NULL);
 * ok = false just discards (returns 0).  On success the folder is fsynced
 * too, so the rename is durable. */
int tg__atomic_finish(FILE *f, char **tmp, bool ok, const char *what, const char *path);

#endif
