/* tests/test_nn_copy.c - tg_module_copy (nn.h): a deep copy with the
 * original's structure, values, flags and private state, independent of the
 * original, keeping what the original shares; the vtable's copy_state hook
 * and the refusal of a state it cannot copy. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "nn_fixtures.h"
#include "tapegrad/nn.h"

typedef struct pair_ctx {
    const tg_module *other;
    bool check_no_sharing;
} pair_ctx;

/* Each entry of m has other's name, dtype, values and requires_grad. */
static int same_entry(const char *name, tg_tensor *t, bool is_param, void *user)
{
    const pair_ctx *c = user;
    tg_tensor *o = tg_module_find(c->other, name);
    cr_assert(o != NULL, "copy lacks %s", name);
    th_expect_same_bits(name, o, t, o);
    cr_assert(eq(int, tg_tensor_requires_grad(t), tg_tensor_requires_grad(o)), "%s", name);
    cr_assert(is_param || !tg_tensor_requires_grad(t));
    if (c->check_no_sharing) cr_assert(not(tg_tensor_shares_storage(t, o)), "%s shares", name);
    return TG_OK;
}

static tg_module *copy_of(const tg_module *m)
{
    tg_module *c = NULL;
    cr_assert(eq(int, tg_module_copy(&c, m), TG_OK), "%s", tg_error_message());
    return c;
}

static double first_value(const tg_module *m, const char *name)
{
    return th_at(tg_module_find(m, name), 0);
}

Test(nn_copy, copy_is_deep_and_independent)
{
    tg_rng rng;
    tg_rng_init(&rng, 5);
    tg_module *gen = nf_make_generator(&rng);
    tg_module_train(gen, false);
    tg_module *c = copy_of(gen);
    cr_assert(eq(int, tg_module_state_count(c), tg_module_state_count(gen)));
    pair_ctx ctx = {gen, true};
    cr_assert(eq(int, tg_module_foreach_state(c, same_entry, &ctx), TG_OK));
    cr_assert(c != gen && !tg_module_is_training(c));
    cr_assert(eq(str, (char *)tg_module_type_name(c), "Gen"));
    tg_conv_params a, b;
    cr_assert(eq(int, tg_nn_conv_params(tg_module_child(tg_module_child(gen, "net"), "4"), &a),
                 TG_OK));
    cr_assert(eq(int, tg_nn_conv_params(tg_module_child(tg_module_child(c, "net"), "4"), &b),
                 TG_OK));
    cr_assert(memcmp(&a, &b, sizeof a) == 0);
    /* the same forward */
    tg_tensor *z = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 8}, 9), *y0 = NULL, *y1 = NULL;
    cr_assert(eq(int, tg_module_forward(gen, &y0, z), TG_OK));
    cr_assert(eq(int, tg_module_forward(c, &y1, z), TG_OK));
    th_expect_same_bits("forward", z, y1, y0);
    /* changing one leaves the other */
    int64_t n = 0;
    double *before = nf_snapshot(c, &n);
    cr_assert(eq(int, tg_tensor_fill(tg_module_find(gen, "net.0.weight"), 0.25), TG_OK));
    cr_assert(eq(int, tg_tensor_fill(tg_module_find(gen, "net.2.running_mean"), 3.0), TG_OK));
    nf_expect_snapshot(c, before, n);
    free(before);
    before = nf_snapshot(gen, &n);
    cr_assert(eq(int, tg_tensor_fill(tg_module_find(c, "net.7.bias"), -2.0), TG_OK));
    tg_module_train(c, true);
    nf_expect_snapshot(gen, before, n);
    cr_assert(not(tg_module_is_training(gen)));
    cr_assert(first_value(gen, "net.7.bias") != -2.0);
    free(before);
    th_release_all(3, (tg_tensor *[]){z, y0, y1});
    tg_module_release(c);
    tg_module_release(gen);
}

static const tg_module_vtable tie_vt = {.type_name = "Tie"};

/* A Sequential holding one Linear twice and a module whose two parameters
 * are one tensor: the copy shares them the same way. */
