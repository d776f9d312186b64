#!/usr/bin/python3
"""Prints the table of src/ops/exp_simd.h (TG__EXP2_TAB): 2^(j / 32) for
j = 0..31, each the double nearest the exact value (mpmath at 40 digits),
in C's hexadecimal notation.

Run from anywhere with the system interpreter:
    /usr/bin/python3 scripts/make_exp_table.py

tests/test_exp_simd.c checks the committed table against libm's exp2l.
"""
import mpmath as mp

mp.mp.dps = 40
N = 32


def main():
    for j in range(N):
        v = float(mp.power(2, mp.mpf(j) / N))   # mpf -> float rounds to nearest
        print(f"    {v.hex()},   /* 2^({j}/32) */")


if __name__ == "__main__":
    main()
