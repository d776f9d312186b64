"""Helpers shared by the bench/*.py scripts: where the tree and the tapegrad
tool are, running a child that prints JSON, printing a markdown table.
Importing this module also puts scripts/ on sys.path (for stfile)."""
import json
import os
import re
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
