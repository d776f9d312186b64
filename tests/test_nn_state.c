/* tests/test_nn_state.c - modules' state dicts: save and load round trips,
 * load errors that change nothing, files from older PyTorch without
 * num_batches_tracked, shared parameters, the walk over names, and
 * conversion of a whole module to another dtype. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "nn_fixtures.h"
#include "tapegrad/autograd.h"
#include "tapegrad/nn.h"
#include "tapegrad/ops.h"
#include "tapegrad/optim.h"
#include "tapegrad/safetensors.h"

Test(nn_state, save_load_round_trip)
{
    tg_rng r1, r2;
    tg_rng_init(&r1, 1);
    tg_rng_init(&r2, 2);
    tg_module *a = nf_make_generator(&r1), *b = nf_make_generator(&r2);
    tg_tensor *nbt = tg_module_find(a, "net.2.num_batches_tracked");
    tg_tensor_set_flat(nbt, 0, 5);
    tg_tensor_fill(tg_module_find(a, "net.5.running_var"), 2.5);
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_module_state_dict_save(a, f, "gen"), TG_OK));
    char path[] = "/tmp/tg_nn_rtXXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert(eq(int, tg_safetensors_save(f, path), TG_OK), "%s", tg_error_message());
    tg_st_free(f);
    f = NULL;
    cr_assert(eq(int, tg_safetensors_load(&f, path), TG_OK));
    remove(path);
    cr_assert(eq(int, tg_st_count(f), tg_module_state_count(a)));
    cr_assert(eq(int, tg_tensor_dtype(tg_st_get(f, "gen.net.2.num_batches_tracked")), TG_I64));
    cr_assert(eq(int, tg_tensor_ndim(tg_st_get(f, "gen.net.2.num_batches_tracked")), 0));
    cr_assert(eq(int, tg_module_load_state_dict(b, f, "gen.", true), TG_OK), "%s",
              tg_error_message());
    int64_t na, nb;
    double *va = nf_snapshot(a, &na), *vb = nf_snapshot(b, &nb);
    cr_assert(eq(i64, na, nb));
    for (int64_t i = 0; i < na; i++) cr_assert(va[i] == vb[i], "value %lld", (long long)i);
    free(va);
    free(vb);
    tg_st_free(f);
    tg_module_release(a);
    tg_module_release(b);
}

/* A file holding b's state (which differs from a's) with one entry altered:
 * loading it into a must fail and leave a as it was. */
/* m's state dict in a new file, without the entry named skip. */
static tg_st_file *state_without(const tg_module *m, const char *skip)
{
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    for (int i = 0; i < tg_module_state_count(m); i++) {
        char name[TG_MODULE_NAME_MAX];
        tg_tensor *t;
        tg_module_state_at(m, i, name, sizeof name, &t, NULL);
        if (strcmp(name, skip) != 0) cr_assert(eq(int, tg_st_set(f, name, t), TG_OK));
    }
    return f;
}

static void expect_load_fails(tg_module *a, tg_st_file *f, bool strict, int want)
{
    int64_t n;
    double *before = nf_snapshot(a, &n);
    cr_assert(eq(int, tg_module_load_state_dict(a, f, NULL, strict), want), "%s",
              tg_error_message());
    cr_assert(strlen(tg_error_message()) > 0);
    nf_expect_snapshot(a, before, n);
    free(before);
}

