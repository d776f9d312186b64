#!/usr/bin/python3
"""Prints the polynomial of src/ops/unary_simd.c's erfcx (ERFCX_C, ERFCX_S),
computed with mpmath at 40 digits.

Run from anywhere with the system interpreter:
    /usr/bin/python3 scripts/make_erfcx_coeffs.py

erfcx(z) = exp(z^2) erfc(z) for z in [0, 11] is written as
    erfcx(z) = 2 / (1 + 2 z) * h(u),  u = S z / (z + 3) - 1 in [-1, 1],
S = 2 / (t_max + 1), t_max = (11 - 3) / (11 + 3): h(u) interpolates at the
N = 20 Chebyshev nodes, expanded in powers of u (evaluated as its even and
odd parts in u^2, each by Horner's rule).  The
check below evaluates it as the C code does, in double, against mpmath at
3000 points of [0, 11]; tests/test_unary_simd.c checks gelu against
libm's erfc over a dense sweep of f32.
"""
import random

import mpmath as mp

from chebfit import cheb_monomials

mp.mp.dps = 40
N = 20
L = mp.mpf(3)
ZMAX = mp.mpf(11)
TMAX = (ZMAX - L) / (ZMAX + L)


def h(u):
    t = (u + 1) / 2 * (TMAX + 1) - 1
    z = L * (1 + t) / (1 - t)
    return mp.erfc(z) * mp.exp(z * z) * (1 + 2 * z) / 2


def main():
    mono = cheb_monomials(h, N)   # in powers of u
    mf = [float(x) for x in mono]
    # u = (t + 1) 2 / (TMAX + 1) - 1, t + 1 = 2 z / (z + L)
    s = float(4 / (TMAX + 1))

    def ev(z):
        # the even and odd parts in u^2 (the C code fuses each step's
        # multiply and add)
        u = s * z / (z + 3.0) - 1.0
        w = u * u
        pe, po = mf[N - 2], mf[N - 1]
        for j in range(N - 4, -1, -2):
            pe = pe * w + mf[j]
            po = po * w + mf[j + 1]
        return 2.0 * (po * u + pe) / (1.0 + 2.0 * z)

    random.seed(1)
    worst = 0.0
    for i in range(3000):
        z = random.random() * 11 if i % 2 else 10 ** random.uniform(-8, 1.04)
        ref = mp.erfc(z) * mp.exp(mp.mpf(z) ** 2)
        worst = max(worst, float(abs(ev(z) - ref) / ref))
    print("/* N = %d, L = %s, z in [0, %s]; worst relative error sampled: %.2g */"
          % (N, L, ZMAX, worst))
    print("#define ERFCX_S %s" % s.hex())
    for j, x in enumerate(mf):
        print("    %s,%s" % (x.hex(), "   /* u^0 */" if j == 0 else ""))


if __name__ == "__main__":
    main()
