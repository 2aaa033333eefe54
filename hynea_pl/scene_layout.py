"""Scene layouts: where the digits of a 64 px digit scene go, drawn by the rules that make the training scenes.

One owner for the rules that both the zoo's real-digit scenes (:func:`hynea_pl.zoo.scenes.data.draw_scene`) and the
scene generator's layouts (:func:`sample_layout`, :class:`~hynea_pl.generators.LayoutSceneGenerator`) follow:

1. the number of digits, uniform in ``[min_digits, max_digits]``;
2. per digit: a side length ``round(28 * scale)`` px with ``scale`` uniform in ``[min_scale, max_scale]`` and a
   top-left corner uniform over the canvas; a placement whose ink box overlaps an already placed digit's box by more
   than ``max_overlap`` (intersection over the smaller box) is redrawn, up to ``max_tries`` times, then the digit is
   dropped (a scene always keeps its first digit);
3. boxes are the tight box of a digit's ink (pixels > ``ink_threshold``) in canvas pixels, ``xyxy`` with exclusive
   ends.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

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


def randint(rng: torch.Generator, low: int, high: int) -> int:
    """Uniform integer in ``[low, high]`` (inclusive)."""
    return int(torch.randint(low, high + 1, (), generator=rng))


def digit_count(rng: torch.Generator, cfg: SceneConfig) -> int:
    return randint(rng, cfg.min_digits, cfg.max_digits)


def digit_side(rng: torch.Generator, cfg: SceneConfig) -> int:
    return max(4, round(DIGIT_SIDE * _uniform(rng, cfg.min_scale, cfg.max_scale)))


def place_digit(rng: torch.Generator, side: int, local: tuple[int, int, int, int],
                boxes: list[tuple[int, int, int, int]],
           first: bool, cfg: SceneConfig) -> tuple[int, int, tuple[int, int, int, int]] | None:
    """A top-left corner ``(x, y)`` for a ``side`` px patch whose ink box inside the patch is ``local``, and that ink
    box in canvas pixels, or ``None`` when ``max_tries`` corners all overlap a placed box by more than
    ``max_overlap`` (the first digit of a scene always takes its first corner)."""
    for _ in range(cfg.max_tries):
        y, x = randint(rng, 0, cfg.size - side), randint(rng, 0, cfg.size - side)
        box = (x + local[0], y + local[1], x + local[2], y + local[3])
        if first or all(overlap_fraction(box, other) <= cfg.max_overlap for other in boxes):
            return x, y, box
    return None


@dataclass(frozen=True)
class SceneLayout:
    """Where a scene's digits go: ``classes[i]`` is drawn in the square ``squares[i] = (x, y, side)`` (top-left
    corner and side in canvas pixels) of a ``size`` px canvas. A layout holds no pixels: a generator fills each
    square with a digit of its class (:class:`~hynea_pl.generators.layout.LayoutSceneGenerator`)."""

    size: int
    classes: tuple[int, ...]
    squares: tuple[tuple[int, int, int], ...]

    def __post_init__(self) -> None:
        if len(self.classes) != len(self.squares) or not self.classes:
            raise ValueError(f"a layout needs one square per digit and at least one digit, got {len(self.classes)} "
                             f"classes and {len(self.squares)} squares")
        for x, y, side in self.squares:
            if not (0 <= x and 0 <= y and side > 0 and x + side <= self.size and y + side <= self.size):
                raise ValueError(f"square {(x, y, side)} does not fit a {self.size} px canvas")

    def __len__(self) -> int:
        return len(self.classes)

    def as_dict(self) -> dict:
        """JSON-ready: ``{"size", "classes", "squares"}`` (what a record keeps)."""
        return {"size": self.size, "classes": list(self.classes), "squares": [list(s) for s in self.squares]}

    @classmethod
    def from_dict(cls, data: dict) -> SceneLayout:
        """The inverse of :meth:`as_dict`."""
        return cls(int(data["size"]), tuple(int(c) for c in data["classes"]),
                   tuple(tuple(int(v) for v in s) for s in data["squares"]))


def digit_crops(images: Tensor) -> Tensor:
    """The 28x28 MNIST crops ``(M, 1, 28, 28)`` of the zoo's padded 32x32 digits (any size >= 28 is centre-cropped)."""
    h, w = images.shape[-2:]
    top, left = (h - DIGIT_SIDE) // 2, (w - DIGIT_SIDE) // 2
    return images[..., top:top + DIGIT_SIDE, left:left + DIGIT_SIDE]


def digit_windows(images: Tensor, layout: SceneLayout, pad: int = 2) -> Tensor:
    """Each placed digit of scenes ``images (N, C, S, S)`` (one layout for all) as a single digit image
    ``(N * n, C, 28 + 2 * pad, 28 + 2 * pad)``, image-major: its square resized to 28 px (bilinear, antialiased)
    and padded with black, the inverse of how a digit is drawn into its square (zoo digits are 28 px padded to 32)."""
    windows = [F.interpolate(images[:, :, y:y + side, x:x + side], size=(DIGIT_SIDE, DIGIT_SIDE), mode="bilinear",
                             antialias=True, align_corners=False).clamp(0, 1) for x, y, side in layout.squares]
    stacked = torch.stack(windows, dim=1).flatten(0, 1)
    return F.pad(stacked, (pad, pad, pad, pad))


def nominal_ink_box(side: int) -> tuple[int, int, int, int]:
    """Where an MNIST digit's ink sits in its ``side`` px square before it is drawn: the central 20 of 28 px (MNIST
    fits each digit into a 20x20 box centred in its 28x28 crop)."""
    margin = round(side * 4 / DIGIT_SIDE)
    return margin, margin, side - margin, side - margin


def sample_layout(seed: int, cfg: SceneConfig = SceneConfig(), num_classes: int = 10) -> SceneLayout:
    """The layout of one scene, drawn from ``seed`` by the module's rules: the number of digits, each digit's
    side and its corner, redrawn while its (nominal, :func:`nominal_ink_box`) ink box overlaps a placed one by more
    than ``max_overlap``; each digit's class is uniform over ``num_classes`` (the training scenes take a random real
    digit's). The same seed gives the same layout."""
    rng = torch.Generator().manual_seed(seed)
    boxes: list[tuple[int, int, int, int]] = []
    classes: list[int] = []
    squares: list[tuple[int, int, int]] = []
    for k in range(digit_count(rng, cfg)):
        cls = randint(rng, 0, num_classes - 1)
        side = digit_side(rng, cfg)
        placed = place_digit(rng, side, nominal_ink_box(side), boxes, k == 0, cfg)
        if placed is None:
            continue
        x, y, box = placed
        boxes.append(box)
        classes.append(cls)
        squares.append((x, y, side))
    return SceneLayout(cfg.size, tuple(classes), tuple(squares))


__all__ = ["DIGIT_SIDE", "SceneConfig", "SceneLayout", "digit_count", "digit_crops", "digit_side", "digit_windows",
           "ink_box",
           "nominal_ink_box",
           "overlap_fraction", "place_digit", "randint", "sample_layout"]
