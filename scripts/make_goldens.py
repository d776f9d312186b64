#!/usr/bin/python3
"""Writes the PyTorch golden files of tapegrad's conv ops.

For every case below it writes
  tests/golden/<name>.case.safetensors    x, weight, [bias], [grad_y] + metadata
  tests/golden/<name>.result.safetensors  y, [grad_x, grad_weight, [grad_bias]]
in the format `tapegrad run-op` reads and writes (see docs/run-op.md).

Run from the repository root with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_goldens.py
The safetensors format is written by hand (struct + json), so the
`safetensors` package is not needed.

How the references are computed: every input is drawn in its own dtype (so
that f16/bf16 inputs are exactly representable), then up-cast to f64 and run
through torch.nn.functional in f64; each result is rounded once to the dtype
tapegrad must produce.  That is the tightest reference for an implementation
that computes low precision in f32 and rounds once.  Mixed dtypes follow
PyTorch's type promotion: x bf16 with weight f32 computes in f32, y is f32
and each gradient comes back in its own input's dtype.  torch's conv ops
refuse such inputs outside autocast, and so does tapegrad:
tests/test_golden.c expects that refusal, and checks the conv_transpose
cases of half dtypes under autocast, where its PROMOTE policy applies.

Asymmetric padding, which torch's conv functions do not take:
  conv:           F.pad the input by (lo, hi) per axis, then conv with pad 0;
  conv_transpose: run with padding 0, then crop lo leading and hi trailing
                  outputs per axis (conv_transpose's padding removes outputs).
"""
import json
import os
import struct
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402  (re-exported for other scripts)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "golden")
SEED = 20240611

DTYPES = {"f64": torch.float64, "f32": torch.float32,
          "f16": torch.float16, "bf16": torch.bfloat16}
def ints(v, n):
    """A metadata value (int or list) as the list of per-axis ints."""
    if isinstance(v, int):
        return [v] * n
    return list(v)


def fmt(v):
    return str(v) if isinstance(v, int) else ",".join(str(i) for i in v)


def activation(y, act):
    if act is None:
        return y
    if act == "relu":
        return F.relu(y)
    if act.startswith("leaky_relu:"):
        return F.leaky_relu(y, float(act.split(":")[1]))
    return {"tanh": torch.tanh, "sigmoid": torch.sigmoid, "silu": F.silu,
            "gelu": F.gelu}[act](y)


def forward(c, x, w, b):
    """The op in f64 on up-cast inputs; handles asymmetric padding."""
    n = x.dim() - 2
    transpose = c["op"].startswith("conv_transpose")
    stride = ints(c.get("stride", 1), n)
    dil = ints(c.get("dilation", 1), n)
    groups = c.get("groups", 1)
    pad = ints(c.get("padding", 0), n)
    if len(pad) == n:
        pad = [p for p in pad for _ in (0, 1)]  # symmetric: lo = hi = p
    lo, hi = pad[0::2], pad[1::2]
    if not transpose:
        fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[n]
        # F.pad lists (lo, hi) pairs from the last axis to the first.
        fpad = []
        for a in reversed(range(n)):
            fpad += [lo[a], hi[a]]
        y = fn(F.pad(x, fpad), w, b, stride=stride, padding=0, dilation=dil, groups=groups)
    else:
        fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[n]
        opad = ints(c.get("output_padding", 0), n)
        y = fn(x, w, b, stride=stride, padding=0, output_padding=opad, groups=groups,
               dilation=dil)
        for a in range(n):
            y = y.narrow(2 + a, lo[a], y.shape[2 + a] - lo[a] - hi[a])
    return activation(y, c.get("act"))


def make_case(c, gen):
    xdt = DTYPES[c["dtype"]]
    wdt = DTYPES[c.get("wdtype", c["dtype"])]
    ydt = xdt if xdt == wdt else (torch.float64 if torch.float64 in (xdt, wdt)
                                  else torch.float32)

    def rand(shape, dt):
        return torch.randn(shape, generator=gen, dtype=torch.float64).to(dt)

    x, w = rand(c["x"], xdt), rand(c["w"], wdt)
    cout = c["w"][1] * c.get("groups", 1) if c["op"].startswith("conv_t") else c["w"][0]
    b = rand((cout,), wdt) if c.get("bias", True) else None
    leaves = [t.double().requires_grad_() for t in (x, w, b) if t is not None]
    y = forward(c, leaves[0], leaves[1], leaves[2] if b is not None else None)

    meta = {"op": c["op"]}
    for key in ("stride", "padding", "output_padding", "dilation", "groups"):
        if key in c:
            meta[key] = fmt(c[key])
    if "act" in c:
        meta["activation"] = c["act"]
    case = [("x", x), ("weight", w)] + ([("bias", b)] if b is not None else [])
    result = [("y", y.detach().to(ydt))]
    if c.get("grad", True):
        gy = rand(tuple(y.shape), ydt)
        grads = torch.autograd.grad(y, leaves, gy.double())
        case.append(("grad_y", gy))
        names = ["grad_x", "grad_weight", "grad_bias"]
        for name, g, src in zip(names, grads, (x, w, b)):
            result.append((name, g.to(src.dtype)))
    base = os.path.join(OUT_DIR, c["name"])
    write_safetensors(base + ".case.safetensors", case, meta)
    write_safetensors(base + ".result.safetensors", result)


