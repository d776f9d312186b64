/* examples/dcgan_qat.c - see dcgan_qat.h. */
#include "dcgan_qat.h"

#include <stdlib.h>

#include <tapegrad/quant.h>

#include "dcgan/model.h"

#define TRY(expr)                                                             \
    do {                                                                      \
        int rc_ = (expr);                                                     \
        if (rc_ < 0) return rc_;                                              \
    } while (0)

/* The activations the int8 model rounds: 0 the latents, 1 and 2 the ReLU
 * outputs of the first two layers, 3 the last layer's output (before Tanh). */
enum { N_ACT = 4, N_LAYERS = 3 };

typedef struct student {
    tg_module *seq;                 /* the folded generator (owned) */
    tg_module *layer[N_LAYERS];     /* Linear', ConvTranspose', ConvTranspose (borrowed) */
    int64_t C;
    double scale[N_ACT];            /* u8 affine parameters of each activation */
    int32_t zp[N_ACT];
} student;

/* Tensors of one forward, released together. */
typedef struct tmps {
    tg_tensor *t[32];   /* a training step keeps 18 */
    int n;
} tmps;

/* Keeps *slot for release with the others when rc, the status of the call
 * that set it, is not an error (a pointer: the call runs before it is read). */
static int keep(tmps *k, tg_tensor **slot, int rc)
{
    if (rc >= 0) k->t[k->n++] = *slot;
    return rc;
}

static void tmps_release(tmps *k)
{
    for (int i = 0; i < k->n; i++) tg_tensor_release(k->t[i]);
    k->n = 0;
}

static tg_conv_params conv4s2(void)
{
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    tg_conv_params_set_padding(&p, 1);
    return p;
}

/* Appends m (stolen) to seq unless rc is an error. */
static int append(tg_module *seq, int rc, tg_module *m)
{
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    return tg_nn_sequential_append(seq, m);
}

/* A copy of the ConvTranspose layer src (weights through a state dict). */
static int copy_layer(tg_module **out, tg_module *src, int64_t cin, int64_t cout)
{
    const int64_t k[2] = {4, 4};
    const tg_conv_params p = conv4s2();
    tg_rng rng;
    tg_rng_init(&rng, 0);
    tg_st_file *f = NULL;
    tg_module *m = NULL;
    int rc = tg_nn_conv_transpose_new(&m, 2, cin, cout, k, &p, true, &rng);
    if (rc >= 0) rc = tg_st_new(&f);
    if (rc >= 0) rc = tg_module_state_dict_save(src, f, NULL);
    if (rc >= 0) rc = tg_module_load_state_dict(m, f, NULL, true);
    tg_st_free(f);
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}

/* The folded generator of dcgan_qat.h from gen's layers net.0 .. net.8. */
static int build_student(student *s, tg_module *gen)
{
    tg_module *net = tg_module_child(gen, "net"), *m = NULL;
    if (!net || tg_module_child_count(net) != 9)
        return tg_error_set(TG_EINVAL, "qat: not a generator of examples/dcgan/model.h");
    const tg_tensor *w0 = tg_module_find(net, "0.weight");
    s->C = tg_tensor_dim(w0, 0) / 49;
    const int64_t C = s->C, chw[3] = {C, 7, 7};
    TRY(tg_nn_sequential_new(&s->seq));
    int rc = tg_fold_batchnorm(&m, tg_module_child_at(net, 0), tg_module_child_at(net, 2));
    rc = append(s->seq, rc, m);
    if (rc >= 0) rc = tg_nn_unflatten_new(&m, 1, 3, chw);
    rc = append(s->seq, rc, m);
    if (rc >= 0) rc = tg_nn_activation_new(&m, TG_ACT_RELU, 0);
    rc = append(s->seq, rc, m);
    if (rc >= 0) rc = tg_fold_batchnorm(&m, tg_module_child_at(net, 4), tg_module_child_at(net, 5));
    rc = append(s->seq, rc, m);
    if (rc >= 0) rc = tg_nn_activation_new(&m, TG_ACT_RELU, 0);
    rc = append(s->seq, rc, m);
    if (rc >= 0) rc = copy_layer(&m, tg_module_child_at(net, 7), C / 2, 1);
    rc = append(s->seq, rc, m);
    if (rc >= 0) rc = tg_nn_activation_new(&m, TG_ACT_TANH, 0);
    rc = append(s->seq, rc, m);
    if (rc < 0) return rc;
    s->layer[0] = tg_module_child_at(s->seq, 0);
    s->layer[1] = tg_module_child_at(s->seq, 3);
    s->layer[2] = tg_module_child_at(s->seq, 5);
    return TG_OK;
}

/* Activation i: observed into obs[i] (calibration: obs not NULL), or
 * replaced by its fake-quantized value (training). */
static int activation(tmps *k, tg_tensor **x, const student *s, int i, tg_observer *obs)
{
    if (obs) return tg_observer_update(&obs[i], *x);
    tg_tensor *q = NULL;
    TRY(keep(k, &q, tg_fake_quantize(&q, *x, s->scale[i], s->zp[i], 0, 255)));
    *x = q;
    return TG_OK;
}

/* Layer i's weight: as is (calibration), or fake-quantized per output
 * channel (axis 0 for Linear, 1 for ConvTranspose), symmetric i8, with the
 * scales of the current weights (training). */
