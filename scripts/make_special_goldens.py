#!/usr/bin/python3
"""Writes the PyTorch golden file of the special math ops
(tests/test_special.c): tests/golden/special.safetensors.

Run from anywhere with the system interpreter (torch 1.13, mpmath):
    /usr/bin/python3 scripts/make_special_goldens.py

Binary ops (metadata "binary": logaddexp, logaddexp2, xlogy, xlog1py,
hypot, copysign), for d in (f32, f64, bf16): case "<op>" (every pair of the op's
special values: +-0, +-inf, NaN, +-1 and its edges, then random pairs)
and "<op>_bc" (a (3, 1) with b (4), random): <case>.<d>.a, .b, .g (a
random upstream gradient), .out = torch.<op>(a, b), .da, .db (torch's
gradients of sum(g * out)).

Unary ops (metadata "unary": erfc, erfinv, logit, logit_eps0,
logit_eps01, logit_epsm01, sinc, frac, lgamma, digamma, polygamma1..3;
logit_eps0 is torch.logit(x, 0.0),
logit_eps01 torch.logit(x, 0.1) and logit_epsm01 torch.logit(x, -0.1)),
for each d: <op>.<d>.x (+-0, +-inf, NaN and the op's edges, then random
values over its range), .g, .y, .dx.

erfinv against the true values: erfinv_ref.x (f64: uniform in (-1, 1),
values near +-1 down to 1 - 2^-53, tiny ones) and erfinv_ref.y, the exact
erfinv rounded to f64 (mpmath at 60 digits), with erfinv_ref.torch, torch's
f64 erfinv of the same x; erfinv_ref32.x and .y the same in f32 (the exact
value rounded to f64, then to f32), near 1 down to 1 - 2^-24.

lgamma, digamma and polygamma (n = 1, 2, 3) are unary cases too
("lgamma", "digamma", "polygamma<n>"; polygamma 2 and 3 without +-inf,
where torch's zeta gives NaN and -inf).  polygamma against the true
values: gamma_ref.x (f64: uniform in (0.01, 40), then edges and negative
non-integers down to -1000.75), gamma_ref.pg<n> (mpmath at 50 digits,
rounded to f64) and gamma_ref.torch_pg<n>, torch's, for n in 1, 2, 3, 5, 10.

heaviside (no gradient), for d in (f32, f64, bf16, f16): heaviside.<d>.x
(every pair of specials, 2.5 and -3, then integers in [-2, 2]),
heaviside.<d>.values and heaviside.<d>.out.

nansum, nanmean and count_nonzero: nanred.<d>.x (f32, f64: (3, 4, 5)
normal values, about 30% NaN, a row [1, 2, :] all NaN), and for the k-th
(dims, keepdim) of the metadata "nan_dims" <op><k>.<d>.g, .y and .dx
(op nansum, nanmean), count_nonzero<k>.<d> where keepdim is false;
nanred.i32.x with nanred.i32.nansum (i64) and nanred.i32.count_nonzero
over dims (0, 2).

Integer inputs: int.x (i32) and int.y (i32) and int.<op> for op in
(xlogy, xlog1py, copysign; erfc, erfinv, logit, sinc, lgamma, digamma,
polygamma2 of x), torch's f32 results, and int.heaviside (i32).
"""
import math
import os
import sys

import mpmath
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "special.safetensors")
SEED = 9311
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}
SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0]

