#!/usr/bin/python3
"""Writes tests/golden/sparse_grad.safetensors: PyTorch 1.13's sparse
Embedding gradients and the optimizers that take them, which
tests/test_sparse_grad.c compares tapegrad with.

  emb.<dt>.weight (7, 3), emb.idx (2, 5) i64 with repeats and the row 2,
  emb.idx2 (4,) i64, emb.<dt>.w (2, 5, 3), emb.<dt>.w2 (4, 3): upstream
  gradients; dt is f64 or f32.
  emb.<dt>.<case>.indices / .values   weight.grad._indices(), ._values()
  emb.<dt>.<case>.cindices / .cvalues the same of weight.grad.coalesce()
  emb.<dt>.<case>.dense               the dense Embedding's weight.grad
      case plain:  F.embedding(idx, weight, sparse=True) backward(w)
      case pad:    the same with padding_idx=2
      case accum:  plain, then a second backward of F.embedding(idx2) with w2
  emb.f32.maxnorm.weight / .indices / .values   max_norm=1 with sparse=True:
      the renormed weight and the sparse gradient
  opt.<name>.<dt>.w0 (6, 4) the starting weight; opt.idx.<t> (i64) and
  opt.<dt>.g.<t> the upstream gradient of step t (t = 0..3: rows repeat,
  row 4 never appears); opt.<name>.<dt>.w.<t> the weight after step t;
  state after the last step: opt.<name>.<dt>.exp_avg, .exp_avg_sq (SparseAdam),
  .sum (Adagrad), .step
      sparse_adam:      SparseAdam(lr=0.01)
      sparse_adam_max:  SparseAdam(lr=0.02, betas=(0.8, 0.99), eps=1e-6,
                        maximize=True)
      sgd:              SGD(lr=0.1)
      sgd_max:          SGD(lr=0.1, maximize=True)
      adagrad:          Adagrad(lr=0.1, lr_decay=0.01,
                        initial_accumulator_value=0.1)
      adagrad_max:      Adagrad(lr=0.05, maximize=True)

Run with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_sparse_goldens.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "sparse_grad.safetensors")
SEED = 7331
DTS = (("f64", torch.float64), ("f32", torch.float32))
STEPS = ([1, 1, 3], [0, 5, 5, 5], [2], [1, 3, 3, 0])
OPTS = {
    "sparse_adam": lambda p: torch.optim.SparseAdam(p, lr=0.01),
    "sparse_adam_max": lambda p: torch.optim.SparseAdam(p, lr=0.02, betas=(0.8, 0.99),
                                                        eps=1e-6, maximize=True),
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1),
    "sgd_max": lambda p: torch.optim.SGD(p, lr=0.1, maximize=True),
    "adagrad": lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.01,
                                             initial_accumulator_value=0.1),
    "adagrad_max": lambda p: torch.optim.Adagrad(p, lr=0.05, maximize=True),
}


def sparse_parts(g, prefix):
    c = g.coalesce()
    return [(prefix + ".indices", g._indices().clone()), (prefix + ".values", g._values().clone()),
            (prefix + ".cindices", c._indices().clone()), (prefix + ".cvalues", c._values().clone())]


def emb_grad(weight, calls, sparse, **kw):
    t = weight.clone().requires_grad_(True)
    for idx, w in calls:
        F.embedding(idx, t, sparse=sparse, **kw).backward(w)
    return t.grad


def embedding_cases(gen, out):
    idx = torch.tensor([[2, 0, 5, 5, 2], [6, 1, 5, 0, 3]], dtype=torch.int64)
    idx2 = torch.tensor([5, 4, 0, 5], dtype=torch.int64)
    out += [("emb.idx", idx), ("emb.idx2", idx2)]
    for name, dt in DTS:
        weight = (torch.rand(7, 3, generator=gen, dtype=torch.float64) * 2 - 1).to(dt)
        w = (torch.rand(2, 5, 3, generator=gen, dtype=torch.float64) * 2 - 1).to(dt)
        w2 = (torch.rand(4, 3, generator=gen, dtype=torch.float64) * 2 - 1).to(dt)
        p = f"emb.{name}"
        out += [(p + ".weight", weight), (p + ".w", w), (p + ".w2", w2)]
        for case, calls, kw in (("plain", [(idx, w)], {}), ("pad", [(idx, w)], {"padding_idx": 2}),
                                ("accum", [(idx, w), (idx2, w2)], {})):
            g = emb_grad(weight, calls, True, **kw)
            assert g.is_sparse
            out += sparse_parts(g, f"{p}.{case}")
            out.append((f"{p}.{case}.dense", emb_grad(weight, calls, False, **kw)))
    weight = (torch.rand(7, 3, generator=gen, dtype=torch.float64) * 4 - 2).float()
    t = weight.clone().requires_grad_(True)
    F.embedding(idx, t, max_norm=1.0, sparse=True).sum().backward()
    out += [("emb.f32.maxnorm.weight_in", weight), ("emb.f32.maxnorm.weight", t.detach().clone()),
            ("emb.f32.maxnorm.indices", t.grad._indices().clone()),
            ("emb.f32.maxnorm.values", t.grad._values().clone())]


def optimizer_cases(gen, out):
    for t, rows in enumerate(STEPS):
        out.append((f"opt.idx.{t}", torch.tensor(rows, dtype=torch.int64)))
    for name, dt in DTS:
        gs = [(torch.rand(len(rows), 4, generator=gen, dtype=torch.float64) * 2 - 1).to(dt)
              for rows in STEPS]
        out += [(f"opt.{name}.g.{t}", g) for t, g in enumerate(gs)]
        w0 = (torch.rand(6, 4, generator=gen, dtype=torch.float64) * 2 - 1).to(dt)
        out.append((f"opt.{name}.w0", w0))
        for oname, make in OPTS.items():
            emb = torch.nn.Embedding(6, 4, sparse=True, dtype=dt)
            with torch.no_grad():
                emb.weight.copy_(w0)
            opt = make(emb.parameters())
            p = f"opt.{oname}.{name}"
            for t, rows in enumerate(STEPS):
                opt.zero_grad()
                emb(torch.tensor(rows)).backward(gs[t])
                opt.step()
                out.append((f"{p}.w.{t}", emb.weight.detach().clone()))
            st = opt.state[emb.weight]
            for k in ("exp_avg", "exp_avg_sq", "sum"):
                if k in st:
                    out.append((f"{p}.{k}", st[k].clone()))
            if "step" in st:
                out.append((f"{p}.step", torch.tensor(float(st["step"]), dtype=torch.float64)))


def main():
    gen = torch.Generator().manual_seed(SEED)
    out = []
    embedding_cases(gen, out)
    optimizer_cases(gen, out)
    write_safetensors(OUT, out, {"torch": torch.__version__, "seed": str(SEED)})
    print("wrote", OUT)


if __name__ == "__main__":
    main()
