/* The page the browser test drives, and what tg_backward computes for it.
 *
 *   viz_make_page DIR   writes DIR/page.html (tg_viz_backward_html) and
 *                       DIR/expected.json: the gradient arriving at each
 *                       named intermediate (a hook) and each leaf's .grad
 *                       from a plain tg_backward over the same graph.
 *
 * The network has a constant input, a leaf used by two ops (its gradient is
 * a sum), a scalar operand and a conv_transpose:
 *   loss = mean(convT(reshape(tanh(linear(x, W, b))), w2, b2)) + 0.1 sum(W * W)
 * Exit status 0; 77 (skip) when this build has no Graphviz; 1 on failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tapegrad/tapegrad.h"

#define CHECK(call)                                                           \
    do {                                                                      \
        int rc_ = (call);                                                     \
        if (rc_ < 0) {                                                        \
            fprintf(stderr, "%s: %s\n", #call, tg_error_message());           \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

enum { N_ACTS = 9, N_LEAVES = 4 };

static void write_values(FILE *f, const tg_tensor *t)
{
    fputc('[', f);
    for (int64_t i = 0; i < tg_tensor_numel(t); i++) {
        double v;
        CHECK(tg_tensor_get_flat(t, i, &v));
        fprintf(f, "%s%.17g", i ? "," : "", v);
    }
    fputc(']', f);
}

/* A hook: writes "name":[values] of the gradient it sees (first_node: no
 * comma before it). */
typedef struct seen {
    FILE *f;
    const char *name;
} seen;

static bool first_node = true;

static int record_node(tg_tensor **grad, void *user)
{
    seen *s = user;
    fprintf(s->f, "%s\"%s\":", first_node ? "" : ",", s->name);
    write_values(s->f, *grad);
    first_node = false;
    return TG_OK;
}

static tg_tensor *leaf(tg_rng *rng, const char *name, int ndim, const int64_t *shape, bool rg)
{
    tg_tensor *t;
    CHECK(tg_tensor_zeros(&t, TG_F64, ndim, shape));
    CHECK(tg_tensor_rand_normal(t, rng, 0.0, 0.5));
    tg_tensor_set_name(t, name);
    CHECK(tg_tensor_set_requires_grad(t, rg));
    return t;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: viz_make_page DIR\n");
        return 2;
    }
    if (!tg_viz_available()) {
        printf("SKIP: this build has no Graphviz library (libgraphviz-dev)\n");
        return 77;
    }
    tg_rng rng;
    tg_rng_init(&rng, 11);
    tg_tensor *x = leaf(&rng, "x", 2, (int64_t[]){2, 3}, false);
    tg_tensor *lv[N_LEAVES] = {leaf(&rng, "W", 2, (int64_t[]){4, 3}, true),
                               leaf(&rng, "b", 1, (int64_t[]){4}, true),
                               leaf(&rng, "w2", 3, (int64_t[]){1, 2, 3}, true),
                               leaf(&rng, "b2", 1, (int64_t[]){2}, true)};
    static const char *names[N_ACTS] = {"h", "a", "r", "y", "m", "WW", "sWW", "pen", "loss"};
    tg_tensor *t[N_ACTS] = {0};
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = 2;
    CHECK(tg_linear(&t[0], x, lv[0], lv[1]));
    CHECK(tg_tanh(&t[1], t[0]));
    CHECK(tg_reshape(&t[2], t[1], 3, (int64_t[]){2, 1, 4}));
    CHECK(tg_conv_transpose(&t[3], t[2], lv[2], lv[3], &p));
    CHECK(tg_mean(&t[4], t[3]));
    CHECK(tg_mul(&t[5], lv[0], lv[0]));
    CHECK(tg_sum(&t[6], t[5]));
    CHECK(tg_mul_scalar(&t[7], t[6], 0.1));
    CHECK(tg_add(&t[8], t[4], t[7]));
    for (int i = 0; i < N_ACTS; i++) tg_tensor_set_name(t[i], names[i]);

    char path[4096];
    snprintf(path, sizeof path, "%s/page.html", argv[1]);
    FILE *f = fopen(path, "w");
    if (!f) return perror(path), 1;
    tg_viz_opts o = TG_VIZ_OPTS_INIT;
    o.title = "browser test";
    o.backward.retain_graph = true;   /* backward runs again below */
    CHECK(tg_viz_backward_html(f, t[8], NULL, &o));
    if (fclose(f) != 0) return perror(path), 1;

    /* The same graph through tg_backward, from zero gradients. */
    for (int i = 0; i < N_LEAVES; i++) CHECK(tg_tensor_set_grad(lv[i], NULL));
    snprintf(path, sizeof path, "%s/expected.json", argv[1]);
    f = fopen(path, "w");
    if (!f) return perror(path), 1;
    fprintf(f, "{\"nodes\":{");
    seen s[N_ACTS];
    for (int i = 0; i < N_ACTS; i++) {
        s[i] = (seen){.f = f, .name = names[i]};
        CHECK(tg_tensor_register_hook(t[i], record_node, &s[i]));
    }
    CHECK(tg_backward(t[8], NULL, NULL));
    fprintf(f, "},\"leaves\":{");
    for (int i = 0; i < N_LEAVES; i++) {
        fprintf(f, "%s\"%s\":", i ? "," : "", tg_tensor_name(lv[i]));
        write_values(f, tg_tensor_grad(lv[i]));
    }
    fprintf(f, "}}\n");
    if (fclose(f) != 0) return perror(path), 1;
    for (int i = 0; i < N_ACTS; i++) tg_tensor_release(t[i]);
    for (int i = 0; i < N_LEAVES; i++) tg_tensor_release(lv[i]);
    tg_tensor_release(x);
    return 0;
}
