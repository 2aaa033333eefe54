"""The ``detector_sut`` zoo extra: its YOLO dataset is what ultralytics reads, and the tiny entry loads as a SUT."""

from __future__ import annotations

import time

import pytest
import torch
from offline_guard import network_blocked

import hynea_pl  # noqa: F401  (offline defaults before ultralytics)
from hynea_pl.zoo.mnist.data import load_digits
from hynea_pl.zoo.profiles import get_profile
from hynea_pl.zoo.scenes.data import make_scenes
from hynea_pl.zoo.scenes.detector import ultralytics_session
from hynea_pl.zoo.scenes.yolo_dataset import read_yolo_labels, write_yolo_dataset


@pytest.fixture(scope="module")
def scenes():
    data = load_digits(get_profile("tiny").data).sut  # the tiny profile's SUT split
    train = make_scenes(data.train_images, data.train_labels, 12, seed=5)
    val = make_scenes(data.test_images, data.test_labels, 6, seed=6)
    return train, val


def test_yolo_dataset_is_read_by_ultralytics_with_the_scenes_boxes(scenes, tmp_path):
    train, val = scenes
    data_yaml = write_yolo_dataset(train, val, tmp_path / "ds")
    assert sorted(p.name for p in (tmp_path / "ds" / "images" / "val").iterdir()) == [f"{i:05d}.png" for i in range(6)]
    for i in range(len(val)):  # our own reader inverts the writer
        boxes, labels = read_yolo_labels(tmp_path / "ds" / "labels" / "val" / f"{i:05d}.txt", 64, 64)
        assert labels.tolist() == val.labels[i].tolist()
        torch.testing.assert_close(boxes, val.boxes[i], atol=1e-3, rtol=0)

    with network_blocked(), ultralytics_session():
        from ultralytics.cfg import get_cfg
        from ultralytics.data.build import build_yolo_dataset
        from ultralytics.data.utils import check_det_dataset

        data = check_det_dataset(str(data_yaml))
        assert data["nc"] == 10 and data["names"] == {k: str(k) for k in range(10)}
        for split, scenes_ in (("train", train), ("val", val)):
            dataset = build_yolo_dataset(get_cfg(overrides={"imgsz": 64}), data[split], 4, data, mode="val")
            assert len(dataset) == len(scenes_)
            for label in dataset.labels:
                i = int(label["im_file"].rsplit("/", 1)[-1].split(".")[0])
                assert tuple(label["shape"]) == (64, 64)
                assert label["cls"].reshape(-1).astype(int).tolist() == scenes_.labels[i].tolist()
                cx, cy, w, h = torch.as_tensor(label["bboxes"], dtype=torch.float32).mul(64).unbind(-1)
                xyxy = torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], -1)
                assert (xyxy - scenes_.boxes[i]).abs().max() <= 1.0
            image = dataset[0]["img"]
            assert image.shape == (3, 64, 64)  # grayscale PNG read as 3 equal channels
            assert torch.equal(image[0], image[1]) and torch.equal(image[1], image[2])


def test_tiny_detector_sut_builds_and_loads_as_a_differentiable_sut(tmp_path, monkeypatch, scenes):
    monkeypatch.setenv("HYNEA_PL_CACHE", str(tmp_path))
    from hynea_pl.suts import YOLODetectorSUT
    from hynea_pl.zoo.registry import build_component

    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    start = time.perf_counter()
    with network_blocked():
        built = build_component("tiny", "detector_sut", verbose=False)
    assert time.perf_counter() - start < 90
    assert (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()) == (threads, deterministic)
    names = {p.name for p in built.entry.iterdir()}
    assert {"model.pt", "config.json"} <= names and not {"dataset", "runs"} & names  # no PNGs kept
    gates = {g["name"]: g for g in built.quality["gates"]}
    assert {"map50", "map50_95", "confident_scene_rate", "top_detection_correct", "build_time_s"} <= set(gates)
    assert all(0.0 <= gates[n]["value"] <= 1.0 for n in ("map50", "map50_95", "confident_scene_rate"))

    with network_blocked():
        sut = YOLODetectorSUT(model="zoo://tiny/detector_sut", imgsz=64)
    assert sut.num_classes == 10 and sut.names == {k: str(k) for k in range(10)}
    images = scenes[1].images[:3].clone().requires_grad_(True)  # (3, 1, 64, 64)
    logits = sut(images)
    assert logits.shape == (3, 5, 10)
    logits.sum().backward()
    assert images.grad is not None and images.grad.abs().sum() > 0
