#!/usr/bin/python3
"""Writes tests/golden/softmax.safetensors: PyTorch 1.13's values and
gradients for F.softmax, F.log_softmax and F.nll_loss, which
tests/test_softmax.c and tests/test_nll_loss.c compare tapegrad with.

softmax and log_softmax, for each case C in the metadata's softmax_cases
(C.dims lists the dims, negative and non-last ones included):
  sm.C.x, sm.C.w                 the input and the upstream gradient w, in
                                 the case's dtype (f64, f32 or bf16)
  sm.C.D.softmax.y, .gx          F.softmax(x, D) and d sum(y * w) / dx
  sm.C.D.log_softmax.y, .gx      the same for F.log_softmax (D as written,
                                 "-1" for dim -1)
The inputs include rows at +-1000, rows with -inf entries, a row of -inf,
rows holding +inf or NaN (torch: NaN throughout).

nll_loss, for each case C in nll_cases (C.ignore_index; C.weight "1" when a
class weight is given):
  nll.C.logp, nll.C.target, nll.C.weight
  nll.C.R.value, .gout, .grad    F.nll_loss(logp, target, weight,
                                 ignore_index, reduction=R) for R in mean,
                                 sum, none; grad = d sum(value * gout) / dlogp
Inputs (N, C), (N, C, d1, d2) and (C,) with a 0-d target; ignored targets,
an ignore_index inside [0, C), zero class weights, every target ignored
(mean: NaN with zero gradients), a -inf log-probability at a target.

Run with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_softmax_goldens.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "softmax.safetensors")
SEED = 8059
D = torch.float64
INF, NAN = float("inf"), float("nan")


def softmax_inputs(gen):
    """name -> (x in f64, dims); each is written in several dtypes below."""
    big = torch.tensor([[1000.0, 999.0, -1000.0, 998.5, 1000.0],
                        [-1000.0, -1000.0, -999.0, -1001.0, -1000.0],
                        [1000.0, -1000.0, 0.0, 500.0, -500.0]], dtype=D)
    special = torch.tensor([[-INF, -INF, -INF, -INF],   # a row of -inf: NaN
                            [-INF, 0.0, 1.0, -INF],     # masked entries: probability 0
                            [INF, 0.0, 1.0, 2.0],       # +inf: NaN
                            [NAN, 0.0, 1.0, 2.0],       # NaN: NaN
                            [0.0, 1.0, 2.0, 3.0],
                            [-INF, 5.0, 5.0, 5.0]], dtype=D)
    return {"r2": (torch.randn(4, 7, generator=gen, dtype=D) * 3, [1, -1, 0]),
            "r3": (torch.randn(2, 3, 5, generator=gen, dtype=D) * 2, [1, -1, -3, 0]),
            "big": (big, [1, 0]),
            "special": (special, [1, -2])}


SOFTMAX_CASES = [("r2", torch.float64), ("r3", torch.float64), ("big", torch.float64),
                 ("special", torch.float64), ("r2", torch.float32), ("r3", torch.float32),
                 ("big", torch.float32), ("special", torch.float32), ("r3", torch.bfloat16),
                 ("big", torch.bfloat16), ("special", torch.bfloat16)]
SUFFIX = {torch.float64: "f64", torch.float32: "f32", torch.bfloat16: "bf16"}


def softmax_cases(gen, out, meta):
    inputs = softmax_inputs(gen)
    names = []
    for base, dt in SOFTMAX_CASES:
        x64, dims = inputs[base]
        name = "%s_%s" % (base, SUFFIX[dt])
        x = x64.to(dt)
        w = torch.randn(x.shape, generator=gen, dtype=D).to(dt)
        out += [("sm.%s.x" % name, x), ("sm.%s.w" % name, w)]
        for d in dims:
            for fn_name, fn in (("softmax", F.softmax), ("log_softmax", F.log_softmax)):
                xi = x.clone().requires_grad_(True)
                y = fn(xi, d)
                y.backward(w)
                out += [("sm.%s.%d.%s.y" % (name, d, fn_name), y.detach()),
                        ("sm.%s.%d.%s.gx" % (name, d, fn_name), xi.grad)]
        meta[name + ".dims"] = ",".join(str(d) for d in dims)
        names.append(name)
    meta["softmax_cases"] = ",".join(names)


def nll_inputs(gen):
    """name -> (logp f64, target, weight f64 or None, ignore_index)."""
    lp2 = F.log_softmax(torch.randn(6, 4, generator=gen, dtype=D) * 2, 1)
    t2 = torch.tensor([0, 3, -100, 1, 3, 2])
    w4 = torch.tensor([0.5, 2.0, 1.0, 3.0], dtype=D)
    lp4 = F.log_softmax(torch.randn(2, 3, 2, 2, generator=gen, dtype=D), 1)
    t4 = torch.tensor([[[0, 2], [1, -100]], [[2, 2], [0, 1]]])
    lp1 = F.log_softmax(torch.randn(5, generator=gen, dtype=D), 0)
    lpinf = lp2.clone()
    lpinf[1, 3] = -INF   # a target of probability 0: loss inf
    lpinf[0, 2] = -INF   # a masked class that is not a target
    return {"n2": (lp2, t2, None, -100),
            "n2w": (lp2, t2, w4, -100),
            "n2ii": (lp2, torch.tensor([0, 3, 1, 1, 3, 2]), w4, 1),
            "n4w": (lp4, t4, torch.tensor([1.0, 0.25, 2.0], dtype=D), -100),
            "n4": (lp4, t4, None, -100),
            "n1": (lp1, torch.tensor(3), torch.tensor([1, 2, 3, 4, 5.0], dtype=D), -100),
            "n1ign": (lp1, torch.tensor(-100), None, -100),
            "allign": (lp2[:3], torch.tensor([-100, -100, -100]), w4, -100),
            "zerow": (lp2[:3], torch.tensor([0, 0, -100]),
                      torch.tensor([0.0, 1.0, 2.0, 3.0], dtype=D), -100),
            "inf": (lpinf, t2, w4, -100)}


NLL_CASES = [("n2", torch.float64), ("n2w", torch.float64), ("n2ii", torch.float64),
             ("n4w", torch.float64), ("n4", torch.float64), ("n1", torch.float64),
             ("n1ign", torch.float64), ("allign", torch.float64), ("zerow", torch.float64),
             ("inf", torch.float64), ("n2w", torch.float32), ("n4w", torch.float32),
             ("n2w", torch.bfloat16)]


def nll_cases(gen, out, meta):
    inputs = nll_inputs(gen)
    names = []
    for base, dt in NLL_CASES:
        lp64, t, w64, ii = inputs[base]
        name = "%s_%s" % (base, SUFFIX[dt])
        lp, w = lp64.to(dt), None if w64 is None else w64.to(dt)
        out += [("nll.%s.logp" % name, lp), ("nll.%s.target" % name, t)]
        if w is not None:
            out.append(("nll.%s.weight" % name, w))
        for red in ("mean", "sum", "none"):
            li = lp.clone().requires_grad_(True)
            v = F.nll_loss(li, t, weight=w, ignore_index=ii, reduction=red)
            gout = torch.randn(v.shape, generator=gen, dtype=D).to(dt)
            v.backward(gout)
            out += [("nll.%s.%s.value" % (name, red), v.detach()),
                    ("nll.%s.%s.gout" % (name, red), gout),
                    ("nll.%s.%s.grad" % (name, red), li.grad)]
        meta[name + ".ignore_index"] = str(ii)
        meta[name + ".weight"] = "0" if w is None else "1"
        names.append(name)
    meta["nll_cases"] = ",".join(names)


def main():
    gen = torch.Generator().manual_seed(SEED)
    out, meta = [], {"torch": torch.__version__}
    softmax_cases(gen, out, meta)
    nll_cases(gen, out, meta)
    write_safetensors(OUT, out, meta)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
