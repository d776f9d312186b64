/* fmnist_classifier: trains the Fashion-MNIST feature network of
 * tapegrad/metrics.h (two conv blocks, two linear layers) whose penultimate
 * activations are the features of `tapegrad fid`.
 *
 *   fmnist_classifier [--epochs N (4)] [--batch N (64)] [--lr X (1e-3)] [--seed N (0)]
 *                     [--threads N] [--weights PATH (fid_classifier.safetensors)]
 *                     [--data DIR]
 *
 * Images are in [-1, 1] (the range of the DCGAN generator's tanh), the loss is
 * the cross entropy, minimised with Adam; the learning rate is divided by 10
 * for the last epoch.  After each epoch the accuracy on the test set is
 * printed; at the end the network's state dict (PyTorch's names for the
 * nn.Sequential of metrics.h: "0.weight", "1.running_mean", ..., "9.bias")
 * is saved to --weights.  The committed data/fid_classifier.safetensors was
 * made with the defaults and --threads 2 (docs/fid.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include <tapegrad/metrics.h>
#include <tapegrad/tapegrad.h>

#include "example_args.h"

static const char prog[] = "fmnist_classifier";

/* Runs call; when it fails, prints "fmnist_classifier: <what>: <the library's
 * message>" and exits with status 1. */
typedef struct opts {
    int64_t epochs, batch, threads;
    double lr;
    uint64_t seed;
    const char *weights, *data;
} opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: fmnist_classifier [--epochs N (4)] [--batch N (64)] [--lr X (1e-3)]\n"
               "                         [--seed N (0)] [--threads N (1..256)]\n"
               "                         [--weights PATH (fid_classifier.safetensors)] "
               "[--data DIR]\n"
               "Needs the training and the test IDX files in DIR (default "
               TG_FASHION_MNIST_DIR ").\n");
}

static int apply(void *opts_, const char *name, const char *v)
{
    opts *o = opts_;
    if (!strcmp(name, "--epochs")) return ex_arg_i64(prog, name, v, 1, 1000, &o->epochs);
    if (!strcmp(name, "--batch")) return ex_arg_i64(prog, name, v, 1, 60000, &o->batch);
    if (!strcmp(name, "--lr")) return ex_arg_positive(prog, name, v, 1.0, &o->lr);
    if (!strcmp(name, "--seed")) return ex_arg_u64(prog, name, v, &o->seed);
    if (!strcmp(name, "--threads")) return ex_arg_i64(prog, name, v, 1, 256, &o->threads);
    if (!strcmp(name, "--weights")) return (o->weights = v), 0;
    return (o->data = v), 0;   /* --data */
}

/* The fraction of ds's images whose largest logit is their label. */
static double accuracy(tg_module *net, const tg_dataset *ds)
{
    const int64_t n = tg_dataset_size(ds);
    int64_t *idx = malloc((size_t)n * sizeof *idx), hits = 0;
    if (!idx) EX_CHECK(tg_error_set(TG_ENOMEM, "out of memory"), "indexing the test set");
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    tg_tensor *x, *y, *feat, *logits;
    EX_CHECK(tg_dataset_batch(&x, &y, ds, idx, n), "taking the test images");
    free(idx);
    EX_CHECK(tg_fid_features(&feat, &logits, net, x), "classifying the test images");
    const float *l = tg_tensor_cdata(logits);
    const int64_t *lab = tg_tensor_cdata(y);
    for (int64_t i = 0; i < n; i++) {
        int best = 0;
        for (int c = 1; c < TG_FID_CLASSES; c++)
            if (l[i * TG_FID_CLASSES + c] > l[i * TG_FID_CLASSES + best]) best = c;
        hits += best == lab[i];
    }
    tg_tensor_release(x);
    tg_tensor_release(y);
    tg_tensor_release(feat);
    tg_tensor_release(logits);
    return (double)hits / (double)n;
}

