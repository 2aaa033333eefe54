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
            class, or the oracle's reading of the origin when the origin is unconditional; binary: the oracle's
            decision on the tested attribute of the origin; detection: 1 when the oracle detects the class in the
            origin).
        oracle_result_label: the oracle's decision on the result, in the same terms.
        sut_result_label: the SUT's decision on the result (multiclass: tells a redrawn digit from a degraded one).
        task: the SUT's task.
    Returns:
        ``no_flip`` when the SUT did not flip; ``valid_failure`` when the oracle keeps the reference;
        ``semantic_change`` when it reads what the SUT reads (multiclass) or lost the reference (binary, detection);
        ``ambiguous`` when a multiclass oracle reads a third class.
    """
    if not flipped:
        return "no_flip"
    if oracle_result_label == reference_label:
        return "valid_failure"
    if task != "multiclass" or oracle_result_label == sut_result_label:
        return "semantic_change"
    return "ambiguous"