Test(nn_state, load_errors_change_nothing)
{
    tg_rng r1, r2;
    tg_rng_init(&r1, 1);
    tg_rng_init(&r2, 2);
    tg_module *a = nf_make_generator(&r1), *b = nf_make_generator(&r2);
    tg_tensor *bad = NULL;
    tg_st_file *f = NULL;
    /* missing key */
    f = state_without(b, "net.7.bias");
    expect_load_fails(a, f, true, TG_ENOTFOUND);
    cr_assert(strstr(tg_error_message(), "net.7.bias") != NULL, "%s", tg_error_message());
    /* non-strict: the rest loads */
    cr_assert(eq(int, tg_module_load_state_dict(a, f, NULL, false), TG_OK));
    th_expect_near("w", tg_module_find(a, "net.0.weight"), tg_module_find(b, "net.0.weight"), 0, 0);
    tg_st_free(f);
    tg_module_release(a);
    tg_rng_init(&r1, 1);
    a = nf_make_generator(&r1);
    /* wrong shape */
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_module_state_dict_save(b, f, NULL), TG_OK));
    int64_t s[1] = {5};
    tg_tensor_zeros(&bad, TG_F32, 1, s);
    tg_st_set(f, "net.5.bias", bad);
    expect_load_fails(a, f, true, TG_ESHAPE);
    cr_assert(strstr(tg_error_message(), "net.5.bias") != NULL, "%s", tg_error_message());
    tg_tensor_release(bad);
    /* wrong dtype (f64 into f32 is rejected, not converted) */
    s[0] = 4;
    tg_tensor_zeros(&bad, TG_F64, 1, s);
    tg_st_set(f, "net.5.bias", bad);
    expect_load_fails(a, f, true, TG_EDTYPE);
    th_expect_in(tg_error_message(), "use tg_module_to_dtype");
    tg_tensor_release(bad);
    tg_st_set(f, "net.5.bias", tg_module_find(b, "net.5.bias"));
    /* an f32 count for the i64 one: converting the module would not help */
    tg_tensor_zeros(&bad, TG_F32, 0, NULL);
    tg_st_set(f, "net.5.num_batches_tracked", bad);
    expect_load_fails(a, f, true, TG_EDTYPE);
    th_expect_in(tg_error_message(),
                 "'net.5.num_batches_tracked' has dtype f32 in the file but i64");
    cr_assert(strstr(tg_error_message(), "tg_module_to_dtype") == NULL, "%s", tg_error_message());
    tg_tensor_release(bad);
    tg_st_set(f, "net.5.num_batches_tracked", tg_module_find(b, "net.5.num_batches_tracked"));
    /* unexpected key: strict fails, non-strict ignores it */
    tg_tensor_zeros(&bad, TG_F32, 1, s);
    tg_st_set(f, "net.9.weight", bad);
    tg_tensor_release(bad);
    expect_load_fails(a, f, true, TG_EINVAL);
    cr_assert(strstr(tg_error_message(), "net.9.weight") != NULL, "%s", tg_error_message());
    cr_assert(eq(int, tg_module_load_state_dict(a, f, NULL, false), TG_OK));
    tg_st_free(f);
    tg_module_release(a);
    tg_module_release(b);
}

/* A file without BatchNorm's num_batches_tracked (what PyTorch before 0.4.1
 * saved, e.g. torchvision's first ResNet weights) loads as in PyTorch, where
 * BatchNorm treats a state dict without version metadata (as every
 * safetensors file is) as holding num_batches_tracked = 0: strict or not, the
 * rest loads and the count becomes 0.  Another module's buffer of that name
 * gets no such allowance. */
