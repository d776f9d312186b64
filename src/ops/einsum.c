/* src/ops/einsum.c - einsum(equation, operands) (torch.einsum), made of
 * sums, expands, permutes, reshapes and batched matmuls, so its gradients,
 * of any order, are theirs.
 *
 * Every dim of every operand gets a label: a letter (0..51, 'A'..'Z' then
 * 'a'..'z', ASCII order), one of the E dims that "..." stands for (right-
 * aligned across operands, as NumPy broadcasts), or a fresh label standing
 * for a repeated letter.  A letter repeated in one term, x_ii, is written
 * as sum_j x_ij eye_ij: the second occurrence gets a fresh label j and an
 * identity matrix joins the operands, so a diagonal is one more product.
 * A size-1 dim under a label whose extent elsewhere is larger is expanded.
 *
 * Then: each operand is summed over the labels no other operand and not
 * the output has; operands are contracted left to right, a pair (A, B) as
 * A (batch, left, contracted) @ B (batch, contracted, right), the batch
 * being the shared labels still needed (in the output or a later operand);
 * the result is permuted to the output's order. */
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "ops/linalg_internal.h"
#include "tapegrad/op.h"
#include "tapegrad/ops.h"

enum {
    N_LETTERS = 52,
    ELL0 = N_LETTERS,               /* the dims of "..." */
    FRESH0 = ELL0 + TG_MAX_DIMS,    /* the repeats of a letter */
    N_LABELS = FRESH0 + TG_OP_MAX_INPUTS * TG_MAX_DIMS,
    MAX_WORK = TG_OP_MAX_INPUTS * (TG_MAX_DIMS + 1),   /* operands and identities */
};

/* The labels of a tensor's dims, in order. */
typedef struct labels {
    int n;
    int l[TG_MAX_DIMS];
} labels;

/* A term as written: its letters and where "..." stands among them (-1:
 * nowhere). */
typedef struct raw_term {
    int n, ell;
    int l[TG_MAX_DIMS];
} raw_term;

typedef struct equation {
    int n;
    bool explicit_out;
    raw_term in[TG_OP_MAX_INPUTS], out;
} equation;

static int letter_label(char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return 26 + c - 'a';
    return -1;
}

static char label_char(int l)
{
    return (char)(l < 26 ? 'A' + l : 'a' + l - 26);
}

/* Reads the term at eq[*pos] up to ',', '-' or the end into t. */
static int parse_term(const char *eq, size_t *pos, const char *what, raw_term *t)
{
    t->n = 0;
    t->ell = -1;
    for (;;) {
        const char c = eq[*pos];
        if (c == '\0' || c == ',' || c == '-') return TG_OK;
        if (c == ' ') {
            (*pos)++;
            continue;
        }
        if (c == '.') {
            TG_CHECK(strncmp(eq + *pos, "...", 3) == 0, TG_EINVAL,
                     "einsum: '.' at position %zu of \"%s\" must be part of a '...'", *pos, eq);
            TG_CHECK(t->ell < 0, TG_EINVAL, "einsum: %s of \"%s\" has more than one '...'", what,
                     eq);
            t->ell = t->n;
            *pos += 3;
            continue;
        }
        const int l = letter_label(c);
        TG_CHECK(l >= 0, TG_EINVAL,
                 "einsum: character %d at position %zu of \"%s\" is not a letter, ',', '...', "
                 "' ' or '->'", (int)(unsigned char)c, *pos, eq);
        TG_CHECK(t->n < TG_MAX_DIMS, TG_EINVAL, "einsum: %s of \"%s\" has more than %d letters",
                 what, eq, TG_MAX_DIMS);
        t->l[t->n++] = l;
        (*pos)++;
    }
}

static int parse(const char *eq, int n, equation *e)
{
    size_t pos = 0;
    int k = 0;
    char what[32];
    for (;;) {
        TG_CHECK(k < n, TG_EINVAL, "einsum: \"%s\" has more terms than the %d operands given", eq,
                 n);
        snprintf(what, sizeof what, "term %d", k);
        TG_TRY(parse_term(eq, &pos, what, &e->in[k++]));
        if (eq[pos] != ',') break;
        pos++;
    }
    TG_CHECK(k == n, TG_EINVAL, "einsum: \"%s\" has %d terms but %d operands are given", eq, k,
             n);
    e->n = n;
    e->explicit_out = eq[pos] == '-';
    if (!e->explicit_out) return TG_OK;
    TG_CHECK(eq[pos + 1] == '>', TG_EINVAL,
             "einsum: '-' at position %zu of \"%s\" must begin '->'", pos, eq);
    pos += 2;
    TG_TRY(parse_term(eq, &pos, "the output", &e->out));
    TG_CHECK(eq[pos] == '\0', TG_EINVAL,
             "einsum: \"%s\" goes on after the output's letters at position %zu (one '->', "
             "then the output)", eq, pos);
    return TG_OK;
}

