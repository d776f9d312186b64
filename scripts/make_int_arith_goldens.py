#!/usr/bin/python3
"""Writes the PyTorch golden file of the integer arithmetic ops
(tests/test_int_arith.c): tests/golden/int_arith.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_int_arith_goldens.py

torch keeps an integer dtype for add, sub, mul, pow, maximum, minimum of two
integer tensors (the promoted dtype: the wider; a 0-d operand counts only
against a 0-d one), for their scalar forms with a Python int, and for relu,
relu6, hardtanh and clamp with int bounds; the arithmetic wraps modulo
2^bits.  An integer with a float tensor gives the float's dtype (the
integer converted to it first, to a half dtype through f32); true division
and logsumexp of integers give f32.

Case k < the metadata "cases": metadata "c<k>.op" (the tapegrad op name),
tensors "c<k>.a", for a binary op "c<k>.b", and "c<k>.y", torch's result
(its dtype is torch's); a scalar op's number in the metadata "c<k>.s", a
clamp's or hardtanh's bounds in "c<k>.lo" and "c<k>.hi" ("nan": none),
each written so that C's strtod reads the double the test passes.

The metadata "refused" lists what torch itself refuses (each checked here to
raise): tapegrad refuses the same calls (tests/test_int_arith.c).  The
i8-with-u8 pairs, int16 in torch, are checked here to give int16.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "int_arith.safetensors")

DT = {"i8": torch.int8, "u8": torch.uint8, "i32": torch.int32, "i64": torch.int64,
      "f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
      "bf16": torch.bfloat16}
INTS = ["i8", "u8", "i32", "i64"]
# the ends of each dtype and values whose sums and products wrap
EDGE = {
    "i8": [-128, -127, -100, -7, -1, 0, 1, 2, 7, 64, 100, 127],
    "u8": [0, 1, 2, 7, 100, 127, 128, 200, 254, 255],
    "i32": [-2**31, -2**31 + 1, -65536, -7, -1, 0, 1, 3, 65536, 2**30, 2**31 - 1],
    "i64": [-2**63, -2**63 + 1, -2**32, -7, -1, 0, 1, 3, 2**32 + 1, 2**62, 2**63 - 1],
}
EXPONENT = {
    "i8": [0, 1, 2, 3, 7, 127, -1, -2, -128],
    "u8": [0, 1, 2, 3, 8, 255],
    "i32": [0, 1, 2, 3, 31, 2**31 - 1, -1, -5],
    "i64": [0, 1, 2, 3, 63, 2**62 + 1, 2**63 - 1, -1, -2**63],
}
POW_BASE = {
    "i8": [-128, -3, -2, -1, 0, 1, 2, 3, 127],
    "u8": [0, 1, 2, 3, 255],
    "i32": [-2**31, -3, -1, 0, 1, 2, 3, 2**31 - 1],
    "i64": [-2**63, -3, -1, 0, 1, 2, 3, 2**63 - 1],
}


def t(dt, v):
    return torch.tensor(v, dtype=DT[dt])


def num(v):
    """A number as C's strtod reads back the same double."""
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return repr(float(v))


class Cases:
    def __init__(self):
        self.tensors, self.meta, self.n = {}, {}, 0

    def add(self, op, y, a, b=None, **scalars):
        p = "c%d." % self.n
        self.tensors[p + "a"] = a
        if b is not None:
            self.tensors[p + "b"] = b
        self.tensors[p + "y"] = y
        self.meta[p + "op"] = op
        for k, v in scalars.items():
            self.meta[p + k] = num(v)
        self.n += 1


BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "maximum": torch.maximum,
          "minimum": torch.minimum}


def binary_cases(c):
    # every pair of integer dtypes torch keeps as one of ours, broadcast
    # (b a column against a row): each result the full table of the edges
    for da in INTS:
        for db in INTS:
            a, b = t(da, EDGE[da]), t(db, EDGE[db]).reshape(-1, 1)
            if {da, db} == {"i8", "u8"}:
                assert (a + b).dtype == torch.int16
                continue
            for op, f in BINARY.items():
                y = f(a, b)
                assert y.dtype == DT[da if a.element_size() >= b.element_size() else db]
                c.add(op, y, a, b)
            ea, eb = t(da, POW_BASE[da]), t(db, EXPONENT[db]).reshape(-1, 1)
            c.add("pow", torch.pow(ea, eb), ea, eb)
    # 0-d operands: the dimensioned dtype wins, the 0-d value wraps into it
    for op, a, b in [("add", t("i32", [1, -2, 2**31 - 1]), t("i64", 2**40 + 5)),
                     ("mul", t("i32", [3, -1, 65536]), t("i64", 2**40 + 5)),
                     ("add", t("u8", [0, 1, 255]), t("i8", -1)),
                     ("sub", t("i8", -100), t("u8", [0, 100, 255])),
                     ("mul", t("i8", [1, -1, 100]), t("i64", -2**63)),
                     ("add", t("i64", 2**62), t("i8", 7)),
                     ("maximum", t("u8", [0, 3, 200]), t("i32", 100000))]:
        f = BINARY.get(op)
        c.add(op, f(a, b), a, b)
    # an integer with a float: the float's dtype, the integer cast first
    # (2049 is f16 2048, 16842753 bf16 2^24 through f32)
    mixed = [("add", t("i32", [1, -7, 2**24 + 1, 2**31 - 1]), t("f32", [0.5, 0.25, 0.0, 1.0])),
             ("sub", t("f64", [0.5, -1.5]), t("i64", [2**53 + 1, -2**63]).reshape(2, 1)),
             ("mul", t("i64", [2049, 3, -5, 70000]), t("f16", [1.0, 0.5, -2.0, 1.0])),
             ("add", t("i32", [2049, 16842753, -16842753]), t("bf16", [1.0, 0.0, 0.0])),
             ("add", t("u8", [3, 255]), t("f16", [1.0, 0.5])),
             ("mul", t("f32", [[1.5], [-2.0]]), t("i8", [-128, 3, 127])),
             ("maximum", t("i8", [-128, 3, 127]), t("f32", [2.5, 2.5, 200.0])),
             ("minimum", t("f64", [0.5, 300.0]), t("u8", [200, 255])),
             ("pow", t("i32", [2, 3, -4, 9]), t("f32", [2.0, 3.0, 2.0, 0.5])),
             ("pow", t("f32", [1.5, -2.0]), t("i64", [2, 3])),
             ("div", t("i64", [7, -7, 2**40]), t("f32", [2.0, 0.5, 3.0])),
             ("add", t("i32", [1, 2]), t("f64", 0.1)),
             ("mul", t("f32", [1.5, -2.5]), t("i64", 3))]
    for op, a, b in mixed:
        f = BINARY.get(op) or getattr(torch, op)
        y = f(a, b)
        assert y.dtype == (a.dtype if a.is_floating_point() else b.dtype), (op, y.dtype)
        c.add(op, y, a, b)