/* One epoch of Adam steps over ld; returns the mean loss. */
static double train_epoch(tg_module *net, tg_optimizer *opt, tg_loader *ld, int64_t epoch)
{
    tg_tensor *x, *labels, *logits, *loss;
    double sum = 0, l;
    int64_t steps = 0;
    int got;
    tg_module_train(net, true);
    EX_CHECK(tg_loader_reset(ld, epoch), "shuffling the training set");
    while ((got = tg_loader_next(ld, &x, &labels)) != 0) {
        EX_CHECK(got, "taking a batch of epoch %lld", (long long)epoch + 1);
        tg_optimizer_zero_grad(opt);
        EX_CHECK(tg_module_forward(net, &logits, x), "the forward pass");
        EX_CHECK(tg_cross_entropy(&loss, logits, labels, TG_REDUCTION_MEAN), "the loss");
        EX_CHECK(tg_backward(loss, NULL, NULL), "the gradients");
        EX_CHECK(tg_optimizer_step(opt), "updating the weights");
        EX_CHECK(tg_tensor_get_flat(loss, 0, &l), "reading the loss");
        sum += l;
        steps++;
        tg_tensor_release(loss);
        tg_tensor_release(logits);
        tg_tensor_release(x);
        tg_tensor_release(labels);
    }
    return steps ? sum / (double)steps : 0.0;
}

static void save(const tg_module *net, const opts *o, double acc)
{
    tg_st_file *f;
    char meta[256];
    EX_CHECK(tg_st_new(&f), "collecting the weights");
    EX_CHECK(tg_module_state_dict_save(net, f, NULL), "collecting the weights");
    snprintf(meta, sizeof meta, "fmnist_classifier --epochs %lld --batch %lld --lr %g --seed %llu",
             (long long)o->epochs, (long long)o->batch, o->lr, (unsigned long long)o->seed);
    EX_CHECK(tg_st_meta_set(f, "command", meta), "collecting the weights");
    snprintf(meta, sizeof meta, "%.4f", acc);
    EX_CHECK(tg_st_meta_set(f, "test_accuracy", meta), "collecting the weights");
    EX_CHECK(tg_safetensors_save(f, o->weights), "saving the weights to %s", o->weights);
    tg_st_free(f);
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"--epochs", "--batch", "--lr", "--seed",
                                        "--threads", "--weights", "--data"};
    opts o = {.epochs = 4, .batch = 64, .lr = 1e-3, .weights = "fid_classifier.safetensors"};
    int prc = ex_args_parse(prog, argc, argv, names, sizeof names / sizeof *names, apply, &o,
                            usage);
    if (prc != 0) return prc > 0 ? EX_EXIT_OK : EX_EXIT_USAGE;
    if (o.threads > 0) {
        openblas_set_num_threads((int)o.threads);
        tg_set_num_threads((int)o.threads);
    }
    tg_dataset *train, *test;
    const char *dir = o.data ? o.data : TG_FASHION_MNIST_DIR;
    EX_CHECK(tg_fashion_mnist_load(&train, o.data, true), "loading the training set from %s", dir);
    EX_CHECK(tg_fashion_mnist_load(&test, o.data, false), "loading the test set from %s", dir);
    tg_rng rng;
    tg_rng_init(&rng, o.seed);
    tg_module *net;
    EX_CHECK(tg_fid_net_new(&net, &rng), "building the network");
    tg_tensor **params;
    int np;
    tg_optimizer *opt;
    tg_adam_opts ao = TG_ADAM_OPTS_INIT;
    ao.lr = o.lr;
    EX_CHECK(tg_module_parameters(net, &params, &np), "setting up Adam");
    EX_CHECK(tg_adam_new(&opt, np, params, &ao), "setting up Adam");
    free(params);
    tg_loader *ld;
    tg_loader_options lo = {.batch_size = o.batch, .shuffle = true, .seed = o.seed,
                            .drop_last = true};
    EX_CHECK(tg_loader_new(&ld, train, &lo), "setting up the batches of the training set");
    double t0 = ex_now_s(), acc = 0;
    for (int64_t e = 0; e < o.epochs; e++) {
        if (e == o.epochs - 1 && o.epochs > 1)
            EX_CHECK(tg_optimizer_set_lr(opt, o.lr / 10), "lowering the learning rate");
        double loss = train_epoch(net, opt, ld, e);
        acc = accuracy(net, test);
        printf("epoch %lld  loss %.4f  test accuracy %.4f  %.0f s\n", (long long)e + 1, loss,
               acc, ex_now_s() - t0);
        fflush(stdout);
    }
    save(net, &o, acc);
    printf("wrote %s (test accuracy %.4f)\n", o.weights, acc);
    tg_loader_free(ld);
    tg_optimizer_free(opt);
    tg_module_release(net);
    tg_dataset_release(train);
    tg_dataset_release(test);
    return EX_EXIT_OK;
}
