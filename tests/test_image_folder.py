"""hynea_pl.data.read_image_folder: labels from folders or a CSV, conversion to one size and channels, bad files."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from hynea_pl.data import LabelledImages, read_image_folder


def _gray(path: Path, value: int = 128, size: tuple[int, int] = (32, 32)) -> Path:
    """A uniform 8-bit grayscale image of ``size`` (H, W) at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full(size, value, dtype=np.uint8), mode="L").save(path)
    return path


def _class_folders(root: Path) -> None:
    """Classes 0, 2 and 10 (10 sorts after 2 as an integer), with a hidden file and a text file to ignore."""
    for label, values in {"2": (10, 20), "0": (30, 40, 50), "10": (60,)}.items():
        for i, value in enumerate(values):
            _gray(root / label / f"img_{i:03d}.png", value)
    (root / "0" / "notes.txt").write_text("not an image")
    _gray(root / "0" / ".hidden.png", 255)


def test_labels_from_folders(tmp_path: Path) -> None:
    _class_folders(tmp_path)
    data = read_image_folder(tmp_path, size=(32, 32), channels=1)
    assert isinstance(data, LabelledImages)
    assert data.images.shape == (6, 1, 32, 32) and data.images.dtype == torch.float32
    assert data.labels == [(0,), (0,), (0,), (2,), (2,), (10,)]
    assert data.sources == ["0/img_000.png", "0/img_001.png", "0/img_002.png", "2/img_000.png", "2/img_001.png",
                            "10/img_000.png"]
    assert data.images.min() >= 0.0 and data.images.max() <= 1.0
    torch.testing.assert_close(data.images[:, 0, 0, 0], torch.tensor([30, 40, 50, 10, 20, 60]) / 255.0)
    assert not data.skipped and not data.converted
    again = read_image_folder(str(tmp_path), size=(32, 32), channels=1)
    assert again.sources == data.sources and torch.equal(again.images, data.images)


def test_class_names_and_num_classes(tmp_path: Path) -> None:
    _gray(tmp_path / "cat" / "a.png")
    _gray(tmp_path / "dog" / "b.png")
    _gray(tmp_path / "0" / "c.png")  # an index is accepted alongside names
    data = read_image_folder(tmp_path, size=(32, 32), channels=1, class_names=["dog", "cat", "bird"])
    assert data.sources == ["0/c.png", "cat/a.png", "dog/b.png"] and data.labels == [(0,), (1,), (0,)]

    with pytest.raises(ValueError, match="num_classes"):
        read_image_folder(tmp_path, size=(32, 32), channels=1, class_names=["dog", "cat"], num_classes=3)

    numbered = tmp_path / "numbered"
    _gray(numbered / "3" / "a.png")
    assert read_image_folder(numbered, size=(32, 32), channels=1, num_classes=4).labels == [(3,)]
    with pytest.raises(ValueError, match=r"unknown label '3' \(labels are class indices 0-2\)"):
        read_image_folder(numbered, size=(32, 32), channels=1, num_classes=3)


def test_labels_from_csv(tmp_path: Path) -> None:
    for name in ("s0.png", "s1.png", "sub/s2.png"):
        _gray(tmp_path / name)
    (tmp_path / "labels.csv").write_text(
        "file,label\ns0.png,3\ns1.png,1 4 7\n\nsub/s2.png,seven\ngone.png,2\n", encoding="utf-8",
    )
    names = [str(i) for i in range(7)] + ["seven", "eight", "nine"]
    data = read_image_folder(tmp_path, size=(32, 32), channels=1, class_names=names, labels_csv="labels.csv")
    assert data.sources == ["s0.png", "s1.png", "sub/s2.png"]
    assert data.labels == [(3,), (1, 4, 7), (7,)]
    assert data.images.shape == (3, 1, 32, 32)
    assert data.skipped == {"missing": 1} and not data.converted

    (tmp_path / "bad.csv").write_text("file,label\ns0.png,3\ns1.png,1 12\n", encoding="utf-8")
    with pytest.raises(ValueError) as error:  # an absolute CSV path, a label out of range
        read_image_folder(tmp_path, (32, 32), 1, num_classes=10, labels_csv=tmp_path / "bad.csv")
    message = str(error.value)
    assert "\n" not in message and "line 3" in message and "s1.png" in message and "'12'" in message
    assert "0-9" in message


