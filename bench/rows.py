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
import argparse
import json
import statistics

from benchlib import add_pair_args, pair_binary, print_table, time_pair

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
    import time
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
    for _ in range(3):
        once()
    times = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        once()
        times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"tool": "torch", "median_ms": statistics.median(times)}))


def case_args(c):
    name, op, dt, shape = c
    return ["--op", op, "--dtype", dt, "--shape", ",".join(map(str, shape))]


def main():
    ap = argparse.ArgumentParser()
    add_pair_args(ap)
    for opt in ("--op", "--dtype", "--shape"):
        ap.add_argument(opt, help=argparse.SUPPRESS)
    ap.add_argument("--backward", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_child:
        return torch_child(a)

    ours = pair_binary(a, "rows")
    rows = []
    for c in CASES:
        if a.only and a.only not in c[0]:
            continue
        shape = "x".join(map(str, c[3]))
        for bwd in (False, True):
            args = case_args(c) + (["--backward"] if bwd else [])
            tm, om, rm, lo, hi = time_pair(a, __file__, ours, args)
            mode = "fwd+bwd" if bwd else "fwd"
            rows.append((c[0], c[2], shape, mode, tm, om, rm, lo, hi))
            print(f"{c[0]:14s} {c[2]:4s} {shape:10s} {mode:7s} torch {tm:8.3f} ms  "
                  f"tapegrad {om:8.3f} ms  torch/tapegrad {rm:5.2f}x (rounds {lo:.2f}-{hi:.2f})",
                  flush=True)
    lines = [f"| case | dtype | x | pass | PyTorch ms | tapegrad ms | PyTorch / tapegrad "
             f"(range over {a.rounds} rounds) |",
             "| --- | --- | --- | --- | ---: | ---: | ---: |"]
    for name, dt, shape, mode, tm, om, rm, lo, hi in rows:
        lines.append(f"| {name} | {dt} | {shape} | {mode} | {tm:.3f} | {om:.3f} | {rm:.2f}x "
                     f"({lo:.2f}-{hi:.2f}) |")
    print_table(lines, a.markdown)


if __name__ == "__main__":
    main()