C1, C2, C3 = "conv1d", "conv2d", "conv3d"
T1, T2, T3 = "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"
CASES = [
    # ---- conv1d ----
    dict(name="conv1d_f64_basic", op=C1, dtype="f64", x=(2, 3, 7), w=(4, 3, 3)),
    dict(name="conv1d_f32_defaults", op=C1, dtype="f32", x=(1, 2, 6), w=(3, 2, 2),
         bias=False),
    dict(name="conv1d_f32_s2_p1_d2", op=C1, dtype="f32", x=(2, 2, 9), w=(3, 2, 3),
         stride=2, padding=1, dilation=2),
    dict(name="conv1d_f32_g2_asym", op=C1, dtype="f32", x=(1, 4, 8), w=(4, 2, 3),
         groups=2, padding=(2, 1), bias=False),
    dict(name="conv1d_f16_relu", op=C1, dtype="f16", x=(2, 2, 6), w=(2, 2, 3),
         padding=1, act="relu"),
    # ---- conv2d ----
    dict(name="conv2d_f64_basic", op=C2, dtype="f64", x=(2, 2, 5, 5), w=(3, 2, 3, 3),
         padding=1),
    dict(name="conv2d_f32_s21_d12_g2", op=C2, dtype="f32", x=(1, 4, 7, 6),
         w=(4, 2, 3, 2), stride=(2, 1), dilation=(1, 2), groups=2, padding=(1, 0)),
    dict(name="conv2d_f32_asym_leaky", op=C2, dtype="f32", x=(2, 3, 5, 4),
         w=(2, 3, 3, 3), padding=(1, 0, 2, 1), act="leaky_relu:0.2"),
    dict(name="conv2d_f32_silu", op=C2, dtype="f32", x=(2, 2, 4, 5), w=(2, 2, 3, 3),
         padding=1, act="silu"),
    dict(name="conv2d_f64_gelu_nobias", op=C2, dtype="f64", x=(1, 2, 4, 4),
         w=(2, 2, 2, 2), stride=2, act="gelu", bias=False),
    dict(name="conv2d_f64_forward_only", op=C2, dtype="f64", x=(1, 2, 4, 4),
         w=(2, 2, 3, 3), padding=(1, 1), grad=False),
    dict(name="conv2d_bf16_tanh", op=C2, dtype="bf16", x=(1, 2, 5, 5), w=(2, 2, 3, 3),
         padding=1, act="tanh"),
    dict(name="conv2d_mixed_bf16_f32", op=C2, dtype="bf16", wdtype="f32",
         x=(1, 2, 5, 5), w=(3, 2, 3, 3), padding=1),
    # ---- conv3d ----
    dict(name="conv3d_f64_basic", op=C3, dtype="f64", x=(1, 2, 4, 4, 4),
         w=(2, 2, 2, 2, 2)),
    dict(name="conv3d_f32_s2_p1_g2", op=C3, dtype="f32", x=(1, 4, 5, 5, 5),
         w=(4, 2, 3, 3, 3), stride=2, padding=1, groups=2, bias=False),
    dict(name="conv3d_f32_asym_d2_sigmoid", op=C3, dtype="f32", x=(1, 2, 5, 4, 5),
         w=(2, 2, 2, 2, 2), dilation=2, padding=(1, 0, 0, 1, 1, 1), act="sigmoid"),
    dict(name="conv3d_f16", op=C3, dtype="f16", x=(1, 2, 3, 4, 3), w=(2, 2, 2, 2, 2),
         padding=(0, 1, 0)),
    # ---- conv_transpose1d ----
    dict(name="convT1d_f64_basic", op=T1, dtype="f64", x=(2, 3, 5), w=(3, 2, 3)),
    dict(name="convT1d_f32_s2_p1_op1", op=T1, dtype="f32", x=(2, 2, 4), w=(2, 3, 3),
         stride=2, padding=1, output_padding=1),
    dict(name="convT1d_f32_g2_d2_s3", op=T1, dtype="f32", x=(1, 4, 5), w=(4, 1, 3),
         groups=2, dilation=2, stride=3, output_padding=1, bias=False),
    dict(name="convT1d_f32_asym_relu", op=T1, dtype="f32", x=(2, 2, 5), w=(2, 2, 4),
         stride=2, padding=(0, 2), act="relu"),
    dict(name="convT1d_f16", op=T1, dtype="f16", x=(1, 2, 5), w=(2, 2, 3), stride=2),
    # ---- conv_transpose2d ----
    dict(name="convT2d_f64_s2_p1_op1", op=T2, dtype="f64", x=(1, 2, 3, 3),
         w=(2, 3, 3, 3), stride=2, padding=1, output_padding=1),
    dict(name="convT2d_f32_asym_relu", op=T2, dtype="f32", x=(2, 2, 4, 3),
         w=(2, 2, 3, 3), stride=(2, 1), padding=(1, 0, 0, 2), act="relu"),
    dict(name="convT2d_f32_g2_d21_op11", op=T2, dtype="f32", x=(1, 4, 3, 4),
         w=(4, 1, 2, 3), groups=2, dilation=(2, 1), stride=2, output_padding=(1, 1)),
    dict(name="convT2d_f64_gelu", op=T2, dtype="f64", x=(2, 1, 3, 3), w=(1, 2, 2, 2),
         stride=2, act="gelu"),
    dict(name="convT2d_bf16_silu", op=T2, dtype="bf16", x=(1, 2, 3, 3),
         w=(2, 2, 3, 3), stride=2, act="silu"),
    dict(name="convT2d_f16_tanh", op=T2, dtype="f16", x=(1, 2, 3, 2),
         w=(2, 2, 2, 3), padding=(0, 1), act="tanh", bias=False),
    # ---- conv_transpose3d ----
    dict(name="convT3d_f64_s2", op=T3, dtype="f64", x=(1, 2, 3, 3, 3),
         w=(2, 2, 2, 2, 2), stride=2),
    dict(name="convT3d_f32_s2_p1_op1_g2", op=T3, dtype="f32", x=(1, 4, 3, 3, 3),
         w=(4, 1, 3, 3, 3), stride=2, padding=1, output_padding=1, groups=2),
    dict(name="convT3d_f32_asym_d2_leaky", op=T3, dtype="f32", x=(1, 2, 3, 3, 2),
         w=(2, 2, 2, 2, 2), dilation=2, padding=(1, 0, 0, 1, 2, 0),
         act="leaky_relu:0.1", bias=False),
    dict(name="convT3d_bf16_s122", op=T3, dtype="bf16", x=(1, 2, 2, 3, 3),
         w=(2, 2, 2, 2, 2), stride=(1, 2, 2)),
    # ---- mixed dtypes (type promotion; appended last so the
    # shared generator leaves every case above unchanged) ----
    dict(name="convT2d_mixed_bf16_f32", op=T2, dtype="bf16", wdtype="f32",
         x=(1, 2, 3, 3), w=(2, 3, 3, 3), stride=2, padding=1, output_padding=1),
    dict(name="convT2d_mixed_f16_bf16", op=T2, dtype="f16", wdtype="bf16",
         x=(2, 2, 3, 2), w=(2, 2, 2, 3), stride=2),
    dict(name="convT1d_mixed_f32_f64", op=T1, dtype="f32", wdtype="f64",
         x=(2, 3, 5), w=(3, 2, 3), stride=2, padding=1),
    dict(name="conv2d_mixed_f16_bf16", op=C2, dtype="f16", wdtype="bf16",
         x=(1, 2, 5, 4), w=(3, 2, 3, 3), padding=1, act="relu"),
    dict(name="conv1d_mixed_f32_f64", op=C1, dtype="f32", wdtype="f64",
         x=(2, 2, 7), w=(3, 2, 3), stride=2),
]


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    gen = torch.Generator().manual_seed(SEED)
    names = set()
    for c in CASES:
        assert c["name"] not in names, c["name"]
        names.add(c["name"])
        make_case(c, gen)
    total = sum(os.path.getsize(os.path.join(OUT_DIR, f)) for f in os.listdir(OUT_DIR)
                if f.endswith(".safetensors"))
    print("wrote %d cases to %s (%d bytes)" % (len(CASES), OUT_DIR, total))
    if total > 1_500_000:
        sys.exit("golden files exceed 1.5 MB")


if __name__ == "__main__":
    main()
