/* tests/test_einsum_path.c - einsum's contraction plans: the optimal plan
 * is the cheapest of every order of pairs (enumerated here, with the cost
 * counted here), every plan gives the values of a sum over every index
 * (written here as loops), gradients of any order follow a plan, a plan
 * gets past an order whose intermediate would need too many dims, and bad
 * plans are refused. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

enum { MAXN = 6, NL = 6 };   /* operands and letters (a..f) of the random problems */

/* A problem: n terms over letters a..f, an output, the letters' extents. */
typedef struct prob {
    int n;
    unsigned term[MAXN], out;   /* letter masks */
    int order[MAXN][NL], len[MAXN], out_order[NL], out_len;
    int64_t ext[NL];
    char eq[96];
} prob;

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static prob random_prob(uint64_t seed)
{
    uint64_t s = seed * 2654435761u + 1;
    prob p = {0};
    p.n = 3 + (int)(next(&s) % (MAXN - 2));
    for (int l = 0; l < NL; l++) p.ext[l] = 1 + (int64_t)(next(&s) % 5);
    unsigned used = 0;
    for (int k = 0; k < p.n; k++) {
        const int nl = 1 + (int)(next(&s) % 3);
        while (p.len[k] < nl) {
            const int l = (int)(next(&s) % NL);
            if (p.term[k] >> l & 1) continue;
            p.term[k] |= 1u << l;
            p.order[k][p.len[k]++] = l;
        }
        used |= p.term[k];
    }
    for (int l = 0; l < NL; l++)
        if (!(used >> l & 1)) p.ext[l] = 1;   /* the loops below run over every letter */
    for (int l = 0; l < NL; l++)
        if ((used >> l & 1) && next(&s) % 3 == 0) {
            p.out |= 1u << l;
            p.out_order[p.out_len++] = l;
        }
    char *w = p.eq;
    for (int k = 0; k < p.n; k++) {
        if (k) *w++ = ',';
        for (int i = 0; i < p.len[k]; i++) *w++ = (char)('a' + p.order[k][i]);
    }
    *w++ = '-', *w++ = '>';
    for (int i = 0; i < p.out_len; i++) *w++ = (char)('a' + p.out_order[i]);
    *w = '\0';
    return p;
}

/* ---- the cost model, counted here ---- */

static double size_of(const prob *p, unsigned m)
{
    double n = 1;
    for (int l = 0; l < NL; l++)
        if (m >> l & 1) n *= (double)p->ext[l];
    return n;
}

/* The operands' letters after each is summed over those no one else has. */
static int start_list(const prob *p, unsigned *list)
{
    for (int k = 0; k < p->n; k++) {
        unsigned others = p->out;
        for (int j = 0; j < p->n; j++)
            if (j != k) others |= p->term[j];
        list[k] = p->term[k] & others;
    }
    return p->n;
}

/* Contracts list[i] with list[j]: their product (the letters still needed)
 * joins the list at the end; returns the product's cost. */
static double step(const prob *p, unsigned *list, int *len, int i, int j)
{
    unsigned rest = p->out;
    for (int k = 0; k < *len; k++)
        if (k != i && k != j) rest |= list[k];
    const unsigned both = list[i] | list[j];
    int k2 = 0;
    for (int k = 0; k < *len; k++)
        if (k != i && k != j) list[k2++] = list[k];
    list[k2] = both & rest;
    *len = k2 + 1;
    return size_of(p, both);
}

/* The cheapest order of pairs, by trying every one. */
static double cheapest(const prob *p, const unsigned *list, int len)
{
    if (len == 1) return 0;
    double best = INFINITY;
    for (int i = 0; i < len; i++)
        for (int j = i + 1; j < len; j++) {
            unsigned l2[MAXN];
            int n2 = len;
            memcpy(l2, list, sizeof l2);
            const double c = step(p, l2, &n2, i, j);
            const double t = c + cheapest(p, l2, n2);
            if (t < best) best = t;
        }
    return best;
}

