"""Stateful task metrics (HyNeA eqs. 9-15). See :mod:`hynea_pl.metrics.functional.task` for the definitions."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from hynea_pl.metrics._base import RunningMean
from hynea_pl.metrics.functional import task as F
from hynea_pl.schema import Task
from hynea_pl.suts import BinaryAttributeSUT, ClassifierSUT
from hynea_pl.suts.detector import YOLODetectorSUT

__all__ = [
    "BinaryEscapeRatio",
    "BinaryMisclassificationRate",
    "ConfidenceReduction",
    "DetectionMisclassificationRate",
    "EscapeRatio",
    "MisclassificationRate",
    "MulticlassEscapeRatio",
    "MulticlassMisclassificationRate",
]


class MulticlassMisclassificationRate(RunningMean):
    """Eq. 9. ``update(origin (B, C), result (B, C))``; ``compute() -> scalar`` (NaN before any update)."""

    higher_is_better = True

    def update(self, origin: Tensor, result: Tensor) -> None:
        self._accumulate(F.misclassification_rate(origin, result, reduction="none"))


class BinaryMisclassificationRate(RunningMean):
    """Eq. 10. ``update(origin (B, C) | (B,), result, attribute=None)``; ``attribute`` (int or ``(B,)``) defaults
    to the one given at construction. ``threshold`` 0 for logits, 0.5 for probabilities."""

    higher_is_better = True

    def __init__(self, attribute: int | None = None, threshold: float = 0.0, **kwargs: Any):
        super().__init__(**kwargs)
        self.attribute = attribute
        self.threshold = threshold

    def update(self, origin: Tensor, result: Tensor, attribute: int | Tensor | None = None) -> None:
        attribute = self.attribute if attribute is None else attribute
        self._accumulate(F.binary_misclassification_rate(origin, result, attribute, self.threshold, reduction="none"))


class DetectionMisclassificationRate(RunningMean):
    """Eq. 11, averaged over all detections seen. ``update(origin (B, D, C), result (B, D, C))``."""

    higher_is_better = True

    def update(self, origin: Tensor, result: Tensor) -> None:
        origin, result = F._pair(origin, result, 3, "(B, D, C) detection class scores")
        self._accumulate((origin.argmax(-1) != result.argmax(-1)).float())


class MulticlassEscapeRatio(RunningMean):
    """Eqs. 12-13. ``update(origin (B, C), result (B, C))``. Lower is better."""

    higher_is_better = False

    def update(self, origin: Tensor, result: Tensor) -> None:
        self._accumulate(F.escape_ratio(origin, result, reduction="none"))


class BinaryEscapeRatio(RunningMean):
    """Eq. 14. ``update(origin (B, C), result (B, C), attribute=None)``. Lower is better."""

    higher_is_better = False

    def __init__(self, attribute: int | None = None, threshold: float = 0.0, **kwargs: Any):
        super().__init__(**kwargs)
        self.attribute = attribute
        self.threshold = threshold

    def update(self, origin: Tensor, result: Tensor, attribute: int | Tensor | None = None) -> None:
        attribute = self.attribute if attribute is None else attribute
        if attribute is None:
            raise ValueError("BinaryEscapeRatio needs the tested attribute index")
        self._accumulate(F.binary_escape_ratio(origin, result, attribute, self.threshold, reduction="none"))


class ConfidenceReduction(RunningMean):
    """Eq. 15, averaged over all detections seen. ``update(origin (B, D, C) | (B, C), result, target_class)``."""

    higher_is_better = True

    def __init__(self, target_class: int | None = None, from_logits: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        self.target_class = target_class
        self.from_logits = from_logits

    def update(self, origin: Tensor, result: Tensor, target_class: int | Tensor | None = None) -> None:
        target_class = self.target_class if target_class is None else target_class
        if target_class is None:
            raise ValueError("ConfidenceReduction needs the class whose confidence should drop")
        self._accumulate(F.confidence_drops(origin, result, target_class, self.from_logits))


#: Each task's metrics (misclassification rate, escape ratio or None), by the task of its SUT class.
_TASKS: dict[str, tuple[type[RunningMean], type[RunningMean] | None]] = {
    ClassifierSUT.task: (MulticlassMisclassificationRate, MulticlassEscapeRatio),
    BinaryAttributeSUT.task: (BinaryMisclassificationRate, BinaryEscapeRatio),
    YOLODetectorSUT.task: (DetectionMisclassificationRate, None),
}


class MisclassificationRate:
    """Task wrapper: ``MisclassificationRate(task=..., **kwargs)`` returns the matching metric (torchmetrics style)
    for a SUT task (``multiclass``, ``binary`` or ``detection``: a SUT class's ``task``)."""

    def __new__(cls, task: Task = ClassifierSUT.task, **kwargs: Any):  # type: ignore[misc]
        if task not in _TASKS:
            raise ValueError(f"unknown task {task!r}; choose from {sorted(_TASKS)}")
        return _TASKS[task][0](**kwargs)


class EscapeRatio:
    """Task wrapper: ``EscapeRatio(task=..., **kwargs)`` for ``multiclass`` and ``binary``. Not defined for
    detection."""

    def __new__(cls, task: Task = ClassifierSUT.task, **kwargs: Any):  # type: ignore[misc]
        if task not in _TASKS or _TASKS[task][1] is None:
            defined = " and ".join(repr(name) for name, (_, escape) in _TASKS.items() if escape is not None)
            raise ValueError(f"escape ratio is defined for {defined}, not {task!r}")
        return _TASKS[task][1](**kwargs)
