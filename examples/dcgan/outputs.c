/* examples/dcgan/outputs.c - loss history, loss.csv/png, sample grids and the
 * PyTorch interchange files. */
#include "outputs.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY(expr)                                                             \
    do {                                                                      \
        int rc_ = (expr);                                                     \
        if (rc_ < 0) return rc_;                                              \
    } while (0)

int history_push(history *h, int64_t epoch, double d, double g)
{
    if (h->n == h->cap) {
        int64_t cap = h->cap ? 2 * h->cap : 1024;
        double *nd = realloc(h->d, (size_t)cap * sizeof *nd);
        if (nd) h->d = nd;
        double *ng = realloc(h->g, (size_t)cap * sizeof *ng);
        if (ng) h->g = ng;
        int64_t *ne = realloc(h->epoch, (size_t)cap * sizeof *ne);
        if (ne) h->epoch = ne;
        if (!nd || !ng || !ne) return tg_error_set(TG_ENOMEM, "loss history: out of memory");
        h->cap = cap;
    }
    h->d[h->n] = d;
    h->g[h->n] = g;
    h->epoch[h->n] = epoch;
    h->n++;
    return TG_OK;
}

void history_free(history *h)
{
    free(h->d);
    free(h->g);
    free(h->epoch);
    *h = (history){0};
}

static int put(tg_st_file *f, const char *name, tg_dtype dt, int64_t n, const void *data)
{
    tg_tensor *t;
    TRY(tg_tensor_from_data(&t, dt, 1, (int64_t[]){n}, data));
    int rc = tg_st_set(f, name, t);
    tg_tensor_release(t);
    return rc;
}

int history_save(const history *h, tg_st_file *f)
{
    if (h->n == 0) return TG_OK;
    TRY(put(f, "history.d_loss", TG_F64, h->n, h->d));
    TRY(put(f, "history.g_loss", TG_F64, h->n, h->g));
    return put(f, "history.epoch", TG_I64, h->n, h->epoch);
}

int history_load(history *h, const tg_st_file *f, int64_t steps)
{
    const tg_tensor *d = tg_st_get(f, "history.d_loss"), *g = tg_st_get(f, "history.g_loss");
    const tg_tensor *e = tg_st_get(f, "history.epoch");
    if (!d || !g || !e) return TG_OK;   /* a checkpoint without history */
    int64_t n = tg_tensor_numel(d);
    if (tg_tensor_numel(g) != n || tg_tensor_numel(e) != n)
        return tg_error_set(TG_EFORMAT, "checkpoint: history.d_loss, history.g_loss and "
                            "history.epoch must have one length, not %lld, %lld and %lld",
                            (long long)n, (long long)tg_tensor_numel(g),
                            (long long)tg_tensor_numel(e));
    if (n > steps) n = steps;
    for (int64_t i = 0; i < n; i++) {
        double dv, gv, ev;
        TRY(tg_tensor_get_flat(d, i, &dv));
        TRY(tg_tensor_get_flat(g, i, &gv));
        TRY(tg_tensor_get_flat(e, i, &ev));
        /* an epoch is a step count divided by the batches in one: below 2^53 */
        if (!(ev >= 0 && ev <= 0x1p53 && ev == floor(ev)))
            return tg_error_set(TG_EFORMAT, "checkpoint: history.epoch[%lld]=%g is not an "
                                "epoch number (an integer >= 0)", (long long)i, ev);
        TRY(history_push(h, (int64_t)ev, dv, gv));
    }
    return TG_OK;
}

char *out_path(char *buf, size_t cap, const char *dir, const char *name)
{
    snprintf(buf, cap, "%s/%s", dir, name);
    return buf;
}