def test_bad_input_folder(tmp_path: Path) -> None:
    """The folder of the issue: a corrupt PNG, a 3-channel JPEG, a 100x100 image, then an unknown label folder."""
    root = tmp_path / "images"
    _gray(root / "0" / "a_good.png")
    (root / "0" / "b_corrupt.png").write_bytes(np.random.default_rng(0).bytes(200))
    rgb = np.zeros((32, 32, 3), dtype=np.uint8)
    rgb[..., 0] = 200
    (root / "1").mkdir()
    Image.fromarray(rgb, mode="RGB").save(root / "1" / "c_colour.jpg")
    _gray(root / "1" / "d_large.png", 90, size=(100, 100))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = read_image_folder(root, size=(32, 32), channels=1)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "b_corrupt.png" in messages[0] and "\n" not in messages[0]
    assert data.skipped == {"unreadable": 1}
    assert data.converted == {"channels": 1, "resized": 1}
    assert data.sources == ["0/a_good.png", "1/c_colour.jpg", "1/d_large.png"]
    assert data.images.shape == (3, 1, 32, 32)
    luma = 0.299 * 200 / 255  # PIL's "L": ITU-R 601-2 luma
    assert abs(data.images[1].mean().item() - luma) < 0.02  # JPEG is lossy
    assert abs(data.images[2].mean().item() - 90 / 255) < 1e-3

    with pytest.warns(UserWarning, match="b_corrupt.png"):  # grayscale PNGs replicated to 3 channels
        rgb_data = read_image_folder(root, size=(32, 32), channels=3)
    assert rgb_data.images.shape == (3, 3, 32, 32) and rgb_data.converted == {"channels": 2, "resized": 1}

    _gray(root / "cat" / "e.png")
    with pytest.raises(ValueError) as error, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        read_image_folder(root, size=(32, 32), channels=1)
    message = str(error.value)
    assert "\n" not in message
    assert os.path.join("images", "cat") in message and "unknown label 'cat'" in message
    assert "class indices" in message


def test_resized_content(tmp_path: Path) -> None:
    """A white square in the middle of a 100x100 black image stays in the middle, with its share of the light."""
    array = np.zeros((100, 100), dtype=np.uint8)
    array[30:70, 30:70] = 255
    _gray(tmp_path / "0" / "square.png").unlink()
    Image.fromarray(array, mode="L").save(tmp_path / "0" / "square.png")
    image = read_image_folder(tmp_path, size=(32, 32), channels=1).images[0, 0]
    assert abs(image.mean().item() - array.mean() / 255) < 0.02
    assert image[12:20, 12:20].min() > 0.95  # the centre of the square is white
    assert image[:8].max() < 0.05 and image[-8:].max() < 0.05  # the borders stay black
    assert image[:, :8].max() < 0.05 and image[:, -8:].max() < 0.05
    rows, cols = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")
    centre = ((image * rows).sum() / image.sum(), (image * cols).sum() / image.sum())
    assert abs(centre[0].item() - 15.5) < 0.5 and abs(centre[1].item() - 15.5) < 0.5


def test_modes_rgba_palette_and_16_bit(tmp_path: Path) -> None:
    rgba = np.zeros((32, 32, 4), dtype=np.uint8)
    rgba[..., 1], rgba[..., 3] = 255, 128
    _gray(tmp_path / "0" / "x.png").unlink()
    Image.fromarray(rgba, mode="RGBA").save(tmp_path / "0" / "a_rgba.png")
    Image.fromarray(np.full((32, 32, 3), 60, dtype=np.uint8), mode="RGB").convert("P").save(tmp_path / "0" / "b_p.gif")
    Image.fromarray(np.full((32, 32), 49151, dtype=np.uint16)).save(tmp_path / "0" / "c_16.png")
    data = read_image_folder(tmp_path, size=(32, 32), channels=3)
    torch.testing.assert_close(data.images[0, :, 0, 0], torch.tensor([0.0, 1.0, 0.0]))  # alpha dropped
    assert abs(data.images[1].mean().item() - 60 / 255) < 0.02
    torch.testing.assert_close(data.images[2, :, 0, 0], torch.full((3,), 49151 / 65535))
    assert data.converted == {"channels": 2}  # RGBA -> RGB and 16-bit gray -> RGB; the palette was RGB already


def test_missing_root_empty_folder_and_arguments(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not found"):
        read_image_folder(tmp_path / "nowhere", size=(32, 32), channels=1)
    (tmp_path / "0").mkdir()
    (tmp_path / "0" / "readme.txt").write_text("nothing here")
    with pytest.raises(ValueError, match="no image read") as error:
        read_image_folder(tmp_path, size=(32, 32), channels=1)
    assert "\n" not in str(error.value)
    (tmp_path / "0" / "broken.png").write_bytes(b"not a png")
    with pytest.raises(ValueError, match="unreadable"), pytest.warns(UserWarning, match="broken.png"):
        read_image_folder(tmp_path, size=(32, 32), channels=1)
    with pytest.raises(FileNotFoundError, match="labels CSV"):
        read_image_folder(tmp_path, size=(32, 32), channels=1, labels_csv="labels.csv")
    with pytest.raises(ValueError, match="channels"):
        read_image_folder(tmp_path, size=(32, 32), channels=2)
    with pytest.raises(ValueError, match="size"):
        read_image_folder(tmp_path, size=(32, 0), channels=1)


def test_max_per_label_reads_only_the_first_files_of_each_label(tmp_path: Path) -> None:
    _class_folders(tmp_path)
    (tmp_path / "0" / "img_009.png").write_bytes(b"not a png")  # past the limit: never opened, never counted
    data = read_image_folder(tmp_path, size=(32, 32), channels=1, max_per_label=2)
    assert data.sources == ["0/img_000.png", "0/img_001.png", "2/img_000.png", "2/img_001.png", "10/img_000.png"]
    assert not data.skipped
