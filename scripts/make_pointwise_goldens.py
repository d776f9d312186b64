#!/usr/bin/python3
"""Writes tests/golden/pointwise.safetensors: PyTorch 1.13's values and
gradients for softplus, clamp, where, one_hot and embedding, which
tests/test_pointwise.c compares tapegrad with (all f64, so that the only
differences are rounding in the last bits).

  softplus.x, softplus.y1, softplus.g1     F.softplus(x) and d sum(y * w)/dx
  softplus.y2, softplus.g2                 beta 2, threshold 5
  softplus.w                               the upstream gradient w
  clamp.x, clamp.y, clamp.g                torch.clamp(x, -0.5, 0.75)
  clamp.ymin, clamp.gmin                   torch.clamp(x, min=-0.5)
  clamp.w
  where.cond, where.a, where.b, where.w    cond (3, 5, 1) of 0/1 (i64),
  where.y, where.ga, where.gb              a (3, 1, 4), b (1, 5, 4)
  one_hot.labels, one_hot.y                F.one_hot(labels, 5) (i64)
  emb.weight, emb.idx, emb.w               F.embedding(idx, weight) with
  emb.y, emb.gw                            repeated indices

Run with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_pointwise_goldens.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "pointwise.safetensors")
SEED = 8017
D = torch.float64


def grad_of(fn, *xs, w):
    xs = [x.clone().requires_grad_(True) for x in xs]
    y = fn(*xs)
    y.backward(w)
    return y.detach(), [x.grad for x in xs]


def main():
    gen = torch.Generator().manual_seed(SEED)
    out = []
    x = torch.cat([torch.rand(200, generator=gen, dtype=D) * 60 - 30,
                   torch.tensor([0.0, -0.0, 20.0, 19.999, 20.001, 2.5, 2.5001, -40.0], dtype=D)])
    w = torch.rand(x.shape, generator=gen, dtype=D) * 2 - 1
    y1, (g1,) = grad_of(F.softplus, x, w=w)
    y2, (g2,) = grad_of(lambda t: F.softplus(t, beta=2, threshold=5), x, w=w)
    out += [("softplus.x", x), ("softplus.w", w), ("softplus.y1", y1), ("softplus.g1", g1),
            ("softplus.y2", y2), ("softplus.g2", g2)]

    x = torch.cat([torch.rand(100, generator=gen, dtype=D) * 4 - 2,
                   torch.tensor([-0.5, 0.75, -0.50001, 0.75001, float("nan")], dtype=D)])
    w = torch.rand(x.shape, generator=gen, dtype=D) * 2 - 1
    y, (g,) = grad_of(lambda t: torch.clamp(t, -0.5, 0.75), x, w=w)
    ymin, (gmin,) = grad_of(lambda t: torch.clamp(t, min=-0.5), x, w=w)
    out += [("clamp.x", x), ("clamp.w", w), ("clamp.y", y), ("clamp.g", g),
            ("clamp.ymin", ymin), ("clamp.gmin", gmin)]

    cond = (torch.rand(3, 5, 1, generator=gen) > 0.5).to(torch.int64)
    a = torch.rand(3, 1, 4, generator=gen, dtype=D)
    b = torch.rand(1, 5, 4, generator=gen, dtype=D)
    w = torch.rand(3, 5, 4, generator=gen, dtype=D)
    y, (ga, gb) = grad_of(lambda p, q: torch.where(cond.bool(), p, q), a, b, w=w)
    out += [("where.cond", cond), ("where.a", a), ("where.b", b), ("where.w", w),
            ("where.y", y), ("where.ga", ga), ("where.gb", gb)]

    labels = torch.tensor([[0, 4, 2], [2, 2, 1]], dtype=torch.int64)
    out += [("one_hot.labels", labels), ("one_hot.y", F.one_hot(labels, 5))]

    weight = torch.randn(10, 4, generator=gen, dtype=D)
    idx = torch.tensor([[3, 7, 3], [0, 9, 3]], dtype=torch.int64)
    w = torch.rand(2, 3, 4, generator=gen, dtype=D)
    y, (gw,) = grad_of(lambda t: F.embedding(idx, t), weight, w=w)
    out += [("emb.weight", weight), ("emb.idx", idx), ("emb.w", w), ("emb.y", y),
            ("emb.gw", gw)]
    write_safetensors(OUT, out, {"torch": torch.__version__})
    print("wrote", OUT)


if __name__ == "__main__":
    main()
