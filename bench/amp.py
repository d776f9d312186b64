#!/usr/bin/python3
"""Mixed precision, side by side in one run: ConvTranspose2d forward+backward
(DCGAN layer 3: B=64, 256->128, 8x8->16x16, K=4, s=2, p=1) with x and weight
in f32, bf16 and f16, plus the autocast reality (x bf16, weight an f32 master:
ConvTranspose is PROMOTE, so it runs in f32).  Prints median time, peak RSS,
the bytes of the activations (x and y) and each ratio against f32.

    /usr/bin/python3 bench/amp.py [--build build] [--threads 2] [--repeat 10]
                                  [--markdown FILE]

Each measurement runs in its own `tapegrad bench` process, so peak RSS is that
case's alone.  Half dtypes compute in f32 (converted buffers, sgemm) and round
once, so their time includes the conversions; targets of issue 5: time <=
1.15x f32, activations <= 0.6x.  No assertions here: it reports.
"""
import argparse
import os
import tempfile

from benchlib import ROOT, find_tool, print_table, run_json

X_SHAPE, W_SHAPE = (64, 256, 8, 8), (256, 128, 4, 4)
Y_SHAPE = (64, 128, 16, 16)
# label, x dtype, weight dtype
VARIANTS = [("f32", "f32", "f32"), ("bf16", "bf16", "bf16"), ("f16", "f16", "f16"),
            ("bf16 x + f32 w (autocast)", "bf16", "f32")]
SIZES = {"f32": 4, "f64": 8, "bf16": 2, "f16": 2}


def numel(shape):
    n = 1
    for v in shape:
        n *= v
    return n


def write_case(path, xdt, wdt):
    import torch
    from stfile import write_safetensors
    dts = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(*X_SHAPE, generator=gen).to(dts[xdt])
    w = (torch.randn(*W_SHAPE, generator=gen) * 0.05).to(dts[wdt])
    meta = {"op": "conv_transpose2d", "stride": "2", "padding": "1", "output_padding": "0",
            "dilation": "1", "groups": "1"}
    write_safetensors(path, {"x": x, "weight": w}, meta)


def run_tool_json(cmd):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.path.dirname(os.path.dirname(cmd[0])) + ":" + env.get("LD_LIBRARY_PATH", "")
    return run_json(cmd, env)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--markdown", default=None, help="also write the table to this file")
    a = ap.parse_args()
    tool = find_tool(a.build, f"build first (meson setup {a.build} && ninja -C {a.build})")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, xdt, wdt in VARIANTS:
            path = os.path.join(tmp, f"{xdt}_{wdt}.safetensors")
            write_case(path, xdt, wdt)
            r = run_tool_json([tool, "bench", "--in", path, "--backward", "--threads", str(a.threads),
                          "--repeat", str(a.repeat)])
            ydt = xdt if xdt == wdt else "f32"
            # Activations of the layer: its input x and its output y (and their
            # gradients, same sizes and dtypes).
            act_mb = (numel(X_SHAPE) * SIZES[xdt] + numel(Y_SHAPE) * SIZES[ydt]) / 2**20
            rows.append((label, ydt, r["median_ms"], r["peak_rss_mb"], act_mb))
            print(f"{label:28s} y {ydt:5s} {r['median_ms']:9.2f} ms  peak RSS {r['peak_rss_mb']:7.1f} MB"
                  f"  activations {act_mb:6.2f} MB", flush=True)
    base = rows[0]
    lines = ["| ConvTranspose2d fwd+bwd | y dtype | median ms | time / f32 | peak RSS MB | RSS / f32 "
             "| activations MB | activations / f32 |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for label, ydt, ms, rss, act in rows:
        lines.append(f"| {label} | {ydt} | {ms:.2f} | {ms / base[2]:.2f}x | {rss:.0f} | "
                     f"{rss / base[3]:.2f}x | {act:.2f} | {act / base[4]:.2f}x |")
    print_table(lines, a.markdown)


if __name__ == "__main__":
    main()
