"""The zoo embedder as a metric backbone: digit images in [0, 1] -> penultimate features."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from hynea_pl.zoo.labelled.classifier import SmallCNN, load_classifier, normalize


class ImageEmbedder(nn.Module):
    """``images (B, C, S, S) in [0, 1] -> (B, hidden)`` penultimate features of the zoo's embedder network
    (trained separately from the SUT), used for the realism test and the diversity and trace-difference metrics (RGB
    is averaged to grey for a grey network)."""

    def __init__(self, network: SmallCNN) -> None:
        super().__init__()
        self.network = network.eval().requires_grad_(False)

    @torch.no_grad()
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if images.shape[1] == 3 and self.network.body[0].in_channels == 1:
            images = images.mean(1, keepdim=True)
        return self.network.features(normalize(images))


def load_embedder(entry: Path) -> ImageEmbedder:
    """The metric embedder of a zoo embedder entry (a classifier entry: ``config.json`` + ``model.safetensors``)."""
    return ImageEmbedder(load_classifier(entry))