/* loss.csv through a temporary file and rename, as every other output. */
static int write_csv(const char *dir, const history *h)
{
    char path[4096], tmp[4200];
    out_path(path, sizeof path, dir, "loss.csv");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *fp = fopen(tmp, "w");
    if (!fp) return tg_error_set(TG_EIO, "cannot write %s: %s", tmp, strerror(errno));
    fprintf(fp, "step,epoch,d_loss,g_loss\n");
    for (int64_t i = 0; i < h->n; i++)
        fprintf(fp, "%lld,%lld,%.9g,%.9g\n", (long long)i + 1, (long long)h->epoch[i] + 1,
                h->d[i], h->g[i]);
    int bad = ferror(fp);
    if (fclose(fp) != 0 || bad) {
        remove(tmp);
        return tg_error_set(TG_EIO, "writing %s failed", tmp);
    }
    if (rename(tmp, path) != 0) {
        int rc = tg_error_set(TG_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        remove(tmp);
        return rc;
    }
    return TG_OK;
}

/* Averages of `w` consecutive steps, so that the plot shows the trend over a
 * few thousand points instead of the step-to-step noise. */
static int smooth(const double *v, int64_t n, int64_t w, double *out)
{
    int64_t m = 0;
    for (int64_t i = 0; i < n; i += w, m++) {
        double s = 0;
        int64_t c = 0;
        for (int64_t j = i; j < n && j < i + w; j++, c++) s += v[j];
        out[m] = s / (double)c;
    }
    return (int)m;
}

int write_losses(const char *dir, const history *h)
{
    TRY(write_csv(dir, h));
    if (h->n == 0) return TG_OK;
    if (!tg_plot_available()) {   /* a build without cairo: loss.csv only */
        fprintf(stderr, "dcgan: built without plot support: loss.png not drawn (see loss.csv)\n");
        return TG_OK;
    }
    int64_t w = h->n / 400 + 1;
    double *d = malloc((size_t)h->n * sizeof *d), *g = malloc((size_t)h->n * sizeof *g);
    int rc = TG_ENOMEM;
    if (d && g) {
        int m = smooth(h->d, h->n, w, d);
        smooth(h->g, h->n, w, g);
        char path[4096], title[128];
        snprintf(title, sizeof title, "DCGAN losses (mean of every %lld steps)", (long long)w);
        const char *names[2] = {"D loss", "G loss"};
        const double *vals[2] = {d, g};
        rc = tg_plot_losses_png(out_path(path, sizeof path, dir, "loss.png"), title, 2, names,
                                vals, m);
    }
    free(d);
    free(g);
    return rc;
}

int write_samples(dcgan_trainer *t, tg_tensor *z, const char *path)
{
    tg_tensor *img = NULL;
    TRY(dcgan_trainer_generate(t, &img, z, true));
    int rc = tg_png_write_grid(path, img, 8, -1.0, 1.0, 2);
    tg_tensor_release(img);
    return rc;
}

int write_interchange(dcgan_trainer *t, tg_tensor *z, const char *dir)
{
    char path[4096];
    tg_st_file *f = NULL;
    tg_tensor *img = NULL;
    TRY(tg_st_new(&f));
    int rc = tg_module_state_dict_save(t->gen, f, "gen");
    if (rc >= 0) rc = tg_safetensors_save(f, out_path(path, sizeof path, dir,
                                                        "generator.safetensors"));
    tg_st_free(f);
    f = NULL;
    if (rc >= 0 && t->gen_ema) rc = tg_st_new(&f);
    if (rc >= 0 && t->gen_ema) rc = tg_module_state_dict_save(t->gen_ema, f, NULL);
    if (rc >= 0 && t->gen_ema)
        rc = tg_safetensors_save(f, out_path(path, sizeof path, dir, "generator_ema.safetensors"));
    tg_st_free(f);
    f = NULL;
    if (rc >= 0) rc = dcgan_trainer_generate(t, &img, z, false);
    if (rc >= 0) rc = tg_st_new(&f);
    if (rc >= 0) rc = tg_st_set(f, "z", z);
    if (rc >= 0) rc = tg_st_set(f, "images", img);
    if (rc >= 0) rc = tg_safetensors_save(f, out_path(path, sizeof path, dir,
                                                        "latents.safetensors"));
    tg_st_free(f);
    tg_tensor_release(img);
    return rc;
}