/* A plan's cost counted here. */
static double cost_of(const prob *p, const tg_einsum_plan *plan)
{
    unsigned list[MAXN];
    int len = start_list(p, list);
    double c = 0;
    for (int s = 0; s < plan->n_steps; s++)
        c += step(p, list, &len, plan->steps[s][0], plan->steps[s][1]);
    cr_assert(eq(int, len, 1), "%s: %d operands left", p->eq, len);
    return c;
}

/* ---- values, by loops over every index ---- */

static void operands_of(const prob *p, uint64_t seed, tg_tensor **ops)
{
    for (int k = 0; k < p->n; k++) {
        int64_t shape[NL];
        for (int i = 0; i < p->len[k]; i++) shape[i] = p->ext[p->order[k][i]];
        uint64_t s = seed * 31 + (uint64_t)k + 1;
        ops[k] = th_rand_tensor(&s, TG_F64, p->len[k], shape, -1, 1);
    }
}

static double at(const tg_tensor *t, const int *order, int len, const int64_t *idx)
{
    int64_t i[NL];
    double v = 0;
    for (int d = 0; d < len; d++) i[d] = idx[order[d]];
    cr_assert(eq(int, tg_tensor_get(t, i, &v), TG_OK));
    return v;
}

/* y[out] = sum over the other letters of the product of the operands. */
static void expect_loop_values(const prob *p, tg_tensor *const *ops, const tg_tensor *y,
                               const char *what)
{
    int64_t n_out = 1, total = 1;
    for (int i = 0; i < p->out_len; i++) n_out *= p->ext[p->out_order[i]];
    for (int l = 0; l < NL; l++) total *= p->ext[l];
    double *want = calloc((size_t)n_out, sizeof *want);
    for (int64_t f = 0; f < total; f++) {
        int64_t idx[NL], r = f;
        for (int l = NL - 1; l >= 0; l--) idx[l] = r % p->ext[l], r /= p->ext[l];
        double v = 1;
        for (int k = 0; k < p->n; k++) v *= at(ops[k], p->order[k], p->len[k], idx);
        int64_t o = 0;
        for (int i = 0; i < p->out_len; i++) o = o * p->ext[p->out_order[i]] + idx[p->out_order[i]];
        want[o] += v;
    }
    cr_assert(eq(i64, tg_tensor_numel(y), n_out), "%s %s", p->eq, what);
    for (int64_t o = 0; o < n_out; o++) {
        double got = 0;
        OK(tg_tensor_get_flat(y, o, &got));
        cr_assert(fabs(got - want[o]) <= 1e-12 * (1 + fabs(want[o])), "%s %s [%lld]: %g, want %g",
                  p->eq, what, (long long)o, got, want[o]);
    }
    free(want);
}

/* ---- tests ---- */

static const tg_einsum_strategy STRATEGIES[4] = {TG_EINSUM_AUTO, TG_EINSUM_OPTIMAL,
                                                 TG_EINSUM_GREEDY, TG_EINSUM_LEFT_TO_RIGHT};

Test(einsum_path, optimal_is_the_cheapest_of_every_order)
{
    int differ = 0;
    for (uint64_t seed = 1; seed <= 150; seed++) {
        const prob p = random_prob(seed);
        tg_tensor *ops[MAXN];
        operands_of(&p, seed, ops);
        unsigned list[MAXN];
        const int len = start_list(&p, list);
        const double best = cheapest(&p, list, len);
        tg_einsum_plan plan[4];
        for (int s = 0; s < 4; s++) {
            OK(tg_einsum_path(&plan[s], p.eq, p.n, ops, STRATEGIES[s]));
            cr_assert(eq(int, plan[s].n_operands, p.n));
            cr_assert(eq(int, plan[s].n_steps, p.n - 1));
            cr_assert(eq(dbl, plan[s].cost, cost_of(&p, &plan[s])), "%s strategy %d", p.eq, s);
        }
        cr_assert(eq(dbl, plan[1].cost, best), "%s: optimal %g, every order's cheapest %g", p.eq,
                  plan[1].cost, best);
        cr_assert(eq(dbl, plan[0].cost, best), "%s: auto", p.eq);
        cr_assert(plan[2].cost >= best, "%s: greedy", p.eq);
        for (int s = 0; s < 4; s++)
            cr_assert(eq(dbl, plan[s].left_to_right_cost, plan[3].cost), "%s", p.eq);
        differ += plan[3].cost > best;
        th_release_all(p.n, ops);
    }
    cr_assert(differ >= 20, "left to right was the cheapest in all but %d problems", differ);
}