Test(nn_state, load_without_num_batches_tracked_sets_it_to_zero)
{
    tg_rng r1, r2;
    tg_rng_init(&r1, 1);
    tg_rng_init(&r2, 2);
    for (int strict = 0; strict < 2; strict++) {
        tg_module *a = nf_make_generator(&r1), *b = nf_make_generator(&r2);
        tg_tensor_set_flat(tg_module_find(a, "net.2.num_batches_tracked"), 0, 7);
        tg_tensor_set_flat(tg_module_find(a, "net.5.num_batches_tracked"), 0, 7);
        tg_tensor_set_flat(tg_module_find(b, "net.5.num_batches_tracked"), 0, 3);
        tg_st_file *f = state_without(b, "net.2.num_batches_tracked");
        cr_assert(eq(int, tg_module_load_state_dict(a, f, NULL, strict), TG_OK), "%s",
                  tg_error_message());
        double v;
        tg_tensor_get_flat(tg_module_find(a, "net.2.num_batches_tracked"), 0, &v);
        cr_assert(eq(dbl, v, 0.0), "strict=%d: the absent count is %g, not 0", strict, v);
        tg_tensor_get_flat(tg_module_find(a, "net.5.num_batches_tracked"), 0, &v);
        cr_assert(eq(dbl, v, 3.0));
        th_expect_near("running_var", tg_module_find(a, "net.2.running_var"),
                       tg_module_find(b, "net.2.running_var"), 0, 0);
        tg_st_free(f);
        tg_module_release(a);
        tg_module_release(b);
    }
    /* a custom module's buffer named num_batches_tracked is an ordinary key */
    tg_module *box = NULL;
    tg_tensor *t = NULL;
    static const tg_module_vtable counter_vt = {.type_name = "Counter"};
    cr_assert(eq(int, tg_module_new(&box, &counter_vt, NULL), TG_OK));
    tg_tensor_zeros(&t, TG_I64, 0, NULL);
    cr_assert(eq(int, tg_module_add_buffer(box, "num_batches_tracked", t), TG_OK));
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_module_load_state_dict(box, f, NULL, true), TG_ENOTFOUND));
    tg_st_free(f);
    tg_module_release(box);
}

/* What load_state_dict(strict=False) returns in PyTorch: the module's keys
 * the file lacks and the file's keys the module lacks, in order, the prefix
 * applied; an absent BatchNorm count (loaded as 0) is not missing. */
typedef struct {
    char keys[8][64];
    bool missing[8];
    int n;
} key_list;

static void collect_key(const char *key, bool missing, void *user)
{
    key_list *l = user;
    cr_assert(l->n < 8);
    snprintf(l->keys[l->n], sizeof l->keys[0], "%s", key);
    l->missing[l->n++] = missing;
}

Test(nn_state, compare_lists_missing_and_unexpected_keys)
{
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *g = nf_make_generator(&rng);
    tg_st_file *f = NULL, *all = NULL;
    cr_assert(eq(int, tg_st_new(&all), TG_OK));
    cr_assert(eq(int, tg_module_state_dict_save(g, all, "gen"), TG_OK));
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    for (int i = 0; i < tg_st_count(all); i++) {   /* all but two entries */
        const char *name;
        tg_tensor *t;
        tg_st_at(all, i, &name, &t);
        if (strcmp(name, "gen.net.0.weight") && strcmp(name, "gen.net.2.num_batches_tracked"))
            cr_assert(eq(int, tg_st_set(f, name, t), TG_OK));
    }
    tg_tensor *x = tg_st_get(all, "gen.net.0.weight");
    cr_assert(eq(int, tg_st_set(f, "gen.net.9.weight", x), TG_OK));
    cr_assert(eq(int, tg_st_set(f, "opt.step", x), TG_OK));   /* outside the prefix */
    cr_assert(eq(int, tg_st_set(f, "gen.extra", x), TG_OK));
    key_list l = {.n = 0};
    int nm = -1, nu = -1;
    cr_assert(eq(int, tg_module_state_dict_compare(g, f, "gen", collect_key, &l, &nm, &nu),
                 TG_OK));
    cr_assert(eq(int, nm, 1));
    cr_assert(eq(int, nu, 2));
    cr_assert(eq(int, l.n, 3));
    cr_assert(eq(str, l.keys[0], "gen.net.0.weight"));
    cr_assert(l.missing[0]);
    cr_assert(eq(str, l.keys[1], "gen.net.9.weight"));
    cr_assert(eq(str, l.keys[2], "gen.extra"));
    cr_assert(eq(int, l.missing[1] || l.missing[2], 0));
    /* a wrong prefix: every key missing, nothing of f under it */
    cr_assert(eq(int, tg_module_state_dict_compare(g, f, "model", NULL, NULL, &nm, &nu), TG_OK));
    cr_assert(eq(int, nm, tg_module_state_count(g) - 2));   /* the two counts load as 0 */
    cr_assert(eq(int, nu, 0));
    /* the file against itself: nothing left out */
    cr_assert(eq(int, tg_module_state_dict_compare(g, all, "gen.", NULL, NULL, &nm, &nu), TG_OK));
    cr_assert(eq(int, nm + nu, 0));
    cr_assert(eq(int, tg_module_state_dict_compare(NULL, f, NULL, NULL, NULL, NULL, NULL),
                 TG_EINVAL));
    tg_st_free(f);
    tg_st_free(all);
    tg_module_release(g);
}

