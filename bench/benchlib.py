"""Helpers shared by the bench/*.py scripts: where the tree and the tapegrad
tool are, running a child that prints JSON, timing our bench tool against
PyTorch case by case, printing a markdown table.
Importing this module also puts scripts/ on sys.path (for stfile)."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))


def run_json(cmd, env=None):
    """Runs cmd (raising if it fails) and parses its last line of stdout as JSON."""
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def find_tool(build, hint):
    """The path of tools/tapegrad in the build folder; exits with
    "<script>: <path> not found: <hint>" if it is missing."""
    tool = os.path.join(build, "tools", "tapegrad")
    if not os.path.exists(tool):
        sys.exit(f"{os.path.basename(sys.argv[0])}: {tool} not found: {hint}")
    return tool


def same_blas_kernels(tool):
    """Runs every child of this script, tapegrad's and PyTorch's, on the
    OpenBLAS kernels that tapegrad picks on this CPU (`tapegrad --version`;
    src/core/blas.c replaces OpenBLAS's SSE3 fallback on a CPU it does not
    know), through OPENBLAS_CORETYPE, unless that is set already.  PyTorch's
    Linear and ConvTranspose GEMMs run in Debian's OpenBLAS too, so without
    this the peer would run them on the slow fallback.  Returns the name."""
    if "OPENBLAS_CORETYPE" not in os.environ:
        out = subprocess.run([tool, "--version"], check=True, capture_output=True,
                             text=True).stdout
        m = re.search(r"OpenBLAS kernels: (\w+)", out)
        if m:
            os.environ["OPENBLAS_CORETYPE"] = m.group(1)
    return os.environ.get("OPENBLAS_CORETYPE", "unknown")


def torch_threads(torch, n):
    """In a PyTorch child: n threads for torch's own kernels
    (torch.set_num_threads) and for the OpenBLAS that torch calls for its
    GEMMs and LAPACK, which torch.set_num_threads leaves at its default
    (every core), through openblas_set_num_threads of the library loaded in
    this process.  Returns OpenBLAS's thread count after (None without
    OpenBLAS)."""
    import ctypes
    torch.set_num_threads(n)
    with open("/proc/self/maps") as f:
        libs = sorted({ln.split()[-1] for ln in f if "libopenblas" in ln})
    got = None
    for lib in libs:
        so = ctypes.CDLL(lib)
        so.openblas_set_num_threads(ctypes.c_int(n))
        got = so.openblas_get_num_threads()
    return got


def print_table(lines, markdown=None):
    """Prints the markdown table lines after a blank line; also writes them to
    the file markdown when given."""
    table = "\n".join(lines)
    print()
    print(table)
    if markdown:
        with open(markdown, "w") as f:
            f.write(table + "\n")


def add_pair_args(ap):
    """The options of a script that times its tool against PyTorch case by
    case (bench/pool.py, bench/indexing.py): --build, --threads, --repeat,
    --rounds, --only, --markdown, and the hidden --torch-child."""
    ap.add_argument("--build", default=os.path.join(ROOT, "build-rel"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default=None, help="substring of case names to run")
    ap.add_argument("--markdown", default=None, help="also write the table to this file")
    ap.add_argument("--torch-child", action="store_true", help=argparse.SUPPRESS)


def alternate(tcmd, ocmd, rounds):
    """Runs PyTorch's child tcmd and ours ocmd `rounds` times each, each
    side first in turn, both printing {"median_ms": ...}; returns the
    medians (PyTorch's ms, ours, PyTorch / ours) and the range of the
    per-round ratios."""
    tms, oms = [], []
    for r in range(rounds):
        for cmd, out in ((tcmd, tms), (ocmd, oms))[:: 1 if r % 2 == 0 else -1]:
            out.append(run_json(cmd)["median_ms"])
    ratios = [t / o for t, o in zip(tms, oms)]
    return (statistics.median(tms), statistics.median(oms), statistics.median(ratios),
            min(ratios), max(ratios))


def pair_binary(a, name):
    """Our side of a pair script (bench/pool.py, bench/indexing.py):
    bench/<name> in a.build, exiting with the target to build when it is
    missing; PyTorch's children get OMP_WAIT_POLICY=passive unless set."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    ours = os.path.join(a.build, "bench", name)
    if not os.path.exists(ours):
        sys.exit(f"{name}.py: {ours} not found: build it (ninja -C {a.build} bench/{name})")
    return ours


def time_pair(a, script, ours, args):
    """alternate() of the case args (plus --threads and --repeat) run by
    script's --torch-child and by ours, a.rounds times."""
    args = args + ["--threads", str(a.threads), "--repeat", str(a.repeat)]
    tcmd = [sys.executable, os.path.abspath(script), "--torch-child"] + args
    return alternate(tcmd, [ours] + args, a.rounds)


def torch_time(once, repeat, extra=None):
    """In a PyTorch child: calls once() three times as warmup, then times
    `repeat` calls and prints {"tool": "torch", "median_ms": M} as the JSON
    line the scripts read, with the fields of extra() (when given) after."""
    import time
    for _ in range(3):
        once()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        once()
        times.append((time.perf_counter() - t0) * 1e3)
    out = {"tool": "torch", "median_ms": statistics.median(times)}
    if extra:
        out.update(extra())
    print(json.dumps(out))


TORCH_DTYPES = {"f32": "float32", "f64": "float64", "bf16": "bfloat16", "f16": "float16"}


def torch_fwd_bwd_child(a, make_fns):
    """The PyTorch child of fwd_bwd_main's scripts: x (N, C) (or (N, C, d1,
    ...)) U[-4, 4) of
    a.dtype, then make_fns(torch, n, c, dtype, g) (g the generator, for any
    more draws) gives the ops by name; a.op's is timed with torch_time,
    forward alone or, with a.backward, with a backward from a fixed U[-1, 1)
    grad_y of the output's shape and x.grad released after each pass."""
    import torch
    torch_threads(torch, a.threads)
    dims = [int(v) for v in a.shape.split(",")]   # (N, C) or (N, C, d1, ...)
    n, c = dims[0], dims[1]
    dtype = getattr(torch, TORCH_DTYPES[a.dtype])
    g = torch.Generator().manual_seed(1)
    x = ((torch.rand(*dims, generator=g) * 8 - 4)).to(dtype)
    fn = make_fns(torch, n, c, dtype, g)[a.op]
    gy = None
    if a.backward:
        gy = (torch.rand(fn(x).shape, generator=g) * 2 - 1).to(dtype)
        x.requires_grad_(True)

    def once():
        y = fn(x)
        if a.backward:
            y.backward(gy)
            x.grad = None
    torch_time(once, a.repeat)


def fwd_bwd_main(script, name, cases, torch_child):
    """The main of a script whose cases (name, op, dtype, (N, C)) each run
    forward alone and forward + backward, tapegrad's bench/<name> against
    script's --torch-child (bench/rows.py, bench/pointwise.py); torch_child(a)
    times one case in PyTorch."""
    ap = argparse.ArgumentParser()
    add_pair_args(ap)
    for opt in ("--op", "--dtype", "--shape"):
        ap.add_argument(opt, help=argparse.SUPPRESS)
    ap.add_argument("--backward", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_child:
        return torch_child(a)
    ours = pair_binary(a, name)
    rows = []
    for c in cases:
        if a.only and a.only not in c[0]:
            continue
        shape = "x".join(map(str, c[3]))
        for bwd in (False, True):
            args = ["--op", c[1], "--dtype", c[2], "--shape", ",".join(map(str, c[3]))]
            tm, om, rm, lo, hi = time_pair(a, script, ours, args + (["--backward"] if bwd else []))
            mode = "fwd+bwd" if bwd else "fwd"
            rows.append((c[0], c[2], shape, mode, tm, om, rm, lo, hi))
            print(f"{c[0]:14s} {c[2]:4s} {shape:10s} {mode:7s} torch {tm:8.3f} ms  "
                  f"tapegrad {om:8.3f} ms  torch/tapegrad {rm:5.2f}x (rounds {lo:.2f}-{hi:.2f})",
                  flush=True)
    lines = [f"| case | dtype | x | pass | PyTorch ms | tapegrad ms | PyTorch / tapegrad "
             f"(range over {a.rounds} rounds) |",
             "| --- | --- | --- | --- | ---: | ---: | ---: |"]
    for cname, dt, shape, mode, tm, om, rm, lo, hi in rows:
        lines.append(f"| {cname} | {dt} | {shape} | {mode} | {tm:.3f} | {om:.3f} | {rm:.2f}x "
                     f"({lo:.2f}-{hi:.2f}) |")
    print_table(lines, a.markdown)
