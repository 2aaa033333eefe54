"""The ``detector_sut`` zoo extra: a YOLOv8n digit detector on digit scenes, trained by ultralytics' own trainer.

Built on first use of ``zoo://<profile>/detector_sut`` (which resolves to the entry's ``model.pt``, what
``YOLODetectorSUT(model="zoo://full/detector_sut", imgsz=64)`` loads) or of ``Zoo.extra("detector_sut")`` (see
:mod:`hynea_pl.zoo.registry`). Training, on CPU and offline:

1. training scenes (:func:`hynea_pl.zoo.scenes.data.make_scenes` on the training digits, ``scene_seed``) and a small
   validation set for the trainer's own final-epoch check (training digits, ``scene_seed + 2``) are written as a
   YOLO dataset (:mod:`hynea_pl.zoo.scenes.yolo_dataset`) inside the entry's staging folder;
2. ``YOLO("yolov8n.yaml")`` (10 classes, from scratch: no pretrained weights) is trained by ``YOLO.train`` at
   64 px. Augmentation suits digits: no flips (a mirrored 2 is no digit, a flipped 6 is a 9), no mosaic (a
   scene is already a layout of digits; mosaic would shrink them to a few pixels), mild scale / translation
   jitter and brightness changes;
3. the entry keeps the last EMA checkpoint as ``model.pt`` (fp16 weights, no optimiser), ``config.json`` (the
   training config, the dataset recipe, the training seconds) and ``train_results.csv`` (ultralytics' per-epoch
   losses); the written dataset and the run folder are removed (the recipe regenerates the dataset).

Gates, on held-out scenes drawn from the held-out digits (the held-out half of
:func:`~hynea_pl.zoo.scenes.data.scene_split` with the training ``scene_seed``), written to a temporary YOLO dataset:

- ``map50`` (>= 0.8 for ``full``) and ``map50_95`` (recorded), from ultralytics' validator (``YOLO.val``);
- ``confident_scene_rate``: the fraction of scenes where the SUT's most confident candidate has confidence
  > 0.5, and ``top_detection_correct``: the fraction where that detection's class is a digit of the scene and
  its box overlaps that digit's box with IoU >= 0.5 (both through :class:`~hynea_pl.suts.YOLODetectorSUT`,
  what the campaigns see; recorded);
- the build time (<= 480 s for ``full``, a budget: the four scene components share 15 minutes).

Ultralytics runs inside :func:`ultralytics_session`: offline defaults, no font download (its dataset check
would otherwise look Arial.ttf up on GitHub), and the process-wide state it changes (torch threads,
deterministic algorithms, the global RNGs) restored afterwards.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torchvision.ops import box_iou

from hynea_pl._offline import apply_offline_defaults
from hynea_pl.zoo.splits import ImageSplit
from hynea_pl.zoo.quality import Gate
from hynea_pl.zoo.registry import BuildContext, Component
from hynea_pl.zoo.scenes.data import DigitScenes, SceneConfig, make_scenes, scene_split
from hynea_pl.zoo.scenes.yolo_dataset import DIGIT_NAMES, write_yolo_dataset

#: the checkpoint inside the entry, what ``zoo://<profile>/detector_sut`` resolves to
CHECKPOINT = "model.pt"


@dataclass(frozen=True)
class DetectorConfig:
    """Scenes, model and ultralytics training settings of the digit detector (every field is part of its cache
    key). The augmentation fields are ultralytics' hyperparameters of the same names."""

    n_train: int = 4000
    n_val: int = 64  # the trainer's final-epoch check only (training digits); the gates use held-out scenes
    scene_seed: int = 17
    scenes: SceneConfig = field(default_factory=SceneConfig)
    model: str = "yolov8n.yaml"
    imgsz: int = 64
    epochs: int = 5
    batch: int = 16
    nbs: int = 16  # nominal batch: ultralytics accumulates gradients up to it (= batch: one step per batch)
    optimizer: str = "AdamW"
    lr0: float = 0.003
    lrf: float = 0.01
    cos_lr: bool = True
    warmup_epochs: float = 0.5
    weight_decay: float = 5e-4
    cls: float = 1.0  # classification loss gain (ultralytics' default 0.5 learns the digits' classes slower)
    mosaic: float = 0.0
    scale: float = 0.2
    translate: float = 0.1
    degrees: float = 0.0
    fliplr: float = 0.0
    flipud: float = 0.0
    hsv_v: float = 0.2
    seed: int = 0


