/* tools/cmd_info.c - `tapegrad info FILE.safetensors...`: each tensor's name,
 * dtype, shape and byte size, then the metadata as key = value lines. */
#include <stdio.h>
#include <string.h>

#include "tapegrad/safetensors.h"
#include "tapegrad/tensor.h"
#include "tools.h"

static const char info_usage[] =
    "usage: tapegrad info FILE.safetensors...\n"
    "Lists each tensor (name, dtype, shape, bytes) and the metadata of each file.\n";

static void print_file(const char *path, const tg_st_file *f)
{
    int n = tg_st_count(f), w = 6;
    const char *name, *key, *val;
    tg_tensor *t;
    for (int i = 0; i < n; i++) {
        tg_st_at(f, i, &name, &t);
        if ((int)strlen(name) > w) w = (int)strlen(name);
    }
    printf("%s: %d tensor%s, %d metadata entr%s\n", path, n, n == 1 ? "" : "s",
           tg_st_meta_count(f), tg_st_meta_count(f) == 1 ? "y" : "ies");
    if (n > 0) printf("  %-*s  %-5s  %-24s %12s\n", w, "tensor", "dtype", "shape", "bytes");
    long long total = 0;
    for (int i = 0; i < n; i++) {
        char shape[160];
        tg_st_at(f, i, &name, &t);
        const tg_dtype_traits *tr = tg_dtype_get_traits(tg_tensor_dtype(t));
        long long bytes = (long long)tg_tensor_numel(t) * (long long)tr->size;
        total += bytes;
        tg_shape_str(shape, sizeof shape, tg_tensor_ndim(t), tg_tensor_shape(t));
        printf("  %-*s  %-5s  %-24s %12lld\n", w, name, tr->st_name, shape, bytes);
    }
    if (n > 0) printf("  %-*s  %-5s  %-24s %12lld\n", w, "total", "", "", total);
    for (int i = 0; i < tg_st_skipped_count(f); i++) {
        const char *dt;
        tg_st_skipped_at(f, i, &name, &dt);
        printf("  skipped: %s (%s, a dtype tapegrad does not load)\n", name, dt);
    }
    for (int i = 0; i < tg_st_meta_count(f); i++) {
        tg_st_meta_at(f, i, &key, &val);
        printf("  %s = %s\n", key, val);
    }
}

int tg_cmd_info(int argc, char **argv)
{
    int nfiles = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(info_usage, stdout);
            return TG_EXIT_OK;
        }
        if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "tapegrad info: unknown option '%s'\n%s", argv[i], info_usage);
            return TG_EXIT_USAGE;
        }
        nfiles++;
    }
    if (nfiles == 0) {
        fprintf(stderr, "tapegrad info: no file given\n%s", info_usage);
        return TG_EXIT_USAGE;
    }
    int code = TG_EXIT_OK;
    for (int i = 1; i < argc; i++) {
        tg_st_file *f = NULL;
        if (tg_safetensors_load(&f, argv[i]) < 0) {
            fprintf(stderr, "tapegrad: %s: %s\n", argv[i], tg_error_message());
            code = TG_EXIT_FAIL;
            continue;
        }
        print_file(argv[i], f);
        tg_st_free(f);
    }
    return code;
}
