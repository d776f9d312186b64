#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_gather, tg_scatter_add,
tg_index_select and tg_index_add (tests/test_gather.c):
tests/golden/gather.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_gather_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.op
("gather", "scatter_add", "index_select" or "index_add"), case<i>.dtype
(f32, f64 or bf16) and case<i>.dim (as passed: negative dims too), and
tensors case<i>.x, case<i>.index (i64), case<i>.src (the two adding ops),
case<i>.g (the gradient of y), case<i>.y (the op's result) and
case<i>.dx, case<i>.dsrc (torch.autograd's gradients of sum(g * y)).

x has ranks 1 to 4, each dim in turn, positive and negative; the index
values repeat (more values than x's extent at dim), so the adding ops sum
several terms into one element.  For gather and scatter_add the index is
smaller than x at the other dims where x's extent is above 1.

Case "sum<i>", i < the metadata "sums" (the same metadata and tensors):
scatter_add, index_add and gather in f16 and bf16, x of shape (3, 5) at
dim 0 and 1, with an index of 300 values at dim, so that each added
element gets about a hundred terms (for gather, its gradient does): torch
adds each term in f32 and rounds the sum to the dtype, term by term in
the index's order, which a sum rounded once does not give.  From their
own generator, after the other cases.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "gather.safetensors")
SEED = 4127
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}
SHAPES = ((4,), (3, 4), (3, 4, 2), (2, 3, 2, 3))
PICKED = 6   # index values per row at dim: more than any extent, so repeats


def index_for(op, xshape, d):
    """The index of op for x of xshape at dim d (non-negative)."""
    if op in ("index_select", "index_add"):
        return torch.randint(0, xshape[d], (PICKED,), dtype=torch.int64)
    ishape = [PICKED if k == d else max(1, s - (k % 2)) for k, s in enumerate(xshape)]
    return torch.randint(0, xshape[d], ishape, dtype=torch.int64)


def run(op, x, dim, index, src):
    if op == "gather":
        return torch.gather(x, dim, index)
    if op == "scatter_add":
        return torch.scatter_add(x, dim, index, src)
    if op == "index_select":
        return torch.index_select(x, dim, index)
    return torch.index_add(x, dim, index, src)


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    i = 0
    for name, dt in DTYPES.items():
        for op in ("gather", "scatter_add", "index_select", "index_add"):
            for shape in SHAPES:
                r = len(shape)
                for dim in range(-r, r):
                    d = dim % r
                    index = index_for(op, shape, d)
                    x = (torch.randn(shape, dtype=torch.float64) * 2).to(dt).requires_grad_()
                    src = None
                    if op == "scatter_add":
                        src = torch.randn(index.shape, dtype=torch.float64).to(dt)
                    elif op == "index_add":
                        sshape = list(shape)
                        sshape[d] = PICKED
                        src = torch.randn(sshape, dtype=torch.float64).to(dt)
                    if src is not None:
                        src.requires_grad_()
                    y = run(op, x, dim, index, src)
                    g = torch.randn(y.shape, dtype=torch.float64).to(dt)
                    wrt = (x,) if src is None else (x, src)
                    grads = torch.autograd.grad(y, wrt, g)
                    p = "case%d." % i
                    out = {"x": x, "index": index, "g": g, "y": y, "dx": grads[0]}
                    if src is not None:
                        out.update({"src": src, "dsrc": grads[1]})
                    for k, v in out.items():
                        tensors[p + k] = v.detach().contiguous()
                    meta.update({p + "op": op, p + "dtype": name, p + "dim": str(dim)})
                    i += 1
    meta["cases"] = str(i)
    sum_cases(tensors, meta)
    write_safetensors(OUT, tensors, meta)


def sum_cases(tensors, meta):
    gen = torch.Generator().manual_seed(SEED + 1)
    i = 0
    for name, dt in (("f16", torch.float16), ("bf16", torch.bfloat16)):
        for op in ("scatter_add", "index_add", "gather"):
            for dim in (0, 1):
                shape = [3, 5]
                ishape = [3, 5] if op != "index_add" else [300]
                ishape[0 if op == "index_add" else dim] = 300
                index = torch.randint(0, shape[dim], ishape, dtype=torch.int64, generator=gen)
                x = (torch.randn(shape, dtype=torch.float64, generator=gen) * 4).to(dt)
                sshape = list(shape)
                sshape[dim] = 300
                sshape = ishape if op == "scatter_add" else sshape
                src = torch.randn(sshape, dtype=torch.float64, generator=gen).to(dt)
                x.requires_grad_()
                src.requires_grad_()
                y = run(op, x, dim, index, None if op == "gather" else src)
                g = torch.randn(y.shape, dtype=torch.float64, generator=gen).to(dt)
                wrt = (x,) if op == "gather" else (x, src)
                grads = torch.autograd.grad(y, wrt, g)
                p = "sum%d." % i
                out = {"x": x, "index": index, "g": g, "y": y, "dx": grads[0]}
                if op != "gather":
                    out.update({"src": src, "dsrc": grads[1]})
                for k, v in out.items():
                    tensors[p + k] = v.detach().contiguous()
                meta.update({p + "op": op, p + "dtype": name, p + "dim": str(dim)})
                i += 1
    meta["sums"] = str(i)


if __name__ == "__main__":
    main()
