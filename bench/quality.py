#!/usr/bin/python3
"""Sample quality per CPU-second: the DCGAN of examples/dcgan trained for the
same wall time by tapegrad (examples/dcgan) and by PyTorch
(examples/dcgan_torch.py --train: same model, init, loss, Adam, batch and
learning rate), both on --threads threads, one after the other, over several
seeds; every generator snapshot is scored by the same `tapegrad fid`
(--count generated images against Fashion-MNIST's test set, features of the
committed classifier data/fid_classifier.safetensors).

    /usr/bin/python3 bench/quality.py [--budget 170] [--seeds 0 1 2] [--threads 2]
                                      [--snapshot-every 30] [--count 10000]
                                      [--build build] [--work DIR]
                                      [--png docs/quality.png] [--markdown FILE]
    /usr/bin/python3 bench/quality.py --replot [--png docs/quality.png] [--build build]

Prints the FID of both at 60, 120 s and the budget (median over the seeds, with
min and max), the ratio tapegrad / PyTorch of the medians (target: <= 0.7 at
the budget) and the real-vs-real baseline (the first 10000 training images
against the test set), and draws the medians over seconds of training into
--png with tapegrad's plotting (tg_plot_lines_png, through ctypes).  The
medians are also written next to the picture (docs/quality.dat: seconds,
tapegrad, PyTorch, real vs real), and --replot redraws the picture from that
file alone, without training.  PyTorch runs with OMP_WAIT_POLICY=PASSIVE and
on the OpenBLAS kernels tapegrad picks.
"""
import argparse
import ctypes
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

from benchlib import ROOT, find_tool, print_table, same_blas_kernels

REPORT_AT = (60, 120)


