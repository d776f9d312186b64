#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_pixel_shuffle and tg_pixel_unshuffle
(tests/test_pixel_shuffle.c): tests/golden/pixel_shuffle.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_pixel_shuffle_goldens.py

Case "case<i>", i < the metadata "cases", with metadata
  case<i>.op   "shuffle" or "unshuffle"
  case<i>.r    the factor
and tensors (f64): case<i>.x and case<i>.y, F.pixel_shuffle(x, r) or
F.pixel_unshuffle(x, r).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "pixel_shuffle.safetensors")
SEED = 7919

# (op, x shape, r): batched, unbatched and with two leading dims
CASES = [
    ("shuffle", (2, 8, 3, 4), 2),
    ("shuffle", (18, 2, 3), 3),
    ("shuffle", (2, 3, 4, 2, 2), 2),
    ("shuffle", (1, 3, 2, 2), 1),
    ("unshuffle", (2, 2, 6, 4), 2),
    ("unshuffle", (3, 6, 9), 3),
    ("unshuffle", (2, 1, 2, 4, 6), 2),
]


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    for i, (op, shape, r) in enumerate(CASES):
        x = torch.randn(*shape, dtype=torch.float64)
        y = F.pixel_shuffle(x, r) if op == "shuffle" else F.pixel_unshuffle(x, r)
        tensors.update({"case%d.x" % i: x, "case%d.y" % i: y.contiguous()})
        meta.update({"case%d.op" % i: op, "case%d.r" % i: str(r)})
    meta["cases"] = str(len(CASES))
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
