#!/usr/bin/python3
"""Writes the PyTorch golden file of torch.unique over inputs that hold
NaNs (tests/test_unique_nan.c): tests/golden/unique_nan.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_unique_nan_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.dtype (f32
or f64) and tensors case<i>.x (1-d or 2-d, that dtype), case<i>.values
(torch.unique(x, sorted=True)), case<i>.inverse and case<i>.counts (i64).
torch 1.13's CPU unique puts the values of an input with a NaN in the
order of its hash set, then of std::sort, which a NaN leaves partly
unsorted.  The cases: the NaN first, last or in the middle, several NaNs,
-0.0 beside 0.0, repeated values, and sizes from 1 to 3000 elements
(the hash table grows from 13 buckets to 5087; std::sort switches from
insertion sort to introsort past 16 values).
"""
import os
import random
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "unique_nan.safetensors")
SEED = 7313
NAN = float("nan")

FIXED = [
    [3.0, NAN, 1.0, 2.0], [NAN, 1.0, 2.0, 3.0], [1.0, 2.0, 3.0, NAN],
    [2.0, NAN, 1.0, NAN, 3.0], [NAN, NAN, 0.0, -1.0], [5.0, 4.0, 3.0, 2.0, 1.0, NAN],
    [1.0, 1.0, NAN, 1.0], [0.0, -0.0, NAN, 1.0, -0.0], [-0.0, 0.0, NAN, -2.0],
    [NAN], [NAN, NAN, NAN], [0.5, NAN, -0.5, 2.0, NAN, 7.0, -3.0, 1.0],
]


def random_case(rng, n, spread, nans):
    xs = [rng.randint(-spread, spread) * 0.25 for _ in range(n)]
    for _ in range(nans):
        xs[rng.randrange(n)] = NAN
    return xs


def main():
    rng = random.Random(SEED)
    inputs = [(x, None) for x in FIXED]
    for n in (5, 9, 13, 14, 16, 17, 20, 31, 40, 64, 100, 200, 300):
        inputs.append((random_case(rng, n, 40, 1 + n // 8), None))
    inputs.append((random_case(rng, 24, 400, 3), (4, 6)))
    for n in (700, 1500, 3000):
        inputs.append((random_case(rng, n, 4 * n, 5 + n // 50), None))
    tensors, meta, i = {}, {}, 0
    for name, dt in (("f64", torch.float64), ("f32", torch.float32)):
        for xs, shape in inputs:
            x = torch.tensor(xs, dtype=dt)
            if shape:
                x = x.reshape(shape)
            v, inv, c = torch.unique(x, sorted=True, return_inverse=True, return_counts=True)
            p = "case%d." % i
            tensors.update({p + "x": x, p + "values": v, p + "inverse": inv, p + "counts": c})
            meta[p + "dtype"] = name
            i += 1
    meta["cases"] = str(i)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
