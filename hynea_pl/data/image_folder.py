"""Reading a folder of the user's own labelled images: the test set of a campaign started from them (``cases.images``).

Labels come from sub-folder names (the torchvision ``ImageFolder`` convention, ``root/<label>/<file>``) or from a
CSV with columns ``file,label`` (a label may name several classes, separated by spaces: the classes of a scene).
Every image is converted to the generator's channel count and size; files that cannot be read are skipped and
counted, never fatal, while a label that names no class is an error (it means the folder is not what the user meant).
"""

from __future__ import annotations

import csv
import re
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torchvision.transforms.v2 import InterpolationMode
from torchvision.transforms.v2 import functional as F

IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"})

_INDEX = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class LabelledImages:
    """Images converted to one size and channel count, with their labels and where each came from.

    ``skipped`` and ``converted`` are :class:`collections.Counter` objects: a reason that never occurred is absent
    (so both are empty when nothing happened) and reads as 0.
    """

    images: torch.Tensor  # (N, C, H, W) float32 in [0, 1]
    labels: list[tuple[int, ...]]  # per image: one class index (a 1-tuple), or several (a scene's classes, from a CSV)
    sources: list[str]  # per image: its path relative to the folder (posix), e.g. "3/img_001.png"
    skipped: dict[str, int]  # files not used, by reason, e.g. {"unreadable": 1}; empty when none
    converted: dict[str, int]  # files changed to fit, by what was changed: {"channels": 1, "resized": 1}


def _one_line(text: str) -> str:
    """``text`` with line breaks escaped, so that a message stays on one line."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


class _Labels:
    """Turns a label token (a class index, or one of ``class_names``) into a class index."""

    def __init__(self, class_names: Sequence[str] | None, num_classes: int | None) -> None:
        if num_classes is not None and (isinstance(num_classes, bool) or num_classes < 1):
            raise ValueError(f"num_classes must be a positive integer, got {num_classes!r}")
        names = [str(name) for name in class_names] if class_names is not None else None
        if names is not None:
            if not names:
                raise ValueError("class_names is empty")
            duplicates = sorted({name for name in names if names.count(name) > 1})
            if duplicates:
                raise ValueError(_one_line(f"class_names repeats {', '.join(map(repr, duplicates))}"))
            if num_classes is not None and num_classes != len(names):
                raise ValueError(f"class_names has {len(names)} names but num_classes is {num_classes}")
            num_classes = len(names)
        self.index_of = {name: i for i, name in enumerate(names)} if names is not None else None
        self.num_classes = num_classes

    def accepted(self) -> str:
        """What labels are accepted, in words: ``labels are class indices 0-9``."""
        indices = f"0-{self.num_classes - 1}" if self.num_classes is not None else "(non-negative integers)"
        if self.index_of is None:
            return f"labels are class indices {indices}"
        names = list(self.index_of)
        shown = ", ".join(map(repr, names[:10])) + (f", ... ({len(names)} names)" if len(names) > 10 else "")
        return f"labels are the class names {shown} or their indices {indices}"

    def parse(self, token: str, where: str) -> int:
        """The class index ``token`` names; ``ValueError`` (one line, naming ``where``) when it names none."""
        if self.index_of is not None and token in self.index_of:
            return self.index_of[token]
        if _INDEX.fullmatch(token):
            index = int(token)
            if self.num_classes is None or index < self.num_classes:
                return index
        raise ValueError(_one_line(f"{where}: unknown label {token!r} ({self.accepted()})"))


def _is_image(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_EXTENSIONS


def _is_hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def _folder_entries(
    root: Path, labels: _Labels | None, skipped: Counter[str],
) -> list[tuple[Path, str, tuple[int, ...]]]:
    """``(path, source, label)`` for every image under ``root/<label>/``, in a deterministic order.

    ``labels=None``: the sub-folders are the classes, whatever their names; a label is the index of its folder in
    the sorted order (as integers when every name is one, else by name).
    """
    folders: list[tuple[Path, list[Path]]] = []
    for folder in root.iterdir():
        if not folder.is_dir() or folder.name.startswith("."):
            if folder.is_file() and not folder.name.startswith(".") and _is_image(folder):
                skipped["unlabelled"] += 1  # an image directly in root has no label folder
            continue
        files = sorted(
            (path for path in folder.rglob("*") if path.is_file() and _is_image(path)
             and not _is_hidden(path.relative_to(folder))),
            key=lambda path: path.relative_to(folder).as_posix(),
        )
        if files:  # a folder without images (notes, an empty class) names no label: ignored
            folders.append((folder, files))
    if folders and all(_INDEX.fullmatch(folder.name) for folder, _ in folders):
        folders.sort(key=lambda item: (int(item[0].name), item[0].name))
    else:
        folders.sort(key=lambda item: item[0].name)
    entries = []
    for position, (folder, files) in enumerate(folders):  # every label is checked before any image is read
        label = (position if labels is None else labels.parse(folder.name, str(folder)),)
        entries.extend((path, path.relative_to(root).as_posix(), label) for path in files)
    return entries


def _csv_entries(
    root: Path, csv_path: Path, labels: _Labels, skipped: Counter[str],
) -> list[tuple[Path, str, tuple[int, ...]]]:
    """``(path, source, labels)`` for every row of ``csv_path`` (columns ``file,label``), in the CSV's order."""
    if not csv_path.is_file():
        raise FileNotFoundError(_one_line(f"labels CSV {csv_path} not found"))
    entries = []
    with csv_path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        header = [column.strip().lower() for column in next(reader, [])]
        if "file" not in header or "label" not in header:
            got = ",".join(header)
            raise ValueError(_one_line(f"{csv_path}: the first row must name the columns file,label (got {got!r})"))
        file_column, label_column = header.index("file"), header.index("label")
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            where = f"{csv_path}: line {reader.line_num}"
            if len(row) <= max(file_column, label_column):
                raise ValueError(_one_line(f"{where}: expected the columns file,label, got {','.join(row)!r}"))
            name, label_text = row[file_column].strip(), row[label_column]
            tokens = label_text.split()
            if not tokens:
                raise ValueError(_one_line(f"{where} ({name}): empty label ({labels.accepted()})"))
            label = tuple(labels.parse(token, f"{where} ({name})") for token in tokens)
            path = root / name
            if not name or not path.is_file():
                skipped["missing"] += 1
                continue
            try:
                source = path.relative_to(root).as_posix()
            except ValueError:  # an absolute path outside root
                source = path.as_posix()
            entries.append((path, source, label))
    return entries


