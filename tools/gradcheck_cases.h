/* tools/gradcheck_cases.h - the built-in sweep of `tapegrad gradcheck`
 * (gradcheck_cases.c): tiny f64 cases of the ops, each a function under
 * test for tg_gradcheck and tg_gradgradcheck with its input shapes. */
#ifndef TAPEGRAD_TOOLS_GRADCHECK_CASES_H
#define TAPEGRAD_TOOLS_GRADCHECK_CASES_H

#include "tapegrad/autograd.h"
#include "tapegrad/conv.h"

#define GC_MAX_IN 3

typedef enum gc_domain {
    GC_ANY = 0,   /* U[-1, 1] kept away from 0 (kinks of relu, abs) */
    GC_POSITIVE,  /* U[0.5, 2] (log, sqrt, pow, div) */
} gc_domain;

typedef int (*gc_unary_fn)(tg_tensor **, tg_tensor *);
typedef int (*gc_binary_fn)(tg_tensor **, tg_tensor *, tg_tensor *);
typedef int (*gc_scalar_fn)(tg_tensor **, tg_tensor *, double);

typedef struct gc_case {
    const char *op;      /* the registered op's name (`tapegrad ops`) */
    const char *alias;   /* the same cases by rank (conv2d, conv_transpose1d ...), or NULL */
    /* conv, conv_transpose, elementwise, activation, reduce, shape, linalg */
    const char *group;
    const char *label;   /* NULL: generated from the conv parameters */
    tg_gradcheck_fn fn;
    int n;
    int ndim[GC_MAX_IN];
    int64_t shape[GC_MAX_IN][5];
    gc_domain domain;
    gc_unary_fn unary;
    gc_binary_fn binary;
    gc_scalar_fn scalar_op;
    double scalar;
    tg_conv_params conv;
} gc_case;

/* The sweep, gc_ncases cases. */
extern const gc_case gc_cases[];
extern const int gc_ncases;

typedef enum gc_conv_kind { GC_NOT_CONV, GC_CONV, GC_CONV_TRANSPOSE } gc_conv_kind;

/* Whether c is a conv case, which runs with both algorithms and whose label
 * is made from its parameters. */
gc_conv_kind gc_case_conv(const gc_case *c);

#endif
