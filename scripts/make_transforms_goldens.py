#!/usr/bin/python3
"""Writes the torchvision golden file of tg_image_folder_load_ex and the
loader's augmentation (tests/test_transforms.c):
tests/golden/transforms.safetensors.

Run from anywhere with the system interpreter (torch 1.13, torchvision 0.14,
Pillow 9.4):
    /usr/bin/python3 scripts/make_transforms_goldens.py

The test writes the same images as PNGs: image (c, h, w, seed) holds byte
(seed + 7 k + k * k // 3) % 256 at position k of its (C, H, W) order.  PIL
reads them as the arrays here (Image.fromarray), so each golden is
torchvision's pipeline on the image as tg_image_folder_load reads it.

Case "case<i>", i < the metadata "cases": metadata case<i>.image (c,h,w,seed
of the PNG), case<i>.channels (1 or 3: PIL's convert("L") or "RGB"),
case<i>.resize ("s", "h,w" or "-"), case<i>.max_size ("-" or an int),
case<i>.crop ("h,w" or "-"); tensor case<i>.y, f32 (C, H', W'):
    T.Compose([T.ToTensor(), T.Resize(resize, antialias=True,
               max_size=max_size), T.CenterCrop(crop)])(image)
(steps with "-" left out).  Case "interp<i>", i < the metadata
"interp.cases": the same keys and interp<i>.interpolation ("nearest" or
"bicubic"), T.Resize(resize, interpolation, ...) (nearest with
antialias=None: torchvision 0.14 refuses antialias=True for it).

Folder "folder": metadata folder.images (the images a/0.png a/1.png b/0.png
as c,h,w,seed;...), folder.resize, folder.crop; tensors folder.rgb and
folder.grey (N, C, H', W'), the pipeline with channels 3 and 1, and
folder.sym, folder.rgb through T.Normalize((0.5,) * 3, (0.5,) * 3).

Augmentation: the image aug.image (metadata, c,h,w,seed) as T.ToTensor
makes it, tensor aug.x (C, H, W); aug.padding (l,t,r,b) and tensors
aug.pad.<mode> = torchvision's F.pad(x, padding, fill, padding_mode) for
mode constant0 (fill 0), constant (fill aug.fill), reflect and edge;
aug.norm3 = T.Normalize(aug.mean3, aug.std3)(x) and aug.norm1 =
T.Normalize(aug.mean1, aug.std1) of x's first channel (the numbers as
metadata, comma-separated).  aug.pad.symmetric: F.pad(x, padding,
padding_mode="symmetric"); aug.vflip: F.vflip(x).

pad_if_needed: for k < the metadata "ifneeded.cases", ifneeded<k>.padding
(l,t,r,b) and ifneeded<k>.crop (h,w); tensors ifneeded<k>.<mode> (mode
constant with fill aug.fill, reflect, edge, symmetric): the image
T.RandomCrop(crop, padding, pad_if_needed=True, fill, padding_mode) hands
to its get_params (padded, then padded if needed), caught there.
"""
import os
import sys

import numpy as np
import torch
import torchvision
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "transforms.safetensors")

