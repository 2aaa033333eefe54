"""The ``layout_scenes`` zoo extra: the digit scenes' generator, the MNIST zoo's class-conditional LDM drawing each
digit of a seeded layout (:class:`~hynea_pl.generators.LayoutSceneGenerator`), gated on the scene SUTs.

Nothing is trained: the entry is ``layout.json``, the :class:`~hynea_pl.scene_layout.SceneConfig` the training
scenes are drawn with, so a scene's layout follows their rules, and the location of the zoo's ``ldm`` it draws with
(``zoo://<profile>/ldm``; the entry's key names that LDM's folder). ``zoo://<profile>/layout_scenes`` resolves to the
entry folder, what ``LayoutSceneGenerator(pretrained=...)`` loads.

Gates (fatal where a threshold is given), on ``n_scenes`` scenes sampled from layout seeds no campaign uses
(:data:`GATE_SEED` on), with the configs' sampling (DDIM, 20 steps, guidance 3):

- ``every_digit_detected``: the fraction of scenes in which the ``detector_sut`` finds every placed digit: a
  detection of confidence > 0.25 (ultralytics' default for predictions) of the digit's class whose box overlaps the
  digit's ink box with IoU >= 0.5
  (:func:`layout_scores`; >= 0.90 for ``full``);
- ``attribute_set_exact``: the fraction in which the ``attribute_sut``'s set of present digits (logit > 0) equals
  the layout's set of classes (>= 0.80 for ``full``);
- ``digit_detected``: the fraction of placed digits found that way (recorded);
- ``real_*``: the three scores of as many real scenes drawn from the zoo's held-out digits (recorded: what the scene
  SUTs achieve on real digits, the reference the generated scenes are held to);
- the build time, a budget. ``samples.png`` (the first 32 scenes) is kept with the gates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torchvision.ops import box_iou
from torchvision.utils import save_image

from hynea_pl.zoo.quality import Gate
from hynea_pl.zoo.registry import BuildContext, Component
from hynea_pl.scene_layout import SceneConfig
from hynea_pl.zoo.scenes.data import make_scenes
from hynea_pl.zoo.scenes.scoring import load_cross_suts, present_attributes, scene_detections

#: The first layout seed of the gates' scenes (cases draw theirs from ``cases.seed + class * 100000`` on).
GATE_SEED = 10**9
#: A detection a scene's digit needs: its class, confidence above this (ultralytics' default for predictions) and
#: IoU with the digit's box at least :data:`MIN_IOU`.
MIN_CONFIDENCE = 0.25
#: The seed of the held-out real scenes the gates score beside the generated ones (recorded, for reference).
REAL_SCENE_SEED = 12345
MIN_IOU = 0.5


@dataclass(frozen=True)
class LayoutScenesConfig:
    """What the entry holds besides the LDM: the layouts' rules (part of the entry's key)."""

    scene: SceneConfig = SceneConfig()


@dataclass(frozen=True)
class LayoutScenesGates:
    """The gates' scenes and thresholds (``None``: recorded only)."""

    n_scenes: int = 200
    num_inference_steps: int = 20
    guidance_scale: float = 3.0
    batch_size: int = 25
    min_every_digit_detected: float | None = 0.90
    min_attribute_set_exact: float | None = 0.80
    max_build_s: float | None = 300.0


TRAIN_CONFIGS = {"full": LayoutScenesConfig(), "tiny": LayoutScenesConfig()}
GATE_CONFIGS = {
    "full": LayoutScenesGates(),
    "tiny": LayoutScenesGates(n_scenes=4, num_inference_steps=2, batch_size=4, min_every_digit_detected=None,
                              min_attribute_set_exact=None, max_build_s=None),
}


def write_layout_entry(cfg: LayoutScenesConfig, context: BuildContext, out: Path) -> None:
    """The entry: ``layout.json``, naming the profile's ``ldm`` (not copied: the entry's key names its folder)."""
    from hynea_pl.generators.layout import write_layout_settings

    write_layout_settings(out, cfg.scene, ldm=f"zoo://{context.profile.name}/ldm")


def load_layout_generator(entry: Path, **settings):
    """The entry as a :class:`~hynea_pl.generators.LayoutSceneGenerator` (``settings``: its sampling options)."""
    from hynea_pl.generators.layout import LayoutSceneGenerator

    return LayoutSceneGenerator(pretrained=str(entry), **settings)


