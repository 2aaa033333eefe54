"""The validity oracle: digit classifiers trained independently of the SUT (other architectures, seeds and a
stronger augmentation) that judge whether a generated test image still shows its original digit.

``steer-cnn`` is the steering member (a method may use it in its loss or stop rule): a plain CNN. The judges
(they only judge, unanimously) are of three other families: two residual CNNs (``oracle-1``, ``oracle-2``),
timm's ConvMixer (``judge-convmixer``) and a k-NN vote over deskewed pixels (``judge-knn``).
"""

from __future__ import annotations

import functools
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

from hynea_pl.zoo.augment import random_affine, random_elastic, random_noise, random_stroke
from hynea_pl.zoo.cache import import_class
from hynea_pl.zoo.labelled.classifier import SmallCNN, normalize, note_training_data
from hynea_pl.zoo.labelled.config import CNNOracleConfig, ConvMixerOracleConfig, KNNOracleConfig, OracleConfig
from hynea_pl.zoo.labelled.knn import KNNClassifier, reference_embeddings
from hynea_pl.zoo.splits import implied_data_class

#: The members' roles: the steering member may guide a search, the judges never do.
#: The k-NN member: no weights, its reference is derived from the training digits at load.
KNN_JUDGE = "judge-knn"
ORACLE_ROLES: dict[str, list[str]] = {"steering": ["steer-cnn"],
                                      "judges": ["oracle-1", "oracle-2", "judge-convmixer", KNN_JUDGE]}
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
    averaged to grey for a grey network, then normalised as the zoo's classifiers expect). Always in eval mode."""

    def __init__(self, network: nn.Module, in_channels: int = 1) -> None:
        super().__init__()
        self.network = network.requires_grad_(False)
        self.in_channels = in_channels
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
    class path and init args (for ``config.json``)."""
    channels, num_classes = data.channels, data.num_classes
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


def load_oracle(entry: Path) -> nn.Module:
    """The frozen member of a zoo oracle entry (``config.json`` + ``model.safetensors``), on raw images: an
    :class:`OracleClassifier` around a trained network, or the :class:`~hynea_pl.zoo.labelled.knn.KNNClassifier`
    (its reference derived from the recipe in ``config.json``, or read from an entry that stored it)."""
    config = json.loads((entry / "config.json").read_text())
    network_class = import_class(config["class_path"])
    weights = entry / "model.safetensors"
    if network_class is KNNClassifier:
        if weights.is_file():
            state = load_file(str(weights))
            reference, labels = state["reference"], state["labels"]
        else:
            reference, labels = knn_reference(json.dumps(config["reference"], sort_keys=True))
        return note_training_data(KNNClassifier(reference, labels, **config["init_args"]).eval(), config)
    network = network_class(**config["init_args"])
    network.load_state_dict(load_file(str(weights)))
    return note_training_data(OracleClassifier(network, config["preprocess"]["channels"]), config)


@functools.lru_cache(maxsize=2)
def knn_reference(recipe: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The k-NN member's reference ``(M, D)`` and labels ``(M,)`` from its recipe (JSON: the profile's data config,
    its class unless unnamed recipes imply it (:func:`hynea_pl.zoo.splits.recipe_data_class`), the split it keeps
    and the :class:`KNNOracleConfig`), derived once per process."""
    from hynea_pl.zoo.labelled.config import PixelKNNOracleConfig

    recipe = json.loads(recipe)
    data_class = import_class(recipe["data_class"]) if "data_class" in recipe else implied_data_class()
    fields = {key: tuple(value) if isinstance(value, list) else value for key, value in recipe["data"].items()}
    data = data_class(**fields).read_splits()[recipe["split"]]
    if "deskew" in recipe["knn"]:  # a folder profile's (recorded before standardize: every channel as it is)
        config = PixelKNNOracleConfig(**{"standardize": False, **recipe["knn"]})
    else:
        config = KNNOracleConfig(**recipe["knn"])
    return reference_embeddings(data.train_images.float(), data.train_labels, config)


def augment(images: torch.Tensor, cfg: OracleConfig, generator: torch.Generator | None = None) -> torch.Tensor:
    """The oracle's training augmentation on ``(B, C, H, W)`` in [0, 1] (digits, or the 64x64 digit scenes of
    :mod:`hynea_pl.zoo.scenes.attributes`): stroke width, elastic, affine, then pixel noise. ``cfg`` is an
    :class:`OracleConfig` or any config with its augmentation fields."""
    images = random_stroke(images, cfg.stroke_prob, cfg.stroke_kernel, generator)
    images = random_elastic(images, cfg.elastic_prob, cfg.elastic_alpha, cfg.elastic_grid, generator)
    images = random_affine(images, cfg.max_shift, cfg.max_rotation, cfg.max_scale, generator)
    return random_noise(images, cfg.noise_prob, cfg.noise_max_std, generator)


class OracleTraining(L.LightningModule):
    """Trains an oracle member's network: augmented batches, label-smoothed cross entropy, AdamW, linear warm-up then
    cosine decay."""

    def __init__(self, model: nn.Module, cfg: OracleConfig) -> None:
        super().__init__()
        self.model = model
        self.cfg = cfg

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        images, labels = batch
        with torch.no_grad():
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
