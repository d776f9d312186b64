/* tests/dtype_fixtures.c - bit views and f16 references shared by
 * test_dtype.c and test_dtype_bulk.c (dtype_fixtures.h). */
#include "dtype_fixtures.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <string.h>

uint32_t bits_of(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

float float_of(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

uint64_t bits64_of(double d)
{
    uint64_t x;
    memcpy(&x, &d, sizeof x);
    return x;
}

/* The value of an f16 bit pattern computed from the IEEE definition, not from
 * bit shuffling: subnormals are mant * 2^-24, normals (1024 + mant) * 2^(e-25). */
double f16_value(uint16_t h)
{
    int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    double s = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 31) return m ? NAN : s * INFINITY;
    if (e == 0) return s * ldexp(m, -24);
    return s * ldexp(1024 + m, e - 25);
}

bool f16_is_nan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0; }

void check_nearest_even(double v, uint16_t h, const char *what)
{
    double got = f16_value(h);
    if (isinf(got)) {
        if (fabs(v) < 65520.0 || !!signbit(got) != !!signbit(v)) cr_fatal("%s %.17g -> inf", what, v);
        return;
    }
    if (got != 0 && !!signbit(got) != !!signbit(v)) cr_fatal("%s %.17g: sign", what, v);
    double err = fabs(got - v);
    uint16_t mag = h & 0x7FFF;
    double up = f16_value((uint16_t)(mag + 1)), dn = mag ? f16_value((uint16_t)(mag - 1)) : 0;
    double eu = fabs(up - fabs(v)), ed = fabs(fabs(v) - dn);
    if (err > eu || err > ed || ((err == eu || err == ed) && (h & 1)))
        cr_fatal("%s %.17g -> 0x%04x: not nearest-even", what, v, h);
}
