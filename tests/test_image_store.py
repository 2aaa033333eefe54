"""hynea_pl.data.image_store: a labelled folder converted once to a memory-mapped uint8 store, splits, bad data."""

from __future__ import annotations

import os
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from synthetic_images import SHAPES, write_shapes

from hynea_pl.data import (
    BadImageData,
    ImageStore,
    check_class_counts,
    image_folder_fingerprint,
    open_image_store,
    read_image_folder,
    stratified_splits,
    write_image_store,
)
from hynea_pl.data import image_store as image_store_module


def _bad(call, *args, **kwargs) -> str:
    """The message of the :class:`BadImageData` that ``call`` raises; it is one line."""
    with pytest.raises(BadImageData) as error, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        call(*args, **kwargs)
    message = str(error.value)
    assert message and "\n" not in message
    return message


def _leftovers(folder: Path) -> list[str]:
    """Staging or replaced stores left in ``folder``."""
    return sorted(name for name in os.listdir(folder) if ".partial-" in name or ".old-" in name)


def test_round_trip_rgb_matches_read_image_folder(tmp_path: Path) -> None:
    root = write_shapes(tmp_path / "shapes", classes=3, per_class=6, size=20)
    names = sorted(list(SHAPES)[:3])
    calls: list[tuple[int, int]] = []
    store = write_image_store(root, tmp_path / "store", size=20, channels=3, progress=lambda *a: calls.append(a))
    assert isinstance(store, ImageStore) and len(store) == 18 and calls == [(18, 18)]
    assert store.class_names == tuple(names) == ("disc", "square", "triangle")
    assert (store.num_classes, store.image_size, store.channels) == (3, 20, 3)
    assert store.images.shape == (18, 3, 20, 20) and store.images.dtype == torch.uint8
    assert store.labels.dtype == torch.int64 and store.labels.tolist() == [0] * 6 + [1] * 6 + [2] * 6
    assert store.source == os.path.abspath(root) and not store.skipped and not store.converted
    read = read_image_folder(root, (20, 20), 3, class_names=names)
    assert [label[0] for label in read.labels] == store.labels.tolist()
    assert torch.equal(store.float_images(), read.images)  # 8-bit PNGs at the store's size: exact
    assert torch.equal(store.float_images(slice(2, 4)), read.images[2:4])
    assert torch.equal(store.float_images(torch.tensor([5, 0])), read.images[[5, 0]])

    smaller = write_image_store(root, tmp_path / "small", size=13, channels=3)  # resized like read_image_folder
    expected = read_image_folder(root, (13, 13), 3, class_names=names).images
    assert (smaller.float_images() - expected).abs().max() <= 0.5 / 255 + 1e-6
    assert smaller.converted == {"resized": 18}


def test_grayscale_and_channel_detection(tmp_path: Path) -> None:
    gray = write_shapes(tmp_path / "gray", classes=2, per_class=5, size=16, channels=1)
    store = write_image_store(gray, tmp_path / "gray_store", size=16)  # channels=None: the folder's
    assert store.channels == 1 and store.images.shape == (10, 1, 16, 16) and not store.converted
    assert torch.equal(store.float_images(), read_image_folder(gray, (16, 16), 1, class_names=store.class_names).images)
    rgb = write_image_store(gray, tmp_path / "rgb_store", size=16, channels=3)  # asked for RGB: replicated
    assert rgb.channels == 3 and rgb.converted == {"channels": 10}
    assert torch.equal(rgb.images, store.images.expand(-1, 3, -1, -1))
    colour = write_shapes(tmp_path / "colour", classes=2, per_class=5, size=16, channels=3)
    assert write_image_store(colour, tmp_path / "colour_store", size=16).channels == 3


