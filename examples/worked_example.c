/* The worked example of tapegrad.h: y = conv_transpose(x, w) + b, loss =
 * mean(y), backward, then print w's gradient.  Every call is checked.
 *
 * It takes no options: --help or -h prints the usage (exit 0), any other
 * argument is a usage error (exit 2; example_args.h). */
#include <stdio.h>
#include <stdlib.h>

#include <tapegrad/tapegrad.h>

#include "example_args.h"

#define CHECK(call)                                                           \
    do {                                                                      \
        int rc_ = (call);                                                     \
        if (rc_ < 0) {                                                        \
            fprintf(stderr, "%s failed: %s: %s\n", #call, tg_status_name(rc_), \
                    tg_error_message());                                      \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static void usage(FILE *f)
{
    fprintf(f, "usage: worked_example\n"
               "Builds y = conv_transpose(x, w) + b and loss = mean(y), prints the tape,\n"
               "runs backward and prints d loss / d w and d loss / d b.  No options.\n");
}

/* 0 to run, 1 after --help, -1 after a usage error (printed). */
static int parse_args(int argc, char **argv)
{
    bool help = false;
    for (int i = 1; i < argc; i++) {
        if (ex_arg_is_help(argv[i])) {
            help = true;
            continue;
        }
        fprintf(stderr, "worked_example: unexpected argument '%s' (it takes no options)\n",
                argv[i]);
        usage(stderr);
        return -1;
    }
    if (help) usage(stdout);
    return help;
}

int main(int argc, char **argv)
{
    const int args = parse_args(argc, argv);
    if (args != 0) return args < 0 ? EX_EXIT_USAGE : EX_EXIT_OK;
    tg_tensor *x, *w, *b, *y, *loss;
    int64_t xs[] = {1, 2, 3, 3}, ws[] = {2, 1, 4, 4}, bs[] = {1};
    tg_rng rng;
    tg_rng_init(&rng, 42);

    CHECK(tg_tensor_zeros(&x, TG_F32, 4, xs));   /* x is (B=1, C_in=2, 3, 3) */
    CHECK(tg_tensor_rand_normal(x, &rng, 0.0, 1.0));
    CHECK(tg_tensor_zeros(&w, TG_F32, 4, ws));   /* w is (C_in=2, C_out=1, 4, 4) */
    CHECK(tg_tensor_rand_normal(w, &rng, 0.0, 0.1));
    CHECK(tg_tensor_zeros(&b, TG_F32, 1, bs));   /* b is (C_out=1) */
    tg_tensor_set_name(x, "x");
    tg_tensor_set_name(w, "w");
    tg_tensor_set_name(b, "b");
    CHECK(tg_tensor_set_requires_grad(w, true));
    CHECK(tg_tensor_set_requires_grad(b, true));

    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    tg_conv_params_set_padding(&p, 1);
    /* out extent = (3-1)*2 - 1 - 1 + (4-1) + 1 = 6 */
    CHECK(tg_conv_transpose(&y, x, w, b, &p));   /* y is (1, 1, 6, 6) */
    CHECK(tg_mean(&loss, y));
    printf("loss = mean(conv_transpose(x, w) + b); its tape:\n");
    CHECK(tg_tape_print(stdout, loss));
    CHECK(tg_backward(loss, NULL, NULL));

    double l;
    CHECK(tg_tensor_get_flat(loss, 0, &l));
    printf("loss = %.6f\n", l);
    printf("d loss / d w:\n");
    CHECK(tg_tensor_print(stdout, tg_tensor_grad(w), 32));
    printf("d loss / d b:\n");
    CHECK(tg_tensor_print(stdout, tg_tensor_grad(b), 4));

    tg_tensor_release(loss);
    tg_tensor_release(y);
    tg_tensor_release(b);
    tg_tensor_release(w);
    tg_tensor_release(x);
    return 0;
}
