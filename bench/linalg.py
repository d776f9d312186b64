#!/usr/bin/python3
"""Linear algebra on batches of square matrices: inv, solve, det, cholesky,
eigh, svd and qr (reduced) of tapegrad/linalg.h (bench/linalg) against
torch.linalg, and the batched product A @ A (tg_matmul against torch.matmul) (Debian's python3-torch), on many small matrices and a few
large ones, f32 and f64, at 1 and 2 threads, in one run.

    /usr/bin/python3 bench/linalg.py [--build build-rel] [--threads-list 1,2]
                                     [--shapes 4096x4x4,...] [--dtypes f32,f64]
                                     [--repeat 20] [--rounds 5] [--only NAME]
                                     [--markdown FILE]

A (B, n, n) is made from X U[-1, 1) (bench/linalg.c): X + 2 sqrt(n) I for
inv, solve and det, X X^T / n + I for cholesky, (X + X^T) / 2 for eigh, X
for svd, qr and matmul; solve's B is (B, n, 1).  Each case runs forward alone and
forward + backward (the sum of each output times a fixed U[-1, 1) tensor,
A.grad released after each pass, on both sides).  Each measurement is its
own process; PyTorch and tapegrad alternate --rounds times per case and
pass, each giving the median of --repeat passes.  The table gives the
median over rounds of each side and of the per-round ratio PyTorch /
tapegrad (> 1: tapegrad is faster), with the ratio's range over the rounds.
Both sides run on the OpenBLAS kernels tapegrad picks
(benchlib.same_blas_kernels); PyTorch's children run with
OMP_WAIT_POLICY=passive, as bench/compare.py's.
"""
import argparse
import math

from benchlib import (add_pair_args, find_tool, pair_binary, print_table, same_blas_kernels,
                      time_pair, torch_time, torch_threads)

OPS = ["inv", "solve", "det", "cholesky", "eigh", "svd", "qr", "matmul"]
# shape (B, n, n), dtypes
SHAPES = [
    ((4096, 4, 4), ("f32", "f64")),
    ((1024, 16, 16), ("f32", "f64")),
    ((4, 256, 256), ("f32",)),
    ((1, 512, 512), ("f64",)),
]


def torch_child(a):
    """Runs in a child process: times the case in PyTorch, prints JSON."""
    import torch
    torch_threads(torch, a.threads)
    bsz, n, _ = (int(v) for v in a.shape.split(","))
    dtype = {"f32": torch.float32, "f64": torch.float64}[a.dtype]
    g = torch.Generator().manual_seed(1)
    x = torch.rand(bsz, n, n, generator=g, dtype=torch.float64) * 2 - 1
    eye = torch.eye(n, dtype=torch.float64)
    if a.op in ("inv", "solve", "det"):
        A = x + 2 * math.sqrt(n) * eye
    elif a.op == "cholesky":
        A = x @ x.mT / n + eye
    elif a.op == "eigh":
        A = (x + x.mT) / 2
    else:
        A = x
    A = A.to(dtype)
    B = (torch.rand(bsz, n, 1, generator=g) * 2 - 1).to(dtype)
    fns = {
        "inv": lambda t: (torch.linalg.inv(t),),
        "solve": lambda t: (torch.linalg.solve(t, B),),
        "det": lambda t: (torch.linalg.det(t),),
        "cholesky": lambda t: (torch.linalg.cholesky(t),),
        "eigh": lambda t: tuple(torch.linalg.eigh(t)),
        "svd": lambda t: tuple(torch.linalg.svd(t, full_matrices=False)),
        "qr": lambda t: tuple(torch.linalg.qr(t)),
        "matmul": lambda t: (torch.matmul(t, t),),
    }
    fn = fns[a.op]
    gys = None
    if a.backward:
        gys = [(torch.rand(y.shape, generator=g) * 2 - 1).to(dtype) for y in fn(A)]
        A.requires_grad_(True)

    def once():
        ys = fn(A)
        if gys is not None:
            loss = sum((y * gy).sum() for y, gy in zip(ys, gys))
            loss.backward()
            A.grad = None
    torch_time(once, a.repeat)


def main():
    ap = argparse.ArgumentParser()
    add_pair_args(ap)
    ap.add_argument("--threads-list", default="1,2", help="thread counts, comma-separated")
    ap.add_argument("--shapes", default=None,
                    help="the shapes to run, e.g. 4096x4x4,1x512x512 (default: all)")
    ap.add_argument("--dtypes", default="f32,f64", help="the dtypes to run, comma-separated")
    for opt in ("--op", "--dtype", "--shape"):
        ap.add_argument(opt, help=argparse.SUPPRESS)
    ap.add_argument("--backward", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_child:
        return torch_child(a)
    known = sorted({d for _, dts in SHAPES for d in dts})
    bad = [d for d in a.dtypes.split(",") if d not in known]
    if bad:
        ap.error(f"--dtypes: unknown {','.join(bad)} (known: {','.join(known)})")
    ours = pair_binary(a, "linalg")
    tool = find_tool(a.build, f"build first (ninja -C {a.build} tools/tapegrad)")
    print(f"OpenBLAS kernels, both sides: {same_blas_kernels(tool)}", flush=True)
    rows = []
    for op in OPS:
        if a.only and a.only not in op:
            continue
        for shape, dtypes in SHAPES:
            sh = "x".join(map(str, shape))
            if a.shapes and sh not in a.shapes.split(","):
                continue
            for dt in (d for d in dtypes if d in a.dtypes.split(",")):
                for th in (int(v) for v in a.threads_list.split(",")):
                    a.threads = th
                    for bwd in (False, True):
                        args = ["--op", op, "--dtype", dt, "--shape", ",".join(map(str, shape))]
                        tm, om, rm, lo, hi = time_pair(a, __file__, ours,
                                                       args + (["--backward"] if bwd else []))
                        mode = "fwd+bwd" if bwd else "fwd"
                        rows.append((op, dt, sh, th, mode, tm, om, rm, lo, hi))
                        print(f"{op:8s} {dt:4s} {sh:12s} t{th} {mode:7s} torch {tm:9.3f} ms  "
                              f"tapegrad {om:9.3f} ms  torch/tapegrad {rm:5.2f}x "
                              f"(rounds {lo:.2f}-{hi:.2f})", flush=True)
    lines = [f"| op | dtype | A | threads | pass | PyTorch ms | tapegrad ms | PyTorch / tapegrad "
             f"(range over {a.rounds} rounds) |",
             "| --- | --- | --- | ---: | --- | ---: | ---: | ---: |"]
    for op, dt, sh, th, mode, tm, om, rm, lo, hi in rows:
        lines.append(f"| {op} | {dt} | {sh} | {th} | {mode} | {tm:.3f} | {om:.3f} | {rm:.2f}x "
                     f"({lo:.2f}-{hi:.2f}) |")
    print_table(lines, a.markdown)


if __name__ == "__main__":
    main()
