#!/usr/bin/python3
"""Checks `tapegrad run-op` against PyTorch on one conv_transpose2d case.

    /usr/bin/python3 scripts/check_run_op.py [--tapegrad build/tools/tapegrad]

Writes case.safetensors (x, weight, bias, grad_y + the op's parameters as
metadata), runs `tapegrad run-op --in case.safetensors --out result.safetensors`
and compares y and the three gradients with torch.  Exit status 0 when they
agree.  The safetensors format is read and written with struct + json.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

ST = {torch.float32: "F32", torch.float64: "F64"}


def save(path, tensors, meta):
    header, data = {"__metadata__": meta}, b""
    for name, t in tensors.items():
        raw = t.detach().contiguous().numpy().tobytes()
        header[name] = {"dtype": ST[t.dtype], "shape": list(t.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    head = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + data)


def load(path):
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header, data = json.loads(buf[8:8 + n]), buf[8 + n:]
    dtypes = {v: k for k, v in ST.items()}
    out = {}
    for name, h in header.items():
        if name != "__metadata__":
            lo, hi = h["data_offsets"]
            t = torch.frombuffer(bytearray(data[lo:hi]), dtype=dtypes[h["dtype"]])
            out[name] = t.reshape(h["shape"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tapegrad", default=os.environ.get("TAPEGRAD", "build/tools/tapegrad"))
    args = ap.parse_args()

    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 4, requires_grad=True)
    w = torch.randn(3, 2, 3, 3, requires_grad=True)   # (C_in, C_out/groups, kH, kW)
    b = torch.randn(2, requires_grad=True)
    y = F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1)
    gy = torch.randn_like(y)
    gx, gw, gb = torch.autograd.grad(y, (x, w, b), gy)

    with tempfile.TemporaryDirectory() as d:
        case, result = os.path.join(d, "case.safetensors"), os.path.join(d, "result.safetensors")
        save(case, {"x": x, "weight": w, "bias": b, "grad_y": gy},
             {"op": "conv_transpose2d", "stride": "2,2", "padding": "1,1",
              "output_padding": "1,1"})
        if not os.access(args.tapegrad, os.X_OK):
            sys.exit("no tapegrad binary at %s (build it, or pass --tapegrad PATH)"
                     % args.tapegrad)
        run = subprocess.run([args.tapegrad, "run-op", "--in", case, "--out", result])
        if run.returncode != 0:
            print("tapegrad run-op failed with exit status %d" % run.returncode)
            return 1
        got = load(result)

    ok = True
    for name, want in (("y", y), ("grad_x", gx), ("grad_weight", gw), ("grad_bias", gb)):
        err = (got[name] - want.detach()).abs().max().item()
        agree = got[name].shape == want.shape and err <= 1e-4 * (1 + want.abs().max().item())
        ok &= agree
        print("%-12s max |tapegrad - torch| = %.3g  %s"
              % (name, err, "ok" if agree else "MISMATCH"))
    print("tapegrad agrees with torch" if ok else "tapegrad DISAGREES with torch")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
