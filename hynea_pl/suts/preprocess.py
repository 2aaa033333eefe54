"""A SUT's preprocessing as a tensor transform: a :class:`Preprocess` (the dict form), any
``torchvision.transforms.v2`` pipeline that runs on a tensor batch, or timm's pretrained data config.

A SUT's ``preprocess`` maps images ``(B, C, H, W)`` in [0, 1] to the model's input and must stay differentiable
(HyNeA back-propagates through the SUT). YAML forms (``sut.init_args.preprocess``)::

    preprocess: {size: 32, channels: 1, mean: [0.5], std: [0.5]}      # Preprocess: resize, channels, normalise

    preprocess:                                                         # a torchvision v2 pipeline
      class_path: torchvision.transforms.v2.Compose
      init_args:
        transforms:
          - class_path: torchvision.transforms.v2.CenterCrop
            init_args: {size: 28}
          - class_path: torchvision.transforms.v2.Normalize
            init_args: {mean: [0.1307], std: [0.3081]}

A transform is wrapped in :class:`TensorTransform`, which turns a transform that cannot run on a tensor batch
(``ToPILImage``, a PIL-only v1 transform, a cast to ``uint8`` that cuts the gradient) into a one-line error on the
first call that shows it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from jsonargparse import set_parsing_settings
from torch import nn


@dataclass
class Preprocess:
    """How the SUT expects its input, applied to images in [0, 1].

    ``size``: resize to ``size x size`` (bilinear, antialiased) when set; ``channels``: 1 (grayscale, ITU-R 601
    luma) or 3 (RGB, grayscale repeated) when set; then ``(x - mean) / std`` per channel.
    """

    size: int | None = None
    channels: int | None = None
    mean: list[float] = field(default_factory=lambda: [0.0])
    std: list[float] = field(default_factory=lambda: [1.0])

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        if images.ndim != 4:
            raise ValueError(f"SUT input must be (B, C, H, W) images, got shape {tuple(images.shape)}")
        if self.channels == 1 and images.shape[1] == 3:
            weights = images.new_tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)
            images = (images * weights).sum(1, keepdim=True)
        elif self.channels == 3 and images.shape[1] == 1:
            images = images.expand(-1, 3, -1, -1)
        elif self.channels is not None and images.shape[1] != self.channels:
            raise ValueError(f"SUT expects {self.channels} channels, got images of shape {tuple(images.shape)}")
        if self.size is not None and images.shape[-2:] != (self.size, self.size):
            images = F.interpolate(images, size=(self.size, self.size), mode="bilinear", antialias=True,
                                   align_corners=False)
        mean = images.new_tensor(self.mean).view(1, -1, 1, 1)
        std = images.new_tensor(self.std).view(1, -1, 1, 1)
        return (images - mean) / std



# the dict form parses as ``class_path: hynea_pl.suts.Preprocess``, so that a later config or ``--sut`` file that
# gives a pipeline replaces it (merged into a dataclass value, a pipeline's class_path would be lost)
set_parsing_settings(subclasses_enabled=[Preprocess])

def _describe(transform: Any) -> str:
    """The transform on one line (``Compose(CenterCrop(size=(28, 28)), Normalize(...))``)."""
    text = ""
    for part in filter(None, (line.strip() for line in repr(transform).splitlines())):
        text += part if not text or text.endswith("(") or part.startswith(")") else ", " + part
    return text


class TensorTransform(nn.Module):
    """A SUT's preprocessing from a tensor transform: ``images (B, C, H, W) -> transform(images) (B, C', H', W')``.

    ``transform``: a ``torchvision.transforms.v2`` transform (``Compose``, ``Resize``, ``CenterCrop``, ``Pad``,
    ``Normalize``, ``Grayscale``, ``RGB``, ...) or any callable of a tensor batch. A transform that raises on the
    batch, returns no 4-d tensor, or cuts the gradient is a one-line ``ValueError`` naming it.
    """

    def __init__(self, transform: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        if not callable(transform):
            raise TypeError(f"SUT preprocess must be a callable transform, got {type(transform).__name__}")
        self.transform = transform

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if images.ndim != 4:
            raise ValueError(f"SUT input must be (B, C, H, W) images, got shape {tuple(images.shape)}")
        shape = tuple(images.shape)
        try:
            out = self.transform(images)
        except Exception as error:  # noqa: BLE001 - any failure of a user's transform becomes one line naming it
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise ValueError(f"SUT preprocess {_describe(self.transform)} cannot run on a tensor batch {shape}: "
                             f"{first}") from None
        if not isinstance(out, torch.Tensor) or out.ndim != 4:
            got = f"shape {tuple(out.shape)}" if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f"SUT preprocess {_describe(self.transform)} must map a tensor batch {shape} to a "
                             f"(B, C, H, W) tensor, got {got}")
        if images.requires_grad and torch.is_grad_enabled() and not out.requires_grad:
            raise ValueError(f"SUT preprocess {_describe(self.transform)} cuts the gradient (HyNeA back-propagates "
                             "through the SUT): use float tensor transforms only")
        return out


def as_preprocess(preprocess: Preprocess | nn.Module | Callable | dict | None) -> nn.Module | Preprocess:
    """A SUT's preprocessing from what its ``preprocess`` argument was given: ``None`` (none: images as they are),
    a :class:`Preprocess` (kept), its fields as a dict, or a tensor transform (wrapped in :class:`TensorTransform`)."""
    if preprocess is None:
        return Preprocess()
    if isinstance(preprocess, (Preprocess, TensorTransform)):
        return preprocess
    if isinstance(preprocess, dict):
        return Preprocess(**preprocess)
    if callable(preprocess):
        return TensorTransform(preprocess)
    raise TypeError(f"SUT preprocess must be a Preprocess, its fields or a tensor transform, got "
                    f"{type(preprocess).__name__}")


def timm_preprocess(model: nn.Module, image_size: int | None = None) -> TensorTransform:
    """timm's eval preprocessing of ``model`` from its pretrained data config (``timm.data.resolve_data_config``) as
    a differentiable tensor pipeline: RGB (grayscale repeated), resize to ``input_size / crop_pct`` (the shorter side;
    both sides for ``crop_mode: squash``) with the config's interpolation (antialiased), centre crop to
    ``input_size``, then normalise by the config's mean and std. ``image_size``: replaces the config's input size."""
    from timm.data import resolve_data_config
    from torchvision.transforms import v2

    args = {"input_size": (3, image_size, image_size)} if image_size is not None else {}
    config = resolve_data_config(args, model=model)
    _, height, width = config["input_size"]
    crop_pct = config.get("crop_pct") or 0.875
    scale = (math.floor(height / crop_pct), math.floor(width / crop_pct))
    square = scale[0] == scale[1] and config.get("crop_mode", "center") != "squash"
    interpolation = v2.InterpolationMode(config.get("interpolation", "bilinear"))
    return TensorTransform(v2.Compose([
        v2.RGB(),
        v2.Resize(scale[0] if square else list(scale), interpolation=interpolation, antialias=True),
        v2.CenterCrop([height, width]),
        v2.Normalize(mean=list(config["mean"]), std=list(config["std"])),
    ]))