def scalar_cases(c):
    for dn in INTS:
        a = t(dn, EDGE[dn])
        for s in [1000, -1, 2**40, -2**63, 0]:
            c.add("add_scalar", a + s, a, s=s)
        c.add("sub_scalar", a - 300, a, s=300)
        c.add("rsub_scalar", 5 - a, a, s=5)
        c.add("rsub_scalar", -2**63 - a, a, s=-2**63)
        for s in [-300, 3, 2**62, -1]:
            c.add("mul_scalar", a * s, a, s=s)
        for s in [3, 0.1, -2.5]:
            y = a / s
            assert y.dtype == torch.float32
            c.add("div_scalar", y, a, s=s)
        top = {"i8": 127, "u8": 255, "i32": 2**31 - 1, "i64": 2**53 - 1}[dn]
        for p in [0, 1, 2, 3, 7, top]:
            y = a ** p
            assert y.dtype == DT[dn]
            c.add("pow_scalar", y, a, s=p)


NAN = float("nan")
CLAMP = {
    "i8": [(-2, 5), (-128, 127), (5, -2), (-2, NAN), (NAN, 3), (NAN, NAN)],
    "u8": [(-2, NAN), (5, -2), (-255, 255), (3, 200), (NAN, -1)],
    "i32": [(-2**31, 2**31 - 1), (-7, 7), (NAN, -65536)],
    "i64": [(-2**63, 2**62), (-1000, 1000), (2**32, NAN)],
}
HARDTANH = {
    "i8": [(-2.5, 5.5), (-128.9, 127.9), (-1, 1), (5, 5)],
    "u8": [(-0.5, 5), (0, 6), (200.7, 255)],
    "i32": [(-2.5, 5.5), (-2**31, 2**31 - 1)],
    "i64": [(-2.5, 5.5), (-2**63, 2**62)],
}


def clamp_cases(c):
    for dn in INTS:
        a = t(dn, EDGE[dn])
        for lo, hi in CLAMP[dn]:
            kw = {}
            if not math.isnan(lo):
                kw["min"] = int(lo)
            if not math.isnan(hi):
                kw["max"] = int(hi)
            y = torch.clamp(a, **kw) if kw else a.clone()
            assert y.dtype == a.dtype
            c.add("clamp", y, a, lo=lo, hi=hi)
        for lo, hi in HARDTANH[dn]:
            y = F.hardtanh(a, lo, hi)
            assert y.dtype == a.dtype
            c.add("hardtanh", y, a, lo=lo, hi=hi)
        c.add("relu", torch.relu(a), a)
        c.add("relu6", F.relu6(a), a)
        x = t(dn, EDGE[dn][:10]).reshape(2, 5)
        for dim in [0, 1]:
            y = torch.logsumexp(x, dim)
            assert y.dtype == torch.float32
            c.add("logsumexp", y, x, s=dim)


def raises(f):
    try:
        f()
    except RuntimeError as e:
        return str(e).split("\n")[0]
    raise AssertionError("torch took it")


def main():
    c = Cases()
    binary_cases(c)
    scalar_cases(c)
    clamp_cases(c)
    i8, u8 = t("i8", [1, -2]), t("u8", [1, 200])
    refused = {
        "pow_scalar(i8, -1)": lambda: i8 ** -1,
        "pow_scalar(i8, 128)": lambda: i8 ** 128,
        "pow_scalar(u8, 256)": lambda: u8 ** 256,
        "pow_scalar(i32, 2^31)": lambda: t("i32", [2]) ** 2**31,
        "clamp(i8, -2, 1000)": lambda: torch.clamp(i8, -2, 1000),
        "clamp(u8, -256, none)": lambda: torch.clamp(u8, min=-256),
        "clamp(i32, none, 2^31)": lambda: torch.clamp(t("i32", [1]), max=2**31),
        "hardtanh(u8, -1, 5)": lambda: F.hardtanh(u8, -1, 5),
        "hardtanh(i8, -2, 1000)": lambda: F.hardtanh(i8, -2, 1000),
        "hardtanh(i8, -2, inf)": lambda: F.hardtanh(i8, -2, math.inf),
        "leaky_relu(i8)": lambda: F.leaky_relu(i8),
    }
    for f in refused.values():
        raises(f)
    c.meta.update({"cases": str(c.n), "refused": ";".join(refused)})
    write_safetensors(OUT, {k: v.contiguous() for k, v in c.tensors.items()}, c.meta)
    print("%d cases -> %s" % (c.n, OUT))


if __name__ == "__main__":
    main()
