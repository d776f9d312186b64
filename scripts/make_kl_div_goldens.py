#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_kl_div (tests/test_kl_div.c):
tests/golden/kl_div.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_kl_div_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.dtype (f32,
f64 or bf16), case<i>.red ("mean", "sum", "none", "batchmean") and
case<i>.log_target ("0" or "1"), and tensors in that dtype: case<i>.x (the
input), case<i>.t (the target), case<i>.g (the gradient of the loss),
case<i>.y = F.kl_div(x, t, reduction, log_target) and case<i>.dx,
case<i>.dt, torch.autograd's gradients of sum(g * y).  The targets of
log_target false hold zeros (a loss of 0, a gradient in t of NaN) and one
negative value (NaN) in the cases of red none; a case of 0-d tensors has
batchmean; the broadcast cases give x and t shapes that broadcast together
((4, 5) with (5,), (4, 1) with (4, 5), (1, 5) with (3, 5)) for every reduction.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "kl_div.safetensors")
SEED = 5113
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}
REDS = ("mean", "sum", "none", "batchmean")


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    i = 0

    def add(name, dt, red, log_target, x, t):
        nonlocal i
        xr = x.to(dt).requires_grad_()
        tr = t.to(dt).requires_grad_()
        y = F.kl_div(xr, tr, reduction=red, log_target=log_target)
        g = torch.randn(y.shape, dtype=torch.float64).to(dt)
        dx, dt_ = torch.autograd.grad(y, (xr, tr), g)
        p = "case%d." % i
        for k, v in {"x": xr, "t": tr, "g": g, "y": y, "dx": dx, "dt": dt_}.items():
            tensors[p + k] = v.detach().contiguous()
        meta.update({p + "dtype": name, p + "red": red,
                     p + "log_target": "1" if log_target else "0"})
        i += 1

    for name, dt in DTYPES.items():
        for red in REDS:
            for log_target in (False, True):
                x = torch.log_softmax(torch.randn(4, 5, dtype=torch.float64), 1)
                if log_target:
                    t = torch.log_softmax(torch.randn(4, 5, dtype=torch.float64), 1)
                else:
                    t = torch.softmax(torch.randn(4, 5, dtype=torch.float64), 1)
                    t[0, 1] = 0.0
                    t[2, 3] = 0.0
                    if red == "none":   # NaN would fill a reduced loss
                        t[3, 4] = -0.25
                add(name, dt, red, log_target, x, t)
        add(name, dt, "batchmean", False, torch.tensor(-0.5, dtype=torch.float64),
            torch.tensor(0.3, dtype=torch.float64))
        for xs, ts in (((4, 5), (5,)), ((4, 1), (4, 5)), ((1, 5), (3, 5))):
            for red in REDS:
                for log_target in (False, True):
                    x = torch.log_softmax(torch.randn(xs, dtype=torch.float64), -1)
                    t = torch.softmax(torch.randn(ts, dtype=torch.float64), -1)
                    add(name, dt, red, log_target, x, t.log() if log_target else t)
    meta["cases"] = str(i)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
