#!/usr/bin/python3
"""Writes the PyTorch golden file of torch.linalg's lstsq with its drivers
and full result, lu_factor and lu of rectangular matrices, eigvalsh without
a gradient, cond, tensorinv, tensorsolve, householder_product, vander,
vecdot, and torch.cov and torch.corrcoef (tests/test_linalg_ext.c):
tests/golden/linalg_ext.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_linalg_ext_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.op,
case<i>.dtype (f32 or f64), case<i>.arg (the op's options, below),
case<i>.n (differentiable inputs, tensors case<i>.in<k>), case<i>.ny (the
results, case<i>.y<j>), case<i>.ng (the first ng results have gradients
case<i>.g<j>) and case<i>.grad ("1": case<i>.d<k> is torch.autograd's
gradient of sum_j sum(g<j> * y<j>) with respect to in<k>; "0": none, torch
gives none).  Ops and their arg:
  eigvalsh   "lower"/"upper"; y0 the eigenvalues (computed without grad)
  lstsq      "driver,rcond" (rcond -1: None); y0..y3 solution, residuals,
             rank (int64), singular_values
  lu_factor  ""; y0 LU, y1 pivots (int32)
  lu         ""; y0 L, y1 U, y2 P
  cond       p ("None", "2", "-2", "fro", "nuc", "inf", "-inf", "1", "-1")
  tensorinv  ind
  tensorsolve dims ("" none, else "0,2")
  householder_product  ""; in0 A and in1 tau from torch.geqrf
  vander     N (-1: None)
  vecdot     dim
  cov        "correction,f,a": f, a 0/1 for fweights (case<i>.fw, int64,
             not differentiable) and aweights (in1)
  corrcoef   ""
lstsq's torch backward fails on vectors and broadcast batch dims (grad
"0"), and so does cond's for the orders other than 2 and -2: there the
gradient is that of |A|_p |A^-1|_p, the function torch's cond computes;
a rank-deficient tall A (two equal columns) shows empty residuals
for gelsd and gelss (not gelsy: its rank estimate of such a matrix
depends on the LAPACK build, torch's f32 one finds rank 1); gelsy's and
gels's solutions are LAPACK's (last bits
may differ between LAPACK builds).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "linalg_ext.safetensors")
SEED = 9341
DTYPES = {"f32": torch.float32, "f64": torch.float64}

LSTSQ = [((5, 3), (5, 2)), ((3, 5), (3, 2)), ((4, 4), (4, 1)), ((2, 5, 3), (2, 5, 2)),
         ((2, 6, 3), (2, 6)), ((2, 1, 5, 2), (1, 3, 5, 2))]
DRIVERS = ["gels", "gelsy", "gelsd", "gelss"]
LU = [(4, 3), (3, 5), (2, 5, 2), (2, 2, 4), (1, 3), (3, 1)]


def rand(shape, dt):
    return (torch.rand(shape, dtype=torch.float64) * 4 - 2).to(dt)


def sym(shape, dt):
    a = torch.rand(shape, dtype=torch.float64) * 2 - 1
    return (a + a.transpose(-2, -1)).to(dt)


def cases():
    out = []
    for name in DTYPES:
        out.append(("eigvalsh", name, "lower", [(3, 3)]))
        out.append(("eigvalsh", name, "upper", [(2, 4, 4)]))
        for sa, sb in LSTSQ:
            for d in DRIVERS:
                out.append(("lstsq", name, d + ",-1", [sa, sb]))
        out.append(("lstsq", name, "gelsd,0.1", [(6, 3), (6, 2)]))
        out.append(("lstsq", name, "gelsy,0.1", [(6, 3), (6, 2)]))
        for d in ("gelsd", "gelss"):
            out.append(("lstsq_deficient", name, d + ",-1", [(6, 3), (6, 2)]))
        for s in LU:
            out.append(("lu_factor", name, "", [s]))
            out.append(("lu", name, "", [s]))
        for p in ("None", "2", "-2"):
            out.append(("cond", name, p, [(3, 5)]))
        for p in ("None", "2", "-2", "fro", "nuc", "inf", "-inf", "1", "-1"):
            out.append(("cond", name, p, [(2, 4, 4)]))
        out.append(("cond_singular", name, "1", [(3, 3)]))
        out.append(("tensorinv", name, "2", [(4, 6, 8, 3)]))
        out.append(("tensorinv", name, "1", [(6, 2, 3)]))
        out.append(("tensorsolve", name, "", [(2, 3, 6), (2, 3)]))
        out.append(("tensorsolve", name, "0", [(6, 2, 3), (2, 3)]))
        out.append(("householder_product", name, "", [(5, 3), 3]))
        out.append(("householder_product", name, "", [(2, 4, 4), 2]))
        out.append(("vander", name, "-1", [(4,)]))
        out.append(("vander", name, "5", [(2, 3)]))
        out.append(("vecdot", name, "-1", [(3, 4), (4,)]))
        out.append(("vecdot", name, "0", [(3, 2), (3, 1)]))
        for arg in ("1,0,0", "0,0,0", "1,1,0", "1,0,1", "1,1,1", "2,0,1"):
            out.append(("cov", name, arg, [(3, 6)]))
        out.append(("cov", name, "1,0,0", [(6,)]))
        out.append(("corrcoef", name, "", [(3, 6)]))
        out.append(("corrcoef", name, "", [(6,)]))
    return out


def run(op, arg, xr, aux):
    """The results (differentiable first), ng, and whether torch gives a
    gradient."""
    if op == "eigvalsh":
        with torch.no_grad():
            return [torch.linalg.eigvalsh(xr[0], UPLO="U" if arg == "upper" else "L")], 0
    if op in ("lstsq", "lstsq_deficient"):
        d, rc = arg.split(",")
        r = torch.linalg.lstsq(xr[0], xr[1], rcond=None if rc == "-1" else float(rc), driver=d)
        return [r.solution, r.residuals, r.rank, r.singular_values], 1
    if op == "lu_factor":
        lu, piv = torch.linalg.lu_factor(xr[0])
        return [lu, piv], 1
    if op == "lu":
        p, l, u = torch.linalg.lu(xr[0])
        return [l, u, p], 2
    if op in ("cond", "cond_singular"):
        p = None if arg == "None" else (arg if arg in ("fro", "nuc") else float(arg))
        if arg in ("None", "2", "-2") or op == "cond_singular":
            return [torch.linalg.cond(xr[0], p)], 1
        # torch 1.13's backward of these fails (an in-place write on the
        # inverse): the value is torch's, the gradient that of the function
        # it computes, |A|_p |A^-1|_p
        with torch.no_grad():
            y = torch.linalg.cond(xr[0], p)
        z = (torch.linalg.matrix_norm(xr[0], p) *
             torch.linalg.matrix_norm(torch.linalg.inv(xr[0]), p))
        return [y + (z - z.detach())], 1
    if op == "tensorinv":
        return [torch.linalg.tensorinv(xr[0], ind=int(arg))], 1
    if op == "tensorsolve":
        dims = tuple(int(v) for v in arg.split(",")) if arg else None
        return [torch.linalg.tensorsolve(xr[0], xr[1], dims=dims)], 1
    if op == "householder_product":
        return [torch.linalg.householder_product(xr[0], xr[1])], 1
    if op == "vander":
        return [torch.linalg.vander(xr[0], N=None if arg == "-1" else int(arg))], 1
    if op == "vecdot":
        return [torch.linalg.vecdot(xr[0], xr[1], dim=int(arg))], 1
    if op == "cov":
        c, f, a = arg.split(",")
        return [torch.cov(xr[0], correction=int(c), fweights=aux if f == "1" else None,
                          aweights=xr[1] if a == "1" else None)], 1
    assert op == "corrcoef"
    return [torch.corrcoef(xr[0])], 1


def inputs(op, name, arg, shapes):
    dt = DTYPES[name]
    if op == "eigvalsh":
        return [sym(shapes[0], dt)], None
    if op == "lstsq_deficient":
        a = rand(shapes[0], dt)
        a[:, 2] = a[:, 0]
        return [a, rand(shapes[1], dt)], None
    if op == "cond_singular":
        a = rand(shapes[0], dt)
        a[2] = a[0] + a[1]
        a[2, 2] = a[0, 2] + a[1, 2]
        return [a], None
    if op == "householder_product":
        a, tau = torch.geqrf(rand(shapes[0], torch.float64))
        return [a.to(dt), tau[..., :shapes[1]].contiguous().to(dt)], None
    if op == "tensorinv" or op == "tensorsolve":
        return [rand(s, dt) for s in shapes], None
    if op == "cov":
        c, f, a = arg.split(",")
        xs = [rand(shapes[0], dt)]
        n = shapes[0][-1]
        if a == "1":
            xs.append(torch.rand(n, dtype=torch.float64).to(dt) + 0.1)
        fw = torch.randint(0, 4, (n,), dtype=torch.int64) if f == "1" else None
        return xs, fw
    return [rand(s, dt) for s in shapes], None


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    all_cases = cases()
    for i, (op, name, arg, shapes) in enumerate(all_cases):
        p = "case%d." % i
        xs, aux = inputs(op, name, arg, shapes)
        xr = [x.clone().requires_grad_(op != "eigvalsh") for x in xs]
        ys, ng = run(op, arg, xr, aux)
        grad = ng > 0 and op != "cond_singular"
        if op == "lstsq" and (len(shapes[1]) == len(shapes[0]) - 1 or
                              shapes[0][:-2] != shapes[1][:-2]):
            grad = False   # torch 1.13's backward fails on vectors and broadcasting
        gs = [rand(y.shape, DTYPES[name]) for y in ys[:ng]]
        if grad:
            ds = torch.autograd.grad(ys[:ng], xr, gs, allow_unused=True)
            for k, d in enumerate(ds):
                tensors[p + "d%d" % k] = (torch.zeros_like(xs[k]) if d is None else d).detach()
        for k, x in enumerate(xs):
            tensors[p + "in%d" % k] = x.contiguous()
        for j, y in enumerate(ys):
            tensors[p + "y%d" % j] = y.detach().contiguous()
        for j, g in enumerate(gs):
            tensors[p + "g%d" % j] = g.contiguous()
        if aux is not None:
            tensors[p + "fw"] = aux
        meta.update({p + "op": op, p + "dtype": name, p + "arg": arg, p + "n": str(len(xs)),
                     p + "ny": str(len(ys)), p + "ng": str(ng),
                     p + "grad": "1" if grad else "0"})
    meta["cases"] = str(len(all_cases))
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
