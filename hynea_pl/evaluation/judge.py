"""The validity oracle: an independent judge of whether a test input still shows its origin's class.

The judge is any SUT-like model of the same task (:class:`hynea_pl.suts.SUT`): on the zoo the judging members of
the oracle ensemble, on real setups a classifier given in YAML (e.g. a timm model other than the SUT). It must
never be the model that steered the search (a method's ``reference``): the campaign refuses that configuration.

A detection case may also be judged by a multi-label attribute model (task ``binary``) whose logit ``k`` says
"class k is present": its decision on the suppressed class answers the same question as a detector's (the digit
scenes' oracle is such a model).

:func:`judge_case` runs the oracle (and the realism test) on a case's images and applies the pure verdict,
:func:`hynea_pl.metrics.functional.validity.verdict`; the campaign calls it when it fills a case's outcome.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from hynea_pl.metrics.functional.validity import verdict
from hynea_pl.metrics.typicality import TypicalityTest
from hynea_pl.scene_layout import SceneLayout, digit_windows
from hynea_pl.schema import CaseRecord
from hynea_pl.suts import SUT, task_class

__all__ = ["judge_case", "judges_task", "realism_readings", "sut_decisions"]


def judges_task(oracle_task: str, sut_task: str) -> bool:
    """Whether an oracle of ``oracle_task`` can judge cases of ``sut_task``: the same task, or another the SUT's task
    accepts (:meth:`hynea_pl.suts.SUT.judged_by`: a multi-label attribute oracle, class present / absent, for
    detection)."""
    if oracle_task == sut_task:
        return True
    try:
        owner = task_class(sut_task)
    except ValueError:  # a task no SUT class defines: only its own oracles
        return False
    return owner.judged_by(oracle_task)


def sut_decisions(record: CaseRecord) -> tuple[int | None, int | None]:
    """The SUT's decisions on origin and result in the oracle's terms (:meth:`hynea_pl.suts.SUT.recorded_decisions`
    of the record's task): multiclass, the recorded classes; binary, the sign of the case's tested logit
    (``target``; the recorded labels when the logits are missing); detection, 1 in the origin (a case starts from a
    detection of its class), then 1 while the class is still among the top-k (0 once flipped)."""
    return task_class(record.task).recorded_decisions(record)


def realism_readings(realism: TypicalityTest, images: Tensor, layout: dict | None = None) -> dict[str, Tensor]:
    """The realism test's ``passed`` and ``score`` for ``images (N, C, H, W)``; for a digit scene (its record's
    ``layout``), per placed digit (:func:`~hynea_pl.scene_layout.digit_windows`): a scene passes when every digit
    does, and its score is its least typical digit's."""
    if layout is None:
        return realism.readings(images)
    windows = digit_windows(images, SceneLayout.from_dict(layout))
    readings = realism.readings(windows)
    n = len(layout["classes"])
    return {"passed": readings["passed"].view(len(images), n).all(dim=1),
            "score": readings["score"].view(len(images), n).amax(dim=1)}


@torch.no_grad()
def judge_case(oracle: SUT, record: CaseRecord, origin: Tensor, result: Tensor,
               realism: TypicalityTest | None = None) -> dict[str, Any]:
    """The record's oracle fields for origin and result images ``(1, C, H, W)`` in [0, 1].

    The reference the result must keep: multiclass cases keep the conditioning class (``origin_class``; the
    oracle's reading of the origin when the origin is unconditional); binary and detection cases keep the SUT's own
    decision on the origin, the case's premise (the oracle's reading of the origin is recorded beside it). An
    ensemble oracle's members decide as a panel (a calibrated vote, or unanimity:
    :meth:`~hynea_pl.suts.EnsembleClassifierSUT.judge_labels`); a result they read as the SUT does is never a valid
    failure. With a ``realism`` test, a result they read as the origin's class must also pass it (else
    ``degraded``), unless the oracle has its own "not a digit" answer (:attr:`~hynea_pl.suts.SUT.reads_no_class`):
    then the test is recorded, and the answer decides. A flip on a result its method did not accept (``record.accepted`` false) is
    ``unaccepted`` whatever the judges read; their readings and the realism test are still recorded.
    """
    if not judges_task(oracle.task, record.task):
        raise ValueError(f"the oracle judges {oracle.task} outputs, the SUT's task is {record.task}")
    sut = task_class(record.task)
    tensors = [*oracle.parameters(), *oracle.buffers()]
    device = tensors[0].device if tensors else torch.device("cpu")
    origin, result = origin.to(device), result.to(device)
    origin_label, _ = oracle.judge_reading(oracle(origin), record.target)
    output = oracle(result)
    result_label, confidence = oracle.judge_reading(output, record.target)
    judge_labels, by_name = oracle.judge_labels(output, result, record.target)
    _, sut_result = sut.recorded_decisions(record)
    keep = sut.reference_decision(record, origin_label)
    fields: dict[str, Any] = {"oracle_origin_label": origin_label, "oracle_result_label": result_label,
                              "oracle_result_confidence": confidence}
    if by_name is not None:
        fields["judge_labels"] = by_name
    realistic = None
    if realism is not None:
        readings = realism_readings(realism, torch.cat([origin, result]).cpu(), record.layout)
        realistic = bool(readings["passed"][1])
        fields.update(origin_realistic=bool(readings["passed"][0]), realistic=realistic,
                      realism_score=float(readings["score"][1]))
    decides_realism = None if oracle.reads_no_class else realistic  # a "not a digit" answer is the realism part
    fields["verdict"] = verdict(record.flipped, keep, judge_labels, sut_result, decides_realism, record.accepted)
    return fields
