#!/usr/bin/python3
"""Writes the PyTorch golden file of torch.linalg's LU functions and the
solvers and functions made of factorizations (tests/test_linalg_more.c):
tests/golden/linalg_more.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_linalg_more_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.op
(lu_factor, lu, lu_solve, cholesky_solve, cholesky_inverse, lstsq or
matrix_exp), case<i>.dtype (f32 or f64), case<i>.n (the number of
differentiable tensor inputs) and case<i>.arg (lu_solve's "left,adjoint"
as two 0/1 digits; cholesky_solve's and cholesky_inverse's "upper" or
"lower"; else ""), and tensors in that dtype: case<i>.in<k> (the inputs),
case<i>.y (the result: lu_factor's LU, lu's L, the solution of lu_solve,
cholesky_solve and lstsq, cholesky_inverse's and matrix_exp's matrix),
case<i>.g (the gradient of y), case<i>.d<k>, torch.autograd's gradient of
sum(g * y) (lu: + sum(gu * U)) with respect to in<k>.  lu_factor's pivots
are case<i>.piv (int32); lu's P and U are case<i>.p and case<i>.u, U's
gradient case<i>.gu; lu_solve's inputs are LU (in0) and B (in1) from
torch's lu_factor, its pivots case<i>.piv; cholesky_solve's are B (in0)
and the factor (in1).

lu_factor and lu get random matrices (pivoting happens); lu_solve the LU
of a random matrix plus n times the identity, its rows reversed (pivoting
happens); cholesky_solve and cholesky_inverse the Cholesky factor of X X^T
+ I with random values in the triangle they do not read (torch's gradient
reaches it); lstsq random (full-rank) tall, wide and square matrices,
batches of matrices and vectors, with torch's default driver (gelsy;
torch 1.13's lstsq backward fails on broadcast batch dims, so none here,
and on vectors: those cases have metadata case<i>.grad "0" and no
gradients; every other case's is "1"; gelsy's solutions may differ in
their last bits from one run of this script to the next);
matrix_exp random matrices, one with a norm large enough to be scaled
down and one small.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "linalg_more.safetensors")
SEED = 4217
DTYPES = {"f32": torch.float32, "f64": torch.float64}

LU = [(1, 1), (2, 2), (3, 3), (5, 5), (2, 4, 4), (3, 1, 3, 3)]
LU_SOLVE = [((3, 3), (3, 2)), ((4, 4), (4, 4)), ((2, 3, 3), (3, 1)), ((3, 3), (2, 3, 2)),
            ((2, 1, 4, 4), (3, 4, 2))]
CHOL_SOLVE = [((3, 3), (3, 2)), ((2, 4, 4), (4, 1)), ((3, 3), (2, 3, 2)), ((1, 1), (1, 3)),
              ((2, 1, 3, 3), (3, 3, 2))]
CHOL_INV = [(1, 1), (3, 3), (5, 5), (2, 4, 4)]
LSTSQ = [((5, 3), (5, 2)), ((3, 5), (3, 2)), ((4, 4), (4, 1)), ((2, 5, 3), (2, 5, 2)),
         ((2, 5, 3), (2, 5)), ((2, 3, 6), (2, 3)), ((3, 6, 2), (3, 6, 3))]
MEXP = [((1, 1), 1), ((2, 2), 1), ((3, 3), 1), ((5, 5), 1), ((2, 4, 4), 1),
        ((3, 1, 3, 3), 1), ((4, 4), 3), ((2, 2), 0.01)]


def rand(shape, dt):
    return (torch.rand(shape, dtype=torch.float64) * 4 - 2).to(dt)


def square(shape, dt):
    n = shape[-1]
    a = torch.rand(shape, dtype=torch.float64) * 2 - 1
    return (a + n * torch.eye(n, dtype=torch.float64)).to(dt)


def chol(shape, dt, upper):
    """A Cholesky factor of X X^T + I, junk in the triangle not read."""
    n = shape[-1]
    x = torch.rand(shape, dtype=torch.float64) * 2 - 1
    f = torch.linalg.cholesky(x @ x.transpose(-2, -1) + torch.eye(n, dtype=torch.float64),
                              upper=upper)
    junk = torch.rand(shape, dtype=torch.float64) * 2 - 1
    f = f + (torch.tril(junk, -1) if upper else torch.triu(junk, 1))
    return f.to(dt)


def cases():
    out = []
    for name in DTYPES:
        for s in LU:
            out.append(("lu_factor", name, s, None, ""))
            out.append(("lu", name, s, None, ""))
        for a, b in LU_SOLVE:
            for arg in ("10", "11"):
                out.append(("lu_solve", name, a, b, arg))
            bt = tuple(b[:-2]) + (b[-1], b[-2])   # the right side: X A = B
            for arg in ("00", "01"):
                out.append(("lu_solve", name, a, bt, arg))
        for a, b in CHOL_SOLVE:
            for arg in ("lower", "upper"):
                out.append(("cholesky_solve", name, a, b, arg))
        for a in CHOL_INV:
            for arg in ("lower", "upper"):
                out.append(("cholesky_inverse", name, a, None, arg))
        for a, b in LSTSQ:
            out.append(("lstsq", name, a, b, ""))
        for a, scale in MEXP:
            out.append(("matrix_exp", name, a, scale, ""))
    return out


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    all_cases = cases()
    for i, (op, name, sa, sb, arg) in enumerate(all_cases):
        dt = DTYPES[name]
        p = "case%d." % i
        if op in ("lu_factor", "lu"):
            a = rand(sa, dt)
            ar = a.clone().requires_grad_()
            xs, xr = [a], [ar]
            if op == "lu_factor":
                y, piv = torch.linalg.lu_factor(ar)
                tensors[p + "piv"] = piv.contiguous()
                g = rand(y.shape, dt)
                ds = torch.autograd.grad(y, xr, g)
            else:
                pm, y, u = torch.linalg.lu(ar)
                g, gu = rand(y.shape, dt), rand(u.shape, dt)
                ds = torch.autograd.grad([y, u], xr, [g, gu])
                tensors[p + "p"] = pm.contiguous()
                tensors[p + "u"] = u.detach().contiguous()
                tensors[p + "gu"] = gu
        elif op == "lu_solve":
            lu, piv = torch.linalg.lu_factor(square(sa, dt).flip(-2))
            b = rand(sb, dt)
            xs = [lu, b]
            xr = [x.clone().requires_grad_() for x in xs]
            y = torch.linalg.lu_solve(xr[0], piv, xr[1], left=arg[0] == "1",
                                      adjoint=arg[1] == "1")
            tensors[p + "piv"] = piv.contiguous()
            g = rand(y.shape, dt)
            ds = torch.autograd.grad(y, xr, g)
        else:
            if op == "cholesky_solve":
                xs = [rand(sb, dt), chol(sa, dt, arg == "upper")]
            elif op == "cholesky_inverse":
                xs = [chol(sa, dt, arg == "upper")]
            elif op == "lstsq":
                xs = [rand(sa, dt), rand(sb, dt)]
            else:
                xs = [(rand(sa, torch.float64) * sb).to(dt)]
            xr = [x.clone().requires_grad_() for x in xs]
            if op == "cholesky_solve":
                y = torch.cholesky_solve(xr[0], xr[1], upper=arg == "upper")
            elif op == "cholesky_inverse":
                y = torch.cholesky_inverse(xr[0], upper=arg == "upper")
            elif op == "lstsq":
                y = torch.linalg.lstsq(xr[0], xr[1]).solution
            else:
                y = torch.linalg.matrix_exp(xr[0])
            g = rand(y.shape, dt)
            if op == "lstsq" and len(sb) == len(sa) - 1:   # torch's backward fails
                ds = None
            else:
                ds = torch.autograd.grad(y, xr, g)
        meta[p + "grad"] = "0" if ds is None else "1"
        for k, x in enumerate(xs):
            tensors[p + "in%d" % k] = x.contiguous()
            if ds is not None:
                tensors[p + "d%d" % k] = ds[k].detach().contiguous()
        tensors[p + "y"] = y.detach().contiguous()
        tensors[p + "g"] = g
        meta.update({p + "op": op, p + "dtype": name, p + "n": str(len(xs)), p + "arg": arg})
    meta["cases"] = str(len(all_cases))
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
