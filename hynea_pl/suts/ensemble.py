"""An ensemble of multiclass classifiers that votes by mean probability (e.g. the judges of the validity oracle)."""

from __future__ import annotations

import torch
from torch import nn

from hynea_pl.suts.classifier import ClassifierSUT


class MeanProbability(nn.Module):
    """``images (B, C, H, W) in [0, 1] -> log of the members' mean softmax (B, K)``; each member applies its own
    preprocessing and weights."""

    family_members = ("members",)

    def __init__(self, members: list[ClassifierSUT]) -> None:
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one member")
        self.members = nn.ModuleList(members)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        probs = torch.stack([member(images).float().softmax(-1) for member in self.members]).mean(0)
        return probs.clamp_min(1e-12).log()


class EnsembleClassifierSUT(ClassifierSUT):
    """Multiclass classifiers as one model: its outputs are log mean probabilities, so ``argmax`` is the ensemble's
    vote and ``softmax`` its mean probability. Members are :class:`ClassifierSUT` s given in YAML, each with its
    ``model``, ``weights`` and ``preprocess``."""

    def __init__(self, members: list[ClassifierSUT], names: list[str] | None = None) -> None:
        super().__init__(MeanProbability(members))
        if names is not None and len(names) != len(members):
            raise ValueError(f"{len(names)} names for {len(members)} ensemble members")
        self.member_names = list(names) if names is not None else [f"member-{i}" for i in range(len(members))]

    @torch.no_grad()
    def member_labels(self, images: torch.Tensor) -> dict[str, int]:
        """Each member's class for one image ``(1, C, H, W)``, by member name (a validity oracle's per-judge
        readings: a verdict may ask them to be unanimous)."""
        return {name: int(member(images).argmax(-1)[0])
                for name, member in zip(self.member_names, self.model.members)}

    def judge_labels(self, output: torch.Tensor, images: torch.Tensor,
                     target: int | None) -> tuple[list[int], dict[str, int] | None]:
        """Every member's class on the result (:meth:`member_labels`), and the same by member name."""
        labels = list(self.member_labels(images).values())
        return labels, dict(zip(self.member_names, labels))
