"""Digit scenes: 64x64 canvases with 1-3 real MNIST digits at random positions and scales, with boxes and labels.

The embedded default of the multi-label attribute task and the detection task (issue 17). A scene is drawn
deterministically from ``(digits, seed, SceneConfig)``; nothing is written to disk here (the YOLO dataset writer
and the zoo components build on :func:`make_scenes`).

Drawing one scene:

1. the number of digits, uniform in ``[min_digits, max_digits]``;
2. per digit: a random source digit (its 28x28 MNIST crop), a side length ``round(28 * scale)`` px with ``scale``
   uniform in ``[min_scale, max_scale]`` (bilinear, antialiased), and a top-left corner uniform over the canvas;
   a placement whose ink box overlaps an already placed digit's box by more than ``max_overlap`` (intersection
   over the smaller box) is redrawn, up to ``max_tries`` times, then the digit is dropped (a scene always keeps
   its first digit);
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

from hynea_pl.zoo.mnist.data import NUM_CLASSES, DigitSplit

#: Side of an MNIST digit's original crop inside the zoo's 32x32 padded images.
DIGIT_SIDE = 28


@dataclass(frozen=True)
class SceneConfig:
    """How scenes are drawn (every field is part of the cache key of the components trained on them)."""

    size: int = 64
    min_digits: int = 1
    max_digits: int = 3
    min_scale: float = 0.6
    max_scale: float = 1.0
    max_overlap: float = 0.1
    max_tries: int = 20
    ink_threshold: float = 0.2


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


def digit_crops(images: Tensor) -> Tensor:
    """The 28x28 MNIST crops ``(M, 1, 28, 28)`` of the zoo's padded 32x32 digits (any size >= 28 is centre-cropped)."""
    h, w = images.shape[-2:]
    top, left = (h - DIGIT_SIDE) // 2, (w - DIGIT_SIDE) // 2
    return images[..., top:top + DIGIT_SIDE, left:left + DIGIT_SIDE]


def ink_box(patch: Tensor, threshold: float) -> tuple[int, int, int, int] | None:
    """Tight ``(x0, y0, x1, y1)`` box (exclusive ends) of the pixels of ``patch (H, W)`` above ``threshold``."""
    ys, xs = torch.nonzero(patch > threshold, as_tuple=True)
    if ys.numel() == 0:
        return None
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def overlap_fraction(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> float:
    """Intersection of boxes ``a`` and ``b`` over the area of the smaller one."""
    iw = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return iw * ih / max(smaller, 1)


def _uniform(rng: torch.Generator, low: float, high: float) -> float:
    return low + (high - low) * float(torch.rand((), generator=rng))


def _randint(rng: torch.Generator, low: int, high: int) -> int:
    """Uniform integer in ``[low, high]`` (inclusive)."""
    return int(torch.randint(low, high + 1, (), generator=rng))


def draw_scene(crops: Tensor, labels: Tensor, rng: torch.Generator, cfg: SceneConfig) -> tuple[Tensor, Tensor, Tensor]:
    """One scene from the digit crops ``(M, 1, 28, 28)``: ``(image (1, S, S), boxes (n, 4), labels (n,))``."""
    canvas = torch.zeros(1, cfg.size, cfg.size)
    boxes: list[tuple[int, int, int, int]] = []
    classes: list[int] = []
    for k in range(_randint(rng, cfg.min_digits, cfg.max_digits)):
        index = _randint(rng, 0, crops.shape[0] - 1)
        side = max(4, round(DIGIT_SIDE * _uniform(rng, cfg.min_scale, cfg.max_scale)))
        patch = F.interpolate(crops[index:index + 1], size=(side, side), mode="bilinear", antialias=True,
                              align_corners=False)[0].clamp(0, 1)
        local = ink_box(patch[0], cfg.ink_threshold)
        if local is None:
            continue
        for _ in range(cfg.max_tries):
            y, x = _randint(rng, 0, cfg.size - side), _randint(rng, 0, cfg.size - side)
            box = (x + local[0], y + local[1], x + local[2], y + local[3])
            if k == 0 or all(overlap_fraction(box, other) <= cfg.max_overlap for other in boxes):
                break
        else:
            continue  # no free spot: drop this digit
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


def windows_around_digits(scenes: DigitScenes, size: int, per_scene: int, jitter: int, seed: int) -> Tensor:
    """``per_scene`` square windows ``(N * per_scene, 1, size, size)`` of every scene, each centred on one of its
    digits drawn at random (its box centre moved by up to ``jitter`` px each way, the window kept inside the
    canvas); scene-major, the same arguments give the same windows.

    A fully convolutional autoencoder trains on these 4x cheaper than on whole 64 px scenes (32 px windows) and sees
    ink in most of its pixels instead of ~3 % (the scene autoencoder, :mod:`hynea_pl.zoo.scenes.ldm`)."""
    canvas = scenes.images.shape[-1]
    if not 0 < size <= canvas:
        raise ValueError(f"window size must be in (0, {canvas}], got {size}")
    rng = torch.Generator().manual_seed(seed)
    windows = []
    for image, boxes in zip(scenes.images, scenes.boxes, strict=True):
        for _ in range(per_scene):
            x0, y0, x1, y1 = boxes[_randint(rng, 0, len(boxes) - 1)].tolist() if len(boxes) else (0, 0, canvas, canvas)
            cx, cy = (x0 + x1) / 2 + _randint(rng, -jitter, jitter), (y0 + y1) / 2 + _randint(rng, -jitter, jitter)
            left = int(min(max(round(cx - size / 2), 0), canvas - size))
            top = int(min(max(round(cy - size / 2), 0), canvas - size))
            windows.append(image[:, top:top + size, left:left + size])
    return torch.stack(windows) if windows else torch.zeros(0, 1, size, size)


def scene_split(data: DigitSplit, n_train: int, n_test: int, seed: int,
                cfg: SceneConfig = SceneConfig()) -> tuple[DigitScenes, DigitScenes]:
    """Training scenes from the training digits and held-out scenes from the held-out digits (no digit image is in
    both), drawn from ``seed`` and ``seed + 1``."""
    train = make_scenes(data.train_images, data.train_labels, n_train, seed, cfg)
    test = make_scenes(data.test_images, data.test_labels, n_test, seed + 1, cfg)
    return train, test


__all__ = ["DigitScenes", "SceneConfig", "digit_crops", "draw_scene", "ink_box", "make_scenes", "overlap_fraction",
           "scene_split", "windows_around_digits"]
