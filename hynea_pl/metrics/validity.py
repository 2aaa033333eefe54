"""The validity oracle: an independent judge of whether a test input still shows its origin's class.

The judge is any SUT-like model of the same task (:class:`hynea_pl.suts.SUT`): on the zoo the judging members of
the oracle ensemble, on real setups a classifier given in YAML (e.g. a timm model other than the SUT). It must
never be the model that steered the search (a method's ``reference``): the campaign refuses that configuration.

A detection case may also be judged by a multi-label attribute model (task ``binary``) whose logit ``k`` says
"class k is present": its decision on the suppressed class answers the same question as a detector's (the digit
scenes' oracle is such a model).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from hynea_pl.metrics.functional.validity import verdict
from hynea_pl.metrics.typicality import TypicalityTest
from hynea_pl.schema import CaseRecord
from hynea_pl.suts import SUT


def judges_task(oracle_task: str, sut_task: str) -> bool:
    """Whether an oracle of ``oracle_task`` can judge cases of ``sut_task``: the same task, or a multi-label
    attribute oracle (class present / absent) for detection."""
    return oracle_task == sut_task or (oracle_task, sut_task) == ("binary", "detection")


def _decision(oracle: SUT, output: Tensor, record: CaseRecord) -> tuple[int, float]:
    """The oracle's decision on one output ``(1, ...)`` in the task's terms, and its probability."""
    if oracle.task == "multiclass":
        probs = output.float().softmax(-1)[0]
        label = int(probs.argmax())
        return label, float(probs[label])
    if oracle.task == "binary":
        p = float(output.float()[0, record.target].sigmoid())
        return int(p > 0.5), max(p, 1 - p)
    if oracle.task == "detection":  # does any of the oracle's top-k detections still predict the class?
        logits = output.float()[0]
        present = bool((logits.argmax(-1) == record.target).any())
        return int(present), float(logits[:, record.target].sigmoid().max())
    raise ValueError(f"no validity rule for an oracle of task {oracle.task!r}")


def sut_decisions(record: CaseRecord) -> tuple[int | None, int | None]:
    """The SUT's decisions on origin and result in the oracle's terms: multiclass, the recorded classes; binary,
    the sign of the case's tested logit (``target``; the recorded labels when the logits are missing); detection, 1
    in the origin (a case starts from a detection of its class), then 1 while the class is still among the top-k
    (0 once flipped)."""
    if record.task == "detection":
        return 1, int(not record.flipped)
    if record.task == "binary" and record.target is not None and record.origin_pred and record.result_pred:
        return int(record.origin_pred[record.target] > 0), int(record.result_pred[record.target] > 0)
    return record.origin_label, record.result_label


def _judge_labels(oracle: SUT, output: Tensor, result: Tensor, record: CaseRecord) -> list[int]:
    """Each judge's decision on the result: every member of a multiclass ensemble (``member_labels``), else the
    oracle's one decision (a unanimous multi-label oracle already combines its judges)."""
    if oracle.task == "multiclass" and hasattr(oracle, "member_labels"):
        return list(oracle.member_labels(result).values())
    return [_decision(oracle, output, record)[0]]


@torch.no_grad()
def judge_case(oracle: SUT, record: CaseRecord, origin: Tensor, result: Tensor,
               realism: TypicalityTest | None = None) -> dict[str, Any]:
    """The record's oracle fields for origin and result images ``(1, C, H, W)`` in [0, 1].

    The reference the result must keep: multiclass cases keep the conditioning class (``origin_class``; the
    oracle's reading of the origin when the origin is unconditional); binary and detection cases keep the SUT's own
    decision on the origin, the case's premise (the oracle's reading of the origin is recorded beside it). The
    judges must be unanimous (an ensemble oracle's members are asked one by one); a result they read as the SUT
    does is never a valid failure. With a ``realism`` test, a result they read as the origin's class must also
    pass it (else ``degraded``).
    """
    if not judges_task(oracle.task, record.task):
        raise ValueError(f"the oracle judges {oracle.task} outputs, the SUT's task is {record.task}")
    tensors = [*oracle.parameters(), *oracle.buffers()]
    device = tensors[0].device if tensors else torch.device("cpu")
    origin, result = origin.to(device), result.to(device)
    origin_label, _ = _decision(oracle, oracle(origin), record)
    output = oracle(result)
    result_label, confidence = _decision(oracle, output, record)
    judge_labels = _judge_labels(oracle, output, result, record)
    sut_origin, sut_result = sut_decisions(record)
    if record.task == "multiclass":
        keep = record.origin_class if record.origin_class is not None else origin_label
    else:
        keep = sut_origin if sut_origin is not None else origin_label
    fields: dict[str, Any] = {"oracle_origin_label": origin_label, "oracle_result_label": result_label,
                              "oracle_result_confidence": confidence}
    if hasattr(oracle, "member_names") and oracle.task == "multiclass":
        fields["judge_labels"] = dict(zip(oracle.member_names, judge_labels))
    realistic = None
    if realism is not None:
        readings = realism.readings(torch.cat([origin, result]).cpu())
        realistic = bool(readings["passed"][1])
        fields.update(origin_realistic=bool(readings["passed"][0]), realistic=realistic,
                      realism_score=float(readings["score"][1]))
    fields["verdict"] = verdict(record.flipped, keep, judge_labels, sut_result, record.task, realistic)
    return fields
