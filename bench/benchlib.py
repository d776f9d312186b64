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
