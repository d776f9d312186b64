/* src/nn/checkpoint.c - saving and loading a training state (checkpoint.h).
 *
 * Load runs in three phases so that a bad file changes nothing:
 *   1. check: the format, required metadata and every slot are read and
 *      validated without writing anything (modules, optimizers, lr
 *      schedulers, scalers and loader positions with their loads' own
 *      checks, nn/state_check.h), so
 *      a bad file is refused before any slot changes: no version counter
 *      moves, a grad scaler's step in progress stays;
 *   2. snapshot: the current state of every module, optimizer, scheduler,
 *      scaler, loader and tensor is copied aside;
 *   3. apply: the slots are loaded in order; that fails only for want of
 *      memory, and then slots 0..k-1 are put back from the snapshot. */
#include "tapegrad/checkpoint.h"

#include <string.h>

#include "core/core.h"
#include "nn/checkpoint_internal.h"
#include "nn/state_check.h"

#define NAME_MAX_LEN 128

typedef enum slot_kind {
    SLOT_MODULE,
    SLOT_OPTIMIZER,
    SLOT_SCHEDULER,
    SLOT_SCALER,
    SLOT_LOADER,
    SLOT_RNG,
    SLOT_I64,
    SLOT_TENSOR,
} slot_kind;

typedef struct slot {
    slot_kind kind;
    char name[NAME_MAX_LEN];
    union {
        tg_module *m;
        tg_optimizer *opt;
        tg_lr_scheduler *sched;
        tg_grad_scaler *gs;
        tg_loader *ld;
        tg_rng *rng;
        int64_t *i64;
        tg_tensor *t;
    } u;
} slot;

typedef struct meta_entry {
    char *key, *value;
    bool must_match;
} meta_entry;

struct tg_checkpoint {
    slot *slots;
    int n_slots, cap_slots;
    meta_entry *meta;
    int n_meta, cap_meta;
};

int tg_checkpoint_new(tg_checkpoint **out)
{
    TG_CHECK(out != NULL, TG_EINVAL, "checkpoint_new: out must not be NULL");
    tg_checkpoint *ck = tg__calloc(1, sizeof *ck);
    if (!ck) return TG_ENOMEM;
    *out = ck;
    return TG_OK;
}

void tg_checkpoint_free(tg_checkpoint *ck)
{
    if (!ck) return;
    for (int i = 0; i < ck->n_meta; i++) {
        free(ck->meta[i].key);
        free(ck->meta[i].value);
    }
    free(ck->meta);
    free(ck->slots);
    free(ck);
}

/* ---- slots ----------------------------------------------------------------- */

/* True when key is name itself or lies under "name.". */
static bool under(const char *key, const char *name)
{
    size_t n = strlen(name);
    return strncmp(key, name, n) == 0 && (key[n] == '\0' || key[n] == '.');
}

static int check_name(const tg_checkpoint *ck, const char *name)
{
    TG_CHECK(name != NULL && name[0] != '\0' && name[0] != '.', TG_EINVAL,
             "checkpoint_add: name must be non-empty and not start with '.'");
    size_t n = strlen(name);
    TG_CHECK(n < NAME_MAX_LEN && name[n - 1] != '.', TG_EINVAL,
             "checkpoint_add: name '%.40s' must be < %d chars and not end with '.'", name,
             NAME_MAX_LEN);
    for (int i = 0; i < ck->n_slots; i++) {
        const char *o = ck->slots[i].name;
        TG_CHECK(!under(name, o) && !under(o, name), TG_EINVAL,
                 "checkpoint_add: name '%s' clashes with slot '%s' (their keys would mix)",
                 name, o);
    }
    return TG_OK;
}

static int add_slot(tg_checkpoint *ck, slot_kind kind, const char *name, const void *obj, slot s)
{
    TG_CHECK(ck != NULL && obj != NULL, TG_EINVAL, "checkpoint_add: '%s': NULL argument",
             name ? name : "(null)");
    TG_TRY(check_name(ck, name));
    if (ck->n_slots == ck->cap_slots) {
        int cap = ck->cap_slots ? 2 * ck->cap_slots : 8;
        slot *grown = realloc(ck->slots, (size_t)cap * sizeof *grown);
        if (!grown) return tg__error(TG_ENOMEM, "checkpoint_add: out of memory");
        ck->slots = grown;
        ck->cap_slots = cap;
    }
    s.kind = kind;
    memcpy(s.name, name, strlen(name) + 1);
    ck->slots[ck->n_slots++] = s;
    return TG_OK;
}

