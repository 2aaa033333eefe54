"""The verdict's ceiling: what the verdict says of real images of a known class, which no search has touched.

A real test image of class ``c`` is a *valid* input by the verdict when every judge reads ``c`` and it passes the
realism test: the rule a valid failure's result must meet (:func:`hynea_pl.evaluation.judge.judge_case`). The
fraction of real images that meet it is the ceiling of any method's valid-failure rate: a method cannot be judged
valid more often than real images are. Among the SUT's own mistakes on real images (its natural failures) the same
fraction says how well the verdict recognises a true failure of the SUT.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from hynea_pl.metrics.typicality import TypicalityTest

__all__ = ["RealReadings", "read_real_images"]


@dataclass(frozen=True)
class RealReadings:
    """Per real image ``(N,)``: whether each judge reads its class (``judges``, by name), whether it passes the
    realism test (``realistic``; all ``True`` without one) and whether the SUT reads its class (``sut_correct``)."""

    judges: dict[str, Tensor]
    realistic: Tensor
    sut_correct: Tensor

    @property
    def unanimous(self) -> Tensor:
        """``(N,)``: every judge reads the image's class."""
        return torch.stack(list(self.judges.values())).all(0)

    @property
    def valid(self) -> Tensor:
        """``(N,)``: the verdict calls the image a valid input of its class (judges unanimous, realistic)."""
        return self.unanimous & self.realistic

    def rates(self, where: Tensor | None = None) -> dict[str, float | int]:
        """``n`` and the rates ``unanimous``, ``realistic``, ``valid`` over the images ``where`` (a mask; all)."""
        where = torch.ones_like(self.realistic) if where is None else where
        n = int(where.sum())
        rate = (lambda flags: float(flags[where].double().mean())) if n else (lambda flags: float("nan"))
        return {"n": n, "unanimous": rate(self.unanimous), "realistic": rate(self.realistic), "valid": rate(self.valid)}

    def judge_accuracy(self, where: Tensor | None = None) -> dict[str, float]:
        """Each judge's accuracy over the images ``where`` (a mask; all)."""
        where = torch.ones_like(self.realistic) if where is None else where
        return {name: float(correct[where].double().mean()) for name, correct in self.judges.items()}

    def errors_together(self) -> dict[tuple[str, str], float]:
        """For each pair of models (the judges and ``sut``): the fraction of images both misread."""
        wrong = {**{name: ~correct for name, correct in self.judges.items()}, "sut": ~self.sut_correct}
        return {(a, b): float((wrong[a] & wrong[b]).double().mean()) for a, b in itertools.combinations(wrong, 2)}


@torch.no_grad()
def read_real_images(judges: Mapping[str, nn.Module], realism: TypicalityTest | None, sut: nn.Module,
                     images: Tensor, labels: Tensor, batch_size: int = 500,
                     are_reference: bool = False) -> RealReadings:
    """The verdict's readings of real ``images (N, C, H, W)`` in [0, 1] of classes ``labels (N,)``: ``judges`` and
    ``sut`` map raw images to logits ``(B, classes)``. ``are_reference``: ``images`` are the realism test's own
    reference, in order, and each is judged left out of it (``TypicalityTest.reference_passed``): an image is never
    its own nearest neighbour."""
    def reads_class(model: nn.Module) -> Tensor:
        return torch.cat([model(images[i : i + batch_size]).argmax(-1) for i in range(0, len(images), batch_size)]
                         ) == labels

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
    return RealReadings({name: reads_class(model) for name, model in judges.items()}, realistic.bool(),
                        reads_class(sut))
