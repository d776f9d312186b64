/* src/io/json.c - a small strict JSON parser into a tree (the writer is json_write.c).
 *
 * Recursive descent over a byte buffer that need not be NUL-terminated.  Every
 * error is TG_EFORMAT with the byte offset where the problem was found; the
 * recursion is bounded by TG__JSON_MAX_DEPTH, so hostile input cannot blow
 * the stack. */
#include "io/json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "core/core.h"

typedef struct parser {
    const unsigned char *buf;
    size_t len;
    size_t pos;
    const char *what;
    int depth;
} parser;

static int parse_value(parser *p, tg__json **out);

static int perr(const parser *p, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int perr(const parser *p, size_t at, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tg__error(TG_EFORMAT, "%s: %s at byte %zu", p->what, msg, at);
}

static void skip_ws(parser *p)
{
    while (p->pos < p->len) {
        unsigned char c = p->buf[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static int peek(const parser *p) { return p->pos < p->len ? p->buf[p->pos] : -1; }

static tg__json *new_value(tg__json_type t, size_t offset)
{
    tg__json *v = tg__calloc(1, sizeof *v);
    if (v) {
        v->type = t;
        v->offset = offset;
    }
    return v;
}

/* ---- strings ------------------------------------------------------------- */

/* Length of a valid UTF-8 sequence starting at s (at most n bytes), or 0 if
 * invalid.  Rejects overlong forms, surrogates (U+D800..DFFF) and code points
 * above U+10FFFF, per RFC 3629's table of well-formed byte sequences. */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t k;
    unsigned char lo = 0x80, hi = 0xBF;   /* allowed range of the second byte */
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) k = 2;
    else if (c >= 0xE0 && c <= 0xEF) k = 3;
    else if (c >= 0xF0 && c <= 0xF4) k = 4;
    else return 0;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
    if (n < k || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < k; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return k;
}

bool tg__json_valid_utf8(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0, k; i < n; i += k)
        if ((k = utf8_seq_len(u + i, n - i)) == 0) return false;
    return true;
}

static size_t utf8_encode(uint32_t cp, char *dst)
{
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xC0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xE0 | (cp >> 12));
        dst[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        dst[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    dst[0] = (char)(0xF0 | (cp >> 18));
    dst[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    dst[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    dst[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static int read_hex4(parser *p, uint32_t *cp)
{
    if (p->len - p->pos < 4) return perr(p, p->pos, "truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p->buf[p->pos + (size_t)i];
        int d = (c >= '0' && c <= '9') ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (d < 0) return perr(p, p->pos + (size_t)i, "bad hex digit in \\u escape");
        v = v * 16 + (uint32_t)d;
    }
    p->pos += 4;
    *cp = v;
    return 0;
}

/* \uXXXX (p->pos just after the 'u'), combining a UTF-16 surrogate pair
 * (high D800..DBFF then \u low DC00..DFFF: cp = 0x10000 + (hi-D800)<<10 +
 * (lo-DC00)). */
static int read_unicode_escape(parser *p, size_t esc_at, uint32_t *cp)
{
    TG_TRY(read_hex4(p, cp));
    if (*cp == 0) return perr(p, esc_at, "\\u0000 is not supported in strings");
    if (*cp >= 0xDC00 && *cp <= 0xDFFF) return perr(p, esc_at, "lone low surrogate");
    if (*cp < 0xD800 || *cp > 0xDBFF) return 0;
    if (p->len - p->pos < 2 || p->buf[p->pos] != '\\' || p->buf[p->pos + 1] != 'u')
        return perr(p, esc_at, "high surrogate not followed by \\u low surrogate");
    p->pos += 2;
    uint32_t lo;
    TG_TRY(read_hex4(p, &lo));
    if (lo < 0xDC00 || lo > 0xDFFF)
        return perr(p, esc_at, "high surrogate not followed by a low surrogate");
    *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
    return 0;
}

static int read_escape(parser *p, char *dst, size_t *n)
{
    size_t at = p->pos - 1;   /* the backslash */
    if (p->pos >= p->len) return perr(p, at, "truncated escape");
    unsigned char c = p->buf[p->pos++];
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *hit = c ? strchr(from, c) : NULL;
    if (hit) {
        dst[0] = to[hit - from];
        *n = 1;
        return 0;
    }
    if (c != 'u') return perr(p, at, "invalid escape '\\%c'", c >= 0x20 && c < 0x7F ? c : '?');
    uint32_t cp;
    TG_TRY(read_unicode_escape(p, at, &cp));
    *n = utf8_encode(cp, dst);
    return 0;
}

/* Parses a string starting at the opening quote.  Decoded text is never
 * longer than its source (an escape of 2, 6 or 12 bytes yields 1..4 bytes),
 * so the raw span bounds the allocation. */
static int parse_string(parser *p, char **out, size_t *out_len)
{
    size_t start = p->pos++;
    size_t end = p->pos;
    while (end < p->len && p->buf[end] != '"') end += p->buf[end] == '\\' ? 2 : 1;
    if (end >= p->len) return perr(p, start, "unterminated string");
    char *s = tg__malloc(end - start);
    if (!s) return TG_ENOMEM;
    size_t n = 0;
    int rc = 0;
    while (rc == 0 && p->buf[p->pos] != '"') {
        unsigned char c = p->buf[p->pos];
        size_t k;
        if (c == '\\') {
            p->pos++;
            rc = read_escape(p, s + n, &k);
        } else if (c < 0x20) {
            rc = perr(p, p->pos, "control character 0x%02x in string", c);
        } else if ((k = utf8_seq_len(p->buf + p->pos, p->len - p->pos)) == 0) {
            rc = perr(p, p->pos, "invalid UTF-8 in string");
        } else {
            memcpy(s + n, p->buf + p->pos, k);
            p->pos += k;
        }
        if (rc == 0) n += k;
    }
    if (rc < 0) {
        free(s);
        return rc;
    }
    p->pos++;   /* closing quote */
    s[n] = '\0';
    *out = s;
    *out_len = n;
    return 0;
}

/* ---- numbers --------------------------------------------------------------- */

static size_t skip_digits(parser *p)
{
    size_t n = 0;
    while (p->pos < p->len && p->buf[p->pos] >= '0' && p->buf[p->pos] <= '9') {
        p->pos++;
        n++;
    }
    return n;
}

/* Integer value of an integer literal buf[s..e) ("-"? digits), false on
 * overflow.  The magnitude is accumulated in uint64 so INT64_MIN fits. */
static bool int_value(const unsigned char *buf, size_t s, size_t e, int64_t *out)
{
    bool neg = buf[s] == '-';
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, m = 0;
    for (size_t i = s + neg; i < e; i++) {
        uint64_t d = (uint64_t)(buf[i] - '0');
        if (m > (limit - d) / 10) return false;
        m = m * 10 + d;
    }
    *out = neg ? (int64_t)(0 - m) : (int64_t)m;
    return true;
}

/* number = -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? */
static int parse_number(parser *p, tg__json **out)
{
    size_t start = p->pos;
    bool integral = true;
    if (peek(p) == '-') p->pos++;
    if (peek(p) == '0') p->pos++;
    else if (skip_digits(p) == 0) return perr(p, start, "invalid number");
    if (peek(p) == '.') {
        p->pos++;
        integral = false;
        if (skip_digits(p) == 0) return perr(p, p->pos, "digit expected after '.'");
    }
    if (peek(p) == 'e' || peek(p) == 'E') {
        p->pos++;
        integral = false;
        if (peek(p) == '+' || peek(p) == '-') p->pos++;
        if (skip_digits(p) == 0) return perr(p, p->pos, "digit expected in exponent");
    }
    size_t n = p->pos - start;
    if (n > TG__JSON_MAX_NUMBER_CHARS) return perr(p, start, "number longer than %d characters",
                                                   TG__JSON_MAX_NUMBER_CHARS);
    tg__json *v = new_value(TG__JSON_INT, start);
    if (!v) return TG_ENOMEM;
    if (integral && int_value(p->buf, start, p->pos, &v->u.i)) {
        *out = v;
        return 0;
    }
    char tmp[TG__JSON_MAX_NUMBER_CHARS + 1];
    memcpy(tmp, p->buf + start, n);
    tmp[n] = '\0';
    v->type = TG__JSON_DOUBLE;
    v->u.d = strtod(tmp, NULL);
    if (!isfinite(v->u.d)) {
        free(v);
        return perr(p, start, "number out of range");
    }
    *out = v;
    return 0;
}

/* ---- containers ------------------------------------------------------------ */

/* Grows *items (of element size sz) so that it holds at least n + 1. */
static int grow(void *items, size_t n, size_t *cap, size_t sz)
{
    if (n < *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 4;
    void *q = realloc(*(void **)items, nc * sz);
    if (!q) return tg__error(TG_ENOMEM, "json: out of memory");
    *(void **)items = q;
    *cap = nc;
    return 0;
}

static int parse_array(parser *p, tg__json *v)
{
    size_t cap = 0;
    p->pos++;   /* '[' */
    skip_ws(p);
    if (peek(p) == ']') {
        p->pos++;
        return 0;
    }
    for (;;) {
        TG_TRY(grow(&v->u.arr.items, v->u.arr.n, &cap, sizeof(tg__json *)));
        TG_TRY(parse_value(p, &v->u.arr.items[v->u.arr.n]));
        v->u.arr.n++;
        skip_ws(p);
        int c = peek(p);
        p->pos++;
        if (c == ']') return 0;
        if (c != ',') return perr(p, p->pos - 1, "',' or ']' expected in array");
    }
}

static int parse_member(parser *p, tg__json *v, size_t *cap)
{
    skip_ws(p);
    size_t at = p->pos;
    if (peek(p) != '"') return perr(p, at, "string key expected in object");
    TG_TRY(grow(&v->u.obj.members, v->u.obj.n, cap, sizeof(tg__json_member *)));
    tg__json_member *m = tg__calloc(1, sizeof *m);
    if (!m) return TG_ENOMEM;
    size_t klen;
    int rc = parse_string(p, &m->key, &klen);
    if (rc < 0) {
        free(m);
        return rc;
    }
    m->key_offset = at;
    tg__json_member *dup = NULL;
    HASH_FIND(hh, v->u.obj.index, m->key, klen, dup);
    if (dup) {
        rc = perr(p, at, "duplicate key \"%.64s\"", m->key);
        free(m->key);
        free(m);
        return rc;
    }
    HASH_ADD_KEYPTR(hh, v->u.obj.index, m->key, klen, m);
    if (TG_HASH_ADD_FAILED(m)) {
        free(m->key);
        free(m);
        return tg__error(TG_ENOMEM, "%s: out of memory indexing an object's keys at byte %zu",
                         p->what, at);
    }
    v->u.obj.members[v->u.obj.n++] = m;
    skip_ws(p);
    if (peek(p) != ':') return perr(p, p->pos, "':' expected after object key");
    p->pos++;
    return parse_value(p, &m->value);
}

static int parse_object(parser *p, tg__json *v)
{
    size_t cap = 0;
    p->pos++;   /* '{' */
    skip_ws(p);
    if (peek(p) == '}') {
        p->pos++;
        return 0;
    }
    for (;;) {
        TG_TRY(parse_member(p, v, &cap));
        skip_ws(p);
        int c = peek(p);
        p->pos++;
        if (c == '}') return 0;
        if (c != ',') return perr(p, p->pos - 1, "',' or '}' expected in object");
    }
}

static int parse_literal(parser *p, tg__json **out)
{
    static const struct { const char *word; tg__json_type t; bool b; } lits[] = {
        {"true", TG__JSON_BOOL, true}, {"false", TG__JSON_BOOL, false},
        {"null", TG__JSON_NULL, false},
    };
    for (size_t i = 0; i < sizeof lits / sizeof lits[0]; i++) {
        size_t n = strlen(lits[i].word);
        if (p->len - p->pos >= n && memcmp(p->buf + p->pos, lits[i].word, n) == 0) {
            tg__json *v = new_value(lits[i].t, p->pos);
            if (!v) return TG_ENOMEM;
            v->u.b = lits[i].b;
            p->pos += n;
            *out = v;
            return 0;
        }
    }
    return perr(p, p->pos, "unexpected %s", p->pos < p->len ? "character" : "end of input");
}

static int parse_container(parser *p, tg__json **out)
{
    bool is_obj = peek(p) == '{';
    if (p->depth >= TG__JSON_MAX_DEPTH)
        return perr(p, p->pos, "nesting deeper than %d", TG__JSON_MAX_DEPTH);
    tg__json *v = new_value(is_obj ? TG__JSON_OBJECT : TG__JSON_ARRAY, p->pos);
    if (!v) return TG_ENOMEM;
    p->depth++;
    int rc = is_obj ? parse_object(p, v) : parse_array(p, v);
    p->depth--;
    if (rc < 0) {
        tg__json_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

/* On error *out is left NULL-or-untouched and nothing leaks: a partially
 * built container is freed by the caller of parse_container. */
static int parse_value(parser *p, tg__json **out)
{
    skip_ws(p);
    *out = NULL;
    int c = peek(p);
    if (c == '{' || c == '[') return parse_container(p, out);
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, out);
    if (c == '"') {
        tg__json *v = new_value(TG__JSON_STRING, p->pos);
        if (!v) return TG_ENOMEM;
        int rc = parse_string(p, &v->u.str.s, &v->u.str.len);
        if (rc < 0) {
            free(v);
            return rc;
        }
        *out = v;
        return 0;
    }
    return parse_literal(p, out);
}

int tg__json_parse(tg__json **out, const char *buf, size_t len, const char *what)
{
    TG_CHECK(out && (buf || len == 0), TG_EINVAL, "json: out and buf must not be NULL");
    parser p = {(const unsigned char *)buf, len, 0, what ? what : "json", 0};
    tg__json *v = NULL;
    TG_TRY(parse_value(&p, &v));
    skip_ws(&p);
    if (p.pos != p.len) {
        tg__json_free(v);
        return perr(&p, p.pos, "unexpected data after the JSON value");
    }
    *out = v;
    return 0;
}

void tg__json_free(tg__json *v)
{
    if (!v) return;
    if (v->type == TG__JSON_STRING) {
        free(v->u.str.s);
    } else if (v->type == TG__JSON_ARRAY) {
        for (size_t i = 0; i < v->u.arr.n; i++) tg__json_free(v->u.arr.items[i]);
        free(v->u.arr.items);
    } else if (v->type == TG__JSON_OBJECT) {
        HASH_CLEAR(hh, v->u.obj.index);
        for (size_t i = 0; i < v->u.obj.n; i++) {
            tg__json_free(v->u.obj.members[i]->value);
            free(v->u.obj.members[i]->key);
            free(v->u.obj.members[i]);
        }
        free(v->u.obj.members);
    }
    free(v);
}

const tg__json *tg__json_get(const tg__json *v, const char *key)
{
    if (!v || v->type != TG__JSON_OBJECT || !key) return NULL;
    tg__json_member *m = NULL;
    HASH_FIND(hh, v->u.obj.index, key, strlen(key), m);
    return m ? m->value : NULL;
}

const char *tg__json_type_name(tg__json_type t)
{
    static const char *const names[] = {
        [TG__JSON_NULL] = "null",     [TG__JSON_BOOL] = "boolean", [TG__JSON_INT] = "integer",
        [TG__JSON_DOUBLE] = "number", [TG__JSON_STRING] = "string", [TG__JSON_ARRAY] = "array",
        [TG__JSON_OBJECT] = "object",
    };
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}
