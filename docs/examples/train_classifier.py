"""A classifier of your own, trained on a folder of labelled images: a stand-in for the model you want to test.

    .venv/bin/python docs/examples/train_classifier.py DATA OUT.pth [--arch mobilenet_v3_small] [--size 64]
        [--epochs 3] [--batch-size 64] [--seed 0]

``DATA`` is an ``ImageFolder`` (``DATA/<class>/<image>``). Any torchvision classification model, by name, is trained
from scratch at ``--size`` px (RGB, normalised to [-1, 1]) on 90 % of the images; the accuracy on the other 10 % is
printed, the state dict saved to ``OUT.pth``, and the ``sut`` section that tests it written next to it as ``OUT.yaml``
(``fit ... --sut OUT.yaml``): :class:`hynea_pl.suts.PretrainedClassifierSUT` with the same preprocessing, so that the
generator's images reach the model as its training images did.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import yaml
from torch.utils.data import DataLoader, random_split
from torchvision import datasets, models
from torchvision.transforms import v2


def load_folder(root: Path, size: int) -> datasets.ImageFolder:
    """The folder's images as RGB ``(3, size, size)`` floats in [-1, 1], with their class indices."""
    transform = v2.Compose([v2.ToImage(), v2.RGB(), v2.Resize(size, antialias=True),
                            v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.5] * 3, [0.5] * 3)])
    return datasets.ImageFolder(str(root), transform=transform)


def accuracy(model: torch.nn.Module, loader: DataLoader) -> float:
    """Top-1 accuracy of ``model`` over ``loader``."""
    model.eval()
    right = total = 0
    with torch.no_grad():
        for images, labels in loader:
            right += int((model(images).argmax(1) == labels).sum())
            total += len(labels)
    return right / max(total, 1)


def train(data: datasets.ImageFolder, arch: str, epochs: int, batch_size: int,
          seed: int) -> tuple[torch.nn.Module, float]:
    """``arch`` trained from scratch (AdamW, one-cycle) on 90 % of ``data``; returns it and its held-out accuracy."""
    torch.manual_seed(seed)
    held = max(1, len(data) // 10)
    train_set, test_set = random_split(data, [len(data) - held, held], generator=torch.Generator().manual_seed(seed))
    loader = DataLoader(train_set, batch_size=batch_size, shuffle=True, drop_last=True,
                        generator=torch.Generator().manual_seed(seed))
    model = getattr(models, arch)(num_classes=len(data.classes))
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    steps = epochs * len(loader)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=2e-3, total_steps=steps)
    start, step = time.perf_counter(), 0
    for epoch in range(epochs):
        model.train()
        for images, labels in loader:
            loss = F.cross_entropy(model(images), labels, label_smoothing=0.05)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            step += 1
            if step % 50 == 0 or step == steps:
                print(f"train {arch}: step {step}/{steps}, loss {loss.item():.3f}, {time.perf_counter() - start:.0f} s",
                      file=sys.stderr, flush=True)
    return model.eval(), accuracy(model, DataLoader(test_set, batch_size=256))


def sut_section(arch: str, weights: Path, num_classes: int, size: int) -> dict:
    """The content of a campaign config's ``sut`` section (``--sut OUT.yaml``) that tests the saved model with its
    training preprocessing."""
    return {"class_path": "hynea_pl.suts.PretrainedClassifierSUT", "init_args": {
        "name": arch, "source": "torchvision", "weights": str(weights.resolve()), "num_classes": num_classes,
        "preprocess": {"size": size, "channels": 3, "mean": [0.5] * 3, "std": [0.5] * 3}}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="an ImageFolder: DATA/<class>/<image>")
    parser.add_argument("out", type=Path, help="the state dict to write (.pth); its sut section goes to OUT.yaml")
    parser.add_argument("--arch", default="mobilenet_v3_small", help="a torchvision classification model's name")
    parser.add_argument("--size", type=int, default=64, help="the model's input size (px)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        parser.error(f"{args.data} is no folder")
    start = time.perf_counter()
    data = load_folder(args.data, args.size)
    model, held_out = train(data, args.arch, args.epochs, args.batch_size, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), args.out)
    config = args.out.with_suffix(".yaml")
    config.write_text(yaml.safe_dump(sut_section(args.arch, args.out, len(data.classes), args.size), sort_keys=False))
    print(f"{args.arch} on {len(data)} images of {len(data.classes)} classes: held-out accuracy {held_out:.4f}, "
          f"{time.perf_counter() - start:.0f} s; weights {args.out}, sut section {config}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
