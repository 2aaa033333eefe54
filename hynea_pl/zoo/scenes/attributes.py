"""The digit scenes' multi-label attribute models (issue 17): the ``attribute_sut`` and ``attribute_oracle`` extras.

Attribute ``k`` of a 64x64 digit scene (:mod:`hynea_pl.zoo.scenes.data`) is "digit k is present". Both models map
normalised scenes ``(B, 1, 64, 64)`` (``(x - 0.5) / 0.5``, :data:`SCENE_PREPROCESS`) to 10 logits ``(B, 10)``,
trained with BCE with logits on scenes drawn from the zoo's training digits:

- ``attribute_sut``: the system under test, a VGG-style :class:`SceneAttributeCNN` (global max pooling), light
  augmentation (small shifts). It plugs into :class:`hynea_pl.suts.BinaryAttributeSUT` from YAML::

      sut:
        class_path: hynea_pl.suts.BinaryAttributeSUT
        init_args:
          model:
            class_path: hynea_pl.zoo.scenes.attributes.SceneAttributeCNN
            init_args: {channels: [8, 16, 32, 64, 128], num_classes: 10}
          weights: zoo://full/attribute_sut
          attribute: "3"
          attribute_names: ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"]
          preprocess: {size: 64, channels: 1, mean: [0.5], std: [0.5]}

- ``attribute_oracle``: one of the scenes' two validity judges (is each digit still present? the other is the MNIST
  zoo's judges read over windows, ``configs/sections/scenes_oracle.yaml``), trained independently of the
  SUT: another architecture (the zoo oracle's residual :class:`~hynea_pl.zoo.labelled.oracle.OracleNet`, global average
  pooling), other scenes, another seed and the MNIST oracle's stronger augmentation (stroke width, elastic, small
  affine warps, pixel noise; :func:`hynea_pl.zoo.labelled.oracle.augment`). It only judges; it never steers a search. The
  same YAML with ``class_path: hynea_pl.zoo.labelled.oracle.OracleNet``, its ``init_args`` (``config.json``) and
  ``weights: zoo://full/attribute_oracle`` makes it a judge of a campaign's ``oracle``.

Each entry holds ``model.safetensors`` + ``config.json`` (class path, init args, preprocess, training config), like
the zoo classifiers; ``zoo://<profile>/attribute_sut`` resolves to the weights file. The gates, on held-out scenes
drawn from the held-out digits only: the mean AUROC over the 10 attributes (torchmetrics ``MultilabelAUROC``,
>= 0.95 in the full profile), the mean per-attribute accuracy of the decisions ``logit > 0`` (recorded), the worst
attribute's AUROC and the exact-match rate (all 10 decisions right; recorded), and the build time (a budget).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import lightning as L
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn
from torch.utils.data import TensorDataset

from hynea_pl.suts.preprocess import Preprocess
from hynea_pl.zoo.augment import random_shift
from hynea_pl.zoo.labelled.oracle import OracleNet, augment
from hynea_pl.zoo.mnist.data import NUM_CLASSES
from hynea_pl.zoo.quality import Gate
from hynea_pl.zoo.registry import BuildContext, Component
from hynea_pl.zoo.scenes.data import SceneConfig, scene_split
from hynea_pl.zoo.splits import ImageSplit

#: How both scene models expect their input: 1x64x64 in [0, 1], then (x - 0.5) / 0.5 (a ``Preprocess``'s fields).
SCENE_PREPROCESS = {"size": 64, "channels": 1, "mean": [0.5], "std": [0.5]}
#: ``attribute_names`` for :class:`~hynea_pl.suts.BinaryAttributeSUT`: attribute k is "digit k is present".
ATTRIBUTE_NAMES = [str(k) for k in range(NUM_CLASSES)]


class SceneAttributeCNN(nn.Module):
    """A VGG-style multi-label CNN: normalised scenes ``(B, in_channels, H, W)`` -> logits ``(B, num_classes)``.

    Each entry of ``channels`` is a 3x3 conv + batch norm + ReLU stage; every stage but the last is followed by
    2x2 max pooling (64 -> 32 -> 16 -> 8 -> 4 px with five stages). Global max pooling over positions then a linear
    head: attribute k's logit is its strongest evidence anywhere in the scene, wherever the digit is and however
    many others there are. Any input size works.
    """

    def __init__(self, channels: Sequence[int] = (8, 16, 32, 64, 128), num_classes: int = NUM_CLASSES,
                 in_channels: int = 1, dropout: float = 0.1) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        previous = in_channels
        for i, width in enumerate(channels):
            layers += [nn.Conv2d(previous, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
            if i < len(channels) - 1:
                layers.append(nn.MaxPool2d(2))
            previous = width
        self.body = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Dropout(dropout),
                                  nn.Linear(previous, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class SceneAttributeModel(nn.Module):
    """A frozen scene model on RAW images: ``(B, C, H, W)`` in [0, 1] -> logits ``(B, 10)`` (its entry's
    preprocess inside: grey, 64x64, normalised). Always in eval mode."""

    def __init__(self, network: nn.Module, preprocess: Preprocess) -> None:
        super().__init__()
        self.network = network.requires_grad_(False)
        self.preprocess = preprocess
        self.eval()

    def train(self, mode: bool = True) -> SceneAttributeModel:
        """Stays in eval mode (batch norm and dropout frozen)."""
        return super().train(False)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.network(self.preprocess(images))


@dataclass(frozen=True)
class AttributeSUTConfig:
    """The attribute SUT: a :class:`SceneAttributeCNN` trained on ``n_scenes`` training scenes (drawn from
    ``scene_seed``), shifted by up to ``max_shift`` px (every field is part of its cache key)."""

    channels: tuple[int, ...] = (8, 16, 32, 64, 128)
    dropout: float = 0.1
    n_scenes: int = 8000
    scene_seed: int = 170
    scenes: SceneConfig = field(default_factory=SceneConfig)
    lr: float = 3e-3
    weight_decay: float = 1e-4
    max_steps: int = 600
    batch_size: int = 64
    max_shift: int = 3
    seed: int = 171


@dataclass(frozen=True)
class AttributeOracleConfig:
    """The attribute oracle: an :class:`~hynea_pl.zoo.labelled.oracle.OracleNet` on its own ``n_scenes`` training scenes,
    with the MNIST oracle's augmentation fields (:class:`~hynea_pl.zoo.labelled.config.OracleConfig`: shift px, rotation
    degrees, scale fraction, stroke width, elastic, noise), milder in rotation and scale: a warp about the canvas
    centre moves a digit near an edge further than one of a centred digit."""

    widths: tuple[int, ...] = (16, 32, 64, 128)
    dropout: float = 0.1
    n_scenes: int = 8000
    scene_seed: int = 270
    scenes: SceneConfig = field(default_factory=SceneConfig)
    lr: float = 4e-3
    weight_decay: float = 5e-4
    max_steps: int = 500
    batch_size: int = 64
    max_shift: float = 3.0
    max_rotation: float = 8.0
    max_scale: float = 0.05
    stroke_prob: float = 0.5
    stroke_kernel: int = 2
    elastic_prob: float = 0.3
    elastic_alpha: float = 1.5
    elastic_grid: int = 8
    noise_prob: float = 0.5
    noise_max_std: float = 0.1
    seed: int = 271


@dataclass(frozen=True)
class AttributeGates:
    """Gates on ``n_scenes`` held-out scenes (from the held-out digits, drawn from ``scene_seed + 1``); ``None``
    records a value without enforcing it."""

    n_scenes: int = 1000
    scene_seed: int = 1700
    mean_auroc: float | None = 0.95
    mean_accuracy: float | None = None
    max_build_s: float | None = 180.0


class AttributeTraining(L.LightningModule):
    """Trains a multi-label scene model: ``augment`` (raw ``(B, 1, H, W)`` in [0, 1] -> same) on each batch, BCE
    with logits toward the ``(B, 10)`` multi-hot targets, AdamW, linear warm-up (a tenth of the steps) then cosine
    decay."""

    def __init__(self, model: nn.Module, augment: Callable[[torch.Tensor], torch.Tensor], lr: float,
                 weight_decay: float, max_steps: int) -> None:
        super().__init__()
        self.model = model
        self.augment = augment
        self.lr, self.weight_decay, self.max_steps = lr, weight_decay, max_steps
        self.preprocess = Preprocess(**SCENE_PREPROCESS)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        images, targets = batch
        with torch.no_grad():
            images = self.augment(images)
        loss = F.binary_cross_entropy_with_logits(self.model(self.preprocess(images)), targets)
        self.log("loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        warmup = max(1, self.max_steps // 10)
        scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [
            torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=1 / warmup, total_iters=warmup),
            torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(1, self.max_steps - warmup)),
        ], milestones=[warmup])
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def _train_and_save(name: str, network: nn.Module, init_args: dict, cfg, augment_fn, digits: ImageSplit,
                    out: Path) -> nn.Module:
    """Draw ``cfg.n_scenes`` training scenes from ``digits``, fit ``network``, save ``model.safetensors`` +
    ``config.json``."""
    from hynea_pl.zoo import train

    scenes, _ = scene_split(digits, cfg.n_scenes, 0, cfg.scene_seed, cfg.scenes)
    module = AttributeTraining(network, augment_fn, cfg.lr, cfg.weight_decay, cfg.max_steps)
    seconds = train.fit(module, TensorDataset(scenes.images, scenes.attributes()), cfg.batch_size, cfg.max_steps,
                        cfg.seed, name=name)
    network.eval()
    save_file({k: v.contiguous() for k, v in network.state_dict().items()}, str(out / "model.safetensors"))
    cls = type(network)
    config = {"class_path": f"{cls.__module__}.{cls.__qualname__}", "init_args": init_args,
              "preprocess": SCENE_PREPROCESS, "attribute_names": ATTRIBUTE_NAMES, "role": name,
              "training": dataclasses.asdict(cfg), "train_s": seconds}
    (out / "config.json").write_text(json.dumps(config, indent=2))
    return network


def sut_init_args(cfg: AttributeSUTConfig) -> dict:
    return {"channels": list(cfg.channels), "num_classes": NUM_CLASSES, "in_channels": 1, "dropout": cfg.dropout}


def oracle_init_args(cfg: AttributeOracleConfig) -> dict:
    return {"widths": list(cfg.widths), "num_classes": NUM_CLASSES, "in_channels": 1, "dropout": cfg.dropout}


def train_attribute_sut(cfg: AttributeSUTConfig, context: BuildContext, out: Path) -> nn.Module:
    """Train the :class:`SceneAttributeCNN` SUT with small shifts; save it to ``out``."""
    from hynea_pl.zoo import train

    train.console.print(f"[bold]zoo[/]: training attribute_sut (SceneAttributeCNN {list(cfg.channels)}, "
                        f"{cfg.n_scenes} scenes, {cfg.max_steps} steps of batch {cfg.batch_size})")
    torch.manual_seed(cfg.seed)
    init_args = sut_init_args(cfg)
    return _train_and_save("attribute_sut", SceneAttributeCNN(**init_args), init_args, cfg,
                           lambda images: random_shift(images, cfg.max_shift), context.data.sut, out)


def train_attribute_oracle(cfg: AttributeOracleConfig, context: BuildContext, out: Path) -> nn.Module:
    """Train the residual :class:`~hynea_pl.zoo.labelled.oracle.OracleNet` oracle with the MNIST oracle's augmentation."""
    from hynea_pl.zoo import train

    train.console.print(f"[bold]zoo[/]: training attribute_oracle (OracleNet {list(cfg.widths)}, "
                        f"{cfg.n_scenes} scenes, {cfg.max_steps} steps of batch {cfg.batch_size})")
    torch.manual_seed(cfg.seed)
    init_args = oracle_init_args(cfg)
    return _train_and_save("attribute_oracle", OracleNet(**init_args), init_args, cfg,
                           lambda images: augment(images, cfg), context.data.judges, out)


