#!/usr/bin/python3
"""Writes the PyTorch golden file of the padding modules (tests/test_pad_modules.c):
nn.ZeroPad2d, nn.ConstantPad1d/2d/3d, nn.ReflectionPad1d/2d/3d and
nn.ReplicationPad1d/2d/3d, batched and unbatched, with negative padding
where torch takes it: tests/golden/pad/pad_modules.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_pad_modules_goldens.py

Case "m<i>" (metadata m<i>.type: the class name, m<i>.pads: the padding as
the module holds it, (left, right, top, bottom, front, back) for every side,
m<i>.value: the constant, m<i>.repr: repr(module)):
  m<i>.x, m<i>.grad_y    input and output gradient
  m<i>.y, m<i>.grad_x    module(x) and d sum(y * grad_y) / dx
in the case's dtype (f32, f64 or bf16), computed by torch in that dtype
(bf16 reflection and replication: in f32, rounded once, as torch 1.13 has
no bf16 kernel of theirs on the CPU).
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "pad", "pad_modules.safetensors")
SEED = 4127

F32, F64, BF16 = torch.float32, torch.float64, torch.bfloat16

# (class, padding as torch takes it, value or None, x shape, dtype)
CASES = [
    ("ZeroPad2d", 1, None, (2, 3, 4, 5), F32),
    ("ZeroPad2d", (1, 2, 0, 3), None, (3, 4, 5), F64),
    ("ZeroPad2d", (-1, 2, 1, -2), None, (2, 2, 4, 5), F64),
    ("ConstantPad1d", 2, 3.5, (2, 3, 5), F32),
    ("ConstantPad1d", (3, -1), -1.25, (3, 5), F64),
    ("ConstantPad1d", (1, 2), 0.5, (2, 2, 2, 4), F64),
    ("ConstantPad2d", (1, 0, 2, 1), 0.75, (2, 3, 4, 5), F64),
    ("ConstantPad2d", 2, -2.0, (4, 5), F32),
    ("ConstantPad3d", (1, 2, 0, 1, 2, 0), 1.5, (2, 2, 3, 4, 5), F32),
    ("ConstantPad3d", (0, -2, 1, 0, -1, 1), 0.25, (2, 3, 4, 5), F64),
    ("ReflectionPad1d", 2, None, (2, 3, 5), F32),
    ("ReflectionPad1d", (4, 1), None, (3, 5), F64),
    ("ReflectionPad1d", (-1, 3), None, (2, 3, 5), F64),
    ("ReflectionPad2d", (1, 2, 3, 0), None, (2, 2, 4, 5), F64),
    ("ReflectionPad2d", 1, None, (3, 4, 5), F32),
    ("ReflectionPad3d", (1, 0, 2, 1, 1, 2), None, (1, 2, 3, 4, 5), F64),
    ("ReflectionPad3d", 1, None, (2, 3, 4, 5), F32),
    ("ReplicationPad1d", (3, 1), None, (2, 3, 4), F64),
    ("ReplicationPad1d", 2, None, (3, 4), F32),
    ("ReplicationPad2d", (2, 0, 1, 3), None, (2, 2, 3, 4), F64),
    ("ReplicationPad2d", (-1, 2, 2, -1), None, (3, 4, 5), F64),
    ("ReplicationPad3d", (1, 2, 0, 1, 2, 1), None, (1, 2, 3, 4, 3), F64),
    ("ReplicationPad3d", 1, None, (2, 3, 3, 4), F32),
    # bf16: torch 1.13 has no bf16 reflection or replication pad on the CPU;
    # these are computed in f32 on the bf16 values and rounded once
    ("ReflectionPad2d", (2, 1, 1, 2), None, (2, 2, 4, 5), BF16),
    ("ReplicationPad1d", (3, 2), None, (2, 3, 4), BF16),
    ("ConstantPad2d", (1, 1, 2, 0), 0.5, (2, 3, 4), BF16),
]


def module(cls, padding, value):
    c = getattr(nn, cls)
    return c(padding, value) if value is not None else c(padding)


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    for i, (cls, padding, value, shape, dt) in enumerate(CASES):
        k = "m%d" % i
        m = module(cls, padding, value)
        up = dt == BF16 and value is None and not cls.startswith("Zero")
        x = torch.randn(*shape, dtype=F64).to(dt)
        xc = (x.float() if up else x).requires_grad_()
        y = m(xc)
        gy = torch.randn(*y.shape, dtype=F64).to(dt)
        (y * (gy.float() if up else gy)).sum().backward()
        tensors.update({k + ".x": x, k + ".grad_y": gy, k + ".y": y.detach().to(dt),
                        k + ".grad_x": xc.grad.to(dt)})
        meta.update({k + ".type": cls, k + ".pads": ",".join(map(str, m.padding)),
                     k + ".value": repr(float(getattr(m, "value", 0.0))),
                     k + ".repr": repr(m)})
    meta["cases"] = str(len(CASES))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
