"""A "third-party" MNIST classifier for the preprocessing tests: trained on 28 px digits (the shipped 32 px zoo
digits centre-cropped back to 28 px) and normalised with MNIST's mean / std, so it only reads the zoo's 32 px
images through a ``CenterCrop(28)`` + ``Normalize`` pipeline (its linear layer accepts nothing but 28 px)."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

#: MNIST's pixel mean and std, the statistics the model was trained with
MNIST_MEAN = 0.1307
MNIST_STD = 0.3081


class Digit28CNN(nn.Module):
    """``images (B, 1, 28, 28), normalised -> logits (B, 10)``; any other size is a shape error."""

    def __init__(self, channels: int = 8, hidden: int = 32) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, 2 * channels, 3, padding=1)
        self.fc1 = nn.Linear(2 * channels * 7 * 7, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def crop28(images: torch.Tensor) -> torch.Tensor:
    """The model's own input from zoo images ``(B, 1, 32, 32)`` in [0, 1]: the centre 28 x 28, normalised."""
    return (images[..., 2:30, 2:30] - MNIST_MEAN) / MNIST_STD


def train_digit28(path: Path, epochs: int = 2, seed: int = 0) -> tuple[Path, float]:
    """Train :class:`Digit28CNN` on the shipped digits' training split (cropped to 28 px) with a fixed seed, save
    its state dict to ``path`` and return it with the held-out accuracy (a few seconds on one thread)."""
    from hynea_pl.zoo.mnist.data import load_digits

    torch.manual_seed(seed)
    split = load_digits().sut  # a third party's own digits: the first 4000 of the SUT's split
    images, labels = crop28(split.train_images[:4000]), split.train_labels[:4000]
    model = Digit28CNN()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for batch in torch.randperm(len(labels), generator=generator).split(64):
            loss = F.cross_entropy(model(images[batch]), labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.eval()
    with torch.no_grad():
        accuracy = float((model(crop28(split.test_images)).argmax(-1) == split.test_labels).float().mean())
    torch.save(model.state_dict(), path)
    return path, accuracy
