"""A labelled image folder converted once to a compact on-disk store that training reads memory-mapped.

:func:`write_image_store` reads the folder (the ``ImageFolder`` layout ``root/<class>/<file>``, or a CSV
``file,label``) one image at a time into ``images.npy`` (``(N, C, S, S)`` uint8), ``labels.npy`` (``(N,)`` int64)
and ``meta.json``; :func:`open_image_store` maps it back without reading the pixels. :func:`stratified_splits` cuts
fixed, disjoint, per-class splits; data that cannot train a zoo is refused with a one-line :class:`BadImageData`,
from the file list before any pixel is read where possible.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from numpy.lib.format import open_memmap
from PIL import Image
from torchvision.transforms.v2 import InterpolationMode
from torchvision.transforms.v2 import functional as F

from hynea_pl.data.image_folder import (
    IMAGE_EXTENSIONS,
    _csv_entries,
    _folder_entries,
    _INDEX,
    _Labels,
    _one_line,
    _source_channels,
    _to_tensor,
)
from hynea_pl.images import from_levels

STORE_FORMAT = 1
_PROGRESS_EVERY = 1000
_CHANNEL_SAMPLE = 200
_COPY_ROWS = 4096
_GRAY_MODES = frozenset({"1", "L", "LA", "La", "I", "F"})


class BadImageData(ValueError):
    """A labelled image folder that cannot train a zoo; the message is one line."""

    def __init__(self, message: str) -> None:
        super().__init__(_one_line(message))


@dataclass(frozen=True, eq=False)
class ImageStore:
    """A labelled image folder converted once to ``images.npy`` (uint8, memory-mapped) and ``labels.npy``."""

    path: Path
    images: torch.Tensor  # (N, C, S, S) uint8, a copy-on-write view of the memory-mapped images.npy
    labels: torch.Tensor  # (N,) int64, class indices into class_names
    class_names: tuple[str, ...]  # index -> name
    source: str  # the folder it was read from (absolute)
    skipped: dict[str, int]  # files not stored, by reason: {"unreadable": 2, "missing": 1}
    converted: dict[str, int]  # files changed to fit, by what changed: {"resized": 10, "channels": 3}
    fingerprint: str  # 16 hex digits: changes when a file, a label, the size or the channels change

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def image_size(self) -> int:
        return int(self.images.shape[-1])

    @property
    def channels(self) -> int:
        return int(self.images.shape[1])

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def float_images(self, index: torch.Tensor | slice | None = None) -> torch.Tensor:
        """``(n, C, S, S)`` float32 in [0, 1] (level / 255) of the rows ``index`` selects (all when None)."""
        return from_levels(self.images if index is None else self.images[index])


@dataclass
class _Listing:
    """The files of a labelled folder, with their classes, before any pixel is read."""

    root: Path
    where: str  # the folder (folder mode) or the CSV (CSV mode): what messages name
    entries: list[tuple[Path, str, int]]  # (path, source relative to root, class index)
    class_names: tuple[str, ...]
    named: Counter[int]  # per class: files (folder mode) or CSV rows naming it, missing files included
    missing: Counter[int]  # per class: CSV rows naming a missing file
    skipped: Counter[str]
    csv: bool


class _CsvLabels(_Labels):
    """Accepts every label of a CSV, numbered in order of first sight; records the label tokens of every row."""

    def __init__(self) -> None:
        super().__init__(None, None)
        self.first_seen: dict[str, int] = {}
        self.rows: dict[str, list[str]] = {}  # "<csv>: line N (<file>)" -> its label tokens

    def parse(self, token: str, where: str) -> int:
        self.rows.setdefault(where, []).append(token)
        return self.first_seen.setdefault(token, len(self.first_seen))


def _natural(names: Sequence[str]) -> list[str]:
    """``names`` sorted as integers when every one is, else by name: ``"2"`` before ``"10"``."""
    if names and all(_INDEX.fullmatch(name) for name in names):
        return sorted(names, key=lambda name: (int(name), name))
    return sorted(names)


def _list_folder(root: Path) -> _Listing:
    skipped: Counter[str] = Counter()
    entries = _folder_entries(root, None, skipped)
    names = tuple(dict.fromkeys(source.split("/", 1)[0] for _, source, _ in entries))
    listed = [(path, source, label[0]) for path, source, label in entries]
    named = Counter(label for _, _, label in listed)
    return _Listing(root, str(root), listed, names, named, Counter(), skipped, csv=False)


def _list_csv(root: Path, labels_csv: str | Path) -> _Listing:
    csv_path = root / labels_csv
    labels = _CsvLabels()
    skipped: Counter[str] = Counter()
    try:
        entries = _csv_entries(root, csv_path, labels, skipped)
    except (FileNotFoundError, ValueError) as error:
        raise BadImageData(f"{error}; a zoo reads a CSV with the columns file,label (one label per row)") from None
    for where, tokens in labels.rows.items():
        if len(tokens) > 1:
            raise BadImageData(f"a zoo trains on one label per image; {where} names {len(tokens)} labels "
                               f"({' '.join(tokens)!r})")
    names = _natural(list(labels.first_seen))
    index_of = {name: i for i, name in enumerate(names)}
    order = [index_of[name] for name in labels.first_seen]  # first-seen number -> sorted index
    listed = [(path, source, order[label[0]]) for path, source, label in entries]
    named = Counter(order[labels.first_seen[tokens[0]]] for tokens in labels.rows.values())
    present = Counter(label for _, _, label in listed)
    missing = Counter({label: named[label] - present[label] for label in named if named[label] > present[label]})
    return _Listing(root, str(csv_path), listed, tuple(names), named, missing, skipped, csv=True)


def _listing(source: str | Path, labels_csv: str | Path | None) -> _Listing:
    """The files of ``source`` and their classes; :class:`BadImageData` when they cannot train a zoo."""
    root = Path(source)
    if not root.is_dir():
        raise BadImageData(f"image folder {root} not found; give the folder holding one sub-folder of images per class")
    listing = _list_folder(root) if labels_csv is None else _list_csv(root, labels_csv)
    if not listing.entries:
        raise BadImageData(_no_image(listing))
    if len(listing.class_names) == 1:
        verb = "names" if listing.csv else "has"
        raise BadImageData(f"{listing.where} {verb} 1 class ({listing.class_names[0]!r}); a zoo needs images of at "
                           f"least 2 classes")
    _refuse_empty_classes(listing, Counter(label for _, _, label in listing.entries), Counter())
    return listing


def _no_image(listing: _Listing) -> str:
    if listing.csv:
        rows = sum(listing.named.values())
        return (f"{listing.where} names no existing image ({rows} rows, {listing.skipped['missing']} missing); its "
                f"file column holds paths relative to {listing.root}")
    loose = listing.skipped["unlabelled"]
    outside = f" ({loose} images lie directly in it, outside any class folder)" if loose else ""
    extensions = " ".join(sorted(IMAGE_EXTENSIONS))
    return (f"{listing.where} has no labelled image{outside}; put the images of each class in a sub-folder named "
            f"after it ({listing.where}/<class>/<image>, one of {extensions})")


def _refuse_empty_classes(listing: _Listing, read: Counter[int], unreadable: Counter[int]) -> None:
    """:class:`BadImageData` naming every class of ``listing`` with no image ``read``."""
    empty = [label for label in range(len(listing.class_names)) if read[label] == 0]
    if not empty:
        return
    unit = "rows" if listing.csv else "files"
    shown = []
    for label in empty[:10]:
        counts = [f"{listing.named[label]} {unit}"]
        counts += [f"{count} {why}" for count, why in ((listing.missing[label], "missing"),
                                                       (unreadable[label], "unreadable")) if count]
        shown.append(f"{listing.class_names[label]} ({', '.join(counts)})")
    more = f", ... ({len(empty)} classes)" if len(empty) > 10 else ""
    verb, fix = ("names", "their rows") if listing.csv else ("has", "their folders")
    raise BadImageData(f"{listing.where} {verb} classes with no readable image: {', '.join(shown)}{more}; add "
                       f"readable images of them or remove {fix}")


def _wide(mode: str) -> bool:
    """Whether ``mode`` holds more than 8 bits per level (16-bit and 32-bit grayscale)."""
    return mode.startswith("I;16") or mode in ("I", "F")


def _mode_channels(mode: str) -> int:
    """1 for a grayscale mode (L, LA, I;16, ...), else 3."""
    return 1 if mode in _GRAY_MODES or mode.startswith("I;16") else 3


def _detect_channels(entries: Sequence[tuple[Path, str, int]]) -> int:
    """The most common channel count (1 or 3; 3 on a tie) among up to 200 readable files spread over ``entries``."""
    step = max(1, len(entries) // _CHANNEL_SAMPLE)
    counts: Counter[int] = Counter()
    for path, _, _ in entries[::step]:
        try:
            with Image.open(path) as image:  # reads the header only
                counts[_mode_channels(image.mode)] += 1
        except Exception:  # an unreadable file is counted when the pixels are read
            continue
        if sum(counts.values()) >= _CHANNEL_SAMPLE:
            break
    return 1 if counts[1] > counts[3] else 3


def _fingerprint(listing: _Listing, size: int, channels: int) -> str:
    """sha256 (16 hex) of the sorted (source, class name, byte size, mtime_ns) of every listed file, size, channels."""
    rows = []
    for path, source, label in listing.entries:
        try:
            stat = path.stat()
            size_bytes, mtime = stat.st_size, stat.st_mtime_ns
        except OSError:
            size_bytes, mtime = -1, -1
        rows.append((source, listing.class_names[label], size_bytes, mtime))
    digest = hashlib.sha256(json.dumps({"size": size, "channels": channels}).encode())
    for row in sorted(rows):
        digest.update(json.dumps(row).encode() + b"\n")
    return digest.hexdigest()[:16]


def _check_arguments(size: int, channels: int | None) -> None:
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive integer, got {size!r}")
    if channels not in (None, 1, 3):
        raise ValueError(f"channels must be 1 (grayscale), 3 (RGB) or None (the folder's), got {channels!r}")


def image_folder_fingerprint(source: str | Path, size: int, channels: int | None = None,
                             labels_csv: str | Path | None = None) -> str:
    """The :attr:`ImageStore.fingerprint` that :func:`write_image_store` would give ``source`` now, read from the
    file list and the files' sizes and times (no pixel is read): equal to a store's when its data is unchanged."""
    _check_arguments(size, channels)
    listing = _listing(source, labels_csv)
    return _fingerprint(listing, size, channels or _detect_channels(listing.entries))


def listed_labels(source: str | Path, labels_csv: str | Path | None = None) -> tuple[torch.Tensor, tuple[str, ...]]:
    """The class index ``(N,)`` of every image file ``source`` lists and the class names, before any pixel is read
    (:func:`check_class_counts` on them refuses a folder whose classes are too small before it is read)."""
    listing = _listing(source, labels_csv)
    return torch.tensor([label for _, _, label in listing.entries], dtype=torch.int64), listing.class_names


def _read_uint8(path: Path, channels: int, size: int) -> tuple[np.ndarray, int, bool]:
    """``(channels, size, size)`` uint8 of the image at ``path``, its own channel count, and whether it was resized."""
    with Image.open(path) as image:
        image.load()
        source_channels = _source_channels(image)
        if image.size == (size, size) and not _wide(image.mode):  # the 8-bit levels that _to_tensor scales by 1/255
            levels = np.asarray(image.convert("L" if channels == 1 else "RGB"))
            return (levels[None] if channels == 1 else levels.transpose(2, 0, 1)), source_channels, False
        tensor = _to_tensor(image, channels)
    resized = tuple(tensor.shape[1:]) != (size, size)
    if resized:
        tensor = F.resize(tensor, [size, size], interpolation=InterpolationMode.BILINEAR, antialias=True)
    return tensor.mul_(255.0).round_().clamp_(0.0, 255.0).to(torch.uint8).numpy(), source_channels, resized


def unreadable_reason(error: BaseException, path: Path) -> str:
    """Why the reader could not read ``path``, in its own words, with the file named by its name (not its whole
    path, which the message gives once). A reader plugin that is not installed (PIL tries each) is not the reason:
    no installed reader identifies the file, as PIL says of a file no plugin claims."""
    if isinstance(error, ImportError):  # PIL tried a format whose plugin is missing: no reader knows the file
        return f"cannot identify image file {path.name!r} (UnidentifiedImageError)"
    message = str(error).replace(repr(str(path)), repr(path.name)).replace(str(path), path.name)
    return f"{message} ({type(error).__name__})" if message else type(error).__name__


def _warn_unreadable(listing: _Listing, count: int, path: Path, reason: str) -> None:
    """One warning for all ``count`` unreadable files, naming the first (``path``, failed with ``reason``)."""
    more = f", and {count - 1} more" if count > 1 else ""
    warnings.warn(_one_line(f"skipped {count} unreadable image(s) of {listing.where}: {path} ({reason}){more}"),
                  stacklevel=4)


def _write_pixels(listing: _Listing, staging: Path, size: int, channels: int,
                  progress: Callable[[int, int], None] | None) -> tuple[int, Counter[str]]:
    """Read every listed image into ``staging`` (``images.npy`` truncated to the images read, ``labels.npy``);
    returns how many were read and the conversions made. :class:`BadImageData` when a class has no readable image."""
    total = len(listing.entries)
    target = staging / "images-all.npy"
    images = open_memmap(target, mode="w+", dtype=np.uint8, shape=(total, channels, size, size))
    labels = np.empty(total, dtype=np.int64)
    converted: Counter[str] = Counter()
    unreadable: Counter[int] = Counter()
    first_failure: tuple[Path, str] | None = None
    count = 0
    for done, (path, _, label) in enumerate(listing.entries, start=1):
        try:
            pixels, source_channels, resized = _read_uint8(path, channels, size)
        except Exception as error:  # PIL raises many kinds (OSError, SyntaxError, ValueError, ...)
            unreadable[label] += 1
            if first_failure is None:
                first_failure = (path, unreadable_reason(error, path))
        else:
            images[count], labels[count] = pixels, label
            converted["channels"] += source_channels != channels
            converted["resized"] += resized
            count += 1
        if progress is not None and (done % _PROGRESS_EVERY == 0 or done == total):
            progress(done, total)
    images.flush()
    del images
    if first_failure is not None:
        listing.skipped["unreadable"] += sum(unreadable.values())
        _warn_unreadable(listing, sum(unreadable.values()), *first_failure)
    _refuse_empty_classes(listing, Counter(labels[:count].tolist()), unreadable)
    _truncate(target, staging / "images.npy", count)
    np.save(staging / "labels.npy", labels[:count])
    return count, +converted


def _truncate(source: Path, target: Path, count: int) -> None:
    """``target``: the first ``count`` rows of the ``.npy`` file ``source`` (which is removed), copied in chunks."""
    full = np.load(source, mmap_mode="r")
    if full.shape[0] == count:
        del full
        source.rename(target)
        return
    rows = open_memmap(target, mode="w+", dtype=full.dtype, shape=(count, *full.shape[1:]))
    for start in range(0, count, _COPY_ROWS):
        rows[start:start + _COPY_ROWS] = full[start:min(count, start + _COPY_ROWS)]
    rows.flush()
    del rows, full
    source.unlink()


def _check_out(out: Path) -> None:
    """Refuse to replace a folder that is not an image store (it may hold the user's files)."""
    if out.exists() and not (out.is_dir() and ((out / "meta.json").is_file() or not any(out.iterdir()))):
        raise FileExistsError(_one_line(f"{out} exists and is not an image store; choose another folder or remove it"))


def _replace(staging: Path, out: Path) -> None:
    """Move the complete store ``staging`` to ``out``, replacing a previous store there only now."""
    if not out.exists():
        os.rename(staging, out)
        return
    old = out.with_name(f"{out.name}.old-{os.getpid()}")
    os.rename(out, old)
    try:
        os.rename(staging, out)
    except BaseException:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def write_image_store(source: str | Path, out: str | Path, size: int, channels: int | None = None,
                      labels_csv: str | Path | None = None,
                      progress: Callable[[int, int], None] | None = None) -> ImageStore:
    """Convert the labelled images of ``source`` once to the store ``out``: ``(N, channels, size, size)`` uint8.

    Classes are the sub-folders of ``source`` (sorted, as integers when every name is one), or the distinct labels
    of ``labels_csv`` (columns ``file,label``, relative to ``source`` or absolute; same order). ``channels=None``:
    the most common of the folder (1 for grayscale modes, 3 otherwise). Every image is converted to it and resized
    to ``size x size`` (antialiased, aspect not kept), counted in ``converted``; unreadable files and CSV rows naming
    no file are skipped and counted in ``skipped``. The store is written next to ``out`` and renamed to it when
    complete (a previous store at ``out`` is replaced only then); nothing is left behind on failure.
    ``progress(done, total)`` is called every 1000 files and at the end. Raises :class:`BadImageData` (one line)
    for data that cannot train a zoo, before any pixel is read where the file list shows it.
    """
    _check_arguments(size, channels)
    out = Path(out)
    _check_out(out)
    listing = _listing(source, labels_csv)
    channels = channels or _detect_channels(listing.entries)
    fingerprint = _fingerprint(listing, size, channels)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.with_name(f"{out.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        count, converted = _write_pixels(listing, staging, size, channels, progress)
        meta = {
            "format": STORE_FORMAT, "class_names": list(listing.class_names), "source": os.path.abspath(source),
            "labels_csv": None if labels_csv is None else str(labels_csv), "skipped": dict(+listing.skipped),
            "converted": dict(converted), "fingerprint": fingerprint, "size": size, "channels": channels,
            "count": count,
        }
        (staging / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        _replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return open_image_store(out)


def open_image_store(path: str | Path) -> ImageStore:
    """The store written by :func:`write_image_store` at ``path``, its images memory-mapped (no pixel is read)."""
    path = Path(path)
    meta_path = path / "meta.json"
    if not meta_path.is_file():
        raise FileNotFoundError(_one_line(f"no image store at {path} ({meta_path.name} not found)"))
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    if meta.get("format") != STORE_FORMAT:
        raise ValueError(_one_line(f"{path}: image store format {meta.get('format')!r}, expected {STORE_FORMAT}"))
    images = np.load(path / "images.npy", mmap_mode="c")  # copy-on-write: writable for torch, never written back
    labels = np.load(path / "labels.npy")
    shape = (meta["count"], meta["channels"], meta["size"], meta["size"])
    if images.dtype != np.uint8 or images.shape != shape or labels.shape != (meta["count"],):
        raise ValueError(_one_line(f"{path}: images {images.shape} {images.dtype} and labels {labels.shape} do not "
                                   f"match meta.json {shape}; write the store again"))
    return ImageStore(
        path=path, images=torch.from_numpy(images), labels=torch.from_numpy(labels).to(torch.int64),
        class_names=tuple(meta["class_names"]), source=meta["source"], skipped=dict(meta["skipped"]),
        converted=dict(meta["converted"]), fingerprint=meta["fingerprint"],
    )


def check_class_counts(labels: ImageStore | torch.Tensor, class_names: Sequence[str] | None, needed: int,
                       what: str) -> None:
    """:class:`BadImageData` naming every class with fewer than ``needed`` images among ``labels`` (``(N,)`` class
    indices, or a store's); ``class_names`` (default: the store's, else the indices) are all the classes."""
    where = ""
    if isinstance(labels, ImageStore):
        where = f"{labels.source}: "
        class_names = labels.class_names if class_names is None else class_names
        labels = labels.labels
    labels = torch.as_tensor(labels).reshape(-1).to(torch.int64)
    if labels.numel() and int(labels.min()) < 0:
        raise ValueError("labels must be non-negative class indices")
    num_classes = len(class_names) if class_names is not None else (int(labels.max()) + 1 if labels.numel() else 0)
    names = list(class_names) if class_names is not None else [str(i) for i in range(num_classes)]
    counts = torch.bincount(labels, minlength=num_classes).tolist()
    short = [f"{names[label] if label < len(names) else label} ({count})" for label, count in enumerate(counts)
             if count < needed]
    if short:
        more = f", ... ({len(short)} classes)" if len(short) > 10 else ""
        raise BadImageData(f"{where}classes with fewer than {needed} images ({what}): {', '.join(short[:10])}{more}; "
                           f"add images of them or remove them")


def _class_seed(seed: int, label: int) -> int:
    """A 63-bit seed for class ``label``'s permutation, the same on every machine."""
    digest = hashlib.sha256(f"stratified_splits:{seed}:{label}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def _cut(n: int, fractions: Sequence[float]) -> list[int]:
    """How many of ``n`` images each split takes: ``floor(fraction * n)``, at least 1, at most ``n`` in all."""
    counts = [max(1, math.floor(fraction * n + 1e-9)) for fraction in fractions]
    while sum(counts) > n:
        largest = max(range(len(counts)), key=lambda i: (counts[i], -i))
        counts[largest] -= 1
    return counts


def stratified_splits(labels: torch.Tensor, sizes: Mapping[str, float], seed: int,
                      class_names: Sequence[str] | None = None) -> dict[str, torch.Tensor]:
    """Disjoint per-class splits of ``labels`` (``(N,)`` class indices): ``{name: sorted (n,) int64 indices}``.

    Each class's images are permuted (a generator seeded from ``seed`` and the class) and cut in the order of
    ``sizes`` by its fractions (floored per class, at least one image per split); what remains is in no split. The
    same labels and seed give the same splits on any machine. :class:`BadImageData` when a class has fewer images
    than there are splits (named with ``class_names`` when given).
    """
    fractions = [float(fraction) for fraction in sizes.values()]
    if not fractions or min(fractions) <= 0 or sum(fractions) > 1 + 1e-9:
        raise ValueError(f"split sizes must be positive fractions summing to at most 1, got {dict(sizes)!r}")
    labels = torch.as_tensor(labels).reshape(-1).to(torch.int64)
    check_class_counts(labels, class_names, len(fractions), f"one per split of {', '.join(sizes)}")
    parts: list[list[torch.Tensor]] = [[] for _ in fractions]
    for label in torch.unique(labels).tolist():
        members = torch.nonzero(labels == label).flatten()
        generator = torch.Generator().manual_seed(_class_seed(seed, label))
        shuffled = members[torch.randperm(len(members), generator=generator)]
        start = 0
        for part, count in zip(parts, _cut(len(members), fractions)):
            part.append(shuffled[start:start + count])
            start += count
    return {name: torch.sort(torch.cat(part)).values for name, part in zip(sizes, parts)}
