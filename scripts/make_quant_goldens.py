#!/usr/bin/python3
"""Writes the PyTorch golden files of tapegrad's quantized conv ops.

For every case below it writes
  tests/golden/quant/<name>.case.safetensors    x (U8), weight (I8), [bias] + metadata
  tests/golden/quant/<name>.result.safetensors  y (U8): torch's int_repr
in the format `tapegrad run-op` reads (see tools/case.h, quantized cases).
tests/test_quant.c runs every case and requires each element within 1 unit.

The reference is torch.ao.nn.quantized (torch 1.13, /usr/bin/python3):
ConvTranspose{1,2,3}d and Conv{1,2,3}d modules on the engine named per case.
torch refuses per-channel weights for transposed conv ("Per Channel
Quantization is currently disabled for transposed conv") and onednn refuses
output_padding != 0, so ConvTranspose cases use per-tensor weights (qnnpack
for output_padding); Conv cases use per-channel weights (axis 0).  Fused ReLU
is torch's quantized relu on the output (max(q, zero_point)), the same thing.

Each result also holds y_ref: the f64 reference, the float op on the
dequantized inputs rounded half to even onto the output grid.  torch is
checked against it: onednn's ConvTranspose2d gets a few isolated elements
wrong by far more than one unit (seen: 14 and 8 units, one element each in
convT2d_u8_dcgan and convT2d_u8_s3_nobias).  The result metadata
torch_outliers lists those flat indices; the test requires our y within 1 of
torch everywhere else and within 1 of y_ref everywhere.

It also writes tests/golden/quant/fake_quantize_per_channel.safetensors:
torch.fake_quantize_per_channel_affine on a 4-D f32 x for each axis, with
its output and the straight-through gradient of a random dy (see
make_fake_quant_per_channel; tests/test_fake_quant.c reads it).

Run from the repository root:
    /usr/bin/python3 scripts/make_quant_goldens.py            # everything
    /usr/bin/python3 scripts/make_quant_goldens.py fake_quantize_per_channel
"""
import os
import sys

import torch
import torch.ao.nn.quantized as nnq
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "golden", "quant")
SEED = 20240612

MODULES = {(True, 1): nnq.ConvTranspose1d, (True, 2): nnq.ConvTranspose2d,
           (True, 3): nnq.ConvTranspose3d, (False, 1): nnq.Conv1d,
           (False, 2): nnq.Conv2d, (False, 3): nnq.Conv3d}

# name, transpose, engine, B, C_in, C_out, spatial, kernel, stride, padding,
#   output_padding, dilation, groups, bias, relu
CASES = [
    ("convT2d_u8_dcgan", True, "onednn", 2, 8, 4, (4, 4), (4, 4), 2, 1, 0, 1, 1, True, False),
    ("convT2d_u8_g2_d2_relu", True, "onednn", 1, 4, 6, (5, 4), (3, 3), 1, 1, 0, 2, 2, True, True),
    ("convT2d_u8_s3_nobias", True, "onednn", 2, 3, 5, (3, 4), (2, 3), 3, 0, 0, 1, 1, False, False),
    ("convT2d_u8_outpad_qnnpack", True, "qnnpack", 1, 4, 4, (4, 5), (3, 3), 2, 1, 1, 1, 1, True, False),
    ("convT1d_u8", True, "onednn", 2, 4, 3, (7,), (3,), 2, 1, 0, 1, 1, True, False),
    ("convT3d_u8", True, "onednn", 1, 4, 4, (3, 3, 2), (2, 2, 2), 2, 0, 0, 1, 1, True, False),
    ("conv2d_u8_pc_g2", False, "onednn", 2, 4, 6, (7, 6), (3, 3), 2, 1, 0, 1, 2, True, False),
    ("conv2d_u8_pc_relu", False, "onednn", 1, 3, 5, (6, 6), (3, 2), 1, 1, 0, 2, 1, True, True),
]