/* The working set: tensors (new references) and their labels. */
typedef struct work {
    int n, E, next_fresh;
    tg_tensor *t[MAX_WORK];
    labels lab[MAX_WORK];
    int64_t ext[N_LABELS];   /* -1: unused */
} work;

/* n x n identity of dtype dt, labelled (a, b), appended to w. */
static int add_identity(work *w, tg_dtype dt, int64_t n, int a, int b)
{
    tg_tensor *eye = NULL;
    TG_TRY(tg_tensor_zeros(&eye, dt, 2, (int64_t[]){n, n}));
    for (int64_t i = 0; i < n; i++) TG_ASSERT(tg_tensor_set(eye, (int64_t[]){i, i}, 1.0) == 0);
    w->t[w->n] = eye;
    w->lab[w->n++] = (labels){2, {a, b}};
    return TG_OK;
}

/* Operand k's labels from its term (the "..." taking the dims the letters
 * leave); each repeat of a letter gets a fresh label and an identity. */
static int label_operand(work *w, const raw_term *r, int k, tg_tensor *x)
{
    const int ek = r->ell < 0 ? 0 : x->ndim - r->n;
    labels *lab = &w->lab[k];
    lab->n = 0;
    for (int i = 0; i <= r->n; i++) {
        if (i == r->ell)
            for (int t = 0; t < ek; t++) lab->l[lab->n++] = ELL0 + w->E - ek + t;
        if (i == r->n) break;
        int l = r->l[i];
        for (int j = 0; j < lab->n; j++) {
            if (lab->l[j] != l) continue;
            const int64_t e0 = x->shape[j], e1 = x->shape[lab->n];
            TG_CHECK(e0 == e1, TG_ESHAPE,
                     "einsum: letter '%c' repeats in term %d over dims of extents %lld and "
                     "%lld (a diagonal needs them equal)",
                     label_char(l), k, (long long)e0, (long long)e1);
            TG_TRY(add_identity(w, x->dtype, e0, l, w->next_fresh));
            l = w->next_fresh++;
            break;
        }
        lab->l[lab->n++] = l;
    }
    return TG_OK;
}

/* Every operand labelled, their extents checked and size-1 dims expanded
 * to their label's extent. */
static int label_all(work *w, const equation *e, tg_tensor *const *ops)
{
    w->E = 0;
    w->next_fresh = FRESH0;
    for (int k = 0; k < e->n; k++) {
        const raw_term *r = &e->in[k];
        const int nd = ops[k]->ndim;
        TG_CHECK(r->ell >= 0 ? r->n <= nd : r->n == nd, TG_EINVAL,
                 "einsum: term %d has %d letters%s but operand %d has %d dims", k, r->n,
                 r->ell >= 0 ? " besides '...'" : "", k, nd);
        if (r->ell >= 0 && nd - r->n > w->E) w->E = nd - r->n;
    }
    w->n = e->n;
    for (int k = 0; k < e->n; k++) w->t[k] = tg_tensor_retain(ops[k]);
    for (int k = 0; k < e->n; k++) TG_TRY(label_operand(w, &e->in[k], k, ops[k]));
    for (int l = 0; l < N_LABELS; l++) w->ext[l] = -1;
    for (int k = 0; k < w->n; k++)
        for (int d = 0; d < w->lab[k].n; d++) {
            const int l = w->lab[k].l[d];
            const int64_t x = w->t[k]->shape[d], have = w->ext[l];
            if (have < 0 || have == 1) {
                w->ext[l] = x;
                continue;
            }
            char name[32];
            if (l < N_LETTERS) snprintf(name, sizeof name, "letter '%c'", label_char(l));
            else snprintf(name, sizeof name, "a dim of '...'");
            TG_CHECK(x == 1 || x == have, TG_ESHAPE,
                     "einsum: %s has extent %lld in operand %d but %lld elsewhere (extents "
                     "must match or be 1)", name, (long long)x, k, (long long)have);
        }
    for (int k = 0; k < w->n; k++) {
        int64_t shape[TG_MAX_DIMS];
        bool grow = false;
        for (int d = 0; d < w->lab[k].n; d++) {
            shape[d] = w->ext[w->lab[k].l[d]];
            grow |= shape[d] != w->t[k]->shape[d];
        }
        if (!grow) continue;
        tg_tensor *x = NULL;
        TG_TRY(tg_expand(&x, w->t[k], w->lab[k].n, shape));
        tg_tensor_release(w->t[k]);
        w->t[k] = x;
    }
    return TG_OK;
}

