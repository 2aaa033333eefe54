"""Small CNN digit classifiers: the zoo's system under test and its (separately trained) embedder."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import lightning as L
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn

from hynea_pl.zoo.augment import random_shift


class SmallCNN(nn.Module):
    """A VGG-style CNN for 1x32x32 digits, normalised input ``(B, 1, 32, 32)`` -> logits ``(B, num_classes)``.

    Each entry of ``channels`` is a stage of two 3x3 convolutions followed by 2x2 max pooling;
    ``features`` returns the penultimate ``(B, hidden)`` activations (used as embeddings).
    """

    family = "cnn"

    def __init__(
        self,
        channels: Sequence[int] = (32, 64),
        hidden: int = 128,
        num_classes: int = 10,
        in_channels: int = 1,
        image_size: int = 32,
        dropout: float = 0.25,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        previous = in_channels
        for width in channels:
            layers += [
                nn.Conv2d(previous, width, 3, padding=1),
                nn.ReLU(),
                nn.Conv2d(width, width, 3, padding=1),
                nn.ReLU(),
                nn.MaxPool2d(2),
            ]
            previous = width
        spatial = image_size // 2 ** len(channels)
        self.body = nn.Sequential(*layers, nn.Flatten())
        self.neck = nn.Sequential(
            nn.Dropout(dropout), nn.Linear(previous * spatial * spatial, hidden), nn.ReLU()
        )
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(hidden, num_classes))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Penultimate features ``(B, hidden)``."""
        return self.neck(self.body(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def load_classifier(entry: Path) -> SmallCNN:
    """A frozen SmallCNN from a zoo classifier entry (``config.json`` + ``model.safetensors``)."""
    config = json.loads((entry / "config.json").read_text())
    model = SmallCNN(**config["init_args"])
    model.load_state_dict(load_file(str(entry / "model.safetensors")))
    return note_training_data(model.eval().requires_grad_(False), config)


def note_training_data(model: nn.Module, config: dict) -> nn.Module:
    """Name on ``model`` the digits its zoo entry's ``config`` says it trained on (``training_data``,
    ``zoo-digits:<split>``; see :func:`hynea_pl.suts.family.model_data`), and return it."""
    if config.get("data_split"):
        model.training_data = {f"zoo-digits:{config['data_split']}"}
    return model


def normalize(images: torch.Tensor, mean: float = 0.5, std: float = 0.5) -> torch.Tensor:
    """Map images in [0, 1] to the classifier's input range."""
    return (images - mean) / std


class ClassifierTraining(L.LightningModule):
    """Trains a :class:`SmallCNN` with cross entropy, light shift augmentation, AdamW and cosine decay."""

    def __init__(self, model: SmallCNN, lr: float, max_steps: int, max_shift: int = 2) -> None:
        super().__init__()
        self.model = model
        self.lr = lr
        self.max_steps = max_steps
        self.max_shift = max_shift

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        images, labels = batch
        images = random_shift(images, self.max_shift)
        loss = F.cross_entropy(self.model(normalize(images)), labels)
        self.log("loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.lr, weight_decay=1e-4)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=self.max_steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


@torch.no_grad()
def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, batch_size: int = 500) -> float:
    """Top-1 accuracy of ``model`` on images in [0, 1] ``(N, 1, 32, 32)``."""
    model.eval()
    correct = 0
    for start in range(0, len(labels), batch_size):
        logits = model(normalize(images[start : start + batch_size]))
        correct += (logits.argmax(1) == labels[start : start + batch_size]).sum().item()
    return correct / len(labels)
