#!/usr/bin/python3
"""Prints the tables of src/ops/exp_simd.h: TG__EXP2_TAB, 2^(j / 32) for
j = 0..31, each the double nearest the exact value, and TG__EXP2_TAB_LO,
the double nearest what is left (2^(j / 32) minus the first), by mpmath at
50 digits, in C's hexadecimal notation, four a line.

Run from anywhere with the system interpreter:
    /usr/bin/python3 scripts/make_exp_table.py

tests/test_exp_simd.c checks the committed tables against libm's exp2l.
"""
import mpmath as mp

mp.mp.dps = 50
N = 32


def main():
    hi, lo = [], []
    for j in range(N):
        v = mp.power(2, mp.mpf(j) / N)
        h = float(v)                    # mpf -> float rounds to nearest
        hi.append(h.hex())
        lo.append(float(v - mp.mpf(h)).hex())
    for name, tab in (("TG__EXP2_TAB", hi), ("TG__EXP2_TAB_LO", lo)):
        print(f"{name}:")
        for i in range(0, N, 4):
            print("    " + ", ".join(tab[i:i + 4]) + ",")


if __name__ == "__main__":
    main()
