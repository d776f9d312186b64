/* tests/dtype_fixtures.h - bit views and f16 references shared by
 * test_dtype.c and test_dtype_bulk.c. */
#ifndef TAPEGRAD_TESTS_DTYPE_FIXTURES_H
#define TAPEGRAD_TESTS_DTYPE_FIXTURES_H

#include <stdbool.h>
#include <stdint.h>

/* The bits of an f32 / f64, and the f32 of 32 bits. */
uint32_t bits_of(float f);
float float_of(uint32_t x);
uint64_t bits64_of(double d);
/* The value of an f16 bit pattern computed from the IEEE definition, not from
 * bit shuffling: subnormals are mant * 2^-24, normals (1024 + mant) * 2^(e-25). */
double f16_value(uint16_t h);
bool f16_is_nan(uint16_t h);
/* Fails the test (what names the path) unless h is the f16 nearest to v,
 * ties to the even mantissa, checked against its neighbours. */
void check_nearest_even(double v, uint16_t h, const char *what);

#endif
