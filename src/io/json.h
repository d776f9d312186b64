/* src/io/json.h - a small strict JSON parser (RFC 8259) and a string writer,
 * used by the safetensors reader and writer.  Internal (prefix tg__json). */
#ifndef TAPEGRAD_IO_JSON_H
#define TAPEGRAD_IO_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/hash.h"   /* uthash, non-fatal when out of memory */

typedef enum tg__json_type {
    TG__JSON_NULL = 0,
    TG__JSON_BOOL,
    TG__JSON_INT,      /* an integer literal (no fraction, no exponent) that fits int64 */
    TG__JSON_DOUBLE,   /* any other number */
    TG__JSON_STRING,
    TG__JSON_ARRAY,
    TG__JSON_OBJECT
} tg__json_type;

typedef struct tg__json tg__json;
typedef struct tg__json_member tg__json_member;

struct tg__json_member {
    char *key;              /* NUL-terminated UTF-8 (\u0000 is rejected), owned */
    size_t key_offset;      /* byte offset of the key's opening quote */
    tg__json *value;        /* owned */
    UT_hash_handle hh;      /* index by key, to reject duplicate keys */
};

struct tg__json {
    tg__json_type type;
    size_t offset;          /* byte offset where the value starts */
    union {
        bool b;
        int64_t i;
        double d;
        struct { char *s; size_t len; } str;                 /* owned, NUL-terminated */
        struct { tg__json **items; size_t n; } arr;          /* owned */
        struct {
            tg__json_member **members;                       /* in document order, owned */
            size_t n;
            tg__json_member *index;                          /* uthash head */
        } obj;
    } u;
};

/* Limits a parse enforces; every one exceeded is TG_EFORMAT. */
#define TG__JSON_MAX_DEPTH 64
#define TG__JSON_MAX_NUMBER_CHARS 512

/* Parses exactly one JSON value from buf[0..len) (surrounding whitespace
 * allowed, nothing else).  Strict: no comments, no trailing commas, no
 * duplicate object keys, valid UTF-8, no control characters in strings, no
 * lone surrogates, no \u0000.  Nesting deeper than TG__JSON_MAX_DEPTH is
 * rejected.  On success *out is a new tree owned by the caller
 * (tg__json_free); on error TG_EFORMAT (or TG_ENOMEM) with a message
 * "<what>: <problem> at byte N" and *out untouched. */
int tg__json_parse(tg__json **out, const char *buf, size_t len, const char *what);
void tg__json_free(tg__json *v);

/* True when s[0..n) is well-formed UTF-8 (no overlong forms, no surrogates). */
bool tg__json_valid_utf8(const char *s, size_t n);

/* Borrowed member value of an object, or NULL (also when v is not an object). */
const tg__json *tg__json_get(const tg__json *v, const char *key);
/* "null", "boolean", "integer", "number", "string", "array", "object". */
const char *tg__json_type_name(tg__json_type t);

/* A growable byte buffer for writers. */
typedef struct tg__buf {
    char *data;   /* owned; NUL-terminated after every append */
    size_t len;
    size_t cap;
} tg__buf;

int tg__buf_append(tg__buf *b, const char *s, size_t n);
int tg__buf_printf(tg__buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tg__buf_free(tg__buf *b);
/* Appends s (NUL-terminated UTF-8) as a quoted JSON string: escapes '"', '\\'
 * and control characters (\n, \t, ... or \u00XX). */
int tg__json_write_string(tg__buf *b, const char *s);

#endif
