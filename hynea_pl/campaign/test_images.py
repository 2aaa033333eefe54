"""Where a campaign's real test images come from (``cases.images``): a folder of the user's labelled images, or
the embedded zoo's held-out real digits.

- ``path/to/folder`` (with ``cases.labels_csv`` optionally): :func:`~hynea_pl.data.image_folder.read_image_folder`;
- ``zoo://<profile>/held_out`` (``?start=N`` to begin at the N-th digit): the zoo's held-out digits, which no model
  of the zoo trained on. Their sources read ``held_out/<index>``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from torch import Tensor
from torchvision.transforms.v2 import InterpolationMode
from torchvision.transforms.v2 import functional as F

from hynea_pl.data import LabelledImages, read_image_folder
from hynea_pl.data.image_folder import list_image_labels

#: The zoo's image sets a ``zoo://`` source may name.
ZOO_IMAGE_SETS = ("held_out",)


def read_test_images(source: str | Path, size: tuple[int, int], channels: int, num_classes: int | None = None,
                     labels_csv: str | Path | None = None, max_per_label: int | None = None) -> LabelledImages:
    """The labelled images of ``source`` (see the module docstring), converted to ``channels`` x ``size``; a folder
    is read up to ``max_per_label`` files per label."""
    text = str(source)
    if not text.startswith("zoo://"):
        return read_image_folder(text, size, channels, num_classes=num_classes, labels_csv=labels_csv,
                                 max_per_label=max_per_label)
    if labels_csv is not None:
        raise ValueError(f"{text} carries its own labels; cases.labels_csv goes with a folder")
    return _zoo_images(text, size, channels)


def count_test_labels(source: str | Path, num_classes: int | None = None,
                      labels_csv: str | Path | None = None) -> Counter[tuple[int, ...]]:
    """How many images of ``source`` carry each label (a 1-tuple per class; a CSV row may name several), from the
    labels alone: a folder's file list or CSV (no pixel read, an unreadable file counted), the zoo's held-out
    labels from ``start`` on (no model built). What a campaign's plan is checked against before it runs."""
    text = str(source)
    if not text.startswith("zoo://"):
        return Counter(list_image_labels(text, num_classes=num_classes, labels_csv=labels_csv))
    _, labels, _ = _zoo_held_out(text)
    return Counter((int(c),) for c in labels.tolist())


def _zoo_held_out(uri: str) -> tuple[Tensor, Tensor, int]:
    """The held-out images and labels ``uri`` names, from its ``start`` on, and that start."""
    parsed = urlparse(uri)
    profile, name = parsed.netloc, parsed.path.strip("/")
    if name not in ZOO_IMAGE_SETS:
        raise ValueError(f"unknown zoo image set in {uri!r}; choose one of {list(ZOO_IMAGE_SETS)}")
    query = parse_qs(parsed.query)
    unknown = sorted(set(query) - {"start"})
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} in {uri!r}; the one option is ?start=N")
    start = int(query.get("start", ["0"])[0])
    from hynea_pl.zoo.labelled.realism import held_out_split  # the zoo only when asked for

    images, labels = held_out_split(profile)
    if not 0 <= start < len(images):
        raise ValueError(f"start must be in 0..{len(images) - 1} in {uri!r}, got {start}")
    return images[start:], labels[start:], start


def _zoo_images(uri: str, size: tuple[int, int], channels: int) -> LabelledImages:
    images, labels, start = _zoo_held_out(uri)
    converted: Counter[str] = Counter()
    if images.shape[1] != channels:
        images = images.expand(-1, channels, -1, -1) if channels == 3 else images.mean(1, keepdim=True)
        converted["channels"] = len(images)
    if tuple(images.shape[-2:]) != tuple(size):
        images = F.resize(images, list(size), interpolation=InterpolationMode.BILINEAR, antialias=True).clamp(0, 1)
        converted["resized"] = len(images)
    return LabelledImages(images=images.contiguous().float(), labels=[(int(c),) for c in labels.tolist()],
                          sources=[f"held_out/{start + i}" for i in range(len(images))], skipped=Counter(),
                          converted=converted)


__all__ = ["ZOO_IMAGE_SETS", "count_test_labels", "read_test_images"]