def test_mixed_sizes_and_channels_are_converted_and_counted(tmp_path: Path) -> None:
    root = write_shapes(tmp_path / "mixed", classes=3, per_class=14, size=16, channels=3, mixed=True)
    files = sorted(root.rglob("*.png"))
    with_pil = Counter()
    for path in files:
        with Image.open(path) as image:
            with_pil["resized"] += image.size != (16, 16)
            with_pil["channels"] += image.mode != "RGB"
    assert with_pil["resized"] > 0 and with_pil["channels"] > 0 and with_pil["channels"] < len(files) / 2
    store = write_image_store(root, tmp_path / "store", size=16)  # most files are RGB: channels=None picks 3
    assert store.channels == 3 and store.converted == dict(with_pil)
    gray = write_image_store(root, tmp_path / "gray", size=16, channels=1)
    assert gray.converted == {"resized": with_pil["resized"], "channels": len(files) - with_pil["channels"]}
    for stored in (store, gray):  # converted like read_image_folder converts, within rounding to 8 bits
        read = read_image_folder(root, (16, 16), stored.channels, class_names=stored.class_names).images
        assert (stored.float_images() - read).abs().max() <= 0.5 / 255 + 1e-6


def test_image_modes_match_read_image_folder(tmp_path: Path) -> None:
    """RGBA, LA, palette, 16-bit and CMYK files, at the store's size and larger, as read_image_folder reads them."""
    rng = np.random.default_rng(0)
    arrays = {"RGBA": (4, np.uint8), "LA": (2, np.uint8), "RGB": (3, np.uint8), "L": (1, np.uint8),
              "I;16": (1, np.uint16), "CMYK": (4, np.uint8)}
    for side in (12, 20):
        for mode, (bands, dtype) in arrays.items():
            array = rng.integers(0, np.iinfo(dtype).max, (side, side, bands), endpoint=True).astype(dtype)
            image = Image.fromarray(array[..., 0]) if bands == 1 else Image.frombytes(mode, (side, side), array)
            folder = tmp_path / "modes" / ("a" if side == 12 else "b")
            folder.mkdir(parents=True, exist_ok=True)
            image.save(folder / f"{mode.replace(';', '')}.{'tif' if mode == 'CMYK' else 'png'}")
            if mode == "RGB":
                image.convert("P").save(folder / "P.png")
    for channels in (1, 3):
        store = write_image_store(tmp_path / "modes", tmp_path / f"store{channels}", size=12, channels=channels)
        read = read_image_folder(tmp_path / "modes", (12, 12), channels, class_names=store.class_names)
        assert len(store) == 14 and not store.skipped
        assert (store.float_images() - read.images).abs().max() <= 0.5 / 255 + 1e-6
        assert store.converted == dict(read.converted) and store.converted["resized"] == 7


def test_csv_mode_classes_sorted_and_missing_rows_skipped(tmp_path: Path) -> None:
    root = write_shapes(tmp_path / "flat", classes=3, per_class=4, size=16, csv=True)
    with (root / "labels.csv").open("a", encoding="utf-8") as handle:
        handle.write("gone.png,disc\n")
    store = write_image_store(root, tmp_path / "store", size=16, labels_csv="labels.csv")
    assert store.class_names == ("disc", "square", "triangle")  # sorted, not the CSV's first-seen order
    assert store.skipped == {"missing": 1} and len(store) == 12
    rows = (root / "labels.csv").read_text(encoding="utf-8").splitlines()[1:-1]
    assert [store.class_names[label] for label in store.labels.tolist()] == [row.split(",")[1] for row in rows]
    read = read_image_folder(root, (16, 16), 3, class_names=store.class_names, labels_csv="labels.csv")
    assert torch.equal(store.float_images(), read.images)

    numbered = tmp_path / "numbered"
    for i, label in enumerate(["10", "2", "2", "10", "7"]):
        numbered.mkdir(exist_ok=True)
        Image.fromarray(np.full((8, 8), 20 * i, np.uint8)).save(numbered / f"{i}.png")
    (numbered / "labels.csv").write_text("file,label\n" + "".join(f"{i}.png,{label}\n" for i, label in
                                                                 enumerate(["10", "2", "2", "10", "7"])))
    store = write_image_store(numbered, tmp_path / "numbered_store", size=8, labels_csv="labels.csv")
    assert store.class_names == ("2", "7", "10") and store.labels.tolist() == [2, 0, 0, 2, 1]
    assert store.channels == 1 and store.images[:, 0, 0, 0].tolist() == [0, 20, 40, 60, 80]