static int weight(tmps *k, tg_tensor **w, const student *s, int i, bool fq)
{
    tg_tensor *p = tg_module_find(s->layer[i], "weight");
    *w = p;
    if (!fq) return TG_OK;
    const int axis = i == 0 ? 0 : 1;
    const int64_t n = tg_tensor_dim(p, axis);
    double *scales = malloc((size_t)n * sizeof *scales);
    tg_observer o;
    int rc = scales ? tg_observer_init(&o, TG_OBSERVER_PER_CHANNEL, TG_I8, true, axis)
                    : tg_error_set(TG_ENOMEM, "qat: out of memory");
    if (rc >= 0) {
        rc = tg_observer_update(&o, p);
        if (rc >= 0) rc = tg_observer_channel_qparams(&o, n, scales, NULL);
        tg_observer_free(&o);
    }
    tg_tensor *q = NULL;
    if (rc >= 0) rc = keep(k, &q, tg_fake_quantize_per_channel(&q, p, axis, n, scales, NULL,
                                                              -128, 127));
    free(scales);
    if (rc >= 0) *w = q;
    return rc;
}

/* The folded generator on z, with the int8 model's roundings simulated
 * (obs NULL) or, in float, observing the activations into obs[0..N_ACT).
 * *y is kept in k. */
static int student_forward(tmps *k, tg_tensor **y, const student *s, tg_tensor *z,
                           tg_observer *obs)
{
    const bool fq = obs == NULL;
    const tg_conv_params p = conv4s2();
    const int64_t shape[4] = {tg_tensor_dim(z, 0), s->C, 7, 7};
    tg_tensor *h = z, *w, *t = NULL;
    TRY(activation(k, &h, s, 0, obs));
    TRY(weight(k, &w, s, 0, fq));
    TRY(keep(k, &t, tg_linear(&t, h, w, tg_module_find(s->layer[0], "bias"))));
    TRY(keep(k, &h, tg_relu(&h, t)));
    TRY(activation(k, &h, s, 1, obs));
    TRY(keep(k, &t, tg_reshape(&t, h, 4, shape)));
    TRY(weight(k, &w, s, 1, fq));
    TRY(keep(k, &h, tg_conv_transpose(&h, t, w, tg_module_find(s->layer[1], "bias"), &p)));
    TRY(keep(k, &t, tg_relu(&t, h)));
    TRY(activation(k, &t, s, 2, obs));
    TRY(weight(k, &w, s, 2, fq));
    TRY(keep(k, &h, tg_conv_transpose(&h, t, w, tg_module_find(s->layer[2], "bias"), &p)));
    TRY(activation(k, &h, s, 3, obs));
    return keep(k, y, tg_tanh(y, h));
}

/* The activation ranges of the folded float model on the calibration batches. */
static int calibrate(student *s, int n_calib, tg_tensor *const *calib)
{
    tg_observer obs[N_ACT];
    tmps k = {0};
    int rc = TG_OK, made = 0;
    for (; made < N_ACT && rc >= 0; made++)
        rc = tg_observer_init(&obs[made], TG_OBSERVER_MINMAX, TG_U8, false, 0);
    tg_no_grad_begin();
    for (int b = 0; b < n_calib && rc >= 0; b++) {
        tg_tensor *y = NULL;
        rc = student_forward(&k, &y, s, calib[b], obs);
        tmps_release(&k);
    }
    tg_no_grad_end();
    for (int i = 0; i < N_ACT && rc >= 0; i++)
        rc = tg_observer_qparams(&obs[i], &s->scale[i], &s->zp[i]);
    for (int i = 0; i < made; i++) tg_observer_free(&obs[i]);
    return rc;
}

/* One Adam step on the distillation loss for fresh latents; *loss its value. */
static int train_step(const student *s, tg_optimizer *opt, tg_module *gen, int64_t nz,
                      int64_t batch, tg_rng *rng, double *loss)
{
    tmps k = {0};
    tg_tensor *z = NULL, *target = NULL, *y = NULL, *l = NULL;
    int rc = keep(&k, &z, dcgan_latents(&z, batch, nz, rng));
    if (rc >= 0) {
        tg_no_grad_begin();
        rc = keep(&k, &target, tg_module_forward(gen, &target, z));
        tg_no_grad_end();
    }
    if (rc >= 0) rc = student_forward(&k, &y, s, z, NULL);
    if (rc >= 0) rc = keep(&k, &l, tg_mse_loss(&l, y, target, TG_REDUCTION_MEAN));
    tg_optimizer_zero_grad(opt);
    if (rc >= 0) rc = tg_backward(l, NULL, NULL);
    if (rc >= 0) rc = tg_optimizer_step(opt);
    if (rc >= 0) rc = tg_tensor_get_flat(l, 0, loss);
    tmps_release(&k);
    return rc;
}

int dcgan_qat(tg_module **out, double *loss_first, double *loss_last, tg_module *gen,
              int64_t nz, int n_calib, tg_tensor *const *calib, const dcgan_qat_opts *o)
{
    student s = {0};
    tg_optimizer *opt = NULL;
    tg_tensor **params = NULL;
    int np = 0;
    tg_rng rng;
    tg_rng_init(&rng, o->seed);
    tg_module_train(gen, false);
    int rc = build_student(&s, gen);
    if (rc >= 0) rc = calibrate(&s, n_calib, calib);
    if (rc >= 0) rc = tg_module_parameters(s.seq, &params, &np);
    tg_adam_opts ao = TG_ADAM_OPTS_INIT;
    ao.lr = o->lr;
    if (rc >= 0) rc = tg_adam_new(&opt, np, params, &ao);
    free(params);
    for (int64_t i = 0; i < o->steps && rc >= 0; i++) {
        double l = 0;
        rc = train_step(&s, opt, gen, nz, o->batch, &rng, &l);
        if (i == 0) *loss_first = l;
        *loss_last = l;
    }
    tg_optimizer_free(opt);
    if (rc < 0) {
        tg_module_release(s.seq);
        return rc;
    }
    tg_module_train(s.seq, false);
    *out = s.seq;
    return TG_OK;
}
