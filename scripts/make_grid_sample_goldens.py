#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_grid_sample and tg_affine_grid
(tests/test_grid_sample.c): tests/golden/grid_sample.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_grid_sample_goldens.py

grid_sample case "gs<i>", i < the metadata "gs_cases", with metadata
  gs<i>.mode     0 bilinear, 1 nearest, 2 bicubic (torch's enum values)
  gs<i>.pad      0 zeros, 1 border, 2 reflection
  gs<i>.align    "0" or "1" (align_corners)
and tensors, all of the case's dtype (f64 or f32):
  gs<i>.x, gs<i>.grid, gs<i>.grad_y    input, grid and output gradient
  gs<i>.y, gs<i>.grad_x, gs<i>.grad_grid
      F.grid_sample's result and d sum(y * grad_y) / d x, / d grid.
The sweep: every mode, padding and align_corners, 4-D and 5-D (bicubic 4-D
only, as torch), N = 2, C = 3 or 2, odd and even extents, grid points
uniform in [-1.4, 1.4] (reaching outside the input) with the first few set
to -1, 1 and 0 exactly (the clip ends, the ties of nearest); then an input
with an extent of 1 (reflection's empty span), in f64 and f32.

affine_grid case "ag<i>", i < "ag_cases": metadata ag<i>.size ("N,C,H,W"
or "N,C,D,H,W") and ag<i>.align, tensors ag<i>.theta, ag<i>.grad_y,
ag<i>.y (F.affine_grid) and ag<i>.grad_theta.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "grid_sample.safetensors")
SEED = 4127
F64, F32 = torch.float64, torch.float32
MODES = ["bilinear", "nearest", "bicubic"]
PADS = ["zeros", "border", "reflection"]
SPECIAL = [-1.0, 1.0, 0.0, -1.0, 1.0, 0.0]

# (x shape, grid shape): 4-D and 5-D, odd and even extents, N = 2
SHAPES = [((2, 3, 5, 6), (2, 3, 4, 2)),
          ((2, 2, 3, 4, 5), (2, 2, 3, 2, 3))]
# an extent of 1: reflection's span is empty with align_corners
UNIT = ((1, 2, 1, 4), (1, 2, 3, 2))


def grid_of(shape, dt):
    g = torch.rand(*shape, dtype=F64) * 2.8 - 1.4
    flat = g.view(-1)
    flat[:len(SPECIAL)] = torch.tensor(SPECIAL, dtype=F64)
    return g.to(dt)


def gs_case(w, xs, gs, mode, pad, align, dt):
    k = "gs%d" % w["n"]
    w["n"] += 1
    x = torch.randn(*xs, dtype=F64).to(dt).requires_grad_(True)
    grid = grid_of(gs, dt).requires_grad_(True)
    y = F.grid_sample(x, grid, mode=MODES[mode], padding_mode=PADS[pad],
                      align_corners=align)
    gy = torch.randn(*y.shape, dtype=F64).to(dt)
    gx, gg = torch.autograd.grad((y * gy).sum(), [x, grid])
    w["t"].update({k + ".x": x.detach(), k + ".grid": grid.detach(), k + ".grad_y": gy,
                   k + ".y": y.detach(), k + ".grad_x": gx, k + ".grad_grid": gg})
    w["m"].update({k + ".mode": str(mode), k + ".pad": str(pad), k + ".align": str(int(align))})


def ag_case(w, size, align, dt):
    k = "ag%d" % w["na"]
    w["na"] += 1
    r = len(size) - 2
    theta = torch.randn(size[0], r, r + 1, dtype=F64).to(dt).requires_grad_(True)
    y = F.affine_grid(theta, list(size), align_corners=align)
    gy = torch.randn(*y.shape, dtype=F64).to(dt)
    (gt,) = torch.autograd.grad((y * gy).sum(), [theta])
    w["t"].update({k + ".theta": theta.detach(), k + ".grad_y": gy, k + ".y": y.detach(),
                   k + ".grad_theta": gt})
    w["m"].update({k + ".size": ",".join(str(s) for s in size), k + ".align": str(int(align))})


def main():
    torch.manual_seed(SEED)
    w = {"t": {}, "m": {}, "n": 0, "na": 0}
    for dt in (F64, F32):
        for xs, gs in SHAPES:
            for mode in range(3):
                if mode == 2 and len(xs) == 5:
                    continue
                for pad in range(3):
                    for align in (False, True):
                        gs_case(w, xs, gs, mode, pad, align, dt)
        for mode in range(3):
            for align in (False, True):
                gs_case(w, UNIT[0], UNIT[1], mode, 2, align, dt)
    for dt in (F64, F32):
        for size in ((2, 3, 4, 5), (2, 1, 1, 3), (2, 1, 3, 4, 2), (1, 2, 5, 1, 3)):
            for align in (False, True):
                ag_case(w, size, align, dt)
    w["m"]["gs_cases"] = str(w["n"])
    w["m"]["ag_cases"] = str(w["na"])
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    write_safetensors(OUT, w["t"], w["m"])


if __name__ == "__main__":
    main()
