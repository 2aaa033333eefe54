"""The validity oracle: digit classifiers trained independently of the SUT (other architectures, seeds and a
stronger augmentation) that judge whether a generated test image still shows its original digit.

``steer-cnn`` is the steering member (a method may use it in its loss or stop rule): a plain CNN. The judges
(they only judge, as a panel: :class:`~hynea_pl.suts.EnsembleClassifierSUT`) are of two other families: two residual
CNNs (``oracle-1``, ``oracle-2``) and timm's ConvMixer (``judge-convmixer``). A judge trained to read like people
(:class:`~hynea_pl.zoo.labelled.config.PeopleChanges`) has one more output, its "not a digit" answer
(:attr:`OracleClassifier.not_a_class`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn

from hynea_pl.zoo.augment import (
    random_affine, random_blur, random_dimming, random_elastic, random_erasure, random_lighting, random_noise,
    random_occlusion, random_stroke,
)
from hynea_pl.zoo.cache import import_class
from hynea_pl.zoo.labelled.classifier import SmallCNN, normalize, note_training_data
from hynea_pl.zoo.labelled.config import CNNOracleConfig, ConvMixerOracleConfig, OracleConfig, PeopleChanges
from hynea_pl.zoo.outliers import not_digits

#: The members' roles: the steering member may guide a search, the judges never do.
ORACLE_ROLES: dict[str, list[str]] = {"steering": ["steer-cnn"], "judges": ["oracle-1", "oracle-2", "judge-convmixer"]}
ORACLE_NAMES: tuple[str, ...] = (*ORACLE_ROLES["steering"], *ORACLE_ROLES["judges"])


class ResidualBlock(nn.Module):
    """Two 3x3 conv + batch norm layers with an identity (or strided 1x1) shortcut: ``(B, c_in, H, W) ->
    (B, c_out, H / stride, W / stride)``."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Identity() if stride == 1 and c_in == c_out else nn.Sequential(
            nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class OracleNet(nn.Module):
    """A small residual CNN (batch norm, global average pooling): normalised images ``(B, 1, 32, 32)`` ->
    logits ``(B, num_classes)``.

    A strided 3x3 conv stem (``widths[0]`` channels, 32 -> 16), then one residual block per width, the first at
    stride 1 and the others halving the resolution (16 -> 8 -> 4 with three widths), global average pooling,
    dropout and a linear head. The defaults are the judges' architecture.
    """

    family = "resnet"

    def __init__(self, widths: Sequence[int] = (32, 64, 128), num_classes: int = 10, in_channels: int = 1,
                 dropout: float = 0.1) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, widths[0], 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(widths[0]), nn.ReLU(),
        )
        self.blocks = nn.Sequential(*(ResidualBlock(c_in, c_out, 1 if i == 0 else 2)
                                      for i, (c_in, c_out) in enumerate(zip((widths[0], *widths), widths))))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(dropout),
                                  nn.Linear(widths[-1], num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)))


class OracleClassifier(nn.Module):
    """A frozen oracle member on RAW images: ``(B, C, S, S)`` in [0, 1] -> logits ``(B, num_classes)`` (RGB is
    averaged to grey for a grey network, then normalised as the zoo's classifiers expect). Always in eval mode.
    ``not_a_class``: the output of a judge's "not a digit" answer (its last), ``None`` for a member without one."""

    def __init__(self, network: nn.Module, in_channels: int = 1, not_a_class: int | None = None) -> None:
        super().__init__()
        self.network = network.requires_grad_(False)
        self.in_channels = in_channels
        self.not_a_class = not_a_class
        self.eval()

    @property
    def family(self) -> str:
        """The wrapped network's family (see :func:`hynea_pl.suts.model_families`)."""
        from hynea_pl.suts.family import network_family

        return network_family(self.network)

    def train(self, mode: bool = True) -> OracleClassifier:
        """Stays in eval mode (batch norm and dropout frozen)."""
        return super().train(False)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if images.shape[1] == 3 and self.in_channels == 1:
            images = images.mean(1, keepdim=True)
        return self.network(normalize(images))


def oracle_network(cfg: OracleConfig, data: Any) -> tuple[nn.Module, str, dict]:
    """A fresh network for a trained member's config on a profile's images (its data config ``data``), with its
    class path and init args (for ``config.json``). A judge that reads like people (:class:`PeopleChanges`) has one
    output more than the profile has classes: its "not a digit" answer."""
    channels, num_classes = data.channels, data.num_classes + int(isinstance(cfg, PeopleChanges))
    if isinstance(cfg, ConvMixerOracleConfig):
        from timm.models.convmixer import ConvMixer

        cls, args = ConvMixer, {"dim": cfg.dim, "depth": cfg.depth, "kernel_size": cfg.kernel_size,
                                "patch_size": cfg.patch_size, "in_chans": channels, "num_classes": num_classes}
    elif isinstance(cfg, CNNOracleConfig):
        cls, args = SmallCNN, {"channels": list(cfg.channels), "hidden": cfg.hidden, "dropout": cfg.dropout,
                               "num_classes": num_classes, "in_channels": channels, "image_size": data.image_size}
    else:
        cls, args = OracleNet, {"widths": list(cfg.widths), "num_classes": num_classes, "in_channels": channels,
                                "dropout": cfg.dropout}
    return cls(**args), f"{cls.__module__}.{cls.__qualname__}", args


