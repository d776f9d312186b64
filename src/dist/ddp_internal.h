/* src/dist/ddp_internal.h - the tg_ddp that ddp.c makes and frees,
 * ddp_step.c runs a step of and ddp_buffers.c broadcasts the module's
 * buffers for (the design: ddp.c's opening comment). */
#ifndef TG_DDP_INTERNAL_H
#define TG_DDP_INTERNAL_H

#include "dist/dist_internal.h"

typedef struct ddp_slot {
    tg_ddp *ddp;           /* back pointer for the hook */
    tg_tensor *p;          /* retained */
    int bucket;
    int64_t offset, numel; /* in elements of the bucket's buffer */
    bool ready;            /* copied into the bucket this step */
    tg_tensor *fresh;      /* owned: the .grad finish sets when the present one
                            * cannot take the result in place; NULL: none */
} ddp_slot;

typedef struct ddp_bucket {
    tg_dtype dt;           /* the parameters' */
    tg_dtype wire;         /* buf's: dt, or the half dtype of opts.compress */
    MPI_Datatype mt;       /* wire's */
    MPI_Op op;             /* MPI_SUM, or the half sum of ddp_compress.c */
    int64_t numel;
    size_t bytes;          /* of the parameters (dt): what bucket_cap_bytes caps */
    void *buf;             /* (numel) of wire, owned */
    int n_slots, n_ready;
    MPI_Request req;
    bool started, done;
} ddp_bucket;

struct tg_ddp {
    tg_dist *d;            /* borrowed */
    tg_module *m;          /* retained; NULL: made from a parameter list */
    tg_ddp_opts o;
    int n;
    ddp_slot *slots;       /* (n) in the caller's parameter order */
    int n_buckets;
    ddp_bucket *buckets;
    int next_start;        /* buckets [0, next_start) have been started */
    int next_test;         /* buckets [0, next_test) are known to be done */
    int *used;             /* (n + 1) used[i]: 1 where this step's backward
                            * reached parameter i (its hook ran); used[n]: 1
                            * when the step failed on this rank.  After
                            * finish's all-reduce, the number of ranks where
                            * it did, and where it failed. */
    MPI_Request used_req;
    unsigned char *bufs;   /* (bufs_bytes) owned: the module's buffers, packed
                            * for one broadcast (with broadcast_buffers) */
    size_t bufs_bytes;
    bool armed;
    tg_ddp_stats stats;
    MPI_Datatype half_type; /* owned, with compress: 2 bytes; else MPI_DATATYPE_NULL */
    MPI_Op half_sum;        /* owned, with compress: the sum in the half; else MPI_OP_NULL */
};

/* The post-accumulate hook on each parameter (user: its ddp_slot): copies
 * .grad into the slot and starts the buckets it completes (ddp_step.c). */
int tg__ddp_hook(tg_tensor *leaf, void *user);

/* Compression (ddp_compress.c, opts.compress bf16 or f16).  The MPI
 * datatype and reduction of the half dtype, made for this tg_ddp (local:
 * no messages; TG_EIO when MPI refuses), and freed (each NULL handle is
 * skipped, so both run on a partly made tg_ddp). */
int tg__ddp_compress_init(tg_ddp *ddp);
void tg__ddp_compress_free(tg_ddp *ddp);
/* dst[i] = half(src[i] / size), rounded to nearest even, src of dtype dt
 * (f32, or f64 divided in f64 and rounded through f32): what a rank sends. */
void tg__ddp_compress(tg_dtype half, tg_dtype dt, const void *src, int size, uint16_t *dst,
                      int64_t n);
/* dst[i] = src[i] widened to dt (f32 or f64; exact): the reduced bucket
 * into .grad. */
void tg__ddp_decompress(tg_dtype half, tg_dtype dt, const uint16_t *src, void *dst, int64_t n);

/* The module's buffers (ddp_buffers.c): the room for them at construction
 * (none unless broadcast_buffers); before the step's flags go out, the
 * check that they kept their sizes and, on rank 0, their packing; then rank
 * 0's packed buffers to every rank, which unpacks them (collective). */
int tg__ddp_plan_buffers(tg_ddp *ddp, const tg_module *m);
int tg__ddp_pack_buffers(tg_ddp *ddp);
int tg__ddp_broadcast_buffers(tg_ddp *ddp);

#endif
