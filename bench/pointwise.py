#!/usr/bin/python3
"""Element-wise gelu, sigmoid, tanh, silu, exp and relu of (N, C): tapegrad
(bench/pointwise) against PyTorch (Debian's python3-torch), the same thread
count, in one run.

    /usr/bin/python3 bench/pointwise.py [--build build-rel] [--threads 2] [--repeat 20]
                                        [--rounds 5] [--only NAME] [--markdown FILE]

Each case runs forward alone and forward + backward (grad_y fixed, x.grad
released after each pass, on both sides).  Each measurement is its own
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
CASES = [(op, op, "f32", (256, 1024))
         for op in ("gelu", "sigmoid", "tanh", "silu", "exp", "relu")]

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
    fns = {"gelu": F.gelu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
           "silu": F.silu, "exp": torch.exp, "relu": torch.relu}
    fn = fns[a.op]
    gy = None
    if a.backward:
        x.requires_grad_(True)
        gy = (torch.rand(n, c, generator=g) * 2 - 1).to(dtype)

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

    ours = pair_binary(a, "pointwise")
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
            print(f"{c[0]:8s} {c[2]:4s} {shape:10s} {mode:7s} torch {tm:8.3f} ms  "
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
