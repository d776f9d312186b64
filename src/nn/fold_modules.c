/* src/nn/fold_modules.c - nn.Unfold and nn.Fold: stateless modules that
 * keep their tg_fold_params (and Fold's output_size) and run tg_unfold or
 * tg_fold (tapegrad/conv.h), which check the input as torch's F.unfold and
 * F.fold do. */
#include <string.h>

#include "nn/module_internal.h"
#include "ops/fold_internal.h"
#include "tapegrad/conv.h"

typedef struct tg__fold_state {
    tg_fold_params p;
    int64_t output_size[2];   /* Fold only */
} tg__fold_state;

static int tg__unfold_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const tg__fold_state *s = m->state;
    return tg_unfold(y, x, &s->p);
}

static int tg__fold_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const tg__fold_state *s = m->state;
    return tg_fold(y, x, s->output_size, &s->p);
}

static const tg_module_vtable tg__nn_unfold_vt = {
    .type_name = "Unfold", .forward = tg__unfold_forward, .release = free,
    .state_size = sizeof(tg__fold_state)};
static const tg_module_vtable tg__nn_fold_vt = {
    .type_name = "Fold", .forward = tg__fold_forward, .release = free,
    .state_size = sizeof(tg__fold_state)};

int tg_nn_unfold_new(tg_module **out, const tg_fold_params *p)
{
    const char *fn = "nn_unfold_new";
    TG_CHECK(out != NULL && p != NULL, TG_EINVAL, "%s: out and p must not be NULL", fn);
    TG_TRY(tg__fold_check_params(fn, p, NULL));
    const tg__fold_state s = {.p = *p};
    return tg__module_new_state(out, &tg__nn_unfold_vt, &s);
}

int tg_nn_fold_new(tg_module **out, const int64_t *output_size, const tg_fold_params *p)
{
    const char *fn = "nn_fold_new";
    TG_CHECK(out != NULL && output_size != NULL && p != NULL, TG_EINVAL,
             "%s: out, output_size and p must not be NULL", fn);
    TG_TRY(tg__fold_check_params(fn, p, output_size));
    const tg__fold_state s = {.p = *p, .output_size = {output_size[0], output_size[1]}};
    return tg__module_new_state(out, &tg__nn_fold_vt, &s);
}

int tg_nn_fold_params(const tg_module *m, tg_fold_params *p, int64_t *output_size, bool *fold)
{
    const char *fn = "nn_fold_params";
    TG_CHECK(m != NULL, TG_EINVAL, "%s: m must not be NULL", fn);
    TG_CHECK(m->vt == &tg__nn_unfold_vt || m->vt == &tg__nn_fold_vt, TG_EINVAL,
             "%s: m is a %s module, not an Unfold or a Fold", fn, tg_module_type_name(m));
    const tg__fold_state *s = m->state;
    const bool is_fold = m->vt == &tg__nn_fold_vt;
    if (p) *p = s->p;
    if (output_size) {
        output_size[0] = is_fold ? s->output_size[0] : 0;
        output_size[1] = is_fold ? s->output_size[1] : 0;
    }
    if (fold) *fold = is_fold;
    return TG_OK;
}
