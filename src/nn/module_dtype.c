/* src/nn/module_dtype.c - a module's float dtype: weights cast under
 * autocast (tg_module_autocast_weights) and the conversion of its tensors
 * (tg_module_to_dtype). */
#include "nn/module_internal.h"
#include "tapegrad/ops.h"
#include "tapegrad/registry.h"

/* ---- autocast weights ---- */

void tg_module_autocast_weights(tg_module *m, bool on)
{
    if (!m) return;
    m->autocast_weights = on;
    for (int i = 0; i < m->n_children; i++) tg_module_autocast_weights(m->children[i].m, on);
}

bool tg_module_is_autocast_weights(const tg_module *m) { return m && m->autocast_weights; }

int tg__module_weight(const tg_module *m, tg_tensor *w, tg_tensor **out)
{
    tg_dtype dt;
    if (w && m->autocast_weights && tg_autocast_active(&dt) && tg_dtype_is_float(w->dtype) &&
        w->dtype != TG_F64)
        return tg_to_dtype(out, w, dt);
    *out = w ? tg_tensor_retain(w) : NULL;
    return TG_OK;
}

/* ---- dtype conversion: convert everything into a side list, then assign ---- */

typedef struct tg__convert {
    tg_dtype dt;
    int n, cap;
    tg_tensor **fresh;           /* converted tensors, in visit order (owned) */
    tg_tensor ***slots;          /* the entry each one goes to */
} tg__convert;

/* As torch's Module.to(), a leaf (every parameter, and a buffer unless it
 * came out of an op) keeps its identity and takes the converted data:
 * optimizers and pointers from tg_module_find still hold the module's
 * tensors.  A tensor under several names (tied weights; a module added
 * twice) is converted once and stays shared; a non-leaf buffer is replaced
 * in every slot that holds it by one converted tensor. */
static int tg__convert_one(tg__convert *c, tg_tensor **slot)
{
    tg_tensor *t = *slot, *fresh = NULL;
    if (!tg_dtype_is_float(tg_tensor_dtype(t)) || tg_tensor_dtype(t) == c->dt) return TG_OK;
    for (int i = 0; i < c->n; i++) {
        if (c->slots[i] == slot) return TG_OK;
        if (*c->slots[i] == t) {
            if (tg_tensor_is_leaf(t)) return TG_OK;
            fresh = tg_tensor_retain(c->fresh[i]);
        }
    }
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 8;
        tg_tensor **f = realloc(c->fresh, (size_t)cap * sizeof *f);
        if (f) c->fresh = f;
        tg_tensor ***s = f ? realloc(c->slots, (size_t)cap * sizeof *s) : NULL;
        if (!s) {
            tg_tensor_release(fresh);
            return tg__error(TG_ENOMEM, "module_to_dtype: out of memory");
        }
        c->slots = s;
        c->cap = cap;
    }
    if (!fresh) TG_TRY(tg_tensor_to_dtype(&fresh, t, c->dt));
    c->fresh[c->n] = fresh;
    c->slots[c->n++] = slot;
    return TG_OK;
}

static int tg__convert_visit(tg_module *m, void *user)
{
    tg__convert *c = user;
    for (int i = 0; i < m->n_params; i++) TG_TRY(tg__convert_one(c, &m->params[i].t));
    for (int i = 0; i < m->n_buffers; i++) TG_TRY(tg__convert_one(c, &m->buffers[i].t));
    return TG_OK;
}

int tg_module_to_dtype(tg_module *m, tg_dtype dt)
{
    TG_CHECK(m != NULL, TG_EINVAL, "module_to_dtype: m must not be NULL");
    TG_CHECK(tg_dtype_is_float(dt), TG_EDTYPE, "module_to_dtype: dtype %s must be a float dtype",
             tg_dtype_name(dt));
    tg__convert c = {.dt = dt};
    int rc = tg__module_visit(m, tg__convert_visit, &c);
    for (int i = 0; i < c.n; i++) {
        if (rc == TG_OK && tg_tensor_is_leaf(*c.slots[i])) {
            tg__tensor_assign(*c.slots[i], c.fresh[i]);
        } else if (rc == TG_OK) {
            tg_tensor *old = *c.slots[i];
            *c.slots[i] = tg_tensor_retain(c.fresh[i]);
            tg_tensor_release(old);
        }
        tg_tensor_release(c.fresh[i]);
    }
    free(c.fresh);
    free(c.slots);
    return rc;
}
