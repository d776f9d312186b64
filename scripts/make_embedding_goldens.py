#!/usr/bin/python3
"""Writes tests/golden/embedding.safetensors: PyTorch 1.13's F.embedding with
padding_idx, scale_grad_by_freq and max_norm, which tests/test_embedding.c
compares tapegrad with.

  weight (7, 4) f64, idx (3, 5) i64 with repeats and the padding row 2,
  w (3, 5, 4) the upstream gradient:
  y                              F.embedding(idx, weight)
  gw.pad, gw.freq, gw.pad_freq   d sum(y * w)/dweight with padding_idx=2,
                                 scale_grad_by_freq, both
  gg.pad, v                      d <dweight, v>/dw with padding_idx=2 (the
                                 double backward; torch's ignores the scaling
                                 by frequency, so that case is gradgradcheck's)
  renorm.weight (6, 5) f32 rows of norms around 1, renorm.idx (8,) i64:
  renorm.<p>.weight, renorm.<p>.y  the weight after F.embedding(idx, weight,
                                 max_norm=1, norm_type=p) and its output, for
                                 p in 2, 1, 3 and inf; renorm.f64.* the same
                                 in f64 with p 2

Run with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_embedding_goldens.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "embedding.safetensors")
SEED = 6121
D = torch.float64


def weight_grad(weight, idx, w, **kw):
    t = weight.clone().requires_grad_(True)
    F.embedding(idx, t, **kw).backward(w)
    return t.grad


def main():
    gen = torch.Generator().manual_seed(SEED)
    weight = torch.rand(7, 4, generator=gen, dtype=D) * 2 - 1
    idx = torch.tensor([[2, 0, 5, 5, 2], [6, 1, 5, 0, 3], [2, 2, 6, 4, 5]], dtype=torch.int64)
    w = torch.rand(3, 5, 4, generator=gen, dtype=D) * 2 - 1
    v = torch.rand(7, 4, generator=gen, dtype=D) * 2 - 1
    out = [("weight", weight), ("idx", idx), ("w", w), ("v", v),
           ("y", F.embedding(idx, weight)),
           ("gw.pad", weight_grad(weight, idx, w, padding_idx=2)),
           ("gw.freq", weight_grad(weight, idx, w, scale_grad_by_freq=True)),
           ("gw.pad_freq", weight_grad(weight, idx, w, padding_idx=2, scale_grad_by_freq=True))]
    t = weight.clone().requires_grad_(True)
    u = w.clone().requires_grad_(True)
    (gw,) = torch.autograd.grad(F.embedding(idx, t, padding_idx=2), t, u, create_graph=True)
    (gg,) = torch.autograd.grad(gw, u, v)
    out.append(("gg.pad", gg))

    scale = torch.tensor([0.3, 0.9, 1.2, 2.5, 0.99, 7.0], dtype=D).reshape(6, 1)
    rw = (torch.rand(6, 5, generator=gen, dtype=D) * 2 - 1)
    rw = (rw / rw.norm(dim=1, keepdim=True) * scale).float()
    ridx = torch.tensor([3, 0, 2, 3, 5, 1, 1, 2], dtype=torch.int64)
    out += [("renorm.weight", rw), ("renorm.idx", ridx)]
    for name, p in (("2", 2.0), ("1", 1.0), ("3", 3.0), ("inf", float("inf"))):
        t = rw.clone()
        y = F.embedding(ridx, t, max_norm=1.0, norm_type=p)
        out += [(f"renorm.{name}.weight", t), (f"renorm.{name}.y", y)]
    t = rw.double()
    out += [("renorm.f64.weight_in", t.clone())]
    y = F.embedding(ridx, t, max_norm=1.0)
    out += [("renorm.f64.weight", t), ("renorm.f64.y", y)]
    write_safetensors(OUT, out, {"torch": torch.__version__, "seed": str(SEED)})
    print("wrote", OUT)


if __name__ == "__main__":
    main()
