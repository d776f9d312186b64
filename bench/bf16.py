#!/usr/bin/python3
"""bf16 that is faster, in one run: the DCGAN step (bench/dcgan_step) in f32,
under --amp bf16 and --amp f16, beside PyTorch's step in f32 and under CPU
autocast bf16 (bench/dcgan_step.py's worker); one ConvTranspose2d DCGAN layer
forward+backward in f32, bf16 and f16 (bench/amp.py's layer, `tapegrad
bench`); and the GFLOP/s of each GEMM kernel on one core next to its
instruction's peak on that core, measured (bench/gemm_bf16, bench/peak.h).
Every measurement is its own subprocess; the variants alternate within each
of --rounds rounds, each first in turn, with OMP_WAIT_POLICY=PASSIVE.
Targets (reported, not asserted), with AVX-512 BF16: step >= 1.6x f32's
images/s, layer >= 1.8x f32's speed, step >= 3.5x PyTorch's bf16 step.

    /usr/bin/python3 bench/bf16.py --build build-rel [--threads 2] [--rounds 2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from benchlib import HERE, find_tool, print_table, run_json, same_blas_kernels
import amp as amp_layer

STEP_VARIANTS = [("tapegrad f32", "ours", None), ("tapegrad bf16", "ours", "bf16"),
                 ("tapegrad f16", "ours", "f16"), ("pytorch f32", "torch", None),
                 ("pytorch bf16 autocast", "torch", "bf16")]
LAYER_DTYPES = ["f32", "bf16", "f16"]


def rotate(seq, r):
    return seq[r % len(seq):] + seq[:r % len(seq)]


def step_cmd(a, side, dt):
    common = ["--batch", str(a.batch), "--threads", str(a.threads), "--steps", str(a.steps),
              "--warmup", str(a.warmup)]
    if side == "ours":
        return [os.path.join(a.build, "bench", "dcgan_step")] + common + (["--amp", dt] if dt else [])
    return ([sys.executable, os.path.join(HERE, "dcgan_step.py"), "--worker", "torch"] + common +
            (["--amp", dt] if dt else []))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=3, help="each step run times 2N steps")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=10, help="layer repeats per run")
    ap.add_argument("--markdown", default=None, help="also write the tables to this file")
    a = ap.parse_args()
    tool = find_tool(a.build, f"build first (meson setup {a.build} && ninja -C {a.build})")
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    version = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout.strip()
    print(version, flush=True)
    print(f"OpenBLAS kernels, both sides: {same_blas_kernels(tool)}", flush=True)
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")

    steps = {label: [] for label, _, _ in STEP_VARIANTS}
    layer = {dt: [] for dt in LAYER_DTYPES}
    with tempfile.TemporaryDirectory() as tmp:
        cases = {}
        for dt in LAYER_DTYPES:
            cases[dt] = os.path.join(tmp, f"{dt}.safetensors")
            amp_layer.write_case(cases[dt], dt, dt)
        for r in range(a.rounds):
            for label, side, dt in rotate(STEP_VARIANTS, r):
                j = run_json(step_cmd(a, side, dt), env)
                steps[label].append(j["images_per_s"])
                print(f"round {r + 1} step  {label:22s} {j['images_per_s']:8.1f} images/s",
                      flush=True)
            for dt in rotate(LAYER_DTYPES, r):
                j = run_json([tool, "bench", "--in", cases[dt], "--backward", "--threads",
                              str(a.threads), "--repeat", str(a.repeat)], env)
                layer[dt].append(j["median_ms"])
                print(f"round {r + 1} layer {dt:5s} {j['median_ms']:8.2f} ms", flush=True)

    med = {k: statistics.median(v) for k, v in steps.items()}
    f32 = med["tapegrad f32"]
    lines = ["| DCGAN step (batch %d, %d threads) | images/s | vs tapegrad f32 | within rounds |"
             % (a.batch, a.threads), "| --- | ---: | ---: | ---: |"]
    for label, v in steps.items():
        rr = sorted(x / y for x, y in zip(v, steps["tapegrad f32"]))
        lines.append(f"| {label} | {med[label]:.1f} | {med[label] / f32:.2f}x | "
                     f"{statistics.median(rr):.2f}x ({rr[0]:.2f}-{rr[-1]:.2f}) |")
    lm = {k: statistics.median(v) for k, v in layer.items()}
    lines += ["", "| ConvTranspose2d 256->128 8x8->16x16 fwd+bwd | median ms | speed vs f32 |",
              "| --- | ---: | ---: |"]
    for dt in LAYER_DTYPES:
        lines.append(f"| {dt} | {lm[dt]:.2f} | {lm['f32'] / lm[dt]:.2f}x |")
    gemm = [json.loads(line) for line in subprocess.run(
        [os.path.join(a.build, "bench", "gemm_bf16")], check=True, capture_output=True,
        text=True).stdout.splitlines()]
    lines += ["", "| GEMM on one core (m, n, k) | kernel | instruction | GFLOP/s | peak | of peak |",
              "| --- | --- | --- | ---: | ---: | ---: |"]
    for g in gemm:
        lines.append(f"| {g['shape']} ({g['m']}, {g['n']}, {g['k']}) | {g['kernel']} | "
                     f"{g['instruction']} | {g['gflops']:.1f} | {g['peak_gflops']:.1f}"
                     f"{' (clock / 16)' if g.get('peak_derived') else ''} | "
                     f"{g['gflops'] / g['peak_gflops']:.0%} |")
    print()
    print_table(lines, a.markdown)
    bf = med["tapegrad bf16"]
    print(f"\ntargets: step bf16/f32 {bf / f32:.2f}x (>= 1.6x), layer bf16 {lm['f32'] / lm['bf16']:.2f}x "
          f"(>= 1.8x), step vs PyTorch bf16 {bf / med['pytorch bf16 autocast']:.2f}x (>= 3.5x)")


if __name__ == "__main__":
    main()
