#!/usr/bin/python3
"""Writes tests/golden/layer_norm.safetensors: PyTorch 1.13's values and
gradients for F.layer_norm and F.group_norm, which tests/test_layer_norm.c
compares tapegrad with.

For each case C in the metadata's `cases` (C.kind "ln" or "gn"; C.shape,
normalized_shape for ln as "5,6", num_groups for gn as "3"; C.eps; C.affine
"wb" for weight and bias, "w" for weight alone, "" for neither; C.dtype):
  C.x, C.w, C.b, C.gy      the input, weight, bias and upstream gradient
                           (w and b only when given), in the case's dtype
  C.y                      F.layer_norm(x, normalized_shape, w, b, eps) or
                           F.group_norm(x, num_groups, w, b, eps)
  C.gx, C.gw, C.gb         d sum(y * gy) / d(x, w, b)   (f64 and f32 cases)
Shapes: layer norm over 1, 2 and 3 trailing dims (rows of 8 to 300 values,
an unbatched x); group norm on 1-3 spatial dims and none, with 1 group, C
groups and some in between.  Inputs are off-centre (mean 0.5 to 3) so that
the mean matters.

bf16 cases hold torch's own bf16 forward.  f16 cases ("dtype f16"): torch
1.13 has no half layer_norm or group_norm on the CPU, so C.y is torch's f32
result on the f16 values, rounded to f16 (what tapegrad computes: f32 inside,
rounded once).

Run with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_layer_norm_goldens.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "layer_norm.safetensors")
SEED = 8009
D = torch.float64
SUFFIX = {torch.float64: "f64", torch.float32: "f32", torch.bfloat16: "bf16",
          torch.float16: "f16"}

# (name, kind, x shape, normalized_shape or num_groups, affine, eps)
BASES = [
    ("ln_last", "ln", (4, 10), (10,), "wb", 1e-5),          # rows of 10: short rows
    ("ln_last_long", "ln", (3, 300), (300,), "wb", 1e-5),   # rows of 300
    ("ln_odd", "ln", (5, 3, 77), (77,), "w", 1e-3),          # weight only
    ("ln_two", "ln", (2, 3, 5, 6), (5, 6), "wb", 1e-5),
    ("ln_three", "ln", (2, 3, 4, 5), (3, 4, 5), "", 1e-5),   # no affine
    ("ln_unbatched", "ln", (7,), (7,), "wb", 1e-5),
    ("ln_tokens", "ln", (6, 8), (8,), "", 0.1),              # large eps
    ("gn_1d", "gn", (2, 6, 5), 3, "wb", 1e-5),
    ("gn_one_group", "gn", (2, 8, 4, 5), 1, "wb", 1e-5),
    ("gn_instance", "gn", (2, 6, 3, 3), 6, "wb", 1e-5),      # G = C
    ("gn_3d", "gn", (2, 4, 3, 2, 5), 2, "", 1e-5),
    ("gn_no_spatial", "gn", (5, 6), 2, "wb", 1e-5),          # S = 1
    ("gn_wide", "gn", (2, 4, 8, 8), 2, "w", 1e-4),           # S = 64
]
DTYPES = [torch.float64, torch.float32]
HALF = [("ln_two", torch.bfloat16), ("gn_1d", torch.bfloat16), ("ln_last_long", torch.bfloat16),
        ("gn_wide", torch.bfloat16), ("ln_two", torch.float16), ("gn_1d", torch.float16)]


def run(kind, x, p, w, b, eps):
    if kind == "ln":
        return F.layer_norm(x, p, w, b, eps)
    return F.group_norm(x, p, w, b, eps)


def inputs(gen, kind, shape, p, affine):
    """x, w, b, gy in f64 (w, b None when not given)."""
    x = torch.randn(shape, generator=gen, dtype=D) * 1.5 + torch.rand(1, generator=gen, dtype=D) * 2.5 + 0.5
    pshape = p if kind == "ln" else (shape[1],)
    w = torch.rand(pshape, generator=gen, dtype=D) * 1.5 + 0.25 if "w" in affine else None
    b = torch.randn(pshape, generator=gen, dtype=D) if "b" in affine else None
    gy = torch.randn(shape, generator=gen, dtype=D)
    return x, w, b, gy


def main():
    gen = torch.Generator().manual_seed(SEED)
    out, meta, names = [], {"torch": torch.__version__}, []
    base = {}
    for name, kind, shape, p, affine, eps in BASES:
        base[name] = (kind, shape, p, affine, eps, inputs(gen, kind, shape, p, affine))
    todo = [(n, dt) for n, *_ in BASES for dt in DTYPES] + HALF
    for bname, dt in todo:
        kind, shape, p, affine, eps, (x64, w64, b64, gy64) = base[bname]
        name = "%s_%s" % (bname, SUFFIX[dt])
        x, gy = x64.to(dt), gy64.to(dt)
        w = None if w64 is None else w64.to(dt)
        b = None if b64 is None else b64.to(dt)
        out += [(name + ".x", x), (name + ".gy", gy)]
        out += [(name + ".w", w)] if w is not None else []
        out += [(name + ".b", b)] if b is not None else []
        if dt == torch.float16:   # no half kernels on the CPU: f32 on the f16 values
            f = lambda t: None if t is None else t.float()  # noqa: E731
            y = run(kind, f(x), p, f(w), f(b), eps).to(dt)
            out.append((name + ".y", y))
        elif dt == torch.bfloat16:
            out.append((name + ".y", run(kind, x, p, w, b, eps)))
        else:
            leaves = [t.clone().requires_grad_(True) if t is not None else None for t in (x, w, b)]
            y = run(kind, leaves[0], p, leaves[1], leaves[2], eps)
            y.backward(gy)
            out.append((name + ".y", y.detach()))
            for key, t in zip(("gx", "gw", "gb"), leaves):
                if t is not None:
                    out.append((name + "." + key, t.grad))
        meta[name + ".kind"] = kind
        meta[name + ".param"] = ",".join(str(v) for v in p) if kind == "ln" else str(p)
        meta[name + ".eps"] = repr(eps)
        meta[name + ".affine"] = affine
        names.append(name)
    meta["cases"] = ",".join(names)
    write_safetensors(OUT, out, meta)
    print("wrote", OUT, len(names), "cases")


if __name__ == "__main__":
    main()
