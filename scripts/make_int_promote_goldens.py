#!/usr/bin/python3
"""Writes the PyTorch golden file of the floating functions of integer
tensors (tests/test_int_promote.c): tests/golden/int_promote.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_int_promote_goldens.py

torch computes a floating function (exp, sin, ..., true division, atan2) of
an integer tensor in its default dtype, f32: the integers converted to f32
(an i64 rounded once to the nearest f32), the result f32.

Tensors "x.<dt>", dt in the metadata "dtypes" (i8, u8, i32, i64): the edge
values of that dtype (0, +-1, its ends, an i32 beyond 2^24, i64s beyond
2^53, among them 2^60 + 2^36 + 1, which rounds to 2^60 + 2^37 in one step
but to 2^60 through f64).  "<fn>.<dt>.y" = torch.<fn>(x.<dt>), f32, for
each fn of the metadata "unary".  "cast.<dt>.<to>" = x.<dt>.to(<to>) for to
in bf16, f16: through f32 (2^24 + 2^16 + 1 gives 2^24 in bf16, not the
2^24 + 2^17 of one rounding).

Binary case k < the metadata "binary" (div, atan2): "bin<k>.a" and
"bin<k>.b" (integers, dtypes possibly different, broadcast), metadata
"bin<k>.op", and "bin<k>.y" = torch.<op>(a, b), f32; with zeros in b
(1 / 0 = inf, 0 / 0 = NaN).

The metadata "refused" lists the functions torch refuses for every integer
dtype (checked here: each raises for each dtype); tapegrad refuses them
too (TG_EDTYPE).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "int_promote.safetensors")

DTYPES = {"i8": torch.int8, "u8": torch.uint8, "i32": torch.int32, "i64": torch.int64}
P60 = 2**60 + 2**36 + 1
VALUES = {
    "i8": [0, 1, -1, 2, -2, 3, 7, -7, 100, -100, 127, -128],
    "u8": [0, 1, 2, 3, 7, 100, 127, 128, 200, 255],
    "i32": [0, 1, -1, 2, -3, 10, -10, 1000, 65536, 2**24 + 1, -(2**24 + 3), 123456789,
            2**31 - 1, -2**31, 2**24 + 2**16 + 1, -(2**24 + 2**16 + 1)],
    "i64": [0, 1, -1, 3, -5, 2**24 + 1, 2**53 + 1, -(2**53 + 3), 10**15 + 7, P60, -P60,
            2**62 + 2**38 + 1, 2**63 - 1, -2**63, 2**40 + 2**32 + 1, 65519, 65520],
}
UNARY = ["exp", "log", "sqrt", "erf", "sin", "cos", "log1p", "expm1", "reciprocal", "rsqrt",
         "tan", "atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh", "log2",
         "log10", "exp2", "tanh", "sigmoid"]
# (op, a's dtype and values, b's dtype and values): b broadcasts where shorter
BINARY = [
    ("div", "i32", [7, -7, 0, 1, -1, 2**31 - 1, 0], "i32", [2, 2, 0, 0, 0, 3, 5]),
    ("div", "i64", [P60, -P60, 2**53 + 1, 10, 1], "i64", [3, 7, 1, 4, -(2**62 + 2**38 + 1)]),
    ("div", "u8", [255, 0, 7, 200], "i8", [-128, -1, 0, 3]),
    ("div", "i8", [[1, -2, 3], [100, -128, 0]], "i64", [3, 0, -7]),
    ("atan2", "i32", [1, -1, 0, 0, 5, -5, 0], "i32", [1, 1, 1, -1, 0, 0, 0]),
    ("atan2", "i64", [P60, -P60, 2**53 + 1, 3], "i64", [1, 2**60, -(2**53 + 3), 2**63 - 1]),
    ("atan2", "u8", [[255, 0], [3, 9]], "i8", [-128, 127]),
]
REFUSED = {
    "leaky_relu": F.leaky_relu, "silu": F.silu, "gelu": F.gelu, "elu": F.elu,
    "hardsigmoid": F.hardsigmoid, "hardswish": F.hardswish, "mish": F.mish,
    "softplus": F.softplus, "logsigmoid": F.logsigmoid,
    "softmax": lambda x: F.softmax(x, 0), "log_softmax": lambda x: F.log_softmax(x, 0),
}


def unary_fn(name):
    return getattr(torch, name)


def main():
    tensors, meta = {}, {}
    for dn, dt in DTYPES.items():
        x = torch.tensor(VALUES[dn], dtype=dt)
        tensors["x." + dn] = x
        for fn in UNARY:
            y = unary_fn(fn)(x)
            assert y.dtype == torch.float32, (fn, dn, y.dtype)
            tensors["%s.%s.y" % (fn, dn)] = y
        for to, tdt in (("bf16", torch.bfloat16), ("f16", torch.float16)):
            tensors["cast.%s.%s" % (dn, to)] = x.to(tdt)
        for fn, f in REFUSED.items():
            try:
                f(x)
            except RuntimeError:
                continue
            raise AssertionError("torch took %s of %s" % (fn, dn))
    for k, (op, da, va, db, vb) in enumerate(BINARY):
        a = torch.tensor(va, dtype=DTYPES[da])
        b = torch.tensor(vb, dtype=DTYPES[db])
        y = getattr(torch, op)(a, b)
        assert y.dtype == torch.float32, (op, da, db, y.dtype)
        p = "bin%d." % k
        tensors.update({p + "a": a, p + "b": b, p + "y": y})
        meta[p + "op"] = op
    meta.update({"dtypes": ",".join(DTYPES), "unary": ",".join(UNARY),
                 "binary": str(len(BINARY)), "refused": ",".join(REFUSED)})
    write_safetensors(OUT, {k: v.contiguous() for k, v in tensors.items()}, meta)


if __name__ == "__main__":
    main()
