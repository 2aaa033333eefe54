"""A run's cost metrics (HyNeA 4.2.2), summarised over its cases: SUT evaluations and runtime per test case."""

from __future__ import annotations

from hynea_pl.metrics._base import SummaryStatistics

__all__ = ["Runtime", "SUTEvaluations"]


class SUTEvaluations(SummaryStatistics):
    """The computational budget: SUT evaluations per test case (``update(sut_evals)``). Lower is better."""

    higher_is_better = False


class Runtime(SummaryStatistics):
    """Runtime per test case in seconds (``update(runtime_s)``). Lower is better."""

    higher_is_better = False
