/* tapegrad/safetensors.h - reading and writing safetensors files.
 *
 * Format: 8-byte little-endian header length N, N bytes of JSON
 * {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 *  "__metadata__": {"key": "string value", ...}}, then the data buffer.
 * Every malformed file (truncated, bad JSON, offsets out of range or
 * overlapping, unknown dtype, shape/size mismatch) is TG_EFORMAT with a message;
 * a file that cannot be opened is TG_EIO.  Tensors of the format's dtypes
 * that tapegrad has no tensors of (BOOL, F8_E5M2, F8_E4M3, I16, U16, U32,
 * U64: a PyTorch checkpoint with a bool mask, say) are checked like the
 * others and then skipped: the rest of the file loads, and
 * tg_st_skipped_count / tg_st_skipped_at list them.
 */
#ifndef TAPEGRAD_SAFETENSORS_H
#define TAPEGRAD_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "tapegrad/export.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An in-memory set of named tensors plus string metadata, in insertion order. */
typedef struct tg_st_file tg_st_file;

/* An empty set; a new object owned by the caller (tg_st_free). */
TG_API int tg_st_new(tg_st_file **out);
TG_API void tg_st_free(tg_st_file *f);

/* Loads a file; *out is a new object.  On error *out is untouched. */
TG_API int tg_safetensors_load(tg_st_file **out, const char *path);
/* Parses a file already in memory (buf is copied from as needed). */
TG_API int tg_safetensors_parse(tg_st_file **out, const void *buf, size_t len);
/* The entries a load skipped for their dtype (see above), in file order:
 * name and format dtype name ("BOOL", ...), borrowed from f; not written by
 * tg_safetensors_save.  tg_st_skipped_dtype gives the dtype name of the
 * skipped entry called name, or NULL when there is none. */
TG_API int tg_st_skipped_count(const tg_st_file *f);
TG_API int tg_st_skipped_at(const tg_st_file *f, int i, const char **name, const char **dtype);
TG_API const char *tg_st_skipped_dtype(const tg_st_file *f, const char *name);
/* Writes f to path atomically: a temporary file in the same folder, fsync,
 * rename.  On error the previous file at path is left intact and the
 * temporary file removed; where the file system has O_TMPFILE (ext4, xfs,
 * btrfs, tmpfs) the temporary file has no name until just before the
 * rename, so a process killed mid-save leaves none behind either. */
TG_API int tg_safetensors_save(const tg_st_file *f, const char *path);

/* Adds (or replaces) a tensor; the tensor is retained (its contents are read
 * at save time). */
TG_API int tg_st_set(tg_st_file *f, const char *name, tg_tensor *t);
/* Borrowed tensor named name, or NULL. */
TG_API tg_tensor *tg_st_get(const tg_st_file *f, const char *name);
TG_API int tg_st_count(const tg_st_file *f);
/* Name and borrowed tensor of the i-th entry (insertion/file order). */
TG_API int tg_st_at(const tg_st_file *f, int i, const char **name, tg_tensor **t);

/* String metadata (copied). */
TG_API int tg_st_meta_set(tg_st_file *f, const char *key, const char *value);
/* Borrowed value, or NULL. */
TG_API const char *tg_st_meta_get(const tg_st_file *f, const char *key);
TG_API int tg_st_meta_count(const tg_st_file *f);
TG_API int tg_st_meta_at(const tg_st_file *f, int i, const char **key, const char **value);

#ifdef __cplusplus
}
#endif
#endif