def digits_found(boxes: torch.Tensor, classes: Sequence[int], rows: Sequence[Sequence[float]]) -> list[bool]:
    """For each placed digit (its ink box ``(4,)`` in ``boxes (n, 4)`` and class), whether one of the detector's
    ``rows`` ``(x0, y0, x1, y1, class, confidence)`` has its class, confidence > :data:`MIN_CONFIDENCE` and IoU >=
    :data:`MIN_IOU` with its box."""
    found = []
    for box, cls in zip(boxes, classes, strict=True):
        same = [row[:4] for row in rows if int(row[4]) == int(cls) and row[5] > MIN_CONFIDENCE]
        if not same:
            found.append(False)
            continue
        found.append(bool(box_iou(box.reshape(1, 4).float(), torch.tensor(same, dtype=torch.float32)).max() >= MIN_IOU))
    return found


def layout_scores(classes: Sequence[Sequence[int]], boxes: Sequence[torch.Tensor],
                  detections: Sequence[Sequence[Sequence[float]]], logits: torch.Tensor) -> dict[str, float]:
    """The module doc's scores of scenes whose placed digits have ``classes`` (one sequence per scene) and ink
    ``boxes`` (one ``(n, 4)`` per scene), from the detector's ``detections`` (every candidate's row per scene) and the
    attribute SUT's ``logits (N, 10)``."""
    if not len(classes) == len(boxes) == len(detections) == len(logits):
        raise ValueError(f"scores need one entry per scene, got {len(classes)} class lists, {len(boxes)} boxes, "
                         f"{len(detections)} detections and {len(logits)} logits")
    found = [digits_found(b, cls, rows) for cls, b, rows in zip(classes, boxes, detections, strict=True)]
    n = max(len(classes), 1)
    return {
        "every_digit_detected": sum(all(f) for f in found) / n,
        "attribute_set_exact": sum(present_attributes(row) == {int(c) for c in cls}
                                   for cls, row in zip(classes, logits, strict=True)) / n,
        "digit_detected": sum(sum(f) for f in found) / max(sum(len(f) for f in found), 1),
    }


@torch.no_grad()
def measure_layout_scenes(gates: LayoutScenesGates, entry: Path, context: BuildContext, out: Path) -> list[Gate]:
    """Sample the gates' scenes from the entry and score them with the scene SUTs (``gated_by``)."""
    from hynea_pl.progress import StepProgress
    from hynea_pl.zoo import train

    generator = load_layout_generator(entry, num_inference_steps=gates.num_inference_steps,
                                      guidance_scale=gates.guidance_scale)
    detector, attributes = load_cross_suts(context)
    classes, boxes, images = [], [], []
    seeds = range(GATE_SEED, GATE_SEED + gates.n_scenes)
    with StepProgress("zoo layout_scenes: gate scenes", gates.n_scenes, unit="scene", console=train.console) as bar:
        for start in range(0, gates.n_scenes, gates.batch_size):
            batch = seeds[start:start + gates.batch_size]
            drawn = [generator.case_condition(None, seed) for seed in batch]
            noise = torch.cat([generator.initial_noise(seed) for seed in batch])
            drawn_images, scene_boxes = generator.render(noise, drawn)
            images.append(drawn_images)
            boxes += scene_boxes
            classes += [layout.classes for layout in drawn]
            bar.update(len(batch))
    scenes = torch.cat(images)
    save_image(scenes[:32], out / "samples.png", nrow=8)
    logits = torch.cat([attributes(scenes[i:i + 50]) for i in range(0, len(scenes), 50)])
    scores = layout_scores(classes, boxes, scene_detections(detector, scenes), logits)
    data = context.data.method
    real = make_scenes(data.test_images, data.test_labels, gates.n_scenes, REAL_SCENE_SEED, generator.layout)
    real_logits = torch.cat([attributes(real.images[i:i + 50]) for i in range(0, len(real), 50)])
    real_scores = layout_scores([labels.tolist() for labels in real.labels], real.boxes,
                                scene_detections(detector, real.images), real_logits)
    return [
        Gate("every_digit_detected", scores["every_digit_detected"], gates.min_every_digit_detected),
        Gate("attribute_set_exact", scores["attribute_set_exact"], gates.min_attribute_set_exact),
        Gate("digit_detected", scores["digit_detected"], None),
        *(Gate(f"real_{name}", value, None) for name, value in real_scores.items()),
    ]


ZOO_COMPONENTS = (
    Component(
        name="layout_scenes", train_configs=TRAIN_CONFIGS, gate_configs=GATE_CONFIGS, train=write_layout_entry,
        measure=measure_layout_scenes, load=load_layout_generator, depends=("ldm",),
        gated_by=("detector_sut", "attribute_sut"), base_gated=False,
        description="the digit scenes' generator: the MNIST LDM drawing each digit of a seeded layout",
    ),
)

__all__ = ["GATE_CONFIGS", "GATE_SEED", "REAL_SCENE_SEED", "LayoutScenesConfig", "LayoutScenesGates", "TRAIN_CONFIGS",
           "digits_found",
           "layout_scores", "load_layout_generator", "measure_layout_scenes", "write_layout_entry"]