Test(einsum_path, every_plan_gives_the_sums_over_every_index)
{
    for (uint64_t seed = 1; seed <= 40; seed++) {
        const prob p = random_prob(seed);
        tg_tensor *ops[MAXN], *y = NULL;
        operands_of(&p, seed, ops);
        for (int s = 0; s < 4; s++) {
            tg_einsum_plan plan;
            OK(tg_einsum_path(&plan, p.eq, p.n, ops, STRATEGIES[s]));
            OK(tg_einsum_planned(&y, p.eq, p.n, ops, &plan));
            expect_loop_values(&p, ops, y, "planned");
            tg_tensor_release(y);
        }
        OK(tg_einsum(&y, p.eq, p.n, ops));
        expect_loop_values(&p, ops, y, "tg_einsum");
        tg_tensor_release(y);
        th_release_all(p.n, ops);
    }
}

/* "ab,bc,cd->ad" with a = c = 40, b = d = 2: (A B) C costs 40*2*40 +
 * 40*40*2 = 6400, A (B C) costs 2*40*2 + 40*2*2 = 320. */
Test(einsum_path, a_chain_is_contracted_from_its_cheap_end)
{
    uint64_t s = 9;
    tg_tensor *a = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){40, 2}, -1, 1);
    tg_tensor *b = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){2, 40}, -1, 1);
    tg_tensor *c = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){40, 2}, -1, 1);
    tg_tensor *ops[3] = {a, b, c};
    tg_einsum_plan plan;
    OK(tg_einsum_path(&plan, "ab,bc,cd->ad", 3, ops, TG_EINSUM_AUTO));
    cr_assert(eq(int, plan.n_steps, 2));
    cr_assert(eq(int, plan.steps[0][0], 1));
    cr_assert(eq(int, plan.steps[0][1], 2));
    cr_assert(eq(int, plan.steps[1][0], 0));
    cr_assert(eq(int, plan.steps[1][1], 1));
    cr_assert(eq(dbl, plan.cost, 2 * 40 * 2 + 40 * 2 * 2));
    cr_assert(eq(dbl, plan.left_to_right_cost, 40 * 2 * 40 + 40 * 40 * 2));
    cr_assert(eq(dbl, plan.largest, 40 * 2));
    tg_einsum_plan l2r, greedy;
    OK(tg_einsum_path(&l2r, "ab,bc,cd->ad", 3, ops, TG_EINSUM_LEFT_TO_RIGHT));
    cr_assert(eq(dbl, l2r.largest, 40 * 40));
    /* B C is also the cheapest first pair (160 against 3200 and 6400). */
    OK(tg_einsum_path(&greedy, "ab,bc,cd->ad", 3, ops, TG_EINSUM_GREEDY));
    cr_assert(memcmp(greedy.steps, plan.steps, sizeof(int) * 4) == 0);
    /* The same values as A @ B @ C in either order. */
    tg_tensor *ab = NULL, *abc = NULL, *y = NULL;
    OK(tg_matmul(&ab, a, b));
    OK(tg_matmul(&abc, ab, c));
    OK(tg_einsum(&y, "ab,bc,cd->ad", 3, ops));
    th_expect_close("chain", y, abc, 1e-12);
    th_release_all(6, (tg_tensor *[]){a, b, c, ab, abc, y});
}

static int planned_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const tg_einsum_plan *plan = user;
    return tg_einsum_planned(out, "ab,bc,cd,d->a", n, in, plan);
}

