/* Helpers shared by the Criterion test files (compiled into every test
 * executable from tests/helpers.c and tests/helpers_files.c).  Each one
 * asserts on failure, so a test that uses them still fails at the first
 * broken step. */
#ifndef TG_TESTS_HELPERS_H
#define TG_TESTS_HELPERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tapegrad/autograd.h"
#include "tapegrad/loss.h"
#include "tapegrad/nn.h"
#include "tapegrad/safetensors.h"
#include "tapegrad/tensor.h"

/* ---- what a test does not run here ---- */

/* Prints "[NOT RUN] suite::test: <reason>" on stderr, for a part of the
 * current test that this CPU or build cannot run (a kernel whose
 * instructions it lacks, say).  The test goes on and can still pass.  A
 * skipped test's reason is printed as "[SKIP] suite::test: <reason>" by a
 * report hook of helpers.c; scripts/run_tests.sh lists both at the end.
 * Under TG_MAX_ISA both lines end with th_isa_bound_note(). */
void th_not_run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "" without TG_MAX_ISA; with it, a note that the bound, not the CPU, may
 * be what leaves a kernel out (this thread's buffer). */
const char *th_isa_bound_note(void);

/* ---- a temporary directory per test (suite .init / .fini), programs, files
 * (helpers_files.c) ---- */

/* The directory made by th_tmp_dir_make, e.g. "/tmp/tg_data_a1B2c3". */
extern char th_tmp_dir[64];

/* Creates a fresh directory "/tmp/<prefix>XXXXXX" into th_tmp_dir. */
void th_tmp_dir_make(const char *prefix);

/* Removes the files and empty subdirectories of th_tmp_dir, then the
 * directory itself; does nothing if it does not exist. */
void th_tmp_dir_remove(void);

/* Writes "<th_tmp_dir>/<name>" into buf (n bytes) and returns buf. */
const char *th_tmp_path(char *buf, size_t n, const char *name);

/* The number of entries of th_tmp_dir whose name does not start with '.'. */
int th_tmp_dir_count(void);

/* What the last th_run's program wrote to stdout and stderr (NUL-terminated,
 * cut if longer). */
extern char th_out[1 << 16], th_err[1 << 14];

/* Runs the program named by the environment variable var (set by
 * tests/meson.build) with args (NULL-terminated, without argv[0]) in
 * th_tmp_dir, its stdout and stderr into th_out and th_err.  A sanitizer
 * report on its stderr fails the test (the test log never sees the child's
 * stderr).  Returns the exit status, or -1 when it died of a signal. */
int th_run(const char *var, const char *const *args);

/* Fails the test, showing text, unless want occurs in it. */
void th_expect_in(const char *text, const char *want);

/* The whole file at path in a new malloc'd buffer (*n bytes, plus a NUL not
 * counted), or NULL when it cannot be read. */
char *th_read_file(const char *path, size_t *n);

/* True when path exists (a file, a folder or anything else). */
bool th_exists(const char *path);

/* Writes n bytes of data to the file at path (created or truncated). */
void th_write_bytes(const char *path, const void *data, size_t n);

/* Fails unless the file at path holds exactly the n bytes of want: a run
 * that failed left it as it was. */
void th_expect_same_bytes(const char *path, const char *want, size_t n);

/* Fails unless err (a failed run's stderr) says what the program was doing
 * in want, and quotes no C call or status name (as "tg_x(&y, z) failed:
 * TG_EIO: ..." did). */
void th_expect_plain_message(const char *err, const char *want);

/* Writes an uncompressed IDX set of n side x side images into dir/<prefix>
 * (prefix "train" or "t10k": <prefix>-images-idx3-ubyte and
 * <prefix>-labels-idx1-ubyte): pixels from th_xorshift64 on seed, labels
 * i % 10. */
void th_write_idx_set(const char *dir, const char *prefix, uint32_t n, uint8_t side,
                      uint64_t seed);

/* ---- deterministic random numbers ---- */

/* Advances the xorshift64 state *s (never 0) and returns it. */
uint64_t th_xorshift64(uint64_t *s);

/* The next xorshift64 value of *s as a double in [-1, 1) (53 random bits). */
double th_uniform_pm1(uint64_t *s);

/* An integer in [lo, hi] (inclusive) from the xorshift64 state *s. */
int64_t th_rand_int(uint64_t *s, int64_t lo, int64_t hi);

/* ---- tensors ---- */

/* A new tensor of values uniform in [lo, hi) drawn from the xorshift64
 * state *s (th_uniform_pm1), element by element. */
tg_tensor *th_rand_tensor(uint64_t *s, tg_dtype dt, int ndim, const int64_t *shape, double lo,
                          double hi);

/* A new tensor of dtype dt and the given shape holding v[0..numel) converted
 * to dt; returns a new reference. */
tg_tensor *th_tensor_from(tg_dtype dt, int ndim, const int64_t *shape, const double *v);

/* A new 1-d tensor of n values from v, named name, requiring grad when rg. */
tg_tensor *th_vec(tg_dtype dt, int64_t n, const double *v, const char *name, bool rg);

/* The four float dtypes: f32, f64, f16, bf16. */
extern const tg_dtype th_floats[4];

/* v rounded to dt as an f32 computation stored in dt rounds it: once. */
double th_round_to(tg_dtype dt, double v);

/* Releases ts[0..n). */
void th_release_all(int n, tg_tensor **ts);

/* A new tensor whose row-major element k is k (an arange). */
tg_tensor *th_arange(tg_dtype dt, int ndim, const int64_t *shape);

/* A new tensor of uniform random values in [-1, 1) from tg_rng seeded with
 * seed. */
tg_tensor *th_rand_uniform(tg_dtype dt, int ndim, const int64_t *shape, uint64_t seed);

/* Element i (flat, row-major) of t as a double. */
double th_at(const tg_tensor *t, int64_t i);
/* max |x - y| over the elements of x - y (broadcast). */
double th_max_diff(tg_tensor *x, tg_tensor *y);

/* Every element of t as doubles in a new malloc'd array the caller frees
 * (one element at least, so an empty tensor gives a valid pointer). */
double *th_doubles(const tg_tensor *t);

/* The element of t at the multi-index idx, as a double. */
double th_get(const tg_tensor *t, const int64_t *idx);

/* Fails unless t has ndim dims of the given extents. */
void th_expect_shape(const tg_tensor *t, int ndim, const int64_t *shape);

/* A new tensor whose element i is a low-discrepancy value in [lo, hi):
 * lo + (hi - lo) * frac((i + 1) * 0.618...), the same for every run. */
tg_tensor *th_seq(tg_dtype dt, int ndim, const int64_t *shape, double lo, double hi);

/* |got - want| <= atol + rtol * |want|; NaN matches NaN, an infinity only
 * itself. */
bool th_close(double got, double want, double rtol, double atol);

/* Whether a and b (contiguous) have the same dtype, shape and bytes. */
bool th_same_bits(const tg_tensor *a, const tg_tensor *b);

/* Fails unless got and want hold the same values and dtype: NaN matches
 * NaN, and the sign of a zero counts; x is the input, for the message. */
void th_expect_same_bits(const char *what, const tg_tensor *x, const tg_tensor *got,
                         const tg_tensor *want);

/* For a linear op y = A x (y recorded from the f64 x, which requires grad):
 * x's gradient A^T g for a random g of y's shape (seed), with a graph, and
 * that gradient's own gradient with respect to g at x, which is A x: it
 * must be y bit for bit (the backward's backward is the forward op). */
void th_expect_double_backward_is_forward(tg_tensor *x, tg_tensor *y, uint64_t seed);

/* tg_gradcheck, then tg_gradgradcheck, of fn at in[0..n) with the default
 * options; a failure says fmt's text and tg_error_message(). */
void th_expect_gradchecks(tg_gradcheck_fn fn, void *user, int n, tg_tensor *const *in,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* A call of a test's op `op` (with its argument string arg) on n inputs of
 * ranks nd[] and extents shape[][], for th_gradcheck_calls. */
typedef struct th_call {
    const char *op, *arg;
    int n;
    int nd[4];
    int64_t shape[4][4];
} th_call;
/* For each of calls[0..count): its n f64 inputs uniform in [lo, hi) (input
 * j of call i from the seed seed0 + 7 i + j), requiring grad, then
 * th_expect_gradchecks of fn with user = &calls[i]. */
void th_gradcheck_calls(const th_call *calls, size_t count, tg_gradcheck_fn fn, uint64_t seed0,
                        double lo, double hi);

/* sum(y * gy) backward: the gradients of y's leaves for an upstream gy. */
void th_backward_with(tg_tensor *y, const tg_tensor *gy);

/* Three f32 views that are not contiguous, over random values (seed 5): a
 * (3, 4, 5) transposed over dims 0 and 2, every other row of one (rows 1
 * and 3), and a (3, 1, 5) expanded to (3, 4, 5) (stride 0); new references. */
void th_views_of_3x4x5(tg_tensor *v[3]);

/* A new tensor of dtype dt and shape (nd >= 1 dims), or a view of that
 * shape: contiguous (layout 0), the transpose over the first and last dims
 * of a tensor of the swapped shape (1), or every other slice along dim 0
 * of a tensor twice as long there (2).  Values from the xorshift64 state
 * seed (nonzero): floats 100 th_uniform_pm1, integers over their whole
 * range (so that int64 sums wrap). */
tg_tensor *th_layout_of(tg_dtype dt, int nd, const int64_t *shape, int layout, uint64_t seed);

/* The first element at which got and want (contiguous, want's dtype and
 * numel) differ in their bytes, or -1. */
int64_t th_first_difference(const tg_tensor *got, const tg_tensor *want);

/* got (not NULL) has want's dtype, shape and bytes (an i64 beyond 2^53
 * too); a failure names what and the first element that differs. */
void th_expect_same_tensor_bytes(const char *what, const tg_tensor *got,
                                 const tg_tensor *want);

/* The FP32 autocast policy of a one-input op (op(&y, x), y a new
 * reference): inside a bf16 autocast scope a bf16 x (4, 7) of random values
 * (seed) gives an f32 y with the bits of op on x cast to f32, x's gradient
 * through it comes back in bf16, and outside the scope y is bf16. */
void th_expect_fp32_autocast(int (*op)(tg_tensor **y, tg_tensor *x), uint64_t seed);

/* The reduction a golden file names ("mean", "sum", "none", "batchmean");
 * any other name fails the test. */
tg_reduction th_reduction_of(const char *name);

/* ---- golden files under tests/golden ---- */

/* Writes "<root>/tests/golden/<rel>" into buf (n bytes), root being the
 * environment's TG_SOURCE_ROOT when set and non-empty, else the compiled-in
 * TG_SOURCE_ROOT; rel is a printf format.  Returns buf. */
const char *th_golden_path(char *buf, size_t n, const char *rel_fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Loads "<root>/tests/golden/<rel>" (rel a printf format); returns a new
 * file the caller frees with tg_st_free. */
tg_st_file *th_golden_load(const char *rel_fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* The metadata value or tensor "<c>.<what>" of golden case c (fails when
 * the file lacks it). */
const char *th_golden_meta(const tg_st_file *f, const char *c, const char *what);
const tg_tensor *th_golden_get(const tg_st_file *f, const char *c, const char *what);
/* The tensor whose name is fmt filled with a and b (each used as fmt has
 * them: "%s.%s.y"); fails when the file lacks it. */
tg_tensor *th_golden_at(const tg_st_file *f, const char *fmt, const char *a, const char *b);
/* A copy of t (a golden tensor, say) that requires grad; NULL for NULL. */
tg_tensor *th_leaf_clone(const tg_tensor *t);
/* The integers of "1,2,3" into v (as many as the text holds). */
void th_ints_of(const char *s, int64_t *v);
/* The dims of "1" or "0,-2" into dims ("" for none); returns their count. */
int th_dims_of(const char *s, int *dims);
/* Fails unless got has want's shape and dtype and each element lies within
 * rtol of want's, relative to the element or to the largest finite |want|
 * (for sums that cancel): |got - want| <= rtol * (|want| + scale).  NaN
 * matches NaN and an infinity itself; with rtol 0 the values must be equal
 * and so must a zero's sign. */
void th_expect_close(const char *what, const tg_tensor *got, const tg_tensor *want, double rtol);
/* Fails unless got has want's shape and each element is th_close to
 * want's: |got - want| <= atol + rtol * |want|, NaN matching NaN and an
 * infinity itself. */
void th_expect_near(const char *what, const tg_tensor *got, const tg_tensor *want, double rtol,
                    double atol);
/* Fails unless got has want's dtype and shape and each element lies within
 * rtol * (the largest finite |want|) of want's (NaN matches NaN, an
 * infinity itself). */
void th_expect_close_scaled(const char *what, const tg_tensor *got, const tg_tensor *want,
                            double rtol);

/* Fails unless m's state dict is the one in f under prefix: the same keys
 * (none missing or unexpected), each value with the same bits (rtol 0, and
 * always for integer tensors) or th_expect_close_scaled within rtol. */
void th_expect_state(const tg_module *m, const tg_st_file *f, const char *prefix, double rtol);
/* Fails unless m's state-dict keys, joined by commas, are want ("a,b,c"),
 * in that order. */
void th_expect_state_keys(const tg_module *m, const char *want);

/* Fails unless a line of text holds, split at spaces, exactly the words of
 * `row` (one string, single spaces: "add 2 promote yes yes"), so that a
 * table's column widths do not matter. */
void th_expect_row(const char *text, const char *row);

/* A new file with src's tensors and metadata but the one named skip (a
 * state file with an entry left out). */
tg_st_file *th_st_copy_without(const tg_st_file *src, const char *skip);
/* Two files (state snapshots) hold the same entries, bit for bit, and the
 * same metadata. */
void th_expect_same_st(const tg_st_file *x, const tg_st_file *y);

/* ---- refusals ---- */

/* Fails unless rc is status, the message holds words and y stayed NULL
 * (line: the caller's, for the message); th_expect_refused passes it. */
void th_refused_at(int line, int rc, int status, const char *words, const tg_tensor *y);
#define th_expect_refused(rc, status, words, y) th_refused_at(__LINE__, rc, status, words, y)
/* The same for a call without a tensor result: it returns status, with a
 * message holding words. */
#define th_expect_status(call, status, words) th_refused_at(__LINE__, (call), status, words, NULL)
/* th_expect_refused of call, which writes its result through out_ (a
 * tg_tensor ** the macro declares, pointing at a NULL), and a check that
 * the call left no tensor memory behind. */
#define th_expect_refused_clean(call, status, words)                                       \
    do {                                                                                   \
        tg_tensor *y_ = NULL;                                                              \
        int64_t before_, after_;                                                           \
        tg_memory_stats(&before_, NULL);                                                   \
        tg_tensor **out_ = &y_;                                                            \
        int rc_ = (call);                                                                  \
        tg_memory_stats(&after_, NULL);                                                    \
        th_expect_refused(rc_, status, words, y_);                                         \
        cr_assert(eq(i64, after_, before_), "%s leaves %lld bytes", #call,                 \
                  (long long)(after_ - before_));                                          \
    } while (0)

#endif