def _load(entry: Path, network_class: type[nn.Module]) -> SceneAttributeModel:
    entry = Path(entry)
    for name in ("config.json", "model.safetensors"):
        if not (entry / name).is_file():
            raise FileNotFoundError(f"scene attribute model: {entry / name} not found (rebuild the zoo extra)")
    config = json.loads((entry / "config.json").read_text())
    network = network_class(**config["init_args"])
    network.load_state_dict(load_file(str(entry / "model.safetensors")))
    return SceneAttributeModel(network, Preprocess(**config["preprocess"]))


def load_attribute_sut(entry: Path) -> SceneAttributeModel:
    """The frozen attribute SUT of an ``attribute_sut`` entry, on RAW scenes ``(B, 1, 64, 64)`` in [0, 1]."""
    return _load(entry, SceneAttributeCNN)


def load_attribute_oracle(entry: Path) -> SceneAttributeModel:
    """The frozen attribute oracle of an ``attribute_oracle`` entry, on RAW scenes ``(B, 1, 64, 64)`` in [0, 1]."""
    return _load(entry, OracleNet)


@torch.no_grad()
def attribute_logits(model: nn.Module, images: torch.Tensor, batch_size: int = 250) -> torch.Tensor:
    """Logits ``(N, 10)`` of a raw-image scene model on ``images (N, 1, 64, 64)`` in [0, 1], in batches."""
    return torch.cat([model(images[i:i + batch_size]) for i in range(0, len(images), batch_size)])


