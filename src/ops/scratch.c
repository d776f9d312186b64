/* src/ops/scratch.c - each thread's grow-only work buffers, shared by the
 * conv kernels and batch_norm: repeated calls of the same shape allocate
 * nothing, and a thread's buffers are freed when it exits. */
#include <pthread.h>
#include <string.h>

#include "ops/scratch.h"

/* ---- workspaces ----
 * Each thread keeps TG__CONV_SCRATCH_SLOTS grow-only buffers, so repeated
 * calls of the same shape allocate nothing.  A slot is only used between
 * taking it and the kernel's return; no kernel calls another while holding
 * one. */
/* 0: columns (a conv's im2col, or ConvTranspose's GEMM output on the bf16
 * kernels); 1: packed activations; 2: col2im's block sums,
 * conv_phase_tmpl.h's packed weights, and a conv's GEMM output before its
 * unpack on the bf16 kernels; 3: a chunk of half input as f32; 4: a chunk
 * of half output in f32. */
#define TG__CONV_SCRATCH_SLOTS 5
static _Thread_local void *scratch_buf[TG__CONV_SCRATCH_SLOTS];
static _Thread_local size_t scratch_cap[TG__CONV_SCRATCH_SLOTS];

/* A thread's buffers are freed when it exits (an application thread that
 * ran conv ops, or a pool worker): a key whose destructor releases them is
 * set on the thread's first allocation.  (glibc runs key destructors before
 * it frees the thread's _Thread_local storage.) */
static pthread_key_t scratch_key;
static bool scratch_key_made;   /* false if the process ran out of keys */
static pthread_once_t scratch_key_once = PTHREAD_ONCE_INIT;
static _Thread_local bool scratch_registered;

static void scratch_thread_exit(void *unused)
{
    (void)unused;
    tg__conv_scratch_release();
}

static void scratch_key_make(void)
{
    scratch_key_made = pthread_key_create(&scratch_key, scratch_thread_exit) == 0;
}

/* Without a key (PTHREAD_KEYS_MAX reached by the program) the buffers stay
 * until the process ends, as they did before: no reason to fail a conv. */
static void scratch_register(void)
{
    if (scratch_registered) return;
    pthread_once(&scratch_key_once, scratch_key_make);
    scratch_registered =
        scratch_key_made && pthread_setspecific(scratch_key, &scratch_registered) == 0;
}

void *tg__conv_scratch(int slot, size_t bytes)
{
    TG_ASSERT(slot >= 0 && slot < TG__CONV_SCRATCH_SLOTS);
    if (bytes <= scratch_cap[slot]) return scratch_buf[slot];
    scratch_register();
    /* grow by at least half, so a slowly growing shape does not realloc each call */
    size_t want = bytes > scratch_cap[slot] + scratch_cap[slot] / 2
                      ? bytes : scratch_cap[slot] + scratch_cap[slot] / 2;
    free(scratch_buf[slot]);
    scratch_buf[slot] = tg__malloc(want);
    scratch_cap[slot] = scratch_buf[slot] ? want : 0;
    return scratch_buf[slot];
}

/* The zeroed buffer: grow-only and apart from the slots; its first zero_len
 * bytes are known to be zero.  While taken it counts as dirty (zero_len 0),
 * so a caller that fails before giving it back leaves it to be cleared again
 * on the next take. */
static _Thread_local void *zeroed_buf;
static _Thread_local size_t zeroed_cap, zeroed_len, zeroed_len_taken;

void *tg__conv_zeroed_take(size_t bytes)
{
    if (bytes > zeroed_cap) {
        scratch_register();
        size_t want = bytes > zeroed_cap + zeroed_cap / 2 ? bytes : zeroed_cap + zeroed_cap / 2;
        free(zeroed_buf);
        zeroed_buf = tg__malloc(want);
        zeroed_cap = zeroed_buf ? want : 0;
        zeroed_len = 0;
        if (!zeroed_buf) return NULL;
    }
    if (zeroed_len < bytes) {
        memset((char *)zeroed_buf + zeroed_len, 0, bytes - zeroed_len);
        zeroed_len = bytes;
    }
    zeroed_len_taken = zeroed_len;
    zeroed_len = 0;
    return zeroed_buf;
}

void tg__conv_zeroed_give(void) { zeroed_len = zeroed_len_taken; }

void tg__conv_scratch_release(void)
{
    for (int i = 0; i < TG__CONV_SCRATCH_SLOTS; i++) {
        free(scratch_buf[i]);
        scratch_buf[i] = NULL;
        scratch_cap[i] = 0;
    }
    free(zeroed_buf);
    zeroed_buf = NULL;
    zeroed_cap = zeroed_len = zeroed_len_taken = 0;
}