# name: (torch function, random low, high, edge values paired with each other)
BINARY = {
    "logaddexp": (torch.logaddexp, -10, 10, [1000.0, -1000.0, 88.0, 1e-30, 0.5]),
    "logaddexp2": (torch.logaddexp2, -10, 10, [1000.0, -1000.0, 127.0, 1e-30, 0.5]),
    "xlogy": (torch.xlogy, 0.01, 10, [1e-30, 2.0, 1e30, 0.5]),
    "xlog1py": (torch.special.xlog1py, -0.99, 10, [1e-30, -0.5, 1e30, 2.0]),
    "hypot": (torch.hypot, -10, 10, [3.0, 4.0, 1e30, 1e-30, 1e-40]),
    "copysign": (torch.copysign, -10, 10, [2.5, -3.0, 1e-30]),
}
# name: (function of x, random low, high, edges)
UNARY = {
    "erfc": (torch.erfc, -6, 30, [10.0, 26.0, 27.0, -10.0, 1e-30, 0.5]),
    "erfinv": (torch.erfinv, -1, 1, [0.5, -0.5, 0.9999, -0.9999, 1e-30, 1.5, -2.0,
                                     0.99999994, 0.7, 0.3]),
    "logit": (torch.logit, 0, 1, [0.5, 1e-30, 1.5, -0.5, 0.999, 1e-7]),
    "logit_eps0": (lambda x: torch.logit(x, 0.0), -0.2, 1.2, [0.5, 1e-30, 1.5, -0.5]),
    "logit_eps01": (lambda x: torch.logit(x, 0.1), -0.2, 1.2,
                    [0.5, 0.1, 0.9, 0.05, 0.95, 1.5, -0.5]),
    "logit_epsm01": (lambda x: torch.logit(x, -0.1), -0.2, 1.2, [0.5, 1.05, -0.05, 1.5, -0.5]),
    "sinc": (torch.sinc, -5, 5, [0.5, 2.0, -3.0, 1e-30, 1e-200, 100.5, 1e10]),
    "frac": (torch.frac, -10, 10, [2.25, -2.25, 1e20, -1e-30, 0.5, -7.0]),
    "lgamma": (torch.lgamma, -10, 30, [-1.0, -2.0, -0.5, -2.5, 1.0, 2.0, 1e-30, 1e10, 171.5,
                                       -100.5, 1e30, 3e36]),
    "digamma": (torch.digamma, -10, 30, [-1.0, -2.0, -0.5, -3.7, 1.0, 1.4616321449683623,
                                         10.0, 1e-30, 1e10, 1e20, -100.25]),
    "polygamma1": (lambda x: torch.polygamma(1, x), 0.01, 30,
                   [-0.5, -2.5, -3.7, 1.0, 1e-30, 1e10, -100.25]),
    "polygamma2": (lambda x: torch.polygamma(2, x), 0.01, 30,
                   [-0.5, -2.5, -3.7, 1.0, 1e-10, 1e5], [0.0, -0.0, math.nan]),
    "polygamma3": (lambda x: torch.polygamma(3, x), 0.01, 30,
                   [-0.5, -2.5, -3.7, 1.0, 1e-10, 1e5], [0.0, -0.0, math.nan]),
}


def rand(gen, n, lo, hi):
    return torch.rand(n, dtype=torch.float64, generator=gen) * (hi - lo) + lo


def graded(name, fn, inputs, out_names, dt, gen, tensors):
    """Adds the inputs, a random g, fn's output and torch's gradients of
    sum(g * out) with respect to each input, all in dt."""
    xs = [t.to(dt) for _, t in inputs]
    rs = [x.clone().requires_grad_() for x in xs]
    out = fn(*rs)
    g = torch.randn(out.shape, dtype=torch.float64, generator=gen).to(dt)
    grads = torch.autograd.grad(out, rs, g)
    for (k, _), x in zip(inputs, xs):
        tensors.append((name + k, x.contiguous()))
    tensors.append((name + "g", g.contiguous()))
    tensors.append((name + "out", out.detach().contiguous()))
    for k, d in zip(out_names, grads):
        tensors.append((name + k, d.contiguous()))


def binary_cases(gen, tensors):
    for op, (fn, lo, hi, edges) in BINARY.items():
        vals = SPECIAL + edges
        pa = [u for u in vals for _ in vals]
        pb = [v for _ in vals for v in vals]
        a = torch.cat([torch.tensor(pa, dtype=torch.float64), rand(gen, 200, lo, hi)])
        b = torch.cat([torch.tensor(pb, dtype=torch.float64), rand(gen, 200, lo, hi)])
        ab, bb = rand(gen, 3, lo, hi).reshape(3, 1), rand(gen, 4, lo, hi)
        for dn, dt in DTYPES.items():
            graded("%s.%s." % (op, dn), fn, [("a", a), ("b", b)], ["da", "db"], dt, gen,
                   tensors)
            graded("%s_bc.%s." % (op, dn), fn, [("a", ab), ("b", bb)], ["da", "db"], dt,
                   gen, tensors)