Test(einsum_path, gradients_of_any_order_follow_the_plan)
{
    tg_tensor *in[4];
    const int64_t shapes[4][2] = {{3, 2}, {2, 4}, {4, 3}, {3}};
    for (int k = 0; k < 4; k++) {
        uint64_t s = 40 + (uint64_t)k;
        in[k] = th_rand_tensor(&s, TG_F64, k == 3 ? 1 : 2, shapes[k], -2, 2);
        OK(tg_tensor_set_requires_grad(in[k], true));
    }
    tg_einsum_plan plans[2];
    OK(tg_einsum_path(&plans[0], "ab,bc,cd,d->a", 4, in, TG_EINSUM_OPTIMAL));
    /* By hand: (C d), then A B, then the two. */
    plans[1] = plans[0];
    plans[1].steps[0][0] = 2, plans[1].steps[0][1] = 3;
    plans[1].steps[1][0] = 0, plans[1].steps[1][1] = 1;
    plans[1].steps[2][0] = 1, plans[1].steps[2][1] = 0;
    for (int p = 0; p < 2; p++) {
        tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
        cr_assert(eq(int, tg_gradcheck(planned_fn, &plans[p], 4, in, &o), TG_OK), "plan %d: %s",
                  p, tg_error_message());
        cr_assert(eq(int, tg_gradgradcheck(planned_fn, &plans[p], 4, in, &o), TG_OK),
                  "plan %d: %s", p, tg_error_message());
    }
    th_release_all(4, in);
}

/* Left to right, A B has all ten letters; A C and B D are scalars. */
Test(einsum_path, a_plan_gets_past_an_order_with_too_many_dims)
{
    const int64_t sa[5] = {2, 1, 2, 1, 2}, sb[5] = {1, 2, 1, 2, 2};
    uint64_t s = 5;
    tg_tensor *a = th_rand_tensor(&s, TG_F64, 5, sa, -1, 1);
    tg_tensor *b = th_rand_tensor(&s, TG_F64, 5, sb, -1, 1);
    tg_tensor *c = th_rand_tensor(&s, TG_F64, 5, sa, -1, 1);
    tg_tensor *d = th_rand_tensor(&s, TG_F64, 5, sb, -1, 1);
    tg_tensor *ops[4] = {a, b, c, d}, *y = NULL, *ac = NULL, *bd = NULL, *want = NULL;
    const char *eq = "abcde,fghij,abcde,fghij->";
    tg_einsum_plan plan;
    OK(tg_einsum_path(&plan, eq, 4, ops, TG_EINSUM_AUTO));
    cr_assert(isinf(plan.left_to_right_cost));
    OK(tg_einsum(&y, eq, 4, ops));
    OK(tg_einsum(&ac, "abcde,abcde->", 2, (tg_tensor *[]){a, c}));
    OK(tg_einsum(&bd, "abcde,abcde->", 2, (tg_tensor *[]){b, d}));
    OK(tg_mul(&want, ac, bd));
    th_expect_close("four operands", y, want, 1e-12);
    tg_einsum_plan l2r;
    cr_assert(eq(int, tg_einsum_path(&l2r, eq, 4, ops, TG_EINSUM_LEFT_TO_RIGHT),
                 TG_EUNSUPPORTED));
    cr_assert(strstr(tg_error_message(), "10 dims, more than 8") != NULL, "%s",
              tg_error_message());
    th_release_all(8, (tg_tensor *[]){a, b, c, d, y, ac, bd, want});
}

/* A repeat of a letter is a diagonal of its operand, not one more
 * operand: eight traces are eight operands, which AUTO searches
 * exhaustively (OPTIMAL's plan). */
Test(einsum_path, repeated_letters_are_diagonals_of_their_operand)
{
    tg_tensor *m[8], *y = NULL;
    double want = 1;
    for (int k = 0; k < 8; k++) {
        uint64_t s = 70 + (uint64_t)k;
        m[k] = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 3}, 0.5, 1.5);
        double tr = 0, v = 0;
        for (int64_t i = 0; i < 3; i++) {
            OK(tg_tensor_get(m[k], (int64_t[]){i, i}, &v));
            tr += v;
        }
        want *= tr;
    }
    const char *eq8 = "aa,bb,cc,dd,ee,ff,gg,hh->";
    tg_einsum_plan plan, optimal;
    OK(tg_einsum_path(&plan, "aa,bb->", 2, m, TG_EINSUM_AUTO));
    cr_assert(eq(int, plan.n_operands, 2));
    OK(tg_einsum_path(&plan, eq8, 8, m, TG_EINSUM_AUTO));
    OK(tg_einsum_path(&optimal, eq8, 8, m, TG_EINSUM_OPTIMAL));
    cr_assert(eq(int, plan.n_operands, 8));
    cr_assert(memcmp(plan.steps, optimal.steps, sizeof(int) * 2 * 7) == 0);
    OK(tg_einsum(&y, eq8, 8, m));
    cr_assert(fabs(tg_tensor_item(y) - want) <= 1e-12 * fabs(want), "%g vs %g",
              tg_tensor_item(y), want);
    tg_tensor_release(y);
    th_release_all(8, m);
}

