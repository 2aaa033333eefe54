"""The validity oracle's verdict names, defined once (:data:`hynea_pl.schema.Verdict` is this ``Verdict``).

Every other module names a verdict through these constants, never by a string of its own:

- ``valid_failure``: the SUT flipped and the judges still read the origin's class (and, for judges with no "not a
  digit" answer, the result passes the realism test): a real fault of the SUT;
- ``degraded``: the SUT flipped and the judges read no class in the result ("not a digit": a scribble, a broken
  stroke), or judges with no such answer read the origin's class in a result that fails the realism test;
- ``semantic_change``: the SUT flipped and the judges read another class (the image really changed class);
- ``ambiguous``: the SUT flipped and the judges are undecided (no reading reaches their vote's threshold, or, for
  judges that must be unanimous, they are split);
- ``unaccepted``: the SUT flipped on a result its method did not accept (the case found none; its best try is kept
  for inspection): never a failure, whatever the judges read;
- ``no_flip``: the SUT's decision did not leave the origin's.

A run's metrics row has one rate column per verdict of a flip (:data:`RATE_KEYS`: ``valid_failure_rate``, ...).

The stability verdict (:mod:`hynea_pl.evaluation.stability`) asks whether a flip holds on semantics-preserving
variants of the saved result; its two rates, over all cases: :data:`STABLE_FLIP_RATE` (flips that hold on every
variant) and :data:`STABLE_FAILURE_RATE` (valid failures that hold on every variant).

:data:`VERDICT_CEILING` is no rate of a run's cases: the fraction of real test images of a known class (on the zoo,
all 10,000 MNIST test digits) that the run's verdict calls valid (judges unanimous on their class, realistic), the
ceiling of its ``valid_failure_rate`` (:mod:`hynea_pl.evaluation.ceiling`); ``None`` where it was not measured.
"""

from __future__ import annotations

from typing import Literal, get_args

#: A reading of the judges that names no class: they are undecided (no class reaches their vote's threshold, or, asked
#: to be unanimous, they are split) ...
UNDECIDED = -1
#: ... or they read that the image shows none of the task's classes (the zoo judges' "not a digit" answer).
NOT_A_CLASS = -2


def reading_name(label: int, short: bool = False) -> str:
    """How a judge's reading is written for people: the class, ``undecided`` or ``not a digit`` (``short``: ``?`` or
    ``x``, for a caption)."""
    names = {UNDECIDED: "?", NOT_A_CLASS: "x"} if short else {UNDECIDED: "undecided", NOT_A_CLASS: "not a digit"}
    return names.get(int(label), str(int(label)))


Verdict = Literal["valid_failure", "degraded", "semantic_change", "ambiguous", "unaccepted", "no_flip"]
#: Every verdict, in the order above.
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
VALID_FAILURE, DEGRADED, SEMANTIC_CHANGE, AMBIGUOUS, UNACCEPTED, NO_FLIP = VERDICTS
#: The verdicts of a flip (all but ``no_flip``).
FLIP_VERDICTS: tuple[Verdict, ...] = (VALID_FAILURE, DEGRADED, SEMANTIC_CHANGE, AMBIGUOUS, UNACCEPTED)
#: The metrics row's column of each flip verdict's rate over all cases: ``valid_failure_rate``, ``degraded_rate``, ...
RATE_KEYS: dict[Verdict, str] = {verdict: f"{verdict}_rate" for verdict in FLIP_VERDICTS}
VALID_FAILURE_RATE = RATE_KEYS[VALID_FAILURE]
#: The stability verdict's rates over all cases (see above).
STABLE_FLIP_RATE = "stable_flip_rate"
STABLE_FAILURE_RATE = "stable_failure_rate"
#: The verdict's valid rate on real test images (see above).
VERDICT_CEILING = "verdict_ceiling"

__all__ = ["AMBIGUOUS", "DEGRADED", "FLIP_VERDICTS", "NOT_A_CLASS", "NO_FLIP", "RATE_KEYS", "UNDECIDED",
           "reading_name", "SEMANTIC_CHANGE", "STABLE_FAILURE_RATE",
           "STABLE_FLIP_RATE", "UNACCEPTED", "VALID_FAILURE", "VALID_FAILURE_RATE", "VERDICTS", "VERDICT_CEILING",
           "Verdict"]