Test(nn_copy, copy_keeps_what_the_original_shares)
{
    tg_rng rng;
    tg_rng_init(&rng, 6);
    tg_module *seq = NULL, *lin = NULL, *tie = NULL;
    tg_tensor *w = th_rand_uniform(TG_F32, 1, (int64_t[]){3}, 4);
    cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
    cr_assert(eq(int, tg_nn_linear_new(&lin, 3, 3, true, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, tg_module_retain(lin)), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, lin), TG_OK));
    cr_assert(eq(int, tg_module_new(&tie, &tie_vt, NULL), TG_OK));
    cr_assert(eq(int, tg_module_add_parameter(tie, "a", tg_tensor_retain(w)), TG_OK));
    cr_assert(eq(int, tg_module_add_parameter(tie, "b", w), TG_OK));
    cr_assert(eq(int, tg_tensor_set_requires_grad(w, false), TG_OK));
    cr_assert(eq(int, tg_module_add_child(seq, "tie", tie), TG_OK));
    tg_module *c = copy_of(seq);
    cr_assert(tg_module_child(c, "0") == tg_module_child(c, "1"));
    cr_assert(tg_module_child(c, "0") != lin);
    cr_assert(tg_module_find(c, "tie.a") == tg_module_find(c, "tie.b"));
    cr_assert(tg_module_find(c, "tie.a") != w);
    cr_assert(not(tg_tensor_requires_grad(tg_module_find(c, "tie.a"))));
    cr_assert(eq(int, tg_module_parameter_count(c), tg_module_parameter_count(seq)));
    pair_ctx ctx = {seq, true};
    cr_assert(eq(int, tg_module_foreach_state(c, same_entry, &ctx), TG_OK));
    tg_module_release(c);
    tg_module_release(seq);
}

/* A Dropout's count of masks drawn is its private state: the copy draws
 * the mask the original draws next. */
Test(nn_copy, copy_continues_a_dropouts_masks)
{
    tg_module *d = NULL;
    cr_assert(eq(int, tg_nn_dropout_new(&d, 0.5, 11), TG_OK));
    tg_tensor *x = th_rand_uniform(TG_F32, 1, (int64_t[]){64}, 3), *y = NULL, *y0 = NULL,
              *y1 = NULL;
    cr_assert(eq(int, tg_module_forward(d, &y, x), TG_OK));
    tg_module *c = copy_of(d);
    cr_assert(eq(int, tg_module_forward(d, &y0, x), TG_OK));
    cr_assert(eq(int, tg_module_forward(c, &y1, x), TG_OK));
    th_expect_same_bits("second mask", x, y1, y0);
    th_release_all(4, (tg_tensor *[]){x, y, y0, y1});
    tg_module_release(c);
    tg_module_release(d);
}

/* A state owning memory: copy_state duplicates it. */
typedef struct named_state {
    char *label;
} named_state;

static int copies = 0;

static void named_release(void *s)
{
    named_state *n = s;
    free(n->label);
    free(n);
}

static int named_copy(void **out, const void *s)
{
    const named_state *from = s;
    named_state *n = malloc(sizeof *n);
    cr_assert(n != NULL);
    n->label = strdup(from->label);
    copies++;
    *out = n;
    return TG_OK;
}

static const tg_module_vtable named_vt = {.type_name = "Named", .release = named_release,
                                          .copy_state = named_copy};
static const tg_module_vtable opaque_vt = {.type_name = "Opaque", .release = free};

static tg_module *named(const char *label)
{
    named_state *s = malloc(sizeof *s);
    cr_assert(s != NULL);
    s->label = strdup(label);
    tg_module *m = NULL;
    cr_assert(eq(int, tg_module_new(&m, &named_vt, s), TG_OK));
    return m;
}

Test(nn_copy, copy_state_hook_and_uncopyable_state)
{
    tg_module *seq = NULL, *opaque = NULL;
    cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
    cr_assert(eq(int, tg_module_add_child(seq, "n", named("gen")), TG_OK));
    tg_module *c = copy_of(seq);
    cr_assert(eq(int, copies, 1));
    const named_state *s0 = tg_module_state(tg_module_child(seq, "n"));
    const named_state *s1 = tg_module_state(tg_module_child(c, "n"));
    cr_assert(s0 != s1 && s0->label != s1->label && strcmp(s1->label, "gen") == 0);
    tg_module_release(c);
    /* private state without copy_state or state_size: refused, naming it */
    cr_assert(eq(int, tg_module_new(&opaque, &opaque_vt, malloc(8)), TG_OK));
    cr_assert(eq(int, tg_module_add_child(tg_module_child(seq, "n"), "inner", opaque), TG_OK));
    tg_module *out = NULL;
    cr_assert(eq(int, tg_module_copy(&out, seq), TG_EUNSUPPORTED));
    cr_assert(out == NULL);
    th_expect_in(tg_error_message(), "'n.inner' (Opaque)");
    cr_assert(eq(int, tg_module_copy(&out, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_module_copy(NULL, seq), TG_EINVAL));
    tg_module_release(seq);
}
