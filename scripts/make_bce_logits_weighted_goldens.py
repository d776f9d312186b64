#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_bce_with_logits_weighted
(tests/test_bce_logits_weighted.c): tests/golden/bce_logits_weighted.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_bce_logits_weighted_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.dtype (f32
or f64), case<i>.red ("mean", "sum", "none") and case<i>.has ("" or any
of "w" and "p": which of weight and pos_weight are given), and tensors in
that dtype: case<i>.x (logits (4, 3), some of them +-1000), case<i>.t,
case<i>.w (4, 3) or (3), case<i>.p (3), case<i>.g, case<i>.y =
F.binary_cross_entropy_with_logits(x, t, w, reduction=red, pos_weight=p)
and the gradients of sum(g * y): case<i>.dx, .dt (torch's), .dw, .dp (torch's
autograd through the formula written out: its function is not
differentiable in weight and pos_weight; zeros (1) when not given).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "bce_logits_weighted.safetensors")
SEED = 9021
DTYPES = {"f32": torch.float32, "f64": torch.float64}


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    i = 0
    for name, dt in DTYPES.items():
        for red in ("mean", "sum", "none"):
            for has in ("", "w", "p", "wp"):
                x = torch.randn(4, 3, dtype=torch.float64) * 3
                x[0, 0], x[1, 2] = 1000.0, -1000.0
                t = torch.rand(4, 3, dtype=torch.float64)
                w = torch.rand(4, 3 if i % 2 else 1, dtype=torch.float64) + 0.5
                p = torch.rand(3, dtype=torch.float64) * 3
                ins = [v.to(dt).requires_grad_() for v in (x, t, w, p)]
                wv = ins[2].detach() if "w" in has else None
                pv = ins[3].detach() if "p" in has else None
                y = F.binary_cross_entropy_with_logits(ins[0], ins[1], wv, reduction=red,
                                                       pos_weight=pv)
                g = torch.randn(y.shape, dtype=torch.float64).to(dt)
                dx, dt_ = torch.autograd.grad(y, ins[:2], g)
                # torch's function is not differentiable in weight and pos_weight:
                # their gradients come from its formula written out
                lw = 1 + (ins[3] - 1) * ins[1] if "p" in has else 1
                sp = torch.log1p(torch.exp(-ins[0].abs())) + torch.clamp(-ins[0], min=0)
                e = ((1 - ins[1]) * ins[0] + lw * sp) * (ins[2] if "w" in has else 1)
                e = {"mean": e.mean(), "sum": e.sum(), "none": e}[red]
                dw, dp = torch.autograd.grad(e, ins[2:], g, allow_unused=True)
                grads = (dx, dt_, dw, dp)
                pre = "case%d." % i
                out = {"x": ins[0], "t": ins[1], "w": ins[2], "p": ins[3], "g": g, "y": y}
                for k, d in zip(("dx", "dt", "dw", "dp"), grads):
                    out[k] = torch.zeros(1, dtype=dt) if d is None else d
                for k, v in out.items():
                    tensors[pre + k] = v.detach().contiguous()
                meta.update({pre + "dtype": name, pre + "red": red, pre + "has": has})
                i += 1
    meta["cases"] = str(i)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
