"""Digit scenes as a YOLO-format detection dataset (what ultralytics' trainer and validator read).

Layout written under ``root`` by :func:`write_yolo_dataset`::

    root/data.yaml                      path (absolute root), train, val, nc 10, names {0: "0", ..., 9: "9"}
    root/images/{train,val}/00000.png   8-bit grayscale scenes (ultralytics reads them as 3 equal channels)
    root/labels/{train,val}/00000.txt   one ``cls cx cy w h`` line per digit, normalised to [0, 1]

File names are the scene's index (zero-padded), so the same scenes always give the same files. A scene's box
``(x0, y0, x1, y1)`` in pixels with exclusive ends (see :mod:`hynea_pl.zoo.scenes.data`) becomes
``cx = (x0 + x1) / 2 / W``, ``w = (x1 - x0) / W`` (``cy``, ``h`` likewise with ``H``): ultralytics' boxes are
continuous, so the exclusive end is the box's right / bottom edge. :func:`read_yolo_labels` inverts it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import Tensor

from hynea_pl.zoo.mnist.data import NUM_CLASSES
from hynea_pl.zoo.scenes.data import DigitScenes

#: Class names of the digit detector: class k is the digit k.
DIGIT_NAMES: dict[int, str] = {k: str(k) for k in range(NUM_CLASSES)}


def yolo_label_lines(boxes: Tensor, labels: Tensor, width: int, height: int) -> list[str]:
    """``cls cx cy w h`` lines (normalised) for one scene's ``boxes (n, 4)`` xyxy pixels and ``labels (n,)``."""
    lines = []
    for (x0, y0, x1, y1), cls in zip(boxes.tolist(), labels.tolist()):
        cx, cy = (x0 + x1) / 2 / width, (y0 + y1) / 2 / height
        w, h = (x1 - x0) / width, (y1 - y0) / height
        lines.append(f"{int(cls)} {cx:.6f} {cy:.6f} {w:.6f} {h:.6f}")
    return lines


def read_yolo_labels(path: Path, width: int, height: int) -> tuple[Tensor, Tensor]:
    """A label file back to ``(boxes (n, 4) float xyxy pixels, labels (n,) long)``."""
    rows = [line.split() for line in Path(path).read_text().splitlines() if line.strip()]
    values = torch.tensor([[float(v) for v in row[1:]] for row in rows], dtype=torch.float64).reshape(-1, 4)
    cx, cy, w, h = values.unbind(-1)
    boxes = torch.stack([(cx - w / 2) * width, (cy - h / 2) * height, (cx + w / 2) * width, (cy + h / 2) * height], -1)
    return boxes.float(), torch.tensor([int(row[0]) for row in rows], dtype=torch.long)


def _write_split(scenes: DigitScenes, root: Path, split: str) -> None:
    images, labels = root / "images" / split, root / "labels" / split
    images.mkdir(parents=True, exist_ok=True)
    labels.mkdir(parents=True, exist_ok=True)
    height, width = scenes.images.shape[-2:]
    pixels = (scenes.images[:, 0].clamp(0, 1) * 255).round().to(torch.uint8).numpy()
    digits = max(5, len(str(max(len(scenes) - 1, 0))))
    for i in range(len(scenes)):
        stem = f"{i:0{digits}d}"
        Image.fromarray(np.ascontiguousarray(pixels[i])).save(images / f"{stem}.png")  # uint8 (H, W): mode "L"
        lines = yolo_label_lines(scenes.boxes[i], scenes.labels[i], width, height)
        (labels / f"{stem}.txt").write_text("".join(f"{line}\n" for line in lines))


def write_yolo_dataset(train: DigitScenes, val: DigitScenes, root: Path) -> Path:
    """Write ``train`` and ``val`` scenes as a YOLO detection dataset under ``root`` (see the module docstring);
    returns the path of its ``data.yaml``. ``root`` should be empty: stale files of a larger split would stay."""
    root = Path(root).resolve()
    _write_split(train, root, "train")
    _write_split(val, root, "val")
    names = "".join(f"  {k}: \"{name}\"\n" for k, name in DIGIT_NAMES.items())
    data_yaml = root / "data.yaml"
    header = f"path: {json.dumps(str(root))}\ntrain: images/train\nval: images/val\nnc: {NUM_CLASSES}\n"
    data_yaml.write_text(f"{header}names:\n{names}")
    return data_yaml


__all__ = ["DIGIT_NAMES", "read_yolo_labels", "write_yolo_dataset", "yolo_label_lines"]
