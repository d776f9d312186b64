#!/usr/bin/python3
"""Prints the tables of src/ops/log_simd.h: for each of the 256 buckets of
z in [0.6875, 1.375) (i < 160: [0.6875 + i 2^-9, + 2^-9); i >= 160:
[1 + (i - 160) 2^-8, + 2^-8)), TG__LOG_INVC[i] = a double near 1 / c, c
the bucket's midpoint, and TG__LOG_LOGC[i] = -log(TG__LOG_INVC[i]) rounded
to the nearest double, by mpmath at 60 digits, in C's hexadecimal notation,
four a line.

The two buckets next to 1 (i = 159, 160) take 1 and 0: there r = z - 1 is
exact and nothing cancels against log(c).  Elsewhere the double nearest 1 /
c is replaced by the double nearest (1 + t 2^-44) / c for the first t of
0, 1, -1, 2, ... whose -log is within 2^-10 ulp of a double, so that the
one double of TG__LOG_LOGC stands for it with no low part.  (Steps of a
few ulps would not do: 1 / c moving by an ulp moves its log by 4 c ulps
of the log, 4 c a multiple of 2^-8, so the log's fractions of an ulp
would take only 256 values.)  |t| stays in the thousands: |r| grows by
under 2^-30.

Run from anywhere with the system interpreter:
    /usr/bin/python3 scripts/make_log_table.py

tests/test_log_simd.c checks the committed tables against libm's logl.
"""
import math

import mpmath as mp

mp.mp.dps = 60
N = 256
SPECIAL = (159, 160)


def bucket(i):
    """The bucket's ends as mpf."""
    if i < 160:
        lo = mp.mpf(0.6875) + mp.mpf(i) / 512
        return lo, lo + mp.mpf(1) / 512
    lo = 1 + mp.mpf(i - 160) / 256
    return lo, lo + mp.mpf(1) / 256


def ulp(v):
    """The spacing of doubles at |v| (v a normal double)."""
    return math.ldexp(1.0, math.frexp(v)[1] - 53)


def entry(i):
    if i in SPECIAL:
        return 1.0, 0.0
    a, b = bucket(i)
    inv0 = 2 / (a + b)
    for step in range(1, 1 << 20):
        t = step // 2 if step % 2 == 0 else -(step // 2)
        inv = float(inv0 * (1 + mp.ldexp(t, -44)))   # rounds to nearest
        lc = -mp.log(mp.mpf(inv))
        d = float(lc)
        if abs(lc - mp.mpf(d)) <= mp.ldexp(mp.mpf(ulp(d)), -10):
            return inv, d
    raise SystemExit(f"bucket {i}: no candidate")


def main():
    inv, logc = [], []
    for i in range(N):
        a, b = entry(i)
        inv.append(a.hex())
        logc.append(b.hex())
    for name, tab in (("TG__LOG_INVC", inv), ("TG__LOG_LOGC", logc)):
        print(f"{name}:")
        for i in range(0, N, 4):
            print("    " + ", ".join(tab[i:i + 4]) + ",")


if __name__ == "__main__":
    main()
