#!/usr/bin/python3
"""Writes tests/golden/softmax.safetensors: PyTorch 1.13's values and
gradients for F.softmax and F.log_softmax, which
tests/test_softmax.c compares tapegrad with.

softmax and log_softmax, for each case C in the metadata's softmax_cases
(C.dims lists the dims, negative and non-last ones included):
  sm.C.x, sm.C.w                 the input and the upstream gradient w, in
                                 the case's dtype (f64, f32 or bf16)
  sm.C.D.softmax.y, .gx          F.softmax(x, D) and d sum(y * w) / dx
  sm.C.D.log_softmax.y, .gx      the same for F.log_softmax (D as written,
                                 "-1" for dim -1)
The inputs include rows at +-1000, rows with -inf entries, a row of -inf,
rows holding +inf or NaN (torch: NaN throughout).

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
SEED = 20261215
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


def main():
    gen = torch.Generator().manual_seed(SEED)
    out, meta = [], {"torch": torch.__version__}
    softmax_cases(gen, out, meta)
    write_safetensors(OUT, out, meta)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
