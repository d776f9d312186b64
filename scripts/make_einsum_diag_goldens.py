#!/usr/bin/python3
"""Writes the PyTorch golden file of einsum's diagonals and long equations
(tests/test_einsum_diag.c): tests/golden/einsum_diag.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_einsum_diag_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.eq (the
equation), case<i>.dtype (f32 or f64) and case<i>.n (the number of
operands), and tensors in that dtype: case<i>.in<k> (the operands),
case<i>.g (the gradient of y), case<i>.y (torch.einsum's result) and
case<i>.d<k>, torch.autograd's gradient of sum(g * y) with respect to
in<k>.

The cases: a letter repeated two and three times in a term, two repeated
letters in one term, repeats beside "...", a batch letter or a contraction
with another operand, an operand of eight dims with four repeats, and an
equation using all 52 letters over seven operands.
"""
import os
import string
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "einsum_diag.safetensors")
SEED = 7307
DTYPES = {"f32": torch.float32, "f64": torch.float64}


def all_letters():
    """Seven terms over 'A'..'Z' then 'a'..'z' (8 letters each, 4 in the
    last), extents 1 or 2; the output two of them."""
    letters = string.ascii_uppercase + string.ascii_lowercase
    terms, shapes = [], []
    for k in range(0, 52, 8):
        t = letters[k:k + 8]
        terms.append(t)
        shapes.append(tuple(1 + (ord(c) % 2) for c in t))
    return (",".join(terms) + "->Az", tuple(shapes))


CASES = [
    ("iii->i", ((3, 3, 3),)), ("iii", ((2, 2, 2),)), ("iji->j", ((3, 2, 3),)),
    ("jii->ij", ((2, 3, 3),)), ("aabb->ab", ((2, 2, 3, 3),)), ("abab->ab", ((2, 3, 2, 3),)),
    ("ijji->", ((2, 3, 3, 2),)), ("...ii->...i", ((2, 3, 3),)), ("ii...->i...", ((3, 3, 2),)),
    ("ii,ij->j", ((3, 3), (3, 4))), ("bii,bij->bj", ((2, 3, 3), (2, 3, 4))),
    ("iij,jj->i", ((3, 3, 2), (2, 2))), ("ii,jj->ij", ((3, 3), (2, 2))),
    ("iI,Ii->", ((3, 2), (2, 3))), ("bii->bi", ((2, 1, 1),)),
    ("aabbccdd->abcd", ((2, 2, 3, 3, 1, 1, 2, 2),)),
    ("aabbccdd->dcba", ((2, 2, 1, 1, 3, 3, 2, 2),)),
    ("abcdefgh->hgfedcba", ((2, 1, 2, 1, 2, 1, 2, 1),)),
    all_letters(),
]


def rand(shape, dt):
    return (torch.rand(shape, dtype=torch.float64) * 4 - 2).to(dt)


def main():
    torch.manual_seed(SEED)
    tensors, meta, i = {}, {}, 0
    for name, dt in DTYPES.items():
        for eq, shapes in CASES:
            xs = [rand(s, dt) for s in shapes]
            xr = [x.clone().requires_grad_() for x in xs]
            y = torch.einsum(eq, *xr)
            g = rand(y.shape, dt)
            ds = torch.autograd.grad(y, xr, g)
            p = "case%d." % i
            for k, x in enumerate(xs):
                tensors[p + "in%d" % k] = x
                tensors[p + "d%d" % k] = ds[k].detach().contiguous()
            tensors[p + "y"] = y.detach().contiguous()
            tensors[p + "g"] = g
            meta.update({p + "eq": eq, p + "dtype": name, p + "n": str(len(xs))})
            i += 1
    meta["cases"] = str(i)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