def unary_cases(gen, tensors):
    for op, (fn, lo, hi, edges, *sp) in UNARY.items():
        specials = sp[0] if sp else SPECIAL[:5]
        # the specials first: torch's kernels take the last n % (2 * vector
        # width) elements through their scalar loop, whose logit gradient
        # differs at NaN and -0.0 from the vectorized one
        x0 = torch.cat([torch.tensor(specials + edges, dtype=torch.float64),
                        rand(gen, 300, lo, hi)])
        for dn, dt in DTYPES.items():
            x = x0.to(dt)
            g = torch.randn(x.shape, dtype=torch.float64, generator=gen).to(dt)
            xr = x.clone().requires_grad_()
            y = fn(xr)
            (dx,) = torch.autograd.grad(y, (xr,), g)
            p = "%s.%s." % (op, dn)
            for k, v in (("x", x), ("g", g), ("y", y), ("dx", dx)):
                tensors.append((p + k, v.detach().contiguous()))


def erfinv_ref(gen, tensors):
    mpmath.mp.dps = 60
    near = [1 - 2.0 ** -k for k in range(2, 54)]
    tiny = [1e-300, 1e-200, 1e-100, 1e-20, 1e-10, 1e-5]
    x = torch.cat([rand(gen, 400, -1, 1), torch.tensor(near + [-v for v in near] + tiny,
                                                        dtype=torch.float64)])
    ref = [float(mpmath.erfinv(mpmath.mpf(v))) for v in x.tolist()]
    tensors.append(("erfinv_ref.x", x))
    tensors.append(("erfinv_ref.y", torch.tensor(ref, dtype=torch.float64)))
    tensors.append(("erfinv_ref.torch", torch.erfinv(x)))
    x32 = torch.cat([rand(gen, 400, -1, 1).float(),
                     torch.tensor([1 - 2.0 ** -k for k in range(2, 25)], dtype=torch.float32),
                     torch.tensor([1e-30, 1e-40, -0.99999994], dtype=torch.float32)])
    ref32 = [float(mpmath.erfinv(mpmath.mpf(v))) for v in x32.tolist()]
    tensors.append(("erfinv_ref32.x", x32))
    tensors.append(("erfinv_ref32.y", torch.tensor(ref32, dtype=torch.float64).float()))


def gamma_ref(gen, tensors):
    mpmath.mp.dps = 50
    x = torch.cat([rand(gen, 300, 0.01, 40), torch.tensor(
        [1e-8, 0.5, 1.0, 1.5, 2.0, 19.5, 20.5, 100.0, 1e4, 1e8, -0.5, -1.5, -2.25, -3.7,
         -10.1, -99.5, -100.25, -150.5, -1000.75], dtype=torch.float64)])
    tensors.append(("gamma_ref.x", x))
    for n in (1, 2, 3, 5, 10):
        ref = [float(mpmath.polygamma(n, mpmath.mpf(v))) for v in x.tolist()]
        tensors.append(("gamma_ref.pg%d" % n, torch.tensor(ref, dtype=torch.float64)))
        tensors.append(("gamma_ref.torch_pg%d" % n, torch.polygamma(n, x)))


def heaviside_cases(gen, tensors):
    vals = SPECIAL + [2.5, -3.0]
    px = [u for u in vals for _ in vals]
    pv = [v for _ in vals for v in vals]
    x = torch.cat([torch.tensor(px, dtype=torch.float64),
                   torch.randint(-2, 3, (64,), generator=gen).double()])
    v = torch.cat([torch.tensor(pv, dtype=torch.float64), rand(gen, 64, -5, 5)])
    for dn, dt in list(DTYPES.items()) + [("f16", torch.float16)]:
        tensors.append(("heaviside.%s.x" % dn, x.to(dt)))
        tensors.append(("heaviside.%s.values" % dn, v.to(dt)))
        tensors.append(("heaviside.%s.out" % dn, torch.heaviside(x.to(dt), v.to(dt))))