def fmt(v, n):
    return ",".join(str(v) for _ in range(n)) if isinstance(v, int) else ",".join(map(str, v))


def make(case, gen):
    (name, transpose, engine, b, cin, cout, sp, k, stride, pad, opad, dil, groups, has_bias,
     relu) = case
    torch.backends.quantized.engine = engine
    n = len(sp)
    wshape = (cin, cout // groups) + k if transpose else (cout, cin // groups) + k
    w = torch.randn(wshape, generator=gen) * 0.3
    bias = torch.randn(cout, generator=gen) * 0.5 if has_bias else None
    x = torch.rand((b, cin) + sp, generator=gen) * 2.4 - 1.2
    x_scale, x_zp, y_scale, y_zp = 0.0125, 120, 0.03, 110
    xq = torch.quantize_per_tensor(x, x_scale, x_zp, torch.quint8)
    if transpose:
        w_scale = [float(w.abs().max()) / 127.0]
        wq = torch.quantize_per_tensor(w, w_scale[0], 0, torch.qint8)
    else:
        w_scale = [float(w[c].abs().max()) / 127.0 for c in range(cout)]
        wq = torch.quantize_per_channel(w, torch.tensor(w_scale, dtype=torch.double),
                                        torch.zeros(cout, dtype=torch.long), 0, torch.qint8)
    kw = dict(stride=stride, padding=pad, dilation=dil, groups=groups, bias=has_bias)
    if transpose:
        kw["output_padding"] = opad
    m = MODULES[(transpose, n)](cin, cout, k, **kw)
    m.set_weight_bias(wq, bias)
    m.scale, m.zero_point = y_scale, y_zp
    y = m(xq)
    if relu:
        y = torch.nn.functional.relu(y)
    meta = {"op": ("quantized_conv_transpose%dd" if transpose else "quantized_conv%dd") % n,
            "stride": fmt(stride, n), "padding": fmt(pad, n), "dilation": fmt(dil, n),
            "groups": str(groups), "x_scale": repr(x_scale), "x_zero_point": str(x_zp),
            "weight_scale": ",".join(repr(s) for s in w_scale), "y_scale": repr(y_scale),
            "y_zero_point": str(y_zp), "activation": "relu" if relu else "none"}
    if transpose:
        meta["output_padding"] = fmt(opad, n)
    tensors = [("x", xq.int_repr()), ("weight", wq.int_repr())]
    if has_bias:
        tensors.append(("bias", bias.float()))
    write_safetensors(os.path.join(OUT_DIR, name + ".case.safetensors"), tensors, meta)
    ref = reference(transpose, n, xq, wq, w_scale, bias, meta, relu)
    outliers = ((ref - y.int_repr().double()).abs() > 1).flatten().nonzero().flatten().tolist()
    if outliers:
        print("  torch differs from the f64 reference by > 1 unit at", outliers)
    write_safetensors(os.path.join(OUT_DIR, name + ".result.safetensors"),
                      [("y", y.int_repr()), ("y_ref", ref.to(torch.uint8))],
                      {"torch_outliers": ",".join(map(str, outliers))})


def reference(transpose, n, xq, wq, w_scale, bias, meta, relu):
    """The float op in f64 on the dequantized inputs, quantized (half to even)."""
    x = xq.dequantize().double()
    w = wq.int_repr().double()
    s = torch.tensor(w_scale, dtype=torch.double)
    w = w * (s.view(-1, *([1] * (w.dim() - 1))) if len(w_scale) > 1 else s[0])
    b = bias.double() if bias is not None else None
    ints = lambda k: [int(v) for v in meta[k].split(",")]
    kw = dict(stride=ints("stride"), padding=ints("padding"), dilation=ints("dilation"),
              groups=int(meta["groups"]))
    if transpose:
        f = [F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d][n - 1]
        y = f(x, w, b, output_padding=ints("output_padding"), **kw)
    else:
        y = [F.conv1d, F.conv2d, F.conv3d][n - 1](x, w, b, **kw)
    q = torch.round(y / float(meta["y_scale"])) + int(meta["y_zero_point"])
    q = q.clamp(int(meta["y_zero_point"]) if relu else 0, 255)
    return q


# axis, quant_min, quant_max of each fake_quantize_per_channel case; x is (2, 3, 4, 5).
FQ_CASES = [(0, 0, 255), (1, -128, 127), (2, 0, 15), (3, -8, 7), (-1, 0, 3)]
FQ_SHAPE = (2, 3, 4, 5)


def make_fake_quant_per_channel(gen):
    """One file, keys "<i>.x", "<i>.scale" (f64 holding f32 values: torch's
    scale is f32), "<i>.zero_point" (i32), "<i>.dy", "<i>.y", "<i>.dx" and
    metadata "<i>.axis", "<i>.quant_min", "<i>.quant_max".  x is built as
    (level + u - zp) * scale with u in +-[0.1, 0.4], so no element lies near a
    rounding tie (torch computes x * (1/scale) in f32, we compute x / scale in
    f64: they agree away from ties), and half of the levels sit next to
    quant_min or quant_max so both sides of the clamp and its edges appear."""
    tensors, meta = [], {"cases": str(len(FQ_CASES))}
    for i, (axis, qmin, qmax) in enumerate(FQ_CASES):
        n = FQ_SHAPE[axis]
        bshape = [1] * len(FQ_SHAPE)
        bshape[axis] = n
        scale = (torch.rand(n, generator=gen) * 0.25 + 0.05).float()
        zp = torch.randint(qmin, qmax + 1, (n,), generator=gen, dtype=torch.int32)
        uniform = torch.randint(qmin - 3, qmax + 4, FQ_SHAPE, generator=gen)
        edge = torch.tensor([qmin - 1, qmin, qmin + 1, qmax - 1, qmax, qmax + 1])
        edge = edge[torch.randint(0, 6, FQ_SHAPE, generator=gen)]
        pick = torch.rand(FQ_SHAPE, generator=gen) < 0.5
        level = torch.where(pick, edge, uniform).double()
        u = torch.rand(FQ_SHAPE, generator=gen, dtype=torch.double) * 0.3 + 0.1
        u = torch.where(torch.rand(FQ_SHAPE, generator=gen) < 0.5, -u, u)
        x = ((level + u - zp.view(bshape).double()) * scale.view(bshape).double()).float()
        x.requires_grad_(True)
        # torch wants axis >= 0; the file keeps -1 to test negative axes here
        y = torch.fake_quantize_per_channel_affine(x, scale, zp, axis % len(FQ_SHAPE), qmin, qmax)
        dy = torch.randn(FQ_SHAPE, generator=gen)
        (dx,) = torch.autograd.grad(y, x, dy)
        p = "%d." % i
        tensors += [(p + "x", x.detach()), (p + "scale", scale.double()),
                    (p + "zero_point", zp), (p + "dy", dy), (p + "y", y.detach()),
                    (p + "dx", dx)]
        meta.update({p + "axis": str(axis), p + "quant_min": str(qmin),
                     p + "quant_max": str(qmax)})
    path = os.path.join(OUT_DIR, "fake_quantize_per_channel.safetensors")
    write_safetensors(path, tensors, meta)
    print("wrote", path)


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    if sys.argv[1:] == ["fake_quantize_per_channel"]:
        make_fake_quant_per_channel(torch.Generator().manual_seed(SEED + 1))
        return
    gen = torch.Generator().manual_seed(SEED)
    make_fake_quant_per_channel(torch.Generator().manual_seed(SEED + 1))
    for case in CASES:
        try:
            make(case, gen)
            print("wrote", case[0])
        except RuntimeError as e:
            print("skipped", case[0], "-", str(e).splitlines()[0], file=sys.stderr)


if __name__ == "__main__":
    main()