def _source_channels(image: Image.Image) -> int:
    """How many channels ``image`` holds (a palette image: those of its palette)."""
    if image.mode == "P":
        return 4 if "transparency" in image.info or (image.palette is not None and image.palette.mode == "RGBA") else 3
    if image.mode == "PA":
        return 4
    return len(image.getbands())


def _to_tensor(image: Image.Image, channels: int) -> torch.Tensor:
    """A PIL image -> ``(channels, h, w)`` float32 in ``[0, 1]`` (16-bit and 32-bit grayscale scaled to their range)."""
    if image.mode.startswith("I;16") or image.mode in ("I", "F"):
        array = np.asarray(image, dtype=np.float64)
        if image.mode.startswith("I;16"):
            array = array / 65535.0
        elif image.mode == "I":
            top = 65535.0 if array.size == 0 or array.max() <= 65535 else 2.0**31 - 1
            array = array / top
        array = np.clip(array, 0.0, 1.0)
        tensor = torch.from_numpy(array).float().unsqueeze(0)
        return tensor.expand(channels, -1, -1).contiguous()
    converted = image.convert("L" if channels == 1 else "RGB")
    array = np.asarray(converted, dtype=np.float32) / 255.0
    tensor = torch.from_numpy(array)
    return tensor.unsqueeze(0) if channels == 1 else tensor.permute(2, 0, 1).contiguous()