/* A refused call: the status, words of the message, *out and *plan as
 * they were, no tensor memory left behind. */
static void expect_refused(int rc, int status, const char *words, const tg_tensor *y,
                           const tg_einsum_plan *plan, int64_t before)
{
    int64_t after;
    tg_memory_stats(&after, NULL);
    th_expect_refused(rc, status, words, y);
    cr_assert(eq(i64, after, before));
    if (!plan) return;
    tg_einsum_plan fill;
    memset(&fill, 0x5a, sizeof fill);
    cr_assert(memcmp(plan, &fill, sizeof fill) == 0, "%s: the plan was written", words);
}

Test(einsum_path, bad_plans_are_refused)
{
    uint64_t s = 3;
    tg_tensor *a = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){2, 3}, -1, 1);
    tg_tensor *b = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, -1, 1);
    tg_tensor *c = th_rand_tensor(&s, TG_F64, 1, (int64_t[]){4}, -1, 1);
    tg_tensor *ops[3] = {a, b, c}, *y = NULL;
    tg_einsum_plan good, bad, out;
    int64_t before;
    OK(tg_einsum_path(&good, "ab,bc,c->a", 3, ops, TG_EINSUM_AUTO));
    tg_memory_stats(&before, NULL);
    bad = good;
    bad.n_steps = 1;
    expect_refused(tg_einsum_planned(&y, "ab,bc,c->a", 3, ops, &bad), TG_EINVAL,
                   "the plan has 1 steps but 3 operands", y, NULL, before);
    bad = good;
    bad.steps[1][1] = 2;
    expect_refused(tg_einsum_planned(&y, "ab,bc,c->a", 3, ops, &bad), TG_EINVAL,
                   "step 1 of the plan, (0, 2)", y, NULL, before);
    bad = good;
    bad.steps[0][0] = bad.steps[0][1];
    expect_refused(tg_einsum_planned(&y, "ab,bc,c->a", 3, ops, &bad), TG_EINVAL,
                   "must name two different operands", y, NULL, before);
    bad = good;
    bad.steps[0][0] = -1;
    expect_refused(tg_einsum_planned(&y, "ab,bc,c->a", 3, ops, &bad), TG_EINVAL,
                   "step 0 of the plan", y, NULL, before);
    expect_refused(tg_einsum_planned(&y, "ab,bc->ac", 2, ops, &good), TG_EINVAL,
                   "the plan is for 3 operands but the equation has 2", y, NULL, before);
    expect_refused(tg_einsum_planned(&y, "ab,bc,c->a", 3, ops, NULL), TG_EINVAL,
                   "plan must not be NULL", y, NULL, before);
    memset(&out, 0x5a, sizeof out);
    expect_refused(tg_einsum_path(&out, "ab,bc,c->a", 3, ops, (tg_einsum_strategy)7), TG_EINVAL,
                   "strategy 7", NULL, &out, before);
    expect_refused(tg_einsum_path(&out, "ab,ac,c->a", 3, ops, TG_EINSUM_AUTO), TG_ESHAPE,
                   "letter 'a' has extent", NULL, &out, before);
    expect_refused(tg_einsum_path(&out, "ab,bc->a", 3, ops, TG_EINSUM_AUTO), TG_EINVAL,
                   "2 terms but 3 operands", NULL, &out, before);
    expect_refused(tg_einsum_path(NULL, "ab,bc,c->a", 3, ops, TG_EINSUM_AUTO), TG_EINVAL,
                   "plan must not be NULL", NULL, NULL, before);
    th_release_all(3, ops);
}
