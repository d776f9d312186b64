/* src/core/gemm_bf16_panels.c - bf16 GEMM operands packed once per version
 * of a weight (the layout: gemm_bf16.h; the contract: core.h).
 *
 * A training step multiplies each weight several times: a conv's forward
 * and its input gradient, a model run on two batches, a discriminator run
 * three times in a GAN step.  Without this cache each of those GEMMs packs
 * the weight again, per call, per thread and per block of columns.  Here the
 * panels of one operand layout are packed once and kept on the storage whose
 * values they hold, tagged with its version: an optimizer step (or any
 * in-place write) bumps the version and the next lookup packs again; the
 * panels are freed with the storage.
 *
 * A bf16 cast of an f32 master weight (to_dtype under autocast) is a new
 * storage on every forward.  Its panels are kept on the master's storage
 * instead, packed from the master's f32 values rounded to bf16 as the cast
 * rounds them (so the same bits as packing the cast), and every cast of the
 * master made at that version shares them.
 *
 * One mutex guards every storage's list; a lookup that packs holds it while
 * it packs (a weight's panels take tens of microseconds, once per step). */
#include <pthread.h>
#include <string.h>

#include "core/gemm_bf16.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int64_t packs;
static _Thread_local bool disabled;

int64_t tg__bf16_panels_packed(void) { return atomic_load(&packs); }

void tg__bf16_panels_set_enabled(bool on) { disabled = !on; }

void tg__bf16_panels_release(tg__bf16_panels *p)
{
    if (!p) return;
    TG_ASSERT(p->refcount > 0);
    if (--p->refcount > 0) return;
    tg__work_free(p->data);
    free(p);
}

void tg__bf16_panels_free_all(tg_storage *s)
{
    tg__bf16_panels *p = s->panels;
    s->panels = NULL;
    while (p) {
        tg__bf16_panels *next = p->next;
        tg__bf16_panels_release(p);
        p = next;
    }
}

static bool same_key(const tg__bf16_panels *p, tg_bf16_kernel kern, bool b_side,
                     const tg__bf16_operand *o)
{
    return p->kern == kern && p->b_side == b_side && p->o.off == o->off &&
           p->o.lines == o->lines && p->o.k == o->k && p->o.ld == o->ld &&
           p->o.tcontig == o->tcontig;
}

/* The panels of (kern, b_side, o) on s at its current version, retained, or
 * NULL; a stale entry of that key is dropped.  The lock is held. */
static tg__bf16_panels *find_locked(tg_storage *s, tg_bf16_kernel kern, bool b_side,
                                    const tg__bf16_operand *o)
{
    for (tg__bf16_panels **pp = &s->panels; *pp; pp = &(*pp)->next) {
        tg__bf16_panels *p = *pp;
        if (!same_key(p, kern, b_side, o)) continue;
        if (p->version == s->version && p->handed == atomic_load(&s->handed)) {
            p->refcount++;
            return p;
        }
        *pp = p->next;   /* packed from older values: repacked below */
        tg__bf16_panels_release(p);
        return NULL;
    }
    return NULL;
}

/* New panels of o (its offset is in s's elements) packed from bf16 bits,
 * first the one of element o->off, kept on s (one reference) and returned
 * (another); NULL when out of memory.  The lock is held. */
static tg__bf16_panels *pack_locked(tg_storage *s, tg_bf16_kernel kern, bool b_side,
                                    const tg__bf16_operand *o, const uint16_t *first)
{
    tg__bf16_panels *p = calloc(1, sizeof *p);
    const int64_t words = tg__bf16_panels_words(kern, b_side, o->lines, o->k);
    if (p) p->data = tg__work_alloc((size_t)words * sizeof *p->data);
    if (!p || !p->data) {
        free(p);
        return NULL;
    }
    const int64_t h = tg__bf16_panel_lines(kern, b_side);
    p->refcount = 2;
    p->kern = kern;
    p->b_side = b_side;
    p->o = *o;
    p->version = s->version;
    p->handed = atomic_load(&s->handed);
    p->lines_pad = (o->lines + h - 1) / h * h;
    const tg__bf16_src src = {.h = first, .ld = o->ld, .tcontig = o->tcontig};
    tg__bf16_pack_panels(p, &src);
    p->next = s->panels;
    s->panels = p;
    atomic_fetch_add(&packs, 1);
    return p;
}

/* The elements of o: from off to the far corner, (lines-1, k-1). */
static int64_t span(const tg__bf16_operand *o)
{
    const int64_t far = o->tcontig ? (o->lines - 1) * o->ld + o->k - 1
                                   : (o->k - 1) * o->ld + o->lines - 1;
    return o->off + far + 1;
}

/* The panels of o (offset in s's elements) on s, found or packed from the
 * bf16 bits of n elements from o->off on: s's own (from_f32 false), or the
 * roundings of its f32 ones (a master) as the cast rounds them.  The lock is
 * held. */
static tg__bf16_panels *get_locked(tg_storage *s, tg_bf16_kernel kern, bool b_side,
                                   const tg__bf16_operand *o, int64_t n, bool from_f32)
{
    tg__bf16_panels *p = find_locked(s, kern, b_side, o);
    if (p) return p;
    if (!from_f32) return pack_locked(s, kern, b_side, o, (const uint16_t *)s->data + o->off);
    uint16_t *half = tg__work_alloc((size_t)n * sizeof *half);
    if (half) {
        tg__f32_to_half_n(TG_BF16, (const float *)s->data + o->off, half, n, true);
        p = pack_locked(s, kern, b_side, o, half);
    }
    tg__work_free(half);
    return p;
}

void tg__bf16_note_cast(tg_tensor *dst, const tg_tensor *src)
{
    if (dst->dtype != TG_BF16 || src->dtype != TG_F32 || src->grad_fn ||
        !tg_tensor_is_contiguous(src) || !tg_tensor_is_contiguous(dst) || dst->offset != 0 ||
        dst->storage->version != 0 || dst->storage->cast_of)
        return;
    dst->storage->cast_of = tg__storage_retain(src->storage);
    dst->storage->cast_offset = src->offset;
    dst->storage->cast_version = src->storage->version;
    dst->storage->cast_handed = atomic_load(&src->storage->handed);
}

tg__bf16_panels *tg__bf16_panels_get(const tg_tensor *t, tg_bf16_kernel kern, bool b_side,
                                     const tg__bf16_operand *o)
{
    TG_ASSERT(o->lines > 0 && o->k > 0 && o->off >= 0);
    if (disabled || kern <= TG_BF16_KERNEL_PORTABLE || t->dtype != TG_BF16 ||
        !tg_tensor_is_contiguous(t) || span(o) > tg__numel(t->ndim, t->shape))
        return NULL;
    /* Kept on the master a cast came from when the master still holds the
     * values it was cast from, else on t's storage; the key's offset counts
     * the elements of that storage. */
    const tg_storage *s = t->storage;
    const bool master = s->cast_of && s->version == 0 && s->cast_of->version == s->cast_version &&
                        atomic_load(&s->cast_of->handed) == s->cast_handed;
    tg__bf16_operand ok = *o;
    ok.off += t->offset + (master ? s->cast_offset : 0);
    pthread_mutex_lock(&lock);
    tg__bf16_panels *p = get_locked(master ? s->cast_of : t->storage, kern, b_side, &ok,
                                    span(o) - o->off, master);
    pthread_mutex_unlock(&lock);
    return p;
}