/* Sequential(lin, lin, box) where box's "weight" is lin's weight: five state
 * entries, as PyTorch's state_dict, but two parameters, as its parameters()
 * (each tensor once, at its first name), which an optimizer accepts. */
static tg_module *make_tied(void)
{
    static const tg_module_vtable tie_vt = {.type_name = "Tie"};
    tg_rng rng;
    tg_rng_init(&rng, 5);
    tg_module *seq = NULL, *lin = NULL, *box = NULL;
    cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
    cr_assert(eq(int, tg_nn_linear_new(&lin, 3, 2, true, &rng), TG_OK));
    cr_assert(eq(int, tg_module_new(&box, &tie_vt, NULL), TG_OK));
    tg_tensor *w = tg_module_find(lin, "weight");
    cr_assert(eq(int, tg_module_add_parameter(box, "weight", tg_tensor_retain(w)), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, tg_module_retain(lin)), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, lin), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, box), TG_OK));
    return seq;
}

Test(nn_state, shared_parameters_are_listed_once)
{
    tg_module *seq = make_tied();
    cr_assert(eq(int, tg_module_state_count(seq), 5));
    tg_tensor **ps = NULL;
    int n = 0;
    cr_assert(eq(int, tg_module_parameters(seq, &ps, &n), TG_OK));
    cr_assert(eq(int, n, 2), "%d parameters; the two distinct tensors expected", n);
    cr_assert(eq(int, tg_module_parameter_count(seq), 2));
    cr_assert(ps[0] == tg_module_find(seq, "0.weight") && ps[1] == tg_module_find(seq, "0.bias"));
    tg_optimizer *opt = NULL;
    tg_sgd_opts o = TG_SGD_OPTS_INIT;
    cr_assert(eq(int, tg_sgd_new(&opt, n, ps, &o), TG_OK), "%s", tg_error_message());
    tg_optimizer_free(opt);
    free(ps);
    tg_module_release(seq);
}

/* named_parameters lists what parameters lists, each tensor at its first
 * name (tied weights once), with the names in one block freed with them. */
