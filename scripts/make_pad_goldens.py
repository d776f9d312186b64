#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_pad and of Conv's padding_mode
(tests/test_pad.c): tests/golden/pad/pad.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_pad_goldens.py

Case "pad<i>" (metadata pad<i>.mode, pad<i>.pads, pad<i>.value):
  pad<i>.x, pad<i>.grad_y    input and output gradient (f64)
  pad<i>.y, pad<i>.grad_x    F.pad(x, pads, mode, value) and d sum(y * grad_y) / dx
Case "crop<i>": the same with negative pads (elements removed), in every mode.
Case "conv<i>" (metadata conv<i>.mode, conv<i>.padding: "p0,p1,...";
conv<i>.stride):
  conv<i>.x, .w, .b, .grad_y         input, weight, bias, output gradient (f64)
  conv<i>.y, .grad_x, .grad_w, .grad_b   nn.ConvNd(..., padding_mode=mode)
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "pad", "pad.safetensors")
SEED = 8011

# (x shape, pads as F.pad takes them, mode, value)
PADS = [
    ((2, 3, 5), (2, 1), "constant", 0.5),
    ((2, 3, 5), (4, 3), "reflect", 0.0),
    ((2, 3, 5), (2, 6), "replicate", 0.0),
    ((2, 3, 5), (5, 2), "circular", 0.0),
    ((2, 2, 4, 5), (1, 2, 3, 0), "reflect", 0.0),
    ((2, 2, 4, 5), (0, 3, 2, 2), "replicate", 0.0),
    ((2, 2, 4, 5), (2, 1, 4, 3), "circular", 0.0),
    ((1, 2, 3, 4, 5), (1, 1, 2, 1, 1, 2), "reflect", 0.0),
    ((1, 2, 3, 4, 5), (1, 0, 0, 2, 3, 1), "replicate", 0.0),
    ((1, 2, 3, 4, 5), (2, 1, 1, 3, 0, 2), "circular", 0.0),
    ((3, 4), (1, 2, 0, 1), "constant", -2.0),
]

# Negative pads, as torch 1.13 takes them: constant and circular remove at
# most the whole dim (circular then wraps around what is left, at most
# once); reflect and replicate read x's own ends and keep each dim >= 1,
# removing more than the dim in (-6, 4) and (-7, 5).  Written after the
# conv cases so those keep their random numbers.
CROPS = [
    ((2, 3, 5), (-1, 2), "constant", 0.5),
    ((2, 2, 4, 5), (-2, -1, 1, -3), "constant", -1.0),
    ((2, 3, 5), (-5, 1), "constant", 2.0),
    ((3, 4), (1, -2, -1, -1), "constant", 3.0),
    ((2, 3, 5), (-1, 3), "reflect", 0.0),
    ((2, 2, 4, 5), (2, -3, -1, 2), "reflect", 0.0),
    ((2, 3, 5), (-6, 4), "reflect", 0.0),
    ((2, 3, 5), (4, -8), "reflect", 0.0),
    ((1, 2, 3, 4, 5), (-1, 1, 2, -3, 1, -1), "reflect", 0.0),
    ((2, 3, 5), (-2, 6), "replicate", 0.0),
    ((2, 3, 5), (-7, 5), "replicate", 0.0),
    ((2, 2, 4, 5), (3, -4, -2, 1), "replicate", 0.0),
    ((1, 2, 3, 4, 5), (2, -3, -1, 0, 0, -2), "replicate", 0.0),
    ((2, 3, 5), (-1, 4), "circular", 0.0),
    ((2, 3, 5), (3, -2), "circular", 0.0),
    ((2, 2, 4, 5), (-2, 3, 1, -2), "circular", 0.0),
    ((1, 2, 3, 4, 5), (1, -2, -1, 2, -1, 1), "circular", 0.0),
]

# (rank, c_in, c_out, kernel, stride, padding per axis, mode, spatial size)
CONVS = [
    (1, 2, 3, 3, 1, (1,), "reflect", (7,)),
    (1, 2, 3, 4, 2, (2,), "circular", (9,)),
    (2, 3, 2, 3, 1, (1, 2), "reflect", (5, 6)),
    (2, 3, 2, 3, 2, (2, 1), "replicate", (6, 5)),
    (2, 2, 4, 3, 1, (1, 1), "circular", (4, 5)),
    (3, 2, 2, 3, 1, (1, 1, 2), "replicate", (3, 4, 4)),
]


def pad_cases(prefix, cases, tensors, meta):
    for i, (shape, pads, mode, value) in enumerate(cases):
        k = "%s%d" % (prefix, i)
        x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
        y = F.pad(x, pads, mode=mode, value=value) if mode == "constant" else F.pad(x, pads, mode=mode)
        gy = torch.randn(*y.shape, dtype=torch.float64)
        (y * gy).sum().backward()
        tensors.update({k + ".x": x.detach(), k + ".grad_y": gy, k + ".y": y.detach(),
                        k + ".grad_x": x.grad})
        meta.update({k + ".mode": mode, k + ".pads": ",".join(map(str, pads)),
                     k + ".value": repr(value)})
    meta[prefix + "_cases"] = str(len(cases))


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    pad_cases("pad", PADS, tensors, meta)
    for i, (rank, cin, cout, ks, stride, padding, mode, size) in enumerate(CONVS):
        k = "conv%d" % i
        cls = [None, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d][rank]
        m = cls(cin, cout, ks, stride=stride, padding=padding, padding_mode=mode).double()
        x = torch.randn(2, cin, *size, dtype=torch.float64, requires_grad=True)
        y = m(x)
        gy = torch.randn(*y.shape, dtype=torch.float64)
        (y * gy).sum().backward()
        tensors.update({k + ".x": x.detach(), k + ".w": m.weight.detach(), k + ".b": m.bias.detach(),
                        k + ".grad_y": gy, k + ".y": y.detach(), k + ".grad_x": x.grad,
                        k + ".grad_w": m.weight.grad, k + ".grad_b": m.bias.grad})
        meta.update({k + ".mode": mode, k + ".padding": ",".join(map(str, padding)),
                     k + ".stride": str(stride)})
    meta["conv_cases"] = str(len(CONVS))
    pad_cases("crop", CROPS, tensors, meta)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
