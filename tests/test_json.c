/* The JSON parser under the safetensors reader (src/io/json.c), and
 * out-of-memory inside uthash while parsing, loading and filling a file. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "io/json.h"
#include "tapegrad/safetensors.h"

/* ---- helpers ------------------------------------------------------------- */

static void make_dir(void) { th_tmp_dir_make("tg_json_"); }

static tg_st_file *const UNTOUCHED = (tg_st_file *)&th_tmp_dir;

TestSuite(json, .init = make_dir, .fini = th_tmp_dir_remove);

/* ---- the JSON parser directly ---------------------------------------------------- */

Test(json, numbers_strings_and_offsets)
{
    const char *doc = " {\"i\": -9223372036854775808, \"big\": 9223372036854775808, "
                      "\"d\": -1.5e2, \"s\": \"\\u00e9\\ud83d\\ude00\\n\", \"a\": [true, false, null]} ";
    tg__json *v = NULL;
    cr_assert(eq(int, tg__json_parse(&v, doc, strlen(doc), "t"), 0), "%s", tg_error_message());
    const tg__json *i = tg__json_get(v, "i"), *big = tg__json_get(v, "big");
    cr_assert(eq(int, (int)i->type, TG__JSON_INT));
    cr_assert(eq(i64, i->u.i, INT64_MIN));
    cr_assert(eq(int, (int)big->type, TG__JSON_DOUBLE), "beyond int64 becomes a double");
    cr_assert(eq(dbl, big->u.d, 9223372036854775808.0));
    cr_assert(eq(dbl, tg__json_get(v, "d")->u.d, -150.0));
    /* U+00E9 is C3 A9; U+1F600 (pair D83D DE00) is F0 9F 98 80. */
    cr_assert(eq(str, tg__json_get(v, "s")->u.str.s, "\xc3\xa9\xf0\x9f\x98\x80\n"));
    const tg__json *a = tg__json_get(v, "a");
    cr_assert(eq(sz, a->u.arr.n, 3));
    cr_assert(a->u.arr.items[0]->u.b && !a->u.arr.items[1]->u.b);
    cr_assert(eq(int, (int)a->u.arr.items[2]->type, TG__JSON_NULL));
    cr_assert(eq(sz, tg__json_get(v, "d")->offset, (size_t)(strstr(doc, "-1.5e2") - doc)));
    tg__json_free(v);

    tg__json *w = (tg__json *)doc;
    const char *bad = "{\"x\": [1, 2,, 3]}";
    cr_assert(eq(int, tg__json_parse(&w, bad, strlen(bad), "t"), TG_EFORMAT));
    cr_assert(w == (tg__json *)doc);
    cr_assert(strstr(tg_error_message(), "at byte 12") != NULL, "%s", tg_error_message());
}

Test(json, writer_escapes_round_trip)
{
    const char *s = "a\"b\\c\n\t\x01\x1f \xc3\xa9";
    tg__buf b = {0};
    cr_assert(eq(int, tg__json_write_string(&b, s), 0));
    cr_assert(eq(str, b.data, "\"a\\\"b\\\\c\\n\\t\\u0001\\u001f \xc3\xa9\""));
    tg__json *v = NULL;
    cr_assert(eq(int, tg__json_parse(&v, b.data, b.len, "t"), 0));
    cr_assert(eq(str, v->u.str.s, (char *)s));
    tg__json_free(v);
    tg__buf_free(&b);
}

/* ---- out of memory inside uthash (src/hash.h) ------------------------------------ */

/* Each test below fails the uthash allocations of one call one at a time
 * (tg__hash_fail_after(k): the (k+1)-th fails), for k = 0, 1, ... until the
 * call makes fewer than k + 1, and then checks the one run that succeeded.
 * Every failure must be TG_ENOMEM with the caller's objects as they were; a
 * leak shows up in the sanitizer build. */

/* True when the failure set by tg__hash_fail_after happened (and clears it). */
static bool hash_failed(void) { return tg__hash_fail_after(-1) < 0; }

enum { JSON_KEYS = 3000 };

/* {"k0": 0, "k1": 7, ...}: one object whose key index doubles its buckets
 * several times. */
Test(json, object_out_of_memory_is_enomem)
{
    tg__buf doc = {0};
    cr_assert(eq(int, tg__buf_append(&doc, "{", 1), 0));
    for (int i = 0; i < JSON_KEYS; i++)
        cr_assert(eq(int, tg__buf_printf(&doc, "%s\"k%d\": %d", i ? ", " : "", i, 7 * i), 0));
    cr_assert(eq(int, tg__buf_append(&doc, "}", 1), 0));
    int k = 0;
    for (;; k++) {
        tg__json *v = (tg__json *)&doc;
        tg__hash_fail_after(k);
        int rc = tg__json_parse(&v, doc.data, doc.len, "t");
        if (!hash_failed()) {
            cr_assert(eq(int, rc, 0), "k=%d: %s", k, tg_error_message());
            cr_assert(eq(sz, v->u.obj.n, JSON_KEYS));
            for (int i = 0; i < JSON_KEYS; i++) {
                char key[16];
                snprintf(key, sizeof key, "k%d", i);
                const tg__json *x = tg__json_get(v, key);
                cr_assert(x != NULL && x->u.i == 7 * i, "k=%d: key %s", k, key);
            }
            tg__json_free(v);
            break;
        }
        cr_assert(eq(int, rc, TG_ENOMEM), "k=%d: rc=%d (%s)", k, rc, tg_error_message());
        cr_assert(v == (tg__json *)&doc, "k=%d: *out was changed", k);
        th_expect_in(tg_error_message(), "t: out of memory indexing an object's keys at byte");
    }
    /* the table, its first buckets, then at least three doublings */
    cr_assert(k >= 5, "%d uthash allocations for %d keys", k, JSON_KEYS);
    tg__buf_free(&doc);
}