def attribute_scores(logits: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
    """Multi-label scores of ``logits (N, K)`` against multi-hot ``targets (N, K)``: ``mean_auroc`` and
    ``min_auroc`` over the K attributes, ``mean_accuracy`` (of ``logit > 0``, averaged over attributes) and
    ``exact_match`` (all K decisions right)."""
    from torchmetrics.functional.classification import multilabel_auroc

    aurocs = multilabel_auroc(logits, targets.long(), num_labels=targets.shape[1], average="none")
    correct = (logits > 0) == targets.bool()
    return {"mean_auroc": aurocs.mean().item(), "min_auroc": aurocs.min().item(),
            "mean_accuracy": correct.float().mean(0).mean().item(),
            "exact_match": correct.all(1).float().mean().item()}


def _measure(load: Callable[[Path], nn.Module]) -> Callable[[AttributeGates, Path, BuildContext, Path], list[Gate]]:
    def measure(gates: AttributeGates, entry: Path, context: BuildContext, out: Path) -> list[Gate]:
        """The module doc's gates on held-out scenes (held-out digits only)."""
        _, held_out = scene_split(context.data.sut, 0, gates.n_scenes, gates.scene_seed)  # held-out digits only
        scores = attribute_scores(attribute_logits(load(entry), held_out.images), held_out.attributes())
        return [Gate("mean_auroc", scores["mean_auroc"], gates.mean_auroc),
                Gate("mean_accuracy", scores["mean_accuracy"], gates.mean_accuracy),
                Gate("min_auroc", scores["min_auroc"], None),
                Gate("exact_match", scores["exact_match"], None)]

    return measure


SUT_CONFIGS = {
    "full": AttributeSUTConfig(),
    "tiny": AttributeSUTConfig(channels=(4, 8), n_scenes=32, max_steps=3, batch_size=16),
}
ORACLE_CONFIGS = {
    "full": AttributeOracleConfig(),
    "tiny": AttributeOracleConfig(widths=(4, 8), n_scenes=32, max_steps=3, batch_size=16),
}
GATE_CONFIGS = {
    "full": AttributeGates(),
    "tiny": AttributeGates(n_scenes=32, mean_auroc=None, mean_accuracy=None, max_build_s=None),
}

#: This module's zoo components (read by :mod:`hynea_pl.zoo.registry`).
ZOO_COMPONENTS = (
    Component(
        name="attribute_sut", train_configs=SUT_CONFIGS, gate_configs=GATE_CONFIGS, train=train_attribute_sut,
        measure=_measure(load_attribute_sut), load=load_attribute_sut, uri_target="model.safetensors", base_gated=False,
        description="digit scenes' multi-label SUT: SceneAttributeCNN, 10 logits 'digit k present' "
                    "(BinaryAttributeSUT)",
    ),
    Component(
        name="attribute_oracle", train_configs=ORACLE_CONFIGS, gate_configs=GATE_CONFIGS,
        train=train_attribute_oracle, measure=_measure(load_attribute_oracle), load=load_attribute_oracle,
        uri_target="model.safetensors", base_gated=False,
        description="digit scenes' validity judge (one of configs/sections/scenes_oracle.yaml's two): "
                    "residual OracleNet, 10 logits 'digit k present'; judges only",
    ),
)


__all__ = [
    "ATTRIBUTE_NAMES", "SCENE_PREPROCESS", "AttributeGates", "AttributeOracleConfig", "AttributeSUTConfig",
    "AttributeTraining", "SceneAttributeCNN", "SceneAttributeModel", "attribute_logits", "attribute_scores",
    "load_attribute_oracle", "load_attribute_sut", "train_attribute_oracle", "train_attribute_sut",
]
