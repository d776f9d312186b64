#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_split, tg_split_size, tg_chunk and
tg_unbind (tests/test_split.c): tests/golden/split.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_split_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.op (split,
split_size, chunk or unbind), case<i>.arg (split's sizes comma separated,
or the one integer of split_size and chunk; "" for unbind), case<i>.dim and
case<i>.n (the number of pieces torch makes), and f64 tensors case<i>.x,
case<i>.piece<k> (the pieces, contiguous), case<i>.w<k> (a weight of each
piece's shape) and case<i>.dx, the gradient of sum_k sum(w<k> * piece<k>)
with respect to x.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "split.safetensors")
SEED = 4127

# (shape, op, arg, dim): uneven and even cuts, negative dims, empty pieces
# and extents, chunks that do not fit the extent evenly (fewer pieces)
CASES = [
    ((7,), "split", (2, 0, 5), 0),
    ((3, 5, 2), "split", (1, 4), 1),
    ((3, 5, 2), "split", (2, 1), -3),
    ((4, 6), "split", (6,), -1),
    ((5,), "split_size", 2, 0),
    ((2, 6, 3), "split_size", 3, 1),
    ((2, 6, 3), "split_size", 7, -2),
    ((4, 0), "split_size", 0, 1),
    ((4, 0), "split_size", 3, -1),
    ((5,), "chunk", 3, 0),
    ((6, 2), "chunk", 4, 0),
    ((2, 3, 4), "chunk", 5, 1),
    ((2, 3, 4), "chunk", 2, -1),
    ((0, 3), "chunk", 3, 0),
    ((3, 4), "unbind", None, 0),
    ((2, 3, 4), "unbind", None, -1),
    ((2, 1, 3), "unbind", None, 1),
    ((0, 2), "unbind", None, 0),
]


def cut(x, op, arg, dim):
    if op == "split":
        return torch.split(x, list(arg), dim)
    if op == "split_size":
        return torch.split(x, arg, dim)
    if op == "chunk":
        return torch.chunk(x, arg, dim)
    return torch.unbind(x, dim)


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    for i, (shape, op, arg, dim) in enumerate(CASES):
        x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
        pieces = cut(x, op, arg, dim)
        ws = [torch.randn(p.shape, dtype=torch.float64) for p in pieces]
        loss = sum(((p * w).sum() for p, w in zip(pieces, ws)), x.sum() * 0)
        (dx,) = torch.autograd.grad(loss, x)
        tensors["case%d.x" % i] = x.detach()
        tensors["case%d.dx" % i] = dx
        for k, (p, w) in enumerate(zip(pieces, ws)):
            tensors["case%d.piece%d" % (i, k)] = p.detach().contiguous()
            tensors["case%d.w%d" % (i, k)] = w
        text = "" if arg is None else ",".join(str(a) for a in arg) if op == "split" else str(arg)
        meta.update({"case%d.op" % i: op, "case%d.arg" % i: text,
                     "case%d.dim" % i: str(dim), "case%d.n" % i: str(len(pieces))})
    meta["cases"] = str(len(CASES))
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