def run(cmd, env=None, log=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"quality.py: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    if log:
        lines = (p.stdout + p.stderr).strip().splitlines()
        print(f"  {log}: {lines[-1] if lines else ''}", flush=True)
    return p.stdout + p.stderr


def train_both(a, seed, work):
    """Trains both frameworks for seed; returns {framework: {seconds: path}} and
    {framework: steps trained}."""
    out, steps = {}, {}
    tdir = os.path.join(work, f"tapegrad_{seed}")
    steps["tapegrad"] = run(
        [os.path.join(a.build, "examples", "dcgan", "dcgan"), "--out", tdir, "--overwrite",
         "--threads", str(a.threads), "--seed", str(seed), "--time-budget", str(a.budget),
         "--snapshot-every", str(a.snapshot_every), "--log-every", "1000000"],
        log=f"tapegrad seed {seed}")
    pdir = os.path.join(work, f"torch_{seed}")
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    steps["pytorch"] = run(
        ["/usr/bin/python3", os.path.join(ROOT, "examples", "dcgan_torch.py"), "--train",
         "--dir", pdir, "--threads", str(a.threads), "--seed", str(seed),
         "--time-budget", str(a.budget), "--snapshot-every", str(a.snapshot_every)],
        env=env, log=f"pytorch seed {seed}")
    for name, d in (("tapegrad", tdir), ("pytorch", pdir)):
        snaps = {}
        for f in os.listdir(d):
            m = re.fullmatch(r"generator_(\d+)s\.safetensors", f)
            if m and int(m.group(1)) < a.budget:
                snaps[int(m.group(1))] = os.path.join(d, f)
        snaps[int(a.budget)] = os.path.join(d, "generator.safetensors")
        out[name] = snaps
    for name, text in steps.items():
        m = re.search(r"stopped after (\d+) steps", text)
        steps[name] = int(m.group(1)) if m else 0
    return out, steps


def score(tool, a, paths):
    """{path: FID} for every path (and the real-vs-real baseline under "train:10000")."""
    out = run([tool, "fid", "--weights", a.weights, "--threads", str(a.threads), "--count",
               str(a.count), "test", "train:10000"] + paths)
    fids = {}
    for line in out.splitlines():
        m = re.match(r"fid (\S+) (.+) \(\d+ images\) vs ", line)
        if m:
            fids[m.group(2)] = float(m.group(1))
    missing = [p for p in paths if p not in fids]
    if missing:
        sys.exit(f"quality.py: no FID for {missing}")
    return fids


def summary(vals):
    return statistics.median(vals), min(vals), max(vals)


def dat_path(a):
    return os.path.splitext(a.png)[0] + ".dat"


def save_dat(a, title, series):
    """The plotted medians, one row per snapshot time, next to the picture."""
    names = list(series)
    times = sorted(set(t for pts in series.values() for t, _ in pts))
    cols = [dict(series[n]) for n in names]
    with open(dat_path(a), "w") as fh:
        fh.write(f"# {title}\n")
        fh.write("# seconds\t" + "\t".join(n.replace(" ", "_") for n in names) + "\n")
        for t in times:
            fh.write(f"{t}\t" + "\t".join(f"{c[t]:.4f}" if t in c else "nan" for c in cols)
                     + "\n")
    print("wrote", dat_path(a))


def load_dat(a):
    """(title, series) from the file save_dat wrote; each series keeps the
    times it has a value at."""
    path = dat_path(a)
    if not os.path.exists(path):
        sys.exit(f"quality.py: {path} not found: run the benchmark first")
    with open(path) as fh:
        lines = fh.read().splitlines()
    title = lines[0][2:]
    names = [n.replace("_", " ") for n in lines[1][2:].split("\t")[1:]]
    series = {n: [] for n in names}
    for line in lines[2:]:
        cells = line.split("\t")
        for n, v in zip(names, cells[1:]):
            if v != "nan":
                series[n].append((int(cells[0]), float(v)))
    return title, series


def plot(a, title, series):
    """The medians over time as a line chart (x: seconds; nothing before the
    first snapshot), through tg_plot_lines_png."""
    lib = None
    for cand in ("libtapegrad.so", "libtapegrad.so.0"):
        p = os.path.join(a.build, cand)
        if os.path.exists(p):
            lib = ctypes.CDLL(p)
            break
    if lib is None:
        print(f"quality.py: libtapegrad.so not found in {a.build}: no picture")
        return
    n = int(max(t for pts in series.values() for t, _ in pts)) + 1
    names, arrays = [], []
    for name, pts in series.items():
        vals = [math.nan] * n
        for (t0, v0), (t1, v1) in zip(pts, pts[1:]):   # straight lines between snapshots
            for t in range(int(t0), int(t1) + 1):
                vals[t] = v0 + (v1 - v0) * (t - t0) / (t1 - t0)
        names.append(name.encode())
        arrays.append((ctypes.c_double * n)(*vals))
    name_arr = (ctypes.c_char_p * len(names))(*names)
    val_arr = (ctypes.POINTER(ctypes.c_double) * len(arrays))(
        *[ctypes.cast(x, ctypes.POINTER(ctypes.c_double)) for x in arrays])
    rc = lib.tg_plot_lines_png(a.png.encode(), title.encode(), b"seconds of training",
                               len(names), name_arr, val_arr, n)
    if rc < 0:
        sys.exit(f"quality.py: writing {a.png} failed ({rc})")
    print("wrote", a.png)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", type=float, default=170.0)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--snapshot-every", type=float, default=30.0)
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--weights", default=os.path.join(ROOT, "data", "fid_classifier.safetensors"))
    ap.add_argument("--work", default=None, help="keep the runs here (default: a temp dir)")
    ap.add_argument("--png", default=os.path.join(ROOT, "docs", "quality.png"))
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--replot", action="store_true",
                    help="only redraw --png from the .dat beside it (no training)")
    a = ap.parse_args()
    if a.replot:
        plot(a, *load_dat(a))
        return
    tool = find_tool(a.build, "build first (ninja -C build)")
    core = same_blas_kernels(tool)
    with tempfile.TemporaryDirectory() as tmp:
        work = a.work or tmp
        os.makedirs(work, exist_ok=True)
        runs, steps = [], []
        for seed in a.seeds:
            r, n = train_both(a, seed, work)
            runs.append(r)
            steps.append(n)
        paths = [p for r in runs for snaps in r.values() for p in snaps.values()]
        fids = score(tool, a, paths)
    baseline = fids["train:10000"]
    times = sorted(set(t for r in runs for snaps in r.values() for t in snaps))
    times = [t for t in times if all(t in snaps for r in runs for snaps in r.values())]
    med = {fw: [] for fw in ("tapegrad", "pytorch")}
    lines = [f"| seconds | tapegrad FID (median [min, max]) | PyTorch FID (median [min, max]) "
             f"| tapegrad / PyTorch |", "|---:|---:|---:|---:|"]
    for t in times:
        cells = []
        for fw in ("tapegrad", "pytorch"):
            m, lo, hi = summary([fids[r[fw][t]] for r in runs])
            med[fw].append((t, m))
            cells.append((m, lo, hi))
        if t in REPORT_AT or t == int(a.budget):
            (mt, lt, ht), (mp, lp, hp) = cells
            lines.append(f"| {t} | {mt:.1f} [{lt:.1f}, {ht:.1f}] | {mp:.1f} [{lp:.1f}, {hp:.1f}] "
                         f"| {mt / mp:.2f} |")
    print(f"\nDCGAN on Fashion-MNIST, {a.threads} threads, budget {a.budget:.0f} s, seeds "
          f"{' '.join(map(str, a.seeds))}; FID of {a.count} samples vs the test set "
          f"(real vs real, 10000 training images: {baseline:.2f}); OpenBLAS kernels {core}")
    print_table(lines, a.markdown)
    for r, n, seed in zip(runs, steps, a.seeds):
        print(f"seed {seed}: " + "  ".join(
            f"{fw} ({n[fw]} steps) " + " ".join(f"{t}s={fids[r[fw][t]]:.1f}" for t in times)
            for fw in ("tapegrad", "pytorch")))
    title = (f"FID (lower is better) by second of training, {a.threads} threads, "
             f"median of {len(a.seeds)} seeds")
    series = {"tapegrad": med["tapegrad"], "PyTorch": med["pytorch"],
              "real vs real": [(times[0], baseline), (times[-1], baseline)]}
    save_dat(a, title, series)
    plot(a, title, series)


if __name__ == "__main__":
    main()
