"""Reading and writing safetensors files with torch tensors, for the project's
scripts (goldens, benchmarks, interchange checks).  Written by hand with
struct + json, so the `safetensors` package is not needed.

    write_safetensors(path, [("x", tensor), ...], {"key": "value"})
    tensors, metadata = read_safetensors(path)   # dict name -> tensor, dict
"""
import json
import struct

import torch

ST_NAMES = {torch.float64: "F64", torch.float32: "F32",
            torch.float16: "F16", torch.bfloat16: "BF16",
            torch.int8: "I8", torch.uint8: "U8", torch.int32: "I32", torch.int64: "I64"}
FROM_ST = {v: k for k, v in ST_NAMES.items()}
# Same-size integer dtypes used to get at the raw bytes (numpy has no bf16).
RAW = {torch.float64: torch.int64, torch.float32: torch.int32,
       torch.float16: torch.int16, torch.bfloat16: torch.int16,
       torch.int8: torch.int8, torch.uint8: torch.uint8,
       torch.int32: torch.int32, torch.int64: torch.int64}


def tensor_bytes(t):
    t = t.detach().contiguous()
    raw = t.view(RAW[t.dtype]).numpy()
    return raw.astype(raw.dtype.newbyteorder("<")).tobytes()


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, tensor) in file order, or a dict;
    metadata: dict str -> str."""
    if isinstance(tensors, dict):
        tensors = list(tensors.items())
    header, blobs, offset = {}, [], 0
    for name, t in tensors:
        data = tensor_bytes(t)
        header[name] = {"dtype": ST_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """Returns (dict name -> tensor in file order, metadata dict)."""
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = buf[8 + n:]
    out = {}
    for name, e in header.items():
        dt = FROM_ST[e["dtype"]]
        b, end = e["data_offsets"]
        raw = torch.frombuffer(bytearray(data[b:end]), dtype=RAW[dt]) if end > b else \
            torch.empty(0, dtype=RAW[dt])
        out[name] = raw.view(dt).reshape(e["shape"]).clone()
    return out, meta
