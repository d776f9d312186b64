#!/usr/bin/python3
"""Writes the PyTorch golden files of tests/test_nnextra.c:
tests/golden/nnextra_pdist.safetensors, nnextra_linalg_ex.safetensors,
nnextra_modules.safetensors and nnextra_triplet.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_nnextra_goldens.py

nnextra_pdist: case "case<i>", i < the metadata "cases", with metadata
case<i>.p (the norm's p, "inf" for infinity) and f64 tensors case<i>.x (N,
M), case<i>.y (torch.pdist(x, p)), case<i>.g (the gradient of y) and
case<i>.dx, torch.autograd's gradient of sum(g * y).  Rows 0 and 2 of x are
equal where N > 2 (a distance of 0, whose gradient torch sets to 0) and, for
p = inf, row 1 of x ties two largest differences with row 0.

nnextra_linalg_ex (f64): "inv.A" (3, 3, 3), matrix 1 with a zero row, and
torch.linalg.inv_ex's "inv.info" and "inv.Y" (matrices 0 and 2 only, as
"inv.Y0", "inv.Y2"); "solve.B" (3, 3, 2) and solve_ex(inv.A, solve.B)'s
"solve.info", "solve.X0", "solve.X2"; lu_factor_ex(inv.A)'s "lu.LU",
"lu.pivots", "lu.info"; "chol.A" (3, 4, 4) symmetric, matrix 1
positive-definite but for its leading minor of order 3, and cholesky_ex's
"chol.info", "chol.L0", "chol.L2" and, upper, "chol.U0".

nnextra_modules (f64): "softmax2d.x" (2, 3, 4, 5), "softmax2d.y";
"softmax2d3.x" (3, 2, 2) and its y; "nearest.x" (1, 2, 3, 4) and
nn.UpsamplingNearest2d(scale_factor=(2, 3))'s "nearest.y"; "bilinear.x"
(2, 2, 3, 4), nn.UpsamplingBilinear2d(scale_factor=(2, 3))'s "bilinear.y",
"bilinear.g" and "bilinear.dx".

nnextra_triplet (f64): "a", "p", "n" (5, 4) and, for each case "<d>.<swap>.
<reduction>" (d "default" or "l1", the distance lambda x, y:
F.pairwise_distance(x, y, p=1); swap 0 or 1; reduction mean, sum, none),
nn.TripletMarginWithDistanceLoss(margin=0.7)'s "<case>.y" and the gradient
of sum(y) in a, p and n: "<case>.da", "<case>.dp", "<case>.dn".
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden")
SEED = 9127
INF = float("inf")

PDIST_SHAPES = [(5, 3), (4, 7), (1, 4), (0, 3), (3, 0), (9, 2)]
PDIST_PS = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, INF]


def pdist_goldens():
    tensors, meta, i = {}, {}, 0
    for shape in PDIST_SHAPES:
        for p in PDIST_PS:
            x = torch.rand(shape, dtype=torch.float64) * 2 - 1
            n, m = shape
            if n > 2:
                x[2] = x[0]
            if p == INF and n > 1 and m > 2:
                x[1] = x[0] + 0.1
                x[1, 0] = x[0, 0] + 1.5
                x[1, m - 1] = x[0, m - 1] - 1.5
            a = x.clone().requires_grad_()
            y = torch.pdist(a, p)
            g = torch.rand(y.shape, dtype=torch.float64) + 0.5
            (dx,) = torch.autograd.grad(y, (a,), g) if y.numel() else (torch.zeros_like(x),)
            c = "case%d." % i
            tensors.update({c + "x": x, c + "y": y.detach(), c + "g": g, c + "dx": dx})
            meta[c + "p"] = "inf" if p == INF else repr(p)
            i += 1
    meta["cases"] = str(i)
    write_safetensors(os.path.join(GOLDEN, "nnextra_pdist.safetensors"), tensors, meta)


def linalg_ex_goldens():
    la = torch.linalg
    t = {}
    A = torch.rand(3, 3, 3, dtype=torch.float64) * 2 - 1 + 2 * torch.eye(3, dtype=torch.float64)
    A[1, 1] = 0.0
    Y, info = la.inv_ex(A)
    t.update({"inv.A": A, "inv.info": info, "inv.Y0": Y[0], "inv.Y2": Y[2]})
    B = torch.rand(3, 3, 2, dtype=torch.float64)
    X, info = la.solve_ex(A, B)
    t.update({"solve.B": B, "solve.info": info, "solve.X0": X[0], "solve.X2": X[2]})
    LU, piv, info = la.lu_factor_ex(A)
    t.update({"lu.LU": LU, "lu.pivots": piv, "lu.info": info})
    M = torch.rand(3, 4, 4, dtype=torch.float64)
    S = M @ M.transpose(-1, -2) + 0.5 * torch.eye(4, dtype=torch.float64)
    S[1, 2, 2] = -1.0
    L, info = la.cholesky_ex(S)
    U, _ = la.cholesky_ex(S, upper=True)
    t.update({"chol.A": S, "chol.info": info, "chol.L0": L[0], "chol.L2": L[2],
              "chol.U0": U[0]})
    write_safetensors(os.path.join(GOLDEN, "nnextra_linalg_ex.safetensors"), t, {})


def modules_goldens():
    t = {}
    x = torch.rand(2, 3, 4, 5, dtype=torch.float64) * 4 - 2
    t.update({"softmax2d.x": x, "softmax2d.y": torch.nn.Softmax2d()(x)})
    x = torch.rand(3, 2, 2, dtype=torch.float64) * 4 - 2
    t.update({"softmax2d3.x": x, "softmax2d3.y": torch.nn.Softmax2d()(x)})
    x = torch.rand(1, 2, 3, 4, dtype=torch.float64)
    t.update({"nearest.x": x,
              "nearest.y": torch.nn.UpsamplingNearest2d(scale_factor=(2, 3))(x)})
    x = torch.rand(2, 2, 3, 4, dtype=torch.float64)
    a = x.clone().requires_grad_()
    y = torch.nn.UpsamplingBilinear2d(scale_factor=(2, 3))(a)
    g = torch.rand(y.shape, dtype=torch.float64)
    (dx,) = torch.autograd.grad(y, (a,), g)
    t.update({"bilinear.x": x, "bilinear.y": y.detach(), "bilinear.g": g, "bilinear.dx": dx})
    write_safetensors(os.path.join(GOLDEN, "nnextra_modules.safetensors"), t, {})


def triplet_goldens():
    F = torch.nn.functional
    a, p, n = (torch.rand(5, 4, dtype=torch.float64) for _ in range(3))
    t = {"a": a, "p": p, "n": n}
    dists = {"default": None, "l1": lambda x, y: F.pairwise_distance(x, y, p=1)}
    for dname, d in dists.items():
        for swap in (0, 1):
            for red in ("mean", "sum", "none"):
                ins = [v.clone().requires_grad_() for v in (a, p, n)]
                loss = torch.nn.TripletMarginWithDistanceLoss(
                    distance_function=d, margin=0.7, swap=bool(swap), reduction=red)
                y = loss(*ins)
                grads = torch.autograd.grad(y.sum(), ins)
                c = "%s.%d.%s." % (dname, swap, red)
                t.update({c + "y": y.detach(), c + "da": grads[0], c + "dp": grads[1],
                          c + "dn": grads[2]})
    write_safetensors(os.path.join(GOLDEN, "nnextra_triplet.safetensors"), t, {})


def main():
    torch.manual_seed(SEED)
    pdist_goldens()
    linalg_ex_goldens()
    modules_goldens()
    triplet_goldens()


if __name__ == "__main__":
    main()