def list_image_labels(root: str | Path, num_classes: int | None = None,
                      labels_csv: str | Path | None = None) -> list[tuple[int, ...]]:
    """The label of every image file ``root`` lists, as :func:`read_image_folder` would label it, without reading a
    pixel (a campaign counts the images of each class before any model is built: ``cases.images``). A file that
    turns out unreadable is counted here and skipped by the read. Raises as :func:`read_image_folder` does for a
    missing ``root`` or CSV and an unknown label."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(_one_line(f"image folder {root} not found"))
    labels, skipped = _Labels(None, num_classes), Counter()
    entries = (_csv_entries(root, root / labels_csv, labels, skipped) if labels_csv is not None
               else _folder_entries(root, labels, skipped))
    return [label for _, _, label in entries]


def read_image_folder(root: str | Path, size: tuple[int, int], channels: int,
                      class_names: Sequence[str] | None = None, num_classes: int | None = None,
                      labels_csv: str | Path | None = None, max_per_label: int | None = None) -> LabelledImages:
    """Read the labelled images of ``root`` as ``(N, channels, H, W)`` float32 in ``[0, 1]``, ``size = (H, W)``.

    Labels come from ``labels_csv`` (relative to ``root`` or absolute; columns ``file,label``) when given, else from
    the sub-folder names of ``root``. A label is a class index, or one of ``class_names`` (mapped to its index); with
    ``num_classes`` (or ``class_names``) an index must be below it. Unreadable files are skipped with a warning
    (``skipped["unreadable"]``), CSV rows naming no file too (``skipped["missing"]``), images directly in ``root``
    in folder mode too (``skipped["unlabelled"]``). ``max_per_label``: read only the first this many files of each
    label (a campaign uses a few images per class; a large test set is not loaded whole). Raises ``FileNotFoundError`` for a missing ``root`` or CSV and
    ``ValueError`` for an unknown label or when no image could be read; every message is one line.
    """
    if len(size) != 2 or any(isinstance(s, bool) or int(s) != s or s < 1 for s in size):
        raise ValueError(f"size must be (H, W) with positive integers, got {size!r}")
    height, width = int(size[0]), int(size[1])
    if channels not in (1, 3):
        raise ValueError(f"channels must be 1 (grayscale) or 3 (RGB), got {channels!r}")
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(_one_line(f"image folder {root} not found"))
    labels = _Labels(class_names, num_classes)
    skipped: Counter[str] = Counter()
    converted: Counter[str] = Counter()
    if labels_csv is not None:
        entries = _csv_entries(root, root / labels_csv, labels, skipped)
    else:
        entries = _folder_entries(root, labels, skipped)

    if max_per_label is not None:
        per_label: Counter[tuple[int, ...]] = Counter()
        kept = []
        for entry in entries:
            per_label[entry[2]] += 1
            if per_label[entry[2]] <= max_per_label:
                kept.append(entry)
        entries = kept

    images: list[torch.Tensor] = []
    kept_labels: list[tuple[int, ...]] = []
    sources: list[str] = []
    for path, source, label in entries:
        try:
            with Image.open(path) as image:
                image.load()
                source_channels = _source_channels(image)
                tensor = _to_tensor(image, channels)
        except Exception as error:  # PIL raises many kinds (OSError, SyntaxError, ValueError, ...)
            skipped["unreadable"] += 1
            reason = f"{type(error).__name__}: {error}".replace(str(path), "it")
            warnings.warn(_one_line(f"skipping unreadable image {path} ({reason})"), stacklevel=2)
            continue
        if source_channels != channels:
            converted["channels"] += 1
        if tuple(tensor.shape[1:]) != (height, width):
            tensor = F.resize(tensor, [height, width], interpolation=InterpolationMode.BILINEAR, antialias=True)
            tensor = tensor.clamp_(0.0, 1.0)
            converted["resized"] += 1
        images.append(tensor)
        kept_labels.append(label)
        sources.append(source)

    if not images:
        found = f"{len(entries)} image file(s) found" + (f", skipped {dict(skipped)}" if skipped else "")
        layout = f"labels from {labels_csv}" if labels_csv is not None else "expected root/<label>/<image>"
        raise ValueError(_one_line(f"no image read from {root} ({found}; {layout})"))
    return LabelledImages(
        images=torch.stack(images), labels=kept_labels, sources=sources, skipped=skipped, converted=converted,
    )