def test_unreadable_files_skipped_counted_and_truncated(tmp_path: Path) -> None:
    root = write_shapes(tmp_path / "shapes", classes=2, per_class=5, size=16, unreadable=3)
    with pytest.warns(UserWarning) as caught:
        store = write_image_store(root, tmp_path / "store", size=16)
    messages = [str(w.message) for w in caught if "unreadable" in str(w.message)]
    assert len(messages) == 1 and "skipped 3 unreadable" in messages[0] and "broken_" in messages[0]
    assert store.skipped == {"unreadable": 3} and len(store) == 10 and store.images.shape[0] == 10
    on_disk = np.load(tmp_path / "store" / "images.npy", mmap_mode="r")
    assert on_disk.shape == (10, 3, 16, 16)  # the file itself holds only the images read
    assert sorted(os.listdir(tmp_path / "store")) == ["images.npy", "labels.npy", "meta.json"]
    assert torch.equal(store.labels, torch.tensor([0] * 5 + [1] * 5))


def _mappings_of(path: Path) -> list[tuple[int, int]]:
    ranges = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and os.path.realpath(fields[5]) == os.path.realpath(path):
            start, end = (int(value, 16) for value in fields[0].split("-"))
            ranges.append((start, end))
    return ranges


def test_store_is_memory_mapped_and_copy_on_write(tmp_path: Path) -> None:
    root = write_shapes(tmp_path / "shapes", classes=2, per_class=4, size=16)
    write_image_store(root, tmp_path / "store", size=16)
    store = open_image_store(tmp_path / "store")
    assert store.images.is_contiguous()
    if Path("/proc/self/maps").is_file():  # Linux: the tensor's memory is a mapping of images.npy, not a copy
        pointer = store.images.data_ptr()
        assert any(start <= pointer < end for start, end in _mappings_of(tmp_path / "store" / "images.npy"))
    before = store.images[0, 0, 0, 0].item()
    store.images[0, 0, 0, 0] = (before + 1) % 256  # writing the tensor never writes the file
    assert open_image_store(tmp_path / "store").images[0, 0, 0, 0].item() == before
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "non-writable array" warning from torch
        open_image_store(tmp_path / "store")


def test_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_shapes(tmp_path / "shapes", classes=2, per_class=6, size=16)
    out = tmp_path / "stores" / "store"
    real_read = image_store_module._read_uint8
    calls = []

    def failing_read(*args, **kwargs):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return real_read(*args, **kwargs)

    monkeypatch.setattr(image_store_module, "_read_uint8", failing_read)
    with pytest.raises(KeyboardInterrupt):
        write_image_store(root, out, size=16)
    assert not out.exists() and os.listdir(out.parent) == []

    monkeypatch.setattr(image_store_module, "_read_uint8", real_read)
    first = write_image_store(root, out, size=16)
    monkeypatch.setattr(image_store_module, "_read_uint8", failing_read)
    calls.clear()
    with pytest.raises(KeyboardInterrupt):
        write_image_store(root, out, size=12)
    kept = open_image_store(out)  # the complete store is still there, unchanged
    assert kept.image_size == 16 and kept.fingerprint == first.fingerprint and _leftovers(out.parent) == []

    monkeypatch.setattr(image_store_module, "_read_uint8", real_read)
    replaced = write_image_store(root, out, size=12)
    assert open_image_store(out).image_size == 12 and replaced.fingerprint != first.fingerprint
    assert sorted(os.listdir(out.parent)) == ["store"]

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.txt").write_text("not a store")
    with pytest.raises(FileExistsError, match="not an image store"):
        write_image_store(root, tmp_path / "mine", size=16)
    assert (tmp_path / "mine" / "thesis.txt").is_file()