/* The output's labels: as written, "..." standing for the E dims; without
 * "->", the E dims then the letters used once, in order. */
static int output_labels(const equation *e, int E, labels *out)
{
    int count[N_LETTERS] = {0};
    for (int k = 0; k < e->n; k++)
        for (int i = 0; i < e->in[k].n; i++) count[e->in[k].l[i]]++;
    out->n = 0;
    if (!e->explicit_out) {
        for (int t = 0; t < E; t++) out->l[out->n++] = ELL0 + t;
        for (int l = 0; l < N_LETTERS; l++) {
            if (count[l] != 1) continue;
            TG_CHECK(out->n < TG_MAX_DIMS, TG_EUNSUPPORTED,
                     "einsum: the output would have more than %d dims", TG_MAX_DIMS);
            out->l[out->n++] = l;
        }
        return TG_OK;
    }
    const raw_term *r = &e->out;
    bool seen[N_LETTERS] = {false};
    for (int i = 0; i <= r->n; i++) {
        if (i == r->ell)
            for (int t = 0; t < E; t++) {
                TG_CHECK(out->n < TG_MAX_DIMS, TG_EUNSUPPORTED,
                         "einsum: the output would have more than %d dims", TG_MAX_DIMS);
                out->l[out->n++] = ELL0 + t;
            }
        if (i == r->n) break;
        const int l = r->l[i];
        TG_CHECK(count[l] > 0, TG_EINVAL, "einsum: output letter '%c' is in no input term",
                 label_char(l));
        TG_CHECK(!seen[l], TG_EINVAL, "einsum: output letter '%c' appears more than once",
                 label_char(l));
        TG_CHECK(out->n < TG_MAX_DIMS, TG_EUNSUPPORTED,
                 "einsum: the output would have more than %d dims", TG_MAX_DIMS);
        seen[l] = true;
        out->l[out->n++] = l;
    }
    return TG_OK;
}

static int position(const labels *lab, int l)
{
    for (int d = 0; d < lab->n; d++)
        if (lab->l[d] == l) return d;
    return -1;
}

/* *t summed over its labels outside need; *lab updated. */
static int sum_unneeded(tg_tensor **t, labels *lab, const bool *need)
{
    int dims[TG_MAX_DIMS], nd = 0;
    labels kept = {0};
    for (int d = 0; d < lab->n; d++) {
        if (need[lab->l[d]]) kept.l[kept.n++] = lab->l[d];
        else dims[nd++] = d;
    }
    if (nd == 0) return TG_OK;
    tg_tensor *s = NULL;
    TG_TRY(tg_sum_dims(&s, *t, nd, dims, false));
    tg_tensor_release(*t);
    *t = s;
    *lab = kept;
    return TG_OK;
}

/* x permuted to the labels of `order` (each one of x's) and read as the
 * matrices (nb, rows, cols) or, with no batch, (rows, cols). */
static int as_matrices(tg_tensor **out, tg_tensor *x, const labels *lx, const labels *order,
                       bool batch, const int64_t *e3)
{
    int perm[TG_MAX_DIMS];
    for (int d = 0; d < order->n; d++) perm[d] = position(lx, order->l[d]);
    tg_tensor *p = NULL;
    TG_TRY(tg_permute(&p, x, perm));
    const int rc = tg_reshape(out, p, batch ? 3 : 2, batch ? e3 : e3 + 1);
    tg_tensor_release(p);
    return rc;
}

static int64_t extent_of(const work *w, const labels *lab, int from, int to)
{
    int64_t n = 1;
    for (int d = from; d < to; d++) n *= w->ext[lab->l[d]];
    return n;
}

/* *out (labels *lo) = a (la) contracted with b (lb): shared labels in need
 * are the batch, the other shared ones are summed over by the matmul. */
