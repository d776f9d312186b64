#!/usr/bin/env python3
"""Data-parallel DCGAN steps (bench/ddp_step) for 1 and 2 ranks, one thread
each, side by side in one run: images/s, and the all-reduce time per step
with and without overlap.  Without overlap every bucket is reduced after
backward, so the time inside tg_ddp_finish is the whole reduction; with
overlap it is the part not hidden behind backward.  Every run but the last
is the default tg_ddp_new_module, which also copies rank 0's BatchNorm
buffers to every rank in tg_ddp_finish; the last turns that copy off.
With --compress bf16 (or f16) the two-rank runs with the buffers' copy
turned off are repeated with the gradients all-reduced in that dtype
(tg_ddp_opts.compress), after backward and overlapped.

    python3 bench/ddp.py [--build build] [--batch 32] [--steps 10]
                         [--compress bf16|f16]

Prints a Markdown table (docs/distributed.md keeps the last one)."""
import argparse
import json
import subprocess
import sys


def run(build, ranks, extra, batch, steps):
    cmd = ["mpirun", "-np", str(ranks), "--allow-run-as-root", "--oversubscribe",
           f"{build}/bench/ddp_step", "--batch", str(batch), "--steps", str(steps),
           "--threads", "1"] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--compress", choices=["bf16", "f16"])
    a = ap.parse_args()
    configs = [
        (1, [], "1 rank"),
        (2, ["--no-overlap"], "2 ranks, reduce after backward"),
        (2, [], "2 ranks, overlap, 25 MB buckets"),
        (2, ["--bucket-mb", "0.5"], "2 ranks, overlap, 0.5 MB buckets"),
        (2, ["--no-broadcast-buffers"], "2 ranks, overlap, 25 MB buckets, buffers not broadcast"),
    ]
    if a.compress:
        nb = ["--no-broadcast-buffers"]
        configs += [
            (2, nb + ["--no-overlap"], "2 ranks, reduce after backward, buffers not broadcast"),
            (2, nb + ["--no-overlap", "--compress", a.compress],
             f"2 ranks, reduce after backward, buffers not broadcast, {a.compress}"),
            (2, nb + ["--compress", a.compress],
             f"2 ranks, overlap, 25 MB buckets, buffers not broadcast, {a.compress}"),
        ]
    rows = [(label, run(a.build, r, extra, a.batch, a.steps)) for r, extra, label in configs]
    print(f"batch {a.batch} per rank, {a.steps} timed steps, 1 thread per rank; "
          f"gradient bytes per step {rows[0][1]['grad_bytes_per_step']}")
    print()
    print("| run | images/s | step ms | in tg_ddp_finish, ms/step | buckets (G, D) "
          "| bytes sent per step |")
    print("|---|---|---|---|---|---|")
    for label, r in rows:
        print(f"| {label} | {r['images_per_s']:.1f} | {r['step_ms']:.0f} | "
              f"{r['finish_ms_per_step']:.1f} | {r['buckets'][0]}, {r['buckets'][1]} "
              f"| {r['grad_bytes_per_step']} |")
    full = rows[1][1]["finish_ms_per_step"]
    for label, r in rows[2:4]:
        hidden = full - r["finish_ms_per_step"]
        print(f"\n{label}: {hidden:.1f} of {full:.1f} ms of all-reduce per step hidden "
              f"behind backward ({100 * hidden / full if full > 0 else 0:.0f}%)", end="")
    print()


if __name__ == "__main__":
    sys.exit(main())
