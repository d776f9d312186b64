#!/usr/bin/python3
"""int8 ConvTranspose2d on the DCGAN generator's layer shapes, in one run:
tapegrad's integer op (tapegrad/quant.h) against tapegrad's f32 op and
PyTorch's quantized ConvTranspose2d (engine onednn), same thread count.

    /usr/bin/python3 bench/int8.py [--threads 2] [--repeat 10] [--rounds 1] [--build build]
                                   [--kernel auto|portable|avx2|vnni|amx]

Each tapegrad figure is `tapegrad bench` on a case file (forward only); the
PyTorch figure runs in a child process with benchlib.torch_threads.  Times are
medians in ms.  Per-tensor weights (torch refuses per-channel for transposed
conv); u8 activations.  No assertions: figures only.

The last columns give tapegrad's int8 rate in GOP/s (2 x the layer's
multiply-adds, B x C_in x H x W x C_out x kh x kw, per second) and its share
of the peak of the kernel's multiply instruction on the threads used, as
bench/peak measures it on this machine (vpdpbusd zmm for vnni, vpmaddwd ymm
for avx2; for amx one 16x16x64 tdpbusd per 16 cycles at the measured clock;
none for portable).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

from benchlib import ROOT, run_json, same_blas_kernels, torch_threads

# name, x shape, weight shape, stride, padding
LAYERS = [
    ("dcgan1 100-512 1->4", (64, 100, 1, 1), (100, 512, 4, 4), 1, 0),
    ("dcgan2 512-256 4->8", (64, 512, 4, 4), (512, 256, 4, 4), 2, 1),
    ("dcgan3 256-128 8->16", (64, 256, 8, 8), (256, 128, 4, 4), 2, 1),
    ("dcgan4 128-64 16->32", (64, 128, 16, 16), (128, 64, 4, 4), 2, 1),
    ("dcgan5 64-3 32->64", (64, 64, 32, 32), (64, 3, 4, 4), 2, 1),
]
X_SCALE, X_ZP, Y_SCALE, Y_ZP = 0.02, 128, 0.05, 128


def make_cases(tmp, i, layer):
    import torch
    from stfile import write_safetensors
    name, xs, ws, s, p = layer
    gen = torch.Generator().manual_seed(i)
    x = torch.randn(*xs, generator=gen)
    w = torch.randn(*ws, generator=gen) * 0.05
    meta = {"stride": str(s), "padding": str(p)}
    f32 = os.path.join(tmp, f"f32_{i}.safetensors")
    write_safetensors(f32, {"x": x, "weight": w}, dict(meta, op="conv_transpose2d"))
    w_scale = float(w.abs().max()) / 127
    xq = torch.quantize_per_tensor(x, X_SCALE, X_ZP, torch.quint8)
    wq = torch.quantize_per_tensor(w, w_scale, 0, torch.qint8)
    q = os.path.join(tmp, f"q_{i}.safetensors")
    write_safetensors(q, {"x": xq.int_repr(), "weight": wq.int_repr()},
                      dict(meta, op="quantized_conv_transpose2d", x_scale=str(X_SCALE),
                           x_zero_point=str(X_ZP), weight_scale=repr(w_scale),
                           y_scale=str(Y_SCALE), y_zero_point=str(Y_ZP)))
    return f32, q


def torch_child(path, repeat, threads):
    import time
    import torch
    import torch.ao.nn.quantized as nnq
    from stfile import read_safetensors
    torch_threads(torch, threads)
    torch.backends.quantized.engine = "onednn"
    t, meta = read_safetensors(path)
    ws = float(meta["weight_scale"])
    w = torch._make_per_tensor_quantized_tensor(t["weight"], ws, 0)
    x = torch._make_per_tensor_quantized_tensor(t["x"], X_SCALE, X_ZP)
    s, p = int(meta["stride"]), int(meta["padding"])
    m = nnq.ConvTranspose2d(w.shape[0], w.shape[1], tuple(w.shape[2:]), stride=s, padding=p,
                            bias=False)
    m.set_weight_bias(w, None)
    m.scale, m.zero_point = Y_SCALE, Y_ZP
    t0 = time.perf_counter()
    m(x)
    if time.perf_counter() - t0 > 2.0:   # a pathological case: time it only a few times
        repeat = min(repeat, 3)
    else:
        m(x), m(x)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        m(x)
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    print(json.dumps({"median_ms": times[len(times) // 2]}))


def int8_kernel(tool, env):
    out = subprocess.run([tool, "--version"], check=True, capture_output=True, text=True,
                         env=env).stdout
    m = re.search(r"int8 kernel: (\w+)", out)
    return m.group(1) if m else "?"


# the multiply instruction of each int8 kernel (bench/peak's names)
KERNEL_INSTRUCTION = {"vnni": "vpdpbusd zmm", "amx": "tdpbusd", "avx2": "vpmaddwd ymm"}


def measured_peak(build, instruction, threads):
    """GOP/s of instruction on threads threads (bench/peak), or nan."""
    tool = os.path.join(build, "bench", "peak")
    if instruction is None or not os.path.exists(tool):
        return float("nan")
    out = subprocess.run([tool, "--threads", str(threads)], check=True, capture_output=True,
                         text=True).stdout
    for line in out.splitlines():
        j = json.loads(line)
        if j.get("instruction") == instruction and j["gops"] > 0:
            return j["gops"]
    return float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--kernel", default="auto")
    ap.add_argument("--no-torch", action="store_true", help="tapegrad figures only")
    ap.add_argument("--rounds", type=int, default=1,
                    help="runs of the three per layer, alternating; the table gives medians "
                         "over rounds and the range of the per-round ratios")
    ap.add_argument("--torch-child", metavar="CASE", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_child:
        return torch_child(a.torch_child, a.repeat, a.threads)
    tool = os.path.join(a.build, "tools", "tapegrad")
    core = same_blas_kernels(tool)
    env = dict(os.environ)
    if a.kernel != "auto":
        env["TG_INT8_KERNEL"] = a.kernel
    common = ["--repeat", str(a.repeat), "--threads", str(a.threads)]
    kern = int8_kernel(tool, env)
    instruction = KERNEL_INSTRUCTION.get(kern)
    peak = measured_peak(a.build, instruction, a.threads)
    print(f"threads {a.threads}, repeat {a.repeat}, rounds {a.rounds}, int8 kernel {kern}, "
          f"OpenBLAS kernels {core}; median ms; int8 peak {peak:.0f} GOP/s "
          f"({instruction or 'none'} on {a.threads} threads, measured by bench/peak)")
    print(f"{'layer':24} {'tg f32':>9} {'tg int8':>9} {'torch q':>9} {'f32/int8':>9} {'torch/int8':>10}"
          f" {'GOP/s':>7} {'of peak':>7}"
          + ("   per-round ranges: f32/int8, torch/int8" if a.rounds > 1 else ""))
    with tempfile.TemporaryDirectory() as tmp:
        for i, layer in enumerate(LAYERS):
            f32, q = make_cases(tmp, i, layer)
            tfs, tqs, pts = [], [], []
            for _ in range(a.rounds):   # alternate, so a slow spell of the VM hits all three
                tfs.append(run_json([tool, "bench", "--in", f32] + common, env)["median_ms"])
                tqs.append(run_json([tool, "bench", "--in", q] + common, env)["median_ms"])
                pts.append(float("nan") if a.no_torch else run_json(
                    [sys.executable, __file__, "--torch-child", q, "--repeat", str(a.repeat),
                     "--threads", str(a.threads)])["median_ms"])
            tf, tq, pt = (statistics.median(v) for v in (tfs, tqs, pts))
            _, xs, ws, _, _ = layer
            gop = 2 * xs[0] * xs[1] * xs[2] * xs[3] * ws[1] * ws[2] * ws[3] / (tq * 1e-3) / 1e9
            line = (f"{layer[0]:24} {tf:9.2f} {tq:9.2f} {pt:9.2f} {tf / tq:9.2f} {pt / tq:10.2f}"
                    f" {gop:7.0f} {gop / peak:7.0%}")
            if a.rounds > 1:
                rf = sorted(f / q_ for f, q_ in zip(tfs, tqs))
                rt = sorted(p / q_ for p, q_ in zip(pts, tqs))
                line += f"   {rf[0]:.2f}-{rf[-1]:.2f}, {rt[0]:.2f}-{rt[-1]:.2f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
