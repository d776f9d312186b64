#!/usr/bin/python3
"""Prints what PyTorch does with the mixed-dtype cases of
tests/test_amp_parity.c (and the dtype rows of tests/test_amp.c's policy
table): each call's result dtype, or "refused" and the first line of
torch's message.  Nothing is written; the tests hold the same answers.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/amp_parity_torch.py

Sections: conv and conv_transpose (1-3 spatial dims, functional and
modules) outside autocast; products and convolutions with f64 operands
inside torch.autocast("cpu", dtype=torch.bfloat16); mv and dot in that
scope; outer (and ger) of mixed dtypes in and out of it.
"""
import torch
import torch.nn.functional as F

D, S, B, H = torch.float64, torch.float32, torch.bfloat16, torch.float16
NAMES = {D: "f64", S: "f32", B: "bf16", H: "f16", torch.int64: "i64"}


def show(name, fn):
    try:
        r = fn()
        print(f"{name:44s} {NAMES.get(r.dtype, str(r.dtype))}")
    except RuntimeError as e:
        print(f"{name:44s} refused: {str(e).splitlines()[0][:90]}")


def t(*shape, dt=S):
    return torch.randn(*shape).to(dt)


def conv_outside():
    print("# conv and conv_transpose outside autocast")
    for nsp in (1, 2, 3):
        xs, ws = (1, 2) + (4,) * nsp, (3, 2) + (2,) * nsp
        wts = (2, 3) + (2,) * nsp
        conv = getattr(F, f"conv{nsp}d")
        convt = getattr(F, f"conv_transpose{nsp}d")
        for x, w, b in ((S, D, None), (D, S, None), (B, S, None), (S, S, D), (D, D, S)):
            bias = None if b is None else t(3, dt=b)
            tag = f"({NAMES[x]}, {NAMES[w]}, {NAMES.get(b, '-')})"
            show(f"conv{nsp}d {tag}", lambda: conv(t(*xs, dt=x), t(*ws, dt=w), bias))
            show(f"conv_transpose{nsp}d {tag}",
                 lambda: convt(t(*xs, dt=x), t(*wts, dt=w), bias))
    show("conv2d unbatched (f32, f64)", lambda: F.conv2d(t(2, 4, 4), t(3, 2, 2, 2, dt=D)))
    show("nn.Conv2d(2, 3, 3)(f64)", lambda: torch.nn.Conv2d(2, 3, 3)(t(1, 2, 5, 5, dt=D)))
    show("nn.ConvTranspose2d(2, 3, 3)(f64)",
         lambda: torch.nn.ConvTranspose2d(2, 3, 3)(t(1, 2, 5, 5, dt=D)))
    show("nn.ConvTranspose2d(2, 3, 3)(bf16)",
         lambda: torch.nn.ConvTranspose2d(2, 3, 3)(t(1, 2, 5, 5, dt=B)))


