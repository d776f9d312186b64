#!/usr/bin/python3
"""Side-by-side benchmark: tapegrad against PyTorch (Debian's python3-torch) on
the same ConvTranspose/Conv shapes, the same thread count, in one run, with
OpenBLAS sgemm of the same GEMM size as the ceiling.

    /usr/bin/python3 bench/compare.py [--threads 2] [--repeat 10] [--rounds 3]
                                      [--only NAME] [--build build] [--markdown FILE]

Each measurement runs in its own process (so peak RSS is that case's alone);
PyTorch and tapegrad alternate, --rounds times per case and pass.  Times are
medians of --repeat calls, then the median over rounds; the speedup's range over
the rounds shows how noisy the machine was (on this shared VM the same case can
vary 2x between runs).  PyTorch uses
libgomp, whose default spin-waiting makes idle threads of one pool fight the
workers of another (OpenBLAS's or PyTorch's own) on 2 cores: the children run
with OMP_WAIT_POLICY=passive unless --omp-wait says otherwise.  (tapegrad has
its own thread pool, src/core/parallel.c, and does not read it.)
"""
import argparse
import os
import statistics
import sys
import tempfile

from benchlib import (ROOT, find_tool, print_table, run_json, same_blas_kernels, torch_time,
                     torch_threads)

# name, op, dtype, x shape, weight shape, stride, padding, output_padding, dilation, groups
CASES = [
    ("dcgan1 100-512 1->4", "conv_transpose2d", "f32", (64, 100, 1, 1), (100, 512, 4, 4), 1, 0, 0, 1, 1),
    ("dcgan2 512-256 4->8", "conv_transpose2d", "f32", (64, 512, 4, 4), (512, 256, 4, 4), 2, 1, 0, 1, 1),
    ("dcgan3 256-128 8->16", "conv_transpose2d", "f32", (64, 256, 8, 8), (256, 128, 4, 4), 2, 1, 0, 1, 1),
    ("dcgan4 128-3 16->32", "conv_transpose2d", "f32", (64, 128, 16, 16), (128, 3, 4, 4), 2, 1, 0, 1, 1),
    ("3d 64-32 8^3->16^3", "conv_transpose3d", "f32", (2, 64, 8, 8, 8), (64, 32, 4, 4, 4), 2, 1, 0, 1, 1),
    ("1d audio 256-128 K16 s8", "conv_transpose1d", "f32", (4, 256, 1024), (256, 128, 16), 8, 4, 0, 1, 1),
    ("1d long K1024 s256", "conv_transpose1d", "f32", (1, 16, 64), (16, 16, 1024), 256, 384, 0, 1, 1),
    ("grouped g4 128-128", "conv_transpose2d", "f32", (16, 128, 16, 16), (128, 32, 3, 3), 2, 1, 1, 1, 4),
    ("dilated d2 64-64", "conv_transpose2d", "f32", (16, 64, 16, 16), (64, 64, 3, 3), 1, 2, 0, 2, 1),
    ("dcgan3 f64", "conv_transpose2d", "f64", (16, 256, 8, 8), (256, 128, 4, 4), 2, 1, 0, 1, 1),
    ("conv2d disc 64-128 s2", "conv2d", "f32", (64, 64, 16, 16), (128, 64, 4, 4), 2, 1, 0, 1, 1),
    # the four conv layers of bench/dcgan_step (examples/dcgan/model.h, batch 64):
    # --only fmnist gives each layer's share of the step against PyTorch
    ("fmnist G convT 128-64 7->14", "conv_transpose2d", "f32", (64, 128, 7, 7), (128, 64, 4, 4), 2, 1, 0, 1, 1),
    ("fmnist G convT 64-1 14->28", "conv_transpose2d", "f32", (64, 64, 14, 14), (64, 1, 4, 4), 2, 1, 0, 1, 1),
    ("fmnist D conv 1-64 28->14", "conv2d", "f32", (64, 1, 28, 28), (64, 1, 4, 4), 2, 1, 0, 1, 1),
    ("fmnist D conv 64-128 14->7", "conv2d", "f32", (64, 64, 14, 14), (128, 64, 4, 4), 2, 1, 0, 1, 1),
]


def make_case(path, c):
    import torch
    from stfile import write_safetensors
    name, op, dt, xs, ws, s, p, op_, d, g = c
    dtype = torch.float64 if dt == "f64" else torch.float32
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(*xs, generator=gen).to(dtype)
    w = (torch.randn(*ws, generator=gen) * 0.05).to(dtype)
    n = len(xs) - 2
    meta = {"op": op, "stride": str(s), "padding": str(p), "dilation": str(d),
            "groups": str(g)}
    if op.startswith("conv_transpose"):
        meta["output_padding"] = str(op_)
    write_safetensors(path, {"x": x, "weight": w}, meta)