@dataclass(frozen=True)
class DetectorGates:
    """``None`` records a value without enforcing it."""

    n_test: int = 500
    map50: float | None = 0.8
    min_confidence: float = 0.5
    max_build_s: float | None = 480.0


TRAIN_CONFIGS = {
    "full": DetectorConfig(),
    "tiny": DetectorConfig(n_train=32, n_val=8, epochs=1, batch=16, nbs=16, warmup_epochs=0.0),
}
GATE_CONFIGS = {
    "full": DetectorGates(),
    "tiny": DetectorGates(n_test=16, map50=None, max_build_s=None),
}


@contextmanager
def ultralytics_session() -> Iterator[None]:
    """Run ultralytics offline and leave the process as it was: its trainer sets the torch thread count, turns
    deterministic algorithms on then off, and reseeds the global RNGs; all are restored on exit. Its dataset
    check calls ``check_font``, which would look the plot font up online: plots are off, so it is skipped."""
    apply_offline_defaults()
    import ultralytics.data.utils as data_utils

    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    cudnn = torch.backends.cudnn.deterministic
    rng = (torch.random.get_rng_state(), np.random.get_state(), random.getstate())
    check_font = data_utils.check_font
    data_utils.check_font = lambda *args, **kwargs: None
    try:
        yield
    finally:
        data_utils.check_font = check_font
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill
        torch.backends.cudnn.deterministic = cudnn
        torch.random.set_rng_state(rng[0])
        np.random.set_state(rng[1])
        random.setstate(rng[2])


def training_scenes(cfg: DetectorConfig, data: ImageSplit) -> tuple[DigitScenes, DigitScenes]:
    """``(train, val)`` scenes, both from the training digits (seeds ``scene_seed`` and ``scene_seed + 2``)."""
    train = make_scenes(data.train_images, data.train_labels, cfg.n_train, cfg.scene_seed, cfg.scenes)
    val = make_scenes(data.train_images, data.train_labels, cfg.n_val, cfg.scene_seed + 2, cfg.scenes)
    return train, val


def held_out_scenes(cfg: DetectorConfig, data: ImageSplit, n: int) -> DigitScenes:
    """``n`` scenes of the held-out digits: the held-out half of ``scene_split(data, ., n, scene_seed)``."""
    return scene_split(data, 0, n, cfg.scene_seed, cfg.scenes)[1]


def _train_args(cfg: DetectorConfig) -> dict[str, Any]:
    """``YOLO.train`` keyword arguments of ``cfg`` (without data and run folder)."""
    return dict(
        imgsz=cfg.imgsz, epochs=cfg.epochs, batch=cfg.batch, nbs=cfg.nbs, optimizer=cfg.optimizer, lr0=cfg.lr0,
        lrf=cfg.lrf, cos_lr=cfg.cos_lr, warmup_epochs=cfg.warmup_epochs, weight_decay=cfg.weight_decay,
        cls=cfg.cls, mosaic=cfg.mosaic, close_mosaic=0, scale=cfg.scale, translate=cfg.translate,
        degrees=cfg.degrees, fliplr=cfg.fliplr, flipud=cfg.flipud, hsv_h=0.0, hsv_s=0.0, hsv_v=cfg.hsv_v,
        mixup=0.0, cutmix=0.0, seed=cfg.seed, deterministic=True, device="cpu", workers=0, cache=False,
        amp=False, pretrained=False, plots=False, val=False, verbose=False, exist_ok=True,
    )


def train_detector(cfg: DetectorConfig, context: BuildContext, out: Path) -> None:
    """Train on scenes of the profile's training digits; write ``model.pt``, ``config.json`` and
    ``train_results.csv`` to ``out`` (the staging folder)."""
    from hynea_pl.zoo import train

    train.console.print(f"[bold]zoo[/]: training detector_sut ({cfg.model}, {cfg.n_train} scenes, "
                        f"{cfg.epochs} epochs of batch {cfg.batch}, ultralytics trainer on CPU)")
    start = time.perf_counter()
    dataset, runs = out / "dataset", out / "runs"
    data_yaml = write_yolo_dataset(*training_scenes(cfg, context.data.sut), dataset)
    with ultralytics_session():
        from ultralytics import YOLO

        model = YOLO(cfg.model)
        model.train(data=str(data_yaml), project=str(runs), name="train", **_train_args(cfg))
    weights = runs / "train" / "weights" / "last.pt"  # the final EMA weights, optimiser stripped
    shutil.copyfile(weights, out / CHECKPOINT)
    results = runs / "train" / "results.csv"
    if results.is_file():
        shutil.copyfile(results, out / "train_results.csv")
    shutil.rmtree(dataset)
    shutil.rmtree(runs)
    config = {
        "checkpoint": CHECKPOINT, "imgsz": cfg.imgsz, "names": DIGIT_NAMES,
        "training": dataclasses.asdict(cfg),
        "dataset": {"train": "make_scenes(train digits, n_train, scene_seed, scenes)",
                    "val": "make_scenes(train digits, n_val, scene_seed + 2, scenes)",
                    "writer": "hynea_pl.zoo.scenes.yolo_dataset.write_yolo_dataset",
                    "regenerate": "hynea_pl.zoo.scenes.detector.training_scenes(cfg, data)"},
        "train_s": time.perf_counter() - start,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))