Test(nn_state, named_parameters_give_each_tensor_its_first_name)
{
    tg_module *seq = make_tied();
    char **names = NULL;
    tg_tensor **ps = NULL;
    int n = -1;
    cr_assert(eq(int, tg_module_named_parameters(seq, &names, &ps, &n), TG_OK));
    cr_assert(eq(int, n, 2));
    cr_assert(strncmp(names[0], "0.weight", 9) == 0 && strncmp(names[1], "0.bias", 7) == 0,
              "names %s, %s", names[0], names[1]);
    cr_assert(ps[0] == tg_module_find(seq, "0.weight") && ps[1] == tg_module_find(seq, "0.bias"));
    free(names);
    free(ps);
    tg_module_release(seq);

    tg_rng rng;
    tg_rng_init(&rng, 3);
    tg_module *gen = nf_make_generator(&rng);
    tg_tensor **plain = NULL;
    int np = 0;
    cr_assert(eq(int, tg_module_parameters(gen, &plain, &np), TG_OK));
    cr_assert(eq(int, tg_module_named_parameters(gen, &names, &ps, &n), TG_OK));
    cr_assert(eq(int, n, np));
    for (int i = 0, k = 0; i < tg_module_state_count(gen); i++) {
        char name[TG_MODULE_NAME_MAX];
        tg_tensor *t = NULL;
        bool is_param = false;
        cr_assert(eq(int, tg_module_state_at(gen, i, name, sizeof name, &t, &is_param), TG_OK));
        if (!is_param) continue;
        cr_assert(strncmp(names[k], name, sizeof name) == 0, "%d: %s, %s", k, names[k], name);
        cr_assert(ps[k] == t && plain[k] == t, "entry %d", k);
        k++;
    }
    free(names);
    free(ps);
    free(plain);
    tg_module_release(gen);

    tg_module *empty = NULL;
    cr_assert(eq(int, tg_nn_sequential_new(&empty), TG_OK));
    names = (char **)&n;
    ps = (tg_tensor **)&n;
    cr_assert(eq(int, tg_module_named_parameters(empty, &names, &ps, &n), TG_OK));
    cr_assert(names == NULL && ps == NULL && n == 0);
    cr_assert(eq(int, tg_module_named_parameters(NULL, &names, &ps, &n), TG_EINVAL));
    th_expect_in(tg_error_message(), "m, names, params and n must not be NULL");
    cr_assert(eq(int, tg_module_named_parameters(empty, NULL, &ps, &n), TG_EINVAL));
    cr_assert(eq(int, tg_module_named_parameters(empty, &names, NULL, &n), TG_EINVAL));
    cr_assert(eq(int, tg_module_named_parameters(empty, &names, &ps, NULL), TG_EINVAL));
    tg_module_release(empty);
}

/* torch's Module.to(dtype) converts each parameter once and keeps it shared;
 * here too: every name of a shared tensor gets the same converted tensor. */
Test(nn_state, to_dtype_keeps_shared_parameters_shared)
{
    tg_module *seq = make_tied();
    double w0[6];
    cr_assert(eq(int, tg_tensor_to_doubles(tg_module_find(seq, "0.weight"), w0, 6), TG_OK));
    cr_assert(eq(int, tg_module_to_dtype(seq, TG_F64), TG_OK), "%s", tg_error_message());
    tg_tensor *w = tg_module_find(seq, "0.weight"), *b = tg_module_find(seq, "0.bias");
    cr_assert(eq(int, tg_tensor_dtype(w), TG_F64));
    cr_assert(eq(int, tg_tensor_dtype(b), TG_F64));
    cr_assert(tg_module_find(seq, "1.weight") == w && tg_module_find(seq, "2.weight") == w,
              "the tie is broken");
    cr_assert(tg_module_find(seq, "1.bias") == b);
    cr_assert(tg_tensor_requires_grad(w) && tg_tensor_is_leaf(w));
    for (int i = 0; i < 6; i++) {
        double v;
        tg_tensor_get_flat(w, i, &v);
        cr_assert(eq(dbl, v, w0[i]));
    }
    cr_assert(eq(int, tg_module_parameter_count(seq), 2));
    tg_module_release(seq);
}

static const tg_module_vtable box_vt = {.type_name = "Box"};