def gemm_size(c):
    """The GEMM a column-based path runs: (M, N, K)."""
    name, op, dt, xs, ws, s, p, op_, d, g = c
    k = 1
    for v in ws[2:]:
        k *= v
    sp = 1
    for v in xs[2:]:
        sp *= v
    if op.startswith("conv_transpose"):
        return (ws[1] * k, xs[0] * sp, ws[0] // g)       # (C_out/g*K, B*S_in, C_in/g)
    import torch
    out = [(xs[2 + i] + 2 * p - d * (ws[2 + i] - 1) - 1) // s + 1 for i in range(len(xs) - 2)]
    so = 1
    for v in out:
        so *= v
    return (ws[0] // g, xs[0] * so, ws[1] * k)            # (C_out/g, B*S_out, C_in/g*K)


def peak_rss_mb():
    """VmHWM in MiB: starts afresh at exec, unlike ru_maxrss, which a child
    inherits from a large parent."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def torch_child(path, backward, repeat, threads):
    """Runs in a child process: times the case in PyTorch, prints JSON."""
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    torch_threads(torch, threads)
    from stfile import read_safetensors
    t, meta = read_safetensors(path)
    x, w = t["x"], t["weight"]
    op = meta["op"]
    s, p, d, g = int(meta["stride"]), int(meta["padding"]), int(meta["dilation"]), int(meta["groups"])
    fn = {"conv_transpose1d": F.conv_transpose1d, "conv_transpose2d": F.conv_transpose2d,
          "conv_transpose3d": F.conv_transpose3d, "conv2d": F.conv2d}[op]
    kw = dict(stride=s, padding=p, dilation=d, groups=g)
    if op.startswith("conv_transpose"):
        kw["output_padding"] = int(meta.get("output_padding", "0"))
    if backward:
        x.requires_grad_(True)
        w.requires_grad_(True)

    def once():
        y = fn(x, w, None, **kw)
        if backward:
            y.backward(torch.ones_like(y))
            x.grad = None
            w.grad = None
    torch_time(once, repeat, extra=lambda: {"peak_rss_mb": peak_rss_mb()})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternations of PyTorch and tapegrad per case and pass; the table "
                         "gives the median over rounds and the range of the per-round speedup")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--only", default=None, help="substring of case names to run")
    ap.add_argument("--markdown", default=None, help="also write the table to this file")
    ap.add_argument("--omp-wait", default="passive", choices=["passive", "active", "default"],
                    help="OMP_WAIT_POLICY of both sides' processes (default: passive)")
    ap.add_argument("--torch-child", nargs=2, metavar=("CASE", "BACKWARD"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_child:
        return torch_child(a.torch_child[0], a.torch_child[1] == "1", a.repeat, a.threads)

    if a.omp_wait != "default":
        os.environ["OMP_WAIT_POLICY"] = a.omp_wait.upper()
    tool = find_tool(a.build, "run `make` first")
    print(f"OpenBLAS kernels, both sides: {same_blas_kernels(tool)}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, c in enumerate(CASES):
            if a.only and a.only not in c[0]:
                continue
            path = os.path.join(tmp, f"case{i}.safetensors")
            make_case(path, c)
            m, n, k = gemm_size(c)
            gcmd = [tool, "bench", "--gemm", f"{m},{n},{k}", "--threads", str(a.threads),
                    "--repeat", str(a.repeat)]
            for bwd in (False, True):
                tcmd = [sys.executable, os.path.abspath(__file__), "--threads", str(a.threads),
                        "--repeat", str(a.repeat), "--torch-child", path, "1" if bwd else "0"]
                ocmd = [tool, "bench", "--in", path, "--threads", str(a.threads),
                        "--repeat", str(a.repeat)] + (["--backward"] if bwd else [])
                tjs, ojs, gjs = [], [], []
                for _ in range(a.rounds):   # alternate, so both see the same machine state
                    tjs.append(run_json(tcmd))
                    ojs.append(run_json(ocmd))
                    gjs.append(run_json(gcmd))
                ratios = [t["median_ms"] / o["median_ms"] for t, o in zip(tjs, ojs)]
                tm = statistics.median(t["median_ms"] for t in tjs)
                om = statistics.median(o["median_ms"] for o in ojs)
                oj = dict(ojs[0], median_ms=om,
                          gflops=statistics.median(o["gflops"] for o in ojs),
                          peak_rss_mb=max(o["peak_rss_mb"] for o in ojs))
                tj = dict(tjs[0], median_ms=tm, peak_rss_mb=max(t["peak_rss_mb"] for t in tjs))
                gemm = dict(gjs[0], gflops=statistics.median(g["gflops"] for g in gjs))
                rows.append((c[0], "fwd+bwd" if bwd else "fwd", tj, oj, gemm, ratios))
                print(f"{c[0]:26s} {'fwd+bwd' if bwd else 'fwd':7s} torch {tm:9.3f} ms"
                      f"  tapegrad {om:9.3f} ms  speedup {tm / om:6.2f}x"
                      f" (rounds {min(ratios):.2f}-{max(ratios):.2f})"
                      f"  {oj['gflops']:7.1f} GFLOP/s (sgemm {gemm['gflops']:.1f})"
                      f"  RSS torch {tj['peak_rss_mb']:.0f} MB / tapegrad {oj['peak_rss_mb']:.0f} MB",
                      flush=True)
    lines = [f"| case | pass | PyTorch ms | tapegrad ms | speedup (range over {a.rounds} rounds) | tapegrad GFLOP/s | sgemm GFLOP/s (same GEMM) | % of sgemm | peak RSS torch / tapegrad MB |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, mode, tj, oj, gemm, ratios in rows:
        pct = 100.0 * oj["gflops"] / gemm["gflops"] if mode == "fwd" else float("nan")
        pct_s = f"{pct:.0f}%" if mode == "fwd" else "-"
        lines.append(f"| {name} | {mode} | {tj['median_ms']:.2f} | {oj['median_ms']:.2f} | "
                     f"{tj['median_ms'] / oj['median_ms']:.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) | "
                     f"{oj['gflops']:.1f} | {gemm['gflops']:.1f} | {pct_s} | "
                     f"{tj['peak_rss_mb']:.0f} / {oj['peak_rss_mb']:.0f} |")
    print_table(lines, a.markdown)


if __name__ == "__main__":
    main()
