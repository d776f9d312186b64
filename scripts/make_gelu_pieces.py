#!/usr/bin/python3
"""Prints the piecewise polynomials of src/ops/unary_simd.c's f32 gelu and
its gradient (GELU_F, GELU_D), computed with mpmath at 40 digits.

Run from the repository's root with the system interpreter; it writes the
whole header:
    /usr/bin/python3 scripts/make_gelu_pieces.py > src/ops/gelu_pieces.h

For a = |x| in [0, 5.8125] and k = round(a / W), W = 0.375, t = a - k W
(exact for an f32 x), piece k holds two polynomials of degree 15 in t:
    F(a) = erfc(a / sqrt 2) / 2          (Phi(-a); Phi(a) = 1 - F(a))
    D(a) = F(a) - a phi(a)               (gelu'(-a); gelu'(a) = 1 - D(a)),
phi(a) = exp(-a^2 / 2) / sqrt(2 pi).  Each interpolates at 16 Chebyshev
nodes of [k W - H, k W + H], H = 1.02 W / 2 (a little past the piece, for
a rounding of k at its edge), expanded in powers of t.  The check below
measures each polynomial with its coefficients rounded to double against
mpmath (F relative to F, D relative to F + a phi, the size of its terms)
at 400 points of each piece; tests/test_unary_simd.c checks gelu and its
gradient against libm over a sweep of f32, tests/test_gelu_pieces.c the
polynomials alone, evaluated as the kernels do, against long double over
each piece and at its edges.
"""
import mpmath as mp

from chebfit import cheb_monomials

mp.mp.dps = 40
N = 16         # coefficients per polynomial
PIECES = 16
W = mp.mpf(3) / 8
H = W / 2 * mp.mpf("1.02")


def F(a):
    return mp.erfc(a / mp.sqrt(2)) / 2


def phi(a):
    return mp.exp(-a * a / 2) / mp.sqrt(2 * mp.pi)


def D(a):
    return F(a) - a * phi(a)


def fit(f, c):
    """Monomial coefficients in t = a - c of f's interpolant on [c-H, c+H]."""
    mono = cheb_monomials(lambda x: f(c + H * x), N)
    return [float(m / H ** i) for i, m in enumerate(mono)]   # s = t / H


def worst(f, scale, coefs, c):
    w = mp.mpf(0)
    for i in range(401):
        t = -W / 2 + W * i / 400
        if c + t < 0:
            continue
        p = mp.mpf(0)
        for x in reversed(coefs):
            p = p * t + mp.mpf(x)
        w = max(w, abs(p - f(c + t)) / scale(c + t))
    return w


HEAD = """/* src/ops/gelu_pieces.h - the piecewise polynomials of src/ops/unary_simd.c's
 * f32 gelu and its gradient; written by scripts/make_gelu_pieces.py (do not
 * edit).  Internal to src/ops.
 *
 * For a = |x| <= 5.8, k = round(a / 0.375) in 0..15, t = a - 0.375 k:
 *   F(a) = erfc(a / sqrt2) / 2 = sum_j GELU_F[j][k] t^j   (Phi(-a))
 *   D(a) = F(a) - a phi(a)     = sum_j GELU_D[j][k] t^j   (gelu'(-a)),
 * phi(a) = exp(-a^2 / 2) / sqrt(2 pi), each of degree 15 by Horner's rule;
 * GELU_FP and GELU_DP hold the same coefficients piece by piece.
 */
#ifndef TAPEGRAD_OPS_GELU_PIECES_H
#define TAPEGRAD_OPS_GELU_PIECES_H

enum { GELU_N = 16, GELU_PIECES = 16 };   /* coefficients, pieces */
"""


def main():
    print(HEAD)
    for name, f, scale in (("GELU_F", F, F), ("GELU_D", D, lambda a: F(a) + a * phi(a))):
        table = []
        err = mp.mpf(0)
        for k in range(PIECES):
            c = k * W
            co = fit(f, c)
            err = max(err, worst(f, scale, co, c))
            table.append(co)
        print("/* %s: worst relative error of the rounded coefficients %.2g */"
              % (name, float(err)))
        print("static const double %s[GELU_N][GELU_PIECES]" % name)
        print("    __attribute__((aligned(64), unused)) = {")
        for j in range(N):
            print("    {   /* t^%d */" % j)
            for k0 in range(0, PIECES, 3):
                print("        %s," % ", ".join(table[k][j].hex()
                                            for k in range(k0, min(k0 + 3, PIECES))))
            print("    },")
        print("};")
        print("/* The same by piece (the AVX2 width's loads): %sP[k][j] = %s[j][k]. */"
              % (name, name))
        print("static const double %sP[GELU_PIECES][GELU_N]" % name)
        print("    __attribute__((aligned(64), unused)) = {")
        for k in range(PIECES):
            print("    {   /* piece %d */" % k)
            for j0 in range(0, N, 3):
                print("        %s," % ", ".join(table[k][j].hex()
                                            for j in range(j0, min(j0 + 3, N))))
            print("    },")
        print("};")
        print()
    print("#endif")


if __name__ == "__main__":
    main()
