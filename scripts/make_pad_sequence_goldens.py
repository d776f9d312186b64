#!/usr/bin/python3
"""Writes the PyTorch golden file of torch.nn.utils.rnn.pad_sequence
(tests/test_pad_sequence.c): tests/golden/pad_sequence.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_pad_sequence_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.n (the
number of sequences), case<i>.batch_first ("0" or "1") and
case<i>.value (padding_value, as %r of a float), and tensors
case<i>.s<j> (sequence j, (L_j, *), random values; their dtypes are the
case's, one of them f64 beside f32 in the mixed case), case<i>.y
(pad_sequence(seqs, batch_first, padding_value)), case<i>.g (the gradient
of y) and case<i>.d<j>, torch.autograd's gradient of sum(g * y) for
sequence j (integer cases have none).
"""
import os
import sys

import torch
from torch.nn.utils.rnn import pad_sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "pad_sequence.safetensors")
SEED = 4127

# ([shapes], [dtypes], batch_first, padding_value)
F32, F64, I64 = torch.float32, torch.float64, torch.int64
CASES = [
    ([(3, 4), (1, 4), (5, 4)], [F32] * 3, False, 0.0),
    ([(3, 4), (1, 4), (5, 4)], [F32] * 3, True, 0.0),
    ([(2,), (4,), (1,), (4,)], [F64] * 4, False, -1.5),
    ([(2,), (4,), (1,), (4,)], [F64] * 4, True, 7.25),
    ([(2, 3, 2), (4, 3, 2)], [F64] * 2, True, -0.0),
    ([(6, 2)], [F32], False, 3.0),
    ([(3, 2), (3, 2)], [F32] * 2, False, 1.0),
    ([(0, 3), (2, 3)], [F32] * 2, True, 2.0),
    ([(2, 3), (3, 3)], [F32, F64], False, 0.5),
    ([(3,), (1,)], [I64] * 2, True, -2.0),
]


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    for i, (shapes, dts, bf, value) in enumerate(CASES):
        p = "case%d." % i
        seqs = []
        for j, (s, dt) in enumerate(zip(shapes, dts)):
            if dt.is_floating_point:
                x = (torch.rand(s, dtype=torch.float64) * 2 - 1).to(dt)
                x.requires_grad_()
            else:
                x = torch.randint(-9, 10, s, dtype=dt)
            seqs.append(x)
            tensors[p + "s%d" % j] = x.detach()
        y = pad_sequence(seqs, batch_first=bf, padding_value=value)
        tensors[p + "y"] = y.detach()
        if y.dtype.is_floating_point:
            g = (torch.rand(y.shape, dtype=torch.float64) + 0.5).to(y.dtype)
            ds = torch.autograd.grad(y, seqs, g)
            tensors[p + "g"] = g
            for j, d in enumerate(ds):
                tensors[p + "d%d" % j] = d
        meta[p + "n"] = str(len(seqs))
        meta[p + "batch_first"] = "1" if bf else "0"
        meta[p + "value"] = repr(value)
    meta["cases"] = str(len(CASES))
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
