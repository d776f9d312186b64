/* src/io/json_write.c - a growable text buffer and the JSON string writer,
 * with which safetensors_save.c writes a file's header (the parser is
 * json.c). */
#include "io/json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

int tg__buf_append(tg__buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->len + n + 1) nc *= 2;
        char *q = realloc(b->data, nc);
        if (!q) return tg__error(TG_ENOMEM, "buffer: out of memory growing to %zu bytes", nc);
        b->data = q;
        b->cap = nc;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int tg__buf_printf(tg__buf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    TG_ASSERT(n >= 0 && (size_t)n < sizeof tmp);
    return tg__buf_append(b, tmp, (size_t)n);
}

void tg__buf_free(tg__buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

int tg__json_write_string(tg__buf *b, const char *s)
{
    TG_TRY(tg__buf_append(b, "\"", 1));
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        const char *esc = NULL;
        switch (*c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default: break;
        }
        if (esc) TG_TRY(tg__buf_append(b, esc, 2));
        else if (*c < 0x20) TG_TRY(tg__buf_printf(b, "\\u%04x", *c));
        else TG_TRY(tg__buf_append(b, (const char *)c, 1));
    }
    return tg__buf_append(b, "\"", 1);
}
