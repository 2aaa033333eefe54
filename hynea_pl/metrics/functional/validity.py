"""The validity verdict of a test case: does the result still show its origin's class, by a judge that never
steered the search? A flip is not a failure: only a ``valid_failure`` reveals a fault of the SUT."""

from __future__ import annotations

VERDICTS = ("valid_failure", "semantic_change", "ambiguous", "no_flip")


def verdict(flipped: bool, reference_label: int, oracle_result_label: int, sut_result_label: int | None,
            task: str = "multiclass") -> str:
    """One case's verdict.

    Args:
        flipped: the SUT's decision left the origin's (``CaseRecord.flipped``).
        reference_label: the decision the result must keep: the origin's class (multiclass: the conditioning
            class, or the oracle's reading of the origin when the origin is unconditional; binary: the SUT's
            decision on the tested attribute of the origin, the case's premise; detection: 1, the SUT detected the
            class in the origin).
        oracle_result_label: the oracle's decision on the result, in the same terms.
        sut_result_label: the SUT's decision on the result, in the same terms (detection: 1 while the class is
            still among its top-k); ``None`` when unknown.
        task: the SUT's task.
    Returns:
        ``no_flip`` when the SUT did not flip; ``semantic_change`` when the oracle reads what the SUT reads on the
        result (the image changed, the SUT was right: never a failure, whatever the oracle read on the origin);
        ``valid_failure`` when the oracle keeps the reference; otherwise ``ambiguous`` (multiclass: a third class)
        or ``semantic_change`` (binary, detection: the reference is lost).
    """
    if not flipped:
        return "no_flip"
    if sut_result_label is not None and oracle_result_label == sut_result_label:
        return "semantic_change"
    if oracle_result_label == reference_label:
        return "valid_failure"
    return "ambiguous" if task == "multiclass" else "semantic_change"
