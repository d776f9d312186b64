#!/usr/bin/python3
"""Writes the golden folder of tg_image_folder_load (tests/test_image_folder.c):
tests/golden/image_folder/tree, a folder laid out as torchvision's ImageFolder
whose PNGs PIL writes in every colour type tapegrad reads (grey, grey+alpha,
RGB, RGBA, palette, and tRNS transparency on grey, RGB and palette), and
tests/golden/image_folder/pil.safetensors with what PIL makes of them.

Run from anywhere with the system interpreter (Pillow 9.4, torch 1.13):
    /usr/bin/python3 scripts/make_image_folder_goldens.py

Tensors, samples in ImageFolder's order (classes sorted, then each class's
folders walked as torchvision's find_classes and make_dataset walk them:
sorted(os.walk(...)), each folder's files sorted, only names ending in .png
in any case):
  grey    u8 (N, 1, H, W)  Image.open(f).convert("L")
  rgb     u8 (N, 3, H, W)  Image.open(f).convert("RGB")
  labels  i64 (N)          the index of the sample's class folder
Metadata "classes": the class folder names joined by ",".
"""
import os
import shutil
import sys

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "image_folder")
W, H = 7, 5
SEED = 7919


def images(rng):
    """(class, file name, PIL image, save options): names whose byte order
    differs from their natural order ("img10" < "img2", "Zebra" < "apple")."""
    def px(c):
        return rng.integers(0, 256, (H, W, c), dtype=np.uint8)

    pal = Image.fromarray(px(3), "RGB").quantize(16)
    pal_t = Image.fromarray(px(3), "RGB").quantize(8)
    return [
        ("Zebra", "img10.png", Image.fromarray(px(3), "RGB"), {}),
        ("Zebra", "img2.png", Image.fromarray(px(4), "RGBA"), {}),
        ("Zebra", "c.PNG", Image.fromarray(px(1)[..., 0], "L"), {}),
        ("apple", "a.png", Image.fromarray(px(2), "LA"), {}),
        ("apple", "b.png", pal, {}),
        ("apple_2", "p_trns.png", pal_t, {"transparency": 3}),
        ("apple_2", "rgb_trns.png", Image.fromarray(px(3), "RGB"),
         {"transparency": (10, 20, 30)}),
        ("apple_2", "x_grey_trns.png", Image.fromarray(px(1)[..., 0], "L"),
         {"transparency": 7}),
        # folders in a class folder: "sub b" sorts between "sub" and "sub/x"
        ("apple", "sub/x/f.png", Image.fromarray(px(3), "RGB"), {}),
        ("apple", "sub b/e.png", Image.fromarray(px(1)[..., 0], "L"), {}),
        ("apple", "sub/d.png", Image.fromarray(px(3), "RGB"), {}),
    ]


def image_folder(root):
    """torchvision 0.14's find_classes and make_dataset."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    samples = []
    for c, name in enumerate(classes):
        d = os.path.join(root, name)
        for folder, _, fnames in sorted(os.walk(d, followlinks=True)):
            for f in sorted(fnames):
                if f.lower().endswith(".png"):
                    samples.append((os.path.join(folder, f), c))
    return classes, samples


def main():
    rng = np.random.default_rng(SEED)
    tree = os.path.join(OUT, "tree")
    shutil.rmtree(tree, ignore_errors=True)
    for cls, name, im, opts in images(rng):
        path = os.path.join(tree, cls, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        im.save(path, **opts)
    classes, samples = image_folder(tree)
    grey = [np.asarray(Image.open(f).convert("L"))[None] for f, _ in samples]
    rgb = [np.asarray(Image.open(f).convert("RGB")).transpose(2, 0, 1) for f, _ in samples]
    write_safetensors(os.path.join(OUT, "pil.safetensors"), [
        ("grey", torch.from_numpy(np.stack(grey))),
        ("rgb", torch.from_numpy(np.ascontiguousarray(np.stack(rgb)))),
        ("labels", torch.tensor([c for _, c in samples], dtype=torch.int64)),
    ], {"classes": ",".join(classes)})
    for f, c in samples:
        print(c, os.path.relpath(f, OUT), Image.open(f).mode)


if __name__ == "__main__":
    main()
