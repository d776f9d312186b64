#!/usr/bin/python3
"""Writes the torchvision golden file of the loader's colour, resizing and
rotating augmentation (tests/test_augment_color.c,
tests/test_augment_resize.c, tests/test_augment_rotate.c,
tests/test_augment_affine.c):
tests/golden/augment.safetensors.

Run from anywhere with the system interpreter (torch 1.13, torchvision 0.14):
    /usr/bin/python3 scripts/make_augment_goldens.py

The functional ops are applied with FIXED parameters (factors, order, crop
box), so the C tests hand the same parameters to tapegrad's internal
functions; the loader's draws of those parameters are tested apart.

ColorJitter: for k < the metadata "jit.cases", tensors jit<k>.x (C, H, W)
f32, the input; jit<k>.ops, i64, the ops applied in that order (0
F.adjust_brightness, 1 F.adjust_contrast, 2 F.adjust_saturation, 3
F.adjust_hue, as T.ColorJitter's fn_idx); jit<k>.factors, f64 (4), each
op's factor (by op id); jit<k>.y, the result.

Resized crops: for k < the metadata "rrc.cases", tensors rrc<k>.x (C, H, W),
rrc<k>.box, i64 (top, left, height, width, out_h, out_w), and rrc<k>.y =
F.resized_crop(x, top, left, height, width, [out_h, out_w], mode), mode the
metadata rrc<k>.interpolation (bilinear, nearest or bicubic; antialias left
at None, which is False on tensors in torchvision 0.14).

RandomResizedCrop.get_params' central fallback: tensor fallback.in, f64
(n, 6) rows (H, W, scale_lo, scale_hi, ratio_lo, ratio_hi) with scales that
no attempt can meet, and fallback.out, i64 (n, 4) rows (top, left, height,
width) that T.RandomResizedCrop.get_params returns for them.

Rotations: for k < the metadata "rot.cases", tensors rot<k>.x (C, H, W),
rot<k>.params, f64 (angle, fill), rot<k>.fills, f64 (C), the fill of
each channel, and rot<k>.y = F.rotate(x, angle, mode, fill=fills), what
T.RandomRotation(..., fill=fill) does with that angle (fills = [fill] * C)
or T.RandomRotation(..., fill=fills) (a fill per channel); mode the metadata rot<k>.interpolation (nearest or bilinear).  The
images have at most 66 pixels, so that torch builds the sampling grid with
its plain bmm loop rather than BLAS.

Affine transforms: for k < the metadata "aff.cases", tensors aff<k>.x (C, H,
W), aff<k>.params, f64 (angle, tx, ty, scale, shear_x, shear_y), aff<k>.fills,
f64 (C), and aff<k>.y = F.affine(x, angle, [tx, ty], scale, [shear_x,
shear_y], mode, fill=fills), what T.RandomAffine does when get_params
returns those (the translations are whole pixels there); mode the metadata
aff<k>.interpolation.

Rotations about a given centre and expanded: for k < the metadata
"rotx.cases", tensors rotx<k>.x (C, H, W), rotx<k>.params, f64 (angle,
center given (0 or 1), center x, center y, expand (0 or 1)), rotx<k>.fills,
f64 (C), and rotx<k>.y = F.rotate(x, angle, mode, expand, center, fills),
whose size is the expanded one with expand; mode the metadata
rotx<k>.interpolation.  All these outputs have at most 66 pixels too.

Affine transforms about a given centre: for k < the metadata "affc.cases",
tensors affc<k>.x (C, H, W), affc<k>.params, f64 (angle, tx, ty, scale,
shear_x, shear_y, center x, center y), affc<k>.fills, f64 (C), and
affc<k>.y = F.affine(x, angle, [tx, ty], scale, [shear_x, shear_y], mode,
fill=fills, center=[cx, cy]), what T.RandomAffine(..., center=[cx, cy])
does when get_params returns those; mode the metadata affc<k>.interpolation.

Negative padding: tensor negpad.x, T.ToTensor of the plain byte pattern
(3, 6, 7, seed 47) without the grey pixels; for k < the metadata
"negpad.cases", negpad<k>.padding, i64 (left, top, right, bottom), and
tensors negpad<k>.<mode> = F.pad(x, padding, fill=0.25, padding_mode=mode)
for mode constant, reflect, edge and symmetric (the padded image that
T.RandomCrop crops; negative values crop it).
"""
import os
import sys

