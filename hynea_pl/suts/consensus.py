"""Multi-label judges voting by unanimity: a class is present only when every judge reads it present."""

from __future__ import annotations

import torch
from torch import nn


class UnanimousPresence(nn.Module):
    """``images (B, C, H, W) in [0, 1] -> logits (B, K)``: the elementwise minimum of the judges' logits, so
    ``logit_k > 0`` exactly when every judge's ``logit_k > 0``.

    A validity oracle made of judges that err differently (e.g. a scene CNN and a single-digit classifier read over
    windows): a failure counts as valid only when all of them still see the origin's class, so a judge's false
    "still there" on an erased object cannot make a fault by itself. Each judge is a model with its own weights and
    preprocessing (e.g. a :class:`~hynea_pl.suts.SUT` given in YAML) returning ``(B, K)`` logits.
    """

    family_members = ("judges",)

    def __init__(self, judges: list[nn.Module]) -> None:
        super().__init__()
        if not judges:
            raise ValueError("unanimity needs at least one judge")
        self.judges = nn.ModuleList(judges)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        logits = [judge(images).float() for judge in self.judges]
        shapes = {tuple(x.shape) for x in logits}
        if len(shapes) != 1:
            raise ValueError(f"the judges' logits differ in shape: {sorted(shapes)}")
        return torch.stack(logits).amin(dim=0)
