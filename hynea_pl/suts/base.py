"""The system-under-test interface: a frozen model plus the task semantics HyNeA and the baselines need."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from hynea_pl.checkpoints import read_state_dict
from hynea_pl.paths import resolve_path


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


def load_state_dict(location: str | Path) -> dict[str, torch.Tensor]:
    """A SUT's state dict from a ``.safetensors`` / ``.pt`` / ``.pth`` / ``.ckpt`` file (or ``zoo://`` URI); a
    missing file is a one-line ``FileNotFoundError`` naming it (:func:`hynea_pl.checkpoints.read_state_dict`)."""
    path = resolve_path(location)
    if not path.is_file():
        raise FileNotFoundError(f"SUT checkpoint not found: {path}")
    return read_state_dict(path)


class SUT(nn.Module):
    """A frozen model under test: ``forward(images (B, C, H, W) in [0, 1]) -> outputs``.

    Subclasses define the task: the behaviour loss toward a target, the flip criterion and the control
    signal fed to the HyperNet's projector.
    """

    task: str = "abstract"

    #: its family is its model's (:func:`hynea_pl.suts.family.model_families`)
    family_members = ("model",)

    def __init__(self, model: nn.Module, weights: str | None = None, preprocess: Preprocess | None = None,
                 strict: bool = True) -> None:
        super().__init__()
        if weights is not None:
            state = load_state_dict(weights)
            try:
                model.load_state_dict(state, strict=strict)
            except RuntimeError as error:
                first = str(error).strip().splitlines()[0]
                raise ValueError(f"SUT checkpoint {weights} does not fit {type(model).__name__}: {first}") from None
        self.model = model.eval().requires_grad_(False)
        self.preprocess = preprocess or Preprocess()

    def train(self, mode: bool = True) -> SUT:
        """The SUT always stays in eval mode (dropout / batch norm frozen)."""
        return super().train(False)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model(self.preprocess(images))

    # --- task semantics -------------------------------------------------------------------------------
    # Every test takes the origin's output explicitly: a case fixes its target and objective once from the origin
    # (``default_target``, ``objective_labels``, ``control_signal``) and the SUT keeps no per-case state.
    def prediction(self, output: torch.Tensor) -> torch.Tensor:
        """The SUT's decision ``(B,)`` for each output (class index; the tested attribute's 0/1; the class of the
        most confident detection)."""
        raise NotImplementedError

    def default_target(self, origin_output: torch.Tensor, condition: int | None = None) -> torch.Tensor:
        """The target of a case ``(B,)`` when none is configured; ``condition`` is the case's class."""
        raise NotImplementedError

    def objective_labels(self, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """What the behaviour loss pulls toward, fixed once from the origin (classes, BCE targets, ...)."""
        raise NotImplementedError

    def behaviour_loss(self, output: torch.Tensor, labels: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Scalar loss of ``output`` toward ``labels`` (from :meth:`objective_labels`) for ``target``."""
        raise NotImplementedError

    def control_signal(self, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The control fed to the HyperNet's projector (REFERENCE.md: one-hot / signs / per-detection one-hot)."""
        raise NotImplementedError

    def is_flipped(self, output: torch.Tensor, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``(B,)`` bool: the decision left the origin's (the one meaning of ``flipped`` for every method)."""
        raise NotImplementedError

    def reaches_target(self, output: torch.Tensor, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``(B,)`` bool: the output reached the case's target. Tasks whose target is the change itself (an
        attribute to flip, a class to suppress) reach it exactly when they flip."""
        return self.is_flipped(output, origin_output, target)

    def is_valid_origin(self, origin_output: torch.Tensor, condition: int | None) -> torch.Tensor:
        """``(B,)`` bool: the origin is a test case of ``condition`` (paper 4.5)."""
        raise NotImplementedError

    def keeps(self, output: torch.Tensor, origin_output: torch.Tensor, target: torch.Tensor,
              margin: float = 0.0) -> torch.Tensor:
        """``(B,)`` bool: ``output`` keeps the origin's decision (a reference model's stop condition); ``margin``:
        how sure it must be, where the task defines a confidence (multiclass: the origin class's probability)."""
        return ~self.is_flipped(output, origin_output, target)

    def keep_loss(self, output: torch.Tensor, origin_output: torch.Tensor) -> torch.Tensor:
        """Scalar loss that is low while ``output`` keeps the origin's decisions (a reference model's
        preservation term: fail the SUT while the reference keeps the label)."""
        raise NotImplementedError(f"{type(self).__name__} ({self.task}) has no preservation loss")
