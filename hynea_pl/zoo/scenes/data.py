"""Digit scenes: 64x64 canvases with 1-3 real MNIST digits at random positions and scales, with boxes and labels.

The embedded default of the multi-label attribute task and the detection task (issue 17). A scene is drawn
deterministically from ``(digits, seed, SceneConfig)``; nothing is written to disk here (the YOLO dataset writer
and the zoo components build on :func:`make_scenes`).

Drawing one scene:

1. the number of digits, uniform in ``[min_digits, max_digits]``;
2. per digit: a random source digit (its 28x28 MNIST crop), resized to its side (bilinear, antialiased) and placed
   by the rules of :mod:`hynea_pl.scene_layout` (the scene generator's layouts follow them too);
3. the canvas is the pixel-wise maximum of the placed digits (white strokes on black, like MNIST);
4. each box is the tight box of the digit's ink (pixels > ``ink_threshold``) in canvas pixels, ``xyxy`` with
   exclusive ends, so ``canvas[y0:y1, x0:x1]`` holds the whole digit.

The source digits are what the caller passes: the zoo uses the training split for the training scenes and the
held-out split for the held-out scenes its gates measure on (see :func:`scene_split`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from hynea_pl.scene_layout import (DIGIT_SIDE, SceneConfig, digit_count, digit_crops, digit_side, ink_box, place_digit,
                                   randint)
from hynea_pl.zoo.mnist.data import NUM_CLASSES
from hynea_pl.zoo.splits import ImageSplit

@dataclass(frozen=True)
class DigitScenes:
    """``images`` ``(N, 1, S, S)`` in [0, 1]; per scene ``boxes[i]`` ``(n_i, 4)`` float xyxy pixels (exclusive ends)
    and ``labels[i]`` ``(n_i,)`` long digit classes."""

    images: Tensor
    boxes: list[Tensor]
    labels: list[Tensor]

    def __len__(self) -> int:
        return self.images.shape[0]

    def attributes(self) -> Tensor:
        """Multi-label targets ``(N, 10)`` float: 1 where digit k is present in the scene."""
        targets = torch.zeros(len(self), NUM_CLASSES)
        for i, labels in enumerate(self.labels):
            targets[i, labels] = 1.0
        return targets

    def counts(self) -> Tensor:
        """Digits per scene ``(N,)``."""
        return torch.tensor([len(labels) for labels in self.labels])


def draw_scene(crops: Tensor, labels: Tensor, rng: torch.Generator, cfg: SceneConfig) -> tuple[Tensor, Tensor, Tensor]:
    """One scene from the digit crops ``(M, 1, 28, 28)``: ``(image (1, S, S), boxes (n, 4), labels (n,))``."""
    canvas = torch.zeros(1, cfg.size, cfg.size)
    boxes: list[tuple[int, int, int, int]] = []
    classes: list[int] = []
    for k in range(digit_count(rng, cfg)):
        index = randint(rng, 0, crops.shape[0] - 1)
        side = digit_side(rng, cfg)
        patch = F.interpolate(crops[index:index + 1], size=(side, side), mode="bilinear", antialias=True,
                              align_corners=False)[0].clamp(0, 1)
        local = ink_box(patch[0], cfg.ink_threshold)
        if local is None:
            continue
        placed = place_digit(rng, side, local, boxes, k == 0, cfg)
        if placed is None:
            continue  # no free spot: drop this digit
        x, y, box = placed
        canvas[:, y:y + side, x:x + side] = torch.maximum(canvas[:, y:y + side, x:x + side], patch)
        boxes.append(box)
        classes.append(int(labels[index]))
    return canvas, torch.tensor(boxes, dtype=torch.float32).reshape(-1, 4), torch.tensor(classes, dtype=torch.long)


def make_scenes(digits: Tensor, labels: Tensor, n: int, seed: int, cfg: SceneConfig = SceneConfig()) -> DigitScenes:
    """``n`` scenes drawn from ``digits (M, 1, H, W)`` in [0, 1] (H, W >= 28; zoo digits are 32x32 padded) and their
    ``labels (M,)``; the same arguments give the same scenes."""
    if not 1 <= cfg.min_digits <= cfg.max_digits:
        raise ValueError(f"need 1 <= min_digits <= max_digits, got {cfg.min_digits}, {cfg.max_digits}")
    if round(DIGIT_SIDE * cfg.max_scale) > cfg.size:
        raise ValueError(f"digits of scale {cfg.max_scale} do not fit a {cfg.size} px canvas")
    crops = digit_crops(digits)
    rng = torch.Generator().manual_seed(seed)
    images, boxes, classes = [], [], []
    for _ in range(n):
        image, box, cls = draw_scene(crops, labels, rng, cfg)
        images.append(image)
        boxes.append(box)
        classes.append(cls)
    return DigitScenes(torch.stack(images) if images else torch.zeros(0, 1, cfg.size, cfg.size), boxes, classes)


def scene_split(data: ImageSplit, n_train: int, n_test: int, seed: int,
                cfg: SceneConfig = SceneConfig()) -> tuple[DigitScenes, DigitScenes]:
    """Training scenes from the training digits and held-out scenes from the held-out digits (no digit image is in
    both), drawn from ``seed`` and ``seed + 1``."""
    train = make_scenes(data.train_images, data.train_labels, n_train, seed, cfg)
    test = make_scenes(data.test_images, data.test_labels, n_test, seed + 1, cfg)
    return train, test


__all__ = ["DigitScenes", "SceneConfig", "draw_scene", "make_scenes", "scene_split"]
