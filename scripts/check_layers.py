#!/usr/bin/env python3
"""Checks the library's layering: no file includes a header of a layer above
its own, and no object file calls (or reads) a symbol defined in a layer
above its own.

    python3 scripts/check_layers.py [BUILD_DIR]

The layers, lowest first (a layer may use its own and every lower one):
"""
import os
import re
import subprocess
import sys

# Folder under src/ -> rank.  Folders of one rank may use each other.
LAYERS = [
    ("core",),       # dtypes, storage, tensors, threads, BLAS glue, errors
    ("autograd",),   # the tape: nodes, op ctx, grad mode, autocast state
    ("ops",),        # registry, dispatch, one file per op family
    ("engine",),     # backward engine and gradcheck: their arithmetic is ops
    ("io", "data"),  # files (safetensors, JSON, PNG, plots) and data sets
    ("amp",),        # the gradient scaler
    ("nn",),         # modules, optimizers, checkpoints
    ("metrics",),    # sample quality: Frechet distance, the FID feature network
    ("quant",),      # int8 kernels, quantized modules
    ("onnx", "dist"),  # export of modules to ONNX; data-parallel training
]
RANK = {d: r for r, ds in enumerate(LAYERS) for d in ds}
__doc__ += "".join(f"  {r}: {', '.join(ds)}\n" for r, ds in enumerate(LAYERS))

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path):
    """The layer folder of a path under src/ ('core' for src/core/x.c)."""
    rel = os.path.relpath(path, SRC)
    top = rel.split(os.sep)[0]
    if top not in RANK:
        raise SystemExit(f"check_layers: {rel} is in no layer: add its folder to LAYERS")
    return top


def resolve(inc, here):
    for base in (os.path.dirname(here), SRC):
        p = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(p):
            return p
    return None  # a public header (include/tapegrad) or a system one


def check_includes():
    bad = []
    for dirpath, _, names in os.walk(SRC):
        for n in names:
            if not n.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, n)
            mine = RANK[layer_of(path)]
            for inc in INCLUDE_RE.findall(open(path, encoding="utf-8").read()):
                target = resolve(inc, path)
                if target and target.startswith(SRC + os.sep) and RANK[layer_of(target)] > mine:
                    bad.append(f"{os.path.relpath(path, ROOT)} includes {inc} "
                               f"({layer_of(target)} is above {layer_of(path)})")
    return bad


def member_layer(member):
    """src_core_tensor.c.o -> core (meson names objects by their path)."""
    m = re.match(r"src_([a-z]+)_", member)
    return m.group(1) if m else None


def check_symbols(build):
    lib = os.path.join(build, "libtapegrad.a")
    if not os.path.isfile(lib):
        raise SystemExit(f"check_layers: {lib} not found: build first")
    out = subprocess.run(["nm", "-A", lib], check=True, capture_output=True, text=True).stdout
    defined, used = {}, []
    for line in out.splitlines():
        parts = line.rsplit(" ", 2)
        if len(parts) < 2:
            continue
        where, sym = parts[0], parts[-1]
        kind = parts[-2] if len(parts) == 3 else "U"
        member = os.path.basename(where.split(":")[1] if where.count(":") >= 2 else where)
        layer = member_layer(member)
        if layer is None:
            continue
        if kind == "U" or line.split()[-2] == "U":
            used.append((member, layer, sym))
        elif kind.isupper():
            defined[sym] = layer
    bad = []
    for member, layer, sym in used:
        owner = defined.get(sym)
        if owner and RANK[owner] > RANK[layer]:
            bad.append(f"{member} uses {sym} ({owner} is above {layer})")
    return bad


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
    bad = check_includes() + check_symbols(build)
    for b in bad:
        print("layering:", b)
    print(f"check_layers: {len(bad)} upward uses "
          f"({' < '.join('/'.join(ds) for ds in LAYERS)})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
