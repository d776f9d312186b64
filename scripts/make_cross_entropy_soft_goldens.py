#!/usr/bin/python3
"""Writes tests/golden/cross_entropy_soft.safetensors: PyTorch 1.13's values
and gradients of F.cross_entropy with label smoothing and class indices,
and with class-probability targets, which tests/test_cross_entropy_soft.c
compares tapegrad's one op (src/ops/cross_entropy_soft.c) with.

For each case E in the metadata's cases (E.shape, E.dtype "f32" or "f64",
E.eps the label smoothing, E.ignore_index, E.weight "1" when a class weight
is given, E.prob "1" for probability targets):
  E.x, E.target, E.weight       logits U[-4, 4), i64 classes (some equal to
                                ignore_index) or softmax probabilities
  E.R.value, .gout, .gx         F.cross_entropy(x, target, weight,
                                ignore_index, reduction=R, label_smoothing)
                                for R in mean, sum, none; gx = d sum(value *
                                gout) / dx

Run with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_cross_entropy_soft_goldens.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "cross_entropy_soft.safetensors")
SEED = 5261
DTYPES = {"f32": torch.float32, "f64": torch.float64}

# name, shape, dtype, eps, ignore_index, weighted, prob
CASES = [
    ("smooth_rows", (6, 7), "f32", 0.1, 2, False, False),
    ("smooth_rows_w", (6, 7), "f32", 0.1, 2, True, False),
    ("smooth_one_w", (5, 4), "f64", 1.0, 1, True, False),
    ("smooth_rows_f64", (9, 300), "f64", 0.2, -100, True, False),
    ("smooth_spatial_w", (2, 5, 3, 4), "f32", 0.1, 3, True, False),
    ("smooth_spatial", (3, 6, 7), "f64", 0.3, -100, False, False),
    ("prob_rows", (6, 7), "f32", 0.0, -100, False, True),
    ("prob_rows_w", (6, 7), "f32", 0.2, -100, True, True),
    ("prob_rows_f64", (4, 300), "f64", 0.1, -100, True, True),
    ("prob_one", (3, 5), "f64", 1.0, -100, False, True),
    ("prob_spatial_w", (2, 5, 3, 4), "f32", 0.1, -100, True, True),
    ("prob_spatial", (3, 6, 7), "f64", 0.0, -100, False, True),
]


def case(gen, out, meta, name, shape, dt, eps, ii, weighted, prob):
    dtype = DTYPES[dt]
    x = (torch.rand(shape, generator=gen, dtype=torch.float64) * 8 - 4).to(dtype)
    c = shape[1]
    if prob:
        u = torch.rand(shape, generator=gen, dtype=torch.float64) * 6 - 3
        t = torch.softmax(u, 1).to(dtype)
    else:
        tshape = (shape[0],) + tuple(shape[2:])
        t = torch.randint(0, c, tshape, generator=gen)
        if ii >= 0:
            t.view(-1)[::3] = ii   # every third target ignored
    w = (torch.rand(c, generator=gen, dtype=torch.float64) * 1.5 + 0.5).to(dtype)
    w = w if weighted else None
    out += [("%s.x" % name, x), ("%s.target" % name, t)]
    if w is not None:
        out.append(("%s.weight" % name, w))
    for red in ("mean", "sum", "none"):
        xi = x.clone().requires_grad_(True)
        v = F.cross_entropy(xi, t, weight=w, ignore_index=ii, reduction=red,
                            label_smoothing=eps)
        gout = (torch.rand(v.shape, generator=gen, dtype=torch.float64) + 0.5).to(dtype)
        v.backward(gout)
        out += [("%s.%s.value" % (name, red), v.detach()),
                ("%s.%s.gout" % (name, red), gout),
                ("%s.%s.gx" % (name, red), xi.grad)]
    meta[name + ".shape"] = ",".join(str(d) for d in shape)
    meta[name + ".dtype"] = dt
    meta[name + ".eps"] = repr(eps)
    meta[name + ".ignore_index"] = str(ii)
    meta[name + ".weight"] = "1" if weighted else "0"
    meta[name + ".prob"] = "1" if prob else "0"


def main():
    gen = torch.Generator().manual_seed(SEED)
    out, meta = [], {"torch": torch.__version__}
    for c in CASES:
        case(gen, out, meta, *c)
    meta["cases"] = ",".join(c[0] for c in CASES)
    write_safetensors(OUT, out, meta)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
