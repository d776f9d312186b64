#!/usr/bin/python3
"""Writes tests/golden/predicates.safetensors: PyTorch 1.13's float tests
(torch.isnan, isinf, isposinf, isneginf, isfinite), torch.all / torch.any
(whole and along a dim), torch.nan_to_num, torch.fmod, torch.remainder,
torch.floor_divide (with tensors and with numbers), torch.square,
torch.addcmul and torch.addcdiv, values and gradients, which
tests/test_predicates.c compares with tapegrad bit for bit.

For each case C in the metadata's "cases":
  metadata C.op         the tapegrad function's name without tg_ (isnan,
                        all_dim, fmod_scalar, addcmul, ...)
  metadata C.n          the number of tensor inputs
  metadata C.s          the number (%.17g): the scalar ops' s, addcmul's and
                        addcdiv's value
  metadata C.dim, C.keepdim        all_dim / any_dim's
  metadata C.nan, C.posinf, C.neginf  nan_to_num's ("default": None)
  metadata C.err        "1" when torch refuses the call (no C.y then)
  metadata C.grads      the inputs with gradients ("0,2"; "" for none)
  C.in<i>               the inputs
  C.y                   the result (bool as u8)
  C.w, C.g<i>           the upstream gradient and d sum(y * w) / d in<i>
The f16 addcmul / addcdiv cases (torch 1.13 has no f16 CPU kernel) take
torch's f32 result on the f16 values, rounded to f16 once.

Run with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_predicates_goldens.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "predicates.safetensors")
SEED = 4241
D = torch.float64
INF, NAN = float("inf"), float("nan")
FLOATS = {"f64": torch.float64, "f32": torch.float32, "f16": torch.float16,
          "bf16": torch.bfloat16}
SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 3.0, -3.0, 7.0, -7.0, 0.1, 5.5, 1e-3,
           INF, -INF, NAN, 1e30, -1e30]


class Cases:
    def __init__(self):
        self.gen = torch.Generator().manual_seed(SEED)
        self.out, self.meta, self.names = [], {"torch": torch.__version__}, []

    def add(self, name, op, fn, ins, grads=(), meta=None, s=None):
        """Runs fn(*ins) (inputs in grads requiring grad), storing the case."""
        assert name not in self.names, name
        self.names.append(name)
        self.meta[name + ".op"] = op
        self.meta[name + ".n"] = str(len(ins))
        if s is not None:
            self.meta[name + ".s"] = "%.17g" % s
        for k, v in (meta or {}).items():
            self.meta["%s.%s" % (name, k)] = v
        for i, t in enumerate(ins):
            self.out.append(("%s.in%d" % (name, i), t))
        leaves = [t.clone().requires_grad_(i in grads) for i, t in enumerate(ins)]
        try:
            y = fn(*leaves)
        except RuntimeError:
            self.meta[name + ".err"] = "1"
            self.meta[name + ".grads"] = ""
            return
        if y.dtype == torch.bool:
            y = y.to(torch.uint8)
        self.out.append((name + ".y", y.detach()))
        self.meta[name + ".grads"] = ",".join(str(i) for i in grads)
        if grads:
            w = torch.randn(y.shape, generator=self.gen, dtype=D).to(y.dtype)
            gs = torch.autograd.grad(y, [leaves[i] for i in grads], w)
            self.out.append((name + ".w", w))
            for i, g in zip(grads, gs):
                self.out.append(("%s.g%d" % (name, i), g))

    def randn(self, *shape, scale=1.0):
        return torch.randn(shape, generator=self.gen, dtype=D) * scale


def predicates(c):
    x = torch.tensor(SPECIAL, dtype=D).reshape(3, 6)
    ints = {"i32": torch.tensor([[1, -2], [0, 7]], dtype=torch.int32),
            "u8": torch.tensor([0, 255, 3], dtype=torch.uint8),
            "i64": torch.tensor(2 ** 62)}
    for op in ("isnan", "isinf", "isposinf", "isneginf", "isfinite"):
        fn = getattr(torch, op)
        for dn, dt in FLOATS.items():
            c.add("%s.%s" % (op, dn), op, fn, [x.to(dt)])
        c.add("%s.view" % op, op, fn, [x.t()])
        c.add("%s.empty" % op, op, fn, [torch.zeros(0, 3)])
        for dn, t in ints.items():
            c.add("%s.%s" % (op, dn), op, fn, [t])


def truth(c):
    x = torch.tensor([[0.0, 1.0, -0.0, 2.0], [NAN, 1.0, 3.0, 5.0], [-0.0, 0.0, 0.0, 0.0]])
    ins = {"f32": x, "bf16": x.bfloat16(), "f64_view": x.double().t(),
           "u8": torch.tensor([[0, 2, 1], [5, 7, 255]], dtype=torch.uint8),
           "i64": torch.tensor([[2 ** 62, 0], [-1, 3]]),
           "i8": torch.tensor([[-128], [0]], dtype=torch.int8),
           "empty": torch.zeros(0, 3), "zero_d": torch.tensor(NAN),
           "zero_d_0": torch.tensor(0, dtype=torch.int32),
           "ones3d": torch.ones(2, 3, 2, dtype=torch.float16)}
    for op in ("all", "any"):
        fn = getattr(torch, op)
        for dn, t in ins.items():
            c.add("%s.%s" % (op, dn), op, fn, [t])
            dims = [-1, 0] if t.dim() > 0 else [0, -1]
            if t.dim() > 2:
                dims.append(1)
            for d in dims:
                for kd in (False, True):
                    c.add("%s_dim.%s.%d.%d" % (op, dn, d, kd), op + "_dim",
                          lambda v, d=d, kd=kd, fn=fn: fn(v, dim=d, keepdim=kd), [t],
                          meta={"dim": str(d), "keepdim": str(int(kd))})


def nan_to_num(c):
    x = torch.tensor(SPECIAL + [65504.0, -70000.0], dtype=D).reshape(4, 5)
    settings = {"default": (None, None, None), "custom": (1.5, 1e10, None),
                "all": (-2.25, 100.0, -1e-3)}
    for dn, dt in FLOATS.items():
        for sn, (nan, pinf, ninf) in settings.items():
            meta = {k: ("default" if v is None else "%.17g" % v)
                    for k, v in (("nan", nan), ("posinf", pinf), ("neginf", ninf))}
            c.add("nan_to_num.%s.%s" % (dn, sn), "nan_to_num",
                  lambda v, a=nan, b=pinf, e=ninf: torch.nan_to_num(v, a, b, e),
                  [x.to(dt)], grads=(0,), meta=meta)
    c.add("nan_to_num.i32", "nan_to_num", torch.nan_to_num,
          [torch.tensor([1, -5], dtype=torch.int32)],
          meta={"nan": "default", "posinf": "default", "neginf": "default"})


def floor_divide_vec(a, b):
    """torch.floor_divide with every element through torch's vector loop.

    In f16 and bf16 torch 1.13's vector loop rounds each step of the
    quotient to the half dtype, while its scalar loop (for the tail of a
    contiguous run, and for short rows) keeps the steps in f32 for f16: the
    two can differ in the last bit.  tapegrad follows the vector loop
    everywhere, so the operands go in as one contiguous run of a multiple
    of 64 elements (a multiple of the vector loop's block)."""
    shape = torch.broadcast_shapes(a.shape, b.shape)
    fa, fb = a.expand(shape).reshape(-1), b.expand(shape).reshape(-1)
    n = fa.numel()
    pad = torch.ones((-n) % 64 + 64, dtype=a.dtype)
    return torch.floor_divide(torch.cat([fa, pad]), torch.cat([fb, pad]))[:n].reshape(shape)


def remainders(c):
    a = torch.tensor(SPECIAL, dtype=D).reshape(-1, 1)
    b = torch.tensor(SPECIAL, dtype=D)
    for op in ("fmod", "remainder", "floor_divide"):
        g = () if op == "floor_divide" else (0, 1)
        for dn, dt in FLOATS.items():
            fn = floor_divide_vec if op == "floor_divide" else getattr(torch, op)
            c.add("%s.grid.%s" % (op, dn), op, fn, [a.to(dt), b.to(dt)], grads=g)
            # floor_divide's rounding steps in a half dtype differ from f32's
            # in about 1 of 1000 elements: many elements for those
            n = 100 if op == "floor_divide" and dn in ("f16", "bf16") else 20
            ra, rb = c.randn(n, 25, scale=10), c.randn(n, 25, scale=3)
            c.add("%s.rand.%s" % (op, dn), op, fn, [ra.to(dt), rb.to(dt)], grads=g)
        fn = getattr(torch, op)
        ra = c.randn(3, 4, scale=5)
        c.add("%s.view" % op, op, fn, [ra.t(), c.randn(3, 1, scale=2).float().t()], grads=g)
        c.add("%s.zero_d" % op, op, fn, [torch.tensor(-7.5), torch.tensor(2.0)], grads=g)
        c.add("%s.empty" % op, op, fn, [torch.zeros(0, 2), torch.ones(2)])
        c.add("%s.f32_f64_0d" % op, op, fn, [ra.float(), torch.tensor(-1.75, dtype=D)],
              grads=g)
        c.add("%s.i32_f32" % op, op, fn,
              [torch.tensor([[7, -7, 9]], dtype=torch.int32), ra[:, :3].float()],
              grads=(1,) if g else ())
        c.add("%s.f64_i64_0d" % op, op, fn, [ra, torch.tensor(-3)], grads=(0,) if g else ())
        ia = torch.tensor([[7, -7, 0, 100, -100, 2 ** 40 + 3]])
        ib = torch.tensor([[3], [-3], [1], [-1], [7], [-64]])
        c.add("%s.i64" % op, op, fn, [ia, ib])
        c.add("%s.i32_i64" % op, op, fn, [ia.to(torch.int32), ib])
        c.add("%s.i8" % op, op, fn, [torch.tensor([-128, 127, -5, 5], dtype=torch.int8),
                                     torch.tensor([-1, -1, 2, -2], dtype=torch.int8)])
        c.add("%s.u8_i64_0d" % op, op, fn,
              [torch.tensor([5, 200, 255], dtype=torch.uint8), torch.tensor(-2)])
        c.add("%s.i32_zero" % op, op, fn, [torch.tensor([5, 6], dtype=torch.int32),
                                           torch.tensor([1, 0], dtype=torch.int32)])
    for op in ("fmod", "remainder"):
        fn = getattr(torch, op)
        x = c.randn(5, 6, scale=10)
        for dn, dt in FLOATS.items():
            for s in (2.5, -1.5, 0.1):
                c.add("%s_scalar.%s.%g" % (op, dn, s), op + "_scalar",
                      lambda v, s=s, fn=fn: fn(v, s), [x.to(dt)], grads=(0,), s=s)
        c.add("%s_scalar.f64_zero" % op, op + "_scalar", lambda v, fn=fn: fn(v, 0.0),
              [x], grads=(0,), s=0.0)
        xi = torch.tensor([5, -7, 100, -128], dtype=torch.int8)
        for s in (3, -3, 1000, 256):
            c.add("%s_scalar.i8.%d" % (op, s), op + "_scalar",
                  lambda v, s=s, fn=fn: fn(v, s), [xi], s=s)
        c.add("%s_scalar.i64_0d" % op, op + "_scalar", lambda v, fn=fn: fn(v, -4),
              [torch.tensor(-9)], s=-4)


def products(c):
    for dn, dt in FLOATS.items():
        x = c.randn(4, 5, scale=3).to(dt)
        c.add("square.%s" % dn, "square", torch.square, [x], grads=(0,))
    c.add("square.view", "square", torch.square, [c.randn(3, 4).t()], grads=(0,))
    c.add("square.i8", "square", torch.square,
          [torch.tensor([100, -128, 11, -3], dtype=torch.int8)])
    c.add("square.u8", "square", torch.square, [torch.tensor([200, 16], dtype=torch.uint8)])
    c.add("square.i64", "square", torch.square, [torch.tensor([2 ** 32 + 1, -3])])
    for op in ("addcmul", "addcdiv"):
        fn = getattr(torch, op)
        for dn, dt in FLOATS.items():
            for v in (0.37, -2.0):
                ins = [c.randn(3, 1, 4).to(dt), c.randn(2, 4).to(dt), c.randn(3, 2, 1).to(dt)]
                name = "%s.%s.%g" % (op, dn, v)
                if dt == torch.float16:   # no f16 kernel in torch 1.13: f32, rounded once
                    c.add(name, op, lambda a, b, e, v=v, fn=fn:
                          fn(a.float(), b.float(), e.float(), value=v).half(), ins, s=v)
                else:
                    c.add(name, op, lambda a, b, e, v=v, fn=fn: fn(a, b, e, value=v), ins,
                          grads=(0, 1, 2), s=v)
        big = c.randn(300, scale=4)
        c.add("%s.long" % op, op, lambda a, b, e, fn=fn: fn(a, b, e, value=0.1),
              [big.float(), c.randn(300).float(), c.randn(300).float()], grads=(0, 1, 2), s=0.1)
        c.add("%s.view" % op, op, lambda a, b, e, fn=fn: fn(a, b, e, value=1.5),
              [c.randn(4, 3).t(), c.randn(3, 4), c.randn(4, 1).t()], grads=(0, 1, 2), s=1.5)
        c.add("%s.zero_d" % op, op, lambda a, b, e, fn=fn: fn(a, b, e, value=0.5),
              [torch.tensor(1.25, dtype=D), c.randn(2, 3), torch.tensor(-0.5, dtype=D)],
              grads=(0, 1, 2), s=0.5)
        c.add("%s.mixed" % op, op, lambda a, b, e, fn=fn: fn(a, b, e, value=2.0),
              [c.randn(2, 3).float(), torch.tensor([[1, -2, 3]], dtype=torch.int32),
               c.randn(2, 1).float() + 3], grads=(0, 2), s=2.0)
        c.add("%s.empty" % op, op, lambda a, b, e, fn=fn: fn(a, b, e, value=1.0),
              [torch.zeros(0, 3), torch.ones(3), torch.ones(1)], s=1.0)
    ints = [torch.tensor([1, 2 ** 62, -5]), torch.tensor([3, 2, -7]), torch.tensor([[2], [1]])]
    c.add("addcmul.i64", "addcmul", lambda a, b, e: torch.addcmul(a, b, e, value=3), ints, s=3)
    c.add("addcmul.i8", "addcmul", lambda a, b, e: torch.addcmul(a, b, e, value=-1),
          [torch.tensor(x, dtype=torch.int8) for x in ([100, -128], [11, 64], [12, 2])], s=-1)
    c.add("addcdiv.int", "addcdiv", lambda a, b, e: torch.addcdiv(a, b, e, value=1), ints, s=1)


def main():
    c = Cases()
    predicates(c)
    truth(c)
    nan_to_num(c)
    remainders(c)
    products(c)
    c.meta["cases"] = ",".join(c.names)
    write_safetensors(OUT, c.out, c.meta)
    print("wrote", OUT, len(c.names), "cases")


if __name__ == "__main__":
    main()
