#!/usr/bin/python3
"""Pooling (max, average, adaptive max and average) and nearest upsampling: tapegrad
(bench/pool) against PyTorch (Debian's python3-torch) on the layers of a
DCGAN-like encoder/decoder, the same thread count, in one run.

    /usr/bin/python3 bench/pool.py [--build build-rel] [--threads 2] [--repeat 20]
                                   [--rounds 5] [--only NAME] [--markdown FILE]

Each case runs forward alone and forward + backward (grad_y fixed, x.grad
released after each pass, on both sides).  Each measurement is its own
process; PyTorch and tapegrad alternate --rounds times per case and pass, each
giving the median of --repeat passes.  The table gives the median over rounds
of each side and of the per-round ratio PyTorch / tapegrad (> 1: tapegrad is
faster), with the ratio's range over the rounds: on a shared machine one
round can be far off, so read the median and the spread together.
PyTorch's children run with OMP_WAIT_POLICY=passive, as bench/compare.py's.
"""
import argparse

from benchlib import add_pair_args, pair_binary, print_table, time_pair, torch_time, torch_threads

# name, op, dtype, x shape, kernel, stride (0: the kernel), padding, scale (adaptive_max and
# adaptive_avg: the output size)
CASES = [
    ("max_pool 2x2", "max", "f32", (64, 64, 32, 32), 2, 0, 0, 1),
    ("avg_pool 2x2", "avg", "f32", (64, 64, 32, 32), 2, 0, 0, 1),
    ("avg_pool 3x3 s1 p1", "avg", "f32", (64, 64, 32, 32), 3, 1, 1, 1),
    ("max_pool 3x3 s2 p1", "max", "f32", (64, 64, 32, 32), 3, 2, 1, 1),
    ("upsample x2", "up", "f32", (64, 64, 32, 32), 1, 0, 0, 2),
    ("upsample x2 bf16", "up", "bf16", (64, 64, 32, 32), 1, 0, 0, 2),
    ("avg_pool 2x2 bf16", "avg", "bf16", (64, 64, 32, 32), 2, 0, 0, 1),
    ("adaptive_max 16->8 (64, 128, 16, 16)", "adaptive_max", "f32", (64, 128, 16, 16), 1, 0, 0,
     8),
    ("adaptive_max 16->1 (64, 128, 16, 16)", "adaptive_max", "f32", (64, 128, 16, 16), 1, 0, 0,
     1),
    ("adaptive_max 16->3 (64, 128, 16, 16)", "adaptive_max", "f32", (64, 128, 16, 16), 1, 0, 0,
     3),
    ("adaptive_max 7->1 (64, 512, 7, 7)", "adaptive_max", "f32", (64, 512, 7, 7), 1, 0, 0, 1),
    ("adaptive_avg 16->1 (64, 128, 16, 16)", "adaptive_avg", "f32", (64, 128, 16, 16), 1, 0, 0,
     1),
    ("adaptive_avg 16->3 (64, 128, 16, 16)", "adaptive_avg", "f32", (64, 128, 16, 16), 1, 0, 0,
     3),
    ("adaptive_avg 7->1 (64, 512, 7, 7)", "adaptive_avg", "f32", (64, 512, 7, 7), 1, 0, 0, 1),
]


def torch_child(a):
    """Runs in a child process: times the case in PyTorch, prints JSON."""
    import torch
    import torch.nn.functional as F
    torch_threads(torch, a.threads)
    op, dt, shape = a.op, a.dtype, tuple(int(v) for v in a.shape.split(","))
    dtype = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}[dt]
    k, s, p = a.kernel, a.stride or None, a.padding
    x = (torch.rand(*shape, generator=torch.Generator().manual_seed(1)) * 2 - 1).to(dtype)
    if op == "max":
        def fn(t): return F.max_pool2d(t, k, s, p)
    elif op == "avg":
        def fn(t): return F.avg_pool2d(t, k, s, p)
    elif op == "adaptive_max":
        def fn(t): return F.adaptive_max_pool2d(t, a.scale)
    elif op == "adaptive_avg":
        def fn(t): return F.adaptive_avg_pool2d(t, a.scale)
    else:
        def fn(t): return F.interpolate(t, scale_factor=a.scale, mode="nearest")
    gy = None
    if a.backward:
        gy = torch.rand(*fn(x).shape).to(dtype) * 2 - 1
        x.requires_grad_(True)

    def once():
        y = fn(x)
        if gy is not None:
            y.backward(gy)
            x.grad = None
    torch_time(once, a.repeat)


def case_args(c):
    name, op, dt, shape, k, s, p, sc = c
    last = ["--size" if op.startswith("adaptive") else "--scale", str(sc)]
    return ["--op", op, "--dtype", dt, "--shape", ",".join(map(str, shape)), "--kernel", str(k),
            "--stride", str(s), "--padding", str(p)] + last


def main():
    ap = argparse.ArgumentParser()
    add_pair_args(ap)
    for opt in ("--op", "--dtype", "--shape"):
        ap.add_argument(opt, help=argparse.SUPPRESS)
    for opt in ("--kernel", "--stride", "--padding", "--scale"):
        ap.add_argument(opt, type=int, help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, dest="scale", help=argparse.SUPPRESS)
    ap.add_argument("--backward", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_child:
        return torch_child(a)

    ours = pair_binary(a, "pool")
    rows = []
    for c in CASES:
        if a.only and a.only not in c[0]:
            continue
        for bwd in (False, True):
            args = case_args(c) + (["--backward"] if bwd else [])
            tm, om, rm, lo, hi = time_pair(a, __file__, ours, args)
            mode = "fwd+bwd" if bwd else "fwd"
            rows.append((c[0], mode, tm, om, rm, lo, hi))
            print(f"{c[0]:22s} {mode:7s} torch {tm:8.3f} ms  tapegrad {om:8.3f} ms  "
                  f"torch/tapegrad {rm:5.2f}x (rounds {lo:.2f}-{hi:.2f})", flush=True)
    lines = [f"| case (x (64, 64, 32, 32) unless named) | pass | PyTorch ms | tapegrad ms "
             f"| PyTorch / tapegrad (range over {a.rounds} rounds) |",
             "| --- | --- | ---: | ---: | ---: |"]
    for name, mode, tm, om, rm, lo, hi in rows:
        lines.append(f"| {name} | {mode} | {tm:.2f} | {om:.2f} | {rm:.2f}x ({lo:.2f}-{hi:.2f}) |")
    print_table(lines, a.markdown)


if __name__ == "__main__":
    main()
