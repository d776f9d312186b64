/* The random inputs of the quant test files; see quant_fixtures.h. */
#include "quant_fixtures.h"

#include "helpers.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;   /* each test starts from it (fork) */

double rnd(void) { return th_uniform_pm1(&rng_state); }

tg_tensor *mk(tg_dtype dt, int nd, const int64_t *shape, double lo, double hi)
{
    return th_rand_tensor(&rng_state, dt, nd, shape, lo, hi);
}