static int contract(const work *w, tg_tensor **out, labels *lo, tg_tensor *a, const labels *la,
                    tg_tensor *b, const labels *lb, const bool *need)
{
    labels oa = {0}, ob = {0}, res = {0};
    int nbat = 0, nleft = 0, ncon = 0;
    for (int d = 0; d < la->n; d++)   /* a: batch, then left, then contracted */
        if (position(lb, la->l[d]) >= 0 && need[la->l[d]]) oa.l[oa.n++] = la->l[d], nbat++;
    for (int d = 0; d < la->n; d++)
        if (position(lb, la->l[d]) < 0) oa.l[oa.n++] = la->l[d], nleft++;
    for (int d = 0; d < la->n; d++)
        if (position(lb, la->l[d]) >= 0 && !need[la->l[d]]) oa.l[oa.n++] = la->l[d], ncon++;
    for (int d = 0; d < nbat; d++) ob.l[ob.n++] = oa.l[d];   /* b: batch, contracted, right */
    for (int d = 0; d < ncon; d++) ob.l[ob.n++] = oa.l[nbat + nleft + d];
    const int nright = lb->n - nbat - ncon;
    for (int d = 0; d < lb->n; d++)
        if (position(la, lb->l[d]) < 0) ob.l[ob.n++] = lb->l[d];
    TG_CHECK(nbat + nleft + nright <= TG_MAX_DIMS, TG_EUNSUPPORTED,
             "einsum: an intermediate product would have %d dims, more than %d",
             nbat + nleft + nright, TG_MAX_DIMS);
    const int64_t B = extent_of(w, &oa, 0, nbat), L = extent_of(w, &oa, nbat, nbat + nleft);
    const int64_t C = extent_of(w, &ob, nbat, nbat + ncon), R = extent_of(w, &ob, nbat + ncon,
                                                                           ob.n);
    int64_t shape[TG_MAX_DIMS];
    for (int d = 0; d < nbat + nleft; d++) res.l[res.n++] = oa.l[d];
    for (int d = nbat + ncon; d < ob.n; d++) res.l[res.n++] = ob.l[d];
    for (int d = 0; d < res.n; d++) shape[d] = w->ext[res.l[d]];
    tg_tensor *am = NULL, *bm = NULL, *p = NULL;
    int rc = as_matrices(&am, a, la, &oa, nbat > 0, (int64_t[]){B, L, C});
    if (rc >= 0) rc = as_matrices(&bm, b, lb, &ob, nbat > 0, (int64_t[]){B, C, R});
    if (rc >= 0) rc = tg_matmul(&p, am, bm);
    if (rc >= 0) rc = tg_reshape(out, p, res.n, shape);
    if (rc >= 0) *lo = res;
    tg_tensor_release(am);
    tg_tensor_release(bm);
    tg_tensor_release(p);
    return rc;
}

/* need[l]: l is in out or in an operand of w other than skip whose index
 * is at least from. */
static void needed(const work *w, const labels *out, int from, int skip, bool *need)
{
    memset(need, 0, sizeof(bool) * N_LABELS);
    for (int d = 0; d < out->n; d++) need[out->l[d]] = true;
    for (int k = from; k < w->n; k++)
        if (k != skip)
            for (int d = 0; d < w->lab[k].n; d++) need[w->lab[k].l[d]] = true;
}

static int run(tg_tensor **y, work *w, const equation *e, tg_tensor *const *ops)
{
    labels out;
    bool need[N_LABELS];
    TG_TRY(label_all(w, e, ops));
    TG_TRY(output_labels(e, w->E, &out));
    for (int k = 0; k < w->n; k++) {
        needed(w, &out, 0, k, need);
        TG_TRY(sum_unneeded(&w->t[k], &w->lab[k], need));
    }
    for (int k = 1; k < w->n; k++) {
        tg_tensor *c = NULL;
        labels lc;
        needed(w, &out, k + 1, -1, need);
        TG_TRY(contract(w, &c, &lc, w->t[0], &w->lab[0], w->t[k], &w->lab[k], need));
        tg_tensor_release(w->t[0]);
        w->t[0] = c;
        w->lab[0] = lc;
    }
    int perm[TG_MAX_DIMS];
    for (int d = 0; d < out.n; d++) perm[d] = position(&w->lab[0], out.l[d]);
    if (out.n == 0) return tg_reshape(y, w->t[0], 0, NULL);
    return tg_permute(y, w->t[0], perm);
}

int tg_einsum(tg_tensor **out, const char *equation_, int n, tg_tensor *const *operands)
{
    TG_CHECK(out != NULL, TG_EINVAL, "einsum: out must not be NULL");
    TG_CHECK(equation_ != NULL, TG_EINVAL, "einsum: equation must not be NULL");
    TG_CHECK(n >= 1 && n <= TG_OP_MAX_INPUTS, TG_EINVAL, "einsum: n=%d must be in [1, %d]", n,
             TG_OP_MAX_INPUTS);
    TG_CHECK(operands != NULL, TG_EINVAL, "einsum: operands must not be NULL");
    for (int k = 0; k < n; k++) {
        TG_CHECK(operands[k] != NULL, TG_EINVAL, "einsum: operands[%d] must not be NULL", k);
        TG_TRY(tg__check_float_pair("einsum", "operands[0]", operands[0], "another operand",
                                    operands[k]));
    }
    equation e;
    TG_TRY(parse(equation_, n, &e));
    work w = {0};
    tg_tensor *y = NULL;
    tg__lib_enter();
    int rc = run(&y, &w, &e, operands);
    for (int k = 0; k < w.n; k++) tg_tensor_release(w.t[k]);
    tg__lib_leave();
    if (rc >= 0) *out = y;
    return tg__scope_capture(out, rc);
}