int tg_checkpoint_add_module(tg_checkpoint *ck, const char *name, tg_module *m)
{
    return add_slot(ck, SLOT_MODULE, name, m, (slot){.u.m = m});
}

int tg_checkpoint_add_optimizer(tg_checkpoint *ck, const char *name, tg_optimizer *opt)
{
    return add_slot(ck, SLOT_OPTIMIZER, name, opt, (slot){.u.opt = opt});
}

int tg_checkpoint_add_lr_scheduler(tg_checkpoint *ck, const char *name, tg_lr_scheduler *s)
{
    return add_slot(ck, SLOT_SCHEDULER, name, s, (slot){.u.sched = s});
}

int tg_checkpoint_add_grad_scaler(tg_checkpoint *ck, const char *name, tg_grad_scaler *s)
{
    return add_slot(ck, SLOT_SCALER, name, s, (slot){.u.gs = s});
}

int tg_checkpoint_add_loader(tg_checkpoint *ck, const char *name, tg_loader *ld)
{
    return add_slot(ck, SLOT_LOADER, name, ld, (slot){.u.ld = ld});
}

int tg_checkpoint_add_rng(tg_checkpoint *ck, const char *name, tg_rng *rng)
{
    return add_slot(ck, SLOT_RNG, name, rng, (slot){.u.rng = rng});
}

int tg_checkpoint_add_i64(tg_checkpoint *ck, const char *name, int64_t *value)
{
    return add_slot(ck, SLOT_I64, name, value, (slot){.u.i64 = value});
}