def load_detector(entry: Path):
    """The frozen :class:`~hynea_pl.suts.YOLODetectorSUT` of a ``detector_sut`` entry (eval mode)."""
    from hynea_pl.suts.detector import YOLODetectorSUT

    config = json.loads((Path(entry) / "config.json").read_text())
    apply_offline_defaults()
    return YOLODetectorSUT(model=str(Path(entry) / CHECKPOINT), imgsz=int(config["imgsz"]))


@torch.no_grad()
def top_detection_rates(sut, scenes: DigitScenes, min_confidence: float,
                        batch_size: int = 100) -> tuple[float, float]:
    """``(confident, correct)``: the fraction of scenes whose most confident detection has confidence >
    ``min_confidence``, and the fraction where it also names a digit of the scene whose box it overlaps with
    IoU >= 0.5 (boxes in the scene's pixels)."""
    confident = correct = 0
    for i in range(0, len(scenes), batch_size):
        for j, rows in enumerate(sut.boxes(scenes.images[i:i + batch_size]), start=i):
            x0, y0, x1, y1, cls, conf = rows[0]  # most confident first
            if conf <= min_confidence:
                continue
            confident += 1
            same = scenes.labels[j] == int(cls)
            if same.any():
                iou = box_iou(torch.tensor([[x0, y0, x1, y1]]), scenes.boxes[j][same])
                correct += int(iou.max() >= 0.5)
    return confident / len(scenes), correct / len(scenes)


def measure_detector(gates: DetectorGates, entry: Path, context: BuildContext, out: Path) -> list[Gate]:
    """The gates of the module doc; the held-out dataset and the validator's run folder live in a temporary
    folder (only the numbers are kept)."""
    cfg: DetectorConfig = TRAIN_CONFIGS[context.profile.name]
    scenes = held_out_scenes(cfg, context.data.sut, gates.n_test)
    empty = DigitScenes(torch.zeros(0, *scenes.images.shape[1:]), [], [])
    with tempfile.TemporaryDirectory(prefix="detector_gates-") as tmp:
        data_yaml = write_yolo_dataset(empty, scenes, Path(tmp) / "held_out")
        with ultralytics_session():
            from ultralytics import YOLO

            metrics = YOLO(str(entry / CHECKPOINT)).val(
                data=str(data_yaml), imgsz=cfg.imgsz, batch=32, device="cpu", workers=0, plots=False,
                save_json=False, verbose=False, project=str(Path(tmp) / "runs"), name="val", exist_ok=True,
            )
    confident, correct = top_detection_rates(load_detector(entry), scenes, gates.min_confidence)
    return [
        Gate("map50", float(metrics.box.map50), gates.map50),
        Gate("map50_95", float(metrics.box.map), None),
        Gate("confident_scene_rate", confident, None),
        Gate("top_detection_correct", correct, None),
    ]


#: This module's zoo components (read by :mod:`hynea_pl.zoo.registry`).
ZOO_COMPONENTS = (
    Component(
        name="detector_sut", train_configs=TRAIN_CONFIGS, gate_configs=GATE_CONFIGS, train=train_detector,
        measure=measure_detector, load=load_detector, uri_target=CHECKPOINT, base_gated=False,
        description="YOLOv8n digit detector on 64x64 digit scenes (ultralytics trainer, from scratch, CPU)",
    ),
)

__all__ = ["CHECKPOINT", "DetectorConfig", "DetectorGates", "GATE_CONFIGS", "TRAIN_CONFIGS", "held_out_scenes",
           "load_detector", "measure_detector", "top_detection_rates", "train_detector", "training_scenes",
           "ultralytics_session"]