import numpy as np
import torch
import torchvision
import torchvision.transforms as T
import torchvision.transforms.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "augment.safetensors")

OPS = [F.adjust_brightness, F.adjust_contrast, F.adjust_saturation, F.adjust_hue]


def image(c, h, w, seed, plain=False):
    """T.ToTensor of the byte pattern of scripts/make_transforms_goldens.py,
    with a few grey pixels (r = g = b) and ties of the largest channel put
    in (the cases of _rgb2hsv's masks)."""
    k = np.arange(c * h * w, dtype=np.int64)
    a = ((seed + 7 * k + k * k // 3) % 256).astype(np.uint8).reshape(c, h, w)
    if c == 3 and not plain:
        a[:, 0, 0] = 77                    # grey
        a[:, 0, 1] = 0                     # black
        a[:, 0, 2] = 255                   # white
        a[0, 1, 0], a[1, 1, 0], a[2, 1, 0] = 200, 200, 10    # r = g max
        a[0, 1, 1], a[1, 1, 1], a[2, 1, 1] = 30, 220, 220    # g = b max
        a[0, 1, 2], a[1, 1, 2], a[2, 1, 2] = 240, 5, 240     # r = b max
        a[0, 2, 0], a[1, 2, 0], a[2, 2, 0] = 10, 10, 250     # b max, r = g
    return torch.from_numpy(a).to(torch.float32).div(255)


RGB = image(3, 7, 9, 41)
GREY = image(1, 5, 6, 42)
# (input, ops in order, factors by op id)
JITTER = [
    (RGB, [0], [0.0, 1, 1, 0]),
    (RGB, [0], [0.6, 1, 1, 0]),
    (RGB, [0], [1.7, 1, 1, 0]),
    (RGB, [1], [1, 0.0, 1, 0]),
    (RGB, [1], [1, 0.45, 1, 0]),
    (RGB, [1], [1, 1.9, 1, 0]),
    (RGB, [2], [1, 1, 0.0, 0]),
    (RGB, [2], [1, 1, 0.35, 0]),
    (RGB, [2], [1, 1, 2.2, 0]),
    (RGB, [3], [1, 1, 1, -0.5]),
    (RGB, [3], [1, 1, 1, -0.27]),
    (RGB, [3], [1, 1, 1, 0.0]),
    (RGB, [3], [1, 1, 1, 0.13]),
    (RGB, [3], [1, 1, 1, 0.5]),
    (RGB, [2, 0, 3, 1], [1.3, 0.7, 1.6, 0.21]),
    (RGB, [3, 1, 0, 2], [0.55, 1.4, 0.3, -0.4]),
    (RGB, [1, 3, 2, 0], [1.8, 0.2, 1.1, 0.05]),
    (GREY, [0], [1.4, 1, 1, 0]),
    (GREY, [1], [1, 0.6, 1, 0]),
    (GREY, [2], [1, 1, 0.4, 0]),
    (GREY, [3], [1, 1, 1, 0.3]),
    (GREY, [3, 2, 1, 0], [0.8, 1.5, 0.2, -0.1]),
]
CROP_IMAGE = image(3, 10, 13, 43)
# (top, left, height, width, out_h, out_w, mode)
CROPS = [
    (1, 2, 6, 7, 8, 8, "bilinear"),       # up
    (0, 0, 10, 13, 5, 6, "bilinear"),     # the whole image, down
    (3, 4, 5, 9, 5, 9, "bilinear"),       # the same size
    (2, 1, 7, 11, 9, 4, "bilinear"),      # up and down
    (2, 1, 7, 11, 9, 4, "nearest"),
    (4, 0, 6, 13, 3, 3, "nearest"),
    (0, 3, 9, 8, 6, 11, "bicubic"),
    (5, 5, 1, 1, 4, 3, "bilinear"),       # one pixel
]
# (image, angle, fill, mode)
ROT_RGB = image(3, 7, 9, 44)
ROT_GREY = image(1, 6, 6, 45)
ROTATIONS = [
    (ROT_RGB, 30.0, 0.0, "bilinear"),
    (ROT_RGB, -45.0, 0.0, "bilinear"),
    (ROT_RGB, 90.0, 0.3, "bilinear"),
    (ROT_RGB, 137.5, 0.7, "bilinear"),
    (ROT_RGB, -12.3, 1.0, "bilinear"),
    (ROT_RGB, 0.0, 0.5, "bilinear"),
    (ROT_RGB, 30.0, 0.0, "nearest"),
    (ROT_RGB, -45.0, 0.25, "nearest"),
    (ROT_RGB, 180.0, 0.0, "nearest"),
    (ROT_RGB, 71.9, 0.6, "nearest"),
    (ROT_GREY, 17.0, 0.2, "bilinear"),
    (ROT_GREY, -100.0, 0.9, "nearest"),
    (image(3, 5, 8, 46), 250.0, 0.4, "bilinear"),
    (image(3, 5, 8, 46), 250.0, 0.4, "nearest"),
    (ROT_RGB, 33.0, [0.1, 0.5, 0.9], "bilinear"),
    (ROT_RGB, -61.0, [0.8, 0.0, 0.3], "nearest"),
]
# (image, angle, (tx, ty), scale, (shear_x, shear_y), fill, mode)
AFF_RGB = image(3, 7, 9, 48)
AFFINES = [
    (AFF_RGB, 0.0, (0, 0), 1.0, (0.0, 0.0), 0.0, "bilinear"),
    (AFF_RGB, 0.0, (2, -1), 1.0, (0.0, 0.0), 0.0, "nearest"),
    (AFF_RGB, 0.0, (-3, 2), 1.0, (0.0, 0.0), 0.5, "bilinear"),
    (AFF_RGB, 0.0, (0, 0), 1.3, (0.0, 0.0), 0.2, "bilinear"),
    (AFF_RGB, 0.0, (0, 0), 0.7, (0.0, 0.0), 0.2, "nearest"),
    (AFF_RGB, 0.0, (0, 0), 1.0, (20.0, 0.0), 0.0, "bilinear"),
    (AFF_RGB, 0.0, (0, 0), 1.0, (0.0, -15.0), 0.0, "bilinear"),
    (AFF_RGB, 0.0, (0, 0), 1.0, (-25.0, 30.0), 0.9, "nearest"),
    (AFF_RGB, 27.0, (1, 1), 0.85, (10.0, -5.0), 0.4, "bilinear"),
    (AFF_RGB, -63.5, (-2, 0), 1.6, (-33.0, 12.0), 0.1, "nearest"),
    (AFF_RGB, 140.0, (0, -2), 0.9, (44.0, 0.0), [0.1, 0.5, 0.9], "bilinear"),
    (image(1, 6, 6, 49), -20.0, (1, -1), 1.1, (5.0, 5.0), 0.3, "bilinear"),
    (image(1, 6, 6, 49), 75.0, (0, 1), 0.95, (0.0, -40.0), 0.6, "nearest"),
]
# (image, angle, (tx, ty), scale, (shear_x, shear_y), center, fill, mode)
AFFCS = [
    (AFF_RGB, 30.0, (0, 0), 1.0, (0.0, 0.0), [2, 3], 0.0, "bilinear"),
    (AFF_RGB, -45.0, (1, -1), 0.9, (10.0, 0.0), [0, 0], 0.3, "nearest"),
    (AFF_RGB, 100.0, (0, 2), 1.2, (-15.0, 20.0), [8.5, 1.25], 0.7, "bilinear"),
    (AFF_RGB, 0.0, (-2, 0), 1.4, (0.0, 0.0), [6, 5], [0.1, 0.5, 0.9], "bilinear"),
    (image(1, 6, 6, 49), 63.0, (1, 1), 0.8, (25.0, -10.0), [-1.5, 7], 0.8, "nearest"),
]
# (image, angle, center or None, expand, fill, mode)
ROTX_RGB = image(3, 4, 5, 50)
ROTXS = [
    (ROT_RGB, 30.0, [2, 3], False, 0.0, "bilinear"),
    (ROT_RGB, -45.0, [0, 0], False, 0.3, "nearest"),
    (ROT_RGB, 100.0, [8.5, 1.25], False, 0.7, "bilinear"),
    (ROTX_RGB, 30.0, None, True, 0.0, "bilinear"),
    (ROTX_RGB, 45.0, None, True, 0.2, "nearest"),
    (ROTX_RGB, 90.0, None, True, 0.5, "bilinear"),
    (ROTX_RGB, -120.0, None, True, 0.5, "bilinear"),
    (ROTX_RGB, 0.0, None, True, 0.5, "bilinear"),
    (ROTX_RGB, 20.0, [1, 3], True, [0.1, 0.5, 0.9], "bilinear"),
    (image(1, 4, 5, 51), 63.0, None, True, 0.8, "nearest"),
]
NEG_IMAGE = image(3, 6, 7, 47, plain=True)
NEG_PADDINGS = [[-2, 1, 3, -1], [2, -3, -1, 2], [-1, -1, -2, -2], [-4, 0, 3, 0]]
MODES = {"bilinear": T.InterpolationMode.BILINEAR, "nearest": T.InterpolationMode.NEAREST,
         "bicubic": T.InterpolationMode.BICUBIC}
# (H, W, scale, ratio): scales of 4 to 5 times the area never fit
FALLBACK = [
    (10, 13, (4.0, 5.0), (3 / 4, 4 / 3)),     # W / H within ratio: the whole image
    (10, 30, (4.0, 5.0), (3 / 4, 4 / 3)),     # wider: h = H, w = round(H 4/3)
    (30, 10, (4.0, 5.0), (3 / 4, 4 / 3)),     # taller: w = W, h = round(W 3/4)
    (10, 10, (4.0, 5.0), (4.0, 6.0)),         # w = W, h = round(2.5) = 2 (half to even)
    (9, 10, (4.0, 5.0), (0.2, 0.5)),          # h = H, w = round(4.5) = 4
]


def main():
    assert torchvision.__version__.startswith("0.14"), torchvision.__version__
    tensors, meta = [], {}
    for k, (x, ops, factors) in enumerate(JITTER):
        y = x.clone()
        for op in ops:
            y = OPS[op](y, factors[op])
        p = "jit%d." % k
        tensors += [(p + "x", x.contiguous()), (p + "ops", torch.tensor(ops)),
                    (p + "factors", torch.tensor(factors, dtype=torch.float64)),
                    (p + "y", y.contiguous())]
    meta["jit.cases"] = str(len(JITTER))
    for k, (top, left, h, w, oh, ow, mode) in enumerate(CROPS):
        y = F.resized_crop(CROP_IMAGE, top, left, h, w, [oh, ow], MODES[mode])
        p = "rrc%d." % k
        tensors += [(p + "x", CROP_IMAGE.contiguous()),
                    (p + "box", torch.tensor([top, left, h, w, oh, ow])),
                    (p + "y", y.contiguous())]
        meta[p + "interpolation"] = mode
    meta["rrc.cases"] = str(len(CROPS))
    rows_in, rows_out = [], []
    for hh, ww, scale, ratio in FALLBACK:
        box = T.RandomResizedCrop.get_params(torch.zeros(1, hh, ww), list(scale), list(ratio))
        rows_in.append([hh, ww, scale[0], scale[1], ratio[0], ratio[1]])
        rows_out.append(list(box))
    tensors += [("fallback.in", torch.tensor(rows_in, dtype=torch.float64)),
                ("fallback.out", torch.tensor(rows_out, dtype=torch.int64))]
    for k, (x, angle, fill, mode) in enumerate(ROTATIONS):
        assert x.shape[1] * x.shape[2] * 6 < 400
        fills = fill if isinstance(fill, list) else [fill] * x.shape[0]
        y = F.rotate(x, angle, MODES[mode], fill=fills)
        p = "rot%d." % k
        tensors += [(p + "x", x.contiguous()),
                    (p + "params", torch.tensor([angle, fills[0]], dtype=torch.float64)),
                    (p + "fills", torch.tensor(fills, dtype=torch.float64)),
                    (p + "y", y.contiguous())]
        meta[p + "interpolation"] = mode
    meta["rot.cases"] = str(len(ROTATIONS))
    for k, (x, angle, tr, scale, shear, fill, mode) in enumerate(AFFINES):
        assert x.shape[1] * x.shape[2] * 6 < 400
        fills = fill if isinstance(fill, list) else [fill] * x.shape[0]
        y = F.affine(x, angle, list(tr), scale, list(shear), MODES[mode], fill=fills)
        p = "aff%d." % k
        params = [angle, tr[0], tr[1], scale, shear[0], shear[1]]
        tensors += [(p + "x", x.contiguous()),
                    (p + "params", torch.tensor(params, dtype=torch.float64)),
                    (p + "fills", torch.tensor(fills, dtype=torch.float64)),
                    (p + "y", y.contiguous())]
        meta[p + "interpolation"] = mode
    meta["aff.cases"] = str(len(AFFINES))
    for k, (x, angle, center, expand, fill, mode) in enumerate(ROTXS):
        fills = fill if isinstance(fill, list) else [fill] * x.shape[0]
        y = F.rotate(x, angle, MODES[mode], expand, center, fills)
        assert y.shape[1] * y.shape[2] * 6 < 400, y.shape
        p = "rotx%d." % k
        cx, cy = center if center is not None else (0, 0)
        params = [angle, center is not None, cx, cy, expand]
        tensors += [(p + "x", x.contiguous()),
                    (p + "params", torch.tensor(params, dtype=torch.float64)),
                    (p + "fills", torch.tensor(fills, dtype=torch.float64)),
                    (p + "y", y.contiguous())]
        meta[p + "interpolation"] = mode
    meta["rotx.cases"] = str(len(ROTXS))
    for k, (x, angle, tr, scale, shear, center, fill, mode) in enumerate(AFFCS):
        assert x.shape[1] * x.shape[2] * 6 < 400
        fills = fill if isinstance(fill, list) else [fill] * x.shape[0]
        y = F.affine(x, angle, list(tr), scale, list(shear), MODES[mode], fill=fills,
                     center=center)
        p = "affc%d." % k
        params = [angle, tr[0], tr[1], scale, shear[0], shear[1], center[0], center[1]]
        tensors += [(p + "x", x.contiguous()),
                    (p + "params", torch.tensor(params, dtype=torch.float64)),
                    (p + "fills", torch.tensor(fills, dtype=torch.float64)),
                    (p + "y", y.contiguous())]
        meta[p + "interpolation"] = mode
    meta["affc.cases"] = str(len(AFFCS))
    tensors.append(("negpad.x", NEG_IMAGE.contiguous()))
    for k, padding in enumerate(NEG_PADDINGS):
        p = "negpad%d." % k
        tensors.append((p + "padding", torch.tensor(padding)))
        for mode in ("constant", "reflect", "edge", "symmetric"):
            y = F.pad(NEG_IMAGE, padding, fill=0.25, padding_mode=mode)
            tensors.append((p + mode, y.contiguous()))
    meta["negpad.cases"] = str(len(NEG_PADDINGS))
    write_safetensors(OUT, tensors, meta)
    print("wrote", OUT, len(tensors), "tensors")


if __name__ == "__main__":
    main()
