#!/usr/bin/python3
"""F.grid_sample (align_corners False): tapegrad
(bench/grid_sample) against PyTorch (Debian's python3-torch), the same
thread count, in one run.

    /usr/bin/python3 bench/grid_sample.py [--build build-rel] [--threads 2] [--repeat 20]
                                          [--rounds 5] [--only NAME] [--markdown FILE]
                                          [--padding zeros|border|reflection]

input (N, C, H, W) of U[-1, 1) values, grid (N, Ho, Wo, 2) of U[-1.1, 1.1)
(bench/grid_sample.c); the 5-D cases (N, C, D, H, W) and (N, Do, Ho, Wo, 3).  Each case runs forward alone and forward + backward
of the sum (both gradients released after each pass, on both sides).  Each
measurement is its own process; PyTorch and tapegrad alternate --rounds
times per case and pass, each giving the median of --repeat passes.  The
table gives the median over rounds of each side and of the per-round ratio
PyTorch / tapegrad (> 1: tapegrad is faster), with the ratio's range over
the rounds.  PyTorch's children run with OMP_WAIT_POLICY=passive, as
bench/compare.py's.
"""
import argparse

from benchlib import add_pair_args, pair_binary, print_table, time_pair, torch_time, torch_threads

# name, dtype, mode, (N, C, H, W, Ho, Wo) or (N, C, D, H, W, Do, Ho, Wo)
CASES = [
    ("STN-like", "f32", "bilinear", (8, 16, 32, 32, 32, 32)),
    ("STN-like", "f32", "nearest", (8, 16, 32, 32, 32, 32)),
    ("STN-like", "f32", "bicubic", (8, 16, 32, 32, 32, 32)),
    ("STN-like", "f64", "bilinear", (8, 16, 32, 32, 32, 32)),
    ("one image", "f32", "bilinear", (1, 3, 128, 128, 128, 128)),
    ("one image", "f32", "bicubic", (1, 3, 128, 128, 128, 128)),
    ("volume", "f32", "bilinear", (4, 8, 16, 16, 16, 16, 16, 16)),
    ("volume", "f32", "nearest", (4, 8, 16, 16, 16, 16, 16, 16)),
]


def torch_child(a):
    """Runs in a child process: times the case in PyTorch, prints JSON."""
    import torch
    import torch.nn.functional as F
    torch_threads(torch, a.threads)
    s = [int(v) for v in a.shape.split(",")]
    ns = (len(s) - 2) // 2
    dtype = {"f32": torch.float32, "f64": torch.float64}[a.dtype]
    gen = torch.Generator().manual_seed(1)
    x = (torch.rand(*s[:2 + ns], generator=gen) * 2 - 1).to(dtype)
    grid = (torch.rand(s[0], *s[2 + ns:], ns, generator=gen) * 2.2 - 1.1).to(dtype)
    if a.backward:
        x.requires_grad_(True)
        grid.requires_grad_(True)

    def once():
        y = F.grid_sample(x, grid, mode=a.mode, padding_mode=a.padding, align_corners=False)
        if a.backward:
            y.sum().backward()
            x.grad = None
            grid.grad = None
    torch_time(once, a.repeat)


def main():
    ap = argparse.ArgumentParser()
    add_pair_args(ap)
    for opt in ("--dtype", "--shape", "--mode"):
        ap.add_argument(opt, help=argparse.SUPPRESS)
    ap.add_argument("--backward", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--padding", default="zeros", choices=("zeros", "border", "reflection"),
                    help="padding_mode of every case (zeros)")
    a = ap.parse_args()
    if a.torch_child:
        return torch_child(a)
    ours = pair_binary(a, "grid_sample")
    rows = []
    for name, dt, mode, shape in CASES:
        if a.only and a.only not in name:
            continue
        for bwd in (False, True):
            args = ["--dtype", dt, "--mode", mode, "--shape", ",".join(map(str, shape)),
                    "--padding", a.padding]
            tm, om, rm, lo, hi = time_pair(a, __file__, ours,
                                           args + (["--backward"] if bwd else []))
            pas = "fwd+bwd" if bwd else "fwd"
            k = 2 + (len(shape) - 2) // 2
            sh = "(%s) to (%s)" % (", ".join(map(str, shape[:k])),
                                   ", ".join(map(str, shape[k:])))
            rows.append((name, dt, mode, sh, pas, tm, om, rm, lo, hi))
            print(f"{name:10s} {dt} {mode:8s} {sh:28s} {pas:7s} torch {tm:8.3f} ms  tapegrad "
                  f"{om:8.3f} ms  torch/tapegrad {rm:5.2f}x (rounds {lo:.2f}-{hi:.2f})",
                  flush=True)
    lines = [f"| case | dtype | mode | input to output size | pass | PyTorch ms | "
             f"tapegrad ms | PyTorch / tapegrad (range over {a.rounds} rounds) |",
             "| --- | --- | --- | --- | --- | ---: | ---: | ---: |"]
    for name, dt, mode, sh, pas, tm, om, rm, lo, hi in rows:
        lines.append(f"| {name} | {dt} | {mode} | {sh} | {pas} | {tm:.3f} | {om:.3f} | "
                     f"{rm:.2f}x ({lo:.2f}-{hi:.2f}) |")
    print_table(lines, a.markdown)


if __name__ == "__main__":
    main()