Test(nn_state, state_walk_and_lookup)
{
    tg_rng rng;
    tg_rng_init(&rng, 3);
    tg_module *gen = nf_make_generator(&rng);
    cr_assert(eq(int, tg_module_state_count(gen), 16));
    tg_tensor **ps = NULL;
    int n = 0;
    cr_assert(eq(int, tg_module_parameters(gen, &ps, &n), TG_OK));
    cr_assert(eq(int, n, 10));
    cr_assert(ps[0] == tg_module_find(gen, "net.0.weight"));
    cr_assert(ps[9] == tg_module_find(gen, "net.7.bias"));
    for (int i = 0; i < n; i++) cr_assert(tg_tensor_requires_grad(ps[i]));
    free(ps);
    cr_assert(tg_module_find(gen, "net.2.running_mean") != NULL);
    cr_assert(tg_module_find(gen, "net.3.weight") == NULL);
    cr_assert(tg_module_find(gen, "nope.0.weight") == NULL);
    char small[4];
    cr_assert(eq(int, tg_module_state_at(gen, 0, small, sizeof small, NULL, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_module_state_at(gen, 16, NULL, 0, NULL, NULL), TG_EINVAL));
    tg_module_train(gen, false);
    cr_assert(not(tg_module_is_training(tg_module_child_at(tg_module_child(gen, "net"), 5))));
    tg_module_train(gen, true);
    cr_assert(tg_module_is_training(tg_module_child_at(tg_module_child(gen, "net"), 5)));
    /* duplicate names and a container without forward */
    tg_module *extra = NULL, *c = NULL;
    tg_nn_sequential_new(&extra);
    cr_assert(eq(int, tg_module_add_child(gen, "net", extra), TG_EINVAL));   /* released */
    cr_assert(eq(int, tg_module_child_count(gen), 1));
    tg_tensor *i32 = NULL;
    tg_tensor_zeros(&i32, TG_I32, 0, NULL);
    cr_assert(eq(int, tg_module_add_parameter(gen, "p", i32), TG_EDTYPE));   /* released */
    cr_assert(eq(int, tg_module_state_count(gen), 16));
    tg_module_new(&c, &box_vt, NULL);
    tg_tensor *x = NULL, *y = NULL;
    tg_tensor_zeros(&x, TG_F32, 0, NULL);
    cr_assert(eq(int, tg_module_forward(c, &y, x), TG_EUNSUPPORTED));
    cr_assert(y == NULL);
    tg_tensor_release(x);
    tg_module_release(c);
    tg_module_release(gen);
}

Test(nn_state, to_dtype_keeps_leaves_and_values)
{
    tg_rng rng;
    tg_rng_init(&rng, 4);
    tg_module *gen = nf_make_generator(&rng);
    int64_t n;
    double *before = nf_snapshot(gen, &n);
    cr_assert(eq(int, tg_module_to_dtype(gen, TG_I32), TG_EDTYPE));
    cr_assert(eq(int, tg_module_to_dtype(gen, TG_F64), TG_OK));
    nf_expect_snapshot(gen, before, n);   /* f32 -> f64 is exact */
    free(before);
    tg_tensor *w = tg_module_find(gen, "net.0.weight");
    cr_assert(eq(int, tg_tensor_dtype(w), TG_F64));
    cr_assert(tg_tensor_requires_grad(w) && tg_tensor_is_leaf(w));
    cr_assert(eq(int, tg_tensor_dtype(tg_module_find(gen, "net.2.num_batches_tracked")), TG_I64));
    tg_tensor *x = NULL, *y = NULL;
    int64_t xs[2] = {3, 8};
    tg_tensor_zeros(&x, TG_F64, 2, xs);
    tg_tensor_rand_normal(x, &rng, 0, 1);
    cr_assert(eq(int, tg_module_forward(gen, &y, x), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F64));
    tg_tensor_release(y);
    tg_tensor_release(x);
    tg_module_release(gen);
}

/* One forward/backward/step of lin on x; the loss is sum(lin(x)). */
static int train_step(tg_module *lin, tg_optimizer *opt, tg_tensor *x)
{
    tg_tensor *y = NULL, *loss = NULL;
    int rc = tg_module_forward(lin, &y, x);
    if (rc == TG_OK) rc = tg_sum(&loss, y);
    if (rc == TG_OK) rc = tg_backward(loss, NULL, NULL);
    if (rc == TG_OK) rc = tg_optimizer_step(opt);
    tg_optimizer_zero_grad(opt);
    tg_tensor_release(loss);
    tg_tensor_release(y);
    return rc;
}

/* As torch's `opt = Adam(model.parameters()); model.double()`: the module
 * keeps its parameter objects, so an optimizer made before (with state in
 * the old dtype) goes on training it, and pointers found before stay the
 * module's.  A graph recorded before the conversion is refused in backward,
 * not run on the new values. */
Test(nn_state, to_dtype_keeps_the_tensors_an_optimizer_holds)
{
    tg_rng rng;
    tg_rng_init(&rng, 9);
    tg_module *lin = NULL;
    cr_assert(eq(int, tg_nn_linear_new(&lin, 3, 2, true, &rng), TG_OK));
    tg_tensor *w = tg_module_find(lin, "weight");
    tg_optimizer *opt = NULL;
    const tg_adam_opts o = TG_ADAM_OPTS_INIT;
    cr_assert(eq(int, tg_adam_from_module(&opt, lin, &o), TG_OK), "%s", tg_error_message());
    int64_t xs[2] = {4, 3};
    tg_tensor *x = NULL, *x64 = NULL, *old_y = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&x, TG_F32, 2, xs), TG_OK));
    tg_tensor_rand_normal(x, &rng, 0, 1);
    cr_assert(eq(int, train_step(lin, opt, x), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_module_forward(lin, &old_y, x), TG_OK));
    tg_tensor *old_loss = NULL;
    cr_assert(eq(int, tg_sum(&old_loss, old_y), TG_OK));

    cr_assert(eq(int, tg_module_to_dtype(lin, TG_F64), TG_OK), "%s", tg_error_message());
    cr_assert(tg_module_find(lin, "weight") == w, "the parameter object was replaced");
    cr_assert(eq(int, tg_tensor_dtype(w), TG_F64));
    cr_assert(tg_tensor_requires_grad(w) && tg_tensor_is_leaf(w));
    cr_assert(eq(int, tg_backward(old_loss, NULL, NULL), TG_EINPLACE), "a graph from before ran");
    th_expect_in(tg_error_message(), "modified");

    cr_assert(eq(int, tg_tensor_to_dtype(&x64, x, TG_F64), TG_OK));
    double w0[6], w1[6];
    cr_assert(eq(int, tg_tensor_to_doubles(w, w0, 6), TG_OK));
    for (int step = 0; step < 2; step++)
        cr_assert(eq(int, train_step(lin, opt, x64), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_to_doubles(w, w1, 6), TG_OK));
    int moved = 0;
    for (int i = 0; i < 6; i++) moved += w1[i] != w0[i];
    cr_assert(eq(int, moved, 6), "the optimizer no longer trains the module");
    tg_tensor_release(old_loss);
    tg_tensor_release(old_y);
    tg_tensor_release(x64);
    tg_tensor_release(x);
    tg_optimizer_free(opt);
    tg_module_release(lin);
}

/* A foreach_state callback that fails without a message: the message names
 * it, and the walk stops there. */
static int stop_at_second(const char *name, tg_tensor *t, bool is_param, void *user)
{
    (void)name, (void)t, (void)is_param;
    return ++*(int *)user == 2 ? TG_ENOTFOUND : TG_OK;
}

Test(nn_state, failing_foreach_state_callback_gets_a_message)
{
    tg_rng rng;
    tg_rng_init(&rng, 6);
    tg_module *gen = nf_make_generator(&rng);
    tg_tensor *bad = NULL;
    cr_assert(eq(int, tg_reshape(&bad, tg_module_find(gen, "net.0.bias"), 1, (int64_t[]){5}),
                 TG_ESHAPE));   /* an old error */
    int calls = 0;
    cr_assert(eq(int, tg_module_foreach_state(gen, stop_at_second, &calls), TG_ENOTFOUND));
    cr_assert(eq(int, calls, 2));
    th_expect_in(tg_error_message(),
                 "module_foreach_state: fn failed with TG_ENOTFOUND and no message");
    tg_module_release(gen);
}
