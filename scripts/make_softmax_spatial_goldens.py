#!/usr/bin/python3
"""Writes tests/golden/softmax_spatial.safetensors: PyTorch 1.13's values and
gradients for F.softmax and F.log_softmax over dim 1 of f32 inputs with
spatial dims, and for F.cross_entropy of f32 spatial logits, which
tests/test_softmax_strided.c compares tapegrad with.

For each case C in the metadata's cases (C.shape as written):
  C.x, C.w                      the f32 input and upstream gradient w
  C.softmax.y, .gx              F.softmax(x, 1) and d sum(y * w) / dx
  C.log_softmax.y, .gx          the same for F.log_softmax
Positions (0, :, 0, ...) to (0, :, 3, ...) of the first case hold a NaN, a
+inf, only -inf, and -inf entries; its last position is shifted by +1000.

cross_entropy, for each case E in ce_cases (E.ignore_index; E.weight "1"
when a class weight is given), logits of shape (2, 10, 3, 3):
  ce.E.x, ce.E.target, ce.E.weight
  ce.E.R.value, .gout, .gx       F.cross_entropy(x, target, weight,
                                 ignore_index, reduction=R) for R in mean,
                                 sum, none; gx = d sum(value * gout) / dx

Run with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_softmax_spatial_goldens.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "softmax_spatial.safetensors")
SEED = 4127
F32 = torch.float32
INF, NAN = float("inf"), float("nan")

# name -> shape: spatial sizes 9 and 17 (neither a multiple of 4 or 8)
CASES = [("s4", (2, 10, 3, 3)), ("s3", (3, 7, 17)), ("c1000", (1, 1000, 3))]


def inputs(gen, name, shape):
    x = torch.rand(shape, generator=gen, dtype=torch.float64) * 24 - 12
    if name == "s4":
        x[0, 4, 0, 0] = NAN
        x[0, 2, 0, 1] = INF
        x[0, :, 0, 2] = -INF
        x[0, 1::3, 1, 0] = -INF
        x[1, :, 2, 2] += 1000
    return x.to(F32)


def softmax_cases(gen, out, meta):
    for name, shape in CASES:
        x = inputs(gen, name, shape)
        w = (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1).to(F32)
        out += [("%s.x" % name, x), ("%s.w" % name, w)]
        for fn_name, fn in (("softmax", F.softmax), ("log_softmax", F.log_softmax)):
            xi = x.clone().requires_grad_(True)
            y = fn(xi, 1)
            y.backward(w)
            out += [("%s.%s.y" % (name, fn_name), y.detach()),
                    ("%s.%s.gx" % (name, fn_name), xi.grad)]
        meta[name + ".shape"] = ",".join(str(d) for d in shape)
    meta["cases"] = ",".join(name for name, _ in CASES)


# name -> (weight or None, ignore_index)
CE_CASES = [("plain", False, -100), ("weighted", True, -100), ("ignore3", True, 3)]


def ce_cases(gen, out, meta):
    shape = (2, 10, 3, 3)
    x = (torch.rand(shape, generator=gen, dtype=torch.float64) * 8 - 4).to(F32)
    t = torch.randint(0, 10, (2, 3, 3), generator=gen)
    t[0, 0, 0] = -100   # ignore_index in each case
    t[1, 1, 1] = 3
    weight = (torch.rand(10, generator=gen, dtype=torch.float64) * 1.5 + 0.5).to(F32)
    for name, weighted, ii in CE_CASES:
        w = weight if weighted else None
        tc = torch.where(t == -100, torch.tensor(ii), t)   # an ignored target
        out += [("ce.%s.x" % name, x), ("ce.%s.target" % name, tc)]
        if w is not None:
            out.append(("ce.%s.weight" % name, w))
        for red in ("mean", "sum", "none"):
            xi = x.clone().requires_grad_(True)
            v = F.cross_entropy(xi, tc, weight=w, ignore_index=ii, reduction=red)
            gout = (torch.rand(v.shape, generator=gen, dtype=torch.float64) + 0.5).to(F32)
            v.backward(gout)
            out += [("ce.%s.%s.value" % (name, red), v.detach()),
                    ("ce.%s.%s.gout" % (name, red), gout),
                    ("ce.%s.%s.gx" % (name, red), xi.grad)]
        meta["ce." + name + ".ignore_index"] = str(ii)
        meta["ce." + name + ".weight"] = "1" if weighted else "0"
    meta["ce_cases"] = ",".join(name for name, _, _ in CE_CASES)


def main():
    gen = torch.Generator().manual_seed(SEED)
    out, meta = [], {"torch": torch.__version__}
    softmax_cases(gen, out, meta)
    ce_cases(gen, out, meta)
    write_safetensors(OUT, out, meta)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