int tg_checkpoint_add_tensor(tg_checkpoint *ck, const char *name, tg_tensor *t)
{
    return add_slot(ck, SLOT_TENSOR, name, t, (slot){.u.t = t});
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = tg__malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

int tg_checkpoint_set_meta(tg_checkpoint *ck, const char *key, const char *value,
                           bool must_match)
{
    TG_CHECK(ck != NULL && key != NULL && value != NULL, TG_EINVAL,
             "checkpoint_set_meta: ck, key and value must not be NULL");
    TG_CHECK(key[0] != '\0' && strcmp(key, "format") != 0, TG_EINVAL,
             "checkpoint_set_meta: key '%s' must be non-empty and not 'format' (reserved)", key);
    char *v = dup_str(value);
    if (!v) return TG_ENOMEM;
    for (int i = 0; i < ck->n_meta; i++) {
        if (strcmp(ck->meta[i].key, key) != 0) continue;
        free(ck->meta[i].value);
        ck->meta[i].value = v;
        ck->meta[i].must_match = must_match;
        return TG_OK;
    }
    char *k = dup_str(key);
    if (ck->n_meta == ck->cap_meta && k) {
        int cap = ck->cap_meta ? 2 * ck->cap_meta : 8;
        meta_entry *grown = realloc(ck->meta, (size_t)cap * sizeof *grown);
        if (grown) {
            ck->meta = grown;
            ck->cap_meta = cap;
        }
    }
    if (!k || ck->n_meta == ck->cap_meta) {
        free(k);
        free(v);
        return tg__error(TG_ENOMEM, "checkpoint_set_meta: out of memory");
    }
    ck->meta[ck->n_meta++] = (meta_entry){.key = k, .value = v, .must_match = must_match};
    return TG_OK;
}

/* ---- save ------------------------------------------------------------------ */

/* Stores n i64 values (u64 bit patterns allowed) under key, 0-d when n == 0. */
static int put_i64(tg_st_file *f, const char *key, int n, const int64_t *v)
{
    tg_tensor *t;
    const int64_t shape[1] = {n};
    TG_TRY(tg_tensor_from_data(&t, TG_I64, n == 0 ? 0 : 1, shape, v));
    int rc = tg_st_set(f, key, t);
    tg_tensor_release(t);
    return rc;
}

static int save_slot(const slot *s, tg_st_file *f)
{
    switch (s->kind) {
    case SLOT_MODULE:
        TG_TRY(tg_module_state_dict_save(s->u.m, f, s->name));
        return tg__checkpoint_dropouts_save(s->u.m, s->name, f);
    case SLOT_OPTIMIZER: return tg_optimizer_state_save(s->u.opt, f, s->name);
    case SLOT_SCHEDULER: return tg_lr_scheduler_state_save(s->u.sched, f, s->name);
    case SLOT_SCALER: return tg_grad_scaler_state_save(s->u.gs, f, s->name);
    case SLOT_LOADER: {
        int64_t pos[2];
        tg_loader_position(s->u.ld, &pos[0], &pos[1]);
        return put_i64(f, s->name, 2, pos);
    }
    case SLOT_RNG: {
        /* The u64 seed and counter stored bit for bit in an i64 pair. */
        int64_t v[2];
        memcpy(&v[0], &s->u.rng->seed, sizeof v[0]);
        memcpy(&v[1], &s->u.rng->counter, sizeof v[1]);
        return put_i64(f, s->name, 2, v);
    }
    case SLOT_I64: return put_i64(f, s->name, 0, s->u.i64);
    case SLOT_TENSOR: return tg_st_set(f, s->name, s->u.t);
    }
    TG_ASSERT(!"unknown slot kind");
    return TG_EINVAL;
}

/* Copies extra's tensors and metadata into f; none may land on a slot's key
 * or on the checkpoint's own metadata. */
static int add_extra(const tg_checkpoint *ck, tg_st_file *f, const tg_st_file *extra)
{
    for (int i = 0; i < tg_st_count(extra); i++) {
        const char *name;
        tg_tensor *t;
        TG_TRY(tg_st_at(extra, i, &name, &t));
        for (int s = 0; s < ck->n_slots; s++)
            TG_CHECK(!under(name, ck->slots[s].name), TG_EINVAL,
                     "checkpoint_save: extra tensor '%s' lies under slot '%s'", name,
                     ck->slots[s].name);
        TG_TRY(tg_st_set(f, name, t));
    }
    for (int i = 0; i < tg_st_meta_count(extra); i++) {
        const char *key, *value;
        TG_TRY(tg_st_meta_at(extra, i, &key, &value));
        TG_CHECK(tg_st_meta_get(f, key) == NULL, TG_EINVAL,
                 "checkpoint_save: extra metadata '%s' is already set by the checkpoint", key);
        TG_TRY(tg_st_meta_set(f, key, value));
    }
    return TG_OK;
}

static int build_file(const tg_checkpoint *ck, tg_st_file *f, const tg_st_file *extra)
{
    TG_TRY(tg_st_meta_set(f, "format", TG_CHECKPOINT_FORMAT));
    for (int i = 0; i < ck->n_slots; i++) TG_TRY(save_slot(&ck->slots[i], f));
    /* after the slots, so that a key one of them writes (an optimizer's
     * "<slot>.kind") is refused, not overwritten into a file that no later
     * load would accept */
    for (int i = 0; i < ck->n_meta; i++) {
        TG_CHECK(tg_st_meta_get(f, ck->meta[i].key) == NULL, TG_EINVAL,
                 "checkpoint_save: metadata '%s' (checkpoint_set_meta) is also written by "
                 "a slot; choose another key", ck->meta[i].key);
        TG_TRY(tg_st_meta_set(f, ck->meta[i].key, ck->meta[i].value));
    }
    return extra ? add_extra(ck, f, extra) : TG_OK;
}

int tg_checkpoint_save(const tg_checkpoint *ck, const char *path, const tg_st_file *extra)
{
    TG_CHECK(ck != NULL && path != NULL, TG_EINVAL,
             "checkpoint_save: ck and path must not be NULL");
    tg_st_file *f = NULL;
    TG_TRY(tg_st_new(&f));
    int rc = build_file(ck, f, extra);
    if (rc >= 0) rc = tg_safetensors_save(f, path);
    tg_st_free(f);
    return rc;
}

/* ---- load: phase 1, check --------------------------------------------------- */

/* Reads n i64 values under key (n == 0: a 0-d tensor holding one). */
static int get_i64(const tg_st_file *f, const char *key, int n, int64_t *v)
{
    tg_tensor *t = tg_st_get(f, key);
    TG_CHECK(t != NULL, TG_ENOTFOUND, "checkpoint_load: missing key '%s'", key);
    TG_CHECK(tg_tensor_dtype(t) == TG_I64, TG_EDTYPE,
             "checkpoint_load: '%s' has dtype %s; must be i64", key,
             tg_dtype_name(tg_tensor_dtype(t)));
    bool ok = n == 0 ? tg_tensor_ndim(t) == 0
                     : tg_tensor_ndim(t) == 1 && tg_tensor_shape(t)[0] == n;
    TG_CHECK(ok, TG_ESHAPE, "checkpoint_load: '%s' must have shape %s", key,
             n == 0 ? "()" : "(2)");
    tg_tensor *c = NULL;
    TG_TRY(tg_tensor_contiguous(&c, t));
    memcpy(v, tg_tensor_cdata(c), (size_t)(n == 0 ? 1 : n) * sizeof *v);
    tg_tensor_release(c);
    return TG_OK;
}

static int check_meta(const tg_checkpoint *ck, const tg_st_file *f)
{
    const char *fmt = tg_st_meta_get(f, "format");
    TG_CHECK(fmt != NULL && strcmp(fmt, TG_CHECKPOINT_FORMAT) == 0, TG_EFORMAT,
             "checkpoint_load: metadata 'format' is '%s'; expected '%s'",
             fmt ? fmt : "(missing)", TG_CHECKPOINT_FORMAT);
    for (int i = 0; i < ck->n_meta; i++) {
        const meta_entry *m = &ck->meta[i];
        const char *v = tg_st_meta_get(f, m->key);
        TG_CHECK(!m->must_match || (v != NULL && strcmp(v, m->value) == 0), TG_EINVAL,
                 "checkpoint_load: metadata '%s' is '%s'; this run needs '%s'", m->key,
                 v ? v : "(missing)", m->value);
    }
    return TG_OK;
}

/* Validates a plain slot and decodes its value into v[0..2). */
static int check_slot(const slot *s, const tg_st_file *f, int64_t v[2])
{
    switch (s->kind) {
    case SLOT_LOADER:
        TG_TRY(get_i64(f, s->name, 2, v));
        return tg__loader_position_check(s->u.ld, v[0], v[1]);
    case SLOT_RNG: return get_i64(f, s->name, 2, v);
    case SLOT_I64: return get_i64(f, s->name, 0, v);
    case SLOT_TENSOR: {
        const tg_tensor *t = tg_st_get(f, s->name);
        TG_CHECK(t != NULL, TG_ENOTFOUND, "checkpoint_load: missing key '%s'", s->name);
        TG_CHECK(tg_tensor_dtype(t) == tg_tensor_dtype(s->u.t), TG_EDTYPE,
                 "checkpoint_load: '%s' has dtype %s; expected %s", s->name,
                 tg_dtype_name(tg_tensor_dtype(t)), tg_dtype_name(tg_tensor_dtype(s->u.t)));
        TG_CHECK(tg_tensor_same_shape(t, s->u.t), TG_ESHAPE,
                 "checkpoint_load: '%s' has a different shape from the tensor it loads into",
                 s->name);
        return TG_OK;
    }
    case SLOT_MODULE:
        TG_TRY(tg__module_state_dict_check(s->u.m, f, s->name, true));
        return tg__checkpoint_dropouts_check(s->u.m, s->name, f);
    case SLOT_OPTIMIZER: return tg__optimizer_state_check(s->u.opt, f, s->name);
    case SLOT_SCHEDULER: return tg__lr_scheduler_state_check(s->u.sched, f, s->name);
    case SLOT_SCALER: return tg__grad_scaler_state_check(s->u.gs, f, s->name);
    }
    return TG_OK;
}

/* ---- load: phase 2, snapshot ------------------------------------------------ */

/* Copies (not retains) a module's state into snap under "name.", and its
 * Dropouts' mask counts into snap's metadata. */
static int snapshot_module(const slot *s, tg_st_file *snap)
{
    tg_st_file *view = NULL;
    TG_TRY(tg_st_new(&view));
    int rc = tg_module_state_dict_save(s->u.m, view, s->name);
    if (rc >= 0) rc = tg__checkpoint_dropouts_save(s->u.m, s->name, snap);
    for (int i = 0; rc >= 0 && i < tg_st_count(view); i++) {
        const char *name;
        tg_tensor *t, *c = NULL;
        rc = tg_st_at(view, i, &name, &t);
        if (rc >= 0) rc = tg_tensor_clone(&c, t);
        if (rc >= 0) rc = tg_st_set(snap, name, c);
        tg_tensor_release(c);
    }
    tg_st_free(view);
    return rc;
}

static int snapshot_slot(const slot *s, tg_st_file *snap, int64_t old[2])
{
    switch (s->kind) {
    case SLOT_MODULE: return snapshot_module(s, snap);
    case SLOT_OPTIMIZER: return tg_optimizer_state_save(s->u.opt, snap, s->name);
    case SLOT_SCHEDULER: return tg_lr_scheduler_state_save(s->u.sched, snap, s->name);
    case SLOT_SCALER: return tg_grad_scaler_state_save(s->u.gs, snap, s->name);
    case SLOT_LOADER: tg_loader_position(s->u.ld, &old[0], &old[1]); return TG_OK;
    case SLOT_RNG:
        memcpy(&old[0], &s->u.rng->seed, sizeof old[0]);
        memcpy(&old[1], &s->u.rng->counter, sizeof old[1]);
        return TG_OK;
    case SLOT_I64: old[0] = *s->u.i64; return TG_OK;
    case SLOT_TENSOR: {
        tg_tensor *c = NULL;
        TG_TRY(tg_tensor_clone(&c, s->u.t));
        int rc = tg_st_set(snap, s->name, c);
        tg_tensor_release(c);
        return rc;
    }
    }
    return TG_OK;
}

/* ---- load: phase 3, apply ---------------------------------------------------- */

/* Loads slot s from f (module/optimizer/scheduler/scaler/tensor) or from the decoded
 * values v (loader/rng/i64). */
static int apply_slot(const slot *s, const tg_st_file *f, const int64_t v[2])
{
    switch (s->kind) {
    case SLOT_MODULE:
        TG_TRY(tg_module_load_state_dict(s->u.m, f, s->name, true));
        return tg__checkpoint_dropouts_load(s->u.m, s->name, f);
    case SLOT_OPTIMIZER: return tg_optimizer_state_load(s->u.opt, f, s->name);
    case SLOT_SCHEDULER: return tg_lr_scheduler_state_load(s->u.sched, f, s->name);
    case SLOT_SCALER: return tg_grad_scaler_state_load(s->u.gs, f, s->name);
    case SLOT_LOADER: return tg_loader_set_position(s->u.ld, v[0], v[1]);
    case SLOT_RNG:
        memcpy(&s->u.rng->seed, &v[0], sizeof v[0]);
        memcpy(&s->u.rng->counter, &v[1], sizeof v[1]);
        return TG_OK;
    case SLOT_I64: *s->u.i64 = v[0]; return TG_OK;
    case SLOT_TENSOR: return tg_tensor_copy_(s->u.t, tg_st_get(f, s->name));
    }
    return TG_OK;
}

typedef struct load_plan {
    int64_t (*vals)[2];   /* decoded plain values from the file, per slot */
    int64_t (*old)[2];    /* the same before loading, per slot */
    tg_st_file *snap;     /* copies of the rest of the state before loading */
} load_plan;

static int prepare(const tg_checkpoint *ck, const tg_st_file *f, load_plan *p)
{
    TG_TRY(check_meta(ck, f));
    size_t n = (size_t)(ck->n_slots ? ck->n_slots : 1);
    p->vals = tg__calloc(n, sizeof *p->vals);
    p->old = tg__calloc(n, sizeof *p->old);
    if (!p->vals || !p->old) return tg__error(TG_ENOMEM, "checkpoint_load: out of memory");
    for (int i = 0; i < ck->n_slots; i++) TG_TRY(check_slot(&ck->slots[i], f, p->vals[i]));
    TG_TRY(tg_st_new(&p->snap));
    for (int i = 0; i < ck->n_slots; i++)
        TG_TRY(snapshot_slot(&ck->slots[i], p->snap, p->old[i]));
    return TG_OK;
}

int tg_checkpoint_load_file(tg_checkpoint *ck, const tg_st_file *f)
{
    TG_CHECK(ck != NULL && f != NULL, TG_EINVAL, "checkpoint_load: ck and f must not be NULL");
    load_plan p = {0};
    int rc = prepare(ck, f, &p);
    int k = 0;
    for (; rc >= 0 && k < ck->n_slots; k++) rc = apply_slot(&ck->slots[k], f, p.vals[k]);
    if (rc < 0) {
        /* Every slot was checked against f first (check_slot), so a load
         * fails here only for want of memory.  Slots 0..k-2 were applied;
         * k-1 failed without writing.  Put the applied ones back (this
         * reloads exactly what was saved from them). */
        for (int j = 0; j + 1 < k; j++) {
            int rrc = apply_slot(&ck->slots[j], p.snap, p.old[j]);
            TG_ASSERT(rrc >= 0);
            (void)rrc;
        }
    }
    tg_st_free(p.snap);
    free(p.vals);
    free(p.old);
    return rc;
}

int tg_checkpoint_load(tg_checkpoint *ck, const char *path)
{
    TG_CHECK(ck != NULL && path != NULL, TG_EINVAL,
             "checkpoint_load: ck and path must not be NULL");
    tg_st_file *f = NULL;
    TG_TRY(tg_safetensors_load(&f, path));
    int rc = tg_checkpoint_load_file(ck, f);
    tg_st_free(f);
    return rc;
}
