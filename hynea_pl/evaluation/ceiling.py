"""The verdict's ceiling: what the verdict says of real images of a known class, which no search has touched.

A real test image of class ``c`` is a *valid* input by the verdict when the judges' panel reads ``c`` (and, for a
panel with no "not a digit" answer, it passes the realism test): the rule a valid failure's result must meet
(:func:`hynea_pl.evaluation.judge.judge_case`). The fraction of real images that meet it is the ceiling of any
method's valid-failure rate: a method cannot be judged valid more often than real images are. Among the SUT's own
mistakes on real images (its natural failures) the same fraction says how well the verdict recognises a true
failure of the SUT.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from hynea_pl.metrics.typicality import TypicalityTest
from hynea_pl.suts.ensemble import EnsembleClassifierSUT

__all__ = ["RealReadings", "read_real_images"]


@dataclass(frozen=True)
class RealReadings:
    """Per real image ``(N,)``: whether each judge's most probable reading is its class (``judges``, by name),
    whether the panel reads its class (``panel``), whether it passes the realism test (``realistic``; all ``True``
    without one), whether that test is part of the verdict (``realism_decides``: not for a panel with its own "not a
    digit" answer) and whether the SUT reads its class (``sut_correct``)."""

    judges: dict[str, Tensor]
    panel: Tensor
    realistic: Tensor
    realism_decides: bool
    sut_correct: Tensor

    @property
    def valid(self) -> Tensor:
        """``(N,)``: the verdict calls the image a valid input of its class (the panel reads it, and it is realistic
        where the realism test decides)."""
        return self.panel & self.realistic if self.realism_decides else self.panel

    def rates(self, where: Tensor | None = None) -> dict[str, float | int]:
        """``n`` and the rates ``panel``, ``realistic``, ``valid`` over the images ``where`` (a mask; all)."""
        where = torch.ones_like(self.realistic) if where is None else where
        n = int(where.sum())
        rate = (lambda flags: float(flags[where].double().mean())) if n else (lambda flags: float("nan"))
        return {"n": n, "panel": rate(self.panel), "realistic": rate(self.realistic), "valid": rate(self.valid)}

    def judge_accuracy(self, where: Tensor | None = None) -> dict[str, float]:
        """Each judge's accuracy over the images ``where`` (a mask; all)."""
        where = torch.ones_like(self.realistic) if where is None else where
        return {name: float(correct[where].double().mean()) for name, correct in self.judges.items()}

    def errors_together(self) -> dict[tuple[str, str], float]:
        """For each pair of models (the judges and ``sut``): the fraction of images both misread."""
        wrong = {**{name: ~correct for name, correct in self.judges.items()}, "sut": ~self.sut_correct}
        return {(a, b): float((wrong[a] & wrong[b]).double().mean()) for a, b in itertools.combinations(wrong, 2)}


@torch.no_grad()
def read_real_images(panel: EnsembleClassifierSUT, realism: TypicalityTest | None, sut: nn.Module,
                     images: Tensor, labels: Tensor, batch_size: int = 500,
                     are_reference: bool = False) -> RealReadings:
    """The verdict's readings of real ``images (N, C, H, W)`` in [0, 1] of classes ``labels (N,)``: ``panel`` is the
    judges (:meth:`~hynea_pl.suts.EnsembleClassifierSUT.panel_readings`), ``sut`` maps raw images to logits
    ``(B, classes)``. ``are_reference``: ``images`` are the realism test's own reference, in order, and each is
    judged left out of it (``TypicalityTest.reference_passed``): an image is never its own nearest neighbour."""
    if realism is None:
        realistic = torch.ones(len(images), dtype=torch.bool)
    elif are_reference:
        if len(realism.reference_passed) != len(images):
            raise ValueError(f"{len(images)} images are not the realism test's {len(realism.reference_passed)} "
                             "reference images")
        realistic = realism.reference_passed.cpu()
    else:
        realistic = torch.cat([realism.readings(images[i : i + batch_size])["passed"]
                               for i in range(0, len(images), batch_size)])
    decisions, members = panel.panel_readings(images)
    sut_labels = torch.cat([sut(images[i : i + batch_size]).argmax(-1) for i in range(0, len(images), batch_size)])
    return RealReadings({name: read == labels for name, read in members.items()}, decisions == labels,
                        realistic.bool(), realism is not None and not panel.reads_no_class, sut_labels == labels)
