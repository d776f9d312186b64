#!/usr/bin/python3
"""Ops over the rows of (N, C): softmax, log_softmax and cross_entropy along the
last dim, sum and mean of every element, sum over the last dim, mse_loss,
layer_norm over the last dim;
tapegrad (bench/rows) against PyTorch (Debian's python3-torch), the same
thread count, in one run.

    /usr/bin/python3 bench/rows.py [--build build-rel] [--threads 2] [--repeat 20]
                                   [--rounds 5] [--only NAME] [--markdown FILE]

Each case runs forward alone and forward + backward (grad_y fixed, of the
output's shape; x.grad released after each pass, on both sides).  Each measurement is its own
process; PyTorch and tapegrad alternate --rounds times per case and pass,
each giving the median of --repeat passes.  The table gives the median over
rounds of each side and of the per-round ratio PyTorch / tapegrad (> 1:
tapegrad is faster), with the ratio's range over the rounds.  PyTorch's
children run with OMP_WAIT_POLICY=passive, as bench/compare.py's.
"""
from benchlib import fwd_bwd_main, torch_time

# name, op, dtype, (N, C)
CASES = [
    ("softmax", "softmax", "f32", (256, 1000)),
    ("log_softmax", "log_softmax", "f32", (256, 1000)),
    ("cross_entropy", "cross_entropy", "f32", (256, 1000)),
    ("cross_entropy", "cross_entropy", "f32", (4096, 10)),
    ("log_softmax", "log_softmax", "f32", (4096, 100)),
    ("sum", "sum", "f32", (256, 1024)),
    ("mean", "mean", "f32", (256, 1024)),
    ("sum dim 1", "sum_dim1", "f32", (256, 1024)),
    ("mse_loss", "mse_loss", "f32", (256, 1024)),
    ("layer_norm", "layer_norm", "f32", (256, 1024)),
]

DTYPES = {"f32": "float32", "f64": "float64", "bf16": "bfloat16", "f16": "float16"}


def torch_child(a):
    """Runs in a child process: times the case in PyTorch, prints JSON."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(a.threads)
    n, c = (int(v) for v in a.shape.split(","))
    dtype = getattr(torch, DTYPES[a.dtype])
    g = torch.Generator().manual_seed(1)
    x = ((torch.rand(n, c, generator=g) * 8 - 4)).to(dtype)
    other = ((torch.rand(n, c, generator=g) * 8 - 4)).to(dtype)
    target = torch.arange(n) % c
    w = (torch.rand(c, generator=g) * 1.5 + 0.5).to(dtype)
    b = (torch.rand(c, generator=g) * 2 - 1).to(dtype)
    fns = {
        "softmax": lambda t: F.softmax(t, 1),
        "log_softmax": lambda t: F.log_softmax(t, 1),
        "cross_entropy": lambda t: F.cross_entropy(t, target),
        "sum": lambda t: t.sum(),
        "mean": lambda t: t.mean(),
        "sum_dim1": lambda t: t.sum(1),
        "mse_loss": lambda t: F.mse_loss(t, other),
        "layer_norm": lambda t: F.layer_norm(t, (c,), w, b, 1e-5),
    }
    fn = fns[a.op]
    gy = None
    if a.backward:
        gy = (torch.rand(fn(x).shape, generator=g) * 2 - 1).to(dtype)
        x.requires_grad_(True)

    def once():
        y = fn(x)
        if a.backward:
            y.backward(gy)
            x.grad = None
    torch_time(once, a.repeat)


def main():
    fwd_bwd_main(__file__, "rows", CASES, torch_child)


if __name__ == "__main__":
    main()
