/* src/ops/einsum.c - einsum(equation, operands) (torch.einsum), made of
 * sums, expands, permutes, reshapes and batched matmuls, so its gradients,
 * of any order, are theirs.
 *
 * Every dim of every operand gets a label: a letter (0..51, 'A'..'Z' then
 * 'a'..'z', ASCII order) or one of the E dims that "..." stands for (right-
 * aligned across operands, as NumPy broadcasts).  A letter repeated in one
 * term, x_ii, is the diagonal of those two dims: tg_diagonal, a strided
 * view (its gradient g on the diagonal of zeros), as torch.einsum; a letter
 * written three times takes two diagonals.  A term has at most one letter
 * per dim, so its letters are bounded by TG_MAX_DIMS, not by the 52 an
 * equation may use.  A size-1 dim under a label whose extent elsewhere is
 * larger is expanded.
 *
 * Then: each operand is summed over the labels no other operand and not
 * the output has; the operands are contracted a pair at a time in the order
 * of a plan (tg_einsum_plan), a pair (A, B) as A (batch, left, contracted)
 * @ B (batch, contracted, right), the batch being the shared labels still
 * needed (in the output or an operand not yet contracted); the result is
 * permuted to the output's order.
 *
 * The plan: after a pair is contracted its operands leave the list and the
 * product joins it at the end (NumPy's einsum_path).  A product's cost is
 * its multiply-adds, the product of the extents of every label of the pair;
 * an intermediate keeps the labels still needed, which must fit in
 * TG_MAX_DIMS.  The search: every way of pairing up the operands, by
 * dynamic programming over subsets (the cheapest tree for each subset from
 * its two cheapest halves); greedy (the cheapest pair of the list, again
 * and again); or left to right as torch.einsum without opt_einsum.
 * tg_einsum searches exhaustively up to TG_EINSUM_AUTO_OPTIMAL_MAX operands
 * and greedily beyond. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "ops/linalg_internal.h"
#include "tapegrad/op.h"
#include "tapegrad/ops.h"

enum {
    N_LETTERS = 52,
    ELL0 = N_LETTERS,               /* the dims of "..." */
    N_LABELS = ELL0 + TG_MAX_DIMS,
    MAX_WORK = TG_OP_MAX_INPUTS,    /* the operands */
};

_Static_assert(MAX_WORK == TG_EINSUM_MAX_OPERANDS, "tapegrad/ops.h's TG_EINSUM_MAX_OPERANDS");
_Static_assert(N_LABELS <= 128, "a label set is two 64-bit words");

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
    int n, E;
    tg_tensor *t[MAX_WORK];
    labels lab[MAX_WORK];
    int64_t ext[N_LABELS];   /* -1: unused */
} work;

static int position(const labels *lab, int l)
{
    for (int d = 0; d < lab->n; d++)
        if (lab->l[d] == l) return d;
    return -1;
}

/* The first letter that lab holds twice, at dims *d1 < *d2; false if none. */
static bool find_repeat(const labels *lab, int *d1, int *d2)
{
    for (int j = 1; j < lab->n; j++)
        for (int i = 0; i < j; i++)
            if (lab->l[i] == lab->l[j]) {
                *d1 = i;
                *d2 = j;
                return true;
            }
    return false;
}

/* Operand k's labels from its term (the "..." taking the dims the letters
 * leave); each repeat of a letter replaces w->t[k] by its diagonal over
 * the two dims, which go, the letter's one dim last (tg_diagonal's
 * order). */
static int label_operand(work *w, const raw_term *r, int k, tg_tensor *x)
{
    const int ek = r->ell < 0 ? 0 : x->ndim - r->n;
    labels *lab = &w->lab[k];
    lab->n = 0;
    for (int i = 0; i <= r->n; i++) {
        if (i == r->ell)
            for (int t = 0; t < ek; t++) lab->l[lab->n++] = ELL0 + w->E - ek + t;
        if (i == r->n) break;
        const int l = r->l[i], j = position(lab, l);
        const int64_t e0 = j < 0 ? 0 : x->shape[j], e1 = x->shape[lab->n];
        TG_CHECK(j < 0 || e0 == e1, TG_ESHAPE,
                 "einsum: letter '%c' repeats in term %d over dims of extents %lld and "
                 "%lld (a diagonal needs them equal)",
                 label_char(l), k, (long long)e0, (long long)e1);
        lab->l[lab->n++] = l;
    }
    int d1, d2;
    while (find_repeat(lab, &d1, &d2)) {
        const int l = lab->l[d1];
        tg_tensor *dg = NULL;
        TG_TRY(tg_diagonal(&dg, w->t[k], 0, d1, d2));
        tg_tensor_release(w->t[k]);
        w->t[k] = dg;
        labels kept = {0};
        for (int d = 0; d < lab->n; d++)
            if (d != d1 && d != d2) kept.l[kept.n++] = lab->l[d];
        kept.l[kept.n++] = l;
        *lab = kept;
    }
    return TG_OK;
}