def test_bad_folders_refused_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_read(*args, **kwargs):
        raise AssertionError("a pixel was read")

    monkeypatch.setattr(image_store_module, "_read_uint8", no_read)
    one = write_shapes(tmp_path / "one", classes=1, per_class=3, size=8)
    message = _bad(write_image_store, one, tmp_path / "s", size=8)
    assert str(one) in message and "1 class ('square')" in message and "at least 2 classes" in message

    empty = tmp_path / "empty"
    (empty / "cat").mkdir(parents=True)
    (empty / "cat" / "notes.txt").write_text("no image")
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(empty / "loose.png")
    message = _bad(write_image_store, empty, tmp_path / "s", size=8)
    assert str(empty) in message and "no labelled image" in message and "1 images lie directly" in message

    message = _bad(write_image_store, tmp_path / "nowhere", tmp_path / "s", size=8)
    assert "nowhere" in message and "not found" in message

    flat = write_shapes(tmp_path / "flat", classes=3, per_class=3, size=8, csv=True)
    lines = (flat / "labels.csv").read_text().splitlines()
    (flat / "labels.csv").write_text("\n".join(line.replace("img_", "gone_") if line.endswith(",disc") else line
                                               for line in lines) + "\n")
    message = _bad(write_image_store, flat, tmp_path / "s", size=8, labels_csv="labels.csv")
    assert "labels.csv names classes with no readable image: disc (3 rows, 3 missing)" in message

    (flat / "multi.csv").write_text("file,label\nimg_00000.png,square\nimg_00001.png,disc square\n")
    message = _bad(write_image_store, flat, tmp_path / "s", size=8, labels_csv="multi.csv")
    assert "one label per image" in message and "line 3" in message and "img_00001.png" in message
    assert "2 labels" in message

    message = _bad(write_image_store, flat, tmp_path / "s", size=8, labels_csv="absent.csv")
    assert "absent.csv" in message
    assert not (tmp_path / "s").exists() and _leftovers(tmp_path) == []


def test_classes_without_readable_image_refused_after_reading(tmp_path: Path) -> None:
    root = write_shapes(tmp_path / "shapes", classes=3, per_class=2, size=8)
    for path in (root / "disc").iterdir():
        path.write_bytes(b"broken")
    message = _bad(write_image_store, root, tmp_path / "s", size=8)
    assert str(root) in message and "no readable image: disc (2 files, 2 unreadable)" in message
    assert not (tmp_path / "s").exists() and _leftovers(tmp_path) == []

    flat = write_shapes(tmp_path / "flat", classes=2, per_class=2, size=8, csv=True, unreadable=4)
    for line in (flat / "labels.csv").read_text().splitlines()[1:5]:
        (flat / line.split(",")[0]).write_bytes(b"broken")  # every image of both classes
    message = _bad(write_image_store, flat, tmp_path / "s", size=8, labels_csv="labels.csv")
    assert "disc (4 rows, 4 unreadable), square (4 rows, 4 unreadable)" in message


def test_check_class_counts(tmp_path: Path) -> None:
    labels = torch.tensor([0, 0, 0, 1, 1, 1, 1, 1, 2] + [3] * 9)
    check_class_counts(labels, ["a", "b", "c", "d"], 1, "anything")
    message = _bad(check_class_counts, labels, ["cat", "dog", "emu", "fox", "gnu"], 6, "the sut split")
    assert message.startswith("classes with fewer than 6 images (the sut split): cat (3), dog (5), emu (1), gnu (0)")
    assert "fox" not in message
    message = _bad(check_class_counts, labels, None, 4, "x")
    assert "0 (3), 1 (1), 2 (1)" not in message and "0 (3), 2 (1)" in message

    root = write_shapes(tmp_path / "shapes", classes=2, per_class=3, size=8)
    store = write_image_store(root, tmp_path / "store", size=8)
    message = _bad(check_class_counts, store, None, 4, "splits")
    assert message.startswith(f"{store.source}: classes with fewer than 4 images (splits): disc (3), square (3)")


