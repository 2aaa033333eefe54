"""An ensemble of multiclass classifiers that votes by mean probability (e.g. the judges of the validity oracle)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hynea_pl.suts.classifier import ClassifierSUT
from hynea_pl.verdicts import NOT_A_CLASS, UNDECIDED

__all__ = ["EnsembleClassifierSUT", "MeanProbability", "panel_decisions"]


def panel_decisions(member_probs: Tensor, threshold: float | None = None, not_a_class: int | None = None) -> Tensor:
    """What a panel of judges reads in each image, from each judge's probabilities ``(M, N, K)``: ``(N,)`` long, a
    class, :data:`~hynea_pl.verdicts.NOT_A_CLASS` or :data:`~hynea_pl.verdicts.UNDECIDED`.

    With a ``threshold`` (a calibrated vote, at least 0.5): the class whose mean probability over the judges reaches
    it and exceeds every other class's (two classes at exactly 0.5 are a tie: undecided), else undecided. Without (unanimity): the class every judge ranks first, else
    undecided. ``not_a_class``: the judges' output that answers "none of the classes" (read as ``NOT_A_CLASS``).
    """
    if member_probs.dim() != 3:
        raise ValueError(f"expected member probabilities (M, N, K), got {tuple(member_probs.shape)}")
    if threshold is not None and not 0.5 <= threshold <= 1:
        raise ValueError(f"a vote's threshold must be in [0.5, 1], got {threshold}")
    if threshold is None:
        firsts = member_probs.argmax(-1)  # (M, N)
        labels = torch.where((firsts == firsts[:1]).all(0), firsts[0], torch.full_like(firsts[0], UNDECIDED))
    else:
        top = member_probs.float().mean(0).topk(2, dim=-1)
        decided = (top.values[:, 0] >= threshold) & (top.values[:, 0] > top.values[:, 1])
        labels = torch.where(decided, top.indices[:, 0], torch.full_like(top.indices[:, 0], UNDECIDED))
    if not_a_class is not None:
        labels = torch.where(labels == not_a_class, torch.full_like(labels, NOT_A_CLASS), labels)
    return labels


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
    ``model``, ``weights`` and ``preprocess``.

    As a validity oracle the members are a panel of judges that decide together
    (:func:`panel_decisions`): with a ``threshold``, the class (or "none of
    them") whose mean probability reaches it; without, the class they unanimously rank first.

    Args:
        members: the classifiers.
        names: their names (the records' ``judge_labels`` keys).
        threshold: the panel's vote threshold in [0.5, 1]; ``None``: unanimity.
        not_a_class: the members' output that answers "none of the classes" (the zoo judges' "not a digit"), read
            as :data:`~hynea_pl.verdicts.NOT_A_CLASS`; ``None``: they have none.
    """

    def __init__(self, members: list[ClassifierSUT], names: list[str] | None = None, threshold: float | None = None,
                 not_a_class: int | None = None) -> None:
        super().__init__(MeanProbability(members))
        if names is not None and len(names) != len(members):
            raise ValueError(f"{len(names)} names for {len(members)} ensemble members")
        if threshold is not None and not 0.5 <= threshold <= 1:
            raise ValueError(f"threshold must be in [0.5, 1] or null, got {threshold}")
        self.member_names = list(names) if names is not None else [f"member-{i}" for i in range(len(members))]
        self.threshold, self.not_a_class = threshold, not_a_class

    @property
    def reads_no_class(self) -> bool:
        """Whether the panel can answer "none of the classes" (then it is the verdict's realism part too)."""
        return self.not_a_class is not None

    def _reading(self, labels: torch.Tensor) -> torch.Tensor:
        if self.not_a_class is None:
            return labels
        return torch.where(labels == self.not_a_class, torch.full_like(labels, NOT_A_CLASS), labels)

    @torch.no_grad()
    def member_probabilities(self, images: torch.Tensor, batch_size: int = 500) -> torch.Tensor:
        """Each member's probabilities ``(M, N, K)`` for ``images (N, C, H, W)`` in [0, 1]."""
        return torch.cat([torch.stack([member(chunk).float().softmax(-1) for member in self.model.members])
                          for chunk in images.split(batch_size)], 1)

    def panel_readings(self, images: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """What the panel reads in ``images (N, C, H, W)``: its decision ``(N,)`` (a class,
        :data:`~hynea_pl.verdicts.NOT_A_CLASS` or :data:`~hynea_pl.verdicts.UNDECIDED`) and each member's most
        probable reading ``(N,)`` by name."""
        probs = self.member_probabilities(images)
        members = {name: self._reading(p.argmax(-1)) for name, p in zip(self.member_names, probs)}
        return panel_decisions(probs, self.threshold, self.not_a_class), members

    def judge_reading(self, output: torch.Tensor, target: int | None) -> tuple[int, float]:
        """The ensemble's most probable reading (``NOT_A_CLASS`` for its "none" answer) and its mean probability."""
        label, probability = super().judge_reading(output, target)
        return int(self._reading(torch.tensor(label))), probability

    def judge_labels(self, output: torch.Tensor, images: torch.Tensor,
                     target: int | None) -> tuple[list[int], dict[str, int] | None]:
        """The panel's decision on the result (one entry), and each member's reading by member name."""
        decision, members = self.panel_readings(images)
        return [int(decision[0])], {name: int(labels[0]) for name, labels in members.items()}
