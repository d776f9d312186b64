#!/usr/bin/python3
"""Writes the PyTorch golden file of the torch.linalg functions tapegrad
composes from others (tests/test_linalg_compose.c):
tests/golden/linalg_compose.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_linalg_compose_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.op
(matrix_norm, pinv, matrix_rank, matrix_power, logdet or multi_dot),
case<i>.dtype (f32 or f64), case<i>.n (the number of tensor inputs) and
case<i>.arg (matrix_norm's "ord,dim0,dim1,keepdim"; pinv's and
matrix_rank's "atol,rtol,hermitian" with -1 for None; matrix_power's n;
else ""), and tensors: case<i>.in<k> (the inputs), case<i>.y (the
result), case<i>.g (the gradient of y) and case<i>.d<k>, torch.autograd's
gradient of sum(g * y) with respect to in<k> (none for matrix_rank, whose
result is an integer count).

matrix_rank and pinv get matrices of known rank (products of thinner
factors), tolerances on both sides of their smallest singular values and
a 3 x 10 matrix whose third singular value, 5 eps, lies between eps times
its two extents;
logdet gets positive, negative and zero determinants.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "linalg_compose.safetensors")
SEED = 9311
DTYPES = {"f32": torch.float32, "f64": torch.float64}

NORMS = [("fro", (3, 4)), ("nuc", (3, 4)), ("2", (4, 3)), ("-2", (3, 3)), ("1", (3, 5)),
         ("-1", (2, 3, 4)), ("inf", (4, 3)), ("-inf", (2, 3, 3)), ("fro", (2, 3, 4)),
         ("2", (2, 1, 3, 5))]
NORM_DIMS = [("fro", (3, 4, 2), (0, 2), True), ("inf", (3, 4, 2), (2, 0), False),
             ("nuc", (2, 3, 4), (-1, -3), True), ("1", (3, 2, 4), (0, -1), False)]


def rand(shape, dt):
    return (torch.rand(shape, dtype=torch.float64) * 4 - 2).to(dt)


def low_rank(shape, r, dt):
    a = torch.rand(shape[:-1] + (r,), dtype=torch.float64) * 2 - 1
    b = torch.rand(shape[:-2] + (r, shape[-1]), dtype=torch.float64) * 2 - 1
    return (a @ b).to(dt)


def symmetric(shape, dt):
    x = torch.rand(shape, dtype=torch.float64) * 2 - 1
    return (x + x.transpose(-2, -1)).to(dt)


def opt(v):
    return None if v < 0 else v


def run(op, arg, xs):
    if op == "matrix_norm":
        o, d0, d1, keep = arg.split(",")
        ordv = o if o in ("fro", "nuc") else float(o)
        return torch.linalg.matrix_norm(xs[0], ord=ordv, dim=(int(d0), int(d1)),
                                        keepdim=keep == "1")
    if op in ("pinv", "matrix_rank"):
        atol, rtol, herm = arg.split(",")
        f = torch.linalg.pinv if op == "pinv" else torch.linalg.matrix_rank
        return f(xs[0], atol=opt(float(atol)), rtol=opt(float(rtol)), hermitian=herm == "1")
    if op == "matrix_power":
        return torch.linalg.matrix_power(xs[0], int(arg))
    if op == "logdet":
        return torch.logdet(xs[0])
    return torch.linalg.multi_dot(xs)


def cases():
    out = []
    for name in DTYPES:
        for o, sh in NORMS:
            out.append(("matrix_norm", name, [rand(sh, DTYPES[name])], o + ",-2,-1,0"))
        for o, sh, d, keep in NORM_DIMS:
            out.append(("matrix_norm", name, [rand(sh, DTYPES[name])],
                        "%s,%d,%d,%d" % (o, d[0], d[1], int(keep))))
        dt = DTYPES[name]
        for sh, r in (((4, 3), 3), ((3, 5), 3), ((2, 4, 4), 4)):
            out.append(("pinv", name, [low_rank(sh, r, dt)], "-1,-1,0"))
        out.append(("pinv", name, [symmetric((2, 3, 3), dt)], "-1,-1,1"))
        out.append(("pinv", name, [low_rank((4, 4), 4, dt)], "0.01,-1,0"))
        out.append(("pinv", name, [low_rank((3, 4), 3, dt)], "-1,0.001,0"))
        for sh, r in (((4, 4), 2), ((5, 3), 3), ((2, 4, 6), 1), ((3, 3), 3)):
            out.append(("matrix_rank", name, [low_rank(sh, r, dt)], "-1,-1,0"))
        out.append(("matrix_rank", name, [low_rank((4, 4), 4, dt)], "100,-1,0"))
        out.append(("matrix_rank", name, [symmetric((2, 4, 4), dt)], "-1,0.5,1"))
        # a singular value between eps * min(m, n) and eps * max(m, n): the
        # default tolerance takes the larger extent
        thin = torch.zeros(3, 10, dtype=dt)
        thin[0, 0], thin[1, 1], thin[2, 2] = 1, 1, 5 * torch.finfo(dt).eps
        out.append(("matrix_rank", name, [thin], "-1,-1,0"))
        out.append(("pinv", name, [thin.clone()], "-1,-1,0"))
        for n in (0, 1, 2, 3, 5, 6, -1, -3):
            a = rand((3, 3), dt) + 3 * torch.eye(3, dtype=dt)
            out.append(("matrix_power", name, [(a / 3 if n > 0 else a)], str(n)))
        out.append(("matrix_power", name, [rand((2, 3, 3), dt)], "4"))
        pos = rand((3, 3), dt) + 3 * torch.eye(3, dtype=dt)
        neg = pos[torch.tensor([1, 0, 2])]
        out.append(("logdet", name, [pos], ""))
        out.append(("logdet", name, [torch.stack([pos, neg])], ""))
        for shapes in (((3,), (3, 4), (4, 2)), ((2, 3), (3, 4), (4, 5), (5, 1)),
                       ((3, 6), (6, 2), (2, 5), (5,)), ((4,), (4,)),
                       ((10, 2), (2, 10), (10, 3))):
            out.append(("multi_dot", name, [rand(s, dt) for s in shapes], ""))
    return out


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    all_cases = cases()
    for i, (op, name, xs, arg) in enumerate(all_cases):
        xr = [x.clone().requires_grad_(op != "matrix_rank") for x in xs]
        y = run(op, arg, xr)
        p = "case%d." % i
        for k, x in enumerate(xs):
            tensors[p + "in%d" % k] = x.contiguous()
        tensors[p + "y"] = y.detach().contiguous()
        if op != "matrix_rank":
            g = rand(y.shape, DTYPES[name])
            ds = torch.autograd.grad(y, xr, g)
            tensors[p + "g"] = g
            for k in range(len(xs)):
                tensors[p + "d%d" % k] = ds[k].detach().contiguous()
        meta.update({p + "op": op, p + "dtype": name, p + "n": str(len(xs)), p + "arg": arg})
    meta["cases"] = str(len(all_cases))
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