enum { ST_TENSORS = 1000, ST_META = 20 };

static const char *nth_name(char *buf, size_t n, const char *prefix, int i)
{
    snprintf(buf, n, "%s%d", prefix, i);
    return buf;
}

/* ST_TENSORS scalars "w<i>" = i and ST_META metadata "m<i>" = "v<i>". */
static void check_many(const tg_st_file *f)
{
    char name[32], value[32];
    cr_assert(eq(int, tg_st_count(f), ST_TENSORS));
    cr_assert(eq(int, tg_st_meta_count(f), ST_META));
    for (int i = 0; i < ST_TENSORS; i++) {
        const char *at = NULL;
        const tg_tensor *t = tg_st_get(f, nth_name(name, sizeof name, "w", i));
        double x = -1;
        cr_assert(t != NULL && tg_tensor_get_flat(t, 0, &x) == 0 && x == i, "%s", name);
        cr_assert(eq(int, tg_st_at(f, i, &at, NULL), 0));
        cr_assert(eq(str, (char *)at, name));
    }
    for (int i = 0; i < ST_META; i++) {
        const char *v = tg_st_meta_get(f, nth_name(name, sizeof name, "m", i));
        cr_assert(v != NULL, "%s", name);
        cr_assert(eq(str, (char *)v, (char *)nth_name(value, sizeof value, "v", i)));
    }
}

/* Loading a file of many tensors: the header's JSON objects (the root, one
 * per tensor, the metadata) and the file's indexes by name all allocate. */
Test(json, load_out_of_memory_is_enomem)
{
    char path[256], name[32], value[32];
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_st_new(&f), 0));
    for (int i = 0; i < ST_TENSORS; i++) {
        tg_tensor *t = NULL;
        cr_assert(eq(int, tg_tensor_scalar(&t, TG_F32, i), 0));
        cr_assert(eq(int, tg_st_set(f, nth_name(name, sizeof name, "w", i), t), 0));
        tg_tensor_release(t);
    }
    for (int i = 0; i < ST_META; i++)
        cr_assert(eq(int, tg_st_meta_set(f, nth_name(name, sizeof name, "m", i),
                                         nth_name(value, sizeof value, "v", i)), 0));
    th_tmp_path(path, sizeof path, "many.safetensors");
    cr_assert(eq(int, tg_safetensors_save(f, path), 0), "%s", tg_error_message());
    tg_st_free(f);
    int k = 0;
    for (;; k++) {
        tg_st_file *g = UNTOUCHED;
        tg__hash_fail_after(k);
        int rc = tg_safetensors_load(&g, path);
        if (!hash_failed()) {
            cr_assert(eq(int, rc, 0), "k=%d: %s", k, tg_error_message());
            check_many(g);
            tg_st_free(g);
            break;
        }
        cr_assert(eq(int, rc, TG_ENOMEM), "k=%d: rc=%d (%s)", k, rc, tg_error_message());
        cr_assert(g == UNTOUCHED, "k=%d: *out was changed", k);
        th_expect_in(tg_error_message(), "out of memory indexing");
    }
    cr_assert(k >= 2 * ST_TENSORS + 10, "%d uthash allocations", k);
}

/* tg_st_set / tg_st_meta_set with the first uthash allocation of each call
 * failing: the table's, then each doubling of its buckets.  The set is left
 * as it was (the tensor not retained), and the same call then succeeds. */
static void fill_failing_each_growth(bool meta)
{
    tg_st_file *f = NULL;
    tg_tensor *t = NULL;
    char name[32];
    cr_assert(eq(int, tg_st_new(&f), 0));
    cr_assert(eq(int, tg_tensor_scalar(&t, TG_F32, 1.5), 0));
    int failed = 0;
    for (int i = 0; i < ST_TENSORS; i++) {
        nth_name(name, sizeof name, meta ? "m" : "w", i);
        tg__hash_fail_after(0);
        int rc = meta ? tg_st_meta_set(f, name, "v") : tg_st_set(f, name, t);
        if (hash_failed()) {
            failed++;
            cr_assert(eq(int, rc, TG_ENOMEM), "%s: rc=%d (%s)", name, rc, tg_error_message());
            th_expect_in(tg_error_message(), "safetensors: out of memory indexing the name");
            cr_assert(eq(int, meta ? tg_st_meta_count(f) : tg_st_count(f), i));
            cr_assert(tg_st_get(f, name) == NULL && tg_st_meta_get(f, name) == NULL);
            cr_assert(eq(int, t->refcount, 1 + (meta ? 0 : i)));
            rc = meta ? tg_st_meta_set(f, name, "v") : tg_st_set(f, name, t);
        }
        cr_assert(eq(int, rc, 0), "%s: %s", name, tg_error_message());
    }
    for (int i = 0; i < ST_TENSORS; i++) {
        nth_name(name, sizeof name, meta ? "m" : "w", i);
        cr_assert(meta ? tg_st_meta_get(f, name) != NULL : tg_st_get(f, name) == t, "%s", name);
    }
    cr_assert(eq(int, t->refcount, 1 + (meta ? 0 : ST_TENSORS)));
    cr_assert(failed >= 4, "%d failures: the table, then at least three doublings", failed);
    tg_st_free(f);
    tg_tensor_release(t);
}

Test(json, st_set_out_of_memory_leaves_the_set_unchanged)
{
    fill_failing_each_growth(false);
    fill_failing_each_growth(true);
}