# (image (c, h, w, seed), channels, resize, max_size, crop)
CASES = [
    ((3, 12, 17, 1), 3, 8, None, None),          # shorter side (height) down
    ((1, 20, 9, 2), 1, 6, None, None),           # shorter side (width) down
    ((3, 7, 5, 3), 3, 11, None, None),           # shorter side up
    ((1, 16, 16, 4), 1, (10, 7), None, None),    # (h, w) both down
    ((3, 9, 14, 5), 3, (4, 20), None, None),     # one down, one up
    ((1, 10, 31, 6), 1, 8, 12, None),            # max_size caps the long side
    ((3, 13, 11, 7), 3, None, None, (8, 4)),     # crop: surpluses 5 and 7
    ((1, 5, 6, 8), 1, None, None, (9, 3)),       # crop taller than the image
    ((3, 4, 5, 9), 3, None, None, (7, 8)),       # crop larger on both sides
    ((3, 15, 10, 10), 3, 7, None, (7, 7)),       # resize, then crop
    ((1, 6, 6, 11), 1, (6, 6), None, None),      # already the size
    ((3, 8, 12, 12), 3, 8, None, None),          # shorter side already s
    ((3, 9, 14, 13), 1, 5, None, (5, 5)),        # RGB read as grey, resized
    ((1, 3, 4, 14), 1, (1, 1), None, None),      # to one pixel
]
# the same with interpolation last
INTERP_CASES = [
    ((3, 12, 17, 15), 3, 8, None, None, "nearest"),           # down
    ((3, 7, 5, 16), 3, 11, None, None, "nearest"),            # up, a scale of 7/11
    ((1, 16, 16, 17), 1, (10, 7), None, None, "nearest"),     # both down
    ((1, 5, 6, 18), 1, (10, 12), None, None, "nearest"),      # twice the size
    ((3, 9, 14, 19), 3, (4, 20), None, (4, 9), "nearest"),    # down, up, crop
    ((1, 10, 31, 20), 1, 8, 12, None, "nearest"),             # max_size
    # 26 -> 22 and 39 -> 33: output 11 reads input 12 with torch's f32 scale,
    # 13 with the exact one
    ((3, 26, 39, 27), 3, (22, 33), None, None, "nearest"),
    ((3, 12, 17, 21), 3, 8, None, None, "bicubic"),           # down
    ((3, 7, 5, 22), 3, 11, None, None, "bicubic"),            # up
    ((1, 16, 16, 23), 1, (10, 7), None, None, "bicubic"),     # both down
    ((3, 9, 14, 24), 3, (4, 20), None, None, "bicubic"),      # one down, one up
    ((3, 15, 10, 25), 1, 7, None, (7, 7), "bicubic"),         # grey, then crop
    ((1, 6, 6, 26), 1, (6, 6), None, None, "bicubic"),        # already the size
]
MODES = {"bilinear": T.InterpolationMode.BILINEAR, "nearest": T.InterpolationMode.NEAREST,
         "bicubic": T.InterpolationMode.BICUBIC}
FOLDER = [(3, 12, 17, 21), (3, 20, 9, 22), (1, 7, 5, 23)]
FOLDER_RESIZE, FOLDER_CROP = 8, (8, 8)
AUG_IMAGE = (3, 6, 7, 31)
AUG_PADDING = [2, 1, 3, 2]
AUG_FILL = 0.25
MEAN3, STD3 = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
MEAN1, STD1 = [0.5], [0.3]
# pad_if_needed: (padding, crop) on AUG_IMAGE (6 x 7): both sides short,
# then the width alone
IFNEEDED = [([1, 0, 0, 1], (10, 11)), ([0, 2, 1, 0], (5, 12))]