def under_autocast():
    print("# inside torch.autocast('cpu', dtype=torch.bfloat16)")
    x, k, kt = (1, 2, 5, 5), (3, 2, 3, 3), (2, 3, 3, 3)
    cases = [
        ("matmul (f64, f64)", lambda: torch.matmul(t(2, 3, dt=D), t(3, 4, dt=D))),
        ("mm (f64, f64)", lambda: torch.mm(t(2, 3, dt=D), t(3, 4, dt=D))),
        ("bmm (f64, f64)", lambda: torch.bmm(t(2, 2, 3, dt=D), t(2, 3, 4, dt=D))),
        ("linear (f64, f64, f64)", lambda: F.linear(t(2, 3, dt=D), t(4, 3, dt=D), t(4, dt=D))),
        ("addmm (f64, f64, f64)",
         lambda: torch.addmm(t(2, 4, dt=D), t(2, 3, dt=D), t(3, 4, dt=D))),
        ("baddbmm (f64, f64, f64)",
         lambda: torch.baddbmm(t(2, 2, 4, dt=D), t(2, 2, 3, dt=D), t(2, 3, 4, dt=D))),
        ("conv2d (f64, f64, f64)", lambda: F.conv2d(t(*x, dt=D), t(*k, dt=D), t(3, dt=D))),
        ("conv_transpose2d (f64, f64)", lambda: F.conv_transpose2d(t(*x, dt=D), t(*kt, dt=D))),
        ("baddbmm (f32, f64, f64)",
         lambda: torch.baddbmm(t(2, 2, 4), t(2, 2, 3, dt=D), t(2, 3, 4, dt=D))),
        ("baddbmm (f64, f32, f32)",
         lambda: torch.baddbmm(t(2, 2, 4, dt=D), t(2, 2, 3), t(2, 3, 4))),
        ("addmm (f32, f32, f32)", lambda: torch.addmm(t(2, 4), t(2, 3), t(3, 4))),
        ("matmul (f64, f32)", lambda: torch.matmul(t(2, 3, dt=D), t(3, 4))),
        ("matmul (f32, f64)", lambda: torch.matmul(t(2, 3), t(3, 4, dt=D))),
        ("mm (f64, f32)", lambda: torch.mm(t(2, 3, dt=D), t(3, 4))),
        ("bmm (f32, f64)", lambda: torch.bmm(t(2, 2, 3), t(2, 3, 4, dt=D))),
        ("linear (f64, f32)", lambda: F.linear(t(2, 3, dt=D), t(4, 3))),
        ("linear (f32, f64)", lambda: F.linear(t(2, 3), t(4, 3, dt=D))),
        ("linear (f32, f32, f64)", lambda: F.linear(t(2, 3), t(4, 3), t(4, dt=D))),
        ("linear (f64, f64, f32)", lambda: F.linear(t(2, 3, dt=D), t(4, 3, dt=D), t(4))),
        ("addmm (f64, f32, f32)", lambda: torch.addmm(t(2, 4, dt=D), t(2, 3), t(3, 4))),
        ("addmm (f32, f64, f64)",
         lambda: torch.addmm(t(2, 4), t(2, 3, dt=D), t(3, 4, dt=D))),
        ("conv2d (f64, f32)", lambda: F.conv2d(t(*x, dt=D), t(*k))),
        ("conv2d (f32, f64)", lambda: F.conv2d(t(*x), t(*k, dt=D))),
        ("conv2d (bf16, f64)", lambda: F.conv2d(t(*x, dt=B), t(*k, dt=D))),
        ("conv2d (f32, f32, f64)", lambda: F.conv2d(t(*x), t(*k), t(3, dt=D))),
        ("conv2d (f64, f64, f32)", lambda: F.conv2d(t(*x, dt=D), t(*k, dt=D), t(3))),
        ("conv_transpose2d (f64, f32)", lambda: F.conv_transpose2d(t(*x, dt=D), t(*kt))),
        ("conv_transpose2d (f32, f64)", lambda: F.conv_transpose2d(t(*x), t(*kt, dt=D))),
        ("conv_transpose2d (f32, f32, f64)",
         lambda: F.conv_transpose2d(t(*x), t(*kt), t(3, dt=D))),
        ("conv2d (bf16, f32, f32)", lambda: F.conv2d(t(*x, dt=B), t(*k), t(3))),
        ("conv_transpose2d (bf16, f32, f32)",
         lambda: F.conv_transpose2d(t(*x, dt=B), t(*kt), t(3))),
        ("mv (f32, f32)", lambda: torch.mv(t(3, 4), t(4))),
        ("dot (f32, f32)", lambda: torch.dot(t(4), t(4))),
        ("mv (bf16, bf16)", lambda: torch.mv(t(3, 4, dt=B), t(4, dt=B))),
        ("dot (bf16, bf16)", lambda: torch.dot(t(4, dt=B), t(4, dt=B))),
        ("mv (f64, f64)", lambda: torch.mv(t(3, 4, dt=D), t(4, dt=D))),
        ("dot (f64, f64)", lambda: torch.dot(t(4, dt=D), t(4, dt=D))),
        ("mv (bf16, f32)", lambda: torch.mv(t(3, 4, dt=B), t(4))),
        ("dot (f32, bf16)", lambda: torch.dot(t(4), t(4, dt=B))),
        ("matmul (f32 2-d, f32 1-d)", lambda: torch.matmul(t(3, 4), t(4))),
    ]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for name, fn in cases:
            show(name, fn)
        a, v = t(3, 4).requires_grad_(), t(4).requires_grad_()
        (torch.mv(a, v).sum() + torch.dot(v, v)).backward()
        print(f"{'mv, dot gradients':44s} {NAMES[a.grad.dtype]} {NAMES[v.grad.dtype]}")


def outer():
    for scope in (False, True):
        print(f"# outer {'inside' if scope else 'outside'} autocast")
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=scope):
            for a, b in ((S, D), (D, S), (S, B), (H, B)):
                show(f"outer ({NAMES[a]}, {NAMES[b]})", lambda: torch.outer(t(3, dt=a), t(4, dt=b)))
            show("ger (f32, f64)", lambda: torch.ger(t(3), t(4, dt=D)))
    show("outer (i64, i64)", lambda: torch.outer(torch.arange(3), torch.arange(4)))
    show("outer (f32, i64)", lambda: torch.outer(t(3), torch.arange(4)))
    v, u = t(3).requires_grad_(), t(4, dt=D).requires_grad_()
    torch.outer(v, u).sum().backward()
    print(f"{'outer (f32, f64) gradients':44s} {NAMES[v.grad.dtype]} {NAMES[u.grad.dtype]}")


if __name__ == "__main__":
    torch.manual_seed(0)
    conv_outside()
    under_autocast()
    outer()
