"""Chebyshev interpolation for the generators of polynomial kernels
(make_erfcx_coeffs.py, make_gelu_pieces.py), in mpmath at the caller's
precision."""
import mpmath as mp


def cheb_monomials(g, n):
    """Monomial coefficients, in s on [-1, 1], of the degree n - 1 polynomial
    that interpolates g at the n Chebyshev nodes cos(pi (k + 1/2) / n): the
    Chebyshev series from the values, then each T_j expanded in powers of s."""
    nodes = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]
    vals = [g(x) for x in nodes]
    cheb = [2 * sum(vals[k] * mp.cos(mp.pi * j * (k + mp.mpf(1) / 2) / n)
                    for k in range(n)) / n for j in range(n)]
    cheb[0] /= 2
    polys = [[mp.mpf(1)], [mp.mpf(0), mp.mpf(1)]]   # T_j in powers of s
    for j in range(2, n):
        nxt = [mp.mpf(0)] * (j + 1)
        for i, a in enumerate(polys[-1]):
            nxt[i + 1] += 2 * a
        for i, a in enumerate(polys[-2]):
            nxt[i] -= a
        polys.append(nxt)
    mono = [mp.mpf(0)] * n
    for j in range(n):
        for i, a in enumerate(polys[j]):
            mono[i] += cheb[j] * a
    return mono
