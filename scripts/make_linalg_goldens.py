#!/usr/bin/python3
"""Writes the PyTorch golden file of the linear-algebra ops
(tests/test_linalg2.c): tests/golden/linalg.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_linalg_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.op (matmul,
mm, bmm, mv, dot, outer, addmm, baddbmm, tril, triu or einsum),
case<i>.dtype (f32, f64 or bf16), case<i>.n (the number of tensor inputs)
and case<i>.arg (einsum's equation, addmm's and baddbmm's "beta,alpha",
tril's and triu's diagonal, else ""), and tensors in that dtype:
case<i>.in<k> (the inputs), case<i>.g (the gradient of y), case<i>.y (the
op's result) and case<i>.d<k>, torch.autograd's gradient of sum(g * y)
with respect to in<k>.

matmul covers every shape rule of torch.matmul: 1-d x 1-d, 1-d x 2-d,
2-d x 1-d, 2-d x 2-d, batched with and without broadcasting, an N-d x
2-d product (folded), 1-d against batched operands and empty extents
(K = 0 included).  einsum covers explicit and implicit outputs, sums,
transposes, outer products, batch labels, three operands, diagonals,
"...", size-1 dims broadcast, upper-case letters and spaces.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "linalg.safetensors")
SEED = 7301
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}

MATMUL = [
    ((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)),
    ((2, 2, 3), (2, 3, 4)), ((2, 1, 3, 4), (5, 4, 6)), ((4,), (2, 4, 5)),
    ((2, 3, 4), (4,)), ((2, 3, 4), (4, 5)), ((3, 2, 3, 4), (4, 5)),
    ((3, 4), (2, 4, 5)), ((1, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (1, 5, 4, 2)),
    ((0, 3), (3, 2)), ((2, 3), (3, 0)), ((2, 0), (0, 3)), ((2, 0, 3, 4), (4, 2)),
    ((5,), (3, 5, 1)),
]
PRODUCTS = [
    ("mm", ((3, 4), (4, 2)), ""), ("bmm", ((2, 3, 4), (2, 4, 5)), ""),
    ("mv", ((3, 4), (4,)), ""), ("dot", ((5,), (5,)), ""), ("outer", ((3,), (4,)), ""),
    ("addmm", ((3, 2), (3, 4), (4, 2)), "1,1"), ("addmm", ((2,), (3, 4), (4, 2)), "0.5,2"),
    ("addmm", ((3, 1), (3, 4), (4, 2)), "0,-1.5"), ("addmm", ((), (3, 4), (4, 2)), "2,1"),
    ("baddbmm", ((2, 3, 5), (2, 3, 4), (2, 4, 5)), "1,1"),
    ("baddbmm", ((3, 1), (2, 3, 4), (2, 4, 5)), "-0.5,0.25"),
    ("baddbmm", ((5,), (2, 3, 4), (2, 4, 5)), "0,1"),
]
TRI_SHAPES = [(4, 5), (5, 3), (2, 3, 4), (2, 1, 3, 3), (0, 3), (3, 1)]
TRI_DIAGS = [0, 1, -1, 2, -3, 10, -10]
EINSUM = [
    ("ij,jk->ik", ((3, 4), (4, 2))), ("ij,jk", ((3, 4), (4, 2))),
    ("bij,bjk->bik", ((2, 3, 4), (2, 4, 5))), ("i,i->", ((5,), (5,))),
    ("i,j->ij", ((3,), (4,))), ("ij->ji", ((3, 4),)), ("ij->", ((3, 4),)),
    ("ij->j", ((3, 4),)), ("ji", ((3, 4),)), ("ii->i", ((4, 4),)), ("ii", ((4, 4),)),
    ("bii->bi", ((2, 3, 3),)), ("iij->j", ((3, 3, 2),)), ("ij,jk,kl->il", ((2, 3), (3, 4), (4, 5))),
    ("bhqd,bhkd->bhqk", ((2, 3, 4, 5), (2, 3, 6, 5))), ("abc,cd->abd", ((2, 3, 4), (4, 5))),
    ("...ij,...jk->...ik", ((2, 1, 3, 4), (5, 4, 2))), ("...ij->...ji", ((2, 3, 4),)),
    ("...ij->j", ((2, 3, 4),)), ("b...,b...->b...", ((2, 3), (2, 1, 3))),
    ("ij,jk->ik", ((3, 1), (5, 4))), ("Ab,bC", ((2, 3), (3, 4))),
    (" i j , j k -> k i ", ((3, 4), (4, 2))), ("ij,ij->ij", ((3, 4), (3, 4))),
    ("ijk,jl->lik", ((2, 3, 4), (3, 5))), ("ij,kl->ijkl", ((2, 3), (1, 2))),
    ("i,ij,j->", ((3,), (3, 4), (4,))), ("...", ((2, 3),)), ("ab...,b->a...", ((2, 3, 4, 5), (3,))),
]


def rand(shape, dt):
    return (torch.rand(shape, dtype=torch.float64) * 4 - 2).to(dt)


def run(op, arg, xs):
    if op == "matmul":
        return torch.matmul(*xs)
    if op in ("mm", "bmm", "mv", "dot", "outer"):
        return getattr(torch, op)(*xs)
    if op in ("addmm", "baddbmm"):
        beta, alpha = (float(v) for v in arg.split(","))
        return getattr(torch, op)(*xs, beta=beta, alpha=alpha)
    if op in ("tril", "triu"):
        return getattr(torch, op)(xs[0], int(arg))
    return torch.einsum(arg, *xs)


def main():
    torch.manual_seed(SEED)
    cases = []
    for name in DTYPES:
        for shapes in MATMUL:
            cases.append(("matmul", name, shapes, ""))
    for name in ("f32", "f64"):
        for op, shapes, arg in PRODUCTS:
            cases.append((op, name, shapes, arg))
        for shape in TRI_SHAPES:
            for d in TRI_DIAGS:
                for op in ("tril", "triu"):
                    cases.append((op, name, (shape,), str(d)))
        for eq, shapes in EINSUM:
            cases.append(("einsum", name, shapes, eq))
    tensors, meta = {}, {}
    for i, (op, name, shapes, arg) in enumerate(cases):
        dt = DTYPES[name]
        xs = [rand(s, dt) for s in shapes]
        xr = [x.clone().requires_grad_() for x in xs]
        y = run(op, arg, xr)
        g = rand(y.shape, dt)
        ds = torch.autograd.grad(y, xr, g, allow_unused=True)
        p = "case%d." % i
        for k, x in enumerate(xs):
            tensors[p + "in%d" % k] = x
            d = ds[k] if ds[k] is not None else torch.zeros_like(x)
            tensors[p + "d%d" % k] = d.detach().contiguous()
        tensors[p + "y"] = y.detach().contiguous()
        tensors[p + "g"] = g
        meta.update({p + "op": op, p + "dtype": name, p + "n": str(len(xs)), p + "arg": arg})
    meta["cases"] = str(len(cases))
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
