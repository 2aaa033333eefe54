"""The validity verdict of a test case: does the result still show its origin's class, by judges that never
steered the search, and does it still look like a real input? A flip is not a failure: only a ``valid_failure``
reveals a fault of the SUT, and only on a result its method accepted (a case that found none is ``unaccepted``)."""

from __future__ import annotations

from collections.abc import Sequence
from hynea_pl.verdicts import (
    AMBIGUOUS, DEGRADED, NO_FLIP, NOT_A_CLASS, SEMANTIC_CHANGE, UNACCEPTED, UNDECIDED, VALID_FAILURE, Verdict,
)

__all__ = ["verdict"]


def verdict(flipped: bool, reference_label: int, judge_labels: Sequence[int], sut_result_label: int | None,
            realistic: bool | None = None, accepted: bool | None = None) -> Verdict:
    """One case's verdict.

    Args:
        flipped: the SUT's decision left the origin's on the result as saved (``CaseRecord.flipped``).
        reference_label: the decision the result must keep: the origin's class (multiclass: the conditioning
            class, or the judges' reading of the origin when the origin is unconditional; binary: the SUT's
            decision on the tested attribute of the origin, the case's premise; detection: 1, the SUT detected the
            class in the origin).
        judge_labels: each judge's decision on the result, in the same terms (one entry for a single judge, or for a
            panel that decides together: :func:`hynea_pl.suts.ensemble.panel_decisions`); :data:`~hynea_pl.verdicts.UNDECIDED` and
            :data:`~hynea_pl.verdicts.NOT_A_CLASS` name no class.
        sut_result_label: the SUT's decision on the result, in the same terms (detection: 1 while the class is
            still among its top-k); ``None`` when unknown.
        realistic: whether the result passed the realism (typicality) test; ``None``: no test configured.
        accepted: whether the method's own success criterion held for the result (``CaseRecord.accepted``);
            ``False``: the case ended without a result its method accepted and the result is its best try;
            ``None``: not recorded.
    Returns:
        ``no_flip`` when the SUT did not flip; ``unaccepted`` when it flipped on a result its method did not
        accept (``accepted`` is ``False``: never a failure, whatever the judges read); ``ambiguous`` when the
        judges are split or undecided; ``degraded`` when they read no class ("not a digit"); ``semantic_change``
        when they read what the SUT reads on the result, or any other class than the reference (the image changed,
        the SUT was right: never a failure); ``valid_failure`` when they keep the reference and the result is
        realistic, ``degraded`` when they keep it but the result is off the real-input manifold (a scribble the
        class can still be read in).
    """
    if not flipped:
        return NO_FLIP
    if accepted is False:
        return UNACCEPTED
    if not judge_labels:
        raise ValueError("a verdict needs at least one judge's label")
    if len(set(judge_labels)) > 1:
        return AMBIGUOUS
    label = judge_labels[0]
    if label == UNDECIDED:
        return AMBIGUOUS
    if label == NOT_A_CLASS:
        return DEGRADED
    if label == reference_label and (sut_result_label is None or label != sut_result_label):
        return DEGRADED if realistic is False else VALID_FAILURE
    return SEMANTIC_CHANGE