def image_bytes(c, h, w, seed):
    k = np.arange(c * h * w, dtype=np.int64)
    return ((seed + 7 * k + k * k // 3) % 256).astype(np.uint8).reshape(c, h, w)


def pil_image(c, h, w, seed, channels):
    a = image_bytes(c, h, w, seed)
    img = Image.fromarray(a[0]) if c == 1 else Image.fromarray(a.transpose(1, 2, 0))
    return img.convert("L" if channels == 1 else "RGB")


def pipeline(resize, max_size, crop, interpolation="bilinear"):
    steps = [T.ToTensor()]
    if resize is not None:
        size = resize if isinstance(resize, int) else list(resize)
        aa = None if interpolation == "nearest" else True
        steps.append(T.Resize(size, MODES[interpolation], antialias=aa, max_size=max_size))
    if crop is not None:
        steps.append(T.CenterCrop(list(crop)))
    return T.Compose(steps)


def padded_for_crop(x, padding, crop, fill, mode):
    """The image T.RandomCrop(crop, padding, pad_if_needed=True, ...) crops:
    its get_params is caught and handed the window of the whole image."""
    seen = []

    def params(img, output_size):
        seen.append(img)
        return 0, 0, img.shape[-2], img.shape[-1]

    t = T.RandomCrop(list(crop), padding, pad_if_needed=True, fill=fill, padding_mode=mode)
    t.get_params = params
    t(x)
    return seen[0]


def text(v):
    if v is None:
        return "-"
    if isinstance(v, int):
        return str(v)
    return ",".join(str(i) for i in v)


def main():
    assert torchvision.__version__.startswith("0.14"), torchvision.__version__
    tensors, meta = [], {}
    for prefix, cases in (("case", CASES), ("interp", INTERP_CASES)):
        for i, case in enumerate(cases):
            image, channels, resize, max_size, crop = case[:5]
            interpolation = case[5] if len(case) > 5 else "bilinear"
            p = "%s%d." % (prefix, i)
            y = pipeline(resize, max_size, crop, interpolation)(pil_image(*image, channels))
            assert y.dtype == torch.float32
            tensors.append((p + "y", y.contiguous()))
            meta.update({p + "image": text(image), p + "channels": str(channels),
                         p + "resize": text(resize), p + "max_size": text(max_size),
                         p + "crop": text(crop)})
            if len(case) > 5:
                meta[p + "interpolation"] = interpolation
    meta["cases"] = str(len(CASES))
    meta["interp.cases"] = str(len(INTERP_CASES))

    pipe = pipeline(FOLDER_RESIZE, None, FOLDER_CROP)
    for key, ch in (("rgb", 3), ("grey", 1)):
        y = torch.stack([pipe(pil_image(*im, ch)) for im in FOLDER])
        tensors.append(("folder." + key, y.contiguous()))
        if ch == 3:
            sym = torch.stack([T.Normalize((0.5,) * 3, (0.5,) * 3)(v.clone()) for v in y])
            tensors.append(("folder.sym", sym.contiguous()))
    meta.update({"folder.images": ";".join(text(im) for im in FOLDER),
                 "folder.resize": text(FOLDER_RESIZE), "folder.crop": text(FOLDER_CROP)})

    x = T.ToTensor()(pil_image(*AUG_IMAGE, 3))
    tensors.append(("aug.x", x.contiguous()))
    for name, mode, fill in (("constant0", "constant", 0), ("constant", "constant", AUG_FILL),
                             ("reflect", "reflect", 0), ("edge", "edge", 0)):
        padded = F.pad(x, AUG_PADDING, fill=fill, padding_mode=mode)
        tensors.append(("aug.pad." + name, padded.contiguous()))
    tensors.append(("aug.pad.symmetric",
                    F.pad(x, AUG_PADDING, padding_mode="symmetric").contiguous()))
    tensors.append(("aug.vflip", F.vflip(x).contiguous()))
    for k, (padding, crop) in enumerate(IFNEEDED):
        for mode in ("constant", "reflect", "edge", "symmetric"):
            padded = padded_for_crop(x, padding, crop, AUG_FILL if mode == "constant" else 0,
                                     mode)
            tensors.append(("ifneeded%d.%s" % (k, mode), padded.contiguous()))
        meta.update({"ifneeded%d.padding" % k: text(padding),
                     "ifneeded%d.crop" % k: text(crop)})
    meta["ifneeded.cases"] = str(len(IFNEEDED))
    tensors.append(("aug.norm3", T.Normalize(MEAN3, STD3)(x.clone()).contiguous()))
    tensors.append(("aug.norm1", T.Normalize(MEAN1, STD1)(x[:1].clone()).contiguous()))
    meta.update({"aug.image": text(AUG_IMAGE), "aug.padding": text(AUG_PADDING),
                 "aug.fill": repr(AUG_FILL), "aug.mean3": text(MEAN3), "aug.std3": text(STD3),
                 "aug.mean1": text(MEAN1), "aug.std1": text(STD1)})
    write_safetensors(OUT, tensors, meta)
    print("wrote", OUT, len(tensors), "tensors")


if __name__ == "__main__":
    main()
