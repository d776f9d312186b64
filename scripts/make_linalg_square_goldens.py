#!/usr/bin/python3
"""Writes the PyTorch golden file of torch.linalg's square-matrix functions
(tests/test_linalg_square.c): tests/golden/linalg_square.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_linalg_square_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.op (inv,
det, slogdet, solve, cholesky, solve_triangular, eigh, eigvalsh, svd,
svdvals or qr), case<i>.dtype (f32 or
f64), case<i>.n (the number of tensor inputs) and case<i>.arg (cholesky's,
eigh's and eigvalsh's "upper" or "lower"; svd's "full" or "reduced";
qr's mode, "reduced", "complete" or "r"; solve_triangular's "upper,left,unitriangular" as three
0/1 digits; else ""), and tensors in that dtype: case<i>.in<k> (the
inputs), case<i>.g (the gradient of y), case<i>.y (the result: slogdet's
logabsdet, with its sign in case<i>.sign; eigh's eigenvalues, with the
squares of its eigenvectors' elements, whose sign is arbitrary, in
case<i>.qq and their gradient in case<i>.gq; svd's singular values, with
the squares of U's first k columns in case<i>.uu and of Vh's first k rows
in case<i>.vv, their gradients case<i>.gu and case<i>.gv) and
case<i>.d<k>, torch.autograd's gradient of sum(g * y) (eigh: + sum(gq *
qq); svd: + sum(gu * uu) + sum(gv * vv)) with respect to in<k>.  qr's y
is R, with Q in case<i>.q (and its gradient case<i>.gq); its cases with
metadata case<i>.grad "0" (mode "r", or "complete" with m > n, which
torch does not differentiate) have no gradients.

The matrices are well conditioned: a random matrix plus n times the
identity (inv, det, slogdet, solve), X X^T + I (cholesky, whose other
triangle, the upper one for upper=False, is filled with values it must not
read), a random
matrix whose diagonal is moved away from zero (solve_triangular, its other
triangle random too), a symmetric matrix (eigh; junk in the triangle it
does not read).  Batches, broadcast batch dims, vectors for solve,
both sides and triangles for solve_triangular, and negative determinants
are covered.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "linalg_square.safetensors")
SEED = 8807
DTYPES = {"f32": torch.float32, "f64": torch.float64}

SQUARE = [(1, 1), (2, 2), (3, 3), (5, 5), (2, 4, 4), (3, 1, 3, 3)]
SOLVE = [((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (2, 3)), ((2, 3, 3), (3,)),
         ((2, 3, 3), (3, 4)), ((3, 3), (2, 3, 1)), ((2, 1, 4, 4), (3, 4, 2))]
CHOL = [(1, 1), (3, 3), (5, 5), (2, 4, 4)]
EIG = [(1, 1), (2, 2), (4, 4), (3, 5, 5)]
SVD = [(3, 3), (4, 2), (2, 5), (2, 3, 4), (2, 1, 4, 3), (1, 1)]
QR = [((3, 3), "reduced"), ((4, 2), "reduced"), ((2, 4), "reduced"), ((2, 3, 5), "reduced"),
      ((2, 5, 3), "reduced"), ((2, 4), "complete"), ((3, 3), "complete"),
      ((2, 2, 5), "complete"), ((4, 2), "complete"), ((2, 4, 3), "r"), ((3, 5), "r")]
TRI = [((3, 3), (3, 2)), ((4, 4), (4, 4)), ((2, 3, 3), (3, 1)), ((3, 3), (2, 3, 2))]


def rand(shape, dt):
    return (torch.rand(shape, dtype=torch.float64) * 4 - 2).to(dt)


def square(shape, dt):
    n = shape[-1]
    a = torch.rand(shape, dtype=torch.float64) * 2 - 1
    a = a + n * torch.eye(n, dtype=torch.float64)
    if len(shape) >= 3 and n >= 2:   # a negative determinant in the batch: swap rows
        a = a.reshape(-1, n, n)
        a[0] = a[0][torch.tensor([1, 0] + list(range(2, n)))]
        a = a.reshape(shape)
    return a.to(dt)


def spd(shape, dt, upper):
    n = shape[-1]
    x = torch.rand(shape, dtype=torch.float64) * 2 - 1
    a = x @ x.transpose(-2, -1) + torch.eye(n, dtype=torch.float64)
    junk = torch.rand(shape, dtype=torch.float64) * 10 - 5   # never read
    if upper:
        a = torch.triu(a) + torch.tril(junk, -1)
    else:
        a = torch.tril(a) + torch.triu(junk, 1)
    return a.to(dt)


def symmetric(shape, dt, upper):
    x = torch.rand(shape, dtype=torch.float64) * 2 - 1
    a = x + x.transpose(-2, -1)
    junk = torch.rand(shape, dtype=torch.float64) * 10 - 5   # never read
    if upper:
        a = torch.triu(a) + torch.tril(junk, -1)
    else:
        a = torch.tril(a) + torch.triu(junk, 1)
    return a.to(dt)


def triangular(shape, dt):
    n = shape[-1]
    a = torch.rand(shape, dtype=torch.float64) * 2 - 1
    sgn = torch.where(torch.rand(shape[:-1], dtype=torch.float64) < 0.5, -1.0, 1.0)
    d = (1 + torch.rand(shape[:-1], dtype=torch.float64)) * sgn
    a = a - torch.diag_embed(torch.diagonal(a, 0, -2, -1)) + torch.diag_embed(d)
    return a.to(dt)


def run(op, arg, xs):
    if op == "inv":
        return torch.linalg.inv(xs[0]), None
    if op == "det":
        return torch.linalg.det(xs[0]), None
    if op == "slogdet":
        s, la = torch.linalg.slogdet(xs[0])
        return la, s
    if op == "solve":
        return torch.linalg.solve(xs[0], xs[1]), None
    if op == "cholesky":
        return torch.linalg.cholesky(xs[0], upper=arg == "upper"), None
    if op == "eigh":
        vals, vecs = torch.linalg.eigh(xs[0], UPLO="U" if arg == "upper" else "L")
        return vals, vecs * vecs
    if op == "svd":
        u, sv, vh = torch.linalg.svd(xs[0], full_matrices=arg == "full")
        k = sv.shape[-1]
        return sv, (u[..., :, :k] ** 2, vh[..., :k, :] ** 2)
    if op == "qr":
        q, r = torch.linalg.qr(xs[0], mode=arg)
        return r, q
    if op == "svdvals":
        return torch.linalg.svdvals(xs[0]), None
    if op == "eigvalsh":
        return torch.linalg.eigvalsh(xs[0], UPLO="U" if arg == "upper" else "L"), None
    up, left, unit = (c == "1" for c in arg)
    return torch.linalg.solve_triangular(xs[0], xs[1], upper=up, left=left,
                                         unitriangular=unit), None


def cases():
    out = []
    for name in DTYPES:
        for s in SQUARE:
            for op in ("inv", "det", "slogdet"):
                out.append((op, name, [("square", s)], ""))
        for a, b in SOLVE:
            out.append(("solve", name, [("square", a), ("rand", b)], ""))
        for s in CHOL:
            for arg in ("lower", "upper"):
                out.append(("cholesky", name, [("spd_" + arg, s)], arg))
        for sh in EIG:
            for arg in ("lower", "upper"):
                out.append(("eigh", name, [("sym_" + arg, sh)], arg))
                out.append(("eigvalsh", name, [("sym_" + arg, sh)], arg))
        for sh, mode in QR:
            out.append(("qr", name, [("rand", sh)], mode))
        for sh in SVD:
            for arg in ("reduced", "full"):
                out.append(("svd", name, [("rand", sh)], arg))
            out.append(("svdvals", name, [("rand", sh)], ""))
        for a, b in TRI:
            for arg in ("110", "010", "111", "011"):
                out.append(("solve_triangular", name, [("tri", a), ("rand", b)], arg))
            bt = tuple(b[:-2]) + (b[-1], b[-2])   # the right side: X A = B
            for arg in ("100", "000", "101"):
                out.append(("solve_triangular", name, [("tri", a), ("rand", bt)], arg))
    return out


def main():
    torch.manual_seed(SEED)
    makers = {"square": square, "tri": triangular, "rand": rand,
              "spd_lower": lambda s, dt: spd(s, dt, False),
              "spd_upper": lambda s, dt: spd(s, dt, True),
              "sym_lower": lambda s, dt: symmetric(s, dt, False),
              "sym_upper": lambda s, dt: symmetric(s, dt, True)}
    tensors, meta = {}, {}
    all_cases = cases()
    for i, (op, name, ins, arg) in enumerate(all_cases):
        dt = DTYPES[name]
        xs = [makers[kind](shape, dt) for kind, shape in ins]
        xr = [x.clone().requires_grad_() for x in xs]
        y, sign = run(op, arg, xr)
        g = rand(y.shape, dt)
        p = "case%d." % i
        meta[p + "grad"] = "1"
        if op == "qr":   # sign holds Q
            m, n = xs[0].shape[-2:]
            tensors[p + "q"] = sign.detach().contiguous()
            if arg == "r" or (arg == "complete" and m > n):
                meta[p + "grad"] = "0"
                ds = [torch.zeros_like(xs[0])]
            else:
                gq = rand(sign.shape, dt)
                tensors[p + "gq"] = gq
                ds = torch.autograd.grad([y, sign], xr, [g, gq])
            sign = None
        elif op == "svd":   # sign holds the squared singular vectors
            gu, gv = rand(sign[0].shape, dt), rand(sign[1].shape, dt)
            ds = torch.autograd.grad([y, sign[0], sign[1]], xr, [g, gu, gv])
            p = "case%d." % i
            tensors[p + "uu"] = sign[0].detach().contiguous()
            tensors[p + "vv"] = sign[1].detach().contiguous()
            tensors[p + "gu"], tensors[p + "gv"] = gu, gv
            sign = None
        elif op == "eigh":   # sign holds the squared eigenvectors
            gq = rand(sign.shape, dt)
            ds = torch.autograd.grad([y, sign], xr, [g, gq])
            tensors["case%d.qq" % i] = sign.detach().contiguous()
            tensors["case%d.gq" % i] = gq
            sign = None
        else:
            ds = torch.autograd.grad(y, xr, g)
        p = "case%d." % i
        for k, x in enumerate(xs):
            tensors[p + "in%d" % k] = x
            tensors[p + "d%d" % k] = ds[k].detach().contiguous()
        tensors[p + "y"] = y.detach().contiguous()
        if sign is not None:
            tensors[p + "sign"] = sign.detach().contiguous()
        tensors[p + "g"] = g
        meta.update({p + "op": op, p + "dtype": name, p + "n": str(len(xs)), p + "arg": arg})
    meta["cases"] = str(len(all_cases))
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