/* Every operand labelled, their extents checked and size-1 dims expanded
 * to their label's extent. */
static int label_all(work *w, const equation *e, tg_tensor *const *ops)
{
    w->E = 0;
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

/* ---- plans ---- */

/* A set of labels, renumbered 0..U-1 for the plan (U <= N_LABELS). */
typedef struct lset {
    uint64_t w[2];
} lset;

static lset lset_or(lset a, lset b)
{
    return (lset){{a.w[0] | b.w[0], a.w[1] | b.w[1]}};
}

static lset lset_and(lset a, lset b)
{
    return (lset){{a.w[0] & b.w[0], a.w[1] & b.w[1]}};
}

static bool lset_has(lset a, int l)
{
    return (a.w[l >> 6] >> (l & 63)) & 1;
}

/* What a plan is made from: m operands' label sets, the output's, and the
 * extent of each label. */
typedef struct problem {
    int m, U;
    lset op[MAX_WORK], out;
    double ext[N_LABELS];
} problem;

static int lset_count(const problem *p, lset a)
{
    int n = 0;
    for (int l = 0; l < p->U; l++) n += lset_has(a, l);
    return n;
}

static double lset_size(const problem *p, lset a)
{
    double n = 1;
    for (int l = 0; l < p->U; l++)
        if (lset_has(a, l)) n *= p->ext[l];
    return n;
}

static void problem_of(const work *w, const labels *out, problem *p)
{
    int id[N_LABELS];
    for (int l = 0; l < N_LABELS; l++) id[l] = -1;
    p->m = w->n;
    p->U = 0;
    for (int k = 0; k <= w->n; k++) {
        const labels *lab = k < w->n ? &w->lab[k] : out;
        lset s = {{0, 0}};
        for (int d = 0; d < lab->n; d++) {
            const int l = lab->l[d];
            if (id[l] < 0) {
                id[l] = p->U++;
                p->ext[id[l]] = (double)w->ext[l];
            }
            s.w[id[l] >> 6] |= 1ull << (id[l] & 63);
        }
        if (k < w->n) p->op[k] = s;
        else p->out = s;
    }
}

/* A list of operands as indices into sets[] (the operands' label sets,
 * then the products'): the operands 0..m-1; returns m. */
static int start_list(const problem *p, lset *sets, int *list)
{
    for (int k = 0; k < p->m; k++) sets[k] = p->op[k], list[k] = k;
    return p->m;
}

/* The labels of operands list[i] and list[j] together (*both) and those of
 * their product, the ones still needed (*res). */
static void pair_labels(const problem *p, const lset *sets, const int *list, int len, int i,
                        int j, lset *both, lset *res)
{
    lset rest = p->out;
    for (int k = 0; k < len; k++)
        if (k != i && k != j) rest = lset_or(rest, sets[list[k]]);
    *both = lset_or(sets[list[i]], sets[list[j]]);
    *res = lset_and(*both, rest);
}

/* list[i] and list[j] leave the list; x joins it at the end: a plan's
 * step, on label sets, on the subsets of the search or on the tensors. */
static void replace_pair_index(int *list, int *len, int i, int j, int x)
{
    int k2 = 0;
    for (int k = 0; k < *len; k++)
        if (k != i && k != j) list[k2++] = list[k];
    list[k2] = x;
    *len = k2 + 1;
}

/* Runs the steps over the label sets: checks them (TG_EINVAL naming the
 * step) and that every intermediate fits (TG_EUNSUPPORTED), and gives the
 * cost and the largest intermediate. */
static int walk(const problem *p, int n_steps, const int (*steps)[2], double *cost,
                double *largest)
{
    lset sets[2 * MAX_WORK];
    int list[MAX_WORK], len = start_list(p, sets, list);
    TG_CHECK(n_steps == p->m - 1, TG_EINVAL,
             "einsum: the plan has %d steps but %d operands need %d", n_steps, p->m,
             p->m - 1);
    *cost = 0;
    *largest = 0;
    for (int s = 0; s < n_steps; s++) {
        const int i = steps[s][0], j = steps[s][1];
        TG_CHECK(i >= 0 && i < len && j >= 0 && j < len && i != j, TG_EINVAL,
                 "einsum: step %d of the plan, (%d, %d), must name two different operands of "
                 "the %d in the list", s, i, j, len);
        lset both, res;
        pair_labels(p, sets, list, len, i, j, &both, &res);
        TG_CHECK(lset_count(p, res) <= TG_MAX_DIMS, TG_EUNSUPPORTED,
                 "einsum: an intermediate product would have %d dims, more than %d (step %d "
                 "of the plan)", lset_count(p, res), TG_MAX_DIMS, s);
        *cost += lset_size(p, both);
        if (lset_size(p, res) > *largest) *largest = lset_size(p, res);
        sets[p->m + s] = res;
        replace_pair_index(list, &len, i, j, p->m + s);
    }
    return TG_OK;
}

/* The product so far (at the end of the list) times the next operand (now
 * first), as torch.einsum without opt_einsum. */
static void plan_left_to_right(int m, int (*steps)[2])
{
    for (int s = 0; s + 1 < m; s++) {
        steps[s][0] = s == 0 ? 0 : m - 1 - s;
        steps[s][1] = s == 0 ? 1 : 0;
    }
}

/* The cheapest pair of the list, again and again. */
static int plan_greedy(const problem *p, int (*steps)[2])
{
    lset sets[2 * MAX_WORK];
    int list[MAX_WORK], len = start_list(p, sets, list);
    for (int s = 0; len > 1; s++) {
        int bi = -1, bj = -1;
        double best = INFINITY;
        lset bres = {{0, 0}};
        for (int i = 0; i < len; i++)
            for (int j = i + 1; j < len; j++) {
                lset both, res;
                pair_labels(p, sets, list, len, i, j, &both, &res);
                const double c = lset_size(p, both);
                if (lset_count(p, res) > TG_MAX_DIMS || c >= best) continue;
                best = c;
                bi = i, bj = j, bres = res;
            }
        TG_CHECK(bi >= 0, TG_EUNSUPPORTED,
                 "einsum: every pair of the %d operands left would make an intermediate "
                 "product of more than %d dims", len, TG_MAX_DIMS);
        steps[s][0] = bi;
        steps[s][1] = bj;
        sets[p->m + s] = bres;
        replace_pair_index(list, &len, bi, bj, p->m + s);
    }
    return TG_OK;
}

/* Per subset of the operands (a bit mask): its labels still needed, the
 * cheapest tree's cost and that tree's half holding the lowest operand. */
typedef struct dp {
    lset *lab;
    double *best;
    int *split;
} dp;

/* The steps of subset S's tree appended, children first; node[] holds the
 * subsets in the list. */
static void emit(const dp *d, int S, int *node, int *len, int (*steps)[2], int *n_steps)
{
    if ((S & (S - 1)) == 0) return;
    const int S1 = d->split[S], S2 = S ^ S1;
    emit(d, S1, node, len, steps, n_steps);
    emit(d, S2, node, len, steps, n_steps);
    int i = -1, j = -1;
    for (int k = 0; k < *len; k++) {
        if (node[k] == S1) i = k;
        if (node[k] == S2) j = k;
    }
    steps[*n_steps][0] = i;
    steps[*n_steps][1] = j;
    (*n_steps)++;
    replace_pair_index(node, len, i, j, S);
}

/* The cheapest of every way of pairing up the operands: each subset's
 * cheapest tree from those of its two halves (subsets in increasing order,
 * so the halves come first), after the labels of every subset. */
static int plan_optimal(const problem *p, int (*steps)[2])
{
    const int m = p->m, full = (1 << m) - 1;
    const size_t n = (size_t)1 << m;
    dp d = {tg__malloc(sizeof(lset) * n), tg__malloc(sizeof(double) * n),
            tg__malloc(sizeof(int) * n)};
    lset *uni = tg__malloc(sizeof(lset) * n);
    int rc = TG_OK;
    if (!d.lab || !d.best || !d.split || !uni) {
        rc = TG_ENOMEM;
        goto done;
    }
    uni[0] = (lset){{0, 0}};
    for (int S = 1; S <= full; S++) {
        int k = 0;
        while (!((S >> k) & 1)) k++;
        uni[S] = lset_or(uni[S & (S - 1)], p->op[k]);
    }
    for (int S = 1; S <= full; S++) {
        d.lab[S] = lset_and(uni[S], lset_or(p->out, uni[full ^ S]));
        d.best[S] = (S & (S - 1)) == 0 ? 0 : INFINITY;
        if ((S & (S - 1)) == 0 || lset_count(p, d.lab[S]) > TG_MAX_DIMS) continue;
        const int low = S & -S;
        for (int S1 = (S - 1) & S; S1 > 0; S1 = (S1 - 1) & S) {
            const int S2 = S ^ S1;
            if (!(S1 & low) || isinf(d.best[S1]) || isinf(d.best[S2])) continue;
            const double c =
                d.best[S1] + d.best[S2] + lset_size(p, lset_or(d.lab[S1], d.lab[S2]));
            if (c < d.best[S]) d.best[S] = c, d.split[S] = S1;
        }
    }
    if (isinf(d.best[full])) {
        rc = tg__error(TG_EUNSUPPORTED,
                       "einsum: every order of the %d operands makes an intermediate product "
                       "of more than %d dims", m, TG_MAX_DIMS);
        goto done;
    }
    int node[MAX_WORK], len = m, n_steps = 0;
    for (int k = 0; k < m; k++) node[k] = 1 << k;
    emit(&d, full, node, &len, steps, &n_steps);
done:
    free(d.lab);
    free(d.best);
    free(d.split);
    free(uni);
    return rc;
}

static int make_plan(const problem *p, tg_einsum_strategy strategy, tg_einsum_plan *plan)
{
    tg_einsum_plan q = {.n_operands = p->m, .n_steps = p->m - 1};
    if (strategy == TG_EINSUM_AUTO)
        strategy = p->m <= TG_EINSUM_AUTO_OPTIMAL_MAX ? TG_EINSUM_OPTIMAL : TG_EINSUM_GREEDY;
    TG_CHECK(strategy != TG_EINSUM_OPTIMAL || p->m <= TG_EINSUM_OPTIMAL_MAX, TG_EUNSUPPORTED,
             "einsum: the optimal search takes at most %d operands, here %d: use "
             "TG_EINSUM_GREEDY", TG_EINSUM_OPTIMAL_MAX, p->m);
    if (strategy == TG_EINSUM_OPTIMAL) TG_TRY(plan_optimal(p, q.steps));
    else if (strategy == TG_EINSUM_GREEDY) TG_TRY(plan_greedy(p, q.steps));
    else plan_left_to_right(p->m, q.steps);
    TG_TRY(walk(p, q.n_steps, (const int (*)[2])q.steps, &q.cost, &q.largest));
    int l2r[MAX_WORK][2];
    double unused;
    plan_left_to_right(p->m, l2r);
    if (walk(p, q.n_steps, (const int (*)[2])l2r, &q.left_to_right_cost, &unused) < 0) {
        q.left_to_right_cost = INFINITY;
        tg_error_clear();
    }
    *plan = q;
    return TG_OK;
}

/* ---- running ---- */

/* need[l]: l is in out or in the operand of w at list[k] for a k other than
 * i and j. */
static void needed(const work *w, const labels *out, const int *list, int len, int i, int j,
                   bool *need)
{
    memset(need, 0, sizeof(bool) * N_LABELS);
    for (int d = 0; d < out->n; d++) need[out->l[d]] = true;
    for (int k = 0; k < len; k++)
        if (k != i && k != j)
            for (int d = 0; d < w->lab[list[k]].n; d++) need[w->lab[list[k]].l[d]] = true;
}

/* The operands labelled, broadcast and summed over the labels no one else
 * needs; *out the output's labels. */
static int prepare(work *w, labels *out, const equation *e, tg_tensor *const *ops)
{
    bool need[N_LABELS];
    int all[MAX_WORK];
    TG_TRY(label_all(w, e, ops));
    TG_TRY(output_labels(e, w->E, out));
    for (int k = 0; k < w->n; k++) all[k] = k;
    for (int k = 0; k < w->n; k++) {
        needed(w, out, all, w->n, k, k, need);
        TG_TRY(sum_unneeded(&w->t[k], &w->lab[k], need));
    }
    return TG_OK;
}

/* The plan's products: a step's product takes its left operand's slot of
 * w, the right one's is released. */
static int run(tg_tensor **y, work *w, const labels *out, const tg_einsum_plan *plan)
{
    problem p;
    double cost, largest;
    problem_of(w, out, &p);
    TG_CHECK(plan->n_operands == w->n, TG_EINVAL,
             "einsum: the plan is for %d operands but the equation has %d",
             plan->n_operands, w->n);
    TG_TRY(walk(&p, plan->n_steps, (const int (*)[2])plan->steps, &cost, &largest));
    int list[MAX_WORK], len = w->n;
    for (int k = 0; k < len; k++) list[k] = k;
    for (int s = 0; s < plan->n_steps; s++) {
        const int i = plan->steps[s][0], j = plan->steps[s][1], a = list[i], b = list[j];
        bool need[N_LABELS];
        tg_tensor *c = NULL;
        labels lc;
        needed(w, out, list, len, i, j, need);
        TG_TRY(contract(w, &c, &lc, w->t[a], &w->lab[a], w->t[b], &w->lab[b], need));
        tg_tensor_release(w->t[a]);
        tg_tensor_release(w->t[b]);
        w->t[a] = c;
        w->t[b] = NULL;
        w->lab[a] = lc;
        replace_pair_index(list, &len, i, j, a);
    }
    tg_tensor *r = w->t[list[0]];
    const labels *lr = &w->lab[list[0]];
    int perm[TG_MAX_DIMS];
    for (int d = 0; d < out->n; d++) perm[d] = position(lr, out->l[d]);
    if (out->n == 0) return tg_reshape(y, r, 0, NULL);
    return tg_permute(y, r, perm);
}

static int check_args(const char *eq, int n, tg_tensor *const *operands)
{
    TG_CHECK(eq != NULL, TG_EINVAL, "einsum: equation must not be NULL");
    TG_CHECK(n >= 1 && n <= TG_OP_MAX_INPUTS, TG_EINVAL, "einsum: n=%d must be in [1, %d]", n,
             TG_OP_MAX_INPUTS);
    TG_CHECK(operands != NULL, TG_EINVAL, "einsum: operands must not be NULL");
    for (int k = 0; k < n; k++) {
        TG_CHECK(operands[k] != NULL, TG_EINVAL, "einsum: operands[%d] must not be NULL", k);
        TG_TRY(tg__check_float_pair("einsum", "operands[0]", operands[0], "another operand",
                                    operands[k]));
    }
    return TG_OK;
}

/* tg_einsum_planned, or with plan NULL tg_einsum (the plan made here). */
static int einsum(tg_tensor **out, const char *eq, int n, tg_tensor *const *operands,
                  const tg_einsum_plan *plan)
{
    TG_CHECK(out != NULL, TG_EINVAL, "einsum: out must not be NULL");
    TG_TRY(check_args(eq, n, operands));
    equation e;
    TG_TRY(parse(eq, n, &e));
    work w = {0};
    labels lo;
    tg_tensor *y = NULL;
    tg__lib_enter();
    int rc = prepare(&w, &lo, &e, operands);
    tg_einsum_plan made;
    if (rc >= 0 && !plan) {
        problem p;
        problem_of(&w, &lo, &p);
        rc = make_plan(&p, TG_EINSUM_AUTO, &made);
        plan = &made;
    }
    if (rc >= 0) rc = run(&y, &w, &lo, plan);
    for (int k = 0; k < w.n; k++) tg_tensor_release(w.t[k]);
    tg__lib_leave();
    if (rc >= 0) *out = y;
    return tg__scope_capture(out, rc);
}

int tg_einsum(tg_tensor **out, const char *equation_, int n, tg_tensor *const *operands)
{
    return einsum(out, equation_, n, operands, NULL);
}

int tg_einsum_planned(tg_tensor **out, const char *equation_, int n,
                      tg_tensor *const *operands, const tg_einsum_plan *plan)
{
    TG_CHECK(plan != NULL, TG_EINVAL, "einsum: plan must not be NULL");
    return einsum(out, equation_, n, operands, plan);
}

int tg_einsum_path(tg_einsum_plan *plan, const char *equation_, int n,
                   tg_tensor *const *operands, tg_einsum_strategy strategy)
{
    TG_CHECK(plan != NULL, TG_EINVAL, "einsum: plan must not be NULL");
    TG_CHECK(strategy >= TG_EINSUM_AUTO && strategy <= TG_EINSUM_LEFT_TO_RIGHT, TG_EINVAL,
             "einsum: strategy %d is not a tg_einsum_strategy", (int)strategy);
    TG_TRY(check_args(equation_, n, operands));
    equation e;
    TG_TRY(parse(equation_, n, &e));
    work w = {0};
    labels lo;
    problem p;
    tg__lib_enter();
    int rc = prepare(&w, &lo, &e, operands);
    for (int k = 0; k < w.n; k++) tg_tensor_release(w.t[k]);
    tg__lib_leave();
    TG_TRY(rc);
    problem_of(&w, &lo, &p);
    return make_plan(&p, strategy, plan);
}
