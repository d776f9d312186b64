/* src/ops/families.c - the one list of the built-in op families.  Each is a
 * const table of schemas in the file that defines its ops; all of them go
 * through tg_op_register, the call a program's own op uses. */
#include <assert.h>

#include "core/core.h"
#include "ops/dispatch.h"
#include "ops/families.h"

typedef struct op_family {
    const char *name;
    const tg_op_schema *const *ops;
    int n;
} op_family;

#define TG__FAMILY_ENTRY(fam, count) {#fam, tg__##fam##_ops, count},
static const op_family families[] = {TG__OP_FAMILIES(TG__FAMILY_ENTRY)};
#undef TG__FAMILY_ENTRY

int tg__register_builtin_ops(void)
{
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (int i = 0; i < families[f].n; i++) TG_TRY(tg_op_register(families[f].ops[i]));
    return TG_OK;
}