def oracle_role(name: str) -> str:
    """``steering`` or ``judge``, the role of the member ``name``."""
    return "steering" if name in ORACLE_ROLES["steering"] else "judge"


def load_oracle(entry: Path) -> OracleClassifier:
    """The frozen member of a zoo oracle entry (``config.json`` + ``model.safetensors``), on raw images: an
    :class:`OracleClassifier` around the trained network (a judge trained to read like people: with its "not a
    digit" output, the last)."""
    config = json.loads((entry / "config.json").read_text())
    network = import_class(config["class_path"])(**config["init_args"])
    network.load_state_dict(load_file(str(entry / "model.safetensors")))
    not_a_class = config["init_args"]["num_classes"] - 1 if "not_digit_share" in config["training"] else None
    return note_training_data(OracleClassifier(network, config["preprocess"]["channels"], not_a_class), config)


def augment(images: torch.Tensor, cfg: OracleConfig, generator: torch.Generator | None = None) -> torch.Tensor:
    """The oracle's training augmentation on ``(B, C, H, W)`` in [0, 1] (digits, or the 64x64 digit scenes of
    :mod:`hynea_pl.zoo.scenes.attributes`): stroke width, elastic, affine, then (a judge that reads like people,
    :class:`PeopleChanges`) blur, dimming, broken strokes, occlusion and lighting, then pixel noise. ``cfg`` is an
    :class:`OracleConfig` or any config with its augmentation fields."""
    images = random_stroke(images, cfg.stroke_prob, cfg.stroke_kernel, generator)
    images = random_elastic(images, cfg.elastic_prob, cfg.elastic_alpha, cfg.elastic_grid, generator)
    images = random_affine(images, cfg.max_shift, cfg.max_rotation, cfg.max_scale, generator)
    if isinstance(cfg, PeopleChanges):
        images = random_blur(images, cfg.blur_prob, cfg.blur_max_sigma, generator)
        images = random_dimming(images, cfg.dim_prob, cfg.dim_min_factor, generator)
        images = random_erasure(images, cfg.erase_prob, cfg.erase_min_keep, generator=generator)
        images = random_occlusion(images, cfg.occlusion_prob, generator)
        images = random_lighting(images, cfg.lighting_prob, cfg.lighting_max_level, generator)
    return random_noise(images, cfg.noise_prob, cfg.noise_max_std, generator)


def with_not_digits(images: torch.Tensor, labels: torch.Tensor, share: float, not_digit_label: int,
                    generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch ``(B, C, H, W)``, ``(B,)`` plus ``round(share * B)`` images that show no digit, made from the batch's
    first images (:func:`~hynea_pl.zoo.outliers.not_digits`) and labelled ``not_digit_label``."""
    n = round(share * len(images))
    if n <= 0:
        return images, labels
    made = not_digits(images[:n], generator)
    return torch.cat([images, made]), torch.cat([labels, labels.new_full((n,), not_digit_label)])


class OracleTraining(L.LightningModule):
    """Trains an oracle member's network: augmented batches (a judge that reads like people: plus images that show no
    digit, labelled ``not_digit_label``), label-smoothed cross entropy, AdamW, linear warm-up then cosine decay."""

    def __init__(self, model: nn.Module, cfg: OracleConfig, not_digit_label: int | None = None) -> None:
        super().__init__()
        if isinstance(cfg, PeopleChanges) and not_digit_label is None:
            raise ValueError("a judge that reads like people needs the label of its 'not a digit' answer")
        self.model = model
        self.cfg = cfg
        self.not_digit_label = not_digit_label

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        images, labels = batch
        with torch.no_grad():
            if isinstance(self.cfg, PeopleChanges):  # the judge's "not a digit" answer: one class past the digits'
                extra = with_not_digits(images, labels, self.cfg.not_digit_share, self.not_digit_label)
                images = torch.cat([augment(images, self.cfg), extra[0][len(images):]])
                labels = extra[1]
            else:
                images = augment(images, self.cfg)
        loss = F.cross_entropy(self.model(normalize(images)), labels, label_smoothing=self.cfg.label_smoothing)
        self.log("loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        cfg = self.cfg
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        warmup = max(1, cfg.max_steps // 10)

        def factor(step: int) -> float:
            if step < warmup:
                return (step + 1) / warmup
            return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, cfg.max_steps - warmup))))

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