def test_stratified_splits() -> None:
    labels = torch.tensor([0] * 40 + [1] * 21 + [2] * 7)[torch.randperm(68, generator=torch.Generator().manual_seed(3))]
    sizes = {"held_out": 0.15, "sut": 0.25, "method": 0.3}
    splits = stratified_splits(labels, sizes, seed=5)
    assert list(splits) == ["held_out", "sut", "method"]
    every = torch.cat(list(splits.values()))
    assert len(set(every.tolist())) == len(every)  # disjoint
    for name, index in splits.items():
        assert index.dtype == torch.int64 and torch.equal(index, index.sort().values)
        counts = torch.bincount(labels[index], minlength=3).tolist()
        assert counts == [max(1, int(sizes[name] * n + 1e-9)) for n in (40, 21, 7)], (name, counts)
    again = stratified_splits(labels.clone(), dict(sizes), seed=5)
    assert all(torch.equal(splits[name], again[name]) for name in sizes)
    other = stratified_splits(labels, sizes, seed=6)
    assert not torch.equal(splits["sut"], other["sut"])
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert all(torch.equal(splits[name], index) for name, index in stratified_splits(labels, sizes, 5).items())
    finally:
        torch.set_num_threads(threads)
    # the same labels and seed give these indices on any machine
    fixed = stratified_splits(torch.tensor([0, 1] * 5), {"a": 0.4, "b": 0.2}, seed=0)
    assert {name: index.tolist() for name, index in fixed.items()} == FIXED_SPLITS


FIXED_SPLITS = {"a": [1, 3, 4, 8], "b": [0, 7]}


def test_stratified_splits_small_classes_and_arguments() -> None:
    labels = torch.tensor([0] * 5 + [1] * 2 + [2] * 3)
    message = _bad(stratified_splits, labels, {"a": 0.1, "b": 0.1, "c": 0.1}, 0, class_names=["x", "y", "z"])
    assert "fewer than 3 images" in message and "y (2)" in message and "x (" not in message and "z (" not in message
    tight = stratified_splits(torch.tensor([0] * 3 + [1] * 3), {"a": 0.9, "b": 0.05, "c": 0.05}, seed=1)
    assert [len(index) for index in tight.values()] == [2, 2, 2]  # at least one per class, never more than it has
    for sizes in ({"a": 0.7, "b": 0.4}, {"a": 0.0}, {}):
        with pytest.raises(ValueError, match="fractions"):
            stratified_splits(labels, sizes, 0)


def test_fingerprint_follows_the_data(tmp_path: Path) -> None:
    root = write_shapes(tmp_path / "shapes", classes=2, per_class=3, size=8)
    first = write_image_store(root, tmp_path / "store", size=8)
    assert len(first.fingerprint) == 16 and int(first.fingerprint, 16) >= 0
    assert image_folder_fingerprint(root, 8) == first.fingerprint == open_image_store(tmp_path / "store").fingerprint
    assert write_image_store(root, tmp_path / "again", size=8).fingerprint == first.fingerprint
    assert image_folder_fingerprint(root, 10) != first.fingerprint
    assert image_folder_fingerprint(root, 8, channels=1) != first.fingerprint

    path = root / "disc" / "1.png"
    stat = path.stat()
    Image.fromarray(np.full((8, 8, 3), 7, np.uint8)).save(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same time: the byte size changed
    changed = image_folder_fingerprint(root, 8)
    assert changed != first.fingerprint and write_image_store(root, tmp_path / "store", size=8).fingerprint == changed
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # same bytes, newer
    assert image_folder_fingerprint(root, 8) not in (first.fingerprint, changed)

    (root / "square" / "2.png").rename(root / "disc" / "moved.png")  # a file changes class
    assert image_folder_fingerprint(root, 8) not in (first.fingerprint, changed)


def test_synthetic_shapes_are_deterministic(tmp_path: Path) -> None:
    a = write_shapes(tmp_path / "a", classes=3, per_class=4, size=16, seed=1, mixed=True, unreadable=1)
    b = write_shapes(tmp_path / "b", classes=3, per_class=4, size=16, seed=1, mixed=True, unreadable=1)
    c = write_shapes(tmp_path / "c", classes=3, per_class=4, size=16, seed=2)
    files = sorted(path.relative_to(a) for path in a.rglob("*.png"))
    assert len(files) == 13 and files == sorted(path.relative_to(b) for path in b.rglob("*.png"))
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    assert (a / "disc" / "0.png").read_bytes() != (c / "disc" / "0.png").read_bytes()
