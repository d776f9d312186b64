#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_flip (tests/test_flip.c):
tests/golden/flip.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_flip_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.dims (the
dims as given, comma separated, "" for none) and tensors case<i>.x (f64,
or i64 where the metadata case<i>.int is "1") and case<i>.y = torch.flip(x,
dims).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "flip.safetensors")
SEED = 7933

# (shape, dims, integer): one dim, several (negative too), all, none, the
# last dim alone, a 0-d and an empty x, an 8-d x
CASES = [
    ((5,), (0,), False),
    ((2, 3, 4), (1,), False),
    ((2, 3, 4), (0, -1), False),
    ((2, 3, 4, 5), (-1,), False),
    ((2, 3, 4, 5), (3, 0, 2), False),
    ((3, 4), (), False),
    ((), (0,), False),
    ((2, 0, 3), (1, 2), False),
    ((2, 1, 2, 1, 2, 1, 2, 3), (0, 2, 4, 6, 7), False),
    ((3, 5), (1,), True),
]


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    for i, (shape, dims, integer) in enumerate(CASES):
        x = torch.randn(shape, dtype=torch.float64)
        if integer:
            x = torch.arange(x.numel(), dtype=torch.int64).reshape(shape) * 7 - 20
        tensors.update({"case%d.x" % i: x, "case%d.y" % i: torch.flip(x, dims).contiguous()})
        meta.update({"case%d.dims" % i: ",".join(str(d) for d in dims),
                     "case%d.int" % i: "1" if integer else "0"})
    meta["cases"] = str(len(CASES))
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