# (dims or None, keepdim) of the nansum / nanmean / count_nonzero cases
NAN_DIMS = [(None, False), ((1,), False), ((0, 2), True), ((-1,), False), (None, True)]


def nan_reduce_cases(gen, tensors):
    x = torch.randn(3, 4, 5, dtype=torch.float64, generator=gen)
    x[torch.rand(3, 4, 5, generator=gen) < 0.3] = math.nan
    x[1, 2, :] = math.nan            # a row that is all NaN
    x[0, 0, :2] = 0.0
    for dn, dt in (("f32", torch.float32), ("f64", torch.float64)):
        xd = x.to(dt)
        tensors.append(("nanred.%s.x" % dn, xd))
        for k, (dims, keep) in enumerate(NAN_DIMS):
            for name, fn in (("nansum", torch.nansum), ("nanmean", torch.nanmean)):
                xr = xd.clone().requires_grad_()
                y = fn(xr, keepdim=keep) if dims is None else fn(xr, dims, keepdim=keep)
                g = torch.randn(y.shape, dtype=torch.float64, generator=gen).to(dt)
                (dx,) = torch.autograd.grad(y, (xr,), g)
                p = "%s%d.%s." % (name, k, dn)
                for s, v in (("g", g), ("y", y), ("dx", dx)):
                    tensors.append((p + s, v.detach().contiguous()))
            if not keep:
                c = torch.count_nonzero(xd) if dims is None else torch.count_nonzero(xd, dims)
                tensors.append(("count_nonzero%d.%s" % (k, dn), c))
    xi = torch.randint(-2, 3, (3, 4, 5), generator=gen).to(torch.int32)
    tensors.append(("nanred.i32.x", xi))
    tensors.append(("nanred.i32.nansum", torch.nansum(xi)))
    tensors.append(("nanred.i32.count_nonzero", torch.count_nonzero(xi, (0, 2))))


def int_cases(tensors):
    x = torch.tensor([0, 1, 2, -1, 5, 0, 3, -7, 100, 0], dtype=torch.int32)
    y = torch.tensor([0, 0, 3, 4, -1, -2, 1, 2, 7, 5], dtype=torch.int32)
    tensors.append(("int.x", x))
    tensors.append(("int.y", y))
    outs = {"xlogy": torch.xlogy(x, y), "xlog1py": torch.special.xlog1py(x, y),
            "erfc": torch.erfc(x), "erfinv": torch.erfinv(x), "logit": torch.logit(x),
            "sinc": torch.sinc(x), "lgamma": torch.lgamma(x), "digamma": torch.digamma(x),
            "polygamma2": torch.polygamma(2, x), "copysign": torch.copysign(x, y)}
    for k, v in outs.items():
        assert v.dtype == torch.float32, (k, v.dtype)
        tensors.append(("int." + k, v))
    h = torch.heaviside(x, y)
    assert h.dtype == torch.int32
    tensors.append(("int.heaviside", h))


def main():
    gen = torch.Generator().manual_seed(SEED)
    tensors = []
    binary_cases(gen, tensors)
    unary_cases(gen, tensors)
    erfinv_ref(gen, tensors)
    gamma_ref(gen, tensors)
    heaviside_cases(gen, tensors)
    nan_reduce_cases(gen, tensors)
    int_cases(tensors)
    nan_dims = ";".join("%s:%d" % ("all" if d is None else ",".join(map(str, d)), int(k))
                        for d, k in NAN_DIMS)
    write_safetensors(OUT, tensors, {"binary": ",".join(BINARY), "unary": ",".join(UNARY),
                                     "nan_dims": nan_dims, "torch": torch.__version__})
    print("wrote", OUT, "(%d tensors)" % len(tensors))


if __name__ == "__main__":
    main()
